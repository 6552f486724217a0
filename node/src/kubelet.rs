//! [`Kubelet`]: one emulated node, an actix actor. It registers its Node, renews its Lease,
//! reports NodeStatus, watches its pods (`spec.nodeName=<node>`, one QUIC stream on the host's
//! shared connection) and drives one [`PodLifecycle`] per pod: it feeds the pure core wake-ups,
//! pod updates and volume answers, and carries out the commands it returns — statuses
//! (coalesced per pod: one in flight, the latest wins), events, timers, the final delete.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use api::client::{Client, ClientError, DeleteParams, ListParams, Patch, WatchStream};
use api::event_sink::EventSink;
use api::informer::jittered;
use api::protocol::{WatchEventKind, WatchFrame};
use api::resources;
use api::ResourceInfo;
use chrono::Utc;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use rand::Rng;
use serde::de::IgnoredAny;
use serde_json::{json, Value};
use tracing::{debug, info, warn, Instrument};

use crate::addressing::Addressing;
use crate::config::{NodeHostConfig, RuntimeProfile};
use crate::lifecycle::{Command, Input, PodLifecycle};
use crate::logs::LogStore;
use crate::metrics::Metrics;
use crate::node_object::{allocatable, NodeIdentity, LEASE_NAMESPACE};
use crate::runtime::NodeRuntime;
use crate::static_pods;
use crate::volume_sources::VolumeSources;

/// How often static pod manifests are re-read and missing mirror pods re-created.
const STATIC_POD_RESYNC: Duration = Duration::from_secs(20);
/// Pause before a broken pod watch is opened again, or a failed registration retried (doubling
/// to 5 s, each pause stretched by [1, 2) as informers' are: a host's nodes lose a restarted API
/// server at the same instant and must not all come back to it at once).
pub(crate) const REWATCH_MIN: Duration = Duration::from_millis(200);
pub(crate) const REWATCH_MAX: Duration = Duration::from_secs(5);
/// How often a kubelet compares its Node with what it would post (`nodeStatusUpdateFrequency`).
const STATUS_UPDATE_FREQUENCY: Duration = Duration::from_secs(10);
/// The longest renewal tick ([`Shared::on_tick`]).
const RENEWAL_TICK_MAX: Duration = Duration::from_millis(100);
/// Retry of a failed lease renewal: 500 ms doubling to 7 s, as the kubelet's lease controller
/// backs off, so a struggling API server is not hammered by thousands of nodes twice a second.
const LEASE_RETRY_MIN: Duration = Duration::from_millis(500);
const LEASE_RETRY_MAX: Duration = Duration::from_secs(7);
/// Retry of a pod status write that failed with a server error or no answer (the API server or
/// its store unavailable, e.g. while the store elects a leader): 200 ms doubling to 5 s, until
/// it is written or the pod is gone. Without it a pod whose Running status was lost stays
/// Pending forever: nothing else writes its status again.
const STATUS_RETRY_MIN: Duration = Duration::from_millis(200);
const STATUS_RETRY_MAX: Duration = Duration::from_secs(5);

/// What every kubelet of a node host shares.
pub struct Shared {
    pub client: Client,
    /// Where this host's kubelets' events go (several per call).
    pub events: EventSink,
    pub config: Arc<NodeHostConfig>,
    /// Where the nodes' pod ranges and addresses come from.
    pub addressing: Addressing,
    pub profile: Arc<RuntimeProfile>,
    pub failing_images: Arc<Vec<String>>,
    pub logs: Arc<LogStore>,
    pub metrics: Arc<Metrics>,
    /// Where the API server reaches this host's log service.
    pub logs_addr: String,
    /// Limits how many nodes register at once.
    pub startup: Arc<tokio::sync::Semaphore>,
    pub event_seq: AtomicU64,
    /// The ConfigMaps and Secrets the pods mount, watched.
    pub volume_sources: VolumeSources,
    /// Where this host's renewal ticks count from (see [`Shared::on_tick`]).
    pub tick_epoch: Instant,
}

impl Shared {
    /// The renewal tick: a hundredth of the lease interval, at most 100 ms.
    fn tick(&self) -> Duration {
        (self.config.lease_interval / 100).clamp(Duration::from_millis(1), RENEWAL_TICK_MAX)
    }

    /// `delay` stretched to end on the host's next renewal tick. The kubelets of a host renew
    /// their leases and report their status on a shared grid of ticks rather than each at its
    /// own instant, so the writes that fall due within one tick leave together: they share
    /// packets to the API server and, there, a store batch, instead of costing one raft entry
    /// and a round of wake-ups each. A renewal is at most one tick (1 % of the interval) later
    /// than its jittered instant.
    fn on_tick(&self, delay: Duration) -> Duration {
        until_tick(self.tick_epoch, Instant::now(), self.tick(), delay)
    }
}

/// How long from `now` until the first tick (`epoch` plus a whole number of `tick`s) no earlier
/// than `now + delay`.
fn until_tick(epoch: Instant, now: Instant, tick: Duration, delay: Duration) -> Duration {
    let tick = tick.as_nanos().max(1);
    let due = now.saturating_duration_since(epoch) + delay;
    let ticks = due.as_nanos().div_ceil(tick);
    let at = Duration::from_nanos(u64::try_from(ticks * tick).unwrap_or(u64::MAX));
    (epoch + at).saturating_duration_since(now)
}

