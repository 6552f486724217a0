//! Object validation with Kubernetes' field paths and messages.
//!
//! Validation reads the canonical JSON that [`crate::strict::decode`] produced (so field types are
//! already right; a field of the wrong type is simply skipped here) and returns every problem as a
//! [`Cause`], the `status.details.causes[]` entry of a 422 Invalid answer. [`invalid_message`]
//! builds the `The Pod "x" is invalid: …` text from them.
//!
//! Callers apply server-side defaults before [`validate_update`]: the pod spec comparison treats a
//! missing field and its zero value alike, but not a missing field and a defaulted one.
//!
//! This module holds the entry points, metadata checks and the field-error vocabulary; the
//! kinds' own rules live in `pod` (pod specs and their updates), `workloads` (Deployments,
//! ReplicaSets, Jobs), `objects` (Services, ConfigMaps, Secrets, Nodes, Endpoints) and `volumes`
//! (PersistentVolumes, claims and the storage.k8s.io kinds).

mod autoscaling;
mod cron_job;
mod objects;
mod pod;
mod policy;
mod stateful_set;
mod volumes;
mod workloads;

use serde_json::{Map, Value};

use api::names::{
    is_dns1035_label, is_dns1123_label, is_dns1123_subdomain, is_path_segment_name,
    is_qualified_name, is_valid_label_value,
};
use api::resources::ResourceInfo;

use objects::{
    validate_data, validate_endpoints, validate_node, validate_secret, validate_service,
};
use pod::{validate_pod_spec, validate_pod_spec_update};
use workloads::{
    validate_job, validate_pod_template, validate_replicated, validate_replication_controller,
};

/// One field error, as Kubernetes reports it in `status.details.causes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// `FieldValueRequired`, `FieldValueInvalid`, `FieldValueDuplicate`, `FieldValueNotSupported`,
    /// `FieldValueForbidden`, `FieldValueTooLong` or `FieldValueNotFound`.
    pub reason: String,
    /// The error body without the field, e.g. `Required value` or
    /// `Invalid value: "Foo_Bar": a lowercase RFC 1123 subdomain must …`.
    pub message: String,
    /// The field path, e.g. `spec.containers[0].image`.
    pub field: String,
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

/// A rejected value, rendered the way Go's field errors print it.
enum Bad {
    Str(String),
    Int(i64),
    /// Already formatted (Go's `%#v` of a map or slice).
    Raw(String),
}

impl From<&str> for Bad {
    fn from(s: &str) -> Bad {
        Bad::Str(s.to_string())
    }
}

impl From<&String> for Bad {
    fn from(s: &String) -> Bad {
        Bad::Str(s.clone())
    }
}

impl From<i64> for Bad {
    fn from(n: i64) -> Bad {
        Bad::Int(n)
    }
}

impl Bad {
    fn render(&self) -> String {
        match self {
            // JSON string quoting matches Go's %q for everything a manifest realistically holds.
            Bad::Str(s) => Value::String(s.clone()).to_string(),
            Bad::Int(n) => n.to_string(),
            Bad::Raw(s) => s.clone(),
        }
    }
}

fn with_detail(body: String, detail: &str) -> String {
    if detail.is_empty() {
        body
    } else {
        format!("{body}: {detail}")
    }
}

impl Cause {
    fn new(reason: &str, field: &str, message: String) -> Cause {
        Cause {
            reason: reason.to_string(),
            message,
            field: field.to_string(),
        }
    }

    fn required(field: &str, detail: &str) -> Cause {
        Cause::new(
            "FieldValueRequired",
            field,
            with_detail("Required value".into(), detail),
        )
    }

    fn invalid(field: &str, value: impl Into<Bad>, detail: &str) -> Cause {
        Cause::new(
            "FieldValueInvalid",
            field,
            with_detail(format!("Invalid value: {}", value.into().render()), detail),
        )
    }

    fn duplicate(field: &str, value: impl Into<Bad>) -> Cause {
        Cause::new(
            "FieldValueDuplicate",
            field,
            format!("Duplicate value: {}", value.into().render()),
        )
    }

    fn not_found(field: &str, value: impl Into<Bad>) -> Cause {
        Cause::new(
            "FieldValueNotFound",
            field,
            format!("Not found: {}", value.into().render()),
        )
    }

    fn not_supported(field: &str, value: &str, supported: &[&str]) -> Cause {
        let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
        let message = format!(
            "Unsupported value: {value:?}: supported values: {}",
            list.join(", ")
        );
        Cause::new("FieldValueNotSupported", field, message)
    }

    fn forbidden(field: &str, detail: &str) -> Cause {
        Cause::new(
            "FieldValueForbidden",
            field,
            with_detail("Forbidden".into(), detail),
        )
    }

