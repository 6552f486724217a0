//! Static pods: manifests in a directory (a kubelet's `/etc/kubernetes/manifests`) that a
//! kubelet runs without the API server having asked, made visible in the API as mirror pods
//! (annotation `kubernetes.io/config.mirror`). Files in `<dir>/` apply to every node of the
//! host, files in `<dir>/<node name>/` to that node only. The mirror pod, bound to the node,
//! then runs through the ordinary pod path.

use std::path::Path;

use serde_json::{json, Value};
use tracing::warn;

/// The mirror pods for `node` from the manifests under `dir`.
pub fn mirror_pods(dir: &Path, node: &str, node_uid: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for folder in [dir.to_path_buf(), dir.join(node)] {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        let mut files: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        files.sort();
        for path in files {
            let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
            if !matches!(ext, "yaml" | "yml" | "json") || !path.is_file() {
                continue;
            }
            let text = match std::fs::read_to_string(&path) {
                Ok(t) => t,
                Err(e) => {
                    warn!(path = %path.display(), error = %e, "cannot read a static pod manifest");
                    continue;
                }
            };
            match serde_saphyr::from_str::<Value>(&text) {
                Ok(manifest) => out.extend(mirror_pod(manifest, node, node_uid, &text)),
                Err(e) => {
                    let error = e.without_snippet();
                    warn!(path = %path.display(), %error, "bad static pod manifest")
                }
            }
        }
    }
    out
}

/// The mirror pod of one manifest: named `<name>-<node>`, bound to the node, owned by it.
pub fn mirror_pod(mut pod: Value, node: &str, node_uid: &str, source: &str) -> Option<Value> {
    if pod.get("kind").and_then(Value::as_str) != Some("Pod") {
        return None;
    }
    let base = pod
        .pointer("/metadata/name")
        .and_then(Value::as_str)?
        .to_string();
    let hash = format!("{:016x}", fnv(source));
    let metadata = pod.get_mut("metadata")?.as_object_mut()?;
    metadata.insert("name".into(), json!(format!("{base}-{node}")));
    metadata
        .entry("namespace")
        .or_insert_with(|| json!("default"));
    let annotations = metadata
        .entry("annotations")
        .or_insert_with(|| json!({}))
        .as_object_mut()?;
    annotations.insert("kubernetes.io/config.mirror".into(), json!(hash));
    annotations.insert("kubernetes.io/config.hash".into(), json!(hash));
    annotations.insert("kubernetes.io/config.source".into(), json!("file"));
    if !node_uid.is_empty() {
        metadata.insert(
            "ownerReferences".into(),
            json!([{"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid, "controller": true}]),
        );
    }
    pod["spec"]["nodeName"] = json!(node);
    Some(pod)
}

fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_become_mirror_pods() {
        let dir = std::env::temp_dir().join(format!("kemu-static-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("node-1")).expect("dir");
        std::fs::write(
            dir.join("web.yaml"),
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: c\n    image: nginx\n",
        )
        .expect("write");
        std::fs::write(
            dir.join("node-1/only.json"),
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"only","namespace":"kube-system"},"spec":{"containers":[]}}"#,
        )
        .expect("write");
        std::fs::write(dir.join("notes.txt"), "ignored").expect("write");
        std::fs::write(dir.join("broken.yaml"), "kind: Pod\nmetadata: {name: [\n").expect("write");
        let pods = mirror_pods(&dir, "node-1", "uid-1");
        assert_eq!(pods.len(), 2);
        assert_eq!(pods[0]["metadata"]["name"], "web-node-1");
        assert_eq!(pods[0]["metadata"]["namespace"], "default");
        assert_eq!(pods[0]["spec"]["nodeName"], "node-1");
        assert!(pods[0]["metadata"]["annotations"]["kubernetes.io/config.mirror"].is_string());
        assert_eq!(pods[1]["metadata"]["namespace"], "kube-system");
        assert_eq!(mirror_pods(&dir, "node-2", "").len(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
