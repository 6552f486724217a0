//! [`run`]: the scheduler process. I/O (informers, leader election, API calls, `/metrics` and
//! the health endpoints) runs on the caller's Tokio runtime; the actors (queue, workers, binder) run in an actix system on
//! a thread of their own. The [`InformerBridge`] carries informer events into the cache and the
//! queue.

use std::future::Future;
use std::sync::Arc;

use actix::prelude::*;
use api::client::{Client, ClientConfig, ListParams};
use api::event_sink::EventSink;
use api::informer::{Informer, InformerEvent, Store};
use api::leader_election::LeaderElector;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::{CSIDriver, CSIStorageCapacity, StorageClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use parking_lot::RwLock;
use telemetry::{Condition, Telemetry};
use tokio::sync::{mpsc, watch};
use tracing::{info, info_span, warn, Instrument};

use crate::actors::{
    Binder, ClusterChanged, PodGone, PodPending, QueueActor, SetLeading, Synced, Worker,
};
use crate::cache::Cache;
use crate::config::{SchedulerConfig, SchedulerError};
use crate::metrics::Metrics;
use crate::pod_info::CachedPod;
use crate::volumes::{CapacityInfo, ClassInfo};

/// Runs the scheduler until `shutdown` resolves, or until it loses the lease it held (then it
/// returns [`SchedulerError::LostLeadership`], as kube-scheduler exits).
pub async fn run(
    config: SchedulerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), SchedulerError> {
    config.validate()?;
    let client_config = ClientConfig::new(
        config.endpoints.clone(),
        &config.certs_dir,
        &config.identity,
    );
    let client = Client::new(client_config).map_err(SchedulerError::Client)?;
    let telemetry = Telemetry::new();
    let metrics = Metrics::new(&telemetry.metrics);
    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = move || {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    };

    let mut tasks = tokio::task::JoinSet::new();
    if let Some(addr) = config.metrics_addr {
        let listener = telemetry::bind(addr)
            .await
            .map_err(SchedulerError::Metrics)?;
        tasks.spawn(telemetry.clone().serve(listener, stopped()).map(|_| ()));
    }

    let cache = Arc::new(RwLock::new(Cache::new()));
    let actors = ActorSystem::start(&config, client.clone(), cache.clone(), metrics.clone())?;
    let queue = actors.queue.clone();

    // Informers: every node, every pod, every PriorityClass; and for VolumeBinding every claim,
    // volume, StorageClass, CSIDriver and CSIStorageCapacity.
    let mut nodes = Informer::<Node>::new(
        client.clone(),
        resource("", "nodes"),
        None,
        ListParams::default(),
    );
    // Pods are parsed as they are decoded: the cache holds no typed pods.
    let mut pods = Informer::<CachedPod>::new(
        client.clone(),
        resource("", "pods"),
        None,
        ListParams::default(),
    );
    let mut classes = Informer::<PriorityClass>::new(
        client.clone(),
        resource("scheduling.k8s.io", "priorityclasses"),
        None,
        ListParams::default(),
    );
    // VolumeBinding's informers, carried into the bridge through one channel.
    let (volume_tx, volume_rx) = mpsc::channel(1024);
    let mut volume_stores: Vec<Box<dyn Fn() -> bool + Send + Sync>> = Vec::new();
    spawn_volume_informer::<PersistentVolumeClaim>(
        &mut tasks,
        &client,
        "persistentvolumeclaims",
        "",
        VolumeEvent::Claim,
        &volume_tx,
        &mut volume_stores,
        stopped(),
    );
    spawn_volume_informer::<PersistentVolume>(
        &mut tasks,
        &client,
        "persistentvolumes",
        "",
        VolumeEvent::Volume,
        &volume_tx,
        &mut volume_stores,
        stopped(),
    );
    spawn_volume_informer::<StorageClass>(
        &mut tasks,
        &client,
        "storageclasses",
        STORAGE_GROUP,
        VolumeEvent::Class,
        &volume_tx,
        &mut volume_stores,
        stopped(),
    );
    spawn_volume_informer::<CSIDriver>(
        &mut tasks,
        &client,
        "csidrivers",
        STORAGE_GROUP,
        VolumeEvent::Driver,
        &volume_tx,
        &mut volume_stores,
        stopped(),
    );
    spawn_volume_informer::<CSIStorageCapacity>(
        &mut tasks,
        &client,
        "csistoragecapacities",
        STORAGE_GROUP,
        VolumeEvent::Capacity,
        &volume_tx,
        &mut volume_stores,
        stopped(),
    );
    drop(volume_tx);
    // Ready once the caches hold what the API server had (kube-scheduler's informer sync).
    let synced = Condition::new("the node, pod, PriorityClass and volume caches have not synced");
    telemetry.health.readiness("informer-sync", synced.clone());
    let bridge = InformerBridge {
        synced,
        cache,
        queue: queue.clone(),
        scheduler_name: config.scheduler_name.clone(),
        stores: (nodes.store(), pods.store(), classes.store()),
        volume_stores,
    };
    let channels = (
        nodes.subscribe(),
        pods.subscribe(),
        classes.subscribe(),
        volume_rx,
    );
    tasks.spawn(nodes.run(stopped()));
    tasks.spawn(pods.run(stopped()));
    tasks.spawn(classes.run(stopped()));
    tasks.spawn(
        bridge
            .run(channels, stopped())
            .instrument(info_span!("informer_bridge")),
    );

    // Leader election; the queue only hands out pods while we lead.
    let election = LeaderElector::new(client.clone(), config.leader_election());
    let mut leadership = election.leadership();
    let lease_duration = config.lease_duration;
    let health_view = election.leadership();
    telemetry.health.liveness("leaderElection", move || {
        health_view
            .borrow()
            .check(std::time::Instant::now(), lease_duration)
    });
    let status_view = election.leadership();
    let lease_name = config.lease_name.clone();
    telemetry.metrics.gauge_vec_fn(
        "leader_election_master_status",
        "Whether this process leads (1) or not (0), by the lease's name.",
        "name",
        move || {
            vec![(
                lease_name.clone(),
                f64::from(u8::from(status_view.borrow().leading)),
            )]
        },
    );
    tasks.spawn(election.run(stopped()));
    let forward_queue = queue.clone();
    let forward_stop = stopped();
    let (lost_tx, lost_rx) = tokio::sync::oneshot::channel::<()>();
    tasks.spawn(async move {
        tokio::pin!(forward_stop);
        let mut was_leading = false;
        loop {
            tokio::select! {
                biased;
                () = &mut forward_stop => break,
                changed = leadership.changed() => {
                    if changed.is_err() { break; }
                    let leading = leadership.borrow_and_update().leading;
                    if leading == was_leading {
                        continue;
                    }
                    forward_queue.do_send(SetLeading(leading));
                    if was_leading {
                        // Stepping down for good: the process exits.
                        let _ = lost_tx.send(());
                        break;
                    }
                    was_leading = leading;
                }
            }
        }
    });

    info!(name = %config.scheduler_name, workers = config.workers, identity = %config.holder_identity, "scheduler running");
    let lost = tokio::select! {
        () = shutdown => false,
        Ok(()) = lost_rx => true,
    };
    if lost {
        warn!("stepping down: leadership lost");
    } else {
        info!("stopping");
    }
    stop_tx.send_replace(true);
    // The election releases the lease on its way out; give the tasks a moment.
    let drain = async { while tasks.join_next().await.is_some() {} };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(3), drain).await;
    actors.stop().await;
    if lost {
        return Err(SchedulerError::LostLeadership);
    }
    Ok(())
}

