//! A member's QUIC services: the client API (KV, Watch, Lease, Status) and the raft peer links.
//!
//! [`run_member`] wires one member together: storage and state machine, the raft driver thread,
//! a link task per peer, and the two servers.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use protobuf::Message as _;
use raft::prelude::{Message, MessageType};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, watch};
use tracing::{debug, info, warn, Instrument};
use transport::frame::FrameLimits;
use transport::rpc::{Call, Handler, Peer, RpcClient, RpcServer};
use transport::tls::TlsIdentity;
use transport::Endpoint;

use crate::config::{MemberConfig, STORE_CLIENT_ORG, STORE_MEMBER_ORG};
use crate::member::{
    self, encode_messages, DriverChannels, MemberError, MemberHandle, PeerFeedback,
};
use crate::metrics::peer_label;
use crate::peer_backlog::{self, OutboundBatch};
use crate::types::{
    ClientRequest, ClientResponse, Command, CommandResult, KeyRange, StoreError, WatchRequest,
    WatchResponse,
};

/// Organisations (certificate subject O) allowed to use the client API besides store members.
pub const CLIENT_ORGS: &[&str] = &[STORE_MEMBER_ORG, "kemu:apiserver", STORE_CLIENT_ORG];
/// Messages a watcher may have queued before it counts as too slow and is cancelled.
const WATCH_BUFFER: usize = 4096;
/// How long a peer link's connection attempt may take.
const PEER_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Silence from a peer after which its link is closed and made again.
const PEER_SILENT_AFTER: Duration = Duration::from_secs(1);
/// Events a catching-up watcher reads from history per step.
const CATCH_UP_CHUNK: usize = 2048;

/// A batch of raft messages on a peer link (each a protobuf-encoded `eraftpb::Message`).
#[derive(Serialize, Deserialize)]
pub struct PeerBatch {
    pub from: u64,
    pub messages: Vec<Bytes>,
    /// A piece of one message too large for a frame (a snapshot of a big state): the receiver
    /// appends pieces until the `last` one and then takes the whole as one message.
    pub piece: Option<Piece>,
}

impl PeerBatch {
    /// Bytes of raft messages the batch carries (a piece's bytes included).
    fn payload_len(&self) -> usize {
        let messages: usize = self.messages.iter().map(Bytes::len).sum();
        messages + self.piece.as_ref().map_or(0, |p| p.bytes.len())
    }
}

/// One piece of a large raft message.
#[derive(Serialize, Deserialize)]
pub struct Piece {
    pub bytes: Bytes,
    pub last: bool,
}

/// Raft messages larger than this travel in pieces of this size (a frame may hold 64 MiB; a
/// snapshot holds the whole state, which can be GBs).
const PIECE_BYTES: usize = 8 * 1024 * 1024;
/// A send on a peer link taking this long is logged (at debug level), with the backlog behind it.
const SLOW_PEER_SEND: Duration = Duration::from_millis(20);
/// How long one frame on a peer link may take to send before the link counts as stalled.
const PEER_SEND_TIMEOUT: Duration = Duration::from_secs(2);
/// The largest frame a peer link may carry: a batch holds at most [`PIECE_BYTES`] of messages,
/// plus each message's length.
const PEER_FRAME_BYTES: usize = 2 * PIECE_BYTES;
/// What a client request frame may hold beyond `max_request_bytes`: the request's own encoding
/// around its keys and values. A frame within it but over the request limit is answered
/// `TooLarge` by the proposal; one beyond it is answered so without being read.
const REQUEST_FRAME_SLACK: usize = 1024 * 1024;
/// The largest message a peer may send in pieces (a sanity bound on what is buffered).
const MAX_PIECED_MESSAGE: usize = 16 * 1024 * 1024 * 1024;

/// The frames that carry `messages`, in order: small ones together up to [`PIECE_BYTES`] a
/// frame, each large one in pieces of that size. Many small messages can add up to more than a
/// frame may hold — a leader catching a restarted follower up sends hundreds of appends of up
/// to 4 MiB in one go — so a frame's messages are bounded by their total size, not only each
/// message by its own. An empty `messages` gives one empty frame (it opens the stream).
fn peer_frames(from: u64, messages: Vec<Bytes>) -> Vec<PeerBatch> {
    let batch = |messages| PeerBatch {
        from,
        messages,
        piece: None,
    };
    let mut frames = Vec::new();
    let mut current: Vec<Bytes> = Vec::new();
    let mut current_bytes = 0;
    for message in messages {
        if message.len() > PIECE_BYTES {
            if !current.is_empty() {
                frames.push(batch(std::mem::take(&mut current)));
                current_bytes = 0;
            }
            let count = message.len().div_ceil(PIECE_BYTES);
            for i in 0..count {
                let end = ((i + 1) * PIECE_BYTES).min(message.len());
                frames.push(PeerBatch {
                    from,
                    messages: Vec::new(),
                    piece: Some(Piece {
                        bytes: message.slice(i * PIECE_BYTES..end),
                        last: i + 1 == count,
                    }),
                });
            }
            continue;
        }
        if current_bytes + message.len() > PIECE_BYTES && !current.is_empty() {
            frames.push(batch(std::mem::take(&mut current)));
            current_bytes = 0;
        }
        current_bytes += message.len();
        current.push(message);
    }
    if !current.is_empty() || frames.is_empty() {
        frames.push(batch(current));
    }
    frames
}

