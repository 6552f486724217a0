//! `/openapi/v2` in protobuf: gnostic's `openapi.v2.Document` message, which is what client-go's
//! `OpenAPISchema()` asks for (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`) and
//! kubectl reads for client-side validation of kinds whose PATCH operation takes no
//! `fieldValidation`, and for `kubectl explain --output plaintext-openapiv2`.
//!
//! The message is written from the JSON document field by field, with gnostic's field numbers;
//! vendor extensions, defaults, enums and examples are `Any` messages carrying their value as
//! YAML (JSON text, which is YAML), as gnostic's compiler writes them.

use serde_json::{Map, Value};

/// A protobuf message being written.
#[derive(Default)]
struct Message(Vec<u8>);

impl Message {
    fn varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.0.push((value as u8) | 0x80);
            value >>= 7;
        }
        self.0.push(value as u8);
    }

    fn key(&mut self, field: u32, wire_type: u8) {
        self.varint((u64::from(field) << 3) | u64::from(wire_type));
    }

    fn bytes(&mut self, field: u32, bytes: &[u8]) {
        self.key(field, 2);
        self.varint(bytes.len() as u64);
        self.0.extend_from_slice(bytes);
    }

    /// A string field; proto3 leaves out the empty string.
    fn string(&mut self, field: u32, value: Option<&Value>) {
        if let Some(s) = value.and_then(Value::as_str).filter(|s| !s.is_empty()) {
            self.bytes(field, s.as_bytes());
        }
    }

    /// A repeated string field, from a JSON string or array of strings.
    fn strings(&mut self, field: u32, value: Option<&Value>) {
        match value {
            Some(Value::String(s)) => self.bytes(field, s.as_bytes()),
            Some(Value::Array(items)) => {
                for s in items.iter().filter_map(Value::as_str) {
                    self.bytes(field, s.as_bytes());
                }
            }
            _ => {}
        }
    }

    fn boolean(&mut self, field: u32, value: Option<&Value>) {
        if value.and_then(Value::as_bool) == Some(true) {
            self.key(field, 0);
            self.varint(1);
        }
    }

    fn int64(&mut self, field: u32, value: Option<&Value>) {
        if let Some(n) = value.and_then(Value::as_i64).filter(|n| *n != 0) {
            self.key(field, 0);
            self.varint(n as u64);
        }
    }

    fn double(&mut self, field: u32, value: Option<&Value>) {
        if let Some(n) = value.and_then(Value::as_f64).filter(|n| *n != 0.0) {
            self.key(field, 1);
            self.0.extend_from_slice(&n.to_le_bytes());
        }
    }

    fn message(&mut self, field: u32, message: Message) {
        self.bytes(field, &message.0);
    }
}

/// The protobuf encoding of a Swagger 2.0 JSON document.
pub fn encode(document: &Value) -> Vec<u8> {
    let mut out = Message::default();
    out.string(1, document.get("swagger"));
    if let Some(info) = document.get("info") {
        let mut m = Message::default();
        m.string(1, info.get("title"));
        m.string(2, info.get("version"));
        out.message(2, m);
    }
    if let Some(paths) = document.get("paths").and_then(Value::as_object) {
        let mut m = Message::default();
        for (path, item) in paths {
            m.message(2, named(path, path_item(item)));
        }
        out.message(8, m);
    }
    if let Some(definitions) = document.get("definitions").and_then(Value::as_object) {
        out.message(9, named_schemas(definitions));
    }
    for requirement in document
        .get("security")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
    {
        let mut m = Message::default();
        for (name, scopes) in requirement {
            let mut array = Message::default();
            array.strings(1, Some(scopes));
            m.message(1, named(name, array));
        }
        out.message(12, m);
    }
    if let Some(definitions) = document
        .get("securityDefinitions")
        .and_then(Value::as_object)
    {
        let mut m = Message::default();
        for (name, definition) in definitions {
            // Only API keys (kube-apiserver's bearer token) are published.
            let mut key = Message::default();
            key.string(1, definition.get("type"));
            key.string(2, definition.get("name"));
            key.string(3, definition.get("in"));
            key.string(4, definition.get("description"));
            let mut item = Message::default();
            item.message(2, key);
            m.message(1, named(name, item));
        }
        out.message(13, m);
    }
    out.0
}

/// A `Named…` pair: `name = 1`, `value = 2`.
fn named(name: &str, value: Message) -> Message {
    let mut m = Message::default();
    m.bytes(1, name.as_bytes());
    m.message(2, value);
    m
}

/// `Definitions` and `Properties`: repeated `NamedSchema additional_properties = 1`.
fn named_schemas(schemas: &Map<String, Value>) -> Message {
    let mut m = Message::default();
    for (name, value) in schemas {
        m.message(1, named(name, schema(value)));
    }
    m
}

/// `Any`, its value as YAML text (`yaml = 2`).
fn any(value: &Value) -> Message {
    let mut m = Message::default();
    m.bytes(2, value.to_string().as_bytes());
    m
}

fn vendor_extensions(m: &mut Message, field: u32, map: &Map<String, Value>) {
    for (name, value) in map.iter().filter(|(k, _)| k.starts_with("x-")) {
        m.message(field, named(name, any(value)));
    }
}

