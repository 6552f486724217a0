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

/// What a component's `/metrics` says of its process: CPU seconds so far and resident bytes.
async fn process_metrics(cluster: &ClusterView, addr: std::net::SocketAddr) -> Option<(f64, u64)> {
    let text = cluster.scrape(addr).await.ok()?;
    let samples = prometheus::parse(&text);
    let value = |name: &str| samples.iter().find(|s| s.name == name).map(|s| s.value);
    Some((
        value("process_cpu_seconds_total")?,
        value("process_resident_memory_bytes")? as u64,
    ))
}

/// Samples `components` (name, `/metrics` address) every `period` from their
/// `process_cpu_seconds_total` and `process_resident_memory_bytes`, as [`sampler::sample_every`]
/// samples a local process from `/proc`: for processes on hosts this machine cannot look into.
async fn sample_metrics_every(
    cluster: ClusterView,
    period: Duration,
    components: Vec<(String, std::net::SocketAddr)>,
    run_start: Instant,
    mut stop: watch::Receiver<bool>,
) -> Vec<ProcessSamples> {
    let mut out: Vec<ProcessSamples> = components
        .iter()
        .map(|(name, _)| ProcessSamples {
            name: name.clone(),
            pid: 0,
            samples: Vec::new(),
        })
        .collect();
    if components.is_empty() {
        return out;
    }
    let mut last: Vec<Option<(Instant, f64)>> = Vec::new();
    for (_, addr) in &components {
        let now = Instant::now();
        last.push(
            process_metrics(&cluster, *addr)
                .await
                .map(|(cpu, _)| (now, cpu)),
        );
    }
    let mut tick = tokio::time::interval(period);
    tick.tick().await;
    loop {
        let last_round = tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s) => true,
            _ = tick.tick() => false,
        };
        for (i, (_, addr)) in components.iter().enumerate() {
            let now = Instant::now();
            let Some((cpu, rss)) = process_metrics(&cluster, *addr).await else {
                continue;
            };
            if let Some((before_at, before_cpu)) = last[i] {
                let seconds = (now - before_at).as_secs_f64();
                // Too short a span (the last round right after a tick) repeats the figure before.
                let cpu_percent = if seconds >= 0.2 {
                    100.0 * (cpu - before_cpu).max(0.0) / seconds
                } else {
                    out[i].samples.last().map_or(0.0, |s| s.cpu_percent)
                };
                out[i].samples.push(sampler::ResourceSample {
                    t: (now - run_start).as_secs_f64(),
                    cpu_percent,
                    rss_bytes: rss,
                });
            }
            last[i] = Some((now, cpu));
        }
        if last_round {
            break;
        }
    }
    out
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
                &super::config::template_path(&self.context.config_dir, &path),
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
        // A process with no pid here (on a remote host) is sampled through its /metrics.
        let remote: Vec<(String, std::net::SocketAddr)> = cluster
            .components
            .iter()
            .filter(|c| c.pid.is_none())
            .filter_map(|c| Some((format!("{}/{}", c.name, c.container()), c.metrics?)))
            .collect();
        let (stop, stopped) = watch::channel(false);
        let started = Instant::now();
        let view = cluster.clone();
        let task = tokio::spawn(async move {
            let (mut local, remote) = tokio::join!(
                sampler::sample_every(resource_usage::PERIOD, processes, started, stopped.clone()),
                sample_metrics_every(view, resource_usage::PERIOD, remote, started, stopped),
            );
            local.extend(remote);
            local
        });
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A `/metrics` endpoint whose process spends 0.5 s of CPU between two scrapes.
    async fn fake_component() -> std::net::SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let scrapes = Arc::new(AtomicU64::new(0));
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let n = scrapes.fetch_add(1, Ordering::SeqCst);
                let mut request = [0u8; 1024];
                let _ = stream.read(&mut request).await;
                let body = format!(
                    "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total {}\nprocess_resident_memory_bytes {}\n",
                    n as f64 * 0.5,
                    1_000_000 + n
                );
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            }
        });
        addr
    }

    #[tokio::test]
    async fn a_process_out_of_reach_of_proc_is_sampled_through_its_metrics() {
        let addr = fake_component().await;
        let (stop, stopped) = watch::channel(false);
        let period = Duration::from_millis(300);
        let task = tokio::spawn(sample_metrics_every(
            ClusterView::default(),
            period,
            vec![("s1/etcd".into(), addr)],
            Instant::now(),
            stopped,
        ));
        tokio::time::sleep(Duration::from_millis(1000)).await;
        let _ = stop.send(true);
        let samples = task.await.unwrap();
        assert_eq!(samples.len(), 1);
        assert_eq!(samples[0].name, "s1/etcd");
        let s = &samples[0].samples;
        assert!(s.len() >= 2, "{s:?}");
        // 0.5 s of CPU per 0.3 s period: about 167 % of a core.
        assert!(
            s[0].cpu_percent > 100.0 && s[0].cpu_percent < 250.0,
            "{s:?}"
        );
        assert!(s[0].rss_bytes > 1_000_000, "{s:?}");
    }
}
