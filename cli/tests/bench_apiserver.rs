//! `kemu bench apiserver` end to end at a small scale: every part runs against a spawned
//! three-member store and API server, and every create, watch event and status write is
//! accounted for.

use crate::common;

use common::kemu_json;

#[test]
fn bench_measures_creates_watch_fan_out_and_status_writes() {
    let report = kemu_json(&[
        "bench",
        "apiserver",
        "--spawn",
        "--pods",
        "300",
        "--clients",
        "8",
        "--watchers",
        "60",
        "--watches-per-connection",
        "25",
        "--watch-pods",
        "120",
        "--watch-rate",
        "200",
        "--status-pods",
        "400",
        "--status-nodes",
        "7",
        "--json",
    ]);
    let creates = &report["creates"];
    assert_eq!(creates["pods"], 300, "{creates}");
    assert_eq!(creates["errors"], 0, "{creates}");
    assert!(creates["creates_per_sec"].as_f64().unwrap_or(0.0) > 0.0);
    assert!(creates["latency_ms"]["p99"].as_f64().unwrap_or(0.0) > 0.0);
    // The server timed its pipeline (authn + authz + admission) on the creates.
    let pipeline = &creates["pipeline_us"];
    assert!(pipeline["p50"].as_f64().unwrap_or(0.0) > 0.0, "{creates}");
    assert!(
        pipeline["admission_p50"].as_f64().unwrap_or(0.0) > 0.0,
        "{creates}"
    );
    let watch = &report["watch"];
    assert_eq!(watch["connections"], 3, "{watch}");
    assert_eq!(watch["errors"], 0, "{watch}");
    assert_eq!(
        watch["delivered"], 120,
        "every bound pod reached its node's watcher: {watch}"
    );
    assert_eq!(watch["misrouted"], 0, "{watch}");
    assert!(
        watch["delivery_from_request_ms"]["p99"]
            .as_f64()
            .unwrap_or(0.0)
            > 0.0
    );
    let status = &report["status"];
    assert_eq!(status["nodes"], 7, "{status}");
    assert_eq!(status["writes"], 800, "two status writes per pod: {status}");
    assert_eq!(status["errors"], 0, "{status}");
    assert_eq!(
        status["running"], 400,
        "every pod reads back Running with kubelet's status entry: {status}"
    );
    assert!(
        status["apiserver_cpu_us_per_write"].as_f64().unwrap_or(0.0) > 0.0,
        "the API server's CPU was scraped around the writes: {status}"
    );
}
