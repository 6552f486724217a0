//! Per-resource behaviour on create and update (Kubernetes' "strategies"): what the server sets,
//! resets or keeps, independent of where the request came from.

use api::ResourceInfo;
use rand::Rng;
use serde_json::{json, Map, Value};

use crate::errors::ApiError;
use crate::meta;

/// Characters Kubernetes uses for generateName suffixes (no vowels, no confusable digits).
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// A generated name: `prefix` plus five random characters.
pub fn generate_name(prefix: &str) -> String {
    let mut rng = rand::thread_rng();
    let suffix: String = (0..5)
        .map(|_| NAME_ALPHABET[rng.gen_range(0..NAME_ALPHABET.len())] as char)
        .collect();
    format!("{prefix}{suffix}")
}

/// Sets what the server owns on a new object: name from generateName, namespace, uid,
/// creationTimestamp, generation, and each kind's initial status.
pub fn prepare_create(
    resource: &ResourceInfo,
    namespace: Option<&str>,
    object: &mut Value,
) -> Result<(), ApiError> {
    if !object.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    let custom = crate::crd::is_custom(resource);
    // Custom objects always start at generation 1, with or without a spec.
    let has_spec = custom || (object.get("spec").is_some() && tracks_generation(resource));
    {
        let metadata = meta::metadata_mut(object);
        let name = metadata
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if name.is_empty() {
            match metadata.get("generateName").and_then(Value::as_str) {
                Some(prefix) if !prefix.is_empty() => {
                    let generated = generate_name(prefix);
                    metadata.insert("name".into(), json!(generated));
                }
                _ => {}
            }
        }
        if resource.namespaced {
            let body_ns = metadata
                .get("namespace")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let url_ns = namespace.unwrap_or("");
            if !body_ns.is_empty() && !url_ns.is_empty() && body_ns != url_ns {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            let ns = if url_ns.is_empty() {
                body_ns
            } else {
                url_ns.to_string()
            };
            metadata.insert("namespace".into(), json!(ns));
        } else {
            metadata.remove("namespace");
        }
        metadata.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
        metadata.insert("creationTimestamp".into(), json!(meta::now_rfc3339()));
        metadata.remove("resourceVersion");
        metadata.remove("deletionTimestamp");
        metadata.remove("deletionGracePeriodSeconds");
        metadata.remove("selfLink");
        if has_spec {
            metadata.insert("generation".into(), json!(1));
        } else {
            metadata.remove("generation");
        }
    }
    if custom || crate::crd::is_definition(resource) {
        // With a status subresource, status is written through it only.
        if resource.has_subresource("status") {
            if let Some(map) = object.as_object_mut() {
                map.remove("status");
            }
        }
        return Ok(());
    }
    match resource.kind {
        "Pod" => {
            default_pod_spec(object);
            let qos = qos_class(object.get("spec").unwrap_or(&Value::Null));
            object["status"] = json!({"phase": "Pending", "qosClass": qos});
        }
        "Namespace" => {
            object["spec"] = json!({"finalizers": ["kubernetes"]});
            object["status"] = json!({"phase": "Active"});
        }
        "Deployment" | "ReplicaSet" | "Job" | "ReplicationController" | "StatefulSet" => {
            if let Some(map) = object.as_object_mut() {
                map.remove("status");
            }
            if let Some(template) = object.pointer_mut("/spec/template/spec") {
                default_pod_spec_fields(template);
            }
            if resource.kind == "Deployment" {
                default_deployment(object);
            }
            if resource.kind == "ReplicationController" {
                default_replication_controller(object);
            }
            if resource.kind == "StatefulSet" {
                // Go's zero StatefulSetStatus: the two counts without `omitempty`.
                object["status"] = json!({"replicas": 0, "availableReplicas": 0});
            }
        }
        "DaemonSet" => {
            // The status Go writes for an empty DaemonSetStatus (four fields have no omitempty),
            // and the template generation apps/v1 keeps in an annotation.
            object["status"] = json!({
                "currentNumberScheduled": 0,
                "numberMisscheduled": 0,
                "desiredNumberScheduled": 0,
                "numberReady": 0,
            });
            set_template_generation(object, 1);
            if let Some(template) = object.pointer_mut("/spec/template/spec") {
                default_pod_spec_fields(template);
            }
        }
        "CronJob" => {
            object["status"] = json!({});
            if let Some(template) = object.pointer_mut("/spec/jobTemplate/spec/template/spec") {
                default_pod_spec_fields(template);
            }
        }
        "PodTemplate" => {
            if let Some(template) = object.pointer_mut("/template/spec") {
                default_pod_spec_fields(template);
            }
        }
        "HorizontalPodAutoscaler" => {
            // The controller fills the status in; Go writes the counts v1 and v2 do not omit.
            object["status"] = if crate::autoscaling::is_v1(resource) {
                json!({"currentReplicas": 0, "desiredReplicas": 0})
            } else {
                json!({"desiredReplicas": 0})
            };
        }
        "PodDisruptionBudget" => {
            // The disruption controller fills the status in; until then nothing may be evicted.
            object["status"] = json!({
                "currentHealthy": 0,
                "desiredHealthy": 0,
                "disruptionsAllowed": 0,
                "expectedPods": 0,
            });
        }
        "Service" => default_service(object),
        "Secret" => {
            if let Some(map) = object.as_object_mut() {
                set_default(map, "type", json!("Opaque"));
            }
        }
        "Node" => {
            // A node registers with its status; it is kept.
        }
        "PersistentVolume" => {
            object["status"] =
                json!({"phase": "Pending", "lastPhaseTransitionTime": meta::now_rfc3339()});
        }
        "PersistentVolumeClaim" => object["status"] = json!({"phase": "Pending"}),
        // Go's zero IngressStatus: a struct-valued field is never omitted.
        "Ingress" => object["status"] = json!({"loadBalancer": {}}),
        // Go's zero VolumeAttachmentStatus: `attached` has no omitempty.
        "VolumeAttachment" => object["status"] = json!({"attached": false}),
        "LimitRange" => crate::admission::limit_ranger::default_limit_range(object),
        "ResourceQuota" => {
            // Usage is the server's to count (admission sets it).
            if let Some(map) = object.as_object_mut() {
                map.remove("status");
            }
        }
        _ => {}
    }
    Ok(())
}

/// Kubernetes' defaults for a pod's spec (the API server's defaulting, before admission).
pub fn default_pod_spec(pod: &mut Value) {
    if let Some(spec) = pod.get_mut("spec") {
        default_pod_spec_fields(spec);
    }
}

fn default_pod_spec_fields(spec: &mut Value) {
    let Some(spec) = spec.as_object_mut() else {
        return;
    };
    set_default(spec, "restartPolicy", json!("Always"));
    set_default(spec, "terminationGracePeriodSeconds", json!(30));
    set_default(spec, "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "schedulerName", json!("default-scheduler"));
    set_default(spec, "securityContext", json!({}));
    set_default(spec, "enableServiceLinks", json!(true));
    for list in ["initContainers", "containers"] {
        if let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) {
            for c in containers.iter_mut().filter_map(Value::as_object_mut) {
                let image = c
                    .get("image")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                set_default(c, "imagePullPolicy", json!(default_pull_policy(&image)));
                set_default(c, "terminationMessagePath", json!("/dev/termination-log"));
                set_default(c, "terminationMessagePolicy", json!("File"));
                set_default(c, "resources", json!({}));
                default_requests_to_limits(c);
                if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
                    for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                        set_default(p, "protocol", json!("TCP"));
                    }
                }
            }
        }
    }
}

