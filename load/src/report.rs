//! The load report: what `load-report.json` holds (its schema is `docs/load-report.schema.json`)
//! and the terminal summary table.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::client::ApiStats;
use super::plan::LoadPlan;
use super::sampler::ProcessSamples;
use super::tracker::{PodRecord, Tracker};
use crate::accounting::AccountingReport;

/// The `schema` field of every report of this shape.
pub const SCHEMA_ID: &str = "kemu.dev/load-report/v1";

/// Percentiles of one latency, milliseconds.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Percentiles {
    pub count: u64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

impl Percentiles {
    /// From a histogram of microseconds.
    pub fn from_us(h: &Histogram<u64>) -> Percentiles {
        if h.is_empty() {
            return Percentiles::default();
        }
        let ms = |us: u64| us as f64 / 1000.0;
        Percentiles {
            count: h.len(),
            p50: ms(h.value_at_quantile(0.50)),
            p90: ms(h.value_at_quantile(0.90)),
            p99: ms(h.value_at_quantile(0.99)),
            max: ms(h.max()),
            mean: h.mean() / 1000.0,
        }
    }

    /// From durations in seconds (negative ones, from clocks a second apart, count as zero).
    pub fn from_seconds(values: impl IntoIterator<Item = f64>) -> Percentiles {
        let mut h = Histogram::<u64>::new(3).expect("3 significant digits is valid");
        for v in values {
            let _ = h.record((v.max(0.0) * 1e6) as u64);
        }
        Percentiles::from_us(&h)
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SloCheck {
    pub name: String,
    pub threshold: f64,
    /// `None` when there was nothing to measure (no pod reached Running), which fails.
    pub observed: Option<f64>,
    pub passed: bool,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PodCounts {
    pub attempted: u64,
    pub created: u64,
    pub create_failed: u64,
    pub scheduled: u64,
    pub running: u64,
    pub delete_sent: u64,
    pub delete_failed: u64,
    pub gone: u64,
    /// Pods whose fate the run doesn't know: not created, never seen Running, or deleted but
    /// never seen gone. In an interrupted run, pods still on their way are `cut_short` instead.
    pub unaccounted: u64,
    /// Interrupted runs: created pods not yet seen Running, or deleted and not yet seen gone,
    /// when the run was stopped (not a violation; 0 in a run that finished).
    #[serde(default)]
    pub cut_short: u64,
    /// The first few unaccounted pods' names.
    pub unaccounted_examples: Vec<String>,
    /// Pods of the run the API listed once every pod was Running (before any delete).
    pub api_listed_when_running: Option<u64>,
    /// Pods of the run the API listed at the end.
    pub api_listed_at_end: Option<u64>,
    /// Watch events about pods the run did not create.
    pub stray_watch_events: u64,
}

/// One phase of the run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PhaseReport {
    /// `create`, `wait_running`, `hold`, `delete` or `wait_gone`.
    pub kind: String,
    /// 0 for the main run, `c` for churn cycle `c`.
    pub cycle: u32,
    pub start_s: f64,
    pub end_s: f64,
    /// For `create` and `delete`: requests sent, the target and achieved rates, and how late
    /// sends were against their schedule.
    pub ops: Option<u64>,
    pub target_rate: Option<f64>,
    pub achieved_rate: Option<f64>,
    pub send_lag_ms: Option<Percentiles>,
    /// For waits: whether the condition was reached before the timeout; for creates and
    /// deletes, whether every request was sent.
    pub completed: bool,
    #[serde(default)]
    pub status: PhaseStatus,
}

/// How a phase ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PhaseStatus {
    #[default]
    Completed,
    /// A wait that reached its timeout.
    TimedOut,
    /// The run was stopped (SIGINT/SIGTERM) during this phase.
    Interrupted,
    /// The plan's phase that an interrupt kept from starting (times: the interrupt's).
    NotStarted,
}

impl PhaseStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            PhaseStatus::Completed => "completed",
            PhaseStatus::TimedOut => "timed out",
            PhaseStatus::Interrupted => "INTERRUPTED",
            PhaseStatus::NotStarted => "not started",
        }
    }
}

