//! `kemu node-host`: N emulated kubelets in one process until SIGTERM/Ctrl-C.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use api::client::ClientConfig;
use clap::Args;
use node::config::{NodeHostConfig, RuntimeProfile};

#[derive(Args, Debug)]
pub struct NodeHostArgs {
    /// QUIC addresses of the API servers' component fronts, comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    apiserver: Vec<SocketAddr>,
    /// Directory with `ca.crt` and this node host's certificate.
    #[arg(long)]
    certs: PathBuf,
    /// Which certificate in `--certs` to present (organization `system:nodes`).
    #[arg(long, default_value = "nodehost-1")]
    identity: String,
    /// Number of emulated nodes.
    #[arg(long)]
    nodes: Option<usize>,
    /// Node names are `<prefix><index>`.
    #[arg(long)]
    name_prefix: Option<String>,
    /// Cluster-wide index of this host's first node (keeps pod CIDRs unique across hosts);
    /// by default derived from a trailing number in `--identity` (`nodehost-2` → nodes × 1).
    #[arg(long)]
    first_index: Option<usize>,
    /// TOML file with the node shape and runtime profile (see `node::config`).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Runtime latency profile: `realistic` or `instant` (overrides the config file).
    #[arg(long)]
    runtime: Option<String>,
    /// Directory of static pod manifests (`<dir>/*.yaml` for every node, `<dir>/<node>/`).
    #[arg(long)]
    static_pods: Option<PathBuf>,
    /// Where to serve container logs to the API server (QUIC).
    #[arg(long)]
    logs_addr: Option<SocketAddr>,
    /// Where to serve Prometheus metrics.
    #[arg(long)]
    metrics_addr: Option<SocketAddr>,
}

pub async fn run(args: NodeHostArgs) -> anyhow::Result<ExitCode> {
    let mut config = match &args.config {
        Some(path) => NodeHostConfig::from_file(path)?,
        None => NodeHostConfig::default(),
    };
    if let Some(n) = args.nodes {
        config.nodes = n;
    }
    if let Some(p) = args.name_prefix {
        config.name_prefix = p;
    }
    config.first_index = match args.first_index {
        Some(i) => i,
        None => host_number(&args.identity).map_or(0, |k| k.saturating_sub(1) * config.nodes),
    };
    if let Some(name) = &args.runtime {
        config.runtime = RuntimeProfile::named(name)
            .with_context(|| format!("unknown runtime profile {name:?}"))?;
    }
    if let Some(dir) = args.static_pods {
        config.static_pod_dir = Some(dir);
    }
    if let Some(addr) = args.logs_addr {
        config.logs_addr = addr;
    }
    config.validate()?;
    let client = ClientConfig::new(args.apiserver, &args.certs, &args.identity);
    let (stop, stopped) = tokio::sync::oneshot::channel();
    let host = tokio::task::spawn_blocking(move || {
        node::host::run_blocking(config, client, args.metrics_addr, stopped)
    });
    tokio::pin!(host);
    tokio::select! {
        biased;
        () = cluster::shutdown::signal() => {
            let _ = stop.send(());
            host.await.context("node host")?.context("node host")?;
        }
        result = &mut host => result.context("node host")?.context("node host")?,
    }
    Ok(ExitCode::SUCCESS)
}

/// The trailing number of a node host's name (`nodehost-2` → 2).
fn host_number(identity: &str) -> Option<usize> {
    let digits: String = identity
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn host_numbers() {
        assert_eq!(super::host_number("nodehost-2"), Some(2));
        assert_eq!(super::host_number("nodehost"), None);
    }
}
