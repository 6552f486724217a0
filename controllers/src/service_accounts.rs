//! Two per-namespace publishers of kube-controller-manager:
//!
//! - The ServiceAccount controller: every namespace has a ServiceAccount named `default`;
//!   one that is missing (a new namespace, or the account was deleted) is created.
//! - The root-CA publisher: every namespace has the ConfigMap `kube-root-ca.crt` whose key
//!   `ca.crt` holds the cluster CA (PEM), with Kubernetes' description annotation; one that is
//!   missing is created and one whose data differs is put back.
//!
//! Both key their queue by namespace name, watch the namespaces and the one object they keep
//! per namespace (informers narrowed by `metadata.name`), and leave a terminating namespace
//! alone (the API server would refuse new content there).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use api::client::{Client, ListParams};
use api::informer::{Informer, InformerEvent, Store};
use api::resources::{self, ResourceInfo};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use serde_json::json;
use tokio::sync::mpsc;
use tracing::info;

use crate::queue::WorkQueue;
use crate::worker::{Outcome, ReconcileError, Reconciler};

/// The account every namespace has.
pub const DEFAULT_ACCOUNT: &str = "default";
/// The ConfigMap with the cluster CA in every namespace.
pub const ROOT_CA_CONFIG_MAP: &str = "kube-root-ca.crt";
/// Its one key.
pub const ROOT_CA_KEY: &str = "ca.crt";
/// The annotation Kubernetes puts on it, and its text.
pub const DESCRIPTION_ANNOTATION: &str = "kubernetes.io/description";
pub const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

/// The informer of the one object per namespace named `name`.
pub fn named_informer<T>(
    client: &Client,
    resource: &'static ResourceInfo,
    name: &str,
) -> Informer<T>
where
    T: k8s_openapi::Metadata<Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    Informer::new(
        client.clone(),
        resource,
        None,
        ListParams::default().fields(format!("metadata.name={name}")),
    )
}

/// Whether `namespace` is one to publish into (it exists and is not being deleted).
fn live(namespaces: &Store<Namespace>, name: &str) -> bool {
    namespaces
        .get(name)
        .is_some_and(|ns| ns.metadata.deletion_timestamp.is_none())
}

/// Queues every namespace that appears or changes, and the namespace of every watched object
/// that changes or goes away.
async fn feed<T>(
    mut namespaces: mpsc::Receiver<InformerEvent<Namespace>>,
    mut objects: mpsc::Receiver<InformerEvent<T>>,
    queue: WorkQueue,
) where
    T: k8s_openapi::Metadata<Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
{
    loop {
        tokio::select! {
            event = namespaces.recv() => match event {
                Some(InformerEvent::Added(ns)) | Some(InformerEvent::Updated { new: ns, .. }) => {
                    queue.add(ns.metadata.name.as_deref().unwrap_or_default());
                }
                Some(InformerEvent::Deleted(_)) => {}
                None => return,
            },
            event = objects.recv() => match event {
                Some(InformerEvent::Updated { new: o, .. }) | Some(InformerEvent::Deleted(o)) => {
                    if let Some(ns) = o.metadata().namespace.as_deref() {
                        queue.add(ns);
                    }
                }
                Some(InformerEvent::Added(_)) => {}
                None => return,
            },
        }
    }
}

/// The ServiceAccount controller (keys are namespace names).
pub struct ServiceAccountsController {
    client: Client,
    namespaces: Store<Namespace>,
    accounts: Store<ServiceAccount>,
}

impl ServiceAccountsController {
    pub fn new(
        client: Client,
        namespaces: &mut Informer<Namespace>,
        accounts: &mut Informer<ServiceAccount>,
    ) -> (Arc<ServiceAccountsController>, WorkQueue) {
        let queue = WorkQueue::new(Duration::from_millis(50), Duration::from_secs(30));
        let controller = Arc::new(ServiceAccountsController {
            client,
            namespaces: namespaces.store(),
            accounts: accounts.store(),
        });
        tokio::spawn(feed(
            namespaces.subscribe(),
            accounts.subscribe(),
            queue.clone(),
        ));
        (controller, queue)
    }
}

