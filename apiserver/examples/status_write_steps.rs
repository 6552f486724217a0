//! Times the in-memory steps of a node host's pod status write on the API server, per call:
//! parsing the stored pod, the JSON patch that replaces its status, and the status strategy
//! done by rebuilding the object from the stored one (`strategy::prepare_update`) against
//! keeping the patched object as it is (`strategy::prepare_status_update_in_place`, what a
//! write that changes only the status takes), then recording the write's managed fields as
//! kubelet's (`field_manager::record_update`). Last, the record of a kubelet's Lease renewal,
//! where the kubelet's stored entry already owns the one field a renewal changes and only takes
//! the write's time, against the same record through the general path (decode the entry, join
//! the changed fields, encode it), which a stored entry without a time takes.
//!
//! `cargo run --release -p apiserver --example status_write_steps`
use std::time::Instant;

use apiserver::field_manager;
use apiserver::patch::PatchType;
use apiserver::strategy;
use serde_json::{json, Value};

/// A pod as the API server stores it once bound: the token volume, tolerations and managed
/// fields its admission adds, and a Pending status.
fn pod() -> Value {
    json!({
      "apiVersion": "v1", "kind": "Pod",
      "metadata": {"name": "load-00001-abcde", "namespace": "load-3", "uid": "0b6f4b7e-7d1e-4f0a-9a55-6f1f2c3d4e5f",
        "resourceVersion": "123456", "creationTimestamp": "2026-11-29T15:00:00Z", "labels": {"app": "load", "kemu-load": "330a63e8"},
        "managedFields": [{"manager": "kemu-load", "operation": "Update", "apiVersion": "v1", "time": "2026-11-29T15:00:00Z", "fieldsType": "FieldsV1",
          "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}, "f:kemu-load": {}}}, "f:spec": {"f:containers": {"k:{\"name\":\"pause\"}": {".": {}, "f:image": {}, "f:imagePullPolicy": {}, "f:name": {}, "f:resources": {".": {}, "f:requests": {".": {}, "f:cpu": {}, "f:memory": {}}}, "f:terminationMessagePath": {}, "f:terminationMessagePolicy": {}}}, "f:dnsPolicy": {}, "f:enableServiceLinks": {}, "f:restartPolicy": {}, "f:schedulerName": {}, "f:securityContext": {}, "f:terminationGracePeriodSeconds": {}}}}]},
      "spec": {"volumes": [{"name": "kube-api-access-x7k2p", "projected": {"sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}, {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}, {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}], "defaultMode": 420}}],
        "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}, "volumeMounts": [{"name": "kube-api-access-x7k2p", "readOnly": true, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}], "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}],
        "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst", "serviceAccountName": "default", "serviceAccount": "default", "nodeName": "node-01234", "securityContext": {}, "schedulerName": "default-scheduler",
        "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}, {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
        "priority": 0, "enableServiceLinks": true, "preemptionPolicy": "PreemptLowerPriority"},
      "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-11-29T15:00:00Z"}], "qosClass": "Burstable"}
    })
}

