//! The write-ahead log: records and their framing, the append side ([`WalWriter`]), and replay
//! on open ([`Recovered`]).

use super::*;

/// State rebuilt by replaying a WAL on top of the snapshot.
pub(super) struct Recovered {
    pub(super) log: RetainedLog,
    pub(super) hard_state: HardState,
    pub(super) conf_state: ConfState,
}

impl Recovered {
    /// Applies the records of `buf` in order and returns the length of its valid prefix and, if
    /// it ends with a Continue record, the generation the log goes on in.
    pub(super) fn replay(
        &mut self,
        path: &Path,
        buf: &Bytes,
    ) -> Result<(usize, Option<u64>), LogError> {
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

    pub(super) fn apply(&mut self, kind: RecordKind, payload: &Bytes) -> Result<(), String> {
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
    pub(super) fn check(&self, path: &Path) -> Result<(), LogError> {
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
pub(super) enum RecordKind {
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

pub(super) fn read_u32(buf: &[u8], at: usize) -> u32 {
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
pub(super) struct WalWriter {
    pub(super) path: PathBuf,
    pub(super) out: BufWriter<File>,
    /// Bytes were written since the last fdatasync.
    pub(super) unsynced: bool,
    /// Reused encode buffer, so a record is one `write_all` into the `BufWriter`.
    scratch: Vec<u8>,
    /// Bytes in the file: its length when opened plus every record written since.
    pub(super) len: u64,
}

impl WalWriter {
    /// Opens `path` for appending; `create` starts a new, empty file.
    pub(super) fn open(path: &Path, create: bool) -> Result<WalWriter, LogError> {
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

    pub(super) fn write_entries(&mut self, entries: &[Entry]) -> Result<(), LogError> {
        self.write_record(RecordKind::Entries, |buf| encode_entries(entries, buf))
    }

    pub(super) fn write_message(
        &mut self,
        kind: RecordKind,
        message: &impl Message,
    ) -> Result<(), LogError> {
        self.write_record(kind, |buf| message.write_to_vec(buf))
    }

    pub(super) fn write_record(
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

    pub(super) fn sync(&mut self) -> Result<(), LogError> {
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

pub(super) fn wal_path(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("{WAL_PREFIX}{generation:016x}{WAL_SUFFIX}"))
}

pub(super) fn list_wal_files(dir: &Path) -> Result<Vec<(u64, PathBuf)>, LogError> {
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

pub(super) fn sync_dir(dir: &Path) -> Result<(), LogError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_error(dir))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::raft_log::fixtures::*;

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
}
