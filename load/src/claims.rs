//! The bare pods' PersistentVolumeClaims (`claims = true`): the claim bodies, the pure
//! [`ClaimTracker`] that turns sends and watch events into per-claim times, and
//! [`ObjectWatch`], the list-then-watch informer of the run's claims (per namespace) and of the
//! cluster's VolumeAttachments.
//!
//! A claim's bind latency runs from its create sent to the watch seeing it `Bound`; its attach
//! latency from `Bound` seen to the watch seeing a VolumeAttachment of its volume
//! `attached: true` (the attach/detach controller creates the attachment once the pod is on a
//! node, so with `WaitForFirstConsumer` binding this is the attach itself, and with
//! `Immediate` binding it also holds the pod's scheduling).
//!
//! A StatefulSet's claims (`claims = true` on a `[[load.workloads]]` entry) are made by the
//! StatefulSet controller from the set's `volumeClaimTemplates`: the tracker takes them in when
//! the watch first sees them (they carry the set's [`WORKLOAD_LABEL`]), times their bind from
//! that first sight, and expects them gone once the set's delete is sent (the set owns them
//! under `whenDeleted: Delete`). The report gives them per workload kind.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use hyper::Method;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use super::client::{ApiClient, LineReader};
use super::plan::{LoadPlan, WorkloadKind};
use super::report::Percentiles;
use super::template::RUN_LABEL;
use super::tracker::EventKind;
use super::watcher::encode;
use super::workloads::WORKLOAD_LABEL;

/// A claim's spec: `ReadWriteOnce`, `size`, and `class` or the cluster's default class.
pub fn claim_spec(size: &str, class: Option<&str>) -> Value {
    let mut spec = json!({
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": size}},
    });
    if let Some(class) = class {
        spec["storageClassName"] = json!(class);
    }
    spec
}

/// The create body of claim `name` in `namespace`.
pub fn claim_body(plan: &LoadPlan, run_id: &str, namespace: &str, name: &str) -> Value {
    let spec = claim_spec(&plan.claim_size, plan.storage_class.as_deref());
    json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace, "labels": {RUN_LABEL: run_id}},
        "spec": spec,
    })
}

/// One claim of the run; times are seconds since the run's start on the client's clock.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClaimRecord {
    pub namespace: String,
    pub name: String,
    /// When the client sent the create; for a workload's claim, when the watch first saw it.
    pub create_sent: f64,
    /// The kind and name of the workload object whose controller made it (none: a bare
    /// pod's claim, made by the client).
    pub workload: Option<(WorkloadKind, String)>,
    /// The create was answered 2xx (or the claim was seen).
    pub created: bool,
    pub bound_seen: Option<f64>,
    /// The PersistentVolume it was bound to.
    pub volume: Option<String>,
    pub attached_seen: Option<f64>,
    /// The claim's delete sent, or for a workload's claim its object's.
    pub delete_sent: Option<f64>,
    pub gone_seen: Option<f64>,
}

/// Claims by name, and which volume went to which claim.
#[derive(Debug, Default)]
pub struct ClaimTracker {
    records: Vec<ClaimRecord>,
    by_name: HashMap<(String, String), usize>,
    by_volume: HashMap<String, usize>,
    /// Volumes seen attached before their claim was seen Bound, with when.
    attached_early: HashMap<String, f64>,
    /// Workload objects whose controller makes claims, by (namespace, name): their kind and
    /// when their delete was sent.
    workloads: HashMap<(String, String), (WorkloadKind, Option<f64>)>,
}

/// What the claim watch reads of a claim.
#[derive(Debug, Default, Deserialize)]
pub struct ClaimView {
    pub namespace: String,
    pub name: String,
    pub phase: String,
    pub volume: String,
    /// The workload object it belongs to (its [`WORKLOAD_LABEL`]), if any.
    #[serde(default)]
    pub workload: String,
}

impl ClaimView {
    pub fn from_object(object: &Value) -> ClaimView {
        let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
        ClaimView {
            namespace: s(&object["metadata"]["namespace"]),
            name: s(&object["metadata"]["name"]),
            phase: s(&object["status"]["phase"]),
            volume: s(&object["spec"]["volumeName"]),
            workload: s(&object["metadata"]["labels"][WORKLOAD_LABEL]),
        }
    }
}

