//! Deployments, ReplicaSets, DaemonSets, StatefulSets, ControllerRevisions,
//! ReplicationControllers, PodTemplates, Jobs, CronJobs and PodDisruptionBudgets.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{
    age, array_at, condition_true, human_duration, int_at, is_set, name, none_if_empty, str_at,
    time_at,
};

/// Container names and images of a pod template, each comma-joined.
fn container_cells(obj: &Value) -> (Value, Value) {
    containers_at(obj, "/spec/template/spec/containers")
}

fn containers_at(obj: &Value, pointer: &str) -> (Value, Value) {
    let containers = array_at(obj, pointer);
    let names: Vec<&str> = containers.iter().map(|c| str_at(c, "/name")).collect();
    let images: Vec<&str> = containers.iter().map(|c| str_at(c, "/image")).collect();
    (names.join(",").into(), images.join(",").into())
}

/// A `metav1.LabelSelector` in `labels.Selector` string form (requirements sorted by key);
/// `None` when the selector is invalid.
fn label_selector_string(selector: &Value) -> Option<String> {
    let mut requirements: Vec<(String, String)> = Vec::new();
    if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
        for (key, value) in labels {
            requirements.push((
                key.clone(),
                format!("{key}={}", value.as_str().unwrap_or("")),
            ));
        }
    }
    for expr in array_at(selector, "/matchExpressions") {
        let key = str_at(expr, "/key");
        let mut values: Vec<&str> = array_at(expr, "/values")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        values.sort_unstable();
        values.dedup();
        let text = match str_at(expr, "/operator") {
            "In" if !values.is_empty() => format!("{key} in ({})", values.join(",")),
            "NotIn" if !values.is_empty() => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            _ => return None,
        };
        requirements.push((key.to_string(), text));
    }
    requirements.sort_by(|a, b| a.0.cmp(&b.0));
    Some(
        requirements
            .into_iter()
            .map(|(_, text)| text)
            .collect::<Vec<_>>()
            .join(","),
    )
}

/// `metav1.FormatLabelSelector` of `spec.selector`.
fn format_label_selector(obj: &Value) -> String {
    format_label_selector_at(obj, "/spec/selector")
}

/// `metav1.FormatLabelSelector`: `<none>` for an empty selector, `<error>` for an invalid one.
fn format_label_selector_at(obj: &Value, pointer: &str) -> String {
    match obj.pointer(pointer).map(label_selector_string) {
        Some(None) => "<error>".into(),
        Some(Some(s)) if !s.is_empty() => s,
        _ => "<none>".into(),
    }
}

/// `spec.replicas`, defaulting to 1 as the API does.
fn desired_replicas(obj: &Value) -> i64 {
    obj.pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
}

pub(super) fn deployment_cells(deploy: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let (containers, images) = container_cells(deploy);
    let selector = match deploy.pointer("/spec/selector").map(label_selector_string) {
        Some(Some(s)) => s,
        Some(None) => "<invalid>".into(),
        None => String::new(),
    };
    vec![
        name(deploy),
        format!(
            "{}/{}",
            int_at(deploy, "/status/readyReplicas"),
            desired_replicas(deploy)
        )
        .into(),
        int_at(deploy, "/status/updatedReplicas").into(),
        int_at(deploy, "/status/availableReplicas").into(),
        age(deploy, now),
        containers,
        images,
        selector.into(),
    ]
}

pub(super) fn replicaset_cells(rs: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let (containers, images) = container_cells(rs);
    vec![
        name(rs),
        desired_replicas(rs).into(),
        int_at(rs, "/status/replicas").into(),
        int_at(rs, "/status/readyReplicas").into(),
        age(rs, now),
        containers,
        images,
        format_label_selector(rs).into(),
    ]
}

