//! A process's TLS identity and the rustls/quinn configurations built from it.
//!
//! Both directions use mutual TLS 1.3 against the cluster CA: servers demand a client
//! certificate signed by it, clients check the server's chain and its IP/DNS name.

use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::pki::{pair_paths, read_to_string, CA_NAME};
use crate::subject::SubjectName;
use crate::TransportError;

/// ALPN protocol id; a peer speaking anything else fails the handshake instead of garbling
/// frames later.
const ALPN: &[u8] = b"kemu/1";

/// The certificates and key one process presents, and the CA roots it trusts.
///
/// Cheap to clone: the material is shared.
#[derive(Clone)]
pub struct TlsIdentity {
    roots: Arc<RootCertStore>,
    chain: Arc<Vec<CertificateDer<'static>>>,
    key: Arc<PrivateKeyDer<'static>>,
    name: String,
    organizations: Vec<String>,
}

impl std::fmt::Debug for TlsIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key.
        f.debug_struct("TlsIdentity")
            .field("name", &self.name)
            .field("organizations", &self.organizations)
            .finish_non_exhaustive()
    }
}

impl TlsIdentity {
    /// Loads `ca.crt`, `{name}.crt` and `{name}.key` from `certs_dir`. Errors name the file
    /// that is missing or unusable.
    pub fn load(certs_dir: &Path, name: &str) -> Result<Self, TransportError> {
        let ca_path = certs_dir.join(format!("{CA_NAME}.crt"));
        let (crt_path, key_path) = pair_paths(certs_dir, name);

        let ca_certs = parse_certificates(read_to_string(&ca_path)?.as_bytes(), &ca_path)?;
        let mut roots = RootCertStore::empty();
        for cert in ca_certs {
            roots.add(cert).map_err(|e| TransportError::BadCredential {
                path: ca_path.clone(),
                reason: format!("not a usable CA certificate: {e}"),
            })?;
        }

        let chain = parse_certificates(read_to_string(&crt_path)?.as_bytes(), &crt_path)?;
        let subject = chain
            .first()
            .map(|leaf| SubjectName::from_certificate(leaf))
            .transpose()
            .map_err(|reason| TransportError::BadCredential {
                path: crt_path.clone(),
                reason,
            })?;
        let (cn, organizations) = match subject {
            Some(s) => (s.common_name(), s.organizations()),
            None => (None, Vec::new()),
        };

        let key =
            PrivateKeyDer::from_pem_slice(read_to_string(&key_path)?.as_bytes()).map_err(|e| {
                TransportError::BadCredential {
                    path: key_path.clone(),
                    reason: format!("no usable PEM private key: {e}"),
                }
            })?;
        // Catch a corrupt or mismatched key now, naming the file, rather than at bind time.
        let signing_key = provider()
            .key_provider
            .load_private_key(key.clone_key())
            .map_err(|e| TransportError::BadCredential {
                path: key_path.clone(),
                reason: e.to_string(),
            })?;
        if let Some(leaf) = chain.first() {
            rustls::sign::CertifiedKey::new(vec![leaf.clone()], signing_key)
                .keys_match()
                .map_err(|e| TransportError::BadCredential {
                    path: key_path.clone(),
                    reason: format!("does not match {}: {e}", crt_path.display()),
                })?;
        }

        Ok(TlsIdentity {
            roots: Arc::new(roots),
            chain: Arc::new(chain),
            key: Arc::new(key),
            name: cn.unwrap_or_else(|| name.to_string()),
            organizations,
        })
    }

    /// The certificate's common name (the file stem if the certificate has no CN).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The certificate's organizations (groups).
    pub fn organizations(&self) -> &[String] {
        &self.organizations
    }

