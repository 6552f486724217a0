//! The kemu API server: the Kubernetes REST API over the kemu store.
//!
//! - [`admission`]: the admission plugins every write goes through (NamespaceLifecycle,
//!   LimitRanger, ServiceAccount, NodeRestriction, PodSecurity, Priority, DefaultTolerationSeconds,
//!   DefaultStorageClass, StorageObjectInUseProtection, PersistentVolumeClaimResize, ResourceQuota).
//! - [`authn`]: who is asking (client certificates, bearer tokens); [`authz`]: may they
//!   (`system:masters`, the node authorizer, RBAC), with the bootstrap policy.
//! - [`https`]: the HTTP front's TLS listener, which hands each request its peer;
//!   [`connection_clock`] closes its slow and idle connections, and [`http_limits`] holds those
//!   limits and the request timeout.
//! - [`http`]: the HTTP front (routing, discovery, Table, watch streams, `Status` errors).
//! - [`logs`]: `pods/log`, streamed from the node host that runs the pod.
//! - [`remote`]: `pods/exec`, `pods/attach` and `pods/portforward` over WebSocket channel
//!   protocols, with an emulated container's commands and listeners.
//! - [`eviction`]: `pods/eviction`, which honours PodDisruptionBudgets.
//! - [`registry`]: the verbs on every resource, shared by both fronts.
//! - [`crd`]: CustomResourceDefinitions and the custom resources they define (schemas,
//!   printer columns, the set every replica serves).
//! - [`protobuf`]: Kubernetes protobuf request bodies (what client-go's typed clients send)
//!   decoded into JSON; [`strict`]: typed decoding (k8s-openapi v1_37) with unknown-field
//!   detection.
//! - [`validation`]: object validation with Kubernetes' field-path causes.
//! - [`patch`]: JSON merge patch, JSON patch, strategic merge patch and server-side apply.
//! - [`printers`]: `meta.k8s.io/v1` Table rows with kubectl's columns.
//! - [`discovery`]: `/api`, `/apis` and group-version discovery documents, `/version`;
//!   [`aggregated_discovery`]: all of them in one `apidiscovery.k8s.io/v2` list;
//!   [`openapi`]: `/openapi/v3` and `/openapi/v2` with every kind's schema (generated from
//!   k8s-openapi) and the list metadata that strategic merge and server-side apply read.
//! - [`scale`]: the `scale` subresource (`kubectl scale`).
//! - [`resource_metrics`]: `metrics.k8s.io` (NodeMetrics, PodMetrics) from the declared usage
//!   model, what `kubectl top` and the HorizontalPodAutoscaler controller read;
//!   [`custom_metrics`]: `custom.metrics.k8s.io` and `external.metrics.k8s.io` as a metrics
//!   adapter serves them, from declared values.
//! - [`autoscaling`]: HorizontalPodAutoscalers: autoscaling/v1 ⇄ v2 conversion, defaults.
//! - [`defaults`]: Kubernetes' defaulting on every write (Secret `stringData`, pod volumes and
//!   field selectors, EndpointSlice ports).
//! - [`strategy`]: per-resource create/update behaviour (server-owned fields, defaults, status).
//! - [`storage`]: Kubernetes' conditional writes on the store.
//! - [`watch_cache`]: all objects in memory, fed by one store watch; lists and watches come from it.
//!   Consistent reads from it share their store revision reads ([`shared_read`]).
//! - [`uncached`]: lists and watches of events, which the cache leaves out, from the store.
//! - [`event_view`]: core/v1 ⇄ events.k8s.io/v1 events.
//! - [`go_json`]: JSON as kube-apiserver writes it (Go field order, Go escaping).
//! - [`errors`], [`meta`], [`metrics`]: Status errors, metadata access, Prometheus metrics;
//!   [`pipeline`]: the time authentication, authorization and admission take per request.
//! - [`kubernetes_service`]: the `kubernetes` Service in `default` and its endpoints, listing
//!   the API servers.
//! - [`service_account_tokens`]: TokenRequest (`serviceaccounts/token`) and the JWTs it signs,
//!   which the authenticator accepts as the account.
//! - [`server`]: [`server::run`] wires one replica together.

pub mod admission;
pub mod aggregated_discovery;
pub mod authn;
pub mod authz;
pub mod autoscaling;
pub mod connection_clock;
pub mod crd;
pub mod custom_metrics;
pub mod defaults;
pub mod discovery;
pub mod dry_run;
pub mod errors;
pub mod event_view;
pub mod eviction;
pub mod field_manager;
pub mod go_json;
pub mod http;
pub mod http_limits;
pub mod https;
pub mod kubernetes_service;
pub mod logs;
pub mod meta;
pub mod metrics;
pub mod openapi;
pub mod patch;
pub mod pipeline;
pub mod printers;
pub mod protobuf;
pub mod quic;
pub mod registry;
pub mod remote;
pub mod resource_metrics;
pub mod reviews;
pub mod scale;
pub mod server;
pub mod service_account_tokens;
pub mod shared_read;
pub mod storage;
pub mod stored;
pub mod strategy;
pub mod strict;
pub mod uncached;
pub mod validation;
pub mod watch_cache;
