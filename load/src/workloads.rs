//! Workload objects beside the bare pods (`[[load.workloads]]`): Deployments, StatefulSets,
//! DaemonSets and Jobs created at their own rates, their pods followed by watches of their own
//! and measured per kind, then deleted by cascade.
//!
//! Their pods carry [`WORKLOAD_RUN_LABEL`] (not the bare pods' run label, so the bare pods'
//! accounting never meets them) and [`WORKLOAD_LABEL`] naming their object. Per kind the report
//! gives `pod_startup` (the watch's first sight of a pod → Running, on the client's clock: the
//! controller made the pod, so no client create times it) and `rollout` (the object's create
//! sent → every pod it should have Running: for a DaemonSet, one on each eligible node; for a
//! StatefulSet, all its ordinals).
//!
//! A StatefulSet entry with `claims` gets a `volumeClaimTemplate` (`data`, mounted at `/data`,
//! labelled with the run so the claim watches and the final listing see its claims) and
//! `persistentVolumeClaimRetentionPolicy` `Delete`, so its claims go with it; the
//! [`ClaimTracker`] times them.
//!
//! [`WorkloadTracker`] is the pure core (times in, no clock read); [`Workloads`] does the I/O.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use hyper::{Method, StatusCode};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::claims::ClaimTracker;
use crate::client::ApiClient;
use crate::pacer;
use crate::plan::{LoadPlan, WorkloadKind, WorkloadPlan};
use crate::report::Percentiles;
use crate::template::{CLAIM_VOLUME, RUN_LABEL};
use crate::tracker::{EventKind, PodObserver, PodView};
use cluster::shutdown::Interrupt;

/// The label every workload pod of a run carries, valued with the run's id.
pub const WORKLOAD_RUN_LABEL: &str = "kemu.dev/load-workload-run";
/// The label naming the workload object a pod belongs to.
pub const WORKLOAD_LABEL: &str = "kemu.dev/load-workload";

/// One workload object of the run. Times are seconds since the run's start.
#[derive(Clone, Debug)]
pub struct WorkloadRecord {
    pub kind: WorkloadKind,
    pub name: String,
    pub namespace: u32,
    pub create_sent: f64,
    pub created: bool,
    /// Last HTTP code of a failed create (0 = no answer).
    pub create_error: Option<u16>,
    /// Pods it should have Running.
    pub expected: u64,
    /// Its pods seen Running.
    pub running: u64,
    /// When the last of the `expected` pods was seen Running.
    pub all_running: Option<f64>,
    pub delete_sent: Option<f64>,
    /// Its pods seen and not yet seen gone.
    pub live_pods: u64,
}

#[derive(Clone, Debug)]
struct PodState {
    workload: usize,
    first_seen: f64,
    running_seen: Option<f64>,
    gone: bool,
}

/// Every workload object of a run and what its pods did.
#[derive(Default)]
pub struct WorkloadTracker {
    records: Vec<WorkloadRecord>,
    by_name: HashMap<(u32, String), usize>,
    /// By (namespace, pod name).
    pods: HashMap<(u32, String), PodState>,
    /// Pod startups (first seen → Running), seconds, per kind.
    startups: BTreeMap<WorkloadKind, Vec<f64>>,
    /// Watch events for pods of no known object.
    pub stray_events: u64,
}

/// The index of load namespace `kemu-load-N`.
fn namespace_index(namespace: &str) -> Option<u32> {
    namespace.strip_prefix("kemu-load-")?.parse().ok()
}

impl WorkloadTracker {
    pub fn records(&self) -> &[WorkloadRecord] {
        &self.records
    }

    /// Registers an object right before its create is sent.
    pub fn create_sent(
        &mut self,
        kind: WorkloadKind,
        name: &str,
        namespace: u32,
        expected: u64,
        t: f64,
    ) -> usize {
        let index = self.records.len();
        self.records.push(WorkloadRecord {
            kind,
            name: name.to_string(),
            namespace,
            create_sent: t,
            created: false,
            create_error: None,
            expected,
            running: 0,
            all_running: None,
            delete_sent: None,
            live_pods: 0,
        });
        self.by_name.insert((namespace, name.to_string()), index);
        index
    }