    /// The rustls server configuration: our chain, and mandatory client certificates from the
    /// cluster CA.
    pub fn rustls_server_config(&self) -> Result<rustls::ServerConfig, TransportError> {
        let verifier = WebPkiClientVerifier::builder_with_provider(self.roots.clone(), provider())
            .build()
            .map_err(|e| TransportError::Config {
                context: "client certificate verifier",
                reason: e.to_string(),
            })?;
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|source| TransportError::Tls {
                context: "server protocol versions",
                source,
            })?
            .with_client_cert_verifier(verifier)
            .with_single_cert(self.chain.to_vec(), self.key.clone_key())
            .map_err(|source| TransportError::Tls {
                context: "server certificate",
                source,
            })?;
        config.alpn_protocols = vec![ALPN.to_vec()];
        Ok(config)
    }

    /// The rustls client configuration: trust only the cluster CA and present our chain.
    pub fn rustls_client_config(&self) -> Result<rustls::ClientConfig, TransportError> {
        self.client_config_with_alpn(ALPN)
    }

    /// The rustls configuration of an HTTPS server (the API server's HTTP front): our chain,
    /// TLS 1.2 and 1.3, HTTP/2 or HTTP/1.1, and client certificates from the cluster CA
    /// requested but optional, so that kubectl with a bearer token connects as well as kubectl
    /// with a client certificate. A certificate that is presented must verify.
    pub fn https_server_config(&self) -> Result<rustls::ServerConfig, TransportError> {
        self.tcp_server_config(true, &[b"h2", b"http/1.1"])
    }

    /// The rustls configuration of a gRPC server (the store's etcd-compatible front): our chain,
    /// TLS 1.2 and 1.3 (etcd's clients speak either), HTTP/2 only, and client certificates from
    /// the cluster CA demanded, as on the QUIC front.
    pub fn grpc_server_config(&self) -> Result<rustls::ServerConfig, TransportError> {
        self.tcp_server_config(false, &[b"h2"])
    }

    /// A TLS 1.2/1.3 server configuration over TCP presenting our chain, verifying client
    /// certificates against the cluster CA (optional ones if `optional_client_cert`), offering
    /// the application protocols `alpn`.
    fn tcp_server_config(
        &self,
        optional_client_cert: bool,
        alpn: &[&[u8]],
    ) -> Result<rustls::ServerConfig, TransportError> {
        let builder = WebPkiClientVerifier::builder_with_provider(self.roots.clone(), provider());
        let builder = if optional_client_cert {
            builder.allow_unauthenticated()
        } else {
            builder
        };
        let verifier = builder.build().map_err(|e| TransportError::Config {
            context: "client certificate verifier",
            reason: e.to_string(),
        })?;
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|source| TransportError::Tls {
                context: "server protocol versions",
                source,
            })?
            .with_client_cert_verifier(verifier)
            .with_single_cert(self.chain.to_vec(), self.key.clone_key())
            .map_err(|source| TransportError::Tls {
                context: "server certificate",
                source,
            })?;
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(config)
    }

    /// The rustls configuration of an HTTPS client: trust only the cluster CA, present our
    /// chain, speak HTTP/1.1.
    pub fn https_client_config(&self) -> Result<rustls::ClientConfig, TransportError> {
        self.client_config_with_alpn(b"http/1.1")
    }

    /// The rustls configuration of a gRPC client: trust only the cluster CA, present our chain,
    /// speak HTTP/2.
    pub fn grpc_client_config(&self) -> Result<rustls::ClientConfig, TransportError> {
        self.client_config_with_alpn(b"h2")
    }

    /// A client configuration that trusts only the cluster CA, presents our chain and offers
    /// the one application protocol `alpn`.
    fn client_config_with_alpn(&self, alpn: &[u8]) -> Result<rustls::ClientConfig, TransportError> {
        let mut config = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|source| TransportError::Tls {
                context: "client protocol versions",
                source,
            })?
            .with_root_certificates(self.roots.clone())
            .with_client_auth_cert(self.chain.to_vec(), self.key.clone_key())
            .map_err(|source| TransportError::Tls {
                context: "client certificate",
                source,
            })?;
        config.alpn_protocols = vec![alpn.to_vec()];
        Ok(config)
    }

    /// The quinn server configuration with kemu's transport settings.
    pub fn quinn_server_config(&self) -> Result<quinn::ServerConfig, TransportError> {
        let crypto =
            quinn::crypto::rustls::QuicServerConfig::try_from(self.rustls_server_config()?)
                .map_err(|e| TransportError::Config {
                    context: "QUIC server crypto",
                    reason: e.to_string(),
                })?;
        let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
        config.transport_config(Arc::new(transport_config(SERVER_INCOMING_STREAMS)));
        Ok(config)
    }

    /// The quinn client configuration with kemu's transport settings.
    pub fn quinn_client_config(&self) -> Result<quinn::ClientConfig, TransportError> {
        quinn_client_config(self.rustls_client_config()?)
    }

    /// The key a server endpoint makes its QUIC stateless reset tokens with, derived from this
    /// identity's private key: the same after a restart, so a restarted process answers a packet
    /// of its predecessor's connections with a stateless reset that the client accepts (QUIC,
    /// RFC 9000 §10.3), and the client reconnects at once instead of waiting out a silence
    /// timer. A random key (quinn's default) makes a reset no client would believe. One-way, so
    /// the tokens reveal nothing of the key they come from.
    pub fn stateless_reset_key(&self) -> Arc<dyn quinn::crypto::HmacKey> {
        let derived = self.derive(RESET_KEY_LABEL);
        Arc::new(ring::hmac::Key::new(
            ring::hmac::HMAC_SHA256,
            derived.as_ref(),
        ))
    }

    /// The key of a server endpoint's connection IDs, derived from the private key as
    /// [`stateless_reset_key`](Self::stateless_reset_key) is: quinn drops a packet whose
    /// connection ID does not carry its endpoint's key without answering it, so a restarted
    /// process must recognise its predecessor's IDs to reset their connections.
    pub fn connection_id_key(&self) -> u64 {
        let derived = self.derive(CONNECTION_ID_KEY_LABEL);
        let mut key = [0u8; 8];
        key.copy_from_slice(&derived.as_ref()[..8]);
        u64::from_le_bytes(key)
    }

    /// A secret for one purpose (`label`), derived one-way from the private key.
    fn derive(&self, label: &[u8]) -> ring::hmac::Tag {
        let secret = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, self.key.secret_der());
        ring::hmac::sign(&secret, label)
    }
}

