//! The RPC server: accepts connections and turns each stream into a [`Handler`] call.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::CertificateDer;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tracing::{debug, info_span, warn, Instrument};

use super::{codes, Call};
use crate::frame::{read_frame_limited, FrameLimits};
use crate::subject::SubjectName;
use crate::tls::TlsIdentity;
use crate::TransportError;

/// How long shutdown waits for connections to be closed cleanly before giving up.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// The least time between two stateless resets the endpoint sends (quinn's default is 20 ms).
/// A reset is always smaller than the packet that caused it, so resets cannot loop or amplify.
const MIN_RESET_INTERVAL: Duration = Duration::from_millis(1);

/// Who is calling, from the verified client certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    /// The CN of the client's certificate: a user or node name.
    pub name: String,
    /// The O values of the client's certificate, used as groups.
    pub organizations: Vec<String>,
    pub addr: SocketAddr,
}

/// Serves the calls of one service. One value handles every stream of every connection, so it
/// is shared (`Arc`) and must be `Sync`.
pub trait Handler: Send + Sync + 'static {
    /// The first frame of each stream.
    type Request: DeserializeOwned + Send + 'static;
    /// What the handler sends back through the [`Call`].
    type Response: Serialize + Send + Sync + 'static;

    /// Handles one call. Runs in its own task; returning (or dropping `call`) finishes the
    /// response stream.
    fn handle(
        &self,
        peer: Peer,
        request: Self::Request,
        call: Call<Self::Response>,
    ) -> impl Future<Output = ()> + Send;

    /// Whether `peer` may call this service at all, decided once per connection before any of
    /// its streams is read: a refused peer's connection is closed with
    /// [`codes::REFUSED`](super::codes::REFUSED) and the returned reason, so a certificate the
    /// service will not serve cannot make it buffer a byte. The default admits every peer the
    /// handshake verified.
    fn admit(&self, peer: &Peer) -> Result<(), String> {
        let _ = peer;
        Ok(())
    }

    /// How large this service's request frames may be and how long they may take to arrive.
    fn limits(&self) -> FrameLimits {
        FrameLimits::default()
    }

    /// The answer to a first frame whose length prefix is over
    /// [`limits`](Self::limits)`.max_frame_bytes`, sent without reading its body; `None` resets
    /// the stream instead.
    fn too_large(&self, size: u64, limit: usize) -> Option<Self::Response> {
        let _ = (size, limit);
        None
    }
}

/// A bound QUIC endpoint requiring cluster client certificates; call [`serve`](Self::serve)
/// to start accepting.
#[derive(Debug)]
pub struct RpcServer {
    endpoint: quinn::Endpoint,
}

impl RpcServer {
    /// Binds the UDP socket. Clients must present a certificate signed by the cluster CA; one
    /// without is refused during the handshake. Must be called inside a Tokio runtime.
    ///
    /// Stateless resets and connection IDs are made with keys derived from the identity's
    /// private key ([`TlsIdentity::stateless_reset_key`], [`TlsIdentity::connection_id_key`]),
    /// so a server restarted on the same address ends its predecessor's connections at their
    /// next packet.
    pub fn bind(addr: SocketAddr, identity: &TlsIdentity) -> Result<Self, TransportError> {
        let config = identity.quinn_server_config()?;
        let mut endpoint_config = quinn::EndpointConfig::new(identity.stateless_reset_key());
        let cid_key = identity.connection_id_key();
        endpoint_config.cid_generator(move || {
            Box::new(quinn_proto::HashedConnectionIdGenerator::from_key(cid_key))
        });
        // quinn sends at most one reset per interval for the whole endpoint; after a restart
        // every client of the old process needs one, each within a keep-alive or two.
        endpoint_config.min_reset_interval(MIN_RESET_INTERVAL);
        let bind_error = |source| TransportError::Bind { addr, source };
        let socket = std::net::UdpSocket::bind(addr).map_err(bind_error)?;
        let runtime = quinn::default_runtime()
            .ok_or_else(|| bind_error(std::io::Error::other("no async runtime found")))?;
        let endpoint = quinn::Endpoint::new(endpoint_config, Some(config), socket, runtime)
            .map_err(bind_error)?;
        Ok(RpcServer { endpoint })
    }

    /// The bound address (useful after binding port 0).
    pub fn local_addr(&self) -> Result<SocketAddr, TransportError> {
        let addr = self
            .endpoint
            .local_addr()
            .map_err(|source| TransportError::Socket {
                operation: "query the server's local address",
                source,
            })?;
        Ok(addr)
    }

    /// Accepts connections until `shutdown` resolves, then closes every connection and waits
    /// briefly for the close to reach peers.
    pub async fn serve<H: Handler>(
        self,
        handler: Arc<H>,
        shutdown: impl Future<Output = ()> + Send,
    ) {
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                biased;
                () = &mut shutdown => break,
                incoming = self.endpoint.accept() => match incoming {
                    Some(incoming) => {
                        if let Some(incoming) = validated(incoming) {
                            tokio::spawn(serve_connection(incoming, handler.clone()));
                        }
                    }
                    None => break,
                },
            }
        }
        self.endpoint
            .close(codes::SHUTDOWN, b"server shutting down");
        if tokio::time::timeout(SHUTDOWN_GRACE, self.endpoint.wait_idle())
            .await
            .is_err()
        {
            debug!("QUIC endpoint not idle after {SHUTDOWN_GRACE:?}; dropping it");
        }
    }
}

