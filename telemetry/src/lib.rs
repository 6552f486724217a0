//! Metrics and health for every kemu process: one [`Telemetry`] per process, served on its
//! metrics address as kube-apiserver, etcd and the other Kubernetes components serve theirs.
//!
//! - [`registry`]: the [`Registry`] of Prometheus metrics (counters, gauges, histograms, by
//!   labels or read on each scrape), encoded in the Prometheus text format by the Prometheus
//!   project's own Rust client, `prometheus-client`.
//! - [`health`]: named [`Check`]s behind `/healthz`, `/livez` and `/readyz`, answered in
//!   kube-apiserver's words (`?verbose`, `?exclude=`, `/readyz/<check>`).
//! - [`server`]: [`Telemetry`], the axum router serving both, with graceful shutdown.
//! - [`process`]: the standard `process_*` metrics.
//!
//! ```no_run
//! # async fn run(shutdown: impl std::future::Future<Output = ()> + Send + 'static) -> Result<(), telemetry::ServeError> {
//! let telemetry = telemetry::Telemetry::new();
//! let has_leader = telemetry.metrics.gauge("etcd_server_has_leader", "Whether a leader exists.");
//! has_leader.set(1);
//! let synced = telemetry::Condition::new("caches not synced");
//! telemetry.health.readiness("informer-sync", synced.clone());
//! telemetry.serve_on("127.0.0.1:9090".parse().unwrap(), shutdown).await
//! # }
//! ```
//!
//! Nothing here knows Kubernetes objects: the store serves its members' metrics with it too.

pub mod health;
pub mod process;
pub mod registry;
pub mod server;

pub use health::{async_check, Check, CheckResult, Condition, Endpoint, Health, HealthAnswer};
pub use registry::{MetricVec, Registry, VecMetric, CONTENT_TYPE};
pub use server::{bind, health_response, ServeError, Telemetry};

/// The client itself, for metrics the registry's helpers do not cover.
pub use prometheus_client;
/// The metric types the registry hands out, for fields that hold them.
pub use prometheus_client::metrics::{
    counter::Counter, gauge::Gauge, histogram::exponential_buckets, histogram::Histogram,
};
