//! LimitRanger: containers get the namespace's LimitRange defaults (`default` limits,
//! `defaultRequest` requests), then containers and pods are held to its `min`, `max` and
//! `maxLimitRequestRatio`, with Kubernetes' messages.

use std::collections::BTreeMap;

use api::quantity::Quantity;
use serde_json::{json, Map, Value};

const ANNOTATION: &str = "kubernetes.io/limit-ranger";

/// A container's (or pod's) requests and limits, parsed.
#[derive(Default)]
struct Resources {
    requests: BTreeMap<String, Quantity>,
    limits: BTreeMap<String, Quantity>,
}

fn quantities(map: Option<&Value>) -> BTreeMap<String, Quantity> {
    map.and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), Quantity::from_value(v).ok()?)))
        .collect()
}

fn container_resources(container: &Value) -> Resources {
    Resources {
        requests: quantities(container.pointer("/resources/requests")),
        limits: quantities(container.pointer("/resources/limits")),
    }
}

/// The items of every range with this type.
fn items<'a>(ranges: &'a [Value], kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    ranges
        .iter()
        .flat_map(|r| {
            r.pointer("/spec/limits")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or(&[])
        })
        .filter(move |item| item.get("type").and_then(Value::as_str) == Some(kind))
}

/// Fills in missing container requests and limits from the ranges' Container defaults and
/// records what it set in the `kubernetes.io/limit-ranger` annotation.
pub fn apply_defaults(pod: &mut Value, ranges: &[Value]) {
    let mut default_limits = Map::new();
    let mut default_requests = Map::new();
    for item in items(ranges, "Container") {
        if let Some(m) = item.get("default").and_then(Value::as_object) {
            default_limits.extend(m.clone());
        }
        if let Some(m) = item.get("defaultRequest").and_then(Value::as_object) {
            default_requests.extend(m.clone());
        }
    }
    if default_limits.is_empty() && default_requests.is_empty() {
        return;
    }
    let mut notes = Vec::new();
    for (list, what) in [
        ("initContainers", "init container"),
        ("containers", "container"),
    ] {
        let Some(containers) = pod
            .pointer_mut(&format!("/spec/{list}"))
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        for container in containers.iter_mut() {
            let name = container
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let Some(c) = container.as_object_mut() else {
                continue;
            };
            let resources = c.entry("resources").or_insert_with(|| json!({}));
            let mut set = |key: &str, defaults: &Map<String, Value>| -> Vec<String> {
                let mut added = Vec::new();
                if defaults.is_empty() {
                    return added;
                }
                let target = resources
                    .as_object_mut()
                    .map(|r| r.entry(key.to_string()).or_insert_with(|| json!({})));
                if let Some(Value::Object(target)) = target {
                    for (k, v) in defaults {
                        if !target.contains_key(k) {
                            target.insert(k.clone(), v.clone());
                            added.push(k.clone());
                        }
                    }
                }
                added
            };
            let requests = set("requests", &default_requests);
            let limits = set("limits", &default_limits);
            if !requests.is_empty() {
                notes.push(format!("{} request for {what} {name}", requests.join(", ")));
            }
            if !limits.is_empty() {
                notes.push(format!("{} limit for {what} {name}", limits.join(", ")));
            }
            // Drop maps the defaults did not fill.
            if let Some(r) = c.get_mut("resources").and_then(Value::as_object_mut) {
                r.retain(|_, v| !v.as_object().is_some_and(Map::is_empty));
            }
        }
    }
    if !notes.is_empty() {
        let metadata = crate::meta::metadata_mut(pod);
        let annotations = metadata.entry("annotations").or_insert_with(|| json!({}));
        if let Some(a) = annotations.as_object_mut() {
            a.insert(
                ANNOTATION.into(),
                json!(format!("LimitRanger plugin set: {}", notes.join("; "))),
            );
        }
    }
}

/// Checks the pod against every range's Container and Pod bounds; the error lists each
/// violation as Kubernetes words it.
pub fn validate(pod: &Value, ranges: &[Value]) -> Result<(), String> {
    let mut errors = Vec::new();
    let containers: Vec<&Value> = ["initContainers", "containers"]
        .iter()
        .filter_map(|k| pod.pointer(&format!("/spec/{k}")).and_then(Value::as_array))
        .flatten()
        .collect();
    for item in items(ranges, "Container") {
        for container in &containers {
            check_bounds(
                item,
                "Container",
                &container_resources(container),
                &mut errors,
            );
        }
    }
    let pod_items: Vec<&Value> = items(ranges, "Pod").collect();
    if !pod_items.is_empty() {
        let totals = pod_totals(pod);
        for item in pod_items {
            check_bounds(item, "Pod", &totals, &mut errors);
        }
    }
    match errors.len() {
        0 => Ok(()),
        1 => Err(errors.remove(0)),
        _ => Err(format!("[{}]", errors.join(", "))),
    }
}

