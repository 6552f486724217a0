//! The official Kubernetes Python client (`kubernetes` 37.0.2, strict pydantic models, installed
//! by `scripts/setup`) against a real kemu API server over a three-member store. The script
//! tests/python/test_client.py creates, lists, watches, reads, patches and deletes pods, nodes
//! and events, validating every answer against the client's models; tests/python/test_crd.py
//! drives a CustomResourceDefinition's objects through the dynamic client;
//! tests/python/test_stream.py execs in and port-forwards to a pod a node host runs;
//! tests/python/test_autoscaling.py drives HorizontalPodAutoscalers (v1 and v2) and
//! metrics.k8s.io; tests/python/test_storage.py, with the controller manager, binds a claim
//! dynamically and a static volume by selector and expands a claim. Each exits 0 when all its
//! checks hold.

use crate::common;

use std::process::Stdio;
use std::time::Duration;

use common::control_plane::{start_controllers, start_node_host};
use common::{python_path, workspace, Cluster};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_python_client_round_trips_pods_nodes_and_events() -> anyhow::Result<()> {
    run_script(
        3,
        "test_client.py",
        "python client: all checks passed",
        false,
        false,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_python_dynamic_client_serves_a_custom_resource() -> anyhow::Result<()> {
    run_script(
        1,
        "test_crd.py",
        "python dynamic client: all checks passed",
        false,
        false,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_python_client_execs_and_port_forwards() -> anyhow::Result<()> {
    run_script(
        1,
        "test_stream.py",
        "python streams: all checks passed",
        true,
        false,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_python_client_drives_autoscalers_and_resource_metrics() -> anyhow::Result<()> {
    run_script(
        1,
        "test_autoscaling.py",
        "python autoscaling: all checks passed",
        false,
        false,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_python_client_binds_provisions_and_expands_claims() -> anyhow::Result<()> {
    run_script(
        1,
        "test_storage.py",
        "python storage: all checks passed",
        false,
        true,
    )
    .await
}

/// Runs tests/python/`script` against a fresh cluster of `members` store members (with a node
/// host running `node-0` when `node_host`, the controller manager when `controllers`); it must
/// exit 0 and print `passed`.
async fn run_script(
    members: usize,
    script: &str,
    passed: &str,
    node_host: bool,
    controllers: bool,
) -> anyhow::Result<()> {
    let cluster = Cluster::start(members).await?;
    let _host = if node_host {
        Some(start_node_host(&cluster, 1, 1, "node-")?)
    } else {
        None
    };
    let _controllers = if controllers {
        Some(start_controllers(&cluster, 40)?)
    } else {
        None
    };
    let script = workspace().join("tests/python").join(script);
    let child = tokio::process::Command::new(python_path())
        .arg(&script)
        .arg(&cluster.kubeconfig)
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let out = tokio::time::timeout(Duration::from_secs(180), child.wait_with_output())
        .await
        .map_err(|_| anyhow::anyhow!("{} did not finish within 180 s", script.display()))??;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{} failed ({}); API server log: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        script.display(),
        out.status,
        cluster.api.log_path().display(),
    );
    assert!(stdout.contains(passed), "stdout:\n{stdout}");
    cluster.api.stop().await;
    cluster.store.stop().await;
    Ok(())
}
