//! [`Metrics`]: the controller manager's counters, registered in the process's
//! [`telemetry::Registry`] (served with its health checks on `--metrics-addr`).

use telemetry::{Counter, Gauge, MetricVec, Registry};

/// Shared counters; cheap to clone.
#[derive(Clone, Debug)]
pub struct Metrics {
    registry: Registry,
    reconciles: MetricVec<Counter, 1>,
    errors: MetricVec<Counter, 1>,
    leader: Gauge,
}

impl Default for Metrics {
    /// Metrics in a registry of their own.
    fn default() -> Metrics {
        Metrics::new(&Registry::new())
    }
}

impl Metrics {
    /// The controller manager's metrics, registered in `registry`.
    pub fn new(registry: &Registry) -> Metrics {
        Metrics {
            registry: registry.clone(),
            reconciles: registry.counter_vec(
                "kemu_controller_reconciles_total",
                "Reconciles, by controller.",
                &["controller"],
            ),
            errors: registry.counter_vec(
                "kemu_controller_reconcile_errors_total",
                "Reconciles that failed (and were requeued), by controller.",
                &["controller"],
            ),
            leader: registry.gauge(
                "kemu_controller_manager_leader",
                "Whether this controller manager leads (1) or not (0).",
            ),
        }
    }

    pub fn reconciled(&self, controller: &'static str, ok: bool) {
        self.reconciles.with([controller.into()]).inc();
        if !ok {
            self.errors.with([controller.into()]).inc();
        }
    }

    pub fn set_leader(&self, leader: bool) {
        self.leader.set(i64::from(leader));
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
    fn counts_reconciles_and_errors_by_controller() {
        let m = Metrics::default();
        m.reconciled("replicaset", true);
        m.reconciled("replicaset", false);
        m.set_leader(true);
        let text = m.render();
        assert!(text.contains("kemu_controller_reconciles_total{controller=\"replicaset\"} 2\n"));
        assert!(
            text.contains("kemu_controller_reconcile_errors_total{controller=\"replicaset\"} 1\n")
        );
        assert!(text.contains("kemu_controller_manager_leader 1\n"));
    }
}