/// Runs one member until `shutdown` resolves or the raft driver fails.
pub async fn run_member(
    config: MemberConfig,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), MemberError> {
    config.validate()?;
    let identity = TlsIdentity::load(&config.certs_dir, &config.name)?;
    let telemetry = telemetry::Telemetry::new();
    let (handle, parts) = member::open(config.clone(), &telemetry.metrics)?;
    let id = config.id();
    let (stop_tx, stop_rx) = watch::channel(false);
    let metrics = handle.shared().metrics.clone();

    let rpc = Arc::new(RpcClient::new(&identity)?);
    let (feedback_tx, feedback_rx) = mpsc::channel(1024);
    let mut outbound = HashMap::new();
    for (name, addr) in &config.initial_cluster {
        let Some(peer_id) = config.member_id(name) else {
            continue;
        };
        if peer_id == id {
            continue;
        }
        let (tx, rx) = mpsc::channel(1024);
        outbound.insert(peer_id, tx);
        let link = PeerLink {
            rpc: rpc.clone(),
            from: id,
            to: peer_id,
            addr: addr.clone(),
            feedback: feedback_tx.clone(),
            stale_after: config.tick * config.election_ticks as u32,
            sent_bytes: metrics.peer_sent_bytes.with([peer_label(peer_id)]),
            sent_failures: metrics.peer_sent_failures.with([peer_label(peer_id)]),
        };
        tokio::spawn(
            link.run(rx, stop_rx.clone())
                .instrument(tracing::info_span!("peer_link", peer = %name)),
        );
    }
    let (inbound_tx, inbound_rx) = mpsc::channel(8192);
    let channels = DriverChannels {
        inbound: inbound_rx,
        feedback: feedback_rx,
        outbound,
    };
    let driver = member::spawn_driver(parts, channels, stop_rx.clone())?;
    let mut driver_done = tokio::task::spawn_blocking(move || driver.join());

    let peer_server = RpcServer::bind(config.listen_peer, &identity)?;
    let client_server = RpcServer::bind(config.listen_client, &identity)?;
    let grpc_front = match config.listen_grpc {
        Some(addr) => Some(crate::grpc::GrpcFront::bind(addr, &identity, handle.clone()).await?),
        None => None,
    };
    let metrics_listener = match config.listen_metrics {
        Some(addr) => {
            crate::metrics::register_state_gauges(&telemetry.metrics, handle.shared());
            crate::health::register(&telemetry.health, &handle);
            Some(telemetry::bind(addr).await?)
        }
        None => None,
    };
    info!(
        member = %config.name, id, client = %config.listen_client, peer = %config.listen_peer,
        "store member serving"
    );
    let members: Vec<String> = config
        .initial_cluster
        .iter()
        .map(|(n, _)| n.clone())
        .collect();
    let peer_service = Arc::new(PeerService {
        members,
        inbound: inbound_tx,
        received_bytes: metrics.peer_received_bytes.clone(),
    });
    let client_service = Arc::new(ClientService { member: handle });
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };
    let peer_task = tokio::spawn(peer_server.serve(peer_service, stopped(stop_rx.clone())));
    let client_task = tokio::spawn(client_server.serve(client_service, stopped(stop_rx.clone())));
    let grpc_task = grpc_front.map(|front| tokio::spawn(front.serve(stopped(stop_rx.clone()))));
    let metrics_task = metrics_listener
        .map(|listener| tokio::spawn(telemetry.serve(listener, stopped(stop_rx.clone()))));

    let result = tokio::select! {
        _ = shutdown => {
            info!("shutting down");
            let _ = stop_tx.send(true);
            match (&mut driver_done).await {
                Ok(Ok(result)) => result,
                _ => Ok(()),
            }
        }
        joined = &mut driver_done => {
            let _ = stop_tx.send(true);
            match joined {
                Ok(Ok(result)) => result,
                Ok(Err(_)) | Err(_) => Err(MemberError::Snapshot("raft driver thread panicked".into())),
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(3), async {
        let _ = peer_task.await;
        let _ = client_task.await;
        if let Some(task) = grpc_task {
            let _ = task.await;
        }
        if let Some(task) = metrics_task {
            let _ = task.await;
        }
    })
    .await;
    result
}

/// The client's answer to an applied command.
fn answer(result: CommandResult) -> ClientResponse {
    match result {
        CommandResult::Put(r) => ClientResponse::Put(r),
        CommandResult::DeleteRange(r) => ClientResponse::DeleteRange(r),
        CommandResult::Txn(r) => ClientResponse::Txn(r),
        CommandResult::Compact(r) => ClientResponse::Compact(r),
        CommandResult::LeaseGrant(r) => ClientResponse::LeaseGrant(r),
        CommandResult::LeaseRevoke(r) => ClientResponse::LeaseRevoke(r),
        CommandResult::LeaseKeepAlive(r) => ClientResponse::LeaseKeepAlive(r),
        CommandResult::Error(e) => ClientResponse::Error(e),
        CommandResult::Batch(results) => {
            ClientResponse::Batch(results.into_iter().map(answer).collect())
        }
    }
}

/// Sends raft messages to one peer over a long-lived client stream, reconnecting as needed.
struct PeerLink {
    rpc: Arc<RpcClient>,
    from: u64,
    to: u64,
    addr: Endpoint,
    feedback: mpsc::Sender<PeerFeedback>,
    /// Queued messages older than this are not sent (see [`peer_backlog`](crate::peer_backlog)):
    /// an election timeout, after which raft has moved on from them.
    stale_after: Duration,
    /// `etcd_network_peer_sent_bytes_total` and `..._sent_failures_total` of this peer.
    sent_bytes: telemetry::Counter,
    sent_failures: telemetry::Counter,
}

impl PeerLink {
    async fn run(self, mut rx: mpsc::Receiver<OutboundBatch>, mut stop: watch::Receiver<bool>) {
        let mut sink = None;
        let mut backoff = Duration::from_millis(50);
        loop {
            let first = tokio::select! {
                biased;
                _ = stop.changed() => return,
                batch = rx.recv() => match batch { Some(b) => b, None => return },
            };
            // Everything queued meanwhile goes out together, less what raft no longer needs.
            let mut backlog = vec![first];
            while let Ok(more) = rx.try_recv() {
                backlog.push(more);
            }
            let oldest = backlog[0].queued_at.elapsed();
            let queued = backlog.len();
            let pruned = peer_backlog::prune(backlog, Instant::now(), self.stale_after);
            if pruned.stale > 0 || pruned.superseded > 0 {
                debug!(
                    queued,
                    oldest_ms = oldest.as_millis() as u64,
                    stale = pruned.stale,
                    superseded = pruned.superseded,
                    "dropping queued raft messages the peer no longer needs"
                );
            }
            if pruned.stale > 0 {
                // Raft learns that the peer missed messages and probes it again.
                let _ = self.feedback.try_send(PeerFeedback::Unreachable(self.to));
            }
            let batch = pruned.send;
            if batch.is_empty() {
                continue;
            }
            if sink.is_none() {
                let opening = Instant::now();
                match self.open().await {
                    Ok(s) => {
                        debug!(addr = %self.addr, took_ms = opening.elapsed().as_millis() as u64, "peer link connected");
                        sink = Some(s);
                        backoff = Duration::from_millis(50);
                    }
                    Err(e) => {
                        debug!(addr = %self.addr, error = %e, took_ms = opening.elapsed().as_millis() as u64, "peer unreachable");
                        self.lost(&batch).await;
                        // Whatever queued up meanwhile is stale; raft will send again.
                        while let Ok(stale) = rx.try_recv() {
                            self.lost(&stale.messages).await;
                        }
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_millis(500));
                        continue;
                    }
                }
            }
            let Some(stream) = sink.as_mut() else {
                continue;
            };
            let frames = peer_frames(self.from, encode_messages(&batch));
            let sending = Instant::now();
            let mut sent = send_frames(stream, &frames).await;
            if sending.elapsed() >= SLOW_PEER_SEND {
                debug!(
                    took_ms = sending.elapsed().as_millis() as u64,
                    messages = batch.len(),
                    queued = rx.len(),
                    "slow send on the peer link"
                );
            }
            if let Ok(Err(e)) = &sent {
                // The connection was found closed (the peer restarted and reset it, or the
                // silence watch closed it): send this batch again on a new one rather than lose
                // it — it may hold a vote, and a lost vote costs a whole election timeout. Raft
                // takes a message twice without harm.
                debug!(error = %e, "peer link broke; sending again on a new connection");
                sink = None;
                let opening = Instant::now();
                match self.open().await {
                    Ok(mut fresh) => {
                        let took = opening.elapsed();
                        debug!(addr = %self.addr, took_ms = took.as_millis() as u64, "peer link connected");
                        if took > self.stale_after {
                            // The connection took so long that raft has moved on from this batch.
                            sink = Some(fresh);
                            self.lost(&batch).await;
                            continue;
                        }
                        sent = send_frames(&mut fresh, &frames).await;
                        sink = Some(fresh);
                    }
                    Err(e) => {
                        debug!(addr = %self.addr, error = %e, took_ms = opening.elapsed().as_millis() as u64, "peer unreachable");
                    }
                }
            }
            match sent {
                Ok(Ok(())) => {
                    let bytes: usize = frames.iter().map(PeerBatch::payload_len).sum();
                    self.sent_bytes.inc_by(bytes as u64);
                    for m in batch
                        .iter()
                        .filter(|m| m.get_msg_type() == MessageType::MsgSnapshot)
                    {
                        let _ = self
                            .feedback
                            .send(PeerFeedback::Snapshot { to: m.to, ok: true })
                            .await;
                    }
                }
                Ok(Err(e)) => {
                    debug!(error = %e, "peer link broke");
                    sink = None;
                    self.lost(&batch).await;
                }
                Err(_) => {
                    debug!("peer link stalled");
                    sink = None;
                    self.lost(&batch).await;
                }
            }
        }
    }

    async fn open(
        &self,
    ) -> Result<transport::rpc::FrameSink<PeerBatch>, transport::TransportError> {
        let connection = tokio::time::timeout(PEER_CONNECT_TIMEOUT, self.rpc.connect(&self.addr))
            .await
            .map_err(|_| transport::TransportError::Timeout {
                operation: "connect",
                addr: self.addr.to_string(),
                after: PEER_CONNECT_TIMEOUT,
            })??;
        // A killed peer sends no close, and a restarted one does not know this connection: a
        // silent peer's link is closed so the next batch reconnects (to the restarted process).
        let watched = connection.clone();
        tokio::spawn(async move {
            if watched.silent_for(PEER_SILENT_AFTER).await {
                debug!(addr = %watched.remote_address(), "peer silent; closing its link");
                watched.close_silent();
            }
        });
        connection
            .client_stream(&PeerBatch {
                from: self.from,
                messages: Vec::new(),
                piece: None,
            })
            .await
    }

    async fn lost(&self, batch: &[Message]) {
        self.sent_failures.inc();
        let _ = self.feedback.try_send(PeerFeedback::Unreachable(self.to));
        for m in batch
            .iter()
            .filter(|m| m.get_msg_type() == MessageType::MsgSnapshot)
        {
            let _ = self
                .feedback
                .send(PeerFeedback::Snapshot {
                    to: m.to,
                    ok: false,
                })
                .await;
        }
    }
}

