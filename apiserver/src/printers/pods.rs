//! Pods: READY, STATUS and RESTARTS worked out as kubectl's printPod does.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{
    age, array_at, bool_at, condition_true, human_duration, int_at, is_set, name, none_if_empty,
    str_at, time_at,
};

/// kubectl's pod STATUS column.
pub fn pod_status_reason(pod: &Value) -> String {
    PodSummary::of(pod).reason
}

/// The READY, STATUS and RESTARTS of a pod, worked out together as kubectl's printPod does.
struct PodSummary {
    ready: usize,
    total: usize,
    reason: String,
    restarts: i64,
    last_restart: Option<DateTime<Utc>>,
}

impl PodSummary {
    fn of(pod: &Value) -> PodSummary {
        let phase = str_at(pod, "/status/phase");
        let mut reason = match str_at(pod, "/status/reason") {
            "" => phase.to_string(),
            r => r.to_string(),
        };
        let conditions = array_at(pod, "/status/conditions");
        if conditions.iter().any(|c| {
            str_at(c, "/type") == "PodScheduled" && str_at(c, "/reason") == "SchedulingGated"
        }) {
            reason = "SchedulingGated".into();
        }

        let init_specs = array_at(pod, "/spec/initContainers");
        // Sidecars (init containers with restartPolicy Always) count as pod containers.
        let is_sidecar = |name: &str| {
            init_specs
                .iter()
                .any(|c| str_at(c, "/name") == name && str_at(c, "/restartPolicy") == "Always")
        };
        let mut total = array_at(pod, "/spec/containers").len();
        total += init_specs
            .iter()
            .filter(|c| str_at(c, "/restartPolicy") == "Always")
            .count();
        let mut ready = 0;
        let mut restarts = 0;
        let mut last_restart = None;
        let mut sidecar_restarts = 0;
        let mut sidecar_last_restart = None;

        let mut initializing = false;
        for (i, status) in array_at(pod, "/status/initContainerStatuses")
            .iter()
            .enumerate()
        {
            let sidecar = is_sidecar(str_at(status, "/name"));
            let finished = time_at(status, "/lastState/terminated/finishedAt");
            restarts += int_at(status, "/restartCount");
            last_restart = last_restart.max(finished);
            if sidecar {
                sidecar_restarts += int_at(status, "/restartCount");
                sidecar_last_restart = sidecar_last_restart.max(finished);
            }
            let terminated = is_set(status, "/state/terminated");
            let waiting_reason = str_at(status, "/state/waiting/reason");
            if terminated && int_at(status, "/state/terminated/exitCode") == 0 {
                continue;
            }
            if sidecar && bool_at(status, "/started") {
                if bool_at(status, "/ready") {
                    ready += 1;
                }
                continue;
            }
            reason = if terminated {
                match str_at(status, "/state/terminated/reason") {
                    "" => match int_at(status, "/state/terminated/signal") {
                        0 => format!(
                            "Init:ExitCode:{}",
                            int_at(status, "/state/terminated/exitCode")
                        ),
                        signal => format!("Init:Signal:{signal}"),
                    },
                    r => format!("Init:{r}"),
                }
            } else if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" {
                format!("Init:{waiting_reason}")
            } else {
                format!("Init:{i}/{}", init_specs.len())
            };
            initializing = true;
            break;
        }

        if !initializing || condition_true(conditions, "Initialized") {
            restarts = sidecar_restarts;
            last_restart = sidecar_last_restart;
            let mut has_running = false;
            for status in array_at(pod, "/status/containerStatuses").iter().rev() {
                restarts += int_at(status, "/restartCount");
                last_restart =
                    last_restart.max(time_at(status, "/lastState/terminated/finishedAt"));
                let waiting_reason = str_at(status, "/state/waiting/reason");
                let terminated = is_set(status, "/state/terminated");
                let terminated_reason = str_at(status, "/state/terminated/reason");
                if !waiting_reason.is_empty() {
                    reason = waiting_reason.into();
                } else if terminated && !terminated_reason.is_empty() {
                    reason = terminated_reason.into();
                } else if terminated {
                    reason = match int_at(status, "/state/terminated/signal") {
                        0 => format!("ExitCode:{}", int_at(status, "/state/terminated/exitCode")),
                        signal => format!("Signal:{signal}"),
                    };
                } else if bool_at(status, "/ready") && is_set(status, "/state/running") {
                    has_running = true;
                    ready += 1;
                }
            }
            // A container that completed while another still runs leaves the pod running.
            if reason == "Completed" && has_running {
                reason = if condition_true(conditions, "Ready") {
                    "Running"
                } else {
                    "NotReady"
                }
                .into();
            }
        }

        if is_set(pod, "/metadata/deletionTimestamp") {
            if str_at(pod, "/status/reason") == "NodeLost" {
                reason = "Unknown".into();
            } else if phase != "Succeeded" && phase != "Failed" {
                reason = "Terminating".into();
            }
        }
        PodSummary {
            ready,
            total,
            reason,
            restarts,
            last_restart,
        }
    }

    fn restarts_cell(&self, now: DateTime<Utc>) -> String {
        match self.last_restart {
            Some(t) if self.restarts != 0 => {
                format!("{} ({} ago)", self.restarts, human_duration(now - t))
            }
            _ => self.restarts.to_string(),
        }
    }
}

pub(super) fn pod_cells(pod: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let summary = PodSummary::of(pod);
    let mut ip = array_at(pod, "/status/podIPs")
        .first()
        .map_or("", |p| str_at(p, "/ip"));
    if ip.is_empty() {
        ip = str_at(pod, "/status/podIP");
    }
    let gates = array_at(pod, "/spec/readinessGates");
    let readiness_gates = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let conditions = array_at(pod, "/status/conditions");
        let passed = gates
            .iter()
            .filter(|g| condition_true(conditions, str_at(g, "/conditionType")))
            .count();
        format!("{passed}/{}", gates.len())
    };
    vec![
        name(pod),
        format!("{}/{}", summary.ready, summary.total).into(),
        summary.reason.clone().into(),
        summary.restarts_cell(now).into(),
        age(pod, now),
        none_if_empty(ip).into(),
        none_if_empty(str_at(pod, "/spec/nodeName")).into(),
        none_if_empty(str_at(pod, "/status/nominatedNodeName")).into(),
        readiness_gates.into(),
    ]
}
