//! [`Client`]: how kemu's components reach the cluster — one mTLS QUIC connection to an API
//! server's component front, carrying every call and every watch (one QUIC stream each).
//!
//! The connection is made lazily and shared by every clone of the client. When it breaks, the
//! next call reconnects (moving on to the next endpoint, with backoff) within its own timeout.
//! Reads are retried across a reconnect; a write whose connection broke under it is reported as
//! [`ClientError::Transport`], because it may or may not have been applied.
//!
//! Watches do not resume by themselves: a [`WatchStream`] ends when its stream does, and the
//! [informer](crate::informer) decides whether to re-watch or re-list.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tracing::{debug, warn};
use transport::rpc::{Connection, ResponseStream, RpcClient};
use transport::tls::TlsIdentity;
use transport::{Endpoint, TransportError};

use crate::protocol::{
    ApiRequest, ApiResponse, CreateOutcome, NewObject, ResourceRef, WatchFrame, APPLY_PATCH,
    JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH,
};
use crate::resources::ResourceInfo;

/// Silence from the API server (no packet while this process kept time) after which a client
/// with other API servers to choose from closes the connection and moves on.
pub const SILENT_AFTER: Duration = Duration::from_secs(2);

/// The same for a client with one API server: it reconnects to the same address (a restarted
/// server listens there again). Longer, as there is nowhere else to go: a server starved of CPU
/// for a moment keeps its connection.
pub const SOLE_SILENT_AFTER: Duration = Duration::from_secs(5);

