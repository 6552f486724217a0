//! The controller manager: wins the leader election, starts one informer per resource the
//! controllers share, then every controller (each waiting for its caches to sync), and runs
//! until shutdown or until it loses the lease.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use api::client::{Client, ClientConfig, ClientError, ListParams};
use api::event_sink::{EventSink, EventSinkStats};
use api::informer::Informer;
use api::leader_election::{LeaderElectionConfig, LeaderElector};
use api::resources;
use k8s_openapi::api::apps::v1::{
    ControllerRevision, DaemonSet, Deployment, ReplicaSet, StatefulSet,
};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    ConfigMap, Endpoints, Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod,
    ReplicationController, ResourceQuota, Service, ServiceAccount,
};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass, VolumeAttachment};
use std::sync::atomic::{AtomicUsize, Ordering};

use telemetry::Telemetry;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::attach_detach_controller::AttachDetachController;
use crate::cronjob::CronJobController;
use crate::daemonset::DaemonSetController;
use crate::deployment::DeploymentController;
use crate::disruption::DisruptionController;
use crate::endpoints::EndpointsController;
use crate::garbage_collector::GarbageCollector;
use crate::hpa_controller::{HorizontalConfig, HorizontalController};
use crate::job::JobController;
use crate::metrics::Metrics;
use crate::namespace::NamespaceController;
use crate::node_lifecycle::{NodeLifecycleConfig, NodeLifecycleController};
use crate::persistent_volume_controller::{
    ensure_driver_objects, PersistentVolumeController, VolumeConfig,
};
use crate::queue::WorkQueue;
use crate::replicaset::{ReplicaSetController, ReplicationManager};
use crate::resource_quota::{self, ResourceQuotaController};
use crate::service_accounts::{self, RootCaPublisher, ServiceAccountsController};
use crate::statefulset::StatefulSetController;
use crate::worker::{spawn_workers, stopped, Reconciler, Shutdown};

/// The least workers of the persistent-volume and attach/detach loops (see `run`).
const STORAGE_WORKERS: usize = 100;

/// The controller manager's settings; defaults in [`ControllerManagerConfig::new`].
#[derive(Clone, Debug)]
pub struct ControllerManagerConfig {
    pub client: ClientConfig,
    /// Campaign for the `kube-system/kube-controller-manager` Lease before doing anything.
    pub leader_elect: bool,
    /// holderIdentity in the lease (unique per process).
    pub holder_identity: String,
    /// Concurrent reconciles per controller (never two for one object).
    pub workers: usize,
    pub node_lifecycle: NodeLifecycleConfig,
    pub metrics_addr: Option<SocketAddr>,
    /// How often every ResourceQuota's usage is recomputed even without an event
    /// (Kubernetes' `--resource-quota-sync-period`).
    pub quota_resync: Duration,
    /// The HorizontalPodAutoscaler controller's sync period and default scale-down window.
    pub horizontal: HorizontalConfig,
    /// The volume controllers and the emulated CSI driver.
    pub volumes: VolumeConfig,
}

