//! The Deployment controller: one ReplicaSet per pod template (named `<deployment>-<hash>`,
//! labelled `pod-template-hash`), rolled out by the RollingUpdate (maxSurge, maxUnavailable)
//! or Recreate strategy, with revisions (`deployment.kubernetes.io/revision`) so that
//! `kubectl rollout history/undo` work, a bounded revision history, and the Available and
//! Progressing conditions `kubectl rollout status` reads.
//!
//! The decision is the pure [`plan`] (given the Deployment and its ReplicaSets, what to
//! create, scale, delete, and the new status); [`DeploymentController`] does the I/O.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use api::client::{Client, DeleteParams, Patch};
use api::event_sink::EventSink;
use api::informer::{Informer, InformerEvent, Store};
use api::resources::{self, ResourceInfo};
use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet, ReplicaSetSpec,
};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tracing::{debug, info};

use crate::events::{reference, Recorder};
use crate::owners::{
    controlled_by, controller_of, controller_ref, key_of, now_seconds, seconds, split_key, time_at,
};
use crate::queue::WorkQueue;
use crate::worker::{Outcome, ReconcileError, Reconciler};

pub const REVISION: &str = "deployment.kubernetes.io/revision";
pub const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
pub const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";
pub const HASH_LABEL: &str = "pod-template-hash";
/// Deployment annotations not copied to its ReplicaSets.
const NOT_COPIED: &[&str] = &[
    "kubectl.kubernetes.io/last-applied-configuration",
    REVISION,
    DESIRED_REPLICAS,
    MAX_REPLICAS,
    "deployment.kubernetes.io/revision-history",
];

/// One change to the cluster.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    CreateReplicaSet(Box<ReplicaSet>),
    /// Sets the ReplicaSet's replicas and merges `annotations` into its annotations.
    UpdateReplicaSet {
        name: String,
        replicas: i32,
        annotations: BTreeMap<String, String>,
    },
    DeleteReplicaSet {
        name: String,
    },
    /// Records the new ReplicaSet's revision on the Deployment.
    SetRevision(String),
}

/// What one sync of a Deployment should do.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub actions: Vec<Action>,
    pub status: DeploymentStatus,
    /// Look again then (the progress deadline).
    pub recheck_after: Option<Duration>,
}

/// Kubernetes' pod template hash: FNV-1a of the template (without the hash label) and the
/// collision count, as a "safe" string (no vowels, no look-alike digits).
pub fn template_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let value = template_without_hash(template);
    let mut hash: u32 = 0x811c_9dc5;
    let mut feed = |bytes: &[u8]| {
        for b in bytes {
            hash ^= u32::from(*b);
            hash = hash.wrapping_mul(0x0100_0193);
        }
    };
    feed(value.to_string().as_bytes());
    if let Some(c) = collision_count {
        feed(&c.to_le_bytes());
    }
    const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    hash.to_string()
        .bytes()
        .map(|b| ALPHANUMS[usize::from(b) % ALPHANUMS.len()] as char)
        .collect()
}

/// The template as JSON, without the hash label (and without an emptied labels map).
fn template_without_hash(template: &PodTemplateSpec) -> Value {
    let mut value = serde_json::to_value(template).unwrap_or(Value::Null);
    if let Some(labels) = value
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        labels.remove(HASH_LABEL);
        if labels.is_empty() {
            if let Some(meta) = value
                .pointer_mut("/metadata")
                .and_then(Value::as_object_mut)
            {
                meta.remove("labels");
            }
        }
    }
    value
}

/// Two templates equal but for the hash label.
pub fn equal_ignoring_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    template_without_hash(a) == template_without_hash(b)
}

pub fn revision_of(meta: &ObjectMeta) -> i64 {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(REVISION))
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

fn replicas_of(rs: &ReplicaSet) -> i32 {
    rs.spec.replicas.unwrap_or(1)
}

fn status_replicas(rs: &ReplicaSet) -> i32 {
    rs.status.as_ref().map(|s| s.replicas).unwrap_or(0)
}

fn available_of(rs: &ReplicaSet) -> i32 {
    rs.status
        .as_ref()
        .and_then(|s| s.available_replicas)
        .unwrap_or(0)
}

/// An int or a percentage of `total` (rounded up or down).
fn scaled(value: Option<&IntOrString>, default: &str, total: i32, round_up: bool) -> i32 {
    let text = match value {
        Some(IntOrString::Int(n)) => return (*n).max(0),
        Some(IntOrString::String(s)) => s.as_str(),
        None => default,
    };
    match text.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) {
        Some(percent) => {
            let product = percent * i64::from(total);
            let v = if round_up {
                (product + 99) / 100
            } else {
                product / 100
            };
            v.max(0) as i32
        }
        None => text.parse().unwrap_or(0),
    }
}

