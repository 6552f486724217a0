//! The informer-to-queue feed shared by controllers that own pods (ReplicaSet, Job): an owner's
//! own events queue it; a pod's events queue its controlling owner (and the previous one if the
//! controller reference changed) and tell the owner's [`Expectations`] what was observed.

use std::sync::Arc;

use api::informer::{InformerEvent, Store};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::Metadata;
use tokio::sync::mpsc;

use crate::expectations::Expectations;
use crate::owners::{controlled_by, controller_of, key_of};
use crate::pods::BY_CONTROLLER;
use crate::queue::WorkQueue;

/// The key of the object of `kind` that controls `pod`, if any.
pub fn owner_key(pod: &Pod, kind: &str) -> Option<String> {
    let owner = controller_of(&pod.metadata).filter(|r| r.kind == kind)?;
    Some(api::informer::key(
        pod.metadata.namespace.as_deref(),
        &owner.name,
    ))
}

/// The pods in `namespace` whose controller is the object with `uid`, from the pods informer's
/// [`BY_CONTROLLER`] index.
pub fn controlled_pods(pods: &Store<Pod>, namespace: &str, uid: &str) -> Vec<Arc<Pod>> {
    pods.by_index(BY_CONTROLLER, uid)
        .into_iter()
        .filter(|p| {
            p.metadata.namespace.as_deref() == Some(namespace) && controlled_by(&p.metadata, uid)
        })
        .collect()
}

/// Feeds `queue` from the owners' and the pods' informers until either closes. `kind` is the
/// owners' kind as it appears in a pod's controller reference.
pub async fn feed<O>(
    kind: &'static str,
    mut owners: mpsc::Receiver<InformerEvent<O>>,
    mut pods: mpsc::Receiver<InformerEvent<Pod>>,
    queue: WorkQueue,
    expectations: Arc<Expectations>,
) where
    O: Metadata<Ty = ObjectMeta>,
{
    loop {
        tokio::select! {
            event = owners.recv() => match event {
                Some(InformerEvent::Added(o)) | Some(InformerEvent::Updated { new: o, .. }) => {
                    queue.add(&key_of(o.metadata()))
                }
                Some(InformerEvent::Deleted(o)) => {
                    let key = key_of(o.metadata());
                    expectations.forget(&key);
                    queue.add(&key);
                }
                None => return,
            },
            event = pods.recv() => match event {
                Some(InformerEvent::Added(pod)) => {
                    if let Some(key) = owner_key(&pod, kind) {
                        if pod.metadata.deletion_timestamp.is_some() {
                            expectations.deletion_observed(&key, &key_of(&pod.metadata));
                        } else {
                            expectations.creation_observed(&key);
                        }
                        queue.add(&key);
                    }
                }
                Some(InformerEvent::Updated { old, new }) => {
                    let new_owner = owner_key(&new, kind);
                    if let Some(key) = &new_owner {
                        if new.metadata.deletion_timestamp.is_some()
                            && old.metadata.deletion_timestamp.is_none()
                        {
                            expectations.deletion_observed(key, &key_of(&new.metadata));
                        }
                        queue.add(key);
                    }
                    if let Some(key) = owner_key(&old, kind).filter(|k| Some(k) != new_owner.as_ref()) {
                        queue.add(&key);
                    }
                }
                Some(InformerEvent::Deleted(pod)) => {
                    if let Some(key) = owner_key(&pod, kind) {
                        expectations.deletion_observed(&key, &key_of(&pod.metadata));
                        queue.add(&key);
                    }
                }
                None => return,
            },
        }
    }
}