impl crate::manager::HasCaches for ServiceAccountsController {
    fn caches_synced(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send>> {
        let (a, b) = (self.namespaces.clone(), self.accounts.clone());
        Box::pin(async move { a.wait_synced().await && b.wait_synced().await })
    }
}

/// The `default` ServiceAccount of `namespace`, as the controller creates it.
pub fn default_account(namespace: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": DEFAULT_ACCOUNT, "namespace": namespace},
    })
}

impl Reconciler for ServiceAccountsController {
    async fn reconcile(&self, namespace: &str) -> Result<Outcome, ReconcileError> {
        if !live(&self.namespaces, namespace)
            || self
                .accounts
                .get_named(Some(namespace), DEFAULT_ACCOUNT)
                .is_some()
        {
            return Ok(Outcome::Done);
        }
        let resource = resources::find("", "v1", "serviceaccounts")
            .ok_or_else(|| ReconcileError::Invalid("serviceaccounts are not served".into()))?;
        match self
            .client
            .create::<_, serde_json::Value>(resource, Some(namespace), &default_account(namespace))
            .await
        {
            Ok(_) => {
                info!(namespace, "created the default service account");
                Ok(Outcome::Done)
            }
            // Already there (the cache is behind), or the namespace went away meanwhile.
            Err(e) if e.is_already_exists() || e.is_not_found() => Ok(Outcome::Done),
            Err(e) if live(&self.namespaces, namespace) => {
                Err(ReconcileError::api("create serviceaccount default")(e))
            }
            Err(_) => Ok(Outcome::Done),
        }
    }
}

/// The root-CA publisher (keys are namespace names).
pub struct RootCaPublisher {
    client: Client,
    /// The cluster CA, PEM.
    ca: String,
    namespaces: Store<Namespace>,
    config_maps: Store<ConfigMap>,
}

impl RootCaPublisher {
    pub fn new(
        client: Client,
        ca: String,
        namespaces: &mut Informer<Namespace>,
        config_maps: &mut Informer<ConfigMap>,
    ) -> (Arc<RootCaPublisher>, WorkQueue) {
        let queue = WorkQueue::new(Duration::from_millis(50), Duration::from_secs(30));
        let controller = Arc::new(RootCaPublisher {
            client,
            ca,
            namespaces: namespaces.store(),
            config_maps: config_maps.store(),
        });
        tokio::spawn(feed(
            namespaces.subscribe(),
            config_maps.subscribe(),
            queue.clone(),
        ));
        (controller, queue)
    }
}

impl crate::manager::HasCaches for RootCaPublisher {
    fn caches_synced(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send>> {
        let (a, b) = (self.namespaces.clone(), self.config_maps.clone());
        Box::pin(async move { a.wait_synced().await && b.wait_synced().await })
    }
}

/// What the publisher does about one namespace's ConfigMap.
#[derive(Debug, PartialEq)]
pub enum Publish {
    Nothing,
    Create(ConfigMap),
    /// Replace it (the existing object with its data and annotation put back).
    Update(ConfigMap),
}

/// The decision for `namespace` given its current ConfigMap: missing → create; data other
/// than exactly `{ca.crt: ca}` or no description → put both back, keeping the rest.
pub fn publish(namespace: &str, ca: &str, current: Option<&ConfigMap>) -> Publish {
    let data = BTreeMap::from([(ROOT_CA_KEY.to_string(), ca.to_string())]);
    let Some(current) = current else {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(ROOT_CA_CONFIG_MAP.into());
        cm.metadata.namespace = Some(namespace.into());
        cm.metadata.annotations = Some(BTreeMap::from([(
            DESCRIPTION_ANNOTATION.to_string(),
            DESCRIPTION.to_string(),
        )]));
        cm.data = Some(data);
        return Publish::Create(cm);
    };
    let described = current
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DESCRIPTION_ANNOTATION))
        .is_some_and(|d| !d.is_empty());
    if current.data.as_ref() == Some(&data) && current.binary_data.is_none() && described {
        return Publish::Nothing;
    }
    let mut cm = current.clone();
    cm.data = Some(data);
    cm.binary_data = None;
    cm.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(DESCRIPTION_ANNOTATION.into(), DESCRIPTION.into());
    Publish::Update(cm)
}

