//! The kube-rs client (kube 5, k8s-openapi 0.29 / v1_37) against a real kemu API server over a
//! three-member store: discovery (aggregated, and group-version by group-version), typed
//! `Api<K>` calls and kube-runtime's watcher and event recorder, the way a Rust controller talks
//! to Kubernetes. Every answer is decoded into k8s-openapi's types
//! by kube itself, so a shape the server gets wrong fails the call.

use crate::common;

use std::time::Duration;

use common::Cluster;
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Binding, Event as CoreEvent, Node, Pod};
use k8s_openapi::api::events::v1::Event as EventsV1Event;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::Status;
use kube::runtime::events::{Event as RecordedEvent, EventType, Recorder, Reporter};
use kube::runtime::watcher::{self, watcher};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

const NS: &str = "default";
const WAIT: Duration = Duration::from_secs(15);

/// A k8s-openapi object from JSON (which must fit the type).
fn typed<K: DeserializeOwned>(value: Value) -> K {
    serde_json::from_value(value).expect("the manifest fits the type")
}

/// The HTTP code of a failed call.
fn api_code(result: Result<impl std::fmt::Debug, kube::Error>) -> u16 {
    match result {
        Err(kube::Error::Api(status)) => status.code,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Pulls items from `stream` until `done` holds for one of them (returned), failing after
/// [`WAIT`].
async fn next_matching<T, E: std::fmt::Debug>(
    stream: &mut (impl Stream<Item = Result<T, E>> + Unpin),
    what: &str,
    mut done: impl FnMut(&T) -> bool,
) -> T {
    let found = tokio::time::timeout(WAIT, async {
        while let Some(item) = stream.next().await {
            let item =
                item.unwrap_or_else(|e| panic!("stream failed while waiting for {what}: {e:?}"));
            if done(&item) {
                return Some(item);
            }
        }
        None
    })
    .await;
    match found {
        Ok(Some(item)) => item,
        Ok(None) => panic!("the stream ended before {what}"),
        Err(_) => panic!("timed out waiting for {what}"),
    }
}

fn is_applied<K: ResourceExt>(
    event: &watcher::Event<K>,
    name: &str,
    pred: impl Fn(&K) -> bool,
) -> bool {
    match event {
        watcher::Event::Apply(k) | watcher::Event::InitApply(k) => k.name_any() == name && pred(k),
        _ => false,
    }
}

fn pod_manifest(name: &str) -> Pod {
    typed(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "kube-rs"}},
        "spec": {"containers": [
            {"name": "main", "image": "registry.k8s.io/pause:3.10",
             "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}},
            {"name": "sidecar", "image": "busybox:1.36", "command": ["sleep", "3600"]},
        ]},
    }))
}

/// A kubelet's status report; as a strategic merge patch its conditions merge with the
/// scheduler's PodScheduled by type.
fn running_status(pod: &Pod) -> Value {
    let now = "2026-01-01T00:00:00Z";
    let statuses: Vec<Value> = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|c| {
            json!({
                "name": c.name,
                "image": c.image,
                "imageID": format!("docker-pullable://{}@sha256:{}", c.image.as_deref().unwrap_or(""), "0".repeat(64)),
                "containerID": format!("containerd://{}", c.name),
                "ready": true,
                "started": true,
                "restartCount": 0,
                "state": {"running": {"startedAt": now}},
            })
        })
        .collect();
    json!({"status": {
        "phase": "Running",
        "podIP": "10.244.0.7",
        "podIPs": [{"ip": "10.244.0.7"}],
        "startTime": now,
        "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": now},
            {"type": "ContainersReady", "status": "True", "lastTransitionTime": now},
        ],
        "containerStatuses": statuses,
    }})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_round_trips_pods_nodes_and_events() -> anyhow::Result<()> {
    let cluster = Cluster::start(3).await?;
    let client = cluster.kube_client().await?;
    discovery(&client).await?;
    nodes(&client).await?;
    pods(&client).await?;
    events(&client).await?;
    cluster.api.stop().await;
    cluster.store.stop().await;
    Ok(())
}

