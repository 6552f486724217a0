//! The pod status the kubelet reports: phase, conditions, IPs and container statuses.

use std::net::IpAddr;

use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

use super::runtime_ids::{image_id, normalize_image};
use super::{ContainerRun, PodLifecycle, State, Terminated};
use crate::api_time::rfc3339;

impl PodLifecycle {
    /// The pod's status as the kubelet reports it.
    pub(super) fn status(&mut self, now: DateTime<Utc>) -> Value {
        let mut status = Map::new();
        if let Some((reason, message)) = &self.rejection {
            status.insert("phase".into(), json!("Failed"));
            status.insert("reason".into(), json!(reason));
            status.insert("message".into(), json!(message));
            if let Some(t) = self.start_time {
                status.insert("startTime".into(), json!(rfc3339(t)));
            }
            status.insert("conditions".into(), json!(self.pod_scheduled()));
            return Value::Object(status);
        }
        let phase = self.phase();
        let inits = &self.containers[..self.mains_from];
        let mains = &self.containers[self.mains_from..];
        let initialized = inits.iter().all(ContainerRun::succeeded);
        let finished = matches!(phase, "Succeeded" | "Failed");
        let containers_ready = !finished && initialized && mains.iter().all(|c| c.ready);
        let unready: Vec<String> = mains
            .iter()
            .filter(|c| !c.ready)
            .map(|c| c.name().to_string())
            .collect();
        let incomplete: Vec<String> = inits
            .iter()
            .filter(|c| !c.succeeded())
            .map(|c| c.name().to_string())
            .collect();
        let sandbox_ready = self.sandbox_ready;
        let mut conditions = self.pod_scheduled();
        let mut condition = |me: &mut Self,
                             kind: &'static str,
                             ok: bool,
                             reason: Option<String>,
                             message: Option<String>| {
            let since = match me.conditions.get(kind) {
                Some((was, since)) if *was == ok => *since,
                _ => {
                    me.conditions.insert(kind, (ok, now));
                    now
                }
            };
            let mut c = json!({"type": kind, "status": if ok {"True"} else {"False"}, "lastProbeTime": null, "lastTransitionTime": rfc3339(since)});
            if let (false, Some(r)) = (ok, reason) {
                c["reason"] = json!(r);
            }
            if let (false, Some(m)) = (ok, message) {
                c["message"] = json!(m);
            }
            conditions.push(c);
        };
        condition(self, "PodReadyToStartContainers", sandbox_ready, None, None);
        let not_init_reason = (!initialized).then(|| "ContainersNotInitialized".to_string());
        condition(
            self,
            "Initialized",
            initialized || (finished && incomplete.is_empty()),
            not_init_reason,
            Some(format!(
                "containers with incomplete status: [{}]",
                incomplete.join(" ")
            )),
        );
        let (reason, message) = if finished {
            ("PodCompleted".to_string(), None)
        } else {
            (
                "ContainersNotReady".to_string(),
                Some(format!(
                    "containers with unready status: [{}]",
                    unready.join(" ")
                )),
            )
        };
        condition(
            self,
            "ContainersReady",
            containers_ready,
            Some(reason.clone()),
            message.clone(),
        );
        condition(self, "Ready", containers_ready, Some(reason), message);
        status.insert("phase".into(), json!(phase));
        status.insert("conditions".into(), Value::Array(conditions));
        if let Some(t) = self.start_time {
            status.insert("startTime".into(), json!(rfc3339(t)));
        }
        let ips = |ips: &[IpAddr]| -> Vec<Value> {
            ips.iter().map(|ip| json!({"ip": ip.to_string()})).collect()
        };
        if let Some(ip) = self.shown_ips.first() {
            status.insert("podIP".into(), json!(ip.to_string()));
            status.insert("podIPs".into(), json!(ips(&self.shown_ips)));
        }
        if !self.shown_ips.is_empty() || self.sandbox_ready {
            let first = self.host_ips.first().map(IpAddr::to_string);
            status.insert("hostIP".into(), json!(first.unwrap_or_default()));
            status.insert("hostIPs".into(), json!(ips(&self.host_ips)));
        }
        if let Some(qos) = self.pod.status.as_ref().and_then(|s| s.qos_class.clone()) {
            status.insert("qosClass".into(), json!(qos));
        }
        let init_running = (0..self.mains_from).find(|&i| !self.containers[i].succeeded());
        let statuses = |range: std::ops::Range<usize>| -> Vec<Value> {
            range
                .map(|i| {
                    container_status(
                        &self.containers[i],
                        init_running.is_some() && !self.containers[i].init,
                    )
                })
                .collect()
        };
        if self.mains_from > 0 {
            status.insert(
                "initContainerStatuses".into(),
                Value::Array(statuses(0..self.mains_from)),
            );
        }
        status.insert(
            "containerStatuses".into(),
            Value::Array(statuses(self.mains_from..self.containers.len())),
        );
        Value::Object(status)
    }

