//! Preemption (kube-scheduler's DefaultPreemption PostFilter), pure: for a pod that fits
//! nowhere, find a node where evicting lower-priority pods makes it fit, with the fewest and
//! least important victims.
//!
//! Per node: remove every lower-priority pod; if the pod still does not fit, the node cannot
//! help; otherwise put victims back, most important first, as long as the pod still fits
//! ("reprieve"), so that the set evicted is minimal. Pods of higher or equal priority
//! nominated to the node count as if they were there: preemption never frees room that is
//! already reserved for another preemptor.

use std::collections::HashMap;
use std::sync::Arc;

use crate::filters::PodCycle;
use crate::pod_info::PodInfo;
use crate::schedule::{sorted_histogram, Diagnosis};
use crate::snapshot::Snapshot;

pub const NO_VICTIMS: &str = "No preemption victims found for incoming pod";
pub const NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";

/// What preemption found.
#[derive(Clone, Debug)]
pub enum Preemption {
    /// Evict `victims` from `node` and nominate the pod there.
    Candidate {
        node: String,
        victims: Vec<Arc<PodInfo>>,
    },
    /// No node can be freed; `message` continues the FailedScheduling text
    /// (`preemption: 0/5 nodes are available: 5 No preemption victims found for incoming pod.`).
    Failed { message: String },
}

/// How candidates compare, best first: the highest victim priority, the sum of victim
/// priorities, the number of victims, the node's position.
type CandidateRank = (i32, i64, usize, usize);

/// Looks for a node to free for `pod`, given why it fit nowhere.
pub fn preempt(snapshot: &Snapshot, pod: &PodInfo, diagnosis: &Diagnosis) -> Preemption {
    if pod.preempt_never {
        return Preemption::Failed {
            message: "preemption: not eligible due to preemptionPolicy=Never.".into(),
        };
    }
    // A pod already nominated somewhere waits while its victims terminate.
    if let Some(node) = pod
        .nominated_node_name
        .as_deref()
        .and_then(|n| snapshot.node(n))
    {
        if node
            .pods
            .iter()
            .any(|p| p.deleting && p.priority < pod.priority)
        {
            return Preemption::Failed {
                message: "preemption: not eligible due to a terminating pod on the nominated node."
                    .into(),
            };
        }
    }
    let Ok(cycle) = PodCycle::prepare(snapshot, pod) else {
        // Failed before any node: nothing on a node stands in its way.
        let n = diagnosis.num_nodes;
        return Preemption::Failed {
            message: format!("preemption: 0/{n} nodes are available: {n} {NOT_HELPFUL}."),
        };
    };
    let mut histogram: HashMap<String, usize> = HashMap::new();
    let mut best: Option<(CandidateRank, Vec<Arc<PodInfo>>)> = None;
    for failure in &diagnosis.failures {
        // Nodes no eviction can fix are set aside before any victim is looked for.
        if failure.unresolvable {
            *histogram.entry(NOT_HELPFUL.into()).or_default() += 1;
            continue;
        }
        let node = &snapshot.nodes()[failure.node];
        let mut lower: Vec<Arc<PodInfo>> = node
            .pods
            .iter()
            .filter(|p| p.priority < pod.priority && !p.deleting)
            .cloned()
            .collect();
        if lower.is_empty() {
            *histogram.entry(NO_VICTIMS.into()).or_default() += 1;
            continue;
        }
        let mut trial = node.clone();
        for victim in &lower {
            trial.remove_pod(&victim.key);
        }
        // Room reserved for pods of higher or equal priority nominated here stays theirs.
        for nominated in snapshot.nominated_against(&node.name, pod) {
            trial.add_pod(nominated.clone());
        }
        if let Err(still) = cycle.filter(&trial, failure.node) {
            for reason in still.reasons {
                *histogram.entry(reason.to_string()).or_default() += 1;
            }
            continue;
        }
        // Reprieve the most important first.
        lower.sort_by(|a, b| b.priority.cmp(&a.priority).then(a.key.cmp(&b.key)));
        let mut victims = Vec::new();
        for candidate in lower {
            trial.add_pod(candidate.clone());
            if cycle.filter(&trial, failure.node).is_err() {
                trial.remove_pod(&candidate.key);
                victims.push(candidate);
            }
        }
        let rank = (
            victims.iter().map(|v| v.priority).max().unwrap_or(i32::MIN),
            victims.iter().map(|v| i64::from(v.priority)).sum(),
            victims.len(),
            failure.node,
        );
        if best.as_ref().is_none_or(|(r, _)| rank < *r) {
            best = Some((rank, victims));
        }
    }
    match best {
        Some(((_, _, _, i), victims)) => Preemption::Candidate {
            node: snapshot.nodes()[i].name.to_string(),
            victims,
        },
        None => Preemption::Failed {
            message: format!(
                "preemption: 0/{} nodes are available: {}.",
                diagnosis.num_nodes,
                sorted_histogram(histogram)
            ),
        },
    }
}

/// The whole FailedScheduling message: the filters' diagnosis, then what preemption found.
pub fn failure_message(diagnosis: &Diagnosis, preemption: &Preemption) -> String {
    match preemption {
        Preemption::Failed { message } if diagnosis.num_nodes > 0 => {
            format!("{} {message}", diagnosis.message())
        }
        _ => diagnosis.message(),
    }
}
