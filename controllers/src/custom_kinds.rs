//! The custom resources the garbage collector follows, discovered from the cluster's
//! CustomResourceDefinitions as kube-controller-manager's collector discovers them from the
//! API: every established CRD's objects get a metadata informer of their own (started when the
//! CRD is established, stopped when it goes), so an object owned by a custom object is
//! collected when its owner goes, and an owner reference to a custom object that does not
//! exist is found dangling.
//!
//! [`CustomKinds`] is the pure part: which kind an owner reference names (followed, unknown,
//! or defined by a CRD since deleted) and what a CRD change asks of the driver; [`follow`]
//! runs the informers.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use api::client::{Client, ListParams};
use api::informer::{Informer, InformerEvent, Store};
use api::resources::{DefinedResource, ResourceInfo};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use parking_lot::Mutex;
use serde::Deserialize;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tracing::{debug, info};

use crate::garbage_collector::{forward, keep_graph_fields, GraphChange, PartialObject};
use crate::worker::{stopped, Shutdown};

/// What the collector reads of a CustomResourceDefinition.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct DefinitionSummary {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: DefinitionSpec,
    #[serde(default)]
    pub status: DefinitionStatus,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct DefinitionSpec {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub names: DefinitionNames,
    #[serde(default)]
    pub scope: String,
    #[serde(default)]
    pub versions: Vec<DefinitionVersion>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct DefinitionNames {
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub plural: String,
    #[serde(default)]
    pub singular: String,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct DefinitionVersion {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub served: bool,
    #[serde(default)]
    pub storage: bool,
    #[serde(default)]
    pub subresources: DefinitionSubresources,
}

/// Which subresources a version serves (their settings are the API server's business).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct DefinitionSubresources {
    #[serde(default)]
    pub status: Option<serde_json::Value>,
    #[serde(default)]
    pub scale: Option<serde_json::Value>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct DefinitionStatus {
    #[serde(default)]
    pub conditions: Vec<DefinitionCondition>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct DefinitionCondition {
    #[serde(rename = "type", default)]
    pub type_: String,
    #[serde(default)]
    pub status: String,
}

impl k8s_openapi::Resource for DefinitionSummary {
    const API_VERSION: &'static str = "apiextensions.k8s.io/v1";
    const GROUP: &'static str = "apiextensions.k8s.io";
    const KIND: &'static str = "CustomResourceDefinition";
    const VERSION: &'static str = "v1";
    const URL_PATH_SEGMENT: &'static str = "customresourcedefinitions";
    type Scope = k8s_openapi::ClusterResourceScope;
}

impl k8s_openapi::Metadata for DefinitionSummary {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl DefinitionSummary {
    /// The resource whose objects the collector watches: the storage version when it is
    /// served, else the first served one (every served version shows the same objects). None
    /// while the API server does not serve the CRD's objects (not established, being deleted,
    /// no served version).
    pub fn followed_resource(&self) -> Option<&'static ResourceInfo> {
        let established = self
            .status
            .conditions
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        if !established || self.metadata.deletion_timestamp.is_some() {
            return None;
        }
        let names = &self.spec.names;
        if self.spec.group.is_empty() || names.kind.is_empty() || names.plural.is_empty() {
            return None;
        }
        let served = || self.spec.versions.iter().filter(|v| v.served);
        let version = served().find(|v| v.storage).or_else(|| served().next())?;
        Some(
            DefinedResource {
                group: self.spec.group.clone(),
                version: version.name.clone(),
                kind: names.kind.clone(),
                plural: names.plural.clone(),
                singular: names.singular.clone(),
                namespaced: self.spec.scope != "Cluster",
                ..Default::default()
            }
            .intern(),
        )
    }

    /// The resource of one served version of an established definition, with its
    /// subresources (what a client maps the kind to, as discovery would tell it).
    pub fn served_resource(&self, version: &str) -> Option<&'static ResourceInfo> {
        let established = self
            .status
            .conditions
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        let served = self
            .spec
            .versions
            .iter()
            .find(|v| v.served && v.name == version)?;
        let names = &self.spec.names;
        if !established || names.plural.is_empty() {
            return None;
        }
        let subresources = [
            ("scale", served.subresources.scale.is_some()),
            ("status", served.subresources.status.is_some()),
        ]
        .into_iter()
        .filter(|(_, on)| *on)
        .map(|(name, _)| name.to_string())
        .collect();
        Some(
            DefinedResource {
                group: self.spec.group.clone(),
                version: served.name.clone(),
                kind: names.kind.clone(),
                plural: names.plural.clone(),
                singular: names.singular.clone(),
                namespaced: self.spec.scope != "Cluster",
                subresources,
                ..Default::default()
            }
            .intern(),
        )
    }

    fn served_versions(&self) -> Vec<String> {
        self.spec
            .versions
            .iter()
            .filter(|v| v.served)
            .map(|v| v.name.clone())
            .collect()
    }

    fn kind_key(&self) -> (String, String) {
        (self.spec.group.clone(), self.spec.names.kind.clone())
    }
}

/// What an owner reference's apiVersion and kind name, as far as custom kinds go.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum OwnerKind {
    /// A custom resource followed now.
    Followed(&'static ResourceInfo),
    /// The kind of a CRD that was deleted: its objects went with it.
    Retired,
    /// A kind no CRD defines (or a version it does not serve): the owner's existence cannot be
    /// checked, so the dependent is kept, as Kubernetes keeps one whose owner's kind it cannot
    /// resolve.
    Unknown,
}

/// A CRD change as the driver carries it out.
#[derive(Clone, Debug, PartialEq)]
pub enum KindChange {
    /// Watch this resource's objects (instead of the CRD's previous one, if any).
    Follow {
        crd: String,
        resource: &'static ResourceInfo,
    },
    /// Stop watching the CRD's objects and take them out of the graph.
    Stop { crd: String },
}

#[derive(Debug)]
struct Followed {
    resource: &'static ResourceInfo,
    served: Vec<String>,
    crd: String,
}

/// The custom kinds known now, keyed by (group, kind).
#[derive(Debug, Default)]
pub struct CustomKinds {
    followed: HashMap<(String, String), Followed>,
    retired: HashSet<(String, String)>,
}

impl CustomKinds {
    /// Which custom kind `owner` names.
    pub fn resolve(&self, owner: &OwnerReference) -> OwnerKind {
        let (group, version) = owner
            .api_version
            .split_once('/')
            .unwrap_or(("", owner.api_version.as_str()));
        let key = (group.to_string(), owner.kind.clone());
        match self.followed.get(&key) {
            Some(f) if f.served.iter().any(|v| v == version) => OwnerKind::Followed(f.resource),
            Some(_) => OwnerKind::Unknown,
            None if self.retired.contains(&key) => OwnerKind::Retired,
            None => OwnerKind::Unknown,
        }
    }

    /// A CRD added or changed: what the driver must change.
    pub fn defined(&mut self, crd: &DefinitionSummary) -> Vec<KindChange> {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let Some(resource) = crd.followed_resource() else {
            return self.undefined(&name, false);
        };
        let key = crd.kind_key();
        let mut changes = Vec::new();
        // A CRD whose kind changed (kinds are immutable in Kubernetes, but the names check is
        // not the collector's to trust) leaves its old kind first.
        let old_kind = self
            .followed
            .iter()
            .find(|(k, f)| f.crd == name && **k != key)
            .map(|(k, _)| k.clone());
        if let Some(old) = old_kind {
            self.followed.remove(&old);
            changes.push(KindChange::Stop { crd: name.clone() });
        }
        self.retired.remove(&key);
        let served = crd.served_versions();
        match self.followed.get_mut(&key) {
            Some(f) if std::ptr::eq(f.resource, resource) && f.crd == name => {
                f.served = served;
            }
            _ => {
                self.followed.insert(
                    key,
                    Followed {
                        resource,
                        served,
                        crd: name.clone(),
                    },
                );
                changes.push(KindChange::Follow {
                    crd: name,
                    resource,
                });
            }
        }
        changes
    }

    /// A CRD gone (`deleted`) or no longer served: its objects leave the graph; when it was
    /// deleted, references to its kind count as dangling.
    pub fn undefined(&mut self, crd: &str, deleted: bool) -> Vec<KindChange> {
        let keys: Vec<(String, String)> = self
            .followed
            .iter()
            .filter(|(_, f)| f.crd == crd)
            .map(|(k, _)| k.clone())
            .collect();
        if keys.is_empty() {
            return Vec::new();
        }
        for key in keys {
            self.followed.remove(&key);
            if deleted {
                self.retired.insert(key);
            }
        }
        vec![KindChange::Stop {
            crd: crd.to_string(),
        }]
    }
}

/// One custom resource's running informer.
struct Running {
    resource: &'static ResourceInfo,
    store: Store<PartialObject>,
    stop: oneshot::Sender<()>,
    tasks: [JoinHandle<()>; 2],
}

/// Follows the CRDs' events (until they end or `shutdown`): starts and stops the informers
/// of custom resources, and tells the graph maintainer which kinds became followed.
pub(crate) async fn follow(
    client: Client,
    mut definitions: mpsc::Receiver<InformerEvent<DefinitionSummary>>,
    kinds: Arc<Mutex<CustomKinds>>,
    graph: mpsc::Sender<GraphChange>,
    mut shutdown: Shutdown,
) {
    let mut running: HashMap<String, Running> = HashMap::new();
    loop {
        let event = tokio::select! {
            biased;
            () = stopped(&mut shutdown) => break,
            event = definitions.recv() => match event {
                Some(event) => event,
                None => break,
            },
        };
        let changes = match &event {
            InformerEvent::Added(crd) | InformerEvent::Updated { new: crd, .. } => {
                kinds.lock().defined(crd)
            }
            InformerEvent::Deleted(crd) => kinds
                .lock()
                .undefined(crd.metadata.name.as_deref().unwrap_or(""), true),
        };
        for change in changes {
            match change {
                KindChange::Follow { crd, resource } => {
                    if let Some(old) = running.remove(&crd) {
                        retire(old, &graph).await;
                    }
                    info!(
                        group = resource.group,
                        version = resource.version,
                        plural = resource.plural,
                        "following custom resource"
                    );
                    running.insert(crd, start(&client, resource, &graph, &shutdown));
                    let followed = GraphChange::KindFollowed {
                        group: resource.group,
                        kind: resource.kind,
                    };
                    if graph.send(followed).await.is_err() {
                        return;
                    }
                }
                KindChange::Stop { crd } => {
                    if let Some(old) = running.remove(&crd) {
                        info!(
                            plural = old.resource.plural,
                            group = old.resource.group,
                            "no longer following custom resource"
                        );
                        retire(old, &graph).await;
                    }
                }
            }
        }
    }
    for (_, old) in running {
        let _ = old.stop.send(());
    }
}

fn start(
    client: &Client,
    resource: &'static ResourceInfo,
    graph: &mpsc::Sender<GraphChange>,
    shutdown: &Shutdown,
) -> Running {
    let mut informer =
        Informer::<PartialObject>::new(client.clone(), resource, None, ListParams::default())
            .with_transform(keep_graph_fields);
    let store = informer.store();
    let forwarding = tokio::spawn(forward(resource, informer.subscribe(), graph.clone()));
    let (stop, stop_rx) = oneshot::channel();
    let mut shutdown = shutdown.clone();
    let running = tokio::spawn(informer.run(async move {
        tokio::select! {
            () = stopped(&mut shutdown) => {}
            _ = stop_rx => {}
        }
    }));
    Running {
        resource,
        store,
        stop,
        tasks: [running, forwarding],
    }
}

/// Stops an informer and takes its objects out of the graph, once nothing it forwards can
/// come after their removal.
async fn retire(old: Running, graph: &mpsc::Sender<GraphChange>) {
    let _ = old.stop.send(());
    for task in old.tasks {
        if let Err(e) = task.await {
            debug!(error = %e, "a custom resource informer task ended abnormally");
        }
    }
    for object in old.store.list() {
        let uid = object.metadata.uid.clone().unwrap_or_default();
        if graph.send(GraphChange::Remove { uid }).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(established: bool, versions: serde_json::Value) -> DefinitionSummary {
        serde_json::from_value(json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"kind": "Widget", "plural": "widgets", "singular": "widget"},
                "versions": versions},
            "status": {"conditions": [{"type": "Established",
                "status": if established { "True" } else { "False" }}]},
        }))
        .expect("a CRD summary")
    }

    fn owner(api_version: &str, kind: &str) -> OwnerReference {
        OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: "w".into(),
            uid: "u".into(),
            ..Default::default()
        }
    }

    #[test]
    fn the_storage_version_of_an_established_crd_is_followed() {
        let versions = json!([{"name": "v1beta1", "served": true, "storage": false},
            {"name": "v1", "served": true, "storage": true}]);
        assert_eq!(crd(false, versions.clone()).followed_resource(), None);
        let r = crd(true, versions).followed_resource().expect("followed");
        assert_eq!(
            (r.group, r.version, r.plural),
            ("example.com", "v1", "widgets")
        );
        assert!(r.namespaced);
        // A storage version no longer served: the first served one.
        let only_beta = json!([{"name": "v1beta1", "served": true, "storage": false},
            {"name": "v1", "served": false, "storage": true}]);
        let r = crd(true, only_beta).followed_resource().expect("followed");
        assert_eq!(r.version, "v1beta1");
        assert_eq!(crd(true, json!([])).followed_resource(), None);
    }

    #[test]
    fn owner_kinds_resolve_through_defined_crds() {
        let mut kinds = CustomKinds::default();
        let widgets = crd(
            true,
            json!([{"name": "v1", "served": true, "storage": true},
                {"name": "v1beta1", "served": true, "storage": false}]),
        );
        let changes = kinds.defined(&widgets);
        let resource = widgets.followed_resource().expect("followed");
        assert_eq!(
            changes,
            vec![KindChange::Follow {
                crd: "widgets.example.com".into(),
                resource
            }]
        );
        // Seen again unchanged: nothing to restart.
        assert!(kinds.defined(&widgets).is_empty());
        assert_eq!(
            kinds.resolve(&owner("example.com/v1beta1", "Widget")),
            OwnerKind::Followed(resource)
        );
        assert_eq!(
            kinds.resolve(&owner("example.com/v2", "Widget")),
            OwnerKind::Unknown
        );
        assert_eq!(
            kinds.resolve(&owner("other.com/v1", "Widget")),
            OwnerKind::Unknown
        );
        // Deleted: its kind's objects went with it.
        assert_eq!(
            kinds.undefined("widgets.example.com", true),
            vec![KindChange::Stop {
                crd: "widgets.example.com".into()
            }]
        );
        assert_eq!(
            kinds.resolve(&owner("example.com/v1", "Widget")),
            OwnerKind::Retired
        );
        // Defined again: followed again.
        assert_eq!(kinds.defined(&widgets).len(), 1);
        assert_eq!(
            kinds.resolve(&owner("example.com/v1", "Widget")),
            OwnerKind::Followed(resource)
        );
        // No longer established (not deleted): unknown, not retired.
        assert_eq!(kinds.defined(&crd(false, json!([]))).len(), 1);
        assert_eq!(
            kinds.resolve(&owner("example.com/v1", "Widget")),
            OwnerKind::Unknown
        );
    }
}
