//! A cluster config resolved into processes: which component runs on which host, on which
//! addresses, with which command line, and the cluster directory that holds their files.
//!
//! `kemu up` writes the [`Layout`] to `<dir>/layout.json`; the supervisor, `status` and `down`
//! read it back, so every later command sees exactly what was launched.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use transport::pki::{self, CertSpec};

use crate::config::{parse_subnet, ClusterConfig, HostMode};
use crate::process::free_ports;

/// The kinds of component, in start order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Store,
    Apiserver,
    Controllers,
    Scheduler,
    Nodehost,
}

impl Kind {
    /// The `kemu` subcommand that runs this kind.
    pub fn subcommand(self) -> &'static str {
        match self {
            Kind::Store => "store",
            Kind::Apiserver => "apiserver",
            Kind::Controllers => "controllers",
            Kind::Scheduler => "scheduler",
            Kind::Nodehost => "node-host",
        }
    }

    /// Start stage: everything of stage n waits until stage n-1 is ready.
    pub fn stage(self) -> usize {
        match self {
            Kind::Store => 0,
            Kind::Apiserver => 1,
            Kind::Controllers | Kind::Scheduler => 2,
            Kind::Nodehost => 3,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Store => "store",
            Kind::Apiserver => "apiserver",
            Kind::Controllers => "controllers",
            Kind::Scheduler => "scheduler",
            Kind::Nodehost => "nodehost",
        }
    }
}

/// One machine (or network namespace) of the cluster.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Host {
    pub name: String,
    pub address: IpAddr,
    /// netns mode: the namespace the host's processes run in.
    pub netns: Option<String>,
}

/// netns mode: the namespace holding the bridge every host's veth is plugged into. The
/// launcher reaches the hosts from here; nothing is added to the machine's own namespace.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Bridge {
    pub netns: String,
    pub name: String,
    pub address: Ipv4Addr,
}

/// One process.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ComponentSpec {
    pub name: String,
    pub kind: Kind,
    pub host: String,
    /// The command line after the `kemu` binary.
    pub args: Vec<String>,
    /// What it serves on: `client`, `peer`, `http`, `quic`, `metrics`, `logs`.
    pub addresses: BTreeMap<String, SocketAddr>,
    pub log: PathBuf,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Layout {
    pub name: String,
    pub dir: PathBuf,
    /// The `kemu` binary every component runs.
    pub exe: PathBuf,
    pub mode: HostMode,
    pub hosts: Vec<Host>,
    pub bridge: Option<Bridge>,
    pub components: Vec<ComponentSpec>,
    pub store_endpoints: Vec<SocketAddr>,
    pub api_http: Vec<SocketAddr>,
    pub api_quic: Vec<SocketAddr>,
    /// netns mode: a loopback port in the machine's own namespace that the supervisor forwards
    /// to the first API server, so kubectl and `kemu run` work from outside the namespaces.
    pub api_forward: Option<SocketAddr>,
    pub nodes_total: u64,
    pub certs: PathBuf,
    pub kubeconfig: PathBuf,
}

/// Node names: node host `k` (in component order) runs `NODE_PREFIX` + `k * per_host` … on.
pub const NODE_PREFIX: &str = "node-";

/// Fixed ports for netns and remote hosts (local mode takes free ports); a second component of
/// the same kind on one host adds [`PORT_STEP`].
pub(crate) const STORE_CLIENT_PORT: u16 = 2379;
pub(crate) const STORE_PEER_PORT: u16 = 2380;
/// etcd's customary `--listen-metrics-urls` port.
pub(crate) const STORE_METRICS_PORT: u16 = 2381;
pub(crate) const API_HTTP_PORT: u16 = 6443;
pub(crate) const API_QUIC_PORT: u16 = 6444;
pub(crate) const NODEHOST_METRICS_PORT: u16 = 10250;
pub(crate) const NODEHOST_LOGS_PORT: u16 = 10251;
pub(crate) const CONTROLLERS_METRICS_PORT: u16 = 10257;
pub(crate) const SCHEDULER_METRICS_PORT: u16 = 10259;
const PORT_STEP: u16 = 10;

