//! [`PodLifecycle`]: the kubelet's pod lifecycle as a pure state machine. It takes inputs (a
//! wake-up, a newer pod from the watch, the answer of a volume check, the pod's removal) with
//! "now", works on the node's [`NodeRuntime`] (image cache, IPs, admitted resources), and returns
//! [`Command`]s for its driver: publish this status, record this event, wake me at, check these
//! volumes, delete the pod, forget me. No I/O, no clock.
//!
//! The order is a kubelet's: admit (resource fit, else Failed with OutOf…) → pause sandbox (pod IP
//! from the podCIDR, the host's IP for hostNetwork) → claims (bound, their volumes attached;
//! else ContainerCreating, with FailedMount events for claims that cannot be used) → volumes
//! (a missing configMap or secret holds the pod in ContainerCreating with FailedMount events) → per container: pull per
//! imagePullPolicy (ErrImagePull → ImagePullBackOff with exponential back-off), create, start,
//! postStart → init containers one at a time, then the main containers → startup, liveness and
//! readiness probes → exits handled per restartPolicy with CrashLoopBackOff (10 s doubling to
//! 5 min, reset after 10 min of running). On deletion: preStop, SIGTERM, kill at the end of the
//! grace period, stop and remove the sandbox, then delete the pod object (grace 0, uid
//! precondition).
//!
//! The machine and its stepping live here; a container's way in `containers`, probes in `probes`,
//! deletion in `termination`, the reported status in `status`, and image names and container IDs
//! in `runtime_ids`.

mod containers;
mod probes;
mod runtime_ids;
mod status;
mod termination;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Container, Pod, Probe};
use serde_json::Value;

use crate::api_time::chrono_duration;
use crate::process::{parse_seconds, Output, Process};
use crate::runtime::{pod_request, CriCall, NodeRuntime, Resources};

/// Crash back-off: first restart at once, then 10 s doubling to 5 min.
const BACKOFF_INITIAL: Duration = Duration::from_secs(10);
const BACKOFF_MAX: Duration = Duration::from_secs(300);
/// A container that ran this long before exiting starts its back-off afresh.
const BACKOFF_RESET: Duration = Duration::from_secs(600);
/// How long ErrImagePull shows before the back-off (ImagePullBackOff) starts.
const ERR_IMAGE_PULL_SHOWN: Duration = Duration::from_secs(1);
/// Retry of a volume whose configMap or secret is missing: 1 s doubling to 8 s.
const MOUNT_RETRY_INITIAL: Duration = Duration::from_secs(1);
const MOUNT_RETRY_MAX: Duration = Duration::from_secs(8);
/// How often a volume not attached yet is looked at again, as the kubelet polls its volume
/// manager (`podAttachAndMountRetryInterval`).
const CLAIM_POLL: Duration = Duration::from_millis(300);
/// The longest wait between two looks at a volume that is not attached yet.
const CLAIM_POLL_MAX: Duration = Duration::from_millis(1200);
/// The annotation prefix of scripted behaviour (`kemu.dev/crash-after`, with an optional
/// `.<container>` suffix naming one container).
pub const BEHAVIOUR_PREFIX: &str = "kemu.dev/";

/// What happened.
#[derive(Debug)]
pub enum Input<'a> {
    /// A timer the machine asked for fired (or the driver just wants it to catch up).
    Tick,
    /// A newer version of the pod from the watch (e.g. with a deletionTimestamp).
    Updated(&'a Pod),
    /// The answer to [`Command::CheckVolumes`]: the mount errors, empty when all are there.
    VolumesChecked { missing: Vec<String> },
    /// The answer to [`Command::CheckClaims`].
    ClaimsChecked(ClaimsAnswer),
    /// The pod object is gone (force-deleted, or our own final delete went through).
    Removed,
}

