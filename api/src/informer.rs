//! The informer: keeps a local cache ([`Store`]) of one resource (optionally narrowed by
//! namespace and selectors) in step with the API server, and tells subscribers what changed.
//!
//! Its core is the pure state machine [`Machine`] (`Empty → Listing → Listed{rv} →
//! Watching{rv}`), which turns what happened ([`Input`]) into what to do next ([`Command`]);
//! [`Informer::run`] is the driver doing the I/O. A 410 Gone, or another error the server
//! answers, sends the informer back to list; a watch the server ended cleanly (the watcher fell
//! behind, or the server's cache was reset) or that broke with its connection (the API server
//! killed or restarted) is re-opened from the last resourceVersion seen, and only if that
//! version is too old by then does the server's 410 force a re-list. A re-list is compared with
//! the store, and subscribers get the difference as ordinary events, so they never see a gap.
//!
//! A store may carry named indexes ([`Informer::add_index`]: pods by node, by controller uid),
//! kept under the same lock as the objects, so a reader of an index sees exactly the cache:
//! controllers read the few objects they concern instead of scanning every one.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, watch};
use tracing::{debug, info_span, warn, Instrument};

use crate::client::{decode, Client, ClientError, ListParams, WatchStream};
use crate::protocol::{WatchEventKind, WatchFrame};
use crate::resources::ResourceInfo;

/// Items per list page when the caller's params set no limit (client-go's page size).
const LIST_PAGE: usize = 500;
/// Events a subscriber may leave unread before the informer waits for it.
const SUBSCRIBER_BUFFER: usize = 1024;

/// Where the informer is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    /// Nothing listed yet.
    Empty,
    /// A list is due or in flight (first list, after a 410, or after a failure).
    Listing,
    /// Listed (or a watch ended cleanly) at `resource_version`; a watch from there is due.
    Listed { resource_version: String },
    /// A watch is open; `resource_version` is the newest version it delivered.
    Watching { resource_version: String },
}

/// What happened, as the driver reports it to the [`Machine`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    Start,
    ListDone {
        resource_version: String,
    },
    ListFailed,
    WatchOpened,
    /// An event or bookmark up to `resource_version`.
    Progress {
        resource_version: String,
    },
    /// The server finished the stream without an error.
    WatchEnded,
    /// The server answered the watch with an error; `gone` for 410.
    WatchFailed {
        gone: bool,
    },
    /// The watch could not be opened or its stream broke without an answer from the server
    /// (the connection was lost, or the call timed out): nothing says the version is too old.
    WatchBroken,
}

/// What the driver should do next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// List (all pages) after waiting `after`, then report `ListDone`/`ListFailed`.
    List { after: Duration },
    /// Open a watch from `resource_version` after waiting `after`.
    Watch {
        resource_version: String,
        after: Duration,
    },
    /// Read the next frame of the open watch.
    Read,
}

/// The informer's decisions, without I/O or clocks: feed it [`Input`]s, do its [`Command`]s.
#[derive(Clone, Debug)]
pub struct Machine {
    state: State,
    /// Consecutive failures, for the backoff; reset by progress.
    failures: u32,
    /// Whether the open watch delivered anything, so that a server ending every watch at once
    /// does not make the informer spin.
    progressed: bool,
    min_backoff: Duration,
    max_backoff: Duration,
}

impl Machine {
    pub fn new(min_backoff: Duration, max_backoff: Duration) -> Machine {
        Machine {
            state: State::Empty,
            failures: 0,
            progressed: false,
            min_backoff,
            max_backoff: max_backoff.max(min_backoff),
        }
    }

    pub fn state(&self) -> &State {
        &self.state
    }

