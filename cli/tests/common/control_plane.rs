//! The rest of a control plane around a [`Cluster`]: `kemu controllers`, `kemu scheduler` and
//! `kemu node-host` processes with their certificates, and pod queries through kubectl.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use anyhow::Context;
use serde_json::Value;
use transport::pki::{self, CertSpec};

use super::{kemu_exe, Cluster};

/// A kemu process killed when dropped.
pub struct Proc {
    child: Child,
    log: PathBuf,
}

impl Proc {
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn issue(c: &Cluster, name: &str, organization: &str) -> anyhow::Result<()> {
    let certs = c.store.certs_dir();
    if !certs.join(format!("{name}.crt")).exists() {
        pki::issue(
            &certs,
            &CertSpec {
                name: name.into(),
                organizations: vec![organization.into()],
                sans: vec![],
            },
        )?;
    }
    Ok(())
}

pub fn spawn(c: &Cluster, name: &str, args: &[String]) -> anyhow::Result<Proc> {
    let log = c.dir.path().join(format!("{name}.log"));
    let child = Command::new(kemu_exe())
        .args(args)
        .env("RUST_LOG", "info,controllers=debug")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .spawn()
        .with_context(|| format!("starting {name}"))?;
    Ok(Proc { child, log })
}

pub fn common_args(c: &Cluster, command: &str, identity: &str) -> Vec<String> {
    vec![
        command.into(),
        "--apiserver".into(),
        c.api.quic.to_string(),
        "--certs".into(),
        c.store.certs_dir().display().to_string(),
        "--identity".into(),
        identity.into(),
    ]
}

pub fn start_controllers(c: &Cluster, grace_secs: u64) -> anyhow::Result<Proc> {
    issue(c, "controllers", "system:kube-controller-manager")?;
    let mut args = common_args(c, "controllers", "controllers");
    args.extend(
        [
            "--node-monitor-grace-secs",
            &grace_secs.to_string(),
            "--node-monitor-period-secs",
            "1",
        ]
        .map(String::from),
    );
    spawn(c, "controllers", &args)
}

pub fn start_scheduler(c: &Cluster) -> anyhow::Result<Proc> {
    issue(c, "scheduler", "system:kube-scheduler")?;
    spawn(c, "scheduler", &common_args(c, "scheduler", "scheduler"))
}

pub fn start_node_host(
    c: &Cluster,
    index: usize,
    nodes: usize,
    prefix: &str,
) -> anyhow::Result<Proc> {
    let identity = format!("nodehost-{index}");
    issue(c, &identity, "system:nodes")?;
    let config = c.file(
        &format!("{identity}.toml"),
        "cpu = \"8\"\nmemory = \"16Gi\"\npods = \"110\"\nlease_interval = 1\nlease_duration_seconds = 4\n[runtime]\npull_image_ms = 100\nrun_sandbox_ms = 50\n",
    );
    let mut args = common_args(c, "node-host", &identity);
    args.extend(
        [
            "--nodes",
            &nodes.to_string(),
            "--name-prefix",
            prefix,
            "--config",
            &config,
        ]
        .map(String::from),
    );
    spawn(c, &identity, &args)
}

pub fn pods_json(c: &Cluster, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["get", "pods", "-o", "json"];
    all.extend_from_slice(args);
    let out = c.kubectl(&all);
    serde_json::from_slice::<Value>(&out.stdout)
        .ok()
        .and_then(|v| v["items"].as_array().cloned())
        .unwrap_or_default()
}

pub fn is_ready(pod: &Value) -> bool {
    pod["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

pub fn terminating(pod: &Value) -> bool {
    !pod["metadata"]["deletionTimestamp"].is_null()
}

/// Pods selected by `selector` that are running, ready and not terminating — and none else.
pub fn exactly_running(c: &Cluster, selector: &str, n: usize, extra: &[&str]) -> bool {
    let mut args = vec!["-l", selector];
    args.extend_from_slice(extra);
    let pods = pods_json(c, &args);
    pods.len() == n
        && pods
            .iter()
            .all(|p| p["status"]["phase"] == "Running" && is_ready(p) && !terminating(p))
}

/// Waits until `kubectl describe OBJECT` (e.g. `deployment/web`) lists, for each of `wanted`,
/// an event line with that reason, source component and message; fails with the description.
pub async fn wait_for_events(
    c: &Cluster,
    object: &str,
    wanted: &[(&str, &str, &str)],
) -> anyhow::Result<()> {
    let missing = |described: &str| -> Vec<String> {
        wanted
            .iter()
            .filter(|(reason, from, message)| {
                !described.lines().any(|line| {
                    let words: Vec<&str> = line.split_whitespace().collect();
                    words.contains(reason) && words.contains(from) && line.contains(message)
                })
            })
            .map(|w| format!("{w:?}"))
            .collect()
    };
    let seen = super::wait_until(
        &format!("{object} has its events"),
        std::time::Duration::from_secs(30),
        || async { missing(&c.ok(&["describe", object])).is_empty() },
    )
    .await;
    if seen.is_err() {
        let described = c.ok(&["describe", object]);
        anyhow::bail!(
            "{object} lacks events {:?}:\n{described}",
            missing(&described)
        );
    }
    Ok(())
}
