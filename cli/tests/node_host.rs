//! End to end: a real `kemu node-host` (two emulated nodes) under a real store and API server,
//! driven with the real kubectl — pods bound by `spec.nodeName` (no scheduler needed) run
//! through the emulated kubelet's lifecycle: Running with IP and events, Completed,
//! CrashLoopBackOff, ImagePullBackOff, init containers, FailedMount, graceful and force delete,
//! static (mirror) pods and `kubectl logs`.

use crate::common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{kemu_exe, wait_until, Cluster};
use serde_json::Value;

/// The node host process; killed when dropped.
struct NodeHost(Child);

impl Drop for NodeHost {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Issues nodehost-1's certificate (organization `system:nodes`); returns the certs directory.
fn node_host_certs(c: &Cluster) -> anyhow::Result<std::path::PathBuf> {
    common::control_plane::issue(c, "nodehost-1", "system:nodes")?;
    Ok(c.store.certs_dir())
}

fn start_node_host(c: &Cluster, static_dir: &Path) -> anyhow::Result<NodeHost> {
    let certs = node_host_certs(c)?;
    let config = c.file(
        "nodehost.toml",
        "cpu = \"4\"\nmemory = \"8Gi\"\nzones = [\"zone-a\"]\nlease_interval = 2\n[runtime]\npull_image_ms = 300\nrun_sandbox_ms = 100\n",
    );
    let log = std::fs::File::create(c.dir.path().join("nodehost.log"))?;
    let child = Command::new(kemu_exe())
        .args(["node-host", "--apiserver"])
        .arg(c.api.quic.to_string())
        .arg("--certs")
        .arg(&certs)
        .args([
            "--identity",
            "nodehost-1",
            "--nodes",
            "2",
            "--name-prefix",
            "node-",
        ])
        .args(["--config", &config, "--static-pods"])
        .arg(static_dir)
        .env("RUST_LOG", "info,node=debug")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()?;
    Ok(NodeHost(child))
}

fn pod_json(c: &Cluster, name: &str) -> Option<Value> {
    let out = c.kubectl(&["get", "pod", name, "-o", "json"]);
    if !out.status.success() {
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

/// The STATUS column of `kubectl get pod`.
fn status_column(c: &Cluster, name: &str) -> String {
    let out = c.kubectl(&["get", "pod", name, "--no-headers"]);
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .nth(2)
        .unwrap_or_default()
        .to_string()
}

async fn wait_status(c: &Cluster, name: &str, want: &str, timeout: Duration) -> anyhow::Result<()> {
    let why = format!("pod {name} shows {want}");
    let result = wait_until(&why, timeout, || async { status_column(c, name) == want }).await;
    if result.is_err() {
        eprintln!("{}", c.kubectl_text(&["describe", "pod", name]));
    }
    result
}

trait Text {
    fn kubectl_text(&self, args: &[&str]) -> String;
}

impl Text for Cluster {
    fn kubectl_text(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }
}

fn pod(name: &str, node: &str, extra_spec: &str, containers: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  nodeName: {node}\n{extra_spec}  containers:\n{containers}"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubelets_run_pods_through_their_lifecycle() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let static_dir = c.dir.path().join("manifests");
    std::fs::create_dir_all(static_dir.join("node-0"))?;
    std::fs::write(
        static_dir.join("node-0").join("static-web.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: static-web\nspec:\n  containers:\n  - name: web\n    image: nginx:1.27\n",
    )?;
    let _host = start_node_host(&c, &static_dir)?;

    // Nodes register Ready with a lease.
    wait_until("both nodes are Ready", Duration::from_secs(30), || async {
        let out = c.kubectl_text(&["get", "nodes", "--no-headers"]);
        out.lines().filter(|l| l.contains(" Ready ")).count() == 2
    })
    .await?;
    let node = c.ok(&["get", "node", "node-0", "-o", "json"]);
    let node: Value = serde_json::from_str(&node)?;
    assert_eq!(node["spec"]["podCIDR"], "10.128.0.0/24");
    assert_eq!(
        node["metadata"]["labels"]["kubernetes.io/hostname"],
        "node-0"
    );
    assert_eq!(
        node["metadata"]["labels"]["topology.kubernetes.io/zone"],
        "zone-a"
    );
    assert_eq!(
        node["status"]["nodeInfo"].as_object().map(|o| o.len()),
        Some(10)
    );
    // The kubelet creates its lease after registering the node (as Kubernetes' lease controller
    // does), so Ready may be seen a moment before the lease exists.
    let lease_args = [
        "get",
        "lease",
        "node-0",
        "-n",
        "kube-node-lease",
        "-o",
        "jsonpath={.spec.renewTime}",
    ];
    wait_until("node-0's lease exists", Duration::from_secs(10), || async {
        c.kubectl(&lease_args).status.success()
    })
    .await?;
    let lease = c.ok(&lease_args);
    assert!(!lease.is_empty());
    wait_until("the lease is renewed", Duration::from_secs(10), || async {
        c.ok(&[
            "get",
            "lease",
            "node-0",
            "-n",
            "kube-node-lease",
            "-o",
            "jsonpath={.spec.renewTime}",
        ]) != lease
    })
    .await?;

    // nginx: Running with an IP from the node's podCIDR and the kubelet's events.
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod("web", "node-0", "", "  - name: nginx\n    image: nginx\n"),
    );
    wait_status(&c, "web", "Running", Duration::from_secs(30)).await?;
    let wide = c.ok(&["get", "pod", "web", "-o", "wide"]);
    assert!(
        wide.contains("1/1") && wide.contains("node-0") && wide.contains("10.128.0."),
        "{wide}"
    );
    wait_until(
        "describe shows the kubelet's events",
        Duration::from_secs(10),
        || async {
            let d = c.kubectl_text(&["describe", "pod", "web"]);
            ["Pulling", "Pulled", "Created", "Started"]
                .iter()
                .all(|r| d.contains(r))
                && d.contains("Successfully pulled image \"nginx\"")
        },
    )
    .await?;
    let p = pod_json(&c, "web").expect("pod");
    let conditions: Vec<&str> = p["status"]["conditions"]
        .as_array()
        .expect("conditions")
        .iter()
        .filter(|c| c["status"] == "True")
        .filter_map(|c| c["type"].as_str())
        .collect();
    for kind in [
        "PodReadyToStartContainers",
        "Initialized",
        "ContainersReady",
        "Ready",
    ] {
        assert!(conditions.contains(&kind), "{conditions:?}");
    }
    assert_eq!(
        p["status"]["hostIP"],
        node["status"]["addresses"][0]["address"]
    );

    // busybox `sleep 2` with restartPolicy Never completes.
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod(
            "sleeper",
            "node-1",
            "  restartPolicy: Never\n",
            "  - name: c\n    image: busybox\n    command: [\"sleep\", \"2\"]\n",
        ),
    );
    wait_status(&c, "sleeper", "Completed", Duration::from_secs(30)).await?;
    assert_eq!(
        pod_json(&c, "sleeper").expect("pod")["status"]["phase"],
        "Succeeded"
    );

    // `exit 1` with Always: CrashLoopBackOff with a growing back-off.
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod(
            "crasher",
            "node-1",
            "",
            "  - name: c\n    image: busybox\n    command: [\"sh\", \"-c\", \"exit 1\"]\n",
        ),
    );
    wait_status(&c, "crasher", "CrashLoopBackOff", Duration::from_secs(30)).await?;
    wait_until(
        "the back-off doubles to 20s",
        Duration::from_secs(40),
        || async {
            pod_json(&c, "crasher").is_some_and(|p| {
                p["status"]["containerStatuses"][0]["state"]["waiting"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("back-off 20s"))
            })
        },
    )
    .await?;
    let restarts = pod_json(&c, "crasher").expect("pod")["status"]["containerStatuses"][0]
        ["restartCount"]
        .as_i64()
        .unwrap_or(0);
    assert!(restarts >= 2, "{restarts}");
    assert!(c
        .kubectl_text(&["describe", "pod", "crasher"])
        .contains("Back-off restarting failed container"));

    // A failing image: ErrImagePull, then ImagePullBackOff.
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod(
            "badimage",
            "node-0",
            "",
            "  - name: c\n    image: registry.example/doesnotexist:1\n",
        ),
    );
    wait_status(&c, "badimage", "ImagePullBackOff", Duration::from_secs(30)).await?;

