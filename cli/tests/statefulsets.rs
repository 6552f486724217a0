//! End to end with the real kubectl against a whole control plane (store, API server,
//! scheduler, node hosts, controllers): StatefulSets and their ControllerRevisions — ordered
//! creation with stable names, scaling down from the highest ordinal, Parallel management, a
//! rolling update held at a partition, `kubectl rollout status/history/undo`, deletion with each
//! propagation policy, the set's events, and the 422 of an invalid spec.

use crate::common;

use std::sync::Mutex;
use std::time::Duration;

use common::control_plane::{
    exactly_running, is_ready, pods_json, start_controllers, start_node_host, start_scheduler,
    terminating, wait_for_events,
};
use common::{wait_until, Cluster};
use serde_json::Value;

const WEB: &str = "apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: web
spec:
  serviceName: nginx
  replicas: 3
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
        volumeMounts:
        - name: www
          mountPath: /usr/share/nginx/html
  volumeClaimTemplates:
  - metadata:
      name: www
    spec:
      accessModes: [ReadWriteOnce]
      resources:
        requests:
          storage: 1Gi
";

fn get_json(c: &Cluster, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&c.ok(&all)).unwrap_or(Value::Null)
}

/// Pod name → (ready, terminating, image) of the pods selected by `selector`.
fn members(c: &Cluster, selector: &str) -> Vec<(String, bool, bool, String)> {
    let mut pods: Vec<(String, bool, bool, String)> = pods_json(c, &["-l", selector])
        .iter()
        .map(|p| {
            (
                p["metadata"]["name"].as_str().unwrap_or("").to_string(),
                is_ready(p) && p["status"]["phase"] == "Running",
                terminating(p),
                p["spec"]["containers"][0]["image"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            )
        })
        .collect();
    pods.sort();
    pods
}

fn images(c: &Cluster, selector: &str) -> Vec<String> {
    members(c, selector)
        .into_iter()
        .filter(|m| m.1 && !m.2)
        .map(|m| format!("{}={}", m.0, m.3))
        .collect()
}

/// The revision numbers `kubectl rollout history statefulset/web` lists.
fn history_revisions(c: &Cluster) -> Vec<String> {
    c.ok(&["rollout", "history", "statefulset/web"])
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| w.parse::<u32>().is_ok())
        .map(String::from)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateful_set_lifecycle() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let _hosts = start_node_host(&c, 1, 2, "node-")?;
    let _scheduler = start_scheduler(&c)?;
    let controllers = start_controllers(&c, 40)?;

    // OrderedReady: web-N+1 appears only once web-N is Running and Ready.
    c.ok_stdin(&["apply", "-f", "-"], WEB);
    let violations = Mutex::new(Vec::new());
    let created = wait_until("3 web pods run", Duration::from_secs(60), || async {
        let seen = members(&c, "app=web");
        for window in seen.windows(2) {
            if !window[0].1 {
                if let Ok(mut v) = violations.lock() {
                    v.push(format!(
                        "{} exists before {} is ready",
                        window[1].0, window[0].0
                    ));
                }
            }
        }
        exactly_running(&c, "app=web", 3, &[])
    })
    .await;
    if created.is_err() {
        eprintln!("{}", controllers.log());
    }
    created?;
    assert_eq!(*violations.lock().expect("lock"), Vec::<String>::new());
    let names: Vec<String> = members(&c, "app=web").into_iter().map(|m| m.0).collect();
    assert_eq!(names, ["web-0", "web-1", "web-2"]);

    let out = c.ok(&["rollout", "status", "statefulset/web", "--timeout=60s"]);
    assert!(
        out.contains("partitioned roll out complete: 3 new pods have been updated..."),
        "{out}"
    );
    let sts = get_json(&c, &["get", "sts", "web"]);
    let spec = &sts["spec"];
    assert_eq!(spec["podManagementPolicy"], "OrderedReady");
    assert_eq!(spec["revisionHistoryLimit"], 10);
    assert_eq!(spec["updateStrategy"]["rollingUpdate"]["partition"], 0);
    assert_eq!(
        spec["persistentVolumeClaimRetentionPolicy"]["whenDeleted"],
        "Retain"
    );
    assert_eq!(
        spec["volumeClaimTemplates"][0]["status"]["phase"],
        "Pending"
    );
    let status = &sts["status"];
    assert_eq!(status["readyReplicas"], 3, "{status}");
    assert_eq!(
        status["currentRevision"], status["updateRevision"],
        "{status}"
    );
    assert_eq!(status["observedGeneration"], 1, "{status}");
    let first_revision = status["updateRevision"].as_str().unwrap_or("").to_string();

    let pod = get_json(&c, &["get", "pod", "web-1"]);
    let labels = &pod["metadata"]["labels"];
    assert_eq!(labels["statefulset.kubernetes.io/pod-name"], "web-1");
    assert_eq!(labels["apps.kubernetes.io/pod-index"], "1");
    assert_eq!(labels["controller-revision-hash"], first_revision.as_str());
    assert_eq!(pod["spec"]["hostname"], "web-1");
    assert_eq!(pod["spec"]["subdomain"], "nginx");
    let volume = pod["spec"]["volumes"]
        .as_array()
        .and_then(|vs| vs.iter().find(|v| v["name"] == "www"))
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(volume["persistentVolumeClaim"]["claimName"], "www-web-1");
    assert_eq!(pod["metadata"]["ownerReferences"][0]["kind"], "StatefulSet");

    // Tables as kubectl prints them.
    let table = c.ok(&["get", "sts", "-o", "wide"]);
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows[0], ["NAME", "READY", "AGE", "CONTAINERS", "IMAGES"]);
    assert_eq!(rows[1][..2], ["web", "3/3"]);
    assert_eq!(rows[1][3..], ["nginx", "nginx:1.27"]);
    let table = c.ok(&["get", "controllerrevisions"]);
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows[0], ["NAME", "CONTROLLER", "REVISION", "AGE"]);
    assert_eq!(
        rows[1][..3],
        [first_revision.as_str(), "statefulset.apps/web", "1"]
    );
    let all = c.ok(&["get", "all"]);
    assert!(all.contains("statefulset.apps/web"), "{all}");

    // Each pod has its own claim from the template, made before it and bound by the default
    // class; the claims carry the set's selector labels and no owner (Retain).
    let claims = get_json(&c, &["get", "pvc", "-l", "app=web"]);
    let mut seen: Vec<(String, String)> = claims["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|pvc| {
                    let name = pvc["metadata"]["name"].as_str().unwrap_or("").to_string();
                    let phase = pvc["status"]["phase"].as_str().unwrap_or("").to_string();
                    (name, phase)
                })
                .collect()
        })
        .unwrap_or_default();
    seen.sort();
    let expected: Vec<(String, String)> = ["www-web-0", "www-web-1", "www-web-2"]
        .iter()
        .map(|n| (n.to_string(), "Bound".to_string()))
        .collect();
    assert_eq!(seen, expected, "{claims}");
    assert!(
        claims["items"][0]["metadata"]["ownerReferences"].is_null(),
        "{claims}"
    );

    // Scaling down removes the highest ordinal first.
    c.ok(&["scale", "sts", "web", "--replicas=1"]);
    let violations = Mutex::new(Vec::new());
    wait_until("only web-0 is left", Duration::from_secs(60), || async {
        let seen = members(&c, "app=web");
        let alive = |name: &str| seen.iter().any(|m| m.0 == name && !m.2);
        if !alive("web-1") && alive("web-2") {
            if let Ok(mut v) = violations.lock() {
                v.push("web-1 went before web-2".to_string());
            }
        }
        seen.len() == 1 && seen[0].0 == "web-0"
    })
    .await?;
    assert_eq!(*violations.lock().expect("lock"), Vec::<String>::new());
    // Each pod made and removed is an event on the set, as kubectl describe shows.
    wait_for_events(
        &c,
        "statefulset/web",
        &[
            (
                "SuccessfulCreate",
                "statefulset-controller",
                "create Claim www-web-0 Pod web-0 in StatefulSet web success",
            ),
            (
                "SuccessfulCreate",
                "statefulset-controller",
                "create Pod web-0 in StatefulSet web successful",
            ),
            (
                "SuccessfulCreate",
                "statefulset-controller",
                "create Pod web-2 in StatefulSet web successful",
            ),
            (
                "SuccessfulDelete",
                "statefulset-controller",
                "delete Pod web-2 in StatefulSet web successful",
            ),
        ],
    )
    .await?;
    // Retain: the claims of the removed pods stay, and the pods take them back.
    let kept = c.ok(&["get", "pvc", "www-web-2", "-o", "name"]);
    assert_eq!(kept.trim(), "persistentvolumeclaim/www-web-2");
    c.ok(&["scale", "sts", "web", "--replicas=3"]);
    wait_until("3 web pods run again", Duration::from_secs(60), || async {
        exactly_running(&c, "app=web", 3, &[])
    })
    .await?;

    // A rolling update held at partition 2 replaces web-2 only.
    c.ok(&[
        "patch",
        "sts",
        "web",
        "-p",
        r#"{"spec":{"updateStrategy":{"rollingUpdate":{"partition":2}}}}"#,
    ]);
    c.ok(&["set", "image", "sts/web", "nginx=nginx:1.28"]);
    wait_until("web-2 runs nginx:1.28", Duration::from_secs(60), || async {
        images(&c, "app=web") == ["web-0=nginx:1.27", "web-1=nginx:1.27", "web-2=nginx:1.28"]
    })
    .await?;
    let out = c.ok(&["rollout", "status", "statefulset/web", "--timeout=60s"]);
    assert!(
        out.contains("partitioned roll out complete: 1 new pods have been updated..."),
        "{out}"
    );
    let status = get_json(&c, &["get", "sts", "web"])["status"].clone();
    assert_eq!(status["updatedReplicas"], 1, "{status}");
    assert_eq!(
        status["currentRevision"],
        first_revision.as_str(),
        "{status}"
    );
    assert_ne!(
        status["updateRevision"],
        first_revision.as_str(),
        "{status}"
    );

    // Partition 0 lets the update reach every pod; it then becomes the current revision.
    c.ok(&[
        "patch",
        "sts",
        "web",
        "-p",
        r#"{"spec":{"updateStrategy":{"rollingUpdate":{"partition":0}}}}"#,
    ]);
    c.ok(&["rollout", "status", "statefulset/web", "--timeout=90s"]);
    wait_until(
        "every pod runs nginx:1.28",
        Duration::from_secs(60),
        || async {
            images(&c, "app=web") == ["web-0=nginx:1.28", "web-1=nginx:1.28", "web-2=nginx:1.28"]
        },
    )
    .await?;
    wait_until(
        "the update is the current revision",
        Duration::from_secs(30),
        || async {
            let s = &get_json(&c, &["get", "sts", "web"])["status"];
            s["currentRevision"] == s["updateRevision"] && s["currentReplicas"] == 3
        },
    )
    .await?;

    assert_eq!(history_revisions(&c), ["1", "2"]);
    let detail = c.ok(&["rollout", "history", "statefulset/web", "--revision=1"]);
    assert!(detail.contains("nginx:1.27"), "{detail}");

    // Undo goes back to revision 1's template, which becomes revision 3.
    let out = c.ok(&["rollout", "undo", "statefulset/web"]);
    assert!(out.contains("statefulset.apps/web rolled back"), "{out}");
    wait_until(
        "every pod runs nginx:1.27 again",
        Duration::from_secs(90),
        || async {
            images(&c, "app=web") == ["web-0=nginx:1.27", "web-1=nginx:1.27", "web-2=nginx:1.27"]
        },
    )
    .await?;
    assert_eq!(history_revisions(&c), ["2", "3"]);
    let status = get_json(&c, &["get", "sts", "web"])["status"].clone();
    assert_eq!(
        status["updateRevision"],
        first_revision.as_str(),
        "{status}"
    );

    // Foreground deletion: the pods go first, then the set.
    c.ok(&[
        "delete",
        "sts",
        "web",
        "--cascade=foreground",
        "--wait=false",
    ]);
    wait_until(
        "the web pods and the set are gone",
        Duration::from_secs(60),
        || async {
            pods_json(&c, &["-l", "app=web"]).is_empty()
                && !c.kubectl(&["get", "sts", "web"]).status.success()
        },
    )
    .await?;
    wait_until(
        "its revisions are collected",
        Duration::from_secs(30),
        || async {
            c.ok(&["get", "controllerrevisions", "-o", "name"])
                .is_empty()
        },
    )
    .await?;
    Ok(())
}

