//! The register workload run directly against the store during chaos: a few clients doing
//! reads, writes and compare-and-sets on a handful of keys, recording every operation for the
//! linearizability checker; and probers whose writes measure availability (of the store, and
//! of each API server).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use store::client::{Client, ClientError};
use store::types::{
    Compare, CompareResult, CompareTarget, KeyRange, PutRequest, RequestOp, TxnRequest,
};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::Instrument;

use super::availability::Probe;

/// The probes one prober has answered so far, shared with whoever waits for recovery while it
/// runs; the prober returns them sorted when it stops.
pub type ProbeLog = Arc<Mutex<Vec<Probe>>>;
use super::history::{Operation, RegisterInput, RegisterOutput};
use super::RunClock;
use cluster::api_access::ApiAccess;

/// Register workload settings.
#[derive(Clone, Debug)]
pub struct RegisterWorkload {
    /// Every key lives under this prefix (the watch recorder watches it).
    pub prefix: String,
    pub clients: usize,
    pub keys: usize,
    /// Pause between one client's operations.
    pub think: Duration,
    pub seed: u64,
}

impl RegisterWorkload {
    pub fn key(&self, i: usize) -> String {
        format!("{}k{i}", self.prefix)
    }
}

/// Runs `clients` until `stop` turns true; returns the history. `make_client(i)` gives client
/// `i` its own connections.
pub async fn run_register(
    workload: RegisterWorkload,
    make_client: impl Fn(usize) -> anyhow::Result<Client>,
    clock: RunClock,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<Vec<Operation>> {
    let history = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = JoinSet::new();
    for i in 0..workload.clients {
        let client = make_client(i)?;
        client.prefer(i);
        let workload = workload.clone();
        let history = history.clone();
        let stop = stop.clone();
        tasks.spawn(async move {
            register_client(i as u32, client, workload, clock, stop, history).await
        });
    }
    while tasks.join_next().await.is_some() {}
    let mut history = std::mem::take(&mut *history.lock());
    history.sort_by_key(|o: &Operation| o.call_ns);
    Ok(history)
}

async fn register_client(
    id: u32,
    client: Client,
    workload: RegisterWorkload,
    clock: RunClock,
    stop: watch::Receiver<bool>,
    history: Arc<Mutex<Vec<Operation>>>,
) {
    let mut rng = StdRng::seed_from_u64(workload.seed ^ (id as u64).wrapping_mul(0x9e37_79b9));
    // What this client last read per key: its CAS expectations (often stale under contention,
    // so CAS fails as well as succeeds).
    let mut last_read: Vec<Option<String>> = vec![None; workload.keys];
    let mut seq = 0u64;
    while !*stop.borrow() {
        let k = rng.gen_range(0..workload.keys);
        let key = workload.key(k);
        seq += 1;
        let value = format!("c{id}-{seq}");
        let choice = rng.gen_range(0..10);
        let call_ns = clock.nanos();
        let (input, output, revision) = if choice < 4 {
            match client.get(key.clone()).await {
                Ok(kv) => {
                    let value = kv.map(|kv| String::from_utf8_lossy(&kv.value).into_owned());
                    last_read[k] = value.clone();
                    let revision = None;
                    (
                        RegisterInput::Read,
                        RegisterOutput::Read { value },
                        revision,
                    )
                }
                // A failed read changed nothing and tells nothing.
                Err(_) => continue,
            }
        } else if choice < 7 {
            let put = client.put(PutRequest {
                key: Bytes::from(key.clone()),
                value: Bytes::from(value.clone()),
                ..Default::default()
            });
            let input = RegisterInput::Write {
                value: value.clone(),
            };
            match put.await {
                Ok(r) => (input, RegisterOutput::Written, Some(r.header.revision)),
                Err(e) if definitely_not_applied(&e) => continue,
                Err(_) => (input, RegisterOutput::Unknown, None),
            }
        } else {
            let expected = last_read[k].clone();
            let target = match &expected {
                Some(v) => Compare {
                    range: KeyRange::single(Bytes::from(key.clone())),
                    result: CompareResult::Equal,
                    target: CompareTarget::Value(Bytes::from(v.clone())),
                },
                None => Compare {
                    range: KeyRange::single(Bytes::from(key.clone())),
                    result: CompareResult::Equal,
                    target: CompareTarget::Version(0),
                },
            };
            let txn = client.txn(TxnRequest {
                compare: vec![target],
                success: vec![RequestOp::Put(PutRequest {
                    key: Bytes::from(key.clone()),
                    value: Bytes::from(value.clone()),
                    ..Default::default()
                })],
                failure: vec![],
            });
            let input = RegisterInput::Cas {
                expected,
                new: value.clone(),
            };
            match txn.await {
                Ok(r) => {
                    if r.succeeded {
                        last_read[k] = Some(value.clone());
                    }
                    (
                        input,
                        RegisterOutput::Cas {
                            succeeded: r.succeeded,
                        },
                        Some(r.header.revision),
                    )
                }
                Err(e) if definitely_not_applied(&e) => continue,
                Err(_) => (input, RegisterOutput::Unknown, None),
            }
        };
        let return_ns = (!matches!(output, RegisterOutput::Unknown)).then(|| clock.nanos());
        history.lock().push(Operation {
            client: id,
            key,
            input,
            output,
            call_ns,
            return_ns,
            revision,
        });
        if !workload.think.is_zero() {
            tokio::time::sleep(workload.think).await;
        }
    }
}

/// A final answer from the store that the request was refused (it was never applied).
fn definitely_not_applied(e: &ClientError) -> bool {
    matches!(e, ClientError::Store(s) if !s.is_retryable())
}

/// Sends a probe write to `key` every `interval` (open loop: a slow answer does not delay the
/// next probe) until `stop` turns true; returns every probe.
pub async fn run_prober(
    client: Client,
    key: String,
    interval: Duration,
    clock: RunClock,
    stop: watch::Receiver<bool>,
    log: ProbeLog,
) -> Vec<Probe> {
    run_probes(interval, clock, stop, log, move |n| {
        let client = client.clone();
        let key = key.clone();
        async move {
            client
                .put(PutRequest {
                    key: Bytes::from(key),
                    value: Bytes::from(n.to_string()),
                    ..Default::default()
                })
                .await
                .is_ok()
        }
        // Tells the prober's moves (`store::client=debug`) from the other clients' in the log.
        .instrument(tracing::info_span!("store_prober", probe = n))
    })
    .await
}

/// How long one API probe write may take before it counts as failed.
const API_PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// ConfigMaps each API prober writes in turn.
const API_PROBE_KEYS: u64 = 16;

/// Probe writes through one API server: every `interval` one of [`API_PROBE_KEYS`] ConfigMaps
/// `name-<k>` in `default` is replaced (created first when missing; several keys, so probes in
/// flight together rarely conflict), each write on a fresh connection so a restarted server is
/// reached as soon as it listens again. Returns the probes and why writes failed
/// (`http 503`, `timeout`, `connection: …`), counted.
pub async fn run_api_prober(
    api: ApiAccess,
    name: String,
    interval: Duration,
    clock: RunClock,
    stop: watch::Receiver<bool>,
    log: ProbeLog,
) -> (Vec<Probe>, BTreeMap<String, u64>) {
    let errors: Arc<Mutex<BTreeMap<String, u64>>> = Arc::default();
    let counted = errors.clone();
    let probes = run_probes(interval, clock, stop, log, move |n| {
        let api = api.clone();
        let errors = counted.clone();
        let key = format!("{name}-{}", n % API_PROBE_KEYS);
        let path = format!("/api/v1/namespaces/default/configmaps/{key}");
        let body = serde_json::json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": key, "namespace": "default"},
            "data": {"n": n.to_string()},
        })
        .to_string();
        async move {
            let write = async {
                let json = Some("application/json");
                let (code, _) = api.request("PUT", &path, json, body.as_bytes()).await?;
                if code != 404 {
                    return anyhow::Ok(code);
                }
                let (code, _) = api
                    .request(
                        "POST",
                        "/api/v1/namespaces/default/configmaps",
                        json,
                        body.as_bytes(),
                    )
                    .await?;
                Ok(code)
            };
            let error = match tokio::time::timeout(API_PROBE_TIMEOUT, write).await {
                Ok(Ok(200..=299)) => return true,
                Ok(Ok(code)) => format!("http {code}"),
                Ok(Err(e)) => format!("connection: {}", e.root_cause()),
                Err(_) => "timeout".to_string(),
            };
            *errors.lock().entry(error).or_default() += 1;
            false
        }
    })
    .await;
    let errors = std::mem::take(&mut *errors.lock());
    (probes, errors)
}

