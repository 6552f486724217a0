//! [`NodeHostConfig`]: what one node host runs (how many nodes, their shape) and how its emulated
//! runtime behaves ([`RuntimeProfile`]). A plain struct with defaults in one place and a
//! [`validate`](NodeHostConfig::validate) naming the bad field; the optional TOML file of
//! `kemu node-host --config` deserializes into it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use transport::Endpoint;

use crate::addressing::{
    Addressing, AddressingError, AddressingSettings, DEFAULT_CLUSTER_CIDR, DEFAULT_NODE_IP_CIDR,
};

/// A configuration that cannot work.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("node host config {field}: {reason}")]
    Invalid { field: String, reason: String },
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot parse {path}: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: toml::de::Error,
    },
}

fn addressing_error(e: AddressingError) -> ConfigError {
    ConfigError::Invalid {
        field: e.key,
        reason: e.reason,
    }
}

/// One taint every node of the host carries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaintConfig {
    pub key: String,
    #[serde(default)]
    pub value: String,
    /// NoSchedule, PreferNoSchedule or NoExecute.
    pub effect: String,
}

/// How long each emulated runtime operation takes. Two presets: [`RuntimeProfile::realistic`]
/// and [`RuntimeProfile::instant`] (pure control-plane load).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RuntimeProfile {
    pub run_sandbox_ms: u64,
    /// A pull of an image not in the node's cache.
    pub pull_image_ms: u64,
    pub create_container_ms: u64,
    pub start_container_ms: u64,
    /// How long a process that handles SIGTERM takes to exit after it.
    pub stop_container_ms: u64,
    pub stop_sandbox_ms: u64,
    pub remove_sandbox_ms: u64,
    /// Each latency is drawn uniformly from ±jitter_percent around its value.
    pub jitter_percent: u8,
}

impl RuntimeProfile {
    /// Latencies of a containerd node on a good day.
    pub fn realistic() -> RuntimeProfile {
        RuntimeProfile {
            run_sandbox_ms: 300,
            pull_image_ms: 1500,
            create_container_ms: 100,
            start_container_ms: 150,
            stop_container_ms: 200,
            stop_sandbox_ms: 100,
            remove_sandbox_ms: 50,
            jitter_percent: 20,
        }
    }

    /// Every operation completes at once.
    pub fn instant() -> RuntimeProfile {
        RuntimeProfile {
            run_sandbox_ms: 0,
            pull_image_ms: 0,
            create_container_ms: 0,
            start_container_ms: 0,
            stop_container_ms: 0,
            stop_sandbox_ms: 0,
            remove_sandbox_ms: 0,
            jitter_percent: 0,
        }
    }

    /// A named preset.
    pub fn named(name: &str) -> Option<RuntimeProfile> {
        match name {
            "realistic" => Some(RuntimeProfile::realistic()),
            "instant" => Some(RuntimeProfile::instant()),
            _ => None,
        }
    }
}

impl Default for RuntimeProfile {
    fn default() -> Self {
        RuntimeProfile::realistic()
    }
}

/// The sandbox ("pause") image of containerd 2.x, which every node has before its first pod.
pub const SANDBOX_IMAGE: &str = "registry.k8s.io/pause:3.10";

