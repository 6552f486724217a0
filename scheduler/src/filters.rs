//! The filter plugins, in kube-scheduler's order: NodeUnschedulable, NodeName, NodeReady,
//! TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit, VolumeBinding, PodTopologySpread,
//! InterPodAffinity. [`PodCycle::prepare`] does the per-pod work once (kube-scheduler's
//! PreFilter: counting pods per topology domain), then [`PodCycle::filter`] judges one node.
//!
//! A node fails on the first plugin that rejects it, with that plugin's reasons — the strings
//! users read in `FailedScheduling` events.

use std::collections::HashMap;
use std::fmt;

use crate::node_info::{NodeInfo, TaintEffect};
use crate::pod_info::{AffinityTerm, PodInfo};
use crate::snapshot::Snapshot;
use crate::volumes::{PodVolumes, VolumeState};

/// Why a node does not fit, worded as kube-scheduler words it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    NodeName,
    Unschedulable,
    /// An untolerated taint (also how a node that is not Ready is reported: the node lifecycle
    /// controller would have tainted it `node.kubernetes.io/not-ready`).
    UntoleratedTaint {
        key: String,
        value: String,
    },
    NodeAffinity,
    NodePorts,
    TooManyPods,
    /// `Insufficient <resource>`.
    Insufficient(String),
    SpreadMissingLabel,
    Spread,
    PodAffinity,
    PodAntiAffinity,
    ExistingAntiAffinity,
    /// VolumeBinding: a bound claim's volume does not accept the node.
    VolumeNodeConflict,
    /// VolumeBinding: a claim waiting for its first consumer cannot be satisfied on the node.
    VolumeBindConflict,
    /// VolumeBinding: no published capacity the node reaches holds the claim.
    NotEnoughStorage,
    /// VolumeBinding: a claim is bound to a volume that does not exist.
    VolumeNotExist,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::NodeName => f.write_str("node(s) didn't match the requested node name"),
            Reason::Unschedulable => f.write_str("node(s) were unschedulable"),
            Reason::UntoleratedTaint { key, value } => {
                write!(f, "node(s) had untolerated taint {{{key}: {value}}}")
            }
            Reason::NodeAffinity => {
                f.write_str("node(s) didn't match Pod's node affinity/selector")
            }
            Reason::NodePorts => {
                f.write_str("node(s) didn't have free ports for the requested pod ports")
            }
            Reason::TooManyPods => f.write_str("Too many pods"),
            Reason::Insufficient(resource) => write!(f, "Insufficient {resource}"),
            Reason::SpreadMissingLabel => f.write_str(
                "node(s) didn't match pod topology spread constraints (missing required label)",
            ),
            Reason::Spread => f.write_str("node(s) didn't match pod topology spread constraints"),
            Reason::PodAffinity => f.write_str("node(s) didn't match pod affinity rules"),
            Reason::PodAntiAffinity => f.write_str("node(s) didn't match pod anti-affinity rules"),
            Reason::ExistingAntiAffinity => {
                f.write_str("node(s) didn't satisfy existing pods anti-affinity rules")
            }
            Reason::VolumeNodeConflict => f.write_str("node(s) had volume node affinity conflict"),
            Reason::VolumeBindConflict => {
                f.write_str("node(s) didn't find available persistent volumes to bind")
            }
            Reason::NotEnoughStorage => f.write_str("node(s) did not have enough free storage"),
            Reason::VolumeNotExist => f.write_str(
                "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)",
            ),
        }
    }
}

/// Why one node was rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeFailure {
    /// The node's position in the snapshot.
    pub node: usize,
    pub reasons: Vec<Reason>,
    /// Kubernetes' `UnschedulableAndUnresolvable`: removing pods from the node would not help,
    /// so preemption skips it.
    pub unresolvable: bool,
}

/// Pod counts per topology domain: topology key → label value → count.
pub type DomainCounts = HashMap<String, HashMap<String, i64>>;

fn bump(counts: &mut DomainCounts, key: &str, value: &str, by: i64) {
    *counts
        .entry(key.to_string())
        .or_default()
        .entry(value.to_string())
        .or_default() += by;
}

fn count_at(counts: &DomainCounts, key: &str, value: &str) -> i64 {
    counts
        .get(key)
        .and_then(|m| m.get(value))
        .copied()
        .unwrap_or(0)
}