/// What the private key is combined with to make the stateless reset key, so that key is used
/// for nothing else.
const RESET_KEY_LABEL: &[u8] = b"kemu QUIC stateless reset key v1";
/// The same for the connection ID key.
const CONNECTION_ID_KEY_LABEL: &[u8] = b"kemu QUIC connection ID key v1";

/// The common name and organizations (CN, O values) of a DER certificate, as servers read a
/// verified peer's user name and groups.
pub fn certificate_subject(cert_der: &[u8]) -> Result<(Option<String>, Vec<String>), String> {
    let subject = SubjectName::from_certificate(cert_der)?;
    Ok((subject.common_name(), subject.organizations()))
}

/// Wraps a rustls client configuration for quinn with kemu's transport settings. Public so
/// tests and tools can connect with a deliberately unusual TLS setup.
pub fn quinn_client_config(
    crypto: rustls::ClientConfig,
) -> Result<quinn::ClientConfig, TransportError> {
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(crypto).map_err(|e| {
        TransportError::Config {
            context: "QUIC client crypto",
            reason: e.to_string(),
        }
    })?;
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    // Servers never open streams towards clients (every call is client-initiated).
    config.transport_config(Arc::new(transport_config(0)));
    Ok(config)
}

/// The crypto provider used everywhere, chosen explicitly so the crate never depends on a
/// process-wide default having been installed.
pub fn provider() -> Arc<CryptoProvider> {
    static PROVIDER: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    PROVIDER
        .get_or_init(|| Arc::new(rustls::crypto::ring::default_provider()))
        .clone()
}

/// How many calls (streams) a client may have open at once on one connection to a server:
/// in-flight requests plus long-lived watches (a node host's, or 500 watches a connection in
/// `kemu bench apiserver`). A client past it waits for a stream to finish, it is not refused.
/// quinn-proto allocates state for every allowed stream when a connection is made, so this is
/// also a per-connection cost paid on every (re)connection: at 100,000 a reconnection storm on a
/// starved machine cost gigabytes and handshakes that never finished.
pub const SERVER_INCOMING_STREAMS: u32 = 8_192;

/// How long a connection may be quiet before a keep-alive is sent on it.
pub const KEEP_ALIVE: Duration = Duration::from_millis(250);

/// How long a connection may go without receiving a packet before quinn closes it.
const IDLE_TIMEOUT_MS: u32 = 30_000;