    fn pod_scheduled(&self) -> Vec<Value> {
        self.pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"))
            .and_then(|c| serde_json::to_value(c).ok())
            .into_iter()
            .collect()
    }

    /// The kubelet's getPhase.
    pub(super) fn phase(&self) -> &'static str {
        let policy = self.restart_policy();
        let inits = &self.containers[..self.mains_from];
        if inits
            .iter()
            .any(|c| matches!(&c.state, State::Terminated(t) if t.exit_code != 0))
        {
            return "Failed";
        }
        if !inits.iter().all(ContainerRun::succeeded) {
            return "Pending";
        }
        let (mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0);
        for c in &self.containers[self.mains_from..] {
            match &c.state {
                State::Running { .. } => running += 1,
                State::Terminated(t) => {
                    stopped += 1;
                    if t.exit_code == 0 {
                        succeeded += 1;
                    }
                }
                _ if c.last.is_some() => stopped += 1,
                _ => waiting += 1,
            }
        }
        if waiting > 0 {
            return "Pending";
        }
        if running > 0 {
            return "Running";
        }
        if stopped > 0 {
            return match policy.as_str() {
                "Always" => "Running",
                "OnFailure" if stopped == succeeded => "Succeeded",
                "OnFailure" => "Running",
                _ if stopped == succeeded => "Succeeded",
                _ => "Failed",
            };
        }
        "Pending"
    }
}

fn container_status(c: &ContainerRun, pod_initializing: bool) -> Value {
    let image = normalize_image(c.image());
    let mut s = json!({
        "name": c.name(),
        "image": image,
        "imageID": if c.container_id.is_empty() { String::new() } else { image_id(&image) },
        "ready": c.ready,
        "started": c.started && c.is_running(),
        "restartCount": c.restart_count,
    });
    if !c.container_id.is_empty() {
        s["containerID"] = json!(c.container_id);
    }
    s["state"] = match &c.state {
        State::Pending
        | State::Pulling { .. }
        | State::Creating { .. }
        | State::Starting { .. } => {
            let reason = if pod_initializing || c.init {
                "PodInitializing"
            } else {
                "ContainerCreating"
            };
            json!({"waiting": {"reason": reason}})
        }
        State::Waiting {
            reason, message, ..
        } => {
            let reason = if *reason == "ContainerCreating" && c.init {
                "PodInitializing"
            } else {
                reason
            };
            if message.is_empty() {
                json!({"waiting": {"reason": reason}})
            } else {
                json!({"waiting": {"reason": reason, "message": message}})
            }
        }
        State::ErrImagePull { message, .. } => {
            json!({"waiting": {"reason": "ErrImagePull", "message": message}})
        }
        State::Running { since, .. } => json!({"running": {"startedAt": rfc3339(*since)}}),
        State::Terminated(t) => json!({"terminated": terminated_json(t)}),
    };
    s["lastState"] = match &c.last {
        Some(t) => json!({"terminated": terminated_json(t)}),
        None => json!({}),
    };
    s
}

fn terminated_json(t: &Terminated) -> Value {
    json!({
        "exitCode": t.exit_code,
        "reason": t.reason,
        "startedAt": rfc3339(t.started),
        "finishedAt": rfc3339(t.finished),
        "containerID": t.container_id,
    })
}