/// Why the manager stopped.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    #[error("config {field}: {reason}")]
    Config { field: &'static str, reason: String },
    #[error("API client: {0}")]
    Client(#[source] ClientError),
    #[error("lost the leader lease")]
    LostLeadership,
    #[error("metrics endpoint: {0}")]
    Metrics(#[source] telemetry::ServeError),
    #[error("cannot read the cluster CA {path}: {source}")]
    RootCa {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl ControllerManagerConfig {
    pub fn new(client: ClientConfig) -> ControllerManagerConfig {
        let holder_identity = format!(
            "{}_{:016x}",
            std::env::var("HOSTNAME").unwrap_or_else(|_| "kemu".into()),
            rand::random::<u64>()
        );
        ControllerManagerConfig {
            client,
            leader_elect: true,
            holder_identity,
            workers: 5,
            node_lifecycle: NodeLifecycleConfig::default(),
            metrics_addr: None,
            quota_resync: resource_quota::DEFAULT_RESYNC,
            horizontal: HorizontalConfig::default(),
            volumes: VolumeConfig::default(),
        }
    }

    pub fn validate(&self) -> Result<(), ManagerError> {
        if self.workers == 0 {
            return Err(ManagerError::Config {
                field: "workers",
                reason: "must be at least 1".into(),
            });
        }
        if self.quota_resync.is_zero() {
            return Err(ManagerError::Config {
                field: "quota_resync",
                reason: "must be longer than 0".into(),
            });
        }
        if self.horizontal.sync_period.is_zero() {
            return Err(ManagerError::Config {
                field: "horizontal.sync_period",
                reason: "must be longer than 0".into(),
            });
        }
        self.volumes
            .validate()
            .map_err(|reason| ManagerError::Config {
                field: "volumes",
                reason,
            })?;
        self.client.validate().map_err(ManagerError::Client)?;
        self.node_lifecycle.validate()
    }
}

/// Runs the controller manager until `shutdown` resolves.
pub async fn run(
    config: ControllerManagerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ManagerError> {
    config.validate()?;
    let (stop_tx, stop) = watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let client = Client::new(config.client.clone()).map_err(ManagerError::Client)?;
    // The CA the root-CA publisher puts in every namespace: the one the API server's
    // certificate chains to.
    let ca_path = config.client.certs_dir.join("ca.crt");
    let root_ca = std::fs::read_to_string(&ca_path).map_err(|source| ManagerError::RootCa {
        path: ca_path.clone(),
        source,
    })?;
    let telemetry = Telemetry::new();
    let metrics = Metrics::new(&telemetry.metrics);
    let sync = Arc::new(ControllerSync::default());
    let check = sync.clone();
    telemetry
        .health
        .readiness("informer-sync", move || check.check());
    if let Some(addr) = config.metrics_addr {
        // Bind errors surface at once; later ones only end the endpoint.
        let listener = telemetry::bind(addr).await.map_err(ManagerError::Metrics)?;
        let mut s = stop.clone();
        let serving = telemetry.clone();
        tokio::spawn(async move {
            if let Err(e) = serving
                .serve(listener, async move { stopped(&mut s).await })
                .await
            {
                warn!(error = %e, "metrics endpoint failed");
            }
        });
    }

    let mut election = None;
    let mut leadership = None;
    if config.leader_elect {
        let elector = LeaderElector::new(
            client.clone(),
            LeaderElectionConfig::new("kube-controller-manager", config.holder_identity.clone()),
        );
        let mut watching = elector.leadership();
        let health_view = elector.leadership();
        telemetry.health.liveness("leaderElection", move || {
            health_view.borrow().check(
                std::time::Instant::now(),
                std::time::Duration::from_secs(15),
            )
        });
        let mut s = stop.clone();
        election = Some(tokio::spawn(
            elector.run(async move { stopped(&mut s).await }),
        ));
        let mut stop_wait = stop.clone();
        tokio::select! {
            biased;
            () = stopped(&mut stop_wait) => {
                finish(election).await;
                return Ok(());
            }
            won = watching.wait_for(|l| l.leading) => {
                if won.is_err() {
                    return Ok(());
                }
            }
        }
        leadership = Some(watching);
    }
    metrics.set_leader(true);

    let started = start_controllers(&client, &config, root_ca, &metrics, &sync, stop.clone());
    info!(controllers = started, "controllers started");

    let mut stop_wait = stop.clone();
    let result = match leadership.as_mut() {
        Some(leadership) => tokio::select! {
            biased;
            () = stopped(&mut stop_wait) => Ok(()),
            _ = leadership.wait_for(|l| !l.leading) => Err(ManagerError::LostLeadership),
        },
        None => {
            stopped(&mut stop_wait).await;
            Ok(())
        }
    };
    metrics.set_leader(false);
    if result.is_err() {
        warn!("stepping down: leadership lost");
    }
    finish(election).await;
    result
}

/// Waits (briefly) for the election to release the lease on its way out.
async fn finish(election: Option<tokio::task::JoinHandle<()>>) {
    if let Some(election) = election {
        let _ = tokio::time::timeout(Duration::from_secs(3), election).await;
    }
}

/// How many controllers started and how many of them have synced their caches: the
/// `informer-sync` readiness check. A standby (no controller started) is ready.
#[derive(Debug, Default)]
struct ControllerSync {
    started: AtomicUsize,
    synced: AtomicUsize,
}

impl ControllerSync {
    fn check(&self) -> Result<(), String> {
        let (started, synced) = (
            self.started.load(Ordering::Relaxed),
            self.synced.load(Ordering::Relaxed),
        );
        if synced < started {
            return Err(format!(
                "{} of {started} controllers wait for their caches to sync",
                started - synced
            ));
        }
        Ok(())
    }
}

/// Builds the shared informers and every controller; returns how many controllers started.
fn start_controllers(
    client: &Client,
    config: &ControllerManagerConfig,
    root_ca: String,
    metrics: &Metrics,
    sync: &Arc<ControllerSync>,
    stop: Shutdown,
) -> usize {
    let all = ListParams::default();
    let find = |g, p| resources::find(g, "v1", p).expect("served resource");
    // Every pod of the cluster is cached here: keep only what the controllers read.
    let mut pods = Informer::<Pod>::new(client.clone(), resources::pods(), None, all.clone())
        .with_transform(crate::pods::keep_controller_fields);
    let mut replicasets = Informer::<ReplicaSet>::new(
        client.clone(),
        find("apps", "replicasets"),
        None,
        all.clone(),
    );
    let mut deployments = Informer::<Deployment>::new(
        client.clone(),
        find("apps", "deployments"),
        None,
        all.clone(),
    );
    let mut stateful_sets = Informer::<StatefulSet>::new(
        client.clone(),
        find("apps", "statefulsets"),
        None,
        all.clone(),
    );
    let revisions = Informer::<ControllerRevision>::new(
        client.clone(),
        find("apps", "controllerrevisions"),
        None,
        all.clone(),
    );
    let mut jobs = Informer::<Job>::new(client.clone(), find("batch", "jobs"), None, all.clone());
    let mut cron_jobs =
        Informer::<CronJob>::new(client.clone(), find("batch", "cronjobs"), None, all.clone());
    let mut daemon_sets = Informer::<DaemonSet>::new(
        client.clone(),
        find("apps", "daemonsets"),
        None,
        all.clone(),
    );
    let mut replication_controllers = Informer::<ReplicationController>::new(
        client.clone(),
        find("", "replicationcontrollers"),
        None,
        all.clone(),
    );
    let mut budgets = Informer::<PodDisruptionBudget>::new(
        client.clone(),
        find("policy", "poddisruptionbudgets"),
        None,
        all.clone(),
    );
    let mut autoscalers = Informer::<HorizontalPodAutoscaler>::new(
        client.clone(),
        resources::find("autoscaling", "v2", "horizontalpodautoscalers").expect("served resource"),
        None,
        all.clone(),
    );
    let mut nodes = Informer::<Node>::new(client.clone(), find("", "nodes"), None, all.clone());
    let mut node_leases = Informer::<Lease>::new(
        client.clone(),
        find("coordination.k8s.io", "leases"),
        Some("kube-node-lease"),
        all.clone(),
    );
    let mut services =
        Informer::<Service>::new(client.clone(), find("", "services"), None, all.clone());
    let mut namespaces =
        Informer::<Namespace>::new(client.clone(), find("", "namespaces"), None, all.clone());
    let mut endpoints =
        Informer::<Endpoints>::new(client.clone(), find("", "endpoints"), None, all.clone());
    let mut quotas = Informer::<ResourceQuota>::new(
        client.clone(),
        find("", "resourcequotas"),
        None,
        all.clone(),
    );
    let mut slices = Informer::<EndpointSlice>::new(
        client.clone(),
        find("discovery.k8s.io", "endpointslices"),
        None,
        all.clone(),
    );
    let mut claims = Informer::<PersistentVolumeClaim>::new(
        client.clone(),
        find("", "persistentvolumeclaims"),
        None,
        all.clone(),
    );
    let mut volumes = Informer::<PersistentVolume>::new(
        client.clone(),
        find("", "persistentvolumes"),
        None,
        all.clone(),
    );
    let mut classes = Informer::<StorageClass>::new(
        client.clone(),
        find("storage.k8s.io", "storageclasses"),
        None,
        all.clone(),
    );
    let drivers = Informer::<CSIDriver>::new(
        client.clone(),
        find("storage.k8s.io", "csidrivers"),
        None,
        all.clone(),
    );
    let mut attachments = Informer::<VolumeAttachment>::new(
        client.clone(),
        find("storage.k8s.io", "volumeattachments"),
        None,
        all.clone(),
    );
    let mut accounts = service_accounts::named_informer::<ServiceAccount>(
        client,
        find("", "serviceaccounts"),
        service_accounts::DEFAULT_ACCOUNT,
    );
    let mut root_cas = service_accounts::named_informer::<ConfigMap>(
        client,
        find("", "configmaps"),
        service_accounts::ROOT_CA_CONFIG_MAP,
    );

    let mut count = 0;
    let mut start = |name: &'static str, reconciler: Arc<dyn StartAfterSync>, queue: WorkQueue| {
        // The storage loops also play the CSI driver's sidecars, whose work is mostly waiting
        // on the API: the provisioner runs as many at once as external-provisioner's default
        // 100 worker threads, and attachments proceed per volume at once as the attach/detach
        // controller's operation executor lets them.
        let workers = match name {
            "persistentvolume-binder" | "attachdetach" => config.workers.max(STORAGE_WORKERS),
            _ => config.workers,
        };
        count += 1;
        sync.started.fetch_add(1, Ordering::Relaxed);
        let (metrics, stop, sync) = (metrics.clone(), stop.clone(), sync.clone());
        tokio::spawn(async move {
            if !reconciler.synced().await {
                return;
            }
            sync.synced.fetch_add(1, Ordering::Relaxed);
            info!(controller = name, "caches synced; starting workers");
            reconciler.spawn(name, queue, workers, metrics, stop);
        });
    };

    let events = EventSink::start(client.clone(), Arc::new(EventSinkStats::default()));
    let (rs, q) =
        ReplicaSetController::new(client.clone(), &mut replicasets, &mut pods, events.clone());
    start("replicaset", rs, q);
    let (rc, q) = ReplicationManager::new(
        client.clone(),
        &mut replication_controllers,
        &mut pods,
        events.clone(),
    );
    start("replicationcontroller", rc, q);
    let (pdb, q) = DisruptionController::new(
        client.clone(),
        &mut budgets,
        &mut pods,
        &replicasets,
        &deployments,
        &replication_controllers,
    );
    start("disruption", pdb, q);
    let (d, q) = DeploymentController::new(
        client.clone(),
        &mut deployments,
        &mut replicasets,
        events.clone(),
    );
    start("deployment", d, q);
    let (sts, q) = StatefulSetController::new(
        client.clone(),
        &mut stateful_sets,
        &mut pods,
        &revisions,
        events.clone(),
    );
    start("statefulset", sts, q);
    let (j, q) = JobController::new(client.clone(), &mut jobs, &mut pods, events.clone());
    start("job", j, q);
    let (ds, q) = DaemonSetController::new(
        client.clone(),
        &mut daemon_sets,
        &mut nodes,
        &mut pods,
        &revisions,
        events.clone(),
    );
    start("daemonset", ds, q);
    let (cj, q) = CronJobController::new(client.clone(), &mut cron_jobs, &mut jobs, events.clone());
    start("cronjob", cj, q);
    let (e, q) = EndpointsController::new(
        client.clone(),
        &mut services,
        &mut pods,
        &mut endpoints,
        &mut slices,
    );
    start("endpoints", e, q);
    let (n, q) = NamespaceController::new(client.clone(), &mut namespaces);
    start("namespace", n, q);
    let (sa, q) = ServiceAccountsController::new(client.clone(), &mut namespaces, &mut accounts);
    start("serviceaccount", sa, q);
    let (ca, q) = RootCaPublisher::new(client.clone(), root_ca, &mut namespaces, &mut root_cas);
    start("root-ca-cert-publisher", ca, q);
    let (nl, q) = NodeLifecycleController::new(
        client.clone(),
        config.node_lifecycle.clone(),
        &mut nodes,
        &mut node_leases,
        &mut pods,
        stop.clone(),
    );
    start("nodelifecycle", nl, q);
    let (rq, q) = ResourceQuotaController::new(
        client.clone(),
        &mut quotas,
        &mut pods,
        config.quota_resync,
        stop.clone(),
    );
    start("resourcequota", rq, q);
    let (pv, q) = PersistentVolumeController::new(
        client.clone(),
        &mut claims,
        &mut volumes,
        &mut classes,
        &nodes,
        &mut pods,
        events.clone(),
        config.volumes.clone(),
    );
    start("persistentvolume-binder", pv, q);
    let (ad, q) = AttachDetachController::new(
        client.clone(),
        &mut pods,
        &mut claims,
        &mut volumes,
        &mut classes,
        &drivers,
        &mut attachments,
        &mut nodes,
        events.clone(),
        config.volumes.clone(),
    );
    start("attachdetach", ad, q);
    tokio::spawn(ensure_driver_objects(
        client.clone(),
        config.volumes.clone(),
        stop.clone(),
    ));
    let (hpa, q) = HorizontalController::new(
        client.clone(),
        &mut autoscalers,
        &mut pods,
        events,
        config.horizontal.clone(),
    );
    start("horizontalpodautoscaling", hpa, q);
    let (gc, q) = GarbageCollector::new(client.clone(), stop.clone(), &mut pods);
    start("garbagecollector", gc, q);

    for run in [
        spawn_informer(pods, stop.clone()),
        spawn_informer(replicasets, stop.clone()),
        spawn_informer(deployments, stop.clone()),
        spawn_informer(jobs, stop.clone()),
        spawn_informer(daemon_sets, stop.clone()),
        spawn_informer(cron_jobs, stop.clone()),
        spawn_informer(stateful_sets, stop.clone()),
        spawn_informer(revisions, stop.clone()),
        spawn_informer(replication_controllers, stop.clone()),
        spawn_informer(budgets, stop.clone()),
        spawn_informer(autoscalers, stop.clone()),
        spawn_informer(nodes, stop.clone()),
        spawn_informer(node_leases, stop.clone()),
        spawn_informer(services, stop.clone()),
        spawn_informer(namespaces, stop.clone()),
        spawn_informer(endpoints, stop.clone()),
        spawn_informer(slices, stop.clone()),
        spawn_informer(quotas, stop.clone()),
        spawn_informer(claims, stop.clone()),
        spawn_informer(volumes, stop.clone()),
        spawn_informer(classes, stop.clone()),
        spawn_informer(drivers, stop.clone()),
        spawn_informer(attachments, stop.clone()),
        spawn_informer(accounts, stop.clone()),
        spawn_informer(root_cas, stop.clone()),
    ] {
        drop(run);
    }
    count
}

fn spawn_informer<T>(informer: Informer<T>, mut stop: Shutdown) -> tokio::task::JoinHandle<()>
where
    T: k8s_openapi::Metadata<Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    tokio::spawn(informer.run(async move { stopped(&mut stop).await }))
}

/// A controller the manager starts once its caches have synced.
pub trait StartAfterSync: Send + Sync {
    fn synced(&self) -> std::pin::Pin<Box<dyn Future<Output = bool> + Send>>;
    fn spawn(
        self: Arc<Self>,
        name: &'static str,
        queue: WorkQueue,
        workers: usize,
        metrics: Metrics,
        stop: Shutdown,
    );
}

/// Every reconciler with a cache-sync check is startable.
pub trait HasCaches {
    fn caches_synced(&self) -> std::pin::Pin<Box<dyn Future<Output = bool> + Send>>;
}

impl<R: Reconciler + HasCaches> StartAfterSync for R {
    fn synced(&self) -> std::pin::Pin<Box<dyn Future<Output = bool> + Send>> {
        self.caches_synced()
    }

    fn spawn(
        self: Arc<Self>,
        name: &'static str,
        queue: WorkQueue,
        workers: usize,
        metrics: Metrics,
        stop: Shutdown,
    ) {
        spawn_workers(name, queue, self, workers, metrics, stop);
    }
}
