//! What a clusterloader2 run knows of a kemu cluster's processes beyond its API: each
//! component's pid (resource usage) and `/metrics` address (the store members' etcd metrics,
//! the scheduler's), and every API server's URL (API responsiveness over all of them). Read
//! from a cluster directory (`kemu run`, `kemu load --dir`); a run against a bare kubeconfig
//! has none, and the measurements that need it are reported as not computed.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cluster::layout::{Kind, Layout};
use cluster::netns::NetAccess;
use cluster::state::ClusterState;

/// One process of the cluster.
#[derive(Clone, Debug)]
pub struct Component {
    pub name: String,
    pub kind: Kind,
    pub pid: Option<u32>,
    /// Where it serves `/metrics` over plain HTTP (store members, schedulers, controller
    /// managers, node hosts); API servers serve theirs on their HTTPS front.
    pub metrics: Option<SocketAddr>,
}

impl Component {
    /// The container name clusterloader2 reports the process as (kube-system's control plane
    /// containers); node hosts keep their own.
    pub fn container(&self) -> &'static str {
        match self.kind {
            Kind::Store => "etcd",
            Kind::Apiserver => "kube-apiserver",
            Kind::Controllers => "kube-controller-manager",
            Kind::Scheduler => "kube-scheduler",
            Kind::Nodehost => "kemu-node-host",
        }
    }
}

/// The cluster's processes and API servers.
#[derive(Clone, Default)]
pub struct ClusterView {
    pub components: Vec<Component>,
    /// Every API server's URL other than the kubeconfig's, when this machine reaches them.
    pub other_api_servers: Vec<String>,
    /// netns mode: the way into the hosts' network, where the components' `/metrics` are.
    pub net: Option<Arc<NetAccess>>,
    /// The cluster directory (its state file has each process's pid now).
    pub dir: Option<PathBuf>,
}

impl std::fmt::Debug for ClusterView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterView")
            .field("components", &self.components)
            .field("other_api_servers", &self.other_api_servers)
            .field("netns", &self.net.is_some())
            .finish()
    }
}

impl ClusterView {
    /// The cluster in `dir` (its layout and the supervisor's `state.json`); `None` when the
    /// directory holds no started cluster.
    pub fn from_cluster_dir(dir: &Path) -> anyhow::Result<Option<ClusterView>> {
        let Some(state) = ClusterState::read(dir)? else {
            return Ok(None);
        };
        let layout = Layout::read(dir).ok();
        let components = state
            .components
            .iter()
            .map(|c| Component {
                name: c.name.clone(),
                kind: c.kind,
                pid: c.pid,
                metrics: c.addresses.get("metrics").copied(),
            })
            .collect();
        // Behind a forwarded port (network namespaces) only the first API server is reached.
        let other_api_servers = match &layout {
            Some(l) if l.api_forward.is_none() => {
                let first = l.api_url();
                l.api_http
                    .iter()
                    .map(|a| format!("https://{a}"))
                    .filter(|url| *url != first)
                    .collect()
            }
            _ => Vec::new(),
        };
        // In netns mode the components listen inside the hosts' network: scrapes go through
        // the bridge namespace (root, as the cluster itself needs).
        let net = match &layout {
            Some(l) if l.bridge.is_some() => match NetAccess::for_layout(l) {
                Ok(net) => Some(Arc::new(net)),
                Err(e) => {
                    tracing::warn!("the components' /metrics cannot be reached: {e:#}");
                    None
                }
            },
            _ => None,
        };
        Ok(Some(ClusterView {
            components,
            other_api_servers,
            net,
            dir: Some(dir.to_path_buf()),
        }))
    }

    /// A component's `/metrics` text, reached where the component listens.
    pub async fn scrape(&self, addr: SocketAddr) -> Result<String, String> {
        match &self.net {
            None => scrape(addr).await,
            Some(net) => net
                .run(scrape(addr))
                .await
                .unwrap_or_else(|e| Err(format!("{addr}/metrics: {e:#}"))),
        }
    }

    pub fn of_kind(&self, kind: Kind) -> impl Iterator<Item = &Component> {
        self.components.iter().filter(move |c| c.kind == kind)
    }
}

/// A component's `/metrics` text.
pub async fn scrape(addr: SocketAddr) -> Result<String, String> {
    match cluster::process::http_get(addr, "/metrics").await {
        Ok((200, body)) => Ok(body),
        Ok((code, _)) => Err(format!("{addr}/metrics answered {code}")),
        Err(e) => Err(format!("{addr}/metrics: {e:#}")),
    }
}
