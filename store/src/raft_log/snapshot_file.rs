//! Snapshot files: a local snapshot's write and commit ([`PendingSnapshot`]), and the
//! snapshot file's format, written and read back.

use super::wal::read_u32;
use super::*;

/// A local snapshot begun by [`DiskStorage::begin_snapshot`]: the WAL is rotated, the data is yet
/// to be written and committed.
pub struct PendingSnapshot {
    pub(super) storage: DiskStorage,
    pub(super) tmp: PathBuf,
    pub(super) meta: SnapshotMetadata,
    /// The rotated WAL generation, which the snapshot file names.
    pub(super) generation: u64,
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
    pub(super) out: W,
    hasher: crc32fast::Hasher,
    pub(super) written: u64,
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
pub(super) fn remove_wal_files_before(dir: &Path, generation: u64) {
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

/// Writes the snapshot file atomically: tmp file, fsync, rename, fsync of the directory.
pub(super) fn write_snapshot_file(
    dir: &Path,
    generation: u64,
    snapshot: &Snapshot,
) -> Result<(), LogError> {
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
pub(super) fn read_snapshot_file(path: &Path) -> Result<Option<(u64, Snapshot)>, LogError> {
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
    use raft::Storage;

    use super::*;
    use crate::raft_log::fixtures::*;

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
}
