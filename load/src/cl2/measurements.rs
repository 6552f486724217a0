//! clusterloader2's measurements, computed from the API as it defines them: PodStartupLatency
//! (a pod watch from `start` to `gather`), WaitForControlledPodsRunning (owner references),
//! WaitForRunningPods and SchedulingThroughput (all three read watch-fed caches, as
//! clusterloader2 reads informers: [`super::informer`]), WaitForBoundPVCs, and the `Sleep` and
//! `Timer` helpers; API responsiveness from every API server's `/metrics`; and, where the cluster's
//! processes are known ([`ClusterView`]), ResourceUsageSummary, EtcdMetrics and
//! SchedulingMetrics (their drivers in [`super::component_measurements`]); MetricsForE2E
//! ([`super::metrics_for_e2e`]); and the TestMetrics bundle of those and others
//! ([`super::test_metrics`]). Every other
//! clusterloader2 method is known by name and reported as not computed — never as a pass.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use parking_lot::Mutex;
use serde::Serialize;
use serde_json::{json, Value as Json};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::config::parse_duration;
use super::informer::Informer;
use super::objects::{Objects, Seen};
use super::processes::ClusterView;
use crate::client::ApiClient;
use api::selectors::LabelSelector;

/// Every measurement method clusterloader2 registers, in its current code or an earlier
/// release's (an unknown name is a config error).
pub const KNOWN: &[&str] = &[
    "APIAvailability",
    "APICallLatency",
    "APIResponsiveness",
    "APIResponsivenessPrometheus",
    "APIResponsivenessPrometheusSimple",
    "BlockProfile",
    "ChaosMonkey",
    "CiliumEndpointPropagationDelay",
    "ClusterOOMsTracker",
    "ContainerMemoryUsage",
    "ContainerRestarts",
    "CPUProfile",
    "DnsLookupLatency",
    "DNSPerformanceK8sHostnames",
    "DnsPerformanceMetrics",
    "DNSProgrammingLatency",
    "DnsPropagation",
    "EtcdMetrics",
    "Exec",
    "GenericPrometheusQuery",
    "InClusterAPIServerRequestLatency",
    "InClusterNetworkLatency",
    "JobLifecycleLatency",
    "KCMWorkQueueDepthMetrics",
    "KubeProxyIptablesRestoreFailures",
    "KubeStateMetricsLatency",
    "LoadBalancerNodeSyncLatency",
    "MemoryProfile",
    "MetricsForE2E",
    "MetricsServerLatency",
    "MetricsServerPrometheus",
    "MutexProfile",
    "NegLatency",
    "NetworkPerformanceMetrics",
    "NetworkPolicyEnforcement",
    "NetworkPolicyEnforcementLatency",
    "NetworkPolicySoakMeasurement",
    "NetworkProgrammingLatency",
    "NodeHealthTracker",
    "NodeLocalDNSLatencyPrometheus",
    "ObjectsPeriodicUpdates",
    "PeriodicPodList",
    "PodPeriodicCommand",
    "PodStartupLatency",
    "PrometheusSchedulingMetrics",
    "ResourceClaimAllocationLatency",
    "ResourceUsageSummary",
    "RestartApiserver",
    "ScaleNodes",
    "SchedulerLatency",
    "SchedulingMetrics",
    "SchedulingThroughput",
    "SchedulingThroughputPrometheus",
    "ServiceCreationLatency",
    "SetupHubbleCli",
    "Sleep",
    "SLOMeasurement",
    "SystemPodMetrics",
    "TestMetrics",
    "TestPhaseTimer",
    "Timer",
    "WaitForAvailablePVs",
    "WaitForBoundPVCs",
    "WaitForControlledPodsRunning",
    "WaitForFinishedJobs",
    "WaitForGenericK8sObjects",
    "WaitForNodes",
    "WaitForPodsRecovery",
    "WaitForPodsRestart",
    "WaitForPodsResync",
    "WaitForRunningPods",
    "WaitForRunningPodsRecovery",
    "WaitForRunningPodsRestart",
    "WaitForRunningPodsResync",
    "WatchListLatencyPrometheus",
    "WindowsResourceUsagePrometheus",
];

/// What a measurement concluded.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "status", content = "reason", rename_all = "snake_case")]
pub enum Verdict {
    Passed,
    Failed(String),
    /// kemu cannot compute it (not implemented, or what it needs is not served).
    NotComputed(String),
}

/// One measurement call's outcome.
#[derive(Clone, Debug, Serialize)]
pub struct MeasurementResult {
    pub method: String,
    pub identifier: String,
    pub action: String,
    /// Where the call is in the config: its step (0-based) and its place among the step's
    /// measurements; `None` for a start never gathered.
    pub step: Option<usize>,
    pub index: usize,
    /// From the step's start to this call's end, as clusterloader2 times a substep.
    pub duration_s: f64,
    pub verdict: Verdict,
    /// clusterloader2's summary: the file name's first part (`PodStartupLatency_ID`) and body.
    #[serde(skip)]
    pub summaries: Vec<(String, Json)>,
    pub details: Json,
}

pub(super) type Params = BTreeMap<String, Json>;

pub(super) fn param_str(params: &Params, key: &str) -> Option<String> {
    params
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .and_then(|(_, v)| match v {
            Json::String(s) => Some(s.clone()),
            Json::Null => None,
            other => Some(other.to_string()),
        })
}

pub(super) fn param_duration(
    params: &Params,
    key: &str,
    default: Duration,
) -> Result<Duration, String> {
    match param_str(params, key) {
        None => Ok(default),
        Some(s) => parse_duration(&s).ok_or_else(|| format!("{key}: invalid duration {s:?}")),
    }
}

