//! End to end with the real kubectl: the scheduler's VolumeBinding. Pods whose claims are
//! missing or wait for the PV controller fit nowhere with kube-scheduler's messages; a bound
//! volume's node affinity keeps its pods on its node; a claim waiting for its first consumer
//! gets the `volume.kubernetes.io/selected-node` annotation, and its pod binds once the claim
//! is bound; published storage capacity leaves a pod Pending until a segment can hold its claim.
//!
//! Nodes are plain Node objects and the test itself plays the external provisioner (its classes
//! name `example.com/external`, which nothing in kemu serves), so each step is the scheduler's.

use crate::common;

use std::time::Duration;

use common::control_plane::start_scheduler;
use common::{wait_until, Cluster};
use serde_json::{json, Value};

const SETUP: &str = "apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: immediate
provisioner: example.com/external
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: wait
provisioner: example.com/external
volumeBindingMode: WaitForFirstConsumer
allowedTopologies:
- matchLabelExpressions:
  - key: kubernetes.io/hostname
    values: [node-b]
---
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata:
  name: metered.example.com
spec:
  storageCapacity: true
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: metered
provisioner: metered.example.com
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: storage.k8s.io/v1
kind: CSIStorageCapacity
metadata:
  name: metered-node-a
storageClassName: metered
capacity: 1Gi
nodeTopology:
  matchLabels:
    kubernetes.io/hostname: node-a
";

const NOT_HELPFUL: &str =
    "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.";

fn node(name: &str) -> String {
    let allocatable = json!({"cpu": "4", "memory": "8Gi", "pods": "110"});
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "capacity": allocatable, "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "kubelet is posting ready status"}]
        }
    })
    .to_string()
}

fn claim(name: &str, class: &str, size: &str) -> String {
    format!(
        "apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: {name}
spec:
  storageClassName: {class}
  accessModes: [ReadWriteOnce]
  resources:
    requests:
      storage: {size}
"
    )
}

fn pod(name: &str, claim: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  containers:
  - name: c
    image: pause
  volumes:
  - name: data
    persistentVolumeClaim:
      claimName: {claim}
"
    )
}

/// A volume for `claim` that only `host` reaches, as a provisioner would create it.
fn volume(name: &str, class: &str, claim: &str, host: &str) -> String {
    format!(
        "apiVersion: v1
kind: PersistentVolume
metadata:
  name: {name}
spec:
  storageClassName: {class}
  capacity:
    storage: 1Gi
  accessModes: [ReadWriteOnce]
  csi:
    driver: external.example.com
    volumeHandle: {name}
  claimRef:
    namespace: default
    name: {claim}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - key: kubernetes.io/hostname
          operator: In
          values: [{host}]
"
    )
}

fn json(c: &Cluster, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&c.ok(&all)).unwrap_or(Value::Null)
}

/// Binds the claim to the volume as the PV controller does once a volume exists.
fn bind(c: &Cluster, claim: &str, volume: &str) {
    c.ok(&[
        "patch",
        "pvc",
        claim,
        "--type=merge",
        "-p",
        &json!({"spec": {"volumeName": volume},
                "metadata": {"annotations": {"pv.kubernetes.io/bind-completed": "yes"}}})
        .to_string(),
    ]);
    c.ok(&[
        "patch",
        "pvc",
        claim,
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Bound","accessModes":["ReadWriteOnce"],"capacity":{"storage":"1Gi"}}}"#,
    ]);
}

