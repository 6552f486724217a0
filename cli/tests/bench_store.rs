//! `kemu bench store` drives kemu's store and real etcd with the same generator (the binary is
//! built with the `etcd` feature by `scripts/test`, and etcd comes from `scripts/setup`).

use crate::common;

use common::kemu_json;

#[test]
fn bench_drives_kemu_and_etcd_side_by_side() {
    let results = kemu_json(&[
        "bench",
        "store",
        "--spawn",
        "3",
        "--spawn-etcd",
        "3",
        "--clients",
        "8",
        "--ops",
        "400",
        "--json",
    ]);
    let results = results.as_array().expect("an array");
    assert_eq!(results.len(), 2, "{results:?}");
    for r in results {
        assert_eq!(r["ops"], 400, "{r}");
        assert_eq!(r["errors"], 0, "{r}");
        assert!(r["ops_per_sec"].as_f64().unwrap_or(0.0) > 0.0, "{r}");
        assert!(r["latency_ms"]["p99"].as_f64().unwrap_or(0.0) > 0.0, "{r}");
    }
    assert!(results[0]["target"]
        .as_str()
        .unwrap_or("")
        .starts_with("kemu store"));
    assert!(results[1]["target"]
        .as_str()
        .unwrap_or("")
        .starts_with("etcd"));
}

/// `--grpc`: a second kemu store driven through its etcd API with etcd's client, and etcd over
/// TLS with client certificates as kemu demands; Kubernetes-style creates succeed on all three.
#[test]
fn bench_drives_kemu_through_grpc_with_etcds_client() {
    let results = kemu_json(&[
        "bench",
        "store",
        "--spawn",
        "3",
        "--grpc",
        "--spawn-etcd",
        "3",
        "--clients",
        "8",
        "--ops",
        "300",
        "--workload",
        "create",
        "--json",
    ]);
    let results = results.as_array().expect("an array");
    let targets: Vec<&str> = results
        .iter()
        .map(|r| r["target"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        targets,
        [
            "kemu store (3 members)",
            "kemu store, gRPC (3 members)",
            "etcd (3 members)"
        ]
    );
    for r in results {
        assert_eq!(r["workload"], "create", "{r}");
        assert_eq!(r["ops"], 300, "{r}");
        assert_eq!(r["errors"], 0, "{r}");
    }
}
