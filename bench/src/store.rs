//! `kemu bench store`: one load generator, driven against kemu's store and (with the `etcd`
//! feature) against real etcd, so both are measured side by side in one run.
//!
//! Each client is a closed loop: it sends its next operation when the previous one is answered.
//! Latency is recorded per operation in an HDR histogram (microseconds). With `--kill-leader`, the
//! generator SIGKILLs the leader of a cluster it spawned halfway through and reports how long it
//! took until a write succeeded again.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::Bytes;
use hdrhistogram::Histogram;
use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use store::client::{Client, ClientConfig};
use store::types::*;

use cluster::process::LocalStore;

use crate::etcd::LocalEtcd;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    Put,
    Range,
    /// Kubernetes' update: a transaction that puts a key if its mod revision is the one last
    /// seen (each client its own key).
    Txn,
    /// Kubernetes' create: a transaction that puts a new key if it does not exist
    /// (mod revision 0).
    Create,
    Mixed,
}

/// `kemu bench store`: what to drive and how (the command line's flags, one field each).
#[derive(Debug, Clone)]
pub struct StoreBench {
    /// Client addresses of a running kemu store.
    pub endpoints: Vec<SocketAddr>,
    /// Certificates directory for `--endpoints`.
    pub certs: Option<PathBuf>,
    /// Start a local kemu store with this many members for the run.
    pub spawn: usize,
    /// Drive a running etcd at these client URLs (http://HOST:PORT,...).
    pub etcd: Vec<String>,
    /// Start a local etcd cluster with this many members (needs the `etcd` binary).
    pub spawn_etcd: usize,
    /// Concurrent clients.
    pub clients: usize,
    /// Operations in all.
    pub ops: u64,
    /// Bytes per value.
    pub value_size: usize,
    /// Distinct keys.
    pub keys: u64,
    pub workload: Workload,
    /// SIGKILL the leader of a spawned cluster after this fraction of the ops and report how
    /// long writes failed (0 = no kill).
    pub kill_leader_at: f64,
    /// Print the results as JSON.
    pub json: bool,
    /// Keep the spawned clusters' directories here instead of a temporary one.
    pub work_dir: Option<PathBuf>,
    /// Members of a spawned kemu store take a snapshot every this many applied entries; the
    /// snapshots they took during the run (size, how long the raft thread paused, serialize and
    /// disk-write time) are reported from their logs. 0 = the member default, not reported.
    pub snapshot_entries: u64,
    /// With `spawn`: drive a second spawned kemu store through its etcd v3 gRPC front, with the
    /// client that drives etcd, so that the comparison with etcd is of stores, not protocols;
    /// a spawned etcd then speaks TLS with client certificates too, as kemu's front does.
    pub grpc: bool,
}

/// One snapshot a spawned member logged ("took a snapshot ...").
#[derive(Debug, Serialize)]
pub struct SnapshotTaken {
    pub member: String,
    pub bytes: u64,
    /// How long the raft thread (every write) waited for it.
    pub pause_ms: u64,
    pub serialize_ms: u64,
    pub write_ms: u64,
}