    fn too_long(field: &str, max_bytes: usize) -> Cause {
        Cause::new(
            "FieldValueTooLong",
            field,
            format!("Too long: may not be more than {max_bytes} bytes"),
        )
    }
}

/// The 422 message Kubernetes builds from the causes: `Pod "web" is invalid: <cause>` or, for
/// several, `Deployment.apps "web" is invalid: [<cause>, <cause>]`.
pub fn invalid_message(resource: &ResourceInfo, name: &str, causes: &[Cause]) -> String {
    let kind = if resource.group.is_empty() {
        resource.kind.to_string()
    } else {
        format!("{}.{}", resource.kind, resource.group)
    };
    let errors: Vec<String> = causes.iter().map(Cause::to_string).collect();
    let joined = if errors.len() == 1 {
        errors.join("")
    } else {
        format!("[{}]", errors.join(", "))
    };
    format!("{kind} {name:?} is invalid: {joined}")
}

// ---------------------------------------------------------------------------------------------
// Limits and messages.

/// Total size of an object's annotations (keys plus values).
const ANNOTATIONS_MAX_BYTES: usize = 256 * 1024;
/// Size limit of a ConfigMap's or Secret's data.
const DATA_MAX_BYTES: usize = 1024 * 1024;
const PORT_RANGE_MSG: &str = "must be between 1 and 65535, inclusive";
const NON_NEGATIVE_MSG: &str = "must be greater than or equal to 0";
const IMMUTABLE_MSG: &str = "field is immutable";
const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];
const TAINT_EFFECTS: &[&str] = &["NoExecute", "NoSchedule", "PreferNoSchedule"];

// ---------------------------------------------------------------------------------------------
// JSON access.

fn field_of<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.as_object().and_then(|m| m.get(key))
}

fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    field_of(v, key).and_then(Value::as_str)
}

fn int_of(v: &Value, key: &str) -> Option<i64> {
    field_of(v, key).and_then(Value::as_i64)
}

fn list_of<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    field_of(v, key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

fn map_of<'a>(v: &'a Value, key: &str) -> Option<&'a Map<String, Value>> {
    field_of(v, key).and_then(Value::as_object)
}

fn join(path: &str, child: &str) -> String {
    if path.is_empty() {
        child.to_string()
    } else {
        format!("{path}.{child}")
    }
}

/// Go's `%#v` of a `map[string]string`.
fn go_string_map(map: Option<&Map<String, Value>>) -> String {
    let entries: Vec<String> = map
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k:?}:{:?}", v.as_str().unwrap_or_default()))
        .collect();
    if map.is_none() {
        "map[string]string(nil)".to_string()
    } else {
        format!("map[string]string{{{}}}", entries.join(", "))
    }
}

/// Semantic equality as apimachinery's `Semantic.DeepEqual` sees Go structs: a missing field,
/// `null` and the type's zero value (`""`, `0`, `false`, `[]`, `{}`) are all the same.
fn semantic_eq(a: Option<&Value>, b: Option<&Value>) -> bool {
    fn is_zero(v: Option<&Value>) -> bool {
        match v {
            None | Some(Value::Null) => true,
            Some(Value::Bool(b)) => !b,
            Some(Value::Number(n)) => n.as_f64() == Some(0.0),
            Some(Value::String(s)) => s.is_empty(),
            Some(Value::Array(a)) => a.is_empty(),
            Some(Value::Object(o)) => o.values().all(|v| is_zero(Some(v))),
        }
    }
    match (a, b) {
        (Some(Value::Object(x)), Some(Value::Object(y))) => x
            .keys()
            .chain(y.keys())
            .all(|k| semantic_eq(x.get(k), y.get(k))),
        (Some(Value::Array(x)), Some(Value::Array(y))) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| semantic_eq(Some(p), Some(q)))
        }
        (Some(Value::Number(x)), Some(Value::Number(y))) => x.as_f64() == y.as_f64(),
        (x, y) if is_zero(x) && is_zero(y) => true,
        (x, y) => x == y,
    }
}

// ---------------------------------------------------------------------------------------------
// Entry points.

/// How a kind's names are checked.
fn name_checker(resource: &ResourceInfo) -> fn(&str) -> Vec<String> {
    match (resource.group, resource.kind) {
        ("", "Namespace") => is_dns1123_label,
        ("", "Service") => is_dns1035_label,
        // RBAC names are path segments (`system:kube-scheduler`), as Kubernetes' ValidateRBACName.
        ("rbac.authorization.k8s.io", _) => is_path_segment_name,
        // A StatefulSet's name is its pods' hostname prefix.
        ("apps", "StatefulSet") => is_dns1123_label,
        _ => is_dns1123_subdomain,
    }
}

/// Validates an object about to be created.
pub fn validate_create(resource: &ResourceInfo, object: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    validate_object_meta(resource, object, &mut out);
    validate_kind(resource, object, &mut out);
    out
}

