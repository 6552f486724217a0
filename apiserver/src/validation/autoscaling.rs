//! HorizontalPodAutoscalers (validated in the v2 shape, as Kubernetes validates its internal
//! form, so a v1 object's errors name the v2 paths): replica bounds, the target reference,
//! metrics and scaling behavior, with the messages of Kubernetes' autoscaling validation.

use serde_json::Value;

use api::names::is_path_segment_name;

use super::{field_of, int_of, list_of, str_of, Bad, Cause, NON_NEGATIVE_MSG};

const METRIC_SOURCE_TYPES: &[&str] = &[
    "ContainerResource",
    "External",
    "Object",
    "Pods",
    "Resource",
];
const SELECT_POLICIES: &[&str] = &["Disabled", "Max", "Min"];
const POLICY_TYPES: &[&str] = &["Percent", "Pods"];
const MAX_STABILIZATION_WINDOW_SECONDS: i64 = 3600;
const MAX_PERIOD_SECONDS: i64 = 1800;

/// The spec of an autoscaler in either version.
pub(super) fn validate_hpa(object: &Value, out: &mut Vec<Cause>) {
    let converted;
    let object = if crate::autoscaling::is_v1_object(object) {
        converted = crate::autoscaling::to_v2(object);
        &converted
    } else {
        object
    };
    let null = Value::Null;
    let spec = field_of(object, "spec").unwrap_or(&null);
    let min = int_of(spec, "minReplicas");
    let max = int_of(spec, "maxReplicas").unwrap_or(0);
    if let Some(min) = min.filter(|m| *m < 1) {
        out.push(Cause::invalid(
            "spec.minReplicas",
            min,
            "must be greater than or equal to 1",
        ));
    }
    if max < 1 {
        out.push(Cause::invalid(
            "spec.maxReplicas",
            max,
            "must be greater than 0",
        ));
    }
    if min.is_some_and(|min| max < min) {
        out.push(Cause::invalid(
            "spec.maxReplicas",
            max,
            "must be greater than or equal to `minReplicas`",
        ));
    }
    // Metrics and behavior are looked at only once the reference is right, as upstream does.
    let reference = field_of(spec, "scaleTargetRef").unwrap_or(&null);
    let before = out.len();
    for key in ["kind", "name"] {
        let field = format!("spec.scaleTargetRef.{key}");
        match str_of(reference, key).filter(|v| !v.is_empty()) {
            None => out.push(Cause::required(&field, "")),
            Some(value) => {
                for msg in is_path_segment_name(value) {
                    out.push(Cause::invalid(&field, value, &msg));
                }
            }
        }
    }
    if out.len() > before {
        return;
    }
    let before = out.len();
    for (i, metric) in list_of(spec, "metrics").iter().enumerate() {
        validate_metric(metric, &format!("spec.metrics[{i}]"), out);
    }
    if out.len() > before {
        return;
    }
    if let Some(behavior) = field_of(spec, "behavior").filter(|b| b.is_object()) {
        for direction in ["scaleUp", "scaleDown"] {
            if let Some(rules) = field_of(behavior, direction).filter(|r| r.is_object()) {
                validate_rules(rules, &format!("spec.behavior.{direction}"), out);
            }
        }
    }
}

/// A status write: the replica counts may not be negative.
pub(super) fn validate_hpa_status(object: &Value, out: &mut Vec<Cause>) {
    let null = Value::Null;
    let status = field_of(object, "status").unwrap_or(&null);
    for key in ["currentReplicas", "desiredReplicas"] {
        if let Some(n) = int_of(status, key).filter(|n| *n < 0) {
            out.push(Cause::invalid(
                &format!("status.{key}"),
                n,
                NON_NEGATIVE_MSG,
            ));
        }
    }
}

