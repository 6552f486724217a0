//! `etcdctl check perf` against a 3-member store. It has a test binary of its own so that no
//! other test shares its process or its minute of steady load.

mod common;

use common::{Cluster, ADMIN};

/// The verdict lines of a `check perf` run: its output without the progress bar.
fn summary(stdout: &str) -> String {
    stdout
        .lines()
        .filter(|l| !l.contains(" / 60") && !l.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The raft term every running member reports, in member order.
async fn terms(cluster: &Cluster) -> Vec<u64> {
    let mut terms = Vec::new();
    for member in cluster.members.iter().filter(|m| m.is_running()) {
        let mut client = cluster.client(ADMIN, &[member.endpoint()]).await;
        let status = client.status().await.expect("a member's status");
        terms.push(status.raft_term());
    }
    terms
}

struct Attempt {
    ok: bool,
    /// Only the latency verdicts failed (the slowest request, the spread), not the throughput
    /// or the command itself.
    latency_only: bool,
    report: String,
}

async fn check_perf(cluster: &Cluster) -> Attempt {
    let before = terms(cluster).await;
    let out = cluster
        .etcdctl(ADMIN, &cluster.endpoints())
        .args(["check", "perf", "--load=s"])
        .output()
        .expect("etcdctl runs");
    let after = terms(cluster).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let verdicts = summary(&stdout);
    let ok = out.status.success()
        && verdicts.contains("PASS: Throughput")
        && verdicts.lines().last() == Some("PASS")
        && verdicts.lines().all(|l| l.starts_with("PASS"));
    // etcdctl prints the two latency verdicts without a "FAIL:" prefix, then a closing "FAIL".
    let latency_only = !ok
        && verdicts.contains("PASS: Throughput")
        && verdicts.lines().all(|l| {
            l.starts_with("PASS")
                || l.starts_with("Slowest request took too long:")
                || l.starts_with("Stddev too high:")
                || l == "FAIL"
        });
    let report = format!(
        "exit {}; raft terms before {before:?}, after {after:?}\n{verdicts}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Attempt {
        ok,
        latency_only,
        report,
    }
}

/// `etcdctl check perf` at its smallest load (50 clients, 150 writes/s for 60 s) completes with
/// every verdict passing. Its latency verdicts (slowest request under 0.5 s, spread under 0.1 s)
/// time a shared machine as much as the store, so a run that fails only those is repeated once;
/// the second run must pass everything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcdctl_check_perf_passes() {
    let cluster = Cluster::start(3, |_| {});
    cluster.leader().await;
    let first = check_perf(&cluster).await;
    if first.ok {
        return;
    }
    assert!(first.latency_only, "check perf failed:\n{}", first.report);
    eprintln!(
        "check perf failed only its latency verdicts; running it again:\n{}",
        first.report
    );
    let second = check_perf(&cluster).await;
    assert!(
        second.ok,
        "check perf failed twice:\nfirst: {}\nsecond: {}",
        first.report, second.report
    );
}
