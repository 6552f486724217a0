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

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use protobuf::Message as _;
use raft::prelude::{ConfState, Entry, EntryType, Message, MessageType, Snapshot};
use raft::{RawNode, ReadOnlyOption, SnapshotStatus, StateRole};
use tokio::sync::{mpsc, oneshot, watch};
use tracing::{debug, info, warn};

use crate::config::MemberConfig;
use crate::metrics::StoreMetrics;
use crate::mvcc::Mvcc;
use crate::peer_backlog::OutboundBatch;
use crate::raft_log::{DiskStorage, LogError, SnapshotWrite};
use crate::types::{Command, CommandResult, LeaseId, ResponseHeader, StatusResponse, StoreError};
use crate::watch_hub::WatchHub;

/// Bytes in front of an encoded [`Command`] in a log entry: the proposing member's id and its
/// proposal sequence number, so the proposer can find its waiter when it applies the entry.
const PROPOSAL_HEADER: usize = 16;
/// How many queued requests or peer messages the driver takes before it builds a `Ready`.
const MAX_DRAIN: usize = 4096;
/// Proposals a leader holds for its batch window at most; more go out at once.
const MAX_HELD: usize = 1024;
/// A ReadIndex request that got no answer in this many ticks is asked again (raft-rs drops them
/// silently when the leader has not yet committed an entry in its term).
const READ_RETRY_TICKS: u32 = 6;

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
    /// True until the state machine is rebuilt after a start ([`RestoreTask`]): `mvcc` is an
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

struct Pending {
    reply: oneshot::Sender<Result<CommandResult, StoreError>>,
    /// The raft term when it was proposed.
    term: u64,
}

struct ReadBatch {
    replies: Vec<oneshot::Sender<Result<(), StoreError>>>,
    ticks_waiting: u32,
    deadline: Instant,
}

/// A local snapshot being encoded and written by its own thread.
struct SnapshotTask {
    index: u64,
    /// How long the raft thread spent starting it (the state view and the WAL rotation).
    pause: Duration,
    cancel: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Result<(SnapshotWrite, bool), LogError>>,
}

/// raft-rs election priority of a member with its state; a restoring member has 0. A voter
/// refuses a candidate of lower priority whose log is only as long as its own, so a restoring
/// member leads only when its log is longer than every other survivor's (and then it must:
/// no other could win). Leading while restoring works (the others forward the writes) but
/// shares the member's CPU with the rebuild.
const RESTORED_PRIORITY: i64 = 1;

/// Entries the restore thread may leave for the raft thread to apply when it hands over.
const RESTORE_HANDOVER_ENTRIES: u64 = 256;
/// Entries the restore thread applies between checks for cancellation and new commits.
const RESTORE_CHUNK_ENTRIES: u64 = 1024;

/// The state machine being rebuilt after a start: the latest snapshot decoded, then the committed
/// log after it applied, on a thread of its own so the raft thread keeps voting and storing
/// appends meanwhile. The thread follows the commit index until it is within
/// [`RESTORE_HANDOVER_ENTRIES`] of it; the driver applies the rest.
struct RestoreTask {
    started: Instant,
    cancel: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Result<Restored, MemberError>>,
}

/// What the restore thread hands over.
struct Restored {
    mvcc: Mvcc,
    /// The last entry applied to `mvcc` (the snapshot's index if none after it).
    applied: u64,
    applied_term: u64,
    /// Entries applied after the snapshot.
    replayed: u64,
}

impl RestoreTask {
    fn start(storage: DiskStorage, config: &MemberConfig) -> Result<RestoreTask, MemberError> {
        let cancel = Arc::new(AtomicBool::new(false));
        let stop = cancel.clone();
        let pause = config.restore_pause;
        let thread = std::thread::Builder::new()
            .name(format!("restore-{}", config.name))
            .spawn(move || {
                if storage.hard_state().commit > 0 {
                    let until = Instant::now() + pause;
                    while Instant::now() < until && !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                }
                restore_state(&storage, &stop)
            })
            .map_err(|source| LogError::Io {
                path: "restore thread".into(),
                source,
            })?;
        Ok(RestoreTask {
            started: Instant::now(),
            cancel,
            thread,
        })
    }
}

/// Rebuilds the state machine from the snapshot and the committed log in `storage`.
fn restore_state(storage: &DiskStorage, cancel: &AtomicBool) -> Result<Restored, MemberError> {
    let (mut mvcc, mut applied, mut applied_term) = match storage.snapshot_data()? {
        Some((meta, data)) if !data.is_empty() => {
            let mvcc =
                Mvcc::from_snapshot(&data).map_err(|e| MemberError::Snapshot(e.to_string()))?;
            info!(
                index = meta.index,
                revision = mvcc.current_revision(),
                "restored state machine from snapshot"
            );
            (mvcc, meta.index, meta.term)
        }
        Some((meta, _)) => (Mvcc::new(), meta.index, meta.term),
        None => (Mvcc::new(), 0, 0),
    };
    let mut replayed = 0;
    loop {
        if cancel.load(Ordering::Relaxed) {
            return Err(MemberError::Snapshot("restore cancelled".into()));
        }
        // Entries up to the commit index are in the stored log: raft stores an entry before
        // the hard state that commits it.
        let commit = storage.hard_state().commit;
        if commit <= applied + RESTORE_HANDOVER_ENTRIES {
            break;
        }
        let high = commit.min(applied + RESTORE_CHUNK_ENTRIES) + 1;
        let entries = raft::Storage::entries(
            storage,
            applied + 1,
            high,
            None,
            raft::GetEntriesContext::empty(false),
        )?;
        if entries.is_empty() {
            break;
        }
        for entry in entries {
            if entry.get_entry_type() == EntryType::EntryNormal && !entry.data.is_empty() {
                apply_proposal(&mut mvcc, &entry.data, |_, _| {});
            }
            applied = entry.index;
            applied_term = entry.term;
            replayed += 1;
        }
    }
    Ok(Restored {
        mvcc,
        applied,
        applied_term,
        replayed,
    })
}

