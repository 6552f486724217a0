//! End to end: `kemu controllers` with a real store, API server, scheduler and node hosts,
//! driven with the real kubectl — Deployments (create, scale, set image within the surge and
//! unavailability bounds, rollout undo, cascading delete) and their events, a Job and its
//! events, Service endpoints following pods, namespace deletion, node failure (NotReady, eviction, replacement elsewhere), and a
//! ResourceQuota whose charge a finished pod releases.

use crate::common;

use std::time::Duration;

use anyhow::Context;
use common::control_plane::{
    common_args, exactly_running, is_ready, issue, pods_json, spawn, start_controllers,
    start_node_host, start_scheduler, terminating, wait_for_events,
};
use common::{wait_until, Cluster};
use serde_json::Value;

fn images(c: &Cluster, selector: &str) -> Vec<String> {
    pods_json(c, &["-l", selector])
        .iter()
        .filter(|p| !terminating(p))
        .map(|p| {
            p["spec"]["containers"][0]["image"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployments_scale_roll_out_and_roll_back() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let _hosts = start_node_host(&c, 1, 3, "node-")?;
    let _scheduler = start_scheduler(&c)?;
    let controllers = start_controllers(&c, 40)?;

    c.ok(&[
        "create",
        "deployment",
        "web",
        "--image=nginx:1.27",
        "--replicas=3",
    ]);
    let three = wait_until(
        "3 web pods are Running",
        Duration::from_secs(60),
        || async { exactly_running(&c, "app=web", 3, &[]) },
    )
    .await;
    if three.is_err() {
        eprintln!("{}", controllers.log());
    }
    three?;
    let status = c.ok(&["rollout", "status", "deployment/web", "--timeout=60s"]);
    assert!(status.contains("successfully rolled out"), "{status}");
    let rs = c.ok(&["get", "rs", "-l", "app=web", "-o", "json"]);
    let rs: Value = serde_json::from_str(&rs)?;
    let first = &rs["items"][0];
    assert_eq!(
        first["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "1"
    );
    assert_eq!(
        first["metadata"]["ownerReferences"][0]["kind"],
        "Deployment"
    );
    assert!(first["metadata"]["labels"]["pod-template-hash"].is_string());
    let pod = &pods_json(&c, &["-l", "app=web"])[0];
    assert_eq!(pod["metadata"]["ownerReferences"][0]["kind"], "ReplicaSet");
    assert_eq!(pod["metadata"]["ownerReferences"][0]["controller"], true);

    // Scale up and back down.
    c.ok(&["scale", "deployment", "web", "--replicas=10"]);
    wait_until(
        "10 web pods are Running",
        Duration::from_secs(60),
        || async { exactly_running(&c, "app=web", 10, &[]) },
    )
    .await?;
    c.ok(&["rollout", "status", "deployment/web", "--timeout=60s"]);
    let ready = c.ok(&["get", "deployment", "web", "--no-headers"]);
    assert!(ready.contains("10/10"), "{ready}");
    c.ok(&["scale", "deployment", "web", "--replicas=3"]);
    wait_until("web is back to 3 pods", Duration::from_secs(60), || async {
        let pods = pods_json(&c, &["-l", "app=web"]);
        pods.iter().filter(|p| !terminating(p)).count() == 3
    })
    .await?;
    c.ok(&["rollout", "status", "deployment/web", "--timeout=60s"]);
    // Each scaling of the ReplicaSet is an event on the Deployment, as kubectl describe shows.
    let rs_name = first["metadata"]["name"].as_str().unwrap_or_default();
    let scaled = [
        format!("Scaled up replica set {rs_name} from 0 to 3"),
        format!("Scaled up replica set {rs_name} from 3 to 10"),
        format!("Scaled down replica set {rs_name} from 10 to 3"),
    ];
    let wanted: Vec<(&str, &str, &str)> = scaled
        .iter()
        .map(|m| ("ScalingReplicaSet", "deployment-controller", m.as_str()))
        .collect();
    wait_for_events(&c, "deployment/web", &wanted).await?;

    // A new image rolls out within maxSurge 1 (25% of 3, up) and maxUnavailable 0 (down).
    c.ok(&["set", "image", "deployment/web", "nginx=nginx:1.28"]);
    let max_total = std::cell::Cell::new(0);
    let min_ready = std::cell::Cell::new(usize::MAX);
    wait_until(
        "the new image is rolled out",
        Duration::from_secs(90),
        || async {
            let pods = pods_json(&c, &["-l", "app=web"]);
            let live: Vec<&Value> = pods.iter().filter(|p| !terminating(p)).collect();
            max_total.set(max_total.get().max(live.len()));
            min_ready.set(
                min_ready
                    .get()
                    .min(live.iter().filter(|p| is_ready(p)).count()),
            );
            images(&c, "app=web") == vec!["nginx:1.28".to_string(); 3]
                && exactly_running(&c, "app=web", 3, &[])
        },
    )
    .await?;
    let (max_total, min_ready) = (max_total.get(), min_ready.get());
    assert!(
        max_total <= 4,
        "maxSurge exceeded: {max_total} pods at once"
    );
    assert!(
        min_ready >= 3,
        "maxUnavailable exceeded: only {min_ready} ready"
    );
    let status = c.ok(&["rollout", "status", "deployment/web", "--timeout=60s"]);
    assert!(status.contains("successfully rolled out"), "{status}");
    let history = c.ok(&["rollout", "history", "deployment/web"]);
    assert!(history.contains('1') && history.contains('2'), "{history}");

    // Undo brings the first template back as revision 3.
    c.ok(&["rollout", "undo", "deployment/web"]);
    wait_until(
        "the undo is rolled out",
        Duration::from_secs(90),
        || async {
            images(&c, "app=web") == vec!["nginx:1.27".to_string(); 3]
                && exactly_running(&c, "app=web", 3, &[])
        },
    )
    .await?;
    c.ok(&["rollout", "status", "deployment/web", "--timeout=60s"]);
    let revision = c.ok(&[
        "get",
        "deployment",
        "web",
        "-o",
        "jsonpath={.metadata.annotations.deployment\\.kubernetes\\.io/revision}",
    ]);
    assert_eq!(revision.trim(), "3");
    let conditions = c.ok(&[
        "get",
        "deployment",
        "web",
        "-o",
        "jsonpath={.status.conditions[*].reason}",
    ]);
    assert!(
        conditions.contains("NewReplicaSetAvailable")
            && conditions.contains("MinimumReplicasAvailable"),
        "{conditions}"
    );

    // Deleting the Deployment cascades to its ReplicaSets and pods.
    c.ok(&["delete", "deployment", "web"]);
    wait_until(
        "web's replica sets and pods are gone",
        Duration::from_secs(60),
        || async {
            let rs = c.ok(&["get", "rs", "-l", "app=web", "-o", "name"]);
            rs.trim().is_empty() && pods_json(&c, &["-l", "app=web"]).is_empty()
        },
    )
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_endpoints_namespaces_and_cascades() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let _hosts = start_node_host(&c, 1, 2, "node-")?;
    let _scheduler = start_scheduler(&c)?;
    let _controllers = start_controllers(&c, 40)?;

    // A Job of 5 completions, 2 at a time.
    c.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: count\nspec:\n  completions: 5\n  parallelism: 2\n  backoffLimit: 2\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: c\n        image: busybox\n        command: [\"sleep\", \"1\"]\n",
    );
    c.ok(&[
        "wait",
        "--for=condition=complete",
        "job/count",
        "--timeout=90s",
    ]);
    let succeeded = c.ok(&["get", "job", "count", "-o", "jsonpath={.status.succeeded}"]);
    assert_eq!(succeeded.trim(), "5");
    let done = pods_json(&c, &["-l", "job-name=count"]);
    assert_eq!(done.len(), 5);
    assert!(done.iter().all(|p| p["status"]["phase"] == "Succeeded"));
    let times = c.ok(&[
        "get",
        "job",
        "count",
        "-o",
        "jsonpath={.status.startTime} {.status.completionTime}",
    ]);
    assert_eq!(times.split_whitespace().count(), 2, "{times}");
    let first_pod = format!(
        "Created pod: {}",
        done[0]["metadata"]["name"].as_str().unwrap_or_default()
    );
    wait_for_events(
        &c,
        "job/count",
        &[
            ("SuccessfulCreate", "job-controller", first_pod.as_str()),
            ("Completed", "job-controller", "Job completed"),
        ],
    )
    .await?;

    // A Service's endpoints follow its pods.
    c.ok(&["create", "namespace", "team"]);
    c.ok(&[
        "create",
        "deployment",
        "api",
        "--image=nginx",
        "--replicas=2",
        "-n",
        "team",
    ]);
    c.ok(&["expose", "deployment", "api", "--port=80", "-n", "team"]);
    let endpoint_ips = || -> Vec<String> {
        let out = c.ok(&[
            "get",
            "endpoints",
            "api",
            "-n",
            "team",
            "-o",
            "jsonpath={.subsets[*].addresses[*].ip}",
        ]);
        let mut ips: Vec<String> = out.split_whitespace().map(String::from).collect();
        ips.sort();
        ips
    };
    let pod_ips = || -> Vec<String> {
        let mut ips: Vec<String> = pods_json(&c, &["-l", "app=api", "-n", "team"])
            .iter()
            .filter(|p| is_ready(p) && !terminating(p))
            .filter_map(|p| p["status"]["podIP"].as_str().map(String::from))
            .collect();
        ips.sort();
        ips
    };
    wait_until(
        "the endpoints list the 2 pods",
        Duration::from_secs(60),
        || async {
            let ips = pod_ips();
            ips.len() == 2 && endpoint_ips() == ips
        },
    )
    .await?;
    c.ok(&["scale", "deployment", "api", "--replicas=3", "-n", "team"]);
    wait_until(
        "the endpoints list the 3 pods",
        Duration::from_secs(60),
        || async {
            let ips = pod_ips();
            ips.len() == 3 && endpoint_ips() == ips
        },
    )
    .await?;
    let slice = c.ok(&[
        "get",
        "endpointslices",
        "-n",
        "team",
        "-l",
        "kubernetes.io/service-name=api",
        "-o",
        "jsonpath={.items[*].endpoints[*].addresses[*]}",
    ]);
    assert_eq!(slice.split_whitespace().count(), 3, "{slice}");
    // A deleted pod leaves the endpoints as soon as its deletion starts.
    let victim = pods_json(&c, &["-l", "app=api", "-n", "team"])[0].clone();
    let victim_name = victim["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let victim_ip = victim["status"]["podIP"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    c.ok(&["delete", "pod", &victim_name, "-n", "team", "--wait=false"]);
    wait_until(
        "the deleted pod left the endpoints",
        Duration::from_secs(30),
        || async { !endpoint_ips().contains(&victim_ip) },
    )
    .await?;
    wait_until(
        "the replacement joined the endpoints",
        Duration::from_secs(60),
        || async {
            let ips = pod_ips();
            ips.len() == 3 && endpoint_ips() == ips
        },
    )
    .await?;

    // Orphan and foreground cascades.
    c.ok(&[
        "create",
        "deployment",
        "keep",
        "--image=nginx",
        "--replicas=1",
        "-n",
        "team",
    ]);
    wait_until("keep runs", Duration::from_secs(60), || async {
        exactly_running(&c, "app=keep", 1, &["-n", "team"])
    })
    .await?;
    c.ok(&[
        "delete",
        "deployment",
        "keep",
        "-n",
        "team",
        "--cascade=orphan",
    ]);
    wait_until(
        "keep's replica set is orphaned",
        Duration::from_secs(30),
        || async {
            let out = c.ok(&["get", "rs", "-l", "app=keep", "-n", "team", "-o", "json"]);
            let v: Value = serde_json::from_str(&out).unwrap_or_default();
            v["items"].as_array().is_some_and(|items| {
                items.len() == 1
                    && items[0]["metadata"]["ownerReferences"]
                        .as_array()
                        .is_none_or(|r| r.is_empty())
            }) && c
                .kubectl(&["get", "deployment", "keep", "-n", "team"])
                .status
                .code()
                != Some(0)
        },
    )
    .await?;
    assert!(exactly_running(&c, "app=keep", 1, &["-n", "team"]));
    c.ok(&[
        "create",
        "deployment",
        "fg",
        "--image=nginx",
        "--replicas=2",
        "-n",
        "team",
    ]);
    wait_until("fg runs", Duration::from_secs(60), || async {
        exactly_running(&c, "app=fg", 2, &["-n", "team"])
    })
    .await?;
    c.ok(&[
        "delete",
        "deployment",
        "fg",
        "-n",
        "team",
        "--cascade=foreground",
        "--timeout=90s",
    ]);
    assert!(pods_json(&c, &["-l", "app=fg", "-n", "team"]).is_empty());

    // Deleting the namespace empties it, then removes it.
    c.ok(&["delete", "namespace", "team", "--wait=false"]);
    wait_until(
        "namespace team is gone",
        Duration::from_secs(90),
        || async { !c.kubectl(&["get", "namespace", "team"]).status.success() },
    )
    .await?;
    assert!(pods_json(&c, &["-n", "team"]).is_empty());
    let left = c.ok(&[
        "get",
        "deployments,replicasets,services,endpoints",
        "-n",
        "team",
        "-o",
        "name",
    ]);
    assert!(left.trim().is_empty(), "{left}");
    Ok(())
}

/// The API server charges a quota when a pod is created; the quota controller gives the charge
/// back when the pod finishes (Kubernetes does not count Succeeded or Failed pods), so the
/// next pod fits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_pod_releases_its_quota_charge() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let _host = start_node_host(&c, 1, 1, "node-")?;
    let _scheduler = start_scheduler(&c)?;
    let controllers = start_controllers(&c, 40)?;
    c.ok(&["create", "namespace", "q"]);
    c.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: compute, namespace: q}\nspec:\n  hard: {pods: \"1\", requests.cpu: \"1\", count/pods: \"10\"}\n",
    );
    let pod = |name: &str, seconds: u32| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: q}}\nspec:\n  restartPolicy: Never\n  containers:\n  - name: c\n    image: busybox\n    command: [\"sleep\", \"{seconds}\"]\n    resources: {{requests: {{cpu: 500m}}}}\n"
        )
    };
    // "pods requests.cpu count/pods" as status.used has them.
    let used = || -> String {
        let out = c.ok(&["get", "resourcequota", "compute", "-n", "q", "-o", "json"]);
        let quota: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
        ["pods", "requests.cpu", "count/pods"]
            .map(|k| {
                quota["status"]["used"][k]
                    .as_str()
                    .unwrap_or("-")
                    .to_string()
            })
            .join(" ")
    };
    c.ok_stdin(&["apply", "-f", "-"], &pod("once", 3));
    assert_eq!(used(), "1 500m 1");
    // While it runs, it holds the only pod slot.
    let second = c.file("second.yaml", &pod("second", 30));
    let refused = c.fails(&["create", "-f", &second]);
    assert!(
        refused
            .contains("exceeded quota: compute, requested: pods=1, used: pods=1, limited: pods=1"),
        "{refused}"
    );
    wait_until("the pod finishes", Duration::from_secs(90), || async {
        c.ok(&[
            "get",
            "pod",
            "once",
            "-n",
            "q",
            "-o",
            "jsonpath={.status.phase}",
        ])
        .trim()
            == "Succeeded"
    })
    .await?;
    // The controller recomputes the usage: the finished pod still exists (count/pods) but
    // no longer counts for pods or requests.cpu.
    wait_until(
        "the finished pod's charge is released",
        Duration::from_secs(60),
        || async { used() == "0 0 1" },
    )
    .await
    .with_context(|| format!("used: {}; controllers log:\n{}", used(), controllers.log()))?;
    c.ok(&["create", "-f", &second]);
    assert_eq!(used(), "1 500m 2");
    // Deleting the finished pod refunds only what it still counted for.
    c.ok(&["delete", "pod", "once", "-n", "q", "--wait=false"]);
    wait_until(
        "the finished pod is gone",
        Duration::from_secs(60),
        || async { used() == "1 500m 1" },
    )
    .await
    .with_context(|| format!("used: {}", used()))?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_node_host_is_tainted_and_its_pods_are_replaced() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let mut doomed = start_node_host(&c, 2, 2, "b-")?;
    let _scheduler = start_scheduler(&c)?;
    let controllers = start_controllers(&c, 6)?;
    // Admission gives every pod 300 s of tolerance for an unreachable node; this deployment
    // asks for 2 s, as one would on a real cluster to fail over quickly.
    let manifest = c.file(
        "web.yaml",
        r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 4
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: nginx, image: nginx}]
      tolerations:
      - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 2}
      - {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 2}
