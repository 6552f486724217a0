//! The watch cache: every object of every resource but events (see [`crate::uncached`]) in
//! memory, kept current by one store watch, so that lists and watches are served without
//! touching the store.
//!
//! One store watch covers all of `/registry/`; its events are demultiplexed to one
//! [`ResourceCache`] per storage prefix. Because every store revision under `/registry/` passes
//! through here, the cache knows exactly which store revision it reflects, and a consistent read
//! only waits until the cache has reached the store's current revision.
//!
//! Each resource keeps a window of recent events so a watch can start from a recent
//! resourceVersion; older ones answer 410 Gone. Watchers get events through bounded queues: one
//! that falls behind is dropped (its client re-lists) and never delays the others. Pod watchers
//! filtering on `spec.nodeName` are indexed by node, so a node's watcher costs nothing when other
//! nodes' pods change.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use api::selectors::{FieldSelector, LabelSelector};
use api::ResourceInfo;
use bytes::Bytes;
use parking_lot::RwLock;
use serde_json::Value;
use store::client::Client;
use store::types::{EventKind, KeyRange, KeyValue, RangeRequest, WatchRequest, WatchResponse};
use tokio::sync::{mpsc, watch};
use tracing::{info, warn};

use crate::errors::ApiError;
use crate::meta;
use crate::shared_read::SharedRead;
use crate::stored;

/// Fields kept per object for field selectors, by storage segment.
fn selectable_fields(storage: &str) -> &'static [&'static str] {
    match storage {
        "pods" => &[
            "spec.nodeName",
            "status.phase",
            "spec.schedulerName",
            "spec.restartPolicy",
            "status.podIP",
            "spec.serviceAccountName",
        ],
        "minions" => &["spec.unschedulable"],
        "events" => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        "namespaces" => &["status.phase"],
        "secrets" => &["type"],
        _ => &[],
    }
}

/// One object as the cache holds it: its JSON (with resourceVersion set) and what filters need.
#[derive(Debug)]
pub struct CachedObject {
    pub key: String,
    pub name: String,
    pub namespace: Option<String>,
    pub rv: i64,
    pub json: Bytes,
    pub labels: CachedLabels,
    /// The selectable fields' rendered values, for [`FieldSelector::matches_with`].
    pub fields: SelectableFields,
}

/// An object's labels, sorted by key, in one allocation (a `BTreeMap` spends a ~540-byte node
/// on a pod's two labels).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CachedLabels(Box<[(Box<str>, Box<str>)]>);

impl CachedLabels {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .binary_search_by(|(k, _)| k.as_ref().cmp(key))
            .ok()
            .map(|at| self.0[at].1.as_ref())
    }
}

impl FromIterator<(String, String)> for CachedLabels {
    fn from_iter<I: IntoIterator<Item = (String, String)>>(pairs: I) -> CachedLabels {
        // Collected through a map so that a repeated key keeps its last value, as before.
        let sorted: BTreeMap<String, String> = pairs.into_iter().collect();
        CachedLabels(
            sorted
                .into_iter()
                .map(|(k, v)| (k.into_boxed_str(), v.into_boxed_str()))
                .collect(),
        )
    }
}

impl api::selectors::Labels for CachedLabels {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key)
    }
}

/// The rendered values of a storage's [`selectable_fields`], in that order (`""` when absent).
///
/// Kept as flat strings rather than a small JSON object: a `serde_json::Value` tree of a pod's
/// six fields costs about 3 KB (a B-tree node of ~640 bytes per map, four maps, plus every key),
/// and the cache holds one per object and per retained event version — most of the API server's
/// memory per pod before this.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectableFields {
    paths: &'static [&'static str],
    values: Box<[Box<str>]>,
}

impl SelectableFields {
    fn new(storage: &str, value: impl Fn(&str) -> String) -> SelectableFields {
        let paths = selectable_fields(storage);
        SelectableFields {
            paths,
            values: paths.iter().map(|p| value(p).into_boxed_str()).collect(),
        }
    }

    /// The rendered value at `path` (`source.component` for an event's `source`), if kept.
    pub fn get(&self, path: &str) -> Option<&str> {
        let at = self
            .paths
            .iter()
            .position(|p| *p == path || (*p == "source" && path == "source.component"))?;
        Some(&self.values[at])
    }
}