trait MapUnit: Future + Sized {
    fn map<F: FnOnce(Self::Output)>(self, f: F) -> impl Future<Output = ()> {
        async move { f(self.await) }
    }
}
impl<T: Future> MapUnit for T {}

fn resource(group: &str, plural: &str) -> &'static api::ResourceInfo {
    api::resources::find(group, "v1", plural).expect("served resource")
}

const STORAGE_GROUP: &str = "storage.k8s.io";
/// How often the informer bridge looks whether every cache has synced, until they have.
const SYNC_RECHECK: std::time::Duration = std::time::Duration::from_millis(50);

/// A change VolumeBinding cares about, from one of its informers.
enum VolumeEvent {
    Claim(InformerEvent<PersistentVolumeClaim>),
    Volume(InformerEvent<PersistentVolume>),
    Class(InformerEvent<StorageClass>),
    Driver(InformerEvent<CSIDriver>),
    Capacity(InformerEvent<CSIStorageCapacity>),
}

/// Starts an informer for one of VolumeBinding's kinds, forwarding its events into `tx` and
/// adding its store's sync check to `synced`.
#[allow(clippy::too_many_arguments)]
fn spawn_volume_informer<T>(
    tasks: &mut tokio::task::JoinSet<()>,
    client: &Client,
    plural: &str,
    group: &str,
    wrap: fn(InformerEvent<T>) -> VolumeEvent,
    tx: &mpsc::Sender<VolumeEvent>,
    synced: &mut Vec<Box<dyn Fn() -> bool + Send + Sync>>,
    stopped: impl Future<Output = ()> + Send + 'static,
) where
    T: k8s_openapi::Resource
        + k8s_openapi::Metadata<Ty = ObjectMeta>
        + serde::de::DeserializeOwned
        + Clone
        + Send
        + Sync
        + 'static,
{
    let mut informer = Informer::<T>::new(
        client.clone(),
        resource(group, plural),
        None,
        ListParams::default(),
    );
    let store = informer.store();
    synced.push(Box::new(move || store.has_synced()));
    let mut events = informer.subscribe();
    let tx = tx.clone();
    tasks.spawn(informer.run(stopped));
    tasks.spawn(async move {
        while let Some(event) = events.recv().await {
            if tx.send(wrap(event)).await.is_err() {
                break;
            }
        }
    });
}