/// The phases `plan` runs, in order, as (kind, cycle): the churn cycles' phases (skipped when a
/// wait before them timed out) included.
pub fn planned_phases(plan: &LoadPlan) -> Vec<(&'static str, u32)> {
    let mut out = vec![("create", 0)];
    if !plan.workloads.is_empty() {
        out.push(("create_workloads", 0));
    }
    out.push(("wait_running", 0));
    if !plan.workloads.is_empty() {
        out.push(("wait_workloads_running", 0));
    }
    if plan.hold_seconds > 0.0 {
        out.push(("hold", 0));
    }
    for cycle in 1..=plan.churn_cycles {
        out.extend([
            ("delete", cycle),
            ("wait_gone", cycle),
            ("create", cycle),
            ("wait_running", cycle),
        ]);
    }
    if plan.delete {
        out.extend([("delete", 0), ("wait_gone", 0)]);
        if !plan.workloads.is_empty() {
            out.extend([("delete_workloads", 0), ("wait_workloads_gone", 0)]);
        }
        if plan.any_claims() {
            out.extend([("wait_claims_gone", 0), ("wait_volumes_reclaimed", 0)]);
        }
    }
    out
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ApiCallReport {
    pub verb: String,
    pub resource: String,
    pub count: u64,
    /// Answers that were not 2xx, and calls that got no answer.
    pub errors: u64,
    /// Answers by HTTP code; `"0"` counts calls that got no answer.
    pub codes: BTreeMap<String, u64>,
    pub latency_ms: Percentiles,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TimelineBucket {
    /// The bucket's start, seconds since the run's start; buckets are one second long.
    pub t: f64,
    pub creates_sent: u64,
    pub running: u64,
    pub deletes_sent: u64,
    pub gone: u64,
    /// pod_startup of the pods that reached Running (on the watch) in this second.
    pub pod_startup_ms: Option<Percentiles>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProcessReport {
    pub name: String,
    pub pid: u32,
    pub cpu_percent_mean: f64,
    pub cpu_percent_max: f64,
    pub rss_bytes_max: u64,
    /// Memory per node: the RSS of the first sample (the nodes registered, no pod of the run
    /// yet) over the cluster's nodes; the process's fixed cost included, so an upper bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_bytes_per_node: Option<f64>,
    /// Memory per pod: the RSS growth from the first sample to the sample nearest the most
    /// pods Running at once, over that many pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_bytes_per_pod: Option<f64>,
    pub samples: Vec<ProcessSample>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProcessSample {
    pub t: f64,
    pub cpu_percent: f64,
    pub rss_bytes: u64,
}

/// Server-stamped latencies, by clusterloader2's definitions taken literally.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ServerStamped {
    /// 1000 when some timestamp had whole seconds only (Kubernetes' metav1.Time), else 1.
    pub resolution_ms: u32,
    pub create_to_schedule: Percentiles,
    pub schedule_to_run: Percentiles,
    pub run_to_watch: Percentiles,
    pub pod_startup: Percentiles,
}

/// The whole report.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LoadReport {
    pub schema: String,
    pub run_id: String,
    pub server: String,
    /// Every API server the load's requests went to, in turn (the kubeconfig's first).
    #[serde(default)]
    pub api_servers: Vec<String>,
    pub started_at: String,
    pub finished_at: String,
    pub duration_s: f64,
    pub plan: LoadPlan,
    pub passed: bool,
    /// The run was stopped by SIGINT/SIGTERM before its plan finished: the report holds what
    /// was measured until then, and `passed` is false.
    #[serde(default)]
    pub interrupted: bool,
    /// When the stop signal came, seconds since the run's start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted_at_s: Option<f64>,
    pub slo: Vec<SloCheck>,
    pub pods: PodCounts,
    pub phases: Vec<PhaseReport>,
    /// Client-clock latencies: `create_to_schedule`, `schedule_to_run`, `run_to_watch`,
    /// `pod_startup`, `delete_to_gone` (see the schema for each definition).
    pub latency_ms: BTreeMap<String, Percentiles>,
    pub server_stamped_latency_ms: ServerStamped,
    pub api_calls: Vec<ApiCallReport>,
    /// Every non-2xx answer by HTTP code, over all calls; `"0"` = no answer.
    pub errors_by_code: BTreeMap<String, u64>,
    pub timeline: Vec<TimelineBucket>,
    pub processes: Vec<ProcessReport>,
    /// The run's pods listed from the API and accounted for against what it acknowledged.
    #[serde(default)]
    pub accounting: LoadAccounting,
    /// Per workload kind of `[[load.workloads]]`: objects, pods, pod_startup and rollout.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workloads: Vec<crate::workloads::WorkloadKindReport>,
    /// The bare pods' claims, when the plan gives them some.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claims: Option<crate::claims::ClaimsReport>,
    /// The cluster's nodes through the run: Ready at the start and end, NotReady transitions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<crate::nodes::NodesReport>,
}

/// A part of the report another tool contributes (`kemu run` attaches the results of the chaos
/// plan it ran alongside the load): a key of its own in `load-report.json`, a section of the
/// HTML page, marks on the page's charts and lines under the terminal summary.
#[derive(Clone, Debug)]
pub struct AttachedSection {
    /// Its key in `load-report.json`.
    pub key: String,
    pub json: serde_json::Value,
    /// HTML placed after the SLO table.
    pub html: String,
    /// Moments to mark on the charts: seconds on the load's clock, and what happened then.
    pub markers: Vec<(f64, String)>,
    /// Lines under the terminal summary.
    pub summary: String,
}

/// Accounting of the run's pods (see [`crate::accounting`]): once when every pod
/// was Running, and at the end.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct LoadAccounting {
    /// Every acknowledged create exists with its uid and is Running; none twice.
    pub when_running: Option<AccountingReport>,
    /// After the deletes: every acknowledged delete is gone; the rest as above.
    pub at_end: Option<AccountingReport>,
}

impl LoadAccounting {
    /// Lost, resurrected, duplicated and not-running pods over both checks.
    pub fn violations(&self) -> usize {
        [&self.when_running, &self.at_end]
            .into_iter()
            .flatten()
            .map(|r| r.lost + r.resurrected + r.duplicated + r.not_running)
            .sum()
    }

    /// Both checks as one (counts summed), for the chaos report.
    pub fn combined(&self) -> Option<AccountingReport> {
        let reports: Vec<&AccountingReport> = [&self.when_running, &self.at_end]
            .into_iter()
            .flatten()
            .collect();
        let first = reports.first()?;
        let mut out = AccountingReport {
            passed: reports.iter().all(|r| r.passed) && self.at_end.is_some(),
            acknowledged_creates: first.acknowledged_creates,
            ..Default::default()
        };
        for r in &reports {
            out.acknowledged_creates = out.acknowledged_creates.max(r.acknowledged_creates);
            out.acknowledged_deletes = out.acknowledged_deletes.max(r.acknowledged_deletes);
            out.lost += r.lost;
            out.resurrected += r.resurrected;
            out.duplicated += r.duplicated;
            out.not_running += r.not_running;
            out.not_yet_running = out.not_yet_running.max(r.not_yet_running);
            out.unacknowledged = out.unacknowledged.max(r.unacknowledged);
            out.deleted_unanswered = out.deleted_unanswered.max(r.deleted_unanswered);
            out.examples.extend(r.examples.iter().take(10).cloned());
        }
        out.examples.truncate(10);
        Some(out)
    }
}

/// The latency names of [`LoadReport::latency_ms`], in pipeline order.
pub const LATENCIES: [&str; 5] = [
    "create_to_schedule",
    "schedule_to_run",
    "run_to_watch",
    "pod_startup",
    "delete_to_gone",
];

/// Client-clock latencies of the pods.
pub fn latencies(records: &[PodRecord]) -> BTreeMap<String, Percentiles> {
    let mut out = BTreeMap::new();
    let each = |f: &dyn Fn(&PodRecord) -> Option<f64>| {
        Percentiles::from_seconds(records.iter().filter_map(f))
    };
    out.insert(
        "create_to_schedule".into(),
        each(&|r| Some(r.scheduled_seen? - r.create_sent)),
    );
    out.insert(
        "schedule_to_run".into(),
        each(&|r| Some(r.running_seen? - r.scheduled_seen?)),
    );
    out.insert(
        "run_to_watch".into(),
        // Only from sub-second start stamps: a whole-second one is up to 1 s early.
        each(&|r| Some(r.running_seen? - r.started_stamp.filter(|_| r.started_stamp_fine)?)),
    );
    out.insert(
        "pod_startup".into(),
        each(&|r| Some(r.running_seen? - r.create_sent)),
    );
    out.insert(
        "delete_to_gone".into(),
        each(&|r| Some(r.gone_seen? - r.delete_sent?)),
    );
    out
}

pub fn server_stamped(records: &[PodRecord]) -> ServerStamped {
    let each = |f: &dyn Fn(&PodRecord) -> Option<f64>| {
        Percentiles::from_seconds(records.iter().filter_map(f))
    };
    ServerStamped {
        resolution_ms: if records.iter().any(|r| r.coarse_stamps) {
            1000
        } else {
            1
        },
        create_to_schedule: each(&|r| Some(r.scheduled_stamp? - r.created_stamp?)),
        schedule_to_run: each(&|r| Some(r.started_stamp? - r.scheduled_stamp?)),
        run_to_watch: each(&|r| Some(r.running_seen? - r.started_stamp?)),
        pod_startup: each(&|r| Some(r.running_seen? - r.created_stamp?)),
    }
}

/// Pods whose fate the run doesn't know.
pub fn unaccounted(records: &[PodRecord]) -> impl Iterator<Item = &PodRecord> {
    records.iter().filter(|r| {
        !r.created || r.running_seen.is_none() || (r.delete_sent.is_some() && r.gone_seen.is_none())
    })
}

/// A pod an interrupt caught on its way: created and not yet seen Running (never deleted), or
/// deleted and not yet seen gone.
pub fn cut_short(r: &PodRecord) -> bool {
    r.created
        && ((r.running_seen.is_none() && r.delete_sent.is_none())
            || (r.delete_sent.is_some() && !r.delete_failed && r.gone_seen.is_none()))
}

/// The pod counts; with `interrupted`, the pods an interrupt caught on their way count as
/// `cut_short` rather than `unaccounted`.
pub fn pod_counts(tracker: &Tracker, interrupted: bool) -> PodCounts {
    let c = tracker.counts();
    let (cut, missing): (Vec<&PodRecord>, Vec<&PodRecord>) =
        unaccounted(tracker.records()).partition(|r| interrupted && cut_short(r));
    PodCounts {
        attempted: c.attempted,
        created: c.created,
        create_failed: c.create_failed,
        scheduled: c.scheduled,
        running: c.running,
        delete_sent: c.delete_sent,
        delete_failed: c.delete_failed,
        gone: c.gone,
        unaccounted: missing.len() as u64,
        cut_short: cut.len() as u64,
        unaccounted_examples: missing.iter().take(20).map(|r| r.name.clone()).collect(),
        api_listed_when_running: None,
        api_listed_at_end: None,
        stray_watch_events: tracker.stray_events,
    }
}

pub fn timeline(records: &[PodRecord], duration_s: f64) -> Vec<TimelineBucket> {
    let buckets = duration_s.ceil().max(1.0) as usize;
    let mut out: Vec<TimelineBucket> = (0..buckets)
        .map(|t| TimelineBucket {
            t: t as f64,
            creates_sent: 0,
            running: 0,
            deletes_sent: 0,
            gone: 0,
            pod_startup_ms: None,
        })
        .collect();
    let mut startups: Vec<Vec<f64>> = vec![Vec::new(); buckets];
    let at = |t: f64| (t.max(0.0) as usize).min(buckets - 1);
    for r in records {
        out[at(r.create_sent)].creates_sent += 1;
        if let Some(t) = r.running_seen {
            out[at(t)].running += 1;
            startups[at(t)].push(t - r.create_sent);
        }
        if let Some(t) = r.delete_sent {
            out[at(t)].deletes_sent += 1;
        }
        if let Some(t) = r.gone_seen {
            out[at(t)].gone += 1;
        }
    }
    for (bucket, values) in out.iter_mut().zip(startups) {
        if !values.is_empty() {
            bucket.pod_startup_ms = Some(Percentiles::from_seconds(values));
        }
    }
    out
}

pub fn api_calls(stats: &ApiStats) -> (Vec<ApiCallReport>, BTreeMap<String, u64>) {
    stats.with(|calls| {
        let mut errors_by_code = BTreeMap::new();
        let reports = calls
            .iter()
            .map(|((verb, resource), s)| {
                let mut errors = 0;
                for (code, n) in &s.codes {
                    if !(200..300).contains(code) {
                        errors += n;
                        *errors_by_code.entry(code.to_string()).or_default() += n;
                    }
                }
                ApiCallReport {
                    verb: verb.clone(),
                    resource: resource.clone(),
                    count: s.count,
                    errors,
                    codes: s.codes.iter().map(|(c, n)| (c.to_string(), *n)).collect(),
                    latency_ms: Percentiles::from_us(&s.latency_us),
                }
            })
            .collect();
        (reports, errors_by_code)
    })
}

pub fn processes(samples: Vec<ProcessSamples>) -> Vec<ProcessReport> {
    samples
        .into_iter()
        .map(|p| {
            let n = p.samples.len().max(1) as f64;
            ProcessReport {
                cpu_percent_mean: p.samples.iter().map(|s| s.cpu_percent).sum::<f64>() / n,
                cpu_percent_max: p.samples.iter().map(|s| s.cpu_percent).fold(0.0, f64::max),
                rss_bytes_max: p.samples.iter().map(|s| s.rss_bytes).max().unwrap_or(0),
                rss_bytes_per_node: None,
                rss_bytes_per_pod: None,
                samples: p
                    .samples
                    .into_iter()
                    .map(|s| ProcessSample {
                        t: s.t,
                        cpu_percent: s.cpu_percent,
                        rss_bytes: s.rss_bytes,
                    })
                    .collect(),
                name: p.name,
                pid: p.pid,
            }
        })
        .collect()
}

/// Each process's memory per node and per pod (see [`ProcessReport`]): `nodes` the cluster's
/// nodes, the pods Running at once counted from the timeline.
pub fn memory_shares(processes: &mut [ProcessReport], timeline: &[TimelineBucket], nodes: u64) {
    let (mut live, mut peak, mut peak_t) = (0i64, 0i64, 0.0);
    for bucket in timeline {
        live += bucket.running as i64 - bucket.gone as i64;
        if live > peak {
            (peak, peak_t) = (live, bucket.t);
        }
    }
    for p in processes {
        let Some(first) = p.samples.first() else {
            continue;
        };
        let start = first.rss_bytes as f64;
        if nodes > 0 {
            p.rss_bytes_per_node = Some(start / nodes as f64);
        }
        let at_peak = p
            .samples
            .iter()
            .min_by(|a, b| (a.t - peak_t).abs().total_cmp(&(b.t - peak_t).abs()));
        if let (Some(at_peak), true) = (at_peak, peak > 0) {
            let grown = at_peak.rss_bytes as f64 - start;
            p.rss_bytes_per_pod = Some((grown / peak as f64).max(0.0));
        }
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// The terminal summary.
pub fn summary(report: &LoadReport) -> String {
    let mut s = String::new();
    let p = &report.pods;
    let _ = writeln!(
        s,
        "kemu load {} against {}: {} in {:.1} s",
        report.run_id,
        report.server,
        verdict(report),
        report.duration_s
    );
    if report.interrupted {
        let _ = writeln!(
            s,
            "INTERRUPTED at {:.1} s: the figures below are what was measured until then",
            report.interrupted_at_s.unwrap_or(report.duration_s)
        );
    }
    let _ = writeln!(
        s,
        "pods: {} attempted, {} created, {} Running, {} deleted, {} gone, {} unaccounted{}{}",
        p.attempted,
        p.created,
        p.running,
        p.delete_sent,
        p.gone,
        p.unaccounted,
        match p.unaccounted_examples.first() {
            Some(name) => format!(" (e.g. {name})"),
            None => String::new(),
        },
        if report.interrupted {
            format!(", {} cut short on their way", p.cut_short)
        } else {
            String::new()
        }
    );
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "{:<22} {:>8} {:>10} {:>10} {:>10} {:>10}",
        "latency (ms)", "count", "p50", "p90", "p99", "max"
    );
    for name in LATENCIES {
        match report.latency_ms.get(name) {
            Some(l) if l.count > 0 => {
                let _ = writeln!(
                    s,
                    "{:<22} {:>8} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
                    name, l.count, l.p50, l.p90, l.p99, l.max
                );
            }
            // run_to_watch needs sub-second start stamps, which kubelets do not write.
            Some(_) if name == "run_to_watch" => {
                let _ = writeln!(
                    s,
                    "{name:<22} {:>8} {:>10} (no sub-second startedAt stamps to measure from)",
                    0, "-"
                );
            }
            Some(_) => {
                let _ = writeln!(s, "{name:<22} {:>8} {:>10}", 0, "-");
            }
            None => {}
        }
    }
    let _ = writeln!(s);
    if !report.workloads.is_empty() {
        let _ = writeln!(
            s,
            "{:<22} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10}",
            "workloads (ms)", "objects", "pods", "startup p50", "startup p99", "rollout p99", "max"
        );
        for k in &report.workloads {
            let _ = writeln!(
                s,
                "{:<22} {:>8} {:>10} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
                k.kind.as_str(),
                format!("{}/{}", k.rolled_out, k.objects),
                format!("{}/{}", k.pods_running, k.pods_expected),
                k.pod_startup_ms.p50,
                k.pod_startup_ms.p99,
                k.rollout_ms.p99,
                k.rollout_ms.max
            );
        }
        let _ = writeln!(s);
    }
    if let Some(c) = &report.claims {
        let _ = writeln!(
            s,
            "{:<28} {:>8} {:>10} {:>10} {:>10} {:>10}",
            "claims (ms)", "count", "p50", "p90", "p99", "max"
        );
        let mut rows: Vec<(String, &Percentiles)> = Vec::new();
        if c.sent > 0 {
            rows.extend([
                ("bind".to_string(), &c.bind_ms),
                ("attach".to_string(), &c.attach_ms),
                (
                    "pod_startup with a claim".to_string(),
                    &c.pod_startup_with_claims_ms,
                ),
                (
                    "pod_startup without".to_string(),
                    &c.pod_startup_without_claims_ms,
                ),
            ]);
        }
        for k in &c.workloads {
            rows.push((format!("{} bind", k.kind.as_str()), &k.bind_ms));
            rows.push((format!("{} attach", k.kind.as_str()), &k.attach_ms));
        }
        for (name, p) in rows {
            let _ = writeln!(
                s,
                "{name:<28} {:>8} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
                p.count, p.p50, p.p90, p.p99, p.max
            );
        }
        if c.sent > 0 {
            let _ = writeln!(
                s,
                "claims: {} sent, {} Bound, {} attached, {} deleted, {} gone",
                c.sent, c.bound, c.attached, c.deleted, c.gone
            );
        }
        for k in &c.workloads {
            let _ = writeln!(
                s,
                "{} claims: {} seen, {} Bound, {} attached, {} deleted with their set, {} gone",
                k.kind.as_str(),
                k.seen,
                k.bound,
                k.attached,
                k.deleted,
                k.gone
            );
        }
        let left = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
        let _ = writeln!(
            s,
            "claims left: {}, volumes left: {}\n",
            left(c.left),
            left(c.volumes_left)
        );
    }
    let _ = writeln!(
        s,
        "{:<22} {:>8} {:>10} {:>10} {:>10} {:>10}",
        "phase", "ops", "seconds", "target/s", "achieved/s", "lag p99"
    );
    for ph in &report.phases {
        let name = if ph.cycle > 0 {
            format!("churn {} {}", ph.cycle, ph.kind)
        } else {
            ph.kind.clone()
        };
        let opt = |v: Option<f64>| v.map(|v| format!("{v:.1}")).unwrap_or_else(|| "-".into());
        let _ = writeln!(
            s,
            "{:<22} {:>8} {:>10.2} {:>10} {:>10} {:>10}{}",
            name,
            ph.ops.map(|o| o.to_string()).unwrap_or_else(|| "-".into()),
            ph.end_s - ph.start_s,
            opt(ph.target_rate),
            opt(ph.achieved_rate),
            opt(ph.send_lag_ms.as_ref().map(|l| l.p99)),
            match ph.status {
                PhaseStatus::Completed if !ph.completed => "  TIMED OUT".to_string(),
                PhaseStatus::Completed => String::new(),
                other => format!("  {}", other.as_str()),
            }
        );
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "{:<22} {:>8} {:>8} {:>10} {:>10} {:>10}",
        "API call", "count", "errors", "p50 ms", "p99 ms", "max ms"
    );
    for c in &report.api_calls {
        let _ = writeln!(
            s,
            "{:<22} {:>8} {:>8} {:>10.1} {:>10.1} {:>10.1}",
            format!("{} {}", c.verb, c.resource),
            c.count,
            c.errors,
            c.latency_ms.p50,
            c.latency_ms.p99,
            c.latency_ms.max
        );
    }
    if !report.errors_by_code.is_empty() {
        let codes: Vec<String> = report
            .errors_by_code
            .iter()
            .map(|(c, n)| format!("{c}: {n}"))
            .collect();
        let _ = writeln!(s, "errors by code (0 = no answer): {}", codes.join(", "));
    }
    if !report.processes.is_empty() {
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "{:<22} {:>8} {:>10} {:>10} {:>12} {:>10} {:>10}",
            "process", "pid", "cpu% avg", "cpu% max", "rss max MiB", "KiB/node", "KiB/pod"
        );
        let kib = |b: Option<f64>| b.map_or("-".to_string(), |b| format!("{:.1}", b / 1024.0));
        for pr in &report.processes {
            let _ = writeln!(
                s,
                "{:<22} {:>8} {:>10.1} {:>10.1} {:>12.1} {:>10} {:>10}",
                pr.name,
                pr.pid,
                pr.cpu_percent_mean,
                pr.cpu_percent_max,
                mib(pr.rss_bytes_max),
                kib(pr.rss_bytes_per_node),
                kib(pr.rss_bytes_per_pod)
            );
        }
    }
    let _ = writeln!(s);
    for check in &report.slo {
        let _ = writeln!(
            s,
            "SLO {}: {} against {:.1}: {}",
            check.name,
            check
                .observed
                .map(|o| format!("{o:.1}"))
                .unwrap_or_else(|| "nothing measured".into()),
            check.threshold,
            if check.passed { "ok" } else { "FAILED" }
        );
    }
    s
}

/// PASSED, FAILED or INTERRUPTED.
pub fn verdict(report: &LoadReport) -> &'static str {
    if report.interrupted {
        "INTERRUPTED"
    } else if report.passed {
        "PASSED"
    } else {
        "FAILED"
    }
}

