//! The CronJob controller: at each time its schedule names (in its `timeZone`, UTC without one)
//! it creates a Job from `jobTemplate`, named `<cronjob>-<scheduled minutes since the epoch>` so
//! a time is never run twice, with the `batch.kubernetes.io/cronjob-scheduled-timestamp`
//! annotation and a controller reference. As kube-controller-manager's: the most recent missed
//! time runs (late) unless `startingDeadlineSeconds` has passed; `Forbid` skips a time while a
//! Job is still active, `Replace` deletes the active Jobs first; `suspend` stops new runs;
//! finished Jobs beyond `successfulJobsHistoryLimit` / `failedJobsHistoryLimit` are deleted
//! oldest first; status `active`, `lastScheduleTime`, `lastSuccessfulTime`.
//!
//! The decision is the pure [`plan`], which takes "now"; [`CronJobController`] does the I/O.

use std::sync::Arc;
use std::time::Duration;

use api::client::{Client, DeleteParams, Patch};
use api::cron::{time_zone, Schedule};
use api::event_sink::EventSink;
use api::informer::{Informer, InformerEvent, Store};
use api::resources;
use chrono::{DateTime, SecondsFormat, Utc};
use k8s_openapi::api::batch::v1::{CronJob, CronJobStatus, Job};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tracing::{debug, info};

use crate::events::{error_text, Recorder};
use crate::owners::{controlled_by, controller_of, controller_ref, key_of, split_key};
use crate::queue::WorkQueue;
use crate::worker::{Outcome, ReconcileError, Reconciler};

/// The annotation carrying a Job's scheduled time (RFC 3339, in the CronJob's zone).
pub const SCHEDULED_TIMESTAMP: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";
/// The jobs informer's index of Jobs by their controller's uid.
pub const JOBS_BY_CONTROLLER: &str = "controller-uid";
/// How long after a scheduled time the controller looks (Kubernetes' `nextScheduleDelta`).
const DELTA: Duration = Duration::from_millis(100);

/// What one sync of a CronJob should do.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The scheduled time to start a Job for.
    pub create: Option<DateTime<Utc>>,
    /// Jobs to delete: the active ones a `Replace` run supersedes, and finished ones beyond the
    /// history limits.
    pub delete: Vec<String>,
    /// The status before any Job this sync creates.
    pub status: CronJobStatus,
    /// Why no Job starts although one is due or wanted (Kubernetes' event reason).
    pub skipped: Option<&'static str>,
    /// The events this sync records before its deletions and creation: (warning, reason,
    /// message), worded as kube-controller-manager's.
    pub events: Vec<(bool, &'static str, String)>,
    pub requeue_after: Option<Duration>,
}

/// `<cronjob>-<scheduled minutes since the epoch>`.
pub fn job_name(cron_job: &str, scheduled: DateTime<Utc>) -> String {
    format!("{cron_job}-{}", scheduled.timestamp().div_euclid(60))
}

fn time(t: DateTime<Utc>) -> Time {
    crate::owners::time_at(t.timestamp())
}

fn instant(t: &Time) -> DateTime<Utc> {
    DateTime::from_timestamp(crate::owners::seconds(t), 0).unwrap_or_default()
}

fn condition(job: &Job, kind: &str) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == kind && c.status == "True"))
}

/// Complete or Failed.
pub fn is_finished(job: &Job) -> bool {
    condition(job, "Complete") || condition(job, "Failed")
}

/// The schedule in the CronJob's zone, or why it cannot run (event reason).
fn schedule_of(cj: &CronJob) -> Result<Schedule, &'static str> {
    let spec = Some(&cj.spec);
    let schedule = Schedule::parse(spec.map(|s| s.schedule.as_str()).unwrap_or_default())
        .map_err(|_| "UnparseableSchedule")?;
    match spec.and_then(|s| s.time_zone.as_deref()) {
        Some(zone) => Ok(schedule.in_zone(time_zone(zone).map_err(|_| "UnknownTimeZone")?)),
        None => Ok(schedule),
    }
}