impl CachedObject {
    /// Builds the cached form of a stored value at revision `rv`.
    pub fn decode(
        storage: &str,
        key: &str,
        value: &[u8],
        rv: i64,
    ) -> Result<CachedObject, serde_json::Error> {
        if let Some(object) = CachedObject::from_stored(storage, key, value, rv) {
            return Ok(object);
        }
        let mut object: Value = serde_json::from_slice(value)?;
        meta::set_resource_version(&mut object, rv);
        Ok(CachedObject::from_value(storage, key, &object, rv))
    }

    /// [`CachedObject::decode`] without decoding the whole object (see [`stored`]); `None` when
    /// the bytes are not the compact, keyed-by-metadata JSON the API server writes.
    fn from_stored(storage: &str, key: &str, value: &[u8], rv: i64) -> Option<CachedObject> {
        let text = std::str::from_utf8(value).ok()?;
        let top = stored::Members::parse(text)?;
        // Written before the store held kube-apiserver's field order (keys sorted): re-encoded.
        if top
            .entries
            .first()
            .is_some_and(|(key, _)| key == "apiVersion")
        {
            return None;
        }
        let json = stored::stamp_parsed(text, &top, rv)?;
        let metadata = stored::Members::parse(top.get("metadata")?)?;
        let string = |raw: Option<&str>| match raw.map(stored::decode_raw) {
            Some(Value::String(s)) => Some(s),
            _ => None,
        };
        let name = string(metadata.get("name")).unwrap_or_default();
        let namespace = string(metadata.get("namespace")).filter(|s| !s.is_empty());
        let labels = match metadata.get("labels").map(stored::decode_raw) {
            Some(Value::Object(m)) => m
                .into_iter()
                .filter_map(|(k, v)| match v {
                    Value::String(v) => Some((k, v)),
                    _ => None,
                })
                .collect(),
            _ => CachedLabels::default(),
        };
        // Each selectable field's parent (`spec`, `status`, `involvedObject`) is split into its
        // members once, not once per field.
        let paths = selectable_fields(storage);
        let mut parents: Vec<(&str, Option<stored::Members<'_>>)> = Vec::new();
        let mut rendered = Vec::with_capacity(paths.len());
        for path in paths {
            let path = if *path == "source" {
                "source.component"
            } else {
                path
            };
            let raw = match path.split_once('.') {
                Some((parent, rest)) if !rest.contains('.') => {
                    let at = match parents.iter().position(|(p, _)| *p == parent) {
                        Some(at) => at,
                        None => {
                            let members = top.get(parent).and_then(stored::Members::parse);
                            parents.push((parent, members));
                            parents.len() - 1
                        }
                    };
                    parents[at].1.as_ref().and_then(|m| m.get(rest))
                }
                _ => stored::raw_at(&top, path),
            };
            rendered.push(match raw.map(stored::decode_raw) {
                Some(v) => render_field(&v, path == "source.component"),
                None => String::new(),
            });
        }
        let fields = SelectableFields {
            paths,
            values: rendered.into_iter().map(String::into_boxed_str).collect(),
        };
        Some(CachedObject {
            key: key.to_string(),
            name,
            namespace,
            rv,
            json: Bytes::from(json),
            labels,
            fields,
        })
    }

    pub fn from_value(storage: &str, key: &str, object: &Value, rv: i64) -> CachedObject {
        let labels = meta::labels(object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        let fields = SelectableFields::new(storage, |path| field_value(object, path));
        CachedObject {
            key: key.to_string(),
            name: meta::name(object).to_string(),
            namespace: meta::namespace(object).map(str::to_string),
            rv,
            json: Bytes::from(crate::go_json::to_vec(object)),
            labels,
            fields,
        }
    }

    /// The same object stamped with another resourceVersion (a deletion's).
    pub(crate) fn restamped(&self, rv: i64) -> CachedObject {
        let json = match stored::stamp(&self.json, rv) {
            Some(json) => json,
            None => {
                let mut object: Value = serde_json::from_slice(&self.json).unwrap_or(Value::Null);
                meta::set_resource_version(&mut object, rv);
                crate::go_json::to_vec(&object)
            }
        };
        CachedObject {
            key: self.key.clone(),
            name: self.name.clone(),
            namespace: self.namespace.clone(),
            rv,
            json: Bytes::from(json),
            labels: self.labels.clone(),
            fields: self.fields.clone(),
        }
    }

    pub fn node_name(&self) -> &str {
        self.fields.get("spec.nodeName").unwrap_or("")
    }

    /// Whether the object satisfies a field selector: `metadata.name`, `metadata.namespace` and
    /// the storage's selectable fields, as Kubernetes' field sets render them.
    pub fn matches_fields(&self, selector: &FieldSelector) -> bool {
        selector.matches_with(|path| {
            match path {
                "metadata.name" => Some(self.name.as_str()),
                "metadata.namespace" => Some(self.namespace.as_deref().unwrap_or("")),
                _ => self.fields.get(path),
            }
            .map(Cow::Borrowed)
        })
    }

    pub fn value(&self) -> Result<Value, ApiError> {
        serde_json::from_slice(&self.json)
            .map_err(|e| ApiError::internal(format!("cached object does not decode: {e}")))
    }
}

/// A selectable field's value as Kubernetes' field sets render it.
fn field_value(object: &Value, path: &str) -> String {
    if path == "source" {
        return meta::str_at(object, "source.component")
            .unwrap_or("")
            .to_string();
    }
    let mut current = object;
    for part in path.split('.') {
        match current.get(part) {
            Some(v) => current = v,
            None => return String::new(),
        }
    }
    render_field(current, false)
}

/// A scalar as a field set shows it; `only_strings` for fields read as strings only.
fn render_field(value: &Value, only_strings: bool) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Bool(b) if !only_strings => b.to_string(),
        Value::Number(n) if !only_strings => n.to_string(),
        _ => String::new(),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change to one object.
#[derive(Debug)]
pub struct CacheEvent {
    pub rv: i64,
    pub kind: EventType,
    /// The new object; for a deletion, the last state stamped with the deletion's revision.
    pub object: Arc<CachedObject>,
    pub prev: Option<Arc<CachedObject>>,
}

/// What a watcher receives.
#[derive(Debug, Clone)]
pub struct WatchItem {
    pub kind: EventType,
    pub object: Arc<CachedObject>,
}

/// Which objects a watch or list wants.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub namespace: Option<String>,
    pub labels: Option<LabelSelector>,
    pub fields: Option<FieldSelector>,
}

impl Filter {
    pub fn matches(&self, object: &CachedObject) -> bool {
        if let Some(ns) = &self.namespace {
            if object.namespace.as_deref() != Some(ns.as_str()) {
                return false;
            }
        }
        if let Some(labels) = &self.labels {
            if !labels.matches(&object.labels) {
                return false;
            }
        }
        if let Some(fields) = &self.fields {
            if !object.matches_fields(fields) {
                return false;
            }
        }
        true
    }

