//! What clients see byte for byte and field for field: bodies in kube-apiserver's field order
//! with its trailing newline, no-op writes that keep the resourceVersion (kubectl's
//! "(no change)"), unconditional updates, and the defaulting kube-apiserver does on write.
//! The real kubectl 1.37 against a real kemu API server over a real kemu store.

use crate::common;

use common::Cluster;
use serde_json::Value;

const SETTINGS: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: default
data:
  mode: a<b
";

const SECRET: &str = "apiVersion: v1
kind: Secret
metadata:
  name: login
stringData:
  user: admin
data:
  token: b2xk
";

const POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: web
    image: nginx:1.27
    env:
    - name: POD_NAME
      valueFrom:
        fieldRef:
          fieldPath: metadata.name
    volumeMounts:
    - name: scratch
      mountPath: /scratch
  volumes:
  - name: scratch
";

const SERVICE_AND_SLICE: &str = "apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector:
    app: web
  ports:
  - port: 80
    targetPort: 8080
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-abc12
  labels:
    kubernetes.io/service-name: web
addressType: IPv4
ports:
- port: 8080
endpoints:
- addresses:
  - 10.244.0.5
  conditions:
    ready: true
";

fn get_json(c: &Cluster, args: &[&str]) -> Value {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", "json"]);
    serde_json::from_str(&c.ok(&all)).expect("kubectl get -o json prints JSON")
}

