//! kemu processes on this machine: free loopback ports, signals, and the small multi-process
//! clusters of benchmarks and tests — a [`LocalStore`] of `kemu store` members and
//! [`LocalApiServer`]s over it, each its own OS process on loopback ports.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use parking_lot::Mutex;
use store::client::{Client, ClientConfig};
use transport::pki::{self, CertSpec};

/// Free loopback ports, each bindable for both TCP and UDP when chosen (see
/// [`transport::ports::free_loopback_ports`]: below the kernel's ephemeral range).
pub fn free_ports(n: usize) -> anyhow::Result<Vec<u16>> {
    transport::ports::free_loopback_ports(n)
        .ok_or_else(|| anyhow::anyhow!("no {n} free loopback ports in 10000..32000"))
}

/// Sends `signal` to process `pid`; the error names both.
pub fn signal_pid(pid: u32, signal: nix::sys::signal::Signal) -> anyhow::Result<()> {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), signal)
        .with_context(|| format!("sending {signal} to pid {pid}"))
}

/// Sends a signal to a child process.
pub fn signal(child: &Child, sig: nix::sys::signal::Signal) {
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let _ = nix::sys::signal::kill(pid, sig);
}

/// SIGTERM, then SIGKILL after `grace`.
pub async fn terminate(child: &mut Child, grace: Duration) {
    signal(child, nix::sys::signal::Signal::SIGTERM);
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
}

struct Member {
    name: String,
    client: SocketAddr,
    child: Option<Child>,
    args: Vec<String>,
}

/// A kemu store cluster of local processes.
pub struct LocalStore {
    exe: PathBuf,
    dir: PathBuf,
    members: Mutex<Vec<Member>>,
}

impl LocalStore {
    /// Creates certificates, starts `n` members of this very binary and waits for a leader.
    pub async fn start(dir: &Path, n: usize) -> anyhow::Result<LocalStore> {
        LocalStore::start_with(&std::env::current_exe()?, dir, n, &[]).await
    }

