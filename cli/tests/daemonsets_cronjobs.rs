//! End to end with the real kubectl against a whole control plane (store, API server,
//! scheduler, node hosts, controllers): a DaemonSet following a node being tainted and a new
//! node joining, its revisions (`kubectl rollout history/undo`), a CronJob firing on a one-minute schedule and honouring Forbid, `kubectl
//! create job --from=cronjob/NAME`, the events of both, and the 422s of invalid specs.

use crate::common;

use std::time::Duration;

use common::control_plane::{
    is_ready, pods_json, start_controllers, start_node_host, start_scheduler, terminating,
    wait_for_events,
};
use common::{wait_until, Cluster};
use serde_json::Value;

const DAEMON_SET: &str = "apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
spec:
  selector:
    matchLabels:
      app: agent
  template:
    metadata:
      labels:
        app: agent
    spec:
      containers:
      - name: agent
        image: registry.k8s.io/pause:3.10
";

/// The nodes the running, ready, live agent pods are on, sorted.
fn agent_nodes(c: &Cluster) -> Vec<String> {
    let mut nodes: Vec<String> = pods_json(c, &["-l", "app=agent"])
        .iter()
        .filter(|p| p["status"]["phase"] == "Running" && is_ready(p) && !terminating(p))
        .map(|p| p["spec"]["nodeName"].as_str().unwrap_or("").to_string())
        .collect();
    nodes.sort();
    nodes
}

