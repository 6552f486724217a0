//! The StatefulSet controller: pods with stable ordinal names (`web-0` … `web-N-1`), created in
//! order and each waited for (OrderedReady) or all at once (Parallel), removed from the highest
//! ordinal down; ControllerRevisions holding each template the set has had; rolling updates that
//! replace pods from the highest ordinal down to `partition`, at most `maxUnavailable` at a time,
//! or no updates at all (OnDelete); and the status kubectl's `rollout status` reads.
//!
//! Revisions are kept as [`crate::revisions`] describes, named `SET-HASH` with the hash of their
//! data (and of `collisionCount`, which grows when a different revision already has the name).
//! Pods carry their revision's name in the `controller-revision-hash` label.
//!
//! The decision is the pure [`plan`]; [`StatefulSetController`] does the I/O. PersistentVolume
//! claims from `volumeClaimTemplates` appear in each pod as `persistentVolumeClaim` volumes named
//! `TEMPLATE-POD`, as on Kubernetes; [`crate::statefulset_claims`] creates them before the pod and
//! carries out the claim retention policy.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use api::client::{Client, ClientError, DeleteParams};
use api::event_sink::EventSink;
use api::informer::{Informer, Store};
use api::resources::{self, ResourceInfo};
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::{PersistentVolumeClaimVolumeSource, Pod, PodTemplateSpec, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{json, Value};
use tokio::task::JoinSet;
use tracing::debug;

use crate::events::{error_text, reference, Recorder};
use crate::expectations::Expectations;
use crate::owned_pods;
use crate::owners::{controller_ref, now_seconds, split_key};
use crate::pods;
use crate::queue::WorkQueue;
use crate::revisions::{self, beyond_limit, Owner};
pub use crate::revisions::{revision_data, revision_template};
use crate::statefulset_claims as claims;
use crate::worker::{outcome, write_status, Outcome, ReconcileError, Reconciler};

/// The pod's own name, so a Service can select exactly one member.
pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
/// The pod's ordinal.
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";
/// The name of the ControllerRevision a pod was made from (the DaemonSet controller's label).
pub use crate::daemonset::REVISION_HASH_LABEL as REVISION_LABEL;
/// A ControllerRevision's hash.
pub const HASH_LABEL: &str = "controller.kubernetes.io/hash";

/// What one sync of a StatefulSet should do, in this order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// A revision for the current template, when none has its data yet.
    pub create_revision: Option<ControllerRevision>,
    /// An older revision whose data equals the template: (name, its new revision number).
    pub renumber_revision: Option<(String, i64)>,
    pub create_pods: Vec<Pod>,
    /// Names of pods to delete.
    pub delete_pods: Vec<String>,
    /// Names of revisions beyond the history limit.
    pub delete_revisions: Vec<String>,
    pub status: StatefulSetStatus,
    /// Look again then (a pod becoming available after minReadySeconds).
    pub recheck_after: Option<Duration>,
}

/// client-go's `HashControllerRevision`: FNV-1 (32 bits) of the data, then of the collision
/// count, written with the alphabet of generated names.
pub fn revision_hash(data: &Value, collision_count: i32) -> String {
    let mut hash: u32 = 0x811c_9dc5;
    let mut write = |bytes: &[u8]| {
        for b in bytes {
            hash = hash.wrapping_mul(0x0100_0193);
            hash ^= u32::from(*b);
        }
    };
    write(data.to_string().as_bytes());
    if collision_count > 0 {
        write(&collision_count.to_le_bytes());
    }
    safe_encode(&hash.to_string())
}

/// apimachinery's `rand.SafeEncodeString`: each byte mapped onto consonants and digits that
/// cannot spell words.
fn safe_encode(s: &str) -> String {
    const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    s.bytes()
        .map(|b| ALPHANUMS[usize::from(b) % ALPHANUMS.len()] as char)
        .collect()
}

/// The ordinal of a pod named `SET-N`.
pub fn ordinal_of(set_name: &str, pod_name: &str) -> Option<i32> {
    let rest = pod_name.strip_prefix(set_name)?.strip_prefix('-')?;
    if rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    rest.parse().ok()
}

fn revision_of(pod: &Pod) -> &str {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(REVISION_LABEL))
        .map_or("", String::as_str)
}

fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

fn is_running_and_ready(pod: &Pod) -> bool {
    pods::phase(pod) == "Running" && pods::is_ready(pod)
}

fn is_healthy(pod: &Pod, min_ready: i32, now: i64) -> bool {
    pods::phase(pod) == "Running" && pods::is_available(pod, min_ready, now) && !is_terminating(pod)
}