/// (maxSurge, maxUnavailable) as pod counts; never both zero.
pub fn surge_and_unavailable(d: &Deployment) -> (i32, i32) {
    let replicas = d.spec.replicas.unwrap_or(1);
    let strategy = d.spec.strategy.as_ref();
    if strategy.and_then(|s| s.type_.as_deref()) == Some("Recreate") {
        return (0, 0);
    }
    let rolling = strategy.and_then(|s| s.rolling_update.as_ref());
    let surge = scaled(
        rolling.and_then(|r| r.max_surge.as_ref()),
        "25%",
        replicas,
        true,
    );
    let mut unavailable = scaled(
        rolling.and_then(|r| r.max_unavailable.as_ref()),
        "25%",
        replicas,
        false,
    );
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    (surge, unavailable.min(replicas))
}

fn is_recreate(d: &Deployment) -> bool {
    d.spec.strategy.as_ref().and_then(|s| s.type_.as_deref()) == Some("Recreate")
}

/// Decides the next actions and the status of `d` given the ReplicaSets it controls. `now`
/// is seconds since the epoch.
pub fn plan(d: &Deployment, owned: &[&ReplicaSet], now: i64) -> Plan {
    let name = d.metadata.name.clone().unwrap_or_default();
    let replicas = d.spec.replicas.unwrap_or(1).max(0);
    let collision_count = d.status.as_ref().and_then(|s| s.collision_count);
    let hash = template_hash(&d.spec.template, collision_count);
    let (surge, max_unavailable) = surge_and_unavailable(d);
    let mut live: Vec<&ReplicaSet> = owned
        .iter()
        .copied()
        .filter(|rs| rs.metadata.deletion_timestamp.is_none())
        .collect();
    live.sort_by_key(|rs| {
        (
            rs.metadata.creation_timestamp.as_ref().map(seconds),
            rs.metadata.name.clone(),
        )
    });
    let new_rs = live
        .iter()
        .copied()
        .find(|rs| {
            rs.spec
                .template
                .as_ref()
                .is_some_and(|t| equal_ignoring_hash(t, &d.spec.template))
        })
        .or_else(|| {
            live.iter().copied().find(|rs| {
                rs.metadata.labels.as_ref().and_then(|l| l.get(HASH_LABEL)) == Some(&hash)
            })
        });
    let old: Vec<&ReplicaSet> = live
        .iter()
        .copied()
        .filter(|rs| new_rs.is_none_or(|n| n.metadata.uid != rs.metadata.uid))
        .collect();
    let max_old_revision = old
        .iter()
        .map(|rs| revision_of(&rs.metadata))
        .max()
        .unwrap_or(0);
    let paused = d.spec.paused == Some(true);
    let mut actions = Vec::new();
    let mut progressing: Option<(&str, String)> = None;
    let old_replicas: i32 = old.iter().map(|rs| replicas_of(rs)).sum();
    let old_pods: i32 = old.iter().map(|rs| status_replicas(rs)).sum();

    match new_rs {
        None if !paused => {
            let revision = (max_old_revision + 1).to_string();
            let initial = if is_recreate(d) {
                if old_replicas > 0 || old_pods > 0 {
                    0
                } else {
                    replicas
                }
            } else {
                let current: i32 = live.iter().map(|rs| replicas_of(rs)).sum();
                (replicas + surge - current).clamp(0, replicas)
            };
            let rs_name = format!("{name}-{hash}");
            actions.push(Action::CreateReplicaSet(Box::new(new_replica_set(
                d, &rs_name, &hash, &revision, initial, surge,
            ))));
            if revision_of(&d.metadata).to_string() != revision {
                actions.push(Action::SetRevision(revision));
            }
            progressing = Some((
                "NewReplicaSetCreated",
                format!("Created new replica set \"{rs_name}\""),
            ));
            // Old ReplicaSets of a Recreate rollout go down at once.
            if is_recreate(d) {
                for rs in old.iter().filter(|rs| replicas_of(rs) > 0) {
                    actions.push(scale(rs, 0));
                }
            }
        }
        None => {}
        Some(new_rs) => {
            let rs_name = new_rs.metadata.name.clone().unwrap_or_default();
            let revision = revision_of(&new_rs.metadata);
            let wanted_revision = if revision <= max_old_revision {
                // A rollback to an older template: it becomes the newest revision.
                max_old_revision + 1
            } else {
                revision
            };
            let mut annotations = BTreeMap::new();
            if wanted_revision != revision {
                annotations.insert(REVISION.to_string(), wanted_revision.to_string());
            }
            if revision_of(&d.metadata) != wanted_revision {
                actions.push(Action::SetRevision(wanted_revision.to_string()));
            }
            let new_replicas = replicas_of(new_rs);
            let mut target = new_replicas;
            let mut old_targets: Vec<(&ReplicaSet, i32)> = Vec::new();
            if !paused {
                if is_recreate(d) {
                    if old_replicas > 0 {
                        old_targets = old.iter().map(|rs| (*rs, 0)).collect();
                    } else if old_pods == 0 {
                        target = replicas;
                    }
                } else if new_replicas > replicas {
                    target = replicas;
                } else if new_replicas < replicas {
                    let current: i32 = live.iter().map(|rs| replicas_of(rs)).sum();
                    let room = replicas + surge - current;
                    if room > 0 {
                        target = new_replicas + room.min(replicas - new_replicas);
                    }
                }
                if !is_recreate(d) && target == new_replicas && old_replicas > 0 {
                    old_targets = scale_down_old(&old, new_rs, replicas, max_unavailable);
                }
            } else if new_replicas != replicas && old_replicas == 0 {
                // A paused Deployment still scales.
                target = replicas;
            }
            if target != new_replicas || !annotations.is_empty() {
                if target != new_replicas {
                    annotations.insert(DESIRED_REPLICAS.to_string(), replicas.to_string());
                    annotations.insert(MAX_REPLICAS.to_string(), (replicas + surge).to_string());
                }
                actions.push(Action::UpdateReplicaSet {
                    name: rs_name.clone(),
                    replicas: target,
                    annotations,
                });
            }
            for (rs, to) in &old_targets {
                if *to != replicas_of(rs) {
                    actions.push(scale(rs, *to));
                }
            }
            let changed = target != new_replicas || !old_targets.is_empty();
            if changed {
                progressing = Some((
                    "ReplicaSetUpdated",
                    format!("ReplicaSet \"{rs_name}\" is progressing."),
                ));
            }
            // Revision history: old, empty ReplicaSets beyond the limit go, oldest first.
            let limit = d.spec.revision_history_limit.unwrap_or(10).max(0) as usize;
            let mut empty: Vec<&ReplicaSet> = old
                .iter()
                .copied()
                .filter(|rs| replicas_of(rs) == 0 && status_replicas(rs) == 0)
                .collect();
            if empty.len() > limit {
                empty.sort_by_key(|rs| revision_of(&rs.metadata));
                for rs in &empty[..empty.len() - limit] {
                    actions.push(Action::DeleteReplicaSet {
                        name: rs.metadata.name.clone().unwrap_or_default(),
                    });
                }
            }
        }
    }

    let status = status(d, new_rs, &live, progressing, now, max_unavailable);
    let recheck_after = progress_deadline_recheck(d, &status, now);
    Plan {
        actions,
        status,
        recheck_after,
    }
}

