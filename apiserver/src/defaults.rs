//! Kubernetes' defaulting that applies to every write (create, update, patch) of a decoded
//! object, as kube-apiserver's conversion and `SetDefaults_*` functions do it:
//!
//! - a Secret's `stringData` is merged into `data` (base64, overwriting) and dropped;
//! - a pod volume that names no source is an `emptyDir`;
//! - an `ObjectFieldSelector` (env `valueFrom.fieldRef`, downward API items) without
//!   `apiVersion` gets `v1`;
//! - an EndpointSlice port without `name` gets `""` and without `protocol` gets `TCP`;
//! - a StatefulSet gets apps/v1's `SetDefaults_StatefulSet`: OrderedReady pods, a RollingUpdate
//!   strategy with partition 0 and maxUnavailable 1, the Retain/Retain claim retention policy,
//!   one replica, ten revisions kept; its claim templates are PersistentVolumeClaims with
//!   `volumeMode: Filesystem` and a Pending phase;
//! - a DaemonSet gets the RollingUpdate strategy (maxUnavailable 1, maxSurge 0) and a
//!   revisionHistoryLimit of 10;
//! - a CronJob gets concurrencyPolicy `Allow`, `suspend: false` and history limits of 3
//!   successful and 1 failed Job;
//! - a PersistentVolume gets reclaim policy `Retain`, `volumeMode: Filesystem` and phase
//!   Pending; a PersistentVolumeClaim `volumeMode: Filesystem` and phase Pending;
//! - a StorageClass gets reclaimPolicy `Delete` and volumeBindingMode `Immediate`;
//! - a CSIDriver gets attachRequired, no pod info on mount, no capacity tracking, the
//!   `ReadWriteOnceWithFSType` fsGroupPolicy and the `Persistent` lifecycle mode.

use api::ResourceInfo;
use base64::Engine;
use serde_json::{json, Map, Value};

/// Applies the defaults for `resource` to a decoded object.
pub fn apply(resource: &ResourceInfo, object: &mut Value) {
    match (resource.group, resource.kind) {
        ("", "Secret") => merge_string_data(object),
        ("autoscaling", "HorizontalPodAutoscaler") if crate::autoscaling::is_v1(resource) => {
            crate::autoscaling::default_v1(object)
        }
        ("autoscaling", "HorizontalPodAutoscaler") => crate::autoscaling::default_v2(object),
        ("", "Pod") => {
            if let Some(spec) = object.get_mut("spec") {
                pod_spec(spec);
            }
        }
        ("" | "apps" | "batch", "ReplicationController" | "Deployment" | "ReplicaSet" | "Job") => {
            if let Some(spec) = object.pointer_mut("/spec/template/spec") {
                pod_spec(spec);
            }
        }
        ("apps", "StatefulSet") => {
            if let Some(spec) = object.pointer_mut("/spec/template/spec") {
                pod_spec(spec);
            }
            if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
                stateful_set_spec(spec);
            }
        }
        ("apps", "DaemonSet") => {
            if let Some(spec) = object.pointer_mut("/spec/template/spec") {
                pod_spec(spec);
            }
            daemon_set(object);
        }
        ("batch", "CronJob") => {
            if let Some(spec) = object.pointer_mut("/spec/jobTemplate/spec/template/spec") {
                pod_spec(spec);
            }
            cron_job(object);
        }
        ("discovery.k8s.io", "EndpointSlice") => endpoint_slice_ports(object),
        ("", "PersistentVolumeClaim") => {
            if let Some(claim) = object.as_object_mut() {
                persistent_volume_claim(claim);
            }
        }
        ("", "PersistentVolume") => {
            if let Some(volume) = object.as_object_mut() {
                persistent_volume(volume);
            }
        }
        ("storage.k8s.io", "StorageClass") => {
            if let Some(class) = object.as_object_mut() {
                storage_class(class);
            }
        }
        ("storage.k8s.io", "CSIDriver") => {
            if let Some(driver) = object.as_object_mut() {
                csi_driver(driver);
            }
        }
        _ => {}
    }
}

/// `SetDefaults_DaemonSet`: a RollingUpdate strategy that replaces one node's pod at a time.
fn daemon_set(object: &mut Value) {
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let strategy = spec.entry("updateStrategy").or_insert_with(|| json!({}));
    if !strategy.is_object() {
        *strategy = json!({});
    }
    if strategy.get("type").is_none_or(Value::is_null) {
        strategy["type"] = json!("RollingUpdate");
    }
    if strategy["type"] == "RollingUpdate" {
        let rolling = &mut strategy["rollingUpdate"];
        if !rolling.is_object() {
            *rolling = json!({});
        }
        if rolling.get("maxUnavailable").is_none_or(Value::is_null) {
            rolling["maxUnavailable"] = json!(1);
        }
        if rolling.get("maxSurge").is_none_or(Value::is_null) {
            rolling["maxSurge"] = json!(0);
        }
    }
    if spec.get("revisionHistoryLimit").is_none_or(Value::is_null) {
        spec.insert("revisionHistoryLimit".into(), json!(10));
    }
}

