//! What the controllers need to know about a pod's state.

use k8s_openapi::api::core::v1::Pod;

use crate::owners::{controller_of, seconds};

/// The pods informer's index of pods by their controller's uid (`Store::by_index`).
pub const BY_CONTROLLER: &str = "controller-uid";
/// The pods informer's index of pods by the node they are bound to.
pub const BY_NODE: &str = "node";

/// The controller manager's pod informer transform (client-go's `SetTransform`): keeps exactly
/// what its controllers read of a pod, so the cache of every pod in the cluster holds about
/// half of each (a typed `Pod` is ~2.5 KB before any heap, and each `Container` ~2.3 KB, so
/// the types' own size is most of what is left). Deterministic, as informer transforms must be.
///
/// Kept, and who reads it:
/// - metadata: name, namespace, uid, resourceVersion (the informer itself); labels (ReplicaSet's
///   fully-labeled count, Service selectors); ownerReferences (ReplicaSet and Job ownership);
///   creationTimestamp (which pods go first); deletionTimestamp and deletionGracePeriodSeconds
///   (activity, quota charges);
/// - spec: nodeName (node lifecycle, endpoints); tolerations (taint eviction); each container's
///   name, ports (named Service target ports) and resources, init containers' name and
///   resources (quota usage and QoS scopes); activeDeadlineSeconds and priorityClassName
///   (quota scopes); a DaemonSet pod's affinity (the node it is made for, until it is bound);
/// - status: phase; the Ready condition (readiness and since when); podIP (endpoints); the
///   name and restartCount of each container status that restarted (Job failures, which pods
///   go first; the others add nothing to a pod's restarts).
///
/// Kept for the garbage collector, which takes its pod graph from this informer: uid,
/// ownerReferences, finalizers, deletionTimestamp.
///
/// Kept for the volume controllers: the `persistentVolumeClaim` volumes.
///
/// Dropped: managedFields, annotations, images, commands, probes, other volumes and every other spec
/// field, the other conditions, hostIP, podIPs, container states. A controller that writes a pod's
/// conditions must therefore patch by condition type (a strategic merge), never write the
/// cached list back.
pub fn keep_controller_fields(pod: &mut Pod) {
    use k8s_openapi::api::core::v1::{Container, ContainerStatus, PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    let daemon = controller_of(&pod.metadata).is_some_and(|r| r.kind == "DaemonSet");
    let meta = std::mem::take(&mut pod.metadata);
    pod.metadata = ObjectMeta {
        name: meta.name,
        namespace: meta.namespace,
        uid: meta.uid,
        resource_version: meta.resource_version,
        labels: meta.labels,
        owner_references: meta.owner_references,
        // The garbage collector's graph reads them (orphan and foreground deletion).
        finalizers: meta.finalizers,
        creation_timestamp: meta.creation_timestamp,
        deletion_timestamp: meta.deletion_timestamp,
        deletion_grace_period_seconds: meta.deletion_grace_period_seconds,
        ..Default::default()
    };
    if let Some(spec) = pod.spec.as_mut() {
        let container = |c: &mut Container, ports: bool| Container {
            name: std::mem::take(&mut c.name),
            ports: if ports { c.ports.take() } else { None },
            resources: c.resources.take(),
            ..Default::default()
        };
        let containers = spec
            .containers
            .iter_mut()
            .map(|c| container(c, true))
            .collect();
        let init_containers = spec
            .init_containers
            .as_mut()
            .map(|cs| cs.iter_mut().map(|c| container(c, false)).collect());
        *spec = PodSpec {
            containers,
            init_containers,
            node_name: spec.node_name.take(),
            tolerations: spec.tolerations.take(),
            active_deadline_seconds: spec.active_deadline_seconds.take(),
            priority_class_name: spec.priority_class_name.take(),
            affinity: if daemon { spec.affinity.take() } else { None },
            // The volume controllers read which claims a pod uses.
            volumes: spec
                .volumes
                .take()
                .map(|volumes| {
                    volumes
                        .into_iter()
                        .filter(|v| v.persistent_volume_claim.is_some())
                        .collect::<Vec<_>>()
                })
                .filter(|claims| !claims.is_empty()),
            ..Default::default()
        };
    }
    if let Some(status) = pod.status.as_mut() {
        let ready: Vec<_> = status
            .conditions
            .take()
            .into_iter()
            .flatten()
            .filter(|c| c.type_ == "Ready")
            .collect();
        // Only containers that restarted add to a pod's restarts.
        let restarted: Vec<_> = status
            .container_statuses
            .take()
            .into_iter()
            .flatten()
            .filter(|c| c.restart_count != 0)
            .map(|c| ContainerStatus {
                name: c.name,
                restart_count: c.restart_count,
                ..Default::default()
            })
            .collect();
        *status = PodStatus {
            phase: status.phase.take(),
            // The autoscaler tells a starting pod's CPU samples apart by it.
            start_time: status.start_time.take(),
            conditions: (!ready.is_empty()).then_some(ready),
            pod_ip: status.pod_ip.take(),
            container_statuses: (!restarted.is_empty()).then_some(restarted),
            ..Default::default()
        };
    }
    shrink(&mut pod.metadata.owner_references);
    if let Some(spec) = pod.spec.as_mut() {
        shrink(&mut spec.tolerations);
    }
    if let Some(status) = pod.status.as_mut() {
        shrink(&mut status.conditions);
        shrink(&mut status.container_statuses);
    }
}

/// Drops a kept list's spare room: a decoded list of small items starts with room for four
/// (a 752-byte `ContainerStatus` list of one holds 3 KB).
fn shrink<T>(list: &mut Option<Vec<T>>) {
    if let Some(list) = list.as_mut() {
        list.shrink_to_fit();
    }
}

/// The uid of the pod's controller: its bucket in [`BY_CONTROLLER`].
pub fn controller_uid(pod: &Pod) -> Option<String> {
    controller_of(&pod.metadata).map(|r| r.uid.clone())
}

/// The node the pod is bound to: its bucket in [`BY_NODE`].
pub fn node_name(pod: &Pod) -> Option<String> {
    pod.spec
        .as_ref()?
        .node_name
        .clone()
        .filter(|n| !n.is_empty())
}

/// Neither finished nor being deleted: counts towards a controller's replicas.
pub fn is_active(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none() && !is_terminal(pod)
}

/// Succeeded or Failed.
pub fn is_terminal(pod: &Pod) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed")
}

pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// The Ready condition is True.
pub fn is_ready(pod: &Pod) -> bool {
    ready_since(pod).is_some()
}

/// When the Ready condition last became True (0 if it does not say), if it is True.
fn ready_since(pod: &Pod) -> Option<i64> {
    pod.status
        .as_ref()?
        .conditions
        .as_deref()?
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")
        .map(|c| c.last_transition_time.as_ref().map(seconds).unwrap_or(0))
}

/// Ready for at least `min_ready_seconds` at `now` (seconds since the epoch).
pub fn is_available(pod: &Pod, min_ready_seconds: i32, now: i64) -> bool {
    match ready_since(pod) {
        Some(since) => min_ready_seconds <= 0 || since + i64::from(min_ready_seconds) <= now,
        None => false,
    }
}

pub fn is_scheduled(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
}

/// Restarts of all its containers (OnFailure jobs count them as failures).
pub fn restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .map(|cs| cs.iter().map(|c| c.restart_count).sum())
        .unwrap_or(0)
}

/// A new pod from a controller's template: `generateName` from `prefix`, the template's labels
/// (plus `extra_labels`) and annotations, and the controller reference.
pub fn from_template(
    template: &k8s_openapi::api::core::v1::PodTemplateSpec,
    namespace: &str,
    prefix: &str,
    owner: k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
    extra_labels: &[(&str, &str)],
) -> Pod {
    let meta = template.metadata.clone().unwrap_or_default();
    let mut labels = meta.labels.unwrap_or_default();
    for (k, v) in extra_labels {
        labels.insert((*k).to_string(), (*v).to_string());
    }
    Pod {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            generate_name: Some(format!("{prefix}-")),
            namespace: Some(namespace.to_string()),
            labels: Some(labels),
            annotations: meta.annotations,
            finalizers: meta.finalizers,
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        spec: template.spec.clone(),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::owners::time_at;
    use crate::test_objects::{labels, meta, replica_set};
    use k8s_openapi::api::batch::v1::{Job, JobSpec};
    use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec, Taint};
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    use serde_json::{json, Value};

    /// A pod as the API server serves it once its kubelet reported it running: every field the
    /// controllers read, and the many they do not.
    fn served(name: &str, phase: &str, ready: bool, restarts: i32) -> Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                "resourceVersion": "42", "generation": 1, "generateName": "web-",
                "creationTimestamp": format!("1970-01-01T00:{:02}:00Z", name.len()),
                "labels": {"app": "web", "pod-template-hash": "abc"},
                "annotations": {"kubectl.kubernetes.io/restartedAt": "yesterday"},
                "finalizers": ["example.com/keep"],
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                    "uid": "uid-rs", "controller": true, "blockOwnerDeletion": true}],
                "managedFields": [{"manager": "kubelet", "operation": "Update",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}}]
            },
            "spec": {
                "initContainers": [{"name": "init", "image": "busybox", "command": ["true"],
                    "resources": {"requests": {"cpu": "500m", "memory": "64Mi"}}}],
                "containers": [{"name": "web", "image": "nginx:1.27",
                    "command": ["nginx"], "args": ["-g", "daemon off;"],
                    "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                    "resources": {"requests": {"cpu": "100m", "memory": "16Mi"},
                        "limits": {"cpu": "200m", "memory": "32Mi"}},
                    "readinessProbe": {"httpGet": {"path": "/", "port": 8080}},
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                    "terminationMessagePath": "/dev/termination-log"},
                    {"name": "sidecar", "image": "envoy",
                    "ports": [{"name": "admin", "containerPort": 9901}],
                    "resources": {"requests": {"cpu": "50m"}}}],
                "volumes": [{"name": "data", "emptyDir": {}},
                    {"name": "db", "persistentVolumeClaim": {"claimName": "db-web-0"}}],
                "nodeName": "node-1", "schedulerName": "default-scheduler",
                "priority": 1000, "priorityClassName": "high", "activeDeadlineSeconds": 600,
                "restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
                "serviceAccountName": "default", "terminationGracePeriodSeconds": 30,
                "tolerations": [
                    {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                        "effect": "NoExecute", "tolerationSeconds": 300},
                    {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                        "effect": "NoExecute", "tolerationSeconds": 20}]
            },
            "status": {
                "phase": phase,
                "conditions": [
                    {"type": "PodScheduled", "status": "True", "lastTransitionTime": "1970-01-01T00:10:00Z"},
                    {"type": "Initialized", "status": "True", "lastTransitionTime": "1970-01-01T00:12:00Z"},
                    {"type": "ContainersReady", "status": if ready { "True" } else { "False" },
                        "lastTransitionTime": "1970-01-01T00:15:00Z"},
                    {"type": "Ready", "status": if ready { "True" } else { "False" },
                        "lastTransitionTime": "1970-01-01T00:16:40Z"}],
                "hostIP": "100.64.0.1", "hostIPs": [{"ip": "100.64.0.1"}],
                "podIP": format!("10.0.0.{}", name.len()), "podIPs": [{"ip": "10.0.0.1"}],
                "qosClass": "Burstable", "startTime": "1970-01-01T00:10:00Z",
                "containerStatuses": [
                    {"name": "web", "image": "nginx:1.27", "imageID": "sha256:1", "ready": ready,
                        "restartCount": restarts, "started": true, "containerID": "containerd://1",
                        "state": {"running": {"startedAt": "1970-01-01T00:15:00Z"}}},
                    {"name": "sidecar", "image": "envoy", "imageID": "sha256:2", "ready": true,
                        "restartCount": 1, "state": {"running": {}}}]
            }
        })
    }

    /// Pods in every state the controllers tell apart, as served and as the cache keeps them.
    fn pods() -> Vec<(Pod, Pod)> {
        let mut values = vec![
            served("a", "Running", true, 0),
            served("bb", "Running", false, 2),
            served("ccc", "Pending", false, 0),
            served("dddd", "Succeeded", false, 0),
            served("eeeee", "Failed", false, 5),
            served("ffffff", "Running", true, 1),
        ];
        values[2]["spec"]["nodeName"] = Value::Null;
        values[2]["status"] = json!({"phase": "Pending"});
        values[5]["metadata"]["deletionTimestamp"] = json!("1970-01-01T00:20:00Z");
        values[5]["metadata"]["deletionGracePeriodSeconds"] = json!(30);
        values
            .into_iter()
            .map(|v| {
                let full: Pod = serde_json::from_value(v).expect("a pod");
                let mut kept = full.clone();
                keep_controller_fields(&mut kept);
                (full, kept)
            })
            .collect()
    }

    fn split(pods: &[(Pod, Pod)]) -> (Vec<&Pod>, Vec<&Pod>) {
        pods.iter().map(|(f, k)| (f, k)).unzip()
    }

    #[test]
    fn the_transform_drops_most_of_a_pod_and_is_stable() {
        for (full, kept) in pods() {
            let mut again = kept.clone();
            keep_controller_fields(&mut again);
            assert_eq!(again, kept, "applying it twice changes nothing");
            let size = |p: &Pod| serde_json::to_vec(p).expect("json").len();
            assert!(
                size(&kept) * 3 < size(&full) * 2,
                "{} vs {}",
                size(&kept),
                size(&full)
            );
            assert_eq!(kept.metadata.finalizers, full.metadata.finalizers);
            assert!(kept.metadata.managed_fields.is_none());
            assert!(kept.metadata.annotations.is_none());
            if let Some(spec) = &kept.spec {
                assert!(spec.containers.iter().all(|c| c.image.is_none()));
                // Only the claims stay.
                let names: Vec<&str> = spec
                    .volumes
                    .iter()
                    .flatten()
                    .map(|v| v.name.as_str())
                    .collect();
                let claims: Vec<&str> = full
                    .spec
                    .iter()
                    .flat_map(|s| s.volumes.iter().flatten())
                    .filter(|v| v.persistent_volume_claim.is_some())
                    .map(|v| v.name.as_str())
                    .collect();
                assert_eq!(names, claims);
            }
        }
    }

    #[test]
    fn what_every_pod_reader_asks_survives() {
        for (full, kept) in pods() {
            assert_eq!(controller_uid(&full), controller_uid(&kept));
            assert_eq!(node_name(&full), node_name(&kept));
            assert_eq!(is_active(&full), is_active(&kept));
            assert_eq!(is_terminal(&full), is_terminal(&kept));
            assert_eq!(phase(&full), phase(&kept));
            assert_eq!(is_ready(&full), is_ready(&kept));
            assert_eq!(is_scheduled(&full), is_scheduled(&kept));
            assert_eq!(restarts(&full), restarts(&kept));
            for (min_ready, now) in [(0, 0), (30, 1000), (30, 1100), (600, 1100)] {
                assert_eq!(
                    is_available(&full, min_ready, now),
                    is_available(&kept, min_ready, now)
                );
            }
            for kind in ["ReplicaSet", "Job"] {
                assert_eq!(
                    crate::owned_pods::owner_key(&full, kind),
                    crate::owned_pods::owner_key(&kept, kind)
                );
            }
            assert_eq!(
                crate::owners::key_of(&full.metadata),
                crate::owners::key_of(&kept.metadata)
            );
            assert_eq!(
                full.metadata.resource_version,
                kept.metadata.resource_version
            );
        }
    }

    #[test]
    fn replica_sets_and_jobs_decide_the_same() {
        let pods = pods();
        let (full, kept) = split(&pods);
        // Fewer replicas than pods, so which pods go first matters too.
        for replicas in [0, 1, 2, 10] {
            let mut rs = replica_set("rs", replicas);
            rs.spec.min_ready_seconds = Some(30);
            rs.spec.template.as_mut().expect("template").metadata =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                    labels: Some(labels(&[("app", "web"), ("pod-template-hash", "abc")])),
                    ..Default::default()
                });
            assert_eq!(
                crate::replicaset::plan(&rs, &full, true, 1010),
                crate::replicaset::plan(&rs, &kept, true, 1010)
            );
        }
        for (restart_policy, parallelism) in [("OnFailure", 1), ("Never", 5)] {
            let mut template = crate::test_objects::template("busybox");
            template.spec.as_mut().expect("spec").restart_policy = Some(restart_policy.into());
            let job = Job {
                metadata: meta("pi", "uid-pi"),
                spec: Some(JobSpec {
                    parallelism: Some(parallelism),
                    completions: Some(3),
                    backoff_limit: Some(20),
                    template,
                    ..Default::default()
                }),
                status: None,
            };
            assert_eq!(
                crate::job::plan(&job, &full, true, 2000),
                crate::job::plan(&job, &kept, true, 2000)
            );
        }
    }

    #[test]
    fn endpoints_evictions_and_quotas_come_out_the_same() {
        let pods = pods();
        let (full, kept) = split(&pods);
        let service = Service {
            metadata: meta("web", "uid-web"),
            spec: Some(ServiceSpec {
                selector: Some(labels(&[("app", "web")])),
                ports: Some(vec![
                    ServicePort {
                        name: Some("http".into()),
                        port: 80,
                        target_port: Some(IntOrString::String("http".into())),
                        ..Default::default()
                    },
                    ServicePort {
                        name: Some("admin".into()),
                        port: 9901,
                        target_port: Some(IntOrString::String("admin".into())),
                        ..Default::default()
                    },
                ]),
                ..Default::default()
            }),
            status: None,
        };
        let desired = crate::endpoints::desired(&service, &full);
        assert!(desired.as_ref().is_some_and(|(e, _)| e.subsets.is_some()));
        assert_eq!(desired, crate::endpoints::desired(&service, &kept));

        let taint = |key: &str, added: i64| Taint {
            key: key.into(),
            effect: "NoExecute".into(),
            time_added: Some(time_at(added)),
            value: None,
        };
        for taints in [
            vec![],
            vec![taint("node.kubernetes.io/unreachable", 100)],
            vec![taint("node.kubernetes.io/not-ready", 100)],
            vec![taint("example.com/other", 100)],
        ] {
            for (f, k) in full.iter().zip(&kept) {
                assert_eq!(
                    crate::node_lifecycle::eviction(f, &taints, 110),
                    crate::node_lifecycle::eviction(k, &taints, 110)
                );
            }
        }

        let as_json = |pods: &[&Pod]| -> Vec<Value> {
            pods.iter()
                .map(|p| serde_json::to_value(p).expect("json"))
                .collect()
        };
        // Past the deleted pod's grace period: it no longer counts.
        let now = chrono::DateTime::from_timestamp(1240, 0).expect("a time");
        for spec in [
            json!({"hard": {"pods": "10", "requests.cpu": "10", "limits.memory": "1Gi",
                "memory": "1Gi", "count/pods": "10"}}),
            json!({"hard": {"pods": "10", "cpu": "10"}, "scopes": ["NotBestEffort", "Terminating"]}),
            json!({"hard": {"pods": "10"}, "scopeSelector": {"matchExpressions": [
                {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}}),
        ] {
            let quota = json!({"metadata": {"name": "q", "namespace": "ns"}, "spec": spec});
            let want = crate::resource_quota::desired_status(&quota, &as_json(&full), now);
            assert_ne!(want["used"]["pods"], json!("0"), "{want}");
            assert_eq!(
                want,
                crate::resource_quota::desired_status(&quota, &as_json(&kept), now)
            );
        }
    }

    #[test]
    fn marking_a_pod_not_ready_keeps_its_other_conditions() {
        let served = served("a", "Running", true, 0);
        let api::client::Patch::Strategic(patch) =
            crate::node_lifecycle::not_ready_patch(time_at(5000))
        else {
            panic!("not a strategic merge patch");
        };
        let body = serde_json::to_vec(&patch).expect("json");
        let patched = apiserver::patch::apply(
            "Pod",
            &served,
            &body,
            apiserver::patch::PatchType::StrategicMerge,
            "test",
            false,
        )
        .expect("patched");
        let conditions = patched["status"]["conditions"]
            .as_array()
            .expect("conditions");
        let types: Vec<&str> = conditions
            .iter()
            .filter_map(|c| c["type"].as_str())
            .collect();
        assert_eq!(
            types,
            ["PodScheduled", "Initialized", "ContainersReady", "Ready"]
        );
        let ready = &conditions[3];
        assert_eq!(ready["status"], "False");
        assert_eq!(ready["reason"], "NodeNotReady");
        assert_eq!(ready["lastTransitionTime"], "1970-01-01T01:23:20Z");
        assert_eq!(conditions[0], served["status"]["conditions"][0]);
        let mut kept: Pod = serde_json::from_value(patched).expect("a pod");
        keep_controller_fields(&mut kept);
        assert!(!is_ready(&kept));
    }
}
