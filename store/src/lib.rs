//! kemu's store: the etcd stand-in.
//!
//! - [`types`]: the data model and wire protocol (etcd v3's KV, Watch and Lease shapes).
//! - [`mvcc`]: the pure multi-version state machine that raft entries are applied to.
//! - [`watch_hub`]: fan-out of applied events to registered watchers; slow watchers are cancelled.
//! - [`raft_log`]: the durable raft log, hard state and snapshots on disk (`raft::Storage`).
//! - [`config`]: a member's settings and their validation.
//! - [`member`]: one store member: the raft `RawNode` driver, proposals, ReadIndex and leases.
//! - [`metrics`] and [`health`]: the member's Prometheus metrics (etcd's names) and its
//!   `/healthz`, `/livez` and `/readyz` checks, served through the `telemetry` crate.
//! - [`raft_trace`]: raft-rs's own log records, handed to `tracing`.
//! - [`service`]: the member's QUIC services (client API and raft peer links).
//! - [`grpc`]: etcd's v3 gRPC API, a second client front beside the QUIC one.
//! - `peer_backlog`: what a peer link that fell behind still sends of its queued raft messages.
//! - [`client`]: [`Client`], which talks to any member and follows retries.
//! - `testing` (feature `testing`): N members' raft drivers wired by message passing in one
//!   process, with links to cut and members to crash and restart, for failover tests.

pub mod client;
pub mod config;
pub mod grpc;
pub mod health;
pub mod member;
pub mod metrics;
pub mod mvcc;
mod peer_backlog;
pub mod raft_log;
pub mod raft_trace;
pub mod service;
#[cfg(feature = "testing")]
pub mod testing;
pub mod types;
pub mod watch_hub;

pub use client::Client;

pub use types::*;
