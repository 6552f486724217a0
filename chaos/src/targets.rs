//! What chaos acts on: a [`ChaosCluster`] names the store members and other components and can
//! signal, restart and cut them off. Three kinds: a cluster directory made by `kemu up`
//! ([`ClusterDirTarget`]: pids from its state file, restarts left to its supervisor), a
//! [`LocalStore`] of the benchmarks and tests ([`LocalStoreTarget`]), and a cluster `kemu
//! render` put on Kubernetes ([`crate::kubernetes::KubernetesTarget`]: pods deleted, restarts
//! left to their StatefulSets and Deployments).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use futures::future::BoxFuture;
use nix::sys::signal::Signal;
use store::client::{Client, ClientConfig};
use transport::Endpoint;

use cluster::api_access::{ApiAccess, ApiCredentials};
use cluster::layout::{Kind, Layout};
use cluster::netns;
use cluster::process::LocalStore;
use cluster::state::ClusterState;

/// A cluster chaos can act on.
pub trait ChaosCluster: Send + Sync {
    /// Store members: (name, client endpoint).
    fn store_members(&self) -> Vec<(String, Endpoint)>;
    /// Names of the components of `kind` now.
    fn components(&self, kind: Kind) -> BoxFuture<'_, Vec<String>>;
    /// Sends `signal` to component `name`.
    fn signal<'a>(&'a self, name: &'a str, signal: Signal) -> BoxFuture<'a, anyhow::Result<()>>;
    /// Starts a killed component again. `Ok(false)`: something else restarts it (a supervisor).
    fn restart(&self, name: &str) -> anyhow::Result<bool>;
    /// netns mode: takes host `host`'s link down or up.
    fn set_link(&self, host: &str, up: bool) -> anyhow::Result<()>;
    /// A store client with the admin identity; `attempt` and `call` bound each attempt and call.
    fn store_client(&self, attempt: Duration, call: Duration) -> anyhow::Result<Client>;
    /// The API servers, each with the admin credential (none: a store-only target).
    fn api_servers(&self) -> anyhow::Result<Vec<(String, ApiAccess)>> {
        Ok(Vec::new())
    }
}

pub(crate) fn client(
    endpoints: Vec<Endpoint>,
    certs: &Path,
    attempt: Duration,
    call: Duration,
) -> anyhow::Result<Client> {
    let mut config = ClientConfig::new(endpoints);
    config.attempt_timeout = attempt;
    config.call_timeout = call;
    Ok(Client::new(config, certs, store::config::STORE_ADMIN)?)
}

/// A cluster directory made by `kemu up`.
pub struct ClusterDirTarget {
    dir: PathBuf,
    layout: Layout,
}

impl ClusterDirTarget {
    pub fn open(dir: &Path) -> anyhow::Result<ClusterDirTarget> {
        let layout = Layout::read(dir)?;
        if ClusterState::read(dir)?.is_none() {
            bail!("{} has no state file: is the cluster up?", dir.display());
        }
        Ok(ClusterDirTarget {
            dir: dir.to_path_buf(),
            layout,
        })
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The pid of component `name` now (it changes with every restart), if it is ours.
    fn pid(&self, name: &str) -> anyhow::Result<u32> {
        cluster::state::live_pid(&self.dir, name)
    }
}

impl ChaosCluster for ClusterDirTarget {
    fn store_members(&self) -> Vec<(String, Endpoint)> {
        self.layout
            .components
            .iter()
            .filter(|c| c.kind == Kind::Store)
            .filter_map(|c| {
                c.addresses
                    .get("client")
                    .map(|a| (c.name.clone(), Endpoint::Addr(*a)))
            })
            .collect()
    }

    fn components(&self, kind: Kind) -> BoxFuture<'_, Vec<String>> {
        let names = self
            .layout
            .components
            .iter()
            .filter(|c| c.kind == kind)
            .map(|c| c.name.clone())
            .collect();
        Box::pin(std::future::ready(names))
    }

    fn signal<'a>(&'a self, name: &'a str, signal: Signal) -> BoxFuture<'a, anyhow::Result<()>> {
        let sent = self
            .pid(name)
            .and_then(|pid| cluster::process::signal_pid(pid, signal));
        Box::pin(std::future::ready(sent))
    }

