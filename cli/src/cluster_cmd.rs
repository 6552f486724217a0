//! `kemu up`, `down`, `status`, `run` and the `supervise` process behind `up --detach`: the
//! command lines of the `cluster` crate's launcher (and of `kemu run`, see [`crate::run_cmd`]).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use cluster::launcher::{self, UpOptions, DEFAULT_CONFIG};
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