struct LeaseClock {
    deadline: Instant,
    ttl: Duration,
    expire_proposed: Option<Instant>,
}

/// The raft driver: owns the `RawNode` and applies committed entries.
struct Driver {
    node: RawNode<DiskStorage>,
    shared: Arc<Shared>,
    storage: DiskStorage,
    requests: mpsc::Receiver<DriverRequest>,
    channels: DriverChannels,
    id: u64,
    next_seq: u64,
    pending: HashMap<u64, Pending>,
    /// (deadline, seq) in proposal order, to expire proposals without scanning them all.
    pending_order: VecDeque<(Instant, u64)>,
    /// Proposals of an older term, answered `Timeout` after the current `Ready`.
    abandoned: Vec<u64>,
    read_queue: Vec<oneshot::Sender<Result<(), StoreError>>>,
    read_batches: HashMap<u64, ReadBatch>,
    next_read_ctx: u64,
    /// Reads whose ReadIndex is known, waiting for `applied` to reach it.
    reads_waiting_apply: BTreeMap<u64, Vec<oneshot::Sender<Result<(), StoreError>>>>,
    applied: u64,
    applied_term: u64,
    last_snapshot_index: u64,
    /// Size of the last snapshot taken or installed (of the file on disk after a restart).
    last_snapshot_bytes: u64,
    snapshot_task: Option<SnapshotTask>,
    /// Until the state machine is rebuilt after the start.
    restore: Option<RestoreTask>,
    /// While restoring: the last entry raft handed over as committed (applied from the log
    /// once the state is back).
    committed_meanwhile: u64,
    leases: HashMap<LeaseId, LeaseClock>,
    was_leader: bool,
    /// The leader as of the last `Ready` (for `etcd_server_leader_changes_seen_total`).
    leader_seen: u64,
    /// When this member last became leader, until its first entry of that term is applied.
    leading_since: Option<Instant>,
    last_progress: Instant,
    tick_count: u64,
    /// Proposals made since the last `Ready` that carried entries, and when that was.
    held: usize,
    last_append: Instant,
}

/// Counter for unique proposal sequence numbers across restarts of the driver in one process.
static SEQ_BASE: AtomicU64 = AtomicU64::new(0);

