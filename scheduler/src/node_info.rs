//! [`NodeInfo`]: one node as the decision core sees it — its allocatable resources, what its
//! pods (bound and assumed) already request, used host ports, labels, taints and readiness —
//! kept up to date incrementally as pods come and go.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;

use crate::pod_info::{HostPort, PodInfo};
use crate::resources::Resources;

pub const PROTOCOL_TCP: &str = "TCP";

/// A taint's effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl TaintEffect {
    pub fn parse(s: &str) -> Option<TaintEffect> {
        match s {
            "NoSchedule" => Some(TaintEffect::NoSchedule),
            "PreferNoSchedule" => Some(TaintEffect::PreferNoSchedule),
            "NoExecute" => Some(TaintEffect::NoExecute),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: TaintEffect,
}

/// One node and what is placed on it.
#[derive(Clone, Debug)]
pub struct NodeInfo {
    pub name: Arc<str>,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub unschedulable: bool,
    /// The Ready condition is True.
    pub ready: bool,
    pub allocatable: Resources,
    /// The sum of its pods' requests; `pods` counts its pods.
    pub requested: Resources,
    /// cpu and memory requested, counting request-less containers at the defaults (scoring).
    pub non_zero_requested: (i64, i64),
    pub pods: Vec<Arc<PodInfo>>,
    pub used_ports: Vec<HostPort>,
    /// How many of its pods have pod (anti-)affinity terms, so the inter-pod plugins can skip
    /// nodes (and whole clusters) without any.
    pub pods_with_affinity: usize,
    pub pods_with_required_anti_affinity: usize,
}

impl NodeInfo {
    /// A node without pods.
    pub fn new(node: &Node) -> NodeInfo {
        let mut info = NodeInfo {
            name: Arc::from(node.metadata.name.as_deref().unwrap_or_default()),
            labels: BTreeMap::new(),
            taints: Vec::new(),
            unschedulable: false,
            ready: false,
            allocatable: Resources::default(),
            requested: Resources::default(),
            non_zero_requested: (0, 0),
            pods: Vec::new(),
            used_ports: Vec::new(),
            pods_with_affinity: 0,
            pods_with_required_anti_affinity: 0,
        };
        info.set_node(node);
        info
    }

    /// Takes the node object's labels, taints, readiness and allocatable (keeping the pods).
    pub fn set_node(&mut self, node: &Node) {
        self.labels = node.metadata.labels.clone().unwrap_or_default();
        let spec = node.spec.as_ref();
        self.unschedulable = spec.and_then(|s| s.unschedulable).unwrap_or(false);
        self.taints = spec
            .and_then(|s| s.taints.as_ref())
            .map(|ts| {
                ts.iter()
                    .filter_map(|t| {
                        Some(Taint {
                            key: t.key.clone(),
                            value: t.value.clone().unwrap_or_default(),
                            effect: TaintEffect::parse(&t.effect)?,
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        let status = node.status.as_ref();
        self.ready = status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        self.allocatable = status
            .and_then(|s| s.allocatable.as_ref().or(s.capacity.as_ref()))
            .map(Resources::from_list)
            .unwrap_or_default();
    }

    pub fn add_pod(&mut self, pod: Arc<PodInfo>) {
        if pod.holds_resources() {
            self.requested.add(&pod.requests);
            self.non_zero_requested.0 += pod.non_zero.0;
            self.non_zero_requested.1 += pod.non_zero.1;
            self.used_ports.extend(pod.host_ports.iter().cloned());
        }
        if !pod.affinity.is_empty()
            || !pod.anti_affinity.is_empty()
            || !pod.preferred_affinity.is_empty()
            || !pod.preferred_anti_affinity.is_empty()
        {
            self.pods_with_affinity += 1;
        }
        if !pod.anti_affinity.is_empty() {
            self.pods_with_required_anti_affinity += 1;
        }
        self.pods.push(pod);
    }

    /// Removes the pod with this key; returns it if it was there.
    pub fn remove_pod(&mut self, key: &str) -> Option<Arc<PodInfo>> {
        let i = self.pods.iter().position(|p| p.key == key)?;
        let pod = self.pods.swap_remove(i);
        if pod.holds_resources() {
            self.requested.sub(&pod.requests);
            self.non_zero_requested.0 -= pod.non_zero.0;
            self.non_zero_requested.1 -= pod.non_zero.1;
            for port in &pod.host_ports {
                if let Some(j) = self.used_ports.iter().position(|p| p == port) {
                    self.used_ports.swap_remove(j);
                }
            }
        }
        if pod.has_pod_affinity_terms() {
            self.pods_with_affinity -= 1;
        }
        if !pod.anti_affinity.is_empty() {
            self.pods_with_required_anti_affinity -= 1;
        }
        Some(pod)
    }
}
