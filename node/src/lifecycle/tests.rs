use std::sync::Arc;

use super::*;
use crate::addressing::Cidr;
use crate::config::RuntimeProfile;
use serde_json::json;

/// Round latencies and no jitter, so timings in the tests are exact.
fn node() -> NodeRuntime {
    let profile = RuntimeProfile {
        run_sandbox_ms: 100,
        pull_image_ms: 1000,
        create_container_ms: 100,
        start_container_ms: 100,
        stop_container_ms: 100,
        stop_sandbox_ms: 100,
        remove_sandbox_ms: 100,
        jitter_percent: 0,
    };
    NodeRuntime::new(
        Arc::new(profile),
        Arc::new(vec!["fail".into()]),
        &[],
        vec![Cidr::parse("10.64.0.0/24").expect("a CIDR")],
        vec![IpAddr::from([100, 64, 0, 1])],
        Resources {
            cpu_milli: 4000,
            memory: 8 << 30,
            pods: 110,
        },
        1,
    )
}

fn pod(spec: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "default", "uid": "u1"},
        "spec": spec,
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}
    }))
    .expect("pod")
}

fn t0() -> DateTime<Utc> {
    DateTime::from_timestamp(1_700_000_000, 0).expect("time")
}

/// Drives the machine with a fake clock: ticks at every wake-up it asks for until `until`,
/// answering volume checks with `missing`.
struct Harness {
    machine: PodLifecycle,
    node: NodeRuntime,
    now: DateTime<Utc>,
    wake: Option<DateTime<Utc>>,
    commands: Vec<Command>,
    missing: Vec<String>,
}

impl Harness {
    fn new(p: Pod) -> Harness {
        Harness {
            machine: PodLifecycle::new(p),
            node: node(),
            now: t0(),
            wake: None,
            commands: Vec::new(),
            missing: Vec::new(),
        }
    }

    fn feed(&mut self, input: Input<'_>) {
        let out = self.machine.step(self.now, input, &mut self.node);
        self.wake = None;
        let mut checks = false;
        for c in out {
            match &c {
                Command::WakeAt(at) => self.wake = Some(*at),
                Command::CheckVolumes(_) => checks = true,
                _ => {}
            }
            self.commands.push(c);
        }
        if checks {
            let missing = self.missing.clone();
            self.feed(Input::VolumesChecked { missing });
        }
    }

    fn run_for(&mut self, secs: f64) {
        let until = self.now + chrono_duration(Duration::from_secs_f64(secs));
        if self.commands.is_empty() {
            self.feed(Input::Tick);
        }
        while let Some(at) = self.wake {
            if at > until {
                break;
            }
            self.now = at.max(self.now);
            self.feed(Input::Tick);
        }
        self.now = until;
    }

    fn status(&self) -> &Value {
        self.commands
            .iter()
            .rev()
            .find_map(|c| match c {
                Command::Status(s) => Some(s),
                _ => None,
            })
            .expect("a status")
    }

    fn printed(&self) -> String {
        let mut p = serde_json::to_value(self.machine.pod()).expect("json");
        p["status"] = self.status().clone();
        apiserver::printers::pod_status_reason(&p)
    }

    fn reasons(&self) -> Vec<&'static str> {
        self.commands
            .iter()
            .filter_map(|c| match c {
                Command::Event { reason, .. } => Some(*reason),
                _ => None,
            })
            .collect()
    }
}

