//! Object validation with Kubernetes' field paths and messages.
//!
//! Validation reads the canonical JSON that [`crate::strict::decode`] produced (so field types are
//! already right; a field of the wrong type is simply skipped here) and returns every problem as a
//! [`Cause`], the `status.details.causes[]` entry of a 422 Invalid answer. [`invalid_message`]
//! builds the `The Pod "x" is invalid: …` text from them.
//!
//! Callers apply server-side defaults before [`validate_update`]: the pod spec comparison treats a
//! missing field and its zero value alike, but not a missing field and a defaulted one.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use serde_json::{Map, Value};

use api::names::{
    is_config_map_key, is_dns1035_label, is_dns1123_label, is_dns1123_subdomain,
    is_path_segment_name, is_qualified_name, is_valid_label_value, is_valid_port_name,
};
use api::quantity::Quantity;
use api::resources::ResourceInfo;
use api::selectors::LabelSelector;

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
        ("apps", "Deployment" | "ReplicaSet") | ("batch", "Job") => {
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
        ("apps", "Deployment" | "ReplicaSet") => {
            validate_replicated(resource.kind, spec.unwrap_or(&Value::Null), out)
        }
        ("batch", "Job") => validate_job(spec.unwrap_or(&Value::Null), out),
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

/// Deployments and ReplicaSets: replicas, selector, and a template the selector matches.
fn validate_replicated(kind: &str, spec: &Value, out: &mut Vec<Cause>) {
    for key in ["replicas", "minReadySeconds", "revisionHistoryLimit"] {
        non_negative(spec, key, "spec", out);
    }
    match field_of(spec, "selector") {
        // The canonical form writes a missing selector as `{}`, so `{}` counts as missing too.
        // Like Kubernetes, a missing selector selects nothing, so the template check fails as well.
        Some(selector) if !is_unset_selector(selector) => validate_template_selector(
            selector,
            spec,
            &format!("empty selector is invalid for {}", kind.to_lowercase()),
            out,
        ),
        _ => {
            out.push(Cause::required("spec.selector", ""));
            validate_template_selector(&Value::Null, spec, "", out);
        }
    }
    if kind == "Deployment" {
        if let Some(strategy) = field_of(spec, "strategy").and_then(|s| str_of(s, "type")) {
            if !["Recreate", "RollingUpdate"].contains(&strategy) {
                out.push(Cause::not_supported(
                    "spec.strategy.type",
                    strategy,
                    &["Recreate", "RollingUpdate"],
                ));
            }
        }
    }
    let template = field_of(spec, "template").unwrap_or(&Value::Null);
    validate_template(template, out);
    let template_spec = field_of(template, "spec").unwrap_or(&Value::Null);
    if let Some(policy) = str_of(template_spec, "restartPolicy") {
        if policy != "Always" {
            out.push(Cause::not_supported(
                "spec.template.spec.restartPolicy",
                policy,
                &["Always"],
            ));
        }
    }
}

fn validate_job(spec: &Value, out: &mut Vec<Cause>) {
    for key in [
        "parallelism",
        "completions",
        "backoffLimit",
        "ttlSecondsAfterFinished",
    ] {
        non_negative(spec, key, "spec", out);
    }
    if let Some(d) = int_of(spec, "activeDeadlineSeconds") {
        if d <= 0 {
            out.push(Cause::invalid(
                "spec.activeDeadlineSeconds",
                d,
                "must be greater than 0",
            ));
        }
    }
    // The server generates the selector unless manualSelector is set; check it when present.
    if let Some(selector) = field_of(spec, "selector").filter(|s| !s.is_null()) {
        validate_template_selector(selector, spec, "empty selector is invalid for job", out);
    }
    let template = field_of(spec, "template").unwrap_or(&Value::Null);
    validate_template(template, out);
    let field = "spec.template.spec.restartPolicy";
    match field_of(template, "spec").and_then(|s| str_of(s, "restartPolicy")) {
        None | Some("") => out.push(Cause::required(
            field,
            "valid values: \"OnFailure\", \"Never\"",
        )),
        Some("OnFailure" | "Never") => {}
        Some(other) => out.push(Cause::not_supported(field, other, &["OnFailure", "Never"])),
    }
}

/// A selector that is absent, null, or has neither matchLabels nor matchExpressions.
fn is_unset_selector(selector: &Value) -> bool {
    let has = |key| field_of(selector, key).is_some_and(|v| !semantic_eq(Some(v), None));
    !has("matchLabels") && !has("matchExpressions")
}

/// The selector parses, is not empty, and matches the template's labels.
fn validate_template_selector(
    selector: &Value,
    spec: &Value,
    empty_msg: &str,
    out: &mut Vec<Cause>,
) {
    match LabelSelector::from_label_selector_json(selector) {
        Err(e) => out.push(Cause::invalid(
            "spec.selector",
            selector_repr(Some(selector)),
            &e.to_string(),
        )),
        Ok(parsed) if parsed.is_empty() => out.push(Cause::invalid(
            "spec.selector",
            selector_repr(Some(selector)),
            empty_msg,
        )),
        Ok(parsed) => {
            let labels = field_of(spec, "template")
                .and_then(|t| field_of(t, "metadata"))
                .and_then(|m| map_of(m, "labels"));
            if !parsed.matches(&labels) {
                out.push(Cause::invalid(
                    "spec.template.metadata.labels",
                    Bad::Raw(go_string_map(labels)),
                    "`selector` does not match template `labels`",
                ));
            }
        }
    }
}

/// A pod template: its labels and its pod spec, at `spec.template`.
fn validate_template(template: &Value, out: &mut Vec<Cause>) {
    let meta = field_of(template, "metadata").unwrap_or(&Value::Null);
    validate_labels(map_of(meta, "labels"), "spec.template.metadata.labels", out);
    validate_pod_spec(
        field_of(template, "spec").unwrap_or(&Value::Null),
        "spec.template.spec",
        out,
    );
}

// ---------------------------------------------------------------------------------------------
// Pods.

const RESTART_POLICIES: &[&str] = &["Always", "OnFailure", "Never"];
const DNS_POLICIES: &[&str] = &["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"];
const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];
const PULL_POLICIES: &[&str] = &["Always", "IfNotPresent", "Never"];
const TAINT_EFFECTS: &[&str] = &["NoExecute", "NoSchedule", "PreferNoSchedule"];
const PROBES: &[&str] = &["livenessProbe", "readinessProbe", "startupProbe"];
const PROBE_HANDLERS: &[&str] = &["exec", "httpGet", "tcpSocket", "grpc"];