fn name_of(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

/// `maxUnavailable` as a number of pods: a percentage of `replicas` rounded up, at least one.
fn max_unavailable(value: Option<&IntOrString>, replicas: i32) -> i32 {
    let n = match value {
        None => 1,
        Some(IntOrString::Int(n)) => *n,
        Some(IntOrString::String(s)) => {
            let percent: i64 = s.trim_end_matches('%').parse().unwrap_or(0);
            ((i64::from(replicas) * percent + 99) / 100) as i32
        }
    };
    n.max(1)
}

/// The pod at `ordinal` made from `template` of revision `revision`: its stable name, identity
/// labels, hostname and subdomain, and a volume per claim template.
pub fn new_pod(set: &StatefulSet, template: &PodTemplateSpec, revision: &str, ordinal: i32) -> Pod {
    let set_name = name_of(&set.metadata);
    let namespace = set.metadata.namespace.as_deref().unwrap_or_default();
    let owner = controller_ref("apps/v1", "StatefulSet", &set.metadata);
    let mut pod = pods::from_template(template, namespace, set_name, owner, &[]);
    let name = format!("{set_name}-{ordinal}");
    pod.metadata.generate_name = None;
    pod.metadata.name = Some(name.clone());
    let labels = pod.metadata.labels.get_or_insert_with(BTreeMap::new);
    labels.insert(POD_NAME_LABEL.into(), name.clone());
    labels.insert(POD_INDEX_LABEL.into(), ordinal.to_string());
    labels.insert(REVISION_LABEL.into(), revision.to_string());
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.hostname = Some(name.clone());
    if let Some(service) = set.spec.service_name.as_deref() {
        if !service.is_empty() {
            spec.subdomain = Some(service.to_string());
        }
    }
    let claims = set
        .spec
        .volume_claim_templates
        .as_deref()
        .unwrap_or_default();
    if !claims.is_empty() {
        let volumes = spec.volumes.get_or_insert_with(Vec::new);
        for claim in claims {
            let claim_name = name_of(&claim.metadata);
            volumes.retain(|v| v.name != claim_name);
            volumes.push(Volume {
                name: claim_name.to_string(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: claims::claim_name(claim_name, &name),
                    read_only: None,
                }),
                ..Default::default()
            });
        }
    }
    pod
}

/// The revisions of `set` after this sync: which one its template is (creating or renumbering
/// one when needed) and which one its pods were at.
struct Revisions {
    update_name: String,
    update_template: PodTemplateSpec,
    current_name: String,
    current_template: PodTemplateSpec,
    create: Option<ControllerRevision>,
    renumber: Option<(String, i64)>,
    collision_count: i32,
}

fn resolve_revisions(set: &StatefulSet, revisions: &[&ControllerRevision]) -> Revisions {
    let status = set.status.clone().unwrap_or_default();
    let template = set.spec.template.clone();
    let data = revision_data(&template);
    let resolved = owner(set).resolve(revisions, status.collision_count.unwrap_or(0), |count| {
        revision_hash(&data, count)
    });
    let update_name = resolved.name.clone();
    let current = status
        .current_revision
        .as_deref()
        .and_then(|name| revisions.iter().find(|r| name_of(&r.metadata) == name));
    let (current_name, current_template) = match current
        .and_then(|r| revision_template(r).map(|t| (name_of(&r.metadata).to_string(), t)))
    {
        Some(found) => found,
        None => (update_name.clone(), template.clone()),
    };
    Revisions {
        update_name,
        update_template: template,
        current_name,
        current_template,
        create: resolved.create,
        renumber: resolved.renumber,
        collision_count: resolved.collision_count,
    }
}

/// The set as the owner of its revisions.
fn owner(set: &StatefulSet) -> Owner<'_> {
    Owner {
        kind: "StatefulSet",
        meta: &set.metadata,
        template: &set.spec.template,
        hash_label: HASH_LABEL,
    }
}

