//! The cluster's certificate authority and the certificates it issues.
//!
//! Every kemu process authenticates with a certificate signed by one cluster CA. The files
//! live flat in one directory: `ca.crt`/`ca.key` and `{name}.crt`/`{name}.key` per identity,
//! all PEM, keys readable by the owner only.

use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

use crate::subject::SubjectName;
use crate::TransportError;

/// File stem of the cluster CA's certificate and key.
pub const CA_NAME: &str = "ca";

/// SANs every issued certificate carries so that local tools and tests can always connect.
const LOOPBACK_SANS: [&str; 3] = ["127.0.0.1", "::1", "localhost"];

/// rcgen keeps one value per attribute type, so a second O goes in under the same OID spelled
/// as a custom type; that caps a certificate at two organizations.
const MAX_ORGANIZATIONS: usize = 2;

/// What to put in an issued certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertSpec {
    /// File stem of the `.crt`/`.key` pair and the certificate's CN (the user or node name).
    pub name: String,
    /// Subject O values; servers read them as the peer's groups. At most two.
    pub organizations: Vec<String>,
    /// Subject alternative names, each an IP address or a DNS name. Loopback names are always
    /// added.
    pub sans: Vec<String>,
}

/// Creates the cluster CA in `dir` (`ca.crt` and `ca.key`), creating `dir` if needed.
///
/// Idempotent: when both files already exist they are kept, so re-running `init` never
/// invalidates certificates issued earlier.
pub fn create_ca(dir: &Path, cluster_name: &str) -> Result<(), TransportError> {
    let (crt_path, key_path) = pair_paths(dir, CA_NAME);
    if crt_path.exists() && key_path.exists() {
        return Ok(());
    }
    fs::create_dir_all(dir).map_err(|source| TransportError::File {
        operation: "create directory",
        path: dir.to_path_buf(),
        source,
    })?;

    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, format!("kemu-ca-{cluster_name}"));
    params
        .distinguished_name
        .push(DnType::OrganizationName, "kemu");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];

    let key = generate_key("CA key")?;
    let cert = params
        .self_signed(&key)
        .map_err(|source| TransportError::CertGeneration {
            what: "CA certificate".into(),
            source,
        })?;
    // Key first: a crash in between leaves no certificate, so the next run starts over.
    write_file(&key_path, key.serialize_pem().as_bytes(), 0o600)?;
    write_file(&crt_path, cert.pem().as_bytes(), 0o644)?;
    Ok(())
}

/// Issues `dir/{name}.crt` and `dir/{name}.key`, signed by the CA in `dir`, valid for both
/// server and client authentication. Overwrites an existing pair of the same name.
pub fn issue(dir: &Path, spec: &CertSpec) -> Result<(), TransportError> {
    validate_name(&spec.name)?;
    if spec.organizations.len() > MAX_ORGANIZATIONS {
        return Err(TransportError::InvalidCertSpec {
            field: "organizations",
            reason: format!(
                "{} given, at most {MAX_ORGANIZATIONS} supported",
                spec.organizations.len()
            ),
        });
    }
    let (ca_cert, ca_key) = load_ca(dir)?;

    let mut sans: Vec<String> = Vec::new();
    let mut seen = BTreeSet::new();
    for san in spec.sans.iter().map(String::as_str).chain(LOOPBACK_SANS) {
        if seen.insert(san.to_string()) {
            sans.push(san.to_string());
        }
    }
    let mut params = CertificateParams::new(sans).map_err(|e| TransportError::InvalidCertSpec {
        field: "sans",
        reason: e.to_string(),
    })?;
    params.distinguished_name = DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, spec.name.as_str());
    if let Some(first) = spec.organizations.first() {
        params
            .distinguished_name
            .push(DnType::OrganizationName, first.as_str());
    }
    if let Some(second) = spec.organizations.get(1) {
        params
            .distinguished_name
            .push(DnType::CustomDnType(vec![2, 5, 4, 10]), second.as_str());
    }
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    params.use_authority_key_identifier_extension = true;

    let key = generate_key(&format!("key for {}", spec.name))?;
    let cert = params
        .signed_by(&key, &ca_cert, &ca_key)
        .map_err(|source| TransportError::CertGeneration {
            what: format!("certificate for {}", spec.name),
            source,
        })?;
    let (crt_path, key_path) = pair_paths(dir, &spec.name);
    write_file(&key_path, key.serialize_pem().as_bytes(), 0o600)?;
    write_file(&crt_path, cert.pem().as_bytes(), 0o644)?;
    Ok(())
}