/// The snapshots in a member log: lines with the snapshot message and `key=value` fields.
fn snapshots_in_log(member: &str, log: &str) -> Vec<SnapshotTaken> {
    log.lines()
        .filter(|line| line.contains("took a snapshot"))
        .map(|line| {
            let field = |name: &str| {
                line.split_whitespace()
                    .find_map(|token| token.strip_prefix(name)?.strip_prefix('='))
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            SnapshotTaken {
                member: member.to_string(),
                bytes: field("bytes"),
                pause_ms: field("pause_ms"),
                serialize_ms: field("serialize_ms"),
                write_ms: field("write_ms"),
            }
        })
        .collect()
}

/// The result of one run against one target.
#[derive(Debug, Serialize)]
pub struct BenchResult {
    pub target: String,
    pub workload: Workload,
    pub clients: usize,
    pub ops: u64,
    pub errors: u64,
    pub value_size: usize,
    pub seconds: f64,
    pub ops_per_sec: f64,
    pub latency_ms: Percentiles,
    /// Time from the leader's SIGKILL to the first acknowledged write sent after it, when a
    /// kill was asked for.
    pub recovery_ms: Option<f64>,
    /// With `--snapshot-entries`: the snapshots the spawned members took during the run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub snapshots: Vec<SnapshotTaken>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

/// Runs the benchmark against every target `args` names and prints the results.
pub async fn run(args: StoreBench) -> anyhow::Result<()> {
    if args.clients == 0 || args.ops == 0 {
        bail!("--clients and --ops must be positive");
    }
    if !(0.0..1.0).contains(&args.kill_leader_at) {
        bail!("--kill-leader-at must be in [0, 1)");
    }
    let temp = tempfile::Builder::new().prefix("kemu-bench").tempdir()?;
    let work_dir = args
        .work_dir
        .clone()
        .unwrap_or_else(|| temp.path().to_path_buf());
    let mut results = Vec::new();

    if args.spawn > 0 {
        let dir = work_dir.join("kemu");
        let extra = if args.snapshot_entries > 0 {
            vec![
                "--snapshot-entries".to_string(),
                args.snapshot_entries.to_string(),
            ]
        } else {
            Vec::new()
        };
        let cluster =
            LocalStore::start_with(&std::env::current_exe()?, &dir, args.spawn, &extra).await?;
        let endpoints = cluster.client_endpoints();
        let mut result = {
            let target =
                KemuTarget::connect(&endpoints, &cluster.certs_dir(), args.clients).await?;
            let killer = (args.kill_leader_at > 0.0).then_some(Killer::Kemu(&cluster));
            drive(
                &args,
                &format!("kemu store ({} members)", args.spawn),
                target,
                killer,
            )
            .await?
        };
        cluster.stop().await;
        if args.snapshot_entries > 0 {
            for i in 1..=args.spawn {
                let name = format!("s{i}");
                let log = std::fs::read_to_string(cluster.log_path(&name))
                    .with_context(|| format!("reading member {name}'s log"))?;
                result.snapshots.extend(snapshots_in_log(&name, &log));
            }
        }
        results.push(result);
    }
    if args.spawn > 0 && args.grpc {
        let dir = work_dir.join("kemu-grpc");
        let cluster =
            LocalStore::start_with(&std::env::current_exe()?, &dir, args.spawn, &[]).await?;
        let urls: Vec<String> = cluster
            .grpc_endpoints()
            .iter()
            .map(|a| format!("https://{a}"))
            .collect();
        let result = {
            let target = etcd_target::EtcdTarget::connect_tls(
                &urls,
                &cluster.certs_dir(),
                store::config::STORE_ADMIN,
                args.clients,
            )
            .await?;
            let killer = (args.kill_leader_at > 0.0).then_some(Killer::Kemu(&cluster));
            drive(
                &args,
                &format!("kemu store, gRPC ({} members)", args.spawn),
                target,
                killer,
            )
            .await?
        };
        cluster.stop().await;
        results.push(result);
    }
    if !args.endpoints.is_empty() {
        let certs = args
            .certs
            .clone()
            .context("--certs is required with --endpoints")?;
        let target = KemuTarget::connect(&args.endpoints, &certs, args.clients).await?;
        results.push(drive(&args, "kemu store", target, None).await?);
    }
    if args.spawn_etcd > 0 {
        let dir = work_dir.join("etcd");
        // Beside kemu's gRPC front, which speaks only TLS with client certificates, etcd does
        // too: the comparison is then of stores, not of TLS against plain text.
        let etcd = LocalEtcd::start_with(&dir, args.spawn_etcd, args.grpc).await?;
        let result = {
            let target = match etcd.certs_dir() {
                Some(certs) => {
                    etcd_target::EtcdTarget::connect_tls(
                        &etcd.client_urls(),
                        certs,
                        crate::etcd::CLIENT_IDENTITY,
                        args.clients,
                    )
                    .await?
                }
                None => etcd_target::EtcdTarget::connect(&etcd.client_urls(), args.clients).await?,
            };
            let killer = (args.kill_leader_at > 0.0).then_some(Killer::Etcd(&etcd));
            drive(
                &args,
                &format!("etcd ({} members)", args.spawn_etcd),
                target,
                killer,
            )
            .await?
        };
        etcd.stop().await;
        results.push(result);
    }
    if !args.etcd.is_empty() {
        let target = etcd_target::EtcdTarget::connect(&args.etcd, args.clients).await?;
        results.push(drive(&args, "etcd", target, None).await?);
    }
    if results.is_empty() {
        bail!("nothing to drive: give --spawn N, --endpoints, --spawn-etcd N or --etcd");
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&results)?);
    } else {
        print_table(&results);
    }
    Ok(())
}

