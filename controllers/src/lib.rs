//! kemu's controller manager: the controllers that turn workload objects into pods and keep
//! the cluster's derived state (endpoints, node health, namespaces, garbage) in step.
//!
//! - [`manager`]: `ControllerManager` configuration, leader election (`api::leader_election`
//!   on the `kube-system/kube-controller-manager` Lease), shared informers, health checks, and
//!   the start of every controller.
//! - [`queue`] and [`worker`]: the rate-limited, de-duplicating work queue and the workers that
//!   reconcile its keys one at a time.
//! - [`expectations`]: creations/deletions in flight, so a slow watch never causes doubles.
//! - Controllers, each a pure decision core plus a reconciler doing the I/O: [`replicaset`]
//!   (ReplicaSets and ReplicationControllers), [`deployment`], [`daemonset`], [`statefulset`]
//!   (pods with stable names), [`revisions`] (the ControllerRevisions of StatefulSets and
//!   DaemonSets), [`job`], [`cronjob`], [`disruption`]
//!   (PodDisruptionBudgets), [`node_lifecycle`], [`endpoints`], [`namespace`],
//!   [`garbage_collector`] (with [`custom_kinds`], the custom resources it follows),
//!   [`resource_quota`], [`service_accounts`] (the `default` ServiceAccount and the
//!   `kube-root-ca.crt` ConfigMap in every namespace), [`hpa`] and [`hpa_controller`]
//!   (HorizontalPodAutoscalers, from the resource, custom and external metrics APIs),
//!   [`persistent_volume`] and [`persistent_volume_controller`] (binding, the emulated CSI
//!   driver's provisioning, expansion and reclaim, pvc- and pv-protection), [`attach_detach`]
//!   and [`attach_detach_controller`] (VolumeAttachments, the emulated driver's attacher, its
//!   CSINodes and CSIStorageCapacities).
//! - [`events`]: the events controllers record, through the manager's shared event sink;
//!   [`pod_control`]: pod creation and deletion with their events.
//! - [`metrics`]: the manager's counters, served with its health on `--metrics-addr`.

pub mod attach_detach;
pub mod attach_detach_controller;
pub mod cronjob;
pub mod custom_kinds;
pub mod daemonset;
pub mod deployment;
pub mod disruption;
pub mod endpoints;
pub mod events;
pub mod expectations;
pub mod garbage_collector;
pub mod hpa;
pub mod hpa_controller;
pub mod job;
pub mod manager;
pub mod metrics;
pub mod namespace;
pub mod node_lifecycle;
pub mod owned_pods;
pub mod owners;
pub mod persistent_volume;
pub mod persistent_volume_controller;
pub mod pod_control;
pub mod pods;
pub mod queue;
pub mod replicaset;
pub mod resource_quota;
pub mod revisions;
pub mod service_accounts;
pub mod statefulset;
pub mod statefulset_claims;
pub mod worker;

#[cfg(test)]
mod persistent_volume_tests;
#[cfg(test)]
mod test_objects;