"#,
    );
    c.ok(&["apply", "-f", &manifest]);
    wait_until(
        "4 pods run on the first host",
        Duration::from_secs(60),
        || async { exactly_running(&c, "app=web", 4, &[]) },
    )
    .await?;
    let _survivor = start_node_host(&c, 1, 2, "a-")?;
    wait_until(
        "the second host's nodes are Ready",
        Duration::from_secs(30),
        || async {
            let out = c.ok(&["get", "nodes", "--no-headers"]);
            out.lines()
                .filter(|l| l.starts_with("a-") && l.contains(" Ready "))
                .count()
                == 2
        },
    )
    .await?;

    doomed.kill();
    let not_ready = wait_until("b- nodes go NotReady", Duration::from_secs(60), || async {
        let out = c.ok(&["get", "nodes", "--no-headers"]);
        out.lines()
            .filter(|l| l.starts_with("b-") && l.contains("NotReady"))
            .count()
            == 2
    })
    .await;
    if not_ready.is_err() {
        eprintln!("{}", controllers.log());
    }
    not_ready?;
    let b_node = c
        .ok(&["get", "nodes", "-o", "name"])
        .lines()
        .find(|l| l.starts_with("node/b-"))
        .unwrap_or_default()
        .to_string();
    let taints = c.ok(&["get", &b_node, "-o", "jsonpath={.spec.taints[*].key}"]);
    assert!(
        taints.contains("node.kubernetes.io/unreachable"),
        "{taints}"
    );
    wait_until(
        "4 replacement pods run on a- nodes",
        Duration::from_secs(90),
        || async {
            let pods = pods_json(&c, &["-l", "app=web"]);
            let live: Vec<&Value> = pods.iter().filter(|p| !terminating(p)).collect();
            live.len() == 4
                && live.iter().all(|p| {
                    p["spec"]["nodeName"]
                        .as_str()
                        .is_some_and(|n| n.starts_with("a-"))
                        && p["status"]["phase"] == "Running"
                })
        },
    )
    .await?;
    // The old pods were evicted (Terminating: their kubelet is gone).
    let pods = pods_json(&c, &["-l", "app=web"]);
    let evicted: Vec<&Value> = pods
        .iter()
        .filter(|p| {
            terminating(p)
                && p["spec"]["nodeName"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("b-"))
        })
        .collect();
    assert_eq!(evicted.len(), 4);
    // They were marked not ready, and only their Ready condition changed: the kubelet's other
    // conditions are still there (the controller caches just the Ready one).
    for pod in evicted {
        let conditions = pod["status"]["conditions"].as_array().cloned();
        let conditions = conditions.unwrap_or_default();
        let of = |kind: &str| conditions.iter().find(|c| c["type"] == kind).cloned();
        let ready = of("Ready").unwrap_or_default();
        assert_eq!(ready["status"], "False", "{pod}");
        assert_eq!(ready["reason"], "NodeNotReady", "{pod}");
        let scheduled = of("PodScheduled").unwrap_or_default();
        assert_eq!(scheduled["status"], "True", "{pod}");
    }
    Ok(())
}