fn scale(rs: &ReplicaSet, replicas: i32) -> Action {
    Action::UpdateReplicaSet {
        name: rs.metadata.name.clone().unwrap_or_default(),
        replicas,
        annotations: BTreeMap::new(),
    }
}

/// The old ReplicaSets' new sizes in a rolling update: never below `replicas -
/// max_unavailable` available pods. Unhealthy old pods go first, then the oldest sets shrink.
fn scale_down_old<'a>(
    old: &[&'a ReplicaSet],
    new_rs: &ReplicaSet,
    replicas: i32,
    max_unavailable: i32,
) -> Vec<(&'a ReplicaSet, i32)> {
    let min_available = replicas - max_unavailable;
    let all_pods: i32 = old.iter().map(|rs| replicas_of(rs)).sum::<i32>() + replicas_of(new_rs);
    let new_unavailable = (replicas_of(new_rs) - available_of(new_rs)).max(0);
    let mut budget = all_pods - min_available - new_unavailable;
    let mut targets: Vec<(&ReplicaSet, i32)> =
        old.iter().map(|rs| (*rs, replicas_of(rs))).collect();
    if budget <= 0 {
        return Vec::new();
    }
    // Unhealthy replicas first: removing them costs no availability.
    for (rs, to) in targets.iter_mut() {
        let unhealthy = (*to - available_of(rs)).max(0);
        let cut = unhealthy.min(budget);
        *to -= cut;
        budget -= cut;
    }
    let available: i32 = old.iter().map(|rs| available_of(rs)).sum::<i32>() + available_of(new_rs);
    let mut can_remove = (available - min_available).max(0).min(budget);
    for (rs, to) in targets.iter_mut() {
        if can_remove == 0 {
            break;
        }
        let cut = (*to).min(can_remove).min(available_of(rs).max(0));
        *to -= cut;
        can_remove -= cut;
    }
    targets
}

