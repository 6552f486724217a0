//! `kemu scheduler`: runs one scheduler replica until SIGTERM/Ctrl-C; and `kemu bench scheduler`,
//! the decision core alone on a synthetic cluster.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::Args;
use scheduler::SchedulerConfig;

#[derive(Args, Debug)]
pub struct SchedulerArgs {
    /// QUIC addresses of the API servers' component fronts, comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    apiserver: Vec<SocketAddr>,
    /// Directory with `ca.crt` and the scheduler's certificate.
    #[arg(long)]
    certs: PathBuf,
    /// Schedule the pods whose `spec.schedulerName` is this.
    #[arg(long, default_value = "default-scheduler")]
    name: String,
    /// Which certificate in `--certs` to present.
    #[arg(long, default_value = "scheduler")]
    identity: String,
    /// Scheduling worker threads.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Serve `/metrics` here.
    #[arg(long)]
    metrics_addr: Option<SocketAddr>,
    /// `holderIdentity` in the leader-election lease (default: host and pid).
    #[arg(long)]
    holder_identity: Option<String>,
}

pub async fn run(args: SchedulerArgs) -> anyhow::Result<ExitCode> {
    let mut config = SchedulerConfig::new(args.apiserver, &args.certs);
    config.scheduler_name = args.name;
    config.identity = args.identity;
    config.workers = args.workers;
    config.metrics_addr = args.metrics_addr;
    if let Some(holder) = args.holder_identity {
        config.holder_identity = holder;
    }
    scheduler::server::run(config, crate::shutdown::signal())
        .await
        .context("scheduler")?;
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug, Clone)]
pub struct SchedulerBenchArgs {
    /// Nodes in the synthetic cluster (32 cpu, 128Gi, 110 pods each).
    #[arg(long, default_value_t = 5000)]
    nodes: usize,
    /// Pods to decide (100m cpu, 128Mi each).
    #[arg(long, default_value_t = 50000)]
    pods: usize,
    /// Tie-break seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// The decision core alone, in process: decides and assumes every pod, prints pods/s.
pub async fn bench(args: SchedulerBenchArgs) -> anyhow::Result<ExitCode> {
    if args.nodes == 0 || args.pods == 0 {
        bail!("--nodes and --pods must be positive");
    }
    let report = tokio::task::spawn_blocking(move || {
        scheduler::bench::run_core(args.nodes, args.pods, args.seed)
    })
    .await?;
    println!(
        "scheduler core: {} nodes, {} pods ({} scheduled, {} unschedulable) in {:.3} s: {:.0} pods/s",
        report.nodes,
        report.pods,
        report.scheduled,
        report.unschedulable,
        report.elapsed.as_secs_f64(),
        report.pods_per_second()
    );
    Ok(ExitCode::SUCCESS)
}
