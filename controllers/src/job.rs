//! The Job controller: runs pods until `completions` of them succeeded, at most `parallelism`
//! at a time, and gives up after `backoffLimit` failures (failed pods, or container restarts
//! under restartPolicy OnFailure) or `activeDeadlineSeconds`. Reports active, ready,
//! succeeded, failed, startTime, completionTime and the Complete/Failed conditions.
//!
//! The decision is the pure [`plan`]; [`JobController`] does the I/O.

use std::sync::Arc;
use std::time::Duration;

use api::client::Client;
use api::event_sink::EventSink;
use api::informer::{Informer, Store};
use api::resources;
use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus};
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;
use tracing::info;

use crate::events::{reference, Recorder};
use crate::expectations::Expectations;
use crate::owned_pods;
use crate::owners::{controller_ref, now_seconds, seconds, split_key, time_at};
use crate::pod_control::PodControl;
use crate::pods;
use crate::queue::WorkQueue;
use crate::replicaset::BURST;
use crate::worker::{outcome, write_status, Outcome, ReconcileError, Reconciler};

/// What one sync of a Job should do.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub create: usize,
    /// Names of active pods to delete.
    pub delete: Vec<String>,
    pub status: JobStatus,
    pub recheck_after: Option<Duration>,
}

fn finished(status: Option<&JobStatus>) -> bool {
    status
        .and_then(|s| s.conditions.as_deref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
        })
}

fn condition(kind: &str, reason: &str, message: &str, now: i64) -> JobCondition {
    JobCondition {
        type_: kind.into(),
        status: "True".into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_probe_time: Some(time_at(now)),
        last_transition_time: Some(time_at(now)),
    }
}

/// The event of a Job that `status` finishes (it was not finished `before`), as
/// kube-controller-manager records it: (warning, reason, message).
pub fn finish_event<'a>(
    before: Option<&JobStatus>,
    status: &'a JobStatus,
) -> Option<(bool, &'a str, &'a str)> {
    if finished(before) {
        return None;
    }
    let conditions = status.conditions.as_deref().unwrap_or_default();
    let is = |c: &&JobCondition, kind: &str| c.type_ == kind && c.status == "True";
    if conditions.iter().any(|c| is(&c, "Complete")) {
        return Some((false, "Completed", "Job completed"));
    }
    let failed = conditions.iter().find(|c| is(c, "Failed"))?;
    Some((
        true,
        failed.reason.as_deref().unwrap_or("Failed"),
        failed.message.as_deref().unwrap_or_default(),
    ))
}

/// Decides the pods to create or delete and the status of `job` given the pods it controls.
pub fn plan(job: &Job, owned: &[&Pod], expectations_met: bool, now: i64) -> Plan {
    let spec = job.spec.clone().unwrap_or_default();
    let previous = job.status.clone().unwrap_or_default();
    let parallelism = spec.parallelism.unwrap_or(1).max(0);
    let completions = spec.completions;
    let backoff_limit = spec.backoff_limit.unwrap_or(6);
    let on_failure = spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        == Some("OnFailure");
    let mut active: Vec<&Pod> = owned
        .iter()
        .copied()
        .filter(|p| pods::is_active(p))
        .collect();
    let succeeded = owned
        .iter()
        .filter(|p| pods::phase(p) == "Succeeded")
        .count() as i32;
    let mut failed = owned.iter().filter(|p| pods::phase(p) == "Failed").count() as i32;
    if on_failure {
        failed += active.iter().map(|p| pods::restarts(p)).sum::<i32>();
    }
    let ready = active.iter().filter(|p| pods::is_ready(p)).count() as i32;
    let start = previous.start_time.clone().unwrap_or_else(|| time_at(now));
    let mut status = JobStatus {
        active: Some(active.len() as i32),
        ready: Some(ready),
        succeeded: Some(succeeded),
        failed: Some(failed),
        terminating: Some(
            owned
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_some() && !pods::is_terminal(p))
                .count() as i32,
        ),
        start_time: Some(start.clone()),
        completion_time: previous.completion_time.clone(),
        conditions: previous.conditions.clone(),
        ..Default::default()
    };
    let mut create = 0;
    let mut delete = Vec::new();
    let mut recheck_after = None;
    let names = |pods: &[&Pod]| -> Vec<String> {
        pods.iter()
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect()
    };
    if finished(job.status.as_ref()) {
        // Finished: nothing runs any more.
        delete = names(&active);
    } else {
        let suspended = spec.suspend == Some(true);
        let deadline = spec.active_deadline_seconds.map(|d| seconds(&start) + d);
        let finish = |status: &mut JobStatus, kind: &str, reason: &str, message: &str| {
            let conditions = status.conditions.get_or_insert_with(Vec::new);
            if kind == "Complete" {
                conditions.push(condition("SuccessCriteriaMet", reason, message, now));
                status.completion_time = Some(time_at(now));
            } else {
                conditions.push(condition("FailureTarget", reason, message, now));
            }
            conditions.push(condition(kind, reason, message, now));
        };
        let complete = match completions {
            Some(c) => succeeded >= c,
            None => succeeded > 0 && active.is_empty(),
        };
        if failed > backoff_limit {
            finish(
                &mut status,
                "Failed",
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
            );
            delete = names(&active);
        } else if deadline.is_some_and(|d| d <= now) {
            finish(
                &mut status,
                "Failed",
                "DeadlineExceeded",
                "Job was active longer than specified deadline",
            );
            delete = names(&active);
        } else if complete {
            finish(
                &mut status,
                "Complete",
                "CompletionsReached",
                "Reached expected number of succeeded pods",
            );
            delete = names(&active);
        } else if suspended {
            delete = names(&active);
        } else if expectations_met {
            let wanted = match completions {
                Some(c) => parallelism.min(c - succeeded),
                None if succeeded > 0 => 0,
                None => parallelism,
            }
            .max(0) as usize;
            if active.len() < wanted {
                create = (wanted - active.len()).min(BURST);
            } else if active.len() > wanted {
                // Newest first.
                active.sort_by_key(|p| {
                    std::cmp::Reverse(p.metadata.creation_timestamp.as_ref().map(seconds))
                });
                delete = names(&active[..active.len() - wanted]);
            }
            if let Some(d) = deadline {
                recheck_after = Some(Duration::from_secs((d - now).max(1) as u64));
            }
        }
    }
    if status.active == Some(0) && finished(Some(&status)) {
        status.ready = Some(0);
    }
    Plan {
        create,
        delete,
        status,
        recheck_after,
    }
}

