//! The RPC client endpoint.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::Connection;
use crate::tls::TlsIdentity;
use crate::{Endpoint, TransportError};

/// Bounds a connection attempt so an unreachable server fails instead of waiting for the idle
/// timeout. Generous, because a handshake on a starved machine can take seconds; a caller with
/// several servers to choose from should not wait for it on one (see the store client, which
/// tries the next member after a second), and one waiting for a server to come back may make
/// shorter attempts ([`RpcClient::connect_within`]).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A client endpoint presenting this process's certificate. One endpoint (one UDP socket)
/// carries any number of connections; cheap to clone.
#[derive(Clone, Debug)]
pub struct RpcClient {
    v4: quinn::Endpoint,
    /// An IPv4 socket cannot reach IPv6 servers, so an IPv6 socket is bound on first need.
    v6: Arc<Mutex<Option<quinn::Endpoint>>>,
    config: quinn::ClientConfig,
}

impl RpcClient {
    /// Binds a client endpoint on `0.0.0.0:0`. Must be called inside a Tokio runtime.
    pub fn new(identity: &TlsIdentity) -> Result<Self, TransportError> {
        Self::with_config(identity.quinn_client_config()?)
    }

    /// A client with a custom quinn configuration (see
    /// [`tls::quinn_client_config`](crate::tls::quinn_client_config)).
    pub fn with_config(config: quinn::ClientConfig) -> Result<Self, TransportError> {
        Ok(RpcClient {
            v4: bind_client(SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)))?,
            v6: Arc::new(Mutex::new(None)),
            config,
        })
    }

    /// Connects to `to`, verifying the server certificate against the cluster CA and the
    /// endpoint's IP or host name (so server certificates need it as a SAN). A host name is
    /// resolved at every connect.
    pub async fn connect(&self, to: impl Into<Endpoint>) -> Result<Connection, TransportError> {
        self.connect_within(to, CONNECT_TIMEOUT).await
    }

    /// [`connect`](Self::connect), giving up after `limit`. Nothing answers a QUIC connection
    /// attempt to a port where no process listens (UDP has no "connection refused"), and the
    /// attempt's lost Initial packets are sent again ever more rarely; a new attempt starts
    /// that sequence over.
    pub async fn connect_within(
        &self,
        to: impl Into<Endpoint>,
        limit: Duration,
    ) -> Result<Connection, TransportError> {
        let to = to.into();
        let addr = to.resolve(limit).await?;
        let endpoint = self.endpoint_for(addr)?;
        let server_name = to.server_name();
        let connecting = endpoint
            .connect_with(self.config.clone(), addr, &server_name)
            .map_err(|source| TransportError::ConnectSetup { addr, source })?;
        match tokio::time::timeout(limit, connecting).await {
            Ok(Ok(connection)) => Ok(Connection::new(connection)),
            Ok(Err(source)) => Err(TransportError::Connect { addr, source }),
            Err(_) => Err(TransportError::Timeout {
                operation: "connect",
                addr: to.to_string(),
                after: limit,
            }),
        }
    }

    fn endpoint_for(&self, addr: SocketAddr) -> Result<quinn::Endpoint, TransportError> {
        if addr.is_ipv4() {
            return Ok(self.v4.clone());
        }
        // A poisoned lock only means another thread panicked while binding; the Option
        // inside is still valid.
        let mut v6 = self.v6.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(endpoint) = v6.as_ref() {
            return Ok(endpoint.clone());
        }
        let endpoint = bind_client(SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0)))?;
        *v6 = Some(endpoint.clone());
        Ok(endpoint)
    }
}

fn bind_client(addr: SocketAddr) -> Result<quinn::Endpoint, TransportError> {
    quinn::Endpoint::client(addr).map_err(|source| TransportError::Bind { addr, source })
}