/// A pod spec at `path` (`spec`, or `spec.template.spec` in workloads).
fn validate_pod_spec(spec: &Value, path: &str, out: &mut Vec<Cause>) {
    let volumes = validate_volumes(list_of(spec, "volumes"), &join(path, "volumes"), out);

    let containers = list_of(spec, "containers");
    if containers.is_empty() {
        out.push(Cause::required(&join(path, "containers"), ""));
    }
    let host_network = field_of(spec, "hostNetwork")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut names = HashSet::new();
    let mut host_ports = HashSet::new();
    for (list, key) in [
        (list_of(spec, "initContainers"), "initContainers"),
        (containers, "containers"),
    ] {
        for (i, container) in list.iter().enumerate() {
            let cpath = format!("{path}.{key}[{i}]");
            validate_container(container, &cpath, &volumes, &mut names, host_network, out);
            validate_host_ports(container, &cpath, &mut host_ports, out);
        }
    }

    if let Some(policy) = str_of(spec, "restartPolicy") {
        if !RESTART_POLICIES.contains(&policy) {
            out.push(Cause::not_supported(
                &join(path, "restartPolicy"),
                policy,
                RESTART_POLICIES,
            ));
        }
    }
    if let Some(policy) = str_of(spec, "dnsPolicy") {
        if !DNS_POLICIES.contains(&policy) {
            out.push(Cause::not_supported(
                &join(path, "dnsPolicy"),
                policy,
                DNS_POLICIES,
            ));
        } else if policy == "None" && field_of(spec, "dnsConfig").is_none_or(Value::is_null) {
            out.push(Cause::required(
                &join(path, "dnsConfig"),
                "must provide `dnsConfig` when `dnsPolicy` is None",
            ));
        }
    }
    non_negative(spec, "terminationGracePeriodSeconds", path, out);
    if let Some(d) = int_of(spec, "activeDeadlineSeconds") {
        if !(1..=i64::from(i32::MAX)).contains(&d) {
            out.push(Cause::invalid(
                &join(path, "activeDeadlineSeconds"),
                d,
                "must be between 1 and 2147483647, inclusive",
            ));
        }
    }
    validate_labels(
        map_of(spec, "nodeSelector"),
        &join(path, "nodeSelector"),
        out,
    );
    for (key, checker) in [
        ("nodeName", is_dns1123_subdomain as fn(&str) -> Vec<String>),
        ("serviceAccountName", is_dns1123_subdomain),
        ("hostname", is_dns1123_label),
        ("subdomain", is_dns1123_label),
    ] {
        if let Some(value) = str_of(spec, key).filter(|v| !v.is_empty()) {
            for msg in checker(value) {
                out.push(Cause::invalid(&join(path, key), value, &msg));
            }
        }
    }
    for (i, toleration) in list_of(spec, "tolerations").iter().enumerate() {
        validate_toleration(toleration, &format!("{path}.tolerations[{i}]"), out);
    }
}

/// Volume names: required, DNS labels, unique; each volume has exactly one source. Returns the
/// names for the mounts to refer to.
fn validate_volumes(volumes: &[Value], path: &str, out: &mut Vec<Cause>) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (i, volume) in volumes.iter().enumerate() {
        let vpath = format!("{path}[{i}]");
        match str_of(volume, "name").unwrap_or_default() {
            "" => out.push(Cause::required(&format!("{vpath}.name"), "")),
            name => {
                for msg in is_dns1123_label(name) {
                    out.push(Cause::invalid(&format!("{vpath}.name"), name, &msg));
                }
                if !names.insert(name.to_string()) {
                    out.push(Cause::duplicate(&format!("{vpath}.name"), name));
                }
            }
        }
        let sources: Vec<&String> = volume
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, v)| k.as_str() != "name" && !v.is_null())
            .map(|(k, _)| k)
            .collect();
        match sources.as_slice() {
            [] => out.push(Cause::required(&vpath, "must specify a volume type")),
            [_] => {}
            [_, extra, ..] => out.push(Cause::forbidden(
                &format!("{vpath}.{extra}"),
                "may not specify more than 1 volume type",
            )),
        }
    }
    names
}

