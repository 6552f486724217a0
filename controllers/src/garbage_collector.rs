//! The garbage collector: keeps a graph of every object's ownerReferences (from metadata-only
//! informers of every served resource but events, and the shared pod informer) and
//! - deletes an object all of whose owners are gone (background cascade),
//! - drops references to vanished owners from an object that still has a live one,
//! - for an owner deleted with `propagationPolicy=Foreground` (the API server's
//!   `foregroundDeletion` finalizer): deletes its dependents (in the foreground too) and
//!   removes the finalizer once none is left,
//! - for an owner deleted with `propagationPolicy=Orphan` (the `orphan` finalizer): removes
//!   the owner's references from its dependents, then the finalizer.
//!
//! Custom resources are followed as their CRDs define them ([`crate::custom_kinds`]).
//!
//! The decision is the pure [`decide`] over the [`Graph`]; [`GarbageCollector`] does the I/O.
//! Keys are object uids.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use api::client::{Client, DeleteParams, ListParams};
use api::informer::{Informer, InformerEvent, Store};
use api::resources::{ResourceInfo, RESOURCES};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::mpsc;
use tracing::{debug, info};

use crate::custom_kinds::{self, CustomKinds, DefinitionSummary, OwnerKind};
use crate::queue::WorkQueue;
use crate::worker::{stopped, Outcome, ReconcileError, Reconciler, Shutdown};

pub const FOREGROUND: &str = "foregroundDeletion";
pub const ORPHAN: &str = "orphan";

/// Any object, of which only the metadata is read.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct PartialObject {
    #[serde(default)]
    pub metadata: ObjectMeta,
}

