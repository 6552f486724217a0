//! The API server ⇄ node host protocol of `pods/log`: the API server finds the pod's node, reads
//! the node host's log address from the Node's [`NODE_HOST_LOGS_ANNOTATION`], and asks it over
//! mutual-TLS QUIC with one [`LogRequest`]; the node host answers with a stream of
//! [`LogResponse::Chunk`]s (lines of text), or one [`LogResponse::Error`].

use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// The Node annotation carrying the QUIC address of the node host that runs the node.
pub const NODE_HOST_LOGS_ANNOTATION: &str = "kemu.dev/node-host-logs";

/// `GET pods/{name}/log` with its query (PodLogOptions).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogRequest {
    pub namespace: String,
    pub pod: String,
    /// Resolved by the API server (the only container, or the one asked for).
    pub container: String,
    /// Keep streaming new lines until the container exits or the client goes away.
    pub follow: bool,
    /// Only the last N lines.
    pub tail_lines: Option<i64>,
    /// The previous (terminated) instance of a restarted container.
    pub previous: bool,
    /// Prefix each line with its RFC 3339 time.
    pub timestamps: bool,
    /// Stop after this many bytes.
    pub limit_bytes: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LogResponse {
    /// Whole lines, each ending in a newline.
    Chunk(Bytes),
    /// The request cannot be served; `code` as the HTTP API would answer.
    Error { code: u16, message: String },
}
