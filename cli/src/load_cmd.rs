//! `kemu load`: runs a load plan against a running cluster and exits 0 only when it passed.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::Args;
use serde::Deserialize as _;

use cluster::api_access::KubeconfigChoice;
use load::{plan::LoadMode, LoadPlan, LoadTarget, SampledProcess};

#[derive(Args, Debug)]
pub struct LoadArgs {
    /// Kubeconfig of the cluster (default: `$KUBECONFIG`, else `~/.kube/config`).
    #[arg(long, conflicts_with = "dir")]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long, conflicts_with = "dir")]
    context: Option<String>,
    /// A cluster directory of `kemu up`/`kemu run`: uses its `kubeconfig`, writes the reports
    /// there, and samples the processes whose command line names the directory.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The plan: TOML with the `[load]` table's keys (or a cluster config with a `[load]`
    /// table). The flags below override it.
    #[arg(long)]
    plan: Option<PathBuf>,
    /// Where to write `load-report.json` and `load-report.html` (default: `--dir`, else `.`).
    #[arg(long)]
    report_dir: Option<PathBuf>,
    /// Run a clusterloader2 test config (YAML, Go-templated) instead of a pod load plan.
    #[arg(long, value_name = "CONFIG.yaml", conflicts_with = "plan")]
    cl2: Option<PathBuf>,
    /// With --cl2: a clusterloader2 overrides file (YAML map of parameters; repeatable, later
    /// ones win).
    #[arg(long = "overrides", value_name = "FILE", requires = "cl2")]
    overrides: Vec<PathBuf>,
    /// With --cl2: a template parameter, over the overrides files and CL2_* variables
    /// (repeatable).
    #[arg(long = "param", value_name = "KEY=VALUE", requires = "cl2")]
    params: Vec<String>,
    /// With --cl2: the registry the configs' images come from (`.ImageRegistry`; default:
    /// REGISTRY_K8S_REPO, else registry.k8s.io)
    #[arg(long = "registry-k8s-repo", value_name = "REGISTRY", requires = "cl2")]
    registry_k8s_repo: Option<String>,
    /// Also sample this process, as NAME=PID (repeatable).
    #[arg(long = "sample", value_name = "NAME=PID")]
    samples: Vec<String>,

    /// Pods to create.
    #[arg(long)]
    pods: Option<u64>,
    /// Creates per second.
    #[arg(long)]
    rate: Option<f64>,
    /// Deletes per second (default: --rate).
    #[arg(long)]
    delete_rate: Option<f64>,
    /// Namespaces to spread the pods over.
    #[arg(long)]
    namespaces: Option<u32>,
    /// pods (deployments and replicasets are not generated yet).
    #[arg(long, value_parser = parse_mode)]
    mode: Option<LoadMode>,
    /// A built-in pod template (pause).
    #[arg(long)]
    template: Option<String>,
    /// A pod manifest (YAML or JSON) to use as the template.
    #[arg(long)]
    template_file: Option<PathBuf>,
    /// Init containers of the built-in template.
    #[arg(long)]
    init_containers: Option<u32>,
    /// Give the built-in template's container probes.
    #[arg(long)]
    probes: bool,
    /// Seconds to keep the pods Running before deleting them.
    #[arg(long)]
    hold: Option<f64>,
    /// Leave the pods Running at the end.
    #[arg(long)]
    no_delete: bool,
    /// gracePeriodSeconds of the deletes (default: the pod's own).
    #[arg(long)]
    delete_grace: Option<i64>,
    /// Churn cycles after the first create.
    #[arg(long)]
    churn_cycles: Option<u32>,
    /// Percent of the pods each churn cycle deletes and re-creates.
    #[arg(long)]
    churn_percent: Option<f64>,
    /// SLO: pod_startup p99 in milliseconds.
    #[arg(long)]
    slo_pod_startup_p99_ms: Option<f64>,
    /// Seconds to wait for every pod to be Running.
    #[arg(long)]
    running_timeout: Option<f64>,
    /// Seconds to wait for every deleted pod to be gone.
    #[arg(long)]
    gone_timeout: Option<f64>,
    /// Requests in flight at most.
    #[arg(long)]
    max_in_flight: Option<u32>,
    /// Speak HTTP/2 (prior knowledge) instead of HTTP/1.1.
    #[arg(long)]
    http2: bool,
}

fn parse_mode(s: &str) -> Result<LoadMode, String> {
    LoadMode::deserialize(serde::de::value::StrDeserializer::<serde::de::value::Error>::new(s))
        .map_err(|e| e.to_string())
}