    /// The node a pod watch is limited to, if it says `spec.nodeName=X`.
    fn node(&self) -> Option<&str> {
        self.fields.as_ref().and_then(|f| f.exact("spec.nodeName"))
    }
}

struct Watcher {
    filter: Filter,
    tx: mpsc::Sender<WatchItem>,
}

struct CacheState {
    objects: BTreeMap<String, Arc<CachedObject>>,
    events: VecDeque<Arc<CacheEvent>>,
    /// Watches may start at any revision >= this one.
    oldest: i64,
    watchers: HashMap<u64, Watcher>,
    general: Vec<u64>,
    by_node: HashMap<String, Vec<u64>>,
}

/// The cache of one storage prefix.
pub struct ResourceCache {
    pub storage: &'static str,
    prefix: String,
    capacity: usize,
    state: RwLock<CacheState>,
    /// Counts the changes applied (each event and each reset), so that what is derived from
    /// the objects (the served CustomResourceDefinitions) knows when to derive again.
    changes: AtomicU64,
}

static NEXT_WATCHER: AtomicU64 = AtomicU64::new(1);

/// A registered watch: the events to replay first, then live ones.
pub struct Subscription {
    pub initial: Vec<WatchItem>,
    pub live: mpsc::Receiver<WatchItem>,
    pub revision: i64,
    source: Source,
}

/// Where a subscription's live events come from.
enum Source {
    /// A watcher registered with a resource's cache.
    Cache { id: u64, cache: Arc<ResourceCache> },
    /// A store watch of its own, forwarded by a task (a resource the cache does not hold); the
    /// task records the revision up to which it has queued every event.
    Store {
        covered: Arc<AtomicI64>,
        forwarder: tokio::task::AbortHandle,
    },
}

impl Subscription {
    /// A subscription fed by its own store watch (see [`crate::uncached`]).
    pub(crate) fn from_store(
        initial: Vec<WatchItem>,
        live: mpsc::Receiver<WatchItem>,
        revision: i64,
        covered: Arc<AtomicI64>,
        forwarder: tokio::task::AbortHandle,
    ) -> Subscription {
        Subscription {
            initial,
            live,
            revision,
            source: Source::Store { covered, forwarder },
        }
    }

