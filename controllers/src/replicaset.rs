//! The replica controller, for ReplicaSets and ReplicationControllers alike: keeps
//! `spec.replicas` active pods per owner (creating them from the template with a controller
//! reference, deleting the least useful ones first), and reports replicas,
//! fullyLabeledReplicas, readyReplicas, availableReplicas and observedGeneration.
//!
//! The two kinds differ in their selector's form (a LabelSelector or a label map), which the
//! controller never reads: it owns its pods by controller reference. [`Replicated`] is what it
//! does read of either. The decision is the pure [`plan`]; [`ReplicaController`] does the I/O.
//! [`Expectations`] keep a slow watch from causing double creation: an owner whose last
//! creations or deletions are not all seen yet only gets its status updated.

use std::cmp::Reverse;
use std::sync::Arc;
use std::time::Duration;

use api::client::Client;
use api::informer::{Informer, Store};
use api::resources;
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetStatus};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec, ReplicationController};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::{Metadata, Resource};
use serde::de::DeserializeOwned;
use tracing::debug;

use crate::events::Recorder;
use crate::expectations::Expectations;
use crate::owned_pods;
use crate::owners::{controller_ref, now_seconds, seconds, split_key};
use crate::pod_control::PodControl;
use crate::pods;
use crate::queue::WorkQueue;
use crate::worker::{outcome, write_status, Outcome, ReconcileError, Reconciler};

/// What the replica controller reads of an owner kind (its kind, group and plural come from
/// k8s-openapi's [`Resource`]).
pub trait Replicated:
    Resource + Metadata<Ty = ObjectMeta> + Clone + DeserializeOwned + Send + Sync + 'static
{
    /// `spec.replicas`, defaulting to 1.
    fn replicas(&self) -> i32;
    fn min_ready_seconds(&self) -> i32;
    fn template(&self) -> Option<&PodTemplateSpec>;
    /// The status counts as last written (conditions left out), in ReplicaSet's shape, which
    /// is field for field the ReplicationController's too.
    fn counts(&self) -> Option<ReplicaSetStatus>;
}

impl Replicated for ReplicaSet {
    fn replicas(&self) -> i32 {
        self.spec.replicas.unwrap_or(1)
    }

    fn min_ready_seconds(&self) -> i32 {
        self.spec.min_ready_seconds.unwrap_or(0)
    }

    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.template.as_ref()
    }

    fn counts(&self) -> Option<ReplicaSetStatus> {
        self.status.as_ref().map(|s| ReplicaSetStatus {
            conditions: None,
            ..s.clone()
        })
    }
}

impl Replicated for ReplicationController {
    fn replicas(&self) -> i32 {
        self.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
    }

    fn min_ready_seconds(&self) -> i32 {
        self.spec
            .as_ref()
            .and_then(|s| s.min_ready_seconds)
            .unwrap_or(0)
    }

    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref()?.template.as_ref()
    }

    fn counts(&self) -> Option<ReplicaSetStatus> {
        self.status.as_ref().map(|s| ReplicaSetStatus {
            replicas: s.replicas,
            fully_labeled_replicas: s.fully_labeled_replicas,
            ready_replicas: s.ready_replicas,
            available_replicas: s.available_replicas,
            observed_generation: s.observed_generation,
            conditions: None,
            terminating_replicas: None,
        })
    }
}

/// At most this many pods are created or deleted per sync (client-go's burstReplicas).
pub const BURST: usize = 500;

/// What one sync of a ReplicaSet should do.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// Pods to create.
    pub create: usize,
    /// Names of pods to delete.
    pub delete: Vec<String>,
    pub status: ReplicaSetStatus,
    /// Look again then (a pod becoming available after minReadySeconds).
    pub recheck_after: Option<Duration>,
}

