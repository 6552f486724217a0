//! The client side of a client-streaming call.

use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::frame::{read_frame, write_frame};
use crate::TransportError;

/// Sends further frames of a client-streaming call (e.g. snapshot chunks).
pub struct FrameSink<T> {
    send: quinn::SendStream,
    recv: quinn::RecvStream,
    _item: PhantomData<fn(&T)>,
}

impl<T> std::fmt::Debug for FrameSink<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameSink")
            .field("stream", &self.send.id())
            .finish()
    }
}

impl<T: Serialize> FrameSink<T> {
    pub(crate) fn new(send: quinn::SendStream, recv: quinn::RecvStream) -> Self {
        FrameSink {
            send,
            recv,
            _item: PhantomData,
        }
    }

    /// Sends one more frame.
    pub async fn send(&mut self, item: &T) -> Result<(), TransportError> {
        write_frame(&mut self.send, item).await
    }

    /// Ends the stream and waits until the server has received every frame (not necessarily
    /// processed them). Fails if the server stopped reading early.
    pub async fn finish(mut self) -> Result<(), TransportError> {
        self.send.finish()?;
        match self.send.stopped().await? {
            None => Ok(()),
            Some(code) => Err(TransportError::StreamStopped {
                code: code.into_inner(),
            }),
        }
    }

    /// Ends the stream and waits for the server's single reply frame (sent with
    /// [`Call::reply`](super::Call::reply)), e.g. to learn that a snapshot was applied.
    pub async fn finish_with_reply<R: DeserializeOwned>(mut self) -> Result<R, TransportError> {
        self.send.finish()?;
        match read_frame(&mut self.recv).await? {
            Some(reply) => Ok(reply),
            None => Err(TransportError::StreamClosed {
                reason: "server finished the call without a reply",
            }),
        }
    }
}
