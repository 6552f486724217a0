//! [`Driver`]: the raft thread's loop. It owns the `RawNode`, steps it with what arrives, runs
//! each `Ready` in raft-rs's order (send, install a snapshot, apply, append, persist, send what
//! waited for the fsync, advance), and turns what the pure parts decide — [`Proposals`],
//! [`ReadIndexQueue`], [`LeaseClocks`], [`RestoreHandover`] — into answers and proposals.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use raft::prelude::{ConfState, Entry, EntryType, Message, MessageType, Snapshot};
use raft::{RawNode, ReadOnlyOption, SnapshotStatus, StateRole};
use tokio::sync::{mpsc, oneshot, watch};
use tracing::{debug, info, warn};

use super::apply::{apply_proposal, fill_header, stamp, PROPOSAL_HEADER};
use super::lease_clock::{DeadlineChange, LeaseClocks};
use super::proposals::Proposals;
use super::read_index::{ReadIndexQueue, ReadIssue};
use super::restore::{RestoreHandover, RestoreTask};
use super::{
    stopping, DriverChannels, DriverParts, DriverRequest, MemberError, PeerFeedback, RaftStatus,
    Shared,
};
use crate::mvcc::Mvcc;
use crate::peer_backlog::OutboundBatch;
use crate::raft_log::{DiskStorage, LogError, SnapshotWrite};
use crate::types::{Command, CommandResult, ResponseHeader, StoreError};
use crate::watch_hub::WatchHub;

/// How many queued requests or peer messages the driver takes before it builds a `Ready`.
const MAX_DRAIN: usize = 4096;

type ProposalWaiter = oneshot::Sender<Result<CommandResult, StoreError>>;
type ReadWaiter = oneshot::Sender<Result<(), StoreError>>;

/// A local snapshot being encoded and written by its own thread.
struct SnapshotTask {
    index: u64,
    /// How long the raft thread spent starting it (the state view and the WAL rotation).
    pause: Duration,
    cancel: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Result<(SnapshotWrite, bool), LogError>>,
}

/// The raft driver: owns the `RawNode` and applies committed entries.
pub(super) struct Driver {
    node: RawNode<DiskStorage>,
    shared: Arc<Shared>,
    storage: DiskStorage,
    requests: mpsc::Receiver<DriverRequest>,
    channels: DriverChannels,
    id: u64,
    proposals: Proposals<ProposalWaiter>,
    reads: ReadIndexQueue<ReadWaiter>,
    leases: LeaseClocks,
    applied: u64,
    applied_term: u64,
    last_snapshot_index: u64,
    /// Size of the last snapshot taken or installed (of the file on disk after a restart).
    last_snapshot_bytes: u64,
    snapshot_task: Option<SnapshotTask>,
    /// The thread rebuilding the state machine after the start, until it hands over.
    restore_task: Option<RestoreTask>,
    restore: RestoreHandover,
    was_leader: bool,
    /// The leader as of the last `Ready` (for `etcd_server_leader_changes_seen_total`).
    leader_seen: u64,
    /// When this member last became leader, until its first entry of that term is applied.
    leading_since: Option<Instant>,
    last_progress: Instant,
}

/// Counter for unique proposal sequence numbers across restarts of the driver in one process.
static SEQ_BASE: AtomicU64 = AtomicU64::new(0);

impl Driver {
    pub(super) fn new(parts: DriverParts, channels: DriverChannels) -> Result<Driver, MemberError> {
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
        let first_seq = start.wrapping_shl(16) ^ SEQ_BASE.fetch_add(1 << 40, Ordering::Relaxed);
        let last_snapshot_bytes = parts.storage.snapshot_file_bytes();
        let restore_task = RestoreTask::start(parts.storage.clone(), config)?;
        let now = Instant::now();
        let mut driver = Driver {
            id: config.id(),
            node,
            storage: parts.storage,
            requests: parts.requests,
            channels,
            proposals: Proposals::new(first_seq, config.request_timeout, now),
            reads: ReadIndexQueue::new(config.request_timeout),
            leases: LeaseClocks::default(),
            applied: parts.applied,
            applied_term: 0,
            last_snapshot_index: parts.applied,
            last_snapshot_bytes,
            snapshot_task: None,
            restore_task: Some(restore_task),
            restore: RestoreHandover::restoring(parts.applied),
            was_leader: false,
            leader_seen: raft::INVALID_ID,
            leading_since: None,
            last_progress: now,
            shared: parts.shared,
        };
        driver.reset_lease_clocks();
        Ok(driver)
    }

