//! etcd's Watch service: any number of watches on one bidirectional stream.
//!
//! Each watch is a task of its own. It catches up from the MVCC history in chunks, then
//! registers with the member's watch hub under the state lock (so no revision is missed or sent
//! twice) and relays what the hub hands it. A watch the hub drops for falling behind is not
//! cancelled, as etcd does not cancel a slow watcher: it catches up from the history again from
//! where it was. Every task sends into the stream's one outbound queue, so a watch's responses
//! keep their order, and a client that stops reading holds its own watches back, no others.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use parking_lot::Mutex;
use prost::Message as _;
use tokio::sync::{mpsc, Notify};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};
use tracing::debug;

use super::kv::key_value;
use super::pb::etcdserverpb as rpc;
use super::pb::mvccpb;
use super::Front;
use crate::types::{Event, EventKind, KeyRange, Revision, StoreError, WatchResponse};

/// Responses a stream may have queued for its client before its watches wait.
const OUTBOUND_BUFFER: usize = 256;
/// Messages a watch may have queued in the hub before it counts as fallen behind.
const WATCH_BUFFER: usize = 4096;
/// Events a catching-up watch reads from the history per step.
const CATCH_UP_CHUNK: usize = 2048;
/// The watch id of a response to a progress request (etcd's `InvalidWatchID`).
const STREAM_PROGRESS_ID: i64 = -1;

type Outbound = mpsc::Sender<Result<rpc::WatchResponse, Status>>;

pub(super) struct WatchService {
    front: Arc<Front>,
}

impl WatchService {
    pub(super) fn new(front: Arc<Front>) -> Self {
        WatchService { front }
    }
}

#[tonic::async_trait]
impl rpc::watch_server::Watch for WatchService {
    type WatchStream = ReceiverStream<Result<rpc::WatchResponse, Status>>;

    async fn watch(
        &self,
        request: Request<Streaming<rpc::WatchRequest>>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        self.front.serving()?;
        let inbound = request.into_inner();
        let (out, responses) = mpsc::channel(OUTBOUND_BUFFER);
        let stream = Arc::new(WatchStream {
            front: self.front.clone(),
            out,
            watches: Mutex::new(Watches::default()),
            progressed: Notify::new(),
        });
        tokio::spawn(stream.run(inbound));
        Ok(Response::new(ReceiverStream::new(responses)))
    }
}

/// One client stream and its watches.
struct WatchStream {
    front: Arc<Front>,
    out: Outbound,
    watches: Mutex<Watches>,
    /// Woken whenever a watch has sent up to a later revision.
    progressed: Notify,
}

#[derive(Default)]
struct Watches {
    by_id: HashMap<i64, WatchEntry>,
    /// The next id to try for a watch whose client left the choice to the member.
    next_id: i64,
}

struct WatchEntry {
    task: tokio::task::JoinHandle<()>,
    state: Arc<WatchState>,
}

/// What a running watch tells its stream.
struct WatchState {
    /// Every event up to this revision has been sent (or filtered out).
    delivered: AtomicI64,
    /// Its id in the member's watch hub while registered there; 0 while it catches up.
    hub_id: AtomicU64,
}

/// What a watch asked for.
struct WatchSpec {
    range: KeyRange,
    prev_kv: bool,
    no_put: bool,
    no_delete: bool,
    progress_notify: bool,
    fragment: bool,
}

impl WatchStream {
    async fn run(self: Arc<Self>, mut inbound: Streaming<rpc::WatchRequest>) {
        loop {
            let message = tokio::select! {
                biased;
                _ = self.out.closed() => break,
                message = inbound.message() => message,
            };
            match message {
                Ok(Some(request)) => {
                    if !self.handle(request).await {
                        break;
                    }
                }
                Ok(None) => {
                    // The client sends no more requests; its watches go on until it leaves.
                    self.out.closed().await;
                    break;
                }
                Err(status) => {
                    debug!(error = %status, "ending a watch stream on a bad request");
                    let _ = self.out.send(Err(status)).await;
                    break;
                }
            }
        }
        let watches = std::mem::take(&mut self.watches.lock().by_id);
        for (_, watch) in watches {
            watch.task.abort();
        }
    }