fn validate_container(
    container: &Value,
    cpath: &str,
    volumes: &BTreeSet<String>,
    names: &mut HashSet<String>,
    host_network: bool,
    out: &mut Vec<Cause>,
) {
    let name_path = format!("{cpath}.name");
    match str_of(container, "name").unwrap_or_default() {
        "" => out.push(Cause::required(&name_path, "")),
        name => {
            let errs = is_dns1123_label(name);
            for msg in &errs {
                out.push(Cause::invalid(&name_path, name, msg));
            }
            if errs.is_empty() && !names.insert(name.to_string()) {
                out.push(Cause::duplicate(&name_path, name));
            }
        }
    }
    let image_path = format!("{cpath}.image");
    match str_of(container, "image").unwrap_or_default() {
        "" => out.push(Cause::required(&image_path, "")),
        image if image.trim() != image => {
            out.push(Cause::invalid(
                &image_path,
                image,
                "must not have leading or trailing whitespace",
            ));
        }
        _ => {}
    }
    if let Some(policy) = str_of(container, "imagePullPolicy") {
        if !PULL_POLICIES.contains(&policy) {
            out.push(Cause::not_supported(
                &format!("{cpath}.imagePullPolicy"),
                policy,
                PULL_POLICIES,
            ));
        }
    }
    validate_container_ports(container, cpath, host_network, out);
    for (i, env) in list_of(container, "env").iter().enumerate() {
        if str_of(env, "name").unwrap_or_default().is_empty() {
            out.push(Cause::required(&format!("{cpath}.env[{i}].name"), ""));
        }
    }
    if let Some(resources) = field_of(container, "resources") {
        validate_resources(resources, &format!("{cpath}.resources"), out);
    }
    let mut mount_paths = HashSet::new();
    for (i, mount) in list_of(container, "volumeMounts").iter().enumerate() {
        let mpath = format!("{cpath}.volumeMounts[{i}]");
        match str_of(mount, "name").unwrap_or_default() {
            "" => out.push(Cause::required(&format!("{mpath}.name"), "")),
            name if !volumes.contains(name) => {
                out.push(Cause::not_found(&format!("{mpath}.name"), name))
            }
            _ => {}
        }
        match str_of(mount, "mountPath").unwrap_or_default() {
            "" => out.push(Cause::required(&format!("{mpath}.mountPath"), "")),
            path if !mount_paths.insert(path.to_string()) => {
                out.push(Cause::invalid(
                    &format!("{mpath}.mountPath"),
                    path,
                    "must be unique",
                ));
            }
            _ => {}
        }
    }
    for probe_key in PROBES {
        let Some(probe) = field_of(container, probe_key).filter(|p| !p.is_null()) else {
            continue;
        };
        let ppath = format!("{cpath}.{probe_key}");
        let handlers: Vec<&&str> = PROBE_HANDLERS
            .iter()
            .filter(|h| field_of(probe, h).is_some_and(|v| !v.is_null()))
            .collect();
        match handlers.as_slice() {
            [] => out.push(Cause::required(&ppath, "must specify a handler type")),
            [_] => {}
            [_, extra, ..] => out.push(Cause::forbidden(
                &format!("{ppath}.{extra}"),
                "may not specify more than 1 handler type",
            )),
        }
        for key in [
            "initialDelaySeconds",
            "timeoutSeconds",
            "periodSeconds",
            "successThreshold",
            "failureThreshold",
        ] {
            non_negative(probe, key, &ppath, out);
        }
    }
}

fn validate_container_ports(
    container: &Value,
    cpath: &str,
    host_network: bool,
    out: &mut Vec<Cause>,
) {
    let mut port_names = HashSet::new();
    let mut seen = HashSet::new();
    for (i, port) in list_of(container, "ports").iter().enumerate() {
        let ppath = format!("{cpath}.ports[{i}]");
        if let Some(name) = str_of(port, "name").filter(|n| !n.is_empty()) {
            for msg in is_valid_port_name(name) {
                out.push(Cause::invalid(&format!("{ppath}.name"), name, &msg));
            }
            if !port_names.insert(name.to_string()) {
                out.push(Cause::duplicate(&format!("{ppath}.name"), name));
            }
        }
        let container_port = int_of(port, "containerPort").unwrap_or(0);
        if container_port == 0 {
            out.push(Cause::required(&format!("{ppath}.containerPort"), ""));
        } else if !(1..=65535).contains(&container_port) {
            out.push(Cause::invalid(
                &format!("{ppath}.containerPort"),
                container_port,
                PORT_RANGE_MSG,
            ));
        }
        let host_port = int_of(port, "hostPort").unwrap_or(0);
        if host_port != 0 && !(1..=65535).contains(&host_port) {
            out.push(Cause::invalid(
                &format!("{ppath}.hostPort"),
                host_port,
                PORT_RANGE_MSG,
            ));
        }
        if host_network && host_port != 0 && host_port != container_port {
            out.push(Cause::invalid(
                &format!("{ppath}.hostPort"),
                host_port,
                "must match `containerPort` when `hostNetwork` is true",
            ));
        }
        let protocol = str_of(port, "protocol").unwrap_or("TCP");
        if !PROTOCOLS.contains(&protocol) {
            out.push(Cause::not_supported(
                &format!("{ppath}.protocol"),
                protocol,
                PROTOCOLS,
            ));
        }
        if container_port != 0 && !seen.insert((container_port, protocol.to_string())) {
            out.push(Cause::duplicate(
                &format!("{ppath}.containerPort"),
                format!("{container_port}/{protocol}").as_str(),
            ));
        }
    }
}

/// Host ports are unique per (hostIP, protocol, port) across the pod.
fn validate_host_ports(
    container: &Value,
    cpath: &str,
    seen: &mut HashSet<String>,
    out: &mut Vec<Cause>,
) {
    for (i, port) in list_of(container, "ports").iter().enumerate() {
        let host_port = int_of(port, "hostPort").unwrap_or(0);
        if host_port == 0 {
            continue;
        }
        let key = format!(
            "{}/{}/{host_port}",
            str_of(port, "hostIP").unwrap_or_default(),
            str_of(port, "protocol").unwrap_or("TCP")
        );
        if !seen.insert(key.clone()) {
            out.push(Cause::duplicate(
                &format!("{cpath}.ports[{i}].hostPort"),
                key.as_str(),
            ));
        }
    }
}

/// Quantities parse and are non-negative; each request is at most its limit.
fn validate_resources(resources: &Value, path: &str, out: &mut Vec<Cause>) {
    let mut parsed: [BTreeMap<&str, Quantity>; 2] = Default::default();
    for (slot, key) in ["limits", "requests"].iter().enumerate() {
        for (name, raw) in map_of(resources, key).into_iter().flatten() {
            let field = format!("{path}.{key}[{name}]");
            let text = raw.as_str().map_or_else(|| raw.to_string(), str::to_string);
            match Quantity::from_value(raw) {
                Err(e) => out.push(Cause::invalid(&field, &text, &e.detail())),
                Ok(q) if q.is_negative() => {
                    out.push(Cause::invalid(&field, &text, NON_NEGATIVE_MSG))
                }
                Ok(q) => {
                    parsed[slot].insert(name.as_str(), q);
                }
            }
        }
    }
    let [limits, requests] = &parsed;
    for (name, request) in requests {
        if let Some(limit) = limits.get(name) {
            if request > limit {
                out.push(Cause::invalid(
                    &format!("{path}.requests[{name}]"),
                    request.as_str(),
                    &format!("must be less than or equal to {name} limit of {limit}"),
                ));
            }
        }
    }
}

