//! A client's connection to one server.

use std::net::SocketAddr;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{codes, FrameSink, ResponseStream};
use crate::frame::{read_frame, write_frame};
use crate::TransportError;

/// An established mTLS QUIC connection. Cheap to clone; every clone shares the connection,
/// and calls on it run concurrently, each on its own stream.
#[derive(Clone, Debug)]
pub struct Connection {
    inner: quinn::Connection,
}

impl Connection {
    pub(crate) fn new(inner: quinn::Connection) -> Self {
        Connection { inner }
    }

    /// One request, one response.
    pub async fn unary<Req: Serialize, Resp: DeserializeOwned>(
        &self,
        request: &Req,
    ) -> Result<Resp, TransportError> {
        let (mut send, mut recv) = self.open(request).await?;
        send.finish()?;
        match read_frame(&mut recv).await? {
            Some(response) => Ok(response),
            None => Err(TransportError::StreamClosed {
                reason: "server finished the call without a response",
            }),
        }
    }

    /// One request, then a stream of responses (e.g. a watch). Drop the returned stream to
    /// cancel the call.
    pub async fn server_stream<Req: Serialize, Resp: DeserializeOwned>(
        &self,
        request: &Req,
    ) -> Result<ResponseStream<Resp>, TransportError> {
        let (mut send, recv) = self.open(request).await?;
        send.finish()?;
        Ok(ResponseStream::new(recv))
    }

    /// Opens a call and sends `first`; more frames follow through the returned sink.
    pub async fn client_stream<Req: Serialize>(
        &self,
        first: &Req,
    ) -> Result<FrameSink<Req>, TransportError> {
        let (send, recv) = self.open(first).await?;
        Ok(FrameSink::new(send, recv))
    }

    /// True once the connection is closed for any reason; the caller should reconnect.
    pub fn is_closed(&self) -> bool {
        self.inner.close_reason().is_some()
    }

    /// The server's address.
    pub fn remote_address(&self) -> SocketAddr {
        self.inner.remote_address()
    }

    /// Closes the connection; calls in flight fail with a connection-lost error.
    pub fn close(&self) {
        self.inner.close(codes::CANCELLED, b"closed by client");
    }

    /// Resolves with `true` once the peer has been silent — no datagram received from it — for
    /// `after` while this process kept time, or with `false` when the connection closes first.
    ///
    /// A live peer answers the keep-alive sent every [`KEEP_ALIVE`](crate::tls::KEEP_ALIVE) on a
    /// quiet connection, and a busy connection has traffic anyway, so silence means the peer is
    /// gone (killed, cut off) or stalled — long before quinn's idle timeout says so. Time when
    /// this task itself was not run (this process starved of CPU) does not count as silence:
    /// the datagrams may be waiting unread in the socket.
    pub async fn silent_for(&self, after: Duration) -> bool {
        let step = (after / 4).max(Duration::from_millis(10));
        let mut ticks = tokio::time::interval(step);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut received = self.inner.stats().udp_rx.datagrams;
        let mut quiet_since = tokio::time::Instant::now();
        let mut last_tick = quiet_since;
        loop {
            tokio::select! {
                _ = self.inner.closed() => return false,
                now = ticks.tick() => {
                    let count = self.inner.stats().udp_rx.datagrams;
                    // A late tick means this process was not scheduled: judge nothing from it.
                    if count != received || now.duration_since(last_tick) > step * 2 {
                        received = count;
                        quiet_since = now;
                    } else if now.duration_since(quiet_since) >= after {
                        return true;
                    }
                    last_tick = now;
                }
            }
        }
    }

    /// Closes the connection because its peer went silent (see [`silent_for`](Self::silent_for));
    /// calls in flight fail with a connection-lost error.
    pub fn close_silent(&self) {
        self.inner.close(codes::PEER_SILENT, b"peer silent");
    }

    /// The underlying quinn connection, for tests and diagnostics (RTT, stats).
    pub fn raw(&self) -> &quinn::Connection {
        &self.inner
    }

    async fn open<Req: Serialize>(
        &self,
        first: &Req,
    ) -> Result<(quinn::SendStream, quinn::RecvStream), TransportError> {
        let (mut send, recv) = self.inner.open_bi().await.map_err(TransportError::from)?;
        write_frame(&mut send, first).await?;
        Ok((send, recv))
    }
}