/// Everything a node host needs besides the API client.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeHostConfig {
    /// Number of emulated nodes (kubelets) in this process.
    pub nodes: usize,
    /// Node names are `<name_prefix><index>` with index from `first_index`.
    pub name_prefix: String,
    /// Offset of this host's nodes in the cluster, so pod CIDRs and node IPs stay unique
    /// across node hosts.
    pub first_index: usize,
    #[serde(deserialize_with = "quantity_text")]
    pub cpu: String,
    #[serde(deserialize_with = "quantity_text")]
    pub memory: String,
    #[serde(deserialize_with = "quantity_text")]
    pub pods: String,
    #[serde(deserialize_with = "quantity_text")]
    pub ephemeral_storage: String,
    /// Extra labels on every node.
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<TaintConfig>,
    /// Zones assigned round-robin (`topology.kubernetes.io/zone`).
    pub zones: Vec<String>,
    pub kubelet_version: String,
    /// Lease renewal period; each renewal waits up to 4 % longer (kubelet's jitter
    /// factor 0.04).
    #[serde(with = "secs")]
    pub lease_interval: Duration,
    pub lease_duration_seconds: i32,
    /// NodeStatus is reported on change and at least this often.
    #[serde(with = "secs")]
    pub status_report_interval: Duration,
    /// Runtime latencies: a preset name (`runtime = "instant"`) or a table of latencies
    /// (`[runtime]`, unset ones from `realistic`).
    #[serde(deserialize_with = "profile_or_name")]
    pub runtime: RuntimeProfile,
    /// Images whose name contains any of these fail to pull.
    pub failing_image_patterns: Vec<String>,
    /// Images every node has from the start, as a provisioned node has its runtime's sandbox
    /// image: a container using one starts with "already present on machine", no pull.
    pub images: Vec<String>,
    /// Static pod manifests: `<dir>/<node name>/*.yaml` (and `<dir>/*.yaml` for every node).
    pub static_pod_dir: Option<PathBuf>,
    /// Where the node host serves container logs (QUIC); port 0 picks one.
    pub logs_addr: SocketAddr,
    /// The address the API server reaches `logs_addr` at, when it differs (e.g. 0.0.0.0): an
    /// address or `host:port`, which must then be in the node host's certificate.
    pub logs_advertise: Option<Endpoint>,
    /// How many nodes register at once at start-up.
    pub startup_concurrency: usize,
    /// Where the nodes' pod ranges come from, as kube-controller-manager's `--cluster-cidr`:
    /// one CIDR, or an IPv4 and an IPv6 one for dual-stack (`10.128.0.0/9,fd00:10::/48`).
    pub cluster_cidr: String,
    /// Prefix length of each node's pod range for a single-stack `cluster_cidr`
    /// (`--node-cidr-mask-size`); by default 24 for IPv4 and 64 for IPv6.
    pub node_cidr_mask_size: Option<u8>,
    /// The same per family (`--node-cidr-mask-size-ipv4`/`-ipv6`), for dual-stack.
    pub node_cidr_mask_size_ipv4: Option<u8>,
    pub node_cidr_mask_size_ipv6: Option<u8>,
    /// Where the nodes' InternalIPs come from: one CIDR per family, node `i` gets address `i + 1`.
    pub node_ip_cidr: String,
    /// Seed of the jitter RNG; unset seeds from the OS.
    pub seed: Option<u64>,
}

/// A quantity written as a string or a bare number (`pods = 110`).
fn quantity_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Text {
        S(String),
        I(i64),
        F(f64),
    }
    Ok(match Text::deserialize(d)? {
        Text::S(s) => s,
        Text::I(i) => i.to_string(),
        Text::F(f) => f.to_string(),
    })
}

/// `runtime = "realistic"` or a `[runtime]` table.
fn profile_or_name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<RuntimeProfile, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        Name(String),
        Table(RuntimeProfile),
    }
    match Either::deserialize(d)? {
        Either::Name(name) => RuntimeProfile::named(&name).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "unknown runtime profile {name:?} (realistic or instant)"
            ))
        }),
        Either::Table(p) => Ok(p),
    }
}

mod secs {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let secs = f64::deserialize(d)?;
        if !secs.is_finite() || secs < 0.0 {
            return Err(serde::de::Error::custom(
                "must be a non-negative number of seconds",
            ));
        }
        Ok(Duration::from_secs_f64(secs))
    }
}

impl Default for NodeHostConfig {
    fn default() -> Self {
        NodeHostConfig {
            nodes: 1,
            name_prefix: "node-".into(),
            first_index: 0,
            cpu: "32".into(),
            memory: "256Gi".into(),
            pods: "110".into(),
            ephemeral_storage: "100Gi".into(),
            labels: BTreeMap::new(),
            taints: Vec::new(),
            zones: vec!["zone-a".into(), "zone-b".into(), "zone-c".into()],
            kubelet_version: "v1.34.0-kemu".into(),
            lease_interval: Duration::from_secs(10),
            lease_duration_seconds: 40,
            status_report_interval: Duration::from_secs(300),
            runtime: RuntimeProfile::realistic(),
            failing_image_patterns: vec!["fail".into(), "doesnotexist".into()],
            images: vec![SANDBOX_IMAGE.into()],
            static_pod_dir: None,
            logs_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            logs_advertise: None,
            startup_concurrency: 64,
            seed: None,
            cluster_cidr: DEFAULT_CLUSTER_CIDR.into(),
            node_cidr_mask_size: None,
            node_cidr_mask_size_ipv4: None,
            node_cidr_mask_size_ipv6: None,
            node_ip_cidr: DEFAULT_NODE_IP_CIDR.into(),
        }
    }
}

