//! The HTTP front: Kubernetes REST paths → registry verbs, with discovery, OpenAPI, Table
//! responses, chunked watch streams and `Status` errors.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::patch::PatchType;
use crate::printers::{self, IncludeObject};
use api::ResourceInfo;
use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{json, Value};
use tracing::debug;

use crate::authn::{self, Authenticator, UserInfo};
use crate::authz::impersonation::Impersonation;
use crate::authz::{self, Attributes, Authorizer, ResourceAttributes, Target};
use crate::dry_run;
use crate::errors::ApiError;
use crate::http_limits::{self, HttpLimits};
use crate::https::HttpPeer;
use crate::metrics::{Metrics, RequestKind};
use crate::pipeline::{self, Stage};
use crate::registry::{
    DeleteOptions, Deleted, FieldValidation, ListOptions, Registry, Warnings, WriteOptions,
};
use crate::reviews;
use crate::watch_cache::CachedObject;

mod documents;
mod field_warnings;
pub(crate) mod negotiate;
mod watch;

use negotiate::Form;

/// Largest accepted request body, as kube-apiserver's 3 MiB limit.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// What every handler shares.
pub struct AppState {
    pub registry: Arc<Registry>,
    pub metrics: Metrics,
    /// The process's metrics registry and health checks (`/metrics`, `/readyz`, ...).
    pub telemetry: telemetry::Telemetry,
    pub server_address: String,
    pub authenticator: Authenticator,
    pub authorizer: Arc<Authorizer>,
    /// Requests without credentials proceed as `system:anonymous` instead of getting 401.
    pub anonymous_auth: bool,
    /// The request timeout and how long watches last.
    pub limits: HttpLimits,
}

impl AppState {
    /// The request's user; `None` for the public paths, which need none.
    fn authenticate(
        &self,
        path: &str,
        peer: Option<&HttpPeer>,
        headers: &HeaderMap,
    ) -> Result<Option<Arc<UserInfo>>, ApiError> {
        if authn::is_public_path(path) {
            return Ok(None);
        }
        let certificate = peer.and_then(|p| p.certificate_user.as_ref());
        let authorization = headers
            .get(header::AUTHORIZATION)
            .map(HeaderValue::as_bytes);
        if self.anonymous_auth && certificate.is_none() && authorization.is_none() {
            return Ok(Some(Arc::new(UserInfo {
                name: "system:anonymous".into(),
                uid: String::new(),
                groups: vec!["system:unauthenticated".into()],
            })));
        }
        self.authenticator
            .authenticate(certificate, authorization)
            .map(Some)
    }

    /// The user the request runs as: `user`, or whom its `Impersonate-*` headers name if
    /// `user` may impersonate them.
    fn impersonate(
        &self,
        user: Option<Arc<UserInfo>>,
        headers: &HeaderMap,
    ) -> Result<Option<Arc<UserInfo>>, ApiError> {
        let Some(real) = user else {
            return Ok(None);
        };
        match Impersonation::from_headers(headers)? {
            None => Ok(Some(real)),
            Some(wanted) => {
                let acting = self.authorizer.impersonate(&real, &wanted)?;
                debug!(user = %real.name, as_user = %acting.name, "impersonating");
                Ok(Some(Arc::new(acting)))
            }
        }
    }
}

/// One request's target after path parsing.
#[derive(Debug)]
struct PathTarget {
    resource: &'static ResourceInfo,
    namespace: Option<String>,
    name: Option<String>,
    subresource: Option<String>,
    watch_path: bool,
}

/// Non-resource paths and the resource paths under `/api` and `/apis`.
enum Route {
    /// `/healthz`, `/livez`, `/readyz` (open to everyone), or one check under them.
    Health {
        check: bool,
    },
    Metrics,
    /// `/metrics/slis`: the health checks whole endpoints ran.
    MetricsSlis,
    Version,
    ApiVersions,
    ApiGroupList,
    ApiGroup(String),
    ResourceList(String, String),
    OpenApiRoot,
    OpenApi(String, String),
    OpenApiV2,
    Resource(PathTarget),
    /// A read of the custom or external metrics adapter (paths outside the resource table).
    MetricsAdapter,
}

