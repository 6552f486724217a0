//! kemu's scheduler: informers → cache → queue → scheduling workers → binder, around a pure
//! decision core.
//!
//! - The decision core (no I/O, no clock): [`resources`], [`pod_info`], [`node_info`] and
//!   [`snapshot`] hold parsed cluster state; [`filters`] and [`scores`] are the plugins;
//!   [`volumes`] is VolumeBinding's state; [`schedule::schedule`] picks a node;
//!   [`preemption::preempt`] frees one.
//! - The state around it: [`cache::Cache`] (nodes with bound and assumed pods, fed by
//!   informers) and [`queue::SchedulingQueue`] (active, backoff, unschedulable).
//! - The actors ([`actors`]): the queue actor, worker threads, the binder.
//! - [`metrics`]: the scheduler's Prometheus metrics; [`config`]: settings. Leader election is
//!   `api::leader_election`'s, on the `kube-system/kube-scheduler` Lease.
//! - [`server::run`]: the process, wiring informers, election, actors and metrics.

pub mod actors;
pub mod cache;
pub mod config;
pub mod filters;
pub mod metrics;
pub mod node_info;
pub mod pod_info;
pub mod preemption;
pub mod queue;
pub mod resources;
pub mod schedule;
pub mod scores;
pub mod server;
pub mod snapshot;
pub mod volumes;

pub use config::{SchedulerConfig, SchedulerError};
pub use pod_info::PodInfo;
pub use schedule::{schedule, Decision, Diagnosis, ScheduleState};
pub use snapshot::Snapshot;
pub mod synthetic;

pub mod bench;
#[cfg(test)]
mod core_tests;
