//! `kemu bench apiserver`: the API server's two headline figures.
//!
//! - **creates**: pod creates over HTTP/1.1 (the path kubectl and client-go take) from a pooled
//!   hyper client with many requests in flight, closed-loop (`--clients` workers, each sending
//!   its next create when the last is answered) or open-loop at `--rate` creates/s (then latency
//!   counts from each request's scheduled start, so a stalled server is not hidden by the
//!   generator waiting for it). Reports creates/s and p50/p90/p99/max.
//! - **status**: pod status writes over the QUIC component front as a node host sends them,
//!   and the API server's CPU per write ([`status`]).
//! - **watch**: `--watchers` node-scoped pod watches (`fieldSelector=spec.nodeName=node-i`) over
//!   the QUIC component front, `--watches-per-connection` of them multiplexed on each connection
//!   as node hosts do. Pods are then created and bound round-robin across the nodes at
//!   `--watch-rate`; the delivery latency of a pod is the time from its bind's answer to the
//!   moment its node's watcher holds the event (all clocks are this process's).
//!
//! `--spawn` starts a store (`--store-members`) and one API server from this binary for the run;
//! otherwise `--url` (and `--quic` with `--certs` for the watch part) name a running one.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use api::client::{Client as ApiClient, ClientConfig, ListParams};
use bytes::Bytes;
use hdrhistogram::Histogram;
use hyper::{Method, StatusCode};
use parking_lot::Mutex;
use serde::Serialize;
use serde_json::{json, Value};

use cluster::api_access::{ApiCredentials, KubeconfigChoice};
use cluster::kube_http::{KubeHttp, PoolShape, Versions};
use cluster::process::{LocalApiServer, LocalStore};

use crate::store::Percentiles;

mod status;

/// Which measurements `kemu bench apiserver` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    Creates,
    Watch,
    Status,
    All,
}