/// Aggregated discovery (`/api` and `/apis` as `apidiscovery.k8s.io/v2` lists) finds what
/// discovery group-version by group-version finds.
async fn discovery(client: &Client) -> anyhow::Result<()> {
    use kube::discovery::{verbs, Discovery};
    let resources = |d: &Discovery| {
        let mut all: Vec<String> = d
            .groups()
            .flat_map(|g| g.recommended_resources())
            .map(|(ar, caps)| {
                let mut subresources: Vec<String> = caps
                    .subresources
                    .iter()
                    .map(|(s, _)| s.plural.clone())
                    .collect();
                subresources.sort();
                format!(
                    "{} {} {} {:?} {:?} {subresources:?}",
                    ar.api_version, ar.kind, ar.plural, caps.scope, caps.operations
                )
            })
            .collect();
        all.sort();
        all
    };
    let aggregated = Discovery::new(client.clone()).run_aggregated().await?;
    let classic = Discovery::new(client.clone()).run().await?;
    assert_eq!(resources(&aggregated), resources(&classic));
    let (deployments, caps) = aggregated
        .get("apps")
        .and_then(|apps| apps.recommended_kind("Deployment"))
        .expect("apps/v1 Deployment discovered");
    assert_eq!(deployments.plural, "deployments");
    assert!(caps.supports_operation(verbs::WATCH));
    assert!(caps.subresources.iter().any(|(s, _)| s.plural == "scale"));
    let (pods, _) = aggregated
        .get("")
        .and_then(|core| core.recommended_kind("Pod"))
        .expect("v1 Pod discovered");
    assert_eq!(pods.plural, "pods");
    Ok(())
}

