//! `kemu load` end to end: a small load against a real store and API server, with a test task
//! standing in for the scheduler and the kubelets (bind each pod to one of a few fake nodes,
//! report it Running, finish its deletion), until `kemu node-host` can do it in these tests.

mod common;

use std::collections::HashSet;
use std::sync::Arc;

use anyhow::Context;
use common::{kemu_exe, workspace, Cluster};
use hyper::Method;
use kemu::load::client::{ApiClient, LineReader};
use kemu::load::plan::LoadPlan;
use kemu::load::sampler::kemu_processes_naming;
use kemu::load::{run, LoadTarget};
use parking_lot::Mutex;
use serde_json::{json, Value};

const FAKE_NODES: usize = 4;

/// Plays scheduler and kubelet for every pod of the cluster: binds new pods, reports them
/// Running (fractional-second timestamps, like kemu's node host), and finishes graceful
/// deletions with a grace-0 delete carrying the pod's uid.
async fn fake_nodes(client: ApiClient) -> anyhow::Result<()> {
    let (status, body) = client.stream("pods", "/api/v1/pods?watch=true").await?;
    anyhow::ensure!(status.is_success(), "fake nodes' watch: {status}");
    let seen: Arc<Mutex<HashSet<String>>> = Default::default();
    let mut lines = LineReader::new(body);
    while let Some(line) = lines.next_line().await? {
        let event: Value = serde_json::from_slice(&line)?;
        let pod = &event["object"];
        let ns = pod["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let name = pod["metadata"]["name"].as_str().unwrap_or("").to_string();
        let uid = pod["metadata"]["uid"].as_str().unwrap_or("").to_string();
        let bound = pod["spec"]["nodeName"]
            .as_str()
            .is_some_and(|n| !n.is_empty());
        let deleting = pod["metadata"]["deletionTimestamp"].is_string();
        if event["type"] == "DELETED" {
            continue;
        }
        let key = if deleting {
            format!("delete {uid}")
        } else if !bound {
            format!("bind {uid}")
        } else {
            continue;
        };
        if !seen.lock().insert(key) {
            continue;
        }
        let client = client.clone();
        let container = pod["spec"]["containers"][0]["name"]
            .as_str()
            .unwrap_or("c")
            .to_string();
        tokio::spawn(async move {
            let base = format!("/api/v1/namespaces/{ns}/pods/{name}");
            if deleting {
                let options = json!({"gracePeriodSeconds": 0, "preconditions": {"uid": uid}});
                let _ = client
                    .call_json("delete", "pods", Method::DELETE, &base, &options)
                    .await;
                return;
            }
            let node = format!("node-{}", uid.len() % FAKE_NODES + name.len() % FAKE_NODES);
            let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                "target": {"kind": "Node", "name": node}});
            let Ok(r) = client
                .call_json(
                    "create",
                    "pods/binding",
                    Method::POST,
                    &format!("{base}/binding"),
                    &binding,
                )
                .await
            else {
                return;
            };
            if !r.status.is_success() {
                return;
            }
            let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
            let status = json!({"status": {
                "phase": "Running", "podIP": "10.244.0.5", "hostIP": "10.0.0.1", "startTime": now,
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}],
                "containerStatuses": [{"name": container, "ready": true, "restartCount": 0,
                    "image": "registry.k8s.io/pause:3.10", "imageID": "", "started": true,
                    "state": {"running": {"startedAt": now}}}]
            }});
            let _ = client
                .call_json(
                    "patch",
                    "pods/status",
                    Method::PATCH,
                    &format!("{base}/status"),
                    &status,
                )
                .await;
        });
    }
    Ok(())
}

