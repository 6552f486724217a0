//! The client side of a server-streaming call.

use std::marker::PhantomData;

use serde::de::DeserializeOwned;

use super::codes;
use crate::frame::read_frame;
use crate::TransportError;

/// Responses of a server-streaming call, in order. Dropping it before the end tells the server
/// to stop (its [`Call::closed`](super::Call::closed) resolves).
pub struct ResponseStream<Resp> {
    recv: quinn::RecvStream,
    /// Set after the end or an error, so `next` keeps returning `None` and drop sends nothing.
    done: bool,
    _response: PhantomData<fn() -> Resp>,
}

impl<Resp> std::fmt::Debug for ResponseStream<Resp> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseStream")
            .field("stream", &self.recv.id())
            .field("done", &self.done)
            .finish()
    }
}

impl<Resp: DeserializeOwned> ResponseStream<Resp> {
    pub(crate) fn new(recv: quinn::RecvStream) -> Self {
        ResponseStream {
            recv,
            done: false,
            _response: PhantomData,
        }
    }

    /// The next response; `None` once the server finished the stream cleanly. After an error
    /// the stream is over and further calls return `None`.
    pub async fn next(&mut self) -> Option<Result<Resp, TransportError>> {
        if self.done {
            return None;
        }
        match read_frame(&mut self.recv).await {
            Ok(Some(item)) => Some(Ok(item)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

impl<Resp> Drop for ResponseStream<Resp> {
    fn drop(&mut self) {
        if !self.done {
            // quinn would also stop an unread stream on drop; saying it explicitly keeps the
            // cancellation contract visible and independent of quinn's drop behavior.
            let _ = self.recv.stop(codes::CANCELLED);
        }
    }
}