/// InterPodAffinity's per-pod state.
#[derive(Debug, Default)]
pub struct InterPodState {
    /// Domains of existing pods whose required anti-affinity matches the incoming pod.
    existing_anti: DomainCounts,
    /// Per required affinity term (by topology key): domains with pods matching all terms.
    affinity: DomainCounts,
    /// Domains with pods matching the incoming pod's required anti-affinity terms.
    anti: DomainCounts,
    /// Whether any existing pod matches all the pod's affinity terms.
    any_affinity_match: bool,
    /// Preferred (anti-)affinity weights per domain, both directions (scoring).
    pub preferred: DomainCounts,
}

/// One topology spread constraint's per-pod state.
#[derive(Debug)]
pub struct SpreadState {
    pub constraint: usize,
    /// Matching pods per domain value, over the eligible nodes.
    pub counts: HashMap<String, i64>,
    /// The smallest count over the domains (0 when there are fewer than minDomains).
    pub min: i64,
    /// 1 if the incoming pod matches its own selector.
    pub self_match: i64,
}

/// The per-pod state of one scheduling attempt (kube-scheduler's CycleState).
#[derive(Debug)]
pub struct PodCycle<'a> {
    pub pod: &'a PodInfo,
    /// `None` when neither the pod nor any existing pod has pod (anti-)affinity.
    pub interpod: Option<InterPodState>,
    /// One per topology spread constraint (hard and soft).
    pub spread: Vec<SpreadState>,
    /// The pod's claims, when it has any (VolumeBinding's PreFilter state).
    pub volumes: Option<PodVolumes>,
    /// The volume state the claims are judged against.
    volume_state: &'a VolumeState,
}

impl<'a> PodCycle<'a> {
    /// The PreFilter work: sorting the pod's claims (a claim that is missing or waits for the
    /// PV controller makes the pod fit nowhere: the error is that message), and counting what
    /// the inter-pod and spread plugins need, over all nodes, and only when the pod or the
    /// cluster asks for it.
    pub fn prepare(snapshot: &'a Snapshot, pod: &'a PodInfo) -> Result<PodCycle<'a>, String> {
        let volume_state = snapshot.volumes();
        let volumes = volume_state.prefilter(pod)?;
        let interpod = (pod.has_pod_affinity_terms() || snapshot.pods_with_affinity() > 0)
            .then(|| prepare_interpod(snapshot, pod));
        let spread = prepare_spread(snapshot, pod);
        Ok(PodCycle {
            pod,
            interpod,
            spread,
            volumes,
            volume_state,
        })
    }

    /// Runs the filters on the snapshot's node `index`, honouring nominations: when pods of
    /// higher or equal priority are nominated to the node (they preempted others and wait for
    /// their victims to go), the node must fit this pod with them counted as if already there,
    /// and also without them (kube-scheduler's `RunFilterPluginsWithNominatedPods`). So the room
    /// freed by preemption stays reserved for the preemptor.
    pub fn filter_in(&self, snapshot: &Snapshot, index: usize) -> Result<(), NodeFailure> {
        let node = &snapshot.nodes()[index];
        if snapshot.has_nominations() {
            let mut nominated = snapshot.nominated_against(&node.name, self.pod).peekable();
            if nominated.peek().is_some() {
                let mut with = node.clone();
                for p in nominated {
                    with.add_pod(p.clone());
                }
                self.filter(&with, index)?;
            }
        }
        self.filter(node, index)
    }

    /// Runs every filter on the node; the first that rejects it decides the reasons.
    pub fn filter(&self, node: &NodeInfo, index: usize) -> Result<(), NodeFailure> {
        let pod = self.pod;
        let fail = |reasons: Vec<Reason>, unresolvable: bool| {
            Err(NodeFailure {
                node: index,
                reasons,
                unresolvable,
            })
        };
        // NodeUnschedulable
        if node.unschedulable
            && !pod.tolerates(
                "node.kubernetes.io/unschedulable",
                "",
                TaintEffect::NoSchedule,
            )
        {
            return fail(vec![Reason::Unschedulable], true);
        }
        // NodeName
        if pod.node_name.as_deref().is_some_and(|n| n != &*node.name) {
            return fail(vec![Reason::NodeName], true);
        }
        // NodeReady: reported like the not-ready taint the node lifecycle controller sets.
        if !node.ready
            && !pod.tolerates("node.kubernetes.io/not-ready", "", TaintEffect::NoSchedule)
        {
            return fail(
                vec![Reason::UntoleratedTaint {
                    key: "node.kubernetes.io/not-ready".into(),
                    value: String::new(),
                }],
                true,
            );
        }
        // TaintToleration
        for taint in &node.taints {
            if taint.effect != TaintEffect::PreferNoSchedule
                && !pod.tolerates(&taint.key, &taint.value, taint.effect)
            {
                return fail(
                    vec![Reason::UntoleratedTaint {
                        key: taint.key.clone(),
                        value: taint.value.clone(),
                    }],
                    true,
                );
            }
        }
        // NodeAffinity (with nodeSelector)
        if !pod.accepts_node(&node.name, &node.labels) {
            return fail(vec![Reason::NodeAffinity], true);
        }
        // NodePorts
        if !pod.host_ports.is_empty()
            && pod
                .host_ports
                .iter()
                .any(|want| node.used_ports.iter().any(|used| used.conflicts(want)))
        {
            return fail(vec![Reason::NodePorts], false);
        }
        // NodeResourcesFit
        let insufficient = insufficient_resources(node, pod);
        if !insufficient.is_empty() {
            return fail(insufficient, false);
        }
        // VolumeBinding
        if let Some(volumes) = &self.volumes {
            if let Err(reasons) = self.volume_state.filter(volumes, &node.name, &node.labels) {
                return fail(reasons, true);
            }
        }
        // PodTopologySpread (DoNotSchedule)
        for state in &self.spread {
            let constraint = &pod.spread[state.constraint];
            if !constraint.hard {
                continue;
            }
            let Some(value) = node.labels.get(&constraint.topology_key) else {
                return fail(vec![Reason::SpreadMissingLabel], true);
            };
            let count = state.counts.get(value).copied().unwrap_or(0);
            if count + state.self_match - state.min > constraint.max_skew {
                return fail(vec![Reason::Spread], false);
            }
        }
        // InterPodAffinity
        if let Some(interpod) = &self.interpod {
            if let Some(reason) = interpod_reject(interpod, pod, node) {
                let unresolvable = reason == Reason::PodAffinity;
                return fail(vec![reason], unresolvable);
            }
        }
        Ok(())
    }
}