impl Layout {
    /// Decides hosts, addresses and command lines for `config` in cluster directory `dir`.
    pub fn plan(config: &ClusterConfig, dir: &Path, exe: &Path) -> anyhow::Result<Layout> {
        let dir = std::path::absolute(dir)?;
        let short = short_id(&dir);
        let mut hosts = Vec::new();
        let mut placement: BTreeMap<String, String> = BTreeMap::new();
        let names = config.component_names();
        let mut bridge = None;
        match config.hosts.mode {
            HostMode::Local => {
                hosts.push(Host {
                    name: "local".into(),
                    address: IpAddr::V4(Ipv4Addr::LOCALHOST),
                    netns: None,
                });
                for n in &names {
                    placement.insert(n.clone(), "local".into());
                }
            }
            HostMode::Netns | HostMode::Remote => {
                let netns = config.hosts.mode == HostMode::Netns;
                let prefix = if netns {
                    Some(parse_subnet(&config.hosts.subnet).map_err(anyhow::Error::msg)?)
                } else {
                    None
                };
                let mut specs: Vec<(String, Option<IpAddr>, Vec<String>)> = config
                    .hosts
                    .hosts
                    .iter()
                    .map(|h| (h.name.clone(), h.address, h.components.clone()))
                    .collect();
                for n in &names {
                    if !specs.iter().any(|(_, _, c)| c.contains(n)) {
                        specs.push((n.clone(), None, vec![n.clone()]));
                    }
                }
                if specs.len() > crate::config::MAX_NETNS_HOSTS {
                    bail!(
                        "netns mode supports at most {} hosts, this cluster needs {}",
                        crate::config::MAX_NETNS_HOSTS,
                        specs.len()
                    );
                }
                if let Some(p) = prefix {
                    bridge = Some(Bridge {
                        netns: format!("kemu-{short}"),
                        name: format!("kemu-{short}"),
                        address: Ipv4Addr::new(p[0], p[1], p[2], 1),
                    });
                }
                for (i, (name, address, components)) in specs.into_iter().enumerate() {
                    let address = match (prefix, address) {
                        (Some(p), _) => IpAddr::V4(Ipv4Addr::new(p[0], p[1], p[2], i as u8 + 2)),
                        (None, Some(a)) => a,
                        (None, None) => bail!("host {name}: remote mode needs an address"),
                    };
                    for c in components {
                        placement.insert(c, name.clone());
                    }
                    hosts.push(Host {
                        netns: netns.then(|| format!("kemu-{short}-{name}")),
                        name,
                        address,
                    });
                }
            }
        }

        let certs = dir.join("certs");
        let mut ports = PortAllocator::new(config.hosts.mode == HostMode::Local);
        let address_of = |component: &str| -> IpAddr {
            let host = &placement[component];
            hosts.iter().find(|h| &h.name == host).unwrap().address
        };

        // Addresses first: later command lines need earlier components' addresses.
        let mut addresses: BTreeMap<String, BTreeMap<String, SocketAddr>> = BTreeMap::new();
        for name in &names {
            let ip = address_of(name);
            let host = placement[name].clone();
            let mut a = BTreeMap::new();
            let kind = kind_of(name);
            let mut add = |key: &str, base: u16| -> anyhow::Result<()> {
                let port = ports.next(&host, key, base)?;
                a.insert(key.to_string(), SocketAddr::new(ip, port));
                Ok(())
            };
            match kind {
                Kind::Store => {
                    add("client", STORE_CLIENT_PORT)?;
                    add("peer", STORE_PEER_PORT)?;
                    add("metrics", STORE_METRICS_PORT)?;
                    if config.store.grpc {
                        // etcd's API on TCP beside the QUIC front's UDP port of the same
                        // number, as etcd's clients expect a member at its client port.
                        let client = a["client"];
                        a.insert("grpc".to_string(), client);
                    }
                }
                Kind::Apiserver => {
                    add("http", API_HTTP_PORT)?;
                    add("quic", API_QUIC_PORT)?;
                }
                Kind::Scheduler => add("metrics", SCHEDULER_METRICS_PORT)?,
                Kind::Controllers => add("metrics", CONTROLLERS_METRICS_PORT)?,
                Kind::Nodehost => {
                    add("metrics", NODEHOST_METRICS_PORT)?;
                    add("logs", NODEHOST_LOGS_PORT)?;
                }
            }
            addresses.insert(name.clone(), a);
        }
        let of_kind = |kind: Kind, key: &str| -> Vec<SocketAddr> {
            names
                .iter()
                .filter(|n| kind_of(n) == kind)
                .map(|n| addresses[n][key])
                .collect()
        };
        let store_endpoints = of_kind(Kind::Store, "client");
        let api_http = of_kind(Kind::Apiserver, "http");
        let api_quic = of_kind(Kind::Apiserver, "quic");
        let join = |v: &[SocketAddr]| {
            v.iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        let initial_cluster = names
            .iter()
            .filter(|n| kind_of(n) == Kind::Store)
            .map(|n| format!("{n}={}", addresses[n]["peer"]))
            .collect::<Vec<_>>()
            .join(",");
        let initial_cluster_grpc = names
            .iter()
            .filter_map(|n| addresses[n].get("grpc").map(|a| format!("{n}={a}")))
            .collect::<Vec<_>>()
            .join(",");
        let certs_arg = certs.display().to_string();

        let mut components = Vec::new();
        let mut nodehost_index = 0usize;
        for name in &names {
            let kind = kind_of(name);
            let a = &addresses[name];
            let s = |v: &str| v.to_string();
            let mut args = vec![s(kind.subcommand())];
            match kind {
                Kind::Store => {
                    args.extend([
                        s("--name"),
                        name.clone(),
                        s("--data-dir"),
                        dir.join("data").join(name).display().to_string(),
                        s("--listen-client"),
                        a["client"].to_string(),
                        s("--listen-peer"),
                        a["peer"].to_string(),
                        s("--listen-metrics"),
                        a["metrics"].to_string(),
                        s("--initial-cluster"),
                        initial_cluster.clone(),
                        s("--certs"),
                        certs_arg.clone(),
                    ]);
                    args.extend(store_tuning_args(config));
                    if let Some(grpc) = a.get("grpc") {
                        args.extend([
                            s("--listen-grpc"),
                            grpc.to_string(),
                            s("--initial-cluster-grpc"),
                            initial_cluster_grpc.clone(),
                        ]);
                    }
                }
                Kind::Apiserver => {
                    let [enable, disable] = admission_args(config);
                    args.extend([
                        s("--store-endpoints"),
                        join(&store_endpoints),
                        s("--certs"),
                        certs_arg.clone(),
                        s("--identity"),
                        s("apiserver"),
                        s("--listen-http"),
                        a["http"].to_string(),
                        s("--listen-quic"),
                        a["quic"].to_string(),
                        enable,
                        disable,
                        s("--token-auth-file"),
                        dir.join("config").join(TOKEN_FILE).display().to_string(),
                    ]);
                }
                Kind::Scheduler => args.extend([
                    s("--apiserver"),
                    join(&api_quic),
                    s("--certs"),
                    certs_arg.clone(),
                    s("--name"),
                    config.scheduler.name.clone(),
                    s("--identity"),
                    s("scheduler"),
                    s("--workers"),
                    config.scheduler.workers.to_string(),
                    s("--metrics-addr"),
                    a["metrics"].to_string(),
                    s("--holder-identity"),
                    name.clone(),
                ]),
                Kind::Controllers => {
                    args.extend([
                        s("--apiserver"),
                        join(&api_quic),
                        s("--certs"),
                        certs_arg.clone(),
                        s("--identity"),
                        s("controllers"),
                        s("--metrics-addr"),
                        a["metrics"].to_string(),
                    ]);
                    // The emulated CSI driver's settings (`[storage]`).
                    args.extend(config.storage.controller_args());
                }
                Kind::Nodehost => {
                    // Node hosts spread over the API servers: each starts on its own and moves
                    // to the others in turn when that one is lost.
                    let first = nodehost_index % api_quic.len();
                    let apis: Vec<SocketAddr> = api_quic[first..]
                        .iter()
                        .chain(&api_quic[..first])
                        .copied()
                        .collect();
                    nodehost_index += 1;
                    args.extend([
                        s("--apiserver"),
                        join(&apis),
                        s("--certs"),
                        certs_arg.clone(),
                        s("--identity"),
                        name.clone(),
                        s("--nodes"),
                        config.nodes.per_host.to_string(),
                        // One name space for the whole cluster: node-0 … node-(N-1).
                        s("--name-prefix"),
                        s(NODE_PREFIX),
                        s("--first-index"),
                        ((nodehost_index - 1) * config.nodes.per_host as usize).to_string(),
                        s("--config"),
                        dir.join("config")
                            .join("nodehost.toml")
                            .display()
                            .to_string(),
                        s("--metrics-addr"),
                        a["metrics"].to_string(),
                        // The API server dials this for `kubectl logs`.
                        s("--logs-addr"),
                        a["logs"].to_string(),
                    ]);
                }
            }
            if kind == Kind::Apiserver && config.apiserver.keep_history {
                // A chaos run checks every watch against the store's history of the whole
                // run, read afterwards: it must not be compacted away meanwhile.
                args.extend([s("--compaction-interval-secs"), s("0")]);
            } else if kind == Kind::Apiserver {
                args.extend([
                    s("--compaction-interval-secs"),
                    config.apiserver.compaction_interval_seconds.to_string(),
                ]);
            }
            if kind == Kind::Apiserver {
                args.extend([
                    s("--store-batch-linger-us"),
                    config.apiserver.store_batch_linger_us.to_string(),
                ]);
            }
            components.push(ComponentSpec {
                name: name.clone(),
                kind,
                host: placement[name].clone(),
                args,
                addresses: a.clone(),
                log: dir.join("logs").join(format!("{name}.log")),
            });
        }
        let api_forward = if config.hosts.mode == HostMode::Netns {
            let port = free_ports(1)?[0];
            Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port))
        } else {
            None
        };
        Ok(Layout {
            name: config.name.clone(),
            exe: exe.to_path_buf(),
            mode: config.hosts.mode,
            hosts,
            bridge,
            components,
            store_endpoints,
            api_http,
            api_quic,
            api_forward,
            nodes_total: config.total_nodes(),
            certs,
            kubeconfig: dir.join("kubeconfig"),
            dir,
        })
    }

    /// The address kubectl and the load generator use.
    pub fn api_url(&self) -> String {
        match self.api_forward {
            Some(a) => format!("https://{a}"),
            None => format!("https://{}", self.api_http[0]),
        }
    }

    /// Creates the cluster directory: certificates for every identity (with every host's
    /// address as a SAN), the node-host config, the kubeconfig and the layout itself.
    pub fn write(&self, config: &ClusterConfig, config_text: &str) -> anyhow::Result<()> {
        for sub in ["certs", "data", "logs", "pids", "config", "report"] {
            std::fs::create_dir_all(self.dir.join(sub))
                .with_context(|| format!("creating {}", self.dir.join(sub).display()))?;
        }
        pki::create_ca(&self.certs, &self.name)?;
        pki::service_account_key(&self.certs)?;
        let sans: Vec<String> = self
            .hosts
            .iter()
            .map(|h| h.address)
            .filter(|a| !a.is_loopback())
            .map(|a| a.to_string())
            .collect();
        let store_names: Vec<String> = self
            .components
            .iter()
            .filter(|c| c.kind == Kind::Store)
            .map(|c| c.name.clone())
            .collect();
        let nodehosts: Vec<String> = self
            .components
            .iter()
            .filter(|c| c.kind == Kind::Nodehost)
            .map(|c| c.name.clone())
            .collect();
        for (name, organizations) in crate::certs::identities(&store_names, &nodehosts) {
            pki::issue(
                &self.certs,
                &CertSpec {
                    name: name.clone(),
                    organizations,
                    sans: sans.clone(),
                },
            )
            .with_context(|| format!("issuing the certificate of {name}"))?;
        }
        std::fs::write(
            self.dir.join("config").join("nodehost.toml"),
            nodehost_config(config)?,
        )?;
        std::fs::write(self.dir.join("cluster.toml"), config_text)?;
        std::fs::write(
            &self.kubeconfig,
            kubeconfig(
                &self.api_url(),
                &std::fs::read(self.certs.join("ca.crt"))?,
                &std::fs::read(self.certs.join("admin.crt"))?,
                &std::fs::read(self.certs.join("admin.key"))?,
            ),
        )?;
        // A bearer token for tools without certificate support, in system:masters.
        let token = format!("{:032x}", rand::random::<u128>());
        write_private(
            &self.dir.join("config").join(TOKEN_FILE),
            format!("{token},kemu-admin,kemu-admin,\"system:masters\"\n").as_bytes(),
        )?;
        let json = serde_json::to_vec_pretty(self)?;
        std::fs::write(self.dir.join(LAYOUT_FILE), json)?;
        Ok(())
    }

    pub fn read(dir: &Path) -> anyhow::Result<Layout> {
        let path = dir.join(LAYOUT_FILE);
        let bytes = std::fs::read(&path).with_context(|| {
            format!(
                "{} is not a kemu cluster directory (no {LAYOUT_FILE})",
                dir.display()
            )
        })?;
        serde_json::from_slice(&bytes).with_context(|| format!("reading {}", path.display()))
    }

    /// netns mode: host `name`'s link into the bridge, as (namespace, interface). Setting it
    /// down cuts the host off the network; setting it up heals it.
    pub fn bridge_link(&self, name: &str) -> Option<(String, String)> {
        let bridge = self.bridge.as_ref()?;
        let i = self.hosts.iter().position(|h| h.name == name)?;
        Some((bridge.netns.clone(), veth_name(i)))
    }

    pub fn host(&self, name: &str) -> Option<&Host> {
        self.hosts.iter().find(|h| h.name == name)
    }

    /// The files component `c` needs, besides the `kemu` binary.
    pub fn files_of(&self, c: &ComponentSpec) -> Vec<PathBuf> {
        let identity = match c.kind {
            Kind::Store | Kind::Nodehost => c.name.as_str(),
            Kind::Apiserver => "apiserver",
            Kind::Scheduler => "scheduler",
            Kind::Controllers => "controllers",
        };
        let (crt, key) = pki::pair_paths(&self.certs, identity);
        let mut files = vec![self.certs.join("ca.crt"), crt, key];
        if c.kind == Kind::Nodehost {
            files.push(self.dir.join("config").join("nodehost.toml"));
        }
        if c.kind == Kind::Apiserver {
            files.push(self.certs.join(pki::SERVICE_ACCOUNT_KEY));
        }
        files
    }

    /// `kemu up --plan`: per host, the files to copy and the exact command lines.
    pub fn plan_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# cluster {} ({} hosts); copy each file to the same path on its host, then run the\n# commands in order: store members first, then API servers, then the rest.",
            self.name,
            self.hosts.len()
        );
        for host in &self.hosts {
            let _ = writeln!(out, "\n## host {} ({})", host.name, host.address);
            let mine: Vec<&ComponentSpec> = self
                .components
                .iter()
                .filter(|c| c.host == host.name)
                .collect();
            let mut files: Vec<PathBuf> = mine.iter().flat_map(|c| self.files_of(c)).collect();
            files.sort();
            files.dedup();
            let _ = writeln!(out, "files:");
            for f in files {
                let _ = writeln!(out, "  {}", f.display());
            }
            let _ = writeln!(out, "commands:");
            for c in mine {
                let _ = writeln!(out, "  {} {}", self.exe_name(), shell_join(&c.args));
            }
        }
        let _ = writeln!(
            out,
            "\nkubeconfig: {} (server {})",
            self.kubeconfig.display(),
            self.api_url()
        );
        out
    }

    fn exe_name(&self) -> String {
        "kemu".to_string()
    }
}

