//! `kemu chaos`: runs a chaos plan against a cluster made by `kemu up` (`--dir`), or against a
//! store of local processes it starts itself (`--spawn N`), under the register workload; then
//! checks linearizability, watches, convergence and availability and writes the report.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;

use chaos::actions::{self, ActionKind};
use chaos::plan::ChaosPlan;
use chaos::run::{self, ChaosRunConfig};
use chaos::targets::{ChaosCluster, LocalStoreTarget};
use cluster::process::LocalStore;

use crate::run_config::RunConfig;

#[derive(Args, Debug)]
pub struct ChaosArgs {
    /// A cluster directory made by `kemu up`; its config's [chaos] plan runs unless
    /// `--kill-leader-every` is given.
    #[arg(long, required_unless_present = "spawn", conflicts_with = "spawn")]
    dir: Option<PathBuf>,
    /// Start a store of this many local members instead (in a temporary directory).
    #[arg(long)]
    spawn: Option<usize>,
    /// Seconds to run.
    #[arg(long, default_value_t = 60.0)]
    duration: f64,
    /// Instead of the config's plan: SIGKILL the store leader every this many seconds
    /// (restarting it after `--restart-after`).
    #[arg(long)]
    kill_leader_every: Option<f64>,
    #[arg(long, default_value_t = 1.0)]
    restart_after: f64,
    /// Register workload clients.
    #[arg(long, default_value_t = 4)]
    clients: usize,
    /// Register keys.
    #[arg(long, default_value_t = 4)]
    keys: usize,
    /// Fail the availability check when a recovery takes longer (seconds).
    #[arg(long)]
    recover_limit: Option<f64>,
    /// Where to write chaos-report.json, chaos-section.html and chaos-history.json [default:
    /// DIR/report, or the current directory with --spawn].
    #[arg(long)]
    report: Option<PathBuf>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

pub async fn run(args: ChaosArgs) -> anyhow::Result<ExitCode> {
    let config = ChaosRunConfig {
        duration: Duration::from_secs_f64(args.duration),
        register_clients: args.clients,
        register_keys: args.keys,
        recover_limit_s: args.recover_limit,
        seed: args.seed,
        ..Default::default()
    };
    let leader_kills = args.kill_leader_every.map(|every| {
        let mut plan = actions::repeated(ActionKind::KillStoreLeader, every, every);
        plan.actions[0].restore_after = Some(args.restart_after);
        plan.seed = args.seed;
        plan
    });

    // A first stop signal ends the run early, as its duration would: the checks run on what
    // happened and the report is written. A second one stops at once.
    let interrupt = cluster::shutdown::Interrupt::listen();
    let stop = {
        let interrupt = interrupt.clone();
        async move { interrupt.first().await }
    };
    let (mut report, report_dir) = if let Some(n) = args.spawn {
        let tmp = tempfile::tempdir()?;
        let exe = std::env::current_exe()?;
        let store = Arc::new(LocalStore::start_with(&exe, tmp.path(), n, &[]).await?);
        let plan = leader_kills
            .unwrap_or_else(|| actions::repeated(ActionKind::KillStoreLeader, 10.0, 10.0));
        let schedule = actions::schedule(&plan, args.duration)?;
        let cluster: Arc<dyn ChaosCluster> = Arc::new(LocalStoreTarget {
            store: store.clone(),
        });
        let report = tokio::select! {
            biased;
            _ = interrupt.second() => Err(anyhow::anyhow!("interrupted twice: stopped at once, no report written")),
            report = run::run_until(cluster, schedule, &config, stop) => report,
        };
        store.stop().await;
        let dir = args.report.clone().unwrap_or_else(|| PathBuf::from("."));
        (report?, dir)
    } else {
        let dir = args.dir.clone().context("--dir or --spawn")?;
        let plan = match leader_kills {
            Some(p) => p,
            None => plan_of(&dir)?,
        };
        let report = tokio::select! {
            biased;
            _ = interrupt.second() => anyhow::bail!("interrupted twice: stopped at once, no report written"),
            report = run::run_on_cluster_dir(&dir, &plan, &config, stop) => report?,
        };
        let out = args.report.clone().unwrap_or_else(|| dir.join("report"));
        (report, out)
    };
    if interrupt.requested() {
        report.interrupted = true;
        report.passed = false;
    }
    let files = report.write(&report_dir)?;
    println!("{}", report.summary());
    println!(
        "report: {} and {}",
        files.json.display(),
        files.html.display()
    );
    if report.interrupted {
        eprintln!(
            "interrupted: the report in {} covers the run until the stop signal",
            files.json.display()
        );
        return Ok(interrupt.exit_code());
    }
    Ok(if report.passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The `[chaos]` plan of the config `kemu up` left in the cluster directory.
fn plan_of(dir: &std::path::Path) -> anyhow::Result<ChaosPlan> {
    let path = dir.join("cluster.toml");
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "reading {} (is this a kemu cluster directory?)",
            path.display()
        )
    })?;
    let config = RunConfig::parse(text, &path)?;
    config
        .chaos
        .filter(ChaosPlan::has_actions)
        .with_context(|| {
            format!(
                "{} has no [chaos] actions; give --kill-leader-every or add [[chaos.action]]",
                path.display()
            )
        })
}
