//! One container's way: image pull, create, start, postStart, readiness without probes, and
//! its exits handled per restartPolicy with crash back-off.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::runtime_ids::{container_id, normalize_image};
use super::{
    backoff, event, Command, PodLifecycle, ProbeKind, ProbeRun, Stage, State, Terminated,
    BACKOFF_INITIAL, BACKOFF_MAX, BACKOFF_RESET, ERR_IMAGE_PULL_SHOWN,
};
use crate::api_time::chrono_duration;
use crate::process::Process;
use crate::runtime::{CriCall, NodeRuntime};

impl PodLifecycle {
    /// Moves every container along; true if anything moved.
    pub(super) fn advance_containers(
        &mut self,
        now: DateTime<Utc>,
        node: &mut NodeRuntime,
        out: &mut Vec<Command>,
    ) -> bool {
        let terminating = matches!(self.stage, Stage::Terminating { .. });
        let mut moved = false;
        // Init containers run one at a time; the mains only once all of them succeeded.
        let current_init = (0..self.mains_from).find(|&i| !self.containers[i].succeeded());
        let runnable: Vec<usize> = match current_init {
            Some(i) => vec![i],
            None => (self.mains_from..self.containers.len()).collect(),
        };
        for i in runnable {
            moved |= self.advance_container(i, now, terminating, node, out);
        }
        if !terminating && self.stage == Stage::Containers && self.all_done() {
            self.finish(now, node, out);
            moved = true;
        }
        moved
    }

    fn advance_container(
        &mut self,
        i: usize,
        now: DateTime<Utc>,
        terminating: bool,
        node: &mut NodeRuntime,
        out: &mut Vec<Command>,
    ) -> bool {
        let c = &mut self.containers[i];
        match c.state.clone() {
            State::Pending if !terminating => {
                self.begin_pull(i, now, node, out);
                true
            }
            State::Waiting {
                until: Some(until),
                pull_next,
                ..
            } if until <= now && !terminating => {
                if pull_next {
                    self.begin_pull(i, now, node, out);
                } else {
                    self.begin_create(i, now, node, out);
                }
                true
            }
            State::Pulling { since, until } if until <= now && !terminating => {
                let image = c.image().to_string();
                if node.pull_fails(&image) {
                    let message = format!(
                        "Failed to pull image \"{image}\": rpc error: code = NotFound desc = failed to pull and unpack image \"{}\": not found",
                        normalize_image(&image)
                    );
                    out.push(event(c, true, "Failed", message.clone()));
                    out.push(event(c, true, "Failed", "Error: ErrImagePull".into()));
                    c.pull_failures += 1;
                    let delay = backoff(BACKOFF_INITIAL, BACKOFF_MAX, c.pull_failures - 1);
                    c.state = State::ErrImagePull {
                        message,
                        shown_until: now + chrono_duration(ERR_IMAGE_PULL_SHOWN),
                        retry_at: now + chrono_duration(delay),
                    };
                } else {
                    node.store_image(&image);
                    c.pull_failures = 0;
                    let took = (until - since).to_std().unwrap_or_default().as_secs_f64();
                    out.push(event(
                        c,
                        false,
                        "Pulled",
                        format!("Successfully pulled image \"{image}\" in {took:.3}s ({took:.3}s including waiting). Image size: 0 bytes."),
                    ));
                    self.begin_create(i, now, node, out);
                }
                true
            }
            State::ErrImagePull {
                shown_until,
                retry_at,
                ..
            } if shown_until <= now => {
                // ErrImagePull has been shown; back off until the retry.
                let image = c.image().to_string();
                out.push(event(
                    c,
                    false,
                    "BackOff",
                    format!("Back-off pulling image \"{image}\""),
                ));
                c.state = State::Waiting {
                    reason: "ImagePullBackOff",
                    message: format!("Back-off pulling image \"{image}\""),
                    until: Some(retry_at.max(now)),
                    pull_next: true,
                };
                true
            }
            State::Creating { until } if until <= now && !terminating => {
                self.next_id += 1;
                let c = &mut self.containers[i];
                c.container_id = container_id(
                    self.pod.metadata.uid.as_deref().unwrap_or(""),
                    c.name(),
                    self.next_id,
                );
                out.push(event(
                    c,
                    false,
                    "Created",
                    format!("Created container: {}", c.name()),
                ));
                let until = now + chrono_duration(node.latency(CriCall::StartContainer));
                c.state = State::Starting { until };
                true
            }
            State::Starting { until } if until <= now => {
                self.start(i, now, out);
                true
            }
            State::Running { since, exit_at } => {
                let mut moved = false;
                if let Some((at, code)) = exit_at {
                    if at <= now {
                        self.exit(i, at, code, node, out, true);
                        return true;
                    }
                }
                if !terminating {
                    moved |= self.run_probes(i, since, now, node, out);
                }
                moved
            }
            _ => false,
        }
    }

