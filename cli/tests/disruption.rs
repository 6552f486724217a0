//! End to end with the real kubectl against a whole control plane (store, API server,
//! scheduler, node hosts, controllers): PodDisruptionBudgets and the eviction subresource
//! (`kubectl drain` blocked by a budget, retrying, then completing once the budget allows),
//! ReplicationControllers (create, scale, cascading delete) and PodTemplates, and the 422s of
//! their invalid specs.

use crate::common;

use std::process::Stdio;
use std::time::Duration;

use common::control_plane::{
    exactly_running, pods_json, start_controllers, start_node_host, start_scheduler, terminating,
};
use common::{wait_until, Cluster};
use serde_json::{json, Value};

const BUDGET: &str = "apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: web
spec:
  minAvailable: 3
  selector:
    matchLabels:
      app: web
";

fn budget_status(c: &Cluster) -> Value {
    let out = c.ok(&["get", "pdb", "web", "-o", "json"]);
    serde_json::from_str::<Value>(&out)
        .map(|v| v["status"].clone())
        .unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_waits_for_the_disruption_budget() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let _hosts = start_node_host(&c, 1, 2, "node-")?;
    let _scheduler = start_scheduler(&c)?;
    let controllers = start_controllers(&c, 40)?;

    c.ok(&[
        "create",
        "deployment",
        "web",
        "--image=nginx",
        "--replicas=3",
    ]);
    wait_until("3 web pods run", Duration::from_secs(60), || async {
        exactly_running(&c, "app=web", 3, &[])
    })
    .await?;
    c.ok_stdin(&["apply", "-f", "-"], BUDGET);
    let counted = wait_until(
        "the budget counts 3 healthy pods",
        Duration::from_secs(30),
        || async {
            let s = budget_status(&c);
            s["currentHealthy"] == 3 && s["expectedPods"] == 3 && s["observedGeneration"] == 1
        },
    )
    .await;
    if counted.is_err() {
        eprintln!("{}", controllers.log());
    }
    counted?;
    let s = budget_status(&c);
    assert_eq!(s["desiredHealthy"], 3, "{s}");
    assert_eq!(s["disruptionsAllowed"], 0, "{s}");
    assert_eq!(s["conditions"][0]["type"], "DisruptionAllowed", "{s}");
    assert_eq!(s["conditions"][0]["status"], "False", "{s}");
    assert_eq!(s["conditions"][0]["reason"], "InsufficientPods", "{s}");

    let table = c.ok(&["get", "pdb"]);
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        [
            "NAME",
            "MIN",
            "AVAILABLE",
            "MAX",
            "UNAVAILABLE",
            "ALLOWED",
            "DISRUPTIONS",
            "AGE"
        ],
        "{table}"
    );
    let row: Vec<&str> = table
        .lines()
        .nth(1)
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(&row[..4], ["web", "3", "N/A", "0"], "{table}");
    assert!(c
        .ok(&["api-resources", "--api-group=policy"])
        .contains("pdb"));

    // The eviction subresource refuses as kube-apiserver does.
    let pods = pods_json(&c, &["-l", "app=web"]);
    let victim = pods[0]["metadata"]["name"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let node = pods[0]["spec"]["nodeName"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": victim, "namespace": "default"}});
    let (code, body) = c
        .http(
            "POST",
            &format!("/api/v1/namespaces/default/pods/{victim}/eviction"),
            Some("application/json"),
            eviction.to_string().as_bytes(),
        )
        .await?;
    assert_eq!(code, 429, "{body}");
    assert_eq!(body["reason"], "TooManyRequests");
    assert_eq!(
        body["message"],
        "Cannot evict pod as it would violate the pod's disruption budget."
    );
    assert_eq!(body["details"]["causes"][0]["reason"], "DisruptionBudget");
    assert_eq!(
        body["details"]["causes"][0]["message"],
        "The disruption budget web needs 3 healthy pods and has 3 currently"
    );

    // kubectl drain is refused and keeps retrying until the budget allows the evictions.
    let log = c.dir.path().join("drain.log");
    let mut drain = std::process::Command::new(common::kubectl_path())
        .args(["--kubeconfig", &c.kubeconfig.display().to_string()])
        .args(["drain", &node, "--ignore-daemonsets", "--timeout=150s"])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(c.dir.path().join("drain.out"))?)
        .stderr(std::fs::File::create(&log)?)
        .spawn()?;
    wait_until("drain is refused", Duration::from_secs(30), || async {
        std::fs::read_to_string(&log).is_ok_and(|l| {
            l.contains("Cannot evict pod as it would violate the pod's disruption budget.")
        })
    })
    .await?;
    assert!(
        drain.try_wait()?.is_none(),
        "drain gave up instead of retrying"
    );
    let unschedulable = c.ok(&["get", "node", &node, "-o", "jsonpath={.spec.unschedulable}"]);
    assert_eq!(unschedulable.trim(), "true");
    assert!(exactly_running(&c, "app=web", 3, &[]));

    c.ok(&[
        "patch",
        "pdb",
        "web",
        "--type=merge",
        "-p",
        r#"{"spec":{"minAvailable":2}}"#,
    ]);
    let finished = wait_until("drain completes", Duration::from_secs(150), || {
        let done = matches!(drain.try_wait(), Ok(Some(_)));
        async move { done }
    })
    .await;
    if finished.is_err() {
        let _ = drain.kill();
    }
    let stderr = std::fs::read_to_string(&log).unwrap_or_default();
    finished.map_err(|e| anyhow::anyhow!("{e}\n{stderr}"))?;
    assert!(drain.wait()?.success(), "{stderr}");
    let out = std::fs::read_to_string(c.dir.path().join("drain.out"))?;
    assert!(
        out.contains(&format!("node/{node} drained")),
        "{out}\n{stderr}"
    );
    assert!(out.contains("evicted"), "{out}");
    let on_node = pods_json(
        &c,
        &[
            "-l",
            "app=web",
            "--field-selector",
            &format!("spec.nodeName={node}"),
        ],
    );
    assert!(
        on_node.iter().all(terminating) || on_node.is_empty(),
        "{on_node:?}"
    );
    wait_until(
        "3 web pods run again elsewhere",
        Duration::from_secs(60),
        || async {
            exactly_running(&c, "app=web", 3, &[])
                && pods_json(&c, &["-l", "app=web"])
                    .iter()
                    .filter(|p| !terminating(p))
                    .all(|p| p["spec"]["nodeName"] != node.as_str())
        },
    )
    .await?;
    wait_until(
        "the budget allows one disruption",
        Duration::from_secs(30),
        || async {
            let s = budget_status(&c);
            s["disruptionsAllowed"] == 1 && s["conditions"][0]["reason"] == "SufficientPods"
        },
    )
    .await?;
    Ok(())
}