/// `SetDefaults_CronJob`.
fn cron_job(object: &mut Value) {
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    for (key, value) in [
        ("concurrencyPolicy", json!("Allow")),
        ("suspend", json!(false)),
        ("successfulJobsHistoryLimit", json!(3)),
        ("failedJobsHistoryLimit", json!(1)),
    ] {
        if spec.get(key).is_none_or(Value::is_null) {
            spec.insert(key.into(), value);
        }
    }
}

/// apps/v1 `SetDefaults_StatefulSet` (with the beta MaxUnavailableStatefulSet gate on, as in
/// Kubernetes 1.37) and the claim templates' PersistentVolumeClaim defaults.
fn stateful_set_spec(spec: &mut Map<String, Value>) {
    if unset(spec.get("podManagementPolicy")) {
        spec.insert("podManagementPolicy".into(), json!("OrderedReady"));
    }
    let strategy = spec.entry("updateStrategy").or_insert_with(|| json!({}));
    if let Some(strategy) = strategy.as_object_mut() {
        if unset(strategy.get("type")) {
            strategy.insert("type".into(), json!("RollingUpdate"));
            if strategy.get("rollingUpdate").is_none_or(Value::is_null) {
                strategy.insert("rollingUpdate".into(), json!({}));
            }
        }
        if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
            if let Some(rolling) = strategy
                .get_mut("rollingUpdate")
                .and_then(Value::as_object_mut)
            {
                if rolling.get("partition").is_none_or(Value::is_null) {
                    rolling.insert("partition".into(), json!(0));
                }
                if rolling.get("maxUnavailable").is_none_or(Value::is_null) {
                    rolling.insert("maxUnavailable".into(), json!(1));
                }
            }
        }
    }
    let retention = spec
        .entry("persistentVolumeClaimRetentionPolicy")
        .or_insert_with(|| json!({}));
    if let Some(retention) = retention.as_object_mut() {
        for key in ["whenDeleted", "whenScaled"] {
            if unset(retention.get(key)) {
                retention.insert(key.into(), json!("Retain"));
            }
        }
    }
    if spec.get("replicas").is_none_or(Value::is_null) {
        spec.insert("replicas".into(), json!(1));
    }
    if spec.get("revisionHistoryLimit").is_none_or(Value::is_null) {
        spec.insert("revisionHistoryLimit".into(), json!(10));
    }
    for claim in objects_in(spec, "volumeClaimTemplates") {
        claim.insert("apiVersion".into(), json!("v1"));
        claim.insert("kind".into(), json!("PersistentVolumeClaim"));
        persistent_volume_claim(claim);
    }
}

/// Whether a defaulted field is still to be set: absent, null or empty.
fn unset(value: Option<&Value>) -> bool {
    value.is_none_or(|v| v.is_null() || v == "")
}

/// Sets `key` in `map` to `value` when it is [`unset`].
fn default_field(map: &mut Map<String, Value>, key: &str, value: Value) {
    if unset(map.get(key)) {
        map.insert(key.into(), value);
    }
}

/// `SetDefaults_PersistentVolumeClaim` and its spec's: a Filesystem volume, phase Pending.
fn persistent_volume_claim(claim: &mut Map<String, Value>) {
    if let Some(claim_spec) = claim.get_mut("spec").and_then(Value::as_object_mut) {
        default_field(claim_spec, "volumeMode", json!("Filesystem"));
    }
    let status = claim.entry("status").or_insert_with(|| json!({}));
    if let Some(status) = status.as_object_mut() {
        default_field(status, "phase", json!("Pending"));
    }
}

/// `SetDefaults_PersistentVolume`: reclaim Retain, a Filesystem volume, phase Pending, and a
/// hostPath's empty `type` (Go's zero `HostPathType`).
fn persistent_volume(volume: &mut Map<String, Value>) {
    if let Some(spec) = volume.get_mut("spec").and_then(Value::as_object_mut) {
        default_field(spec, "persistentVolumeReclaimPolicy", json!("Retain"));
        default_field(spec, "volumeMode", json!("Filesystem"));
        if let Some(host_path) = spec.get_mut("hostPath").and_then(Value::as_object_mut) {
            if host_path.get("type").is_none_or(Value::is_null) {
                host_path.insert("type".into(), json!(""));
            }
        }
    }
    let status = volume.entry("status").or_insert_with(|| json!({}));
    if let Some(status) = status.as_object_mut() {
        default_field(status, "phase", json!("Pending"));
    }
}

