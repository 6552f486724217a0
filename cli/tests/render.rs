//! `kemu render`: the manifests of a cluster config, checked by a real API server. kubectl
//! applies them with `--dry-run=server --validate=strict` to a running kemu cluster, which
//! validates every object (unknown fields included) without keeping any.

use crate::common;

use std::collections::BTreeSet;
use std::process::{Command, Output};
use std::time::Duration;

use common::{kemu_exe, workspace, Cluster};

fn kemu(args: &[&str]) -> Output {
    Command::new(kemu_exe())
        .args(args)
        .output()
        .expect("kemu runs")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Every object of a YAML stream as `kubectl -o name` prints it (`statefulset.apps/x`).
fn kinds_and_names(stream: &str) -> BTreeSet<String> {
    format!("\n{stream}")
        .split("\n---\n")
        .filter(|doc| !doc.trim().is_empty())
        .map(|doc| {
            let object: serde_json::Value = serde_saphyr::from_str(doc).expect("a YAML object");
            let kind = object["kind"].as_str().unwrap_or_default().to_lowercase();
            let group = match object["apiVersion"].as_str().unwrap_or_default() {
                "v1" => String::new(),
                other => format!(".{}", other.split('/').next().unwrap_or_default()),
            };
            format!(
                "{kind}{group}/{}",
                object["metadata"]["name"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

/// `kubectl apply --dry-run=server --validate=strict` of `path` (a file or a directory): each
/// object it names in its output, which must be all of `expected`.
fn dry_run_apply(c: &Cluster, path: &str, expected: &BTreeSet<String>) {
    let out = c.ok(&[
        "apply",
        "--dry-run=server",
        "--validate=strict",
        "-o",
        "name",
        "-f",
        path,
    ]);
    let applied: BTreeSet<String> = out.lines().map(str::to_string).collect();
    assert_eq!(&applied, expected, "kubectl printed:\n{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rendered_manifests_pass_server_side_strict_validation() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let dir = c.dir.path();

    // The default cluster, to one file, in a namespace of our choosing.
    let local = workspace().join("clusters/local.toml");
    let file = dir.join("local.yaml");
    let out = kemu(&[
        "render",
        "-f",
        &local.display().to_string(),
        "--namespace",
        "kemu-local",
        "--image",
        "example.com/kemu:test",
        "-o",
        &file.display().to_string(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let stream = std::fs::read_to_string(&file)?;
    let expected = kinds_and_names(&stream);
    for object in [
        "namespace/kemu-local",
        "secret/kemu-ca",
        "secret/kemu-apiserver-tls",
        "configmap/kemu-config",
        "service/kemu-store",
        "statefulset.apps/kemu-store",
        "service/kemu-apiserver",
        "deployment.apps/kemu-apiserver",
        "deployment.apps/kemu-scheduler",
        "deployment.apps/kemu-controllers",
        "statefulset.apps/kemu-nodehost",
        "job.batch/kemu-load",
    ] {
        assert!(expected.contains(object), "{object} not in {expected:?}");
    }
    assert!(stream.contains("image: example.com/kemu:test"));
    // Namespaced objects are only checked in a namespace that exists.
    c.ok(&["create", "namespace", "kemu-local"]);
    dry_run_apply(&c, &file.display().to_string(), &expected);
    // A dry run keeps nothing.
    let left = c.ok(&[
        "get",
        "statefulsets,deployments,secrets",
        "-n",
        "kemu-local",
        "-o",
        "name",
    ]);
    assert!(!left.contains("kemu"), "{left}");

    // Several of everything, one file per object, the namespace from the cluster's name.
    let config = dir.join("big.toml");
    std::fs::write(
        &config,
        "name = \"big\"\n[store]\nmembers = 5\n[apiserver]\nreplicas = 3\n[scheduler]\nreplicas = 2\n[controllers]\nreplicas = 2\n[nodes]\nhosts = 4\nper_host = 100\n[[chaos.action]]\nat = 10.0\nkind = \"kill-store-leader\"\nrestore_after = 5.0\n[[chaos.action]]\nat = 20.0\nkind = \"stop-store-member\"\n",
    )?;
    let out_dir = dir.join("big");
    let out = kemu(&[
        "render",
        "-f",
        &config.display().to_string(),
        "-o",
        &format!("{}/", out_dir.display()),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    // A stop cannot be done to a pod: said before anything is applied.
    assert!(
        text(&out).contains("chaos.action[1] (stop-store-member) cannot act on pods"),
        "{}",
        text(&out)
    );
    let mut files: Vec<String> = std::fs::read_dir(&out_dir)?
        .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<Result<_, _>>()?;
    files.sort();
    assert_eq!(
        files.first().map(String::as_str),
        Some("00-namespace-big.yaml")
    );
    let mut stream = String::new();
    for f in &files {
        stream.push_str("---\n");
        stream.push_str(&std::fs::read_to_string(out_dir.join(f))?);
    }
    let expected = kinds_and_names(&stream);
    // No load plan: no load Job. The chaos plan runs as a Job whose service account may
    // delete the namespace's pods, for a minute after its last action is restored.
    for object in [
        "serviceaccount/kemu-chaos",
        "role.rbac.authorization.k8s.io/kemu-chaos",
        "rolebinding.rbac.authorization.k8s.io/kemu-chaos",
        "job.batch/kemu-chaos",
    ] {
        assert!(expected.contains(object), "{object} not in {expected:?}");
    }
    assert!(!expected.contains("job.batch/kemu-load"), "{expected:?}");
    assert!(
        stream.contains("kemu-store-4=kemu-store-4.kemu-store.big.svc:2379"),
        "the chaos Job's store members"
    );
    assert!(
        stream.contains("- '80'") || stream.contains("- \"80\""),
        "duration 80 s"
    );
    assert!(
        stream.contains("--compaction-interval-secs\n        - '0'")
            || stream.contains("--compaction-interval-secs\n        - \"0\""),
        "the chaos checks read the whole history: no compaction"
    );
    assert!(stream.contains("replicas: 5"), "five store members");
    assert!(stream.contains("kemu-store-4=kemu-store-4.kemu-store.big.svc:2380"));
    c.ok(&["create", "namespace", "big"]);
    dry_run_apply(&c, &out_dir.display().to_string(), &expected);
    Ok(())
}

#[test]
fn bad_input_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("bad.toml");
    std::fs::write(&config, "[store]\nmembers = 3\nmemberz = 4\n").expect("write");
    let out = kemu(&["render", "-f", &config.display().to_string()]);
    assert!(!out.status.success());
    let message = text(&out);
    assert!(message.contains("memberz"), "{message}");
    assert!(message.contains("line 3"), "{message}");

    let local = workspace().join("clusters/local.toml");
    let out = kemu(&[
        "render",
        "-f",
        &local.display().to_string(),
        "--namespace",
        "Not_A_Namespace",
    ]);
    assert!(!out.status.success());
    let message = text(&out);
    assert!(message.contains("\"Not_A_Namespace\""), "{message}");
    assert!(message.contains("RFC 1123"), "{message}");
}

/// A kemu process killed when dropped.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Components find each other by host name, as rendered manifests have them do: store members
/// whose peers are `localhost:PORT`, an API server whose store endpoints are, and a node host
/// whose API server is. Certificates carry `localhost` as a DNS SAN, and the TLS server name is
/// the host name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn components_reach_each_other_by_host_name() -> anyhow::Result<()> {
    use cluster::process::{free_ports, spawn_logged};
    use transport::pki::{self, CertSpec};

    let dir = tempfile::tempdir()?;
    let certs = dir.path().join("certs");
    pki::create_ca(&certs, "names")?;
    let members = ["s1", "s2", "s3"];
    let mut identities: Vec<(&str, &str)> = members
        .iter()
        .map(|m| (*m, store::config::STORE_MEMBER_ORG))
        .collect();
    identities.extend([
        ("apiserver", "kemu:apiserver"),
        ("admin", "system:masters"),
        ("nodehost-1", "system:nodes"),
    ]);
    for (name, organization) in identities {
        pki::issue(
            &certs,
            &CertSpec {
                name: name.into(),
                organizations: vec![organization.into()],
                sans: vec![],
            },
        )?;
    }
    let ports = free_ports(2 * members.len() + 2)?;
    let initial: Vec<String> = members
        .iter()
        .enumerate()
        .map(|(i, m)| format!("{m}=localhost:{}", ports[2 * i + 1]))
        .collect();
    let certs_arg = certs.display().to_string();
    let mut running = Vec::new();
    for (i, m) in members.iter().enumerate() {
        let args: Vec<String> = [
            "store",
            "--name",
            m,
            "--data-dir",
            &dir.path().join(m).display().to_string(),
            "--listen-client",
            &format!("127.0.0.1:{}", ports[2 * i]),
            "--listen-peer",
            &format!("127.0.0.1:{}", ports[2 * i + 1]),
            "--initial-cluster",
            &initial.join(","),
            "--certs",
            &certs_arg,
        ]
        .map(String::from)
        .to_vec();
        let log = dir.path().join(format!("{m}.log"));
        running.push(Running(spawn_logged(kemu_exe(), &args, &log)?));
    }
    let store_endpoints: Vec<String> = (0..members.len())
        .map(|i| format!("localhost:{}", ports[2 * i]))
        .collect();
    let (http, quic) = (ports[2 * members.len()], ports[2 * members.len() + 1]);
    let api_args: Vec<String> = [
        "apiserver",
        "--store-endpoints",
        &store_endpoints.join(","),
        "--certs",
        &certs_arg,
        "--listen-http",
        &format!("127.0.0.1:{http}"),
        "--listen-quic",
        &format!("127.0.0.1:{quic}"),
        "--disable-admission-plugins=ServiceAccount",
    ]
    .map(String::from)
    .to_vec();
    let api_log = dir.path().join("apiserver.log");
    running.push(Running(spawn_logged(kemu_exe(), &api_args, &api_log)?));

    // Ready means the API server reads the store, which has elected a leader over its peers.
    let admin = cluster::api_access::ApiAccess::from_certs(
        format!("127.0.0.1:{http}").parse()?,
        &certs,
        Some("admin"),
    )?;
    let log = |path: &std::path::Path| std::fs::read_to_string(path).unwrap_or_default();
    let ready = common::wait_until("the API server is ready", Duration::from_secs(60), || {
        let admin = &admin;
        async move { matches!(admin.get("/readyz").await, Ok((200, _))) }
    })
    .await;
    assert!(
        ready.is_ok(),
        "{ready:?}\napiserver:\n{}\ns1:\n{}",
        log(&api_log),
        log(&dir.path().join("s1.log"))
    );

    // A write goes through the raft log, replicated to the peers by name.
    let (code, body) = admin
        .request(
            "POST",
            "/api/v1/namespaces",
            Some("application/json"),
            br#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"by-name"}}"#,
        )
        .await?;
    assert_eq!(code, 201, "{body}");

    // A node host reaches the API server's QUIC front by name; its nodes register.
    let host_args: Vec<String> = [
        "node-host",
        "--apiserver",
        &format!("localhost:{quic}"),
        "--certs",
        &certs_arg,
        "--identity",
        "nodehost-1",
        "--nodes",
        "2",
    ]
    .map(String::from)
    .to_vec();
    let host_log = dir.path().join("nodehost.log");
    running.push(Running(spawn_logged(kemu_exe(), &host_args, &host_log)?));
    let registered = common::wait_until("two nodes registered", Duration::from_secs(60), || {
        let admin = &admin;
        async move {
            match admin.get("/api/v1/nodes").await {
                Ok((200, body)) => {
                    serde_json::from_str::<serde_json::Value>(&body)
                        .ok()
                        .and_then(|v| v["items"].as_array().map(Vec::len))
                        == Some(2)
                }
                _ => false,
            }
        }
    })
    .await;
    assert!(registered.is_ok(), "{registered:?}\n{}", log(&host_log));
    drop(running);
    Ok(())
}
