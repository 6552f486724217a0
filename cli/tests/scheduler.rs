//! End to end: `kemu scheduler` processes against a real store and API server. Nodes are plain
//! Node objects (no kubelets); the tests watch pods get bound, or get Kubernetes' exact message.

use crate::common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::Context;
use common::{kemu_exe, wait_until, Cluster};
use serde_json::{json, Value};
use transport::pki::{self, CertSpec};

/// One `kemu scheduler` process; killed when dropped.
struct SchedulerProc {
    child: Child,
    log: PathBuf,
    metrics: std::net::SocketAddr,
}

impl Drop for SchedulerProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl SchedulerProc {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

fn start_scheduler(c: &Cluster, holder: &str) -> anyhow::Result<SchedulerProc> {
    let certs = c.store.certs_dir();
    if !certs.join("scheduler.crt").exists() {
        pki::issue(
            &certs,
            &CertSpec {
                name: "scheduler".into(),
                organizations: vec!["system:kube-scheduler".into()],
                sans: vec![],
            },
        )?;
    }
    let port = cluster::process::free_ports(1)?[0];
    let metrics: std::net::SocketAddr = format!("127.0.0.1:{port}").parse()?;
    let log = c.dir.path().join(format!("scheduler-{holder}.log"));
    let child = Command::new(kemu_exe())
        .args([
            "scheduler",
            "--apiserver",
            &c.api.quic.to_string(),
            "--certs",
        ])
        .arg(&certs)
        .args(["--holder-identity", holder, "--workers", "2"])
        .args(["--metrics-addr", &metrics.to_string()])
        .env("RUST_LOG", "info,scheduler=debug")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .spawn()
        .context("starting kemu scheduler")?;
    Ok(SchedulerProc {
        child,
        log,
        metrics,
    })
}

fn node(name: &str, cpu: &str, labels: Value, taints: Value) -> Value {
    let allocatable = json!({"cpu": cpu, "memory": "8Gi", "pods": "110"});
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": taints},
        "status": {
            "capacity": allocatable, "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "kubelet is posting ready status"}]
        }
    })
}

fn pod(name: &str, cpu: &str, spec_extra: Value) -> Value {
    let mut spec = json!({
        "containers": [{"name": "c", "image": "pause",
                        "resources": {"requests": {"cpu": cpu}}}]
    });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), spec_extra.as_object()) {
        for (k, v) in extra {
            spec.insert(k.clone(), v.clone());
        }
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
}

async fn create(c: &Cluster, path: &str, object: &Value) -> anyhow::Result<()> {
    let (code, body) = c
        .http(
            "POST",
            path,
            Some("application/json"),
            object.to_string().as_bytes(),
        )
        .await?;
    anyhow::ensure!(code == 201, "POST {path} answered {code}: {body}");
    Ok(())
}

async fn get_pod(c: &Cluster, name: &str) -> Value {
    c.http(
        "GET",
        &format!("/api/v1/namespaces/default/pods/{name}"),
        None,
        b"",
    )
    .await
    .map(|(_, v)| v)
    .unwrap_or(Value::Null)
}

async fn node_of(c: &Cluster, name: &str) -> Option<String> {
    get_pod(c, name).await["spec"]["nodeName"]
        .as_str()
        .map(str::to_string)
}

async fn wait_bound(c: &Cluster, name: &str, timeout: Duration) -> anyhow::Result<String> {
    wait_until(&format!("pod {name} is bound"), timeout, || async {
        node_of(c, name).await.is_some()
    })
    .await?;
    Ok(node_of(c, name).await.unwrap_or_default())
}