/// NodeResourcesFit: every resource the pod requests that the node lacks, pods first.
pub fn insufficient_resources(node: &NodeInfo, pod: &PodInfo) -> Vec<Reason> {
    let (want, have, used) = (&pod.requests, &node.allocatable, &node.requested);
    let mut out = Vec::new();
    if used.pods + 1 > have.pods {
        out.push(Reason::TooManyPods);
    }
    if want.milli_cpu > 0 && want.milli_cpu > have.milli_cpu - used.milli_cpu {
        out.push(Reason::Insufficient("cpu".into()));
    }
    if want.memory > 0 && want.memory > have.memory - used.memory {
        out.push(Reason::Insufficient("memory".into()));
    }
    if want.ephemeral_storage > 0
        && want.ephemeral_storage > have.ephemeral_storage - used.ephemeral_storage
    {
        out.push(Reason::Insufficient("ephemeral-storage".into()));
    }
    for (name, amount) in &want.scalar {
        if *amount > 0 && *amount > have.scalar(name) - used.scalar(name) {
            out.push(Reason::Insufficient(name.to_string()));
        }
    }
    out
}

fn interpod_reject(state: &InterPodState, pod: &PodInfo, node: &NodeInfo) -> Option<Reason> {
    if !state.existing_anti.is_empty()
        && node
            .labels
            .iter()
            .any(|(k, v)| count_at(&state.existing_anti, k, v) > 0)
    {
        return Some(Reason::ExistingAntiAffinity);
    }
    for term in &pod.affinity {
        let satisfied = node
            .labels
            .get(&term.topology_key)
            .is_some_and(|v| count_at(&state.affinity, &term.topology_key, v) > 0);
        if !satisfied {
            // The first pod of a group that selects itself may go anywhere with the key.
            let self_ok = !state.any_affinity_match
                && pod.affinity.iter().all(|t| t.matches_pod(pod))
                && node.labels.contains_key(&term.topology_key);
            if !self_ok {
                return Some(Reason::PodAffinity);
            }
        }
    }
    for term in &pod.anti_affinity {
        if node
            .labels
            .get(&term.topology_key)
            .is_some_and(|v| count_at(&state.anti, &term.topology_key, v) > 0)
        {
            return Some(Reason::PodAntiAffinity);
        }
    }
    None
}

