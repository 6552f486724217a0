//! The supervisor: starts a cluster's processes stage by stage, waits for each stage to be
//! ready, restarts any process that exits (back-off 1 s doubling to 30 s), and on shutdown stops
//! everything in reverse order. It is the only writer of `state.json`.
//!
//! `kemu up` runs it in the foreground; `kemu up --detach` runs it as `kemu supervise --dir DIR`
//! in a session of its own.

use std::future::Future;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::layout::{ComponentSpec, Kind, Layout};
use crate::netns::{self, NetAccess};
use crate::probe;
use crate::state::{ClusterState, ComponentPhase, ComponentState, Phase};

/// First restart delay; doubles per consecutive crash up to [`MAX_BACKOFF`].
pub const INITIAL_BACKOFF: Duration = Duration::from_secs(1);
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A process that ran this long before exiting starts over at [`INITIAL_BACKOFF`]: back-off is
/// for crash loops, and a member chaos kills every few seconds after serving is not one.
const STABLE_RUN: Duration = Duration::from_secs(10);
/// The exit status of a component whose config cannot work (sysexits' `EX_CONFIG`): restarting
/// it would fail the same way, so if it exits so within [`STABLE_RUN`] of starting, the
/// supervisor stops the launch with the component's own error message.
pub const CONFIG_ERROR_EXIT: u8 = 78;

/// A component's config that cannot work; `kemu` exits with [`CONFIG_ERROR_EXIT`] on it.
#[derive(Debug, thiserror::Error)]
#[error("{0:#}")]
pub struct ConfigRejected(pub anyhow::Error);

/// How long a stopped process gets between SIGTERM and SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(10);
const TICK: Duration = Duration::from_millis(250);

/// How often a running cluster's processes are checked for exits; a killed API server is
/// restarted within this.
const REAP_TICK: Duration = Duration::from_millis(50);

/// The delay before restart number `crashes` (1-based) of a process that keeps crashing.
pub fn backoff(crashes: u32) -> Duration {
    let doublings = crashes.saturating_sub(1).min(5);
    (INITIAL_BACKOFF * 2u32.pow(doublings)).min(MAX_BACKOFF)
}

/// The delay before restarting a `kind` process that exited after running for `ran`, its
/// `crashes`-th exit since it last ran stably. An API server that had served is restarted at
/// once: it keeps no state of its own, and every component and client waits on it (as
/// systemd's 100 ms `RestartSec` would). Everything else, and a crash loop, backs off.
pub fn restart_delay(kind: Kind, ran: Duration, crashes: u32) -> Duration {
    if kind == Kind::Apiserver && ran >= STABLE_RUN {
        return Duration::ZERO;
    }
    backoff(crashes)
}

struct Proc {
    spec: ComponentSpec,
    netns: Option<String>,
    child: Option<Child>,
    started: Option<Instant>,
    /// Crashes since the last stable run.
    crashes: u32,
    restarts: u32,
    restart_at: Option<Instant>,
    last_exit: Option<String>,
    /// It exited at once rejecting its config: the message it gave.
    rejected: Option<String>,
}

pub struct Supervisor {
    layout: Layout,
    net: NetAccess,
    procs: Vec<Proc>,
    phase: Phase,
    progress: (u64, u64),
    start_time: Option<u64>,
}

impl Supervisor {
    /// Runs the cluster in `dir` until `shutdown` resolves. Returns an error if start-up failed
    /// (after stopping whatever had started).
    pub async fn run(dir: &Path, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
        let layout = Layout::read(dir)?;
        netns::setup(&layout).context("creating the hosts' network namespaces")?;
        let net = match NetAccess::for_layout(&layout) {
            Ok(net) => net,
            Err(e) => {
                netns::teardown(&layout);
                return Err(e);
            }
        };
        let procs = layout
            .components
            .iter()
            .map(|spec| Proc {
                netns: layout.host(&spec.host).and_then(|h| h.netns.clone()),
                spec: spec.clone(),
                child: None,
                started: None,
                crashes: 0,
                restarts: 0,
                restart_at: None,
                last_exit: None,
                rejected: None,
            })
            .collect();
        let mut sup = Supervisor {
            layout,
            net,
            procs,
            phase: Phase::Starting("starting".into()),
            progress: (0, 0),
            start_time: process_start_time(std::process::id()),
        };
        let (stop_forward, forward_stopped) = tokio::sync::oneshot::channel::<()>();
        let result = sup.drive(shutdown, forward_stopped).await;
        let _ = stop_forward.send(());
        sup.stop_all().await;
        netns::teardown(&sup.layout);
        sup.phase = match &result {
            Ok(()) => Phase::Stopped,
            Err(e) => Phase::Failed(format!("{e:#}")),
        };
        sup.write_state();
        sup.event(&format!("cluster {} stopped", sup.layout.name));
        result
    }

