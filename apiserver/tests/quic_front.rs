//! The component front end to end: a real one-member store and API server in this process, on
//! loopback ports, reached through `api::Client` with an admin's certificate (and a node host's,
//! for the node authorizer).

use std::collections::BTreeSet;
use std::error::Error;
use std::future::Future;
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use api::client::{Client, ClientConfig, DeleteParams, ListParams, Patch};
use api::informer::{Informer, InformerEvent, State};
use api::protocol::WatchEventKind;
use api::ResourceInfo;
use apiserver::server::{ApiServerConfig, ServerError};
use apiserver::watch_cache::DEFAULT_WINDOW;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use transport::pki::{create_ca, issue, CertSpec};

type TestResult = Result<(), Box<dyn Error + Send + Sync>>;

const NODE_HOST: &str = "nodehost-1";
const OTHER_HOST: &str = "nodehost-2";
const ADMIN: &str = "admin";
const SCHEDULER: &str = "scheduler";
const CONTROLLERS: &str = "controllers";

/// Polls `condition` until it holds, failing with `why` after `timeout`.
async fn wait_until<F, Fut>(why: &str, timeout: Duration, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    while !condition().await {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting until {why}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A loopback UDP port nobody uses right now.
/// A loopback address the store member or API server binds later: from below the ephemeral
/// range, since a port bound to 0 and dropped could be taken by any QUIC client meanwhile.
fn free_udp_port() -> SocketAddr {
    let ports = transport::ports::free_loopback_ports(1).expect("a free port");
    SocketAddr::from(([127, 0, 0, 1], ports[0]))
}

fn pods() -> &'static ResourceInfo {
    api::resources::pods()
}

fn pod_manifest(name: &str, node: Option<&str>) -> Value {
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]},
    });
    if let Some(node) = node {
        pod["spec"]["nodeName"] = json!(node);
    }
    pod
}

fn name_of(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or("")
}

/// One API server replica running in a task.
struct ApiServerTask {
    quic: SocketAddr,
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<(), ServerError>>,
}

impl ApiServerTask {
    fn start(store: SocketAddr, certs: &Path, quic: SocketAddr) -> ApiServerTask {
        ApiServerTask::start_with_window(store, certs, quic, DEFAULT_WINDOW)
    }

    /// `window`: events each resource keeps for watches that start in the past.
    fn start_with_window(
        store: SocketAddr,
        certs: &Path,
        quic: SocketAddr,
        window: usize,
    ) -> ApiServerTask {
        let listen_http = "127.0.0.1:0".parse().expect("addr");
        let mut config = ApiServerConfig::new(vec![store], certs, listen_http);
        config.listen_quic = Some(quic);
        config.watch_window = window;
        // No controller manager makes the namespaces' service accounts here.
        config.admission =
            apiserver::admission::AdmissionConfig::from_flags(&[], &["ServiceAccount".into()])
                .expect("a known plugin");
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(apiserver::server::run(config, async move {
            let _ = stopped.await;
        }));
        ApiServerTask { quic, stop, task }
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        match tokio::time::timeout(Duration::from_secs(10), self.task).await {
            Ok(Ok(Ok(()))) => {}
            other => panic!("API server did not stop cleanly: {other:?}"),
        }
    }
}

/// Waits until the API server that `client` reaches answers over QUIC.
async fn wait_answering(client: &Client) {
    let namespaces = api::resources::find("", "v1", "namespaces").expect("namespaces");
    wait_until(
        "the API server answers over QUIC",
        Duration::from_secs(30),
        || {
            let client = client.clone();
            async move {
                client
                    .get::<Value>(namespaces, None, "default")
                    .await
                    .is_ok()
            }
        },
    )
    .await;
}

/// A one-member store and one API server, with certificates for a node host.
struct Cluster {
    _dir: tempfile::TempDir,
    certs: PathBuf,
    store: SocketAddr,
    store_stop: Option<(oneshot::Sender<()>, tokio::task::JoinHandle<()>)>,
    apiserver: Option<ApiServerTask>,
}

impl Cluster {
    async fn start() -> Cluster {
        Cluster::start_with_window(DEFAULT_WINDOW).await
    }

    async fn start_with_window(window: usize) -> Cluster {
        let dir = tempfile::tempdir().expect("tempdir");
        let certs = dir.path().join("certs");
        create_ca(&certs, "quic-front").expect("CA");
        for (name, organization) in [
            ("m1", "kemu:store"),
            ("apiserver", "kemu:apiserver"),
            (NODE_HOST, "system:nodes"),
            (OTHER_HOST, "system:nodes"),
            (ADMIN, "system:masters"),
            (SCHEDULER, "system:kube-scheduler"),
            (CONTROLLERS, "system:kube-controller-manager"),
        ] {
            let spec = CertSpec {
                name: name.into(),
                organizations: vec![organization.into()],
                sans: vec![],
            };
            issue(&certs, &spec).expect("issue a certificate");
        }
        let store = free_udp_port();
        let peer = free_udp_port();
        let member = store::config::MemberConfig::new(
            "m1",
            dir.path().join("m1"),
            store,
            peer,
            vec![("m1".into(), peer)],
            &certs,
        );
        let (store_stop, store_stopped) = oneshot::channel::<()>();
        let store_task = tokio::spawn(async move {
            let stopped = async move {
                let _ = store_stopped.await;
            };
            if let Err(e) = store::service::run_member(member, stopped).await {
                panic!("store member failed: {e}");
            }
        });
        let apiserver = ApiServerTask::start_with_window(store, &certs, free_udp_port(), window);
        let cluster = Cluster {
            _dir: dir,
            certs,
            store,
            store_stop: Some((store_stop, store_task)),
            apiserver: Some(apiserver),
        };
        wait_answering(&cluster.client()).await;
        cluster
    }

