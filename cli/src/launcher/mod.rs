//! The launcher: `kemu up`, `down`, `status`, `run` and the `supervise` process behind
//! `up --detach`, driven by a cluster config.
//!
//! - [`config`]: the cluster config (TOML) and its validation.
//! - [`layout`]: the config resolved into hosts, addresses and command lines; the cluster
//!   directory (certs, kubeconfig, data, logs, pids).
//! - [`supervisor`]: starts the processes stage by stage and restarts crashed ones.
//! - [`state`]: `state.json`, the supervisor's account of every process.
//! - [`netns`]: hosts as network namespaces on a private bridge.
//! - [`probe`]: store leader, API readiness, nodes Ready, pods by phase.
//! - [`status`]: `kemu status`.

pub mod config;
pub mod layout;
pub mod netns;
pub mod probe;
pub mod state;
pub mod status;
pub mod supervisor;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::{Args, Subcommand};

use config::{ClusterConfig, HostMode};
use layout::{Kind, Layout, LAYOUT_FILE};
use state::{pid_is_ours, ClusterState, Phase};
use supervisor::{process_start_time, Supervisor};

/// The config `up` and `run` use when given none.
pub const DEFAULT_CONFIG: &str = "clusters/local.toml";

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
    #[arg(short = 'o', long = "output", default_value = "table")]
    output: status::Output,
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