/// Decides one sync of `set` from the pods and revisions it controls. Pods are created and
/// deleted only when `expectations_met`. `now` is seconds since the epoch.
pub fn plan(
    set: &StatefulSet,
    owned: &[&Pod],
    revisions: &[&ControllerRevision],
    expectations_met: bool,
    now: i64,
) -> Plan {
    let spec = &set.spec;
    let set_name = name_of(&set.metadata);
    let revs = resolve_revisions(set, revisions);
    let min_ready = spec.min_ready_seconds.unwrap_or(0);
    let rolling = spec
        .update_strategy
        .as_ref()
        .and_then(|s| s.type_.as_deref())
        .unwrap_or("RollingUpdate")
        == "RollingUpdate";

    let mut members: BTreeMap<i32, &Pod> = BTreeMap::new();
    for pod in owned {
        if let Some(ordinal) = ordinal_of(set_name, name_of(&pod.metadata)) {
            members.insert(ordinal, pod);
        }
    }
    let mut plan = Plan {
        create_revision: revs.create.clone(),
        renumber_revision: revs.renumber.clone(),
        ..Default::default()
    };
    let deleting = set.metadata.deletion_timestamp.is_some();
    if expectations_met && !deleting {
        manage_pods(set, &revs, &members, &mut plan, now);
    }

    // Status: every member, plus the pods being created now.
    let mut status = StatefulSetStatus {
        observed_generation: set.metadata.generation,
        collision_count: Some(revs.collision_count),
        current_revision: Some(revs.current_name.clone()),
        update_revision: Some(revs.update_name.clone()),
        ..Default::default()
    };
    let (mut ready, mut available, mut current, mut updated) = (0, 0, 0, 0);
    for pod in members.values().copied().chain(plan.create_pods.iter()) {
        status.replicas += 1;
        if is_running_and_ready(pod) {
            ready += 1;
            if pods::is_available(pod, min_ready, now) {
                available += 1;
            }
        }
        if !is_terminating(pod) {
            if revision_of(pod) == revs.current_name {
                current += 1;
            }
            if revision_of(pod) == revs.update_name {
                updated += 1;
            }
        }
    }
    if rolling && updated == status.replicas && ready == status.replicas {
        current = updated;
        status.current_revision = Some(revs.update_name.clone());
    }
    // Go leaves these out when zero (`omitempty`).
    let counted = |n: i32| (n != 0).then_some(n);
    status.ready_replicas = counted(ready);
    status.current_replicas = counted(current);
    status.updated_replicas = counted(updated);
    status.available_replicas = Some(available);
    if available < ready && min_ready > 0 {
        plan.recheck_after = Some(Duration::from_secs(u64::try_from(min_ready).unwrap_or(1)));
    }
    plan.status = status;

    // History beyond the limit, oldest first, never a revision in use.
    let mut live: HashSet<&str> = HashSet::new();
    live.insert(&revs.update_name);
    live.insert(plan.status.current_revision.as_deref().unwrap_or_default());
    live.insert(&revs.current_name);
    for pod in members.values() {
        live.insert(revision_of(pod));
    }
    plan.delete_revisions = beyond_limit(revisions, &live, spec.revision_history_limit);
    plan
}

/// The pod part of a sync: failed pods replaced, missing ordinals created, condemned ordinals
/// removed from the highest, then the rolling update. OrderedReady stops at the first pod that
/// is not Running and Ready (or being created or deleted).
fn manage_pods(
    set: &StatefulSet,
    revs: &Revisions,
    members: &BTreeMap<i32, &Pod>,
    plan: &mut Plan,
    now: i64,
) {
    let spec = &set.spec;
    let start = spec.ordinals.as_ref().and_then(|o| o.start).unwrap_or(0);
    let want = spec.replicas.unwrap_or(1).max(0);
    let end = start + want;
    let min_ready = spec.min_ready_seconds.unwrap_or(0);
    let monotonic = spec.pod_management_policy.as_deref() != Some("Parallel");
    let strategy = spec.update_strategy.clone().unwrap_or_default();
    let rolling = strategy.type_.as_deref().unwrap_or("RollingUpdate") == "RollingUpdate";
    let rolling_update = strategy.rolling_update.clone().unwrap_or_default();
    let partition = rolling_update.partition.unwrap_or(0);

    // Below the partition, a new pod keeps the current revision.
    let pod_at = |ordinal: i32| {
        if rolling && ordinal < start + partition {
            new_pod(set, &revs.current_template, &revs.current_name, ordinal)
        } else {
            new_pod(set, &revs.update_template, &revs.update_name, ordinal)
        }
    };

    for ordinal in start..end {
        match members.get(&ordinal) {
            None => {
                plan.create_pods.push(pod_at(ordinal));
                if monotonic {
                    return;
                }
            }
            Some(pod) if pods::is_terminal(pod) && !is_terminating(pod) => {
                // A failed or finished member is replaced under the same name.
                plan.delete_pods.push(name_of(&pod.metadata).to_string());
                if monotonic {
                    return;
                }
            }
            Some(pod) if is_terminating(pod) || !is_healthy(pod, min_ready, now) => {
                if monotonic {
                    return;
                }
            }
            Some(_) => {}
        }
    }

    let condemned: Vec<(i32, &Pod)> = members
        .iter()
        .filter(|(ordinal, _)| **ordinal < start || **ordinal >= end)
        .map(|(o, p)| (*o, *p))
        .collect();
    let first_unhealthy = condemned
        .iter()
        .find(|(_, p)| !is_running_and_ready(p))
        .map(|(o, _)| *o);
    for (ordinal, pod) in condemned.iter().rev() {
        if is_terminating(pod) {
            if monotonic {
                return;
            }
            continue;
        }
        if monotonic && !is_running_and_ready(pod) && Some(*ordinal) != first_unhealthy {
            return;
        }
        plan.delete_pods.push(name_of(&pod.metadata).to_string());
        if monotonic {
            return;
        }
    }

    if !rolling || !plan.create_pods.is_empty() || !plan.delete_pods.is_empty() {
        return;
    }
    let budget = max_unavailable(rolling_update.max_unavailable.as_ref(), want);
    let unavailable = (start..end)
        .filter(|o| {
            members
                .get(o)
                .is_none_or(|p| !is_healthy(p, min_ready, now))
        })
        .count() as i32;
    if unavailable >= budget {
        return;
    }
    let mut room = budget - unavailable;
    for ordinal in (start + partition.max(0)..end).rev() {
        let Some(pod) = members.get(&ordinal) else {
            continue;
        };
        if revision_of(pod) != revs.update_name && !is_terminating(pod) {
            plan.delete_pods.push(name_of(&pod.metadata).to_string());
            room -= 1;
            if room == 0 {
                return;
            }
        }
    }
}

