//! Synthetic nodes and pods, for tests and `kemu bench scheduler`.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Container, Node, NodeCondition, NodeSpec, NodeStatus, Pod, PodSpec, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::node_info::NodeInfo;
use crate::pod_info::PodInfo;
use crate::snapshot::Snapshot;

fn quantities(list: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    list.iter()
        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
        .collect()
}

/// A Ready node with this allocatable cpu, memory and pod slots, labelled with its hostname.
pub fn node(name: &str, cpu: &str, memory: &str, pods: u32) -> Node {
    let allocatable = quantities(&[
        ("cpu", cpu),
        ("memory", memory),
        ("pods", &pods.to_string()),
        ("ephemeral-storage", "100Gi"),
    ]);
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(
                [("kubernetes.io/hostname".to_string(), name.to_string())]
                    .into_iter()
                    .collect(),
            ),
            ..Default::default()
        },
        spec: Some(NodeSpec::default()),
        status: Some(NodeStatus {
            capacity: Some(allocatable.clone()),
            allocatable: Some(allocatable),
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

/// A pending pod of one container requesting cpu and memory (either may be empty).
pub fn pod(namespace: &str, name: &str, cpu: &str, memory: &str) -> Pod {
    let mut requests = Vec::new();
    if !cpu.is_empty() {
        requests.push(("cpu", cpu));
    }
    if !memory.is_empty() {
        requests.push(("memory", memory));
    }
    Pod {
        metadata: ObjectMeta {
            namespace: Some(namespace.to_string()),
            name: Some(name.to_string()),
            uid: Some(format!("uid-{namespace}-{name}")),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "c".into(),
                image: Some("pause".into()),
                resources: Some(ResourceRequirements {
                    requests: Some(quantities(&requests)),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    }
}

/// Parses a pod with its declared priority (0 if none).
pub fn info(pod: Pod) -> Arc<PodInfo> {
    let priority = PodInfo::declared_priority(&pod).unwrap_or(0);
    Arc::new(PodInfo::new(&pod, priority))
}

/// A cluster of `n` identical nodes (`node-00000`…) spread over `zones` zones.
pub fn cluster(n: usize, zones: usize, cpu: &str, memory: &str, pods: u32) -> Snapshot {
    let mut snapshot = Snapshot::new();
    for i in 0..n {
        let mut node = node(&format!("node-{i:05}"), cpu, memory, pods);
        if let Some(labels) = node.metadata.labels.as_mut() {
            labels.insert(
                "topology.kubernetes.io/zone".into(),
                format!("zone-{}", i % zones.max(1)),
            );
        }
        snapshot.insert(NodeInfo::new(&node));
    }
    snapshot
}
