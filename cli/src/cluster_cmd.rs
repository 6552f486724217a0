//! `kemu up`, `down`, `status`, `run`, `render` and the `supervise` process behind
//! `up --detach`: the command lines of the `cluster` crate's launcher and renderer (and of
//! `kemu run`, see [`crate::run_cmd`]).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use cluster::launcher::{self, UpOptions, DEFAULT_CONFIG};
use cluster::render::{self, ChaosJob, Credentials, Names, RenderOptions};
use cluster::status;
use cluster::supervisor::Supervisor;

use crate::run_config::RunConfig;

#[derive(Subcommand, Debug)]
pub enum LauncherCommand {
    /// Launch a cluster from a config: certs, processes in order, wait until ready.
    Up(UpArgs),
    /// Stop a cluster's supervisor and every process (SIGTERM, then SIGKILL).
    Down(DownArgs),
    /// Components, store leader, nodes Ready and pods of a cluster.
    Status(StatusArgs),
    /// Up, run the config's [load] and [chaos] plans, write the report, down.
    Run(RunArgs),
    /// Print Kubernetes manifests that run the config's cluster on a Kubernetes cluster.
    Render(RenderArgs),
    /// Run a cluster's processes and restart crashed ones (what `up --detach` leaves behind).
    #[command(hide = true)]
    Supervise(SuperviseArgs),
}

#[derive(Args, Debug)]
pub struct UpArgs {
    /// The cluster config.
    #[arg(short = 'f', long = "file", default_value = DEFAULT_CONFIG)]
    file: PathBuf,
    /// The cluster directory [default: $KEMU_HOME/<name>, else .kemu/<name>].
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Return once the cluster is ready, leaving a supervisor running in the background.
    #[arg(long)]
    detach: bool,
    /// Write the cluster directory and print, per host, the commands and files to copy; start
    /// nothing.
    #[arg(long, conflicts_with = "detach")]
    plan: bool,
}

