//! kemu's node host: thousands of emulated kubelets in one process.
//!
//! - [`host`]: [`host::run`] — an actix system carrying N kubelets over one shared API
//!   connection, the log service and metrics.
//! - [`kubelet`]: [`Kubelet`](kubelet::Kubelet), one emulated node as an actor: registration,
//!   lease, node status, its pod watch, and the driver of its pods' lifecycles.
//! - [`lifecycle`]: the pod lifecycle as a pure state machine (inputs + now → commands).
//! - [`claim_volumes`]: the wait for a pod's claims to be bound and their volumes attached.
//! - [`runtime`]: one node's emulated CRI runtime state (images, pod IPs, admitted resources,
//!   latencies).
//! - [`process`]: what an emulated container process does, from its command and args.
//! - [`logs`]: container output and the QUIC service behind `kubectl logs`.
//! - [`static_pods`]: manifests directory → mirror pods.
//! - [`volume_sources`]: the ConfigMaps and Secrets the pods mount, one shared watch each.
//! - [`node_object`]: the Node, its status and its Lease.
//! - [`own_nodes`]: one watch of the host's Nodes; a kubelet whose Node the server holds not
//!   Ready posts its status at once.
//! - [`api_time`]: time as the Kubernetes API writes it.
//! - [`addressing`]: podCIDRs, node InternalIPs and pod IPs from the cluster's ranges
//!   (IPv4, IPv6, dual-stack).
//! - [`config`]: [`NodeHostConfig`](config::NodeHostConfig) and the runtime latency profiles.
//! - [`metrics`]: counters and lease timeliness as Prometheus text.

pub mod addressing;
pub mod api_time;
pub mod claim_volumes;
pub mod config;
pub mod host;
pub mod kubelet;
pub mod lifecycle;
pub mod logs;
pub mod metrics;
pub mod node_object;
pub mod own_nodes;
pub mod process;
pub mod runtime;
pub mod static_pods;
pub mod volume_sources;
