//! The `scale` subresource of Deployments, ReplicaSets, StatefulSets, ReplicationControllers and
//! custom resources that declare one (`autoscaling/v1` Scale), which `kubectl scale` reads and
//! patches.

use crate::patch::PatchType;
use api::ResourceInfo;
use serde_json::{json, Value};

use crate::crd::definition::ScalePaths;
use crate::crd::output::{json_path, set_path};
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

/// A custom object's Scale, read at the paths its CRD's scale subresource names (absent
/// counts read as 0, as kube-apiserver reads them).
fn custom_scale(object: &Value, paths: &ScalePaths) -> Value {
    let count = |path: &str| json_path(object, path).cloned().unwrap_or(json!(0));
    let selector = paths
        .label_selector
        .as_deref()
        .and_then(|p| json_path(object, p))
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut scale = to_scale(object);
    scale["spec"]["replicas"] = count(&paths.spec_replicas);
    scale["status"] = json!({"replicas": count(&paths.status_replicas), "selector": selector});
    scale
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
    let custom = registry.custom().of(resource);
    let paths = custom.as_ref().and_then(|c| c.scale.as_ref());
    let scale_of = |object: &Value| match paths {
        Some(paths) => custom_scale(object, paths),
        None => to_scale(object),
    };
    let current = registry.get(resource, namespace, name).await?;
    let scale = scale_of(&current);
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
    let mut patch = json!({});
    let spec_path = paths.map_or(".spec.replicas", |p| p.spec_replicas.as_str());
    if !set_path(&mut patch, spec_path, json!(replicas)) {
        return Err(ApiError::internal(format!(
            "cannot write replicas at {spec_path}"
        )));
    }
    let patch = patch.to_string();
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
    Ok(scale_of(&updated))
}
