//! The launcher: `kemu up` and `down` for a cluster config, and the start-up progress that
//! `kemu run` shows too.
//!
//! [`prepare`] turns a config into a fresh cluster directory and its [`Layout`]; [`up`] runs its
//! [`Supervisor`] in the foreground or leaves it in the background (`--detach`), or prints
//! what to run where (`--plan`); [`down`] stops whatever runs from a cluster directory.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::config::{ClusterConfig, HostMode};
use crate::layout::{Kind, Layout, LAYOUT_FILE};
use crate::netns;
use crate::state::{pid_is_ours, ClusterState, Phase};
use crate::supervisor::{self, process_start_time, Supervisor};

/// The config `up` and `run` use when given none.
pub const DEFAULT_CONFIG: &str = "clusters/local.toml";

/// How `kemu up` starts a cluster.
#[derive(Clone, Debug, Default)]
pub struct UpOptions {
    /// The cluster directory (default: [`default_dir`]).
    pub dir: Option<PathBuf>,
    /// Return once the cluster is ready, leaving a supervisor running in the background.
    pub detach: bool,
    /// Write the cluster directory and print, per host, the commands and files to copy; start
    /// nothing.
    pub plan: bool,
}

/// `$KEMU_HOME`, else `.kemu` in the current directory.
pub fn home() -> PathBuf {
    std::env::var_os("KEMU_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(".kemu"))
}

/// Where a cluster's directory goes unless told: `<home>/<name>` (see [`home`]).
pub fn default_dir(config: &ClusterConfig) -> PathBuf {
    home().join(&config.name)
}

/// The directory of a cluster to act on (`down`, `status`): `dir` if given, else the default
/// directory of `config`'s cluster, else the only cluster under [`home`].
pub fn find_cluster_dir(
    dir: Option<&Path>,
    config: Option<&ClusterConfig>,
) -> anyhow::Result<PathBuf> {
    if let Some(dir) = dir {
        return Ok(std::path::absolute(dir)?);
    }
    if let Some(config) = config {
        return Ok(std::path::absolute(default_dir(config))?);
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

/// Prepares a fresh cluster directory for `config` (whose file's text, `config_text`, is kept
/// there as `cluster.toml`) in `dir`, else its [`default_dir`]. With `check`, fails unless this
/// `kemu` can run every component the config asks for.
pub fn prepare(
    config: &ClusterConfig,
    config_text: &str,
    dir: Option<&Path>,
    check: bool,
) -> anyhow::Result<Layout> {
    let dir = std::path::absolute(
        dir.map(Path::to_path_buf)
            .unwrap_or_else(|| default_dir(config)),
    )?;
    let exe = std::env::current_exe().context("finding the kemu binary")?;
    if check {
        check_subcommands(&exe, config)?;
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
    let layout = Layout::plan(config, &dir, &exe)?;
    layout.write(config, config_text)?;
    Ok(layout)
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

/// `kemu up`: prepares the cluster directory, then supervises the cluster until a stop signal
/// (SIGTERM, Ctrl-C), or until it is ready with `detach`; with `plan`, prints what to run where.
pub async fn up(
    config: &ClusterConfig,
    config_text: &str,
    options: &UpOptions,
) -> anyhow::Result<()> {
    if options.plan {
        let layout = prepare(config, config_text, options.dir.as_deref(), false)?;
        print!("{}", layout.plan_text());
        return Ok(());
    }
    let layout = prepare(config, config_text, options.dir.as_deref(), true)?;
    if config.hosts.mode == HostMode::Remote {
        bail!("hosts.mode = \"remote\": run `kemu up --plan` and start the printed commands on each host");
    }
    if options.detach {
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
        return Ok(());
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
    Ok(())
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
pub async fn wait_until_running(
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

/// Where to reach a cluster that is up, on stdout.
pub fn print_endpoints(layout: &Layout) {
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