/// The StatefulSet controller's reconciler.
pub struct StatefulSetController {
    client: Client,
    events: Recorder,
    sets: Store<StatefulSet>,
    pods: Store<Pod>,
    revisions: Store<ControllerRevision>,
    expectations: Arc<Expectations>,
}

fn served(plural: &str) -> Result<&'static ResourceInfo, ReconcileError> {
    resources::find("apps", "v1", plural)
        .ok_or_else(|| ReconcileError::Invalid(format!("{plural} are not served")))
}

impl StatefulSetController {
    /// Subscribes to the informers and returns the reconciler and its queue, fed by a spawned
    /// task.
    pub fn new(
        client: Client,
        sets: &mut Informer<StatefulSet>,
        pods: &mut Informer<Pod>,
        revisions: &Informer<ControllerRevision>,
        events: EventSink,
    ) -> (Arc<StatefulSetController>, WorkQueue) {
        let queue = WorkQueue::new(Duration::from_millis(5), Duration::from_secs(60));
        let expectations = Arc::new(Expectations::default());
        pods.add_index(pods::BY_CONTROLLER, pods::controller_uid);
        let controller = Arc::new(StatefulSetController {
            client,
            events: Recorder::new(events, "statefulset-controller"),
            sets: sets.store(),
            pods: pods.store(),
            revisions: revisions.store(),
            expectations: expectations.clone(),
        });
        tokio::spawn(owned_pods::feed(
            "StatefulSet",
            sets.subscribe(),
            pods.subscribe(),
            queue.clone(),
            expectations,
        ));
        (controller, queue)
    }

    /// Records what became of a pod `verb` ("create", "delete") as the StatefulSet
    /// controller words it.
    fn record_pod(&self, set: &StatefulSet, verb: &str, pod: &str, error: Option<&ClientError>) {
        let object = reference("apps/v1", "StatefulSet", &set.metadata);
        let set_name = name_of(&set.metadata);
        let capitalized = match verb {
            "create" => "Create",
            _ => "Delete",
        };
        match error {
            None => {
                let message = format!("{verb} Pod {pod} in StatefulSet {set_name} successful");
                let reason = format!("Successful{capitalized}");
                self.events.record(object, false, &reason, &message);
            }
            Some(e) => {
                let message = format!(
                    "{verb} Pod {pod} in StatefulSet {set_name} failed error: {}",
                    error_text(e)
                );
                let reason = format!("Failed{capitalized}");
                self.events.record(object, true, &reason, &message);
            }
        }
    }
}

impl StatefulSetController {
    /// Records the creation of a claim for `pod` as the StatefulSet controller words it.
    fn record_claim(&self, set: &StatefulSet, pod: &str, claim: &str, error: Option<&str>) {
        let object = reference("apps/v1", "StatefulSet", &set.metadata);
        let set_name = name_of(&set.metadata);
        match error {
            None => {
                let message =
                    format!("create Claim {claim} Pod {pod} in StatefulSet {set_name} success");
                self.events
                    .record(object, false, "SuccessfulCreate", &message);
            }
            Some(e) => {
                let message = format!(
                    "create Claim {claim} for Pod {pod} in StatefulSet {set_name} failed error: {e}"
                );
                self.events.record(object, true, "FailedCreate", &message);
            }
        }
    }
}

