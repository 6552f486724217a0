//! The component front: kemu's own processes (scheduler, node hosts, controllers) reach the
//! registry over mutual-TLS QUIC with the [`api::protocol`] frames instead of HTTP.
//!
//! Each call is one QUIC stream, so one connection carries any number of concurrent calls and
//! watches: a node host watches the pods of each of its nodes (`spec.nodeName=<node>`) over one
//! connection. Verbs mean exactly what they mean on the HTTP front (same registry calls, same
//! errors as `Status` JSON). A watch costs one task and one watch-cache subscription; cached
//! objects are forwarded as the JSON bytes the cache already holds, and only the events.k8s.io
//! view of events is re-encoded.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::patch::PatchType;
use api::protocol::{
    ApiRequest, ApiResponse, CreateOutcome, ResourceRef, WatchEventKind, WatchFrame,
    MAX_CREATE_MANY,
};
use api::ResourceInfo;
use bytes::Bytes;
use serde_json::{json, Value};
use tokio::sync::mpsc::error::TryRecvError;
use tracing::{debug, info_span, Instrument};
use transport::frame::FrameLimits;
use transport::rpc::{Call, Handler, Peer, RpcServer};
use transport::tls::TlsIdentity;
use transport::TransportError;

use crate::authn::UserInfo;
use crate::authz::{self, Attributes, Authorizer, ResourceAttributes, Target};
use crate::crd::Served;
use crate::errors::ApiError;
use crate::http::{decode_object, MAX_BODY_BYTES};
use crate::metrics::{Metrics, RequestKind};
use crate::registry::{self, DeleteOptions, Deleted, ListOptions, Registry, WriteOptions};
use crate::reviews;
use crate::watch_cache::{CachedObject, EventType, Subscription, WatchItem};

/// Events one watcher may have queued before it counts as too slow and is dropped (its client
/// re-watches or re-lists).
const QUIC_WATCH_BUFFER: usize = 4096;
/// The largest request frame read: an object body of up to `MAX_BODY_BYTES` with room for the
/// call around it, or the whole of a `CreateMany`. A larger one is answered 413 unread.
pub const MAX_REQUEST_FRAME_BYTES: usize = MAX_BODY_BYTES + 1024 * 1024;
/// How often a watch that asked for bookmarks gets one. Shorter than the HTTP front's: a
/// component whose connection breaks re-watches from its last bookmark, and a fresh one spares
/// it a re-list; a bookmark is a few dozen bytes.
const BOOKMARK_INTERVAL: Duration = Duration::from_secs(10);

/// Binds the component front on `addr` with the API server's certificate and serves it until
/// `shutdown` resolves.
pub async fn serve_on(
    addr: SocketAddr,
    identity: &TlsIdentity,
    registry: Arc<Registry>,
    authorizer: Arc<Authorizer>,
    metrics: Metrics,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), TransportError> {
    let server = RpcServer::bind(addr, identity)?;
    serve(server, registry, authorizer, metrics, shutdown).await;
    Ok(())
}

/// Serves the component front on an already bound server until `shutdown` resolves; open
/// watches end with their connections.
pub async fn serve(
    server: RpcServer,
    registry: Arc<Registry>,
    authorizer: Arc<Authorizer>,
    metrics: Metrics,
    shutdown: impl Future<Output = ()> + Send,
) {
    server
        .serve(
            Arc::new(ComponentFront::new(registry, authorizer, metrics)),
            shutdown,
        )
        .await;
}

/// The [`Handler`] of every component call. The caller is the peer's certificate (CN the
/// user, O the groups); every call is authorized as the HTTP front authorizes requests, and
/// timed in `apiserver_request_duration_seconds` as a request of the HTTP front would be.
pub struct ComponentFront {
    registry: Arc<Registry>,
    authorizer: Arc<Authorizer>,
    metrics: Metrics,
}

impl ComponentFront {
    pub fn new(
        registry: Arc<Registry>,
        authorizer: Arc<Authorizer>,
        metrics: Metrics,
    ) -> ComponentFront {
        ComponentFront {
            registry,
            authorizer,
            metrics,
        }
    }

