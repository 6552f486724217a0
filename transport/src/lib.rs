//! Authenticated RPC between kemu processes: mutual TLS over QUIC, one stream per call.
//!
//! The parts, bottom up:
//! - [`pki`] creates the cluster CA and issues certificates whose CN and O name a user or node
//!   and its groups.
//! - [`tls`] loads a process's [`TlsIdentity`](tls::TlsIdentity) and builds the rustls and
//!   quinn configurations (TLS 1.3, ring, client certificates required).
//! - [`endpoint`]: a server's address as flags name it, an IP or a DNS name resolved at each
//!   connect.
//! - [`frame`] is the wire format: a `u32` length prefix and a bincode body.
//! - [`rpc`] is the call layer: [`RpcServer`](rpc::RpcServer) dispatches each stream to a
//!   [`Handler`](rpc::Handler); [`RpcClient`](rpc::RpcClient) connects and makes unary,
//!   server-streaming and client-streaming calls over a [`Connection`](rpc::Connection).
//!
//! All failures are a [`TransportError`].

pub mod endpoint;
mod error;
pub mod frame;
pub mod pki;
pub mod ports;
pub mod rpc;
mod subject;
pub mod tls;

pub use endpoint::Endpoint;
pub use error::TransportError;
