//! `kemu scheduler`: runs one scheduler replica until SIGTERM/Ctrl-C.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use scheduler::SchedulerConfig;
use transport::Endpoint;

#[derive(Args, Debug)]
pub struct SchedulerArgs {
    /// QUIC addresses of the API servers' component fronts, comma-separated: `IP:PORT` or
    /// `HOST:PORT` (resolved at each connect).
    #[arg(long, value_delimiter = ',', required = true)]
    apiserver: Vec<Endpoint>,
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
    scheduler::server::run(config, cluster::shutdown::signal())
        .await
        .context("scheduler")?;
    Ok(ExitCode::SUCCESS)
}
