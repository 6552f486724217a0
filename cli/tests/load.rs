//! `kemu load` end to end through `kemu run`: a real cluster (store, API server, scheduler,
//! controller manager, node hosts with 200 emulated nodes) from a config file, the load, the
//! report, down. The report must account for every pod, agree with what the API listed, and
//! match `docs/load-report.schema.json`; an impossible SLO must fail the run.

use crate::common;

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use common::{kemu_exe, workspace, Interruptible};
use serde_json::{json, Value};

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

/// `kemu run -f CONFIG --dir DIR`, the config written beside the directory.
fn kemu_run_command(config: &str, dir: &Path) -> anyhow::Result<tokio::process::Command> {
    let file = dir.with_extension("toml");
    std::fs::write(&file, config)?;
    let mut command = tokio::process::Command::new(kemu_exe());
    command
        .args(["run", "-f"])
        .arg(&file)
        .arg("--dir")
        .arg(dir)
        .env(
            "RUST_LOG",
            "warn,kemu=info,cluster=info,load=info,chaos=info",
        );
    Ok(command)
}

/// Runs `kemu run -f CONFIG --dir DIR`; its exit success, stdout and stderr.
async fn kemu_run(config: &str, dir: &Path) -> anyhow::Result<(bool, String, String)> {
    let out = kemu_run_command(config, dir)?.output().await?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// No process of the cluster in `dir` is left.
/// Runs `config` in `dir`, which must pass and leave no process behind; the report (valid
/// against the schema) and what `kemu run` printed.
async fn passing_run(config: &str, dir: &Path) -> anyhow::Result<(Value, String)> {
    let (ok, stdout, stderr) = kemu_run(config, dir).await?;
    println!("{stdout}");
    assert!(ok, "kemu run failed:\n{stdout}\n{stderr}");
    nothing_left(dir);
    let json_path = dir.join("report/load-report.json");
    keep(&json_path);
    let report: Value = serde_json::from_slice(&std::fs::read(&json_path)?)?;
    validate_report(&report);
    assert_eq!(report["passed"], true);
    Ok((report, stdout))
}

fn nothing_left(dir: &Path) {
    let needle = dir.display().to_string();
    let left: Vec<String> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&needle) && !c.contains(" run -f "))
        .collect();
    assert!(left.is_empty(), "processes left behind: {left:?}");
}

fn small_cluster(name: &str, load: &str) -> String {
    format!(
        r#"
name = "{name}"
[store]
members = 3
[scheduler]
workers = 4
[controllers]
replicas = 1
[nodes]
hosts = 2
per_host = 100
[load]
{load}
"#
    )
}

