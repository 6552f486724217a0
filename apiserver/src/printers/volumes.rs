//! PersistentVolumes, PersistentVolumeClaims and the storage.k8s.io kinds: the columns of
//! `kubectl get pv`, `pvc`, `sc`, `csidrivers`, `csinodes`, `volumeattachments` and
//! `csistoragecapacities`.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{age, array_at, bool_at, is_set, name, str_at, Column, AGE, NAME};

const fn boolean(name: &'static str, description: &'static str) -> Column {
    Column {
        name,
        kind: "boolean",
        format: "",
        description,
        priority: 0,
    }
}

pub(super) const PV_COLUMNS: &[Column] = &[
    NAME,
    Column::string("Capacity", "capacity is the description of the persistent volume's resources and capacity. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#capacity"),
    Column::string("Access Modes", "accessModes contains all ways the volume can be mounted. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes"),
    Column::string("Reclaim Policy", "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim. Valid options are Retain (default for manually created PersistentVolumes), Delete (default for dynamically provisioned PersistentVolumes), and Recycle (deprecated). Recycle must be supported by the volume plugin underlying this PersistentVolume. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#reclaiming"),
    Column::string("Status", "phase indicates if a volume is available, bound to a claim, or released by a claim. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#phase"),
    Column::string("Claim", "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim. Expected to be non-nil when bound. claim.VolumeName is the authoritative bind between PV and PVC. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#binding"),
    Column::string("StorageClass", "StorageClass of the pv"),
    Column::string("VolumeAttributesClass", "VolumeAttributesClass of the pv"),
    Column::string("Reason", "reason is a brief CamelCase string that describes any failure and is meant for machine parsing and tidy display in the CLI."),
    AGE,
    Column::string("VolumeMode", "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state. Value of Filesystem is implied when not included in spec.").wide(),
];

pub(super) const PVC_COLUMNS: &[Column] = &[
    NAME,
    Column::string("Status", "phase represents the current phase of PersistentVolumeClaim."),
    Column::string("Volume", "volumeName is the binding reference to the PersistentVolume backing this claim."),
    Column::string("Capacity", "capacity represents the actual resources of the underlying volume."),
    Column::string("Access Modes", "accessModes contains the actual access modes the volume backing the PVC has. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes-1"),
    Column::string("StorageClass", "StorageClass of the pvc"),
    Column::string("VolumeAttributesClass", "VolumeAttributesClass of the pvc"),
    AGE,
    Column::string("VolumeMode", "volumeMode defines what type of volume is required by the claim. Value of Filesystem is implied when not included in claim spec.").wide(),
];

pub(super) const STORAGE_CLASS_COLUMNS: &[Column] = &[
    NAME,
    Column::string("Provisioner", "provisioner indicates the type of the provisioner."),
    Column::string("ReclaimPolicy", "reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes of this storage class. Defaults to Delete."),
    Column::string("VolumeBindingMode", "volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound.  When unset, VolumeBindingImmediate is used. This field is only honored by servers that enable the VolumeScheduling feature."),
    Column::string("AllowVolumeExpansion", "allowVolumeExpansion shows whether the storage class allow volume expand."),
    AGE,
];

pub(super) const CSI_DRIVER_COLUMNS: &[Column] = &[
    NAME,
    boolean("AttachRequired", "attachRequired indicates this CSI volume driver requires an attach operation (because it implements the CSI ControllerPublishVolume() method), and that the Kubernetes attach detach controller should call the attach volume interface which checks the volumeattachment status and waits until the volume is attached before proceeding to mounting."),
    boolean("PodInfoOnMount", "podInfoOnMount indicates this CSI volume driver requires additional pod information (like podName, podUID, etc.) during mount operations, if set to true."),
    boolean("StorageCapacity", "storageCapacity indicates that the CSI volume driver wants pod scheduling to consider the storage capacity that the driver deployment will report by creating CSIStorageCapacity objects with capacity information, if set to true."),
    Column::string("TokenRequests", "tokenRequests indicates the CSI driver needs pods' service account tokens it is mounting volume for to do necessary authentication."),
    boolean("RequiresRepublish", "requiresRepublish indicates the CSI driver wants `NodePublishVolume` being periodically called to reflect any possible change in the mounted volume."),
    Column::string("Modes", "volumeLifecycleModes defines what kind of volumes this CSI volume driver supports."),
    AGE,
];

pub(super) const CSI_NODE_COLUMNS: &[Column] = &[
    NAME,
    Column::integer(
        "Drivers",
        "Drivers indicates the number of CSI drivers registered on the node",
    ),
    AGE,
];

pub(super) const VOLUME_ATTACHMENT_COLUMNS: &[Column] = &[
    NAME,
    Column {
        name: "Attacher",
        kind: "string",
        format: "name",
        description: "attacher indicates the name of the volume driver that MUST handle this request. This is the name returned by GetPluginName().",
        priority: 0,
    },
    Column::string("PV", "persistentVolumeName represents the name of the persistent volume to attach."),
    Column::string("Node", "nodeName represents the node that the volume should be attached to."),
    boolean("Attached", "attached indicates the volume is successfully attached. This field must only be set by the entity completing the attach operation, i.e. the external-attacher."),
    AGE,
];

pub(super) const CSI_STORAGE_CAPACITY_COLUMNS: &[Column] = &[
    NAME,
    Column::string("StorageClassName", "storageClassName represents the name of the StorageClass that the reported capacity applies to. It must meet the same requirements as the name of a StorageClass object (non-empty, DNS subdomain). If that object no longer exists, the CSIStorageCapacity object is obsolete and should be removed by its creator. This field is immutable."),
    Column::string("Capacity", "capacity is the value reported by the CSI driver in its GetCapacityResponse for a GetCapacityRequest with topology and parameters that match the previous fields."),
];