/// Sends `frames` in order: `Err` when one took longer than [`PEER_SEND_TIMEOUT`] (the link is
/// stalled), `Ok(Err)` when the stream or its connection failed.
async fn send_frames(
    stream: &mut transport::rpc::FrameSink<PeerBatch>,
    frames: &[PeerBatch],
) -> Result<Result<(), transport::TransportError>, tokio::time::error::Elapsed> {
    for frame in frames {
        if let Err(e) = tokio::time::timeout(PEER_SEND_TIMEOUT, stream.send(frame)).await? {
            return Ok(Err(e));
        }
    }
    Ok(Ok(()))
}

/// Receives raft messages from peers and hands them to the driver.
struct PeerService {
    members: Vec<String>,
    inbound: mpsc::Sender<Message>,
    /// `etcd_network_peer_received_bytes_total`, by the sending member's id.
    received_bytes: telemetry::MetricVec<telemetry::Counter, 1>,
}

impl Handler for PeerService {
    type Request = PeerBatch;
    type Response = ();

    fn admit(&self, peer: &Peer) -> Result<(), String> {
        if self.members.contains(&peer.name)
            && peer.organizations.iter().any(|o| o == STORE_MEMBER_ORG)
        {
            Ok(())
        } else {
            Err(format!("{} is not a member of this store", peer.name))
        }
    }