/// The load run CI makes: 500 pods at 100/s on 200 nodes, left Running to compare the
/// report with the API's listing, through `kemu run`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kemu_run_accounts_for_every_pod() -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().join("load-ci");
    let config = small_cluster(
        "load-ci",
        // A debug build on a shared 2-core machine: the SLO is not what this test is about.
        "pods = 500\nrate = 100.0\nnamespaces = 2\nrunning_timeout_seconds = 120.0\ngone_timeout_seconds = 120.0\nslo_pod_startup_p99_ms = 120000.0",
    );
    let (ok, stdout, stderr) = kemu_run(&config, &dir).await?;
    println!("{stdout}");
    assert!(ok, "kemu run failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("PASSED"), "{stdout}");
    nothing_left(&dir);
    let json_path = dir.join("report/load-report.json");
    assert!(
        stdout.contains(&json_path.display().to_string()),
        "the run names its report: {stdout}"
    );
    keep(&json_path);
    keep(&dir.join("report/load-report.html"));
    let report: Value = serde_json::from_slice(&std::fs::read(&json_path)?)?;
    validate_report(&report);
    assert_eq!(report["passed"], true);
    let pods = &report["pods"];
    for (field, want) in [
        ("attempted", 500),
        ("created", 500),
        ("running", 500),
        ("delete_sent", 500),
        ("gone", 500),
        ("unaccounted", 0),
        // What the API listed, not what the load counted.
        ("api_listed_when_running", 500),
        ("api_listed_at_end", 0),
    ] {
        assert_eq!(pods[field], want, "pods.{field}: {pods}");
    }
    // The 200 nodes, Ready from start to end, their heartbeats on time throughout.
    let nodes = &report["nodes"];
    assert_eq!(nodes["nodes"], 200, "{nodes}");
    assert_eq!(nodes["ready_at_start"], 200, "{nodes}");
    assert_eq!(nodes["ready_at_end"], 200, "{nodes}");
    assert_eq!(nodes["not_ready_transitions"], 0, "{nodes}");
    // Per pod, by uid, against the API's listings.
    let when_running = &report["accounting"]["when_running"];
    assert_eq!(when_running["passed"], true, "{when_running}");
    assert_eq!(when_running["acknowledged_creates"], 500);
    assert_eq!(when_running["lost"], 0);
    assert_eq!(when_running["not_running"], 0);
    let at_end = &report["accounting"]["at_end"];
    assert_eq!(at_end["passed"], true, "{at_end}");
    assert_eq!(at_end["acknowledged_deletes"], 500);
    assert_eq!(at_end["resurrected"], 0);
    for name in [
        "pod_startup",
        "create_to_schedule",
        "schedule_to_run",
        "delete_to_gone",
    ] {
        assert_eq!(report["latency_ms"][name]["count"], 500, "{name}");
    }
    let create = &report["phases"][0];
    assert_eq!(create["kind"], "create");
    let achieved = create["achieved_rate"].as_f64().context("rate")?;
    assert!(
        (achieved - 100.0).abs() < 10.0,
        "achieved {achieved}/s of 100/s"
    );
    let names: Vec<&str> = report["processes"]
        .as_array()
        .context("processes")?
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    for want in [
        "s1",
        "apiserver-1",
        "scheduler-1",
        "controllers-1",
        "nodehost-2",
        "kemu-load",
    ] {
        assert!(names.contains(&want), "{want} not sampled: {names:?}");
    }
    // Memory per node and per pod of every component: a node host holds its 100 nodes and
    // its share of the pods in memory of its own.
    for p in report["processes"].as_array().context("processes")? {
        assert!(
            p["rss_bytes_per_node"].as_f64().is_some_and(|b| b > 0.0),
            "{p}"
        );
        assert!(p["rss_bytes_per_pod"].as_f64().is_some(), "{p}");
    }
    assert!(
        stdout.contains("KiB/node") && stdout.contains("KiB/pod"),
        "{stdout}"
    );
    let html = std::fs::read_to_string(dir.join("report/load-report.html"))?;
    assert!(html.contains("<svg") && !html.contains("<script") && !html.contains("http-equiv"));
    for section in ["Throughput over time", "Phase breakdown", "Components"] {
        assert!(html.contains(section), "the HTML report has no {section}");
    }
    assert!(report.get("chaos").is_none(), "no [chaos] plan, no chaos");
    Ok(())
}

/// Churn through `kemu run`, and a 1 ms pod_startup SLO nobody meets: the run fails (exit
/// code), says so, and its report still accounts for every pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_impossible_slo_fails_kemu_run() -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().join("load-slo");
    let config = small_cluster(
        "load-slo",
        "pods = 40\nrate = 80.0\nnamespaces = 2\nchurn_cycles = 1\nchurn_percent = 25.0\nslo_pod_startup_p99_ms = 1.0",
    );
    let (ok, stdout, stderr) = kemu_run(&config, &dir).await?;
    println!("{stdout}");
    assert!(!ok, "a 1 ms SLO must fail kemu run:\n{stdout}\n{stderr}");
    assert!(stdout.contains("SLO pod_startup_p99_ms") && stdout.contains("FAILED"));
    nothing_left(&dir);
    let report: Value =
        serde_json::from_slice(&std::fs::read(dir.join("report/load-report.json"))?)?;
    keep(&dir.join("report/load-report.json"));
    validate_report(&report);
    assert_eq!(report["passed"], false);
    let slo = &report["slo"][0];
    assert_eq!(
        (slo["name"].as_str(), slo["passed"].as_bool()),
        (Some("pod_startup_p99_ms"), Some(false))
    );
    // Only the SLO failed: the pods are all accounted for.
    for check in report["slo"].as_array().context("slo")?.iter().skip(1) {
        assert_eq!(check["passed"], true, "{check}");
    }
    let pods = &report["pods"];
    assert_eq!(pods["unaccounted"], 0, "{pods}");
    assert_eq!(pods["attempted"], 50, "40 pods and 10 re-created");
    assert_eq!(pods["delete_sent"], 50);
    assert_eq!(pods["gone"], 50);
    assert_eq!(pods["api_listed_when_running"], 40);
    assert_eq!(pods["api_listed_at_end"], 0);
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
    Ok(())
}