    /// Handles one request; false when the client is gone.
    async fn handle(self: &Arc<Self>, request: rpc::WatchRequest) -> bool {
        use rpc::watch_request::RequestUnion;
        match request.request_union {
            Some(RequestUnion::CreateRequest(create)) => self.create(create).await,
            Some(RequestUnion::CancelRequest(cancel)) => {
                let removed = self.watches.lock().by_id.remove(&cancel.watch_id);
                match removed {
                    Some(watch) => {
                        watch.task.abort();
                        self.send(rpc::WatchResponse {
                            header: self.front.current_header(),
                            watch_id: cancel.watch_id,
                            canceled: true,
                            ..Default::default()
                        })
                        .await
                    }
                    // As etcd: cancelling a watch that is not there answers nothing.
                    None => true,
                }
            }
            Some(RequestUnion::ProgressRequest(_)) => {
                tokio::spawn(self.clone().progress());
                true
            }
            None => true,
        }
    }

    async fn send(&self, response: rpc::WatchResponse) -> bool {
        self.out.send(Ok(response)).await.is_ok()
    }

    async fn create(self: &Arc<Self>, create: rpc::WatchCreateRequest) -> bool {
        use rpc::watch_create_request::FilterType;
        // As etcd: no key means the smallest key, and a range end of "\0" every key after it.
        let key = if create.key.is_empty() {
            Bytes::from_static(&[0])
        } else {
            create.key
        };
        let range_end = create.range_end;
        let refuse = |reason: &str| rpc::WatchResponse {
            header: self.front.current_header(),
            watch_id: STREAM_PROGRESS_ID,
            created: true,
            canceled: true,
            cancel_reason: reason.to_string(),
            ..Default::default()
        };
        if !range_end.is_empty() && range_end[..] != [0] && key >= range_end {
            return self.send(refuse("mvcc: watcher range is empty")).await;
        }
        let state = Arc::new(WatchState {
            delivered: AtomicI64::new(0),
            hub_id: AtomicU64::new(0),
        });
        let id = {
            let mut watches = self.watches.lock();
            if create.watch_id != 0 {
                if watches.by_id.contains_key(&create.watch_id) {
                    None
                } else {
                    Some(create.watch_id)
                }
            } else {
                while watches.by_id.contains_key(&watches.next_id) {
                    watches.next_id += 1;
                }
                watches.next_id += 1;
                Some(watches.next_id - 1)
            }
        };
        let Some(id) = id else {
            return self
                .send(refuse(
                    "mvcc: duplicate watch ID provided on the WatchStream",
                ))
                .await;
        };
        let current = self.front.shared().mvcc.read().current_revision();
        let next = if create.start_revision > 0 {
            create.start_revision
        } else {
            current + 1
        };
        state.delivered.store(next - 1, Ordering::Release);
        let spec = WatchSpec {
            range: KeyRange { key, range_end },
            prev_kv: create.prev_kv,
            no_put: create.filters.contains(&(FilterType::Noput as i32)),
            no_delete: create.filters.contains(&(FilterType::Nodelete as i32)),
            progress_notify: create.progress_notify,
            fragment: create.fragment,
        };
        // The created response goes out before anything the watch sends.
        let created = rpc::WatchResponse {
            header: self.front.header_at(current),
            watch_id: id,
            created: true,
            ..Default::default()
        };
        if !self.send(created).await {
            return false;
        }
        let task = tokio::spawn(self.clone().follow(id, spec, next, state.clone()));
        self.watches
            .lock()
            .by_id
            .insert(id, WatchEntry { task, state });
        true
    }

