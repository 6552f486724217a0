//! NodeRestriction: what a node host (a certificate in `system:nodes`) may write, beyond what
//! the node authorizer lets it reach.
//!
//! The node authorizer decides which objects a host may touch — pods bound to its nodes, its
//! own Nodes — but not what it may put in them. As in Kubernetes, a node may create only mirror
//! pods (annotation `kubernetes.io/config.mirror`) bound to itself, which may not reference a
//! service account, secrets, configmaps or persistent volume claims: otherwise a pod naming any
//! secret would make the node authorizer hand that secret to the host. And a node may not set
//! or change labels in the `kubernetes.io` and `k8s.io` namespaces other than the kubelet's own,
//! nor the `node-restriction.kubernetes.io` ones that steer workloads — nor, in kemu, the
//! [`OWNER_LABEL`] that says which host owns the Node.
//!
//! Pure functions of the objects; the caller words the refusal as a 403 on the object.

use std::collections::BTreeSet;

use api::ResourceInfo;
use serde_json::Value;

use crate::authz::node::{pod_references_any, OWNER_LABEL};
use crate::errors::ApiError;

/// A node host's create of `object` (named `name`): pods must be plain mirror pods, Nodes may
/// carry only the labels a node may set.
pub fn admit_create(resource: &ResourceInfo, name: &str, object: &Value) -> Result<(), ApiError> {
    if !resource.group.is_empty() {
        return Ok(());
    }
    let verdict = match resource.plural {
        "pods" => admit_pod_create(object),
        "nodes" => admit_node_write(name, None, object),
        _ => Ok(()),
    };
    verdict.map_err(|why| ApiError::forbidden(resource, name, &why))
}

/// A node host's update or patch of `current` into `next`: a Node's labels change only where a
/// node may change them.
pub fn admit_update(
    resource: &ResourceInfo,
    name: &str,
    current: &Value,
    next: &Value,
) -> Result<(), ApiError> {
    if !resource.group.is_empty() || resource.plural != "nodes" {
        return Ok(());
    }
    admit_node_write(name, Some(current), next)
        .map_err(|why| ApiError::forbidden(resource, name, &why))
}

/// The annotation that marks a mirror pod (the API's copy of a static pod).
pub const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// The labels a kubelet sets on its Node itself, which a node may write.
const KUBELET_LABELS: &[&str] = &[
    "kubernetes.io/hostname",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "failure-domain.beta.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
];

/// Label namespaces (and their subdomains) a node may write freely within `kubernetes.io`.
const KUBELET_LABEL_NAMESPACES: &[&str] = &["kubelet.kubernetes.io", "node.kubernetes.io"];

/// Whether `pod` is a mirror pod.
pub fn is_mirror_pod(pod: &Value) -> bool {
    pod.pointer("/metadata/annotations")
        .and_then(|a| a.get(MIRROR_POD_ANNOTATION))
        .is_some()
}

/// A node's create of `pod`; `Err` is why it is forbidden.
pub fn admit_pod_create(pod: &Value) -> Result<(), String> {
    let node = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !is_mirror_pod(pod) {
        return Err(format!(
            "pod does not have \"{MIRROR_POD_ANNOTATION}\" annotation, node \"{node}\" can only create mirror pods"
        ));
    }
    let owners = pod
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    match owners {
        [] => {}
        [owner] => {
            let text = |field: &str| owner.get(field).and_then(Value::as_str).unwrap_or("");
            if text("apiVersion") != "v1" || text("kind") != "Node" || text("name") != node {
                return Err(format!(
                    "node \"{node}\" can only create pods with an owner reference set to itself"
                ));
            }
            if owner.get("controller").and_then(Value::as_bool) != Some(true) {
                return Err(format!(
                    "node \"{node}\" can only create pods with a controller owner reference set to itself"
                ));
            }
            if owner.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true) {
                return Err(format!(
                    "node \"{node}\" must not set blockOwnerDeletion on an owner reference"
                ));
            }
        }
        _ => {
            return Err(format!(
                "node \"{node}\" can only create pods with a single owner reference set to itself"
            ))
        }
    }
    let service_account = ["serviceAccountName", "serviceAccount"]
        .iter()
        .any(|field| {
            pod.pointer(&format!("/spec/{field}"))
                .and_then(Value::as_str)
                .is_some_and(|s| !s.is_empty())
        });
    if service_account {
        return Err(format!(
            "node \"{node}\" can not create pods that reference a service account"
        ));
    }
    if pod_references_any(pod, "secrets") {
        return Err(format!(
            "node \"{node}\" can not create pods that reference secrets"
        ));
    }
    if pod_references_any(pod, "configmaps") {
        return Err(format!(
            "node \"{node}\" can not create pods that reference configmaps"
        ));
    }
    let volumes = pod
        .pointer("/spec/volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    for volume in volumes {
        if volume.get("persistentVolumeClaim").is_some() || volume.get("ephemeral").is_some() {
            return Err(format!(
                "node \"{node}\" can not create pods that reference persistentvolumeclaims"
            ));
        }
    }
    Ok(())
}