    /// The revision up to which every event of this watch has been queued to `live`, given the
    /// watch cache's revision `cache_revision` (which is that revision for cached resources).
    pub fn covered(&self, cache_revision: i64) -> i64 {
        match &self.source {
            Source::Cache { .. } => cache_revision,
            Source::Store { covered, .. } => covered.load(Ordering::Acquire),
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        match &self.source {
            Source::Cache { id, cache } => cache.unregister(*id),
            Source::Store { forwarder, .. } => forwarder.abort(),
        }
    }
}

impl ResourceCache {
    fn new(storage: &'static str, capacity: usize) -> ResourceCache {
        ResourceCache {
            storage,
            prefix: format!("/registry/{storage}/"),
            capacity,
            changes: AtomicU64::new(0),
            state: RwLock::new(CacheState {
                objects: BTreeMap::new(),
                events: VecDeque::new(),
                oldest: 0,
                watchers: HashMap::new(),
                general: Vec::new(),
                by_node: HashMap::new(),
            }),
        }
    }

    /// Objects under `prefix` (a namespace's or all) matching `filter`, in key order, starting
    /// after `start_after`, at most `limit` (0 = all). Returns the objects and, when cut short,
    /// the last key returned.
    pub fn list(
        &self,
        key_prefix: &str,
        filter: &Filter,
        start_after: Option<&str>,
        limit: usize,
    ) -> (Vec<Arc<CachedObject>>, Option<String>) {
        let state = self.state.read();
        let lower = match start_after {
            Some(k) => std::ops::Bound::Excluded(k.to_string()),
            None => std::ops::Bound::Included(key_prefix.to_string()),
        };
        let mut out = Vec::new();
        for (key, object) in state.objects.range((lower, std::ops::Bound::Unbounded)) {
            if !key.starts_with(key_prefix) {
                break;
            }
            if !filter.matches(object) {
                continue;
            }
            if limit > 0 && out.len() == limit {
                let last = out.last().map(|o: &Arc<CachedObject>| o.key.clone());
                return (out, last);
            }
            out.push(object.clone());
        }
        (out, None)
    }

    pub fn get(&self, key: &str) -> Option<Arc<CachedObject>> {
        self.state.read().objects.get(key).cloned()
    }

    /// Registers a watcher. With `from = Some(rv)`, replays buffered events after `rv` (410 if
    /// they are no longer buffered); with `None`, replays the current state as ADDED events.
    pub fn subscribe(
        self: &Arc<Self>,
        filter: Filter,
        from: Option<i64>,
        revision: i64,
        buffer: usize,
    ) -> Result<Subscription, ApiError> {
        let mut state = self.state.write();
        let initial = match from {
            Some(rv) => {
                if rv < state.oldest {
                    return Err(ApiError::Gone {
                        message: format!("too old resource version: {rv} ({})", state.oldest),
                    });
                }
                let start = state.events.partition_point(|e| e.rv <= rv);
                state
                    .events
                    .iter()
                    .skip(start)
                    .filter_map(|e| convert(&filter, e))
                    .collect()
            }
            None => state
                .objects
                .values()
                .filter(|o| filter.matches(o))
                .map(|o| WatchItem {
                    kind: EventType::Added,
                    object: o.clone(),
                })
                .collect(),
        };
        let (tx, live) = mpsc::channel(buffer.max(16));
        let id = NEXT_WATCHER.fetch_add(1, Ordering::Relaxed);
        match filter.node() {
            Some(node) if self.storage == "pods" => {
                state.by_node.entry(node.to_string()).or_default().push(id)
            }
            _ => state.general.push(id),
        }
        state.watchers.insert(id, Watcher { filter, tx });
        Ok(Subscription {
            initial,
            live,
            revision,
            source: Source::Cache {
                id,
                cache: self.clone(),
            },
        })
    }

