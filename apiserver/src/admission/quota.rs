//! ResourceQuota: what each object counts for (`pods`, `count/<resource>`, `requests.cpu`,
//! `limits.memory`, …), whether a create fits every quota of its namespace, and the quota's new
//! status with the usage added (or, on delete, taken away).
//!
//! The registry writes the object and the charged quotas in one store transaction that also
//! compares each quota's revision, so two creates racing for the last unit cannot both win:
//! the loser's transaction fails, it re-reads the quotas and is judged again. (kube-apiserver
//! gets the same guarantee from a compare-and-swap on the quota before the object is written;
//! doing both in one transaction also means a create that fails later never leaves a charge.)

use std::collections::BTreeMap;

use api::quantity::Quantity;
use api::ResourceInfo;
use serde_json::{json, Map, Value};

/// Usage per quota resource name.
pub type Usage = BTreeMap<String, Quantity>;

/// The compute resources a quota can insist every container states.
const CONSTRAINED: &[&str] = &[
    "cpu",
    "memory",
    "requests.cpu",
    "requests.memory",
    "limits.cpu",
    "limits.memory",
];

/// Requests named without a prefix also count under the bare name.
const BARE_REQUESTS: &[&str] = &["cpu", "memory", "ephemeral-storage"];

fn is_pod(resource: &ResourceInfo) -> bool {
    resource.group.is_empty() && resource.kind == "Pod"
}

/// `count/<resource>` (core) or `count/<resource>.<group>`.
fn count_name(resource: &ResourceInfo) -> String {
    if resource.group.is_empty() {
        format!("count/{}", resource.plural)
    } else {
        format!("count/{}.{}", resource.plural, resource.group)
    }
}