pub(super) fn job_cells(job: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let succeeded = int_at(job, "/status/succeeded");
    let completions = match job.pointer("/spec/completions").and_then(Value::as_i64) {
        Some(completions) => format!("{succeeded}/{completions}"),
        None => match int_at(job, "/spec/parallelism") {
            p if p > 1 => format!("{succeeded}/1 of {p}"),
            _ => format!("{succeeded}/1"),
        },
    };
    let duration = match (
        time_at(job, "/status/startTime"),
        time_at(job, "/status/completionTime"),
    ) {
        (None, _) => String::new(),
        (Some(start), None) => human_duration(now - start),
        (Some(start), Some(end)) => human_duration(end - start),
    };
    let conditions = array_at(job, "/status/conditions");
    let status = if condition_true(conditions, "Complete") {
        "Complete"
    } else if condition_true(conditions, "Failed") {
        "Failed"
    } else if is_set(job, "/metadata/deletionTimestamp") {
        "Terminating"
    } else if condition_true(conditions, "Suspended") {
        "Suspended"
    } else if condition_true(conditions, "FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    };
    let (containers, images) = container_cells(job);
    vec![
        name(job),
        status.into(),
        completions.into(),
        duration.into(),
        age(job, now),
        containers,
        images,
        format_label_selector(job).into(),
    ]
}

/// `labels.FormatLabels` of the map at `pointer`: `k=v` pairs in key order, `<none>` if empty.
fn format_labels(obj: &Value, pointer: &str) -> String {
    let text = obj
        .pointer(pointer)
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    none_if_empty(&text)
}

pub(super) fn replication_controller_cells(rc: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let (containers, images) = container_cells(rc);
    vec![
        name(rc),
        desired_replicas(rc).into(),
        int_at(rc, "/status/replicas").into(),
        int_at(rc, "/status/readyReplicas").into(),
        age(rc, now),
        containers,
        images,
        format_labels(rc, "/spec/selector").into(),
    ]
}

pub(super) fn pod_template_cells(template: &Value, _now: DateTime<Utc>) -> Vec<Value> {
    let (containers, images) = containers_at(template, "/template/spec/containers");
    vec![
        name(template),
        containers,
        images,
        format_labels(template, "/template/metadata/labels").into(),
    ]
}

pub(super) fn pod_disruption_budget_cells(pdb: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let bound = |key: &str| match pdb.pointer(&format!("/spec/{key}")) {
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::String(s)) => s.clone(),
        _ => "N/A".to_string(),
    };
    vec![
        name(pdb),
        bound("minAvailable").into(),
        bound("maxUnavailable").into(),
        int_at(pdb, "/status/disruptionsAllowed").into(),
        age(pdb, now),
    ]
}

pub(super) fn daemon_set_cells(ds: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let (containers, images) = container_cells(ds);
    vec![
        name(ds),
        int_at(ds, "/status/desiredNumberScheduled").into(),
        int_at(ds, "/status/currentNumberScheduled").into(),
        int_at(ds, "/status/numberReady").into(),
        int_at(ds, "/status/updatedNumberScheduled").into(),
        int_at(ds, "/status/numberAvailable").into(),
        format_labels(ds, "/spec/template/spec/nodeSelector").into(),
        age(ds, now),
        containers,
        images,
        format_label_selector(ds).into(),
    ]
}

pub(super) fn cron_job_cells(cj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let (containers, images) = containers_at(cj, "/spec/jobTemplate/spec/template/spec/containers");
    let time_zone = none_if_empty(str_at(cj, "/spec/timeZone"));
    // printBoolPtr: an unset suspend (never after defaulting) prints `<unset>`.
    let suspend = match cj.pointer("/spec/suspend").and_then(Value::as_bool) {
        Some(true) => "True",
        Some(false) => "False",
        None => "<unset>",
    };
    let last_schedule = match time_at(cj, "/status/lastScheduleTime") {
        Some(t) => human_duration(now - t),
        None => "<none>".into(),
    };
    vec![
        name(cj),
        str_at(cj, "/spec/schedule").into(),
        time_zone.into(),
        suspend.into(),
        (array_at(cj, "/status/active").len() as i64).into(),
        last_schedule.into(),
        age(cj, now),
        containers,
        images,
        format_label_selector_at(cj, "/spec/jobTemplate/spec/selector").into(),
    ]
}

pub(super) fn stateful_set_cells(sts: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let (containers, images) = container_cells(sts);
    let ready = int_at(sts, "/status/readyReplicas");
    vec![
        name(sts),
        format!("{ready}/{}", desired_replicas(sts)).into(),
        age(sts, now),
        containers,
        images,
    ]
}

/// The controller shows as `kind.group/name` (`statefulset.apps/web`), `<none>` without one.
pub(super) fn controller_revision_cells(revision: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let controller = array_at(revision, "/metadata/ownerReferences")
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        .map(|r| {
            let kind = str_at(r, "/kind").to_lowercase();
            let group = str_at(r, "/apiVersion")
                .rsplit_once('/')
                .map_or("", |(group, _)| group);
            let kind = if group.is_empty() {
                kind
            } else {
                format!("{kind}.{group}")
            };
            format!("{kind}/{}", str_at(r, "/name"))
        })
        .unwrap_or_else(|| "<none>".to_string());
    vec![
        name(revision),
        controller.into(),
        int_at(revision, "/revision").into(),
        age(revision, now),
    ]
}