pub async fn run(command: LauncherCommand) -> anyhow::Result<ExitCode> {
    match command {
        LauncherCommand::Up(args) => up(args).await,
        LauncherCommand::Down(args) => {
            let dir = args.cluster.resolve()?;
            down(&dir, args.purge).await?;
            Ok(ExitCode::SUCCESS)
        }
        LauncherCommand::Status(args) => status::run(&args.cluster.resolve()?, args.output).await,
        LauncherCommand::Run(args) => run_plans(args).await,
        LauncherCommand::Supervise(args) => {
            Supervisor::run(&args.dir, crate::shutdown::signal()).await?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `$KEMU_HOME`, else `.kemu` in the current directory.
fn home() -> PathBuf {
    std::env::var_os("KEMU_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(".kemu"))
}

fn default_dir(config: &ClusterConfig) -> PathBuf {
    home().join(&config.name)
}

impl ClusterDirArgs {
    fn resolve(&self) -> anyhow::Result<PathBuf> {
        if let Some(dir) = &self.dir {
            return Ok(std::path::absolute(dir)?);
        }
        if let Some(file) = &self.file {
            return Ok(std::path::absolute(default_dir(&ClusterConfig::load(
                file,
            )?))?);
        }
        let home = home();
        let clusters: Vec<PathBuf> = std::fs::read_dir(&home)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.path())
                    .filter(|p| p.join(LAYOUT_FILE).exists())
                    .collect()
            })
            .unwrap_or_default();
        match clusters.as_slice() {
            [one] => Ok(std::path::absolute(one)?),
            [] => bail!("no cluster under {}; give --dir", home.display()),
            many => bail!(
                "several clusters under {}: {}; give --dir",
                home.display(),
                many.iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// Reads the config and prepares a fresh cluster directory for it.
/// With `check`, fails unless this `kemu` can run every component the config asks for.
fn prepare(
    file: &Path,
    dir: Option<&Path>,
    check: bool,
) -> anyhow::Result<(ClusterConfig, Layout)> {
    let text = std::fs::read_to_string(file).with_context(|| {
        format!(
            "cannot read the cluster config {} (see clusters/ for examples)",
            file.display()
        )
    })?;
    let config = ClusterConfig::parse(&text, file)?;
    let dir = std::path::absolute(
        dir.map(Path::to_path_buf)
            .unwrap_or_else(|| default_dir(&config)),
    )?;
    let exe = std::env::current_exe().context("finding the kemu binary")?;
    if check {
        check_subcommands(&exe, &config)?;
    }
    if dir.exists() {
        if dir.join(LAYOUT_FILE).exists() {
            if let Some(pid) = live_supervisor(&dir) {
                bail!(
                    "a cluster is already running in {} (supervisor pid {pid}); run `kemu down --dir {}` first",
                    dir.display(),
                    dir.display()
                );
            }
            let needle = dir.display().to_string();
            let stray: Vec<u32> = ClusterState::read(&dir)
                .ok()
                .flatten()
                .map(|s| {
                    s.components
                        .iter()
                        .filter_map(|c| c.pid)
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
                .into_iter()
                .filter(|&p| pid_is_ours(p, &needle))
                .collect();
            if !stray.is_empty() {
                bail!(
                    "processes of an earlier cluster in {} still run (pids {stray:?}); run `kemu down --dir {}` first",
                    dir.display(),
                    dir.display()
                );
            }
            // A stopped cluster's directory: start over (its store data belongs to other ports).
            if let Ok(old) = Layout::read(&dir) {
                netns::teardown(&old);
            }
            std::fs::remove_dir_all(&dir)
                .with_context(|| format!("removing the old cluster in {}", dir.display()))?;
        } else if std::fs::read_dir(&dir)?.next().is_some() {
            bail!(
                "{} exists and is not a kemu cluster directory; choose another --dir",
                dir.display()
            );
        }
    }
    let layout = Layout::plan(&config, &dir, &exe)?;
    layout.write(&config, &text)?;
    Ok((config, layout))
}

/// Fails clearly when the config asks for a component this `kemu` cannot run yet.
fn check_subcommands(exe: &Path, config: &ClusterConfig) -> anyhow::Result<()> {
    let wanted = [
        (
            Kind::Scheduler,
            config.scheduler.replicas,
            "scheduler.replicas",
        ),
        (
            Kind::Controllers,
            config.controllers.replicas,
            "controllers.replicas",
        ),
        (Kind::Nodehost, config.nodes.hosts, "nodes.hosts"),
    ];
    for (kind, n, field) in wanted {
        if n == 0 {
            continue;
        }
        let ok = std::process::Command::new(exe)
            .args([kind.subcommand(), "--help"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !ok {
            bail!(
                "the config asks for {n} {kind} process(es) ({field}), but this kemu has no `kemu {}` subcommand yet; set {field} = 0",
                kind.subcommand(),
                kind = kind.as_str()
            );
        }
    }
    Ok(())
}

/// The pid of the cluster's supervisor, if it is alive.
fn live_supervisor(dir: &Path) -> Option<u32> {
    let state = ClusterState::read(dir).ok()??;
    let pid = state.supervisor_pid;
    let alive =
        process_start_time(pid).is_some() && process_start_time(pid) == state.supervisor_start;
    (alive && !matches!(state.phase, Phase::Stopped)).then_some(pid)
}

async fn up(args: UpArgs) -> anyhow::Result<ExitCode> {
    if args.plan {
        let (_, layout) = prepare(&args.file, args.dir.as_deref(), false)?;
        print!("{}", layout.plan_text());
        return Ok(ExitCode::SUCCESS);
    }
    let (config, layout) = prepare(&args.file, args.dir.as_deref(), true)?;
    if config.hosts.mode == HostMode::Remote {
        bail!("hosts.mode = \"remote\": run `kemu up --plan` and start the printed commands on each host");
    }
    if args.detach {
        let mut child = spawn_detached_supervisor(&layout)?;
        let result = wait_until_running(&layout, || match child.try_wait() {
            Ok(Some(status)) => Some(format!("the supervisor exited ({status})")),
            _ => None,
        })
        .await;
        if let Err(e) = result {
            // Reap it (a zombie would look alive to `down`), then clean up whatever is left.
            if !matches!(child.try_wait(), Ok(Some(_))) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(child.id() as i32),
                    nix::sys::signal::Signal::SIGTERM,
                );
                let _ = tokio::task::spawn_blocking(move || child.wait()).await;
            }
            down(&layout.dir, false).await.ok();
            return Err(e);
        }
        print_endpoints(&layout);
        println!(
            "# supervised in the background; stop it with: kemu down --dir {}",
            layout.dir.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let dir = layout.dir.clone();
    let supervisor =
        tokio::spawn(async move { Supervisor::run(&dir, crate::shutdown::signal()).await });
    let started = wait_until_running(&layout, || {
        supervisor
            .is_finished()
            .then(|| "the supervisor stopped".to_string())
    })
    .await;
    if started.is_ok() {
        print_endpoints(&layout);
        println!("# supervising; Ctrl-C stops the cluster");
    }
    let supervised = supervisor.await.context("supervisor task")?;
    supervised?;
    // The supervisor stopped without an error, so it was asked to (Ctrl-C, SIGTERM): a stop
    // during start-up, or one that came before this loop saw the cluster running, is what the
    // user asked for, not a failed start.
    if let Err(e) = started {
        tracing::info!(reason = %e, "stopped before start-up was reported");
    }
    Ok(ExitCode::SUCCESS)
}

fn spawn_detached_supervisor(layout: &Layout) -> anyhow::Result<std::process::Child> {
    use std::os::unix::process::CommandExt;
    let out = std::fs::File::create(layout.dir.join("logs").join("supervisor.stderr"))?;
    let mut cmd = std::process::Command::new(&layout.exe);
    cmd.args(["supervise", "--dir"])
        .arg(&layout.dir)
        .stdin(std::process::Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out);
    // SAFETY: setsid is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid()
                .map(|_| ())
                .map_err(std::io::Error::from)
        });
    }
    cmd.spawn().context("starting the supervisor")
}

/// Shows start-up progress from the state file until the cluster runs, start-up fails, or
/// `gone` reports the supervisor gone.
async fn wait_until_running(
    layout: &Layout,
    mut gone: impl FnMut() -> Option<String>,
) -> anyhow::Result<()> {
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} {prefix:.bold} {msg} {pos}/{len} [{elapsed}]",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    bar.set_prefix(layout.name.clone());
    bar.enable_steady_tick(Duration::from_millis(120));
    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut last_msg = String::new();
    let started = Instant::now();
    loop {
        if let Ok(Some(state)) = ClusterState::read(&layout.dir) {
            match &state.phase {
                Phase::Running => {
                    bar.finish_and_clear();
                    eprintln!(
                        "{} ready in {:.1}s",
                        layout.name,
                        started.elapsed().as_secs_f64()
                    );
                    return Ok(());
                }
                Phase::Failed(reason) => {
                    bar.finish_and_clear();
                    bail!("{} failed to start: {reason}", layout.name);
                }
                Phase::Starting(what) => {
                    bar.set_message(what.clone());
                    bar.set_length(state.progress.1);
                    bar.set_position(state.progress.0);
                    if !tty && *what != last_msg {
                        eprintln!("{}: waiting for {what}", layout.name);
                    }
                    last_msg = what.clone();
                }
                Phase::Stopping | Phase::Stopped => {}
            }
        }
        if let Some(why) = gone() {
            bar.finish_and_clear();
            // One more look: the supervisor may have written why.
            if let Ok(Some(ClusterState {
                phase: Phase::Failed(reason),
                ..
            })) = ClusterState::read(&layout.dir)
            {
                bail!("{} failed to start: {reason}", layout.name);
            }
            bail!(
                "{} did not start: {why}; see {}",
                layout.name,
                layout.dir.join("logs").display()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn print_endpoints(layout: &Layout) {
    println!("cluster {} is up in {}", layout.name, layout.dir.display());
    let store: Vec<String> = layout
        .store_endpoints
        .iter()
        .map(|e| e.to_string())
        .collect();
    println!("  store:      {}", store.join(", "));
    let api: Vec<String> = layout
        .api_http
        .iter()
        .map(|e| format!("https://{e}"))
        .collect();
    println!("  apiserver:  {}", api.join(", "));
    if let Some(f) = layout.api_forward {
        println!("  forwarded:  https://{f} (from this machine's namespace)");
    }
    println!("  nodes:      {}", layout.nodes_total);
    println!("  logs:       {}", layout.dir.join("logs").display());
    println!("export KUBECONFIG={}", layout.kubeconfig.display());
}

/// Stops the supervisor and every process of the cluster in `dir`, removes its namespaces and,
/// with `purge`, the directory.
pub async fn down(dir: &Path, purge: bool) -> anyhow::Result<()> {
    let dir = std::path::absolute(dir)?;
    if !dir.exists() {
        println!("no cluster in {}", dir.display());
        return Ok(());
    }
    let layout = Layout::read(&dir)?;
    if let Some(pid) = live_supervisor(&dir) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        // The supervisor stops four stages, each with the full grace period at worst.
        let deadline = Instant::now() + supervisor::STOP_GRACE * 4 + Duration::from_secs(5);
        while live_supervisor(&dir).is_some() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    // Whatever is left: the supervisor was killed, or did not finish in time.
    let needle = dir.display().to_string();
    let mut pids: Vec<u32> = ClusterState::read(&dir)
        .ok()
        .flatten()
        .map(|s| s.components.iter().filter_map(|c| c.pid).collect())
        .unwrap_or_default();
    if let Ok(entries) = std::fs::read_dir(dir.join("pids")) {
        for e in entries.flatten() {
            if let Ok(text) = std::fs::read_to_string(e.path()) {
                if let Ok(pid) = text.trim().parse::<u32>() {
                    pids.push(pid);
                }
            }
        }
    }
    pids.sort();
    pids.dedup();
    pids.retain(|&p| pid_is_ours(p, &needle));
    kill_pids(&pids, supervisor::STOP_GRACE).await;
    netns::teardown(&layout);
    if purge {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
        println!("cluster {} stopped; {} removed", layout.name, dir.display());
    } else {
        println!("cluster {} stopped", layout.name);
    }
    Ok(())
}

/// SIGTERM, then SIGKILL after `grace`, for processes that are not our children.
async fn kill_pids(pids: &[u32], grace: Duration) {
    use nix::sys::signal::{kill, Signal};
    let pid = |p: u32| nix::unistd::Pid::from_raw(p as i32);
    // A zombie is dead for our purposes.
    let alive = |p: u32| process_start_time(p).is_some();
    for &p in pids {
        let _ = kill(pid(p), Signal::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    while pids.iter().any(|&p| alive(p)) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for &p in pids {
        if alive(p) {
            let _ = kill(pid(p), Signal::SIGKILL);
        }
    }
}

/// After the first stop signal, how long `kemu run` waits for the load's report (and the chaos
/// results joined to it) before it stops the cluster anyway.
pub const REPORT_GRACE: Duration = Duration::from_secs(30);

/// `kemu run`: up in the foreground, the load and chaos plans, the report, down.
///
/// A stop signal (Ctrl-C, SIGTERM) goes to the load first: it ends the phase under way, samples
/// the processes and writes its report while the cluster is still up; then the cluster is
/// stopped. The report gets [`REPORT_GRACE`]; a second signal stops the cluster at once.
async fn run_plans(args: RunArgs) -> anyhow::Result<ExitCode> {
    let (config, layout) = prepare(&args.file, args.dir.as_deref(), true)?;
    if config.hosts.mode == HostMode::Remote {
        bail!("kemu run needs a local or netns cluster; remote clusters are started by hand (kemu up --plan)");
    }
    let interrupt = crate::shutdown::Interrupt::listen();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let dir = layout.dir.clone();
    // The supervisor stops when told to, not on the signal itself: the load reports first.
    let mut supervisor = tokio::spawn(async move {
        let stop = async move {
            let _ = stop_rx.await;
        };
        Supervisor::run(&dir, stop).await
    });
    let started = tokio::select! {
        started = wait_until_running(&layout, || {
            supervisor
                .is_finished()
                .then(|| "the supervisor stopped".to_string())
        }) => started,
        _ = interrupt.first() => Err(anyhow::anyhow!("interrupted while {} was starting; no load ran", layout.name)),
    };
    let run_started = Instant::now();
    let mut supervised = None;
    let outcome = match started {
        Ok(()) => {
            // From the first signal on, the report has REPORT_GRACE; a second signal ends it.
            let cut_off = async {
                interrupt.first().await;
                tokio::select! {
                    _ = tokio::time::sleep(REPORT_GRACE) => format!("no report {} s after the stop signal", REPORT_GRACE.as_secs()),
                    _ = interrupt.second() => "a second stop signal".to_string(),
                }
            };
            tokio::select! {
                r = run_load(&config, &layout, &interrupt) => r,
                s = &mut supervisor => {
                    supervised = Some(s);
                    Err(anyhow::anyhow!("the cluster stopped before the run finished"))
                }
                why = cut_off => {
                    let json = layout.dir.join("report").join("load-report.json");
                    Err(anyhow::anyhow!(
                        "interrupted: stopped the cluster before the report was complete ({why}); {}",
                        if json.exists() {
                            format!("{} may hold the load's part", json.display())
                        } else {
                            "no report written".to_string()
                        }
                    ))
                }
            }
        }
        Err(e) => Err(e),
    };
    let run_s = run_started.elapsed().as_secs_f64();
    if interrupt.requested() {
        eprintln!("{}: stopping the cluster", layout.name);
    }
    let _ = stop_tx.send(());
    let supervised = match supervised {
        Some(s) => s,
        None => supervisor.await,
    }
    .context("supervisor task")?;
    let outcome = outcome?;
    supervised?;
    let verdict = if outcome.interrupted {
        "INTERRUPTED: the report holds what was measured until the stop signal"
    } else if outcome.passed {
        "PASSED"
    } else {
        "FAILED"
    };
    println!("{}: {verdict} (run {run_s:.0} s)", layout.name);
    for (what, path) in &outcome.files {
        println!("  {what:<12} {}", path.display());
    }
    Ok(if outcome.interrupted {
        interrupt.exit_code()
    } else if outcome.passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// What `run_load` did: whether every check passed, whether a stop signal cut it short, and
/// the files it wrote.
struct RunOutcome {
    passed: bool,
    interrupted: bool,
    files: Vec<(&'static str, PathBuf)>,
}

/// The API servers the load's watches do not go through (the kubeconfig names the first, or
/// in netns mode a forwarder): the chaos check records a pod watch through each of them too,
/// and the load spreads its requests over them with the first. In netns mode they are inside
/// the hosts' namespaces, out of the load's reach: none.
fn extra_watch_servers(layout: &Layout) -> Vec<String> {
    if layout.api_forward.is_some() {
        return Vec::new();
    }
    let first = layout.api_url();
    layout
        .api_http
        .iter()
        .map(|a| format!("https://{a}"))
        .filter(|url| *url != first)
        .collect()
}

/// Load clock + this = chaos clock (the two runs start at different moments).
fn chaos_offset(
    chaos: &crate::chaos::report::ChaosReport,
    outcome: &crate::load::LoadOutcome,
) -> f64 {
    crate::load::report::seconds_between(&chaos.started_at, &outcome.report.started_at)
}

/// When each API server (by the URL the load's watches name it with) was killed, on the
/// load's clock.
fn api_server_kills(
    chaos: &crate::chaos::report::ChaosReport,
    outcome: &crate::load::LoadOutcome,
    layout: &Layout,
) -> std::collections::HashMap<String, Vec<f64>> {
    use crate::chaos::actions::ActionKind;
    let offset = chaos_offset(chaos, outcome);
    let servers: Vec<&str> = layout
        .components
        .iter()
        .filter(|c| c.kind == Kind::Apiserver)
        .map(|c| c.name.as_str())
        .collect();
    let mut kills: std::collections::HashMap<String, Vec<f64>> = Default::default();
    for a in chaos
        .actions
        .iter()
        .filter(|a| a.disruptive && a.kind == ActionKind::KillApiserver)
    {
        let Some(i) = servers.iter().position(|s| *s == a.target) else {
            continue;
        };
        // netns mode: the load reaches the first API server through the forwarder.
        let url = match (i, layout.api_forward) {
            (0, Some(_)) => layout.api_url(),
            _ => match layout.api_http.get(i) {
                Some(addr) => format!("https://{addr}"),
                None => continue,
            },
        };
        kills.entry(url).or_default().push(a.at_s - offset);
    }
    kills
}

/// The chaos run's service report with the load's pods: when pods created after each action
/// were scheduled and reached Running (on the killed host's nodes after a node-host kill).
fn service_with_pods(
    chaos: &crate::chaos::report::ChaosReport,
    outcome: &crate::load::LoadOutcome,
    config: &ClusterConfig,
    layout: &Layout,
) -> crate::chaos::service::ServiceReport {
    use crate::chaos::service::{self, PodTimes};
    let offset = chaos_offset(chaos, outcome);
    let pods: Vec<PodTimes> = outcome
        .records
        .iter()
        .map(|r| PodTimes {
            create_sent_s: r.create_sent + offset,
            created: r.created,
            scheduled_s: r.scheduled_seen.map(|t| t + offset),
            running_s: r.running_seen.map(|t| t + offset),
            node: r.node.clone(),
        })
        .collect();
    // Node hosts own consecutive runs of `per_host` nodes (see `NODE_PREFIX`).
    let hosts: Vec<String> = layout
        .components
        .iter()
        .filter(|c| c.kind == Kind::Nodehost)
        .map(|c| c.name.clone())
        .collect();
    let per_host = config.nodes.per_host.max(1) as usize;
    let host_of = |node: &str| -> Option<String> {
        let i: usize = node.strip_prefix(layout::NODE_PREFIX)?.parse().ok()?;
        hosts.get(i / per_host).cloned()
    };
    service::analyse(&chaos.api_probes, Some((&pods, &host_of)), &chaos.actions)
}

/// Upper bound on a chaos plan's length under `kemu run`: its repeats stop when the load ends.
const CHAOS_HORIZON: Duration = Duration::from_secs(6 * 3600);

/// Runs the `[load]` plan with the `[chaos]` plan alongside; whether every check passed. A
/// stop signal of `interrupt` cuts the load short (see [`crate::load::run`]); the chaos plan
/// ends with it, and its results join the report as they do after a whole run.
async fn run_load(
    config: &ClusterConfig,
    layout: &Layout,
    interrupt: &crate::shutdown::Interrupt,
) -> anyhow::Result<RunOutcome> {
    let report_dir = layout.dir.join("report");
    let processes = ClusterState::read(&layout.dir)?
        .map(|s| {
            s.components
                .iter()
                .filter_map(|c| {
                    c.pid.map(|pid| crate::load::SampledProcess {
                        name: c.name.clone(),
                        pid,
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let chaos_plan = config.chaos.clone().filter(|c| !c.actions.is_empty());
    let run_json = report_dir.join("run.json");
    let Some(plan) = &config.load else {
        if chaos_plan.is_some() {
            bail!("the config has a [chaos] plan but no [load] plan: chaos runs alongside a load (or use `kemu chaos --dir` on a cluster from `kemu up`)");
        }
        println!("the config has no [load] plan: the cluster started and stopped cleanly");
        std::fs::write(
            &run_json,
            r#"{"passed": true, "load": null, "chaos": null}"#,
        )?;
        return Ok(RunOutcome {
            passed: true,
            interrupted: false,
            files: vec![("summary", run_json)],
        });
    };
    // Chaos first, so its clock starts before the load's; its repeats end with the load.
    let (load_done, load_done_rx) = tokio::sync::oneshot::channel::<()>();
    let chaos = chaos_plan.map(|chaos_plan| {
        let dir = layout.dir.clone();
        let run_config = crate::chaos::run::ChaosRunConfig {
            duration: CHAOS_HORIZON,
            seed: chaos_plan.seed,
            ..Default::default()
        };
        let stop = async move {
            let _ = load_done_rx.await;
        };
        tokio::spawn(async move {
            crate::chaos::run::run_on_cluster_dir(&dir, &chaos_plan, &run_config, stop).await
        })
    });
    let other_servers = extra_watch_servers(layout);
    let target = crate::load::LoadTarget {
        kubeconfig: layout.kubeconfig.clone(),
        report_dir: report_dir.clone(),
        processes,
        record_watch: chaos.is_some(),
        extra_watch_servers: other_servers.clone(),
        spread_servers: other_servers,
    };
    let outcome = crate::load::run(plan, &target, interrupt).await;
    let _ = load_done.send(());
    let chaos = match chaos {
        Some(task) => Some(task.await.context("chaos task")?),
        None => None,
    };
    let mut outcome = outcome?;
    let mut files = vec![
        ("report", outcome.report_html.clone()),
        ("report json", outcome.report_json.clone()),
    ];
    if let Some(chaos) = chaos {
        let mut chaos = chaos.context("the chaos run")?;
        chaos.interrupted = outcome.interrupted;
        chaos.passed &= !outcome.interrupted;
        chaos.accounting = outcome.report.accounting.combined();
        let server_kills = api_server_kills(&chaos, &outcome, layout);
        let load_watch = crate::chaos::run::check_load_watches(
            &layout.dir,
            std::mem::take(&mut outcome.watch_histories),
            &outcome.report.run_id,
            &server_kills,
        )
        .await
        .unwrap_or_else(|e| crate::chaos::watch_check::WatchCheckReport {
            passed: false,
            examples: vec![format!("cannot read the store's history: {e:#}")],
            ..Default::default()
        });
        chaos.passed &= load_watch.passed && chaos.accounting.as_ref().is_some_and(|a| a.passed);
        chaos.load_watch = Some(load_watch);
        let service = service_with_pods(&chaos, &outcome, config, layout);
        chaos.passed &= service.passed;
        chaos.service = Some(service);
        let chaos_files = chaos.write(&report_dir)?;
        files.push(("chaos json", chaos_files.json));
        files.push(("chaos history", chaos_files.history));
        let report = &mut outcome.report;
        report.passed &= chaos.passed;
        report.chaos = Some(chaos);
        let (_, _, summary) = crate::load::write_report(report, &report_dir)?;
        outcome.summary = summary;
        outcome.passed = report.passed;
    }
    println!("{}", outcome.summary);
    let summary = serde_json::json!({
        "passed": outcome.passed,
        "interrupted": outcome.interrupted,
        "load": {
            "report_json": outcome.report_json,
            "report_html": outcome.report_html,
        },
        "chaos": outcome.report.chaos.as_ref().map(|c| c.passed),
    });
    std::fs::write(&run_json, serde_json::to_vec_pretty(&summary)?)?;
    files.push(("summary", run_json));
    Ok(RunOutcome {
        passed: outcome.passed,
        interrupted: outcome.interrupted,
        files,
    })
}