/// `kemu bench apiserver`: what to run against which server (the command line's flags, one
/// field each).
#[derive(Debug, Clone)]
pub struct ApiBench {
    /// Start a local store and one API server (this binary) for the run.
    pub spawn: bool,
    /// Store members to start with `--spawn`.
    pub store_members: usize,
    /// URL of a running API server (https://HOST:PORT); with `--kubeconfig` for its CA and
    /// credentials.
    pub url: Option<String>,
    /// Kubeconfig and context with the CA and credentials for `--url` (its server is used
    /// without `--url`).
    pub kubeconfig: Option<KubeconfigChoice>,
    /// With `--spawn`: run the creates part twice, side by side — through the full pipeline as a
    /// bearer-token user bound to `edit` by RBAC, and on a second API server over the same store
    /// with authentication and authorization off (`--anonymous-auth --authorization-mode
    /// AlwaysAllow`, no credentials sent).
    pub compare_auth: bool,
    /// QUIC address of a running API server's component front (for the watch part).
    pub quic: Option<SocketAddr>,
    /// Certificates directory (ca.crt and `--identity`'s certificate) for `--quic`.
    pub certs: Option<PathBuf>,
    /// Which certificate in `--certs` the watch part presents.
    pub identity: String,
    /// Which measurement(s) to run.
    pub part: Part,
    /// Pods to create in the creates part.
    pub pods: u64,
    /// Closed loop: concurrent workers. Open loop (`--rate`): the cap on requests in flight.
    pub clients: usize,
    /// Open loop: creates per second to offer (0 = closed loop).
    pub rate: f64,
    /// Node-scoped pod watches in the watch part (one per node).
    pub watchers: usize,
    /// Watches multiplexed on one QUIC connection.
    pub watches_per_connection: usize,
    /// Pods created and bound in the watch part.
    pub watch_pods: u64,
    /// Pods per second created and bound in the watch part.
    pub watch_rate: f64,
    /// Pods whose status the status part writes (twice each).
    pub status_pods: u64,
    /// Nodes the status part registers and binds its pods to, round-robin.
    pub status_nodes: usize,
    /// Which certificate in `--certs` the status part writes as (a node host's, in
    /// `system:nodes`); with `--spawn` it is issued for the run.
    pub node_host_identity: String,
    /// Print the results as JSON.
    pub json: bool,
    /// Keep the spawned cluster's directory here instead of a temporary one.
    pub work_dir: Option<PathBuf>,
    /// With `--spawn`: also start a second API server over the same store with every
    /// admission plugin disabled, and run the creates part against both, one after the other.
    pub compare_admission: bool,
    /// With `--spawn`: also start a second API server with the whole pipeline off — no
    /// authentication or authorization (`--anonymous-auth --authorization-mode AlwaysAllow`) and
    /// no admission plugin — and compare the full pipeline (the token user through RBAC, every
    /// plugin) with it.
    pub compare_pipeline: bool,
    /// With a `--compare-*` flag: run the creates part this many times on each server,
    /// interleaved (A B A B …), and report every run and the medians.
    pub rounds: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct CreateResult {
    pub mode: String,
    pub pods: u64,
    pub errors: u64,
    pub seconds: f64,
    pub creates_per_sec: f64,
    pub latency_ms: Percentiles,
    /// Authentication + authorization + admission per create, as the server itself timed them
    /// (its `/metrics`, scraped before and after the run); `None` if it observed no create.
    pub pipeline_us: Option<PipelineFigures>,
}

/// The server's own timing of the request pipeline during one create run, in µs,
/// interpolated inside the histogram's buckets as Prometheus' `histogram_quantile` does.
#[derive(Debug, Clone, Serialize)]
pub struct PipelineFigures {
    /// The three stages together, per create.
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub authn_p50: Option<f64>,
    pub authz_p50: Option<f64>,
    pub admission_p50: Option<f64>,
}

/// The runs of one server configuration in a comparison, and their medians.
#[derive(Debug, Serialize)]
pub struct VariantRuns {
    pub label: String,
    pub runs: Vec<CreateResult>,
    pub median_creates_per_sec: f64,
    pub median_p50_ms: f64,
    pub median_p99_ms: f64,
    /// Median over runs of the server-timed pipeline p50 (µs).
    pub median_pipeline_p50_us: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct WatchResult {
    pub watchers: usize,
    pub connections: usize,
    pub pods: u64,
    pub errors: u64,
    /// Pods whose event reached the right watcher.
    pub delivered: u64,
    /// Events that reached a watcher of another node (must be 0).
    pub misrouted: u64,
    pub seconds_to_establish: f64,
    pub binds_per_sec: f64,
    /// From the bind's answer to the event's arrival (0 if it arrived first).
    pub delivery_ms: Percentiles,
    /// From sending the bind to the event's arrival: an upper bound.
    pub delivery_from_request_ms: Percentiles,
}

#[derive(Debug, Default, Serialize)]
pub struct ApiBenchReport {
    pub target: String,
    /// The creates part (with a comparison: the first run through the full pipeline).
    pub creates: Option<CreateResult>,
    /// With `--compare-*`: every configuration's runs (interleaved over `--rounds`), the full
    /// pipeline first.
    pub comparison: Vec<VariantRuns>,
    pub watch: Option<WatchResult>,
    pub status: Option<status::StatusResult>,
}

/// Runs the parts `args` asks for and prints the results.
pub async fn run(args: ApiBench) -> anyhow::Result<()> {
    if args.clients == 0 || args.watches_per_connection == 0 {
        bail!("--clients and --watches-per-connection must be positive");
    }
    let temp = tempfile::Builder::new()
        .prefix("kemu-bench-api")
        .tempdir()?;
    let work_dir = args
        .work_dir
        .clone()
        .unwrap_or_else(|| temp.path().to_path_buf());
    let (mut url, mut quic, mut certs) = (args.url.clone(), args.quic, args.certs.clone());
    let mut credentials = ApiCredentials::default();
    if let Some(choice) = &args.kubeconfig {
        let (server, from_file) = choice.load()?;
        url.get_or_insert(server);
        credentials = from_file;
    }
    if args.compare_auth && !args.spawn {
        bail!("--compare-auth needs --spawn");
    }
    if args.compare_admission && !args.spawn {
        bail!("--compare-admission needs --spawn");
    }
    if args.compare_pipeline && !args.spawn {
        bail!("--compare-pipeline needs --spawn");
    }
    if args.rounds == 0 {
        bail!("--rounds must be positive");
    }
    let mut spawned = None;
    let mut bare = None;
    let mut unauthenticated = None;
    let mut no_pipeline = None;
    let mut token_user = None;
    if args.spawn {
        let store = LocalStore::start(&work_dir.join("cluster"), args.store_members).await?;
        let exe = std::env::current_exe()?;
        let tokens = work_dir.join("tokens.csv");
        std::fs::write(&tokens, format!("{BENCH_TOKEN},bench,bench\n"))?;
        let token_arg = vec![
            "--token-auth-file".to_string(),
            tokens.display().to_string(),
        ];
        let server = LocalApiServer::start_with(&exe, &store, "apiserver", &token_arg).await?;
        if args.compare_admission {
            let all = apiserver::admission::Plugin::ALL
                .map(|p| p.name())
                .join(",");
            let mut extra = token_arg.clone();
            extra.push(format!("--disable-admission-plugins={all}"));
            bare = Some(LocalApiServer::start_with(&exe, &store, "apiserver-bare", &extra).await?);
        }
        url = Some(server.url());
        quic = Some(server.quic);
        certs = Some(store.certs_dir());
        credentials = ApiCredentials::from_certs_dir(&store.certs_dir(), Some("admin"))?;
        let mut open = token_arg.clone();
        open.extend(["--anonymous-auth", "--authorization-mode", "AlwaysAllow"].map(String::from));
        if args.compare_auth {
            let other = LocalApiServer::start_with(&exe, &store, "apiserver-open", &open).await?;
            unauthenticated = Some(other);
        }
        if args.compare_pipeline {
            let all = apiserver::admission::Plugin::ALL
                .map(|p| p.name())
                .join(",");
            let mut none = open.clone();
            none.push(format!("--disable-admission-plugins={all}"));
            let other = LocalApiServer::start_with(&exe, &store, "apiserver-none", &none).await?;
            no_pipeline = Some(other);
        }
        if args.compare_auth || args.compare_pipeline {
            token_user = Some(credentials.with_token(BENCH_TOKEN));
        }
        spawned = Some((store, server));
    }
    let url = url.context("give --spawn, --url or --kubeconfig")?;
    let mut report = ApiBenchReport {
        target: if args.spawn {
            format!(
                "kemu apiserver ({}-member store, spawned)",
                args.store_members
            )
        } else {
            url.clone()
        },
        ..Default::default()
    };
    let http = Http::new(&url, args.clients, &credentials)?;
    if matches!(args.part, Part::Creates | Part::All) {
        // The full pipeline's client: the token user through RBAC when authentication and
        // authorization are compared, else the admin (system:masters).
        let primary = match &token_user {
            Some(token_user) => {
                // The token user may create pods anywhere, through RBAC (edit, aggregated).
                let binding = json!({
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRoleBinding",
                    "metadata": {"name": "bench-edit"},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
                    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bench"}],
                });
                let (status, text) = http
                    .send(
                        Method::POST,
                        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                        Some(Bytes::from(binding.to_string())),
                    )
                    .await?;
                if !status.is_success() && status != StatusCode::CONFLICT {
                    bail!(
                        "binding the bench user: {status}: {}",
                        String::from_utf8_lossy(&text)
                    );
                }
                let as_user = Http::new(&url, args.clients, token_user)?;
                // RBAC follows the watch cache: wait until the binding is in force.
                let probe = "/api/v1/namespaces/default/pods?limit=1";
                let deadline = Instant::now() + Duration::from_secs(30);
                while as_user.send(Method::GET, probe, None).await?.0 != StatusCode::OK {
                    if Instant::now() > deadline {
                        bail!("the bench user's binding did not take effect");
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                as_user
            }
            None => http.clone(),
        };
        let anonymous = ApiCredentials {
            ca_pem: credentials.ca_pem.clone(),
            ..Default::default()
        };
        // (label, the client that creates, the admin on the same server for its /metrics)
        let mut variants = vec![("full pipeline".to_string(), primary, http.clone())];
        if let Some(bare) = &bare {
            let user = match &token_user {
                Some(token_user) => Http::new(&bare.url(), args.clients, token_user)?,
                None => Http::new(&bare.url(), args.clients, &credentials)?,
            };
            let admin = Http::new(&bare.url(), 1, &credentials)?;
            variants.push(("without admission".into(), user, admin));
        }
        if let Some(open) = &unauthenticated {
            let user = Http::new(&open.url(), args.clients, &anonymous)?;
            let admin = Http::new(&open.url(), 1, &credentials)?;
            variants.push(("without authn/authz".into(), user, admin));
        }
        if let Some(none) = &no_pipeline {
            let user = Http::new(&none.url(), args.clients, &anonymous)?;
            let admin = Http::new(&none.url(), 1, &credentials)?;
            variants.push(("without the pipeline".into(), user, admin));
        }
        let mut runs: Vec<Vec<CreateResult>> = variants.iter().map(|_| Vec::new()).collect();
        // Interleaved, A B A B …, so a change in the machine's load hits every configuration.
        for round in 0..args.rounds {
            for (i, (label, user, admin)) in variants.iter().enumerate() {
                let result = creates(&args, &http, user, admin).await?;
                if args.rounds > 1 || variants.len() > 1 {
                    eprintln!("round {}, {label}: {}", round + 1, create_line(&result));
                }
                runs[i].push(result);
            }
        }
        let mut all = variants.into_iter().zip(runs).map(|((label, _, _), runs)| {
            let median_of = |f: &dyn Fn(&CreateResult) -> Option<f64>| {
                median(runs.iter().filter_map(f).collect())
            };
            VariantRuns {
                median_creates_per_sec: median_of(&|r| Some(r.creates_per_sec)).unwrap_or(0.0),
                median_p50_ms: median_of(&|r| Some(r.latency_ms.p50)).unwrap_or(0.0),
                median_p99_ms: median_of(&|r| Some(r.latency_ms.p99)).unwrap_or(0.0),
                median_pipeline_p50_us: median_of(&|r| r.pipeline_us.as_ref().map(|p| p.p50)),
                label,
                runs,
            }
        });
        let mut first = all.next().context("no create run")?;
        if first.runs.len() == 1 && all.len() == 0 {
            report.creates = first.runs.pop();
        } else {
            report.creates = Some(first.runs[0].clone());
            report.comparison = std::iter::once(first).chain(all).collect();
        }
    }
    if matches!(args.part, Part::Watch | Part::All) {
        let quic = quic.context("the watch part needs --quic (or --spawn)")?;
        let certs = certs
            .clone()
            .context("the watch part needs --certs (or --spawn)")?;
        let config = ClientConfig::new(vec![quic], &certs, &args.identity);
        report.watch = Some(watch_fan_out(&args, &http, config).await?);
    }
    if matches!(args.part, Part::Status | Part::All) {
        let quic = quic.context("the status part needs --quic (or --spawn)")?;
        let certs = certs.context("the status part needs --certs (or --spawn)")?;
        if args.spawn {
            transport::pki::issue(
                &certs,
                &transport::pki::CertSpec {
                    name: args.node_host_identity.clone(),
                    organizations: vec!["system:nodes".into()],
                    sans: vec![],
                },
            )?;
        }
        let admin_quic = ClientConfig::new(vec![quic], &certs, &args.identity);
        let node_host = ClientConfig::new(vec![quic], &certs, &args.node_host_identity);
        report.status = Some(status::status_writes(&args, &http, admin_quic, node_host).await?);
    }
    if let Some(bare) = bare {
        bare.stop().await;
    }
    if let Some(open) = unauthenticated {
        open.stop().await;
    }
    if let Some(none) = no_pipeline {
        none.stop().await;
    }
    if let Some((store, server)) = spawned {
        server.stop().await;
        store.stop().await;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    Ok(())
}

fn print_report(report: &ApiBenchReport) {
    println!("target: {}", report.target);
    if report.comparison.is_empty() {
        if let Some(c) = &report.creates {
            println!("pod creates {}", create_line(c));
        }
    }
    for v in &report.comparison {
        for (i, c) in v.runs.iter().enumerate() {
            println!(
                "pod creates, {}, run {}: {}",
                v.label,
                i + 1,
                create_line(c)
            );
        }
    }
    for v in &report.comparison {
        let pipeline = v
            .median_pipeline_p50_us
            .map(|p| format!("; server-timed pipeline p50 {p:.1} µs"))
            .unwrap_or_default();
        println!(
            "median of {} runs, {}: {:.0} creates/s, p50 {:.2} ms, p99 {:.2} ms{pipeline}",
            v.runs.len(),
            v.label,
            v.median_creates_per_sec,
            v.median_p50_ms,
            v.median_p99_ms
        );
    }
    if let Some(s) = &report.status {
        let cpu = s
            .apiserver_cpu_us_per_write
            .map(|us| format!("; API server CPU {us:.1} µs per write"))
            .unwrap_or_default();
        println!(
            "pod status writes (as a node host, over QUIC, {} nodes): {} writes, {} errors, {:.1} s, {:.0} writes/s; latency ms p50 {:.2} p90 {:.2} p99 {:.2} max {:.2}{cpu}; {} of {} pods read back Running",
            s.nodes,
            s.writes,
            s.errors,
            s.seconds,
            s.writes_per_sec,
            s.latency_ms.p50,
            s.latency_ms.p90,
            s.latency_ms.p99,
            s.latency_ms.max,
            s.running,
            s.pods
        );
    }
    if let Some(w) = &report.watch {
        println!(
            "watch fan-out: {} watchers on {} QUIC connections (established in {:.1} s); {} pods bound at {:.0}/s, {} errors; delivered {}, misrouted {}",
            w.watchers,
            w.connections,
            w.seconds_to_establish,
            w.pods,
            w.binds_per_sec,
            w.errors,
            w.delivered,
            w.misrouted
        );
        println!(
            "  delivery after the bind's answer, ms: p50 {:.2} p90 {:.2} p99 {:.2} max {:.2}",
            w.delivery_ms.p50, w.delivery_ms.p90, w.delivery_ms.p99, w.delivery_ms.max
        );
        println!(
            "  delivery after the bind's request, ms: p50 {:.2} p90 {:.2} p99 {:.2} max {:.2}",
            w.delivery_from_request_ms.p50,
            w.delivery_from_request_ms.p90,
            w.delivery_from_request_ms.p99,
            w.delivery_from_request_ms.max
        );
    }
}

/// One create run on a line.
fn create_line(c: &CreateResult) -> String {
    let pipeline = match &c.pipeline_us {
        Some(p) => format!(
            "; pipeline (server-timed) µs p50 {:.1} p90 {:.1} p99 {:.1} [authn p50 {}, authz p50 {}, admission p50 {}]",
            p.p50,
            p.p90,
            p.p99,
            optional_us(p.authn_p50),
            optional_us(p.authz_p50),
            optional_us(p.admission_p50),
        ),
        None => String::new(),
    };
    format!(
        "({}): {} pods, {} errors, {:.1} s, {:.0} creates/s; latency ms p50 {:.2} p90 {:.2} p99 {:.2} max {:.2}{pipeline}",
        c.mode,
        c.pods,
        c.errors,
        c.seconds,
        c.creates_per_sec,
        c.latency_ms.p50,
        c.latency_ms.p90,
        c.latency_ms.p99,
        c.latency_ms.max
    )
}

fn optional_us(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.1}")).unwrap_or_else(|| "-".into())
}

/// The median (the mean of the middle two for an even count); `None` for no values.
fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

/// The bench user's bearer token (`--compare-auth`, `--compare-pipeline`).
const BENCH_TOKEN: &str = "kemu-bench-token";

/// A pooled HTTP/1.1 client for one API server: requests in flight each hold a connection;
/// idle ones are kept for reuse.
#[derive(Clone)]
pub(crate) struct Http {
    client: KubeHttp,
    base: String,
}

impl Http {
    pub(crate) fn new(
        url: &str,
        pool: usize,
        credentials: &ApiCredentials,
    ) -> anyhow::Result<Http> {
        let shape = PoolShape {
            versions: Versions::Http1,
            max_idle_per_host: pool,
        };
        Ok(Http {
            client: KubeHttp::new(url, credentials, shape, "kemu-bench/0.1")?,
            base: url.trim_end_matches('/').to_string(),
        })
    }

    /// Sends one request; the status and the whole body.
    pub(crate) async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
    ) -> anyhow::Result<(StatusCode, Bytes)> {
        let url = format!("{}{path}", self.base);
        let body = body.unwrap_or_default();
        self.client
            .fetch(method, &url, Some("application/json"), body)
            .await
    }

    /// Creates a namespace (an existing one is fine).
    pub(crate) async fn ensure_namespace(&self, name: &str) -> anyhow::Result<()> {
        let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        let (status, text) = self
            .send(
                Method::POST,
                "/api/v1/namespaces",
                Some(Bytes::from(body.to_string())),
            )
            .await?;
        if !status.is_success() && status != StatusCode::CONFLICT {
            bail!(
                "creating namespace {name}: {status}: {}",
                String::from_utf8_lossy(&text)
            );
        }
        Ok(())
    }

    /// Deletes every pod of `namespace` (unbound pods go at once; bound ones with grace 0).
    async fn delete_pods(&self, namespace: &str) -> anyhow::Result<()> {
        let body = Bytes::from_static(br#"{"gracePeriodSeconds":0}"#);
        let (status, text) = self
            .send(
                Method::DELETE,
                &format!("/api/v1/namespaces/{namespace}/pods"),
                Some(body),
            )
            .await?;
        if !status.is_success() {
            bail!(
                "deleting the pods of {namespace}: {status}: {}",
                String::from_utf8_lossy(&text)
            );
        }
        Ok(())
    }

    /// The API server's `/metrics` text.
    async fn metrics(&self) -> anyhow::Result<String> {
        let (status, body) = self.send(Method::GET, "/metrics", None).await?;
        if status != StatusCode::OK {
            bail!("/metrics: {status}: {}", String::from_utf8_lossy(&body));
        }
        Ok(String::from_utf8_lossy(&body).into_owned())
    }

    /// The API server's `apiserver_registered_watchers{resource="pods"}` gauge.
    async fn pod_watchers(&self) -> anyhow::Result<usize> {
        let (_, body) = self.send(Method::GET, "/metrics", None).await?;
        let text = String::from_utf8_lossy(&body);
        Ok(text
            .lines()
            .find_map(|l| l.strip_prefix("apiserver_registered_watchers{resource=\"pods\"} "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0))
    }
}

/// A small pod like the ones a workload controller stamps out.
fn pod_body(name: &str, namespace: &str) -> Bytes {
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "bench", "bench": "apiserver"}},
        "spec": {
            "containers": [{
                "name": "main",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
            }],
            "restartPolicy": "Always",
        },
    });
    Bytes::from(pod.to_string())
}

pub(crate) fn percentiles(h: &Histogram<u64>) -> Percentiles {
    let ms = |v: u64| v as f64 / 1000.0;
    Percentiles {
        p50: ms(h.value_at_quantile(0.5)),
        p90: ms(h.value_at_quantile(0.9)),
        p99: ms(h.value_at_quantile(0.99)),
        max: ms(h.max()),
    }
}

pub(crate) fn new_histogram() -> Histogram<u64> {
    Histogram::new(3).expect("3 significant figures is a valid precision")
}

/// A namespace of its own per run, so runs against one cluster do not collide.
fn run_namespace(prefix: &str) -> String {
    use rand::Rng;
    format!(
        "{prefix}-{:06x}",
        rand::thread_rng().gen_range(0..0xFF_FFFF)
    )
}

/// The creates part: `admin` makes the run's namespace, `http` sends the timed creates, and
/// `server_admin` (the admin on `http`'s server) reads that server's pipeline timings.
async fn creates(
    args: &ApiBench,
    admin: &Http,
    http: &Http,
    server_admin: &Http,
) -> anyhow::Result<CreateResult> {
    let namespace = run_namespace("bench-creates");
    admin.ensure_namespace(&namespace).await?;
    // Open the pool's connections before the clock starts: handshakes are not create latency.
    let warm: Vec<_> = (0..args.clients)
        .map(|_| {
            let http = http.clone();
            tokio::spawn(async move { http.send(Method::GET, "/readyz", None).await })
        })
        .collect();
    for w in warm {
        w.await??;
    }
    let metrics_before = server_admin.metrics().await?;
    let histogram = Arc::new(Mutex::new(new_histogram()));
    let errors = Arc::new(AtomicU64::new(0));
    let first_error = Arc::new(Mutex::new(None::<String>));
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let record = {
        let (histogram, errors, first_error) =
            (histogram.clone(), errors.clone(), first_error.clone());
        move |local: &Histogram<u64>, failed: u64, error: Option<String>| {
            let _ = histogram.lock().add(local);
            errors.fetch_add(failed, Ordering::Relaxed);
            if let Some(e) = error {
                first_error.lock().get_or_insert(e);
            }
        }
    };
    let mut tasks = Vec::new();
    if args.rate > 0.0 {
        // Open loop: request i is due at started + i/rate, whatever happened to earlier ones.
        let in_flight = Arc::new(tokio::sync::Semaphore::new(args.clients));
        let interval = Duration::from_secs_f64(1.0 / args.rate);
        for i in 0..args.pods {
            let due = started + interval.mul_f64(i as f64);
            tokio::time::sleep_until(due.into()).await;
            let permit = in_flight.clone().acquire_owned().await?;
            let (http, namespace, record) = (http.clone(), namespace.clone(), record.clone());
            tasks.push(tokio::spawn(async move {
                let mut local = new_histogram();
                let (failed, error) = match create_pod(&http, &namespace, i).await {
                    Ok(()) => {
                        let _ = local.record(due.elapsed().as_micros().max(1) as u64);
                        (0, None)
                    }
                    Err(e) => (1, Some(e.to_string())),
                };
                drop(permit);
                record(&local, failed, error);
            }));
        }
    } else {
        for _ in 0..args.clients {
            let (http, namespace, next, record) = (
                http.clone(),
                namespace.clone(),
                next.clone(),
                record.clone(),
            );
            let pods = args.pods;
            tasks.push(tokio::spawn(async move {
                let mut local = new_histogram();
                let (mut failed, mut error) = (0, None);
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= pods {
                        break;
                    }
                    let sent = Instant::now();
                    match create_pod(&http, &namespace, i).await {
                        Ok(()) => {
                            let _ = local.record(sent.elapsed().as_micros().max(1) as u64);
                        }
                        Err(e) => {
                            failed += 1;
                            error.get_or_insert(e.to_string());
                        }
                    }
                }
                record(&local, failed, error);
            }));
        }
    }
    for t in tasks {
        t.await?;
    }
    let seconds = started.elapsed().as_secs_f64();
    let metrics_after = server_admin.metrics().await?;
    if let Some(e) = first_error.lock().take() {
        eprintln!("first create error: {e}");
    }
    if !args.spawn {
        // A spawned cluster is thrown away; a running one gets its pods back.
        http.delete_pods(&namespace).await?;
    }
    let h = histogram.lock();
    let ok = h.len();
    Ok(CreateResult {
        mode: if args.rate > 0.0 {
            format!(
                "open loop at {:.0}/s, ≤ {} in flight",
                args.rate, args.clients
            )
        } else {
            format!("closed loop, {} clients", args.clients)
        },
        pods: ok,
        errors: errors.load(Ordering::Relaxed),
        seconds,
        creates_per_sec: ok as f64 / seconds,
        latency_ms: percentiles(&h),
        pipeline_us: pipeline_figures(&metrics_before, &metrics_after),
    })
}