/// File name of the cluster's service-account signing key (PKCS#8 PEM, owner-only) in the
/// certificates directory.
pub const SERVICE_ACCOUNT_KEY: &str = "sa.key";

/// The cluster's service-account signing key in `dir`, made if missing: (private key PEM,
/// public key PEM). Every API server of the cluster signs and checks tokens with it. Made
/// once: callers racing to make it all end up with the first one written (a hard link never
/// replaces a file).
pub fn service_account_key(dir: &Path) -> Result<(String, String), TransportError> {
    let path = dir.join(SERVICE_ACCOUNT_KEY);
    if !path.exists() {
        fs::create_dir_all(dir).map_err(|source| TransportError::File {
            operation: "create directory",
            path: dir.to_path_buf(),
            source,
        })?;
        let key = generate_key("service account signing key")?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default();
        let tmp = dir.join(format!(
            ".{SERVICE_ACCOUNT_KEY}.{}.{nanos}",
            std::process::id()
        ));
        write_file(&tmp, key.serialize_pem().as_bytes(), 0o600)?;
        let linked = fs::hard_link(&tmp, &path);
        let _ = fs::remove_file(&tmp);
        match linked {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(source) => {
                return Err(TransportError::File {
                    operation: "link into place",
                    path,
                    source,
                })
            }
        }
    }
    let pem = read_to_string(&path)?;
    let key = KeyPair::from_pem(&pem).map_err(|e| TransportError::BadCredential {
        path: path.clone(),
        reason: e.to_string(),
    })?;
    Ok((pem, key.public_key_pem()))
}

/// Paths of the certificate and key for `name` in `dir`.
pub fn pair_paths(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    (
        dir.join(format!("{name}.crt")),
        dir.join(format!("{name}.key")),
    )
}

fn validate_name(name: &str) -> Result<(), TransportError> {
    let reason = if name.is_empty() {
        Some("must not be empty".to_string())
    } else if name == CA_NAME {
        Some(format!("`{CA_NAME}` is reserved for the cluster CA"))
    } else if name.starts_with('.') || name.contains(['/', '\\', '\0']) {
        Some(format!("`{name}` is not a plain file name"))
    } else {
        None
    };
    match reason {
        Some(reason) => Err(TransportError::InvalidCertSpec {
            field: "name",
            reason,
        }),
        None => Ok(()),
    }
}

/// Loads the CA as rcgen needs it for signing: a certificate object carrying the CA's exact
/// subject, plus its key.
///
/// The CA's parameters come from its certificate on disk (rcgen reads it with x509-parser) and
/// the certificate is re-created from them and the stored key: only the subject and key feed
/// into issued certificates (issuer name, authority key id, signature), and the rebuilt subject
/// is checked byte for byte against the original so a mismatch cannot go unnoticed.
fn load_ca(dir: &Path) -> Result<(rcgen::Certificate, KeyPair), TransportError> {
    let (crt_path, key_path) = pair_paths(dir, CA_NAME);
    let key_pem = read_to_string(&key_path)?;
    let key = KeyPair::from_pem(&key_pem).map_err(|e| TransportError::BadCredential {
        path: key_path.clone(),
        reason: e.to_string(),
    })?;
    let crt_pem = read_to_string(&crt_path)?;
    let bad_crt = |reason: String| TransportError::BadCredential {
        path: crt_path.clone(),
        reason,
    };
    let der = crate::tls::parse_certificates(crt_pem.as_bytes(), &crt_path)?
        .into_iter()
        .next()
        .ok_or_else(|| bad_crt("no certificate in file".into()))?;
    let subject = SubjectName::from_certificate(&der).map_err(bad_crt)?;
    let mut params =
        CertificateParams::from_ca_cert_der(&der).map_err(|e| bad_crt(e.to_string()))?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let rebuilt = params
        .self_signed(&key)
        .map_err(|source| TransportError::CertGeneration {
            what: "CA signing certificate".into(),
            source,
        })?;
    let rebuilt_subject = SubjectName::from_certificate(rebuilt.der()).map_err(bad_crt)?;
    if rebuilt_subject.der != subject.der {
        return Err(bad_crt(
            "CA subject uses a form kemu cannot reproduce for signing".into(),
        ));
    }
    Ok((rebuilt, key))
}