    pub(super) async fn run(mut self, shutdown: watch::Receiver<bool>) -> Result<(), MemberError> {
        let result = self.run_loop(shutdown).await;
        if let Some(task) = self.snapshot_task.take() {
            // Its commit must not race a later open of the same directory.
            task.cancel.store(true, Ordering::Relaxed);
            let _ = task.thread.join();
        }
        if let Some(restore) = self.restore_task.take() {
            restore.cancel_and_join();
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
            let is_leader = self.node.raft.state == StateRole::Leader;
            let window = self.shared.config.batch_window;
            if let Some(wait) = self.proposals.batch_wait(Instant::now(), window, is_leader) {
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
                .set(self.proposals.len() as i64);
            self.shared.driver_ran();
        }
        self.fail_all(stopping());
        Ok(())
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
            DriverRequest::Read { reply } => self.reads.push(reply),
        }
    }

    /// Proposes one command; a proposal raft refuses outright (no leader known) is answered
    /// `NoLeader` at once, since it certainly was not applied.
    fn propose(&mut self, mut data: Vec<u8>, reply: ProposalWaiter) {
        let seq = self.proposals.next_seq();
        stamp(&mut data, self.id, seq);
        if let Err(e) = self.node.propose(vec![], data) {
            debug!(error = %e, "proposal dropped");
            self.fail_proposals([reply], self.no_leader());
            return;
        }
        let term = self.node.raft.term;
        self.proposals.proposed(seq, reply, term, Instant::now());
    }

    /// Answers proposals with an error (`etcd_server_proposals_failed_total` counts them).
    fn fail_proposals(&self, waiters: impl IntoIterator<Item = ProposalWaiter>, err: StoreError) {
        for waiter in waiters {
            self.shared.metrics.proposals_failed.inc();
            let _ = waiter.send(Err(err.clone()));
        }
    }

    fn no_leader(&self) -> StoreError {
        let leader = self.node.raft.leader_id;
        StoreError::NoLeader {
            member: self.shared.config.name.clone(),
            leader_hint: self.shared.config.member_name(leader).map(str::to_string),
        }
    }

    fn has_leader(&self) -> bool {
        self.node.raft.leader_id != raft::INVALID_ID
    }

    fn issue_reads(&mut self) {
        match self.reads.issue(self.has_leader(), Instant::now()) {
            ReadIssue::Nothing => {}
            ReadIssue::NoLeader(waiters) => answer_reads(waiters, Err(self.no_leader())),
            ReadIssue::ReadIndex(ctx) => self.node.read_index(ctx),
        }
    }

    fn on_tick(&mut self) {
        shorten_campaign_retry(
            &mut self.node.raft,
            self.shared.config.campaign_retry_ticks(),
            &mut rand::thread_rng(),
        );
        self.node.tick();
        let now = Instant::now();
        let expired = self.proposals.expire(now);
        self.fail_proposals(expired, StoreError::Timeout);
        let reads = self.reads.tick(now, self.has_leader());
        answer_reads(reads.expired, Err(StoreError::Timeout));
        for ctx in reads.retry {
            self.node.read_index(ctx);
        }
        if self.node.raft.state == StateRole::Leader {
            for id in self.leases.expire(now) {
                self.propose_lease_expiry(id);
            }
        }
        if now.duration_since(self.last_progress) >= self.shared.config.progress_interval {
            self.last_progress = now;
            let mvcc = self.shared.mvcc.read();
            let header = self.shared.header(mvcc.current_revision());
            self.shared.hub.lock().progress(&header);
        }
    }

    fn propose_lease_expiry(&mut self, id: crate::types::LeaseId) {
        info!(lease = id, "lease expired; revoking it");
        let mut data = vec![0u8; PROPOSAL_HEADER];
        let cmd = Command::LeaseExpire { id };
        if bincode::serde::encode_into_std_write(&cmd, &mut data, bincode::config::standard())
            .is_ok()
        {
            // Sequence 0 is never a waiter's, so nobody is answered for it.
            stamp(&mut data, self.id, 0);
            if let Err(e) = self.node.propose(vec![], data) {
                debug!(error = %e, "lease expiry proposal dropped");
            }
        }
    }