fn validate_toleration(toleration: &Value, path: &str, out: &mut Vec<Cause>) {
    let key = str_of(toleration, "key").unwrap_or_default();
    if !key.is_empty() {
        for msg in is_qualified_name(key) {
            out.push(Cause::invalid(&format!("{path}.key"), key, &msg));
        }
    }
    let operator = str_of(toleration, "operator").unwrap_or_default();
    match operator {
        "" | "Equal" if key.is_empty() => out.push(Cause::invalid(
            &format!("{path}.operator"),
            operator,
            "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
        )),
        "" | "Equal" => {}
        "Exists" => {
            if let Some(value) = str_of(toleration, "value").filter(|v| !v.is_empty()) {
                out.push(Cause::invalid(&format!("{path}.value"), value, "value must be empty when `operator` is 'Exists'"));
            }
        }
        other => out.push(Cause::not_supported(&format!("{path}.operator"), other, &["Equal", "Exists"])),
    }
    let effect = str_of(toleration, "effect").unwrap_or_default();
    if !effect.is_empty() && !TAINT_EFFECTS.contains(&effect) {
        out.push(Cause::not_supported(
            &format!("{path}.effect"),
            effect,
            TAINT_EFFECTS,
        ));
    }
    if field_of(toleration, "tolerationSeconds").is_some_and(|v| !v.is_null())
        && effect != "NoExecute"
    {
        out.push(Cause::invalid(
            &format!("{path}.effect"),
            effect,
            "effect must be 'NoExecute' when `tolerationSeconds` is set",
        ));
    }
}

const POD_UPDATE_FORBIDDEN: &str = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// Pod specs are immutable but for images, a shrinking activeDeadlineSeconds, added
/// tolerations, and a negative grace period being fixed to 1. As Kubernetes does, the new spec
/// gets the old values of the mutable fields and must then equal the old spec.
fn validate_pod_spec_update(old: Option<&Value>, new: Option<&Value>, out: &mut Vec<Cause>) {
    let (Some(old), Some(new)) = (old, new) else {
        return;
    };
    let mut munged = new.clone();

    for key in ["containers", "initContainers"] {
        let old_list = list_of(old, key);
        if let Some(list) = munged.get_mut(key).and_then(Value::as_array_mut) {
            for (c, o) in list.iter_mut().zip(old_list) {
                if let (Some(c), Some(image)) = (c.as_object_mut(), field_of(o, "image")) {
                    c.insert("image".into(), image.clone());
                }
            }
        }
    }

    let (old_deadline, new_deadline) = (
        int_of(old, "activeDeadlineSeconds"),
        int_of(new, "activeDeadlineSeconds"),
    );
    match (old_deadline, new_deadline) {
        (Some(_), None) => out.push(Cause::invalid(
            "spec.activeDeadlineSeconds",
            Bad::Raw("nil".into()),
            "must not update from a positive integer to nil value",
        )),
        (Some(o), Some(n)) if n > o => {
            out.push(Cause::invalid(
                "spec.activeDeadlineSeconds",
                n,
                "must be less than or equal to previous value",
            ));
        }
        _ => {}
    }
    set_or_remove(
        &mut munged,
        "activeDeadlineSeconds",
        field_of(old, "activeDeadlineSeconds"),
    );

    let new_tolerations = list_of(new, "tolerations");
    for old_toleration in list_of(old, "tolerations") {
        let kept = new_tolerations.iter().any(|t| {
            let strip = |v: &Value| {
                let mut v = v.clone();
                if let Some(m) = v.as_object_mut() {
                    m.remove("tolerationSeconds");
                }
                v
            };
            semantic_eq(Some(&strip(t)), Some(&strip(old_toleration)))
        });
        if !kept {
            out.push(Cause::forbidden(
                "spec.tolerations",
                "existing toleration can not be modified except its tolerationSeconds",
            ));
            break;
        }
    }
    set_or_remove(&mut munged, "tolerations", field_of(old, "tolerations"));

    let old_grace = int_of(old, "terminationGracePeriodSeconds");
    if old_grace.is_some_and(|g| g < 0) && int_of(new, "terminationGracePeriodSeconds") == Some(1) {
        set_or_remove(
            &mut munged,
            "terminationGracePeriodSeconds",
            field_of(old, "terminationGracePeriodSeconds"),
        );
    }

    if !semantic_eq(Some(old), Some(&munged)) {
        out.push(Cause::forbidden("spec", POD_UPDATE_FORBIDDEN));
    }
}