fn prepare_interpod(snapshot: &Snapshot, pod: &PodInfo) -> InterPodState {
    let mut state = InterPodState::default();
    // Without terms of its own, the pod only meets other pods' terms: nodes without such pods
    // can be skipped.
    let own_terms = pod.has_pod_affinity_terms();
    for node in snapshot.nodes() {
        if !own_terms && node.pods_with_affinity == 0 {
            continue;
        }
        for existing in &node.pods {
            if existing.deleting {
                continue;
            }
            let label = |key: &str| node.labels.get(key).map(String::as_str);
            for term in &existing.anti_affinity {
                if let Some(v) = label(&term.topology_key) {
                    if term.matches_pod(pod) {
                        bump(&mut state.existing_anti, &term.topology_key, v, 1);
                    }
                }
            }
            if !pod.affinity.is_empty() && pod.affinity.iter().all(|t| t.matches_pod(existing)) {
                state.any_affinity_match = true;
                for term in &pod.affinity {
                    if let Some(v) = label(&term.topology_key) {
                        bump(&mut state.affinity, &term.topology_key, v, 1);
                    }
                }
            }
            for term in &pod.anti_affinity {
                if let Some(v) = label(&term.topology_key) {
                    if term.matches_pod(existing) {
                        bump(&mut state.anti, &term.topology_key, v, 1);
                    }
                }
            }
            let mut prefer = |terms: &[(i64, AffinityTerm)], sign: i64, subject: &PodInfo| {
                for (weight, term) in terms {
                    if let Some(v) = label(&term.topology_key) {
                        if term.matches_pod(subject) {
                            bump(&mut state.preferred, &term.topology_key, v, sign * weight);
                        }
                    }
                }
            };
            prefer(&pod.preferred_affinity, 1, existing);
            prefer(&pod.preferred_anti_affinity, -1, existing);
            prefer(&existing.preferred_affinity, 1, pod);
            prefer(&existing.preferred_anti_affinity, -1, pod);
            // An existing pod's required affinity attracts with kube-scheduler's
            // hardPodAffinityWeight (1).
            for term in &existing.affinity {
                if let Some(v) = label(&term.topology_key) {
                    if term.matches_pod(pod) {
                        bump(&mut state.preferred, &term.topology_key, v, 1);
                    }
                }
            }
        }
    }
    state
}

fn prepare_spread(snapshot: &Snapshot, pod: &PodInfo) -> Vec<SpreadState> {
    if pod.spread.is_empty() {
        return Vec::new();
    }
    let mut states: Vec<SpreadState> = pod
        .spread
        .iter()
        .enumerate()
        .map(|(i, c)| SpreadState {
            constraint: i,
            counts: HashMap::new(),
            min: 0,
            self_match: i64::from(c.selector.matches(&pod.labels)),
        })
        .collect();
    for node in snapshot.nodes() {
        // Domains are those of nodes carrying every constraint's key (of its kind) that the
        // pod's node affinity accepts.
        for state in states.iter_mut() {
            let constraint = &pod.spread[state.constraint];
            let keys_present = pod
                .spread
                .iter()
                .filter(|c| c.hard == constraint.hard)
                .all(|c| node.labels.contains_key(&c.topology_key));
            if !keys_present {
                continue;
            }
            if constraint.honor_node_affinity && !pod.accepts_node(&node.name, &node.labels) {
                continue;
            }
            let value = &node.labels[&constraint.topology_key];
            let matching = node
                .pods
                .iter()
                .filter(|p| {
                    !p.deleting
                        && p.namespace == pod.namespace
                        && constraint.selector.matches(&p.labels)
                })
                .count() as i64;
            *state.counts.entry(value.clone()).or_default() += matching;
        }
    }
    for state in states.iter_mut() {
        let constraint = &pod.spread[state.constraint];
        state.min = if (state.counts.len() as i64) < constraint.min_domains {
            0
        } else {
            state.counts.values().copied().min().unwrap_or(0)
        };
    }
    states
}
