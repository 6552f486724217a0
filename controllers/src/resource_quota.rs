//! The ResourceQuota controller: keeps each quota's `status.used` equal to what the pods of its
//! namespace use now, and `status.hard` equal to `spec.hard`.
//!
//! The API server charges a quota as it writes a new object and refunds it as it removes one
//! (in the same store transaction); what it cannot see is a pod reaching the end of its life.
//! As Kubernetes' pod evaluator has it (`api::quota::pod_counts_at`), a Succeeded or Failed pod,
//! or one stuck terminating past its grace period, counts only for `count/pods`, not for
//! `pods` or compute resources. This controller recomputes the pod-derived usage from the pods
//! informer — the pods of the quota's namespace through the informer's namespace index, never
//! a scan of all pods — so a finished pod releases its charge. Other resources a quota tracks
//! (`count/configmaps`, `services`, …) stay as the API server's charges keep them.
//!
//! Triggers: a quota added or changed; a pod whose charge may have changed (an update that
//! moves it in or out of "counts", a delete); and a full resync of every quota every
//! `resync` (which also catches pods whose grace period ran out without an event).
//!
//! Consistency: every charge or refund is in the same store transaction as the pod write that
//! caused it, so the quota's resourceVersion is the revision of the last pod write that moved
//! it. A quota is recomputed only once the pods informer has seen that revision (until then it
//! is looked at again shortly), and its status is written with the quota's resourceVersion as
//! a precondition, so a create charged in between makes the write conflict and the quota is
//! recomputed instead of losing that charge.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use api::client::Client;
use api::informer::{Informer, InformerEvent, State, Store};
use api::quantity::Quantity;
use api::quota::{self, Usage};
use chrono::Utc;
use k8s_openapi::api::core::v1::{Pod, ResourceQuota};
use serde_json::{json, Map, Value};
use tokio::sync::watch;
use tracing::debug;

use crate::queue::WorkQueue;
use crate::worker::{stopped, Outcome, ReconcileError, Reconciler, Shutdown};

/// The informers' index of objects by namespace (pods and quotas).
pub const BY_NAMESPACE: &str = "namespace";

/// How long a quota waits for the pods informer to catch up with it before it is looked at
/// again.
const CATCH_UP: Duration = Duration::from_millis(200);

/// Kubernetes' default `--resource-quota-sync-period`.
pub const DEFAULT_RESYNC: Duration = Duration::from_secs(300);

pub(crate) fn namespace_of<
    T: k8s_openapi::Metadata<Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
>(
    object: &T,
) -> Option<String> {
    object.metadata().namespace.clone()
}

fn pod_namespace(pod: &Pod) -> Option<String> {
    namespace_of(pod)
}

fn quota_namespace(quota: &ResourceQuota) -> Option<String> {
    namespace_of(quota)
}

/// The ResourceQuota reconciler (keys are `namespace/name`).
pub struct ResourceQuotaController {
    client: Client,
    quotas: Store<ResourceQuota>,
    pods: Store<Pod>,
    /// Where the pods informer is: the newest revision its store holds.
    pods_state: watch::Receiver<State>,
}

impl ResourceQuotaController {
    pub fn new(
        client: Client,
        quotas: &mut Informer<ResourceQuota>,
        pods: &mut Informer<Pod>,
        resync: Duration,
        stop: Shutdown,
    ) -> (Arc<ResourceQuotaController>, WorkQueue) {
        let queue = WorkQueue::new(Duration::from_millis(50), Duration::from_secs(30));
        pods.add_index(BY_NAMESPACE, pod_namespace);
        quotas.add_index(BY_NAMESPACE, quota_namespace);
        let controller = Arc::new(ResourceQuotaController {
            client,
            quotas: quotas.store(),
            pods: pods.store(),
            pods_state: pods.state(),
        });
        tokio::spawn(feed(
            quotas.subscribe(),
            pods.subscribe(),
            quotas.store(),
            queue.clone(),
        ));
        tokio::spawn(resync_every(resync, quotas.store(), queue.clone(), stop));
        (controller, queue)
    }

    /// The newest revision the pods informer's store holds (0 before its first list).
    fn pods_revision(&self) -> i64 {
        match &*self.pods_state.borrow() {
            State::Listed { resource_version } | State::Watching { resource_version } => {
                resource_version.parse().unwrap_or(0)
            }
            State::Empty | State::Listing => 0,
        }
    }
}

fn quota_key(quota: &ResourceQuota) -> String {
    api::informer::key(
        quota.metadata.namespace.as_deref(),
        quota.metadata.name.as_deref().unwrap_or_default(),
    )
}

