//! Field management as kubectl sees it: `--show-managed-fields` after create, label and
//! client-side apply; server-side apply conflicts with kubectl's fields (409) and
//! `--force-conflicts`; list elements keyed by every list-map key (container port 80 over TCP
//! and UDP); and moving an object from client-side to server-side apply.
//! The real kubectl against a real kemu API server over a real kemu store.

use crate::common;

use common::Cluster;
use serde_json::{json, Value};

const DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  replicas: REPLICAS
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
";

const SETTINGS: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: default
data:
  mode: MODE
";

fn managed_fields(c: &Cluster, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", "json", "--show-managed-fields"]);
    let object: Value = serde_json::from_str(&c.ok(&all)).expect("kubectl prints JSON");
    object["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn entry<'a>(entries: &'a [Value], manager: &str) -> &'a Value {
    entries
        .iter()
        .find(|e| e["manager"] == manager)
        .unwrap_or_else(|| panic!("no entry for {manager}: {entries:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_write_records_its_manager() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    c.ok(&["create", "deployment", "web", "--image=nginx:1.27"]);
    let entries = managed_fields(&c, &["deployment", "web"]);
    assert_eq!(entries.len(), 1, "{entries:#?}");
    let created = &entries[0];
    assert_eq!(created["manager"], "kubectl-create");
    assert_eq!(created["operation"], "Update");
    assert_eq!(created["apiVersion"], "apps/v1");
    assert_eq!(created["fieldsType"], "FieldsV1");
    assert!(created["time"].as_str().is_some_and(|t| t.ends_with('Z')));
    let fields = &created["fieldsV1"];
    assert_eq!(
        fields["f:metadata"],
        json!({"f:labels": {".": {}, "f:app": {}}})
    );
    assert_eq!(fields["f:spec"]["f:replicas"], json!({}));
    assert_eq!(
        fields["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"nginx\"}"]
            ["f:image"],
        json!({})
    );
    assert!(fields.get("f:status").is_none(), "{fields}");
    // Without the flag kubectl hides them, as it does against Kubernetes.
    let yaml = c.ok(&["get", "deployment", "web", "-o", "yaml"]);
    assert!(!yaml.contains("managedFields"), "{yaml}");

    c.ok(&["label", "deployment", "web", "tier=front"]);
    let entries = managed_fields(&c, &["deployment", "web"]);
    assert_eq!(entries.len(), 2, "{entries:#?}");
    assert_eq!(
        entry(&entries, "kubectl-label")["fieldsV1"],
        json!({"f:metadata": {"f:labels": {"f:tier": {}}}})
    );
    // A label that is already there changes nothing, not even the times.
    c.ok(&["label", "--overwrite", "deployment", "web", "tier=front"]);
    assert_eq!(managed_fields(&c, &["deployment", "web"]), entries);

    let settings = c.file("settings.yaml", &SETTINGS.replace("MODE", "a"));
    c.ok(&["apply", "-f", &settings]);
    let entries = managed_fields(&c, &["configmap", "settings"]);
    let applied = entry(&entries, "kubectl-client-side-apply");
    assert_eq!(applied["operation"], "Update");
    assert_eq!(
        applied["fieldsV1"],
        json!({
            "f:data": {".": {}, "f:mode": {}},
            "f:metadata": {"f:annotations": {
                ".": {}, "f:kubectl.kubernetes.io/last-applied-configuration": {}
            }}
        })
    );

    // Without fieldManager the manager is the User-Agent's product name.
    let raw = c.file(
        "raw.json",
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"raw"},"data":{"k":"v"}}"#,
    );
    c.ok(&[
        "create",
        "--raw",
        "/api/v1/namespaces/default/configmaps",
        "-f",
        &raw,
    ]);
    let entries = managed_fields(&c, &["configmap", "raw"]);
    assert_eq!(entry(&entries, "kubectl")["operation"], "Update");

    // fieldManager is checked as kube-apiserver checks it.
    let long = "m".repeat(129);
    let (code, status) = c
        .http(
            "POST",
            &format!("/api/v1/namespaces/default/configmaps?fieldManager={long}"),
            Some("application/json"),
            br#"{"metadata":{"name":"long"}}"#,
        )
        .await?;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["message"],
        "CreateOptions.meta.k8s.io \"\" is invalid: fieldManager: Too long: may not be more than 128 bytes"
    );
    assert_eq!(status["details"]["kind"], "CreateOptions");
    assert_eq!(
        status["details"]["causes"][0]["reason"],
        "FieldValueTooLong"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_conflicts_and_forces() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let one = c.file("one.yaml", &DEPLOYMENT.replace("REPLICAS", "1"));
    let three = c.file("three.yaml", &DEPLOYMENT.replace("REPLICAS", "3"));
    c.ok(&["apply", "-f", &one]);

    let err = c.fails(&[
        "apply",
        "--server-side",
        "--field-manager=rollout",
        "-f",
        &three,
    ]);
    assert!(
        err.contains("Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using apps/v1: .spec.replicas"),
        "{err}"
    );
    assert!(err.contains("--force-conflicts"), "{err}");

    // The same values are shared, not contested; kubectl then moves client-side apply's
    // fields to its server-side manager (with a JSON patch of managedFields).
    c.ok(&[
        "apply",
        "--server-side",
        "--field-manager=rollout",
        "-f",
        &one,
    ]);
    let entries = managed_fields(&c, &["deployment", "web"]);
    assert_eq!(entries.len(), 1, "{entries:#?}");
    assert_eq!(entries[0]["manager"], "rollout");
    assert_eq!(entries[0]["operation"], "Apply");
    assert_eq!(entries[0]["fieldsV1"]["f:spec"]["f:replicas"], json!({}));

    // Another updater takes spec.replicas; applying a different value conflicts with it...
    c.ok(&[
        "patch",
        "deployment",
        "web",
        "-p",
        r#"{"spec":{"replicas":2}}"#,
    ]);
    let err = c.fails(&[
        "apply",
        "--server-side",
        "--field-manager=rollout",
        "-f",
        &three,
    ]);
    assert!(
        err.contains("Apply failed with 1 conflict: conflict with \"kubectl-patch\" using apps/v1: .spec.replicas"),
        "{err}"
    );
    // ...until forced: the field moves to the applier.
    let out = c.ok(&[
        "apply",
        "--server-side",
        "--field-manager=rollout",
        "--force-conflicts",
        "-f",
        &three,
    ]);
    assert!(
        out.contains("deployment.apps/web serverside-applied"),
        "{out}"
    );
    let entries = managed_fields(&c, &["deployment", "web"]);
    assert!(
        entries.iter().all(|e| e["manager"] != "kubectl-patch"),
        "{entries:#?}"
    );
    assert_eq!(
        c.ok(&[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.spec.replicas}"
        ]),
        "3"
    );

    // The Status of a conflict, as kube-apiserver writes it.
    let (code, status) = c
        .http(
            "PATCH",
            "/apis/apps/v1/namespaces/default/deployments/web?fieldManager=other",
            Some("application/apply-patch+yaml"),
            DEPLOYMENT.replace("REPLICAS", "5").as_bytes(),
        )
        .await?;
    assert_eq!(code, 409, "{status}");
    assert_eq!(
        status,
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Apply failed with 1 conflict: conflict with \"rollout\": .spec.replicas",
            "reason": "Conflict",
            "details": {"causes": [{
                "reason": "FieldManagerConflict",
                "message": "conflict with \"rollout\"",
                "field": ".spec.replicas"
            }]},
            "code": 409
        })
    );
    Ok(())
}