/// A pod's requests and limits: the containers' sums, or the largest init container's when
/// that is more (init containers run one at a time, before the others).
fn pod_totals(pod: &Value) -> Resources {
    let list = |key: &str| -> Vec<Resources> {
        pod.pointer(&format!("/spec/{key}"))
            .and_then(Value::as_array)
            .map(|a| a.iter().map(container_resources).collect())
            .unwrap_or_default()
    };
    let mut totals = Resources::default();
    for c in list("containers") {
        for (k, v) in c.requests {
            let sum = totals.requests.get(&k).map_or(v.clone(), |t| t.add(&v));
            totals.requests.insert(k, sum);
        }
        for (k, v) in c.limits {
            let sum = totals.limits.get(&k).map_or(v.clone(), |t| t.add(&v));
            totals.limits.insert(k, sum);
        }
    }
    for c in list("initContainers") {
        for (k, v) in c.requests {
            if totals.requests.get(&k).is_none_or(|t| &v > t) {
                totals.requests.insert(k, v);
            }
        }
        for (k, v) in c.limits {
            if totals.limits.get(&k).is_none_or(|t| &v > t) {
                totals.limits.insert(k, v);
            }
        }
    }
    totals
}

fn check_bounds(item: &Value, kind: &str, observed: &Resources, errors: &mut Vec<String>) {
    for (name, min) in quantities(item.get("min")) {
        let (min_s, request, limit) = (
            min.canonical(),
            observed.requests.get(&name),
            observed.limits.get(&name),
        );
        match request {
            None => errors.push(format!(
                "minimum {name} usage per {kind} is {min_s}.  No request is specified"
            )),
            Some(r) if *r < min => errors.push(format!(
                "minimum {name} usage per {kind} is {min_s}, but request is {}",
                r.canonical()
            )),
            _ => {
                if let Some(l) = limit.filter(|l| **l < min) {
                    errors.push(format!(
                        "minimum {name} usage per {kind} is {min_s}, but limit is {}",
                        l.canonical()
                    ));
                }
            }
        }
    }
    for (name, max) in quantities(item.get("max")) {
        let (max_s, request, limit) = (
            max.canonical(),
            observed.requests.get(&name),
            observed.limits.get(&name),
        );
        match limit {
            None => errors.push(format!(
                "maximum {name} usage per {kind} is {max_s}.  No limit is specified"
            )),
            Some(l) if *l > max => errors.push(format!(
                "maximum {name} usage per {kind} is {max_s}, but limit is {}",
                l.canonical()
            )),
            _ => {
                if let Some(r) = request.filter(|r| **r > max) {
                    errors.push(format!(
                        "maximum {name} usage per {kind} is {max_s}, but request is {}",
                        r.canonical()
                    ));
                }
            }
        }
    }
    for (name, ratio) in quantities(item.get("maxLimitRequestRatio")) {
        let ratio_s = ratio.canonical();
        let request = observed.requests.get(&name).filter(|q| !q.is_zero());
        let limit = observed.limits.get(&name).filter(|q| !q.is_zero());
        match (request, limit) {
            (None, _) => errors.push(format!(
                "{name} max limit to request ratio per {kind} is {ratio_s}, but no request is specified or request is 0"
            )),
            (_, None) => errors.push(format!(
                "{name} max limit to request ratio per {kind} is {ratio_s}, but no limit is specified or limit is 0"
            )),
            (Some(r), Some(l)) => {
                let observed_ratio = l.ratio(r);
                if observed_ratio > ratio.ratio(&Quantity::from_count(1)) {
                    errors.push(format!(
                        "{name} max limit to request ratio per {kind} is {ratio_s}, but provided ratio is {observed_ratio:.6}"
                    ));
                }
            }
        }
    }
}

