//! The durable raft state of one member: log entries, hard state, conf state and the latest
//! snapshot, all under one directory, served to raft-rs through [`raft::Storage`].
//!
//! Reads never touch the disk: the retained log (every entry after the snapshot index, and after
//! a local snapshot a tail of catch-up entries before it) is held in memory, and the disk is only
//! read back by [`DiskStorage::open`].
//!
//! # On-disk format
//!
//! All integers are little-endian.
//!
//! - `wal-<generation as 16 hex digits>.log`: a write-ahead log of records
//!   `[u32 payload len][u32 crc32 of (kind byte ++ payload)][u8 kind][payload]`. Kinds:
//!   `1` Entries (a batch: `[u32 len][protobuf Entry]` repeated), `2` HardState (protobuf),
//!   `3` ConfState (protobuf), `4` Continue (`[u64 generation]`: the log goes on in that WAL; it is
//!   always a file's last record). Replay applies them in order with the same rules as the live
//!   calls (an Entries record starting at or below the last index truncates the conflicting
//!   suffix) and follows Continue records from one file to the next.
//! - `snapshot`: `[8 bytes "KEMUSNP1"][u32 crc32 of everything after this field]
//!   [u64 WAL generation][u32 metadata len][protobuf SnapshotMetadata][state machine data]`.
//!   Absent until the first snapshot.
//!
//! # Crash safety
//!
//! The snapshot file is the commit point of every compaction. Installing a snapshot from the leader
//! writes the retained entries, hard state and conf state to a fresh WAL of the next generation and
//! fsyncs it, then writes `snapshot.tmp` naming that generation, fsyncs it, renames it over
//! `snapshot` and fsyncs the directory. A crash before the rename leaves the old snapshot and the
//! old WAL chain, both intact (the half-written new WAL is reached by no Continue record and is
//! deleted on open); a crash after it leaves the new pair.
//!
//! A local snapshot is taken in three steps so that the raft thread only does the cheap one
//! ([`DiskStorage::begin_snapshot`]): it *rotates* the WAL — writes the hard state, conf state and
//! the entries after the snapshot index to a fresh WAL of the next generation, fsyncs it and the
//! directory, then appends a Continue record naming it to the current WAL and fsyncs that — and
//! appends go to the new WAL from then on. The state machine data is then streamed to
//! `snapshot.local.tmp` (any thread, [`PendingSnapshot::write`]), and
//! [`PendingSnapshot::commit`] renames it over `snapshot` (which names the rotated generation),
//! fsyncs the directory and only then drops the compacted entries and the older WALs. Until that
//! rename, recovery replays the old snapshot's WAL and follows the Continue record into the new
//! one, so a crash at any point leaves a snapshot and a complete log.
//!
//! Recovery opens the WAL generation the snapshot names and every generation reached from it by
//! Continue records; other WAL files are stale and deleted.
//!
//! Appends are buffered and become durable only in [`DiskStorage::sync`] (one fdatasync per
//! call), so a crash can tear the last record: open cuts such a tail off. A bad record with a valid
//! record after it cannot be a torn write, so open refuses to start rather than serve wrong data.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::RwLock;
use protobuf::Message;
use raft::eraftpb::{ConfState, Entry, HardState, Snapshot, SnapshotMetadata};
use raft::{GetEntriesContext, RaftState, StorageError};

const SNAPSHOT_FILE: &str = "snapshot";
const SNAPSHOT_TMP_FILE: &str = "snapshot.tmp";
/// Where a local snapshot is written off the raft thread (a separate name from the one installs
/// use under the storage lock, so the two never write the same file).
const SNAPSHOT_LOCAL_TMP_FILE: &str = "snapshot.local.tmp";
const SNAPSHOT_MAGIC: &[u8; 8] = b"KEMUSNP1";
/// Magic, crc, generation and metadata length.
const SNAPSHOT_HEADER: usize = 8 + 4 + 8 + 4;
const WAL_PREFIX: &str = "wal-";
const WAL_SUFFIX: &str = ".log";
/// Length, crc and kind.
const RECORD_HEADER: usize = 4 + 4 + 1;
/// Large enough that a Ready of a few hundred ~1 KB entries is one `write` syscall.
const WAL_BUFFER: usize = 1 << 20;
/// The encode buffer is kept between records; past this size it is given back after use.
const SCRATCH_KEEP: usize = 8 << 20;

/// Why the durable raft storage failed.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("I/O error on {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The files do not hold what was written: the member must not start from them.
    #[error("corrupt raft storage {} at offset {offset}: {reason}", path.display())]
    Corrupt {
        path: PathBuf,
        offset: u64,
        reason: String,
    },
    #[error("encoding a raft record: {0}")]
    Encode(String),
    /// Appended entries would leave a gap or overwrite compacted entries (a driver bug).
    #[error(
        "entries starting at index {first} do not fit the log (snapshot index {snapshot_index}, \
         last index {last_index}): {reason}"
    )]
    NonContiguous {
        first: u64,
        snapshot_index: u64,
        last_index: u64,
        reason: String,
    },
    #[error("snapshot at index {index} is older than the stored snapshot at index {current}")]
    SnapshotOutOfDate { index: u64, current: u64 },
    #[error("cannot snapshot at index {index}: {reason}")]
    InvalidSnapshotIndex { index: u64, reason: String },
    #[error("raft storage is already initialized")]
    AlreadyInitialized,
    /// An earlier write or fsync failed, so what is on disk is unknown: restart and recover.
    #[error("raft storage is unusable after an earlier failure: {0}")]
    Poisoned(String),
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> LogError + '_ {
    move |source| LogError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn corrupt(path: &Path, offset: usize, reason: impl Into<String>) -> LogError {
    LogError::Corrupt {
        path: path.to_path_buf(),
        offset: offset as u64,
        reason: reason.into(),
    }
}

/// Durable raft state of one member: log entries, hard state, conf state and the latest snapshot,
/// under one directory.
#[derive(Clone)]
pub struct DiskStorage {
    inner: Arc<RwLock<Inner>>,
}

struct Inner {
    dir: PathBuf,
    /// The WAL generation named by the snapshot file (0 before the first snapshot).
    generation: u64,
    /// The generation of the WAL appends go to: the end of the chain starting at `generation`.
    wal_generation: u64,
    /// The latest snapshot's metadata; index 0 means there is none. Its data stays on disk and is
    /// read when asked for (it can be GBs).
    snapshot: SnapshotMetadata,
    log: RetainedLog,
    hard_state: HardState,
    conf_state: ConfState,
    wal: WalWriter,
    /// Set when a write or fsync failed: the WAL may now hold a partial record, so nothing more
    /// may be appended to it (fsync errors in particular must not be retried).
    poisoned: Option<String>,
    /// fdatasyncs of the WAL since the storage was opened.
    syncs: u64,
}

impl DiskStorage {
    /// Opens (creating if absent) the storage in `dir`. Recovers the latest snapshot (metadata and
    /// data), then the WAL generation it names.
    ///
    /// A torn last record (a write that never completed, hence was never fsynced, hence never
    /// acknowledged) is cut off and the file truncated, with a warning. A record that fails its
    /// checksum with a valid record after it, a checksummed record that does not decode, or a
    /// snapshot file that fails its checksum is [`LogError::Corrupt`].
    pub fn open(dir: &Path) -> Result<DiskStorage, LogError> {
        fs::create_dir_all(dir).map_err(io_error(dir))?;
        for name in [SNAPSHOT_TMP_FILE, SNAPSHOT_LOCAL_TMP_FILE] {
            let tmp = dir.join(name);
            if tmp.exists() {
                fs::remove_file(&tmp).map_err(io_error(&tmp))?;
            }
        }

        let (generation, mut snapshot) =
            read_snapshot_file(&dir.join(SNAPSHOT_FILE))?.unwrap_or_default();
        let snapshot = snapshot.take_metadata();
        let wal_files = list_wal_files(dir)?;
        let wal_file = wal_path(dir, generation);
        let wal_exists = wal_files.iter().any(|(g, _)| *g == generation);
        if !wal_exists && (generation > 0 || !wal_files.is_empty()) {
            return Err(corrupt(
                &wal_file,
                0,
                format!("WAL generation {generation} is missing"),
            ));
        }

        let meta = &snapshot;
        let mut recovered = Recovered {
            log: RetainedLog::new(meta.index, meta.term),
            hard_state: HardState::default(),
            conf_state: meta.get_conf_state().clone(),
        };
        let mut chain = vec![generation];
        let mut wal_file = wal_file;
        let wal = if wal_exists {
            let (buf, valid) = loop {
                let buf = Bytes::from(fs::read(&wal_file).map_err(io_error(&wal_file))?);
                let (valid, next) = recovered.replay(&wal_file, &buf)?;
                let Some(next) = next else {
                    break (buf, valid);
                };
                if next <= chain[chain.len() - 1] || !wal_files.iter().any(|(g, _)| *g == next) {
                    return Err(corrupt(
                        &wal_file,
                        valid,
                        format!("the WAL continues in generation {next}, which is missing"),
                    ));
                }
                chain.push(next);
                wal_file = wal_path(dir, next);
            };
            if valid < buf.len() {
                tracing::warn!(
                    file = %wal_file.display(),
                    offset = valid,
                    dropped_bytes = buf.len() - valid,
                    "cutting off a torn last WAL record (it was never synced)"
                );
                let file = OpenOptions::new()
                    .write(true)
                    .open(&wal_file)
                    .map_err(io_error(&wal_file))?;
                file.set_len(valid as u64).map_err(io_error(&wal_file))?;
                file.sync_all().map_err(io_error(&wal_file))?;
            }
            WalWriter::open(&wal_file, false)?
        } else {
            let wal = WalWriter::open(&wal_file, true)?;
            sync_dir(dir)?;
            wal
        };
        recovered.check(&wal_file)?;

        for (stale, path) in wal_files {
            if !chain.contains(&stale) {
                // Either superseded by the snapshot, or written by a snapshot install or a WAL
                // rotation that crashed before its commit point.
                if let Err(error) = fs::remove_file(&path) {
                    tracing::warn!(file = %path.display(), %error, "cannot remove a stale WAL file");
                }
            }
        }

        let Recovered {
            log,
            hard_state,
            conf_state,
        } = recovered;
        Ok(DiskStorage {
            inner: Arc::new(RwLock::new(Inner {
                dir: dir.to_path_buf(),
                generation,
                wal_generation: chain[chain.len() - 1],
                snapshot,
                log,
                hard_state,
                conf_state,
                wal,
                poisoned: None,
                syncs: 0,
            })),
        })
    }

