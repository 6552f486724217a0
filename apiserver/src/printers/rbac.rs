//! Roles and role bindings.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{age, name, str_at};

pub(super) fn role_cells(role: &Value, _now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name(role),
        str_at(role, "/metadata/creationTimestamp").into(),
    ]
}

pub(super) fn role_binding_cells(binding: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let subjects = binding
        .get("subjects")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let of_kind = |kind: &str| -> String {
        subjects
            .iter()
            .filter(|s| s.get("kind").and_then(Value::as_str) == Some(kind))
            .map(|s| {
                let name = str_at(s, "/name");
                match (kind, s.get("namespace").and_then(Value::as_str)) {
                    ("ServiceAccount", Some(ns)) => format!("{ns}/{name}"),
                    _ => name.to_string(),
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    vec![
        name(binding),
        format!(
            "{}/{}",
            str_at(binding, "/roleRef/kind"),
            str_at(binding, "/roleRef/name")
        )
        .into(),
        age(binding, now),
        of_kind("User").into(),
        of_kind("Group").into(),
        of_kind("ServiceAccount").into(),
    ]
}
