//! The `scale` subresource of Deployments, ReplicaSets and ReplicationControllers (`autoscaling/v1` Scale), which
//! `kubectl scale` reads and patches.

use crate::patch::PatchType;
use api::ResourceInfo;
use serde_json::{json, Value};

use crate::errors::ApiError;
use crate::registry::{Registry, WriteOptions};

/// The object's Scale: spec.replicas, status.replicas and the selector as a string.
pub fn to_scale(object: &Value) -> Value {
    let selector = object.pointer("/spec/selector");
    // A ReplicationController's selector is a plain label map.
    let selector = if object["kind"] == "ReplicationController" {
        selector
            .and_then(Value::as_object)
            .map(|labels| {
                labels
                    .iter()
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default()
    } else {
        selector
            .and_then(|s| api::selectors::LabelSelector::from_label_selector_json(s).ok())
            .map(|s| s.to_string())
            .unwrap_or_default()
    };
    let meta = &object["metadata"];
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta["uid"],
            "resourceVersion": meta["resourceVersion"],
            "creationTimestamp": meta["creationTimestamp"],
        },
        "spec": {"replicas": object.pointer("/spec/replicas").cloned().unwrap_or(json!(1))},
        "status": {
            "replicas": object.pointer("/status/replicas").cloned().unwrap_or(json!(0)),
            "selector": selector,
        },
    })
}

/// What GET (`change` = None), PUT (a Scale) or PATCH (a patch of the Scale) of `scale` does.
pub async fn serve(
    registry: &Registry,
    resource: &'static ResourceInfo,
    namespace: Option<&str>,
    name: &str,
    change: Option<(PatchType, &[u8])>,
    write: &WriteOptions,
) -> Result<Value, ApiError> {
    let current = registry.get(resource, namespace, name).await?;
    let scale = to_scale(&current);
    let Some((patch_type, body)) = change else {
        return Ok(scale);
    };
    // PUT comes as a merge patch: the body is the whole new Scale.
    let wanted = crate::patch::apply("Scale", &scale, body, patch_type, "kubectl", true)
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let replicas = wanted
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .ok_or_else(|| ApiError::bad_request("Scale.spec.replicas is required"))?;
    if replicas < 0 {
        return Err(ApiError::bad_request(format!(
            "Scale.autoscaling \"{name}\" is invalid: spec.replicas: Invalid value: {replicas}: must be greater than or equal to 0"
        )));
    }
    let patch = json!({"spec": {"replicas": replicas}}).to_string();
    let updated = registry
        .patch(
            resource,
            namespace,
            name,
            None,
            PatchType::Merge,
            patch.as_bytes(),
            false,
            write,
        )
        .await?;
    Ok(to_scale(&updated))
}
