//! [`Worker`]: one scheduling thread. Decides on the shared cache under a read lock (workers
//! run in parallel), then assumes the pod under a short write lock; if another worker filled
//! the node meanwhile, it decides again.

use std::sync::Arc;
use std::time::Instant;

use actix::prelude::*;
use parking_lot::RwLock;
use tracing::debug;

use super::binder::{Bind, Binder, ReportUnschedulable};
use super::queue_actor::{AttemptDone, Outcome, QueueActor};
use crate::cache::Cache;
use crate::metrics::{AttemptResult, Metrics};
use crate::pod_info::PodInfo;
use crate::preemption::{failure_message, preempt, Preemption};
use crate::schedule::{schedule, Decision, ScheduleState};

/// Decisions tried before a pod whose assumptions keep losing races goes to backoff.
const ASSUME_TRIES: usize = 3;

/// Schedule this pod.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Attempt {
    pub pod: Arc<PodInfo>,
    pub started: Instant,
}

pub struct Worker {
    cache: Arc<RwLock<Cache>>,
    state: ScheduleState,
    queue: Addr<QueueActor>,
    binder: Addr<Binder>,
    metrics: Arc<Metrics>,
}

impl Worker {
    pub fn new(
        cache: Arc<RwLock<Cache>>,
        seed: u64,
        queue: Addr<QueueActor>,
        binder: Addr<Binder>,
        metrics: Arc<Metrics>,
    ) -> Worker {
        Worker {
            cache,
            state: ScheduleState::new(seed),
            queue,
            binder,
            metrics,
        }
    }

    fn attempt(&mut self, pod: Arc<PodInfo>, started: Instant) -> Outcome {
        for _ in 0..ASSUME_TRIES {
            let decided = Instant::now();
            let decision = schedule(self.cache.read().snapshot(), &pod, &mut self.state);
            self.metrics.algorithm(decided.elapsed());
            match decision {
                Decision::Feasible { node, .. } => {
                    let assumed = {
                        let mut cache = self.cache.write();
                        cache
                            .assume(pod.clone(), &node)
                            .map(|()| cache.assume_volumes(&pod, &node))
                    };
                    match assumed {
                        Ok(volumes) => {
                            self.binder.do_send(Bind {
                                pod,
                                node,
                                started,
                                volumes,
                            });
                            return Outcome::Assumed;
                        }
                        Err(e) => debug!(pod = %pod.key, error = %e, "lost a race; deciding again"),
                    }
                }
                Decision::Unschedulable { diagnosis } => {
                    let preemption = preempt(self.cache.read().snapshot(), &pod, &diagnosis);
                    if let Preemption::Candidate { node, .. } = &preemption {
                        // Reserve the room now, before the victims go and before the
                        // nominatedNodeName patch comes back through the informer.
                        self.cache.write().nominate(pod.clone(), node);
                    }
                    let message = failure_message(&diagnosis, &preemption);
                    self.metrics.attempt(AttemptResult::Unschedulable);
                    self.binder.do_send(ReportUnschedulable {
                        pod,
                        message,
                        preemption,
                    });
                    return Outcome::Unschedulable;
                }
            }
        }
        self.metrics.attempt(AttemptResult::Error);
        Outcome::Failed
    }
}

impl Actor for Worker {
    type Context = SyncContext<Self>;
}

impl Handler<Attempt> for Worker {
    type Result = ();
    fn handle(&mut self, msg: Attempt, _: &mut Self::Context) {
        let key = msg.pod.key.clone();
        let outcome = self.attempt(msg.pod, msg.started);
        self.queue.do_send(AttemptDone {
            key,
            outcome,
            from_worker: true,
        });
    }
}