async fn pods(client: &Client) -> anyhow::Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let pp = PostParams::default();
    let name = "kube-rs-pod";

    // A watcher started before anything exists: its initial list is empty, then it follows.
    let mut watched = watcher(
        pods.clone(),
        watcher::Config::default().fields(&format!("metadata.name={name}")),
    )
    .boxed();
    next_matching(&mut watched, "the initial list to end", |e| {
        matches!(e, watcher::Event::InitDone)
    })
    .await;

    // create
    let created = pods.create(&pp, &pod_manifest(name)).await?;
    assert!(created.uid().is_some() && created.resource_version().is_some());
    assert!(created.creation_timestamp().is_some());
    assert_eq!(
        created.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Pending")
    );
    assert_eq!(api_code(pods.create(&pp, &pod_manifest(name)).await), 409);
    let mut generated = pod_manifest("");
    generated.metadata.name = None;
    generated.metadata.generate_name = Some("kube-rs-gen-".into());
    let generated = pods.create(&pp, &generated).await?;
    assert!(generated.name_any().starts_with("kube-rs-gen-"));
    next_matching(&mut watched, "the watcher sees the new pod", |e| {
        is_applied(e, name, |_| true)
    })
    .await;

    // list: selectors and pages
    let all = pods
        .list(&ListParams::default().labels("app=kube-rs"))
        .await?;
    let mut names: Vec<String> = all.items.iter().map(ResourceExt::name_any).collect();
    names.sort();
    assert_eq!(names, vec![generated.name_any(), name.to_string()]);
    assert!(all.metadata.resource_version.is_some());
    let by_field = pods
        .list(&ListParams::default().fields(&format!("metadata.name={name},status.phase=Pending")))
        .await?;
    assert_eq!(by_field.items.len(), 1);
    let page = pods.list(&ListParams::default().limit(1)).await?;
    assert_eq!(page.items.len(), 1);
    let token = page.metadata.continue_.clone().expect("a continue token");
    let rest = pods
        .list(&ListParams::default().limit(10).continue_token(&token))
        .await?;
    assert_eq!(rest.items.len(), 1, "two pods in two pages");
    assert_ne!(rest.items[0].name_any(), page.items[0].name_any());
    let everywhere: Api<Pod> = Api::all(client.clone());
    assert_eq!(
        everywhere
            .list(&ListParams::default().labels("app=kube-rs"))
            .await?
            .items
            .len(),
        2
    );

    // get
    let got = pods.get(name).await?;
    assert_eq!(got.uid(), created.uid());
    assert!(pods.get_opt("kube-rs-missing").await?.is_none());
    assert_eq!(api_code(pods.get("kube-rs-missing").await), 404);

    // A raw watch from the current version sees the binding and the kubelet's status.
    let from = pods
        .list(&ListParams::default())
        .await?
        .metadata
        .resource_version
        .expect("list resourceVersion");
    let mut raw_watch = pods
        .watch(
            &WatchParams::default()
                .fields(&format!("metadata.name={name}"))
                .timeout(20),
            &from,
        )
        .await?
        .boxed();

    // bind (as the scheduler does) and report status (as the kubelet does)
    let binding: Binding = typed(json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": name},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "kube-rs-node"},
    }));
    let bound: Status = pods
        .create_subresource("binding", name, &pp, &binding)
        .await?;
    assert!(
        bound.is_success(),
        "binding answers a Success status: {bound:?}"
    );
    assert_eq!(
        api_code(
            pods.create_subresource::<_, Status>("binding", name, &pp, &binding)
                .await
        ),
        409,
        "a bound pod cannot be bound again"
    );
    let running = pods
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Strategic(running_status(&got)),
        )
        .await?;
    assert_eq!(
        running.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Running")
    );
    // A status write is decoded like any other: a wrong type in the status is refused and
    // changes nothing.
    let refused = pods
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": 5}})),
        )
        .await;
    match &refused {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 400, "{status:?}");
            assert!(
                status.message.contains("cannot be handled as a Pod"),
                "{status:?}"
            );
        }
        other => panic!("expected a 400, got {other:?}"),
    }
    let again = pods.get(name).await?;
    assert_eq!(
        again.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Running")
    );
    assert_eq!(
        again.metadata.resource_version,
        running.metadata.resource_version
    );
    let seen = next_matching(&mut raw_watch, "the raw watch sees Running", |e| {
        matches!(e, WatchEvent::Modified(p)
            if p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
    })
    .await;
    let WatchEvent::Modified(seen) = seen else {
        unreachable!()
    };
    let spec = seen.spec.as_ref().expect("spec");
    assert_eq!(spec.node_name.as_deref(), Some("kube-rs-node"));
    let status = seen.status.as_ref().expect("status");
    assert_eq!(status.container_statuses.as_ref().map(Vec::len), Some(2));
    assert!(status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "PodScheduled" && c.status == "True"));
    next_matching(&mut watched, "the watcher sees the pod Running", |e| {
        is_applied(e, name, |p| {
            p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        })
    })
    .await;
    let on_node = everywhere
        .list(&ListParams::default().fields("spec.nodeName=kube-rs-node"))
        .await?;
    assert_eq!(on_node.items.len(), 1);

    // patch: merge, strategic (containers merge by name), server-side apply
    let merged = pods
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"tier": "backend"}}})),
        )
        .await?;
    assert_eq!(
        merged.labels().get("tier").map(String::as_str),
        Some("backend")
    );
    assert_eq!(
        merged.labels().get("app").map(String::as_str),
        Some("kube-rs")
    );
    let strategic = pods
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Strategic(json!({
                "metadata": {"annotations": {"kemu.dev/by": "kube-rs"}},
                "spec": {"containers": [{"name": "sidecar", "image": "busybox:1.37"}]},
            })),
        )
        .await?;
    let containers = &strategic.spec.as_ref().expect("spec").containers;
    assert_eq!(
        containers.len(),
        2,
        "strategic merge keeps the other container"
    );
    assert_eq!(containers[0].name, "main");
    assert_eq!(containers[1].image.as_deref(), Some("busybox:1.37"));
    assert_eq!(
        strategic
            .annotations()
            .get("kemu.dev/by")
            .map(String::as_str),
        Some("kube-rs")
    );
    let applied = pods
        .patch(
            name,
            &PatchParams::apply("kube-rs-test").force(),
            &Patch::Apply(json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "labels": {"owner": "kube-rs"}},
            })),
        )
        .await?;
    assert_eq!(
        applied.labels().get("owner").map(String::as_str),
        Some("kube-rs")
    );
    assert!(applied
        .managed_fields()
        .iter()
        .any(|m| m.manager.as_deref() == Some("kube-rs-test")));

    // replace with a stale resourceVersion: 409
    let mut stale = pods.get(name).await?;
    stale.metadata.resource_version = created.resource_version();
    assert_eq!(api_code(pods.replace(name, &pp, &stale).await), 409);

    // delete: a bound pod is deleted gracefully and stays until the "kubelet" confirms
    let marked = pods
        .delete(name, &DeleteParams::background())
        .await?
        .left()
        .expect("a graceful delete answers the pod");
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert_eq!(marked.metadata.deletion_grace_period_seconds, Some(30));
    assert!(pods.get(name).await?.metadata.deletion_timestamp.is_some());
    pods.delete(name, &DeleteParams::default().grace_period(0))
        .await?;
    next_matching(
        &mut watched,
        "the watcher sees the pod deleted",
        |e| matches!(e, watcher::Event::Delete(p) if p.name_any() == name),
    )
    .await;
    assert!(pods.get_opt(name).await?.is_none());

    // an unbound pod goes at once
    let gone = pods
        .delete(&generated.name_any(), &DeleteParams::default())
        .await?;
    assert!(gone.is_left(), "deleting answers the pod");
    assert!(pods.get_opt(&generated.name_any()).await?.is_none());

    // deletecollection
    for i in 0..3 {
        let mut pod = pod_manifest(&format!("kube-rs-batch-{i}"));
        pod.metadata.labels = Some([("batch".to_string(), "yes".to_string())].into());
        pods.create(&pp, &pod).await?;
    }
    let removed = pods
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels("batch=yes"),
        )
        .await?
        .left()
        .expect("deletecollection answers the list");
    assert_eq!(removed.items.len(), 3);
    assert!(pods
        .list(&ListParams::default().labels("batch=yes"))
        .await?
        .items
        .is_empty());
    Ok(())
}

