//! `kemu scheduler`: runs one scheduler replica until SIGTERM/Ctrl-C; and `kemu bench scheduler`,
//! the decision core alone on a synthetic cluster (or, with `--through-apiserver`, the whole
//! path through a real API server and store: see [`crate::bench_sched`]).

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
    /// Measure end to end instead: start a store, an API server and a `kemu scheduler`
    /// process, create `--nodes` Node objects and then `--pods` pods at `--rate` per second
    /// over HTTP; print binds/s and create→scheduled percentiles as JSON.
    #[arg(long)]
    through_apiserver: bool,
    /// Pods created per second (with --through-apiserver).
    #[arg(long, default_value_t = 1000.0)]
    rate: f64,
    /// Store members to start (with --through-apiserver).
    #[arg(long, default_value_t = 3)]
    store_members: usize,
    /// Scheduling workers of the scheduler process (with --through-apiserver).
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Creates in flight at most (with --through-apiserver).
    #[arg(long, default_value_t = 256)]
    in_flight: usize,
    /// Seconds to wait after the last create for the last pods to be scheduled.
    #[arg(long, default_value_t = 120)]
    settle_secs: u64,
    /// Keep the spawned cluster's directory (logs) here instead of a temporary one.
    #[arg(long)]
    work_dir: Option<PathBuf>,
}

/// The decision core alone, in process: decides and assumes every pod, prints pods/s.
pub async fn bench(args: SchedulerBenchArgs) -> anyhow::Result<ExitCode> {
    if args.nodes == 0 || args.pods == 0 {
        bail!("--nodes and --pods must be positive");
    }
    if args.through_apiserver {
        if args.rate <= 0.0 || args.store_members == 0 || args.workers == 0 || args.in_flight == 0 {
            bail!("--rate, --store-members, --workers and --in-flight must be positive");
        }
        let report = crate::bench_sched::run(crate::bench_sched::ThroughApiArgs {
            nodes: args.nodes,
            pods: args.pods,
            rate: args.rate,
            store_members: args.store_members,
            workers: args.workers,
            in_flight: args.in_flight,
            settle: std::time::Duration::from_secs(args.settle_secs),
            work_dir: args.work_dir,
        })
        .await?;
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
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
