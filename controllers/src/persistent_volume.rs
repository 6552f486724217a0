//! The PersistentVolume binder's decisions, as kube-controller-manager's PV controller makes
//! them: [`sync_claim`] and [`sync_volume`] read a claim or a volume with what they refer to and
//! return the writes and events that move it on. No I/O and no clock; the
//! [`PersistentVolumeController`](crate::persistent_volume_controller) carries the plans out.
//!
//! - A claim without a volume binds to the smallest Available volume of its class that offers
//!   its access modes, volume mode, selector and size (a volume pre-bound to it through
//!   `claimRef` first). Failing that, a claim of a class with a provisioner waits for that
//!   provisioner (`ExternalProvisioning`), one of a `WaitForFirstConsumer` class waits for the
//!   scheduler's `volume.kubernetes.io/selected-node` (`WaitForFirstConsumer`), one with no
//!   class stays Pending (`FailedBinding`).
//! - Binding writes the volume's `claimRef` and phase Bound, then the claim's `volumeName`,
//!   the `pv.kubernetes.io/bind-completed` annotation and phase Bound with the volume's access
//!   modes and capacity.
//! - A bound claim whose volume is gone, or bound elsewhere, is Lost (`ClaimLost`,
//!   `ClaimMisbound`).
//! - A volume whose claim is gone is Released and reclaimed: Retain keeps it, Delete removes a
//!   volume of the emulated driver (others fail with `VolumeFailedDelete`), Recycle fails.

use std::collections::BTreeMap;

use api::quantity::Quantity;
use api::selectors::LabelSelector;
use k8s_openapi::api::core::v1::{
    Node, ObjectReference, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimStatus,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as Q;

pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
pub const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
pub const ANN_STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
pub const ANN_BETA_STORAGE_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";
pub const ANN_PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";

/// The emulated CSI driver: its provisioner creates and deletes volumes, its resizer grows them.
pub use api::volumes::EMULATED_DRIVER;

/// The node label the emulated driver's volumes are pinned to under WaitForFirstConsumer: its
/// topology key, one segment per node.
pub const TOPOLOGY_KEY: &str = api::volumes::EMULATED_TOPOLOGY_KEY;

/// An event to record, about the claim or (`on_volume`) the volume.
#[derive(Clone, Debug, PartialEq)]
pub struct Note {
    pub warning: bool,
    pub reason: &'static str,
    pub message: String,
    pub on_volume: bool,
}

impl Note {
    fn claim(warning: bool, reason: &'static str, message: impl Into<String>) -> Note {
        Note {
            warning,
            reason,
            message: message.into(),
            on_volume: false,
        }
    }

    fn volume(warning: bool, reason: &'static str, message: impl Into<String>) -> Note {
        Note {
            on_volume: true,
            ..Note::claim(warning, reason, message)
        }
    }
}

/// What a claim asks the emulated provisioner for.
#[derive(Clone, Debug, PartialEq)]
pub struct Provision {
    pub class: String,
    /// The node the scheduler chose, under WaitForFirstConsumer.
    pub node: Option<String>,
}

/// The writes one sync asks for, in the order they are made: the volume, its status, the
/// claim, its status.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    pub volume: Option<PersistentVolume>,
    pub volume_phase: Option<&'static str>,
    pub claim: Option<PersistentVolumeClaim>,
    pub claim_status: Option<PersistentVolumeClaimStatus>,
    pub provision: Option<Provision>,
    /// Delete the (released) volume: the emulated driver's reclaim.
    pub delete_volume: bool,
    pub notes: Vec<Note>,
}

fn annotation<'a>(
    meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

fn set_annotation(
    meta: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
    value: &str,
) {
    meta.annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(key.into(), value.into());
}

fn quantity(q: Option<&Q>) -> Option<Quantity> {
    q.and_then(|q| Quantity::parse(&q.0).ok())
}