/// Decides the creations, deletions and status of `rs` given the pods it controls. Replicas
/// are managed only when `expectations_met`. `now` is seconds since the epoch. The status
/// carries no conditions (they are left as they are).
pub fn plan<O: Replicated>(rs: &O, owned: &[&Pod], expectations_met: bool, now: i64) -> Plan {
    let want = rs.replicas().max(0) as usize;
    let min_ready = rs.min_ready_seconds();
    let mut active: Vec<&Pod> = owned
        .iter()
        .copied()
        .filter(|p| pods::is_active(p))
        .collect();
    let mut create = 0;
    let mut delete = Vec::new();
    let deleting = rs.metadata().deletion_timestamp.is_some();
    if expectations_met && !deleting {
        if active.len() < want {
            create = (want - active.len()).min(BURST);
        } else if active.len() > want {
            let excess = (active.len() - want).min(BURST);
            active.sort_by_key(|p| deletion_rank(p));
            delete = active[..excess]
                .iter()
                .map(|p| p.metadata.name.clone().unwrap_or_default())
                .collect();
        }
    }
    let template_labels = rs
        .template()
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let active: Vec<&Pod> = owned
        .iter()
        .copied()
        .filter(|p| pods::is_active(p))
        .collect();
    let fully_labeled = active
        .iter()
        .filter(|p| {
            let labels = p.metadata.labels.as_ref();
            template_labels
                .iter()
                .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
        })
        .count();
    let ready = active.iter().filter(|p| pods::is_ready(p)).count();
    let available = active
        .iter()
        .filter(|p| pods::is_available(p, min_ready, now))
        .count();
    let recheck_after = (available < ready && min_ready > 0)
        .then(|| Duration::from_secs(u64::try_from(min_ready).unwrap_or(1).max(1)));
    let status = ReplicaSetStatus {
        replicas: active.len() as i32,
        fully_labeled_replicas: Some(fully_labeled as i32),
        ready_replicas: Some(ready as i32),
        available_replicas: Some(available as i32),
        observed_generation: rs.metadata().generation,
        conditions: None,
        terminating_replicas: None,
    };
    Plan {
        create,
        delete,
        status,
        recheck_after,
    }
}

/// Pods to delete first sort first: unscheduled, then pending, not ready, recently ready,
/// often restarted, newest (client-go's ActivePods order).
fn deletion_rank(pod: &Pod) -> (bool, u8, bool, Reverse<i32>, Reverse<i64>) {
    let phase_rank = match pods::phase(pod) {
        "Pending" | "" => 0,
        "Unknown" => 1,
        _ => 2,
    };
    let created = pod
        .metadata
        .creation_timestamp
        .as_ref()
        .map(seconds)
        .unwrap_or(0);
    (
        pods::is_scheduled(pod),
        phase_rank,
        pods::is_ready(pod),
        Reverse(pods::restarts(pod)),
        Reverse(created),
    )
}

/// The replica controller's reconciler for owners of kind `O`.
pub struct ReplicaController<O> {
    client: Client,
    pods_control: PodControl,
    owners: Store<O>,
    pods: Store<Pod>,
    expectations: Arc<Expectations>,
}

/// The ReplicaSet controller.
pub type ReplicaSetController = ReplicaController<ReplicaSet>;
/// The ReplicationController manager.
pub type ReplicationManager = ReplicaController<ReplicationController>;

impl<O: Replicated> ReplicaController<O> {
    /// Subscribes to the informers and returns the reconciler and its queue, fed by a spawned
    /// task.
    pub fn new(
        client: Client,
        owners: &mut Informer<O>,
        pods: &mut Informer<Pod>,
        events: api::event_sink::EventSink,
    ) -> (Arc<ReplicaController<O>>, WorkQueue) {
        // kube-controller-manager's recorders: one per controller kind.
        let component = match O::KIND {
            "ReplicationController" => "replication-controller",
            _ => "replicaset-controller",
        };
        let queue = WorkQueue::new(Duration::from_millis(5), Duration::from_secs(60));
        let expectations = Arc::new(Expectations::default());
        pods.add_index(pods::BY_CONTROLLER, pods::controller_uid);
        let controller = Arc::new(ReplicaController {
            pods_control: PodControl::new(client.clone(), Recorder::new(events, component)),
            client,
            owners: owners.store(),
            pods: pods.store(),
            expectations: expectations.clone(),
        });
        tokio::spawn(owned_pods::feed(
            O::KIND,
            owners.subscribe(),
            pods.subscribe(),
            queue.clone(),
            expectations,
        ));
        (controller, queue)
    }
}

