//! The Namespace controller: a namespace being deleted (Terminating) is emptied — every
//! namespaced resource the API serves, workload controllers first so that they stop making
//! pods — and once nothing is left, its `kubernetes` finalizer is removed (PUT
//! `namespaces/{name}/finalize`), which lets the API server remove it.

use std::sync::Arc;
use std::time::Duration;

use api::client::{Client, DeleteParams, ListParams};
use api::informer::{Informer, InformerEvent, Store};
use api::resources::{ResourceInfo, RESOURCES};
use k8s_openapi::api::core::v1::Namespace;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tracing::{debug, info};

use crate::queue::WorkQueue;
use crate::worker::{Outcome, ReconcileError, Reconciler};

/// The finalizer the API server puts on every namespace.
pub const FINALIZER: &str = "kubernetes";

/// Namespaced resources in the order they are emptied: workload controllers first (so they
/// do not recreate what is deleted next), then everything else in table order. One storage
/// shared by two views (the two Event APIs) is emptied once.
pub fn deletion_order() -> Vec<&'static ResourceInfo> {
    let first = ["deployments", "replicasets", "jobs"];
    let mut out: Vec<&'static ResourceInfo> = Vec::new();
    for plural in first {
        out.extend(
            RESOURCES
                .iter()
                .filter(|r| r.namespaced && r.plural == plural),
        );
    }
    for r in RESOURCES
        .iter()
        .filter(|r| r.namespaced && r.verbs.contains(&"deletecollection"))
    {
        if !out.iter().any(|o| o.storage == r.storage) {
            out.push(r);
        }
    }
    out
}

/// The Namespace reconciler (keys are namespace names).
pub struct NamespaceController {
    client: Client,
    namespaces: Store<Namespace>,
}

impl NamespaceController {
    pub fn new(
        client: Client,
        namespaces: &mut Informer<Namespace>,
    ) -> (Arc<NamespaceController>, WorkQueue) {
        let queue = WorkQueue::new(Duration::from_millis(100), Duration::from_secs(30));
        let controller = Arc::new(NamespaceController {
            client,
            namespaces: namespaces.store(),
        });
        tokio::spawn(feed(namespaces.subscribe(), queue.clone()));
        (controller, queue)
    }
}

async fn feed(mut namespaces: mpsc::Receiver<InformerEvent<Namespace>>, queue: WorkQueue) {
    while let Some(event) = namespaces.recv().await {
        match event {
            InformerEvent::Added(ns) | InformerEvent::Updated { new: ns, .. } => {
                if ns.metadata.deletion_timestamp.is_some() {
                    queue.add(ns.metadata.name.as_deref().unwrap_or_default());
                }
            }
            InformerEvent::Deleted(_) => {}
        }
    }
}

impl crate::manager::HasCaches for NamespaceController {
    fn caches_synced(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send>> {
        let a = self.namespaces.clone();
        Box::pin(async move { a.wait_synced().await })
    }
}

impl Reconciler for NamespaceController {
    async fn reconcile(&self, name: &str) -> Result<Outcome, ReconcileError> {
        let Some(namespace) = self.namespaces.get(name) else {
            return Ok(Outcome::Done);
        };
        if namespace.metadata.deletion_timestamp.is_none() {
            return Ok(Outcome::Done);
        }
        let finalizers = namespace
            .spec
            .as_ref()
            .and_then(|s| s.finalizers.clone())
            .unwrap_or_default();
        if !finalizers.iter().any(|f| f == FINALIZER) {
            return Ok(Outcome::Done);
        }
        let mut remaining = 0usize;
        for resource in deletion_order() {
            let deleted = self
                .client
                .delete_collection::<Value>(
                    resource,
                    Some(name),
                    &ListParams::default(),
                    &DeleteParams::default(),
                )
                .await
                .map_err(ReconcileError::api(format!("delete {}", resource.plural)))?;
            if !deleted.is_empty() {
                debug!(
                    resource = resource.plural,
                    count = deleted.len(),
                    "deleting"
                );
            }
            let left = self
                .client
                .list_raw(resource, Some(name), &ListParams::default().limit(1))
                .await
                .map_err(ReconcileError::api(format!("list {}", resource.plural)))?;
            remaining += left.items.len();
        }
        if remaining > 0 {
            // Terminating pods and finalizers take their time.
            return Ok(Outcome::RequeueAfter(Duration::from_secs(1)));
        }
        let mut finalized = (*namespace).clone();
        let kept: Vec<String> = finalizers.into_iter().filter(|f| f != FINALIZER).collect();
        if let Some(spec) = finalized.spec.as_mut() {
            spec.finalizers = Some(kept);
        }
        let namespaces = api::resources::find("", "v1", "namespaces").expect("namespaces");
        let request = api::protocol::ApiRequest::Update {
            resource: api::protocol::ResourceRef::from_info(namespaces),
            namespace: None,
            name: name.to_string(),
            subresource: Some("finalize".into()),
            object: serde_json::to_vec(&json!(finalized))
                .unwrap_or_default()
                .into(),
            metadata_only: false,
        };
        match self.client.call(&request).await {
            Ok(_) => {
                info!(namespace = name, "namespace emptied and finalized");
                Ok(Outcome::Done)
            }
            Err(e) if e.is_not_found() => Ok(Outcome::Done),
            Err(e) => Err(ReconcileError::api("finalize namespace")(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workload_controllers_go_first_and_each_storage_once() {
        let order: Vec<&str> = deletion_order().iter().map(|r| r.plural).collect();
        assert_eq!(&order[..3], ["deployments", "replicasets", "jobs"]);
        assert!(order.contains(&"pods") && order.contains(&"endpointslices"));
        assert_eq!(order.iter().filter(|p| **p == "events").count(), 1);
        assert!(!order.contains(&"nodes") && !order.contains(&"namespaces"));
    }
}
