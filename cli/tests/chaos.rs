//! CI-sized chaos runs. At the store level: three real `kemu store` members, the register
//! workload, a watch recorder and a prober, and the leader SIGKILLed three times (restarted a
//! second later). Through `kemu run`: a whole cluster under a pod load with the store leader
//! SIGKILLed three times. Every check must pass, and the recovery times must be reported.
//! Stopped by hand: `kemu chaos` still checks and reports what happened until the signal.

mod common;

use std::sync::Arc;
use std::time::Duration;

use chaos::actions::{self, ActionKind};
use chaos::run::{self, ChaosRunConfig};
use chaos::targets::{ChaosCluster, LocalStoreTarget};
use cluster::process::LocalStore;
use common::{kemu_exe, Interruptible};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_leader_kills_pass_every_check() -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let store = Arc::new(LocalStore::start_with(kemu_exe(), tmp.path(), 3, &[]).await?);
    // Kills at 5, 15 and 25 s, each leader restarted 1 s later; 35 s in all.
    let plan = actions::repeated(ActionKind::KillStoreLeader, 5.0, 10.0);
    let schedule = actions::schedule(&plan, 29.0)?;
    assert_eq!(schedule.len(), 3);
    let config = ChaosRunConfig {
        duration: Duration::from_secs(35),
        convergence_timeout: Duration::from_secs(20),
        ..Default::default()
    };
    let cluster: Arc<dyn ChaosCluster> = Arc::new(LocalStoreTarget {
        store: store.clone(),
    });
    let report = run::run(cluster, schedule, &config).await?;
    report.write(tmp.path())?;
    println!("{}", report.summary());
    store.stop().await;

    let kills: Vec<_> = report.actions.iter().filter(|a| a.disruptive).collect();
    assert_eq!(kills.len(), 3, "{:?}", report.actions);
    let restarts = report
        .actions
        .iter()
        .filter(|a| a.kind == ActionKind::Restart)
        .count();
    assert_eq!(restarts, 3, "{:?}", report.actions);
    assert!(report.history.operations > 500, "{:?}", report.history);
    assert!(
        report.linearizability.passed,
        "{:?}",
        report.linearizability.keys
    );
    assert!(report.linearizability_narrowed.passed);
    assert!(report.watch.passed, "{:?}", report.watch);
    assert!(report.watch.recorded_events > 500, "{:?}", report.watch);
    assert!(
        report.acknowledged_writes.passed,
        "{:?}",
        report.acknowledged_writes
    );
    assert!(report.convergence.passed, "{:?}", report.convergence);
    assert_eq!(report.convergence.members.len(), 3);
    let recover = report
        .availability
        .recover
        .as_ref()
        .expect("recovery times reported");
    assert_eq!(recover.count, 3, "{:?}", report.availability.recoveries);
    assert!(recover.max_s < 10.0, "{recover:?}");
    assert!(report.availability.passed);
    assert!(report.passed);
    assert!(tmp.path().join("chaos-report.json").exists());
    assert!(tmp.path().join("chaos-section.html").exists());
    Ok(())
}