    fn unregister(&self, id: u64) {
        let mut state = self.state.write();
        remove_watcher(&mut state, id);
    }

    pub fn watcher_count(&self) -> usize {
        self.state.read().watchers.len()
    }

    pub fn object_count(&self) -> usize {
        self.state.read().objects.len()
    }

    /// How many changes this cache has applied; equal counts mean equal contents.
    pub fn changes(&self) -> u64 {
        self.changes.load(Ordering::Acquire)
    }

    /// Replaces the whole state (initial list, or a re-list after falling behind); every watcher
    /// is dropped, since it cannot be told what happened in between.
    fn reset(&self, objects: Vec<CachedObject>, revision: i64) {
        let mut state = self.state.write();
        state.objects = objects
            .into_iter()
            .map(|o| (o.key.clone(), Arc::new(o)))
            .collect();
        state.events.clear();
        state.oldest = revision;
        state.watchers.clear();
        state.general.clear();
        state.by_node.clear();
        self.changes.fetch_add(1, Ordering::AcqRel);
    }

    /// Applies one store event.
    fn apply(&self, kind: EventKind, kv: &KeyValue) {
        let key = String::from_utf8_lossy(&kv.key).into_owned();
        let rv = kv.mod_revision;
        // Decoded before taking the lock, so readers wait only for the bookkeeping.
        let decoded = match kind {
            EventKind::Put => Some(CachedObject::decode(self.storage, &key, &kv.value, rv)),
            EventKind::Delete => None,
        };
        let mut state = self.state.write();
        let prev = state.objects.get(&key).cloned();
        let event = match decoded {
            Some(decoded) => match decoded {
                Ok(object) => {
                    let object = Arc::new(object);
                    state.objects.insert(key, object.clone());
                    let kind = if prev.is_some() {
                        EventType::Modified
                    } else {
                        EventType::Added
                    };
                    CacheEvent {
                        rv,
                        kind,
                        object,
                        prev,
                    }
                }
                Err(e) => {
                    warn!(key, error = %e, "skipping a stored object that is not JSON");
                    return;
                }
            },
            None => {
                state.objects.remove(&key);
                let Some(prev) = prev else { return };
                CacheEvent {
                    rv,
                    kind: EventType::Deleted,
                    object: Arc::new(prev.restamped(rv)),
                    prev: Some(prev),
                }
            }
        };
        let event = Arc::new(event);
        self.changes.fetch_add(1, Ordering::AcqRel);
        state.events.push_back(event.clone());
        while state.events.len() > self.capacity {
            if let Some(evicted) = state.events.pop_front() {
                state.oldest = evicted.rv;
            }
        }
        // Watchers that cannot take the event are dropped; their clients re-list.
        let mut dropped = Vec::new();
        let mut deliver = |id: u64, state: &CacheState| {
            if let Some(w) = state.watchers.get(&id) {
                if let Some(item) = convert(&w.filter, &event) {
                    if w.tx.try_send(item).is_err() {
                        dropped.push(id);
                    }
                }
            }
        };
        for id in &state.general {
            deliver(*id, &state);
        }
        if self.storage == "pods" {
            let node = event.object.node_name();
            if let Some(ids) = state.by_node.get(node) {
                for id in ids {
                    deliver(*id, &state);
                }
            }
            if let Some(prev) = &event.prev {
                let old_node = prev.node_name();
                if old_node != node {
                    if let Some(ids) = state.by_node.get(old_node) {
                        for id in ids {
                            deliver(*id, &state);
                        }
                    }
                }
            }
        }
        for id in dropped {
            warn!(
                storage = self.storage,
                watcher = id,
                "dropping a watcher that fell behind"
            );
            remove_watcher(&mut state, id);
        }
    }
}

fn remove_watcher(state: &mut CacheState, id: u64) {
    if state.watchers.remove(&id).is_none() {
        return;
    }
    state.general.retain(|w| *w != id);
    state.by_node.retain(|_, ids| {
        ids.retain(|w| *w != id);
        !ids.is_empty()
    });
}

/// What a watcher with `filter` sees of `event`: objects entering or leaving the filter appear
/// as ADDED or DELETED.
pub(crate) fn convert(filter: &Filter, event: &Arc<CacheEvent>) -> Option<WatchItem> {
    let new_matches = event.kind != EventType::Deleted && filter.matches(&event.object);
    let old_matches = event.prev.as_ref().is_some_and(|p| filter.matches(p));
    let kind = match (event.kind, old_matches, new_matches) {
        (EventType::Deleted, true, _) => EventType::Deleted,
        (EventType::Deleted, false, _) => return None,
        (_, true, true) => EventType::Modified,
        (_, false, true) => EventType::Added,
        (_, true, false) => {
            let prev = event.prev.as_ref()?;
            return Some(WatchItem {
                kind: EventType::Deleted,
                object: Arc::new(prev.restamped(event.rv)),
            });
        }
        (_, false, false) => return None,
    };
    Some(WatchItem {
        kind,
        object: event.object.clone(),
    })
}

/// All resource caches, and the store watch feeding them.
pub struct WatchCache {
    caches: Vec<Arc<ResourceCache>>,
    revision: watch::Sender<i64>,
    client: Client,
    /// The store's current revision, one read shared by the requests that wait for it.
    store_revision: SharedRead<Result<i64, ApiError>>,
}

/// How many events each resource keeps for watches that start in the past.
pub const DEFAULT_WINDOW: usize = 100_000;

impl WatchCache {
    /// Lists everything, then starts the store watch in the background.
    pub async fn start(client: Client, window: usize) -> Result<Arc<WatchCache>, ApiError> {
        let mut storages: Vec<&'static str> = api::RESOURCES
            .iter()
            .filter(|r| r.is_stored())
            .map(|r| r.storage)
            .filter(|s| !crate::uncached::STORAGES.contains(s))
            .collect();
        storages.sort();
        storages.dedup();
        let caches = storages
            .into_iter()
            .map(|s| Arc::new(ResourceCache::new(s, window)))
            .collect();
        let (revision, _) = watch::channel(0);
        let reader = client.clone();
        let store_revision = SharedRead::new(move || {
            let client = reader.clone();
            async move {
                let request = RangeRequest {
                    range: KeyRange::single("/registry/"),
                    ..Default::default()
                };
                Ok(client.range(request).await?.header.revision)
            }
        });
        let cache = Arc::new(WatchCache {
            caches,
            revision,
            client,
            store_revision,
        });
        let start = cache.relist().await?;
        let runner = cache.clone();
        tokio::spawn(async move { runner.follow(start).await });
        Ok(cache)
    }

