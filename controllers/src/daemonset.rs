//! The DaemonSet controller: one pod on every node the template may run on (its nodeSelector,
//! required node affinity and tolerations against the node's taints), none elsewhere, and
//! RollingUpdate (maxUnavailable or maxSurge) when the template changes. As in Kubernetes, a
//! daemon pod is not bound by the controller: it carries a required node affinity on
//! `metadata.name` and the default scheduler places it, and it tolerates the taints a node
//! gets when it is not ready, unreachable, under pressure or cordoned.
//!
//! Pods say which template they were made from with the `controller-revision-hash` label (a
//! hash of the template and `collisionCount`) and `pod-template-generation` (the DaemonSet's
//! template generation). Each template is kept as a ControllerRevision `NAME-HASH` (see
//! [`crate::revisions`]), so `kubectl rollout history/undo daemonset` work; those no pod uses
//! are kept up to `revisionHistoryLimit`.
//! A pod whose node is gone is deleted at once (what the pod garbage collector does for such
//! pods in Kubernetes).
//!
//! The decision is the pure [`plan`]; [`DaemonSetController`] does the I/O.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use api::client::Client;
use api::event_sink::EventSink;
use api::informer::{Informer, InformerEvent, Store};
use api::resources;
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet, DaemonSetStatus};
use k8s_openapi::api::core::v1::{
    Affinity, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod,
    PodSpec, Toleration,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::deployment::template_hash;
use crate::events::{reference, Recorder};
use crate::expectations::Expectations;
use crate::node_lifecycle::tolerates;
use crate::owned_pods;
use crate::owners::{controller_ref, key_of, now_seconds, seconds, split_key};
use crate::pod_control::PodControl;
use crate::pods;
use crate::queue::WorkQueue;
use crate::revisions::{self, beyond_limit, Owner, Resolved};
use crate::worker::{outcome, write_status, Outcome, ReconcileError, Reconciler};

/// The label naming the template a daemon pod was made from.
/// At most this many daemon pods are created, and this many deleted, per sync (the daemon
/// set controller's burstReplicas).
pub const BURST: usize = 250;

pub const REVISION_HASH_LABEL: &str = "controller-revision-hash";
/// The label holding the DaemonSet's template generation when the pod was made.
pub const TEMPLATE_GENERATION_LABEL: &str = "pod-template-generation";
/// Where apps/v1 keeps a DaemonSet's template generation.
pub const TEMPLATE_GENERATION_ANNOTATION: &str = "deprecated.daemonset.template.generation";

/// What one sync of a DaemonSet should do.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The template's revision (to create or renumber when needed); its hash labels new pods.
    pub revision: Resolved,
    /// Revisions beyond `revisionHistoryLimit` that no pod uses.
    pub delete_revisions: Vec<String>,
    /// Nodes to create a daemon pod for.
    pub create: Vec<String>,
    /// Names of pods to delete.
    pub delete: Vec<String>,
    /// (pod, node) of each Failed pod among them, which Kubernetes reports in an event.
    pub failed: Vec<(String, String)>,
    pub status: DaemonSetStatus,
    /// Look again then (a pod becoming available after minReadySeconds).
    pub recheck_after: Option<Duration>,
}

/// The tolerations Kubernetes adds to every daemon pod, so that a node's condition taints never
/// keep or drive its daemons off it.
pub fn add_daemon_tolerations(spec: &mut PodSpec) {
    let mut wanted = vec![
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
        ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/pid-pressure", "NoSchedule"),
        ("node.kubernetes.io/unschedulable", "NoSchedule"),
    ];
    if spec.host_network == Some(true) {
        wanted.push(("node.kubernetes.io/network-unavailable", "NoSchedule"));
    }
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    for (key, effect) in wanted {
        let toleration = Toleration {
            key: Some(key.into()),
            operator: Some("Exists".into()),
            effect: Some(effect.into()),
            ..Default::default()
        };
        // As AddOrUpdateTolerationInPod: one with the same key, operator and effect is replaced.
        match tolerations.iter_mut().find(|t| {
            t.key == toleration.key
                && t.operator == toleration.operator
                && t.effect == toleration.effect
        }) {
            Some(existing) => *existing = toleration,
            None => tolerations.push(toleration),
        }
    }
}

