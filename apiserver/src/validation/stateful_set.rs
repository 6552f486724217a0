//! StatefulSets and ControllerRevisions, with the messages and field paths of Kubernetes' apps
//! validation. A StatefulSet's pod template is checked for its labels and the selector only, as
//! Kubernetes does: its volume mounts may name claim templates, which are not pod volumes.

use serde_json::Value;

use super::policy::{go_int_or_string, validate_int_or_percent};
use super::workloads::{is_unset_selector, validate_template_selector};
use super::{
    field_of, int_of, map_of, non_negative, semantic_eq, str_of, validate_labels, Bad, Cause,
    IMMUTABLE_MSG,
};

const RETENTION_POLICIES: &[&str] = &["Retain", "Delete"];

/// The spec fields an update may change; any other change is refused as a whole.
const MUTABLE: &[&str] = &[
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
];

pub(super) fn validate_spec(spec: &Value, out: &mut Vec<Cause>) {
    match str_of(spec, "podManagementPolicy").unwrap_or_default() {
        "" => out.push(Cause::required("spec.podManagementPolicy", "")),
        "OrderedReady" | "Parallel" => {}
        other => out.push(Cause::invalid(
            "spec.podManagementPolicy",
            other,
            "must be 'OrderedReady' or 'Parallel'",
        )),
    }
    validate_update_strategy(field_of(spec, "updateStrategy"), out);
    if let Some(policy) = field_of(spec, "persistentVolumeClaimRetentionPolicy") {
        for key in ["whenDeleted", "whenScaled"] {
            let value = str_of(policy, key).unwrap_or_default();
            if !RETENTION_POLICIES.contains(&value) {
                out.push(Cause::not_supported(
                    &format!("spec.persistentVolumeClaimRetentionPolicy.{key}"),
                    value,
                    RETENTION_POLICIES,
                ));
            }
        }
    }
    non_negative(spec, "replicas", "spec", out);
    non_negative(spec, "minReadySeconds", "spec", out);
    if let Some(start) = field_of(spec, "ordinals").and_then(|o| int_of(o, "start")) {
        if start < 0 {
            out.push(Cause::invalid(
                "spec.ordinals.start",
                start,
                super::NON_NEGATIVE_MSG,
            ));
        }
    }
    match field_of(spec, "selector").filter(|s| !s.is_null()) {
        None => out.push(Cause::required("spec.selector", "")),
        Some(selector) if is_unset_selector(selector) => out.push(Cause::invalid(
            "spec.selector",
            super::selector_repr(Some(selector)),
            "empty selector is invalid for statefulset",
        )),
        Some(selector) => validate_template_selector(selector, spec, "", out),
    }
    let template = field_of(spec, "template").unwrap_or(&Value::Null);
    let meta = field_of(template, "metadata").unwrap_or(&Value::Null);
    validate_labels(map_of(meta, "labels"), "spec.template.labels", out);
    let pod_spec = field_of(template, "spec").unwrap_or(&Value::Null);
    let policy = str_of(pod_spec, "restartPolicy").unwrap_or_default();
    if policy != "Always" {
        out.push(Cause::not_supported(
            "spec.template.spec.restartPolicy",
            policy,
            &["Always"],
        ));
    }
    if field_of(pod_spec, "activeDeadlineSeconds").is_some_and(|v| !v.is_null()) {
        out.push(Cause::forbidden(
            "spec.template.spec.activeDeadlineSeconds",
            "activeDeadlineSeconds in StatefulSet is not Supported",
        ));
    }
}

fn validate_update_strategy(strategy: Option<&Value>, out: &mut Vec<Cause>) {
    let strategy = strategy.unwrap_or(&Value::Null);
    let rolling = field_of(strategy, "rollingUpdate").filter(|r| !r.is_null());
    match str_of(strategy, "type").unwrap_or_default() {
        "" => out.push(Cause::required("spec.updateStrategy", "")),
        "OnDelete" => {
            if let Some(rolling) = rolling {
                out.push(Cause::invalid(
                    "spec.updateStrategy.rollingUpdate",
                    Bad::Raw(go_rolling_update(rolling)),
                    "only allowed for updateStrategy 'RollingUpdate'",
                ));
            }
        }
        "RollingUpdate" => {
            if let Some(rolling) = rolling {
                let path = "spec.updateStrategy.rollingUpdate";
                non_negative(rolling, "partition", path, out);
                if let Some(max) = field_of(rolling, "maxUnavailable").filter(|v| !v.is_null()) {
                    let field = format!("{path}.maxUnavailable");
                    validate_int_or_percent(max, &field, out);
                    let zero = match max {
                        Value::Number(n) => n.as_i64() == Some(0),
                        Value::String(s) => super::policy::parse_percent(s) == Some(0),
                        _ => false,
                    };
                    if zero {
                        out.push(Cause::invalid(
                            &field,
                            Bad::Raw(go_int_or_string(max)),
                            "cannot be 0",
                        ));
                    }
                }
            }
        }
        other => {
            let rolling = match rolling {
                Some(_) => "(*apps.RollingUpdateStatefulSetStrategy)(0xc000100000)",
                None => "(*apps.RollingUpdateStatefulSetStrategy)(nil)",
            };
            out.push(Cause::invalid(
                "spec.updateStrategy",
                Bad::Raw(format!(
                    "apps.StatefulSetUpdateStrategy{{Type:{other:?}, RollingUpdate:{rolling}}}"
                )),
                "must be 'RollingUpdate' or 'OnDelete'",
            ));
        }
    }
}

/// Go's `%#v` of a RollingUpdateStatefulSetStrategy.
fn go_rolling_update(rolling: &Value) -> String {
    let partition = int_of(rolling, "partition").unwrap_or(0);
    let max = match field_of(rolling, "maxUnavailable").filter(|v| !v.is_null()) {
        Some(_) => "(*intstr.IntOrString)(0xc000100000)",
        None => "(*intstr.IntOrString)(nil)",
    };
    format!("apps.RollingUpdateStatefulSetStrategy{{Partition:{partition}, MaxUnavailable:{max}}}")
}

/// Only some spec fields may change after creation.
pub(super) fn validate_update(
    old_spec: Option<&Value>,
    new_spec: Option<&Value>,
    out: &mut Vec<Cause>,
) {
    let (Some(Value::Object(old)), Some(Value::Object(new))) = (old_spec, new_spec) else {
        return;
    };
    let keys = old.keys().chain(new.keys());
    let changed = keys
        .filter(|k| !MUTABLE.contains(&k.as_str()))
        .any(|k| !semantic_eq(old.get(k), new.get(k)));
    if changed {
        out.push(Cause::forbidden(
            "spec",
            "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
        ));
    }
}

/// A ControllerRevision: data is required and the revision not negative.
pub(super) fn validate_revision(object: &Value, out: &mut Vec<Cause>) {
    if field_of(object, "data").is_none_or(Value::is_null) {
        out.push(Cause::required("data", "data is mandatory"));
    }
    non_negative(object, "revision", "", out);
}

/// A ControllerRevision's data never changes.
pub(super) fn validate_revision_update(old: &Value, new: &Value, out: &mut Vec<Cause>) {
    let (a, b) = (field_of(old, "data"), field_of(new, "data"));
    if !semantic_eq(a, b) {
        let shown = b.map(Value::to_string).unwrap_or_default();
        out.push(Cause::invalid(
            "data",
            Bad::Raw(format!("runtime.RawExtension{{Raw:{shown}}}")),
            IMMUTABLE_MSG,
        ));
    }
}
