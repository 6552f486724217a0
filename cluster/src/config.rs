//! The cluster config: the TOML file in `clusters/` that says what `kemu up` launches.
//!
//! Every key is optional; [`ClusterConfig::default`] and the `Default` impls below it are the one
//! place defaults live. Unknown keys and bad values are [`ConfigError`]s that name the key and
//! the line it is on.
//!
//! The same file may carry tables other tools own (`kemu run`'s `[load]` and `[chaos]` plans):
//! [`ClusterConfig::parse_with`] lets them through, and their owners read them from the same
//! text with [`parse_toml`], so their errors name the key and line too.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use serde::de::{DeserializeOwned, IgnoredAny};
use serde::{Deserialize, Serialize};

/// Why a cluster config was rejected.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A TOML syntax error, an unknown key or a value of the wrong type.
    #[error("{}: line {line}, column {column}: {key}: {message}", file.display())]
    Parse {
        file: PathBuf,
        line: usize,
        column: usize,
        /// Dotted path of the offending key (`nodes.cpu`), or `(document)`.
        key: String,
        message: String,
    },
    /// A value of the right type that makes no sense (`store.members = 0`).
    #[error("{}: {}{field}: {reason}", file.display(), line.map(|l| format!("line {l}: ")).unwrap_or_default())]
    Invalid {
        file: PathBuf,
        /// The line of the key, when the file sets it (a bad combination may involve defaults).
        line: Option<usize>,
        field: String,
        reason: String,
    },
}

impl ConfigError {
    /// A value of `file` (whose text is `text`) that makes no sense, on the line that sets
    /// the dotted `field` when the file sets it.
    pub fn invalid(text: &str, file: &Path, field: String, reason: String) -> ConfigError {
        ConfigError::Invalid {
            file: file.to_path_buf(),
            line: key_line(text, &field),
            field,
            reason,
        }
    }
}

/// A whole cluster: its name, how many of each component, the nodes' shape and where each
/// process runs.
// Not `deny_unknown_fields`: unknown top-level keys land in `other_tables`, and
// [`ClusterConfig::parse_with`] refuses every one that no other tool owns.
#[derive(Clone, Debug, Deserialize)]
#[serde(default)]
pub struct ClusterConfig {
    /// Names the cluster directory (`.kemu/<name>`) and the CA.
    pub name: String,
    /// Latency profile of the emulated container runtime.
    pub runtime: RuntimeProfile,
    /// The admission plugins the API servers run (Kubernetes' names; the API server runs them
    /// in Kubernetes' order). Passed as `--enable-admission-plugins`, with every other plugin
    /// in `--disable-admission-plugins`.
    pub admission_plugins: Vec<String>,
    pub store: StoreSection,
    pub apiserver: ApiServerSection,
    pub scheduler: SchedulerSection,
    /// The controller manager: 0 replicas unless the config's `[controllers]` sets them.
    pub controllers: ReplicasSection,
    pub nodes: NodesSection,
    pub hosts: HostsSection,
    /// The emulated CSI driver `csi.kemu.dev` the controller manager runs.
    pub storage: StorageSection,
    /// The top-level keys this struct does not know, by name (their values are skipped).
    #[serde(flatten)]
    other_tables: BTreeMap<String, IgnoredAny>,
}

/// The top-level keys of [`ClusterConfig`], for the message about an unknown one.
const KEYS: [&str; 10] = [
    "name",
    "runtime",
    "admission_plugins",
    "store",
    "apiserver",
    "scheduler",
    "controllers",
    "nodes",
    "hosts",
    "storage",
];

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RuntimeProfile {
    /// Every runtime call returns at once: pure control-plane load.
    #[default]
    Instant,
    /// Runtime calls take as long as a real containerd's roughly do.
    Realistic,
}