    /// Like [`LocalStore::start`], running the `kemu` binary at `exe` with `extra_args` added to
    /// every member's command line.
    pub async fn start_with(
        exe: &Path,
        dir: &Path,
        n: usize,
        extra_args: &[String],
    ) -> anyhow::Result<LocalStore> {
        std::fs::create_dir_all(dir)?;
        let certs = dir.join("certs");
        std::fs::create_dir_all(&certs)?;
        pki::create_ca(&certs, "kemu-local")?;
        let names: Vec<String> = (1..=n).map(|i| format!("s{i}")).collect();
        for name in &names {
            let spec = CertSpec {
                name: name.clone(),
                organizations: vec![store::config::STORE_MEMBER_ORG.into()],
                sans: vec![],
            };
            pki::issue(&certs, &spec)?;
        }
        // The Kubernetes API's admin (for an API server over this store), and the store's own
        // tools' identity.
        for (name, organization) in [
            ("admin", "system:masters"),
            (store::config::STORE_ADMIN, store::config::STORE_CLIENT_ORG),
        ] {
            pki::issue(
                &certs,
                &CertSpec {
                    name: name.into(),
                    organizations: vec![organization.into()],
                    sans: vec![],
                },
            )?;
        }
        let ports = free_ports(2 * n)?;
        let initial: Vec<String> = names
            .iter()
            .enumerate()
            .map(|(i, name)| format!("{name}=127.0.0.1:{}", ports[2 * i + 1]))
            .collect();
        // etcd's gRPC API on TCP at each member's client port number (QUIC has its UDP side).
        let initial_grpc: Vec<String> = names
            .iter()
            .enumerate()
            .map(|(i, name)| format!("{name}=127.0.0.1:{}", ports[2 * i]))
            .collect();
        let mut members = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let client: SocketAddr = format!("127.0.0.1:{}", ports[2 * i]).parse()?;
            let mut args = vec![
                "store".to_string(),
                "--name".into(),
                name.clone(),
                "--data-dir".into(),
                dir.join(name).display().to_string(),
                "--listen-client".into(),
                client.to_string(),
                "--listen-peer".into(),
                format!("127.0.0.1:{}", ports[2 * i + 1]),
                "--initial-cluster".into(),
                initial.join(","),
                "--certs".into(),
                certs.display().to_string(),
                "--listen-grpc".into(),
                client.to_string(),
                "--initial-cluster-grpc".into(),
                initial_grpc.join(","),
            ];
            args.extend(extra_args.iter().cloned());
            let child = spawn_logged(exe, &args, &dir.join(format!("{name}.log")))?;
            members.push(Member {
                name: name.clone(),
                client,
                child: Some(child),
                args,
            });
        }
        let cluster = LocalStore {
            exe: exe.to_path_buf(),
            dir: dir.to_path_buf(),
            members: Mutex::new(members),
        };
        cluster.wait_for_leader(Duration::from_secs(20)).await?;
        Ok(cluster)
    }

    pub fn certs_dir(&self) -> PathBuf {
        self.dir.join("certs")
    }

    pub fn client_endpoints(&self) -> Vec<SocketAddr> {
        self.members.lock().iter().map(|m| m.client).collect()
    }

    /// The members' etcd v3 gRPC addresses: TCP at their client ports' numbers.
    pub fn grpc_endpoints(&self) -> Vec<SocketAddr> {
        self.client_endpoints()
    }

    /// A client with the store tools' certificate, talking to every member.
    pub fn admin(&self) -> anyhow::Result<Client> {
        Ok(Client::new(
            ClientConfig::new(self.client_endpoints()),
            &self.certs_dir(),
            store::config::STORE_ADMIN,
        )?)
    }

    /// The name of the member every live member agrees leads.
    pub async fn wait_for_leader(&self, timeout: Duration) -> anyhow::Result<String> {
        let client = self.admin()?;
        let deadline = Instant::now() + timeout;
        loop {
            let mut leaders = Vec::new();
            for endpoint in self.client_endpoints() {
                if let Ok(Ok(s)) =
                    tokio::time::timeout(Duration::from_millis(500), client.status_of(endpoint))
                        .await
                {
                    leaders.push(s.leader_name);
                }
            }
            if let Some(first) = leaders.first() {
                if !first.is_empty() && leaders.iter().all(|l| l == first) {
                    return Ok(first.clone());
                }
            }
            if Instant::now() > deadline {
                bail!(
                    "no leader elected within {timeout:?}; see the logs in {}",
                    self.dir.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGKILLs the current leader and returns its name.
    pub async fn kill_leader(&self) -> anyhow::Result<String> {
        let leader = self.wait_for_leader(Duration::from_secs(10)).await?;
        let mut members = self.members.lock();
        let member = members
            .iter_mut()
            .find(|m| m.name == leader)
            .context("leader is not one of ours")?;
        if let Some(mut child) = member.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        Ok(leader)
    }

    /// Stops every member (SIGTERM, then SIGKILL).
    pub async fn stop(&self) {
        let children: Vec<Child> = self
            .members
            .lock()
            .iter_mut()
            .filter_map(|m| m.child.take())
            .collect();
        for mut child in children {
            terminate(&mut child, Duration::from_secs(5)).await;
        }
    }

    /// Member names, in `--initial-cluster` order.
    pub fn names(&self) -> Vec<String> {
        self.members.lock().iter().map(|m| m.name.clone()).collect()
    }

    /// The client address of member `name`.
    pub fn endpoint(&self, name: &str) -> Option<SocketAddr> {
        self.members
            .lock()
            .iter()
            .find(|m| m.name == name)
            .map(|m| m.client)
    }

    pub fn data_dir(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    pub fn log_path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.log"))
    }

    /// SIGKILLs member `name` (no-op if it is not running).
    pub fn kill(&self, name: &str) {
        let mut members = self.members.lock();
        if let Some(mut child) = members
            .iter_mut()
            .find(|m| m.name == name)
            .and_then(|m| m.child.take())
        {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERMs member `name` and waits for it to exit.
    pub async fn terminate(&self, name: &str) {
        let child = self
            .members
            .lock()
            .iter_mut()
            .find(|m| m.name == name)
            .and_then(|m| m.child.take());
        if let Some(mut child) = child {
            terminate(&mut child, Duration::from_secs(5)).await;
        }
    }

    /// Starts member `name` again with its original command line (no-op if it is running).
    pub fn restart(&self, name: &str) -> anyhow::Result<()> {
        let mut members = self.members.lock();
        let member = members
            .iter_mut()
            .find(|m| m.name == name)
            .context("no such member")?;
        if member.child.is_none() {
            member.child = Some(spawn_logged(
                &self.exe,
                &member.args,
                &self.dir.join(format!("{name}.log")),
            )?);
        }
        Ok(())
    }

    /// Whether member `name`'s process has exited, with its exit status if so.
    pub fn exit_status(&self, name: &str) -> Option<std::process::ExitStatus> {
        let mut members = self.members.lock();
        let member = members.iter_mut().find(|m| m.name == name)?;
        member
            .child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }
}

impl Drop for LocalStore {
    fn drop(&mut self) {
        for member in self.members.lock().iter_mut() {
            if let Some(mut child) = member.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// Starts `exe` with `args`, its stdout and stderr appended to `log`.
pub fn spawn_logged(exe: &Path, args: &[String], log: &Path) -> anyhow::Result<Child> {
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    let err = out.try_clone()?;
    Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .with_context(|| format!("starting {}", exe.display()))
}

/// One `kemu apiserver` process over a [`LocalStore`], serving HTTPS on loopback with the
/// store's CA; `admin` (in `system:masters`) is the harness's credential. Without a controller
/// manager beside it, its ServiceAccount admission plugin is off unless asked for.
pub struct LocalApiServer {
    pub http: SocketAddr,
    pub quic: SocketAddr,
    certs: PathBuf,
    admin: crate::api_access::ApiAccess,
    child: Mutex<Option<Child>>,
    log: PathBuf,
}

impl LocalApiServer {
    /// Starts an API server named `name` (its log is `<store dir>/<name>.log`) and waits until
    /// it answers `/readyz`.
    pub async fn start(
        exe: &Path,
        store: &LocalStore,
        name: &str,
    ) -> anyhow::Result<LocalApiServer> {
        LocalApiServer::start_with(exe, store, name, &[]).await
    }

    /// Like [`LocalApiServer::start`], with `extra_args` added to `kemu apiserver`'s.
    pub async fn start_with(
        exe: &Path,
        store: &LocalStore,
        name: &str,
        extra_args: &[String],
    ) -> anyhow::Result<LocalApiServer> {
        let certs = store.certs_dir();
        if !certs.join("apiserver.crt").exists() {
            pki::issue(
                &certs,
                &CertSpec {
                    name: "apiserver".into(),
                    organizations: vec!["kemu:apiserver".into()],
                    sans: vec![],
                },
            )?;
        }
        let ports = free_ports(2)?;
        let http: SocketAddr = format!("127.0.0.1:{}", ports[0]).parse()?;
        let quic: SocketAddr = format!("127.0.0.1:{}", ports[1]).parse()?;
        let endpoints: Vec<String> = store
            .client_endpoints()
            .iter()
            .map(|e| e.to_string())
            .collect();
        let mut args = vec![
            "apiserver".to_string(),
            "--store-endpoints".into(),
            endpoints.join(","),
            "--certs".into(),
            certs.display().to_string(),
            "--listen-http".into(),
            http.to_string(),
            "--listen-quic".into(),
            quic.to_string(),
        ];
        // No controller manager makes the namespaces' `default` ServiceAccounts here, so, as
        // Kubernetes' own test API servers, the ServiceAccount admission plugin is off unless
        // the caller names it.
        if !extra_args.iter().any(|a| a.contains("ServiceAccount")) {
            args.push("--disable-admission-plugins=ServiceAccount".into());
        }
        args.extend(extra_args.iter().cloned());
        let log = store.dir.join(format!("{name}.log"));
        let admin = crate::api_access::ApiAccess::from_certs(http, &certs, Some("admin"))?;
        let child = spawn_logged(exe, &args, &log)?;
        let server = LocalApiServer {
            http,
            quic,
            certs,
            admin,
            child: Mutex::new(Some(child)),
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !matches!(server.admin.get("/readyz").await, Ok((200, _))) {
            if Instant::now() > deadline {
                bail!(
                    "the API server did not become ready; see {}",
                    server.log.display()
                );
            }
            if let Some(status) = server
                .child
                .lock()
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                bail!(
                    "the API server exited ({status}); see {}",
                    server.log.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(server)
    }

    pub fn url(&self) -> String {
        format!("https://{}", self.http)
    }

    /// The HTTPS front as the cluster admin (`system:masters`).
    pub fn admin(&self) -> &crate::api_access::ApiAccess {
        &self.admin
    }

    /// The directory with the CA and the client certificates.
    pub fn certs_dir(&self) -> &Path {
        &self.certs
    }

    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Writes a kubeconfig pointing at this server, trusting the cluster CA and
    /// authenticating with the admin certificate.
    pub fn write_kubeconfig(&self, path: &Path) -> anyhow::Result<()> {
        let config = crate::layout::kubeconfig(
            &self.url(),
            &std::fs::read(self.certs.join("ca.crt"))?,
            &std::fs::read(self.certs.join("admin.crt"))?,
            &std::fs::read(self.certs.join("admin.key"))?,
        );
        std::fs::write(path, config)?;
        Ok(())
    }

    pub async fn stop(&self) {
        let child = self.child.lock().take();
        if let Some(mut child) = child {
            terminate(&mut child, Duration::from_secs(5)).await;
        }
    }
}

impl Drop for LocalApiServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.lock().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A minimal HTTP/1.1 GET on loopback: (status code, body).
pub async fn http_get(addr: SocketAddr, path: &str) -> anyhow::Result<(u16, String)> {
    http_request(addr, "GET", path, None, &[]).await
}

/// A minimal HTTP/1.1 request on loopback (no keep-alive, no chunked bodies): (status code,
/// body). Enough for readiness checks and tests that send malformed requests on purpose. Plain
/// HTTP: for components' metrics; the API server is reached with [`ApiAccess`].
///
/// [`ApiAccess`]: crate::api_access::ApiAccess
pub async fn http_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: &[u8],
) -> anyhow::Result<(u16, String)> {
    let stream = tokio::time::timeout(Duration::from_secs(2), tokio::net::TcpStream::connect(addr))
        .await??;
    exchange(stream, addr, method, path, content_type, body, "").await
}

/// Writes one request (with `extra_headers`, each ending in CRLF) on `stream` and reads the
/// answer to the end: (status code, body).
pub async fn exchange<S>(
    mut stream: S,
    addr: SocketAddr,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: &[u8],
    extra_headers: &str,
) -> anyhow::Result<(u16, String)>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n{extra_headers}",
        body.len()
    );
    if let Some(ct) = content_type {
        request.push_str(&format!("Content-Type: {ct}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await?;
    // A server may answer (413) before reading the whole body and close; that is fine.
    let _ = stream.write_all(body).await;
    let _ = stream.flush().await;
    let mut response = Vec::new();
    // A TLS peer that closes without close_notify ends the read with an error after the
    // whole answer arrived; what was read still counts.
    let _ =
        tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut response)).await?;
    let text = String::from_utf8_lossy(&response).into_owned();
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .context("not an HTTP response")?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((code, body))
}