    /// Answers a progress request once every watch of the stream has sent everything up to the
    /// revision the member is at now.
    async fn progress(self: Arc<Self>) {
        let shared = self.front.shared();
        let revision = {
            let mvcc = shared.mvcc.read();
            let revision = mvcc.current_revision();
            // Registered watches hear it through the hub, behind the events before it.
            let header = shared.header(revision);
            let mut hub = shared.hub.lock();
            for watch in self.watches.lock().by_id.values() {
                let hub_id = watch.state.hub_id.load(Ordering::Acquire);
                if hub_id != 0 {
                    hub.progress_to(hub_id, &header);
                }
            }
            revision
        };
        loop {
            let progressed = self.progressed.notified();
            tokio::pin!(progressed);
            progressed.as_mut().enable();
            let behind = self
                .watches
                .lock()
                .by_id
                .values()
                .any(|w| w.state.delivered.load(Ordering::Acquire) < revision);
            if !behind {
                break;
            }
            tokio::select! {
                _ = progressed => {}
                _ = self.out.closed() => return,
            }
        }
        self.send(rpc::WatchResponse {
            header: self.front.header_at(revision),
            watch_id: STREAM_PROGRESS_ID,
            ..Default::default()
        })
        .await;
    }

    /// Runs one watch: catch up from the history, follow the hub, and catch up again whenever
    /// the hub drops it for falling behind.
    async fn follow(
        self: Arc<Self>,
        id: i64,
        spec: WatchSpec,
        mut next: Revision,
        state: Arc<WatchState>,
    ) {
        let shared = self.front.shared().clone();
        let progress_every = shared.config.watch_progress_notify_interval;
        loop {
            let (tx, mut rx) = mpsc::channel(WATCH_BUFFER);
            let mut sender = Some(tx);
            let registration = loop {
                let step = {
                    let mvcc = shared.mvcc.read();
                    if next > mvcc.current_revision() {
                        let Some(tx) = sender.take() else { return };
                        let hub_id =
                            shared
                                .hub
                                .lock()
                                .register(spec.range.clone(), spec.prev_kv, next, tx);
                        Ok(CatchUp::Registered(hub_id))
                    } else {
                        mvcc.events_since(&spec.range, next, CATCH_UP_CHUNK)
                            .map(|(events, next)| CatchUp::Events(events, next))
                    }
                };
                match step {
                    Ok(CatchUp::Registered(hub_id)) => {
                        state.hub_id.store(hub_id, Ordering::Release);
                        break Registration {
                            shared: shared.clone(),
                            hub_id,
                        };
                    }
                    Ok(CatchUp::Events(mut events, next_revision)) => {
                        next = next_revision;
                        if !spec.prev_kv {
                            events.iter_mut().for_each(|e| e.prev_kv = None);
                        }
                        if !self.send_events(id, &spec, next - 1, events).await {
                            return;
                        }
                        self.delivered(&state, next - 1);
                    }
                    Err(StoreError::Compacted {
                        compact_revision, ..
                    }) => {
                        // As etcd: the watch ends with the compact revision it asked below.
                        self.send(rpc::WatchResponse {
                            header: self.front.current_header(),
                            watch_id: id,
                            canceled: true,
                            compact_revision,
                            ..Default::default()
                        })
                        .await;
                        self.forget(id, &state);
                        return;
                    }
                    Err(e) => {
                        self.send(rpc::WatchResponse {
                            header: self.front.current_header(),
                            watch_id: id,
                            canceled: true,
                            cancel_reason: e.to_string(),
                            ..Default::default()
                        })
                        .await;
                        self.forget(id, &state);
                        return;
                    }
                }
            };
            let mut last_sent = Instant::now();
            loop {
                match rx.recv().await {
                    Some(WatchResponse::Events { header, events }) => {
                        if !self.send_events(id, &spec, header.revision, events).await {
                            return;
                        }
                        last_sent = Instant::now();
                        self.delivered(&state, header.revision);
                    }
                    Some(WatchResponse::Progress { header }) => {
                        self.delivered(&state, header.revision);
                        if spec.progress_notify && last_sent.elapsed() >= progress_every {
                            let progress = rpc::WatchResponse {
                                header: self.front.header(&header),
                                watch_id: id,
                                ..Default::default()
                            };
                            if !self.send(progress).await {
                                return;
                            }
                            last_sent = Instant::now();
                        }
                    }
                    Some(_) => {}
                    None => {
                        // The hub dropped this watch (it fell behind, or a snapshot from the
                        // leader replaced the state and the hub with it): catch up again.
                        registration.disarm();
                        state.hub_id.store(0, Ordering::Release);
                        next = state.delivered.load(Ordering::Acquire) + 1;
                        break;
                    }
                }
            }
        }
    }

