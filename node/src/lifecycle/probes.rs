//! Startup, liveness and readiness probes, run on the pod's clock.

use chrono::{DateTime, Utc};

use super::{event, Command, PodLifecycle, ProbeKind};
use crate::api_time::chrono_duration;
use crate::runtime::NodeRuntime;

impl PodLifecycle {
    pub(super) fn run_probes(
        &mut self,
        i: usize,
        since: DateTime<Utc>,
        now: DateTime<Utc>,
        node: &mut NodeRuntime,
        out: &mut Vec<Command>,
    ) -> bool {
        let mut moved = self.update_readiness_without_probe(i, now);
        for p in 0..self.containers[i].probes.len() {
            loop {
                let c = &mut self.containers[i];
                let probe = &c.probes[p];
                if probe.next_at > now {
                    break;
                }
                let at = probe.next_at;
                // Liveness and readiness wait for the startup probe.
                if probe.kind != ProbeKind::Startup && !c.started {
                    c.probes[p].next_at = at + chrono_duration(c.probes[p].period);
                    continue;
                }
                if probe.kind == ProbeKind::Startup && c.started {
                    c.probes[p].next_at = DateTime::<Utc>::MAX_UTC;
                    break;
                }
                let elapsed = (at - since).to_std().unwrap_or_default();
                let b = &c.behaviour;
                let ok = !probe.always_fails
                    && match probe.kind {
                        ProbeKind::Startup => !b.startup_fail,
                        ProbeKind::Liveness => b.liveness_fail_after.is_none_or(|d| elapsed < d),
                        ProbeKind::Readiness => {
                            b.ready_after.is_none_or(|d| elapsed >= d)
                                && b.readiness_fail_after.is_none_or(|d| elapsed < d)
                        }
                    };
                let probe = &mut c.probes[p];
                probe.next_at = at + chrono_duration(probe.period);
                moved = true;
                if ok {
                    probe.failures = 0;
                    probe.successes += 1;
                    if probe.successes >= probe.success_threshold {
                        match probe.kind {
                            ProbeKind::Startup => c.started = true,
                            ProbeKind::Readiness => c.ready = true,
                            ProbeKind::Liveness => {}
                        }
                    }
                    continue;
                }
                probe.successes = 0;
                probe.failures += 1;
                let (kind, failures, threshold) =
                    (probe.kind, probe.failures, probe.failure_threshold);
                let message = format!("{} probe failed: {}", kind.title(), probe.failure_message);
                out.push(event(c, true, "Unhealthy", message));
                if kind == ProbeKind::Readiness {
                    if failures >= threshold {
                        c.ready = false;
                    }
                    continue;
                }
                if failures >= threshold {
                    let what = if kind == ProbeKind::Liveness {
                        "liveness"
                    } else {
                        "startup"
                    };
                    out.push(event(
                        c,
                        false,
                        "Killing",
                        format!(
                            "Container {} failed {what} probe, will be restarted",
                            c.name()
                        ),
                    ));
                    self.exit(i, at, 137, node, out, false);
                    return true;
                }
            }
        }
        moved
    }
}