fn resource_version(object: &Value) -> String {
    object["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_are_written_as_kube_apiserver_writes_them() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    c.ok_stdin(&["create", "-f", "-"], SETTINGS);
    let admin = c.api.admin();

    let (code, body) = admin
        .get("/api/v1/namespaces/default/configmaps/settings")
        .await?;
    assert_eq!(code, 200, "{body}");
    assert!(
        body.starts_with(r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"settings","namespace":"default","uid":""#),
        "{body}"
    );
    // kubectl create's managedFields entry, in ManagedFieldsEntry's field order.
    assert!(
        body.contains(r#"Z","managedFields":[{"manager":"kubectl-create","operation":"Update","apiVersion":"v1","time":""#),
        "{body}"
    );
    assert!(
        body.ends_with("Z\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:data\":{\".\":{},\"f:mode\":{}}}}]},\"data\":{\"mode\":\"a\\u003cb\"}}\n"),
        "{body}"
    );

    let (code, body) = admin
        .get("/api/v1/namespaces/default/configmaps/nope")
        .await?;
    assert_eq!(code, 404);
    assert_eq!(
        body,
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"configmaps \\\"nope\\\" not found\",\"reason\":\"NotFound\",\"details\":{\"name\":\"nope\",\"kind\":\"configmaps\"},\"code\":404}\n"
    );

    let (code, body) = admin.get("/api/v1/namespaces/default/configmaps").await?;
    assert_eq!(code, 200, "{body}");
    assert!(
        body.starts_with(
            r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":""#
        ),
        "{body}"
    );
    assert!(
        body.contains(r#""},"items":[{"metadata":{"name":"settings","namespace":"default","#),
        "{body}"
    );
    assert!(body.ends_with("}]}\n"), "{body}");

    let api = c.ok(&["get", "--raw", "/api"]);
    assert!(
        api.starts_with(r#"{"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":[{"clientCIDR":"0.0.0.0/0","serverAddress":""#),
        "{api}"
    );
    let apis = c.ok(&["get", "--raw", "/apis"]);
    assert!(
        apis.starts_with(r#"{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":""#),
        "{apis}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_that_change_nothing_keep_the_resource_version() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    c.ok_stdin(&["create", "-f", "-"], SETTINGS);
    let before = resource_version(&get_json(&c, &["configmap", "settings"]));

    let out = c.ok(&[
        "patch",
        "configmap",
        "settings",
        "-p",
        r#"{"data":{"mode":"a<b"}}"#,
    ]);
    assert_eq!(out, "configmap/settings patched (no change)\n");
    let out = c.ok(&[
        "patch",
        "configmap",
        "settings",
        "--type=merge",
        "-p",
        r#"{"metadata":{"labels":null}}"#,
    ]);
    assert_eq!(out, "configmap/settings patched (no change)\n");
    assert_eq!(
        resource_version(&get_json(&c, &["configmap", "settings"])),
        before
    );

    let out = c.ok(&[
        "patch",
        "configmap",
        "settings",
        "-p",
        r#"{"data":{"mode":"b"}}"#,
    ]);
    assert_eq!(out, "configmap/settings patched\n");
    let after = resource_version(&get_json(&c, &["configmap", "settings"]));
    assert_ne!(after, before);

    // A replace whose resourceVersion is "0" (or absent) is unconditional.
    let replaced = SETTINGS.replace(
        "  namespace: default\n",
        "  namespace: default\n  resourceVersion: \"0\"\n",
    );
    let out = c.ok_stdin(&["replace", "-f", "-"], &replaced);
    assert_eq!(out, "configmap/settings replaced\n");
    let (code, body) = c
        .api
        .admin()
        .request(
            "PUT",
            "/api/v1/namespaces/default/configmaps/settings",
            Some("application/json"),
            br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings"},"data":{"mode":"c"}}"#,
        )
        .await?;
    assert_eq!(code, 200, "{body}");
    // A stale resourceVersion is still a conflict.
    let stale = SETTINGS.replace(
        "  namespace: default\n",
        &format!("  namespace: default\n  resourceVersion: \"{before}\"\n"),
    );
    let path = c.file("stale.yaml", &stale);
    let err = c.fails(&["replace", "-f", &path]);
    assert!(err.contains("the object has been modified"), "{err}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_are_defaulted_as_kube_apiserver_defaults_them() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;

    c.ok_stdin(&["apply", "-f", "-"], SECRET);
    let secret = get_json(&c, &["secret", "login"]);
    assert_eq!(secret["data"]["user"], "YWRtaW4=");
    assert_eq!(secret["data"]["token"], "b2xk");
    assert!(secret.get("stringData").is_none(), "{secret}");
    assert_eq!(secret["type"], "Opaque");

    c.ok_stdin(&["create", "-f", "-"], POD);
    let pod = get_json(&c, &["pod", "web"]);
    assert_eq!(
        pod["spec"]["volumes"][0],
        serde_json::json!({"name": "scratch", "emptyDir": {}})
    );
    assert_eq!(
        pod["spec"]["containers"][0]["env"][0]["valueFrom"]["fieldRef"],
        serde_json::json!({"apiVersion": "v1", "fieldPath": "metadata.name"})
    );

    // pods/status prints as pods do.
    let status = c.ok(&["get", "pod", "web", "--subresource=status"]);
    let header: Vec<&str> = status
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(header, ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
    assert!(status.contains("web"), "{status}");

    // An EndpointSlice port without a name is described, as the EndpointSlice controller's are.
    c.ok_stdin(&["apply", "-f", "-"], SERVICE_AND_SLICE);
    let slice = get_json(&c, &["endpointslice", "web-abc12"]);
    assert_eq!(
        slice["ports"][0],
        serde_json::json!({"name": "", "port": 8080, "protocol": "TCP"})
    );
    let described = c.ok(&["describe", "service", "web"]);
    assert!(described.contains("10.244.0.5:8080"), "{described}");
    Ok(())
}

/// Unknown and repeated fields: kubectl prints the `Warning` headers of the default `Warn`
/// mode, and `Strict` refuses both in kube-apiserver's words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_and_repeated_fields_are_warned_of_or_refused() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let body = |name: &str| {
        c.file(
            &format!("{name}.json"),
            &format!(
                r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","name":"{name}"}},"data":{{"a":"1","a":"2"}},"bogus":1}}"#
            ),
        )
    };
    let path = "/api/v1/namespaces/default/configmaps";
    let warned = body("warned");
    let out = c.kubectl(&["create", "--raw", path, "-f", &warned]);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stderr}");
    for warning in [
        r#"Warning: duplicate field "metadata.name""#,
        r#"Warning: duplicate field "data.a""#,
        r#"Warning: unknown field "bogus""#,
    ] {
        assert!(stderr.contains(warning), "{warning} missing from: {stderr}");
    }
    let kept = c.ok(&[
        "get",
        "configmap",
        "warned",
        "-n",
        "default",
        "-o",
        "jsonpath={.data.a}",
    ]);
    assert_eq!(kept, "2", "the last of repeated keys wins");

    let refused = body("refused");
    let strict = format!("{path}?fieldValidation=Strict");
    let out = c.kubectl(&["create", "--raw", &strict, "-f", &refused]);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "Strict accepted repeated keys");
    assert!(
        stderr.contains(r#"ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: duplicate field "metadata.name", duplicate field "data.a", unknown field "bogus""#),
        "{stderr}"
    );
    let out = c.kubectl(&["get", "configmap", "refused", "-n", "default"]);
    assert!(!out.status.success(), "a refused write stored nothing");

    let ignored = body("ignored");
    let quiet = format!("{path}?fieldValidation=Ignore");
    let out = c.kubectl(&["create", "--raw", &quiet, "-f", &ignored]);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("Warning"), "{stderr}");
    Ok(())
}
