//! The node authorizer: what a node host (a certificate in `system:nodes`) may do.
//!
//! A node host runs many nodes, so its identity is not one node's name as a kubelet's is in
//! Kubernetes (`system:node:<name>`). Instead the API server records which host registered each
//! Node: a node host's create of a Node gets the label [`OWNER_LABEL`] = the host's user name
//! (set by the fronts, whatever the body says), and from then on that host — and no other — may
//! write the Node, its status and its Lease, and the status of pods bound to it. The decision
//! reads the watch cache through [`NodeGraph`], so it costs a map lookup or two.
//!
//! Allowed, for host `h` (its nodes = Nodes labelled `kemu.dev/node-host=h`):
//! - nodes: get, list, watch; create when no other host owns the name; update, patch (also
//!   `status`) and delete of its nodes;
//! - leases in `kube-node-lease` named after its nodes: get, create, update, patch, delete;
//! - pods: list and watch only with `fieldSelector=spec.nodeName=<its node>`; get, delete,
//!   and update/patch of `status` for pods bound to its nodes (and get of a pod that does not
//!   exist, answered 404: mirror pods are looked up before they are created); create of
//!   (mirror) pods bound to its nodes;
//! - persistentvolumeclaims: get, when a pod bound to one of its nodes uses them; and
//!   persistentvolumes: get, when bound to such a claim;
//! - volumeattachments: get, of its nodes; csidrivers: get, list, watch (as the `system:node`
//!   role grants them);
//! - events (core and events.k8s.io): create, update, patch;
//! - configmaps and secrets: get, and list and watch of the one object (with
//!   `fieldSelector=metadata.name=<name>`), when a pod bound to one of its nodes uses them.
//!
//! Anything else gets no opinion here (RBAC may still allow it).

use api::selectors::FieldSelector;
use serde_json::Value;

use super::{Attributes, Target};
use crate::authn::{UserInfo, NODES};

/// The label naming the node host that registered a Node.
pub const OWNER_LABEL: &str = "kemu.dev/node-host";
/// Where node leases live.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";

/// What the node authorizer needs to know about the cluster.
pub trait NodeGraph {
    /// `None` when node `name` does not exist; else the host that registered it, if any.
    fn node_owner(&self, name: &str) -> Option<Option<String>>;
    /// The node pod `namespace/name` is bound to ("" when unbound); `None` if no such pod.
    fn pod_node(&self, namespace: &str, name: &str) -> Option<String>;
    /// Whether a pod in `namespace` bound to one of `host`'s nodes uses the configmap,
    /// secret or claim (`kind` is `configmaps`, `secrets` or `persistentvolumeclaims`) named
    /// `name`.
    fn pod_uses(&self, host: &str, namespace: &str, kind: &str, name: &str) -> bool;
    /// The claim (`namespace`, `name`) volume `name`'s claimRef names; `None` if none.
    fn volume_claim(&self, name: &str) -> Option<(String, String)>;
    /// The node VolumeAttachment `name` attaches to; `None` if no such attachment.
    fn attachment_node(&self, name: &str) -> Option<String>;
}

/// The node authorizer's answer.
#[derive(Debug, PartialEq, Eq)]
pub enum NodeDecision {
    Allow,
    /// Not allowed here; the reason is appended to the 403 message.
    NoOpinion(String),
}

