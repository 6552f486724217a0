//! kubectl's typed-client commands (`kubectl create namespace|configmap|secret|deployment|…`)
//! send protobuf bodies (`application/vnd.kubernetes.protobuf`), and client-go does not fall
//! back to JSON on a 415 for protobuf. These run the real kubectl 1.37 against a real kemu
//! API server and check that each object is stored as kubectl meant it.

use crate::common;

use common::Cluster;
use serde_json::{json, Value};

fn get(c: &Cluster, args: &[&str]) -> Value {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", "json"]);
    serde_json::from_str(&c.ok(&all)).expect("kubectl get -o json prints JSON")
}

/// Runs kubectl with its global flags first, so arguments after `--` stay the user's.
fn ok_with_trailing_command(c: &Cluster, args: &[&str]) {
    let out = std::process::Command::new(common::kubectl_path())
        .arg("--cache-dir")
        .arg(c.dir.path().join("kube-cache"))
        .args(args)
        .env("KUBECONFIG", &c.kubeconfig)
        .env("HOME", c.dir.path())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "kubectl {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_sends_protobuf_and_the_objects_are_right() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;

    // Namespace.
    assert!(c
        .ok(&["create", "namespace", "foo"])
        .contains("namespace/foo created"));
    let ns = get(&c, &["namespace", "foo"]);
    assert_eq!(ns["apiVersion"], "v1");
    assert_eq!(ns["kind"], "Namespace");
    assert_eq!(ns["metadata"]["name"], "foo");
    assert!(ns["metadata"]["uid"]
        .as_str()
        .is_some_and(|u| !u.is_empty()));
    assert!(ns["metadata"]["creationTimestamp"].is_string());
    assert_eq!(ns["status"]["phase"], "Active");

    // ConfigMap, in the new namespace.
    c.ok(&[
        "create",
        "configmap",
        "x",
        "--from-literal=a=b",
        "-n",
        "foo",
    ]);
    let cm = get(&c, &["configmap", "x", "-n", "foo"]);
    assert_eq!(cm["metadata"]["namespace"], "foo");
    assert_eq!(cm["data"], json!({"a": "b"}));
    assert!(cm.get("binaryData").is_none());

    // Secret: data is base64 of the literal. (kubectl sends no type; kube-apiserver would
    // default it to Opaque.)
    c.ok(&["create", "secret", "generic", "s", "--from-literal=k=v"]);
    let secret = get(&c, &["secret", "s"]);
    assert_eq!(secret["data"], json!({"k": "dg=="}));
    assert!(secret.get("stringData").is_none());

    // Deployment.
    c.ok(&[
        "create",
        "deployment",
        "web",
        "--image=nginx:1.27",
        "--replicas=3",
        "--port=80",
    ]);
    let d = get(&c, &["deployment", "web"]);
    assert_eq!(d["apiVersion"], "apps/v1");
    assert_eq!(d["metadata"]["labels"], json!({"app": "web"}));
    assert_eq!(d["spec"]["replicas"], 3);
    assert_eq!(
        d["spec"]["selector"],
        json!({"matchLabels": {"app": "web"}})
    );
    assert_eq!(
        d["spec"]["template"]["metadata"]["labels"],
        json!({"app": "web"})
    );
    let container = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["name"], "nginx");
    assert_eq!(container["image"], "nginx:1.27");
    assert_eq!(container["ports"][0]["containerPort"], 80);
    // Server defaults apply: kubectl's zero values must not have arrived as "".
    assert_eq!(container["terminationMessagePath"], "/dev/termination-log");
    assert_eq!(container["imagePullPolicy"], "IfNotPresent");
    assert_eq!(d["spec"]["template"]["spec"]["restartPolicy"], "Always");

    // Service.
    c.ok(&["create", "service", "clusterip", "svc1", "--tcp=80:8080"]);
    let svc = get(&c, &["service", "svc1"]);
    assert_eq!(svc["spec"]["type"], "ClusterIP");
    assert_eq!(svc["spec"]["selector"], json!({"app": "svc1"}));
    let port = &svc["spec"]["ports"][0];
    assert_eq!(port["name"], "80-8080");
    assert_eq!(port["port"], 80);
    assert_eq!(port["targetPort"], 8080);
    assert_eq!(port["protocol"], "TCP");
    assert!(svc["spec"]["clusterIP"]
        .as_str()
        .is_some_and(|ip| !ip.is_empty()));

    // Job. (The harness appends its flags after the arguments, which `--` would swallow.)
    ok_with_trailing_command(
        &c,
        &["create", "job", "j", "--image=busybox", "--", "echo", "hi"],
    );
    let job = get(&c, &["job", "j"]);
    assert_eq!(job["apiVersion"], "batch/v1");
    let pod_spec = &job["spec"]["template"]["spec"];
    assert_eq!(pod_spec["restartPolicy"], "Never");
    assert_eq!(pod_spec["containers"][0]["name"], "j");
    assert_eq!(pod_spec["containers"][0]["image"], "busybox");
    assert_eq!(pod_spec["containers"][0]["command"], json!(["echo", "hi"]));

    // ServiceAccount.
    c.ok(&["create", "serviceaccount", "sa1"]);
    let sa = get(&c, &["serviceaccount", "sa1"]);
    assert_eq!(sa["kind"], "ServiceAccount");
    assert_eq!(sa["metadata"]["namespace"], "default");

    // An existing name is a 409 (the body was read, then refused), not a 415.
    let err = c.fails(&["create", "namespace", "foo"]);
    assert!(err.contains("AlreadyExists"), "{err}");

    Ok(())
}

/// Malformed protobuf is a 400 naming where it broke; a kind without a schema is a 415.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_protobuf_is_a_400() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    const PB: &str = "application/vnd.kubernetes.protobuf";
    // Magic, then a Unknown whose typeMeta claims 100 bytes that are not there.
    let (code, status) = c
        .http("POST", "/api/v1/namespaces", Some(PB), b"k8s\0\x0a\x64\x0a")
        .await?;
    assert_eq!(code, 400, "{status}");
    assert_eq!(status["reason"], "BadRequest");
    assert!(
        status["message"]
            .as_str()
            .unwrap_or("")
            .contains("Unknown.typeMeta"),
        "{status}"
    );

    let (code, status) = c
        .http(
            "POST",
            "/api/v1/namespaces",
            Some(PB),
            b"{\"kind\":\"Namespace\"}",
        )
        .await?;
    assert_eq!(code, 400, "{status}");

    // TypeMeta{v1, Widget}, raw = {}.
    let body = b"k8s\0\x0a\x0c\x0a\x02v1\x12\x06Widget\x12\x00";
    let (code, status) = c.http("POST", "/api/v1/namespaces", Some(PB), body).await?;
    assert_eq!(code, 415, "{status}");
    Ok(())
}