/// A param by its key, matched as clusterloader2 matches keys (case-insensitively).
pub(super) fn param<'a>(params: &'a Params, key: &str) -> Option<&'a Json> {
    params
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .map(|(_, v)| v)
}

/// Whether a boolean param is set to true (the boolean, or the string `true`).
pub(super) fn param_true(params: &Params, key: &str) -> bool {
    param_str(params, key).is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

/// Whether a measurement CL2 runs only when switched on by `key` is on; when off, the call's
/// details say it was skipped.
pub(super) fn switched_on(params: &Params, key: &str, result: &mut MeasurementResult) -> bool {
    let on = param_true(params, key);
    if !on {
        result.details = json!({ "skipped": format!("{key} is not true") });
    }
    on
}

fn param_u64(params: &Params, key: &str) -> Option<u64> {
    param_str(params, key).and_then(|s| s.parse::<f64>().ok().map(|f| f as u64))
}

/// Server-stamped times of one pod, as the PodStartupLatency watch saw them.
#[derive(Clone, Debug, Default)]
pub(super) struct PodTimes {
    stateful: bool,
    create: Option<DateTime<Utc>>,
    schedule: Option<DateTime<Utc>>,
    run: Option<DateTime<Utc>>,
    watch: Option<DateTime<Utc>>,
}

fn stamp(v: &Json) -> Option<DateTime<Utc>> {
    v.as_str()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&Utc))
}

impl PodTimes {
    fn observe(&mut self, pod: &Json, now: DateTime<Utc>) {
        self.create = self.create.or(stamp(&pod["metadata"]["creationTimestamp"]));
        self.stateful |= pod["metadata"]["ownerReferences"]
            .as_array()
            .is_some_and(|o| o.iter().any(|r| r["kind"] == "StatefulSet"));
        if let Some(conditions) = pod["status"]["conditions"].as_array() {
            for c in conditions {
                if c["type"] == "PodScheduled" && c["status"] == "True" {
                    self.schedule = self.schedule.or(stamp(&c["lastTransitionTime"]));
                }
            }
        }
        let statuses = pod["status"]["containerStatuses"].as_array();
        let running = pod["status"]["phase"] == "Running"
            && statuses.is_some_and(|s| {
                !s.is_empty() && s.iter().all(|c| c["state"]["running"].is_object())
            });
        if running && self.watch.is_none() {
            self.watch = Some(now);
            // The last container to start is when the pod ran.
            self.run = statuses
                .into_iter()
                .flatten()
                .filter_map(|c| stamp(&c["state"]["running"]["startedAt"]))
                .max();
        }
    }
}