impl Driver {
    fn new(parts: DriverParts, channels: DriverChannels) -> Result<Driver, MemberError> {
        let config = &parts.shared.config;
        let raft_config = raft::Config {
            id: config.id(),
            election_tick: config.election_ticks,
            min_election_tick: config.campaign_ticks().start,
            max_election_tick: config.campaign_ticks().end,
            heartbeat_tick: config.heartbeat_ticks,
            applied: parts.applied,
            max_size_per_msg: 4 * 1024 * 1024,
            max_inflight_msgs: 512,
            // Proposals that arrive between two `Ready`s go to each follower as one append
            // instead of one append each.
            batch_append: true,
            check_quorum: true,
            pre_vote: true,
            read_only_option: ReadOnlyOption::Safe,
            ..Default::default()
        };
        raft_config.validate()?;
        let logger = crate::raft_trace::raft_logger(&config.name);
        let node = RawNode::new(&raft_config, parts.storage.clone(), &logger)?;
        // Sequence numbers only need to be unique among this member's proposals still in flight;
        // mixing in the start time keeps a restarted member from matching entries of its past life.
        let start = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0);
        let next_seq = start.wrapping_shl(16) ^ SEQ_BASE.fetch_add(1 << 40, Ordering::Relaxed);
        let last_snapshot_bytes = parts.storage.snapshot_file_bytes();
        let restore = RestoreTask::start(parts.storage.clone(), config)?;
        let mut driver = Driver {
            id: config.id(),
            node,
            storage: parts.storage,
            requests: parts.requests,
            channels,
            next_seq,
            pending: HashMap::new(),
            pending_order: VecDeque::new(),
            abandoned: Vec::new(),
            read_queue: Vec::new(),
            read_batches: HashMap::new(),
            next_read_ctx: 1,
            reads_waiting_apply: BTreeMap::new(),
            applied: parts.applied,
            applied_term: 0,
            last_snapshot_index: parts.applied,
            last_snapshot_bytes,
            snapshot_task: None,
            restore: Some(restore),
            committed_meanwhile: parts.applied,
            leases: HashMap::new(),
            was_leader: false,
            leader_seen: raft::INVALID_ID,
            leading_since: None,
            last_progress: Instant::now(),
            tick_count: 0,
            held: 0,
            last_append: Instant::now(),
            shared: parts.shared,
        };
        driver.reset_lease_clocks();
        Ok(driver)
    }

    async fn run(mut self, shutdown: watch::Receiver<bool>) -> Result<(), MemberError> {
        let result = self.run_loop(shutdown).await;
        if let Some(task) = self.snapshot_task.take() {
            // Its commit must not race a later open of the same directory.
            task.cancel.store(true, Ordering::Relaxed);
            let _ = task.thread.join();
        }
        if let Some(restore) = self.restore.take() {
            restore.cancel.store(true, Ordering::Relaxed);
            let _ = restore.thread.join();
        }
        result
    }

    async fn run_loop(&mut self, mut shutdown: watch::Receiver<bool>) -> Result<(), MemberError> {
        let mut ticker = tokio::time::interval(self.shared.config.tick);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                _ = shutdown.changed() => break,
                _ = ticker.tick() => self.on_tick(),
                Some(msg) = self.channels.inbound.recv() => self.step(msg),
                Some(request) = self.requests.recv() => self.on_request(request),
                Some(feedback) = self.channels.feedback.recv() => self.on_feedback(feedback),
            }
            self.drain();
            if let Some(wait) = self.batch_wait() {
                tokio::select! {
                    biased;
                    _ = shutdown.changed() => break,
                    _ = tokio::time::sleep(wait) => {}
                }
                self.drain();
            }
            self.issue_reads();
            self.process_ready()?;
            self.finish_snapshot()?;
            self.finish_restore()?;
            self.shared
                .metrics
                .proposals_pending
                .set(self.pending.len() as i64);
            self.shared.driver_ran();
        }
        self.fail_all(stopping());
        Ok(())
    }

    /// How long to hold the proposals made since the last `Ready` with entries, so that more
    /// join them ([`MemberConfig::batch_window`](crate::config::MemberConfig::batch_window)):
    /// only a leader holds, only what it proposed itself, never past the window measured from
    /// that last `Ready`, and never more than [`MAX_HELD`] proposals.
    fn batch_wait(&self) -> Option<Duration> {
        let window = self.shared.config.batch_window;
        if window.is_zero()
            || self.held == 0
            || self.held >= MAX_HELD
            || self.node.raft.state != StateRole::Leader
        {
            return None;
        }
        window
            .checked_sub(self.last_append.elapsed())
            .filter(|wait| !wait.is_zero())
    }

    /// Takes whatever else is already queued, so one `Ready` covers it all.
    fn drain(&mut self) {
        for _ in 0..MAX_DRAIN {
            match self.channels.inbound.try_recv() {
                Ok(msg) => self.step(msg),
                Err(_) => break,
            }
        }
        for _ in 0..MAX_DRAIN {
            match self.requests.try_recv() {
                Ok(request) => self.on_request(request),
                Err(_) => break,
            }
        }
        while let Ok(feedback) = self.channels.feedback.try_recv() {
            self.on_feedback(feedback);
        }
    }

    fn step(&mut self, msg: Message) {
        if let Err(e) = self.node.step(msg) {
            debug!(error = %e, "raft step rejected a message");
        }
    }

    fn on_feedback(&mut self, feedback: PeerFeedback) {
        match feedback {
            PeerFeedback::Unreachable(to) => self.node.report_unreachable(to),
            PeerFeedback::Snapshot { to, ok } => {
                let status = if ok {
                    SnapshotStatus::Finish
                } else {
                    SnapshotStatus::Failure
                };
                self.node.report_snapshot(to, status);
            }
        }
    }

    fn on_request(&mut self, request: DriverRequest) {
        match request {
            DriverRequest::Propose { data, reply } => self.propose(data, reply),
            DriverRequest::Read { reply } => self.read_queue.push(reply),
        }
    }

    /// Proposes one command; a proposal raft refuses outright (no leader known) is answered
    /// `NoLeader` at once, since it certainly was not applied.
    fn propose(
        &mut self,
        mut data: Vec<u8>,
        reply: oneshot::Sender<Result<CommandResult, StoreError>>,
    ) {
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        data[..8].copy_from_slice(&self.id.to_le_bytes());
        data[8..PROPOSAL_HEADER].copy_from_slice(&seq.to_le_bytes());
        if let Err(e) = self.node.propose(vec![], data) {
            debug!(error = %e, "proposal dropped");
            self.shared.metrics.proposals_failed.inc();
            let _ = reply.send(Err(self.no_leader()));
            return;
        }
        self.held += 1;
        let deadline = Instant::now() + self.shared.config.request_timeout;
        self.pending.insert(
            seq,
            Pending {
                reply,
                term: self.node.raft.term,
            },
        );
        self.pending_order.push_back((deadline, seq));
    }

    fn no_leader(&self) -> StoreError {
        let leader = self.node.raft.leader_id;
        StoreError::NoLeader {
            member: self.shared.config.name.clone(),
            leader_hint: self.shared.config.member_name(leader).map(str::to_string),
        }
    }

    fn issue_reads(&mut self) {
        if self.read_queue.is_empty() {
            return;
        }
        let replies = std::mem::take(&mut self.read_queue);
        if self.node.raft.leader_id == raft::INVALID_ID {
            let err = self.no_leader();
            for reply in replies {
                let _ = reply.send(Err(err.clone()));
            }
            return;
        }
        let ctx = self.next_read_ctx;
        self.next_read_ctx += 1;
        let deadline = Instant::now() + self.shared.config.request_timeout;
        self.read_batches.insert(
            ctx,
            ReadBatch {
                replies,
                ticks_waiting: 0,
                deadline,
            },
        );
        self.node.read_index(ctx.to_le_bytes().to_vec());
    }

    fn on_tick(&mut self) {
        shorten_campaign_retry(
            &mut self.node.raft,
            self.shared.config.campaign_retry_ticks(),
            &mut rand::thread_rng(),
        );
        self.node.tick();
        self.tick_count += 1;
        let now = Instant::now();
        self.expire_pending(now);
        self.retry_reads(now);
        if self.node.raft.state == StateRole::Leader {
            self.expire_leases(now);
        }
        if now.duration_since(self.last_progress) >= self.shared.config.progress_interval {
            self.last_progress = now;
            let mvcc = self.shared.mvcc.read();
            let header = self.shared.header(mvcc.current_revision());
            self.shared.hub.lock().progress(&header);
        }
    }

    fn expire_pending(&mut self, now: Instant) {
        while let Some(&(deadline, seq)) = self.pending_order.front() {
            if deadline > now {
                break;
            }
            self.pending_order.pop_front();
            if let Some(pending) = self.pending.remove(&seq) {
                self.shared.metrics.proposals_failed.inc();
                let _ = pending.reply.send(Err(StoreError::Timeout));
            }
        }
    }

    fn retry_reads(&mut self, now: Instant) {
        let mut expired = Vec::new();
        let mut retry = Vec::new();
        let has_leader = self.node.raft.leader_id != raft::INVALID_ID;
        for (ctx, batch) in self.read_batches.iter_mut() {
            if batch.deadline <= now {
                expired.push(*ctx);
                continue;
            }
            batch.ticks_waiting += 1;
            if batch.ticks_waiting >= READ_RETRY_TICKS && has_leader {
                batch.ticks_waiting = 0;
                retry.push(*ctx);
            }
        }
        for ctx in expired {
            if let Some(batch) = self.read_batches.remove(&ctx) {
                for reply in batch.replies {
                    let _ = reply.send(Err(StoreError::Timeout));
                }
            }
        }
        for ctx in retry {
            self.node.read_index(ctx.to_le_bytes().to_vec());
        }
    }

    fn expire_leases(&mut self, now: Instant) {
        let mut expire = Vec::new();
        for (id, clock) in self.leases.iter_mut() {
            let retry_due = clock
                .expire_proposed
                .is_none_or(|at| now.duration_since(at) > Duration::from_secs(2));
            if clock.deadline <= now && retry_due {
                clock.expire_proposed = Some(now);
                expire.push(*id);
            }
        }
        for id in expire {
            info!(lease = id, "lease expired; revoking it");
            let mut data = vec![0u8; PROPOSAL_HEADER];
            let cmd = Command::LeaseExpire { id };
            if bincode::serde::encode_into_std_write(&cmd, &mut data, bincode::config::standard())
                .is_ok()
            {
                // Sequence 0 is never a waiter's, so nobody is answered for it.
                data[..8].copy_from_slice(&self.id.to_le_bytes());
                if let Err(e) = self.node.propose(vec![], data) {
                    debug!(error = %e, "lease expiry proposal dropped");
                }
            }
        }
    }

    /// Lease deadlines are kept by whoever leads; a new leader gives every lease a full TTL, as
    /// etcd does, since it cannot know how long ago the old leader last saw a renewal.
    fn reset_lease_clocks(&mut self) {
        let now = Instant::now();
        let leases = self.shared.mvcc.read().leases();
        self.leases = leases
            .into_iter()
            .map(|(id, ttl)| {
                let ttl = Duration::from_secs(ttl.max(1) as u64);
                (
                    id,
                    LeaseClock {
                        deadline: now + ttl,
                        ttl,
                        expire_proposed: None,
                    },
                )
            })
            .collect();
        *self.shared.lease_deadlines.lock() = self
            .leases
            .iter()
            .map(|(id, clock)| (*id, clock.deadline))
            .collect();
    }

    fn process_ready(&mut self) -> Result<(), MemberError> {
        if !self.node.has_ready() {
            return Ok(());
        }
        let mut ready = self.node.ready();
        if !ready.messages().is_empty() {
            let messages = ready.take_messages();
            self.send(messages);
        }
        if !ready.snapshot().is_empty() {
            let snapshot = ready.snapshot().clone();
            self.install_snapshot(snapshot)?;
        }
        let committed = ready.take_committed_entries();
        self.apply_entries(committed)?;
        if !ready.entries().is_empty() {
            self.storage.append(ready.entries())?;
            self.held = 0;
            self.last_append = Instant::now();
        }
        if let Some(hs) = ready.hs() {
            self.storage.set_hard_state(hs)?;
        }
        // New entries, a new term or a vote must be durable before the messages that depend on
        // them leave; a hard state whose commit index alone moved need not be (raft learns the
        // commit index again from the leader after a restart), so it is written and left for the
        // next fsync. That was one fsync per commit advance on every member.
        if ready.must_sync() {
            if let Some(took) = self.storage.sync_timed()? {
                self.shared.metrics.wal_fsync.observe(took.as_secs_f64());
            }
        }
        for read_state in ready.take_read_states() {
            self.on_read_state(&read_state.request_ctx, read_state.index);
        }
        if !ready.persisted_messages().is_empty() {
            let messages = ready.take_persisted_messages();
            self.send(messages);
        }
        let mut light = self.node.advance(ready);
        if let Some(commit) = light.commit_index() {
            self.storage.set_commit(commit)?;
        }
        let messages = light.take_messages();
        self.send(messages);
        let committed = light.take_committed_entries();
        self.apply_entries(committed)?;
        self.node.advance_apply();

        self.after_ready()?;
        Ok(())
    }

    fn after_ready(&mut self) -> Result<(), MemberError> {
        let is_leader = self.node.raft.state == StateRole::Leader;
        if is_leader && !self.was_leader {
            info!(member = %self.shared.config.name, term = self.node.raft.term, "became leader");
            self.leading_since = Some(Instant::now());
            self.reset_lease_clocks();
        }
        if !is_leader {
            self.leading_since = None;
        }
        self.was_leader = is_leader;
        // Counted as etcd counts it: every time the known leader becomes another member.
        let leader = self.node.raft.leader_id;
        if leader != raft::INVALID_ID && leader != self.leader_seen {
            self.shared.metrics.leader_changes.inc();
        }
        self.leader_seen = leader;
        for seq in std::mem::take(&mut self.abandoned) {
            if let Some(pending) = self.pending.remove(&seq) {
                self.shared.metrics.proposals_failed.inc();
                let _ = pending.reply.send(Err(StoreError::Timeout));
            }
        }
        if self.snapshot_due() {
            self.take_snapshot()?;
        }
        let raft = &self.node.raft;
        *self.shared.status.write() = RaftStatus {
            leader_id: raft.leader_id,
            term: raft.term,
            last_index: raft.raft_log.last_index(),
            commit_index: raft.raft_log.committed,
            applied_index: self.applied,
            is_leader,
        };
        Ok(())
    }

    /// A snapshot is due after `snapshot_entries` entries, and once the WAL since the last one has
    /// reached `snapshot_wal_fraction` of its size (see [`MemberConfig`]).
    fn snapshot_due(&self) -> bool {
        if self.restore.is_some() {
            return false;
        }
        let entries_since = self.applied.saturating_sub(self.last_snapshot_index);
        // The entry count first, so the storage lock behind `wal_bytes` is taken only then.
        entries_since >= self.shared.config.snapshot_entries
            && self.shared.config.snapshot_due(
                entries_since,
                self.last_snapshot_bytes,
                self.storage.wal_bytes(),
            )
    }

    /// Starts a snapshot at the applied index. The raft thread only takes a copy-on-write view
    /// of the state and rotates the WAL; encoding, writing, fsyncing and compacting the log run on
    /// a thread of their own (see [`finish_snapshot`](Self::finish_snapshot)).
    fn take_snapshot(&mut self) -> Result<(), MemberError> {
        if self.snapshot_task.is_some() {
            return Ok(());
        }
        let started = Instant::now();
        let view = self.shared.mvcc.read().snapshot_view();
        let conf_state: ConfState = self.node.raft.prs().conf().to_conf_state();
        let index = self.applied;
        self.last_snapshot_index = index;
        let Some(pending) = self.storage.begin_snapshot(index, conf_state)? else {
            return Ok(());
        };
        let pause = started.elapsed();
        let cancel = Arc::new(AtomicBool::new(false));
        let stop = cancel.clone();
        let thread = std::thread::Builder::new()
            .name(format!("snapshot-{}", self.shared.config.name))
            .spawn(move || {
                let written = pending.write(&stop, |out| {
                    view.encode_into(out)
                        .map(|_| ())
                        .map_err(std::io::Error::other)
                })?;
                // Let go of the old versions the view kept alive before the commit.
                drop(view);
                Ok((written, pending.commit()?))
            })
            .map_err(|source| LogError::Io {
                path: "snapshot thread".into(),
                source,
            })?;
        self.snapshot_task = Some(SnapshotTask {
            index,
            pause,
            cancel,
            thread,
        });
        Ok(())
    }

    /// Reaps a finished snapshot thread. A failed write is retried at the next snapshot; a failed
    /// commit leaves the storage unusable and stops the member.
    fn finish_snapshot(&mut self) -> Result<(), MemberError> {
        let Some(task) = take_finished(&mut self.snapshot_task, |task| &task.thread) else {
            return Ok(());
        };
        let outcome = task
            .thread
            .join()
            .map_err(|_| MemberError::Snapshot("the snapshot thread panicked".into()))?;
        match outcome {
            Ok((written, true)) => {
                let saved = task.pause + written.encode + written.sync;
                self.shared
                    .metrics
                    .snapshot_save
                    .observe(saved.as_secs_f64());
                self.last_snapshot_bytes = written.bytes;
                self.storage
                    .compact_to_snapshot(self.shared.config.snapshot_catch_up_entries);
                info!(
                    index = task.index,
                    bytes = written.bytes,
                    pause_ms = task.pause.as_millis() as u64,
                    serialize_ms = written.encode.as_millis() as u64,
                    write_ms = written.sync.as_millis() as u64,
                    "took a snapshot and compacted the log"
                )
            }
            Ok((_, false)) => info!(
                index = task.index,
                "dropped a local snapshot: a newer one was installed meanwhile"
            ),
            Err(LogError::Poisoned(reason)) => {
                return Err(MemberError::Log(LogError::Poisoned(reason)))
            }
            Err(error) if self.storage.is_poisoned() => return Err(MemberError::Log(error)),
            Err(error) => warn!(
                index = task.index,
                %error,
                "writing a snapshot failed; the log stays uncompacted until the next one"
            ),
        }
        Ok(())
    }

    fn install_snapshot(&mut self, snapshot: Snapshot) -> Result<(), MemberError> {
        if let Some(restore) = self.restore.take() {
            // The leader's snapshot replaces whatever the thread would have rebuilt; it notices
            // and ends on its own.
            restore.cancel.store(true, Ordering::Relaxed);
            info!("a snapshot from the leader replaces the state being restored");
        }
        let index = snapshot.get_metadata().index;
        let mvcc = Mvcc::from_snapshot(snapshot.get_data())
            .map_err(|e| MemberError::Snapshot(e.to_string()))?;
        let data_bytes = snapshot.get_data().len() as u64;
        self.storage.apply_snapshot(snapshot)?;
        info!(
            index,
            revision = mvcc.current_revision(),
            "installed a snapshot from the leader"
        );
        {
            let mut current = self.shared.mvcc.write();
            *current = mvcc;
            // Watchers cannot be told what the snapshot skipped over; they end and resume.
            *self.shared.hub.lock() = WatchHub::new();
        }
        self.applied = index;
        self.last_snapshot_index = index;
        self.last_snapshot_bytes = data_bytes;
        self.state_is_back();
        self.wake_reads();
        Ok(())
    }

    /// The state machine is complete again (restored after the start, or installed from the
    /// leader's snapshot): lease clocks restart from it, clients are served, and the member
    /// campaigns at full priority.
    fn state_is_back(&mut self) {
        self.reset_lease_clocks();
        self.shared.restoring.store(false, Ordering::Release);
        self.node.raft.set_priority(RESTORED_PRIORITY);
    }

    /// Takes the rebuilt state machine from the restore thread once it is done, and applies
    /// what raft committed since from the log.
    fn finish_restore(&mut self) -> Result<(), MemberError> {
        let Some(task) = take_finished(&mut self.restore, |task| &task.thread) else {
            return Ok(());
        };
        let restored = task
            .thread
            .join()
            .map_err(|_| MemberError::Snapshot("the restore thread panicked".into()))??;
        *self.shared.mvcc.write() = restored.mvcc;
        self.applied = restored.applied;
        self.applied_term = restored.applied_term;
        let mut rest = 0;
        if self.committed_meanwhile > self.applied {
            let entries = raft::Storage::entries(
                &self.storage,
                self.applied + 1,
                self.committed_meanwhile + 1,
                None,
                raft::GetEntriesContext::empty(false),
            )?;
            rest = entries.len();
            self.apply_entries(entries)?;
        }
        self.state_is_back();
        info!(
            applied = self.applied,
            revision = self.shared.mvcc.read().current_revision(),
            replayed = restored.replayed,
            then_applied = rest,
            took_ms = task.started.elapsed().as_millis() as u64,
            "state machine restored: serving clients"
        );
        Ok(())
    }

    fn apply_entries(&mut self, entries: Vec<Entry>) -> Result<(), MemberError> {
        if entries.is_empty() {
            return Ok(());
        }
        if self.restore.is_some() {
            // Applied from the log once the state is back.
            if let Some(last) = entries.last() {
                self.committed_meanwhile = self.committed_meanwhile.max(last.index);
            }
            return Ok(());
        }
        let term = self.node.raft.term;
        let member_id = self.id;
        let shared = self.shared.clone();
        let mut mvcc = shared.mvcc.write();
        for entry in entries {
            if entry.index <= self.applied {
                continue;
            }
            if entry.get_entry_type() == EntryType::EntryNormal {
                if entry.data.is_empty() {
                    // A new leader's first entry: proposals of older terms not applied by now
                    // were most likely lost with the old leader; tell their clients now.
                    if entry.term > self.applied_term {
                        if let Some(since) = self.leading_since.take() {
                            info!(
                                term = entry.term,
                                index = entry.index,
                                after_ms = since.elapsed().as_millis() as u64,
                                "this leader's first entry applied: writes are served again"
                            );
                        }
                        for (seq, pending) in self.pending.iter() {
                            if pending.term < entry.term {
                                self.abandoned.push(*seq);
                            }
                        }
                    }
                } else {
                    self.apply_command(&mut mvcc, &entry.data, term, member_id);
                }
            }
            self.applied = entry.index;
            self.applied_term = entry.term;
        }
        drop(mvcc);
        self.wake_reads();
        Ok(())
    }

    fn apply_command(&mut self, mvcc: &mut Mvcc, data: &Bytes, term: u64, member_id: u64) {
        let Some(applied) = apply_proposal(mvcc, data, |mvcc, events| {
            self.notify(mvcc, events, member_id, term)
        }) else {
            return;
        };
        if let Some(cmd) = &applied.command {
            self.track_lease(cmd, &applied.result);
        }
        if applied.origin == self.id {
            if let Some(pending) = self.pending.remove(&applied.seq) {
                let _ = pending
                    .reply
                    .send(Ok(fill_header(applied.result, member_id, term)));
            }
        }
    }

    /// Hands the events of the revision just applied to the watchers.
    fn notify(&self, mvcc: &Mvcc, events: &[crate::types::Event], member_id: u64, term: u64) {
        if events.is_empty() {
            return;
        }
        let header = ResponseHeader {
            revision: mvcc.current_revision(),
            member_id,
            raft_term: term,
        };
        self.shared.hub.lock().notify(&header, events);
    }

    fn track_lease(&mut self, cmd: &Command, result: &CommandResult) {
        let now = Instant::now();
        let (id, deadline) = match (cmd, result) {
            (Command::LeaseGrant(_), CommandResult::LeaseGrant(granted)) => {
                let ttl = Duration::from_secs(granted.ttl.max(1) as u64);
                let clock = LeaseClock {
                    deadline: now + ttl,
                    ttl,
                    expire_proposed: None,
                };
                let deadline = clock.deadline;
                self.leases.insert(granted.id, clock);
                (granted.id, Some(deadline))
            }
            (Command::LeaseKeepAlive { id }, CommandResult::LeaseKeepAlive(_)) => {
                let Some(clock) = self.leases.get_mut(id) else {
                    return;
                };
                clock.deadline = now + clock.ttl;
                clock.expire_proposed = None;
                (*id, Some(clock.deadline))
            }
            (Command::LeaseRevoke { id } | Command::LeaseExpire { id }, _) => {
                self.leases.remove(id);
                (*id, None)
            }
            _ => return,
        };
        let mut published = self.shared.lease_deadlines.lock();
        match deadline {
            Some(deadline) => published.insert(id, deadline),
            None => published.remove(&id),
        };
    }

    fn on_read_state(&mut self, ctx: &[u8], index: u64) {
        let Ok(bytes) = <[u8; 8]>::try_from(ctx) else {
            return;
        };
        let Some(batch) = self.read_batches.remove(&u64::from_le_bytes(bytes)) else {
            return;
        };
        self.reads_waiting_apply
            .entry(index)
            .or_default()
            .extend(batch.replies);
        self.wake_reads();
    }

    fn wake_reads(&mut self) {
        while let Some(entry) = self.reads_waiting_apply.first_entry() {
            if *entry.key() > self.applied {
                break;
            }
            for reply in entry.remove() {
                let _ = reply.send(Ok(()));
            }
        }
    }

    fn send(&mut self, messages: Vec<Message>) {
        if messages.is_empty() {
            return;
        }
        let mut by_peer: HashMap<u64, Vec<Message>> = HashMap::new();
        for msg in messages {
            by_peer.entry(msg.to).or_default().push(msg);
        }
        for (to, batch) in by_peer {
            let has_snapshot = batch
                .iter()
                .any(|m| m.get_msg_type() == MessageType::MsgSnapshot);
            let delivered = match self.channels.outbound.get(&to) {
                Some(link) => link.try_send(OutboundBatch::new(batch)).is_ok(),
                None => false,
            };
            if !delivered {
                // raft resends what is lost; it only needs telling about snapshots and reachability.
                self.node.report_unreachable(to);
                if has_snapshot {
                    self.node.report_snapshot(to, SnapshotStatus::Failure);
                }
            }
        }
    }

    fn fail_all(&mut self, err: StoreError) {
        for (_, pending) in self.pending.drain() {
            self.shared.metrics.proposals_failed.inc();
            let _ = pending.reply.send(Err(err.clone()));
        }
        for (_, batch) in self.read_batches.drain() {
            for reply in batch.replies {
                let _ = reply.send(Err(err.clone()));
            }
        }
        for (_, replies) in std::mem::take(&mut self.reads_waiting_apply) {
            for reply in replies {
                let _ = reply.send(Err(err.clone()));
            }
        }
    }
}