pub async fn handle(State(state): State<Arc<AppState>>, request: Request) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let raw_query = request.uri().query().map(str::to_string);
    let query = parse_query(raw_query.as_deref().unwrap_or(""));
    let peer = request
        .extensions()
        .get::<ConnectInfo<HttpPeer>>()
        .map(|c| &c.0);
    let pipeline = state.registry.pipeline();
    let authn_started = Instant::now();
    let authenticated = state
        .authenticate(&path, peer, request.headers())
        .and_then(|user| state.impersonate(user, request.headers()));
    let authn_time = authn_started.elapsed();
    if !authn::is_public_path(&path) {
        pipeline.observe(Stage::Authn, authn_time);
    }
    let user = match authenticated {
        Ok(user) => user,
        Err(e) => {
            debug!(%method, %path, "unauthenticated request refused");
            return error_response(&e);
        }
    };
    let (response, verb, labels) = match route_served(&state, &path).await {
        Ok(Route::Resource(target)) => {
            let verb = verb_of(&method, &target, &query);
            let labels = RequestLabels::of(&target, &verb);
            let response = match user {
                Some(user) => {
                    let mut authz_time = Duration::ZERO;
                    let deadline =
                        (!http_limits::is_long_running(&verb, target.subresource.as_deref()))
                            .then(|| state.limits.request_deadline(&query));
                    let (answer, admission_time) = pipeline::with_admission_time(within(
                        deadline,
                        authorized_resource_request(
                            &state,
                            &user,
                            target,
                            &method,
                            &query,
                            request,
                            &mut authz_time,
                        ),
                    ))
                    .await;
                    match answer {
                        Ok(response) => {
                            if verb == "POST" && response.status() == StatusCode::CREATED {
                                pipeline.observe_create(authn_time + authz_time + admission_time);
                            }
                            response
                        }
                        Err(e) => error_response(&e),
                    }
                }
                None => error_response(&authn::unauthorized()),
            };
            (response, verb, labels)
        }
        Ok(Route::MetricsAdapter) => {
            let response = match &user {
                Some(user) => adapter_request(&state, user, &method, &path, &query)
                    .await
                    .unwrap_or_else(|e| error_response(&e)),
                None => error_response(&authn::unauthorized()),
            };
            (
                response,
                method.as_str().to_string(),
                RequestLabels::default(),
            )
        }
        Ok(other) => {
            let allowed = match (&user, &other) {
                (_, Route::Health { check: false } | Route::Version) => Ok(()),
                (Some(user), _) => {
                    let started = Instant::now();
                    let allowed = state.authorizer.check(&Attributes {
                        user,
                        verb: authz::path_verb(method.as_str()),
                        target: Target::NonResource { path: &path },
                    });
                    pipeline.observe(Stage::Authz, started.elapsed());
                    allowed
                }
                (None, _) => Err(authn::unauthorized()),
            };
            let response = match (allowed, other) {
                (Ok(()), Route::Health { .. })
                    if method == Method::GET || method == Method::HEAD =>
                {
                    match state
                        .telemetry
                        .health
                        .answer(&path, raw_query.as_deref())
                        .await
                    {
                        Some(answer) => telemetry::health_response(answer),
                        None => error_response(&not_found()),
                    }
                }
                (Ok(()), other) => non_resource(
                    &state,
                    other,
                    &method,
                    &served_now(&state),
                    (request.headers(), &query, &path),
                ),
                (Err(e), _) => error_response(&e),
            };
            (
                response,
                method.as_str().to_string(),
                RequestLabels::default(),
            )
        }
        Err(e) => (
            error_response(&e),
            method.as_str().to_string(),
            RequestLabels::default(),
        ),
    };
    if verb != "WATCH" {
        state.metrics.observe(
            RequestKind {
                verb: &verb,
                resource: labels.resource,
                subresource: &labels.subresource,
                scope: labels.scope,
            },
            response.status().as_u16(),
            started.elapsed(),
        );
    }
    debug!(%method, %path, status = response.status().as_u16(), took_us = started.elapsed().as_micros() as u64, "request");
    response
}

/// A resource request's metric labels, as kube-apiserver's `CleanScope` gives the scope: a
/// named object or a create is `resource`, a collection in a namespace `namespace`, any other
/// collection `cluster`.
#[derive(Default)]
struct RequestLabels {
    resource: &'static str,
    subresource: String,
    scope: &'static str,
}

impl RequestLabels {
    fn of(target: &PathTarget, verb: &str) -> RequestLabels {
        let scope = if target.name.is_some() || verb == "POST" {
            "resource"
        } else if target.namespace.is_some() {
            "namespace"
        } else {
            "cluster"
        };
        RequestLabels {
            resource: target.resource.plural,
            subresource: target.subresource.clone().unwrap_or_default(),
            scope,
        }
    }
}

/// Runs `request`, answering 504 once it has run for `deadline` (kube-apiserver's request
/// timeout); without a deadline (a long-running request), for as long as it takes.
async fn within(
    deadline: Option<Duration>,
    request: impl std::future::Future<Output = Result<Response, ApiError>>,
) -> Result<Response, ApiError> {
    match deadline {
        Some(deadline) => tokio::time::timeout(deadline, request)
            .await
            .unwrap_or_else(|_| Err(http_limits::timed_out())),
        None => request.await,
    }
}

fn verb_of(method: &Method, target: &PathTarget, query: &HashMap<String, String>) -> String {
    let watch = target.watch_path || is_true(query.get("watch"));
    match (method.as_str(), target.name.is_some()) {
        ("GET", _) if watch => "WATCH",
        ("GET", true) => "GET",
        ("GET", false) => "LIST",
        ("POST", _) => "POST",
        ("PUT", _) => "PUT",
        ("PATCH", _) => "PATCH",
        ("DELETE", _) => "DELETE",
        (other, _) => other,
    }
    .to_string()
}

/// [`route`] against the custom resources served now; a path under a group this replica does
/// not serve is routed again once its cache has caught up with the store (another replica may
/// have just established the CRD).
async fn route_served(state: &AppState, path: &str) -> Result<Route, ApiError> {
    let custom = state.registry.custom();
    let routed = route(path, &custom.snapshot());
    let unknown_group = match &routed {
        Err(_) => true,
        Ok(Route::ApiGroup(group) | Route::ResourceList(group, _) | Route::OpenApi(group, _)) => {
            crate::discovery::api_group(group, &custom.snapshot().resources()).is_none()
        }
        Ok(_) => false,
    };
    if unknown_group && path.starts_with("/apis/") {
        return route(path, &*custom.snapshot_caught_up().await);
    }
    routed
}

