//! `kemu status`: the cluster's components (host, pid, state, restarts), the store's leader and
//! term, nodes Ready/total and pods by phase, as a table or JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use serde::Serialize;

use crate::layout::Layout;
use crate::netns::{self, NetAccess};
use crate::probe::{self, MemberView};
use crate::state::{pid_is_ours, ClusterState, ComponentPhase, Phase};

/// How `kemu status` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    Table,
    Json,
}

#[derive(Serialize)]
pub struct StatusReport {
    pub name: String,
    pub dir: String,
    /// `running`, `starting`, `stopped`, `failed`, or `dead` (the supervisor is gone).
    pub phase: String,
    pub detail: Option<String>,
    pub supervisor_pid: Option<u32>,
    pub mode: String,
    pub hosts: Vec<HostRow>,
    pub components: Vec<ComponentRow>,
    pub store: StoreRow,
    pub nodes: Option<NodesRow>,
    pub pods: Option<BTreeMap<String, u64>>,
    pub kubeconfig: String,
}

#[derive(Serialize)]
pub struct HostRow {
    pub name: String,
    pub address: String,
    pub netns: Option<String>,
}

#[derive(Serialize)]
pub struct ComponentRow {
    pub name: String,
    pub kind: String,
    pub host: String,
    pub address: String,
    pub pid: Option<u32>,
    pub state: String,
    pub restarts: u32,
}

#[derive(Serialize)]
pub struct StoreRow {
    pub leader: Option<String>,
    pub term: Option<u64>,
    pub members: Vec<MemberView>,
}

#[derive(Serialize)]
pub struct NodesRow {
    pub ready: u64,
    pub total: u64,
}

/// Gathers the status of the cluster in `dir`.
pub async fn gather(dir: &Path) -> anyhow::Result<StatusReport> {
    let layout = Layout::read(dir)?;
    let state = ClusterState::read(dir)?;
    let supervisor_alive = state.as_ref().is_some_and(|s| {
        crate::supervisor::process_start_time(s.supervisor_pid).is_some()
            && crate::supervisor::process_start_time(s.supervisor_pid) == s.supervisor_start
    });
    let (phase, detail) = match state.as_ref().map(|s| &s.phase) {
        None => ("created".to_string(), None),
        Some(Phase::Stopped) => ("stopped".into(), None),
        Some(_) if !supervisor_alive => ("dead".into(), Some("the supervisor is gone".into())),
        Some(Phase::Running) => ("running".into(), None),
        Some(Phase::Starting(w)) => ("starting".into(), Some(w.clone())),
        Some(Phase::Stopping) => ("stopping".into(), None),
        Some(Phase::Failed(w)) => ("failed".into(), Some(w.clone())),
    };
    let needle = layout.dir.display().to_string();
    let components: Vec<ComponentRow> = layout
        .components
        .iter()
        .map(|c| {
            let s = state
                .as_ref()
                .and_then(|s| s.components.iter().find(|x| x.name == c.name));
            let pid = s.and_then(|s| s.pid).filter(|&p| pid_is_ours(p, &needle));
            let st = match (s.map(|s| &s.state), pid) {
                (Some(ComponentPhase::Running), Some(_)) => "running",
                (Some(ComponentPhase::Running), None) => "dead",
                (Some(ComponentPhase::Restarting), _) => "restarting",
                (Some(ComponentPhase::Stopped), _) => "stopped",
                _ => "pending",
            };
            ComponentRow {
                name: c.name.clone(),
                kind: c.kind.as_str().into(),
                host: c.host.clone(),
                address: c
                    .addresses
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                pid,
                state: st.into(),
                restarts: s.map(|s| s.restarts).unwrap_or(0),
            }
        })
        .collect();
    let any_running = components.iter().any(|c| c.pid.is_some());
    let reachable = layout.bridge.is_none() || !netns::existing(&layout).is_empty();
    let (store, nodes, pods) = if any_running && reachable {
        match NetAccess::for_layout(&layout) {
            Ok(net) => {
                let endpoints: Vec<_> = layout
                    .components
                    .iter()
                    .filter(|c| c.addresses.contains_key("client"))
                    .map(|c| (c.name.clone(), c.addresses["client"]))
                    .collect();
                let n = endpoints.len();
                let members = probe::store_members(&net, layout.certs.clone(), endpoints).await;
                let agreed = probe::agreed_leader(&members, n);
                let api = layout.api_http[0];
                let nodes = probe::nodes_ready(&net, &layout.certs, api)
                    .await
                    .map(|(ready, total)| NodesRow { ready, total });
                let pods = probe::pods_by_phase(&net, &layout.certs, api).await;
                (
                    StoreRow {
                        leader: agreed.as_ref().map(|(l, _)| l.clone()),
                        term: agreed.map(|(_, t)| t),
                        members,
                    },
                    nodes,
                    pods,
                )
            }
            Err(_) => (empty_store(), None, None),
        }
    } else {
        (empty_store(), None, None)
    };
    Ok(StatusReport {
        name: layout.name.clone(),
        dir: layout.dir.display().to_string(),
        phase,
        detail,
        supervisor_pid: state
            .as_ref()
            .filter(|_| supervisor_alive)
            .map(|s| s.supervisor_pid),
        mode: format!("{:?}", layout.mode).to_lowercase(),
        hosts: layout
            .hosts
            .iter()
            .map(|h| HostRow {
                name: h.name.clone(),
                address: h.address.to_string(),
                netns: h.netns.clone(),
            })
            .collect(),
        components,
        store,
        nodes,
        pods,
        kubeconfig: layout.kubeconfig.display().to_string(),
    })
}

