//! A client's connection to one server.

use std::net::SocketAddr;

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

    /// The underlying quinn connection, for tests and diagnostics (RTT, stats).
    pub fn raw(&self) -> &quinn::Connection {
        &self.inner
    }

    async fn open<Req: Serialize>(
        &self,
        first: &Req,
    ) -> Result<(quinn::SendStream, quinn::RecvStream), TransportError> {
        let (mut send, recv) = self
            .inner
            .open_bi()
            .await
            .map_err(TransportError::ConnectionLost)?;
        write_frame(&mut send, first).await?;
        Ok((send, recv))
    }
}
