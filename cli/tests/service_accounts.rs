//! Service accounts as a cluster has them, end to end with the real kubectl: the `default`
//! ServiceAccount and the `kube-root-ca.crt` ConfigMap in every namespace (each put back when
//! deleted or edited), a pod created at once in a new namespace, and the `kubernetes` Service
//! whose endpoints list every API server replica; `kubectl create token` and its token acting
//! as the account, as RBAC allows; the `kube-api-access-*` token volume in a pod (and none when
//! the pod or its account opts out), its files in the container, and a pod waiting for a
//! missing ConfigMap with repeated FailedMount events counted on one event.

use crate::common;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{kemu_exe, wait_until, Cluster};
use serde_json::Value;
use transport::pki::{self, CertSpec};

/// The controller manager, killed when dropped.
struct Controllers(Child);

impl Drop for Controllers {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_controllers(c: &Cluster) -> anyhow::Result<Controllers> {
    let certs = c.store.certs_dir();
    if !certs.join("controllers.crt").exists() {
        pki::issue(
            &certs,
            &CertSpec {
                name: "controllers".into(),
                organizations: vec!["system:kube-controller-manager".into()],
                sans: vec![],
            },
        )?;
    }
    let log = std::fs::File::create(c.dir.path().join("controllers.log"))?;
    let child = Command::new(kemu_exe())
        .args(["controllers", "--apiserver", &c.api.quic.to_string()])
        .arg("--certs")
        .arg(&certs)
        .args(["--identity", "controllers", "--no-leader-elect"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()?;
    Ok(Controllers(child))
}

/// `kubectl get ARGS -o json`, `None` when it fails (not there yet).
fn get(c: &Cluster, args: &[&str]) -> Option<Value> {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", "json"]);
    let out = c.kubectl(&all);
    if !out.status.success() {
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

async fn eventually(c: &Cluster, why: &str, args: &[&str], check: impl Fn(&Value) -> bool) {
    let result = wait_until(why, Duration::from_secs(20), || {
        let found = get(c, args);
        let ok = found.as_ref().is_some_and(&check);
        async move { ok }
    })
    .await;
    if let Err(e) = result {
        let log = std::fs::read_to_string(c.dir.path().join("controllers.log")).unwrap_or_default();
        panic!("{e}\ncontrollers log:\n{log}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_namespace_has_its_account_and_the_root_ca() -> anyhow::Result<()> {
    let c = Cluster::start_with_api_args(
        1,
        &["--enable-admission-plugins=ServiceAccount".to_string()],
    )
    .await?;
    let _controllers = start_controllers(&c)?;
    let ca = std::fs::read_to_string(c.store.certs_dir().join("ca.crt"))?;

    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        eventually(
            &c,
            "the default account exists",
            &["sa", "default", "-n", ns],
            |sa| sa["metadata"]["namespace"] == ns,
        )
        .await;
        eventually(
            &c,
            "the root CA is published",
            &["cm", "kube-root-ca.crt", "-n", ns],
            |cm| {
                cm["data"]["ca.crt"] == ca.as_str()
                    && cm["metadata"]["annotations"]["kubernetes.io/description"]
                        .as_str()
                        .is_some_and(|d| d.starts_with("Contains a CA bundle"))
            },
        )
        .await;
    }

    // A pod created right after its namespace: admission waits for the account.
    c.ok(&["create", "namespace", "apps"]);
    c.ok(&["run", "web", "--image=nginx", "-n", "apps"]);
    let pod = get(&c, &["pod", "web", "-n", "apps"]).expect("the pod exists");
    assert_eq!(pod["spec"]["serviceAccountName"], "default");

    // Deleted or edited, both come back as they were.
    let uid =
        get(&c, &["sa", "default", "-n", "apps"]).expect("account")["metadata"]["uid"].clone();
    c.ok(&["delete", "sa", "default", "-n", "apps"]);
    eventually(
        &c,
        "the default account is made again",
        &["sa", "default", "-n", "apps"],
        |sa| sa["metadata"]["uid"] != uid,
    )
    .await;
    c.ok(&[
        "patch",
        "cm",
        "kube-root-ca.crt",
        "-n",
        "apps",
        "-p",
        r#"{"data":{"ca.crt":"tampered","extra":"x"}}"#,
    ]);
    eventually(
        &c,
        "the root CA is put back",
        &["cm", "kube-root-ca.crt", "-n", "apps"],
        |cm| cm["data"] == serde_json::json!({"ca.crt": ca}),
    )
    .await;
    c.ok(&["delete", "cm", "kube-root-ca.crt", "-n", "apps"]);
    eventually(
        &c,
        "the root CA is published again",
        &["cm", "kube-root-ca.crt", "-n", "apps"],
        |cm| cm["data"]["ca.crt"] == ca.as_str(),
    )
    .await;

    // A pod naming an account nobody made is refused in kube-apiserver's words.
    let err = c.fails(&[
        "run",
        "robot",
        "--image=nginx",
        "-n",
        "apps",
        "--overrides",
        r#"{"spec":{"serviceAccountName":"robot"}}"#,
    ]);
    assert!(
        err.contains(r#"pods "robot" is forbidden: error looking up service account apps/robot: serviceaccount "robot" not found"#),
        "{err}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kubernetes_service_lists_the_api_servers() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let port = c.api.http.port();

    let svc = get(&c, &["svc", "kubernetes"]).expect("the kubernetes service");
    assert_eq!(svc["spec"]["clusterIP"], "10.96.0.1");
    assert_eq!(svc["spec"]["type"], "ClusterIP");
    assert_eq!(
        svc["spec"]["ports"],
        serde_json::json!([{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}])
    );
    assert_eq!(svc["metadata"]["labels"]["provider"], "kubernetes");
    let table = c.ok(&["get", "svc", "kubernetes"]);
    assert!(
        table.contains("10.96.0.1") && table.contains("443/TCP"),
        "{table}"
    );

    eventually(
        &c,
        "the slice lists the server",
        &["endpointslice", "kubernetes"],
        |s| {
            s["endpoints"]
                == serde_json::json!([{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}])
                && s["ports"][0]["port"] == port
                && s["metadata"]["labels"]["kubernetes.io/service-name"] == "kubernetes"
        },
    )
    .await;
    let endpoints = c.ok(&["get", "endpoints", "kubernetes"]);
    assert!(
        endpoints.contains(&format!("127.0.0.1:{port}")),
        "{endpoints}"
    );

    // A second replica joins the endpoints, and leaves them when it stops.
    let second =
        cluster::process::LocalApiServer::start(kemu_exe(), &c.store, "apiserver-2").await?;
    let other = second.http.port();
    let both = |e: &Value| {
        let text = e.to_string();
        text.contains(&format!("\"port\":{port}")) && text.contains(&format!("\"port\":{other}"))
    };
    eventually(
        &c,
        "both servers are listed",
        &["endpoints", "kubernetes"],
        both,
    )
    .await;
    eventually(
        &c,
        "the second server has its slice",
        &["endpointslice", &format!("kubernetes-{}", port.max(other))],
        |s| s["ports"][0]["port"] == port.max(other),
    )
    .await;
    second.stop().await;
    eventually(
        &c,
        "the stopped server is gone",
        &["endpoints", "kubernetes"],
        |e| !e.to_string().contains(&format!("\"port\":{other}")),
    )
    .await;

    // Deleted, the Service comes back.
    c.ok(&["delete", "svc", "kubernetes"]);
    eventually(
        &c,
        "the service is made again",
        &["svc", "kubernetes"],
        |s| s["spec"]["clusterIP"] == "10.96.0.1",
    )
    .await;
    Ok(())
}

/// A kubeconfig for the cluster with `token` as the credential.
fn token_kubeconfig(c: &Cluster, token: &str) -> std::path::PathBuf {
    let certs = c.api.certs_dir().display().to_string();
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: kemu\n  cluster:\n    server: {}\n    certificate-authority: {certs}/ca.crt\nusers:\n- name: u\n  user:\n    token: {token}\ncontexts:\n- name: kemu\n  context:\n    cluster: kemu\n    user: u\ncurrent-context: kemu\n",
        c.api.url()
    );
    let path = c.dir.path().join("robot.kubeconfig");
    std::fs::write(&path, text).expect("writes a kubeconfig");
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_from_kubectl_create_token_acts_as_its_account() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    c.ok(&["create", "namespace", "dev"]);
    c.ok(&["create", "serviceaccount", "robot", "-n", "dev"]);
    c.ok(&["run", "web", "--image=nginx", "-n", "dev"]);
    let token = c
        .ok(&["create", "token", "robot", "-n", "dev"])
        .trim()
        .to_string();
    assert_eq!(token.split('.').count(), 3, "a JWT: {token}");
    let robot = token_kubeconfig(&c, &token);

    let whoami =
        String::from_utf8_lossy(&c.kubectl_as(&robot, &["auth", "whoami"]).stdout).into_owned();
    for expected in [
        "system:serviceaccount:dev:robot",
        "system:serviceaccounts:dev",
        "system:authenticated",
    ] {
        assert!(
            whoami.contains(expected),
            "{expected} missing from:\n{whoami}"
        );
    }

    // Nothing is allowed before a binding says so.
    let out = c.kubectl_as(&robot, &["get", "pods", "-n", "dev"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(r#"pods is forbidden: User "system:serviceaccount:dev:robot" cannot list resource "pods" in API group "" in the namespace "dev""#),
        "{err}"
    );
    c.ok(&[
        "create",
        "role",
        "pod-reader",
        "--verb=get,list",
        "--resource=pods",
        "-n",
        "dev",
    ]);
    c.ok(&[
        "create",
        "rolebinding",
        "robot-reads",
        "--role=pod-reader",
        "--serviceaccount=dev:robot",
        "-n",
        "dev",
    ]);
    wait_until(
        "the binding lets the account list pods",
        Duration::from_secs(10),
        || {
            let out = c.kubectl_as(&robot, &["get", "pods", "-n", "dev", "-o", "name"]);
            let ok =
                out.status.success() && String::from_utf8_lossy(&out.stdout).contains("pod/web");
            async move { ok }
        },
    )
    .await?;
    // Only what the role grants.
    let out = c.kubectl_as(&robot, &["get", "pods", "-n", "default"]);
    assert!(!out.status.success());

    // A life under ten minutes is refused; deleting the account revokes its tokens.
    let err = c.fails(&["create", "token", "robot", "-n", "dev", "--duration=5m"]);
    assert!(
        err.contains("spec.expirationSeconds: Invalid value: 300: may not specify a duration less than 10 minutes"),
        "{err}"
    );
    let err = c.fails(&["create", "token", "nobody", "-n", "dev"]);
    assert!(
        err.contains(r#"serviceaccounts "nobody" not found"#),
        "{err}"
    );
    c.ok(&["delete", "serviceaccount", "robot", "-n", "dev"]);
    wait_until(
        "the deleted account's token stops working",
        Duration::from_secs(10),
        || {
            let out = c.kubectl_as(&robot, &["get", "pods", "-n", "dev"]);
            let refused = String::from_utf8_lossy(&out.stderr).contains("Unauthorized");
            async move { refused }
        },
    )
    .await?;
    Ok(())
}

const TOKEN_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

fn pod_manifest(name: &str, spec_extra: &str, container_extra: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  nodeName: node-0\n{spec_extra}  containers:\n  - name: app\n    image: registry.k8s.io/pause:3.10\n{container_extra}"
    )
}

fn phase(c: &Cluster, name: &str) -> String {
    get(c, &["pod", name])
        .and_then(|p| p["status"]["phase"].as_str().map(str::to_string))
        .unwrap_or_default()
}

async fn wait_running(c: &Cluster, name: &str) -> anyhow::Result<()> {
    wait_until(&format!("{name} runs"), Duration::from_secs(30), || {
        let running = phase(c, name) == "Running";
        async move { running }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_mount_their_account_token_as_kube_apiserver_adds_it() -> anyhow::Result<()> {
    let c = Cluster::start_with_api_args(
        1,
        &["--enable-admission-plugins=ServiceAccount".to_string()],
    )
    .await?;
    let _controllers = start_controllers(&c)?;
    let _host = common::control_plane::start_node_host(&c, 1, 1, "node-")?;
    eventually(&c, "the default account exists", &["sa", "default"], |_| {
        true
    })
    .await;
    eventually(
        &c,
        "the root CA is published",
        &["cm", "kube-root-ca.crt"],
        |_| true,
    )
    .await;

    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod_manifest(
            "web",
            "  initContainers:\n  - name: init\n    image: busybox:1.36\n    command: [sh, -c, 'true']\n",
            "",
        ),
    );
    let yaml = c.ok(&["get", "pod", "web", "-o", "yaml"]);
    assert!(yaml.contains("- name: kube-api-access-"), "{yaml}");
    assert!(
        yaml.contains(&format!(
            "mountPath: {TOKEN_PATH}\n      name: kube-api-access-"
        )),
        "{yaml}"
    );
    let pod = get(&c, &["pod", "web"]).expect("the pod");
    let volumes = pod["spec"]["volumes"].as_array().expect("volumes");
    assert_eq!(volumes.len(), 1, "{volumes:?}");
    let volume = &volumes[0];
    let name = volume["name"].as_str().expect("a name");
    assert!(
        name.starts_with("kube-api-access-") && name.len() == "kube-api-access-".len() + 5,
        "{name}"
    );
    assert_eq!(
        volume["projected"],
        serde_json::json!({
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
            ],
        })
    );
    let mount = serde_json::json!([{"name": name, "readOnly": true, "mountPath": TOKEN_PATH}]);
    assert_eq!(pod["spec"]["containers"][0]["volumeMounts"], mount);
    assert_eq!(pod["spec"]["initContainers"][0]["volumeMounts"], mount);
    wait_running(&c, "web").await?;
    assert_eq!(
        c.ok(&[
            "exec",
            "web",
            "--",
            "cat",
            &format!("{TOKEN_PATH}/namespace")
        ]),
        "default"
    );
    let ca = std::fs::read_to_string(c.store.certs_dir().join("ca.crt"))?;
    assert_eq!(
        c.ok(&["exec", "web", "--", "cat", &format!("{TOKEN_PATH}/ca.crt")]),
        ca
    );
    // The projected token authenticates as the pod's account.
    let token = c.ok(&["exec", "web", "--", "cat", &format!("{TOKEN_PATH}/token")]);
    assert_eq!(token.split('.').count(), 3, "a JWT: {token}");
    let mounted = token_kubeconfig(&c, &token);
    let whoami =
        String::from_utf8_lossy(&c.kubectl_as(&mounted, &["auth", "whoami"]).stdout).into_owned();
    assert!(
        whoami.contains("system:serviceaccount:default:default"),
        "{whoami}"
    );

    // Opting out, on the pod or on its account: no volume, no mount.
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod_manifest("quiet", "  automountServiceAccountToken: false\n", ""),
    );
    c.ok(&["create", "serviceaccount", "silent"]);
    c.ok(&[
        "patch",
        "sa",
        "silent",
        "-p",
        r#"{"automountServiceAccountToken":false}"#,
    ]);
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod_manifest("silent", "  serviceAccountName: silent\n", ""),
    );
    for quiet in ["quiet", "silent"] {
        let pod = get(&c, &["pod", quiet]).expect("the pod");
        assert!(pod["spec"]["volumes"].is_null(), "{}", pod["spec"]);
        assert!(
            pod["spec"]["containers"][0]["volumeMounts"].is_null(),
            "{}",
            pod["spec"]
        );
    }
    wait_running(&c, "quiet").await?;

    // A ConfigMap that is not there yet: ContainerCreating, FailedMount at each retry, counted
    // on one event; then it runs once the ConfigMap is made.
    c.ok_stdin(
        &["apply", "-f", "-"],
        &pod_manifest(
            "needs-config",
            "  volumes:\n  - name: cfg\n    configMap:\n      name: settings\n",
            "    volumeMounts:\n    - name: cfg\n      mountPath: /etc/cfg\n",
        ),
    );
    let failed = r#"MountVolume.SetUp failed for volume "cfg" : configmap "settings" not found"#;
    let repeated = wait_until("FailedMount is counted", Duration::from_secs(30), || {
        let described = c.ok(&["describe", "pod", "needs-config"]);
        let counted = described
            .lines()
            .any(|l| l.contains("FailedMount") && l.contains(failed) && l.contains("(x"));
        async move { counted }
    })
    .await;
    if let Err(e) = repeated {
        panic!("{e}\n{}", c.ok(&["describe", "pod", "needs-config"]));
    }
    let events = get(
        &c,
        &[
            "events",
            "--field-selector",
            "involvedObject.name=needs-config",
        ],
    )
    .expect("events");
    let items: Vec<&Value> = events["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|e| e["reason"] == "FailedMount")
        .collect();
    assert_eq!(items.len(), 1, "one event, counted: {items:?}");
    assert!(items[0]["count"].as_i64() > Some(1), "{}", items[0]);
    assert!(
        items[0]["lastTimestamp"].as_str() > items[0]["firstTimestamp"].as_str(),
        "{}",
        items[0]
    );
    assert_eq!(phase(&c, "needs-config"), "Pending");
    c.ok(&["create", "configmap", "settings", "--from-literal=a=b"]);
    wait_running(&c, "needs-config").await?;
    Ok(())
}