    fn limits(&self) -> FrameLimits {
        FrameLimits {
            max_frame_bytes: PEER_FRAME_BYTES,
            ..FrameLimits::default()
        }
    }

    async fn handle(&self, peer: Peer, first: PeerBatch, mut call: Call<()>) {
        // `admit` let only members through.
        let Some(index) = self.members.iter().position(|m| *m == peer.name) else {
            return;
        };
        let received = self.received_bytes.with([peer_label(index as u64 + 1)]);
        let mut next = Some(first);
        // A large message's pieces so far.
        let mut assembling: Vec<u8> = Vec::new();
        while let Some(batch) = next {
            received.inc_by(batch.payload_len() as u64);
            let mut whole = Vec::new();
            if let Some(piece) = batch.piece {
                if assembling.len() + piece.bytes.len() > MAX_PIECED_MESSAGE {
                    warn!(peer = %peer.name, "dropping a peer stream whose pieced message exceeds the bound");
                    return;
                }
                assembling.extend_from_slice(&piece.bytes);
                if piece.last {
                    whole.push(Bytes::from(std::mem::take(&mut assembling)));
                }
            }
            for bytes in batch.messages.into_iter().chain(whole) {
                match Message::parse_from_bytes(&bytes) {
                    Ok(msg) => {
                        if self.inbound.send(msg).await.is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        warn!(peer = %peer.name, error = %e, "dropping a peer stream with an undecodable raft message");
                        return;
                    }
                }
            }
            next = match call.recv::<PeerBatch>().await {
                Ok(batch) => batch,
                Err(e) => {
                    debug!(peer = %peer.name, error = %e, "peer stream ended");
                    None
                }
            };
        }
    }
}

