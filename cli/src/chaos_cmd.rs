//! `kemu chaos`: runs a chaos plan against a cluster made by `kemu up` (`--dir`), a store of
//! local processes it starts itself (`--spawn N`), or a cluster `kemu render` put on Kubernetes
//! (`--kubernetes NAMESPACE`, from the chaos Job's pod), under the register workload; then
//! checks linearizability, watches, convergence and availability and writes the report.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;

use chaos::actions::{self, ActionKind};
use chaos::kubernetes::{KubernetesTarget, KubernetesTargetConfig};
use chaos::plan::ChaosPlan;
use chaos::run::{self, ChaosRunConfig};
use chaos::targets::{ChaosCluster, LocalStoreTarget};
use cluster::api_access::ApiCredentials;
use cluster::process::LocalStore;

use crate::run_config::RunConfig;

#[derive(Args, Debug)]
pub struct ChaosArgs {
    /// A cluster directory made by `kemu up`; its config's [chaos] plan runs unless
    /// `--kill-leader-every` is given.
    #[arg(long, required_unless_present_any = ["spawn", "kubernetes"], conflicts_with_all = ["spawn", "kubernetes"])]
    dir: Option<PathBuf>,
    /// Start a store of this many local members instead (in a temporary directory).
    #[arg(long, conflicts_with = "kubernetes")]
    spawn: Option<usize>,
    /// A cluster `kemu render` put on Kubernetes, in this namespace (what its chaos Job runs):
    /// a kill deletes the component's pod with no grace period. Needs `--instance`,
    /// `--store-members`, `--certs` and `--plan`.
    #[arg(long, requires_all = ["instance", "store_members", "certs", "plan"])]
    kubernetes: Option<String>,
    /// With `--kubernetes`: the cluster's name (its pods' `app.kubernetes.io/instance`).
    #[arg(long)]
    instance: Option<String>,
    /// With `--kubernetes`: the store members as `NAME=HOST:PORT,…` (names are pod names).
    #[arg(long)]
    store_members: Option<String>,
    /// With `--kubernetes`: the CA and the store administrator's certificate.
    #[arg(long)]
    certs: Option<PathBuf>,
    /// With `--kubernetes`: kemu's kubeconfig, for the API probes.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// With `--kubernetes`: the Kubernetes cluster's kubeconfig [default: the pod's service
    /// account].
    #[arg(long)]
    engine_kubeconfig: Option<PathBuf>,
    /// With `--kubernetes`: a cluster config whose `[chaos]` plan runs.
    #[arg(long)]
    plan: Option<PathBuf>,
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
    } else if let Some(namespace) = &args.kubernetes {
        let plan = match leader_kills {
            Some(p) => p,
            None => plan_in(args.plan.as_deref().context("--plan")?)?,
        };
        let schedule = actions::schedule(&plan, args.duration)?;
        let cluster: Arc<dyn ChaosCluster> = Arc::new(kubernetes_target(&args, namespace)?);
        let report = tokio::select! {
            biased;
            _ = interrupt.second() => anyhow::bail!("interrupted twice: stopped at once, no report written"),
            report = run::run_until(cluster, schedule, &config, stop) => report?,
        };
        let dir = args.report.clone().unwrap_or_else(|| PathBuf::from("."));
        (report, dir)
    } else {
        let dir = args.dir.clone().context("--dir, --spawn or --kubernetes")?;
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

/// The target of `--kubernetes`: the engine reached with `--engine-kubeconfig` or the pod's
/// service account, kemu's API with `--kubeconfig`.
fn kubernetes_target(args: &ChaosArgs, namespace: &str) -> anyhow::Result<KubernetesTarget> {
    let mut members = Vec::new();
    for pair in args.store_members.as_deref().unwrap_or("").split(',') {
        let (name, endpoint) = pair
            .split_once('=')
            .with_context(|| format!("--store-members: {pair:?} is not NAME=HOST:PORT"))?;
        let endpoint = endpoint
            .parse()
            .map_err(|e| anyhow::anyhow!("--store-members: {e}"))?;
        members.push((name.to_string(), endpoint));
    }
    let engine = match &args.engine_kubeconfig {
        Some(path) => ApiCredentials::from_kubeconfig(path)?,
        None => KubernetesTarget::in_cluster_engine()?,
    };
    let api = match &args.kubeconfig {
        Some(path) => Some(ApiCredentials::from_kubeconfig(path)?),
        None => None,
    };
    KubernetesTarget::new(KubernetesTargetConfig {
        engine,
        namespace: namespace.to_string(),
        instance: args.instance.clone().context("--instance")?,
        members,
        certs: args.certs.clone().context("--certs")?,
        api,
    })
}

/// The `[chaos]` plan of the config `kemu up` left in the cluster directory.
fn plan_of(dir: &std::path::Path) -> anyhow::Result<ChaosPlan> {
    plan_in(&dir.join("cluster.toml"))
}

/// The `[chaos]` plan of the cluster config at `path`.
fn plan_in(path: &std::path::Path) -> anyhow::Result<ChaosPlan> {
    let path = path.to_path_buf();
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
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
