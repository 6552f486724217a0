//! The status part of `kemu bench apiserver`: pod status writes as node hosts send them, and
//! the API server's CPU per write.
//!
//! A node-host identity (`system:nodes`) registers `--status-nodes` Nodes over the QUIC
//! component front; the admin creates `--status-pods` pods and binds them round-robin to those
//! nodes. Only then does the clock start: `--clients` workers on the node host's connection
//! write each pod's status twice, as a kubelet does when it starts a pod (Pending with the
//! container being created, then Running), each write a JSON patch replacing `/status` answered
//! with metadata only. The API server's own `process_cpu_seconds_total`, scraped before and
//! after, divided by the writes, is the figure: it counts the whole write path (QUIC stream,
//! authentication, the node authorizer, admission, the patch, field management, the store
//! round trip and the watch cache) and nothing of the bench's own setup. Every pod is read back
//! at the end and must be Running with kubelet's `status` entry.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context};
use api::client::{Client as ApiClient, ClientConfig, DeleteParams, ListParams, Patch};
use parking_lot::Mutex;
use serde::Serialize;
use serde_json::{json, Value};

use super::{new_histogram, percentiles, run_namespace, ApiBench, Http};
use crate::store::Percentiles;

/// What the status part measured.
#[derive(Debug, Clone, Serialize)]
pub struct StatusResult {
    pub nodes: usize,
    pub pods: u64,
    /// Status writes answered (two per pod).
    pub writes: u64,
    pub errors: u64,
    pub seconds: f64,
    pub writes_per_sec: f64,
    pub latency_ms: Percentiles,
    /// The API server's CPU over the timed writes divided by them, in µs (`None` when its
    /// `/metrics` has no `process_cpu_seconds_total`).
    pub apiserver_cpu_us_per_write: Option<f64>,
    /// Pods read back Running, with kubelet's `status` entry in their managed fields.
    pub running: u64,
}

/// The two statuses a kubelet writes for the `index`th pod it starts: the container being
/// created, then running (the shapes kemu's node hosts write), each pod with its own addresses
/// and container id.
fn statuses(index: u64, started: &str) -> [Value; 2] {
    let node_ip = format!("100.64.{}.{}", (index / 250) % 250, index % 250 + 1);
    let pod_ip = format!("10.128.{}.{}", (index / 250) % 250, index % 250 + 2);
    let (node_ip, pod_ip) = (node_ip.as_str(), pod_ip.as_str());
    let condition = |kind: &str, status: &str| json!({"type": kind, "status": status, "lastTransitionTime": started});
    let creating = json!({
        "phase": "Pending",
        "conditions": [
            condition("PodScheduled", "True"),
            condition("PodReadyToStartContainers", "False"),
            condition("Initialized", "True"),
            condition("ContainersReady", "False"),
            condition("Ready", "False"),
        ],
        "hostIP": node_ip,
        "hostIPs": [{"ip": node_ip}],
        "startTime": started,
        "containerStatuses": [{
            "name": "main",
            "state": {"waiting": {"reason": "ContainerCreating"}},
            "lastState": {},
            "ready": false,
            "restartCount": 0,
            "image": "registry.k8s.io/pause:3.10",
            "imageID": "",
            "started": false,
        }],
        "qosClass": "Burstable",
    });
    let running = json!({
        "phase": "Running",
        "conditions": [
            condition("PodScheduled", "True"),
            condition("PodReadyToStartContainers", "True"),
            condition("Initialized", "True"),
            condition("ContainersReady", "True"),
            condition("Ready", "True"),
        ],
        "hostIP": node_ip,
        "hostIPs": [{"ip": node_ip}],
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": started,
        "containerStatuses": [{
            "name": "main",
            "state": {"running": {"startedAt": started}},
            "lastState": {},
            "ready": true,
            "restartCount": 0,
            "image": "registry.k8s.io/pause:3.10",
            "imageID": "registry.k8s.io/pause@sha256:f13da7ed800849f5aaab42cd6248a8727eeabb371492dcdedeca440cfae86a75",
            "containerID": format!("containerd://{:064x}", index),
            "started": true,
        }],
        "qosClass": "Burstable",
    });
    [creating, running]
}

/// `process_cpu_seconds_total` from a `/metrics` text.
fn cpu_seconds(metrics: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("process_cpu_seconds_total "))
        .and_then(|v| v.trim().parse().ok())
}