/// How a call can fail. Only [`Api`](ClientError::Api) is the server's answer; the others say
/// the answer never arrived.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The API server refused or failed the request (its `Status`).
    #[error("{message} ({code} {reason})")]
    Api {
        code: u16,
        /// `Status.reason`, e.g. `NotFound`, `Conflict`, `Expired`.
        reason: String,
        message: String,
    },
    /// The connection or the call's stream broke. For a write, it may or may not have been
    /// applied.
    #[error("transport: {0}")]
    Transport(#[source] TransportError),
    /// No answer within the call timeout (servers unreachable, or too slow).
    #[error("no answer within {after:?} ({last_error})")]
    Timeout { after: Duration, last_error: String },
    /// An answer that does not decode as the expected object.
    #[error("cannot decode the server's answer: {0}")]
    Decode(#[source] serde_json::Error),
    /// A body that cannot be encoded as JSON.
    #[error("cannot encode the request body: {0}")]
    Encode(#[source] serde_json::Error),
    /// An answer of the wrong shape for the call (a server speaking another protocol version).
    #[error("unexpected answer: {0}")]
    Protocol(String),
    /// The client's configuration is unusable.
    #[error("client config {field}: {reason}")]
    Config { field: &'static str, reason: String },
}

impl ClientError {
    /// The Status code of an API error.
    pub fn code(&self) -> Option<u16> {
        match self {
            ClientError::Api { code, .. } => Some(*code),
            _ => None,
        }
    }

    pub fn is_not_found(&self) -> bool {
        self.code() == Some(404)
    }

    /// A conflict (lost optimistic-concurrency race) or an already existing object.
    pub fn is_conflict(&self) -> bool {
        self.code() == Some(409)
    }

    pub fn is_already_exists(&self) -> bool {
        matches!(self, ClientError::Api { reason, .. } if reason == "AlreadyExists")
    }

    /// The requested resourceVersion is too old: re-list.
    pub fn is_gone(&self) -> bool {
        self.code() == Some(410)
    }

    /// Builds the error from an `ApiResponse::Error`.
    pub fn from_status(code: u16, status: &[u8]) -> ClientError {
        let parsed: Value = serde_json::from_slice(status).unwrap_or(Value::Null);
        let text = |field: &str| {
            parsed
                .get(field)
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        ClientError::Api {
            code,
            reason: text("reason").unwrap_or_default(),
            message: text("message")
                .unwrap_or_else(|| String::from_utf8_lossy(status).into_owned()),
        }
    }
}

/// Client settings: a plain struct with defaults in [`ClientConfig::new`].
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// API servers' QUIC fronts (addresses or `host:port`, resolved at each connect); the
    /// client uses one at a time and moves on when it fails.
    pub endpoints: Vec<Endpoint>,
    pub certs_dir: PathBuf,
    /// Which certificate in `certs_dir` this component presents (its identity).
    pub identity: String,
    /// How long one call may take in all, reconnecting included.
    pub call_timeout: Duration,
    /// First pause between connection attempts; doubles up to `max_backoff`.
    pub min_backoff: Duration,
    pub max_backoff: Duration,
}

impl ClientConfig {
    pub fn new<E: Into<Endpoint>>(
        endpoints: impl IntoIterator<Item = E>,
        certs_dir: impl Into<PathBuf>,
        identity: impl Into<String>,
    ) -> ClientConfig {
        ClientConfig {
            endpoints: endpoints.into_iter().map(Into::into).collect(),
            certs_dir: certs_dir.into(),
            identity: identity.into(),
            call_timeout: Duration::from_secs(30),
            min_backoff: Duration::from_millis(20),
            // Short: while an API server restarts, every pause of a longer back-off is time its
            // clients stay away after it is back.
            max_backoff: Duration::from_millis(200),
        }
    }

    pub fn validate(&self) -> Result<(), ClientError> {
        let invalid = |field, reason: &str| {
            Err(ClientError::Config {
                field,
                reason: reason.into(),
            })
        };
        if self.endpoints.is_empty() {
            return invalid("endpoints", "at least one is required");
        }
        if self.call_timeout.is_zero() {
            return invalid("call_timeout", "must be positive");
        }
        if self.min_backoff.is_zero() || self.max_backoff < self.min_backoff {
            return invalid("min_backoff", "must be positive and not above max_backoff");
        }
        Ok(())
    }
}

/// Options of a list or a watch (the query parameters of the HTTP API).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListParams {
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    /// List: unset is a consistent read, "0" any cached state. Watch: events after it.
    pub resource_version: Option<String>,
    /// List only; 0 means everything.
    pub limit: usize,
    /// List only: the token of the previous page.
    pub continue_token: Option<String>,
    /// Watch only: replay the current state first, then a bookmark (needs `bookmarks`).
    pub send_initial_events: bool,
    /// Watch only: periodic bookmarks carrying the newest covered resourceVersion.
    pub bookmarks: bool,
}

impl ListParams {
    pub fn labels(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }

    pub fn fields(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = Some(selector.into());
        self
    }

    pub fn at(mut self, resource_version: impl Into<String>) -> Self {
        self.resource_version = Some(resource_version.into());
        self
    }

    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }

    pub fn bookmarks(mut self) -> Self {
        self.bookmarks = true;
        self
    }
}

/// DeleteOptions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeleteParams {
    pub grace_period_seconds: Option<i64>,
    /// `Orphan`, `Background` or `Foreground`.
    pub propagation_policy: Option<String>,
    /// Delete only if the object still has this uid (a kubelet deleting the pod it ran).
    pub precondition_uid: Option<String>,
    pub precondition_resource_version: Option<String>,
    pub dry_run: bool,
}

impl DeleteParams {
    /// Immediate deletion (grace period 0), as a kubelet finishes a terminated pod.
    pub fn now() -> DeleteParams {
        DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        }
    }

    /// The `DeleteOptions` JSON body.
    pub fn to_json(&self) -> Bytes {
        let mut body = json!({"kind": "DeleteOptions", "apiVersion": "v1"});
        if let Some(grace) = self.grace_period_seconds {
            body["gracePeriodSeconds"] = json!(grace);
        }
        if let Some(policy) = &self.propagation_policy {
            body["propagationPolicy"] = json!(policy);
        }
        if let Some(uid) = &self.precondition_uid {
            body["preconditions"]["uid"] = json!(uid);
        }
        if let Some(rv) = &self.precondition_resource_version {
            body["preconditions"]["resourceVersion"] = json!(rv);
        }
        if self.dry_run {
            body["dryRun"] = json!(["All"]);
        }
        Bytes::from(body.to_string())
    }
}