    /// Reads every resource at one store revision and resets the caches to it.
    async fn relist(&self) -> Result<i64, ApiError> {
        let mut revision = 0;
        let mut lists = Vec::new();
        for cache in &self.caches {
            let mut objects = Vec::new();
            let mut start = cache.prefix.clone().into_bytes();
            let end = store::types::prefix_end(cache.prefix.as_bytes());
            loop {
                let request = RangeRequest {
                    range: KeyRange {
                        key: start.clone().into(),
                        range_end: end.clone(),
                    },
                    limit: 2000,
                    revision,
                    ..Default::default()
                };
                let response = self.client.range(request).await?;
                if revision == 0 {
                    revision = response.header.revision;
                }
                for kv in &response.kvs {
                    let key = String::from_utf8_lossy(&kv.key);
                    match CachedObject::decode(cache.storage, &key, &kv.value, kv.mod_revision) {
                        Ok(o) => objects.push(o),
                        Err(e) => {
                            warn!(%key, error = %e, "skipping a stored object that is not JSON")
                        }
                    }
                }
                match (response.more, response.kvs.last()) {
                    (true, Some(last)) => {
                        let mut next = last.key.to_vec();
                        next.push(0);
                        start = next;
                    }
                    _ => break,
                }
            }
            lists.push(objects);
        }
        for (cache, objects) in self.caches.iter().zip(lists) {
            info!(
                storage = cache.storage,
                objects = objects.len(),
                revision,
                "watch cache listed"
            );
            cache.reset(objects, revision);
        }
        self.revision.send_replace(revision);
        Ok(revision)
    }