/// The node a daemon pod is for: its nodeName once bound, else the `metadata.name` its required
/// node affinity names.
pub fn target_node(pod: &Pod) -> Option<String> {
    if let Some(node) = pods::node_name(pod) {
        return Some(node);
    }
    let terms = &pod
        .spec
        .as_ref()?
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    terms.iter().find_map(|term| {
        term.match_fields.iter().flatten().find_map(|r| {
            (r.key == "metadata.name" && r.operator == "In")
                .then(|| r.values.as_ref()?.first().cloned())
                .flatten()
        })
    })
}

fn requirement_matches(r: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    let number = |s: &str| s.parse::<i64>().ok();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|w| w == v)),
        "NotIn" => value.is_none_or(|v| values.iter().all(|w| w != v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(have), Some(bound)) = (
                value.and_then(number),
                values.first().and_then(|v| number(v)),
            ) else {
                return false;
            };
            if r.operator == "Gt" {
                have > bound
            } else {
                have < bound
            }
        }
        _ => false,
    }
}

/// A node selector term: every label and field requirement holds (an empty term matches
/// nothing).
fn term_matches(term: &NodeSelectorTerm, node: &Node) -> bool {
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let name = node.metadata.name.as_deref().unwrap_or_default();
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    expressions
        .iter()
        .all(|r| requirement_matches(r, labels.get(&r.key).map(String::as_str)))
        && fields.iter().all(|r| {
            let value = (r.key == "metadata.name").then_some(name);
            requirement_matches(r, value)
        })
}

/// `NodeShouldRunDaemonPod`: (should run, should continue running). A pod whose nodeName,
/// nodeSelector or required node affinity excludes the node neither runs nor stays; one kept
/// off by a taint it does not tolerate stays unless the taint is NoExecute.
pub fn node_should_run(spec: &PodSpec, node: &Node) -> (bool, bool) {
    let name = node.metadata.name.as_deref().unwrap_or_default();
    if spec
        .node_name
        .as_deref()
        .is_some_and(|n| !n.is_empty() && n != name)
    {
        return (false, false);
    }
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let selected = spec
        .node_selector
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let affinity = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .is_none_or(|s| s.node_selector_terms.iter().any(|t| term_matches(t, node)));
    if !selected || !affinity {
        return (false, false);
    }
    let tolerations = spec.tolerations.as_deref().unwrap_or_default();
    let untolerated = |effects: &[&str]| {
        node.spec
            .as_ref()
            .and_then(|s| s.taints.as_deref())
            .unwrap_or_default()
            .iter()
            .filter(|t| effects.contains(&t.effect.as_str()))
            .any(|t| !tolerations.iter().any(|tol| tolerates(tol, t)))
    };
    if untolerated(&["NoSchedule", "NoExecute"]) {
        return (false, !untolerated(&["NoExecute"]));
    }
    (true, true)
}

/// The DaemonSet's template generation (its annotation), if it has a valid one.
pub fn template_generation(ds: &DaemonSet) -> Option<i64> {
    ds.metadata
        .annotations
        .as_ref()?
        .get(TEMPLATE_GENERATION_ANNOTATION)?
        .parse()
        .ok()
}

/// `IsPodUpdated`: made from the current template (by hash, or by template generation).
fn is_updated(pod: &Pod, hash: &str, generation: Option<i64>) -> bool {
    let labels = pod.metadata.labels.as_ref();
    let label = |key: &str| labels.and_then(|l| l.get(key)).map(String::as_str);
    label(REVISION_HASH_LABEL) == Some(hash)
        || generation.is_some_and(|g| label(TEMPLATE_GENERATION_LABEL) == Some(&g.to_string()))
}

/// The template's pod spec with the daemon tolerations: what each node is judged against.
fn daemon_pod_spec(ds: &DaemonSet) -> PodSpec {
    let mut spec = Some(&ds.spec)
        .and_then(|s| s.template.spec.clone())
        .unwrap_or_default();
    add_daemon_tolerations(&mut spec);
    spec
}

/// The hash that labels pods of the DaemonSet's current template (before any collision).
pub fn current_hash(ds: &DaemonSet) -> String {
    template_hash(
        &ds.spec.template,
        ds.status.as_ref().and_then(|s| s.collision_count),
    )
}