pub const LAYOUT_FILE: &str = "layout.json";

/// The bridge-side end of host `i`'s veth pair (in the bridge's namespace).
pub fn veth_name(i: usize) -> String {
    format!("v{i}")
}

/// The kind a component name (`s1`, `apiserver-2`, …) stands for.
pub fn kind_of(name: &str) -> Kind {
    match name.rsplit_once('-').map(|(k, _)| k) {
        Some("apiserver") => Kind::Apiserver,
        Some("controllers") => Kind::Controllers,
        Some("scheduler") => Kind::Scheduler,
        Some("nodehost") => Kind::Nodehost,
        _ => Kind::Store,
    }
}

/// Six hex digits naming the cluster in namespace and bridge names (interface names are at
/// most 15 bytes), derived from its directory so two clusters never collide.
pub fn short_id(dir: &Path) -> String {
    // FNV-1a: stable across runs and Rust versions, unlike `DefaultHasher`.
    let mut h: u64 = 0xcbf29ce484222325;
    for b in dir.as_os_str().as_encoded_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{:06x}", h & 0xff_ffff)
}

struct PortAllocator {
    local: bool,
    used: BTreeMap<(String, String), u16>,
    /// Local mode: the ports already handed out, so two components never get the same one.
    handed: BTreeSet<u16>,
}