    /// Follows the store from `revision` on, forever; re-lists if the store compacted past us.
    async fn follow(self: Arc<Self>, mut revision: i64) {
        loop {
            let request = WatchRequest {
                range: KeyRange::prefix("/registry/"),
                start_revision: revision + 1,
                prev_kv: false,
                progress_notify_secs: 1,
            };
            let mut stream = match self.client.watch(request).await {
                Ok(s) => s,
                Err(e) => {
                    warn!(error = %e, "cannot open the store watch; retrying");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            };
            loop {
                match stream.next().await {
                    Some(Ok(WatchResponse::Events { header, events })) => {
                        for event in &events {
                            if let Some(cache) = self.cache_for_key(&event.kv.key) {
                                cache.apply(event.kind, &event.kv);
                            }
                        }
                        let last = events.last().map(|e| e.kv.mod_revision).unwrap_or(0);
                        revision = revision.max(last).max(header.revision);
                        self.revision.send_replace(revision);
                    }
                    Some(Ok(WatchResponse::Progress { header })) => {
                        revision = revision.max(header.revision);
                        self.revision.send_replace(revision);
                    }
                    Some(Ok(WatchResponse::Created { .. })) => {}
                    Some(Ok(WatchResponse::Canceled { reason, .. })) => {
                        warn!(reason, "store watch canceled; re-listing");
                        break;
                    }
                    Some(Err(e)) => {
                        warn!(error = %e, "store watch failed; re-listing");
                        break;
                    }
                    None => break,
                }
            }
            loop {
                match self.relist().await {
                    Ok(r) => {
                        revision = r;
                        break;
                    }
                    Err(e) => {
                        warn!(error = %e, "re-list failed; retrying");
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                }
            }
        }
    }

    fn cache_for_key(&self, key: &[u8]) -> Option<&Arc<ResourceCache>> {
        // Longest prefix wins ("services/specs/" vs a hypothetical "services/").
        self.caches
            .iter()
            .filter(|c| key.starts_with(c.prefix.as_bytes()))
            .max_by_key(|c| c.prefix.len())
    }

    pub fn resource(&self, resource: &ResourceInfo) -> Option<&Arc<ResourceCache>> {
        self.caches.iter().find(|c| c.storage == resource.storage)
    }

    /// The store revision the caches reflect.
    pub fn revision(&self) -> i64 {
        *self.revision.borrow()
    }

    /// Waits until the caches reflect at least `revision`.
    pub async fn wait_for(&self, revision: i64, timeout: Duration) -> Result<(), ApiError> {
        let mut rx = self.revision.subscribe();
        let reached = tokio::time::timeout(timeout, async {
            rx.wait_for(|r| *r >= revision).await.is_ok()
        })
        .await;
        if reached == Ok(true) {
            return Ok(());
        }
        Err(ApiError::Timeout {
            message: format!("Too large resource version: {revision}, the cache is behind"),
        })
    }

    /// The store's current revision (a linearizable read), for consistent reads from the cache.
    /// Requests that ask at the same time share one read that started after each of them
    /// asked (see [`SharedRead`]).
    pub async fn current_store_revision(&self) -> Result<i64, ApiError> {
        self.store_revision.get().await.unwrap_or_else(|| {
            Err(ApiError::Unavailable {
                message: "storage unavailable: the revision read failed".into(),
            })
        })
    }

    /// How many revision reads the consistent reads have made of the store, and how many
    /// requests asked for one.
    pub fn store_revision_reads(&self) -> (u64, u64) {
        (self.store_revision.reads(), self.store_revision.asked())
    }

    pub fn watcher_count(&self) -> usize {
        self.caches.iter().map(|c| c.watcher_count()).sum()
    }

    pub fn caches(&self) -> &[Arc<ResourceCache>] {
        &self.caches
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn by_value(storage: &str, object: &Value, rv: i64) -> CachedObject {
        let mut object = object.clone();
        meta::set_resource_version(&mut object, rv);
        CachedObject::from_value(storage, "k", &object, rv)
    }

    fn same(a: &CachedObject, b: &CachedObject) {
        assert_eq!(a.json, b.json);
        assert_eq!(a.name, b.name);
        assert_eq!(a.namespace, b.namespace);
        assert_eq!(a.rv, b.rv);
        assert_eq!(a.labels, b.labels);
        assert_eq!(a.fields, b.fields);
    }

    #[test]
    fn stored_objects_decode_as_their_values_do() {
        let cases = [
            (
                "pods",
                json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "namespace": "n", "labels": {"app": "a", "bad": 1}, "uid": "u"},
                "spec": {"nodeName": "node-1", "restartPolicy": "Always", "containers": [{"name": "c"}]},
                "status": {"phase": "Running", "podIP": "10.0.0.1"}}),
            ),
            (
                "pods",
                json!({"metadata": {"name": "p", "namespace": ""}, "spec": {"nodeName": 5}}),
            ),
            (
                "minions",
                json!({"metadata": {"name": "n"}, "spec": {"unschedulable": true}}),
            ),
            (
                "minions",
                json!({"metadata": {"name": "n", "labels": []}, "spec": []}),
            ),
            (
                "events",
                json!({"metadata": {"name": "e", "namespace": "n"},
                "involvedObject": {"kind": "Pod", "name": "p", "resourceVersion": "3"},
                "reason": "Scheduled", "source": {"component": "sched", "host": "h"}, "type": "Normal"}),
            ),
            (
                "events",
                json!({"metadata": {"name": "e"}, "source": {"component": 1}, "type": true}),
            ),
            (
                "configmaps",
                json!({"metadata": {"name": "c", "namespace": "n"}, "data": {"a": "b"}}),
            ),
        ];
        for (storage, object) in &cases {
            let stored = crate::storage::Storage::encode(object).expect("encodes");
            let fast = CachedObject::from_stored(storage, "k", &stored, 9).expect("fast path");
            same(&fast, &by_value(storage, object, 9));
            same(&fast.restamped(12), &by_value(storage, object, 12));
        }
    }

