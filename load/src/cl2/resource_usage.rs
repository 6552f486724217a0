//! clusterloader2's ResourceUsageSummary from process sampling instead of the kubelets' stats:
//! every kemu process of the cluster sampled from `/proc` every 10 s (clusterloader2's period
//! for control-plane nodes) between `start` and `gather`, and per process the 50th, 90th, 99th
//! and 100th percentile of its CPU (cores) and memory (resident bytes, for the working set),
//! each ranked on its own as clusterloader2 ranks them, in its file shape:
//! `{"50": [{"Name": "apiserver-1/kube-apiserver", "Cpu": 0.42, "Mem": 123456}], …}`.
//! `resourceConstraints` (a YAML file of `container: {cpuConstraint, memoryConstraint}`,
//! rendered with `.Nodes`) fails the measurement when a container's 99th percentile is over.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value as Json};

use super::gotmpl::{Template, Value};
use crate::sampler::ProcessSamples;

/// How often the processes are sampled.
pub const PERIOD: Duration = Duration::from_secs(10);

/// The percentiles clusterloader2 reports.
pub const PERCENTILES: [u32; 4] = [50, 90, 99, 100];

/// clusterloader2's percentile index over `n` sorted values: ceil(n·p/100) − 1.
fn rank(n: usize, p: u32) -> usize {
    ((n * p as usize).div_ceil(100)).clamp(1, n) - 1
}

/// The summary of `processes` (each named `COMPONENT/CONTAINER`), sorted by name; processes
/// without a sample are left out.
pub fn summarize(processes: &[ProcessSamples]) -> Json {
    let mut named: Vec<(&str, Vec<f64>, Vec<u64>)> = processes
        .iter()
        .filter(|p| !p.samples.is_empty())
        .map(|p| {
            let mut cpu: Vec<f64> = p.samples.iter().map(|s| s.cpu_percent / 100.0).collect();
            let mut mem: Vec<u64> = p.samples.iter().map(|s| s.rss_bytes).collect();
            cpu.sort_by(f64::total_cmp);
            mem.sort_unstable();
            (p.name.as_str(), cpu, mem)
        })
        .collect();
    named.sort_by(|a, b| a.0.cmp(b.0));
    let mut summary = serde_json::Map::new();
    for p in PERCENTILES {
        let items: Vec<Json> = named
            .iter()
            .map(|(name, cpu, mem)| {
                json!({
                    "Name": name,
                    "Cpu": cpu[rank(cpu.len(), p)],
                    "Mem": mem[rank(mem.len(), p)],
                })
            })
            .collect();
        summary.insert(p.to_string(), Json::Array(items));
    }
    Json::Object(summary)
}

/// A container's limits; 0 is no limit.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Constraint {
    pub cpu: f64,
    pub memory: u64,
}

/// Reads a `resourceConstraints` file: a template rendered with `.Nodes`, then YAML mapping
/// container names to `cpuConstraint` (cores) and `memoryConstraint` (bytes), keys in any case.
pub fn read_constraints(path: &Path, nodes: i64) -> Result<BTreeMap<String, Constraint>, String> {
    let template = Template::from_file(path).map_err(|e| e.to_string())?;
    let data = Value::Map(BTreeMap::from([("Nodes".to_string(), Value::Int(nodes))]));
    let rendered = template.render(&data).map_err(|e| e.to_string())?;
    let json =
        super::config::yaml(&path.display().to_string(), &rendered).map_err(|e| e.to_string())?;
    let Some(map) = json.as_object() else {
        return Err(format!(
            "{}: resource constraints must be a map of container names",
            path.display()
        ));
    };
    let mut out = BTreeMap::new();
    for (container, limits) in map {
        let field = |name: &str| {
            limits
                .as_object()
                .and_then(|o| o.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)))
                .and_then(|(_, v)| v.as_f64())
                .unwrap_or(0.0)
        };
        out.insert(
            container.clone(),
            Constraint {
                cpu: field("cpuConstraint"),
                memory: field("memoryConstraint").max(0.0) as u64,
            },
        );
    }
    Ok(out)
}