/// `mostRecentScheduleTime`: (the time scheduling counts from, the latest scheduled time at or
/// before `now` after it, if any). With `deadline`, times older than startingDeadlineSeconds
/// are not considered.
fn most_recent(
    cj: &CronJob,
    schedule: &Schedule,
    now: DateTime<Utc>,
    deadline: bool,
) -> (DateTime<Utc>, Option<DateTime<Utc>>) {
    let created = cj.metadata.creation_timestamp.as_ref().map(instant);
    let mut earliest = cj
        .status
        .as_ref()
        .and_then(|s| s.last_schedule_time.as_ref())
        .map(instant)
        .or(created)
        .unwrap_or(now);
    if let Some(seconds) = Some(&cj.spec)
        .and_then(|s| s.starting_deadline_seconds)
        .filter(|_| deadline)
    {
        earliest = earliest.max(now - chrono::Duration::seconds(seconds));
    }
    let Some(t1) = schedule.next(earliest).filter(|t| *t <= now) else {
        return (earliest, None);
    };
    let Some(t2) = schedule.next(t1).filter(|t| *t <= now) else {
        return (earliest, Some(t1));
    };
    // Many missed: walk from close to now (by the interval between the first two), never from
    // further back than needed.
    let interval = (t2 - t1).num_seconds().max(1);
    let missed = (now - t1).num_seconds() / interval + 1;
    let mut cursor = if missed > 2 {
        t1 + chrono::Duration::seconds((missed - 2) * interval)
    } else {
        t2
    };
    let mut latest = t2;
    while let Some(n) = schedule.next(cursor).filter(|n| *n <= now) {
        latest = latest.max(n);
        cursor = n;
    }
    (earliest, Some(latest))
}

/// How long until the run after the most recent one (plus [`DELTA`]).
fn until_next(cj: &CronJob, schedule: &Schedule, now: DateTime<Utc>) -> Option<Duration> {
    let (earliest, recent) = most_recent(cj, schedule, now, false);
    let next = schedule.next(recent.unwrap_or(earliest))?;
    let wait = (next - now).to_std().unwrap_or_default();
    Some(wait + DELTA)
}

fn reference(job: &Job) -> ObjectReference {
    ObjectReference {
        api_version: Some("batch/v1".into()),
        kind: Some("Job".into()),
        name: job.metadata.name.clone(),
        namespace: job.metadata.namespace.clone(),
        uid: job.metadata.uid.clone(),
        resource_version: job.metadata.resource_version.clone(),
        field_path: None,
    }
}

/// Finished Jobs beyond the history limits, oldest (by start time) first.
fn beyond_history(cj: &CronJob, jobs: &[&Job]) -> Vec<String> {
    let spec = Some(&cj.spec);
    let mut delete = Vec::new();
    for (kind, limit) in [
        (
            "Complete",
            spec.and_then(|s| s.successful_jobs_history_limit),
        ),
        ("Failed", spec.and_then(|s| s.failed_jobs_history_limit)),
    ] {
        let Some(limit) = limit else { continue };
        let mut finished: Vec<&Job> = jobs
            .iter()
            .copied()
            .filter(|j| j.metadata.deletion_timestamp.is_none() && condition(j, kind))
            .collect();
        finished.sort_by_key(|j| {
            (
                j.status
                    .as_ref()
                    .and_then(|s| s.start_time.as_ref())
                    .is_none(),
                j.status
                    .as_ref()
                    .and_then(|s| s.start_time.as_ref())
                    .map(instant),
                j.metadata.name.clone(),
            )
        });
        let extra = finished
            .len()
            .saturating_sub(usize::try_from(limit).unwrap_or(0));
        delete.extend(
            finished[..extra]
                .iter()
                .map(|j| j.metadata.name.clone().unwrap_or_default()),
        );
    }
    delete
}