/// Claim counts for the waits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClaimCounts {
    pub created: u64,
    pub delete_sent: u64,
    pub gone: u64,
}

/// The `claims` section of the report: the bare pods' claims, what is left of every claim of
/// the run, and the workloads' claims per kind.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ClaimsReport {
    /// The bare pods' claims whose create was sent.
    pub sent: u64,
    /// Acknowledged (or seen).
    pub created: u64,
    pub bound: u64,
    pub attached: u64,
    pub deleted: u64,
    /// Deleted claims the watch saw go (the pvc-protection finalizer holds a claim until its
    /// pod is gone).
    pub gone: u64,
    /// Claims of the run the API still lists at the end (the bare pods' and the workloads').
    pub left: Option<u64>,
    /// PersistentVolumes still bound to a claim of the run at the end (reclaim `Delete`
    /// removes a dynamically provisioned one after its claim).
    pub volumes_left: Option<u64>,
    /// Create sent → Bound seen.
    pub bind_ms: Percentiles,
    /// Bound seen → the volume's VolumeAttachment seen attached.
    pub attach_ms: Percentiles,
    /// pod_startup (as `latency_ms.pod_startup`) of the bare pods with a claim.
    pub pod_startup_with_claims_ms: Percentiles,
    /// pod_startup of the bare pods without one (none unless `claims_percent` is below 100).
    pub pod_startup_without_claims_ms: Percentiles,
    /// The workloads' claims, per kind (absent when no workload has claims).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workloads: Vec<WorkloadClaimsReport>,
}

/// One workload kind's claims in the report.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct WorkloadClaimsReport {
    pub kind: WorkloadKind,
    /// Claims of the kind's objects the watch saw.
    pub seen: u64,
    pub bound: u64,
    pub attached: u64,
    /// Claims whose object's delete was sent.
    pub deleted: u64,
    /// Of those, claims seen gone.
    pub gone: u64,
    /// The claim's first sight on the watch → Bound seen (its controller made it, so no
    /// client create times it).
    pub bind_ms: Percentiles,
    /// Bound seen → the volume's VolumeAttachment seen attached.
    pub attach_ms: Percentiles,
}

impl ClaimTracker {
    pub fn records(&self) -> &[ClaimRecord] {
        &self.records
    }

    /// Index of claim `namespace/name`, which the client is about to create at `t`.
    pub fn create_sent(&mut self, namespace: &str, name: &str, t: f64) -> usize {
        let index = self.records.len();
        self.records.push(ClaimRecord {
            namespace: namespace.into(),
            name: name.into(),
            create_sent: t,
            ..Default::default()
        });
        self.by_name.insert((namespace.into(), name.into()), index);
        index
    }

    /// Workload object `namespace/name` of `kind`, about to be created, makes claims: the ones
    /// the watch sees with its label are the run's.
    pub fn expect_workload(&mut self, namespace: &str, name: &str, kind: WorkloadKind) {
        self.workloads
            .insert((namespace.into(), name.into()), (kind, None));
    }

    /// The delete of workload object `namespace/name` was sent at `t`: its claims go with it.
    pub fn workload_delete_sent(&mut self, namespace: &str, name: &str, t: f64) {
        let Some(entry) = self.workloads.get_mut(&(namespace.into(), name.into())) else {
            return;
        };
        entry.1.get_or_insert(t);
        for r in &mut self.records {
            if r.namespace == namespace
                && r.workload.as_ref().is_some_and(|(_, owner)| owner == name)
            {
                r.delete_sent.get_or_insert(t);
            }
        }
    }

    /// Whether the run made (or tried to make) claim `namespace/name`.
    pub fn has(&self, namespace: &str, name: &str) -> bool {
        self.by_name
            .contains_key(&(namespace.to_string(), name.to_string()))
    }

    pub fn create_answered(&mut self, index: usize, ok: bool) {
        if let Some(r) = self.records.get_mut(index) {
            r.created |= ok;
        }
    }

    /// The client sent the delete of `namespace/name` at `t`; `gone` when answered 404.
    pub fn delete_sent(&mut self, namespace: &str, name: &str, t: f64, gone: bool) {
        let Some(&i) = self.by_name.get(&(namespace.to_string(), name.to_string())) else {
            return;
        };
        let r = &mut self.records[i];
        r.delete_sent.get_or_insert(t);
        if gone {
            r.gone_seen.get_or_insert(t);
        }
    }