fn served_now(state: &AppState) -> Vec<&'static ResourceInfo> {
    state.registry.custom().snapshot().resources()
}

fn route(path: &str, served: &crate::crd::Served) -> Result<Route, ApiError> {
    let trimmed = path.trim_end_matches('/');
    let segments: Vec<&str> = trimmed.split('/').filter(|s| !s.is_empty()).collect();
    match segments.as_slice() {
        ["healthz" | "livez" | "readyz"] => Ok(Route::Health { check: false }),
        ["healthz" | "livez" | "readyz", _, ..] => Ok(Route::Health { check: true }),
        ["metrics"] => Ok(Route::Metrics),
        ["metrics", "slis"] => Ok(Route::MetricsSlis),
        ["version"] => Ok(Route::Version),
        ["api"] => Ok(Route::ApiVersions),
        ["apis"] => Ok(Route::ApiGroupList),
        ["openapi", "v2"] => Ok(Route::OpenApiV2),
        ["openapi", "v3"] => Ok(Route::OpenApiRoot),
        ["openapi", "v3", "api", version] => Ok(Route::OpenApi(String::new(), version.to_string())),
        ["openapi", "v3", "apis", group, version] => {
            Ok(Route::OpenApi(group.to_string(), version.to_string()))
        }
        ["api", version] => Ok(Route::ResourceList(String::new(), version.to_string())),
        ["apis", group] => Ok(Route::ApiGroup(group.to_string())),
        ["apis", group, version] => Ok(Route::ResourceList(group.to_string(), version.to_string())),
        ["api", version, rest @ ..] => {
            resource_route("", version, rest, served).ok_or_else(not_found)
        }
        ["apis", group, version, _, ..] if crate::custom_metrics::serves(group, version) => {
            Ok(Route::MetricsAdapter)
        }
        ["apis", group, version, rest @ ..] => {
            resource_route(group, version, rest, served).ok_or_else(not_found)
        }
        _ => Err(not_found()),
    }
}

fn not_found() -> ApiError {
    ApiError::NotFound {
        message: "the server could not find the requested resource".into(),
        name: String::new(),
        group: String::new(),
        kind: String::new(),
    }
}

fn resource_route(
    group: &str,
    version: &str,
    rest: &[&str],
    served: &crate::crd::Served,
) -> Option<Route> {
    let (watch_path, rest) = match rest {
        ["watch", tail @ ..] => (true, tail),
        other => (false, other),
    };
    let find = |plural: &str| {
        api::resources::find(group, version, plural)
            .or_else(|| served.find(group, version, plural).map(|v| v.resource))
    };
    let namespaced_resource = |plural: &str| find(plural).filter(|r| r.namespaced);
    let (resource, namespace, tail) = match rest {
        ["namespaces", ns, plural, tail @ ..] if namespaced_resource(plural).is_some() => {
            (namespaced_resource(plural)?, Some(ns.to_string()), tail)
        }
        [plural, tail @ ..] => (find(plural)?, None, tail),
        [] => return None,
    };
    let (name, subresource) = match tail {
        [] => (None, None),
        [name] => (Some(name.to_string()), None),
        [name, sub] if resource.has_subresource(sub) => {
            (Some(name.to_string()), Some(sub.to_string()))
        }
        _ => return None,
    };
    Some(Route::Resource(PathTarget {
        resource,
        namespace,
        name,
        subresource,
        watch_path,
    }))
}

fn non_resource(
    state: &AppState,
    route: Route,
    method: &Method,
    custom: &[&'static ResourceInfo],
    (headers, query, path): (&HeaderMap, &HashMap<String, String>, &str),
) -> Response {
    if method != Method::GET && method != Method::HEAD {
        return error_response(&ApiError::MethodNotAllowed {
            message: format!("method {method} is not allowed here"),
        });
    }
    match route {
        // Answered in `handle` (the checks are async); a method other than GET ends above.
        Route::Health { .. } => error_response(&not_found()),
        Route::Metrics => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, telemetry::CONTENT_TYPE)],
            state.telemetry.metrics.encode(),
        )
            .into_response(),
        Route::MetricsSlis => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, telemetry::CONTENT_TYPE)],
            state.telemetry.health.slis(),
        )
            .into_response(),
        Route::Version => {
            let mut body = crate::go_json::to_vec_as(
                &crate::discovery::version_info(),
                &crate::go_json::VERSION_INFO,
            );
            body.push(b'\n');
            bytes_response(StatusCode::OK, body)
        }
        Route::ApiVersions => documents::aggregated(headers, true, custom).unwrap_or_else(|| {
            json_response(
                StatusCode::OK,
                &crate::discovery::api_versions(&state.server_address),
            )
        }),
        Route::ApiGroupList => documents::aggregated(headers, false, custom).unwrap_or_else(|| {
            json_response(StatusCode::OK, &crate::discovery::api_group_list(custom))
        }),
        Route::ApiGroup(group) => match crate::discovery::api_group(&group, custom) {
            Some(v) => json_response(StatusCode::OK, &v),
            None => error_response(&not_found_path()),
        },
        Route::ResourceList(group, version) => {
            match crate::discovery::api_resource_list(&group, &version, custom) {
                Some(v) => json_response(StatusCode::OK, &v),
                None => error_response(&not_found_path()),
            }
        }
        Route::OpenApiRoot => {
            let served = state.registry.custom().snapshot();
            json_response(StatusCode::OK, &crate::openapi::v3_root(custom, &*served))
        }
        Route::OpenApi(group, version) => {
            let served = state.registry.custom().snapshot();
            match crate::openapi::v3_group_version(&group, &version, custom, &*served) {
                Some(document) => documents::openapi(&document, headers, query, path, true),
                None => error_response(&not_found_path()),
            }
        }
        Route::OpenApiV2 => {
            let served = state.registry.custom().snapshot();
            let document = crate::openapi::v2_document(custom, &*served);
            documents::openapi(&document, headers, query, path, false)
        }
        Route::Resource(_) | Route::MetricsAdapter => error_response(&not_found_path()),
    }
}

