//! [`Proposals`]: the bookkeeping of this member's proposals in flight, without raft or I/O.
//!
//! Every write is proposed with a sequence number in its entry's header (see
//! [`apply`](super::apply)); the member answers the write's waiter when it applies the entry
//! carrying that number. The table decides *which* waiters to answer and when — applied,
//! expired, or lost with a deposed leader — and the driver answers them. It also decides how
//! long a leader holds new proposals for its batch window.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// Proposals a leader holds for its batch window at most; more go out at once.
pub const MAX_HELD: usize = 1024;

struct Pending<W> {
    waiter: W,
    /// The raft term when it was proposed.
    term: u64,
}

/// This member's proposals that raft accepted and that are not applied yet, each with the
/// waiter (`W`) to answer. The driver's is a oneshot sender; tests use plain values.
pub struct Proposals<W> {
    next_seq: u64,
    pending: HashMap<u64, Pending<W>>,
    /// (deadline, seq) in proposal order, to expire proposals without scanning them all.
    order: VecDeque<(Instant, u64)>,
    /// Proposals of an older term, to be answered `Timeout` after the current `Ready`.
    abandoned: Vec<u64>,
    /// How long a proposal may wait to be applied.
    timeout: Duration,
    /// Proposals made since the last `Ready` that carried entries, and when that was.
    held: usize,
    last_append: Instant,
}

impl<W> Proposals<W> {
    /// An empty table whose sequence numbers start at `first_seq` and whose proposals expire
    /// after `timeout`.
    pub fn new(first_seq: u64, timeout: Duration, now: Instant) -> Proposals<W> {
        Proposals {
            next_seq: first_seq,
            pending: HashMap::new(),
            order: VecDeque::new(),
            abandoned: Vec::new(),
            timeout,
            held: 0,
            last_append: now,
        }
    }

    /// The sequence number for the next proposal. Sequence 0 is never handed out, so an entry
    /// with it (a lease expiry) has no waiter.
    pub fn next_seq(&mut self) -> u64 {
        if self.next_seq == 0 {
            self.next_seq = 1;
        }
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        seq
    }

    /// Raft took proposal `seq` in `term`: its waiter is answered when it is applied, or with
    /// `Timeout` once the proposal waited too long.
    pub fn proposed(&mut self, seq: u64, waiter: W, term: u64, now: Instant) {
        self.held += 1;
        self.pending.insert(seq, Pending { waiter, term });
        self.order.push_back((now + self.timeout, seq));
    }

    /// Proposal `seq` was applied: its waiter, if it is still waiting.
    pub fn applied(&mut self, seq: u64) -> Option<W> {
        self.pending.remove(&seq).map(|p| p.waiter)
    }

    /// The first entry of a leader of `term` was applied: every proposal made in an older term
    /// and not applied by now was most likely lost with the old leader. They are answered
    /// after the current `Ready` ([`Proposals::take_abandoned`]), not proposed again.
    pub fn leader_entry_applied(&mut self, term: u64) {
        for (seq, pending) in &self.pending {
            if pending.term < term {
                self.abandoned.push(*seq);
            }
        }
    }

    /// The waiters of the proposals abandoned since the last call, to answer `Timeout`.
    pub fn take_abandoned(&mut self) -> Vec<W> {
        std::mem::take(&mut self.abandoned)
            .into_iter()
            .filter_map(|seq| self.applied(seq))
            .collect()
    }

    /// The waiters of the proposals whose time ran out by `now`, to answer `Timeout`.
    pub fn expire(&mut self, now: Instant) -> Vec<W> {
        let mut expired = Vec::new();
        while let Some(&(deadline, seq)) = self.order.front() {
            if deadline > now {
                break;
            }
            self.order.pop_front();
            expired.extend(self.applied(seq));
        }
        expired
    }

    /// Every waiter, to answer when the member stops.
    pub fn drain(&mut self) -> Vec<W> {
        self.order.clear();
        self.abandoned.clear();
        self.pending.drain().map(|(_, p)| p.waiter).collect()
    }

    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// A `Ready` with new entries went out at `now`: what was held went with it.
    pub fn appended(&mut self, now: Instant) {
        self.held = 0;
        self.last_append = now;
    }

