//! clusterloader2's SystemPodMetrics: the restart counts of every container of kube-system's
//! pods, read at `start` and again at `gather`, the growth in between written as its
//! `SystemPodMetrics` summary (`{"pods": [{"name", "containers": [{"name", "restartCount",
//! "lastRestartReason"}]}]}`). With `enableRestartCountCheck` a container that restarted more
//! often than its threshold fails it: `restartCountThresholdOverrides` (a YAML map of container
//! name to restarts, the key `default` for the rest) gives the thresholds, 0 where none does.
//! `pause` does nothing and `unpause` reads the counts again as if starting then (TestMetrics'
//! `pauseSystemPodMetrics` and `unpauseSystemPodMetrics`, around an API server restart).
//! Without `systemPodMetricsEnabled` it does nothing, as in clusterloader2.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{json, Value as Json};

use super::measurements::{
    param, param_true, switched_on, MeasurementResult, Measurements, Params, Running,
};
use super::objects::Resource;

/// One container's restarts.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ContainerRestarts {
    pub name: String,
    #[serde(rename = "restartCount")]
    pub restart_count: i64,
    /// The last termination as the Go client prints it (`&ContainerStateTerminated{…}`),
    /// empty when the container never terminated.
    #[serde(rename = "lastRestartReason")]
    pub last_restart_reason: String,
}

/// One pod's containers.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PodRestarts {
    pub name: String,
    pub containers: Vec<ContainerRestarts>,
}

/// A Kubernetes timestamp as Go's `time.Time` prints (`2026-01-02 03:04:05 +0000 UTC`).
fn go_time(stamp: &Json) -> String {
    let parsed = stamp
        .as_str()
        .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&chrono::Utc));
    match parsed {
        Some(t) => t.format("%Y-%m-%d %H:%M:%S +0000 UTC").to_string(),
        None => "0001-01-01 00:00:00 +0000 UTC".into(),
    }
}

/// A `ContainerStateTerminated` as its generated Go `String()` writes it.
fn terminated_string(t: &Json) -> String {
    let field = |k: &str| match &t[k] {
        Json::String(s) => s.clone(),
        Json::Null => String::new(),
        other => other.to_string(),
    };
    let number = |k: &str| t[k].as_i64().unwrap_or(0);
    format!(
        "&ContainerStateTerminated{{ExitCode:{},Signal:{},Reason:{},Message:{},StartedAt:{},\
         FinishedAt:{},ContainerID:{},}}",
        number("exitCode"),
        number("signal"),
        field("reason"),
        field("message"),
        go_time(&t["startedAt"]),
        go_time(&t["finishedAt"]),
        field("containerID"),
    )
}

/// The restart counts of `pods` (init containers are not counted, as in clusterloader2).
pub fn snapshot(pods: &[Json]) -> Vec<PodRestarts> {
    pods.iter()
        .map(|pod| PodRestarts {
            name: pod["metadata"]["name"].as_str().unwrap_or("").to_string(),
            containers: pod["status"]["containerStatuses"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| ContainerRestarts {
                    name: c["name"].as_str().unwrap_or("").to_string(),
                    restart_count: c["restartCount"].as_i64().unwrap_or(0),
                    last_restart_reason: match &c["lastState"]["terminated"] {
                        Json::Object(_) => terminated_string(&c["lastState"]["terminated"]),
                        _ => String::new(),
                    },
                })
                .collect(),
        })
        .collect()
}

/// `now` with each container's restarts at `start` (matched by pod and container name)
/// taken off; a pod or container new since keeps all of its restarts.
pub fn since(start: &[PodRestarts], mut now: Vec<PodRestarts>) -> Vec<PodRestarts> {
    for pod in &mut now {
        let Some(before) = start.iter().find(|p| p.name == pod.name) else {
            continue;
        };
        for container in &mut pod.containers {
            if let Some(c) = before.containers.iter().find(|c| c.name == container.name) {
                container.restart_count -= c.restart_count;
            }
        }
    }
    now
}

/// `restartCountThresholdOverrides`: a YAML map of container name to the restarts allowed.
/// A param that is not a string gives no overrides, as in clusterloader2.
pub fn thresholds(overrides: Option<&Json>) -> Result<BTreeMap<String, i64>, String> {
    match overrides {
        Some(Json::String(text)) if !text.trim().is_empty() => {
            serde_saphyr::from_str::<Option<BTreeMap<String, i64>>>(text)
                .map(Option::unwrap_or_default)
                .map_err(|e| {
                    format!(
                        "restartCountThresholdOverrides: not a map of container name to \
                         restarts: {}",
                        e.without_snippet()
                    )
                })
        }
        _ => Ok(BTreeMap::new()),
    }
}

/// The containers that restarted more often than allowed, in clusterloader2's words.
pub fn violations(pods: &[PodRestarts], thresholds: &BTreeMap<String, i64>) -> Vec<String> {
    let default = thresholds.get("default").copied().unwrap_or(0);
    let mut out = Vec::new();
    for pod in pods {
        for c in &pod.containers {
            let max = thresholds.get(&c.name).copied().unwrap_or(default);
            if c.restart_count > max {
                out.push(format!(
                    "RestartCount({}, {})={}, want <= {max}",
                    pod.name, c.name, c.restart_count
                ));
            }
        }
    }
    out
}

