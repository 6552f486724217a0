//! The disruption controller: keeps each PodDisruptionBudget's status — how many of its pods
//! are healthy (`currentHealthy`), how many must stay so (`desiredHealthy`), how many pods it
//! expects (`expectedPods`), and so how many may be disrupted now (`disruptionsAllowed`) — with
//! the `DisruptionAllowed` condition and `observedGeneration`, which the eviction subresource
//! reads before it deletes a pod.
//!
//! As in kube-controller-manager: an integer `minAvailable` expects the pods that exist; a
//! percentage, or `maxUnavailable`, expects the replicas their controllers ask for (a
//! Deployment's through its ReplicaSets, a ReplicaSet's, a ReplicationController's, or any
//! other controller's `spec.replicas`), rounding the percentage up. Pods the eviction
//! subresource recorded in `disruptedPods` do not count as healthy until they are gone or two
//! minutes passed. A budget whose expected count cannot be worked out (a pod without a
//! controller) allows no disruption, with the condition's reason `SyncFailed`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use api::client::Client;
use api::informer::{Informer, InformerEvent, Store};
use api::selectors::LabelSelector;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tracing::debug;

use crate::owners::{controller_of, key_of, now_seconds, seconds, split_key, time_at};
use crate::pods;
use crate::queue::WorkQueue;
use crate::resource_quota::{namespace_of, BY_NAMESPACE};
use crate::worker::{Outcome, ReconcileError, Reconciler};

/// How long a pod recorded by an eviction is taken for gone before the controller counts it
/// again (Kubernetes' DeletionTimeout).
pub const DELETION_TIMEOUT_SECS: i64 = 120;

/// What the budget's pods amount to.
#[derive(Clone, Debug, PartialEq)]
pub struct Counts {
    pub expected: i32,
    pub desired_healthy: i32,
}

/// `expected` pods from the controllers' scale, `pods` from what exists: the counts a budget
/// asks for. `scale` is only called when the spec needs it.
pub fn counts(
    pdb: &PodDisruptionBudget,
    pods: usize,
    scale: impl FnOnce() -> Result<i32, String>,
) -> Result<Counts, String> {
    let spec = pdb.spec.clone().unwrap_or_default();
    if let Some(max) = &spec.max_unavailable {
        let expected = scale()?;
        let unavailable = scaled(max, expected)?;
        return Ok(Counts {
            expected,
            desired_healthy: (expected - unavailable).max(0),
        });
    }
    match &spec.min_available {
        Some(IntOrString::Int(n)) => Ok(Counts {
            expected: pods as i32,
            desired_healthy: *n,
        }),
        Some(min @ IntOrString::String(_)) => {
            let expected = scale()?;
            Ok(Counts {
                expected,
                desired_healthy: scaled(min, expected)?,
            })
        }
        None => Ok(Counts {
            expected: pods as i32,
            desired_healthy: 0,
        }),
    }
}

/// An integer as is, a percentage of `total` rounded up.
fn scaled(value: &IntOrString, total: i32) -> Result<i32, String> {
    match value {
        IntOrString::Int(n) => Ok(*n),
        IntOrString::String(s) => {
            let percent: i64 = s
                .strip_suffix('%')
                .and_then(|p| p.parse().ok())
                .ok_or_else(|| format!("invalid value for IntOrString: invalid value {s:?}"))?;
            Ok(((percent * i64::from(total) + 99) / 100) as i32)
        }
    }
}