/// The storage a claim requests.
pub fn requested(claim: &PersistentVolumeClaim) -> Option<Quantity> {
    quantity(
        claim
            .spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage")),
    )
}

/// The storage a volume offers.
pub fn capacity(volume: &PersistentVolume) -> Option<Quantity> {
    quantity(
        volume
            .spec
            .as_ref()
            .and_then(|s| s.capacity.as_ref())
            .and_then(|c| c.get("storage")),
    )
}

/// The class a claim names ("" for none).
pub fn claim_class(claim: &PersistentVolumeClaim) -> &str {
    annotation(&claim.metadata, api::volumes::BETA_CLASS_ANNOTATION)
        .or_else(|| claim.spec.as_ref()?.storage_class_name.as_deref())
        .unwrap_or_default()
}

fn volume_class(volume: &PersistentVolume) -> &str {
    annotation(&volume.metadata, api::volumes::BETA_CLASS_ANNOTATION)
        .or_else(|| volume.spec.as_ref()?.storage_class_name.as_deref())
        .unwrap_or_default()
}

fn volume_phase(volume: &PersistentVolume) -> &str {
    volume
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

pub fn claim_phase(claim: &PersistentVolumeClaim) -> &str {
    claim
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

fn claim_ref(volume: &PersistentVolume) -> Option<&ObjectReference> {
    volume.spec.as_ref()?.claim_ref.as_ref()
}

/// `namespace/name` of an object.
fn key(namespace: Option<&str>, name: Option<&str>) -> String {
    format!(
        "{}/{}",
        namespace.unwrap_or_default(),
        name.unwrap_or_default()
    )
}

fn claim_key(claim: &PersistentVolumeClaim) -> String {
    key(
        claim.metadata.namespace.as_deref(),
        claim.metadata.name.as_deref(),
    )
}

/// Whether the volume's claimRef names this claim (by namespace and name, and by uid when the
/// reference has one).
pub fn is_bound_to(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> bool {
    let Some(r) = claim_ref(volume) else {
        return false;
    };
    r.namespace == claim.metadata.namespace
        && r.name == claim.metadata.name
        && r.uid
            .as_deref()
            .is_none_or(|u| u.is_empty() || Some(u) == claim.metadata.uid.as_deref())
}

fn volume_mode(mode: Option<&String>) -> &str {
    mode.map_or("Filesystem", String::as_str)
}

/// Why `volume` cannot serve `claim`, by upstream's wording; `None` when it can.
fn mismatch(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> Option<&'static str> {
    let (vspec, cspec) = (volume.spec.as_ref()?, claim.spec.as_ref()?);
    if let (Some(offered), Some(wanted)) = (capacity(volume), requested(claim)) {
        if offered < wanted {
            return Some("requested PV is too small");
        }
    }
    if volume_class(volume) != claim_class(claim) {
        return Some("storageClassName does not match");
    }
    if volume_mode(vspec.volume_mode.as_ref()) != volume_mode(cspec.volume_mode.as_ref()) {
        return Some("incompatible volumeMode");
    }
    let offered = vspec.access_modes.as_deref().unwrap_or_default();
    let wanted = cspec.access_modes.as_deref().unwrap_or_default();
    if !wanted.iter().all(|m| offered.contains(m)) {
        return Some("incompatible accessMode");
    }
    None
}

/// Whether the claim's selector picks the volume's labels (no selector picks every volume).
fn selected(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> bool {
    let Some(selector) = claim.spec.as_ref().and_then(|s| s.selector.as_ref()) else {
        return true;
    };
    let json = serde_json::to_value(selector).unwrap_or(serde_json::Value::Null);
    LabelSelector::from_label_selector_json(&json)
        .map(|s| s.matches(&volume.metadata.labels.as_ref()))
        .unwrap_or(false)
}

/// Whether a volume's required node affinity admits `node` (no affinity admits every node).
pub fn affinity_admits(volume: &PersistentVolume, node: &Node) -> bool {
    let Some(terms) = volume
        .spec
        .as_ref()
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref())
        .map(|r| &r.node_selector_terms)
    else {
        return true;
    };
    let empty = BTreeMap::new();
    let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
    terms.iter().any(|term| {
        term.match_expressions.iter().flatten().all(|e| {
            let value = labels.get(&e.key);
            let values = e.values.as_deref().unwrap_or_default();
            match e.operator.as_str() {
                "In" => value.is_some_and(|v| values.contains(v)),
                "NotIn" => value.is_none_or(|v| !values.contains(v)),
                "Exists" => value.is_some(),
                "DoesNotExist" => value.is_none(),
                _ => false,
            }
        })
    })
}

/// The volume `claim` should bind to: one pre-bound to it, else the smallest Available match.
/// With `delay` (WaitForFirstConsumer before a node is chosen) only pre-bound volumes count:
/// the scheduler picks the others. With a `node`, the volume must be reachable from it.
pub fn best_match<'a>(
    claim: &PersistentVolumeClaim,
    volumes: &[&'a PersistentVolume],
    delay: bool,
    node: Option<&Node>,
) -> Option<&'a PersistentVolume> {
    let mut best: Option<(&PersistentVolume, Quantity)> = None;
    for volume in volumes {
        if volume.metadata.deletion_timestamp.is_some() {
            continue;
        }
        if claim_ref(volume).is_some() {
            if is_bound_to(volume, claim) && mismatch(volume, claim).is_none() {
                return Some(volume);
            }
            continue;
        }
        if delay || volume_phase(volume) != "Available" {
            continue;
        }
        if mismatch(volume, claim).is_some() || !selected(volume, claim) {
            continue;
        }
        if node.is_some_and(|n| !affinity_admits(volume, n)) {
            continue;
        }
        let size = capacity(volume).unwrap_or_else(Quantity::zero);
        if best.as_ref().is_none_or(|(_, s)| size < *s) {
            best = Some((volume, size));
        }
    }
    best.map(|(v, _)| v)
}

/// Whether the claim waits for its first consumer: its class binds late and no node is chosen.
pub fn delays_binding(claim: &PersistentVolumeClaim, class: Option<&StorageClass>) -> bool {
    annotation(&claim.metadata, ANN_SELECTED_NODE).is_none()
        && class.is_some_and(|c| c.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer"))
}

/// The status a claim has once bound to `volume`: its access modes, and its capacity when the
/// claim becomes Bound now (a later difference is an expansion's and is kept).
fn bound_status(
    claim: &PersistentVolumeClaim,
    volume: &PersistentVolume,
) -> PersistentVolumeClaimStatus {
    let mut status = claim.status.clone().unwrap_or_default();
    let spec = volume.spec.as_ref();
    status.access_modes = spec.and_then(|s| s.access_modes.clone());
    if status.phase.as_deref() != Some("Bound") {
        status.capacity = spec.and_then(|s| s.capacity.clone());
    }
    status.phase = Some("Bound".into());
    status
}

fn status_with_phase(
    claim: &PersistentVolumeClaim,
    phase: &str,
) -> Option<PersistentVolumeClaimStatus> {
    if claim_phase(claim) == phase {
        return None;
    }
    let mut status = claim.status.clone().unwrap_or_default();
    status.phase = Some(phase.into());
    Some(status)
}

/// The writes that bind `claim` and `volume` to each other (those already done are skipped).
fn bind(claim: &PersistentVolumeClaim, volume: &PersistentVolume) -> Plan {
    let mut plan = Plan::default();
    let reference = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("PersistentVolumeClaim".into()),
        namespace: claim.metadata.namespace.clone(),
        name: claim.metadata.name.clone(),
        uid: claim.metadata.uid.clone(),
        resource_version: claim.metadata.resource_version.clone(),
        ..Default::default()
    };
    let current = claim_ref(volume);
    let referenced = current.is_some_and(|r| {
        r.uid.is_some() && r.uid == claim.metadata.uid && r.name == claim.metadata.name
    });
    if !referenced {
        let mut updated = volume.clone();
        if current.is_none() {
            set_annotation(&mut updated.metadata, ANN_BOUND_BY_CONTROLLER, "yes");
        }
        if let Some(spec) = updated.spec.as_mut() {
            spec.claim_ref = Some(reference);
        }
        plan.volume = Some(updated);
    }
    if volume_phase(volume) != "Bound" {
        plan.volume_phase = Some("Bound");
    }
    let volume_name = volume.metadata.name.clone().unwrap_or_default();
    let named = claim.spec.as_ref().and_then(|s| s.volume_name.as_deref());
    let completed = annotation(&claim.metadata, ANN_BIND_COMPLETED) == Some("yes");
    if named != Some(volume_name.as_str()) || !completed {
        let mut updated = claim.clone();
        if named.is_none_or(str::is_empty) {
            set_annotation(&mut updated.metadata, ANN_BOUND_BY_CONTROLLER, "yes");
        }
        set_annotation(&mut updated.metadata, ANN_BIND_COMPLETED, "yes");
        if let Some(spec) = updated.spec.as_mut() {
            spec.volume_name = Some(volume_name);
        }
        plan.claim = Some(updated);
    }
    let status = bound_status(claim, volume);
    if claim.status.as_ref() != Some(&status) {
        plan.claim_status = Some(status);
    }
    plan
}

fn pending(claim: &PersistentVolumeClaim, note: Option<Note>) -> Plan {
    Plan {
        claim_status: status_with_phase(claim, "Pending"),
        notes: note.into_iter().collect(),
        ..Plan::default()
    }
}

fn lost(claim: &PersistentVolumeClaim, reason: &'static str, message: &str) -> Plan {
    Plan {
        claim_status: status_with_phase(claim, "Lost"),
        notes: vec![Note::claim(true, reason, message)],
        ..Plan::default()
    }
}

/// One sync of a claim against every volume, its class (if it exists) and the node the
/// scheduler selected for it (if any).
pub fn sync_claim(
    claim: &PersistentVolumeClaim,
    volumes: &[&PersistentVolume],
    class: Option<&StorageClass>,
    selected_node: Option<&Node>,
) -> Plan {
    let find = |name: &str| {
        volumes
            .iter()
            .find(|v| v.metadata.name.as_deref() == Some(name))
            .copied()
    };
    let volume_name = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .unwrap_or_default();
    if annotation(&claim.metadata, ANN_BIND_COMPLETED).is_some() {
        if volume_name.is_empty() {
            return lost(
                claim,
                "ClaimLost",
                "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!",
            );
        }
        let Some(volume) = find(volume_name) else {
            return lost(
                claim,
                "ClaimLost",
                "Bound claim has lost its PersistentVolume. Data on the volume is lost!",
            );
        };
        return match claim_ref(volume) {
            None => bind(claim, volume),
            Some(r) if r.uid == claim.metadata.uid => bind(claim, volume),
            Some(_) => lost(
                claim,
                "ClaimMisbound",
                "Two claims are bound to the same volume, this one is bound incorrectly",
            ),
        };
    }
    if !volume_name.is_empty() {
        let Some(volume) = find(volume_name) else {
            return pending(claim, None);
        };
        if claim_ref(volume).is_some() && !is_bound_to(volume, claim) {
            return pending(
                claim,
                Some(Note::claim(
                    true,
                    "FailedBinding",
                    format!("volume \"{volume_name}\" already bound to a different claim."),
                )),
            );
        }
        if let Some(why) = mismatch(volume, claim) {
            return pending(
                claim,
                Some(Note::claim(
                    true,
                    "FailedBinding",
                    format!("Cannot bind to requested volume \"{volume_name}\": {why}"),
                )),
            );
        }
        return bind(claim, volume);
    }
    let delay = delays_binding(claim, class);
    if let Some(volume) = best_match(claim, volumes, delay, selected_node) {
        return bind(claim, volume);
    }
    if delay {
        return pending(
            claim,
            Some(Note::claim(
                false,
                "WaitForFirstConsumer",
                "waiting for first consumer to be created before binding",
            )),
        );
    }
    let class_name = claim_class(claim);
    let Some(class) = class.filter(|_| !class_name.is_empty()) else {
        let note = if class_name.is_empty() {
            Note::claim(
                false,
                "FailedBinding",
                "no persistent volumes available for this claim and no storage class is set",
            )
        } else {
            Note::claim(
                true,
                "ProvisioningFailed",
                format!("storageclass.storage.k8s.io \"{class_name}\" not found"),
            )
        };
        return pending(claim, Some(note));
    };
    let provisioner = class.provisioner.as_str();
    let mut plan = pending(claim, Some(Note::claim(false, "ExternalProvisioning", format!("Waiting for a volume to be created either by the external provisioner '{provisioner}' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered."))));
    if annotation(&claim.metadata, ANN_STORAGE_PROVISIONER) != Some(provisioner) {
        let mut updated = claim.clone();
        set_annotation(&mut updated.metadata, ANN_STORAGE_PROVISIONER, provisioner);
        set_annotation(
            &mut updated.metadata,
            ANN_BETA_STORAGE_PROVISIONER,
            provisioner,
        );
        plan.claim = Some(updated);
    }
    if provisioner == EMULATED_DRIVER {
        plan.provision = Some(Provision {
            class: class_name.to_string(),
            node: annotation(&claim.metadata, ANN_SELECTED_NODE).map(str::to_string),
        });
    }
    plan
}

/// Whether the emulated driver owns the volume (it provisioned it, or it is its CSI volume).
pub fn is_emulated(volume: &PersistentVolume) -> bool {
    annotation(&volume.metadata, ANN_PROVISIONED_BY) == Some(EMULATED_DRIVER)
        || volume
            .spec
            .as_ref()
            .and_then(|s| s.csi.as_ref())
            .is_some_and(|c| c.driver == EMULATED_DRIVER)
}

/// One sync of a volume against the claim its `claimRef` names (`None`: no such claim).
pub fn sync_volume(volume: &PersistentVolume, claim: Option<&PersistentVolumeClaim>) -> Plan {
    let mut plan = Plan::default();
    let phase = volume_phase(volume);
    let Some(reference) = claim_ref(volume) else {
        if phase != "Available" {
            plan.volume_phase = Some("Available");
        }
        return plan;
    };
    let uid = reference.uid.as_deref().unwrap_or_default();
    if uid.is_empty() {
        // Pre-bound by its creator: the claim binds to it when it comes.
        if phase != "Available" {
            plan.volume_phase = Some("Available");
        }
        return plan;
    }
    let claim = claim.filter(|c| c.metadata.uid.as_deref() == Some(uid));
    let Some(claim) = claim else {
        return release(volume, phase);
    };
    let named = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .unwrap_or_default();
    if named == volume.metadata.name.as_deref().unwrap_or_default() {
        if phase != "Bound" {
            plan.volume_phase = Some("Bound");
        }
    } else if !named.is_empty() && annotation(&volume.metadata, ANN_BOUND_BY_CONTROLLER).is_some() {
        // The claim went to another volume: this one is free again.
        let mut updated = volume.clone();
        if let Some(spec) = updated.spec.as_mut() {
            spec.claim_ref = None;
        }
        if let Some(annotations) = updated.metadata.annotations.as_mut() {
            annotations.remove(ANN_BOUND_BY_CONTROLLER);
        }
        plan.volume = Some(updated);
        plan.volume_phase = Some("Available");
    }
    plan
}

/// A volume whose claim is gone: Released, then reclaimed by its policy.
fn release(volume: &PersistentVolume, phase: &str) -> Plan {
    let mut plan = Plan::default();
    if phase == "Failed" {
        return plan;
    }
    if phase != "Released" {
        plan.volume_phase = Some("Released");
    }
    let name = volume.metadata.name.as_deref().unwrap_or_default();
    let policy = volume
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_reclaim_policy.as_deref())
        .unwrap_or("Retain");
    match policy {
        "Delete" if is_emulated(volume) => plan.delete_volume = true,
        "Delete" => {
            plan.volume_phase = Some("Failed");
            plan.notes.push(Note::volume(
                true,
                "VolumeFailedDelete",
                format!("error getting deleter volume plugin for volume \"{name}\": no deletable volume plugin matched"),
            ));
        }
        "Recycle" => {
            plan.volume_phase = Some("Failed");
            plan.notes.push(Note::volume(
                true,
                "VolumeFailedRecycle",
                "No recycler plugin found for the volume!",
            ));
        }
        _ => {}
    }
    plan
}

/// The volume the emulated provisioner creates for `claim` of `class`: named `pvc-<claim uid>`,
/// pre-bound to the claim, the class's reclaim policy and mount options, a CSI source of the
/// emulated driver, pinned to `node` when the scheduler chose one.
pub fn provisioned_volume(
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    node: Option<&str>,
) -> PersistentVolume {
    use k8s_openapi::api::core::v1::{
        CSIPersistentVolumeSource, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
        PersistentVolumeSpec, VolumeNodeAffinity,
    };
    let uid = claim.metadata.uid.clone().unwrap_or_default();
    let spec = claim.spec.clone().unwrap_or_default();
    let mut capacity = BTreeMap::new();
    if let Some(q) = spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
    {
        capacity.insert("storage".to_string(), q.clone());
    }
    let node_affinity = node.map(|n| VolumeNodeAffinity {
        required: Some(NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_expressions: Some(vec![NodeSelectorRequirement {
                    key: TOPOLOGY_KEY.into(),
                    operator: "In".into(),
                    values: Some(vec![n.to_string()]),
                }]),
                ..Default::default()
            }],
        }),
    });
    let mut volume = PersistentVolume {
        spec: Some(PersistentVolumeSpec {
            access_modes: spec.access_modes.clone(),
            capacity: Some(capacity),
            claim_ref: Some(ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("PersistentVolumeClaim".into()),
                namespace: claim.metadata.namespace.clone(),
                name: claim.metadata.name.clone(),
                uid: claim.metadata.uid.clone(),
                resource_version: claim.metadata.resource_version.clone(),
                ..Default::default()
            }),
            persistent_volume_reclaim_policy: Some(
                class
                    .reclaim_policy
                    .clone()
                    .unwrap_or_else(|| "Delete".into()),
            ),
            storage_class_name: class.metadata.name.clone(),
            mount_options: class.mount_options.clone(),
            volume_mode: spec.volume_mode.clone(),
            node_affinity,
            csi: Some(CSIPersistentVolumeSource {
                driver: EMULATED_DRIVER.into(),
                volume_handle: uid.clone(),
                fs_type: Some("ext4".into()),
                volume_attributes: Some(BTreeMap::from([(
                    "storage.kubernetes.io/csiProvisionerIdentity".to_string(),
                    format!("0-{EMULATED_DRIVER}"),
                )])),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    volume.metadata.name = Some(format!("pvc-{uid}"));
    set_annotation(&mut volume.metadata, ANN_PROVISIONED_BY, EMULATED_DRIVER);
    volume
}

/// `namespace/name` of the claim a volume's claimRef names.
pub fn referenced_claim(volume: &PersistentVolume) -> Option<String> {
    claim_ref(volume).map(|r| key(r.namespace.as_deref(), r.name.as_deref()))
}

/// The claim's `namespace/name`, for messages.
pub fn claim_name(claim: &PersistentVolumeClaim) -> String {
    claim_key(claim)
}

/// The capacity a claim's status reports.
pub fn status_capacity(status: &PersistentVolumeClaimStatus) -> Option<Quantity> {
    quantity(status.capacity.as_ref().and_then(|c| c.get("storage")))
}