fn new_replica_set(
    d: &Deployment,
    name: &str,
    hash: &str,
    revision: &str,
    replicas: i32,
    surge: i32,
) -> ReplicaSet {
    let mut template = d.spec.template.clone();
    let template_meta = template.metadata.get_or_insert_with(Default::default);
    template_meta
        .labels
        .get_or_insert_with(Default::default)
        .insert(HASH_LABEL.into(), hash.into());
    let mut selector = d.spec.selector.clone();
    selector
        .match_labels
        .get_or_insert_with(Default::default)
        .insert(HASH_LABEL.into(), hash.into());
    let mut labels = template_meta.labels.clone().unwrap_or_default();
    labels.insert(HASH_LABEL.into(), hash.into());
    let mut annotations: BTreeMap<String, String> = d
        .metadata
        .annotations
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| !NOT_COPIED.contains(&k.as_str()))
        .collect();
    let desired = d.spec.replicas.unwrap_or(1);
    annotations.insert(REVISION.into(), revision.into());
    annotations.insert(DESIRED_REPLICAS.into(), desired.to_string());
    annotations.insert(MAX_REPLICAS.into(), (desired + surge).to_string());
    ReplicaSet {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: d.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: Some(annotations),
            owner_references: Some(vec![controller_ref("apps/v1", "Deployment", &d.metadata)]),
            ..Default::default()
        },
        spec: ReplicaSetSpec {
            replicas: Some(replicas),
            min_ready_seconds: d.spec.min_ready_seconds,
            selector,
            template: Some(template),
        },
        status: None,
    }
}

fn condition<'a>(status: &'a DeploymentStatus, kind: &str) -> Option<&'a DeploymentCondition> {
    status
        .conditions
        .as_deref()?
        .iter()
        .find(|c| c.type_.as_deref() == Some(kind))
}

/// Sets a condition; times move only when the status/reason changes (or `touch`).
fn set_condition(
    conditions: &mut Vec<DeploymentCondition>,
    kind: &str,
    status: &str,
    reason: &str,
    message: String,
    now: i64,
    touch: bool,
) {
    let now = time_at(now);
    match conditions
        .iter_mut()
        .find(|c| c.type_.as_deref() == Some(kind))
    {
        Some(c) => {
            let changed_status = c.status.as_deref() != Some(status);
            let changed = changed_status || c.reason.as_deref() != Some(reason);
            if changed_status {
                c.last_transition_time = Some(now.clone());
            }
            if changed || touch {
                c.last_update_time = Some(now);
            }
            c.status = Some(status.into());
            c.reason = Some(reason.into());
            c.message = Some(message);
        }
        None => conditions.push(DeploymentCondition {
            type_: Some(kind.into()),
            status: Some(status.into()),
            reason: Some(reason.into()),
            message: Some(message),
            last_transition_time: Some(now.clone()),
            last_update_time: Some(now),
        }),
    }
}

fn status(
    d: &Deployment,
    new_rs: Option<&ReplicaSet>,
    live: &[&ReplicaSet],
    progressing: Option<(&str, String)>,
    now: i64,
    max_unavailable: i32,
) -> DeploymentStatus {
    let previous = d.status.clone().unwrap_or_default();
    let replicas = d.spec.replicas.unwrap_or(1).max(0);
    let total: i32 = live.iter().map(|rs| status_replicas(rs)).sum();
    let ready: i32 = live
        .iter()
        .map(|rs| {
            rs.status
                .as_ref()
                .and_then(|s| s.ready_replicas)
                .unwrap_or(0)
        })
        .sum();
    let available: i32 = live.iter().map(|rs| available_of(rs)).sum();
    let updated = new_rs.map(status_replicas).unwrap_or(0);
    let mut status = DeploymentStatus {
        replicas: Some(total),
        updated_replicas: Some(updated),
        ready_replicas: Some(ready),
        available_replicas: Some(available),
        unavailable_replicas: Some((replicas - available).max(0)),
        observed_generation: d.metadata.generation,
        collision_count: previous.collision_count,
        conditions: previous.conditions.clone(),
        terminating_replicas: None,
    };
    let mut conditions = status.conditions.take().unwrap_or_default();
    let min_available = if is_recreate(d) {
        replicas
    } else {
        replicas - max_unavailable
    };
    if available >= min_available {
        set_condition(
            &mut conditions,
            "Available",
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.".into(),
            now,
            false,
        );
    } else {
        set_condition(
            &mut conditions,
            "Available",
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.".into(),
            now,
            false,
        );
    }
    let rs_name = new_rs
        .and_then(|rs| rs.metadata.name.clone())
        .unwrap_or_default();
    let complete = new_rs.is_some()
        && updated == replicas
        && total == replicas
        && available >= replicas
        && new_rs.is_some_and(|rs| replicas_of(rs) == replicas);
    let progressed = previous.updated_replicas != status.updated_replicas
        || previous.available_replicas != status.available_replicas
        || previous.ready_replicas != status.ready_replicas
        || previous.replicas != status.replicas;
    if complete {
        set_condition(
            &mut conditions,
            "Progressing",
            "True",
            "NewReplicaSetAvailable",
            format!("ReplicaSet \"{rs_name}\" has successfully progressed."),
            now,
            false,
        );
    } else if let Some((reason, message)) = progressing {
        set_condition(
            &mut conditions,
            "Progressing",
            "True",
            reason,
            message,
            now,
            true,
        );
    } else if d.spec.paused == Some(true) {
        set_condition(
            &mut conditions,
            "Progressing",
            "Unknown",
            "DeploymentPaused",
            "Deployment is paused".into(),
            now,
            false,
        );
    } else if progressed && new_rs.is_some() {
        set_condition(
            &mut conditions,
            "Progressing",
            "True",
            "ReplicaSetUpdated",
            format!("ReplicaSet \"{rs_name}\" is progressing."),
            now,
            true,
        );
    } else {
        let current = conditions
            .iter()
            .find(|c| c.type_.as_deref() == Some("Progressing"))
            .cloned();
        match current {
            None if new_rs.is_some() => set_condition(
                &mut conditions,
                "Progressing",
                "True",
                "FoundNewReplicaSet",
                format!("Found new replica set \"{rs_name}\""),
                now,
                false,
            ),
            Some(c)
                if c.reason.as_deref() != Some("NewReplicaSetAvailable")
                    && c.status.as_deref() == Some("True") =>
            {
                let deadline = i64::from(d.spec.progress_deadline_seconds.unwrap_or(600));
                let since = c.last_update_time.as_ref().map(seconds).unwrap_or(now);
                if since + deadline < now {
                    set_condition(
                        &mut conditions,
                        "Progressing",
                        "False",
                        "ProgressDeadlineExceeded",
                        format!("ReplicaSet \"{rs_name}\" has timed out progressing."),
                        now,
                        false,
                    );
                }
            }
            _ => {}
        }
    }
    status.conditions = Some(conditions);
    status
}

