//! The attach/detach controller's and the emulated driver's node-side decisions, as
//! kube-controller-manager's attach/detach controller and the CSI external-attacher make them.
//! No I/O and no clock; the
//! [`AttachDetachController`](crate::attach_detach_controller::AttachDetachController) carries
//! them out.
//!
//! - [`wanted`]: the CSI volumes the pods on a node need attached — the volumes of their bound
//!   claims whose driver requires attachment (a driver without a CSIDriver object does, as
//!   upstream's CSI plugin assumes) — each named by its VolumeAttachment,
//!   `csi-<sha256(volumeHandle + driver + node)>`.
//! - [`plan_node`]: the VolumeAttachments to create, those to delete (a volume no pod on the
//!   node uses any more, once the kubelet no longer reports it in `volumesInUse`), and the
//!   node's `status.volumesAttached`.
//! - [`attacher_step`]: what the emulated external-attacher does next with one
//!   VolumeAttachment: put its finalizer on, attach, or detach and let it go.
//! - [`csi_node`], [`capacity_object`], [`free_capacity`]: the emulated driver's CSINode of a
//!   node and its CSIStorageCapacity per node and class.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use api::quantity::Quantity;
use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::{
    CSINode, CSINodeDriver, CSINodeSpec, CSIStorageCapacity, VolumeAttachment,
    VolumeAttachmentSource, VolumeAttachmentSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as Q;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};

use crate::persistent_volume::{capacity, EMULATED_DRIVER, TOPOLOGY_KEY};

/// The finalizer the emulated external-attacher keeps on a VolumeAttachment until it has
/// detached the volume (`external-attacher/` and the driver name with dots as dashes).
pub const ATTACHER_FINALIZER: &str = "external-attacher/csi-kemu-dev";

/// Where the emulated driver publishes its CSIStorageCapacity objects.
pub const CAPACITY_NAMESPACE: &str = "kube-system";

/// A CSI volume that pods on a node need attached there.
#[derive(Clone, Debug, PartialEq)]
pub struct Wanted {
    /// The VolumeAttachment's name.
    pub attachment: String,
    /// The PersistentVolume.
    pub volume: String,
    pub driver: String,
    /// `kubernetes.io/csi/<driver>^<handle>`, as the Node's status lists it.
    pub unique: String,
    /// The pods that use it, for the attach events.
    pub pods: Vec<ObjectReference>,
}

fn finished(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// The CSI volumes the pods on `node` need attached, by VolumeAttachment name. `claim` and
/// `volume` look claims (`namespace`, `name`) and volumes up; `attach_required` says whether a
/// driver needs attaching.
pub fn wanted(
    node: &str,
    pods: &[Arc<Pod>],
    claim: impl Fn(&str, &str) -> Option<Arc<PersistentVolumeClaim>>,
    volume: impl Fn(&str) -> Option<Arc<PersistentVolume>>,
    attach_required: impl Fn(&str) -> bool,
) -> BTreeMap<String, Wanted> {
    let mut out: BTreeMap<String, Wanted> = BTreeMap::new();
    for pod in pods.iter().filter(|p| !finished(p)) {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_ref());
        for source in volumes
            .into_iter()
            .flatten()
            .filter_map(|v| v.persistent_volume_claim.as_ref())
        {
            let Some(c) = claim(namespace, &source.claim_name) else {
                continue;
            };
            let bound = c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
            let Some(name) = c.spec.as_ref().and_then(|s| s.volume_name.as_deref()) else {
                continue;
            };
            if !bound || name.is_empty() {
                continue;
            }
            let Some(v) = volume(name) else {
                continue;
            };
            let Some(csi) = v.spec.as_ref().and_then(|s| s.csi.as_ref()) else {
                continue;
            };
            if !attach_required(&csi.driver) {
                continue;
            }
            let attachment = api::volumes::attachment_name(&csi.volume_handle, &csi.driver, node);
            let entry = out.entry(attachment.clone()).or_insert_with(|| Wanted {
                attachment,
                volume: name.to_string(),
                driver: csi.driver.clone(),
                unique: api::volumes::csi_unique_name(&csi.driver, &csi.volume_handle),
                pods: Vec::new(),
            });
            entry.pods.push(ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                namespace: pod.metadata.namespace.clone(),
                name: pod.metadata.name.clone(),
                uid: pod.metadata.uid.clone(),
                resource_version: pod.metadata.resource_version.clone(),
                ..Default::default()
            });
        }
    }
    out
}

