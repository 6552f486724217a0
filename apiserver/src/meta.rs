//! Reading and writing `metadata` on objects held as JSON values.

use serde_json::{Map, Value};

pub fn name(object: &Value) -> &str {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

pub fn namespace(object: &Value) -> Option<&str> {
    object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

pub fn uid(object: &Value) -> &str {
    object
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("")
}

pub fn resource_version(object: &Value) -> &str {
    object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The object's `metadata` map, created if missing or not a map.
pub fn metadata_mut(object: &mut Value) -> &mut Map<String, Value> {
    if !object.is_object() {
        *object = Value::Object(Map::new());
    }
    let Value::Object(map) = object else {
        unreachable!("just made an object")
    };
    let meta = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    match meta {
        Value::Object(m) => m,
        _ => unreachable!("just made an object"),
    }
}

pub fn set_resource_version(object: &mut Value, rv: i64) {
    metadata_mut(object).insert("resourceVersion".into(), Value::String(rv.to_string()));
}

pub fn labels(object: &Value) -> Option<&Map<String, Value>> {
    object
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
}

pub fn annotations(object: &Value) -> Option<&Map<String, Value>> {
    object
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
}

pub fn finalizers(object: &Value) -> Vec<String> {
    object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

pub fn deletion_timestamp(object: &Value) -> Option<&str> {
    object
        .pointer("/metadata/deletionTimestamp")
        .and_then(Value::as_str)
}

pub fn generation(object: &Value) -> i64 {
    object
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// A string at a dotted path (`spec.nodeName`), if present.
pub fn str_at<'a>(object: &'a Value, path: &str) -> Option<&'a str> {
    let mut current = object;
    for part in path.split('.') {
        current = current.get(part)?;
    }
    current.as_str()
}

/// The current time as Kubernetes writes timestamps (RFC 3339, seconds, UTC).
pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_and_writes_metadata() {
        let mut pod = json!({"metadata": {"name": "a", "namespace": "ns", "finalizers": ["x"]}, "spec": {"nodeName": "n1"}});
        assert_eq!(name(&pod), "a");
        assert_eq!(namespace(&pod), Some("ns"));
        assert_eq!(finalizers(&pod), vec!["x".to_string()]);
        assert_eq!(str_at(&pod, "spec.nodeName"), Some("n1"));
        set_resource_version(&mut pod, 42);
        assert_eq!(resource_version(&pod), "42");
        let mut empty = json!(null);
        metadata_mut(&mut empty).insert("name".into(), json!("b"));
        assert_eq!(name(&empty), "b");
    }
}
