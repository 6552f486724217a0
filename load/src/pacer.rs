//! The open-loop rate limiter: request `i` of a phase is due at `start + i / rate`, whatever
//! the earlier requests' answers. A request sent late (the in-flight cap was full, or the
//! runtime was busy) is sent as soon as it can and its lag is recorded; the next ones keep their
//! own due times, so the phase's average rate stays the target unless the server can't keep up.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::Histogram;
use tokio::sync::Semaphore;
use tokio::time::Instant;

/// When request `i` is due, from the phase's start.
pub fn due(rate: f64, i: u64) -> Duration {
    Duration::from_secs_f64(i as f64 / rate)
}

/// How a paced phase went.
#[derive(Clone, Debug)]
pub struct PaceStats {
    pub ops: u64,
    pub target_rate: f64,
    /// Sends per second between the first and the last send: `(ops - 1) / span`.
    pub achieved_rate: f64,
    /// From the phase's start to the last send, and to the last answer.
    pub send_seconds: f64,
    pub done_seconds: f64,
    /// Microseconds each send came after its due time.
    pub lag_us: Histogram<u64>,
    /// `stop` resolved before every item was sent: `ops` counts the sends made.
    pub stopped: bool,
}

/// After a stop, how long the calls already sent get to finish (their retries included).
pub const STOPPED_IN_FLIGHT_GRACE: Duration = Duration::from_secs(10);

/// Runs `call` for each item at `rate` per second, at most `limit` in flight (`permits` is the
/// semaphore with `limit` permits shared by the run), and returns when every call has finished.
/// Once `stop` resolves no further item is sent, and the calls in flight get
/// [`STOPPED_IN_FLIGHT_GRACE`] to finish.
pub async fn paced<T, F, Fut>(
    items: Vec<T>,
    rate: f64,
    permits: &Arc<Semaphore>,
    limit: u32,
    stop: impl Future<Output = ()>,
    mut call: F,
) -> PaceStats
where
    T: Send + 'static,
    F: FnMut(T) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    tokio::pin!(stop);
    let start = Instant::now();
    let mut ops = 0;
    let mut stopped = false;
    let mut lag_us = Histogram::new(3).expect("3 significant digits is valid");
    let mut last_send = start;
    for (i, item) in items.into_iter().enumerate() {
        let due_at = start + due(rate, i as u64);
        let permit = tokio::select! {
            biased;
            _ = &mut stop => None,
            p = async {
                tokio::time::sleep_until(due_at).await;
                permits.clone().acquire_owned().await.ok()
            } => p,
        };
        let Some(permit) = permit else {
            stopped = true;
            break;
        };
        ops += 1;
        let now = Instant::now();
        let _ = lag_us.record(now.saturating_duration_since(due_at).as_micros() as u64);
        last_send = now;
        let fut = call(item);
        tokio::spawn(async move {
            fut.await;
            drop(permit);
        });
    }
    let send_seconds = (last_send - start).as_secs_f64();
    // Every call has finished when every permit is back.
    let all_back = async {
        if let Ok(all) = permits.acquire_many(limit).await {
            drop(all);
        }
    };
    if stopped {
        if tokio::time::timeout(STOPPED_IN_FLIGHT_GRACE, all_back)
            .await
            .is_err()
        {
            tracing::warn!(
                "load: calls still in flight {} s after the stop; reporting without them",
                STOPPED_IN_FLIGHT_GRACE.as_secs()
            );
        }
    } else {
        all_back.await;
    }
    let done_seconds = start.elapsed().as_secs_f64();
    let achieved_rate = if ops > 1 && send_seconds > 0.0 {
        (ops - 1) as f64 / send_seconds
    } else {
        rate
    };
    PaceStats {
        ops,
        target_rate: rate,
        achieved_rate,
        send_seconds,
        done_seconds,
        lag_us,
        stopped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex;

    #[tokio::test(start_paused = true)]
    async fn sends_on_schedule_whatever_the_answers_take() {
        let sent = Arc::new(Mutex::new(Vec::new()));
        let start = Instant::now();
        let permits = Arc::new(Semaphore::new(100));
        let log = sent.clone();
        let never = std::future::pending();
        let stats = paced(
            (0..11).collect(),
            10.0,
            &permits,
            100,
            never,
            move |i: u32| {
                let log = log.clone();
                async move {
                    log.lock().push((i, start.elapsed()));
                    // Slow answers: an open loop doesn't wait for them.
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            },
        )
        .await;
        let sent = sent.lock().clone();
        for (i, at) in &sent {
            assert_eq!(*at, Duration::from_millis(100 * *i as u64), "op {i}");
        }
        assert_eq!(stats.ops, 11);
        assert!((stats.achieved_rate - 10.0).abs() < 1e-6, "{stats:?}");
        assert!((stats.send_seconds - 1.0).abs() < 1e-6);
        assert!((stats.done_seconds - 2.0).abs() < 1e-6);
        assert_eq!(stats.lag_us.max(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_in_flight_cap_shows_as_lag() {
        let permits = Arc::new(Semaphore::new(1));
        let never = std::future::pending();
        let stats = paced(
            (0..3).collect(),
            100.0,
            &permits,
            1,
            never,
            |_: u32| async {
                tokio::time::sleep(Duration::from_millis(50)).await;
            },
        )
        .await;
        // Op 1 was due at 10 ms but sent at 50 ms; op 2 due at 20 ms, sent at 100 ms.
        assert!(stats.lag_us.max() >= 79_000, "{}", stats.lag_us.max());
        assert!(stats.achieved_rate < 25.0);
        assert_eq!(permits.available_permits(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stop_ends_the_sends_and_waits_for_the_calls_in_flight() {
        let permits = Arc::new(Semaphore::new(10));
        let finished = Arc::new(Mutex::new(0));
        let done = finished.clone();
        // 100 items at 10/s; stopped at 0.45 s: items 0-4 were sent.
        let stop = tokio::time::sleep(Duration::from_millis(450));
        let stats = paced(
            (0..100).collect(),
            10.0,
            &permits,
            10,
            stop,
            move |_: u32| {
                let done = done.clone();
                async move {
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    *done.lock() += 1;
                }
            },
        )
        .await;
        assert!(stats.stopped);
        assert_eq!(stats.ops, 5);
        assert_eq!(*finished.lock(), 5, "the calls in flight finished first");
        assert_eq!(permits.available_permits(), 10);
    }
}
