//! Lists and watches of resources the watch cache does not hold, served by the store itself.
//!
//! kube-apiserver keeps no watch cache for events (its default `--watch-cache-sizes` sets
//! `events#0`): they are written several times per pod, live an hour, and are rarely read, so
//! holding every one of them in every API server's memory buys little. The same holds here:
//! four events per pod were about a third of the API server's memory per pod, and every API
//! server decoded each of them from its store watch. Reads of these resources go to the store
//! (a get or a list is a linearizable range; a continued list reads at its first page's
//! revision), and each watch opens a store watch of its own.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use store::client::{Client, WatchStream};
use store::types::{Event, EventKind, KeyRange, RangeRequest, WatchRequest, WatchResponse};
use tokio::sync::mpsc;
use tracing::{debug, warn};

use crate::errors::ApiError;
use crate::watch_cache::{
    convert, CacheEvent, CachedObject, EventType, Filter, Subscription, WatchItem,
};

/// The storages the watch cache leaves out, as kube-apiserver's default does.
pub const STORAGES: &[&str] = &["events"];

/// Keys read per store range while listing.
const PAGE: i64 = 1000;

/// One page of a list read from the store.
pub struct StoreList {
    pub items: Vec<Arc<CachedObject>>,
    /// The store revision the list reflects.
    pub revision: i64,
    /// The last key returned, when `limit` cut the list short.
    pub last: Option<String>,
}

/// Objects under `prefix` matching `filter`, in key order: from the start, or after the key of
/// a continued list and at its revision. At most `limit` (0 = all).
pub async fn list(
    client: &Client,
    storage: &str,
    prefix: &str,
    filter: &Filter,
    continued: Option<(String, i64)>,
    limit: usize,
) -> Result<StoreList, ApiError> {
    let end = store::types::prefix_end(prefix.as_bytes());
    let (mut start, mut revision) = match continued {
        Some((key, revision)) => {
            let mut after = key.into_bytes();
            after.push(0);
            (after, revision)
        }
        None => (prefix.as_bytes().to_vec(), 0),
    };
    let mut items = Vec::new();
    loop {
        let response = client
            .range(RangeRequest {
                range: KeyRange {
                    key: start.clone().into(),
                    range_end: end.clone(),
                },
                limit: PAGE,
                revision,
                ..Default::default()
            })
            .await?;
        if revision == 0 {
            revision = response.header.revision;
        }
        for (at, kv) in response.kvs.iter().enumerate() {
            let key = String::from_utf8_lossy(&kv.key);
            let object = match CachedObject::decode(storage, &key, &kv.value, kv.mod_revision) {
                Ok(o) => o,
                Err(e) => {
                    warn!(%key, error = %e, "skipping a stored object that is not JSON");
                    continue;
                }
            };
            if !filter.matches(&object) {
                continue;
            }
            items.push(Arc::new(object));
            let more = at + 1 < response.kvs.len() || response.more;
            if limit > 0 && items.len() == limit && more {
                return Ok(StoreList {
                    items,
                    revision,
                    last: Some(key.into_owned()),
                });
            }
        }
        match (response.more, response.kvs.last()) {
            (true, Some(last)) => {
                start = last.key.to_vec();
                start.push(0);
            }
            _ => break,
        }
    }
    Ok(StoreList {
        items,
        revision,
        last: None,
    })
}

