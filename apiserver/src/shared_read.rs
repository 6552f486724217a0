//! [`SharedRead`]: one read answers every request that waits for it, while staying linearizable.
//!
//! Every consistent GET and LIST needs the store's current revision, which is a linearizable
//! read (a raft read index on the leader). Asked one by one, a burst of reads costs a store
//! call each: thousands after an API server restart, when every client relists at once. A
//! request only needs a read that *starts after it arrived*; any such read gives it a revision
//! at least as new as the one it would have read itself. So requests that arrive while a read
//! is out wait for the next one, which starts once that read is back, and all of them take its
//! answer. At most one read is out at a time, and each read answers everyone who arrived
//! before it started, however many that is.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;

type Read<T> = dyn Fn() -> Pin<Box<dyn Future<Output = T> + Send>> + Send + Sync;

/// A read shared by the callers that wait for it (see the module's documentation).
pub struct SharedRead<T> {
    read: Arc<Read<T>>,
    state: Arc<Mutex<State<T>>>,
    reads: Arc<AtomicU64>,
    asked: AtomicU64,
}

struct State<T> {
    /// A task is reading (or about to): whoever arrives now joins the next batch.
    running: bool,
    waiting: Vec<oneshot::Sender<T>>,
}

impl<T: Clone + Send + 'static> SharedRead<T> {
    /// Shares `read`, which must start its read when its future is first polled.
    pub fn new<F, Fut>(read: F) -> SharedRead<T>
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = T> + Send + 'static,
    {
        SharedRead {
            read: Arc::new(move || Box::pin(read()) as Pin<Box<dyn Future<Output = T> + Send>>),
            state: Arc::new(Mutex::new(State {
                running: false,
                waiting: Vec::new(),
            })),
            reads: Arc::new(AtomicU64::new(0)),
            asked: AtomicU64::new(0),
        }
    }

    /// The answer of a read that started after this call. `None` only if the read panicked.
    pub async fn get(&self) -> Option<T> {
        self.asked.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        let start = {
            let mut state = lock(&self.state);
            state.waiting.push(tx);
            !std::mem::replace(&mut state.running, true)
        };
        if start {
            // A task of its own: a caller that gives up (its request cancelled) must not take
            // the others' read with it.
            tokio::spawn(serve(
                self.read.clone(),
                self.state.clone(),
                self.reads.clone(),
            ));
        }
        rx.await.ok()
    }

    /// How many reads have been made.
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    /// How many calls have asked for one.
    pub fn asked(&self) -> u64 {
        self.asked.load(Ordering::Relaxed)
    }
}

fn lock<T>(state: &Mutex<State<T>>) -> MutexGuard<'_, State<T>> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Reads for batch after batch of waiters until none are left.
async fn serve<T: Clone>(read: Arc<Read<T>>, state: Arc<Mutex<State<T>>>, reads: Arc<AtomicU64>) {
    // If a read panics, the next caller starts a new task for whoever still waits.
    struct Reset<'a, T> {
        state: &'a Mutex<State<T>>,
        armed: bool,
    }
    impl<T> Drop for Reset<'_, T> {
        fn drop(&mut self) {
            if self.armed {
                lock(self.state).running = false;
            }
        }
    }
    let mut reset = Reset {
        state: &state,
        armed: true,
    };
    loop {
        let batch = {
            let mut state = lock(&state);
            if state.waiting.is_empty() {
                state.running = false;
                reset.armed = false;
                return;
            }
            std::mem::take(&mut state.waiting)
        };
        reads.fetch_add(1, Ordering::Relaxed);
        let value = read().await;
        for waiter in batch {
            let _ = waiter.send(value.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A read that takes 20 ms and answers with the moment it started.
    fn timed_read() -> SharedRead<Instant> {
        SharedRead::new(|| async {
            let started = Instant::now();
            tokio::time::sleep(Duration::from_millis(20)).await;
            started
        })
    }

    #[tokio::test]
    async fn a_burst_shares_few_reads_and_each_caller_gets_a_read_started_after_it_came() {
        let shared = Arc::new(timed_read());
        let mut callers = Vec::new();
        for i in 0..200u64 {
            let shared = shared.clone();
            callers.push(tokio::spawn(async move {
                // Arrivals spread over ~50 ms, across several reads.
                tokio::time::sleep(Duration::from_micros(250 * i)).await;
                let arrived = Instant::now();
                let started = shared.get().await.expect("an answer");
                (arrived, started)
            }));
        }
        for caller in callers {
            let (arrived, started) = caller.await.expect("the caller");
            assert!(started >= arrived, "a caller got a read older than itself");
        }
        // ~50 ms of arrivals over 20 ms reads: a handful of reads (more on a busy machine, whose
        // timers run late), never one per caller.
        let reads = shared.reads();
        assert!((2..=50).contains(&reads), "{reads} reads for 200 callers");
        assert_eq!(shared.asked(), 200);
    }

    #[tokio::test]
    async fn every_call_of_a_lone_caller_makes_a_read_of_its_own() {
        let shared = timed_read();
        for n in 1..=3 {
            let arrived = Instant::now();
            let started = shared.get().await.expect("an answer");
            assert!(started >= arrived);
            assert_eq!(shared.reads(), n);
        }
    }

    #[tokio::test]
    async fn a_cancelled_caller_does_not_cancel_the_read_of_the_others() {
        let shared = Arc::new(timed_read());
        let first = {
            let shared = shared.clone();
            tokio::spawn(async move { shared.get().await })
        };
        let second = {
            let shared = shared.clone();
            tokio::spawn(async move { shared.get().await })
        };
        tokio::time::sleep(Duration::from_millis(5)).await;
        first.abort();
        assert!(second.await.expect("the second caller").is_some());
    }

    #[tokio::test]
    async fn a_panicking_read_does_not_stop_later_reads() {
        let calls = Arc::new(AtomicU64::new(0));
        let counted = calls.clone();
        let shared = SharedRead::new(move || {
            let n = counted.fetch_add(1, Ordering::SeqCst);
            async move {
                assert!(n > 0, "the first read fails");
                n
            }
        });
        assert_eq!(shared.get().await, None);
        assert_eq!(shared.get().await, Some(1));
    }
}