/// Fills the member id and term into a result's header.
fn fill_header(mut result: CommandResult, member_id: u64, term: u64) -> CommandResult {
    let header = match &mut result {
        CommandResult::Put(r) => &mut r.header,
        CommandResult::DeleteRange(r) => &mut r.header,
        CommandResult::Txn(r) => &mut r.header,
        CommandResult::Compact(r) => &mut r.header,
        CommandResult::LeaseGrant(r) => &mut r.header,
        CommandResult::LeaseRevoke(r) => &mut r.header,
        CommandResult::LeaseKeepAlive(r) => &mut r.header,
        CommandResult::Error(_) => return result,
        CommandResult::Batch(results) => {
            let filled = std::mem::take(results)
                .into_iter()
                .map(|r| fill_header(r, member_id, term))
                .collect();
            return CommandResult::Batch(filled);
        }
    };
    header.member_id = member_id;
    header.raft_term = term;
    result
}

/// Takes the task out of `slot` once its thread has finished; `None` while it runs (or if
/// there is none).
fn take_finished<T, R>(
    slot: &mut Option<T>,
    thread: impl Fn(&T) -> &std::thread::JoinHandle<R>,
) -> Option<T> {
    if slot.as_ref().is_some_and(|task| thread(task).is_finished()) {
        slot.take()
    } else {
        None
    }
}