/// Decides what a CronJob does at `now`, given the Jobs it controls.
pub fn plan(cj: &CronJob, jobs: &[&Job], now: DateTime<Utc>) -> Plan {
    let mut status = cj.status.clone().unwrap_or_default();
    let mut active = status.active.take().unwrap_or_default();
    let mut events = Vec::new();
    // Finished Jobs leave the active list; successes move lastSuccessfulTime.
    for job in jobs {
        let uid = job.metadata.uid.as_deref();
        let listed = active.iter().any(|r| r.uid.as_deref() == uid);
        if listed && is_finished(job) {
            active.retain(|r| r.uid.as_deref() != uid);
            let kind = if condition(job, "Complete") {
                "Complete"
            } else {
                "Failed"
            };
            let name = job.metadata.name.as_deref().unwrap_or_default();
            let message = format!("Saw completed job: {name}, condition: {kind}");
            events.push((false, "SawCompletedJob", message));
        }
        if condition(job, "Complete") {
            if let Some(done) = job.status.as_ref().and_then(|s| s.completion_time.as_ref()) {
                if status
                    .last_successful_time
                    .as_ref()
                    .is_none_or(|t| instant(t) < instant(done))
                {
                    status.last_successful_time = Some(done.clone());
                }
            }
        }
    }
    // Listed Jobs that no longer exist.
    active.retain(|r| jobs.iter().any(|j| j.metadata.uid == r.uid));
    let mut delete = beyond_history(cj, jobs);
    let mut plan = Plan {
        create: None,
        delete: Vec::new(),
        status: CronJobStatus::default(),
        skipped: None,
        events,
        requeue_after: None,
    };
    let spec = Some(&cj.spec);
    let suspended = spec.and_then(|s| s.suspend) == Some(true);
    if cj.metadata.deletion_timestamp.is_none() && !suspended {
        match schedule_of(cj) {
            Err(reason) => plan.skipped = Some(reason),
            Ok(schedule) => {
                plan.requeue_after = until_next(cj, &schedule, now);
                let (_, due) = most_recent(cj, &schedule, now, true);
                if let Some(due) = due {
                    let name = job_name(cj.metadata.name.as_deref().unwrap_or_default(), due);
                    let too_late = spec
                        .and_then(|s| s.starting_deadline_seconds)
                        .is_some_and(|d| due + chrono::Duration::seconds(d) < now);
                    let done = active.iter().any(|r| r.name.as_deref() == Some(&name))
                        || status.last_schedule_time.as_ref().map(instant) == Some(due);
                    let policy = spec
                        .and_then(|s| s.concurrency_policy.as_deref())
                        .unwrap_or("Allow");
                    if too_late {
                        plan.skipped = Some("MissSchedule");
                        let at = due.format("%a, %d %b %Y %H:%M:%S %z");
                        let message = format!("Missed scheduled time to start a job: {at}");
                        plan.events.push((true, "MissSchedule", message));
                    } else if done {
                    } else if policy == "Forbid" && !active.is_empty() {
                        plan.skipped = Some("JobAlreadyActive");
                        let message = "Not starting job because prior execution is running and \
                                       concurrency policy is Forbid";
                        plan.events
                            .push((false, "JobAlreadyActive", message.to_string()));
                    } else {
                        if policy == "Replace" {
                            delete.extend(active.drain(..).filter_map(|r| r.name));
                        }
                        plan.create = Some(due);
                    }
                }
            }
        }
    }
    delete.sort();
    delete.dedup();
    plan.delete = delete;
    status.active = (!active.is_empty()).then_some(active);
    plan.status = status;
    plan
}

/// The Job for `scheduled`: the template's labels, annotations and spec, the deterministic
/// name, the scheduled-timestamp annotation and a controller reference.
pub fn job_for(cj: &CronJob, scheduled: DateTime<Utc>) -> Job {
    let template = Some(&cj.spec)
        .map(|s| s.job_template.clone())
        .unwrap_or_default();
    let meta = template.metadata.unwrap_or_default();
    let mut annotations = meta.annotations.unwrap_or_default();
    let zone = Some(&cj.spec)
        .and_then(|s| s.time_zone.as_deref())
        .and_then(|z| time_zone(z).ok())
        .unwrap_or(chrono_tz::Tz::UTC);
    annotations.insert(
        SCHEDULED_TIMESTAMP.into(),
        scheduled
            .with_timezone(&zone)
            .to_rfc3339_opts(SecondsFormat::Secs, true),
    );
    Job {
        metadata: ObjectMeta {
            name: Some(job_name(
                cj.metadata.name.as_deref().unwrap_or_default(),
                scheduled,
            )),
            namespace: cj.metadata.namespace.clone(),
            labels: meta.labels,
            annotations: Some(annotations),
            owner_references: Some(vec![controller_ref("batch/v1", "CronJob", &cj.metadata)]),
            ..Default::default()
        },
        spec: template.spec,
        status: None,
    }
}

