//! Real etcd as local processes, so `kemu bench store` measures kemu's store and etcd side by
//! side (Debian's `etcd-server` provides the binary; the client needs the `etcd` feature).

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

use anyhow::{bail, Context};
use cluster::process::{free_ports, spawn_logged, terminate};
use parking_lot::Mutex;
use transport::pki::{self, CertSpec};

/// The client identity a TLS etcd cluster issues for its clients (`<certs>/admin.crt`).
pub const CLIENT_IDENTITY: &str = "admin";

/// A real etcd cluster of local processes (Debian's `etcd-server` provides the binary).
pub struct LocalEtcd {
    members: Mutex<Vec<(String, String, Option<Child>)>>,
    /// With TLS: the directory of its CA and certificates.
    certs: Option<PathBuf>,
}

impl LocalEtcd {
    /// Starts `n` members speaking plain HTTP to clients and peers.
    pub async fn start(dir: &Path, n: usize) -> anyhow::Result<LocalEtcd> {
        LocalEtcd::start_with(dir, n, false).await
    }

    /// Starts `n` members; with `tls`, clients and peers speak TLS with certificates from a CA
    /// of the cluster's own (in `<dir>/certs`) and must present one, as kemu's store demands.
    pub async fn start_with(dir: &Path, n: usize, tls: bool) -> anyhow::Result<LocalEtcd> {
        let etcd = which("etcd")
            .context("the etcd binary is not installed (Debian package etcd-server)")?;
        std::fs::create_dir_all(dir)?;
        let ports = free_ports(2 * n)?;
        let names: Vec<String> = (1..=n).map(|i| format!("e{i}")).collect();
        let certs = tls.then(|| dir.join("certs"));
        if let Some(certs) = &certs {
            pki::create_ca(certs, "etcd-bench")?;
            for name in names.iter().chain([&CLIENT_IDENTITY.to_string()]) {
                let spec = CertSpec {
                    name: name.clone(),
                    organizations: vec![],
                    sans: vec![],
                };
                pki::issue(certs, &spec)?;
            }
        }
        let scheme = if tls { "https" } else { "http" };
        let initial: Vec<String> = names
            .iter()
            .enumerate()
            .map(|(i, name)| format!("{name}={scheme}://127.0.0.1:{}", ports[2 * i + 1]))
            .collect();
        let mut members = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let client_url = format!("{scheme}://127.0.0.1:{}", ports[2 * i]);
            let peer_url = format!("{scheme}://127.0.0.1:{}", ports[2 * i + 1]);
            let mut args: Vec<String> = vec![
                "--name".into(),
                name.clone(),
                "--data-dir".into(),
                dir.join(name).display().to_string(),
                "--listen-client-urls".into(),
                client_url.clone(),
                "--advertise-client-urls".into(),
                client_url.clone(),
                "--listen-peer-urls".into(),
                peer_url.clone(),
                "--initial-advertise-peer-urls".into(),
                peer_url,
                "--initial-cluster".into(),
                initial.join(","),
                "--initial-cluster-state".into(),
                "new".into(),
                "--initial-cluster-token".into(),
                "kemu-bench".into(),
            ];
            if let Some(certs) = &certs {
                let file = |f: String| certs.join(f).display().to_string();
                let (crt, key, ca) = (
                    file(format!("{name}.crt")),
                    file(format!("{name}.key")),
                    file("ca.crt".into()),
                );
                args.extend([
                    "--cert-file".into(),
                    crt.clone(),
                    "--key-file".into(),
                    key.clone(),
                    "--trusted-ca-file".into(),
                    ca.clone(),
                    "--client-cert-auth".into(),
                    "--peer-cert-file".into(),
                    crt,
                    "--peer-key-file".into(),
                    key,
                    "--peer-trusted-ca-file".into(),
                    ca,
                    "--peer-client-cert-auth".into(),
                ]);
            }
            let child = spawn_logged(&etcd, &args, &dir.join(format!("{name}.log")))?;
            members.push((name.clone(), client_url, Some(child)));
        }
        let cluster = LocalEtcd {
            members: Mutex::new(members),
            certs,
        };
        etcd_ops::wait_for_leader(
            &cluster.client_urls(),
            cluster.certs.as_deref(),
            Duration::from_secs(30),
        )
        .await?;
        Ok(cluster)
    }

    /// The directory of the CA and the client certificate, when the members speak TLS.
    pub fn certs_dir(&self) -> Option<&Path> {
        self.certs.as_deref()
    }

    pub fn client_urls(&self) -> Vec<String> {
        self.members
            .lock()
            .iter()
            .map(|(_, url, _)| url.clone())
            .collect()
    }

    pub async fn kill_leader(&self) -> anyhow::Result<String> {
        let leader_url = etcd_ops::leader_url(&self.client_urls(), self.certs.as_deref()).await?;
        let mut members = self.members.lock();
        let member = members
            .iter_mut()
            .find(|(_, url, _)| *url == leader_url)
            .context("leader is not one of ours")?;
        if let Some(mut child) = member.2.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        Ok(member.0.clone())
    }

    pub async fn stop(&self) {
        let children: Vec<Child> = self
            .members
            .lock()
            .iter_mut()
            .filter_map(|m| m.2.take())
            .collect();
        for mut child in children {
            terminate(&mut child, Duration::from_secs(5)).await;
        }
    }
}