fn schema(value: &Value) -> Message {
    let mut m = Message::default();
    let Some(s) = value.as_object() else {
        return m;
    };
    m.string(1, s.get("$ref"));
    m.string(2, s.get("format"));
    m.string(3, s.get("title"));
    m.string(4, s.get("description"));
    if let Some(default) = s.get("default") {
        m.message(5, any(default));
    }
    m.double(6, s.get("multipleOf"));
    m.double(7, s.get("maximum"));
    m.boolean(8, s.get("exclusiveMaximum"));
    m.double(9, s.get("minimum"));
    m.boolean(10, s.get("exclusiveMinimum"));
    m.int64(11, s.get("maxLength"));
    m.int64(12, s.get("minLength"));
    m.string(13, s.get("pattern"));
    m.int64(14, s.get("maxItems"));
    m.int64(15, s.get("minItems"));
    m.boolean(16, s.get("uniqueItems"));
    m.int64(17, s.get("maxProperties"));
    m.int64(18, s.get("minProperties"));
    m.strings(19, s.get("required"));
    for value in s
        .get("enum")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        m.message(20, any(value));
    }
    match s.get("additionalProperties") {
        Some(Value::Bool(allowed)) => {
            let mut item = Message::default();
            item.key(2, 0);
            item.varint(u64::from(*allowed));
            m.message(21, item);
        }
        Some(additional @ Value::Object(_)) => {
            let mut item = Message::default();
            item.message(1, schema(additional));
            m.message(21, item);
        }
        _ => {}
    }
    if let Some(types) = s.get("type") {
        let mut item = Message::default();
        item.strings(1, Some(types));
        m.message(22, item);
    }
    match s.get("items") {
        Some(Value::Array(items)) => {
            let mut item = Message::default();
            for i in items {
                item.message(1, schema(i));
            }
            m.message(23, item);
        }
        Some(items @ Value::Object(_)) => {
            let mut item = Message::default();
            item.message(1, schema(items));
            m.message(23, item);
        }
        _ => {}
    }
    for member in s
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        m.message(24, schema(member));
    }
    if let Some(properties) = s.get("properties").and_then(Value::as_object) {
        m.message(25, named_schemas(properties));
    }
    m.boolean(27, s.get("readOnly"));
    if let Some(example) = s.get("example") {
        m.message(30, any(example));
    }
    vendor_extensions(&mut m, 31, s);
    m
}

fn path_item(item: &Value) -> Message {
    let mut m = Message::default();
    let Some(item) = item.as_object() else {
        return m;
    };
    for (verb, field) in [
        ("get", 2),
        ("put", 3),
        ("post", 4),
        ("delete", 5),
        ("patch", 8),
    ] {
        if let Some(op) = item.get(verb) {
            m.message(field, operation(op));
        }
    }
    for p in item
        .get("parameters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        m.message(9, parameter(p));
    }
    vendor_extensions(&mut m, 10, item);
    m
}

fn operation(op: &Value) -> Message {
    let mut m = Message::default();
    let Some(op) = op.as_object() else {
        return m;
    };
    m.strings(1, op.get("tags"));
    m.string(3, op.get("description"));
    m.string(5, op.get("operationId"));
    m.strings(6, op.get("produces"));
    m.strings(7, op.get("consumes"));
    for p in op
        .get("parameters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        m.message(8, parameter(p));
    }
    if let Some(responses) = op.get("responses").and_then(Value::as_object) {
        let mut r = Message::default();
        for (code, response) in responses {
            let mut body = Message::default();
            body.string(1, response.get("description"));
            if let Some(s) = response.get("schema") {
                let mut item = Message::default();
                item.message(1, schema(s));
                body.message(2, item);
            }
            let mut value = Message::default();
            value.message(1, body);
            r.message(1, named(code, value));
        }
        m.message(9, r);
    }
    m.strings(10, op.get("schemes"));
    vendor_extensions(&mut m, 13, op);
    m
}

/// `ParametersItem { Parameter parameter = 1 }`: a body parameter, or a query or path one.
fn parameter(p: &Value) -> Message {
    let mut parameter = Message::default();
    match p.get("in").and_then(Value::as_str) {
        Some("body") => {
            let mut body = Message::default();
            body.string(1, p.get("description"));
            body.string(2, p.get("name"));
            body.string(3, p.get("in"));
            body.boolean(4, p.get("required"));
            if let Some(s) = p.get("schema") {
                body.message(5, schema(s));
            }
            parameter.message(1, body);
        }
        Some(location @ ("query" | "path")) => {
            let mut sub = Message::default();
            sub.boolean(1, p.get("required"));
            sub.string(2, p.get("in"));
            sub.string(3, p.get("description"));
            sub.string(4, p.get("name"));
            // Query parameters have `allowEmptyValue` at 5, shifting the rest by one.
            let (type_field, unique_field, variant) = match location {
                "query" => (6, 20, 3),
                _ => (5, 19, 4),
            };
            sub.string(type_field, p.get("type"));
            sub.boolean(unique_field, p.get("uniqueItems"));
            let mut non_body = Message::default();
            non_body.message(variant, sub);
            parameter.message(2, non_body);
        }
        _ => {}
    }
    let mut item = Message::default();
    item.message(1, parameter);
    item
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_are_gnostics() {
        let doc = json!({"swagger": "2.0", "definitions": {"A": {"type": "string", "x-k": true}}});
        let bytes = encode(&doc);
        // swagger = 1: "2.0".
        assert_eq!(&bytes[..5], &[0x0a, 3, b'2', b'.', b'0']);
        // definitions = 9 (key 0x4a) holding NamedSchema "A" with type = 22 (key 0xb2 0x01).
        assert_eq!(bytes[5], 0x4a);
        let rest = &bytes[7..];
        assert_eq!(rest[0], 0x0a); // additional_properties = 1
        assert!(rest.windows(2).any(|w| w == [0xb2, 0x01]));
        // The extension's value as YAML text.
        assert!(rest.windows(4).any(|w| w == b"true"));
    }
}