    /// A claim event from the watch (or an item of a list, as `Added`).
    pub fn observe_claim(&mut self, kind: EventKind, claim: &ClaimView, t: f64) {
        let key = (claim.namespace.clone(), claim.name.clone());
        let i = match self.by_name.get(&key) {
            Some(&i) => i,
            None => {
                // A claim a workload's controller made, seen for the first time.
                let owner = (claim.namespace.clone(), claim.workload.clone());
                let Some(&(workload_kind, delete_sent)) = self.workloads.get(&owner) else {
                    return;
                };
                let i = self.records.len();
                self.records.push(ClaimRecord {
                    namespace: claim.namespace.clone(),
                    name: claim.name.clone(),
                    create_sent: t,
                    workload: Some((workload_kind, claim.workload.clone())),
                    delete_sent,
                    ..Default::default()
                });
                self.by_name.insert(key, i);
                i
            }
        };
        let r = &mut self.records[i];
        r.created = true;
        if kind == EventKind::Deleted {
            r.gone_seen.get_or_insert(t);
            return;
        }
        if claim.phase == "Bound" && r.bound_seen.is_none() {
            r.bound_seen = Some(t);
            if !claim.volume.is_empty() {
                r.volume = Some(claim.volume.clone());
                self.by_volume.insert(claim.volume.clone(), i);
                if let Some(at) = self.attached_early.remove(&claim.volume) {
                    r.attached_seen.get_or_insert(at.max(t));
                }
            }
        }
    }

    /// A VolumeAttachment of volume `volume` seen `attached` at `t`.
    pub fn observe_attachment(&mut self, volume: &str, attached: bool, t: f64) {
        if !attached || volume.is_empty() {
            return;
        }
        match self.by_volume.get(volume) {
            Some(&i) => {
                self.records[i].attached_seen.get_or_insert(t);
            }
            None => {
                self.attached_early.entry(volume.to_string()).or_insert(t);
            }
        }
    }

    /// Claims absent from a fresh list of `namespace` (made at `t`) that were being deleted
    /// are gone: their DELETED event fell in a watch gap.
    pub fn relisted(&mut self, namespace: &str, listed: &[ClaimView], t: f64) {
        let present: std::collections::HashSet<&str> =
            listed.iter().map(|c| c.name.as_str()).collect();
        for r in &mut self.records {
            if r.namespace == namespace
                && r.delete_sent.is_some()
                && r.gone_seen.is_none()
                && !present.contains(r.name.as_str())
            {
                r.gone_seen = Some(t);
            }
        }
    }

    pub fn counts(&self) -> ClaimCounts {
        let mut c = ClaimCounts::default();
        for r in &self.records {
            c.created += r.created as u64;
            c.delete_sent += r.delete_sent.is_some() as u64;
            c.gone += (r.delete_sent.is_some() && r.gone_seen.is_some()) as u64;
        }
        c
    }

    pub fn report(&self) -> ClaimsReport {
        let bare: Vec<&ClaimRecord> = self
            .records
            .iter()
            .filter(|r| r.workload.is_none())
            .collect();
        let figures = Figures::of(&bare);
        let workloads = WorkloadKind::ALL
            .into_iter()
            .filter_map(|kind| {
                let records: Vec<&ClaimRecord> = self
                    .records
                    .iter()
                    .filter(|r| r.workload.as_ref().is_some_and(|(k, _)| *k == kind))
                    .collect();
                let seen_any = self.workloads.values().any(|(k, _)| *k == kind);
                (seen_any || !records.is_empty()).then(|| {
                    let f = Figures::of(&records);
                    WorkloadClaimsReport {
                        kind,
                        seen: f.sent,
                        bound: f.bound,
                        attached: f.attached,
                        deleted: f.deleted,
                        gone: f.gone,
                        bind_ms: f.bind_ms,
                        attach_ms: f.attach_ms,
                    }
                })
            })
            .collect();
        ClaimsReport {
            sent: figures.sent,
            created: figures.created,
            bound: figures.bound,
            attached: figures.attached,
            deleted: figures.deleted,
            gone: figures.gone,
            left: None,
            volumes_left: None,
            bind_ms: figures.bind_ms,
            attach_ms: figures.attach_ms,
            workloads,
            ..Default::default()
        }
    }
}