#[test]
fn nginx_runs_and_becomes_ready() {
    let mut h = Harness::new(pod(
        json!({"containers": [{"name": "web", "image": "nginx"}]}),
    ));
    h.run_for(0.0);
    assert_eq!(h.printed(), "ContainerCreating");
    assert_eq!(h.status()["phase"], "Pending");
    h.run_for(5.0);
    let s = h.status();
    assert_eq!(s["phase"], "Running");
    assert_eq!(h.printed(), "Running");
    assert_eq!(s["podIP"], "10.64.0.2");
    assert_eq!(s["hostIP"], "100.64.0.1");
    assert_eq!(s["containerStatuses"][0]["ready"], true);
    assert_eq!(
        s["containerStatuses"][0]["image"],
        "docker.io/library/nginx:latest"
    );
    assert!(s["containerStatuses"][0]["containerID"]
        .as_str()
        .unwrap()
        .starts_with("containerd://"));
    let ready = s["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .unwrap();
    assert_eq!(ready["status"], "True");
    assert_eq!(h.reasons(), vec!["Pulling", "Pulled", "Created", "Started"]);
    assert!(h.wake.is_none(), "an idle running pod needs no timer");
}

#[test]
fn an_image_the_node_has_starts_without_a_pull() {
    let mut h = Harness::new(pod(json!({"containers": [
        {"name": "pause", "image": crate::config::SANDBOX_IMAGE}
    ]})));
    h.node.store_image(crate::config::SANDBOX_IMAGE);
    h.run_for(1.0);
    assert_eq!(h.status()["phase"], "Running");
    assert_eq!(h.reasons(), vec!["Pulled", "Created", "Started"]);
    let pulled = h
        .commands
        .iter()
        .find_map(|c| match c {
            Command::Event { message, .. } => Some(message.as_str()),
            _ => None,
        })
        .unwrap_or_default();
    assert!(pulled.ends_with("already present on machine"), "{pulled}");
}

#[test]
fn sleep_with_never_completes() {
    let mut h = Harness::new(pod(
        json!({"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "2"]}]}),
    ));
    h.run_for(3.0);
    assert_eq!(h.status()["phase"], "Running");
    h.run_for(2.0);
    assert_eq!(h.status()["phase"], "Succeeded");
    assert_eq!(h.printed(), "Completed");
    assert_eq!(
        h.node.used().pods,
        0,
        "a finished pod gives its resources back"
    );
}

#[test]
fn crash_loop_backs_off_exponentially() {
    let mut h = Harness::new(pod(
        json!({"containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", "exit 1"]}]}),
    ));
    h.run_for(3.0);
    // Ran, exited, restarted at once, exited again: now in back-off.
    assert_eq!(h.printed(), "CrashLoopBackOff");
    assert_eq!(h.status()["containerStatuses"][0]["restartCount"], 1);
    assert_eq!(
        h.status()["containerStatuses"][0]["lastState"]["terminated"]["exitCode"],
        1
    );
    let mut waits = Vec::new();
    let mut last_restart = h.now;
    for _ in 0..5 {
        let count = h.status()["containerStatuses"][0]["restartCount"].clone();
        while h.status()["containerStatuses"][0]["restartCount"] == count {
            h.run_for(1.0);
        }
        waits.push((h.now - last_restart).num_seconds());
        last_restart = h.now;
    }
    // 10, 20, 40, 80, 160 s (plus the start latencies).
    for (w, expect) in waits.iter().zip([10, 20, 40, 80, 160]) {
        assert!((*w - expect).abs() <= 3, "{waits:?}");
    }
    assert!(h.reasons().contains(&"BackOff"));
}

#[test]
fn failing_image_backs_off() {
    let mut h = Harness::new(pod(
        json!({"containers": [{"name": "c", "image": "registry/failing:1"}]}),
    ));
    h.run_for(2.0);
    assert_eq!(h.printed(), "ErrImagePull");
    h.run_for(1.0);
    assert_eq!(h.printed(), "ImagePullBackOff");
    h.run_for(60.0);
    assert_eq!(h.printed(), "ImagePullBackOff");
    let pulls = h.reasons().iter().filter(|r| **r == "Pulling").count();
    // t=0, then ~10 s, ~30 s (10 + 20) after: three or four attempts in a minute.
    assert!((3..=4).contains(&pulls), "{pulls}");
}

#[test]
fn init_containers_run_in_order() {
    let mut h = Harness::new(pod(json!({
        "initContainers": [
            {"name": "i1", "image": "busybox", "command": ["sleep", "2"]},
            {"name": "i2", "image": "busybox", "command": ["sleep", "2"]}],
        "containers": [{"name": "c", "image": "nginx:1.27", "imagePullPolicy": "IfNotPresent"}]})));
    h.run_for(0.5);
    assert_eq!(h.printed(), "Init:0/2");
    h.run_for(3.0);
    assert_eq!(h.printed(), "Init:1/2");
    h.run_for(4.0);
    assert_eq!(h.printed(), "Running", "{:#?}", h.status());
    let started: Vec<String> = h
        .commands
        .iter()
        .filter_map(|c| match c {
            Command::Event {
                reason: "Started",
                field_path,
                ..
            } => field_path.clone(),
            _ => None,
        })
        .collect();
    assert_eq!(
        started,
        vec![
            "spec.initContainers{i1}",
            "spec.initContainers{i2}",
            "spec.containers{c}"
        ]
    );
    // busybox was pulled once: the second init container found it present? No: policy
    // Always (no tag) pulls each time.
    assert_eq!(
        h.status()["initContainerStatuses"][1]["state"]["terminated"]["reason"],
        "Completed"
    );
}