/// Runs the status part. `admin` is the API server's HTTPS front as its admin (metrics,
/// clean-up); `admin_quic` and `node_host` are the component front as the admin and as a node
/// host.
pub(super) async fn status_writes(
    args: &ApiBench,
    admin: &Http,
    admin_quic: ClientConfig,
    node_host: ClientConfig,
) -> anyhow::Result<StatusResult> {
    if args.status_nodes == 0 {
        bail!("--status-nodes must be positive");
    }
    let pods = api::resources::pods();
    let nodes = api::resources::find("", "v1", "nodes").context("the nodes resource")?;
    let namespace = run_namespace("bench-status");
    admin.ensure_namespace(&namespace).await?;
    let driver = ApiClient::new(admin_quic)?;
    let kubelet = ApiClient::new(node_host)?;

    let node_names: Vec<String> = (0..args.status_nodes)
        .map(|i| format!("{namespace}-node-{i}"))
        .collect();
    for name in &node_names {
        let node =
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {}});
        let _: Value = kubelet
            .create(nodes, None, &node)
            .await
            .with_context(|| format!("registering {name} as the node host"))?;
    }
    // Pods created and bound before the clock starts, many in flight.
    let in_flight = Arc::new(tokio::sync::Semaphore::new(256));
    let mut setup = Vec::new();
    for i in 0..args.status_pods {
        let permit = in_flight.clone().acquire_owned().await?;
        let (driver, namespace) = (driver.clone(), namespace.clone());
        let node = node_names[i as usize % node_names.len()].clone();
        setup.push(tokio::spawn(async move {
            let name = format!("s-{i}");
            let pod: Value = serde_json::from_slice(&super::pod_body(&name, &namespace))?;
            let _: Value = driver.create(pods, Some(&namespace), &pod).await?;
            driver.bind(&namespace, &name, &node).await?;
            drop(permit);
            anyhow::Ok(())
        }));
    }
    for s in setup {
        s.await?
            .context("creating and binding the status part's pods")?;
    }

    let metrics_before = admin.metrics().await?;
    let histogram = Arc::new(Mutex::new(new_histogram()));
    let errors = Arc::new(AtomicU64::new(0));
    let first_error = Arc::new(Mutex::new(None::<String>));
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..args.clients {
        let (kubelet, namespace, next) = (kubelet.clone(), namespace.clone(), next.clone());
        let (histogram, errors, first_error) =
            (histogram.clone(), errors.clone(), first_error.clone());
        let total = args.status_pods;
        workers.push(tokio::spawn(async move {
            let mut local = new_histogram();
            let (mut failed, mut error) = (0u64, None::<String>);
            let now = apiserver::meta::now_rfc3339();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total {
                    break;
                }
                let name = format!("s-{i}");
                for status in statuses(i, &now) {
                    let patch =
                        Patch::Json(json!([{"op": "replace", "path": "/status", "value": status}]));
                    let sent = Instant::now();
                    match kubelet
                        .patch_status_metadata(pods, Some(&namespace), &name, &patch)
                        .await
                    {
                        Ok(_) => {
                            let _ = local.record(sent.elapsed().as_micros().max(1) as u64);
                        }
                        Err(e) => {
                            failed += 1;
                            error.get_or_insert(e.to_string());
                        }
                    }
                }
            }
            let _ = histogram.lock().add(&local);
            errors.fetch_add(failed, Ordering::Relaxed);
            if let Some(e) = error {
                first_error.lock().get_or_insert(e);
            }
        }));
    }
    for w in workers {
        w.await?;
    }
    let seconds = started.elapsed().as_secs_f64();
    let metrics_after = admin.metrics().await?;
    if let Some(e) = first_error.lock().take() {
        eprintln!("first status write error: {e}");
    }
    let (writes, latency_ms) = {
        let h = histogram.lock();
        (h.len(), percentiles(&h))
    };
    let apiserver_cpu_us_per_write =
        match (cpu_seconds(&metrics_before), cpu_seconds(&metrics_after)) {
            (Some(before), Some(after)) if writes > 0 => {
                Some((after - before) * 1e6 / writes as f64)
            }
            _ => None,
        };

    // Every pod must read back as the last write left it, with kubelet's status entry.
    let mut running = 0;
    let mut page = ListParams::default().limit(500);
    loop {
        let listed = driver.list_raw(pods, Some(&namespace), &page).await?;
        for item in &listed.items {
            let pod: Value = serde_json::from_slice(item)?;
            let kubelet_entry =
                pod["metadata"]["managedFields"]
                    .as_array()
                    .is_some_and(|entries| {
                        entries
                            .iter()
                            .any(|e| e["manager"] == "kubelet" && e["subresource"] == "status")
                    });
            if pod["status"]["phase"] == "Running" && kubelet_entry {
                running += 1;
            }
        }
        match listed.continue_token {
            Some(token) if !token.is_empty() => page.continue_token = Some(token),
            _ => break,
        }
    }
    if !args.spawn {
        // A spawned cluster is thrown away; a running one gets its nodes and pods back.
        admin.delete_pods(&namespace).await?;
        for name in &node_names {
            let _: Result<Value, _> = driver
                .delete(nodes, None, name, &DeleteParams::default())
                .await;
        }
    }
    Ok(StatusResult {
        nodes: node_names.len(),
        pods: args.status_pods,
        writes,
        errors: errors.load(Ordering::Relaxed),
        seconds,
        writes_per_sec: writes as f64 / seconds,
        latency_ms,
        apiserver_cpu_us_per_write,
        running,
    })
}