/// clusterloader2's percentile: the value at rank ceil(n·p/100).
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((sorted.len() as f64 * p / 100.0).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// What a started measurement keeps until its gather.
pub(super) enum Running {
    PodStartup {
        pods: Arc<Mutex<HashMap<String, PodTimes>>>,
        stop: watch::Sender<bool>,
        task: JoinHandle<()>,
        /// The `start` call's params (its thresholds).
        params: Params,
    },
    Throughput {
        samples: Arc<Mutex<Vec<f64>>>,
        stop: watch::Sender<bool>,
        task: JoinHandle<()>,
    },
    Timer(Instant),
    /// Each API server's request-duration histograms at `start` (`None`: not reached).
    Responsiveness(Vec<Option<super::api_responsiveness::Histograms>>),
    /// A wait's `start`: its params, which the `gather` call inherits.
    Started(Params),
    ResourceUsage(super::component_measurements::ResourceUsageRun),
    Etcd(super::component_measurements::EtcdRun),
    /// The schedulers' histograms at `start`.
    Scheduling(super::scheduling_metrics::Scrape),
    /// kube-system's restart counts at `start`.
    SystemPods(Vec<super::system_pod_metrics::PodRestarts>),
    Ooms(super::ooms_tracker::OomsRun),
}

/// What the measurements know beyond the kubeconfig's API server.
#[derive(Clone, Default)]
pub struct MeasurementContext {
    /// The cluster's processes, when the run knows them.
    pub cluster: Option<ClusterView>,
    /// API servers other than the kubeconfig's, for API responsiveness over all of them.
    pub other_api_servers: Vec<ApiClient>,
    /// The config's directory (measurement params name files relative to it).
    pub config_dir: std::path::PathBuf,
    /// The cluster's node count (`.Nodes` in the files measurements render).
    pub nodes: i64,
}

/// The measurements of one run.
pub struct Measurements {
    pub(super) objects: Objects,
    pub(super) context: MeasurementContext,
    pub(super) running: Mutex<HashMap<(String, String), Running>>,
    /// Watch-fed caches the waits and SchedulingThroughput read, by (apiVersion, kind).
    informers: Mutex<HashMap<(String, String), Arc<Informer>>>,
}

impl Measurements {
    pub fn new(objects: Objects, context: MeasurementContext) -> Measurements {
        Measurements {
            objects,
            context,
            running: Mutex::new(HashMap::new()),
            informers: Mutex::new(HashMap::new()),
        }
    }

    /// The cache of `kind` of `api_version`, started on first use and kept for the run (every
    /// kind but pods remembers the objects deleted since, see [`Informer`]); waits for its
    /// first list.
    async fn informer(&self, api_version: &str, kind: &str) -> Result<Arc<Informer>, String> {
        let key = (api_version.to_string(), kind.to_string());
        let existing = self.informers.lock().get(&key).cloned();
        let informer = match existing {
            Some(informer) => informer,
            None => {
                let resource = self
                    .objects
                    .resource(api_version, kind)
                    .await
                    .ok_or_else(|| format!("the API does not serve {kind} of {api_version}"))?;
                self.informers
                    .lock()
                    .entry(key)
                    .or_insert_with(|| {
                        Arc::new(Informer::start(
                            self.objects.clone(),
                            resource,
                            kind != "Pod",
                        ))
                    })
                    .clone()
            }
        };
        informer.wait_synced(INFORMER_SYNC_LIMIT).await?;
        Ok(informer)
    }

    /// The caches a WaitForControlledPodsRunning of `kind` reads.
    async fn controlled_informers(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Result<(Arc<Informer>, Arc<Informer>, Option<Arc<Informer>>), String> {
        let controllers = self.informer(api_version, kind).await?;
        let pods = self.informer("v1", "Pod").await?;
        let replica_sets = if kind == "Deployment" {
            Some(self.informer("apps/v1", "ReplicaSet").await?)
        } else {
            None
        };
        Ok((controllers, pods, replica_sets))
    }

    /// Runs one call of `method` as `identifier` with `params`.
    pub async fn execute(
        &self,
        method: &str,
        identifier: &str,
        params: &Params,
    ) -> MeasurementResult {
        let action = param_str(params, "action").unwrap_or_default();
        let mut result = MeasurementResult {
            method: method.to_string(),
            identifier: identifier.to_string(),
            action: action.clone(),
            step: None,
            index: 0,
            duration_s: 0.0,
            verdict: Verdict::Passed,
            summaries: Vec::new(),
            details: Json::Null,
        };
        let key = (method.to_string(), identifier.to_string());
        let outcome = match (method, action.as_str()) {
            ("PodStartupLatency", "start") => self.start_pod_startup(key, params).await,
            ("PodStartupLatency", "gather") => {
                self.gather_pod_startup(&key, params, &mut result).await
            }
            ("SchedulingThroughput", "start") => self.start_throughput(key, params).await,
            ("SchedulingThroughput", "gather") => {
                self.gather_throughput(&key, params, &mut result).await
            }
            ("WaitForControlledPodsRunning", "start") => {
                // The caches start now, so the wait knows the controllers deleted meanwhile.
                let api_version =
                    param_str(params, "apiVersion").unwrap_or_else(|| "apps/v1".into());
                let kind = param_str(params, "kind").unwrap_or_default();
                let started = if kind.is_empty() {
                    Err("kind is required".to_string())
                } else {
                    self.controlled_informers(&api_version, &kind)
                        .await
                        .map(|_| ())
                };
                self.running
                    .lock()
                    .insert(key, Running::Started(params.clone()));
                started
            }
            ("WaitForControlledPodsRunning", _) => {
                let mut merged = match self.running.lock().get(&key) {
                    Some(Running::Started(started)) => started.clone(),
                    _ => Params::new(),
                };
                merged.extend(params.clone());
                self.wait_controlled(&merged, &mut result).await
            }
            ("WaitForRunningPods", _) => self.wait_running(params, &mut result).await,
            ("WaitForBoundPVCs", _) => self.wait_pvcs(params, &mut result).await,
            ("Sleep", _) => match param_duration(params, "duration", Duration::ZERO) {
                Ok(d) => {
                    tokio::time::sleep(d).await;
                    result.details = json!({"seconds": d.as_secs_f64()});
                    Ok(())
                }
                Err(e) => Err(e),
            },
            (
                "APIResponsiveness"
                | "APIResponsivenessPrometheus"
                | "APIResponsivenessPrometheusSimple",
                "start",
            ) => match self.scrape().await {
                Ok(h) => {
                    self.running.lock().insert(key, Running::Responsiveness(h));
                    Ok(())
                }
                Err(e) => Err(e),
            },
            ("ResourceUsageSummary", "start") => {
                self.start_resource_usage(key, params, &mut result)
            }
            ("ResourceUsageSummary", "gather") => {
                self.gather_resource_usage(&key, &mut result).await
            }
            ("EtcdMetrics", "start") => self.start_etcd(key, params, &mut result),
            ("EtcdMetrics", "gather") => self.gather_etcd(&key, &mut result).await,
            ("SchedulingMetrics", "start" | "reset") => {
                self.start_scheduling(key, &mut result).await
            }
            ("SchedulingMetrics", "gather") => self.gather_scheduling(&key, &mut result).await,
            ("ResourceUsageSummary" | "EtcdMetrics" | "SchedulingMetrics", other) => {
                Err(format!("unknown action {other:?}"))
            }
            (
                "APIResponsiveness"
                | "APIResponsivenessPrometheus"
                | "APIResponsivenessPrometheusSimple",
                "gather",
            ) => self.gather_responsiveness(&key, params, &mut result).await,
            ("MetricsForE2E", _) => self.metrics_for_e2e(params, &mut result).await,
            ("SystemPodMetrics", action) => {
                self.system_pod_metrics(key, action, params, &mut result)
                    .await
            }
            ("RestartApiserver", _) => self.restart_apiserver(params, &mut result).await,
            ("ClusterOOMsTracker", action) => {
                self.cluster_ooms_tracker(key, action, params, &mut result)
                    .await
            }
            ("TestMetrics", action) => {
                self.test_metrics(identifier, action, params, &mut result)
                    .await
            }
            ("Timer", "start") => {
                self.running
                    .lock()
                    .insert(key, Running::Timer(Instant::now()));
                Ok(())
            }
            ("Timer", _) => {
                if let Some(Running::Timer(t)) = self.running.lock().remove(&key) {
                    result.details = json!({"seconds": t.elapsed().as_secs_f64()});
                }
                Ok(())
            }
            (method, _) => {
                result.verdict =
                    Verdict::NotComputed(format!("kemu does not compute {method} yet"));
                Ok(())
            }
        };
        if let Err(e) = outcome {
            result.verdict = Verdict::Failed(e);
        }
        result
    }

    /// Each API server's request-duration histograms, from its `/metrics` (`None` for one
    /// not reached); an error when none was.
    async fn scrape(&self) -> Result<Vec<Option<super::api_responsiveness::Histograms>>, String> {
        let clients = std::iter::once(&self.objects.client).chain(&self.context.other_api_servers);
        let scraped = futures::future::join_all(clients.map(scrape_api_server)).await;
        if scraped.iter().all(Result::is_err) {
            let errors: Vec<String> = scraped.into_iter().filter_map(Result::err).collect();
            return Err(errors.join("; "));
        }
        Ok(scraped.into_iter().map(Result::ok).collect())
    }

    async fn gather_responsiveness(
        &self,
        key: &(String, String),
        params: &Params,
        result: &mut MeasurementResult,
    ) -> Result<(), String> {
        let Some(Running::Responsiveness(before)) = self.running.lock().remove(key) else {
            return Err("gather without a start".into());
        };
        let after = self.scrape().await?;
        let mut grown = super::api_responsiveness::Histograms::new();
        let mut servers = 0;
        for (before, after) in before.iter().zip(&after) {
            if let (Some(before), Some(after)) = (before, after) {
                super::api_responsiveness::add(
                    &mut grown,
                    &super::api_responsiveness::growth(before, after),
                );
                servers += 1;
            }
        }
        let allowed_slow = param_u64(params, "allowedSlowCalls").unwrap_or(0);
        let (summary, violations) = super::api_responsiveness::summarize(&grown, allowed_slow);
        let calls = summary["dataItems"].as_array().map_or(0, Vec::len);
        // As clusterloader2 names it: `summaryName`, else the method.
        let name = param_str(params, "summaryName").unwrap_or_else(|| key.0.clone());
        result.summaries.push((name, summary));
        result.details = json!({
            "api_servers": servers,
            "api_servers_not_scraped": before.len() - servers,
            "calls": calls,
            "violations": violations,
        });
        // As in clusterloader2, violations fail the run only with enableViolations.
        let enforce = param_true(params, "enableViolations");
        if enforce && !violations.is_empty() {
            result.verdict = Verdict::Failed(violations.join("; "));
        }
        Ok(())
    }

    async fn start_pod_startup(
        &self,
        key: (String, String),
        params: &Params,
    ) -> Result<(), String> {
        let selector = param_str(params, "labelSelector").unwrap_or_default();
        let pods: Arc<Mutex<HashMap<String, PodTimes>>> = Arc::default();
        let (stop, stopped) = watch::channel(false);
        let objects = self.objects.clone();
        let sink = pods.clone();
        let task = tokio::spawn(async move {
            let resource = super::objects::Resource {
                base: "/api/v1".into(),
                plural: "pods".into(),
                namespaced: true,
            };
            let observe = |pod: &Json| {
                let name = format!(
                    "{}/{}",
                    pod["metadata"]["namespace"].as_str().unwrap_or(""),
                    pod["metadata"]["name"].as_str().unwrap_or("")
                );
                sink.lock()
                    .entry(name)
                    .or_default()
                    .observe(pod, Utc::now());
            };
            // Pods are timed from the changes seen after `start`: the first list only gives the
            // watch its starting point; a later one (the watch fell behind) may hold changes.
            let mut first = true;
            objects
                .list_and_watch(&resource, &selector, stopped, |seen| match seen {
                    Seen::Listed(pods) => {
                        if !std::mem::take(&mut first) {
                            pods.iter().for_each(observe);
                        }
                    }
                    Seen::Applied(pod) => observe(&pod),
                    Seen::Deleted(_) => {}
                })
                .await;
        });
        self.running.lock().insert(
            key,
            Running::PodStartup {
                pods,
                stop,
                task,
                params: params.clone(),
            },
        );
        Ok(())
    }

    async fn gather_pod_startup(
        &self,
        key: &(String, String),
        params: &Params,
        result: &mut MeasurementResult,
    ) -> Result<(), String> {
        let Some(Running::PodStartup {
            pods,
            stop,
            task,
            params: started,
        }) = self.running.lock().remove(key)
        else {
            return Err("gather without a start".into());
        };
        let _ = stop.send(true);
        let _ = task.await;
        // The thresholds are given at `start`, as clusterloader2 reads them; a `gather` may
        // give them too.
        let mut merged = started;
        merged.extend(params.clone());
        let params = &merged;
        let threshold = param_duration(params, "threshold", Duration::from_secs(5))?;
        let pods = pods.lock().clone();
        let mut all = BTreeMap::new();
        for (prefix, filter) in [
            ("", None),
            ("Stateless", Some(false)),
            ("Stateful", Some(true)),
        ] {
            let chosen: Vec<&PodTimes> = pods
                .values()
                .filter(|p| filter.is_none_or(|s| p.stateful == s))
                .collect();
            if chosen.is_empty() && !prefix.is_empty() {
                continue;
            }
            let mut items = Vec::new();
            let mut by_metric = BTreeMap::new();
            type Span = fn(&PodTimes) -> Option<(DateTime<Utc>, DateTime<Utc>)>;
            let spans: [(&str, Span); 5] = [
                ("create_to_schedule", |p| Some((p.create?, p.schedule?))),
                ("schedule_to_run", |p| Some((p.schedule?, p.run?))),
                ("run_to_watch", |p| Some((p.run?, p.watch?))),
                ("schedule_to_watch", |p| Some((p.schedule?, p.watch?))),
                ("pod_startup", |p| Some((p.create?, p.watch?))),
            ];
            for (metric, span) in spans {
                let mut ms: Vec<f64> = chosen
                    .iter()
                    .filter_map(|p| span(p))
                    .map(|(a, b)| (b - a).num_milliseconds().max(0) as f64)
                    .collect();
                ms.sort_by(f64::total_cmp);
                let data = json!({
                    "Perc50": percentile(&ms, 50.0),
                    "Perc90": percentile(&ms, 90.0),
                    "Perc99": percentile(&ms, 99.0),
                });
                by_metric.insert(metric, (ms.len(), data.clone()));
                items.push(json!({"data": data, "unit": "ms", "labels": {"Metric": metric}}));
            }
            result.summaries.push((
                format!("{prefix}PodStartupLatency_{}", result.identifier),
                json!({"version": "v1", "dataItems": items}),
            ));
            all.insert(if prefix.is_empty() { "all" } else { prefix }, by_metric);
        }
        let (count, startup) = all["all"]["pod_startup"].clone();
        result.details = json!({"pods": count, "threshold_ms": threshold.as_millis() as u64, "pod_startup_ms": startup});
        if count == 0 {
            result.verdict = Verdict::NotComputed("no pod matching the selector started".into());
            return Ok(());
        }
        let limit = threshold.as_millis() as f64;
        let mut failures = Vec::new();
        for (perc, key) in [
            ("Perc50", "perc50Threshold"),
            ("Perc90", "perc90Threshold"),
            ("Perc99", "threshold"),
        ] {
            let bound = match key {
                "threshold" => limit,
                _ => match param_str(params, key) {
                    Some(_) => param_duration(params, key, threshold)?.as_millis() as f64,
                    None => continue,
                },
            };
            let observed = startup[perc].as_f64().unwrap_or(0.0);
            if observed > bound {
                failures.push(format!("pod_startup {perc} {observed} ms > {bound} ms"));
            }
        }
        if !failures.is_empty() {
            result.verdict = Verdict::Failed(failures.join("; "));
        }
        Ok(())
    }

    /// clusterloader2's SchedulingThroughput: every `measurmentInterval` (its spelling; 5 s by
    /// default) the pods matching `labelSelector` with a node are counted, and the growth since
    /// the last count (from 0 at `start`) over the interval's whole seconds is one sample.
    async fn start_throughput(&self, key: (String, String), params: &Params) -> Result<(), String> {
        let selector = label_selector(params)?;
        let interval = param_duration(params, "measurmentInterval", Duration::from_secs(5))?;
        if interval.is_zero() {
            return Err("measurmentInterval must be positive".into());
        }
        let seconds = interval.as_secs().max(1) as f64;
        let pods = self.informer("v1", "Pod").await?;
        let samples: Arc<Mutex<Vec<f64>>> = Arc::default();
        let (stop, mut stopped) = watch::channel(false);
        let sink = samples.clone();
        let task = tokio::spawn(async move {
            let mut last = 0usize;
            loop {
                tokio::select! {
                    biased;
                    _ = stopped.wait_for(|s| *s) => return,
                    _ = tokio::time::sleep(interval) => {}
                }
                let scheduled = pods.read(|store| {
                    store
                        .items
                        .values()
                        .filter(|p| {
                            selector.matches_object(p)
                                && p["spec"]["nodeName"]
                                    .as_str()
                                    .is_some_and(|n| !n.is_empty())
                        })
                        .count()
                });
                sink.lock().push((scheduled as f64 - last as f64) / seconds);
                last = scheduled;
            }
        });
        self.running.lock().insert(
            key,
            Running::Throughput {
                samples,
                stop,
                task,
            },
        );
        Ok(())
    }

    async fn gather_throughput(
        &self,
        key: &(String, String),
        params: &Params,
        result: &mut MeasurementResult,
    ) -> Result<(), String> {
        let Some(Running::Throughput {
            samples,
            stop,
            task,
        }) = self.running.lock().remove(key)
        else {
            return Err("gather without a start".into());
        };
        let _ = stop.send(true);
        let _ = task.await;
        let mut s = samples.lock().clone();
        s.sort_by(f64::total_cmp);
        let summary = json!({
            "perc50": percentile(&s, 50.0),
            "perc90": percentile(&s, 90.0),
            "perc99": percentile(&s, 99.0),
            "max": s.last().copied().unwrap_or(0.0),
        });
        result.summaries.push((
            format!("SchedulingThroughput_{}", result.identifier),
            summary.clone(),
        ));
        result.details = summary.clone();
        // No sample (a gather within one interval of its start) is all zeros, as in CL2.
        if let Some(threshold) = param_str(params, "threshold").and_then(|t| t.parse::<f64>().ok())
        {
            let max = summary["max"].as_f64().unwrap_or(0.0);
            if threshold > 0.0 && max < threshold {
                result.verdict = Verdict::Failed(format!(
                    "max throughput {max} pods/s < threshold {threshold}"
                ));
            }
        }
        Ok(())
    }

    /// Polls `check` every second until it reports done or `timeout` passes.
    async fn poll<F, Fut>(timeout: Duration, mut check: F) -> Result<Json, String>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<(bool, Json), String>>,
    {
        let deadline = Instant::now() + timeout;
        loop {
            let (done, state) = check().await?;
            if done {
                return Ok(state);
            }
            if Instant::now() >= deadline {
                return Err(format!("timed out after {} s: {state}", timeout.as_secs()));
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    async fn wait_controlled(
        &self,
        params: &Params,
        result: &mut MeasurementResult,
    ) -> Result<(), String> {
        let api_version = param_str(params, "apiVersion").unwrap_or_else(|| "apps/v1".into());
        let kind = param_str(params, "kind").ok_or("kind is required")?;
        let selector = label_selector(params)?;
        let timeout = param_duration(params, "operationTimeout", Duration::from_secs(900))?;
        let check_updated = param_str(params, "checkIfPodsAreUpdated").is_none_or(|v| v != "false");
        let (controllers, pods, replica_sets) =
            self.controlled_informers(&api_version, &kind).await?;
        // As CL2 does at gather: the controllers that exist now, listed, and the cache caught up
        // with the newest of them, so that one created just before the call (its watch event
        // still on the way) is waited for, not missed.
        let resource = self
            .objects
            .resource(&api_version, &kind)
            .await
            .ok_or_else(|| format!("the API does not serve {kind} of {api_version}"))?;
        let listed = self
            .objects
            .list(
                &resource,
                &param_str(params, "labelSelector").unwrap_or_default(),
            )
            .await
            .ok_or_else(|| format!("listing {} failed", resource.plural))?;
        let newest = listed.iter().map(super::informer::version_of).max();
        controllers
            .wait_for_version(newest.unwrap_or(0), timeout)
            .await?;
        let state = Self::poll(timeout, || {
            let state = controlled_state(
                &controllers,
                &pods,
                replica_sets.as_deref(),
                &selector,
                &kind,
                check_updated,
            );
            async move { Ok(state) }
        })
        .await;
        result.details = state.clone().unwrap_or(Json::Null);
        state.map(|_| ())
    }

    async fn wait_running(
        &self,
        params: &Params,
        result: &mut MeasurementResult,
    ) -> Result<(), String> {
        let selector = label_selector(params)?;
        let desired = param_u64(params, "desiredPodCount").unwrap_or(0);
        let timeout = param_duration(params, "timeout", Duration::from_secs(600))?;
        let pods = self.informer("v1", "Pod").await?;
        let state = Self::poll(timeout, || {
            let running = pods.read(|store| {
                store
                    .items
                    .values()
                    .filter(|p| selector.matches_object(p) && p["status"]["phase"] == "Running")
                    .count() as u64
            });
            async move {
                Ok((
                    running >= desired,
                    json!({"running": running, "desired": desired}),
                ))
            }
        })
        .await;
        result.details = state.clone().unwrap_or(Json::Null);
        state.map(|_| ())
    }

    async fn wait_pvcs(
        &self,
        params: &Params,
        result: &mut MeasurementResult,
    ) -> Result<(), String> {
        let Some(pvcs) = self.objects.resource("v1", "PersistentVolumeClaim").await else {
            result.verdict =
                Verdict::NotComputed("the API does not serve persistentvolumeclaims".into());
            return Ok(());
        };
        let selector = param_str(params, "labelSelector").unwrap_or_default();
        let desired = param_u64(params, "desiredPVCCount").unwrap_or(0);
        let timeout = param_duration(params, "timeout", Duration::from_secs(600))?;
        let objects = self.objects.clone();
        let state = Self::poll(timeout, || {
            let (objects, pvcs, selector) = (objects.clone(), pvcs.clone(), selector.clone());
            async move {
                let items = objects
                    .list(&pvcs, &selector)
                    .await
                    .ok_or("listing persistentvolumeclaims failed")?;
                let bound = items
                    .iter()
                    .filter(|p| p["status"]["phase"] == "Bound")
                    .count() as u64;
                Ok((
                    bound >= desired,
                    json!({"bound": bound, "desired": desired}),
                ))
            }
        })
        .await;
        result.details = state.clone().unwrap_or(Json::Null);
        state.map(|_| ())
    }

    /// Stops what is still running (a start without its gather): reported as not computed.
    pub async fn abandoned(&self) -> Vec<MeasurementResult> {
        let running: Vec<_> = self.running.lock().drain().collect();
        let mut out = Vec::new();
        for ((method, identifier), state) in running {
            match state {
                Running::PodStartup { stop, task, .. } | Running::Throughput { stop, task, .. } => {
                    let _ = stop.send(true);
                    let _ = task.await;
                }
                Running::ResourceUsage(run) => {
                    run.stop().await;
                }
                Running::Etcd(run) => run.stop().await,
                Running::Ooms(run) => run.stop().await,
                Running::Timer(_)
                | Running::SystemPods(_)
                | Running::Started(_)
                | Running::Responsiveness(_)
                | Running::Scheduling(_) => continue,
            }
            out.push(MeasurementResult {
                method,
                identifier,
                action: "start".into(),
                step: None,
                index: 0,
                duration_s: 0.0,
                verdict: Verdict::NotComputed("started but never gathered".into()),
                summaries: Vec::new(),
                details: Json::Null,
            });
        }
        out
    }
}

/// How long a measurement waits for a cache's first list.
const INFORMER_SYNC_LIMIT: Duration = Duration::from_secs(300);

/// The call's `labelSelector` (everything when absent).
fn label_selector(params: &Params) -> Result<LabelSelector, String> {
    let text = param_str(params, "labelSelector").unwrap_or_default();
    LabelSelector::parse(&text).map_err(|e| format!("labelSelector {text:?}: {e}"))
}

/// The controller owner's uid of an object.
fn controller_of(object: &Json) -> Option<&str> {
    object["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|o| o["controller"] == true)?["uid"]
        .as_str()
}

/// One look at a WaitForControlledPodsRunning: done when every controller of `kind` matching
/// `selector` has as many Running and Ready pods as it wants (through its ReplicaSets for a
/// Deployment; with `check_updated`, only pods its template derives count) and no pod is
/// left of a matching controller deleted since the wait's `start`.
fn controlled_state(
    controllers: &Informer,
    pods: &Informer,
    replica_sets: Option<&Informer>,
    selector: &LabelSelector,
    kind: &str,
    check_updated: bool,
) -> (bool, Json) {
    let (live, deleted) = controllers.read(|store| {
        let live: Vec<Json> = store
            .items
            .values()
            .filter(|c| selector.matches_object(c))
            .cloned()
            .collect();
        let live_uids: HashSet<&str> = live
            .iter()
            .filter_map(|c| c["metadata"]["uid"].as_str())
            .collect();
        let deleted: HashSet<String> = store
            .seen
            .iter()
            .filter(|(uid, c)| !live_uids.contains(uid.as_str()) && selector.matches_object(c))
            .map(|(uid, _)| uid.clone())
            .collect();
        (live, deleted)
    });
    // A ReplicaSet's controller, remembered after either is gone.
    let parent: HashMap<String, String> = replica_sets
        .map(|rs| {
            rs.read(|store| {
                store
                    .seen
                    .iter()
                    .filter_map(|(uid, r)| Some((uid.clone(), controller_of(r)?.to_string())))
                    .collect()
            })
        })
        .unwrap_or_default();
    let templates: HashMap<&str, &Json> = live
        .iter()
        .filter(|_| check_updated)
        .filter_map(|c| {
            Some((
                c["metadata"]["uid"].as_str()?,
                &c["spec"]["template"]["spec"],
            ))
        })
        .collect();
    let mut running: HashMap<String, u64> = HashMap::new();
    let (mut outdated, mut left) = (0u64, 0u64);
    pods.read(|store| {
        for p in store.items.values() {
            let Some(owner) = controller_of(p) else {
                continue;
            };
            let owner = parent.get(owner).map_or(owner, String::as_str);
            if deleted.contains(owner) {
                left += 1;
                continue;
            }
            let ready = p["status"]["phase"] == "Running"
                && p["metadata"]["deletionTimestamp"].is_null()
                && p["status"]["conditions"].as_array().is_some_and(|c| {
                    c.iter()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
                });
            if !ready {
                continue;
            }
            if templates
                .get(owner)
                .is_some_and(|t| !derives(t, &p["spec"]))
            {
                outdated += 1;
                continue;
            }
            *running.entry(owner.to_string()).or_default() += 1;
        }
    });
    let (mut done, mut waiting) = (0u64, Vec::new());
    for c in &live {
        let want = match kind {
            "DaemonSet" => c["status"]["desiredNumberScheduled"].as_u64().unwrap_or(0),
            "Job" => c["spec"]["parallelism"].as_u64().unwrap_or(1),
            _ => c["spec"]["replicas"].as_u64().unwrap_or(1),
        };
        let have = running
            .get(c["metadata"]["uid"].as_str().unwrap_or(""))
            .copied()
            .unwrap_or(0);
        if have == want {
            done += 1;
        } else {
            waiting.push(format!(
                "{}/{}: {have} of {want}",
                c["metadata"]["namespace"].as_str().unwrap_or(""),
                c["metadata"]["name"].as_str().unwrap_or("")
            ));
        }
    }
    let state = json!({
        "controllers": live.len(),
        "running": done,
        "deleted": deleted.len(),
        "pods_of_deleted": left,
        "outdated_pods": outdated,
        "waiting": waiting.iter().take(5).collect::<Vec<_>>(),
    });
    (waiting.is_empty() && left == 0, state)
}

/// Whether `template` derives `actual`, as Kubernetes' semantic `DeepDerivative` (which
/// clusterloader2's `checkIfPodsAreUpdated` applies to a controller's pod template and its
/// pods' specs): what the template leaves unset (null, `""`, an empty list or map) matches
/// anything, a map's set keys must derive the other's, a list's items must derive the other
/// list's first items (which may go on), and scalars must be equal (absent counting as the
/// zero value).
pub fn derives(template: &Json, actual: &Json) -> bool {
    match template {
        Json::Null => true,
        Json::String(s) if s.is_empty() => true,
        Json::Array(items) if items.is_empty() => true,
        Json::Object(map) if map.is_empty() => true,
        Json::Object(map) => map
            .iter()
            .all(|(k, v)| derives(v, actual.get(k).unwrap_or(&Json::Null))),
        // The template's items must be the first ones: an admission plugin that appends one
        // (the service account's token volume and its mount) leaves the pod derived.
        Json::Array(items) => actual.as_array().is_some_and(|other| {
            other.len() >= items.len() && items.iter().zip(other).all(|(a, b)| derives(a, b))
        }),
        Json::Bool(b) => actual.as_bool().unwrap_or(false) == *b,
        Json::Number(n) => match actual {
            Json::Null => n.as_f64() == Some(0.0),
            other => other.as_f64() == n.as_f64(),
        },
        Json::String(s) => actual.as_str() == Some(s.as_str()),
    }
}

/// An API server's request-duration histograms, from its `/metrics`.
async fn scrape_api_server(
    client: &ApiClient,
) -> Result<super::api_responsiveness::Histograms, String> {
    let response = client
        .call(
            "get",
            "metrics",
            hyper::Method::GET,
            "/metrics",
            None,
            Default::default(),
        )
        .await
        .map_err(|e| format!("{e:#}"))?;
    if !response.status.is_success() {
        return Err(format!("/metrics answered {}", response.status));
    }
    Ok(super::api_responsiveness::parse(&String::from_utf8_lossy(
        &response.body,
    )))
}

/// Measurements' verdicts in one line each.
pub fn verdict_lines(results: &[MeasurementResult]) -> Vec<String> {
    let mut seen = HashSet::new();
    results
        .iter()
        .filter(|r| seen.insert((r.method.clone(), r.identifier.clone(), r.action.clone())))
        .map(|r| {
            let v = match &r.verdict {
                Verdict::Passed => "passed".to_string(),
                Verdict::Failed(why) => format!("FAILED: {why}"),
                Verdict::NotComputed(why) => format!("not computed: {why}"),
            };
            format!("{} {} {}: {v}", r.method, r.identifier, r.action)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_ranks() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 50.0);
        assert_eq!(percentile(&v, 99.0), 99.0);
        assert_eq!(percentile(&[3.0], 90.0), 3.0);
        assert_eq!(percentile(&[], 90.0), 0.0);
    }

    fn store(objects: &[Json], deleted: &[Json]) -> super::super::informer::Store {
        let mut store = super::super::informer::Store::default();
        for o in objects {
            let key = format!(
                "{}/{}",
                o["metadata"]["namespace"].as_str().unwrap(),
                o["metadata"]["name"].as_str().unwrap()
            );
            store.items.insert(key, o.clone());
        }
        for o in objects.iter().chain(deleted) {
            if let Some(uid) = o["metadata"]["uid"].as_str() {
                store.seen.insert(uid.to_string(), o.clone());
            }
        }
        store
    }

    fn pod(name: &str, owner: &str, ready: bool) -> Json {
        json!({"metadata": {"namespace": "n", "name": name, "uid": format!("pod-{name}"),
                "ownerReferences": [{"uid": owner, "controller": true}]},
            "spec": {"containers": [{"name": "c", "image": "pause"}]},
            "status": {"phase": if ready { "Running" } else { "Pending" },
                "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}})
    }

    #[tokio::test]
    async fn a_wait_counts_pods_through_replica_sets_and_waits_out_deleted_controllers() {
        let deployment = |name: &str, replicas: u64| {
            json!({"metadata": {"namespace": "n", "name": name, "uid": format!("d-{name}"),
                    "labels": {"group": "g"}},
                "spec": {"replicas": replicas,
                    "template": {"spec": {"containers": [{"name": "c", "image": "pause"}]}}}})
        };
        let rs = |name: &str, owner: &str| {
            json!({"metadata": {"namespace": "n", "name": name, "uid": format!("rs-{name}"),
                "ownerReferences": [{"uid": owner, "controller": true}]}})
        };
        let selector = LabelSelector::parse("group = g").unwrap();
        // a: 2 of 2 ready; b was deleted (with its ReplicaSet) and one of its pods is left.
        let controllers = Informer::fixed(store(&[deployment("a", 2)], &[deployment("b", 1)]));
        let replica_sets = Informer::fixed(store(&[rs("a1", "d-a")], &[rs("b1", "d-b")]));
        let left = [
            pod("a-1", "rs-a1", true),
            pod("a-2", "rs-a1", true),
            pod("b-1", "rs-b1", true),
        ];
        let pods = Informer::fixed(store(&left, &[]));
        let (done, state) = controlled_state(
            &controllers,
            &pods,
            Some(&replica_sets),
            &selector,
            "Deployment",
            true,
        );
        assert!(!done, "{state}");
        assert_eq!(state["running"], 1);
        assert_eq!(state["pods_of_deleted"], 1);
        // Once b's pod is gone the wait is over.
        let pods = Informer::fixed(store(&left[..2], &[]));
        let (done, state) = controlled_state(
            &controllers,
            &pods,
            Some(&replica_sets),
            &selector,
            "Deployment",
            true,
        );
        assert!(done, "{state}");
        // A pod not Ready does not count.
        let pods = Informer::fixed(store(
            &[pod("a-1", "rs-a1", true), pod("a-2", "rs-a1", false)],
            &[],
        ));
        let (done, state) = controlled_state(
            &controllers,
            &pods,
            Some(&replica_sets),
            &selector,
            "Deployment",
            true,
        );
        assert!(!done);
        assert_eq!(state["waiting"][0], "n/a: 1 of 2");
    }

    #[test]
    fn a_template_derives_the_pods_made_from_it() {
        let template = json!({
            "containers": [{"name": "pause", "image": "pause:3.10", "ports": [],
                            "resources": {"requests": {"cpu": "10m"}}}],
            "restartPolicy": "Always",
            "nodeName": "",
            "hostNetwork": false,
            "priority": 0,
        });
        let pod = json!({
            "containers": [{"name": "pause", "image": "pause:3.10",
                            "resources": {"requests": {"cpu": "10m"}},
                            "volumeMounts": [{"name": "token", "mountPath": "/var/run"}]}],
            "restartPolicy": "Always",
            "nodeName": "node-1",
            "tolerations": [{"key": "k"}],
        });
        assert!(
            derives(&template, &pod),
            "what the pod adds does not matter"
        );
        let mut updated = template.clone();
        updated["containers"][0]["image"] = json!("pause:3.11");
        assert!(!derives(&updated, &pod), "a changed image");
        let mut two = template.clone();
        two["containers"] = json!([template["containers"][0], {"name": "sidecar"}]);
        assert!(!derives(&two, &pod), "a container more");
        // Volumes the template names, then the service account's token volume appended by
        // admission: still derived. Another order is not.
        let with_volumes = json!({"volumes": [{"name": "config", "configMap": {"name": "c"}}]});
        let admitted = json!({"volumes": [{"name": "config", "configMap": {"name": "c"}},
                                          {"name": "kube-api-access-x1", "projected": {}}]});
        assert!(derives(&with_volumes, &admitted));
        let reordered = json!({"volumes": [{"name": "kube-api-access-x1", "projected": {}},
                                           {"name": "config", "configMap": {"name": "c"}}]});
        assert!(!derives(&with_volumes, &reordered));
        assert!(!derives(&json!({"hostNetwork": true}), &pod));
        assert!(!derives(&json!({"priority": 5}), &pod));
    }

    #[test]
    fn pod_times_come_from_the_server_stamps() {
        let pod = json!({
            "metadata": {"creationTimestamp": "2026-01-01T00:00:00Z",
                         "ownerReferences": [{"kind": "StatefulSet", "uid": "u"}]},
            "status": {"phase": "Running",
                "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:01Z"}],
                "containerStatuses": [{"state": {"running": {"startedAt": "2026-01-01T00:00:03Z"}}}]}
        });
        let mut t = PodTimes::default();
        let now = stamp(&json!("2026-01-01T00:00:04Z")).unwrap();
        t.observe(&pod, now);
        assert!(t.stateful);
        assert_eq!((t.schedule.unwrap() - t.create.unwrap()).num_seconds(), 1);
        assert_eq!((t.run.unwrap() - t.schedule.unwrap()).num_seconds(), 2);
        assert_eq!(t.watch, Some(now));
    }
}
