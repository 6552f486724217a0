//! `<dir>/state.json`: what the supervisor is doing and every component's pid and restart
//! count. Only the supervisor writes it (atomically, by rename); `up`, `status` and `down`
//! read it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::layout::Kind;

pub const STATE_FILE: &str = "state.json";

/// Where the supervisor is in a cluster's life.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "phase", content = "detail")]
pub enum Phase {
    /// Starting stage by stage; the detail says what it waits for.
    Starting(String),
    Running,
    Stopping,
    Stopped,
    /// Start-up failed; the detail is the reason.
    Failed(String),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ComponentPhase {
    Pending,
    Running,
    /// Exited; waiting out its back-off before the next start.
    Restarting,
    Stopped,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ComponentState {
    pub name: String,
    pub kind: Kind,
    pub host: String,
    pub pid: Option<u32>,
    pub addresses: BTreeMap<String, SocketAddr>,
    pub state: ComponentPhase,
    pub restarts: u32,
    /// How the last run ended (`exit status: 1`, `signal: 9 (SIGKILL)`).
    pub last_exit: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClusterState {
    pub name: String,
    pub supervisor_pid: u32,
    /// The supervisor's start time (see `supervisor::process_start_time`), to tell it from a
    /// later process that got the same pid.
    pub supervisor_start: Option<u64>,
    #[serde(flatten)]
    pub phase: Phase,
    /// Start-up progress of the current stage: (done, total).
    pub progress: (u64, u64),
    pub components: Vec<ComponentState>,
}

impl ClusterState {
    pub fn read(dir: &Path) -> anyhow::Result<Option<ClusterState>> {
        let path = dir.join(STATE_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => Ok(Some(
                serde_json::from_slice(&bytes)
                    .with_context(|| format!("reading {}", path.display()))?,
            )),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }

    /// Writes to a temporary file and renames it over the old one, so readers never see half.
    pub fn write(&self, dir: &Path) -> anyhow::Result<()> {
        let tmp = dir.join(format!("{STATE_FILE}.tmp"));
        std::fs::write(&tmp, serde_json::to_vec_pretty(self)?)?;
        std::fs::rename(&tmp, dir.join(STATE_FILE))?;
        for c in &self.components {
            let pid_file = dir.join("pids").join(format!("{}.pid", c.name));
            match c.pid {
                Some(pid) => std::fs::write(pid_file, format!("{pid}\n"))?,
                None => {
                    let _ = std::fs::remove_file(pid_file);
                }
            }
        }
        Ok(())
    }
}

/// The pid of component `name` of the cluster in `dir` now (it changes with every restart),
/// checked to be a live process of that cluster.
pub fn live_pid(dir: &Path, name: &str) -> anyhow::Result<u32> {
    let state = ClusterState::read(dir)?.context("the state file is gone")?;
    let component = state
        .components
        .iter()
        .find(|c| c.name == name)
        .with_context(|| format!("no component {name}"))?;
    let pid = component
        .pid
        .with_context(|| format!("{name} is not running"))?;
    if !pid_is_ours(pid, &dir.display().to_string()) {
        anyhow::bail!("pid {pid} of {name} is not a process of this cluster");
    }
    Ok(pid)
}

/// Whether `pid` is a live process running a command line that mentions `needle` (the cluster
/// directory): a pid recycled by an unrelated process does not count.
pub fn pid_is_ours(pid: u32, needle: &str) -> bool {
    match std::fs::read(format!("/proc/{pid}/cmdline")) {
        Ok(cmdline) => {
            let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            // A zombie has an empty command line: it is dead.
            !text.is_empty() && text.contains(needle)
        }
        Err(_) => false,
    }
}
