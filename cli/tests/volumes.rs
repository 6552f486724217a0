//! End to end with the real kubectl against a control plane with the controller manager: the
//! PersistentVolume binder and the emulated CSI driver — a claim provisioned and bound
//! dynamically (with the provisioner's latency), one waiting for its first consumer, a static
//! volume bound by selector, reclaim Delete removing a provisioned volume and Retain keeping a
//! static one Released, pvc-protection holding a claim a pod uses, and an expansion through
//! the resize conditions; plus the default StorageClass and CSIDriver every cluster starts with.

use crate::common;

use std::time::Duration;

use common::control_plane::{common_args, issue, spawn, start_node_host, start_scheduler};
use common::{wait_until, Cluster};
use serde_json::Value;

fn json(c: &Cluster, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&c.ok(&all)).unwrap_or(Value::Null)
}

fn phase(c: &Cluster, kind: &str, name: &str) -> String {
    let out = c.kubectl(&["get", kind, name, "-o", "jsonpath={.status.phase}"]);
    String::from_utf8_lossy(&out.stdout).to_string()
}

fn gone(c: &Cluster, kind: &str, name: &str) -> bool {
    c.ok(&["get", kind, name, "--ignore-not-found", "-o", "name"])
        .trim()
        .is_empty()
}

/// The reasons of the events about the object of `kind` named `name`.
fn reasons(c: &Cluster, namespace: &str, kind: &str, name: &str) -> Vec<(String, String)> {
    json(c, &["get", "events", "-n", namespace])["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["involvedObject"]["kind"] == kind && e["involvedObject"]["name"] == name)
        .map(|e| {
            (
                e["reason"].as_str().unwrap_or("").to_string(),
                e["message"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// Waits until claim `data` in `default` has an event with each of `wanted`'s reasons (events are
/// recorded apart from the writes they describe, as client-go's broadcaster records them), and
/// returns the claim's events.
async fn claim_events_recorded(
    c: &Cluster,
    wanted: &[&str],
) -> anyhow::Result<Vec<(String, String)>> {
    let events = || reasons(c, "default", "PersistentVolumeClaim", "data");
    let recorded = wait_until("the claim's events", Duration::from_secs(10), || async {
        let have = events();
        wanted
            .iter()
            .all(|want| have.iter().any(|(r, _)| r == want))
    })
    .await;
    let have = events();
    recorded.map_err(|e| anyhow::anyhow!("{e}: want {wanted:?}, have {have:?}"))?;
    Ok(have)
}

const CLASSES: &str = "apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: late
provisioner: csi.kemu.dev
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: fixed
provisioner: csi.kemu.dev
";

fn claim(name: &str, class: &str, size: &str) -> String {
    format!(
        "apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: {name}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: {class}
  resources:
    requests:
      storage: {size}
"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_are_provisioned_bound_protected_expanded_and_reclaimed() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let _hosts = start_node_host(&c, 1, 1, "node-")?;
    let _scheduler = start_scheduler(&c)?;
    issue(&c, "controllers", "system:kube-controller-manager")?;
    let mut args = common_args(&c, "controllers", "controllers");
    args.extend(["--volume-provision-latency-ms", "1500"].map(String::from));
    let _controllers = spawn(&c, "controllers", &args)?;

    // Every cluster starts with the emulated driver and a default class.
    wait_until(
        "the default class exists",
        Duration::from_secs(30),
        || async { !gone(&c, "sc", "standard") },
    )
    .await?;
    let sc = c.ok(&["get", "sc", "standard", "--no-headers"]);
    assert!(sc.starts_with("standard (default)"), "{sc}");
    assert!(sc.contains("csi.kemu.dev"), "{sc}");
    let driver = json(&c, &["get", "csidriver", "csi.kemu.dev"]);
    assert_eq!(driver["spec"]["attachRequired"], true);
    c.ok_stdin(&["apply", "-f", "-"], CLASSES);

    // Dynamic provisioning: Pending through the provisioner's latency, then Bound.
    let started = std::time::Instant::now();
    c.ok_stdin(
        &["apply", "-f", "-"],
        &claim("data", "standard", "1Gi").replace("  storageClassName: standard\n", ""),
    );
    let pending = json(&c, &["get", "pvc", "data"]);
    assert_eq!(pending["status"]["phase"], "Pending");
    wait_until("data is bound", Duration::from_secs(30), || async {
        phase(&c, "pvc", "data") == "Bound"
    })
    .await?;
    assert!(
        started.elapsed() >= Duration::from_millis(1500),
        "bound before the provisioner's latency"
    );
    let bound = json(&c, &["get", "pvc", "data"]);
    let volume = bound["spec"]["volumeName"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert_eq!(
        volume,
        format!("pvc-{}", bound["metadata"]["uid"].as_str().unwrap_or(""))
    );
    assert_eq!(
        bound["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"],
        "yes"
    );
    assert_eq!(
        bound["metadata"]["annotations"]["volume.kubernetes.io/storage-provisioner"],
        "csi.kemu.dev"
    );
    assert_eq!(bound["status"]["capacity"]["storage"], "1Gi");
    let pv = json(&c, &["get", "pv", &volume]);
    assert_eq!(pv["status"]["phase"], "Bound");
    assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Delete");
    assert_eq!(pv["spec"]["csi"]["driver"], "csi.kemu.dev");
    assert_eq!(pv["spec"]["claimRef"]["name"], "data");
    assert_eq!(
        pv["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"],
        "csi.kemu.dev"
    );
    let table = c.ok(&["get", "pvc", "data", "--no-headers"]);
    let cells: Vec<&str> = table.split_whitespace().collect();
    assert_eq!(
        cells[..6],
        ["data", "Bound", volume.as_str(), "1Gi", "RWO", "standard"]
    );
    let events = claim_events_recorded(
        &c,
        &[
            "ExternalProvisioning",
            "Provisioning",
            "ProvisioningSucceeded",
        ],
    )
    .await?;
    assert!(
        events.contains(&(
            "ProvisioningSucceeded".into(),
            format!("Successfully provisioned volume {volume}")
        )),
        "{events:?}"
    );

    // WaitForFirstConsumer: Pending with its event, nothing provisioned.
    c.ok_stdin(&["apply", "-f", "-"], &claim("later", "late", "1Gi"));
    wait_until(
        "the claim says it waits",
        Duration::from_secs(20),
        || async {
            reasons(&c, "default", "PersistentVolumeClaim", "later")
                .iter()
                .any(|(r, m)| {
                    r == "WaitForFirstConsumer"
                        && m == "waiting for first consumer to be created before binding"
                })
        },
    )
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(phase(&c, "pvc", "later"), "Pending");
    let later = json(&c, &["get", "pvc", "later"]);
    assert!(later["spec"]["volumeName"].is_null(), "{later}");

    // A static volume bound by selector; Retain keeps it Released when the claim goes.
    c.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1
kind: PersistentVolume
metadata:
  name: plain
spec:
  capacity: {storage: 2Gi}
  accessModes: [ReadWriteOnce]
  hostPath: {path: /data/plain}
---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: gold
  labels: {tier: gold}
spec:
  capacity: {storage: 5Gi}
  accessModes: [ReadWriteOnce, ReadWriteMany]
  hostPath: {path: /data/gold}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: picky
spec:
  storageClassName: \"\"
  accessModes: [ReadWriteOnce]
  selector:
    matchLabels: {tier: gold}
  resources:
    requests: {storage: 1Gi}
",
    );
    wait_until("picky binds to gold", Duration::from_secs(20), || async {
        phase(&c, "pvc", "picky") == "Bound"
    })
    .await?;
    assert_eq!(
        json(&c, &["get", "pvc", "picky"])["spec"]["volumeName"],
        "gold"
    );
    assert_eq!(phase(&c, "pv", "plain"), "Available");
    let pv_table = c.ok(&["get", "pv", "gold", "--no-headers"]);
    let cells: Vec<&str> = pv_table.split_whitespace().collect();
    assert_eq!(
        cells[..6],
        ["gold", "5Gi", "RWO,RWX", "Retain", "Bound", "default/picky"]
    );
    c.ok(&["delete", "pvc", "picky"]);
    wait_until("gold is released", Duration::from_secs(20), || async {
        phase(&c, "pv", "gold") == "Released"
    })
    .await?;

    // pvc-protection: a claim a pod uses stays (Terminating) until the pod is gone.
    c.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1
kind: Pod
metadata:
  name: user
spec:
  containers:
  - name: app
    image: nginx
  volumes:
  - name: data
    persistentVolumeClaim:
      claimName: data
",
    );
    wait_until("the pod runs", Duration::from_secs(30), || async {
        phase(&c, "pod", "user") == "Running"
    })
    .await?;

    // Expansion: the resizer, then the node once a running pod mounts the claim.
    c.ok(&[
        "patch",
        "pvc",
        "data",
        "--type=merge",
        "-p",
        r#"{"spec":{"resources":{"requests":{"storage":"3Gi"}}}}"#,
    ]);
    wait_until("data grows to 3Gi", Duration::from_secs(30), || async {
        json(&c, &["get", "pvc", "data"])["status"]["capacity"]["storage"] == "3Gi"
    })
    .await?;
    let grown = json(&c, &["get", "pvc", "data"]);
    assert_eq!(grown["status"]["allocatedResources"]["storage"], "3Gi");
    assert!(grown["status"]["conditions"].is_null(), "{grown}");
    assert_eq!(
        json(&c, &["get", "pv", &volume])["spec"]["capacity"]["storage"],
        "3Gi"
    );
    claim_events_recorded(
        &c,
        &[
            "Resizing",
            "FileSystemResizeRequired",
            "FileSystemResizeSuccessful",
        ],
    )
    .await?;
    let shrink = c.fails(&[
        "patch",
        "pvc",
        "data",
        "--type=merge",
        "-p",
        r#"{"spec":{"resources":{"requests":{"storage":"1Gi"}}}}"#,
    ]);
    assert!(
        shrink.contains("spec.resources.requests.storage: Forbidden: field can not be less than status.capacity"),
        "{shrink}"
    );
    // The fixed class does not expand.
    c.ok_stdin(&["apply", "-f", "-"], &claim("stuck", "fixed", "1Gi"));
    wait_until("stuck is bound", Duration::from_secs(30), || async {
        phase(&c, "pvc", "stuck") == "Bound"
    })
    .await?;
    let refused = c.fails(&[
        "patch",
        "pvc",
        "stuck",
        "--type=merge",
        "-p",
        r#"{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}"#,
    ]);
    assert!(
        refused.contains("persistentvolumeclaims \"stuck\" is forbidden: only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize"),
        "{refused}"
    );

    c.ok(&["delete", "pvc", "data", "--wait=false"]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let held = json(&c, &["get", "pvc", "data"]);
    assert!(held["metadata"]["deletionTimestamp"].is_string(), "{held}");
    assert_eq!(
        held["metadata"]["finalizers"],
        serde_json::json!(["kubernetes.io/pvc-protection"])
    );
    assert_eq!(phase(&c, "pv", &volume), "Bound");

    // Reclaim Delete: once the pod is gone the claim goes, then its provisioned volume.
    c.ok(&["delete", "pod", "user", "--grace-period=0", "--force"]);
    wait_until("the claim is gone", Duration::from_secs(30), || async {
        gone(&c, "pvc", "data")
    })
    .await?;
    wait_until("its volume is deleted", Duration::from_secs(30), || async {
        gone(&c, "pv", &volume)
    })
    .await?;
    assert_eq!(phase(&c, "pv", "gold"), "Released");
    Ok(())
}

fn pod_events(c: &Cluster, pod: &str) -> Vec<(String, String)> {
    reasons(c, "default", "Pod", pod)
}

/// The pod's PodScheduled=False message, "" while there is none.
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_wait_for_claims_and_attachments_and_node_capacity_bounds_scheduling(
) -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let _hosts = start_node_host(&c, 1, 1, "node-")?;
    let _scheduler = start_scheduler(&c)?;
    issue(&c, "controllers", "system:kube-controller-manager")?;
    let mut args = common_args(&c, "controllers", "controllers");
    args.extend(
        [
            "--volume-provision-latency-ms",
            "4000",
            "--volume-attach-latency-ms",
            "1000",
            "--volume-node-capacity",
            "3Gi",
        ]
        .map(String::from),
    );
    let _controllers = spawn(&c, "controllers", &args)?;
    wait_until(
        "the default class and the node's CSINode exist",
        Duration::from_secs(30),
        || async { !gone(&c, "sc", "standard") && !gone(&c, "csinode", "node-0") },
    )
    .await?;
    let driver = json(&c, &["get", "csidriver", "csi.kemu.dev"]);
    assert_eq!(driver["spec"]["attachRequired"], true);
    assert_eq!(driver["spec"]["storageCapacity"], true);
    let csi_node = json(&c, &["get", "csinode", "node-0"]);
    assert_eq!(
        csi_node["spec"]["drivers"],
        serde_json::json!([{"name": "csi.kemu.dev", "nodeID": "node-0",
                            "topologyKeys": ["topology.csi.kemu.dev/node"]}])
    );
    let node = json(&c, &["get", "node", "node-0"]);
    assert_eq!(
        node["metadata"]["labels"]["topology.csi.kemu.dev/node"],
        "node-0"
    );

    // A pod put on the node before its claim is provisioned waits in ContainerCreating.
    c.ok_stdin(&["apply", "-f", "-"], &claim("slow", "standard", "1Gi"));
    c.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1
kind: Pod
metadata:
  name: waiter
spec:
  nodeName: node-0
  containers:
  - name: app
    image: nginx
  volumes:
  - name: data
    persistentVolumeClaim:
      claimName: slow
",
    );
    let not_bound = "Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[], failed to process volumes=[data]: error processing PVC default/slow: PVC is not bound";
    wait_until(
        "the pod cannot mount its claim",
        Duration::from_secs(20),
        || async {
            pod_events(&c, "waiter")
                .iter()
                .any(|(r, m)| r == "FailedMount" && m == not_bound)
        },
    )
    .await?;
    let waiting = json(&c, &["get", "pod", "waiter"]);
    assert_eq!(waiting["status"]["phase"], "Pending");
    assert_eq!(
        waiting["status"]["containerStatuses"][0]["state"]["waiting"]["reason"],
        "ContainerCreating"
    );
    wait_until("the pod runs", Duration::from_secs(30), || async {
        phase(&c, "pod", "waiter") == "Running"
    })
    .await?;

    // It ran once its volume was attached to the node.
    let bound = json(&c, &["get", "pvc", "slow"]);
    let volume = bound["spec"]["volumeName"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let handle = json(&c, &["get", "pv", &volume])["spec"]["csi"]["volumeHandle"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let name = api::volumes::attachment_name(&handle, "csi.kemu.dev", "node-0");
    let attachment = json(&c, &["get", "volumeattachment", &name]);
    assert_eq!(attachment["spec"]["attacher"], "csi.kemu.dev");
    assert_eq!(attachment["spec"]["nodeName"], "node-0");
    assert_eq!(attachment["spec"]["source"]["persistentVolumeName"], volume);
    assert_eq!(attachment["status"]["attached"], true);
    assert_eq!(
        attachment["metadata"]["finalizers"],
        serde_json::json!(["external-attacher/csi-kemu-dev"])
    );
    let unique = format!("kubernetes.io/csi/csi.kemu.dev^{handle}");
    wait_until(
        "the node lists the volume attached and in use",
        Duration::from_secs(20),
        || async {
            let status = &json(&c, &["get", "node", "node-0"])["status"];
            status["volumesAttached"] == serde_json::json!([{"name": unique, "devicePath": ""}])
                && status["volumesInUse"] == serde_json::json!([unique])
        },
    )
    .await?;
    let events = pod_events(&c, "waiter");
    assert!(
        events.contains(&(
            "SuccessfulAttachVolume".into(),
            format!("AttachVolume.Attach succeeded for volume \"{volume}\" ")
        )),
        "{events:?}"
    );
    let table = c.ok(&["get", "volumeattachment", &name, "--no-headers"]);
    let cells: Vec<&str> = table.split_whitespace().collect();
    assert_eq!(
        cells[..5],
        [
            name.as_str(),
            "csi.kemu.dev",
            volume.as_str(),
            "node-0",
            "true"
        ]
    );

    // Gone with the pod: detached, and off the node's lists.
    c.ok(&["delete", "pod", "waiter", "--grace-period=1"]);
    wait_until(
        "the attachment is gone",
        Duration::from_secs(30),
        || async { gone(&c, "volumeattachment", &name) },
    )
    .await?;
    wait_until(
        "the node lists nothing",
        Duration::from_secs(20),
        || async {
            let status = &json(&c, &["get", "node", "node-0"])["status"];
            status["volumesAttached"].is_null() && status["volumesInUse"].is_null()
        },
    )
    .await?;

    // A pod that finishes unmounts its volumes: detached while the pod object stays.
    c.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1
kind: Pod
metadata:
  name: finisher
spec:
  nodeName: node-0
  restartPolicy: Never
  containers:
  - name: app
    image: busybox
    command: [sh, -c, 'sleep 1']
  volumes:
  - name: data
    persistentVolumeClaim:
      claimName: slow
",
    );
    wait_until("the pod finishes", Duration::from_secs(30), || async {
        phase(&c, "pod", "finisher") == "Succeeded"
    })
    .await?;
    wait_until(
        "the finished pod's volume is detached",
        Duration::from_secs(30),
        || async {
            let status = &json(&c, &["get", "node", "node-0"])["status"];
            gone(&c, "volumeattachment", &name)
                && status["volumesAttached"].is_null()
                && status["volumesInUse"].is_null()
        },
    )
    .await?;
    assert_eq!(phase(&c, "pod", "finisher"), "Succeeded");
    c.ok(&["delete", "pod", "finisher"]);

    // Capacity: 3Gi per node, published per class of the driver and node.
    c.ok_stdin(&["apply", "-f", "-"], CLASSES);
    let published = |class: &'static str| {
        let c = &c;
        async move {
            json(c, &["get", "csistoragecapacities", "-n", "kube-system"])["items"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|o| {
                    o["storageClassName"] == class
                        && o["nodeTopology"]["matchLabels"]["topology.csi.kemu.dev/node"]
                            == "node-0"
                })
                .map(|o| o["capacity"].as_str().unwrap_or("").to_string())
        }
    };
    wait_until("capacity is published", Duration::from_secs(20), || async {
        published("late").await.as_deref() == Some("3Gi")
    })
    .await?;
    let consumer = |name: &str, claim_name: &str| {
        format!(
            "apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  containers:
  - name: app
    image: nginx
  volumes:
  - name: data
    persistentVolumeClaim:
      claimName: {claim_name}
"
        )
    };
    // Two pods whose 2Gi claims fit the node one at a time, created together: the scheduler
    // puts both on the node, the provisioner makes the first volume and refuses the second
    // (ResourceExhausted, the selected node handed back), and the scheduler, told so, finds no
    // storage for that pod any more.
    let pair = |pod: &str, claim_name: &str| {
        format!(
            "{}---\n{}",
            claim(claim_name, "late", "2Gi"),
            consumer(pod, claim_name)
        )
    };
    c.ok_stdin(
        &["apply", "-f", "-"],
        &format!(
            "{}---\n{}",
            pair("fitting", "fits"),
            pair("rival", "rivals")
        ),
    );
    let full = "0/1 nodes are available: 1 node(s) did not have enough free storage.";
    wait_until(
        "one pod runs and the other finds no storage",
        Duration::from_secs(60),
        || async {
            let (a, b) = (phase(&c, "pod", "fitting"), phase(&c, "pod", "rival"));
            (a == "Running" && unschedulable(&c, "rival").starts_with(full))
                || (b == "Running" && unschedulable(&c, "fitting").starts_with(full))
        },
    )
    .await?;
    let (winner, loser) = if phase(&c, "pod", "fitting") == "Running" {
        ("fits", "rivals")
    } else {
        ("rivals", "fits")
    };
    assert_eq!(phase(&c, "pvc", winner), "Bound");
    assert_eq!(phase(&c, "pvc", loser), "Pending");
    let refused = "failed to provision volume with StorageClass \"late\": rpc error: code = ResourceExhausted desc = requested capacity 2147483648 exceeds remaining capacity for \"node-0\", 2Gi out of 3Gi already used";
    let events = reasons(&c, "default", "PersistentVolumeClaim", loser);
    assert!(
        events
            .iter()
            .any(|(r, m)| r == "ProvisioningFailed" && m == refused),
        "{events:?}"
    );
    assert!(
        json(&c, &["get", "pvc", loser])["metadata"]["annotations"]
            ["volume.kubernetes.io/selected-node"]
            .is_null(),
        "the loser's selected node was handed back"
    );
    wait_until(
        "the node's capacity shrinks",
        Duration::from_secs(20),
        || async { published("late").await.as_deref() == Some("1Gi") },
    )
    .await?;
    c.ok_stdin(&["apply", "-f", "-"], &claim("huge", "late", "2Gi"));
    c.ok_stdin(&["apply", "-f", "-"], &consumer("hungry", "huge"));
    wait_until(
        "the scheduler finds no storage",
        Duration::from_secs(20),
        || async { unschedulable(&c, "hungry").starts_with(full) },
    )
    .await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(phase(&c, "pod", "hungry"), "Pending");
    assert_eq!(phase(&c, "pvc", "huge"), "Pending");

    // A claim whose selected node has no room left is refused by the provisioner too, as the
    // external-provisioner reports a driver's ResourceExhausted, and handed back to the
    // scheduler: its selected-node annotation goes.
    c.ok_stdin(
        &["apply", "-f", "-"],
        &claim("pinned", "late", "2Gi").replace(
            "  name: pinned\n",
            "  name: pinned\n  annotations:\n    volume.kubernetes.io/selected-node: node-0\n",
        ),
    );
    wait_until(
        "the provisioner refuses the claim",
        Duration::from_secs(30),
        || async {
            reasons(&c, "default", "PersistentVolumeClaim", "pinned")
                .iter()
                .any(|(r, m)| r == "ProvisioningFailed" && m == refused)
        },
    )
    .await?;
    wait_until(
        "the selected node is taken off the claim",
        Duration::from_secs(10),
        || async {
            json(&c, &["get", "pvc", "pinned"])["metadata"]["annotations"]
                ["volume.kubernetes.io/selected-node"]
                .is_null()
        },
    )
    .await?;
    assert_eq!(phase(&c, "pvc", "pinned"), "Pending");
    let volumes = json(&c, &["get", "pv"]);
    let for_pinned = volumes["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["spec"]["claimRef"]["name"] == "pinned")
        .count();
    assert_eq!(for_pinned, 0, "no volume is made for it: {volumes}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_provisions_and_attaches_are_reported_and_retried() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let _hosts = start_node_host(&c, 1, 1, "node-")?;
    let _scheduler = start_scheduler(&c)?;
    issue(&c, "controllers", "system:kube-controller-manager")?;
    let mut args = common_args(&c, "controllers", "controllers");
    args.extend(
        [
            "--volume-provision-failure-rate",
            "1",
            "--volume-attach-failure-rate",
            "1",
        ]
        .map(String::from),
    );
    let _controllers = spawn(&c, "controllers", &args)?;
    wait_until(
        "the default class exists",
        Duration::from_secs(30),
        || async { !gone(&c, "sc", "standard") },
    )
    .await?;

    // Every provisioning attempt fails: the claim stays Pending, told so.
    c.ok_stdin(&["apply", "-f", "-"], &claim("broken", "standard", "1Gi"));
    let failed = "failed to provision volume with StorageClass \"standard\": rpc error: code = Internal desc = emulated provisioning failure";
    wait_until(
        "the claim says its provisioning failed",
        Duration::from_secs(20),
        || async {
            reasons(&c, "default", "PersistentVolumeClaim", "broken")
                .iter()
                .any(|(r, m)| r == "ProvisioningFailed" && m == failed)
        },
    )
    .await?;
    assert_eq!(phase(&c, "pvc", "broken"), "Pending");

    // A volume of the driver that cannot be attached keeps its pod in ContainerCreating.
    c.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1
kind: PersistentVolume
metadata:
  name: disk
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  csi: {driver: csi.kemu.dev, volumeHandle: disk-1}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: static
spec:
  storageClassName: \"\"
  volumeName: disk
  accessModes: [ReadWriteOnce]
  resources:
    requests: {storage: 1Gi}
---
apiVersion: v1
kind: Pod
metadata:
  name: stuck
spec:
  containers:
  - name: app
    image: nginx
  volumes:
  - name: data
    persistentVolumeClaim:
      claimName: static
",
    );
    let message = "AttachVolume.Attach failed for volume \"disk\" : rpc error: code = Internal desc = emulated attach failure";
    wait_until(
        "the pod is told its volume failed to attach",
        Duration::from_secs(30),
        || async {
            reasons(&c, "default", "Pod", "stuck")
                .iter()
                .any(|(r, m)| r == "FailedAttachVolume" && m == message)
        },
    )
    .await?;
    let name = api::volumes::attachment_name("disk-1", "csi.kemu.dev", "node-0");
    let attachment = json(&c, &["get", "volumeattachment", &name]);
    assert_eq!(attachment["status"]["attached"], false);
    assert_eq!(
        attachment["status"]["attachError"]["message"],
        "rpc error: code = Internal desc = emulated attach failure"
    );
    let pod = json(&c, &["get", "pod", "stuck"]);
    assert_eq!(pod["status"]["phase"], "Pending");
    assert_eq!(
        pod["status"]["containerStatuses"][0]["state"]["waiting"]["reason"],
        "ContainerCreating"
    );
    Ok(())
}
