//! Two API server replicas over one three-member store: each keeps its own watch cache, and a
//! client cannot tell them apart. Writes through one are seen through the other by get, list
//! and watch, with the same resourceVersions (the store's revisions), and optimistic
//! concurrency holds across replicas.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use cluster::process::{LocalApiServer, LocalStore};
use common::{kemu_exe, wait_until};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::{Client, Config, ResourceExt};
use serde_json::{json, Value};

const NS: &str = "default";
const PODS: usize = 20;

async fn pods_of(api: &LocalApiServer) -> anyhow::Result<Api<Pod>> {
    // A kubeconfig beside the server's log: its URL, the cluster CA, the admin certificate.
    let path = api.log_path().with_extension("kubeconfig");
    api.write_kubeconfig(&path)?;
    let kubeconfig = kube::config::Kubeconfig::read_from(&path)?;
    let config =
        Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
            .await?;
    Ok(Api::namespaced(Client::try_from(config)?, NS))
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "replicas"}},
        "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]},
    }))
    .expect("a pod")
}

fn rv(pod: &Pod) -> i64 {
    pod.resource_version()
        .and_then(|v| v.parse().ok())
        .expect("a numeric resourceVersion")
}

/// name → resourceVersion of every pod the list selects.
async fn listed(pods: &Api<Pod>) -> anyhow::Result<(i64, BTreeMap<String, i64>)> {
    let list = pods
        .list(&ListParams::default().labels("app=replicas"))
        .await?;
    let at = list
        .metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .expect("list resourceVersion");
    Ok((
        at,
        list.items.iter().map(|p| (p.name_any(), rv(p))).collect(),
    ))
}

