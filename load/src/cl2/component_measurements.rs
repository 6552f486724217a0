//! The drivers of the measurements read from the cluster's processes rather than its API:
//! ResourceUsageSummary (sampling `/proc`), EtcdMetrics (the store members' `/metrics`) and
//! SchedulingMetrics (the schedulers' `/metrics`). Their summaries are computed by
//! [`super::resource_usage`], [`super::etcd_metrics`] and [`super::scheduling_metrics`]. Without
//! a [`ClusterView`] (a run against a bare kubeconfig) each is reported as not computed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cluster::layout::Kind;
use parking_lot::Mutex;
use serde_json::json;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::measurements::{
    param_duration, param_str, MeasurementResult, Measurements, Params, Running, Verdict,
};
use super::processes::{ClusterView, Component};
use super::prometheus::{self, Sample};
use super::{etcd_metrics, resource_usage, scheduling_metrics};
use crate::sampler::{self, ProcessSamples};
use crate::SampledProcess;

/// A ResourceUsageSummary between its `start` and its `gather`.
pub struct ResourceUsageRun {
    stop: watch::Sender<bool>,
    task: JoinHandle<Vec<ProcessSamples>>,
    constraints: BTreeMap<String, resource_usage::Constraint>,
}

impl ResourceUsageRun {
    /// Stops the sampling; the samples.
    pub async fn stop(self) -> Vec<ProcessSamples> {
        let _ = self.stop.send(true);
        self.task.await.unwrap_or_default()
    }
}

/// An EtcdMetrics between its `start` and its `gather`: the database size poller.
pub struct EtcdRun {
    max_database_size: Arc<Mutex<f64>>,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl EtcdRun {
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

/// Scrapes every one of `components` that serves `/metrics`: the samples of each that
/// answered, and the errors of those that did not.
async fn scrape_all<'a>(
    cluster: &ClusterView,
    components: impl Iterator<Item = &'a Component>,
) -> (Vec<Vec<Sample>>, Vec<String>) {
    let addrs: Vec<_> = components.filter_map(|c| c.metrics).collect();
    let answers =
        futures::future::join_all(addrs.into_iter().map(|addr| cluster.scrape(addr))).await;
    let mut samples = Vec::new();
    let mut errors = Vec::new();
    for answer in answers {
        match answer {
            Ok(text) => samples.push(prometheus::parse(&text)),
            Err(e) => errors.push(e),
        }
    }
    (samples, errors)
}

/// The largest database size any of `members` reports now.
async fn database_size(cluster: &ClusterView, members: &[Component]) -> Option<f64> {
    let (samples, _) = scrape_all(cluster, members.iter()).await;
    samples
        .iter()
        .filter_map(|s| etcd_metrics::database_size(s))
        .reduce(f64::max)
}

impl Measurements {
    /// The cluster's processes, or the verdict of a measurement that needs them.
    fn cluster_view(&self, result: &mut MeasurementResult) -> Option<&ClusterView> {
        if self.context.cluster.is_none() {
            result.verdict = Verdict::NotComputed(
                "the cluster's processes are not known: run it with `kemu run`, or `kemu load --dir` on a cluster from `kemu up`".into(),
            );
        }
        self.context.cluster.as_ref()
    }

    pub(super) fn start_resource_usage(
        &self,
        key: (String, String),
        params: &Params,
        result: &mut MeasurementResult,
    ) -> Result<(), String> {
        let Some(cluster) = self.cluster_view(result) else {
            return Ok(());
        };
        let constraints = match param_str(params, "resourceConstraints") {
            Some(path) => resource_usage::read_constraints(
                &self.context.config_dir.join(path),
                self.context.nodes,
            )?,
            None => BTreeMap::new(),
        };
        let processes: Vec<SampledProcess> = cluster
            .components
            .iter()
            .filter_map(|c| {
                Some(SampledProcess {
                    name: format!("{}/{}", c.name, c.container()),
                    pid: c.pid?,
                })
            })
            .collect();
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(sampler::sample_every(
            resource_usage::PERIOD,
            processes,
            Instant::now(),
            stopped,
        ));
        self.running.lock().insert(
            key,
            Running::ResourceUsage(ResourceUsageRun {
                stop,
                task,
                constraints,
            }),
        );
        Ok(())
    }

    pub(super) async fn gather_resource_usage(
        &self,
        key: &(String, String),
        result: &mut MeasurementResult,
    ) -> Result<(), String> {
        if self.cluster_view(result).is_none() {
            return Ok(());
        }
        let Some(Running::ResourceUsage(run)) = self.running.lock().remove(key) else {
            return Err("gather without a start".into());
        };
        let constraints = run.constraints.clone();
        let processes = run.stop().await;
        let summary = resource_usage::summarize(&processes);
        let violations = resource_usage::violations(&summary, &constraints);
        let sampled = processes.iter().filter(|p| !p.samples.is_empty()).count();
        result.details = json!({
            "processes": sampled,
            "samples": processes.iter().map(|p| p.samples.len()).sum::<usize>(),
            "period_s": resource_usage::PERIOD.as_secs(),
            "violations": violations,
        });
        result
            .summaries
            .push(("ResourceUsageSummary".into(), summary));
        if sampled == 0 {
            result.verdict = Verdict::NotComputed("no process could be sampled".into());
        } else if !violations.is_empty() {
            result.verdict = Verdict::Failed(format!(
                "{} constraints violated: {}",
                violations.len(),
                violations.join("; ")
            ));
        }
        Ok(())
    }

