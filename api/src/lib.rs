//! kemu's Kubernetes object model and what every component needs to talk to the API servers.
//! The API server's own machinery (request decoding, validation, patches, Table printing,
//! discovery) lives in the `apiserver` crate.
//!
//! - [`resources`]: the table of served resources (group, version, kind, plural, scope, storage).
//! - [`names`]: the syntax of names, label keys and values, with Kubernetes' messages.
//! - [`selectors`]: label and field selectors.
//! - [`quantity`]: resource quantities (`100m`, `1Gi`).
//! - [`quota`]: what a pod counts against a ResourceQuota, and its QoS class.
//! - [`volumes`]: default StorageClasses, the class of a claim or volume, requested storage.
//! - [`cron`]: CronJob schedules and time zones, parsed as Kubernetes parses them.
//! - [`protocol`]: the apiserver ⇄ component wire types (bincode frames over QUIC, objects as
//!   JSON bytes).
//! - [`client`]: [`Client`](client::Client), a component's connection to the API servers.
//! - [`event_correlator`], [`event_sink`]: client-go's event correlation (de-duplication,
//!   aggregation, spam filter) and the batching sink that writes events.
//! - [`informer`]: list-then-watch caches as explicit state machines.
//! - [`leader_election`]: leader election on a Lease (client-go's semantics), a pure core and
//!   its driver.
//! - [`node_logs`]: the API server ⇄ node host protocol of `pods/log`.

pub mod client;
pub mod cron;
pub mod event_correlator;
pub mod event_sink;
pub mod informer;
pub mod leader_election;
pub mod names;
pub mod node_logs;
pub mod protocol;
pub mod quantity;
pub mod quota;
pub mod resources;
pub mod selectors;
pub mod volumes;

pub use resources::{ResourceInfo, RESOURCES};
