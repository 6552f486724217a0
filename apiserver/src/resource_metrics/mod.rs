//! `metrics.k8s.io/v1beta1`: NodeMetrics and PodMetrics, as metrics-server serves them, computed
//! on each read from the pods and nodes in the watch cache with the declared usage model
//! ([`usage`]). What `kubectl top` and the HorizontalPodAutoscaler controller read.
//!
//! The numbers are a function of the objects and the time, so every API server replica gives
//! the same answer and nothing is written or scraped: no node host has to report, and a test
//! that changes a pod's declaration sees the new usage on its next read.

pub mod usage;

use std::sync::Arc;

use api::ResourceInfo;
use chrono::{DateTime, SubsecRound, Utc};
use serde_json::{json, Value};
use tracing::debug;

use crate::errors::ApiError;
use crate::registry::{ListOptions, ListResult, Registry};
use crate::watch_cache::CachedObject;
use usage::Usage;

pub const GROUP: &str = "metrics.k8s.io";
/// The window metrics-server reports with its default 15 s resolution.
const WINDOW: &str = "15s";
/// What a node's system daemons use beside its pods (a node's `kemu.dev/usage` replaces it).
const SYSTEM_OVERHEAD: Usage = Usage {
    cpu_nanos: 50_000_000,
    memory_nanos: 256 * 1024 * 1024 * 1_000_000_000,
};

pub fn is_metrics(resource: &ResourceInfo) -> bool {
    resource.group == GROUP
}

/// The resource a metrics resource is computed from (`pods` or `nodes`).
fn source(resource: &ResourceInfo) -> Result<&'static ResourceInfo, ApiError> {
    api::resources::find("", "v1", resource.plural)
        .ok_or_else(|| ApiError::internal("no source resource for metrics"))
}

/// Whether a pod has usage to report: running on a node, as metrics-server reports only pods
/// the kubelet runs.
pub(crate) fn reported(pod: &Value) -> bool {
    pod.pointer("/status/phase").and_then(Value::as_str) == Some("Running")
        && pod
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty())
}

/// A pod's usage per container; an unreadable declaration counts as undeclared.
fn containers(pod: &Value, now: DateTime<Utc>) -> Vec<(String, Usage)> {
    usage::pod_usage(pod, now).unwrap_or_else(|e| {
        debug!(pod = crate::meta::name(pod), error = %e, "usage declaration ignored");
        let mut undeclared = pod.clone();
        if let Some(a) = undeclared
            .pointer_mut("/metadata/annotations")
            .and_then(Value::as_object_mut)
        {
            a.retain(|k, _| !k.starts_with(usage::ANNOTATION));
        }
        usage::pod_usage(&undeclared, now).unwrap_or_default()
    })
}

fn metadata(object: &Value, now: &str) -> Value {
    let mut meta = json!({"name": object["metadata"]["name"], "creationTimestamp": now});
    if let Some(ns) = object.pointer("/metadata/namespace") {
        meta["namespace"] = ns.clone();
    }
    if let Some(labels) = object.pointer("/metadata/labels") {
        meta["labels"] = labels.clone();
    }
    meta
}

/// A pod's PodMetrics at `now`.
pub fn pod_metrics(pod: &Value, now: DateTime<Utc>) -> Value {
    let stamp = stamp(now);
    let containers: Vec<Value> = containers(pod, now)
        .into_iter()
        .map(|(name, usage)| json!({"name": name, "usage": usage.to_json()}))
        .collect();
    json!({
        "kind": "PodMetrics",
        "apiVersion": "metrics.k8s.io/v1beta1",
        "metadata": metadata(pod, &stamp),
        "timestamp": stamp,
        "window": WINDOW,
        "containers": containers,
    })
}

/// A node's NodeMetrics at `now`: its running pods' usage plus the system overhead.
pub fn node_metrics<'p>(
    node: &Value,
    pods: impl Iterator<Item = &'p Value>,
    now: DateTime<Utc>,
) -> Value {
    let stamp = stamp(now);
    let mut total = Usage::declared_by(node, SYSTEM_OVERHEAD).unwrap_or(SYSTEM_OVERHEAD);
    for pod in pods.filter(|p| reported(p)) {
        for (_, usage) in containers(pod, now) {
            total.add(usage);
        }
    }
    json!({
        "kind": "NodeMetrics",
        "apiVersion": "metrics.k8s.io/v1beta1",
        "metadata": metadata(node, &stamp),
        "timestamp": stamp,
        "window": WINDOW,
        "usage": total.to_json(),
    })
}

