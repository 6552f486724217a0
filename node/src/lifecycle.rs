//! [`PodLifecycle`]: the kubelet's pod lifecycle as a pure state machine. It takes inputs (a
//! wake-up, a newer pod from the watch, the answer of a volume check, the pod's removal) with
//! "now", works on the node's [`NodeRuntime`] (image cache, IPs, admitted resources), and returns
//! [`Command`]s for its driver: publish this status, record this event, wake me at, check these
//! volumes, delete the pod, forget me. No I/O, no clock.
//!
//! The order is a kubelet's: admit (resource fit, else Failed with OutOf…) → pause sandbox (pod IP
//! from the podCIDR, the host's IP for hostNetwork) → volumes (a missing configMap or secret
//! holds the pod in ContainerCreating with FailedMount events) → per container: pull per
//! imagePullPolicy (ErrImagePull → ImagePullBackOff with exponential back-off), create, start,
//! postStart → init containers one at a time, then the main containers → startup, liveness and
//! readiness probes → exits handled per restartPolicy with CrashLoopBackOff (10 s doubling to
//! 5 min, reset after 10 min of running). On deletion: preStop, SIGTERM, kill at the end of the
//! grace period, stop and remove the sandbox, then delete the pod object (grace 0, uid
//! precondition).

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use k8s_openapi::api::core::v1::{Container, Pod, Probe};
use serde_json::{json, Map, Value};

