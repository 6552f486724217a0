//! The node lifecycle controller: watches each node's heartbeat (its Lease in
//! `kube-node-lease`, or its Ready condition's heartbeat), and when none has been seen for
//! `grace_period` marks the node's conditions Unknown, its pods not ready, and taints it
//! `node.kubernetes.io/unreachable:NoExecute`. Its taint manager then evicts the pods that do
//! not tolerate the taint (at once, or after their `tolerationSeconds`). A node heard from
//! again loses the taint.
//!
//! Heartbeats are timed by this process's clock from when a change was *seen*, as the real
//! controller does, so clock skew between processes does not matter.
//!
//! The decisions are the pure [`health`], [`wanted_taints`] and [`eviction`]; the
//! [`NodeLifecycleController`] does the I/O.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use api::client::{Client, DeleteParams, Patch};
use api::informer::{Informer, InformerEvent, Store};
use api::resources;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, NodeCondition, Pod, Taint, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tracing::{info, warn};

use crate::manager::ManagerError;
use crate::owners::{now, now_seconds, seconds};
use crate::pods;
use crate::queue::WorkQueue;
use crate::worker::{stopped, Outcome, ReconcileError, Reconciler, Shutdown};

pub const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
pub const NOT_READY: &str = "node.kubernetes.io/not-ready";

/// Node lifecycle settings.
#[derive(Clone, Debug)]
pub struct NodeLifecycleConfig {
    /// How long a node may go without a heartbeat before it is Unknown (node-monitor-grace-period).
    pub grace_period: Duration,
    /// How often every node is looked at (node-monitor-period).
    pub monitor_period: Duration,
}

impl Default for NodeLifecycleConfig {
    fn default() -> Self {
        NodeLifecycleConfig {
            // kube-controller-manager's default since 1.32: five node status periods of 10 s
            // and room for the kubelet's client to reconnect.
            grace_period: Duration::from_secs(50),
            monitor_period: Duration::from_secs(5),
        }
    }
}

impl NodeLifecycleConfig {
    pub fn validate(&self) -> Result<(), ManagerError> {
        if self.grace_period.is_zero() {
            return Err(ManagerError::Config {
                field: "node_lifecycle.grace_period",
                reason: "must be positive".into(),
            });
        }
        if self.monitor_period.is_zero() {
            return Err(ManagerError::Config {
                field: "node_lifecycle.monitor_period",
                reason: "must be positive".into(),
            });
        }
        Ok(())
    }
}

/// How a node is doing, from its heartbeat age and Ready condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Health {
    Ready,
    NotReady,
    /// No heartbeat within the grace period.
    Unreachable,
}

fn ready_condition(node: &Node) -> Option<&NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_deref()?
        .iter()
        .find(|c| c.type_ == "Ready")
}

pub fn health(node: &Node, heartbeat_age: Duration, grace: Duration) -> Health {
    if heartbeat_age > grace {
        return Health::Unreachable;
    }
    // A node that has not reported a condition yet, or whose Unknown (set by us) predates its
    // returning heartbeat, is given the benefit of the doubt until the kubelet reports.
    match ready_condition(node).map(|c| c.status.as_str()) {
        Some("False") => Health::NotReady,
        _ => Health::Ready,
    }
}

/// The node's taints with the NoExecute health taints made to match `health` (keeping
/// when each was added); `None` if nothing changes.
pub fn wanted_taints(node: &Node, health: Health, now: i64) -> Option<Vec<Taint>> {
    let current = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let want = match health {
        Health::Ready => None,
        Health::NotReady => Some(NOT_READY),
        Health::Unreachable => Some(UNREACHABLE),
    };
    let is_health =
        |t: &Taint| (t.key == UNREACHABLE || t.key == NOT_READY) && t.effect == "NoExecute";
    let mut next: Vec<Taint> = current
        .iter()
        .filter(|t| !is_health(t) || Some(t.key.as_str()) == want)
        .cloned()
        .collect();
    if let Some(key) = want {
        if !next.iter().any(|t| t.key == key && t.effect == "NoExecute") {
            next.push(Taint {
                key: key.into(),
                effect: "NoExecute".into(),
                time_added: Some(crate::owners::time_at(now)),
                value: None,
            });
        }
    }
    (next != current).then_some(next)
}

pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    if let Some(effect) = toleration.effect.as_deref().filter(|e| !e.is_empty()) {
        if effect != taint.effect {
            return false;
        }
    }
    match toleration.operator.as_deref().unwrap_or("Equal") {
        "Exists" => toleration
            .key
            .as_deref()
            .is_none_or(|k| k.is_empty() || k == taint.key),
        _ => {
            toleration.key.as_deref() == Some(taint.key.as_str())
                && toleration.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
        }
    }
}

/// When `pod` must be evicted from a node with `taints` (seconds since the epoch; `now` if it
/// does not tolerate one), or `None` if it may stay.
pub fn eviction(pod: &Pod, taints: &[Taint], now: i64) -> Option<i64> {
    let tolerations = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.clone())
        .unwrap_or_default();
    let mut at: Option<i64> = None;
    for taint in taints.iter().filter(|t| t.effect == "NoExecute") {
        let matching: Vec<&Toleration> =
            tolerations.iter().filter(|t| tolerates(t, taint)).collect();
        if matching.is_empty() {
            return Some(now);
        }
        // Tolerated forever unless every matching toleration has a limit; the shortest wins.
        if matching.iter().all(|t| t.toleration_seconds.is_some()) {
            let seconds_ = matching
                .iter()
                .filter_map(|t| t.toleration_seconds)
                .min()
                .unwrap_or(0)
                .max(0);
            let added = taint.time_added.as_ref().map(seconds).unwrap_or(now);
            let when = added + seconds_;
            at = Some(at.map_or(when, |a| a.min(when)));
        }
    }
    at
}

/// The status patch that marks a pod of an unreachable node not ready: a strategic merge, so
/// only the Ready condition (merged by `type`) changes and the pod's other conditions stay as
/// the kubelet wrote them (the cached pod holds only its Ready condition; see
/// [`pods::keep_controller_fields`]).
pub fn not_ready_patch(at: Time) -> Patch {
    Patch::Strategic(json!({"status": {"conditions": [{
        "type": "Ready",
        "status": "False",
        "reason": "NodeNotReady",
        "lastTransitionTime": at,
    }]}}))
}

/// The node lifecycle reconciler (keys are node names).
pub struct NodeLifecycleController {
    client: Client,
    config: NodeLifecycleConfig,
    nodes: Store<Node>,
    leases: Store<Lease>,
    pods: Store<Pod>,
    /// Per node: the last heartbeat seen and when (by our clock) it changed.
    heartbeats: Mutex<HashMap<String, (String, Instant)>>,
}

impl NodeLifecycleController {
    pub fn new(
        client: Client,
        config: NodeLifecycleConfig,
        nodes: &mut Informer<Node>,
        leases: &mut Informer<Lease>,
        pods: &mut Informer<Pod>,
        shutdown: Shutdown,
    ) -> (Arc<NodeLifecycleController>, WorkQueue) {
        let queue = WorkQueue::new(Duration::from_millis(50), Duration::from_secs(30));
        pods.add_index(pods::BY_NODE, pods::node_name);
        let controller = Arc::new(NodeLifecycleController {
            client,
            config: config.clone(),
            nodes: nodes.store(),
            leases: leases.store(),
            pods: pods.store(),
            heartbeats: Mutex::new(HashMap::new()),
        });
        tokio::spawn(feed(
            nodes.subscribe(),
            leases.subscribe(),
            pods.subscribe(),
            queue.clone(),
        ));
        // Staleness shows only with time: look at every node each monitor period.
        let (nodes, q) = (nodes.store(), queue.clone());
        let mut stop = shutdown;
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(config.monitor_period);
            loop {
                tokio::select! {
                    biased;
                    () = stopped(&mut stop) => return,
                    _ = tick.tick() => {
                        for key in nodes.keys() {
                            q.add(&key);
                        }
                    }
                }
            }
        });
        (controller, queue)
    }

    /// The node's heartbeat as a comparable string: its lease's renewTime, else its Ready
    /// condition's lastHeartbeatTime.
    fn heartbeat_of(&self, node: &Node, name: &str) -> String {
        let lease = self
            .leases
            .get_named(Some("kube-node-lease"), name)
            .and_then(|l| l.spec.as_ref()?.renew_time.clone())
            .map(|t| t.0.to_string());
        let condition = ready_condition(node)
            .and_then(|c| c.last_heartbeat_time.as_ref())
            .map(|t| t.0.to_string());
        format!(
            "{}|{}",
            lease.unwrap_or_default(),
            condition.unwrap_or_default()
        )
    }

    fn heartbeat_age(&self, name: &str, heartbeat: String) -> Duration {
        let mut seen = self.heartbeats.lock();
        match seen.get(name) {
            Some((last, at)) if *last == heartbeat => at.elapsed(),
            _ => {
                seen.insert(name.to_string(), (heartbeat, Instant::now()));
                Duration::ZERO
            }
        }
    }
}

