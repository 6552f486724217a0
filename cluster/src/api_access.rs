//! Reaching an API server's HTTPS front from kemu's own tools and tests: the cluster CA to
//! trust, and a credential (a client certificate, or a bearer token).
//!
//! [`ApiCredentials`] comes from a certificates directory (`kemu certs`) or a kubeconfig
//! context chosen as kubectl chooses it ([`KubeconfigChoice`]); [`ApiAccess`] sends single
//! requests with it (readiness probes, tests, status listings) through the same client
//! ([`crate::kube_http::KubeHttp`]) the load generator and the benchmark use.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use base64::Engine;
use bytes::Bytes;
use kube::config::Kubeconfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use secrecy::ExposeSecret;

use crate::kube_http::{KubeHttp, PoolShape};

/// What kubectl asks for when it prints a list: a Table, or plain JSON from a server without.
const TABLE_ACCEPT: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

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

    /// The server URL and credentials of `path`'s current context (inline `*-data` or file
    /// paths, relative to the kubeconfig's directory).
    pub fn from_kubeconfig(path: &Path) -> anyhow::Result<(String, ApiCredentials)> {
        KubeconfigChoice::file(path).load()
    }
}

/// Which kubeconfig and context a tool reads, chosen as kubectl chooses them: the file given,
/// else the files of `$KUBECONFIG` merged (the first to set a value wins), else
/// `~/.kube/config`; the context named, else the kubeconfig's `current-context`.
#[derive(Clone, Debug, Default)]
pub struct KubeconfigChoice {
    pub path: Option<PathBuf>,
    pub context: Option<String>,
}

impl KubeconfigChoice {
    /// `path`'s current context.
    pub fn file(path: &Path) -> KubeconfigChoice {
        KubeconfigChoice {
            path: Some(path.to_path_buf()),
            context: None,
        }
    }

    /// What the choice names, for messages.
    pub fn describe(&self) -> String {
        match &self.path {
            Some(p) => format!("kubeconfig {}", p.display()),
            None => "the kubeconfig of $KUBECONFIG or ~/.kube/config".to_string(),
        }
    }

    /// The server URL and credentials of the chosen context.
    pub fn load(&self) -> anyhow::Result<(String, ApiCredentials)> {
        let config = match &self.path {
            Some(path) => Kubeconfig::read_from(path),
            None => Kubeconfig::read(),
        }
        .map_err(|e| anyhow::anyhow!("reading {}: {e}", self.describe()))?;
        credentials_of(&config, self.context.as_deref())
            .with_context(|| format!("in {}", self.describe()))
    }
}

/// The server and credentials of `context` (else the current context) of a parsed kubeconfig;
/// file references are absolute already (the reader resolves them against each file's folder).
fn credentials_of(
    config: &Kubeconfig,
    context: Option<&str>,
) -> anyhow::Result<(String, ApiCredentials)> {
    let wanted = context.or(config.current_context.as_deref());
    let context = match wanted {
        Some(name) => Some(
            config
                .contexts
                .iter()
                .find(|c| c.name == name)
                .with_context(|| format!("context \"{name}\" does not exist"))?
                .context
                .as_ref()
                .with_context(|| format!("context \"{name}\" is empty"))?,
        ),
        None => None,
    };
    let cluster = match context {
        Some(c) => config
            .clusters
            .iter()
            .find(|e| e.name == c.cluster)
            .with_context(|| format!("cluster \"{}\" does not exist", c.cluster))?,
        None => config
            .clusters
            .first()
            .context("no context is chosen and no cluster is listed")?,
    };
    let info = cluster
        .cluster
        .as_ref()
        .with_context(|| format!("cluster \"{}\" is empty", cluster.name))?;
    let server = info
        .server
        .as_deref()
        .with_context(|| format!("cluster \"{}\" has no server", cluster.name))?;
    let user = match context.and_then(|c| c.user.as_deref()) {
        Some(name) => config
            .auth_infos
            .iter()
            .find(|u| u.name == name)
            .with_context(|| format!("user \"{name}\" does not exist"))?
            .auth_info
            .as_ref(),
        None => None,
    };
    let ca_pem = material(
        info.certificate_authority_data.as_deref(),
        info.certificate_authority.as_deref(),
        "certificate-authority-data",
    )?
    .unwrap_or_default();
    let mut credentials = ApiCredentials {
        ca_pem,
        ..Default::default()
    };
    if let Some(user) = user {
        let cert = material(
            user.client_certificate_data.as_deref(),
            user.client_certificate.as_deref(),
            "client-certificate-data",
        )?;
        let key_data = user.client_key_data.as_ref().map(|k| k.expose_secret());
        let key = material(key_data, user.client_key.as_deref(), "client-key-data")?;
        if let (Some(cert), Some(key)) = (cert, key) {
            credentials.client_pem = Some((cert, key));
        }
        credentials.token = match (&user.token, &user.token_file) {
            (Some(token), _) => Some(token.expose_secret().to_string()),
            (None, Some(file)) => Some(
                String::from_utf8_lossy(&read(Path::new(file))?)
                    .trim()
                    .to_string(),
            ),
            (None, None) => None,
        };
    }
    Ok((server.trim_end_matches('/').to_string(), credentials))
}