/// Serves the client API.
struct ClientService {
    member: MemberHandle,
}

impl Handler for ClientService {
    type Request = ClientRequest;
    type Response = ClientResponse;

    fn admit(&self, peer: &Peer) -> Result<(), String> {
        if peer
            .organizations
            .iter()
            .any(|o| CLIENT_ORGS.contains(&o.as_str()))
        {
            Ok(())
        } else {
            Err(format!("{} may not use the store", peer.name))
        }
    }

    fn limits(&self) -> FrameLimits {
        FrameLimits {
            max_frame_bytes: self.member.shared().config.max_request_bytes + REQUEST_FRAME_SLACK,
            ..FrameLimits::default()
        }
    }

    fn too_large(&self, size: u64, _limit: usize) -> Option<ClientResponse> {
        Some(ClientResponse::Error(StoreError::TooLarge {
            size: usize::try_from(size).unwrap_or(usize::MAX),
            limit: self.member.shared().config.max_request_bytes,
        }))
    }

    async fn handle(&self, peer: Peer, request: ClientRequest, call: Call<ClientResponse>) {
        let shared = self.member.shared();
        if shared.is_restoring() && !matches!(request, ClientRequest::Status) {
            // Its state is still being rebuilt after a restart (`member::RestoreTask`); the
            // client takes the call to another member.
            let restoring = StoreError::Unavailable {
                reason: format!(
                    "member {} is restoring its state after a start",
                    shared.config.name
                ),
            };
            let _ = call.reply(&ClientResponse::Error(restoring)).await;
            return;
        }
        if let ClientRequest::Watch(watch) = request {
            self.watch(watch, call).await;
            return;
        }
        let response = match self.unary(request).await {
            Ok(response) => response,
            Err(e) => ClientResponse::Error(e),
        };
        if let Err(e) = call.reply(&response).await {
            debug!(peer = %peer.name, error = %e, "client went away before its answer");
        }
    }
}

impl ClientService {
    async fn unary(&self, request: ClientRequest) -> Result<ClientResponse, StoreError> {
        let shared = self.member.shared();
        let command = match request {
            ClientRequest::Range(range) => {
                if !range.serializable {
                    self.member.read_index().await?;
                }
                let mvcc = shared.mvcc.read();
                let mut response = mvcc.range(&range)?;
                response.header = shared.header(response.header.revision);
                return Ok(ClientResponse::Range(response));
            }
            ClientRequest::Status => return Ok(ClientResponse::Status(shared.status_response())),
            ClientRequest::Hash => {
                self.member.read_index().await?;
                let mvcc = shared.mvcc.read();
                return Ok(ClientResponse::Hash(crate::types::HashResponse {
                    header: shared.header(mvcc.current_revision()),
                    hash: mvcc.hash(),
                    compact_revision: mvcc.compact_revision(),
                }));
            }
            ClientRequest::HashAt { revision } => {
                let mvcc = shared.mvcc.read();
                return Ok(ClientResponse::Hash(crate::types::HashResponse {
                    header: shared.header(revision),
                    hash: mvcc.hash_at(revision)?,
                    compact_revision: mvcc.compact_revision(),
                }));
            }
            ClientRequest::Watch(_) => {
                return Err(StoreError::InvalidRequest {
                    reason: "watch is a streaming call".into(),
                })
            }
            ClientRequest::Put(put) => {
                if put.key.is_empty() {
                    return Err(StoreError::InvalidRequest {
                        reason: "key is empty".into(),
                    });
                }
                Command::Put(put)
            }
            ClientRequest::DeleteRange(delete) => Command::DeleteRange(delete),
            ClientRequest::Txn(txn) => Command::Txn(txn),
            ClientRequest::Batch(txns) => Command::Batch(txns),
            ClientRequest::Compact(compact) => Command::Compact(compact),
            ClientRequest::LeaseGrant(grant) => {
                if grant.ttl <= 0 {
                    return Err(StoreError::InvalidRequest {
                        reason: "lease ttl must be positive".into(),
                    });
                }
                Command::LeaseGrant(grant)
            }
            ClientRequest::LeaseRevoke { id } => Command::LeaseRevoke { id },
            ClientRequest::LeaseKeepAlive { id } => Command::LeaseKeepAlive { id },
        };
        Ok(answer(self.member.propose(&command).await?))
    }