impl crate::manager::HasCaches for StatefulSetController {
    fn caches_synced(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send>> {
        let (a, b, c) = (self.sets.clone(), self.pods.clone(), self.revisions.clone());
        Box::pin(
            async move { a.wait_synced().await && b.wait_synced().await && c.wait_synced().await },
        )
    }
}

impl Reconciler for StatefulSetController {
    async fn reconcile(&self, key: &str) -> Result<Outcome, ReconcileError> {
        let Some(set) = self.sets.get(key) else {
            self.expectations.forget(key);
            return Ok(Outcome::Done);
        };
        let (namespace, name) = split_key(key);
        let namespace = namespace.unwrap_or_default();
        let uid = set.metadata.uid.clone().unwrap_or_default();
        // Expectations first, then the pods: every pod observed by then is already in the cache
        // (the informer stores an object before it reports it), so a sync never misses a pod it
        // counted as seen and creates it again.
        let met = self.expectations.satisfied(key);
        let candidates = owned_pods::controlled_pods(&self.pods, namespace, &uid);
        let owned: Vec<&Pod> = candidates.iter().map(|p| p.as_ref()).collect();
        let all_revisions = revisions::owned_by(&self.revisions, namespace, &uid);
        let revisions: Vec<&ControllerRevision> =
            all_revisions.iter().map(|r| r.as_ref()).collect();
        let mut plan = plan(&set, &owned, &revisions, met, now_seconds());

        let revision = plan.create_revision.as_ref();
        let renumber = plan.renumber_revision.as_ref();
        if !revisions::write(&self.client, namespace, revision, renumber, &[]).await? {
            // Someone else's revision has the name: hash again with a higher count.
            let count = plan.status.collision_count.unwrap_or(0) + 1;
            let status = json!({ "collisionCount": count });
            write_status(
                &self.client,
                served("statefulsets")?,
                namespace,
                name,
                status,
            )
            .await?;
            return Ok(Outcome::RequeueAfter(Duration::from_millis(100)));
        }

        let mut first_error = None;
        if !plan.create_pods.is_empty() {
            debug!(count = plan.create_pods.len(), "creating pods");
            self.expectations.expect(key, plan.create_pods.len(), []);
            let mut tasks = JoinSet::new();
            for pod in plan.create_pods.clone() {
                let client = self.client.clone();
                let namespace = namespace.to_string();
                let set = set.clone();
                tasks.spawn(async move {
                    let name = pod.metadata.name.clone().unwrap_or_default();
                    // The claims first: a pod never starts without the volumes it mounts.
                    let (claims, ready) = claims::create_missing(&client, &set, &name).await;
                    let result = match ready {
                        Ok(()) => {
                            client
                                .create::<Pod, Value>(resources::pods(), Some(&namespace), &pod)
                                .await
                        }
                        Err(e) => Err(e),
                    };
                    (name, claims, result)
                });
            }
            while let Some(done) = tasks.join_next().await {
                if let Ok((pod, claims, _)) = &done {
                    for (claim, error) in claims {
                        self.record_claim(&set, pod, claim, error.as_deref());
                    }
                }
                match done.map(|(pod, _, result)| (pod, result)) {
                    Ok((pod, Ok(_))) => self.record_pod(&set, "create", &pod, None),
                    Ok((pod, Err(e))) => {
                        self.expectations.creation_observed(key);
                        if !e.is_already_exists() {
                            self.record_pod(&set, "create", &pod, Some(&e));
                            if first_error.is_none() {
                                first_error = Some(ReconcileError::api("create pod")(e));
                            }
                        }
                    }
                    Err(_) => self.expectations.creation_observed(key),
                }
            }
        }
        if !plan.delete_pods.is_empty() {
            debug!(pods = ?plan.delete_pods, "deleting pods");
            let keys = plan
                .delete_pods
                .iter()
                .map(|n| api::informer::key(Some(namespace), n));
            self.expectations.expect(key, 0, keys);
            let replicas = set.spec.replicas.unwrap_or(1);
            for pod in &plan.delete_pods {
                let condemned = owned.iter().find(|p| name_of(&p.metadata) == pod.as_str());
                let scaled_away = ordinal_of(name, pod).is_some_and(|o| o >= replicas);
                if let (Some(condemned), true) = (condemned, scaled_away) {
                    if let Err(e) = claims::hand_to_pod(&self.client, &set, condemned).await {
                        first_error.get_or_insert(ReconcileError::api("hand claims to pod")(e));
                        continue;
                    }
                }
                let result = self
                    .client
                    .delete::<Value>(
                        resources::pods(),
                        Some(namespace),
                        pod,
                        &DeleteParams::default(),
                    )
                    .await;
                match result {
                    Ok(_) => self.record_pod(&set, "delete", pod, None),
                    Err(e) => {
                        self.expectations
                            .deletion_observed(key, &api::informer::key(Some(namespace), pod));
                        if !e.is_not_found() {
                            self.record_pod(&set, "delete", pod, Some(&e));
                            if first_error.is_none() {
                                first_error =
                                    Some(ReconcileError::api(format!("delete pod {pod}"))(e));
                            }
                        }
                    }
                }
            }
        }
        let old = std::mem::take(&mut plan.delete_revisions);
        if let Err(e) = revisions::write(&self.client, namespace, None, None, &old).await {
            first_error.get_or_insert(e);
        }

        let written = set.status.clone().map(|s| StatefulSetStatus {
            conditions: None,
            ..s
        });
        if written.as_ref() != Some(&plan.status) {
            let mut status = serde_json::to_value(&plan.status).unwrap_or_else(|_| json!({}));
            if let Some(map) = status.as_object_mut() {
                // A count back at zero is left out, so the merge patch removes it.
                for key in ["readyReplicas", "currentReplicas", "updatedReplicas"] {
                    map.entry(key).or_insert(Value::Null);
                }
            }
            write_status(
                &self.client,
                served("statefulsets")?,
                namespace,
                name,
                status,
            )
            .await?;
        }
        outcome(first_error, plan.recheck_after)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_objects::{meta, pod, template};
    use k8s_openapi::api::apps::v1::{
        RollingUpdateStatefulSetStrategy, StatefulSetSpec, StatefulSetUpdateStrategy,
    };
    use k8s_openapi::api::core::v1::PersistentVolumeClaim;
    use k8s_openapi::apimachinery::pkg::runtime::RawExtension;

    fn set(replicas: i32, image: &str) -> StatefulSet {
        StatefulSet {
            metadata: meta("web", "uid-web"),
            spec: StatefulSetSpec {
                replicas: Some(replicas),
                service_name: Some("nginx".into()),
                template: template(image),
                pod_management_policy: Some("OrderedReady".into()),
                update_strategy: Some(StatefulSetUpdateStrategy {
                    type_: Some("RollingUpdate".into()),
                    rolling_update: Some(RollingUpdateStatefulSetStrategy {
                        partition: Some(0),
                        max_unavailable: Some(IntOrString::Int(1)),
                    }),
                }),
                revision_history_limit: Some(10),
                ..Default::default()
            },
            status: None,
        }
    }

    /// The revision `set` would create for its current template, numbered `number`.
    fn revision(set: &StatefulSet, number: i64) -> ControllerRevision {
        let data = revision_data(&set.spec.template);
        let resolved = owner(set).resolve(&[], 0, |count| revision_hash(&data, count));
        let mut r = resolved.create.expect("a new revision");
        r.revision = Some(number);
        r.metadata.uid = Some(format!("uid-{}", resolved.name));
        r
    }

    /// Member `ordinal` of `set` at `revision`.
    fn member(set: &StatefulSet, ordinal: i32, revision: &str, phase: &str, ready: bool) -> Pod {
        let mut p = pod(
            &format!("web-{ordinal}"),
            &set.metadata,
            "StatefulSet",
            phase,
            ready,
        );
        p.metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(REVISION_LABEL.into(), revision.into());
        p
    }

    fn names(pods: &[Pod]) -> Vec<&str> {
        pods.iter().map(|p| name_of(&p.metadata)).collect()
    }

    #[test]
    fn ordered_ready_creates_one_pod_at_a_time_with_its_identity() {
        let mut sts = set(3, "nginx:1");
        sts.spec.volume_claim_templates = Some(vec![PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("www".into()),
                ..Default::default()
            },
            ..Default::default()
        }]);
        let first = plan(&sts, &[], &[], true, 2000);
        let rev = first.create_revision.clone().expect("a first revision");
        assert_eq!(rev.revision, Some(1));
        let rev_name = name_of(&rev.metadata).to_string();
        assert!(rev_name.starts_with("web-"));
        assert_eq!(
            rev.metadata.labels.as_ref().expect("labels").get("app"),
            Some(&"web".to_string())
        );
        assert_eq!(names(&first.create_pods), ["web-0"]);
        let web0 = &first.create_pods[0];
        let labels = web0.metadata.labels.as_ref().expect("labels");
        assert_eq!(labels[POD_NAME_LABEL], "web-0");
        assert_eq!(labels[POD_INDEX_LABEL], "0");
        assert_eq!(labels[REVISION_LABEL], rev_name);
        let spec = web0.spec.as_ref().expect("spec");
        assert_eq!(spec.hostname.as_deref(), Some("web-0"));
        assert_eq!(spec.subdomain.as_deref(), Some("nginx"));
        let claim = spec.volumes.as_ref().expect("volumes")[0]
            .persistent_volume_claim
            .as_ref()
            .expect("claim");
        assert_eq!(claim.claim_name, "www-web-0");
        assert_eq!(first.status.replicas, 1);
        assert_eq!(
            first.status.update_revision.as_deref(),
            Some(rev_name.as_str())
        );