/// A VolumeAttachment of the node as the controller sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Existing {
    pub name: String,
    /// Its volume's unique name, when its volume is known.
    pub unique: Option<String>,
    pub attached: bool,
    pub deleting: bool,
}

impl Existing {
    pub fn of(attachment: &VolumeAttachment, volume: Option<&PersistentVolume>) -> Existing {
        let unique = volume
            .and_then(|v| v.spec.as_ref()?.csi.as_ref())
            .map(|csi| api::volumes::csi_unique_name(&csi.driver, &csi.volume_handle));
        Existing {
            name: attachment.metadata.name.clone().unwrap_or_default(),
            unique,
            attached: attachment.status.as_ref().is_some_and(|s| s.attached),
            deleting: attachment.metadata.deletion_timestamp.is_some(),
        }
    }
}

/// What one sync of a node does.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodePlan {
    /// VolumeAttachments to create.
    pub create: Vec<Wanted>,
    /// VolumeAttachments to delete (detach).
    pub delete: Vec<String>,
    /// The node's `status.volumesAttached`, sorted.
    pub attached: Vec<String>,
}

/// One sync of a node: `wanted` against the node's VolumeAttachments and the volumes its
/// kubelet reports in use. A volume still in use is not detached, as upstream waits for the
/// kubelet to unmount it; one being detached leaves `volumesAttached` first.
pub fn plan_node(
    wanted: &BTreeMap<String, Wanted>,
    existing: &[Existing],
    in_use: &BTreeSet<String>,
) -> NodePlan {
    let mut plan = NodePlan::default();
    let mut attached = BTreeSet::new();
    for w in wanted.values() {
        if !existing.iter().any(|e| e.name == w.attachment) {
            plan.create.push(w.clone());
        }
    }
    for e in existing {
        let needed = wanted.contains_key(&e.name);
        let mounted = e.unique.as_ref().is_some_and(|u| in_use.contains(u));
        if !needed && !e.deleting && !mounted {
            plan.delete.push(e.name.clone());
            continue;
        }
        if e.attached && !e.deleting {
            if let Some(u) = &e.unique {
                attached.insert(u.clone());
            }
        }
    }
    plan.attached = attached.into_iter().collect();
    plan
}

/// The VolumeAttachment the controller creates for `wanted` on `node`.
pub fn attachment(wanted: &Wanted, node: &str) -> VolumeAttachment {
    VolumeAttachment {
        metadata: ObjectMeta {
            name: Some(wanted.attachment.clone()),
            ..Default::default()
        },
        spec: VolumeAttachmentSpec {
            attacher: wanted.driver.clone(),
            node_name: node.to_string(),
            source: VolumeAttachmentSource {
                persistent_volume_name: Some(wanted.volume.clone()),
                ..Default::default()
            },
        },
        status: None,
    }
}

/// What the emulated external-attacher does next with a VolumeAttachment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttacherStep {
    /// Not the emulated driver's, or nothing left to do.
    Nothing,
    AddFinalizer,
    /// Attach after the latency: `status.attached: true`.
    Attach,
    /// Being deleted: detach after the latency, then remove the finalizer.
    Detach,
}

pub fn attacher_step(attachment: &VolumeAttachment) -> AttacherStep {
    if attachment.spec.attacher != EMULATED_DRIVER {
        return AttacherStep::Nothing;
    }
    let has_finalizer = attachment
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == ATTACHER_FINALIZER);
    if attachment.metadata.deletion_timestamp.is_some() {
        return if has_finalizer {
            AttacherStep::Detach
        } else {
            AttacherStep::Nothing
        };
    }
    if !has_finalizer {
        return AttacherStep::AddFinalizer;
    }
    if attachment.status.as_ref().is_some_and(|s| s.attached) {
        AttacherStep::Nothing
    } else {
        AttacherStep::Attach
    }
}