    /// Restarts the lease clocks from the state machine and publishes the deadlines (see
    /// [`LeaseClocks`]: whoever leads keeps them, from a whole TTL).
    fn reset_lease_clocks(&mut self) {
        let leases = self.shared.mvcc.read().leases();
        let deadlines = self.leases.reset(leases, Instant::now());
        *self.shared.lease_deadlines.lock() = deadlines;
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
            self.proposals.appended(Instant::now());
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
            let answered =
                self.reads
                    .read_state(&read_state.request_ctx, read_state.index, self.applied);
            answer_reads(answered, Ok(()));
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
        let abandoned = self.proposals.take_abandoned();
        self.fail_proposals(abandoned, StoreError::Timeout);
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
    ///
    /// [`MemberConfig`]: crate::config::MemberConfig
    fn snapshot_due(&self) -> bool {
        if self.restore.is_restoring() {
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
        if self.restore.snapshot_installed() {
            // The leader's snapshot replaces whatever the thread would have rebuilt; it notices
            // and ends on its own.
            if let Some(task) = self.restore_task.take() {
                task.cancel.store(true, Ordering::Relaxed);
            }
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
            self.shared.hub.lock().clear();
        }
        self.applied = index;
        self.last_snapshot_index = index;
        self.last_snapshot_bytes = data_bytes;
        self.state_is_back();
        let answered = self.reads.applied(self.applied);
        answer_reads(answered, Ok(()));
        Ok(())
    }

    /// The state machine is complete again (restored after the start, or installed from the
    /// leader's snapshot): lease clocks restart from it, clients are served, and the member
    /// campaigns at full priority.
    fn state_is_back(&mut self) {
        self.reset_lease_clocks();
        self.shared.restoring.store(false, Ordering::Release);
        self.node.raft.set_priority(self.restore.priority());
    }

    /// Takes the rebuilt state machine from the restore thread once it is done, and applies
    /// what raft committed since from the log.
    fn finish_restore(&mut self) -> Result<(), MemberError> {
        let Some(task) = take_finished(&mut self.restore_task, |task| &task.thread) else {
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
        if let Some((low, high)) = self.restore.restored(self.applied) {
            let entries = raft::Storage::entries(
                &self.storage,
                low,
                high,
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
        let Some(last) = entries.last() else {
            return Ok(());
        };
        if self.restore.hold_back(last.index) {
            // Applied from the log once the state is back.
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
                        self.proposals.leader_entry_applied(entry.term);
                    }
                } else {
                    self.apply_command(&mut mvcc, &entry.data, term, member_id);
                }
            }
            self.applied = entry.index;
            self.applied_term = entry.term;
        }
        drop(mvcc);
        let answered = self.reads.applied(self.applied);
        answer_reads(answered, Ok(()));
        Ok(())
    }

    fn apply_command(&mut self, mvcc: &mut Mvcc, data: &Bytes, term: u64, member_id: u64) {
        let hub = &self.shared.hub;
        let Some(applied) = apply_proposal(mvcc, data, |mvcc, events| {
            notify(hub, mvcc, events, member_id, term)
        }) else {
            return;
        };
        if let Some(cmd) = &applied.command {
            if let Some(change) = self.leases.applied(cmd, &applied.result, Instant::now()) {
                let mut published = self.shared.lease_deadlines.lock();
                match change {
                    DeadlineChange::Set(id, deadline) => published.insert(id, deadline),
                    DeadlineChange::Removed(id) => published.remove(&id),
                };
            }
        }
        if applied.origin == self.id {
            if let Some(waiter) = self.proposals.applied(applied.seq) {
                let _ = waiter.send(Ok(fill_header(applied.result, member_id, term)));
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
        let proposals = self.proposals.drain();
        self.fail_proposals(proposals, err.clone());
        answer_reads(self.reads.drain(), Err(err));
    }
}

fn answer_reads(waiters: Vec<ReadWaiter>, answer: Result<(), StoreError>) {
    for waiter in waiters {
        let _ = waiter.send(answer.clone());
    }
}

/// Hands the events of the revision just applied to the watchers.
fn notify(
    hub: &parking_lot::Mutex<WatchHub>,
    mvcc: &Mvcc,
    events: &[crate::types::Event],
    member_id: u64,
    term: u64,
) {
    if events.is_empty() {
        return;
    }
    let header = ResponseHeader {
        revision: mvcc.current_revision(),
        member_id,
        raft_term: term,
    };
    hub.lock().notify(&header, events);
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
