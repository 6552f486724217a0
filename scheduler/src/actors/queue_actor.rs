//! [`QueueActor`]: owns the [`SchedulingQueue`] and keeps every worker busy while this
//! process leads and its caches have synced.

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;

use super::binder::Binder;
use super::worker::{Attempt, Worker};
use crate::metrics::Metrics;
use crate::pod_info::PodInfo;
use crate::queue::SchedulingQueue;

/// How often backoff and unschedulable pods are looked at, and cluster events applied.
const TICK: Duration = Duration::from_millis(50);

/// A pending pod of this scheduler, new or changed (`changed`: spec or labels differ).
#[derive(Message)]
#[rtype(result = "()")]
pub struct PodPending {
    pub pod: Arc<PodInfo>,
    pub changed: bool,
}

/// The pod was deleted or bound: it leaves the queue.
#[derive(Message)]
#[rtype(result = "()")]
pub struct PodGone {
    pub key: String,
}

/// A node was added or changed, or a pod deleted: unschedulable pods may fit now.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ClusterChanged;

#[derive(Message)]
#[rtype(result = "()")]
pub struct SetLeading(pub bool);

/// The informers' first lists have reached the cache.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Synced;

/// How a step of a pod's attempt ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A worker assumed it onto a node; the bind is in flight.
    Assumed,
    /// It fits nowhere.
    Unschedulable,
    /// Retry after backoff (assumption races lost, bind failed).
    Failed,
    /// Bound (by us, or by someone else first): done.
    Done,
}

/// A step of an attempt ended; `from_worker` frees a worker slot.
#[derive(Message)]
#[rtype(result = "()")]
pub struct AttemptDone {
    pub key: String,
    pub outcome: Outcome,
    pub from_worker: bool,
}

pub struct QueueActor {
    queue: SchedulingQueue,
    workers: Addr<Worker>,
    capacity: usize,
    busy: usize,
    leading: bool,
    synced: bool,
    cluster_changed: bool,
    metrics: Arc<Metrics>,
}

impl QueueActor {
    /// Starts the queue, the binder and `workers` worker threads, wired together.
    pub fn start_all(
        workers: usize,
        make_worker: impl Fn(Addr<QueueActor>, Addr<Binder>) -> Worker + Send + Sync + 'static,
        make_binder: impl FnOnce(Addr<QueueActor>) -> Binder,
        metrics: Arc<Metrics>,
    ) -> Addr<QueueActor> {
        QueueActor::create(move |ctx| {
            let me = ctx.address();
            let binder = make_binder(me.clone()).start();
            let worker_addr = {
                let me = me.clone();
                SyncArbiter::start(workers, move || make_worker(me.clone(), binder.clone()))
            };
            QueueActor {
                queue: SchedulingQueue::new(),
                workers: worker_addr,
                capacity: workers,
                busy: 0,
                leading: false,
                synced: false,
                cluster_changed: false,
                metrics,
            }
        })
    }

    /// Hands pods to idle workers.
    fn dispatch(&mut self) {
        if !self.leading || !self.synced {
            return;
        }
        while self.busy < self.capacity {
            let Some(pod) = self.queue.pop() else {
                break;
            };
            self.busy += 1;
            self.workers.do_send(Attempt {
                pod,
                started: Instant::now(),
            });
        }
    }

    fn tick(&mut self) {
        let now = Instant::now();
        if std::mem::take(&mut self.cluster_changed) {
            self.queue.move_all_unschedulable(now);
        }
        self.queue.flush(now);
        self.metrics.set_pending(self.queue.lengths());
        self.dispatch();
    }
}

impl Actor for QueueActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.run_interval(TICK, |actor, _| actor.tick());
    }
}

impl Handler<PodPending> for QueueActor {
    type Result = ();
    fn handle(&mut self, msg: PodPending, _: &mut Self::Context) {
        self.queue.upsert(msg.pod, msg.changed, Instant::now());
        self.dispatch();
    }
}

impl Handler<PodGone> for QueueActor {
    type Result = ();
    fn handle(&mut self, msg: PodGone, _: &mut Self::Context) {
        self.queue.remove(&msg.key);
    }
}

impl Handler<ClusterChanged> for QueueActor {
    type Result = ();
    fn handle(&mut self, _: ClusterChanged, _: &mut Self::Context) {
        // Applied on the next tick: a burst of node events costs one pass.
        self.cluster_changed = true;
    }
}

impl Handler<SetLeading> for QueueActor {
    type Result = ();
    fn handle(&mut self, msg: SetLeading, _: &mut Self::Context) {
        self.leading = msg.0;
        self.dispatch();
    }
}

impl Handler<Synced> for QueueActor {
    type Result = ();
    fn handle(&mut self, _: Synced, _: &mut Self::Context) {
        self.synced = true;
        self.dispatch();
    }
}

impl Handler<AttemptDone> for QueueActor {
    type Result = ();
    fn handle(&mut self, msg: AttemptDone, _: &mut Self::Context) {
        if msg.from_worker {
            self.busy -= 1;
        }
        let now = Instant::now();
        match msg.outcome {
            Outcome::Assumed => {}
            Outcome::Unschedulable => self.queue.unschedulable(&msg.key, now),
            Outcome::Failed => self.queue.failed(&msg.key, now),
            Outcome::Done => self.queue.done(&msg.key),
        }
        self.dispatch();
    }
}
