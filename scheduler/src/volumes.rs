//! Volume binding (kube-scheduler's VolumeBinding plugin), pure: [`VolumeState`] holds what the
//! claim, volume, class, CSIDriver and CSIStorageCapacity informers saw, parsed once.
//!
//! - [`VolumeState::prefilter`]: a pod whose claim is missing, being deleted, or unbound with
//!   `Immediate` binding fits nowhere (the PV controller binds those claims; the pod is retried
//!   when they change).
//! - [`VolumeState::filter`]: on one node, every bound claim's volume must accept the node
//!   (its `nodeAffinity`), and every claim waiting for its first consumer must be satisfiable
//!   there: by an available volume of its class that accepts the node, or by provisioning
//!   (a provisioner, the class' `allowedTopologies`, and — for drivers that publish it — the
//!   CSIStorageCapacity of a segment the node can reach).
//! - The returned [`VolumePlan`] is kube-scheduler's PreBind work on the chosen node: claims to
//!   annotate with `volume.kubernetes.io/selected-node` (the provisioner then creates their
//!   volumes), volumes to pre-bind to claims, and the claims to wait for before the pod binds.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use api::selectors::LabelSelector;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{CSIDriver, CSIStorageCapacity, StorageClass};

use crate::filters::Reason;
use crate::pod_info::{NodeOperator, NodeRequirement, NodeTerm, PodInfo};

/// The annotation through which the scheduler tells a provisioner where a delayed-binding claim's
/// first consumer goes.
pub const SELECTED_NODE_ANNOTATION: &str = "volume.kubernetes.io/selected-node";
/// The PV controller's mark of a claim whose binding it completed.
pub const BIND_COMPLETED_ANNOTATION: &str = "pv.kubernetes.io/bind-completed";
/// The provisioner of classes whose volumes are only ever created by hand (local volumes).
pub const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";
/// The PreFilter message for claims the PV controller has yet to bind.
pub const UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";

/// A PersistentVolumeClaim as volume binding reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimInfo {
    /// `namespace/name`.
    pub key: String,
    pub uid: String,
    pub class: String,
    /// `spec.volumeName`; empty while unbound.
    pub volume_name: String,
    /// Bound: a volume named and the binding completed (the annotation, or phase Bound).
    pub bound: bool,
    /// Requested bytes.
    pub request: i64,
    pub access_modes: Vec<String>,
    pub selected_node: Option<String>,
    pub deleting: bool,
    /// `metadata.resourceVersion` as a number (0 when it is not one).
    pub resource_version: u64,
}

impl ClaimInfo {
    pub fn new(claim: &PersistentVolumeClaim) -> ClaimInfo {
        let meta = &claim.metadata;
        let spec = claim.spec.clone().unwrap_or_default();
        let annotations = meta.annotations.clone().unwrap_or_default();
        let volume_name = spec.volume_name.clone().unwrap_or_default();
        let phase = claim.status.as_ref().and_then(|s| s.phase.as_deref());
        let class = annotations
            .get(api::volumes::BETA_CLASS_ANNOTATION)
            .cloned()
            .or(spec.storage_class_name.clone())
            .unwrap_or_default();
        ClaimInfo {
            key: format!(
                "{}/{}",
                meta.namespace.as_deref().unwrap_or_default(),
                meta.name.as_deref().unwrap_or_default()
            ),
            uid: meta.uid.clone().unwrap_or_default(),
            class,
            bound: !volume_name.is_empty()
                && (annotations.contains_key(BIND_COMPLETED_ANNOTATION) || phase == Some("Bound")),
            volume_name,
            request: spec
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref())
                .and_then(|r| r.get("storage"))
                .map_or(0, |q| bytes(&q.0)),
            access_modes: spec.access_modes.unwrap_or_default(),
            selected_node: annotations.get(SELECTED_NODE_ANNOTATION).cloned(),
            deleting: meta.deletion_timestamp.is_some(),
            resource_version: meta
                .resource_version
                .as_deref()
                .and_then(|rv| rv.parse().ok())
                .unwrap_or(0),
        }
    }
}