    /// The resource a call names: one of kemu's own, or a custom resource served now. A
    /// group this replica serves nothing of is looked up again once its cache has caught up
    /// with the store, since another replica may have just established the CRD.
    async fn resolve(&self, resource: &ResourceRef) -> Result<&'static ResourceInfo, ApiError> {
        if let Some(info) = resource.info() {
            return Ok(info);
        }
        let custom = self.registry.custom();
        let served = custom.snapshot();
        if let Some(info) = served_custom(resource, &served) {
            return Ok(info);
        }
        let known_group = crate::crd::builtin_groups().contains(&resource.group.as_str())
            || served.resources().iter().any(|r| r.group == resource.group);
        if known_group {
            return Err(not_found_path());
        }
        served_custom(resource, &*custom.snapshot_caught_up().await).ok_or_else(not_found_path)
    }

    /// Checks one call against the authorizer.
    #[allow(clippy::too_many_arguments)]
    async fn authorize(
        &self,
        user: &UserInfo,
        verb: &str,
        resource: &ResourceInfo,
        subresource: Option<&str>,
        namespace: Option<&str>,
        name: &str,
        field_selector: Option<&str>,
        object: Option<&Value>,
    ) -> Result<(), ApiError> {
        let started = std::time::Instant::now();
        let (subresource, namespace) = (subresource.unwrap_or(""), namespace.unwrap_or(""));
        let target = Target::Resource(ResourceAttributes {
            field_selector,
            object,
            ..ResourceAttributes::on(resource, subresource, namespace, name)
        });
        let allowed = self
            .authorizer
            .check_consistent(&Attributes { user, verb, target })
            .await;
        self.registry
            .pipeline()
            .observe(crate::pipeline::Stage::Authz, started.elapsed());
        allowed
    }
}

impl Handler for ComponentFront {
    type Request = ApiRequest;
    type Response = ApiResponse;

    fn limits(&self) -> FrameLimits {
        FrameLimits {
            max_frame_bytes: MAX_REQUEST_FRAME_BYTES,
            ..FrameLimits::default()
        }
    }

    fn too_large(&self, size: u64, limit: usize) -> Option<ApiResponse> {
        Some(error(&ApiError::TooLarge {
            message: format!(
                "the request of {size} bytes is larger than the limit of {limit} bytes"
            ),
        }))
    }

    async fn handle(&self, peer: Peer, request: ApiRequest, call: Call<ApiResponse>) {
        let verb = request.verb();
        let span = info_span!("api_call", peer = %peer.name, verb);
        let user = UserInfo::from_certificate(&peer.name, &peer.organizations);
        async move {
            if let ApiRequest::Watch { .. } = request {
                self.watch(&user, request, call).await;
                return;
            }
            let started = Instant::now();
            let (verb, resource, subresource, scope) = request_labels(&request);
            let response = self
                .unary(&user, request)
                .await
                .unwrap_or_else(|e| error(&e));
            let code = match &response {
                ApiResponse::Error { code, .. } => *code,
                _ if verb == "POST" => 201,
                _ => 200,
            };
            self.metrics.observe(
                RequestKind {
                    verb,
                    resource: &resource,
                    subresource: &subresource,
                    scope,
                },
                code,
                started.elapsed(),
            );
            if let ApiResponse::Error { code, .. } = &response {
                debug!(
                    code,
                    took_us = started.elapsed().as_micros() as u64,
                    "request failed"
                );
            }
            if let Err(e) = call.reply(&response).await {
                debug!(error = %e, "client went away before its answer");
            }
        }
        .instrument(span)
        .await
    }
}