/// The connection attempt to accept, once its client has shown it receives what is sent to its
/// address: an Initial packet from an address not yet validated is answered with a Retry
/// (stateless: no connection is made), and the client sends its hello again at once with the
/// Retry's token, at the cost of one round trip (QUIC address validation, RFC 9000 §8.1.2).
///
/// Besides keeping spoofed addresses from making the server hold state, this keeps a
/// connection from being made of a packet that only closes it. A client that gives up an
/// attempt no server answered yet (see
/// [`RpcClient::connect_within`](super::RpcClient::connect_within)) closes it in an Initial
/// packet, and when that packet is the first a newly bound server receives of the attempt,
/// quinn makes a connection of it that is closed from the start and never arms its drain timer:
/// the connection would linger until the idle timeout, and the endpoint and its UDP port with
/// it, long after shutdown.
fn validated(incoming: quinn::Incoming) -> Option<quinn::Incoming> {
    if incoming.remote_address_validated() {
        return Some(incoming);
    }
    match incoming.retry() {
        Ok(()) => None,
        // Only an attempt that already carries a Retry token may not be retried again.
        Err(e) => Some(e.into_incoming()),
    }
}

async fn serve_connection<H: Handler>(incoming: quinn::Incoming, handler: Arc<H>) {
    let remote = incoming.remote_address();
    let connection = match incoming.await {
        Ok(connection) => connection,
        Err(e) => {
            // Includes clients without an acceptable certificate.
            warn!(%remote, error = %e, "QUIC handshake failed");
            return;
        }
    };
    let peer = match peer_of(&connection) {
        Ok(peer) => peer,
        Err(reason) => {
            warn!(%remote, %reason, "cannot identify client certificate; closing");
            connection.close(codes::BAD_PEER, b"unreadable client certificate");
            return;
        }
    };
    if let Err(reason) = handler.admit(&peer) {
        warn!(%remote, peer = %peer.name, %reason, "refusing a client; closing its connection");
        connection.close(codes::REFUSED, reason.as_bytes());
        return;
    }
    let span = info_span!("rpc_connection", peer = %peer.name, addr = %peer.addr);
    async move {
        debug!("connection established");
        loop {
            match connection.accept_bi().await {
                Ok((send, recv)) => {
                    let stream_span = info_span!("rpc_stream", stream = %send.id());
                    tokio::spawn(
                        serve_stream(send, recv, peer.clone(), handler.clone())
                            .instrument(stream_span),
                    );
                }
                Err(e) => {
                    debug!(error = %e, "connection ended");
                    break;
                }
            }
        }
    }
    .instrument(span)
    .await;
}

async fn serve_stream<H: Handler>(
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    peer: Peer,
    handler: Arc<H>,
) {
    let limits = handler.limits();
    let request = match read_frame_limited::<H::Request>(&mut recv, limits, false).await {
        Ok(Some(request)) => request,
        // The client opened a stream and finished it without a request: nothing to do.
        Ok(None) => return,
        Err(e) if e.is_connection_lost() => {
            debug!(error = %e, "connection lost before the request arrived");
            return;
        }
        Err(TransportError::FrameTooLarge { size, limit }) => {
            warn!(peer = %peer.name, addr = %peer.addr, size, limit, "request frame over the limit; not reading it");
            let _ = recv.stop(codes::BAD_FRAME);
            match handler.too_large(size, limit) {
                Some(answer) => {
                    let _ = Call::new(send, recv, limits).reply(&answer).await;
                }
                None => {
                    let _ = send.reset(codes::BAD_FRAME);
                }
            }
            return;
        }
        Err(e) => {
            let code = match e {
                TransportError::FrameTimeout { .. } => codes::FRAME_TIMEOUT,
                _ => codes::BAD_FRAME,
            };
            warn!(peer = %peer.name, addr = %peer.addr, error = %e, "bad request frame; resetting stream");
            // Only this stream is abandoned; the connection and its other calls go on.
            let _ = recv.stop(code);
            let _ = send.reset(code);
            return;
        }
    };
    handler
        .handle(peer, request, Call::new(send, recv, limits))
        .await;
}

/// Reads the verified client certificate's CN and O. The handshake already checked the chain,
/// so a failure here means a certificate we can verify but not read.
fn peer_of(connection: &quinn::Connection) -> Result<Peer, String> {
    let identity = connection.peer_identity().ok_or("no client certificate")?;
    let chain = identity
        .downcast::<Vec<CertificateDer<'static>>>()
        .map_err(|_| "peer identity is not an X.509 chain")?;
    let leaf = chain.first().ok_or("empty client certificate chain")?;
    let subject = SubjectName::from_certificate(leaf)?;
    Ok(Peer {
        name: subject
            .common_name()
            .ok_or("client certificate has no CN")?,
        organizations: subject.organizations(),
        addr: connection.remote_address(),
    })
}