/// The Job controller's reconciler.
pub struct JobController {
    client: Client,
    pods_control: PodControl,
    jobs: Store<Job>,
    pods: Store<Pod>,
    expectations: Arc<Expectations>,
}

impl JobController {
    pub fn new(
        client: Client,
        jobs: &mut Informer<Job>,
        pods: &mut Informer<Pod>,
        events: EventSink,
    ) -> (Arc<JobController>, WorkQueue) {
        let queue = WorkQueue::new(Duration::from_millis(10), Duration::from_secs(60));
        let expectations = Arc::new(Expectations::default());
        pods.add_index(pods::BY_CONTROLLER, pods::controller_uid);
        let controller = Arc::new(JobController {
            pods_control: PodControl::new(client.clone(), Recorder::new(events, "job-controller")),
            client,
            jobs: jobs.store(),
            pods: pods.store(),
            expectations: expectations.clone(),
        });
        tokio::spawn(owned_pods::feed(
            "Job",
            jobs.subscribe(),
            pods.subscribe(),
            queue.clone(),
            expectations,
        ));
        (controller, queue)
    }
}

impl crate::manager::HasCaches for JobController {
    fn caches_synced(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send>> {
        let (a, b) = (self.jobs.clone(), self.pods.clone());
        Box::pin(async move { a.wait_synced().await && b.wait_synced().await })
    }
}

impl Reconciler for JobController {
    async fn reconcile(&self, key: &str) -> Result<Outcome, ReconcileError> {
        let Some(job) = self.jobs.get(key) else {
            self.expectations.forget(key);
            return Ok(Outcome::Done);
        };
        if job.metadata.deletion_timestamp.is_some() {
            return Ok(Outcome::Done);
        }
        let (namespace, name) = split_key(key);
        let namespace = namespace.unwrap_or_default();
        let uid = job.metadata.uid.clone().unwrap_or_default();
        // Expectations first, then the pods: every pod observed by then is already in the cache
        // (the informer stores an object before it reports it), so a sync never misses a pod it
        // counted as seen and creates it again.
        let met = self.expectations.satisfied(key);
        let candidates = owned_pods::controlled_pods(&self.pods, namespace, &uid);
        let owned: Vec<&Pod> = candidates.iter().map(|p| p.as_ref()).collect();
        let plan = plan(&job, &owned, met, now_seconds());
        let mut first_error = None;
        let object = reference("batch/v1", "Job", &job.metadata);
        if plan.create > 0 {
            self.expectations.expect(key, plan.create, []);
            let template = job
                .spec
                .as_ref()
                .map(|s| s.template.clone())
                .unwrap_or_default();
            let owner = controller_ref("batch/v1", "Job", &job.metadata);
            let labels = [
                ("batch.kubernetes.io/controller-uid", uid.as_str()),
                ("batch.kubernetes.io/job-name", name),
                ("controller-uid", uid.as_str()),
                ("job-name", name),
            ];
            let pod = pods::from_template(&template, namespace, name, owner, &labels);
            if let Err(e) = self
                .pods_control
                .create(&object, vec![pod; plan.create], || {
                    self.expectations.creation_observed(key)
                })
                .await
            {
                first_error = Some(e);
            }
        }
        if let Err(e) = self
            .pods_control
            .delete(&object, namespace, &plan.delete, |_| {})
            .await
        {
            first_error.get_or_insert(e);
        }
        if job.status.as_ref() != Some(&plan.status) {
            let jobs = resources::find("batch", "v1", "jobs").expect("jobs");
            write_status(&self.client, jobs, namespace, name, json!(plan.status)).await?;
            if let Some((warning, reason, message)) =
                finish_event(job.status.as_ref(), &plan.status)
            {
                info!(succeeded = ?plan.status.succeeded, failed = ?plan.status.failed, "job finished");
                self.pods_control
                    .events()
                    .record(object, warning, reason, message);
            }
        }
        outcome(first_error, plan.recheck_after)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_objects::{meta, pod, template};
    use k8s_openapi::api::batch::v1::JobSpec;

    fn job(completions: Option<i32>, parallelism: i32, backoff: i32) -> Job {
        let mut t = template("busybox");
        t.spec.as_mut().expect("spec").restart_policy = Some("Never".into());
        Job {
            metadata: meta("pi", "uid-pi"),
            spec: Some(JobSpec {
                completions,
                parallelism: Some(parallelism),
                backoff_limit: Some(backoff),
                template: t,
                ..Default::default()
            }),
            status: None,
        }
    }

    fn has(status: &JobStatus, kind: &str) -> bool {
        status
            .conditions
            .as_deref()
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == kind && c.status == "True")
    }

