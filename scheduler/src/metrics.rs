//! [`Metrics`]: the scheduler's Prometheus metrics (kube-scheduler's names where they mean the
//! same), registered in the process's [`telemetry::Registry`] and updated lock-free by the
//! actors (the e2e histogram takes a short lock per bound pod).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use api::event_sink::EventSinkStats;
use telemetry::{Counter, Gauge, Histogram, MetricVec, Registry};

use crate::queue::QueueLengths;

/// Upper bounds (seconds) of the e2e scheduling duration histogram.
const BUCKETS: [f64; 15] = [
    0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096,
    8.192, 16.384,
];

/// Upper bounds (seconds) of `scheduler_framework_extension_point_duration_seconds`, as
/// kube-scheduler's: 0.1 ms doubling twelve times.
const EXTENSION_POINT_BUCKETS: [f64; 12] = [
    0.0001, 0.0002, 0.0004, 0.0008, 0.0016, 0.0032, 0.0064, 0.0128, 0.0256, 0.0512, 0.1024, 0.2048,
];

/// The scheduling profile every extension point is labelled with (kemu runs one).
const PROFILE: &str = "default-scheduler";

/// The extension points the scheduler's drivers time (the pure decision core reads no
/// clock, so its filters and scores are timed together as the scheduling algorithm).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExtensionPoint {
    PreBind,
    Bind,
}

impl ExtensionPoint {
    fn label(self) -> &'static str {
        match self {
            ExtensionPoint::PreBind => "PreBind",
            ExtensionPoint::Bind => "Bind",
        }
    }
}

/// The outcome of one scheduling attempt, as `scheduler_schedule_attempts_total{result}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttemptResult {
    Scheduled,
    Unschedulable,
    Error,
}

impl AttemptResult {
    const ALL: [AttemptResult; 3] = [
        AttemptResult::Scheduled,
        AttemptResult::Unschedulable,
        AttemptResult::Error,
    ];

    fn label(self) -> &'static str {
        match self {
            AttemptResult::Scheduled => "scheduled",
            AttemptResult::Unschedulable => "unschedulable",
            AttemptResult::Error => "error",
        }
    }
}

#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    attempts: [Counter; 3],
    e2e: Histogram,
    algorithm: Histogram,
    extension_points: MetricVec<Histogram, 3>,
    /// active, backoff, unschedulable.
    pending: [Gauge; 3],
    preemption_victims: Counter,
    /// What became of the scheduler's events (sent several per call).
    pub event_sink: Arc<EventSinkStats>,
}

impl Default for Metrics {
    /// Metrics in a registry of their own.
    fn default() -> Metrics {
        Metrics::register(&Registry::new())
    }
}

impl Metrics {
    /// The scheduler's metrics, registered in `registry`.
    pub fn new(registry: &Registry) -> Arc<Metrics> {
        Arc::new(Metrics::register(registry))
    }

    fn register(registry: &Registry) -> Metrics {
        let attempts = registry.counter_vec(
            "scheduler_schedule_attempts_total",
            "Number of attempts to schedule pods, by the result.",
            &["result"],
        );
        let pending = registry.gauge_vec(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type.",
            &["queue"],
        );
        let event_sink = Arc::new(EventSinkStats::default());
        let sink = event_sink.clone();
        registry.counter_vec_fn(
            "kemu_scheduler_events_total",
            "The scheduler's events, by what became of them.",
            "outcome",
            move || {
                [
                    ("created", &sink.created),
                    ("failed", &sink.failed),
                    ("dropped", &sink.dropped),
                ]
                .into_iter()
                .map(|(outcome, n)| (outcome.to_string(), n.load(Ordering::Relaxed) as f64))
                .collect()
            },
        );
        Metrics {
            registry: registry.clone(),
            attempts: AttemptResult::ALL.map(|r| attempts.with([r.label().into()])),
            e2e: registry.histogram(
                "scheduler_e2e_scheduling_duration_seconds",
                "E2e scheduling latency in seconds (scheduling algorithm + binding).",
                &BUCKETS,
            ),
            algorithm: registry.histogram(
                "scheduler_scheduling_algorithm_duration_seconds",
                "Scheduling algorithm latency in seconds.",
                &BUCKETS,
            ),
            extension_points: registry.histogram_vec(
                "scheduler_framework_extension_point_duration_seconds",
                "Latency for running all plugins of a specific extension point.",
                &["extension_point", "status", "profile"],
                &EXTENSION_POINT_BUCKETS,
            ),
            pending: ["active", "backoff", "unschedulable"].map(|q| pending.with([q.into()])),
            preemption_victims: registry.counter(
                "scheduler_preemption_victims_total",
                "Pods evicted by preemption.",
            ),
            event_sink,
        }
    }

    pub fn attempt(&self, result: AttemptResult) {
        self.attempts[result as usize].inc();
    }

    pub fn attempts(&self, result: AttemptResult) -> u64 {
        self.attempts[result as usize].get()
    }

    /// Records one pod's time from the start of its attempt to its bind.
    pub fn e2e(&self, took: Duration) {
        self.e2e.observe(took.as_secs_f64());
    }

    /// Records one run of the scheduling algorithm (filters and scores, for one decision).
    pub fn algorithm(&self, took: Duration) {
        self.algorithm.observe(took.as_secs_f64());
    }

    /// Records one run of an extension point, and whether it succeeded.
    pub fn extension_point(&self, point: ExtensionPoint, success: bool, took: Duration) {
        let status = if success { "Success" } else { "Error" };
        self.extension_points
            .with([point.label().into(), status.into(), PROFILE.into()])
            .observe(took.as_secs_f64());
    }

    pub fn victims(&self, n: usize) {
        self.preemption_victims.inc_by(n as u64);
    }

    pub fn set_pending(&self, lengths: QueueLengths) {
        self.pending[0].set(lengths.active as i64);
        self.pending[1].set(lengths.backoff as i64);
        self.pending[2].set(lengths.unschedulable as i64);
    }

    /// The text exposition of the registry these metrics are in.
    pub fn render(&self) -> String {
        self.registry.encode()
    }
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
        m.algorithm(Duration::from_micros(1500));
        m.extension_point(ExtensionPoint::Bind, true, Duration::from_micros(300));
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
        assert!(
            text.contains("scheduler_scheduling_algorithm_duration_seconds_bucket{le=\"0.002\"} 1")
        );
        assert!(text.contains("scheduler_framework_extension_point_duration_seconds_bucket{extension_point=\"Bind\",status=\"Success\",profile=\"default-scheduler\",le=\"0.0004\"} 1"));
    }
}
