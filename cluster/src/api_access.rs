//! Reaching an API server's HTTPS front from kemu's own tools and tests: the cluster CA to
//! trust, and a credential (a client certificate, or a bearer token).
//!
//! [`ApiCredentials`] comes from a certificates directory (`kemu certs`) or a kubeconfig's
//! current context; [`ApiAccess`] sends single requests with it (readiness probes, tests,
//! status listings). The load generator and the benchmark build their pooled clients from the
//! same [`ApiCredentials::rustls_config`].

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use base64::Engine;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde::Deserialize;

/// What a client needs to talk to the API server.
#[derive(Clone, Debug, Default)]
pub struct ApiCredentials {
    /// PEM of the CA that signed the server's certificate.
    pub ca_pem: Vec<u8>,
    /// PEM certificate and key of a client certificate, if authenticating with one.
    pub client_pem: Option<(Vec<u8>, Vec<u8>)>,
    /// A bearer token, if authenticating with one.
    pub token: Option<String>,
}

fn read(path: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("reading {}", path.display()))
}

impl ApiCredentials {
    /// The cluster CA of `certs_dir`, and the client certificate `identity` from there.
    pub fn from_certs_dir(certs_dir: &Path, identity: Option<&str>) -> anyhow::Result<Self> {
        let client_pem = match identity {
            Some(name) => Some((
                read(&certs_dir.join(format!("{name}.crt")))?,
                read(&certs_dir.join(format!("{name}.key")))?,
            )),
            None => None,
        };
        Ok(ApiCredentials {
            ca_pem: read(&certs_dir.join("ca.crt"))?,
            client_pem,
            token: None,
        })
    }

    /// The same CA with a bearer token instead of a client certificate.
    pub fn with_token(&self, token: &str) -> ApiCredentials {
        ApiCredentials {
            ca_pem: self.ca_pem.clone(),
            client_pem: None,
            token: Some(token.to_string()),
        }
    }

    /// A rustls client configuration trusting only the CA, presenting the client certificate
    /// if there is one, offering `alpn`.
    pub fn rustls_config(&self, alpn: &[&[u8]]) -> anyhow::Result<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(&self.ca_pem) {
            roots
                .add(cert.context("the CA certificate is not valid PEM")?)
                .context("the CA certificate is not usable")?;
        }
        if roots.is_empty() {
            bail!("no CA certificate to trust");
        }
        let builder = rustls::ClientConfig::builder_with_provider(transport::tls::provider())
            .with_safe_default_protocol_versions()
            .context("TLS protocol versions")?
            .with_root_certificates(roots);
        let mut config = match &self.client_pem {
            Some((cert, key)) => {
                let chain = CertificateDer::pem_slice_iter(cert)
                    .collect::<Result<Vec<_>, _>>()
                    .context("the client certificate is not valid PEM")?;
                let key = PrivateKeyDer::from_pem_slice(key)
                    .context("the client key is not valid PEM")?;
                builder
                    .with_client_auth_cert(chain, key)
                    .context("the client certificate")?
            }
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(config)
    }