    async fn drive(
        &mut self,
        shutdown: impl Future<Output = ()>,
        forward_stopped: tokio::sync::oneshot::Receiver<()>,
    ) -> anyhow::Result<()> {
        tokio::pin!(shutdown);
        self.write_state();
        if let Some(listen) = self.layout.api_forward {
            let listener = tokio::net::TcpListener::bind(listen)
                .await
                .with_context(|| format!("listening on {listen} for the API forwarder"))?;
            let target = self.layout.api_http[0];
            // The forwarder needs the namespace thread, which `self.net` owns; a second one
            // keeps the borrow checker out of the supervisor loop.
            let net = NetAccess::for_layout(&self.layout)?;
            tokio::spawn(async move {
                net.forward(listener, target, async {
                    let _ = forward_stopped.await;
                })
                .await
            });
        }
        for stage in 0..=3 {
            let members: Vec<usize> = (0..self.procs.len())
                .filter(|&i| self.procs[i].spec.kind.stage() == stage)
                .collect();
            if members.is_empty() {
                continue;
            }
            let kind = self.procs[members[0]].spec.kind;
            let what = match stage {
                0 => "store leader",
                1 => "API servers ready",
                2 => "schedulers and controllers running",
                _ => "nodes Ready",
            };
            self.phase = Phase::Starting(what.into());
            self.progress = (0, 0);
            for &i in &members {
                self.start(i)?;
            }
            self.write_state();
            let timeout = match kind {
                Kind::Nodehost => Duration::from_secs(120 + self.layout.nodes_total / 50),
                _ => Duration::from_secs(60),
            };
            let deadline = Instant::now() + timeout;
            loop {
                tokio::select! {
                    biased;
                    _ = &mut shutdown => return Ok(()),
                    _ = tokio::time::sleep(TICK) => {}
                }
                self.reap_and_restart();
                if let Some((name, why)) = self
                    .procs
                    .iter()
                    .find_map(|p| Some((&p.spec.name, p.rejected.as_ref()?)))
                {
                    bail!(
                        "{name} rejected its config: {why} (see {})",
                        self.layout.dir.join("logs").display()
                    );
                }
                let (done, total) = self.stage_progress(stage, &members).await;
                self.progress = (done, total);
                self.write_state();
                if total > 0 && done >= total {
                    break;
                }
                if Instant::now() > deadline {
                    let exits: Vec<String> = members
                        .iter()
                        .map(|&i| &self.procs[i])
                        .filter_map(|p| {
                            let exit = p.last_exit.as_ref()?;
                            Some(format!(
                                "{} exited {} time(s), last {exit}",
                                p.spec.name,
                                p.restarts + 1
                            ))
                        })
                        .collect();
                    bail!(
                        "waited {timeout:?} for {what} ({done}/{total}){}; see the logs in {}",
                        if exits.is_empty() {
                            String::new()
                        } else {
                            format!("; {}", exits.join("; "))
                        },
                        self.layout.dir.join("logs").display()
                    );
                }
            }
            self.event(&format!("{what}: {}/{}", self.progress.0, self.progress.1));
        }
        self.phase = Phase::Running;
        self.progress = (0, 0);
        self.write_state();
        self.event(&format!("cluster {} running", self.layout.name));
        loop {
            tokio::select! {
                biased;
                _ = &mut shutdown => return Ok(()),
                _ = tokio::time::sleep(REAP_TICK) => {}
            }
            if self.reap_and_restart() {
                self.write_state();
            }
        }
    }

