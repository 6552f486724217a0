//! The load generator (`kemu load`, and `kemu run`'s `[load]` plan): pod create/delete
//! throughput and latency against a running cluster, clusterloader2-style.
//!
//! - [`plan`]: the `[load]` plan of a cluster config (also given to `kemu load` directly).
//! - [`client`]: the HTTP Kubernetes API client (connection pool, many calls in flight, every
//!   call timed per verb and resource).
//! - [`pacer`]: the open-loop rate limiter that keeps the target rate.
//! - [`watcher`]: one watch per namespace, started before the first create; the source of the
//!   pod measurements.
//! - [`tracker`]: the pure core that turns sends and watch events into per-pod times.
//! - [`template`]: the pod templates.
//! - [`sampler`]: CPU and RSS of the cluster's processes, every second.
//! - [`report`] and [`html`]: `load-report.json` (schema in `docs/load-report.schema.json`), the
//!   terminal summary, and `load-report.html`.
//! - [`accounting`]: the pods the API acknowledged against the pods that exist at the end.
//! - [`claims`]: the bare pods' PersistentVolumeClaims (`claims = true`), their bind and attach
//!   latencies, and the watches of claims and VolumeAttachments they come from.
//! - [`workloads`]: Deployments, StatefulSets, DaemonSets and Jobs created beside the bare
//!   pods, their pods measured per kind.
//!
//! `kemu run` calls [`run`] with the running cluster as the [`LoadTarget`].
//!
//! ## Clocks
//! Kubernetes stamps objects with whole seconds (creationTimestamp, conditions' transition
//! times), so latencies taken from them have a one-second resolution (clusterloader2 has the
//! same problem). The headline figures use the client's monotonic clock instead: a pod's life
//! starts when the client sends its create (an upper bound on the server's creation time, by
//! the create call's own latency) and each later point is when the watch saw it. The
//! server-stamped figures, by clusterloader2's definitions, are reported beside them.

pub mod accounting;
pub mod cl2;
pub mod claims;
pub mod client;
pub mod html;
pub mod nodes;
pub mod pacer;
pub mod plan;
pub mod report;
pub mod sampler;
pub mod template;
pub mod tracker;
pub mod watcher;
pub mod workloads;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use hyper::{Method, StatusCode};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use parking_lot::Mutex;
use serde_json::json;
use tokio::sync::{oneshot, watch, Semaphore};
use tokio::time::Instant;
use tracing::Instrument;

use crate::accounting::{AccountingReport, AckLog, ObservedPod};
use crate::claims::{ClaimTracker, ObjectWatch, Watched};
use client::ApiClient;
use cluster::shutdown::Interrupt;
pub use plan::LoadPlan;
use report::{LoadAccounting, LoadReport, Percentiles, PhaseReport, PhaseStatus, SloCheck};
use template::{PodTemplate, RUN_LABEL};
use tracker::{Counts, PodRecord, Tracker};
use watcher::NamespaceWatch;
pub use watcher::WatchHistory;
use workloads::{WorkloadTracker, Workloads, WORKLOAD_RUN_LABEL};

/// One kemu process whose CPU and memory the load run samples.
#[derive(Clone, Debug)]
pub struct SampledProcess {
    /// Component name, e.g. `store-s1`, `apiserver-1`, `nodehost-2`.
    pub name: String,
    pub pid: u32,
}

/// Where the load goes and where its report is written.
#[derive(Clone, Debug)]
pub struct LoadTarget {
    /// The kubeconfig and context whose server and credentials the load uses.
    pub kubeconfig: cluster::api_access::KubeconfigChoice,
    /// Directory for `load-report.json` and `load-report.html`.
    pub report_dir: PathBuf,
    pub processes: Vec<SampledProcess>,
    /// Record every event the pod watches deliver (for the chaos watch check).
    pub record_watch: bool,
    /// With `record_watch`: other API servers (URLs, same credentials) to watch the run's pods
    /// through as well, one watch per namespace each, only to record what they deliver (each
    /// API server's watch cache is fed by its own store watch; the chaos check compares each).
    pub extra_watch_servers: Vec<String>,
    /// Other API servers (URLs, same credentials) the load's requests are spread over, in turn
    /// with the kubeconfig's, as through a load balancer; watches stay on the kubeconfig's.
    pub spread_servers: Vec<String>,
}

/// What a finished run produced.
#[derive(Clone, Debug)]
pub struct LoadOutcome {
    /// Every SLO check passed and every pod was accounted for (never after an interrupt).
    pub passed: bool,
    /// A stop signal cut the run short; the report holds what was measured until then.
    pub interrupted: bool,
    pub report_json: PathBuf,
    pub report_html: PathBuf,
    /// The terminal summary table.
    pub summary: String,
    pub report: LoadReport,
    /// The creates and deletes the API acknowledged.
    pub acks: AckLog,
    /// Per namespace, when `record_watch` was asked for.
    pub watch_histories: Vec<WatchHistory>,
    /// Every pod of the run, when `record_watch` was asked for (a chaos run times its
    /// recoveries with them).
    pub records: Vec<PodRecord>,
}

/// The namespace of load namespace `i`.
pub fn namespace_name(i: u32) -> String {
    format!("kemu-load-{i}")
}

/// Attempts of one create or delete before it counts as failed: with the doubling pause from
/// 100 ms, about 6 s — long enough to ride out a restarted API server (retrying a create that
/// got no answer is safe: 409 AlreadyExists after a retry counts as created).
const ATTEMPTS: u32 = 7;

/// Live progress bars, one per phase (drawn only when stderr is a terminal).
struct Progress {
    bars: MultiProgress,
}

impl Progress {
    fn new() -> Self {
        Progress {
            bars: MultiProgress::new(),
        }
    }

