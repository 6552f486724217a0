//! [`WorkQueue`]: client-go's rate-limited work queue. Keys are de-duplicated while they wait,
//! a key being worked on is never handed to a second worker (a change arriving meanwhile is
//! queued again once the first worker is done), and failures are retried after an exponential
//! back-off.
//!
//! The bookkeeping is the pure [`QueueState`]; [`WorkQueue`] adds waiting and timers.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;

/// The queue's bookkeeping, without waiting or clocks.
#[derive(Debug, Default)]
pub struct QueueState {
    queue: VecDeque<String>,
    /// Keys that need processing: queued, or to be queued again when their worker is done.
    dirty: HashSet<String>,
    processing: HashSet<String>,
    /// Consecutive failures per key, for the back-off.
    failures: HashMap<String, u32>,
    shut_down: bool,
}

impl QueueState {
    /// Marks `key` for processing; true if a worker should be woken.
    pub fn add(&mut self, key: &str) -> bool {
        if self.shut_down || self.dirty.contains(key) {
            return false;
        }
        self.dirty.insert(key.to_string());
        if self.processing.contains(key) {
            // Queued again by `done`: one worker per key.
            return false;
        }
        self.queue.push_back(key.to_string());
        true
    }

    /// The next key to work on, now owned by the caller until [`done`](Self::done).
    pub fn pop(&mut self) -> Option<String> {
        let key = self.queue.pop_front()?;
        self.dirty.remove(&key);
        self.processing.insert(key.clone());
        Some(key)
    }

    /// The worker finished `key`; true if it was changed meanwhile and is queued again.
    pub fn done(&mut self, key: &str) -> bool {
        self.processing.remove(key);
        if self.dirty.contains(key) {
            self.queue.push_back(key.to_string());
            return true;
        }
        false
    }

    /// Counts a failure of `key` and returns how long to wait before retrying it.
    pub fn failed(&mut self, key: &str, base: Duration, max: Duration) -> Duration {
        let failures = self.failures.entry(key.to_string()).or_insert(0);
        *failures += 1;
        let doublings = (*failures - 1).min(20);
        base.saturating_mul(2u32.saturating_pow(doublings)).min(max)
    }

    /// Forgets the failures of `key` (it succeeded).
    pub fn forget(&mut self, key: &str) {
        self.failures.remove(key);
    }

    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

/// A shared, cloneable work queue of object keys.
#[derive(Clone)]
pub struct WorkQueue {
    state: Arc<Mutex<QueueState>>,
    notify: Arc<Notify>,
    /// Delayed adds already waiting per key: a later, longer delay for the same key is dropped.
    delayed: Arc<Mutex<HashMap<String, tokio::time::Instant>>>,
    base_backoff: Duration,
    max_backoff: Duration,
}

impl WorkQueue {
    /// A queue retrying failures after `base_backoff`, doubling up to `max_backoff`.
    pub fn new(base_backoff: Duration, max_backoff: Duration) -> WorkQueue {
        WorkQueue {
            state: Arc::new(Mutex::new(QueueState::default())),
            notify: Arc::new(Notify::new()),
            delayed: Arc::new(Mutex::new(HashMap::new())),
            base_backoff,
            max_backoff,
        }
    }

    pub fn add(&self, key: &str) {
        if self.state.lock().add(key) {
            self.notify.notify_waiters();
        }
    }

    /// Adds `key` after `delay` (at once for zero); of several delayed adds, the earliest wins.
    pub fn add_after(&self, key: &str, delay: Duration) {
        if delay.is_zero() {
            return self.add(key);
        }
        let at = tokio::time::Instant::now() + delay;
        {
            let mut delayed = self.delayed.lock();
            if delayed.get(key).is_some_and(|earlier| *earlier <= at) {
                return;
            }
            delayed.insert(key.to_string(), at);
        }
        let queue = self.clone();
        let key = key.to_string();
        tokio::spawn(async move {
            tokio::time::sleep_until(at).await;
            // Only the earliest pending add for the key fires; the others were superseded.
            let current = {
                let mut delayed = queue.delayed.lock();
                let current = delayed.get(&key) == Some(&at);
                if current {
                    delayed.remove(&key);
                }
                current
            };
            if current {
                queue.add(&key);
            }
        });
    }

    /// Re-adds `key` after its back-off (a failed attempt).
    pub fn add_rate_limited(&self, key: &str) {
        let delay = self
            .state
            .lock()
            .failed(key, self.base_backoff, self.max_backoff);
        self.add_after(key, delay);
    }

    pub fn forget(&self, key: &str) {
        self.state.lock().forget(key);
    }

    /// Waits for the next key; `None` once the queue is shut down.
    pub async fn get(&self) -> Option<String> {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut state = self.state.lock();
                if let Some(key) = state.pop() {
                    return Some(key);
                }
                if state.shut_down {
                    return None;
                }
            }
            notified.await;
        }
    }

    pub fn done(&self, key: &str) {
        if self.state.lock().done(key) {
            self.notify.notify_waiters();
        }
    }

    pub fn shut_down(&self) {
        self.state.lock().shut_down = true;
        self.notify.notify_waiters();
    }

    pub fn len(&self) -> usize {
        self.state.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.state.lock().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiting_keys_are_deduplicated() {
        let mut q = QueueState::default();
        assert!(q.add("a"));
        assert!(!q.add("a"));
        assert!(q.add("b"));
        assert_eq!(q.len(), 2);
        assert_eq!(q.pop().as_deref(), Some("a"));
        assert_eq!(q.pop().as_deref(), Some("b"));
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn a_key_in_progress_is_not_handed_out_twice() {
        let mut q = QueueState::default();
        q.add("a");
        let key = q.pop().expect("a");
        // Changed while a worker has it: not queued yet…
        assert!(!q.add("a"));
        assert_eq!(q.pop(), None);
        // …but queued again when the worker is done.
        assert!(q.done(&key));
        assert_eq!(q.pop().as_deref(), Some("a"));
        assert!(!q.done("a"));
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn failures_back_off_exponentially_until_forgotten() {
        let mut q = QueueState::default();
        let (base, max) = (Duration::from_millis(5), Duration::from_millis(30));
        assert_eq!(q.failed("a", base, max), Duration::from_millis(5));
        assert_eq!(q.failed("a", base, max), Duration::from_millis(10));
        assert_eq!(q.failed("a", base, max), Duration::from_millis(20));
        assert_eq!(q.failed("a", base, max), Duration::from_millis(30));
        assert_eq!(q.failed("b", base, max), Duration::from_millis(5));
        q.forget("a");
        assert_eq!(q.failed("a", base, max), Duration::from_millis(5));
    }

    #[tokio::test(start_paused = true)]
    async fn delayed_adds_arrive_after_their_delay() {
        let q = WorkQueue::new(Duration::from_millis(5), Duration::from_secs(1));
        q.add_after("a", Duration::from_secs(10));
        q.add_after("a", Duration::from_secs(2));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(q.is_empty());
        assert_eq!(q.get().await.as_deref(), Some("a"));
        q.done("a");
        // The earliest delayed add won; the later one is dropped.
        tokio::time::sleep(Duration::from_secs(20)).await;
        assert!(q.is_empty());
        q.shut_down();
        assert_eq!(q.get().await, None);
    }
}
