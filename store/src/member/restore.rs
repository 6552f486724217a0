//! Rebuilding the state machine after a start, on a thread of its own, and handing it over to
//! the driver.
//!
//! [`RestoreTask`] decodes the latest snapshot and applies the committed log after it while the
//! raft thread already votes and stores appends; it follows the commit index until it is within
//! [`RESTORE_HANDOVER_ENTRIES`] of it. [`RestoreHandover`] is the driver's side, without I/O:
//! while the state is away it holds back the entries raft commits, and when the thread hands
//! over (or the leader's snapshot replaces the state) it says which of them to apply.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use raft::prelude::EntryType;
use tracing::info;

use super::apply::apply_proposal;
use super::MemberError;
use crate::config::MemberConfig;
use crate::mvcc::Mvcc;
use crate::raft_log::{DiskStorage, LogError};

/// raft-rs election priority of a member with its state; a restoring member has 0. A voter
/// refuses a candidate of lower priority whose log is only as long as its own, so a restoring
/// member leads only when its log is longer than every other survivor's (and then it must:
/// no other could win). Leading while restoring works (the others forward the writes) but
/// shares the member's CPU with the rebuild.
pub const RESTORED_PRIORITY: i64 = 1;

/// Entries the restore thread may leave for the raft thread to apply when it hands over.
pub const RESTORE_HANDOVER_ENTRIES: u64 = 256;
/// Entries the restore thread applies between checks for cancellation and new commits.
const RESTORE_CHUNK_ENTRIES: u64 = 1024;

/// The state machine being rebuilt after a start, on a thread of its own.
pub struct RestoreTask {
    pub started: Instant,
    pub cancel: Arc<AtomicBool>,
    pub thread: std::thread::JoinHandle<Result<Restored, MemberError>>,
}

/// What the restore thread hands over.
pub struct Restored {
    pub mvcc: Mvcc,
    /// The last entry applied to `mvcc` (the snapshot's index if none after it).
    pub applied: u64,
    pub applied_term: u64,
    /// Entries applied after the snapshot.
    pub replayed: u64,
}

impl RestoreTask {
    pub fn start(storage: DiskStorage, config: &MemberConfig) -> Result<RestoreTask, MemberError> {
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

    /// Asks the thread to stop and waits for it.
    pub fn cancel_and_join(self) {
        self.cancel.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
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

/// Whether the state machine is there, and what raft committed while it was not.
#[derive(Debug, PartialEq, Eq)]
pub struct RestoreHandover {
    restoring: bool,
    /// While restoring: the last entry raft handed over as committed (applied from the log
    /// once the state is back).
    committed_meanwhile: u64,
}

impl RestoreHandover {
    /// A member that starts restoring, its state machine complete up to `applied`.
    pub fn restoring(applied: u64) -> RestoreHandover {
        RestoreHandover {
            restoring: true,
            committed_meanwhile: applied,
        }
    }

    pub fn is_restoring(&self) -> bool {
        self.restoring
    }

    /// Raft handed over committed entries up to `last`: true when they are to be held back
    /// (the state is away; they are applied from the log when it is back).
    pub fn hold_back(&mut self, last: u64) -> bool {
        if self.restoring {
            self.committed_meanwhile = self.committed_meanwhile.max(last);
        }
        self.restoring
    }

    /// The restore thread handed over a state applied up to `applied`: the log entries, as
    /// raft's `[low, high)`, that raft committed since and that are to be applied now.
    pub fn restored(&mut self, applied: u64) -> Option<(u64, u64)> {
        self.restoring = false;
        (self.committed_meanwhile > applied).then(|| (applied + 1, self.committed_meanwhile + 1))
    }

    /// The leader's snapshot replaced the state: true if a restore was under way (its thread is
    /// to be cancelled; what it would have rebuilt is older).
    pub fn snapshot_installed(&mut self) -> bool {
        std::mem::replace(&mut self.restoring, false)
    }

    /// raft-rs election priority: 0 while restoring, so a member with its state wins when the
    /// logs are as long.
    pub fn priority(&self) -> i64 {
        if self.restoring {
            0
        } else {
            RESTORED_PRIORITY
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_committed_while_restoring_are_applied_from_the_log_at_the_handover() {
        let mut handover = RestoreHandover::restoring(100);
        assert!(handover.is_restoring());
        assert_eq!(handover.priority(), 0);
        assert!(handover.hold_back(140));
        assert!(handover.hold_back(120), "an older batch changes nothing");
        // The thread got as far as 130: 131..=140 are left to the driver.
        assert_eq!(handover.restored(130), Some((131, 141)));
        assert!(!handover.is_restoring());
        assert_eq!(handover.priority(), RESTORED_PRIORITY);
        assert!(!handover.hold_back(150), "applied at once from now on");
    }

    #[test]
    fn a_thread_that_caught_up_leaves_nothing() {
        let mut handover = RestoreHandover::restoring(0);
        assert!(handover.hold_back(10));
        assert_eq!(handover.restored(10), None);
        let mut quiet = RestoreHandover::restoring(50);
        assert_eq!(quiet.restored(60), None);
    }

    #[test]
    fn a_snapshot_from_the_leader_ends_the_restore() {
        let mut handover = RestoreHandover::restoring(5);
        handover.hold_back(9);
        assert!(
            handover.snapshot_installed(),
            "the thread is to be cancelled"
        );
        assert!(!handover.snapshot_installed(), "only once");
        assert!(!handover.hold_back(12));
        assert_eq!(handover.priority(), RESTORED_PRIORITY);
    }
}
