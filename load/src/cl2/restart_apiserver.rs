//! clusterloader2's RestartApiserver: one API server, picked at random, is taken down for
//! `downSeconds` (default 30) and started again, then the call waits up to `readyTimeout`
//! (default 10m) for `/readyz` to answer 200, polling every 2 s. clusterloader2 moves the
//! static pod's manifest aside and back over SSH, so the kubelet stops the server and starts a
//! new one that rebuilds its watch caches; kemu stops the process (SIGSTOP: it answers nothing)
//! for `downSeconds`, then kills it, and the supervisor starts a new one at once. It needs the
//! cluster's processes (a kemu cluster directory on this machine); without them it is not
//! computed. There is no summary; a server not ready in time fails it.

use std::time::Duration;

use cluster::layout::Kind;
use hyper::Method;
use nix::sys::signal::Signal;
use rand::Rng;
use serde_json::json;
use tokio::time::Instant;

use super::measurements::{
    param_duration, param_str, MeasurementResult, Measurements, Params, Verdict,
};
use crate::client::ApiClient;

/// How often `/readyz` is asked, and how long one ask may take.
const POLL: Duration = Duration::from_secs(2);

/// Whether `client`'s server answers `/readyz` with 200 within [`POLL`].
async fn ready(client: &ApiClient) -> bool {
    let asked = client.call(
        "get",
        "readyz",
        Method::GET,
        "/readyz",
        None,
        Default::default(),
    );
    matches!(
        tokio::time::timeout(POLL, asked).await,
        Ok(Ok(r)) if r.status.as_u16() == 200
    )
}

fn send(pid: u32, signal: Signal) -> Result<(), String> {
    cluster::process::signal_pid(pid, signal).map_err(|e| format!("{e:#}"))
}

/// A stopped server resumed if the call ends before it is killed (the run interrupted while
/// the server is down), so that it stops like the rest of the cluster.
struct Stopped(Option<u32>);

impl Drop for Stopped {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            let _ = send(pid, Signal::SIGCONT);
        }
    }
}

impl Measurements {
    /// RestartApiserver: one API server down for `downSeconds`, then ready again.
    pub(super) async fn restart_apiserver(
        &self,
        params: &Params,
        result: &mut MeasurementResult,
    ) -> Result<(), String> {
        let down = match param_str(params, "downSeconds") {
            None => 30,
            Some(s) => s
                .parse::<u64>()
                .map_err(|_| format!("downSeconds: not a whole number of seconds: {s:?}"))?,
        };
        let ready_timeout = param_duration(params, "readyTimeout", Duration::from_secs(600))?;
        let cluster = self.context.cluster.as_ref();
        let (Some(cluster), Some(dir)) = (cluster, cluster.and_then(|c| c.dir.as_ref())) else {
            result.verdict = Verdict::NotComputed(
                "restarting an API server needs the cluster's processes (a kemu cluster \
                 directory on this machine)"
                    .into(),
            );
            return Ok(());
        };
        let servers: Vec<&str> = cluster
            .of_kind(Kind::Apiserver)
            .map(|c| c.name.as_str())
            .collect();
        if servers.is_empty() {
            return Err("the cluster has no API server process".into());
        }
        let name = servers[rand::thread_rng().gen_range(0..servers.len())];
        let pid = cluster::state::live_pid(dir, name).map_err(|e| format!("{e:#}"))?;
        tracing::info!(server = name, pid, down, "stopping an API server");
        send(pid, Signal::SIGSTOP)?;
        let mut stopped = Stopped(Some(pid));
        tokio::time::sleep(Duration::from_secs(down)).await;
        // Killed, the stopped process goes; the supervisor starts its successor.
        send(pid, Signal::SIGKILL)?;
        stopped.0 = None;
        let started = Instant::now();
        // Every API server this run reaches, the restarted one among them, answers /readyz.
        let clients: Vec<&ApiClient> = std::iter::once(&self.objects.client)
            .chain(&self.context.other_api_servers)
            .collect();
        loop {
            let answers = futures::future::join_all(clients.iter().map(|c| ready(c))).await;
            let restarted = cluster::state::live_pid(dir, name).is_ok_and(|p| p != pid);
            if restarted && answers.iter().all(|ok| *ok) {
                break;
            }
            if started.elapsed() >= ready_timeout {
                return Err(format!(
                    "readyz wait on {name}: not ready within {}s",
                    ready_timeout.as_secs()
                ));
            }
            tokio::time::sleep(POLL).await;
        }
        let back = started.elapsed().as_secs_f64();
        tracing::info!(server = name, seconds = back, "the API server is back");
        result.details = json!({
            "server": name,
            "down_seconds": down,
            "ready_after_start_seconds": back,
        });
        Ok(())
    }
}