impl PortAllocator {
    fn new(local: bool) -> Self {
        PortAllocator {
            local,
            used: BTreeMap::new(),
            handed: BTreeSet::new(),
        }
    }

    fn next(&mut self, host: &str, key: &str, base: u16) -> anyhow::Result<u16> {
        if self.local {
            loop {
                let port = free_ports(1)?[0];
                if self.handed.insert(port) {
                    return Ok(port);
                }
            }
        }
        let n = self
            .used
            .entry((host.to_string(), key.to_string()))
            .or_insert(0);
        let port = base + *n * PORT_STEP;
        *n += 1;
        Ok(port)
    }
}

/// The kubeconfig: plain HTTP to the first API server for now.
/// The API servers' bearer tokens, under the cluster's `config/`.
pub const TOKEN_FILE: &str = "tokens.csv";

/// Writes a file only its owner may read.
fn write_private(path: &Path, contents: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.write_all(contents)
        .with_context(|| format!("writing {}", path.display()))
}

/// A kubeconfig for `server` that trusts the cluster CA and authenticates with a client
/// certificate (all three PEMs embedded, so the file works wherever it is copied).
pub fn kubeconfig(server: &str, ca_pem: &[u8], cert_pem: &[u8], key_pem: &[u8]) -> String {
    use base64::Engine;
    let b64 = |pem: &[u8]| base64::engine::general_purpose::STANDARD.encode(pem);
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: kemu\n  cluster:\n    server: {server}\n    certificate-authority-data: {}\nusers:\n- name: admin\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\ncontexts:\n- name: kemu\n  context:\n    cluster: kemu\n    user: admin\n    namespace: default\ncurrent-context: kemu\n",
        b64(ca_pem),
        b64(cert_pem),
        b64(key_pem),
    )
}