fn node_manifest(name: &str) -> Node {
    let now = "2026-01-01T00:00:00Z";
    let conditions: Vec<Value> = [
        ("MemoryPressure", "False", "KubeletHasSufficientMemory"),
        ("DiskPressure", "False", "KubeletHasNoDiskPressure"),
        ("PIDPressure", "False", "KubeletHasSufficientPID"),
        ("Ready", "True", "KubeletReady"),
    ]
    .iter()
    .map(|(t, s, r)| {
        json!({"type": t, "status": s, "reason": r, "message": format!("kemu {t}"),
               "lastHeartbeatTime": now, "lastTransitionTime": now})
    })
    .collect();
    typed(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kemu.dev/kube-rs": "true"}},
        "spec": {"podCIDR": "10.244.2.0/24", "podCIDRs": ["10.244.2.0/24"]},
        "status": {
            "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
            "allocatable": {"cpu": "7800m", "memory": "31Gi", "pods": "110"},
            "addresses": [{"type": "InternalIP", "address": "10.0.0.2"}, {"type": "Hostname", "address": name}],
            "conditions": conditions,
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": "amd64", "bootID": "b-1", "containerRuntimeVersion": "containerd://2.1.0",
                "kernelVersion": "6.1.0", "kubeProxyVersion": "v1.37.1", "kubeletVersion": "v1.37.1",
                "machineID": "m-1", "operatingSystem": "linux", "osImage": "kemu", "systemUUID": "s-1",
            },
        },
    }))
}

async fn nodes(client: &Client) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let pp = PostParams::default();
    let name = "kube-rs-node";

    let mut watched = watcher(
        nodes.clone(),
        watcher::Config::default().labels("kemu.dev/kube-rs=true"),
    )
    .boxed();
    next_matching(&mut watched, "the initial node list", |e| {
        matches!(e, watcher::Event::InitDone)
    })
    .await;

    let created = nodes.create(&pp, &node_manifest(name)).await?;
    let info = created
        .status
        .as_ref()
        .and_then(|s| s.node_info.as_ref())
        .expect("nodeInfo kept on create");
    assert_eq!(info.kubelet_version, "v1.37.1");
    assert!(created.namespace().is_none(), "nodes are cluster-scoped");
    assert_eq!(api_code(nodes.create(&pp, &node_manifest(name)).await), 409);

    let listed = nodes
        .list(&ListParams::default().labels("kemu.dev/kube-rs=true"))
        .await?;
    assert_eq!(listed.items.len(), 1);
    let got = nodes.get(name).await?;
    assert_eq!(
        got.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .map(Vec::len),
        Some(4)
    );
    assert_eq!(nodes.get_status(name).await?.name_any(), name);
    next_matching(&mut watched, "the watcher sees the node", |e| {
        is_applied(e, name, |_| true)
    })
    .await;

    // status: a strategic heartbeat merges conditions by type
    let beat = nodes
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Strategic(json!({"status": {"conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "heartbeat",
                 "lastHeartbeatTime": "2026-01-01T00:00:10Z"},
            ]}})),
        )
        .await?;
    let conditions = beat
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    assert_eq!(conditions.len(), 4);
    assert!(conditions
        .iter()
        .any(|c| c.type_ == "Ready" && c.message.as_deref() == Some("heartbeat")));
    // cordon (merge), label (apply), replace the status (PUT)
    let cordoned = nodes
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"unschedulable": true}})),
        )
        .await?;
    assert_eq!(
        cordoned.spec.as_ref().and_then(|s| s.unschedulable),
        Some(true)
    );
    next_matching(&mut watched, "the watcher sees the cordon", |e| {
        is_applied(e, name, |n| {
            n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true)
        })
    })
    .await;
    let applied = nodes
        .patch(
            name,
            &PatchParams::apply("kube-rs-test").force(),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "Node",
                                 "metadata": {"name": name, "labels": {"zone": "b"}}})),
        )
        .await?;
    assert_eq!(applied.labels().get("zone").map(String::as_str), Some("b"));
    let mut with_status = nodes.get(name).await?;
    if let Some(status) = with_status.status.as_mut() {
        status.capacity.get_or_insert_default().insert(
            "pods".into(),
            k8s_openapi::apimachinery::pkg::api::resource::Quantity("200".into()),
        );
    }
    with_status
        .metadata
        .labels
        .get_or_insert_default()
        .insert("ignored".into(), "yes".into());
    let replaced = nodes.replace_status(name, &pp, &with_status).await?;
    assert_eq!(
        replaced
            .status
            .as_ref()
            .and_then(|s| s.capacity.as_ref())
            .and_then(|c| c.get("pods"))
            .map(|q| q.0.as_str()),
        Some("200")
    );
    assert!(
        !replaced.labels().contains_key("ignored"),
        "the status subresource ignores labels"
    );

    let deleted = nodes.delete(name, &DeleteParams::default()).await?;
    assert!(deleted.is_left(), "deleting a node answers the node");
    next_matching(
        &mut watched,
        "the watcher sees the node deleted",
        |e| matches!(e, watcher::Event::Delete(n) if n.name_any() == name),
    )
    .await;
    assert!(nodes.get_opt(name).await?.is_none());
    Ok(())
}