    /// How long to hold the proposals made since the last `Ready` with entries, so that more
    /// join them ([`MemberConfig::batch_window`](crate::config::MemberConfig::batch_window)):
    /// only a leader holds, only what it proposed itself, never past the window measured from
    /// that last `Ready`, and never more than [`MAX_HELD`] proposals.
    pub fn batch_wait(&self, now: Instant, window: Duration, is_leader: bool) -> Option<Duration> {
        if window.is_zero() || self.held == 0 || self.held >= MAX_HELD || !is_leader {
            return None;
        }
        window
            .checked_sub(now.saturating_duration_since(self.last_append))
            .filter(|wait| !wait.is_zero())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT: Duration = Duration::from_secs(5);

    #[test]
    fn an_applied_proposal_answers_its_own_waiter_once() {
        let now = Instant::now();
        let mut p = Proposals::new(7, TIMEOUT, now);
        let (a, b) = (p.next_seq(), p.next_seq());
        assert_eq!((a, b), (7, 8));
        p.proposed(a, "a", 1, now);
        p.proposed(b, "b", 1, now);
        assert_eq!(p.applied(b), Some("b"));
        assert_eq!(p.applied(b), None, "answered once");
        // An entry proposed by another member (or before a restart) finds no waiter.
        assert_eq!(p.applied(99), None);
        assert_eq!(p.len(), 1);
    }

    #[test]
    fn sequence_zero_is_never_handed_out() {
        let mut p: Proposals<()> = Proposals::new(u64::MAX, TIMEOUT, Instant::now());
        assert_eq!(p.next_seq(), u64::MAX);
        assert_eq!(p.next_seq(), 1);
    }

    #[test]
    fn proposals_expire_in_order_once_their_time_is_up() {
        let start = Instant::now();
        let mut p = Proposals::new(1, TIMEOUT, start);
        for (i, name) in ["a", "b", "c"].into_iter().enumerate() {
            let seq = p.next_seq();
            p.proposed(seq, name, 1, start + Duration::from_secs(i as u64));
        }
        assert_eq!(p.applied(2), Some("b"));
        assert!(p
            .expire(start + TIMEOUT - Duration::from_millis(1))
            .is_empty());
        // b was applied already: only a and then c time out.
        assert_eq!(p.expire(start + TIMEOUT + Duration::from_secs(1)), ["a"]);
        assert_eq!(p.expire(start + TIMEOUT * 2), ["c"]);
        assert_eq!(p.len(), 0);
    }

    #[test]
    fn a_new_leaders_first_entry_abandons_older_terms_proposals_after_the_ready() {
        let now = Instant::now();
        let mut p = Proposals::new(1, TIMEOUT, now);
        p.proposed(1, "term 2", 2, now);
        p.proposed(2, "term 3", 3, now);
        p.leader_entry_applied(3);
        // Still applicable within the same Ready (the entry may come right after).
        assert_eq!(p.len(), 2);
        assert_eq!(p.take_abandoned(), ["term 2"]);
        assert!(p.take_abandoned().is_empty());
        assert_eq!(p.drain(), ["term 3"]);
    }

    #[test]
    fn an_abandoned_proposal_applied_in_the_same_ready_is_answered_as_applied() {
        let now = Instant::now();
        let mut p = Proposals::new(1, TIMEOUT, now);
        p.proposed(1, "old", 1, now);
        p.leader_entry_applied(2);
        assert_eq!(p.applied(1), Some("old"));
        assert!(p.take_abandoned().is_empty());
    }

    #[test]
    fn only_a_leader_holds_new_proposals_and_never_past_its_window() {
        let start = Instant::now();
        let window = Duration::from_millis(2);
        let mut p = Proposals::new(1, TIMEOUT, start);
        assert_eq!(p.batch_wait(start, window, true), None, "nothing held");
        p.proposed(1, (), 1, start);
        let soon = start + Duration::from_micros(500);
        assert_eq!(
            p.batch_wait(soon, window, true),
            Some(Duration::from_micros(1500))
        );
        assert_eq!(p.batch_wait(soon, window, false), None, "a follower");
        assert_eq!(p.batch_wait(soon, Duration::ZERO, true), None, "no window");
        assert_eq!(p.batch_wait(start + window, window, true), None, "past it");
        p.appended(soon);
        assert_eq!(p.batch_wait(soon, window, true), None, "sent");
        for seq in 2..2 + MAX_HELD as u64 {
            p.proposed(seq, (), 1, soon);
        }
        assert_eq!(p.batch_wait(soon, window, true), None, "full");
    }
}