fn print_table(results: &[BenchResult]) {
    println!(
        "{:<26} {:>8} {:>8} {:>8} {:>10} {:>9} {:>9} {:>9} {:>9} {:>12}",
        "TARGET",
        "WORKLOAD",
        "OPS",
        "ERRORS",
        "OPS/S",
        "P50 ms",
        "P90 ms",
        "P99 ms",
        "MAX ms",
        "RECOVERY ms"
    );
    for r in results {
        println!(
            "{:<26} {:>8} {:>8} {:>8} {:>10.0} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>12}",
            r.target,
            format!("{:?}", r.workload).to_lowercase(),
            r.ops,
            r.errors,
            r.ops_per_sec,
            r.latency_ms.p50,
            r.latency_ms.p90,
            r.latency_ms.p99,
            r.latency_ms.max,
            r.recovery_ms
                .map(|v| format!("{v:.0}"))
                .unwrap_or_else(|| "-".into()),
        );
    }
    for r in results.iter().filter(|r| !r.snapshots.is_empty()) {
        println!("snapshots taken by {}:", r.target);
        println!(
            "  {:<6} {:>12} {:>10} {:>13} {:>9}",
            "MEMBER", "MB", "PAUSE ms", "SERIALIZE ms", "WRITE ms"
        );
        for s in &r.snapshots {
            println!(
                "  {:<6} {:>12.1} {:>10} {:>13} {:>9}",
                s.member,
                s.bytes as f64 / 1e6,
                s.pause_ms,
                s.serialize_ms,
                s.write_ms
            );
        }
    }
    // Every other figure against etcd's when etcd ran, else against the last one.
    let base = results
        .iter()
        .position(|r| r.target.starts_with("etcd"))
        .unwrap_or(results.len().saturating_sub(1));
    if results.len() >= 2 && results[base].ops_per_sec > 0.0 {
        for (_, r) in results.iter().enumerate().filter(|&(i, _)| i != base) {
            println!(
                "throughput ratio {} / {}: {:.2}x",
                r.target,
                results[base].target,
                r.ops_per_sec / results[base].ops_per_sec
            );
        }
    }
}

/// What the generator needs from a store.
pub trait KvTarget: Send + Sync + 'static {
    fn put(
        &self,
        client: usize,
        key: Bytes,
        value: Bytes,
    ) -> impl std::future::Future<Output = anyhow::Result<i64>> + Send;
    fn get(
        &self,
        client: usize,
        key: Bytes,
    ) -> impl std::future::Future<Output = anyhow::Result<i64>> + Send;
    /// Kubernetes' update: if the key's mod revision is `expected`, put; else read it. Returns
    /// (succeeded, the key's mod revision now).
    fn cas(
        &self,
        client: usize,
        key: Bytes,
        expected: i64,
        value: Bytes,
    ) -> impl std::future::Future<Output = anyhow::Result<(bool, i64)>> + Send;
}

struct KemuTarget {
    clients: Vec<Client>,
}

impl KemuTarget {
    /// Opens the connections before the clock starts, as etcd's client does in `connect`:
    /// handshakes are not part of a put's latency.
    async fn connect(
        endpoints: &[SocketAddr],
        certs: &Path,
        clients: usize,
    ) -> anyhow::Result<KemuTarget> {
        let target = KemuTarget::open(endpoints, certs, clients)?;
        for client in &target.clients {
            let warm_up = RangeRequest {
                range: KeyRange::single("bench/warm-up"),
                ..Default::default()
            };
            client.range(warm_up).await?;
        }
        Ok(target)
    }

    fn open(endpoints: &[SocketAddr], certs: &Path, clients: usize) -> anyhow::Result<KemuTarget> {
        // A handful of connections, spread over the members; clients share them (QUIC streams
        // multiplex), as etcd's benchmark shares its gRPC connections.
        let conns = clients.clamp(1, 16);
        let mut out = Vec::new();
        for i in 0..conns {
            let client = Client::new(
                ClientConfig::new(endpoints.to_vec()),
                certs,
                store::config::STORE_ADMIN,
            )?;
            client.prefer(i);
            out.push(client);
        }
        Ok(KemuTarget { clients: out })
    }

    fn client(&self, i: usize) -> &Client {
        &self.clients[i % self.clients.len()]
    }
}