/// A read of the emulated custom or external metrics adapter, authorized as kube-apiserver
/// authorizes a request it proxies to an adapter.
async fn adapter_request(
    state: &AppState,
    user: &Arc<UserInfo>,
    method: &Method,
    path: &str,
    query: &HashMap<String, String>,
) -> Result<Response, ApiError> {
    let read = crate::custom_metrics::MetricsRead::parse(path, query).ok_or_else(not_found_path)?;
    if method != Method::GET {
        return Err(ApiError::MethodNotAllowed {
            message: format!(
                "the server does not allow this method on the requested resource ({method})"
            ),
        });
    }
    let read_attributes = read.attributes();
    let attributes = Attributes {
        user,
        verb: read_attributes.verb,
        target: Target::Resource(ResourceAttributes {
            group: read_attributes.group,
            resource: &read_attributes.resource,
            subresource: &read_attributes.subresource,
            namespace: &read_attributes.namespace,
            name: &read_attributes.name,
            field_selector: None,
            object: None,
        }),
    };
    state.authorizer.check_consistent(&attributes).await?;
    let value = crate::custom_metrics::serve(&state.registry, &read).await?;
    Ok(json_response(StatusCode::OK, &value))
}

fn not_found_path() -> ApiError {
    ApiError::NotFound {
        message: "the server could not find the requested resource".into(),
        name: String::new(),
        group: String::new(),
        kind: String::new(),
    }
}

/// Authorizes a resource request, then serves it. Reviews are answered here; a node host's
/// create is read first, since the node authorizer decides on the new object's name.
async fn authorized_resource_request(
    state: &AppState,
    user: &Arc<UserInfo>,
    target: PathTarget,
    method: &Method,
    query: &HashMap<String, String>,
    request: Request,
    authz_time: &mut Duration,
) -> Result<Response, ApiError> {
    let watch = target.watch_path || is_true(query.get("watch"));
    // A WebSocket's GET to exec, attach or port-forward is authorized as the create it is.
    let verb = match target.subresource.as_deref() {
        Some("exec" | "attach" | "portforward") => "create",
        _ => authz::resource_verb(method.as_str(), target.name.is_some(), watch),
    };
    let resource = target.resource;
    let node_host = user.in_group(authn::NODES);
    // The object a node host creates or replaces, decoded up front.
    let mut object = None;
    let mut request = request;
    if node_host && matches!(verb, "create" | "update") && target.subresource.is_none() {
        let (parts, body) = request.into_parts();
        let content_type = parts
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/json")
            .to_string();
        let bytes = read_body(Request::from_parts(parts.clone(), body)).await?;
        let mut value = decode_object_for(Some(resource), &content_type, &bytes)?;
        authz::node::claim(user, resource, &mut value);
        let mut parts = parts;
        parts.headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        parts.headers.remove(header::CONTENT_LENGTH);
        let encoded = serde_json::to_vec(&value)
            .map_err(|e| ApiError::internal(format!("cannot encode an object: {e}")))?;
        request = Request::from_parts(parts, Body::from(encoded));
        object = Some(value);
    }
    let namespace = target.namespace.as_deref().unwrap_or("");
    let name = target.name.as_deref().unwrap_or("");
    let subresource = target.subresource.as_deref().unwrap_or("");
    let field_selector = match (&target.name, query.get("fieldSelector")) {
        (Some(_), _) => None,
        (None, selector) => selector.map(String::as_str),
    };
    let authz_started = Instant::now();
    let attributes = Attributes {
        user,
        verb,
        target: Target::Resource(ResourceAttributes {
            field_selector,
            object: object.as_ref(),
            ..ResourceAttributes::on(resource, subresource, namespace, name)
        }),
    };
    let allowed = state.authorizer.check_consistent(&attributes).await;
    *authz_time = authz_started.elapsed();
    state.registry.pipeline().observe(Stage::Authz, *authz_time);
    allowed?;
    if reviews::is_review(resource) {
        if *method != Method::POST || target.name.is_some() {
            return Err(ApiError::MethodNotAllowed {
                message: format!(
                    "the server does not allow this method on the requested resource ({method})"
                ),
            });
        }
        let body = read_object(resource, request).await?;
        let answered = reviews::answer(
            resource,
            &state.authorizer,
            user,
            target.namespace.as_deref(),
            body,
        )?;
        return Ok(json_response(StatusCode::CREATED, &answered));
    }
    if crate::resource_metrics::is_metrics(resource) && !resource.verbs.contains(&verb) {
        return Err(ApiError::MethodNotAllowed {
            message: format!(
                "the server does not allow this method on the requested resource ({method})"
            ),
        });
    }
    let warnings = Warnings::default();
    let response = resource_request(
        state,
        user,
        target,
        method.clone(),
        query,
        request,
        &warnings,
    )
    .await?;
    Ok(field_warnings::attach(response, &warnings))
}