impl Measurements {
    /// SystemPodMetrics' `action`.
    pub(super) async fn system_pod_metrics(
        &self,
        key: (String, String),
        action: &str,
        params: &Params,
        result: &mut MeasurementResult,
    ) -> Result<(), String> {
        if !switched_on(params, "systemPodMetricsEnabled", result) {
            return Ok(());
        }
        let resource = Resource {
            base: "/api/v1".into(),
            plural: "pods".into(),
            namespaced: true,
        };
        let pods = self
            .objects
            .list_in(&resource, "kube-system", "")
            .await
            .ok_or("listing the pods of kube-system failed")?;
        let now = snapshot(&pods);
        match action {
            "start" => {
                self.running.lock().insert(key, Running::SystemPods(now));
                Ok(())
            }
            "gather" => {
                let Some(Running::SystemPods(start)) = self.running.lock().remove(&key) else {
                    return Err("start needs to be executed before gather".into());
                };
                let pods = since(&start, now);
                let restarts: i64 = pods
                    .iter()
                    .flat_map(|p| &p.containers)
                    .map(|c| c.restart_count)
                    .sum();
                result.details = json!({"pods": pods.len(), "restarts": restarts});
                result
                    .summaries
                    .push(("SystemPodMetrics".into(), json!({ "pods": pods })));
                let limits = thresholds(param(params, "restartCountThresholdOverrides"))?;
                let broken = violations(&pods, &limits);
                if param_true(params, "enableRestartCountCheck") && !broken.is_empty() {
                    return Err(format!("restart counts violation: {}", broken.join("; ")));
                }
                Ok(())
            }
            // Around an API server restart: the restarts before `unpause` are not counted.
            "pause" => Ok(()),
            "unpause" => {
                if let Some(Running::SystemPods(start)) = self.running.lock().get_mut(&key) {
                    *start = now;
                }
                Ok(())
            }
            other => Err(format!("unknown action {other:?}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, containers: &[(&str, i64)]) -> Json {
        let statuses: Vec<Json> = containers
            .iter()
            .map(|(c, n)| json!({"name": c, "restartCount": n}))
            .collect();
        json!({"metadata": {"name": name}, "status": {"containerStatuses": statuses}})
    }

    #[test]
    fn restarts_are_counted_from_start_and_checked_against_thresholds() {
        let start = snapshot(&[pod("dns-1", &[("coredns", 2), ("sidecar", 0)])]);
        let mut now_pods = vec![
            pod("dns-1", &[("coredns", 5), ("sidecar", 1)]),
            pod("proxy-1", &[("kube-proxy", 3)]),
        ];
        now_pods[0]["status"]["containerStatuses"][0]["lastState"] = json!({"terminated": {
            "exitCode": 137, "reason": "OOMKilled",
            "startedAt": "2026-01-02T03:04:05Z", "finishedAt": "2026-01-02T03:05:00Z",
            "containerID": "containerd://abc"}});
        let pods = since(&start, snapshot(&now_pods));
        let summary = serde_json::to_value(json!({ "pods": pods })).unwrap();
        assert_eq!(
            summary["pods"][0]["containers"][0],
            json!({"name": "coredns", "restartCount": 3, "lastRestartReason":
                "&ContainerStateTerminated{ExitCode:137,Signal:0,Reason:OOMKilled,Message:,\
                 StartedAt:2026-01-02 03:04:05 +0000 UTC,FinishedAt:2026-01-02 03:05:00 +0000 \
                 UTC,ContainerID:containerd://abc,}"})
        );
        assert_eq!(summary["pods"][0]["containers"][1]["restartCount"], 1);
        assert_eq!(summary["pods"][0]["containers"][1]["lastRestartReason"], "");
        // A pod new since start keeps all its restarts.
        assert_eq!(summary["pods"][1]["containers"][0]["restartCount"], 3);

        // No overrides: every restart is one too many.
        assert_eq!(
            violations(&pods, &BTreeMap::new()),
            [
                "RestartCount(dns-1, coredns)=3, want <= 0",
                "RestartCount(dns-1, sidecar)=1, want <= 0",
                "RestartCount(proxy-1, kube-proxy)=3, want <= 0",
            ]
        );
        let limits = thresholds(Some(&json!("coredns: 3\ndefault: 1\n"))).unwrap();
        assert_eq!(
            violations(&pods, &limits),
            ["RestartCount(proxy-1, kube-proxy)=3, want <= 1"]
        );
        // Not a string: no overrides; an empty string too; a bad map is named.
        assert!(thresholds(Some(&json!(5))).unwrap().is_empty());
        assert!(thresholds(Some(&json!(""))).unwrap().is_empty());
        let err = thresholds(Some(&json!("coredns: many"))).unwrap_err();
        assert!(err.starts_with("restartCountThresholdOverrides: "), "{err}");
    }
}
