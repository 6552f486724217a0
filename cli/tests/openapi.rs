//! The OpenAPI documents through the real kubectl 1.37: `kubectl explain` to any depth over
//! `/openapi/v3`, client-side `kubectl apply` merging lists by the schemas' merge keys,
//! `kubectl diff`, server-side apply, `/openapi/v2` as a Swagger 2.0 document (JSON, and the
//! protobuf kubectl reads), and aggregated discovery.

use crate::common;

use common::Cluster;
use serde_json::Value;

const DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: app
        image: nginx:IMAGE
        ports:
        - containerPort: 80
"#;

fn deployment(image: &str) -> String {
    DEPLOYMENT.replace("IMAGE", image)
}

fn containers(c: &Cluster) -> Vec<(String, String)> {
    let d: Value = serde_json::from_str(&c.ok(&["get", "deploy", "web", "-o", "json"]))
        .expect("kubectl prints JSON");
    d["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("containers")
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap_or_default().to_string(),
                c["image"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_explain_reads_complete_schemas() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;

    let message = c.ok(&["explain", "pods.status.message"]);
    assert!(message.contains("FIELD: message <string>"), "{message}");
    assert!(message.contains("human readable message"), "{message}");

    let strategy = c.ok(&["explain", "deployments.spec.strategy", "--recursive"]);
    for field in ["rollingUpdate", "maxSurge", "maxUnavailable", "type"] {
        assert!(strategy.contains(field), "{field} missing:\n{strategy}");
    }
    assert!(strategy.contains("<IntOrString>"), "{strategy}");

    let job = c.ok(&["explain", "jobs", "--api-version=batch/v1"]);
    assert!(job.contains("KIND:       Job"), "{job}");
    assert!(job.contains("VERSION:    v1"), "{job}");
    assert!(job.contains("GROUP:      batch"), "{job}");

    let resources = c.ok(&[
        "explain",
        "deploy.spec.template.spec.containers.resources",
        "--recursive",
    ]);
    for field in ["limits", "requests", "claims"] {
        assert!(resources.contains(field), "{field} missing:\n{resources}");
    }
    let time = c.ok(&["explain", "pods.metadata.creationTimestamp"]);
    assert!(time.contains("<string>"), "{time}");

    // The same from /openapi/v2, which kubectl reads in protobuf.
    let v2 = c.ok(&[
        "explain",
        "pods.spec.containers.image",
        "--output=plaintext-openapiv2",
    ]);
    assert!(v2.contains("FIELD:    image <string>"), "{v2}");
    assert!(v2.contains("Container image name"), "{v2}");

    // Every served resource explains, with all its fields.
    let resources = c.ok(&["api-resources", "--no-headers"]);
    for line in resources.lines() {
        let columns: Vec<&str> = line.split_whitespace().collect();
        let Some(api_version) = columns
            .iter()
            .find(|c| **c == "v1" || c.contains('/'))
            .map(|v| format!("--api-version={v}"))
        else {
            panic!("no API version in {line:?}");
        };
        let explained = c.ok(&["explain", columns[0], &api_version, "--recursive"]);
        assert!(explained.contains("FIELDS:"), "{line}:\n{explained}");
    }

    let unknown = c.fails(&["explain", "pods.status.nope"]);
    assert!(unknown.contains("nope"), "{unknown}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_diff_and_server_side_apply_use_the_schemas() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;

    c.ok_stdin(&["apply", "-f", "-"], &deployment("1.27"));
    // A container added outside the manifest: client-side apply merges containers by name
    // (the schema's merge key), so the next apply keeps it.
    c.ok(&[
        "patch",
        "deploy",
        "web",
        "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"busybox"}]}}}}"#,
    ]);
    assert_eq!(containers(&c).len(), 2);

    let manifest = c.file("web.yaml", &deployment("1.28"));
    let diff = c.kubectl(&["diff", "-f", &manifest]);
    let shown = String::from_utf8_lossy(&diff.stdout);
    assert_eq!(
        diff.status.code(),
        Some(1),
        "{shown}\n{}",
        String::from_utf8_lossy(&diff.stderr)
    );
    assert!(
        shown
            .lines()
            .any(|l| l.starts_with('+') && l.contains("image: nginx:1.28")),
        "{shown}"
    );
    // The container added outside the manifest stays.
    assert!(
        !shown
            .lines()
            .any(|l| l.starts_with('-') && l.contains("busybox")),
        "{shown}"
    );

    let applied = c.kubectl(&["apply", "-f", &manifest]);
    assert!(applied.status.success());
    // kubectl warns when it cannot build its patch from the OpenAPI v3 schemas.
    let warnings = String::from_utf8_lossy(&applied.stderr);
    assert!(!warnings.contains("openapi"), "{warnings}");
    let mut now = containers(&c);
    now.sort();
    assert_eq!(
        now,
        vec![
            ("app".to_string(), "nginx:1.28".to_string()),
            ("sidecar".to_string(), "busybox".to_string())
        ]
    );

    let server_side = c.ok(&[
        "apply",
        "--server-side",
        "--force-conflicts",
        "-f",
        &c.file("web2.yaml", &deployment("1.29")),
    ]);
    assert!(server_side.contains("serverside-applied"), "{server_side}");
    assert!(containers(&c).contains(&("app".to_string(), "nginx:1.29".to_string())));
    // Managed fields name a port by every list-map key, its protocol defaulted.
    let d: Value = serde_json::from_str(&c.ok(&[
        "get",
        "deploy",
        "web",
        "-o",
        "json",
        "--show-managed-fields",
    ]))?;
    // Entries sort by operation, then by the second they were written: kubectl's own entry may
    // come before or after the one kept for the last-applied annotation.
    let applied = d["metadata"]["managedFields"]
        .as_array()
        .and_then(|e| {
            e.iter()
                .find(|e| e["operation"] == "Apply" && e["manager"] == "kubectl")
        })
        .expect("kubectl's Apply entry");
    let ports = &applied["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"][r#"k:{"name":"app"}"#]
        ["f:ports"];
    assert!(
        ports[r#"k:{"containerPort":80,"protocol":"TCP"}"#].is_object(),
        "{applied}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_v2_is_a_swagger_document() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let (code, v2) = c.http("GET", "/openapi/v2", None, b"").await?;
    assert_eq!(code, 200);
    assert_eq!(v2["swagger"], "2.0");
    let pod_status = &v2["definitions"]["io.k8s.api.core.v1.PodStatus"];
    assert_eq!(pod_status["properties"]["message"]["type"], "string");
    assert_eq!(
        v2["definitions"]["io.k8s.api.apps.v1.Deployment"]["x-kubernetes-group-version-kind"][0]
            ["kind"],
        "Deployment"
    );
    assert!(v2["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"].is_object());

    let (code, root) = c.http("GET", "/openapi/v3", None, b"").await?;
    assert_eq!(code, 200);
    let url = root["paths"]["apis/batch/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let (code, batch) = c.http("GET", &url, None, b"").await?;
    assert_eq!(code, 200);
    assert!(batch["components"]["schemas"]["io.k8s.api.batch.v1.JobSpec"].is_object());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_discovers_through_aggregated_discovery() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let out = c.kubectl(&["api-resources", "-v=8"]);
    let (stdout, log) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{log}");
    // One request each for /api and /apis, answered with the aggregated list.
    assert!(
        log.contains("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"),
        "{log}"
    );
    assert!(log.contains("/apis?"), "{log}");
    assert!(!log.contains("/apis/apps/v1?"), "{log}");
    for line in [
        "deployments",
        "deploy",
        "apps/v1",
        "pods",
        "po",
        "Pod",
        "leases",
        "coordination.k8s.io/v1",
    ] {
        assert!(stdout.contains(line), "{line} missing:\n{stdout}");
    }
    let namespaced = c.ok(&["api-resources", "--namespaced=false", "-o", "name"]);
    assert!(namespaced.lines().any(|l| l == "nodes"), "{namespaced}");
    assert!(!namespaced.lines().any(|l| l == "pods"), "{namespaced}");

    c.ok(&["create", "deployment", "web", "--image=nginx"]);
    let all = c.ok(&["get", "all"]);
    assert!(all.contains("deployment.apps/web"), "{all}");
    Ok(())
}