    // Two init containers, in order.
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod(
            "inits",
            "node-0",
            "  initContainers:\n  - name: first\n    image: busybox\n    command: [\"sleep\", \"1\"]\n  - name: second\n    image: busybox\n    command: [\"sleep\", \"1\"]\n",
            "  - name: app\n    image: nginx\n",
        ),
    );
    wait_until(
        "init containers are shown",
        Duration::from_secs(10),
        || async { status_column(&c, "inits").starts_with("Init:") },
    )
    .await?;
    wait_status(&c, "inits", "Running", Duration::from_secs(30)).await?;
    let p = pod_json(&c, "inits").expect("pod");
    let first = &p["status"]["initContainerStatuses"][0]["state"]["terminated"];
    let second = &p["status"]["initContainerStatuses"][1]["state"]["terminated"];
    assert_eq!(first["reason"], "Completed");
    assert_eq!(second["reason"], "Completed");
    assert!(
        first["finishedAt"].as_str() <= second["startedAt"].as_str(),
        "{first} {second}"
    );

    // A missing configMap: FailedMount and ContainerCreating until it exists.
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod(
            "needs-config",
            "node-1",
            "  volumes:\n  - name: cfg\n    configMap:\n      name: settings\n",
            "  - name: app\n    image: nginx\n    volumeMounts:\n    - name: cfg\n      mountPath: /etc/cfg\n",
        ),
    );
    wait_until(
        "FailedMount is reported",
        Duration::from_secs(20),
        || async {
            c.kubectl_text(&["describe", "pod", "needs-config"])
                .contains("configmap \"settings\" not found")
        },
    )
    .await?;
    assert_eq!(status_column(&c, "needs-config"), "ContainerCreating");
    c.ok(&["create", "configmap", "settings", "--from-literal=a=b"]);
    wait_status(&c, "needs-config", "Running", Duration::from_secs(30)).await?;

    // Logs: what the container echoed.
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod("talker", "node-0", "", "  - name: c\n    image: busybox\n    command: [\"sh\", \"-c\", \"echo hello; echo world; sleep 3600\"]\n"),
    );
    wait_status(&c, "talker", "Running", Duration::from_secs(30)).await?;
    assert_eq!(c.ok(&["logs", "talker"]), "hello\nworld\n");
    assert_eq!(
        c.ok(&["logs", "talker", "-c", "c", "--tail", "1"]),
        "world\n"
    );
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod("counter", "node-1", "  restartPolicy: Never\n", "  - name: c\n    image: busybox\n    command: [\"sh\", \"-c\", \"echo one; sleep 2; echo two\"]\n"),
    );
    wait_status(&c, "counter", "Running", Duration::from_secs(30)).await?;
    let followed = c.ok(&["logs", "-f", "counter"]);
    assert_eq!(followed, "one\ntwo\n");

    // Graceful delete: preStop, then the grace period (sleep ignores SIGTERM).
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod(
            "graceful",
            "node-0",
            "  terminationGracePeriodSeconds: 4\n",
            "  - name: c\n    image: busybox\n    command: [\"sleep\", \"3600\"]\n    lifecycle:\n      preStop:\n        exec:\n          command: [\"sleep\", \"1\"]\n",
        ),
    );
    wait_status(&c, "graceful", "Running", Duration::from_secs(30)).await?;
    let started = Instant::now();
    c.ok(&["delete", "pod", "graceful", "--wait=false"]);
    wait_status(&c, "graceful", "Terminating", Duration::from_secs(5)).await?;
    wait_until(
        "the graceful pod is gone",
        Duration::from_secs(20),
        || async { pod_json(&c, "graceful").is_none() },
    )
    .await?;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(3500),
        "gone after {took:?}, before the grace period"
    );
    assert!(c
        .kubectl_text(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=graceful"
        ])
        .contains("Killing"));

    // Force delete: gone at once.
    c.ok(&["delete", "pod", "web", "--grace-period=0", "--force"]);
    assert!(pod_json(&c, "web").is_none());

    // The static pod shows as a mirror pod, Running.
    wait_status(&c, "static-web-node-0", "Running", Duration::from_secs(30)).await?;
    let mirror = pod_json(&c, "static-web-node-0").expect("mirror pod");
    assert!(mirror["metadata"]["annotations"]["kubernetes.io/config.mirror"].is_string());
    assert_eq!(mirror["spec"]["nodeName"], "node-0");
    Ok(())
}

