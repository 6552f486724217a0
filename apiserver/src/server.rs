//! One API server replica: store client, watch cache, registry, the HTTP front, and the
//! background compactor.

use std::future::{Future, IntoFuture};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use serde_json::json;
use store::client::{Client, ClientConfig};
use telemetry::Telemetry;
use tracing::{info, warn};
use transport::rpc::RpcServer;
use transport::tls::TlsIdentity;
use transport::Endpoint;

use crate::admission::lifecycle::SYSTEM_NAMESPACES;
use crate::admission::priority::SYSTEM_CLASSES;
use crate::admission::AdmissionConfig;
use crate::authn::{Authenticator, TokenFile};
use crate::authz::Authorizer;
use crate::connection_clock::hold_connection;
use crate::errors::ApiError;
use crate::http::{self, AppState};
use crate::http_limits::HttpLimits;
use crate::https::{HttpPeer, PlainListener, TlsListener};
use crate::metrics::{Metrics, StoreMetrics};
use crate::registry::{Registry, WriteOptions};
use crate::storage::Storage;
use crate::watch_cache::{WatchCache, DEFAULT_WINDOW};

/// An API server replica's settings.
#[derive(Clone, Debug)]
pub struct ApiServerConfig {
    /// The store members' client addresses (or `host:port`, resolved at each connect).
    pub store_endpoints: Vec<Endpoint>,
    pub certs_dir: PathBuf,
    /// Which certificate in `certs_dir` the server presents to the store.
    pub identity: String,
    pub listen_http: SocketAddr,
    /// The component front (QUIC, see [`crate::quic`]), if this replica serves one.
    pub listen_quic: Option<SocketAddr>,
    /// How long events live.
    pub event_ttl: Duration,
    /// How long a store write that finds no batch call out waits for others to join it
    /// (`store::client::ClientConfig::batch_linger`); zero sends it at once.
    pub store_batch_linger: Duration,
    /// Events kept per resource for watches that start in the past.
    pub watch_window: usize,
    /// How often history older than one interval is compacted away; zero never compacts.
    pub compaction_interval: Duration,
    /// Which admission plugins run.
    pub admission: AdmissionConfig,
    /// Serve plain HTTP instead of HTTPS; only on a loopback address.
    pub insecure_http: bool,
    /// Kubernetes' static token file (`token,user,uid,"group1,group2"`).
    pub token_auth_file: Option<PathBuf>,
    pub authorization: AuthorizationMode,
    /// Let requests without credentials through as `system:anonymous` (group
    /// `system:unauthenticated`) instead of answering 401; authorization still applies.
    pub anonymous_auth: bool,
    /// How long the HTTP front waits for slow and idle clients and lets requests run.
    pub http_limits: HttpLimits,
}

/// Which authorizers run (`--authorization-mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthorizationMode {
    /// `system:masters`, the node authorizer, then RBAC (the default).
    NodeRbac,
    /// Everything is allowed: for measuring what authorization costs.
    AlwaysAllow,
}

impl AuthorizationMode {
    /// Parses `Node,RBAC` (or `RBAC,Node`) and `AlwaysAllow`.
    pub fn parse(s: &str) -> Result<AuthorizationMode, ApiError> {
        let mut modes: Vec<&str> = s.split(',').map(str::trim).collect();
        modes.sort_unstable();
        match modes.as_slice() {
            ["Node", "RBAC"] | ["RBAC"] => Ok(AuthorizationMode::NodeRbac),
            ["AlwaysAllow"] => Ok(AuthorizationMode::AlwaysAllow),
            _ => Err(ApiError::bad_request(format!(
                "authorization_mode: {s:?} is not one of Node,RBAC or AlwaysAllow"
            ))),
        }
    }
}

impl ApiServerConfig {
    pub fn new<E: Into<Endpoint>>(
        store_endpoints: impl IntoIterator<Item = E>,
        certs_dir: impl Into<PathBuf>,
        listen_http: SocketAddr,
    ) -> Self {
        ApiServerConfig {
            store_endpoints: store_endpoints.into_iter().map(Into::into).collect(),
            certs_dir: certs_dir.into(),
            identity: "apiserver".into(),
            listen_http,
            listen_quic: None,
            event_ttl: Duration::from_secs(3600),
            store_batch_linger: DEFAULT_STORE_BATCH_LINGER,
            watch_window: DEFAULT_WINDOW,
            compaction_interval: Duration::from_secs(300),
            admission: AdmissionConfig::default(),
            insecure_http: false,
            token_auth_file: None,
            authorization: AuthorizationMode::NodeRbac,
            anonymous_auth: false,
            http_limits: HttpLimits::default(),
        }
    }

