//! A member's Prometheus metrics, under etcd's names where they mean what etcd's mean.
//!
//! [`StoreMetrics`] holds the handles the raft driver and the peer links update as they work;
//! [`StoreMetrics::register`] adds them, and the gauges read from the member's state on each
//! scrape, to the process's [`telemetry::Registry`]. A member whose metrics are not served
//! (tests, the in-process harness) updates the same handles and nobody reads them.

use std::sync::Arc;

use telemetry::{Counter, Gauge, Histogram, MetricVec, Registry};

use crate::member::Shared;

/// etcd's buckets for its disk latencies (`etcd_disk_wal_fsync_duration_seconds`,
/// `etcd_debugging_snap_save_total_duration_seconds`): 1 ms doubling to 8.192 s.
pub const DISK_BUCKETS: [f64; 14] = [
    0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096,
    8.192,
];

/// The metrics the driver and the peer links update. Cheap to clone: clones share the series.
#[derive(Clone, Debug)]
pub struct StoreMetrics {
    /// `etcd_server_leader_changes_seen_total`: times this member saw a new leader.
    pub leader_changes: Counter,
    /// `etcd_server_proposals_pending`: this member's proposals not yet applied.
    pub proposals_pending: Gauge,
    /// `etcd_server_proposals_failed_total`: proposals answered with an error rather than a
    /// result (no leader, timed out, lost with a deposed leader).
    pub proposals_failed: Counter,
    /// `etcd_disk_wal_fsync_duration_seconds`: each fdatasync of the WAL.
    pub wal_fsync: Histogram,
    /// `etcd_debugging_snap_save_total_duration_seconds`: writing a local snapshot, from the
    /// state view to the renamed file.
    pub snapshot_save: Histogram,
    /// `etcd_network_peer_sent_bytes_total{To}`: raft message bytes sent to each peer.
    pub peer_sent_bytes: MetricVec<Counter, 1>,
    /// `etcd_network_peer_received_bytes_total{From}`.
    pub peer_received_bytes: MetricVec<Counter, 1>,
    /// `etcd_network_peer_sent_failures_total{To}`: batches a link could not deliver.
    pub peer_sent_failures: MetricVec<Counter, 1>,
}

impl StoreMetrics {
    /// The handles, registered in `registry` (a fresh [`Registry`] for a member whose metrics
    /// nobody serves).
    pub fn new(registry: &Registry) -> StoreMetrics {
        StoreMetrics {
            leader_changes: registry.counter(
                "etcd_server_leader_changes_seen_total",
                "The number of leader changes seen.",
            ),
            proposals_pending: registry.gauge(
                "etcd_server_proposals_pending",
                "The current number of pending proposals to commit.",
            ),
            proposals_failed: registry.counter(
                "etcd_server_proposals_failed_total",
                "The total number of failed proposals seen.",
            ),
            wal_fsync: registry.histogram(
                "etcd_disk_wal_fsync_duration_seconds",
                "The latency distributions of fsync called by WAL.",
                &DISK_BUCKETS,
            ),
            snapshot_save: registry.histogram(
                "etcd_debugging_snap_save_total_duration_seconds",
                "The total latency distributions of save called by snapshot.",
                &DISK_BUCKETS,
            ),
            peer_sent_bytes: registry.counter_vec(
                "etcd_network_peer_sent_bytes_total",
                "The total number of bytes sent to peers.",
                &["To"],
            ),
            peer_received_bytes: registry.counter_vec(
                "etcd_network_peer_received_bytes_total",
                "The total number of bytes received from peers.",
                &["From"],
            ),
            peer_sent_failures: registry.counter_vec(
                "etcd_network_peer_sent_failures_total",
                "The total number of send failures from peers.",
                &["To"],
            ),
        }
    }
}

/// A member id as etcd writes it in its peer labels (hexadecimal).
pub fn peer_label(id: u64) -> std::borrow::Cow<'static, str> {
    format!("{id:x}").into()
}

/// Adds to `registry` the gauges read from the member behind `shared` when scraped: its raft
/// status and its state machine.
pub fn register_state_gauges(registry: &Registry, shared: &Arc<Shared>) {
    let raft = |read: fn(&crate::member::RaftStatus) -> f64| {
        let shared = shared.clone();
        move || read(&shared.raft_status())
    };
    registry.gauge_fn(
        "etcd_server_has_leader",
        "Whether or not a leader exists. 1 is existence, 0 is not.",
        raft(|s| f64::from(u8::from(s.leader_id != 0))),
    );
    registry.gauge_fn(
        "etcd_server_is_leader",
        "Whether or not this member is a leader. 1 if is, 0 otherwise.",
        raft(|s| f64::from(u8::from(s.is_leader))),
    );
    // etcd's two are gauges despite the `_total`: the commit and applied indexes.
    registry.gauge_fn(
        "etcd_server_proposals_committed_total",
        "The total number of consensus proposals committed.",
        raft(|s| s.commit_index as f64),
    );
    registry.gauge_fn(
        "etcd_server_proposals_applied_total",
        "The total number of consensus proposals applied.",
        raft(|s| s.applied_index as f64),
    );
    let id = shared.config.id();
    registry.gauge_vec_fn(
        "etcd_server_id",
        "Server or member ID in hexadecimal format. 1 for 'server_id' label with current ID.",
        "server_id",
        move || vec![(peer_label(id).into_owned(), 1.0)],
    );
    let state = |read: fn(&Shared) -> u64| {
        let shared = shared.clone();
        move || read(&shared) as f64
    };
    registry.gauge_fn(
        "etcd_mvcc_db_total_size_in_bytes",
        "Total size of the underlying database physically allocated in bytes.",
        state(Shared::disk_size),
    );
    registry.gauge_fn(
        "etcd_mvcc_db_total_size_in_use_in_bytes",
        "Total size of the underlying database logically in use in bytes.",
        state(|s| s.mvcc.read().data_size()),
    );
    registry.gauge_fn(
        "etcd_debugging_mvcc_keys_total",
        "Total number of keys.",
        state(|s| s.mvcc.read().key_count()),
    );
    registry.gauge_fn(
        "etcd_debugging_mvcc_current_revision",
        "The current revision of store.",
        state(|s| s.mvcc.read().current_revision().max(0) as u64),
    );
    registry.gauge_fn(
        "etcd_debugging_mvcc_compact_revision",
        "The revision of the last compaction in store.",
        state(|s| s.mvcc.read().compact_revision().max(0) as u64),
    );
    registry.gauge_fn(
        "etcd_debugging_mvcc_watcher_total",
        "Total number of watchers.",
        state(|s| s.hub.lock().len() as u64),
    );
}
