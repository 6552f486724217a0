//! End to end with the real kubectl against an API server: PersistentVolumes,
//! PersistentVolumeClaims and the storage.k8s.io kinds as kube-apiserver serves them —
//! discovery and short names, defaults, the DefaultStorageClass and StorageObjectInUseProtection
//! admission, kubectl's Table columns, the 422s of bad specs and of changing a claim's spec,
//! the refused growth of a claim whose class does not expand, and `kubectl apply --prune`, whose
//! default allowlist reads claims and volumes.

use crate::common;

use common::Cluster;
use serde_json::Value;

const CLASSES: &str = "apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: gold
  annotations:
    storageclass.kubernetes.io/is-default-class: \"true\"
provisioner: example.com/gold
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: slow
provisioner: example.com/slow
reclaimPolicy: Retain
volumeBindingMode: WaitForFirstConsumer
allowVolumeExpansion: true
";

const CLAIM: &str = "apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data
spec:
  accessModes: [ReadWriteOnce]
  resources:
    requests:
      storage: 1Gi
";

const VOLUME: &str = "apiVersion: v1
kind: PersistentVolume
metadata:
  name: disk-1
spec:
  capacity:
    storage: 5Gi
  accessModes: [ReadWriteOnce, ReadOnlyMany]
  hostPath:
    path: /data/disk-1
";

fn json(c: &Cluster, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&c.ok(&all)).unwrap_or(Value::Null)
}