/// The budget's new status from its pods and counts at `now` (seconds since the epoch), and
/// when to look again (a recorded disruption expiring).
pub fn status(
    pdb: &PodDisruptionBudget,
    pods: &[&Pod],
    counts: &Counts,
    now: i64,
) -> (PodDisruptionBudgetStatus, Option<Duration>) {
    let old = pdb.status.clone().unwrap_or_default();
    let by_name: HashMap<&str, &Pod> = pods
        .iter()
        .map(|p| (p.metadata.name.as_deref().unwrap_or_default(), *p))
        .collect();
    // Disruptions recorded by evictions stay until the pod is seen going or they expire.
    let mut disrupted = BTreeMap::new();
    let mut recheck: Option<i64> = None;
    for (name, at) in old.disrupted_pods.iter().flatten() {
        let Some(pod) = by_name.get(name.as_str()) else {
            continue;
        };
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let expires = seconds(at) + DELETION_TIMEOUT_SECS;
        if expires <= now {
            debug!(pod = %name, "recorded disruption expired");
            continue;
        }
        recheck = Some(recheck.map_or(expires, |r| r.min(expires)));
        disrupted.insert(name.clone(), at.clone());
    }
    let healthy = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| !disrupted.contains_key(p.metadata.name.as_deref().unwrap_or_default()))
        .filter(|p| pods::is_ready(p))
        .count() as i32;
    let mut allowed = healthy - counts.desired_healthy;
    if counts.expected <= 0 || allowed <= 0 {
        allowed = 0;
    }
    let mut status = PodDisruptionBudgetStatus {
        current_healthy: Some(healthy),
        desired_healthy: Some(counts.desired_healthy),
        expected_pods: Some(counts.expected),
        disruptions_allowed: Some(allowed),
        disrupted_pods: (!disrupted.is_empty()).then_some(disrupted),
        observed_generation: pdb.metadata.generation,
        conditions: old.conditions,
    };
    let (value, reason) = if allowed > 0 {
        ("True", "SufficientPods")
    } else {
        ("False", "InsufficientPods")
    };
    set_condition(&mut status, value, reason, "", now);
    let recheck =
        recheck.map(|at| Duration::from_secs(u64::try_from(at - now).unwrap_or(1).max(1)));
    (status, recheck)
}

/// The status of a budget whose counts could not be worked out: no disruption allowed.
pub fn fail_safe(pdb: &PodDisruptionBudget, why: &str, now: i64) -> PodDisruptionBudgetStatus {
    let mut status = pdb.status.clone().unwrap_or_default();
    status.disruptions_allowed = Some(0);
    set_condition(&mut status, "False", "SyncFailed", why, now);
    status
}

/// `meta.SetStatusCondition` for `DisruptionAllowed`: the transition time moves only when the
/// value does.
fn set_condition(
    status: &mut PodDisruptionBudgetStatus,
    value: &str,
    reason: &str,
    message: &str,
    now: i64,
) {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let fresh = Condition {
        type_: "DisruptionAllowed".into(),
        status: value.into(),
        reason: reason.into(),
        message: message.into(),
        observed_generation: status.observed_generation,
        last_transition_time: time_at(now),
    };
    match conditions.iter_mut().find(|c| c.type_ == fresh.type_) {
        Some(existing) => {
            let since = if existing.status == fresh.status {
                existing.last_transition_time.clone()
            } else {
                fresh.last_transition_time.clone()
            };
            *existing = Condition {
                last_transition_time: since,
                ..fresh
            };
        }
        None => conditions.push(fresh),
    }
}

/// Whether the budget's selector picks `pod`: a missing selector picks nothing, an empty one
/// every pod of the namespace.
pub fn selects(pdb: &PodDisruptionBudget, pod: &Pod) -> bool {
    if pdb.metadata.namespace != pod.metadata.namespace {
        return false;
    }
    let selector = pdb
        .spec
        .as_ref()
        .and_then(|s| s.selector.as_ref())
        .and_then(|s| serde_json::to_value(s).ok())
        .unwrap_or(serde_json::Value::Null);
    LabelSelector::from_label_selector_json(&selector)
        .map(|s| s.matches(&pod.metadata.labels.as_ref()))
        .unwrap_or(false)
}

/// The disruption controller's reconciler.
pub struct DisruptionController {
    client: Client,
    budgets: Store<PodDisruptionBudget>,
    pods: Store<Pod>,
    replicasets: Store<ReplicaSet>,
    deployments: Store<Deployment>,
    controllers: Store<ReplicationController>,
}

