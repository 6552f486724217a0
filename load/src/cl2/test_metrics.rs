//! clusterloader2's TestMetrics: a bundle that starts and gathers a set of measurements under one
//! identifier, each with the bundle's params and its own `action` (and, for the profiles, a
//! `componentName`), as clusterloader2 runs them:
//!
//! | part | `start` | `gather` |
//! | --- | --- | --- |
//! | EtcdMetrics | start | gather |
//! | SchedulingMetrics | reset | gather |
//! | MetricsForE2E | — | gather |
//! | ResourceUsageSummary | start | gather |
//! | CPUProfile, MemoryProfile, BlockProfile of etcd, kube-apiserver, kube-scheduler, kube-controller-manager | start | gather |
//! | SystemPodMetrics (`systemPodMetricsEnabled`) | the call's action | the call's action |
//! | ClusterOOMsTracker (`clusterOOMsTrackerEnabled`) | the call's action | the call's action |
//!
//! `pauseSystemPodMetrics` and `unpauseSystemPodMetrics` pause and unpause SystemPodMetrics
//! alone (where enabled).
//!
//! The parts kemu computes write their own summaries (`EtcdMetrics_…`, `SchedulingMetrics_…`,
//! `ResourceUsageSummary_…`, `MetricsForE2E_…`, `SystemPodMetrics_…`, `ClusterOOMsTracker_…`),
//! as they do in clusterloader2's report
//! directory. The bundle's
//! verdict is the worst of its parts': a part that failed fails it, and a part kemu does not
//! compute makes it not computed, naming the part — never a pass.

use serde_json::{json, Value as Json};

use super::measurements::{
    param_str, param_true, MeasurementResult, Measurements, Params, Verdict,
};

/// The components clusterloader2 profiles, by its names.
const PROFILED: &[&str] = &[
    "etcd",
    "kube-apiserver",
    "kube-scheduler",
    "kube-controller-manager",
];

/// Why kemu computes no profile.
const NO_PROFILES: &str = "kemu's processes serve no pprof profiles";

/// A part of the bundle: its method, the params it runs with, and (for a part kemu does not
/// compute) why.
struct Part {
    method: &'static str,
    params: Params,
    not_computed: Option<String>,
}

/// The bundle's parts for `action`, in clusterloader2's order.
fn parts(action: &str, params: &Params) -> Result<Vec<Part>, String> {
    let with = |overrides: &[(&str, &str)]| {
        let mut p = params.clone();
        for (k, v) in overrides {
            p.insert((*k).to_string(), json!(v));
        }
        p
    };
    let computed = |method, params| Part {
        method,
        params,
        not_computed: None,
    };
    let mut out = match action {
        "start" => vec![
            computed("EtcdMetrics", with(&[("action", "start")])),
            computed("SchedulingMetrics", with(&[("action", "reset")])),
            computed("ResourceUsageSummary", with(&[("action", "start")])),
        ],
        "gather" => vec![
            computed("EtcdMetrics", with(&[("action", "gather")])),
            computed("SchedulingMetrics", with(&[("action", "gather")])),
            computed("MetricsForE2E", params.clone()),
            computed("ResourceUsageSummary", with(&[("action", "gather")])),
        ],
        // Only SystemPodMetrics pauses, around an API server restart.
        "pauseSystemPodMetrics" | "unpauseSystemPodMetrics" => {
            let action = if action == "pauseSystemPodMetrics" {
                "pause"
            } else {
                "unpause"
            };
            if !param_true(params, "systemPodMetricsEnabled") {
                return Ok(Vec::new());
            }
            return Ok(vec![computed(
                "SystemPodMetrics",
                with(&[("action", action)]),
            )]);
        }
        other => return Err(format!("unknown action {other:?}")),
    };
    for component in PROFILED {
        for method in ["CPUProfile", "MemoryProfile", "BlockProfile"] {
            out.push(Part {
                method,
                params: with(&[("action", action), ("componentName", component)]),
                not_computed: Some(NO_PROFILES.into()),
            });
        }
    }
    // Both are no-ops in clusterloader2 unless enabled.
    if param_true(params, "systemPodMetricsEnabled") {
        out.push(computed("SystemPodMetrics", with(&[("action", action)])));
    }
    if param_true(params, "clusterOOMsTrackerEnabled") {
        out.push(computed("ClusterOOMsTracker", with(&[("action", action)])));
    }
    Ok(out)
}