fn daemon_set_status(c: &Cluster) -> Value {
    let out = c.ok(&["get", "ds", "agent", "-o", "json"]);
    serde_json::from_str::<Value>(&out)
        .map(|v| v["status"].clone())
        .unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_set_follows_taints_and_new_nodes() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let _hosts = start_node_host(&c, 1, 2, "node-")?;
    let _scheduler = start_scheduler(&c)?;
    let controllers = start_controllers(&c, 40)?;

    let applied = c.ok_stdin(&["apply", "-f", "-"], DAEMON_SET);
    assert!(
        applied.contains("daemonset.apps/agent created"),
        "{applied}"
    );
    let spread = wait_until(
        "an agent pod runs on each node",
        Duration::from_secs(60),
        || async { agent_nodes(&c) == ["node-0", "node-1"] },
    )
    .await;
    if spread.is_err() {
        eprintln!("{}", controllers.log());
    }
    spread?;
    wait_until(
        "the status counts both nodes",
        Duration::from_secs(30),
        || async {
            let s = daemon_set_status(&c);
            s["desiredNumberScheduled"] == 2 && s["numberReady"] == 2 && s["numberAvailable"] == 2
        },
    )
    .await?;

    // Defaults, the scheduler's placement and the daemon tolerations, as on Kubernetes.
    let ds: Value = serde_json::from_str(&c.ok(&["get", "ds", "agent", "-o", "json"]))?;
    assert_eq!(ds["spec"]["updateStrategy"]["type"], "RollingUpdate");
    assert_eq!(
        ds["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"],
        1
    );
    assert_eq!(ds["spec"]["revisionHistoryLimit"], 10);
    assert_eq!(
        ds["metadata"]["annotations"]["deprecated.daemonset.template.generation"],
        "1"
    );
    let pod = &pods_json(&c, &["-l", "app=agent"])[0];
    let term = &pod["spec"]["affinity"]["nodeAffinity"]
        ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0];
    assert_eq!(term["matchFields"][0]["key"], "metadata.name", "{pod}");
    assert_eq!(pod["metadata"]["ownerReferences"][0]["kind"], "DaemonSet");
    assert_eq!(pod["metadata"]["labels"]["pod-template-generation"], "1");
    let tolerations = pod["spec"]["tolerations"].to_string();
    assert!(
        tolerations.contains("node.kubernetes.io/unreachable")
            && tolerations.contains("node.kubernetes.io/unschedulable"),
        "{tolerations}"
    );

    let table = c.ok(&["get", "ds"]);
    let lines: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines[0],
        [
            "NAME",
            "DESIRED",
            "CURRENT",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "NODE",
            "SELECTOR",
            "AGE"
        ],
        "{table}"
    );
    assert_eq!(
        lines[1][..7],
        ["agent", "2", "2", "2", "2", "2", "<none>"],
        "{table}"
    );
    let all = c.ok(&["get", "all"]);
    assert!(all.contains("daemonset.apps/agent"), "{all}");
    assert!(c.ok(&["api-resources", "--api-group=apps"]).contains("ds"));

    // A NoExecute taint the pods do not tolerate drives the daemon off the node.
    c.ok(&["taint", "node", "node-1", "dedicated=infra:NoExecute"]);
    wait_until(
        "the agent leaves the tainted node",
        Duration::from_secs(60),
        || async {
            agent_nodes(&c) == ["node-0"]
                && pods_json(&c, &["-l", "app=agent"]).len() == 1
                && daemon_set_status(&c)["desiredNumberScheduled"] == 1
        },
    )
    .await?;

    // A node that joins gets its daemon.
    let _late = start_node_host(&c, 2, 1, "late-")?;
    let joined = wait_until(
        "the agent runs on the new node",
        Duration::from_secs(60),
        || async {
            let nodes = agent_nodes(&c);
            nodes.len() == 2 && nodes[0].starts_with("late-") && nodes[1] == "node-0"
        },
    )
    .await;
    if joined.is_err() {
        eprintln!("{}", c.ok(&["get", "pods", "-o", "wide"]));
        eprintln!("{}", controllers.log());
    }
    joined?;
    let late = agent_nodes(&c)[0].clone();

    // Untainted, the node gets its daemon back.
    c.ok(&["taint", "node", "node-1", "dedicated=infra:NoExecute-"]);
    wait_until(
        "the agent is back on the untainted node",
        Duration::from_secs(60),
        || async { agent_nodes(&c) == [late.as_str(), "node-0", "node-1"] },
    )
    .await?;

    // A new template rolls out node by node.
    c.ok(&[
        "set",
        "image",
        "ds/agent",
        "agent=registry.k8s.io/pause:3.9",
    ]);
    wait_until(
        "every agent runs the new image",
        Duration::from_secs(90),
        || async {
            let pods = pods_json(&c, &["-l", "app=agent"]);
            pods.len() == 3
                && pods.iter().all(|p| {
                    p["spec"]["containers"][0]["image"] == "registry.k8s.io/pause:3.9"
                        && p["metadata"]["labels"]["pod-template-generation"] == "2"
                        && is_ready(p)
                })
        },
    )
    .await?;
    let s = daemon_set_status(&c);
    assert_eq!(s["updatedNumberScheduled"], 3, "{s}");
    assert_eq!(s["observedGeneration"], 2, "{s}");
    // The pods made and replaced are events on the DaemonSet, as kubectl describe shows.
    wait_for_events(
        &c,
        "daemonset/agent",
        &[
            (
                "SuccessfulCreate",
                "daemonset-controller",
                "Created pod: agent-",
            ),
            (
                "SuccessfulDelete",
                "daemonset-controller",
                "Deleted pod: agent-",
            ),
        ],
    )
    .await?;

    // Each template is a ControllerRevision: rollout history lists them and undo goes back.
    let revisions = |c: &Cluster| -> Vec<String> {
        c.ok(&["rollout", "history", "daemonset/agent"])
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .filter(|w| w.parse::<u32>().is_ok())
            .map(String::from)
            .collect()
    };
    assert_eq!(revisions(&c), ["1", "2"]);
    let history: Value =
        serde_json::from_str(&c.ok(&["get", "controllerrevisions", "-o", "json"]))?;
    let newest = history["items"]
        .as_array()
        .and_then(|items| items.iter().find(|r| r["revision"] == 2))
        .cloned()
        .unwrap_or(Value::Null);
    let hash = newest["metadata"]["labels"]["controller-revision-hash"].clone();
    assert_eq!(
        newest["metadata"]["name"],
        format!("agent-{}", hash.as_str().unwrap_or(""))
    );
    assert!(pods_json(&c, &["-l", "app=agent"])
        .iter()
        .all(|p| p["metadata"]["labels"]["controller-revision-hash"] == hash));
    let undone = c.ok(&["rollout", "undo", "daemonset/agent"]);
    assert!(
        undone.contains("daemonset.apps/agent rolled back"),
        "{undone}"
    );
    wait_until(
        "every agent runs the first image again",
        Duration::from_secs(90),
        || async {
            let pods = pods_json(&c, &["-l", "app=agent"]);
            pods.len() == 3
                && pods.iter().all(|p| {
                    p["spec"]["containers"][0]["image"] == "registry.k8s.io/pause:3.10"
                        && is_ready(p)
                })
        },
    )
    .await?;
    assert_eq!(revisions(&c), ["2", "3"]);
    c.ok(&["rollout", "status", "daemonset/agent", "--timeout=60s"]);

    // Invalid specs: 422 with the field path.
    let bad = DAEMON_SET
        .replace("name: agent\nspec:", "name: bad\nspec:")
        .replace("  selector:\n    matchLabels:\n      app: agent\n", "")
        .replace(
            "      containers:",
            "      restartPolicy: Never\n      containers:",
        );
    let err = c.fails(&["apply", "-f", &c.file("bad-ds.yaml", &bad)]);
    assert!(
        err.contains("The DaemonSet \"bad\" is invalid")
            && err.contains("spec.selector: Required value")
            && err.contains(
                "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\""
            ),
        "{err}"
    );

    // Deleting the DaemonSet deletes its pods.
    c.ok(&["delete", "ds", "agent"]);
    wait_until(
        "the agent pods are gone",
        Duration::from_secs(60),
        || async { pods_json(&c, &["-l", "app=agent"]).is_empty() },
    )
    .await?;
    Ok(())
}

