//! The decision core: [`schedule`] picks a node for one pod from a [`Snapshot`], without I/O or
//! clocks. It filters nodes starting where the previous search stopped until it has found
//! kube-scheduler's number of feasible nodes (`percentageOfNodesToScore`), scores those, and
//! breaks ties at random from a seeded generator. A pod that fits nowhere gets a [`Diagnosis`]
//! whose text is kube-scheduler's.

use std::collections::HashMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::filters::{NodeFailure, PodCycle};
use crate::pod_info::PodInfo;
use crate::scores::{raw_scores, totals, RawScores};
use crate::snapshot::Snapshot;

/// Below this many nodes every node is scored; otherwise at least this many feasible nodes are.
pub const MIN_FEASIBLE_NODES_TO_FIND: usize = 100;
/// The adaptive percentage never goes below this.
pub const MIN_FEASIBLE_NODES_PERCENTAGE: usize = 5;

/// State carried from one decision to the next: where the next search starts, the tie-break
/// generator, and scratch space so that a decision allocates nothing per node.
#[derive(Debug)]
pub struct ScheduleState {
    pub next_start_index: usize,
    pub rng: StdRng,
    /// `percentageOfNodesToScore`; 0 is kube-scheduler's adaptive default.
    pub percentage_of_nodes_to_score: usize,
    feasible: Vec<RawScores>,
    totals: Vec<i64>,
}

impl ScheduleState {
    pub fn new(seed: u64) -> ScheduleState {
        ScheduleState {
            next_start_index: 0,
            rng: StdRng::seed_from_u64(seed),
            percentage_of_nodes_to_score: 0,
            feasible: Vec::new(),
            totals: Vec::new(),
        }
    }
}

/// What the core decided for one pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Feasible {
        node: String,
        score: i64,
        /// Nodes the filters looked at, and how many of them fit.
        evaluated: usize,
        feasible: usize,
    },
    Unschedulable {
        diagnosis: Diagnosis,
    },
}

/// Why a pod fits nowhere: every node's failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnosis {
    pub num_nodes: usize,
    pub failures: Vec<NodeFailure>,
    /// Set when the pod failed before any node was looked at (a PreFilter's message, such as
    /// `pod has unbound immediate PersistentVolumeClaims`); every node then counts as failed
    /// for a reason preemption cannot remove.
    pub pre_filter: Option<String>,
}

impl Diagnosis {
    /// `0/5 nodes are available: 2 Insufficient cpu, 3 node(s) didn't match Pod's node
    /// affinity/selector.` — the reasons counted over nodes and sorted as strings, as
    /// kube-scheduler's `FitError` does.
    pub fn message(&self) -> String {
        if self.num_nodes == 0 {
            return "no nodes available to schedule pods".to_string();
        }
        if let Some(message) = &self.pre_filter {
            return format!("0/{} nodes are available: {message}.", self.num_nodes);
        }
        let mut histogram: HashMap<String, usize> = HashMap::new();
        for failure in &self.failures {
            for reason in &failure.reasons {
                *histogram.entry(reason.to_string()).or_default() += 1;
            }
        }
        format!(
            "0/{} nodes are available: {}.",
            self.num_nodes,
            sorted_histogram(histogram)
        )
    }
}

/// `count reason` strings, sorted as strings and joined with `, `.
pub fn sorted_histogram(histogram: HashMap<String, usize>) -> String {
    let mut parts: Vec<String> = histogram
        .into_iter()
        .map(|(reason, count)| format!("{count} {reason}"))
        .collect();
    parts.sort();
    parts.join(", ")
}

/// kube-scheduler's `numFeasibleNodesToFind`: all nodes below 100; otherwise
/// `percentage` % of them (adaptive default `max(5, 50 - nodes/125)`), but at least 100.
pub fn num_feasible_nodes_to_find(num_nodes: usize, percentage: usize) -> usize {
    if num_nodes < MIN_FEASIBLE_NODES_TO_FIND {
        return num_nodes;
    }
    let percentage = if percentage == 0 {
        50usize
            .saturating_sub(num_nodes / 125)
            .max(MIN_FEASIBLE_NODES_PERCENTAGE)
    } else {
        percentage.min(100)
    };
    (num_nodes * percentage / 100).max(MIN_FEASIBLE_NODES_TO_FIND)
}

/// Decides where `pod` goes.
pub fn schedule(snapshot: &Snapshot, pod: &PodInfo, state: &mut ScheduleState) -> Decision {
    let n = snapshot.len();
    if n == 0 {
        return Decision::Unschedulable {
            diagnosis: Diagnosis {
                num_nodes: 0,
                failures: Vec::new(),
                pre_filter: None,
            },
        };
    }
    let cycle = match PodCycle::prepare(snapshot, pod) {
        Ok(cycle) => cycle,
        Err(message) => {
            let failures = (0..n)
                .map(|node| NodeFailure {
                    node,
                    reasons: Vec::new(),
                    unresolvable: true,
                })
                .collect();
            return Decision::Unschedulable {
                diagnosis: Diagnosis {
                    num_nodes: n,
                    failures,
                    pre_filter: Some(message),
                },
            };
        }
    };
    let nodes = snapshot.nodes();

    // A pod that preempted others goes to its nominated node if it fits there now.
    if let Some(i) = pod
        .nominated_node_name
        .as_deref()
        .and_then(|name| snapshot.position(name))
    {
        if cycle.filter_in(snapshot, i).is_ok() {
            return Decision::Feasible {
                node: nodes[i].name.to_string(),
                score: 0,
                evaluated: 1,
                feasible: 1,
            };
        }
    }

    let to_find = num_feasible_nodes_to_find(n, state.percentage_of_nodes_to_score);
    let start = state.next_start_index % n;
    state.feasible.clear();
    let mut failures = Vec::new();
    let mut processed = 0;
    for k in 0..n {
        let i = (start + k) % n;
        processed += 1;
        match cycle.filter_in(snapshot, i) {
            Ok(()) => {
                state.feasible.push(RawScores {
                    node: i,
                    ..Default::default()
                });
                if state.feasible.len() >= to_find {
                    break;
                }
            }
            Err(failure) => failures.push(failure),
        }
    }
    state.next_start_index = (start + processed) % n;

    if state.feasible.is_empty() {
        return Decision::Unschedulable {
            diagnosis: Diagnosis {
                num_nodes: n,
                failures,
                pre_filter: None,
            },
        };
    }
    let feasible = state.feasible.len();
    if feasible == 1 {
        return Decision::Feasible {
            node: nodes[state.feasible[0].node].name.to_string(),
            score: 0,
            evaluated: processed,
            feasible,
        };
    }
    for slot in state.feasible.iter_mut() {
        *slot = raw_scores(&cycle, &nodes[slot.node], slot.node);
    }
    totals(&state.feasible, &mut state.totals);

    // The best score; ties broken by reservoir sampling, as kube-scheduler's selectHost.
    let mut best = 0;
    let mut ties = 0u32;
    for (k, &total) in state.totals.iter().enumerate() {
        if total > state.totals[best] {
            best = k;
            ties = 1;
        } else if total == state.totals[best] {
            ties += 1;
            if ties > 1 && state.rng.gen_range(0..ties) == 0 {
                best = k;
            }
        }
    }
    Decision::Feasible {
        node: nodes[state.feasible[best].node].name.to_string(),
        score: state.totals[best],
        evaluated: processed,
        feasible,
    }
}
