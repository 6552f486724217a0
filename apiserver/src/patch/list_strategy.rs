//! [`ListStrategy`]: how each list field of a kind merges, the table that strategic merge patch
//! and server-side apply share. Kubernetes reads it from the `patchStrategy`/`patchMergeKey`
//! struct tags of its types; kemu keeps it here, per kind.

/// How a list field merges, as Kubernetes' `patchStrategy`/`patchMergeKey` struct tags say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListStrategy {
    /// No strategy: the patch's list replaces the original wholesale.
    Atomic,
    /// `patchStrategy: merge` with a merge key: elements are maps matched by that key.
    MergeByKey(&'static str),
    /// `patchStrategy: merge` on a list of primitives (e.g. `metadata.finalizers`): a set union.
    PrimitiveSet,
}

/// Where the PodSpec sits in objects of `kind`, so its list keys apply there.
fn pod_spec_prefixes(kind: &str) -> &'static [&'static [&'static str]] {
    match kind {
        "Pod" => &[&["spec"]],
        "PodTemplate" => &[&["template", "spec"]],
        "Deployment"
        | "ReplicaSet"
        | "StatefulSet"
        | "DaemonSet"
        | "Job"
        | "ReplicationController" => &[&["spec", "template", "spec"]],
        "CronJob" => &[&["spec", "jobTemplate", "spec", "template", "spec"]],
        _ => &[],
    }
}

/// The list strategy of a field inside a PodSpec, `rest` being the path below the PodSpec.
fn pod_spec_list_strategy(rest: &[&str]) -> ListStrategy {
    use ListStrategy::{Atomic, MergeByKey};
    match rest {
        ["containers" | "initContainers" | "ephemeralContainers"] => MergeByKey("name"),
        ["volumes" | "imagePullSecrets" | "resourceClaims" | "schedulingGates"] => {
            MergeByKey("name")
        }
        ["hostAliases"] => MergeByKey("ip"),
        ["topologySpreadConstraints"] => MergeByKey("topologyKey"),
        ["containers" | "initContainers" | "ephemeralContainers", field] => match *field {
            "ports" => MergeByKey("containerPort"),
            "env" => MergeByKey("name"),
            "volumeMounts" => MergeByKey("mountPath"),
            "volumeDevices" => MergeByKey("devicePath"),
            "resizePolicy" => MergeByKey("resourceName"),
            _ => Atomic,
        },
        _ => Atomic,
    }
}

/// The list strategy of the list at `path` (field names from the object root; list elements add
/// no segment) in an object of `kind`.
pub fn list_strategy(kind: &str, path: &[String]) -> ListStrategy {
    use ListStrategy::{Atomic, MergeByKey, PrimitiveSet};
    let path: Vec<&str> = path.iter().map(String::as_str).collect();
    // ObjectMeta appears at the root and in every template.
    match path.as_slice() {
        [.., "metadata", "finalizers"] => return PrimitiveSet,
        [.., "metadata", "ownerReferences"] => return MergeByKey("uid"),
        _ => {}
    }
    for prefix in pod_spec_prefixes(kind) {
        if let Some(rest) = path.strip_prefix(*prefix) {
            return pod_spec_list_strategy(rest);
        }
    }
    match (kind, path.as_slice()) {
        ("Pod", ["status", "conditions"]) => MergeByKey("type"),
        ("Pod", ["status", "podIPs" | "hostIPs"]) => MergeByKey("ip"),
        ("Node", ["status", "conditions" | "addresses"]) => MergeByKey("type"),
        ("Node", ["spec", "podCIDRs"]) => PrimitiveSet,
        (
            "Deployment"
            | "ReplicaSet"
            | "StatefulSet"
            | "DaemonSet"
            | "Job"
            | "ReplicationController",
            ["status", "conditions"],
        ) => MergeByKey("type"),
        ("Service", ["spec", "ports"]) => MergeByKey("port"),
        // Node spec.taints deliberately stays atomic, as in Kubernetes: `kubectl taint` removes a
        // taint by sending the remaining list, which a merge by `key` would silently ignore.
        _ => Atomic,
    }
}