/// What every node host is told about its nodes and runtime (`kemu node-host --config`).
pub(crate) fn nodehost_config(config: &ClusterConfig) -> anyhow::Result<String> {
    #[derive(Serialize)]
    struct NodeHostFile<'a> {
        runtime: &'a str,
        cpu: &'a str,
        memory: &'a str,
        ephemeral_storage: &'a str,
        pods: u32,
        zones: &'a [String],
        labels: &'a BTreeMap<String, String>,
        taints: &'a [crate::config::Taint],
        cluster_cidr: &'a str,
        node_cidr_mask_size: Option<u8>,
        node_cidr_mask_size_ipv4: Option<u8>,
        node_cidr_mask_size_ipv6: Option<u8>,
        node_ip_cidr: &'a str,
        lease_duration_seconds: u32,
        lease_interval: f64,
        status_report_interval: u32,
    }
    let file = NodeHostFile {
        runtime: config.runtime.as_str(),
        cpu: &config.nodes.cpu,
        memory: &config.nodes.memory,
        ephemeral_storage: &config.nodes.ephemeral_storage,
        pods: config.nodes.pods,
        zones: &config.nodes.zones,
        labels: &config.nodes.labels,
        taints: &config.nodes.taints,
        cluster_cidr: &config.nodes.cluster_cidr,
        node_cidr_mask_size: config.nodes.node_cidr_mask_size,
        node_cidr_mask_size_ipv4: config.nodes.node_cidr_mask_size_ipv4,
        node_cidr_mask_size_ipv6: config.nodes.node_cidr_mask_size_ipv6,
        node_ip_cidr: &config.nodes.node_ip_cidr,
        lease_duration_seconds: config.nodes.node_lease_duration_seconds,
        // The kubelet renews every quarter of the lease duration.
        lease_interval: f64::from(config.nodes.node_lease_duration_seconds) / 4.0,
        status_report_interval: config.nodes.node_status_report_frequency_seconds,
    };
    Ok(toml::to_string(&file)?)
}

