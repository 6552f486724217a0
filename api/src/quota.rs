//! ResourceQuota evaluation shared by the API server's admission (which charges a create and
//! refunds a delete) and the controller manager's quota controller (which recomputes
//! `status.used` from what exists): what each object counts for (`pods`, `count/<resource>`,
//! `requests.cpu`, `limits.memory`, …), which quotas' scopes select it, and a pod's QoS class.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use crate::quantity::Quantity;
use crate::ResourceInfo;

/// Usage per quota resource name.
pub type Usage = BTreeMap<String, Quantity>;

/// The compute resources a quota can insist every container states.
pub const CONSTRAINED: &[&str] = &[
    "cpu",
    "memory",
    "requests.cpu",
    "requests.memory",
    "limits.cpu",
    "limits.memory",
];

/// Requests named without a prefix also count under the bare name.
const BARE_REQUESTS: &[&str] = &["cpu", "memory", "ephemeral-storage"];

pub fn is_pod(resource: &ResourceInfo) -> bool {
    resource.group.is_empty() && resource.kind == "Pod"
}

/// Whether a pod still counts for `pods` and compute resources at `now`: not when it is
/// Succeeded or Failed, nor when it is stuck terminating — its deletionTimestamp plus its
/// deletionGracePeriodSeconds lie in the past (a lost node must not hold a namespace's quota).
pub fn pod_counts_at(pod: &Value, now: DateTime<Utc>) -> bool {
    let phase = pod.pointer("/status/phase").and_then(Value::as_str);
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return false;
    }
    let deletion = pod
        .pointer("/metadata/deletionTimestamp")
        .and_then(Value::as_str)
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok());
    let grace = pod
        .pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64);
    match (deletion, grace) {
        (Some(at), Some(grace)) => now <= at.with_timezone(&Utc) + chrono::Duration::seconds(grace),
        _ => true,
    }
}

/// `count/<resource>` (core) or `count/<resource>.<group>`.
fn count_name(resource: &ResourceInfo) -> String {
    if resource.group.is_empty() {
        format!("count/{}", resource.plural)
    } else {
        format!("count/{}.{}", resource.plural, resource.group)
    }
}

/// What one object counts for now. Quotas are not counted (their own writes would then charge
/// the other quotas of the namespace).
pub fn usage(resource: &ResourceInfo, object: &Value) -> Usage {
    usage_at(resource, object, Utc::now())
}

/// What one object counts for at `now`. As in Kubernetes' pod evaluator, a pod that has
/// reached the end of its life (see [`pod_counts_at`]) still counts as an object
/// (`count/pods`) but no longer for `pods` or compute resources.
pub fn usage_at(resource: &ResourceInfo, object: &Value, now: DateTime<Utc>) -> Usage {
    let mut out = Usage::new();
    if resource.kind == "ResourceQuota" {
        return out;
    }
    let one = Quantity::from_count(1);
    out.insert(count_name(resource), one.clone());
    if is_pod(resource) && !pod_counts_at(object, now) {
        return out;
    }
    if resource.group.is_empty()
        && ["pods", "services", "configmaps", "secrets"].contains(&resource.plural)
    {
        out.insert(resource.plural.to_string(), one.clone());
    }
    if resource.group.is_empty() && resource.kind == "Service" {
        let kind = object
            .pointer("/spec/type")
            .and_then(Value::as_str)
            .unwrap_or("ClusterIP");
        let ports = object
            .pointer("/spec/ports")
            .and_then(Value::as_array)
            .map_or(0, Vec::len) as i64;
        if kind == "LoadBalancer" {
            out.insert("services.loadbalancers".into(), one.clone());
        }
        if kind == "NodePort" || kind == "LoadBalancer" {
            out.insert("services.nodeports".into(), Quantity::from_count(ports));
        }
    }
    if is_pod(resource) {
        let (requests, limits) = pod_compute(object);
        for (name, q) in requests {
            if BARE_REQUESTS.contains(&name.as_str()) {
                out.insert(name.clone(), q.clone());
            }
            out.insert(format!("requests.{name}"), q);
        }
        for (name, q) in limits {
            out.insert(format!("limits.{name}"), q);
        }
    }
    out
}

pub fn quantities(map: Option<&Value>) -> Usage {
    map.and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), Quantity::from_value(v).ok()?)))
        .collect()
}

/// A pod's requests and limits: the sum over its containers, or the largest init container's
/// where that is more.
fn pod_compute(pod: &Value) -> (Usage, Usage) {
    let list = |key: &str| -> Vec<&Value> {
        pod.pointer(&format!("/spec/{key}"))
            .and_then(Value::as_array)
            .map(|a| a.iter().collect())
            .unwrap_or_default()
    };
    let mut totals = [Usage::new(), Usage::new()];
    for (slot, which) in ["requests", "limits"].iter().enumerate() {
        for c in list("containers") {
            add_usage(
                &mut totals[slot],
                &quantities(c.pointer(&format!("/resources/{which}"))),
            );
        }
        for c in list("initContainers") {
            for (k, v) in quantities(c.pointer(&format!("/resources/{which}"))) {
                if totals[slot].get(&k).is_none_or(|t| &v > t) {
                    totals[slot].insert(k, v);
                }
            }
        }
    }
    let [requests, limits] = totals;
    (requests, limits)
}

