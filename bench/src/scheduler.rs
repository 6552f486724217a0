//! `kemu bench scheduler --through-apiserver`: the scheduler end to end. A local store and API
//! server are started from this binary, `--nodes` Node objects are created through the API
//! (no kubelets), then a real `kemu scheduler` process is started and pods are created over
//! HTTP at `--rate` per second (open loop: pod i is sent at start + i/rate whatever happened to
//! the ones before). A pod watch over QUIC notes when each pod is first seen with a
//! `spec.nodeName`; create→scheduled is from the moment its create was sent to that moment (all
//! clocks are this process's). The CPU each process used during the run (from `/proc`) tells
//! what bounds it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use api::client::{Client as ApiClient, ClientConfig, ListParams};
use bytes::Bytes;
use hyper::{Method, StatusCode};
use serde::Serialize;
use serde_json::{json, Value};
use transport::pki::{self, CertSpec};

use cluster::process::{free_ports, http_get, terminate, LocalApiServer, LocalStore};

use crate::apiserver::{new_histogram, percentiles, Http};
use crate::store::Percentiles;

/// What the through-the-API-server run needs to know.
#[derive(Debug, Clone)]
pub struct ThroughApiArgs {
    pub nodes: usize,
    pub pods: usize,
    pub rate: f64,
    pub store_members: usize,
    pub workers: usize,
    /// Creates in flight at most.
    pub in_flight: usize,
    /// How long to wait, after the last create, for the last pods to be scheduled.
    pub settle: Duration,
    pub work_dir: Option<std::path::PathBuf>,
}

#[derive(Debug, Serialize)]
pub struct ProcessCpu {
    pub process: String,
    /// CPU seconds used during the measured window.
    pub cpu_seconds: f64,
    /// cpu_seconds / window: 1.0 is one core busy all the time.
    pub cores: f64,
}

#[derive(Debug, Serialize)]
pub struct ThroughApiReport {
    pub mode: &'static str,
    pub nodes: usize,
    pub pods: usize,
    pub store_members: usize,
    pub scheduler_workers: usize,
    pub rate_offered: f64,
    pub node_setup_seconds: f64,
    pub created: u64,
    pub create_errors: u64,
    pub creates_per_sec: f64,
    pub create_latency_ms: Percentiles,
    pub scheduled: u64,
    /// From the first create sent to the last pod seen scheduled.
    pub seconds: f64,
    pub binds_per_sec: f64,
    pub create_to_scheduled_ms: Percentiles,
    /// `scheduler_schedule_attempts_total` by result, from the scheduler's /metrics.
    pub scheduler_attempts: BTreeMap<String, u64>,
    /// Every process of the run, over the measured window.
    pub cpu: Vec<ProcessCpu>,
    pub first_error: Option<String>,
}

/// `kemu bench scheduler`: the synthetic cluster, and whether to go through a real API server
/// (the command line's flags, one field each).
#[derive(Debug, Clone)]
pub struct SchedulerBench {
    /// Nodes in the synthetic cluster (32 cpu, 128Gi, 110 pods each).
    pub nodes: usize,
    /// Pods to decide (100m cpu, 128Mi each).
    pub pods: usize,
    /// Tie-break seed.
    pub seed: u64,
    /// Measure end to end instead: start a store, an API server and a `kemu scheduler`
    /// process, create `--nodes` Node objects and then `--pods` pods at `--rate` per second
    /// over HTTP; print binds/s and create→scheduled percentiles as JSON.
    pub through_apiserver: bool,
    /// Pods created per second (with --through-apiserver).
    pub rate: f64,
    /// Store members to start (with --through-apiserver).
    pub store_members: usize,
    /// Scheduling workers of the scheduler process (with --through-apiserver).
    pub workers: usize,
    /// Creates in flight at most (with --through-apiserver).
    pub in_flight: usize,
    /// Seconds to wait after the last create for the last pods to be scheduled.
    pub settle_secs: u64,
    /// Keep the spawned cluster's directory (logs) here instead of a temporary one.
    pub work_dir: Option<PathBuf>,
}

