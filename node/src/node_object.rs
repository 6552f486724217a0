//! [`NodeIdentity`]: everything that tells one emulated node from another — its name, IPs,
//! podCIDR, zone, system info — and the Node object, status and Lease built from it.

use std::net::IpAddr;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{json, Value};

use crate::addressing::{Addressing, Cidr};
use crate::api_time::rfc3339;
use crate::config::NodeHostConfig;
use crate::runtime::Resources;

/// The namespace of node leases.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";

/// One node's fixed facts, derived from its cluster-wide index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeIdentity {
    pub name: String,
    /// Index across the cluster (this host's offset included).
    pub index: usize,
    /// One per family of the node IP range, primary first.
    pub internal_ips: Vec<IpAddr>,
    /// The node's pod ranges (podCIDRs), one per family of the cluster CIDR, primary first.
    pub pod_cidrs: Vec<Cidr>,
    pub zone: String,
}

impl NodeIdentity {
    pub fn new(config: &NodeHostConfig, addressing: &Addressing, local: usize) -> NodeIdentity {
        let index = config.first_index + local;
        NodeIdentity {
            name: config.node_name(local),
            index,
            internal_ips: addressing.node_ips(index),
            pod_cidrs: addressing.pod_cidrs(index),
            zone: config.zones[index % config.zones.len()].clone(),
        }
    }

    /// `spec.podCIDRs` (and its first, `spec.podCIDR`).
    pub fn pod_cidr_texts(&self) -> Vec<String> {
        self.pod_cidrs.iter().map(Cidr::to_string).collect()
    }

    /// Stable pseudo-random hex for machine and boot ids.
    fn hex(&self, salt: &str, len: usize) -> String {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut out = String::new();
        let mut round = 0u8;
        while out.len() < len {
            for b in salt.bytes().chain(self.name.bytes()).chain([round]) {
                h ^= b as u64;
                h = h.wrapping_mul(0x100_0000_01b3);
            }
            out.push_str(&format!("{h:016x}"));
            round += 1;
        }
        out.truncate(len);
        out
    }

    fn uuid(&self, salt: &str) -> String {
        let h = self.hex(salt, 32);
        format!(
            "{}-{}-{}-{}-{}",
            &h[..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..]
        )
    }

    /// The Node as the kubelet registers it.
    pub fn node(&self, config: &NodeHostConfig, logs_addr: &str, now: DateTime<Utc>) -> Value {
        let mut labels = json!({
            "beta.kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/hostname": self.name,
            "kubernetes.io/os": "linux",
            "node.kubernetes.io/instance-type": "kemu-emulated",
            "topology.kubernetes.io/region": "kemu",
            "topology.kubernetes.io/zone": self.zone,
            "kemu.dev/emulated": "true",
            // The emulated CSI driver's topology segment, as the kubelet labels its Node when
            // a driver's node plugin registers.
            api::volumes::EMULATED_TOPOLOGY_KEY: self.name,
        });
        for (k, v) in &config.labels {
            labels[k] = json!(v);
        }
        let taints: Vec<Value> = config
            .taints
            .iter()
            .map(|t| {
                let mut taint = json!({"key": t.key, "effect": t.effect});
                if !t.value.is_empty() {
                    taint["value"] = json!(t.value);
                }
                taint
            })
            .collect();
        let cidrs = self.pod_cidr_texts();
        let mut spec = json!({
            "podCIDR": cidrs.first(),
            "podCIDRs": cidrs,
            "providerID": format!("kemu://{}", self.name),
        });
        if !taints.is_empty() {
            spec["taints"] = json!(taints);
        }
        json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": labels,
                "annotations": {
                    "node.alpha.kubernetes.io/ttl": "0",
                    "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                    api::node_logs::NODE_HOST_LOGS_ANNOTATION: logs_addr,
                },
            },
            "spec": spec,
            "status": self.status(config, now, now),
        })
    }

    /// NodeStatus: capacity, conditions (heartbeat `now`, transitions at `since`), addresses,
    /// daemon endpoints and system info.
    pub fn status(
        &self,
        config: &NodeHostConfig,
        now: DateTime<Utc>,
        since: DateTime<Utc>,
    ) -> Value {
        let resources = json!({
            "cpu": config.cpu,
            "memory": config.memory,
            "pods": config.pods,
            "ephemeral-storage": config.ephemeral_storage,
            "hugepages-1Gi": "0",
            "hugepages-2Mi": "0",
        });
        let condition = |kind: &str, status: &str, reason: &str, message: &str| {
            json!({
                "type": kind, "status": status, "reason": reason, "message": message,
                "lastHeartbeatTime": rfc3339(now), "lastTransitionTime": rfc3339(since),
            })
        };
        let mut addresses: Vec<Value> = self
            .internal_ips
            .iter()
            .map(|ip| json!({"type": "InternalIP", "address": ip.to_string()}))
            .collect();
        addresses.push(json!({"type": "Hostname", "address": self.name}));
        json!({
            "capacity": resources,
            "allocatable": resources,
            "phase": "Running",
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
            ],
            "addresses": addresses,
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": self.hex("machine", 32),
                "systemUUID": self.uuid("system"),
                "bootID": self.uuid("boot"),
                "kernelVersion": "6.8.0-kemu",
                "osImage": "kemu emulated node (Debian GNU/Linux 12)",
                "containerRuntimeVersion": "containerd://1.7.24-kemu",
                "kubeletVersion": config.kubelet_version,
                "kubeProxyVersion": config.kubelet_version,
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        })
    }

    /// The node's Lease, renewed at `now`.
    pub fn lease(&self, config: &NodeHostConfig, node_uid: &str, now: DateTime<Utc>) -> Value {
        let mut lease = json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": LEASE_NAMESPACE},
            "spec": {
                "holderIdentity": self.name,
                "leaseDurationSeconds": config.lease_duration_seconds,
                "renewTime": micro_time(now),
            },
        });
        if !node_uid.is_empty() {
            lease["metadata"]["ownerReferences"] = json!([{
                "apiVersion": "v1", "kind": "Node", "name": self.name, "uid": node_uid,
            }]);
        }
        lease
    }
}