    pub fn validate(&self) -> Result<(), ApiError> {
        if self.store_endpoints.is_empty() {
            return Err(ApiError::bad_request(
                "store_endpoints: at least one is required",
            ));
        }
        self.http_limits.validate()?;
        if self.watch_window == 0 {
            return Err(ApiError::bad_request("watch_window: must be positive"));
        }
        if self.insecure_http && !self.listen_http.ip().is_loopback() {
            return Err(ApiError::bad_request(format!(
                "insecure_http: plain HTTP is served only on a loopback address, not {}",
                self.listen_http
            )));
        }
        Ok(())
    }
}

/// How long the health checks wait for the store, and for the watch caches to catch up with it.
const HEALTH_STORE_TIMEOUT: Duration = Duration::from_secs(2);

/// kube-apiserver's checks where kemu has the same parts: `etcd` (the store answers a
/// linearizable read; on every endpoint) and `informer-sync` (the watch caches, which serve
/// reads and the authorizer, have caught up with the store's revision; on `/readyz`).
fn add_health_checks(health: &telemetry::Health, cache: &Arc<WatchCache>) {
    let store = cache.clone();
    health.liveness(
        "etcd",
        telemetry::async_check(move || {
            let store = store.clone();
            async move { store_revision(&store).await.map(|_| ()) }
        }),
    );
    let caches = cache.clone();
    health.readiness(
        "informer-sync",
        telemetry::async_check(move || {
            let caches = caches.clone();
            async move {
                let revision = store_revision(&caches).await?;
                caches
                    .wait_for(revision, HEALTH_STORE_TIMEOUT)
                    .await
                    .map_err(|_| {
                        format!(
                            "the watch caches are at revision {}, behind the store's {revision}",
                            caches.revision()
                        )
                    })
            }
        }),
    );
}

/// The store's current revision, read within [`HEALTH_STORE_TIMEOUT`], for a health check.
async fn store_revision(cache: &WatchCache) -> Result<i64, String> {
    match tokio::time::timeout(HEALTH_STORE_TIMEOUT, cache.current_store_revision()).await {
        Ok(Ok(revision)) => Ok(revision),
        Ok(Err(e)) => Err(format!("the store did not answer: {e}")),
        Err(_) => Err(format!(
            "the store did not answer within {HEALTH_STORE_TIMEOUT:?}"
        )),
    }
}