/// The next `n` events of `stream` other than bookmarks, as (type, name, resourceVersion).
async fn next_events(
    stream: &mut (impl Stream<Item = kube::Result<WatchEvent<Pod>>> + Unpin),
    n: usize,
) -> Vec<(&'static str, String, i64)> {
    let mut out = Vec::new();
    while out.len() < n {
        let event = tokio::time::timeout(Duration::from_secs(15), stream.next())
            .await
            .unwrap_or_else(|_| {
                panic!("timed out after {} of {n} watch events: {out:?}", out.len())
            })
            .expect("the watch stays open")
            .expect("a watch event");
        match event {
            WatchEvent::Added(p) => out.push(("ADDED", p.name_any(), rv(&p))),
            WatchEvent::Modified(p) => out.push(("MODIFIED", p.name_any(), rv(&p))),
            WatchEvent::Deleted(p) => out.push(("DELETED", p.name_any(), rv(&p))),
            WatchEvent::Bookmark(_) => {}
            WatchEvent::Error(e) => panic!("watch error: {e:?}"),
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_api_servers_over_one_store_agree() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let store = LocalStore::start_with(kemu_exe(), &dir.path().join("store"), 3, &[]).await?;
    let a = LocalApiServer::start(kemu_exe(), &store, "apiserver-a").await?;
    let b = LocalApiServer::start(kemu_exe(), &store, "apiserver-b").await?;
    let (pods_a, pods_b) = (pods_of(&a).await?, pods_of(&b).await?);

    // Both replicas watch from the same starting point, each from its own cache.
    let (start_a, _) = listed(&pods_a).await?;
    let (start_b, _) = listed(&pods_b).await?;
    let from = start_a.max(start_b).to_string();
    let selector = WatchParams::default().labels("app=replicas").timeout(60);
    let mut watch_a = pods_a.watch(&selector, &from).await?.boxed();
    let mut watch_b = pods_b.watch(&selector, &from).await?.boxed();

    // Writes alternate between the replicas; each answer's resourceVersion is the store's.
    let mut created = BTreeMap::new();
    for i in 0..PODS {
        let (via, other) = if i % 2 == 0 {
            (&pods_a, &pods_b)
        } else {
            (&pods_b, &pods_a)
        };
        let name = format!("replica-pod-{i:02}");
        let made = via.create(&PostParams::default(), &pod(&name)).await?;
        // A read through the other replica right after the write sees it, at the same version.
        let seen = other.get(&name).await?;
        assert_eq!(rv(&seen), rv(&made), "{name}: the other replica's get");
        assert_eq!(seen.uid(), made.uid());
        created.insert(name, rv(&made));
    }
    let versions: Vec<i64> = created.values().copied().collect();
    assert!(
        versions.windows(2).all(|w| w[0] < w[1]),
        "creates in order get increasing revisions: {versions:?}"
    );

    // Lists agree item by item, and each list is at least as new as every write.
    let (at_a, items_a) = listed(&pods_a).await?;
    let (at_b, items_b) = listed(&pods_b).await?;
    assert_eq!(items_a, created);
    assert_eq!(items_b, created);
    let newest = *versions.last().expect("pods");
    assert!(
        at_a >= newest && at_b >= newest,
        "list RVs {at_a}/{at_b} < {newest}"
    );

    // Both watches deliver the same events, in the same order, at the same versions.
    let events_a = next_events(&mut watch_a, PODS).await;
    let events_b = next_events(&mut watch_b, PODS).await;
    assert_eq!(events_a, events_b);
    let expected: Vec<_> = created
        .iter()
        .map(|(name, rv)| ("ADDED", name.clone(), *rv))
        .collect();
    assert_eq!(events_a, expected);

    // An update through B is visible through A; a write through A with the version B replaced
    // is a conflict, whichever replica it goes to.
    let name = "replica-pod-00";
    let before = pods_a.get(name).await?;
    let patched = pods_b
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"patched": "by-b"}}})),
        )
        .await?;
    assert!(rv(&patched) > rv(&before));
    let through_a = pods_a.get(name).await?;
    assert_eq!(rv(&through_a), rv(&patched));
    assert_eq!(
        through_a.labels().get("patched").map(String::as_str),
        Some("by-b")
    );
    for (replica, api) in [("A", &pods_a), ("B", &pods_b)] {
        match api.replace(name, &PostParams::default(), &before).await {
            Err(kube::Error::Api(status)) => assert_eq!(status.code, 409, "replica {replica}"),
            other => panic!("a stale replace through {replica} answered {other:?}"),
        }
    }
    let modified = ("MODIFIED", name.to_string(), rv(&patched));
    assert_eq!(next_events(&mut watch_a, 1).await, vec![modified.clone()]);
    assert_eq!(next_events(&mut watch_b, 1).await, vec![modified]);

    // A delete through A is seen by B's get and watch.
    let gone = pods_a.delete(name, &DeleteParams::default()).await?;
    assert!(gone.is_left());
    assert!(pods_b.get_opt(name).await?.is_none());
    let deleted_a = next_events(&mut watch_a, 1).await;
    let deleted_b = next_events(&mut watch_b, 1).await;
    assert_eq!(deleted_a, deleted_b);
    assert_eq!(deleted_a[0].0, "DELETED");
    assert!(deleted_a[0].2 > rv(&patched));

    // The QUIC fronts answer the same list at the same versions.
    let certs = store.certs_dir();
    let mut quic_lists = Vec::new();
    for replica in [&a, &b] {
        let client = api::client::Client::new(api::client::ClientConfig::new(
            vec![replica.quic],
            &certs,
            "admin",
        ))?;
        let list = client
            .list::<Value>(
                api::resources::pods(),
                Some(NS),
                &api::client::ListParams::default().labels("app=replicas"),
            )
            .await?;
        let items: BTreeMap<String, String> = list
            .items
            .iter()
            .map(|p| {
                (
                    p["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    p["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                )
            })
            .collect();
        quic_lists.push(items);
    }
    assert_eq!(quic_lists[0], quic_lists[1]);
    assert_eq!(quic_lists[0].len(), PODS - 1);

    // Writes keep flowing through B while A is stopped, and A's successor catches up.
    a.stop().await;
    for i in 0..5 {
        pods_b
            .create(&PostParams::default(), &pod(&format!("replica-late-{i}")))
            .await?;
    }
    let a2 = LocalApiServer::start(kemu_exe(), &store, "apiserver-a2").await?;
    let pods_a2 = pods_of(&a2).await?;
    let (_, now_b) = listed(&pods_b).await?;
    wait_until(
        "the restarted replica lists what B lists",
        Duration::from_secs(10),
        || {
            let pods_a2 = pods_a2.clone();
            let now_b = now_b.clone();
            async move { matches!(listed(&pods_a2).await, Ok((_, items)) if items == now_b) }
        },
    )
    .await?;

    a2.stop().await;
    b.stop().await;
    store.stop().await;
    Ok(())
}
