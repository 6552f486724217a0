//! kemu's scheduler: informers → cache → queue → scheduling workers → binder, around a pure
//! decision core.
//!
//! - The decision core (no I/O, no clock): [`resources`], [`pod_info`], [`node_info`] and
//!   [`snapshot`] hold parsed cluster state; [`filters`] and [`scores`] are the plugins;
//!   [`schedule::schedule`] picks a node; [`preemption::preempt`] frees one.

pub mod filters;
pub mod node_info;
pub mod pod_info;
pub mod preemption;
pub mod resources;
pub mod schedule;
pub mod scores;
pub mod snapshot;

pub use pod_info::PodInfo;
pub use schedule::{schedule, Decision, Diagnosis, ScheduleState};
pub use snapshot::Snapshot;
pub mod synthetic;

#[cfg(test)]
mod core_tests;
