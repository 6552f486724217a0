//! The attach/detach reconciler: kube-controller-manager's attach/detach controller, with the
//! emulated CSI driver's external-attacher and its node plugin registration (CSINode and
//! CSIStorageCapacity per node) in the same loop.
//!
//! Keys are `node/NAME`, `attachment/NAME` and `capacity/NAME`:
//! - a node's sync carries out [`plan_node`]: it creates a VolumeAttachment for every CSI
//!   volume its pods need attached, deletes those no pod needs once the kubelet no longer
//!   reports them in `volumesInUse`, writes the node's `status.volumesAttached`, and records
//!   `SuccessfulAttachVolume` (or `FailedAttachVolume`) on the pods;
//! - an attachment's sync is the emulated external-attacher's: it puts its finalizer on a
//!   VolumeAttachment of `csi.kemu.dev`, sets `status.attached` after `attach_latency` (or an
//!   `attachError`, for the configured share of attempts), and on deletion removes the finalizer
//!   after the same latency;
//! - a node's capacity sync registers the driver on the node (its CSINode) and, with a
//!   per-node capacity configured, publishes a CSIStorageCapacity per class of the driver with
//!   what the node's volumes leave.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use api::client::{Client, DeleteParams, Patch};
use api::event_sink::EventSink;
use api::informer::{Informer, InformerEvent, Store};
use api::resources::{self, ResourceInfo};
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass, VolumeAttachment};
use parking_lot::Mutex;
use serde_json::{json, Value};
use tracing::{debug, info};

use crate::attach_detach::{
    attacher_step, attachment, capacity_name, capacity_object, csi_node, free_capacity,
    pinned_node, plan_node, wanted, AttacherStep, Existing, ATTACHER_FINALIZER, CAPACITY_NAMESPACE,
};
use crate::events::Recorder;
use crate::owners::now;
use crate::persistent_volume::EMULATED_DRIVER;
use crate::persistent_volume_controller::{fails, retry_after, VolumeConfig};
use crate::pods::{node_name, BY_NODE};
use crate::queue::WorkQueue;
use crate::resource_quota::{namespace_of, BY_NAMESPACE};
use crate::worker::{Outcome, ReconcileError, Reconciler};

/// The controller's event source, as kube-controller-manager names it.
const ATTACH_DETACH: &str = "attachdetach-controller";
/// The index of VolumeAttachments by `spec.nodeName`.
const BY_ATTACHED_NODE: &str = "attached-node";

fn attached_node(attachment: &VolumeAttachment) -> Option<String> {
    Some(attachment.spec.node_name.clone())
}

fn resource(group: &str, plural: &str) -> &'static ResourceInfo {
    resources::find(group, "v1", plural).expect("a served resource")
}

/// The reconciler.
pub struct AttachDetachController {
    client: Client,
    pods: Store<Pod>,
    claims: Store<PersistentVolumeClaim>,
    volumes: Store<PersistentVolume>,
    classes: Store<StorageClass>,
    drivers: Store<CSIDriver>,
    attachments: Store<VolumeAttachment>,
    nodes: Store<Node>,
    recorder: Recorder,
    config: VolumeConfig,
    /// When each emulated attach or detach started.
    started: Mutex<HashMap<String, Instant>>,
    /// Failed attempts per attachment (the failure pattern and the retry back-off read it).
    attempts: Mutex<HashMap<String, u32>>,
    /// What was last said about each attachment: `attached`, or the attach error.
    announced: Mutex<HashMap<String, String>>,
    /// Nodes whose CSINode exists.
    registered: Mutex<HashSet<String>>,
    /// The capacity last published per CSIStorageCapacity name.
    published: Mutex<HashMap<String, String>>,
}