/// Decides a request of node host `attributes.user`.
pub fn decide(attributes: &Attributes<'_>, graph: &dyn NodeGraph) -> NodeDecision {
    let host = attributes.user.name.as_str();
    let Target::Resource(r) = &attributes.target else {
        return no_relationship(host);
    };
    let verb = attributes.verb;
    let owns = |node: &str| -> bool {
        !node.is_empty() && graph.node_owner(node).flatten().as_deref() == Some(host)
    };
    let created_name = || {
        r.object
            .and_then(|o| o.pointer("/metadata/name"))
            .and_then(Value::as_str)
            .unwrap_or(r.name)
    };
    let allowed = match (r.group, r.resource, r.subresource) {
        ("", "nodes", "" | "status") => match verb {
            "get" | "list" | "watch" => true,
            "create" if r.subresource.is_empty() => {
                let name = created_name();
                !name.is_empty()
                    && match graph.node_owner(name) {
                        None => true,
                        Some(owner) => owner.as_deref() == Some(host),
                    }
            }
            "update" | "patch" => owns(r.name),
            "delete" => r.subresource.is_empty() && owns(r.name),
            _ => false,
        },
        ("coordination.k8s.io", "leases", "") if r.namespace == LEASE_NAMESPACE => match verb {
            "get" | "update" | "patch" | "delete" => owns(r.name),
            "create" => owns(created_name()),
            _ => false,
        },
        ("", "pods", sub) => {
            let bound_node = || graph.pod_node(r.namespace, r.name).unwrap_or_default();
            match (verb, sub) {
                ("list" | "watch", "") => r
                    .field_selector
                    .and_then(|s| FieldSelector::parse(s).ok())
                    .and_then(|s| s.exact("spec.nodeName").map(str::to_string))
                    .is_some_and(|node| owns(&node)),
                // A pod that does not exist may be asked for (and is answered 404): the node
                // host looks up its mirror pods before creating them.
                ("get", "" | "status") => match graph.pod_node(r.namespace, r.name) {
                    None => true,
                    Some(node) => owns(&node),
                },
                ("delete", "") | ("update" | "patch", "status") => owns(&bound_node()),
                ("create", "") => owns(
                    r.object
                        .and_then(|o| o.pointer("/spec/nodeName"))
                        .and_then(Value::as_str)
                        .unwrap_or(""),
                ),
                _ => false,
            }
        }
        ("" | "events.k8s.io", "events", "") => matches!(verb, "create" | "update" | "patch"),
        ("", kind @ ("configmaps" | "secrets"), "") => match verb {
            "get" => graph.pod_uses(host, r.namespace, kind, r.name),
            // The kubelet's watch of one object: `fieldSelector=metadata.name=NAME`.
            "list" | "watch" if !r.namespace.is_empty() => r
                .field_selector
                .and_then(|s| FieldSelector::parse(s).ok())
                .and_then(|s| s.exact("metadata.name").map(str::to_string))
                .is_some_and(|name| graph.pod_uses(host, r.namespace, kind, &name)),
            _ => false,
        },
        ("", "persistentvolumeclaims", "") => {
            verb == "get" && graph.pod_uses(host, r.namespace, "persistentvolumeclaims", r.name)
        }
        ("", "persistentvolumes", "") => {
            verb == "get"
                && graph
                    .volume_claim(r.name)
                    .is_some_and(|(namespace, claim)| {
                        graph.pod_uses(host, &namespace, "persistentvolumeclaims", &claim)
                    })
        }
        ("storage.k8s.io", "volumeattachments", "") => {
            verb == "get" && graph.attachment_node(r.name).is_some_and(|n| owns(&n))
        }
        ("storage.k8s.io", "csidrivers", "") => matches!(verb, "get" | "list" | "watch"),
        _ => false,
    };
    if allowed {
        NodeDecision::Allow
    } else {
        no_relationship(host)
    }
}

fn no_relationship(host: &str) -> NodeDecision {
    NodeDecision::NoOpinion(format!(
        "no relationship found between node host '{host}' and this object"
    ))
}

/// A node host's create or update of a Node records the host as its owner, whatever the body
/// says; the node authorizer has already checked the host may write that Node.
pub fn claim(user: &UserInfo, resource: &api::ResourceInfo, object: &mut Value) {
    if !user.in_group(NODES) || !resource.group.is_empty() || resource.plural != "nodes" {
        return;
    }
    if !object.get("metadata").is_some_and(Value::is_object) {
        return;
    }
    let metadata = &mut object["metadata"];
    if !metadata.get("labels").is_some_and(Value::is_object) {
        metadata["labels"] = serde_json::json!({});
    }
    metadata["labels"][OWNER_LABEL] = Value::String(user.name.clone());
}

/// Whether `pod` refers to the configmap, secret or claim `name` (volumes, projected sources,
/// env, envFrom of every container, and image pull secrets).
pub fn pod_references(pod: &Value, kind: &str, name: &str) -> bool {
    find_reference(pod, kind, &mut |n| n == name)
}

/// Whether `pod` refers to any configmap or secret (`kind` is `configmaps` or `secrets`).
pub fn pod_references_any(pod: &Value, kind: &str) -> bool {
    find_reference(pod, kind, &mut |_| true)
}