/// The status as a merge patch: what Go leaves out when empty is written as null, so an emptied
/// active list is cleared rather than kept.
fn status_patch(status: &CronJobStatus) -> Value {
    let mut value = serde_json::to_value(status).unwrap_or(Value::Null);
    if let Some(map) = value.as_object_mut() {
        for key in ["active", "lastScheduleTime", "lastSuccessfulTime"] {
            map.entry(key).or_insert(Value::Null);
        }
    }
    value
}

/// The jobs informer's [`JOBS_BY_CONTROLLER`] index.
pub fn job_controller_uid(job: &Job) -> Option<String> {
    controller_of(&job.metadata).map(|r| r.uid.clone())
}

/// The CronJob controller's reconciler.
pub struct CronJobController {
    client: Client,
    events: Recorder,
    cron_jobs: Store<CronJob>,
    jobs: Store<Job>,
}

impl CronJobController {
    pub fn new(
        client: Client,
        cron_jobs: &mut Informer<CronJob>,
        jobs: &mut Informer<Job>,
        events: EventSink,
    ) -> (Arc<CronJobController>, WorkQueue) {
        let queue = WorkQueue::new(Duration::from_millis(10), Duration::from_secs(60));
        jobs.add_index(JOBS_BY_CONTROLLER, job_controller_uid);
        let controller = Arc::new(CronJobController {
            client,
            events: Recorder::new(events, "cronjob-controller"),
            cron_jobs: cron_jobs.store(),
            jobs: jobs.store(),
        });
        tokio::spawn(feed(cron_jobs.subscribe(), jobs.subscribe(), queue.clone()));
        (controller, queue)
    }
}

/// A CronJob's own events queue it; a Job's queue the CronJob that controls it.
async fn feed(
    mut cron_jobs: mpsc::Receiver<InformerEvent<CronJob>>,
    mut jobs: mpsc::Receiver<InformerEvent<Job>>,
    queue: WorkQueue,
) {
    let owner = |job: &Job| {
        controller_of(&job.metadata)
            .filter(|r| r.kind == "CronJob")
            .map(|r| api::informer::key(job.metadata.namespace.as_deref(), &r.name))
    };
    loop {
        tokio::select! {
            event = cron_jobs.recv() => match event {
                Some(InformerEvent::Added(cj) | InformerEvent::Deleted(cj))
                | Some(InformerEvent::Updated { new: cj, .. }) => queue.add(&key_of(&cj.metadata)),
                None => return,
            },
            event = jobs.recv() => match event {
                Some(InformerEvent::Added(job) | InformerEvent::Deleted(job))
                | Some(InformerEvent::Updated { new: job, .. }) => {
                    if let Some(key) = owner(&job) {
                        queue.add(&key);
                    }
                }
                None => return,
            },
        }
    }
}