    fn bar(&self, name: &str, len: u64) -> ProgressBar {
        let bar = self.bars.add(ProgressBar::new(len));
        bar.set_style(
            ProgressStyle::with_template(
                "{prefix:>22} [{bar:40}] {pos:>7}/{len:7} {per_sec:>12} {elapsed:>4}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        bar.set_prefix(name.to_string());
        bar
    }
}

/// What every phase of a run shares.
struct Run {
    plan: LoadPlan,
    run_id: String,
    client: ApiClient,
    template: PodTemplate,
    tracker: Arc<Mutex<Tracker>>,
    /// The bare pods' claims (none unless the plan has `claims`).
    claims: Arc<Mutex<ClaimTracker>>,
    start: Instant,
    permits: Arc<Semaphore>,
    progress: Progress,
    phases: Vec<PhaseReport>,
    next_pod: u64,
    acks: Arc<Mutex<AckLog>>,
    /// The first stop signal ends the current phase and starts no other.
    interrupt: Interrupt,
    /// When it came, seconds since the start (set by the phase it cut short).
    interrupted_at: Option<f64>,
}

/// Retry a call that got no answer, or an answer that says "try again".
fn retryable(code: u16) -> bool {
    matches!(code, 0 | 429 | 500 | 502 | 503 | 504)
}

/// How a call sent with [`send_with_retries`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sent {
    Done,
    /// 409 after a retry: an earlier attempt went through.
    Conflict,
    NotFound,
    Failed,
}

/// Sends a create or delete, retrying as the pods' are.
async fn send_with_retries(
    client: &ApiClient,
    verb: &str,
    resource: &str,
    method: Method,
    path: &str,
    body: &serde_json::Value,
) -> Sent {
    for attempt in 0..ATTEMPTS {
        let code = match client
            .call_json(verb, resource, method.clone(), path, body)
            .await
        {
            Ok(r) => r.status.as_u16(),
            Err(_) => 0,
        };
        match code {
            200..=299 => return Sent::Done,
            409 if attempt > 0 => return Sent::Conflict,
            404 => return Sent::NotFound,
            _ if !retryable(code) => return Sent::Failed,
            _ => tokio::time::sleep(Duration::from_millis(100 << attempt)).await,
        }
    }
    Sent::Failed
}

impl Run {
    fn now(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// Whether a stop signal came; notes when, the first time it is seen.
    fn interrupted(&mut self) -> bool {
        if self.interrupted_at.is_none() && self.interrupt.requested() {
            self.interrupted_at = Some(self.now());
        }
        self.interrupted_at.is_some()
    }

    /// The status of a phase that just ended, `finished` telling whether it did all its work.
    fn ended(&mut self, finished: bool) -> PhaseStatus {
        if finished {
            PhaseStatus::Completed
        } else if self.interrupted() {
            PhaseStatus::Interrupted
        } else {
            PhaseStatus::TimedOut
        }
    }

    /// After an interrupt: the plan's phases after the last one that started, as not started.
    fn not_started(&mut self) {
        let at = self.interrupted_at.unwrap_or_else(|| self.now());
        let planned = report::planned_phases(&self.plan);
        let next = match self.phases.last() {
            Some(last) => planned
                .iter()
                .position(|&(kind, cycle)| kind == last.kind && cycle == last.cycle)
                .map_or(planned.len(), |i| i + 1),
            None => 0,
        };
        for &(kind, cycle) in &planned[next..] {
            self.phases.push(PhaseReport {
                kind: kind.into(),
                cycle,
                start_s: at,
                end_s: at,
                ops: None,
                target_rate: None,
                achieved_rate: None,
                send_lag_ms: None,
                completed: false,
                status: PhaseStatus::NotStarted,
            });
        }
    }

    fn selector(&self) -> String {
        format!("{RUN_LABEL}={}", self.run_id)
    }

    fn phase_name(kind: &str, cycle: u32) -> String {
        if cycle == 0 {
            kind.to_string()
        } else {
            format!("churn {cycle} {kind}")
        }
    }

    /// Creates `count` pods at the plan's rate.
    async fn create_phase(&mut self, count: u64, cycle: u32) {
        let name = Self::phase_name("create", cycle);
        tracing::info!("load: {name}: {count} pods at {}/s", self.plan.rate);
        let bar = self.progress.bar(&name, count);
        let first = self.next_pod;
        self.next_pod += count;
        let start_s = self.now();
        let items: Vec<u64> = (first..first + count).collect();
        let (client, template, tracker, start, run_id, acks) = (
            self.client.clone(),
            self.template.clone(),
            self.tracker.clone(),
            self.start,
            self.run_id.clone(),
            self.acks.clone(),
        );
        let (plan, claims) = (self.plan.clone(), self.claims.clone());
        let namespaces = self.plan.namespaces;
        let interrupt = self.interrupt.clone();
        let stats = pacer::paced(
            items,
            self.plan.rate,
            &self.permits,
            self.plan.max_in_flight,
            interrupt.first(),
            |i| {
                let ns_index = (i % namespaces as u64) as u32;
                let namespace = namespace_name(ns_index);
                let name = format!("load-{run_id}-{i}");
                // A pod's claim is created just before it, under the pod's name.
                let claim = plan.pod_has_claim(i).then(|| {
                    let body = claims::claim_body(&plan, &run_id, &namespace, &name);
                    let index =
                        claims
                            .lock()
                            .create_sent(&namespace, &name, start.elapsed().as_secs_f64());
                    (index, body)
                });
                let index = tracker.lock().create_sent(
                    &name,
                    ns_index,
                    cycle,
                    start.elapsed().as_secs_f64(),
                );
                bar.inc(1);
                let (client, template, tracker, acks, claims) = (
                    client.clone(),
                    template.clone(),
                    tracker.clone(),
                    acks.clone(),
                    claims.clone(),
                );
                async move {
                    let body = match claim {
                        Some((claim_index, claim)) => {
                            let path =
                                format!("/api/v1/namespaces/{namespace}/persistentvolumeclaims");
                            let created = send_with_retries(
                                &client,
                                "create",
                                "persistentvolumeclaims",
                                Method::POST,
                                &path,
                                &claim,
                            )
                            .await;
                            claims.lock().create_answered(
                                claim_index,
                                matches!(created, Sent::Done | Sent::Conflict),
                            );
                            template.pod_with_claim(&namespace, &name, &name)
                        }
                        None => template.pod(&namespace, &name),
                    };
                    let path = format!("/api/v1/namespaces/{namespace}/pods");
                    let mut outcome = Some(0);
                    for attempt in 0..ATTEMPTS {
                        let code = match client
                            .call_json("create", "pods", Method::POST, &path, &body)
                            .await
                        {
                            Ok(r) => {
                                if r.status.is_success() {
                                    // Acknowledged, with the uid the API server gave the pod.
                                    let uid = r
                                        .json()
                                        .ok()
                                        .and_then(|v| {
                                            v["metadata"]["uid"].as_str().map(str::to_string)
                                        })
                                        .unwrap_or_default();
                                    acks.lock().created.push((
                                        namespace.clone(),
                                        name.clone(),
                                        uid,
                                    ));
                                }
                                r.status.as_u16()
                            }
                            Err(_) => 0,
                        };
                        // AlreadyExists after a retry: an earlier attempt went through.
                        if (200..300).contains(&code) || (code == 409 && attempt > 0) {
                            outcome = None;
                            break;
                        }
                        outcome = Some(code);
                        if !retryable(code) {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
                    }
                    tracker.lock().create_answered(index, outcome);
                }
            },
        )
        .await;
        bar.finish();
        let status = self.ended(!stats.stopped);
        self.phases.push(PhaseReport {
            kind: "create".into(),
            cycle,
            start_s,
            end_s: self.now(),
            ops: Some(stats.ops),
            target_rate: Some(stats.target_rate),
            achieved_rate: Some(stats.achieved_rate),
            send_lag_ms: Some(Percentiles::from_us(&stats.lag_us)),
            completed: !stats.stopped,
            status,
        });
    }

    /// Deletes the pods `indices` at the plan's delete rate.
    async fn delete_phase(&mut self, indices: Vec<usize>, cycle: u32) {
        let name = Self::phase_name("delete", cycle);
        let rate = self.plan.effective_delete_rate();
        tracing::info!("load: {name}: {} pods at {rate}/s", indices.len());
        let bar = self.progress.bar(&name, indices.len() as u64);
        let start_s = self.now();
        let (client, tracker, start, acks, claims) = (
            self.client.clone(),
            self.tracker.clone(),
            self.start,
            self.acks.clone(),
            self.claims.clone(),
        );
        let body = match self.plan.delete_grace_seconds {
            Some(g) => {
                json!({"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": g})
            }
            None => json!({"apiVersion": "v1", "kind": "DeleteOptions"}),
        };
        let interrupt = self.interrupt.clone();
        let stats = pacer::paced(
            indices,
            rate,
            &self.permits,
            self.plan.max_in_flight,
            interrupt.first(),
            |index| {
                let (namespace, name) = {
                    let mut tracker = tracker.lock();
                    tracker.delete_sent(index, start.elapsed().as_secs_f64());
                    let r = &tracker.records()[index];
                    (namespace_name(r.namespace), r.name.clone())
                };
                let path = format!("/api/v1/namespaces/{namespace}/pods/{name}");
                bar.inc(1);
                let (client, tracker, body, acks, claims) = (
                    client.clone(),
                    tracker.clone(),
                    body.clone(),
                    acks.clone(),
                    claims.clone(),
                );
                async move {
                    let mut failed = true;
                    let mut gone = false;
                    for attempt in 0..ATTEMPTS {
                        let code = match client
                            .call_json("delete", "pods", Method::DELETE, &path, &body)
                            .await
                        {
                            Ok(r) => r.status.as_u16(),
                            Err(_) => 0,
                        };
                        if (200..300).contains(&code) {
                            failed = false;
                            break;
                        }
                        if code == StatusCode::NOT_FOUND.as_u16() {
                            (failed, gone) = (false, true);
                            break;
                        }
                        if !retryable(code) {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
                    }
                    let t = start.elapsed().as_secs_f64();
                    if failed {
                        acks.lock()
                            .delete_unanswered
                            .push((namespace.clone(), name.clone()));
                    } else {
                        acks.lock().deleted.push((namespace.clone(), name.clone()));
                    }
                    tracker.lock().delete_answered(index, failed, gone, t);
                    // The claim goes after its pod (the pvc-protection finalizer holds it until
                    // the pod is gone).
                    if claims.lock().has(&namespace, &name) {
                        let path =
                            format!("/api/v1/namespaces/{namespace}/persistentvolumeclaims/{name}");
                        let t = start.elapsed().as_secs_f64();
                        let sent = send_with_retries(
                            &client,
                            "delete",
                            "persistentvolumeclaims",
                            Method::DELETE,
                            &path,
                            &json!({"apiVersion": "v1", "kind": "DeleteOptions"}),
                        )
                        .await;
                        if !matches!(sent, Sent::Failed) {
                            claims.lock().delete_sent(
                                &namespace,
                                &name,
                                t,
                                matches!(sent, Sent::NotFound),
                            );
                        }
                    }
                }
            },
        )
        .await;
        bar.finish();
        let status = self.ended(!stats.stopped);
        self.phases.push(PhaseReport {
            kind: "delete".into(),
            cycle,
            start_s,
            end_s: self.now(),
            ops: Some(stats.ops),
            target_rate: Some(stats.target_rate),
            achieved_rate: Some(stats.achieved_rate),
            send_lag_ms: Some(Percentiles::from_us(&stats.lag_us)),
            completed: !stats.stopped,
            status,
        });
    }

    /// Records a phase of the workloads (no pacing figures).
    fn workload_phase(&mut self, kind: &str, start_s: f64, ops: Option<u64>, completed: bool) {
        let status = self.ended(completed);
        self.phases.push(PhaseReport {
            kind: kind.into(),
            cycle: 0,
            start_s,
            end_s: self.now(),
            ops,
            target_rate: None,
            achieved_rate: None,
            send_lag_ms: None,
            completed,
            status,
        });
    }

    /// Waits until `done(counts)` or the timeout; the bar shows `progress(counts)` of `total`.
    async fn wait_phase(
        &mut self,
        kind: &str,
        cycle: u32,
        timeout: f64,
        total: impl Fn(&Counts) -> u64,
        reached: impl Fn(&Counts) -> u64,
    ) -> bool {
        let tracker = self.tracker.clone();
        self.wait_until(kind, cycle, timeout, move || {
            let counts = tracker.lock().counts();
            (reached(&counts), total(&counts))
        })
        .await
    }

    /// Waits until `probe()`'s reached count is its total, or the timeout.
    async fn wait_until(
        &mut self,
        kind: &str,
        cycle: u32,
        timeout: f64,
        probe: impl Fn() -> (u64, u64),
    ) -> bool {
        let name = Self::phase_name(kind, cycle);
        let (_, first_total) = probe();
        let bar = self.progress.bar(&name, first_total);
        let start_s = self.now();
        let deadline = self.start + Duration::from_secs_f64(start_s + timeout);
        let completed = loop {
            let (reached, total) = probe();
            bar.set_length(total);
            bar.set_position(reached.min(total));
            if reached >= total {
                break true;
            }
            if self.interrupted() {
                tracing::warn!("load: {name}: interrupted with {reached} of {total}");
                break false;
            }
            if Instant::now() >= deadline {
                tracing::warn!(
                    "load: {name}: timed out after {timeout} s with {reached} of {total}"
                );
                break false;
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                _ = self.interrupt.first() => {}
            }
        };
        bar.finish();
        let status = self.ended(completed);
        self.phases.push(PhaseReport {
            kind: kind.into(),
            cycle,
            start_s,
            end_s: self.now(),
            ops: None,
            target_rate: None,
            achieved_rate: None,
            send_lag_ms: None,
            completed,
            status,
        });
        completed
    }

    async fn wait_running(&mut self, cycle: u32) -> bool {
        let timeout = self.plan.running_timeout_seconds;
        self.wait_phase("wait_running", cycle, timeout, |c| c.created, |c| c.running)
            .await
    }

    async fn wait_gone(&mut self, cycle: u32) -> bool {
        let timeout = self.plan.gone_timeout_seconds;
        self.wait_phase(
            "wait_gone",
            cycle,
            timeout,
            |c| c.delete_sent - c.delete_failed,
            |c| c.gone,
        )
        .await
    }

    /// Waits until every deleted claim is gone, then until no PersistentVolume is left bound
    /// to a claim of the run (reclaim `Delete` removes them); counts what is left either way.
    async fn wait_claims_gone(&mut self) -> (Option<u64>, Option<u64>) {
        let timeout = self.plan.claims_gone_timeout_seconds;
        let claims = self.claims.clone();
        let gone = self
            .wait_until("wait_claims_gone", 0, timeout, move || {
                let c = claims.lock().counts();
                (c.gone, c.delete_sent)
            })
            .await;
        let start_s = self.now();
        let deadline = self.start + Duration::from_secs_f64(start_s + timeout);
        let mut volumes = self.volumes_left().await;
        while gone && volumes != Some(0) && Instant::now() < deadline && !self.interrupted() {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                _ = self.interrupt.first() => {}
            }
            volumes = self.volumes_left().await;
        }
        let completed = volumes == Some(0);
        let status = self.ended(completed);
        self.phases.push(PhaseReport {
            kind: "wait_volumes_reclaimed".into(),
            cycle: 0,
            start_s,
            end_s: self.now(),
            ops: None,
            target_rate: None,
            achieved_rate: None,
            send_lag_ms: None,
            completed,
            status,
        });
        (self.claims_left().await, volumes)
    }

    /// Claims of the run the API lists, over all namespaces.
    async fn claims_left(&self) -> Option<u64> {
        let path = format!(
            "/api/v1/persistentvolumeclaims?labelSelector={}",
            watcher::encode(&self.selector())
        );
        let r = self
            .client
            .call(
                "list",
                "persistentvolumeclaims",
                Method::GET,
                &path,
                None,
                Default::default(),
            )
            .await
            .ok()?;
        let list: serde_json::Value = serde_json::from_slice(&r.body).ok()?;
        r.status
            .is_success()
            .then(|| list["items"].as_array().map_or(0, |i| i.len() as u64))
    }

    /// PersistentVolumes whose claimRef names a claim of the run.
    async fn volumes_left(&self) -> Option<u64> {
        let r = self
            .client
            .call(
                "list",
                "persistentvolumes",
                Method::GET,
                "/api/v1/persistentvolumes",
                None,
                Default::default(),
            )
            .await
            .ok()?;
        if !r.status.is_success() {
            return None;
        }
        let list: serde_json::Value = serde_json::from_slice(&r.body).ok()?;
        // A bare pod's claim is named as the pod, a StatefulSet's `data-SET-ORDINAL`.
        let prefix = format!("load-{}-", self.run_id);
        let set_prefix = format!("{}-{prefix}", template::CLAIM_VOLUME);
        let ours = |pv: &&serde_json::Value| {
            let claim = &pv["spec"]["claimRef"];
            claim["name"]
                .as_str()
                .is_some_and(|n| n.starts_with(&prefix) || n.starts_with(&set_prefix))
                && claim["namespace"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("kemu-load-"))
        };
        Some(
            list["items"]
                .as_array()
                .map_or(0, |items| items.iter().filter(ours).count() as u64),
        )
    }

    /// Pods of the run the API lists, over all namespaces, a page at a time: a single list of
    /// 300,000 pods is most of a gigabyte of JSON, which the API server would build and this
    /// process parse all at once, at the moment every pod is held. Each page is decoded into
    /// the few fields accounting reads.
    async fn api_list(&self) -> Option<Vec<ObservedPod>> {
        #[derive(serde::Deserialize)]
        struct Page {
            #[serde(default)]
            metadata: PageMeta,
            #[serde(default)]
            items: Vec<Item>,
        }
        #[derive(serde::Deserialize, Default)]
        struct PageMeta {
            #[serde(rename = "continue", default)]
            continue_token: Option<String>,
        }
        #[derive(serde::Deserialize, Default)]
        #[serde(rename_all = "camelCase")]
        struct ItemMeta {
            #[serde(default)]
            namespace: String,
            #[serde(default)]
            name: String,
            #[serde(default)]
            uid: String,
            deletion_timestamp: Option<serde::de::IgnoredAny>,
        }
        #[derive(serde::Deserialize, Default)]
        struct ItemStatus {
            #[serde(default)]
            phase: String,
        }
        #[derive(serde::Deserialize)]
        struct Item {
            #[serde(default)]
            metadata: ItemMeta,
            #[serde(default)]
            status: ItemStatus,
        }
        const PAGE: usize = 500;
        let mut pods = Vec::new();
        let mut continue_token: Option<String> = None;
        loop {
            let mut path = format!(
                "/api/v1/pods?labelSelector={}&limit={PAGE}",
                watcher::encode(&self.selector())
            );
            if let Some(token) = &continue_token {
                path.push_str(&format!("&continue={}", watcher::encode(token)));
            }
            let response = self
                .client
                .call("list", "pods", Method::GET, &path, None, Default::default())
                .await
                .ok()?;
            if !response.status.is_success() {
                return None;
            }
            let page: Page = serde_json::from_slice(&response.body).ok()?;
            pods.extend(page.items.into_iter().map(|item| ObservedPod {
                namespace: item.metadata.namespace,
                name: item.metadata.name,
                uid: item.metadata.uid,
                phase: item.status.phase,
                terminating: item.metadata.deletion_timestamp.is_some(),
            }));
            match page.metadata.continue_token.filter(|t| !t.is_empty()) {
                Some(token) => continue_token = Some(token),
                None => return Some(pods),
            }
        }
    }

    /// Lists the run's pods and accounts for them against the acknowledgements, again until
    /// they are accounted for or 30 s pass (a list may lag the watch that ended the phase, or
    /// meet an API server that chaos just killed). The listing's length and the verdict.
    /// After an interrupt the check excuses pods still Pending
    /// ([`accounting::check_interrupted`]) and gives up after [`INTERRUPTED_ACCOUNTING`] (the
    /// report is waited for); a stop signal during the retries ends them.
    async fn account(&self) -> (Option<u64>, Option<AccountingReport>) {
        let interrupted = self.interrupted_at.is_some();
        let patience = if interrupted {
            INTERRUPTED_ACCOUNTING
        } else {
            Duration::from_secs(30)
        };
        let deadline = Instant::now() + patience;
        let mut last = (None, None);
        loop {
            let listed = if interrupted {
                tokio::time::timeout_at(deadline, self.api_list())
                    .await
                    .ok()
                    .flatten()
            } else {
                self.api_list().await
            };
            if let Some(pods) = listed {
                let report = if interrupted {
                    accounting::check_interrupted(&self.acks.lock(), &pods)
                } else {
                    accounting::check(&self.acks.lock(), &pods)
                };
                let passed = report.passed;
                last = (Some(pods.len() as u64), Some(report));
                if passed {
                    return last;
                }
            }
            if Instant::now() >= deadline || self.interrupt.requested() {
                return last;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// After a stop signal, how long the listing of the run's pods for the accounting may take (a
/// listing of 300,000 pods takes seconds); without one the report says `at_end: null`.
const INTERRUPTED_ACCOUNTING: Duration = Duration::from_secs(10);

/// Creates the load namespaces (existing ones are fine).
async fn ensure_namespaces(client: &ApiClient, count: u32) -> anyhow::Result<()> {
    for i in 0..count {
        let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace_name(i)}});
        let response = client
            .call_json(
                "create",
                "namespaces",
                Method::POST,
                "/api/v1/namespaces",
                &body,
            )
            .await?;
        if !response.status.is_success() && response.status != StatusCode::CONFLICT {
            bail!(
                "creating namespace {} answered {}: {}",
                namespace_name(i),
                response.status,
                String::from_utf8_lossy(&response.body)
            );
        }
    }
    Ok(())
}

/// How long the load waits for a namespace's `default` ServiceAccount before creating pods.
const SERVICE_ACCOUNT_WAIT: Duration = Duration::from_secs(60);

/// Waits until each load namespace has its `default` ServiceAccount, which the controller
/// manager creates after the namespace: until then the ServiceAccount admission plugin refuses
/// pods with 403 (`serviceaccount "default" not found`), as kube-apiserver does, and on a
/// cluster busy enough the account can take seconds to come. Gives up after
/// [`SERVICE_ACCOUNT_WAIT`] (a cluster without the plugin or the controller never makes one)
/// and lets the creates find out.
async fn wait_default_service_accounts(client: &ApiClient, count: u32) {
    let deadline = Instant::now() + SERVICE_ACCOUNT_WAIT;
    for i in 0..count {
        let path = format!(
            "/api/v1/namespaces/{}/serviceaccounts/default",
            namespace_name(i)
        );
        loop {
            let found = client
                .call(
                    "get",
                    "serviceaccounts",
                    Method::GET,
                    &path,
                    None,
                    hyper::body::Bytes::new(),
                )
                .await
                .is_ok_and(|r| r.status.is_success());
            if found {
                break;
            }
            if Instant::now() >= deadline {
                tracing::warn!(
                    namespace = %namespace_name(i),
                    "no default ServiceAccount after {SERVICE_ACCOUNT_WAIT:?}; creating pods anyway"
                );
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// A short id naming the run's pods and label.
fn new_run_id() -> String {
    format!("{:08x}", rand::random::<u32>())
}

/// Runs `plan` against `target`: the phases, then the report. The first stop signal of
/// `interrupt` ends the phase under way and starts no other: the pods are accounted for, the
/// processes sampled once more, and the report of what was measured until then written, marked
/// interrupted (the caller keeps the cluster up until this returns).
pub async fn run(
    plan: &LoadPlan,
    target: &LoadTarget,
    interrupt: &Interrupt,
) -> anyhow::Result<LoadOutcome> {
    plan.validate()?;
    let (server, credentials) = target.kubeconfig.load()?;
    let client =
        ApiClient::new(&server, &credentials, plan.http2)?.spread_over(&target.spread_servers);
    let run_id = new_run_id();
    let template = PodTemplate::from_plan(plan, &run_id)?;
    std::fs::create_dir_all(&target.report_dir)
        .with_context(|| format!("creating {}", target.report_dir.display()))?;
    let start = Instant::now();
    let wall_start = chrono::Utc::now();
    let tracker = Arc::new(Mutex::new(Tracker::new(wall_start)));
    tracing::info!("load: run {run_id} against {}", client.servers().join(", "));

    let (stop_tx, stop_rx) = watch::channel(false);
    let mut processes = target.processes.clone();
    processes.push(SampledProcess {
        name: "kemu-load".into(),
        pid: std::process::id(),
    });
    let sampler = tokio::spawn(sampler::sample(processes, start, stop_rx.clone()));
    // The nodes' Ready conditions through the run (heartbeats that did not keep up).
    let node_watch = tokio::spawn(nodes::watch_nodes(client.clone(), start, stop_rx.clone()));

    ensure_namespaces(&client, plan.namespaces).await?;
    wait_default_service_accounts(&client, plan.namespaces).await;
    let mut watchers = Vec::new();
    let mut histories = Vec::new();
    let mut ready = Vec::new();
    for i in 0..plan.namespaces {
        let (tx, rx) = oneshot::channel();
        ready.push(rx);
        let history = target.record_watch.then(|| {
            Arc::new(Mutex::new(WatchHistory {
                namespace: namespace_name(i),
                server: server.clone(),
                ..Default::default()
            }))
        });
        histories.extend(history.clone());
        let watch = NamespaceWatch {
            client: client.clone(),
            namespace: namespace_name(i),
            namespace_index: i,
            selector: format!("{RUN_LABEL}={run_id}"),
            tracker: tracker.clone(),
            run_start: start,
            history,
        };
        let span = tracing::info_span!("load_watch", namespace = %namespace_name(i));
        watchers.push(tokio::spawn(
            watch.run(tx, stop_rx.clone()).instrument(span),
        ));
    }
    // The workloads' pods, on watches of their own.
    let workload_tracker = Arc::new(Mutex::new(WorkloadTracker::default()));
    if !plan.workloads.is_empty() {
        for i in 0..plan.namespaces {
            let (tx, rx) = oneshot::channel();
            ready.push(rx);
            let watch = NamespaceWatch {
                client: client.clone(),
                namespace: namespace_name(i),
                namespace_index: i,
                selector: format!("{WORKLOAD_RUN_LABEL}={run_id}"),
                tracker: workload_tracker.clone(),
                run_start: start,
                history: None,
            };
            let span = tracing::info_span!("workload_watch", namespace = %namespace_name(i));
            watchers.push(tokio::spawn(
                watch.run(tx, stop_rx.clone()).instrument(span),
            ));
        }
    }
    // The claims (the bare pods' and the StatefulSets') and the attachments of their volumes.
    let claims = Arc::new(Mutex::new(ClaimTracker::default()));
    if plan.any_claims() {
        let mut watched: Vec<(Watched, String)> = (0..plan.namespaces)
            .map(|i| (Watched::Claims, namespace_name(i)))
            .collect();
        watched.push((Watched::VolumeAttachments, String::new()));
        for (what, namespace) in watched {
            let (tx, rx) = oneshot::channel();
            ready.push(rx);
            let span = tracing::info_span!("claim_watch", namespace = %namespace);
            let watch = ObjectWatch {
                client: client.clone(),
                watched: what,
                namespace,
                selector: format!("{RUN_LABEL}={run_id}"),
                tracker: claims.clone(),
                run_start: start,
            };
            watchers.push(tokio::spawn(
                watch.run(tx, stop_rx.clone()).instrument(span),
            ));
        }
    }
    // Recording-only watches through the other API servers, each with a tracker of its own
    // that nothing reads: the load's measurements come from the watches above.
    let extra_servers = if target.record_watch {
        target.extra_watch_servers.as_slice()
    } else {
        &[]
    };
    for extra in extra_servers {
        let extra_client = ApiClient::new(extra, &credentials, plan.http2)?;
        let extra_tracker = Arc::new(Mutex::new(Tracker::new(wall_start)));
        for i in 0..plan.namespaces {
            let (tx, rx) = oneshot::channel();
            ready.push(rx);
            let history = Arc::new(Mutex::new(WatchHistory {
                namespace: namespace_name(i),
                server: extra.clone(),
                ..Default::default()
            }));
            histories.push(history.clone());
            let watch = NamespaceWatch {
                client: extra_client.clone(),
                namespace: namespace_name(i),
                namespace_index: i,
                selector: format!("{RUN_LABEL}={run_id}"),
                tracker: extra_tracker.clone(),
                run_start: start,
                history: Some(history),
            };
            let span = tracing::info_span!("recorded_watch", namespace = %namespace_name(i), server = %extra);
            watchers.push(tokio::spawn(
                watch.run(tx, stop_rx.clone()).instrument(span),
            ));
        }
    }
    let all_ready = futures::future::join_all(ready);
    tokio::select! {
        opened = tokio::time::timeout(Duration::from_secs(30), all_ready) => {
            if opened.is_err() {
                let _ = stop_tx.send(true);
                bail!("the pod watches did not open within 30 s");
            }
        }
        // Reported below: interrupted before the first phase.
        _ = interrupt.first() => {}
    }

    let workloads = Workloads {
        client: client.clone(),
        plan: plan.clone(),
        run_id: run_id.clone(),
        pod_spec: template.spec(),
        tracker: workload_tracker.clone(),
        claims: claims.clone(),
        start,
    };
    let mut run = Run {
        plan: plan.clone(),
        run_id: run_id.clone(),
        client: client.clone(),
        template,
        tracker: tracker.clone(),
        claims: claims.clone(),
        start,
        permits: Arc::new(Semaphore::new(plan.max_in_flight as usize)),
        progress: Progress::new(),
        phases: Vec::new(),
        next_pod: 0,
        acks: Arc::default(),
        interrupt: interrupt.clone(),
        interrupted_at: None,
    };

    let mut api_listed_when_running = None;
    let mut accounted = LoadAccounting::default();
    // Each phase starts only if no stop signal came; the one under way when it comes ends
    // early and says so.
    let mut healthy = false;
    if !run.interrupted() {
        // The bare pods and the workloads are created side by side, each at its own rate.
        let permits = run.permits.clone();
        let start_s = run.now();
        let (_, made) = tokio::join!(
            run.create_phase(plan.pods, 0),
            workloads.create(&permits, interrupt)
        );
        if !plan.workloads.is_empty() {
            let made = made?;
            let finished = !run.interrupted();
            run.workload_phase("create_workloads", start_s, Some(made), finished);
        }
    }
    if !run.interrupted() {
        healthy = run.wait_running(0).await;
    }
    if !plan.workloads.is_empty() && !run.interrupted() {
        let start_s = run.now();
        let timeout = Duration::from_secs_f64(plan.running_timeout_seconds);
        let rolled_out = workloads
            .wait(timeout, interrupt.first(), |t| t.not_yet_running() == 0)
            .await;
        run.workload_phase("wait_workloads_running", start_s, None, rolled_out);
        healthy &= rolled_out;
    }
    if !run.interrupted() {
        // Even after a timeout: the pods that never ran are what the check reports.
        let (listed, when_running) = run.account().await;
        accounted.when_running = when_running;
        if healthy {
            api_listed_when_running = listed;
        }
    }
    if plan.hold_seconds > 0.0 && !run.interrupted() {
        let start_s = run.now();
        tracing::info!("load: hold for {} s", plan.hold_seconds);
        let held = tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs_f64(plan.hold_seconds)) => true,
            _ = interrupt.first() => false,
        };
        let status = run.ended(held);
        run.phases.push(PhaseReport {
            kind: "hold".into(),
            cycle: 0,
            start_s,
            end_s: run.now(),
            ops: None,
            target_rate: None,
            achieved_rate: None,
            send_lag_ms: None,
            completed: held,
            status,
        });
    }
    for cycle in 1..=plan.churn_cycles {
        if !healthy || run.interrupted() {
            break;
        }
        let victims: Vec<usize> = {
            let tracker = tracker.lock();
            tracker
                .live_running()
                .into_iter()
                .take(plan.churn_pods() as usize)
                .collect()
        };
        let count = victims.len() as u64;
        run.delete_phase(victims, cycle).await;
        if run.interrupted() {
            break;
        }
        healthy = run.wait_gone(cycle).await;
        if run.interrupted() {
            break;
        }
        run.create_phase(count, cycle).await;
        if run.interrupted() {
            break;
        }
        healthy &= run.wait_running(cycle).await;
    }
    let mut claims_left = (None, None);
    if plan.delete && !run.interrupted() {
        let live = tracker.lock().live();
        run.delete_phase(live, 0).await;
        if !run.interrupted() {
            run.wait_gone(0).await;
        }
    }
    if plan.delete && !plan.workloads.is_empty() && !run.interrupted() {
        let start_s = run.now();
        let permits = run.permits.clone();
        let deleted = workloads.delete(&permits, interrupt.first()).await;
        let finished = !run.interrupted();
        run.workload_phase("delete_workloads", start_s, Some(deleted), finished);
        if !run.interrupted() {
            let start_s = run.now();
            let timeout = Duration::from_secs_f64(plan.gone_timeout_seconds);
            let gone = workloads
                .wait(timeout, interrupt.first(), |t| t.live_pods() == 0)
                .await;
            run.workload_phase("wait_workloads_gone", start_s, None, gone);
        }
    }
    // After the bare pods and the workloads: a StatefulSet's claims go with it.
    if plan.delete && plan.any_claims() && !run.interrupted() {
        claims_left = run.wait_claims_gone().await;
    }
    let interrupted = run.interrupted();
    if interrupted {
        run.not_started();
        tracing::warn!(
            "load: interrupted at {:.1} s; accounting for the pods and writing the report",
            run.interrupted_at.unwrap_or_default()
        );
    }
    let (api_listed_at_end, at_end) = run.account().await;
    accounted.at_end = at_end;

    // The sampler takes a last sample of every process as it stops: the cluster is still up.
    let _ = stop_tx.send(true);
    for w in watchers {
        let _ = w.await;
    }
    let samples = sampler.await.unwrap_or_default();
    let nodes_report = node_watch.await.ok();
    if let Some(n) = &nodes_report {
        tracing::info!(
            "load: {} nodes, {} Ready at the start and {} at the end, {} NotReady transitions",
            n.nodes,
            n.ready_at_start,
            n.ready_at_end,
            n.not_ready_transitions
        );
    }
    let duration_s = run.now();
    let finished_at = chrono::Utc::now();

    let report = {
        let tracker = tracker.lock();
        let mut pods = report::pod_counts(&tracker, interrupted);
        pods.api_listed_when_running = api_listed_when_running;
        pods.api_listed_at_end = api_listed_at_end;
        let latency_ms = report::latencies(tracker.records());
        let workload_report = workload_tracker.lock().report();
        // The worst p99 of the bare pods and of each workload kind's pods.
        let startup_observed = latency_ms
            .get("pod_startup")
            .into_iter()
            .chain(workload_report.iter().map(|k| &k.pod_startup_ms))
            .filter(|p| p.count > 0)
            .map(|p| p.p99)
            .reduce(f64::max);
        let mut slo = vec![
            SloCheck {
                name: "pod_startup_p99_ms".into(),
                threshold: plan.slo_pod_startup_p99_ms,
                observed: startup_observed,
                passed: startup_observed.is_some_and(|p99| p99 <= plan.slo_pod_startup_p99_ms),
            },
            SloCheck {
                name: "unaccounted_pods".into(),
                threshold: 0.0,
                observed: Some(pods.unaccounted as f64),
                passed: pods.unaccounted == 0,
            },
            // Every acknowledged create exists and runs (when all ran) unless deleted, every
            // acknowledged delete is gone, nothing is duplicated: violations counted.
            SloCheck {
                name: "accounting_violations".into(),
                threshold: 0.0,
                observed: accounted
                    .at_end
                    .as_ref()
                    .map(|_| accounted.violations() as f64),
                passed: accounted.at_end.is_some() && accounted.violations() == 0,
            },
            // The plan ran to its end (1) or a stop signal cut it short (0).
            SloCheck {
                name: "run_completed".into(),
                threshold: 1.0,
                observed: Some(if interrupted { 0.0 } else { 1.0 }),
                passed: !interrupted,
            },
        ];
        if !plan.workloads.is_empty() {
            let not_rolled_out: u64 = workload_report
                .iter()
                .map(|k| k.objects - k.rolled_out)
                .sum();
            slo.push(SloCheck {
                name: "workloads_not_rolled_out".into(),
                threshold: 0.0,
                observed: Some(not_rolled_out as f64),
                passed: not_rolled_out == 0,
            });
        }
        let claims_report = plan.any_claims().then(|| {
            let claims = claims.lock();
            let mut r = claims.report();
            (r.left, r.volumes_left) = claims_left;
            let (with, without): (Vec<PodRecord>, Vec<PodRecord>) = tracker
                .records()
                .iter()
                .cloned()
                .partition(|p| claims.has(&namespace_name(p.namespace), &p.name));
            let startup = |records: &[PodRecord]| {
                report::latencies(records)
                    .remove("pod_startup")
                    .unwrap_or_default()
            };
            r.pod_startup_with_claims_ms = startup(&with);
            r.pod_startup_without_claims_ms = startup(&without);
            r
        });
        if let (Some(c), true) = (&claims_report, plan.delete) {
            // Every claim deleted is gone and its volume reclaimed.
            let left = c.left.zip(c.volumes_left).map(|(l, v)| l + v);
            slo.push(SloCheck {
                name: "claims_left".into(),
                threshold: 0.0,
                observed: left.map(|l| l as f64),
                passed: left == Some(0),
            });
        }
        let (api_calls, errors_by_code) = report::api_calls(client.stats());
        let timeline = report::timeline(tracker.records(), duration_s);
        let mut processes = report::processes(samples);
        let nodes_seen = nodes_report.as_ref().map_or(0, |n| n.nodes);
        report::memory_shares(&mut processes, &timeline, nodes_seen);
        LoadReport {
            schema: report::SCHEMA_ID.into(),
            run_id: run_id.clone(),
            server: server.clone(),
            api_servers: client.servers().to_vec(),
            started_at: wall_start.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            finished_at: finished_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            duration_s,
            plan: plan.clone(),
            passed: slo.iter().all(|c| c.passed),
            interrupted,
            interrupted_at_s: run.interrupted_at,
            slo,
            pods,
            phases: std::mem::take(&mut run.phases),
            server_stamped_latency_ms: report::server_stamped(tracker.records()),
            latency_ms,
            api_calls,
            errors_by_code,
            timeline,
            processes,
            accounting: accounted,
            workloads: workload_report,
            claims: claims_report,
            nodes: nodes_report,
        }
    };
    let (report_json, report_html, summary) = write_report(&report, &[], &target.report_dir)?;
    let acks = run.acks.lock().clone();
    Ok(LoadOutcome {
        passed: report.passed,
        interrupted,
        report_json,
        report_html,
        summary,
        report,
        acks,
        watch_histories: histories.iter().map(|h| h.lock().clone()).collect(),
        records: if target.record_watch {
            tracker.lock().records().to_vec()
        } else {
            Vec::new()
        },
    })
}

/// Writes `load-report.json` and `load-report.html` into `dir`, with the `attached` sections;
/// their paths and the terminal summary.
pub fn write_report(
    report: &LoadReport,
    attached: &[report::AttachedSection],
    dir: &std::path::Path,
) -> anyhow::Result<(PathBuf, PathBuf, String)> {
    /// The report's own keys, then each attached section's.
    #[derive(serde::Serialize)]
    struct WithSections<'a> {
        #[serde(flatten)]
        report: &'a LoadReport,
        #[serde(flatten)]
        attached: std::collections::BTreeMap<&'a str, &'a serde_json::Value>,
    }
    let mut summary = report::summary(report);
    for section in attached {
        summary.push('\n');
        summary.push_str(&section.summary);
    }
    let json = WithSections {
        report,
        attached: attached.iter().map(|s| (s.key.as_str(), &s.json)).collect(),
    };
    let report_json = dir.join("load-report.json");
    let report_html = dir.join("load-report.html");
    std::fs::write(&report_json, serde_json::to_vec_pretty(&json)?)
        .with_context(|| format!("writing {}", report_json.display()))?;
    std::fs::write(&report_html, html::render(report, &summary, attached))
        .with_context(|| format!("writing {}", report_html.display()))?;
    Ok((report_json, report_html, summary))
}