/// The DaemonSet's current template among its ControllerRevisions: `NAME-HASH`, the hash that
/// of the template and the collision count (as the pods' `controller-revision-hash`), labelled
/// with it.
pub fn resolve_revision(ds: &DaemonSet, revisions: &[&ControllerRevision]) -> Resolved {
    let recorded = ds.status.as_ref().and_then(|s| s.collision_count);
    let owner = Owner {
        kind: "DaemonSet",
        meta: &ds.metadata,
        template: &ds.spec.template,
        hash_label: REVISION_HASH_LABEL,
    };
    owner.resolve(revisions, recorded.unwrap_or(0), |count| {
        // No recorded count hashes nothing for it, as Kubernetes' ComputeHash with nil.
        let count = (recorded.is_some() || count > 0).then_some(count);
        template_hash(&ds.spec.template, count)
    })
}

/// The daemon pod for `node`: the template, the two labels, the daemon tolerations, and a
/// required node affinity on the node's name in place of the template's required terms.
pub fn new_pod(ds: &DaemonSet, node: &str, hash: &str) -> Pod {
    let namespace = ds.metadata.namespace.as_deref().unwrap_or_default();
    let name = ds.metadata.name.as_deref().unwrap_or_default();
    let template = Some(&ds.spec)
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let generation = template_generation(ds).map(|g| g.to_string());
    let mut labels = vec![(REVISION_HASH_LABEL, hash)];
    if let Some(g) = generation.as_deref() {
        labels.push((TEMPLATE_GENERATION_LABEL, g));
    }
    let owner = controller_ref("apps/v1", "DaemonSet", &ds.metadata);
    let mut pod = pods::from_template(&template, namespace, name, owner, &labels);
    let spec = pod.spec.get_or_insert_with(PodSpec::default);
    add_daemon_tolerations(spec);
    let affinity = spec.affinity.get_or_insert_with(Affinity::default);
    let node_affinity = affinity
        .node_affinity
        .get_or_insert_with(NodeAffinity::default);
    node_affinity.required_during_scheduling_ignored_during_execution = Some(NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_fields: Some(vec![NodeSelectorRequirement {
                key: "metadata.name".into(),
                operator: "In".into(),
                values: Some(vec![node.to_string()]),
            }]),
            match_expressions: None,
        }],
    });
    pod
}

/// Scheduled pods first, then oldest first (then by name): the pod a node keeps.
fn oldest_first(pods: &mut [&Pod]) {
    pods.sort_by(|a, b| {
        let key = |p: &Pod| {
            (
                !pods::is_scheduled(p),
                p.metadata.creation_timestamp.as_ref().map(seconds),
                p.metadata.name.clone(),
            )
        };
        key(a).cmp(&key(b))
    });
}

/// maxUnavailable and maxSurge of a RollingUpdate strategy against `desired` nodes (percentages
/// round up); both zero for OnDelete. An impossible 0/0 becomes 1 unavailable.
pub fn rolling_limits(ds: &DaemonSet, desired: i32) -> (i32, i32) {
    let strategy = Some(&ds.spec).and_then(|s| s.update_strategy.as_ref());
    if strategy
        .and_then(|s| s.type_.as_deref())
        .unwrap_or("RollingUpdate")
        != "RollingUpdate"
    {
        return (0, 0);
    }
    let rolling = strategy.and_then(|s| s.rolling_update.as_ref());
    let scaled = |v: Option<&IntOrString>, default: i32| match v {
        None => default,
        Some(IntOrString::Int(n)) => *n,
        Some(IntOrString::String(s)) => {
            let percent = s.trim_end_matches('%').parse::<i64>().unwrap_or(0);
            ((percent * i64::from(desired) + 99) / 100) as i32
        }
    };
    let unavailable = scaled(rolling.and_then(|r| r.max_unavailable.as_ref()), 1);
    let surge = scaled(rolling.and_then(|r| r.max_surge.as_ref()), 0);
    if desired > 0 && unavailable == 0 && surge == 0 {
        return (1, 0);
    }
    (unavailable, surge)
}