    /// True when nothing was ever persisted (fresh member): the caller then calls
    /// [`initialize`](Self::initialize) with the initial voters.
    pub fn is_fresh(&self) -> bool {
        self.inner.read().is_fresh()
    }

    /// Durably records the initial voters as the conf state of a fresh member.
    pub fn initialize(&self, voters: &[u64]) -> Result<(), LogError> {
        let mut inner = self.inner.write();
        if !inner.is_fresh() {
            return Err(LogError::AlreadyInitialized);
        }
        let conf_state = ConfState {
            voters: voters.to_vec(),
            ..ConfState::default()
        };
        inner.write(|wal| wal.write_message(RecordKind::ConfState, &conf_state))?;
        inner.conf_state = conf_state;
        inner.sync().map(|_| ())
    }

    /// Appends entries (from `Ready::entries()`); an entry whose index is at or below the last index
    /// truncates the conflicting suffix first. Written to the WAL but not fsynced.
    pub fn append(&self, entries: &[Entry]) -> Result<(), LogError> {
        if entries.is_empty() {
            return Ok(());
        }
        let mut inner = self.inner.write();
        inner
            .log
            .check_append(entries)
            .map_err(|reason| LogError::NonContiguous {
                first: entries[0].index,
                snapshot_index: inner.log.base_index,
                last_index: inner.log.last_index(),
                reason,
            })?;
        inner.write(|wal| wal.write_entries(entries))?;
        inner.log.append(entries);
        Ok(())
    }

    /// Records the hard state (term, vote, commit). Written, not fsynced.
    pub fn set_hard_state(&self, hard_state: &HardState) -> Result<(), LogError> {
        self.inner.write().set_hard_state(hard_state.clone())
    }

    /// Updates only the commit index of the hard state (`LightReady::commit_index`). Written, not
    /// fsynced.
    pub fn set_commit(&self, commit: u64) -> Result<(), LogError> {
        let mut inner = self.inner.write();
        let hard_state = HardState {
            commit,
            ..inner.hard_state.clone()
        };
        inner.set_hard_state(hard_state)
    }

    /// Records the conf state after a conf change entry is applied (`RawNode::apply_conf_change`),
    /// so that a restart with `Config.applied` past that entry still knows the membership. Written,
    /// not fsynced.
    pub fn set_conf_state(&self, conf_state: &ConfState) -> Result<(), LogError> {
        let mut inner = self.inner.write();
        if inner.conf_state == *conf_state {
            return Ok(());
        }
        inner.write(|wal| wal.write_message(RecordKind::ConfState, conf_state))?;
        inner.conf_state = conf_state.clone();
        Ok(())
    }

    /// Makes everything written so far durable (flush + fdatasync). Call it once per Ready, before
    /// sending the persisted messages.
    pub fn sync(&self) -> Result<(), LogError> {
        self.sync_timed().map(|_| ())
    }

    /// [`DiskStorage::sync`], saying how long the fdatasync took when there was one to make.
    pub fn sync_timed(&self) -> Result<Option<Duration>, LogError> {
        self.inner.write().sync()
    }

    /// Installs a snapshot received from the leader. The snapshot (data and metadata), a hard state
    /// whose commit is at least the snapshot index and the entries after the snapshot (kept only if
    /// the log holds the snapshot's index with the snapshot's term) become durable atomically.
    pub fn apply_snapshot(&self, snapshot: Snapshot) -> Result<(), LogError> {
        let mut inner = self.inner.write();
        let meta = snapshot.get_metadata();
        let current = inner.snapshot.index;
        if meta.index < current {
            return Err(LogError::SnapshotOutOfDate {
                index: meta.index,
                current,
            });
        }
        let retained = if inner.log.term(meta.index) == Some(meta.term) {
            inner.log.entries_after(meta.index)
        } else {
            Vec::new()
        };
        let mut hard_state = inner.hard_state.clone();
        hard_state.commit = hard_state.commit.max(meta.index);
        if meta.term > hard_state.term {
            // The vote was cast (and persisted) in an older term, so it says nothing about this one.
            hard_state.term = meta.term;
            hard_state.vote = 0;
        }
        let conf_state = meta.get_conf_state().clone();
        inner.install(snapshot, retained, hard_state, conf_state)
    }

    /// Stores a local snapshot taken at `index` (at most the applied index) with the state machine
    /// `data`, then compacts the log: entries up to `index` are dropped from memory and disk.
    /// [`begin_snapshot`](Self::begin_snapshot), [`PendingSnapshot::write`] and
    /// [`PendingSnapshot::commit`] in one call.
    ///
    /// `conf_state` is the conf state as of `index`; it also becomes the current conf state, which
    /// is right when, as the driver does, the snapshot is taken at the applied index.
    pub fn create_snapshot(
        &self,
        index: u64,
        conf_state: ConfState,
        data: Vec<u8>,
    ) -> Result<(), LogError> {
        let Some(pending) = self.begin_snapshot(index, conf_state)? else {
            return Ok(());
        };
        pending.write(&AtomicBool::new(false), |out| out.write_all(&data))?;
        pending.commit()?;
        self.compact_to_snapshot(0);
        Ok(())
    }

    /// Drops the entries up to the snapshot's index from memory but the last `catch_up` of them,
    /// once [`PendingSnapshot::commit`] made the snapshot durable. The raft thread calls it
    /// (between steps), so raft never sees the log's first index move in the middle of one.
    ///
    /// The kept entries let a follower that fell behind by fewer than `catch_up` entries (a
    /// member restarted while the others took a snapshot) catch up from the log rather than
    /// through the whole snapshot, as etcd keeps `SnapshotCatchUpEntries`. They live in memory
    /// only: the rotated WAL starts after the snapshot index, so after a restart the log does
    /// too.
    pub fn compact_to_snapshot(&self, catch_up: u64) {
        let mut inner = self.inner.write();
        let (index, term) = (inner.snapshot.index, inner.snapshot.term);
        if inner.log.term(index) != Some(term) {
            return;
        }
        let to = index.saturating_sub(catch_up);
        if to <= inner.log.base_index {
            return;
        }
        let Some(to_term) = inner.log.term(to) else {
            return;
        };
        let compacted = ((to - inner.log.base_index) as usize).min(inner.log.entries.len());
        inner.log.entries.drain(..compacted);
        inner.log.base_index = to;
        inner.log.base_term = to_term;
    }

    /// Starts a local snapshot at `index` (at most the applied index): checks the index, rotates
    /// the WAL (see the module docs) and returns what the state machine data is to be written
    /// with, off the caller's thread if it likes. `None` when the snapshot is already at `index`.
    /// Costs two small fsyncs; the log is compacted only by [`PendingSnapshot::commit`].
    pub fn begin_snapshot(
        &self,
        index: u64,
        conf_state: ConfState,
    ) -> Result<Option<PendingSnapshot>, LogError> {
        let mut inner = self.inner.write();
        inner.check_usable()?;
        // The snapshot's index, not the log's base: catch-up entries may lie before it.
        let current = inner.snapshot.index;
        if index == current {
            return Ok(None);
        }
        if index < current {
            return Err(LogError::SnapshotOutOfDate { index, current });
        }
        if index > inner.hard_state.commit {
            return Err(LogError::InvalidSnapshotIndex {
                index,
                reason: format!("beyond the commit index {}", inner.hard_state.commit),
            });
        }
        let Some(term) = inner.log.term(index) else {
            return Err(LogError::InvalidSnapshotIndex {
                index,
                reason: format!("beyond the last index {}", inner.log.last_index()),
            });
        };
        let generation = inner.wal_generation + 1;
        let retained = inner.log.entries_after(index);
        inner.rotate(generation, &retained)?;
        let mut meta = SnapshotMetadata {
            index,
            term,
            ..SnapshotMetadata::default()
        };
        meta.set_conf_state(conf_state);
        Ok(Some(PendingSnapshot {
            storage: self.clone(),
            tmp: inner.dir.join(SNAPSHOT_LOCAL_TMP_FILE),
            meta,
            generation,
        }))
    }

