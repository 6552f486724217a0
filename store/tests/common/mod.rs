//! A store cluster for the gRPC front's tests: real members (raft log on disk, QUIC peer links,
//! the gRPC front over TLS) on loopback, each in a runtime of its own so that one can be killed
//! — its runtime dropped with its sockets, no goodbye sent — while the others serve on.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use store::config::{MemberConfig, STORE_ADMIN, STORE_CLIENT_ORG, STORE_MEMBER_ORG};
use transport::pki::{create_ca, issue, CertSpec};

/// An identity whose organisation may use the store; one whose may not; and the Kubernetes
/// API's admin (`system:masters`), which may not either.
pub const ADMIN: &str = STORE_ADMIN;
pub const STRANGER: &str = "stranger";
pub const KUBE_ADMIN: &str = "kube-admin";

pub struct Member {
    pub name: String,
    pub grpc: SocketAddr,
    pub config: MemberConfig,
    runtime: Option<tokio::runtime::Runtime>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Member {
    fn start(config: MemberConfig) -> Member {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(format!("member-{}", config.name))
            .enable_all()
            .build()
            .expect("a runtime");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let member_config = config.clone();
        runtime.spawn(async move {
            let shutdown = async move {
                let _ = stopped.await;
            };
            if let Err(e) = store::service::run_member(member_config, shutdown).await {
                eprintln!("member stopped: {e}");
            }
        });
        Member {
            name: config.name.clone(),
            grpc: config.listen_grpc.expect("a gRPC address"),
            config,
            runtime: Some(runtime),
            stop: Some(stop),
        }
    }

    pub fn endpoint(&self) -> String {
        format!("https://{}", self.grpc)
    }

    pub fn is_running(&self) -> bool {
        self.runtime.is_some()
    }

    /// Drops the member's runtime at once: its connections go without a close, as on SIGKILL.
    pub fn kill(&mut self) {
        self.stop.take();
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(runtime) = self.runtime.take() {
            // Callable from a test's own runtime; the raft thread sees the stop and ends.
            runtime.shutdown_background();
        }
    }
}

pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub members: Vec<Member>,
}

impl Cluster {
    /// Starts `n` members whose configs `tune` may adjust.
    pub fn start(n: usize, tune: impl Fn(&mut MemberConfig)) -> Cluster {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let dir = tempfile::tempdir().expect("tempdir");
        let certs = dir.path().join("certs");
        create_ca(&certs, "etcd-api-test").expect("a CA");
        let names: Vec<String> = (1..=n).map(|i| format!("s{i}")).collect();
        let identities = names
            .iter()
            .map(|n| (n.clone(), STORE_MEMBER_ORG.to_string()))
            .chain([
                (ADMIN.to_string(), STORE_CLIENT_ORG.to_string()),
                (STRANGER.to_string(), "nobody".to_string()),
                (KUBE_ADMIN.to_string(), "system:masters".to_string()),
            ]);
        for (name, organization) in identities {
            let spec = CertSpec {
                name,
                organizations: vec![organization],
                sans: vec![],
            };
            issue(&certs, &spec).expect("a certificate");
        }
        let ports = transport::ports::free_loopback_ports(3 * n).expect("free ports");
        let addr = |i: usize| SocketAddr::from(([127, 0, 0, 1], ports[i]));
        let peers: Vec<(String, SocketAddr)> = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), addr(3 * i + 1)))
            .collect();
        let grpc: Vec<(String, SocketAddr)> = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), addr(3 * i + 2)))
            .collect();
        let members = names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let mut config = MemberConfig::new(
                    name,
                    dir.path().join(name),
                    addr(3 * i),
                    addr(3 * i + 1),
                    peers.clone(),
                    &certs,
                );
                config.listen_grpc = Some(addr(3 * i + 2));
                config.grpc_cluster = grpc.iter().map(|(n, a)| (n.clone(), (*a).into())).collect();
                tune(&mut config);
                Member::start(config)
            })
            .collect();
        Cluster { dir, members }
    }

    pub fn certs(&self) -> PathBuf {
        self.dir.path().join("certs")
    }

    /// Every running member's endpoint, comma-separated (etcdctl's `--endpoints`).
    pub fn endpoints(&self) -> String {
        self.members
            .iter()
            .filter(|m| m.is_running())
            .map(Member::endpoint)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// etcdctl (Debian's etcd-client, installed by scripts/setup) against `endpoints` as
    /// `identity`.
    pub fn etcdctl(&self, identity: &str, endpoints: &str) -> std::process::Command {
        let certs = self.certs();
        let mut command = std::process::Command::new("etcdctl");
        command
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={endpoints}"))
            .arg(format!("--cacert={}", certs.join("ca.crt").display()))
            .arg(format!(
                "--cert={}",
                certs.join(format!("{identity}.crt")).display()
            ))
            .arg(format!(
                "--key={}",
                certs.join(format!("{identity}.key")).display()
            ))
            .arg("--command-timeout=10s")
            .arg("--dial-timeout=5s");
        command
    }

    /// An etcd client crate connection to `endpoints` as `identity`.
    pub async fn client(&self, identity: &str, endpoints: &[String]) -> etcd_client::Client {
        let certs = self.certs();
        let read = |path: PathBuf| std::fs::read(&path).expect("a certificate file");
        let tls = etcd_client::TlsOptions::new()
            .ca_certificate(etcd_client::Certificate::from_pem(read(
                certs.join("ca.crt"),
            )))
            .identity(etcd_client::Identity::from_pem(
                read(certs.join(format!("{identity}.crt"))),
                read(certs.join(format!("{identity}.key"))),
            ))
            .domain_name("localhost");
        let options = etcd_client::ConnectOptions::new()
            .with_tls(tls)
            .with_timeout(Duration::from_secs(10))
            .with_connect_timeout(Duration::from_secs(5));
        etcd_client::Client::connect(endpoints, Some(options))
            .await
            .expect("the etcd client connects")
    }

    /// Waits until a member reports a leader that every running member agrees on, and returns
    /// the leader's index in `members`.
    pub async fn leader(&self) -> usize {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let mut seen = Vec::new();
            for member in self.members.iter().filter(|m| m.is_running()) {
                let mut client = self.client(ADMIN, &[member.endpoint()]).await;
                if let Ok(status) = client.status().await {
                    seen.push(status.leader());
                }
            }
            let running = self.members.iter().filter(|m| m.is_running()).count();
            if seen.len() == running && seen[0] != 0 && seen.iter().all(|l| *l == seen[0]) {
                return (seen[0] - 1) as usize;
            }
            assert!(
                Instant::now() < deadline,
                "no agreed leader after 30 s: {seen:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Runs `command`, asserts it succeeded, and returns its standard output.
pub fn run_ok(command: &mut std::process::Command) -> String {
    let out = command.output().expect("the command runs");
    assert!(
        out.status.success(),
        "{command:?} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `command`, asserts it failed, and returns its standard error.
pub fn run_err(command: &mut std::process::Command) -> String {
    let out = command.output().expect("the command runs");
    assert!(
        !out.status.success(),
        "{command:?} succeeded:\nstdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn path_string(path: &Path) -> String {
    path.display().to_string()
}