/// The pipeline's timings between two scrapes of a server's `/metrics`.
fn pipeline_figures(before: &str, after: &str) -> Option<PipelineFigures> {
    use apiserver::pipeline::{quantile_between, scrape_buckets};
    let us = |name: &str, labels: &str, q: f64| {
        quantile_between(
            &scrape_buckets(before, name, labels),
            &scrape_buckets(after, name, labels),
            q,
        )
        .map(|seconds| seconds * 1e6)
    };
    let total = |q| us("kemu_apiserver_create_pipeline_seconds", "", q);
    let stage = |s: &str| {
        us(
            "kemu_apiserver_request_pipeline_seconds",
            &format!("stage=\"{s}\""),
            0.5,
        )
    };
    Some(PipelineFigures {
        p50: total(0.5)?,
        p90: total(0.9)?,
        p99: total(0.99)?,
        authn_p50: stage("authn"),
        authz_p50: stage("authz"),
        admission_p50: stage("admission"),
    })
}

async fn create_pod(http: &Http, namespace: &str, i: u64) -> anyhow::Result<()> {
    let name = format!("bench-{i:07}");
    let (status, body) = http
        .send(
            Method::POST,
            &format!("/api/v1/namespaces/{namespace}/pods"),
            Some(pod_body(&name, namespace)),
        )
        .await?;
    if status != StatusCode::CREATED {
        bail!("{status}: {}", String::from_utf8_lossy(&body));
    }
    Ok(())
}