impl k8s_openapi::Resource for PartialObject {
    const API_VERSION: &'static str = "";
    const GROUP: &'static str = "";
    const KIND: &'static str = "";
    const VERSION: &'static str = "";
    const URL_PATH_SEGMENT: &'static str = "";
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::Metadata for PartialObject {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// One object in the ownership graph.
#[derive(Clone, Debug, PartialEq)]
pub struct GraphNode {
    pub resource: &'static ResourceInfo,
    pub namespace: Option<String>,
    pub name: String,
    pub uid: String,
    pub owners: Vec<OwnerReference>,
    pub deleting: bool,
    pub finalizers: Vec<String>,
}

impl GraphNode {
    pub fn from_meta(resource: &'static ResourceInfo, meta: &ObjectMeta) -> GraphNode {
        GraphNode {
            resource,
            namespace: meta.namespace.clone(),
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            owners: meta.owner_references.clone().unwrap_or_default(),
            deleting: meta.deletion_timestamp.is_some(),
            finalizers: meta.finalizers.clone().unwrap_or_default(),
        }
    }

    fn has_finalizer(&self, f: &str) -> bool {
        self.finalizers.iter().any(|x| x == f)
    }
}

/// Objects by uid and the reverse ownership index.
#[derive(Debug, Default)]
pub struct Graph {
    nodes: HashMap<String, GraphNode>,
    dependents: HashMap<String, HashSet<String>>,
}

impl Graph {
    pub fn get(&self, uid: &str) -> Option<&GraphNode> {
        self.nodes.get(uid)
    }

    pub fn dependents_of(&self, uid: &str) -> Vec<&GraphNode> {
        self.dependents
            .get(uid)
            .map(|d| d.iter().filter_map(|u| self.nodes.get(u)).collect())
            .unwrap_or_default()
    }

    /// Adds or replaces a node; returns the previous one.
    pub fn upsert(&mut self, node: GraphNode) -> Option<GraphNode> {
        let previous = self.remove(&node.uid);
        for owner in &node.owners {
            self.dependents
                .entry(owner.uid.clone())
                .or_default()
                .insert(node.uid.clone());
        }
        self.nodes.insert(node.uid.clone(), node);
        previous
    }

    pub fn remove(&mut self, uid: &str) -> Option<GraphNode> {
        let node = self.nodes.remove(uid)?;
        for owner in &node.owners {
            if let Some(d) = self.dependents.get_mut(&owner.uid) {
                d.remove(uid);
                if d.is_empty() {
                    self.dependents.remove(&owner.uid);
                }
            }
        }
        Some(node)
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// The objects with an owner of this group and kind.
    pub fn owned_by_kind(&self, group: &str, kind: &str) -> Vec<String> {
        let names = |o: &OwnerReference| {
            let owner_group = o.api_version.split_once('/').map_or("", |(g, _)| g);
            owner_group == group && o.kind == kind
        };
        self.nodes
            .values()
            .filter(|n| n.owners.iter().any(names))
            .map(|n| n.uid.clone())
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
}

/// One change the collector makes.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Delete the object (with this propagation policy).
    Delete { uid: String, policy: &'static str },
    /// Remove the references to these owner uids from the object.
    RemoveOwners { uid: String, owners: Vec<String> },
    /// Remove a finalizer from the object.
    RemoveFinalizer {
        uid: String,
        finalizer: &'static str,
    },
}

/// What to do about the object `uid`, given the graph and which of its owners are confirmed
/// gone (absent from the graph and from the API server).
pub fn decide(graph: &Graph, uid: &str, gone_owners: &HashSet<String>) -> Vec<Action> {
    let Some(node) = graph.get(uid) else {
        return Vec::new();
    };
    let mut actions = Vec::new();
    if node.deleting && node.has_finalizer(ORPHAN) {
        for dependent in graph.dependents_of(uid) {
            actions.push(Action::RemoveOwners {
                uid: dependent.uid.clone(),
                owners: vec![uid.to_string()],
            });
        }
        actions.push(Action::RemoveFinalizer {
            uid: uid.to_string(),
            finalizer: ORPHAN,
        });
        return actions;
    }
    if node.deleting && node.has_finalizer(FOREGROUND) {
        let dependents = graph.dependents_of(uid);
        for dependent in dependents.iter().filter(|d| !d.deleting) {
            actions.push(Action::Delete {
                uid: dependent.uid.clone(),
                policy: "Foreground",
            });
        }
        if dependents.is_empty() {
            actions.push(Action::RemoveFinalizer {
                uid: uid.to_string(),
                finalizer: FOREGROUND,
            });
        }
        return actions;
    }
    if node.owners.is_empty() || node.deleting {
        return actions;
    }
    let gone: Vec<&OwnerReference> = node
        .owners
        .iter()
        .filter(|o| gone_owners.contains(&o.uid))
        .collect();
    if gone.len() == node.owners.len() {
        // Every owner is gone. An owner waiting for its dependents (foreground) would still
        // be in the graph, so this is the background cascade.
        actions.push(Action::Delete {
            uid: uid.to_string(),
            policy: "Background",
        });
    } else if !gone.is_empty() {
        actions.push(Action::RemoveOwners {
            uid: uid.to_string(),
            owners: gone.iter().map(|o| o.uid.clone()).collect(),
        });
    }
    actions
}

/// The resource an owner reference names.
pub fn resource_of_ref(owner: &OwnerReference) -> Option<&'static ResourceInfo> {
    let (group, version) = match owner.api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", owner.api_version.as_str()),
    };
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.kind == owner.kind)
}

/// The resources the collector follows: everything but events (which own nothing and are
/// owned by nothing, and are the bulk of the writes), each stored resource once (the
/// autoscaling/v1 view of HorizontalPodAutoscalers is the v2 objects again).
pub fn followed() -> impl Iterator<Item = &'static ResourceInfo> {
    RESOURCES.iter().enumerate().filter_map(|(at, r)| {
        let first_view = !RESOURCES[..at].iter().any(|o| o.storage == r.storage);
        (first_view && r.kind != "Event" && r.verbs.contains(&"watch")).then_some(r)
    })
}

/// The collector's informer transform: the metadata a [`GraphNode`] and the informer itself
/// read (identity, resourceVersion, owners, finalizers, deletion) and nothing else, so the
/// metadata cache of every pod does not also hold its labels and annotations.
pub fn keep_graph_fields(object: &mut PartialObject) {
    let m = &mut object.metadata;
    m.labels = None;
    m.annotations = None;
    m.managed_fields = None;
    m.generate_name = None;
    m.creation_timestamp = None;
    m.generation = None;
    m.self_link = None;
}