#[test]
fn failing_init_container() {
    let mut h = Harness::new(pod(json!({
        "initContainers": [{"name": "i1", "image": "busybox", "command": ["false"]}],
        "containers": [{"name": "c", "image": "nginx"}]})));
    h.run_for(3.0);
    assert_eq!(h.printed(), "Init:CrashLoopBackOff");
    let mut never = Harness::new(pod(json!({"restartPolicy": "Never",
        "initContainers": [{"name": "i1", "image": "busybox", "command": ["false"]}],
        "containers": [{"name": "c", "image": "nginx"}]})));
    never.run_for(3.0);
    assert_eq!(never.printed(), "Init:Error");
    assert_eq!(never.status()["phase"], "Failed");
}

#[test]
fn missing_config_map_holds_the_pod() {
    let mut h = Harness::new(pod(json!({
        "volumes": [{"name": "cfg", "configMap": {"name": "settings"}}],
        "containers": [{"name": "c", "image": "nginx"}]})));
    h.missing = vec![
        "MountVolume.SetUp failed for volume \"cfg\" : configmap \"settings\" not found".into(),
    ];
    h.run_for(10.0);
    assert_eq!(h.printed(), "ContainerCreating");
    let mounts = h.reasons().iter().filter(|r| **r == "FailedMount").count();
    assert!(mounts >= 3, "{mounts}");
    h.missing.clear();
    h.run_for(10.0);
    assert_eq!(h.printed(), "Running");
}

#[test]
fn resource_misfit_is_rejected() {
    let mut h = Harness::new(pod(
        json!({"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "64"}}}]}),
    ));
    h.run_for(0.0);
    assert_eq!(h.status()["phase"], "Failed");
    assert_eq!(h.printed(), "OutOfcpu");
}

#[test]
fn graceful_deletion_runs_pre_stop_and_waits_for_the_grace_period() {
    let mut p = pod(
        json!({"terminationGracePeriodSeconds": 5, "containers": [{"name": "c", "image": "busybox",
        "command": ["sleep", "3600"], "lifecycle": {"preStop": {"exec": {"command": ["sleep", "2"]}}}}]}),
    );
    let mut h = Harness::new(p.clone());
    h.run_for(5.0);
    assert_eq!(h.status()["phase"], "Running");
    p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::from_second(1_700_000_010).expect("ts"),
    ));
    p.metadata.deletion_grace_period_seconds = Some(5);
    let deleted_at = h.now;
    h.feed(Input::Updated(&p));
    assert!(h.reasons().contains(&"Killing"));
    h.run_for(4.0);
    assert!(
        !h.commands
            .iter()
            .any(|c| matches!(c, Command::DeletePod { .. })),
        "sleep ignores SIGTERM: waits the grace period"
    );
    h.run_for(2.0);
    assert!(h
        .commands
        .iter()
        .any(|c| matches!(c, Command::DeletePod { uid } if uid == "u1")));
    assert!(h.now - deleted_at >= chrono::Duration::seconds(5));
    assert_eq!(h.node.used().pods, 0);
    h.feed(Input::Removed);
    assert_eq!(h.commands.last(), Some(&Command::Forget));
}

#[test]
fn server_exits_on_sigterm_and_force_delete_cleans_up() {
    let mut p = pod(json!({"containers": [{"name": "c", "image": "nginx"}]}));
    let mut h = Harness::new(p.clone());
    h.run_for(5.0);
    p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::from_second(1_700_000_035).expect("ts"),
    ));
    p.metadata.deletion_grace_period_seconds = Some(30);
    h.feed(Input::Updated(&p));
    h.run_for(2.0);
    assert!(
        h.commands
            .iter()
            .any(|c| matches!(c, Command::DeletePod { .. })),
        "nginx exits at SIGTERM"
    );
    let mut h = Harness::new(pod(
        json!({"containers": [{"name": "c", "image": "nginx"}]}),
    ));
    h.run_for(5.0);
    assert_eq!(h.node.used().pods, 1);
    h.feed(Input::Removed);
    assert_eq!(h.node.used().pods, 0);
    assert_eq!(
        h.node.allocate_ips(),
        Some(vec![IpAddr::from([10, 64, 0, 2])]),
        "the IP was released"
    );
}