    /// Streams a watch: catch up from history in chunks, then register with the hub under the
    /// state lock (so nothing is missed or doubled), then relay live events.
    async fn watch(&self, request: WatchRequest, mut call: Call<ClientResponse>) {
        let shared = self.member.shared();
        let (tx, mut rx) = mpsc::channel(WATCH_BUFFER);
        let range: KeyRange = request.range.clone();
        let mut next = if request.start_revision > 0 {
            request.start_revision
        } else {
            shared.mvcc.read().current_revision() + 1
        };
        let created = WatchResponse::Created {
            header: shared.header(next - 1),
        };
        if call.send(&ClientResponse::Watch(created)).await.is_err() {
            return;
        }
        let mut sender = Some(tx);
        let watcher_id = loop {
            let step = {
                let mvcc = shared.mvcc.read();
                if next > mvcc.current_revision() {
                    let Some(tx) = sender.take() else { return };
                    Ok(Err(shared.hub.lock().register(
                        range.clone(),
                        request.prev_kv,
                        next,
                        tx,
                    )))
                } else {
                    mvcc.events_since(&range, next, CATCH_UP_CHUNK).map(Ok)
                }
            };
            match step {
                Ok(Err(id)) => break id,
                Ok(Ok((mut events, next_revision))) => {
                    next = next_revision;
                    if events.is_empty() {
                        continue;
                    }
                    if !request.prev_kv {
                        events.iter_mut().for_each(|e| e.prev_kv = None);
                    }
                    let header = shared.header(next - 1);
                    if call
                        .send(&ClientResponse::Watch(WatchResponse::Events {
                            header,
                            events,
                        }))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                Err(StoreError::Compacted {
                    compact_revision, ..
                }) => {
                    let canceled = WatchResponse::Canceled {
                        header: shared.header(shared.mvcc.read().current_revision()),
                        reason: format!("required revision {next} has been compacted"),
                        compact_revision,
                        resume_revision: 0,
                    };
                    let _ = call.send(&ClientResponse::Watch(canceled)).await;
                    let _ = call.finish().await;
                    return;
                }
                Err(e) => {
                    let _ = call.send(&ClientResponse::Error(e)).await;
                    let _ = call.finish().await;
                    return;
                }
            }
        };
        let progress_every = Duration::from_secs(u64::from(request.progress_notify_secs));
        let mut last_sent = Instant::now();
        let mut delivered = next - 1;
        loop {
            tokio::select! {
                biased;
                _ = call.closed() => break,
                message = rx.recv() => match message {
                    Some(WatchResponse::Events { header, events }) => {
                        delivered = header.revision;
                        last_sent = Instant::now();
                        let message = ClientResponse::Watch(WatchResponse::Events { header, events });
                        if call.send(&message).await.is_err() {
                            break;
                        }
                    }
                    Some(WatchResponse::Progress { header }) => {
                        if request.progress_notify_secs > 0 && last_sent.elapsed() >= progress_every {
                            delivered = delivered.max(header.revision);
                            last_sent = Instant::now();
                            if call.send(&ClientResponse::Watch(WatchResponse::Progress { header })).await.is_err() {
                                break;
                            }
                        }
                    }
                    Some(other) => {
                        if call.send(&ClientResponse::Watch(other)).await.is_err() {
                            break;
                        }
                    }
                    None => {
                        // The hub dropped us: too slow, or the state was replaced by a snapshot.
                        let canceled = WatchResponse::Canceled {
                            header: shared.header(delivered),
                            reason: format!("watcher could not keep up; resume from revision {}", delivered + 1),
                            compact_revision: 0,
                            resume_revision: delivered + 1,
                        };
                        let _ = call.send(&ClientResponse::Watch(canceled)).await;
                        let _ = call.finish().await;
                        return;
                    }
                },
            }
        }
        shared.hub.lock().unregister(watcher_id);
    }
}

#[cfg(test)]
mod piece_tests {
    use super::*;

    #[test]
    fn large_messages_travel_in_pieces_that_join_up() {
        let small = Bytes::from(vec![1u8; 100]);
        let large = Bytes::from(
            (0..PIECE_BYTES * 2 + 5)
                .map(|i| i as u8)
                .collect::<Vec<u8>>(),
        );
        let frames = peer_frames(7, vec![small.clone(), large.clone()]);
        assert_eq!(frames.len(), 4);
        assert_eq!(frames[0].messages, vec![small]);
        let mut joined = Vec::new();
        for (i, f) in frames[1..].iter().enumerate() {
            let piece = f.piece.as_ref().expect("a piece");
            assert_eq!(piece.last, i == 2);
            joined.extend_from_slice(&piece.bytes);
        }
        assert_eq!(Bytes::from(joined), large);
        // Only a large message: no empty frame before its pieces.
        assert_eq!(peer_frames(7, vec![large]).len(), 3);
        assert_eq!(peer_frames(7, Vec::new()).len(), 1);
    }