/// The garbage collector's reconciler.
pub struct GarbageCollector {
    client: Client,
    graph: Arc<Mutex<Graph>>,
    stores: Vec<Store<PartialObject>>,
    pods: Store<Pod>,
    definitions: Option<Store<DefinitionSummary>>,
    kinds: Arc<Mutex<CustomKinds>>,
}

impl GarbageCollector {
    /// Starts the collector's own metadata informers (until `shutdown`), but for pods: their
    /// changes come from the manager's shared `pods` informer (as in kube-controller-manager,
    /// whose collector reuses a typed informer where one runs), so every pod change is not
    /// watched and decoded twice.
    pub fn new(
        client: Client,
        shutdown: Shutdown,
        pods: &mut Informer<Pod>,
    ) -> (Arc<GarbageCollector>, WorkQueue) {
        let queue = WorkQueue::new(Duration::from_millis(20), Duration::from_secs(60));
        let graph = Arc::new(Mutex::new(Graph::default()));
        let (events_tx, events_rx) = mpsc::channel(4096);
        let mut stores = Vec::new();
        let mut definitions = None;
        let kinds = Arc::new(Mutex::new(CustomKinds::default()));
        for resource in followed() {
            if resource.storage == api::resources::pods().storage {
                tokio::spawn(forward(resource, pods.subscribe(), events_tx.clone()));
                continue;
            }
            if resource.kind == "CustomResourceDefinition" {
                // CRDs are read whole enough to tell which custom resources to follow.
                let mut informer = Informer::<DefinitionSummary>::new(
                    client.clone(),
                    resource,
                    None,
                    ListParams::default(),
                );
                definitions = Some(informer.store());
                tokio::spawn(forward(resource, informer.subscribe(), events_tx.clone()));
                tokio::spawn(custom_kinds::follow(
                    client.clone(),
                    informer.subscribe(),
                    kinds.clone(),
                    events_tx.clone(),
                    shutdown.clone(),
                ));
                let mut stop = shutdown.clone();
                tokio::spawn(informer.run(async move { stopped(&mut stop).await }));
                continue;
            }
            let mut informer = Informer::<PartialObject>::new(
                client.clone(),
                resource,
                None,
                ListParams::default(),
            )
            .with_transform(keep_graph_fields);
            stores.push(informer.store());
            tokio::spawn(forward(resource, informer.subscribe(), events_tx.clone()));
            let mut stop = shutdown.clone();
            tokio::spawn(informer.run(async move { stopped(&mut stop).await }));
        }
        tokio::spawn(maintain(events_rx, graph.clone(), queue.clone()));
        (
            Arc::new(GarbageCollector {
                client,
                graph,
                stores,
                pods: pods.store(),
                definitions,
                kinds,
            }),
            queue,
        )
    }
}

/// Passes one informer's events on to [`maintain`] as graph changes, until either side goes.
pub(crate) async fn forward<T: k8s_openapi::Metadata<Ty = ObjectMeta>>(
    resource: &'static ResourceInfo,
    mut events: mpsc::Receiver<InformerEvent<T>>,
    graph: mpsc::Sender<GraphChange>,
) {
    while let Some(event) = events.recv().await {
        if graph.send(change(resource, &event)).await.is_err() {
            return;
        }
    }
}

/// What an informer event changes in the graph.
#[derive(Debug)]
pub(crate) enum GraphChange {
    Upsert(GraphNode),
    Remove {
        uid: String,
    },
    /// A custom kind is followed from now on: its dependents, kept while the kind was
    /// unknown, are looked at again.
    KindFollowed {
        group: &'static str,
        kind: &'static str,
    },
}

fn change<T: k8s_openapi::Metadata<Ty = ObjectMeta>>(
    resource: &'static ResourceInfo,
    event: &InformerEvent<T>,
) -> GraphChange {
    match event {
        InformerEvent::Added(object) | InformerEvent::Updated { new: object, .. } => {
            GraphChange::Upsert(GraphNode::from_meta(resource, object.metadata()))
        }
        InformerEvent::Deleted(object) => GraphChange::Remove {
            uid: object.metadata().uid.clone().unwrap_or_default(),
        },
    }
}

