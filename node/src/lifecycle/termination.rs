//! Deletion: preStop, SIGTERM, a kill at the end of the grace period, then the sandbox.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{event, Command, PodLifecycle, Stage, State};
use crate::api_time::chrono_duration;
use crate::process::Process;
use crate::runtime::{CriCall, NodeRuntime};

impl PodLifecycle {
    pub(super) fn begin_termination(
        &mut self,
        now: DateTime<Utc>,
        node: &mut NodeRuntime,
        out: &mut Vec<Command>,
    ) {
        let grace = self
            .pod
            .metadata
            .deletion_grace_period_seconds
            .or_else(|| {
                self.pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.termination_grace_period_seconds)
            })
            .unwrap_or(30)
            .max(0) as u64;
        let deadline = now + chrono_duration(Duration::from_secs(grace));
        match self.stage {
            Stage::Terminating { kill_at } => {
                // A second delete may shorten the grace period.
                self.stage = Stage::Terminating {
                    kill_at: kill_at.min(deadline),
                };
                return;
            }
            Stage::New => return,
            Stage::StoppingSandbox { .. }
            | Stage::RemovingSandbox { .. }
            | Stage::Deleting
            | Stage::Gone => return,
            Stage::Finished | Stage::Rejected => {
                self.stage = Stage::RemovingSandbox { until: now };
                return;
            }
            _ => {}
        }
        self.stage = Stage::Terminating { kill_at: deadline };
        for i in 0..self.containers.len() {
            let c = &mut self.containers[i];
            match c.state.clone() {
                State::Running { since, exit_at } => {
                    out.push(event(
                        c,
                        false,
                        "Killing",
                        format!("Stopping container {}", c.name()),
                    ));
                    // preStop runs first, within the grace period; then SIGTERM.
                    let pre_stop = c
                        .spec
                        .lifecycle
                        .as_ref()
                        .and_then(|l| l.pre_stop.as_ref())
                        .map(|h| {
                            if let Some(sleep) = &h.sleep {
                                Duration::from_secs(sleep.seconds.max(0) as u64)
                            } else if let Some(exec) = &h.exec {
                                Process::from_command(
                                    exec.command.as_deref().unwrap_or_default(),
                                    &[],
                                )
                                .exit
                                .map(|(d, _)| d)
                                .unwrap_or(Duration::from_secs(grace))
                            } else {
                                Duration::ZERO
                            }
                        })
                        .unwrap_or_default();
                    let sigterm = now + chrono_duration(pre_stop);
                    let process = c.process.clone().unwrap_or_else(Process::server);
                    let after_term = match c.behaviour.term_delay {
                        Some(d) => Some(d),
                        None if process.handles_sigterm => {
                            Some(node.latency(CriCall::StopContainer))
                        }
                        None => None,
                    };
                    let term_exit = after_term.map(|d| {
                        (
                            sigterm + chrono_duration(d),
                            if process.handles_sigterm { 0 } else { 143 },
                        )
                    });
                    let exit = match (exit_at, term_exit) {
                        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
                        (a, b) => a.or(b),
                    };
                    c.state = State::Running {
                        since,
                        exit_at: exit,
                    };
                }
                State::Starting { .. } => {
                    c.state = State::Running {
                        since: now,
                        exit_at: Some((now, 137)),
                    };
                }
                _ => {}
            }
            c.ready = false;
        }
    }
}