    /// The create's final answer: `None` for success, else the HTTP code (0 = none).
    pub fn create_answered(&mut self, index: usize, error: Option<u16>) {
        let record = &mut self.records[index];
        match error {
            None => record.created = true,
            Some(code) if !record.created => record.create_error = Some(code),
            Some(_) => {}
        }
    }

    pub fn delete_sent(&mut self, index: usize, t: f64) {
        self.records[index].delete_sent.get_or_insert(t);
    }

    /// Objects created whose pods are not all Running yet.
    pub fn not_yet_running(&self) -> usize {
        self.records
            .iter()
            .filter(|r| r.created && r.all_running.is_none())
            .count()
    }

    /// Pods of the run still seen (not yet gone).
    pub fn live_pods(&self) -> u64 {
        self.records.iter().map(|r| r.live_pods).sum()
    }

    fn gone(&mut self, key: &(u32, String)) {
        if let Some(state) = self.pods.get_mut(key) {
            if !state.gone {
                state.gone = true;
                self.records[state.workload].live_pods -= 1;
            }
        }
    }

    /// Per kind: objects, pods, `pod_startup` and `rollout` percentiles.
    pub fn report(&self) -> Vec<WorkloadKindReport> {
        let mut out = Vec::new();
        for kind in WorkloadKind::ALL {
            let records: Vec<&WorkloadRecord> =
                self.records.iter().filter(|r| r.kind == kind).collect();
            if records.is_empty() {
                continue;
            }
            let startups = self.startups.get(&kind).cloned().unwrap_or_default();
            out.push(WorkloadKindReport {
                kind,
                objects: records.len() as u64,
                created: records.iter().filter(|r| r.created).count() as u64,
                rolled_out: records.iter().filter(|r| r.all_running.is_some()).count() as u64,
                pods_expected: records.iter().map(|r| r.expected).sum(),
                pods_running: records.iter().map(|r| r.running).sum(),
                pod_startup_ms: Percentiles::from_seconds(startups),
                rollout_ms: Percentiles::from_seconds(
                    records
                        .iter()
                        .filter_map(|r| Some(r.all_running? - r.create_sent)),
                ),
            });
        }
        out
    }
}

impl PodObserver for WorkloadTracker {
    fn observe(&mut self, kind: EventKind, pod: &PodView, t: f64) {
        let meta = &pod.metadata;
        let (Some(namespace), Some(owner)) = (
            namespace_index(&meta.namespace),
            meta.labels.get(WORKLOAD_LABEL),
        ) else {
            self.stray_events += 1;
            return;
        };
        let Some(&workload) = self.by_name.get(&(namespace, owner.clone())) else {
            self.stray_events += 1;
            return;
        };
        let key = (namespace, meta.name.clone());
        if kind == EventKind::Deleted {
            self.gone(&key);
            return;
        }
        // A pod seen again after it was gone is a new pod of the same name (a StatefulSet's).
        let fresh = self.pods.get(&key).is_none_or(|s| s.gone);
        if fresh {
            self.pods.insert(
                key.clone(),
                PodState {
                    workload,
                    first_seen: t,
                    running_seen: None,
                    gone: false,
                },
            );
            self.records[workload].live_pods += 1;
        }
        let running = pod.status.phase.as_deref() == Some("Running");
        let Some(state) = self.pods.get_mut(&key) else {
            return;
        };
        if running && state.running_seen.is_none() {
            state.running_seen = Some(t);
            let startup = t - state.first_seen;
            let record = &mut self.records[workload];
            record.running += 1;
            if record.running >= record.expected && record.all_running.is_none() {
                record.all_running = Some(t);
            }
            self.startups.entry(record.kind).or_default().push(startup);
        }
    }

    fn relisted(&mut self, namespace: u32, pods: &[PodView], t: f64) {
        let mut listed = HashSet::new();
        for pod in pods {
            listed.insert(pod.metadata.name.clone());
            self.observe(EventKind::Added, pod, t);
        }
        let missing: Vec<(u32, String)> = self
            .pods
            .iter()
            .filter(|((ns, name), s)| *ns == namespace && !s.gone && !listed.contains(name))
            .map(|(k, _)| k.clone())
            .collect();
        for key in missing {
            self.gone(&key);
        }
    }
}