/// The whitespace-separated words of each line of a `kubectl get` table.
fn table(out: &str) -> Vec<Vec<String>> {
    out.lines()
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volumes_claims_and_classes_are_served_as_kubernetes_serves_them() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;

    // Discovery: short names, scope, the status subresources.
    let resources = c.ok(&[
        "api-resources",
        "--api-group=storage.k8s.io",
        "--no-headers",
    ]);
    for kind in [
        "StorageClass",
        "CSIDriver",
        "CSINode",
        "VolumeAttachment",
        "CSIStorageCapacity",
    ] {
        assert!(resources.contains(kind), "{kind} missing:\n{resources}");
    }
    assert!(
        table(&resources).contains(&vec![
            "storageclasses".into(),
            "sc".into(),
            "storage.k8s.io/v1".into(),
            "false".into(),
            "StorageClass".into()
        ]),
        "{resources}"
    );
    let core = c.ok(&["api-resources", "--api-group=", "--no-headers"]);
    assert!(
        table(&core).contains(&vec![
            "persistentvolumeclaims".into(),
            "pvc".into(),
            "v1".into(),
            "true".into(),
            "PersistentVolumeClaim".into()
        ]),
        "{core}"
    );

    // Classes: defaults and kubectl's columns, the default marked.
    c.ok_stdin(&["apply", "-f", "-"], CLASSES);
    let gold = json(&c, &["get", "sc", "gold"]);
    assert_eq!(gold["reclaimPolicy"], "Delete");
    assert_eq!(gold["volumeBindingMode"], "Immediate");
    let sc = table(&c.ok(&["get", "sc"]));
    assert_eq!(
        sc[0],
        [
            "NAME",
            "PROVISIONER",
            "RECLAIMPOLICY",
            "VOLUMEBINDINGMODE",
            "ALLOWVOLUMEEXPANSION",
            "AGE"
        ]
    );
    assert_eq!(
        sc[1][..6],
        [
            "gold",
            "(default)",
            "example.com/gold",
            "Delete",
            "Immediate",
            "false"
        ]
    );
    assert_eq!(
        sc[2][..5],
        [
            "slow",
            "example.com/slow",
            "Retain",
            "WaitForFirstConsumer",
            "true"
        ]
    );

    // A claim without a class gets the default one, its protection finalizer, Pending.
    c.ok_stdin(&["apply", "-f", "-"], CLAIM);
    let claim = json(&c, &["get", "pvc", "data"]);
    assert_eq!(claim["spec"]["storageClassName"], "gold");
    assert_eq!(claim["spec"]["volumeMode"], "Filesystem");
    assert_eq!(claim["status"]["phase"], "Pending");
    assert_eq!(
        claim["metadata"]["finalizers"],
        serde_json::json!(["kubernetes.io/pvc-protection"])
    );
    assert!(claim["metadata"].get("generation").is_none(), "{claim}");
    let pvc = table(&c.ok(&["get", "pvc"]));
    assert_eq!(
        pvc[0],
        [
            "NAME",
            "STATUS",
            "VOLUME",
            "CAPACITY",
            "ACCESS",
            "MODES",
            "STORAGECLASS",
            "VOLUMEATTRIBUTESCLASS",
            "AGE"
        ]
    );
    assert_eq!(pvc[1][..4], ["data", "Pending", "gold", "<unset>"]);

    // A volume: Retain, Filesystem, Pending until a binder sees it, its finalizer.
    c.ok_stdin(&["apply", "-f", "-"], VOLUME);
    let volume = json(&c, &["get", "pv", "disk-1"]);
    assert_eq!(volume["spec"]["persistentVolumeReclaimPolicy"], "Retain");
    assert_eq!(volume["spec"]["volumeMode"], "Filesystem");
    assert_eq!(volume["spec"]["hostPath"]["type"], "");
    assert_eq!(volume["status"]["phase"], "Pending");
    assert!(volume["status"]["lastPhaseTransitionTime"].is_string());
    assert_eq!(
        volume["metadata"]["finalizers"],
        serde_json::json!(["kubernetes.io/pv-protection"])
    );
    let pv = table(&c.ok(&["get", "pv"]));
    assert_eq!(
        pv[0],
        [
            "NAME",
            "CAPACITY",
            "ACCESS",
            "MODES",
            "RECLAIM",
            "POLICY",
            "STATUS",
            "CLAIM",
            "STORAGECLASS",
            "VOLUMEATTRIBUTESCLASS",
            "REASON",
            "AGE"
        ]
    );
    assert_eq!(
        pv[1][..6],
        ["disk-1", "5Gi", "RWO,ROX", "Retain", "Pending", "<unset>"]
    );
    let wide = c.ok(&["get", "pv", "-o", "wide"]);
    assert!(
        wide.lines().next().unwrap_or("").ends_with("VOLUMEMODE"),
        "{wide}"
    );

    // Bad input: kube-apiserver's 422s.
    let refused = c.apply_refused(
        "apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: bad
spec:
  resources: {}
",
    );
    assert!(
        refused.contains("The PersistentVolumeClaim \"bad\" is invalid: \n* spec.accessModes: Required value: at least 1 access mode is required\n* spec.resources[storage]: Required value"),
        "{refused}"
    );
    let refused = c.apply_refused(
        "apiVersion: v1
kind: PersistentVolume
metadata:
  name: bad
spec:
  accessModes: [ReadWriteSometimes]
  capacity:
    storage: 1Gi
  persistentVolumeReclaimPolicy: Recycle
",
    );
    assert!(
        refused.contains("spec.accessModes: Unsupported value: \"ReadWriteSometimes\": supported values: \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\""),
        "{refused}"
    );
    assert!(
        refused.contains("spec: Required value: must specify a volume type"),
        "{refused}"
    );
    let refused = c.apply_refused(
        "apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: bad
provisioner: example.com/x
reclaimPolicy: Recycle
",
    );
    assert!(
        refused.contains("The StorageClass \"bad\" is invalid: reclaimPolicy: Unsupported value: \"Recycle\": supported values: \"Delete\", \"Retain\""),
        "{refused}"
    );

    // A claim's spec is fixed once created; an unbound claim does not grow either.
    let changed = c.fails(&[
        "patch",
        "pvc",
        "data",
        "--type=merge",
        "-p",
        r#"{"spec":{"accessModes":["ReadWriteMany"]}}"#,
    ]);
    assert!(
        changed.contains("spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"),
        "{changed}"
    );
    // A class's provisioner and parameters are fixed too.
    let class = c.fails(&[
        "patch",
        "sc",
        "gold",
        "--type=merge",
        "-p",
        r#"{"provisioner":"example.com/other"}"#,
    ]);
    assert!(
        class.contains("provisioner: Forbidden: updates to provisioner are forbidden."),
        "{class}"
    );

    // With two default classes the newer one is given.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    c.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: platinum
  annotations:
    storageclass.kubernetes.io/is-default-class: \"true\"
provisioner: example.com/platinum
",
    );
    c.ok_stdin(
        &["apply", "-f", "-"],
        &CLAIM.replace("name: data", "name: second"),
    );
    let second = json(&c, &["get", "pvc", "second"]);
    assert_eq!(second["spec"]["storageClassName"], "platinum");

    // The other storage.k8s.io kinds: create, defaults, columns.
    c.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata:
  name: csi.example.com
