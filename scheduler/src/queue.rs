//! [`SchedulingQueue`]: the pure state of kube-scheduler's priority queue — `active` (ordered by
//! priority, then creation time), `backoff` (1 s doubling to 10 s per failed attempt) and
//! `unschedulable` (until a cluster event might help, or 5 minutes). Time comes in as `now`.
//!
//! A pod is in exactly one place: one of the three queues, or in flight (handed to a worker).
//! A pod is never handed out twice at once.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::pod_info::PodInfo;

pub const INITIAL_BACKOFF: Duration = Duration::from_secs(1);
pub const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// How long a pod stays unschedulable without any event before it is tried again.
pub const UNSCHEDULABLE_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    Active,
    Backoff,
    Unschedulable,
    InFlight,
}

#[derive(Debug)]
struct Entry {
    pod: Arc<PodInfo>,
    place: Place,
    attempts: u32,
    /// When the last attempt failed.
    failed_at: Option<Instant>,
    /// Bumped on each enqueue, so stale heap entries are recognised and skipped.
    generation: u64,
    /// A cluster event (or a pod update) arrived while the pod was in flight: a failed attempt
    /// should retry after backoff instead of waiting as unschedulable.
    moved_while_in_flight: bool,
}

/// An `active` heap entry: highest priority first, then oldest.
#[derive(Debug, PartialEq, Eq)]
struct ActiveKey {
    priority: i32,
    created_ms: i64,
    seq: u64,
    key: String,
    generation: u64,
}

impl Ord for ActiveKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.priority
            .cmp(&other.priority)
            .then(other.created_ms.cmp(&self.created_ms))
            .then(other.seq.cmp(&self.seq))
    }
}

impl PartialOrd for ActiveKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Queue lengths, for `/metrics`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueLengths {
    pub active: usize,
    pub backoff: usize,
    pub unschedulable: usize,
    pub in_flight: usize,
}

#[derive(Debug, Default)]
pub struct SchedulingQueue {
    entries: HashMap<String, Entry>,
    active: BinaryHeap<ActiveKey>,
    /// (ready at, generation, key), earliest first.
    backoff: BinaryHeap<Reverse<(Instant, u64, String)>>,
    seq: u64,
}

/// The backoff after `attempts` failed attempts: 1 s, 2 s, 4 s, 8 s, then 10 s.
pub fn backoff_for(attempts: u32) -> Duration {
    let doublings = attempts.saturating_sub(1).min(10);
    (INITIAL_BACKOFF * 2u32.pow(doublings)).min(MAX_BACKOFF)
}

impl SchedulingQueue {
    pub fn new() -> SchedulingQueue {
        SchedulingQueue::default()
    }

    /// A new pending pod, or a new version of one. A new version of a pod waiting as
    /// unschedulable goes back to be tried if `changed` (its spec or labels changed, so it may
    /// fit now); a status-only update does not retry it.
    pub fn upsert(&mut self, pod: Arc<PodInfo>, changed: bool, now: Instant) {
        let key = pod.key.clone();
        match self.entries.get_mut(&key) {
            None => {
                self.entries.insert(
                    key.clone(),
                    Entry {
                        pod,
                        place: Place::Active,
                        attempts: 0,
                        failed_at: None,
                        generation: 0,
                        moved_while_in_flight: false,
                    },
                );
                self.push_active(&key);
            }
            Some(entry) => {
                entry.pod = pod;
                match entry.place {
                    Place::InFlight => entry.moved_while_in_flight |= changed,
                    Place::Unschedulable if changed => self.requeue(&key, now),
                    Place::Unschedulable => {}
                    Place::Active | Place::Backoff => {}
                }
            }
        }
    }

    /// The pod is gone (deleted, or bound by someone): forget it.
    pub fn remove(&mut self, key: &str) {
        // Heap entries of a removed pod are skipped when they surface.
        self.entries.remove(key);
    }

    pub fn contains(&self, key: &str) -> bool {
        self.entries.contains_key(key)
    }

