//! ResourceQuota: what each object counts for (`pods`, `count/<resource>`, `requests.cpu`,
//! `limits.memory`, …), whether a create fits every quota of its namespace, and the quota's new
//! status with the usage added (or, on delete, taken away).
//!
//! The registry writes the object and the charged quotas in one store transaction that also
//! compares each quota's revision, so two creates racing for the last unit cannot both win:
//! the loser's transaction fails, it re-reads the quotas and is judged again. (kube-apiserver
//! gets the same guarantee from a compare-and-swap on the quota before the object is written;
//! doing both in one transaction also means a create that fails later never leaves a charge.)

use api::quantity::Quantity;
use api::quota::{is_pod, quantities, CONSTRAINED};
use api::ResourceInfo;
use serde_json::{json, Map, Value};

pub use api::quota::{
    add_usage, matches_scopes, tracked_resources, tracks_any, usage, usage_at, Usage,
};

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
