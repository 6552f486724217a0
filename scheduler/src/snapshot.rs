//! [`Snapshot`]: every node's [`NodeInfo`] in one vector (the decision core walks it by index,
//! starting where the last search stopped), with a name index and cluster-wide counts that let
//! plugins skip work nobody asked for. It also holds the *nominated* pods: pods that preempted
//! others and wait for their victims to go, counted on their nominated node for every pod of
//! lower or equal priority (kube-scheduler's nominator).

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;

use crate::node_info::NodeInfo;
use crate::pod_info::PodInfo;
use crate::volumes::VolumeState;

#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    nodes: Vec<NodeInfo>,
    index: HashMap<Arc<str>, usize>,
    /// Pods with any pod (anti-)affinity term, over all nodes.
    pods_with_affinity: usize,
    /// Pods with a required anti-affinity term, over all nodes.
    pods_with_required_anti_affinity: usize,
    /// Node name → the pods nominated to it (not yet bound).
    nominated: HashMap<Arc<str>, Vec<Arc<PodInfo>>>,
    /// Claims, volumes, classes and storage capacity (VolumeBinding).
    volumes: VolumeState,
}

impl Snapshot {
    pub fn new() -> Snapshot {
        Snapshot::default()
    }

    pub fn nodes(&self) -> &[NodeInfo] {
        &self.nodes
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    pub fn node(&self, name: &str) -> Option<&NodeInfo> {
        self.index.get(name).map(|&i| &self.nodes[i])
    }

    pub fn position(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    pub fn volumes(&self) -> &VolumeState {
        &self.volumes
    }

    pub fn volumes_mut(&mut self) -> &mut VolumeState {
        &mut self.volumes
    }

    pub fn pods_with_affinity(&self) -> usize {
        self.pods_with_affinity
    }

    pub fn pods_with_required_anti_affinity(&self) -> usize {
        self.pods_with_required_anti_affinity
    }

    /// Whether any pod is nominated anywhere (lets the filters skip the lookup).
    pub fn has_nominations(&self) -> bool {
        !self.nominated.is_empty()
    }

    /// The pods nominated to `node` whose reservation holds against `pod`: those of higher or
    /// equal priority, other than `pod` itself (kube-scheduler's `addNominatedPods`).
    pub fn nominated_against<'s>(
        &'s self,
        node: &str,
        pod: &'s PodInfo,
    ) -> impl Iterator<Item = &'s Arc<PodInfo>> + 's {
        self.nominated
            .get(node)
            .into_iter()
            .flatten()
            .filter(move |p| p.priority >= pod.priority && p.key != pod.key)
    }

    /// Every pod nominated to `node`.
    pub fn nominated_on(&self, node: &str) -> &[Arc<PodInfo>] {
        self.nominated.get(node).map_or(&[], Vec::as_slice)
    }

    /// Reserves room on `node` for `pod` (replacing an earlier nomination of the same pod there).
    pub fn nominate(&mut self, node: &str, pod: Arc<PodInfo>) {
        self.unnominate(node, &pod.key);
        self.nominated.entry(Arc::from(node)).or_default().push(pod);
    }

    /// Drops the pod's nomination to `node`; returns it if there was one.
    pub fn unnominate(&mut self, node: &str, key: &str) -> Option<Arc<PodInfo>> {
        let list = self.nominated.get_mut(node)?;
        let i = list.iter().position(|p| p.key == key)?;
        let pod = list.swap_remove(i);
        if list.is_empty() {
            self.nominated.remove(node);
        }
        Some(pod)
    }

    /// Adds the node or takes its new state (its pods stay).
    pub fn upsert_node(&mut self, node: &Node) {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        match self.index.get(name) {
            Some(&i) => self.nodes[i].set_node(node),
            None => self.insert(NodeInfo::new(node)),
        }
    }

    /// Adds a prepared node (benchmarks and tests); replaces one of the same name.
    pub fn insert(&mut self, info: NodeInfo) {
        if let Some(&i) = self.index.get(&info.name) {
            self.remove_at(i);
        }
        self.pods_with_affinity += info.pods_with_affinity;
        self.pods_with_required_anti_affinity += info.pods_with_required_anti_affinity;
        self.index.insert(info.name.clone(), self.nodes.len());
        self.nodes.push(info);
    }

    /// Removes the node; returns it (with its pods).
    pub fn remove_node(&mut self, name: &str) -> Option<NodeInfo> {
        let i = *self.index.get(name)?;
        Some(self.remove_at(i))
    }

    fn remove_at(&mut self, i: usize) -> NodeInfo {
        let removed = self.nodes.swap_remove(i);
        self.index.remove(&removed.name);
        if let Some(moved) = self.nodes.get(i) {
            self.index.insert(moved.name.clone(), i);
        }
        self.pods_with_affinity -= removed.pods_with_affinity;
        self.pods_with_required_anti_affinity -= removed.pods_with_required_anti_affinity;
        removed
    }

    /// Places the pod on the node; false if the node is unknown.
    pub fn add_pod(&mut self, node: &str, pod: Arc<PodInfo>) -> bool {
        let Some(&i) = self.index.get(node) else {
            return false;
        };
        if pod.has_pod_affinity_terms() {
            self.pods_with_affinity += 1;
        }
        if !pod.anti_affinity.is_empty() {
            self.pods_with_required_anti_affinity += 1;
        }
        self.nodes[i].add_pod(pod);
        true
    }

    /// Takes the pod off the node; returns it if it was there.
    pub fn remove_pod(&mut self, node: &str, key: &str) -> Option<Arc<PodInfo>> {
        let i = *self.index.get(node)?;
        let pod = self.nodes[i].remove_pod(key)?;
        if pod.has_pod_affinity_terms() {
            self.pods_with_affinity -= 1;
        }
        if !pod.anti_affinity.is_empty() {
            self.pods_with_required_anti_affinity -= 1;
        }
        Some(pod)
    }
}
