//! `kemu`: every kemu component and tool, as subcommands of one binary. The binary is thin:
//! clap, tracing, then one library call per subcommand.
//!
//! - Components: [`store_member`] (`kemu store`), [`apiserver_cmd`], [`scheduler_cmd`],
//!   [`controllers_cmd`], [`node_host_cmd`] (`kemu node-host`): one process each.
//! - Tools: [`certs`], [`kv`] (an etcdctl-like client for the store), [`bench_cmd`]
//!   (`kemu bench`, the `bench` crate), [`load_cmd`] (`kemu load`, the `load` crate),
//!   [`chaos_cmd`] (`kemu chaos`, the `chaos` crate).
//! - Clusters: [`cluster_cmd`] (`kemu up`, `down`, `status`, the `cluster` crate) and
//!   [`run_cmd`] (`kemu run`: cluster, load and chaos composed; its config in [`run_config`]).

mod apiserver_cmd;
mod bench_cmd;
mod certs;
mod chaos_cmd;
mod cluster_cmd;
mod controllers_cmd;
mod kv;
mod load_cmd;
mod node_host_cmd;
mod run_cmd;
mod run_config;
mod scheduler_cmd;
mod store_member;

use clap::{Parser, Subcommand};

/// Every kemu process allocates through mimalloc rather than glibc's malloc: with heaps of GBs
/// (a 300,000-pod cluster) glibc spent a third of the API server's and the store members' CPU in
/// `_int_malloc`, `unlink_chunk` and `malloc_consolidate` (see docs/load.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "kemu",
    version,
    about = "kemu: a Kubernetes control-plane emulator"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run N emulated kubelets (nodes with a pause-sandbox runtime) in one process.
    NodeHost(node_host_cmd::NodeHostArgs),
    /// Create the cluster CA and a certificate for each component identity.
    Certs(certs::CertsArgs),
    /// Run one member of the replicated store (the etcd stand-in).
    Store(store_member::StoreArgs),
    /// Run one API server replica (the Kubernetes API over the store).
    Apiserver(apiserver_cmd::ApiServerArgs),
    /// Run the controller manager (ReplicaSet, Deployment, Job, node lifecycle, endpoints,
    /// namespace, garbage collector; leader-elected).
    Controllers(controllers_cmd::ControllersArgs),
    /// Run one scheduler replica (leader-elected).
    Scheduler(scheduler_cmd::SchedulerArgs),
    /// Talk to the store like etcdctl: put, get, del, txn, watch, compact, lease, status, hash.
    Kv(kv::KvArgs),
    /// Load generators.
    #[command(subcommand)]
    Bench(bench_cmd::BenchCommand),
    /// Pod create/delete load against a running cluster, with a latency report and SLO check.
    Load(load_cmd::LoadArgs),
    /// Faults on a schedule (store leader kills, …) under a register workload, then checks.
    Chaos(chaos_cmd::ChaosArgs),
    #[command(flatten)]
    Launcher(cluster_cmd::LauncherCommand),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    init_tracing();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(worker_threads(&cli.command))
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Command::NodeHost(args) => node_host_cmd::run(args).await,
            Command::Certs(args) => certs::run(args),
            Command::Store(args) => store_member::run(args).await,
            Command::Apiserver(args) => apiserver_cmd::run(args).await,
            Command::Controllers(args) => controllers_cmd::run(args).await,
            Command::Scheduler(args) => scheduler_cmd::run(args).await,
            Command::Kv(args) => kv::run(args).await,
            Command::Bench(command) => bench_cmd::run(command).await,
            Command::Load(args) => load_cmd::run(args).await,
            Command::Chaos(args) => chaos_cmd::run(args).await,
            Command::Launcher(command) => cluster_cmd::run(command).await,
        }
    });
    // Watch streams and connection tasks may still be parked; don't wait for them.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            // A config that cannot work gets its own status: the supervisor does not restart
            // a component that exits so, it stops the launch with this message.
            if e.downcast_ref::<cluster::supervisor::ConfigRejected>()
                .is_some()
            {
                std::process::ExitCode::from(cluster::supervisor::CONFIG_ERROR_EXIT)
            } else {
                std::process::ExitCode::FAILURE
            }
        }
    }
}

/// Worker threads of the process's async runtime: `KEMU_WORKER_THREADS` if set, else what the
/// component's work needs, never more than the cores. Not one per core: a runtime wakes idle
/// workers to steal each burst of tasks, work that grows with the workers and not with the
/// load (at the same pod rate, a whole cluster used 3.8 times the CPU per pod on 16 cores as on
/// 2). A node host's kubelets run on a thread of their own, as does a store member's raft core.
fn worker_threads(command: &Command) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let configured = std::env::var("KEMU_WORKER_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0);
    let wanted = match command {
        Command::NodeHost(_) => 1,
        Command::Store(_) | Command::Scheduler(_) | Command::Controllers(_) => 2,
        Command::Apiserver(_) => 4,
        _ => cores,
    };
    configured.unwrap_or(wanted.min(cores))
}

/// Logs go to stderr; the level comes from `RUST_LOG` (default `info` for kemu's crates, `warn`
/// for the rest).
fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(
            "warn,kemu=info,cluster=info,load=info,chaos=info,bench=info,store=info,transport=info,apiserver=info,api=info,scheduler=info,node=info,controllers=info",
        )
    });
    // Colour only on a terminal: logs usually go to files.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .with_target(false)
        .init();
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// clap checks the whole command tree (conflicting or impossible argument settings).
    #[test]
    fn command_line_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
