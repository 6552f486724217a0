//! clusterloader2's EtcdMetrics from the store members' `/metrics` (etcd's names): at `gather`
//! each member's disk and network histograms, summed over the members series by series, and
//! the largest database size seen, polled every `waitTime` (default 1 min) from `start` and
//! once more at `gather`. The file is etcd's shape: `backendCommitDuration`,
//! `snapshotSaveTotalDuration`, `peerRoundTripTime`, `walFsyncDuration` (each a list of
//! `{"labels", "buckets"}`) and `maxDatabaseSize`. A series the members do not export stays an
//! empty list, as in clusterloader2, and the measurement's details name it.

use serde_json::{json, Value as Json};

use super::prometheus::{self, Sample};

/// The summary's histogram fields and the etcd series each comes from.
pub const HISTOGRAMS: [(&str, &str); 4] = [
    (
        "backendCommitDuration",
        "etcd_disk_backend_commit_duration_seconds",
    ),
    (
        "snapshotSaveTotalDuration",
        "etcd_debugging_snap_save_total_duration_seconds",
    ),
    (
        "peerRoundTripTime",
        "etcd_network_peer_round_trip_time_seconds",
    ),
    ("walFsyncDuration", "etcd_disk_wal_fsync_duration_seconds"),
];

/// A member's database size, under either of etcd's names for it.
pub fn database_size(samples: &[Sample]) -> Option<f64> {
    samples
        .iter()
        .find(|s| {
            s.name == "etcd_debugging_mvcc_db_total_size_in_bytes"
                || s.name == "etcd_mvcc_db_total_size_in_bytes"
        })
        .map(|s| s.value)
}

/// The summary of the members' samples, and the series no member exported.
pub fn summarize(members: &[Vec<Sample>], max_database_size: f64) -> (Json, Vec<&'static str>) {
    let mut summary = serde_json::Map::new();
    let mut missing = Vec::new();
    for (field, series) in HISTOGRAMS {
        let mut histograms = Vec::new();
        for samples in members {
            prometheus::add_buckets(&mut histograms, samples, series);
        }
        if histograms.is_empty() {
            missing.push(series);
        }
        summary.insert(field.to_string(), json!(histograms));
    }
    summary.insert("maxDatabaseSize".into(), json!(max_database_size));
    (Json::Object(summary), missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_are_summed_and_missing_series_named() {
        let member = prometheus::parse(
            "etcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.001\"} 3\n\
             etcd_disk_wal_fsync_duration_seconds_bucket{le=\"+Inf\"} 5\n\
             etcd_disk_wal_fsync_duration_seconds_count 5\n\
             etcd_debugging_snap_save_total_duration_seconds_bucket{le=\"+Inf\"} 1\n\
             etcd_mvcc_db_total_size_in_bytes 4096\n",
        );
        assert_eq!(database_size(&member), Some(4096.0));
        let (summary, missing) = summarize(&[member.clone(), member], 8192.0);
        let wal = &summary["walFsyncDuration"];
        assert_eq!(wal.as_array().map(Vec::len), Some(1), "{summary}");
        assert_eq!(
            wal[0],
            json!({"labels": {"__name__": "etcd_disk_wal_fsync_duration_seconds_bucket"},
                   "buckets": {"0.001": 6, "+Inf": 10}})
        );
        assert_eq!(
            summary["snapshotSaveTotalDuration"][0]["buckets"]["+Inf"],
            2
        );
        assert_eq!(summary["backendCommitDuration"], json!([]));
        assert_eq!(summary["maxDatabaseSize"], 8192.0);
        assert_eq!(
            missing,
            [
                "etcd_disk_backend_commit_duration_seconds",
                "etcd_network_peer_round_trip_time_seconds"
            ]
        );
    }
}
