//! What a group commit costs on this disk: appending a batch of 500 × 1 KB raft entries plus one
//! fdatasync, next to a tiny record plus fdatasync.
//!
//! `cargo run --release -p store --example raft_log_append_cost`

use raft::prelude::Entry;
use store::raft_log::DiskStorage;

fn entry(index: u64, payload: &[u8]) -> Entry {
    Entry {
        index,
        term: 1,
        data: payload.to_vec().into(),
        ..Default::default()
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let storage = DiskStorage::open(dir.path())?;
    storage.initialize(&[1])?;
    let payload = vec![0xabu8; 1024];
    let rounds = 50u64;
    let (mut append_time, mut sync_time) = (std::time::Duration::ZERO, std::time::Duration::ZERO);
    for round in 0..rounds {
        let batch: Vec<Entry> = (1..=500)
            .map(|i| entry(round * 500 + i, &payload))
            .collect();
        let start = std::time::Instant::now();
        storage.append(&batch)?;
        let appended = std::time::Instant::now();
        storage.sync()?;
        append_time += appended - start;
        sync_time += appended.elapsed();
    }
    let start = std::time::Instant::now();
    for round in 0..rounds {
        storage.set_commit(round)?;
        storage.sync()?;
    }
    let tiny = start.elapsed();
    println!(
        "per 500 x 1 KB batch: append {:?}, sync {:?}; tiny record + sync {:?}",
        append_time / rounds as u32,
        sync_time / rounds as u32,
        tiny / rounds as u32
    );
    Ok(())
}