    /// The latest snapshot (what recovery found, or the last one stored), read from disk, so the
    /// driver can restore its state machine; `None` before the first snapshot.
    pub fn snapshot_data(&self) -> Result<Option<(SnapshotMetadata, Vec<u8>)>, LogError> {
        let (dir, index) = {
            let inner = self.inner.read();
            (inner.dir.clone(), inner.snapshot.index)
        };
        if index == 0 {
            return Ok(None);
        }
        let path = dir.join(SNAPSHOT_FILE);
        match read_snapshot_file(&path)? {
            Some((_, mut snapshot)) => Ok(Some((snapshot.take_metadata(), snapshot.data.to_vec()))),
            None => Err(corrupt(&path, 0, "the snapshot file is gone")),
        }
    }

    pub fn hard_state(&self) -> HardState {
        self.inner.read().hard_state.clone()
    }

    pub fn conf_state(&self) -> ConfState {
        self.inner.read().conf_state.clone()
    }

    /// The index the latest snapshot covers (0 before the first).
    pub fn snapshot_index(&self) -> u64 {
        self.inner.read().snapshot.index
    }

    pub fn first_index(&self) -> u64 {
        self.inner.read().log.first_index()
    }

    pub fn last_index(&self) -> u64 {
        self.inner.read().log.last_index()
    }

    /// True once a failed write or fsync made the storage refuse further writes.
    pub fn is_poisoned(&self) -> bool {
        self.inner.read().poisoned.is_some()
    }

    /// Entries held in memory: those after the last snapshot and the catch-up entries before it.
    pub fn entry_count(&self) -> u64 {
        self.inner.read().log.entries.len() as u64
    }

    /// Bytes in the WAL file appends go to. A local snapshot starts a new one, so this is about
    /// what was logged since the last snapshot began.
    pub fn wal_bytes(&self) -> u64 {
        self.inner.read().wal.len
    }

    /// fdatasyncs of the WAL made by [`DiskStorage::sync`] since the storage was opened.
    pub fn wal_syncs(&self) -> u64 {
        self.inner.read().syncs
    }

    /// Bytes of the snapshot file; 0 if there is none.
    pub fn snapshot_file_bytes(&self) -> u64 {
        let path = self.inner.read().dir.join(SNAPSHOT_FILE);
        fs::metadata(path).map_or(0, |meta| meta.len())
    }

    /// Bytes in the files under the storage directory (buffered, unsynced writes excluded).
    pub fn disk_size(&self) -> u64 {
        let dir = self.inner.read().dir.clone();
        let Ok(read_dir) = fs::read_dir(&dir) else {
            return 0;
        };
        read_dir
            .filter_map(|entry| entry.ok()?.metadata().ok())
            .filter(|meta| meta.is_file())
            .map(|meta| meta.len())
            .sum()
    }
}

impl Inner {
    fn is_fresh(&self) -> bool {
        self.log.base_index == 0
            && self.log.entries.is_empty()
            && self.hard_state == HardState::default()
            && self.conf_state == ConfState::default()
    }

    fn set_hard_state(&mut self, hard_state: HardState) -> Result<(), LogError> {
        if self.hard_state == hard_state {
            return Ok(());
        }
        self.write(|wal| wal.write_message(RecordKind::HardState, &hard_state))?;
        self.hard_state = hard_state;
        Ok(())
    }

    fn check_usable(&self) -> Result<(), LogError> {
        match &self.poisoned {
            Some(reason) => Err(LogError::Poisoned(reason.clone())),
            None => Ok(()),
        }
    }

    /// Runs a write against the WAL, poisoning the storage if it fails midway.
    fn write(
        &mut self,
        op: impl FnOnce(&mut WalWriter) -> Result<(), LogError>,
    ) -> Result<(), LogError> {
        self.check_usable()?;
        let result = op(&mut self.wal);
        if let Err(error @ LogError::Io { .. }) = &result {
            self.poisoned = Some(error.to_string());
        }
        result
    }

    fn sync(&mut self) -> Result<Option<Duration>, LogError> {
        self.check_usable()?;
        if !self.wal.unsynced {
            return Ok(None);
        }
        self.syncs += 1;
        let started = Instant::now();
        self.write(WalWriter::sync)?;
        Ok(Some(started.elapsed()))
    }

    /// Makes `generation` the WAL appends go to: writes the hard state, conf state and `retained`
    /// to it and fsyncs it and the directory, then links it from the current WAL with a Continue
    /// record and fsyncs that. A failure before the link leaves the current WAL as it was.
    fn rotate(&mut self, generation: u64, retained: &[Entry]) -> Result<(), LogError> {
        self.check_usable()?;
        let path = wal_path(&self.dir, generation);
        let fresh = (|| {
            let mut wal = WalWriter::open(&path, true)?;
            wal.write_message(RecordKind::HardState, &self.hard_state)?;
            wal.write_message(RecordKind::ConfState, &self.conf_state)?;
            if !retained.is_empty() {
                wal.write_entries(retained)?;
            }
            wal.sync()?;
            sync_dir(&self.dir)?;
            Ok(wal)
        })();
        let wal = match fresh {
            Ok(wal) => wal,
            Err(error) => {
                let _ = fs::remove_file(&path);
                return Err(error);
            }
        };
        self.write(|old| {
            old.write_record(RecordKind::Continue, |buf| {
                buf.extend_from_slice(&generation.to_le_bytes());
                Ok(())
            })?;
            old.sync()
        })?;
        self.wal = wal;
        self.wal_generation = generation;
        Ok(())
    }

    /// Makes `snapshot` the base of the log with `retained` after it, by writing a new WAL
    /// generation and committing it with the snapshot file (see the module docs).
    fn install(
        &mut self,
        snapshot: Snapshot,
        retained: Vec<Entry>,
        hard_state: HardState,
        conf_state: ConfState,
    ) -> Result<(), LogError> {
        self.check_usable()?;
        let result = self.try_install(snapshot, retained, hard_state, conf_state);
        if let Err(error) = &result {
            self.poisoned = Some(error.to_string());
        }
        result
    }

    fn try_install(
        &mut self,
        snapshot: Snapshot,
        retained: Vec<Entry>,
        hard_state: HardState,
        conf_state: ConfState,
    ) -> Result<(), LogError> {
        let generation = self.wal_generation + 1;
        let mut wal = WalWriter::open(&wal_path(&self.dir, generation), true)?;
        wal.write_message(RecordKind::HardState, &hard_state)?;
        if conf_state != *snapshot.get_metadata().get_conf_state() {
            wal.write_message(RecordKind::ConfState, &conf_state)?;
        }
        if !retained.is_empty() {
            wal.write_entries(&retained)?;
        }
        wal.sync()?;
        write_snapshot_file(&self.dir, generation, &snapshot)?;

        drop(std::mem::replace(&mut self.wal, wal));
        remove_wal_files_before(&self.dir, generation);
        let meta = snapshot.get_metadata();
        self.generation = generation;
        self.wal_generation = generation;
        self.log = RetainedLog {
            base_index: meta.index,
            base_term: meta.term,
            entries: retained,
        };
        self.snapshot = meta.clone();
        self.hard_state = hard_state;
        self.conf_state = conf_state;
        Ok(())
    }
}

