//! kemu's Kubernetes object model and the API machinery shared by the API server and the
//! components.
//!
//! - [`resources`]: the table of served resources (group, version, kind, plural, scope, storage).
//! - [`strict`]: typed decoding of objects (k8s-openapi v1_37) with unknown-field detection.
//! - [`validation`]: object validation with Kubernetes' field-path causes.
//! - [`selectors`]: label and field selectors.
//! - [`quantity`]: resource quantities (`100m`, `1Gi`).
//! - [`patch`]: JSON merge patch, JSON patch, strategic merge patch and server-side apply.
//! - [`printers`]: `meta.k8s.io/v1` Table rows with kubectl's columns.
//! - [`discovery`]: `/api`, `/apis` and group-version discovery documents, and the minimal
//!   OpenAPI v3 that kubectl's validation needs.
//! - [`protobuf`]: Kubernetes protobuf request bodies (what client-go's typed clients send)
//!   decoded into JSON.
//! - [`protocol`]: the apiserver ⇄ component wire types (bincode frames over QUIC, objects as
//!   JSON bytes).
//! - [`client`]: [`Client`](client::Client), a component's connection to the API servers.
//! - [`informer`]: list-then-watch caches as explicit state machines.
//! - [`leader_election`]: leader election on a Lease (client-go's semantics), a pure core and
//!   its driver.
//! - [`node_logs`]: the API server ⇄ node host protocol of `pods/log`.

pub mod client;
pub mod discovery;
pub mod event_sink;
pub mod informer;
pub mod leader_election;
pub mod node_logs;
pub mod patch;
pub mod printers;
pub mod protobuf;
pub mod protocol;
pub mod quantity;
pub mod quota;
pub mod resources;
pub mod selectors;
pub mod strict;
pub mod validation;

pub use resources::{ResourceInfo, RESOURCES};