/// Validates an update of `old` to `new`: everything [`validate_create`] checks on `new`, plus the
/// immutability rules of the kind.
pub fn validate_update(resource: &ResourceInfo, old: &Value, new: &Value) -> Vec<Cause> {
    let mut out = validate_create(resource, new);
    validate_meta_update(old, new, &mut out);
    let (old_spec, new_spec) = (field_of(old, "spec"), field_of(new, "spec"));
    match (resource.group, resource.kind) {
        ("", "Pod") => validate_pod_spec_update(old_spec, new_spec, &mut out),
        ("apps", "StatefulSet") => stateful_set::validate_update(old_spec, new_spec, &mut out),
        ("apps", "ControllerRevision") => {
            stateful_set::validate_revision_update(old, new, &mut out)
        }
        ("", "PersistentVolumeClaim") => volumes::validate_claim_update(old, new, &mut out),
        ("", "PersistentVolume") => volumes::validate_volume_update(old, new, &mut out),
        ("storage.k8s.io", "StorageClass") => {
            volumes::validate_storage_class_update(old, new, &mut out)
        }
        ("storage.k8s.io", "CSIDriver") => volumes::validate_csi_driver_update(old, new, &mut out),
        ("storage.k8s.io", "VolumeAttachment") => {
            volumes::validate_volume_attachment_update(old, new, &mut out)
        }
        ("apps", "Deployment" | "ReplicaSet" | "DaemonSet") | ("batch", "Job") => {
            let (a, b) = (
                old_spec.and_then(|s| field_of(s, "selector")),
                new_spec.and_then(|s| field_of(s, "selector")),
            );
            if old_spec.is_some() && !semantic_eq(a, b) {
                out.push(Cause::invalid(
                    "spec.selector",
                    selector_repr(b),
                    IMMUTABLE_MSG,
                ));
            }
        }
        ("", "Service") => {
            let (a, b) = (
                old_spec.and_then(|s| str_of(s, "clusterIP")),
                new_spec.and_then(|s| str_of(s, "clusterIP")),
            );
            if let (Some(a), Some(b)) = (a, b) {
                if !a.is_empty() && !b.is_empty() && a != b {
                    out.push(Cause::invalid("spec.clusterIP", b, IMMUTABLE_MSG));
                }
            }
        }
        ("", "ConfigMap" | "Secret")
            if field_of(old, "immutable").and_then(Value::as_bool) == Some(true) =>
        {
            let detail = "field is immutable when `immutable` is set";
            if field_of(new, "immutable").and_then(Value::as_bool) != Some(true) {
                out.push(Cause::forbidden("immutable", detail));
            }
            for key in ["data", "binaryData"] {
                if !semantic_eq(field_of(old, key), field_of(new, key)) {
                    out.push(Cause::forbidden(key, detail));
                }
            }
        }
        _ => {}
    }
    out
}

/// Validates a write to the `status` subresource: only the identity fields are checked, since the
/// spec is copied from the stored object.
pub fn validate_status_update(resource: &ResourceInfo, old: &Value, new: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    validate_object_meta(resource, new, &mut out);
    validate_meta_update(old, new, &mut out);
    if resource.group == "autoscaling" && resource.kind == "HorizontalPodAutoscaler" {
        autoscaling::validate_hpa_status(new, &mut out);
    }
    out
}

fn selector_repr(selector: Option<&Value>) -> Bad {
    Bad::Raw(selector.map_or_else(|| "null".to_string(), Value::to_string))
}

// ---------------------------------------------------------------------------------------------
// Metadata.

fn validate_object_meta(resource: &ResourceInfo, object: &Value, out: &mut Vec<Cause>) {
    let meta = field_of(object, "metadata").unwrap_or(&Value::Null);
    match str_of(meta, "name") {
        None | Some("") => out.push(Cause::required(
            "metadata.name",
            "name or generateName is required",
        )),
        Some(name) => {
            for msg in name_checker(resource)(name) {
                out.push(Cause::invalid("metadata.name", name, &msg));
            }
        }
    }
    match str_of(meta, "namespace") {
        Some(ns) if !ns.is_empty() && resource.namespaced => {
            for msg in is_dns1123_label(ns) {
                out.push(Cause::invalid("metadata.namespace", ns, &msg));
            }
        }
        Some(ns) if !ns.is_empty() => out.push(Cause::forbidden(
            "metadata.namespace",
            "not allowed on this type",
        )),
        _ => {}
    }
    validate_labels(map_of(meta, "labels"), "metadata.labels", out);
    if let Some(annotations) = map_of(meta, "annotations") {
        let mut total = 0;
        for (key, value) in annotations {
            for msg in is_qualified_name(&key.to_lowercase()) {
                out.push(Cause::invalid("metadata.annotations", key, &msg));
            }
            total += key.len() + value.as_str().map_or(0, str::len);
        }
        if total > ANNOTATIONS_MAX_BYTES {
            out.push(Cause::too_long(
                "metadata.annotations",
                ANNOTATIONS_MAX_BYTES,
            ));
        }
    }
}