    /// The next state and command for `input`.
    pub fn step(&mut self, input: Input) -> Command {
        let state = std::mem::replace(&mut self.state, State::Empty);
        match (state, input) {
            (State::Empty, Input::Start) => self.list(false),
            (State::Listing, Input::ListDone { resource_version }) => {
                self.failures = 0;
                self.watch(resource_version, Duration::ZERO)
            }
            (State::Listing, Input::ListFailed) => self.list(true),
            (State::Listed { resource_version }, Input::WatchOpened) => {
                self.progressed = false;
                self.state = State::Watching { resource_version };
                Command::Read
            }
            (State::Watching { .. }, Input::Progress { resource_version }) => {
                self.failures = 0;
                self.progressed = true;
                self.state = State::Watching { resource_version };
                Command::Read
            }
            (State::Watching { resource_version }, Input::WatchEnded) => {
                let after = if self.progressed {
                    self.failures = 0;
                    Duration::ZERO
                } else {
                    self.failures += 1;
                    self.backoff()
                };
                self.watch(resource_version, after)
            }
            // The version is too old: start over. At once from a healthy watch, since nothing
            // is wrong with the server. After the backoff when the informer is coming back
            // from failures: a restarted server answers every resumed watch with 410, and
            // client-go's reflector waits out its backoff before that relist, which spreads
            // the relists of thousands of informers that lost the server together.
            (State::Listed { .. } | State::Watching { .. }, Input::WatchFailed { gone: true }) => {
                let after = self.backoff();
                self.state = State::Listing;
                Command::List { after }
            }
            (State::Listed { .. } | State::Watching { .. }, Input::WatchFailed { gone: false }) => {
                self.list(true)
            }
            // The API server went away (killed, restarted, cut off): resume from the last
            // version, as kube-runtime's watcher does; only a 410 from the server it reaches
            // then sends the informer back to list. At once after a watch that delivered, so a
            // restarted server is watched again as soon as it answers.
            (
                State::Listed { resource_version } | State::Watching { resource_version },
                Input::WatchBroken,
            ) => {
                let after = if std::mem::take(&mut self.progressed) {
                    self.failures = 0;
                    Duration::ZERO
                } else {
                    self.failures += 1;
                    self.backoff()
                };
                self.watch(resource_version, after)
            }
            (state, input) => {
                // A driver bug; listing again is always safe.
                warn!(?state, ?input, "informer input out of order; re-listing");
                self.list(true)
            }
        }
    }

    fn list(&mut self, failed: bool) -> Command {
        if failed {
            self.failures += 1;
        }
        self.state = State::Listing;
        Command::List {
            after: if failed {
                self.backoff()
            } else {
                Duration::ZERO
            },
        }
    }

    fn watch(&mut self, resource_version: String, after: Duration) -> Command {
        self.state = State::Listed {
            resource_version: resource_version.clone(),
        };
        Command::Watch {
            resource_version,
            after,
        }
    }

    /// Doubles from `min_backoff` per consecutive failure, up to `max_backoff`.
    fn backoff(&self) -> Duration {
        if self.failures == 0 {
            return Duration::ZERO;
        }
        let doublings = (self.failures - 1).min(16);
        (self.min_backoff * 2u32.pow(doublings)).min(self.max_backoff)
    }
}

/// A change to the cache, as subscribers see it.
#[derive(Debug)]
pub enum InformerEvent<T> {
    Added(Arc<T>),
    Updated {
        old: Arc<T>,
        new: Arc<T>,
    },
    /// The object's last known state.
    Deleted(Arc<T>),
}

impl<T> Clone for InformerEvent<T> {
    fn clone(&self) -> Self {
        match self {
            InformerEvent::Added(o) => InformerEvent::Added(o.clone()),
            InformerEvent::Updated { old, new } => InformerEvent::Updated {
                old: old.clone(),
                new: new.clone(),
            },
            InformerEvent::Deleted(o) => InformerEvent::Deleted(o.clone()),
        }
    }
}