    fn begin_pull(
        &mut self,
        i: usize,
        now: DateTime<Utc>,
        node: &mut NodeRuntime,
        out: &mut Vec<Command>,
    ) {
        let c = &mut self.containers[i];
        let image = c.image().to_string();
        let policy = c.spec.image_pull_policy.clone().unwrap_or_else(|| {
            if image.ends_with(":latest") || !image.rsplit('/').next().unwrap_or("").contains(':') {
                "Always".into()
            } else {
                "IfNotPresent".into()
            }
        });
        let present = node.has_image(&image);
        match policy.as_str() {
            "Never" if !present => {
                let message =
                    format!("Container image \"{image}\" is not present with pull policy of Never");
                out.push(event(c, true, "ErrImageNeverPull", message.clone()));
                c.state = State::Waiting {
                    reason: "ErrImageNeverPull",
                    message,
                    until: None,
                    pull_next: false,
                };
            }
            "Never" | "IfNotPresent" if present => {
                out.push(event(
                    c,
                    false,
                    "Pulled",
                    format!("Container image \"{image}\" already present on machine"),
                ));
                self.begin_create(i, now, node, out);
            }
            _ => {
                out.push(event(
                    c,
                    false,
                    "Pulling",
                    format!("Pulling image \"{image}\""),
                ));
                let mut latency = node.latency(CriCall::PullImage);
                if present {
                    // Policy Always with the layers cached: only the manifest is fetched.
                    latency /= 10;
                }
                let until = now + chrono_duration(latency);
                c.state = State::Pulling { since: now, until };
            }
        }
    }

    fn begin_create(
        &mut self,
        i: usize,
        now: DateTime<Utc>,
        node: &mut NodeRuntime,
        _out: &mut [Command],
    ) {
        let c = &mut self.containers[i];
        if let Some(previous) = &c.last {
            if c.container_id == previous.container_id && !c.container_id.is_empty() {
                c.restart_count += 1;
            }
        }
        let until = now + chrono_duration(node.latency(CriCall::CreateContainer));
        c.state = State::Creating { until };
    }

    pub(super) fn start(&mut self, i: usize, now: DateTime<Utc>, out: &mut Vec<Command>) {
        let c = &mut self.containers[i];
        let spec = &c.spec;
        let mut process = Process::for_container(
            spec.command.as_deref().unwrap_or_default(),
            spec.args.as_deref().unwrap_or_default(),
            spec.stdin == Some(true),
        );
        if let Some((after, code)) = c.behaviour.crash_after {
            process = process.crash_after(after, code);
        }
        out.push(event(
            c,
            false,
            "Started",
            format!("Started container {}", c.name()),
        ));
        let mut exit_at = process
            .exit
            .map(|(after, code)| (now + chrono_duration(after), code));
        // postStart runs right after the start; a failing hook kills the container.
        let post_start_fails = c
            .spec
            .lifecycle
            .as_ref()
            .and_then(|l| l.post_start.as_ref())
            .and_then(|h| h.exec.as_ref())
            .is_some_and(|e| {
                let hook = Process::from_command(e.command.as_deref().unwrap_or_default(), &[]);
                matches!(hook.exit, Some((_, code)) if code != 0)
            });
        if post_start_fails {
            out.push(event(
                c,
                true,
                "FailedPostStartHook",
                "PostStartHook failed".to_string(),
            ));
            out.push(event(
                c,
                false,
                "Killing",
                format!("FailedPostStartHook: stopping container {}", c.name()),
            ));
            exit_at = Some((now, 137));
        }
        if !process.output.is_empty() {
            out.push(Command::ContainerStarted {
                container: c.name().to_string(),
                started: now,
                output: process.output.clone(),
            });
        }
        c.process = Some(process);
        c.state = State::Running {
            since: now,
            exit_at,
        };
        c.probes.clear();
        if let Some(p) = &c.spec.startup_probe {
            c.probes.push(ProbeRun::new(ProbeKind::Startup, p, now));
        }
        if let Some(p) = &c.spec.liveness_probe {
            c.probes.push(ProbeRun::new(ProbeKind::Liveness, p, now));
        }
        if let Some(p) = &c.spec.readiness_probe {
            c.probes.push(ProbeRun::new(ProbeKind::Readiness, p, now));
        }
        c.started = c.spec.startup_probe.is_none() || c.init;
        c.ready = false;
        self.update_readiness_without_probe(i, now);
    }