/// A pod this node runs.
struct PodWorker {
    machine: PodLifecycle,
    namespace: String,
    name: String,
    timer: Option<SpawnHandle>,
    /// A status write is in flight.
    writing: bool,
    /// The newest status not yet written (written when the one in flight returns).
    pending: Option<Value>,
    /// The final delete is in flight.
    deleting: bool,
    /// Status writes that failed in a row (for the retry back-off).
    status_failures: u32,
    /// The pod's claims once processed: later checks only wait for their attachments.
    claims_resolved: Option<Vec<(String, crate::claim_volumes::Attachable)>>,
}

/// One emulated kubelet.
pub struct Kubelet {
    shared: Arc<Shared>,
    node: NodeIdentity,
    runtime: NodeRuntime,
    /// Boxed: a worker is a few kilobytes (the pod's typed spec inline), and a map of inline
    /// workers keeps up to as many again empty slots after it grows.
    pods: HashMap<String, Box<PodWorker>>,
    node_uid: String,
    /// When this kubelet last posted its status because the server held its Node not Ready.
    last_corrected: Option<Instant>,
    /// The resourceVersion of our Lease as last written: renewals are PUTs on top of it.
    lease_version: Option<String>,
    last_renewal: Option<Instant>,
    /// Lease renewals that failed in a row (the retry backs off with them).
    lease_failures: u32,
    /// When the conditions last changed (they never do for a healthy emulated node).
    ready_since: chrono::DateTime<Utc>,
    /// The attachable volumes each pod needs on this node, reported as `volumesInUse`.
    volumes_in_use: HashMap<String, Vec<String>>,
    /// A `volumesInUse` write is in flight / another is due after it.
    in_use_writing: bool,
    in_use_dirty: bool,
}