/// SIGTERM to `kemu run` in the middle of a slow create phase: the load stops sending, samples
/// every process while the cluster is still up, writes the report of what it measured (marked
/// interrupted, the phases it never started marked so, no violations for pods merely cut
/// short), then the cluster stops; the exit code is 128 + SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_kemu_run_still_writes_its_report() -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().join("load-stop");
    // 400 pods at 10/s: the create phase lasts 40 s, the test stops it after a few.
    let config = small_cluster(
        "load-stop",
        "pods = 400\nrate = 10.0\nnamespaces = 2\nrunning_timeout_seconds = 120.0\nslo_pod_startup_p99_ms = 120000.0",
    );
    let mut run = Interruptible::spawn(
        &mut kemu_run_command(&config, &dir)?,
        "load: create: 400 pods",
    )?;
    run.reached(Duration::from_secs(120)).await?;
    // A few seconds of creates (some pods Running by then), then the stop signal.
    tokio::time::sleep(Duration::from_secs(6)).await;
    // The report's grace (30 s) and the cluster's stop, with room for a loaded machine.
    let (status, stdout, stderr) = run
        .stop(nix::sys::signal::Signal::SIGTERM, Duration::from_secs(90))
        .await?;
    println!("{stdout}");
    assert_eq!(
        status.code(),
        Some(128 + 15),
        "an interrupted run exits with 128 + SIGTERM:\n{stdout}\n{stderr}"
    );
    nothing_left(&dir);
    let json_path = dir.join("report/load-report.json");
    assert!(
        stdout.contains("INTERRUPTED") && stdout.contains(&json_path.display().to_string()),
        "the run says it was interrupted and where its report is:\n{stdout}\n{stderr}"
    );
    keep(&json_path);
    let report: Value = serde_json::from_slice(&std::fs::read(&json_path)?)?;
    validate_report(&report);
    assert_eq!(report["interrupted"], true);
    assert_eq!(report["passed"], false);
    let stopped_at = report["interrupted_at_s"]
        .as_f64()
        .context("interrupted_at_s")?;

    // Counts: only what was sent, every create acknowledged, none deleted.
    let pods = &report["pods"];
    let count = |field: &str| pods[field].as_u64().unwrap_or(u64::MAX);
    let (attempted, created, running) = (count("attempted"), count("created"), count("running"));
    assert!(
        attempted > 0 && attempted < 400,
        "the create phase was cut short: {pods}"
    );
    assert_eq!(created, attempted, "{pods}");
    assert!(running <= created, "{pods}");
    assert_eq!(count("delete_sent"), 0, "no delete phase started: {pods}");
    assert_eq!(count("unaccounted"), 0, "{pods}");
    assert_eq!(count("cut_short"), created - running, "{pods}");
    assert_eq!(pods["api_listed_at_end"], created, "{pods}");
    assert_eq!(report["latency_ms"]["pod_startup"]["count"], running);

    // The phases: create cut short, the rest of the plan never started.
    let phases: Vec<(&str, &str)> = report["phases"]
        .as_array()
        .context("phases")?
        .iter()
        .map(|p| {
            (
                p["kind"].as_str().unwrap_or("?"),
                p["status"].as_str().unwrap_or("?"),
            )
        })
        .collect();
    assert_eq!(
        phases,
        [
            ("create", "interrupted"),
            ("wait_running", "not_started"),
            ("delete", "not_started"),
            ("wait_gone", "not_started")
        ]
    );
    assert_eq!(report["phases"][0]["ops"], attempted);

    // The verdict: only the interrupt failed; the accounting found every acknowledged create.
    for check in report["slo"].as_array().context("slo")? {
        let interrupted = check["name"] == "run_completed";
        assert_eq!(check["passed"], !interrupted, "{check}");
    }
    let at_end = &report["accounting"]["at_end"];
    assert_eq!(at_end["passed"], true, "{at_end}");
    assert_eq!(at_end["acknowledged_creates"], created);
    assert_eq!(at_end["lost"], 0);
    // Listed a moment before the watches stopped: a pod may have started in between.
    let not_yet = at_end["not_yet_running"]
        .as_u64()
        .context("not_yet_running")?;
    assert!(not_yet <= created, "{at_end}");
    assert!(report["accounting"]["when_running"].is_null());

    // Every component sampled, the last sample taken after the stop signal, while it ran.
    let processes = report["processes"].as_array().context("processes")?;
    for want in [
        "s1",
        "s2",
        "s3",
        "apiserver-1",
        "scheduler-1",
        "controllers-1",
        "nodehost-1",
        "nodehost-2",
        "kemu-load",
    ] {
        let p = processes
            .iter()
            .find(|p| p["name"] == want)
            .with_context(|| format!("{want} not sampled"))?;
        assert!(p["rss_bytes_max"].as_u64().unwrap_or(0) > 0, "{want}: {p}");
        let last_t = p["samples"]
            .as_array()
            .and_then(|s| s.last())
            .and_then(|s| s["t"].as_f64())
            .with_context(|| format!("{want} has no samples"))?;
        assert!(
            last_t >= stopped_at,
            "{want}'s last sample ({last_t} s) is from before the stop ({stopped_at} s)"
        );
    }
    let html = std::fs::read_to_string(dir.join("report/load-report.html"))?;
    assert!(html.contains("Interrupted") && html.contains("not started"));
    let run_json: Value = serde_json::from_slice(&std::fs::read(dir.join("report/run.json"))?)?;
    assert_eq!(run_json["interrupted"], true);
    Ok(())
}