/// A PersistentVolume as volume binding reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VolumeInfo {
    pub name: String,
    pub class: String,
    pub capacity: i64,
    pub access_modes: Vec<String>,
    /// `spec.nodeAffinity.required`'s terms (any one must match); `None` for every node.
    pub node_terms: Option<Vec<NodeTerm>>,
    /// `spec.claimRef` as `namespace/name`, and its uid.
    pub claim: Option<(String, String)>,
    pub phase: String,
}

impl VolumeInfo {
    pub fn new(volume: &PersistentVolume) -> VolumeInfo {
        let spec = volume.spec.clone().unwrap_or_default();
        let annotations = volume.metadata.annotations.clone().unwrap_or_default();
        VolumeInfo {
            name: volume.metadata.name.clone().unwrap_or_default(),
            class: annotations
                .get(api::volumes::BETA_CLASS_ANNOTATION)
                .cloned()
                .or(spec.storage_class_name.clone())
                .unwrap_or_default(),
            capacity: spec
                .capacity
                .as_ref()
                .and_then(|c| c.get("storage"))
                .map_or(0, |q| bytes(&q.0)),
            access_modes: spec.access_modes.clone().unwrap_or_default(),
            node_terms: spec
                .node_affinity
                .as_ref()
                .and_then(|a| a.required.as_ref())
                .map(|s| s.node_selector_terms.iter().map(NodeTerm::parse).collect()),
            claim: spec.claim_ref.as_ref().map(|r| {
                (
                    format!(
                        "{}/{}",
                        r.namespace.as_deref().unwrap_or_default(),
                        r.name.as_deref().unwrap_or_default()
                    ),
                    r.uid.clone().unwrap_or_default(),
                )
            }),
            phase: volume
                .status
                .as_ref()
                .and_then(|s| s.phase.clone())
                .unwrap_or_default(),
        }
    }

    fn accepts(&self, node: &str, labels: &BTreeMap<String, String>) -> bool {
        self.node_terms
            .as_ref()
            .is_none_or(|terms| terms.iter().any(|t| t.matches(node, labels)))
    }
}

/// A StorageClass as volume binding reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassInfo {
    pub provisioner: String,
    pub wait_for_first_consumer: bool,
    /// `allowedTopologies` (any one must match); empty for every node.
    pub allowed_topologies: Vec<NodeTerm>,
}

impl ClassInfo {
    pub fn new(class: &StorageClass) -> ClassInfo {
        ClassInfo {
            provisioner: class.provisioner.clone(),
            wait_for_first_consumer: class.volume_binding_mode.as_deref()
                == Some("WaitForFirstConsumer"),
            allowed_topologies: class
                .allowed_topologies
                .iter()
                .flatten()
                .map(|term| NodeTerm {
                    labels: term
                        .match_label_expressions
                        .iter()
                        .flatten()
                        .map(|e| NodeRequirement {
                            key: e.key.clone(),
                            operator: NodeOperator::In,
                            values: e.values.clone(),
                        })
                        .collect(),
                    fields: Vec::new(),
                })
                .collect(),
        }
    }
}

/// A CSIStorageCapacity: what one class can still provision in one topology segment.
#[derive(Clone, Debug)]
pub struct CapacityInfo {
    pub class: String,
    /// `nodeTopology`; `None` reaches no node.
    pub topology: Option<LabelSelector>,
    /// `maximumVolumeSize` if set, else `capacity`, in bytes; `None` when neither is.
    pub limit: Option<i64>,
}

impl CapacityInfo {
    pub fn new(capacity: &CSIStorageCapacity) -> CapacityInfo {
        CapacityInfo {
            class: capacity.storage_class_name.clone(),
            topology: capacity.node_topology.as_ref().map(|t| {
                serde_json::to_value(t)
                    .ok()
                    .and_then(|v| LabelSelector::from_label_selector_json(&v).ok())
                    .unwrap_or_else(LabelSelector::nothing)
            }),
            limit: capacity
                .maximum_volume_size
                .as_ref()
                .or(capacity.capacity.as_ref())
                .map(|q| bytes(&q.0)),
        }
    }
}

fn bytes(quantity: &str) -> i64 {
    api::quantity::parse(quantity).map_or(0, |q| q.as_units())
}

/// The claims of one pod, sorted by how they bind (kube-scheduler's `PodVolumeClaims`).
#[derive(Clone, Debug, Default)]
pub struct PodVolumes {
    pub bound: Vec<Arc<ClaimInfo>>,
    /// Unbound claims of `WaitForFirstConsumer` classes.
    pub delayed: Vec<Arc<ClaimInfo>>,
}