/// A Deployment reaches all Ready at scale. CI runs it small (100 replicas on 20 nodes); the
/// figure of docs/controllers.md sets `KEMU_FIG_REPLICAS`, `KEMU_FIG_NODES` and `KEMU_FIG_HOSTS`
/// and prints the time from `kubectl create` to all pods Ready:
/// `KEMU_FIG_REPLICAS=1000 KEMU_FIG_NODES=200 cargo test --release -p kemu --test e2e -- --nocapture controllers::figure`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn figure_deployment_reaches_all_ready() -> anyhow::Result<()> {
    let env = |k: &str, d: usize| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let (replicas, nodes, hosts) = (
        env("KEMU_FIG_REPLICAS", 100),
        env("KEMU_FIG_NODES", 20),
        env("KEMU_FIG_HOSTS", 2).max(1),
    );
    let c = Cluster::start(1).await?;
    let mut procs = Vec::new();
    for h in 0..hosts {
        let identity = format!("nodehost-{}", h + 1);
        issue(&c, &identity, "system:nodes")?;
        let mut args = common_args(&c, "node-host", &identity);
        let prefix = format!("h{h}-");
        args.extend(
            [
                "--nodes",
                &(nodes / hosts).to_string(),
                "--name-prefix",
                &prefix,
                "--runtime",
                "instant",
            ]
            .map(String::from),
        );
        procs.push(spawn(&c, &identity, &args)?);
    }
    procs.push(start_scheduler(&c)?);
    procs.push(start_controllers(&c, 40)?);
    let want_nodes = (nodes / hosts) * hosts;
    wait_until("every node is Ready", Duration::from_secs(300), || async {
        let out = c.ok(&["get", "nodes", "--no-headers"]);
        out.lines().filter(|l| l.contains(" Ready ")).count() == want_nodes
    })
    .await?;
    let started = std::time::Instant::now();
    c.ok(&[
        "create",
        "deployment",
        "big",
        "--image=nginx",
        &format!("--replicas={replicas}"),
    ]);
    wait_until(
        "the deployment is all ready",
        Duration::from_secs(1800),
        || async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let ready = c.ok(&[
                "get",
                "deployment",
                "big",
                "-o",
                "jsonpath={.status.readyReplicas}",
            ]);
            ready.trim().parse::<usize>().ok() == Some(replicas)
        },
    )
    .await?;
    let elapsed = started.elapsed();
    println!(
        "FIGURE: {replicas} replicas on {want_nodes} nodes ({hosts} node hosts): all Ready in {:.1} s = {:.0} pods/s",
        elapsed.as_secs_f64(),
        replicas as f64 / elapsed.as_secs_f64()
    );
    Ok(())
}