    /// Stops the store member and waits until it has (the API server stays up).
    async fn stop_store(&mut self) {
        if let Some((stop, task)) = self.store_stop.take() {
            let _ = stop.send(());
            let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
        }
    }

    fn quic(&self) -> SocketAddr {
        self.apiserver.as_ref().expect("API server running").quic
    }

    fn client_as(&self, endpoint: SocketAddr, identity: &str) -> Client {
        let mut config = ClientConfig::new(vec![endpoint], &self.certs, identity);
        config.call_timeout = Duration::from_secs(5);
        Client::new(config).expect("client")
    }

    fn client_of(&self, endpoint: SocketAddr) -> Client {
        self.client_as(endpoint, ADMIN)
    }

    fn client(&self) -> Client {
        self.client_of(self.quic())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn verbs_behave_as_over_http() -> TestResult {
    let cluster = Cluster::start().await;
    let client = cluster.client();
    let ns = Some("default");

    let created: Pod = client
        .create(pods(), ns, &pod_manifest("web", None))
        .await?;
    assert_eq!(name_of(&created), "web");
    assert!(created.metadata.uid.is_some(), "the registry sets a uid");
    let status = created.status.as_ref().and_then(|s| s.phase.as_deref());
    assert_eq!(status, Some("Pending"));
    let version = created.metadata.resource_version.clone().expect("rv");

    let again = client
        .create::<_, Pod>(pods(), ns, &pod_manifest("web", None))
        .await
        .expect_err("a second create conflicts");
    assert!(again.is_conflict() && again.is_already_exists(), "{again}");

    let got: Pod = client.get(pods(), ns, "web").await?;
    assert_eq!(
        got.metadata.resource_version.as_deref(),
        Some(version.as_str())
    );
    let missing = client
        .get::<Pod>(pods(), ns, "nope")
        .await
        .expect_err("no such pod");
    assert!(missing.is_not_found(), "{missing}");
    assert!(missing.to_string().contains("pods \"nope\" not found"));

    let listed = client
        .list::<Pod>(pods(), ns, &ListParams::default())
        .await?;
    assert_eq!(listed.items.len(), 1);
    assert!(listed.resource_version.parse::<i64>()? >= version.parse::<i64>()?);
    let none = client
        .list::<Pod>(pods(), ns, &ListParams::default().labels("app=other"))
        .await?;
    assert!(none.items.is_empty());
    let bad = client
        .list::<Pod>(pods(), ns, &ListParams::default().fields("spec.bogus=x"))
        .await
        .expect_err("unknown field selector");
    assert_eq!(bad.code(), Some(400), "{bad}");

    let patch = Patch::Merge(json!({"metadata": {"labels": {"app": "web"}}}));
    let patched: Pod = client.patch(pods(), ns, "web", &patch).await?;
    let labels = patched.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("app").map(String::as_str), Some("web"));
    let selected = client
        .list::<Pod>(pods(), ns, &ListParams::default().labels("app=web"))
        .await?;
    assert_eq!(selected.items.len(), 1);

    // A stale resourceVersion loses the optimistic-concurrency race.
    let mut stale = got.clone();
    stale.metadata.labels = Some([("app".to_string(), "stale".to_string())].into());
    let lost = client
        .update::<_, Pod>(pods(), ns, "web", &stale)
        .await
        .expect_err("stale update");
    assert!(lost.is_conflict(), "{lost}");

    let mut running = patched.clone();
    running.status.get_or_insert_with(Default::default).phase = Some("Running".into());
    let updated: Pod = client.update_status(pods(), ns, "web", &running).await?;
    let phase = updated.status.as_ref().and_then(|s| s.phase.as_deref());
    assert_eq!(phase, Some("Running"));

    // A status patch answered with the pod's metadata only, as PartialObjectMetadata.
    let replace =
        Patch::Json(json!([{"op": "replace", "path": "/status/phase", "value": "Succeeded"}]));
    let meta = client
        .patch_status_metadata(pods(), ns, "web", &replace)
        .await?;
    assert_eq!(meta.name.as_deref(), Some("web"));
    let written: i64 = meta
        .resource_version
        .as_deref()
        .unwrap_or_default()
        .parse()?;
    assert!(
        written
            > updated
                .metadata
                .resource_version
                .as_deref()
                .unwrap_or_default()
                .parse::<i64>()?
    );
    let answer = client
        .call(&api::protocol::ApiRequest::Patch {
            resource: api::protocol::ResourceRef::from_info(pods()),
            namespace: Some("default".into()),
            name: "web".into(),
            subresource: Some("status".into()),
            patch_type: api::protocol::MERGE_PATCH.into(),
            patch: bytes::Bytes::from_static(b"{\"status\":{\"message\":\"done\"}}"),
            field_manager: None,
            force: false,
            metadata_only: true,
        })
        .await?;
    let api::protocol::ApiResponse::Object(json) = answer else {
        panic!("not an object: {answer:?}");
    };
    let partial: serde_json::Value = serde_json::from_slice(&json)?;
    assert_eq!(partial["kind"], "PartialObjectMetadata");
    assert_eq!(partial["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(partial["metadata"]["name"], "web");
    assert!(partial.get("spec").is_none() && partial.get("status").is_none());
    let stored: Pod = client.get(pods(), ns, "web").await?;
    let status = stored.status.clone().unwrap_or_default();
    assert_eq!(status.phase.as_deref(), Some("Succeeded"));
    assert_eq!(status.message.as_deref(), Some("done"));
    assert_eq!(
        stored.metadata.resource_version,
        partial["metadata"]["resourceVersion"]
            .as_str()
            .map(str::to_string)
    );

    // A full update answered with the metadata only, as a kubelet renews its Lease.
    let mut relabelled = stored.clone();
    relabelled.metadata.labels = Some([("app".to_string(), "renewed".to_string())].into());
    let meta = client
        .update_metadata(pods(), ns, "web", &relabelled)
        .await?;
    assert_eq!(meta.name.as_deref(), Some("web"));
    assert_eq!(
        meta.labels
            .unwrap_or_default()
            .get("app")
            .map(String::as_str),
        Some("renewed")
    );
    let stored: Pod = client.get(pods(), ns, "web").await?;
    assert_eq!(stored.metadata.resource_version, meta.resource_version);
    assert_ne!(meta.resource_version, relabelled.metadata.resource_version);
    assert_eq!(
        stored.status.and_then(|s| s.phase).as_deref(),
        Some("Succeeded")
    );

    let unsupported = client
        .call(&api::protocol::ApiRequest::Patch {
            resource: api::protocol::ResourceRef::from_info(pods()),
            namespace: Some("default".into()),
            name: "web".into(),
            subresource: None,
            patch_type: "text/plain".into(),
            patch: bytes::Bytes::from_static(b"{}"),
            field_manager: None,
            force: false,
            metadata_only: false,
        })
        .await
        .expect_err("unknown patch type");
    assert_eq!(unsupported.code(), Some(415), "{unsupported}");

    // An unbound pod goes at once.
    let deleted: Pod = client
        .delete(pods(), ns, "web", &DeleteParams::default())
        .await?;
    assert_eq!(name_of(&deleted), "web");
    let gone = client
        .get::<Pod>(pods(), ns, "web")
        .await
        .expect_err("deleted");
    assert!(gone.is_not_found());
    Ok(())
}

/// Reads frames until one names a pod; returns (kind, pod name).
async fn next_pod_event(
    watch: &mut api::client::WatchStream,
) -> Result<(WatchEventKind, String), Box<dyn Error + Send + Sync>> {
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(10), watch.next())
            .await?
            .ok_or("watch ended")??;
        if frame.kind == WatchEventKind::Bookmark {
            continue;
        }
        let pod: Pod = serde_json::from_slice(&frame.object)?;
        assert_eq!(
            pod.metadata.resource_version.as_deref(),
            Some(frame.resource_version.to_string().as_str())
        );
        return Ok((frame.kind, name_of(&pod).to_string()));
    }
}

/// The pages after the first of a paginated list come from the cache without asking the store
/// for its newest revision: here they are served with the store stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn continued_list_pages_do_not_wait_for_the_store() -> TestResult {
    let mut cluster = Cluster::start().await;
    let client = cluster.client();
    let ns = Some("default");
    for i in 0..3 {
        client
            .create::<_, Value>(pods(), ns, &pod_manifest(&format!("paged-{i}"), None))
            .await?;
    }
    let mut params = ListParams {
        limit: 1,
        ..Default::default()
    };
    let first = client.list::<Value>(pods(), ns, &params).await?;
    assert_eq!(first.items.len(), 1);
    let mut names = vec![first.items[0]["metadata"]["name"].clone()];
    params.continue_token = first.continue_token.clone();
    assert!(
        params.continue_token.is_some(),
        "a first page of one of three"
    );