impl KvTarget for KemuTarget {
    async fn put(&self, client: usize, key: Bytes, value: Bytes) -> anyhow::Result<i64> {
        let r = self
            .client(client)
            .put(PutRequest {
                key,
                value,
                lease: 0,
                prev_kv: false,
            })
            .await?;
        Ok(r.header.revision)
    }

    async fn get(&self, client: usize, key: Bytes) -> anyhow::Result<i64> {
        let r = self
            .client(client)
            .range(RangeRequest {
                range: KeyRange::single(key),
                ..Default::default()
            })
            .await?;
        Ok(r.kvs.first().map(|kv| kv.mod_revision).unwrap_or(0))
    }

    async fn cas(
        &self,
        client: usize,
        key: Bytes,
        expected: i64,
        value: Bytes,
    ) -> anyhow::Result<(bool, i64)> {
        let request = TxnRequest {
            compare: vec![Compare {
                range: KeyRange::single(key.clone()),
                result: CompareResult::Equal,
                target: CompareTarget::ModRevision(expected),
            }],
            success: vec![RequestOp::Put(PutRequest {
                key: key.clone(),
                value,
                lease: 0,
                prev_kv: false,
            })],
            failure: vec![RequestOp::Range(RangeRequest {
                range: KeyRange::single(key),
                ..Default::default()
            })],
        };
        let r = self.client(client).txn(request).await?;
        if r.succeeded {
            return Ok((true, r.header.revision));
        }
        let current = r
            .responses
            .iter()
            .find_map(|op| match op {
                ResponseOp::Range(range) => {
                    Some(range.kvs.first().map(|kv| kv.mod_revision).unwrap_or(0))
                }
                _ => None,
            })
            .unwrap_or(0);
        Ok((false, current))
    }
}

enum Killer<'a> {
    Kemu(&'a LocalStore),
    Etcd(&'a LocalEtcd),
}

impl Killer<'_> {
    async fn kill_leader(&self) -> anyhow::Result<String> {
        match self {
            Killer::Kemu(c) => c.kill_leader().await,
            Killer::Etcd(c) => c.kill_leader().await,
        }
    }
}

struct Recorder {
    histogram: Histogram<u64>,
    errors: u64,
}

