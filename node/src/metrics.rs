//! [`Metrics`]: the node host's counters, with lease renewal timeliness, served with its health
//! checks on `--metrics-addr`. The kubelets bump plain atomics (relaxed adds, nothing more on the
//! per-pod and per-heartbeat paths); the registry reads them when scraped.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use api::event_sink::EventSinkStats;
use telemetry::{Histogram, Registry};

/// Upper bounds (seconds) of the lease renewal gap histogram.
const GAP_BUCKETS: [f64; 8] = [5.0, 9.0, 10.0, 11.0, 12.0, 15.0, 20.0, 40.0];

#[derive(Debug)]
pub struct Metrics {
    pub nodes_registered: AtomicU64,
    pub lease_renewals: AtomicU64,
    /// Renewals whose gap since the previous one exceeded 1.5 × the lease interval.
    pub lease_late: AtomicU64,
    pub lease_failures: AtomicU64,
    pub lease_max_gap_ms: AtomicU64,
    lease_gap: Histogram,
    pub node_status_reports: AtomicU64,
    /// Status reports posted early because the server held the Node not Ready.
    pub node_status_corrections: AtomicU64,
    pub watches_opened: AtomicU64,
    /// Pod watch events read only as far as the uid: a running pod's own status coming back,
    /// or a deletion.
    pub pod_events_skimmed: AtomicU64,
    pub pods_started: AtomicU64,
    pub pods_finished: AtomicU64,
    pub status_writes: AtomicU64,
    /// Status writes that failed and were retried.
    pub status_write_failures: AtomicU64,
    pub events: AtomicU64,
    /// What became of the events (sent a few dozen per call).
    pub event_sink: Arc<EventSinkStats>,
}

impl Default for Metrics {
    /// Metrics registered nowhere (a kubelet's tests).
    fn default() -> Metrics {
        Metrics::unregistered(Histogram::new(GAP_BUCKETS))
    }
}

impl Metrics {
    fn unregistered(lease_gap: Histogram) -> Metrics {
        Metrics {
            nodes_registered: AtomicU64::new(0),
            lease_renewals: AtomicU64::new(0),
            lease_late: AtomicU64::new(0),
            lease_failures: AtomicU64::new(0),
            lease_max_gap_ms: AtomicU64::new(0),
            lease_gap,
            node_status_reports: AtomicU64::new(0),
            node_status_corrections: AtomicU64::new(0),
            watches_opened: AtomicU64::new(0),
            pod_events_skimmed: AtomicU64::new(0),
            pods_started: AtomicU64::new(0),
            pods_finished: AtomicU64::new(0),
            status_writes: AtomicU64::new(0),
            status_write_failures: AtomicU64::new(0),
            events: AtomicU64::new(0),
            event_sink: Arc::default(),
        }
    }