/// `SetDefaults_StorageClass`: reclaim Delete, bind Immediate.
fn storage_class(class: &mut Map<String, Value>) {
    default_field(class, "reclaimPolicy", json!("Delete"));
    default_field(class, "volumeBindingMode", json!("Immediate"));
}

/// `SetDefaults_CSIDriver` (with SELinuxMountReadWriteOncePod on, as in Kubernetes 1.37).
fn csi_driver(driver: &mut Map<String, Value>) {
    let Some(spec) = driver.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    for (key, value) in [
        ("attachRequired", json!(true)),
        ("podInfoOnMount", json!(false)),
        ("storageCapacity", json!(false)),
        ("fsGroupPolicy", json!("ReadWriteOnceWithFSType")),
        ("requiresRepublish", json!(false)),
        ("seLinuxMount", json!(false)),
    ] {
        if spec.get(key).is_none_or(Value::is_null) {
            spec.insert(key.into(), value);
        }
    }
    let modes = spec.get("volumeLifecycleModes").and_then(Value::as_array);
    if modes.is_none_or(Vec::is_empty) {
        spec.insert("volumeLifecycleModes".into(), json!(["Persistent"]));
    }
}

/// `stringData` is write-only: each entry overwrites `data`'s, base64-encoded.
fn merge_string_data(object: &mut Value) {
    let Some(map) = object.as_object_mut() else {
        return;
    };
    let Some(string_data) = map.remove("stringData") else {
        return;
    };
    let Value::Object(string_data) = string_data else {
        return;
    };
    if string_data.is_empty() {
        return;
    }
    let data = map
        .entry("data")
        .or_insert_with(|| Value::Object(Map::new()));
    if !data.is_object() {
        *data = Value::Object(Map::new());
    }
    if let Value::Object(data) = data {
        for (key, value) in string_data {
            let text = value.as_str().unwrap_or_default();
            let encoded = base64::engine::general_purpose::STANDARD.encode(text);
            data.insert(key, Value::String(encoded));
        }
    }
}

fn pod_spec(spec: &mut Value) {
    let Some(spec) = spec.as_object_mut() else {
        return;
    };
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for container in objects_in(spec, list) {
            for env in objects_in(container, "env") {
                if let Some(field_ref) = env
                    .get_mut("valueFrom")
                    .and_then(|v| v.get_mut("fieldRef"))
                    .and_then(Value::as_object_mut)
                {
                    field_selector(field_ref);
                }
            }
        }
    }
    for volume in objects_in(spec, "volumes") {
        // Only a name: no source was given.
        if volume.keys().all(|k| k == "name") {
            volume.insert("emptyDir".into(), json!({}));
        }
        if let Some(downward) = volume.get_mut("downwardAPI").and_then(Value::as_object_mut) {
            downward_items(downward);
        }
        if let Some(projected) = volume.get_mut("projected").and_then(Value::as_object_mut) {
            for source in objects_in(projected, "sources") {
                if let Some(downward) = source.get_mut("downwardAPI").and_then(Value::as_object_mut)
                {
                    downward_items(downward);
                }
            }
        }
    }
}

fn downward_items(downward: &mut Map<String, Value>) {
    for item in objects_in(downward, "items") {
        if let Some(field_ref) = item.get_mut("fieldRef").and_then(Value::as_object_mut) {
            field_selector(field_ref);
        }
    }
}

fn field_selector(field_ref: &mut Map<String, Value>) {
    let missing = match field_ref.get("apiVersion") {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(_) => false,
    };
    if missing {
        field_ref.insert("apiVersion".into(), json!("v1"));
    }
}

fn endpoint_slice_ports(object: &mut Value) {
    let Some(object) = object.as_object_mut() else {
        return;
    };
    for port in objects_in(object, "ports") {
        if port.get("name").is_none_or(Value::is_null) {
            port.insert("name".into(), json!(""));
        }
        if port.get("protocol").is_none_or(Value::is_null) {
            port.insert("protocol".into(), json!("TCP"));
        }
    }
}