    /// (ready, total) for a start stage.
    async fn stage_progress(&self, stage: usize, members: &[usize]) -> (u64, u64) {
        match stage {
            0 => {
                let endpoints: Vec<_> = members
                    .iter()
                    .map(|&i| {
                        let s = &self.procs[i].spec;
                        (s.name.clone(), s.addresses["client"])
                    })
                    .collect();
                let n = endpoints.len();
                let views =
                    probe::store_members(&self.net, self.layout.certs.clone(), endpoints).await;
                let agreed = probe::agreed_leader(&views, n).is_some();
                let with_leader = views.iter().filter(|v| v.leader.is_some()).count();
                let done = if agreed { n } else { with_leader.min(n - 1) };
                (done as u64, n as u64)
            }
            1 => {
                let mut ready = 0;
                for &i in members {
                    if probe::api_ready(
                        &self.net,
                        &self.layout.certs,
                        self.procs[i].spec.addresses["http"],
                    )
                    .await
                    {
                        ready += 1;
                    }
                }
                (ready, members.len() as u64)
            }
            2 => {
                // They have no readiness endpoint the launcher can rely on yet: running for a
                // second without exiting counts.
                let up = members
                    .iter()
                    .filter(|&&i| {
                        self.procs[i].child.is_some()
                            && self.procs[i]
                                .started
                                .is_some_and(|s| s.elapsed() > Duration::from_secs(1))
                    })
                    .count();
                (up as u64, members.len() as u64)
            }
            _ => {
                let total = self.layout.nodes_total;
                let ready =
                    probe::nodes_ready(&self.net, &self.layout.certs, self.layout.api_http[0])
                        .await
                        .map(|(r, _)| r)
                        .unwrap_or(0);
                (ready.min(total), total)
            }
        }
    }

    fn start(&mut self, i: usize) -> anyhow::Result<()> {
        let exe = self.layout.exe.clone();
        let p = &mut self.procs[i];
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&p.spec.log)
            .with_context(|| format!("opening {}", p.spec.log.display()))?;
        let mut cmd = match &p.netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(&exe);
                c
            }
            None => Command::new(&exe),
        };
        use std::os::unix::process::CommandExt;
        cmd.args(&p.spec.args)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            // Out of the terminal's process group: Ctrl-C reaches the supervisor only, which
            // then stops the components in order.
            .process_group(0);
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {} ({})", p.spec.name, exe.display()))?;
        p.child = Some(child);
        p.started = Some(Instant::now());
        p.restart_at = None;
        Ok(())
    }

    /// Notices exited processes and restarts those whose back-off has passed. Returns whether
    /// anything changed.
    fn reap_and_restart(&mut self) -> bool {
        let mut changed = false;
        let now = Instant::now();
        let mut events = Vec::new();
        for p in &mut self.procs {
            let Some(child) = &mut p.child else {
                continue;
            };
            let Ok(Some(status)) = child.try_wait() else {
                continue;
            };
            let ran = p.started.map(|s| s.elapsed()).unwrap_or_default();
            if ran >= STABLE_RUN {
                p.crashes = 0;
            } else if status.code() == Some(i32::from(CONFIG_ERROR_EXIT)) {
                p.rejected = Some(
                    last_error_line(&p.spec.log).unwrap_or_else(|| format!("exited ({status})")),
                );
            }
            p.crashes += 1;
            let delay = restart_delay(p.spec.kind, ran, p.crashes);
            p.child = None;
            p.last_exit = Some(status.to_string());
            p.restart_at = Some(now + delay);
            events.push(format!(
                "{} exited ({status}) after {:.1}s; restarting in {}s",
                p.spec.name,
                ran.as_secs_f64(),
                delay.as_secs_f64()
            ));
            changed = true;
        }
        for e in events {
            self.event(&e);
        }
        for i in 0..self.procs.len() {
            if self.procs[i].restart_at.is_some_and(|t| t <= now) {
                match self.start(i) {
                    Ok(()) => {
                        self.procs[i].restarts += 1;
                        let msg = format!(
                            "restarted {} (restart {})",
                            self.procs[i].spec.name, self.procs[i].restarts
                        );
                        self.event(&msg);
                    }
                    Err(e) => {
                        let p = &mut self.procs[i];
                        p.crashes += 1;
                        p.restart_at = Some(now + backoff(p.crashes));
                        let msg = format!("restarting {} failed: {e:#}", p.spec.name);
                        self.event(&msg);
                    }
                }
                changed = true;
            }
        }
        changed
    }

    /// Stops every process, later stages first: SIGTERM, then SIGKILL after [`STOP_GRACE`].
    async fn stop_all(&mut self) {
        self.phase = Phase::Stopping;
        self.write_state();
        for stage in (0..=3).rev() {
            let mut children: Vec<Child> = self
                .procs
                .iter_mut()
                .filter(|p| p.spec.kind.stage() == stage)
                .filter_map(|p| {
                    p.restart_at = None;
                    p.child.take()
                })
                .collect();
            stop_children(&mut children, STOP_GRACE).await;
            self.write_state();
        }
    }

    fn state(&self) -> ClusterState {
        ClusterState {
            name: self.layout.name.clone(),
            supervisor_pid: std::process::id(),
            supervisor_start: self.start_time,
            phase: self.phase.clone(),
            progress: self.progress,
            components: self
                .procs
                .iter()
                .map(|p| ComponentState {
                    name: p.spec.name.clone(),
                    kind: p.spec.kind,
                    host: p.spec.host.clone(),
                    pid: p.child.as_ref().map(Child::id),
                    addresses: p.spec.addresses.clone(),
                    state: if p.child.is_some() {
                        ComponentPhase::Running
                    } else if p.restart_at.is_some() {
                        ComponentPhase::Restarting
                    } else if p.started.is_some() {
                        ComponentPhase::Stopped
                    } else {
                        ComponentPhase::Pending
                    },
                    restarts: p.restarts,
                    last_exit: p.last_exit.clone(),
                })
                .collect(),
        }
    }

    fn write_state(&self) {
        if let Err(e) = self.state().write(&self.layout.dir) {
            tracing::warn!("writing the state file: {e:#}");
        }
    }

    /// Logs a supervisor event to `logs/supervisor.log` and to tracing.
    fn event(&self, what: &str) {
        tracing::info!("{what}");
        let path: PathBuf = self.layout.dir.join("logs").join("supervisor.log");
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(f, "{} {what}", chrono::Utc::now().to_rfc3339());
        }
    }
}