    /// The next pod to schedule, now in flight.
    pub fn pop(&mut self) -> Option<Arc<PodInfo>> {
        while let Some(top) = self.active.pop() {
            let Some(entry) = self.entries.get_mut(&top.key) else {
                continue;
            };
            if entry.place != Place::Active || entry.generation != top.generation {
                continue;
            }
            entry.place = Place::InFlight;
            entry.moved_while_in_flight = false;
            return Some(entry.pod.clone());
        }
        None
    }

    /// The attempt bound the pod: it leaves the queue.
    pub fn done(&mut self, key: &str) {
        self.entries.remove(key);
    }

    /// The attempt found no node: the pod waits as unschedulable, or in backoff if something
    /// changed meanwhile.
    pub fn unschedulable(&mut self, key: &str, now: Instant) {
        let Some(entry) = self.entries.get_mut(key) else {
            return;
        };
        if entry.place != Place::InFlight {
            return;
        }
        entry.attempts += 1;
        entry.failed_at = Some(now);
        if entry.moved_while_in_flight {
            self.send_to_backoff(key, now);
        } else {
            entry.place = Place::Unschedulable;
        }
    }

    /// The attempt failed for another reason (bind error): retry after backoff.
    pub fn failed(&mut self, key: &str, now: Instant) {
        let Some(entry) = self.entries.get_mut(key) else {
            return;
        };
        if entry.place != Place::InFlight {
            return;
        }
        entry.attempts += 1;
        entry.failed_at = Some(now);
        self.send_to_backoff(key, now);
    }

    /// A cluster event that may make unschedulable pods fit (node added or changed, pod
    /// deleted): they go back to active, or to backoff if their backoff has not passed.
    pub fn move_all_unschedulable(&mut self, now: Instant) {
        let keys: Vec<String> = self
            .entries
            .iter_mut()
            .filter_map(|(key, entry)| {
                if entry.place == Place::InFlight {
                    entry.moved_while_in_flight = true;
                }
                (entry.place == Place::Unschedulable).then(|| key.clone())
            })
            .collect();
        for key in keys {
            self.requeue(&key, now);
        }
    }