    /// The cached selectable fields answer every field selector as the whole object does.
    #[test]
    fn cached_fields_select_as_the_whole_object() {
        let pod = json!({"metadata": {"name": "p", "namespace": "n", "labels": {"app": "a"}},
            "spec": {"nodeName": "node-1", "restartPolicy": "Always", "schedulerName": "s",
                "serviceAccountName": "sa"},
            "status": {"phase": "Running", "podIP": "10.0.0.1"}});
        let event = json!({"metadata": {"name": "e", "namespace": "n"},
            "involvedObject": {"kind": "Pod", "name": "p", "uid": "u", "resourceVersion": "3"},
            "reason": "Scheduled", "reportingComponent": "sched",
            "source": {"component": "sched", "host": "h"}, "type": "Normal"});
        let selectors = [
            "metadata.name=p",
            "metadata.name!=p",
            "metadata.namespace=n",
            "metadata.namespace=",
            "spec.nodeName=node-1",
            "spec.nodeName=node-2",
            "spec.nodeName!=",
            "status.phase=Running,spec.restartPolicy=Always",
            "status.podIP=10.0.0.1",
            "spec.schedulerName=s,spec.serviceAccountName=sa",
            "spec.hostNetwork=false",
            "involvedObject.name=p",
            "regarding.name=p",
            "regarding.uid=u,involvedObject.resourceVersion=3",
            "involvedObject.fieldPath=",
            "reason=Scheduled",
            "reportingController=sched",
            "source=sched",
            "deprecatedSource=sched",
            "type!=Warning",
        ];
        for (storage, object) in [("pods", &pod), ("events", &event)] {
            let stored = serde_json::to_vec(object).expect("encodes");
            let cached = CachedObject::decode(storage, "k", &stored, 5).expect("decodes");
            let mut whole = object.clone();
            meta::set_resource_version(&mut whole, 5);
            for text in selectors {
                let selector = FieldSelector::parse(text).expect("parses");
                assert_eq!(
                    cached.matches_fields(&selector),
                    selector.matches(&whole),
                    "{storage}: {text}"
                );
            }
            assert_eq!(
                cached.labels.get("app"),
                object
                    .pointer("/metadata/labels/app")
                    .and_then(Value::as_str)
            );
        }
        let cached =
            CachedObject::decode("pods", "k", &serde_json::to_vec(&pod).expect("encodes"), 5)
                .expect("decodes");
        assert!(cached.matches_fields(
            &FieldSelector::parse("spec.nodeName=node-1,status.phase=Running").expect("parses")
        ));
        assert_eq!(cached.node_name(), "node-1");
    }

    #[test]
    fn odd_stored_bytes_still_decode() {
        let spaced =
            br#"{ "metadata" : { "name" : "p", "namespace":"n" }, "spec": {"nodeName": "x"} }"#;
        let decoded = CachedObject::decode("pods", "k", spaced, 4).expect("decodes");
        assert_eq!(decoded.node_name(), "x");
        assert_eq!(
            decoded.value().expect("json")["metadata"]["resourceVersion"],
            "4"
        );
        assert!(CachedObject::decode("pods", "k", b"nope", 4).is_err());
    }
}