/// Errors that stop the server.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("store client: {0}")]
    Store(#[from] store::client::ClientError),
    #[error("{0}")]
    Api(#[from] ApiError),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("http server: {0}")]
    Serve(std::io::Error),
    #[error("component front: {0}")]
    Quic(#[from] transport::TransportError),
    #[error("{0}")]
    TokenFile(#[from] crate::authn::TokenFileError),
}

/// [`ApiServerConfig::store_batch_linger`]'s default: 5,000 nodes' lease renewals (500 writes a
/// second, each alone otherwise) then share raft entries; a busy server never waits for it.
pub const DEFAULT_STORE_BATCH_LINGER: Duration = Duration::from_millis(2);

/// Runs one replica until `shutdown` resolves.
pub async fn run(
    config: ApiServerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    config.validate()?;
    let client = Client::new(
        ClientConfig {
            batch_linger: config.store_batch_linger,
            ..ClientConfig::new(config.store_endpoints.clone())
        },
        &config.certs_dir,
        &config.identity,
    )?;
    let cache = WatchCache::start(client.clone(), config.watch_window).await?;
    crate::logs::configure(config.certs_dir.clone(), config.identity.clone());
    let telemetry = Telemetry::new();
    let storage = Storage::new(client.clone()).with_metrics(StoreMetrics::new(&telemetry.metrics));
    let registry = Arc::new(
        Registry::new(storage, cache.clone(), config.event_ttl)
            .with_admission(config.admission.clone()),
    );
    telemetry
        .metrics
        .register_collector(registry.pipeline().clone());
    let caches = cache.clone();
    crate::metrics::register_cache_gauges(&telemetry.metrics, move || {
        caches
            .caches()
            .iter()
            .map(|c| (c.storage.to_string(), c.watcher_count(), c.object_count()))
            .collect()
    });
    let reads = cache.clone();
    telemetry.metrics.counter_fn(
        "kemu_apiserver_store_revision_reads_total",
        "Linearizable reads of the store's revision made for consistent reads from the cache.",
        move || reads.store_revision_reads().0,
    );
    let asked = cache.clone();
    telemetry.metrics.counter_fn(
        "kemu_apiserver_store_revision_requests_total",
        "Requests that needed the store's current revision (each shares a read made after it asked).",
        move || asked.store_revision_reads().1,
    );
    add_health_checks(&telemetry.health, &cache);
    info!(plugins = ?config.admission.enabled(), "admission");
    ensure_namespaces(&registry).await?;
    let tokens = match &config.token_auth_file {
        Some(path) => {
            let tokens = TokenFile::load(path)?;
            info!(tokens = tokens.len(), file = %path.display(), "bearer tokens loaded");
            tokens
        }
        None => TokenFile::default(),
    };
    let authorizer = Arc::new(match config.authorization {
        AuthorizationMode::NodeRbac => {
            ensure_rbac_policy(&registry).await?;
            Authorizer::node_rbac(registry.cache().clone())
        }
        AuthorizationMode::AlwaysAllow => {
            warn!("authorization is off: every request is allowed");
            Authorizer::AlwaysAllow
        }
    });
    registry.guard_rbac_with(authorizer.clone());
    if let Authorizer::NodeRbac { rbac, .. } = &*authorizer {
        tokio::spawn(write_back_aggregations(
            Arc::downgrade(rbac),
            registry.clone(),
        ));
    }
    let tls = TlsIdentity::load(&config.certs_dir, &config.identity)?;
    let (private_key, public_key) = transport::pki::service_account_key(&config.certs_dir)?;
    let service_accounts = Arc::new(
        crate::service_account_tokens::ServiceAccountTokens::new(&private_key, &public_key)
            .map_err(|e| ApiError::internal(e.to_string()))?
            .with_lookup(cache.clone()),
    );
    if !config.compaction_interval.is_zero() {
        tokio::spawn(compactor(client.clone(), config.compaction_interval));
    }

    let listener = tokio::net::TcpListener::bind(config.listen_http)
        .await
        .map_err(|source| ServerError::Listen {
            addr: config.listen_http,
            source,
        })?;
    let local = listener
        .local_addr()
        .map_err(|source| ServerError::Listen {
            addr: config.listen_http,
            source,
        })?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    // One request histogram for both fronts, as kube-apiserver has one for every client.
    let request_metrics = Metrics::new(&telemetry.metrics);
    let quic = match config.listen_quic {
        Some(addr) => {
            let server = RpcServer::bind(addr, &tls)?;
            info!(quic = %server.local_addr()?, "component front serving");
            let mut stopped = stop_rx.clone();
            let stopped = async move {
                let _ = stopped.wait_for(|s| *s).await;
            };
            Some(tokio::spawn(crate::quic::serve(
                server,
                registry.clone(),
                authorizer.clone(),
                request_metrics.clone(),
                stopped,
            )))
        }
        None => None,
    };
    let advertised = advertise_address(local);
    let kubernetes_service = tokio::spawn(crate::kubernetes_service::run(
        registry.clone(),
        advertised,
        stop_rx.clone(),
    ));
    let state = Arc::new(AppState {
        registry,
        metrics: request_metrics,
        telemetry,
        server_address: local.to_string(),
        authenticator: Authenticator::new(tokens).with_service_accounts(service_accounts),
        authorizer,
        anonymous_auth: config.anonymous_auth,
        limits: config.http_limits,
    });
    let app = Router::new()
        .fallback(http::handle)
        .with_state(state)
        .layer(axum::middleware::from_fn(hold_connection))
        .into_make_service_with_connect_info::<HttpPeer>();
    let mut stopped = stop_rx.clone();
    let stopped = async move {
        let _ = stopped.wait_for(|s| *s).await;
    };
    let serve = if config.insecure_http {
        warn!(http = %local, "serving plain HTTP (insecure_http)");
        let listener = PlainListener::new(listener, config.http_limits);
        tokio::spawn(
            axum::serve(listener, app)
                .with_graceful_shutdown(stopped)
                .into_future(),
        )
    } else {
        let tls_config = tls.https_server_config()?;
        let listener =
            TlsListener::new(listener, tls_config, config.http_limits).map_err(|source| {
                ServerError::Listen {
                    addr: config.listen_http,
                    source,
                }
            })?;
        info!(https = %local, "API server serving");
        tokio::spawn(
            axum::serve(listener, app)
                .with_graceful_shutdown(stopped)
                .into_future(),
        )
    };
    shutdown.await;
    info!("shutting down");
    let _ = stop_tx.send(true);
    // Out of the `kubernetes` endpoints before the port closes.
    let _ = tokio::time::timeout(Duration::from_secs(2), kubernetes_service).await;
    if let Some(quic) = quic {
        // Closes every component connection; the front's port is free once this returns.
        let _ = tokio::time::timeout(Duration::from_secs(3), quic).await;
    }
    // Watches never finish by themselves; give in-flight requests a moment, then stop.
    match tokio::time::timeout(Duration::from_secs(2), serve).await {
        Ok(Ok(Err(e))) => Err(ServerError::Serve(e)),
        _ => Ok(()),
    }
}

/// The address this replica lists in the `kubernetes` endpoints: where it serves, loopback
/// when it serves on every address.
fn advertise_address(local: SocketAddr) -> SocketAddr {
    if !local.ip().is_unspecified() {
        return local;
    }
    let ip = match local {
        SocketAddr::V4(_) => std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        SocketAddr::V6(_) => std::net::IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
    };
    SocketAddr::new(ip, local.port())
}

async fn ensure_namespaces(registry: &Registry) -> Result<(), ApiError> {
    let namespaces = api::resources::find("", "v1", "namespaces")
        .ok_or_else(|| ApiError::internal("no namespaces"))?;
    for name in SYSTEM_NAMESPACES {
        let object = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        match registry
            .create(namespaces, None, object, &WriteOptions::default())
            .await
        {
            Ok(_) | Err(ApiError::AlreadyExists { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    // The built-in priority classes the Priority plugin resolves system pods against.
    let classes = api::resources::find("scheduling.k8s.io", "v1", "priorityclasses")
        .ok_or_else(|| ApiError::internal("no priorityclasses"))?;
    for (name, value, description) in SYSTEM_CLASSES {
        let object = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value, "description": description,
            "preemptionPolicy": "PreemptLowerPriority"});
        match registry
            .create(classes, None, object, &WriteOptions::default())
            .await
        {
            Ok(_) | Err(ApiError::AlreadyExists { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Creates the bootstrap RBAC policy objects that do not exist yet.
async fn ensure_rbac_policy(registry: &Registry) -> Result<(), ApiError> {
    let (roles, bindings) = crate::authz::bootstrap::policy();
    let cluster_roles = api::resources::find("rbac.authorization.k8s.io", "v1", "clusterroles")
        .ok_or_else(|| ApiError::internal("no clusterroles"))?;
    let cluster_role_bindings =
        api::resources::find("rbac.authorization.k8s.io", "v1", "clusterrolebindings")
            .ok_or_else(|| ApiError::internal("no clusterrolebindings"))?;
    let objects = roles
        .into_iter()
        .map(|r| (cluster_roles, r))
        .chain(bindings.into_iter().map(|b| (cluster_role_bindings, b)));
    for (resource, object) in objects {
        match registry
            .create(resource, None, object, &WriteOptions::default())
            .await
        {
            Ok(_) | Err(ApiError::AlreadyExists { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Compacts the store every `interval` to the revision seen one interval earlier, as
/// kube-apiserver does, so history does not grow without bound.
async fn compactor(client: Client, interval: Duration) {
    let mut previous: Option<i64> = None;
    let mut ticker = tokio::time::interval(interval);
    ticker.tick().await;
    loop {
        ticker.tick().await;
        let current = match client
            .range(store::types::RangeRequest {
                range: store::types::KeyRange::single("/registry/"),
                ..Default::default()
            })
            .await
        {
            Ok(r) => r.header.revision,
            Err(e) => {
                warn!(error = %e, "compactor cannot read the revision");
                continue;
            }
        };
        if let Some(revision) = previous {
            match client.compact(revision).await {
                Ok(_) => info!(revision, "compacted store history"),
                Err(e) => warn!(revision, error = %e, "compaction skipped"),
            }
        }
        previous = Some(current);
    }
}

/// The clusterrole-aggregation controller's job, done by the API server: an aggregated
/// ClusterRole (`admin`, `edit`, `view`, or a user's) gets the rules of the ClusterRoles its
/// selectors match written into it, so `kubectl get clusterrole view -o yaml` shows them. Every
/// replica does it; they write the same rules, so a lost race changes nothing.
async fn write_back_aggregations(
    rbac: std::sync::Weak<crate::authz::rbac::RbacAuthorizer>,
    registry: Arc<Registry>,
) {
    let Some(cluster_roles) =
        api::resources::find("rbac.authorization.k8s.io", "v1", "clusterroles")
    else {
        return;
    };
    loop {
        // Hold the authorizer only while waiting a while, so this task ends with it.
        let Some(strong) = rbac.upgrade() else {
            return;
        };
        let waited = tokio::time::timeout(Duration::from_secs(5), strong.next_stale()).await;
        drop(strong);
        let Ok(stale) = waited else {
            continue;
        };
        for (name, rules) in stale {
            let patch = json!({"rules": rules}).to_string();
            let written = registry
                .patch(
                    cluster_roles,
                    None,
                    &name,
                    None,
                    crate::patch::PatchType::Merge,
                    patch.as_bytes(),
                    false,
                    &WriteOptions::default(),
                )
                .await;
            match written {
                Ok(_) => {
                    info!(clusterrole = %name, rules = rules.len(), "aggregated rules written")
                }
                Err(e) => warn!(clusterrole = %name, error = %e, "cannot write aggregated rules"),
            }
        }
    }
}
