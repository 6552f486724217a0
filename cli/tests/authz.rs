//! Authentication and authorization end to end with the real kubectl: the admin's client
//! certificate, a token user who gets 401 with a bad token and 403 (in Kubernetes' words) until
//! a RoleBinding lets them in, `kubectl auth can-i` and `auth whoami`, the bootstrap policy in
//! `kubectl get`, and a node host's certificate refused on another host's pod.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{wait_until, Cluster};
use transport::pki::{self, CertSpec};

const ALICE_TOKEN: &str = "alice-token-0123456789";

/// A kubeconfig for the cluster's server with the CA and either a token or a certificate.
fn kubeconfig(c: &Cluster, name: &str, user: &str) -> PathBuf {
    let certs = c.api.certs_dir().display().to_string();
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: kemu\n  cluster:\n    server: {}\n    certificate-authority: {certs}/ca.crt\nusers:\n- name: u\n  user:\n{user}contexts:\n- name: kemu\n  context:\n    cluster: kemu\n    user: u\ncurrent-context: kemu\n",
        c.api.url()
    );
    let path = c.dir.path().join(name);
    std::fs::write(&path, text).expect("writes a kubeconfig");
    path
}

fn token_user(c: &Cluster, name: &str, token: &str) -> PathBuf {
    kubeconfig(c, name, &format!("    token: {token}\n"))
}