/// Decides the pods to create and delete and the status of `ds`, given the cluster's nodes and
/// the pods `ds` controls, at `now` (seconds since the epoch).
pub fn plan(
    ds: &DaemonSet,
    nodes: &[&Node],
    owned: &[&Pod],
    revisions: &[&ControllerRevision],
    expectations_met: bool,
    now: i64,
) -> Plan {
    let revision = resolve_revision(ds, revisions);
    let hash = revision.hash.clone();
    let generation = template_generation(ds);
    let min_ready = Some(&ds.spec)
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0);
    let spec = daemon_pod_spec(ds);
    let mut by_node: HashMap<String, Vec<&Pod>> = HashMap::new();
    for pod in owned {
        // A finished pod that is already going away no longer counts for its node.
        if pods::is_terminal(pod) && pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        if let Some(node) = target_node(pod) {
            by_node.entry(node).or_default().push(pod);
        }
    }
    for pods in by_node.values_mut() {
        oldest_first(pods);
    }
    let name = |p: &Pod| p.metadata.name.clone().unwrap_or_default();
    let verdicts: BTreeMap<&str, (bool, bool)> = nodes
        .iter()
        .map(|n| {
            (
                n.metadata.name.as_deref().unwrap_or_default(),
                node_should_run(&spec, n),
            )
        })
        .collect();

    // Status, from the pods as they are.
    let recorded = ds.status.as_ref().and_then(|s| s.collision_count);
    let mut status = DaemonSetStatus {
        collision_count: recorded.or(Some(revision.collision_count).filter(|c| *c > 0)),
        conditions: ds.status.as_ref().and_then(|s| s.conditions.clone()),
        observed_generation: ds.status.as_ref().and_then(|s| s.observed_generation),
        ..Default::default()
    };
    let (mut updated, mut available) = (0, 0);
    let mut recheck_after = None;
    for (node, (should_run, _)) in &verdicts {
        let pods = by_node.get(*node).map(Vec::as_slice).unwrap_or_default();
        match (should_run, pods.first()) {
            (true, first) => {
                status.desired_number_scheduled += 1;
                let Some(pod) = first else { continue };
                status.current_number_scheduled += 1;
                if pods::is_ready(pod) {
                    status.number_ready += 1;
                    if pods::is_available(pod, min_ready, now) {
                        available += 1;
                    } else {
                        recheck_after = Some(Duration::from_secs(
                            u64::try_from(min_ready).unwrap_or(1).max(1),
                        ));
                    }
                }
                if is_updated(pod, &hash, generation) {
                    updated += 1;
                }
            }
            (false, Some(_)) => status.number_misscheduled += 1,
            (false, None) => {}
        }
    }
    let non_zero = |n: i32| (n != 0).then_some(n);
    status.updated_number_scheduled = non_zero(updated);
    status.number_available = non_zero(available);
    status.number_unavailable = non_zero(status.desired_number_scheduled - available);

    let mut create = Vec::new();
    let mut delete = Vec::new();
    let mut failed = Vec::new();
    if expectations_met {
        status.observed_generation = ds.metadata.generation;
        let surge_allowed = rolling_limits(ds, status.desired_number_scheduled).1 > 0;
        // Pods on nodes that no longer exist.
        for (node, pods) in &by_node {
            if !verdicts.contains_key(node.as_str()) {
                delete.extend(
                    pods.iter()
                        .filter(|p| p.metadata.deletion_timestamp.is_none())
                        .map(|p| name(p)),
                );
            }
        }
        for (node, (should_run, should_continue)) in &verdicts {
            let pods = by_node.get(*node).map(Vec::as_slice).unwrap_or_default();
            if *should_run && pods.is_empty() {
                create.push((*node).to_string());
            } else if *should_continue {
                let mut running = Vec::new();
                for pod in pods
                    .iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                {
                    if pods::is_terminal(pod) {
                        delete.push(name(pod));
                        if pods::phase(pod) == "Failed" {
                            failed.push((name(pod), (*node).to_string()));
                        }
                    } else {
                        running.push(*pod);
                    }
                }
                if running.len() > 1 {
                    delete.extend(keep_on_node(
                        &running,
                        &hash,
                        generation,
                        surge_allowed,
                        min_ready,
                        now,
                    ));
                }
            } else {
                delete.extend(
                    pods.iter()
                        .filter(|p| p.metadata.deletion_timestamp.is_none())
                        .map(|p| name(p)),
                );
            }
        }
        if create.is_empty() && delete.is_empty() {
            let wanted: Vec<(&str, &[&Pod])> = verdicts
                .iter()
                .filter(|(_, (run, _))| *run)
                .map(|(n, _)| (*n, by_node.get(*n).map(Vec::as_slice).unwrap_or_default()))
                .collect();
            let (unavailable, surge) = rolling_limits(ds, status.desired_number_scheduled);
            let (c, d) = rolling_update(
                &wanted,
                &hash,
                generation,
                unavailable,
                surge,
                min_ready,
                now,
            );
            create = c;
            delete = d;
        }
        delete.sort();
        delete.dedup();
        // As kube-controller-manager: at most `BURST` creations and deletions per sync; the
        // rest follow once these are observed.
        create.truncate(BURST);
        delete.truncate(BURST);
    }
    // History: revisions that no pod is from and that are not the template's, beyond the limit.
    let name = ds.metadata.name.as_deref().unwrap_or_default();
    let in_use: HashSet<String> = owned
        .iter()
        .filter_map(|p| p.metadata.labels.as_ref()?.get(REVISION_HASH_LABEL))
        .map(|h| format!("{name}-{h}"))
        .chain([revision.name.clone()])
        .collect();
    let live: HashSet<&str> = in_use.iter().map(String::as_str).collect();
    let delete_revisions = beyond_limit(revisions, &live, ds.spec.revision_history_limit);
    Plan {
        revision,
        delete_revisions,
        create,
        delete,
        failed,
        status,
        recheck_after,
    }
}