/// The node a volume of the emulated driver is pinned to, if any.
pub fn pinned_node(volume: &PersistentVolume) -> Option<&str> {
    let terms = &volume
        .spec
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required
        .as_ref()?
        .node_selector_terms;
    terms
        .iter()
        .flat_map(|t| t.match_expressions.iter().flatten())
        .find(|e| e.key == TOPOLOGY_KEY && e.operator == "In")
        .and_then(|e| e.values.as_ref()?.first())
        .map(String::as_str)
}

/// What is left of `total` on `node` after the emulated driver's volumes pinned there.
pub fn free_capacity(node: &str, total: &Quantity, volumes: &[Arc<PersistentVolume>]) -> Quantity {
    let used = volumes
        .iter()
        .filter(|v| crate::persistent_volume::is_emulated(v) && pinned_node(v) == Some(node))
        .filter_map(|v| capacity(v))
        .fold(Quantity::zero(), |sum, q| sum.add(&q));
    let free = total.sub(&used);
    if free.is_negative() {
        Quantity::zero()
    } else {
        free
    }
}

/// Why the emulated driver cannot provision `request` on `node`, whose capacity is `total`,
/// beside the volumes pinned there and `reserved` (promised to volumes not yet seen): the
/// `ResourceExhausted` description csi-driver-host-path gives when capacity is exceeded. `None`
/// when it fits.
pub fn exhausted(
    node: &str,
    total: &Quantity,
    request: &Quantity,
    volumes: &[Arc<PersistentVolume>],
    reserved: &Quantity,
) -> Option<String> {
    let free = free_capacity(node, total, volumes).sub(reserved);
    if *request <= free {
        return None;
    }
    let used = if free.is_negative() {
        total.clone()
    } else {
        total.sub(&free)
    };
    Some(format!(
        "requested capacity {} exceeds remaining capacity for {node:?}, {} out of {} already used",
        request.as_units(),
        used.canonical(),
        total.canonical()
    ))
}

/// The name of the CSIStorageCapacity of `class` on `node`.
pub fn capacity_name(node: &str, class: &str) -> String {
    let digest = ring::digest::digest(
        &ring::digest::SHA256,
        format!("{EMULATED_DRIVER}/{node}/{class}").as_bytes(),
    );
    let hex: String = digest.as_ref()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("csisc-{hex}")
}

/// The emulated driver's CSIStorageCapacity of `class` on `node`: the node's topology segment
/// can still hold `free`.
pub fn capacity_object(node: &str, class: &str, free: &Quantity) -> CSIStorageCapacity {
    CSIStorageCapacity {
        metadata: ObjectMeta {
            name: Some(capacity_name(node, class)),
            namespace: Some(CAPACITY_NAMESPACE.into()),
            labels: Some(BTreeMap::from([
                (
                    "csi.storage.k8s.io/drivername".to_string(),
                    EMULATED_DRIVER.to_string(),
                ),
                (
                    "csi.storage.k8s.io/managed-by".to_string(),
                    "external-provisioner".to_string(),
                ),
            ])),
            ..Default::default()
        },
        capacity: Some(Q(free.canonical())),
        maximum_volume_size: None,
        node_topology: Some(LabelSelector {
            match_labels: Some(BTreeMap::from([(
                TOPOLOGY_KEY.to_string(),
                node.to_string(),
            )])),
            ..Default::default()
        }),
        storage_class_name: class.to_string(),
    }
}

