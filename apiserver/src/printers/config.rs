//! ConfigMaps, Secrets, ServiceAccounts, Leases, ResourceQuotas and LimitRanges.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{age, array_at, map_len, name, str_at};

pub(super) fn configmap_cells(cm: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let data = map_len(cm, "/data") + map_len(cm, "/binaryData");
    vec![name(cm), data.into(), age(cm, now)]
}

pub(super) fn secret_cells(secret: &Value, now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name(secret),
        str_at(secret, "/type").into(),
        map_len(secret, "/data").into(),
        age(secret, now),
    ]
}

pub(super) fn serviceaccount_cells(sa: &Value, now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name(sa),
        array_at(sa, "/secrets").len().into(),
        age(sa, now),
    ]
}

pub(super) fn lease_cells(lease: &Value, now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name(lease),
        str_at(lease, "/spec/holderIdentity").into(),
        age(lease, now),
    ]
}

/// kubectl's quota columns: `name: used/hard` for each hard resource, sorted, limits apart.
pub(super) fn resourcequota_cells(quota: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let mut request = Vec::new();
    let mut limit = Vec::new();
    if let Some(hard) = quota.pointer("/status/hard").and_then(Value::as_object) {
        let mut names: Vec<&String> = hard.keys().collect();
        names.sort();
        for name in names {
            let text = |v: Option<&Value>| match v {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => "0".to_string(),
            };
            let used = text(quota.pointer("/status/used").and_then(|u| u.get(name)));
            let cell = format!("{name}: {used}/{}", text(hard.get(name)));
            if name.starts_with("limits.") {
                limit.push(cell);
            } else {
                request.push(cell);
            }
        }
    }
    vec![
        name(quota),
        age(quota, now),
        request.join(", ").into(),
        limit.join(", ").into(),
    ]
}

pub(super) fn limitrange_cells(range: &Value, _now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name(range),
        str_at(range, "/metadata/creationTimestamp").into(),
    ]
}