fn cert_user(c: &Cluster, identity: &str) -> PathBuf {
    let certs = c.api.certs_dir().display().to_string();
    kubeconfig(
        c,
        &format!("{identity}.kubeconfig"),
        &format!("    client-certificate: {certs}/{identity}.crt\n    client-key: {certs}/{identity}.key\n"),
    )
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn can_i(c: &Cluster, kubeconfig: &Path, args: &[&str]) -> String {
    let mut all = vec!["auth", "can-i"];
    all.extend_from_slice(args);
    stdout(&c.kubectl_as(kubeconfig, &all))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_certificates_rbac_and_can_i() -> anyhow::Result<()> {
    let tokens_dir = tempfile::tempdir()?;
    let tokens = tokens_dir.path().join("tokens.csv");
    std::fs::write(
        &tokens,
        format!("{ALICE_TOKEN},alice,1001,\"developers\"\n"),
    )?;
    let c = Cluster::start_with_api_args(
        1,
        &[
            "--token-auth-file".to_string(),
            tokens.display().to_string(),
        ],
    )
    .await?;

    // The admin (client certificate in system:masters) may do anything.
    c.ok(&["create", "namespace", "dev"]);
    let whoami = c.ok(&["auth", "whoami"]);
    assert!(
        whoami.contains("admin") && whoami.contains("system:masters"),
        "{whoami}"
    );
    assert_eq!(c.ok(&["auth", "can-i", "delete", "nodes"]).trim(), "yes");

    // Without credentials only the public paths answer; the rest is 401 in Kubernetes' shape.
    let anonymous =
        cluster::api_access::ApiAccess::from_certs(c.api.http, c.api.certs_dir(), None)?;
    assert_eq!(anonymous.get("/healthz").await?.0, 200);
    assert_eq!(anonymous.get("/version").await?.0, 200);
    let (code, body) = anonymous.get("/api/v1/namespaces").await?;
    assert_eq!(code, 401);
    let status: serde_json::Value = serde_json::from_str(&body)?;
    assert_eq!(
        status,
        serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "Unauthorized", "reason": "Unauthorized", "code": 401})
    );

    // A bad token: 401, which kubectl reports as not logged in.
    let bad = token_user(&c, "bad.kubeconfig", "not-a-token");
    let out = c.kubectl_as(&bad, &["get", "pods", "-n", "dev"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("Unauthorized"), "{}", stderr(&out));

    // Alice's token works, but she may do nothing yet beyond discovery and self reviews.
    let alice = token_user(&c, "alice.kubeconfig", ALICE_TOKEN);
    let whoami = stdout(&c.kubectl_as(&alice, &["auth", "whoami"]));
    assert!(
        whoami.contains("alice") && whoami.contains("developers"),
        "{whoami}"
    );
    let out = c.kubectl_as(&alice, &["run", "web", "--image=nginx", "-n", "dev"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(r#"pods is forbidden: User "alice" cannot create resource "pods" in API group "" in the namespace "dev""#),
        "{}",
        stderr(&out)
    );
    let out = c.kubectl_as(&alice, &["get", "nodes"]);
    assert!(
        stderr(&out).contains(r#"nodes is forbidden: User "alice" cannot list resource "nodes" in API group "" at the cluster scope"#),
        "{}",
        stderr(&out)
    );
    assert_eq!(can_i(&c, &alice, &["create", "pods", "-n", "dev"]), "no");

    // A Role and a RoleBinding in dev let her in there, and only there.
    c.ok(&[
        "create",
        "role",
        "pod-writer",
        "--verb=create,get,list,watch",
        "--resource=pods",
        "-n",
        "dev",
    ]);
    c.ok(&[
        "create",
        "rolebinding",
        "alice-writes",
        "--role=pod-writer",
        "--user=alice",
        "-n",
        "dev",
    ]);
    wait_until(
        "alice's binding is in force",
        Duration::from_secs(20),
        || async { can_i(&c, &alice, &["create", "pods", "-n", "dev"]) == "yes" },
    )
    .await?;
    assert_eq!(
        can_i(&c, &alice, &["create", "pods", "-n", "default"]),
        "no"
    );
    assert_eq!(can_i(&c, &alice, &["delete", "pods", "-n", "dev"]), "no");
    assert_eq!(
        can_i(
            &c,
            &alice,
            &["get", "pods", "--subresource=log", "-n", "dev"]
        ),
        "no"
    );
    let out = c.kubectl_as(&alice, &["run", "web", "--image=nginx", "-n", "dev"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&c.kubectl_as(&alice, &["get", "pods", "-n", "dev"])).contains("web"));
    let out = c.kubectl_as(&alice, &["delete", "pod", "web", "-n", "dev"]);
    assert!(
        stderr(&out).contains(r#"pods "web" is forbidden: User "alice" cannot delete resource "pods" in API group "" in the namespace "dev""#),
        "{}",
        stderr(&out)
    );

    // Escalation prevention: allowed to write Roles and RoleBindings in dev, alice may grant
    // what she holds there, and nothing more.
    c.ok(&[
        "create",
        "role",
        "rbac-writer",
        "--verb=create",
        "--resource=roles.rbac.authorization.k8s.io,rolebindings.rbac.authorization.k8s.io",
        "-n",
        "dev",
    ]);
    c.ok(&[
        "create",
        "rolebinding",
        "alice-rbac",
        "--role=rbac-writer",
        "--user=alice",
        "-n",
        "dev",
    ]);
    wait_until(
        "alice may create roles",
        Duration::from_secs(20),
        || async { can_i(&c, &alice, &["create", "roles", "-n", "dev"]) == "yes" },
    )
    .await?;
    let out = c.kubectl_as(
        &alice,
        &[
            "create",
            "role",
            "reader",
            "--verb=get,list",
            "--resource=pods",
            "-n",
            "dev",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = c.kubectl_as(
        &alice,
        &[
            "create",
            "role",
            "deleter",
            "--verb=get,delete",
            "--resource=pods",
            "-n",
            "dev",
        ],
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(
            "roles.rbac.authorization.k8s.io \"deleter\" is forbidden: user \"alice\" (groups=[\"developers\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\"]}"
        ),
        "{}",
        stderr(&out)
    );
    let out = c.kubectl_as(
        &alice,
        &[
            "create",
            "rolebinding",
            "bob-admin",
            "--clusterrole=admin",
            "--user=bob",
            "-n",
            "dev",
        ],
    );
    assert!(
        stderr(&out).contains(
            "rolebindings.rbac.authorization.k8s.io \"bob-admin\" is forbidden: user \"alice\""
        ) && stderr(&out).contains("is attempting to grant RBAC permissions not currently held"),
        "{}",
        stderr(&out)
    );
    let out = c.kubectl_as(
        &alice,
        &[
            "create",
            "rolebinding",
            "bob-reads",
            "--role=reader",
            "--user=bob",
            "-n",
            "dev",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));

    // The admin asks about alice: impersonation (`--as`) and SubjectAccessReviews.
    assert_eq!(
        c.ok(&["auth", "can-i", "create", "pods", "-n", "dev", "--as=alice"])
            .trim(),
        "yes"
    );
    let out = c.kubectl(&["auth", "can-i", "delete", "pods", "-n", "dev", "--as=alice"]);
    assert_eq!(stdout(&out).trim(), "no");
    let sar = |kind: &str, namespace: &str, verb: &str| {
        format!(
            r#"{{"apiVersion": "authorization.k8s.io/v1", "kind": "{kind}", "metadata": {{"namespace": "{namespace}"}},
               "spec": {{"user": "alice", "groups": ["developers"], "resourceAttributes": {{"verb": "{verb}", "resource": "pods", "namespace": "{namespace}"}}}}}}"#
        )
    };
    let answered = c.ok_stdin(
        &["create", "-f", "-", "-o", "jsonpath={.status.allowed}"],
        &sar("SubjectAccessReview", "dev", "create"),
    );
    assert_eq!(answered.trim(), "true");
    let answered = c.ok_stdin(
        &["create", "-f", "-", "-o", "jsonpath={.status.allowed}"],
        &sar("LocalSubjectAccessReview", "dev", "delete"),
    );
    assert_eq!(answered.trim(), "false");
    // alice may not impersonate.
    let out = c.kubectl_as(&alice, &["get", "pods", "-n", "dev", "--as=bob"]);
    assert!(
        stderr(&out).contains(r#"users "bob" is forbidden: User "alice" cannot impersonate resource "users" in API group "" at the cluster scope"#),
        "{}",
        stderr(&out)
    );

    // The bootstrap policy and the new objects print as kubectl expects.
    let roles = c.ok(&["get", "clusterroles"]);
    for name in [
        "cluster-admin",
        "admin",
        "edit",
        "view",
        "system:kube-scheduler",
    ] {
        assert!(
            roles.lines().any(|l| l.starts_with(&format!("{name} "))),
            "{name}: {roles}"
        );
    }
    // Aggregated roles carry the rules they aggregate, as the aggregation controller writes.
    wait_until(
        "view's aggregated rules are written",
        Duration::from_secs(20),
        || async {
            let view = c.ok(&["get", "clusterrole", "view", "-o", "json"]);
            let view: serde_json::Value = serde_json::from_str(&view).unwrap_or_default();
            view["rules"].as_array().is_some_and(|rules| {
                rules.iter().any(|r| {
                    r["resources"]
                        .as_array()
                        .is_some_and(|res| res.contains(&"pods".into()))
                        && r["verbs"]
                            .as_array()
                            .is_some_and(|v| v.contains(&"list".into()))
                })
            })
        },
    )
    .await?;
    let view = c.ok(&["get", "clusterrole", "view", "-o", "yaml"]);
    assert!(
        view.contains("aggregationRule:") && view.contains("rules:"),
        "{view}"
    );
    assert!(!view.contains("secrets"), "view reads no secrets: {view}");
    let bindings = c.ok(&["get", "rolebindings", "-n", "dev", "-o", "wide"]);
    assert!(
        bindings.contains("Role/pod-writer") && bindings.contains("alice"),
        "{bindings}"
    );
    let resources = c.ok(&["api-resources", "--api-group=rbac.authorization.k8s.io"]);
    assert!(resources.contains("clusterrolebindings"), "{resources}");
    Ok(())
}

/// A node host's certificate over HTTPS: it may write the status of pods on the node it
/// registered, not of one on another host's node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_host_cannot_touch_another_hosts_pods() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    for host in ["nodehost-1", "nodehost-2"] {
        pki::issue(
            c.api.certs_dir(),
            &CertSpec {
                name: host.into(),
                organizations: vec!["system:nodes".into()],
                sans: vec![],
            },
        )?;
    }
    let (one, two) = (cert_user(&c, "nodehost-1"), cert_user(&c, "nodehost-2"));
    let node = |name: &str| {
        c.file(
            &format!("{name}.yaml"),
            &format!("apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n"),
        )
    };
    let out = c.kubectl_as(&one, &["create", "-f", &node("n1")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = c.kubectl_as(&two, &["create", "-f", &node("n2")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let owner = c.ok(&[
        "get",
        "node",
        "n1",
        "-o",
        "jsonpath={.metadata.labels.kemu\\.dev/node-host}",
    ]);
    assert_eq!(owner, "nodehost-1");

    for (pod, node) in [("on-n1", "n1"), ("on-n2", "n2")] {
        let manifest = c.file(
            &format!("{pod}.yaml"),
            &format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: {pod}\n  namespace: default\nspec:\n  nodeName: {node}\n  containers:\n  - name: main\n    image: registry.k8s.io/pause:3.10\n"),
        );
        c.ok(&["create", "-f", &manifest]);
    }
    let running = r#"{"status":{"phase":"Running"}}"#;
    let patch = |who: &Path, pod: &str| {
        c.kubectl_as(
            who,
            &[
                "patch",
                "pod",
                pod,
                "-n",
                "default",
                "--subresource=status",
                "--type=merge",
                "-p",
                running,
            ],
        )
    };
    let out = patch(&one, "on-n1");
    assert!(out.status.success(), "{}", stderr(&out));
    // kubectl reads the status first, and is refused there already.
    let out = patch(&one, "on-n2");
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(r#"pods "on-n2" is forbidden: User "nodehost-1" cannot get resource "pods/status" in API group "" in the namespace "default": no relationship found between node host 'nodehost-1' and this object"#),
        "{}",
        stderr(&out)
    );
    // The write itself, sent directly, is refused too.
    let host = cluster::api_access::ApiAccess::from_certs(
        c.api.http,
        c.api.certs_dir(),
        Some("nodehost-1"),
    )?;
    let (code, body) = host
        .request(
            "PATCH",
            "/api/v1/namespaces/default/pods/on-n2/status",
            Some("application/merge-patch+json"),
            running.as_bytes(),
        )
        .await?;
    assert_eq!(code, 403, "{body}");
    let status: serde_json::Value = serde_json::from_str(&body)?;
    assert_eq!(
        status["message"],
        r#"pods "on-n2" is forbidden: User "nodehost-1" cannot patch resource "pods/status" in API group "" in the namespace "default": no relationship found between node host 'nodehost-1' and this object"#
    );
    let out = c.kubectl_as(&one, &["delete", "node", "n2"]);
    assert!(stderr(&out).contains("forbidden"), "{}", stderr(&out));
    let out = patch(&two, "on-n2");
    assert!(out.status.success(), "{}", stderr(&out));
    Ok(())
}

/// NodeRestriction: a node host cannot reach a Secret by creating a pod that uses it, may create
/// only plain mirror pods, and cannot move its Node to another host or set steering labels.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_host_creates_only_mirror_pods_and_keeps_its_labels() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    pki::issue(
        c.api.certs_dir(),
        &CertSpec {
            name: "nodehost-1".into(),
            organizations: vec!["system:nodes".into()],
            sans: vec![],
        },
    )?;
    let host = cert_user(&c, "nodehost-1");
    c.ok(&[
        "create",
        "secret",
        "generic",
        "admin-token",
        "-n",
        "default",
        "--from-literal=token=s3cret",
    ]);
    let node = c.file(
        "n1.yaml",
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n",
    );
    let out = c.kubectl_as(&host, &["create", "-f", &node]);
    assert!(out.status.success(), "{}", stderr(&out));

    let create_pod = |name: &str, namespace: &str, mirror: bool, spec: &str| {
        let annotations = if mirror {
            "  annotations:\n    kubernetes.io/config.mirror: abc\n"
        } else {
            ""
        };
        let manifest = c.file(
            &format!("{name}.yaml"),
            &format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {namespace}\n{annotations}spec:\n  nodeName: n1\n{spec}"),
        );
        c.kubectl_as(&host, &["create", "-f", &manifest])
    };
    let steal = "  containers:\n  - name: main\n    image: registry.k8s.io/pause:3.10\n    env:\n    - name: T\n      valueFrom:\n        secretKeyRef:\n          name: admin-token\n          key: token\n";
    let plain = "  containers:\n  - name: main\n    image: registry.k8s.io/pause:3.10\n";
    let refused = |out: std::process::Output, why: &str| {
        assert!(!out.status.success(), "accepted: {}", stdout(&out));
        assert!(stderr(&out).contains(why), "{}", stderr(&out));
    };
    refused(
        create_pod("steal", "default", false, steal),
        r#"pods "steal" is forbidden: pod does not have "kubernetes.io/config.mirror" annotation, node "n1" can only create mirror pods"#,
    );
    refused(
        create_pod("steal", "default", true, steal),
        r#"pods "steal" is forbidden: node "n1" can not create pods that reference secrets"#,
    );
    refused(
        create_pod(
            "builder",
            "kube-system",
            true,
            &format!("  serviceAccountName: generic-garbage-collector\n{plain}"),
        ),
        r#"node "n1" can not create pods that reference a service account"#,
    );
    // The secret stays out of reach: no pod on the host's node uses it.
    let out = c.kubectl_as(&host, &["get", "secret", "admin-token", "-n", "default"]);
    refused(out, "no relationship found between node host 'nodehost-1'");
    // A plain mirror pod is the node's to create, and runs as no service account.
    let out = create_pod("static-web-n1", "default", true, plain);
    assert!(out.status.success(), "{}", stderr(&out));
    let account = c.ok(&[
        "get",
        "pod",
        "static-web-n1",
        "-n",
        "default",
        "-o",
        "jsonpath={.spec.serviceAccountName}",
    ]);
    assert_eq!(account, "");

    // Labels: the node's own are fine; the owner label and steering labels are not.
    let label = |pair: &str| c.kubectl_as(&host, &["label", "node", "n1", pair, "--overwrite"]);
    let out = label("team=storage");
    assert!(out.status.success(), "{}", stderr(&out));
    refused(
        label("kemu.dev/node-host=nodehost-2"),
        r#"nodes "n1" is forbidden: node "n1" is not allowed to modify labels: kemu.dev/node-host"#,
    );
    refused(
        label("node-restriction.kubernetes.io/dedicated=db"),
        "is not allowed to modify labels: node-restriction.kubernetes.io/dedicated",
    );
    let owner = c.ok(&[
        "get",
        "node",
        "n1",
        "-o",
        "jsonpath={.metadata.labels.kemu\\.dev/node-host}",
    ]);
    assert_eq!(owner, "nodehost-1");
    // The administrator is not restricted.
    c.ok(&[
        "label",
        "node",
        "n1",
        "node-restriction.kubernetes.io/dedicated=db",
    ]);
    Ok(())
}