const CRON_JOB: &str = "apiVersion: batch/v1
kind: CronJob
metadata:
  name: tick
spec:
  schedule: \"*/1 * * * *\"
  concurrencyPolicy: Forbid
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers:
          - name: tick
            image: registry.k8s.io/pause:3.10
";

fn cron_job(c: &Cluster) -> Value {
    serde_json::from_str(&c.ok(&["get", "cronjob", "tick", "-o", "json"])).unwrap_or(Value::Null)
}

fn jobs(c: &Cluster) -> Vec<Value> {
    serde_json::from_str::<Value>(&c.ok(&["get", "jobs", "-o", "json"]))
        .ok()
        .and_then(|v| v["items"].as_array().cloned())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cron_job_fires_and_honours_forbid() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let _hosts = start_node_host(&c, 1, 1, "node-")?;
    let _scheduler = start_scheduler(&c)?;
    let controllers = start_controllers(&c, 40)?;

    // The pause container never exits, so the first Job stays active and Forbid holds back the
    // next minutes.
    let applied = c.ok_stdin(&["apply", "-f", "-"], CRON_JOB);
    assert!(applied.contains("cronjob.batch/tick created"), "{applied}");
    let cj = cron_job(&c);
    assert_eq!(cj["spec"]["suspend"], false);
    assert_eq!(cj["spec"]["successfulJobsHistoryLimit"], 3);
    assert_eq!(cj["spec"]["failedJobsHistoryLimit"], 1);
    assert_eq!(
        cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["dnsPolicy"],
        "ClusterFirst"
    );

    let fired = wait_until(
        "the cronjob starts a job at the next minute",
        Duration::from_secs(75),
        || async {
            cron_job(&c)["status"]["active"]
                .as_array()
                .is_some_and(|a| a.len() == 1)
        },
    )
    .await;
    if fired.is_err() {
        eprintln!("{}", controllers.log());
    }
    fired?;
    let cj = cron_job(&c);
    let scheduled = cj["status"]["lastScheduleTime"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let minutes = chrono::DateTime::parse_from_rfc3339(&scheduled)?.timestamp() / 60;
    let all = jobs(&c);
    assert_eq!(all.len(), 1, "{all:?}");
    let job = &all[0];
    assert_eq!(job["metadata"]["name"], format!("tick-{minutes}"));
    assert_eq!(
        job["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"],
        scheduled
    );
    assert_eq!(job["metadata"]["ownerReferences"][0]["kind"], "CronJob");
    assert_eq!(cj["status"]["active"][0]["name"], job["metadata"]["name"]);

    let table = c.ok(&["get", "cronjobs"]);
    let lines: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines[0],
        ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST", "SCHEDULE", "AGE"],
        "{table}"
    );
    assert_eq!(
        lines[1][..7],
        ["tick", "*/1", "*", "*", "*", "*", "<none>"],
        "{table}"
    );
    assert_eq!(lines[1][7..9], ["False", "1"], "{table}");
    assert!(c.ok(&["get", "all"]).contains("cronjob.batch/tick"));

    // kubectl create job --from=cronjob/NAME: the manual Job is owned by the CronJob.
    let made = c.ok(&["create", "job", "by-hand", "--from=cronjob/tick"]);
    assert!(made.contains("job.batch/by-hand created"), "{made}");
    let by_hand: Value = serde_json::from_str(&c.ok(&["get", "job", "by-hand", "-o", "json"]))?;
    assert_eq!(by_hand["metadata"]["ownerReferences"][0]["name"], "tick");
    assert_eq!(
        by_hand["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"],
        "manual"
    );

    // Forbid: the next minute passes without a second scheduled Job.
    let next_minute = (minutes + 1) * 60 + 5;
    wait_until(
        "the next minute has passed",
        Duration::from_secs(75),
        || async { chrono::Utc::now().timestamp() >= next_minute },
    )
    .await?;
    let scheduled_jobs = jobs(&c)
        .iter()
        .filter(|j| j["metadata"]["name"] != "by-hand")
        .count();
    assert_eq!(scheduled_jobs, 1, "Forbid started a second job");
    assert_eq!(cron_job(&c)["status"]["lastScheduleTime"], scheduled);
    let created = format!("Created job tick-{minutes}");
    wait_for_events(
        &c,
        "cronjob/tick",
        &[
            ("SuccessfulCreate", "cronjob-controller", created.as_str()),
            (
                "JobAlreadyActive",
                "cronjob-controller",
                "Not starting job because prior execution is running and concurrency policy is Forbid",
            ),
        ],
    )
    .await?;

    // Invalid specs: 422 with the field paths and the schedule parser's words.
    let bad = CRON_JOB
        .replace("name: tick", "name: bad")
        .replace("\"*/1 * * * *\"", "\"*/1 * * *\"\n  timeZone: Mars/Olympus")
        .replace("Forbid", "Sometimes");
    let err = c.fails(&["apply", "-f", &c.file("bad-cj.yaml", &bad)]);
    assert!(
        err.contains("The CronJob \"bad\" is invalid")
            && err.contains("spec.schedule: Invalid value: \"*/1 * * *\": expected exactly 5 fields, found 4: [*/1 * * *]")
            && err.contains("spec.timeZone: Invalid value: \"Mars/Olympus\": unknown time zone Mars/Olympus")
            && err.contains("spec.concurrencyPolicy: Unsupported value: \"Sometimes\": supported values: \"Allow\", \"Forbid\", \"Replace\""),
        "{err}"
    );

    // Deleting the CronJob deletes its Jobs.
    c.ok(&["delete", "cronjob", "tick"]);
    wait_until("the jobs are gone", Duration::from_secs(60), || async {
        jobs(&c).is_empty()
    })
    .await?;
    Ok(())
}