impl Measurements {
    /// Runs TestMetrics' `action` as `identifier`: every part, then the bundle's verdict.
    pub(super) async fn test_metrics(
        &self,
        identifier: &str,
        action: &str,
        params: &Params,
        result: &mut MeasurementResult,
    ) -> Result<(), String> {
        let mut failed = Vec::new();
        let mut not_computed: Vec<String> = Vec::new();
        let mut details = Vec::new();
        for part in parts(action, params)? {
            let component = param_str(&part.params, "componentName");
            let name = match &component {
                Some(c) => format!("{} ({c})", part.method),
                None => part.method.to_string(),
            };
            let verdict = match part.not_computed {
                Some(why) => Verdict::NotComputed(why),
                None => {
                    // The part keeps its own state under (method, this identifier).
                    let mut run =
                        Box::pin(self.execute(part.method, identifier, &part.params)).await;
                    result.summaries.append(&mut run.summaries);
                    run.verdict
                }
            };
            match &verdict {
                Verdict::Passed => {}
                Verdict::Failed(why) => failed.push(format!("{name}: {why}")),
                Verdict::NotComputed(why) => {
                    // One line for the twelve profiles.
                    let line = match component {
                        Some(_) if why == NO_PROFILES => format!(
                            "{} of {}: {why}",
                            "CPUProfile, MemoryProfile and BlockProfile",
                            PROFILED.join(", ")
                        ),
                        _ => format!("{name}: {why}"),
                    };
                    if !not_computed.contains(&line) {
                        not_computed.push(line);
                    }
                }
            }
            details.push(json!({"part": name, "verdict": verdict}));
        }
        result.details = Json::Array(details);
        result.verdict = if !failed.is_empty() {
            Verdict::Failed(failed.join("; "))
        } else if !not_computed.is_empty() {
            Verdict::NotComputed(not_computed.join("; "))
        } else {
            Verdict::Passed
        };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, Json)]) -> Params {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), v.clone()))
            .collect()
    }

    fn names(parts: &[Part]) -> Vec<String> {
        parts
            .iter()
            .map(|p| {
                let action = param_str(&p.params, "action").unwrap_or_default();
                match param_str(&p.params, "componentName") {
                    Some(c) => format!("{} {action} {c}", p.method),
                    None => format!("{} {action}", p.method),
                }
            })
            .collect()
    }

    #[test]
    fn start_resets_scheduling_metrics_and_gather_adds_metrics_for_e2e() {
        let p = params(&[
            ("action", json!("start")),
            ("systemPodMetricsEnabled", json!(false)),
            ("clusterOOMsTrackerEnabled", json!("true")),
            ("enableRestartCountCheck", json!(true)),
        ]);
        let start = parts("start", &p).unwrap();
        let n = names(&start);
        assert_eq!(
            &n[..3],
            [
                "EtcdMetrics start",
                "SchedulingMetrics reset",
                "ResourceUsageSummary start"
            ]
        );
        assert_eq!(n[3], "CPUProfile start etcd");
        assert_eq!(n[14], "BlockProfile start kube-controller-manager");
        // Disabled SystemPodMetrics is left out (a no-op in clusterloader2); the OOM tracker
        // is enabled by the string "true" too.
        assert_eq!(n.len(), 16, "{n:?}");
        assert_eq!(n[15], "ClusterOOMsTracker start");
        // Every part carries the bundle's other params.
        assert!(start
            .iter()
            .all(|part| part.params.contains_key("enableRestartCountCheck")));

        let gather = parts("gather", &params(&[("action", json!("gather"))])).unwrap();
        let n = names(&gather);
        assert_eq!(
            &n[..4],
            [
                "EtcdMetrics gather",
                "SchedulingMetrics gather",
                "MetricsForE2E gather",
                "ResourceUsageSummary gather"
            ]
        );
        assert_eq!(n.len(), 16);
        assert!(gather[..4].iter().all(|p| p.not_computed.is_none()));
        assert!(gather[4..].iter().all(|p| p.not_computed.is_some()));
        // Enabled, both are computed.
        let both = params(&[
            ("systemPodMetricsEnabled", json!(true)),
            ("clusterOOMsTrackerEnabled", json!(true)),
        ]);
        let gather = parts("gather", &both).unwrap();
        let n = names(&gather);
        assert_eq!(
            n[16..],
            ["SystemPodMetrics gather", "ClusterOOMsTracker gather"]
        );
        assert!(gather[16..].iter().all(|p| p.not_computed.is_none()));

        // Pausing reaches SystemPodMetrics alone, and only where enabled.
        let paused = parts("unpauseSystemPodMetrics", &both).unwrap();
        assert_eq!(names(&paused), ["SystemPodMetrics unpause"]);
        assert!(parts("pauseSystemPodMetrics", &p).unwrap().is_empty());

        let err = parts("stop", &p).err().unwrap();
        assert_eq!(err, "unknown action \"stop\"");
    }
}
