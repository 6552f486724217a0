//! [`ReadIndexQueue`]: linearizable reads batched into ReadIndex requests, without raft or I/O.
//!
//! Reads that arrive while the driver is busy share one ReadIndex request (one round of
//! heartbeats on the leader). A request's context is its batch's number; when raft answers
//! with the read index, the batch waits until this member has applied that far. raft-rs drops a
//! request silently when there is no leader, or when the leader has not committed an entry in
//! its term yet, so a batch that got no answer for [`READ_RETRY_TICKS`] ticks asks again, and
//! one that waited the whole request timeout is answered `Timeout`.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// A ReadIndex request that got no answer in this many ticks is asked again.
pub const READ_RETRY_TICKS: u32 = 6;

struct ReadBatch<W> {
    waiters: Vec<W>,
    ticks_waiting: u32,
    deadline: Instant,
}

/// What to do with the reads queued since the last `Ready`.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadIssue<W> {
    /// Nothing queued.
    Nothing,
    /// No leader is known: answer these `NoLeader` (a client tries another member).
    NoLeader(Vec<W>),
    /// Ask raft for the read index with this context.
    ReadIndex(Vec<u8>),
}

/// What a tick does to the batches still waiting for their read index.
#[derive(Debug, PartialEq, Eq)]
pub struct ReadTick<W> {
    /// Waited the whole request timeout: answer `Timeout`.
    pub expired: Vec<W>,
    /// Ask raft again with these contexts.
    pub retry: Vec<Vec<u8>>,
}

/// Reads waiting for a ReadIndex, then for the apply index to reach it. `W` is what answers a
/// read (a oneshot sender in the driver).
pub struct ReadIndexQueue<W> {
    /// Arrived since the last [`ReadIndexQueue::issue`].
    queued: Vec<W>,
    /// Asked for, by context.
    batches: HashMap<u64, ReadBatch<W>>,
    next_ctx: u64,
    /// Read index known, waiting for the apply index to reach it.
    waiting_apply: BTreeMap<u64, Vec<W>>,
    timeout: Duration,
}

impl<W> ReadIndexQueue<W> {
    /// An empty queue whose reads time out after `timeout`.
    pub fn new(timeout: Duration) -> ReadIndexQueue<W> {
        ReadIndexQueue {
            queued: Vec::new(),
            batches: HashMap::new(),
            next_ctx: 1,
            waiting_apply: BTreeMap::new(),
            timeout,
        }
    }

    pub fn push(&mut self, waiter: W) {
        self.queued.push(waiter);
    }

    /// Makes one batch of everything queued.
    pub fn issue(&mut self, has_leader: bool, now: Instant) -> ReadIssue<W> {
        if self.queued.is_empty() {
            return ReadIssue::Nothing;
        }
        let waiters = std::mem::take(&mut self.queued);
        if !has_leader {
            return ReadIssue::NoLeader(waiters);
        }
        let ctx = self.next_ctx;
        self.next_ctx += 1;
        self.batches.insert(
            ctx,
            ReadBatch {
                waiters,
                ticks_waiting: 0,
                deadline: now + self.timeout,
            },
        );
        ReadIssue::ReadIndex(ctx.to_le_bytes().to_vec())
    }

    /// Raft answered the request `ctx` with `index`: the reads to answer now that the member
    /// has applied up to `applied` (this batch's, if `index` is already applied, and none else).
    pub fn read_state(&mut self, ctx: &[u8], index: u64, applied: u64) -> Vec<W> {
        let Ok(bytes) = <[u8; 8]>::try_from(ctx) else {
            return Vec::new();
        };
        let Some(batch) = self.batches.remove(&u64::from_le_bytes(bytes)) else {
            // Answered twice (asked again meanwhile), or timed out already.
            return Vec::new();
        };
        self.waiting_apply
            .entry(index)
            .or_default()
            .extend(batch.waiters);
        self.applied(applied)
    }

    /// The member has applied up to `applied`: the reads whose index it reached.
    pub fn applied(&mut self, applied: u64) -> Vec<W> {
        let mut ready = Vec::new();
        while let Some(entry) = self.waiting_apply.first_entry() {
            if *entry.key() > applied {
                break;
            }
            ready.extend(entry.remove());
        }
        ready
    }

