//! The volume controllers' reconciler: kube-controller-manager's PersistentVolume binder and the
//! pvc-protection and pv-protection controllers, with the emulated CSI driver's provisioner and
//! resizer (and the node side of an expansion) in the same loop.
//!
//! Keys are `claim/NAMESPACE/NAME` and `volume/NAME`. A claim's sync removes its
//! `kubernetes.io/pvc-protection` finalizer once it is being deleted and no pod that has not
//! finished uses it, carries out [`sync_claim`]'s plan (provisioning through the emulated driver
//! after `provision_latency`), then grows a bound claim whose request exceeds its capacity: the
//! resizer's `Resizing` then `FileSystemResizePending` conditions and the volume's new capacity
//! after `resize_latency`, then the claim's capacity once a running pod mounts it. A volume's
//! sync removes `kubernetes.io/pv-protection` once it is not Bound and carries out
//! [`sync_volume`]'s plan (the emulated driver deletes released Delete volumes after
//! `provision_latency`).
//!
//! With a per-node capacity, the provisioner refuses a claim that does not fit its selected
//! node (the volumes pinned there and those being created counted): `ProvisioningFailed` with
//! the driver's `ResourceExhausted`, and the selected-node annotation taken off the claim so
//! that the scheduler picks again, as the external-provisioner reschedules.
//!
//! At start the controller makes the emulated driver's CSIDriver and, unless told not to, the
//! default StorageClass `standard` (provisioner `csi.kemu.dev`, expandable), as kind and
//! minikube clusters come with one.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use api::client::{Client, Patch};
use api::event_sink::EventSink;
use api::informer::{Informer, InformerEvent, Store};
use api::quantity::Quantity;
use api::resources::{self, ResourceInfo};
use api::volumes::{PVC_PROTECTION_FINALIZER, PV_PROTECTION_FINALIZER};
use k8s_openapi::api::core::v1::{
    Node, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimCondition,
    PersistentVolumeClaimStatus, Pod,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use parking_lot::Mutex;
use serde_json::json;
use tracing::{debug, info, warn};

use crate::events::{reference, Recorder};
use crate::owners::{key_of, now};
use crate::persistent_volume::{
    capacity, claim_class, claim_phase, is_emulated, provisioned_volume, referenced_claim,
    requested, sync_claim, sync_volume, Note, Plan, EMULATED_DRIVER,
};
use crate::queue::WorkQueue;
use crate::resource_quota::{namespace_of, BY_NAMESPACE};
use crate::worker::{Outcome, ReconcileError, Reconciler, Shutdown};

/// The binder's event source, as kube-controller-manager names it.
const BINDER: &str = "persistentvolume-controller";
/// The emulated driver's provisioner and resizer, as the CSI sidecars name themselves.
const PROVISIONER: &str = "csi.kemu.dev_kemu-provisioner";
const RESIZER: &str = "external-resizer csi.kemu.dev";
const KUBELET: &str = "kubelet";

/// The volume controllers' settings.
#[derive(Clone, Debug)]
pub struct VolumeConfig {
    /// How long the emulated driver takes to create or delete a volume.
    pub provision_latency: Duration,
    /// How long the emulated driver takes to grow a volume.
    pub resize_latency: Duration,
    /// Create the default StorageClass `standard` at start.
    pub default_class: bool,
    /// `volumeBindingMode` of `standard`: `Immediate` or `WaitForFirstConsumer`.
    pub default_binding_mode: String,
    /// How long the emulated driver takes to attach a volume to a node or detach it.
    pub attach_latency: Duration,
    /// What the emulated driver can provision on each node; `None`: no limit, and no
    /// CSIStorageCapacity objects.
    pub node_capacity: Option<Quantity>,
    /// The share of provisioning attempts that fail (0 to 1), retried with back-off.
    pub provision_failure_rate: f64,
    /// The share of attach attempts that fail (0 to 1), retried with back-off.
    pub attach_failure_rate: f64,
}

impl Default for VolumeConfig {
    fn default() -> Self {
        VolumeConfig {
            provision_latency: Duration::ZERO,
            resize_latency: Duration::ZERO,
            default_class: true,
            default_binding_mode: "Immediate".into(),
            attach_latency: Duration::ZERO,
            node_capacity: None,
            provision_failure_rate: 0.0,
            attach_failure_rate: 0.0,
        }
    }
}

impl VolumeConfig {
    pub fn validate(&self) -> Result<(), String> {
        for (field, rate) in [
            ("provision_failure_rate", self.provision_failure_rate),
            ("attach_failure_rate", self.attach_failure_rate),
        ] {
            if !(0.0..=1.0).contains(&rate) {
                return Err(format!("{field} {rate}: must be between 0 and 1"));
            }
        }
        if self
            .node_capacity
            .as_ref()
            .is_some_and(|q| q.is_negative() || q.is_zero())
        {
            return Err("node_capacity: must be positive".into());
        }
        match self.default_binding_mode.as_str() {
            "Immediate" | "WaitForFirstConsumer" => Ok(()),
            other => Err(format!(
                "default_binding_mode {other:?}: must be Immediate or WaitForFirstConsumer"
            )),
        }
    }
}

/// The reconciler.
pub struct PersistentVolumeController {
    client: Client,
    claims: Store<PersistentVolumeClaim>,
    volumes: Store<PersistentVolume>,
    classes: Store<StorageClass>,
    nodes: Store<Node>,
    pods: Store<Pod>,
    binder: Recorder,
    provisioner: Recorder,
    resizer: Recorder,
    kubelet: Recorder,
    config: VolumeConfig,
    /// When each emulated operation (`provision/UID`, `delete/NAME`, `resize/UID`) started.
    started: Mutex<HashMap<String, Instant>>,
    /// The last event recorded per object, so a claim waiting in one state says so once.
    last_note: Mutex<HashMap<String, (&'static str, String)>>,
    /// Failed attempts per emulated operation (the failure pattern and back-off read it).
    failures: Mutex<HashMap<String, u32>>,
    /// Capacity the emulated driver promised to volumes it is creating on a node and the
    /// informer has not shown yet: volume name → (node, size).
    reserved: Mutex<HashMap<String, (String, Quantity)>>,
}

/// Whether attempt `attempt` of `operation` fails under a failure `rate`: a fixed share of
/// attempts, spread by a hash of both so that a run repeats itself.
pub fn fails(rate: f64, operation: &str, attempt: u32) -> bool {
    use std::hash::{Hash, Hasher};
    if rate <= 0.0 {
        return false;
    }
    if rate >= 1.0 {
        return true;
    }
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (operation, attempt).hash(&mut hasher);
    (hasher.finish() % 10_000) as f64 / 10_000.0 < rate
}

/// The pause before retrying a failed emulated operation, as the CSI sidecars back off: 1 s
/// doubling to 5 minutes.
pub fn retry_after(failures: u32) -> Duration {
    Duration::from_secs(1)
        .saturating_mul(1u32.checked_shl(failures.min(31)).unwrap_or(u32::MAX))
        .min(Duration::from_secs(300))
}

fn claim_key(namespace: &str, name: &str) -> String {
    format!("claim/{namespace}/{name}")
}

/// The claims a pod's volumes name.
fn pod_claims(pod: &Pod) -> Vec<String> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .map(|c| claim_key(namespace, &c.claim_name))
        .collect()
}

fn finished(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

fn running(pod: &Pod) -> bool {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

fn resource(group: &str, plural: &str) -> &'static ResourceInfo {
    resources::find(group, "v1", plural).expect("a served resource")
}

fn without_finalizer(meta: &ObjectMeta, finalizer: &str) -> Option<Vec<String>> {
    let finalizers = meta.finalizers.as_deref().unwrap_or_default();
    finalizers.iter().any(|f| f == finalizer).then(|| {
        finalizers
            .iter()
            .filter(|f| *f != finalizer)
            .cloned()
            .collect()
    })
}

impl PersistentVolumeController {
    /// Subscribes to the informers: claims and volumes queue themselves (a volume its claim
    /// too), classes every claim, pods the claims they use.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        client: Client,
        claims: &mut Informer<PersistentVolumeClaim>,
        volumes: &mut Informer<PersistentVolume>,
        classes: &mut Informer<StorageClass>,
        nodes: &Informer<Node>,
        pods: &mut Informer<Pod>,
        events: EventSink,
        config: VolumeConfig,
    ) -> (Arc<PersistentVolumeController>, WorkQueue) {
        let queue = WorkQueue::new(Duration::from_millis(5), Duration::from_secs(30));
        pods.add_index(BY_NAMESPACE, namespace_of::<Pod>);
        let controller = Arc::new(PersistentVolumeController {
            client,
            claims: claims.store(),
            volumes: volumes.store(),
            classes: classes.store(),
            nodes: nodes.store(),
            pods: pods.store(),
            binder: Recorder::new(events.clone(), BINDER),
            provisioner: Recorder::new(events.clone(), PROVISIONER),
            resizer: Recorder::new(events.clone(), RESIZER),
            kubelet: Recorder::new(events, KUBELET),
            config,
            started: Mutex::new(HashMap::new()),
            last_note: Mutex::new(HashMap::new()),
            failures: Mutex::new(HashMap::new()),
            reserved: Mutex::new(HashMap::new()),
        });
        let mut claim_events = claims.subscribe();
        let mut volume_events = volumes.subscribe();
        let mut class_events = classes.subscribe();
        let mut pod_events = pods.subscribe();
        let feed = queue.clone();
        let all_claims = claims.store();
        tokio::spawn(async move {
            let claim_of = |c: &PersistentVolumeClaim| {
                claim_key(
                    c.metadata.namespace.as_deref().unwrap_or_default(),
                    c.metadata.name.as_deref().unwrap_or_default(),
                )
            };
            let pending_claims = || {
                for c in all_claims.list() {
                    if claim_phase(&c) != "Bound" {
                        feed.add(&claim_of(&c));
                    }
                }
            };
            let volume_changed = |v: &PersistentVolume| {
                feed.add(&format!("volume/{}", key_of(&v.metadata)));
                match referenced_claim(v) {
                    Some(claim) => feed.add(&format!("claim/{claim}")),
                    // A volume free to bind: the claims still waiting may take it now (where
                    // kube-controller-manager finds it at its next 15 s resync).
                    None => pending_claims(),
                }
            };
            loop {
                tokio::select! {
                    event = claim_events.recv() => match event {
                        Some(InformerEvent::Added(c)) | Some(InformerEvent::Updated { new: c, .. }) => {
                            feed.add(&claim_of(&c));
                            if let Some(volume) = c.spec.as_ref().and_then(|s| s.volume_name.as_deref()) {
                                feed.add(&format!("volume/{volume}"));
                            }
                        }
                        Some(InformerEvent::Deleted(c)) => {
                            if let Some(volume) = c.spec.as_ref().and_then(|s| s.volume_name.as_deref()) {
                                feed.add(&format!("volume/{volume}"));
                            }
                        }
                        None => return,
                    },
                    event = volume_events.recv() => match event {
                        Some(InformerEvent::Added(v))
                        | Some(InformerEvent::Updated { new: v, .. })
                        | Some(InformerEvent::Deleted(v)) => volume_changed(&v),
                        None => return,
                    },
                    event = class_events.recv() => match event {
                        Some(_) => pending_claims(),
                        None => return,
                    },
                    event = pod_events.recv() => match event {
                        Some(InformerEvent::Added(p))
                        | Some(InformerEvent::Updated { new: p, .. })
                        | Some(InformerEvent::Deleted(p)) => {
                            for key in pod_claims(&p) {
                                feed.add(&key);
                            }
                        }
                        None => return,
                    },
                }
            }
        });
        (controller, queue)
    }

    /// Records `note` about the claim or volume unless it is what was last said about it.
    fn note(
        &self,
        claim: Option<&PersistentVolumeClaim>,
        volume: Option<&PersistentVolume>,
        note: &Note,
    ) {
        let (object, key) = match (note.on_volume, claim, volume) {
            (true, _, Some(v)) => (
                reference("v1", "PersistentVolume", &v.metadata),
                format!("volume/{}", key_of(&v.metadata)),
            ),
            (false, Some(c), _) => (
                reference("v1", "PersistentVolumeClaim", &c.metadata),
                format!("claim/{}", key_of(&c.metadata)),
            ),
            _ => return,
        };
        let said = (note.reason, note.message.clone());
        if self.last_note.lock().insert(key, said.clone()) == Some(said) {
            return;
        }
        self.binder
            .record(object, note.warning, note.reason, &note.message);
    }

    /// How much longer an emulated operation takes: `None` once `latency` has passed since it
    /// was first asked for (and it is forgotten), else the time left.
    fn pending(&self, operation: &str, latency: Duration) -> Option<Duration> {
        if latency.is_zero() {
            return None;
        }
        let mut started = self.started.lock();
        let at = *started
            .entry(operation.to_string())
            .or_insert_with(Instant::now);
        let elapsed = at.elapsed();
        if elapsed >= latency {
            started.remove(operation);
            None
        } else {
            Some(latency - elapsed)
        }
    }

    /// Whether a pod that has not finished uses the claim.
    fn in_use(&self, claim: &PersistentVolumeClaim, by_running_only: bool) -> Option<Arc<Pod>> {
        let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
        let name = claim.metadata.name.as_deref().unwrap_or_default();
        let key = claim_key(namespace, name);
        self.pods
            .by_index(BY_NAMESPACE, namespace)
            .into_iter()
            .filter(|p| {
                if by_running_only {
                    running(p)
                } else {
                    !finished(p)
                }
            })
            .find(|p| pod_claims(p).contains(&key))
    }

    async fn sync_claim(&self, namespace: &str, name: &str) -> Result<Outcome, ReconcileError> {
        let Some(claim) = self.claims.get_named(Some(namespace), name) else {
            return Ok(Outcome::Done);
        };
        let claims = resource("", "persistentvolumeclaims");
        if claim.metadata.deletion_timestamp.is_some() {
            if let Some(rest) = without_finalizer(&claim.metadata, PVC_PROTECTION_FINALIZER) {
                if self.in_use(&claim, false).is_some() {
                    debug!(claim = %name, "in use by a pod; keeping its protection");
                    return Ok(Outcome::Done);
                }
                let mut updated = (*claim).clone();
                updated.metadata.finalizers = Some(rest);
                return self
                    .write(claims, Some(namespace), name, &updated, false)
                    .await
                    .map(|_| Outcome::Done);
            }
        }
        let volumes = self.volumes.list();
        let volume_refs: Vec<&PersistentVolume> = volumes.iter().map(|v| v.as_ref()).collect();
        let class = self.classes.get_named(None, claim_class(&claim));
        let node = claim
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(crate::persistent_volume::ANN_SELECTED_NODE))
            .and_then(|n| self.nodes.get_named(None, n));
        let plan = sync_claim(&claim, &volume_refs, class.as_deref(), node.as_deref());
        let provision = plan.provision.clone();
        let claim_after = self.carry_out(&claim, plan).await?;
        if let (Some(request), Some(class)) = (provision, class) {
            return self
                .provision(&claim_after, &class, request.node.as_deref())
                .await;
        }
        if claim_phase(&claim_after) == "Bound" {
            return self.expand(&claim_after).await;
        }
        Ok(Outcome::Done)
    }

    /// Makes a plan's writes in order; the claim as last written (or read).
    async fn carry_out(
        &self,
        claim: &PersistentVolumeClaim,
        plan: Plan,
    ) -> Result<PersistentVolumeClaim, ReconcileError> {
        let volumes = resource("", "persistentvolumes");
        let claims = resource("", "persistentvolumeclaims");
        let namespace = claim.metadata.namespace.clone().unwrap_or_default();
        let name = claim.metadata.name.clone().unwrap_or_default();
        let mut volume = plan.volume.clone();
        if let Some(v) = &plan.volume {
            let volume_name = v.metadata.name.clone().unwrap_or_default();
            volume = Some(self.write(volumes, None, &volume_name, v, false).await?);
        }
        if let Some(phase) = plan.volume_phase {
            let current = match volume.clone() {
                Some(v) => Some(v),
                None => claim
                    .spec
                    .as_ref()
                    .and_then(|s| s.volume_name.as_deref())
                    .or(plan
                        .claim
                        .as_ref()
                        .and_then(|c| c.spec.as_ref()?.volume_name.as_deref()))
                    .and_then(|n| self.volumes.get_named(None, n))
                    .map(|v| (*v).clone()),
            };
            if let Some(mut v) = current {
                let volume_name = v.metadata.name.clone().unwrap_or_default();
                v.status.get_or_insert_with(Default::default).phase = Some(phase.into());
                volume = Some(self.write(volumes, None, &volume_name, &v, true).await?);
            }
        }
        let mut current = claim.clone();
        if let Some(c) = &plan.claim {
            current = self
                .write(claims, Some(&namespace), &name, c, false)
                .await?;
        }
        if let Some(status) = plan.claim_status {
            current.status = Some(status);
            current = self
                .write(claims, Some(&namespace), &name, &current, true)
                .await?;
        }
        for note in &plan.notes {
            self.note(Some(claim), volume.as_ref(), note);
        }
        Ok(current)
    }

    /// PUTs an object (or its status), returning what the server stored.
    async fn write<T>(
        &self,
        resource: &'static ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        object: &T,
        status: bool,
    ) -> Result<T, ReconcileError>
    where
        T: serde::Serialize + serde::de::DeserializeOwned,
    {
        let written = if status {
            self.client
                .update_status(resource, namespace, name, object)
                .await
        } else {
            self.client.update(resource, namespace, name, object).await
        };
        written.map_err(ReconcileError::api(format!(
            "update {} {name}",
            resource.kind
        )))
    }

    /// The emulated provisioner: after its latency, a volume pre-bound to the claim.
    async fn provision(
        &self,
        claim: &PersistentVolumeClaim,
        class: &StorageClass,
        node: Option<&str>,
    ) -> Result<Outcome, ReconcileError> {
        let uid = claim.metadata.uid.clone().unwrap_or_default();
        let operation = format!("provision/{uid}");
        let claim_ref = reference("v1", "PersistentVolumeClaim", &claim.metadata);
        if !self.started.lock().contains_key(&operation) {
            self.provisioner.record(
                claim_ref.clone(),
                false,
                "Provisioning",
                &format!(
                    "External provisioner is provisioning volume for claim \"{}\"",
                    key_of(&claim.metadata)
                ),
            );
        }
        if let Some(left) = self.pending(&operation, self.config.provision_latency) {
            return Ok(Outcome::RequeueAfter(left));
        }
        let attempt = self.failures.lock().get(&operation).copied().unwrap_or(0);
        if fails(self.config.provision_failure_rate, &operation, attempt) {
            self.failures.lock().insert(operation.clone(), attempt + 1);
            let class_name = class.metadata.name.as_deref().unwrap_or_default();
            self.provisioner.record(
                claim_ref,
                true,
                "ProvisioningFailed",
                &format!("failed to provision volume with StorageClass \"{class_name}\": rpc error: code = Internal desc = emulated provisioning failure"),
            );
            return Ok(Outcome::RequeueAfter(retry_after(attempt)));
        }
        self.failures.lock().remove(&operation);
        let volume = provisioned_volume(claim, class, node);
        let volume_name = volume.metadata.name.clone().unwrap_or_default();
        if let Some(node) = node {
            if let Err(exhausted) = self.reserve(node, claim, &volume_name) {
                return self.reschedule(claim, class, &exhausted).await;
            }
        }
        let created: Result<PersistentVolume, _> = self
            .client
            .create(resource("", "persistentvolumes"), None, &volume)
            .await;
        if created.as_ref().is_err_and(|e| !e.is_already_exists()) {
            self.reserved.lock().remove(&volume_name);
        }
        match created {
            Ok(_) => {
                info!(claim = %key_of(&claim.metadata), volume = %volume_name, "provisioned");
                self.provisioner.record(
                    claim_ref,
                    false,
                    "ProvisioningSucceeded",
                    &format!("Successfully provisioned volume {volume_name}"),
                );
                Ok(Outcome::Done)
            }
            Err(e) if e.is_already_exists() => Ok(Outcome::Done),
            Err(e) => Err(ReconcileError::api("provision")(e)),
        }
    }

    /// Promises the capacity `claim` asks for on `node` to `volume`, when the driver has a
    /// per-node capacity: `Err` with the driver's `ResourceExhausted` description when the
    /// volumes pinned there and those being created leave too little.
    fn reserve(
        &self,
        node: &str,
        claim: &PersistentVolumeClaim,
        volume: &str,
    ) -> Result<(), String> {
        let Some(total) = &self.config.node_capacity else {
            return Ok(());
        };
        let request = requested(claim).unwrap_or_else(Quantity::zero);
        let volumes = self.volumes.list();
        let mut reserved = self.reserved.lock();
        // A volume the informer shows counts as pinned; this claim's own promise is renewed.
        reserved.retain(|name, _| name != volume && self.volumes.get_named(None, name).is_none());
        let promised = reserved
            .values()
            .filter(|(n, _)| n == node)
            .fold(Quantity::zero(), |sum, (_, q)| sum.add(q));
        if let Some(why) =
            crate::attach_detach::exhausted(node, total, &request, &volumes, &promised)
        {
            return Err(why);
        }
        reserved.insert(volume.to_string(), (node.to_string(), request));
        Ok(())
    }

    /// A volume that does not fit on the node the scheduler selected: as the external
    /// provisioner, `ProvisioningFailed` with the driver's `ResourceExhausted`, and the
    /// selected-node annotation taken off the claim so that the scheduler picks again.
    async fn reschedule(
        &self,
        claim: &PersistentVolumeClaim,
        class: &StorageClass,
        exhausted: &str,
    ) -> Result<Outcome, ReconcileError> {
        let class_name = class.metadata.name.as_deref().unwrap_or_default();
        self.provisioner.record(
            reference("v1", "PersistentVolumeClaim", &claim.metadata),
            true,
            "ProvisioningFailed",
            &format!("failed to provision volume with StorageClass \"{class_name}\": rpc error: code = ResourceExhausted desc = {exhausted}"),
        );
        let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
        let name = claim.metadata.name.as_deref().unwrap_or_default();
        let patch = Patch::Merge(json!({
            "metadata": {
                "annotations": {crate::persistent_volume::ANN_SELECTED_NODE: null},
                "resourceVersion": claim.metadata.resource_version,
            }
        }));
        match self
            .client
            .patch::<PersistentVolumeClaim>(
                resource("", "persistentvolumeclaims"),
                Some(namespace),
                name,
                &patch,
            )
            .await
        {
            Ok(_) => Ok(Outcome::Done),
            Err(e) if e.is_not_found() => Ok(Outcome::Done),
            Err(e) => Err(ReconcileError::api(format!(
                "reset selected node of {namespace}/{name}"
            ))(e)),
        }
    }

    /// Grows a bound claim of the emulated driver: the resizer, then the node.
    async fn expand(&self, claim: &PersistentVolumeClaim) -> Result<Outcome, ReconcileError> {
        let (Some(request), Some(volume_name)) = (
            requested(claim),
            claim.spec.as_ref().and_then(|s| s.volume_name.clone()),
        ) else {
            return Ok(Outcome::Done);
        };
        let Some(volume) = self.volumes.get_named(None, &volume_name) else {
            return Ok(Outcome::Done);
        };
        let status = claim.status.clone().unwrap_or_default();
        let current = crate::persistent_volume::status_capacity(&status);
        if current.as_ref().is_some_and(|c| *c >= request) || !is_emulated(&volume) {
            return Ok(Outcome::Done);
        }
        let namespace = claim.metadata.namespace.clone().unwrap_or_default();
        let name = claim.metadata.name.clone().unwrap_or_default();
        let claims = resource("", "persistentvolumeclaims");
        let claim_ref = reference("v1", "PersistentVolumeClaim", &claim.metadata);
        let requested_text = claim.spec.as_ref().and_then(|s| {
            s.resources
                .as_ref()?
                .requests
                .as_ref()?
                .get("storage")
                .cloned()
        });
        let Some(requested_q) = requested_text else {
            return Ok(Outcome::Done);
        };
        let offered = capacity(&volume);
        if offered.as_ref().is_none_or(|o| *o < request) {
            // The controller side: the resizer grows the volume.
            let allocated = status
                .allocated_resources
                .as_ref()
                .and_then(|a| a.get("storage"))
                .cloned();
            let operation = format!("resize/{}", claim.metadata.uid.clone().unwrap_or_default());
            if allocated.as_ref() != Some(&requested_q) {
                let mut next = status.clone();
                next.allocated_resources =
                    Some(BTreeMap::from([("storage".into(), requested_q.clone())]));
                next.allocated_resource_statuses = Some(BTreeMap::from([(
                    "storage".into(),
                    "ControllerResizeInProgress".into(),
                )]));
                set_condition(&mut next, "Resizing", "");
                let mut updated = claim.clone();
                updated.status = Some(next);
                self.write(claims, Some(&namespace), &name, &updated, true)
                    .await?;
                self.resizer.record(
                    claim_ref,
                    false,
                    "Resizing",
                    &format!("External resizer is resizing volume {volume_name}"),
                );
                self.started.lock().remove(&operation);
            }
            if let Some(left) = self.pending(&operation, self.config.resize_latency) {
                return Ok(Outcome::RequeueAfter(left));
            }
            let mut grown = (*volume).clone();
            if let Some(spec) = grown.spec.as_mut() {
                spec.capacity
                    .get_or_insert_with(BTreeMap::new)
                    .insert("storage".into(), requested_q.clone());
            }
            self.write(
                resource("", "persistentvolumes"),
                None,
                &volume_name,
                &grown,
                false,
            )
            .await?;
            let fresh: PersistentVolumeClaim = self
                .client
                .get(claims, Some(&namespace), &name)
                .await
                .map_err(ReconcileError::api("get claim"))?;
            let mut next = fresh.status.clone().unwrap_or_default();
            next.allocated_resource_statuses = Some(BTreeMap::from([(
                "storage".into(),
                "NodeResizePending".into(),
            )]));
            remove_condition(&mut next, "Resizing");
            set_condition(
                &mut next,
                "FileSystemResizePending",
                "Waiting for user to (re-)start a pod to finish file system resize of volume on node.",
            );
            let mut updated = fresh.clone();
            updated.status = Some(next);
            self.write(claims, Some(&namespace), &name, &updated, true)
                .await?;
            self.resizer.record(
                reference("v1", "PersistentVolumeClaim", &fresh.metadata),
                false,
                "FileSystemResizeRequired",
                "Require file system resize of volume on node",
            );
            return Ok(Outcome::Done);
        }
        // The node side: a running pod's kubelet grows the file system.
        let Some(pod) = self.in_use(claim, true) else {
            return Ok(Outcome::Done);
        };
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        let mut next = status.clone();
        next.capacity
            .get_or_insert_with(BTreeMap::new)
            .insert("storage".into(), requested_q);
        next.allocated_resource_statuses = None;
        remove_condition(&mut next, "Resizing");
        remove_condition(&mut next, "FileSystemResizePending");
        if next.conditions.as_ref().is_some_and(Vec::is_empty) {
            next.conditions = None;
        }
        let mut updated = claim.clone();
        updated.status = Some(next);
        self.write(claims, Some(&namespace), &name, &updated, true)
            .await?;
        self.kubelet.record(
            claim_ref,
            false,
            "FileSystemResizeSuccessful",
            &format!("MountVolume.NodeExpandVolume succeeded for volume \"{volume_name}\" {node}"),
        );
        Ok(Outcome::Done)
    }

    async fn sync_volume(&self, name: &str) -> Result<Outcome, ReconcileError> {
        let Some(volume) = self.volumes.get_named(None, name) else {
            return Ok(Outcome::Done);
        };
        let volumes = resource("", "persistentvolumes");
        let phase = volume.status.as_ref().and_then(|s| s.phase.as_deref());
        if volume.metadata.deletion_timestamp.is_some() && phase != Some("Bound") {
            if let Some(rest) = without_finalizer(&volume.metadata, PV_PROTECTION_FINALIZER) {
                let mut updated = (*volume).clone();
                updated.metadata.finalizers = Some(rest);
                return self
                    .write(volumes, None, name, &updated, false)
                    .await
                    .map(|_| Outcome::Done);
            }
        }
        let claim = match referenced_claim(&volume) {
            None => None,
            Some(key) => {
                let (namespace, claim_name) = key.split_once('/').unwrap_or(("", &key));
                match self.claims.get_named(Some(namespace), claim_name) {
                    Some(c) => Some((*c).clone()),
                    // The cache may lag: ask before calling the claim gone.
                    None => match self
                        .client
                        .get::<PersistentVolumeClaim>(
                            resource("", "persistentvolumeclaims"),
                            Some(namespace),
                            claim_name,
                        )
                        .await
                    {
                        Ok(c) => Some(c),
                        Err(e) if e.is_not_found() => None,
                        Err(e) => return Err(ReconcileError::api("get claim")(e)),
                    },
                }
            }
        };
        let plan = sync_volume(&volume, claim.as_ref());
        let delete = plan.delete_volume;
        let mut written = (*volume).clone();
        if let Some(v) = &plan.volume {
            written = self.write(volumes, None, name, v, false).await?;
        }
        if let Some(phase) = plan.volume_phase {
            written.status.get_or_insert_with(Default::default).phase = Some(phase.into());
            written = self.write(volumes, None, name, &written, true).await?;
        }
        for note in &plan.notes {
            self.note(None, Some(&written), note);
        }
        if delete && volume.metadata.deletion_timestamp.is_none() {
            if let Some(left) =
                self.pending(&format!("delete/{name}"), self.config.provision_latency)
            {
                return Ok(Outcome::RequeueAfter(left));
            }
            info!(volume = %name, "deleting the released volume");
            match self
                .client
                .delete::<serde_json::Value>(
                    volumes,
                    None,
                    name,
                    &api::client::DeleteParams::default(),
                )
                .await
            {
                Ok(_) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(ReconcileError::api("delete volume")(e)),
            }
        }
        Ok(Outcome::Done)
    }
}

