//! [`Binder`]: the scheduler's API writes. Binds assumed pods (`pods/binding`) and records the
//! `Scheduled` event, after VolumeBinding's PreBind for pods with claims (selected-node
//! annotations, volume pre-binding, the wait for bound claims); reports pods that fit nowhere
//! (`FailedScheduling` event, PodScheduled=False) and carries out preemption (deletes victims,
//! sets `status.nominatedNodeName`). The calls run on the I/O runtime; their results come back
//! as [`BindFinished`] messages.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use api::client::{Client, ClientError, DeleteParams, Patch};
use api::event_sink::EventSink;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use parking_lot::RwLock;
use serde_json::{json, Value};
use tracing::{debug, info, warn};

use super::queue_actor::{AttemptDone, Outcome, QueueActor};
use crate::cache::Cache;
use crate::metrics::{AttemptResult, ExtensionPoint, Metrics};
use crate::pod_info::PodInfo;
use crate::preemption::Preemption;
use crate::volumes::{VolumePlan, SELECTED_NODE_ANNOTATION};

/// How long PreBind waits for the pod's claims to be bound (kube-scheduler's
/// `bindTimeoutSeconds` default).
pub const VOLUME_BIND_TIMEOUT: Duration = Duration::from_secs(600);
/// How often PreBind looks at the claims while it waits.
const VOLUME_BIND_POLL: Duration = Duration::from_millis(100);

/// Bind the assumed pod to `node`.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Bind {
    pub pod: Arc<PodInfo>,
    pub node: String,
    pub started: Instant,
    /// VolumeBinding's PreBind work, done (and waited for) before the pod is bound.
    pub volumes: Option<VolumePlan>,
}

/// The pod fits nowhere: tell its owner why, and preempt if that helps.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ReportUnschedulable {
    pub pod: Arc<PodInfo>,
    pub message: String,
    pub preemption: Preemption,
}

/// How a bind call ended.
#[derive(Debug)]
pub enum BindResult {
    Bound,
    /// The pod is already bound (another scheduler, or an earlier attempt), or gone.
    Settled,
    Failed(ClientError),
    /// PreBind could not bind the pod's volumes (an API error, or the claims stayed unbound).
    VolumesFailed(String),
}

#[derive(Message)]
#[rtype(result = "()")]
pub struct BindFinished {
    pub key: String,
    pub started: Instant,
    pub result: BindResult,
}

pub struct Binder {
    client: Client,
    events: EventSink,
    io: tokio::runtime::Handle,
    queue: Addr<QueueActor>,
    cache: Arc<RwLock<Cache>>,
    metrics: Arc<Metrics>,
    /// The `source.component` of events.
    component: String,
    /// The Unschedulable conditions written.
    reported: Reported,
}

/// The Unschedulable condition last written per pod key (the pod's uid, the message, when): a
/// retry that fails for the same reason writes no condition again, as kube-scheduler skips an
/// unchanged condition (the event is still recorded).
#[derive(Debug)]
struct Reported {
    last: HashMap<String, (String, String, Instant)>,
    /// When `last` is this long, entries older than [`REPORTED_TTL`] are dropped.
    prune_at: usize,
}

impl Reported {
    fn new() -> Reported {
        Reported {
            last: HashMap::new(),
            prune_at: 1024,
        }
    }

    /// Whether the condition with `message` must be written for the pod `key` of `uid` (it is
    /// not the last one written for it), remembering it if so.
    fn changed(&mut self, key: &str, uid: &str, message: &str, now: Instant) -> bool {
        if let Some((last_uid, last, _)) = self.last.get(key) {
            if last_uid == uid && last == message {
                return false;
            }
        }
        if self.last.len() >= self.prune_at {
            self.last
                .retain(|_, (_, _, at)| now.duration_since(*at) < REPORTED_TTL);
            self.prune_at = (self.last.len() * 2).max(1024);
        }
        self.last
            .insert(key.to_string(), (uid.to_string(), message.to_string(), now));
        true
    }

    fn forget(&mut self, key: &str) {
        self.last.remove(key);
    }
}

/// How long a written condition is remembered (a pod deleted while unschedulable is forgotten
/// after this).
const REPORTED_TTL: Duration = Duration::from_secs(300);