    #[test]
    fn many_small_messages_are_spread_over_frames_that_each_fit() {
        // What a leader sends a restarted follower: 300 appends of 4 MiB (1.2 GB), once all in
        // one frame, which the transport refused (64 MiB at most), so the follower never caught up.
        let messages: Vec<Bytes> = (0..300u32)
            .map(|i| Bytes::from(vec![(i % 251) as u8; 4 * 1024 * 1024]))
            .collect();
        let large = Bytes::from(vec![9u8; PIECE_BYTES + 1]);
        let mut all = messages[..150].to_vec();
        all.push(large.clone());
        all.extend_from_slice(&messages[150..]);
        let frames = peer_frames(3, all);
        let mut seen = Vec::new();
        let mut joined = Vec::new();
        for frame in &frames {
            let size: usize = frame.messages.iter().map(|m| m.len()).sum();
            assert!(size <= PIECE_BYTES, "a frame of {size} bytes");
            let encoded =
                bincode::serde::encode_to_vec(frame, bincode::config::standard()).expect("encodes");
            assert!(encoded.len() < transport::frame::MAX_FRAME_BYTES);
            seen.extend(frame.messages.iter().cloned());
            if let Some(piece) = &frame.piece {
                joined.extend_from_slice(&piece.bytes);
                if piece.last {
                    // The large message comes where it was sent: after the first 150.
                    assert_eq!(seen.len(), 150);
                    assert_eq!(Bytes::from(std::mem::take(&mut joined)), large);
                }
            }
        }
        assert_eq!(seen, messages, "every small message, once, in order");
    }
}

#[cfg(test)]
mod peer_link_tests {
    use super::*;
    use raft::prelude::Entry;
    use std::net::SocketAddr;
    use transport::pki::{create_ca, issue, CertSpec};

    /// A peer's receiving side in a runtime of its own, so that dropping the runtime drops its
    /// socket and connections without a close being sent — as SIGKILL does.
    struct FakePeer {
        runtime: tokio::runtime::Runtime,
    }

    impl FakePeer {
        fn start(
            certs: &std::path::Path,
            addr: SocketAddr,
            received: std::sync::mpsc::Sender<(Instant, Message)>,
        ) -> FakePeer {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("a runtime");
            let identity = TlsIdentity::load(certs, "x").expect("x's identity");
            let (inbound, mut rx) = mpsc::channel::<Message>(64);
            runtime.block_on(async {
                let server = RpcServer::bind(addr, &identity).expect("bind");
                let service = Arc::new(PeerService {
                    members: vec!["x".into(), "y".into()],
                    inbound,
                    received_bytes: crate::metrics::StoreMetrics::new(&telemetry::Registry::new())
                        .peer_received_bytes,
                });
                tokio::spawn(server.serve(service, std::future::pending()));
                tokio::spawn(async move {
                    while let Some(m) = rx.recv().await {
                        let _ = received.send((Instant::now(), m));
                    }
                });
            });
            FakePeer { runtime }
        }

        fn kill(self) {
            self.runtime.shutdown_background();
        }
    }

    /// Member y's link to member x (whose receiving side the test runs as a [`FakePeer`]).
    struct Setup {
        dir: tempfile::TempDir,
        addr: SocketAddr,
        runtime: tokio::runtime::Runtime,
        received_tx: std::sync::mpsc::Sender<(Instant, Message)>,
        received: std::sync::mpsc::Receiver<(Instant, Message)>,
    }

    impl Setup {
        fn new() -> Setup {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
                .with_test_writer()
                .try_init();
            let dir = tempfile::tempdir().expect("tempdir");
            create_ca(dir.path(), "t").expect("ca");
            for name in ["x", "y"] {
                let spec = CertSpec {
                    name: name.into(),
                    organizations: vec![STORE_MEMBER_ORG.into()],
                    sans: vec![],
                };
                issue(dir.path(), &spec).expect("issue");
            }
            // The fake peer binds it, is dropped and binds it again: a port from below the
            // ephemeral range, which no QUIC client takes meanwhile.
            let port = transport::ports::free_loopback_ports(1).expect("a free port")[0];
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("a runtime");
            let (received_tx, received) = std::sync::mpsc::channel();
            Setup {
                dir,
                addr: SocketAddr::from(([127, 0, 0, 1], port)),
                runtime,
                received_tx,
                received,
            }
        }

        fn peer(&self) -> FakePeer {
            FakePeer::start(self.dir.path(), self.addr, self.received_tx.clone())
        }

