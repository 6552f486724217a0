//! The official Kubernetes Python client (`kubernetes` 37.0.2, strict pydantic models, installed
//! by `scripts/setup`) against a real kemu API server over a three-member store. The script,
//! tests/python/test_client.py, creates, lists, watches, reads, patches and deletes pods, nodes
//! and events, validating every answer against the client's models; it exits 0 when all hold.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::{python_path, workspace, Cluster};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_python_client_round_trips_pods_nodes_and_events() -> anyhow::Result<()> {
    let cluster = Cluster::start(3).await?;
    let script = workspace().join("tests/python/test_client.py");
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
        "the Python client test failed ({}); API server log: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status,
        cluster.api.log_path().display(),
    );
    assert!(stdout.contains("all checks passed"), "stdout:\n{stdout}");
    cluster.api.stop().await;
    cluster.store.stop().await;
    Ok(())
}
