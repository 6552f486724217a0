//! Shared harness of the end-to-end tests: real kemu processes on loopback, the real kubectl.

#![allow(dead_code)]

pub mod control_plane;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use cluster::process::{LocalApiServer, LocalStore};

pub fn kemu_exe() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_kemu"))
}

/// Runs `kemu ARGS --work-dir DIR` (a fresh temp dir), asserts it succeeded, and parses its
/// standard output as JSON: the benchmark subcommands' `--json` reports.
pub fn kemu_json(args: &[&str]) -> serde_json::Value {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(kemu_exe())
        .args(args)
        .arg("--work-dir")
        .arg(dir.path())
        .output()
        .expect("kemu runs");
    assert!(
        out.status.success(),
        "kemu {args:?} failed:\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("a JSON report on stdout")
}

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The real kubectl installed by `scripts/setup` (or `KEMU_KUBECTL`).
pub fn kubectl_path() -> PathBuf {
    if let Some(p) = std::env::var_os("KEMU_KUBECTL") {
        return PathBuf::from(p);
    }
    let p = workspace().join("target/pyenv/bin/kubectl");
    assert!(
        p.exists(),
        "kubectl is not installed at {}: run scripts/setup",
        p.display()
    );
    p
}

/// The venv's python with the official Kubernetes client.
pub fn python_path() -> PathBuf {
    let p = workspace().join("target/pyenv/bin/python");
    assert!(
        p.exists(),
        "the test venv is missing at {}: run scripts/setup",
        p.display()
    );
    p
}

/// Polls `condition` until it holds, failing with `why` after `timeout`.
pub async fn wait_until<F, Fut>(
    why: &str,
    timeout: Duration,
    mut condition: F,
) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    while !condition().await {
        if Instant::now() > deadline {
            bail!("timed out after {timeout:?} waiting until {why}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// A store and an API server, with a kubeconfig for kubectl.
pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub store: LocalStore,
    pub api: LocalApiServer,
    pub kubeconfig: PathBuf,
}

impl Cluster {
    pub async fn start(members: usize) -> anyhow::Result<Cluster> {
        Cluster::start_with_api_args(members, &[]).await
    }

    /// Like [`Cluster::start`], with `api_args` on the API server's command line.
    pub async fn start_with_api_args(
        members: usize,
        api_args: &[String],
    ) -> anyhow::Result<Cluster> {
        let dir = tempfile::tempdir()?;
        let store =
            LocalStore::start_with(kemu_exe(), &dir.path().join("store"), members, &[]).await?;
        let api = LocalApiServer::start_with(kemu_exe(), &store, "apiserver", api_args).await?;
        let kubeconfig = dir.path().join("kubeconfig");
        api.write_kubeconfig(&kubeconfig)?;
        Ok(Cluster {
            dir,
            store,
            api,
            kubeconfig,
        })
    }

    /// kubectl with another kubeconfig (another user).
    pub fn kubectl_as(&self, kubeconfig: &std::path::Path, args: &[&str]) -> Output {
        self.command(args)
            .env("KUBECONFIG", kubeconfig)
            .stdin(Stdio::null())
            .output()
            .expect("kubectl runs")
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(kubectl_path());
        // Flags go before the arguments: after `--` they would be the container's command.
        command
            .arg("--cache-dir")
            .arg(self.dir.path().join("kube-cache"))
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", self.dir.path());
        command
    }

    /// Runs kubectl and returns its output, whatever the exit code.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.command(args)
            .stdin(Stdio::null())
            .output()
            .expect("kubectl runs")
    }

    /// Runs kubectl, which must succeed; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed ({}):\nstdout: {}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs kubectl, which must fail; returns stderr.
    pub fn fails(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            !out.status.success(),
            "kubectl {args:?} should have failed:\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    /// Runs kubectl with `input` on stdin (for `-f -`).
    pub fn ok_stdin(&self, args: &[&str], input: &str) -> String {
        use std::io::Write;
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl runs");
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(input.as_bytes()).expect("stdin");
        }
        let out = child.wait_with_output().expect("kubectl ends");
        assert!(
            out.status.success(),
            "kubectl {args:?} failed:\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Spawns kubectl in the background (for `-w`), stdout piped.
    pub fn spawn(&self, args: &[&str]) -> std::process::Child {
        self.command(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl runs")
    }

    /// A raw HTTP request to the API server.
    pub async fn http(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: &[u8],
    ) -> anyhow::Result<(u16, serde_json::Value)> {
        let (code, body) = self
            .api
            .admin()
            .request(method, path, content_type, body)
            .await?;
        let value = serde_json::from_str(&body)
            .with_context(|| format!("{method} {path} answered {code} with non-JSON: {body}"))?;
        Ok((code, value))
    }

    /// Writes a file into the test directory and returns its path as a string.
    pub fn file(&self, name: &str, content: &str) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, content).expect("writes");
        path.display().to_string()
    }

    /// `kubectl apply` of `manifest`, which must be refused; what kubectl printed.
    pub fn apply_refused(&self, manifest: &str) -> String {
        let path = self.file("refused.yaml", manifest);
        let out = self.kubectl(&["apply", "-f", &path]);
        assert!(
            !out.status.success(),
            "applying should have failed:\n{manifest}"
        );
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }

    /// A kube-rs client for the cluster's admin, from its kubeconfig.
    pub async fn kube_client(&self) -> anyhow::Result<kube::Client> {
        let kubeconfig = kube::config::Kubeconfig::read_from(&self.kubeconfig)?;
        let options = kube::config::KubeConfigOptions::default();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options).await?;
        Ok(kube::Client::try_from(config)?)
    }
}

/// A kemu process run to be stopped by a signal: its output collected, its log (stderr)
/// watched for the line that says it got where the test wants to stop it.
pub struct Interruptible {
    child: tokio::process::Child,
    stdout: tokio::task::JoinHandle<String>,
    stderr: tokio::task::JoinHandle<String>,
    reached: Option<tokio::sync::oneshot::Receiver<()>>,
}

impl Interruptible {
    /// Spawns `command` with its output piped, watching its log for a line containing `marker`.
    pub fn spawn(command: &mut tokio::process::Command, marker: &str) -> anyhow::Result<Self> {
        use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let mut out = child.stdout.take().context("stdout")?;
        let stdout = tokio::spawn(async move {
            let mut text = String::new();
            let _ = out.read_to_string(&mut text).await;
            text
        });
        let err = child.stderr.take().context("stderr")?;
        let (reached_tx, reached) = tokio::sync::oneshot::channel();
        let marker = marker.to_string();
        let stderr = tokio::spawn(async move {
            let mut reached_tx = Some(reached_tx);
            let mut text = String::new();
            let mut lines = BufReader::new(err).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if line.contains(&marker) {
                    if let Some(tx) = reached_tx.take() {
                        let _ = tx.send(());
                    }
                }
                text.push_str(&line);
                text.push('\n');
            }
            text
        });
        Ok(Interruptible {
            child,
            stdout,
            stderr,
            reached: Some(reached),
        })
    }

    /// Waits until the log shows the marker; fails with the log after `timeout`.
    pub async fn reached(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let reached = self.reached.take().context("reached() twice")?;
        if tokio::time::timeout(timeout, reached)
            .await
            .is_ok_and(|r| r.is_ok())
        {
            return Ok(());
        }
        let _ = self.child.kill().await;
        let log = (&mut self.stderr).await.unwrap_or_default();
        bail!("the process never logged what the test waits for:\n{log}")
    }

    /// Sends `signal` and waits (at most `timeout`) for the process to exit: its exit status,
    /// stdout and stderr.
    pub async fn stop(
        mut self,
        signal: nix::sys::signal::Signal,
        timeout: Duration,
    ) -> anyhow::Result<(std::process::ExitStatus, String, String)> {
        let pid = self.child.id().context("the process already exited")?;
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), signal)?;
        let status = tokio::time::timeout(timeout, self.child.wait())
            .await
            .with_context(|| format!("no exit within {timeout:?} of {signal}"))??;
        Ok((status, self.stdout.await?, self.stderr.await?))
    }
}
