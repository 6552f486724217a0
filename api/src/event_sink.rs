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

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use serde::Serialize;
use tokio::sync::{mpsc, Semaphore};
use tracing::debug;

use crate::client::Client;
use crate::protocol::NewObject;

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
}

/// A queue of events and the task that sends them. Cheap to clone; the task ends when every
/// clone is dropped (events still queued then are not sent).
#[derive(Clone, Debug)]
pub struct EventSink {
    queue: mpsc::Sender<NewObject>,
    stats: Arc<EventSinkStats>,
}

impl EventSink {
    /// A sink sending through `client`, counting into `stats` (the caller's metrics). Must be
    /// called inside a Tokio runtime.
    pub fn start(client: Client, stats: Arc<EventSinkStats>) -> EventSink {
        let (queue, waiting) = mpsc::channel(QUEUE);
        tokio::spawn(send_all(client, waiting, stats.clone()));
        EventSink { queue, stats }
    }

    /// Queues an Event object (JSON-serializable) for `namespace`.
    pub fn record(&self, namespace: &str, event: &impl Serialize) {
        let object = match serde_json::to_vec(event) {
            Ok(json) => Bytes::from(json),
            Err(e) => {
                debug!(error = %e, "cannot encode an event");
                self.stats.dropped.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        let item = NewObject {
            namespace: Some(namespace.to_string()),
            object,
        };
        if self.queue.try_send(item).is_err() {
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Takes whatever has queued (up to [`BATCH`]) each time a call slot is free, and sends it.
async fn send_all(
    client: Client,
    mut waiting: mpsc::Receiver<NewObject>,
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
        stats.calls.fetch_add(1, Ordering::Relaxed);
        tokio::spawn(async move {
            let count = batch.len() as u64;
            match client.create_many(events, batch).await {
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
            drop(slot);
        });
    }
}