fn generate_key(what: &str) -> Result<KeyPair, TransportError> {
    KeyPair::generate().map_err(|source| TransportError::CertGeneration {
        what: what.to_string(),
        source,
    })
}

pub(crate) fn read_to_string(path: &Path) -> Result<String, TransportError> {
    fs::read_to_string(path).map_err(|source| TransportError::File {
        operation: "read",
        path: path.to_path_buf(),
        source,
    })
}

/// Writes through a temporary file and a rename so a reader never sees half a key, and the key
/// is never readable by others even briefly.
fn write_file(path: &Path, contents: &[u8], mode: u32) -> Result<(), TransportError> {
    let tmp = path.with_extension(format!(
        "{}.tmp",
        path.extension().and_then(|e| e.to_str()).unwrap_or("")
    ));
    let file_error = |operation, source| TransportError::File {
        operation,
        path: tmp.clone(),
        source,
    };
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)
        .map_err(|e| file_error("create", e))?;
    file.write_all(contents)
        .and_then(|()| file.sync_all())
        .map_err(|e| file_error("write", e))?;
    drop(file);
    fs::rename(&tmp, path).map_err(|source| TransportError::File {
        operation: "rename into place",
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn spec(name: &str, orgs: &[&str]) -> CertSpec {
        CertSpec {
            name: name.into(),
            organizations: orgs.iter().map(|o| o.to_string()).collect(),
            sans: vec!["10.0.0.1".into(), "node-1.kemu".into()],
        }
    }

    #[test]
    fn create_ca_is_idempotent_and_key_is_private() {
        let dir = tempfile::tempdir().expect("tempdir");
        create_ca(dir.path(), "test").expect("create");
        let first = fs::read(dir.path().join("ca.crt")).expect("read");
        create_ca(dir.path(), "test").expect("create again");
        assert_eq!(first, fs::read(dir.path().join("ca.crt")).expect("read"));
        let mode = fs::metadata(dir.path().join("ca.key"))
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn issued_certificate_carries_subject_and_issuer() {
        let dir = tempfile::tempdir().expect("tempdir");
        create_ca(dir.path(), "test").expect("create");
        issue(dir.path(), &spec("alice", &["system:masters", "devs"])).expect("issue");
        let pem = fs::read(dir.path().join("alice.crt")).expect("read");
        let der = crate::tls::parse_certificates(&pem, Path::new("alice.crt"))
            .expect("parse")
            .remove(0);
        let subject = SubjectName::from_certificate(&der).expect("subject");
        assert_eq!(subject.common_name().as_deref(), Some("alice"));
        assert_eq!(subject.organizations(), vec!["system:masters", "devs"]);
        let mode = fs::metadata(dir.path().join("alice.key"))
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn bad_specs_are_rejected() {
        let dir = tempfile::tempdir().expect("tempdir");
        create_ca(dir.path(), "test").expect("create");
        for name in ["", "ca", "../x", ".hidden"] {
            assert!(matches!(
                issue(dir.path(), &spec(name, &[])),
                Err(TransportError::InvalidCertSpec { field: "name", .. })
            ));
        }
        assert!(matches!(
            issue(dir.path(), &spec("bob", &["a", "b", "c"])),
            Err(TransportError::InvalidCertSpec {
                field: "organizations",
                ..
            })
        ));
    }

    #[test]
    fn issue_without_ca_names_the_missing_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        match issue(dir.path(), &spec("bob", &[])) {
            Err(TransportError::File { path, .. }) => assert!(path.ends_with("ca.key")),
            other => panic!("expected a file error, got {other:?}"),
        }
    }
}
