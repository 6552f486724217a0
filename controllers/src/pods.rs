//! What the controllers need to know about a pod's state.

use k8s_openapi::api::core::v1::Pod;

use crate::owners::{controller_of, seconds};

/// The pods informer's index of pods by their controller's uid (`Store::by_index`).
pub const BY_CONTROLLER: &str = "controller-uid";
/// The pods informer's index of pods by the node they are bound to.
pub const BY_NODE: &str = "node";

/// The uid of the pod's controller: its bucket in [`BY_CONTROLLER`].
pub fn controller_uid(pod: &Pod) -> Option<String> {
    controller_of(&pod.metadata).map(|r| r.uid.clone())
}

/// The node the pod is bound to: its bucket in [`BY_NODE`].
pub fn node_name(pod: &Pod) -> Option<String> {
    pod.spec
        .as_ref()?
        .node_name
        .clone()
        .filter(|n| !n.is_empty())
}

/// Neither finished nor being deleted: counts towards a controller's replicas.
pub fn is_active(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none() && !is_terminal(pod)
}

/// Succeeded or Failed.
pub fn is_terminal(pod: &Pod) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed")
}

pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// The Ready condition is True.
pub fn is_ready(pod: &Pod) -> bool {
    ready_since(pod).is_some()
}

/// When the Ready condition last became True (0 if it does not say), if it is True.
fn ready_since(pod: &Pod) -> Option<i64> {
    pod.status
        .as_ref()?
        .conditions
        .as_deref()?
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")
        .map(|c| c.last_transition_time.as_ref().map(seconds).unwrap_or(0))
}

/// Ready for at least `min_ready_seconds` at `now` (seconds since the epoch).
pub fn is_available(pod: &Pod, min_ready_seconds: i32, now: i64) -> bool {
    match ready_since(pod) {
        Some(since) => min_ready_seconds <= 0 || since + i64::from(min_ready_seconds) <= now,
        None => false,
    }
}

pub fn is_scheduled(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
}

/// Restarts of all its containers (OnFailure jobs count them as failures).
pub fn restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .map(|cs| cs.iter().map(|c| c.restart_count).sum())
        .unwrap_or(0)
}

/// A new pod from a controller's template: `generateName` from `prefix`, the template's labels
/// (plus `extra_labels`) and annotations, and the controller reference.
pub fn from_template(
    template: &k8s_openapi::api::core::v1::PodTemplateSpec,
    namespace: &str,
    prefix: &str,
    owner: k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
    extra_labels: &[(&str, &str)],
) -> Pod {
    let meta = template.metadata.clone().unwrap_or_default();
    let mut labels = meta.labels.unwrap_or_default();
    for (k, v) in extra_labels {
        labels.insert((*k).to_string(), (*v).to_string());
    }
    Pod {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            generate_name: Some(format!("{prefix}-")),
            namespace: Some(namespace.to_string()),
            labels: Some(labels),
            annotations: meta.annotations,
            finalizers: meta.finalizers,
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        spec: template.spec.clone(),
        status: None,
    }
}