impl crate::manager::HasCaches for CronJobController {
    fn caches_synced(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send>> {
        let (a, b) = (self.cron_jobs.clone(), self.jobs.clone());
        Box::pin(async move { a.wait_synced().await && b.wait_synced().await })
    }
}

impl Reconciler for CronJobController {
    async fn reconcile(&self, key: &str) -> Result<Outcome, ReconcileError> {
        let Some(cj) = self.cron_jobs.get(key) else {
            return Ok(Outcome::Done);
        };
        let (namespace, name) = split_key(key);
        let namespace = namespace.unwrap_or_default();
        let uid = cj.metadata.uid.clone().unwrap_or_default();
        let jobs_resource = resources::find("batch", "v1", "jobs").expect("jobs");
        let mut jobs: Vec<Job> = self
            .jobs
            .by_index(JOBS_BY_CONTROLLER, &uid)
            .iter()
            .filter(|j| {
                j.metadata.namespace.as_deref() == Some(namespace)
                    && controlled_by(&j.metadata, &uid)
            })
            .map(|j| j.as_ref().clone())
            .collect();
        // An active Job the cache has not seen yet (just created) is asked for, not dropped.
        let listed = cj
            .status
            .as_ref()
            .and_then(|s| s.active.clone())
            .unwrap_or_default();
        let missing: Vec<ObjectReference> = listed
            .into_iter()
            .filter(|r| !jobs.iter().any(|j| j.metadata.uid == r.uid))
            .collect();
        for missing in missing {
            let job_name = missing.name.as_deref().unwrap_or_default();
            match self
                .client
                .get::<Job>(jobs_resource, Some(namespace), job_name)
                .await
            {
                Ok(job) if job.metadata.uid == missing.uid => jobs.push(job),
                Ok(_) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(ReconcileError::api("get active job")(e)),
            }
        }
        let refs: Vec<&Job> = jobs.iter().collect();
        let now = Utc::now();
        let mut plan = plan(&cj, &refs, now);
        if let Some(reason) = plan.skipped {
            debug!(reason, "no job started");
        }
        let object = crate::events::reference("batch/v1", "CronJob", &cj.metadata);
        for (warning, reason, message) in &plan.events {
            self.events
                .record(object.clone(), *warning, reason, message);
        }
        let background = DeleteParams {
            propagation_policy: Some("Background".into()),
            ..Default::default()
        };
        for job in &plan.delete {
            match self
                .client
                .delete::<Value>(jobs_resource, Some(namespace), job, &background)
                .await
            {
                Ok(_) => {
                    let message = format!("Deleted job {job}");
                    self.events
                        .record(object.clone(), false, "SuccessfulDelete", &message);
                }
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(ReconcileError::api("delete job")(e)),
            }
        }
        if let Some(scheduled) = plan.create {
            let job = job_for(&cj, scheduled);
            let created = match self
                .client
                .create::<Job, Job>(jobs_resource, Some(namespace), &job)
                .await
            {
                Ok(created) => {
                    info!(job = ?created.metadata.name, "created job");
                    let job_name = created.metadata.name.as_deref().unwrap_or_default();
                    let message = format!("Created job {job_name}");
                    self.events
                        .record(object.clone(), false, "SuccessfulCreate", &message);
                    Some(created)
                }
                // Made by an earlier sync whose status write was lost: take it if it is ours.
                Err(e) if e.is_already_exists() => {
                    let job_name = job.metadata.name.as_deref().unwrap_or_default();
                    let existing = self
                        .client
                        .get::<Job>(jobs_resource, Some(namespace), job_name)
                        .await
                        .map_err(ReconcileError::api("get existing job"))?;
                    controlled_by(&existing.metadata, &uid).then_some(existing)
                }
                Err(e) => {
                    let message = format!("Error creating job: {}", error_text(&e));
                    self.events.record(object, true, "FailedCreate", &message);
                    return Err(ReconcileError::api("create job")(e));
                }
            };
            if let Some(created) = created {
                let active = plan.status.active.get_or_insert_with(Vec::new);
                if !active.iter().any(|r| r.uid == created.metadata.uid) {
                    active.push(reference(&created));
                }
                plan.status.last_schedule_time = Some(time(scheduled));
            }
        }
        if cj.status.clone().unwrap_or_default() != plan.status {
            let cron_jobs = resources::find("batch", "v1", "cronjobs").expect("cronjobs");
            let patch = Patch::Merge(json!({ "status": status_patch(&plan.status) }));
            match self
                .client
                .patch_status::<Value>(cron_jobs, Some(namespace), name, &patch)
                .await
            {
                Ok(_) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(ReconcileError::api("update status")(e)),
            }
        }
        Ok(match plan.requeue_after {
            Some(after) => Outcome::RequeueAfter(after),
            None => Outcome::Done,
        })
    }
}

#[cfg(test)]
#[path = "cronjob_tests.rs"]
mod tests;
