//! clusterloader2 configs end to end through `kemu run`: a small cluster from a config whose
//! `[load]` names the density-style config in `load/tests/cl2` (Deployments created, updated
//! and deleted over two namespaces, pod startup measured), and the result files checked
//! against clusterloader2's summary format.

mod common;

use std::path::Path;

use anyhow::Context;
use common::{kemu_exe, workspace};
use serde_json::{json, Value};

fn cluster(name: &str, cl2: &str) -> String {
    format!(
        r#"
name = "{name}"
[store]
members = 1
[scheduler]
workers = 2
[controllers]
replicas = 1
[nodes]
hosts = 1
per_host = 4
[load]
cl2 = {cl2}
"#
    )
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
    let (ok, stdout, stderr) = kemu_run(&cluster("cl2-density", &cl2), &dir).await?;
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
    assert_eq!(steps.len(), 6);
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
    let files: Vec<String> = report["result_files"]
        .as_array()
        .context("result_files")?
        .iter()
        .filter_map(|f| f.as_str().map(str::to_string))
        .collect();
    let latency = files
        .iter()
        .find(|f| {
            f.starts_with("PodStartupLatency_PodStartupLatency_density_") && f.ends_with(".json")
        })
        .with_context(|| format!("no PodStartupLatency file in {files:?}"))?;
    let summary: Value = serde_json::from_slice(&std::fs::read(report_dir.join(latency))?)?;
    check_latency_summary(&summary);
    // API responsiveness from the API server's /metrics, in the same summary shape.
    let api = files
        .iter()
        .find(|f| {
            f.starts_with(
                "APIResponsivenessPrometheusSimple_APIResponsivenessPrometheusSimple_density_",
            )
        })
        .with_context(|| format!("no API responsiveness file in {files:?}"))?;
    let api: Value = serde_json::from_slice(&std::fs::read(report_dir.join(api))?)?;
    let items = api["dataItems"].as_array().context("dataItems")?;
    assert!(
        items
            .iter()
            .any(|i| i["labels"]["Verb"] == "POST" && i["labels"]["Resource"] == "deployments"),
        "{api}"
    );
    for item in items {
        assert_eq!(item["unit"], "ms");
        assert!(item["data"]["Perc99"].as_f64().is_some(), "{item}");
    }
    let html = std::fs::read_to_string(report_dir.join("cl2-report.html"))?;
    assert!(html.contains("Create deployments") && html.contains("PodStartupLatency"));
    let run: Value = serde_json::from_slice(&std::fs::read(report_dir.join("run.json"))?)?;
    assert_eq!(run["passed"], true);
    Ok(())
}

/// Every tuning-set kind, modules, bare pods in listed namespaces scaled from 3 to 1 (the
/// deletes the count demands), ConfigMaps created, updated and deleted, measurement
/// Instances; and one measurement kemu does not compute, which must fail the run.
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
    // deleted; the ConfigMaps deleted.
    assert_eq!(ops, [6, 4, 4, 0, 4, 4], "{steps:?}");
    assert!(steps.iter().all(|s| s["errors"] == 0), "{steps:?}");
    let measurements = report["measurements"].as_array().context("measurements")?;
    let verdict = |id: &str| {
        measurements
            .iter()
            .find(|m| m["identifier"] == id)
            .map(|m| m["verdict"]["status"].clone())
    };
    assert_eq!(verdict("Ns1"), Some(json!("passed")));
    assert_eq!(verdict("Ns2"), Some(json!("passed")));
    assert_eq!(verdict("Etcd"), Some(json!("not_computed")));
    Ok(())
}