/// The decision core alone, in process: decides and assumes every pod, prints pods/s; or with
/// `through_apiserver`, [`run`] and its report as JSON.
pub async fn run_bench(args: SchedulerBench) -> anyhow::Result<()> {
    if args.nodes == 0 || args.pods == 0 {
        bail!("--nodes and --pods must be positive");
    }
    if args.through_apiserver {
        if args.rate <= 0.0 || args.store_members == 0 || args.workers == 0 || args.in_flight == 0 {
            bail!("--rate, --store-members, --workers and --in-flight must be positive");
        }
        let report = run(ThroughApiArgs {
            nodes: args.nodes,
            pods: args.pods,
            rate: args.rate,
            store_members: args.store_members,
            workers: args.workers,
            in_flight: args.in_flight,
            settle: std::time::Duration::from_secs(args.settle_secs),
            work_dir: args.work_dir,
        })
        .await?;
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    let report = tokio::task::spawn_blocking(move || {
        scheduler::bench::run_core(args.nodes, args.pods, args.seed)
    })
    .await?;
    println!(
        "scheduler core: {} nodes, {} pods ({} scheduled, {} unschedulable) in {:.3} s: {:.0} pods/s",
        report.nodes,
        report.pods,
        report.scheduled,
        report.unschedulable,
        report.elapsed.as_secs_f64(),
        report.pods_per_second()
    );
    Ok(())
}

/// Runs the benchmark; the cluster it starts is stopped before it returns.
pub async fn run(args: ThroughApiArgs) -> anyhow::Result<ThroughApiReport> {
    if args.nodes == 0 || args.pods == 0 || args.rate <= 0.0 || args.in_flight == 0 {
        bail!("--nodes, --pods, --rate and the creates in flight must be positive");
    }
    let temp = tempfile::Builder::new()
        .prefix("kemu-bench-sched")
        .tempdir()?;
    let work_dir = args
        .work_dir
        .clone()
        .unwrap_or_else(|| temp.path().to_path_buf());
    let exe = std::env::current_exe()?;
    let store = LocalStore::start(&work_dir.join("cluster"), args.store_members).await?;
    let server = LocalApiServer::start(&exe, &store, "apiserver").await?;
    let result = measure(&args, &exe, &work_dir, &store, &server).await;
    server.stop().await;
    store.stop().await;
    result
}

async fn measure(
    args: &ThroughApiArgs,
    exe: &Path,
    work_dir: &Path,
    store: &LocalStore,
    server: &LocalApiServer,
) -> anyhow::Result<ThroughApiReport> {
    let admin =
        cluster::api_access::ApiCredentials::from_certs_dir(server.certs_dir(), Some("admin"))?;
    let http = Http::new(&server.url(), args.in_flight, &admin)?;
    let namespace = "bench-scheduler";
    http.ensure_namespace(namespace).await?;

    let setup = Instant::now();
    create_nodes(&http, args.nodes).await?;
    let node_setup_seconds = setup.elapsed().as_secs_f64();

    let mut scheduler = SchedulerProcess::start(exe, store, server, work_dir, args.workers)?;
    let outcome = drive(args, &http, namespace, store, server, &mut scheduler).await;
    // The scheduler counts a bind once its Scheduled event is recorded, a little after the
    // watch has seen the pod bound: give the counter a moment to catch up.
    let want = outcome.as_ref().map_or(0, |r| r.scheduled + 1);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut attempts = BTreeMap::new();
    while Instant::now() < deadline {
        attempts = scheduler.attempts().await.unwrap_or_default();
        if attempts.get("scheduled").copied().unwrap_or(0) >= want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    scheduler.stop().await;
    let mut report = outcome.with_context(|| {
        format!(
            "scheduler log: {}",
            work_dir.join("scheduler.log").display()
        )
    })?;
    report.node_setup_seconds = node_setup_seconds;
    report.scheduler_attempts = attempts;
    Ok(report)
}

/// The nodes: 32 cpu, 128Gi, 110 pods, three zones, Ready; created `in flight` at a time.
async fn create_nodes(http: &Http, n: usize) -> anyhow::Result<()> {
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..64 {
        let (http, next) = (http.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                if i >= n {
                    return Ok::<(), anyhow::Error>(());
                }
                let name = format!("node-{i:05}");
                let allocatable = json!({"cpu": "32", "memory": "128Gi", "pods": "110",
                                         "ephemeral-storage": "100Gi"});
                let node = json!({
                    "apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": name, "labels": {
                        "kubernetes.io/hostname": name,
                        "topology.kubernetes.io/zone": format!("zone-{}", i % 3)}},
                    "status": {
                        "capacity": allocatable, "allocatable": allocatable,
                        "conditions": [{"type": "Ready", "status": "True",
                                        "reason": "KubeletReady",
                                        "message": "kubelet is posting ready status"}]
                    }
                });
                let (status, body) = http
                    .send(
                        Method::POST,
                        "/api/v1/nodes",
                        Some(Bytes::from(node.to_string())),
                    )
                    .await?;
                if status != StatusCode::CREATED && status != StatusCode::CONFLICT {
                    bail!(
                        "creating {name}: {status}: {}",
                        String::from_utf8_lossy(&body)
                    );
                }
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

fn pod_body(name: &str, namespace: &str) -> Bytes {
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "bench-scheduler"}},
        "spec": {
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}],
        },
    });
    Bytes::from(pod.to_string())
}

