//! kemu's benchmarks (`kemu bench`), each against real processes on this machine:
//!
//! - [`store`]: `kemu bench store`, one load generator for kemu's store and, side by side, real
//!   etcd ([`etcd`]: etcd members as local processes).
//! - [`apiserver`]: `kemu bench apiserver`, pod creates over HTTP and watch fan-out over QUIC.
//! - [`scheduler`]: `kemu bench scheduler`, the decision core alone, or the whole path through
//!   a real API server and store.

pub mod apiserver;
pub mod etcd;
pub mod scheduler;
pub mod store;
