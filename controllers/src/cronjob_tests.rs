use super::*;
use crate::test_objects::{meta, template};
use k8s_openapi::api::batch::v1::{CronJobSpec, JobCondition, JobSpec, JobStatus, JobTemplateSpec};

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .expect("time")
        .with_timezone(&Utc)
}

/// A CronJob created at 10:00:00 UTC on 1 January 2026.
fn cron_job(schedule: &str, policy: &str) -> CronJob {
    let mut m = meta("tick", "uid-tick");
    m.creation_timestamp = Some(time(at("2026-01-01T10:00:00Z")));
    CronJob {
        metadata: m,
        spec: CronJobSpec {
            schedule: schedule.into(),
            concurrency_policy: Some(policy.into()),
            suspend: Some(false),
            successful_jobs_history_limit: Some(3),
            failed_jobs_history_limit: Some(1),
            job_template: JobTemplateSpec {
                metadata: None,
                spec: Some(JobSpec {
                    template: template("busybox"),
                    ..Default::default()
                }),
            },
            ..Default::default()
        },
        status: None,
    }
}

/// A Job of the CronJob for `scheduled`, finished as `finished` says ("" for still running).
fn job(cj: &CronJob, scheduled: &str, finished: &str) -> Job {
    let mut j = job_for(cj, at(scheduled));
    j.metadata.uid = Some(format!("uid-{}", j.metadata.name.as_deref().unwrap_or("")));
    j.status = Some(JobStatus {
        start_time: Some(time(at(scheduled))),
        completion_time: (finished == "Complete")
            .then(|| time(at(scheduled) + chrono::Duration::seconds(5))),
        conditions: (!finished.is_empty()).then(|| {
            vec![JobCondition {
                type_: finished.into(),
                status: "True".into(),
                ..Default::default()
            }]
        }),
        ..Default::default()
    });
    j
}

fn running(cj: &mut CronJob, jobs: &[&Job], scheduled: &str) {
    cj.status = Some(CronJobStatus {
        active: Some(jobs.iter().map(|j| reference(j)).collect()),
        last_schedule_time: Some(time(at(scheduled))),
        ..Default::default()
    });
}

#[test]
fn nothing_is_due_before_the_first_time() {
    let cj = cron_job("*/1 * * * *", "Allow");
    let p = plan(&cj, &[], at("2026-01-01T10:00:30Z"));
    assert_eq!(p.create, None);
    // Looks again just after 10:01.
    assert_eq!(p.requeue_after, Some(Duration::from_millis(30_100)));
}

#[test]
fn a_due_time_starts_a_job_named_by_its_minute() {
    let cj = cron_job("*/1 * * * *", "Allow");
    let p = plan(&cj, &[], at("2026-01-01T10:01:00.2Z"));
    assert_eq!(p.create, Some(at("2026-01-01T10:01:00Z")));
    let j = job_for(&cj, at("2026-01-01T10:01:00Z"));
    assert_eq!(j.metadata.name.as_deref(), Some("tick-29454361"));
    assert_eq!(
        j.metadata.annotations.as_ref().expect("annotations")[SCHEDULED_TIMESTAMP],
        "2026-01-01T10:01:00Z"
    );
    let owner = &j.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("CronJob", Some(true))
    );
}

#[test]
fn only_the_most_recent_missed_time_runs() {
    let cj = cron_job("*/1 * * * *", "Allow");
    let p = plan(&cj, &[], at("2026-01-01T12:30:10Z"));
    assert_eq!(p.create, Some(at("2026-01-01T12:30:00Z")));
    // Unless the starting deadline has passed.
    let mut late = cron_job("0 * * * *", "Allow");
    late.spec.starting_deadline_seconds = Some(30);
    let p = plan(&late, &[], at("2026-01-01T11:00:40Z"));
    assert_eq!(p.create, None);
    let p = plan(&late, &[], at("2026-01-01T11:00:20Z"));
    assert_eq!(p.create, Some(at("2026-01-01T11:00:00Z")));
}