/// When to look at an unfinished rollout again for its progress deadline.
fn progress_deadline_recheck(
    d: &Deployment,
    status: &DeploymentStatus,
    now: i64,
) -> Option<Duration> {
    let c = condition(status, "Progressing")?;
    if c.status.as_deref() != Some("True") || c.reason.as_deref() == Some("NewReplicaSetAvailable")
    {
        return None;
    }
    let deadline = i64::from(d.spec.progress_deadline_seconds.unwrap_or(600));
    let since = c.last_update_time.as_ref().map(seconds).unwrap_or(now);
    Some(Duration::from_secs(
        (since + deadline - now).max(1) as u64 + 1,
    ))
}

fn replicasets() -> &'static ResourceInfo {
    resources::find("apps", "v1", "replicasets").expect("replicasets")
}

fn deployments() -> &'static ResourceInfo {
    resources::find("apps", "v1", "deployments").expect("deployments")
}

/// The Deployment controller's reconciler.
pub struct DeploymentController {
    client: Client,
    events: Recorder,
    deployments: Store<Deployment>,
    replicasets: Store<ReplicaSet>,
}

impl DeploymentController {
    pub fn new(
        client: Client,
        deployments: &mut Informer<Deployment>,
        replicasets: &mut Informer<ReplicaSet>,
        events: EventSink,
    ) -> (Arc<DeploymentController>, WorkQueue) {
        let queue = WorkQueue::new(Duration::from_millis(5), Duration::from_secs(60));
        let controller = Arc::new(DeploymentController {
            client,
            events: Recorder::new(events, "deployment-controller"),
            deployments: deployments.store(),
            replicasets: replicasets.store(),
        });
        tokio::spawn(feed(
            deployments.subscribe(),
            replicasets.subscribe(),
            queue.clone(),
        ));
        (controller, queue)
    }
}

async fn feed(
    mut deployments: mpsc::Receiver<InformerEvent<Deployment>>,
    mut replicasets: mpsc::Receiver<InformerEvent<ReplicaSet>>,
    queue: WorkQueue,
) {
    let owner = |rs: &ReplicaSet| {
        controller_of(&rs.metadata)
            .filter(|r| r.kind == "Deployment")
            .map(|r| api::informer::key(rs.metadata.namespace.as_deref(), &r.name))
    };
    loop {
        tokio::select! {
            event = deployments.recv() => match event {
                Some(InformerEvent::Added(d)) | Some(InformerEvent::Updated { new: d, .. }) | Some(InformerEvent::Deleted(d)) => {
                    queue.add(&key_of(&d.metadata))
                }
                None => return,
            },
            event = replicasets.recv() => match event {
                Some(InformerEvent::Added(rs)) | Some(InformerEvent::Deleted(rs)) => {
                    if let Some(key) = owner(&rs) {
                        queue.add(&key);
                    }
                }
                Some(InformerEvent::Updated { old, new }) => {
                    for key in [owner(&old), owner(&new)].into_iter().flatten() {
                        queue.add(&key);
                    }
                }
                None => return,
            },
        }
    }
}

