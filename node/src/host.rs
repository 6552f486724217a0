//! [`run`]: one node host — an actix system on its own thread carrying N [`Kubelet`] actors
//! over one shared [`api::Client`] connection, plus the log service the API server's `pods/log`
//! asks, and optional metrics and health endpoints (`apiserver-connection`, `nodes-registered`).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use actix::{Actor, Addr};
use api::client::{Client, ClientConfig, ClientError};
use api::event_sink::EventSink;
use telemetry::Telemetry;
use tracing::{info, warn};
use transport::rpc::RpcServer;
use transport::tls::TlsIdentity;
use transport::{Endpoint, TransportError};

use crate::config::{ConfigError, NodeHostConfig};
use crate::kubelet::{Kubelet, Shared};
use crate::logs::{LogService, LogStore};
use crate::metrics::Metrics;
use crate::volume_sources::VolumeSources;

/// Why a node host could not run.
#[derive(Debug, thiserror::Error)]
pub enum NodeHostError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("API client: {0}")]
    Client(#[from] ClientError),
    #[error("log service: {0}")]
    Transport(#[from] TransportError),
    #[error("metrics and health endpoint: {0}")]
    Metrics(#[from] telemetry::ServeError),
    #[error("the node host thread failed: {0}")]
    Thread(String),
}

/// Runs a node host until `shutdown` fires (or its sender is dropped). Blocks the calling
/// thread: the kubelets live in an actix system on a thread of their own.
pub fn run_blocking(
    config: NodeHostConfig,
    client: ClientConfig,
    metrics_addr: Option<SocketAddr>,
    shutdown: tokio::sync::oneshot::Receiver<()>,
) -> Result<(), NodeHostError> {
    let thread = std::thread::Builder::new()
        .name("node-host".into())
        .spawn(move || {
            actix_rt::System::new().block_on(run(config, client, metrics_addr, shutdown))
        })
        .map_err(|e| NodeHostError::Thread(e.to_string()))?;
    thread
        .join()
        .map_err(|_| NodeHostError::Thread("panicked".into()))?
}

/// The node host inside a running actix system.
pub async fn run(
    config: NodeHostConfig,
    client_config: ClientConfig,
    metrics_addr: Option<SocketAddr>,
    shutdown: tokio::sync::oneshot::Receiver<()>,
) -> Result<(), NodeHostError> {
    config.validate()?;
    let addressing = config.addressing()?;
    client_config.validate()?;
    let identity = TlsIdentity::load(&client_config.certs_dir, &client_config.identity)?;
    let client = Client::with_identity(client_config, &identity)?;
    // The name the API server knows this host by, and labels its Nodes with.
    let host_name = identity.name().to_string();

    let logs = Arc::new(LogStore::default());
    let server = RpcServer::bind(config.logs_addr, &identity)?;
    let bound = server.local_addr()?;
    let advertised = config.logs_advertise.clone().unwrap_or_else(|| {
        Endpoint::from(if bound.ip().is_unspecified() {
            SocketAddr::from(([127, 0, 0, 1], bound.port()))
        } else {
            bound
        })
    });
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut stopped = stop_rx.clone();
    let log_service = LogService {
        store: logs.clone(),
    };
    actix_rt::spawn(server.serve(Arc::new(log_service), async move {
        let _ = stopped.wait_for(|s| *s).await;
    }));

    let telemetry = Telemetry::new();
    let metrics = Metrics::new(&telemetry.metrics);
    let api = client.clone();
    telemetry
        .health
        .readiness("apiserver-connection", move || match api.connected_to() {
            Some(_) => Ok(()),
            None => Err("not connected to an API server".to_string()),
        });
    let (registered, nodes) = (metrics.clone(), config.nodes as u64);
    telemetry.health.readiness("nodes-registered", move || {
        let done = registered.nodes_registered.load(Ordering::Relaxed);
        if done >= nodes {
            Ok(())
        } else {
            Err(format!("{done} of {nodes} nodes registered"))
        }
    });
    if let Some(addr) = metrics_addr {
        let listener = telemetry::bind(addr).await?;
        let mut stopped = stop_rx.clone();
        actix_rt::spawn(async move {
            let shutdown = async move {
                let _ = stopped.wait_for(|s| *s).await;
            };
            if let Err(e) = telemetry.serve(listener, shutdown).await {
                warn!(error = %e, "metrics endpoint failed");
            }
        });
    }

    let events = EventSink::start(client.clone(), metrics.event_sink.clone());
    let shared = Arc::new(Shared {
        volume_sources: VolumeSources::new(client.clone()),
        client,
        events,
        profile: Arc::new(config.runtime.clone()),
        failing_images: Arc::new(config.failing_image_patterns.clone()),
        startup: Arc::new(tokio::sync::Semaphore::new(config.startup_concurrency)),
        config: Arc::new(config),
        addressing,
        logs,
        metrics,
        logs_addr: advertised.to_string(),
        event_seq: AtomicU64::new(0),
        tick_epoch: std::time::Instant::now(),
    });
    let seed = shared.config.seed.unwrap_or_else(rand::random);
    info!(
        nodes = shared.config.nodes,
        first = %shared.config.node_name(0),
        logs = %advertised,
        "node host starting"
    );
    let kubelets: Vec<Addr<Kubelet>> = (0..shared.config.nodes)
        .map(|i| Kubelet::new(shared.clone(), i, seed).start())
        .collect();
    actix_rt::spawn(crate::own_nodes::watch(
        shared.client.clone(),
        host_name,
        shared.config.name_prefix.clone(),
        shared.config.first_index,
        kubelets.clone(),
    ));

    if shutdown.await.is_err() {
        warn!("shutdown sender dropped; stopping");
    }
    info!("node host stopping");
    let _ = stop_tx.send(true);
    drop(kubelets);
    actix_rt::System::current().stop();
    Ok(())
}