    /// Moves due pods: backoff that has passed → active; unschedulable for 5 minutes → retried.
    pub fn flush(&mut self, now: Instant) {
        while let Some(Reverse((ready_at, generation, _))) = self.backoff.peek() {
            if *ready_at > now {
                break;
            }
            let generation = *generation;
            let Some(Reverse((_, _, key))) = self.backoff.pop() else {
                break;
            };
            if let Some(entry) = self.entries.get(&key) {
                if entry.place == Place::Backoff && entry.generation == generation {
                    self.push_active(&key);
                }
            }
        }
        let stale: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, e)| {
                e.place == Place::Unschedulable
                    && e.failed_at
                        .is_some_and(|t| now.duration_since(t) >= UNSCHEDULABLE_TIMEOUT)
            })
            .map(|(k, _)| k.clone())
            .collect();
        for key in stale {
            self.requeue(&key, now);
        }
    }

    /// When the earliest backoff ends, if any (for the driver's timer).
    pub fn next_backoff_deadline(&self) -> Option<Instant> {
        self.backoff.peek().map(|Reverse((t, _, _))| *t)
    }

    pub fn lengths(&self) -> QueueLengths {
        let mut out = QueueLengths::default();
        for entry in self.entries.values() {
            match entry.place {
                Place::Active => out.active += 1,
                Place::Backoff => out.backoff += 1,
                Place::Unschedulable => out.unschedulable += 1,
                Place::InFlight => out.in_flight += 1,
            }
        }
        out
    }

    /// Back to active, or to backoff while its backoff since the last failure lasts.
    fn requeue(&mut self, key: &str, now: Instant) {
        let Some(entry) = self.entries.get(key) else {
            return;
        };
        let backing_off = entry
            .failed_at
            .is_some_and(|t| now < t + backoff_for(entry.attempts));
        if backing_off {
            self.send_to_backoff(key, now);
        } else {
            self.push_active(key);
        }
    }

    fn send_to_backoff(&mut self, key: &str, now: Instant) {
        let Some(entry) = self.entries.get_mut(key) else {
            return;
        };
        entry.generation += 1;
        entry.place = Place::Backoff;
        let ready_at = entry.failed_at.unwrap_or(now) + backoff_for(entry.attempts);
        self.backoff
            .push(Reverse((ready_at, entry.generation, key.to_string())));
    }

    fn push_active(&mut self, key: &str) {
        let Some(entry) = self.entries.get_mut(key) else {
            return;
        };
        entry.generation += 1;
        entry.place = Place::Active;
        self.seq += 1;
        self.active.push(ActiveKey {
            priority: entry.pod.priority,
            created_ms: entry.pod.created_ms,
            seq: self.seq,
            key: key.to_string(),
            generation: entry.generation,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::{info, pod};

    fn named(name: &str, priority: i32, created_ms: i64) -> Arc<PodInfo> {
        let mut p = pod("default", name, "", "");
        p.spec.as_mut().unwrap().priority = Some(priority);
        let mut i = (*info(p)).clone();
        i.created_ms = created_ms;
        Arc::new(i)
    }

    #[test]
    fn active_orders_by_priority_then_age() {
        let now = Instant::now();
        let mut q = SchedulingQueue::new();
        q.upsert(named("young", 0, 20), true, now);
        q.upsert(named("old", 0, 10), true, now);
        q.upsert(named("vip", 100, 30), true, now);
        let order: Vec<_> = std::iter::from_fn(|| q.pop().map(|p| p.name.clone())).collect();
        assert_eq!(order, ["vip", "old", "young"]);
        assert_eq!(q.lengths().in_flight, 3);
    }

    #[test]
    fn backoff_doubles_to_ten_seconds() {
        assert_eq!(backoff_for(1), Duration::from_secs(1));
        assert_eq!(backoff_for(2), Duration::from_secs(2));
        assert_eq!(backoff_for(4), Duration::from_secs(8));
        assert_eq!(backoff_for(5), Duration::from_secs(10));
        assert_eq!(backoff_for(50), Duration::from_secs(10));

        let t0 = Instant::now();
        let mut q = SchedulingQueue::new();
        q.upsert(named("p", 0, 0), true, t0);
        q.pop().unwrap();
        q.failed("default/p", t0);
        assert!(q.pop().is_none());
        q.flush(t0 + Duration::from_millis(999));
        assert!(q.pop().is_none());
        q.flush(t0 + Duration::from_secs(1));
        assert_eq!(q.pop().unwrap().name, "p");
        q.failed("default/p", t0 + Duration::from_secs(1));
        q.flush(t0 + Duration::from_secs(2));
        assert!(q.pop().is_none(), "second backoff is 2 s");
        q.flush(t0 + Duration::from_secs(3));
        assert!(q.pop().is_some());
    }

    #[test]
    fn unschedulable_pods_wait_for_an_event_or_five_minutes() {
        let t0 = Instant::now();
        let mut q = SchedulingQueue::new();
        q.upsert(named("a", 0, 0), true, t0);
        q.upsert(named("b", 0, 1), true, t0);
        q.pop().unwrap();
        q.pop().unwrap();
        q.unschedulable("default/a", t0);
        q.unschedulable("default/b", t0);
        q.flush(t0 + Duration::from_secs(60));
        assert_eq!(q.lengths().unschedulable, 2);
        // A node event after the backoff: both go back to active.
        q.move_all_unschedulable(t0 + Duration::from_secs(2));
        assert_eq!(q.lengths().active, 2);
        q.pop().unwrap();
        q.unschedulable("default/a", t0 + Duration::from_secs(3));
        q.flush(t0 + Duration::from_secs(3 + 299));
        assert_eq!(q.lengths().unschedulable, 1);
        q.flush(t0 + Duration::from_secs(3 + 300));
        assert_eq!(q.lengths().unschedulable, 0);
    }

    #[test]
    fn an_event_during_an_attempt_sends_the_pod_to_backoff() {
        let t0 = Instant::now();
        let mut q = SchedulingQueue::new();
        q.upsert(named("a", 0, 0), true, t0);
        q.pop().unwrap();
        q.move_all_unschedulable(t0);
        q.unschedulable("default/a", t0);
        assert_eq!(q.lengths().backoff, 1);
        // Removed pods never come back out.
        q.remove("default/a");
        q.flush(t0 + Duration::from_secs(5));
        assert!(q.pop().is_none());
    }
}
