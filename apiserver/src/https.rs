//! The HTTP front's listeners: TLS with the cluster CA (the default), or plain TCP on
//! loopback when asked. Each connection's peer — its address and, over TLS, the user its
//! verified client certificate names — reaches every request as [`ConnectInfo<HttpPeer>`].
//!
//! TLS handshakes run in their own tasks so one slow or silent client does not hold up the
//! others' connections. Every connection's socket is a [`WatchedIo`] that closes it when it is
//! too slow to send a request or idle too long ([`HttpLimits`]).
//!
//! [`ConnectInfo<HttpPeer>`]: axum::extract::ConnectInfo

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tracing::debug;

use crate::authn::UserInfo;
use crate::connection_clock::{ConnectionClock, WatchedIo};
use crate::http_limits::HttpLimits;

/// How long a client may take to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Handshaken connections waiting for the server to take them.
const ACCEPT_QUEUE: usize = 1024;

/// Who is on the other end of one HTTP connection.
#[derive(Clone, Debug)]
pub struct HttpPeer {
    pub addr: SocketAddr,
    /// The user of the client certificate, when one was presented (and so verified).
    pub certificate_user: Option<Arc<UserInfo>>,
    /// The connection's timeouts, which each request pauses while it is served.
    pub clock: Option<Arc<ConnectionClock>>,
}

impl Connected<IncomingStream<'_, TlsListener>> for HttpPeer {
    fn connect_info(stream: IncomingStream<'_, TlsListener>) -> Self {
        stream.remote_addr().clone()
    }
}

impl Connected<IncomingStream<'_, PlainListener>> for HttpPeer {
    fn connect_info(stream: IncomingStream<'_, PlainListener>) -> Self {
        stream.remote_addr().clone()
    }
}

/// A plain TCP listener (`insecure_http`) whose connections keep the same time limits.
pub struct PlainListener {
    tcp: TcpListener,
    limits: HttpLimits,
}

impl PlainListener {
    pub fn new(tcp: TcpListener, limits: HttpLimits) -> PlainListener {
        PlainListener { tcp, limits }
    }
}

impl Listener for PlainListener {
    type Io = WatchedIo<TcpStream>;
    type Addr = HttpPeer;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.tcp.accept().await {
                Ok((stream, addr)) => {
                    let _ = stream.set_nodelay(true);
                    // Without ALPN a client may still speak HTTP/2 (prior knowledge); it is
                    // timed as HTTP/1.1 until its first request.
                    let clock = ConnectionClock::new(self.limits, false, Instant::now());
                    let peer = HttpPeer {
                        addr,
                        certificate_user: None,
                        clock: Some(clock.clone()),
                    };
                    return (WatchedIo::new(stream, clock), peer);
                }
                Err(e) => {
                    debug!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(HttpPeer {
            addr: self.tcp.local_addr()?,
            certificate_user: None,
            clock: None,
        })
    }
}

/// A TCP listener whose connections come out TLS-handshaken.
pub struct TlsListener {
    local: SocketAddr,
    ready: mpsc::Receiver<(WatchedIo<TlsStream<TcpStream>>, HttpPeer)>,
}

impl TlsListener {
    /// Starts accepting on `tcp`; stops when the listener is dropped.
    pub fn new(
        tcp: TcpListener,
        config: rustls::ServerConfig,
        limits: HttpLimits,
    ) -> std::io::Result<TlsListener> {
        let local = tcp.local_addr()?;
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let (tx, ready) = mpsc::channel(ACCEPT_QUEUE);
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    biased;
                    () = tx.closed() => return,
                    accepted = tcp.accept() => accepted,
                };
                let (stream, addr) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of file descriptors and the like: back off rather than spin.
                        debug!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let acceptor = acceptor.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream))
                        .await
                    {
                        Ok(Ok(tls)) => tls,
                        Ok(Err(e)) => {
                            debug!(%addr, error = %e, "TLS handshake failed");
                            return;
                        }
                        Err(_) => {
                            debug!(%addr, "TLS handshake timed out");
                            return;
                        }
                    };
                    let certificate_user = tls
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|chain| chain.first())
                        .and_then(|leaf| transport::tls::certificate_subject(leaf).ok())
                        .and_then(|(cn, organizations)| {
                            cn.map(|cn| Arc::new(UserInfo::from_certificate(&cn, &organizations)))
                        });
                    let multiplexed = tls.get_ref().1.alpn_protocol() == Some(b"h2");
                    let clock = ConnectionClock::new(limits, multiplexed, Instant::now());
                    let peer = HttpPeer {
                        addr,
                        certificate_user,
                        clock: Some(clock.clone()),
                    };
                    let _ = tx.send((WatchedIo::new(tls, clock), peer)).await;
                });
            }
        });
        Ok(TlsListener { local, ready })
    }
}

impl Listener for TlsListener {
    type Io = WatchedIo<TlsStream<TcpStream>>;
    type Addr = HttpPeer;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(connection) => connection,
            // The accept task only ends once this listener is gone.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(HttpPeer {
            addr: self.local,
            certificate_user: None,
            clock: None,
        })
    }
}