/// A small JSON Schema checker for the keywords `docs/load-report.schema.json` uses: type,
/// const, enum, required, properties, additionalProperties, items, minimum, oneOf, $ref.
fn check(schema: &Value, root: &Value, value: &Value, at: &str, errors: &mut Vec<String>) {
    if let Some(r) = schema["$ref"].as_str() {
        let name = r.trim_start_matches("#/$defs/");
        return check(&root["$defs"][name], root, value, at, errors);
    }
    if let Some(types) = schema.get("type") {
        let types: Vec<&str> = match types {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        let ok = types.iter().any(|t| match *t {
            "object" => value.is_object(),
            "array" => value.is_array(),
            "string" => value.is_string(),
            "number" => value.is_number(),
            "integer" => value.is_u64() || value.is_i64(),
            "boolean" => value.is_boolean(),
            "null" => value.is_null(),
            _ => false,
        });
        if !ok {
            errors.push(format!("{at}: {value} is not of type {types:?}"));
            return;
        }
    }
    if let Some(c) = schema.get("const") {
        if c != value {
            errors.push(format!("{at}: {value} is not {c}"));
        }
    }
    if let Some(options) = schema["enum"].as_array() {
        if !options.contains(value) {
            errors.push(format!("{at}: {value} is not one of {options:?}"));
        }
    }
    if let (Some(min), Some(v)) = (schema["minimum"].as_f64(), value.as_f64()) {
        if v < min {
            errors.push(format!("{at}: {v} < {min}"));
        }
    }
    if let Some(options) = schema["oneOf"].as_array() {
        let matching = options
            .iter()
            .filter(|o| {
                let mut e = Vec::new();
                check(o, root, value, at, &mut e);
                e.is_empty()
            })
            .count();
        if matching != 1 {
            errors.push(format!("{at}: {matching} of oneOf match"));
        }
    }
    if let Some(object) = value.as_object() {
        for required in schema["required"].as_array().into_iter().flatten() {
            let key = required.as_str().unwrap_or_default();
            if !object.contains_key(key) {
                errors.push(format!("{at}: missing {key}"));
            }
        }
        for (key, v) in object {
            let path = format!("{at}.{key}");
            match schema["properties"].get(key) {
                Some(s) => check(s, root, v, &path, errors),
                None => match schema.get("additionalProperties") {
                    Some(Value::Bool(false)) => errors.push(format!("{path}: not in the schema")),
                    Some(s @ Value::Object(_)) => check(s, root, v, &path, errors),
                    _ => {}
                },
            }
        }
    }
    if let (Some(items), Some(array)) = (schema.get("items"), value.as_array()) {
        for (i, v) in array.iter().enumerate() {
            check(items, root, v, &format!("{at}[{i}]"), errors);
        }
    }
}

fn validate_report(report: &Value) {
    let text = std::fs::read_to_string(workspace().join("docs/load-report.schema.json"))
        .expect("the schema is in docs/");
    let schema: Value = serde_json::from_str(&text).expect("the schema is JSON");
    let mut errors = Vec::new();
    check(&schema, &schema, report, "$", &mut errors);
    assert!(
        errors.is_empty(),
        "the report breaks its schema:\n{}",
        errors.join("\n")
    );
}

#[test]
fn the_schema_checker_catches_mistakes() {
    let schema = json!({"type": "object", "additionalProperties": false, "required": ["a"],
        "properties": {"a": {"$ref": "#/$defs/n"}, "b": {"oneOf": [{"type": "null"}, {"type": "string"}]}},
        "$defs": {"n": {"type": "integer", "minimum": 1}}});
    let mut errors = Vec::new();
    check(
        &schema,
        &schema,
        &json!({"a": 2, "b": null}),
        "$",
        &mut errors,
    );
    assert!(errors.is_empty(), "{errors:?}");
    check(
        &schema,
        &schema,
        &json!({"a": 0, "b": 3, "c": 1}),
        "$",
        &mut errors,
    );
    assert_eq!(errors.len(), 3, "{errors:?}");
}

/// Copies a report to `$KEMU_LOAD_KEEP` (a directory), to look at after the test.
fn keep(path: &std::path::Path) {
    if let Some(dir) = std::env::var_os("KEMU_LOAD_KEEP") {
        let dir = std::path::PathBuf::from(dir);
        let _ = std::fs::create_dir_all(&dir);
        if let Some(name) = path.file_name() {
            let _ = std::fs::copy(path, dir.join(name));
        }
    }
}

/// Pods of one run the API lists, and how many of them are Running.
async fn listed(c: &Cluster, run_id: &str) -> anyhow::Result<(usize, usize)> {
    let (code, list) = c
        .http(
            "GET",
            &format!("/api/v1/pods?labelSelector=kemu.dev%2Fload-run%3D{run_id}"),
            None,
            b"",
        )
        .await?;
    anyhow::ensure!(code == 200, "list: {list}");
    let items = list["items"].as_array().context("items")?;
    let running = items
        .iter()
        .filter(|p| p["status"]["phase"] == "Running")
        .count();
    Ok((items.len(), running))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_load_accounts_for_every_pod() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let server = format!("http://{}", c.api.http);
    let nodes = tokio::spawn(fake_nodes(ApiClient::new(&server, false)?));

    // Leave the pods Running, to compare the report with what the API lists.
    let report_dir = c.dir.path().join("report-1");
    let target = LoadTarget {
        kubeconfig: c.kubeconfig.clone(),
        report_dir: report_dir.clone(),
        processes: kemu_processes_naming(c.dir.path()),
    };
    let plan = LoadPlan {
        pods: 60,
        rate: 60.0,
        namespaces: 3,
        delete: false,
        running_timeout_seconds: 60.0,
        ..Default::default()
    };
    let outcome = run(&plan, &target).await?;
    println!("{}", outcome.summary);
    keep(&outcome.report_html);
    let report: Value = serde_json::from_slice(&std::fs::read(&outcome.report_json)?)?;
    validate_report(&report);
    assert!(outcome.passed, "{}", outcome.summary);
    let pods = &report["pods"];
    assert_eq!(pods["attempted"], 60);
    assert_eq!(pods["created"], 60);
    assert_eq!(pods["running"], 60);
    assert_eq!(pods["unaccounted"], 0);
    let run_id = report["run_id"].as_str().context("run_id")?;
    assert_eq!(listed(&c, run_id).await?, (60, 60));
    assert_eq!(pods["api_listed_when_running"], 60);
    assert_eq!(report["latency_ms"]["pod_startup"]["count"], 60);
    // The fake node stamps microseconds; the API server stamps whole seconds.
    assert_eq!(report["server_stamped_latency_ms"]["resolution_ms"], 1000);
    let create = &report["phases"][0];
    assert_eq!(create["kind"], "create");
    let achieved = create["achieved_rate"].as_f64().context("rate")?;
    assert!(
        (achieved - 60.0).abs() < 6.0,
        "achieved {achieved}/s of 60/s"
    );
    let samples = report["processes"]
        .as_array()
        .context("processes")?
        .iter()
        .map(|p| p["name"].as_str().unwrap_or_default().to_string())
        .collect::<Vec<_>>();
    assert!(
        samples.iter().any(|n| n.starts_with("apiserver-"))
            && samples.iter().any(|n| n.starts_with("store-"))
            && samples.last().map(String::as_str) == Some("kemu-load"),
        "{samples:?}"
    );
    let html = std::fs::read_to_string(&outcome.report_html)?;
    assert!(html.contains("<svg") && !html.contains("<script") && !html.contains("http-equiv"));
    for section in ["Throughput over time", "Phase breakdown", "Components"] {
        assert!(html.contains(section), "the HTML report has no {section}");
    }
    let per_ns = c
        .http("GET", "/api/v1/namespaces/kemu-load-2/pods", None, b"")
        .await?
        .1;
    assert_eq!(per_ns["items"].as_array().map(Vec::len), Some(20));

    // Churn, then delete everything, through the command line; an impossible SLO fails it.
    let report_dir = c.dir.path().join("report-2");
    let out = tokio::process::Command::new(kemu_exe())
        .args(["load", "--kubeconfig"])
        .arg(&c.kubeconfig)
        .arg("--report-dir")
        .arg(&report_dir)
        .args(["--pods", "40", "--rate", "80", "--namespaces", "2"])
        .args(["--churn-cycles", "1", "--churn-percent", "25"])
        .args(["--slo-pod-startup-p99-ms", "1"])
        .output()
        .await?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        !out.status.success(),
        "a 1 ms SLO must fail:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value =
        serde_json::from_slice(&std::fs::read(report_dir.join("load-report.json"))?)?;
    println!("{stdout}");
    keep(&report_dir.join("load-report.json"));
    validate_report(&report);
    assert!(stdout.contains("SLO pod_startup_p99_ms") && stdout.contains("FAILED"));
    assert_eq!(report["passed"], false);
    let pods = &report["pods"];
    assert_eq!(pods["unaccounted"], 0, "{pods}");
    assert_eq!(pods["attempted"], 50, "40 pods and 10 re-created");
    assert_eq!(pods["delete_sent"], 50);
    assert_eq!(pods["gone"], 50);
    assert_eq!(pods["api_listed_when_running"], 40);
    assert_eq!(pods["api_listed_at_end"], 0);
    let run_id = report["run_id"].as_str().context("run_id")?;
    assert_eq!(listed(&c, run_id).await?, (0, 0));
    let slo = &report["slo"][0];
    assert_eq!(
        (slo["name"].as_str(), slo["passed"].as_bool()),
        (Some("pod_startup_p99_ms"), Some(false))
    );
    assert_eq!(report["latency_ms"]["delete_to_gone"]["count"], 50);
    let kinds: Vec<&str> = report["phases"]
        .as_array()
        .context("phases")?
        .iter()
        .filter_map(|p| p["kind"].as_str())
        .collect();
    assert_eq!(
        kinds,
        [
            "create",
            "wait_running",
            "delete",
            "wait_gone",
            "create",
            "wait_running",
            "delete",
            "wait_gone"
        ]
    );
    // The first run's pods are untouched.
    assert_eq!(report["pods"]["stray_watch_events"], 0);
    nodes.abort();
    Ok(())
}