/// The CSINode of `node` (uid `node_uid`), with the emulated driver registered on it, as the
/// kubelet writes it when the driver's node plugin registers.
pub fn csi_node(node: &str, node_uid: &str) -> CSINode {
    CSINode {
        metadata: ObjectMeta {
            name: Some(node.to_string()),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Node".into(),
                name: node.to_string(),
                uid: node_uid.to_string(),
                ..Default::default()
            }]),
            ..Default::default()
        },
        spec: CSINodeSpec {
            drivers: vec![CSINodeDriver {
                name: EMULATED_DRIVER.into(),
                node_id: node.to_string(),
                topology_keys: Some(vec![TOPOLOGY_KEY.into()]),
                allocatable: None,
            }],
        },
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn from<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
        serde_json::from_value(v).expect("valid object")
    }

    fn pod(name: &str, claim: &str, phase: &str) -> Arc<Pod> {
        Arc::new(from(json!({
            "metadata": {"namespace": "default", "name": name, "uid": format!("uid-{name}")},
            "spec": {"nodeName": "node-0", "containers": [],
                     "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]},
            "status": {"phase": phase},
        })))
    }

    fn claim(name: &str, volume: &str, phase: &str) -> Arc<PersistentVolumeClaim> {
        Arc::new(from(json!({
            "metadata": {"namespace": "default", "name": name},
            "spec": {"volumeName": volume},
            "status": {"phase": phase},
        })))
    }

    fn volume(name: &str, driver: &str) -> Arc<PersistentVolume> {
        Arc::new(from(json!({
            "metadata": {"name": name},
            "spec": {"csi": {"driver": driver, "volumeHandle": format!("h-{name}")},
                     "capacity": {"storage": "1Gi"},
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                         {"key": TOPOLOGY_KEY, "operator": "In", "values": ["node-0"]}]}]}}},
        })))
    }

    fn wanted_on_node_0(pods: &[Arc<Pod>]) -> BTreeMap<String, Wanted> {
        let claims = [
            claim("a", "pv-a", "Bound"),
            claim("b", "pv-b", "Pending"),
            claim("c", "pv-c", "Bound"),
        ];
        let volumes = [volume("pv-a", EMULATED_DRIVER), volume("pv-c", "other.dev")];
        wanted(
            "node-0",
            pods,
            |_, n| {
                claims
                    .iter()
                    .find(|c| c.metadata.name.as_deref() == Some(n))
                    .cloned()
            },
            |n| {
                volumes
                    .iter()
                    .find(|v| v.metadata.name.as_deref() == Some(n))
                    .cloned()
            },
            |driver| driver == EMULATED_DRIVER,
        )
    }

    #[test]
    fn only_bound_csi_volumes_of_attaching_drivers_of_live_pods_are_wanted() {
        let pods = [
            pod("p1", "a", "Running"),
            pod("p2", "a", "Pending"),
            pod("p3", "b", "Pending"),
            pod("p4", "c", "Running"),
            pod("p5", "missing", "Pending"),
        ];
        let wanted = wanted_on_node_0(&pods);
        assert_eq!(wanted.len(), 1, "{wanted:?}");
        let w = wanted.values().next().expect("one");
        assert_eq!(
            w.attachment,
            api::volumes::attachment_name("h-pv-a", EMULATED_DRIVER, "node-0")
        );
        assert_eq!(w.volume, "pv-a");
        assert_eq!(w.unique, "kubernetes.io/csi/csi.kemu.dev^h-pv-a");
        assert_eq!(w.pods.len(), 2);
        // A finished pod needs nothing attached.
        assert!(wanted_on_node_0(&[pod("p6", "a", "Succeeded")]).is_empty());
    }

    #[test]
    fn attachments_are_created_for_new_volumes_and_deleted_once_unmounted() {
        let wanted = wanted_on_node_0(&[pod("p1", "a", "Running")]);
        let name = wanted.keys().next().cloned().expect("one");
        let plan = plan_node(&wanted, &[], &BTreeSet::new());
        assert_eq!(plan.create.len(), 1);
        assert!(plan.delete.is_empty() && plan.attached.is_empty());
        let va = attachment(&plan.create[0], "node-0");
        assert_eq!(va.spec.attacher, EMULATED_DRIVER);
        assert_eq!(va.spec.node_name, "node-0");
        assert_eq!(
            va.spec.source.persistent_volume_name.as_deref(),
            Some("pv-a")
        );

        let unique = "kubernetes.io/csi/csi.kemu.dev^h-pv-a".to_string();
        let attached = Existing {
            name: name.clone(),
            unique: Some(unique.clone()),
            attached: true,
            deleting: false,
        };
        let plan = plan_node(&wanted, std::slice::from_ref(&attached), &BTreeSet::new());
        assert_eq!(plan.attached, vec![unique.clone()]);
        assert!(plan.create.is_empty() && plan.delete.is_empty());

        // The pod is gone, but the kubelet still reports the volume in use: kept.
        let in_use = BTreeSet::from([unique.clone()]);
        let plan = plan_node(&BTreeMap::new(), std::slice::from_ref(&attached), &in_use);
        assert!(plan.delete.is_empty());
        assert_eq!(plan.attached, vec![unique]);
        // Unmounted: detached, and no longer listed as attached.
        let plan = plan_node(&BTreeMap::new(), &[attached], &BTreeSet::new());
        assert_eq!(plan.delete, vec![name]);
        assert!(plan.attached.is_empty());
    }

    #[test]
    fn the_attacher_puts_its_finalizer_on_attaches_then_detaches() {
        let mut va: VolumeAttachment = from(json!({
            "metadata": {"name": "csi-1"},
            "spec": {"attacher": EMULATED_DRIVER, "nodeName": "node-0",
                     "source": {"persistentVolumeName": "pv-a"}},
        }));
        assert_eq!(attacher_step(&va), AttacherStep::AddFinalizer);
        va.metadata.finalizers = Some(vec![ATTACHER_FINALIZER.into()]);
        assert_eq!(attacher_step(&va), AttacherStep::Attach);
        va.status = Some(from(json!({"attached": true})));
        assert_eq!(attacher_step(&va), AttacherStep::Nothing);
        va.metadata.deletion_timestamp = Some(from(json!("2026-01-01T00:00:00Z")));
        assert_eq!(attacher_step(&va), AttacherStep::Detach);
        va.metadata.finalizers = None;
        assert_eq!(attacher_step(&va), AttacherStep::Nothing);
        va.spec.attacher = "other.dev".into();
        va.metadata.deletion_timestamp = None;
        assert_eq!(attacher_step(&va), AttacherStep::Nothing);
    }

    #[test]
    fn a_volume_that_does_not_fit_is_refused_as_the_driver_words_it() {
        let total = Quantity::parse("3Gi").unwrap();
        let two = Quantity::parse("2Gi").unwrap();
        let one = Quantity::parse("1Gi").unwrap();
        assert_eq!(exhausted("n1", &total, &two, &[], &Quantity::zero()), None);
        assert_eq!(
            exhausted("n1", &total, &two, &[], &two).as_deref(),
            Some("requested capacity 2147483648 exceeds remaining capacity for \"n1\", 2Gi out of 3Gi already used")
        );
        assert_eq!(exhausted("n1", &total, &one, &[], &two), None);
    }

    #[test]
    fn capacity_is_what_the_pinned_volumes_leave() {
        let total = Quantity::parse("2Gi").expect("quantity");
        let volumes = [volume("pv-a", EMULATED_DRIVER), volume("pv-b", "other.dev")];
        let free = free_capacity("node-0", &total, &volumes);
        assert_eq!(free, Quantity::parse("1Gi").expect("quantity"));
        assert_eq!(free_capacity("node-1", &total, &volumes), total);
        let object = capacity_object("node-0", "late", &free);
        assert_eq!(object.storage_class_name, "late");
        assert_eq!(
            object.metadata.namespace.as_deref(),
            Some(CAPACITY_NAMESPACE)
        );
        let labels = object
            .node_topology
            .and_then(|t| t.match_labels)
            .unwrap_or_default();
        assert_eq!(labels.get(TOPOLOGY_KEY).map(String::as_str), Some("node-0"));
        assert_ne!(
            capacity_name("node-0", "late"),
            capacity_name("node-1", "late")
        );
        let node = csi_node("node-0", "uid-0");
        assert_eq!(node.spec.drivers[0].node_id, "node-0");
        assert_eq!(
            node.spec.drivers[0].topology_keys,
            Some(vec![TOPOLOGY_KEY.to_string()])
        );
    }
}