        let rev = revision(&sts, 1);
        let rev_name = name_of(&rev.metadata).to_string();
        let pending = member(&sts, 0, &rev_name, "Pending", false);
        let waiting = plan(&sts, &[&pending], &[&rev], true, 2000);
        assert!(waiting.create_revision.is_none());
        assert!(waiting.create_pods.is_empty(), "web-1 waits for web-0");
        let running = member(&sts, 0, &rev_name, "Running", true);
        let next = plan(&sts, &[&running], &[&rev], true, 2000);
        assert_eq!(names(&next.create_pods), ["web-1"]);
        assert!(plan(&sts, &[&running], &[&rev], false, 2000)
            .create_pods
            .is_empty());
    }

    #[test]
    fn parallel_creates_and_deletes_all_at_once() {
        let mut sts = set(3, "nginx:1");
        sts.spec.pod_management_policy = Some("Parallel".into());
        let rev = revision(&sts, 1);
        let rev_name = name_of(&rev.metadata).to_string();
        let pending = member(&sts, 1, &rev_name, "Pending", false);
        let p = plan(&sts, &[&pending], &[&rev], true, 2000);
        assert_eq!(names(&p.create_pods), ["web-0", "web-2"]);

        sts.spec.replicas = Some(1);
        let pods: Vec<Pod> = (0..3)
            .map(|i| member(&sts, i, &rev_name, "Running", true))
            .collect();
        let refs: Vec<&Pod> = pods.iter().collect();
        let p = plan(&sts, &refs, &[&rev], true, 2000);
        assert_eq!(p.delete_pods, ["web-2", "web-1"]);
    }