/// A `PartialObjectMetadata` answer: only the metadata is read.
#[derive(Deserialize)]
struct PartialObject {
    #[serde(default)]
    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
}

/// A patch and its type.
#[derive(Clone, Debug, PartialEq)]
pub enum Patch {
    /// JSON merge patch (RFC 7386).
    Merge(Value),
    /// JSON patch (RFC 6902): an array of operations.
    Json(Value),
    /// Kubernetes strategic merge patch.
    Strategic(Value),
    /// Server-side apply of a (partial) object owned by `field_manager`.
    Apply {
        object: Value,
        field_manager: String,
        force: bool,
    },
}

impl Patch {
    fn content_type(&self) -> &'static str {
        match self {
            Patch::Merge(_) => MERGE_PATCH,
            Patch::Json(_) => JSON_PATCH,
            Patch::Strategic(_) => STRATEGIC_MERGE_PATCH,
            Patch::Apply { .. } => APPLY_PATCH,
        }
    }

    fn body(&self) -> &Value {
        match self {
            Patch::Merge(v) | Patch::Json(v) | Patch::Strategic(v) => v,
            Patch::Apply { object, .. } => object,
        }
    }
}

/// A page of a list, decoded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ObjectList<T> {
    /// The revision the list reflects: watch from here to follow it.
    pub resource_version: String,
    pub continue_token: Option<String>,
    pub items: Vec<T>,
}

/// The served resource of a k8s-openapi type, e.g. `resource_of::<Pod>()`.
pub fn resource_of<K: k8s_openapi::Resource>() -> Option<&'static ResourceInfo> {
    crate::resources::find(K::GROUP, K::VERSION, K::URL_PATH_SEGMENT)
}

/// A component's API client; cheap to clone, and every clone shares one connection.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("endpoints", &self.inner.config.endpoints)
            .field("identity", &self.inner.config.identity)
            .finish_non_exhaustive()
    }
}

struct Inner {
    rpc: RpcClient,
    config: ClientConfig,
    /// The shared connection, while it is open.
    current: Mutex<Option<Connection>>,
    /// Held while connecting, so that calls arriving together (hundreds of watches at start-up)
    /// wait for one connection instead of each making their own. Holds the index of the
    /// endpoint to try next.
    connecting: tokio::sync::Mutex<usize>,
    /// Why the last connection attempt failed, for timeout messages.
    last_error: Mutex<String>,
}

impl Client {
    /// A client presenting the certificate `config.identity` from `config.certs_dir`. Connects
    /// on first use. Must be called inside a Tokio runtime.
    pub fn new(config: ClientConfig) -> Result<Client, ClientError> {
        config.validate()?;
        let identity = TlsIdentity::load(&config.certs_dir, &config.identity)
            .map_err(ClientError::Transport)?;
        Client::with_identity(config, &identity)
    }

    /// A client with an already loaded identity (`config.certs_dir`/`identity` are not read).
    pub fn with_identity(
        config: ClientConfig,
        identity: &TlsIdentity,
    ) -> Result<Client, ClientError> {
        config.validate()?;
        let rpc = RpcClient::new(identity).map_err(ClientError::Transport)?;
        Ok(Client {
            inner: Arc::new(Inner {
                rpc,
                config,
                current: Mutex::new(None),
                connecting: tokio::sync::Mutex::new(0),
                last_error: Mutex::new("not connected yet".into()),
            }),
        })
    }

    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// The server this client is connected to right now, if any.
    pub fn connected_to(&self) -> Option<SocketAddr> {
        self.open_connection().map(|c| c.remote_address())
    }

    /// Drops the current connection (calls in flight on it fail); the next call reconnects.
    pub fn disconnect(&self) {
        if let Some(connection) = lock(&self.inner.current).take() {
            connection.close();
        }
    }