/// Keeps the graph in step with the informers and queues the objects to look at.
async fn maintain(
    mut events: mpsc::Receiver<GraphChange>,
    graph: Arc<Mutex<Graph>>,
    queue: WorkQueue,
) {
    while let Some(change) = events.recv().await {
        let mut to_queue: Vec<String> = Vec::new();
        {
            let mut graph = graph.lock();
            match change {
                GraphChange::Upsert(node) => {
                    to_queue = to_look_at(graph.get(&node.uid), &node);
                    graph.upsert(node);
                }
                GraphChange::Remove { uid } => {
                    if let Some(node) = graph.remove(&uid) {
                        to_queue.extend(node.owners.iter().map(|o| o.uid.clone()));
                    }
                    to_queue.extend(graph.dependents_of(&uid).iter().map(|d| d.uid.clone()));
                }
                GraphChange::KindFollowed { group, kind } => {
                    to_queue = graph.owned_by_kind(group, kind);
                }
            }
        }
        for uid in to_queue {
            queue.add(&uid);
        }
    }
}

/// The uids to look at when `node` is added or changed (`previous` is what the graph had).
/// A change that touches none of what the collector decides on (owners, deletion,
/// finalizers) — a pod's status, a lease's renewal — asks for nothing: with thousands of pods
/// and node leases, looking at each object on every update cost a reconcile per event.
pub fn to_look_at(previous: Option<&GraphNode>, node: &GraphNode) -> Vec<String> {
    if previous.is_some_and(|p| {
        p.owners == node.owners && p.deleting == node.deleting && p.finalizers == node.finalizers
    }) {
        return Vec::new();
    }
    let mut uids = Vec::new();
    let interesting = !node.owners.is_empty()
        || (node.deleting && (node.has_finalizer(ORPHAN) || node.has_finalizer(FOREGROUND)));
    if interesting {
        uids.push(node.uid.clone());
    }
    // A dependent starting to go may unblock a foreground owner.
    if node.deleting {
        uids.extend(node.owners.iter().map(|o| o.uid.clone()));
    }
    uids
}

impl crate::manager::HasCaches for GarbageCollector {
    fn caches_synced(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send>> {
        let stores = self.stores.clone();
        let pods = self.pods.clone();
        let definitions = self.definitions.clone();
        Box::pin(async move {
            if !pods.wait_synced().await {
                return false;
            }
            if let Some(definitions) = definitions {
                if !definitions.wait_synced().await {
                    return false;
                }
            }
            for store in stores {
                if !store.wait_synced().await {
                    return false;
                }
            }
            true
        })
    }
}

impl Reconciler for GarbageCollector {
    async fn reconcile(&self, uid: &str) -> Result<Outcome, ReconcileError> {
        let Some(node) = self.graph.lock().get(uid).cloned() else {
            return Ok(Outcome::Done);
        };
        // Owners missing from the graph are checked with the API server: the owner's informer
        // may simply be behind.
        let mut gone = HashSet::new();
        if !node.deleting {
            for owner in &node.owners {
                if self.graph.lock().get(&owner.uid).is_some() {
                    continue;
                }
                if self.owner_gone(&node, owner).await? {
                    gone.insert(owner.uid.clone());
                }
            }
        }
        let actions = decide(&self.graph.lock(), uid, &gone);
        for action in actions {
            self.apply(&action).await?;
        }
        Ok(Outcome::Done)
    }
}

impl GarbageCollector {
    async fn owner_gone(
        &self,
        node: &GraphNode,
        owner: &OwnerReference,
    ) -> Result<bool, ReconcileError> {
        let resource = match resource_of_ref(owner) {
            Some(resource) => resource,
            None => match self.kinds.lock().resolve(owner) {
                OwnerKind::Followed(resource) => resource,
                OwnerKind::Retired => return Ok(true),
                OwnerKind::Unknown => {
                    debug!(kind = %owner.kind, api_version = %owner.api_version, "owner of an unknown kind; keeping dependent");
                    return Ok(false);
                }
            },
        };
        let namespace = if resource.namespaced {
            node.namespace.as_deref()
        } else {
            None
        };
        match self
            .client
            .get::<PartialObject>(resource, namespace, &owner.name)
            .await
        {
            Ok(found) => Ok(found.metadata.uid.as_deref() != Some(owner.uid.as_str())),
            Err(e) if e.is_not_found() => Ok(true),
            Err(e) => Err(ReconcileError::api("look up owner")(e)),
        }
    }

