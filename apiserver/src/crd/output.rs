//! How custom objects are written out: Tables with the version's `additionalPrinterColumns`
//! (NAME and AGE when it declares none, as kube-apiserver serves them) and lists in the shape
//! kube-apiserver gives unstructured lists (keys sorted, items keeping apiVersion and kind,
//! `metadata.continue` always present).

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

use api::ResourceInfo;

use super::definition::PrinterColumn;
use super::ServedVersion;
use crate::printers::{human_duration, IncludeObject};
use crate::watch_cache::CachedObject;

const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const CREATION_DESCRIPTION: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// The columns served: the declared ones, or Age when none are declared.
fn columns(served: &ServedVersion) -> Vec<PrinterColumn> {
    if !served.columns.is_empty() {
        return served.columns.clone();
    }
    vec![PrinterColumn {
        name: "Age".into(),
        ty: "date".into(),
        format: String::new(),
        description: CREATION_DESCRIPTION.into(),
        priority: 0,
        json_path: ".metadata.creationTimestamp".into(),
    }]
}

/// A `meta.k8s.io/v1` Table of custom objects.
pub fn table(
    served: &ServedVersion,
    objects: &[Value],
    include_object: IncludeObject,
    now: DateTime<Utc>,
    resource_version: &str,
    continue_token: Option<&str>,
) -> Value {
    let columns = columns(served);
    let mut definitions = vec![json!({
        "name": "Name", "type": "string", "format": "name",
        "description": NAME_DESCRIPTION, "priority": 0,
    })];
    definitions.extend(columns.iter().map(|c| {
        json!({
            "name": c.name, "type": c.ty, "format": c.format,
            "description": c.description, "priority": c.priority,
        })
    }));
    let rows: Vec<Value> = objects
        .iter()
        .map(|object| {
            let mut cells = vec![json!(crate::meta::name(object))];
            cells.extend(columns.iter().map(|c| cell(c, object, now)));
            json!({"cells": cells, "object": include_object.render(object)})
        })
        .collect();
    let mut metadata = Map::new();
    metadata.insert("resourceVersion".into(), json!(resource_version));
    if let Some(token) = continue_token.filter(|t| !t.is_empty()) {
        metadata.insert("continue".into(), json!(token));
    }
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": definitions,
        "rows": rows,
    })
}

/// One cell: the value at the column's JSONPath, typed as the column says (a `date` as the
/// age it gives); null when the path finds nothing.
fn cell(column: &PrinterColumn, object: &Value, now: DateTime<Utc>) -> Value {
    let Some(value) = json_path(object, &column.json_path) else {
        return Value::Null;
    };
    match column.ty.as_str() {
        "date" => match value
            .as_str()
            .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        {
            Some(at) => json!(human_duration(
                now.signed_duration_since(at.with_timezone(&Utc))
            )),
            None => Value::Null,
        },
        "integer" => value.as_i64().map_or(Value::Null, Value::from),
        "number" => value.as_f64().map_or(Value::Null, Value::from),
        "boolean" => value.as_bool().map_or(Value::Null, Value::from),
        _ => match value {
            Value::String(s) => json!(s),
            Value::Null => Value::Null,
            // kubectl's JSONPath printer writes maps and lists as JSON.
            other => json!(other.to_string()),
        },
    }
}

/// The value at a simple JSONPath (`.spec.replicas`, `.status.conditions[0].type`,
/// `.metadata.labels['app']`), the subset CRD columns and the scale subresource use.
pub fn json_path<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    let path = path.trim();
    let path = path
        .strip_prefix('{')
        .and_then(|p| p.strip_suffix('}'))
        .unwrap_or(path);
    let mut current = object;
    for step in steps(path)? {
        current = match step {
            Step::Field(name) => current.get(name.as_str())?,
            Step::Index(i) => current.get(i)?,
        };
    }
    Some(current)
}

enum Step {
    Field(String),
    Index(usize),
}

fn steps(path: &str) -> Option<Vec<Step>> {
    let mut out = Vec::new();
    let mut rest = path.strip_prefix('.').unwrap_or(path);
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']')?;
            let inside = &after[..end];
            let quoted = inside
                .strip_prefix('\'')
                .and_then(|s| s.strip_suffix('\''))
                .or_else(|| inside.strip_prefix('"').and_then(|s| s.strip_suffix('"')));
            out.push(match quoted {
                Some(key) => Step::Field(key.to_string()),
                None => Step::Index(inside.parse().ok()?),
            });
            rest = &after[end + 1..];
            rest = rest.strip_prefix('.').unwrap_or(rest);
            continue;
        }
        let end = rest.find(['.', '[']).unwrap_or(rest.len());
        out.push(Step::Field(rest[..end].to_string()));
        rest = &rest[end..];
        rest = rest.strip_prefix('.').unwrap_or(rest);
    }
    Some(out)
}

/// Sets the value at a simple dotted path, creating objects on the way (`.spec.replicas`).
pub fn set_path(object: &mut Value, path: &str, value: Value) -> bool {
    let Some(steps) = steps(path.trim()) else {
        return false;
    };
    let mut current = object;
    for (i, step) in steps.iter().enumerate() {
        let Step::Field(name) = step else {
            return false;
        };
        let Some(map) = current.as_object_mut() else {
            return false;
        };
        if i + 1 == steps.len() {
            map.insert(name.clone(), value);
            return true;
        }
        current = map.entry(name.clone()).or_insert_with(|| json!({}));
    }
    false
}

/// A list of custom objects as kube-apiserver writes an unstructured list: `apiVersion`,
/// `items` (each object whole), `kind`, `metadata` with `continue` and `resourceVersion`.
pub fn list_body(
    served: &ServedVersion,
    items: &[Arc<CachedObject>],
    resource_version: i64,
    continue_token: Option<&str>,
) -> Bytes {
    let size: usize = items.iter().map(|o| o.json.len() + 1).sum();
    let mut body = BytesMut::with_capacity(size + 256);
    let resource = served.resource;
    body.put_slice(
        format!(
            "{{\"apiVersion\":\"{}\",\"items\":[",
            resource.api_version()
        )
        .as_bytes(),
    );
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            body.put_u8(b',');
        }
        body.put_slice(&view_json(resource, &item.json));
    }
    let metadata = json!({
        "continue": continue_token.unwrap_or(""),
        "resourceVersion": resource_version.to_string(),
    });
    body.put_slice(
        format!(
            "],\"kind\":\"{}List\",\"metadata\":{}}}\n",
            resource.kind,
            serde_json::to_string(&metadata).unwrap_or_else(|_| "{}".into())
        )
        .as_bytes(),
    );
    body.freeze()
}

/// A stored custom object's JSON as `resource`'s version shows it: the stored bytes when they
/// are in that version, else re-encoded with its apiVersion (conversion `None`).
pub fn view_json(resource: &ResourceInfo, json: &[u8]) -> Bytes {
    let api_version = resource.api_version();
    let prefix = format!("{{\"apiVersion\":{}", Value::String(api_version.clone()));
    if json.starts_with(prefix.as_bytes()) {
        return Bytes::copy_from_slice(json);
    }
    match serde_json::from_slice::<Value>(json) {
        Ok(mut value) => {
            if let Some(map) = value.as_object_mut() {
                map.insert("apiVersion".into(), json!(api_version));
            }
            Bytes::from(crate::go_json::to_vec(&value))
        }
        Err(_) => Bytes::copy_from_slice(json),
    }
}