/// PreBind's work on the chosen node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VolumePlan {
    /// Claims (`namespace/name`) to annotate with the selected node.
    pub provision: Vec<String>,
    /// Available volumes to pre-bind: (volume name, claim key, claim uid).
    pub bind: Vec<(String, String, String)>,
    /// Claims that must be bound before the pod is.
    pub wait: Vec<String>,
}

impl VolumePlan {
    pub fn is_empty(&self) -> bool {
        self.wait.is_empty()
    }
}

/// The scheduler's view of claims, volumes and classes.
#[derive(Clone, Debug, Default)]
pub struct VolumeState {
    claims: HashMap<String, Arc<ClaimInfo>>,
    volumes: HashMap<String, Arc<VolumeInfo>>,
    classes: HashMap<String, ClassInfo>,
    /// CSIDrivers with `storageCapacity: true`: only their classes are checked for capacity.
    capacity_drivers: HashSet<String>,
    /// CSIStorageCapacity objects by `namespace/name`.
    capacities: HashMap<String, CapacityInfo>,
}

impl VolumeState {
    pub fn apply_claim(&mut self, claim: &PersistentVolumeClaim) {
        let info = ClaimInfo::new(claim);
        self.claims.insert(info.key.clone(), Arc::new(info));
    }

    pub fn delete_claim(&mut self, key: &str) {
        self.claims.remove(key);
    }

    pub fn apply_volume(&mut self, volume: &PersistentVolume) {
        let info = VolumeInfo::new(volume);
        self.volumes.insert(info.name.clone(), Arc::new(info));
    }

    pub fn delete_volume(&mut self, name: &str) {
        self.volumes.remove(name);
    }

    pub fn apply_class(&mut self, name: &str, class: ClassInfo) {
        self.classes.insert(name.to_string(), class);
    }

    pub fn delete_class(&mut self, name: &str) {
        self.classes.remove(name);
    }

    pub fn apply_driver(&mut self, driver: &CSIDriver) {
        let name = driver.metadata.name.clone().unwrap_or_default();
        if driver.spec.storage_capacity == Some(true) {
            self.capacity_drivers.insert(name);
        } else {
            self.capacity_drivers.remove(&name);
        }
    }

    pub fn delete_driver(&mut self, name: &str) {
        self.capacity_drivers.remove(name);
    }

    pub fn apply_capacity(&mut self, key: &str, capacity: CapacityInfo) {
        self.capacities.insert(key.to_string(), capacity);
    }

    pub fn delete_capacity(&mut self, key: &str) {
        self.capacities.remove(key);
    }

    pub fn claim(&self, key: &str) -> Option<&Arc<ClaimInfo>> {
        self.claims.get(key)
    }

    /// Whether every one of these claims is bound (PreBind's wait).
    pub fn all_bound(&self, keys: &[String]) -> bool {
        keys.iter()
            .all(|k| self.claims.get(k).is_some_and(|c| c.bound))
    }