/// Counts and latencies of a set of claims.
struct Figures {
    sent: u64,
    created: u64,
    bound: u64,
    attached: u64,
    deleted: u64,
    gone: u64,
    bind_ms: Percentiles,
    attach_ms: Percentiles,
}

impl Figures {
    fn of(records: &[&ClaimRecord]) -> Figures {
        let count =
            |f: &dyn Fn(&ClaimRecord) -> bool| records.iter().filter(|r| f(r)).count() as u64;
        Figures {
            sent: records.len() as u64,
            created: count(&|r| r.created),
            bound: count(&|r| r.bound_seen.is_some()),
            attached: count(&|r| r.attached_seen.is_some()),
            deleted: count(&|r| r.delete_sent.is_some()),
            gone: count(&|r| r.delete_sent.is_some() && r.gone_seen.is_some()),
            bind_ms: Percentiles::from_seconds(
                records
                    .iter()
                    .filter_map(|r| Some(r.bound_seen? - r.create_sent)),
            ),
            attach_ms: Percentiles::from_seconds(
                records
                    .iter()
                    .filter_map(|r| Some(r.attached_seen? - r.bound_seen?)),
            ),
        }
    }
}

/// What an [`ObjectWatch`] watches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Watched {
    /// The run's claims in one namespace.
    Claims,
    /// Every VolumeAttachment of the cluster.
    VolumeAttachments,
}

/// Lists then watches claims or VolumeAttachments, telling the tracker what it sees:
/// `Listing` → `Watching{rv}` (resumed from the last rv when a stream ends) → `Listing` on 410.
pub struct ObjectWatch {
    pub client: ApiClient,
    pub watched: Watched,
    /// The claims' namespace (unused for VolumeAttachments).
    pub namespace: String,
    /// `key=value` label selector of the run's claims.
    pub selector: String,
    pub tracker: Arc<Mutex<ClaimTracker>>,
    pub run_start: Instant,
}