/// The 99th percentiles over their container's constraint, worded as clusterloader2's.
pub fn violations(summary: &Json, constraints: &BTreeMap<String, Constraint>) -> Vec<String> {
    let mut out = Vec::new();
    for item in summary["99"].as_array().into_iter().flatten() {
        let name = item["Name"].as_str().unwrap_or("");
        let container = name.split('/').nth(1).unwrap_or(name);
        let Some(limit) = constraints.get(container) else {
            continue;
        };
        let cpu = item["Cpu"].as_f64().unwrap_or(0.0);
        let mem = item["Mem"].as_u64().unwrap_or(0);
        if limit.cpu > 0.0 && cpu > limit.cpu {
            out.push(format!("container {name} is using {cpu}/{} CPU", limit.cpu));
        }
        if limit.memory > 0 && mem > limit.memory {
            out.push(format!(
                "container {name} is using {}/{} MB of memory",
                mem as f64 / (1024.0 * 1024.0),
                limit.memory as f64 / (1024.0 * 1024.0)
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampler::ResourceSample;

    fn process(name: &str, samples: &[(f64, u64)]) -> ProcessSamples {
        ProcessSamples {
            name: name.to_string(),
            pid: 1,
            samples: samples
                .iter()
                .map(|&(cpu_percent, rss_bytes)| ResourceSample {
                    t: 0.0,
                    cpu_percent,
                    rss_bytes,
                })
                .collect(),
        }
    }

    #[test]
    fn percentiles_rank_cpu_and_memory_each_on_its_own() {
        // Ten samples: CPU 10 % … 100 %, memory falling as CPU rises.
        let samples: Vec<(f64, u64)> = (1..=10).map(|i| (i as f64 * 10.0, 1000 - i)).collect();
        let summary = summarize(&[
            process("store-s1/etcd", &samples),
            process("apiserver-1/kube-apiserver", &[(50.0, 7)]),
            process("gone/kube-scheduler", &[]),
        ]);
        let mut keys: Vec<&String> = summary.as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(keys, ["100", "50", "90", "99"]);
        let p50 = summary["50"].as_array().unwrap();
        assert_eq!(p50.len(), 2, "a process never sampled is left out");
        assert_eq!(
            p50[0]["Name"], "apiserver-1/kube-apiserver",
            "sorted by name"
        );
        assert_eq!(p50[1]["Cpu"], 0.5);
        assert_eq!(p50[1]["Mem"], 994);
        assert_eq!(summary["90"][1]["Cpu"], 0.9);
        assert_eq!(summary["99"][1]["Cpu"], 1.0);
        assert_eq!(summary["100"][1]["Mem"], 999);
        assert_eq!(summary["99"][0]["Cpu"], 0.5);
    }

    #[test]
    fn constraints_are_read_rendered_and_checked_on_the_99th() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("constraints.yaml");
        std::fs::write(
            &path,
            "etcd:\n  cpuConstraint: 0.5\nkube-apiserver:\n  MemoryConstraint: {{MultiplyInt .Nodes 1000}}\n",
        )
        .unwrap();
        let constraints = read_constraints(&path, 3).unwrap();
        assert_eq!(
            constraints["etcd"],
            Constraint {
                cpu: 0.5,
                memory: 0
            }
        );
        assert_eq!(constraints["kube-apiserver"].memory, 3000);
        let summary = summarize(&[
            process("store-s1/etcd", &[(80.0, 1 << 30)]),
            process("apiserver-1/kube-apiserver", &[(500.0, 2000)]),
        ]);
        assert_eq!(
            violations(&summary, &constraints),
            ["container store-s1/etcd is using 0.8/0.5 CPU"]
        );
        std::fs::write(&path, "- etcd\n").unwrap();
        assert!(read_constraints(&path, 3).is_err());
    }
}
