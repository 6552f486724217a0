//! `kemu node-host`: N emulated kubelets in one process until SIGTERM/Ctrl-C.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use api::client::ClientConfig;
use clap::Args;
use node::config::{NodeHostConfig, RuntimeProfile};
use transport::Endpoint;

#[derive(Args, Debug)]
pub struct NodeHostArgs {
    /// QUIC addresses of the API servers' component fronts, comma-separated: `IP:PORT` or
    /// `HOST:PORT` (resolved at each connect).
    #[arg(long, value_delimiter = ',', required = true)]
    apiserver: Vec<Endpoint>,
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
    /// Take the host's ordinal, counted from 0, from the trailing number of `--identity` (a
    /// StatefulSet pod's name: `kemu-nodehost-3` is host 3) and run nodes ordinal × nodes on.
    #[arg(long, conflicts_with = "first_index")]
    first_index_from_ordinal: bool,
    /// Where the nodes' pod ranges come from (kube-controller-manager's `--cluster-cidr`): one
    /// CIDR, or an IPv4 and an IPv6 one for dual-stack (`10.128.0.0/9,fd00:10::/48`).
    #[arg(long)]
    cluster_cidr: Option<String>,
    /// Prefix length of each node's pod range, single-stack (default 24 for IPv4, 64 for IPv6).
    #[arg(long)]
    node_cidr_mask_size: Option<u8>,
    /// Prefix length of each node's IPv4 pod range (dual-stack).
    #[arg(long)]
    node_cidr_mask_size_ipv4: Option<u8>,
    /// Prefix length of each node's IPv6 pod range (dual-stack).
    #[arg(long)]
    node_cidr_mask_size_ipv6: Option<u8>,
    /// Where the nodes' InternalIPs come from: one CIDR per family (default 100.64.0.0/10).
    #[arg(long)]
    node_ip_cidr: Option<String>,
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
    /// Where the API server reaches `--logs-addr`, when it listens on a wildcard address:
    /// `IP:PORT` or `HOST:PORT` (a name must be in this node host's certificate).
    #[arg(long)]
    logs_advertise: Option<Endpoint>,
    /// Where to serve Prometheus metrics.
    #[arg(long)]
    metrics_addr: Option<SocketAddr>,
}

pub async fn run(args: NodeHostArgs) -> anyhow::Result<ExitCode> {
    let config = configure(&args).map_err(cluster::supervisor::ConfigRejected)?;
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

/// The node host's config: the file's, overridden by the flags, checked.
fn configure(args: &NodeHostArgs) -> anyhow::Result<NodeHostConfig> {
    let mut config = match &args.config {
        Some(path) => NodeHostConfig::from_file(path)?,
        None => NodeHostConfig::default(),
    };
    if let Some(n) = args.nodes {
        config.nodes = n;
    }
    if let Some(p) = &args.name_prefix {
        config.name_prefix = p.clone();
    }
    config.first_index = match args.first_index {
        Some(i) => i,
        None if args.first_index_from_ordinal => {
            let ordinal = host_number(&args.identity).with_context(|| {
                format!(
                    "--first-index-from-ordinal: --identity {:?} does not end in a number",
                    args.identity
                )
            })?;
            ordinal.checked_mul(config.nodes).with_context(|| {
                format!(
                    "--first-index-from-ordinal: host {ordinal} × {} nodes overflows",
                    config.nodes
                )
            })?
        }
        None => host_number(&args.identity).map_or(0, |k| k.saturating_sub(1) * config.nodes),
    };
    if let Some(name) = &args.runtime {
        config.runtime = RuntimeProfile::named(name)
            .with_context(|| format!("unknown runtime profile {name:?}"))?;
    }
    if let Some(cidr) = &args.cluster_cidr {
        config.cluster_cidr = cidr.clone();
    }
    if let Some(cidr) = &args.node_ip_cidr {
        config.node_ip_cidr = cidr.clone();
    }
    for (flag, field) in [
        (args.node_cidr_mask_size, &mut config.node_cidr_mask_size),
        (
            args.node_cidr_mask_size_ipv4,
            &mut config.node_cidr_mask_size_ipv4,
        ),
        (
            args.node_cidr_mask_size_ipv6,
            &mut config.node_cidr_mask_size_ipv6,
        ),
    ] {
        if flag.is_some() {
            *field = flag;
        }
    }
    if let Some(dir) = &args.static_pods {
        config.static_pod_dir = Some(dir.clone());
    }
    if let Some(addr) = args.logs_addr {
        config.logs_addr = addr;
    }
    if let Some(endpoint) = &args.logs_advertise {
        config.logs_advertise = Some(endpoint.clone());
    }
    config.validate()?;
    Ok(config)
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
    use clap::Parser;

    #[test]
    fn host_numbers() {
        assert_eq!(super::host_number("nodehost-2"), Some(2));
        assert_eq!(super::host_number("nodehost"), None);
    }

    #[derive(Parser)]
    struct Command {
        #[command(flatten)]
        args: super::NodeHostArgs,
    }

    fn first_index(args: &[&str]) -> anyhow::Result<usize> {
        let mut all = vec![
            "node-host",
            "--apiserver",
            "localhost:6444",
            "--certs",
            "/c",
        ];
        all.extend_from_slice(args);
        let command = Command::try_parse_from(all)?;
        Ok(super::configure(&command.args)?.first_index)
    }

    #[test]
    fn first_index_from_a_statefulset_ordinal() {
        let ordinal = ["--first-index-from-ordinal", "--nodes", "10"];
        let mut args = ordinal.to_vec();
        args.extend(["--identity", "kemu-nodehost-3"]);
        assert_eq!(first_index(&args).expect("host 3"), 30);
        let mut args = ordinal.to_vec();
        args.extend(["--identity", "kemu-nodehost-0"]);
        assert_eq!(first_index(&args).expect("host 0"), 0);
        // Without the flag, `nodehost-K` counts from 1, as `kemu up` names them.
        assert_eq!(
            first_index(&["--nodes", "10", "--identity", "nodehost-3"]).expect("host 3"),
            20
        );
        let mut args = ordinal.to_vec();
        args.extend(["--identity", "hollow"]);
        let e = first_index(&args).expect_err("no ordinal").to_string();
        assert!(
            e.contains("--first-index-from-ordinal") && e.contains("\"hollow\""),
            "{e}"
        );
        let both = ["--first-index-from-ordinal", "--first-index", "5"];
        assert!(first_index(&both).is_err(), "the two conflict");
    }
}