/// A container that states a limit but not the request gets the limit as its request.
fn default_requests_to_limits(container: &mut Map<String, Value>) {
    let Some(resources) = container
        .get_mut("resources")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    let Some(limits) = resources.get("limits").and_then(Value::as_object).cloned() else {
        return;
    };
    let requests = resources.entry("requests").or_insert_with(|| json!({}));
    if let Some(requests) = requests.as_object_mut() {
        for (k, v) in limits {
            requests.entry(k).or_insert(v);
        }
        if requests.is_empty() {
            resources.remove("requests");
        }
    }
}

/// `Always` for `:latest` or an untagged image, else `IfNotPresent`.
pub fn default_pull_policy(image: &str) -> &'static str {
    let without_digest = image.split('@').next().unwrap_or(image);
    let last = without_digest.rsplit('/').next().unwrap_or(without_digest);
    match last.split_once(':') {
        Some((_, "latest")) | None => "Always",
        Some(_) => "IfNotPresent",
    }
}

/// Service defaults and allocations: a cluster IP from 10.96.0.0/12 and node ports from
/// 30000–32767, chosen at random (collisions are unlikely at emulator scale and harmless: no
/// traffic flows through them).
fn default_service(object: &mut Value) {
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    set_default(spec, "type", json!("ClusterIP"));
    set_default(spec, "sessionAffinity", json!("None"));
    set_default(spec, "internalTrafficPolicy", json!("Cluster"));
    let kind = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
        .to_string();
    let mut rng = rand::thread_rng();
    if kind != "ExternalName" {
        let headless = spec.get("clusterIP").and_then(Value::as_str) == Some("None");
        if spec
            .get("clusterIP")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            let ip = format!(
                "10.{}.{}.{}",
                96 + rng.gen_range(0..16),
                rng.gen_range(0..=255),
                rng.gen_range(2..=254)
            );
            spec.insert("clusterIP".into(), json!(ip));
        }
        let ip = spec.get("clusterIP").cloned().unwrap_or(Value::Null);
        spec.insert("clusterIPs".into(), json!([ip]));
        set_default(spec, "ipFamilies", json!(["IPv4"]));
        set_default(spec, "ipFamilyPolicy", json!("SingleStack"));
        let _ = headless;
    }
    let wants_node_port = kind == "NodePort" || kind == "LoadBalancer";
    if wants_node_port {
        set_default(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            set_default(p, "protocol", json!("TCP"));
            if let Some(port) = p.get("port").cloned() {
                set_default(p, "targetPort", port);
            }
            if wants_node_port {
                set_default(p, "nodePort", json!(rng.gen_range(30000..=32767)));
            }
        }
    }
    object["status"] = json!({"loadBalancer": {}});
}