impl ObjectWatch {
    fn resource(&self) -> &'static str {
        match self.watched {
            Watched::Claims => "persistentvolumeclaims",
            Watched::VolumeAttachments => "volumeattachments",
        }
    }

    fn path(&self) -> String {
        match self.watched {
            Watched::Claims => format!(
                "/api/v1/namespaces/{}/persistentvolumeclaims?labelSelector={}",
                self.namespace,
                encode(&self.selector)
            ),
            Watched::VolumeAttachments => {
                "/apis/storage.k8s.io/v1/volumeattachments?limit=0".to_string()
            }
        }
    }

    fn observe(&self, kind: EventKind, object: &Value, t: f64) {
        let mut tracker = self.tracker.lock();
        match self.watched {
            Watched::Claims => tracker.observe_claim(kind, &ClaimView::from_object(object), t),
            Watched::VolumeAttachments => tracker.observe_attachment(
                object["spec"]["source"]["persistentVolumeName"]
                    .as_str()
                    .unwrap_or_default(),
                object["status"]["attached"].as_bool().unwrap_or(false),
                t,
            ),
        }
    }

    async fn list(&self) -> anyhow::Result<String> {
        let response = self
            .client
            .call(
                "list",
                self.resource(),
                Method::GET,
                &self.path(),
                None,
                Default::default(),
            )
            .await?;
        if !response.status.is_success() {
            anyhow::bail!("list {} answered {}", self.resource(), response.status);
        }
        let t = self.run_start.elapsed().as_secs_f64();
        let list: Value = serde_json::from_slice(&response.body)?;
        let items = list["items"].as_array().cloned().unwrap_or_default();
        for item in &items {
            self.observe(EventKind::Added, item, t);
        }
        if self.watched == Watched::Claims {
            let views: Vec<ClaimView> = items.iter().map(ClaimView::from_object).collect();
            self.tracker.lock().relisted(&self.namespace, &views, t);
        }
        Ok(list["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default()
            .to_string())
    }

    /// Runs until `stop` turns true; `ready` fires once the first watch is open.
    pub async fn run(self, ready: oneshot::Sender<()>, mut stop: watch::Receiver<bool>) {
        let mut ready = Some(ready);
        let mut rv: Option<String> = None;
        let mut failures = 0u32;
        loop {
            if *stop.borrow() {
                return;
            }
            if failures > 0 {
                let backoff = Duration::from_millis((100 * 2u64.pow(failures.min(5))).min(2000));
                tokio::select! {
                    biased;
                    _ = stop.wait_for(|s| *s) => return,
                    _ = tokio::time::sleep(backoff) => {}
                }
            }
            let from = match &rv {
                Some(rv) => rv.clone(),
                None => match self.list().await {
                    Ok(listed) => {
                        rv = Some(listed.clone());
                        listed
                    }
                    Err(e) => {
                        tracing::warn!("load {} watch: list failed: {e:#}", self.resource());
                        failures += 1;
                        continue;
                    }
                },
            };
            let separator = if self.path().contains('?') { '&' } else { '?' };
            let path = format!(
                "{}{separator}watch=true&allowWatchBookmarks=true&timeoutSeconds=600&resourceVersion={}",
                self.path(),
                encode(&from)
            );
            let (status, body) = match self.client.stream(self.resource(), &path).await {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!("load {} watch: {e:#}", self.resource());
                    failures += 1;
                    continue;
                }
            };
            if status.as_u16() == 410 {
                rv = None;
                continue;
            }
            if !status.is_success() {
                tracing::warn!("load {} watch answered {status}", self.resource());
                failures += 1;
                continue;
            }
            failures = 0;
            if let Some(ready) = ready.take() {
                let _ = ready.send(());
            }
            let mut lines = LineReader::new(body);
            loop {
                let line = tokio::select! {
                    biased;
                    _ = stop.wait_for(|s| *s) => return,
                    line = lines.next_line() => line,
                };
                let Ok(Some(line)) = line else { break };
                let t = self.run_start.elapsed().as_secs_f64();
                let Ok(event) = serde_json::from_slice::<Value>(&line) else {
                    continue;
                };
                let kind = match event["type"].as_str() {
                    Some("ADDED") => EventKind::Added,
                    Some("MODIFIED") => EventKind::Modified,
                    Some("DELETED") => EventKind::Deleted,
                    Some("BOOKMARK") => {
                        if let Some(at) = event["object"]["metadata"]["resourceVersion"].as_str() {
                            rv = Some(at.to_string());
                        }
                        continue;
                    }
                    _ => {
                        // ERROR: 410 Gone means the rv was compacted away: re-list.
                        if event["object"]["code"].as_u64() == Some(410) {
                            rv = None;
                        } else {
                            failures += 1;
                        }
                        break;
                    }
                };
                if let Some(at) = event["object"]["metadata"]["resourceVersion"].as_str() {
                    rv = Some(at.to_string());
                }
                self.observe(kind, &event["object"], t);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(name: &str, phase: &str, volume: &str) -> ClaimView {
        ClaimView {
            namespace: "ns".into(),
            name: name.into(),
            phase: phase.into(),
            volume: volume.into(),
            workload: String::new(),
        }
    }

    fn owned(name: &str, owner: &str, phase: &str, volume: &str) -> ClaimView {
        ClaimView {
            workload: owner.into(),
            ..claim(name, phase, volume)
        }
    }

    #[test]
    fn a_statefulsets_claims_are_taken_in_when_seen_and_reported_apart() {
        let mut t = ClaimTracker::default();
        let bare = t.create_sent("ns", "p", 0.5);
        t.create_answered(bare, true);
        t.observe_claim(EventKind::Modified, &claim("p", "Bound", "pv-p"), 0.7);
        t.expect_workload("ns", "web", WorkloadKind::StatefulSet);
        // Claims of an object the run did not create are no concern of it.
        t.observe_claim(
            EventKind::Added,
            &owned("data-x-0", "x", "Pending", ""),
            1.0,
        );
        t.observe_claim(
            EventKind::Added,
            &owned("data-web-0", "web", "Pending", ""),
            1.0,
        );
        t.observe_claim(
            EventKind::Modified,
            &owned("data-web-0", "web", "Bound", "pv-0"),
            1.25,
        );
        t.observe_attachment("pv-0", true, 1.5);
        assert_eq!(t.records().len(), 2);
        assert_eq!(t.counts().delete_sent, 0);
        t.workload_delete_sent("ns", "web", 3.0);
        // One seen only after its set's delete was sent is expected gone too.
        t.observe_claim(
            EventKind::Added,
            &owned("data-web-1", "web", "Bound", "pv-1"),
            3.1,
        );
        assert_eq!(t.counts().delete_sent, 2);
        t.observe_claim(
            EventKind::Deleted,
            &owned("data-web-0", "web", "Bound", "pv-0"),
            4.0,
        );
        t.relisted("ns", &[], 4.5);
        let c = t.counts();
        assert_eq!((c.delete_sent, c.gone), (2, 2));
        let r = t.report();
        assert_eq!((r.sent, r.bound, r.deleted), (1, 1, 0));
        assert_eq!(r.workloads.len(), 1);
        let sts = &r.workloads[0];
        assert_eq!(sts.kind, WorkloadKind::StatefulSet);
        assert_eq!(
            (sts.seen, sts.bound, sts.attached, sts.deleted, sts.gone),
            (2, 2, 1, 2, 2)
        );
        assert!((sts.bind_ms.max - 250.0).abs() < 1.0, "{sts:?}");
        assert!((sts.attach_ms.max - 250.0).abs() < 1.0, "{sts:?}");
    }

    #[test]
    fn bind_and_attach_are_timed_per_claim() {
        let mut t = ClaimTracker::default();
        let a = t.create_sent("ns", "a", 1.0);
        let b = t.create_sent("ns", "b", 1.5);
        t.create_answered(a, true);
        t.create_answered(b, true);
        t.observe_claim(EventKind::Added, &claim("a", "Pending", ""), 1.1);
        t.observe_claim(EventKind::Modified, &claim("a", "Bound", "pv-a"), 1.3);
        // b's volume attaches before the watch sees b Bound: counted from Bound.
        t.observe_attachment("pv-b", true, 1.8);
        t.observe_claim(EventKind::Modified, &claim("b", "Bound", "pv-b"), 1.9);
        t.observe_attachment("pv-a", false, 1.4);
        t.observe_attachment("pv-a", true, 1.6);
        // Someone else's claim and volume are no concern of the run.
        t.observe_claim(EventKind::Added, &claim("other", "Bound", "pv-x"), 2.0);
        t.observe_attachment("pv-x", true, 2.0);
        let r = t.records();
        assert_eq!(r[a].bound_seen, Some(1.3));
        assert_eq!(r[a].attached_seen, Some(1.6));
        assert_eq!(r[b].attached_seen, Some(1.9));
        let report = t.report();
        assert_eq!((report.sent, report.bound, report.attached), (2, 2, 2));
        assert_eq!(report.bind_ms.count, 2);
        assert!((report.bind_ms.max - 400.0).abs() < 1.0, "{report:?}");
        assert!((report.attach_ms.max - 300.0).abs() < 1.0, "{report:?}");
    }

    #[test]
    fn deleted_claims_are_gone_when_seen_deleted_404_or_absent_from_a_list() {
        let mut t = ClaimTracker::default();
        for name in ["a", "b", "c", "d"] {
            let i = t.create_sent("ns", name, 0.0);
            t.create_answered(i, true);
        }
        t.delete_sent("ns", "a", 5.0, false);
        t.delete_sent("ns", "b", 5.0, true);
        t.delete_sent("ns", "c", 5.0, false);
        assert_eq!(t.counts().gone, 1);
        t.observe_claim(EventKind::Deleted, &claim("a", "Bound", "pv-a"), 6.0);
        t.relisted("ns", &[claim("d", "Bound", "pv-d")], 7.0);
        let c = t.counts();
        assert_eq!((c.created, c.delete_sent, c.gone), (4, 3, 3));
        assert_eq!(t.records()[3].gone_seen, None, "d was never deleted");
    }

    #[test]
    fn claim_bodies_name_the_size_and_class() {
        let plan = LoadPlan {
            claims: true,
            claim_size: "2Gi".into(),
            storage_class: Some("fast".into()),
            ..Default::default()
        };
        let c = claim_body(&plan, "r1", "ns", "p");
        assert_eq!(c["spec"]["resources"]["requests"]["storage"], "2Gi");
        assert_eq!(c["spec"]["storageClassName"], "fast");
        assert_eq!(c["metadata"]["labels"][RUN_LABEL], "r1");
        let c = claim_body(&LoadPlan::default(), "r1", "ns", "p");
        assert!(c["spec"].get("storageClassName").is_none());
    }
}
