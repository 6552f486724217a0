//! A CI-sized chaos run at the store level: three real `kemu store` members, the register
//! workload, a watch recorder and a prober, and the leader SIGKILLed three times (restarted a
//! second later). Every check must pass, and the recovery times must be reported.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use kemu::chaos::actions::{self, ActionKind};
use kemu::chaos::run::{self, ChaosRunConfig};
use kemu::chaos::targets::{ChaosCluster, LocalStoreTarget};
use kemu::cluster_proc::LocalStore;

fn kemu_exe() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_kemu"))
}

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
