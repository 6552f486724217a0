//! One store member: the raft `RawNode` driver and the handle the services use.
//!
//! The driver runs on its own thread (it does blocking fsyncs) and owns the `RawNode`. Requests
//! reach it through a channel: proposals (every write) and ReadIndex requests (linearizable reads).
//! It batches everything that arrived while it was busy into one `Ready`, so one fsync covers many
//! writes (group commit).
//!
//! A proposal is acknowledged only when the entry is committed and applied on *this* member, so a
//! follower can take writes too: raft forwards the proposal to the leader, and the follower answers
//! when it applies the entry. When a new leader's first (empty) entry is applied, a proposal made in
//! an older term and not applied yet was probably lost with the old leader — but not certainly: a
//! deposed leader that is still alive forwards proposals it holds to the new one. So such
//! proposals are answered `Timeout` ("may or may not have been applied") at once instead of after
//! the full request timeout, and are never proposed a second time, so nothing is applied twice.
//!
//! After a restart the state machine is rebuilt — the snapshot decoded, then the log after it
//! applied — on a thread of its own (`RestoreTask`), while the driver already takes part in raft:
//! it stores appends, votes, and may even lead. Rebuilding a large state takes seconds (a 400 MB
//! snapshot and 10,000 entries took 6 s under load); a member that spent them absent left the
//! cluster one failure from losing its quorum. Until the state is back the member answers its
//! clients `Unavailable`, and the entries raft commits meanwhile are applied from the log when
//! the thread hands over. Leading without a state works — the other members take the clients'
//! writes and forward them, and answer reads after a ReadIndex, neither of which needs the
//! leader's state machine — but a restoring member yields to one with a state when their logs
//! are as long (`RESTORED_PRIORITY`).
//!
//! The driver is a thin loop around parts that do no I/O and read no clock — they take inputs,
//! "now" included, and return what to do — each tested by what it returns:
//!
//! - `Proposals`: proposals in flight, which waiter to answer when, the batch window;
//! - `ReadIndexQueue`: linearizable reads batched into ReadIndex requests;
//! - `LeaseClocks`: lease deadlines and the expiries to propose;
//! - `RestoreHandover`: what raft committed while the state was being rebuilt.
//!
//! `driver` runs them; `apply` decodes log entries into the state machine.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use protobuf::Message as _;
use raft::prelude::Message;
use tokio::sync::{mpsc, oneshot, watch};
use tracing::info;

use crate::config::MemberConfig;
use crate::metrics::StoreMetrics;
use crate::mvcc::Mvcc;
use crate::peer_backlog::OutboundBatch;
use crate::raft_log::{DiskStorage, LogError};
use crate::types::{Command, CommandResult, LeaseId, ResponseHeader, StatusResponse, StoreError};
use crate::watch_hub::WatchHub;

mod apply;
mod driver;
mod lease_clock;
mod proposals;
mod read_index;
mod restore;

use apply::PROPOSAL_HEADER;
use driver::Driver;