    #[test]
    fn ordered_scale_down_removes_the_highest_ordinal_first() {
        let sts = set(1, "nginx:1");
        let rev = revision(&sts, 1);
        let rev_name = name_of(&rev.metadata).to_string();
        let pods: Vec<Pod> = (0..3)
            .map(|i| member(&sts, i, &rev_name, "Running", true))
            .collect();
        let refs: Vec<&Pod> = pods.iter().collect();
        let p = plan(&sts, &refs, &[&rev], true, 2000);
        assert_eq!(p.delete_pods, ["web-2"]);
        assert_eq!(p.status.replicas, 3);
        assert_eq!(p.status.ready_replicas, Some(3));

        let mut terminating = pods[2].clone();
        terminating.metadata.deletion_timestamp = Some(crate::owners::time_at(1990));
        let p = plan(
            &sts,
            &[&pods[0], &pods[1], &terminating],
            &[&rev],
            true,
            2000,
        );
        assert!(p.delete_pods.is_empty(), "web-1 waits for web-2 to go");
    }

    #[test]
    fn rolling_update_respects_the_partition_and_completes() {
        let old = set(3, "nginx:1");
        let old_rev = revision(&old, 1);
        let old_name = name_of(&old_rev.metadata).to_string();
        let mut sts = set(3, "nginx:2");
        sts.spec.update_strategy = Some(StatefulSetUpdateStrategy {
            type_: Some("RollingUpdate".into()),
            rolling_update: Some(RollingUpdateStatefulSetStrategy {
                partition: Some(1),
                max_unavailable: None,
            }),
        });
        sts.status = Some(StatefulSetStatus {
            current_revision: Some(old_name.clone()),
            ..Default::default()
        });
        let pods: Vec<Pod> = (0..3)
            .map(|i| member(&sts, i, &old_name, "Running", true))
            .collect();
        let refs: Vec<&Pod> = pods.iter().collect();
        let p = plan(&sts, &refs, &[&old_rev], true, 2000);
        let new_rev = p
            .create_revision
            .clone()
            .expect("a revision for the new template");
        assert_eq!(new_rev.revision, Some(2));
        let new_name = name_of(&new_rev.metadata).to_string();
        assert_ne!(new_name, old_name);
        assert_eq!(p.delete_pods, ["web-2"], "the highest ordinal goes first");
        assert_eq!(
            p.status.current_revision.as_deref(),
            Some(old_name.as_str())
        );
        assert_eq!(p.status.updated_replicas, None);

        // web-2 updated and ready: web-1 is next, web-0 stays below the partition.
        let web2 = member(&sts, 2, &new_name, "Running", true);
        let p = plan(
            &sts,
            &[&pods[0], &pods[1], &web2],
            &[&old_rev, &new_rev],
            true,
            2000,
        );
        assert_eq!(p.delete_pods, ["web-1"]);
        assert_eq!(p.status.updated_replicas, Some(1));
        assert_eq!(p.status.current_replicas, Some(2));
        let web1 = member(&sts, 1, &new_name, "Running", true);
        let p = plan(
            &sts,
            &[&pods[0], &web1, &web2],
            &[&old_rev, &new_rev],
            true,
            2000,
        );
        assert!(p.delete_pods.is_empty());
        assert_eq!(p.status.updated_replicas, Some(2));

        // A missing pod below the partition comes back at the current revision.
        let p = plan(&sts, &[&web1, &web2], &[&old_rev, &new_rev], true, 2000);
        let labels = p.create_pods[0].metadata.labels.as_ref().expect("labels");
        assert_eq!(labels[REVISION_LABEL], old_name);
        let image = p.create_pods[0].spec.as_ref().expect("spec").containers[0]
            .image
            .clone();
        assert_eq!(image.as_deref(), Some("nginx:1"));

        // Partition 0: once every pod is updated and ready the update becomes current.
        sts.spec.update_strategy = set(3, "x").spec.update_strategy;
        let web0 = member(&sts, 0, &new_name, "Running", true);
        let p = plan(
            &sts,
            &[&web0, &web1, &web2],
            &[&old_rev, &new_rev],
            true,
            2000,
        );
        assert_eq!(
            p.status.current_revision.as_deref(),
            Some(new_name.as_str())
        );
        assert_eq!(p.status.current_replicas, Some(3));
        assert_eq!(p.status.updated_replicas, Some(3));
    }