    async fn apply(&self, action: &Action) -> Result<(), ReconcileError> {
        let uid = match action {
            Action::Delete { uid, .. }
            | Action::RemoveOwners { uid, .. }
            | Action::RemoveFinalizer { uid, .. } => uid,
        };
        let Some(node) = self.graph.lock().get(uid).cloned() else {
            return Ok(());
        };
        let ns = node.namespace.as_deref();
        match action {
            Action::Delete { policy, .. } => {
                info!(resource = node.resource.plural, namespace = ns.unwrap_or(""), name = %node.name, policy, "deleting dependent");
                let params = DeleteParams {
                    propagation_policy: Some(policy.to_string()),
                    precondition_uid: Some(node.uid.clone()),
                    ..Default::default()
                };
                match self
                    .client
                    .delete::<Value>(node.resource, ns, &node.name, &params)
                    .await
                {
                    Ok(_) => Ok(()),
                    Err(e) if e.is_not_found() || e.is_conflict() => Ok(()),
                    Err(e) => Err(ReconcileError::api("delete dependent")(e)),
                }
            }
            Action::RemoveOwners { owners, .. } => {
                debug!(name = %node.name, ?owners, "removing owner references");
                self.rewrite(&node, |object| {
                    if let Some(refs) = object
                        .pointer_mut("/metadata/ownerReferences")
                        .and_then(Value::as_array_mut)
                    {
                        refs.retain(|r| {
                            !owners
                                .iter()
                                .any(|o| r.get("uid").and_then(Value::as_str) == Some(o))
                        });
                    }
                })
                .await
            }
            Action::RemoveFinalizer { finalizer, .. } => {
                debug!(name = %node.name, finalizer, "removing finalizer");
                self.rewrite(&node, |object| {
                    if let Some(list) = object
                        .pointer_mut("/metadata/finalizers")
                        .and_then(Value::as_array_mut)
                    {
                        list.retain(|f| f.as_str() != Some(finalizer));
                    }
                })
                .await
            }
        }
    }