async fn resource_request(
    state: &AppState,
    user: &Arc<UserInfo>,
    target: PathTarget,
    method: Method,
    query: &HashMap<String, String>,
    request: Request,
    warnings: &Warnings,
) -> Result<Response, ApiError> {
    let registry = &state.registry;
    let resource = target.resource;
    let ns = target.namespace.as_deref();
    if resource.namespaced && ns.is_none() && target.name.is_some() {
        return Err(not_found_path());
    }
    let headers = request.headers().clone();
    // Only reads are answered in another form; a write answers with the object.
    let form = if method == Method::GET {
        negotiate::negotiate(&headers)?
    } else {
        Form::Object
    };
    let table = form == Form::Table;
    let custom = registry.custom().of(resource);
    let mut write = write_options(&method, query)?;
    write.requester = Some(user.clone());
    write.node_host = user.in_group(authn::NODES);
    write.warnings = Some(warnings.clone());
    write.agent_manager = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(crate::field_manager::manager_from_user_agent);
    match (
        &method,
        target.name.as_deref(),
        target.subresource.as_deref(),
    ) {
        (&Method::GET, _, _) if target.watch_path || is_true(query.get("watch")) => {
            let mut options = list_options(query)?;
            if let Some(name) = &target.name {
                let by_name = format!("metadata.name={name}");
                options.field_selector = Some(match options.field_selector.take() {
                    Some(f) if !f.is_empty() => format!("{f},{by_name}"),
                    _ => by_name,
                });
            }
            if form == Form::MetadataList {
                return Err(negotiate::not_a_list(resource, custom.is_some()));
            }
            watch::watch(state, resource, ns, options, query, form, custom).await
        }
        (&Method::GET, None, None) => {
            if form == Form::Metadata {
                return Err(negotiate::is_a_list(resource, custom.is_some()));
            }
            let options = list_options(query)?;
            let listed = registry.list(resource, ns, &options).await?;
            if form == Form::MetadataList {
                let objects = listed
                    .items
                    .iter()
                    .map(|o| o.value())
                    .collect::<Result<Vec<_>, _>>()?;
                let body = negotiate::partial_list(
                    &objects,
                    listed.resource_version,
                    listed.continue_token.as_deref(),
                );
                return Ok(json_response(StatusCode::OK, &body));
            }
            if table {
                let objects = listed
                    .items
                    .iter()
                    .map(|o| o.value())
                    .collect::<Result<Vec<_>, _>>()?;
                let include = IncludeObject::parse(
                    query
                        .get("includeObject")
                        .map(String::as_str)
                        .unwrap_or("Metadata"),
                );
                let rv = listed.resource_version.to_string();
                let t = custom_or_kemu_table(
                    custom.as_deref(),
                    resource,
                    &objects,
                    include,
                    &rv,
                    listed.continue_token.as_deref(),
                );
                return Ok(json_response(StatusCode::OK, &t));
            }
            if let Some(custom) = &custom {
                let body = crate::crd::output::list_body(
                    custom,
                    &listed.items,
                    listed.resource_version,
                    listed.continue_token.as_deref(),
                );
                return Ok(bytes_response(StatusCode::OK, body.to_vec()));
            }
            Ok(list_response(
                resource,
                &listed.items,
                listed.resource_version,
                listed.continue_token.as_deref(),
            ))
        }
        // `status` is read as the object itself, and printed with the same columns.
        (&Method::GET, Some(name), None | Some("status")) => {
            if form == Form::MetadataList {
                return Err(negotiate::not_a_list(resource, custom.is_some()));
            }
            let object = registry.get(resource, ns, name).await?;
            if form == Form::Metadata {
                return Ok(json_response(StatusCode::OK, &negotiate::partial(&object)));
            }
            if table {
                let include = IncludeObject::parse(
                    query
                        .get("includeObject")
                        .map(String::as_str)
                        .unwrap_or("Metadata"),
                );
                let rv = crate::meta::resource_version(&object).to_string();
                let t = custom_or_kemu_table(
                    custom.as_deref(),
                    resource,
                    &[object],
                    include,
                    &rv,
                    None,
                );
                return Ok(json_response(StatusCode::OK, &t));
            }
            Ok(json_response(StatusCode::OK, &object))
        }
        (&Method::GET, Some(name), Some("log")) => {
            let ns = ns.ok_or_else(|| ApiError::bad_request("a namespace is required"))?;
            crate::logs::pod_log(registry, ns, name, query).await
        }
        (
            &Method::GET | &Method::POST,
            Some(name),
            Some(sub @ ("exec" | "attach" | "portforward")),
        ) => {
            let ns = ns.ok_or_else(|| ApiError::bad_request("a namespace is required"))?;
            let tokens = state.authenticator.service_accounts().map(|t| &**t);
            crate::remote::serve(registry, tokens, ns, name, sub, request).await
        }
        (&Method::POST, None, None) => {
            let body = field_warnings::read_object(resource, request, &mut write).await?;
            let created = registry.create(resource, ns, body, &write).await?;
            Ok(json_response(StatusCode::CREATED, &created))
        }
        (&Method::POST, Some(name), Some("token"))
            if resource.group.is_empty() && resource.plural == "serviceaccounts" =>
        {
            let request = read_object(resource, request).await?;
            let tokens = state
                .authenticator
                .service_accounts()
                .ok_or_else(|| ApiError::internal("this server signs no tokens"))?;
            let account = registry.get(resource, ns, name).await?;
            let answered = crate::service_account_tokens::answer(
                tokens,
                &account,
                &request,
                chrono::Utc::now(),
            )?;
            Ok(json_response(StatusCode::CREATED, &answered))
        }
        (&Method::POST, Some(name), Some("binding")) => {
            let body = read_object(resource, request).await?;
            let ns = ns.ok_or_else(|| ApiError::bad_request("a namespace is required"))?;
            registry.bind(ns, name, &body).await?;
            Ok(json_response(
                StatusCode::CREATED,
                &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
            ))
        }
        (&Method::POST, Some(name), Some("eviction")) if resource.has_subresource("eviction") => {
            // A protobuf body's envelope names the Eviction kind, so it decodes as one.
            let body = read_object(resource, request).await?;
            let ns = ns.ok_or_else(|| ApiError::bad_request("a namespace is required"))?;
            let answer = crate::eviction::evict(registry, ns, name, &body, &write).await?;
            let code = StatusCode::from_u16(answer.code).unwrap_or(StatusCode::CREATED);
            Ok(json_response(code, &answer.body))
        }
        (&Method::PUT, Some(name), sub @ (None | Some("status") | Some("finalize"))) => {
            let body = field_warnings::read_object(resource, request, &mut write).await?;
            let sub = if sub == Some("finalize") {
                Some("finalize")
            } else {
                sub
            };
            let updated = if sub == Some("finalize") {
                finalize_namespace(registry, name, body, &write).await?
            } else {
                registry
                    .update(resource, ns, name, sub, body, &write)
                    .await?
            };
            Ok(json_response(StatusCode::OK, &updated))
        }
        (&Method::GET | &Method::PUT | &Method::PATCH, Some(name), Some("scale"))
            if resource.has_subresource("scale") =>
        {
            let change = if method == Method::GET {
                None
            } else {
                let content_type = headers
                    .get(header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("application/merge-patch+json");
                let patch_type = match method {
                    Method::PUT => PatchType::Merge,
                    _ => PatchType::from_content_type(content_type).unwrap_or(PatchType::Merge),
                };
                Some((patch_type, read_body(request).await?))
            };
            let change = change.as_ref().map(|(t, b)| (*t, b.as_ref()));
            let scale = crate::scale::serve(registry, resource, ns, name, change, &write).await?;
            Ok(json_response(StatusCode::OK, &scale))
        }
        (&Method::PATCH, Some(name), sub @ (None | Some("status"))) => {
            let content_type = headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            let patch_type = PatchType::from_content_type(content_type)
                .filter(|t| custom.is_none() || *t != PatchType::StrategicMerge)
                .ok_or_else(|| unsupported_patch(custom.is_some()))?;
            if patch_type == PatchType::Apply && write.field_manager.is_none() {
                return Err(ApiError::bad_request("PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"));
            }
            let body = read_body(request).await?;
            let force = is_true(query.get("force"));
            let patched = registry
                .patch(resource, ns, name, sub, patch_type, &body, force, &write)
                .await?;
            Ok(json_response(StatusCode::OK, &patched))
        }
        (&Method::DELETE, Some(name), None) => {
            let body = read_body(request).await?;
            let options = delete_options(&body, query)?;
            match registry.delete(resource, ns, name, &options).await? {
                Deleted::Gone(object) => Ok(json_response(StatusCode::OK, &object)),
                Deleted::Pending(object) => Ok(json_response(StatusCode::OK, &object)),
            }
        }
        (&Method::DELETE, None, None) => {
            let body = read_body(request).await?;
            let options = delete_options(&body, query)?;
            let deleted = registry
                .delete_collection(resource, ns, &list_options(query)?, &options)
                .await?;
            let items: Vec<Value> = deleted
                .into_iter()
                .map(|mut item| {
                    if let Some(map) = item.as_object_mut() {
                        map.remove("kind");
                        map.remove("apiVersion");
                    }
                    item
                })
                .collect();
            Ok(json_response(
                StatusCode::OK,
                &json!({"kind": resource.list_kind(), "apiVersion": resource.api_version(), "metadata": {}, "items": items}),
            ))
        }
        _ => Err(ApiError::MethodNotAllowed {
            message: format!(
                "the server does not allow this method on the requested resource ({method})"
            ),
        }),
    }
}

/// A PATCH whose content type the resource does not take (custom resources take no strategic
/// merge patch: their schema carries no patch strategy).
pub(crate) fn unsupported_patch(custom: bool) -> ApiError {
    let strategic = if custom {
        ""
    } else {
        ", application/strategic-merge-patch+json"
    };
    ApiError::UnsupportedMediaType {
        message: format!("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml{strategic}"),
    }
}

/// A create or update body of a media type the server does not decode: kube-apiserver's
/// message lists the types it serves and does not repeat the one sent.
fn unsupported_body() -> ApiError {
    ApiError::UnsupportedMediaType {
        message: "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf".into(),
    }
}

/// A Table of `objects`: a custom resource's columns, or the printer of a kemu kind.
fn custom_or_kemu_table(
    custom: Option<&crate::crd::ServedVersion>,
    resource: &ResourceInfo,
    objects: &[Value],
    include: IncludeObject,
    rv: &str,
    continue_token: Option<&str>,
) -> Value {
    let now = chrono::Utc::now();
    match custom {
        Some(custom) => {
            crate::crd::output::table(custom, objects, include, now, rv, continue_token)
        }
        None => printers::table(resource, objects, include, now, rv, continue_token),
    }
}

/// `namespaces/{name}/finalize`: replaces spec.finalizers; an emptied, terminating namespace
/// is removed.
pub(crate) async fn finalize_namespace(
    registry: &Registry,
    name: &str,
    body: Value,
    write: &WriteOptions,
) -> Result<Value, ApiError> {
    let namespaces = api::resources::find("", "v1", "namespaces")
        .ok_or_else(|| ApiError::internal("no namespaces"))?;
    let finalizers = body
        .pointer("/spec/finalizers")
        .cloned()
        .unwrap_or(json!([]));
    let patch = json!({"spec": {"finalizers": finalizers}}).to_string();
    let patched = registry
        .patch(
            namespaces,
            None,
            name,
            Some("finalize"),
            PatchType::Merge,
            patch.as_bytes(),
            false,
            write,
        )
        .await?;
    let empty = patched
        .pointer("/spec/finalizers")
        .and_then(Value::as_array)
        .is_none_or(|a| a.is_empty());
    if empty
        && crate::meta::deletion_timestamp(&patched).is_some()
        && crate::meta::finalizers(&patched).is_empty()
    {
        registry
            .delete(namespaces, None, name, &DeleteOptions::default())
            .await?;
    }
    Ok(patched)
}

/// A cached object's JSON, converted when the resource is another view of the stored objects
/// (events.k8s.io/v1 events are stored as core/v1, autoscaling/v1 autoscalers as v2).
fn object_json<'a>(resource: &ResourceInfo, object: &'a CachedObject) -> Cow<'a, [u8]> {
    if crate::crd::is_custom(resource) {
        return Cow::Owned(crate::crd::output::view_json(resource, &object.json).to_vec());
    }
    if !crate::registry::is_converted_view(resource) {
        return Cow::Borrowed(&object.json);
    }
    let value = object.value().unwrap_or(Value::Null);
    let converted = crate::registry::view(resource, value);
    Cow::Owned(crate::go_json::to_vec(&converted))
}