/// The last `error: …` line a component wrote to its log (how `kemu` reports a failure),
/// without the prefix.
fn last_error_line(log: &Path) -> Option<String> {
    let text = std::fs::read_to_string(log).ok()?;
    text.lines()
        .rev()
        .find_map(|l| l.strip_prefix("error: "))
        .map(str::to_string)
}

/// SIGTERMs every child, waits up to `grace` for them all, then SIGKILLs the rest.
pub async fn stop_children(children: &mut [Child], grace: Duration) {
    for c in children.iter() {
        crate::process::signal(c, nix::sys::signal::Signal::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    loop {
        let running = children
            .iter_mut()
            .map(|c| c.try_wait())
            .filter(|r| !matches!(r, Ok(Some(_))))
            .count();
        if running == 0 {
            return;
        }
        if Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for c in children.iter_mut() {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// The start time of live (not zombie) process `pid` in clock ticks since boot (field 22 of
/// `/proc/<pid>/stat`): with the pid it identifies a process even after the pid is reused.
pub fn process_start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces; fields after it are plain.
    let after = &stat[stat.rfind(')')? + 2..];
    if after.starts_with('Z') {
        return None;
    }
    after.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_thirty_seconds() {
        let secs: Vec<u64> = (1..=8).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 30, 30, 30]);
    }

    #[test]
    fn a_killed_api_server_that_served_restarts_at_once() {
        let served = STABLE_RUN + Duration::from_secs(1);
        assert_eq!(restart_delay(Kind::Apiserver, served, 1), Duration::ZERO);
        // A crash loop backs off, and so does every other kind.
        let crashed = Duration::from_secs(2);
        assert_eq!(restart_delay(Kind::Apiserver, crashed, 2), backoff(2));
        assert_eq!(restart_delay(Kind::Store, served, 1), INITIAL_BACKOFF);
        assert_eq!(restart_delay(Kind::Scheduler, served, 1), INITIAL_BACKOFF);
    }

    /// A component that rejects its config at once stops the launch with its message, instead
    /// of being restarted every 30 s while the launch waits.
    #[tokio::test]
    async fn a_component_rejecting_its_config_stops_the_launch() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("component");
        std::fs::write(
            &exe,
            "#!/bin/sh\necho 'starting' >&2\necho 'error: config nodes: too many' >&2\nexit 78\n",
        )
        .unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let config =
            crate::config::ClusterConfig::parse("[store]\nmembers = 1\n", Path::new("t.toml"))
                .unwrap();
        let cluster = dir.path().join("cluster");
        let layout = Layout::plan(&config, &cluster, &exe).unwrap();
        layout.write(&config, "").unwrap();
        let started = Instant::now();
        let e = Supervisor::run(&cluster, std::future::pending())
            .await
            .expect_err("the launch stops");
        assert!(
            e.to_string()
                .starts_with("s1 rejected its config: config nodes: too many"),
            "{e:#}"
        );
        assert!(started.elapsed() < STABLE_RUN, "{:?}", started.elapsed());
        let state = ClusterState::read(&cluster).unwrap().unwrap();
        assert!(matches!(state.phase, Phase::Failed(_)), "{:?}", state.phase);
        assert_eq!(state.components[0].restarts, 0);
    }

    #[test]
    fn own_start_time_is_known() {
        assert!(process_start_time(std::process::id()).is_some());
    }
}