/// The actix system thread and the addresses of its actors.
struct ActorSystem {
    queue: Addr<QueueActor>,
    system: actix::System,
    thread: std::thread::JoinHandle<()>,
}

impl ActorSystem {
    fn start(
        config: &SchedulerConfig,
        client: Client,
        cache: Arc<RwLock<Cache>>,
        metrics: Arc<Metrics>,
    ) -> Result<ActorSystem, SchedulerError> {
        let io = tokio::runtime::Handle::current();
        let events = EventSink::start(client.clone(), metrics.event_sink.clone());
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (workers, seed, component) =
            (config.workers, config.seed, config.scheduler_name.clone());
        let thread = std::thread::Builder::new()
            .name("scheduler-actors".into())
            .spawn(move || {
                let system = actix::System::new();
                system.block_on(async move {
                    let worker_cache = cache.clone();
                    let worker_metrics = metrics.clone();
                    let counter = Arc::new(std::sync::atomic::AtomicU64::new(0));
                    let queue = QueueActor::start_all(
                        workers,
                        move |queue, binder| {
                            let n = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            Worker::new(
                                worker_cache.clone(),
                                seed.wrapping_add(n),
                                queue,
                                binder,
                                worker_metrics.clone(),
                            )
                        },
                        |queue| {
                            Binder::new(
                                client,
                                events,
                                io,
                                queue,
                                cache,
                                metrics.clone(),
                                component,
                            )
                        },
                        metrics.clone(),
                    );
                    let _ = ready_tx.send((queue, actix::System::current()));
                });
                let _ = system.run();
            })
            .map_err(|e| SchedulerError::Actors(e.to_string()))?;
        let (queue, system) = ready_rx
            .recv()
            .map_err(|e| SchedulerError::Actors(e.to_string()))?;
        Ok(ActorSystem {
            queue,
            system,
            thread,
        })
    }

    async fn stop(self) {
        self.system.stop();
        let _ = tokio::task::spawn_blocking(move || self.thread.join()).await;
    }
}

/// Carries informer events into the cache and the queue.
struct InformerBridge {
    /// Set once every cache has synced.
    synced: Condition,
    cache: Arc<RwLock<Cache>>,
    queue: Addr<QueueActor>,
    scheduler_name: String,
    stores: (Store<Node>, Store<CachedPod>, Store<PriorityClass>),
    /// Whether each of VolumeBinding's informers has synced.
    volume_stores: Vec<Box<dyn Fn() -> bool + Send + Sync>>,
}

type Channels = (
    mpsc::Receiver<InformerEvent<Node>>,
    mpsc::Receiver<InformerEvent<CachedPod>>,
    mpsc::Receiver<InformerEvent<PriorityClass>>,
    mpsc::Receiver<VolumeEvent>,
);