    pub async fn get<T: DeserializeOwned>(
        &self,
        resource: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<T, ClientError> {
        self.get_subresource(resource, namespace, name, None).await
    }

    /// Reads a subresource (`scale`, `status`) of an object.
    pub async fn get_subresource<T: DeserializeOwned>(
        &self,
        resource: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        subresource: Option<&str>,
    ) -> Result<T, ClientError> {
        let request = ApiRequest::Get {
            resource: ResourceRef::from_info(resource),
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
            subresource: subresource.map(str::to_string),
        };
        self.object(&request).await
    }

    /// Reads a path outside the resource table (the custom and external metrics adapters'),
    /// its query included.
    pub async fn get_path<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        let request = ApiRequest::GetPath {
            path: path.to_string(),
        };
        self.object(&request).await
    }

    /// One page of a list (all of it unless `params.limit` is set).
    pub async fn list<T: DeserializeOwned>(
        &self,
        resource: &ResourceInfo,
        namespace: Option<&str>,
        params: &ListParams,
    ) -> Result<ObjectList<T>, ClientError> {
        let raw = self.list_raw(resource, namespace, params).await?;
        Ok(ObjectList {
            resource_version: raw.resource_version,
            continue_token: raw.continue_token,
            items: raw
                .items
                .iter()
                .map(|item| decode(item))
                .collect::<Result<_, _>>()?,
        })
    }

    /// A list whose items are left as JSON bytes.
    pub async fn list_raw(
        &self,
        resource: &ResourceInfo,
        namespace: Option<&str>,
        params: &ListParams,
    ) -> Result<ObjectList<Bytes>, ClientError> {
        let request = ApiRequest::List {
            resource: ResourceRef::from_info(resource),
            namespace: namespace.map(str::to_string),
            label_selector: params.label_selector.clone(),
            field_selector: params.field_selector.clone(),
            resource_version: params.resource_version.clone(),
            limit: params.limit,
            continue_token: params.continue_token.clone(),
        };
        match self.call(&request).await? {
            ApiResponse::List {
                resource_version,
                continue_token,
                items,
            } => Ok(ObjectList {
                resource_version,
                continue_token,
                items,
            }),
            other => Err(unexpected(&other)),
        }
    }

    pub async fn create<B: Serialize, T: DeserializeOwned>(
        &self,
        resource: &ResourceInfo,
        namespace: Option<&str>,
        object: &B,
    ) -> Result<T, ClientError> {
        let request = ApiRequest::Create {
            resource: ResourceRef::from_info(resource),
            namespace: namespace.map(str::to_string),
            object: encode(object)?,
        };
        self.object(&request).await
    }

    /// Several creates of one resource in one call ([`ApiRequest::CreateMany`]); each item
    /// succeeds or fails alone: the answer is each one's resourceVersion or its error, in order.
    /// The call itself fails only when no answer came (or the server refused the whole call).
    pub async fn create_many(
        &self,
        resource: &ResourceInfo,
        items: Vec<NewObject>,
    ) -> Result<Vec<Result<String, ClientError>>, ClientError> {
        let count = items.len();
        let request = ApiRequest::CreateMany {
            resource: ResourceRef::from_info(resource),
            items,
        };
        match self.call(&request).await? {
            ApiResponse::Created(outcomes) if outcomes.len() == count => Ok(outcomes
                .into_iter()
                .map(|outcome| match outcome {
                    CreateOutcome::Created { resource_version } => Ok(resource_version),
                    CreateOutcome::Failed { code, status } => {
                        Err(ClientError::from_status(code, &status))
                    }
                })
                .collect()),
            ApiResponse::Created(outcomes) => Err(ClientError::Protocol(format!(
                "{} outcomes for {count} creates",
                outcomes.len()
            ))),
            other => Err(unexpected(&other)),
        }
    }

    /// Replaces the object (PUT); fails with a conflict if its resourceVersion is stale.
    pub async fn update<B: Serialize, T: DeserializeOwned>(
        &self,
        resource: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        object: &B,
    ) -> Result<T, ClientError> {
        self.update_subresource(resource, namespace, name, None, object, false)
            .await
    }