    fn delivered(&self, state: &WatchState, revision: Revision) {
        state.delivered.fetch_max(revision, Ordering::AcqRel);
        self.progressed.notify_waiters();
    }

    /// Removes a watch that ended by itself (unless its id was taken again meanwhile).
    fn forget(&self, id: i64, state: &Arc<WatchState>) {
        let mut watches = self.watches.lock();
        if watches
            .by_id
            .get(&id)
            .is_some_and(|w| Arc::ptr_eq(&w.state, state))
        {
            watches.by_id.remove(&id);
        }
    }

    /// Sends one revision's (or a catch-up chunk's) events, less those the watch filters out, in
    /// fragments when the watch allows them and the whole would be larger than a request may be.
    async fn send_events(
        &self,
        id: i64,
        spec: &WatchSpec,
        revision: Revision,
        events: Vec<Event>,
    ) -> bool {
        let events: Vec<mvccpb::Event> = events
            .into_iter()
            .filter(|e| match e.kind {
                EventKind::Put => !spec.no_put,
                EventKind::Delete => !spec.no_delete,
            })
            .map(event)
            .collect();
        if events.is_empty() {
            return true;
        }
        let header = self.front.header_at(revision);
        let whole = rpc::WatchResponse {
            header,
            watch_id: id,
            events,
            ..Default::default()
        };
        let limit = self.front.shared().config.max_request_bytes;
        if !spec.fragment || whole.encoded_len() <= limit {
            return self.send(whole).await;
        }
        let mut fragment = Vec::new();
        let mut size = 0;
        let count = whole.events.len();
        for (i, event) in whole.events.into_iter().enumerate() {
            let event_size = event.encoded_len();
            if !fragment.is_empty() && size + event_size > limit {
                let part = rpc::WatchResponse {
                    header,
                    watch_id: id,
                    events: std::mem::take(&mut fragment),
                    fragment: true,
                    ..Default::default()
                };
                if !self.send(part).await {
                    return false;
                }
                size = 0;
            }
            size += event_size;
            fragment.push(event);
            if i + 1 == count {
                let last = rpc::WatchResponse {
                    header,
                    watch_id: id,
                    events: std::mem::take(&mut fragment),
                    ..Default::default()
                };
                return self.send(last).await;
            }
        }
        true
    }
}

fn event(e: Event) -> mvccpb::Event {
    mvccpb::Event {
        r#type: match e.kind {
            EventKind::Put => mvccpb::event::EventType::Put as i32,
            EventKind::Delete => mvccpb::event::EventType::Delete as i32,
        },
        kv: Some(key_value(e.kv)),
        prev_kv: e.prev_kv.map(key_value),
    }
}

/// One step of a watch catching up.
enum CatchUp {
    /// Events from the history, and the revision to read from next.
    Events(Vec<Event>, Revision),
    /// Caught up: registered with the hub under this id.
    Registered(u64),
}

/// A watch's place in the member's hub, given up when the watch ends (its task finishes or is
/// aborted).
struct Registration {
    shared: Arc<crate::member::Shared>,
    hub_id: u64,
}

impl Registration {
    /// Forgets a registration the hub already dropped: its id may belong to another watcher by
    /// now (a hub replaced after a snapshot numbers its watchers afresh).
    fn disarm(mut self) {
        self.hub_id = 0;
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if self.hub_id != 0 {
            self.shared.hub.lock().unregister(self.hub_id);
        }
    }
}