/// What one object counts for. Quotas are not counted (their own writes would then charge
/// the other quotas of the namespace).
pub fn usage(resource: &ResourceInfo, object: &Value) -> Usage {
    let mut out = Usage::new();
    if resource.kind == "ResourceQuota" {
        return out;
    }
    let one = Quantity::from_count(1);
    out.insert(count_name(resource), one.clone());
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

fn quantities(map: Option<&Value>) -> Usage {
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
    let best_effort = crate::strategy::qos_class(spec) == "BestEffort";
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

/// Sets `status.hard` from `spec.hard` and `status.used` for every hard resource: kept from
/// `old` where it was already tracked, else from `current` (what the namespace uses now).
pub fn initialise_status(quota: &mut Value, old: Option<&Value>, current: &Usage) {
    let hard = quota
        .pointer("/spec/hard")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let old_used = old
        .and_then(|o| o.pointer("/status/used"))
        .and_then(Value::as_object);
    let mut used = Map::new();
    for name in hard.as_object().into_iter().flatten().map(|(k, _)| k) {
        let value = match old_used.and_then(|u| u.get(name)) {
            Some(v) => v.clone(),
            None => json!(current
                .get(name)
                .map_or_else(|| "0".to_string(), Quantity::canonical)),
        };
        used.insert(name.clone(), value);
    }
    quota["status"] = json!({"hard": hard, "used": used});
}

fn pretty(usage: &Usage, names: &[String]) -> String {
    names
        .iter()
        .map(|n| {
            format!(
                "{n}={}",
                usage
                    .get(n)
                    .map_or_else(|| "0".to_string(), Quantity::canonical)
            )
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// A create's charge against one quota: `Ok(None)` when the quota does not track the object,
/// `Ok(Some(quota))` with the usage added, or the reason the create is forbidden.
pub fn charge(
    quota: &Value,
    resource: &ResourceInfo,
    object: &Value,
    delta: &Usage,
) -> Result<Option<Value>, String> {
    if !matches_scopes(quota, resource, object) {
        return Ok(None);
    }
    let name = quota
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let hard = quantities(quota.pointer("/spec/hard"));
    if is_pod(resource) {
        check_constraints(name, &hard, object)?;
    }
    let relevant: Vec<String> = hard
        .keys()
        .filter(|k| delta.contains_key(*k))
        .cloned()
        .collect();
    if relevant.is_empty() {
        return Ok(None);
    }
    let used = quantities(quota.pointer("/status/used"));
    let mut next_used = used.clone();
    let mut exceeded = Vec::new();
    for key in &relevant {
        let sum = match used.get(key) {
            Some(u) => u.add(&delta[key]),
            None => delta[key].clone(),
        };
        if sum > hard[key] {
            exceeded.push(key.clone());
        }
        next_used.insert(key.clone(), sum);
    }
    if !exceeded.is_empty() {
        return Err(format!(
            "exceeded quota: {name}, requested: {}, used: {}, limited: {}",
            pretty(delta, &exceeded),
            pretty(&used, &exceeded),
            pretty(&hard, &exceeded)
        ));
    }
    Ok(Some(with_used(quota, &next_used)))
}

/// A delete's refund to one quota: `None` when the quota does not track the object.
pub fn refund(
    quota: &Value,
    resource: &ResourceInfo,
    object: &Value,
    delta: &Usage,
) -> Option<Value> {
    if !matches_scopes(quota, resource, object) {
        return None;
    }
    let hard = quantities(quota.pointer("/spec/hard"));
    let relevant: Vec<&String> = hard.keys().filter(|k| delta.contains_key(*k)).collect();
    if relevant.is_empty() {
        return None;
    }
    let mut used = quantities(quota.pointer("/status/used"));
    for key in relevant {
        let left = used
            .get(key)
            .map_or_else(Quantity::zero, |u| u.sub(&delta[key]));
        let left = if left.is_negative() {
            Quantity::zero()
        } else {
            left
        };
        used.insert(key.clone(), left);
    }
    Some(with_used(quota, &used))
}

fn with_used(quota: &Value, used: &Usage) -> Value {
    let mut next = quota.clone();
    let hard = quota
        .pointer("/spec/hard")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let used: Map<String, Value> = used
        .iter()
        .map(|(k, v)| (k.clone(), json!(v.canonical())))
        .collect();
    next["status"] = json!({"hard": hard, "used": used});
    next
}

/// A quota limiting cpu or memory requires every container to state them.
fn check_constraints(name: &str, hard: &Usage, pod: &Value) -> Result<(), String> {
    let required: Vec<&str> = CONSTRAINED
        .iter()
        .copied()
        .filter(|r| hard.contains_key(*r))
        .collect();
    if required.is_empty() {
        return Ok(());
    }
    let mut missing: Vec<&str> = Vec::new();
    for key in ["initContainers", "containers"] {
        for c in pod
            .pointer(&format!("/spec/{key}"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let requests = quantities(c.pointer("/resources/requests"));
            let limits = quantities(c.pointer("/resources/limits"));
            for r in &required {
                let stated = match r.split_once('.') {
                    Some(("limits", res)) => limits.contains_key(res),
                    Some((_, res)) => requests.contains_key(res),
                    None => requests.contains_key(*r),
                };
                if !stated && !missing.contains(r) {
                    missing.push(r);
                }
            }
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    missing.sort();
    Err(format!(
        "failed quota: {name}: must specify {}",
        missing.join(",")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(requests: Value, limits: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "c", "resources": {"requests": requests, "limits": limits}}]}})
    }

    fn quota(hard: Value, used: Value) -> Value {
        json!({"metadata": {"name": "q"}, "spec": {"hard": hard}, "status": {"hard": hard, "used": used}})
    }

    #[test]
    fn a_pod_counts_for_pods_and_compute() {
        let pods = api::resources::pods();
        let u = usage(
            pods,
            &pod(
                json!({"cpu": "250m", "memory": "64Mi"}),
                json!({"cpu": "500m"}),
            ),
        );
        let shown: Vec<String> = u.iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(
            shown,
            [
                "count/pods=1",
                "cpu=250m",
                "limits.cpu=500m",
                "memory=64Mi",
                "pods=1",
                "requests.cpu=250m",
                "requests.memory=64Mi",
            ]
        );
        let deployments = api::resources::find("apps", "v1", "deployments").expect("deployments");
        assert!(usage(deployments, &json!({})).contains_key("count/deployments.apps"));
    }

    #[test]
    fn exceeding_uses_the_kubernetes_message() {
        let pods = api::resources::pods();
        let p = pod(json!({"cpu": "100m"}), json!({}));
        let q = quota(json!({"pods": "2"}), json!({"pods": "2"}));
        assert_eq!(
            charge(&q, pods, &p, &usage(pods, &p)).expect_err("full"),
            "exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2"
        );
        let q = quota(
            json!({"pods": "3", "requests.cpu": "1"}),
            json!({"pods": "1", "requests.cpu": "500m"}),
        );
        let next = charge(&q, pods, &p, &usage(pods, &p))
            .expect("fits")
            .expect("tracked");
        assert_eq!(
            next["status"]["used"],
            json!({"pods": "2", "requests.cpu": "600m"})
        );
        let back = refund(&next, pods, &p, &usage(pods, &p)).expect("tracked");
        assert_eq!(
            back["status"]["used"],
            json!({"pods": "1", "requests.cpu": "500m"})
        );
        let cm = api::resources::find("", "v1", "configmaps").expect("configmaps");
        assert_eq!(charge(&q, cm, &json!({}), &usage(cm, &json!({}))), Ok(None));
    }

    #[test]
    fn compute_quotas_want_every_container_to_say() {
        let pods = api::resources::pods();
        let p = pod(json!({"cpu": "100m"}), json!({}));
        let q = quota(
            json!({"requests.cpu": "1", "limits.memory": "1Gi", "limits.cpu": "2"}),
            json!({}),
        );
        assert_eq!(
            charge(&q, pods, &p, &usage(pods, &p)).expect_err("missing"),
            "failed quota: q: must specify limits.cpu,limits.memory"
        );
    }

    #[test]
    fn status_follows_spec_and_keeps_usage() {
        let mut current = Usage::new();
        current.insert("pods".into(), Quantity::from_count(4));
        let mut q = json!({"spec": {"hard": {"pods": "10", "secrets": "5"}}});
        let old = quota(json!({"pods": "5"}), json!({"pods": "3"}));
        initialise_status(&mut q, Some(&old), &current);
        assert_eq!(q["status"]["hard"], json!({"pods": "10", "secrets": "5"}));
        assert_eq!(q["status"]["used"], json!({"pods": "3", "secrets": "0"}));
    }

    #[test]
    fn scopes_select_pods() {
        let pods = api::resources::pods();
        let q = json!({"spec": {"hard": {"pods": "1"}, "scopes": ["BestEffort"]}});
        assert!(matches_scopes(&q, pods, &pod(json!({}), json!({}))));
        assert!(!matches_scopes(
            &q,
            pods,
            &pod(json!({"cpu": "1"}), json!({}))
        ));
        let cm = api::resources::find("", "v1", "configmaps").expect("configmaps");
        assert!(!matches_scopes(&q, cm, &json!({})));
    }
}