/// Visits the names of the configmaps or secrets `pod` refers to until `found` says yes, as
/// Kubernetes' `VisitPodSecretNames` / `VisitPodConfigmapNames` walk a pod.
fn find_reference(pod: &Value, kind: &str, found: &mut dyn FnMut(&str) -> bool) -> bool {
    let mut is = |v: Option<&Value>| v.and_then(Value::as_str).is_some_and(&mut *found);
    let secrets = kind == "secrets";
    let (volume_field, volume_name, env_ref, env_from_field) = if secrets {
        ("secret", "secretName", "secretKeyRef", "secretRef")
    } else {
        ("configMap", "name", "configMapKeyRef", "configMapRef")
    };
    fn list<'a>(v: Option<&'a Value>, field: &str) -> impl Iterator<Item = &'a Value> {
        v.and_then(|v| v.get(field))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
    }
    let spec = pod.get("spec");
    if kind == "persistentvolumeclaims" {
        return list(spec, "volumes").any(|v| is(v.pointer("/persistentVolumeClaim/claimName")));
    }
    if secrets {
        for pull in list(spec, "imagePullSecrets") {
            if is(pull.get("name")) {
                return true;
            }
        }
    }
    for volume in list(spec, "volumes") {
        if is(volume.get(volume_field).and_then(|v| v.get(volume_name))) {
            return true;
        }
        for source in list(volume.get("projected"), "sources") {
            if is(source.get(volume_field).and_then(|v| v.get("name"))) {
                return true;
            }
        }
        if secrets {
            // Volume plugins that take credentials: `secretRef` (cephfs, cinder, flexVolume,
            // iscsi, rbd, scaleIO, storageos), CSI's node publish secret, azureFile's name.
            let Some(source) = volume.as_object() else {
                continue;
            };
            for (field, plugin) in source {
                if is(plugin.pointer("/secretRef/name"))
                    || is(plugin.pointer("/nodePublishSecretRef/name"))
                    || (field == "azureFile" && is(plugin.get("secretName")))
                {
                    return true;
                }
            }
        }
    }
    for containers in ["initContainers", "containers", "ephemeralContainers"] {
        for container in list(spec, containers) {
            for var in list(Some(container), "env") {
                if is(var
                    .pointer("/valueFrom")
                    .and_then(|v| v.get(env_ref))
                    .and_then(|r| r.get("name")))
                {
                    return true;
                }
            }
            for source in list(Some(container), "envFrom") {
                if is(source.get(env_from_field).and_then(|r| r.get("name"))) {
                    return true;
                }
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authz::ResourceAttributes;
    use serde_json::json;
    use std::collections::HashMap;

    /// nodes n1, n2 of host h1; n3 of h2; n4 unowned. Pods: dev/a on n1, dev/b on n3, dev/c
    /// unbound. dev/a mounts configmap cfg, secret tok and claim data; volume pv-data is bound
    /// to it, pv-other to another claim; attachment csi-1 is on n1, csi-3 on n3.
    struct Graph {
        owners: HashMap<&'static str, Option<&'static str>>,
        pods: HashMap<(&'static str, &'static str), &'static str>,
    }

    fn graph() -> Graph {
        Graph {
            owners: HashMap::from([
                ("n1", Some("h1")),
                ("n2", Some("h1")),
                ("n3", Some("h2")),
                ("n4", None),
            ]),
            pods: HashMap::from([
                (("dev", "a"), "n1"),
                (("dev", "b"), "n3"),
                (("dev", "c"), ""),
            ]),
        }
    }

    impl NodeGraph for Graph {
        fn node_owner(&self, name: &str) -> Option<Option<String>> {
            self.owners.get(name).map(|o| o.map(String::from))
        }
        fn pod_node(&self, namespace: &str, name: &str) -> Option<String> {
            self.pods
                .iter()
                .find(|((ns, n), _)| *ns == namespace && *n == name)
                .map(|(_, node)| node.to_string())
        }
        fn pod_uses(&self, host: &str, namespace: &str, kind: &str, name: &str) -> bool {
            let pod_a = json!({"spec": {
                "volumes": [{"name": "v", "configMap": {"name": "cfg"}},
                            {"name": "d", "persistentVolumeClaim": {"claimName": "data"}}],
                "containers": [{"name": "c", "env": [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "tok", "key": "k"}}}]}]
            }});
            host == "h1" && namespace == "dev" && pod_references(&pod_a, kind, name)
        }
        fn volume_claim(&self, name: &str) -> Option<(String, String)> {
            match name {
                "pv-data" => Some(("dev".into(), "data".into())),
                "pv-other" => Some(("dev".into(), "other".into())),
                _ => None,
            }
        }
        fn attachment_node(&self, name: &str) -> Option<String> {
            match name {
                "csi-1" => Some("n1".into()),
                "csi-3" => Some("n3".into()),
                _ => None,
            }
        }
    }

    struct Ask<'a> {
        verb: &'a str,
        group: &'a str,
        resource: &'a str,
        subresource: &'a str,
        namespace: &'a str,
        name: &'a str,
        field_selector: Option<&'a str>,
        object: Option<&'a Value>,
    }

    fn ask(host: &str, a: Ask<'_>) -> bool {
        let user = UserInfo::new(host, "", vec!["system:nodes".into()]);
        let attributes = Attributes {
            user: &user,
            verb: a.verb,
            target: Target::Resource(ResourceAttributes {
                group: a.group,
                resource: a.resource,
                subresource: a.subresource,
                namespace: a.namespace,
                name: a.name,
                field_selector: a.field_selector,
                object: a.object,
            }),
        };
        decide(&attributes, &graph()) == NodeDecision::Allow
    }

    fn core<'a>(
        verb: &'a str,
        resource: &'a str,
        sub: &'a str,
        ns: &'a str,
        name: &'a str,
    ) -> Ask<'a> {
        Ask {
            verb,
            group: "",
            resource,
            subresource: sub,
            namespace: ns,
            name,
            field_selector: None,
            object: None,
        }
    }

    #[test]
    fn hosts_write_only_their_own_nodes() {
        assert!(ask("h1", core("patch", "nodes", "status", "", "n1")));
        assert!(ask("h1", core("update", "nodes", "", "", "n2")));
        assert!(!ask("h1", core("patch", "nodes", "status", "", "n3")));
        assert!(!ask("h1", core("patch", "nodes", "", "", "n4")));
        assert!(!ask("h1", core("delete", "nodes", "", "", "n3")));
        assert!(ask("h1", core("list", "nodes", "", "", "")));
        assert!(ask("h2", core("get", "nodes", "", "", "n1")));
        // Register: a new name or its own, never another host's.
        let new = json!({"metadata": {"name": "n9"}});
        let taken = json!({"metadata": {"name": "n3"}});
        let unowned = json!({"metadata": {"name": "n4"}});
        let create = |object| Ask {
            object: Some(object),
            ..core("create", "nodes", "", "", "")
        };
        assert!(ask("h1", create(&new)));
        assert!(!ask("h1", create(&taken)));
        assert!(ask("h2", create(&taken)));
        // An existing node nobody registered is not up for grabs.
        assert!(!ask("h1", create(&unowned)));
    }

    #[test]
    fn leases_of_own_nodes_only() {
        let lease = |verb, name| Ask {
            group: "coordination.k8s.io",
            ..core(verb, "leases", "", LEASE_NAMESPACE, name)
        };
        assert!(ask("h1", lease("update", "n1")));
        assert!(ask("h1", lease("get", "n2")));
        assert!(!ask("h1", lease("update", "n3")));
        let mine = json!({"metadata": {"name": "n1"}});
        let theirs = json!({"metadata": {"name": "n3"}});
        assert!(ask(
            "h1",
            Ask {
                object: Some(&mine),
                ..lease("create", "")
            }
        ));
        assert!(!ask(
            "h1",
            Ask {
                object: Some(&theirs),
                ..lease("create", "")
            }
        ));
        assert!(!ask("h1", lease("list", "")));
        let elsewhere = Ask {
            group: "coordination.k8s.io",
            ..core("update", "leases", "", "kube-system", "n1")
        };
        assert!(!ask("h1", elsewhere));
    }

    #[test]
    fn pods_bound_to_own_nodes_only() {
        assert!(ask("h1", core("patch", "pods", "status", "dev", "a")));
        assert!(!ask("h1", core("patch", "pods", "status", "dev", "b")));
        assert!(ask("h2", core("patch", "pods", "status", "dev", "b")));
        assert!(!ask("h1", core("patch", "pods", "status", "dev", "c")));
        assert!(!ask(
            "h1",
            core("patch", "pods", "status", "dev", "missing")
        ));
        assert!(!ask("h1", core("patch", "pods", "", "dev", "a")));
        assert!(ask("h1", core("delete", "pods", "", "dev", "a")));
        assert!(!ask("h1", core("delete", "pods", "", "dev", "b")));
        assert!(ask("h1", core("get", "pods", "", "dev", "a")));
        assert!(!ask("h1", core("get", "pods", "", "dev", "b")));
        assert!(ask(
            "h1",
            core("get", "pods", "", "kube-system", "not-yet-mirrored")
        ));
        let watch = |selector| Ask {
            field_selector: selector,
            ..core("watch", "pods", "", "", "")
        };
        assert!(ask("h1", watch(Some("spec.nodeName=n2"))));
        assert!(!ask("h1", watch(Some("spec.nodeName=n3"))));
        assert!(!ask("h1", watch(None)));
        assert!(!ask("h1", watch(Some("spec.nodeName!=n1"))));
        let mirror = json!({"metadata": {"name": "m"}, "spec": {"nodeName": "n1"}});
        let foreign = json!({"metadata": {"name": "m"}, "spec": {"nodeName": "n3"}});
        assert!(ask(
            "h1",
            Ask {
                object: Some(&mirror),
                ..core("create", "pods", "", "kube-system", "")
            }
        ));
        assert!(!ask(
            "h1",
            Ask {
                object: Some(&foreign),
                ..core("create", "pods", "", "kube-system", "")
            }
        ));
    }

    #[test]
    fn events_and_referenced_config() {
        assert!(ask("h1", core("create", "events", "", "dev", "")));
        assert!(ask(
            "h1",
            Ask {
                group: "events.k8s.io",
                ..core("patch", "events", "", "dev", "e")
            }
        ));
        assert!(!ask("h1", core("delete", "events", "", "dev", "e")));
        assert!(ask("h1", core("get", "configmaps", "", "dev", "cfg")));
        assert!(ask("h1", core("get", "secrets", "", "dev", "tok")));
        assert!(!ask("h1", core("get", "secrets", "", "dev", "cfg")));
        assert!(!ask("h2", core("get", "configmaps", "", "dev", "cfg")));
        assert!(!ask("h1", core("list", "secrets", "", "dev", "")));
        let one = |verb, resource, ns, selector| Ask {
            field_selector: selector,
            ..core(verb, resource, "", ns, "")
        };
        let cfg = Some("metadata.name=cfg");
        assert!(ask("h1", one("watch", "configmaps", "dev", cfg)));
        assert!(ask("h1", one("list", "configmaps", "dev", cfg)));
        assert!(ask(
            "h1",
            one("watch", "secrets", "dev", Some("metadata.name=tok"))
        ));
        assert!(!ask("h1", one("watch", "secrets", "dev", cfg)));
        assert!(!ask("h2", one("watch", "configmaps", "dev", cfg)));
        assert!(!ask("h1", one("watch", "configmaps", "", cfg)));
        assert!(!ask(
            "h1",
            one("watch", "configmaps", "dev", Some("metadata.name!=cfg"))
        ));
        assert!(!ask("h1", one("watch", "configmaps", "dev", None)));
        assert!(!ask(
            "h1",
            Ask {
                group: "apps",
                ..core("get", "deployments", "", "dev", "d")
            }
        ));
    }

    #[test]
    fn claims_their_volumes_and_attachments_of_own_pods_and_nodes() {
        assert!(ask(
            "h1",
            core("get", "persistentvolumeclaims", "", "dev", "data")
        ));
        assert!(!ask(
            "h1",
            core("get", "persistentvolumeclaims", "", "dev", "other")
        ));
        assert!(!ask(
            "h2",
            core("get", "persistentvolumeclaims", "", "dev", "data")
        ));
        assert!(!ask(
            "h1",
            core("list", "persistentvolumeclaims", "", "dev", "")
        ));
        assert!(ask(
            "h1",
            core("get", "persistentvolumes", "", "", "pv-data")
        ));
        assert!(!ask(
            "h1",
            core("get", "persistentvolumes", "", "", "pv-other")
        ));
        assert!(!ask(
            "h1",
            core("update", "persistentvolumes", "", "", "pv-data")
        ));
        let storage = |verb, resource, name| Ask {
            group: "storage.k8s.io",
            ..core(verb, resource, "", "", name)
        };
        assert!(ask("h1", storage("get", "volumeattachments", "csi-1")));
        assert!(!ask("h1", storage("get", "volumeattachments", "csi-3")));
        assert!(!ask("h1", storage("update", "volumeattachments", "csi-1")));
        assert!(ask("h1", storage("watch", "csidrivers", "")));
        assert!(!ask("h1", storage("delete", "csidrivers", "csi.kemu.dev")));
    }
}
