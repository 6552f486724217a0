//! [`EventSink`]: where a component's core/v1 Events go — queued, and sent a few dozen at a
//! time in one [`ApiRequest::CreateMany`](crate::protocol::ApiRequest::CreateMany) call instead
//! of one call each.
//!
//! Events are the most frequent write of a pod's start (the scheduler's `Scheduled`, the
//! kubelet's `Pulled`, `Created`, `Started`: four of its seven writes), and nobody waits for
//! one, so they can wait for company. As in Kubernetes, they are best effort: a failed or
//! refused event is logged and counted, never retried, and when the API server falls so far
//! behind that [`QUEUE`] events wait, new ones are dropped (and counted) rather than held in
//! memory without bound.
//!
//! Events given through [`EventSink::record_event`] first go through the sink's
//! [`EventCorrelator`], as client-go's legacy recorder does: a repeat becomes a patch of the
//! earlier event's `count` and `lastTimestamp` (sent after the creates of its batch, and only
//! the latest per event), and spam is dropped.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use chrono::Utc;
use k8s_openapi::api::core::v1::Event;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::{mpsc, Semaphore};
use tracing::debug;

use crate::client::{Client, Patch};
use crate::event_correlator::{Correlated, EventCorrelator};
use crate::protocol::NewObject;
use crate::ResourceInfo;

/// Events that may wait to be sent; beyond this, new events are dropped.
pub const QUEUE: usize = 16_384;
/// The most events one call carries.
pub const BATCH: usize = 256;
/// Calls in flight at once. A sink with one call out gathers the events arriving meanwhile for
/// the next; two keep a slow answer from stalling the queue.
pub const CALLS: usize = 2;

/// What became of the events given to a sink, for `/metrics`.
#[derive(Debug, Default)]
pub struct EventSinkStats {
    /// Stored by the API server.
    pub created: AtomicU64,
    /// Refused by the API server, or sent in a call that got no answer.
    pub failed: AtomicU64,
    /// Never sent: the queue was full, or the event did not encode.
    pub dropped: AtomicU64,
    /// Calls made.
    pub calls: AtomicU64,
    /// Repeats written as a patch of the earlier event.
    pub patched: AtomicU64,
    /// Dropped by the spam filter.
    pub filtered: AtomicU64,
}

/// What the sink sends.
#[derive(Debug)]
enum Outgoing {
    Create(NewObject),
    /// A repeat: `patch` for the event `name`, or `event` (the whole count) should it be gone.
    Patch {
        namespace: String,
        name: String,
        patch: Value,
        event: NewObject,
    },
}

/// A queue of events and the task that sends them. Cheap to clone; the task ends when every
/// clone is dropped (events still queued then are not sent).
#[derive(Clone, Debug)]
pub struct EventSink {
    queue: mpsc::Sender<Outgoing>,
    stats: Arc<EventSinkStats>,
    correlator: Arc<Mutex<EventCorrelator>>,
}

impl EventSink {
    /// A sink sending through `client`, counting into `stats` (the caller's metrics). Must be
    /// called inside a Tokio runtime.
    pub fn start(client: Client, stats: Arc<EventSinkStats>) -> EventSink {
        let (queue, waiting) = mpsc::channel(QUEUE);
        tokio::spawn(send_all(client, waiting, stats.clone()));
        EventSink {
            queue,
            stats,
            correlator: Arc::default(),
        }
    }

    /// Queues an Event object (JSON-serializable) for `namespace`.
    pub fn record(&self, namespace: &str, event: &impl Serialize) {
        if let Some(item) = self.encode(namespace, event) {
            self.send(Outgoing::Create(item));
        }
    }

    /// Correlates a new core/v1 Event (`count` 1, in its own namespace) with those recorded
    /// before, then queues its create, its patch, or nothing.
    pub fn record_event(&self, event: Event) {
        let correlated = match self.correlator.lock() {
            Ok(mut correlator) => correlator.correlate(event, Utc::now()),
            // A panic elsewhere left the tables half-written; they are only a cache.
            Err(poisoned) => {
                let mut correlator = poisoned.into_inner();
                *correlator = EventCorrelator::new();
                correlator.correlate(event, Utc::now())
            }
        };
        match correlated {
            Correlated::Skip => {
                self.stats.filtered.fetch_add(1, Ordering::Relaxed);
            }
            Correlated::Create(event) => {
                let namespace = event.metadata.namespace.clone().unwrap_or_default();
                self.record(&namespace, &event);
            }
            Correlated::Patch { event, patch } => {
                let namespace = event.metadata.namespace.clone().unwrap_or_default();
                let name = event.metadata.name.clone().unwrap_or_default();
                if let Some(item) = self.encode(&namespace, &event) {
                    self.send(Outgoing::Patch {
                        namespace,
                        name,
                        patch,
                        event: item,
                    });
                }
            }
        }
    }