/// Label keys and values (also node selectors and service selectors).
fn validate_labels(labels: Option<&Map<String, Value>>, field: &str, out: &mut Vec<Cause>) {
    for (key, value) in labels.into_iter().flatten() {
        for msg in is_qualified_name(key) {
            out.push(Cause::invalid(field, key, &msg));
        }
        let value = value.as_str().unwrap_or_default();
        for msg in is_valid_label_value(value) {
            out.push(Cause::invalid(field, value, &msg));
        }
    }
}

fn validate_meta_update(old: &Value, new: &Value, out: &mut Vec<Cause>) {
    let empty = Value::Null;
    let (old_meta, new_meta) = (
        field_of(old, "metadata").unwrap_or(&empty),
        field_of(new, "metadata").unwrap_or(&empty),
    );
    for key in ["name", "namespace", "uid"] {
        let (a, b) = (
            str_of(old_meta, key).unwrap_or_default(),
            str_of(new_meta, key).unwrap_or_default(),
        );
        // A missing uid in the new object means "unchanged"; the server fills it in.
        if a != b && !(key == "uid" && b.is_empty()) {
            out.push(Cause::invalid(&format!("metadata.{key}"), b, IMMUTABLE_MSG));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Kinds.

fn validate_kind(resource: &ResourceInfo, object: &Value, out: &mut Vec<Cause>) {
    let spec = field_of(object, "spec");
    match (resource.group, resource.kind) {
        ("", "Pod") => validate_pod_spec(spec.unwrap_or(&Value::Null), "spec", out),
        ("apps", "Deployment" | "ReplicaSet" | "DaemonSet") => {
            validate_replicated(resource.kind, spec.unwrap_or(&Value::Null), out)
        }
        ("batch", "Job") => validate_job(spec.unwrap_or(&Value::Null), out),
        ("batch", "CronJob") => {
            cron_job::validate_cron_job_name(object, out);
            cron_job::validate_cron_job(spec.unwrap_or(&Value::Null), None, out)
        }
        ("", "ReplicationController") => {
            validate_replication_controller(spec.unwrap_or(&Value::Null), out)
        }
        ("apps", "StatefulSet") => stateful_set::validate_spec(spec.unwrap_or(&Value::Null), out),
        ("apps", "ControllerRevision") => stateful_set::validate_revision(object, out),
        ("", "PodTemplate") => validate_pod_template(object, out),
        ("", "PersistentVolumeClaim") => volumes::validate_claim(object, out),
        ("", "PersistentVolume") => volumes::validate_volume(object, out),
        ("storage.k8s.io", "StorageClass") => volumes::validate_storage_class(object, out),
        ("storage.k8s.io", "CSIDriver") => volumes::validate_csi_driver(object, out),
        ("storage.k8s.io", "CSINode") => volumes::validate_csi_node(object, out),
        ("storage.k8s.io", "VolumeAttachment") => volumes::validate_volume_attachment(object, out),
        ("storage.k8s.io", "CSIStorageCapacity") => volumes::validate_capacity(object, out),
        ("policy", "PodDisruptionBudget") => {
            policy::validate_pdb(spec.unwrap_or(&Value::Null), out)
        }
        ("autoscaling", "HorizontalPodAutoscaler") => autoscaling::validate_hpa(object, out),
        ("", "Service") => validate_service(spec.unwrap_or(&Value::Null), out),
        ("", "ConfigMap") => validate_data(object, false, out),
        ("", "Secret") => validate_secret(object, out),
        ("", "Node") => validate_node(spec, out),
        ("", "Endpoints") => validate_endpoints(object, out),
        ("coordination.k8s.io", "Lease") => {
            let spec = spec.unwrap_or(&Value::Null);
            if let Some(d) = int_of(spec, "leaseDurationSeconds") {
                if d <= 0 {
                    out.push(Cause::invalid(
                        "spec.leaseDurationSeconds",
                        d,
                        "must be greater than 0",
                    ));
                }
            }
            if let Some(t) = int_of(spec, "leaseTransitions") {
                if t < 0 {
                    out.push(Cause::invalid("spec.leaseTransitions", t, NON_NEGATIVE_MSG));
                }
            }
        }
        _ => {}
    }
}

fn non_negative(spec: &Value, key: &str, path: &str, out: &mut Vec<Cause>) {
    if let Some(n) = int_of(spec, key) {
        if n < 0 {
            out.push(Cause::invalid(&join(path, key), n, NON_NEGATIVE_MSG));
        }
    }
}

#[cfg(test)]
mod tests;