fn put_object(out: &mut BytesMut, resource: &ResourceInfo, object: &CachedObject) {
    out.put_slice(&object_json(resource, object));
}

/// A list built from the cached JSON without re-encoding each item.
fn list_response(
    resource: &ResourceInfo,
    items: &[Arc<CachedObject>],
    rv: i64,
    continue_token: Option<&str>,
) -> Response {
    let size: usize = items.iter().map(|o| o.json.len() + 1).sum();
    let mut body = BytesMut::with_capacity(size + 256);
    let metadata = match continue_token {
        Some(c) => json!({"resourceVersion": rv.to_string(), "continue": c}),
        None => json!({"resourceVersion": rv.to_string()}),
    };
    let metadata = crate::go_json::to_vec_as(&metadata, &crate::go_json::LIST_META);
    body.put_slice(
        format!(
            "{{\"kind\":\"{}\",\"apiVersion\":\"{}\",\"metadata\":",
            resource.list_kind(),
            resource.api_version(),
        )
        .as_bytes(),
    );
    body.put_slice(&metadata);
    body.put_slice(b",\"items\":[");
    // Items carry no kind and apiVersion (Go leaves an item's TypeMeta empty); in the stored
    // field order they lead each object, so they are cut from the front of its bytes.
    let type_meta = format!(
        "{{\"kind\":\"{}\",\"apiVersion\":\"{}\",",
        resource.kind,
        resource.api_version()
    );
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            body.put_u8(b',');
        }
        let item_json = object_json(resource, item);
        match item_json.strip_prefix(type_meta.as_bytes()) {
            Some(rest) => {
                body.put_u8(b'{');
                body.put_slice(rest);
            }
            None => body.put_slice(&item_json),
        }
    }
    body.put_slice(b"]}\n");
    let mut response = Response::new(Body::from(body.freeze()));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn json_response(code: StatusCode, value: &Value) -> Response {
    let mut body = crate::go_json::to_vec(value);
    body.push(b'\n');
    bytes_response(code, body)
}