impl Binder {
    pub fn new(
        client: Client,
        events: EventSink,
        io: tokio::runtime::Handle,
        queue: Addr<QueueActor>,
        cache: Arc<RwLock<Cache>>,
        metrics: Arc<Metrics>,
        component: String,
    ) -> Binder {
        Binder {
            client,
            events,
            io,
            queue,
            cache,
            metrics,
            component,
            reported: Reported::new(),
        }
    }
}

impl Actor for Binder {
    type Context = Context<Self>;
}

impl Handler<Bind> for Binder {
    type Result = ();
    fn handle(&mut self, msg: Bind, ctx: &mut Self::Context) {
        let (client, events, me) = (self.client.clone(), self.events.clone(), ctx.address());
        let component = self.component.clone();
        let cache = self.cache.clone();
        let metrics = self.metrics.clone();
        self.io.spawn(async move {
            let prebound = match &msg.volumes {
                Some(plan) => {
                    let started = Instant::now();
                    let prebound = bind_volumes(&client, &cache, plan, &msg.node).await;
                    metrics.extension_point(
                        ExtensionPoint::PreBind,
                        prebound.is_ok(),
                        started.elapsed(),
                    );
                    prebound
                }
                None => Ok(()),
            };
            let result = match prebound {
                Ok(()) => {
                    let started = Instant::now();
                    let result = bind(&client, &events, &msg.pod, &msg.node, &component).await;
                    let success = !matches!(result, BindResult::Failed(_));
                    metrics.extension_point(ExtensionPoint::Bind, success, started.elapsed());
                    result
                }
                Err(e) => BindResult::VolumesFailed(e),
            };
            me.do_send(BindFinished {
                key: msg.pod.key.clone(),
                started: msg.started,
                result,
            });
        });
    }
}

impl Handler<BindFinished> for Binder {
    type Result = ();
    fn handle(&mut self, msg: BindFinished, _: &mut Self::Context) {
        if matches!(msg.result, BindResult::Bound | BindResult::Settled) {
            self.reported.forget(&msg.key);
        }
        let outcome = match msg.result {
            BindResult::Bound => {
                self.metrics.attempt(AttemptResult::Scheduled);
                self.metrics.e2e(msg.started.elapsed());
                Outcome::Done
            }
            BindResult::Settled => {
                self.cache.write().forget(&msg.key);
                Outcome::Done
            }
            BindResult::Failed(e) => {
                warn!(pod = %msg.key, error = %e, "bind failed; retrying after backoff");
                self.cache.write().forget(&msg.key);
                self.metrics.attempt(AttemptResult::Error);
                Outcome::Failed
            }
            BindResult::VolumesFailed(e) => {
                warn!(pod = %msg.key, error = %e, "binding volumes failed; retrying after backoff");
                self.cache.write().forget(&msg.key);
                self.metrics.attempt(AttemptResult::Error);
                Outcome::Failed
            }
        };
        self.queue.do_send(AttemptDone {
            key: msg.key,
            outcome,
            from_worker: false,
        });
    }
}

impl Handler<ReportUnschedulable> for Binder {
    type Result = ();
    fn handle(&mut self, msg: ReportUnschedulable, _: &mut Self::Context) {
        let (client, events, metrics) = (
            self.client.clone(),
            self.events.clone(),
            self.metrics.clone(),
        );
        let component = self.component.clone();
        let write_condition =
            self.reported
                .changed(&msg.pod.key, &msg.pod.uid, &msg.message, Instant::now());
        self.io.spawn(async move {
            if let Preemption::Candidate { node, victims } = &msg.preemption {
                metrics.victims(victims.len());
                preempt(&client, &events, &msg.pod, node, victims, &component).await;
            }
            report_unschedulable(
                &client,
                &events,
                &msg.pod,
                &msg.message,
                &component,
                write_condition,
            )
            .await;
        });
    }
}