/// Starts the next round of a campaign that has not won after `retry` ticks rather than after a
/// whole campaign timeout ([`MemberConfig::campaign_retry_ticks`]). A round has just begun when a
/// (pre-)candidate's election clock is at zero: raft-rs zeroes it as it campaigns, and again
/// when a pre-candidate becomes a candidate.
fn shorten_campaign_retry<S: raft::Storage>(
    raft: &mut raft::Raft<S>,
    retry: std::ops::Range<usize>,
    rng: &mut impl rand::Rng,
) {
    if matches!(raft.state, StateRole::Candidate | StateRole::PreCandidate)
        && raft.election_elapsed == 0
    {
        let wait = rng.gen_range(retry);
        raft.election_elapsed = raft.randomized_election_timeout().saturating_sub(wait);
    }
}

/// A proposal applied to the state machine.
struct AppliedProposal {
    /// The proposing member and its sequence number (see [`PROPOSAL_HEADER`]).
    origin: u64,
    seq: u64,
    result: CommandResult,
    /// The command, unless it was a batch (whose transactions touch no lease) or undecodable.
    command: Option<Command>,
}

/// Decodes the proposal in a log entry and applies it to `mvcc`, calling `revision_done` with
/// the events of every revision it makes. `None` for an entry too short to be a proposal.
fn apply_proposal(
    mvcc: &mut Mvcc,
    data: &Bytes,
    mut revision_done: impl FnMut(&Mvcc, &[crate::types::Event]),
) -> Option<AppliedProposal> {
    if data.len() < PROPOSAL_HEADER {
        warn!(
            len = data.len(),
            "skipping a log entry too short to be a proposal"
        );
        return None;
    }
    let origin = u64::from_le_bytes(data[..8].try_into().unwrap_or_default());
    let seq = u64::from_le_bytes(data[8..PROPOSAL_HEADER].try_into().unwrap_or_default());
    // Put values stay views into the entry, which the in-memory log holds anyway.
    let decoded: Result<(Command, usize), _> = crate::types::shared_values::decode(data, || {
        bincode::serde::decode_from_slice(&data[PROPOSAL_HEADER..], bincode::config::standard())
    });
    let (result, command) = match decoded {
        Ok((Command::Batch(txns), _)) => {
            // One revision, and one watch notification, per transaction: watchers see
            // exactly what they would had the transactions come one by one.
            let results = txns
                .iter()
                .map(|txn| {
                    let (result, events) = mvcc.apply_txn(txn);
                    revision_done(mvcc, &events);
                    result
                })
                .collect();
            (CommandResult::Batch(results), None)
        }
        Ok((cmd, _)) => {
            let (result, events) = mvcc.apply(&cmd);
            revision_done(mvcc, &events);
            (result, Some(cmd))
        }
        Err(e) => {
            // Every member skips the same entry the same way, so they stay identical.
            warn!(error = %e, "skipping a log entry that does not decode");
            let result = CommandResult::Error(StoreError::InvalidRequest {
                reason: format!("undecodable entry: {e}"),
            });
            (result, None)
        }
    };
    Some(AppliedProposal {
        origin,
        seq,
        result,
        command,
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use raft::storage::MemStorage;

    /// A lone campaigner (its two peers silent) starts each next round within the retry window,
    /// not after a whole campaign timeout.
    #[test]
    fn a_campaign_that_did_not_win_tries_again_within_the_retry_window() {
        let storage = MemStorage::new_with_conf_state((vec![1, 2, 3], vec![]));
        let config = raft::Config {
            id: 1,
            election_tick: 10,
            min_election_tick: 12,
            max_election_tick: 20,
            heartbeat_tick: 1,
            pre_vote: true,
            check_quorum: true,
            ..Default::default()
        };
        let logger = crate::raft_trace::raft_logger("t");
        let mut node = RawNode::new(&config, storage, &logger).expect("raft node");
        let retry = 4..12;
        let mut rng = rand::thread_rng();
        // The first campaign comes after the follower's timeout.
        let mut ticks = 0;
        while node.raft.state == StateRole::Follower {
            shorten_campaign_retry(&mut node.raft, retry.clone(), &mut rng);
            node.tick();
            ticks += 1;
            assert!(ticks < 20, "no campaign within the follower's timeout");
        }
        assert!(ticks >= 12, "campaigned after {ticks} ticks");
        for round in 0..20 {
            let mut ticks = 0;
            let rounds_before = node.raft.election_elapsed;
            assert_eq!(rounds_before, 0, "round {round} begins at zero");
            loop {
                shorten_campaign_retry(&mut node.raft, retry.clone(), &mut rng);
                node.tick();
                ticks += 1;
                if node.raft.election_elapsed == 0 {
                    break;
                }
                assert!(
                    ticks < retry.end,
                    "round {round}: no retry within {ticks} ticks"
                );
            }
            assert!(
                (retry.start..=retry.end).contains(&ticks),
                "round {round}: retried after {ticks} ticks"
            );
        }
    }
}