/// What the node offers pods, for admission.
pub fn allocatable(config: &NodeHostConfig) -> Resources {
    let q = |s: &str| api::quantity::parse(s).ok();
    Resources {
        cpu_milli: q(&config.cpu).map_or(0, |q| q.as_milli()),
        memory: q(&config.memory).map_or(0, |q| q.as_units()),
        pods: q(&config.pods).map_or(0, |q| q.as_units()),
    }
}

/// Kubernetes' MicroTime format.
pub fn micro_time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_are_unique_and_complete() {
        let config = NodeHostConfig {
            first_index: 300,
            ..Default::default()
        };
        let addressing = config.addressing().expect("valid");
        let a = NodeIdentity::new(&config, &addressing, 0);
        let b = NodeIdentity::new(&config, &addressing, 1);
        assert_eq!(a.name, "node-300");
        assert_eq!(a.pod_cidr_texts(), ["10.129.44.0/24"]);
        assert_ne!(a.pod_cidrs, b.pod_cidrs);
        assert_ne!(a.internal_ips, b.internal_ips);
        let node = a.node(&config, "127.0.0.1:1", Utc::now());
        let info = node["status"]["nodeInfo"].as_object().expect("nodeInfo");
        assert_eq!(info.len(), 10);
        assert!(info
            .values()
            .all(|v| v.as_str().is_some_and(|s| !s.is_empty())));
        assert_eq!(
            node["metadata"]["labels"]["kubernetes.io/hostname"],
            "node-300"
        );
        assert_eq!(
            node["status"]["conditions"].as_array().map(Vec::len),
            Some(4)
        );
        let typed: k8s_openapi::api::core::v1::Node = serde_json::from_value(node).expect("a Node");
        assert_eq!(
            typed.spec.and_then(|s| s.pod_cidr).as_deref(),
            Some("10.129.44.0/24")
        );
        let lease = a.lease(&config, "uid", Utc::now());
        let typed: k8s_openapi::api::coordination::v1::Lease =
            serde_json::from_value(lease).expect("a Lease");
        assert_eq!(typed.spec.and_then(|s| s.lease_duration_seconds), Some(40));
    }

    #[test]
    fn dual_stack_nodes_have_both_families_primary_first() {
        let config = NodeHostConfig {
            first_index: 70_000,
            cluster_cidr: "fd00:10::/40,10.0.0.0/8".into(),
            node_cidr_mask_size_ipv4: Some(26),
            pods: "60".into(),
            node_ip_cidr: "100.64.0.0/10,fd00:64::/64".into(),
            ..Default::default()
        };
        config.validate().expect("valid");
        let id = NodeIdentity::new(&config, &config.addressing().expect("valid"), 0);
        let node = id.node(&config, "127.0.0.1:1", Utc::now());
        assert_eq!(node["spec"]["podCIDR"], "fd00:10:1:1170::/64");
        assert_eq!(
            node["spec"]["podCIDRs"],
            json!(["fd00:10:1:1170::/64", "10.68.92.0/26"])
        );
        let addresses = &node["status"]["addresses"];
        assert_eq!(addresses[0]["address"], "100.65.17.113");
        assert_eq!(addresses[1]["address"], "fd00:64::1:1171");
        assert_eq!(addresses[2]["type"], "Hostname");
    }
}
