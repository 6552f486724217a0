//! [`Metrics`]: the scheduler's Prometheus metrics, updated lock-free by the actors and served
//! as text on `/metrics`.

use std::fmt::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use api::event_sink::EventSinkStats;

use crate::queue::QueueLengths;

/// Upper bounds (seconds) of the e2e scheduling duration histogram.
const BUCKETS: [f64; 15] = [
    0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096,
    8.192, 16.384,
];

/// The outcome of one scheduling attempt, as `scheduler_schedule_attempts_total{result}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttemptResult {
    Scheduled,
    Unschedulable,
    Error,
}

#[derive(Debug, Default)]
pub struct Metrics {
    attempts: [AtomicU64; 3],
    e2e_buckets: [AtomicU64; BUCKETS.len()],
    e2e_count: AtomicU64,
    e2e_sum_micros: AtomicU64,
    pending: [AtomicU64; 3],
    preemption_victims: AtomicU64,
    /// What became of the scheduler's events (sent several per call).
    pub event_sink: Arc<EventSinkStats>,
}

impl Metrics {
    pub fn new() -> Arc<Metrics> {
        Arc::new(Metrics::default())
    }

    pub fn attempt(&self, result: AttemptResult) {
        self.attempts[result as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn attempts(&self, result: AttemptResult) -> u64 {
        self.attempts[result as usize].load(Ordering::Relaxed)
    }

    /// Records one pod's time from the start of its attempt to its bind.
    pub fn e2e(&self, took: Duration) {
        let seconds = took.as_secs_f64();
        if let Some(i) = BUCKETS.iter().position(|b| seconds <= *b) {
            self.e2e_buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        self.e2e_count.fetch_add(1, Ordering::Relaxed);
        self.e2e_sum_micros
            .fetch_add(took.as_micros() as u64, Ordering::Relaxed);
    }

    pub fn victims(&self, n: usize) {
        self.preemption_victims
            .fetch_add(n as u64, Ordering::Relaxed);
    }

    pub fn set_pending(&self, lengths: QueueLengths) {
        self.pending[0].store(lengths.active as u64, Ordering::Relaxed);
        self.pending[1].store(lengths.backoff as u64, Ordering::Relaxed);
        self.pending[2].store(lengths.unschedulable as u64, Ordering::Relaxed);
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        out.push_str("# HELP scheduler_schedule_attempts_total Number of attempts to schedule pods, by the result.\n# TYPE scheduler_schedule_attempts_total counter\n");
        for (i, result) in ["scheduled", "unschedulable", "error"].iter().enumerate() {
            let _ = writeln!(
                out,
                "scheduler_schedule_attempts_total{{result=\"{result}\"}} {}",
                load(&self.attempts[i])
            );
        }
        out.push_str("# HELP scheduler_e2e_scheduling_duration_seconds E2e scheduling latency in seconds (scheduling algorithm + binding).\n# TYPE scheduler_e2e_scheduling_duration_seconds histogram\n");
        let mut cumulative = 0;
        for (i, bound) in BUCKETS.iter().enumerate() {
            cumulative += load(&self.e2e_buckets[i]);
            let _ = writeln!(
                out,
                "scheduler_e2e_scheduling_duration_seconds_bucket{{le=\"{bound}\"}} {cumulative}"
            );
        }
        let count = load(&self.e2e_count);
        let _ = writeln!(
            out,
            "scheduler_e2e_scheduling_duration_seconds_bucket{{le=\"+Inf\"}} {count}"
        );
        let _ = writeln!(
            out,
            "scheduler_e2e_scheduling_duration_seconds_sum {}",
            load(&self.e2e_sum_micros) as f64 / 1e6
        );
        let _ = writeln!(
            out,
            "scheduler_e2e_scheduling_duration_seconds_count {count}"
        );
        out.push_str("# HELP scheduler_pending_pods Number of pending pods, by the queue type.\n# TYPE scheduler_pending_pods gauge\n");
        for (i, queue) in ["active", "backoff", "unschedulable"].iter().enumerate() {
            let _ = writeln!(
                out,
                "scheduler_pending_pods{{queue=\"{queue}\"}} {}",
                load(&self.pending[i])
            );
        }
        out.push_str("# HELP scheduler_preemption_victims_total Pods evicted by preemption.\n# TYPE scheduler_preemption_victims_total counter\n");
        let _ = writeln!(
            out,
            "scheduler_preemption_victims_total {}",
            load(&self.preemption_victims)
        );
        out.push_str("# HELP kemu_scheduler_events_total The scheduler's events, by what became of them.\n# TYPE kemu_scheduler_events_total counter\n");
        let sink = &self.event_sink;
        for (outcome, count) in [
            ("created", &sink.created),
            ("failed", &sink.failed),
            ("dropped", &sink.dropped),
        ] {
            let _ = writeln!(
                out,
                "kemu_scheduler_events_total{{outcome=\"{outcome}\"}} {}",
                load(count)
            );
        }
        out
    }
}

/// Serves `/metrics` (and `/healthz`) on `listener` until `shutdown`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    metrics: Arc<Metrics>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use axum::routing::get;
    let app = axum::Router::new()
        .route(
            "/metrics",
            get(move || {
                let metrics = metrics.clone();
                async move { metrics.render() }
            }),
        )
        .route("/healthz", get(|| async { "ok" }));
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}

/// Binds the metrics address.
pub async fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_prometheus_text() {
        let m = Metrics::default();
        m.attempt(AttemptResult::Scheduled);
        m.attempt(AttemptResult::Unschedulable);
        m.e2e(Duration::from_millis(3));
        m.set_pending(QueueLengths {
            active: 2,
            backoff: 1,
            unschedulable: 4,
            in_flight: 0,
        });
        let text = m.render();
        assert!(text.contains("scheduler_schedule_attempts_total{result=\"scheduled\"} 1"));
        assert!(text.contains("scheduler_e2e_scheduling_duration_seconds_bucket{le=\"0.002\"} 0"));
        assert!(text.contains("scheduler_e2e_scheduling_duration_seconds_bucket{le=\"0.004\"} 1"));
        assert!(text.contains("scheduler_e2e_scheduling_duration_seconds_count 1"));
        assert!(text.contains("scheduler_pending_pods{queue=\"unschedulable\"} 4"));
    }
}
