//! Watch-fed caches of the objects the measurements poll (pods, controllers, ReplicaSets), as
//! clusterloader2's measurements read informers: one paginated list, then a watch from its
//! resourceVersion (a new list only when the watch answers 410 Gone). Waiting once a second
//! on 150,000 pods then costs the API server one watch, not a full list every second.
//!
//! Objects are kept trimmed to what the measurements read; an informer can also remember every
//! object it has seen (`tombstones`), so that a wait knows the controllers deleted since its
//! `start` and can wait for their pods to be gone.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use serde_json::{Map, Value as Json};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::objects::{Objects, Resource, Seen};

/// What an informer holds.
#[derive(Default)]
pub struct Store {
    /// Live objects by `namespace/name`.
    pub items: HashMap<String, Json>,
    /// Every object seen since the informer started, by uid (only with `tombstones`).
    pub seen: HashMap<String, Json>,
    /// The highest resourceVersion of an object seen: the cache holds every change up to it.
    pub version: u64,
}

/// An object's resourceVersion as a number (kemu's are the store's revisions).
pub fn version_of(object: &Json) -> u64 {
    object["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// A list-then-watch cache of one resource across all namespaces.
pub struct Informer {
    store: Arc<RwLock<Store>>,
    synced: watch::Receiver<bool>,
    task: JoinHandle<()>,
}

impl Drop for Informer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn key_of(object: &Json) -> String {
    format!(
        "{}/{}",
        object["metadata"]["namespace"].as_str().unwrap_or(""),
        object["metadata"]["name"].as_str().unwrap_or("")
    )
}

/// Keeps what the measurements read of an object: its metadata without managed fields and
/// annotations, its spec, and of a pod's status only the phase and conditions.
pub fn trim(mut object: Json) -> Json {
    if let Some(meta) = object.get_mut("metadata").and_then(Json::as_object_mut) {
        meta.remove("managedFields");
        meta.remove("annotations");
    }
    if object["kind"] == "Pod" || object["status"]["phase"].is_string() {
        if let Some(status) = object.get_mut("status").and_then(Json::as_object_mut) {
            let kept: Map<String, Json> = ["phase", "conditions"]
                .iter()
                .filter_map(|k| status.get(*k).map(|v| (k.to_string(), v.clone())))
                .collect();
            *status = kept;
        }
    }
    object
}

impl Informer {
    /// Starts listing and watching `resource`; `tombstones` keeps every object seen.
    pub fn start(objects: Objects, resource: Resource, tombstones: bool) -> Informer {
        let store: Arc<RwLock<Store>> = Arc::default();
        let (synced_tx, synced) = watch::channel(false);
        let sink = store.clone();
        let task = tokio::spawn(async move {
            // Runs until the informer is dropped (which aborts the task).
            let (_running, stop) = watch::channel(false);
            let remember = |store: &mut Store, object: &Json| {
                if tombstones {
                    if let Some(uid) = object["metadata"]["uid"].as_str() {
                        store.seen.insert(uid.to_string(), object.clone());
                    }
                }
            };
            objects
                .list_and_watch(&resource, "", stop, |seen| match seen {
                    Seen::Listed(items) => {
                        let mut store = sink.write();
                        store.items.clear();
                        for item in items {
                            store.version = store.version.max(version_of(&item));
                            let item = trim(item);
                            remember(&mut store, &item);
                            store.items.insert(key_of(&item), item);
                        }
                        drop(store);
                        let _ = synced_tx.send(true);
                    }
                    Seen::Applied(object) => {
                        let object = trim(object);
                        let mut store = sink.write();
                        store.version = store.version.max(version_of(&object));
                        remember(&mut store, &object);
                        store.items.insert(key_of(&object), object);
                    }
                    Seen::Deleted(object) => {
                        let mut store = sink.write();
                        store.version = store.version.max(version_of(&object));
                        store.items.remove(&key_of(&object));
                    }
                })
                .await;
        });
        Informer {
            store,
            synced,
            task,
        }
    }

    /// Waits until the cache holds every change up to `version` (at most `limit`).
    pub async fn wait_for_version(&self, version: u64, limit: Duration) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let have = self.read(|s| s.version);
            if have >= version {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(format!(
                    "the cache reached resourceVersion {have}, not {version}, within {} s",
                    limit.as_secs()
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the first list is in (at most `limit`).
    pub async fn wait_synced(&self, limit: Duration) -> Result<(), String> {
        let mut synced = self.synced.clone();
        let done =
            tokio::time::timeout(limit, async move { synced.wait_for(|s| *s).await.is_ok() }).await;
        match done {
            Ok(true) => Ok(()),
            _ => Err(format!(
                "could not list the objects within {} s",
                limit.as_secs()
            )),
        }
    }

    /// An informer over a fixed store (no list, no watch).
    #[cfg(test)]
    pub fn fixed(store: Store) -> Informer {
        let (_, synced) = watch::channel(true);
        Informer {
            store: Arc::new(RwLock::new(store)),
            synced,
            task: tokio::spawn(async {}),
        }
    }

    /// Reads the cache.
    pub fn read<R>(&self, f: impl FnOnce(&Store) -> R) -> R {
        f(&self.store.read())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn a_wait_for_a_version_ends_once_the_cache_holds_it() {
        let informer = Informer::fixed(Store {
            version: 42,
            ..Default::default()
        });
        assert!(informer
            .wait_for_version(42, Duration::from_millis(100))
            .await
            .is_ok());
        let late = informer
            .wait_for_version(43, Duration::from_millis(100))
            .await
            .unwrap_err();
        assert!(
            late.contains("reached resourceVersion 42, not 43"),
            "{late}"
        );
        assert_eq!(
            version_of(&json!({"metadata": {"resourceVersion": "17"}})),
            17
        );
    }

    #[test]
    fn a_pod_keeps_what_the_measurements_read() {
        let pod = json!({
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "n", "uid": "u", "labels": {"a": "b"},
                "annotations": {"x": "y"}, "managedFields": [{}],
                "ownerReferences": [{"uid": "rs", "controller": true}]},
            "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                "containerStatuses": [{"name": "c"}], "podIP": "10.0.0.1"}
        });
        let t = trim(pod);
        assert_eq!(key_of(&t), "n/p");
        assert!(t["metadata"]["annotations"].is_null());
        assert!(t["metadata"]["managedFields"].is_null());
        assert_eq!(t["metadata"]["ownerReferences"][0]["uid"], "rs");
        assert_eq!(t["spec"]["nodeName"], "node-1");
        assert_eq!(t["status"]["phase"], "Running");
        assert_eq!(t["status"]["conditions"][0]["type"], "Ready");
        assert!(t["status"]["containerStatuses"].is_null());
        assert!(t["status"]["podIP"].is_null());
    }

    #[test]
    fn a_controller_keeps_its_status() {
        let ds = json!({"kind": "DaemonSet", "metadata": {"name": "d"},
            "status": {"desiredNumberScheduled": 3}});
        assert_eq!(trim(ds)["status"]["desiredNumberScheduled"], 3);
    }
}