#[test]
fn a_time_already_run_is_not_run_again() {
    let mut cj = cron_job("*/1 * * * *", "Allow");
    let j = job(&cj, "2026-01-01T10:01:00Z", "");
    running(&mut cj, &[&j], "2026-01-01T10:01:00Z");
    let p = plan(&cj, &[&j], at("2026-01-01T10:01:30Z"));
    assert_eq!(p.create, None);
    assert_eq!(p.status.active.as_ref().map(Vec::len), Some(1));
    // Allow: the next minute runs beside it.
    let p = plan(&cj, &[&j], at("2026-01-01T10:02:00Z"));
    assert_eq!(p.create, Some(at("2026-01-01T10:02:00Z")));
}

#[test]
fn forbid_skips_while_a_job_runs_and_replace_deletes_it() {
    let mut cj = cron_job("*/1 * * * *", "Forbid");
    let j = job(&cj, "2026-01-01T10:01:00Z", "");
    running(&mut cj, &[&j], "2026-01-01T10:01:00Z");
    let p = plan(&cj, &[&j], at("2026-01-01T10:02:00Z"));
    assert_eq!((p.create, p.skipped), (None, Some("JobAlreadyActive")));
    let forbidden = "Not starting job because prior execution is running and concurrency policy \
                     is Forbid";
    assert_eq!(
        p.events,
        [(false, "JobAlreadyActive", forbidden.to_string())]
    );
    // When the job finishes, the missed time runs.
    let done = job(&cj, "2026-01-01T10:01:00Z", "Complete");
    let p = plan(&cj, &[&done], at("2026-01-01T10:02:30Z"));
    assert_eq!(p.create, Some(at("2026-01-01T10:02:00Z")));
    assert_eq!(
        p.events,
        [(
            false,
            "SawCompletedJob",
            "Saw completed job: tick-29454361, condition: Complete".to_string()
        )]
    );
    assert_eq!(p.status.active, None);
    assert_eq!(
        p.status.last_successful_time,
        Some(time(at("2026-01-01T10:01:05Z")))
    );

    cj.spec.concurrency_policy = Some("Replace".into());
    let p = plan(&cj, &[&j], at("2026-01-01T10:02:00Z"));
    assert_eq!(p.create, Some(at("2026-01-01T10:02:00Z")));
    assert_eq!(p.delete, ["tick-29454361"]);
    assert_eq!(p.status.active, None);
}

#[test]
fn suspend_and_bad_time_zones_start_nothing() {
    let mut cj = cron_job("*/1 * * * *", "Allow");
    cj.spec.suspend = Some(true);
    assert_eq!(plan(&cj, &[], at("2026-01-01T10:05:00Z")).create, None);
    cj.spec.suspend = Some(false);
    cj.spec.time_zone = Some("Mars/Olympus".into());
    let p = plan(&cj, &[], at("2026-01-01T10:05:00Z"));
    assert_eq!((p.create, p.skipped), (None, Some("UnknownTimeZone")));
}

#[test]
fn time_zones_pick_the_wall_clock_time() {
    let mut cj = cron_job("0 19 * * *", "Allow");
    cj.spec.time_zone = Some("Asia/Tokyo".into());
    // 19:00 in Tokyo is 10:00 UTC: the next one after the creation is the next day's.
    let p = plan(&cj, &[], at("2026-01-02T10:00:01Z"));
    assert_eq!(p.create, Some(at("2026-01-02T10:00:00Z")));
    let j = job_for(&cj, at("2026-01-02T10:00:00Z"));
    assert_eq!(
        j.metadata.annotations.as_ref().expect("annotations")[SCHEDULED_TIMESTAMP],
        "2026-01-02T19:00:00+09:00"
    );
}

#[test]
fn history_limits_delete_the_oldest_finished_jobs() {
    let cj = cron_job("*/1 * * * *", "Allow");
    let jobs: Vec<Job> = (1..=5)
        .map(|m| job(&cj, &format!("2026-01-01T10:0{m}:00Z"), "Complete"))
        .chain((6..=7).map(|m| job(&cj, &format!("2026-01-01T10:0{m}:00Z"), "Failed")))
        .collect();
    let refs: Vec<&Job> = jobs.iter().collect();
    let p = plan(&cj, &refs, at("2026-01-01T10:07:30Z"));
    assert_eq!(
        p.delete,
        ["tick-29454361", "tick-29454362", "tick-29454366"],
        "two oldest successes and the older failure"
    );
}