/// The store members' raft, snapshot and batching settings as `kemu store` flags.
pub(crate) fn store_tuning_args(config: &ClusterConfig) -> Vec<String> {
    let store = &config.store;
    [
        ("--tick-ms", store.tick_ms.to_string()),
        ("--election-ticks", store.election_ticks.to_string()),
        ("--snapshot-entries", store.snapshot_entries.to_string()),
        (
            "--snapshot-wal-fraction",
            store.snapshot_wal_fraction.to_string(),
        ),
        (
            "--snapshot-catch-up-entries",
            store.snapshot_catch_up_entries.to_string(),
        ),
        ("--batch-window-us", store.batch_window_us.to_string()),
    ]
    .into_iter()
    .flat_map(|(flag, value)| [flag.to_string(), value])
    .collect()
}

/// The API servers' admission flags: the config lists exactly the plugins that run, and every
/// other one is turned off.
pub(crate) fn admission_args(config: &ClusterConfig) -> [String; 2] {
    [
        format!(
            "--enable-admission-plugins={}",
            config.admission_plugins.join(",")
        ),
        format!(
            "--disable-admission-plugins={}",
            apiserver::admission::Plugin::ALL
                .map(|p| p.name())
                .into_iter()
                .filter(|p| !config.admission_plugins.iter().any(|c| c == p))
                .collect::<Vec<_>>()
                .join(",")
        ),
    ]
}