/// One kind's figures in the report.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WorkloadKindReport {
    pub kind: WorkloadKind,
    pub objects: u64,
    pub created: u64,
    /// Objects whose expected pods were all seen Running.
    pub rolled_out: u64,
    pub pods_expected: u64,
    pub pods_running: u64,
    /// A pod's first sight on the watch → Running seen.
    pub pod_startup_ms: Percentiles,
    /// An object's create sent → its last expected pod seen Running.
    pub rollout_ms: Percentiles,
}

/// The plural and API path prefix of a kind.
fn resource(kind: WorkloadKind) -> (&'static str, &'static str) {
    match kind {
        WorkloadKind::Deployment => ("deployments", "/apis/apps/v1"),
        WorkloadKind::StatefulSet => ("statefulsets", "/apis/apps/v1"),
        WorkloadKind::DaemonSet => ("daemonsets", "/apis/apps/v1"),
        WorkloadKind::Job => ("jobs", "/apis/batch/v1"),
    }
}

fn short(kind: WorkloadKind) -> &'static str {
    match kind {
        WorkloadKind::Deployment => "deploy",
        WorkloadKind::StatefulSet => "sts",
        WorkloadKind::DaemonSet => "ds",
        WorkloadKind::Job => "job",
    }
}

/// The claim `spec` of workload entry `w` when it has claims.
pub fn claim_spec(plan: &LoadPlan, w: &WorkloadPlan) -> Option<Value> {
    w.claims.then(|| {
        crate::claims::claim_spec(plan.workload_claim_size(w), plan.workload_storage_class(w))
    })
}

/// Mounts volume [`CLAIM_VOLUME`] at `/data` in every container of `spec` that does not mount
/// it yet.
fn mount_claim(spec: &mut Value) {
    let Some(containers) = spec["containers"].as_array_mut() else {
        return;
    };
    for c in containers {
        let mount = json!({"name": CLAIM_VOLUME, "mountPath": "/data"});
        match c["volumeMounts"].as_array_mut() {
            Some(mounts) if mounts.iter().any(|m| m["name"] == CLAIM_VOLUME) => {}
            Some(mounts) => mounts.push(mount),
            None => c["volumeMounts"] = json!([mount]),
        }
    }
}

/// The manifest of workload object `name` of `w` in `namespace`: the run's pod spec as its
/// template, labelled with the run and the object; with `claim` (a claim spec, for a
/// StatefulSet) a `volumeClaimTemplate` of it whose claims go with the set.
pub fn manifest(
    w: &WorkloadPlan,
    run_id: &str,
    pod_spec: &Value,
    name: &str,
    claim: Option<&Value>,
) -> Value {
    let labels = json!({ WORKLOAD_RUN_LABEL: run_id, WORKLOAD_LABEL: name, "app": "kemu-load" });
    let selector = json!({ "matchLabels": { WORKLOAD_RUN_LABEL: run_id, WORKLOAD_LABEL: name } });
    let mut spec = pod_spec.clone();
    if claim.is_some() && w.kind == WorkloadKind::StatefulSet {
        mount_claim(&mut spec);
    }
    let mut template = json!({ "metadata": { "labels": labels }, "spec": spec.clone() });
    let replicas = w.pods_per_object();
    let (api_version, body) = match w.kind {
        WorkloadKind::Deployment => (
            "apps/v1",
            json!({ "replicas": replicas, "selector": selector, "template": template }),
        ),
        WorkloadKind::StatefulSet => {
            let mut body = json!({
                "replicas": replicas, "selector": selector, "template": template,
                "serviceName": name,
            });
            if let Some(policy) = &w.pod_management_policy {
                body["podManagementPolicy"] = json!(policy);
            }
            if let Some(claim) = claim {
                // The claims carry the run's label (the StatefulSet controller adds the
                // selector's), and go with the set.
                body["volumeClaimTemplates"] = json!([{
                    "metadata": {"name": CLAIM_VOLUME, "labels": {RUN_LABEL: run_id}},
                    "spec": claim,
                }]);
                body["persistentVolumeClaimRetentionPolicy"] =
                    json!({"whenDeleted": "Delete", "whenScaled": "Delete"});
            }
            ("apps/v1", body)
        }
        WorkloadKind::DaemonSet => (
            "apps/v1",
            json!({ "selector": selector, "template": template }),
        ),
        WorkloadKind::Job => {
            spec["restartPolicy"] = json!("Never");
            template["spec"] = spec;
            (
                "batch/v1",
                json!({
                    "parallelism": replicas, "completions": replicas,
                    "template": template,
                }),
            )
        }
    };
    json!({
        "apiVersion": api_version,
        "kind": w.kind.as_str(),
        "metadata": { "name": name, "labels": { WORKLOAD_RUN_LABEL: run_id } },
        "spec": body,
    })
}

