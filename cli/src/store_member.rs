//! `kemu store`: runs one store member until SIGTERM/Ctrl-C.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use store::config::{parse_initial_cluster, MemberConfig};

#[derive(Args, Debug)]
pub struct StoreArgs {
    /// This member's name (its certificate is `<certs>/<name>.crt`).
    #[arg(long)]
    name: String,
    #[arg(long)]
    data_dir: PathBuf,
    /// Address clients connect to (QUIC).
    #[arg(long)]
    listen_client: SocketAddr,
    /// Address peers connect to (QUIC).
    #[arg(long)]
    listen_peer: SocketAddr,
    /// Address of `/metrics`, `/healthz`, `/livez` and `/readyz` (plain HTTP); none if unset.
    #[arg(long)]
    listen_metrics: Option<SocketAddr>,
    /// Every member: `n1=HOST:PEERPORT,n2=...`, the same on every member.
    #[arg(long)]
    initial_cluster: String,
    /// Address etcd's v3 gRPC API listens on (TCP; etcd's clients and `etcdctl` use it). Not
    /// served without it.
    #[arg(long)]
    listen_grpc: Option<SocketAddr>,
    /// The members' gRPC addresses, `n1=HOST:PORT,n2=...`: what etcd's `MemberList` answers as
    /// their client URLs, where etcd clients find the rest of the cluster.
    #[arg(long, requires = "listen_grpc")]
    initial_cluster_grpc: Option<String>,
    /// Directory with `ca.crt` and this member's certificate and key.
    #[arg(long)]
    certs: PathBuf,
    /// Raft tick in milliseconds.
    #[arg(long, default_value_t = 50)]
    tick_ms: u64,
    /// Ticks without a heartbeat before an election.
    #[arg(long, default_value_t = 10)]
    election_ticks: usize,
    /// Snapshot and compact the raft log after this many entries...
    #[arg(long, default_value_t = 100_000)]
    snapshot_entries: u64,
    /// ...and once the WAL since the last snapshot is at least this fraction of that snapshot's
    /// size (0 = entries alone decide).
    #[arg(long, default_value_t = 0.25)]
    snapshot_wal_fraction: f64,
    /// Entries kept before a snapshot's index when the log is compacted, so a member that fell
    /// a little behind catches up from the log rather than through a whole snapshot.
    #[arg(long, default_value_t = 20_000)]
    snapshot_catch_up_entries: u64,
    /// How long, in microseconds, a leader may hold new proposals so that more share one fsync
    /// and one append to each follower (0 = none).
    #[arg(long, default_value_t = store::config::DEFAULT_BATCH_WINDOW.as_micros() as u64)]
    batch_window_us: u64,
    /// Fault injection for tests: after a restart, wait this long before rebuilding the state
    /// machine (the member votes but serves no client meanwhile).
    #[arg(long, default_value_t = 0, hide = true)]
    restore_pause_ms: u64,
}

pub async fn run(args: StoreArgs) -> anyhow::Result<ExitCode> {
    let cluster = parse_initial_cluster(&args.initial_cluster)?;
    let mut config = MemberConfig::new(
        &args.name,
        &args.data_dir,
        args.listen_client,
        args.listen_peer,
        cluster,
        &args.certs,
    );
    config.listen_grpc = args.listen_grpc;
    if let Some(list) = &args.initial_cluster_grpc {
        config.grpc_cluster = parse_initial_cluster(list).context("--initial-cluster-grpc")?;
    }
    config.tick = Duration::from_millis(args.tick_ms);
    config.election_ticks = args.election_ticks;
    config.snapshot_entries = args.snapshot_entries;
    config.snapshot_wal_fraction = args.snapshot_wal_fraction;
    config.snapshot_catch_up_entries = args.snapshot_catch_up_entries;
    config.batch_window = Duration::from_micros(args.batch_window_us);
    config.restore_pause = Duration::from_millis(args.restore_pause_ms);
    config.listen_metrics = args.listen_metrics;
    config
        .validate()
        .map_err(|e| cluster::supervisor::ConfigRejected(e.into()))?;
    store::service::run_member(config, cluster::shutdown::signal())
        .await
        .with_context(|| format!("store member {}", args.name))?;
    Ok(ExitCode::SUCCESS)
}
