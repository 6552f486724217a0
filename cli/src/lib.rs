//! The `kemu` command's parts. The binary is thin: clap, tracing, then one of these.
//!
//! - [`apiserver_cmd`]: `kemu apiserver`, one API server replica.
//! - [`certs`]: `kemu certs`, the cluster CA and component certificates.
//! - [`chaos`]: `kemu chaos`, faults on a schedule and the checks that nothing was lost.
//! - [`store_member`]: `kemu store`, one member of the replicated store (the etcd stand-in).
//! - [`load`]: pod create/delete throughput and latency; [`load_cmd`]: `kemu load`.
//! - [`launcher`]: `kemu up`, `down`, `status`, `run`: whole clusters from a config file.
//! - [`scheduler_cmd`]: `kemu scheduler`, one scheduler replica, and `kemu bench scheduler`.
//! - [`node_host_cmd`]: `kemu node-host`, N emulated kubelets in one process.
//! - [`controllers_cmd`]: `kemu controllers`, the controller manager (leader-elected).
//! - [`kv`]: `kemu kv`, an etcdctl-like client for the store.
//! - [`bench`]: `kemu bench store`, one load generator for kemu's store and real etcd.
//! - [`bench_api`]: `kemu bench apiserver`, pod creates over HTTP and watch fan-out over QUIC.
//! - [`cluster_proc`]: local multi-process clusters (kemu store, etcd) for benchmarks and tests.
//! - [`shutdown`]: stopping cleanly on SIGTERM or Ctrl-C.

pub mod api_access;
pub mod apiserver_cmd;
pub mod bench;
pub mod bench_api;
pub mod bench_sched;
pub mod certs;
pub mod chaos;
pub mod chaos_cmd;
pub mod cluster_proc;
pub mod controllers_cmd;
pub mod kv;
pub mod launcher;
pub mod load;
pub mod load_cmd;
pub mod node_host_cmd;
pub mod scheduler_cmd;
pub mod shutdown;
pub mod store_member;