/// Whether a DaemonSet without tolerations of its own runs on `node`: not cordoned and no
/// NoSchedule or NoExecute taint but the ones every daemon pod tolerates.
fn takes_daemons(node: &Value) -> bool {
    let taints = node["spec"]["taints"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    taints.iter().all(|t| {
        let key = t["key"].as_str().unwrap_or_default();
        t["effect"] == "PreferNoSchedule" || key.starts_with("node.kubernetes.io/")
    })
}

/// The I/O of the run's workloads.
pub struct Workloads {
    pub client: ApiClient,
    pub plan: LoadPlan,
    pub run_id: String,
    /// The pod spec every workload's template uses.
    pub pod_spec: Value,
    pub tracker: Arc<Mutex<WorkloadTracker>>,
    /// The run's claims, which take in the StatefulSets' as the watch sees them.
    pub claims: Arc<Mutex<ClaimTracker>>,
    pub start: Instant,
}

/// Attempts of a create or delete (as the bare pods').
const ATTEMPTS: u32 = 7;

impl Workloads {
    /// Nodes a DaemonSet's pods go to, counted once before the creates.
    pub async fn daemon_nodes(&self) -> anyhow::Result<u64> {
        let response = self
            .client
            .call(
                "list",
                "nodes",
                Method::GET,
                "/api/v1/nodes",
                None,
                Default::default(),
            )
            .await?;
        if !response.status.is_success() {
            anyhow::bail!("list nodes answered {}", response.status);
        }
        let list: Value = serde_json::from_slice(&response.body)?;
        Ok(list["items"]
            .as_array()
            .map_or(0, |nodes| nodes.iter().filter(|n| takes_daemons(n)).count()) as u64)
    }

    /// Creates every entry's objects, each entry at its own rate, all entries at once; stops
    /// sending when `stop` resolves. The creates made.
    pub async fn create(
        &self,
        permits: &Arc<Semaphore>,
        interrupt: &Interrupt,
    ) -> anyhow::Result<u64> {
        let daemon_nodes = if self
            .plan
            .workloads
            .iter()
            .any(|w| w.kind == WorkloadKind::DaemonSet)
        {
            self.daemon_nodes().await?
        } else {
            0
        };
        let namespaces = self.plan.namespaces;
        let entries = self.plan.workloads.iter().enumerate().map(|(entry, w)| {
            let stop = interrupt.first();
            let expected = match w.kind {
                WorkloadKind::DaemonSet => daemon_nodes,
                _ => u64::from(w.pods_per_object()),
            };
            let items: Vec<u32> = (0..w.count).collect();
            let claim = claim_spec(&self.plan, w);
            async move {
                pacer::paced(items, w.rate, permits, self.plan.max_in_flight, stop, |i| {
                    let ns = i % namespaces;
                    let namespace = crate::namespace_name(ns);
                    let name = format!("load-{}-{}{entry}-{i}", self.run_id, short(w.kind));
                    let t = self.start.elapsed().as_secs_f64();
                    let index = self
                        .tracker
                        .lock()
                        .create_sent(w.kind, &name, ns, expected, t);
                    if claim.is_some() {
                        self.claims
                            .lock()
                            .expect_workload(&namespace, &name, w.kind);
                    }
                    let body = manifest(w, &self.run_id, &self.pod_spec, &name, claim.as_ref());
                    let (plural, prefix) = resource(w.kind);
                    let path = format!("{prefix}/namespaces/{namespace}/{plural}");
                    let (client, tracker) = (self.client.clone(), self.tracker.clone());
                    async move {
                        let outcome =
                            send(&client, "create", plural, Method::POST, &path, &body).await;
                        tracker.lock().create_answered(index, outcome);
                    }
                })
                .await
                .ops
            }
        });
        Ok(futures::future::join_all(entries).await.into_iter().sum())
    }

    /// Deletes every created object (background cascade: the garbage collector removes the
    /// pods) at the plan's delete rate.
    pub async fn delete(
        &self,
        permits: &Arc<Semaphore>,
        stop: impl std::future::Future<Output = ()>,
    ) -> u64 {
        let targets: Vec<(usize, WorkloadKind, String, u32)> = self
            .tracker
            .lock()
            .records()
            .iter()
            .enumerate()
            .filter(|(_, r)| r.created && r.delete_sent.is_none())
            .map(|(i, r)| (i, r.kind, r.name.clone(), r.namespace))
            .collect();
        let body =
            json!({"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"});
        let rate = self.plan.effective_delete_rate();
        let stats = pacer::paced(
            targets,
            rate,
            permits,
            self.plan.max_in_flight,
            stop,
            |(index, kind, name, ns)| {
                let t = self.start.elapsed().as_secs_f64();
                self.tracker.lock().delete_sent(index, t);
                let (plural, prefix) = resource(kind);
                let namespace = crate::namespace_name(ns);
                self.claims
                    .lock()
                    .workload_delete_sent(&namespace, &name, t);
                let path = format!("{prefix}/namespaces/{namespace}/{plural}/{name}");
                let (client, body) = (self.client.clone(), body.clone());
                async move {
                    let _ = send(&client, "delete", plural, Method::DELETE, &path, &body).await;
                }
            },
        )
        .await;
        stats.ops
    }

    /// Waits until `done` holds of the tracker, for at most `timeout`, checking every 100 ms or
    /// until `stop`. Whether it held.
    pub async fn wait(
        &self,
        timeout: Duration,
        stop: impl std::future::Future<Output = ()>,
        done: impl Fn(&WorkloadTracker) -> bool,
    ) -> bool {
        tokio::pin!(stop);
        let deadline = Instant::now() + timeout;
        loop {
            if done(&self.tracker.lock()) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::select! {
                biased;
                _ = &mut stop => return false,
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
    }
}

/// Sends a create or delete, retried as the bare pods' are; `None` on success (a 409 after a
/// retry, or a 404 for a delete, count as done), else the last code (0 = no answer).
async fn send(
    client: &ApiClient,
    verb: &'static str,
    plural: &'static str,
    method: Method,
    path: &str,
    body: &Value,
) -> Option<u16> {
    let mut outcome = Some(0);
    for attempt in 0..ATTEMPTS {
        let code = match client
            .call_json(verb, plural, method.clone(), path, body)
            .await
        {
            Ok(r) => r.status.as_u16(),
            Err(_) => 0,
        };
        let done = (200..300).contains(&code)
            || (code == StatusCode::CONFLICT.as_u16() && attempt > 0)
            || (code == StatusCode::NOT_FOUND.as_u16() && method == Method::DELETE);
        if done {
            return None;
        }
        outcome = Some(code);
        if !crate::retryable(code) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(namespace: &str, name: &str, owner: &str, phase: &str) -> PodView {
        let mut p = PodView::default();
        p.metadata.namespace = namespace.into();
        p.metadata.name = name.into();
        p.metadata
            .labels
            .insert(WORKLOAD_LABEL.into(), owner.into());
        p.status.phase = Some(phase.into());
        p
    }

    #[test]
    fn a_workload_rolls_out_when_its_pods_all_run_and_is_gone_with_them() {
        let mut t = WorkloadTracker::default();
        let w = t.create_sent(WorkloadKind::StatefulSet, "web", 0, 2, 1.0);
        t.create_answered(w, None);
        t.observe(
            EventKind::Added,
            &pod("kemu-load-0", "web-0", "web", "Pending"),
            1.2,
        );
        t.observe(
            EventKind::Modified,
            &pod("kemu-load-0", "web-0", "web", "Running"),
            1.5,
        );
        assert_eq!(t.not_yet_running(), 1);
        t.observe(
            EventKind::Added,
            &pod("kemu-load-0", "web-1", "web", "Pending"),
            1.6,
        );
        t.observe(
            EventKind::Modified,
            &pod("kemu-load-0", "web-1", "web", "Running"),
            2.0,
        );
        assert_eq!(t.not_yet_running(), 0);
        let report = t.report();
        assert_eq!(report.len(), 1);
        let sts = &report[0];
        assert_eq!((sts.objects, sts.rolled_out, sts.pods_running), (1, 1, 2));
        assert_eq!(sts.pod_startup_ms.count, 2);
        assert!(
            (sts.rollout_ms.max - 1000.0).abs() < 1.0,
            "{:?}",
            sts.rollout_ms
        );
        // Another namespace, another object's pods, or none: strays.
        t.observe(
            EventKind::Added,
            &pod("kemu-load-1", "web-0", "web", "Running"),
            2.1,
        );
        t.observe(
            EventKind::Added,
            &pod("default", "x", "web", "Running"),
            2.1,
        );
        assert_eq!(t.stray_events, 2);
        assert_eq!(t.live_pods(), 2);
        t.observe(
            EventKind::Deleted,
            &pod("kemu-load-0", "web-0", "web", "Running"),
            3.0,
        );
        t.relisted(0, &[], 3.5);
        assert_eq!(t.live_pods(), 0);
    }

    #[test]
    fn manifests_select_their_own_pods() {
        let w = WorkloadPlan {
            kind: WorkloadKind::Job,
            count: 1,
            replicas: Some(3),
            rate: 1.0,
            pod_management_policy: None,
            claims: false,
            claim_size: None,
            storage_class: None,
        };
        let spec = json!({"containers": [{"name": "pause", "image": "pause"}]});
        let job = manifest(&w, "r1", &spec, "load-r1-job0-0", None);
        assert_eq!(job["apiVersion"], "batch/v1");
        assert_eq!(job["spec"]["parallelism"], 3);
        assert_eq!(job["spec"]["template"]["spec"]["restartPolicy"], "Never");
        let labels = &job["spec"]["template"]["metadata"]["labels"];
        assert_eq!(labels[WORKLOAD_LABEL], "load-r1-job0-0");
        assert_eq!(labels[WORKLOAD_RUN_LABEL], "r1");
        let sts = manifest(
            &WorkloadPlan {
                kind: WorkloadKind::StatefulSet,
                pod_management_policy: Some("Parallel".into()),
                ..w.clone()
            },
            "r1",
            &spec,
            "s",
            None,
        );
        assert_eq!(sts["spec"]["podManagementPolicy"], "Parallel");
        assert_eq!(sts["spec"]["selector"]["matchLabels"][WORKLOAD_LABEL], "s");
        assert!(sts["spec"].get("volumeClaimTemplates").is_none());
        // A StatefulSet with claims: a template of the entry's size and the plan's class,
        // mounted in every container, its claims deleted with the set.
        let plan = LoadPlan {
            storage_class: Some("fast".into()),
            ..Default::default()
        };
        let with_claims = WorkloadPlan {
            kind: WorkloadKind::StatefulSet,
            claims: true,
            claim_size: Some("2Gi".into()),
            ..w.clone()
        };
        let claim = claim_spec(&plan, &with_claims);
        assert!(claim_spec(&plan, &w).is_none());
        let sts = manifest(&with_claims, "r1", &spec, "s", claim.as_ref());
        let template = &sts["spec"]["volumeClaimTemplates"][0];
        assert_eq!(template["metadata"]["name"], "data");
        assert_eq!(template["metadata"]["labels"][RUN_LABEL], "r1");
        assert_eq!(template["spec"]["resources"]["requests"]["storage"], "2Gi");
        assert_eq!(template["spec"]["storageClassName"], "fast");
        assert_eq!(
            sts["spec"]["persistentVolumeClaimRetentionPolicy"]["whenDeleted"],
            "Delete"
        );
        assert_eq!(
            sts["spec"]["template"]["spec"]["containers"][0]["volumeMounts"],
            json!([{"name": "data", "mountPath": "/data"}])
        );
        assert!(takes_daemons(&json!({"spec": {}})));
        assert!(!takes_daemons(
            &json!({"spec": {"taints": [{"key": "dedicated", "effect": "NoSchedule"}]}})
        ));
    }
}