    /// Without a readiness probe a started container is ready (after a scripted delay).
    pub(super) fn update_readiness_without_probe(&mut self, i: usize, now: DateTime<Utc>) -> bool {
        let c = &mut self.containers[i];
        if c.init || c.spec.readiness_probe.is_some() {
            return false;
        }
        let State::Running { since, .. } = c.state else {
            return false;
        };
        let delay = c.behaviour.ready_after.unwrap_or_default();
        let ready = c.started && now >= since + chrono_duration(delay);
        let changed = ready != c.ready;
        c.ready = ready;
        changed
    }

    /// The container's process ended at `at` with `code`.
    pub(super) fn exit(
        &mut self,
        i: usize,
        at: DateTime<Utc>,
        code: i32,
        _node: &mut NodeRuntime,
        out: &mut Vec<Command>,
        by_itself: bool,
    ) {
        let _ = by_itself;
        let restart_policy = self.restart_policy();
        let terminating = matches!(self.stage, Stage::Terminating { .. });
        let c = &mut self.containers[i];
        let started = match c.state {
            State::Running { since, .. } => since,
            _ => at,
        };
        let terminated = Terminated {
            exit_code: code,
            reason: if code == 0 { "Completed" } else { "Error" },
            started,
            finished: at,
            container_id: c.container_id.clone(),
        };
        out.push(Command::ContainerStopped {
            container: c.name().to_string(),
            finished: at,
        });
        c.ready = false;
        c.probes.clear();
        let restart = !terminating
            && match (c.init, restart_policy.as_str()) {
                (true, "Never") => false,
                (true, _) => code != 0,
                (false, "Always") => true,
                (false, "OnFailure") => code != 0,
                _ => false,
            };
        if !restart {
            c.state = State::Terminated(terminated);
            return;
        }
        c.started = false;
        if (at - started).to_std().unwrap_or_default() >= BACKOFF_RESET {
            c.crashes = 0;
        }
        let delay = if c.crashes == 0 {
            Duration::ZERO
        } else {
            backoff(BACKOFF_INITIAL, BACKOFF_MAX, c.crashes - 1)
        };
        c.crashes += 1;
        c.last = Some(terminated);
        if delay.is_zero() {
            c.state = State::Waiting {
                reason: "ContainerCreating",
                message: String::new(),
                until: Some(at),
                pull_next: true,
            };
            return;
        }
        let pod = &self.pod.metadata;
        let who = format!(
            "{}_{}({})",
            pod.name.as_deref().unwrap_or(""),
            pod.namespace.as_deref().unwrap_or(""),
            pod.uid.as_deref().unwrap_or("")
        );
        out.push(event(
            c,
            true,
            "BackOff",
            format!(
                "Back-off restarting failed container {} in pod {who}",
                c.name()
            ),
        ));
        c.state = State::Waiting {
            reason: "CrashLoopBackOff",
            message: format!(
                "back-off {}s restarting failed container={} pod={who}",
                delay.as_secs(),
                c.name()
            ),
            until: Some(at + chrono_duration(delay)),
            pull_next: true,
        };
    }
}