/// A node's create (`old` is `None`) or update of Node `name`: the labels it adds, removes or
/// changes must be ones a node may write.
pub fn admit_node_write(name: &str, old: Option<&Value>, new: &Value) -> Result<(), String> {
    let labels = |node: Option<&Value>| -> Vec<(String, Value)> {
        node.and_then(|n| n.pointer("/metadata/labels"))
            .and_then(Value::as_object)
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default()
    };
    let (before, after) = (labels(old), labels(Some(new)));
    let value_in = |set: &[(String, Value)], key: &str| {
        set.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
    };
    let modified: BTreeSet<&str> = before
        .iter()
        .chain(after.iter())
        .map(|(k, _)| k.as_str())
        .filter(|k| value_in(&before, k) != value_in(&after, k))
        .collect();
    let forbidden: Vec<&str> = modified
        .into_iter()
        .filter(|label| {
            // The owner label is set by the API server on create; a host may never move it.
            (*label == OWNER_LABEL && old.is_some()) || forbidden_label(label)
        })
        .collect();
    if forbidden.is_empty() {
        return Ok(());
    }
    let listed = forbidden.join(", ");
    Err(match old {
        None => format!("node \"{name}\" is not allowed to set the following labels: {listed}"),
        Some(_) => format!("node \"{name}\" is not allowed to modify labels: {listed}"),
    })
}

/// Whether a node may not set `label` on itself.
fn forbidden_label(label: &str) -> bool {
    let namespace = label.split_once('/').map_or("", |(ns, _)| ns);
    let within = |domain: &str| namespace == domain || namespace.ends_with(&format!(".{domain}"));
    if within("node-restriction.kubernetes.io") {
        return true;
    }
    let kubernetes = within("kubernetes.io") || within("k8s.io");
    let kubelet =
        KUBELET_LABELS.contains(&label) || KUBELET_LABEL_NAMESPACES.iter().any(|d| within(d));
    kubernetes && !kubelet
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn mirror(spec: Value) -> Value {
        let mut spec = spec;
        spec["nodeName"] = json!("n1");
        json!({
            "metadata": {"name": "static-web-n1", "annotations": {MIRROR_POD_ANNOTATION: "abc"}},
            "spec": spec,
        })
    }

    #[test]
    fn only_plain_mirror_pods() {
        let plain = json!({"containers": [{"name": "c", "image": "pause"}]});
        assert_eq!(admit_pod_create(&mirror(plain.clone())), Ok(()));

        let mut not_mirror = mirror(plain.clone());
        not_mirror["metadata"]["annotations"] = json!({});
        assert_eq!(
            admit_pod_create(&not_mirror).expect_err("not a mirror pod"),
            "pod does not have \"kubernetes.io/config.mirror\" annotation, node \"n1\" can only create mirror pods"
        );

        let refused = |spec: Value, why: &str| {
            let err = admit_pod_create(&mirror(spec)).expect_err(why);
            assert!(err.contains(why), "{err}");
        };
        refused(
            json!({"serviceAccountName": "builder", "containers": []}),
            "can not create pods that reference a service account",
        );
        refused(
            json!({"containers": [{"name": "c", "env": [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "admin-token", "key": "k"}}}]}]}),
            "can not create pods that reference secrets",
        );
        refused(
            json!({"imagePullSecrets": [{"name": "pull"}], "containers": []}),
            "can not create pods that reference secrets",
        );
        refused(
            json!({"volumes": [{"name": "v", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "s"}}}], "containers": []}),
            "can not create pods that reference secrets",
        );
        refused(
            json!({"containers": [{"name": "c", "envFrom": [{"configMapRef": {"name": "cfg"}}]}]}),
            "can not create pods that reference configmaps",
        );
        refused(
            json!({"volumes": [{"name": "v", "projected": {"sources": [{"configMap": {"name": "cfg"}}]}}], "containers": []}),
            "can not create pods that reference configmaps",
        );
        refused(
            json!({"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}], "containers": []}),
            "can not create pods that reference persistentvolumeclaims",
        );
    }

    #[test]
    fn owner_reference_must_be_the_node() {
        let mut pod = mirror(json!({"containers": []}));
        pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "u", "controller": true}]);
        assert_eq!(admit_pod_create(&pod), Ok(()));
        pod["metadata"]["ownerReferences"][0]["name"] = json!("n2");
        assert!(admit_pod_create(&pod).is_err());
        pod["metadata"]["ownerReferences"] = json!([{}, {}]);
        assert!(admit_pod_create(&pod)
            .expect_err("two owners")
            .contains("a single owner reference"));
    }

    #[test]
    fn node_labels_outside_the_kubelet_set_are_refused() {
        let node = |labels: Value| json!({"metadata": {"name": "n1", "labels": labels}});
        let own = node(json!({OWNER_LABEL: "h1", "kubernetes.io/hostname": "n1"}));
        assert_eq!(admit_node_write("n1", None, &own), Ok(()));
        // Labels of the node's own: anything outside kubernetes.io, and the kubelet's.
        let changed = node(json!({
            OWNER_LABEL: "h1", "kubernetes.io/hostname": "n1", "team": "a",
            "node.kubernetes.io/pool": "x", "topology.kubernetes.io/zone": "z",
        }));
        assert_eq!(admit_node_write("n1", Some(&own), &changed), Ok(()));

        let handed_over = node(json!({OWNER_LABEL: "h2", "kubernetes.io/hostname": "n1"}));
        assert_eq!(
            admit_node_write("n1", Some(&own), &handed_over),
            Err("node \"n1\" is not allowed to modify labels: kemu.dev/node-host".into())
        );
        let dropped = node(json!({"kubernetes.io/hostname": "n1"}));
        assert!(admit_node_write("n1", Some(&own), &dropped).is_err());

        let steering = node(json!({
            OWNER_LABEL: "h1", "node-restriction.kubernetes.io/dedicated": "db",
            "node-role.kubernetes.io/control-plane": "",
        }));
        assert_eq!(
            admit_node_write("n1", None, &steering),
            Err("node \"n1\" is not allowed to set the following labels: node-restriction.kubernetes.io/dedicated, node-role.kubernetes.io/control-plane".into())
        );
        // A forbidden label already there and left alone is no modification.
        assert_eq!(admit_node_write("n1", Some(&steering), &steering), Ok(()));
    }
}