/// A JSON body already encoded (with its trailing newline).
fn bytes_response(code: StatusCode, body: Vec<u8>) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = code;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

pub fn error_response(e: &ApiError) -> Response {
    json_response(
        StatusCode::from_u16(e.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        &e.status(),
    )
}

async fn read_body(request: Request) -> Result<Bytes, ApiError> {
    axum::body::to_bytes(request.into_body(), MAX_BODY_BYTES)
        .await
        .map_err(|_| ApiError::TooLarge {
            message: format!("the request body is larger than the limit of {MAX_BODY_BYTES} bytes"),
        })
}

/// Reads a JSON, YAML or (for `resource`'s kinds) Kubernetes protobuf object body.
async fn read_object(resource: &ResourceInfo, request: Request) -> Result<Value, ApiError> {
    let content_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_string();
    let body = read_body(request).await?;
    decode_object_for(Some(resource), &content_type, &body)
}

pub fn decode_object(content_type: &str, body: &[u8]) -> Result<Value, ApiError> {
    decode_object_for(None, content_type, body)
}

/// Decodes a request body; protobuf needs the `resource` it was sent to.
pub fn decode_object_for(
    resource: Option<&ResourceInfo>,
    content_type: &str,
    body: &[u8],
) -> Result<Value, ApiError> {
    // The media type is negotiated before the body is read, as kube-apiserver does: only the
    // types it serves (Go's mime parsing: case-insensitive, parameters ignored), and JSON when
    // none is given.
    let media = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if !matches!(
        media.as_str(),
        "" | "application/json" | "application/yaml" | "application/vnd.kubernetes.protobuf"
    ) {
        return Err(unsupported_body());
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request(
            "the request body is empty; an object was expected",
        ));
    }
    let value: Value = match media.as_str() {
        "application/yaml" => serde_saphyr::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!(
                "error converting YAML to JSON: yaml: {}",
                e.without_snippet()
            ))
        })?,
        "application/json" | "" => serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
        })?,
        "application/vnd.kubernetes.protobuf" => match resource {
            Some(resource) => {
                crate::protobuf::decode_request(resource, body).map_err(|e| match e {
                    crate::protobuf::ProtobufError::Unsupported(message) => {
                        ApiError::UnsupportedMediaType { message }
                    }
                    crate::protobuf::ProtobufError::Malformed(message) => {
                        ApiError::bad_request(message)
                    }
                })?
            }
            None => {
                return Err(ApiError::UnsupportedMediaType {
                    message: "protobuf is not supported here; send JSON or YAML".into(),
                })
            }
        },
        _ => return Err(unsupported_body()),
    };
    if !value.is_object() {
        return Err(ApiError::bad_request("the request body must be an object"));
    }
    Ok(value)
}

