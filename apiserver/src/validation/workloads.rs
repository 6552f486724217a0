//! Deployments, ReplicaSets, DaemonSets, ReplicationControllers, Jobs and PodTemplates: replica
//! counts, selectors, update strategies and pod templates.

use serde_json::Value;

use api::selectors::LabelSelector;

use super::pod::validate_pod_spec;
use super::policy::{parse_percent, validate_int_or_percent};
use super::{
    field_of, go_string_map, int_of, map_of, non_negative, selector_repr, semantic_eq, str_of,
    validate_labels, Bad, Cause,
};

/// Deployments, ReplicaSets and DaemonSets: replicas, selector, and a template the selector
/// matches.
pub(super) fn validate_replicated(kind: &str, spec: &Value, out: &mut Vec<Cause>) {
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
    if kind == "DaemonSet" {
        if let Some(deadline) = int_of(template_spec, "activeDeadlineSeconds") {
            out.push(Cause::invalid(
                "spec.template.spec.activeDeadlineSeconds",
                deadline,
                "activeDeadlineSeconds in DaemonSet is not Supported",
            ));
        }
        if let Some(strategy) = field_of(spec, "updateStrategy").filter(|s| !s.is_null()) {
            validate_daemon_set_strategy(strategy, out);
        }
    }
}

/// `ValidateDaemonSetUpdateStrategy`: OnDelete, or RollingUpdate with exactly one of
/// maxUnavailable and maxSurge above zero.
fn validate_daemon_set_strategy(strategy: &Value, out: &mut Vec<Cause>) {
    let path = "spec.updateStrategy";
    let rolling = field_of(strategy, "rollingUpdate").filter(|r| !r.is_null());
    match str_of(strategy, "type").unwrap_or_default() {
        "OnDelete" => {}
        "RollingUpdate" => {
            let Some(rolling) = rolling else {
                out.push(Cause::required(&format!("{path}.rollingUpdate"), ""));
                return;
            };
            let mut non_zero = |key: &str| {
                let value = field_of(rolling, key).filter(|v| !v.is_null())?;
                let amount = match value {
                    Value::String(s) => match parse_percent(s) {
                        Some(p) => p as i64,
                        None => s.parse::<i64>().unwrap_or(0),
                    },
                    other => other.as_i64().unwrap_or(0),
                };
                if amount == 0 {
                    return None;
                }
                validate_int_or_percent(value, &format!("{path}.rollingUpdate.{key}"), out);
                Some(match value {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
            };
            let unavailable = non_zero("maxUnavailable");
            let surge = non_zero("maxSurge");
            match (unavailable, surge) {
                (Some(_), Some(surge)) => out.push(Cause::invalid(
                    &format!("{path}.rollingUpdate.maxSurge"),
                    &surge,
                    "may not be set when maxUnavailable is non-zero",
                )),
                (None, None) => out.push(Cause::required(
                    &format!("{path}.rollingUpdate.maxUnavailable"),
                    "cannot be 0 when maxSurge is 0",
                )),
                _ => {}
            }
        }
        other => {
            let rolling = if rolling.is_some() {
                "(*apps.RollingUpdateDaemonSet)(0xc000100000)"
            } else {
                "(*apps.RollingUpdateDaemonSet)(nil)"
            };
            out.push(Cause::new(
                "FieldValueNotSupported",
                path,
                format!(
                    "Unsupported value: apps.DaemonSetUpdateStrategy{{Type:{other:?}, RollingUpdate:{rolling}}}: supported values: \"RollingUpdate\", \"OnDelete\""
                ),
            ));
        }
    }
}

/// ReplicationControllers: a map selector that is not empty and matches the template's labels,
/// and a template whose pods always restart and have no deadline.
pub(super) fn validate_replication_controller(spec: &Value, out: &mut Vec<Cause>) {
    non_negative(spec, "minReadySeconds", "spec", out);
    let selector = map_of(spec, "selector").filter(|m| !m.is_empty());
    if selector.is_none() {
        out.push(Cause::required("spec.selector", ""));
    }
    non_negative(spec, "replicas", "spec", out);
    let Some(template) = field_of(spec, "template").filter(|t| !t.is_null()) else {
        out.push(Cause::required("spec.template", ""));
        return;
    };
    let labels = field_of(template, "metadata").and_then(|m| map_of(m, "labels"));
    if let Some(selector) = selector {
        let matches = selector
            .iter()
            .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v));
        if !matches {
            out.push(Cause::invalid(
                "spec.template.metadata.labels",
                Bad::Raw(go_string_map(labels)),
                "`selector` does not match template `labels`",
            ));
        }
    }
    validate_template(template, out);
    let template_spec = field_of(template, "spec").unwrap_or(&Value::Null);
    let policy = str_of(template_spec, "restartPolicy").unwrap_or_default();
    if policy != "Always" {
        out.push(Cause::not_supported(
            "spec.template.spec.restartPolicy",
            policy,
            &["Always"],
        ));
    }
    if let Some(deadline) = int_of(template_spec, "activeDeadlineSeconds") {
        out.push(Cause::invalid(
            "spec.template.spec.activeDeadlineSeconds",
            deadline,
            "activeDeadlineSeconds in ReplicationController is not Supported",
        ));
    }
}

/// A PodTemplate: the labels and pod spec of its `template`.
pub(super) fn validate_pod_template(object: &Value, out: &mut Vec<Cause>) {
    let template = field_of(object, "template").unwrap_or(&Value::Null);
    let meta = field_of(template, "metadata").unwrap_or(&Value::Null);
    validate_labels(map_of(meta, "labels"), "template.metadata.labels", out);
    validate_pod_spec(
        field_of(template, "spec").unwrap_or(&Value::Null),
        "template.spec",
        out,
    );
}

pub(super) fn validate_job(spec: &Value, out: &mut Vec<Cause>) {
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
pub(super) fn is_unset_selector(selector: &Value) -> bool {
    let has = |key| field_of(selector, key).is_some_and(|v| !semantic_eq(Some(v), None));
    !has("matchLabels") && !has("matchExpressions")
}

/// The selector parses, is not empty, and matches the template's labels.
pub(super) fn validate_template_selector(
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