/// Inline base64 `data`, else the contents of `file`.
fn material(data: Option<&str>, file: Option<&str>, what: &str) -> anyhow::Result<Option<Vec<u8>>> {
    match (data, file) {
        (Some(d), _) => Ok(Some(
            base64::engine::general_purpose::STANDARD
                .decode(d.trim())
                .with_context(|| format!("{what} is not base64"))?,
        )),
        (None, Some(f)) => Ok(Some(read(Path::new(f))?)),
        (None, None) => Ok(None),
    }
}

/// One API server's HTTPS front with one credential, for single calls (status checks, tests).
#[derive(Clone)]
pub struct ApiAccess {
    url: String,
    http: KubeHttp,
}

impl ApiAccess {
    pub fn new(addr: SocketAddr, credentials: &ApiCredentials) -> anyhow::Result<ApiAccess> {
        ApiAccess::at_url(&format!("https://{addr}"), credentials)
    }

    /// The server at `url` (`https://HOST:PORT`, a host name checked against the server's
    /// certificate).
    pub fn at_url(url: &str, credentials: &ApiCredentials) -> anyhow::Result<ApiAccess> {
        Ok(ApiAccess {
            url: url.trim_end_matches('/').to_string(),
            http: KubeHttp::new(url, credentials, PoolShape::SMALL, "kemu")?,
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
        self.url.clone()
    }

    pub async fn get(&self, path: &str) -> anyhow::Result<(u16, String)> {
        self.request("GET", path, None, &[]).await
    }

    /// A GET answered as a `meta.k8s.io/v1` Table (kubectl's printed columns) where the
    /// resource has one: a list of thousands of objects costs the server and this process a
    /// row each instead of the whole object. No answer within 15 s is an error.
    pub async fn get_table(&self, path: &str) -> anyhow::Result<(u16, String)> {
        let url = format!("{}{path}", self.url());
        let mut request = self
            .http
            .request(hyper::Method::GET, &url, None, Bytes::new())?;
        request.headers_mut().insert(
            hyper::header::ACCEPT,
            hyper::header::HeaderValue::from_static(TABLE_ACCEPT),
        );
        self.answer(&url, request).await
    }

    /// One request: (status code, body). No answer within 15 s is an error.
    pub async fn request(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: &[u8],
    ) -> anyhow::Result<(u16, String)> {
        let method = hyper::Method::from_bytes(method.as_bytes())
            .with_context(|| format!("bad HTTP method {method:?}"))?;
        let url = format!("{}{path}", self.url());
        let request =
            self.http
                .request(method, &url, content_type, Bytes::copy_from_slice(body))?;
        self.answer(&url, request).await
    }

    /// Sends `request` (to `url`, for the error) and reads the whole answer: (status code,
    /// body). No answer within 15 s is an error.
    async fn answer(
        &self,
        url: &str,
        request: hyper::Request<http_body_util::Full<Bytes>>,
    ) -> anyhow::Result<(u16, String)> {
        let call = async {
            let response = self.http.send(request).await?;
            let status = response.status();
            let body = http_body_util::BodyExt::collect(response.into_body())
                .await?
                .to_bytes();
            anyhow::Ok((status, body))
        };
        let (status, body) = tokio::time::timeout(Duration::from_secs(15), call)
            .await
            .with_context(|| format!("no answer from {url} within 15 s"))??;
        Ok((status.as_u16(), String::from_utf8_lossy(&body).into_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CA: &str = "-----BEGIN CERTIFICATE-----\nQ0E=\n-----END CERTIFICATE-----\n";

    /// A kubeconfig with two contexts: `kemu` (current; inline data and a token) and `files`
    /// (paths relative to the kubeconfig's folder, a token file).
    fn write_kubeconfig(dir: &Path) -> PathBuf {
        std::fs::create_dir_all(dir.join("pki")).unwrap();
        std::fs::write(dir.join("pki/ca.crt"), CA).unwrap();
        std::fs::write(dir.join("pki/user.crt"), "cert").unwrap();
        std::fs::write(dir.join("pki/user.key"), "key").unwrap();
        std::fs::write(dir.join("pki/token"), "from-file\n").unwrap();
        let ca64 = base64::engine::general_purpose::STANDARD.encode(CA);
        let text = format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: kemu\nclusters:\n\
             - name: inline\n  cluster:\n    server: https://127.0.0.1:6443/\n    certificate-authority-data: {ca64}\n\
             - name: files\n  cluster:\n    server: https://127.0.0.2:6443\n    certificate-authority: pki/ca.crt\n\
             users:\n\
             - name: bearer\n  user:\n    token: abc\n\
             - name: cert\n  user:\n    client-certificate: pki/user.crt\n    client-key: pki/user.key\n    tokenFile: pki/token\n\
             contexts:\n\
             - name: kemu\n  context:\n    cluster: inline\n    user: bearer\n\
             - name: files\n  context:\n    cluster: files\n    user: cert\n"
        );
        let path = dir.join("config");
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn the_current_context_unless_one_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_kubeconfig(dir.path());

        let (server, creds) = KubeconfigChoice::file(&path).load().unwrap();
        assert_eq!(server, "https://127.0.0.1:6443");
        assert_eq!(creds.ca_pem, CA.as_bytes());
        assert_eq!(creds.token.as_deref(), Some("abc"));
        assert!(creds.client_pem.is_none());

        let choice = KubeconfigChoice {
            path: Some(path.clone()),
            context: Some("files".into()),
        };
        let (server, creds) = choice.load().unwrap();
        assert_eq!(server, "https://127.0.0.2:6443");
        assert_eq!(creds.ca_pem, CA.as_bytes());
        assert_eq!(
            creds.client_pem,
            Some((b"cert".to_vec(), b"key".to_vec())),
            "file paths are read relative to the kubeconfig's folder"
        );
        assert_eq!(creds.token.as_deref(), Some("from-file"));
    }

    #[test]
    fn a_missing_context_or_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_kubeconfig(dir.path());
        let choice = KubeconfigChoice {
            path: Some(path.clone()),
            context: Some("nope".into()),
        };
        let err = format!("{:#}", choice.load().unwrap_err());
        assert!(err.contains("context \"nope\" does not exist"), "{err}");
        assert!(err.contains(&path.display().to_string()), "{err}");

        let missing = dir.path().join("absent");
        let err = format!("{:#}", KubeconfigChoice::file(&missing).load().unwrap_err());
        assert!(err.contains(&missing.display().to_string()), "{err}");
    }
}