    cluster.stop_store().await;
    // A consistent read needs the store now: it fails.
    let fresh = client
        .list::<Value>(pods(), ns, &ListParams::default())
        .await;
    assert!(fresh.is_err(), "a fresh list with the store stopped");
    // The continued pages do not.
    while params.continue_token.is_some() {
        let page = client.list::<Value>(pods(), ns, &params).await?;
        names.extend(page.items.iter().map(|p| p["metadata"]["name"].clone()));
        params.continue_token = page.continue_token;
    }
    assert_eq!(names, vec!["paged-0", "paged-1", "paged-2"]);
    if let Some(apiserver) = cluster.apiserver.take() {
        apiserver.stop().await;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_watch_sees_only_its_pods() -> TestResult {
    // A short event window, so that an old version is soon gone.
    let cluster = Cluster::start_with_window(4).await;
    let client = cluster.client();
    let ns = Some("default");
    for name in ["p1", "p2", "p3"] {
        let _: Pod = client.create(pods(), ns, &pod_manifest(name, None)).await?;
    }
    let params = ListParams::default().fields("spec.nodeName=n1");
    let mut watch = client.watch(pods(), None, &params).await?;

    client.bind("default", "p2", "n2").await?;
    client.bind("default", "p1", "n1").await?;
    // The pod enters the watch's selection when it is bound: ADDED, not MODIFIED.
    assert_eq!(
        next_pod_event(&mut watch).await?,
        (WatchEventKind::Added, "p1".to_string())
    );
    client.bind("default", "p3", "n1").await?;
    // p2's binding happened before p3's; had it leaked into this watch it would come first.
    assert_eq!(
        next_pod_event(&mut watch).await?,
        (WatchEventKind::Added, "p3".to_string())
    );
    let bound: Pod = client.get(pods(), ns, "p1").await?;
    assert_eq!(
        bound.spec.as_ref().and_then(|s| s.node_name.as_deref()),
        Some("n1")
    );
    let rebind = client
        .bind("default", "p1", "n2")
        .await
        .expect_err("already bound");
    assert!(rebind.is_conflict(), "{rebind}");

    // Graceful deletion of a bound pod is a MODIFIED (deletionTimestamp set) for its node.
    let _: Pod = client
        .delete(pods(), ns, "p1", &DeleteParams::default())
        .await?;
    assert_eq!(
        next_pod_event(&mut watch).await?,
        (WatchEventKind::Modified, "p1".to_string())
    );
    let _: Pod = client
        .delete(pods(), ns, "p1", &DeleteParams::now())
        .await?;
    assert_eq!(
        next_pod_event(&mut watch).await?,
        (WatchEventKind::Deleted, "p1".to_string())
    );

    // A watch from a version the server no longer has answers 410 through the stream.
    let too_old = ListParams::default().at("1");
    let mut expired = client.watch(pods(), None, &too_old).await?;
    let first = tokio::time::timeout(Duration::from_secs(10), expired.next())
        .await?
        .ok_or("watch ended without an answer")?;
    let e = first.expect_err("410 Gone");
    assert!(e.is_gone(), "{e}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hundred_watches_share_one_connection() -> TestResult {
    const WATCHES: usize = 200;
    let cluster = Cluster::start().await;
    let client = cluster.client();
    // The client connects on its first call.
    assert_eq!(client.connected_to(), None);
    client
        .list::<Pod>(pods(), None, &ListParams::default())
        .await?;
    let connection = client.connected_to();
    assert_eq!(connection, Some(cluster.quic()));

    let opened = futures::future::join_all((0..WATCHES).map(|i| {
        let client = client.clone();
        async move {
            let params = ListParams::default().fields(format!("spec.nodeName=node-{i}"));
            client.watch(pods(), None, &params).await
        }
    }))
    .await;
    let (seen_tx, mut seen) = mpsc::channel::<(usize, String)>(WATCHES);
    for (i, watch) in opened.into_iter().enumerate() {
        let mut watch = watch?;
        let seen_tx = seen_tx.clone();
        tokio::spawn(async move {
            if let Ok((_, name)) = next_pod_event(&mut watch).await {
                let _ = seen_tx.send((i, name)).await;
            }
        });
    }
    drop(seen_tx);

    let creates = futures::future::join_all((0..WATCHES).map(|i| {
        let client = client.clone();
        async move {
            let manifest = pod_manifest(&format!("pod-{i}"), Some(&format!("node-{i}")));
            client
                .create::<_, Value>(pods(), Some("default"), &manifest)
                .await
        }
    }))
    .await;
    for created in creates {
        created?;
    }

    let mut received = BTreeSet::new();
    while received.len() < WATCHES {
        let (i, name) = tokio::time::timeout(Duration::from_secs(20), seen.recv())
            .await?
            .ok_or("a watch ended without its event")?;
        assert_eq!(name, format!("pod-{i}"), "watch {i} saw another node's pod");
        received.insert(i);
    }
    // Every watch and call went over the one connection made at the start.
    assert_eq!(client.connected_to(), connection);
    Ok(())
}

/// The next informer event, as "+name", "~name" or "-name".
async fn next_change(events: &mut mpsc::Receiver<InformerEvent<Pod>>) -> String {
    let event = tokio::time::timeout(Duration::from_secs(20), events.recv())
        .await
        .expect("an informer event in time")
        .expect("the informer is running");
    match event {
        InformerEvent::Added(pod) => format!("+{}", name_of(&pod)),
        InformerEvent::Updated { new, .. } => format!("~{}", name_of(&new)),
        InformerEvent::Deleted(pod) => format!("-{}", name_of(&pod)),
    }
}

async fn next_changes(events: &mut mpsc::Receiver<InformerEvent<Pod>>, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(next_change(events).await);
    }
    out.sort();
    out
}

fn label_of(pod: &Pod) -> Option<String> {
    pod.metadata.labels.as_ref()?.get("v").cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_informer_follows_changes_and_relists_after_losing_its_server() -> TestResult {
    let mut cluster = Cluster::start().await;
    let client = cluster.client();
    let ns = Some("default");
    let _: Pod = client.create(pods(), ns, &pod_manifest("a", None)).await?;

    let mut informer: Informer<Pod> =
        Informer::new(client.clone(), pods(), ns, ListParams::default())
            .with_backoff(Duration::from_millis(50), Duration::from_millis(500));
    let store = informer.store();
    let mut events = informer.subscribe();
    let state = informer.state();
    let (stop_informer, informer_stopped) = oneshot::channel::<()>();
    let run = tokio::spawn(informer.run(async move {
        let _ = informer_stopped.await;
    }));

    assert!(
        tokio::time::timeout(Duration::from_secs(20), store.wait_synced()).await?,
        "the informer syncs"
    );
    assert!(store.has_synced());
    assert_eq!(next_change(&mut events).await, "+a");
    assert_eq!(store.keys(), ["default/a"]);

    let _: Pod = client.create(pods(), ns, &pod_manifest("b", None)).await?;
    assert_eq!(next_change(&mut events).await, "+b");
    let _: Pod = client.create(pods(), ns, &pod_manifest("e", None)).await?;
    assert_eq!(next_change(&mut events).await, "+e");
    let label = |v: &str| Patch::Merge(json!({"metadata": {"labels": {"v": v}}}));
    let _: Pod = client.patch(pods(), ns, "b", &label("1")).await?;
    assert_eq!(next_change(&mut events).await, "~b");
    assert_eq!(
        store
            .get("default/b")
            .as_deref()
            .and_then(label_of)
            .as_deref(),
        Some("1")
    );
    let _: Pod = client
        .delete(pods(), ns, "a", &DeleteParams::default())
        .await?;
    assert_eq!(next_change(&mut events).await, "-a");
    assert!(store.get_named(ns, "a").is_none());
    assert!(matches!(*state.borrow(), State::Watching { .. }));

    // Cut the informer's stream: stop its API server, change things through another replica
    // meanwhile, then bring the first back on the same port.
    let first = cluster.apiserver.take().expect("running");
    let quic = first.quic;
    first.stop().await;
    let other = ApiServerTask::start(cluster.store, &cluster.certs, free_udp_port());
    let writer = cluster.client_of(other.quic);
    wait_until(
        "the second API server answers",
        Duration::from_secs(30),
        || {
            let writer = writer.clone();
            async move {
                writer
                    .get::<Pod>(pods(), Some("default"), "b")
                    .await
                    .is_ok()
            }
        },
    )
    .await;
    let _: Pod = writer
        .delete(pods(), ns, "b", &DeleteParams::default())
        .await?;
    let _: Pod = writer.create(pods(), ns, &pod_manifest("c", None)).await?;
    let _: Pod = writer.patch(pods(), ns, "e", &label("2")).await?;
    wait_until(
        "the first API server's port is free",
        Duration::from_secs(10),
        || async { UdpSocket::bind(quic).is_ok() },
    )
    .await;
    cluster.apiserver = Some(ApiServerTask::start(cluster.store, &cluster.certs, quic));

    // The re-list is turned into the changes the informer missed.
    assert_eq!(next_changes(&mut events, 3).await, ["+c", "-b", "~e"]);
    let cached: BTreeSet<String> = store.keys().into_iter().collect();
    let expected: BTreeSet<String> = ["default/c", "default/e"].map(String::from).into();
    assert_eq!(cached, expected);
    assert_eq!(
        store
            .get("default/e")
            .as_deref()
            .and_then(label_of)
            .as_deref(),
        Some("2")
    );

    // And it watches again.
    let _: Pod = client.create(pods(), ns, &pod_manifest("f", None)).await?;
    assert_eq!(next_change(&mut events).await, "+f");
    let listed = client
        .list::<Pod>(pods(), ns, &ListParams::default())
        .await?;
    let server: BTreeSet<String> = listed
        .items
        .iter()
        .map(|p| format!("default/{}", name_of(p)))
        .collect();
    let cached: BTreeSet<String> = store.keys().into_iter().collect();
    assert_eq!(cached, server);

    let _ = stop_informer.send(());
    tokio::time::timeout(Duration::from_secs(5), run).await??;
    other.stop().await;
    if let Some(apiserver) = cluster.apiserver.take() {
        apiserver.stop().await;
    }
    Ok(())
}

/// Whether a process on this machine has bound loopback UDP port `addr` (read from the
/// kernel's socket table, so that looking does not take the port from under the server).
fn udp_port_bound(addr: SocketAddr) -> bool {
    let table = std::fs::read_to_string("/proc/net/udp").unwrap_or_default();
    let local = format!(":{:04X} ", addr.port());
    table
        .lines()
        .skip(1)
        .filter_map(|line| line.split_whitespace().nth(1))
        .any(|address| format!("{address} ").ends_with(&local))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_client_reaches_a_late_server_soon_after_it_binds() -> TestResult {
    // A component waiting for its API server to come back: nothing answers at the port for a
    // few seconds, as while a killed server restarts.
    let cluster = Cluster::start().await;
    let quic = free_udp_port();
    let mut config = ClientConfig::new(vec![quic], &cluster.certs, ADMIN);
    config.call_timeout = Duration::from_secs(30);
    let client = Client::new(config)?;
    let namespaces = api::resources::find("", "v1", "namespaces").ok_or("namespaces")?;
    let get = tokio::spawn(async move {
        let got = client.get::<Value>(namespaces, None, "default").await;
        (got.map(|_| ()), Instant::now())
    });
    tokio::time::sleep(Duration::from_millis(3200)).await;
    let late = ApiServerTask::start(cluster.store, &cluster.certs, quic);
    wait_until(
        "the late API server binds its port",
        Duration::from_secs(30),
        || async { udp_port_bound(quic) },
    )
    .await;
    let bound = Instant::now();
    let (got, answered) = tokio::time::timeout(Duration::from_secs(30), get).await??;
    got?;
    // Short connection attempts, each sending its first packets again soon: the server is
    // reached within a fraction of a second, not at a retransmission seconds later.
    let after = answered.saturating_duration_since(bound);
    assert!(
        after < Duration::from_millis(1500),
        "answered {after:?} after the server bound its port"
    );
    late.stop().await;
    Ok(())
}

fn node_manifest(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {}})
}

/// The node authorizer on the component front: a node host registers its nodes, then may
/// write their status and leases and the status of pods bound to them — and nothing of
/// another host's nodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn node_hosts_write_only_what_their_nodes_own() -> TestResult {
    let cluster = Cluster::start().await;
    let admin = cluster.client();
    let mine = cluster.client_as(cluster.quic(), NODE_HOST);
    let theirs = cluster.client_as(cluster.quic(), OTHER_HOST);
    let nodes = api::resources::find("", "v1", "nodes").expect("nodes");
    let leases = api::resources::find("coordination.k8s.io", "v1", "leases").expect("leases");

    let registered: Value = mine.create(nodes, None, &node_manifest("n1")).await?;
    assert_eq!(
        registered["metadata"]["labels"]["kemu.dev/node-host"], NODE_HOST,
        "the API server records who registered the node"
    );
    let _: Value = theirs.create(nodes, None, &node_manifest("n2")).await?;
    // The label is the server's to set: a body naming another host does not count.
    let mut forged = node_manifest("n3");
    forged["metadata"]["labels"] = json!({"kemu.dev/node-host": NODE_HOST});
    let forged: Value = theirs.create(nodes, None, &forged).await?;
    assert_eq!(
        forged["metadata"]["labels"]["kemu.dev/node-host"],
        OTHER_HOST
    );

    let ready =
        Patch::Merge(json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}));
    mine.patch_status::<Value>(nodes, None, "n1", &ready)
        .await?;
    let refused = mine
        .patch_status::<Value>(nodes, None, "n2", &ready)
        .await
        .expect_err("another host's node");
    assert!(refused.code() == Some(403), "{refused}");

    let lease = |node: &str| {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
               "metadata": {"name": node, "namespace": "kube-node-lease"},
               "spec": {"holderIdentity": node}})
    };
    let _: Value = mine
        .create(leases, Some("kube-node-lease"), &lease("n1"))
        .await?;
    let refused = mine
        .create::<_, Value>(leases, Some("kube-node-lease"), &lease("n2"))
        .await
        .expect_err("another host's lease");
    assert!(refused.code() == Some(403), "{refused}");

    let ns = Some("default");
    let _: Value = admin
        .create(pods(), ns, &pod_manifest("on-n1", Some("n1")))
        .await?;
    let _: Value = admin
        .create(pods(), ns, &pod_manifest("on-n2", Some("n2")))
        .await?;
    let running = Patch::Merge(json!({"status": {"phase": "Running"}}));
    mine.patch_status::<Value>(pods(), ns, "on-n1", &running)
        .await?;
    let refused = mine
        .patch_status::<Value>(pods(), ns, "on-n2", &running)
        .await
        .expect_err("a pod on another host's node");
    assert!(refused.code() == Some(403), "{refused}");
    assert!(
        refused.to_string().contains(r#"pods "on-n2" is forbidden: User "nodehost-1" cannot patch resource "pods/status" in API group "" in the namespace "default""#),
        "{refused}"
    );
    theirs
        .patch_status::<Value>(pods(), ns, "on-n2", &running)
        .await?;

    // Pods are listed and watched one own node at a time.
    let own = ListParams::default().fields("spec.nodeName=n1");
    let listed = mine.list::<Value>(pods(), None, &own).await?;
    assert_eq!(listed.items.len(), 1);
    for params in [
        ListParams::default(),
        ListParams::default().fields("spec.nodeName=n2"),
    ] {
        let refused = mine
            .list::<Value>(pods(), None, &params)
            .await
            .expect_err("pods beyond its nodes");
        assert!(refused.code() == Some(403), "{refused}");
    }
    // Nor may a node host create what is not its business.
    let refused = mine
        .create::<_, Value>(pods(), ns, &pod_manifest("sneaky", None))
        .await
        .expect_err("an unbound pod");
    assert!(refused.code() == Some(403), "{refused}");
    if let Some(apiserver) = cluster.apiserver {
        apiserver.stop().await;
    }
    Ok(())
}