    /// [`Self::update`] answered with the stored object's metadata only (a
    /// `PartialObjectMetadata`), for a writer that needs no more than the new
    /// `resourceVersion` back: a kubelet renewing its Lease.
    pub async fn update_metadata<B: Serialize>(
        &self,
        resource: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        object: &B,
    ) -> Result<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, ClientError> {
        let partial: PartialObject = self
            .update_subresource(resource, namespace, name, None, object, true)
            .await?;
        Ok(partial.metadata)
    }

    /// Replaces the object's status (PUT `/status`).
    pub async fn update_status<B: Serialize, T: DeserializeOwned>(
        &self,
        resource: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        object: &B,
    ) -> Result<T, ClientError> {
        self.update_subresource(resource, namespace, name, Some("status"), object, false)
            .await
    }

    async fn update_subresource<B: Serialize, T: DeserializeOwned>(
        &self,
        resource: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        object: &B,
        metadata_only: bool,
    ) -> Result<T, ClientError> {
        let request = ApiRequest::Update {
            resource: ResourceRef::from_info(resource),
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
            subresource: subresource.map(str::to_string),
            object: encode(object)?,
            metadata_only,
        };
        self.object(&request).await
    }

    pub async fn patch<T: DeserializeOwned>(
        &self,
        resource: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        patch: &Patch,
    ) -> Result<T, ClientError> {
        self.patch_subresource(resource, namespace, name, None, patch)
            .await
    }

    /// Patches the object's status (PATCH `/status`).
    pub async fn patch_status<T: DeserializeOwned>(
        &self,
        resource: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        patch: &Patch,
    ) -> Result<T, ClientError> {
        self.patch_subresource(resource, namespace, name, Some("status"), patch)
            .await
    }

    /// [`Self::patch_status`] answered with the patched object's metadata only (a
    /// `PartialObjectMetadata`), for a writer that does not read the object back: the server
    /// neither encodes nor sends the rest.
    pub async fn patch_status_metadata(
        &self,
        resource: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        patch: &Patch,
    ) -> Result<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, ClientError> {
        let partial: PartialObject = self
            .patch_request(resource, namespace, name, Some("status"), patch, true)
            .await?;
        Ok(partial.metadata)
    }

    /// Patches the object's Scale (PATCH `/scale`), as `kubectl scale` and the autoscaler do.
    pub async fn patch_scale<T: DeserializeOwned>(
        &self,
        resource: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        patch: &Patch,
    ) -> Result<T, ClientError> {
        self.patch_subresource(resource, namespace, name, Some("scale"), patch)
            .await
    }

    async fn patch_subresource<T: DeserializeOwned>(
        &self,
        resource: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        patch: &Patch,
    ) -> Result<T, ClientError> {
        self.patch_request(resource, namespace, name, subresource, patch, false)
            .await
    }

    async fn patch_request<T: DeserializeOwned>(
        &self,
        resource: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        patch: &Patch,
        metadata_only: bool,
    ) -> Result<T, ClientError> {
        let (field_manager, force) = match patch {
            Patch::Apply {
                field_manager,
                force,
                ..
            } => (Some(field_manager.clone()), *force),
            _ => (None, false),
        };
        let request = ApiRequest::Patch {
            resource: ResourceRef::from_info(resource),
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
            subresource: subresource.map(str::to_string),
            patch_type: patch.content_type().to_string(),
            patch: encode(patch.body())?,
            field_manager,
            force,
            metadata_only,
        };
        self.object(&request).await
    }

    /// Deletes the object; answers with its last state, or with the object marked for deletion
    /// when deletion is graceful (a bound pod) or waits for finalizers.
    pub async fn delete<T: DeserializeOwned>(
        &self,
        resource: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        params: &DeleteParams,
    ) -> Result<T, ClientError> {
        let request = ApiRequest::Delete {
            resource: ResourceRef::from_info(resource),
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
            options: params.to_json(),
        };
        self.object(&request).await
    }