fn node_of(c: &Cluster, pod: &str) -> String {
    json(c, &["get", "pod", pod])["spec"]["nodeName"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn unschedulable(c: &Cluster, pod: &str) -> String {
    json(c, &["get", "pod", pod])["status"]["conditions"]
        .as_array()
        .and_then(|cs| {
            cs.iter()
                .find(|c| c["type"] == "PodScheduled" && c["status"] == "False")
        })
        .and_then(|c| c["message"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// Waits until the pod's PodScheduled=False message starts with `want` (the filters' part; the
/// whole message when `want` has the preemption part too).
async fn wait_message(c: &Cluster, pod: &str, want: &str) -> anyhow::Result<()> {
    let why = format!("pod {pod} is unschedulable with {want:?}");
    let result = wait_until(&why, Duration::from_secs(20), || async {
        unschedulable(c, pod).starts_with(want)
    })
    .await;
    if result.is_err() {
        eprintln!("last message: {:?}", unschedulable(c, pod));
    }
    result
}

async fn wait_node(c: &Cluster, pod: &str, want: &str) -> anyhow::Result<()> {
    let why = format!("pod {pod} is bound to {want}");
    wait_until(&why, Duration::from_secs(20), || async {
        node_of(c, pod) == want
    })
    .await
}

fn selected_node(c: &Cluster, claim: &str) -> String {
    json(c, &["get", "pvc", claim])["metadata"]["annotations"]["volume.kubernetes.io/selected-node"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scheduler_binds_volumes_as_kube_scheduler_does() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    for name in ["node-a", "node-b"] {
        c.ok_stdin(&["create", "-f", "-"], &node(name));
    }
    c.ok_stdin(&["apply", "-f", "-"], SETUP);
    let scheduler = start_scheduler(&c)?;

    // A missing claim, then one the PV controller has yet to bind.
    c.ok_stdin(&["apply", "-f", "-"], &pod("ghost", "nowhere"));
    let missing = format!(
        "0/2 nodes are available: persistentvolumeclaim \"nowhere\" not found. {NOT_HELPFUL}"
    );
    wait_message(&c, "ghost", &missing).await?;
    c.ok_stdin(&["apply", "-f", "-"], &claim("now", "immediate", "1Gi"));
    c.ok_stdin(&["apply", "-f", "-"], &pod("eager", "now"));
    let unbound = format!(
        "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims. {NOT_HELPFUL}"
    );
    wait_message(&c, "eager", &unbound).await?;

    // Bound to a volume only node-b reaches: the pod goes there.
    c.ok_stdin(
        &["apply", "-f", "-"],
        &volume("pv-now", "immediate", "now", "node-b"),
    );
    bind(&c, "now", "pv-now");
    wait_node(&c, "eager", "node-b").await?;

    // A bound volume on a node that is not there: every node conflicts.
    c.ok_stdin(&["apply", "-f", "-"], &claim("far", "immediate", "1Gi"));
    c.ok_stdin(
        &["apply", "-f", "-"],
        &volume("pv-far", "immediate", "far", "node-z"),
    );
    bind(&c, "far", "pv-far");
    c.ok_stdin(&["apply", "-f", "-"], &pod("stranded", "far"));
    let conflict = "0/2 nodes are available: 2 node(s) had volume node affinity conflict.";
    wait_message(&c, "stranded", conflict).await?;

    // Waiting for the first consumer: the scheduler picks node-b (the class' only topology),
    // tells the provisioner, and binds the pod only once the claim is bound.
    c.ok_stdin(&["apply", "-f", "-"], &claim("late", "wait", "1Gi"));
    assert_eq!(
        json(&c, &["get", "pvc", "late"])["status"]["phase"],
        "Pending"
    );
    c.ok_stdin(&["apply", "-f", "-"], &pod("consumer", "late"));
    wait_until(
        "the claim is annotated with the selected node",
        Duration::from_secs(20),
        || async { selected_node(&c, "late") == "node-b" },
    )
    .await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(node_of(&c, "consumer"), "", "bound before its claim");
    c.ok_stdin(
        &["apply", "-f", "-"],
        &volume("pv-late", "wait", "late", "node-b"),
    );
    bind(&c, "late", "pv-late");
    wait_node(&c, "consumer", "node-b").await?;
    let events = c.ok(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=consumer",
    ]);
    assert!(
        events.contains("Successfully assigned default/consumer to node-b"),
        "{events}"
    );

    // Published capacity: 1Gi on node-a, nothing on node-b; a 5Gi claim fits nowhere until
    // node-a's segment grows.
    c.ok_stdin(&["apply", "-f", "-"], &claim("big", "metered", "5Gi"));
    c.ok_stdin(&["apply", "-f", "-"], &pod("hungry", "big"));
    let full = "0/2 nodes are available: 2 node(s) did not have enough free storage.";
    wait_message(&c, "hungry", full).await?;
    assert_eq!(node_of(&c, "hungry"), "");
    c.ok(&[
        "patch",
        "csistoragecapacity",
        "metered-node-a",
        "--type=merge",
        "-p",
        r#"{"capacity":"10Gi"}"#,
    ]);
    wait_until(
        "the claim is sent to node-a",
        Duration::from_secs(20),
        || async { selected_node(&c, "big") == "node-a" },
    )
    .await?;
    drop(scheduler);
    Ok(())
}
