//! The chaos checker (`kemu chaos`, and `kemu run`'s `[chaos]` plan): faults on a schedule
//! under load, and the checks that say whether anything was lost, duplicated or reordered, and
//! how long the cluster was unavailable.
//!
//! The checkers are pure and each stands alone:
//! - [`linearizability`]: Wing–Gong/porcupine search over a register [`history`], per key.
//! - [`watch_check`]: a recorded watch is ordered, duplicate-free and gap-free against the
//!   store's own history.
//! - [`convergence`]: every store member at the same revision with the same key-space hash.
//! - the load's acknowledged creates and deletes against the final pods
//!   ([`load::accounting`]), joined to the report under `kemu run`.
//! - [`availability`]: probe error rate over time and time to recover after each action.
//! - [`service`]: time until API writes, scheduling and pods Running recover after each action.
//!
//! The driver: [`plan`] (the `[chaos]` table), [`actions`] (kinds and schedule), [`targets`]
//! (what the actions act on: a `kemu up` cluster directory or a local store) and
//! [`kubernetes`] (a cluster `kemu render` put on Kubernetes), [`executor`]
//! (signals on schedule),
//! [`workload`] (register clients and prober), [`recorder`] (store watch), [`run`] (one run
//! end to end) and [`report`] (JSON and HTML).

pub mod actions;
pub mod availability;
pub mod convergence;
pub mod executor;
pub mod history;
pub mod kubernetes;
pub mod linearizability;
pub mod plan;
pub mod recorder;
pub mod report;
pub mod run;
pub mod service;
pub mod targets;
pub mod watch_check;
pub mod workload;

use std::time::Instant;

/// The one clock of a run: histories, probes and actions are all timed from its start.
#[derive(Clone, Copy, Debug)]
pub struct RunClock(Instant);

impl RunClock {
    pub fn start() -> RunClock {
        RunClock(Instant::now())
    }

    pub fn secs(self) -> f64 {
        self.0.elapsed().as_secs_f64()
    }

    pub fn nanos(self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }
}
