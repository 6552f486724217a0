//! netns mode: every host is a network namespace with one veth into a bridge, and the bridge
//! lives in a namespace of its own, so the machine's own network is never touched. Also
//! [`NetAccess`], how the launcher reaches addresses inside those namespaces.

use std::future::Future;
use std::net::SocketAddr;
use std::process::Command;

use anyhow::{bail, Context};

use crate::layout::Layout;

/// Runs `ip ARGS`, failing with its stderr.
fn ip(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .context("running `ip` (package iproute2)")?;
    if !out.status.success() {
        bail!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Existing network namespaces.
fn namespaces() -> Vec<String> {
    std::fs::read_dir("/run/netns")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Creates the bridge namespace, one namespace per host, and their links. Leftovers of an
/// earlier run of the same cluster are removed first.
pub fn setup(layout: &Layout) -> anyhow::Result<()> {
    let Some(bridge) = &layout.bridge else {
        return Ok(());
    };
    if !nix::unistd::Uid::effective().is_root() {
        bail!("hosts.mode = \"netns\" needs root (it creates network namespaces)");
    }
    teardown(layout);
    let hub = bridge.netns.as_str();
    ip(&["netns", "add", hub])?;
    ip(&["-n", hub, "link", "set", "lo", "up"])?;
    ip(&["-n", hub, "link", "add", &bridge.name, "type", "bridge"])?;
    ip(&[
        "-n",
        hub,
        "addr",
        "add",
        &format!("{}/24", bridge.address),
        "dev",
        &bridge.name,
    ])?;
    ip(&["-n", hub, "link", "set", &bridge.name, "up"])?;
    for (i, host) in layout.hosts.iter().enumerate() {
        let ns = host
            .netns
            .as_deref()
            .context("netns host without a namespace")?;
        let veth = crate::layout::veth_name(i);
        ip(&["netns", "add", ns])?;
        ip(&["-n", ns, "link", "set", "lo", "up"])?;
        ip(&[
            "-n", hub, "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", ns,
        ])?;
        ip(&["-n", hub, "link", "set", &veth, "master", &bridge.name])?;
        ip(&["-n", hub, "link", "set", &veth, "up"])?;
        ip(&[
            "-n",
            ns,
            "addr",
            "add",
            &format!("{}/24", host.address),
            "dev",
            "eth0",
        ])?;
        ip(&["-n", ns, "link", "set", "eth0", "up"])?;
    }
    Ok(())
}

/// Removes every namespace of the cluster (their links and the bridge go with them). Safe to
/// call when some or all are already gone.
pub fn teardown(layout: &Layout) {
    let existing = namespaces();
    let ours = layout
        .hosts
        .iter()
        .filter_map(|h| h.netns.clone())
        .chain(layout.bridge.iter().map(|b| b.netns.clone()));
    for ns in ours {
        if existing.contains(&ns) {
            if let Err(e) = ip(&["netns", "del", &ns]) {
                tracing::warn!("removing namespace {ns}: {e:#}");
            }
        }
    }
}

/// The cluster's namespaces that exist now.
pub fn existing(layout: &Layout) -> Vec<String> {
    let existing = namespaces();
    layout
        .hosts
        .iter()
        .filter_map(|h| h.netns.clone())
        .chain(layout.bridge.iter().map(|b| b.netns.clone()))
        .filter(|ns| existing.contains(ns))
        .collect()
}

/// How this process opens connections to the cluster's components: directly, or (netns mode)
/// from a thread that lives in the bridge namespace. Sockets keep the namespace they were
/// created in, so futures run through [`NetAccess::run`] may create clients there and use them.
pub struct NetAccess {
    inside: Option<(
        tokio::runtime::Handle,
        Option<tokio::sync::oneshot::Sender<()>>,
    )>,
}

impl NetAccess {
    pub fn for_layout(layout: &Layout) -> anyhow::Result<NetAccess> {
        match &layout.bridge {
            None => Ok(NetAccess { inside: None }),
            Some(b) => NetAccess::enter(&b.netns),
        }
    }

    fn enter(ns: &str) -> anyhow::Result<NetAccess> {
        let path = format!("/run/netns/{ns}");
        let file = std::fs::File::open(&path)
            .with_context(|| format!("opening {path} (is the cluster up, and are you root?)"))?;
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name(format!("netns-{ns}"))
            .spawn(move || {
                let entered = nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET)
                    .map_err(|e| anyhow::anyhow!("entering namespace: {e}"))
                    .and_then(|()| {
                        tokio::runtime::Builder::new_current_thread()
                            .enable_all()
                            .build()
                            .map_err(anyhow::Error::from)
                    });
                match entered {
                    Ok(rt) => {
                        let _ = tx.send(Ok(rt.handle().clone()));
                        rt.block_on(async move {
                            let _ = stop_rx.await;
                        });
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                    }
                }
            })?;
        let handle = rx.recv().context("namespace thread died")??;
        Ok(NetAccess {
            inside: Some((handle, Some(stop_tx))),
        })
    }

    /// Runs `fut` where the cluster's addresses are reachable.
    pub async fn run<F, T>(&self, fut: F) -> anyhow::Result<T>
    where
        F: Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        match &self.inside {
            None => Ok(fut.await),
            Some((handle, _)) => handle.spawn(fut).await.context("namespace task failed"),
        }
    }

    /// Forwards TCP connections made to `listen` (in this process's own namespace) to `target`
    /// (reached through [`NetAccess::run`]) until `shutdown` resolves.
    pub async fn forward(
        &self,
        listener: tokio::net::TcpListener,
        target: SocketAddr,
        shutdown: impl Future<Output = ()>,
    ) {
        tokio::pin!(shutdown);
        loop {
            let accepted = tokio::select! {
                biased;
                _ = &mut shutdown => return,
                a = listener.accept() => a,
            };
            let Ok((inbound, _)) = accepted else {
                continue;
            };
            let Ok(inbound) = inbound.into_std() else {
                continue;
            };
            let relay = async move {
                let Ok(mut inbound) = tokio::net::TcpStream::from_std(inbound) else {
                    return;
                };
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            };
            match &self.inside {
                None => {
                    tokio::spawn(relay);
                }
                Some((handle, _)) => {
                    handle.spawn(relay);
                }
            }
        }
    }
}

impl Drop for NetAccess {
    fn drop(&mut self) {
        if let Some((_, stop)) = &mut self.inside {
            if let Some(stop) = stop.take() {
                let _ = stop.send(());
            }
        }
    }
}