/// How `down` and `status` find the cluster: `--dir`, or the default directory of `-f`'s
/// cluster, or the only cluster under `$KEMU_HOME` / `.kemu`.
#[derive(Args, Debug)]
pub struct ClusterDirArgs {
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The cluster config whose default directory to use.
    #[arg(short = 'f', long = "file", conflicts_with = "dir")]
    file: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct DownArgs {
    #[command(flatten)]
    cluster: ClusterDirArgs,
    /// Remove the cluster directory too.
    #[arg(long)]
    purge: bool,
}

#[derive(Args, Debug)]
pub struct StatusArgs {
    #[command(flatten)]
    cluster: ClusterDirArgs,
    /// `table` or `json`.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = StatusOutput::Table)]
    output: StatusOutput,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    #[arg(short = 'f', long = "file", default_value = DEFAULT_CONFIG)]
    file: PathBuf,
    #[arg(long)]
    dir: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct RenderArgs {
    /// The cluster config.
    #[arg(short = 'f', long = "file", default_value = DEFAULT_CONFIG)]
    file: PathBuf,
    /// The namespace of every object [default: the cluster's name].
    #[arg(long)]
    namespace: Option<String>,
    /// The image of every container: one with the `kemu` binary on its PATH.
    #[arg(long, default_value = render::DEFAULT_IMAGE)]
    image: String,
    /// Where to write: a file for one multi-document YAML stream, or a directory (existing,
    /// or named with a trailing `/`) for one numbered file per object [default: stdout].
    #[arg(short = 'o', long = "output")]
    output: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct SuperviseArgs {
    #[arg(long)]
    dir: PathBuf,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum StatusOutput {
    Table,
    Json,
}

pub async fn run(command: LauncherCommand) -> anyhow::Result<ExitCode> {
    match command {
        LauncherCommand::Up(args) => {
            let config = RunConfig::load(&args.file)?;
            let options = UpOptions {
                dir: args.dir,
                detach: args.detach,
                plan: args.plan,
            };
            launcher::up(&config.cluster, &config.text, &options).await?;
            Ok(ExitCode::SUCCESS)
        }
        LauncherCommand::Down(args) => {
            launcher::down(&args.cluster.resolve()?, args.purge).await?;
            Ok(ExitCode::SUCCESS)
        }
        LauncherCommand::Status(args) => {
            let output = match args.output {
                StatusOutput::Table => status::Output::Table,
                StatusOutput::Json => status::Output::Json,
            };
            status::run(&args.cluster.resolve()?, output).await
        }
        LauncherCommand::Run(args) => crate::run_cmd::run(&args.file, args.dir.as_deref()).await,
        LauncherCommand::Render(args) => {
            render_manifests(&args)?;
            Ok(ExitCode::SUCCESS)
        }
        LauncherCommand::Supervise(args) => {
            Supervisor::run(&args.dir, cluster::shutdown::signal()).await?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

impl ClusterDirArgs {
    fn resolve(&self) -> anyhow::Result<PathBuf> {
        let config = match &self.file {
            Some(file) => Some(RunConfig::load(file)?.cluster),
            None => None,
        };
        launcher::find_cluster_dir(self.dir.as_deref(), config.as_ref())
    }
}

/// How long the chaos Job runs: until a minute after its last action is restored, or ten
/// minutes when an action repeats (it repeats until then).
fn chaos_job_seconds(plan: &chaos::plan::ChaosPlan) -> f64 {
    if plan.actions.iter().any(|a| a.every.is_some()) {
        return 600.0;
    }
    let last = plan
        .actions
        .iter()
        .map(|a| a.at + a.restore_after.unwrap_or(0.0))
        .fold(0.0, f64::max);
    (last + 60.0).ceil()
}

/// `kemu render`: the config's cluster as manifests, with fresh certificates.
fn render_manifests(args: &RenderArgs) -> anyhow::Result<()> {
    let mut config = RunConfig::load(&args.file)?;
    let chaos = config
        .chaos
        .as_ref()
        .filter(|c| c.has_actions())
        .map(|plan| {
            for (i, action) in plan.actions.iter().enumerate() {
                if matches!(
                    action.kind.as_str(),
                    "stop" | "stop-store-member" | "partition-host" | "isolate" | "heal-host"
                ) {
                    eprintln!(
                        "warning: chaos.action[{i}] ({}) cannot act on pods through the Kubernetes API: the chaos Job records it as not done",
                        action.kind
                    );
                }
            }
            ChaosJob {
                config_text: config.text.clone(),
                duration_s: chaos_job_seconds(plan),
            }
        });
    // A chaos run reads the store's history of the whole run afterwards: no compaction then.
    config.cluster.apiserver.keep_history = chaos.is_some();
    let mut options = RenderOptions::new(&config.cluster);
    options.chaos = chaos;
    if let Some(ns) = &args.namespace {
        options.namespace = ns.clone();
    }
    options.image = args.image.clone();
    match &config.load {
        Some(load) if load.cl2.is_some() => eprintln!(
            "warning: the [load] plan runs a clusterloader2 config, whose files the load Job cannot see: no Job rendered"
        ),
        Some(_) => options.load_plan = Some(config.text.clone()),
        None => {}
    }
    options.validate()?;
    let names = Names {
        namespace: options.namespace.clone(),
    };
    let credentials = Credentials::generate(&config.cluster, &names)?;
    let manifests = render::render(&config.cluster, &options, &credentials)?;
    let Some(output) = &args.output else {
        print!("{}", render::to_yaml_stream(&manifests));
        return Ok(());
    };
    let to_dir = output.is_dir() || output.as_os_str().to_string_lossy().ends_with('/');
    if !to_dir {
        return std::fs::write(output, render::to_yaml_stream(&manifests))
            .with_context(|| format!("writing {}", output.display()));
    }
    std::fs::create_dir_all(output).with_context(|| format!("creating {}", output.display()))?;
    for (i, m) in manifests.iter().enumerate() {
        let path = output.join(format!(
            "{i:02}-{}-{}.yaml",
            m.kind.to_ascii_lowercase(),
            m.name
        ));
        std::fs::write(&path, &m.yaml).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