impl raft::Storage for DiskStorage {
    fn initial_state(&self) -> raft::Result<RaftState> {
        let inner = self.inner.read();
        Ok(RaftState::new(
            inner.hard_state.clone(),
            inner.conf_state.clone(),
        ))
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        // Everything is in memory, so the fetch is never asynchronous and the context is unused.
        let inner = self.inner.read();
        let log = &inner.log;
        if low < log.first_index() {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if high > log.last_index() + 1 {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        if low >= high {
            return Ok(Vec::new());
        }
        let first = log.first_index();
        let mut entries = log.entries[(low - first) as usize..(high - first) as usize].to_vec();
        raft::util::limit_size(&mut entries, max_size.into());
        Ok(entries)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        let inner = self.inner.read();
        let log = &inner.log;
        match log.term(idx) {
            Some(term) => Ok(term),
            None if idx < log.base_index => Err(raft::Error::Store(StorageError::Compacted)),
            None => Err(raft::Error::Store(StorageError::Unavailable)),
        }
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(DiskStorage::first_index(self))
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(DiskStorage::last_index(self))
    }

    fn snapshot(&self, request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        let (dir, index) = {
            let inner = self.inner.read();
            (inner.dir.clone(), inner.snapshot.index)
        };
        // Raft only asks once the follower needs compacted entries, which implies a snapshot; if
        // the stored one is too old, the driver's next compaction will produce a newer one.
        let unavailable = || raft::Error::Store(StorageError::SnapshotTemporarilyUnavailable);
        if index == 0 || index < request_index {
            return Err(unavailable());
        }
        // Read without the lock: a snapshot committed meanwhile replaces the file atomically, and
        // whichever one is read is whole and at least as new.
        match read_snapshot_file(&dir.join(SNAPSHOT_FILE)) {
            Ok(Some((_, snapshot))) if snapshot.get_metadata().index >= request_index => {
                Ok(snapshot)
            }
            Ok(_) => Err(unavailable()),
            Err(error) => Err(raft::Error::Store(StorageError::Other(Box::new(error)))),
        }
    }
}

/// A local snapshot begun by [`DiskStorage::begin_snapshot`]: the WAL is rotated, the data is yet
/// to be written and committed.
pub struct PendingSnapshot {
    storage: DiskStorage,
    tmp: PathBuf,
    meta: SnapshotMetadata,
    /// The rotated WAL generation, which the snapshot file names.
    generation: u64,
}

/// How a [`PendingSnapshot::write`] went.
#[derive(Debug, Clone, Copy)]
pub struct SnapshotWrite {
    pub bytes: u64,
    /// Encoding the state machine and writing it out (into the page cache).
    pub encode: Duration,
    /// The fsync of the file.
    pub sync: Duration,
}

impl PendingSnapshot {
    pub fn index(&self) -> u64 {
        self.meta.index
    }

    /// Writes the snapshot file aside (not yet the snapshot): `encode` streams the state machine
    /// data into it while the checksum is computed; then it is fsynced. Needs no lock, so it can
    /// run on any thread while the log goes on. Stops with an error soon after `cancel` is set.
    pub fn write(
        &self,
        cancel: &AtomicBool,
        encode: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> Result<SnapshotWrite, LogError> {
        let started = Instant::now();
        let meta = self
            .meta
            .write_to_bytes()
            .map_err(|e| LogError::Encode(e.to_string()))?;
        let meta_len = u32::try_from(meta.len())
            .map_err(|_| LogError::Encode("snapshot metadata is too large".into()))?;
        let result = (|| -> io::Result<(u64, Duration)> {
            let mut file = File::create(&self.tmp)?;
            let mut out = CrcWriter {
                out: BufWriter::with_capacity(WAL_BUFFER, file.try_clone()?),
                hasher: crc32fast::Hasher::new(),
                written: 0,
                cancel,
            };
            out.out.write_all(SNAPSHOT_MAGIC)?;
            out.out.write_all(&[0; 4])?;
            out.write_all(&self.generation.to_le_bytes())?;
            out.write_all(&meta_len.to_le_bytes())?;
            out.write_all(&meta)?;
            let header = out.written;
            encode(&mut out)?;
            out.out.flush()?;
            let CrcWriter {
                out: buffered,
                hasher,
                written,
                ..
            } = out;
            drop(buffered);
            let (crc, bytes) = (hasher.finalize(), written - header);
            let encoded = started.elapsed();
            file.seek(io::SeekFrom::Start(SNAPSHOT_MAGIC.len() as u64))?;
            file.write_all(&crc.to_le_bytes())?;
            file.sync_all()?;
            Ok((bytes, encoded))
        })();
        match result {
            Ok((bytes, encode)) => Ok(SnapshotWrite {
                bytes,
                encode,
                sync: started.elapsed() - encode,
            }),
            Err(source) => {
                let _ = fs::remove_file(&self.tmp);
                Err(LogError::Io {
                    path: self.tmp.clone(),
                    source,
                })
            }
        }
    }

    /// Makes the written file the snapshot (rename, fsync of the directory), then removes the
    /// WALs before the rotated one; [`DiskStorage::compact_to_snapshot`] then drops the entries it
    /// covers from memory. Returns false, discarding the file, when a newer snapshot (one
    /// installed from the leader) got there first.
    pub fn commit(self) -> Result<bool, LogError> {
        let mut inner = self.storage.inner.write();
        inner.check_usable()?;
        if inner.snapshot.index >= self.meta.index
            || inner.generation >= self.generation
            || inner.wal_generation < self.generation
        {
            let _ = fs::remove_file(&self.tmp);
            return Ok(false);
        }
        let path = inner.dir.join(SNAPSHOT_FILE);
        if let Err(error) = fs::rename(&self.tmp, &path).map_err(io_error(&path)) {
            let _ = fs::remove_file(&self.tmp);
            return Err(error);
        }
        if let Err(error) = sync_dir(&inner.dir) {
            // Whether the rename is durable is unknown, so which WAL recovery starts from is too.
            inner.poisoned = Some(error.to_string());
            return Err(error);
        }
        inner.generation = self.generation;
        inner.snapshot = self.meta;
        remove_wal_files_before(&inner.dir, self.generation);
        Ok(true)
    }
}

/// Passes writes through, checksumming and counting them; fails once `cancel` is set.
struct CrcWriter<'a, W: Write> {
    out: W,
    hasher: crc32fast::Hasher,
    written: u64,
    cancel: &'a AtomicBool,
}

impl<W: Write> Write for CrcWriter<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.cancel.load(Ordering::Relaxed) {
            return Err(io::Error::other(
                "snapshot cancelled: the member is stopping",
            ));
        }
        let n = self.out.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// Removes the WAL files of generations before `generation` (superseded by a snapshot).
fn remove_wal_files_before(dir: &Path, generation: u64) {
    let files = match list_wal_files(dir) {
        Ok(files) => files,
        Err(error) => {
            tracing::warn!(%error, "cannot list superseded WAL files");
            return;
        }
    };
    for (old, path) in files {
        if old < generation {
            if let Err(error) = fs::remove_file(&path) {
                tracing::warn!(file = %path.display(), %error, "cannot remove a superseded WAL file");
            }
        }
    }
}

/// The entries after the snapshot, with the snapshot's index and term as their base. The one
/// place where append, truncation and term lookup rules live, for both live calls and replay.
#[derive(Debug, Default)]
struct RetainedLog {
    base_index: u64,
    base_term: u64,
    /// `entries[i].index == base_index + 1 + i`.
    entries: Vec<Entry>,
}

impl RetainedLog {
    fn new(base_index: u64, base_term: u64) -> RetainedLog {
        RetainedLog {
            base_index,
            base_term,
            entries: Vec::new(),
        }
    }

    fn first_index(&self) -> u64 {
        self.base_index + 1
    }

    fn last_index(&self) -> u64 {
        self.base_index + self.entries.len() as u64
    }

    /// The term of `index`, known for the base and the retained entries.
    fn term(&self, index: u64) -> Option<u64> {
        if index == self.base_index {
            return Some(self.base_term);
        }
        if index < self.base_index || index > self.last_index() {
            return None;
        }
        Some(self.entries[(index - self.first_index()) as usize].term)
    }

    fn check_append(&self, entries: &[Entry]) -> Result<(), String> {
        let first = entries[0].index;
        if first < self.first_index() {
            return Err("would overwrite compacted entries".into());
        }
        if first > self.last_index() + 1 {
            return Err("would leave a gap after the last entry".into());
        }
        match entries
            .windows(2)
            .find(|pair| pair[1].index != pair[0].index + 1)
        {
            Some(pair) => Err(format!(
                "the batch skips from index {} to {}",
                pair[0].index, pair[1].index
            )),
            None => Ok(()),
        }
    }

    /// Appends checked entries, dropping the suffix they replace.
    fn append(&mut self, entries: &[Entry]) {
        let keep = (entries[0].index - self.first_index()) as usize;
        self.entries.truncate(keep);
        self.entries.extend_from_slice(entries);
    }

    fn entries_after(&self, index: u64) -> Vec<Entry> {
        let skip = index.saturating_sub(self.base_index) as usize;
        self.entries.get(skip..).unwrap_or_default().to_vec()
    }
}

/// State rebuilt by replaying a WAL on top of the snapshot.
struct Recovered {
    log: RetainedLog,
    hard_state: HardState,
    conf_state: ConfState,
}

impl Recovered {
    /// Applies the records of `buf` in order and returns the length of its valid prefix and, if
    /// it ends with a Continue record, the generation the log goes on in.
    fn replay(&mut self, path: &Path, buf: &Bytes) -> Result<(usize, Option<u64>), LogError> {
        let mut at = 0;
        while at < buf.len() {
            let reason = match frame_at(buf, at) {
                Frame::Record {
                    kind: RecordKind::Continue,
                    payload,
                    end,
                } => {
                    let Ok(next) = <[u8; 8]>::try_from(&buf[payload]) else {
                        return Err(corrupt(path, at, "continue record is not 8 bytes"));
                    };
                    if end < buf.len() {
                        return Err(corrupt(path, end, "data after the WAL's continue record"));
                    }
                    return Ok((end, Some(u64::from_le_bytes(next))));
                }
                Frame::Record { kind, payload, end } => {
                    self.apply(kind, &buf.slice(payload))
                        .map_err(|reason| corrupt(path, at, reason))?;
                    at = end;
                    continue;
                }
                Frame::Truncated => "record runs past the end of the file".to_string(),
                Frame::Invalid(reason) => reason,
            };
            // A torn write is the last thing in the file; anything valid after a bad record means
            // the bad record once was complete and has since been damaged.
            if let Some(next) = (at + 1..buf.len()).find(|&p| frame_at(buf, p).is_record()) {
                return Err(corrupt(
                    path,
                    at,
                    format!("{reason}, yet a valid record follows at offset {next}"),
                ));
            }
            return Ok((at, None));
        }
        Ok((at, None))
    }

    fn apply(&mut self, kind: RecordKind, payload: &Bytes) -> Result<(), String> {
        match kind {
            RecordKind::Entries => {
                let entries = decode_entries(payload)?;
                if entries.is_empty() {
                    return Err("empty entries record".into());
                }
                self.log.check_append(&entries)?;
                self.log.append(&entries);
            }
            RecordKind::HardState => {
                self.hard_state = HardState::parse_from_bytes(payload)
                    .map_err(|e| format!("hard state does not decode: {e}"))?;
            }
            RecordKind::ConfState => {
                self.conf_state = ConfState::parse_from_bytes(payload)
                    .map_err(|e| format!("conf state does not decode: {e}"))?;
            }
            RecordKind::Continue => return Err("misplaced continue record".into()),
        }
        Ok(())
    }

    /// Rejects a recovered state raft would panic on.
    fn check(&self, path: &Path) -> Result<(), LogError> {
        let commit = self.hard_state.commit;
        if commit > self.log.last_index() {
            return Err(corrupt(
                path,
                0,
                format!(
                    "commit index {commit} is beyond the last index {}",
                    self.log.last_index()
                ),
            ));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RecordKind {
    Entries = 1,
    HardState = 2,
    ConfState = 3,
    Continue = 4,
}

impl RecordKind {
    fn from_byte(byte: u8) -> Option<RecordKind> {
        match byte {
            1 => Some(RecordKind::Entries),
            2 => Some(RecordKind::HardState),
            3 => Some(RecordKind::ConfState),
            4 => Some(RecordKind::Continue),
            _ => None,
        }
    }
}

enum Frame {
    Record {
        kind: RecordKind,
        payload: std::ops::Range<usize>,
        end: usize,
    },
    /// The header or payload runs past the end of the buffer.
    Truncated,
    Invalid(String),
}

impl Frame {
    fn is_record(&self) -> bool {
        matches!(self, Frame::Record { .. })
    }
}

fn record_crc(kind: u8, payload: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&[kind]);
    hasher.update(payload);
    hasher.finalize()
}

fn read_u32(buf: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(buf[at..at + 4].try_into().expect("4 bytes"))
}

/// Parses the record header at `at` and checks the record's checksum.
fn frame_at(buf: &[u8], at: usize) -> Frame {
    let rest = &buf[at..];
    if rest.len() < RECORD_HEADER {
        return Frame::Truncated;
    }
    let Some(kind) = RecordKind::from_byte(rest[8]) else {
        return Frame::Invalid(format!("unknown record kind {}", rest[8]));
    };
    let len = read_u32(rest, 0) as usize;
    if rest.len() - RECORD_HEADER < len {
        return Frame::Truncated;
    }
    let payload = &rest[RECORD_HEADER..RECORD_HEADER + len];
    if record_crc(rest[8], payload) != read_u32(rest, 4) {
        return Frame::Invalid("checksum mismatch".into());
    }
    let start = at + RECORD_HEADER;
    Frame::Record {
        kind,
        payload: start..start + len,
        end: start + len,
    }
}

fn encode_entries(entries: &[Entry], buf: &mut Vec<u8>) -> protobuf::ProtobufResult<()> {
    let mut out = protobuf::CodedOutputStream::vec(buf);
    for entry in entries {
        out.write_raw_little_endian32(entry.compute_size())?;
        entry.write_to_with_cached_sizes(&mut out)?;
    }
    out.flush()
}

/// Decodes an Entries payload; the entries' data shares `payload`'s buffer.
fn decode_entries(payload: &Bytes) -> Result<Vec<Entry>, String> {
    let mut entries = Vec::new();
    let mut at = 0;
    while at < payload.len() {
        if payload.len() - at < 4 {
            return Err("entry length runs past the end of the record".into());
        }
        let len = read_u32(payload, at) as usize;
        at += 4;
        if payload.len() - at < len {
            return Err("entry runs past the end of the record".into());
        }
        let entry = Entry::parse_from_carllerche_bytes(&payload.slice(at..at + len))
            .map_err(|e| format!("entry does not decode: {e}"))?;
        entries.push(entry);
        at += len;
    }
    Ok(entries)
}

/// The buffered append side of one WAL file.
struct WalWriter {
    path: PathBuf,
    out: BufWriter<File>,
    /// Bytes were written since the last fdatasync.
    unsynced: bool,
    /// Reused encode buffer, so a record is one `write_all` into the `BufWriter`.
    scratch: Vec<u8>,
    /// Bytes in the file: its length when opened plus every record written since.
    len: u64,
}

impl WalWriter {
    /// Opens `path` for appending; `create` starts a new, empty file.
    fn open(path: &Path, create: bool) -> Result<WalWriter, LogError> {
        let mut options = OpenOptions::new();
        if create {
            options.write(true).create(true).truncate(true);
        } else {
            options.append(true);
        }
        let file = options.open(path).map_err(io_error(path))?;
        let len = file.metadata().map_err(io_error(path))?.len();
        Ok(WalWriter {
            path: path.to_path_buf(),
            out: BufWriter::with_capacity(WAL_BUFFER, file),
            unsynced: false,
            scratch: Vec::new(),
            len,
        })
    }

    fn write_entries(&mut self, entries: &[Entry]) -> Result<(), LogError> {
        self.write_record(RecordKind::Entries, |buf| encode_entries(entries, buf))
    }

    fn write_message(&mut self, kind: RecordKind, message: &impl Message) -> Result<(), LogError> {
        self.write_record(kind, |buf| message.write_to_vec(buf))
    }

    fn write_record(
        &mut self,
        kind: RecordKind,
        encode: impl FnOnce(&mut Vec<u8>) -> protobuf::ProtobufResult<()>,
    ) -> Result<(), LogError> {
        let mut buf = std::mem::take(&mut self.scratch);
        buf.clear();
        buf.resize(RECORD_HEADER, 0);
        let result = self.frame_and_write(kind, &mut buf, encode);
        if buf.capacity() <= SCRATCH_KEEP {
            self.scratch = buf;
        }
        result
    }

    fn frame_and_write(
        &mut self,
        kind: RecordKind,
        buf: &mut Vec<u8>,
        encode: impl FnOnce(&mut Vec<u8>) -> protobuf::ProtobufResult<()>,
    ) -> Result<(), LogError> {
        encode(buf).map_err(|e| LogError::Encode(e.to_string()))?;
        let len = u32::try_from(buf.len() - RECORD_HEADER)
            .map_err(|_| LogError::Encode(format!("record of {} bytes is too large", buf.len())))?;
        let crc = record_crc(kind as u8, &buf[RECORD_HEADER..]);
        buf[0..4].copy_from_slice(&len.to_le_bytes());
        buf[4..8].copy_from_slice(&crc.to_le_bytes());
        buf[8] = kind as u8;
        self.unsynced = true;
        self.out.write_all(buf).map_err(io_error(&self.path))?;
        self.len += buf.len() as u64;
        Ok(())
    }

    fn sync(&mut self) -> Result<(), LogError> {
        if !self.unsynced {
            return Ok(());
        }
        self.out.flush().map_err(io_error(&self.path))?;
        self.out
            .get_ref()
            .sync_data()
            .map_err(io_error(&self.path))?;
        self.unsynced = false;
        Ok(())
    }
}

fn wal_path(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("{WAL_PREFIX}{generation:016x}{WAL_SUFFIX}"))
}

fn list_wal_files(dir: &Path) -> Result<Vec<(u64, PathBuf)>, LogError> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_error(dir))? {
        let entry = entry.map_err(io_error(dir))?;
        let name = entry.file_name();
        let generation = name
            .to_str()
            .and_then(|n| n.strip_prefix(WAL_PREFIX)?.strip_suffix(WAL_SUFFIX))
            .and_then(|hex| u64::from_str_radix(hex, 16).ok());
        if let Some(generation) = generation {
            found.push((generation, entry.path()));
        }
    }
    Ok(found)
}

fn sync_dir(dir: &Path) -> Result<(), LogError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_error(dir))
}