fn set_or_remove(object: &mut Value, key: &str, value: Option<&Value>) {
    if let Some(map) = object.as_object_mut() {
        match value {
            Some(v) => {
                map.insert(key.to_string(), v.clone());
            }
            None => {
                map.remove(key);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Services, config, nodes, endpoints.

const SERVICE_TYPES: &[&str] = &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];

fn validate_service(spec: &Value, out: &mut Vec<Cause>) {
    let service_type = str_of(spec, "type").unwrap_or("ClusterIP");
    if !SERVICE_TYPES.contains(&service_type) {
        out.push(Cause::not_supported(
            "spec.type",
            service_type,
            SERVICE_TYPES,
        ));
    }
    let headless = str_of(spec, "clusterIP") == Some("None");
    let ports = list_of(spec, "ports");
    if service_type == "ExternalName" {
        match str_of(spec, "externalName").unwrap_or_default() {
            "" => out.push(Cause::required("spec.externalName", "")),
            name => {
                for msg in is_dns1123_subdomain(name.trim_end_matches('.')) {
                    out.push(Cause::invalid("spec.externalName", name, &msg));
                }
            }
        }
    } else if ports.is_empty() && !headless {
        out.push(Cause::required("spec.ports", ""));
    }
    let mut names = HashSet::new();
    let mut seen = HashSet::new();
    for (i, port) in ports.iter().enumerate() {
        let ppath = format!("spec.ports[{i}]");
        match str_of(port, "name").unwrap_or_default() {
            "" if ports.len() > 1 => out.push(Cause::required(&format!("{ppath}.name"), "")),
            "" => {}
            name => {
                for msg in is_dns1123_label(name) {
                    out.push(Cause::invalid(&format!("{ppath}.name"), name, &msg));
                }
                if !names.insert(name.to_string()) {
                    out.push(Cause::duplicate(&format!("{ppath}.name"), name));
                }
            }
        }
        let number = int_of(port, "port").unwrap_or(0);
        if !(1..=65535).contains(&number) {
            out.push(Cause::invalid(
                &format!("{ppath}.port"),
                number,
                PORT_RANGE_MSG,
            ));
        }
        let protocol = str_of(port, "protocol").unwrap_or("TCP");
        if !PROTOCOLS.contains(&protocol) {
            out.push(Cause::not_supported(
                &format!("{ppath}.protocol"),
                protocol,
                PROTOCOLS,
            ));
        }
        if !seen.insert((number, protocol.to_string())) {
            out.push(Cause::duplicate(
                &ppath,
                format!("{number}/{protocol}").as_str(),
            ));
        }
        match field_of(port, "targetPort") {
            Some(Value::Number(n)) => {
                let n = n.as_i64().unwrap_or(0);
                if !(1..=65535).contains(&n) {
                    out.push(Cause::invalid(
                        &format!("{ppath}.targetPort"),
                        n,
                        PORT_RANGE_MSG,
                    ));
                }
            }
            Some(Value::String(name)) => {
                for msg in is_valid_port_name(name) {
                    out.push(Cause::invalid(&format!("{ppath}.targetPort"), name, &msg));
                }
            }
            _ => {}
        }
    }
    validate_labels(map_of(spec, "selector"), "spec.selector", out);
}

/// ConfigMap and Secret data: valid keys, no key in both maps, at most 1 MiB in total.
fn validate_data(object: &Value, secret: bool, out: &mut Vec<Cause>) {
    let data = map_of(object, "data");
    let binary = if secret {
        None
    } else {
        map_of(object, "binaryData")
    };
    let mut total = 0;
    for (map, field) in [(data, "data"), (binary, "binaryData")] {
        for (key, value) in map.into_iter().flatten() {
            for msg in is_config_map_key(key) {
                out.push(Cause::invalid(&format!("{field}[{key}]"), key, &msg));
            }
            total += value.as_str().map_or(0, str::len);
        }
    }
    for key in binary.into_iter().flatten().map(|(k, _)| k) {
        if data.is_some_and(|d| d.contains_key(key)) {
            out.push(Cause::invalid(
                &format!("data[{key}]"),
                key,
                "duplicate of key present in binaryData",
            ));
        }
    }
    if total > DATA_MAX_BYTES {
        out.push(Cause::too_long(
            if secret { "data" } else { "" },
            DATA_MAX_BYTES,
        ));
    }
}

fn validate_secret(object: &Value, out: &mut Vec<Cause>) {
    validate_data(object, true, out);
    for key in map_of(object, "stringData")
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
    {
        for msg in is_config_map_key(key) {
            out.push(Cause::invalid(&format!("stringData[{key}]"), key, &msg));
        }
    }
    let has = |key: &str| {
        map_of(object, "data").is_some_and(|d| d.contains_key(key))
            || map_of(object, "stringData").is_some_and(|d| d.contains_key(key))
    };
    let required: &[&str] = match str_of(object, "type").unwrap_or("Opaque") {
        "kubernetes.io/tls" => &["tls.crt", "tls.key"],
        "kubernetes.io/dockerconfigjson" => &[".dockerconfigjson"],
        "kubernetes.io/dockercfg" => &[".dockercfg"],
        _ => &[],
    };
    for key in required {
        if !has(key) {
            out.push(Cause::required(&format!("data[{key}]"), ""));
        }
    }
}

fn validate_node(spec: Option<&Value>, out: &mut Vec<Cause>) {
    let Some(spec) = spec else { return };
    for (i, taint) in list_of(spec, "taints").iter().enumerate() {
        let tpath = format!("spec.taints[{i}]");
        let key = str_of(taint, "key").unwrap_or_default();
        for msg in is_qualified_name(key) {
            out.push(Cause::invalid(&format!("{tpath}.key"), key, &msg));
        }
        match str_of(taint, "effect").unwrap_or_default() {
            "" => out.push(Cause::required(&format!("{tpath}.effect"), "")),
            effect if !TAINT_EFFECTS.contains(&effect) => {
                out.push(Cause::not_supported(
                    &format!("{tpath}.effect"),
                    effect,
                    TAINT_EFFECTS,
                ));
            }
            _ => {}
        }
        if let Some(value) = str_of(taint, "value") {
            for msg in is_valid_label_value(value) {
                out.push(Cause::invalid(&format!("{tpath}.value"), value, &msg));
            }
        }
    }
}

fn validate_endpoints(object: &Value, out: &mut Vec<Cause>) {
    for (i, subset) in list_of(object, "subsets").iter().enumerate() {
        for key in ["addresses", "notReadyAddresses"] {
            for (j, address) in list_of(subset, key).iter().enumerate() {
                if str_of(address, "ip").unwrap_or_default().is_empty() {
                    out.push(Cause::required(&format!("subsets[{i}].{key}[{j}].ip"), ""));
                }
            }
        }
        for (j, port) in list_of(subset, "ports").iter().enumerate() {
            let number = int_of(port, "port").unwrap_or(0);
            if !(1..=65535).contains(&number) {
                out.push(Cause::invalid(
                    &format!("subsets[{i}].ports[{j}].port"),
                    number,
                    PORT_RANGE_MSG,
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::resources::find;
    use serde_json::json;

    fn resource(group: &str, plural: &str) -> &'static ResourceInfo {
        find(group, "v1", plural).expect("resource")
    }

    fn pod(spec: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"}, "spec": spec})
    }

    fn causes(resource: &ResourceInfo, object: &Value) -> Vec<String> {
        validate_create(resource, object)
            .iter()
            .map(Cause::to_string)
            .collect()
    }

    fn pod_causes(spec: Value) -> Vec<String> {
        causes(resource("", "pods"), &pod(spec))
    }

    #[test]
    fn valid_pod_passes() {
        let spec = json!({
            "containers": [{"name": "app", "image": "nginx", "ports": [{"name": "http", "containerPort": 80}],
                            "resources": {"requests": {"cpu": "250m"}, "limits": {"cpu": "500m"}},
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
            "volumes": [{"name": "data", "emptyDir": {}}],
            "restartPolicy": "OnFailure",
            "dnsPolicy": "ClusterFirst",
            "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]
        });
        assert_eq!(pod_causes(spec), Vec::<String>::new());
    }

    #[test]
    fn object_names_namespaces_and_labels() {
        let mut p = pod(json!({"containers": [{"name": "c", "image": "i"}]}));
        p["metadata"]["name"] = json!("Foo_Bar");
        let found = validate_create(resource("", "pods"), &p);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].field, "metadata.name");
        assert_eq!(found[0].reason, "FieldValueInvalid");
        assert!(found[0].message.starts_with(
            "Invalid value: \"Foo_Bar\": a lowercase RFC 1123 subdomain must consist of"
        ));

        p["metadata"] = json!({"namespace": "default"});
        assert_eq!(
            causes(resource("", "pods"), &p),
            vec!["metadata.name: Required value: name or generateName is required"]
        );
        p["metadata"] =
            json!({"name": "x", "namespace": "Bad_NS", "labels": {"app": "-x", "in valid": "a"}});
        let found = causes(resource("", "pods"), &p);
        assert!(
            found
                .iter()
                .any(|c| c.starts_with("metadata.namespace: Invalid value: \"Bad_NS\"")),
            "{found:?}"
        );
        assert!(
            found
                .iter()
                .any(|c| c.starts_with("metadata.labels: Invalid value: \"-x\"")),
            "{found:?}"
        );
        assert!(
            found.iter().any(|c| c.starts_with(
                "metadata.labels: Invalid value: \"in valid\": name part must consist"
            )),
            "{found:?}"
        );

        let ns = json!({"metadata": {"name": "a.b"}});
        assert!(causes(resource("", "namespaces"), &ns)[0]
            .starts_with("metadata.name: Invalid value: \"a.b\": a lowercase RFC 1123 label"));
        let node = json!({"metadata": {"name": "n1", "namespace": "x"}});
        assert_eq!(
            causes(resource("", "nodes"), &node),
            vec!["metadata.namespace: Forbidden: not allowed on this type"]
        );
    }

    #[test]
    fn annotations_size_limit() {
        let mut p = pod(json!({"containers": [{"name": "c", "image": "i"}]}));
        p["metadata"]["annotations"] = json!({"big": "x".repeat(256 * 1024)});
        let found = validate_create(resource("", "pods"), &p);
        assert_eq!(found[0].reason, "FieldValueTooLong");
        assert_eq!(
            found[0].to_string(),
            "metadata.annotations: Too long: may not be more than 262144 bytes"
        );
    }

    #[test]
    fn containers_required_and_image_required() {
        assert_eq!(
            pod_causes(json!({})),
            vec!["spec.containers: Required value"]
        );
        let found = validate_create(
            resource("", "pods"),
            &pod(json!({"containers": [{"name": "app"}]})),
        );
        assert_eq!(
            found,
            vec![Cause {
                reason: "FieldValueRequired".into(),
                message: "Required value".into(),
                field: "spec.containers[0].image".into()
            }]
        );
        assert_eq!(
            pod_causes(json!({"containers": [{"name": "app", "image": " nginx"}]})),
            vec!["spec.containers[0].image: Invalid value: \" nginx\": must not have leading or trailing whitespace"]
        );
    }

    #[test]
    fn duplicate_and_invalid_container_names() {
        let found = pod_causes(json!({
            "initContainers": [{"name": "nginx", "image": "busybox"}],
            "containers": [{"name": "nginx", "image": "nginx"}, {"name": "Bad_Name", "image": "x"}, {"image": "y"}]
        }));
        assert_eq!(
            found[0],
            "spec.containers[0].name: Duplicate value: \"nginx\""
        );
        assert!(found[1].starts_with(
            "spec.containers[1].name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 label"
        ));
        assert_eq!(found[2], "spec.containers[2].name: Required value");
        assert_eq!(found.len(), 3);
    }

    #[test]
    fn port_rules() {
        let found = pod_causes(json!({"containers": [{"name": "c", "image": "i", "ports": [
            {"containerPort": 0},
            {"containerPort": 70000, "hostPort": -1, "protocol": "HTTP", "name": "this-is-way-too-long"},
            {"containerPort": 80, "name": "web"},
            {"containerPort": 80, "name": "web"}
        ]}]}));
        assert!(
            found
                .contains(&"spec.containers[0].ports[0].containerPort: Required value".to_string()),
            "{found:?}"
        );
        assert!(found.contains(&"spec.containers[0].ports[1].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive".to_string()));
        assert!(found.contains(&"spec.containers[0].ports[1].hostPort: Invalid value: -1: must be between 1 and 65535, inclusive".to_string()));
        assert!(found.contains(&"spec.containers[0].ports[1].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\"".to_string()));
        assert!(found.contains(&"spec.containers[0].ports[1].name: Invalid value: \"this-is-way-too-long\": must be no more than 15 characters".to_string()));
        assert!(found
            .contains(&"spec.containers[0].ports[3].name: Duplicate value: \"web\"".to_string()));
        assert!(found.contains(
            &"spec.containers[0].ports[3].containerPort: Duplicate value: \"80/TCP\"".to_string()
        ));
        // The same port over another protocol is fine.
        assert!(
            pod_causes(json!({"containers": [{"name": "c", "image": "i", "ports": [
            {"containerPort": 53, "protocol": "TCP"}, {"containerPort": 53, "protocol": "UDP"}]}]}))
            .is_empty()
        );
    }

    #[test]
    fn resources_requests_within_limits() {
        let found = pod_causes(
            json!({"containers": [{"name": "c", "image": "i", "resources": {
                "requests": {"cpu": "1", "memory": "1Gi"},
                "limits": {"cpu": "500m", "memory": "2Gi", "ephemeral-storage": "lots"}
            }}]}),
        );
        assert_eq!(
            found,
            vec![
                "spec.containers[0].resources.limits[ephemeral-storage]: Invalid value: \"lots\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
                "spec.containers[0].resources.requests[cpu]: Invalid value: \"1\": must be less than or equal to cpu limit of 500m",
            ]
        );
        let negative = pod_causes(
            json!({"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "-1"}}}]}),
        );
        assert_eq!(negative, vec!["spec.containers[0].resources.requests[cpu]: Invalid value: \"-1\": must be greater than or equal to 0"]);
    }

    #[test]
    fn policies_volumes_and_mounts() {
        let found = pod_causes(json!({
            "restartPolicy": "Sometimes",
            "dnsPolicy": "Cluster",
            "terminationGracePeriodSeconds": -5,
            "volumes": [{"name": "cache", "emptyDir": {}}, {"name": "cache", "emptyDir": {}}, {"name": "none"}],
            "containers": [{"name": "c", "image": "i", "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "cache"}]}]
        }));
        let want = [
            "spec.volumes[1].name: Duplicate value: \"cache\"",
            "spec.volumes[2]: Required value: must specify a volume type",
            "spec.containers[0].volumeMounts[0].name: Not found: \"data\"",
            "spec.containers[0].volumeMounts[1].mountPath: Required value",
            "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
            "spec.dnsPolicy: Unsupported value: \"Cluster\": supported values: \"ClusterFirst\", \"ClusterFirstWithHostNet\", \"Default\", \"None\"",
            "spec.terminationGracePeriodSeconds: Invalid value: -5: must be greater than or equal to 0",
        ];
        assert_eq!(found, want);
        let not_found = validate_create(
            resource("", "pods"),
            &pod(
                json!({"containers": [{"name": "c", "image": "i", "volumeMounts": [{"name": "data", "mountPath": "/d"}]}]}),
            ),
        );
        assert_eq!(not_found[0].reason, "FieldValueNotFound");
    }

    #[test]
    fn tolerations() {
        let found = pod_causes(
            json!({"containers": [{"name": "c", "image": "i"}], "tolerations": [
                {"operator": "Equal", "value": "x"},
                {"key": "k", "operator": "Exists", "value": "v"},
                {"key": "k", "operator": "Equal", "effect": "NoSchedule", "tolerationSeconds": 5},
                {"key": "k", "effect": "Sometimes"}
            ]}),
        );
        assert_eq!(found.len(), 4, "{found:?}");
        assert!(
            found[3].starts_with("spec.tolerations[3].effect: Unsupported value: \"Sometimes\"")
        );
    }

    #[test]
    fn pod_update_rules() {
        let pods = resource("", "pods");
        let old = pod(json!({
            "containers": [{"name": "c", "image": "nginx:1", "ports": [{"containerPort": 80}]}],
            "tolerations": [{"key": "a", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10}],
            "activeDeadlineSeconds": 100,
            "hostNetwork": false
        }));
        // Image change, shorter deadline, added toleration, changed tolerationSeconds: allowed.
        let mut new = old.clone();
        new["spec"]["containers"][0]["image"] = json!("nginx:2");
        new["spec"]["activeDeadlineSeconds"] = json!(50);
        new["spec"]["tolerations"] = json!([
            {"key": "a", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5},
            {"key": "b", "operator": "Exists"}
        ]);
        new["metadata"]["labels"] = json!({"x": "y"});
        new["spec"]
            .as_object_mut()
            .expect("spec")
            .remove("hostNetwork");
        assert_eq!(validate_update(pods, &old, &new), vec![]);

        let mut changed = old.clone();
        changed["spec"]["containers"][0]["ports"][0]["containerPort"] = json!(81);
        let found = validate_update(pods, &old, &changed);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].field, "spec");
        assert_eq!(found[0].reason, "FieldValueForbidden");
        assert!(found[0].message.starts_with(
            "Forbidden: pod updates may not change fields other than `spec.containers[*].image`"
        ));

        let mut removed = old.clone();
        removed["spec"]["tolerations"] = json!([]);
        assert_eq!(
            validate_update(pods, &old, &removed).iter().map(Cause::to_string).collect::<Vec<_>>(),
            vec!["spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"]
        );

        let mut longer = old.clone();
        longer["spec"]["activeDeadlineSeconds"] = json!(200);
        assert_eq!(
            validate_update(pods, &old, &longer)[0].field,
            "spec.activeDeadlineSeconds"
        );

        let mut renamed = old.clone();
        renamed["metadata"]["name"] = json!("other");
        renamed["metadata"]["uid"] = json!("u2");
        let mut with_uid = old.clone();
        with_uid["metadata"]["uid"] = json!("u1");
        let found: Vec<String> = validate_update(pods, &with_uid, &renamed)
            .iter()
            .map(Cause::to_string)
            .collect();
        assert_eq!(
            found,
            vec![
                "metadata.name: Invalid value: \"other\": field is immutable",
                "metadata.uid: Invalid value: \"u2\": field is immutable"
            ]
        );

        // Status writes do not look at the spec.
        assert!(validate_status_update(pods, &old, &changed).is_empty());
    }

    fn deployment(selector: Value, labels: Value, replicas: i64) -> Value {
        json!({"metadata": {"name": "web", "namespace": "default"}, "spec": {
            "replicas": replicas, "selector": selector,
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "web", "image": "nginx"}]}}
        }})
    }

    #[test]
    fn deployments_and_replicasets() {
        let deployments = find("apps", "v1", "deployments").expect("deployments");
        let replicasets = find("apps", "v1", "replicasets").expect("replicasets");
        let ok = deployment(
            json!({"matchLabels": {"app": "web"}}),
            json!({"app": "web", "x": "y"}),
            2,
        );
        assert!(causes(deployments, &ok).is_empty());
        assert!(causes(replicasets, &ok).is_empty());

        let bad = deployment(
            json!({"matchLabels": {"app": "web"}}),
            json!({"app": "db"}),
            -1,
        );
        assert_eq!(
            causes(deployments, &bad),
            vec![
                "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
                "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"db\"}: `selector` does not match template `labels`",
            ]
        );
        let mut no_selector = ok.clone();
        no_selector["spec"]
            .as_object_mut()
            .expect("spec")
            .remove("selector");
        assert_eq!(
            causes(deployments, &no_selector),
            vec![
                "spec.selector: Required value",
                "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"web\", \"x\":\"y\"}: `selector` does not match template `labels`",
            ]
        );
        let empty = deployment(json!({}), json!({"app": "web"}), 1);
        assert_eq!(
            causes(deployments, &empty)[0],
            "spec.selector: Required value"
        );

        let mut nested = ok.clone();
        nested["spec"]["template"]["spec"]["containers"][0]["image"] = json!("");
        assert_eq!(
            causes(deployments, &nested),
            vec!["spec.template.spec.containers[0].image: Required value"]
        );

        let moved = deployment(
            json!({"matchLabels": {"app": "web", "x": "y"}}),
            json!({"app": "web", "x": "y"}),
            2,
        );
        let found = validate_update(deployments, &ok, &moved);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].field, "spec.selector");
    }

    #[test]
    fn jobs() {
        let jobs = find("batch", "v1", "jobs").expect("jobs");
        let job = json!({"metadata": {"name": "pi", "namespace": "default"}, "spec": {"template": {"spec": {
            "containers": [{"name": "pi", "image": "perl"}]}}}});
        assert_eq!(
            causes(jobs, &job),
            vec!["spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\""]
        );
        let mut ok = job.clone();
        ok["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
        assert!(causes(jobs, &ok).is_empty());
    }

    #[test]
    fn services_configmaps_secrets_leases() {
        let services = resource("", "services");
        let svc =
            json!({"metadata": {"name": "web", "namespace": "default"}, "spec": {"ports": []}});
        assert_eq!(causes(services, &svc), vec!["spec.ports: Required value"]);
        let svc = json!({"metadata": {"name": "1web", "namespace": "default"}, "spec": {"ports": [
            {"name": "http", "port": 80, "targetPort": 8080}, {"port": 0, "protocol": "TCP"}]}});
        let found = causes(services, &svc);
        assert!(
            found[0].starts_with("metadata.name: Invalid value: \"1web\": a DNS-1035 label"),
            "{found:?}"
        );
        assert!(found.contains(&"spec.ports[1].name: Required value".to_string()));
        assert!(found.contains(
            &"spec.ports[1].port: Invalid value: 0: must be between 1 and 65535, inclusive"
                .to_string()
        ));
        let headless = json!({"metadata": {"name": "db", "namespace": "default"}, "spec": {"clusterIP": "None"}});
        assert!(causes(services, &headless).is_empty());

        let cm = json!({"metadata": {"name": "cfg", "namespace": "default"}, "data": {"good.key": "v", "bad key": "v"}});
        let found = causes(resource("", "configmaps"), &cm);
        assert_eq!(found.len(), 1);
        assert!(found[0].starts_with("data[bad key]: Invalid value: \"bad key\": a valid config key must consist of alphanumeric characters"));

        let secrets = resource("", "secrets");
        let tls = json!({"metadata": {"name": "tls", "namespace": "default"}, "type": "kubernetes.io/tls", "data": {"tls.crt": "eA=="}});
        assert_eq!(causes(secrets, &tls), vec!["data[tls.key]: Required value"]);
        let old = json!({"metadata": {"name": "s", "namespace": "default"}, "immutable": true, "data": {"a": "eA=="}});
        let mut new = old.clone();
        new["data"]["a"] = json!("eQ==");
        assert_eq!(
            validate_update(secrets, &old, &new)
                .iter()
                .map(Cause::to_string)
                .collect::<Vec<_>>(),
            vec!["data: Forbidden: field is immutable when `immutable` is set"]
        );

        let leases = find("coordination.k8s.io", "v1", "leases").expect("leases");
        let lease = json!({"metadata": {"name": "node-1", "namespace": "kube-node-lease"}, "spec": {"leaseDurationSeconds": 0}});
        assert_eq!(
            causes(leases, &lease),
            vec!["spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"]
        );
    }

    #[test]
    fn invalid_message_format() {
        let pods = resource("", "pods");
        let found = validate_create(pods, &pod(json!({"containers": [{"name": "app"}]})));
        assert_eq!(
            invalid_message(pods, "web", &found),
            "Pod \"web\" is invalid: spec.containers[0].image: Required value"
        );
        let deployments = find("apps", "v1", "deployments").expect("deployments");
        let two = vec![Cause::required("a", ""), Cause::required("b", "")];
        assert_eq!(
            invalid_message(deployments, "web", &two),
            "Deployment.apps \"web\" is invalid: [a: Required value, b: Required value]"
        );
    }
}