const RC: &str = "apiVersion: v1
kind: ReplicationController
metadata:
  name: legacy
spec:
  replicas: 2
  template:
    metadata:
      labels:
        app: legacy
    spec:
      containers:
      - name: nginx
        image: nginx
";

const TEMPLATE: &str = "apiVersion: v1
kind: PodTemplate
metadata:
  name: tpl
template:
  metadata:
    labels:
      tier: front
  spec:
    containers:
    - name: web
      image: nginx:1.27
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replication_controllers_scale_and_cascade() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let _hosts = start_node_host(&c, 1, 2, "node-")?;
    let _scheduler = start_scheduler(&c)?;
    let controllers = start_controllers(&c, 40)?;

    c.ok_stdin(&["apply", "-f", "-"], RC);
    let two = wait_until("2 legacy pods run", Duration::from_secs(60), || async {
        exactly_running(&c, "app=legacy", 2, &[])
    })
    .await;
    if two.is_err() {
        eprintln!("{}", controllers.log());
    }
    two?;
    // Defaults: the selector and labels come from the template.
    let rc: Value = serde_json::from_str(&c.ok(&["get", "rc", "legacy", "-o", "json"]))?;
    assert_eq!(rc["spec"]["selector"], json!({"app": "legacy"}));
    assert_eq!(rc["metadata"]["labels"], json!({"app": "legacy"}));
    let pod = &pods_json(&c, &["-l", "app=legacy"])[0];
    assert_eq!(
        pod["metadata"]["ownerReferences"][0]["kind"],
        "ReplicationController"
    );
    assert_eq!(pod["metadata"]["ownerReferences"][0]["apiVersion"], "v1");

    c.ok(&["scale", "rc", "legacy", "--replicas=3"]);
    wait_until("3 legacy pods run", Duration::from_secs(60), || async {
        exactly_running(&c, "app=legacy", 3, &[])
    })
    .await?;
    wait_until(
        "the rc reports 3 ready",
        Duration::from_secs(30),
        || async {
            let table = c.ok(&["get", "rc", "legacy", "-o", "wide"]);
            let row: Vec<String> = table
                .lines()
                .nth(1)
                .unwrap_or("")
                .split_whitespace()
                .map(String::from)
                .collect();
            table.starts_with("NAME")
                && row.len() == 8
                && row[1..4] == ["3", "3", "3"]
                && row[7] == "app=legacy"
        },
    )
    .await?;
    let header = c.ok(&["get", "rc"]);
    let header: Vec<&str> = header
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(header, ["NAME", "DESIRED", "CURRENT", "READY", "AGE"]);
    let all = c.ok(&["get", "all"]);
    assert!(all.contains("replicationcontroller/legacy"), "{all}");
    let scale = c.ok(&[
        "get",
        "--raw",
        "/api/v1/namespaces/default/replicationcontrollers/legacy/scale",
    ]);
    let scale: Value = serde_json::from_str(&scale)?;
    assert_eq!(scale["status"]["selector"], "app=legacy");

    // PodTemplates are stored and printed.
    c.ok_stdin(&["apply", "-f", "-"], TEMPLATE);
    let table = c.ok(&["get", "podtemplates"]);
    let lines: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines[0],
        ["NAME", "CONTAINERS", "IMAGES", "POD", "LABELS"],
        "{table}"
    );
    assert_eq!(
        lines[1],
        ["tpl", "web", "nginx:1.27", "tier=front"],
        "{table}"
    );

    // Invalid specs: 422 with the field path.
    let bad_rc = RC
        .replace("name: legacy", "name: bad")
        .replace("replicas: 2", "replicas: -1\n  selector:\n    app: other");
    let err = c.fails(&["apply", "-f", &c.file("bad-rc.yaml", &bad_rc)]);
    assert!(
        err.contains("The ReplicationController \"bad\" is invalid")
            && err.contains("spec.replicas: Invalid value: -1: must be greater than or equal to 0")
            && err.contains("spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"legacy\"}: `selector` does not match template `labels`"),
        "{err}"
    );
    let bad_pdb = BUDGET.replace("minAvailable: 3", "minAvailable: 3\n  maxUnavailable: 120%");
    let err = c.fails(&["apply", "-f", &c.file("bad-pdb.yaml", &bad_pdb)]);
    assert!(
        err.contains("The PodDisruptionBudget \"web\" is invalid")
            && err.contains("minAvailable and maxUnavailable cannot be both set")
            && err.contains("spec.maxUnavailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"120%\"}: must not be greater than 100%"),
        "{err}"
    );
    let bad_template = TEMPLATE.replace("name: tpl", "name: bad").replace(
        "    - name: web\n      image: nginx:1.27\n",
        "    - name: web\n",
    );
    let err = c.fails(&["apply", "-f", &c.file("bad-template.yaml", &bad_template)]);
    assert!(
        err.contains(
            "The PodTemplate \"bad\" is invalid: template.spec.containers[0].image: Required value"
        ),
        "{err}"
    );

    // Deleting the controller deletes its pods.
    c.ok(&["delete", "rc", "legacy"]);
    wait_until(
        "the legacy pods are gone",
        Duration::from_secs(60),
        || async { pods_json(&c, &["-l", "app=legacy"]).is_empty() },
    )
    .await?;
    Ok(())
}