/// How kube-apiserver would label the call in `apiserver_request_duration_seconds`: (verb,
/// resource, subresource, scope). A create or a named object is `resource` scope, a collection
/// in a namespace `namespace`, any other collection `cluster`.
fn request_labels(request: &ApiRequest) -> (&'static str, String, String, &'static str) {
    let collection = |namespace: &Option<String>| {
        if namespace.is_some() {
            "namespace"
        } else {
            "cluster"
        }
    };
    let sub = |s: &Option<String>| s.clone().unwrap_or_default();
    match request {
        ApiRequest::Get {
            resource,
            subresource,
            ..
        } => ("GET", resource.plural.clone(), sub(subresource), "resource"),
        ApiRequest::GetPath { .. } => ("GET", String::new(), String::new(), ""),
        ApiRequest::List {
            resource,
            namespace,
            ..
        } => (
            "LIST",
            resource.plural.clone(),
            String::new(),
            collection(namespace),
        ),
        ApiRequest::Watch {
            resource,
            namespace,
            ..
        } => (
            "WATCH",
            resource.plural.clone(),
            String::new(),
            collection(namespace),
        ),
        ApiRequest::Create { resource, .. } | ApiRequest::CreateMany { resource, .. } => {
            ("POST", resource.plural.clone(), String::new(), "resource")
        }
        ApiRequest::Update {
            resource,
            subresource,
            ..
        } => ("PUT", resource.plural.clone(), sub(subresource), "resource"),
        ApiRequest::Patch {
            resource,
            subresource,
            ..
        } => (
            "PATCH",
            resource.plural.clone(),
            sub(subresource),
            "resource",
        ),
        ApiRequest::Delete { resource, .. } => {
            ("DELETE", resource.plural.clone(), String::new(), "resource")
        }
        ApiRequest::DeleteCollection {
            resource,
            namespace,
            ..
        } => (
            "DELETECOLLECTION",
            resource.plural.clone(),
            String::new(),
            collection(namespace),
        ),
        ApiRequest::Bind { .. } => ("POST", "pods".into(), "binding".into(), "resource"),
    }
}

