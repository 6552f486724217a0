//! The score plugins and their weights in kube-scheduler's default profile:
//! NodeResourcesFit (LeastAllocated) ×1, NodeResourcesBalancedAllocation ×1, NodeAffinity
//! (preferred) ×2, TaintToleration (PreferNoSchedule) ×3, InterPodAffinity (preferred) ×2,
//! PodTopologySpread (ScheduleAnyway) ×2. Each plugin scores 0..=100 after normalization.

use crate::filters::PodCycle;
use crate::node_info::{NodeInfo, TaintEffect};

pub const MAX_NODE_SCORE: i64 = 100;

pub const WEIGHT_FIT: i64 = 1;
pub const WEIGHT_BALANCED: i64 = 1;
pub const WEIGHT_NODE_AFFINITY: i64 = 2;
pub const WEIGHT_TAINT: i64 = 3;
pub const WEIGHT_INTERPOD: i64 = 2;
pub const WEIGHT_SPREAD: i64 = 2;

/// One feasible node's raw plugin scores, before normalization.
#[derive(Clone, Copy, Debug, Default)]
pub struct RawScores {
    pub node: usize,
    pub fit: i64,
    pub balanced: i64,
    pub node_affinity: i64,
    /// Untolerated PreferNoSchedule taints (fewer is better).
    pub taints: i64,
    pub interpod: i64,
    /// Matching pods in the node's domains (fewer is better); `None` when the node lacks a
    /// soft constraint's key.
    pub spread: Option<i64>,
}

/// Scores one node.
pub fn raw_scores(cycle: &PodCycle<'_>, node: &NodeInfo, index: usize) -> RawScores {
    let pod = cycle.pod;
    let (cpu, mem) = (
        node.non_zero_requested.0 + pod.non_zero.0,
        node.non_zero_requested.1 + pod.non_zero.1,
    );
    let (cpu_cap, mem_cap) = (node.allocatable.milli_cpu, node.allocatable.memory);
    RawScores {
        node: index,
        fit: (least_allocated(cpu, cpu_cap) + least_allocated(mem, mem_cap)) / 2,
        balanced: balanced(cpu, cpu_cap, mem, mem_cap),
        node_affinity: pod
            .preferred_node_terms
            .iter()
            .filter(|(_, term)| term.matches(&node.name, &node.labels))
            .map(|(w, _)| *w)
            .sum(),
        taints: node
            .taints
            .iter()
            .filter(|t| {
                t.effect == TaintEffect::PreferNoSchedule
                    && !pod.tolerates(&t.key, &t.value, t.effect)
            })
            .count() as i64,
        interpod: cycle.interpod.as_ref().map_or(0, |state| {
            node.labels
                .iter()
                .filter_map(|(k, v)| state.preferred.get(k).and_then(|m| m.get(v)))
                .sum()
        }),
        spread: spread_score(cycle, node),
    }
}

fn least_allocated(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return 0;
    }
    (capacity - requested) * MAX_NODE_SCORE / capacity
}

/// 100 when cpu and memory are used in the same proportion, less as they diverge.
fn balanced(cpu: i64, cpu_cap: i64, mem: i64, mem_cap: i64) -> i64 {
    let fraction = |used: i64, cap: i64| {
        if cap == 0 {
            1.0
        } else {
            (used as f64 / cap as f64).min(1.0)
        }
    };
    let std = (fraction(cpu, cpu_cap) - fraction(mem, mem_cap)).abs() / 2.0;
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

fn spread_score(cycle: &PodCycle<'_>, node: &NodeInfo) -> Option<i64> {
    let mut total = 0.0;
    let mut any = false;
    for state in &cycle.spread {
        let constraint = &cycle.pod.spread[state.constraint];
        if constraint.hard {
            continue;
        }
        any = true;
        let value = node.labels.get(&constraint.topology_key)?;
        let count = state.counts.get(value).copied().unwrap_or(0);
        // kube-scheduler weighs a constraint by log(domains + 2).
        let weight = ((state.counts.len() + 2) as f64).ln();
        total += count as f64 * weight + (constraint.max_skew - 1) as f64;
    }
    any.then_some(total.round() as i64)
}

/// Normalizes the plugins over the feasible nodes and returns each node's weighted total, in
/// the order of `raw`.
pub fn totals(raw: &[RawScores], out: &mut Vec<i64>) {
    out.clear();
    let max_affinity = raw.iter().map(|r| r.node_affinity).max().unwrap_or(0);
    let max_taints = raw.iter().map(|r| r.taints).max().unwrap_or(0);
    let (min_interpod, max_interpod) = min_max(raw.iter().map(|r| r.interpod));
    let (min_spread, max_spread) = min_max(raw.iter().filter_map(|r| r.spread));
    for r in raw {
        let node_affinity = if max_affinity > 0 {
            r.node_affinity * MAX_NODE_SCORE / max_affinity
        } else {
            0
        };
        let taints = if max_taints > 0 {
            MAX_NODE_SCORE - r.taints * MAX_NODE_SCORE / max_taints
        } else {
            MAX_NODE_SCORE
        };
        let interpod = if max_interpod > min_interpod {
            (r.interpod - min_interpod) * MAX_NODE_SCORE / (max_interpod - min_interpod)
        } else {
            0
        };
        let spread = match r.spread {
            None => 0,
            Some(_) if max_spread == 0 => MAX_NODE_SCORE,
            Some(s) => MAX_NODE_SCORE * (max_spread + min_spread - s) / max_spread,
        };
        out.push(
            r.fit * WEIGHT_FIT
                + r.balanced * WEIGHT_BALANCED
                + node_affinity * WEIGHT_NODE_AFFINITY
                + taints * WEIGHT_TAINT
                + interpod * WEIGHT_INTERPOD
                + spread * WEIGHT_SPREAD,
        );
    }
}

fn min_max(values: impl Iterator<Item = i64>) -> (i64, i64) {
    values.fold((i64::MAX, i64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn least_allocated_prefers_free_nodes() {
        assert_eq!(least_allocated(0, 1000), 100);
        assert_eq!(least_allocated(250, 1000), 75);
        assert_eq!(least_allocated(2000, 1000), 0);
        assert_eq!(least_allocated(1, 0), 0);
    }

    #[test]
    fn balanced_allocation_prefers_even_use() {
        assert_eq!(balanced(500, 1000, 50, 100), 100);
        assert_eq!(balanced(1000, 1000, 0, 100), 50);
    }

    #[test]
    fn normalization_follows_kubernetes() {
        let raw = [
            RawScores {
                node: 0,
                node_affinity: 10,
                taints: 0,
                interpod: -5,
                ..Default::default()
            },
            RawScores {
                node: 1,
                node_affinity: 5,
                taints: 2,
                interpod: 5,
                ..Default::default()
            },
        ];
        let mut out = Vec::new();
        totals(&raw, &mut out);
        // node 0: affinity 100×2 + taints 100×3 + interpod 0×2
        assert_eq!(out[0], 200 + 300);
        // node 1: affinity 50×2 + taints 0×3 + interpod 100×2
        assert_eq!(out[1], 100 + 200);
    }
}
