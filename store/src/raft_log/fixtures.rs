//! Helpers the raft log's tests share.

use raft::eraftpb::EntryType;
use raft::Storage;

use super::*;

pub(super) fn entry(index: u64, term: u64, data: &[u8]) -> Entry {
    Entry {
        index,
        term,
        entry_type: EntryType::EntryNormal,
        data: Bytes::copy_from_slice(data),
        ..Entry::default()
    }
}

pub(super) fn entries(range: std::ops::RangeInclusive<u64>, term: u64) -> Vec<Entry> {
    range
        .map(|i| entry(i, term, format!("e{i}t{term}").as_bytes()))
        .collect()
}

pub(super) fn hard_state(term: u64, vote: u64, commit: u64) -> HardState {
    HardState {
        term,
        vote,
        commit,
        ..HardState::default()
    }
}

pub(super) fn voters(ids: &[u64]) -> ConfState {
    ConfState {
        voters: ids.to_vec(),
        ..ConfState::default()
    }
}

/// A storage in `dir` for `voters` holding entries 1..=`last` of term 1 and `hard_state`,
/// synced: the starting point of the snapshot and crash tests.
pub(super) fn synced_log(
    dir: &Path,
    voters: &[u64],
    last: u64,
    hard_state: HardState,
) -> DiskStorage {
    let s = DiskStorage::open(dir).unwrap();
    s.initialize(voters).unwrap();
    s.append(&entries(1..=last, 1)).unwrap();
    s.set_hard_state(&hard_state).unwrap();
    s.sync().unwrap();
    s
}

pub(super) fn all_entries(s: &DiskStorage) -> Vec<Entry> {
    s.entries(
        s.first_index(),
        s.last_index() + 1,
        None,
        GetEntriesContext::empty(false),
    )
    .unwrap()
}

pub(super) fn only_wal(dir: &Path) -> PathBuf {
    let files = list_wal_files(dir).unwrap();
    assert_eq!(files.len(), 1, "{files:?}");
    files[0].1.clone()
}

pub(super) fn flip_byte(path: &Path, offset: usize) {
    let mut buf = fs::read(path).unwrap();
    buf[offset] ^= 0x40;
    fs::write(path, buf).unwrap();
}