/// Quotes arguments for a POSIX shell where needed.
pub fn shell_join(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@%+".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> ClusterConfig {
        ClusterConfig::parse(text, Path::new("t.toml")).unwrap()
    }

    #[test]
    fn netns_gives_each_unlisted_component_a_host() {
        let c = config(
            "[store]\nmembers = 3\n[nodes]\nhosts = 1\nper_host = 2\n[hosts]\nmode = \"netns\"\n[[hosts.host]]\nname = \"cp\"\ncomponents = [\"apiserver-1\", \"scheduler-1\"]\n",
        );
        let l = Layout::plan(&c, Path::new("/tmp/x"), Path::new("/bin/kemu")).unwrap();
        let names: Vec<&str> = l.hosts.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["cp", "s1", "s2", "s3", "nodehost-1"]);
        assert_eq!(l.hosts[0].address.to_string(), "10.213.0.2");
        assert_eq!(l.store_endpoints[2].to_string(), "10.213.0.5:2379");
        assert!(l.api_forward.is_some());
        let bridge = l.bridge.unwrap();
        assert!(bridge.name.len() <= 15);
        let store = &l.components[0];
        assert!(store.args.join(" ").contains(
            "--initial-cluster s1=10.213.0.3:2380,s2=10.213.0.4:2380,s3=10.213.0.5:2380"
        ));
    }

    #[test]
    fn node_hosts_are_told_the_cluster_addressing() {
        let c = config(
            "[nodes]\nhosts = 2\nper_host = 3\npods = 100\ncluster_cidr = \"fd00:10::/48,10.0.0.0/8\"\nnode_cidr_mask_size_ipv4 = 25\nnode_ip_cidr = \"fd00:64::/64\"\n",
        );
        let text = nodehost_config(&c).unwrap();
        let mut host: node::config::NodeHostConfig = toml::from_str(&text).unwrap();
        (host.nodes, host.first_index) = (3, 3);
        host.validate().unwrap();
        assert_eq!(host.cluster_cidr, "fd00:10::/48,10.0.0.0/8");
        assert_eq!(host.node_cidr_mask_size_ipv4, Some(25));
        assert_eq!(host.node_cidr_mask_size, None);
        assert_eq!(host.node_ip_cidr, "fd00:64::/64");
        let defaults = nodehost_config(&config("")).unwrap();
        let host: node::config::NodeHostConfig = toml::from_str(&defaults).unwrap();
        assert_eq!(
            host.addressing().unwrap(),
            node::addressing::Addressing::default_ipv4()
        );
        assert_eq!(host.lease_interval, std::time::Duration::from_secs(10));
        assert_eq!(host.lease_duration_seconds, 40);
        assert_eq!(
            host.status_report_interval,
            std::time::Duration::from_secs(300)
        );
    }

    #[test]
    fn two_components_of_a_kind_on_one_host_get_different_ports() {
        let c = config(
            "[store]\nmembers = 2\n[nodes]\nhosts = 0\n[scheduler]\nreplicas = 0\n[hosts]\nmode = \"remote\"\n[[hosts.host]]\nname = \"a\"\naddress = \"192.168.1.5\"\ncomponents = [\"s1\", \"s2\", \"apiserver-1\"]\n",
        );
        let l = Layout::plan(&c, Path::new("/tmp/x"), Path::new("/bin/kemu")).unwrap();
        assert_eq!(l.store_endpoints[0].to_string(), "192.168.1.5:2379");
        assert_eq!(l.store_endpoints[1].to_string(), "192.168.1.5:2389");
        let metrics: Vec<String> = l
            .components
            .iter()
            .filter(|c| c.kind == Kind::Store)
            .map(|c| c.addresses["metrics"].to_string())
            .collect();
        assert_eq!(metrics, ["192.168.1.5:2381", "192.168.1.5:2391"]);
        let plan = l.plan_text();
        assert!(plan.contains("## host a (192.168.1.5)"), "{plan}");
        assert!(plan.contains("kemu store --name s1"), "{plan}");
        assert!(plan.contains("/tmp/x/certs/s2.key"), "{plan}");
    }

    #[test]
    fn admission_plugins_reach_the_api_server() {
        let c = config("admission_plugins = [\"NamespaceLifecycle\", \"ResourceQuota\"]\n");
        let l = Layout::plan(&c, Path::new("/tmp/x"), Path::new("/bin/kemu")).unwrap();
        let api = l
            .components
            .iter()
            .find(|c| c.kind == Kind::Apiserver)
            .expect("an API server");
        assert!(api
            .args
            .contains(&"--enable-admission-plugins=NamespaceLifecycle,ResourceQuota".to_string()));
        assert!(api.args.contains(
            &"--disable-admission-plugins=LimitRanger,ServiceAccount,NodeRestriction,PodSecurity,Priority,DefaultTolerationSeconds,DefaultStorageClass,StorageObjectInUseProtection,PersistentVolumeClaimResize"
                .to_string()
        ));
        let bad = ClusterConfig::parse(
            "admission_plugins = [\"AlwaysAdmit\"]\n",
            Path::new("t.toml"),
        );
        assert!(bad.is_err());
    }

    #[test]
    fn storage_settings_reach_the_controller_manager() {
        let c = config(
            "[controllers]\nreplicas = 1\n[storage]\nattach_latency_ms = 250\nnode_capacity = \"5Gi\"\n",
        );
        let l = Layout::plan(&c, Path::new("/tmp/x"), Path::new("/bin/kemu")).unwrap();
        let controllers = l
            .components
            .iter()
            .find(|c| c.kind == Kind::Controllers)
            .expect("a controller manager");
        let args = controllers.args.join(" ");
        assert!(
            args.contains("--volume-attach-latency-ms 250 --volume-node-capacity 5Gi"),
            "{args}"
        );
        assert!(!args.contains("--volume-provision-latency-ms"), "{args}");
    }

    #[test]
    fn kinds_from_names() {
        assert_eq!(kind_of("s3"), Kind::Store);
        assert_eq!(kind_of("nodehost-12"), Kind::Nodehost);
        assert_eq!(kind_of("apiserver-1"), Kind::Apiserver);
    }
}
