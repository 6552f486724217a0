//! Counters of the controller manager and the tiny HTTP endpoint that serves them
//! (`/metrics` in Prometheus' text format, `/healthz`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tracing::{debug, info};

use crate::worker::{stopped, Shutdown};

#[derive(Clone, Copy, Debug, Default)]
struct Counts {
    reconciles: u64,
    errors: u64,
}

/// Shared counters; cheap to clone.
#[derive(Clone, Default)]
pub struct Metrics {
    counts: Arc<Mutex<BTreeMap<&'static str, Counts>>>,
    leader: Arc<AtomicBool>,
}

impl Metrics {
    pub fn reconciled(&self, controller: &'static str, ok: bool) {
        let mut counts = self.counts.lock();
        let c = counts.entry(controller).or_default();
        c.reconciles += 1;
        if !ok {
            c.errors += 1;
        }
    }

    pub fn set_leader(&self, leader: bool) {
        self.leader.store(leader, Ordering::Relaxed);
    }

    /// Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        out.push_str("# TYPE kemu_controller_reconciles_total counter\n");
        let counts = self.counts.lock();
        for (name, c) in counts.iter() {
            out.push_str(&format!(
                "kemu_controller_reconciles_total{{controller=\"{name}\"}} {}\n",
                c.reconciles
            ));
        }
        out.push_str("# TYPE kemu_controller_reconcile_errors_total counter\n");
        for (name, c) in counts.iter() {
            out.push_str(&format!(
                "kemu_controller_reconcile_errors_total{{controller=\"{name}\"}} {}\n",
                c.errors
            ));
        }
        out.push_str("# TYPE kemu_controller_manager_leader gauge\n");
        out.push_str(&format!(
            "kemu_controller_manager_leader {}\n",
            u8::from(self.leader.load(Ordering::Relaxed))
        ));
        out
    }
}

/// Serves `/metrics` and `/healthz` on `addr` until `shutdown`.
pub async fn serve(
    addr: SocketAddr,
    metrics: Metrics,
    mut shutdown: Shutdown,
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    info!(addr = %listener.local_addr()?, "serving metrics");
    loop {
        let (mut socket, _) = tokio::select! {
            biased;
            () = stopped(&mut shutdown) => return Ok(()),
            accepted = listener.accept() => accepted?,
        };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 2048];
            let n = socket.read(&mut buf).await.unwrap_or(0);
            let request = String::from_utf8_lossy(&buf[..n]);
            let path = request.split_whitespace().nth(1).unwrap_or("/");
            let (status, body) = match path {
                "/metrics" => ("200 OK", metrics.render()),
                "/healthz" | "/readyz" | "/livez" => ("200 OK", "ok".to_string()),
                _ => ("404 Not Found", "not found\n".to_string()),
            };
            let response = format!(
                "HTTP/1.1 {status}\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            if let Err(e) = socket.write_all(response.as_bytes()).await {
                debug!(error = %e, "metrics client went away");
            }
        });
    }
}