impl InformerBridge {
    async fn run(self, channels: Channels, shutdown: impl Future<Output = ()>) {
        let (mut nodes, mut pods, mut classes, mut volumes) = channels;
        tokio::pin!(shutdown);
        let mut announced = false;
        // An informer whose list is empty syncs without an event, possibly after the last
        // event of the others was handled: until the caches are announced, look again now
        // and then, not only after an event.
        let mut recheck = tokio::time::interval(SYNC_RECHECK);
        recheck.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                () = &mut shutdown => return,
                _ = recheck.tick(), if !announced => {}
                // Classes before pods, so priorities resolve; nodes before pods, so bound pods
                // find their nodes.
                Some(event) = classes.recv() => self.on_class(event),
                Some(event) = volumes.recv() => self.on_volume(event),
                Some(event) = nodes.recv() => self.on_node(event),
                Some(event) = pods.recv() => self.on_pod(event),
                else => return,
            }
            if !announced
                && self.stores.0.has_synced()
                && self.stores.1.has_synced()
                && self.stores.2.has_synced()
                && self.volume_stores.iter().all(|synced| synced())
                && volumes.is_empty()
                && nodes.is_empty()
                && pods.is_empty()
                && classes.is_empty()
            {
                announced = true;
                self.synced.set(true);
                info!(
                    nodes = self.stores.0.len(),
                    pods = self.stores.1.len(),
                    "caches synced"
                );
                self.queue.do_send(Synced);
            }
        }
    }

    fn on_class(&self, event: InformerEvent<PriorityClass>) {
        let mut cache = self.cache.write();
        match event {
            InformerEvent::Added(c) | InformerEvent::Updated { new: c, .. } => {
                cache.apply_priority_class(&c)
            }
            InformerEvent::Deleted(c) => {
                cache.delete_priority_class(c.metadata.name.as_deref().unwrap_or_default())
            }
        }
    }

    /// Claims, volumes, classes and capacity change what fits where: unschedulable pods are
    /// retried (kube-scheduler's VolumeBinding queueing hints, coarsely).
    fn on_volume(&self, event: VolumeEvent) {
        fn name<T: k8s_openapi::Metadata<Ty = ObjectMeta>>(o: &T) -> &str {
            o.metadata().name.as_deref().unwrap_or_default()
        }
        fn key<T: k8s_openapi::Metadata<Ty = ObjectMeta>>(o: &T) -> String {
            api::informer::key(o.metadata().namespace.as_deref(), name(o))
        }
        {
            let mut cache = self.cache.write();
            let volumes = cache.volumes_mut();
            match event {
                VolumeEvent::Claim(
                    InformerEvent::Added(c) | InformerEvent::Updated { new: c, .. },
                ) => volumes.apply_claim(&c),
                VolumeEvent::Claim(InformerEvent::Deleted(c)) => volumes.delete_claim(&key(&*c)),
                VolumeEvent::Volume(
                    InformerEvent::Added(v) | InformerEvent::Updated { new: v, .. },
                ) => volumes.apply_volume(&v),
                VolumeEvent::Volume(InformerEvent::Deleted(v)) => volumes.delete_volume(name(&*v)),
                VolumeEvent::Class(
                    InformerEvent::Added(c) | InformerEvent::Updated { new: c, .. },
                ) => volumes.apply_class(name(&*c), ClassInfo::new(&c)),
                VolumeEvent::Class(InformerEvent::Deleted(c)) => volumes.delete_class(name(&*c)),
                VolumeEvent::Driver(
                    InformerEvent::Added(d) | InformerEvent::Updated { new: d, .. },
                ) => volumes.apply_driver(&d),
                VolumeEvent::Driver(InformerEvent::Deleted(d)) => volumes.delete_driver(name(&*d)),
                VolumeEvent::Capacity(
                    InformerEvent::Added(c) | InformerEvent::Updated { new: c, .. },
                ) => volumes.apply_capacity(&key(&*c), CapacityInfo::new(&c)),
                VolumeEvent::Capacity(InformerEvent::Deleted(c)) => {
                    volumes.delete_capacity(&key(&*c))
                }
            }
        }
        self.queue.do_send(ClusterChanged);
    }

    fn on_node(&self, event: InformerEvent<Node>) {
        match event {
            InformerEvent::Added(n) | InformerEvent::Updated { new: n, .. } => {
                self.cache.write().apply_node(&n)
            }
            InformerEvent::Deleted(n) => self
                .cache
                .write()
                .delete_node(n.metadata.name.as_deref().unwrap_or_default()),
        }
        self.queue.do_send(ClusterChanged);
    }

    fn on_pod(&self, event: InformerEvent<CachedPod>) {
        let nominated = |p: &CachedPod| p.info.nominated_node_name.is_some();
        let (pod, changed, nomination_removed) = match event {
            InformerEvent::Added(p) => (p, true, false),
            InformerEvent::Updated { old, new } => {
                let changed = old.spec_digest != new.spec_digest;
                let removed = nominated(&old) && !nominated(&new);
                (new, changed, removed)
            }
            InformerEvent::Deleted(p) => {
                let key = p.info.key.clone();
                self.cache.write().delete_pod(&key);
                self.queue.do_send(PodGone { key });
                self.queue.do_send(ClusterChanged);
                return;
            }
        };
        let info = self.cache.read().pod_info(&pod);
        if info.node_name.is_none()
            && (info.nominated_node_name.is_some()
                || self.cache.read().nominated_node(&info.key).is_some())
        {
            self.cache
                .write()
                .apply_unbound(info.clone(), nomination_removed);
        }
        if info.node_name.is_some() {
            self.cache.write().apply_pod(info.clone());
            self.queue.do_send(PodGone {
                key: info.key.clone(),
            });
        } else if info.deleting || info.terminal || info.scheduler_name != self.scheduler_name {
            self.queue.do_send(PodGone {
                key: info.key.clone(),
            });
        } else {
            self.queue.do_send(PodPending { pod: info, changed });
        }
    }
}
