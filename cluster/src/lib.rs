//! A kemu cluster as processes: its config, where each process runs, starting and supervising
//! them, and reaching them.
//!
//! - [`config`]: the cluster config (TOML) and its validation.
//! - [`layout`]: the config resolved into hosts, addresses and command lines; the cluster
//!   directory (certs, kubeconfig, data, logs, pids).
//! - [`launcher`]: `kemu up` and `down`: a fresh cluster directory, its supervisor in the
//!   foreground or the background, and stopping it all.
//! - [`supervisor`]: starts the processes stage by stage and restarts crashed ones.
//! - [`state`]: `state.json`, the supervisor's account of every process.
//! - [`netns`]: hosts as network namespaces on a private bridge.
//! - [`probe`]: store leader, API readiness, nodes Ready, pods by phase.
//! - [`status`]: `kemu status`.
//! - [`certs`]: the cluster CA and a certificate per component identity.
//! - [`process`]: free ports, signals, and the small local clusters of benchmarks and tests
//!   ([`process::LocalStore`], [`process::LocalApiServer`]).
//! - [`api_access`]: reaching an API server's HTTPS front with the cluster's CA and a credential.
//! - [`shutdown`]: stopping cleanly on SIGTERM or Ctrl-C.
//! - [`render`]: `kemu render`, the cluster as Kubernetes manifests (StatefulSets, Deployments,
//!   Services, Secrets with certificates for the in-cluster DNS names).

pub mod api_access;
pub mod certs;
pub mod config;
pub mod kube_http;
pub mod launcher;
pub mod layout;
pub mod netns;
pub mod probe;
pub mod process;
pub mod render;
pub mod shutdown;
pub mod state;
pub mod status;
pub mod supervisor;