/// Which of a node's several running pods go: all but the oldest without surge; with surge, at
/// most the oldest new and the oldest old pod stay, and the old one only while the new one is
/// not yet available and the old one is ready.
fn keep_on_node(
    running: &[&Pod],
    hash: &str,
    generation: Option<i64>,
    surge: bool,
    min_ready: i32,
    now: i64,
) -> Vec<String> {
    let name = |p: &Pod| p.metadata.name.clone().unwrap_or_default();
    if !surge {
        return running[1..].iter().map(|p| name(p)).collect();
    }
    let (mut oldest_new, mut oldest_old) = (None, None);
    let mut delete = Vec::new();
    for pod in running {
        let slot = if is_updated(pod, hash, generation) {
            &mut oldest_new
        } else {
            &mut oldest_old
        };
        match slot {
            None => *slot = Some(*pod),
            Some(_) => delete.push(name(pod)),
        }
    }
    if let (Some(new), Some(old)) = (oldest_new, oldest_old) {
        if !pods::is_ready(old) || pods::is_available(new, min_ready, now) {
            delete.push(name(old));
        }
    }
    delete
}

/// One step of a rolling update over the nodes that should run the daemon (each with its pods,
/// oldest first): (nodes to surge a new pod onto, old pods to delete).
fn rolling_update(
    wanted: &[(&str, &[&Pod])],
    hash: &str,
    generation: Option<i64>,
    max_unavailable: i32,
    max_surge: i32,
    min_ready: i32,
    now: i64,
) -> (Vec<String>, Vec<String>) {
    let name = |p: &Pod| p.metadata.name.clone().unwrap_or_default();
    let mut create = Vec::new();
    let mut delete = Vec::new();
    if max_unavailable == 0 && max_surge == 0 {
        return (create, delete);
    }
    let split = |pods: &[&Pod]| -> Option<(Option<Pod>, Option<Pod>)> {
        let (mut new, mut old) = (None, None);
        for pod in pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
        {
            let slot = if is_updated(pod, hash, generation) {
                &mut new
            } else {
                &mut old
            };
            if slot.is_some() {
                return None;
            }
            *slot = Some((*pod).clone());
        }
        Some((new, old))
    };
    if max_surge == 0 {
        let (mut unavailable, mut candidates) = (0, Vec::new());
        for (_, pods) in wanted {
            match split(pods) {
                None | Some((None, None)) | Some((Some(_), Some(_))) => unavailable += 1,
                Some((Some(new), None)) => {
                    if !pods::is_available(&new, min_ready, now) {
                        unavailable += 1;
                    }
                }
                Some((None, Some(old))) => {
                    if !pods::is_available(&old, min_ready, now) {
                        delete.push(name(&old));
                        unavailable += 1;
                    } else if unavailable < max_unavailable {
                        candidates.push(name(&old));
                    }
                }
            }
        }
        let room = (max_unavailable - unavailable).clamp(0, candidates.len() as i32) as usize;
        delete.extend(candidates.into_iter().take(room));
    } else {
        let (mut surging, mut candidates) = (0, Vec::new());
        for (node, pods) in wanted {
            match split(pods) {
                None => surging += 1,
                Some((_, None)) => {}
                Some((None, Some(old))) => {
                    if !pods::is_available(&old, min_ready, now) {
                        create.push((*node).to_string());
                    } else if surging < max_surge {
                        candidates.push((*node).to_string());
                    }
                }
                Some((Some(new), Some(old))) => {
                    if pods::is_available(&new, min_ready, now) {
                        delete.push(name(&old));
                    } else {
                        surging += 1;
                    }
                }
            }
        }
        let room = (max_surge - surging).clamp(0, candidates.len() as i32) as usize;
        create.extend(candidates.into_iter().take(room));
    }
    (create, delete)
}

