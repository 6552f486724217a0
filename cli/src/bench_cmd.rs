//! `kemu bench`: the command lines of the benchmarks in the `bench` crate.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Load the store with puts, ranges, transactions or a mix.
    Store(StoreBenchArgs),
    /// The scheduler's decision core alone, in process, on a synthetic cluster.
    Scheduler(SchedulerBenchArgs),
    /// Pod creates over HTTP and node-scoped watch fan-out over QUIC against the API server.
    Apiserver(ApiBenchArgs),
}

pub async fn run(command: BenchCommand) -> anyhow::Result<ExitCode> {
    match command {
        BenchCommand::Store(args) => bench::store::run(args.into()).await?,
        BenchCommand::Scheduler(args) => bench::scheduler::run_bench(args.into()).await?,
        BenchCommand::Apiserver(args) => bench::apiserver::run(args.into()).await?,
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Workload {
    Put,
    Range,
    /// Kubernetes' update: compare-and-swap on the mod revision.
    Txn,
    /// Kubernetes' create: put if absent.
    Create,
    Mixed,
}

impl From<Workload> for bench::store::Workload {
    fn from(w: Workload) -> Self {
        match w {
            Workload::Put => bench::store::Workload::Put,
            Workload::Range => bench::store::Workload::Range,
            Workload::Txn => bench::store::Workload::Txn,
            Workload::Create => bench::store::Workload::Create,
            Workload::Mixed => bench::store::Workload::Mixed,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Part {
    Creates,
    Watch,
    Status,
    All,
}

impl From<Part> for bench::apiserver::Part {
    fn from(p: Part) -> Self {
        match p {
            Part::Creates => bench::apiserver::Part::Creates,
            Part::Watch => bench::apiserver::Part::Watch,
            Part::Status => bench::apiserver::Part::Status,
            Part::All => bench::apiserver::Part::All,
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct StoreBenchArgs {
    /// Client addresses of a running kemu store.
    #[arg(long, value_delimiter = ',')]
    endpoints: Vec<SocketAddr>,
    /// Certificates directory for `--endpoints`.
    #[arg(long)]
    certs: Option<PathBuf>,
    /// Start a local kemu store with this many members for the run.
    #[arg(long, default_value_t = 0)]
    spawn: usize,
    /// Drive a running etcd at these client URLs (http://HOST:PORT,...).
    #[arg(long, value_delimiter = ',')]
    etcd: Vec<String>,
    /// Start a local etcd cluster with this many members (needs the `etcd` binary).
    #[arg(long, default_value_t = 0)]
    spawn_etcd: usize,
    /// Concurrent clients.
    #[arg(long, default_value_t = 64)]
    clients: usize,
    /// Operations in all.
    #[arg(long, default_value_t = 20_000)]
    ops: u64,
    /// Bytes per value.
    #[arg(long, default_value_t = 256)]
    value_size: usize,
    /// Distinct keys.
    #[arg(long, default_value_t = 10_000)]
    keys: u64,
    #[arg(long, value_enum, default_value_t = Workload::Put)]
    workload: Workload,
    /// SIGKILL the leader of a spawned cluster after this fraction of the ops and report how
    /// long writes failed (0 = no kill).
    #[arg(long, default_value_t = 0.0)]
    kill_leader_at: f64,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
    /// Keep the spawned clusters' directories here instead of a temporary one.
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// Members of a spawned kemu store take a snapshot every this many applied entries; the
    /// snapshots they took during the run (size, how long the raft thread paused, serialize and
    /// disk-write time) are reported from their logs. 0 = the member default, not reported.
    #[arg(long, default_value_t = 0)]
    snapshot_entries: u64,
    /// With --spawn: also drive a second spawned kemu store through its etcd v3 gRPC front,
    /// with the client used for etcd (needs the `etcd` feature); a spawned etcd then speaks
    /// TLS with client certificates too, as kemu does.
    #[arg(long)]
    grpc: bool,
}

impl From<StoreBenchArgs> for bench::store::StoreBench {
    fn from(args: StoreBenchArgs) -> Self {
        bench::store::StoreBench {
            endpoints: args.endpoints,
            certs: args.certs,
            spawn: args.spawn,
            etcd: args.etcd,
            spawn_etcd: args.spawn_etcd,
            clients: args.clients,
            ops: args.ops,
            value_size: args.value_size,
            keys: args.keys,
            workload: args.workload.into(),
            kill_leader_at: args.kill_leader_at,
            json: args.json,
            work_dir: args.work_dir,
            snapshot_entries: args.snapshot_entries,
            grpc: args.grpc,
        }
    }
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

impl From<SchedulerBenchArgs> for bench::scheduler::SchedulerBench {
    fn from(args: SchedulerBenchArgs) -> Self {
        bench::scheduler::SchedulerBench {
            nodes: args.nodes,
            pods: args.pods,
            seed: args.seed,
            through_apiserver: args.through_apiserver,
            rate: args.rate,
            store_members: args.store_members,
            workers: args.workers,
            in_flight: args.in_flight,
            settle_secs: args.settle_secs,
            work_dir: args.work_dir,
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct ApiBenchArgs {
    /// Start a local store and one API server (this binary) for the run.
    #[arg(long)]
    spawn: bool,
    /// Store members to start with `--spawn`.
    #[arg(long, default_value_t = 3)]
    store_members: usize,
    /// URL of a running API server (https://HOST:PORT); with `--kubeconfig` for its CA and
    /// credentials.
    #[arg(long)]
    url: Option<String>,
    /// Kubeconfig with the CA and credentials for `--url` (its server is used without `--url`;
    /// without `--spawn` or `--url`, `$KUBECONFIG` or `~/.kube/config` is read).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long)]
    context: Option<String>,
    /// With `--spawn`: run the creates part twice, side by side — through the full pipeline as a
    /// bearer-token user bound to `edit` by RBAC, and on a second API server over the same store
    /// with authentication and authorization off (`--anonymous-auth --authorization-mode
    /// AlwaysAllow`, no credentials sent).
    #[arg(long)]
    compare_auth: bool,
    /// QUIC address of a running API server's component front (for the watch part).
    #[arg(long)]
    quic: Option<SocketAddr>,
    /// Certificates directory (ca.crt and `--identity`'s certificate) for `--quic`.
    #[arg(long)]
    certs: Option<PathBuf>,
    /// Which certificate in `--certs` the watch part presents (and the status part creates
    /// and binds its pods with).
    #[arg(long, default_value = "admin")]
    identity: String,
    /// Pods whose status the status part writes, twice each, as a kubelet starting them.
    #[arg(long, default_value_t = 10_000)]
    status_pods: u64,
    /// Nodes the status part registers as the node host and binds its pods to.
    #[arg(long, default_value_t = 100)]
    status_nodes: usize,
    /// Which certificate in `--certs` the status part writes as: a node host's, in
    /// `system:nodes` (with `--spawn`, issued for the run).
    #[arg(long, default_value = "nodehost-bench")]
    node_host_identity: String,
    /// Which measurement(s) to run.
    #[arg(long, value_enum, default_value_t = Part::All)]
    part: Part,
    /// Pods to create in the creates part.
    #[arg(long, default_value_t = 20_000)]
    pods: u64,
    /// Closed loop: concurrent workers. Open loop (`--rate`): the cap on requests in flight.
    #[arg(long, default_value_t = 32)]
    clients: usize,
    /// Open loop: creates per second to offer (0 = closed loop).
    #[arg(long, default_value_t = 0.0)]
    rate: f64,
    /// Node-scoped pod watches in the watch part (one per node).
    #[arg(long, default_value_t = 5_000)]
    watchers: usize,
    /// Watches multiplexed on one QUIC connection.
    #[arg(long, default_value_t = 500)]
    watches_per_connection: usize,
    /// Pods created and bound in the watch part.
    #[arg(long, default_value_t = 10_000)]
    watch_pods: u64,
    /// Pods per second created and bound in the watch part.
    #[arg(long, default_value_t = 1_000.0)]
    watch_rate: f64,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
    /// Keep the spawned cluster's directory here instead of a temporary one.
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// With `--spawn`: also start a second API server over the same store with every
    /// admission plugin disabled, and run the creates part against both, one after the other.
    #[arg(long)]
    compare_admission: bool,
    /// With `--spawn`: also start a second API server with the whole pipeline off — no
    /// authentication or authorization (`--anonymous-auth --authorization-mode AlwaysAllow`) and
    /// no admission plugin — and compare the full pipeline (the token user through RBAC, every
    /// plugin) with it.
    #[arg(long)]
    compare_pipeline: bool,
    /// With a `--compare-*` flag: run the creates part this many times on each server,
    /// interleaved (A B A B …), and report every run and the medians.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
}

impl From<ApiBenchArgs> for bench::apiserver::ApiBench {
    fn from(args: ApiBenchArgs) -> Self {
        let read_kubeconfig = args.kubeconfig.is_some()
            || args.context.is_some()
            || (!args.spawn && args.url.is_none());
        bench::apiserver::ApiBench {
            spawn: args.spawn,
            store_members: args.store_members,
            url: args.url,
            kubeconfig: read_kubeconfig.then_some(cluster::api_access::KubeconfigChoice {
                path: args.kubeconfig,
                context: args.context,
            }),
            compare_auth: args.compare_auth,
            quic: args.quic,
            certs: args.certs,
            identity: args.identity,
            part: args.part.into(),
            pods: args.pods,
            clients: args.clients,
            rate: args.rate,
            watchers: args.watchers,
            watches_per_connection: args.watches_per_connection,
            watch_pods: args.watch_pods,
            watch_rate: args.watch_rate,
            status_pods: args.status_pods,
            status_nodes: args.status_nodes,
            node_host_identity: args.node_host_identity,
            json: args.json,
            work_dir: args.work_dir,
            compare_admission: args.compare_admission,
            compare_pipeline: args.compare_pipeline,
            rounds: args.rounds,
        }
    }
}