/// A mixed plan through `kemu run`: bare pods beside Deployments, a Parallel StatefulSet, a
/// DaemonSet and Jobs, each kind measured apart and deleted by cascade.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kemu_run_measures_workloads_per_kind() -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().join("load-mixed");
    let config = r#"
name = "load-mixed"
[store]
members = 1
[controllers]
replicas = 1
[nodes]
hosts = 2
per_host = 3
[load]
pods = 20
rate = 20.0
namespaces = 2
running_timeout_seconds = 120.0
gone_timeout_seconds = 120.0
slo_pod_startup_p99_ms = 120000.0
[[load.workloads]]
kind = "Deployment"
count = 2
replicas = 3
rate = 4.0
[[load.workloads]]
kind = "StatefulSet"
count = 1
replicas = 4
pod_management_policy = "Parallel"
[[load.workloads]]
kind = "DaemonSet"
count = 1
[[load.workloads]]
kind = "Job"
count = 2
replicas = 2
rate = 4.0
"#;
    let (report, stdout) = passing_run(config, &dir).await?;
    // The bare pods are accounted for alone: the workloads' pods carry another label.
    assert_eq!(report["pods"]["running"], 20);
    assert_eq!(report["accounting"]["when_running"]["passed"], true);
    let kinds = report["workloads"].as_array().context("workloads")?;
    let expected = [
        ("Deployment", 2, 6),
        ("StatefulSet", 1, 4),
        ("DaemonSet", 1, 6),
        ("Job", 2, 4),
    ];
    assert_eq!(kinds.len(), expected.len(), "{kinds:?}");
    for (kind, (name, objects, pods)) in kinds.iter().zip(expected) {
        assert_eq!(kind["kind"], name);
        assert_eq!(kind["objects"], objects, "{kind}");
        assert_eq!(kind["rolled_out"], objects, "{kind}");
        assert_eq!(kind["pods_expected"], pods, "{kind}");
        assert!(kind["pods_running"].as_u64() >= Some(pods), "{kind}");
        assert!(
            kind["pod_startup_ms"]["count"].as_u64() >= Some(pods),
            "{kind}"
        );
        assert_eq!(kind["rollout_ms"]["count"], objects, "{kind}");
    }
    let phases: Vec<(&str, bool)> = report["phases"]
        .as_array()
        .context("phases")?
        .iter()
        .map(|p| (p["kind"].as_str().unwrap_or(""), p["completed"] == true))
        .collect();
    for phase in [
        "create_workloads",
        "wait_workloads_running",
        "delete_workloads",
        "wait_workloads_gone",
    ] {
        assert!(phases.contains(&(phase, true)), "{phase}: {phases:?}");
    }
    assert!(
        stdout.contains("StatefulSet"),
        "the summary shows each kind: {stdout}"
    );
    Ok(())
}

/// Bare pods with claims through `kemu run`: every claim is bound and attached, its bind and
/// attach latencies reported, and every claim and its dynamically provisioned volume gone at
/// the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kemu_run_gives_pods_claims() -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().join("load-claims");
    let config = r#"