impl DisruptionController {
    /// Subscribes to the informers; a budget is queued on its own changes and on any change of
    /// a pod it selects.
    pub fn new(
        client: Client,
        budgets: &mut Informer<PodDisruptionBudget>,
        pods: &mut Informer<Pod>,
        replicasets: &Informer<ReplicaSet>,
        deployments: &Informer<Deployment>,
        controllers: &Informer<ReplicationController>,
    ) -> (Arc<DisruptionController>, WorkQueue) {
        let queue = WorkQueue::new(Duration::from_millis(5), Duration::from_secs(60));
        pods.add_index(BY_NAMESPACE, namespace_of::<Pod>);
        budgets.add_index(BY_NAMESPACE, namespace_of::<PodDisruptionBudget>);
        let controller = Arc::new(DisruptionController {
            client,
            budgets: budgets.store(),
            pods: pods.store(),
            replicasets: replicasets.store(),
            deployments: deployments.store(),
            controllers: controllers.store(),
        });
        tokio::spawn(feed(
            budgets.subscribe(),
            pods.subscribe(),
            budgets.store(),
            queue.clone(),
        ));
        (controller, queue)
    }

    /// The replicas the controllers of `pods` ask for, each controller counted once.
    async fn expected_scale(&self, pods: &[&Pod]) -> Result<i32, String> {
        let mut scales: HashMap<String, i32> = HashMap::new();
        for pod in pods {
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            let namespace = pod.metadata.namespace.as_deref();
            let Some(owner) = controller_of(&pod.metadata) else {
                return Err(format!("found no controller ref for pod {name:?}"));
            };
            if scales.contains_key(&owner.uid) {
                continue;
            }
            let found = match owner.kind.as_str() {
                "ReplicaSet" => self
                    .replicasets
                    .get_named(namespace, &owner.name)
                    .filter(|rs| rs.metadata.uid.as_deref() == Some(owner.uid.as_str()))
                    .and_then(|rs| {
                        match controller_of(&rs.metadata).filter(|r| r.kind == "Deployment") {
                            Some(d) => self
                                .deployments
                                .get_named(namespace, &d.name)
                                .filter(|dep| dep.metadata.uid.as_deref() == Some(d.uid.as_str()))
                                .map(|dep| (d.uid.clone(), dep.spec.replicas.unwrap_or(1))),
                            None => Some((owner.uid.clone(), rs.spec.replicas.unwrap_or(1))),
                        }
                    }),
                "ReplicationController" => self
                    .controllers
                    .get_named(namespace, &owner.name)
                    .filter(|rc| rc.metadata.uid.as_deref() == Some(owner.uid.as_str()))
                    .map(|rc| {
                        let replicas = rc.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                        (owner.uid.clone(), replicas)
                    }),
                _ => self.scale_of_other(owner, namespace).await,
            };
            match found {
                Some((uid, replicas)) => {
                    if uid != owner.uid {
                        // Pods of this ReplicaSet are counted through its Deployment.
                        scales.insert(owner.uid.clone(), 0);
                    }
                    scales.insert(uid, replicas);
                }
                None => return Err(format!("found no controllers for pod {name:?}")),
            }
        }
        Ok(scales.values().sum())
    }

    /// `spec.replicas` of a controller of another kind, read from the API.
    async fn scale_of_other(
        &self,
        owner: &k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
        namespace: Option<&str>,
    ) -> Option<(String, i32)> {
        let resource = crate::garbage_collector::resource_of_ref(owner)?;
        if !resource.has_subresource("scale") {
            return None;
        }
        let object: serde_json::Value = self
            .client
            .get(resource, namespace, &owner.name)
            .await
            .ok()?;
        if object.pointer("/metadata/uid").and_then(|u| u.as_str()) != Some(owner.uid.as_str()) {
            return None;
        }
        let replicas = object
            .pointer("/spec/replicas")
            .and_then(serde_json::Value::as_i64)
            .unwrap_or(1);
        Some((owner.uid.clone(), replicas as i32))
    }
}

/// Queues budgets: on their own events, and every budget selecting a changed pod.
async fn feed(
    mut budgets: tokio::sync::mpsc::Receiver<InformerEvent<PodDisruptionBudget>>,
    mut pods: tokio::sync::mpsc::Receiver<InformerEvent<Pod>>,
    store: Store<PodDisruptionBudget>,
    queue: WorkQueue,
) {
    let queue_selecting = |pod: &Pod| {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        for pdb in store.by_index(BY_NAMESPACE, namespace) {
            if selects(&pdb, pod) {
                queue.add(&key_of(&pdb.metadata));
            }
        }
    };
    loop {
        tokio::select! {
            event = budgets.recv() => match event {
                Some(InformerEvent::Added(b))
                | Some(InformerEvent::Updated { new: b, .. })
                | Some(InformerEvent::Deleted(b)) => queue.add(&key_of(&b.metadata)),
                None => return,
            },
            event = pods.recv() => match event {
                Some(InformerEvent::Added(p)) | Some(InformerEvent::Deleted(p)) => queue_selecting(&p),
                Some(InformerEvent::Updated { old, new }) => {
                    queue_selecting(&new);
                    if old.metadata.labels != new.metadata.labels {
                        queue_selecting(&old);
                    }
                }
                None => return,
            },
        }
    }
}