/// Calls `write(n)` for the `n`-th probe every `interval` (open loop) until `stop` turns
/// true; every probe, in the order sent. Each answered probe also lands in `probes` at once.
async fn run_probes<F, Fut>(
    interval: Duration,
    clock: RunClock,
    mut stop: watch::Receiver<bool>,
    probes: ProbeLog,
    write: F,
) -> Vec<Probe>
where
    F: Fn(u64) -> Fut,
    Fut: std::future::Future<Output = bool> + Send + 'static,
{
    let mut in_flight = JoinSet::new();
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut n = 0u64;
    loop {
        tokio::select! {
            biased;
            _ = stop.changed() => break,
            _ = ticker.tick() => {}
        }
        if *stop.borrow() {
            break;
        }
        n += 1;
        let probes = probes.clone();
        let write = write(n);
        in_flight.spawn(async move {
            let sent_s = clock.secs();
            let ok = write.await;
            probes.lock().push(Probe {
                sent_s,
                done_s: clock.secs(),
                ok,
            });
        });
        while in_flight.try_join_next().is_some() {}
    }
    while in_flight.join_next().await.is_some() {}
    let mut probes = probes.lock().clone();
    probes.sort_by(|a, b| a.sent_s.total_cmp(&b.sent_s));
    probes
}
