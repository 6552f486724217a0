//! The actix actors around the decision core: [`QueueActor`] hands pods to the [`Worker`]s
//! (a `SyncArbiter` of threads deciding in parallel on the shared cache, assuming optimistically),
//! and the [`Binder`] does the API calls (bind, events, status, preemption) on the I/O runtime.

mod binder;
mod queue_actor;
mod worker;

pub use binder::{Bind, BindFinished, Binder, ReportUnschedulable};
pub use queue_actor::{
    AttemptDone, ClusterChanged, Outcome, PodGone, PodPending, QueueActor, SetLeading, Synced,
};
pub use worker::{Attempt, Worker};