fn empty_store() -> StoreRow {
    StoreRow {
        leader: None,
        term: None,
        members: Vec::new(),
    }
}

pub async fn run(dir: &Path, output: Output) -> anyhow::Result<ExitCode> {
    let report = gather(dir).await?;
    match output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        Output::Table => print!("{}", table(&report)),
    }
    Ok(ExitCode::SUCCESS)
}

fn table(r: &StatusReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "cluster {} ({}, {} mode){}",
        r.name,
        r.phase,
        r.mode,
        r.detail
            .as_ref()
            .map(|d| format!(": {d}"))
            .unwrap_or_default()
    );
    let rows: Vec<[String; 7]> = r
        .components
        .iter()
        .map(|c| {
            let host = r
                .hosts
                .iter()
                .find(|h| h.name == c.host)
                .map(|h| format!("{} ({})", h.name, h.address))
                .unwrap_or_else(|| c.host.clone());
            [
                c.name.clone(),
                c.kind.clone(),
                host,
                c.pid.map(|p| p.to_string()).unwrap_or_else(|| "-".into()),
                c.state.clone(),
                c.restarts.to_string(),
                c.address.clone(),
            ]
        })
        .collect();
    let header = [
        "NAME",
        "KIND",
        "HOST",
        "PID",
        "STATE",
        "RESTARTS",
        "ADDRESSES",
    ];
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: Vec<&str>| {
        cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let _ = writeln!(out, "{}", line(header.to_vec()));
    for row in &rows {
        let _ = writeln!(out, "{}", line(row.iter().map(String::as_str).collect()));
    }
    match (&r.store.leader, r.store.term) {
        (Some(l), Some(t)) => {
            let _ = writeln!(
                out,
                "store: leader {l}, term {t}, {}/{} members answering",
                r.store.members.len(),
                r.components.iter().filter(|c| c.kind == "store").count()
            );
        }
        _ => {
            let _ = writeln!(out, "store: no leader agreed");
        }
    }
    match &r.nodes {
        Some(n) => {
            let _ = writeln!(out, "nodes: {}/{} Ready", n.ready, n.total);
        }
        None => {
            let _ = writeln!(out, "nodes: API server not reachable");
        }
    }
    if let Some(pods) = &r.pods {
        let by: Vec<String> = pods.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let total: u64 = pods.values().sum();
        let _ = writeln!(
            out,
            "pods: {total}{}",
            if by.is_empty() {
                String::new()
            } else {
                format!(" ({})", by.join(", "))
            }
        );
    }
    let _ = writeln!(out, "export KUBECONFIG={}", r.kubeconfig);
    out
}
