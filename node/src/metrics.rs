//! [`Metrics`]: the node host's counters, with lease renewal timeliness, served as Prometheus
//! text on `--metrics-addr`.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use api::event_sink::EventSinkStats;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Upper bounds (seconds) of the lease renewal gap histogram.
const GAP_BUCKETS: [f64; 9] = [5.0, 9.0, 10.0, 11.0, 12.0, 15.0, 20.0, 40.0, f64::INFINITY];

#[derive(Debug, Default)]
pub struct Metrics {
    pub nodes_registered: AtomicU64,
    pub lease_renewals: AtomicU64,
    /// Renewals whose gap since the previous one exceeded 1.5 × the lease interval.
    pub lease_late: AtomicU64,
    pub lease_failures: AtomicU64,
    pub lease_max_gap_ms: AtomicU64,
    lease_gap_buckets: [AtomicU64; GAP_BUCKETS.len()],
    pub node_status_reports: AtomicU64,
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

impl Metrics {
    /// Records a renewal `gap` after the previous one.
    pub fn lease_renewed(&self, gap: Duration, interval: Duration) {
        self.lease_renewals.fetch_add(1, Ordering::Relaxed);
        if gap > interval.mul_f64(1.5) {
            self.lease_late.fetch_add(1, Ordering::Relaxed);
        }
        self.lease_max_gap_ms
            .fetch_max(gap.as_millis() as u64, Ordering::Relaxed);
        let secs = gap.as_secs_f64();
        if let Some(i) = GAP_BUCKETS.iter().position(|b| secs <= *b) {
            self.lease_gap_buckets[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let counters = [
            ("kemu_node_host_nodes_registered", &self.nodes_registered),
            ("kemu_node_host_lease_renewals_total", &self.lease_renewals),
            ("kemu_node_host_lease_late_total", &self.lease_late),
            ("kemu_node_host_lease_failures_total", &self.lease_failures),
            ("kemu_node_host_lease_max_gap_ms", &self.lease_max_gap_ms),
            (
                "kemu_node_host_node_status_reports_total",
                &self.node_status_reports,
            ),
            ("kemu_node_host_watches_opened_total", &self.watches_opened),
            (
                "kemu_node_host_pod_events_skimmed_total",
                &self.pod_events_skimmed,
            ),
            ("kemu_node_host_pods_started_total", &self.pods_started),
            ("kemu_node_host_pods_finished_total", &self.pods_finished),
            (
                "kemu_node_host_pod_status_writes_total",
                &self.status_writes,
            ),
            (
                "kemu_node_host_pod_status_write_failures_total",
                &self.status_write_failures,
            ),
            ("kemu_node_host_events_total", &self.events),
            (
                "kemu_node_host_events_created_total",
                &self.event_sink.created,
            ),
            (
                "kemu_node_host_events_failed_total",
                &self.event_sink.failed,
            ),
            (
                "kemu_node_host_events_dropped_total",
                &self.event_sink.dropped,
            ),
            ("kemu_node_host_event_calls_total", &self.event_sink.calls),
        ];
        for (name, value) in counters {
            let _ = writeln!(out, "{name} {}", value.load(Ordering::Relaxed));
        }
        let mut cumulative = 0;
        for (bound, count) in GAP_BUCKETS.iter().zip(&self.lease_gap_buckets) {
            cumulative += count.load(Ordering::Relaxed);
            let le = if bound.is_infinite() {
                "+Inf".to_string()
            } else {
                bound.to_string()
            };
            let _ = writeln!(
                out,
                "kemu_node_host_lease_gap_seconds_bucket{{le=\"{le}\"}} {cumulative}"
            );
        }
        let _ = writeln!(out, "kemu_node_host_resident_bytes {}", resident_bytes());
        out
    }
}

/// This process's resident set size (Linux), 0 elsewhere.
pub fn resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// Answers every HTTP request on `listener` with the metrics text.
pub async fn serve(listener: tokio::net::TcpListener, metrics: std::sync::Arc<Metrics>) {
    loop {
        let Ok((mut socket, _)) = listener.accept().await else {
            continue;
        };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 2048];
            let _ = socket.read(&mut buf).await;
            let body = metrics.render();
            let response = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = socket.write_all(response.as_bytes()).await;
        });
    }
}
