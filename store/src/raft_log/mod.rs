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
//!
//! This file holds [`DiskStorage`] and the retained log; `wal` the records, the append side and
//! replay; `snapshot_file` the snapshot file and a local snapshot's write and commit.

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

#[cfg(test)]
mod fixtures;
mod snapshot_file;
mod wal;

use snapshot_file::{read_snapshot_file, remove_wal_files_before, write_snapshot_file};
pub use snapshot_file::{PendingSnapshot, SnapshotWrite};
use wal::{list_wal_files, sync_dir, wal_path, RecordKind, Recovered, WalWriter};

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

#[cfg(test)]
mod tests {
    use raft::{Config, RawNode, Storage};

    use super::*;
    use crate::raft_log::fixtures::*;

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