/// Kubernetes' defaults for a LimitRange's Container items: `default` falls back to `max`, and
/// `defaultRequest` to `default`, then `min`.
pub fn default_limit_range(range: &mut Value) {
    let Some(items) = range
        .pointer_mut("/spec/limits")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for item in items.iter_mut().filter_map(Value::as_object_mut) {
        if item.get("type").and_then(Value::as_str) != Some("Container") {
            continue;
        }
        let get = |item: &Map<String, Value>, key: &str| {
            item.get(key)
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default()
        };
        let mut default = get(item, "default");
        for (k, v) in get(item, "max") {
            default.entry(k).or_insert(v);
        }
        let mut default_request = get(item, "defaultRequest");
        for (k, v) in default.iter().chain(get(item, "min").iter()) {
            default_request.entry(k.clone()).or_insert(v.clone());
        }
        if !default.is_empty() {
            item.insert("default".into(), Value::Object(default));
        }
        if !default_request.is_empty() {
            item.insert("defaultRequest".into(), Value::Object(default_request));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(item: Value) -> Value {
        json!({"metadata": {"name": "lr"}, "spec": {"limits": [item]}})
    }

    #[test]
    fn defaults_fill_only_what_is_missing() {
        let ranges = [range(json!({"type": "Container",
            "default": {"cpu": "500m", "memory": "256Mi"},
            "defaultRequest": {"cpu": "100m", "memory": "128Mi"}}))];
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "a", "image": "x"},
            {"name": "b", "image": "x", "resources": {"limits": {"cpu": "1"}, "requests": {"cpu": "1"}}},
        ]}});
        apply_defaults(&mut pod, &ranges);
        let a = &pod["spec"]["containers"][0]["resources"];
        assert_eq!(a["limits"], json!({"cpu": "500m", "memory": "256Mi"}));
        assert_eq!(a["requests"], json!({"cpu": "100m", "memory": "128Mi"}));
        let b = &pod["spec"]["containers"][1]["resources"];
        assert_eq!(b["limits"], json!({"cpu": "1", "memory": "256Mi"}));
        assert_eq!(b["requests"], json!({"cpu": "1", "memory": "128Mi"}));
        assert_eq!(
            pod["metadata"]["annotations"][ANNOTATION],
            "LimitRanger plugin set: cpu, memory request for container a; cpu, memory limit for container a; memory request for container b; memory limit for container b"
        );
    }

    #[test]
    fn bounds_use_kubernetes_messages() {
        let ranges = [range(
            json!({"type": "Container", "min": {"cpu": "100m"}, "max": {"cpu": "1", "memory": "1Gi"}, "maxLimitRequestRatio": {"cpu": "2"}}),
        )];
        let pod = |resources: Value| json!({"spec": {"containers": [{"name": "c", "resources": resources}]}});
        assert_eq!(
            validate(&pod(json!({"requests": {"cpu": "200m", "memory": "1Gi"}, "limits": {"cpu": "2000m", "memory": "1Gi"}})), &ranges),
            Err("[maximum cpu usage per Container is 1, but limit is 2, cpu max limit to request ratio per Container is 2, but provided ratio is 10.000000]".into())
        );
        assert_eq!(
            validate(
                &pod(
                    json!({"requests": {"cpu": "50m"}, "limits": {"cpu": "50m", "memory": "1Gi"}})
                ),
                &ranges
            ),
            Err("minimum cpu usage per Container is 100m, but request is 50m".into())
        );
        assert_eq!(
            validate(
                &pod(json!({"requests": {"cpu": "500m"}, "limits": {"cpu": "500m"}})),
                &ranges
            ),
            Err("maximum memory usage per Container is 1Gi.  No limit is specified".into())
        );
        assert_eq!(
            validate(
                &pod(
                    json!({"requests": {"cpu": "500m"}, "limits": {"cpu": "1", "memory": "512Mi"}})
                ),
                &ranges
            ),
            Ok(())
        );
    }

    #[test]
    fn pod_bounds_sum_the_containers() {
        let ranges = [range(json!({"type": "Pod", "max": {"memory": "1Gi"}}))];
        let pod = json!({"spec": {"containers": [
            {"name": "a", "resources": {"limits": {"memory": "768Mi"}}},
            {"name": "b", "resources": {"limits": {"memory": "512Mi"}}},
        ]}});
        assert_eq!(
            validate(&pod, &ranges),
            Err("maximum memory usage per Pod is 1Gi, but limit is 1280Mi".into())
        );
    }

    #[test]
    fn limit_range_defaults_follow_max_and_min() {
        let mut lr =
            range(json!({"type": "Container", "max": {"cpu": "2"}, "min": {"memory": "64Mi"}}));
        default_limit_range(&mut lr);
        let item = &lr["spec"]["limits"][0];
        assert_eq!(item["default"], json!({"cpu": "2"}));
        assert_eq!(
            item["defaultRequest"],
            json!({"cpu": "2", "memory": "64Mi"})
        );
    }
}