/// metrics-server's timestamps: whole seconds.
pub(crate) fn stamp(now: DateTime<Utc>) -> String {
    now.trunc_subsecs(0)
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// metrics-server's NotFound: `podmetrics.metrics.k8s.io "ns/name" not found`.
fn not_found(resource: &ResourceInfo, namespace: Option<&str>, name: &str) -> ApiError {
    let shown = match namespace {
        Some(ns) if resource.namespaced => format!("{ns}/{name}"),
        _ => name.to_string(),
    };
    ApiError::NotFound {
        message: format!(
            "{}.{GROUP} \"{shown}\" not found",
            resource.kind.to_lowercase()
        ),
        name: name.to_string(),
        group: GROUP.into(),
        kind: resource.kind.to_lowercase(),
    }
}

/// The OpenAPI schema of NodeMetrics or PodMetrics under metrics-server's definition name
/// (`kubectl explain` reads it); apiVersion, kind and metadata are added by the caller.
pub fn openapi_schema(kind: &str) -> Option<(&'static str, Value)> {
    let usage = json!({
        "description": "The memory usage is the memory working set.",
        "type": "object",
        "additionalProperties": {"type": "string"},
    });
    let timestamp = json!({
        "description": "The following fields define time interval from which metrics were collected from the interval [Timestamp-Window, Timestamp].",
        "type": "string",
        "format": "date-time",
    });
    let window = json!({"type": "string"});
    match kind {
        "NodeMetrics" => Some((
            "io.k8s.metrics.pkg.apis.metrics.v1beta1.NodeMetrics",
            json!({
                "description": "NodeMetrics sets resource usage metrics of a node.",
                "type": "object",
                "required": ["timestamp", "window", "usage"],
                "properties": {"timestamp": timestamp, "window": window, "usage": usage},
            }),
        )),
        "PodMetrics" => Some((
            "io.k8s.metrics.pkg.apis.metrics.v1beta1.PodMetrics",
            json!({
                "description": "PodMetrics sets resource usage metrics of a pod.",
                "type": "object",
                "required": ["timestamp", "window", "containers"],
                "properties": {
                    "timestamp": timestamp,
                    "window": window,
                    "containers": {
                        "description": "Metrics for all containers are collected within the same time window.",
                        "type": "array",
                        "x-kubernetes-list-type": "atomic",
                        "items": {
                            "description": "ContainerMetrics sets resource usage metrics of a container.",
                            "type": "object",
                            "required": ["name", "usage"],
                            "properties": {
                                "name": {"description": "Container name corresponding to the one from pod.spec.containers.", "type": "string"},
                                "usage": usage,
                            },
                        },
                    },
                },
            }),
        )),
        _ => None,
    }
}

/// GET of one NodeMetrics or PodMetrics.
pub async fn get(
    registry: &Registry,
    resource: &ResourceInfo,
    namespace: Option<&str>,
    name: &str,
) -> Result<Value, ApiError> {
    let source = source(resource)?;
    let object = match registry.get(source, namespace, name).await {
        Ok(o) => o,
        Err(ApiError::NotFound { .. }) => return Err(not_found(resource, namespace, name)),
        Err(e) => return Err(e),
    };
    let now = Utc::now();
    if source.plural == "pods" {
        if !reported(&object) {
            return Err(not_found(resource, namespace, name));
        }
        return Ok(pod_metrics(&object, now));
    }
    let pods = pods_on_nodes(registry, &[name.to_string()]).await?;
    Ok(node_metrics(&object, pods.iter(), now))
}

/// LIST of NodeMetrics or PodMetrics: the pods (or nodes) the options select, each with its
/// metrics; pages follow the source's keys, so continue tokens work as on the source.
pub async fn list(
    registry: &Registry,
    resource: &ResourceInfo,
    namespace: Option<&str>,
    options: &ListOptions,
) -> Result<ListResult, ApiError> {
    let source = source(resource)?;
    let listed = registry.list(source, namespace, options).await?;
    let now = Utc::now();
    let objects = listed
        .items
        .iter()
        .map(|o| o.value())
        .collect::<Result<Vec<_>, _>>()?;
    let computed: Vec<Value> = if source.plural == "pods" {
        objects
            .iter()
            .filter(|p| reported(p))
            .map(|p| pod_metrics(p, now))
            .collect()
    } else {
        let names: Vec<String> = objects
            .iter()
            .map(|n| crate::meta::name(n).to_string())
            .collect();
        let pods = pods_on_nodes(registry, &names).await?;
        objects
            .iter()
            .map(|node| {
                let name = crate::meta::name(node);
                let on_node = pods.iter().filter(move |p| {
                    p.pointer("/spec/nodeName").and_then(Value::as_str) == Some(name)
                });
                node_metrics(node, on_node, now)
            })
            .collect()
    };
    let items = computed
        .iter()
        .map(|m| {
            let key = resource.key(crate::meta::namespace(m), crate::meta::name(m));
            Arc::new(CachedObject::from_value(resource.storage, &key, m, 0))
        })
        .collect();
    Ok(ListResult {
        items,
        resource_version: listed.resource_version,
        continue_token: listed.continue_token,
    })
}

/// The running pods bound to any of `nodes` (one node: by the `spec.nodeName` index; more:
/// every pod once).
async fn pods_on_nodes(registry: &Registry, nodes: &[String]) -> Result<Vec<Value>, ApiError> {
    let pods = api::resources::pods();
    let options = ListOptions {
        field_selector: match nodes {
            [one] => Some(format!("spec.nodeName={one}")),
            _ => None,
        },
        resource_version: Some("0".into()),
        ..Default::default()
    };
    let listed = registry.list(pods, None, &options).await?;
    listed
        .items
        .iter()
        .map(|o| o.value())
        .filter(|p| p.as_ref().map_or(true, reported))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_usage_is_its_running_pods_plus_the_overhead() {
        let now = Utc::now();
        let pod = |phase: &str| {
            json!({"metadata": {"name": "p", "namespace": "d", "labels": {"app": "x"}},
                "spec": {"nodeName": "n1", "containers": [
                    {"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]},
                "status": {"phase": phase}})
        };
        let (running, pending) = (pod("Running"), pod("Pending"));
        let node = json!({"metadata": {"name": "n1", "labels": {"zone": "a"}}});
        let metrics = node_metrics(&node, [&running, &running, &pending].into_iter(), now);
        assert_eq!(metrics["usage"]["cpu"], "150000000n");
        assert_eq!(
            metrics["usage"]["memory"],
            format!("{}Ki", 256 * 1024 + 64 * 1024)
        );
        assert_eq!(metrics["metadata"]["labels"]["zone"], "a");
        assert_eq!(metrics["window"], "15s");
        let p = pod_metrics(&running, now);
        assert_eq!(p["metadata"]["namespace"], "d");
        assert_eq!(p["containers"][0]["usage"]["cpu"], "50000000n");
        assert!(!reported(&pending));
    }
}