name = "load-claims"
[store]
members = 1
[controllers]
replicas = 1
[nodes]
hosts = 1
per_host = 5
[load]
pods = 20
rate = 10.0
running_timeout_seconds = 120.0
gone_timeout_seconds = 120.0
claims_gone_timeout_seconds = 120.0
slo_pod_startup_p99_ms = 120000.0
claims = true
claims_percent = 50.0
"#;
    let (report, stdout) = passing_run(config, &dir).await?;
    assert_eq!(report["pods"]["running"], 20);
    let claims = &report["claims"];
    for (field, want) in [
        ("sent", 10),
        ("created", 10),
        ("bound", 10),
        ("attached", 10),
        ("deleted", 10),
        ("gone", 10),
        ("left", 0),
        ("volumes_left", 0),
    ] {
        assert_eq!(claims[field], want, "claims.{field}: {claims}");
    }
    for (name, count) in [
        ("bind_ms", 10),
        ("attach_ms", 10),
        ("pod_startup_with_claims_ms", 10),
        ("pod_startup_without_claims_ms", 10),
    ] {
        assert_eq!(claims[name]["count"], count, "claims.{name}: {claims}");
    }
    let slo = report["slo"].as_array().context("slo")?;
    assert!(
        slo.iter()
            .any(|c| c["name"] == "claims_left" && c["passed"] == true),
        "{slo:?}"
    );
    assert!(stdout.contains("pod_startup with a claim"), "{stdout}");
    let html = std::fs::read_to_string(dir.join("report/load-report.html"))?;
    assert!(html.contains("Claims"), "the HTML report has no claims");
    Ok(())
}

/// StatefulSets with claims through `kemu run`: 2 sets × 3 replicas over 2 namespaces, each pod
/// with a claim of its own from the set's volumeClaimTemplate; every claim bound and attached
/// with its bind and attach latencies reported under the StatefulSet kind, and every claim and
/// volume gone once the sets are deleted (the load sets `whenDeleted: Delete`); the config's
/// `[storage]` provisioning latency holds each bind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kemu_run_gives_statefulsets_claims() -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().join("load-sts-claims");
    let config = r#"
name = "load-sts-claims"
[store]
members = 1
[controllers]
replicas = 1
[storage]
provision_latency_ms = 500
resize_latency_ms = 10
attach_latency_ms = 100
node_capacity = "100Gi"
[nodes]
hosts = 1
per_host = 4
[load]
pods = 0
namespaces = 2
running_timeout_seconds = 120.0
gone_timeout_seconds = 120.0
claims_gone_timeout_seconds = 120.0
slo_pod_startup_p99_ms = 120000.0
[[load.workloads]]
kind = "StatefulSet"
count = 2
replicas = 3
rate = 4.0
pod_management_policy = "Parallel"
claims = true
claim_size = "2Gi"
"#;
    let (report, stdout) = passing_run(config, &dir).await?;
    let kinds = report["workloads"].as_array().context("workloads")?;
    assert_eq!(kinds.len(), 1, "{kinds:?}");
    assert_eq!(kinds[0]["rolled_out"], 2, "{kinds:?}");
    assert_eq!(kinds[0]["pods_expected"], 6, "{kinds:?}");
    let claims = &report["claims"];
    // No bare pod has a claim; the sets' 6 are reported under their kind.
    assert_eq!(claims["sent"], 0, "{claims}");
    for (field, want) in [("left", 0), ("volumes_left", 0)] {
        assert_eq!(claims[field], want, "claims.{field}: {claims}");
    }
    let by_kind = claims["workloads"].as_array().context("claims.workloads")?;
    assert_eq!(by_kind.len(), 1, "{claims}");
    let sts = &by_kind[0];
    assert_eq!(sts["kind"], "StatefulSet");
    for field in ["seen", "bound", "attached", "deleted", "gone"] {
        assert_eq!(sts[field], 6, "claims.workloads[0].{field}: {sts}");
    }
    for name in ["bind_ms", "attach_ms"] {
        assert_eq!(sts[name]["count"], 6, "claims.workloads[0].{name}: {sts}");
    }
    // The config's `[storage]` reached the emulated driver: each volume took 500 ms to make.
    assert!(
        sts["bind_ms"]["p50"].as_f64() >= Some(500.0),
        "claims.workloads[0].bind_ms: {sts}"
    );
    let slo = report["slo"].as_array().context("slo")?;
    assert!(
        slo.iter()
            .any(|c| c["name"] == "claims_left" && c["passed"] == true),
        "{slo:?}"
    );
    let phases: Vec<&str> = report["phases"]
        .as_array()
        .context("phases")?
        .iter()
        .filter_map(|p| p["kind"].as_str())
        .collect();
    let position = |kind: &str| phases.iter().position(|p| *p == kind);
    let (sets_gone, claims_gone) = (
        position("wait_workloads_gone"),
        position("wait_claims_gone"),
    );
    assert!(
        sets_gone.is_some() && sets_gone < claims_gone,
        "the claims go after their sets: {phases:?}"
    );
    assert!(stdout.contains("StatefulSet bind"), "{stdout}");
    let html = std::fs::read_to_string(dir.join("report/load-report.html"))?;
    assert!(html.contains("StatefulSet bind"), "{html}");
    Ok(())
}