fn validate_metric(metric: &Value, path: &str, out: &mut Vec<Cause>) {
    let kind = str_of(metric, "type").unwrap_or_default();
    if kind.is_empty() {
        out.push(Cause::required(
            &format!("{path}.type"),
            "must specify a metric source type",
        ));
    }
    if !METRIC_SOURCE_TYPES.contains(&kind) {
        out.push(Cause::not_supported(
            &format!("{path}.type"),
            kind,
            METRIC_SOURCE_TYPES,
        ));
    }
    let sources = [
        ("object", "Object"),
        ("pods", "Pods"),
        ("resource", "Resource"),
        ("containerResource", "ContainerResource"),
        ("external", "External"),
    ];
    let present: Vec<&str> = sources
        .iter()
        .filter(|(key, _)| field_of(metric, key).is_some_and(|v| !v.is_null()))
        .map(|(key, _)| *key)
        .collect();
    if present.len() > 1 {
        for key in &present[1..] {
            out.push(Cause::forbidden(
                &format!("{path}.{key}"),
                "must populate information for the given metric source (only one)",
            ));
        }
    }
    if let Some((key, _)) = sources.iter().find(|(_, t)| *t == kind) {
        if !present.contains(key) {
            out.push(Cause::required(
                &format!("{path}.{key}"),
                "must populate information for the given metric source",
            ));
        }
    }
    for key in present {
        let source = &metric[key];
        let source_path = format!("{path}.{key}");
        match key {
            "resource" | "containerResource" => {
                if str_of(source, "name").is_none_or(str::is_empty) {
                    out.push(Cause::required(
                        &format!("{source_path}.name"),
                        "must specify a resource name",
                    ));
                }
                if key == "containerResource"
                    && str_of(source, "container").is_none_or(str::is_empty)
                {
                    out.push(Cause::required(
                        &format!("{source_path}.container"),
                        "must specify a container",
                    ));
                }
                let target = field_of(source, "target").unwrap_or(&Value::Null);
                let target_path = format!("{source_path}.target");
                validate_target(target, &target_path, out);
                let utilization = field_of(target, "averageUtilization").filter(|v| !v.is_null());
                let average = field_of(target, "averageValue").filter(|v| !v.is_null());
                match (utilization, average) {
                    (None, None) => out.push(Cause::required(
                        &format!("{target_path}.averageUtilization"),
                        "must set either a target raw value or a target utilization",
                    )),
                    (Some(_), Some(_)) => out.push(Cause::forbidden(
                        &format!("{target_path}.averageValue"),
                        "may not set both a target raw value and a target utilization",
                    )),
                    _ => {}
                }
            }
            _ => {
                let metric_name = field_of(source, "metric")
                    .and_then(|m| str_of(m, "name"))
                    .unwrap_or_default();
                if metric_name.is_empty() {
                    out.push(Cause::required(
                        &format!("{source_path}.metric.name"),
                        "must specify a metric name",
                    ));
                }
                let target = field_of(source, "target").unwrap_or(&Value::Null);
                validate_target(target, &format!("{source_path}.target"), out);
            }
        }
    }
}

fn validate_target(target: &Value, path: &str, out: &mut Vec<Cause>) {
    let kind = str_of(target, "type").unwrap_or_default();
    if kind.is_empty() {
        out.push(Cause::required(
            &format!("{path}.type"),
            "must specify a metric target type",
        ));
    }
    if !["Utilization", "Value", "AverageValue"].contains(&kind) {
        out.push(Cause::invalid(
            &format!("{path}.type"),
            kind,
            "must be either Utilization, Value, or AverageValue",
        ));
    }
    for key in ["value", "averageValue"] {
        let Some(value) = field_of(target, key).filter(|v| !v.is_null()) else {
            continue;
        };
        let positive = api::quantity::Quantity::from_value(value)
            .is_ok_and(|q| !q.is_zero() && !q.is_negative());
        if !positive {
            let shown = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_string);
            out.push(Cause::invalid(
                &format!("{path}.{key}"),
                Bad::Raw(shown),
                "must be positive",
            ));
        }
    }
    if let Some(u) = int_of(target, "averageUtilization").filter(|u| *u < 1) {
        out.push(Cause::invalid(
            &format!("{path}.averageUtilization"),
            u,
            "must be greater than 0",
        ));
    }
}

fn validate_rules(rules: &Value, path: &str, out: &mut Vec<Cause>) {
    if let Some(window) = int_of(rules, "stabilizationWindowSeconds") {
        let field = format!("{path}.stabilizationWindowSeconds");
        if window < 0 {
            out.push(Cause::invalid(
                &field,
                window,
                "must be greater than or equal to zero",
            ));
        }
        if window > MAX_STABILIZATION_WINDOW_SECONDS {
            out.push(Cause::invalid(
                &field,
                window,
                &format!("must be less than or equal to {MAX_STABILIZATION_WINDOW_SECONDS}"),
            ));
        }
    }
    if let Some(policy) = str_of(rules, "selectPolicy") {
        if !SELECT_POLICIES.contains(&policy) {
            out.push(Cause::not_supported(
                &format!("{path}.selectPolicy"),
                policy,
                SELECT_POLICIES,
            ));
        }
    }
    let policies = list_of(rules, "policies");
    if policies.is_empty() {
        out.push(Cause::required(
            &format!("{path}.policies"),
            "must specify at least one Policy",
        ));
    }
    for (i, policy) in policies.iter().enumerate() {
        let at = format!("{path}.policies[{i}]");
        let kind = str_of(policy, "type").unwrap_or_default();
        if !POLICY_TYPES.contains(&kind) {
            out.push(Cause::not_supported(
                &format!("{at}.type"),
                kind,
                POLICY_TYPES,
            ));
        }
        let value = int_of(policy, "value").unwrap_or(0);
        if value <= 0 {
            out.push(Cause::invalid(
                &format!("{at}.value"),
                value,
                "must be greater than zero",
            ));
        }
        let period = int_of(policy, "periodSeconds").unwrap_or(0);
        let period_field = format!("{at}.periodSeconds");
        if period <= 0 {
            out.push(Cause::invalid(
                &period_field,
                period,
                "must be greater than zero",
            ));
        }
        if period > MAX_PERIOD_SECONDS {
            out.push(Cause::invalid(
                &period_field,
                period,
                &format!("must be less than or equal to {MAX_PERIOD_SECONDS}"),
            ));
        }
    }
}