/// Writes the snapshot file atomically: tmp file, fsync, rename, fsync of the directory.
fn write_snapshot_file(dir: &Path, generation: u64, snapshot: &Snapshot) -> Result<(), LogError> {
    let meta = snapshot
        .get_metadata()
        .write_to_bytes()
        .map_err(|e| LogError::Encode(e.to_string()))?;
    let meta_len = u32::try_from(meta.len())
        .map_err(|_| LogError::Encode("snapshot metadata is too large".into()))?;
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&generation.to_le_bytes());
    hasher.update(&meta_len.to_le_bytes());
    hasher.update(&meta);
    hasher.update(&snapshot.data);

    let tmp = dir.join(SNAPSHOT_TMP_FILE);
    let write = || -> io::Result<()> {
        let mut out = BufWriter::new(File::create(&tmp)?);
        out.write_all(SNAPSHOT_MAGIC)?;
        out.write_all(&hasher.finalize().to_le_bytes())?;
        out.write_all(&generation.to_le_bytes())?;
        out.write_all(&meta_len.to_le_bytes())?;
        out.write_all(&meta)?;
        out.write_all(&snapshot.data)?;
        out.into_inner().map_err(|e| e.into_error())?.sync_all()
    };
    write().map_err(io_error(&tmp))?;
    let path = dir.join(SNAPSHOT_FILE);
    fs::rename(&tmp, &path).map_err(io_error(&path))?;
    sync_dir(dir)
}