#[test]
fn probes_drive_readiness_and_restarts() {
    let mut p = pod(json!({"containers": [{"name": "c", "image": "nginx",
        "readinessProbe": {"httpGet": {"path": "/", "port": 80}, "periodSeconds": 1},
        "livenessProbe": {"httpGet": {"path": "/", "port": 80}, "periodSeconds": 1, "failureThreshold": 2}}]}));
    p.metadata.annotations = Some(
        [
            ("kemu.dev/ready-after".to_string(), "3".to_string()),
            ("kemu.dev/liveness-fail-after".to_string(), "10".to_string()),
        ]
        .into(),
    );
    let mut h = Harness::new(p);
    h.run_for(3.0);
    assert_eq!(h.status()["containerStatuses"][0]["ready"], false);
    h.run_for(3.0);
    assert_eq!(h.status()["containerStatuses"][0]["ready"], true);
    h.run_for(8.0);
    assert!(h.reasons().contains(&"Unhealthy"));
    assert!(h.reasons().contains(&"Killing"));
    assert_eq!(h.status()["containerStatuses"][0]["restartCount"], 1);
}

#[test]
fn claims_hold_the_pod_until_bound_and_attached() {
    let mut machine = PodLifecycle::new(pod(json!({
        "containers": [{"name": "app", "image": "nginx"}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "c"}}],
    })));
    let mut node = node();
    let ms = |n| chrono_duration(Duration::from_millis(n));
    let events = |out: &[Command]| -> Vec<(&'static str, String)> {
        out.iter()
            .filter_map(|c| match c {
                Command::Event {
                    reason, message, ..
                } => Some((*reason, message.clone())),
                _ => None,
            })
            .collect()
    };
    let check = Command::CheckClaims(vec![("data".into(), "c".into())]);
    let mut now = t0();
    machine.step(now, Input::Tick, &mut node);
    now += ms(100);
    let out = machine.step(now, Input::Tick, &mut node);
    assert!(out.contains(&check), "{out:?}");
    assert!(!out.iter().any(|c| matches!(c, Command::CheckVolumes(_))));

    // A claim that cannot be used: FailedMount, looked at again after 1 s.
    let failed = ClaimsAnswer::Failed("PVC is not bound".into());
    let out = machine.step(now, Input::ClaimsChecked(failed), &mut node);
    assert_eq!(
        events(&out),
        vec![("FailedMount", "PVC is not bound".to_string())]
    );
    assert!(out.contains(&Command::WakeAt(now + ms(1000))), "{out:?}");
    let status = machine.status(now);
    assert_eq!(
        status["containerStatuses"][0]["state"]["waiting"]["reason"],
        "ContainerCreating"
    );
    now += ms(1000);
    assert!(machine.step(now, Input::Tick, &mut node).contains(&check));

    // Bound but not attached: no event, looked at again after 300 ms.
    let out = machine.step(
        now,
        Input::ClaimsChecked(ClaimsAnswer::Unattached),
        &mut node,
    );
    assert!(events(&out).is_empty(), "{out:?}");
    assert!(out.contains(&Command::WakeAt(now + ms(300))), "{out:?}");
    now += ms(300);
    assert!(machine.step(now, Input::Tick, &mut node).contains(&check));
    // Still not attached: the looks space out, doubling up to 1.2 s.
    for wait in [600, 1200, 1200] {
        let out = machine.step(
            now,
            Input::ClaimsChecked(ClaimsAnswer::Unattached),
            &mut node,
        );
        assert!(
            out.contains(&Command::WakeAt(now + ms(wait))),
            "{wait}: {out:?}"
        );
        now += ms(wait);
        assert!(machine.step(now, Input::Tick, &mut node).contains(&check));
    }

    // Ready: on to the containers.
    let out = machine.step(now, Input::ClaimsChecked(ClaimsAnswer::Ready), &mut node);
    assert!(events(&out).iter().any(|(r, _)| *r == "Pulling"), "{out:?}");
}
