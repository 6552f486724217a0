//! The in-process benchmark of the decision core (`kemu bench scheduler`): a synthetic cluster,
//! pods decided one after another and assumed onto their nodes, as the workers do.

use std::time::{Duration, Instant};

use crate::schedule::{schedule, Decision, ScheduleState};
use crate::synthetic;

/// What one run measured.
#[derive(Clone, Debug)]
pub struct CoreBenchReport {
    pub nodes: usize,
    pub pods: usize,
    pub scheduled: usize,
    pub unschedulable: usize,
    pub elapsed: Duration,
}

impl CoreBenchReport {
    pub fn pods_per_second(&self) -> f64 {
        self.pods as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Decides `pods` pods (100m cpu, 128Mi each) over `nodes` nodes (32 cpu, 128Gi, 110 pods, in
/// three zones) and assumes each onto the chosen node.
pub fn run_core(nodes: usize, pods: usize, seed: u64) -> CoreBenchReport {
    let mut snapshot = synthetic::cluster(nodes, 3, "32", "128Gi", 110);
    let templates: Vec<_> = (0..pods)
        .map(|i| synthetic::info(synthetic::pod("bench", &format!("p-{i}"), "100m", "128Mi")))
        .collect();
    let mut state = ScheduleState::new(seed);
    let (mut scheduled, mut unschedulable) = (0, 0);
    let started = Instant::now();
    for pod in templates {
        match schedule(&snapshot, &pod, &mut state) {
            Decision::Feasible { node, .. } => {
                snapshot.add_pod(&node, pod);
                scheduled += 1;
            }
            Decision::Unschedulable { .. } => unschedulable += 1,
        }
    }
    CoreBenchReport {
        nodes,
        pods,
        scheduled,
        unschedulable,
        elapsed: started.elapsed(),
    }
}