impl crate::manager::HasCaches for DeploymentController {
    fn caches_synced(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send>> {
        let (a, b) = (self.deployments.clone(), self.replicasets.clone());
        Box::pin(async move { a.wait_synced().await && b.wait_synced().await })
    }
}

impl Reconciler for DeploymentController {
    async fn reconcile(&self, key: &str) -> Result<Outcome, ReconcileError> {
        let Some(d) = self.deployments.get(key) else {
            return Ok(Outcome::Done);
        };
        if d.metadata.deletion_timestamp.is_some() {
            return Ok(Outcome::Done);
        }
        let (namespace, name) = split_key(key);
        let namespace = namespace.unwrap_or_default();
        let uid = d.metadata.uid.clone().unwrap_or_default();
        let all = self.replicasets.list();
        let owned: Vec<&ReplicaSet> = all
            .iter()
            .map(|rs| rs.as_ref())
            .filter(|rs| {
                rs.metadata.namespace.as_deref() == Some(namespace)
                    && controlled_by(&rs.metadata, &uid)
            })
            .collect();
        let plan = plan(&d, &owned, now_seconds());
        let object = reference("apps/v1", "Deployment", &d.metadata);
        let scaled = |rs_name: &str, from: i32, to: i32| {
            let direction = if from < to { "up" } else { "down" };
            let message = format!("Scaled {direction} replica set {rs_name} from {from} to {to}");
            self.events
                .record(object.clone(), false, "ScalingReplicaSet", &message);
        };
        for action in &plan.actions {
            debug!(?action, "deployment action");
            match action {
                Action::CreateReplicaSet(rs) => {
                    let rs_name = rs.metadata.name.clone().unwrap_or_default();
                    match self
                        .client
                        .create::<ReplicaSet, ReplicaSet>(replicasets(), Some(namespace), rs)
                        .await
                    {
                        Ok(_) => {
                            info!(replicaset = %rs_name, "created a new replica set");
                            let replicas = replicas_of(rs);
                            if replicas > 0 {
                                scaled(&rs_name, 0, replicas);
                            }
                        }
                        Err(e) if e.is_already_exists() => {
                            // Ours but not cached yet, or a hash collision.
                            let existing: ReplicaSet = self
                                .client
                                .get(replicasets(), Some(namespace), &rs_name)
                                .await
                                .map_err(ReconcileError::api("get replica set"))?;
                            let same = controlled_by(&existing.metadata, &uid)
                                && existing
                                    .spec
                                    .template
                                    .as_ref()
                                    .is_some_and(|t| equal_ignoring_hash(t, &d.spec.template));
                            if !same {
                                let count = d
                                    .status
                                    .as_ref()
                                    .and_then(|s| s.collision_count)
                                    .unwrap_or(0)
                                    + 1;
                                let patch =
                                    Patch::Merge(json!({"status": {"collisionCount": count}}));
                                self.client
                                    .patch_status::<Value>(
                                        deployments(),
                                        Some(namespace),
                                        name,
                                        &patch,
                                    )
                                    .await
                                    .map_err(ReconcileError::api("record a hash collision"))?;
                            }
                            return Ok(Outcome::RequeueAfter(Duration::from_millis(200)));
                        }
                        Err(e) => return Err(ReconcileError::api("create replica set")(e)),
                    }
                }
                Action::UpdateReplicaSet {
                    name: rs_name,
                    replicas,
                    annotations,
                } => {
                    let mut patch = json!({"spec": {"replicas": replicas}});
                    if !annotations.is_empty() {
                        patch["metadata"] = json!({ "annotations": annotations });
                    }
                    self.client
                        .patch::<Value>(
                            replicasets(),
                            Some(namespace),
                            rs_name,
                            &Patch::Merge(patch),
                        )
                        .await
                        .map_err(ReconcileError::api(format!("scale replica set {rs_name}")))?;
                    let before = owned
                        .iter()
                        .find(|rs| rs.metadata.name.as_deref() == Some(rs_name.as_str()))
                        .map(|rs| replicas_of(rs));
                    if let Some(from) = before.filter(|from| from != replicas) {
                        scaled(rs_name, from, *replicas);
                    }
                }
                Action::DeleteReplicaSet { name: rs_name } => {
                    match self
                        .client
                        .delete::<Value>(
                            replicasets(),
                            Some(namespace),
                            rs_name,
                            &DeleteParams::default(),
                        )
                        .await
                    {
                        Ok(_) => {}
                        Err(e) if e.is_not_found() => {}
                        Err(e) => return Err(ReconcileError::api("delete old replica set")(e)),
                    }
                }
                Action::SetRevision(revision) => {
                    let patch = json!({"metadata": {"annotations": {REVISION: revision}}});
                    self.client
                        .patch::<Value>(deployments(), Some(namespace), name, &Patch::Merge(patch))
                        .await
                        .map_err(ReconcileError::api("record the revision"))?;
                }
            }
        }
        if d.status.as_ref() != Some(&plan.status) {
            let patch = Patch::Merge(json!({ "status": plan.status }));
            match self
                .client
                .patch_status::<Value>(deployments(), Some(namespace), name, &patch)
                .await
            {
                Ok(_) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(ReconcileError::api("update status")(e)),
            }
        }
        Ok(match plan.recheck_after {
            Some(after) => Outcome::RequeueAfter(after),
            None => Outcome::Done,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_objects::{deployment, with_status};
    use k8s_openapi::api::apps::v1::DeploymentStrategy;

    /// The ReplicaSet the Deployment would create for its current template.
    fn rs_for(d: &Deployment, replicas: i32, revision: i64) -> ReplicaSet {
        let hash = template_hash(&d.spec.template, None);
        let mut rs = new_replica_set(
            d,
            &format!("web-{hash}"),
            &hash,
            &revision.to_string(),
            replicas,
            1,
        );
        rs.metadata.uid = Some(format!("uid-{hash}"));
        rs.metadata.creation_timestamp = Some(time_at(1000 + revision));
        rs
    }

    fn replicas_of_action(plan: &Plan, name: &str) -> Option<i32> {
        plan.actions.iter().find_map(|a| match a {
            Action::UpdateReplicaSet {
                name: n, replicas, ..
            } if n == name => Some(*replicas),
            _ => None,
        })
    }

    fn progressing(plan: &Plan) -> String {
        condition(&plan.status, "Progressing")
            .and_then(|c| c.reason.clone())
            .unwrap_or_default()
    }

    #[test]
    fn the_hash_ignores_its_own_label_and_follows_the_template() {
        let d = deployment("web", 3, "nginx:1.27");
        let hash = template_hash(&d.spec.template, None);
        let rs = rs_for(&d, 3, 1);
        let rs_template = rs.spec.template.as_ref().expect("template");
        assert_eq!(template_hash(rs_template, None), hash);
        assert!(equal_ignoring_hash(rs_template, &d.spec.template));
        let other = deployment("web", 3, "nginx:1.28");
        assert_ne!(template_hash(&other.spec.template, None), hash);
        assert_ne!(template_hash(&d.spec.template, Some(1)), hash);
        assert!(hash
            .chars()
            .all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)));
    }

    #[test]
    fn a_new_deployment_gets_its_first_replica_set() {
        let d = deployment("web", 3, "nginx:1.27");
        let plan = plan(&d, &[], 2000);
        let Action::CreateReplicaSet(rs) = &plan.actions[0] else {
            panic!("{:?}", plan.actions);
        };
        assert_eq!(rs.spec.replicas, Some(3));
        assert_eq!(revision_of(&rs.metadata), 1);
        let hash = template_hash(&d.spec.template, None);
        assert_eq!(
            rs.metadata.name.as_deref(),
            Some(format!("web-{hash}").as_str())
        );
        assert_eq!(
            rs.spec
                .selector
                .match_labels
                .as_ref()
                .and_then(|l| l.get(HASH_LABEL)),
            Some(&hash)
        );
        assert!(plan.actions.contains(&Action::SetRevision("1".into())));
        assert_eq!(progressing(&plan), "NewReplicaSetCreated");
    }

    #[test]
    fn a_rolling_update_stays_within_surge_and_unavailability() {
        let v1 = deployment("web", 4, "nginx:1.27");
        let old = with_status(rs_for(&v1, 4, 1), 4, 4);
        let old_name = old.metadata.name.clone().expect("name");
        let mut v2 = deployment("web", 4, "nginx:1.28");
        v2.metadata.annotations = Some([(REVISION.to_string(), "1".to_string())].into());
        // maxSurge 25% of 4 = 1: the new set starts with one pod.
        let plan1 = plan(&v2, &[&old], 2000);
        let Action::CreateReplicaSet(new) = &plan1.actions[0] else {
            panic!("{:?}", plan1.actions);
        };
        assert_eq!(new.spec.replicas, Some(1));
        assert_eq!(revision_of(&new.metadata), 2);
        // Its pod is not available: maxUnavailable 1 lets one old pod go.
        let new = rs_for(&v2, 1, 2);
        let new_name = new.metadata.name.clone().expect("name");
        let new_starting = with_status(new.clone(), 1, 0);
        let plan2 = plan(&v2, &[&old, &new_starting], 2001);
        assert_eq!(replicas_of_action(&plan2, &old_name), Some(3));
        assert_eq!(replicas_of_action(&plan2, &new_name), None);
        // After that, surge room again: the new set grows.
        let old3 = with_status(rs_for(&v1, 3, 1), 3, 3);
        let plan3 = plan(&v2, &[&old3, &new_starting], 2002);
        assert_eq!(replicas_of_action(&plan3, &new_name), Some(2));
        // The end: everything new and available is complete.
        let old0 = with_status(rs_for(&v1, 0, 1), 0, 0);
        let done = with_status(rs_for(&v2, 4, 2), 4, 4);
        let mut v2_seen = v2.clone();
        v2_seen.metadata.annotations = Some([(REVISION.to_string(), "2".to_string())].into());
        let plan4 = plan(&v2_seen, &[&old0, &done], 2003);
        assert!(plan4.actions.is_empty(), "{:?}", plan4.actions);
        assert_eq!(progressing(&plan4), "NewReplicaSetAvailable");
        assert_eq!(plan4.status.updated_replicas, Some(4));
        assert_eq!(plan4.status.available_replicas, Some(4));
    }

    #[test]
    fn rolling_back_makes_the_old_set_the_newest_revision() {
        let v1 = deployment("web", 2, "nginx:1.27");
        let v2 = deployment("web", 2, "nginx:1.28");
        let rs1 = with_status(rs_for(&v1, 0, 1), 0, 0);
        let rs2 = with_status(rs_for(&v2, 2, 2), 2, 2);
        let mut back = v1.clone();
        back.metadata.annotations = Some([(REVISION.to_string(), "2".to_string())].into());
        let plan = plan(&back, &[&rs1, &rs2], 2000);
        let rs1_name = rs1.metadata.name.clone().expect("name");
        let update = plan.actions.iter().find_map(|a| match a {
            Action::UpdateReplicaSet {
                name,
                replicas,
                annotations,
            } if *name == rs1_name => Some((*replicas, annotations.get(REVISION).cloned())),
            _ => None,
        });
        assert_eq!(update, Some((1, Some("3".into()))));
        assert!(plan.actions.contains(&Action::SetRevision("3".into())));
    }

    #[test]
    fn recreate_scales_the_old_sets_down_first() {
        let v1 = deployment("web", 3, "nginx:1.27");
        let mut v2 = deployment("web", 3, "nginx:1.28");
        v2.spec.strategy = Some(DeploymentStrategy {
            type_: Some("Recreate".into()),
            rolling_update: None,
        });
        let old = with_status(rs_for(&v1, 3, 1), 3, 3);
        let plan1 = plan(&v2, &[&old], 2000);
        let Action::CreateReplicaSet(new) = &plan1.actions[0] else {
            panic!("{:?}", plan1.actions);
        };
        assert_eq!(new.spec.replicas, Some(0));
        assert_eq!(
            replicas_of_action(&plan1, old.metadata.name.as_deref().unwrap_or("")),
            Some(0)
        );
        // Old pods still terminating: the new set waits.
        let old_going = with_status(rs_for(&v1, 0, 1), 2, 0);
        let new = rs_for(&v2, 0, 2);
        let new_name = new.metadata.name.clone().expect("name");
        assert_eq!(
            replicas_of_action(&plan(&v2, &[&old_going, &new], 2001), &new_name),
            None
        );
        let old_gone = with_status(rs_for(&v1, 0, 1), 0, 0);
        assert_eq!(
            replicas_of_action(&plan(&v2, &[&old_gone, &new], 2002), &new_name),
            Some(3)
        );
    }

    #[test]
    fn scaling_changes_only_the_new_set() {
        let d = deployment("web", 10, "nginx:1.27");
        let rs = with_status(rs_for(&d, 3, 1), 3, 3);
        let name = rs.metadata.name.clone().expect("name");
        assert_eq!(replicas_of_action(&plan(&d, &[&rs], 2000), &name), Some(10));
        let down = deployment("web", 3, "nginx:1.27");
        let big = with_status(rs_for(&d, 10, 1), 10, 10);
        assert_eq!(
            replicas_of_action(&plan(&down, &[&big], 2000), &name),
            Some(3)
        );
    }

    #[test]
    fn old_empty_sets_beyond_the_history_limit_are_deleted() {
        let mut d = deployment("web", 1, "nginx:1.30");
        d.spec.revision_history_limit = Some(1);
        let old: Vec<ReplicaSet> = (1..=3)
            .map(|i| {
                with_status(
                    rs_for(&deployment("web", 1, &format!("nginx:1.2{i}")), 0, i),
                    0,
                    0,
                )
            })
            .collect();
        let current = with_status(rs_for(&d, 1, 4), 1, 1);
        let mut all: Vec<&ReplicaSet> = old.iter().collect();
        all.push(&current);
        let plan = plan(&d, &all, 2000);
        let deleted: Vec<&str> = plan
            .actions
            .iter()
            .filter_map(|a| match a {
                Action::DeleteReplicaSet { name } => Some(name.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(
            deleted,
            [
                old[0].metadata.name.as_deref().unwrap_or(""),
                old[1].metadata.name.as_deref().unwrap_or("")
            ]
        );
    }

    #[test]
    fn surge_and_unavailability_resolve_like_kubernetes() {
        let d = deployment("web", 10, "x");
        assert_eq!(surge_and_unavailable(&d), (3, 2));
        let mut zero = deployment("web", 3, "x");
        zero.spec.strategy = Some(DeploymentStrategy {
            type_: Some("RollingUpdate".into()),
            rolling_update: Some(k8s_openapi::api::apps::v1::RollingUpdateDeployment {
                max_surge: Some(IntOrString::Int(0)),
                max_unavailable: Some(IntOrString::String("0%".into())),
            }),
        });
        assert_eq!(surge_and_unavailable(&zero), (0, 1));
    }
}