    /// Deletes everything `list` selects; answers with what was deleted or marked for deletion.
    pub async fn delete_collection<T: DeserializeOwned>(
        &self,
        resource: &ResourceInfo,
        namespace: Option<&str>,
        list: &ListParams,
        params: &DeleteParams,
    ) -> Result<Vec<T>, ClientError> {
        let request = ApiRequest::DeleteCollection {
            resource: ResourceRef::from_info(resource),
            namespace: namespace.map(str::to_string),
            label_selector: list.label_selector.clone(),
            field_selector: list.field_selector.clone(),
            options: params.to_json(),
        };
        match self.call(&request).await? {
            ApiResponse::List { items, .. } => items.iter().map(|i| decode(i)).collect(),
            other => Err(unexpected(&other)),
        }
    }

    /// Binds a pending pod to a node (`pods/binding`), as the scheduler does.
    pub async fn bind(&self, namespace: &str, name: &str, node: &str) -> Result<(), ClientError> {
        let request = ApiRequest::Bind {
            namespace: namespace.to_string(),
            name: name.to_string(),
            node: node.to_string(),
        };
        match self.call(&request).await? {
            ApiResponse::Object(_) => Ok(()),
            other => Err(unexpected(&other)),
        }
    }

    /// Starts a watch on its own QUIC stream of the shared connection. Errors of the watch
    /// itself (e.g. 410 Gone for a too old resourceVersion) arrive through the stream.
    pub async fn watch(
        &self,
        resource: &ResourceInfo,
        namespace: Option<&str>,
        params: &ListParams,
    ) -> Result<WatchStream, ClientError> {
        let request = ApiRequest::Watch {
            resource: ResourceRef::from_info(resource),
            namespace: namespace.map(str::to_string),
            label_selector: params.label_selector.clone(),
            field_selector: params.field_selector.clone(),
            resource_version: params.resource_version.clone(),
            send_initial_events: params.send_initial_events,
            bookmarks: params.bookmarks,
        };
        let open = async {
            // Opening sends the request; a broken connection is retried, as nothing was read.
            let mut backoff = self.inner.config.min_backoff;
            loop {
                let connection = self.connection().await;
                match connection.server_stream(&request).await {
                    Ok(stream) => return Ok(WatchStream { stream }),
                    Err(e) if e.is_connection_lost() => {
                        self.forget(&connection, &e);
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(self.inner.config.max_backoff);
                    }
                    Err(e) => return Err(ClientError::Transport(e)),
                }
            }
        };
        self.with_timeout(open).await
    }

    /// The low-level unary call: one request, one response. API errors come back as
    /// [`ClientError::Api`]. Gets and lists are retried across reconnects.
    pub async fn call(&self, request: &ApiRequest) -> Result<ApiResponse, ClientError> {
        let idempotent = matches!(
            request,
            ApiRequest::Get { .. } | ApiRequest::GetPath { .. } | ApiRequest::List { .. }
        );
        let attempt = async {
            let mut backoff = self.inner.config.min_backoff;
            loop {
                let connection = self.connection().await;
                match connection.unary::<ApiRequest, ApiResponse>(request).await {
                    Ok(ApiResponse::Error { code, status }) => {
                        return Err(ClientError::from_status(code, &status))
                    }
                    Ok(response) => return Ok(response),
                    Err(e) if e.is_connection_lost() => {
                        self.forget(&connection, &e);
                        if !idempotent {
                            return Err(ClientError::Transport(e));
                        }
                        debug!(verb = request.verb(), error = %e, "connection lost; retrying");
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(self.inner.config.max_backoff);
                    }
                    Err(e) => return Err(ClientError::Transport(e)),
                }
            }
        };
        self.with_timeout(attempt).await
    }

    async fn object<T: DeserializeOwned>(&self, request: &ApiRequest) -> Result<T, ClientError> {
        match self.call(request).await? {
            ApiResponse::Object(json) => decode(&json),
            other => Err(unexpected(&other)),
        }
    }

    async fn with_timeout<R>(
        &self,
        work: impl std::future::Future<Output = Result<R, ClientError>>,
    ) -> Result<R, ClientError> {
        let after = self.inner.config.call_timeout;
        match tokio::time::timeout(after, work).await {
            Ok(result) => result,
            Err(_) => Err(ClientError::Timeout {
                after,
                last_error: lock(&self.inner.last_error).clone(),
            }),
        }
    }