fn parse_query(query: &str) -> HashMap<String, String> {
    serde_urlencoded::from_str::<Vec<(String, String)>>(query)
        .unwrap_or_default()
        .into_iter()
        .collect()
}

fn is_true(value: Option<&String>) -> bool {
    matches!(value.map(String::as_str), Some("true" | "1"))
}

fn list_options(query: &HashMap<String, String>) -> Result<ListOptions, ApiError> {
    let limit = match query.get("limit") {
        Some(l) if !l.is_empty() => l
            .parse::<usize>()
            .map_err(|_| ApiError::bad_request(format!("invalid limit \"{l}\"")))?,
        _ => 0,
    };
    Ok(ListOptions {
        label_selector: query.get("labelSelector").cloned(),
        field_selector: query.get("fieldSelector").cloned(),
        limit,
        continue_token: query.get("continue").filter(|c| !c.is_empty()).cloned(),
        resource_version: query.get("resourceVersion").cloned(),
    })
}

/// The options of a write; `method` says which options type a bad value is reported in.
fn write_options(
    method: &Method,
    query: &HashMap<String, String>,
) -> Result<WriteOptions, ApiError> {
    let options_kind = match *method {
        Method::POST => "CreateOptions",
        Method::PUT => "UpdateOptions",
        Method::PATCH => "PatchOptions",
        Method::DELETE => "DeleteOptions",
        _ => "",
    };
    let dry_run = match query.get("dryRun") {
        Some(value) if !options_kind.is_empty() => dry_run::parse(&[value.as_str()], options_kind)?,
        _ => false,
    };
    let field_manager = query.get("fieldManager").filter(|m| !m.is_empty()).cloned();
    if let Some(manager) = &field_manager {
        let causes = crate::field_manager::validate_manager(manager);
        if !causes.is_empty() {
            let listed: Vec<String> = causes
                .iter()
                .map(|c| format!("{}: {}", c.field, c.message))
                .collect();
            let listed = match listed.as_slice() {
                [one] => one.clone(),
                many => format!("[{}]", many.join(", ")),
            };
            return Err(ApiError::Invalid {
                message: format!("{options_kind}.meta.k8s.io \"\" is invalid: {listed}"),
                name: String::new(),
                group: "meta.k8s.io".into(),
                kind: options_kind.into(),
                causes,
            });
        }
    }
    Ok(WriteOptions {
        dry_run,
        field_validation: FieldValidation::parse(
            query
                .get("fieldValidation")
                .map(String::as_str)
                .unwrap_or(""),
        )?,
        field_manager,
        ..Default::default()
    })
}

fn delete_options(body: &[u8], query: &HashMap<String, String>) -> Result<DeleteOptions, ApiError> {
    let value = if body.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?
    };
    let body_dry_run = dry_run::from_delete_options(&value)?;
    let mut options = DeleteOptions::from_body(&value)?;
    options.dry_run = body_dry_run;
    if let Some(grace) = query.get("gracePeriodSeconds") {
        options.grace_period_seconds = Some(
            grace
                .parse()
                .map_err(|_| ApiError::bad_request("gracePeriodSeconds must be an integer"))?,
        );
    }
    if let Some(policy) = query.get("propagationPolicy") {
        options.propagation_policy = Some(policy.clone());
    }
    if let Some(value) = query.get("dryRun") {
        options.dry_run |= dry_run::parse(&[value.as_str()], "DeleteOptions")?;
    }
    Ok(options)
}

#[cfg(test)]
mod tests;