/// `total += delta`.
pub fn add_usage(total: &mut Usage, delta: &Usage) {
    for (k, v) in delta {
        let sum = match total.get(k) {
            Some(t) => t.add(v),
            None => v.clone(),
        };
        total.insert(k.clone(), sum);
    }
}

/// The resource names a quota limits.
pub fn tracked_resources(quota: &Value) -> Vec<String> {
    quota
        .pointer("/spec/hard")
        .and_then(Value::as_object)
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

/// Whether objects of `resource` count for any of `tracked`.
pub fn tracks_any(resource: &ResourceInfo, tracked: &[String]) -> bool {
    let count = count_name(resource);
    tracked.iter().any(|t| {
        *t == count
            || (resource.group.is_empty() && t == resource.plural)
            || (is_pod(resource)
                && (CONSTRAINED.contains(&t.as_str())
                    || t.starts_with("requests.")
                    || t.starts_with("limits.")
                    || t == "ephemeral-storage"))
            || (resource.group.is_empty()
                && resource.kind == "Service"
                && t.starts_with("services."))
    })
}

/// Whether the quota's scopes select this object. Scoped quotas only count pods.
pub fn matches_scopes(quota: &Value, resource: &ResourceInfo, object: &Value) -> bool {
    let mut scopes: Vec<(String, String, Vec<String>)> = quota
        .pointer("/spec/scopes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|s| (s.to_string(), "Exists".to_string(), Vec::new()))
        .collect();
    for expr in quota
        .pointer("/spec/scopeSelector/matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let text = |k: &str| {
            expr.get(k)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let values = expr
            .get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect();
        scopes.push((text("scopeName"), text("operator"), values));
    }
    if scopes.is_empty() {
        return true;
    }
    if !is_pod(resource) {
        return false;
    }
    let spec = object.get("spec").unwrap_or(&Value::Null);
    let best_effort = qos_class(spec) == "BestEffort";
    let terminating = spec
        .get("activeDeadlineSeconds")
        .is_some_and(|v| !v.is_null());
    scopes
        .iter()
        .all(|(scope, operator, values)| match scope.as_str() {
            "BestEffort" => best_effort,
            "NotBestEffort" => !best_effort,
            "Terminating" => terminating,
            "NotTerminating" => !terminating,
            "PriorityClass" => {
                let class = spec
                    .get("priorityClassName")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                match operator.as_str() {
                    "In" => values.iter().any(|v| v == class),
                    "NotIn" => !values.iter().any(|v| v == class),
                    "Exists" => !class.is_empty(),
                    "DoesNotExist" => class.is_empty(),
                    _ => false,
                }
            }
            _ => false,
        })
}

/// The pod's QoS class from its containers' requests and limits.
pub fn qos_class(spec: &Value) -> &'static str {
    let containers: Vec<&Value> = ["initContainers", "containers"]
        .iter()
        .filter_map(|k| spec.get(*k).and_then(Value::as_array))
        .flatten()
        .collect();
    let mut any = false;
    let mut guaranteed = true;
    for c in &containers {
        let requests = c.pointer("/resources/requests").and_then(Value::as_object);
        let limits = c.pointer("/resources/limits").and_then(Value::as_object);
        let has = |m: Option<&Map<String, Value>>, k: &str| m.is_some_and(|m| m.contains_key(k));
        for resource in ["cpu", "memory"] {
            if has(requests, resource) || has(limits, resource) {
                any = true;
            }
            if !has(limits, resource) {
                guaranteed = false;
            } else if let (Some(r), Some(l)) = (
                requests.and_then(|m| m.get(resource)),
                limits.and_then(|m| m.get(resource)),
            ) {
                if r != l {
                    guaranteed = false;
                }
            }
        }
    }
    if !any {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(t: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(t)
            .expect("time")
            .with_timezone(&Utc)
    }

    fn names(u: &Usage) -> Vec<&str> {
        u.keys().map(String::as_str).collect()
    }

    #[test]
    fn finished_and_stuck_pods_count_only_as_objects() {
        let pods = crate::resources::pods();
        let now = at("2026-01-01T00:10:00Z");
        let running = json!({"spec": {"containers": [{"name": "c",
            "resources": {"requests": {"cpu": "1"}}}]}, "status": {"phase": "Running"}});
        assert_eq!(
            names(&usage_at(pods, &running, now)),
            ["count/pods", "cpu", "pods", "requests.cpu"]
        );
        for phase in ["Succeeded", "Failed"] {
            let mut done = running.clone();
            done["status"]["phase"] = json!(phase);
            assert_eq!(
                names(&usage_at(pods, &done, now)),
                ["count/pods"],
                "{phase}"
            );
        }
        // Terminating within its grace period: still counts.
        let mut terminating = running.clone();
        terminating["metadata"] = json!({"deletionTimestamp": "2026-01-01T00:09:50Z",
            "deletionGracePeriodSeconds": 30});
        assert!(pod_counts_at(&terminating, now));
        assert!(usage_at(pods, &terminating, now).contains_key("pods"));
        // Past deletionTimestamp + grace: stuck (a lost node), no longer charged.
        assert!(!pod_counts_at(&terminating, at("2026-01-01T00:10:21Z")));
        // A deletionTimestamp without a grace period is not judged stuck.
        terminating["metadata"] = json!({"deletionTimestamp": "2026-01-01T00:00:00Z"});
        assert!(pod_counts_at(&terminating, now));
    }
}