use crate::process::{parse_seconds, Output, Process};
use crate::runtime::{CriCall, NodeRuntime, Resources};

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
    pod_ip: Option<Ipv4Addr>,
    /// The pod IP stays in the status after the sandbox is gone.
    shown_ip: Option<Ipv4Addr>,
    sandbox_ready: bool,
    /// The node's IP, once the sandbox runs.
    host_ip: Option<Ipv4Addr>,
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
            pod_ip: None,
            shown_ip: None,
            sandbox_ready: false,
            host_ip: None,
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
                self.pod_ip = if host_network {
                    None
                } else {
                    node.allocate_ip()
                };
                self.shown_ip = Some(self.pod_ip.unwrap_or(node.host_ip));
                self.host_ip = Some(node.host_ip);
                self.sandbox_ready = true;
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

    /// Moves every container along; true if anything moved.
    fn advance_containers(
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

    fn start(&mut self, i: usize, now: DateTime<Utc>, out: &mut Vec<Command>) {
        let c = &mut self.containers[i];
        let spec = &c.spec;
        let mut process = Process::from_command(
            spec.command.as_deref().unwrap_or_default(),
            spec.args.as_deref().unwrap_or_default(),
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
    fn update_readiness_without_probe(&mut self, i: usize, now: DateTime<Utc>) -> bool {
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

    fn run_probes(
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

    /// The container's process ended at `at` with `code`.
    fn exit(
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
        if let Some(ip) = self.pod_ip.take() {
            node.release_ip(ip);
        }
        if self.admitted {
            node.release(self.request);
            self.admitted = false;
        }
    }

    fn begin_termination(
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

    /// The pod's status as the kubelet reports it.
    fn status(&mut self, now: DateTime<Utc>) -> Value {
        let mut status = Map::new();
        if let Some((reason, message)) = &self.rejection {
            status.insert("phase".into(), json!("Failed"));
            status.insert("reason".into(), json!(reason));
            status.insert("message".into(), json!(message));
            if let Some(t) = self.start_time {
                status.insert("startTime".into(), json!(rfc3339(t)));
            }
            status.insert("conditions".into(), json!(self.pod_scheduled()));
            return Value::Object(status);
        }
        let phase = self.phase();
        let inits = &self.containers[..self.mains_from];
        let mains = &self.containers[self.mains_from..];
        let initialized = inits.iter().all(ContainerRun::succeeded);
        let finished = matches!(phase, "Succeeded" | "Failed");
        let containers_ready = !finished && initialized && mains.iter().all(|c| c.ready);
        let unready: Vec<String> = mains
            .iter()
            .filter(|c| !c.ready)
            .map(|c| c.name().to_string())
            .collect();
        let incomplete: Vec<String> = inits
            .iter()
            .filter(|c| !c.succeeded())
            .map(|c| c.name().to_string())
            .collect();
        let sandbox_ready = self.sandbox_ready;
        let mut conditions = self.pod_scheduled();
        let mut condition = |me: &mut Self,
                             kind: &'static str,
                             ok: bool,
                             reason: Option<String>,
                             message: Option<String>| {
            let since = match me.conditions.get(kind) {
                Some((was, since)) if *was == ok => *since,
                _ => {
                    me.conditions.insert(kind, (ok, now));
                    now
                }
            };
            let mut c = json!({"type": kind, "status": if ok {"True"} else {"False"}, "lastProbeTime": null, "lastTransitionTime": rfc3339(since)});
            if let (false, Some(r)) = (ok, reason) {
                c["reason"] = json!(r);
            }
            if let (false, Some(m)) = (ok, message) {
                c["message"] = json!(m);
            }
            conditions.push(c);
        };
        condition(self, "PodReadyToStartContainers", sandbox_ready, None, None);
        let not_init_reason = (!initialized).then(|| "ContainersNotInitialized".to_string());
        condition(
            self,
            "Initialized",
            initialized || (finished && incomplete.is_empty()),
            not_init_reason,
            Some(format!(
                "containers with incomplete status: [{}]",
                incomplete.join(" ")
            )),
        );
        let (reason, message) = if finished {
            ("PodCompleted".to_string(), None)
        } else {
            (
                "ContainersNotReady".to_string(),
                Some(format!(
                    "containers with unready status: [{}]",
                    unready.join(" ")
                )),
            )
        };
        condition(
            self,
            "ContainersReady",
            containers_ready,
            Some(reason.clone()),
            message.clone(),
        );
        condition(self, "Ready", containers_ready, Some(reason), message);
        status.insert("phase".into(), json!(phase));
        status.insert("conditions".into(), Value::Array(conditions));
        if let Some(t) = self.start_time {
            status.insert("startTime".into(), json!(rfc3339(t)));
        }
        if let Some(ip) = self.shown_ip {
            status.insert("podIP".into(), json!(ip.to_string()));
            status.insert("podIPs".into(), json!([{"ip": ip.to_string()}]));
        }
        if self.shown_ip.is_some() || self.sandbox_ready {
            status.insert("hostIP".into(), json!(self.host_ip_text()));
            status.insert("hostIPs".into(), json!([{"ip": self.host_ip_text()}]));
        }
        if let Some(qos) = self.pod.status.as_ref().and_then(|s| s.qos_class.clone()) {
            status.insert("qosClass".into(), json!(qos));
        }
        let init_running = (0..self.mains_from).find(|&i| !self.containers[i].succeeded());
        let statuses = |range: std::ops::Range<usize>| -> Vec<Value> {
            range
                .map(|i| {
                    container_status(
                        &self.containers[i],
                        init_running.is_some() && !self.containers[i].init,
                    )
                })
                .collect()
        };
        if self.mains_from > 0 {
            status.insert(
                "initContainerStatuses".into(),
                Value::Array(statuses(0..self.mains_from)),
            );
        }
        status.insert(
            "containerStatuses".into(),
            Value::Array(statuses(self.mains_from..self.containers.len())),
        );
        Value::Object(status)
    }

    fn host_ip_text(&self) -> String {
        self.host_ip.map(|ip| ip.to_string()).unwrap_or_default()
    }

    fn pod_scheduled(&self) -> Vec<Value> {
        self.pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"))
            .and_then(|c| serde_json::to_value(c).ok())
            .into_iter()
            .collect()
    }

    /// The kubelet's getPhase.
    fn phase(&self) -> &'static str {
        let policy = self.restart_policy();
        let inits = &self.containers[..self.mains_from];
        if inits
            .iter()
            .any(|c| matches!(&c.state, State::Terminated(t) if t.exit_code != 0))
        {
            return "Failed";
        }
        if !inits.iter().all(ContainerRun::succeeded) {
            return "Pending";
        }
        let (mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0);
        for c in &self.containers[self.mains_from..] {
            match &c.state {
                State::Running { .. } => running += 1,
                State::Terminated(t) => {
                    stopped += 1;
                    if t.exit_code == 0 {
                        succeeded += 1;
                    }
                }
                _ if c.last.is_some() => stopped += 1,
                _ => waiting += 1,
            }
        }
        if waiting > 0 {
            return "Pending";
        }
        if running > 0 {
            return "Running";
        }
        if stopped > 0 {
            return match policy.as_str() {
                "Always" => "Running",
                "OnFailure" if stopped == succeeded => "Succeeded",
                "OnFailure" => "Running",
                _ if stopped == succeeded => "Succeeded",
                _ => "Failed",
            };
        }
        "Pending"
    }
}

fn container_status(c: &ContainerRun, pod_initializing: bool) -> Value {
    let image = normalize_image(c.image());
    let mut s = json!({
        "name": c.name(),
        "image": image,
        "imageID": if c.container_id.is_empty() { String::new() } else { image_id(&image) },
        "ready": c.ready,
        "started": c.started && c.is_running(),
        "restartCount": c.restart_count,
    });
    if !c.container_id.is_empty() {
        s["containerID"] = json!(c.container_id);
    }
    s["state"] = match &c.state {
        State::Pending
        | State::Pulling { .. }
        | State::Creating { .. }
        | State::Starting { .. } => {
            let reason = if pod_initializing || c.init {
                "PodInitializing"
            } else {
                "ContainerCreating"
            };
            json!({"waiting": {"reason": reason}})
        }
        State::Waiting {
            reason, message, ..
        } => {
            let reason = if *reason == "ContainerCreating" && c.init {
                "PodInitializing"
            } else {
                reason
            };
            if message.is_empty() {
                json!({"waiting": {"reason": reason}})
            } else {
                json!({"waiting": {"reason": reason, "message": message}})
            }
        }
        State::ErrImagePull { message, .. } => {
            json!({"waiting": {"reason": "ErrImagePull", "message": message}})
        }
        State::Running { since, .. } => json!({"running": {"startedAt": rfc3339(*since)}}),
        State::Terminated(t) => json!({"terminated": terminated_json(t)}),
    };
    s["lastState"] = match &c.last {
        Some(t) => json!({"terminated": terminated_json(t)}),
        None => json!({}),
    };
    s
}

fn terminated_json(t: &Terminated) -> Value {
    json!({
        "exitCode": t.exit_code,
        "reason": t.reason,
        "startedAt": rfc3339(t.started),
        "finishedAt": rfc3339(t.finished),
        "containerID": t.container_id,
    })
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

pub fn chrono_duration(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}

/// Kubernetes' time format: seconds, UTC.
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// `nginx` → `docker.io/library/nginx:latest`, as containerd reports images.
pub fn normalize_image(image: &str) -> String {
    let (name, tagged) = match image.rsplit_once('/') {
        Some((_, last)) => (image.to_string(), last.contains(':') || last.contains('@')),
        None => (
            format!("library/{image}"),
            image.contains(':') || image.contains('@'),
        ),
    };
    let first = name.split('/').next().unwrap_or("");
    let qualified = if name.contains('/')
        && (first.contains('.') || first.contains(':') || first == "localhost")
    {
        name
    } else {
        format!("docker.io/{name}")
    };
    if tagged {
        qualified
    } else {
        format!("{qualified}:latest")
    }
}

/// A stable fake digest for an image name.
fn image_id(image: &str) -> String {
    let base = image.rsplit_once(':').map(|(b, _)| b).unwrap_or(image);
    let base = base.split('@').next().unwrap_or(base);
    format!("{base}@sha256:{}", hex_digest(image))
}

fn hex_digest(text: &str) -> String {
    // FNV-1a, stretched to 64 hex digits: a stable stand-in, not a real digest.
    let mut out = String::with_capacity(64);
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for round in 0..4u8 {
        for b in text.bytes().chain([round]) {
            h ^= b as u64;
            h = h.wrapping_mul(0x100_0000_01b3);
        }
        out.push_str(&format!("{h:016x}"));
    }
    out
}

fn container_id(pod_uid: &str, name: &str, n: u32) -> String {
    format!(
        "containerd://{}",
        hex_digest(&format!("{pod_uid}/{name}/{n}"))
    )
}

/// What the pod asks of the node: the sum of its containers' requests, or the largest init
/// container's if more, and one pod slot.
pub fn pod_request(pod: &Pod) -> Resources {
    let Some(spec) = &pod.spec else {
        return Resources {
            pods: 1,
            ..Default::default()
        };
    };
    let of = |c: &Container| -> (i64, i64) {
        let requests = c
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref().or(r.limits.as_ref()));
        let get = |k: &str, milli: bool| {
            requests
                .and_then(|r| r.get(k))
                .and_then(|q| api::quantity::parse(&q.0).ok())
                .map(|q| if milli { q.as_milli() } else { q.as_units() })
                .unwrap_or(0)
        };
        (get("cpu", true), get("memory", false))
    };
    let (mut cpu, mut mem) = (0, 0);
    for c in &spec.containers {
        let (a, b) = of(c);
        cpu += a;
        mem += b;
    }
    for c in spec.init_containers.iter().flatten() {
        let (a, b) = of(c);
        cpu = cpu.max(a);
        mem = mem.max(b);
    }
    Resources {
        cpu_milli: cpu,
        memory: mem,
        pods: 1,
    }
}

/// A hash of a status as its JSON text (object keys are sorted, so equal statuses hash alike).
fn status_hash(status: &Value) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    status.to_string().hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::config::RuntimeProfile;

    /// Round latencies and no jitter, so timings in the tests are exact.
    fn node() -> NodeRuntime {
        let profile = RuntimeProfile {
            run_sandbox_ms: 100,
            pull_image_ms: 1000,
            create_container_ms: 100,
            start_container_ms: 100,
            stop_container_ms: 100,
            stop_sandbox_ms: 100,
            remove_sandbox_ms: 100,
            jitter_percent: 0,
        };
        NodeRuntime::new(
            Arc::new(profile),
            Arc::new(vec!["fail".into()]),
            &[],
            Ipv4Addr::new(10, 64, 0, 0),
            Ipv4Addr::new(100, 64, 0, 1),
            Resources {
                cpu_milli: 4000,
                memory: 8 << 30,
                pods: 110,
            },
            1,
        )
    }

    fn pod(spec: Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "default", "uid": "u1"},
            "spec": spec,
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}
        }))
        .expect("pod")
    }

    fn t0() -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000, 0).expect("time")
    }

    /// Drives the machine with a fake clock: ticks at every wake-up it asks for until `until`,
    /// answering volume checks with `missing`.
    struct Harness {
        machine: PodLifecycle,
        node: NodeRuntime,
        now: DateTime<Utc>,
        wake: Option<DateTime<Utc>>,
        commands: Vec<Command>,
        missing: Vec<String>,
    }

    impl Harness {
        fn new(p: Pod) -> Harness {
            Harness {
                machine: PodLifecycle::new(p),
                node: node(),
                now: t0(),
                wake: None,
                commands: Vec::new(),
                missing: Vec::new(),
            }
        }

        fn feed(&mut self, input: Input<'_>) {
            let out = self.machine.step(self.now, input, &mut self.node);
            self.wake = None;
            let mut checks = false;
            for c in out {
                match &c {
                    Command::WakeAt(at) => self.wake = Some(*at),
                    Command::CheckVolumes(_) => checks = true,
                    _ => {}
                }
                self.commands.push(c);
            }
            if checks {
                let missing = self.missing.clone();
                self.feed(Input::VolumesChecked { missing });
            }
        }

        fn run_for(&mut self, secs: f64) {
            let until = self.now + chrono_duration(Duration::from_secs_f64(secs));
            if self.commands.is_empty() {
                self.feed(Input::Tick);
            }
            while let Some(at) = self.wake {
                if at > until {
                    break;
                }
                self.now = at.max(self.now);
                self.feed(Input::Tick);
            }
            self.now = until;
        }

        fn status(&self) -> &Value {
            self.commands
                .iter()
                .rev()
                .find_map(|c| match c {
                    Command::Status(s) => Some(s),
                    _ => None,
                })
                .expect("a status")
        }

        fn printed(&self) -> String {
            let mut p = serde_json::to_value(self.machine.pod()).expect("json");
            p["status"] = self.status().clone();
            apiserver::printers::pod_status_reason(&p)
        }

        fn reasons(&self) -> Vec<&'static str> {
            self.commands
                .iter()
                .filter_map(|c| match c {
                    Command::Event { reason, .. } => Some(*reason),
                    _ => None,
                })
                .collect()
        }
    }

    #[test]
    fn nginx_runs_and_becomes_ready() {
        let mut h = Harness::new(pod(
            json!({"containers": [{"name": "web", "image": "nginx"}]}),
        ));
        h.run_for(0.0);
        assert_eq!(h.printed(), "ContainerCreating");
        assert_eq!(h.status()["phase"], "Pending");
        h.run_for(5.0);
        let s = h.status();
        assert_eq!(s["phase"], "Running");
        assert_eq!(h.printed(), "Running");
        assert_eq!(s["podIP"], "10.64.0.2");
        assert_eq!(s["hostIP"], "100.64.0.1");
        assert_eq!(s["containerStatuses"][0]["ready"], true);
        assert_eq!(
            s["containerStatuses"][0]["image"],
            "docker.io/library/nginx:latest"
        );
        assert!(s["containerStatuses"][0]["containerID"]
            .as_str()
            .unwrap()
            .starts_with("containerd://"));
        let ready = s["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Ready")
            .unwrap();
        assert_eq!(ready["status"], "True");
        assert_eq!(h.reasons(), vec!["Pulling", "Pulled", "Created", "Started"]);
        assert!(h.wake.is_none(), "an idle running pod needs no timer");
    }

    #[test]
    fn an_image_the_node_has_starts_without_a_pull() {
        let mut h = Harness::new(pod(json!({"containers": [
            {"name": "pause", "image": crate::config::SANDBOX_IMAGE}
        ]})));
        h.node.store_image(crate::config::SANDBOX_IMAGE);
        h.run_for(1.0);
        assert_eq!(h.status()["phase"], "Running");
        assert_eq!(h.reasons(), vec!["Pulled", "Created", "Started"]);
        let pulled = h
            .commands
            .iter()
            .find_map(|c| match c {
                Command::Event { message, .. } => Some(message.as_str()),
                _ => None,
            })
            .unwrap_or_default();
        assert!(pulled.ends_with("already present on machine"), "{pulled}");
    }

    #[test]
    fn sleep_with_never_completes() {
        let mut h = Harness::new(pod(
            json!({"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "2"]}]}),
        ));
        h.run_for(3.0);
        assert_eq!(h.status()["phase"], "Running");
        h.run_for(2.0);
        assert_eq!(h.status()["phase"], "Succeeded");
        assert_eq!(h.printed(), "Completed");
        assert_eq!(
            h.node.used().pods,
            0,
            "a finished pod gives its resources back"
        );
    }

    #[test]
    fn crash_loop_backs_off_exponentially() {
        let mut h = Harness::new(pod(
            json!({"containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", "exit 1"]}]}),
        ));
        h.run_for(3.0);
        // Ran, exited, restarted at once, exited again: now in back-off.
        assert_eq!(h.printed(), "CrashLoopBackOff");
        assert_eq!(h.status()["containerStatuses"][0]["restartCount"], 1);
        assert_eq!(
            h.status()["containerStatuses"][0]["lastState"]["terminated"]["exitCode"],
            1
        );
        let mut waits = Vec::new();
        let mut last_restart = h.now;
        for _ in 0..5 {
            let count = h.status()["containerStatuses"][0]["restartCount"].clone();
            while h.status()["containerStatuses"][0]["restartCount"] == count {
                h.run_for(1.0);
            }
            waits.push((h.now - last_restart).num_seconds());
            last_restart = h.now;
        }
        // 10, 20, 40, 80, 160 s (plus the start latencies).
        for (w, expect) in waits.iter().zip([10, 20, 40, 80, 160]) {
            assert!((*w - expect).abs() <= 3, "{waits:?}");
        }
        assert!(h.reasons().contains(&"BackOff"));
    }

    #[test]
    fn failing_image_backs_off() {
        let mut h = Harness::new(pod(
            json!({"containers": [{"name": "c", "image": "registry/failing:1"}]}),
        ));
        h.run_for(2.0);
        assert_eq!(h.printed(), "ErrImagePull");
        h.run_for(1.0);
        assert_eq!(h.printed(), "ImagePullBackOff");
        h.run_for(60.0);
        assert_eq!(h.printed(), "ImagePullBackOff");
        let pulls = h.reasons().iter().filter(|r| **r == "Pulling").count();
        // t=0, then ~10 s, ~30 s (10 + 20) after: three or four attempts in a minute.
        assert!((3..=4).contains(&pulls), "{pulls}");
    }

    #[test]
    fn init_containers_run_in_order() {
        let mut h = Harness::new(pod(json!({
            "initContainers": [
                {"name": "i1", "image": "busybox", "command": ["sleep", "2"]},
                {"name": "i2", "image": "busybox", "command": ["sleep", "2"]}],
            "containers": [{"name": "c", "image": "nginx:1.27", "imagePullPolicy": "IfNotPresent"}]})));
        h.run_for(0.5);
        assert_eq!(h.printed(), "Init:0/2");
        h.run_for(3.0);
        assert_eq!(h.printed(), "Init:1/2");
        h.run_for(4.0);
        assert_eq!(h.printed(), "Running", "{:#?}", h.status());
        let started: Vec<String> = h
            .commands
            .iter()
            .filter_map(|c| match c {
                Command::Event {
                    reason: "Started",
                    field_path,
                    ..
                } => field_path.clone(),
                _ => None,
            })
            .collect();
        assert_eq!(
            started,
            vec![
                "spec.initContainers{i1}",
                "spec.initContainers{i2}",
                "spec.containers{c}"
            ]
        );
        // busybox was pulled once: the second init container found it present? No: policy
        // Always (no tag) pulls each time.
        assert_eq!(
            h.status()["initContainerStatuses"][1]["state"]["terminated"]["reason"],
            "Completed"
        );
    }

    #[test]
    fn failing_init_container() {
        let mut h = Harness::new(pod(json!({
            "initContainers": [{"name": "i1", "image": "busybox", "command": ["false"]}],
            "containers": [{"name": "c", "image": "nginx"}]})));
        h.run_for(3.0);
        assert_eq!(h.printed(), "Init:CrashLoopBackOff");
        let mut never = Harness::new(pod(json!({"restartPolicy": "Never",
            "initContainers": [{"name": "i1", "image": "busybox", "command": ["false"]}],
            "containers": [{"name": "c", "image": "nginx"}]})));
        never.run_for(3.0);
        assert_eq!(never.printed(), "Init:Error");
        assert_eq!(never.status()["phase"], "Failed");
    }

    #[test]
    fn missing_config_map_holds_the_pod() {
        let mut h = Harness::new(pod(json!({
            "volumes": [{"name": "cfg", "configMap": {"name": "settings"}}],
            "containers": [{"name": "c", "image": "nginx"}]})));
        h.missing = vec![
            "MountVolume.SetUp failed for volume \"cfg\" : configmap \"settings\" not found".into(),
        ];
        h.run_for(10.0);
        assert_eq!(h.printed(), "ContainerCreating");
        let mounts = h.reasons().iter().filter(|r| **r == "FailedMount").count();
        assert!(mounts >= 3, "{mounts}");
        h.missing.clear();
        h.run_for(10.0);
        assert_eq!(h.printed(), "Running");
    }

    #[test]
    fn resource_misfit_is_rejected() {
        let mut h = Harness::new(pod(
            json!({"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "64"}}}]}),
        ));
        h.run_for(0.0);
        assert_eq!(h.status()["phase"], "Failed");
        assert_eq!(h.printed(), "OutOfcpu");
    }

    #[test]
    fn graceful_deletion_runs_pre_stop_and_waits_for_the_grace_period() {
        let mut p = pod(
            json!({"terminationGracePeriodSeconds": 5, "containers": [{"name": "c", "image": "busybox",
            "command": ["sleep", "3600"], "lifecycle": {"preStop": {"exec": {"command": ["sleep", "2"]}}}}]}),
        );
        let mut h = Harness::new(p.clone());
        h.run_for(5.0);
        assert_eq!(h.status()["phase"], "Running");
        p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::from_second(1_700_000_010).expect("ts"),
        ));
        p.metadata.deletion_grace_period_seconds = Some(5);
        let deleted_at = h.now;
        h.feed(Input::Updated(&p));
        assert!(h.reasons().contains(&"Killing"));
        h.run_for(4.0);
        assert!(
            !h.commands
                .iter()
                .any(|c| matches!(c, Command::DeletePod { .. })),
            "sleep ignores SIGTERM: waits the grace period"
        );
        h.run_for(2.0);
        assert!(h
            .commands
            .iter()
            .any(|c| matches!(c, Command::DeletePod { uid } if uid == "u1")));
        assert!(h.now - deleted_at >= chrono::Duration::seconds(5));
        assert_eq!(h.node.used().pods, 0);
        h.feed(Input::Removed);
        assert_eq!(h.commands.last(), Some(&Command::Forget));
    }

    #[test]
    fn server_exits_on_sigterm_and_force_delete_cleans_up() {
        let mut p = pod(json!({"containers": [{"name": "c", "image": "nginx"}]}));
        let mut h = Harness::new(p.clone());
        h.run_for(5.0);
        p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::from_second(1_700_000_035).expect("ts"),
        ));
        p.metadata.deletion_grace_period_seconds = Some(30);
        h.feed(Input::Updated(&p));
        h.run_for(2.0);
        assert!(
            h.commands
                .iter()
                .any(|c| matches!(c, Command::DeletePod { .. })),
            "nginx exits at SIGTERM"
        );
        let mut h = Harness::new(pod(
            json!({"containers": [{"name": "c", "image": "nginx"}]}),
        ));
        h.run_for(5.0);
        assert_eq!(h.node.used().pods, 1);
        h.feed(Input::Removed);
        assert_eq!(h.node.used().pods, 0);
        assert_eq!(
            h.node.allocate_ip(),
            Some(Ipv4Addr::new(10, 64, 0, 2)),
            "the IP was released"
        );
    }

    #[test]
    fn probes_drive_readiness_and_restarts() {
        let mut p = pod(json!({"containers": [{"name": "c", "image": "nginx",
            "readinessProbe": {"httpGet": {"path": "/", "port": 80}, "periodSeconds": 1},
            "livenessProbe": {"httpGet": {"path": "/", "port": 80}, "periodSeconds": 1, "failureThreshold": 2}}]}));
        p.metadata.annotations = Some(
            [
                ("kemu.dev/ready-after".to_string(), "3".to_string()),
                ("kemu.dev/liveness-fail-after".to_string(), "10".to_string()),
            ]
            .into(),
        );
        let mut h = Harness::new(p);
        h.run_for(3.0);
        assert_eq!(h.status()["containerStatuses"][0]["ready"], false);
        h.run_for(3.0);
        assert_eq!(h.status()["containerStatuses"][0]["ready"], true);
        h.run_for(8.0);
        assert!(h.reasons().contains(&"Unhealthy"));
        assert!(h.reasons().contains(&"Killing"));
        assert_eq!(h.status()["containerStatuses"][0]["restartCount"], 1);
    }
}