/// Watches `prefix` through a store watch of its own: after `from`, or (with `None`) the
/// current state as ADDED events first, then what follows. A `from` the store has compacted
/// answers 410 Gone.
pub async fn watch(
    client: &Client,
    storage: &'static str,
    prefix: &str,
    filter: Filter,
    from: Option<i64>,
    buffer: usize,
) -> Result<Subscription, ApiError> {
    let (initial, revision) = match from {
        Some(rv) => (Vec::new(), rv),
        None => {
            let listed = list(client, storage, prefix, &filter, None, 0).await?;
            let items = listed
                .items
                .into_iter()
                .map(|object| WatchItem {
                    kind: EventType::Added,
                    object,
                })
                .collect();
            (items, listed.revision)
        }
    };
    let mut stream = client
        .watch(WatchRequest {
            range: KeyRange::prefix(prefix.to_string()),
            start_revision: revision + 1,
            prev_kv: true,
            progress_notify_secs: 1,
        })
        .await?;
    // The first message says whether the store can replay from there.
    let first = match stream.next().await {
        Some(Ok(WatchResponse::Canceled {
            compact_revision, ..
        })) if compact_revision > 0 => {
            return Err(ApiError::Gone {
                message: format!("too old resource version: {revision} ({compact_revision})"),
            })
        }
        Some(Ok(message)) => message,
        Some(Err(e)) => return Err(e.into()),
        None => return Err(ApiError::internal("the store ended a watch as it opened")),
    };
    let covered = Arc::new(AtomicI64::new(revision));
    let (tx, live) = mpsc::channel(buffer.max(16));
    let forwarder = Forwarder {
        storage,
        filter,
        covered: covered.clone(),
        tx,
    };
    let task = tokio::spawn(forwarder.run(first, stream));
    Ok(Subscription::from_store(
        initial,
        live,
        revision,
        covered,
        task.abort_handle(),
    ))
}

/// Turns one store watch's events into a client watch's items.
struct Forwarder {
    storage: &'static str,
    filter: Filter,
    covered: Arc<AtomicI64>,
    tx: mpsc::Sender<WatchItem>,
}

impl Forwarder {
    /// Runs until the client goes or the store watch ends (then the client's watch ends too,
    /// and it lists again, as after any watch that closes).
    async fn run(self, first: WatchResponse, mut stream: WatchStream) {
        let mut next = Some(first);
        loop {
            let message = match next.take() {
                Some(m) => m,
                None => match stream.next().await {
                    Some(Ok(m)) => m,
                    Some(Err(e)) => {
                        debug!(storage = self.storage, error = %e, "store watch failed");
                        return;
                    }
                    None => return,
                },
            };
            match message {
                WatchResponse::Events { header, events } => {
                    let mut last = header.revision;
                    for event in &events {
                        last = last.max(event.kv.mod_revision);
                        let Some(item) = self.item(event) else {
                            continue;
                        };
                        if self.tx.send(item).await.is_err() {
                            return;
                        }
                    }
                    self.covered.fetch_max(last, Ordering::AcqRel);
                }
                WatchResponse::Progress { header } => {
                    self.covered.fetch_max(header.revision, Ordering::AcqRel);
                }
                WatchResponse::Created { .. } => {}
                WatchResponse::Canceled { reason, .. } => {
                    debug!(storage = self.storage, reason, "store watch canceled");
                    return;
                }
            }
        }
    }

    /// What this watch's client sees of one store event, if anything.
    fn item(&self, event: &Event) -> Option<WatchItem> {
        let key = String::from_utf8_lossy(&event.kv.key);
        let rv = event.kv.mod_revision;
        let decode =
            |value: &[u8], rv: i64| match CachedObject::decode(self.storage, &key, value, rv) {
                Ok(o) => Some(Arc::new(o)),
                Err(e) => {
                    warn!(%key, error = %e, "skipping a stored object that is not JSON");
                    None
                }
            };
        let prev = event
            .prev_kv
            .as_ref()
            .and_then(|p| decode(&p.value, p.mod_revision));
        let cache_event = match event.kind {
            EventKind::Put => CacheEvent {
                rv,
                kind: if prev.is_some() {
                    EventType::Modified
                } else {
                    EventType::Added
                },
                object: decode(&event.kv.value, rv)?,
                prev,
            },
            EventKind::Delete => {
                let prev = prev?;
                CacheEvent {
                    rv,
                    kind: EventType::Deleted,
                    object: Arc::new(prev.restamped(rv)),
                    prev: Some(prev),
                }
            }
        };
        convert(&self.filter, &Arc::new(cache_event))
    }
}