/// Reads the snapshot file: the WAL generation it names and the snapshot. `None` if absent.
fn read_snapshot_file(path: &Path) -> Result<Option<(u64, Snapshot)>, LogError> {
    let buf = match fs::read(path) {
        Ok(buf) => Bytes::from(buf),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error(path)(e)),
    };
    if buf.len() < SNAPSHOT_HEADER || &buf[..8] != SNAPSHOT_MAGIC {
        return Err(corrupt(path, 0, "not a snapshot file (bad header)"));
    }
    if crc32fast::hash(&buf[12..]) != read_u32(&buf, 8) {
        return Err(corrupt(path, 8, "checksum mismatch"));
    }
    let generation = u64::from_le_bytes(buf[12..20].try_into().expect("8 bytes"));
    let meta_len = read_u32(&buf, 20) as usize;
    if buf.len() - SNAPSHOT_HEADER < meta_len {
        return Err(corrupt(path, 20, "metadata runs past the end of the file"));
    }
    let meta_end = SNAPSHOT_HEADER + meta_len;
    let meta =
        SnapshotMetadata::parse_from_bytes(&buf[SNAPSHOT_HEADER..meta_end]).map_err(|e| {
            corrupt(
                path,
                SNAPSHOT_HEADER,
                format!("metadata does not decode: {e}"),
            )
        })?;
    let mut snapshot = Snapshot::default();
    snapshot.set_metadata(meta);
    snapshot.data = buf.slice(meta_end..);
    Ok(Some((generation, snapshot)))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use raft::eraftpb::EntryType;
    use raft::{Config, RawNode, Storage};

    use super::*;

    fn entry(index: u64, term: u64, data: &[u8]) -> Entry {
        Entry {
            index,
            term,
            entry_type: EntryType::EntryNormal,
            data: Bytes::copy_from_slice(data),
            ..Entry::default()
        }
    }

    fn entries(range: std::ops::RangeInclusive<u64>, term: u64) -> Vec<Entry> {
        range
            .map(|i| entry(i, term, format!("e{i}t{term}").as_bytes()))
            .collect()
    }

    fn hard_state(term: u64, vote: u64, commit: u64) -> HardState {
        HardState {
            term,
            vote,
            commit,
            ..HardState::default()
        }
    }

    fn voters(ids: &[u64]) -> ConfState {
        ConfState {
            voters: ids.to_vec(),
            ..ConfState::default()
        }
    }

    /// A storage in `dir` for `voters` holding entries 1..=`last` of term 1 and `hard_state`,
    /// synced: the starting point of the snapshot and crash tests.
    fn synced_log(dir: &Path, voters: &[u64], last: u64, hard_state: HardState) -> DiskStorage {
        let s = DiskStorage::open(dir).unwrap();
        s.initialize(voters).unwrap();
        s.append(&entries(1..=last, 1)).unwrap();
        s.set_hard_state(&hard_state).unwrap();
        s.sync().unwrap();
        s
    }

    fn all_entries(s: &DiskStorage) -> Vec<Entry> {
        s.entries(
            s.first_index(),
            s.last_index() + 1,
            None,
            GetEntriesContext::empty(false),
        )
        .unwrap()
    }

    fn only_wal(dir: &Path) -> PathBuf {
        let files = list_wal_files(dir).unwrap();
        assert_eq!(files.len(), 1, "{files:?}");
        files[0].1.clone()
    }

    fn flip_byte(path: &Path, offset: usize) {
        let mut buf = fs::read(path).unwrap();
        buf[offset] ^= 0x40;
        fs::write(path, buf).unwrap();
    }

    #[test]
    fn reopen_recovers_entries_hard_state_and_terms() {
        let dir = tempfile::tempdir().unwrap();
        let s = DiskStorage::open(dir.path()).unwrap();
        assert!(s.is_fresh());
        s.initialize(&[1, 2, 3]).unwrap();
        assert!(!s.is_fresh());
        assert!(matches!(
            s.initialize(&[1]),
            Err(LogError::AlreadyInitialized)
        ));
        s.append(&entries(1..=5, 1)).unwrap();
        s.append(&entries(6..=10, 2)).unwrap();
        s.set_hard_state(&hard_state(2, 1, 4)).unwrap();
        s.set_commit(8).unwrap();
        s.sync().unwrap();
        let before = all_entries(&s);
        drop(s);

        let s = DiskStorage::open(dir.path()).unwrap();
        assert!(!s.is_fresh());
        assert_eq!(all_entries(&s), before);
        assert_eq!(s.hard_state(), hard_state(2, 1, 8));
        let state = s.initial_state().unwrap();
        assert_eq!(state.conf_state, voters(&[1, 2, 3]));
        assert_eq!((s.first_index(), s.last_index()), (1, 10));
        assert_eq!(s.term(0).unwrap(), 0);
        assert_eq!(s.term(5).unwrap(), 1);
        assert_eq!(s.term(6).unwrap(), 2);
        assert_eq!(
            s.term(11),
            Err(raft::Error::Store(StorageError::Unavailable))
        );
        assert_eq!(s.entry_count(), 10);
        assert!(s.snapshot_data().unwrap().is_none());
        assert!(s.disk_size() > 0);
    }

    #[test]
    fn entries_honour_bounds_and_max_size() {
        let dir = tempfile::tempdir().unwrap();
        let s = DiskStorage::open(dir.path()).unwrap();
        s.append(&entries(1..=10, 1)).unwrap();
        let ctx = || GetEntriesContext::empty(false);
        let one = entries(1..=1, 1)[0].compute_size() as u64;
        assert_eq!(s.entries(2, 5, None, ctx()).unwrap(), entries(2..=4, 1));
        assert_eq!(s.entries(2, 5, one * 2, ctx()).unwrap().len(), 2);
        assert_eq!(s.entries(2, 5, 0, ctx()).unwrap().len(), 1);
        assert_eq!(
            s.entries(2, 12, None, ctx()),
            Err(raft::Error::Store(StorageError::Unavailable))
        );
    }

    #[test]
    fn conflicting_append_truncates_suffix_and_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let s = DiskStorage::open(dir.path()).unwrap();
        s.append(&entries(1..=10, 1)).unwrap();
        s.append(&entries(6..=7, 3)).unwrap();
        let mut expected = entries(1..=5, 1);
        expected.extend(entries(6..=7, 3));
        assert_eq!(all_entries(&s), expected);
        assert_eq!(s.last_index(), 7);
        assert!(matches!(
            s.append(&entries(9..=9, 3)),
            Err(LogError::NonContiguous { first: 9, .. })
        ));
        s.sync().unwrap();
        drop(s);

        let s = DiskStorage::open(dir.path()).unwrap();
        assert_eq!(all_entries(&s), expected);
        assert_eq!(s.term(7).unwrap(), 3);
    }

    #[test]
    fn create_snapshot_compacts_and_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let s = DiskStorage::open(dir.path()).unwrap();
        s.initialize(&[1]).unwrap();
        s.append(&entries(1..=5, 1)).unwrap();
        s.append(&entries(6..=20, 2)).unwrap();
        s.set_hard_state(&hard_state(2, 1, 15)).unwrap();
        s.sync().unwrap();
        assert!(matches!(
            s.create_snapshot(16, voters(&[1]), vec![]),
            Err(LogError::InvalidSnapshotIndex { index: 16, .. })
        ));
        s.create_snapshot(12, voters(&[1]), b"state@12".to_vec())
            .unwrap();

        let check = |s: &DiskStorage| {
            assert_eq!((s.first_index(), s.last_index()), (13, 20));
            assert_eq!(s.entry_count(), 8);
            assert_eq!(
                s.entries(12, 14, None, GetEntriesContext::empty(false)),
                Err(raft::Error::Store(StorageError::Compacted))
            );
            assert_eq!(s.term(11), Err(raft::Error::Store(StorageError::Compacted)));
            assert_eq!(s.term(12).unwrap(), 2);
            assert_eq!(all_entries(s), entries(13..=20, 2));
            let (meta, data) = s.snapshot_data().unwrap().unwrap();
            assert_eq!((meta.index, meta.term), (12, 2));
            assert_eq!(meta.get_conf_state(), &voters(&[1]));
            assert_eq!(data, b"state@12");
            let snap = Storage::snapshot(s, 0, 2).unwrap();
            assert_eq!(snap.get_metadata().index, 12);
            assert_eq!(&snap.data[..], b"state@12");
            assert_eq!(s.hard_state(), hard_state(2, 1, 15));
            assert_eq!(s.initial_state().unwrap().conf_state, voters(&[1]));
        };
        check(&s);
        drop(s);
        let s = DiskStorage::open(dir.path()).unwrap();
        check(&s);
        assert_eq!(
            list_wal_files(dir.path()).unwrap().len(),
            1,
            "the old WAL is gone"
        );

        // Appends after the compaction land in the new WAL generation.
        s.append(&entries(21..=21, 3)).unwrap();
        s.sync().unwrap();
        drop(s);
        let s = DiskStorage::open(dir.path()).unwrap();
        assert_eq!((s.first_index(), s.last_index()), (13, 21));
        assert_eq!(s.term(21).unwrap(), 3);
        assert_eq!(s.snapshot_data().unwrap().unwrap().1, b"state@12");
    }

    #[test]
    fn apply_snapshot_replaces_a_diverging_log_and_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let s = synced_log(dir.path(), &[1, 2, 3], 10, hard_state(1, 2, 3));

        let mut snap = Snapshot {
            data: Bytes::from_static(b"leader state"),
            ..Snapshot::default()
        };
        snap.mut_metadata().index = 8;
        snap.mut_metadata().term = 4; // the log has term 1 at index 8: everything goes
        snap.mut_metadata().set_conf_state(voters(&[1, 2, 3, 4]));
        s.apply_snapshot(snap).unwrap();

        let check = |s: &DiskStorage| {
            assert_eq!((s.first_index(), s.last_index()), (9, 8));
            assert_eq!(s.entry_count(), 0);
            assert_eq!(s.term(8).unwrap(), 4);
            assert_eq!(s.hard_state(), hard_state(4, 0, 8));
            assert_eq!(s.conf_state(), voters(&[1, 2, 3, 4]));
            let (meta, data) = s.snapshot_data().unwrap().unwrap();
            assert_eq!((meta.index, meta.term), (8, 4));
            assert_eq!(data, b"leader state");
        };
        check(&s);
        drop(s);
        let s = DiskStorage::open(dir.path()).unwrap();
        check(&s);

        // A snapshot matching the log keeps the entries after it.
        s.append(&entries(9..=12, 4)).unwrap();
        s.set_hard_state(&hard_state(4, 0, 9)).unwrap();
        let mut snap = Snapshot::default();
        snap.mut_metadata().index = 10;
        snap.mut_metadata().term = 4;
        snap.mut_metadata().set_conf_state(voters(&[1, 2, 3, 4]));
        s.apply_snapshot(snap).unwrap();
        assert_eq!(all_entries(&s), entries(11..=12, 4));
        assert_eq!(s.hard_state(), hard_state(4, 0, 10));
        drop(s);
        let s = DiskStorage::open(dir.path()).unwrap();
        assert_eq!(all_entries(&s), entries(11..=12, 4));
        assert_eq!(s.term(10).unwrap(), 4);
    }

    #[test]
    fn crash_before_the_snapshot_commit_keeps_the_old_pair() {
        let dir = tempfile::tempdir().unwrap();
        let s = DiskStorage::open(dir.path()).unwrap();
        s.append(&entries(1..=10, 1)).unwrap();
        s.set_hard_state(&hard_state(1, 1, 10)).unwrap();
        s.sync().unwrap();
        drop(s);
        // A compaction that wrote its new WAL and tmp snapshot, then crashed before the rename.
        fs::write(wal_path(dir.path(), 1), b"half a WAL").unwrap();
        fs::write(dir.path().join(SNAPSHOT_TMP_FILE), b"half a snapshot").unwrap();

        let s = DiskStorage::open(dir.path()).unwrap();
        assert_eq!(all_entries(&s), entries(1..=10, 1));
        assert_eq!(only_wal(dir.path()), wal_path(dir.path(), 0));
        assert!(!dir.path().join(SNAPSHOT_TMP_FILE).exists());
    }

    #[test]
    fn a_rotated_wal_is_followed_until_the_snapshot_commits() {
        let dir = tempfile::tempdir().unwrap();
        let s = synced_log(dir.path(), &[1], 10, hard_state(1, 1, 8));
        let pending = s.begin_snapshot(8, voters(&[1])).unwrap().unwrap();
        // The log goes on in the rotated WAL while the snapshot is being written.
        s.append(&entries(11..=15, 2)).unwrap();
        s.set_hard_state(&hard_state(2, 1, 12)).unwrap();
        s.sync().unwrap();
        assert_eq!(list_wal_files(dir.path()).unwrap().len(), 2);
        pending
            .write(&AtomicBool::new(false), |out| out.write_all(b"state@8"))
            .unwrap();
        // A crash here (written, not committed): the old snapshot (none) and the whole log.
        drop(pending);
        drop(s);
        let s = DiskStorage::open(dir.path()).unwrap();
        assert!(!dir.path().join(SNAPSHOT_LOCAL_TMP_FILE).exists());
        assert!(s.snapshot_data().unwrap().is_none());
        assert_eq!(
            all_entries(&s),
            [entries(1..=10, 1), entries(11..=15, 2)].concat()
        );
        assert_eq!(s.hard_state(), hard_state(2, 1, 12));

        // Rotating again extends the chain; committing drops what lies before the snapshot.
        let pending = s.begin_snapshot(12, voters(&[1])).unwrap().unwrap();
        s.append(&entries(16..=16, 2)).unwrap();
        s.sync().unwrap();
        let written = pending
            .write(&AtomicBool::new(false), |out| out.write_all(b"state@12"))
            .unwrap();
        assert_eq!(written.bytes, 8);
        assert!(pending.commit().unwrap());
        s.compact_to_snapshot(0);
        let check = |s: &DiskStorage| {
            assert_eq!((s.first_index(), s.last_index()), (13, 16));
            assert_eq!(s.term(12).unwrap(), 2);
            let (meta, data) = s.snapshot_data().unwrap().unwrap();
            assert_eq!((meta.index, data), (12, b"state@12".to_vec()));
            assert_eq!(&Storage::snapshot(s, 12, 2).unwrap().data[..], b"state@12");
        };
        check(&s);
        assert_eq!(list_wal_files(dir.path()).unwrap().len(), 1);
        drop(s);
        let s = DiskStorage::open(dir.path()).unwrap();
        check(&s);
        assert_eq!(s.hard_state(), hard_state(2, 1, 12));
    }

    #[test]
    fn catch_up_entries_stay_readable_after_a_local_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let s = synced_log(dir.path(), &[1], 16, hard_state(1, 1, 14));
        let pending = s.begin_snapshot(12, voters(&[1])).unwrap().unwrap();
        pending
            .write(&AtomicBool::new(false), |out| out.write_all(b"state@12"))
            .unwrap();
        assert!(pending.commit().unwrap());
        s.compact_to_snapshot(5);
        // Entries 8..=12 before the snapshot stay, for a follower that is a little behind.
        assert_eq!((s.first_index(), s.last_index()), (8, 16));
        assert_eq!(
            Storage::entries(&s, 8, 17, None, GetEntriesContext::empty(false)).unwrap(),
            entries(8..=16, 1)
        );
        assert_eq!(Storage::term(&s, 7).unwrap(), 1);
        assert!(matches!(
            Storage::term(&s, 6),
            Err(raft::Error::Store(StorageError::Compacted))
        ));
        // The snapshot, not the log's base, says what is out of date.
        assert!(s.begin_snapshot(12, voters(&[1])).unwrap().is_none());
        assert!(matches!(
            s.begin_snapshot(10, voters(&[1])),
            Err(LogError::SnapshotOutOfDate { current: 12, .. })
        ));
        // A longer catch-up than the log holds keeps what there is; a shorter one drops more.
        s.compact_to_snapshot(50);
        assert_eq!(s.first_index(), 8);
        s.compact_to_snapshot(2);
        assert_eq!(s.first_index(), 11);
        drop(s);
        // On disk the log starts after the snapshot.
        let s = DiskStorage::open(dir.path()).unwrap();
        assert_eq!((s.first_index(), s.last_index()), (13, 16));
    }

    #[test]
    fn a_rotation_that_crashed_before_its_link_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let s = DiskStorage::open(dir.path()).unwrap();
        s.append(&entries(1..=10, 1)).unwrap();
        s.set_hard_state(&hard_state(1, 1, 10)).unwrap();
        s.sync().unwrap();
        drop(s);
        // The next generation written and synced, but no continue record made it into WAL 0.
        let mut wal = WalWriter::open(&wal_path(dir.path(), 1), true).unwrap();
        wal.write_message(RecordKind::HardState, &hard_state(1, 1, 10))
            .unwrap();
        wal.write_entries(&entries(11..=12, 1)).unwrap();
        wal.sync().unwrap();
        drop(wal);
        let s = DiskStorage::open(dir.path()).unwrap();
        assert_eq!(all_entries(&s), entries(1..=10, 1));
        assert_eq!(only_wal(dir.path()), wal_path(dir.path(), 0));
    }

    #[test]
    fn a_local_snapshot_overtaken_by_an_install_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let s = synced_log(dir.path(), &[1, 2, 3], 10, hard_state(1, 2, 6));
        let pending = s.begin_snapshot(6, voters(&[1, 2, 3])).unwrap().unwrap();
        let mut snap = Snapshot {
            data: Bytes::from_static(b"leader state"),
            ..Snapshot::default()
        };
        snap.mut_metadata().index = 20;
        snap.mut_metadata().term = 3;
        snap.mut_metadata().set_conf_state(voters(&[1, 2, 3]));
        s.apply_snapshot(snap).unwrap();
        pending
            .write(&AtomicBool::new(false), |out| out.write_all(b"old"))
            .unwrap();
        assert!(!pending.commit().unwrap());
        assert_eq!(s.snapshot_data().unwrap().unwrap().1, b"leader state");
        drop(s);
        let s = DiskStorage::open(dir.path()).unwrap();
        assert_eq!(s.snapshot_data().unwrap().unwrap().0.index, 20);
        assert_eq!(s.first_index(), 21);
        assert_eq!(only_wal(dir.path()), wal_path(dir.path(), 2));
    }

    #[test]
    fn a_cancelled_snapshot_write_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let s = DiskStorage::open(dir.path()).unwrap();
        s.append(&entries(1..=10, 1)).unwrap();
        s.set_hard_state(&hard_state(1, 1, 10)).unwrap();
        s.sync().unwrap();
        let pending = s.begin_snapshot(10, voters(&[1])).unwrap().unwrap();
        let cancel = AtomicBool::new(true);
        assert!(matches!(
            pending.write(&cancel, |out| out.write_all(&[1; 1000])),
            Err(LogError::Io { .. })
        ));
        assert!(!dir.path().join(SNAPSHOT_LOCAL_TMP_FILE).exists());
        drop(s);
        let s = DiskStorage::open(dir.path()).unwrap();
        assert_eq!(all_entries(&s), entries(1..=10, 1));
    }

    /// Counts WARN events, to see that cutting a torn record is reported.
    struct WarnCounter(Arc<AtomicUsize>);

    impl tracing::Subscriber for WarnCounter {
        fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
            tracing::span::Id::from_u64(1)
        }
        fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
        fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
        fn event(&self, event: &tracing::Event<'_>) {
            if *event.metadata().level() == tracing::Level::WARN {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        fn enter(&self, _: &tracing::span::Id) {}
        fn exit(&self, _: &tracing::span::Id) {}
    }

    fn open_counting_warnings(dir: &Path) -> (Result<DiskStorage, LogError>, usize) {
        let warnings = Arc::new(AtomicUsize::new(0));
        let result = tracing::subscriber::with_default(WarnCounter(warnings.clone()), || {
            DiskStorage::open(dir)
        });
        (result, warnings.load(Ordering::SeqCst))
    }

    /// Two entry batches and a hard state; returns the WAL and the offsets of the three records.
    fn three_records(dir: &Path) -> (PathBuf, [usize; 3]) {
        let s = DiskStorage::open(dir).unwrap();
        let wal = only_wal(dir);
        let mut offsets = [0; 3];
        s.append(&entries(1..=5, 1)).unwrap();
        s.sync().unwrap();
        offsets[1] = fs::metadata(&wal).unwrap().len() as usize;
        s.append(&entries(6..=10, 1)).unwrap();
        s.sync().unwrap();
        offsets[2] = fs::metadata(&wal).unwrap().len() as usize;
        s.set_hard_state(&hard_state(1, 1, 5)).unwrap();
        s.sync().unwrap();
        (wal, offsets)
    }

    #[test]
    fn torn_last_record_is_cut_off_with_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let (wal, offsets) = three_records(dir.path());
        // Tear the middle of the second batch: it becomes the last, incomplete record.
        let file = OpenOptions::new().write(true).open(&wal).unwrap();
        file.set_len(offsets[2] as u64 - 3).unwrap();
        drop(file);

        let (result, warnings) = open_counting_warnings(dir.path());
        let s = result.unwrap();
        assert_eq!(warnings, 1);
        assert_eq!(all_entries(&s), entries(1..=5, 1));
        assert_eq!(s.hard_state(), HardState::default());
        assert_eq!(fs::metadata(&wal).unwrap().len() as usize, offsets[1]);
        // The storage keeps working after the cut.
        s.append(&entries(6..=6, 2)).unwrap();
        s.sync().unwrap();
        drop(s);
        let s = DiskStorage::open(dir.path()).unwrap();
        assert_eq!(s.last_index(), 6);
    }

    #[test]
    fn bad_checksum_on_the_last_record_is_a_torn_write() {
        let dir = tempfile::tempdir().unwrap();
        let (wal, offsets) = three_records(dir.path());
        flip_byte(&wal, offsets[2] + RECORD_HEADER);
        let (result, warnings) = open_counting_warnings(dir.path());
        let s = result.unwrap();
        assert_eq!(warnings, 1);
        assert_eq!(s.last_index(), 10);
        assert_eq!(s.hard_state(), HardState::default());
    }

    #[test]
    fn corruption_in_the_middle_refuses_to_open() {
        let dir = tempfile::tempdir().unwrap();
        let (wal, offsets) = three_records(dir.path());
        flip_byte(&wal, offsets[1] + RECORD_HEADER + 10);
        match DiskStorage::open(dir.path()) {
            Err(LogError::Corrupt { path, offset, .. }) => {
                assert_eq!(path, wal);
                assert_eq!(offset as usize, offsets[1]);
            }
            other => panic!("expected Corrupt, got {:?}", other.map(|_| ())),
        }

        // A damaged length field is caught too.
        let dir = tempfile::tempdir().unwrap();
        let (wal, offsets) = three_records(dir.path());
        flip_byte(&wal, offsets[0] + 3);
        assert!(matches!(
            DiskStorage::open(dir.path()),
            Err(LogError::Corrupt { offset: 0, .. })
        ));
    }

    #[test]
    fn corrupt_snapshot_file_refuses_to_open() {
        let dir = tempfile::tempdir().unwrap();
        let s = DiskStorage::open(dir.path()).unwrap();
        s.append(&entries(1..=10, 1)).unwrap();
        s.set_hard_state(&hard_state(1, 1, 10)).unwrap();
        s.create_snapshot(5, voters(&[1]), vec![7; 100]).unwrap();
        drop(s);
        let snapshot = dir.path().join(SNAPSHOT_FILE);
        flip_byte(&snapshot, SNAPSHOT_HEADER + 40);
        match DiskStorage::open(dir.path()) {
            Err(LogError::Corrupt { path, .. }) => assert_eq!(path, snapshot),
            other => panic!("expected Corrupt, got {:?}", other.map(|_| ())),
        }
    }

    #[test]
    fn missing_wal_refuses_to_open() {
        let dir = tempfile::tempdir().unwrap();
        let s = DiskStorage::open(dir.path()).unwrap();
        s.append(&entries(1..=10, 1)).unwrap();
        s.set_hard_state(&hard_state(1, 1, 10)).unwrap();
        s.create_snapshot(5, voters(&[1]), vec![]).unwrap();
        drop(s);
        fs::remove_file(only_wal(dir.path())).unwrap();
        assert!(matches!(
            DiskStorage::open(dir.path()),
            Err(LogError::Corrupt { .. })
        ));
    }

    /// What a test driver applied: the data of normal entries, by index.
    #[derive(Default)]
    struct Applied {
        index: u64,
        data: Vec<(u64, Bytes)>,
    }

    impl Applied {
        fn apply(&mut self, committed: Vec<Entry>) {
            for e in committed {
                assert_eq!(e.index, self.index + 1, "applied in order");
                self.index = e.index;
                if !e.data.is_empty() {
                    self.data.push((e.index, e.data.clone()));
                }
            }
        }
    }

    /// One pass of the Ready loop, in the order the driver uses.
    fn handle_ready(node: &mut RawNode<DiskStorage>, applied: &mut Applied) {
        if !node.has_ready() {
            return;
        }
        let store = node.store().clone();
        let mut ready = node.ready();
        assert!(ready.messages().is_empty(), "single voter");
        if !ready.snapshot().is_empty() {
            store.apply_snapshot(ready.snapshot().clone()).unwrap();
        }
        applied.apply(ready.take_committed_entries());
        store.append(ready.entries()).unwrap();
        if let Some(hs) = ready.hs() {
            store.set_hard_state(hs).unwrap();
        }
        store.sync().unwrap();
        let mut light = node.advance(ready);
        if let Some(commit) = light.commit_index() {
            store.set_commit(commit).unwrap();
        }
        applied.apply(light.take_committed_entries());
        node.advance_apply();
    }

    fn start_node(dir: &Path, applied: u64) -> RawNode<DiskStorage> {
        let store = DiskStorage::open(dir).unwrap();
        if store.is_fresh() {
            store.initialize(&[1]).unwrap();
        }
        let config = Config {
            id: 1,
            applied,
            ..Config::default()
        };
        config.validate().unwrap();
        let logger = slog::Logger::root(slog::Discard, slog::o!());
        RawNode::new(&config, store, &logger).unwrap()
    }

    fn propose_all(
        node: &mut RawNode<DiskStorage>,
        applied: &mut Applied,
        range: std::ops::Range<u32>,
    ) {
        for i in range {
            node.propose(vec![], format!("proposal {i}").into_bytes())
                .unwrap();
            handle_ready(node, applied);
        }
        handle_ready(node, applied);
    }

    #[test]
    fn raw_node_survives_restart() {
        let dir = tempfile::tempdir().unwrap();
        let mut node = start_node(dir.path(), 0);
        let mut applied = Applied::default();
        node.campaign().unwrap();
        handle_ready(&mut node, &mut applied);
        assert_eq!(node.raft.state, raft::StateRole::Leader);
        propose_all(&mut node, &mut applied, 0..100);
        assert_eq!(applied.data.len(), 100);
        let committed = node.raft.raft_log.committed;
        assert_eq!(committed, applied.index);
        assert_eq!(node.store().hard_state().commit, committed);
        let log = all_entries(node.store());
        drop(node);

        // Restart with everything applied: nothing is delivered again, the log is the same.
        let mut node = start_node(dir.path(), applied.index);
        assert_eq!(node.raft.raft_log.committed, committed);
        assert_eq!(all_entries(node.store()), log);
        let mut replayed = Applied {
            index: applied.index,
            ..Applied::default()
        };
        handle_ready(&mut node, &mut replayed);
        assert!(replayed.data.is_empty());
        drop(node);

        // Restart with nothing applied: the same committed entries are delivered again.
        let mut node = start_node(dir.path(), 0);
        let mut replayed = Applied::default();
        handle_ready(&mut node, &mut replayed);
        assert_eq!(replayed.data, applied.data);

        // Compact, restart from the snapshot, and keep going in a new term.
        let conf_state = node.store().conf_state();
        node.store()
            .create_snapshot(60, conf_state, b"sm@60".to_vec())
            .unwrap();
        drop(node);
        let mut node = start_node(dir.path(), applied.index);
        assert_eq!(node.store().first_index(), 61);
        assert_eq!(node.raft.raft_log.committed, committed);
        node.campaign().unwrap();
        handle_ready(&mut node, &mut applied);
        assert_eq!(node.raft.state, raft::StateRole::Leader);
        propose_all(&mut node, &mut applied, 100..110);
        assert_eq!(applied.data.len(), 110);
        assert_eq!(node.raft.raft_log.committed, applied.index);
    }
}