#[tokio::test]
async fn out_of_cpu_pods_fail_admission() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let dir = c.dir.path().join("none");
    let _host = start_node_host(&c, &dir)?;
    wait_until("the node is Ready", Duration::from_secs(30), || async {
        c.kubectl_text(&["get", "node", "node-0", "--no-headers"])
            .contains(" Ready ")
    })
    .await?;
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod(
            "huge",
            "node-0",
            "",
            "  - name: c\n    image: nginx\n    resources:\n      requests:\n        cpu: \"64\"\n",
        ),
    );
    wait_status(&c, "huge", "OutOfcpu", Duration::from_secs(20)).await?;
    assert_eq!(
        pod_json(&c, "huge").expect("pod")["status"]["phase"],
        "Failed"
    );
    Ok(())
}

/// A Node the server holds not Ready (the node lifecycle controller's mark, here written by the
/// admin) is posted Ready again by its kubelet within its 10 s status check, not at its next
/// periodic report five minutes on.
#[tokio::test]
async fn a_node_marked_unknown_posts_its_status_at_once() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let dir = c.dir.path().join("none");
    let _host = start_node_host(&c, &dir)?;
    wait_until("both nodes are Ready", Duration::from_secs(30), || async {
        let out = c.kubectl_text(&["get", "nodes", "--no-headers"]);
        out.lines().filter(|l| l.contains(" Ready ")).count() == 2
    })
    .await?;
    let node: Value = serde_json::from_str(&c.ok(&["get", "node", "node-1", "-o", "json"]))?;
    assert_eq!(
        node["metadata"]["labels"]["kemu.dev/node-host"],
        "nodehost-1"
    );
    let unknown = r#"{"status":{"conditions":[{"type":"Ready","status":"Unknown","reason":"NodeStatusUnknown","message":"Kubelet stopped posting node status."}]}}"#;
    let marked = Instant::now();
    let patched: Value = serde_json::from_str(&c.ok(&[
        "patch",
        "node",
        "node-1",
        "--subresource=status",
        "--type=strategic",
        "-p",
        unknown,
        "-o",
        "json",
    ]))?;
    let ready_of = |node: &Value| {
        node["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(ready_of(&patched)["status"], "Unknown", "{patched}");
    let status = || c.kubectl_text(&["get", "node", "node-1", "--no-headers"]);
    wait_until("node-1 is Ready again", Duration::from_secs(20), || async {
        status().contains(" Ready ")
    })
    .await?;
    assert!(marked.elapsed() < Duration::from_secs(20));
    let node: Value = serde_json::from_str(&c.ok(&["get", "node", "node-1", "-o", "json"]))?;
    let ready = ready_of(&node);
    assert_eq!(ready["status"], "True", "{ready}");
    assert_eq!(ready["reason"], "KubeletReady", "{ready}");
    // The other node was left alone.
    assert!(c
        .kubectl_text(&["get", "node", "node-0", "--no-headers"])
        .contains(" Ready "));
    Ok(())
}

/// Dual-stack addressing from the flags, past the old 32,768-node limit: the node's podCIDRs
/// and InternalIPs of both families (the first CIDR's family primary), and a pod with an IP of
/// each. A node host whose nodes do not fit its ranges exits at once with status 78.
#[tokio::test]
async fn dual_stack_nodes_past_32768_get_both_families() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let certs = node_host_certs(&c)?;
    let node_host = |extra: &[&str]| {
        let mut command = Command::new(kemu_exe());
        command
            .args(["node-host", "--apiserver", &c.api.quic.to_string()])
            .arg("--certs")
            .arg(&certs)
            .args([
                "--identity",
                "nodehost-1",
                "--nodes",
                "1",
                "--runtime",
                "instant",
            ])
            .args(["--first-index", "70000", "--node-cidr-mask-size-ipv4", "25"])
            .args(["--node-ip-cidr", "100.64.0.0/10,fd00:64::/64"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        command
    };
    let refused = node_host(&["--cluster-cidr", "10.128.0.0/9,fd00:10::/48"]).output()?;
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(78), "{stderr}");
    assert!(
        stderr.contains("node host config nodes: nodes node-70000 to node-70000 need 70001 /25 ranges but cluster_cidr 10.128.0.0/9 holds 65536"),
        "{stderr}"
    );
    let log = std::fs::File::create(c.dir.path().join("nodehost.log"))?;
    let _host = NodeHost(
        node_host(&["--cluster-cidr", "fd00:10::/40,10.0.0.0/8"])
            .stderr(log)
            .spawn()?,
    );
    wait_until("the node is Ready", Duration::from_secs(30), || async {
        c.kubectl_text(&["get", "node", "node-70000", "--no-headers"])
            .contains(" Ready ")
    })
    .await?;
    let node: Value = serde_json::from_str(&c.ok(&["get", "node", "node-70000", "-o", "json"]))?;
    assert_eq!(node["spec"]["podCIDR"], "fd00:10:1:1170::/64");
    assert_eq!(
        node["spec"]["podCIDRs"],
        serde_json::json!(["fd00:10:1:1170::/64", "10.136.184.0/25"])
    );
    let addresses: Vec<&str> = node["status"]["addresses"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["address"].as_str())
        .collect();
    assert_eq!(
        addresses,
        ["100.65.17.113", "fd00:64::1:1171", "node-70000"]
    );
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod("dual", "node-70000", "", "  - name: c\n    image: nginx\n"),
    );
    wait_status(&c, "dual", "Running", Duration::from_secs(30)).await?;
    let pod = pod_json(&c, "dual").expect("pod");
    assert_eq!(pod["status"]["podIP"], "fd00:10:1:1170::2");
    assert_eq!(
        pod["status"]["podIPs"],
        serde_json::json!([{"ip": "fd00:10:1:1170::2"}, {"ip": "10.136.184.2"}])
    );
    assert_eq!(pod["status"]["hostIP"], "100.65.17.113");
    let wide = c.ok(&["get", "pod", "dual", "-o", "wide"]);
    assert!(wide.contains("fd00:10:1:1170::2"), "{wide}");
    Ok(())
}
