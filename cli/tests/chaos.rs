//! CI-sized chaos runs. At the store level: three real `kemu store` members, the register
//! workload, a watch recorder and a prober, and the leader SIGKILLed three times (restarted a
//! second later). Through `kemu run`: a whole cluster under a pod load with the store leader
//! SIGKILLed three times. Every check must pass, and the recovery times must be reported.
//! Stopped by hand: `kemu chaos` still checks and reports what happened until the signal.

use crate::common;

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

/// `kemu chaos --kubernetes`, what the chaos Job of `kemu render` runs, with a kemu cluster as
/// the engine the rendered cluster would run on: pods carrying the rendered labels stand for
/// the store members and an API server. A kill deletes the chosen pod through the engine's API
/// with no grace period; a stop, which no API call can do, is recorded as not done; the
/// register workload runs against the real store named by `--store-members`, and every check
/// passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubernetes_target_deletes_the_pods_it_kills() -> anyhow::Result<()> {
    use anyhow::Context;
    let c = common::Cluster::start(3).await?;
    let ns = "kemu-on-k8s";
    c.ok(&["create", "namespace", ns]);
    let labels = |name: &str| {
        format!("app.kubernetes.io/instance=onk8s,app.kubernetes.io/name={name},app.kubernetes.io/part-of=kemu")
    };
    let members = c.store.names();
    let pod = |name: &str, workload: &str| {
        c.ok(&[
            "run",
            name,
            "-n",
            ns,
            "--image",
            "kemu:latest",
            "--restart",
            "Never",
            "--labels",
            &labels(workload),
        ]);
    };
    for m in &members {
        pod(m, "kemu-store");
    }
    pod("kemu-apiserver-5d8f7-x2c4q", "kemu-apiserver");
    let store_members = members
        .iter()
        .map(|m| Ok(format!("{m}={}", c.store.endpoint(m).context("endpoint")?)))
        .collect::<anyhow::Result<Vec<_>>>()?
        .join(",");
    let plan = c.dir.path().join("plan.toml");
    std::fs::write(
        &plan,
        "name = \"onk8s\"\n[[chaos.action]]\nat = 1.0\nkind = \"kill-store-follower\"\nrestore_after = 1.0\n[[chaos.action]]\nat = 2.0\nkind = \"kill-apiserver\"\n[[chaos.action]]\nat = 3.0\nkind = \"stop-store-member\"\n",
    )?;
    let report_dir = c.dir.path().join("report");
    let kubeconfig = c.kubeconfig.display().to_string();
    let out = std::process::Command::new(kemu_exe())
        .args(["chaos", "--kubernetes", ns, "--instance", "onk8s"])
        .args(["--store-members", &store_members])
        .arg("--certs")
        .arg(c.store.certs_dir())
        .args(["--kubeconfig", &kubeconfig])
        .args(["--engine-kubeconfig", &kubeconfig])
        .arg("--plan")
        .arg(&plan)
        .args(["--duration", "6", "--clients", "2", "--keys", "2"])
        .arg("--report")
        .arg(&report_dir)
        .output()?;
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{printed}");
    let report: Value =
        serde_json::from_slice(&std::fs::read(report_dir.join("chaos-report.json"))?)?;
    assert_eq!(report["passed"], true, "{printed}");
    let actions = report["actions"].as_array().context("actions")?;
    let action = |kind: &str| {
        actions
            .iter()
            .find(|a| a["kind"] == kind)
            .cloned()
            .with_context(|| format!("no {kind} in {actions:?}"))
    };
    let follower = action("kill-store-follower")?;
    assert_eq!(follower["disruptive"], true, "{follower}");
    let killed = follower["target"].as_str().context("target")?.to_string();
    assert!(members.contains(&killed), "{follower}");
    let apiserver = action("kill-apiserver")?;
    assert_eq!(apiserver["disruptive"], true, "{apiserver}");
    assert_eq!(apiserver["target"], "kemu-apiserver-5d8f7-x2c4q");
    let stop = action("stop-store-member")?;
    assert_eq!(stop["disruptive"], false, "{stop}");
    assert!(
        stop["detail"]
            .as_str()
            .is_some_and(|d| d.contains("cannot reach a pod")),
        "{stop}"
    );
    // The killed pods are gone; the others are left.
    let left = c.ok(&["get", "pods", "-n", ns, "-o", "name"]);
    assert!(!left.contains(&format!("pod/{killed}\n")), "{left}");
    assert!(!left.contains("kemu-apiserver"), "{left}");
    assert_eq!(left.lines().count(), members.len() - 1, "{left}");
    Ok(())
}