/// Nanoseconds since the run's start, per pod; 0 = not yet.
struct Timeline {
    bind_sent: Vec<AtomicU64>,
    bind_done: Vec<AtomicU64>,
    received: Vec<AtomicU64>,
}

impl Timeline {
    fn new(pods: usize) -> Timeline {
        let zeros = || (0..pods).map(|_| AtomicU64::new(0)).collect();
        Timeline {
            bind_sent: zeros(),
            bind_done: zeros(),
            received: zeros(),
        }
    }
}

async fn watch_fan_out(
    args: &ApiBench,
    http: &Http,
    config: ClientConfig,
) -> anyhow::Result<WatchResult> {
    let pods = api::resources::pods();
    let namespace = run_namespace("bench-watch");
    http.ensure_namespace(&namespace).await?;
    let baseline_watchers = http.pod_watchers().await?;
    let connections = args.watchers.div_ceil(args.watches_per_connection);
    let mut clients = Vec::new();
    for _ in 0..connections.max(1) {
        let mut config = config.clone();
        config.call_timeout = Duration::from_secs(60);
        clients.push(ApiClient::new(config)?);
    }
    // Every watch starts from one list's version, so none misses an event of the run.
    let start_rv = clients[0]
        .list_raw(pods, Some(&namespace), &ListParams::default())
        .await?
        .resource_version;
    let epoch = Instant::now();
    let timeline = Arc::new(Timeline::new(args.watch_pods as usize));
    let delivered = Arc::new(AtomicU64::new(0));
    let misrouted = Arc::new(AtomicU64::new(0));
    let opened = Arc::new(AtomicUsize::new(0));
    let watch_errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut watchers = Vec::new();
    for node in 0..args.watchers {
        let client = clients[node / args.watches_per_connection].clone();
        let params = ListParams::default()
            .fields(format!("spec.nodeName=node-{node}"))
            .at(start_rv.clone());
        let (timeline, delivered, misrouted, opened, watch_errors) = (
            timeline.clone(),
            delivered.clone(),
            misrouted.clone(),
            opened.clone(),
            watch_errors.clone(),
        );
        let namespace = namespace.clone();
        watchers.push(tokio::spawn(async move {
            let mut stream = match client.watch(pods, Some(&namespace), &params).await {
                Ok(s) => s,
                Err(e) => {
                    watch_errors.lock().push(format!("node-{node}: {e}"));
                    return;
                }
            };
            opened.fetch_add(1, Ordering::Relaxed);
            let node_name = format!("node-{node}");
            while let Some(frame) = stream.next().await {
                let now = epoch.elapsed().as_nanos() as u64;
                let frame = match frame {
                    Ok(frame) => frame,
                    Err(e) => {
                        watch_errors.lock().push(format!("{node_name}: {e}"));
                        return;
                    }
                };
                if frame.kind == api::protocol::WatchEventKind::Bookmark {
                    continue;
                }
                let Ok(object) = serde_json::from_slice::<Value>(&frame.object) else {
                    continue;
                };
                let index = object
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .and_then(|n| n.strip_prefix("w-"))
                    .and_then(|i| i.parse::<usize>().ok());
                let bound_to = object.pointer("/spec/nodeName").and_then(Value::as_str);
                if bound_to != Some(node_name.as_str()) {
                    misrouted.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                if let Some(slot) = index.and_then(|i| timeline.received.get(i)) {
                    if slot
                        .compare_exchange(0, now.max(1), Ordering::Relaxed, Ordering::Relaxed)
                        .is_ok()
                    {
                        delivered.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    // The watches are registered when the server's gauge says so.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let registered = http.pod_watchers().await?.saturating_sub(baseline_watchers);
        if registered >= args.watchers {
            break;
        }
        if let Some(e) = watch_errors.lock().first() {
            bail!("a watch failed: {e}");
        }
        if Instant::now() > deadline {
            bail!(
                "only {registered} of {} watches registered after 120 s ({} opened)",
                args.watchers,
                opened.load(Ordering::Relaxed)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let seconds_to_establish = epoch.elapsed().as_secs_f64();

    // Create and bind round-robin, open loop at --watch-rate, over a connection of its own.
    let driver = ApiClient::new(config.clone())?;
    let errors = Arc::new(AtomicU64::new(0));
    let in_flight = Arc::new(tokio::sync::Semaphore::new(256));
    let interval = Duration::from_secs_f64(1.0 / args.watch_rate.max(1.0));
    let binding_started = Instant::now();
    let mut binds = Vec::new();
    for i in 0..args.watch_pods as usize {
        tokio::time::sleep_until((binding_started + interval.mul_f64(i as f64)).into()).await;
        let permit = in_flight.clone().acquire_owned().await?;
        let (driver, timeline, errors, namespace) = (
            driver.clone(),
            timeline.clone(),
            errors.clone(),
            namespace.clone(),
        );
        let node = format!("node-{}", i % args.watchers.max(1));
        binds.push(tokio::spawn(async move {
            let name = format!("w-{i}");
            let pod: Value = serde_json::from_slice(&pod_body(&name, &namespace))
                .expect("the bench pod is JSON");
            let created: Result<Value, _> = driver.create(pods, Some(&namespace), &pod).await;
            if created.is_err() {
                errors.fetch_add(1, Ordering::Relaxed);
                return;
            }
            timeline.bind_sent[i].store(epoch.elapsed().as_nanos() as u64, Ordering::Relaxed);
            match driver.bind(&namespace, &name, &node).await {
                Ok(()) => timeline.bind_done[i]
                    .store(epoch.elapsed().as_nanos() as u64, Ordering::Relaxed),
                Err(_) => {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
            }
            drop(permit);
        }));
    }
    for b in binds {
        b.await?;
    }
    let binds_per_sec = args.watch_pods as f64 / binding_started.elapsed().as_secs_f64();
    let expected = args.watch_pods - errors.load(Ordering::Relaxed);
    let deadline = Instant::now() + Duration::from_secs(30);
    while delivered.load(Ordering::Relaxed) < expected && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for w in &watchers {
        w.abort();
    }
    let (mut after_answer, mut after_request) = (new_histogram(), new_histogram());
    for i in 0..args.watch_pods as usize {
        let received = timeline.received[i].load(Ordering::Relaxed);
        let (sent, done) = (
            timeline.bind_sent[i].load(Ordering::Relaxed),
            timeline.bind_done[i].load(Ordering::Relaxed),
        );
        if received == 0 || done == 0 {
            continue;
        }
        let _ = after_answer.record((received.saturating_sub(done) / 1000).max(1));
        let _ = after_request.record((received.saturating_sub(sent) / 1000).max(1));
    }
    drop(clients);
    if !args.spawn {
        http.delete_pods(&namespace).await?;
    }
    Ok(WatchResult {
        watchers: args.watchers,
        connections,
        pods: args.watch_pods,
        errors: errors.load(Ordering::Relaxed),
        delivered: delivered.load(Ordering::Relaxed),
        misrouted: misrouted.load(Ordering::Relaxed),
        seconds_to_establish,
        binds_per_sec,
        delivery_ms: percentiles(&after_answer),
        delivery_from_request_ms: percentiles(&after_request),
    })
}
