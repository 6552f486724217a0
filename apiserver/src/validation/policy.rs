//! PodDisruptionBudgets: minAvailable / maxUnavailable, the selector, and the unhealthy pod
//! eviction policy, with the messages of Kubernetes' policy validation.

use serde_json::Value;

use super::{field_of, list_of, map_of, str_of, validate_labels, Bad, Cause, NON_NEGATIVE_MSG};

const EVICTION_POLICIES: &[&str] = &["AlwaysAllow", "IfHealthyBudget"];
const PERCENT_MSG: &str = "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%', or '93%', regex used for validation is '[0-9]+%')";
const OPERATORS: &[&str] = &["DoesNotExist", "Exists", "In", "NotIn"];

pub(super) fn validate_pdb(spec: &Value, out: &mut Vec<Cause>) {
    let min = field_of(spec, "minAvailable").filter(|v| !v.is_null());
    let max = field_of(spec, "maxUnavailable").filter(|v| !v.is_null());
    if min.is_some() && max.is_some() {
        out.push(Cause::invalid(
            "spec",
            Bad::Raw(go_spec(spec)),
            "minAvailable and maxUnavailable cannot be both set",
        ));
    }
    for (key, value) in [("minAvailable", min), ("maxUnavailable", max)] {
        if let Some(value) = value {
            validate_int_or_percent(value, &format!("spec.{key}"), out);
        }
    }
    if let Some(selector) = field_of(spec, "selector").filter(|v| !v.is_null()) {
        validate_label_selector(selector, "spec.selector", out);
    }
    if let Some(policy) = str_of(spec, "unhealthyPodEvictionPolicy") {
        if !EVICTION_POLICIES.contains(&policy) {
            out.push(Cause::not_supported(
                "spec.unhealthyPodEvictionPolicy",
                policy,
                EVICTION_POLICIES,
            ));
        }
    }
}

/// A non-negative integer, or a percentage of at most 100%.
pub(super) fn validate_int_or_percent(value: &Value, field: &str, out: &mut Vec<Cause>) {
    match value {
        Value::Number(n) => {
            let n = n.as_i64().unwrap_or(-1);
            if n < 0 {
                out.push(Cause::invalid(field, n, NON_NEGATIVE_MSG));
            }
        }
        Value::String(s) => match parse_percent(s) {
            None => out.push(Cause::invalid(
                field,
                Bad::Raw(go_int_or_string(value)),
                PERCENT_MSG,
            )),
            Some(p) if p > 100 => out.push(Cause::invalid(
                field,
                Bad::Raw(go_int_or_string(value)),
                "must not be greater than 100%",
            )),
            Some(_) => {}
        },
        _ => {}
    }
}

/// `50%` → 50; anything not `[0-9]+%` → None.
pub(crate) fn parse_percent(s: &str) -> Option<u64> {
    let digits = s.strip_suffix('%')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(digits.parse().unwrap_or(u64::MAX))
}

/// A `metav1.LabelSelector`: label keys and values, and each requirement's operator and values.
pub(super) fn validate_label_selector(selector: &Value, path: &str, out: &mut Vec<Cause>) {
    validate_labels(
        map_of(selector, "matchLabels"),
        &format!("{path}.matchLabels"),
        out,
    );
    for (i, expr) in list_of(selector, "matchExpressions").iter().enumerate() {
        let at = format!("{path}.matchExpressions[{i}]");
        let values = list_of(expr, "values");
        match str_of(expr, "operator").unwrap_or_default() {
            "In" | "NotIn" if values.is_empty() => out.push(Cause::required(
                &format!("{at}.values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => out.push(Cause::forbidden(
                &format!("{at}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            op if !OPERATORS.contains(&op) => out.push(Cause::invalid(
                &format!("{at}.operator"),
                op,
                "not a valid selector operator",
            )),
            _ => {}
        }
        let key = str_of(expr, "key").unwrap_or_default();
        for msg in api::names::is_qualified_name(key) {
            out.push(Cause::invalid(&format!("{at}.key"), key, &msg));
        }
    }
}

/// Go's `%#v` of an `intstr.IntOrString`.
pub(super) fn go_int_or_string(value: &Value) -> String {
    match value {
        Value::String(s) => format!("intstr.IntOrString{{Type:1, IntVal:0, StrVal:{s:?}}}"),
        other => format!(
            "intstr.IntOrString{{Type:0, IntVal:{}, StrVal:\"\"}}",
            other.as_i64().unwrap_or_default()
        ),
    }
}

/// Go's `%#v` of the spec struct: its pointer fields show as set or nil.
fn go_spec(spec: &Value) -> String {
    let pointer = |key: &str, ty: &str| match field_of(spec, key).filter(|v| !v.is_null()) {
        Some(_) => format!("(*{ty})(0xc000100000)"),
        None => format!("(*{ty})(nil)"),
    };
    format!(
        "policy.PodDisruptionBudgetSpec{{MinAvailable:{}, Selector:{}, MaxUnavailable:{}, UnhealthyPodEvictionPolicy:{}}}",
        pointer("minAvailable", "intstr.IntOrString"),
        pointer("selector", "v1.LabelSelector"),
        pointer("maxUnavailable", "intstr.IntOrString"),
        pointer("unhealthyPodEvictionPolicy", "policy.UnhealthyPodEvictionPolicyType"),
    )
}