impl Reconciler for RootCaPublisher {
    async fn reconcile(&self, namespace: &str) -> Result<Outcome, ReconcileError> {
        if !live(&self.namespaces, namespace) {
            return Ok(Outcome::Done);
        }
        let current = self
            .config_maps
            .get_named(Some(namespace), ROOT_CA_CONFIG_MAP);
        let resource = resources::find("", "v1", "configmaps")
            .ok_or_else(|| ReconcileError::Invalid("configmaps are not served".into()))?;
        let result = match publish(namespace, &self.ca, current.as_deref()) {
            Publish::Nothing => return Ok(Outcome::Done),
            Publish::Create(cm) => self
                .client
                .create::<_, serde_json::Value>(resource, Some(namespace), &cm)
                .await
                .map(|_| info!(namespace, "published the root CA")),
            Publish::Update(cm) => self
                .client
                .update::<_, serde_json::Value>(resource, Some(namespace), ROOT_CA_CONFIG_MAP, &cm)
                .await
                .map(|_| info!(namespace, "put the root CA back")),
        };
        match result {
            Ok(()) => Ok(Outcome::Done),
            // The cache is behind (a conflict is retried: the informer brings the newer one).
            Err(e) if e.is_already_exists() => Ok(Outcome::Done),
            Err(e)
                if !live(&self.namespaces, namespace) || e.is_not_found() && current.is_none() =>
            {
                Ok(Outcome::Done)
            }
            Err(e) => Err(ReconcileError::api("publish kube-root-ca.crt")(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CA: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

    #[test]
    fn a_missing_config_map_is_created_with_the_ca_and_description() {
        let Publish::Create(cm) = publish("dev", CA, None) else {
            panic!("expected a create");
        };
        let value = serde_json::to_value(&cm).expect("serializes");
        assert_eq!(value["metadata"]["name"], "kube-root-ca.crt");
        assert_eq!(value["metadata"]["namespace"], "dev");
        assert_eq!(value["data"], json!({"ca.crt": CA}));
        assert_eq!(
            value["metadata"]["annotations"]["kubernetes.io/description"],
            DESCRIPTION
        );
        // What was created is left alone.
        assert_eq!(publish("dev", CA, Some(&cm)), Publish::Nothing);
    }

    #[test]
    fn edited_data_is_put_back_keeping_other_metadata() {
        let Publish::Create(mut cm) = publish("dev", CA, None) else {
            panic!("expected a create");
        };
        cm.metadata.labels = Some(BTreeMap::from([("team".into(), "a".into())]));
        cm.data = Some(BTreeMap::from([
            ("ca.crt".into(), "tampered".into()),
            ("extra".into(), "x".into()),
        ]));
        let Publish::Update(fixed) = publish("dev", CA, Some(&cm)) else {
            panic!("expected an update");
        };
        assert_eq!(
            fixed.data,
            Some(BTreeMap::from([("ca.crt".into(), CA.into())]))
        );
        assert_eq!(fixed.metadata.labels, cm.metadata.labels);
        // A lost description alone is put back too.
        let mut undescribed = fixed.clone();
        undescribed.metadata.annotations = None;
        assert!(matches!(
            publish("dev", CA, Some(&undescribed)),
            Publish::Update(_)
        ));
    }

    #[test]
    fn the_default_account_names_its_namespace() {
        let sa = default_account("dev");
        assert_eq!(
            sa["metadata"],
            json!({"name": "default", "namespace": "dev"})
        );
        assert_eq!(sa["kind"], "ServiceAccount");
    }
}
