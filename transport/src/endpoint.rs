//! [`Endpoint`]: where a server is, as flags and configs name it: an IP address and port, or a
//! host name and port that is resolved again at every connect (a rescheduled pod keeps its DNS
//! name and gets a new address).

use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::TransportError;

/// A server's address: `10.0.0.5:2379`, `[::1]:2379` or `kemu-store-0.kemu-store.ns.svc:2379`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Endpoint {
    /// An address used as it is; the TLS server name is its IP.
    Addr(SocketAddr),
    /// A host name resolved at each connect; the TLS server name is the host name, so the
    /// server's certificate needs it as a DNS SAN.
    Name { host: String, port: u16 },
}

/// Why a string is no [`Endpoint`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{input:?} is not HOST:PORT ({reason})")]
pub struct EndpointError {
    pub input: String,
    pub reason: String,
}

impl Endpoint {
    /// The port it is reached on.
    pub fn port(&self) -> u16 {
        match self {
            Endpoint::Addr(a) => a.port(),
            Endpoint::Name { port, .. } => *port,
        }
    }

    /// The name the server's certificate must carry: the IP, or the host name.
    pub fn server_name(&self) -> String {
        match self {
            Endpoint::Addr(a) => a.ip().to_string(),
            Endpoint::Name { host, .. } => host.clone(),
        }
    }

    /// The address to connect to now: an address as it is, a name looked up within `limit`
    /// (its first IPv4 address, else its first one: `localhost` is 127.0.0.1 and ::1, and kemu's
    /// servers listen on one family).
    pub async fn resolve(&self, limit: Duration) -> Result<SocketAddr, TransportError> {
        let (host, port) = match self {
            Endpoint::Addr(a) => return Ok(*a),
            Endpoint::Name { host, port } => (host.as_str(), *port),
        };
        let failed = |source: std::io::Error| TransportError::Resolve {
            endpoint: self.to_string(),
            source,
        };
        let found = tokio::time::timeout(limit, tokio::net::lookup_host((host, port)))
            .await
            .map_err(|_| {
                failed(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("no answer within {limit:?}"),
                ))
            })?
            .map_err(failed)?
            .collect::<Vec<_>>();
        let first_v4 = found.iter().find(|a| a.is_ipv4()).copied();
        first_v4.or(found.first().copied()).ok_or_else(|| {
            failed(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the name has no address",
            ))
        })
    }
}

impl From<SocketAddr> for Endpoint {
    fn from(addr: SocketAddr) -> Self {
        Endpoint::Addr(addr)
    }
}

impl From<&SocketAddr> for Endpoint {
    fn from(addr: &SocketAddr) -> Self {
        Endpoint::Addr(*addr)
    }
}

impl From<&Endpoint> for Endpoint {
    fn from(endpoint: &Endpoint) -> Self {
        endpoint.clone()
    }
}

impl FromStr for Endpoint {
    type Err = EndpointError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Ok(addr) = s.parse::<SocketAddr>() {
            return Ok(Endpoint::Addr(addr));
        }
        let bad = |reason: &str| EndpointError {
            input: s.to_string(),
            reason: reason.to_string(),
        };
        let (host, port) = s.rsplit_once(':').ok_or_else(|| bad("no port"))?;
        let port: u16 = port
            .parse()
            .map_err(|_| bad("the port is not a number from 0 to 65535"))?;
        if host.starts_with('[') || host.contains(':') {
            return Err(bad("not an IPv6 address in brackets"));
        }
        check_host_name(host).map_err(|reason| bad(&reason))?;
        Ok(Endpoint::Name {
            host: host.to_ascii_lowercase(),
            port,
        })
    }
}

/// A DNS name as RFC 1123 has host names: dot-separated labels of letters, digits and '-',
/// neither starting nor ending with '-', 63 bytes each and 253 in all; a trailing dot allowed.
fn check_host_name(host: &str) -> Result<(), String> {
    let name = host.strip_suffix('.').unwrap_or(host);
    if name.is_empty() {
        return Err("no host".into());
    }
    if name.len() > 253 {
        return Err("the host name is longer than 253 characters".into());
    }
    for label in name.split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err(format!(
                "the host name's label {label:?} must be 1-63 characters"
            ));
        }
        if !label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            || label.starts_with('-')
            || label.ends_with('-')
        {
            return Err(format!(
                "the host name's label {label:?} must be letters, digits and '-', starting and ending with a letter or digit"
            ));
        }
    }
    // All digits and dots would be a mistyped IPv4 address, not a name.
    if name.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err("not an IPv4 address".into());
    }
    Ok(())
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Addr(a) => a.fmt(f),
            Endpoint::Name { host, port } => write!(f, "{host}:{port}"),
        }
    }
}

impl TryFrom<String> for Endpoint {
    type Error = EndpointError;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Endpoint> for String {
    fn from(endpoint: Endpoint) -> String {
        endpoint.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Endpoint, EndpointError> {
        s.parse()
    }

    #[test]
    fn addresses_and_names() {
        assert_eq!(
            parse("127.0.0.1:2379"),
            Ok(Endpoint::Addr("127.0.0.1:2379".parse().expect("addr")))
        );
        assert_eq!(
            parse("[::1]:6444").map(|e| e.server_name()),
            Ok("::1".to_string())
        );
        let name = parse("Kemu-Store-0.kemu-store.ns.svc:2380").expect("a name");
        assert_eq!(
            name,
            Endpoint::Name {
                host: "kemu-store-0.kemu-store.ns.svc".into(),
                port: 2380
            }
        );
        assert_eq!(name.to_string(), "kemu-store-0.kemu-store.ns.svc:2380");
        assert_eq!(name.server_name(), "kemu-store-0.kemu-store.ns.svc");
        assert_eq!(name.port(), 2380);
        assert_eq!(
            parse("localhost:1").map(|e| e.to_string()),
            Ok("localhost:1".into())
        );
    }

    #[test]
    fn bad_endpoints_say_why() {
        for (input, why) in [
            ("localhost", "no port"),
            ("localhost:http", "port"),
            ("localhost:70000", "port"),
            (":2379", "no host"),
            ("-a.b:1", "label \"-a\""),
            ("a..b:1", "label \"\""),
            ("a_b:1", "label \"a_b\""),
            ("::1:2379", "IPv6"),
            ("10.0.0.300:1", "IPv4"),
        ] {
            let e = parse(input).expect_err(input).to_string();
            assert!(e.contains(&format!("{input:?}")), "{e}");
            assert!(e.contains(why), "{input}: {e}");
        }
    }

    #[test]
    fn serde_is_the_string_form() {
        let e: Endpoint = serde_json::from_str("\"localhost:5\"").expect("json");
        assert_eq!(serde_json::to_string(&e).expect("json"), "\"localhost:5\"");
        assert!(serde_json::from_str::<Endpoint>("\"nope\"").is_err());
    }

    #[tokio::test]
    async fn localhost_resolves_to_loopback() {
        let e = parse("localhost:4000").expect("a name");
        let addr = e.resolve(Duration::from_secs(5)).await.expect("resolves");
        assert!(addr.ip().is_loopback(), "{addr}");
        assert_eq!(addr.port(), 4000);
        let missing = parse("no-such-host.invalid:1").expect("a name");
        let err = missing
            .resolve(Duration::from_secs(5))
            .await
            .expect_err("no such host");
        assert!(err.to_string().contains("no-such-host.invalid:1"), "{err}");
    }
}