    /// One raft tick at `now`.
    pub fn tick(&mut self, now: Instant, has_leader: bool) -> ReadTick<W> {
        let mut expired = Vec::new();
        let mut retry = Vec::new();
        self.batches.retain(|ctx, batch| {
            if batch.deadline <= now {
                expired.append(&mut batch.waiters);
                return false;
            }
            batch.ticks_waiting += 1;
            if batch.ticks_waiting >= READ_RETRY_TICKS && has_leader {
                batch.ticks_waiting = 0;
                retry.push(ctx.to_le_bytes().to_vec());
            }
            true
        });
        retry.sort();
        ReadTick { expired, retry }
    }

    /// Every read, to answer when the member stops.
    pub fn drain(&mut self) -> Vec<W> {
        let mut all = std::mem::take(&mut self.queued);
        for (_, batch) in self.batches.drain() {
            all.extend(batch.waiters);
        }
        for (_, waiters) in std::mem::take(&mut self.waiting_apply) {
            all.extend(waiters);
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT: Duration = Duration::from_secs(5);

    fn ctx(n: u64) -> Vec<u8> {
        n.to_le_bytes().to_vec()
    }

    #[test]
    fn reads_that_arrive_together_share_one_request() {
        let now = Instant::now();
        let mut q = ReadIndexQueue::new(TIMEOUT);
        assert_eq!(q.issue(true, now), ReadIssue::Nothing);
        q.push("a");
        q.push("b");
        assert_eq!(q.issue(true, now), ReadIssue::ReadIndex(ctx(1)));
        q.push("c");
        assert_eq!(q.issue(true, now), ReadIssue::ReadIndex(ctx(2)));
        // Batch 1's index is 10, applied is 9: it waits; applying 10 answers it.
        assert!(q.read_state(&ctx(1), 10, 9).is_empty());
        assert_eq!(q.applied(10), ["a", "b"]);
        // Batch 2's index is already applied: answered at once.
        assert_eq!(q.read_state(&ctx(2), 10, 10), ["c"]);
        // A second answer to the same request (it was asked twice) finds nothing.
        assert!(q.read_state(&ctx(2), 11, 11).is_empty());
        assert!(q.read_state(b"short", 11, 11).is_empty());
    }

    #[test]
    fn with_no_leader_reads_are_refused_at_once() {
        let mut q = ReadIndexQueue::new(TIMEOUT);
        q.push(1);
        assert_eq!(q.issue(false, Instant::now()), ReadIssue::NoLeader(vec![1]));
        assert!(q.drain().is_empty());
    }

    #[test]
    fn an_unanswered_request_is_asked_again_and_times_out() {
        let start = Instant::now();
        let mut q = ReadIndexQueue::new(TIMEOUT);
        q.push("a");
        assert_eq!(q.issue(true, start), ReadIssue::ReadIndex(ctx(1)));
        let tick = Duration::from_millis(50);
        let mut at = start;
        for _ in 1..READ_RETRY_TICKS {
            at += tick;
            assert_eq!(
                q.tick(at, true),
                ReadTick {
                    expired: vec![],
                    retry: vec![]
                }
            );
        }
        at += tick;
        assert_eq!(
            q.tick(at, true),
            ReadTick {
                expired: vec![],
                retry: vec![ctx(1)]
            }
        );
        // Without a leader it is not asked again, and it times out after the request timeout.
        for _ in 0..READ_RETRY_TICKS {
            at += tick;
            assert!(q.tick(at, false).retry.is_empty());
        }
        assert_eq!(
            q.tick(start + TIMEOUT, false),
            ReadTick {
                expired: vec!["a"],
                retry: vec![]
            }
        );
        // The late answer finds nothing to answer.
        assert!(q.read_state(&ctx(1), 5, 5).is_empty());
    }

    #[test]
    fn stopping_hands_back_every_read() {
        let now = Instant::now();
        let mut q = ReadIndexQueue::new(TIMEOUT);
        q.push(1);
        q.issue(true, now);
        q.push(2);
        q.issue(true, now);
        q.read_state(&ctx(2), 10, 0);
        q.push(3);
        let mut all = q.drain();
        all.sort();
        assert_eq!(all, [1, 2, 3]);
    }
}