    /// PreBind's check on the claims it annotated for provisioning on `node` (key and the
    /// resourceVersion the annotation was written in): the first one still unbound whose
    /// annotation a version at least as new has taken off or changed, which is how a
    /// provisioner gives a node back (kube-scheduler then fails the binding with `provisioning
    /// failed for PVC`). Older versions, which the informer may still deliver, are no answer.
    pub fn provisioning_reset<'a>(
        &self,
        annotated: &'a [(String, u64)],
        node: &str,
    ) -> Option<&'a str> {
        annotated.iter().find_map(|(key, written)| {
            let claim = self.claims.get(key)?;
            let reset = *written > 0
                && claim.resource_version >= *written
                && !claim.bound
                && claim.selected_node.as_deref() != Some(node);
            reset.then_some(key.as_str())
        })
    }

    /// PreFilter: the pod's claims sorted, or the message that makes it fit nowhere. `None` for
    /// a pod without claims.
    pub fn prefilter(&self, pod: &PodInfo) -> Result<Option<PodVolumes>, String> {
        if pod.claims.is_empty() {
            return Ok(None);
        }
        let mut volumes = PodVolumes::default();
        let mut unbound_immediate = false;
        for name in &pod.claims {
            let key = format!("{}/{name}", pod.namespace);
            let Some(claim) = self.claims.get(&key) else {
                return Err(format!("persistentvolumeclaim \"{name}\" not found"));
            };
            if claim.deleting {
                return Err(format!("persistentvolumeclaim \"{name}\" is being deleted"));
            }
            if claim.bound {
                volumes.bound.push(claim.clone());
            } else if claim.volume_name.is_empty()
                && self
                    .classes
                    .get(&claim.class)
                    .is_some_and(|c| c.wait_for_first_consumer)
            {
                volumes.delayed.push(claim.clone());
            } else {
                unbound_immediate = true;
            }
        }
        if unbound_immediate {
            return Err(UNBOUND_IMMEDIATE.into());
        }
        Ok(Some(volumes))
    }

    /// Filter: whether the node can serve the pod's claims; on success, what PreBind does there.
    pub fn filter(
        &self,
        claims: &PodVolumes,
        node: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<VolumePlan, Vec<Reason>> {
        let mut reasons = Vec::new();
        for claim in &claims.bound {
            match self.volumes.get(&claim.volume_name) {
                None => push_once(&mut reasons, Reason::VolumeNotExist),
                Some(volume) if !volume.accepts(node, labels) => {
                    push_once(&mut reasons, Reason::VolumeNodeConflict)
                }
                Some(_) => {}
            }
        }
        let mut plan = VolumePlan::default();
        for claim in &claims.delayed {
            plan.wait.push(claim.key.clone());
            if let Some(selected) = &claim.selected_node {
                if selected != node {
                    push_once(&mut reasons, Reason::VolumeBindConflict);
                }
                continue;
            }
            if let Some(volume) = self.matching_volume(claim, node, labels, &plan) {
                plan.bind
                    .push((volume, claim.key.clone(), claim.uid.clone()));
                continue;
            }
            let Some(class) = self.classes.get(&claim.class) else {
                push_once(&mut reasons, Reason::VolumeBindConflict);
                continue;
            };
            if class.provisioner.is_empty()
                || class.provisioner == NO_PROVISIONER
                || !(class.allowed_topologies.is_empty()
                    || class
                        .allowed_topologies
                        .iter()
                        .any(|t| t.matches(node, labels)))
            {
                push_once(&mut reasons, Reason::VolumeBindConflict);
                continue;
            }
            if !self.has_capacity(class, claim, labels) {
                push_once(&mut reasons, Reason::NotEnoughStorage);
                continue;
            }
            plan.provision.push(claim.key.clone());
        }
        if reasons.is_empty() {
            Ok(plan)
        } else {
            Err(reasons)
        }
    }

    /// The smallest available volume of the claim's class that fits it and accepts the node,
    /// not already chosen for another claim of the pod.
    fn matching_volume(
        &self,
        claim: &ClaimInfo,
        node: &str,
        labels: &BTreeMap<String, String>,
        plan: &VolumePlan,
    ) -> Option<String> {
        self.volumes
            .values()
            .filter(|v| {
                v.class == claim.class
                    && v.capacity >= claim.request
                    && claim
                        .access_modes
                        .iter()
                        .all(|m| v.access_modes.contains(m))
                    && match &v.claim {
                        Some((key, uid)) => {
                            key == &claim.key && (uid.is_empty() || uid == &claim.uid)
                        }
                        None => v.phase == "Available",
                    }
                    && v.accepts(node, labels)
                    && !plan.bind.iter().any(|(name, _, _)| name == &v.name)
            })
            .min_by(|a, b| a.capacity.cmp(&b.capacity).then(a.name.cmp(&b.name)))
            .map(|v| v.name.clone())
    }

    /// Whether a segment the node reaches can hold the claim, for drivers that publish
    /// capacity; always for the others.
    fn has_capacity(
        &self,
        class: &ClassInfo,
        claim: &ClaimInfo,
        labels: &BTreeMap<String, String>,
    ) -> bool {
        if !self.capacity_drivers.contains(&class.provisioner) {
            return true;
        }
        self.capacities.values().any(|c| {
            c.class == claim.class
                && c.topology.as_ref().is_some_and(|t| t.matches(labels))
                && c.limit.is_some_and(|limit| limit >= claim.request)
        })
    }

    /// PreBind's work for a pod decided onto `node`: `None` when there is nothing to do or
    /// wait for.
    pub fn plan(
        &self,
        pod: &PodInfo,
        node: &str,
        labels: &BTreeMap<String, String>,
    ) -> Option<VolumePlan> {
        let claims = self.prefilter(pod).ok()??;
        self.filter(&claims, node, labels)
            .ok()
            .filter(|plan| !plan.is_empty())
    }

    /// Counts the plan as done in the cache until the informers catch up, so that the next
    /// decision neither sends the claim elsewhere nor hands the volume to another claim.
    pub fn assume(&mut self, plan: &VolumePlan, node: &str) {
        for key in &plan.provision {
            if let Some(claim) = self.claims.get_mut(key) {
                Arc::make_mut(claim).selected_node = Some(node.to_string());
            }
        }
        for (volume, claim, uid) in &plan.bind {
            if let Some(v) = self.volumes.get_mut(volume) {
                Arc::make_mut(v).claim = Some((claim.clone(), uid.clone()));
            }
        }
    }
}