impl ComponentFront {
    /// Every call but watch, as the HTTP front does it.
    async fn unary(&self, user: &UserInfo, request: ApiRequest) -> Result<ApiResponse, ApiError> {
        let registry = &self.registry;
        match request {
            ApiRequest::Get {
                resource,
                namespace,
                name,
                subresource,
            } => {
                let resource = self.resolve(&resource).await?;
                let ns = named_scope(resource, namespace.as_deref())?;
                let sub = match subresource.as_deref() {
                    None => None,
                    Some(sub)
                        if resource.has_subresource(sub) && matches!(sub, "status" | "scale") =>
                    {
                        Some(sub)
                    }
                    Some(_) => return Err(not_found_path()),
                };
                self.authorize(user, "get", resource, sub, ns, &name, None, None)
                    .await?;
                if sub == Some("scale") {
                    let write = as_requester(user, resource);
                    return object(
                        &crate::scale::serve(registry, resource, ns, &name, None, &write).await?,
                    );
                }
                object(&registry.get(resource, ns, &name).await?)
            }
            ApiRequest::List {
                resource,
                namespace,
                label_selector,
                field_selector,
                resource_version,
                limit,
                continue_token,
            } => {
                let resource = self.resolve(&resource).await?;
                self.authorize(
                    user,
                    "list",
                    resource,
                    None,
                    namespace.as_deref(),
                    "",
                    field_selector.as_deref(),
                    None,
                )
                .await?;
                let options = ListOptions {
                    label_selector,
                    field_selector,
                    limit,
                    continue_token: continue_token.filter(|c| !c.is_empty()),
                    resource_version,
                };
                let listed = registry
                    .list(resource, namespace.as_deref(), &options)
                    .await?;
                let items = listed
                    .items
                    .iter()
                    .map(|item| object_json(resource, item))
                    .collect::<Result<_, _>>()?;
                Ok(ApiResponse::List {
                    resource_version: listed.resource_version.to_string(),
                    continue_token: listed.continue_token,
                    items,
                })
            }
            ApiRequest::GetPath { path } => {
                let (path, query) = path.split_once('?').unwrap_or((path.as_str(), ""));
                let query: std::collections::HashMap<String, String> =
                    serde_urlencoded::from_str::<Vec<(String, String)>>(query)
                        .unwrap_or_default()
                        .into_iter()
                        .collect();
                let read = crate::custom_metrics::MetricsRead::parse(path, &query)
                    .ok_or_else(not_found_path)?;
                let a = read.attributes();
                let target = Target::Resource(ResourceAttributes {
                    group: a.group,
                    resource: &a.resource,
                    subresource: &a.subresource,
                    namespace: &a.namespace,
                    name: &a.name,
                    field_selector: None,
                    object: None,
                });
                self.authorizer
                    .check_consistent(&Attributes {
                        user,
                        verb: a.verb,
                        target,
                    })
                    .await?;
                object(&crate::custom_metrics::serve(registry, &read).await?)
            }
            ApiRequest::Watch { .. } => Err(ApiError::internal("a watch is not a unary call")),
            ApiRequest::Create {
                resource,
                namespace,
                object: body,
            } => {
                let resource = self.resolve(&resource).await?;
                object(
                    &self
                        .create(user, resource, namespace.as_deref(), &body)
                        .await?,
                )
            }
            ApiRequest::CreateMany { resource, items } => {
                let resource = self.resolve(&resource).await?;
                if items.len() > MAX_CREATE_MANY {
                    return Err(ApiError::bad_request(format!(
                        "items: {} objects in one call, more than the limit of {MAX_CREATE_MANY}",
                        items.len()
                    )));
                }
                // Concurrently, so the store client batches their writes into a few raft
                // entries, as it would creates arriving on separate calls.
                let outcomes = futures::future::join_all(items.iter().map(|item| {
                    self.create(user, resource, item.namespace.as_deref(), &item.object)
                }))
                .await
                .into_iter()
                .map(|created| match created {
                    Ok(created) => CreateOutcome::Created {
                        resource_version: created
                            .pointer("/metadata/resourceVersion")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string(),
                    },
                    Err(e) => CreateOutcome::Failed {
                        code: e.code(),
                        status: status_json(&e),
                    },
                })
                .collect();
                Ok(ApiResponse::Created(outcomes))
            }
            ApiRequest::Update {
                resource,
                namespace,
                name,
                subresource,
                object: body,
                metadata_only,
            } => {
                let resource = self.resolve(&resource).await?;
                let ns = named_scope(resource, namespace.as_deref())?;
                let mut body = decode_body(&body)?;
                if subresource.is_none() {
                    authz::node::claim(user, resource, &mut body);
                }
                self.authorize(
                    user,
                    "update",
                    resource,
                    subresource.as_deref(),
                    ns,
                    &name,
                    None,
                    Some(&body),
                )
                .await?;
                if resource.plural == "namespaces" && subresource.as_deref() == Some("finalize") {
                    // The namespace controller's last step, as over HTTP.
                    let finalized = crate::http::finalize_namespace(
                        registry,
                        &name,
                        body,
                        &WriteOptions::default(),
                    )
                    .await?;
                    return object(&finalized);
                }
                let sub = writable_subresource(resource, subresource.as_deref())?;
                if sub == Some("scale") {
                    return Err(ApiError::MethodNotAllowed {
                        message: "the component front patches scale; it does not replace it".into(),
                    });
                }
                let updated = registry
                    .update(
                        resource,
                        ns,
                        &name,
                        sub,
                        body,
                        &as_requester(user, resource),
                    )
                    .await?;
                if metadata_only {
                    return object(&crate::http::negotiate::partial(&updated));
                }
                object(&updated)
            }
            ApiRequest::Patch {
                resource,
                namespace,
                name,
                subresource,
                patch_type,
                patch,
                field_manager,
                force,
                metadata_only,
            } => {
                let resource = self.resolve(&resource).await?;
                let ns = named_scope(resource, namespace.as_deref())?;
                let sub = writable_subresource(resource, subresource.as_deref())?;
                self.authorize(user, "patch", resource, sub, ns, &name, None, None)
                    .await?;
                let custom = crate::crd::is_custom(resource);
                let patch_type = PatchType::from_content_type(&patch_type)
                    .filter(|t| !custom || *t != PatchType::StrategicMerge)
                    .ok_or_else(|| crate::http::unsupported_patch(custom))?;
                if patch_type == PatchType::Apply && field_manager.is_none() {
                    return Err(ApiError::bad_request("PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"));
                }
                check_size(&patch)?;
                let write = WriteOptions {
                    field_manager,
                    ..as_requester(user, resource)
                };
                if sub == Some("scale") {
                    let change = Some((patch_type, patch.as_ref()));
                    let scale =
                        crate::scale::serve(registry, resource, ns, &name, change, &write).await?;
                    return object(&scale);
                }
                let patched = registry
                    .patch(resource, ns, &name, sub, patch_type, &patch, force, &write)
                    .await?;
                if metadata_only {
                    return object(&crate::http::negotiate::partial(&patched));
                }
                object(&patched)
            }
            ApiRequest::Delete {
                resource,
                namespace,
                name,
                options,
            } => {
                let resource = self.resolve(&resource).await?;
                let ns = named_scope(resource, namespace.as_deref())?;
                self.authorize(user, "delete", resource, None, ns, &name, None, None)
                    .await?;
                let options = delete_options(&options)?;
                match registry.delete(resource, ns, &name, &options).await? {
                    Deleted::Gone(last) | Deleted::Pending(last) => object(&last),
                }
            }
            ApiRequest::DeleteCollection {
                resource,
                namespace,
                label_selector,
                field_selector,
                options,
            } => {
                let resource = self.resolve(&resource).await?;
                self.authorize(
                    user,
                    "deletecollection",
                    resource,
                    None,
                    namespace.as_deref(),
                    "",
                    field_selector.as_deref(),
                    None,
                )
                .await?;
                let list = ListOptions {
                    label_selector,
                    field_selector,
                    ..Default::default()
                };
                let options = delete_options(&options)?;
                let deleted = registry
                    .delete_collection(resource, namespace.as_deref(), &list, &options)
                    .await?;
                let items = deleted
                    .iter()
                    .map(|v| serde_json::to_vec(v).map(Bytes::from))
                    .collect::<Result<_, _>>()
                    .map_err(|e| ApiError::internal(format!("cannot encode an object: {e}")))?;
                Ok(ApiResponse::List {
                    resource_version: registry.cache().revision().to_string(),
                    continue_token: None,
                    items,
                })
            }
            ApiRequest::Bind {
                namespace,
                name,
                node,
            } => {
                self.authorize(
                    user,
                    "create",
                    api::resources::pods(),
                    Some("binding"),
                    Some(&namespace),
                    &name,
                    None,
                    None,
                )
                .await?;
                let binding = json!({
                    "apiVersion": "v1",
                    "kind": "Binding",
                    "metadata": {"name": name, "namespace": namespace},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": node},
                });
                registry.bind(&namespace, &name, &binding).await?;
                object(
                    &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
                )
            }
        }
    }