/// Sets a claim condition to True, keeping its transition time if it already was.
fn set_condition(status: &mut PersistentVolumeClaimStatus, kind: &str, message: &str) {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    if conditions
        .iter()
        .any(|c| c.type_ == kind && c.status == "True")
    {
        return;
    }
    conditions.retain(|c| c.type_ != kind);
    conditions.push(PersistentVolumeClaimCondition {
        type_: kind.into(),
        status: "True".into(),
        last_transition_time: Some(now()),
        message: (!message.is_empty()).then(|| message.to_string()),
        ..Default::default()
    });
}

fn remove_condition(status: &mut PersistentVolumeClaimStatus, kind: &str) {
    if let Some(conditions) = status.conditions.as_mut() {
        conditions.retain(|c| c.type_ != kind);
    }
}

/// Makes the emulated driver's CSIDriver and the default StorageClass, retrying until they
/// exist or the manager stops.
pub async fn ensure_driver_objects(client: Client, config: VolumeConfig, mut stop: Shutdown) {
    let driver = json!({
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIDriver",
        "metadata": {"name": EMULATED_DRIVER},
        // Its attacher runs in the attach/detach controller's loop; it publishes capacity when
        // it has a per-node limit.
        "spec": {
            "attachRequired": true,
            "podInfoOnMount": false,
            "storageCapacity": config.node_capacity.is_some(),
            "volumeLifecycleModes": ["Persistent"],
        },
    });
    let class = json!({
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": "standard",
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
        },
        "provisioner": EMULATED_DRIVER,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": config.default_binding_mode,
        "allowVolumeExpansion": true,
    });
    let mut wanted = vec![(resource("storage.k8s.io", "csidrivers"), driver)];
    if config.default_class {
        wanted.push((resource("storage.k8s.io", "storageclasses"), class));
    }
    for (resource, object) in wanted {
        loop {
            let created: Result<serde_json::Value, _> =
                client.create(resource, None, &object).await;
            match created {
                Ok(_) => break,
                Err(e) if e.is_already_exists() => break,
                Err(e) => {
                    warn!(kind = resource.kind, error = %e, "cannot create; retrying");
                    tokio::select! {
                        biased;
                        () = crate::worker::stopped(&mut stop) => return,
                        () = tokio::time::sleep(Duration::from_secs(1)) => {}
                    }
                }
            }
        }
    }
}

impl crate::manager::HasCaches for PersistentVolumeController {
    fn caches_synced(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send>> {
        let (a, b, c, d, e) = (
            self.claims.clone(),
            self.volumes.clone(),
            self.classes.clone(),
            self.nodes.clone(),
            self.pods.clone(),
        );
        Box::pin(async move {
            a.wait_synced().await
                && b.wait_synced().await
                && c.wait_synced().await
                && d.wait_synced().await
                && e.wait_synced().await
        })
    }
}

impl Reconciler for PersistentVolumeController {
    async fn reconcile(&self, key: &str) -> Result<Outcome, ReconcileError> {
        if let Some(rest) = key.strip_prefix("claim/") {
            let (namespace, name) = rest.split_once('/').unwrap_or(("", rest));
            return self.sync_claim(namespace, name).await;
        }
        if let Some(name) = key.strip_prefix("volume/") {
            return self.sync_volume(name).await;
        }
        Ok(Outcome::Done)
    }
}