    fn restart(&self, _name: &str) -> anyhow::Result<bool> {
        // The supervisor restarts crashed components (with its back-off).
        Ok(false)
    }

    fn set_link(&self, host: &str, up: bool) -> anyhow::Result<()> {
        let ns = self
            .layout
            .host(host)
            .and_then(|h| h.netns.clone())
            .with_context(|| format!("{host} is not a network-namespace host of this cluster"))?;
        // Only namespaces the launcher created and that exist now.
        if !netns::existing(&self.layout).contains(&ns) {
            bail!("namespace {ns} of host {host} does not exist");
        }
        let state = if up { "up" } else { "down" };
        let out = Command::new("ip")
            .args(["-n", &ns, "link", "set", "eth0", state])
            .output()
            .context("running `ip` (package iproute2)")?;
        if !out.status.success() {
            bail!(
                "ip -n {ns} link set eth0 {state}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    }

    fn store_client(&self, attempt: Duration, call: Duration) -> anyhow::Result<Client> {
        client(
            self.layout
                .store_endpoints
                .iter()
                .map(|a| Endpoint::Addr(*a))
                .collect(),
            &self.layout.certs,
            attempt,
            call,
        )
    }

    fn api_servers(&self) -> anyhow::Result<Vec<(String, ApiAccess)>> {
        let (_, credentials) = ApiCredentials::from_kubeconfig(&self.layout.kubeconfig)?;
        self.layout
            .components
            .iter()
            .filter(|c| c.kind == Kind::Apiserver)
            .filter_map(|c| c.addresses.get("http").map(|a| (c.name.clone(), *a)))
            .map(|(name, addr)| Ok((name, ApiAccess::new(addr, &credentials)?)))
            .collect()
    }
}

/// A [`LocalStore`] (benchmarks and tests): the store only, restarted by us.
pub struct LocalStoreTarget {
    pub store: Arc<LocalStore>,
}

impl LocalStoreTarget {
    /// The pid of member `name`, found by its data directory on its command line (the store
    /// keeps its children private).
    fn pid(&self, name: &str) -> anyhow::Result<u32> {
        let needle = self.store.data_dir(name).display().to_string();
        let entries = std::fs::read_dir("/proc").context("reading /proc")?;
        for entry in entries.flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
                continue;
            };
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            if args
                .windows(2)
                .any(|w| w[0] == b"--data-dir" && w[1] == needle.as_bytes())
            {
                return Ok(pid);
            }
        }
        bail!("member {name} is not running")
    }
}

impl ChaosCluster for LocalStoreTarget {
    fn store_members(&self) -> Vec<(String, Endpoint)> {
        self.store
            .names()
            .into_iter()
            .filter_map(|n| self.store.endpoint(&n).map(|e| (n, Endpoint::Addr(e))))
            .collect()
    }

    fn components(&self, _kind: Kind) -> BoxFuture<'_, Vec<String>> {
        Box::pin(std::future::ready(Vec::new()))
    }

    fn signal<'a>(&'a self, name: &'a str, signal: Signal) -> BoxFuture<'a, anyhow::Result<()>> {
        let sent = if signal == Signal::SIGKILL {
            // Through the store, so it reaps the child and can restart it.
            self.store.kill(name);
            Ok(())
        } else {
            self.pid(name)
                .and_then(|pid| cluster::process::signal_pid(pid, signal))
        };
        Box::pin(std::future::ready(sent))
    }

    fn restart(&self, name: &str) -> anyhow::Result<bool> {
        self.store.restart(name)?;
        Ok(true)
    }

    fn set_link(&self, _host: &str, _up: bool) -> anyhow::Result<()> {
        bail!("partitions need a netns cluster")
    }

    fn store_client(&self, attempt: Duration, call: Duration) -> anyhow::Result<Client> {
        client(
            self.store
                .client_endpoints()
                .into_iter()
                .map(Endpoint::Addr)
                .collect(),
            &self.store.certs_dir(),
            attempt,
            call,
        )
    }
}