/// The status a node host writes once the pod runs.
fn status() -> Value {
    json!({"phase": "Running", "conditions": [
        {"type": "PodReadyToStartContainers", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-11-29T15:00:01Z"},
        {"type": "Initialized", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-11-29T15:00:00Z"},
        {"type": "Ready", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-11-29T15:00:01Z"},
        {"type": "ContainersReady", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-11-29T15:00:01Z"},
        {"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-11-29T15:00:00Z"}],
      "hostIP": "10.0.12.34", "hostIPs": [{"ip": "10.0.12.34"}], "podIP": "10.128.12.5", "podIPs": [{"ip": "10.128.12.5"}], "startTime": "2026-11-29T15:00:00Z",
      "containerStatuses": [{"name": "pause", "state": {"running": {"startedAt": "2026-11-29T15:00:01Z"}}, "lastState": {}, "ready": true, "restartCount": 0, "image": "registry.k8s.io/pause:3.10", "imageID": "registry.k8s.io/pause@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a", "containerID": "containerd://5f2a", "started": true, "volumeMounts": [{"name": "kube-api-access-x7k2p", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true, "recursiveReadOnly": "Disabled"}]}],
      "qosClass": "Burstable"})
}

/// A node's Lease as the API server stores it after a renewal by `kubelet`, and the next
/// renewal as a node host sends it. `timed`: whether the kubelet's entry has its time.
fn lease_renewal(timed: bool) -> (Value, Value) {
    let renewal = |renew: &str| {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
          "metadata": {"name": "node-01234", "namespace": "kube-node-lease", "resourceVersion": "123456",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "node-01234", "uid": "6b1c2f0e-3a4d-4e5f-8a9b-0c1d2e3f4a5b"}]},
          "spec": {"holderIdentity": "node-01234", "leaseDurationSeconds": 40, "renewTime": renew}})
    };
    let mut stored = renewal("2026-11-29T15:00:00.123456Z");
    stored["metadata"]["uid"] = json!("2c3d4e5f-6a7b-4c8d-9e0f-1a2b3c4d5e6f");
    stored["metadata"]["creationTimestamp"] = json!("2026-11-29T14:00:00Z");
    let mut entry = json!({"manager": "kubelet", "operation": "Update", "apiVersion": "coordination.k8s.io/v1",
      "time": "2026-11-29T15:00:00Z", "fieldsType": "FieldsV1",
      "fieldsV1": {"f:metadata": {"f:ownerReferences": {".": {}, "k:{\"uid\":\"6b1c2f0e-3a4d-4e5f-8a9b-0c1d2e3f4a5b\"}": {".": {}, "f:apiVersion": {}, "f:kind": {}, "f:name": {}, "f:uid": {}}}},
        "f:spec": {"f:holderIdentity": {}, "f:leaseDurationSeconds": {}, "f:renewTime": {}}}});
    if !timed {
        entry.as_object_mut().map(|e| e.remove("time"));
    }
    stored["metadata"]["managedFields"] = json!([entry]);
    (stored, renewal("2026-11-29T15:00:10.123456Z"))
}

/// Runs `f` `n` times after a tenth as many to warm up, and prints the mean per call.
fn time<T>(label: &str, n: u32, mut f: impl FnMut() -> T) {
    for _ in 0..n / 10 {
        std::hint::black_box(f());
    }
    let t = Instant::now();
    for _ in 0..n {
        std::hint::black_box(f());
    }
    let us = t.elapsed().as_secs_f64() * 1e6 / f64::from(n);
    println!("{label:44} {us:8.2} µs");
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let pods = api::resources::pods();
    let current = pod();
    let stored = serde_json::to_vec(&current)?;
    println!("a bound pod of {} bytes of JSON", stored.len());
    let body =
        serde_json::to_vec(&json!([{"op": "replace", "path": "/status", "value": status()}]))?;
    let patch = || {
        apiserver::patch::apply(
            pods.kind,
            &current,
            &body,
            PatchType::Json,
            "kubelet",
            false,
        )
    };
    let patched = patch()?;
    let mut in_place = patched.clone();
    strategy::prepare_status_update_in_place(pods, &current, &mut in_place);
    let kubelet = field_manager::Writer {
        manager: "kubelet",
        kind: pods.kind.into(),
        api_version: "v1",
        subresource: Some("status"),
        has_status: true,
    };
    let leases =
        api::resources::find("coordination.k8s.io", "v1", "leases").ok_or("leases are served")?;
    let lease_writer = field_manager::Writer {
        manager: "kubelet",
        kind: leases.kind.into(),
        api_version: "coordination.k8s.io/v1",
        subresource: None,
        has_status: false,
    };
    let n = 200_000;
    for round in 1..=3 {
        println!("round {round} of 3, {n} calls each");
        time("parse the stored pod", n, || {
            serde_json::from_slice::<Value>(&stored)
        });
        time("copy the stored pod", n, || current.clone());
        time("JSON patch replacing the status", n, patch);
        time("copy the patched pod (in both below)", n, || {
            patched.clone()
        });
        time("status strategy, rebuilt from the stored pod", n, || {
            let mut next = patched.clone();
            strategy::prepare_update(pods, &current, &mut next, Some("status"));
            next
        });
        time("status strategy, kept in place", n, || {
            let mut next = patched.clone();
            strategy::prepare_status_update_in_place(pods, &current, &mut next);
            next
        });
        time("kubelet's managed fields recorded", n, || {
            let mut next = in_place.clone();
            field_manager::record_update(&kubelet, &current, &mut next, "2026-11-29T15:00:01Z");
            next
        });
        for (timed, label) in [
            (true, "Lease renewal recorded, the entry retimed"),
            (false, "the same through the general path"),
        ] {
            let (stored, renewal) = lease_renewal(timed);
            time(label, n, || {
                let mut next = renewal.clone();
                field_manager::record_update(
                    &lease_writer,
                    &stored,
                    &mut next,
                    "2026-11-29T15:00:10Z",
                );
                next
            });
        }
    }
    Ok(())
}