    fn encode(&self, namespace: &str, event: &impl Serialize) -> Option<NewObject> {
        match serde_json::to_vec(event) {
            Ok(json) => Some(NewObject {
                namespace: Some(namespace.to_string()),
                object: Bytes::from(json),
            }),
            Err(e) => {
                debug!(error = %e, "cannot encode an event");
                self.stats.dropped.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    fn send(&self, item: Outgoing) {
        if self.queue.try_send(item).is_err() {
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Takes whatever has queued (up to [`BATCH`]) each time a call slot is free, and sends it:
/// the creates in one call, then the patches (the latest of each event) one call each.
async fn send_all(
    client: Client,
    mut waiting: mpsc::Receiver<Outgoing>,
    stats: Arc<EventSinkStats>,
) {
    let Some(events) = crate::resources::find("", "v1", "events") else {
        return;
    };
    let slots = Arc::new(Semaphore::new(CALLS));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let mut batch = Vec::with_capacity(BATCH);
        if waiting.recv_many(&mut batch, BATCH).await == 0 {
            return;
        }
        let client = client.clone();
        let stats = stats.clone();
        tokio::spawn(async move {
            let mut creates = Vec::with_capacity(batch.len());
            let mut patches: Vec<(String, String, Value, NewObject)> = Vec::new();
            for item in batch {
                match item {
                    Outgoing::Create(object) => creates.push(object),
                    Outgoing::Patch {
                        namespace,
                        name,
                        patch,
                        event,
                    } => {
                        // A later repeat carries the whole count: it replaces an earlier one.
                        patches.retain(|(ns, n, _, _)| !(*ns == namespace && *n == name));
                        patches.push((namespace, name, patch, event));
                    }
                }
            }
            if !creates.is_empty() {
                create_all(&client, events, creates, &stats).await;
            }
            for (namespace, name, patch, event) in patches {
                repeat(&client, events, &namespace, &name, patch, event, &stats).await;
            }
            drop(slot);
        });
    }
}

async fn create_all(
    client: &Client,
    events: &ResourceInfo,
    creates: Vec<NewObject>,
    stats: &EventSinkStats,
) {
    let count = creates.len() as u64;
    stats.calls.fetch_add(1, Ordering::Relaxed);
    match client.create_many(events, creates).await {
        Ok(outcomes) => {
            for outcome in outcomes {
                match outcome {
                    Ok(_) => stats.created.fetch_add(1, Ordering::Relaxed),
                    Err(e) => {
                        debug!(error = %e, "an event was refused");
                        stats.failed.fetch_add(1, Ordering::Relaxed)
                    }
                };
            }
        }
        Err(e) => {
            debug!(count, error = %e, "cannot record events");
            stats.failed.fetch_add(count, Ordering::Relaxed);
        }
    }
}

/// Writes a repeat as client-go does: patch the earlier event; if it is gone (expired, or its
/// create was lost), create it with the whole count. If that create finds the event after all
/// (its first create was still on the way), patch once more.
async fn repeat(
    client: &Client,
    events: &ResourceInfo,
    namespace: &str,
    name: &str,
    patch: Value,
    event: NewObject,
    stats: &EventSinkStats,
) {
    let patch = Patch::Strategic(patch);
    stats.calls.fetch_add(1, Ordering::Relaxed);
    let mut outcome = client
        .patch::<Value>(events, Some(namespace), name, &patch)
        .await
        .map(drop);
    if outcome.as_ref().is_err_and(|e| e.is_not_found()) {
        stats.calls.fetch_add(1, Ordering::Relaxed);
        outcome = match client.create_many(events, vec![event]).await {
            Ok(mut outcomes) => outcomes.pop().unwrap_or(Ok(String::new())).map(drop),
            Err(e) => Err(e),
        };
        if outcome.as_ref().is_err_and(|e| e.is_already_exists()) {
            stats.calls.fetch_add(1, Ordering::Relaxed);
            outcome = client
                .patch::<Value>(events, Some(namespace), name, &patch)
                .await
                .map(drop);
        }
    }
    match outcome {
        Ok(()) => stats.patched.fetch_add(1, Ordering::Relaxed),
        Err(e) => {
            debug!(error = %e, "cannot record a repeated event");
            stats.failed.fetch_add(1, Ordering::Relaxed)
        }
    };
}