impl<O: Replicated> crate::manager::HasCaches for ReplicaController<O> {
    fn caches_synced(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send>> {
        let (a, b) = (self.owners.clone(), self.pods.clone());
        Box::pin(async move { a.wait_synced().await && b.wait_synced().await })
    }
}

impl<O: Replicated> Reconciler for ReplicaController<O> {
    async fn reconcile(&self, key: &str) -> Result<Outcome, ReconcileError> {
        let Some(rs) = self.owners.get(key) else {
            self.expectations.forget(key);
            return Ok(Outcome::Done);
        };
        let (namespace, name) = split_key(key);
        let namespace = namespace.unwrap_or_default();
        let uid = rs.metadata().uid.clone().unwrap_or_default();
        // Expectations first, then the pods: every pod observed by then is already in the cache
        // (the informer stores an object before it reports it), so a sync never misses a pod it
        // counted as seen and creates it again.
        let met = self.expectations.satisfied(key);
        let candidates = owned_pods::controlled_pods(&self.pods, namespace, &uid);
        let owned: Vec<&Pod> = candidates.iter().map(|p| p.as_ref()).collect();
        let now = now_seconds();
        let plan = plan(rs.as_ref(), &owned, met, now);
        let mut first_error = None;
        if plan.create > 0 {
            debug!(count = plan.create, "creating pods");
            self.expectations.expect(key, plan.create, []);
            let template = rs.template().cloned().unwrap_or_default();
            let owner = controller_ref(O::API_VERSION, O::KIND, rs.metadata());
            let pod = pods::from_template(&template, namespace, name, owner, &[]);
            if let Err(e) = self.create_pods(key, rs.as_ref(), &pod, plan.create).await {
                first_error = Some(e);
            }
        } else if !plan.delete.is_empty() {
            debug!(count = plan.delete.len(), "deleting pods");
            let keys = plan
                .delete
                .iter()
                .map(|n| api::informer::key(Some(namespace), n));
            self.expectations.expect(key, 0, keys);
            let object = crate::events::reference(O::API_VERSION, O::KIND, rs.metadata());
            let not_deleted = |pod: &str| {
                self.expectations
                    .deletion_observed(key, &api::informer::key(Some(namespace), pod))
            };
            if let Err(e) = self
                .pods_control
                .delete(&object, namespace, &plan.delete, not_deleted)
                .await
            {
                first_error = Some(e);
            }
        }
        if rs.counts().as_ref() != Some(&plan.status) {
            let resource =
                resources::find(O::GROUP, "v1", O::URL_PATH_SEGMENT).ok_or_else(|| {
                    ReconcileError::Invalid(format!("{} are not served", O::URL_PATH_SEGMENT))
                })?;
            let status = serde_json::to_value(&plan.status).unwrap_or_default();
            write_status(&self.client, resource, namespace, name, status).await?;
        }
        outcome(first_error, plan.recheck_after)
    }
}

impl<O: Replicated> ReplicaController<O> {
    /// Creates `count` copies of `pod`; creations never sent are forgotten by the expectations.
    async fn create_pods(
        &self,
        key: &str,
        owner: &O,
        pod: &Pod,
        count: usize,
    ) -> Result<(), ReconcileError> {
        let object = crate::events::reference(O::API_VERSION, O::KIND, owner.metadata());
        self.pods_control
            .create(&object, vec![pod.clone(); count], || {
                self.expectations.creation_observed(key)
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_objects::{pod, replica_set};

    #[test]
    fn creates_the_missing_pods_and_reports_status() {
        let rs = replica_set("web", 3);
        let p1 = pod("a", &rs.metadata, "ReplicaSet", "Running", true);
        let p2 = pod("b", &rs.metadata, "ReplicaSet", "Pending", false);
        let plan = plan(&rs, &[&p1, &p2], true, 2000);
        assert_eq!(plan.create, 1);
        assert!(plan.delete.is_empty());
        assert_eq!(plan.status.replicas, 2);
        assert_eq!(plan.status.ready_replicas, Some(1));
        assert_eq!(plan.status.available_replicas, Some(1));
        assert_eq!(plan.status.fully_labeled_replicas, Some(2));
        assert_eq!(plan.status.observed_generation, Some(1));
    }

    #[test]
    fn unmet_expectations_create_nothing() {
        let rs = replica_set("web", 3);
        let plan = plan(&rs, &[], false, 2000);
        assert_eq!(plan.create, 0);
        assert_eq!(plan.status.replicas, 0);
    }

    #[test]
    fn deletes_the_least_useful_pods_first_and_ignores_terminating_ones() {
        let rs = replica_set("web", 1);
        let ready = pod("ready", &rs.metadata, "ReplicaSet", "Running", true);
        let pending = pod("pending", &rs.metadata, "ReplicaSet", "Pending", false);
        let mut unscheduled = pod("unscheduled", &rs.metadata, "ReplicaSet", "Pending", false);
        unscheduled.spec.as_mut().expect("spec").node_name = None;
        let mut terminating = pod("terminating", &rs.metadata, "ReplicaSet", "Running", true);
        terminating.metadata.deletion_timestamp = Some(crate::owners::time_at(1500));
        let plan = plan(
            &rs,
            &[&ready, &pending, &unscheduled, &terminating],
            true,
            2000,
        );
        assert_eq!(plan.delete, ["unscheduled", "pending"]);
        assert_eq!(plan.status.replicas, 3);
    }

    #[test]
    fn min_ready_seconds_delays_availability() {
        let mut rs = replica_set("web", 1);
        rs.spec.min_ready_seconds = Some(30);
        let p = pod("a", &rs.metadata, "ReplicaSet", "Running", true);
        let early = plan(&rs, &[&p], true, 1010);
        assert_eq!(early.status.available_replicas, Some(0));
        assert_eq!(early.recheck_after, Some(Duration::from_secs(30)));
        let late = plan(&rs, &[&p], true, 1031);
        assert_eq!(late.status.available_replicas, Some(1));
    }

    #[test]
    fn replication_controllers_are_planned_like_replica_sets() {
        use k8s_openapi::api::core::v1::{ReplicationControllerSpec, ReplicationControllerStatus};
        let rs = replica_set("web", 2);
        let rc = ReplicationController {
            metadata: rs.metadata.clone(),
            spec: Some(ReplicationControllerSpec {
                replicas: Some(2),
                selector: Some(crate::test_objects::labels(&[("app", "web")])),
                template: rs.spec.template.clone(),
                ..Default::default()
            }),
            status: Some(ReplicationControllerStatus {
                replicas: 1,
                ..Default::default()
            }),
        };
        let p1 = pod("a", &rc.metadata, "ReplicationController", "Running", true);
        let plan = plan(&rc, &[&p1], true, 2000);
        assert_eq!(plan.create, 1);
        assert_eq!(plan.status.ready_replicas, Some(1));
        assert_eq!(rc.counts().map(|c| c.replicas), Some(1));
        assert_eq!(plan.status, super::plan(&rs, &[&p1], true, 2000).status);
    }

    #[test]
    fn a_burst_is_bounded() {
        let rs = replica_set("web", 10_000);
        assert_eq!(plan(&rs, &[], true, 0).create, BURST);
    }
}
