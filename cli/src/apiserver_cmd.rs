//! `kemu apiserver`: runs one API server replica until SIGTERM/Ctrl-C.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use apiserver::admission::AdmissionConfig;

use apiserver::server::{ApiServerConfig, AuthorizationMode};
use clap::Args;
use transport::Endpoint;

#[derive(Args, Debug)]
pub struct ApiServerArgs {
    /// Client addresses of the store members, comma-separated: `IP:PORT` or `HOST:PORT` (a
    /// host name is resolved at each connect and must be in the member's certificate).
    #[arg(long, value_delimiter = ',', required = true)]
    store_endpoints: Vec<Endpoint>,
    /// Directory with `ca.crt` and the API server's certificate (`apiserver.crt`).
    #[arg(long)]
    certs: PathBuf,
    /// Which certificate in `--certs` to use.
    #[arg(long, default_value = "apiserver")]
    identity: String,
    /// Address of the Kubernetes HTTP API.
    #[arg(long)]
    listen_http: SocketAddr,
    /// Address of the QUIC front for kemu's components.
    #[arg(long)]
    listen_quic: Option<SocketAddr>,
    /// How long events live, in seconds.
    #[arg(long, default_value_t = 3600)]
    event_ttl_secs: u64,
    /// Microseconds a store write that finds none of this server's batch calls out waits for
    /// other writes to join it (one call and one raft entry for all); 0 sends it at once.
    #[arg(long, default_value_t = apiserver::server::DEFAULT_STORE_BATCH_LINGER.as_micros() as u64)]
    store_batch_linger_us: u64,
    /// Seconds between compactions of the store's history; 0 never compacts (a chaos run
    /// keeps the whole history of the run to check the watches against).
    #[arg(long, default_value_t = 300)]
    compaction_interval_secs: u64,
    /// Admission plugins to run in addition to the default ones (all kemu has:
    /// NamespaceLifecycle, LimitRanger, ServiceAccount, NodeRestriction, PodSecurity, Priority,
    /// DefaultTolerationSeconds, DefaultStorageClass, StorageObjectInUseProtection,
    /// PersistentVolumeClaimResize, ResourceQuota), comma-separated.
    #[arg(long, value_delimiter = ',')]
    enable_admission_plugins: Vec<String>,
    /// Default admission plugins not to run, comma-separated.
    #[arg(long, value_delimiter = ',')]
    disable_admission_plugins: Vec<String>,
    /// Serve plain HTTP instead of HTTPS (refused unless `--listen-http` is a loopback address).
    #[arg(long)]
    insecure_http: bool,
    /// Bearer tokens, one per line: `token,user,uid,"group1,group2"` (Kubernetes' format).
    #[arg(long)]
    token_auth_file: Option<PathBuf>,
    /// `Node,RBAC` (the default) or `AlwaysAllow`.
    #[arg(long, default_value = "Node,RBAC")]
    authorization_mode: String,
    /// Serve requests without credentials as `system:anonymous` instead of answering 401.
    #[arg(long)]
    anonymous_auth: bool,
    /// Seconds a request that is not a watch (nor a log, exec, attach or port-forward) may
    /// run before it is answered 504, as kube-apiserver's `--request-timeout`.
    #[arg(long, default_value_t = 60)]
    request_timeout_secs: u64,
    /// A watch without `timeoutSeconds` ends after a random time between this many seconds and
    /// twice as many, as kube-apiserver's `--min-request-timeout`.
    #[arg(long, default_value_t = 1800)]
    min_request_timeout: u64,
}

pub async fn run(args: ApiServerArgs) -> anyhow::Result<ExitCode> {
    let mut config = ApiServerConfig::new(args.store_endpoints, &args.certs, args.listen_http);
    config.identity = args.identity;
    config.listen_quic = args.listen_quic;
    config.event_ttl = Duration::from_secs(args.event_ttl_secs);
    config.store_batch_linger = Duration::from_micros(args.store_batch_linger_us);
    config.compaction_interval = Duration::from_secs(args.compaction_interval_secs);
    config.admission = AdmissionConfig::from_flags(
        &args.enable_admission_plugins,
        &args.disable_admission_plugins,
    )
    .context("--enable-admission-plugins / --disable-admission-plugins")?;
    config.insecure_http = args.insecure_http;
    config.token_auth_file = args.token_auth_file;
    config.authorization = AuthorizationMode::parse(&args.authorization_mode)?;
    config.anonymous_auth = args.anonymous_auth;
    config.http_limits.request_timeout = Duration::from_secs(args.request_timeout_secs);
    config.http_limits.min_request_timeout = Duration::from_secs(args.min_request_timeout);
    apiserver::server::run(config, cluster::shutdown::signal())
        .await
        .context("API server")?;
    Ok(ExitCode::SUCCESS)
}