    fn store_members(&self, result: &mut MeasurementResult) -> Option<Vec<Component>> {
        let members: Vec<Component> = self
            .cluster_view(result)?
            .of_kind(Kind::Store)
            .filter(|c| c.metrics.is_some())
            .cloned()
            .collect();
        if members.is_empty() {
            result.verdict = Verdict::NotComputed("no store member serves /metrics".into());
            return None;
        }
        Some(members)
    }

    pub(super) fn start_etcd(
        &self,
        key: (String, String),
        params: &Params,
        result: &mut MeasurementResult,
    ) -> Result<(), String> {
        let Some(members) = self.store_members(result) else {
            return Ok(());
        };
        let wait = param_duration(params, "waitTime", Duration::from_secs(60))?;
        let cluster = self.context.cluster.clone().unwrap_or_default();
        let max_database_size: Arc<Mutex<f64>> = Arc::default();
        let (stop, mut stopped) = watch::channel(false);
        let max = max_database_size.clone();
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    biased;
                    _ = stopped.wait_for(|s| *s) => return,
                    _ = tokio::time::sleep(wait) => {}
                }
                if let Some(size) = database_size(&cluster, &members).await {
                    let mut max = max.lock();
                    *max = max.max(size);
                }
            }
        });
        self.running.lock().insert(
            key,
            Running::Etcd(EtcdRun {
                max_database_size,
                stop,
                task,
            }),
        );
        Ok(())
    }

    pub(super) async fn gather_etcd(
        &self,
        key: &(String, String),
        result: &mut MeasurementResult,
    ) -> Result<(), String> {
        let Some(members) = self.store_members(result) else {
            return Ok(());
        };
        let Some(Running::Etcd(run)) = self.running.lock().remove(key) else {
            return Err("gather without a start".into());
        };
        let max = run.max_database_size.clone();
        run.stop().await;
        let cluster = self.context.cluster.clone().unwrap_or_default();
        let (samples, errors) = scrape_all(&cluster, members.iter()).await;
        if samples.is_empty() {
            return Err(errors.join("; "));
        }
        let now = samples
            .iter()
            .filter_map(|s| etcd_metrics::database_size(s))
            .fold(0.0, f64::max);
        let max_database_size = max.lock().max(now);
        let (summary, not_exported) = etcd_metrics::summarize(&samples, max_database_size);
        result.details = json!({
            "members": samples.len(),
            "members_not_scraped": errors,
            "not_exported": not_exported,
            "max_database_size": max_database_size,
        });
        result.summaries.push(("EtcdMetrics".into(), summary));
        Ok(())
    }

    /// The schedulers' histograms now, summed: the scrape and how many schedulers answered.
    async fn scrape_schedulers(
        &self,
        result: &mut MeasurementResult,
    ) -> Result<Option<(scheduling_metrics::Scrape, usize)>, String> {
        let Some(cluster) = self.cluster_view(result) else {
            return Ok(None);
        };
        if !cluster
            .of_kind(Kind::Scheduler)
            .any(|c| c.metrics.is_some())
        {
            result.verdict = Verdict::NotComputed("no scheduler serves /metrics".into());
            return Ok(None);
        }
        let (samples, errors) = scrape_all(cluster, cluster.of_kind(Kind::Scheduler)).await;
        if samples.is_empty() {
            return Err(errors.join("; "));
        }
        let mut scrape = scheduling_metrics::Scrape::new();
        for s in &samples {
            scheduling_metrics::add(&mut scrape, s);
        }
        Ok(Some((scrape, samples.len())))
    }

    pub(super) async fn start_scheduling(
        &self,
        key: (String, String),
        result: &mut MeasurementResult,
    ) -> Result<(), String> {
        if let Some((scrape, _)) = self.scrape_schedulers(result).await? {
            self.running.lock().insert(key, Running::Scheduling(scrape));
        }
        Ok(())
    }

    pub(super) async fn gather_scheduling(
        &self,
        key: &(String, String),
        result: &mut MeasurementResult,
    ) -> Result<(), String> {
        let Some((end, schedulers)) = self.scrape_schedulers(result).await? else {
            return Ok(());
        };
        // As clusterloader2, a gather without a start reports everything since the start.
        let start = match self.running.lock().remove(key) {
            Some(Running::Scheduling(start)) => start,
            _ => scheduling_metrics::Scrape::new(),
        };
        result.details = json!({
            "schedulers": schedulers,
            "not_exported": scheduling_metrics::missing(&end),
        });
        result.summaries.push((
            "SchedulingMetrics".into(),
            scheduling_metrics::summarize(&start, &end),
        ));
        Ok(())
    }
}