/// The status as a merge patch: the counts Go leaves out at zero are written as null, so a
/// count that fell to zero is cleared rather than kept.
fn status_patch(status: &DaemonSetStatus) -> Value {
    let mut value = serde_json::to_value(status).unwrap_or(Value::Null);
    if let Some(map) = value.as_object_mut() {
        for key in [
            "observedGeneration",
            "updatedNumberScheduled",
            "numberAvailable",
            "numberUnavailable",
        ] {
            map.entry(key).or_insert(Value::Null);
        }
    }
    value
}

/// The DaemonSet controller's reconciler.
pub struct DaemonSetController {
    client: Client,
    pods_control: PodControl,
    daemon_sets: Store<DaemonSet>,
    revisions: Store<ControllerRevision>,
    nodes: Store<Node>,
    pods: Store<Pod>,
    expectations: Arc<Expectations>,
}

impl DaemonSetController {
    pub fn new(
        client: Client,
        daemon_sets: &mut Informer<DaemonSet>,
        nodes: &mut Informer<Node>,
        pods: &mut Informer<Pod>,
        revisions: &Informer<ControllerRevision>,
        events: EventSink,
    ) -> (Arc<DaemonSetController>, WorkQueue) {
        let queue = WorkQueue::new(Duration::from_millis(10), Duration::from_secs(60));
        let expectations = Arc::new(Expectations::default());
        pods.add_index(pods::BY_CONTROLLER, pods::controller_uid);
        let controller = Arc::new(DaemonSetController {
            pods_control: PodControl::new(
                client.clone(),
                Recorder::new(events, "daemonset-controller"),
            ),
            client,
            daemon_sets: daemon_sets.store(),
            revisions: revisions.store(),
            nodes: nodes.store(),
            pods: pods.store(),
            expectations: expectations.clone(),
        });
        tokio::spawn(owned_pods::feed(
            "DaemonSet",
            daemon_sets.subscribe(),
            pods.subscribe(),
            queue.clone(),
            expectations,
        ));
        tokio::spawn(node_feed(
            nodes.subscribe(),
            daemon_sets.store(),
            queue.clone(),
        ));
        (controller, queue)
    }
}

/// A node joining or leaving, or changing what daemons it accepts (labels, taints), queues
/// every DaemonSet.
async fn node_feed(
    mut nodes: mpsc::Receiver<InformerEvent<Node>>,
    daemon_sets: Store<DaemonSet>,
    queue: WorkQueue,
) {
    while let Some(event) = nodes.recv().await {
        let relevant = match &event {
            InformerEvent::Added(_) | InformerEvent::Deleted(_) => true,
            InformerEvent::Updated { old, new } => {
                old.metadata.labels != new.metadata.labels
                    || old.spec.as_ref().map(|s| &s.taints) != new.spec.as_ref().map(|s| &s.taints)
            }
        };
        if relevant {
            for ds in daemon_sets.list() {
                queue.add(&key_of(&ds.metadata));
            }
        }
    }
}

