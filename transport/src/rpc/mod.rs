//! RPC over QUIC: each call is one bidirectional stream carrying [frames](crate::frame).
//!
//! The client opens a stream and sends the request frame; the server decodes it and hands it
//! to a [`Handler`] together with a [`Call`], through which the handler answers with one frame
//! (unary), many frames (server streaming, e.g. watches), or reads more frames from the client
//! (client streaming, e.g. snapshots). Streams are independent: a bad frame resets its own
//! stream and nothing else.

mod call;
mod client;
mod connection;
mod frame_sink;
mod response_stream;
mod server;

pub use call::Call;
pub use client::{RpcClient, CONNECT_TIMEOUT};
pub use connection::Connection;
pub use frame_sink::FrameSink;
pub use response_stream::ResponseStream;
pub use server::{Handler, Peer, RpcServer};

/// Stream error codes sent in RESET_STREAM / STOP_SENDING.
pub mod codes {
    use quinn::VarInt;

    /// The reader is no longer interested (a dropped [`ResponseStream`](super::ResponseStream)).
    pub const CANCELLED: VarInt = VarInt::from_u32(0);
    /// The request frame was oversized, truncated or undecodable.
    pub const BAD_FRAME: VarInt = VarInt::from_u32(1);
    /// The whole endpoint is shutting down (connection close code).
    pub const SHUTDOWN: VarInt = VarInt::from_u32(2);
    /// The peer's certificate could not be read (connection close code).
    pub const BAD_PEER: VarInt = VarInt::from_u32(3);
    /// The client gave up on a peer that stopped answering keep-alives (connection close code).
    pub const PEER_SILENT: VarInt = VarInt::from_u32(4);
    /// The service does not serve the client's identity (connection close code; the reason
    /// says why).
    pub const REFUSED: VarInt = VarInt::from_u32(5);
    /// The request frame did not arrive within the service's frame timeout.
    pub const FRAME_TIMEOUT: VarInt = VarInt::from_u32(6);
}