impl RuntimeProfile {
    pub fn as_str(self) -> &'static str {
        match self {
            RuntimeProfile::Instant => "instant",
            RuntimeProfile::Realistic => "realistic",
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreSection {
    /// Store members (raft voters); an odd number tolerates (members - 1) / 2 failures.
    pub members: u32,
    /// Raft tick in milliseconds.
    pub tick_ms: u64,
    /// Ticks without a heartbeat before a follower starts an election.
    pub election_ticks: u32,
    /// Snapshot and compact the raft log after this many entries...
    pub snapshot_entries: u64,
    /// ...and once the WAL since the last snapshot is at least this fraction of that snapshot's
    /// size (0 = entries alone decide; see docs/store.md "On disk").
    pub snapshot_wal_fraction: f64,
    /// Entries kept before a snapshot's index when the log is compacted: a member behind by
    /// fewer catches up from the log, not through a whole snapshot.
    pub snapshot_catch_up_entries: u64,
    /// Microseconds a leader may hold new proposals so that more share one fsync and one append
    /// to each follower (0 = none; see docs/store.md "How a write travels").
    pub batch_window_us: u64,
    /// Serve etcd's v3 gRPC API on each member, on TCP at the port number of its QUIC client
    /// port (etcd's client port), so `etcdctl` and etcd's client libraries reach the store.
    pub grpc: bool,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApiServerSection {
    pub replicas: u32,
    /// How often the API servers compact the store's history to the revision of one interval
    /// earlier (kube-apiserver's `--etcd-compaction-interval`, 5 minutes by default). The store
    /// keeps every version written since, so at a high write rate a shorter interval bounds
    /// its memory.
    pub compaction_interval_seconds: u64,
    /// How long a store write that finds none of its API server's batch calls out waits for
    /// others to join it (microseconds; 0 sends it at once).
    pub store_batch_linger_us: u64,
    /// Never compact, whatever the interval (not a key of the file): set by tools that read the
    /// store's whole history afterwards — a chaos plan's checks compare every watch with it.
    #[serde(skip)]
    pub keep_history: bool,
}

impl Default for ApiServerSection {
    fn default() -> Self {
        ApiServerSection {
            replicas: 1,
            compaction_interval_seconds: 300,
            store_batch_linger_us: 2000,
            keep_history: false,
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReplicasSection {
    pub replicas: u32,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SchedulerSection {
    /// Scheduler processes; one leads at a time (leader election on a Lease).
    pub replicas: u32,
    /// Pods scheduled in parallel per scheduler.
    pub workers: u32,
    /// The `schedulerName` pods ask for.
    pub name: String,
}

/// The emulated nodes: how many node-host processes, how many kubelets each carries, and
/// what every node looks like.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NodesSection {
    /// Node-host processes.
    pub hosts: u32,
    /// Emulated nodes per node-host process.
    pub per_host: u32,
    /// Capacity, as Kubernetes quantities.
    pub cpu: String,
    pub memory: String,
    pub ephemeral_storage: String,
    /// Maximum pods per node.
    pub pods: u32,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    /// `topology.kubernetes.io/zone` values, assigned to nodes round-robin.
    pub zones: Vec<String>,
    /// Where the nodes' pod ranges (podCIDRs) come from, as kube-controller-manager's
    /// `--cluster-cidr`: one CIDR, or an IPv4 and an IPv6 one for dual-stack
    /// (`10.128.0.0/9,fd00:10::/48`; the first is the primary family).
    pub cluster_cidr: String,
    /// Prefix length of each node's pod range, single-stack only (`--node-cidr-mask-size`;
    /// 24 for IPv4 and 64 for IPv6 when unset).
    pub node_cidr_mask_size: Option<u8>,
    /// The same per family (`--node-cidr-mask-size-ipv4` / `-ipv6`), for dual-stack.
    pub node_cidr_mask_size_ipv4: Option<u8>,
    pub node_cidr_mask_size_ipv6: Option<u8>,
    /// Where the nodes' InternalIPs come from, one CIDR per family: node `i` gets the
    /// address `i + 1` of each.
    pub node_ip_cidr: String,
    /// The kubelet's `nodeLeaseDurationSeconds`: each node renews its Lease every quarter of
    /// it (10 s for the default 40), as the kubelet does.
    pub node_lease_duration_seconds: u32,
    /// The kubelet's `nodeStatusReportFrequency`: a node posts its status when it changes and
    /// at least this often.
    pub node_status_report_frequency_seconds: u32,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Taint {
    pub key: String,
    #[serde(default)]
    pub value: String,
    pub effect: TaintEffect,
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

/// The emulated CSI driver `csi.kemu.dev` and the default StorageClass, as the controller
/// manager's `--volume-*` and `--*default-storage-class*` flags (`docs/storage.md`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StorageSection {
    /// Milliseconds the driver takes to create or delete a volume.
    pub provision_latency_ms: u64,
    /// Milliseconds it takes to grow a volume.
    pub resize_latency_ms: u64,
    /// Milliseconds it takes to attach a volume to a node or detach it.
    pub attach_latency_ms: u64,
    /// What it can provision on each node (a quantity), published as CSIStorageCapacity
    /// objects; no limit without it.
    pub node_capacity: Option<String>,
    /// The share of provisioning attempts that fail (0 to 1).
    pub provision_failure_rate: f64,
    /// The share of attach attempts that fail (0 to 1).
    pub attach_failure_rate: f64,
    /// Create the default StorageClass `standard` (provisioner `csi.kemu.dev`) at start.
    pub default_class: bool,
    /// The default class's `volumeBindingMode`: `Immediate` or `WaitForFirstConsumer`.
    pub default_binding_mode: String,
}

impl StorageSection {
    /// The controller manager's flags for these settings, the defaults left out.
    pub fn controller_args(&self) -> Vec<String> {
        let defaults = StorageSection::default();
        let mut args = Vec::new();
        let mut flag = |name: &str, value: String| {
            args.push(format!("--{name}"));
            args.push(value);
        };
        for (name, value, default) in [
            (
                "volume-provision-latency-ms",
                self.provision_latency_ms,
                defaults.provision_latency_ms,
            ),
            (
                "volume-resize-latency-ms",
                self.resize_latency_ms,
                defaults.resize_latency_ms,
            ),
            (
                "volume-attach-latency-ms",
                self.attach_latency_ms,
                defaults.attach_latency_ms,
            ),
        ] {
            if value != default {
                flag(name, value.to_string());
            }
        }
        if let Some(capacity) = &self.node_capacity {
            flag("volume-node-capacity", capacity.clone());
        }
        for (name, value) in [
            ("volume-provision-failure-rate", self.provision_failure_rate),
            ("volume-attach-failure-rate", self.attach_failure_rate),
        ] {
            if value != 0.0 {
                flag(name, value.to_string());
            }
        }
        if self.default_binding_mode != defaults.default_binding_mode {
            flag(
                "default-storage-class-binding-mode",
                self.default_binding_mode.clone(),
            );
        }
        if !self.default_class {
            args.push("--no-default-storage-class".into());
        }
        args
    }
}

/// Where the processes run.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HostsSection {
    pub mode: HostMode,
    /// netns mode: the private /24 the hosts' addresses come from (`10.213.0.0/24`). It lives
    /// only inside the cluster's own namespaces, so clusters side by side may share it.
    pub subnet: String,
    /// Hosts and the components each runs. In netns mode a component no host lists gets a host
    /// of its own; in remote mode every component must be listed.
    #[serde(rename = "host")]
    pub hosts: Vec<HostSpec>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HostMode {
    /// Every process on this machine, on loopback, on free ports.
    #[default]
    Local,
    /// Each host is a network namespace on a private bridge (root required).
    Netns,
    /// Real machines: `kemu up --plan` prints what to run where.
    Remote,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    pub name: String,
    /// The address components on this host bind and advertise. Required in remote mode;
    /// assigned from `hosts.subnet` in netns mode.
    #[serde(default)]
    pub address: Option<IpAddr>,
    /// Component names: `s1`…, `apiserver-1`…, `scheduler-1`…, `controllers-1`…,
    /// `nodehost-1`….
    #[serde(default)]
    pub components: Vec<String>,
}

// ---- Defaults: the one place they live. ----

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            name: "local".into(),
            runtime: RuntimeProfile::Instant,
            admission_plugins: apiserver::admission::Plugin::ALL
                .map(|p| p.name().to_string())
                .to_vec(),
            store: StoreSection::default(),
            apiserver: ApiServerSection::default(),
            scheduler: SchedulerSection::default(),
            controllers: ReplicasSection { replicas: 0 },
            nodes: NodesSection::default(),
            hosts: HostsSection::default(),
            storage: StorageSection::default(),
            other_tables: BTreeMap::new(),
        }
    }
}

impl Default for StoreSection {
    fn default() -> Self {
        StoreSection {
            members: 3,
            tick_ms: 50,
            election_ticks: 10,
            snapshot_entries: 100_000,
            snapshot_wal_fraction: 0.25,
            snapshot_catch_up_entries: 20_000,
            batch_window_us: store::config::DEFAULT_BATCH_WINDOW.as_micros() as u64,
            grpc: true,
        }
    }
}

impl Default for ReplicasSection {
    fn default() -> Self {
        ReplicasSection { replicas: 1 }
    }
}

impl Default for SchedulerSection {
    fn default() -> Self {
        SchedulerSection {
            replicas: 1,
            workers: 4,
            name: "default-scheduler".into(),
        }
    }
}

impl Default for NodesSection {
    fn default() -> Self {
        NodesSection {
            hosts: 2,
            per_host: 500,
            cpu: "32".into(),
            memory: "128Gi".into(),
            ephemeral_storage: "100Gi".into(),
            pods: 110,
            labels: BTreeMap::new(),
            taints: Vec::new(),
            zones: vec!["zone-a".into(), "zone-b".into(), "zone-c".into()],
            cluster_cidr: node::addressing::DEFAULT_CLUSTER_CIDR.into(),
            node_cidr_mask_size: None,
            node_cidr_mask_size_ipv4: None,
            node_cidr_mask_size_ipv6: None,
            node_ip_cidr: node::addressing::DEFAULT_NODE_IP_CIDR.into(),
            node_lease_duration_seconds: 40,
            node_status_report_frequency_seconds: 300,
        }
    }
}

impl Default for StorageSection {
    fn default() -> Self {
        StorageSection {
            provision_latency_ms: 0,
            resize_latency_ms: 0,
            attach_latency_ms: 0,
            node_capacity: None,
            provision_failure_rate: 0.0,
            attach_failure_rate: 0.0,
            default_class: true,
            default_binding_mode: "Immediate".into(),
        }
    }
}

impl Default for HostsSection {
    fn default() -> Self {
        HostsSection {
            mode: HostMode::Local,
            subnet: "10.213.0.0/24".into(),
            hosts: Vec::new(),
        }
    }
}

// ---- Reading and checking. ----

impl ClusterConfig {
    /// Reads and validates `path`.
    pub fn load(path: &Path) -> Result<ClusterConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        ClusterConfig::parse(&text, path)
    }

    /// Parses and validates `text`; `file` only names it in errors.
    pub fn parse(text: &str, file: &Path) -> Result<ClusterConfig, ConfigError> {
        ClusterConfig::parse_with(text, file, &[])
    }

    /// [`ClusterConfig::parse`] for a file that may also hold the top-level tables `tables`,
    /// which other tools own and read themselves ([`parse_toml`]); any other unknown key is an
    /// error naming it and its line.
    pub fn parse_with(
        text: &str,
        file: &Path,
        tables: &[&str],
    ) -> Result<ClusterConfig, ConfigError> {
        let config: ClusterConfig = parse_toml(text, file)?;
        if let Some(unknown) = config
            .other_tables
            .keys()
            .find(|k| !tables.contains(&k.as_str()))
        {
            let (line, column) = top_level_key_position(text, unknown);
            let expected: Vec<String> = KEYS
                .iter()
                .chain(tables)
                .map(|k| format!("`{k}`"))
                .collect();
            return Err(ConfigError::Parse {
                file: file.to_path_buf(),
                line,
                column,
                key: unknown.clone(),
                message: format!(
                    "unknown field `{unknown}`, expected one of {}",
                    expected.join(", ")
                ),
            });
        }
        config
            .validate()
            .map_err(|(field, reason)| ConfigError::invalid(text, file, field, reason))?;
        Ok(config)
    }

    /// Checks values the types allow but a cluster cannot have: (dotted field, reason).
    pub fn validate(&self) -> Result<(), (String, String)> {
        let bad = |field: &str, reason: &str| Err((field.to_string(), reason.to_string()));
        if self.name.is_empty()
            || self.name.len() > 40
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        {
            return bad("name", "must be 1-40 characters of a-z, 0-9 and '-'");
        }
        if let Some(unknown) = self
            .admission_plugins
            .iter()
            .find(|p| apiserver::admission::Plugin::from_name(p).is_none())
        {
            return Err((
                "admission_plugins".into(),
                format!("unknown admission plugin {unknown:?}"),
            ));
        }
        if self.store.members == 0 {
            return bad("store.members", "must be at least 1");
        }
        if self.store.tick_ms == 0 {
            return bad("store.tick_ms", "must be at least 1");
        }
        if self.store.election_ticks < 2 {
            return bad("store.election_ticks", "must be at least 2");
        }
        if self.store.snapshot_entries < 10 {
            return bad("store.snapshot_entries", "must be at least 10");
        }
        if !(self.store.snapshot_wal_fraction >= 0.0
            && self.store.snapshot_wal_fraction.is_finite())
        {
            return bad(
                "store.snapshot_wal_fraction",
                "must be a finite number >= 0",
            );
        }
        if self.apiserver.replicas == 0 {
            return bad("apiserver.replicas", "must be at least 1");
        }
        if self.apiserver.compaction_interval_seconds == 0 {
            return bad(
                "apiserver.compaction_interval_seconds",
                "must be at least 1 (history would grow without bound)",
            );
        }
        if self.apiserver.store_batch_linger_us > 100_000 {
            return bad(
                "apiserver.store_batch_linger_us",
                "must be at most 100000 (100 ms): every write that finds the store idle waits this long",
            );
        }
        if self.scheduler.replicas > 0 && self.scheduler.workers == 0 {
            return bad("scheduler.workers", "must be at least 1");
        }
        if self.scheduler.name.is_empty() {
            return bad("scheduler.name", "must not be empty");
        }
        if self.nodes.hosts > 0 && self.nodes.per_host == 0 {
            return bad("nodes.per_host", "must be at least 1 when nodes.hosts > 0");
        }
        for (field, value) in [
            ("nodes.cpu", &self.nodes.cpu),
            ("nodes.memory", &self.nodes.memory),
            ("nodes.ephemeral_storage", &self.nodes.ephemeral_storage),
        ] {
            match api::quantity::parse(value) {
                Ok(q) if !q.is_negative() => {}
                Ok(_) => return bad(field, "must not be negative"),
                Err(e) => return Err((field.to_string(), e.to_string())),
            }
        }
        if self.nodes.pods == 0 {
            return bad("nodes.pods", "must be at least 1");
        }
        for (i, taint) in self.nodes.taints.iter().enumerate() {
            if taint.key.is_empty() {
                return Err((format!("nodes.taints[{i}].key"), "must not be empty".into()));
            }
        }
        if self.nodes.zones.iter().any(String::is_empty) {
            return bad("nodes.zones", "zone names must not be empty");
        }
        if self.nodes.node_lease_duration_seconds < 4 {
            return bad(
                "nodes.node_lease_duration_seconds",
                "must be at least 4 (a node renews its lease every quarter of it)",
            );
        }
        if self.nodes.node_status_report_frequency_seconds == 0 {
            return bad(
                "nodes.node_status_report_frequency_seconds",
                "must be at least 1",
            );
        }
        self.validate_addressing()?;
        self.validate_hosts()?;
        self.validate_storage()?;
        Ok(())
    }

    /// The emulated driver's settings, checked here so that a bad one stops `kemu up` before
    /// the controller manager would refuse its flag.
    fn validate_storage(&self) -> Result<(), (String, String)> {
        let s = &self.storage;
        if let Some(capacity) = &s.node_capacity {
            match api::quantity::parse(capacity) {
                Ok(q) if !q.is_negative() && !q.is_zero() => {}
                Ok(_) => {
                    return Err((
                        "storage.node_capacity".into(),
                        format!("{capacity:?}: must be positive (leave it out for no limit)"),
                    ))
                }
                Err(e) => {
                    return Err(("storage.node_capacity".into(), format!("{capacity:?}: {e}")))
                }
            }
        }
        for (field, rate) in [
            ("storage.provision_failure_rate", s.provision_failure_rate),
            ("storage.attach_failure_rate", s.attach_failure_rate),
        ] {
            if !(0.0..=1.0).contains(&rate) {
                return Err((
                    field.into(),
                    format!("{rate}: must be between 0 and 1 (the share of attempts that fail)"),
                ));
            }
        }
        if !["Immediate", "WaitForFirstConsumer"].contains(&s.default_binding_mode.as_str()) {
            return Err((
                "storage.default_binding_mode".into(),
                format!(
                    "{:?}: supported values: \"Immediate\", \"WaitForFirstConsumer\"",
                    s.default_binding_mode
                ),
            ));
        }
        Ok(())
    }

    /// Every node gets its pod ranges and InternalIPs, and every pod an IP.
    fn validate_addressing(&self) -> Result<(), (String, String)> {
        let n = &self.nodes;
        let settings = node::addressing::AddressingSettings {
            cluster_cidr: &n.cluster_cidr,
            node_cidr_mask_size: n.node_cidr_mask_size,
            node_cidr_mask_size_ipv4: n.node_cidr_mask_size_ipv4,
            node_cidr_mask_size_ipv6: n.node_cidr_mask_size_ipv6,
            node_ip_cidr: &n.node_ip_cidr,
        };
        let what = format!(
            "{} nodes ({} hosts × {} per host)",
            self.total_nodes(),
            n.hosts,
            n.per_host
        );
        node::addressing::Addressing::new(&settings, "nodes.")
            .and_then(|a| {
                a.check(
                    self.total_nodes(),
                    u64::from(n.pods),
                    &what,
                    "nodes.",
                    "nodes.per_host",
                )
            })
            .map_err(|e| (e.key, e.reason))
    }

    fn validate_hosts(&self) -> Result<(), (String, String)> {
        let names = self.component_names();
        let mut seen_hosts = Vec::new();
        let mut assigned: Vec<&str> = Vec::new();
        if self.hosts.mode == HostMode::Netns {
            parse_subnet(&self.hosts.subnet).map_err(|r| ("hosts.subnet".to_string(), r))?;
        }
        for (i, host) in self.hosts.hosts.iter().enumerate() {
            let field = |f: &str| format!("hosts.host[{i}].{f}");
            if host.name.is_empty()
                || host.name.len() > 20
                || !host
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-')
            {
                return Err((
                    field("name"),
                    "must be 1-20 characters of letters, digits and '-'".into(),
                ));
            }
            if seen_hosts.contains(&host.name.as_str()) {
                return Err((
                    field("name"),
                    format!("host {:?} is listed twice", host.name),
                ));
            }
            seen_hosts.push(&host.name);
            if self.hosts.mode == HostMode::Remote && host.address.is_none() {
                return Err((field("address"), "required in remote mode".into()));
            }
            for component in &host.components {
                if !names.contains(component) {
                    return Err((
                        field("components"),
                        format!(
                            "no component {component:?} in this cluster (it has {})",
                            names.join(", ")
                        ),
                    ));
                }
                if assigned.contains(&component.as_str()) {
                    return Err((
                        field("components"),
                        format!("{component:?} is assigned to two hosts"),
                    ));
                }
                assigned.push(component);
            }
        }
        if self.hosts.mode == HostMode::Netns {
            // Each host takes an address of the /24 (.1 is the bridge); a component no host
            // lists gets a host of its own.
            let unlisted = names.iter().filter(|n| !assigned.contains(&n.as_str()));
            let needed = self.hosts.hosts.len() + unlisted.count();
            if needed > MAX_NETNS_HOSTS {
                return Err((
                    "hosts.mode".into(),
                    format!("netns mode holds at most {MAX_NETNS_HOSTS} hosts (hosts.subnet is a /24) but this cluster needs {needed}: put components on shared hosts with [[hosts.host]]"),
                ));
            }
        }
        if self.hosts.mode == HostMode::Remote {
            if let Some(missing) = names.iter().find(|n| !assigned.contains(&n.as_str())) {
                return Err((
                    "hosts.host".into(),
                    format!("remote mode: component {missing:?} is on no host"),
                ));
            }
        }
        Ok(())
    }

    /// Every component's name, in start order.
    pub fn component_names(&self) -> Vec<String> {
        let mut names: Vec<String> = (1..=self.store.members).map(|i| format!("s{i}")).collect();
        let kinds = [
            ("apiserver", self.apiserver.replicas),
            ("controllers", self.controllers.replicas),
            ("scheduler", self.scheduler.replicas),
            ("nodehost", self.nodes.hosts),
        ];
        for (kind, n) in kinds {
            names.extend((1..=n).map(|i| format!("{kind}-{i}")));
        }
        names
    }

    /// Nodes in the whole cluster.
    pub fn total_nodes(&self) -> u64 {
        u64::from(self.nodes.hosts) * u64::from(self.nodes.per_host)
    }
}

/// Hosts a netns cluster may have: addresses .2 on of its /24, with room to spare.
pub const MAX_NETNS_HOSTS: usize = 250;

/// `a.b.c.0/24` → the first three octets.
pub fn parse_subnet(subnet: &str) -> Result<[u8; 3], String> {
    let reason = || format!("{subnet:?} is not an IPv4 /24 such as 10.213.0.0/24");
    let (addr, len) = subnet.split_once('/').ok_or_else(reason)?;
    let addr: std::net::Ipv4Addr = addr.parse().map_err(|_| reason())?;
    if len != "24" {
        return Err(reason());
    }
    let o = addr.octets();
    if !addr.is_private() {
        return Err(format!("{subnet:?} is not a private (RFC 1918) range"));
    }
    Ok([o[0], o[1], o[2]])
}

/// Deserializes the whole of `text` (TOML) into `T`; a syntax error, an unknown key or a value
/// of the wrong type is a [`ConfigError::Parse`] naming the dotted key, the line and the column.
/// `file` only names the text in errors.
pub fn parse_toml<T: DeserializeOwned>(text: &str, file: &Path) -> Result<T, ConfigError> {
    let deserializer = toml::Deserializer::new(text);
    serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let key = e.path().to_string();
        let inner = e.into_inner();
        let offset = inner.span().map(|s| s.start).unwrap_or(0);
        let (line, column) = line_column(text, offset);
        ConfigError::Parse {
            file: file.to_path_buf(),
            line,
            column,
            key: if key == "." { "(document)".into() } else { key },
            message: inner.message().trim().to_string(),
        }
    })
}

/// Where the top-level key `key` is set: `key = …`, or a `[key…]` / `[[key…]]` header
/// (1-based line and column; line 1 if neither is found).
fn top_level_key_position(text: &str, key: &str) -> (usize, usize) {
    let mut in_table = false;
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim_start();
        let column = raw.len() - line.len() + 1;
        if let Some(header) = line.strip_prefix('[') {
            let name = header.trim_start_matches('[').trim_start();
            let name = name.trim_start_matches('"');
            if name.starts_with(key) && name[key.len()..].starts_with([']', '.', '"', ' ']) {
                return (n + 1, column);
            }
            in_table = true;
            continue;
        }
        if in_table {
            continue;
        }
        let Some((k, _)) = line.split_once('=') else {
            continue;
        };
        let k = k.trim().trim_matches('"');
        if k == key || k.starts_with(&format!("{key}.")) {
            return (n + 1, column);
        }
    }
    (1, 1)
}