fn push_once(reasons: &mut Vec<Reason>, reason: Reason) {
    if !reasons.contains(&reason) {
        reasons.push(reason);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claim(
        name: &str,
        class: &str,
        size: &str,
        volume: &str,
        bound: bool,
    ) -> PersistentVolumeClaim {
        serde_json::from_value(json!({
            "metadata": {"namespace": "default", "name": name, "uid": format!("uid-{name}")},
            "spec": {"storageClassName": class, "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": size}}, "volumeName": volume},
            "status": {"phase": if bound { "Bound" } else { "Pending" }},
        }))
        .expect("claim")
    }

    fn volume(name: &str, class: &str, size: &str, host: Option<&str>) -> PersistentVolume {
        let affinity = host.map(|h| {
            json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [h]}]}]}})
        });
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"storageClassName": class, "accessModes": ["ReadWriteOnce"],
                     "capacity": {"storage": size}, "nodeAffinity": affinity},
            "status": {"phase": "Available"},
        }))
        .expect("volume")
    }

    #[test]
    fn a_selected_node_taken_off_by_a_newer_version_fails_prebind() {
        let mut state = VolumeState::default();
        let mut pending = claim("data", "late", "1Gi", "", false);
        pending.metadata.resource_version = Some("7".into());
        state.apply_claim(&pending);
        let annotated = [("default/data".to_string(), 8)];
        // The version before the annotation: no answer yet.
        assert_eq!(state.provisioning_reset(&annotated, "node-0"), None);
        let mut selected = pending.clone();
        selected.metadata.resource_version = Some("8".into());
        selected.metadata.annotations = Some(BTreeMap::from([(
            SELECTED_NODE_ANNOTATION.to_string(),
            "node-0".to_string(),
        )]));
        state.apply_claim(&selected);
        assert_eq!(state.provisioning_reset(&annotated, "node-0"), None);
        let mut given_back = pending.clone();
        given_back.metadata.resource_version = Some("9".into());
        state.apply_claim(&given_back);
        assert_eq!(
            state.provisioning_reset(&annotated, "node-0"),
            Some("default/data")
        );
        // Bound meanwhile: nothing to retry.
        let mut bound = claim("data", "late", "1Gi", "pv-1", true);
        bound.metadata.resource_version = Some("10".into());
        state.apply_claim(&bound);
        assert_eq!(state.provisioning_reset(&annotated, "node-0"), None);
    }

    fn class(provisioner: &str, wffc: bool) -> ClassInfo {
        ClassInfo::new(
            &serde_json::from_value(json!({
                "metadata": {"name": "c"}, "provisioner": provisioner,
                "volumeBindingMode": if wffc { "WaitForFirstConsumer" } else { "Immediate" },
            }))
            .expect("class"),
        )
    }

    fn pod_with(claims: &[&str]) -> PodInfo {
        let mut pod = crate::synthetic::pod("default", "p", "", "");
        pod.spec.as_mut().expect("spec").volumes = Some(
            claims
                .iter()
                .map(|c| {
                    serde_json::from_value(
                        json!({"name": c, "persistentVolumeClaim": {"claimName": c}}),
                    )
                    .expect("volume")
                })
                .collect(),
        );
        PodInfo::new(&pod, 0)
    }

    fn labels(host: &str) -> BTreeMap<String, String> {
        [("kubernetes.io/hostname".to_string(), host.to_string())].into()
    }

    #[test]
    fn missing_and_unbound_immediate_claims_fit_nowhere() {
        let mut state = VolumeState::default();
        state.apply_class("fast", class("csi.kemu.dev", false));
        assert_eq!(
            state.prefilter(&pod_with(&["data"])).unwrap_err(),
            "persistentvolumeclaim \"data\" not found"
        );
        state.apply_claim(&claim("data", "fast", "1Gi", "", false));
        assert_eq!(
            state.prefilter(&pod_with(&["data"])).unwrap_err(),
            UNBOUND_IMMEDIATE
        );
        assert!(state.prefilter(&pod_with(&[])).unwrap().is_none());
    }

    #[test]
    fn bound_volumes_keep_pods_on_their_nodes() {
        let mut state = VolumeState::default();
        state.apply_claim(&claim("data", "local", "1Gi", "pv-a", true));
        let claims = state.prefilter(&pod_with(&["data"])).unwrap().unwrap();
        assert_eq!(
            state.filter(&claims, "a", &labels("a")),
            Err(vec![Reason::VolumeNotExist])
        );
        state.apply_volume(&volume("pv-a", "local", "1Gi", Some("a")));
        assert!(state.filter(&claims, "a", &labels("a")).unwrap().is_empty());
        assert_eq!(
            state.filter(&claims, "b", &labels("b")),
            Err(vec![Reason::VolumeNodeConflict])
        );
    }

    #[test]
    fn delayed_claims_provision_where_capacity_is_published_and_pick_static_volumes() {
        let mut state = VolumeState::default();
        state.apply_class("wait", class("csi.kemu.dev", true));
        state.apply_claim(&claim("data", "wait", "2Gi", "", false));
        let claims = state.prefilter(&pod_with(&["data"])).unwrap().unwrap();
        let plan = state.filter(&claims, "a", &labels("a")).unwrap();
        assert_eq!(plan.provision, vec!["default/data".to_string()]);
        assert_eq!(plan.wait, vec!["default/data".to_string()]);

        // The driver publishes capacity: 1Gi on node a is not enough, 5Gi on b is.
        state.apply_driver(
            &serde_json::from_value(
                json!({"metadata": {"name": "csi.kemu.dev"}, "spec": {"storageCapacity": true}}),
            )
            .unwrap(),
        );
        let segment = |host: &str, size: &str| {
            CapacityInfo::new(
                &serde_json::from_value(json!({
                    "metadata": {"namespace": "kube-system", "name": host},
                    "storageClassName": "wait", "capacity": size,
                    "nodeTopology": {"matchLabels": {"kubernetes.io/hostname": host}},
                }))
                .unwrap(),
            )
        };
        state.apply_capacity("kube-system/a", segment("a", "1Gi"));
        state.apply_capacity("kube-system/b", segment("b", "5Gi"));
        assert_eq!(
            state.filter(&claims, "a", &labels("a")),
            Err(vec![Reason::NotEnoughStorage])
        );
        let plan = state.filter(&claims, "b", &labels("b")).unwrap();
        state.assume(&plan, "b");
        // Once sent to b, the claim is provisioned there only.
        let claims = state.prefilter(&pod_with(&["data"])).unwrap().unwrap();
        assert_eq!(
            state.filter(&claims, "c", &labels("c")),
            Err(vec![Reason::VolumeBindConflict])
        );

        // A local volume on a serves a claim of a class without a provisioner, on a only.
        state.apply_class("local", class(NO_PROVISIONER, true));
        state.apply_claim(&claim("logs", "local", "1Gi", "", false));
        state.apply_volume(&volume("pv-small", "local", "1Gi", Some("a")));
        state.apply_volume(&volume("pv-big", "local", "10Gi", Some("a")));
        let claims = state.prefilter(&pod_with(&["logs"])).unwrap().unwrap();
        let plan = state.filter(&claims, "a", &labels("a")).unwrap();
        assert_eq!(
            plan.bind,
            vec![("pv-small".into(), "default/logs".into(), "uid-logs".into())]
        );
        assert_eq!(
            state.filter(&claims, "b", &labels("b")),
            Err(vec![Reason::VolumeBindConflict])
        );
    }
}