    /// The server URL and credentials of a kubeconfig's current context (inline `*-data` or
    /// file paths, relative to the kubeconfig's directory).
    pub fn from_kubeconfig(path: &Path) -> anyhow::Result<(String, ApiCredentials)> {
        #[derive(Deserialize)]
        struct Named<T> {
            name: String,
            #[serde(flatten)]
            inner: T,
        }
        #[derive(Deserialize)]
        struct ClusterEntry {
            cluster: ClusterInfo,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "kebab-case")]
        struct ClusterInfo {
            server: String,
            certificate_authority: Option<PathBuf>,
            certificate_authority_data: Option<String>,
        }
        #[derive(Deserialize)]
        struct UserEntry {
            #[serde(default)]
            user: Option<UserInfo>,
        }
        #[derive(Deserialize, Default)]
        #[serde(rename_all = "kebab-case")]
        struct UserInfo {
            client_certificate: Option<PathBuf>,
            client_certificate_data: Option<String>,
            client_key: Option<PathBuf>,
            client_key_data: Option<String>,
            token: Option<String>,
        }
        #[derive(Deserialize)]
        struct ContextEntry {
            context: ContextInfo,
        }
        #[derive(Deserialize)]
        struct ContextInfo {
            cluster: String,
            #[serde(default)]
            user: String,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "kebab-case")]
        struct KubeConfig {
            #[serde(default)]
            clusters: Vec<Named<ClusterEntry>>,
            #[serde(default)]
            users: Vec<Named<UserEntry>>,
            #[serde(default)]
            contexts: Vec<Named<ContextEntry>>,
            #[serde(default)]
            current_context: String,
        }
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading kubeconfig {}", path.display()))?;
        let config: KubeConfig = serde_saphyr::from_str(&text).map_err(|e| {
            anyhow::anyhow!(
                "parsing kubeconfig {}: {}",
                path.display(),
                e.without_snippet()
            )
        })?;
        let context = config
            .contexts
            .iter()
            .find(|c| c.name == config.current_context)
            .map(|c| &c.inner.context);
        let cluster = match context {
            Some(c) => config.clusters.iter().find(|e| e.name == c.cluster),
            None => config.clusters.first(),
        }
        .with_context(|| format!("kubeconfig {} names no cluster", path.display()))?;
        let user = context
            .and_then(|c| config.users.iter().find(|u| u.name == c.user))
            .and_then(|u| u.inner.user.as_ref());
        let base = path.parent().unwrap_or(Path::new("."));
        let material = |data: &Option<String>,
                        file: &Option<PathBuf>,
                        what: &str|
         -> anyhow::Result<Option<Vec<u8>>> {
            match (data, file) {
                (Some(d), _) => Ok(Some(
                    base64::engine::general_purpose::STANDARD
                        .decode(d.trim())
                        .with_context(|| {
                            format!("kubeconfig {}: {what} is not base64", path.display())
                        })?,
                )),
                (None, Some(f)) => Ok(Some(read(&base.join(f))?)),
                (None, None) => Ok(None),
            }
        };
        let info = &cluster.inner.cluster;
        let ca_pem = material(
            &info.certificate_authority_data,
            &info.certificate_authority,
            "certificate-authority-data",
        )?
        .unwrap_or_default();
        let mut credentials = ApiCredentials {
            ca_pem,
            ..Default::default()
        };
        if let Some(user) = user {
            let cert = material(
                &user.client_certificate_data,
                &user.client_certificate,
                "client-certificate-data",
            )?;
            let key = material(&user.client_key_data, &user.client_key, "client-key-data")?;
            if let (Some(cert), Some(key)) = (cert, key) {
                credentials.client_pem = Some((cert, key));
            }
            credentials.token = user.token.clone();
        }
        Ok((info.server.trim_end_matches('/').to_string(), credentials))
    }
}

/// One API server's HTTPS front with one credential: single requests, a connection each.
#[derive(Clone)]
pub struct ApiAccess {
    pub addr: SocketAddr,
    tls: Arc<rustls::ClientConfig>,
    token: Option<String>,
}

impl ApiAccess {
    pub fn new(addr: SocketAddr, credentials: &ApiCredentials) -> anyhow::Result<ApiAccess> {
        Ok(ApiAccess {
            addr,
            tls: Arc::new(credentials.rustls_config(&[b"http/1.1"])?),
            token: credentials.token.clone(),
        })
    }

    /// As `identity` from `certs_dir` (`None`: no credential, only the CA).
    pub fn from_certs(
        addr: SocketAddr,
        certs_dir: &Path,
        identity: Option<&str>,
    ) -> anyhow::Result<ApiAccess> {
        ApiAccess::new(addr, &ApiCredentials::from_certs_dir(certs_dir, identity)?)
    }

    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    pub async fn get(&self, path: &str) -> anyhow::Result<(u16, String)> {
        self.request("GET", path, None, &[]).await
    }

    /// One HTTP/1.1 request over a fresh TLS connection: (status code, body).
    pub async fn request(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: &[u8],
    ) -> anyhow::Result<(u16, String)> {
        let tcp = tokio::time::timeout(
            Duration::from_secs(2),
            tokio::net::TcpStream::connect(self.addr),
        )
        .await??;
        let connector = tokio_rustls::TlsConnector::from(self.tls.clone());
        let server_name = ServerName::IpAddress(self.addr.ip().into());
        let stream =
            tokio::time::timeout(Duration::from_secs(5), connector.connect(server_name, tcp))
                .await
                .context("TLS handshake timed out")??;
        let mut extra = String::new();
        if let Some(token) = &self.token {
            extra.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        crate::process::exchange(stream, self.addr, method, path, content_type, body, &extra).await
    }
}