/// Fatal errors of a member.
#[derive(Debug, thiserror::Error)]
pub enum MemberError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Log(#[from] LogError),
    #[error(transparent)]
    Raft(#[from] raft::Error),
    #[error("state machine snapshot: {0}")]
    Snapshot(String),
    #[error(transparent)]
    Transport(#[from] transport::TransportError),
    #[error(transparent)]
    Metrics(#[from] telemetry::ServeError),
    #[error("binding the gRPC front to {addr}")]
    GrpcBind {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// Raft facts the driver publishes after every `Ready`, for `Status` and for header fields.
#[derive(Clone, Copy, Debug, Default)]
pub struct RaftStatus {
    pub leader_id: u64,
    pub term: u64,
    pub last_index: u64,
    pub commit_index: u64,
    pub applied_index: u64,
    pub is_leader: bool,
}

/// State shared between the driver (which applies) and the services (which read and watch).
///
/// Lock order: `mvcc` before `hub`.
pub struct Shared {
    pub config: MemberConfig,
    pub mvcc: RwLock<Mvcc>,
    pub hub: Mutex<WatchHub>,
    status: RwLock<RaftStatus>,
    storage: DiskStorage,
    /// True until the state machine is rebuilt after a start (`restore::RestoreTask`): `mvcc` is an
    /// empty stand-in meanwhile.
    restoring: AtomicBool,
    /// When each lease runs out by this member's clock (the driver's lease clocks, published
    /// for the gRPC front's `LeaseTimeToLive`).
    lease_deadlines: Mutex<HashMap<LeaseId, Instant>>,
    pub metrics: StoreMetrics,
    /// When the member opened; [`Shared::driver_ran_at`] counts from it.
    opened: Instant,
    /// Milliseconds after `opened` at which the driver last went round its loop.
    driver_ran_ms: AtomicU64,
}

impl Shared {
    /// True while the state machine is being rebuilt after a start; `mvcc` must not be served.
    pub fn is_restoring(&self) -> bool {
        self.restoring.load(Ordering::Acquire)
    }

    /// How long lease `id` has left by this member's clock; `None` for a lease it does not know.
    pub fn lease_remaining(&self, id: LeaseId) -> Option<Duration> {
        let deadline = *self.lease_deadlines.lock().get(&id)?;
        Some(deadline.saturating_duration_since(Instant::now()))
    }

    pub fn raft_status(&self) -> RaftStatus {
        *self.status.read()
    }

    /// Bytes of the member's raft log and snapshot on disk.
    pub fn disk_size(&self) -> u64 {
        self.storage.disk_size()
    }

    /// How long ago the driver last went round its loop (it does so at least every tick).
    pub fn driver_idle_for(&self) -> Duration {
        let ran = Duration::from_millis(self.driver_ran_ms.load(Ordering::Relaxed));
        self.opened.elapsed().saturating_sub(ran)
    }

    fn driver_ran(&self) {
        let ms = self.opened.elapsed().as_millis() as u64;
        self.driver_ran_ms.store(ms, Ordering::Relaxed);
    }

    /// A response header at `revision` from this member.
    pub fn header(&self, revision: i64) -> ResponseHeader {
        ResponseHeader {
            revision,
            member_id: self.config.id(),
            raft_term: self.status.read().term,
        }
    }

    pub fn status_response(&self) -> StatusResponse {
        let raft = self.raft_status();
        let (revision, compact_revision, data_size, keys) = {
            let mvcc = self.mvcc.read();
            (
                mvcc.current_revision(),
                mvcc.compact_revision(),
                mvcc.data_size(),
                mvcc.key_count(),
            )
        };
        StatusResponse {
            header: self.header(revision),
            name: self.config.name.clone(),
            member_id: self.config.id(),
            leader_id: raft.leader_id,
            leader_name: self
                .config
                .member_name(raft.leader_id)
                .unwrap_or_default()
                .to_string(),
            term: raft.term,
            raft_index: raft.last_index,
            applied_index: raft.applied_index,
            commit_index: raft.commit_index,
            revision,
            compact_revision,
            data_size,
            disk_size: self.storage.disk_size(),
            keys,
            wal_syncs: self.storage.wal_syncs(),
        }
    }
}

/// What the services ask of the driver.
enum DriverRequest {
    Propose {
        data: Vec<u8>,
        reply: oneshot::Sender<Result<CommandResult, StoreError>>,
    },
    Read {
        reply: oneshot::Sender<Result<(), StoreError>>,
    },
}

/// What peer links tell the driver about deliveries.
pub(crate) enum PeerFeedback {
    Unreachable(u64),
    Snapshot { to: u64, ok: bool },
}

/// The cloneable handle the services use.
#[derive(Clone)]
pub struct MemberHandle {
    requests: mpsc::Sender<DriverRequest>,
    shared: Arc<Shared>,
}

fn cannot_encode(e: bincode::error::EncodeError) -> StoreError {
    StoreError::InvalidRequest {
        reason: format!("cannot encode command: {e}"),
    }
}

/// The size of `cmd`'s raft entry as the client sent it (uncompressed), for the request limit.
fn command_size(cmd: &Command) -> Result<usize, StoreError> {
    let encoded = bincode::serde::encode_into_std_write(
        cmd,
        &mut std::io::sink(),
        bincode::config::standard(),
    )
    .map_err(cannot_encode)?;
    Ok(PROPOSAL_HEADER + encoded)
}

impl MemberHandle {
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Replicates `cmd` and answers once this member has applied it.
    pub async fn propose(&self, cmd: &Command) -> Result<CommandResult, StoreError> {
        let limit = self.shared.config.max_request_bytes;
        // The request limit applies to what the client sent, before compression.
        let size = command_size(cmd)?;
        if size > limit {
            return Err(StoreError::TooLarge { size, limit });
        }
        // Put values are compressed here, once for every member (`types::stored_values`).
        let cmd = crate::types::stored_values::encode_command(cmd);
        let mut data = vec![0u8; PROPOSAL_HEADER];
        bincode::serde::encode_into_std_write(&*cmd, &mut data, bincode::config::standard())
            .map_err(cannot_encode)?;
        // The entry keeps this buffer for as long as it sits in the log, and its put values keep
        // it for as long as they live (see `types::shared_values`): no growth slack.
        data.shrink_to_fit();
        let (reply, answer) = oneshot::channel();
        self.send(DriverRequest::Propose { data, reply }).await?;
        answer.await.map_err(|_| stopping())?
    }

    /// Waits until this member has applied everything committed when the call was made
    /// (raft ReadIndex), so a read served afterwards is linearizable.
    pub async fn read_index(&self) -> Result<(), StoreError> {
        let (reply, answer) = oneshot::channel();
        self.send(DriverRequest::Read { reply }).await?;
        answer.await.map_err(|_| stopping())?
    }

    async fn send(&self, request: DriverRequest) -> Result<(), StoreError> {
        self.requests.send(request).await.map_err(|_| stopping())
    }
}

fn stopping() -> StoreError {
    StoreError::Unavailable {
        reason: "member is stopping".into(),
    }
}

/// Channels the driver is built from.
pub(crate) struct DriverChannels {
    pub inbound: mpsc::Receiver<Message>,
    pub feedback: mpsc::Receiver<PeerFeedback>,
    pub outbound: HashMap<u64, mpsc::Sender<OutboundBatch>>,
}

/// Opens the member's storage and state, and returns the handle plus the driver to run. Its
/// metrics go into `registry`.
pub(crate) fn open(
    config: MemberConfig,
    registry: &telemetry::Registry,
) -> Result<(MemberHandle, DriverParts), MemberError> {
    config.validate()?;
    std::fs::create_dir_all(&config.data_dir).map_err(|source| LogError::Io {
        path: config.data_dir.clone(),
        source,
    })?;
    let storage = DiskStorage::open(&config.data_dir.join("raft"))?;
    if storage.is_fresh() {
        let voters: Vec<u64> = (1..=config.initial_cluster.len() as u64).collect();
        storage.initialize(&voters)?;
        info!(member = %config.name, ?voters, "initialised a new member");
    }
    // The state machine itself is rebuilt by the driver's restore thread.
    let applied = storage.snapshot_index();
    let shared = Arc::new(Shared {
        config: config.clone(),
        mvcc: RwLock::new(Mvcc::new()),
        hub: Mutex::new(WatchHub::new()),
        status: RwLock::new(RaftStatus::default()),
        storage: storage.clone(),
        restoring: AtomicBool::new(true),
        lease_deadlines: Mutex::new(HashMap::new()),
        metrics: StoreMetrics::new(registry),
        opened: Instant::now(),
        driver_ran_ms: AtomicU64::new(0),
    });
    let (requests_tx, requests_rx) = mpsc::channel(65_536);
    let handle = MemberHandle {
        requests: requests_tx,
        shared: shared.clone(),
    };
    Ok((
        handle,
        DriverParts {
            shared,
            storage,
            requests: requests_rx,
            applied,
        },
    ))
}

pub(crate) struct DriverParts {
    shared: Arc<Shared>,
    storage: DiskStorage,
    requests: mpsc::Receiver<DriverRequest>,
    applied: u64,
}

/// Starts the driver thread. It stops when `shutdown` turns true (or its sender is dropped); the
/// returned join handle yields its result.
pub(crate) fn spawn_driver(
    parts: DriverParts,
    channels: DriverChannels,
    shutdown: watch::Receiver<bool>,
) -> Result<std::thread::JoinHandle<Result<(), MemberError>>, MemberError> {
    let name = parts.shared.config.name.clone();
    let driver = Driver::new(parts, channels)?;
    std::thread::Builder::new()
        .name(format!("raft-{name}"))
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|source| LogError::Io {
                    path: "tokio runtime".into(),
                    source,
                })?;
            runtime.block_on(driver.run(shutdown))
        })
        .map_err(|source| {
            MemberError::Log(LogError::Io {
                path: "raft thread".into(),
                source,
            })
        })
}

/// Encodes a batch of raft messages for a peer link.
pub(crate) fn encode_messages(messages: &[Message]) -> Vec<Bytes> {
    messages
        .iter()
        .filter_map(|m| m.write_to_bytes().ok().map(Bytes::from))
        .collect()
}