/// kubectl's access-mode abbreviations, each once, in Kubernetes' fixed order.
fn access_modes(modes: &[Value]) -> String {
    let has = |mode: &str| modes.iter().any(|m| m == mode);
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(mode, _)| has(mode))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}

/// A storage quantity as `Quantity.String()` writes it; empty when absent.
fn quantity_at(v: &Value, pointer: &str) -> String {
    v.pointer(pointer)
        .and_then(|q| api::quantity::Quantity::from_value(q).ok())
        .map(|q| q.canonical())
        .unwrap_or_default()
}

fn or_unset(obj: &Value, pointer: &str) -> String {
    match obj.pointer(pointer).and_then(Value::as_str) {
        Some(s) => s.to_string(),
        None => "<unset>".to_string(),
    }
}

/// A terminating object shows `Terminating` instead of its phase.
fn phase(obj: &Value) -> String {
    if is_set(obj, "/metadata/deletionTimestamp") {
        "Terminating".into()
    } else {
        str_at(obj, "/status/phase").to_string()
    }
}

pub(super) fn pv_cells(pv: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let claim = if is_set(pv, "/spec/claimRef") {
        format!(
            "{}/{}",
            str_at(pv, "/spec/claimRef/namespace"),
            str_at(pv, "/spec/claimRef/name")
        )
    } else {
        String::new()
    };
    let capacity = quantity_at(pv, "/spec/capacity/storage");
    vec![
        name(pv),
        (if capacity.is_empty() {
            "0".into()
        } else {
            capacity
        })
        .into(),
        access_modes(array_at(pv, "/spec/accessModes")).into(),
        str_at(pv, "/spec/persistentVolumeReclaimPolicy").into(),
        phase(pv).into(),
        claim.into(),
        api::volumes::class_of(pv).into(),
        or_unset(pv, "/spec/volumeAttributesClassName").into(),
        str_at(pv, "/status/reason").into(),
        age(pv, now),
        or_unset(pv, "/spec/volumeMode").into(),
    ]
}

pub(super) fn pvc_cells(pvc: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let volume = str_at(pvc, "/spec/volumeName");
    let (capacity, modes) = if volume.is_empty() {
        (String::new(), String::new())
    } else {
        let capacity = quantity_at(pvc, "/status/capacity/storage");
        (
            if capacity.is_empty() {
                "0".into()
            } else {
                capacity
            },
            access_modes(array_at(pvc, "/status/accessModes")),
        )
    };
    vec![
        name(pvc),
        phase(pvc).into(),
        volume.into(),
        capacity.into(),
        modes.into(),
        api::volumes::class_of(pvc).into(),
        or_unset(pvc, "/spec/volumeAttributesClassName").into(),
        age(pvc, now),
        or_unset(pvc, "/spec/volumeMode").into(),
    ]
}

pub(super) fn storage_class_cells(class: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let mut shown = str_at(class, "/metadata/name").to_string();
    if api::volumes::is_default_class(class) {
        shown.push_str(" (default)");
    }
    let or = |pointer: &str, fallback: &str| match str_at(class, pointer) {
        "" => fallback.to_string(),
        s => s.to_string(),
    };
    vec![
        shown.into(),
        str_at(class, "/provisioner").into(),
        or("/reclaimPolicy", "Delete").into(),
        or("/volumeBindingMode", "Immediate").into(),
        bool_at(class, "/allowVolumeExpansion").into(),
        age(class, now),
    ]
}

pub(super) fn csi_driver_cells(driver: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let attach_required = driver
        .pointer("/spec/attachRequired")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let modes: Vec<&str> = array_at(driver, "/spec/volumeLifecycleModes")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let tokens = match driver
        .pointer("/spec/tokenRequests")
        .and_then(Value::as_array)
    {
        None => "<unset>".to_string(),
        Some(requests) => requests
            .iter()
            .map(|r| str_at(r, "/audience"))
            .collect::<Vec<_>>()
            .join(","),
    };
    vec![
        name(driver),
        attach_required.into(),
        bool_at(driver, "/spec/podInfoOnMount").into(),
        bool_at(driver, "/spec/storageCapacity").into(),
        tokens.into(),
        bool_at(driver, "/spec/requiresRepublish").into(),
        (if modes.is_empty() {
            "<none>".to_string()
        } else {
            modes.join(",")
        })
        .into(),
        age(driver, now),
    ]
}

pub(super) fn csi_node_cells(node: &Value, now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name(node),
        (array_at(node, "/spec/drivers").len() as i64).into(),
        age(node, now),
    ]
}

pub(super) fn volume_attachment_cells(attachment: &Value, now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name(attachment),
        str_at(attachment, "/spec/attacher").into(),
        str_at(attachment, "/spec/source/persistentVolumeName").into(),
        str_at(attachment, "/spec/nodeName").into(),
        bool_at(attachment, "/status/attached").into(),
        age(attachment, now),
    ]
}

pub(super) fn csi_storage_capacity_cells(capacity: &Value, _now: DateTime<Utc>) -> Vec<Value> {
    let size = if is_set(capacity, "/capacity") {
        quantity_at(capacity, "/capacity")
    } else {
        "<unset>".into()
    };
    vec![
        name(capacity),
        str_at(capacity, "/storageClassName").into(),
        size.into(),
    ]
}