    /// One create, as a `Create` call or an item of a `CreateMany` makes it.
    async fn create(
        &self,
        user: &UserInfo,
        resource: &'static ResourceInfo,
        namespace: Option<&str>,
        body: &[u8],
    ) -> Result<Value, ApiError> {
        let mut body = decode_body(body)?;
        authz::node::claim(user, resource, &mut body);
        self.authorize(
            user,
            "create",
            resource,
            None,
            namespace,
            "",
            None,
            Some(&body),
        )
        .await?;
        if reviews::is_review(resource) {
            return reviews::answer(resource, &self.authorizer, user, namespace, body);
        }
        self.registry
            .create(resource, namespace, body, &as_requester(user, resource))
            .await
    }

    /// A server-streaming watch: the subscription's initial events, then live ones, until the
    /// client stops reading or the watch cache drops the subscription.
    async fn watch(&self, user: &UserInfo, request: ApiRequest, mut call: Call<ApiResponse>) {
        let ApiRequest::Watch {
            resource,
            namespace,
            label_selector,
            field_selector,
            resource_version,
            send_initial_events,
            bookmarks,
        } = request
        else {
            return;
        };
        let started = async {
            let resource = self.resolve(&resource).await?;
            self.authorize(
                user,
                "watch",
                resource,
                None,
                namespace.as_deref(),
                "",
                field_selector.as_deref(),
                None,
            )
            .await?;
            if send_initial_events && !bookmarks {
                return Err(ApiError::Invalid {
                    message: "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan and allowWatchBookmarks".into(),
                    name: String::new(),
                    group: "meta.k8s.io".into(),
                    kind: "ListOptions".into(),
                    causes: vec![],
                });
            }
            let options = ListOptions {
                label_selector,
                field_selector,
                resource_version,
                ..Default::default()
            };
            let subscription = self
                .registry
                .watch(
                    resource,
                    namespace.as_deref(),
                    &options,
                    send_initial_events,
                    QUIC_WATCH_BUFFER,
                )
                .await?;
            Ok((resource, subscription))
        };
        let (resource, subscription) = match started.await {
            Ok(started) => started,
            Err(e) => {
                debug!(code = e.code(), error = %e, "watch refused");
                let _ = call.reply(&error(&e)).await;
                return;
            }
        };
        let watch = WatchForwarder {
            resource,
            registry: &self.registry,
            send_initial_events,
            bookmarks,
        };
        let closed = call.closed_signal();
        tokio::pin!(closed);
        let outcome = watch.run(subscription, &mut call, closed).await;
        if outcome == WatchEnd::Dropped {
            // Fell behind or the cache was reset: finishing cleanly tells the client to
            // re-watch from its last version (or re-list, if that is gone by now).
            let _ = call.finish().await;
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum WatchEnd {
    /// The client went away (or the connection did).
    ClientGone,
    /// The watch cache dropped the subscription.
    Dropped,
}

/// One running watch.
struct WatchForwarder<'a> {
    resource: &'static ResourceInfo,
    registry: &'a Registry,
    send_initial_events: bool,
    bookmarks: bool,
}

type Closed<'c> = Pin<&'c mut (dyn Future<Output = ()> + Send + Sync)>;

impl WatchForwarder<'_> {
    async fn run(
        &self,
        mut subscription: Subscription,
        call: &mut Call<ApiResponse>,
        mut closed: Closed<'_>,
    ) -> WatchEnd {
        let mut covered = subscription.revision;
        for item in std::mem::take(&mut subscription.initial) {
            covered = covered.max(item.object.rv);
            if !self.send_item(call, closed.as_mut(), &item).await {
                return WatchEnd::ClientGone;
            }
        }
        if self.send_initial_events {
            let bookmark = self.bookmark(covered, true);
            if !send(call, closed.as_mut(), &bookmark).await {
                return WatchEnd::ClientGone;
            }
        }
        // Only watches that asked for bookmarks pay for a timer.
        let mut bookmark_timer = self.bookmarks.then(|| {
            let start = tokio::time::Instant::now() + BOOKMARK_INTERVAL;
            tokio::time::interval_at(start, BOOKMARK_INTERVAL)
        });
        loop {
            tokio::select! {
                biased;
                () = closed.as_mut() => return WatchEnd::ClientGone,
                item = subscription.live.recv() => match item {
                    Some(item) => {
                        covered = covered.max(item.object.rv);
                        if !self.send_item(call, closed.as_mut(), &item).await {
                            return WatchEnd::ClientGone;
                        }
                    }
                    None => return WatchEnd::Dropped,
                },
                _ = tick(&mut bookmark_timer) => {
                    // Every event up to the cache's revision has been queued to this watcher
                    // by now; send what is queued, and the bookmark can claim that revision.
                    let revision = subscription.covered(self.registry.cache().revision());
                    loop {
                        match subscription.live.try_recv() {
                            Ok(item) => {
                                covered = covered.max(item.object.rv);
                                if !self.send_item(call, closed.as_mut(), &item).await {
                                    return WatchEnd::ClientGone;
                                }
                            }
                            Err(TryRecvError::Empty) => break,
                            Err(TryRecvError::Disconnected) => return WatchEnd::Dropped,
                        }
                    }
                    covered = covered.max(revision);
                    if !send(call, closed.as_mut(), &self.bookmark(covered, false)).await {
                        return WatchEnd::ClientGone;
                    }
                }
            }
        }
    }

    async fn send_item(
        &self,
        call: &mut Call<ApiResponse>,
        closed: Closed<'_>,
        item: &WatchItem,
    ) -> bool {
        let object = match object_json(self.resource, &item.object) {
            Ok(json) => json,
            Err(e) => {
                debug!(error = %e, "skipping a cached object that does not decode");
                return true;
            }
        };
        let frame = ApiResponse::Watch(WatchFrame {
            kind: match item.kind {
                EventType::Added => WatchEventKind::Added,
                EventType::Modified => WatchEventKind::Modified,
                EventType::Deleted => WatchEventKind::Deleted,
            },
            object,
            resource_version: item.object.rv,
        });
        send(call, closed, &frame).await
    }

    /// A bookmark as the HTTP front shows it: the kind's shell with only a resourceVersion.
    fn bookmark(&self, rv: i64, initial_end: bool) -> ApiResponse {
        let mut metadata = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let object = json!({
            "kind": self.resource.kind,
            "apiVersion": self.resource.api_version(),
            "metadata": metadata,
        });
        ApiResponse::Watch(WatchFrame {
            kind: WatchEventKind::Bookmark,
            object: Bytes::from(object.to_string()),
            resource_version: rv,
        })
    }
}

/// Sends one frame unless the client goes away first; false when it did.
async fn send(call: &mut Call<ApiResponse>, closed: Closed<'_>, frame: &ApiResponse) -> bool {
    tokio::select! {
        biased;
        () = closed => false,
        sent = call.send(frame) => sent.is_ok(),
    }
}

/// The next tick of an optional timer; never resolves without one.
async fn tick(timer: &mut Option<tokio::time::Interval>) {
    match timer {
        Some(timer) => {
            timer.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// A cached object's JSON as `resource` shows it: the cached bytes themselves, except for the
/// events.k8s.io view of (core) events and a custom object read in another version than the
/// one it is stored in.
fn object_json(resource: &ResourceInfo, object: &CachedObject) -> Result<Bytes, ApiError> {
    if crate::crd::is_custom(resource) {
        return Ok(crate::crd::output::view_json(resource, &object.json));
    }
    if !registry::is_converted_view(resource) {
        return Ok(object.json.clone());
    }
    let shown = registry::view(resource, object.value()?);
    encode(&shown)
}

/// Write options naming the requester where it matters (RBAC's escalation check), so other
/// writes do not copy the user, and the component's field manager.
fn as_requester(user: &UserInfo, resource: &ResourceInfo) -> WriteOptions {
    WriteOptions {
        requester: (resource.group == crate::authz::escalation::RBAC_GROUP)
            .then(|| Arc::new(user.clone())),
        node_host: user.in_group(crate::authn::NODES),
        agent_manager: component_manager(user).map(str::to_string),
        ..Default::default()
    }
}

/// The field manager of a component's writes without `fieldManager`: what kube-apiserver takes
/// from the User-Agent of the component kemu stands in for (`kubelet/v1.37.0 (linux/amd64) …`
/// names `kubelet`). The component front has no User-Agent, so the identity's group names it.
/// Other identities (an administrator's certificate) record no manager, as before.
fn component_manager(user: &UserInfo) -> Option<&'static str> {
    if user.in_group(crate::authn::NODES) {
        Some("kubelet")
    } else if user.in_group("system:kube-scheduler") {
        Some("kube-scheduler")
    } else if user.in_group("system:kube-controller-manager") {
        Some("kube-controller-manager")
    } else {
        None
    }
}

fn object(value: &Value) -> Result<ApiResponse, ApiError> {
    encode(value).map(ApiResponse::Object)
}

fn encode(value: &Value) -> Result<Bytes, ApiError> {
    serde_json::to_vec(value)
        .map(Bytes::from)
        .map_err(|e| ApiError::internal(format!("cannot encode an object: {e}")))
}

/// The `Status` error frame.
fn error(e: &ApiError) -> ApiResponse {
    ApiResponse::Error {
        code: e.code(),
        status: status_json(e),
    }
}

fn status_json(e: &ApiError) -> Bytes {
    Bytes::from(serde_json::to_vec(&e.status()).unwrap_or_default())
}

fn not_found_path() -> ApiError {
    ApiError::NotFound {
        message: "the server could not find the requested resource".into(),
        name: String::new(),
        group: String::new(),
        kind: String::new(),
    }
}

/// The custom resource `resource` names among those `served`.
fn served_custom(resource: &ResourceRef, served: &Served) -> Option<&'static ResourceInfo> {
    served
        .find(&resource.group, &resource.version, &resource.plural)
        .map(|v| v.resource)
}

/// A namespaced resource's object needs a namespace, as its URL would have one.
fn named_scope<'n>(
    resource: &ResourceInfo,
    namespace: Option<&'n str>,
) -> Result<Option<&'n str>, ApiError> {
    if resource.namespaced && namespace.is_none() {
        return Err(not_found_path());
    }
    Ok(namespace)
}