/// Nanoseconds since the run's epoch, per pod; 0 = not yet.
struct Timeline {
    sent: Vec<AtomicU64>,
    scheduled: Vec<AtomicU64>,
}

async fn drive(
    args: &ThroughApiArgs,
    http: &Http,
    namespace: &str,
    store: &LocalStore,
    server: &LocalApiServer,
    scheduler: &mut SchedulerProcess,
) -> anyhow::Result<ThroughApiReport> {
    // The scheduler leads and has synced once a first pod gets bound.
    let (status, body) = http
        .send(
            Method::POST,
            &format!("/api/v1/namespaces/{namespace}/pods"),
            Some(pod_body("warm-up", namespace)),
        )
        .await?;
    if status != StatusCode::CREATED {
        bail!(
            "creating the warm-up pod: {status}: {}",
            String::from_utf8_lossy(&body)
        );
    }
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let (_, body) = http
            .send(
                Method::GET,
                &format!("/api/v1/namespaces/{namespace}/pods/warm-up"),
                None,
            )
            .await?;
        let pod: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        if pod.pointer("/spec/nodeName").is_some_and(Value::is_string) {
            break;
        }
        if let Some(status) = scheduler.exited() {
            bail!("the scheduler exited ({status})");
        }
        if Instant::now() > deadline {
            bail!("the warm-up pod was not scheduled within 180 s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Open the create pool's connections before the clock starts.
    for _ in 0..args.in_flight.min(64) {
        http.send(Method::GET, "/readyz", None).await?;
    }

    let timeline = Arc::new(Timeline {
        sent: (0..args.pods).map(|_| AtomicU64::new(0)).collect(),
        scheduled: (0..args.pods).map(|_| AtomicU64::new(0)).collect(),
    });
    let scheduled_count = Arc::new(AtomicU64::new(0));
    let epoch = Instant::now();
    let config = ClientConfig::new(vec![server.quic], store.certs_dir(), "admin");
    let watcher = ApiClient::new(config)?;
    let pods = api::resources::pods();
    let start_rv = watcher
        .list_raw(pods, Some(namespace), &ListParams::default())
        .await?
        .resource_version;
    let watch = tokio::spawn(watch_scheduled(
        watcher,
        namespace.to_string(),
        start_rv,
        epoch,
        timeline.clone(),
        scheduled_count.clone(),
    ));

    let cpu_before = process_cpu();
    let window = Instant::now();
    let histogram = Arc::new(parking_lot::Mutex::new(new_histogram()));
    let errors = Arc::new(AtomicU64::new(0));
    let last_answer = Arc::new(AtomicU64::new(0));
    let first_error = Arc::new(parking_lot::Mutex::new(None::<String>));
    let in_flight = Arc::new(tokio::sync::Semaphore::new(args.in_flight));
    let interval = Duration::from_secs_f64(1.0 / args.rate);
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(args.pods);
    for i in 0..args.pods {
        let due = started + interval.mul_f64(i as f64);
        tokio::time::sleep_until(due.into()).await;
        let permit = in_flight.clone().acquire_owned().await?;
        let (http, timeline, histogram, errors, last_answer, first_error) = (
            http.clone(),
            timeline.clone(),
            histogram.clone(),
            errors.clone(),
            last_answer.clone(),
            first_error.clone(),
        );
        let namespace = namespace.to_string();
        tasks.push(tokio::spawn(async move {
            let name = format!("p-{i:07}");
            timeline.sent[i].store(
                (epoch.elapsed().as_nanos() as u64).max(1),
                Ordering::Relaxed,
            );
            let result = http
                .send(
                    Method::POST,
                    &format!("/api/v1/namespaces/{namespace}/pods"),
                    Some(pod_body(&name, &namespace)),
                )
                .await;
            drop(permit);
            last_answer.fetch_max(epoch.elapsed().as_nanos() as u64, Ordering::Relaxed);
            match result {
                Ok((StatusCode::CREATED, _)) => {
                    let _ = histogram
                        .lock()
                        .record(due.elapsed().as_micros().max(1) as u64);
                }
                Ok((status, body)) => {
                    errors.fetch_add(1, Ordering::Relaxed);
                    first_error.lock().get_or_insert_with(|| {
                        format!("{status}: {}", String::from_utf8_lossy(&body))
                    });
                }
                Err(e) => {
                    errors.fetch_add(1, Ordering::Relaxed);
                    first_error.lock().get_or_insert_with(|| e.to_string());
                }
            }
        }));
    }
    for t in tasks {
        t.await?;
    }
    let created = histogram.lock().len();
    let create_errors = errors.load(Ordering::Relaxed);
    let first_sent = timeline.sent[0].load(Ordering::Relaxed);
    let creates_per_sec = created as f64
        / (last_answer
            .load(Ordering::Relaxed)
            .saturating_sub(first_sent) as f64
            / 1e9);

    let deadline = Instant::now() + args.settle;
    while scheduled_count.load(Ordering::Relaxed) < created && Instant::now() < deadline {
        if watch.is_finished() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let window_seconds = window.elapsed().as_secs_f64();
    let cpu_after = process_cpu();
    if watch.is_finished() {
        if let Err(e) = watch.await? {
            first_error.lock().get_or_insert(format!("pod watch: {e}"));
        }
    } else {
        watch.abort();
    }

    let mut latency = new_histogram();
    let mut last_scheduled = 0;
    let mut scheduled = 0;
    for i in 0..args.pods {
        let (sent, at) = (
            timeline.sent[i].load(Ordering::Relaxed),
            timeline.scheduled[i].load(Ordering::Relaxed),
        );
        if sent == 0 || at == 0 {
            continue;
        }
        scheduled += 1;
        last_scheduled = last_scheduled.max(at);
        let _ = latency.record((at.saturating_sub(sent) / 1000).max(1));
    }
    let seconds = last_scheduled.saturating_sub(first_sent) as f64 / 1e9;
    let cpu = cpu_after
        .iter()
        .map(|(process, after)| {
            let before = cpu_before.get(process).copied().unwrap_or(0.0);
            ProcessCpu {
                process: process.clone(),
                cpu_seconds: after - before,
                cores: (after - before) / window_seconds,
            }
        })
        .collect();
    let first_error = first_error.lock().take();
    let create_latency_ms = percentiles(&histogram.lock());
    Ok(ThroughApiReport {
        mode: "through-apiserver",
        nodes: args.nodes,
        pods: args.pods,
        store_members: args.store_members,
        scheduler_workers: args.workers,
        rate_offered: args.rate,
        node_setup_seconds: 0.0,
        created,
        create_errors,
        creates_per_sec,
        create_latency_ms,
        scheduled,
        seconds,
        binds_per_sec: if seconds > 0.0 {
            scheduled as f64 / seconds
        } else {
            0.0
        },
        create_to_scheduled_ms: percentiles(&latency),
        scheduler_attempts: BTreeMap::new(),
        cpu,
        first_error,
    })
}

/// Notes when each bench pod is first seen bound; re-watches from the last version seen if the
/// server ends the stream.
async fn watch_scheduled(
    client: ApiClient,
    namespace: String,
    mut resource_version: String,
    epoch: Instant,
    timeline: Arc<Timeline>,
    count: Arc<AtomicU64>,
) -> anyhow::Result<()> {
    let pods = api::resources::pods();
    loop {
        let params = ListParams::default()
            .at(resource_version.clone())
            .bookmarks();
        let mut stream = client.watch(pods, Some(&namespace), &params).await?;
        while let Some(frame) = stream.next().await {
            let now = (epoch.elapsed().as_nanos() as u64).max(1);
            let frame = frame?;
            let Ok(object) = serde_json::from_slice::<Value>(&frame.object) else {
                continue;
            };
            if let Some(rv) = object
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
            {
                resource_version = rv.to_string();
            }
            if frame.kind == api::protocol::WatchEventKind::Bookmark {
                continue;
            }
            let bound = object
                .pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .is_some_and(|n| !n.is_empty());
            let index = object
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .and_then(|n| n.strip_prefix("p-"))
                .and_then(|i| i.parse::<usize>().ok());
            if let (true, Some(slot)) = (bound, index.and_then(|i| timeline.scheduled.get(i))) {
                if slot
                    .compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
                {
                    count.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

/// CPU seconds used so far by this process and each of its children, named by their
/// subcommand (`store-member`, `apiserver`, `scheduler`; members summed), from `/proc`.
fn process_cpu() -> BTreeMap<String, f64> {
    // USER_HZ, the unit of /proc/*/stat times, is 100 on Linux.
    const TICKS: f64 = 100.0;
    let me = std::process::id();
    let mut out = BTreeMap::new();
    let stat = |pid: &str| -> Option<(u32, f64)> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name may hold spaces; the fields after it are fixed.
        let rest = text.rsplit_once(')')?.1;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ppid = fields.get(1)?.parse().ok()?;
        let utime: f64 = fields.get(11)?.parse().ok()?;
        let stime: f64 = fields.get(12)?.parse().ok()?;
        Some((ppid, (utime + stime) / TICKS))
    };
    if let Some((_, cpu)) = stat("self") {
        out.insert("bench client (creates + watch)".to_string(), cpu);
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in entries.flatten() {
        let pid = entry.file_name().to_string_lossy().to_string();
        if !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Some((ppid, cpu)) = stat(&pid) else {
            continue;
        };
        if ppid != me {
            continue;
        }
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let name = cmdline
            .split(|b| *b == 0)
            .nth(1)
            .map(|a| String::from_utf8_lossy(a).to_string())
            .unwrap_or_else(|| format!("pid {pid}"));
        *out.entry(name).or_default() += cpu;
    }
    out
}

/// The `kemu scheduler` under test.
struct SchedulerProcess {
    child: Option<Child>,
    metrics: std::net::SocketAddr,
}

impl SchedulerProcess {
    fn start(
        exe: &Path,
        store: &LocalStore,
        server: &LocalApiServer,
        work_dir: &Path,
        workers: usize,
    ) -> anyhow::Result<SchedulerProcess> {
        let certs = store.certs_dir();
        if !certs.join("scheduler.crt").exists() {
            pki::issue(
                &certs,
                &CertSpec {
                    name: "scheduler".into(),
                    organizations: vec!["system:kube-scheduler".into()],
                    sans: vec![],
                },
            )?;
        }
        let port = free_ports(1)?[0];
        let metrics: std::net::SocketAddr = format!("127.0.0.1:{port}").parse()?;
        let log = std::fs::File::create(work_dir.join("scheduler.log"))?;
        let child = Command::new(exe)
            .args([
                "scheduler",
                "--apiserver",
                &server.quic.to_string(),
                "--certs",
            ])
            .arg(&certs)
            .args(["--workers", &workers.to_string()])
            .args(["--metrics-addr", &metrics.to_string()])
            .args(["--holder-identity", "bench"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .context("starting kemu scheduler")?;
        Ok(SchedulerProcess {
            child: Some(child),
            metrics,
        })
    }

    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// `scheduler_schedule_attempts_total` by result.
    async fn attempts(&self) -> anyhow::Result<BTreeMap<String, u64>> {
        let (_, text) = http_get(self.metrics, "/metrics").await?;
        Ok(text
            .lines()
            .filter_map(|l| l.strip_prefix("scheduler_schedule_attempts_total{result=\""))
            .filter_map(|l| {
                let (result, value) = l.split_once("\"} ")?;
                Some((result.to_string(), value.trim().parse::<f64>().ok()? as u64))
            })
            .collect())
    }

    async fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            terminate(&mut child, Duration::from_secs(5)).await;
        }
    }
}

impl Drop for SchedulerProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