/// The objects in the list at `map[key]` (none if absent or not a list).
fn objects_in<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    map.get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(group: &str, kind: &str) -> &'static ResourceInfo {
        api::resources::RESOURCES
            .iter()
            .find(|r| r.group == group && r.kind == kind)
            .expect("served")
    }

    #[test]
    fn string_data_is_merged_into_data_and_dropped() {
        let mut secret = json!({"data": {"a": "b2xk", "keep": "eA=="},
            "stringData": {"a": "new", "b": "two words"}});
        apply(resource("", "Secret"), &mut secret);
        assert_eq!(
            secret,
            json!({"data": {"a": "bmV3", "keep": "eA==", "b": "dHdvIHdvcmRz"}})
        );
        let mut only_string = json!({"stringData": {"k": "v"}});
        apply(resource("", "Secret"), &mut only_string);
        assert_eq!(only_string, json!({"data": {"k": "dg=="}}));
    }

    #[test]
    fn pod_specs_get_their_defaults_in_pods_and_templates() {
        let spec = json!({
            "containers": [{"name": "c", "env": [
                {"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "K", "valueFrom": {"fieldRef": {"apiVersion": "v2", "fieldPath": "x"}}},
                {"name": "V", "value": "x"}]}],
            "volumes": [
                {"name": "scratch"},
                {"name": "cm", "configMap": {"name": "c"}},
                {"name": "info", "downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "metadata.name"}}]}},
                {"name": "all", "projected": {"sources": [{"downwardAPI": {"items": [{"path": "l", "fieldRef": {"fieldPath": "metadata.labels"}}]}}]}}]
        });
        let mut pod = json!({"spec": spec});
        apply(resource("", "Pod"), &mut pod);
        let mut deployment = json!({"spec": {"template": {"spec": spec}}});
        apply(resource("apps", "Deployment"), &mut deployment);
        for spec in [&pod["spec"], &deployment["spec"]["template"]["spec"]] {
            let env = &spec["containers"][0]["env"];
            assert_eq!(env[0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
            assert_eq!(env[1]["valueFrom"]["fieldRef"]["apiVersion"], "v2");
            assert_eq!(env[2], json!({"name": "V", "value": "x"}));
            let volumes = &spec["volumes"];
            assert_eq!(volumes[0], json!({"name": "scratch", "emptyDir": {}}));
            assert_eq!(
                volumes[1],
                json!({"name": "cm", "configMap": {"name": "c"}})
            );
            assert_eq!(
                volumes[2]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"],
                "v1"
            );
            assert_eq!(
                volumes[3]["projected"]["sources"][0]["downwardAPI"]["items"][0]["fieldRef"]
                    ["apiVersion"],
                "v1"
            );
        }
    }

    #[test]
    fn endpoint_slice_ports_get_a_name_and_protocol() {
        let mut slice =
            json!({"ports": [{"port": 80}, {"name": "https", "port": 443, "protocol": "UDP"}]});
        apply(resource("discovery.k8s.io", "EndpointSlice"), &mut slice);
        assert_eq!(
            slice["ports"],
            json!([{"name": "", "port": 80, "protocol": "TCP"},
                {"name": "https", "port": 443, "protocol": "UDP"}])
        );
    }

    #[test]
    fn daemon_sets_and_cron_jobs_get_kubernetes_defaults() {
        let mut ds = json!({"spec": {"updateStrategy": {}}});
        apply(resource("apps", "DaemonSet"), &mut ds);
        assert_eq!(
            ds,
            json!({"spec": {"revisionHistoryLimit": 10, "updateStrategy": {"type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}}})
        );
        let mut on_delete =
            json!({"spec": {"updateStrategy": {"type": "OnDelete"}, "revisionHistoryLimit": 2}});
        apply(resource("apps", "DaemonSet"), &mut on_delete);
        assert_eq!(
            on_delete,
            json!({"spec": {"updateStrategy": {"type": "OnDelete"}, "revisionHistoryLimit": 2}})
        );
    }

    #[test]
    fn stateful_sets_get_apps_v1_defaults() {
        let mut sts = json!({"spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"spec": {"containers": [{"name": "c"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "www"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]
        }});
        apply(resource("apps", "StatefulSet"), &mut sts);
        let spec = &sts["spec"];
        assert_eq!(spec["podManagementPolicy"], "OrderedReady");
        assert_eq!(
            spec["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0, "maxUnavailable": 1}})
        );
        assert_eq!(
            spec["persistentVolumeClaimRetentionPolicy"],
            json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
        );
        assert_eq!(spec["replicas"], 1);
        assert_eq!(spec["revisionHistoryLimit"], 10);
        assert_eq!(
            spec["volumeClaimTemplates"][0],
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "www"},
                   "spec": {"accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem"},
                   "status": {"phase": "Pending"}})
        );

        // An explicit OnDelete strategy gets no rollingUpdate; given values stay.
        let mut on_delete = json!({"spec": {"replicas": 0, "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "OnDelete"},
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete"}}});
        apply(resource("apps", "StatefulSet"), &mut on_delete);
        let spec = &on_delete["spec"];
        assert_eq!(spec["updateStrategy"], json!({"type": "OnDelete"}));
        assert_eq!(spec["replicas"], 0);
        assert_eq!(spec["podManagementPolicy"], "Parallel");
        assert_eq!(
            spec["persistentVolumeClaimRetentionPolicy"],
            json!({"whenDeleted": "Delete", "whenScaled": "Retain"})
        );
    }
}