    #[test]
    fn on_delete_never_replaces_pods() {
        let old = set(2, "nginx:1");
        let old_rev = revision(&old, 1);
        let old_name = name_of(&old_rev.metadata).to_string();
        let mut sts = set(2, "nginx:2");
        sts.spec.update_strategy = Some(StatefulSetUpdateStrategy {
            type_: Some("OnDelete".into()),
            rolling_update: None,
        });
        let pods: Vec<Pod> = (0..2)
            .map(|i| member(&sts, i, &old_name, "Running", true))
            .collect();
        let refs: Vec<&Pod> = pods.iter().collect();
        let p = plan(&sts, &refs, &[&old_rev], true, 2000);
        assert!(p.delete_pods.is_empty());
        assert!(p.create_revision.is_some());
    }

    #[test]
    fn an_earlier_template_takes_its_revision_back_with_the_next_number() {
        let v1 = set(1, "nginx:1");
        let v2 = set(1, "nginx:2");
        let (r1, r2) = (revision(&v1, 1), revision(&v2, 2));
        let p = plan(&v1, &[], &[&r1, &r2], true, 2000);
        assert!(p.create_revision.is_none());
        assert_eq!(
            p.renumber_revision,
            Some((name_of(&r1.metadata).to_string(), 3))
        );
        assert_eq!(p.status.update_revision, r1.metadata.name);
    }

    #[test]
    fn history_beyond_the_limit_goes_oldest_first_but_never_a_live_revision() {
        let mut sts = set(1, "nginx:9");
        sts.spec.revision_history_limit = Some(1);
        let old: Vec<ControllerRevision> = (1..=4)
            .map(|i| revision(&set(1, &format!("nginx:{i}")), i))
            .collect();
        let in_use = name_of(&old[0].metadata).to_string();
        let web0 = member(&sts, 0, &in_use, "Running", true);
        let refs: Vec<&ControllerRevision> = old.iter().collect();
        let p = plan(&sts, &[&web0], &refs, true, 2000);
        // Revision 1 is web-0's; of 2, 3 and 4 one is kept.
        let expected: Vec<String> = old[1..3]
            .iter()
            .map(|r| name_of(&r.metadata).to_string())
            .collect();
        assert_eq!(p.delete_revisions, expected);
    }

    #[test]
    fn revision_names_hash_the_data_and_the_collision_count() {
        let data = revision_data(&template("nginx:1"));
        assert_eq!(data["spec"]["template"]["$patch"], "replace");
        let a = revision_hash(&data, 0);
        assert_eq!(a, revision_hash(&data, 0));
        assert_ne!(a, revision_hash(&data, 1));
        assert!(a
            .bytes()
            .all(|b| b"bcdfghjklmnpqrstvwxz2456789".contains(&b)));
        let back = revision_template(&ControllerRevision {
            data: RawExtension(data),
            ..Default::default()
        });
        assert_eq!(back, Some(template("nginx:1")));
        assert_eq!(ordinal_of("web", "web-12"), Some(12));
        assert_eq!(ordinal_of("web", "web-x"), None);
        assert_eq!(ordinal_of("web", "webs-1"), None);
        assert_eq!(
            max_unavailable(Some(&IntOrString::String("50%".into())), 3),
            2
        );
        assert_eq!(max_unavailable(None, 3), 1);
    }
}