impl Drop for LocalEtcd {
    fn drop(&mut self) {
        for member in self.members.lock().iter_mut() {
            if let Some(mut child) = member.2.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

fn which(binary: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(binary))
        .find(|p| p.is_file())
}

#[cfg(feature = "etcd")]
pub(crate) mod etcd_ops {
    use std::time::Instant;

    use super::*;

    /// Connection options for TLS to a cluster whose CA is `<certs>/ca.crt`, as the client
    /// `identity` (`<certs>/<identity>.crt` and `.key`).
    pub fn tls_options(
        certs: &Path,
        identity: &str,
    ) -> anyhow::Result<etcd_client::ConnectOptions> {
        let read = |name: String| {
            let path = certs.join(name);
            std::fs::read(&path).with_context(|| format!("reading {}", path.display()))
        };
        let tls = etcd_client::TlsOptions::new()
            .ca_certificate(etcd_client::Certificate::from_pem(read("ca.crt".into())?))
            .identity(etcd_client::Identity::from_pem(
                read(format!("{identity}.crt"))?,
                read(format!("{identity}.key"))?,
            ))
            .domain_name("localhost");
        Ok(etcd_client::ConnectOptions::new()
            .with_tls(tls)
            .with_connect_timeout(Duration::from_secs(5)))
    }

    /// Waits until one member reports a leader.
    pub async fn wait_for_leader(
        urls: &[String],
        certs: Option<&Path>,
        timeout: Duration,
    ) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if leader_url(urls, certs).await.is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("etcd elected no leader within {timeout:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The client URL of the member that leads.
    pub async fn leader_url(urls: &[String], certs: Option<&Path>) -> anyhow::Result<String> {
        let options = certs
            .map(|certs| tls_options(certs, CLIENT_IDENTITY))
            .transpose()?;
        for url in urls {
            let Ok(Ok(mut client)) = tokio::time::timeout(
                Duration::from_secs(1),
                etcd_client::Client::connect([url.clone()], options.clone()),
            )
            .await
            else {
                continue;
            };
            let Ok(Ok(status)) =
                tokio::time::timeout(Duration::from_secs(1), client.status()).await
            else {
                continue;
            };
            let own = status.header().map(|h| h.member_id()).unwrap_or(0);
            if status.leader() != 0 && status.leader() == own {
                return Ok(url.clone());
            }
        }
        bail!("no etcd member says it leads")
    }
}

#[cfg(not(feature = "etcd"))]
mod etcd_ops {
    use super::*;

    pub async fn wait_for_leader(
        _urls: &[String],
        _certs: Option<&Path>,
        _timeout: Duration,
    ) -> anyhow::Result<()> {
        bail!("this kemu was built without etcd support; build it with `--features etcd` (needs protoc)")
    }

    pub async fn leader_url(_urls: &[String], _certs: Option<&Path>) -> anyhow::Result<String> {
        bail!("this kemu was built without etcd support")
    }
}