fn default_deployment(object: &mut Value) {
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    set_default(spec, "replicas", json!(1));
    set_default(spec, "revisionHistoryLimit", json!(10));
    set_default(spec, "progressDeadlineSeconds", json!(600));
    // kubectl sends `strategy: {}`; an empty strategy gets the defaults too.
    let strategy = spec.entry("strategy").or_insert_with(|| json!({}));
    if !strategy.is_object() {
        *strategy = json!({});
    }
    if strategy.get("type").is_none_or(Value::is_null) {
        strategy["type"] = json!("RollingUpdate");
    }
    if strategy["type"] == "RollingUpdate"
        && strategy.get("rollingUpdate").is_none_or(Value::is_null)
    {
        strategy["rollingUpdate"] = json!({"maxSurge": "25%", "maxUnavailable": "25%"});
    }
}

/// Kubernetes' ReplicationController defaults: one replica, and a missing selector and missing
/// labels both taken from the pod template's labels. Status starts at zero replicas.
fn default_replication_controller(object: &mut Value) {
    let template_labels = object
        .pointer("/spec/template/metadata/labels")
        .filter(|l| l.as_object().is_some_and(|m| !m.is_empty()))
        .cloned();
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
        set_default(spec, "replicas", json!(1));
        let unset = spec
            .get("selector")
            .is_none_or(|s| s.as_object().is_none_or(Map::is_empty));
        if let (true, Some(labels)) = (unset, &template_labels) {
            spec.insert("selector".into(), labels.clone());
        }
    }
    if let Some(labels) = template_labels {
        let metadata = meta::metadata_mut(object);
        let unset = metadata
            .get("labels")
            .is_none_or(|l| l.as_object().is_none_or(Map::is_empty));
        if unset {
            metadata.insert("labels".into(), labels);
        }
    }
    object["status"] = json!({"replicas": 0});
}

fn set_default(map: &mut Map<String, Value>, key: &str, value: Value) {
    if map.get(key).is_none_or(Value::is_null) {
        map.insert(key.to_string(), value);
    }
}