async fn unschedulable_message(c: &Cluster, name: &str) -> Option<String> {
    let pod = get_pod(c, name).await;
    pod["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "PodScheduled" && c["status"] == "False")
        .and_then(|c| c["message"].as_str())
        .map(str::to_string)
}

async fn events_of(c: &Cluster, pod: &str) -> Vec<(String, String)> {
    let (_, list) = c
        .http("GET", "/api/v1/namespaces/default/events", None, b"")
        .await
        .unwrap_or((0, Value::Null));
    list["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter(|e| e["involvedObject"]["name"] == pod)
                .map(|e| {
                    (
                        e["reason"].as_str().unwrap_or("").to_string(),
                        e["message"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Waits until `pod` has an event with `reason` and `message`. Events are recorded apart from
/// the writes they describe, as client-go's broadcaster records them, so an event can land after
/// the pod's condition.
async fn event_recorded(c: &Cluster, pod: &str, reason: &str, message: &str) -> anyhow::Result<()> {
    let recorded = wait_until(
        &format!("{pod}'s {reason} event"),
        Duration::from_secs(10),
        || async {
            events_of(c, pod)
                .await
                .iter()
                .any(|(r, m)| r == reason && m == message)
        },
    )
    .await;
    if let Err(e) = recorded {
        anyhow::bail!("{e}; the events: {:?}", events_of(c, pod).await);
    }
    Ok(())
}

const NODES: &str = "/api/v1/nodes";
const PODS: &str = "/api/v1/namespaces/default/pods";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_explains_and_handles_conflicts() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let s = start_scheduler(&c, "s1")?;
    for name in ["ssd-1", "ssd-2"] {
        create(
            &c,
            NODES,
            &node(name, "1", json!({"disk": "ssd"}), json!([])),
        )
        .await?;
    }
    for (name, zone) in [("hdd-1", "a"), ("hdd-2", "b"), ("hdd-3", "c")] {
        create(
            &c,
            NODES,
            &node(name, "4", json!({"disk": "hdd", "zone": zone}), json!([])),
        )
        .await?;
    }

    // Fits nowhere: Kubernetes' exact message, on the condition and in an event.
    create(
        &c,
        PODS,
        &pod("big", "2", json!({"nodeSelector": {"disk": "ssd"}})),
    )
    .await?;
    let want = "0/5 nodes are available: 2 Insufficient cpu, 3 node(s) didn't match Pod's node \
                affinity/selector. preemption: 0/5 nodes are available: 2 No preemption victims \
                found for incoming pod, 3 Preemption is not helpful for scheduling.";
    let reported = wait_until(
        "big is reported unschedulable",
        Duration::from_secs(30),
        || async { unschedulable_message(&c, "big").await.as_deref() == Some(want) },
    )
    .await;
    if let Err(e) = reported {
        let pod = get_pod(&c, "big").await;
        anyhow::bail!("{e}\npod: {pod}\nlog:\n{}", s.log());
    }
    event_recorded(&c, "big", "FailedScheduling", want).await?;

    // A fitting node arrives: the pod is scheduled there.
    create(
        &c,
        NODES,
        &node("ssd-big", "4", json!({"disk": "ssd"}), json!([])),
    )
    .await?;
    assert_eq!(
        wait_bound(&c, "big", Duration::from_secs(30)).await?,
        "ssd-big"
    );
    let scheduled = "Successfully assigned default/big to ssd-big";
    event_recorded(&c, "big", "Scheduled", scheduled).await?;

    // Taints and tolerations.
    create(
        &c,
        NODES,
        &node(
            "gpu-1",
            "4",
            json!({"pool": "gpu"}),
            json!([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
        ),
    )
    .await?;
    create(
        &c,
        PODS,
        &pod(
            "intolerant",
            "100m",
            json!({"nodeSelector": {"pool": "gpu"}}),
        ),
    )
    .await?;
    wait_until(
        "intolerant is unschedulable",
        Duration::from_secs(30),
        || async {
            unschedulable_message(&c, "intolerant")
                .await
                .is_some_and(|m| {
                    m.starts_with(
                "0/7 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, \
                 6 node(s) didn't match Pod's node affinity/selector.",
            )
                })
        },
    )
    .await?;
    let toleration = json!([{"key": "dedicated", "operator": "Equal", "value": "gpu",
                             "effect": "NoSchedule"}]);
    create(
        &c,
        PODS,
        &pod(
            "tolerant",
            "100m",
            json!({"nodeSelector": {"pool": "gpu"}, "tolerations": toleration}),
        ),
    )
    .await?;
    assert_eq!(
        wait_bound(&c, "tolerant", Duration::from_secs(30)).await?,
        "gpu-1"
    );

    // Node affinity (operators), and pod anti-affinity against the pod just placed.
    let affinity = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["b", "c"]},
            {"key": "zone", "operator": "NotIn", "values": ["c"]}]}]}}});
    create(
        &c,
        PODS,
        &pod("zonal", "100m", json!({"affinity": affinity})),
    )
    .await?;
    assert_eq!(
        wait_bound(&c, "zonal", Duration::from_secs(30)).await?,
        "hdd-2"
    );
    let mut labelled = pod("buddy", "100m", json!({}));
    labelled["metadata"]["labels"] = json!({"app": "buddy"});
    let anti = json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "buddy"}},
         "topologyKey": "kubernetes.io/hostname"}]}});
    labelled["spec"]["affinity"] = anti.clone();
    labelled["spec"]["nodeSelector"] = json!({"disk": "hdd"});
    create(&c, PODS, &labelled).await?;
    let first = wait_bound(&c, "buddy", Duration::from_secs(30)).await?;
    labelled["metadata"]["name"] = json!("buddy-2");
    create(&c, PODS, &labelled).await?;
    let second = wait_bound(&c, "buddy-2", Duration::from_secs(30)).await?;
    assert_ne!(first, second, "anti-affinity keeps the buddies apart");

    // Bind conflicts: race the scheduler by binding pods ourselves right after creating them.
    // Whoever loses gets 409; every pod ends bound exactly once and nothing is left pending.
    let mut ours = 0;
    for i in 0..20 {
        let name = format!("race-{i}");
        create(
            &c,
            PODS,
            &pod(&name, "10m", json!({"nodeSelector": {"disk": "hdd"}})),
        )
        .await?;
        let binding = json!({"apiVersion": "v1", "kind": "Binding",
                             "metadata": {"name": name}, "target": {"name": "hdd-1"}});
        let (code, _) = c
            .http(
                "POST",
                &format!("{PODS}/{name}/binding"),
                Some("application/json"),
                binding.to_string().as_bytes(),
            )
            .await?;
        assert!(code == 201 || code == 409, "binding answered {code}");
        if code == 201 {
            ours += 1;
        }
    }
    for i in 0..20 {
        wait_bound(&c, &format!("race-{i}"), Duration::from_secs(30)).await?;
    }
    eprintln!("the test won {ours} of 20 bind races");
    // The scheduler's view stays sound: a new pod still lands.
    create(&c, PODS, &pod("after-race", "100m", json!({}))).await?;
    wait_bound(&c, "after-race", Duration::from_secs(30)).await?;

    let (code, text) = cluster::process::http_get(s.metrics, "/metrics").await?;
    assert_eq!(code, 200);
    assert!(
        text.contains("scheduler_schedule_attempts_total{result=\"scheduled\"}"),
        "{text}"
    );
    // "intolerant" waits somewhere in the queue (unschedulable, or backoff after an event).
    assert!(
        text.contains("scheduler_pending_pods{queue=\"unschedulable\"}"),
        "{text}"
    );
    assert!(text.contains("scheduler_e2e_scheduling_duration_seconds_count"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_failover_resumes_scheduling() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let mut schedulers = vec![start_scheduler(&c, "s1")?, start_scheduler(&c, "s2")?];
    create(&c, NODES, &node("n1", "8", json!({}), json!([]))).await?;
    let holder = || async {
        let (_, lease) = c
            .http(
                "GET",
                "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler",
                None,
                b"",
            )
            .await
            .unwrap_or((0, Value::Null));
        lease["spec"]["holderIdentity"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    wait_until(
        "a scheduler holds the lease",
        Duration::from_secs(20),
        || async { !holder().await.is_empty() },
    )
    .await?;
    create(&c, PODS, &pod("first", "100m", json!({}))).await?;
    wait_bound(&c, "first", Duration::from_secs(30)).await?;

    let leader = holder().await;
    let index = if leader == "s1" { 0 } else { 1 };
    let mut killed = schedulers.remove(index);
    killed.child.kill()?;
    killed.child.wait()?;
    create(&c, PODS, &pod("second", "100m", json!({}))).await?;
    // The lease lasts 15 s; the follower looks every 2 s.
    wait_bound(&c, "second", Duration::from_secs(40))
        .await
        .with_context(|| format!("survivor log:\n{}", schedulers[0].log()))?;
    let new_leader = holder().await;
    assert_ne!(new_leader, leader);
    assert!(!new_leader.is_empty());
    Ok(())
}

/// A leader whose lease another candidate takes over exits, as kube-scheduler does ("leader
/// election lost"), rather than stay up as a standby; its supervisor starts it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_loses_its_lease_exits() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let mut s = start_scheduler(&c, "s1")?;
    const LEASE: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler";
    wait_until("s1 holds the lease", Duration::from_secs(20), || async {
        let (_, lease) = c
            .http("GET", LEASE, None, b"")
            .await
            .unwrap_or((0, Value::Null));
        lease["spec"]["holderIdentity"] == "s1"
    })
    .await?;
    assert!(s.child.try_wait()?.is_none(), "s1 exited while leading");

    let now = chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string();
    let takeover = json!({"spec": {"holderIdentity": "intruder", "renewTime": now,
                                   "leaseDurationSeconds": 60}});
    let (code, body) = c
        .http(
            "PATCH",
            LEASE,
            Some("application/merge-patch+json"),
            takeover.to_string().as_bytes(),
        )
        .await?;
    anyhow::ensure!(code == 200, "PATCH lease answered {code}: {body}");

    let mut status = None;
    for _ in 0..150 {
        status = s.child.try_wait()?;
        if status.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let Some(status) = status else {
        anyhow::bail!(
            "s1 still runs 15 s after losing its lease\nlog:\n{}",
            s.log()
        );
    };
    assert!(!status.success(), "{status}\n{}", s.log());
    let log = s.log();
    assert!(log.contains("leader election lost"), "{log}");
    Ok(())
}

async fn delete(c: &Cluster, path: &str, body: &Value) -> anyhow::Result<u16> {
    let (code, _) = c
        .http(
            "DELETE",
            path,
            Some("application/json"),
            body.to_string().as_bytes(),
        )
        .await?;
    Ok(code)
}

/// A high-priority pod that fits nowhere preempts a low-priority one through the API server:
/// the victim is marked and deleted gracefully, the preemptor is nominated and, once the
/// victim is gone (the test finishes its termination as a kubelet would), binds there; the
/// room stays reserved for it against a lower-priority pod waiting for the same node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preemption_evicts_nominates_and_binds() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let s = start_scheduler(&c, "s1")?;
    const CLASSES: &str = "/apis/scheduling.k8s.io/v1/priorityclasses";
    for (name, value) in [("low", 100), ("high", 1000)] {
        let class = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                           "metadata": {"name": name}, "value": value,
                           "description": format!("{name} priority")});
        create(&c, CLASSES, &class).await?;
    }
    // n2 holds a high-priority pod, n1 a low-priority one: both full.
    create(&c, NODES, &node("n2", "1", json!({}), json!([]))).await?;
    create(
        &c,
        PODS,
        &pod("keeper", "1", json!({"priorityClassName": "high"})),
    )
    .await?;
    assert_eq!(
        wait_bound(&c, "keeper", Duration::from_secs(30)).await?,
        "n2"
    );
    create(&c, NODES, &node("n1", "2", json!({}), json!([]))).await?;
    create(
        &c,
        PODS,
        &pod("victim", "2", json!({"priorityClassName": "low"})),
    )
    .await?;
    assert_eq!(
        wait_bound(&c, "victim", Duration::from_secs(30)).await?,
        "n1"
    );

    // A pod of the victim's priority cannot preempt it: the message says so.
    create(
        &c,
        PODS,
        &pod("peer", "2", json!({"priorityClassName": "low"})),
    )
    .await?;
    let want = "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are \
                available: 2 No preemption victims found for incoming pod.";
    let reported = wait_until("peer is unschedulable", Duration::from_secs(30), || async {
        unschedulable_message(&c, "peer").await.as_deref() == Some(want)
    })
    .await;
    if let Err(e) = reported {
        let peer = get_pod(&c, "peer").await;
        anyhow::bail!("{e}\npeer: {peer}\nlog:\n{}", s.log());
    }
    event_recorded(&c, "peer", "FailedScheduling", want).await?;

    // The high-priority pod fits nowhere, and preempts the victim on n1.
    create(
        &c,
        PODS,
        &pod("vip", "2", json!({"priorityClassName": "high"})),
    )
    .await?;
    let vip_uid = get_pod(&c, "vip").await["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let nominated = wait_until(
        "vip is nominated to n1",
        Duration::from_secs(30),
        || async { get_pod(&c, "vip").await["status"]["nominatedNodeName"] == "n1" },
    )
    .await;
    if let Err(e) = nominated {
        let vip = get_pod(&c, "vip").await;
        anyhow::bail!("{e}\nvip: {vip}\nlog:\n{}", s.log());
    }
    // Graceful: the victim terminates (a kubelet would stop it), marked as preempted.
    wait_until(
        "the victim is terminating",
        Duration::from_secs(10),
        || async { get_pod(&c, "victim").await["metadata"]["deletionTimestamp"].is_string() },
    )
    .await?;
    let victim = get_pod(&c, "victim").await;
    assert_eq!(victim["metadata"]["deletionGracePeriodSeconds"], 30);
    let disruption = victim["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "DisruptionTarget"))
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(disruption["reason"], "PreemptionByScheduler", "{victim}");
    assert_eq!(
        disruption["message"],
        "default-scheduler: preempting to accommodate a higher priority pod"
    );
    let preempted = format!("Preempted by pod {vip_uid} on node n1");
    event_recorded(&c, "victim", "Preempted", &preempted).await?;
    // Preemption found a node, so vip's message has no preemption part.
    wait_until(
        "vip is reported unschedulable",
        Duration::from_secs(10),
        || async {
            unschedulable_message(&c, "vip").await.as_deref()
                == Some("0/2 nodes are available: 2 Insufficient cpu.")
        },
    )
    .await?;
    // The victim still holds n1 while it terminates: vip waits.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(node_of(&c, "vip").await, None);

    // A lower-priority pod arrives for the same room before the victim goes.
    create(
        &c,
        PODS,
        &pod("sneaky", "2", json!({"priorityClassName": "low"})),
    )
    .await?;
    // The kubelet's part: the victim has stopped, remove it for good.
    let code = delete(
        &c,
        &format!("{PODS}/victim"),
        &json!({"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}),
    )
    .await?;
    assert!(
        code == 200 || code == 202,
        "deleting the victim answered {code}"
    );
    assert_eq!(
        wait_bound(&c, "vip", Duration::from_secs(30))
            .await
            .with_context(|| format!("log:\n{}", s.log()))?,
        "n1"
    );
    event_recorded(
        &c,
        "vip",
        "Scheduled",
        "Successfully assigned default/vip to n1",
    )
    .await?;
    // The lower-priority pods stay pending: the room was vip's.
    assert_eq!(node_of(&c, "sneaky").await, None);
    assert_eq!(node_of(&c, "peer").await, None);

    let (code, text) = cluster::process::http_get(s.metrics, "/metrics").await?;
    assert_eq!(code, 200);
    assert!(
        text.lines()
            .any(|l| l.starts_with("scheduler_preemption_victims_total") && l.ends_with(" 1")),
        "{text}"
    );
    Ok(())
}

/// `kemu bench scheduler --through-apiserver` at a small size: its own store, API server and
/// scheduler process; every pod must be scheduled and the figures must be coherent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_through_the_apiserver_schedules_every_pod() -> anyhow::Result<()> {
    let work = tempfile::tempdir()?;
    let output = tokio::process::Command::new(kemu_exe())
        .args([
            "bench",
            "scheduler",
            "--through-apiserver",
            "--nodes",
            "200",
            "--pods",
            "500",
            "--rate",
            "500",
            "--store-members",
            "1",
            "--workers",
            "2",
            "--settle-secs",
            "60",
            "--work-dir",
        ])
        .arg(work.path())
        .stdin(Stdio::null())
        .output()
        .await?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let log = std::fs::read_to_string(work.path().join("scheduler.log")).unwrap_or_default();
    anyhow::ensure!(
        output.status.success(),
        "bench failed: {}\n{stdout}\nscheduler log:\n{log}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_str(&stdout).context("the bench prints JSON")?;
    let num = |path: &str| report.pointer(path).and_then(Value::as_f64).unwrap_or(-1.0);
    assert_eq!(report["mode"], "through-apiserver");
    assert_eq!(num("/nodes"), 200.0);
    assert_eq!(num("/created"), 500.0, "{report}");
    assert_eq!(num("/create_errors"), 0.0, "{report}");
    assert_eq!(
        num("/scheduled"),
        500.0,
        "every pod is scheduled: {report}\n{log}"
    );
    // The warm-up pod and the 500: each bound once, nothing failed.
    assert_eq!(num("/scheduler_attempts/scheduled"), 501.0, "{report}");
    assert_eq!(num("/scheduler_attempts/error"), 0.0, "{report}");
    assert!(num("/binds_per_sec") > 0.0, "{report}");
    let (p50, p99, max) = (
        num("/create_to_scheduled_ms/p50"),
        num("/create_to_scheduled_ms/p99"),
        num("/create_to_scheduled_ms/max"),
    );
    assert!(0.0 < p50 && p50 <= p99 && p99 <= max, "{report}");
    // Scheduling cannot finish before the creates were sent: 500 pods at 500/s.
    assert!(num("/seconds") >= 0.9, "{report}");
    let processes: Vec<&str> = report["cpu"]
        .as_array()
        .map(|a| a.iter().filter_map(|p| p["process"].as_str()).collect())
        .unwrap_or_default();
    for wanted in ["apiserver", "scheduler", "store"] {
        assert!(processes.contains(&wanted), "{processes:?}");
    }
    Ok(())
}