impl NodeHostConfig {
    /// Reads a TOML file; fields it leaves out keep their defaults.
    pub fn from_file(path: &std::path::Path) -> Result<NodeHostConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        toml::from_str(&text).map_err(|source| ConfigError::Parse {
            path: path.to_path_buf(),
            source,
        })
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |field: &str, reason: &str| {
            Err(ConfigError::Invalid {
                field: field.into(),
                reason: reason.into(),
            })
        };
        if self.nodes == 0 {
            return invalid("nodes", "at least one node");
        }
        if self.name_prefix.is_empty()
            || !self
                .name_prefix
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        {
            return invalid("name_prefix", "must be a non-empty DNS-1123 prefix");
        }
        for (field, value) in [
            ("cpu", &self.cpu),
            ("memory", &self.memory),
            ("pods", &self.pods),
            ("ephemeral_storage", &self.ephemeral_storage),
        ] {
            if api::quantity::parse(value).is_err() {
                return invalid(field, "not a quantity");
            }
        }
        if self.lease_interval.is_zero() {
            return invalid("lease_interval", "must be positive");
        }
        if self.lease_duration_seconds <= 0
            || Duration::from_secs(self.lease_duration_seconds as u64) <= self.lease_interval
        {
            return invalid(
                "lease_duration_seconds",
                "must be longer than lease_interval",
            );
        }
        if self.status_report_interval.is_zero() {
            return invalid("status_report_interval", "must be positive");
        }
        if self.runtime.jitter_percent > 100 {
            return invalid("runtime.jitter_percent", "at most 100");
        }
        for t in &self.taints {
            if !matches!(
                t.effect.as_str(),
                "NoSchedule" | "PreferNoSchedule" | "NoExecute"
            ) {
                return invalid(
                    "taints",
                    "effect must be NoSchedule, PreferNoSchedule or NoExecute",
                );
            }
        }
        if self.zones.is_empty() {
            return invalid("zones", "at least one zone");
        }
        if self.startup_concurrency == 0 {
            return invalid("startup_concurrency", "must be positive");
        }
        let end = (self.first_index as u64).saturating_add(self.nodes as u64);
        let pods = api::quantity::parse(&self.pods).map_or(0, |q| q.as_units().max(0) as u64);
        let what = format!(
            "nodes {}{} to {}{}",
            self.name_prefix,
            self.first_index,
            self.name_prefix,
            end - 1
        );
        self.addressing()?
            .check(end, pods, &what, "", "nodes")
            .map_err(addressing_error)?;
        Ok(())
    }

    /// Where this host's nodes get their pod ranges and addresses.
    pub fn addressing(&self) -> Result<Addressing, ConfigError> {
        Addressing::new(
            &AddressingSettings {
                cluster_cidr: &self.cluster_cidr,
                node_cidr_mask_size: self.node_cidr_mask_size,
                node_cidr_mask_size_ipv4: self.node_cidr_mask_size_ipv4,
                node_cidr_mask_size_ipv6: self.node_cidr_mask_size_ipv6,
                node_ip_cidr: &self.node_ip_cidr,
            },
            "",
        )
        .map_err(addressing_error)
    }

    /// The name of this host's `i`-th node.
    pub fn node_name(&self, i: usize) -> String {
        format!("{}{}", self.name_prefix, self.first_index + i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_fields_are_named() {
        NodeHostConfig::default().validate().expect("valid");
        let bad = NodeHostConfig {
            cpu: "lots".into(),
            ..Default::default()
        };
        assert!(bad.validate().unwrap_err().to_string().contains("cpu"));
        let bad = NodeHostConfig {
            lease_duration_seconds: 5,
            ..Default::default()
        };
        assert!(bad
            .validate()
            .unwrap_err()
            .to_string()
            .contains("lease_duration_seconds"));
    }

    #[test]
    fn toml_overrides_defaults() {
        let c: NodeHostConfig = toml::from_str(
            "nodes = 3\nlease_interval = 2.5\n[runtime]\npull_image_ms = 7\n[[taints]]\nkey = \"a\"\neffect = \"NoSchedule\"\n",
        )
        .expect("parses");
        assert_eq!(c.nodes, 3);
        assert_eq!(c.lease_interval, Duration::from_millis(2500));
        assert_eq!(c.runtime.pull_image_ms, 7);
        assert_eq!(c.runtime.run_sandbox_ms, 300);
        assert_eq!(c.taints[0].key, "a");
        c.validate().expect("valid");
        let launcher: NodeHostConfig = toml::from_str(
            "runtime = \"instant\"\ncpu = \"8\"\nmemory = \"32Gi\"\nephemeral_storage = \"100Gi\"\npods = 110\nzones = [\"a\"]\n[labels]\nx = \"y\"\n",
        )
        .expect("the launcher's file parses");
        assert_eq!(launcher.runtime, RuntimeProfile::instant());
        assert_eq!(launcher.pods, "110");
        launcher.validate().expect("valid");
    }
}