/// Seconds from `earlier` to `later` (RFC 3339 times: two reports' clocks); 0 when either does
/// not parse.
pub fn seconds_between(earlier: &str, later: &str) -> f64 {
    let parse = |s: &str| chrono::DateTime::parse_from_rfc3339(s).ok();
    match (parse(earlier), parse(later)) {
        (Some(e), Some(l)) => (l - e).num_microseconds().unwrap_or(0) as f64 / 1e6,
        _ => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_per_node_and_per_pod() {
        let bucket = |t: f64, running: u64, gone: u64| TimelineBucket {
            t,
            creates_sent: 0,
            running,
            deletes_sent: 0,
            gone,
            pod_startup_ms: None,
        };
        // 100 pods Running by t = 2, 40 gone at t = 3, 10 more at t = 4: the peak is 100 at 2.
        let timeline = [
            bucket(0.0, 0, 0),
            bucket(1.0, 60, 0),
            bucket(2.0, 40, 0),
            bucket(3.0, 0, 40),
            bucket(4.0, 10, 0),
        ];
        let sample = |t: f64, rss: u64| ProcessSample {
            t,
            cpu_percent: 0.0,
            rss_bytes: rss,
        };
        let mut processes = vec![ProcessReport {
            name: "apiserver-1".into(),
            pid: 1,
            cpu_percent_mean: 0.0,
            cpu_percent_max: 0.0,
            rss_bytes_max: 0,
            rss_bytes_per_node: None,
            rss_bytes_per_pod: None,
            samples: vec![
                sample(0.1, 50_000),
                sample(2.1, 250_000),
                sample(4.1, 200_000),
            ],
        }];
        memory_shares(&mut processes, &timeline, 10);
        assert_eq!(processes[0].rss_bytes_per_node, Some(5_000.0));
        assert_eq!(processes[0].rss_bytes_per_pod, Some(2_000.0));
        // No node seen, no pod run: neither figure.
        processes[0].rss_bytes_per_node = None;
        processes[0].rss_bytes_per_pod = None;
        memory_shares(&mut processes, &[bucket(0.0, 0, 0)], 0);
        assert_eq!(processes[0].rss_bytes_per_node, None);
        assert_eq!(processes[0].rss_bytes_per_pod, None);
    }

    #[test]
    fn percentiles_are_milliseconds() {
        let p = Percentiles::from_seconds((1..=100).map(|i| i as f64 / 1000.0));
        assert_eq!(p.count, 100);
        assert!((p.p50 - 50.0).abs() < 0.1, "{p:?}");
        assert!((p.p99 - 99.0).abs() < 0.1, "{p:?}");
        assert!((p.max - 100.0).abs() < 0.1, "{p:?}");
        assert_eq!(Percentiles::from_seconds([-0.5]).max, 0.0);
    }

    #[test]
    fn timeline_buckets_by_second() {
        let r = PodRecord {
            create_sent: 0.2,
            running_seen: Some(1.5),
            delete_sent: Some(2.1),
            gone_seen: Some(9.0),
            ..Default::default()
        };
        let t = timeline(&[r], 3.0);
        assert_eq!(t.len(), 3);
        assert_eq!(
            (t[0].creates_sent, t[1].running, t[2].deletes_sent),
            (1, 1, 1)
        );
        assert_eq!(t[2].gone, 1, "late events go to the last bucket");
        assert!((t[1].pod_startup_ms.as_ref().unwrap().p50 - 1300.0).abs() < 2.0);
    }
}
