//! Nodes, namespaces and events (core/v1 and events.k8s.io/v1 field names).

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{
    age, array_at, bool_at, first_str, int_at, is_set, name, none_if_empty, since, str_at, time_at,
};

pub(super) fn node_cells(node: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let conditions = array_at(node, "/status/conditions");
    let mut status = match conditions
        .iter()
        .rev()
        .find(|c| str_at(c, "/type") == "Ready")
    {
        Some(c) if str_at(c, "/status") == "True" => vec!["Ready"],
        Some(_) => vec!["NotReady"],
        None => vec!["Unknown"],
    };
    if bool_at(node, "/spec/unschedulable") {
        status.push("SchedulingDisabled");
    }
    let address = |kind: &str| {
        array_at(node, "/status/addresses")
            .iter()
            .find(|a| str_at(a, "/type") == kind)
            .map_or("<none>", |a| str_at(a, "/address"))
            .to_string()
    };
    let info = |field: &str| match str_at(node, &format!("/status/nodeInfo/{field}")) {
        "" => "<unknown>".to_string(),
        v => v.to_string(),
    };
    vec![
        name(node),
        status.join(",").into(),
        none_if_empty(&node_roles(node).join(",")).into(),
        age(node, now),
        str_at(node, "/status/nodeInfo/kubeletVersion").into(),
        address("InternalIP").into(),
        address("ExternalIP").into(),
        info("osImage").into(),
        info("kernelVersion").into(),
        info("containerRuntimeVersion").into(),
    ]
}

/// Roles from `node-role.kubernetes.io/<role>` label keys and the `kubernetes.io/role` value.
fn node_roles(node: &Value) -> Vec<String> {
    let mut roles = BTreeSet::new();
    if let Some(labels) = node.pointer("/metadata/labels").and_then(Value::as_object) {
        for (key, value) in labels {
            let value = value.as_str().unwrap_or("");
            if let Some(role) = key.strip_prefix("node-role.kubernetes.io/") {
                if !role.is_empty() {
                    roles.insert(role.to_string());
                }
            } else if key == "kubernetes.io/role" && !value.is_empty() {
                roles.insert(value.to_string());
            }
        }
    }
    roles.into_iter().collect()
}

pub(super) fn namespace_cells(ns: &Value, now: DateTime<Utc>) -> Vec<Value> {
    vec![name(ns), str_at(ns, "/status/phase").into(), age(ns, now)]
}

fn first_time(v: &Value, pointers: &[&str]) -> Option<DateTime<Utc>> {
    pointers.iter().find_map(|p| time_at(v, p))
}

pub(super) fn event_cells(event: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let first_seen = since(
        first_time(event, &["/firstTimestamp", "/deprecatedFirstTimestamp"])
            .or_else(|| time_at(event, "/eventTime")),
        now,
    );
    let mut last_seen = match first_time(event, &["/lastTimestamp", "/deprecatedLastTimestamp"]) {
        Some(t) => since(Some(t), now),
        None => first_seen.clone(),
    };
    let mut count = event
        .get("count")
        .or_else(|| event.get("deprecatedCount"))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if is_set(event, "/series") {
        last_seen = since(time_at(event, "/series/lastObservedTime"), now);
        count = int_at(event, "/series/count");
    } else if count == 0 {
        // Singleton events of the new API carry no count.
        count = 1;
    }
    let regarding = event
        .get("involvedObject")
        .or_else(|| event.get("regarding"))
        .unwrap_or(&Value::Null);
    let kind = str_at(regarding, "/kind").to_lowercase();
    let target = match str_at(regarding, "/name") {
        "" => kind,
        name => format!("{kind}/{name}"),
    };
    let component = first_str(
        event,
        &[
            "/source/component",
            "/deprecatedSource/component",
            "/reportingController",
            "/reportingComponent",
        ],
    );
    let instance = first_str(
        event,
        &[
            "/source/host",
            "/deprecatedSource/host",
            "/reportingInstance",
        ],
    );
    let source = if instance.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {instance}")
    };
    vec![
        last_seen.into(),
        str_at(event, "/type").into(),
        str_at(event, "/reason").into(),
        target.into(),
        str_at(regarding, "/fieldPath").into(),
        source.into(),
        first_str(event, &["/message", "/note"]).trim().into(),
        first_seen.into(),
        count.into(),
        name(event),
    ]
}
