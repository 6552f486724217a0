//! clusterloader2 configs end to end through `kemu run`: a small cluster from a config whose
//! `[load]` names the density-style config in `load/tests/cl2` (Deployments created, updated
//! and deleted over two namespaces; pod startup, API responsiveness over two API servers,
//! resource usage, etcd's and the scheduler's metrics measured), and the result files and
//! `junit.xml` checked against clusterloader2's formats; the features config; and a
//! clusterloader2 config with a `[chaos]` plan alongside.

use crate::common;

use std::path::Path;

use anyhow::Context;
use common::{kemu_exe, workspace};
use serde_json::{json, Value};

fn cluster(name: &str, cl2: &str) -> String {
    cluster_with(name, cl2, 1, 1, "")
}

fn cluster_with(name: &str, cl2: &str, members: u32, api_servers: u32, extra: &str) -> String {
    format!(
        r#"
name = "{name}"
[store]
members = {members}
[apiserver]
replicas = {api_servers}
[scheduler]
workers = 2
[controllers]
replicas = 1
[nodes]
hosts = 1
per_host = 4
[load]
cl2 = {cl2}
{extra}
"#
    )
}

/// The result file whose name starts with `prefix`, read.
/// The names of the result files a report lists.
fn result_files(report: &Value) -> anyhow::Result<Vec<String>> {
    Ok(report["result_files"]
        .as_array()
        .context("result_files")?
        .iter()
        .filter_map(|f| f.as_str().map(str::to_string))
        .collect())
}

fn result_file(dir: &Path, files: &[String], prefix: &str) -> anyhow::Result<Value> {
    let name = files
        .iter()
        .find(|f| f.starts_with(prefix) && f.ends_with(".json"))
        .with_context(|| format!("no {prefix}* in {files:?}"))?;
    Ok(serde_json::from_slice(&std::fs::read(dir.join(name))?)?)
}