    /// The node host's metrics, registered in `registry`.
    pub fn new(registry: &Registry) -> Arc<Metrics> {
        let lease_gap = registry.histogram(
            "kemu_node_host_lease_gap_seconds",
            "Time between two renewals of a node's lease.",
            &GAP_BUCKETS,
        );
        let metrics = Arc::new(Metrics::unregistered(lease_gap));
        type Field = fn(&Metrics) -> &AtomicU64;
        let counters: [(&str, &str, Field); 18] = [
            (
                "kemu_node_host_lease_renewals_total",
                "Node lease renewals.",
                |m| &m.lease_renewals,
            ),
            (
                "kemu_node_host_lease_late_total",
                "Lease renewals more than 1.5 intervals after the previous one.",
                |m| &m.lease_late,
            ),
            (
                "kemu_node_host_lease_failures_total",
                "Lease renewals that failed.",
                |m| &m.lease_failures,
            ),
            (
                "kemu_node_host_node_status_reports_total",
                "Node status reports written.",
                |m| &m.node_status_reports,
            ),
            (
                "kemu_node_host_node_status_corrections_total",
                "Node status reports posted at once because the server held the Node not Ready.",
                |m| &m.node_status_corrections,
            ),
            (
                "kemu_node_host_watches_opened_total",
                "Pod watches opened.",
                |m| &m.watches_opened,
            ),
            (
                "kemu_node_host_pod_events_skimmed_total",
                "Pod watch events read only as far as the uid.",
                |m| &m.pod_events_skimmed,
            ),
            (
                "kemu_node_host_pods_started_total",
                "Pods whose containers started.",
                |m| &m.pods_started,
            ),
            (
                "kemu_node_host_pods_finished_total",
                "Pods that stopped on their node.",
                |m| &m.pods_finished,
            ),
            (
                "kemu_node_host_pod_status_writes_total",
                "Pod status writes.",
                |m| &m.status_writes,
            ),
            (
                "kemu_node_host_pod_status_write_failures_total",
                "Pod status writes that failed and were retried.",
                |m| &m.status_write_failures,
            ),
            (
                "kemu_node_host_events_total",
                "Events the kubelets recorded.",
                |m| &m.events,
            ),
            (
                "kemu_node_host_events_created_total",
                "Events the API server stored.",
                |m| &m.event_sink.created,
            ),
            (
                "kemu_node_host_events_failed_total",
                "Events refused or unanswered.",
                |m| &m.event_sink.failed,
            ),
            (
                "kemu_node_host_events_dropped_total",
                "Events never sent (queue full).",
                |m| &m.event_sink.dropped,
            ),
            (
                "kemu_node_host_event_calls_total",
                "Calls that carried events.",
                |m| &m.event_sink.calls,
            ),
            (
                "kemu_node_host_events_patched_total",
                "Repeated events written as a count on the earlier one.",
                |m| &m.event_sink.patched,
            ),
            (
                "kemu_node_host_events_filtered_total",
                "Events dropped by the per-object spam filter.",
                |m| &m.event_sink.filtered,
            ),
        ];
        for (name, help, field) in counters {
            let m = metrics.clone();
            registry.counter_fn(name, help, move || field(&m).load(Ordering::Relaxed));
        }
        let gauges: [(&str, &str, Field); 2] = [
            (
                "kemu_node_host_nodes_registered",
                "Nodes this host has registered.",
                |m| &m.nodes_registered,
            ),
            (
                "kemu_node_host_lease_max_gap_ms",
                "The longest time between two renewals of a lease, in milliseconds.",
                |m| &m.lease_max_gap_ms,
            ),
        ];
        for (name, help, field) in gauges {
            let m = metrics.clone();
            registry.gauge_fn(name, help, move || field(&m).load(Ordering::Relaxed) as f64);
        }
        registry.gauge_fn(
            "kemu_node_host_resident_bytes",
            "The node host's resident memory in bytes.",
            || resident_bytes() as f64,
        );
        metrics
    }

    /// Records a renewal `gap` after the previous one.
    pub fn lease_renewed(&self, gap: Duration, interval: Duration) {
        self.lease_renewals.fetch_add(1, Ordering::Relaxed);
        if gap > interval.mul_f64(1.5) {
            self.lease_late.fetch_add(1, Ordering::Relaxed);
        }
        self.lease_max_gap_ms
            .fetch_max(gap.as_millis() as u64, Ordering::Relaxed);
        self.lease_gap.observe(gap.as_secs_f64());
    }
}

/// This process's resident set size (Linux), 0 elsewhere.
pub fn resident_bytes() -> u64 {
    telemetry::process::resident_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_reads_the_kubelets_atomics() {
        let registry = Registry::new();
        let m = Metrics::new(&registry);
        m.pods_started.fetch_add(3, Ordering::Relaxed);
        m.nodes_registered.fetch_add(2, Ordering::Relaxed);
        m.event_sink.created.fetch_add(5, Ordering::Relaxed);
        m.lease_renewed(Duration::from_secs(16), Duration::from_secs(10));
        let text = registry.encode();
        for line in [
            "kemu_node_host_pods_started_total 3\n",
            "kemu_node_host_nodes_registered 2\n",
            "kemu_node_host_events_created_total 5\n",
            "kemu_node_host_lease_late_total 1\n",
            "kemu_node_host_lease_max_gap_ms 16000\n",
            "kemu_node_host_lease_gap_seconds_bucket{le=\"15\"} 0\n",
            "kemu_node_host_lease_gap_seconds_bucket{le=\"20\"} 1\n",
            "kemu_node_host_resident_bytes ",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
    }
}