    fn open_connection(&self) -> Option<Connection> {
        lock(&self.inner.current)
            .as_ref()
            .filter(|c| !c.is_closed())
            .cloned()
    }

    /// The shared connection, connecting (with backoff, moving through the endpoints) until one
    /// answers. Never gives up by itself: callers bound it with their timeout.
    async fn connection(&self) -> Connection {
        if let Some(connection) = self.open_connection() {
            return connection;
        }
        let mut next = self.inner.connecting.lock().await;
        let endpoints = &self.inner.config.endpoints;
        let mut backoff = self.inner.config.min_backoff;
        let mut failed = 0;
        loop {
            // Someone else may have connected while we waited for the lock.
            if let Some(connection) = self.open_connection() {
                return connection;
            }
            let endpoint = &endpoints[*next % endpoints.len()];
            let limit = connect_attempt_limit(failed);
            match self.inner.rpc.connect_within(endpoint, limit).await {
                Ok(connection) => {
                    debug!(%endpoint, "connected to the API server");
                    *lock(&self.inner.current) = Some(connection.clone());
                    if endpoints.len() > 1 {
                        self.close_when_silent(&connection, SILENT_AFTER);
                        // When this connection is lost, try the other API servers first.
                        *next = next.wrapping_add(1);
                    } else {
                        // A killed server sends no close (QUIC runs over UDP), so without this
                        // the client would wait out QUIC's idle timeout (30 s).
                        self.close_when_silent(&connection, SOLE_SILENT_AFTER);
                    }
                    return connection;
                }
                Err(e) => {
                    debug!(%endpoint, error = %e, "cannot connect to the API server");
                    *lock(&self.inner.last_error) = format!("{endpoint}: {e}");
                    *next = next.wrapping_add(1);
                    failed += 1;
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(self.inner.config.max_backoff);
                }
            }
        }
    }

    /// Closes `connection` if its API server goes silent for `after` (killed or cut off: no
    /// close ever arrives), so calls and watches reconnect — to another API server if there is
    /// one — in seconds rather than after QUIC's idle timeout.
    fn close_when_silent(&self, connection: &Connection, after: Duration) {
        let connection = connection.clone();
        tokio::spawn(async move {
            if connection.silent_for(after).await {
                warn!(endpoint = %connection.remote_address(), ?after,
                    "API server silent; closing the connection to reconnect");
                connection.close_silent();
            }
        });
    }

    /// Forgets `broken` (if it is still the current connection) so the next call reconnects,
    /// starting with the next endpoint.
    fn forget(&self, broken: &Connection, error: &TransportError) {
        *lock(&self.inner.last_error) = error.to_string();
        let mut current = lock(&self.inner.current);
        if current
            .as_ref()
            .is_some_and(|c| c.raw().stable_id() == broken.raw().stable_id())
        {
            broken.close();
            *current = None;
        }
    }
}

/// Connection attempts this short come first ([`connect_attempt_limit`]).
const QUICK_ATTEMPTS: u32 = 5;
const QUICK_ATTEMPT: Duration = Duration::from_secs(1);

/// How long connection attempt number `failed + 1` may take. While an API server restarts,
/// nothing answers at its port, and an attempt's lost first packets are sent again ever more
/// rarely (after 0.15, 0.45, 1.05, 2.25 s...): short attempts, each starting that over, reach
/// the server within a fraction of a second of it being back. A live server too starved to
/// finish a handshake in a second then gets longer and longer attempts, up to
/// [`CONNECT_TIMEOUT`](transport::rpc::CONNECT_TIMEOUT), rather than a new handshake to start
/// every second.
fn connect_attempt_limit(failed: u32) -> Duration {
    if failed < QUICK_ATTEMPTS {
        return QUICK_ATTEMPT;
    }
    let doublings = (failed + 1 - QUICK_ATTEMPTS).min(8);
    (QUICK_ATTEMPT * 2u32.pow(doublings)).min(transport::rpc::CONNECT_TIMEOUT)
}