async fn bind(
    client: &Client,
    events: &EventSink,
    pod: &PodInfo,
    node: &str,
    component: &str,
) -> BindResult {
    match client.bind(&pod.namespace, &pod.name, node).await {
        Ok(()) => {
            debug!(pod = %pod.key, node, "bound");
            let message = format!("Successfully assigned {} to {node}", pod.key);
            record_event(events, pod, "Normal", "Scheduled", &message, component);
            BindResult::Bound
        }
        // 409: already assigned (another scheduler won, or our earlier bind did); 404: gone.
        Err(e) if e.is_conflict() || e.is_not_found() => {
            info!(pod = %pod.key, error = %e, "pod already bound or gone");
            BindResult::Settled
        }
        Err(e) => BindResult::Failed(e),
    }
}

/// VolumeBinding's PreBind: tells the provisioner where each delayed claim's consumer goes
/// (the selected-node annotation), pre-binds chosen volumes to their claims (the PV controller
/// completes the binding), then waits until every claim is bound, as kube-scheduler does, for
/// at most [`VOLUME_BIND_TIMEOUT`].
async fn bind_volumes(
    client: &Client,
    cache: &RwLock<Cache>,
    plan: &VolumePlan,
    node: &str,
) -> Result<(), String> {
    let claims = api::resources::find("", "v1", "persistentvolumeclaims").expect("served");
    let volumes = api::resources::find("", "v1", "persistentvolumes").expect("served");
    // Each annotated claim with the resourceVersion of the annotation.
    let mut annotated = Vec::new();
    for key in &plan.provision {
        let (namespace, name) = key.split_once('/').unwrap_or(("", key));
        let patch =
            Patch::Merge(json!({"metadata": {"annotations": {SELECTED_NODE_ANNOTATION: node}}}));
        let written = client
            .patch::<Value>(claims, Some(namespace), name, &patch)
            .await
            .map_err(|e| format!("selecting node {node} for claim {key}: {e}"))?;
        let version = written["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|rv| rv.parse::<u64>().ok())
            .unwrap_or(0);
        annotated.push((key.clone(), version));
    }
    for (volume, claim, uid) in &plan.bind {
        let (namespace, name) = claim.split_once('/').unwrap_or(("", claim));
        let patch = Patch::Merge(json!({
            "metadata": {"annotations": {"pv.kubernetes.io/bound-by-controller": "yes"}},
            "spec": {"claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                                  "namespace": namespace, "name": name, "uid": uid}},
        }));
        client
            .patch::<Value>(volumes, None, volume, &patch)
            .await
            .map_err(|e| format!("binding volume {volume} to claim {claim}: {e}"))?;
    }
    let deadline = Instant::now() + VOLUME_BIND_TIMEOUT;
    loop {
        {
            let cache = cache.read();
            let volumes = cache.snapshot().volumes();
            if volumes.all_bound(&plan.wait) {
                break;
            }
            // The provisioner gave the node back (no room there): schedule the pod again.
            if let Some(key) = volumes.provisioning_reset(&annotated, node) {
                let name = key.split_once('/').map_or(key, |(_, name)| name);
                return Err(format!(
                    "binding volumes: provisioning failed for PVC {name:?}"
                ));
            }
        }
        if Instant::now() >= deadline {
            return Err("binding volumes: timed out waiting for the condition".into());
        }
        tokio::time::sleep(VOLUME_BIND_POLL).await;
    }
    Ok(())
}

async fn preempt(
    client: &Client,
    events: &EventSink,
    pod: &PodInfo,
    node: &str,
    victims: &[Arc<PodInfo>],
    component: &str,
) {
    let pods = api::resources::pods();
    for victim in victims {
        // As kube-scheduler: mark why the pod goes (DisruptionTarget), delete it gracefully
        // (its terminationGracePeriodSeconds; the kubelet finishes it), record `Preempted`.
        let condition = json!({
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "PreemptionByScheduler",
            "message": format!("{component}: preempting to accommodate a higher priority pod"),
            "lastTransitionTime": api::leader_election::wall_clock().to_string(),
        });
        let patch = Patch::Strategic(json!({"status": {"conditions": [condition]}}));
        match client
            .patch_status::<Value>(pods, Some(&victim.namespace), &victim.name, &patch)
            .await
        {
            Ok(_) => {}
            Err(e) if e.is_not_found() => continue,
            Err(e) => warn!(victim = %victim.key, error = %e, "cannot set DisruptionTarget"),
        }
        let params = DeleteParams {
            precondition_uid: Some(victim.uid.clone()),
            ..Default::default()
        };
        match client
            .delete::<Value>(pods, Some(&victim.namespace), &victim.name, &params)
            .await
        {
            Ok(_) => info!(victim = %victim.key, preemptor = %pod.key, node, "preempted"),
            Err(e) if e.is_not_found() => continue,
            Err(e) => {
                warn!(victim = %victim.key, error = %e, "cannot delete a preemption victim");
                continue;
            }
        }
        let message = format!("Preempted by pod {} on node {node}", pod.uid);
        record_event(events, victim, "Normal", "Preempted", &message, component);
    }
    let patch = Patch::Merge(json!({"status": {"nominatedNodeName": node}}));
    if let Err(e) = client
        .patch_status::<Value>(pods, Some(&pod.namespace), &pod.name, &patch)
        .await
    {
        warn!(pod = %pod.key, error = %e, "cannot set nominatedNodeName");
    }
}

async fn report_unschedulable(
    client: &Client,
    events: &EventSink,
    pod: &PodInfo,
    message: &str,
    component: &str,
    write_condition: bool,
) {
    record_event(
        events,
        pod,
        "Warning",
        "FailedScheduling",
        message,
        component,
    );
    if !write_condition {
        return;
    }
    let condition = json!({
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": message,
        "lastProbeTime": null,
        "lastTransitionTime": api::leader_election::wall_clock().to_string(),
    });
    let patch = Patch::Strategic(json!({"status": {"conditions": [condition]}}));
    if let Err(e) = client
        .patch_status::<Value>(
            api::resources::pods(),
            Some(&pod.namespace),
            &pod.name,
            &patch,
        )
        .await
    {
        if !e.is_not_found() {
            warn!(pod = %pod.key, error = %e, "cannot set PodScheduled=False");
        }
    }
}

/// Queues a core/v1 Event about the pod; failures are only logged and counted (events are best
/// effort).
fn record_event(
    events: &EventSink,
    pod: &PodInfo,
    type_: &str,
    reason: &str,
    message: &str,
    component: &str,
) {
    let now = api::leader_election::wall_clock();
    let event = Event {
        metadata: ObjectMeta {
            name: Some(format!(
                "{}.{:x}",
                pod.name,
                now.as_nanosecond() as u64 ^ rand::random::<u32>() as u64
            )),
            namespace: Some(pod.namespace.clone()),
            ..Default::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(pod.name.clone()),
            namespace: Some(pod.namespace.clone()),
            uid: Some(pod.uid.clone()),
            resource_version: Some(pod.resource_version.clone()),
            ..Default::default()
        },
        reason: Some(reason.into()),
        message: Some(message.into()),
        type_: Some(type_.into()),
        count: Some(1),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        event_time: Some(MicroTime(now)),
        source: Some(EventSource {
            component: Some(component.into()),
            host: None,
        }),
        reporting_component: Some(component.into()),
        reporting_instance: Some(component.into()),
        action: Some(
            match reason {
                "Scheduled" => "Binding",
                "Preempted" => "Preempting",
                _ => "Scheduling",
            }
            .into(),
        ),
        ..Default::default()
    };
    events.record(&pod.namespace, &event);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unchanged_condition_is_written_once() {
        let mut r = Reported::new();
        let now = Instant::now();
        assert!(r.changed("ns/p", "u1", "0/3 nodes are available", now));
        assert!(!r.changed("ns/p", "u1", "0/3 nodes are available", now));
        // Another reason, another pod of the same name, or after the pod was bound: written.
        assert!(r.changed("ns/p", "u1", "0/4 nodes are available", now));
        assert!(r.changed("ns/p", "u2", "0/4 nodes are available", now));
        r.forget("ns/p");
        assert!(r.changed("ns/p", "u2", "0/4 nodes are available", now));
    }

    #[test]
    fn old_entries_are_pruned_once_many() {
        let mut r = Reported::new();
        let start = Instant::now();
        for i in 0..1024 {
            assert!(r.changed(&format!("ns/p{i}"), "u", "m", start));
        }
        let later = start + REPORTED_TTL + Duration::from_secs(1);
        assert!(r.changed("ns/new", "u", "m", later));
        assert_eq!(r.last.len(), 1);
        assert!(r.changed("ns/p0", "u", "m", later));
    }
}