impl Kubelet {
    pub fn new(shared: Arc<Shared>, local_index: usize, seed: u64) -> Kubelet {
        let node = NodeIdentity::new(&shared.config, &shared.addressing, local_index);
        let runtime = NodeRuntime::new(
            shared.profile.clone(),
            shared.failing_images.clone(),
            &shared.config.images,
            node.pod_cidrs.clone(),
            node.internal_ips.clone(),
            allocatable(&shared.config),
            seed ^ (node.index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        );
        Kubelet {
            shared,
            node,
            runtime,
            pods: HashMap::new(),
            node_uid: String::new(),
            last_corrected: None,
            lease_version: None,
            last_renewal: None,
            lease_failures: 0,
            ready_since: Utc::now(),
            volumes_in_use: HashMap::new(),
            in_use_writing: false,
            in_use_dirty: false,
        }
    }

    /// Creates the Node (or takes over an existing one), then starts the lease, the status
    /// reports, the pod watch and the static pods.
    fn register(&mut self, ctx: &mut Context<Self>) {
        let shared = self.shared.clone();
        let node = self.node.clone();
        let work = async move {
            let _permit = shared.startup.clone().acquire_owned().await;
            let object = node.node(&shared.config, &shared.logs_addr, Utc::now());
            let mut backoff = REWATCH_MIN;
            loop {
                match register_node(&shared.client, &node.name, &object).await {
                    Ok(uid) => return uid,
                    Err(e) => {
                        warn!(node = %node.name, error = %e, "cannot register the node; retrying");
                        tokio::time::sleep(jittered(backoff)).await;
                        backoff = (backoff * 2).min(REWATCH_MAX);
                    }
                }
            }
        };
        ctx.wait(work.into_actor(self).map(|uid, act, ctx| {
            act.node_uid = uid;
            act.shared
                .metrics
                .nodes_registered
                .fetch_add(1, Ordering::Relaxed);
            debug!(node = %act.node.name, "registered");
            act.renew_lease(ctx);
            act.schedule_status_report(ctx, true);
            act.start_watch(ctx);
            if act.shared.config.static_pod_dir.is_some() {
                act.sync_static_pods(ctx);
                ctx.run_interval(STATIC_POD_RESYNC, |act, ctx| act.sync_static_pods(ctx));
            }
        }));
    }

    /// The next renewal's wait: kubelet's lease controller runs every interval with a jitter
    /// factor of 0.04, so a renewal is never early and at most 4 % late (3 % of jitter and at
    /// most 1 % to the next tick, [`Shared::on_tick`]).
    fn renewal_wait(&self, base: Duration) -> Duration {
        self.shared
            .on_tick(base.mul_f64(rand::thread_rng().gen_range(1.0..1.03)))
    }

    fn renew_lease(&mut self, ctx: &mut Context<Self>) {
        let client = self.shared.client.clone();
        let fresh = self
            .node
            .lease(&self.shared.config, &self.node_uid, Utc::now());
        let current = self.lease_version.clone();
        let name = self.node.name.clone();
        let work = async move {
            let leases =
                resources::find("coordination.k8s.io", "v1", "leases").expect("leases are served");
            // Only the new version is read back, so the server answers with the metadata.
            if let Some(version) = current {
                let mut lease = fresh.clone();
                lease["metadata"]["resourceVersion"] = json!(version);
                match client
                    .update_metadata(leases, Some(LEASE_NAMESPACE), &name, &lease)
                    .await
                {
                    Ok(updated) => return Ok(updated.resource_version),
                    Err(e) if e.is_conflict() || e.is_not_found() => {}
                    Err(e) => return Err(e),
                }
            }
            match client
                .get::<Value>(leases, Some(LEASE_NAMESPACE), &name)
                .await
            {
                Ok(mut lease) => {
                    lease["spec"] = fresh["spec"].clone();
                    client
                        .update_metadata(leases, Some(LEASE_NAMESPACE), &name, &lease)
                        .await
                        .map(|updated| updated.resource_version)
                }
                Err(e) if e.is_not_found() => client
                    .create::<_, Value>(leases, Some(LEASE_NAMESPACE), &fresh)
                    .await
                    .map(|created| {
                        created
                            .pointer("/metadata/resourceVersion")
                            .and_then(Value::as_str)
                            .map(str::to_string)
                    }),
                Err(e) => Err(e),
            }
        };
        ctx.spawn(work.into_actor(self).map(
            |result: Result<Option<String>, ClientError>, act, ctx| {
                let interval = act.shared.config.lease_interval;
                let next = match result {
                    Ok(version) => {
                        let now = Instant::now();
                        let first = act.last_renewal.is_none();
                        if let Some(last) = act.last_renewal {
                            act.shared
                                .metrics
                                .lease_renewed(now.saturating_duration_since(last), interval);
                        }
                        act.last_renewal = Some(now);
                        act.lease_failures = 0;
                        // Only the version is kept: thousands of cached Lease objects
                        // would cost more than the node itself.
                        act.lease_version = version;
                        if first {
                            act.shared.on_tick(lease_phase(interval))
                        } else {
                            act.renewal_wait(interval)
                        }
                    }
                    Err(e) => {
                        act.shared
                            .metrics
                            .lease_failures
                            .fetch_add(1, Ordering::Relaxed);
                        debug!(node = %act.node.name, error = %e, "lease renewal failed");
                        act.lease_version = None;
                        // Retry soon (a lease missed for its duration makes the node
                        // NotReady), but back off while the failures go on.
                        act.lease_failures = act.lease_failures.saturating_add(1);
                        lease_retry(act.lease_failures)
                    }
                };
                ctx.run_later(next, |act, ctx| act.renew_lease(ctx));
            },
        ));
    }

    fn schedule_status_report(&mut self, ctx: &mut Context<Self>, first: bool) {
        let interval = self.shared.config.status_report_interval;
        // The first report spreads over the whole interval so thousands of nodes do not report
        // together.
        let delay = if first {
            self.shared
                .on_tick(interval.mul_f64(rand::thread_rng().gen_range(0.0..1.0)))
        } else {
            self.renewal_wait(interval)
        };
        ctx.run_later(delay, |act, ctx| {
            act.report_status(ctx);
            act.schedule_status_report(ctx, false);
        });
    }

    fn report_status(&mut self, ctx: &mut Context<Self>) {
        let client = self.shared.client.clone();
        let name = self.node.name.clone();
        let status = self
            .node
            .status(&self.shared.config, Utc::now(), self.ready_since);
        let metrics = self.shared.metrics.clone();
        let work = async move {
            let patch = Patch::Merge(json!({"status": status}));
            match client
                .patch_status_metadata(
                    resources::find("", "v1", "nodes").expect("nodes"),
                    None,
                    &name,
                    &patch,
                )
                .await
            {
                Ok(_) => {
                    metrics.node_status_reports.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => debug!(node = %name, error = %e, "node status report failed"),
            }
        };
        ctx.spawn(work.into_actor(self));
    }

    /// Starts the pod watch of this node: a task that re-opens it when it breaks, from the last
    /// version seen (or afresh, with a resync, when that is too old).
    fn start_watch(&mut self, ctx: &mut Context<Self>) {
        let client = self.shared.client.clone();
        let addr = ctx.address();
        let node = self.node.name.clone();
        let metrics = self.shared.metrics.clone();
        let span = tracing::info_span!("pod_watch", node = %node);
        actix::spawn(
            async move {
                let pods = resources::pods();
                let mut rv: Option<String> = None;
                let mut backoff = REWATCH_MIN;
                // The pods this watch has handed to the kubelet whole, and not seen deleted.
                let mut forwarded: HashSet<String> = HashSet::new();
                while addr.connected() {
                    let mut params = ListParams::default()
                        .fields(format!("spec.nodeName={node}"))
                        .bookmarks();
                    match &rv {
                        Some(v) => params.resource_version = Some(v.clone()),
                        None => params.send_initial_events = true,
                    }
                    let mut initial: Option<HashSet<String>> = rv.is_none().then(HashSet::new);
                    if initial.is_some() {
                        forwarded.clear();
                    }
                    let Some(mut stream) =
                        open_watch(&client, pods, &params, &mut backoff, "pod watch").await
                    else {
                        continue;
                    };
                    metrics.watches_opened.fetch_add(1, Ordering::Relaxed);
                    while let Some(frame) = next_frame(&mut stream, &mut rv, "pod watch").await {
                        backoff = REWATCH_MIN;
                        rv = Some(frame.resource_version.to_string());
                        if frame.kind == WatchEventKind::Bookmark {
                            let end = serde_json::from_slice::<Value>(&frame.object)
                                .ok()
                                .and_then(|v| {
                                    v.pointer("/metadata/annotations/k8s.io~1initial-events-end")
                                        .cloned()
                                })
                                .is_some();
                            if end {
                                if let Some(seen) = initial.take() {
                                    addr.do_send(Resynced { uids: seen });
                                }
                            }
                            continue;
                        }
                        if initial.is_none() && frame.kind != WatchEventKind::Added {
                            if let Some(uid) = skimmed(frame.kind, &frame.object, &forwarded) {
                                if frame.kind == WatchEventKind::Deleted {
                                    forwarded.remove(&uid);
                                    addr.do_send(PodGone { uid });
                                }
                                metrics.pod_events_skimmed.fetch_add(1, Ordering::Relaxed);
                                continue;
                            }
                        }
                        let pod: Pod = match serde_json::from_slice(&frame.object) {
                            Ok(p) => p,
                            Err(e) => {
                                warn!(error = %e, "undecodable pod in the watch");
                                continue;
                            }
                        };
                        if let Some(uid) = &pod.metadata.uid {
                            if let Some(seen) = &mut initial {
                                seen.insert(uid.clone());
                            }
                            if frame.kind == WatchEventKind::Deleted {
                                forwarded.remove(uid);
                            } else {
                                forwarded.insert(uid.clone());
                            }
                        }
                        addr.do_send(PodEvent {
                            kind: frame.kind,
                            pod: Box::new(pod),
                        });
                    }
                    tokio::time::sleep(jittered(backoff)).await;
                    backoff = (backoff * 2).min(REWATCH_MAX);
                }
            }
            .instrument(span),
        );
    }

    fn sync_static_pods(&mut self, ctx: &mut Context<Self>) {
        let Some(dir) = self.shared.config.static_pod_dir.clone() else {
            return;
        };
        let mirrors = static_pods::mirror_pods(&dir, &self.node.name, &self.node_uid);
        let client = self.shared.client.clone();
        let work = async move {
            for mirror in mirrors {
                let ns = mirror["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or("default")
                    .to_string();
                let name = mirror["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                match client
                    .get::<Value>(resources::pods(), Some(&ns), &name)
                    .await
                {
                    Ok(_) => continue,
                    Err(e) if e.is_not_found() => {}
                    Err(e) => {
                        debug!(error = %e, "cannot look up a mirror pod");
                        continue;
                    }
                }
                match client
                    .create::<_, Value>(resources::pods(), Some(&ns), &mirror)
                    .await
                {
                    Ok(_) => info!(pod = %name, "created mirror pod"),
                    Err(e) if e.is_already_exists() => {}
                    Err(e) => warn!(pod = %name, error = %e, "cannot create the mirror pod"),
                }
            }
        };
        ctx.spawn(work.into_actor(self));
    }

    fn on_pod_event(&mut self, kind: WatchEventKind, pod: Pod, ctx: &mut Context<Self>) {
        let Some(uid) = pod.metadata.uid.clone() else {
            return;
        };
        match kind {
            WatchEventKind::Deleted => self.pod_gone(&uid, ctx),
            WatchEventKind::Added | WatchEventKind::Modified => {
                if self.pods.contains_key(&uid) {
                    // Most updates are our own status writes coming back; only deletion
                    // matters to a running pod.
                    if pod.metadata.deletion_timestamp.is_some() {
                        self.step(&uid, Input::Updated(&pod), ctx);
                    }
                    return;
                }
                let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
                if matches!(phase, Some("Succeeded") | Some("Failed")) {
                    // Finished before this kubelet saw it (e.g. a node host restart): nothing
                    // runs; a deletion only needs the final delete.
                    if pod.metadata.deletion_timestamp.is_some() {
                        self.delete_object(
                            uid,
                            pod.metadata.namespace.unwrap_or_default(),
                            pod.metadata.name.unwrap_or_default(),
                            ctx,
                        );
                    }
                    return;
                }
                let namespace = pod.metadata.namespace.clone().unwrap_or_default();
                let name = pod.metadata.name.clone().unwrap_or_default();
                self.shared
                    .metrics
                    .pods_started
                    .fetch_add(1, Ordering::Relaxed);
                self.pods.insert(
                    uid.clone(),
                    Box::new(PodWorker {
                        machine: PodLifecycle::new(pod),
                        namespace,
                        name,
                        timer: None,
                        writing: false,
                        pending: None,
                        deleting: false,
                        status_failures: 0,
                        claims_resolved: None,
                    }),
                );
                self.step(&uid, Input::Tick, ctx);
            }
            WatchEventKind::Bookmark => {}
        }
    }

    /// A pod deleted from the API: a running one is cleaned up locally.
    fn pod_gone(&mut self, uid: &str, ctx: &mut Context<Self>) {
        if self.pods.contains_key(uid) {
            self.step(uid, Input::Removed, ctx);
        }
    }

    /// Feeds one input to a pod's machine and carries out its commands.
    fn step(&mut self, uid: &str, input: Input<'_>, ctx: &mut Context<Self>) {
        let Some(worker) = self.pods.get_mut(uid) else {
            return;
        };
        let now = Utc::now();
        let commands = worker.machine.step(now, input, &mut self.runtime);
        for command in commands {
            self.execute(uid, command, ctx);
        }
    }

    fn execute(&mut self, uid: &str, command: Command, ctx: &mut Context<Self>) {
        let Some(worker) = self.pods.get_mut(uid) else {
            return;
        };
        match command {
            Command::Status(status) => {
                // A finished pod's volumes are unmounted: it no longer holds them in use, so the
                // attach/detach controller may detach them before the pod object goes.
                let finished = matches!(
                    status.get("phase").and_then(Value::as_str),
                    Some("Succeeded" | "Failed")
                );
                worker.pending = Some(status);
                if !worker.writing {
                    self.write_status(uid, ctx);
                }
                if finished {
                    self.set_volumes_in_use(uid, Vec::new(), ctx);
                }
            }
            Command::Event {
                warning,
                reason,
                message,
                field_path,
            } => {
                let event = event_object(
                    &self.shared,
                    &self.node.name,
                    worker,
                    warning,
                    reason,
                    &message,
                    field_path.as_deref(),
                );
                self.shared.metrics.events.fetch_add(1, Ordering::Relaxed);
                self.shared.events.record_event(event);
            }
            Command::WakeAt(at) => {
                if let Some(handle) = worker.timer.take() {
                    ctx.cancel_future(handle);
                }
                let delay = (at - Utc::now()).to_std().unwrap_or_default();
                let uid = uid.to_string();
                worker.timer = Some(ctx.run_later(delay, move |act, ctx| {
                    if let Some(w) = act.pods.get_mut(&uid) {
                        w.timer = None;
                    }
                    act.step(&uid, Input::Tick, ctx);
                }));
            }
            Command::CheckVolumes(wanted) => {
                let check = self
                    .shared
                    .volume_sources
                    .acquire(uid, &worker.namespace, wanted);
                let uid = uid.to_string();
                ctx.spawn(check.run().into_actor(self).map(move |missing, act, ctx| {
                    act.step(&uid, Input::VolumesChecked { missing }, ctx);
                }));
            }
            Command::ContainerStarted {
                container,
                started,
                output,
            } => {
                self.shared.logs.started(
                    &worker.namespace,
                    &worker.name,
                    &container,
                    started,
                    output,
                );
            }
            Command::ContainerStopped {
                container,
                finished,
            } => {
                self.shared
                    .logs
                    .stopped(&worker.namespace, &worker.name, &container, finished);
            }
            Command::DeletePod { uid: pod_uid } => {
                if !worker.deleting {
                    worker.deleting = true;
                    let (ns, name) = (worker.namespace.clone(), worker.name.clone());
                    self.delete_object(pod_uid, ns, name, ctx);
                }
            }
            Command::CheckClaims(claims) => {
                let client = self.shared.client.clone();
                let namespace = worker.namespace.clone();
                let node = self.node.name.clone();
                let uid = uid.to_string();
                let resolved = worker.claims_resolved.clone();
                let work = async move {
                    match resolved {
                        Some(resolved) => crate::claim_volumes::recheck(&client, resolved).await,
                        None => {
                            crate::claim_volumes::check(&client, &namespace, &node, &claims).await
                        }
                    }
                };
                ctx.spawn(work.into_actor(self).map(move |checked, act, ctx| {
                    if let Some(worker) = act.pods.get_mut(&uid) {
                        worker.claims_resolved = checked.resolved;
                        act.set_volumes_in_use(&uid, checked.in_use, ctx);
                    }
                    act.step(&uid, Input::ClaimsChecked(checked.answer), ctx);
                }));
            }
            Command::Forget => {
                self.set_volumes_in_use(uid, Vec::new(), ctx);
                self.shared.volume_sources.release(uid);
                if let Some(worker) = self.pods.remove(uid) {
                    if let Some(handle) = worker.timer {
                        ctx.cancel_future(handle);
                    }
                    self.shared.logs.remove_pod(&worker.namespace, &worker.name);
                    self.shared
                        .metrics
                        .pods_finished
                        .fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// Records the attachable volumes pod `uid` needs and, when the node's set changes,
    /// reports it as the Node's `status.volumesInUse`, as the kubelet does so that the
    /// attach/detach controller does not detach a volume still mounted.
    fn set_volumes_in_use(&mut self, uid: &str, volumes: Vec<String>, ctx: &mut Context<Self>) {
        let before = self.in_use();
        if volumes.is_empty() {
            self.volumes_in_use.remove(uid);
        } else {
            self.volumes_in_use.insert(uid.to_string(), volumes);
        }
        if self.in_use() != before {
            self.in_use_dirty = true;
            self.write_volumes_in_use(ctx);
        }
    }

    fn in_use(&self) -> Vec<String> {
        let mut all: Vec<String> = self.volumes_in_use.values().flatten().cloned().collect();
        all.sort();
        all.dedup();
        all
    }

    /// Writes the node's current `volumesInUse`, one write at a time, the latest winning.
    fn write_volumes_in_use(&mut self, ctx: &mut Context<Self>) {
        if self.in_use_writing || !self.in_use_dirty {
            return;
        }
        self.in_use_writing = true;
        self.in_use_dirty = false;
        let volumes = self.in_use();
        let client = self.shared.client.clone();
        let name = self.node.name.clone();
        let work = async move {
            let value = if volumes.is_empty() {
                Value::Null
            } else {
                json!(volumes)
            };
            let patch = Patch::Merge(json!({"status": {"volumesInUse": value}}));
            let written = client
                .patch_status_metadata(
                    resources::find("", "v1", "nodes").expect("nodes"),
                    None,
                    &name,
                    &patch,
                )
                .await;
            if let Err(e) = written {
                warn!(node = %name, error = %e, "cannot report the volumes in use");
                return false;
            }
            true
        };
        ctx.spawn(work.into_actor(self).map(|written, act, ctx| {
            act.in_use_writing = false;
            if !written {
                act.in_use_dirty = true;
                ctx.run_later(STATUS_RETRY_MIN, |act, ctx| act.write_volumes_in_use(ctx));
                return;
            }
            act.write_volumes_in_use(ctx);
        }));
    }

    /// Writes the newest pending status of a pod; when it returns, writes the next one if
    /// another came meanwhile. A write that failed for a reason a retry can cure (a server
    /// error, a timeout, a broken connection) is retried with back-off unless a newer status
    /// replaced it meanwhile.
    fn write_status(&mut self, uid: &str, ctx: &mut Context<Self>) {
        let Some(worker) = self.pods.get_mut(uid) else {
            return;
        };
        let Some(status) = worker.pending.take() else {
            return;
        };
        worker.writing = true;
        let client = self.shared.client.clone();
        let (ns, name) = (worker.namespace.clone(), worker.name.clone());
        let metrics = self.shared.metrics.clone();
        let uid = uid.to_string();
        let work = async move {
            // Replacing the whole status (JSON patch) needs no resourceVersion and leaves no
            // stale fields behind, as a merge patch of container states would.
            let patch =
                Patch::Json(json!([{"op": "replace", "path": "/status", "value": &status}]));
            // Nothing here reads the pod back: the answer is its metadata only.
            let result = client
                .patch_status_metadata(resources::pods(), Some(&ns), &name, &patch)
                .await;
            metrics.status_writes.fetch_add(1, Ordering::Relaxed);
            match result {
                Ok(_) => StatusWrite::Done,
                Err(e) if retriable(&e) => {
                    metrics
                        .status_write_failures
                        .fetch_add(1, Ordering::Relaxed);
                    debug!(pod = %name, error = %e, "status write failed; retrying");
                    StatusWrite::Retry(status)
                }
                Err(e) => {
                    if !e.is_not_found() {
                        warn!(pod = %name, error = %e, "status write rejected");
                    }
                    StatusWrite::Done
                }
            }
        };
        ctx.spawn(work.into_actor(self).map(move |outcome, act, ctx| {
            let Some(worker) = act.pods.get_mut(&uid) else {
                return;
            };
            match outcome {
                StatusWrite::Done => {
                    worker.status_failures = 0;
                    worker.writing = false;
                    if worker.pending.is_some() {
                        act.write_status(&uid, ctx);
                    }
                }
                StatusWrite::Retry(status) => {
                    // A newer status, if one came meanwhile, supersedes the failed one.
                    if worker.pending.is_none() {
                        worker.pending = Some(status);
                    }
                    worker.status_failures += 1;
                    let wait = status_retry(worker.status_failures);
                    // `writing` stays set: statuses arriving during the wait only replace
                    // the pending one.
                    ctx.run_later(wait, move |act, ctx| {
                        if let Some(worker) = act.pods.get_mut(&uid) {
                            worker.writing = false;
                            act.write_status(&uid, ctx);
                        }
                    });
                }
            }
        }));
    }

    /// The kubelet's last word on a pod: delete it with grace 0 and its uid as precondition.
    fn delete_object(
        &mut self,
        uid: String,
        namespace: String,
        name: String,
        ctx: &mut Context<Self>,
    ) {
        let client = self.shared.client.clone();
        let params = DeleteParams {
            precondition_uid: Some(uid.clone()),
            ..DeleteParams::now()
        };
        let work = async move {
            client
                .delete::<IgnoredAny>(resources::pods(), Some(&namespace), &name, &params)
                .await
        };
        ctx.spawn(
            work.into_actor(self)
                .map(move |result, act, ctx| match result {
                    Ok(_) => act.step(&uid, Input::Removed, ctx),
                    Err(e) if e.is_not_found() || e.is_conflict() => {
                        act.step(&uid, Input::Removed, ctx)
                    }
                    Err(e) => {
                        debug!(error = %e, "final pod delete failed; retrying");
                        if let Some(worker) = act.pods.get_mut(&uid) {
                            worker.deleting = false;
                        }
                        ctx.run_later(Duration::from_secs(1), move |act, ctx| {
                            if let Some(w) = act.pods.get(&uid) {
                                let (ns, name) = (w.namespace.clone(), w.name.clone());
                                act.delete_object(uid, ns, name, ctx);
                            }
                        });
                    }
                }),
        );
    }
}

/// How a status write ended.
enum StatusWrite {
    Done,
    /// Failed in a way a retry can cure; the status to write again.
    Retry(Value),
}

/// Whether a failed API call may succeed if sent again: no answer, a broken connection, a
/// server error (500–599: the API server or its store unavailable) or 429.
fn retriable(e: &ClientError) -> bool {
    match e.code() {
        Some(code) => code == 429 || code >= 500,
        None => matches!(e, ClientError::Transport(_) | ClientError::Timeout { .. }),
    }
}

/// The pause before retrying after `failures` (≥ 1) status writes of a pod failed in a row.
fn status_retry(failures: u32) -> Duration {
    let exp = STATUS_RETRY_MIN.saturating_mul(1 << failures.saturating_sub(1).min(6));
    let wait = exp.min(STATUS_RETRY_MAX);
    // Up to 20 % jitter, so the pods of a host do not retry in lock step.
    wait.mul_f64(1.0 + rand::random::<f64>() * 0.2)
}

/// When a node's second renewal comes after its first: anywhere in the interval. A host's
/// nodes register within the few seconds it takes to start them, and renewing each a jittered
/// interval (± 10 %) after the last keeps their renewals bunched in that window for minutes:
/// a wave every interval, where a cluster whose nodes came up at different times sees them
/// evenly spread.
fn lease_phase(interval: Duration) -> Duration {
    interval.mul_f64(rand::thread_rng().gen_range(0.05..1.0))
}

/// The pause before retrying after `failures` (≥ 1) lease renewals failed in a row.
fn lease_retry(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(8);
    (LEASE_RETRY_MIN * (1u32 << doublings)).min(LEASE_RETRY_MAX)
}

/// A core/v1 Event about a pod, from this kubelet.
fn event_object(
    shared: &Shared,
    node: &str,
    worker: &PodWorker,
    warning: bool,
    reason: &str,
    message: &str,
    field_path: Option<&str>,
) -> Event {
    let now = Utc::now();
    let seq = shared.event_seq.fetch_add(1, Ordering::Relaxed);
    let stamp = now.timestamp_nanos_opt().unwrap_or_default() as u64;
    let time = Time(api::event_correlator::timestamp(now));
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{}.{:x}", worker.name, stamp.wrapping_add(seq))),
            namespace: Some(worker.namespace.clone()),
            ..Default::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            namespace: Some(worker.namespace.clone()),
            name: Some(worker.name.clone()),
            uid: Some(worker.machine.uid().to_string()),
            field_path: field_path.map(str::to_string),
            ..Default::default()
        },
        reason: Some(reason.into()),
        message: Some(message.into()),
        type_: Some(if warning { "Warning" } else { "Normal" }.into()),
        source: Some(EventSource {
            component: Some("kubelet".into()),
            host: Some(node.into()),
        }),
        reporting_component: Some("kubelet".into()),
        reporting_instance: Some(node.into()),
        first_timestamp: Some(time.clone()),
        last_timestamp: Some(time),
        count: Some(1),
        ..Default::default()
    }
}

/// Creates the Node, or takes over the one that exists (a node host restart); answers its uid.
async fn register_node(client: &Client, name: &str, object: &Value) -> Result<String, ClientError> {
    let nodes = resources::find("", "v1", "nodes").expect("nodes are served");
    let node: Value = match client.create(nodes, None, object).await {
        Ok(node) => node,
        Err(e) if e.is_already_exists() => {
            let patch =
                Patch::Merge(json!({"metadata": object["metadata"], "spec": object["spec"]}));
            client.patch(nodes, None, name, &patch).await?
        }
        Err(e) => return Err(e),
    };
    // Status is the kubelet's to write, through its own subresource.
    let status = Patch::Merge(json!({"status": object["status"]}));
    client
        .patch_status::<Value>(nodes, None, name, &status)
        .await?;
    Ok(node
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string())
}

impl Actor for Kubelet {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.register(ctx);
    }
}

/// A pod event from this node's watch.
#[derive(Message)]
#[rtype(result = "()")]
pub struct PodEvent {
    pub kind: WatchEventKind,
    pub pod: Box<Pod>,
}

impl Handler<PodEvent> for Kubelet {
    type Result = ();

    fn handle(&mut self, msg: PodEvent, ctx: &mut Context<Self>) {
        self.on_pod_event(msg.kind, *msg.pod, ctx);
    }
}

/// A pod this kubelet was handed whole is gone from the API.
#[derive(Message)]
#[rtype(result = "()")]
pub struct PodGone {
    pub uid: String,
}

impl Handler<PodGone> for Kubelet {
    type Result = ();

    fn handle(&mut self, msg: PodGone, ctx: &mut Context<Self>) {
        self.pod_gone(&msg.uid, ctx);
    }
}

/// The part of a pod the watch reads before deciding whether to decode it whole.
#[derive(serde::Deserialize)]
struct PodHeader {
    metadata: HeaderMeta,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct HeaderMeta {
    uid: Option<String>,
    deletion_timestamp: Option<IgnoredAny>,
}

/// The uid of a watch event that needs no whole pod: a pod already handed to the kubelet that
/// is deleted, or modified but not marked for deletion. A running pod's kubelet acts on nothing
/// else (see `on_pod_event`), and most such events are its own status writes coming back:
/// decoding a `Pod` costs ~13 KB of allocations, reading the uid none.
fn skimmed(kind: WatchEventKind, object: &[u8], forwarded: &HashSet<String>) -> Option<String> {
    let header: PodHeader = serde_json::from_slice(object).ok()?;
    let uid = header.metadata.uid?;
    let needs_pod =
        kind == WatchEventKind::Modified && header.metadata.deletion_timestamp.is_some();
    (forwarded.contains(&uid) && !needs_pod).then_some(uid)
}

/// The server holds this kubelet's Node not Ready ([`crate::own_nodes`]).
#[derive(Message)]
#[rtype(result = "()")]
pub struct ServerSaysNotReady;

impl Handler<ServerSaysNotReady> for Kubelet {
    type Result = ();

    /// An emulated node is always Ready once registered, so the Node on the server differs
    /// from what this kubelet would post: it posts its status at once, as a kubelet does at its
    /// next status check, and at most once per `nodeStatusUpdateFrequency` (10 s).
    fn handle(&mut self, _: ServerSaysNotReady, ctx: &mut Context<Self>) {
        if self.node_uid.is_empty() {
            return;
        }
        let now = Instant::now();
        if self
            .last_corrected
            .is_some_and(|at| now.saturating_duration_since(at) < STATUS_UPDATE_FREQUENCY)
        {
            return;
        }
        self.last_corrected = Some(now);
        self.shared
            .metrics
            .node_status_corrections
            .fetch_add(1, Ordering::Relaxed);
        debug!(node = %self.node.name, "the server holds the node not Ready; posting its status");
        self.report_status(ctx);
    }
}

/// Opens a watch of `resource`; when it cannot, waits out `backoff` (jittered), doubles it up to
/// [`REWATCH_MAX`] and gives `None`, for the caller to try again.
pub(crate) async fn open_watch(
    client: &Client,
    resource: &'static ResourceInfo,
    params: &ListParams,
    backoff: &mut Duration,
    what: &str,
) -> Option<WatchStream> {
    match client.watch(resource, None, params).await {
        Ok(stream) => Some(stream),
        Err(e) => {
            debug!(error = %e, watch = what, "cannot open the watch");
            tokio::time::sleep(jittered(*backoff)).await;
            *backoff = (*backoff * 2).min(REWATCH_MAX);
            None
        }
    }
}

/// The next frame of a watch, or `None` once it ended; a 410 Gone clears `rv`, so that the next
/// watch starts over from what the server holds now.
pub(crate) async fn next_frame(
    stream: &mut WatchStream,
    rv: &mut Option<String>,
    what: &str,
) -> Option<WatchFrame> {
    match stream.next().await? {
        Ok(frame) => Some(frame),
        Err(e) => {
            if e.is_gone() {
                *rv = None;
            }
            debug!(error = %e, watch = what, "the watch ended");
            None
        }
    }
}

/// A fresh watch replayed the node's pods: these are all that exist.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Resynced {
    pub uids: HashSet<String>,
}

impl Handler<Resynced> for Kubelet {
    type Result = ();

    fn handle(&mut self, msg: Resynced, ctx: &mut Context<Self>) {
        let gone: Vec<String> = self
            .pods
            .keys()
            .filter(|uid| !msg.uids.contains(*uid))
            .cloned()
            .collect();
        for uid in gone {
            self.step(&uid, Input::Removed, ctx);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_end_on_the_next_tick_and_never_early() {
        let epoch = Instant::now();
        let tick = Duration::from_millis(100);
        for (since_ms, delay_ms, expected_ms) in [
            (0, 0, 0),
            (0, 1, 100),
            (0, 100, 100),
            (0, 10_000, 10_000),
            (37, 10_000, 10_063),
            (37, 9_963, 9_963),
            (250, 5, 50),
            (299, 10_400, 10_401),
        ] {
            let now = epoch + Duration::from_millis(since_ms);
            let wait = until_tick(epoch, now, tick, Duration::from_millis(delay_ms));
            assert_eq!(
                wait,
                Duration::from_millis(expected_ms),
                "{since_ms} ms after the epoch, {delay_ms} ms asked"
            );
            let at = (now + wait).duration_since(epoch).as_nanos();
            assert_eq!(at % tick.as_nanos(), 0);
        }
        // Two kubelets due apart within one tick leave together.
        let a = epoch + Duration::from_millis(1_003);
        let b = epoch + Duration::from_millis(1_071);
        let delay = Duration::from_secs(10);
        assert_eq!(
            a + until_tick(epoch, a, tick, delay),
            b + until_tick(epoch, b, tick, delay)
        );
    }

    #[test]
    fn only_a_deletion_mark_or_an_unknown_pod_is_decoded_whole() {
        let running = br#"{"metadata":{"name":"p","uid":"u1","resourceVersion":"7"},"status":{"phase":"Running"}}"#;
        let marked = br#"{"metadata":{"uid":"u1","deletionTimestamp":"2026-11-22T10:00:00Z"}}"#;
        let unmarked = br#"{"metadata":{"uid":"u1","deletionTimestamp":null}}"#;
        let forwarded: HashSet<String> = ["u1".to_string()].into();
        let none = HashSet::new();
        use WatchEventKind::{Deleted, Modified};
        assert_eq!(
            skimmed(Modified, running, &forwarded).as_deref(),
            Some("u1")
        );
        assert_eq!(
            skimmed(Modified, unmarked, &forwarded).as_deref(),
            Some("u1")
        );
        assert_eq!(skimmed(Modified, marked, &forwarded), None);
        assert_eq!(skimmed(Deleted, marked, &forwarded).as_deref(), Some("u1"));
        assert_eq!(skimmed(Modified, running, &none), None);
        assert_eq!(skimmed(Deleted, running, &none), None);
        assert_eq!(skimmed(Modified, b"{not json", &forwarded), None);
    }

    #[test]
    fn the_second_lease_renewal_falls_anywhere_in_the_interval() {
        let interval = Duration::from_secs(10);
        let phases: Vec<Duration> = (0..1000).map(|_| lease_phase(interval)).collect();
        assert!(phases.iter().all(|p| *p >= interval / 20 && *p < interval));
        for tenth in 1..10 {
            let (from, to) = (interval * (tenth - 1) / 10, interval * (tenth + 1) / 10);
            assert!(
                phases.iter().any(|p| (from..to).contains(p)),
                "no phase within {from:?}..{to:?}"
            );
        }
    }

    #[test]
    fn lease_retries_back_off_and_stay_well_inside_the_lease_duration() {
        let waits: Vec<u64> = (1..=12)
            .map(|n| lease_retry(n).as_millis() as u64)
            .collect();
        assert_eq!(
            waits,
            [500, 1000, 2000, 4000, 7000, 7000, 7000, 7000, 7000, 7000, 7000, 7000]
        );
        assert_eq!(lease_retry(u32::MAX), LEASE_RETRY_MAX);
        // The first retries together take less than the 40 s a node may go without a renewal.
        let first: Duration = (1..=5).map(lease_retry).sum();
        assert!(first < Duration::from_secs(40), "{first:?}");
    }

    #[test]
    fn status_writes_are_retried_with_back_off_on_errors_a_retry_can_cure() {
        let api = |code: u16| ClientError::Api {
            code,
            reason: String::new(),
            message: String::new(),
        };
        for code in [500, 503, 504, 429] {
            assert!(retriable(&api(code)), "{code}");
        }
        assert!(retriable(&ClientError::Timeout {
            after: Duration::from_secs(1),
            last_error: "connection refused".into(),
        }));
        // The pod is gone or the status is invalid: writing it again cannot help.
        for code in [404, 409, 422, 403] {
            assert!(!retriable(&api(code)), "{code}");
        }
        assert!(!retriable(&ClientError::Protocol("x".into())));
        let mut previous = Duration::ZERO;
        for failures in 1..=20 {
            let wait = status_retry(failures);
            assert!(wait >= STATUS_RETRY_MIN, "{failures}: {wait:?}");
            assert!(
                wait <= STATUS_RETRY_MAX.mul_f64(1.2),
                "{failures}: {wait:?}"
            );
            if failures <= 4 {
                assert!(wait > previous, "{failures}: {wait:?} after {previous:?}");
            }
            previous = wait;
        }
    }
}