async fn feed(
    mut nodes: mpsc::Receiver<InformerEvent<Node>>,
    mut leases: mpsc::Receiver<InformerEvent<Lease>>,
    mut pods: mpsc::Receiver<InformerEvent<Pod>>,
    queue: WorkQueue,
) {
    loop {
        tokio::select! {
            event = nodes.recv() => match event {
                Some(InformerEvent::Added(n)) | Some(InformerEvent::Updated { new: n, .. }) | Some(InformerEvent::Deleted(n)) => {
                    queue.add(n.metadata.name.as_deref().unwrap_or_default())
                }
                None => return,
            },
            event = leases.recv() => match event {
                Some(InformerEvent::Added(l)) | Some(InformerEvent::Updated { new: l, .. }) => {
                    queue.add(l.metadata.name.as_deref().unwrap_or_default())
                }
                Some(InformerEvent::Deleted(_)) => {}
                None => return,
            },
            event = pods.recv() => match event {
                // A pod newly bound to a tainted node must be looked at.
                Some(InformerEvent::Updated { old, new }) if !pods::is_scheduled(&old) && pods::is_scheduled(&new) => {
                    if let Some(node) = new.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
                        queue.add(node);
                    }
                }
                Some(_) => {}
                None => return,
            },
        }
    }
}

impl crate::manager::HasCaches for NodeLifecycleController {
    fn caches_synced(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send>> {
        let (a, b, c) = (self.nodes.clone(), self.leases.clone(), self.pods.clone());
        Box::pin(
            async move { a.wait_synced().await && b.wait_synced().await && c.wait_synced().await },
        )
    }
}

impl Reconciler for NodeLifecycleController {
    async fn reconcile(&self, name: &str) -> Result<Outcome, ReconcileError> {
        let Some(node) = self.nodes.get(name) else {
            self.heartbeats.lock().remove(name);
            return Ok(Outcome::Done);
        };
        let heartbeat = self.heartbeat_of(&node, name);
        let age = self.heartbeat_age(name, heartbeat);
        let health = health(&node, age, self.config.grace_period);
        let nodes = resources::find("", "v1", "nodes").expect("nodes");
        let now_s = now_seconds();
        // From the node index: a scan of every pod per node and heartbeat was what bound the
        // controller manager with 10,000 pods on 5,000 nodes.
        let on_node = || -> Vec<Arc<Pod>> {
            self.pods
                .by_index(pods::BY_NODE, name)
                .into_iter()
                .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(name))
                .collect()
        };

        if health == Health::Unreachable {
            let ready = ready_condition(&node).map(|c| c.status.clone());
            if ready.as_deref() != Some("Unknown") {
                warn!(node = name, silent_for = ?age, "node stopped posting status; marking it Unknown");
                let mut conditions = node
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.clone())
                    .unwrap_or_default();
                if !conditions.iter().any(|c| c.type_ == "Ready") {
                    conditions.push(NodeCondition {
                        type_: "Ready".into(),
                        ..Default::default()
                    });
                }
                for c in conditions.iter_mut() {
                    c.status = "Unknown".into();
                    c.reason = Some("NodeStatusUnknown".into());
                    c.message = Some("Kubelet stopped posting node status.".into());
                    c.last_transition_time = Some(now());
                }
                let patch = Patch::Merge(json!({"status": {"conditions": conditions}}));
                self.client
                    .patch_status::<Value>(nodes, None, name, &patch)
                    .await
                    .map_err(ReconcileError::api("mark node Unknown"))?;
                // Its pods are no longer ready.
                for pod in on_node().iter().filter(|p| pods::is_ready(p)) {
                    self.mark_not_ready(pod).await?;
                }
            }
        }
        let taints = match wanted_taints(&node, health, now_s) {
            Some(taints) => {
                info!(node = name, ?health, "updating node health taints");
                let patch = Patch::Merge(json!({"spec": {"taints": taints}}));
                self.client
                    .patch::<Value>(nodes, None, name, &patch)
                    .await
                    .map_err(ReconcileError::api("taint node"))?;
                taints
            }
            None => node
                .spec
                .as_ref()
                .and_then(|s| s.taints.clone())
                .unwrap_or_default(),
        };
        // The taint manager: evict what does not tolerate the NoExecute taints. A node without
        // one (every healthy node: each lease renewal and each binding lands here) has nothing
        // to evict, and its pods are not looked at.
        if !taints.iter().any(|t| t.effect == "NoExecute") {
            return Ok(Outcome::Done);
        }
        let mut next_eviction: Option<i64> = None;
        for pod in on_node().iter().filter(|p| pods::is_active(p)) {
            match eviction(pod, &taints, now_s) {
                Some(at) if at <= now_s => {
                    let pod_name = pod.metadata.name.clone().unwrap_or_default();
                    info!(node = name, pod = %pod_name, "evicting pod from tainted node");
                    match self
                        .client
                        .delete::<Value>(
                            resources::pods(),
                            pod.metadata.namespace.as_deref(),
                            &pod_name,
                            &DeleteParams::default(),
                        )
                        .await
                    {
                        Ok(_) => {}
                        Err(e) if e.is_not_found() => {}
                        Err(e) => return Err(ReconcileError::api("evict pod")(e)),
                    }
                }
                Some(at) => next_eviction = Some(next_eviction.map_or(at, |n| n.min(at))),
                None => {}
            }
        }
        Ok(match next_eviction {
            Some(at) => Outcome::RequeueAfter(Duration::from_secs((at - now_s).max(1) as u64)),
            None => Outcome::Done,
        })
    }
}