/// Whether the pod's charge may differ between `old` and `new`.
fn charge_may_change(old: &Pod, new: &Pod) -> bool {
    old.status.as_ref().and_then(|s| s.phase.as_deref())
        != new.status.as_ref().and_then(|s| s.phase.as_deref())
        || old.metadata.deletion_timestamp != new.metadata.deletion_timestamp
        || old.metadata.deletion_grace_period_seconds != new.metadata.deletion_grace_period_seconds
}

async fn feed(
    mut quotas: tokio::sync::mpsc::Receiver<InformerEvent<ResourceQuota>>,
    mut pods: tokio::sync::mpsc::Receiver<InformerEvent<Pod>>,
    quota_store: Store<ResourceQuota>,
    queue: WorkQueue,
) {
    let quotas_of = |pod: &Pod| {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        for quota in quota_store.by_index(BY_NAMESPACE, namespace) {
            queue.add(&quota_key(&quota));
        }
    };
    loop {
        tokio::select! {
            event = quotas.recv() => match event {
                Some(InformerEvent::Added(q)) | Some(InformerEvent::Updated { new: q, .. }) => {
                    queue.add(&quota_key(&q));
                }
                Some(InformerEvent::Deleted(_)) => {}
                None => return,
            },
            event = pods.recv() => match event {
                // A new pod was charged by the API server as it was written.
                Some(InformerEvent::Added(_)) => {}
                Some(InformerEvent::Updated { old, new }) => {
                    if charge_may_change(&old, &new) {
                        quotas_of(&new);
                    }
                }
                Some(InformerEvent::Deleted(pod)) => quotas_of(&pod),
                None => return,
            },
        }
    }
}

/// Queues every quota every `period` until `stop`.
async fn resync_every(
    period: Duration,
    quotas: Store<ResourceQuota>,
    queue: WorkQueue,
    mut stop: Shutdown,
) {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    loop {
        tokio::select! {
            biased;
            () = stopped(&mut stop) => return,
            _ = ticks.tick() => {
                for key in quotas.keys() {
                    queue.add(&key);
                }
            }
        }
    }
}

impl crate::manager::HasCaches for ResourceQuotaController {
    fn caches_synced(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send>> {
        let (a, b) = (self.quotas.clone(), self.pods.clone());
        Box::pin(async move { a.wait_synced().await && b.wait_synced().await })
    }
}

/// The status `quota` should have, given what `pods` (its namespace's) use at `now`: `hard`
/// is `spec.hard`; `used` has every hard resource, the pod-derived ones recomputed, the others
/// as the API server's charges left them (0 when absent).
pub fn desired_status(quota: &Value, pods: &[Value], now: chrono::DateTime<Utc>) -> Value {
    let resource = api::resources::pods();
    let hard = quota
        .pointer("/spec/hard")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let from_pods: Vec<&String> = hard
        .keys()
        .filter(|name| quota::tracks_any(resource, std::slice::from_ref(*name)))
        .collect();
    let mut usage = Usage::new();
    if !from_pods.is_empty() {
        for pod in pods {
            if quota::matches_scopes(quota, resource, pod) {
                quota::add_usage(&mut usage, &quota::usage_at(resource, pod, now));
            }
        }
    }
    let recorded = quota.pointer("/status/used").and_then(Value::as_object);
    let mut used = Map::new();
    for name in hard.keys() {
        let value = if from_pods.contains(&name) {
            json!(usage
                .get(name)
                .map_or_else(|| "0".to_string(), Quantity::canonical))
        } else {
            recorded
                .and_then(|r| r.get(name))
                .cloned()
                .unwrap_or_else(|| json!("0"))
        };
        used.insert(name.clone(), value);
    }
    json!({"hard": hard, "used": used})
}

/// Equal as quantities (so "1000m" and "1" do not cause a write).
fn same_status(a: &Value, b: &Value) -> bool {
    let parse = |v: &Value, field: &str| -> Option<BTreeMap<String, Quantity>> {
        v.get(field)
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| Some((k.clone(), Quantity::from_value(v).ok()?)))
                    .collect::<Option<BTreeMap<_, _>>>()
            })
            .unwrap_or_else(|| Some(BTreeMap::new()))
    };
    ["hard", "used"].iter().all(|field| {
        let (x, y) = (parse(a, field), parse(b, field));
        x.is_some() && x == y
    })
}