/// The managers of the objects' fields, given by `metadata.managedFields`: in kube-apiserver
/// the User-Agent of the kubelet, the scheduler or the controller manager names it; on the
/// component front the identity does. An administrator's writes record none.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn components_write_as_their_kubernetes_managers() -> TestResult {
    let cluster = Cluster::start().await;
    let admin = cluster.client();
    let kubelet = cluster.client_as(cluster.quic(), NODE_HOST);
    let scheduler = cluster.client_as(cluster.quic(), SCHEDULER);
    let controllers = cluster.client_as(cluster.quic(), CONTROLLERS);
    let nodes = api::resources::find("", "v1", "nodes").expect("nodes");
    let managers = |object: &Value| -> Vec<(String, String, Option<String>)> {
        object["metadata"]["managedFields"]
            .as_array()
            .map(|entries| {
                entries
                    .iter()
                    .map(|e| {
                        (
                            e["manager"].as_str().unwrap_or_default().to_string(),
                            e["operation"].as_str().unwrap_or_default().to_string(),
                            e["subresource"].as_str().map(str::to_string),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let entry =
        |m: &str, sub: Option<&str>| (m.to_string(), "Update".to_string(), sub.map(str::to_string));

    let node: Value = kubelet.create(nodes, None, &node_manifest("n1")).await?;
    assert_eq!(managers(&node), vec![entry("kubelet", None)]);

    let ns = Some("default");
    let by_admin: Value = admin
        .create(pods(), ns, &pod_manifest("by-admin", Some("n1")))
        .await?;
    assert!(managers(&by_admin).is_empty(), "{by_admin}");
    let by_controllers: Value = controllers
        .create(pods(), ns, &pod_manifest("by-controllers", Some("n1")))
        .await?;
    assert_eq!(
        managers(&by_controllers),
        vec![entry("kube-controller-manager", None)]
    );

    let running = Patch::Merge(json!({"status": {"phase": "Running", "podIP": "10.128.0.5"}}));
    kubelet
        .patch_status_metadata(pods(), ns, "by-admin", &running)
        .await?;
    let pod: Value = admin.get(pods(), ns, "by-admin").await?;
    assert_eq!(managers(&pod), vec![entry("kubelet", Some("status"))]);
    let fields = &pod["metadata"]["managedFields"][0]["fieldsV1"];
    assert_eq!(fields["f:status"]["f:podIP"], json!({}), "{fields}");
    assert!(fields.get("f:spec").is_none(), "{fields}");

    let unschedulable = Patch::Merge(json!({"status": {"conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}));
    scheduler
        .patch_status::<Value>(pods(), ns, "by-controllers", &unschedulable)
        .await?;
    let pod: Value = admin.get(pods(), ns, "by-controllers").await?;
    assert_eq!(
        managers(&pod),
        vec![
            entry("kube-controller-manager", None),
            entry("kube-scheduler", Some("status")),
        ]
    );
    if let Some(apiserver) = cluster.apiserver {
        apiserver.stop().await;
    }
    Ok(())
}

/// Registration of many nodes at once: a node host writes each Node's status and Lease right
/// after creating it, through another API server whose cache has not seen the Node yet, and
/// is never refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nodes_registered_at_once_are_written_at_once() -> TestResult {
    let cluster = Cluster::start().await;
    let other = ApiServerTask::start(cluster.store, &cluster.certs, free_udp_port());
    let creator = cluster.client_as(cluster.quic(), NODE_HOST);
    let writer = cluster.client_as(other.quic, NODE_HOST);
    let nodes = api::resources::find("", "v1", "nodes").expect("nodes");
    let leases = api::resources::find("coordination.k8s.io", "v1", "leases").expect("leases");
    wait_answering(&cluster.client_of(other.quic)).await;
    let mut registrations = tokio::task::JoinSet::new();
    for i in 0..300 {
        let (creator, writer) = (creator.clone(), writer.clone());
        registrations.spawn(async move {
            let name = format!("burst-{i}");
            let _: Value = creator.create(nodes, None, &node_manifest(&name)).await?;
            let ready = Patch::Merge(
                json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
            );
            writer
                .patch_status::<Value>(nodes, None, &name, &ready)
                .await?;
            let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": name, "namespace": "kube-node-lease"},
                "spec": {"holderIdentity": name}});
            let _: Value = writer
                .create(leases, Some("kube-node-lease"), &lease)
                .await?;
            Ok::<_, api::client::ClientError>(())
        });
    }
    let mut refused = Vec::new();
    while let Some(done) = registrations.join_next().await {
        if let Err(e) = done? {
            refused.push(e.to_string());
        }
    }
    assert!(
        refused.is_empty(),
        "{} refused: {:?}",
        refused.len(),
        refused.first()
    );
    // A host still may not write a node it does not own, however fresh the cache.
    let theirs = cluster.client_as(other.quic, OTHER_HOST);
    let e = theirs
        .patch_status::<Value>(nodes, None, "burst-0", &Patch::Merge(json!({"status": {}})))
        .await
        .expect_err("another host's node");
    assert_eq!(e.code(), Some(403), "{e}");
    other.stop().await;
    if let Some(apiserver) = cluster.apiserver {
        apiserver.stop().await;
    }
    Ok(())
}

fn event_manifest(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": "default"},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": "p"},
        "reason": "Started",
        "message": "Started container main",
        "type": "Normal",
        "source": {"component": "kubelet", "host": "n1"},
        "count": 1,
    })
}

fn new_event(name: &str) -> api::protocol::NewObject {
    api::protocol::NewObject {
        namespace: Some("default".into()),
        object: bytes::Bytes::from(serde_json::to_vec(&event_manifest(name)).expect("encodes")),
    }
}

/// Several creates in one call: each is judged alone (stored at its own revision, or refused
/// with its own Status), and a call beyond the item limit is refused whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn create_many_judges_each_item_alone() -> TestResult {
    let cluster = Cluster::start().await;
    let client = cluster.client();
    let events = api::resources::find("", "v1", "events").expect("events");

    let items = vec![
        new_event("first"),
        new_event("first"),
        api::protocol::NewObject {
            namespace: Some("default".into()),
            object: bytes::Bytes::from_static(b"{\"kind\": "),
        },
        new_event("second"),
    ];
    let outcomes = client.create_many(events, items).await?;
    assert_eq!(outcomes.len(), 4);
    let first = outcomes[0].as_ref().map_err(|e| e.to_string())?;
    let duplicate = outcomes[1]
        .as_ref()
        .expect_err("a second create of one name");
    assert!(duplicate.is_already_exists(), "{duplicate}");
    let malformed = outcomes[2].as_ref().expect_err("not JSON");
    assert_eq!(malformed.code(), Some(400), "{malformed}");
    let second = outcomes[3].as_ref().map_err(|e| e.to_string())?;
    assert_ne!(first, second, "each create has its own revision");
    let stored: Value = client.get(events, Some("default"), "second").await?;
    assert_eq!(stored["metadata"]["resourceVersion"], json!(second));

    let too_many = (0..=api::protocol::MAX_CREATE_MANY)
        .map(|i| new_event(&format!("e{i}")))
        .collect();
    let refused = client
        .create_many(events, too_many)
        .await
        .expect_err("beyond the item limit");
    assert_eq!(refused.code(), Some(400), "{refused}");
    assert!(refused.to_string().contains("items"), "{refused}");
    let listed = client
        .list::<Value>(events, Some("default"), &ListParams::default())
        .await?;
    assert_eq!(
        listed.items.len(),
        2,
        "nothing of the refused call was stored"
    );
    Ok(())
}

/// A node host's event sink: hundreds of events reach the API server in a handful of calls,
/// every one stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_event_sink_sends_events_several_per_call() -> TestResult {
    let cluster = Cluster::start().await;
    let stats = std::sync::Arc::new(api::event_sink::EventSinkStats::default());
    let sink = api::event_sink::EventSink::start(
        cluster.client_as(cluster.quic(), NODE_HOST),
        stats.clone(),
    );
    const EVENTS: u64 = 600;
    for i in 0..EVENTS {
        sink.record("default", &event_manifest(&format!("p.{i}")));
    }
    let load = |n: &std::sync::atomic::AtomicU64| n.load(std::sync::atomic::Ordering::Relaxed);
    wait_until("every event is stored", Duration::from_secs(30), || {
        let done = load(&stats.created) + load(&stats.failed);
        async move { done >= EVENTS }
    })
    .await;
    assert_eq!(load(&stats.created), EVENTS);
    assert_eq!(load(&stats.dropped), 0);
    let calls = load(&stats.calls);
    assert!(
        calls <= EVENTS / 10,
        "{EVENTS} events took {calls} calls: not batched"
    );
    let events = api::resources::find("", "v1", "events").expect("events");
    let listed = cluster
        .client()
        .list::<Value>(events, Some("default"), &ListParams::default())
        .await?;
    assert_eq!(listed.items.len() as u64, EVENTS);
    Ok(())
}

/// A request frame over the front's limit is answered 413 without being read, and the front
/// serves on.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_oversized_request_is_answered_unread() -> TestResult {
    let cluster = Cluster::start().await;
    let identity = transport::tls::TlsIdentity::load(&cluster.certs, NODE_HOST)?;
    let connection = transport::rpc::RpcClient::new(&identity)?
        .connect(cluster.quic())
        .await?;
    let (mut send, mut recv) = connection.raw().open_bi().await?;
    let claimed = 48u32 * 1024 * 1024;
    send.write_all(&claimed.to_be_bytes()).await?;
    let answer = tokio::time::timeout(Duration::from_secs(10), recv.read_to_end(1 << 20)).await??;
    let answer: api::protocol::ApiResponse = transport::frame::decode(&answer)?;
    match answer {
        api::protocol::ApiResponse::Error { code, status } => {
            assert_eq!(code, 413);
            let status: Value = serde_json::from_slice(&status)?;
            assert_eq!(status["reason"], "RequestEntityTooLarge", "{status}");
            let limit = apiserver::quic::MAX_REQUEST_FRAME_BYTES;
            assert_eq!(
                status["message"],
                format!("the request of {claimed} bytes is larger than the limit of {limit} bytes")
            );
        }
        other => panic!("expected a 413, got {other:?}"),
    }
    let namespaces = api::resources::find("", "v1", "namespaces").expect("namespaces");
    cluster
        .client()
        .get::<Value>(namespaces, None, "default")
        .await?;
    Ok(())
}
