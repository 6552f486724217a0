//! `kemu render`: the manifests of a cluster config, checked by a real API server. kubectl
//! applies them with `--dry-run=server --validate=strict` to a running kemu cluster, which
//! validates every object (unknown fields included) without keeping any.

mod common;

use std::collections::BTreeSet;
use std::process::{Command, Output};

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
        "name = \"big\"\n[store]\nmembers = 5\n[apiserver]\nreplicas = 3\n[scheduler]\nreplicas = 2\n[controllers]\nreplicas = 2\n[nodes]\nhosts = 4\nper_host = 100\n",
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
    assert!(
        !expected.iter().any(|o| o.starts_with("job")),
        "{expected:?}"
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
