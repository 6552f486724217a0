//! The one error type of the transport crate.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Everything that can go wrong while creating certificates, loading a TLS identity, or carrying
/// an RPC over QUIC.
///
/// Variants are split by what a caller should do about them: [`is_connection_lost`] tells a
/// client that the connection is gone and it should reconnect (possibly to another server),
/// while stream-level errors (`StreamReset`, `FrameTooLarge`, `Decode`, ...) concern only the one
/// call and leave the connection usable.
///
/// [`is_connection_lost`]: TransportError::is_connection_lost
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// Reading, writing or creating a file or directory failed.
    #[error("cannot {operation} {path}: {source}")]
    File {
        /// What was being done, e.g. "read" or "create".
        operation: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A certificate or key file exists but its content is unusable.
    #[error("bad credential file {path}: {reason}")]
    BadCredential { path: PathBuf, reason: String },

    /// A [`CertSpec`](crate::pki::CertSpec) asked for something that cannot be issued.
    #[error("invalid certificate spec field `{field}`: {reason}")]
    InvalidCertSpec { field: &'static str, reason: String },

    /// rcgen refused to generate or sign a certificate.
    #[error("cannot generate {what}: {source}")]
    CertGeneration {
        what: String,
        #[source]
        source: rcgen::Error,
    },

    /// rustls rejected the TLS configuration (e.g. a key that does not match its certificate).
    #[error("TLS configuration ({context}): {source}")]
    Tls {
        context: &'static str,
        #[source]
        source: rustls::Error,
    },

    /// A TLS or QUIC configuration could not be built for a reason other than a rustls error.
    #[error("transport configuration ({context}): {reason}")]
    Config {
        context: &'static str,
        reason: String,
    },

    /// The UDP socket for an endpoint could not be bound.
    #[error("cannot bind QUIC endpoint on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },

    /// A socket operation other than binding failed (e.g. querying the local address).
    #[error("cannot {operation}: {source}")]
    Socket {
        operation: &'static str,
        #[source]
        source: std::io::Error,
    },

    /// A host name could not be resolved to an address.
    #[error("cannot resolve {endpoint}: {source}")]
    Resolve {
        endpoint: String,
        #[source]
        source: std::io::Error,
    },

    /// The connection attempt could not even start (bad server name, endpoint closed, ...).
    #[error("cannot start connecting to {addr}: {source}")]
    ConnectSetup {
        addr: SocketAddr,
        #[source]
        source: quinn::ConnectError,
    },

    /// The handshake with `addr` failed: unreachable, refused, or the certificate was rejected.
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        addr: SocketAddr,
        #[source]
        source: quinn::ConnectionError,
    },

    /// An established connection is gone (closed, reset, idle timeout, peer rejected us).
    #[error("connection lost: {0}")]
    ConnectionLost(#[source] quinn::ConnectionError),

    /// The peer reset its sending side of the stream; the call is abandoned.
    #[error("stream reset by peer (code {code})")]
    StreamReset { code: u64 },

    /// The peer stopped reading the stream, so nothing more we send will be read.
    #[error("stream stopped by peer (code {code})")]
    StreamStopped { code: u64 },

    /// The stream was already finished/reset locally, or ended where more data was required.
    #[error("stream closed: {reason}")]
    StreamClosed { reason: &'static str },

    /// A frame's length prefix exceeds [`MAX_FRAME_BYTES`](crate::frame::MAX_FRAME_BYTES).
    #[error("frame of {size} bytes exceeds the limit of {limit} bytes")]
    FrameTooLarge { size: u64, limit: usize },

    /// A frame did not arrive whole within its service's
    /// [`frame_timeout`](crate::frame::FrameLimits::frame_timeout).
    #[error("frame did not arrive within {after:?}")]
    FrameTimeout { after: Duration },

    /// The server refused this client's identity and closed the connection before reading
    /// anything from it.
    #[error("refused by the server: {reason}")]
    Refused { reason: String },

    /// The stream ended in the middle of a frame.
    #[error("truncated frame: expected {expected} bytes, got {received}")]
    TruncatedFrame { expected: usize, received: usize },

    /// A frame body is not a valid bincode encoding of the expected type.
    #[error("cannot decode frame: {message}")]
    Decode { message: String },

    /// A value could not be bincode-encoded.
    #[error("cannot encode frame: {message}")]
    Encode { message: String },

    /// An operation did not complete in time.
    #[error("{operation} with {addr} timed out after {after:?}")]
    Timeout {
        operation: &'static str,
        /// The endpoint as it was named (an address or `host:port`).
        addr: String,
        after: Duration,
    },
}

impl TransportError {
    /// True when the connection (or the attempt to make one) is unusable and the caller should
    /// reconnect, possibly to another server. Stream-level errors return false: the connection
    /// that produced them still carries other calls.
    pub fn is_connection_lost(&self) -> bool {
        matches!(
            self,
            TransportError::ConnectionLost(_)
                | TransportError::Connect { .. }
                | TransportError::Resolve { .. }
                | TransportError::Timeout { .. }
                | TransportError::Refused { .. }
        )
    }

    /// True when the server refused who this client is: another attempt, or another server
    /// with the same policy, is refused the same way.
    pub fn is_refused(&self) -> bool {
        matches!(self, TransportError::Refused { .. })
    }
}

/// A connection the server closed with [`codes::REFUSED`](crate::rpc::codes::REFUSED) becomes
/// [`TransportError::Refused`] with the server's reason; anything else is a lost connection.
fn connection_error(err: quinn::ConnectionError) -> TransportError {
    match &err {
        quinn::ConnectionError::ApplicationClosed(close)
            if close.error_code == crate::rpc::codes::REFUSED =>
        {
            TransportError::Refused {
                reason: String::from_utf8_lossy(&close.reason).into_owned(),
            }
        }
        _ => TransportError::ConnectionLost(err),
    }
}

impl From<quinn::ConnectionError> for TransportError {
    fn from(err: quinn::ConnectionError) -> Self {
        connection_error(err)
    }
}

impl From<quinn::WriteError> for TransportError {
    fn from(err: quinn::WriteError) -> Self {
        match err {
            quinn::WriteError::Stopped(code) => TransportError::StreamStopped {
                code: code.into_inner(),
            },
            quinn::WriteError::ConnectionLost(e) => connection_error(e),
            quinn::WriteError::ClosedStream => TransportError::StreamClosed {
                reason: "write on a finished or reset stream",
            },
            quinn::WriteError::ZeroRttRejected => TransportError::StreamClosed {
                reason: "0-RTT data rejected",
            },
        }
    }
}

impl From<quinn::ReadError> for TransportError {
    fn from(err: quinn::ReadError) -> Self {
        match err {
            quinn::ReadError::Reset(code) => TransportError::StreamReset {
                code: code.into_inner(),
            },
            quinn::ReadError::ConnectionLost(e) => connection_error(e),
            quinn::ReadError::ClosedStream => TransportError::StreamClosed {
                reason: "read on a stopped or finished stream",
            },
            quinn::ReadError::IllegalOrderedRead => TransportError::StreamClosed {
                reason: "ordered read after unordered read",
            },
            quinn::ReadError::ZeroRttRejected => TransportError::StreamClosed {
                reason: "0-RTT data rejected",
            },
        }
    }
}

impl From<quinn::ClosedStream> for TransportError {
    fn from(_: quinn::ClosedStream) -> Self {
        TransportError::StreamClosed {
            reason: "stream already finished or reset",
        }
    }
}

impl From<quinn::StoppedError> for TransportError {
    fn from(err: quinn::StoppedError) -> Self {
        match err {
            quinn::StoppedError::ConnectionLost(e) => connection_error(e),
            quinn::StoppedError::ZeroRttRejected => TransportError::StreamClosed {
                reason: "0-RTT data rejected",
            },
        }
    }
}