impl AttachDetachController {
    /// Subscribes to the informers: pods queue their node, claims and volumes the nodes of
    /// the pods that use them (volumes their node's capacity too), attachments themselves and
    /// their node, nodes their sync when `volumesInUse` changes, classes every node's capacity.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        client: Client,
        pods: &mut Informer<Pod>,
        claims: &mut Informer<PersistentVolumeClaim>,
        volumes: &mut Informer<PersistentVolume>,
        classes: &mut Informer<StorageClass>,
        drivers: &Informer<CSIDriver>,
        attachments: &mut Informer<VolumeAttachment>,
        nodes: &mut Informer<Node>,
        events: EventSink,
        config: VolumeConfig,
    ) -> (Arc<AttachDetachController>, WorkQueue) {
        let queue = WorkQueue::new(Duration::from_millis(5), Duration::from_secs(30));
        pods.add_index(BY_NODE, node_name);
        pods.add_index(BY_NAMESPACE, namespace_of::<Pod>);
        attachments.add_index(BY_ATTACHED_NODE, attached_node);
        let controller = Arc::new(AttachDetachController {
            client,
            pods: pods.store(),
            claims: claims.store(),
            volumes: volumes.store(),
            classes: classes.store(),
            drivers: drivers.store(),
            attachments: attachments.store(),
            nodes: nodes.store(),
            recorder: Recorder::new(events, ATTACH_DETACH),
            config,
            started: Mutex::new(HashMap::new()),
            attempts: Mutex::new(HashMap::new()),
            announced: Mutex::new(HashMap::new()),
            registered: Mutex::new(HashSet::new()),
            published: Mutex::new(HashMap::new()),
        });
        let mut pod_events = pods.subscribe();
        let mut claim_events = claims.subscribe();
        let mut volume_events = volumes.subscribe();
        let mut class_events = classes.subscribe();
        let mut attachment_events = attachments.subscribe();
        let mut node_events = nodes.subscribe();
        let feed = queue.clone();
        let all_pods = pods.store();
        let all_nodes = nodes.store();
        let capacity = controller.config.node_capacity.is_some();
        tokio::spawn(async move {
            // The nodes of the pods in `namespace` that use claim `name`.
            let users = |namespace: &str, name: &str| {
                for pod in all_pods.by_index(BY_NAMESPACE, namespace) {
                    let uses = pod
                        .spec
                        .iter()
                        .flat_map(|s| s.volumes.iter().flatten())
                        .filter_map(|v| v.persistent_volume_claim.as_ref())
                        .any(|c| c.claim_name == name);
                    if let (true, Some(node)) = (uses, node_name(&pod)) {
                        feed.add(&format!("node/{node}"));
                    }
                }
            };
            let in_use = |n: &Node| n.status.as_ref().and_then(|s| s.volumes_in_use.clone());
            loop {
                tokio::select! {
                    event = pod_events.recv() => match event {
                        Some(InformerEvent::Added(p))
                        | Some(InformerEvent::Updated { new: p, .. })
                        | Some(InformerEvent::Deleted(p)) => {
                            let claims = p.spec.iter().flat_map(|s| s.volumes.iter().flatten())
                                .any(|v| v.persistent_volume_claim.is_some());
                            if let (true, Some(node)) = (claims, node_name(&p)) {
                                feed.add(&format!("node/{node}"));
                            }
                        }
                        None => return,
                    },
                    event = claim_events.recv() => match event {
                        Some(InformerEvent::Added(c)) | Some(InformerEvent::Updated { new: c, .. }) => {
                            users(
                                c.metadata.namespace.as_deref().unwrap_or_default(),
                                c.metadata.name.as_deref().unwrap_or_default(),
                            );
                        }
                        Some(InformerEvent::Deleted(_)) => {}
                        None => return,
                    },
                    event = volume_events.recv() => match event {
                        Some(InformerEvent::Added(v))
                        | Some(InformerEvent::Updated { new: v, .. })
                        | Some(InformerEvent::Deleted(v)) => {
                            if let Some(r) = v.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) {
                                users(
                                    r.namespace.as_deref().unwrap_or_default(),
                                    r.name.as_deref().unwrap_or_default(),
                                );
                            }
                            if let (true, Some(node)) = (capacity, pinned_node(&v)) {
                                feed.add(&format!("capacity/{node}"));
                            }
                        }
                        None => return,
                    },
                    event = class_events.recv() => match event {
                        Some(_) => {
                            if capacity {
                                for node in all_nodes.list() {
                                    let name = node.metadata.name.as_deref().unwrap_or_default();
                                    feed.add(&format!("capacity/{name}"));
                                }
                            }
                        }
                        None => return,
                    },
                    event = attachment_events.recv() => match event {
                        Some(InformerEvent::Added(a))
                        | Some(InformerEvent::Updated { new: a, .. })
                        | Some(InformerEvent::Deleted(a)) => {
                            feed.add(&format!("attachment/{}", a.metadata.name.as_deref().unwrap_or_default()));
                            feed.add(&format!("node/{}", a.spec.node_name));
                        }
                        None => return,
                    },
                    event = node_events.recv() => match event {
                        Some(InformerEvent::Added(n)) | Some(InformerEvent::Deleted(n)) => {
                            let name = n.metadata.name.as_deref().unwrap_or_default();
                            feed.add(&format!("node/{name}"));
                            feed.add(&format!("capacity/{name}"));
                        }
                        Some(InformerEvent::Updated { old, new }) => {
                            if in_use(&old) != in_use(&new) {
                                let name = new.metadata.name.as_deref().unwrap_or_default();
                                feed.add(&format!("node/{name}"));
                            }
                        }
                        None => return,
                    },
                }
            }
        });
        (controller, queue)
    }

    /// Whether volumes of `driver` need a VolumeAttachment: yes unless its CSIDriver says
    /// `attachRequired: false` (no CSIDriver object: yes, as upstream's CSI plugin decides).
    fn attach_required(&self, driver: &str) -> bool {
        self.drivers
            .get_named(None, driver)
            .is_none_or(|d| d.spec.attach_required != Some(false))
    }

    /// How much longer an emulated operation takes (see the binder's own).
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

    async fn sync_node(&self, node: &str) -> Result<Outcome, ReconcileError> {
        let pods = self.pods.by_index(BY_NODE, node);
        let wanted = wanted(
            node,
            &pods,
            |namespace, name| self.claims.get_named(Some(namespace), name),
            |name| self.volumes.get_named(None, name),
            |driver| self.attach_required(driver),
        );
        let attachments: Vec<Arc<VolumeAttachment>> = self
            .attachments
            .by_index(BY_ATTACHED_NODE, node)
            .into_iter()
            .filter(|a| a.spec.source.persistent_volume_name.is_some())
            .collect();
        let existing: Vec<Existing> = attachments
            .iter()
            .map(|a| {
                let volume = a
                    .spec
                    .source
                    .persistent_volume_name
                    .as_deref()
                    .and_then(|v| self.volumes.get_named(None, v));
                Existing::of(a, volume.as_deref())
            })
            .collect();
        let current = self.nodes.get_named(None, node);
        let in_use: BTreeSet<String> = current
            .as_ref()
            .and_then(|n| n.status.as_ref()?.volumes_in_use.clone())
            .unwrap_or_default()
            .into_iter()
            .collect();
        let plan = plan_node(&wanted, &existing, &in_use);
        let kind = resource("storage.k8s.io", "volumeattachments");
        let mut first_error = None;
        for w in &plan.create {
            info!(node, volume = %w.volume, attachment = %w.attachment, "attaching");
            let created: Result<Value, _> =
                self.client.create(kind, None, &attachment(w, node)).await;
            match created {
                Ok(_) => {}
                Err(e) if e.is_already_exists() => {}
                Err(e) => {
                    first_error.get_or_insert(ReconcileError::api("create volumeattachment")(e));
                }
            }
        }
        for name in &plan.delete {
            info!(node, attachment = %name, "detaching");
            match self
                .client
                .delete::<Value>(kind, None, name, &DeleteParams::default())
                .await
            {
                Ok(_) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => {
                    first_error.get_or_insert(ReconcileError::api("delete volumeattachment")(e));
                }
            }
        }
        if let Some(n) = &current {
            let listed: Vec<String> = n
                .status
                .as_ref()
                .and_then(|s| s.volumes_attached.as_ref())
                .map(|v| v.iter().map(|a| a.name.clone()).collect())
                .unwrap_or_default();
            if listed != plan.attached {
                let attached: Value = if plan.attached.is_empty() {
                    Value::Null
                } else {
                    plan.attached
                        .iter()
                        .map(|name| json!({"name": name, "devicePath": ""}))
                        .collect()
                };
                let patch = Patch::Merge(json!({"status": {"volumesAttached": attached}}));
                match self
                    .client
                    .patch_status::<Value>(resource("", "nodes"), None, node, &patch)
                    .await
                {
                    Ok(_) => {}
                    Err(e) if e.is_not_found() => {}
                    Err(e) => {
                        first_error.get_or_insert(ReconcileError::api("update node status")(e));
                    }
                }
            }
        }
        for a in &attachments {
            let name = a.metadata.name.clone().unwrap_or_default();
            let Some(w) = wanted.get(&name) else {
                continue;
            };
            let status = a.status.as_ref();
            let said = if status.is_some_and(|s| s.attached) {
                "attached".to_string()
            } else if let Some(error) = status.and_then(|s| s.attach_error.as_ref()) {
                format!(
                    "{:?}: {}",
                    error.time,
                    error.message.as_deref().unwrap_or_default()
                )
            } else {
                continue;
            };
            if self.announced.lock().insert(name, said.clone()).as_ref() == Some(&said) {
                continue;
            }
            let (warning, reason, message) = match status.and_then(|s| s.attach_error.as_ref()) {
                Some(error) if said != "attached" => (
                    true,
                    "FailedAttachVolume",
                    format!(
                        "AttachVolume.Attach failed for volume \"{}\" : {}",
                        w.volume,
                        error.message.as_deref().unwrap_or_default()
                    ),
                ),
                _ => (
                    false,
                    "SuccessfulAttachVolume",
                    format!("AttachVolume.Attach succeeded for volume \"{}\" ", w.volume),
                ),
            };
            for pod in &w.pods {
                self.recorder.record(pod.clone(), warning, reason, &message);
            }
        }
        crate::worker::outcome(first_error, None)
    }

    /// The emulated external-attacher.
    async fn sync_attachment(&self, name: &str) -> Result<Outcome, ReconcileError> {
        let Some(current) = self.attachments.get_named(None, name) else {
            self.announced.lock().remove(name);
            self.attempts.lock().remove(name);
            return Ok(Outcome::Done);
        };
        let kind = resource("storage.k8s.io", "volumeattachments");
        match attacher_step(&current) {
            AttacherStep::Nothing => Ok(Outcome::Done),
            AttacherStep::AddFinalizer => {
                let mut updated = (*current).clone();
                updated
                    .metadata
                    .finalizers
                    .get_or_insert_with(Vec::new)
                    .push(ATTACHER_FINALIZER.into());
                self.client
                    .update::<_, Value>(kind, None, name, &updated)
                    .await
                    .map_err(ReconcileError::api("add the attacher's finalizer"))?;
                Ok(Outcome::Done)
            }
            AttacherStep::Attach => {
                let operation = format!("attach/{name}");
                if let Some(left) = self.pending(&operation, self.config.attach_latency) {
                    return Ok(Outcome::RequeueAfter(left));
                }
                let attempt = self.attempts.lock().get(name).copied().unwrap_or(0);
                let status = if fails(self.config.attach_failure_rate, &operation, attempt) {
                    self.attempts.lock().insert(name.to_string(), attempt + 1);
                    json!({"attached": false, "attachError": {
                        "time": now(),
                        "message": "rpc error: code = Internal desc = emulated attach failure",
                    }})
                } else {
                    self.attempts.lock().remove(name);
                    json!({"attached": true, "attachError": null})
                };
                let failed = status["attached"] == false;
                self.client
                    .patch_status::<Value>(
                        kind,
                        None,
                        name,
                        &Patch::Merge(json!({ "status": status })),
                    )
                    .await
                    .map_err(ReconcileError::api("update volumeattachment status"))?;
                if failed {
                    debug!(attachment = %name, attempt, "emulated attach failure");
                    return Ok(Outcome::RequeueAfter(retry_after(attempt)));
                }
                Ok(Outcome::Done)
            }
            AttacherStep::Detach => {
                let operation = format!("detach/{name}");
                if let Some(left) = self.pending(&operation, self.config.attach_latency) {
                    return Ok(Outcome::RequeueAfter(left));
                }
                let mut updated = (*current).clone();
                if let Some(finalizers) = updated.metadata.finalizers.as_mut() {
                    finalizers.retain(|f| f != ATTACHER_FINALIZER);
                }
                match self
                    .client
                    .update::<_, Value>(kind, None, name, &updated)
                    .await
                {
                    Ok(_) => Ok(Outcome::Done),
                    Err(e) if e.is_not_found() => Ok(Outcome::Done),
                    Err(e) => Err(ReconcileError::api("remove the attacher's finalizer")(e)),
                }
            }
        }
    }

    /// The driver's registration on a node and its capacity there.
    async fn sync_capacity(&self, node: &str) -> Result<Outcome, ReconcileError> {
        let classes: Vec<String> = self
            .classes
            .list()
            .iter()
            .filter(|c| c.provisioner == EMULATED_DRIVER)
            .filter_map(|c| c.metadata.name.clone())
            .collect();
        let capacities = resources::find("storage.k8s.io", "v1", "csistoragecapacities")
            .expect("a served resource");
        let Some(current) = self.nodes.get_named(None, node) else {
            // The node is gone: so are its segment's capacities (its CSINode goes with it
            // through its owner reference).
            self.registered.lock().remove(node);
            for class in &classes {
                let name = capacity_name(node, class);
                self.published.lock().remove(&name);
                match self
                    .client
                    .delete::<Value>(
                        capacities,
                        Some(CAPACITY_NAMESPACE),
                        &name,
                        &DeleteParams::default(),
                    )
                    .await
                {
                    Ok(_) => {}
                    Err(e) if e.is_not_found() => {}
                    Err(e) => return Err(ReconcileError::api("delete csistoragecapacity")(e)),
                }
            }
            return Ok(Outcome::Done);
        };
        if !self.registered.lock().contains(node) {
            let uid = current.metadata.uid.clone().unwrap_or_default();
            let created: Result<Value, _> = self
                .client
                .create(
                    resource("storage.k8s.io", "csinodes"),
                    None,
                    &csi_node(node, &uid),
                )
                .await;
            match created {
                Ok(_) => {}
                Err(e) if e.is_already_exists() => {}
                Err(e) => return Err(ReconcileError::api("create csinode")(e)),
            }
            self.registered.lock().insert(node.to_string());
        }
        let Some(total) = &self.config.node_capacity else {
            return Ok(Outcome::Done);
        };
        let free = free_capacity(node, total, &self.volumes.list());
        for class in &classes {
            let object = capacity_object(node, class, &free);
            let name = capacity_name(node, class);
            let text = free.canonical();
            if self.published.lock().get(&name) == Some(&text) {
                continue;
            }
            let patch = Patch::Merge(json!({ "capacity": text }));
            let patched: Result<Value, _> = self
                .client
                .patch(capacities, Some(CAPACITY_NAMESPACE), &name, &patch)
                .await;
            match patched {
                Ok(_) => {}
                Err(e) if e.is_not_found() => {
                    let created: Result<Value, _> = self
                        .client
                        .create(capacities, Some(CAPACITY_NAMESPACE), &object)
                        .await;
                    match created {
                        Ok(_) => {}
                        Err(e) if e.is_already_exists() => {
                            return Ok(Outcome::RequeueAfter(Duration::ZERO))
                        }
                        Err(e) => return Err(ReconcileError::api("create csistoragecapacity")(e)),
                    }
                }
                Err(e) => return Err(ReconcileError::api("update csistoragecapacity")(e)),
            }
            self.published.lock().insert(name, text);
        }
        Ok(Outcome::Done)
    }
}

impl crate::manager::HasCaches for AttachDetachController {
    fn caches_synced(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send>> {
        let (a, b, c, d, e, f, g) = (
            self.pods.clone(),
            self.claims.clone(),
            self.volumes.clone(),
            self.classes.clone(),
            self.drivers.clone(),
            self.attachments.clone(),
            self.nodes.clone(),
        );
        Box::pin(async move {
            a.wait_synced().await
                && b.wait_synced().await
                && c.wait_synced().await
                && d.wait_synced().await
                && e.wait_synced().await
                && f.wait_synced().await
                && g.wait_synced().await
        })
    }
}

impl Reconciler for AttachDetachController {
    async fn reconcile(&self, key: &str) -> Result<Outcome, ReconcileError> {
        if let Some(node) = key.strip_prefix("node/") {
            return self.sync_node(node).await;
        }
        if let Some(name) = key.strip_prefix("attachment/") {
            return self.sync_attachment(name).await;
        }
        if let Some(node) = key.strip_prefix("capacity/") {
            return self.sync_capacity(node).await;
        }
        Ok(Outcome::Done)
    }
}