/// The frames of one watch, in order.
pub struct WatchStream {
    stream: ResponseStream<ApiResponse>,
}

impl std::fmt::Debug for WatchStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.stream.fmt(f)
    }
}

impl WatchStream {
    /// The next event; an error is the stream's last item; `None` once the server ended the
    /// stream cleanly (e.g. this watcher fell behind, or the server's cache was reset): re-watch
    /// from the last resourceVersion seen. Dropping the stream cancels the watch.
    pub async fn next(&mut self) -> Option<Result<WatchFrame, ClientError>> {
        Some(match self.stream.next().await? {
            Ok(ApiResponse::Watch(frame)) => Ok(frame),
            Ok(ApiResponse::Error { code, status }) => Err(ClientError::from_status(code, &status)),
            Ok(other) => Err(unexpected(&other)),
            Err(e) => Err(ClientError::Transport(e)),
        })
    }
}

/// Decodes an object's JSON.
pub fn decode<T: DeserializeOwned>(json: &[u8]) -> Result<T, ClientError> {
    serde_json::from_slice(json).map_err(ClientError::Decode)
}

fn encode<B: Serialize + ?Sized>(body: &B) -> Result<Bytes, ClientError> {
    serde_json::to_vec(body)
        .map(Bytes::from)
        .map_err(ClientError::Encode)
}

fn unexpected(response: &ApiResponse) -> ClientError {
    let shape = match response {
        ApiResponse::Object(_) => "an object",
        ApiResponse::List { .. } => "a list",
        ApiResponse::Watch(_) => "a watch event",
        ApiResponse::Created(_) => "create outcomes",
        ApiResponse::Error { code, status } => return ClientError::from_status(*code, status),
    };
    ClientError::Protocol(format!("got {shape}"))
}

/// A poisoned lock only means another thread panicked while holding it; the value inside is
/// still whole.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_errors_are_classified() {
        let status = br#"{"kind":"Status","status":"Failure","message":"pods \"x\" not found","reason":"NotFound","code":404}"#;
        let e = ClientError::from_status(404, status);
        assert!(e.is_not_found() && !e.is_conflict() && !e.is_gone());
        assert_eq!(e.to_string(), "pods \"x\" not found (404 NotFound)");
        let e = ClientError::from_status(409, br#"{"reason":"AlreadyExists","message":"x"}"#);
        assert!(e.is_conflict() && e.is_already_exists());
        let e = ClientError::from_status(410, b"not json");
        assert!(e.is_gone());
        assert!(e.to_string().contains("not json"));
    }

    #[test]
    fn delete_params_become_delete_options() {
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            precondition_uid: Some("u1".into()),
            ..Default::default()
        };
        let body: Value = serde_json::from_slice(&params.to_json()).expect("json");
        assert_eq!(body["gracePeriodSeconds"], 0);
        assert_eq!(body["preconditions"]["uid"], "u1");
        assert!(body.get("propagationPolicy").is_none());
    }

    #[test]
    fn typed_resources_resolve() {
        use k8s_openapi::api::core::v1::{Node, Pod};
        assert_eq!(resource_of::<Pod>(), Some(crate::resources::pods()));
        assert_eq!(resource_of::<Node>().map(|r| r.plural), Some("nodes"));
    }

    #[test]
    fn connection_attempts_are_short_then_lengthen() {
        let limits: Vec<u64> = (0..10)
            .map(|n| connect_attempt_limit(n).as_millis() as u64)
            .collect();
        assert_eq!(
            limits,
            [1000, 1000, 1000, 1000, 1000, 2000, 4000, 8000, 10_000, 10_000]
        );
    }

    #[test]
    fn config_is_validated() {
        let dir = std::env::temp_dir();
        assert!(ClientConfig::new(Vec::<Endpoint>::new(), &dir, "x")
            .validate()
            .is_err());
        let ok = ClientConfig::new(
            vec!["127.0.0.1:1".parse::<std::net::SocketAddr>().expect("addr")],
            &dir,
            "x",
        );
        assert!(ok.validate().is_ok());
    }
}