    #[test]
    fn runs_up_to_parallelism_until_completions() {
        let j = job(Some(5), 2, 6);
        let p = plan(&j, &[], true, 100);
        assert_eq!(p.create, 2);
        assert_eq!(p.status.start_time, Some(time_at(100)));
        let done: Vec<Pod> = (0..4)
            .map(|i| pod(&format!("p{i}"), &j.metadata, "Job", "Succeeded", false))
            .collect();
        let refs: Vec<&Pod> = done.iter().collect();
        // 4 of 5 succeeded: one more, not two.
        let p = plan(&j, &refs, true, 110);
        assert_eq!(p.create, 1);
        assert_eq!(p.status.succeeded, Some(4));
        let fifth = pod("p4", &j.metadata, "Job", "Succeeded", false);
        let mut all = refs.clone();
        all.push(&fifth);
        let p = plan(&j, &all, true, 120);
        assert_eq!(p.create, 0);
        assert!(has(&p.status, "Complete"));
        assert_eq!(p.status.completion_time, Some(time_at(120)));
        assert_eq!(
            finish_event(j.status.as_ref(), &p.status),
            Some((false, "Completed", "Job completed"))
        );
    }

    #[test]
    fn fails_after_the_backoff_limit() {
        let j = job(Some(3), 1, 1);
        let f1 = pod("f1", &j.metadata, "Job", "Failed", false);
        let p = plan(&j, &[&f1], true, 100);
        assert_eq!(p.create, 1, "one failure is within the limit");
        let f2 = pod("f2", &j.metadata, "Job", "Failed", false);
        let running = pod("r", &j.metadata, "Job", "Running", true);
        let p = plan(&j, &[&f1, &f2, &running], true, 100);
        assert!(has(&p.status, "Failed"));
        assert_eq!(p.delete, ["r"]);
        assert_eq!(p.status.failed, Some(2));
        assert_eq!(
            finish_event(None, &p.status),
            Some((
                true,
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit"
            ))
        );
        assert_eq!(finish_event(Some(&p.status), &p.status), None);
    }

    #[test]
    fn restarts_count_as_failures_under_on_failure() {
        let mut j = job(Some(1), 1, 2);
        j.spec
            .as_mut()
            .expect("spec")
            .template
            .spec
            .as_mut()
            .expect("spec")
            .restart_policy = Some("OnFailure".into());
        let mut p1 = pod("p", &j.metadata, "Job", "Running", false);
        p1.status.as_mut().expect("status").container_statuses =
            Some(vec![k8s_openapi::api::core::v1::ContainerStatus {
                restart_count: 3,
                ..Default::default()
            }]);
        assert!(has(&plan(&j, &[&p1], true, 100).status, "Failed"));
    }
}