impl NodeLifecycleController {
    async fn mark_not_ready(&self, pod: &Pod) -> Result<(), ReconcileError> {
        let patch = not_ready_patch(now());
        match self
            .client
            .patch_status::<Value>(
                resources::pods(),
                pod.metadata.namespace.as_deref(),
                pod.metadata.name.as_deref().unwrap_or_default(),
                &patch,
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(ReconcileError::api("mark pod not ready")(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeSpec, NodeStatus, PodSpec};

    fn node(ready: &str, taints: Vec<Taint>) -> Node {
        Node {
            metadata: Default::default(),
            spec: Some(NodeSpec {
                taints: Some(taints),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".into(),
                    status: ready.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    fn taint(key: &str, added: i64) -> Taint {
        Taint {
            key: key.into(),
            effect: "NoExecute".into(),
            time_added: Some(crate::owners::time_at(added)),
            value: None,
        }
    }

    #[test]
    fn a_silent_node_is_unreachable_and_tainted_and_a_recovered_one_is_not() {
        let grace = Duration::from_secs(40);
        let n = node("True", vec![]);
        assert_eq!(health(&n, Duration::from_secs(10), grace), Health::Ready);
        assert_eq!(
            health(&n, Duration::from_secs(41), grace),
            Health::Unreachable
        );
        let tainted = wanted_taints(&n, Health::Unreachable, 100).expect("taint added");
        assert_eq!(tainted, vec![taint(UNREACHABLE, 100)]);
        // Already tainted: nothing to do; recovered: the taint goes, other taints stay.
        let mut other = taint("dedicated", 5);
        other.effect = "NoSchedule".into();
        let n = node("True", vec![other.clone(), taint(UNREACHABLE, 100)]);
        assert_eq!(wanted_taints(&n, Health::Unreachable, 200), None);
        assert_eq!(wanted_taints(&n, Health::Ready, 200), Some(vec![other]));
        assert_eq!(
            wanted_taints(&n, Health::NotReady, 200).map(|t| t.len()),
            Some(2)
        );
    }

    fn pod_tolerating(tolerations: Vec<Toleration>) -> Pod {
        Pod {
            spec: Some(PodSpec {
                tolerations: Some(tolerations),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn eviction_follows_tolerations() {
        let taints = vec![taint(UNREACHABLE, 100)];
        assert_eq!(eviction(&pod_tolerating(vec![]), &taints, 150), Some(150));
        let for_30s = Toleration {
            key: Some(UNREACHABLE.into()),
            operator: Some("Exists".into()),
            effect: Some("NoExecute".into()),
            toleration_seconds: Some(30),
            value: None,
        };
        assert_eq!(
            eviction(&pod_tolerating(vec![for_30s]), &taints, 110),
            Some(130)
        );
        let forever = Toleration {
            operator: Some("Exists".into()),
            ..Default::default()
        };
        assert_eq!(eviction(&pod_tolerating(vec![forever]), &taints, 110), None);
        // NoSchedule taints never evict.
        let mut soft = taint("x", 1);
        soft.effect = "NoSchedule".into();
        assert_eq!(eviction(&pod_tolerating(vec![]), &[soft], 110), None);
    }
}