/// QUIC settings sized for raft traffic and many concurrent calls and watches on one
/// connection: each call is a stream, `incoming_streams` bounds how many the peer may open at
/// once, and windows are large so a big snapshot or a burst of watch events is not throttled by
/// flow control.
fn transport_config(incoming_streams: u32) -> quinn::TransportConfig {
    const STREAM_WINDOW: u32 = 16 * 1024 * 1024;
    const CONNECTION_WINDOW: u32 = 64 * 1024 * 1024;
    let mut config = quinn::TransportConfig::default();
    config
        .max_concurrent_bidi_streams(quinn::VarInt::from_u32(incoming_streams))
        .max_concurrent_uni_streams(quinn::VarInt::from_u32(0))
        .stream_receive_window(quinn::VarInt::from_u32(STREAM_WINDOW))
        .receive_window(quinn::VarInt::from_u32(CONNECTION_WINDOW))
        .send_window(u64::from(CONNECTION_WINDOW))
        // A quiet connection still carries a keep-alive and its acknowledgement every
        // KEEP_ALIVE, which is what `Connection::silent_for` watches to notice a peer that was
        // killed (SIGKILL sends no close) or cut off within a second or two. The idle timeout is
        // only the last resort, and long: on a starved machine a live peer can go seconds
        // without processing a packet, and a connection closed under it takes every call and
        // watch on it along, then has to be made again under the same starvation.
        .keep_alive_interval(Some(KEEP_ALIVE))
        .max_idle_timeout(Some(quinn::IdleTimeout::from(quinn::VarInt::from_u32(
            IDLE_TIMEOUT_MS,
        ))))
        // The first round trip of a handshake, before one is measured. kemu's processes talk
        // over a LAN or loopback, not the Internet QUIC's 333 ms default is meant for; it sets
        // when a lost Initial is sent again (three times this, doubling), and an Initial sent
        // while the server's process is restarting is lost.
        .initial_rtt(INITIAL_RTT);
    config
}

/// The round-trip time assumed until one is measured (see [`transport_config`]).
const INITIAL_RTT: Duration = Duration::from_millis(50);

/// Parses every certificate in a PEM buffer; `path` only labels errors. An empty result is an
/// error because a certificate file without certificates is always a mistake.
pub(crate) fn parse_certificates(
    pem: &[u8],
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TransportError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TransportError::BadCredential {
            path: path.to_path_buf(),
            reason: format!("invalid PEM: {e}"),
        })?;
    if certs.is_empty() {
        return Err(TransportError::BadCredential {
            path: path.to_path_buf(),
            reason: "no CERTIFICATE block found".into(),
        });
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pki::{create_ca, issue, CertSpec};

    #[test]
    fn load_reads_name_and_groups() {
        let dir = tempfile::tempdir().expect("tempdir");
        create_ca(dir.path(), "t").expect("ca");
        issue(
            dir.path(),
            &CertSpec {
                name: "node-1".into(),
                organizations: vec!["system:nodes".into()],
                sans: vec![],
            },
        )
        .expect("issue");
        let id = TlsIdentity::load(dir.path(), "node-1").expect("load");
        assert_eq!(id.name(), "node-1");
        assert_eq!(id.organizations(), ["system:nodes".to_string()]);
        id.quinn_server_config().expect("server config");
        id.quinn_client_config().expect("client config");
    }

    #[test]
    fn errors_name_the_bad_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        create_ca(dir.path(), "t").expect("ca");
        match TlsIdentity::load(dir.path(), "missing") {
            Err(TransportError::File { path, .. }) => assert!(path.ends_with("missing.crt")),
            other => panic!("expected file error, got {other:?}"),
        }
        issue(
            dir.path(),
            &CertSpec {
                name: "a".into(),
                organizations: vec![],
                sans: vec![],
            },
        )
        .expect("issue");
        std::fs::write(dir.path().join("a.key"), "not a key").expect("write");
        match TlsIdentity::load(dir.path(), "a") {
            Err(TransportError::BadCredential { path, .. }) => assert!(path.ends_with("a.key")),
            other => panic!("expected bad credential, got {other:?}"),
        }
        // A valid key that belongs to another certificate.
        issue(
            dir.path(),
            &CertSpec {
                name: "b".into(),
                organizations: vec![],
                sans: vec![],
            },
        )
        .expect("issue");
        std::fs::copy(dir.path().join("b.key"), dir.path().join("a.key")).expect("copy");
        match TlsIdentity::load(dir.path(), "a") {
            Err(TransportError::BadCredential { path, reason }) => {
                assert!(path.ends_with("a.key"), "{reason}")
            }
            other => panic!("expected key mismatch, got {other:?}"),
        }
    }
}
