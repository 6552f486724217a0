//! `kemu controllers`: runs the controller manager until SIGTERM/Ctrl-C (or until it loses
//! its leader lease, which ends the process as kube-controller-manager does).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use api::client::ClientConfig;
use clap::Args;
use controllers::manager::ControllerManagerConfig;
use transport::Endpoint;

#[derive(Args, Debug)]
pub struct ControllersArgs {
    /// QUIC component fronts of the API servers, comma-separated: `IP:PORT` or `HOST:PORT`
    /// (resolved at each connect).
    #[arg(long, value_delimiter = ',', required = true)]
    apiserver: Vec<Endpoint>,
    /// Directory with `ca.crt` and this component's certificate.
    #[arg(long)]
    certs: PathBuf,
    /// Which certificate in `--certs` to present.
    #[arg(long, default_value = "controllers")]
    identity: String,
    /// Serve `/metrics` and `/healthz` here.
    #[arg(long)]
    metrics_addr: Option<SocketAddr>,
    /// Concurrent reconciles per controller.
    #[arg(long, default_value_t = 5)]
    workers: usize,
    /// Seconds without a heartbeat before a node is Unknown and tainted unreachable.
    #[arg(long, default_value_t = 50)]
    node_monitor_grace_secs: u64,
    /// Seconds between looks at every node.
    #[arg(long, default_value_t = 5)]
    node_monitor_period_secs: u64,
    /// Seconds between full recomputations of every ResourceQuota's usage (events trigger
    /// one as well).
    #[arg(long, default_value_t = 300)]
    resource_quota_sync_period_secs: u64,
    /// Seconds between looks at every HorizontalPodAutoscaler.
    #[arg(long, default_value_t = 15)]
    horizontal_pod_autoscaler_sync_period_secs: u64,
    /// The scale-down stabilization window of autoscalers without a `behavior`, in seconds.
    #[arg(long, default_value_t = 300)]
    horizontal_pod_autoscaler_downscale_stabilization_secs: u64,
    /// Milliseconds the emulated CSI driver takes to create or delete a volume.
    #[arg(long, default_value_t = 0)]
    volume_provision_latency_ms: u64,
    /// Milliseconds the emulated CSI driver takes to grow a volume.
    #[arg(long, default_value_t = 0)]
    volume_resize_latency_ms: u64,
    /// Milliseconds the emulated CSI driver takes to attach a volume to a node or detach it.
    #[arg(long, default_value_t = 0)]
    volume_attach_latency_ms: u64,
    /// What the emulated CSI driver can provision on each node (a quantity, e.g. `100Gi`);
    /// published as CSIStorageCapacity objects. Unset: no limit.
    #[arg(long)]
    volume_node_capacity: Option<String>,
    /// The share of the emulated driver's provisioning attempts that fail (0 to 1).
    #[arg(long, default_value_t = 0.0)]
    volume_provision_failure_rate: f64,
    /// The share of the emulated driver's attach attempts that fail (0 to 1).
    #[arg(long, default_value_t = 0.0)]
    volume_attach_failure_rate: f64,
    /// Do not create the default StorageClass `standard` at start.
    #[arg(long)]
    no_default_storage_class: bool,
    /// volumeBindingMode of the default StorageClass: Immediate or WaitForFirstConsumer.
    #[arg(long, default_value = "Immediate")]
    default_storage_class_binding_mode: String,
    /// Run without leader election (a single controller manager).
    #[arg(long)]
    no_leader_elect: bool,
}

pub async fn run(args: ControllersArgs) -> anyhow::Result<ExitCode> {
    let client = ClientConfig::new(args.apiserver, &args.certs, args.identity);
    let mut config = ControllerManagerConfig::new(client);
    config.metrics_addr = args.metrics_addr;
    config.workers = args.workers;
    config.leader_elect = !args.no_leader_elect;
    config.node_lifecycle.grace_period = Duration::from_secs(args.node_monitor_grace_secs);
    config.node_lifecycle.monitor_period = Duration::from_secs(args.node_monitor_period_secs);
    config.quota_resync = Duration::from_secs(args.resource_quota_sync_period_secs);
    config.horizontal.sync_period =
        Duration::from_secs(args.horizontal_pod_autoscaler_sync_period_secs);
    config.horizontal.downscale_window =
        Duration::from_secs(args.horizontal_pod_autoscaler_downscale_stabilization_secs);
    config.volumes.provision_latency = Duration::from_millis(args.volume_provision_latency_ms);
    config.volumes.resize_latency = Duration::from_millis(args.volume_resize_latency_ms);
    config.volumes.attach_latency = Duration::from_millis(args.volume_attach_latency_ms);
    config.volumes.node_capacity = args
        .volume_node_capacity
        .as_deref()
        .map(api::quantity::Quantity::parse)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--volume-node-capacity: {e}"))?;
    config.volumes.provision_failure_rate = args.volume_provision_failure_rate;
    config.volumes.attach_failure_rate = args.volume_attach_failure_rate;
    config.volumes.default_class = !args.no_default_storage_class;
    config.volumes.default_binding_mode = args.default_storage_class_binding_mode;
    controllers::manager::run(config, cluster::shutdown::signal())
        .await
        .context("controller manager")?;
    Ok(ExitCode::SUCCESS)
}