async fn kemu_run(config: &str, dir: &Path) -> anyhow::Result<(bool, String, String)> {
    let file = dir.with_extension("toml");
    std::fs::write(&file, config)?;
    let out = tokio::process::Command::new(kemu_exe())
        .args(["run", "-f"])
        .arg(&file)
        .arg("--dir")
        .arg(dir)
        .env("RUST_LOG", "warn,kemu=info,load=info")
        .output()
        .await?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// clusterloader2's latency summary: `{"version": "v1", "dataItems": [{"data": {"Perc50",
/// "Perc90", "Perc99"}, "unit": "ms", "labels": {"Metric": …}}]}`.
fn check_latency_summary(summary: &Value) {
    assert_eq!(summary["version"], "v1", "{summary}");
    let items = summary["dataItems"].as_array().expect("dataItems");
    let metrics: Vec<&str> = items
        .iter()
        .map(|item| {
            assert_eq!(item["unit"], "ms", "{item}");
            for perc in ["Perc50", "Perc90", "Perc99"] {
                assert!(item["data"][perc].as_f64().is_some(), "{item}");
            }
            assert_eq!(item["data"].as_object().map(|o| o.len()), Some(3), "{item}");
            item["labels"]["Metric"].as_str().unwrap_or("")
        })
        .collect();
    assert_eq!(
        metrics,
        [
            "create_to_schedule",
            "schedule_to_run",
            "run_to_watch",
            "schedule_to_watch",
            "pod_startup"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clusterloader2_config_runs_through_kemu_run() -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().join("cl2-density");
    let configs = workspace().join("load/tests/cl2");
    let cl2 = format!(
        "{{ config = {:?}, overrides = [{:?}], params = [\"STARTUP_THRESHOLD=120s\"] }}",
        configs.join("density.yaml").display().to_string(),
        configs.join("overrides.yaml").display().to_string()
    );
    let (ok, stdout, stderr) = kemu_run(&cluster_with("cl2-density", &cl2, 1, 2, ""), &dir).await?;
    println!("{stdout}");
    assert!(ok, "kemu run failed:\n{stdout}\n{stderr}");
    let report_dir = dir.join("report");
    let report: Value =
        serde_json::from_slice(&std::fs::read(report_dir.join("cl2-report.json"))?)?;
    assert_eq!(report["schema"], "kemu.dev/cl2-report/v1");
    assert_eq!(report["passed"], true, "{report:#}");
    assert_eq!(report["name"], "density");
    assert_eq!(report["nodes"], 4);
    let steps = report["steps"].as_array().context("steps")?;
    assert_eq!(steps.len(), 7);
    // 4 nodes × 2 pods over 2 namespaces, one pod per Deployment: 8 Deployments.
    assert_eq!(steps[1]["name"], "Create deployments");
    assert_eq!(steps[1]["object_operations"], 8);
    assert_eq!(steps[3]["object_operations"], 8, "every replica updated");
    assert_eq!(steps[5]["object_operations"], 8, "every replica deleted");
    let startup = report["measurements"]
        .as_array()
        .context("measurements")?
        .iter()
        .find(|m| m["method"] == "PodStartupLatency" && m["action"] == "gather")
        .context("PodStartupLatency gathered")?;
    assert_eq!(startup["verdict"]["status"], "passed", "{startup}");
    assert!(startup["details"]["pods"].as_u64() >= Some(8), "{startup}");
    // The threshold given at `start` (STARTUP_THRESHOLD) is the one applied, as in CL2.
    assert_eq!(startup["details"]["threshold_ms"], 120000, "{startup}");
    let files = result_files(&report)?;
    let latency = files
        .iter()
        .find(|f| {
            f.starts_with("PodStartupLatency_PodStartupLatency_density_") && f.ends_with(".json")
        })
        .with_context(|| format!("no PodStartupLatency file in {files:?}"))?;
    let summary: Value = serde_json::from_slice(&std::fs::read(report_dir.join(latency))?)?;
    check_latency_summary(&summary);
    // API responsiveness from both API servers' /metrics, named as clusterloader2 names it
    // (the method, no identifier), with the scope of each call.
    let api = result_file(
        &report_dir,
        &files,
        "APIResponsivenessPrometheusSimple_density_",
    )?;
    let items = api["dataItems"].as_array().context("dataItems")?;
    let scope_of = |verb: &str, resource: &str| {
        items
            .iter()
            .find(|i| i["labels"]["Verb"] == verb && i["labels"]["Resource"] == resource)
            .map(|i| i["labels"]["Scope"].clone())
    };
    assert_eq!(
        scope_of("POST", "deployments"),
        Some(json!("resource")),
        "{api}"
    );
    // The measurements of a step start together, as clusterloader2's do, so a measurement's
    // first list may come before the start scrape and not be counted: whichever lists were
    // counted carry their scope.
    let lists: Vec<&Value> = items
        .iter()
        .filter(|i| i["labels"]["Verb"] == "LIST")
        .collect();
    assert!(
        lists.iter().any(|i| i["labels"]["Scope"] == "cluster"),
        "no cluster-wide LIST counted: {api}"
    );
    if let Some(scope) = scope_of("LIST", "pods") {
        assert_eq!(scope, json!("cluster"), "{api}");
    }
    // The components' calls over QUIC are timed too: the controller manager's pod creates and
    // the scheduler's binds.
    assert_eq!(scope_of("POST", "pods"), Some(json!("resource")), "{api}");
    assert!(
        items.iter().any(|i| i["labels"]["Verb"] == "POST"
            && i["labels"]["Resource"] == "pods"
            && i["labels"]["Subresource"] == "binding"),
        "{api}"
    );
    for item in items {
        assert_eq!(item["unit"], "ms");
        assert!(item["data"]["Perc99"].as_f64().is_some(), "{item}");
        for label in ["Subresource", "Count", "SlowCount"] {
            assert!(item["labels"][label].is_string(), "{item}");
        }
    }
    let responsiveness = report["measurements"]
        .as_array()
        .context("measurements")?
        .iter()
        .find(|m| m["method"] == "APIResponsivenessPrometheusSimple" && m["action"] == "gather")
        .context("API responsiveness gathered")?;
    assert_eq!(
        responsiveness["details"]["api_servers"], 2,
        "{responsiveness}"
    );
    // Resource usage of every kemu process: {"50"|"90"|"99"|"100": [{Name, Cpu, Mem}]}.
    let usage = result_file(&report_dir, &files, "ResourceUsageSummary_density_")?;
    for perc in ["50", "90", "99", "100"] {
        let items = usage[perc]
            .as_array()
            .with_context(|| format!("{perc}: {usage}"))?;
        let names: Vec<&str> = items.iter().filter_map(|i| i["Name"].as_str()).collect();
        for container in [
            "/etcd",
            "/kube-apiserver",
            "/kube-scheduler",
            "/kube-controller-manager",
        ] {
            assert!(
                names.iter().any(|n| n.ends_with(container)),
                "{container}: {names:?}"
            );
        }
        assert_eq!(
            names
                .iter()
                .filter(|n| n.ends_with("/kube-apiserver"))
                .count(),
            2
        );
        for item in items {
            assert!(item["Cpu"].as_f64().is_some_and(|c| c >= 0.0), "{item}");
            assert!(item["Mem"].as_u64().is_some_and(|m| m > 0), "{item}");
        }
    }
    // etcd's histograms from the store member, with what kemu's store does not export empty.
    let etcd = result_file(&report_dir, &files, "EtcdMetrics_density_")?;
    let wal = etcd["walFsyncDuration"]
        .as_array()
        .context("walFsyncDuration")?;
    assert_eq!(
        wal[0]["labels"]["__name__"],
        "etcd_disk_wal_fsync_duration_seconds_bucket"
    );
    assert!(wal[0]["buckets"]["+Inf"].as_u64() > Some(0), "{etcd}");
    assert!(etcd["maxDatabaseSize"].as_f64() > Some(0.0), "{etcd}");
    assert_eq!(etcd["backendCommitDuration"], json!([]));
    // The scheduler's latencies in nanoseconds: every pod was bound in between.
    let scheduling = result_file(&report_dir, &files, "SchedulingMetrics_density_")?;
    for latency in ["e2eSchedulingLatency", "schedulingLatency"] {
        assert!(
            scheduling[latency]["Perc99"].as_i64() > Some(0),
            "{latency}: {scheduling}"
        );
    }
    let bind = &scheduling["frameworkExtensionPointDuration"]["Bind"];
    assert!(bind["Perc50"].as_i64() > Some(0), "{scheduling}");
    assert_eq!(
        scheduling["frameworkExtensionPointDuration"]
            .as_object()
            .map(|o| o.len()),
        Some(11)
    );
    // clusterloader2's junit.xml: the config, each step and each measurement, none failed.
    let junit = std::fs::read_to_string(report_dir.join("junit.xml"))?;
    assert!(
        junit.contains("<testsuite name=\"ClusterLoaderV2\" tests=\"")
            && junit.contains("failures=\"0\""),
        "{junit}"
    );
    assert!(
        junit.contains("name=\"density: [step: 06] Delete deployments\""),
        "{junit}"
    );
    assert!(
        junit.contains("name=\"density: [step: 05] Gather / [06] - SchedulingMetrics\""),
        "{junit}"
    );
    // SchedulingThroughput sampled every second (`measurmentInterval`, CL2's spelling).
    let throughput = result_file(
        &report_dir,
        &files,
        "SchedulingThroughput_SchedulingThroughput_density_",
    )?;
    assert!(throughput["max"].as_f64() > Some(0.0), "{throughput}");
    // The last wait outlasted the pods of the Deployments deleted since its start.
    let deletion = report["measurements"]
        .as_array()
        .context("measurements")?
        .iter()
        .rfind(|m| m["identifier"] == "UpdatedDeployments" && m["action"] == "gather")
        .context("the deletion wait")?;
    assert_eq!(deletion["verdict"]["status"], "passed", "{deletion}");
    assert_eq!(deletion["details"]["controllers"], 0, "{deletion}");
    assert_eq!(deletion["details"]["deleted"], 8, "{deletion}");
    assert_eq!(deletion["details"]["pods_of_deleted"], 0, "{deletion}");
    let html = std::fs::read_to_string(report_dir.join("cl2-report.html"))?;
    assert!(html.contains("Create deployments") && html.contains("PodStartupLatency"));
    let run: Value = serde_json::from_slice(&std::fs::read(report_dir.join("run.json"))?)?;
    assert_eq!(run["passed"], true);
    Ok(())
}

/// Every tuning-set kind, modules, bare pods in listed namespaces scaled from 3 to 1 (the
/// deletes the count demands), ConfigMaps created, updated and deleted, measurement
/// Instances, StatefulSets' claims deleted through listUnknownObjectOptions; and one
/// measurement kemu does not compute, which must fail the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_measurement_kemu_cannot_compute_fails_the_run() -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().join("cl2-features");
    let config = workspace().join("load/tests/cl2/features.yaml");
    let cl2 = format!("{{ config = {:?} }}", config.display().to_string());
    let (ok, stdout, stderr) = kemu_run(&cluster("cl2-features", &cl2), &dir).await?;
    println!("{stdout}");
    assert!(
        !ok,
        "a not-computed measurement passed:\n{stdout}\n{stderr}"
    );
    let report: Value =
        serde_json::from_slice(&std::fs::read(dir.join("report/cl2-report.json"))?)?;
    assert_eq!(report["passed"], false);
    let steps = report["steps"].as_array().context("steps")?;
    let ops: Vec<u64> = steps
        .iter()
        .map(|s| s["object_operations"].as_u64().unwrap_or(0))
        .collect();
    // 3 pods in each of 2 namespaces; 2 ConfigMaps each, created then updated; 2 pods each
    // deleted; the ConfigMaps deleted. A StatefulSet and an object rendering to nothing in
    // each, both deleted; the sets' 2 claims each deleted as the phase's unknown objects. One
    // OOM event. The API server restart and the pauses around it create nothing.
    assert_eq!(
        ops,
        [6, 4, 4, 0, 0, 0, 0, 4, 4, 4, 0, 4, 4, 0, 1, 0],
        "{steps:?}"
    );
    assert!(steps.iter().all(|s| s["errors"] == 0), "{steps:?}");
    let measurements = report["measurements"].as_array().context("measurements")?;
    let verdict = |id: &str| {
        measurements
            .iter()
            .find(|m| m["identifier"] == id)
            .map(|m| m["verdict"]["status"].clone())
    };
    // The pods are found by the label their template gave them from .Namespace.
    assert_eq!(verdict("Ns1"), Some(json!("passed")));
    assert_eq!(verdict("Ns2"), Some(json!("passed")));
    assert_eq!(verdict("NetworkProgramming"), Some(json!("not_computed")));
    // The restarted API server came back ready, and the run went on through it.
    let restart = measurements
        .iter()
        .find(|m| m["identifier"] == "RestartApiserver")
        .context("RestartApiserver")?;
    assert_eq!(restart["verdict"]["status"], "passed", "{restart}");
    assert_eq!(restart["details"]["down_seconds"], 2, "{restart}");
    assert_eq!(verdict("ClaimsBound"), Some(json!("passed")));
    assert_eq!(verdict("ClaimsGone"), Some(json!("passed")));
    // TestMetrics: the parts kemu computes ran under the bundle and wrote their summaries;
    // the bundle is not computed, naming what it lacks.
    let test_metrics = measurements
        .iter()
        .find(|m| m["method"] == "TestMetrics" && m["action"] == "gather")
        .context("TestMetrics gathered")?;
    assert_eq!(
        test_metrics["verdict"]["status"], "not_computed",
        "{test_metrics}"
    );
    let why = test_metrics["verdict"]["reason"]
        .as_str()
        .unwrap_or_default();
    assert!(
        why.contains("CPUProfile") && !why.contains("MetricsForE2E"),
        "{why}"
    );
    let parts = test_metrics["details"].as_array().context("parts")?;
    for part in [
        "EtcdMetrics",
        "SchedulingMetrics",
        "MetricsForE2E",
        "ResourceUsageSummary",
        "SystemPodMetrics",
        "ClusterOOMsTracker",
    ] {
        let verdict = parts
            .iter()
            .find(|p| p["part"] == part)
            .map(|p| p["verdict"]["status"].clone());
        assert_eq!(verdict, Some(json!("passed")), "{part}: {test_metrics}");
    }
    let files = result_files(&report)?;
    let usage = result_file(
        &dir.join("report"),
        &files,
        "ResourceUsageSummary_features_",
    )?;
    assert!(
        usage["100"].as_array().is_some_and(|a| !a.is_empty()),
        "{usage}"
    );
    result_file(&dir.join("report"), &files, "EtcdMetrics_features_")?;
    result_file(&dir.join("report"), &files, "SchedulingMetrics_features_")?;
    // kube-system holds no pods in a kemu cluster: an empty list, in CL2's shape.
    let system_pods = result_file(&dir.join("report"), &files, "SystemPodMetrics_features_")?;
    assert_eq!(system_pods, json!({"pods": []}));
    // The OOM event the run created was seen, read and set aside as its process is ignored.
    let ooms = result_file(&dir.join("report"), &files, "ClusterOOMsTracker_features_")?;
    assert_eq!(
        ooms,
        json!({"failures": [], "past": [], "ignored": [{"node": "oom-node-0", "process": "stress",
            "memory": "2048kB", "pid": "4242", "time": "2099-01-01T00:00:00Z"}]})
    );
    // Every component's metrics, the API server's SLIs among them.
    let e2e = result_file(&dir.join("report"), &files, "MetricsForE2E_features_")?;
    for (component, metric) in [
        ("APIServerMetrics", "apiserver_request_total"),
        ("APIServerMetricsSLIs", "kubernetes_healthchecks_total"),
        (
            "SchedulerMetrics",
            "scheduler_e2e_scheduling_duration_seconds_bucket",
        ),
        ("ControllerManagerMetrics", "process_cpu_seconds_total"),
    ] {
        let samples = e2e[component][metric].as_array();
        assert!(
            samples.is_some_and(|s| !s.is_empty() && s[0]["metric"]["__name__"] == metric),
            "{component} {metric}: {:?}",
            e2e[component]
                .as_object()
                .map(|m| m.keys().collect::<Vec<_>>())
        );
    }
    let junit = std::fs::read_to_string(dir.join("report/junit.xml"))?;
    assert!(
        junit.contains(
            "measurement call NetworkProgrammingLatency - NetworkProgramming error: not computed"
        ),
        "{junit}"
    );
    assert!(!junit.contains("failures=\"0\""), "{junit}");
    Ok(())
}

/// A clusterloader2 config with a `[chaos]` plan alongside: a store follower killed while the
/// Deployments are created. The config's measurements and the chaos checks that need no load
/// of kemu's own both pass, and the run's summary says so. The calls caught by the kill may
/// take over a second (a debug build on a busy machine): the chaos report's own service check
/// bounds them, so the API latency SLO is reported here without failing the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chaos_plan_runs_beside_a_clusterloader2_config() -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().join("cl2-chaos");
    let configs = workspace().join("load/tests/cl2");
    let cl2 = format!(
        "{{ config = {:?}, overrides = [{:?}], params = [\"STARTUP_THRESHOLD=120s\", \"API_VIOLATIONS=false\"] }}",
        configs.join("density.yaml").display().to_string(),
        configs.join("overrides.yaml").display().to_string()
    );
    let chaos = "[chaos]\nseed = 3\n[[chaos.action]]\nat = 0.5\nkind = \"kill-store-follower\"\n";
    let (ok, stdout, stderr) =
        kemu_run(&cluster_with("cl2-chaos", &cl2, 3, 1, chaos), &dir).await?;
    println!("{stdout}");
    assert!(ok, "kemu run failed:\n{stdout}\n{stderr}");
    let run: Value = serde_json::from_slice(&std::fs::read(dir.join("report/run.json"))?)?;
    assert_eq!(run["passed"], true, "{run}");
    assert_eq!(run["cl2"]["passed"], true, "{run}");
    assert_eq!(run["chaos"], true, "{run}");
    let chaos: Value =
        serde_json::from_slice(&std::fs::read(dir.join("report/chaos-report.json"))?)?;
    let kills = chaos["actions"]
        .as_array()
        .map(|a| a.iter().filter(|a| a["disruptive"] == true).count());
    assert_eq!(kills, Some(1), "{}", chaos["actions"]);
    for check in ["linearizability", "convergence", "availability", "service"] {
        assert_eq!(chaos[check]["passed"], true, "{check}: {}", chaos[check]);
    }
    Ok(())
}

/// In netns mode the components listen inside the hosts' network namespaces: the measurements
/// read from their `/metrics` (EtcdMetrics, SchedulingMetrics) reach them through the bridge
/// namespace and are computed, and ResourceUsageSummary samples every process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn component_measurements_reach_a_netns_cluster() -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().join("cl2-netns");
    let configs = workspace().join("load/tests/cl2");
    let cl2 = format!(
        "{{ config = {:?}, overrides = [{:?}], params = [\"STARTUP_THRESHOLD=120s\", \"API_VIOLATIONS=false\"] }}",
        configs.join("density.yaml").display().to_string(),
        configs.join("overrides.yaml").display().to_string()
    );
    let netns = "[hosts]\nmode = \"netns\"\nsubnet = \"10.219.0.0/24\"\n";
    let (ok, stdout, stderr) =
        kemu_run(&cluster_with("cl2-netns", &cl2, 1, 1, netns), &dir).await?;
    println!("{stdout}");
    assert!(ok, "kemu run failed:\n{stdout}\n{stderr}");
    let report: Value =
        serde_json::from_slice(&std::fs::read(dir.join("report/cl2-report.json"))?)?;
    let gathered = |method: &str| {
        report["measurements"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|m| m["method"] == method && m["action"] == "gather")
            .cloned()
            .unwrap_or(Value::Null)
    };
    for method in ["EtcdMetrics", "SchedulingMetrics", "ResourceUsageSummary"] {
        let m = gathered(method);
        assert_eq!(m["verdict"]["status"], "passed", "{method}: {m}");
    }
    assert_eq!(
        gathered("EtcdMetrics")["details"]["members_not_scraped"],
        json!([])
    );
    Ok(())
}