        /// Starts the link; its queue may already hold batches.
        fn link(&self, rx: mpsc::Receiver<OutboundBatch>) {
            let _guard = self.runtime.enter();
            let identity = TlsIdentity::load(self.dir.path(), "y").expect("y's identity");
            let (feedback, mut feedback_rx) = mpsc::channel(1024);
            let link = PeerLink {
                rpc: Arc::new(RpcClient::new(&identity).expect("client")),
                from: 2,
                to: 1,
                addr: self.addr.into(),
                feedback,
                stale_after: Duration::from_millis(500),
                sent_bytes: Default::default(),
                sent_failures: Default::default(),
            };
            let (stop_tx, stop_rx) = watch::channel(false);
            tokio::spawn(link.run(rx, stop_rx));
            // The link ends when its stop sender goes; this one never does.
            tokio::spawn(async move {
                std::future::pending::<()>().await;
                drop(stop_tx);
            });
            tokio::spawn(async move { while feedback_rx.recv().await.is_some() {} });
        }

        /// How long after `sent` the vote response `index` reached the peer.
        fn delivered(&self, index: u64, sent: Instant) -> Option<Duration> {
            let deadline = Instant::now() + Duration::from_secs(60);
            while let Some(left) = deadline.checked_duration_since(Instant::now()) {
                match self.received.recv_timeout(left) {
                    Ok((at, m))
                        if m.get_msg_type() == MessageType::MsgRequestPreVoteResponse
                            && m.index == index =>
                    {
                        return Some(at.duration_since(sent))
                    }
                    Ok(_) => {}
                    Err(_) => return None,
                }
            }
            None
        }
    }

    fn vote_response(index: u64) -> Message {
        let mut m = Message::default();
        m.set_msg_type(MessageType::MsgRequestPreVoteResponse);
        m.from = 2;
        m.to = 1;
        m.index = index;
        m
    }

    /// The same probe a leader sends a lagging follower on every heartbeat response: 1 MiB of
    /// entries after index 40 (`data`, shared by every copy until it is encoded).
    fn probe(data: &Bytes) -> Message {
        let mut m = Message::default();
        m.set_msg_type(MessageType::MsgAppend);
        m.from = 2;
        m.to = 1;
        m.term = 3;
        m.index = 40;
        m.log_term = 3;
        m.entries = vec![Entry {
            index: 41,
            term: 3,
            data: data.clone(),
            ..Default::default()
        }]
        .into();
        m
    }

    /// In a chaos run a pre-vote grant reached its candidate 1.4 s late, together with two later
    /// ones, because the link sent, in order, a backlog of the same multi-MiB append that a
    /// leader repeats to a lagging follower on every heartbeat response. A vote behind such a
    /// backlog must not wait for it. 400 repeats are 400 MiB: sent in order (before the backlog
    /// was pruned) they held the vote 2.3 s in a debug build; now one repeat goes ahead of it and
    /// the vote arrives in about 12 ms. The bound, half a second, is far from both.
    #[test]
    fn a_vote_behind_a_backlog_of_repeated_appends_is_not_held_by_it() {
        let setup = Setup::new();
        let peer = setup.peer();
        let (tx, rx) = mpsc::channel(1024);
        let data = Bytes::from(vec![7u8; 1024 * 1024]);
        for _ in 0..400 {
            tx.try_send(OutboundBatch::new(vec![probe(&data)]))
                .expect("room in the queue");
        }
        let sent = Instant::now();
        tx.try_send(OutboundBatch::new(vec![vote_response(1)]))
            .expect("room in the queue");
        setup.link(rx);
        let took = setup.delivered(1, sent).expect("the vote arrives");
        eprintln!("the vote behind the backlog arrived after {took:?}");
        assert!(took < Duration::from_millis(500), "the vote took {took:?}");
        peer.kill();
    }

    /// The first batch on a link that sat idle while its peer was killed (no close sent) and
    /// restarted on the same port goes out on a new connection at once. (Measured at 4 ms; the
    /// generous bound separates that from quinn's one-second handshake retransmission.)
    #[test]
    fn a_batch_on_an_idle_link_to_a_restarted_peer_arrives_at_once() {
        let setup = Setup::new();
        let peer = setup.peer();
        let (tx, rx) = mpsc::channel(1024);
        setup.link(rx);
        let send = |index: u64| {
            let sent = Instant::now();
            tx.try_send(OutboundBatch::new(vec![vote_response(index)]))
                .expect("room in the queue");
            sent
        };
        let sent = send(1);
        assert!(setup.delivered(1, sent).is_some(), "the link connects");
        peer.kill();
        std::thread::sleep(Duration::from_millis(1000));
        let peer = setup.peer();
        // Idle past the silence watch (PEER_SILENT_AFTER), which closes the old connection.
        std::thread::sleep(PEER_SILENT_AFTER * 2);
        let sent = send(2);
        let took = setup.delivered(2, sent).expect("the batch arrives");
        eprintln!("the first batch after the restart arrived after {took:?}");
        assert!(took < Duration::from_millis(500), "it took {took:?}");
        peer.kill();
    }
}