spec: {}
---
apiVersion: storage.k8s.io/v1
kind: VolumeAttachment
metadata:
  name: attach-1
spec:
  attacher: csi.example.com
  nodeName: node-1
  source:
    persistentVolumeName: disk-1
",
    );
    let driver = json(&c, &["get", "csidriver", "csi.example.com"]);
    assert_eq!(driver["spec"]["attachRequired"], true);
    assert_eq!(driver["spec"]["fsGroupPolicy"], "ReadWriteOnceWithFSType");
    assert_eq!(
        driver["spec"]["volumeLifecycleModes"],
        serde_json::json!(["Persistent"])
    );
    let drivers = table(&c.ok(&["get", "csidrivers"]));
    assert_eq!(
        drivers[0],
        [
            "NAME",
            "ATTACHREQUIRED",
            "PODINFOONMOUNT",
            "STORAGECAPACITY",
            "TOKENREQUESTS",
            "REQUIRESREPUBLISH",
            "MODES",
            "AGE"
        ]
    );
    assert_eq!(
        drivers[1][..7],
        [
            "csi.example.com",
            "true",
            "false",
            "false",
            "<unset>",
            "false",
            "Persistent"
        ]
    );
    let attachment = json(&c, &["get", "volumeattachment", "attach-1"]);
    assert_eq!(attachment["status"]["attached"], false);
    let attachments = table(&c.ok(&["get", "volumeattachments"]));
    assert_eq!(
        attachments[0],
        ["NAME", "ATTACHER", "PV", "NODE", "ATTACHED", "AGE"]
    );
    c.ok(&[
        "patch",
        "volumeattachment",
        "attach-1",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"attached":true}}"#,
    ]);
    let attachments = table(&c.ok(&["get", "volumeattachments"]));
    assert_eq!(
        attachments[1][..5],
        ["attach-1", "csi.example.com", "disk-1", "node-1", "true"]
    );
    let moved = c.fails(&[
        "patch",
        "volumeattachment",
        "attach-1",
        "--type=merge",
        "-p",
        r#"{"spec":{"nodeName":"node-2"}}"#,
    ]);
    assert!(moved.contains("spec: Invalid value:"), "{moved}");
    assert!(moved.contains("field is immutable"), "{moved}");

    // Watch and deletecollection: the claims go, held by their finalizer until removed.
    c.ok(&["delete", "pvc", "--all", "--wait=false"]);
    let held = json(&c, &["get", "pvc", "data"]);
    assert!(held["metadata"]["deletionTimestamp"].is_string(), "{held}");
    let terminating = table(&c.ok(&["get", "pvc", "data"]));
    assert_eq!(terminating[1][1], "Terminating");
    for name in ["data", "second"] {
        c.ok(&[
            "patch",
            "pvc",
            name,
            "--type=json",
            "-p",
            r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
        ]);
    }
    let left = c.ok(&["get", "pvc", "--no-headers", "--ignore-not-found"]);
    assert!(left.trim().is_empty(), "{left}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_prune_reads_claims_and_volumes() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let dir = tempfile::tempdir()?;
    let manifest = |name: &str| {
        format!(
            "apiVersion: v1
kind: ConfigMap
metadata:
  name: {name}
  labels:
    app: pruned
data:
  k: v
"
        )
    };
    std::fs::write(dir.path().join("a.yaml"), manifest("a"))?;
    std::fs::write(dir.path().join("b.yaml"), manifest("b"))?;
    let path = dir.path().display().to_string();
    c.ok(&["apply", "-f", &path, "-l", "app=pruned", "--prune"]);
    std::fs::remove_file(dir.path().join("b.yaml"))?;
    let out = c.ok(&["apply", "-f", &path, "-l", "app=pruned", "--prune"]);
    assert!(out.contains("configmap/b pruned"), "{out}");
    let left = c.ok(&["get", "cm", "-l", "app=pruned", "-o", "name"]);
    assert_eq!(left.trim(), "configmap/a");
    Ok(())
}
