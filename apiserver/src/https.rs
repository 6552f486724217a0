//! The HTTP front's listeners: TLS with the cluster CA (the default), or plain TCP on
//! loopback when asked. Each connection's peer — its address and, over TLS, the user its
//! verified client certificate names — reaches every request as [`ConnectInfo<HttpPeer>`].
//!
//! TLS handshakes run in their own tasks so one slow or silent client does not hold up the
//! others' connections.
//!
//! [`ConnectInfo<HttpPeer>`]: axum::extract::ConnectInfo

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tracing::debug;

use crate::authn::UserInfo;

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
}

impl Connected<IncomingStream<'_, TlsListener>> for HttpPeer {
    fn connect_info(stream: IncomingStream<'_, TlsListener>) -> Self {
        stream.remote_addr().clone()
    }
}

impl Connected<IncomingStream<'_, TcpListener>> for HttpPeer {
    fn connect_info(stream: IncomingStream<'_, TcpListener>) -> Self {
        HttpPeer {
            addr: *stream.remote_addr(),
            certificate_user: None,
        }
    }
}

/// A TCP listener whose connections come out TLS-handshaken.
pub struct TlsListener {
    local: SocketAddr,
    ready: mpsc::Receiver<(TlsStream<TcpStream>, HttpPeer)>,
}

impl TlsListener {
    /// Starts accepting on `tcp`; stops when the listener is dropped.
    pub fn new(tcp: TcpListener, config: rustls::ServerConfig) -> std::io::Result<TlsListener> {
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
                    let _ = tx
                        .send((
                            tls,
                            HttpPeer {
                                addr,
                                certificate_user,
                            },
                        ))
                        .await;
                });
            }
        });
        Ok(TlsListener { local, ready })
    }
}

impl Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
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
        })
    }
}