impl crate::manager::HasCaches for DisruptionController {
    fn caches_synced(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send>> {
        let (a, b, c, d, e) = (
            self.budgets.clone(),
            self.pods.clone(),
            self.replicasets.clone(),
            self.deployments.clone(),
            self.controllers.clone(),
        );
        Box::pin(async move {
            a.wait_synced().await
                && b.wait_synced().await
                && c.wait_synced().await
                && d.wait_synced().await
                && e.wait_synced().await
        })
    }
}

impl Reconciler for DisruptionController {
    async fn reconcile(&self, key: &str) -> Result<Outcome, ReconcileError> {
        let Some(pdb) = self.budgets.get(key) else {
            return Ok(Outcome::Done);
        };
        let (namespace, name) = split_key(key);
        let all = self
            .pods
            .by_index(BY_NAMESPACE, namespace.unwrap_or_default());
        let selected: Vec<&Pod> = all
            .iter()
            .map(|p| p.as_ref())
            .filter(|p| selects(&pdb, p))
            .collect();
        let now = now_seconds();
        let scale = if needs_scale(&pdb) {
            Some(self.expected_scale(&selected).await)
        } else {
            None
        };
        let counted = counts(&pdb, selected.len(), || {
            scale.unwrap_or_else(|| Err("no scale".into()))
        });
        let (new_status, recheck) = match counted {
            Ok(c) => status(&pdb, &selected, &c, now),
            Err(why) => {
                debug!(budget = key, %why, "cannot count expected pods");
                (fail_safe(&pdb, &why, now), None)
            }
        };
        if pdb.status.as_ref() != Some(&new_status) {
            let mut updated = (*pdb).clone();
            updated.status = Some(new_status);
            let pdbs =
                api::resources::find("policy", "v1", "poddisruptionbudgets").ok_or_else(|| {
                    ReconcileError::Invalid("poddisruptionbudgets are not served".into())
                })?;
            match self
                .client
                .update_status::<_, serde_json::Value>(pdbs, namespace, name, &updated)
                .await
            {
                Ok(_) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(ReconcileError::api("update status")(e)),
            }
        }
        Ok(match recheck {
            Some(after) => Outcome::RequeueAfter(after),
            None => Outcome::Done,
        })
    }
}

/// Whether the expected count comes from the controllers' scale.
fn needs_scale(pdb: &PodDisruptionBudget) -> bool {
    let spec = pdb.spec.as_ref();
    spec.is_some_and(|s| {
        s.max_unavailable.is_some() || matches!(s.min_available, Some(IntOrString::String(_)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_objects::{labels, meta, pod, replica_set};
    use k8s_openapi::api::policy::v1::PodDisruptionBudgetSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as Selector;

    fn budget(min: Option<IntOrString>, max: Option<IntOrString>) -> PodDisruptionBudget {
        PodDisruptionBudget {
            metadata: meta("web", "uid-pdb"),
            spec: Some(PodDisruptionBudgetSpec {
                min_available: min,
                max_unavailable: max,
                selector: Some(Selector {
                    match_labels: Some(labels(&[("app", "web")])),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn three_pods() -> Vec<Pod> {
        let rs = replica_set("web", 3);
        vec![
            pod("a", &rs.metadata, "ReplicaSet", "Running", true),
            pod("b", &rs.metadata, "ReplicaSet", "Running", true),
            pod("c", &rs.metadata, "ReplicaSet", "Pending", false),
        ]
    }

    #[test]
    fn integer_min_available_expects_the_pods_that_exist() {
        let pdb = budget(Some(IntOrString::Int(1)), None);
        let pods = three_pods();
        let refs: Vec<&Pod> = pods.iter().collect();
        let c = counts(&pdb, refs.len(), || panic!("no scale needed")).expect("counts");
        assert_eq!(
            c,
            Counts {
                expected: 3,
                desired_healthy: 1
            }
        );
        let (s, recheck) = status(&pdb, &refs, &c, 2000);
        assert_eq!(s.current_healthy, Some(2));
        assert_eq!(s.disruptions_allowed, Some(1));
        assert_eq!(s.expected_pods, Some(3));
        assert_eq!(s.observed_generation, Some(1));
        assert!(recheck.is_none());
        let cond = &s.conditions.expect("conditions")[0];
        assert_eq!(
            (cond.status.as_str(), cond.reason.as_str()),
            ("True", "SufficientPods")
        );
    }

    #[test]
    fn max_unavailable_and_percentages_use_the_scale_rounding_up() {
        let pdb = budget(None, Some(IntOrString::String("50%".into())));
        let c = counts(&pdb, 2, || Ok(3)).expect("counts");
        assert_eq!(
            c,
            Counts {
                expected: 3,
                desired_healthy: 1
            }
        );
        let pdb = budget(Some(IntOrString::String("50%".into())), None);
        let c = counts(&pdb, 2, || Ok(3)).expect("counts");
        assert_eq!(
            c,
            Counts {
                expected: 3,
                desired_healthy: 2
            }
        );
        let pdb = budget(None, Some(IntOrString::Int(5)));
        let c = counts(&pdb, 2, || Ok(3)).expect("counts");
        assert_eq!(c.desired_healthy, 0);
        assert!(counts(&pdb, 2, || Err("found no controller ref".into())).is_err());
    }

    #[test]
    fn recorded_disruptions_count_as_unhealthy_until_they_expire() {
        let mut pdb = budget(Some(IntOrString::Int(1)), None);
        pdb.status = Some(PodDisruptionBudgetStatus {
            disrupted_pods: Some(BTreeMap::from([
                ("a".to_string(), time_at(1990)),
                ("gone".to_string(), time_at(1990)),
            ])),
            ..Default::default()
        });
        let pods = three_pods();
        let refs: Vec<&Pod> = pods.iter().collect();
        let c = Counts {
            expected: 3,
            desired_healthy: 1,
        };
        let (s, recheck) = status(&pdb, &refs, &c, 2000);
        assert_eq!(s.current_healthy, Some(1));
        assert_eq!(s.disruptions_allowed, Some(0));
        assert_eq!(s.disrupted_pods.as_ref().map(BTreeMap::len), Some(1));
        assert_eq!(recheck, Some(Duration::from_secs(110)));
        let cond = &s.conditions.as_ref().expect("conditions")[0];
        assert_eq!(cond.reason, "InsufficientPods");
        let (later, _) = status(&pdb, &refs, &c, 2200);
        assert_eq!(later.current_healthy, Some(2));
        assert!(later.disrupted_pods.is_none());
    }

    #[test]
    fn no_pods_allow_nothing_and_a_failure_fails_safe() {
        let pdb = budget(None, Some(IntOrString::Int(1)));
        let (s, _) = status(
            &pdb,
            &[],
            &Counts {
                expected: 0,
                desired_healthy: 0,
            },
            2000,
        );
        assert_eq!(s.disruptions_allowed, Some(0));
        let failed = fail_safe(&pdb, "found no controller ref for pod \"x\"", 2000);
        let cond = &failed.conditions.expect("conditions")[0];
        assert_eq!(cond.reason, "SyncFailed");
        assert_eq!(cond.message, "found no controller ref for pod \"x\"");
    }

    #[test]
    fn selection_follows_the_selector_and_namespace() {
        let pods = three_pods();
        let pdb = budget(None, None);
        assert!(selects(&pdb, &pods[0]));
        let mut elsewhere = pods[0].clone();
        elsewhere.metadata.namespace = Some("other".into());
        assert!(!selects(&pdb, &elsewhere));
        let mut nothing = pdb.clone();
        nothing.spec.as_mut().expect("spec").selector = None;
        assert!(!selects(&nothing, &pods[0]));
        let mut everything = pdb;
        everything.spec.as_mut().expect("spec").selector = Some(Selector::default());
        assert!(selects(&everything, &pods[0]));
    }
}
