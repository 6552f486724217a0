//! The server side of one RPC stream.

use std::future::Future;
use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::frame::{read_frame_limited, write_frame, FrameLimits};
use crate::TransportError;

/// One call in progress on the server, given to [`Handler::handle`](super::Handler::handle)
/// with the decoded request. Through it the handler replies once, streams responses, or
/// reads further client frames.
///
/// Dropping a `Call` finishes the response stream cleanly; a client waiting for a unary reply
/// then gets a "stream closed" error instead of hanging.
pub struct Call<Resp> {
    send: quinn::SendStream,
    recv: quinn::RecvStream,
    /// The service's limits, which further client frames are read under too.
    limits: FrameLimits,
    // fn(&Resp) keeps Call Send + Sync whatever Resp is: no Resp is ever stored.
    _response: PhantomData<fn(&Resp)>,
}

impl<Resp> std::fmt::Debug for Call<Resp> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("stream", &self.send.id())
            .finish()
    }
}

impl<Resp: Serialize> Call<Resp> {
    pub(crate) fn new(
        send: quinn::SendStream,
        recv: quinn::RecvStream,
        limits: FrameLimits,
    ) -> Self {
        Call {
            send,
            recv,
            limits,
            _response: PhantomData,
        }
    }

    /// Unary answer: sends one frame and finishes the stream.
    pub async fn reply(mut self, response: &Resp) -> Result<(), TransportError> {
        write_frame(&mut self.send, response).await?;
        self.send.finish()?;
        Ok(())
    }

    /// Server streaming: sends one more response frame.
    pub async fn send(&mut self, item: &Resp) -> Result<(), TransportError> {
        write_frame(&mut self.send, item).await
    }

    /// Ends a server-streaming response cleanly; the client's stream then yields `None`.
    pub async fn finish(mut self) -> Result<(), TransportError> {
        self.send.finish()?;
        Ok(())
    }

    /// Client streaming: the next frame from the client, or `Ok(None)` once the client
    /// finished its side. The client may wait as long as it likes before a frame, but a frame
    /// once begun must arrive within the service's frame timeout, and be no larger than its
    /// frame limit.
    pub async fn recv<T: DeserializeOwned>(&mut self) -> Result<Option<T>, TransportError> {
        read_frame_limited(&mut self.recv, self.limits, true).await
    }

    /// Resolves when the client stopped reading (it dropped its response stream) or the
    /// connection went away, so a long-running server-streaming handler knows to end.
    /// Cancel-safe: use it in `select!` next to the handler's event source.
    pub async fn closed(&mut self) {
        self.closed_signal().await;
    }

    /// Like [`closed`](Self::closed), but the future owns what it needs, so it can be held
    /// across [`send`](Self::send) calls or moved into another task.
    pub fn closed_signal(&self) -> impl Future<Output = ()> + Send + Sync + 'static {
        let stopped = self.send.stopped();
        async move {
            // Every outcome (stopped, delivered and acknowledged, connection lost) means
            // nothing more sent on this stream will be read.
            let _ = stopped.await;
        }
    }
}