/// 1-based line and column of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map(|i| i + 1).unwrap_or(0) + 1;
    (line, column)
}

/// The line that sets the dotted `field` (`nodes.cpu`, `hosts.host[1].address`), if the file
/// sets it with a plain `key = value` under a `[table]` or `[[array]]` header.
fn key_line(text: &str, field: &str) -> Option<usize> {
    // Split "hosts.host[1].address" into table path "hosts.host", index 1, key "address".
    let (table, key) = field.rsplit_once('.').unwrap_or(("", field));
    let (table, index) = match table.split_once('[') {
        Some((t, rest)) => (t, rest.trim_end_matches(']').parse::<usize>().ok()),
        None => (table, None),
    };
    let mut current = String::new();
    let mut occurrence: Option<usize> = None;
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if let Some(header) = line.strip_prefix("[[") {
            current = header.split("]]").next().unwrap_or("").trim().to_string();
            if current == table {
                occurrence = Some(occurrence.map_or(0, |o| o + 1));
            }
            continue;
        }
        if let Some(header) = line.strip_prefix('[') {
            current = header.split(']').next().unwrap_or("").trim().to_string();
            continue;
        }
        let Some((k, _)) = line.split_once('=') else {
            continue;
        };
        let k = k.trim().trim_matches('"');
        let full = if current.is_empty() {
            k.to_string()
        } else {
            format!("{current}.{k}")
        };
        let index_matches = index.is_none() || index == occurrence;
        if index_matches && (full == format!("{table}.{key}") || (table.is_empty() && full == key))
        {
            return Some(n + 1);
        }
        // A table-level field (`load.rate` reported for `[load]`): the key line itself.
        if index.is_none() && full == field {
            return Some(n + 1);
        }
    }
    // Fall back to the table's header, so the user at least knows where to look.
    text.lines()
        .position(|l| {
            let l = l.trim();
            l == format!("[{table}]") || l == format!("[[{table}]]")
        })
        .map(|n| n + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ClusterConfig, ConfigError> {
        ClusterConfig::parse(text, Path::new("test.toml"))
    }

    #[test]
    fn empty_file_is_the_defaults() {
        let c = parse("").unwrap();
        assert_eq!(c.name, "local");
        assert_eq!(c.store.members, 3);
        assert_eq!(c.total_nodes(), 1000);
        assert_eq!(c.hosts.mode, HostMode::Local);
    }

    #[test]
    fn full_config_parses() {
        let c = parse(
            r#"
name = "ha"
runtime = "realistic"
admission_plugins = ["NamespaceLifecycle"]
[store]
members = 5
tick_ms = 20
[apiserver]
replicas = 2
[scheduler]
replicas = 2
[nodes]
hosts = 3
per_host = 10
cpu = "8"
memory = "32Gi"
labels = { "kemu.io/pool" = "a" }
taints = [{ key = "dedicated", value = "x", effect = "NoSchedule" }]
zones = ["z1"]
[hosts]
mode = "netns"
[[hosts.host]]
name = "cp"
components = ["s1", "apiserver-1"]
"#,
        )
        .unwrap();
        assert_eq!(c.runtime, RuntimeProfile::Realistic);
        assert_eq!(c.nodes.taints[0].effect, TaintEffect::NoSchedule);
        assert_eq!(c.hosts.hosts[0].components.len(), 2);
    }

    #[test]
    fn store_batch_linger_is_bounded() {
        let c = parse("[apiserver]\nstore_batch_linger_us = 2000\n").unwrap();
        assert_eq!(c.apiserver.store_batch_linger_us, 2000);
        assert_eq!(parse("").unwrap().apiserver.store_batch_linger_us, 2000);
        let e = parse("[apiserver]\nstore_batch_linger_us = 100001\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("apiserver.store_batch_linger_us"), "{e}");
    }

    #[test]
    fn unknown_key_names_key_and_line() {
        let e = parse("name = \"x\"\n\n[nodes]\nper_host = 3\ncpus = \"4\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 5"), "{e}");
        assert!(e.contains("cpus"), "{e}");
    }

    #[test]
    fn unknown_top_level_keys_name_key_and_line_unless_another_tool_owns_them() {
        let text = "name = \"x\"\nnmae = \"y\"\n";
        let e = parse(text).unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("`nmae`"), "{e}");
        let text = "name = \"x\"\n\n[load]\npods = 1\n";
        let e = parse(text).unwrap_err().to_string();
        assert!(e.contains("line 3") && e.contains("`load`"), "{e}");
        let e = parse("[[load.phase]]\nx = 1\n").unwrap_err().to_string();
        assert!(e.contains("line 1") && e.contains("`load`"), "{e}");
        let c = ClusterConfig::parse_with(text, Path::new("t.toml"), &["load"]).unwrap();
        assert_eq!(c.name, "x");
        let e = ClusterConfig::parse_with("[lod]\n", Path::new("t.toml"), &["load"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("`lod`") && e.contains("`load`"), "{e}");
    }

    #[test]
    fn every_listed_key_is_a_key_of_the_config() {
        // A key the struct knows fails on its value's type; an unknown one on its name.
        for key in KEYS {
            let e = parse(&format!("{key} = 1.5\n")).unwrap_err().to_string();
            assert!(!e.contains("unknown field"), "{key}: {e}");
        }
    }

    #[test]
    fn wrong_type_names_key_and_line() {
        let e = parse("[store]\nmembers = \"three\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2") && e.contains("store.members"), "{e}");
        let e = parse("runtime = \"fast\"\n").unwrap_err().to_string();
        assert!(e.contains("line 1") && e.contains("runtime"), "{e}");
    }

    #[test]
    fn bad_values_name_field_and_line() {
        let e = parse("[store]\ntick_ms = 5\nmembers = 0\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 3") && e.contains("store.members"), "{e}");
        let e = parse("[nodes]\n\nmemory = \"lots\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 3") && e.contains("nodes.memory"), "{e}");
        let e = parse(
            "[hosts]\nmode = \"remote\"\n[[hosts.host]]\nname = \"a\"\ncomponents = [\"s9\"]\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("hosts.host[0].address"), "{e}");
        let e = parse(
            "[hosts]\nmode = \"netns\"\n[[hosts.host]]\nname = \"a\"\ncomponents = [\"s9\"]\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("line 5") && e.contains("s9"), "{e}");
    }

    #[test]
    fn addressing_limits_name_the_key() {
        let e = parse("[nodes]\nhosts = 20\nper_host = 5000\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("line 3: nodes.per_host: 100000 nodes (20 hosts × 5000 per host) need 100000 /24 ranges but nodes.cluster_cidr 10.128.0.0/9 holds 32768"),
            "{e}"
        );
        let c = parse("[nodes]\nhosts = 20\nper_host = 5000\ncluster_cidr = \"10.0.0.0/8\"\nnode_cidr_mask_size = 25\n").unwrap();
        assert_eq!(c.total_nodes(), 100_000);
        let e = parse("[nodes]\npods = 200\nnode_cidr_mask_size = 25\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2: nodes.pods: 200 pods per node need 200 addresses but a /25 node range (nodes.node_cidr_mask_size) gives 125"), "{e}");
        let e = parse(
            "[nodes]\ncluster_cidr = \"10.128.0.0/9,fd00:10::/48\"\nnode_cidr_mask_size = 24\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("line 3: nodes.node_cidr_mask_size: not allowed with a dual-stack"),
            "{e}"
        );
        let c = parse("[nodes]\ncluster_cidr = \"10.128.0.0/9,fd00:10::/48\"\nnode_ip_cidr = \"fd00:64::/64\"\n").unwrap();
        assert_eq!(c.nodes.node_cidr_mask_size_ipv6, None);
        let e = parse("[nodes]\nnode_ip_cidr = \"10.200.0.0/16\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("line 2: nodes.node_ip_cidr: 10.200.0.0/16 overlaps"),
            "{e}"
        );
    }

    #[test]
    fn netns_host_count_is_checked_before_anything_starts() {
        let e = parse("[nodes]\nhosts = 300\nper_host = 1\n[hosts]\nmode = \"netns\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("line 5: hosts.mode: netns mode holds at most 250 hosts")
                && e.contains("needs 305"),
            "{e}"
        );
    }

    #[test]
    fn storage_settings_reach_the_controller_manager_and_bad_ones_name_the_key() {
        assert!(parse("").unwrap().storage.controller_args().is_empty());
        let c = parse(
            "[storage]\nprovision_latency_ms = 200\nresize_latency_ms = 50\nattach_latency_ms = 100\nnode_capacity = \"10Gi\"\nprovision_failure_rate = 0.25\nattach_failure_rate = 0.5\ndefault_binding_mode = \"WaitForFirstConsumer\"\ndefault_class = false\n",
        )
        .unwrap();
        assert_eq!(
            c.storage.controller_args().join(" "),
            "--volume-provision-latency-ms 200 --volume-resize-latency-ms 50 \
             --volume-attach-latency-ms 100 --volume-node-capacity 10Gi \
             --volume-provision-failure-rate 0.25 --volume-attach-failure-rate 0.5 \
             --default-storage-class-binding-mode WaitForFirstConsumer --no-default-storage-class"
        );
        for (text, line, key) in [
            (
                "[storage]\nnode_capacity = \"lots\"\n",
                2,
                "storage.node_capacity",
            ),
            (
                "[storage]\nnode_capacity = \"-1Gi\"\n",
                2,
                "storage.node_capacity",
            ),
            (
                "[storage]\nnode_capacity = \"0\"\n",
                2,
                "storage.node_capacity",
            ),
            (
                "[storage]\nattach_latency_ms = 1\nprovision_failure_rate = 1.5\n",
                3,
                "storage.provision_failure_rate",
            ),
            (
                "[storage]\nattach_failure_rate = -0.1\n",
                2,
                "storage.attach_failure_rate",
            ),
            (
                "[storage]\ndefault_binding_mode = \"Later\"\n",
                2,
                "storage.default_binding_mode",
            ),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(&format!("line {line}: {key}: ")), "{text}: {e}");
        }
        // Wrong types and unknown keys name the key as well.
        let e = parse("[storage]\nattach_latency_ms = \"fast\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("line 2") && e.contains("storage.attach_latency_ms"),
            "{e}"
        );
        let e = parse("[storage]\nattach_latency = 5\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2") && e.contains("attach_latency"), "{e}");
    }

    #[test]
    fn subnet_must_be_private_24() {
        assert_eq!(parse_subnet("10.1.2.0/24").unwrap(), [10, 1, 2]);
        assert!(parse_subnet("8.8.8.0/24").is_err());
        assert!(parse_subnet("10.1.0.0/16").is_err());
    }
}