/// `len` pseudo-random bytes (xorshift64 from `seed`), which LZ4 cannot shorten: values that
/// keep their size although the store compresses values (benchmarks, tests of large entries).
pub fn incompressible(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

async fn drive<T: KvTarget>(
    args: &StoreBench,
    name: &str,
    target: T,
    killer: Option<Killer<'_>>,
) -> anyhow::Result<BenchResult> {
    let target = Arc::new(target);
    // Incompressible: kemu's store compresses the values it keeps (`store::types::stored_values`)
    // and etcd does not, so one repeated byte would measure kemu on values of nearly nothing.
    let value_seed = incompressible(1, args.value_size);
    prefill(&target, args, &value_seed).await?;
    let issued = Arc::new(AtomicU64::new(0));
    let recorder = Arc::new(Mutex::new(Recorder {
        histogram: Histogram::new(3)?,
        errors: 0,
    }));
    // Nanoseconds since `started` of the last acknowledged write (for the recovery figure).
    let last_ack = Arc::new(AtomicU64::new(0));
    let first_ack_after_kill = Arc::new(AtomicU64::new(u64::MAX));
    let kill_at = Arc::new(AtomicU64::new(u64::MAX));
    let started = Instant::now();
    let mut workers = Vec::new();
    for c in 0..args.clients {
        let target = target.clone();
        let issued = issued.clone();
        let recorder = recorder.clone();
        let kill_at = kill_at.clone();
        let first_ack_after_kill = first_ack_after_kill.clone();
        let last_ack = last_ack.clone();
        let value = Bytes::from(value_seed.clone());
        let (ops, keys, workload) = (args.ops, args.keys, args.workload);
        workers.push(tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(c as u64);
            let mut local =
                Histogram::<u64>::new(3).expect("3 significant figures is a valid precision");
            let mut errors = 0;
            let own_key = Bytes::from(format!("bench/cas/{c:06}"));
            let mut expected = 0i64;
            let mut created = 0u64;
            while issued.fetch_add(1, Ordering::Relaxed) < ops {
                let key = Bytes::from(format!("bench/{:08}", rng.gen_range(0..keys)));
                let op_started = Instant::now();
                let is_write;
                let outcome = match workload {
                    Workload::Put => {
                        is_write = true;
                        target.put(c, key, value.clone()).await.map(|_| ())
                    }
                    Workload::Range => {
                        is_write = false;
                        target.get(c, key).await.map(|_| ())
                    }
                    Workload::Mixed => {
                        if rng.gen_bool(0.5) {
                            is_write = true;
                            target.put(c, key, value.clone()).await.map(|_| ())
                        } else {
                            is_write = false;
                            target.get(c, key).await.map(|_| ())
                        }
                    }
                    Workload::Create => {
                        is_write = true;
                        let fresh = Bytes::from(format!("bench/create/{c:06}/{created:010}"));
                        created += 1;
                        match target.cas(c, fresh, 0, value.clone()).await {
                            Ok((true, _)) => Ok(()),
                            Ok((false, _)) => Err(anyhow::anyhow!("a new key already existed")),
                            Err(e) => Err(e),
                        }
                    }
                    Workload::Txn => {
                        is_write = true;
                        match target
                            .cas(c, own_key.clone(), expected, value.clone())
                            .await
                        {
                            Ok((_, rev)) => {
                                expected = rev;
                                Ok(())
                            }
                            Err(e) => Err(e),
                        }
                    }
                };
                let elapsed = op_started.elapsed();
                match outcome {
                    Ok(()) => {
                        let _ = local.record(elapsed.as_micros().max(1) as u64);
                        if is_write {
                            let now = started.elapsed().as_nanos() as u64;
                            last_ack.fetch_max(now, Ordering::Relaxed);
                            // Recovery counts only writes sent after the kill: one already
                            // committed before it may still be acknowledged afterwards.
                            let sent = op_started.duration_since(started).as_nanos() as u64;
                            if sent > kill_at.load(Ordering::Relaxed) {
                                first_ack_after_kill.fetch_min(now, Ordering::Relaxed);
                            }
                        }
                    }
                    Err(_) => {
                        errors += 1;
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
            let mut r = recorder.lock();
            let _ = r.histogram.add(&local);
            r.errors += errors;
        }));
    }
    let mut killed = None;
    if let Some(killer) = &killer {
        let threshold = (args.ops as f64 * args.kill_leader_at) as u64;
        while issued.load(Ordering::Relaxed) < threshold {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let victim = killer.kill_leader().await?;
        kill_at.store(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        killed = Some(victim);
    }
    for w in workers {
        w.await?;
    }
    let seconds = started.elapsed().as_secs_f64();
    let r = recorder.lock();
    let ms = |q: f64| r.histogram.value_at_quantile(q) as f64 / 1000.0;
    let recovery_ms = killed.map(|_| {
        let kill = kill_at.load(Ordering::Relaxed);
        let first = first_ack_after_kill.load(Ordering::Relaxed);
        if first == u64::MAX {
            f64::INFINITY
        } else {
            (first - kill) as f64 / 1e6
        }
    });
    let ok = r.histogram.len();
    Ok(BenchResult {
        target: name.to_string(),
        workload: args.workload,
        clients: args.clients,
        ops: ok,
        errors: r.errors,
        value_size: args.value_size,
        seconds,
        ops_per_sec: ok as f64 / seconds,
        latency_ms: Percentiles {
            p50: ms(0.5),
            p90: ms(0.9),
            p99: ms(0.99),
            max: r.histogram.max() as f64 / 1000.0,
        },
        recovery_ms,
        snapshots: Vec::new(),
    })
}

/// Range and mixed workloads read keys that should exist.
async fn prefill<T: KvTarget>(
    target: &Arc<T>,
    args: &StoreBench,
    value: &[u8],
) -> anyhow::Result<()> {
    if !matches!(args.workload, Workload::Range | Workload::Mixed) {
        return Ok(());
    }
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for c in 0..args.clients.min(32) {
        let (target, next, keys, value) = (
            target.clone(),
            next.clone(),
            args.keys,
            Bytes::from(value.to_vec()),
        );
        tasks.push(tokio::spawn(async move {
            loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                if k >= keys {
                    return Ok::<_, anyhow::Error>(());
                }
                target
                    .put(c, Bytes::from(format!("bench/{k:08}")), value.clone())
                    .await?;
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

/// The etcd side of the comparison, through the Rust etcd v3 client (gRPC).
#[cfg(feature = "etcd")]
mod etcd_target {
    use super::*;
    use etcd_client::{Compare, CompareOp, Txn, TxnOp, TxnOpResponse};

    pub struct EtcdTarget {
        clients: Vec<etcd_client::Client>,
    }

    impl EtcdTarget {
        pub async fn connect(urls: &[String], clients: usize) -> anyhow::Result<EtcdTarget> {
            let conns = clients.clamp(1, 16);
            let mut out = Vec::new();
            for i in 0..conns {
                // Spread connections over members, as the kemu target does.
                let mut ordered = urls.to_vec();
                ordered.rotate_left(i % urls.len().max(1));
                out.push(
                    etcd_client::Client::connect(ordered, None)
                        .await
                        .context("connecting to etcd")?,
                );
            }
            Ok(EtcdTarget { clients: out })
        }

        /// Connections over TLS, as `identity` from the `certs` directory: kemu's gRPC front
        /// (which demands a client certificate from the cluster CA) or a TLS etcd.
        pub async fn connect_tls(
            urls: &[String],
            certs: &Path,
            identity: &str,
            clients: usize,
        ) -> anyhow::Result<EtcdTarget> {
            let options = crate::etcd::etcd_ops::tls_options(certs, identity)?;
            let conns = clients.clamp(1, 16);
            let mut out = Vec::new();
            for i in 0..conns {
                let mut ordered = urls.to_vec();
                ordered.rotate_left(i % urls.len().max(1));
                out.push(
                    etcd_client::Client::connect(ordered, Some(options.clone()))
                        .await
                        .context("connecting over TLS")?,
                );
            }
            Ok(EtcdTarget { clients: out })
        }

        fn client(&self, i: usize) -> etcd_client::Client {
            self.clients[i % self.clients.len()].clone()
        }
    }

    impl KvTarget for EtcdTarget {
        async fn put(&self, client: usize, key: Bytes, value: Bytes) -> anyhow::Result<i64> {
            let r = self
                .client(client)
                .put(key.to_vec(), value.to_vec(), None)
                .await?;
            Ok(r.header().map(|h| h.revision()).unwrap_or(0))
        }

        async fn get(&self, client: usize, key: Bytes) -> anyhow::Result<i64> {
            let r = self.client(client).get(key.to_vec(), None).await?;
            Ok(r.kvs().first().map(|kv| kv.mod_revision()).unwrap_or(0))
        }

        async fn cas(
            &self,
            client: usize,
            key: Bytes,
            expected: i64,
            value: Bytes,
        ) -> anyhow::Result<(bool, i64)> {
            let txn = Txn::new()
                .when([Compare::mod_revision(
                    key.to_vec(),
                    CompareOp::Equal,
                    expected,
                )])
                .and_then([TxnOp::put(key.to_vec(), value.to_vec(), None)])
                .or_else([TxnOp::get(key.to_vec(), None)]);
            let r = self.client(client).txn(txn).await?;
            if r.succeeded() {
                return Ok((true, r.header().map(|h| h.revision()).unwrap_or(0)));
            }
            let current = r
                .op_responses()
                .into_iter()
                .find_map(|op| match op {
                    TxnOpResponse::Get(g) => {
                        Some(g.kvs().first().map(|kv| kv.mod_revision()).unwrap_or(0))
                    }
                    _ => None,
                })
                .unwrap_or(0);
            Ok((false, current))
        }
    }
}

#[cfg(not(feature = "etcd"))]
mod etcd_target {
    use super::*;

    pub struct EtcdTarget;

    impl EtcdTarget {
        pub async fn connect(_urls: &[String], _clients: usize) -> anyhow::Result<EtcdTarget> {
            bail!("this kemu was built without etcd support; build it with `--features etcd` (needs protoc)")
        }

        pub async fn connect_tls(
            _urls: &[String],
            _certs: &Path,
            _identity: &str,
            _clients: usize,
        ) -> anyhow::Result<EtcdTarget> {
            bail!("this kemu was built without etcd support; build it with `--features etcd` (needs protoc)")
        }
    }

    impl KvTarget for EtcdTarget {
        async fn put(&self, _: usize, _: Bytes, _: Bytes) -> anyhow::Result<i64> {
            bail!("no etcd support")
        }
        async fn get(&self, _: usize, _: Bytes) -> anyhow::Result<i64> {
            bail!("no etcd support")
        }
        async fn cas(&self, _: usize, _: Bytes, _: i64, _: Bytes) -> anyhow::Result<(bool, i64)> {
            bail!("no etcd support")
        }
    }
}
