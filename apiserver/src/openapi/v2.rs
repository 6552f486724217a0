//! The Swagger 2.0 form of the group-version documents, as `/openapi/v2` serves it: one
//! document with every path and every definition, references under `#/definitions/`, request
//! bodies as `body` parameters, and the schema forms OpenAPI 2 has (no `oneOf`, `anyOf` or
//! `nullable`; int-or-string as a string in the `int-or-string` format).

use serde_json::{json, Map, Value};

use super::definitions::V3_PREFIX;

const V2_PREFIX: &str = "#/definitions/";

/// Merges the OpenAPI 3 documents into one Swagger 2.0 document.
pub fn document<'a>(documents: impl Iterator<Item = &'a Value>) -> Value {
    let mut paths = Map::new();
    let mut definitions = Map::new();
    for document in documents {
        if let Some(items) = document.get("paths").and_then(Value::as_object) {
            for (path, item) in items {
                paths.insert(path.clone(), path_item(item));
            }
        }
        if let Some(schemas) = document
            .pointer("/components/schemas")
            .and_then(Value::as_object)
        {
            for (name, schema) in schemas {
                if !definitions.contains_key(name) {
                    definitions.insert(name.clone(), schema_v2(schema));
                }
            }
        }
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": super::INFO_VERSION},
        "paths": paths,
        "definitions": definitions,
        "securityDefinitions": {
            "BearerToken": {"type": "apiKey", "description": "Bearer Token authentication", "name": "authorization", "in": "header"},
        },
        "security": [{"BearerToken": []}],
    })
}

fn path_item(item: &Value) -> Value {
    let Some(item) = item.as_object() else {
        return item.clone();
    };
    let mut out = Map::new();
    for (key, value) in item {
        let converted = match key.as_str() {
            "parameters" => parameters(value),
            "get" | "put" | "post" | "delete" | "patch" | "head" | "options" => operation(value),
            _ => value.clone(),
        };
        out.insert(key.clone(), converted);
    }
    Value::Object(out)
}

/// A v3 parameter's `schema` becomes the parameter's own `type`.
fn parameters(list: &Value) -> Value {
    let converted = list
        .as_array()
        .map(|list| {
            list.iter()
                .map(|p| {
                    let mut p = p.as_object().cloned().unwrap_or_default();
                    if let Some(Value::Object(schema)) = p.remove("schema") {
                        p.extend(schema);
                    }
                    Value::Object(p)
                })
                .collect()
        })
        .unwrap_or_default();
    Value::Array(converted)
}

fn operation(op: &Value) -> Value {
    let Some(op) = op.as_object() else {
        return op.clone();
    };
    let mut out = Map::new();
    let mut body = None;
    let mut produces: Vec<Value> = Vec::new();
    for (key, value) in op {
        match key.as_str() {
            "requestBody" => {
                let consumes: Vec<Value> = value
                    .get("content")
                    .and_then(Value::as_object)
                    .map(|c| c.keys().map(|k| json!(k)).collect())
                    .unwrap_or_default();
                out.insert("consumes".into(), Value::Array(consumes));
                let schema = first_content_schema(value).map(schema_v2);
                body =
                    Some(json!({"name": "body", "in": "body", "required": true, "schema": schema}));
            }
            "parameters" => {
                out.insert(key.clone(), parameters(value));
            }
            "responses" => {
                let mut responses = Map::new();
                for (code, response) in value.as_object().into_iter().flatten() {
                    let mut converted = Map::new();
                    converted.insert(
                        "description".into(),
                        response.get("description").cloned().unwrap_or_default(),
                    );
                    if let Some(content) = response.get("content").and_then(Value::as_object) {
                        for t in content.keys() {
                            if !produces.contains(&json!(t)) {
                                produces.push(json!(t));
                            }
                        }
                    }
                    if let Some(schema) = first_content_schema(response) {
                        converted.insert("schema".into(), schema_v2(schema));
                    }
                    responses.insert(code.clone(), Value::Object(converted));
                }
                out.insert(key.clone(), Value::Object(responses));
            }
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    if let Some(body) = body {
        let parameters = out.entry("parameters").or_insert_with(|| json!([]));
        if let Some(list) = parameters.as_array_mut() {
            list.insert(0, body);
        }
    }
    if !produces.is_empty() {
        out.insert("produces".into(), Value::Array(produces));
    }
    out.insert("schemes".into(), json!(["https"]));
    Value::Object(out)
}

fn first_content_schema(value: &Value) -> Option<&Value> {
    value
        .get("content")?
        .as_object()?
        .values()
        .next()?
        .get("schema")
}

/// A v3 schema in its v2 form.
pub fn schema_v2(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => {
            let mut out = Map::new();
            for (key, value) in map {
                match key.as_str() {
                    "$ref" => {
                        let target = value.as_str().unwrap_or_default();
                        let name = target.strip_prefix(V3_PREFIX).unwrap_or(target);
                        out.insert(key.clone(), json!(format!("{V2_PREFIX}{name}")));
                    }
                    // A described reference: v2 keeps the description beside the `$ref`.
                    "allOf" if value.as_array().is_some_and(|a| a.len() == 1) => {
                        if let Value::Object(inner) = schema_v2(&value[0]) {
                            out.extend(inner);
                        }
                    }
                    "oneOf" | "anyOf" | "not" | "nullable" => {}
                    "properties" | "patternProperties" | "definitions" => {
                        let converted = value
                            .as_object()
                            .map(|m| {
                                m.iter()
                                    .map(|(k, v)| (k.clone(), schema_v2(v)))
                                    .collect::<Map<String, Value>>()
                            })
                            .unwrap_or_default();
                        out.insert(key.clone(), Value::Object(converted));
                    }
                    "items" | "additionalProperties" if value.is_object() => {
                        out.insert(key.clone(), schema_v2(value));
                    }
                    _ => {
                        out.insert(key.clone(), value.clone());
                    }
                }
            }
            // int-or-string and quantities are strings to OpenAPI 2.
            if map.contains_key("oneOf") && !out.contains_key("type") {
                out.insert("type".into(), json!("string"));
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}