impl crate::manager::HasCaches for DaemonSetController {
    fn caches_synced(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send>> {
        let (a, b, c, d) = (
            self.daemon_sets.clone(),
            self.nodes.clone(),
            self.pods.clone(),
            self.revisions.clone(),
        );
        Box::pin(async move {
            a.wait_synced().await
                && b.wait_synced().await
                && c.wait_synced().await
                && d.wait_synced().await
        })
    }
}

impl Reconciler for DaemonSetController {
    async fn reconcile(&self, key: &str) -> Result<Outcome, ReconcileError> {
        let Some(ds) = self.daemon_sets.get(key) else {
            self.expectations.forget(key);
            return Ok(Outcome::Done);
        };
        if ds.metadata.deletion_timestamp.is_some() {
            return Ok(Outcome::Done);
        }
        let (namespace, name) = split_key(key);
        let namespace = namespace.unwrap_or_default();
        let uid = ds.metadata.uid.clone().unwrap_or_default();
        // Expectations first, then the pods: every pod observed by then is already in the cache
        // (the informer stores an object before it reports it), so a sync never misses a pod it
        // counted as seen and creates it again.
        let met = self.expectations.satisfied(key);
        let candidates = owned_pods::controlled_pods(&self.pods, namespace, &uid);
        let owned: Vec<&Pod> = candidates.iter().map(|p| p.as_ref()).collect();
        let nodes = self.nodes.list();
        let nodes: Vec<&Node> = nodes.iter().map(|n| n.as_ref()).collect();
        let all_revisions = revisions::owned_by(&self.revisions, namespace, &uid);
        let revisions: Vec<&ControllerRevision> =
            all_revisions.iter().map(|r| r.as_ref()).collect();
        let plan = plan(&ds, &nodes, &owned, &revisions, met, now_seconds());
        let daemon_sets = resources::find("apps", "v1", "daemonsets").expect("daemonsets");
        let (create, renumber) = (
            plan.revision.create.as_ref(),
            plan.revision.renumber.as_ref(),
        );
        if !revisions::write(&self.client, namespace, create, renumber, &[]).await? {
            // Someone else's revision has the name: hash again with a higher count.
            let count = plan.revision.collision_count + 1;
            let status = serde_json::json!({ "collisionCount": count });
            write_status(&self.client, daemon_sets, namespace, name, status).await?;
            return Ok(Outcome::RequeueAfter(Duration::from_millis(100)));
        }
        let mut first_error = None;
        if !plan.create.is_empty() || !plan.delete.is_empty() {
            self.expectations.expect(
                key,
                plan.create.len(),
                plan.delete.iter().map(|p| format!("{namespace}/{p}")),
            );
        }
        let object = reference("apps/v1", "DaemonSet", &ds.metadata);
        for (pod, node) in &plan.failed {
            let message = format!(
                "Found failed daemon pod {namespace}/{pod} on node {node}, will try to kill it"
            );
            self.pods_control
                .events()
                .record(object.clone(), true, "FailedDaemonPod", &message);
        }
        if !plan.create.is_empty() {
            let hash = &plan.revision.hash;
            let new: Vec<Pod> = plan
                .create
                .iter()
                .map(|node| new_pod(&ds, node, hash))
                .collect();
            if let Err(e) = self
                .pods_control
                .create(&object, new, || self.expectations.creation_observed(key))
                .await
            {
                first_error = Some(e);
            }
        }
        let not_deleted = |pod: &str| {
            self.expectations
                .deletion_observed(key, &format!("{namespace}/{pod}"))
        };
        if let Err(e) = self
            .pods_control
            .delete(&object, namespace, &plan.delete, not_deleted)
            .await
        {
            first_error.get_or_insert(e);
        }
        let old = &plan.delete_revisions;
        if let Err(e) = revisions::write(&self.client, namespace, None, None, old).await {
            first_error.get_or_insert(e);
        }
        if ds.status.as_ref() != Some(&plan.status) {
            let status = status_patch(&plan.status);
            write_status(&self.client, daemon_sets, namespace, name, status).await?;
        }
        outcome(first_error, plan.recheck_after)
    }
}

#[cfg(test)]
#[path = "daemonset_tests.rs"]
mod tests;