/// What the driver must do.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    /// Publish this `status` (the latest wins; the driver coalesces).
    Status(Value),
    /// Record a core/v1 event about the pod.
    Event {
        warning: bool,
        reason: &'static str,
        message: String,
        /// `spec.containers{name}` style field path, when about one container.
        field_path: Option<String>,
    },
    /// Call again with [`Input::Tick`] at this time (replaces any earlier request).
    WakeAt(DateTime<Utc>),
    /// Check that these configMaps and secrets exist and answer with
    /// [`Input::VolumesChecked`]; each entry is (volume, kind, name).
    CheckVolumes(Vec<(String, &'static str, String)>),
    /// Check that these claims are bound and their volumes attached to the node and answer
    /// with [`Input::ClaimsChecked`]; each entry is (volume, claim).
    CheckClaims(Vec<(String, String)>),
    /// A container instance started: its output, for `kubectl logs`.
    ContainerStarted {
        container: String,
        started: DateTime<Utc>,
        output: Output,
    },
    /// A container instance ended at this time: its log stops there.
    ContainerStopped {
        container: String,
        finished: DateTime<Utc>,
    },
    /// Delete the pod object with grace period 0 and this uid as precondition.
    DeletePod { uid: String },
    /// Nothing is left of the pod on this node: drop the machine.
    Forget,
}

/// What the check of a pod's PersistentVolumeClaims found.
#[derive(Clone, Debug, PartialEq)]
pub enum ClaimsAnswer {
    /// Every claim is bound and every volume that needs attaching is attached.
    Ready,
    /// The claims are bound, some volume is not attached yet: look again soon. The kubelet
    /// waits for an attach without an event.
    Unattached,
    /// A claim cannot be used yet (not bound, missing, being deleted): the FailedMount message.
    Failed(String),
}

/// Scripted behaviour read from the pod's annotations.
#[derive(Clone, Debug, Default, PartialEq)]
struct Behaviour {
    crash_after: Option<(Duration, i32)>,
    ready_after: Option<Duration>,
    liveness_fail_after: Option<Duration>,
    readiness_fail_after: Option<Duration>,
    startup_fail: bool,
    /// Exits this long after SIGTERM (overrides whether the process handles it).
    term_delay: Option<Duration>,
}

impl Behaviour {
    fn of(pod: &Pod, container: &str) -> Behaviour {
        let annotations = pod.metadata.annotations.as_ref();
        let get = |key: &str| -> Option<&str> {
            let a = annotations?;
            a.get(&format!("{BEHAVIOUR_PREFIX}{key}.{container}"))
                .or_else(|| a.get(&format!("{BEHAVIOUR_PREFIX}{key}")))
                .map(String::as_str)
        };
        let secs = |key: &str| get(key).and_then(parse_seconds);
        Behaviour {
            crash_after: get("crash-after").and_then(|v| {
                let (after, code) = v.split_once(':').unwrap_or((v, "1"));
                Some((parse_seconds(after)?, code.parse().ok()?))
            }),
            ready_after: secs("ready-after"),
            liveness_fail_after: secs("liveness-fail-after"),
            readiness_fail_after: secs("readiness-fail-after"),
            startup_fail: get("startup-fail") == Some("true"),
            term_delay: secs("term-delay"),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ProbeKind {
    Startup,
    Liveness,
    Readiness,
}

impl ProbeKind {
    fn title(self) -> &'static str {
        match self {
            ProbeKind::Startup => "Startup",
            ProbeKind::Liveness => "Liveness",
            ProbeKind::Readiness => "Readiness",
        }
    }
}

#[derive(Clone, Debug)]
struct ProbeRun {
    kind: ProbeKind,
    period: Duration,
    failure_threshold: i32,
    success_threshold: i32,
    /// An exec probe whose command always fails.
    always_fails: bool,
    failure_message: String,
    next_at: DateTime<Utc>,
    successes: i32,
    failures: i32,
}

impl ProbeRun {
    fn new(kind: ProbeKind, probe: &Probe, started: DateTime<Utc>) -> ProbeRun {
        let secs = |v: Option<i32>, default: i32| v.unwrap_or(default).max(0) as u64;
        let always_fails = probe.exec.as_ref().is_some_and(|e| {
            let p = Process::from_command(e.command.as_deref().unwrap_or_default(), &[]);
            matches!(p.exit, Some((_, code)) if code != 0)
        });
        let failure_message = if probe.http_get.is_some() {
            "HTTP probe failed with statuscode: 500".to_string()
        } else if let Some(tcp) = &probe.tcp_socket {
            format!(
                "dial tcp: connect to port {:?}: connection refused",
                tcp.port
            )
        } else {
            "command failed with exit code 1".to_string()
        };
        ProbeRun {
            kind,
            period: Duration::from_secs(secs(probe.period_seconds, 10).max(1)),
            failure_threshold: probe.failure_threshold.unwrap_or(3).max(1),
            success_threshold: probe.success_threshold.unwrap_or(1).max(1),
            always_fails,
            failure_message,
            next_at: started
                + chrono_duration(Duration::from_secs(secs(probe.initial_delay_seconds, 0))),
            successes: 0,
            failures: 0,
        }
    }
}

/// The runtime state of one container.
#[derive(Clone, Debug, PartialEq)]
enum State {
    /// Not started yet (ContainerCreating / PodInitializing), or its turn has not come.
    Pending,
    /// ImagePullBackOff/ErrImagePull/CrashLoopBackOff/ErrImageNeverPull until `until` (never if
    /// `None`); then pulls (`pull_next`) or goes on to create.
    Waiting {
        reason: &'static str,
        message: String,
        until: Option<DateTime<Utc>>,
        pull_next: bool,
    },
    /// A pull failed: shown as ErrImagePull until `shown_until`, then ImagePullBackOff until
    /// `retry_at`.
    ErrImagePull {
        message: String,
        shown_until: DateTime<Utc>,
        retry_at: DateTime<Utc>,
    },
    Pulling {
        since: DateTime<Utc>,
        until: DateTime<Utc>,
    },
    Creating {
        until: DateTime<Utc>,
    },
    Starting {
        until: DateTime<Utc>,
    },
    Running {
        since: DateTime<Utc>,
        /// When and how the process ends by itself (or through SIGTERM / the kill).
        exit_at: Option<(DateTime<Utc>, i32)>,
    },
    Terminated(Terminated),
}

#[derive(Clone, Debug, PartialEq)]
struct Terminated {
    exit_code: i32,
    reason: &'static str,
    started: DateTime<Utc>,
    finished: DateTime<Utc>,
    container_id: String,
}

#[derive(Clone, Debug)]
struct ContainerRun {
    spec: Container,
    init: bool,
    state: State,
    last: Option<Terminated>,
    restart_count: i32,
    /// Restarts that went through back-off since the last reset.
    crashes: u32,
    pull_failures: u32,
    ready: bool,
    started: bool,
    container_id: String,
    behaviour: Behaviour,
    process: Option<Process>,
    probes: Vec<ProbeRun>,
}

impl ContainerRun {
    fn name(&self) -> &str {
        &self.spec.name
    }

    fn image(&self) -> &str {
        self.spec.image.as_deref().unwrap_or_default()
    }

    fn field_path(&self) -> String {
        let list = if self.init {
            "initContainers"
        } else {
            "containers"
        };
        format!("spec.{list}{{{}}}", self.spec.name)
    }

    fn is_running(&self) -> bool {
        matches!(self.state, State::Running { .. })
    }

    /// Created and not exited: a process that termination must stop.
    fn is_live(&self) -> bool {
        matches!(self.state, State::Running { .. } | State::Starting { .. })
    }

    fn succeeded(&self) -> bool {
        matches!(&self.state, State::Terminated(t) if t.exit_code == 0)
    }
}

/// Where the pod as a whole is.
#[derive(Clone, Debug, PartialEq)]
enum Stage {
    /// Not looked at yet.
    New,
    /// Rejected by admission: Failed, nothing runs.
    Rejected,
    Sandbox {
        until: DateTime<Utc>,
    },
    /// Waiting for the answer of a claim check (`retry_at` None) or for the next check.
    Claims {
        retry_at: Option<DateTime<Utc>>,
        failures: u32,
        /// Checks that found every claim bound but a volume not yet attached, in a row.
        polls: u32,
    },
    /// Waiting for the answer of a volume check (`retry_at` None) or for the next check.
    Volumes {
        retry_at: Option<DateTime<Utc>>,
        failures: u32,
    },
    Containers,
    /// All containers are done for good (Succeeded/Failed); the sandbox is torn down.
    Finished,
    /// Deletion: stopping containers, then the sandbox.
    Terminating {
        kill_at: DateTime<Utc>,
    },
    StoppingSandbox {
        until: DateTime<Utc>,
    },
    RemovingSandbox {
        until: DateTime<Utc>,
    },
    /// The delete was asked for; waiting for the pod to disappear from the watch.
    Deleting,
    Gone,
}

/// One pod's lifecycle on one node.
#[derive(Debug)]
pub struct PodLifecycle {
    pod: Pod,
    stage: Stage,
    containers: Vec<ContainerRun>,
    /// Index in `containers` of the first main container; earlier ones are init containers.
    mains_from: usize,
    request: Resources,
    admitted: bool,
    rejection: Option<(String, String)>,
    start_time: Option<DateTime<Utc>>,
    /// The IPs the sandbox holds from the node's pool, one per family.
    pod_ips: Vec<IpAddr>,
    /// The pod IPs stay in the status after the sandbox is gone (empty until it runs).
    shown_ips: Vec<IpAddr>,
    sandbox_ready: bool,
    /// The node's IPs, once the sandbox runs.
    host_ips: Vec<IpAddr>,
    /// Condition type → (status, lastTransitionTime).
    conditions: BTreeMap<&'static str, (bool, DateTime<Utc>)>,
    /// A hash of the status last sent: an unchanged status is not sent again. (A hash, not the
    /// status itself, which would cost kilobytes a pod on a node host holding 100,000 pods.)
    last_status: Option<u64>,
    next_id: u32,
}

impl PodLifecycle {
    pub fn new(mut pod: Pod) -> PodLifecycle {
        let request = pod_request(&pod);
        // The containers move out of the pod into their runs rather than being copied: the
        // machine reads them only there, and a node host holds every pod it runs.
        let (inits, mains) = match pod.spec.as_mut() {
            Some(spec) => (
                spec.init_containers.take().unwrap_or_default(),
                std::mem::take(&mut spec.containers),
            ),
            None => (Vec::new(), Vec::new()),
        };
        let mains_from = inits.len();
        let containers = inits
            .into_iter()
            .map(|c| (c, true))
            .chain(mains.into_iter().map(|c| (c, false)))
            .map(|(spec, init)| ContainerRun {
                behaviour: Behaviour::of(&pod, &spec.name),
                spec,
                init,
                state: State::Pending,
                last: None,
                restart_count: 0,
                crashes: 0,
                pull_failures: 0,
                ready: false,
                started: false,
                container_id: String::new(),
                process: None,
                probes: Vec::new(),
            })
            .collect();
        PodLifecycle {
            request,
            pod,
            stage: Stage::New,
            containers,
            mains_from,
            admitted: false,
            rejection: None,
            start_time: None,
            pod_ips: Vec::new(),
            shown_ips: Vec::new(),
            sandbox_ready: false,
            host_ips: Vec::new(),
            conditions: BTreeMap::new(),
            last_status: None,
            next_id: 0,
        }
    }

    pub fn uid(&self) -> &str {
        self.pod.metadata.uid.as_deref().unwrap_or_default()
    }

    /// The pod as the machine knows it, its containers put back.
    pub fn pod(&self) -> Pod {
        let mut pod = self.pod.clone();
        if let Some(spec) = pod.spec.as_mut() {
            let specs = |range: std::ops::Range<usize>| {
                self.containers[range]
                    .iter()
                    .map(|c| c.spec.clone())
                    .collect::<Vec<_>>()
            };
            spec.containers = specs(self.mains_from..self.containers.len());
            if self.mains_from > 0 {
                spec.init_containers = Some(specs(0..self.mains_from));
            }
        }
        pod
    }

    /// Whether the pod's phase is final (nothing runs or will run).
    pub fn is_finished(&self) -> bool {
        matches!(self.stage, Stage::Finished | Stage::Rejected)
    }

    /// Advances the machine to `now` with `input`.
    pub fn step(
        &mut self,
        now: DateTime<Utc>,
        input: Input<'_>,
        node: &mut NodeRuntime,
    ) -> Vec<Command> {
        let mut out = Vec::new();
        match input {
            Input::Tick => {}
            Input::Updated(pod) => {
                let deleting = pod.metadata.deletion_timestamp.is_some();
                self.pod.metadata = pod.metadata.clone();
                if deleting {
                    self.begin_termination(now, node, &mut out);
                }
            }
            Input::VolumesChecked { missing } => {
                if let Stage::Volumes { failures, .. } = self.stage {
                    if missing.is_empty() {
                        self.stage = Stage::Containers;
                    } else {
                        for message in missing {
                            out.push(Command::Event {
                                warning: true,
                                reason: "FailedMount",
                                message,
                                field_path: None,
                            });
                        }
                        let delay = backoff(MOUNT_RETRY_INITIAL, MOUNT_RETRY_MAX, failures);
                        self.stage = Stage::Volumes {
                            retry_at: Some(now + chrono_duration(delay)),
                            failures: failures + 1,
                        };
                    }
                }
            }
            Input::ClaimsChecked(answer) => {
                if let Stage::Claims {
                    failures, polls, ..
                } = self.stage
                {
                    let mut next_polls = 0;
                    let (retry, failures) = match answer {
                        ClaimsAnswer::Ready => {
                            self.enter_volumes(&mut out);
                            (None, failures)
                        }
                        // Each look is an API read per volume: wait longer the longer the
                        // attach takes, so thousands of waiting pods do not swamp the server.
                        ClaimsAnswer::Unattached => {
                            next_polls = polls + 1;
                            (Some(backoff(CLAIM_POLL, CLAIM_POLL_MAX, polls)), failures)
                        }
                        ClaimsAnswer::Failed(message) => {
                            out.push(Command::Event {
                                warning: true,
                                reason: "FailedMount",
                                message,
                                field_path: None,
                            });
                            (
                                Some(backoff(MOUNT_RETRY_INITIAL, MOUNT_RETRY_MAX, failures)),
                                failures + 1,
                            )
                        }
                    };
                    if let Some(delay) = retry {
                        self.stage = Stage::Claims {
                            retry_at: Some(now + chrono_duration(delay)),
                            failures,
                            polls: next_polls,
                        };
                    }
                }
            }
            Input::Removed => {
                self.release(node);
                self.stage = Stage::Gone;
                out.push(Command::Forget);
                return out;
            }
        }
        // Zero-latency transitions chain within one step.
        for _ in 0..64 {
            if !self.advance(now, node, &mut out) {
                break;
            }
        }
        if !matches!(self.stage, Stage::Gone | Stage::Deleting) {
            let status = self.status(now);
            let hash = status_hash(&status);
            if self.last_status != Some(hash) {
                self.last_status = Some(hash);
                out.push(Command::Status(status));
            }
        }
        if let Some(at) = self.next_wake(now) {
            out.push(Command::WakeAt(at));
        }
        out
    }

    /// One round of transitions that are due; true if anything moved.
    fn advance(
        &mut self,
        now: DateTime<Utc>,
        node: &mut NodeRuntime,
        out: &mut Vec<Command>,
    ) -> bool {
        match self.stage.clone() {
            Stage::New => {
                if self.pod.metadata.deletion_timestamp.is_some() {
                    // Deleted before it ever ran here: nothing to stop.
                    self.stage = Stage::RemovingSandbox { until: now };
                    return true;
                }
                self.start_time = Some(now);
                match node.admit(self.request) {
                    Ok(()) => {
                        self.admitted = true;
                        let until = now + chrono_duration(node.latency(CriCall::RunPodSandbox));
                        self.stage = Stage::Sandbox { until };
                    }
                    Err(rejected) => {
                        self.rejection = Some((rejected.reason, rejected.message));
                        self.stage = Stage::Rejected;
                    }
                }
                true
            }
            Stage::Sandbox { until } if until <= now => {
                let host_network = self.spec_flag(|s| s.host_network);
                self.pod_ips = if host_network {
                    Vec::new()
                } else {
                    node.allocate_ips().unwrap_or_default()
                };
                self.shown_ips = if self.pod_ips.is_empty() {
                    node.host_ips.clone()
                } else {
                    self.pod_ips.clone()
                };
                self.host_ips = node.host_ips.clone();
                self.sandbox_ready = true;
                let claims = self.claim_volumes();
                if claims.is_empty() {
                    self.enter_volumes(out);
                } else {
                    self.stage = Stage::Claims {
                        retry_at: None,
                        failures: 0,
                        polls: 0,
                    };
                    out.push(Command::CheckClaims(claims));
                }
                true
            }
            Stage::Claims {
                retry_at: Some(at),
                failures,
                polls,
            } if at <= now => {
                self.stage = Stage::Claims {
                    retry_at: None,
                    failures,
                    polls,
                };
                out.push(Command::CheckClaims(self.claim_volumes()));
                true
            }
            Stage::Volumes {
                retry_at: Some(at),
                failures,
            } if at <= now => {
                self.stage = Stage::Volumes {
                    retry_at: None,
                    failures,
                };
                out.push(Command::CheckVolumes(self.volume_sources()));
                true
            }
            Stage::Containers => self.advance_containers(now, node, out),
            Stage::Terminating { kill_at } => {
                let mut moved = self.advance_containers(now, node, out);
                if now >= kill_at {
                    for i in 0..self.containers.len() {
                        if self.containers[i].is_live() {
                            self.exit(i, now, 137, node, out, false);
                            moved = true;
                        }
                    }
                }
                if !self.containers.iter().any(ContainerRun::is_live) {
                    let until = now + chrono_duration(node.latency(CriCall::StopPodSandbox));
                    self.stage = Stage::StoppingSandbox { until };
                    moved = true;
                }
                moved
            }
            Stage::StoppingSandbox { until } if until <= now => {
                self.sandbox_ready = false;
                let until = now + chrono_duration(node.latency(CriCall::RemovePodSandbox));
                self.stage = Stage::RemovingSandbox { until };
                true
            }
            Stage::RemovingSandbox { until } if until <= now => {
                self.release(node);
                self.stage = Stage::Deleting;
                out.push(Command::DeletePod {
                    uid: self.uid().to_string(),
                });
                true
            }
            _ => false,
        }
    }

    fn restart_policy(&self) -> String {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| s.restart_policy.clone())
            .unwrap_or_else(|| "Always".into())
    }

    /// Whether the pod is done for good: an init container failed under Never, or every main
    /// container terminated and none will restart.
    fn all_done(&self) -> bool {
        let failed_init = (0..self.mains_from)
            .any(|i| matches!(&self.containers[i].state, State::Terminated(t) if t.exit_code != 0));
        if failed_init {
            return true;
        }
        self.mains_from < self.containers.len()
            && self.containers[self.mains_from..]
                .iter()
                .all(|c| matches!(c.state, State::Terminated(_)))
    }

    /// The pod reached Succeeded or Failed: tear the sandbox down, give back its resources.
    fn finish(&mut self, _now: DateTime<Utc>, node: &mut NodeRuntime, _out: &mut [Command]) {
        self.release(node);
        self.sandbox_ready = false;
        self.stage = Stage::Finished;
    }

    fn release(&mut self, node: &mut NodeRuntime) {
        node.release_ips(&std::mem::take(&mut self.pod_ips));
        if self.admitted {
            node.release(self.request);
            self.admitted = false;
        }
    }

    /// The earliest time something is due.
    /// Anything due by `now` has been handled (or cannot proceed, e.g. a back-off while
    /// terminating), so only later times count.
    fn next_wake(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let mut next: Option<DateTime<Utc>> = None;
        let mut consider = |t: DateTime<Utc>| {
            if t > now && t < DateTime::<Utc>::MAX_UTC {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        match &self.stage {
            Stage::Sandbox { until }
            | Stage::StoppingSandbox { until }
            | Stage::RemovingSandbox { until } => consider(*until),
            Stage::Volumes {
                retry_at: Some(at), ..
            }
            | Stage::Claims {
                retry_at: Some(at), ..
            } => consider(*at),
            Stage::Terminating { kill_at } => consider(*kill_at),
            _ => {}
        }
        if matches!(self.stage, Stage::Containers | Stage::Terminating { .. }) {
            for c in &self.containers {
                match &c.state {
                    State::Waiting { until: Some(t), .. }
                    | State::ErrImagePull { shown_until: t, .. }
                    | State::Pulling { until: t, .. }
                    | State::Creating { until: t }
                    | State::Starting { until: t } => consider(*t),
                    State::Running { since, exit_at } => {
                        if let Some((t, _)) = exit_at {
                            consider(*t);
                        }
                        for p in &c.probes {
                            consider(p.next_at);
                        }
                        if !c.ready && c.started && c.spec.readiness_probe.is_none() && !c.init {
                            consider(
                                *since
                                    + chrono_duration(c.behaviour.ready_after.unwrap_or_default()),
                            );
                        }
                    }
                    _ => {}
                }
            }
        }
        next
    }

    fn spec_flag(&self, f: impl Fn(&k8s_openapi::api::core::v1::PodSpec) -> Option<bool>) -> bool {
        self.pod.spec.as_ref().and_then(f).unwrap_or(false)
    }

    /// On to the configMap and secret volumes once the claims are ready: wait for them, or
    /// start the containers when there are none.
    fn enter_volumes(&mut self, out: &mut Vec<Command>) {
        let wanted = self.volume_sources();
        if wanted.is_empty() {
            self.stage = Stage::Containers;
        } else {
            self.stage = Stage::Volumes {
                retry_at: None,
                failures: 0,
            };
            out.push(Command::CheckVolumes(wanted));
        }
    }

    /// The pod's PersistentVolumeClaim volumes: (volume, claim).
    fn claim_volumes(&self) -> Vec<(String, String)> {
        let volumes = self.pod.spec.as_ref().and_then(|s| s.volumes.as_ref());
        volumes
            .into_iter()
            .flatten()
            .filter_map(|v| {
                let claim = v.persistent_volume_claim.as_ref()?;
                Some((v.name.clone(), claim.claim_name.clone()))
            })
            .collect()
    }

    /// The configMaps and secrets the pod's volumes need (not the optional ones).
    fn volume_sources(&self) -> Vec<(String, &'static str, String)> {
        let mut out = Vec::new();
        let volumes = self.pod.spec.as_ref().and_then(|s| s.volumes.as_ref());
        for v in volumes.into_iter().flatten() {
            if let Some(cm) = &v.config_map {
                if !cm.optional.unwrap_or(false) {
                    out.push((v.name.clone(), "configmap", cm.name.clone()));
                }
            }
            if let Some(s) = &v.secret {
                if !s.optional.unwrap_or(false) {
                    out.push((
                        v.name.clone(),
                        "secret",
                        s.secret_name.clone().unwrap_or_default(),
                    ));
                }
            }
            if let Some(projected) = &v.projected {
                for source in projected.sources.iter().flatten() {
                    if let Some(cm) = &source.config_map {
                        if !cm.optional.unwrap_or(false) {
                            out.push((v.name.clone(), "configmap", cm.name.clone()));
                        }
                    }
                    if let Some(s) = &source.secret {
                        if !s.optional.unwrap_or(false) {
                            out.push((v.name.clone(), "secret", s.name.clone()));
                        }
                    }
                }
            }
        }
        out
    }
}

fn event(c: &ContainerRun, warning: bool, reason: &'static str, message: String) -> Command {
    Command::Event {
        warning,
        reason,
        message,
        field_path: Some(c.field_path()),
    }
}

/// `initial` doubled `n` times, at most `max`.
fn backoff(initial: Duration, max: Duration, n: u32) -> Duration {
    initial
        .saturating_mul(1u32.checked_shl(n.min(31)).unwrap_or(u32::MAX))
        .min(max)
}

/// A hash of a status as its JSON text (object keys are sorted, so equal statuses hash alike).
fn status_hash(status: &Value) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    status.to_string().hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests;