    /// Read-modify-write of the object (a conflict is retried by the queue).
    async fn rewrite(
        &self,
        node: &GraphNode,
        change: impl Fn(&mut Value),
    ) -> Result<(), ReconcileError> {
        let ns = node.namespace.as_deref();
        let mut object: Value = match self.client.get(node.resource, ns, &node.name).await {
            Ok(o) => o,
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(ReconcileError::api("read object")(e)),
        };
        if object.pointer("/metadata/uid").and_then(Value::as_str) != Some(node.uid.as_str()) {
            return Ok(());
        }
        change(&mut object);
        match self
            .client
            .update::<Value, Value>(node.resource, ns, &node.name, &object)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(ReconcileError::api("update object")(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner_ref(uid: &str) -> OwnerReference {
        OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: format!("rs-{uid}"),
            uid: uid.into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    fn node(uid: &str, owners: &[&str], deleting: bool, finalizers: &[&str]) -> GraphNode {
        GraphNode {
            resource: api::resources::pods(),
            namespace: Some("ns".into()),
            name: uid.into(),
            uid: uid.into(),
            owners: owners.iter().map(|o| owner_ref(o)).collect(),
            deleting,
            finalizers: finalizers.iter().map(|f| f.to_string()).collect(),
        }
    }

    fn gone(uids: &[&str]) -> HashSet<String> {
        uids.iter().map(|u| u.to_string()).collect()
    }

    #[test]
    fn orphans_of_a_vanished_owner_are_deleted() {
        let mut g = Graph::default();
        g.upsert(node("pod", &["rs"], false, &[]));
        assert_eq!(decide(&g, "pod", &gone(&[])), vec![]);
        assert_eq!(
            decide(&g, "pod", &gone(&["rs"])),
            vec![Action::Delete {
                uid: "pod".into(),
                policy: "Background"
            }]
        );
        // With a second, live owner only the dangling reference goes.
        g.upsert(node("pod", &["rs", "other"], false, &[]));
        assert_eq!(
            decide(&g, "pod", &gone(&["rs"])),
            vec![Action::RemoveOwners {
                uid: "pod".into(),
                owners: vec!["rs".into()]
            }]
        );
    }

    #[test]
    fn foreground_deletes_dependents_then_drops_the_finalizer() {
        let mut g = Graph::default();
        g.upsert(node("rs", &[], true, &[FOREGROUND]));
        g.upsert(node("p1", &["rs"], false, &[]));
        g.upsert(node("p2", &["rs"], true, &[]));
        assert_eq!(
            decide(&g, "rs", &gone(&[])),
            vec![Action::Delete {
                uid: "p1".into(),
                policy: "Foreground"
            }]
        );
        g.remove("p1");
        // p2 is still terminating: wait.
        assert_eq!(decide(&g, "rs", &gone(&[])), vec![]);
        g.remove("p2");
        assert_eq!(
            decide(&g, "rs", &gone(&[])),
            vec![Action::RemoveFinalizer {
                uid: "rs".into(),
                finalizer: FOREGROUND
            }]
        );
    }

    #[test]
    fn orphan_releases_dependents_then_drops_the_finalizer() {
        let mut g = Graph::default();
        g.upsert(node("rs", &[], true, &[ORPHAN]));
        g.upsert(node("p1", &["rs"], false, &[]));
        assert_eq!(
            decide(&g, "rs", &gone(&[])),
            vec![
                Action::RemoveOwners {
                    uid: "p1".into(),
                    owners: vec!["rs".into()]
                },
                Action::RemoveFinalizer {
                    uid: "rs".into(),
                    finalizer: ORPHAN
                }
            ]
        );
    }

    #[test]
    fn only_changes_to_owners_deletion_or_finalizers_are_looked_at() {
        let pod = node("p", &["rs"], false, &[]);
        // New with an owner: check the owner exists.
        assert_eq!(to_look_at(None, &pod), ["p"]);
        // New without owners or finalizers: nothing to decide.
        assert!(to_look_at(None, &node("lone", &[], false, &[])).is_empty());
        // Updated without a change the collector decides on (a status change).
        assert!(to_look_at(Some(&pod), &pod.clone()).is_empty());
        // Its owners changed.
        let moved = node("p", &["rs2"], false, &[]);
        assert_eq!(to_look_at(Some(&pod), &moved), ["p"]);
        // It started to go: its owners may be waiting for it (foreground).
        let going = node("p", &["rs"], true, &[]);
        assert_eq!(to_look_at(Some(&pod), &going), ["p", "rs"]);
        // An owner deleted in the foreground gets its finalizer.
        let owner = node("rs", &[], false, &[]);
        let fg = node("rs", &[], true, &[FOREGROUND]);
        assert_eq!(to_look_at(Some(&owner), &fg), ["rs"]);
    }

    #[test]
    fn the_transform_keeps_what_the_graph_reads() {
        let mut object: PartialObject = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                "generateName": "p-", "labels": {"app": "a"}, "annotations": {"x": "y"},
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "deletionTimestamp": "2026-01-01T00:01:00Z", "finalizers": ["f"],
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "name": "rs", "uid": "o"}]}
        }))
        .expect("an object");
        let pods = api::resources::find("", "v1", "pods").expect("pods");
        let before = GraphNode::from_meta(pods, &object.metadata);
        keep_graph_fields(&mut object);
        assert_eq!(GraphNode::from_meta(pods, &object.metadata), before);
        assert_eq!(object.metadata.resource_version.as_deref(), Some("7"));
        assert!(object.metadata.labels.is_none() && object.metadata.annotations.is_none());
    }

    #[test]
    fn owner_references_resolve_to_served_resources() {
        let r = resource_of_ref(&owner_ref("x")).expect("replicasets");
        assert_eq!(r.plural, "replicasets");
        let mut job = owner_ref("y");
        job.api_version = "batch/v1".into();
        job.kind = "Job".into();
        assert_eq!(resource_of_ref(&job).map(|r| r.plural), Some("jobs"));
        assert!(followed().all(|r| r.kind != "Event"));
    }
}