pub use api::quota::qos_class;

/// What an update may change depends on the subresource: the main resource keeps the stored
/// status (for resources with a status subresource), `status` keeps everything but status.
/// Server-owned metadata is always kept, and generation follows spec changes.
pub fn prepare_update(
    resource: &ResourceInfo,
    old: &Value,
    new: &mut Value,
    subresource: Option<&str>,
) {
    match subresource {
        Some("status") => {
            // The new status and resourceVersion are moved out of `new` (it is replaced).
            let status = new.as_object_mut().and_then(|m| m.remove("status"));
            let rv = new
                .get_mut("metadata")
                .and_then(Value::as_object_mut)
                .and_then(|m| m.remove("resourceVersion"));
            // The stored object but for its status, which is not copied only to be dropped.
            let mut merged = match old.as_object() {
                Some(members) => Value::Object(
                    members
                        .iter()
                        .filter(|(k, _)| k.as_str() != "status")
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                ),
                None => old.clone(),
            };
            if let (Some(s), Some(m)) = (status, merged.as_object_mut()) {
                m.insert("status".into(), s);
            }
            // A status writer's resourceVersion precondition is honoured by the caller.
            if let Some(rv) = rv {
                meta::metadata_mut(&mut merged).insert("resourceVersion".into(), rv);
            }
            *new = merged;
        }
        _ => {
            if resource.has_subresource("status") {
                match old.get("status") {
                    Some(s) => new["status"] = s.clone(),
                    None => {
                        if let Some(m) = new.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
            }
        }
    }
    finish_update(resource, old, new, subresource);
}

/// [`prepare_update`] of a status write whose object already equals `old` but for its status
/// and `metadata.resourceVersion` (what the status write's fast path checked): the object is
/// kept rather than rebuilt from a copy of `old`, with the same result.
pub fn prepare_status_update_in_place(resource: &ResourceInfo, old: &Value, new: &mut Value) {
    // As the rebuild does: the writer's resourceVersion if it gave one, else the stored one.
    if let Some(rv) = old.pointer("/metadata/resourceVersion") {
        let metadata = meta::metadata_mut(new);
        if !metadata.contains_key("resourceVersion") {
            metadata.insert("resourceVersion".into(), rv.clone());
        }
    }
    finish_update(resource, old, new, Some("status"));
}

/// The part of [`prepare_update`] every subresource shares: server-owned metadata kept,
/// generation following spec changes, and the kinds' own steps.
fn finish_update(resource: &ResourceInfo, old: &Value, new: &mut Value, subresource: Option<&str>) {
    if resource.group.is_empty() && resource.kind == "PersistentVolume" {
        stamp_phase_transition(old, new);
    }
    let old_meta = old.get("metadata").unwrap_or(&Value::Null);
    let metadata = meta::metadata_mut(new);
    for key in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "namespace",
        "name",
    ] {
        match old_meta.get(key) {
            Some(v) => {
                metadata.insert(key.to_string(), v.clone());
            }
            None => {
                metadata.remove(key);
            }
        }
    }
    if !tracks_generation(resource) {
        metadata.remove("generation");
        return;
    }
    let old_generation = old_meta
        .get("generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    metadata.insert("generation".into(), json!(old_generation));
    if spec_changed(old, new) {
        meta::metadata_mut(new).insert("generation".into(), json!(old_generation + 1));
    }
    if old_generation == 0 && new.get("spec").is_none() {
        meta::metadata_mut(new).remove("generation");
    }
    if resource.group == "apps" && resource.kind == "DaemonSet" && subresource.is_none() {
        bump_template_generation(old, new);
    }
    if resource.group.is_empty() && resource.kind == "LimitRange" && subresource.is_none() {
        crate::admission::limit_ranger::default_limit_range(new);
    }
}

/// Whether the kind's strategy keeps `metadata.generation`: the storage kinds' strategies do not
/// (their objects carry none).
fn tracks_generation(resource: &ResourceInfo) -> bool {
    !matches!(
        (resource.group, resource.kind),
        ("", "PersistentVolume" | "PersistentVolumeClaim") | ("storage.k8s.io", _)
    )
}

/// A PersistentVolume whose phase changes gets a new `lastPhaseTransitionTime`, unless the
/// writer set one itself (as the PV status strategy does).
fn stamp_phase_transition(old: &Value, new: &mut Value) {
    let phase = |v: &Value| v.pointer("/status/phase").cloned();
    let stamp = |v: &Value| v.pointer("/status/lastPhaseTransitionTime").cloned();
    if phase(old) == phase(new) || (stamp(new).is_some() && stamp(new) != stamp(old)) {
        return;
    }
    if let Some(status) = new.get_mut("status").and_then(Value::as_object_mut) {
        status.insert("lastPhaseTransitionTime".into(), json!(meta::now_rfc3339()));
    }
}

/// The annotation apps/v1 DaemonSets carry their internal `spec.templateGeneration` in.
pub const TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";

/// A DaemonSet's template generation goes up by one when its pod template changes, and is
/// kept otherwise (a client that drops the annotation does not reset it).
fn bump_template_generation(old: &Value, new: &mut Value) {
    let old_generation = old
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(TEMPLATE_GENERATION))
        .and_then(Value::as_str)
        .and_then(|g| g.parse::<i64>().ok())
        .unwrap_or(1);
    let changed = old.pointer("/spec/template") != new.pointer("/spec/template");
    let generation = if changed {
        old_generation + 1
    } else {
        old_generation
    };
    set_template_generation(new, generation);
}

fn set_template_generation(object: &mut Value, generation: i64) {
    let annotations = meta::metadata_mut(object)
        .entry("annotations")
        .or_insert_with(|| json!({}));
    if !annotations.is_object() {
        *annotations = json!({});
    }
    annotations[TEMPLATE_GENERATION] = json!(generation.to_string());
}

/// Whether anything but metadata and status differs (compared in place: no copies).
fn spec_changed(old: &Value, new: &Value) -> bool {
    let (Value::Object(old), Value::Object(new)) = (old, new) else {
        return old != new;
    };
    fn rest(m: &serde_json::Map<String, Value>) -> impl Iterator<Item = (&String, &Value)> {
        m.iter()
            .filter(|(k, _)| k.as_str() != "metadata" && k.as_str() != "status")
    }
    rest(old).count() != rest(new).count() || rest(old).any(|(k, v)| new.get(k) != Some(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_changes_ignore_only_metadata_and_status() {
        // What the in-place comparison must agree with: both objects without metadata and status.
        let stripped = |v: &Value| {
            let mut v = v.clone();
            if let Some(m) = v.as_object_mut() {
                m.remove("metadata");
                m.remove("status");
            }
            v
        };
        let base = json!({"metadata": {"name": "a"}, "spec": {"x": 1}, "status": {"p": 1}});
        let cases = [
            json!({"metadata": {"name": "b"}, "spec": {"x": 1}, "status": {"p": 2}}),
            json!({"metadata": {"name": "a"}, "spec": {"x": 2}, "status": {"p": 1}}),
            json!({"metadata": {"name": "a"}, "spec": {"x": 1}}),
            json!({"metadata": {"name": "a"}, "spec": {"x": 1}, "data": {}}),
            json!({"metadata": {"name": "a"}}),
            json!({"spec": {"x": 1}, "status": {"p": 1}, "other": null}),
            json!({"spec": {"x": 1}}),
            json!(null),
            json!([1]),
        ];
        for case in &cases {
            for (old, new) in [(&base, case), (case, &base), (case, case)] {
                assert_eq!(
                    spec_changed(old, new),
                    stripped(old) != stripped(new),
                    "{old} -> {new}"
                );
            }
        }
    }

    #[test]
    fn pull_policy_defaults() {
        assert_eq!(default_pull_policy("nginx"), "Always");
        assert_eq!(default_pull_policy("nginx:latest"), "Always");
        assert_eq!(default_pull_policy("nginx:1.25"), "IfNotPresent");
        assert_eq!(default_pull_policy("registry:5000/app"), "Always");
        assert_eq!(default_pull_policy("registry:5000/app:v1"), "IfNotPresent");
    }

    #[test]
    fn qos_classes() {
        assert_eq!(
            qos_class(&json!({"containers": [{"name": "a"}]})),
            "BestEffort"
        );
        let guaranteed =
            json!({"containers": [{"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]});
        assert_eq!(qos_class(&guaranteed), "Guaranteed");
        let burstable = json!({"containers": [{"resources": {"requests": {"cpu": "100m"}}}]});
        assert_eq!(qos_class(&burstable), "Burstable");
    }

    #[test]
    fn create_sets_server_fields_and_pod_defaults() {
        let pods = api::resources::pods();
        let mut pod = json!({"metadata": {"generateName": "web-"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
        prepare_create(pods, Some("default"), &mut pod).expect("prepares");
        assert!(meta::name(&pod).starts_with("web-") && meta::name(&pod).len() == 9);
        assert_eq!(meta::namespace(&pod), Some("default"));
        assert!(!meta::uid(&pod).is_empty());
        assert_eq!(pod["status"]["phase"], "Pending");
        assert_eq!(pod["spec"]["restartPolicy"], "Always");
        assert_eq!(pod["spec"]["containers"][0]["imagePullPolicy"], "Always");
        let mut wrong = json!({"metadata": {"name": "a", "namespace": "other"}});
        assert!(prepare_create(pods, Some("default"), &mut wrong).is_err());
    }

    #[test]
    fn update_keeps_status_and_bumps_generation() {
        let deploy = api::resources::find("apps", "v1", "deployments").expect("deployments");
        let old = json!({"metadata": {"name": "d", "uid": "u", "generation": 1}, "spec": {"replicas": 1}, "status": {"replicas": 1}});
        let mut new =
            json!({"metadata": {"name": "d"}, "spec": {"replicas": 3}, "status": {"replicas": 99}});
        prepare_update(deploy, &old, &mut new, None);
        assert_eq!(new["status"]["replicas"], 1);
        assert_eq!(new["metadata"]["generation"], 2);
        assert_eq!(new["metadata"]["uid"], "u");
        let mut status =
            json!({"metadata": {"name": "d"}, "spec": {"replicas": 7}, "status": {"replicas": 2}});
        prepare_update(deploy, &old, &mut status, Some("status"));
        assert_eq!(status["spec"]["replicas"], 1);
        assert_eq!(status["status"]["replicas"], 2);
        assert_eq!(status["metadata"]["generation"], 1);
        // A status write without a status clears it; its resourceVersion precondition stays.
        let mut cleared =
            json!({"metadata": {"name": "d", "resourceVersion": "5"}, "spec": {"replicas": 7}});
        prepare_update(deploy, &old, &mut cleared, Some("status"));
        assert!(cleared.get("status").is_none());
        assert_eq!(cleared["metadata"]["resourceVersion"], "5");
        assert_eq!(cleared["spec"]["replicas"], 1);
        assert_eq!(cleared["metadata"]["uid"], "u");
    }

    #[test]
    fn a_status_write_kept_in_place_is_the_rebuilt_one() {
        let pods = api::resources::pods();
        let old = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                         "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {"app": "a"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Pending"}
        });
        let mut written = old.clone();
        written["status"] = json!({"phase": "Running", "podIP": "10.0.0.1"});
        // With the writer's resourceVersion, without one, and with one the store moved past.
        let without_rv = {
            let mut w = written.clone();
            meta::metadata_mut(&mut w).remove("resourceVersion");
            w
        };
        let mut other_rv = written.clone();
        other_rv["metadata"]["resourceVersion"] = json!("5");
        for new in [written, without_rv, other_rv] {
            let mut rebuilt = new.clone();
            prepare_update(pods, &old, &mut rebuilt, Some("status"));
            let mut in_place = new;
            prepare_status_update_in_place(pods, &old, &mut in_place);
            assert_eq!(in_place, rebuilt);
        }
        // A status write that leaves no status.
        let mut cleared = old.clone();
        cleared.as_object_mut().expect("object").remove("status");
        let mut rebuilt = cleared.clone();
        prepare_update(pods, &old, &mut rebuilt, Some("status"));
        prepare_status_update_in_place(pods, &old, &mut cleared);
        assert_eq!(cleared, rebuilt);
    }
}