const DB: &str = "apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: NAME
spec:
  serviceName: NAME
  replicas: 2
  podManagementPolicy: Parallel
  selector:
    matchLabels:
      app: NAME
  template:
    metadata:
      labels:
        app: NAME
    spec:
      containers:
      - name: db
        image: postgres:17
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_sets_cascade_and_invalid_specs() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let _hosts = start_node_host(&c, 1, 2, "node-")?;
    let _scheduler = start_scheduler(&c)?;
    let controllers = start_controllers(&c, 40)?;

    for name in ["db", "cache"] {
        c.ok_stdin(&["apply", "-f", "-"], &DB.replace("NAME", name));
    }
    let running = wait_until("both sets run 2 pods", Duration::from_secs(60), || async {
        exactly_running(&c, "app=db", 2, &[]) && exactly_running(&c, "app=cache", 2, &[])
    })
    .await;
    if running.is_err() {
        eprintln!("{}", controllers.log());
    }
    running?;
    // Parallel scale-up: both new pods are created without waiting for each other.
    c.ok(&["scale", "sts", "db", "--replicas=4"]);
    let both = wait_until("db-2 and db-3 exist", Duration::from_secs(30), || async {
        let seen = members(&c, "app=db");
        seen.iter().any(|m| m.0 == "db-2") && seen.iter().any(|m| m.0 == "db-3")
    });
    both.await?;

    // Orphan: the set goes, its pods stay without an owner.
    c.ok(&["delete", "sts", "db", "--cascade=orphan"]);
    wait_until("db is gone", Duration::from_secs(30), || async {
        !c.kubectl(&["get", "sts", "db"]).status.success()
    })
    .await?;
    wait_until(
        "the db pods are orphaned",
        Duration::from_secs(30),
        || async {
            let pods = pods_json(&c, &["-l", "app=db"]);
            pods.len() == 4
                && pods.iter().all(|p| {
                    p["metadata"]["ownerReferences"]
                        .as_array()
                        .is_none_or(Vec::is_empty)
                })
        },
    )
    .await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(pods_json(&c, &["-l", "app=db"]).len(), 4);

    // Background: the set goes at once, the garbage collector takes its pods.
    c.ok(&["delete", "sts", "cache"]);
    wait_until(
        "the cache pods are gone",
        Duration::from_secs(60),
        || async { pods_json(&c, &["-l", "app=cache"]).is_empty() },
    )
    .await?;

    // whenScaled and whenDeleted Delete: a scale-down takes the removed pod's claim with it,
    // and deleting the set takes the rest.
    let logs = DB
        .replace("NAME", "logs")
        .replace(
            "  podManagementPolicy: Parallel\n",
            "  podManagementPolicy: Parallel\n  persistentVolumeClaimRetentionPolicy:\n    whenDeleted: Delete\n    whenScaled: Delete\n",
        )
        + "  volumeClaimTemplates:\n  - metadata:\n      name: data\n    spec:\n      accessModes: [ReadWriteOnce]\n      resources:\n        requests:\n          storage: 1Gi\n";
    c.ok_stdin(&["apply", "-f", "-"], &logs);
    wait_until("both logs pods run", Duration::from_secs(60), || async {
        exactly_running(&c, "app=logs", 2, &[])
    })
    .await?;
    let claim_names = || {
        let out = c.ok(&["get", "pvc", "-l", "app=logs", "-o", "name"]);
        let mut names: Vec<String> = out.lines().map(str::to_string).collect();
        names.sort();
        names
    };
    assert_eq!(
        claim_names(),
        [
            "persistentvolumeclaim/data-logs-0",
            "persistentvolumeclaim/data-logs-1"
        ]
    );
    let owner =
        get_json(&c, &["get", "pvc", "data-logs-0"])["metadata"]["ownerReferences"][0].clone();
    assert_eq!(owner["kind"], "StatefulSet", "{owner}");
    c.ok(&["scale", "sts", "logs", "--replicas=1"]);
    let scaled = wait_until(
        "data-logs-1 goes with logs-1",
        Duration::from_secs(60),
        || async { claim_names() == ["persistentvolumeclaim/data-logs-0"] },
    )
    .await;
    if scaled.is_err() {
        eprintln!("{}", c.ok(&["get", "pvc,pods", "-o", "yaml"]));
        eprintln!("{}", controllers.log());
    }
    scaled?;
    c.ok(&["delete", "sts", "logs"]);
    wait_until(
        "data-logs-0 goes with the set",
        Duration::from_secs(60),
        || async { claim_names().is_empty() },
    )
    .await?;

    // Invalid specs: 422 with Kubernetes' field paths and messages.
    let bad = DB
        .replace("NAME", "bad")
        .replace(
            "podManagementPolicy: Parallel",
            "podManagementPolicy: Sometimes",
        )
        .replace("replicas: 2", "replicas: -1")
        .replace(
            "      labels:\n        app: bad",
            "      labels:\n        app: other",
        );
    let err = c.fails(&["apply", "-f", &c.file("bad-sts.yaml", &bad)]);
    assert!(
        err.contains("The StatefulSet \"bad\" is invalid")
            && err.contains("spec.podManagementPolicy: Invalid value: \"Sometimes\": must be 'OrderedReady' or 'Parallel'")
            && err.contains("spec.replicas: Invalid value: -1: must be greater than or equal to 0")
            && err.contains("spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"other\"}: `selector` does not match template `labels`"),
        "{err}"
    );
    let store = DB.replace("NAME", "store");
    c.ok_stdin(&["apply", "-f", "-"], &store);
    let renamed = store.replace("serviceName: store", "serviceName: other");
    let err = c.fails(&["apply", "-f", &c.file("renamed.yaml", &renamed)]);
    assert!(
        err.contains("spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"),
        "{err}"
    );
    Ok(())
}