impl Reconciler for ResourceQuotaController {
    async fn reconcile(&self, key: &str) -> Result<Outcome, ReconcileError> {
        let Some(quota) = self.quotas.get(key) else {
            return Ok(Outcome::Done);
        };
        let revision: i64 = quota
            .metadata
            .resource_version
            .as_deref()
            .and_then(|rv| rv.parse().ok())
            .unwrap_or(0);
        if self.pods_revision() < revision {
            // The pods informer has not yet seen every pod write that moved this quota.
            return Ok(Outcome::RequeueAfter(CATCH_UP));
        }
        let namespace = quota.metadata.namespace.clone().unwrap_or_default();
        let quota_value = serde_json::to_value(quota.as_ref())
            .map_err(|e| ReconcileError::Invalid(format!("quota {key}: {e}")))?;
        let pods: Vec<Value> = self
            .pods
            .by_index(BY_NAMESPACE, &namespace)
            .iter()
            .filter_map(|p| serde_json::to_value(p.as_ref()).ok())
            .collect();
        let desired = desired_status(&quota_value, &pods, Utc::now());
        let current = quota_value.get("status").cloned().unwrap_or(Value::Null);
        if same_status(&current, &desired) {
            return Ok(Outcome::Done);
        }
        let mut next = quota_value;
        next["status"] = desired;
        let resource = api::resources::find("", "v1", "resourcequotas")
            .ok_or_else(|| ReconcileError::Invalid("resourcequotas are not served".into()))?;
        let name = quota.metadata.name.as_deref().unwrap_or_default();
        match self
            .client
            .update_status::<Value, Value>(resource, Some(&namespace), name, &next)
            .await
        {
            Ok(_) => {
                debug!(quota = key, used = %next["status"]["used"], "quota usage recomputed");
                Ok(Outcome::Done)
            }
            // Charged or changed meanwhile: look again once the informers have it.
            Err(e) if e.is_conflict() => Ok(Outcome::RequeueAfter(CATCH_UP)),
            Err(e) if e.is_not_found() => Ok(Outcome::Done),
            Err(e) => Err(ReconcileError::api(format!("update quota {key} status"))(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(phase: &str, cpu: &str) -> Value {
        json!({"metadata": {"name": "p", "namespace": "q"},
               "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
               "status": {"phase": phase}})
    }

    #[test]
    fn finished_pods_release_their_charge_and_hard_follows_spec() {
        let quota = json!({"metadata": {"name": "q", "namespace": "q"},
            "spec": {"hard": {"pods": "2", "requests.cpu": "1", "count/pods": "5", "configmaps": "3"}},
            "status": {"hard": {"pods": "1"},
                       "used": {"pods": "2", "requests.cpu": "1", "configmaps": "2"}}});
        let pods = [
            pod("Running", "300m"),
            pod("Succeeded", "500m"),
            pod("Failed", "200m"),
        ];
        let status = desired_status(&quota, &pods, Utc::now());
        assert_eq!(
            status,
            json!({"hard": {"pods": "2", "requests.cpu": "1", "count/pods": "5", "configmaps": "3"},
                   "used": {"pods": "1", "requests.cpu": "300m", "count/pods": "3",
                            // Not derived from pods: left as the API server charged it.
                            "configmaps": "2"}})
        );
        assert!(!same_status(&quota["status"], &status));
        assert!(same_status(&status, &status));
        let mut respelt = status.clone();
        respelt["used"]["requests.cpu"] = json!("0.3");
        assert!(
            same_status(&status, &respelt),
            "quantities compare by value"
        );
    }

    #[test]
    fn scoped_quotas_count_only_the_pods_they_select() {
        let quota = json!({"spec": {"hard": {"pods": "4"}, "scopes": ["BestEffort"]}});
        let best_effort =
            json!({"spec": {"containers": [{"name": "c"}]}, "status": {"phase": "Running"}});
        let pods = [best_effort, pod("Running", "1")];
        let status = desired_status(&quota, &pods, Utc::now());
        assert_eq!(status["used"], json!({"pods": "1"}));
    }

    #[test]
    fn only_a_change_of_phase_or_deletion_touches_the_charge() {
        let a: Pod = serde_json::from_value(pod("Running", "1")).expect("pod");
        let mut b = a.clone();
        b.metadata.labels = Some([("x".to_string(), "y".to_string())].into());
        assert!(!charge_may_change(&a, &b));
        let done: Pod = serde_json::from_value(pod("Succeeded", "1")).expect("pod");
        assert!(charge_may_change(&a, &done));
        let mut deleting = a.clone();
        deleting.metadata.deletion_grace_period_seconds = Some(30);
        assert!(charge_may_change(&a, &deleting));
    }
}