/// The subresources PUT and PATCH accept here: the object itself, `status` and (PATCH only)
/// `scale` (and PUT
/// `namespaces/{name}/finalize`, handled before this).
fn writable_subresource<'s>(
    resource: &ResourceInfo,
    subresource: Option<&'s str>,
) -> Result<Option<&'s str>, ApiError> {
    match subresource {
        None => Ok(None),
        Some("status") if resource.has_subresource("status") => Ok(Some("status")),
        Some("scale") if resource.has_subresource("scale") => Ok(Some("scale")),
        Some(other) if resource.has_subresource(other) => Err(ApiError::MethodNotAllowed {
            message: format!(
                "the component front does not write {}/{other}; use the HTTP API",
                resource.plural
            ),
        }),
        Some(_) => Err(not_found_path()),
    }
}

fn check_size(body: &[u8]) -> Result<(), ApiError> {
    if body.len() > MAX_BODY_BYTES {
        return Err(ApiError::TooLarge {
            message: format!("the request body is larger than the limit of {MAX_BODY_BYTES} bytes"),
        });
    }
    Ok(())
}

fn decode_body(body: &[u8]) -> Result<Value, ApiError> {
    check_size(body)?;
    decode_object("application/json", body)
}

fn delete_options(body: &[u8]) -> Result<DeleteOptions, ApiError> {
    check_size(body)?;
    let value = if body.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?
    };
    let dry_run = crate::dry_run::from_delete_options(&value)?;
    let mut options = DeleteOptions::from_body(&value)?;
    options.dry_run = dry_run;
    Ok(options)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_carry_kubernetes_status() {
        let pods = api::resources::pods();
        let ApiResponse::Error { code, status } = error(&ApiError::not_found(pods, "x")) else {
            panic!("not an error frame");
        };
        assert_eq!(code, 404);
        let status: Value = serde_json::from_slice(&status).expect("status json");
        assert_eq!(status["reason"], "NotFound");
        assert_eq!(status["message"], "pods \"x\" not found");
    }

    #[test]
    fn requests_are_scoped_like_urls() {
        let pods = api::resources::pods();
        let nodes = api::resources::find("", "v1", "nodes").expect("nodes");
        assert_eq!(named_scope(pods, None).map_err(|e| e.code()), Err(404));
        assert_eq!(named_scope(nodes, None).map_err(|e| e.code()), Ok(None));
        assert_eq!(
            writable_subresource(pods, Some("status")).ok(),
            Some(Some("status"))
        );
        assert_eq!(
            writable_subresource(pods, Some("binding")).map_err(|e| e.code()),
            Err(405)
        );
        assert_eq!(
            writable_subresource(pods, Some("bogus")).map_err(|e| e.code()),
            Err(404)
        );
        let unknown = ResourceRef {
            group: "nope".into(),
            version: "v1".into(),
            plural: "things".into(),
        };
        assert_eq!(served_custom(&unknown, &Served::default()), None);
        assert_eq!(
            delete_options(b"").map(|o| o.grace_period_seconds).ok(),
            Some(None)
        );
        assert_eq!(
            delete_options(b"{\"gracePeriodSeconds\":0}")
                .map(|o| o.grace_period_seconds)
                .ok(),
            Some(Some(0))
        );
        assert_eq!(delete_options(b"[").map_err(|e| e.code()).err(), Some(400));
    }
}