/// The chaos run CI makes through `kemu run`: 2,400 pods created and deleted at 100/s on 50
/// nodes and two API servers (the load's requests spread over both) while the store leader is
/// SIGKILLed at 8, 24 and 40 s and an API server at 16 s (the supervisor restarts each a second
/// later). Every check must pass: the load's pods accounted for (every acknowledged create
/// Running, every acknowledged delete gone, none twice), the load's watches gap-free against
/// the store's history (re-lists only after a kill of their API server), the register workload
/// linearizable, members converged, writes back on the killed API server.
/// Timeouts are generous: a debug build on a loaded 2-core machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kemu_run_with_leader_and_api_server_kills_passes_every_check() -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().join("chaos-ci");
    let config = tmp.path().join("chaos-ci.toml");
    std::fs::write(
        &config,
        r#"
name = "chaos-ci"
[apiserver]
replicas = 2
[controllers]
replicas = 1
[nodes]
hosts = 1
per_host = 50
[load]
pods = 2400
rate = 100.0
namespaces = 2
running_timeout_seconds = 150.0
gone_timeout_seconds = 150.0
# A debug build on a shared 2-core machine: startup latency is not what this test is about.
slo_pod_startup_p99_ms = 150000.0
[chaos]
seed = 7
[[chaos.action]]
at = 8.0
kind = "kill-store-leader"
[[chaos.action]]
at = 16.0
kind = "kill-apiserver"
[[chaos.action]]
at = 24.0
kind = "kill-store-leader"
[[chaos.action]]
at = 40.0
kind = "kill-store-leader"
"#,
    )?;
    let out = tokio::process::Command::new(kemu_exe())
        .args(["run", "-f"])
        .arg(&config)
        .arg("--dir")
        .arg(&dir)
        .env(
            "RUST_LOG",
            "warn,kemu=info,cluster=info,load=info,chaos=info",
        )
        .output()
        .await?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    let report: Value =
        serde_json::from_slice(&std::fs::read(dir.join("report/load-report.json"))?)?;
    let chaos = &report["chaos"];
    let kills = chaos["actions"]
        .as_array()
        .map(|a| a.iter().filter(|a| a["disruptive"] == true).count())
        .unwrap_or(0);
    assert_eq!(
        kills, 4,
        "three leader kills, one API server kill: {}",
        chaos["actions"]
    );
    let servers = report["api_servers"].as_array().map_or(0, Vec::len);
    assert_eq!(
        servers, 2,
        "the load spreads over both API servers: {}",
        report["api_servers"]
    );
    for check in [
        "linearizability",
        "linearizability_narrowed",
        "watch",
        "acknowledged_writes",
        "convergence",
        "availability",
        "accounting",
        "load_watch",
    ] {
        assert_eq!(chaos[check]["passed"], true, "{check}: {}", chaos[check]);
    }
    let accounting = &chaos["accounting"];
    for field in ["lost", "resurrected", "duplicated", "not_running"] {
        assert_eq!(accounting[field], 0, "{field}: {accounting}");
    }
    assert!(
        accounting["acknowledged_creates"].as_u64().unwrap_or(0) > 2000,
        "{accounting}"
    );
    let load_watch = &chaos["load_watch"];
    assert!(
        load_watch["recorded_events"].as_u64().unwrap_or(0) > 2400,
        "{load_watch}"
    );
    assert_eq!(
        chaos["availability"]["recover"]["count"], 4,
        "{}",
        chaos["availability"]
    );
    // Service recovery: API writes back after every kill (the probes run throughout; on the
    // killed server itself after the API server kill), and pods created after the first kill
    // (t = 8 s, mid-create-phase) Running again.
    let service = &chaos["service"];
    assert_eq!(service["passed"], true, "{service}");
    let recoveries = service["recoveries"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(recoveries.len(), 4, "{service}");
    assert!(
        recoveries.iter().any(|r| r["kind"] == "kill-apiserver"
            && r["measures"][0]["scope"]
                .as_str()
                .is_some_and(|s| s.starts_with("apiserver-"))),
        "{service}"
    );
    for r in &recoveries {
        let api = r["measures"]
            .as_array()
            .and_then(|m| m.iter().find(|m| m["measure"] == "api_writes"))
            .cloned()
            .unwrap_or_default();
        assert!(api["recover_s"].as_f64().is_some(), "{r}");
    }
    let first_pods = recoveries[0]["measures"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["measure"] == "pods_running"))
        .cloned()
        .unwrap_or_default();
    assert!(
        first_pods["recover_s"].as_f64().is_some(),
        "{}",
        recoveries[0]
    );
    assert_eq!(report["pods"]["unaccounted"], 0, "{}", report["pods"]);
    assert_eq!(chaos["passed"], true);
    assert_eq!(report["passed"], true);
    assert!(out.status.success(), "kemu run failed:\n{stdout}\n{stderr}");
    Ok(())
}

/// `kemu chaos --spawn 3` stopped by SIGINT after its first leader kill: the run ends early as
/// at the end of its duration, the checks run on what happened, and the report is written with
/// its action log, marked interrupted; the exit code is 128 + SIGINT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_chaos_run_keeps_its_action_log() -> anyhow::Result<()> {
    use anyhow::Context;
    let tmp = tempfile::tempdir()?;
    let mut chaos = Interruptible::spawn(
        tokio::process::Command::new(kemu_exe())
            .args([
                "chaos",
                "--spawn",
                "3",
                "--duration",
                "120",
                "--kill-leader-every",
                "3",
            ])
            .arg("--report")
            .arg(tmp.path())
            .env(
                "RUST_LOG",
                "warn,kemu=info,cluster=info,load=info,chaos=info",
            ),
        "kill-store-leader",
    )?;
    chaos.reached(Duration::from_secs(90)).await?;
    let (status, stdout, stderr) = chaos
        .stop(nix::sys::signal::Signal::SIGINT, Duration::from_secs(100))
        .await?;
    println!("{stdout}");
    assert_eq!(status.code(), Some(128 + 2), "{stdout}\n{stderr}");
    assert!(stdout.contains("INTERRUPTED"), "{stdout}");
    let report: Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("chaos-report.json"))?)?;
    assert_eq!(report["interrupted"], true);
    assert_eq!(report["passed"], false);
    let duration = report["duration_s"].as_f64().context("duration_s")?;
    assert!(duration < 100.0, "the run ended early: {duration} s");
    let kills = report["actions"]
        .as_array()
        .context("actions")?
        .iter()
        .filter(|a| a["kind"] == "kill-store-leader")
        .count();
    assert!(kills >= 1, "the action log is kept: {}", report["actions"]);
    Ok(())
}