impl LoadArgs {
    /// The plan file (or the defaults) with the flags laid over it.
    fn plan(&self) -> anyhow::Result<LoadPlan> {
        let mut plan = match &self.plan {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading {}", path.display()))?;
                LoadPlan::from_toml(&text).with_context(|| format!("plan {}", path.display()))?
            }
            None => LoadPlan::default(),
        };
        macro_rules! over {
            ($($field:ident <- $flag:expr),* $(,)?) => {
                $(if let Some(v) = $flag.clone() { plan.$field = v; })*
            };
        }
        over!(
            pods <- self.pods,
            rate <- self.rate,
            namespaces <- self.namespaces,
            mode <- self.mode,
            template <- self.template,
            init_containers <- self.init_containers,
            hold_seconds <- self.hold,
            churn_cycles <- self.churn_cycles,
            churn_percent <- self.churn_percent,
            slo_pod_startup_p99_ms <- self.slo_pod_startup_p99_ms,
            running_timeout_seconds <- self.running_timeout,
            gone_timeout_seconds <- self.gone_timeout,
            max_in_flight <- self.max_in_flight,
        );
        if self.delete_rate.is_some() {
            plan.delete_rate = self.delete_rate;
        }
        if self.template_file.is_some() {
            plan.template_file = self.template_file.clone();
        }
        if self.delete_grace.is_some() {
            plan.delete_grace_seconds = self.delete_grace;
        }
        plan.probes |= self.probes;
        plan.http2 |= self.http2;
        if self.no_delete {
            plan.delete = false;
        }
        plan.validate()?;
        Ok(plan)
    }

    fn target(&self) -> anyhow::Result<LoadTarget> {
        let kubeconfig = match &self.dir {
            Some(dir) => KubeconfigChoice::file(&dir.join("kubeconfig")),
            None => KubeconfigChoice {
                path: self.kubeconfig.clone(),
                context: self.context.clone(),
            },
        };
        let report_dir = self
            .report_dir
            .clone()
            .or_else(|| self.dir.clone())
            .unwrap_or_else(|| PathBuf::from("."));
        let mut processes = Vec::new();
        for s in &self.samples {
            let (name, pid) = s
                .split_once('=')
                .with_context(|| format!("--sample {s:?}: expected NAME=PID"))?;
            let pid = pid
                .parse()
                .with_context(|| format!("--sample {s:?}: bad pid"))?;
            processes.push(SampledProcess {
                name: name.to_string(),
                pid,
            });
        }
        if let Some(dir) = &self.dir {
            processes.extend(load::sampler::kemu_processes_naming(dir));
        }
        Ok(LoadTarget {
            kubeconfig,
            report_dir,
            processes,
            record_watch: false,
            extra_watch_servers: Vec::new(),
            spread_servers: Vec::new(),
        })
    }
}

/// A first stop signal (Ctrl-C, SIGTERM) ends the load early with the report of what it
/// measured until then and a non-zero exit (128 + the signal); a second one stops at once.
pub async fn run(args: LoadArgs) -> anyhow::Result<ExitCode> {
    if let Some(config) = &args.cl2 {
        let options = load::cl2::Cl2Options {
            config: config.clone(),
            overrides: args.overrides.clone(),
            params: args.params.clone(),
            image_registry: args.registry_k8s_repo.clone().unwrap_or_default(),
        };
        let target = args.target()?;
        let processes = match &args.dir {
            Some(dir) => load::cl2::processes::ClusterView::from_cluster_dir(dir)?,
            None => None,
        };
        return run_cl2(&options, &target.kubeconfig, processes, &target.report_dir).await;
    }
    let plan = args.plan()?;
    let target = args.target()?;
    let interrupt = cluster::shutdown::Interrupt::listen();
    let outcome = tokio::select! {
        biased;
        _ = interrupt.second() => bail!("interrupted twice: stopped at once, no report written"),
        outcome = load::run(&plan, &target, &interrupt) => outcome?,
    };
    println!("{}", outcome.summary);
    println!("report: {}", outcome.report_json.display());
    println!("report: {}", outcome.report_html.display());
    if outcome.interrupted {
        eprintln!(
            "interrupted: the report in {} holds what was measured until the stop signal",
            outcome.report_json.display()
        );
        return Ok(interrupt.exit_code());
    }
    Ok(if outcome.passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Runs a clusterloader2 config; exits 0 only when every step and measurement passed.
pub async fn run_cl2(
    options: &load::cl2::Cl2Options,
    kubeconfig: &KubeconfigChoice,
    processes: Option<load::cl2::processes::ClusterView>,
    report_dir: &std::path::Path,
) -> anyhow::Result<ExitCode> {
    let interrupt = cluster::shutdown::Interrupt::listen();
    let outcome = tokio::select! {
        biased;
        _ = interrupt.second() => bail!("interrupted twice: stopped at once, no report written"),
        outcome = load::cl2::run(options, kubeconfig, processes, report_dir, &interrupt) => outcome?,
    };
    println!("{}", outcome.summary);
    println!("report: {}", outcome.report_json.display());
    println!("report: {}", outcome.report_html.display());
    if outcome.report.interrupted {
        return Ok(interrupt.exit_code());
    }
    Ok(if outcome.passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: LoadArgs,
    }

    #[test]
    fn flags_override_the_plan_file() {
        let dir = tempfile::tempdir().unwrap();
        let plan = dir.path().join("plan.toml");
        std::fs::write(&plan, "[load]\npods = 7\nrate = 3.0\nnamespaces = 2\n").unwrap();
        let cli = Cli::parse_from([
            "x",
            "--kubeconfig",
            "k",
            "--plan",
            plan.to_str().unwrap(),
            "--rate",
            "9",
            "--no-delete",
            "--sample",
            "api=42",
        ]);
        let p = cli.args.plan().unwrap();
        assert_eq!((p.pods, p.rate, p.namespaces, p.delete), (7, 9.0, 2, false));
        let t = cli.args.target().unwrap();
        assert_eq!(t.processes[0].pid, 42);
        assert_eq!(t.report_dir, PathBuf::from("."));
    }

    #[test]
    fn deployments_mode_errors_clearly() {
        let cli = Cli::parse_from(["x", "--kubeconfig", "k", "--mode", "deployments"]);
        let e = cli.args.plan().unwrap_err();
        assert!(e.to_string().starts_with("load.mode:"), "{e}");
    }
}