/// A Deployment `dual` whose container serves port 80 over `TCP` and `UDP`, with these names.
fn dual_stack(tcp_name: &str, udp_name: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: dual
  namespace: default
spec:
  selector:
    matchLabels:
      app: dual
  template:
    metadata:
      labels:
        app: dual
    spec:
      containers:
      - name: dns
        image: coredns:1.11
        ports:
        - containerPort: 80
          protocol: TCP
          name: {tcp_name}
        - containerPort: 80
          protocol: UDP
          name: {udp_name}
"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_keys_ports_by_port_and_protocol() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let both = c.file("both.yaml", &dual_stack("web", "quic"));
    c.ok(&["apply", "--server-side", "--field-manager=a", "-f", &both]);
    let ports = || -> Value {
        let text = c.ok(&[
            "get",
            "deployment",
            "dual",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].ports}",
        ]);
        serde_json::from_str(&text).expect("kubectl prints the ports as JSON")
    };
    // (protocol, name) of each port, in order.
    let names = |ports: &Value| -> Value {
        let ports = ports.as_array().cloned().unwrap_or_default();
        ports
            .iter()
            .map(|p| json!([p["protocol"], p["name"]]))
            .collect()
    };
    let got = ports();
    assert_eq!(
        names(&got),
        json!([["TCP", "web"], ["UDP", "quic"]]),
        "{got}"
    );
    let entries = managed_fields(&c, &["deployment", "dual"]);
    let owned = &entry(&entries, "a")["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]
        ["k:{\"name\":\"dns\"}"]["f:ports"];
    for key in [
        r#"k:{"containerPort":80,"protocol":"TCP"}"#,
        r#"k:{"containerPort":80,"protocol":"UDP"}"#,
    ] {
        assert_eq!(owned[key]["f:name"], json!({}), "{owned}");
    }

    // Another applier renaming the UDP port conflicts on that port's name alone...
    let renamed = c.file("renamed.yaml", &dual_stack("web", "h3"));
    let err = c.fails(&[
        "apply",
        "--server-side",
        "--field-manager=b",
        "-f",
        &renamed,
    ]);
    assert!(
        err.contains(
            "Apply failed with 1 conflict: conflict with \"a\": .spec.template.spec.containers[name=\"dns\"].ports[containerPort=80,protocol=\"UDP\"].name"
        ),
        "{err}"
    );
    // ...and forced, changes that port only.
    c.ok(&[
        "apply",
        "--server-side",
        "--field-manager=b",
        "--force-conflicts",
        "-f",
        &renamed,
    ]);
    let got = ports();
    assert_eq!(names(&got), json!([["TCP", "web"], ["UDP", "h3"]]), "{got}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_side_apply_moves_to_server_side() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let first = c.file("a.yaml", &SETTINGS.replace("MODE", "a"));
    let second = c.file("b.yaml", &SETTINGS.replace("MODE", "b"));
    let third = c.file("c.yaml", &SETTINGS.replace("MODE", "c"));
    c.ok(&["apply", "-f", &first]);

    let out = c.ok(&["apply", "--server-side", "-f", &second]);
    assert!(
        out.contains("configmap/settings serverside-applied"),
        "{out}"
    );
    let entries = managed_fields(&c, &["configmap", "settings"]);
    let ssa = entry(&entries, "kubectl");
    assert_eq!(ssa["operation"], "Apply");
    assert_eq!(ssa["fieldsV1"]["f:data"]["f:mode"], json!({}));
    assert!(
        entries
            .iter()
            .filter(|e| e["manager"] == "kubectl-client-side-apply")
            .all(|e| e["fieldsV1"]["f:data"].get("f:mode").is_none()),
        "{entries:#?}"
    );
    let settings: Value =
        serde_json::from_str(&c.ok(&["get", "configmap", "settings", "-o", "json"]))?;
    assert_eq!(settings["data"]["mode"], "b");
    let last_applied: Value = serde_json::from_str(
        settings["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
            .unwrap_or_default(),
    )?;
    assert_eq!(last_applied["data"]["mode"], "b");

    // And server-side again (the annotation follows), then back to client-side: both work.
    c.ok(&["apply", "--server-side", "-f", &third]);
    let settings: Value =
        serde_json::from_str(&c.ok(&["get", "configmap", "settings", "-o", "json"]))?;
    let last_applied: Value = serde_json::from_str(
        settings["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
            .unwrap_or_default(),
    )?;
    assert_eq!(last_applied["data"]["mode"], "c");
    c.ok(&["apply", "-f", &first]);
    assert_eq!(
        c.ok(&[
            "get",
            "configmap",
            "settings",
            "-o",
            "jsonpath={.data.mode}"
        ]),
        "a"
    );
    Ok(())
}