/// The store key of an object: `namespace/name`, or `name` for cluster-scoped objects.
pub fn key(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

fn meta_key(meta: &ObjectMeta) -> String {
    key(
        meta.namespace.as_deref(),
        meta.name.as_deref().unwrap_or_default(),
    )
}

/// What an index files an object under (`None`: not indexed).
pub type IndexFn<T> = fn(&T) -> Option<String>;

/// One named index: object keys by the value `func` returns for them.
struct Index<T> {
    name: &'static str,
    func: IndexFn<T>,
    buckets: HashMap<String, HashSet<String>>,
}

impl<T> Index<T> {
    fn insert(&mut self, key: &str, object: &T) {
        if let Some(value) = (self.func)(object) {
            self.buckets
                .entry(value)
                .or_default()
                .insert(key.to_string());
        }
    }

    fn remove(&mut self, key: &str, object: &T) {
        if let Some(value) = (self.func)(object) {
            if let Some(keys) = self.buckets.get_mut(&value) {
                keys.remove(key);
                if keys.is_empty() {
                    self.buckets.remove(&value);
                }
            }
        }
    }

    fn rebuild(&mut self, objects: &HashMap<String, Arc<T>>) {
        self.buckets.clear();
        for (key, object) in objects {
            self.insert(key, object);
        }
    }
}

/// The objects and their indexes, changed together under one lock.
struct Cache<T> {
    objects: HashMap<String, Arc<T>>,
    indexes: Vec<Index<T>>,
}

impl<T> Cache<T> {
    /// Stores `object` under `key`; returns what it replaced.
    fn insert(&mut self, key: String, object: Arc<T>) -> Option<Arc<T>> {
        for index in &mut self.indexes {
            if let Some(old) = self.objects.get(&key) {
                index.remove(&key, old);
            }
            index.insert(&key, &object);
        }
        self.objects.insert(key, object)
    }

    fn remove(&mut self, key: &str) -> Option<Arc<T>> {
        let old = self.objects.remove(key)?;
        for index in &mut self.indexes {
            index.remove(key, &old);
        }
        Some(old)
    }

    /// Replaces every object (after a re-list) and rebuilds the indexes.
    fn replace(&mut self, objects: HashMap<String, Arc<T>>) {
        self.objects = objects;
        for index in &mut self.indexes {
            index.rebuild(&self.objects);
        }
    }
}

/// The informer's cache, readable from anywhere; cheap to clone.
pub struct Store<T> {
    cache: Arc<RwLock<Cache<T>>>,
    synced: watch::Receiver<bool>,
}

impl<T> Clone for Store<T> {
    fn clone(&self) -> Self {
        Store {
            cache: self.cache.clone(),
            synced: self.synced.clone(),
        }
    }
}

impl<T> Store<T> {
    /// The object under `key` (see [`key`]).
    pub fn get(&self, key: &str) -> Option<Arc<T>> {
        self.read().objects.get(key).cloned()
    }

    pub fn get_named(&self, namespace: Option<&str>, name: &str) -> Option<Arc<T>> {
        self.get(&key(namespace, name))
    }

    /// Every cached object, in no particular order.
    pub fn list(&self) -> Vec<Arc<T>> {
        self.read().objects.values().cloned().collect()
    }

    /// The cached objects the index `name` files under `value`, in no particular order (none
    /// if there is no such index).
    pub fn by_index(&self, name: &str, value: &str) -> Vec<Arc<T>> {
        let cache = self.read();
        let Some(index) = cache.indexes.iter().find(|i| i.name == name) else {
            return Vec::new();
        };
        index
            .buckets
            .get(value)
            .map(|keys| {
                keys.iter()
                    .filter_map(|k| cache.objects.get(k).cloned())
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn keys(&self) -> Vec<String> {
        self.read().objects.keys().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.read().objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.read().objects.is_empty()
    }

    /// True once the first list has been stored; stays true across re-lists.
    pub fn has_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// Waits for the first list. False if the informer stopped before it synced.
    pub async fn wait_synced(&self) -> bool {
        let mut synced = self.synced.clone();
        let synced_or_stopped = synced.wait_for(|s| *s).await.is_ok();
        synced_or_stopped
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Cache<T>> {
        // A poisoned lock only means a reader panicked; the map is whole.
        self.cache.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Cache<T>> {
        self.cache.write().unwrap_or_else(|e| e.into_inner())
    }
}

/// Keeps a [`Store`] of one resource in step with the API server. Create it, take its
/// [`store`](Self::store) and [`subscribe`](Self::subscribe), then spawn [`run`](Self::run).
pub struct Informer<T> {
    client: Client,
    resource: &'static ResourceInfo,
    namespace: Option<String>,
    params: ListParams,
    store: Store<T>,
    synced: watch::Sender<bool>,
    state: watch::Sender<State>,
    subscribers: Vec<mpsc::Sender<InformerEvent<T>>>,
    min_backoff: Duration,
    max_backoff: Duration,
    transform: Option<fn(&mut T)>,
}

impl<T> Informer<T>
where
    T: k8s_openapi::Metadata<Ty = ObjectMeta> + DeserializeOwned + Send + Sync + 'static,
{
    /// An informer of `resource` in `namespace` (all for `None`) narrowed by the label and
    /// field selectors of `params` (its `limit` sets the list page size).
    pub fn new(
        client: Client,
        resource: &'static ResourceInfo,
        namespace: Option<&str>,
        params: ListParams,
    ) -> Informer<T> {
        let (synced, synced_rx) = watch::channel(false);
        let (state, _) = watch::channel(State::Empty);
        Informer {
            client,
            resource,
            namespace: namespace.map(str::to_string),
            params,
            store: Store {
                cache: Arc::new(RwLock::new(Cache {
                    objects: HashMap::new(),
                    indexes: Vec::new(),
                })),
                synced: synced_rx,
            },
            synced,
            state,
            subscribers: Vec::new(),
            min_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            transform: None,
        }
    }

    /// Runs `transform` on every object as it is decoded, before it is cached or handed to
    /// subscribers (client-go's `SetTransform`): a consumer that needs only part of an object
    /// drops the rest, so the cache does not hold it. Must be deterministic, since cached and
    /// new objects are compared.
    pub fn with_transform(mut self, transform: fn(&mut T)) -> Self {
        self.transform = Some(transform);
        self
    }

    fn decode_one(&self, raw: &[u8]) -> Result<T, ClientError> {
        let mut object = decode::<T>(raw)?;
        if let Some(transform) = self.transform {
            transform(&mut object);
        }
        Ok(object)
    }

    /// Overrides the retry backoff (doubling from `min` up to `max`).
    pub fn with_backoff(mut self, min: Duration, max: Duration) -> Self {
        self.min_backoff = min;
        self.max_backoff = max;
        self
    }

    pub fn store(&self) -> Store<T> {
        self.store.clone()
    }

    /// Keeps the index `name` of the store's objects by `func` (see [`Store::by_index`]).
    /// Adding a name a second time keeps the first.
    pub fn add_index(&mut self, name: &'static str, func: IndexFn<T>) {
        let mut cache = self.store.write();
        if cache.indexes.iter().any(|i| i.name == name) {
            return;
        }
        let mut index = Index {
            name,
            func,
            buckets: HashMap::new(),
        };
        index.rebuild(&cache.objects);
        cache.indexes.push(index);
    }

    pub fn has_synced(&self) -> bool {
        self.store.has_synced()
    }

    /// The informer's state as it changes (for diagnostics and tests).
    pub fn state(&self) -> watch::Receiver<State> {
        self.state.subscribe()
    }

    /// A new subscriber's channel of changes, starting with the first list's objects as
    /// `Added`. The informer waits for a subscriber that stops reading, so read it promptly.
    pub fn subscribe(&mut self) -> mpsc::Receiver<InformerEvent<T>> {
        let (tx, rx) = mpsc::channel(SUBSCRIBER_BUFFER);
        self.subscribers.push(tx);
        rx
    }

    /// Lists and watches until `shutdown` resolves.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) {
        let span = info_span!(
            "informer",
            resource = self.resource.plural,
            namespace = self.namespace.as_deref().unwrap_or(""),
            fields = self.params.field_selector.as_deref().unwrap_or(""),
        );
        self.drive(shutdown).instrument(span).await
    }

    async fn drive(self, shutdown: impl Future<Output = ()> + Send) {
        tokio::pin!(shutdown);
        let mut machine = Machine::new(self.min_backoff, self.max_backoff);
        let mut command = machine.step(Input::Start);
        let mut stream: Option<WatchStream> = None;
        loop {
            self.state.send_replace(machine.state().clone());
            let work = async {
                match &command {
                    Command::List { after } => {
                        stream = None;
                        tokio::time::sleep(jittered(*after)).await;
                        self.relist().await
                    }
                    Command::Watch {
                        resource_version,
                        after,
                    } => {
                        stream = None;
                        tokio::time::sleep(jittered(*after)).await;
                        match self.open_watch(resource_version).await {
                            Ok(opened) => {
                                stream = Some(opened);
                                Input::WatchOpened
                            }
                            Err(e) => {
                                debug!(error = %e, "cannot open the watch");
                                watch_error(&e)
                            }
                        }
                    }
                    Command::Read => match stream.as_mut() {
                        Some(open) => {
                            let frame = open.next().await;
                            self.on_frame(frame).await
                        }
                        None => Input::WatchFailed { gone: false },
                    },
                }
            };
            let input = tokio::select! {
                biased;
                () = &mut shutdown => return,
                input = work => input,
            };
            command = machine.step(input);
        }
    }

    fn watch_params(&self, resource_version: &str) -> ListParams {
        ListParams {
            label_selector: self.params.label_selector.clone(),
            field_selector: self.params.field_selector.clone(),
            resource_version: Some(resource_version.to_string()),
            bookmarks: true,
            ..Default::default()
        }
    }

    async fn open_watch(&self, resource_version: &str) -> Result<WatchStream, ClientError> {
        let params = self.watch_params(resource_version);
        self.client
            .watch(self.resource, self.namespace.as_deref(), &params)
            .await
    }

    /// Lists every page, replaces the store with the result, and tells subscribers the
    /// difference.
    async fn relist(&self) -> Input {
        let listed = match self.list_all().await {
            Ok(listed) => listed,
            Err(e) => {
                warn!(error = %e, "list failed");
                return Input::ListFailed;
            }
        };
        let (resource_version, fresh) = listed;
        let events = {
            let mut cache = self.store.write();
            let (next, events) = diff(&cache.objects, fresh);
            cache.replace(next);
            events
        };
        self.synced.send_replace(true);
        debug!(%resource_version, changes = events.len(), "listed");
        for event in events {
            self.publish(event).await;
        }
        Input::ListDone { resource_version }
    }

    /// All pages of the list. Pages are served at increasing revisions, so the first page's
    /// version is the one to watch from: every change after it is replayed, and replayed events
    /// older than what a later page already showed are skipped by [`Self::on_frame`].
    async fn list_all(&self) -> Result<(String, HashMap<String, Arc<T>>), ClientError> {
        let mut params = ListParams {
            label_selector: self.params.label_selector.clone(),
            field_selector: self.params.field_selector.clone(),
            limit: if self.params.limit > 0 {
                self.params.limit
            } else {
                LIST_PAGE
            },
            ..Default::default()
        };
        let mut objects = HashMap::new();
        let mut first_version = None;
        loop {
            let page = self
                .client
                .list_raw(self.resource, self.namespace.as_deref(), &params)
                .await?;
            first_version.get_or_insert(page.resource_version);
            for item in &page.items {
                match self.decode_one(item) {
                    Ok(object) => {
                        objects.insert(meta_key(object.metadata()), Arc::new(object));
                    }
                    Err(e) => warn!(error = %e, "skipping an object that does not decode"),
                }
            }
            match page.continue_token {
                Some(token) => params.continue_token = Some(token),
                None => break,
            }
        }
        Ok((first_version.unwrap_or_default(), objects))
    }

    /// Applies one watch frame to the store and tells subscribers; returns the machine's input.
    /// A subscriber that does not keep up stops the informer reading the stream, and that
    /// back-pressure reaches the server, which drops a watcher too far behind.
    async fn on_frame(&self, frame: Option<Result<WatchFrame, ClientError>>) -> Input {
        let frame = match frame {
            None => return Input::WatchEnded,
            Some(Err(e)) => {
                let input = watch_error(&e);
                match input {
                    Input::WatchBroken => debug!(error = %e, "watch broke; resuming it"),
                    _ if e.is_gone() => debug!(error = %e, "watch expired; re-listing"),
                    _ => warn!(error = %e, "watch failed; re-listing"),
                }
                return input;
            }
            Some(Ok(frame)) => frame,
        };
        let resource_version = frame.resource_version.to_string();
        if frame.kind != WatchEventKind::Bookmark {
            match self.decode_one(&frame.object) {
                Ok(object) => {
                    let event = apply(&mut self.store.write(), frame.kind, object);
                    if let Some(event) = event {
                        self.publish(event).await;
                    }
                }
                Err(e) => warn!(error = %e, "skipping a watch event that does not decode"),
            }
        }
        Input::Progress { resource_version }
    }

    async fn publish(&self, event: InformerEvent<T>) {
        for subscriber in &self.subscribers {
            // A subscriber that went away no longer cares.
            let _ = subscriber.send(event.clone()).await;
        }
    }
}

/// A retry's pause as client-go's reflector takes it: the backoff stretched by a random factor
/// in [1, 2) (its jitter factor of 1.0). Informers that lost a server together would otherwise
/// retry in step, every one of them at the same instants, and meet a restarted server all at
/// once.
pub fn jittered(after: Duration) -> Duration {
    if after.is_zero() {
        return after;
    }
    after.mul_f64(1.0 + rand::random::<f64>())
}

/// The machine's input for a watch that failed with `error`: an answer from the server, or a
/// break with no answer.
fn watch_error(error: &ClientError) -> Input {
    match error {
        ClientError::Transport(_) | ClientError::Timeout { .. } => Input::WatchBroken,
        _ => Input::WatchFailed {
            gone: error.is_gone(),
        },
    }
}

fn resource_version<T: k8s_openapi::Metadata<Ty = ObjectMeta>>(object: &T) -> i64 {
    object
        .metadata()
        .resource_version
        .as_deref()
        .and_then(|rv| rv.parse().ok())
        .unwrap_or(0)
}

/// Applies one watch event to the cache and returns what subscribers should see. Events older
/// than the cached object (replayed after a paged list) change nothing.
fn apply<T: k8s_openapi::Metadata<Ty = ObjectMeta>>(
    objects: &mut Cache<T>,
    kind: WatchEventKind,
    object: T,
) -> Option<InformerEvent<T>> {
    let key = meta_key(object.metadata());
    let version = resource_version(&object);
    let current = objects.objects.get(&key);
    if current.is_some_and(|c| resource_version(c.as_ref()) >= version && version > 0) {
        return None;
    }
    let object = Arc::new(object);
    match kind {
        WatchEventKind::Added | WatchEventKind::Modified => {
            match objects.insert(key, object.clone()) {
                Some(old) => Some(InformerEvent::Updated { old, new: object }),
                None => Some(InformerEvent::Added(object)),
            }
        }
        // Only what was cached can be reported deleted.
        WatchEventKind::Deleted => objects.remove(&key).map(|_| InformerEvent::Deleted(object)),
        WatchEventKind::Bookmark => None,
    }
}

/// The cache after a re-list and the events that turn the old cache into it: adds and updates
/// for what is new or changed, deletions (with the last cached state) for what vanished.
/// Unchanged objects keep their cached `Arc`.
fn diff<T: k8s_openapi::Metadata<Ty = ObjectMeta>>(
    old: &HashMap<String, Arc<T>>,
    mut fresh: HashMap<String, Arc<T>>,
) -> (HashMap<String, Arc<T>>, Vec<InformerEvent<T>>) {
    let mut events = Vec::new();
    for (key, new) in fresh.iter_mut() {
        match old.get(key) {
            None => events.push(InformerEvent::Added(new.clone())),
            Some(cached) if resource_version(cached.as_ref()) == resource_version(new.as_ref()) => {
                *new = cached.clone();
            }
            Some(cached) => events.push(InformerEvent::Updated {
                old: cached.clone(),
                new: new.clone(),
            }),
        }
    }
    for (key, cached) in old {
        if !fresh.contains_key(key) {
            events.push(InformerEvent::Deleted(cached.clone()));
        }
    }
    (fresh, events)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;

    fn machine() -> Machine {
        Machine::new(Duration::from_millis(100), Duration::from_millis(350))
    }

    fn rv(v: &str) -> String {
        v.to_string()
    }

    #[test]
    fn lists_then_watches_from_the_list_version() {
        let mut m = machine();
        assert_eq!(m.state(), &State::Empty);
        assert_eq!(
            m.step(Input::Start),
            Command::List {
                after: Duration::ZERO
            }
        );
        assert_eq!(m.state(), &State::Listing);
        let command = m.step(Input::ListDone {
            resource_version: rv("10"),
        });
        assert_eq!(
            command,
            Command::Watch {
                resource_version: rv("10"),
                after: Duration::ZERO
            }
        );
        assert_eq!(
            m.state(),
            &State::Listed {
                resource_version: rv("10")
            }
        );
        assert_eq!(m.step(Input::WatchOpened), Command::Read);
        assert_eq!(
            m.step(Input::Progress {
                resource_version: rv("12")
            }),
            Command::Read
        );
        assert_eq!(
            m.state(),
            &State::Watching {
                resource_version: rv("12")
            }
        );
    }

    #[test]
    fn a_clean_end_rewatches_from_the_last_version() {
        let mut m = machine();
        m.step(Input::Start);
        m.step(Input::ListDone {
            resource_version: rv("10"),
        });
        m.step(Input::WatchOpened);
        m.step(Input::Progress {
            resource_version: rv("15"),
        });
        assert_eq!(
            m.step(Input::WatchEnded),
            Command::Watch {
                resource_version: rv("15"),
                after: Duration::ZERO
            }
        );
        // A watch that ends without delivering anything backs off before the next one.
        m.step(Input::WatchOpened);
        assert_eq!(
            m.step(Input::WatchEnded),
            Command::Watch {
                resource_version: rv("15"),
                after: Duration::from_millis(100)
            }
        );
        m.step(Input::WatchOpened);
        assert_eq!(
            m.step(Input::WatchEnded),
            Command::Watch {
                resource_version: rv("15"),
                after: Duration::from_millis(200)
            }
        );
    }

    #[test]
    fn gone_relists_at_once_and_errors_relist_with_backoff() {
        let mut m = machine();
        m.step(Input::Start);
        m.step(Input::ListDone {
            resource_version: rv("10"),
        });
        m.step(Input::WatchOpened);
        assert_eq!(
            m.step(Input::WatchFailed { gone: true }),
            Command::List {
                after: Duration::ZERO
            }
        );
        assert_eq!(m.state(), &State::Listing);
        m.step(Input::ListDone {
            resource_version: rv("20"),
        });
        // The watch cannot even be opened: re-list, backing off.
        assert_eq!(
            m.step(Input::WatchFailed { gone: false }),
            Command::List {
                after: Duration::from_millis(100)
            }
        );
        assert_eq!(
            m.step(Input::ListFailed),
            Command::List {
                after: Duration::from_millis(200)
            }
        );
        assert_eq!(
            m.step(Input::ListFailed),
            Command::List {
                after: Duration::from_millis(350)
            }
        );
        // Success resets the backoff.
        m.step(Input::ListDone {
            resource_version: rv("30"),
        });
        m.step(Input::WatchOpened);
        assert_eq!(
            m.step(Input::WatchFailed { gone: false }),
            Command::List {
                after: Duration::from_millis(100)
            }
        );
    }

    #[test]
    fn a_broken_watch_resumes_from_the_last_version() {
        let mut m = machine();
        m.step(Input::Start);
        m.step(Input::ListDone {
            resource_version: rv("10"),
        });
        m.step(Input::WatchOpened);
        m.step(Input::Progress {
            resource_version: rv("15"),
        });
        // The connection broke under a watch that delivered: watch again at once, no list.
        assert_eq!(
            m.step(Input::WatchBroken),
            Command::Watch {
                resource_version: rv("15"),
                after: Duration::ZERO
            }
        );
        // While the server cannot be reached, back off between attempts, still from 15.
        assert_eq!(
            m.step(Input::WatchBroken),
            Command::Watch {
                resource_version: rv("15"),
                after: Duration::from_millis(100)
            }
        );
        assert_eq!(
            m.step(Input::WatchBroken),
            Command::Watch {
                resource_version: rv("15"),
                after: Duration::from_millis(200)
            }
        );
        // The server it reaches no longer has that version (a restarted one): list, but only
        // after the backoff, as client-go's reflector does.
        m.step(Input::WatchOpened);
        assert_eq!(
            m.step(Input::WatchFailed { gone: true }),
            Command::List {
                after: Duration::from_millis(200)
            }
        );
        // A good list ends the failures: the next 410 relists at once.
        m.step(Input::ListDone {
            resource_version: rv("40"),
        });
        m.step(Input::WatchOpened);
        assert_eq!(
            m.step(Input::WatchFailed { gone: true }),
            Command::List {
                after: Duration::ZERO
            }
        );
    }

    #[test]
    fn retry_pauses_are_stretched_by_up_to_twice() {
        assert_eq!(jittered(Duration::ZERO), Duration::ZERO);
        let base = Duration::from_millis(400);
        let pauses: Vec<Duration> = (0..200).map(|_| jittered(base)).collect();
        assert!(pauses.iter().all(|p| *p >= base && *p < base * 2));
        // Spread, not one value: at least a quarter of the range between the extremes.
        let spread = *pauses.iter().max().unwrap() - *pauses.iter().min().unwrap();
        assert!(spread > base / 4, "{pauses:?}");
    }

    #[test]
    fn only_errors_without_an_answer_resume_the_watch() {
        let transport =
            ClientError::Transport(transport::TransportError::StreamClosed { reason: "gone" });
        assert_eq!(watch_error(&transport), Input::WatchBroken);
        let timeout = ClientError::Timeout {
            after: Duration::from_secs(1),
            last_error: String::new(),
        };
        assert_eq!(watch_error(&timeout), Input::WatchBroken);
        let gone = ClientError::from_status(410, br#"{"reason":"Expired"}"#);
        assert_eq!(watch_error(&gone), Input::WatchFailed { gone: true });
        let failed = ClientError::from_status(500, br#"{"reason":"InternalError"}"#);
        assert_eq!(watch_error(&failed), Input::WatchFailed { gone: false });
    }

    #[test]
    fn out_of_order_inputs_fall_back_to_listing() {
        let mut m = machine();
        assert!(matches!(m.step(Input::WatchOpened), Command::List { .. }));
        assert_eq!(m.state(), &State::Listing);
    }

    fn pod(name: &str, version: &str) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.namespace = Some("ns".into());
        pod.metadata.name = Some(name.into());
        pod.metadata.resource_version = Some(version.into());
        pod
    }

    fn names(events: &[InformerEvent<Pod>]) -> Vec<String> {
        let mut out: Vec<String> = events
            .iter()
            .map(|e| match e {
                InformerEvent::Added(p) => format!("+{}", p.metadata.name.as_deref().unwrap_or("")),
                InformerEvent::Updated { new, .. } => {
                    format!("~{}", new.metadata.name.as_deref().unwrap_or(""))
                }
                InformerEvent::Deleted(p) => {
                    format!("-{}", p.metadata.name.as_deref().unwrap_or(""))
                }
            })
            .collect();
        out.sort();
        out
    }

    #[test]
    fn a_relist_turns_into_the_difference() {
        let mut old = HashMap::new();
        for (name, version) in [("a", "1"), ("b", "2"), ("c", "3")] {
            old.insert(key(Some("ns"), name), Arc::new(pod(name, version)));
        }
        let mut fresh = HashMap::new();
        for (name, version) in [("a", "1"), ("b", "5"), ("d", "6")] {
            fresh.insert(key(Some("ns"), name), Arc::new(pod(name, version)));
        }
        let (next, events) = diff(&old, fresh);
        assert_eq!(names(&events), ["+d", "-c", "~b"]);
        assert_eq!(next.len(), 3);
        // Unchanged objects keep their cached Arc.
        assert!(Arc::ptr_eq(&next["ns/a"], &old["ns/a"]));
    }

    #[test]
    fn watch_events_update_the_cache_and_skip_stale_replays() {
        let mut objects = Cache {
            objects: HashMap::new(),
            indexes: Vec::new(),
        };
        let added = apply(&mut objects, WatchEventKind::Added, pod("a", "5"));
        assert!(matches!(added, Some(InformerEvent::Added(_))));
        let updated = apply(&mut objects, WatchEventKind::Modified, pod("a", "7"));
        assert!(matches!(updated, Some(InformerEvent::Updated { .. })));
        // A replayed older event changes nothing.
        assert!(apply(&mut objects, WatchEventKind::Modified, pod("a", "6")).is_none());
        assert_eq!(
            objects.objects["ns/a"].metadata.resource_version.as_deref(),
            Some("7")
        );
        let deleted = apply(&mut objects, WatchEventKind::Deleted, pod("a", "9"));
        assert!(matches!(deleted, Some(InformerEvent::Deleted(_))));
        assert!(objects.objects.is_empty());
        // Deleting what was never cached is not reported.
        assert!(apply(&mut objects, WatchEventKind::Deleted, pod("b", "10")).is_none());
    }

    fn on_node(name: &str, version: &str, node: Option<&str>) -> Pod {
        let mut p = pod(name, version);
        p.spec = Some(k8s_openapi::api::core::v1::PodSpec {
            node_name: node.map(str::to_string),
            ..Default::default()
        });
        p
    }

    fn node_of(pod: &Pod) -> Option<String> {
        pod.spec.as_ref()?.node_name.clone()
    }

    fn indexed(store: &Store<Pod>, node: &str) -> Vec<String> {
        let mut names: Vec<String> = store
            .by_index("node", node)
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn indexes_follow_events_and_relists() {
        let (_synced, synced_rx) = watch::channel(true);
        let store = Store {
            cache: Arc::new(RwLock::new(Cache {
                objects: HashMap::new(),
                indexes: Vec::new(),
            })),
            synced: synced_rx,
        };
        store.write().indexes.push(Index {
            name: "node",
            func: node_of,
            buckets: HashMap::new(),
        });
        let event = |kind, p| apply(&mut store.write(), kind, p);
        event(WatchEventKind::Added, on_node("a", "1", None));
        event(WatchEventKind::Added, on_node("b", "2", Some("n1")));
        assert_eq!(indexed(&store, "n1"), ["b"]);
        // Bound, then moved (a stale replay moves nothing), then deleted.
        event(WatchEventKind::Modified, on_node("a", "3", Some("n1")));
        assert_eq!(indexed(&store, "n1"), ["a", "b"]);
        event(WatchEventKind::Modified, on_node("a", "4", Some("n2")));
        event(WatchEventKind::Modified, on_node("a", "3", Some("n1")));
        assert_eq!(indexed(&store, "n1"), ["b"]);
        assert_eq!(indexed(&store, "n2"), ["a"]);
        event(WatchEventKind::Deleted, on_node("b", "5", Some("n1")));
        assert!(indexed(&store, "n1").is_empty());
        assert!(!store.read().indexes[0].buckets.contains_key("n1"));
        // An unknown index finds nothing.
        assert!(store.by_index("owner", "n2").is_empty());
        // A re-list rebuilds the index from what was listed.
        let mut fresh = HashMap::new();
        fresh.insert(
            key(Some("ns"), "c"),
            Arc::new(on_node("c", "9", Some("n2"))),
        );
        let (next, _) = diff(&store.read().objects, fresh);
        store.write().replace(next);
        assert_eq!(indexed(&store, "n2"), ["c"]);
    }
}
