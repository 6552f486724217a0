//! CronJobs: the schedule (parsed as the controller will parse it, with the parser's own error
//! words), the time zone, the concurrency policy, history limits, and the Job template, with the
//! messages of Kubernetes' batch validation.

use serde_json::Value;

use super::workloads::validate_job;
use super::{field_of, non_negative, str_of, Cause};

const POLICIES: &[&str] = &["Allow", "Forbid", "Replace"];

/// The longest CronJob name: its Jobs add an 11-character suffix and must stay DNS labels.
const MAX_NAME: usize = 52;

/// `validateCronJobSpec`; `old_spec` is the stored spec on an update (a schedule that already
/// had a `TZ=` prefix may keep it, and an unchanged time zone is not checked again).
pub(super) fn validate_cron_job(spec: &Value, old_spec: Option<&Value>, out: &mut Vec<Cause>) {
    let schedule = str_of(spec, "schedule").unwrap_or_default();
    let time_zone = field_of(spec, "timeZone").and_then(Value::as_str);
    if schedule.is_empty() {
        out.push(Cause::required("spec.schedule", ""));
    } else {
        if let Err(e) = api::cron::Schedule::parse(schedule) {
            out.push(Cause::invalid("spec.schedule", schedule, &e.0));
        }
        let allow_tz = old_spec
            .and_then(|s| str_of(s, "schedule"))
            .is_some_and(|s| s.contains("TZ"));
        if schedule.contains("TZ") {
            if allow_tz && time_zone.is_some() {
                out.push(Cause::invalid(
                    "spec.schedule",
                    schedule,
                    "cannot use both timeZone field and TZ or CRON_TZ in schedule",
                ));
            } else if !allow_tz {
                out.push(Cause::invalid(
                    "spec.schedule",
                    schedule,
                    "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
                ));
            }
        }
    }
    non_negative(spec, "startingDeadlineSeconds", "spec", out);
    let old_zone = old_spec
        .and_then(|s| field_of(s, "timeZone"))
        .and_then(Value::as_str);
    if old_spec.is_none() || old_zone != time_zone {
        if let Some(zone) = time_zone {
            validate_time_zone(zone, out);
        }
    }
    match str_of(spec, "concurrencyPolicy").unwrap_or_default() {
        "Allow" | "Forbid" | "Replace" => {}
        "" => out.push(Cause::required("spec.concurrencyPolicy", "")),
        other => out.push(Cause::not_supported(
            "spec.concurrencyPolicy",
            other,
            POLICIES,
        )),
    }
    // The Job template's spec, checked as a Job's, under spec.jobTemplate.
    let job_spec = field_of(spec, "jobTemplate")
        .and_then(|t| field_of(t, "spec"))
        .unwrap_or(&Value::Null);
    let mut job = Vec::new();
    validate_job(job_spec, &mut job);
    for mut cause in job {
        if let Some(rest) = cause.field.strip_prefix("spec.") {
            cause.field = format!("spec.jobTemplate.spec.{rest}");
        }
        out.push(cause);
    }
    for key in ["successfulJobsHistoryLimit", "failedJobsHistoryLimit"] {
        non_negative(spec, key, "spec", out);
    }
}

/// A CronJob's name leaves room for its Jobs' suffix (create only).
pub(super) fn validate_cron_job_name(object: &Value, out: &mut Vec<Cause>) {
    let name = field_of(object, "metadata")
        .and_then(|m| str_of(m, "name"))
        .unwrap_or_default();
    if name.len() > MAX_NAME {
        out.push(Cause::invalid(
            "metadata.name",
            name,
            "must be no more than 52 characters",
        ));
    }
}

/// `validateTimeZone`: an IANA name the controller can load, never `Local`.
fn validate_time_zone(zone: &str, out: &mut Vec<Cause>) {
    let field = "spec.timeZone";
    if zone.is_empty() {
        out.push(Cause::invalid(
            field,
            zone,
            "timeZone must be nil or non-empty string",
        ));
        return;
    }
    let valid_part = |part: &str| {
        (1..=14).contains(&part.len())
            && part != "."
            && part != ".."
            && !part.starts_with('-')
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-+".contains(&b))
    };
    if !zone.split('/').all(valid_part) {
        out.push(Cause::invalid(
            field,
            zone,
            &format!("unknown time zone {zone}"),
        ));
        return;
    }
    if zone.eq_ignore_ascii_case("Local") {
        out.push(Cause::invalid(
            field,
            zone,
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
        ));
        // Go loads `Local` (the machine's zone); only other names can be unknown.
        if zone == "Local" {
            return;
        }
    }
    if let Err(e) = api::cron::time_zone(zone) {
        out.push(Cause::invalid(field, zone, &e.0));
    }
}