async fn events(client: &Client) -> anyhow::Result<()> {
    let events: Api<CoreEvent> = Api::namespaced(client.clone(), NS);
    let pp = PostParams::default();
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let pod = pods.create(&pp, &pod_manifest("kube-rs-evpod")).await?;
    let uid = pod.uid().expect("uid");

    let core_event = |name: &str, reason: &str, type_: &str| -> CoreEvent {
        typed(json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": "kube-rs-evpod",
                               "namespace": NS, "uid": uid},
            "reason": reason, "message": format!("{reason} happened"), "type": type_, "count": 1,
            "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z",
            "source": {"component": "kube-rs-test"},
        }))
    };

    // watch the pod's events with streaming lists (sendInitialEvents) from the start
    let mut watched = watcher(
        events.clone(),
        watcher::Config::default()
            .fields(&format!("involvedObject.uid={uid}"))
            .streaming_lists(),
    )
    .boxed();
    next_matching(&mut watched, "the initial events to end", |e| {
        matches!(e, watcher::Event::InitDone)
    })
    .await;

    let scheduled = events
        .create(&pp, &core_event("kube-rs-evpod.1", "Scheduled", "Normal"))
        .await?;
    assert_eq!(scheduled.involved_object.uid.as_deref(), Some(uid.as_str()));
    events
        .create(&pp, &core_event("kube-rs-evpod.2", "Failed", "Warning"))
        .await?;
    let mut other = core_event("kube-rs-other.1", "Pulled", "Normal");
    other.involved_object.name = Some("someone-else".into());
    other.involved_object.uid = Some("another-uid".into());
    events.create(&pp, &other).await?;
    next_matching(&mut watched, "the watcher sees the events", |e| {
        is_applied(e, "kube-rs-evpod.2", |_| true)
    })
    .await;

    // list with the field selectors kubectl describe uses
    let selector = format!(
        "involvedObject.name=kube-rs-evpod,involvedObject.namespace={NS},involvedObject.uid={uid}"
    );
    let described = events
        .list(&ListParams::default().fields(&selector))
        .await?;
    let mut reasons: Vec<String> = described
        .items
        .iter()
        .filter_map(|e| e.reason.clone())
        .collect();
    reasons.sort();
    assert_eq!(reasons, vec!["Failed", "Scheduled"]);
    let warnings = events
        .list(&ListParams::default().fields(&format!("type=Warning,involvedObject.uid={uid}")))
        .await?;
    assert_eq!(warnings.items.len(), 1);
    let everywhere: Api<CoreEvent> = Api::all(client.clone());
    let by_kind = everywhere
        .list(
            &ListParams::default()
                .fields("involvedObject.kind=Pod,involvedObject.name=someone-else"),
        )
        .await?;
    assert_eq!(by_kind.items.len(), 1);

    // get, patch (the recorder's count bump), watch sees it
    assert_eq!(
        events.get("kube-rs-evpod.1").await?.reason.as_deref(),
        Some("Scheduled")
    );
    let bumped = events
        .patch(
            "kube-rs-evpod.1",
            &PatchParams::default(),
            &Patch::Merge(json!({"count": 2, "lastTimestamp": "2026-01-01T00:01:00Z"})),
        )
        .await?;
    assert_eq!(bumped.count, Some(2));
    next_matching(&mut watched, "the watcher sees the count bump", |e| {
        is_applied(e, "kube-rs-evpod.1", |ev| ev.count == Some(2))
    })
    .await;

    // kube-runtime's recorder writes events.k8s.io/v1 events (create, then a series patch);
    // they show as core/v1 events of the pod too
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "kube-rs-test".into(),
            instance: Some("test-1".into()),
        },
    );
    let reference = pod.object_ref(&());
    let recorded = RecordedEvent {
        type_: EventType::Normal,
        reason: "Reconciled".into(),
        note: Some("reconciled by kube-rs".into()),
        action: "Reconcile".into(),
        secondary: None,
    };
    recorder.publish(&recorded, &reference).await?;
    recorder.publish(&recorded, &reference).await?;
    let new_api: Api<EventsV1Event> = Api::namespaced(client.clone(), NS);
    let series = new_api
        .list(&ListParams::default().fields(&format!("regarding.uid={uid},reason=Reconciled")))
        .await?;
    assert_eq!(
        series.items.len(),
        1,
        "the second publish patched the first"
    );
    let series_event = &series.items[0];
    assert_eq!(series_event.series.as_ref().map(|s| s.count), Some(2));
    assert_eq!(series_event.note.as_deref(), Some("reconciled by kube-rs"));
    next_matching(&mut watched, "the watcher sees the recorded event", |e| {
        is_applied(e, &series_event.name_any(), |ev| {
            ev.reason.as_deref() == Some("Reconciled")
        })
    })
    .await;

    // events are read from the store, not the watch cache: pages of one, continued at the
    // first page's revision, add up to the whole list
    let whole = events.list(&ListParams::default()).await?;
    let mut paged = Vec::new();
    let mut params = ListParams::default().limit(1);
    loop {
        let page = events.list(&params).await?;
        assert!(
            page.items.len() <= 1,
            "a page of one has {}",
            page.items.len()
        );
        paged.extend(page.items.iter().map(|e| e.name_any()));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = ListParams::default().limit(1).continue_token(&token),
            None => break,
        }
    }
    let names: Vec<String> = whole.items.iter().map(|e| e.name_any()).collect();
    assert!(names.len() >= 4, "{names:?}");
    assert_eq!(paged, names);
    // a watch from that list's resourceVersion sees only what follows
    let listed_at = whole
        .metadata
        .resource_version
        .clone()
        .expect("a list revision");
    let mut after = events
        .watch(&WatchParams::default(), &listed_at)
        .await?
        .boxed();

    // delete one, then the rest of the pod's events
    let deleted = events
        .delete("kube-rs-evpod.2", &DeleteParams::default())
        .await?;
    assert!(deleted.is_left());
    let first = tokio::time::timeout(WAIT, async {
        loop {
            match after.next().await {
                Some(Ok(WatchEvent::Bookmark(_))) => continue,
                other => return other,
            }
        }
    })
    .await
    .expect("the watch from the list's revision sees the deletion")
    .expect("the watch is open")?;
    match first {
        WatchEvent::Deleted(ev) => assert_eq!(ev.name_any(), "kube-rs-evpod.2"),
        other => panic!("expected the deletion first, got {other:?}"),
    }
    assert!(events.get_opt("kube-rs-evpod.2").await?.is_none());
    events
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().fields(&format!("involvedObject.uid={uid}")),
        )
        .await?;
    next_matching(
        &mut watched,
        "the watcher sees the collection deleted",
        |e| matches!(e, watcher::Event::Delete(ev) if ev.name_any() == "kube-rs-evpod.1"),
    )
    .await;
    assert!(events
        .list(&ListParams::default().fields(&format!("involvedObject.uid={uid}")))
        .await?
        .items
        .is_empty());
    events
        .delete("kube-rs-other.1", &DeleteParams::default())
        .await?;
    pods.delete("kube-rs-evpod", &DeleteParams::default())
        .await?;
    Ok(())
}
