//! [`VolumeSources`]: the ConfigMaps and Secrets this host's pods mount, kept as kubelet's
//! watch-based manager keeps them — one watch per referenced object
//! (`fieldSelector=metadata.name=NAME` in its namespace, which the node authorizer allows for
//! an object a pod of the host uses), shared by every pod of every node of the host that
//! mounts it.
//!
//! A pod's volume check then reads memory, not the API server: with every pod mounting its
//! namespace's `kube-root-ca.crt` (the service account token volume), a GET per pod would be a
//! request per pod. A watch no pod has used for [`IDLE`] is stopped. A check waits up to
//! [`SYNC_WAIT`] for a new watch's first list, then reports kubelet's
//! `failed to sync configmaps cache: timed out waiting for the condition`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use api::client::{Client, ListParams};
use api::informer::{Informer, Store};
use api::resources;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use tokio::sync::oneshot;

/// How long a watch nobody uses is kept, in case another pod comes for the object.
pub const IDLE: Duration = Duration::from_secs(60);
/// How long a check waits for a new watch's first list (kubelet's one second).
pub const SYNC_WAIT: Duration = Duration::from_secs(1);

/// A volume to check: (volume name, `configmap` or `secret`, object name).
pub type Wanted = (String, &'static str, String);

/// One watched object's cache.
#[derive(Clone)]
pub enum SourceStore {
    ConfigMap(Store<ConfigMap>),
    Secret(Store<Secret>),
}

impl SourceStore {
    fn synced(&self) -> bool {
        match self {
            SourceStore::ConfigMap(s) => s.has_synced(),
            SourceStore::Secret(s) => s.has_synced(),
        }
    }

    async fn wait_synced(&self) -> bool {
        match self {
            SourceStore::ConfigMap(s) => s.wait_synced().await,
            SourceStore::Secret(s) => s.wait_synced().await,
        }
    }

    fn exists(&self, namespace: &str, name: &str) -> bool {
        match self {
            SourceStore::ConfigMap(s) => s.get_named(Some(namespace), name).is_some(),
            SourceStore::Secret(s) => s.get_named(Some(namespace), name).is_some(),
        }
    }
}

type Key = (&'static str, String, String);

struct Watched {
    store: SourceStore,
    users: usize,
    idle_since: Option<Instant>,
    /// Dropping it stops the watch.
    _stop: oneshot::Sender<()>,
}

#[derive(Default)]
struct Inner {
    watched: HashMap<Key, Watched>,
    /// Each pod's (uid) objects.
    by_pod: HashMap<String, Vec<Key>>,
    last_sweep: Option<Instant>,
}

/// The host's watched ConfigMaps and Secrets (one per host, shared by its kubelets).
pub struct VolumeSources {
    client: Client,
    inner: Mutex<Inner>,
}

/// What a check needs: each wanted volume with the cache of its object.
pub struct Check {
    namespace: String,
    sources: Vec<(Wanted, SourceStore)>,
}

impl VolumeSources {
    pub fn new(client: Client) -> VolumeSources {
        VolumeSources {
            client,
            inner: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // Only counts and handles live here; a panic elsewhere leaves them usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records that pod `uid` (in `namespace`) mounts `wanted`, watching each object not yet
    /// watched. Must be called inside a Tokio runtime.
    pub fn acquire(&self, uid: &str, namespace: &str, wanted: Vec<Wanted>) -> Check {
        let mut inner = self.lock();
        let inner = &mut *inner;
        let mut sources = Vec::with_capacity(wanted.len());
        for item in wanted {
            let key: Key = (item.1, namespace.to_string(), item.2.clone());
            let held = inner.by_pod.entry(uid.to_string()).or_default();
            let new_user = !held.contains(&key);
            if new_user {
                held.push(key.clone());
            }
            let watched = match inner.watched.get_mut(&key) {
                Some(w) => w,
                None => {
                    let w = self.watch(&key);
                    inner.watched.entry(key).or_insert(w)
                }
            };
            if new_user {
                watched.users += 1;
                watched.idle_since = None;
            }
            sources.push((item, watched.store.clone()));
        }
        Check {
            namespace: namespace.to_string(),
            sources,
        }
    }

    /// Pod `uid` is gone: its objects lose a user; watches idle for [`IDLE`] stop.
    pub fn release(&self, uid: &str) {
        let mut inner = self.lock();
        let now = Instant::now();
        for key in inner.by_pod.remove(uid).unwrap_or_default() {
            if let Some(w) = inner.watched.get_mut(&key) {
                w.users = w.users.saturating_sub(1);
                if w.users == 0 {
                    w.idle_since = Some(now);
                }
            }
        }
        if inner
            .last_sweep
            .is_none_or(|at| now.duration_since(at) >= IDLE / 4)
        {
            inner.last_sweep = Some(now);
            inner.watched.retain(|_, w| {
                w.users > 0 || w.idle_since.is_none_or(|at| now.duration_since(at) < IDLE)
            });
        }
    }

    /// Objects watched now (for tests and metrics).
    pub fn watched(&self) -> usize {
        self.lock().watched.len()
    }

    fn watch(&self, (kind, namespace, name): &Key) -> Watched {
        let (stop, stopped) = oneshot::channel::<()>();
        let shutdown = async move {
            let _ = stopped.await;
        };
        let params = ListParams::default().fields(format!("metadata.name={name}"));
        let client = self.client.clone();
        let store = if *kind == "secret" {
            let resource = resources::find("", "v1", "secrets").expect("secrets are served");
            let informer = Informer::<Secret>::new(client, resource, Some(namespace), params)
                .with_transform(|s| {
                    s.data = None;
                    s.string_data = None;
                });
            let store = informer.store();
            tokio::spawn(informer.run(shutdown));
            SourceStore::Secret(store)
        } else {
            let resource = resources::find("", "v1", "configmaps").expect("configmaps are served");
            let informer = Informer::<ConfigMap>::new(client, resource, Some(namespace), params)
                .with_transform(|c| {
                    c.data = None;
                    c.binary_data = None;
                });
            let store = informer.store();
            tokio::spawn(informer.run(shutdown));
            SourceStore::ConfigMap(store)
        };
        Watched {
            store,
            users: 0,
            idle_since: None,
            _stop: stop,
        }
    }
}

impl Check {
    /// The mount errors, as kubelet words them: empty when every object is there.
    pub async fn run(self) -> Vec<String> {
        let mut missing = Vec::new();
        for ((volume, kind, name), store) in &self.sources {
            let synced = store.synced()
                || tokio::time::timeout(SYNC_WAIT, store.wait_synced())
                    .await
                    .unwrap_or(false);
            if !synced {
                missing.push(format!(
                    "MountVolume.SetUp failed for volume \"{volume}\" : failed to sync {kind}s cache: timed out waiting for the condition"
                ));
            } else if !store.exists(&self.namespace, name) {
                missing.push(format!(
                    "MountVolume.SetUp failed for volume \"{volume}\" : {kind} \"{name}\" not found"
                ));
            }
        }
        missing
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::client::ClientConfig;
    use transport::pki::{self, CertSpec};

    /// A client of a server that is not there: its watches never sync.
    fn unreachable_client(dir: &std::path::Path) -> Client {
        std::fs::create_dir_all(dir).expect("a temp dir");
        pki::create_ca(dir, "test").expect("a CA");
        pki::issue(
            dir,
            &CertSpec {
                name: "nodehost-1".into(),
                organizations: vec!["system:nodes".into()],
                sans: vec![],
            },
        )
        .expect("a certificate");
        let addr: std::net::SocketAddr = "127.0.0.1:9".parse().expect("an address");
        Client::new(ClientConfig::new(vec![addr], dir, "nodehost-1")).expect("a client")
    }

    fn users(sources: &VolumeSources, namespace: &str) -> Option<usize> {
        let inner = sources.lock();
        inner
            .watched
            .iter()
            .find(|((_, ns, _), _)| ns == namespace)
            .map(|(_, w)| w.users)
    }

    #[tokio::test]
    async fn pods_share_one_watch_per_object_until_it_idles_out() {
        let dir = std::env::temp_dir().join(format!("kemu-volume-sources-{}", std::process::id()));
        let sources = VolumeSources::new(unreachable_client(&dir));
        let root_ca = || {
            vec![(
                "kube-api-access-x".to_string(),
                "configmap",
                "kube-root-ca.crt".to_string(),
            )]
        };
        sources.acquire("a", "dev", root_ca());
        sources.acquire("b", "dev", root_ca());
        // A retried check of the same pod is not another user.
        sources.acquire("b", "dev", root_ca());
        sources.acquire("c", "prod", root_ca());
        assert_eq!(sources.watched(), 2);
        assert_eq!(users(&sources, "dev"), Some(2));

        sources.release("a");
        sources.release("b");
        assert_eq!(users(&sources, "dev"), Some(0));
        assert_eq!(sources.watched(), 2, "an idle watch is kept a while");

        // A check whose watch never syncs fails in kubelet's words after SYNC_WAIT.
        let check = sources.acquire("d", "dev", root_ca());
        assert_eq!(users(&sources, "dev"), Some(1));
        assert_eq!(
            check.run().await,
            vec!["MountVolume.SetUp failed for volume \"kube-api-access-x\" : failed to sync configmaps cache: timed out waiting for the condition".to_string()]
        );

        // Idle for longer than IDLE: the next sweep stops it; one in use stays.
        sources.release("d");
        {
            let mut inner = sources.lock();
            let long_ago = Instant::now().checked_sub(IDLE * 2).expect("uptime");
            for w in inner.watched.values_mut().filter(|w| w.users == 0) {
                w.idle_since = Some(long_ago);
            }
            inner.last_sweep = None;
        }
        sources.release("nobody");
        assert_eq!(sources.watched(), 1);
        assert_eq!(users(&sources, "prod"), Some(1));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
