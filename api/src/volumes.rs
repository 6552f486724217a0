//! What the API server's admission and printers and the volume controllers all read of
//! StorageClasses, PersistentVolumes and PersistentVolumeClaims: the default-class annotations,
//! the effective class of a volume or claim, and requested and offered storage; the emulated
//! CSI driver's names and the VolumeAttachment name of a volume on a node.

use serde_json::Value;

use crate::quantity::Quantity;

/// The annotations that mark a StorageClass as the cluster's default (GA and beta).
pub const DEFAULT_CLASS_ANNOTATIONS: [&str; 2] = [
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
];

/// The deprecated annotation that named a claim's or volume's class before `storageClassName`.
pub const BETA_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

/// The finalizers the StorageObjectInUseProtection admission plugin puts on new claims and
/// volumes; the protection controllers remove them once nothing uses the object.
pub const PVC_PROTECTION_FINALIZER: &str = "kubernetes.io/pvc-protection";
pub const PV_PROTECTION_FINALIZER: &str = "kubernetes.io/pv-protection";

/// The emulated CSI driver every kemu cluster runs: provisioner, attacher and resizer.
pub const EMULATED_DRIVER: &str = "csi.kemu.dev";

/// The node label the emulated driver's topology segments are keyed by (one segment per node),
/// as a CSI node plugin reports it and the kubelet labels its Node.
pub const EMULATED_TOPOLOGY_KEY: &str = "topology.csi.kemu.dev/node";

/// The name of the VolumeAttachment that attaches a CSI volume to a node, as the
/// attach/detach controller and the kubelet both compute it: `csi-` and the hex SHA-256 of the
/// volume handle, the driver and the node.
pub fn attachment_name(volume_handle: &str, driver: &str, node: &str) -> String {
    let digest = ring::digest::digest(
        &ring::digest::SHA256,
        format!("{volume_handle}{driver}{node}").as_bytes(),
    );
    let mut name = String::with_capacity(4 + 64);
    name.push_str("csi-");
    for byte in digest.as_ref() {
        name.push_str(&format!("{byte:02x}"));
    }
    name
}

/// The unique name of a CSI volume in a Node's `volumesAttached` and `volumesInUse`.
pub fn csi_unique_name(driver: &str, volume_handle: &str) -> String {
    format!("kubernetes.io/csi/{driver}^{volume_handle}")
}

/// Whether a StorageClass is marked default (`"true"` in either annotation).
pub fn is_default_class(class: &Value) -> bool {
    let annotations = class.pointer("/metadata/annotations");
    DEFAULT_CLASS_ANNOTATIONS.iter().any(|key| {
        annotations
            .and_then(|a| a.get(*key))
            .and_then(Value::as_str)
            == Some("true")
    })
}

/// The default class among `classes`, as Kubernetes picks it when several are marked: the
/// newest, then the first by name.
pub fn default_class(classes: &[Value]) -> Option<&Value> {
    let created = |c: &Value| {
        c.pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str)
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
    };
    let name = |c: &Value| {
        c.pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    classes
        .iter()
        .filter(|c| is_default_class(c))
        .min_by(|a, b| {
            created(b)
                .cmp(&created(a))
                .then_with(|| name(a).cmp(&name(b)))
        })
}

/// The class of a volume or claim: the beta annotation wins over `spec.storageClassName`;
/// empty for none.
pub fn class_of(object: &Value) -> &str {
    object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(BETA_CLASS_ANNOTATION))
        .or_else(|| object.pointer("/spec/storageClassName"))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Whether a claim names a class at all (an empty name counts: it asks for no class).
pub fn claim_has_class(claim: &Value) -> bool {
    let annotated = claim
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(BETA_CLASS_ANNOTATION))
        .is_some();
    annotated
        || claim
            .pointer("/spec/storageClassName")
            .is_some_and(|c| !c.is_null())
}

/// The storage a claim requests (`spec.resources.requests.storage`).
pub fn requested_storage(claim: &Value) -> Option<Quantity> {
    quantity_at(claim, "/spec/resources/requests/storage")
}

/// The storage a volume offers (`spec.capacity.storage`).
pub fn volume_capacity(volume: &Value) -> Option<Quantity> {
    quantity_at(volume, "/spec/capacity/storage")
}

/// A quantity at a JSON pointer, if it is there and parses.
pub fn quantity_at(object: &Value, pointer: &str) -> Option<Quantity> {
    object
        .pointer(pointer)
        .and_then(|q| Quantity::from_value(q).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn class(name: &str, created: &str, default: bool) -> Value {
        let annotations = if default {
            json!({"storageclass.kubernetes.io/is-default-class": "true"})
        } else {
            json!({})
        };
        json!({"metadata": {"name": name, "creationTimestamp": created, "annotations": annotations}})
    }

    #[test]
    fn the_newest_default_class_wins_then_the_first_name() {
        let classes = [
            class("old", "2026-01-01T00:00:00Z", true),
            class("plain", "2026-03-01T00:00:00Z", false),
            class("new-b", "2026-02-01T00:00:00Z", true),
            class("new-a", "2026-02-01T00:00:00Z", true),
        ];
        let chosen = default_class(&classes).expect("a default");
        assert_eq!(chosen["metadata"]["name"], "new-a");
        assert!(default_class(&classes[1..2]).is_none());
        let beta = json!({"metadata": {"annotations": {"storageclass.beta.kubernetes.io/is-default-class": "true"}}});
        assert!(is_default_class(&beta));
    }

    #[test]
    fn attachments_are_named_by_the_hash_of_handle_driver_and_node() {
        let name = attachment_name("vol-1", EMULATED_DRIVER, "node-0");
        assert_eq!(
            name,
            "csi-f22c3a439dcf335166ad6dc30164648f71d3d5f0ccd4163bfba84207e2d0584a"
        );
        assert_ne!(name, attachment_name("vol-1", EMULATED_DRIVER, "node-1"));
        assert_eq!(
            csi_unique_name(EMULATED_DRIVER, "vol-1"),
            "kubernetes.io/csi/csi.kemu.dev^vol-1"
        );
    }

    #[test]
    fn the_beta_annotation_names_the_class_first() {
        let claim = json!({"metadata": {"annotations": {BETA_CLASS_ANNOTATION: "gold"}}, "spec": {"storageClassName": "silver"}});
        assert_eq!(class_of(&claim), "gold");
        assert!(claim_has_class(&claim));
        let empty = json!({"spec": {"storageClassName": ""}});
        assert_eq!(class_of(&empty), "");
        assert!(claim_has_class(&empty));
        assert!(!claim_has_class(&json!({"spec": {}})));
    }
}
