//! A CustomResourceDefinition version's `openAPIV3Schema` applied to custom objects, in the order
//! kube-apiserver applies it: unknown fields are pruned, defaults filled in, then the object is
//! validated with kube-openapi's messages (`spec.replicas in body must be of type integer:
//! "string"`) and Kubernetes' field paths.
//!
//! The schema is parsed once per served version into [`Schema`]; the walks below take the object
//! as `serde_json::Value`. `x-kubernetes-validations` (CEL) rules are compiled and evaluated
//! by [`super::cel`].

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::validation::Cause;

/// One node of a structural schema.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Schema {
    #[serde(rename = "type")]
    pub ty: Option<String>,
    pub format: Option<String>,
    pub description: Option<String>,
    pub properties: BTreeMap<String, Schema>,
    pub required: Vec<String>,
    pub items: Option<Box<Schema>>,
    pub additional_properties: Option<AdditionalProperties>,
    #[serde(rename = "enum")]
    pub enumeration: Option<Vec<Value>>,
    pub minimum: Option<f64>,
    pub maximum: Option<f64>,
    pub exclusive_minimum: bool,
    pub exclusive_maximum: bool,
    pub multiple_of: Option<f64>,
    pub min_length: Option<u64>,
    pub max_length: Option<u64>,
    pub pattern: Option<String>,
    pub min_items: Option<u64>,
    pub max_items: Option<u64>,
    pub min_properties: Option<u64>,
    pub max_properties: Option<u64>,
    pub nullable: bool,
    pub default: Option<Value>,
    pub all_of: Vec<Schema>,
    pub any_of: Vec<Schema>,
    pub one_of: Vec<Schema>,
    pub not: Option<Box<Schema>>,
    #[serde(rename = "x-kubernetes-preserve-unknown-fields")]
    pub preserve_unknown_fields: bool,
    #[serde(rename = "x-kubernetes-embedded-resource")]
    pub embedded_resource: bool,
    #[serde(rename = "x-kubernetes-int-or-string")]
    pub int_or_string: bool,
    #[serde(rename = "x-kubernetes-list-type")]
    pub list_type: Option<String>,
    #[serde(rename = "x-kubernetes-list-map-keys")]
    pub list_map_keys: Vec<String>,
    #[serde(rename = "x-kubernetes-validations")]
    pub validations: Vec<ValidationRule>,
}

/// `additionalProperties`: a schema for every value of a map, or a boolean.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum AdditionalProperties {
    Allowed(bool),
    Schema(Box<Schema>),
}

/// One `x-kubernetes-validations` entry.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ValidationRule {
    pub rule: String,
    pub message: Option<String>,
    pub message_expression: Option<String>,
    pub field_path: Option<String>,
    pub reason: Option<String>,
    /// Whether a transition rule also runs without an old value (`oldSelf` then an optional).
    pub optional_old_self: Option<bool>,
}

/// The ObjectMeta fields kept when an object's `metadata` is pruned.
const OBJECT_META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

impl Schema {
    /// Parses a schema document (`openAPIV3Schema`); `None` when it is not one.
    pub fn parse(value: &Value) -> Option<Schema> {
        serde_json::from_value(value.clone()).ok()
    }

    pub(crate) fn additional(&self) -> Option<&Schema> {
        match &self.additional_properties {
            Some(AdditionalProperties::Schema(s)) => Some(s),
            _ => None,
        }
    }

    /// Removes the fields the schema does not specify (Kubernetes' pruning) and returns their
    /// paths (`spec.foo`), which `fieldValidation=Strict` reports. `object` is a whole object:
    /// its apiVersion, kind and metadata are kept.
    pub fn prune_object(&self, object: &mut Value) -> Vec<String> {
        let mut pruned = Vec::new();
        self.prune_resource(object, "", &mut pruned);
        pruned.sort();
        pruned
    }

    /// An object with TypeMeta and ObjectMeta (the root, or an embedded resource).
    fn prune_resource(&self, object: &mut Value, path: &str, pruned: &mut Vec<String>) {
        let Value::Object(map) = object else {
            return;
        };
        if let Some(Value::Object(metadata)) = map.get_mut("metadata") {
            let unknown: Vec<String> = metadata
                .keys()
                .filter(|k| !OBJECT_META_FIELDS.contains(&k.as_str()))
                .cloned()
                .collect();
            for key in unknown {
                metadata.remove(&key);
                pruned.push(join(&join(path, "metadata"), &key));
            }
        }
        self.prune_map(map, path, &["apiVersion", "kind", "metadata"], pruned);
    }

    fn prune_map(
        &self,
        map: &mut Map<String, Value>,
        path: &str,
        keep: &[&str],
        pruned: &mut Vec<String>,
    ) {
        if let Some(additional) = self.additional() {
            for (key, value) in map.iter_mut() {
                additional.prune(value, &join(path, key), pruned);
            }
            return;
        }
        let preserve = self.preserve_unknown_fields
            || matches!(
                self.additional_properties,
                Some(AdditionalProperties::Allowed(true))
            );
        let unknown: Vec<String> = map
            .keys()
            .filter(|k| !self.properties.contains_key(*k) && !keep.contains(&k.as_str()))
            .cloned()
            .collect();
        if !preserve {
            for key in unknown {
                map.remove(&key);
                pruned.push(join(path, &key));
            }
        }
        for (key, schema) in &self.properties {
            if let Some(value) = map.get_mut(key) {
                schema.prune(value, &join(path, key), pruned);
            }
        }
    }

    fn prune(&self, value: &mut Value, path: &str, pruned: &mut Vec<String>) {
        match value {
            Value::Object(map) if self.embedded_resource => {
                if let Some(Value::Object(metadata)) = map.get_mut("metadata") {
                    metadata.retain(|k, _| OBJECT_META_FIELDS.contains(&k.as_str()));
                }
                self.prune_map(map, path, &["apiVersion", "kind", "metadata"], pruned)
            }
            Value::Object(map) => self.prune_map(map, path, &[], pruned),
            Value::Array(items) => {
                if let Some(schema) = &self.items {
                    for (i, item) in items.iter_mut().enumerate() {
                        schema.prune(item, &format!("{path}[{i}]"), pruned);
                    }
                }
            }
            _ => {}
        }
    }

    /// Fills in `default`s of absent fields (and of nulls where the field is not nullable),
    /// throughout the object.
    pub fn apply_defaults(&self, value: &mut Value) {
        match value {
            Value::Object(map) => {
                for (key, schema) in &self.properties {
                    let absent = match map.get(key) {
                        None => true,
                        Some(Value::Null) => !schema.nullable,
                        Some(_) => false,
                    };
                    if let (true, Some(default)) = (absent, &schema.default) {
                        map.insert(key.clone(), default.clone());
                    }
                    if let Some(child) = map.get_mut(key) {
                        schema.apply_defaults(child);
                    }
                }
                if let Some(additional) = self.additional() {
                    for child in map.values_mut() {
                        additional.apply_defaults(child);
                    }
                }
            }
            Value::Array(items) => {
                if let Some(schema) = &self.items {
                    for item in items.iter_mut() {
                        schema.apply_defaults(item);
                    }
                }
            }
            _ => {}
        }
    }

    /// Validates a whole object: everything but apiVersion, kind and metadata against the
    /// schema (metadata is ObjectMeta, checked with every kind's).
    pub fn validate_object(&self, object: &Value) -> Vec<Cause> {
        let mut out = Vec::new();
        let Value::Object(map) = object else {
            return out;
        };
        for name in &self.required {
            if !map.contains_key(name) {
                out.push(required(name));
            }
        }
        for (key, value) in map {
            if matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            if let Some(schema) = self.properties.get(key) {
                schema.validate(value, key, &mut out);
            } else if let Some(additional) = self.additional() {
                additional.validate(value, key, &mut out);
            }
        }
        out
    }

    /// Validates `value` found at `path`.
    pub fn validate(&self, value: &Value, path: &str, out: &mut Vec<Cause>) {
        if value.is_null() {
            if !self.nullable && !self.preserve_unknown_fields && self.ty.is_some() {
                out.push(type_error(path, self.ty.as_deref().unwrap_or(""), value));
            }
            return;
        }
        if self.int_or_string {
            if !(is_integer(value) || value.is_string()) {
                out.push(type_error(path, "integer,string", value));
                return;
            }
        } else if let Some(ty) = self.ty.as_deref() {
            if !has_type(value, ty) {
                out.push(type_error(path, ty, value));
                return;
            }
        }
        if let Some(allowed) = &self.enumeration {
            if !allowed.contains(value) {
                out.push(not_supported(path, value, allowed));
            }
        }
        match value {
            Value::Number(n) => self.validate_number(n.as_f64().unwrap_or(0.0), value, path, out),
            Value::String(s) => self.validate_string(s, path, out),
            Value::Array(items) => self.validate_array(items, path, out),
            Value::Object(map) => self.validate_map(map, path, out),
            _ => {}
        }
        for schema in &self.all_of {
            schema.validate(value, path, out);
        }
        let passes = |s: &Schema| {
            let mut scratch = Vec::new();
            s.validate(value, path, &mut scratch);
            scratch.is_empty()
        };
        if !self.any_of.is_empty() && !self.any_of.iter().any(passes) {
            out.push(invalid(
                path,
                value,
                &format!("{path} in body must validate at least one schema (anyOf)"),
            ));
        }
        if !self.one_of.is_empty() && self.one_of.iter().filter(|s| passes(s)).count() != 1 {
            out.push(invalid(
                path,
                value,
                &format!("{path} in body must validate one and only one schema (oneOf)"),
            ));
        }
        if let Some(not) = &self.not {
            if passes(not) {
                out.push(invalid(
                    path,
                    value,
                    &format!("{path} in body must not validate the schema (not)"),
                ));
            }
        }
    }

    fn validate_number(&self, n: f64, value: &Value, path: &str, out: &mut Vec<Cause>) {
        if let Some(min) = self.minimum {
            if self.exclusive_minimum && n <= min {
                out.push(invalid(
                    path,
                    value,
                    &format!("{path} in body should be greater than {}", num(min)),
                ));
            } else if n < min {
                out.push(invalid(
                    path,
                    value,
                    &format!(
                        "{path} in body should be greater than or equal to {}",
                        num(min)
                    ),
                ));
            }
        }
        if let Some(max) = self.maximum {
            if self.exclusive_maximum && n >= max {
                out.push(invalid(
                    path,
                    value,
                    &format!("{path} in body should be less than {}", num(max)),
                ));
            } else if n > max {
                out.push(invalid(
                    path,
                    value,
                    &format!(
                        "{path} in body should be less than or equal to {}",
                        num(max)
                    ),
                ));
            }
        }
        if let Some(factor) = self.multiple_of.filter(|f| *f > 0.0) {
            let ratio = n / factor;
            if (ratio - ratio.round()).abs() > 1e-9 {
                out.push(invalid(
                    path,
                    value,
                    &format!("{path} in body should be a multiple of {}", num(factor)),
                ));
            }
        }
        match self.format.as_deref() {
            Some("int32")
                if is_integer(value) && (n < f64::from(i32::MIN) || n > f64::from(i32::MAX)) =>
            {
                out.push(type_error(path, "int32", value))
            }
            _ => {}
        }
    }

    fn validate_string(&self, s: &str, path: &str, out: &mut Vec<Cause>) {
        let value = Value::String(s.to_string());
        let length = s.chars().count() as u64;
        if let Some(min) = self.min_length.filter(|min| length < *min) {
            out.push(invalid(
                path,
                &value,
                &format!("{path} in body should be at least {min} chars long"),
            ));
        }
        if let Some(max) = self.max_length.filter(|max| length > *max) {
            out.push(invalid(
                path,
                &value,
                &format!("{path} in body should be at most {max} chars long"),
            ));
        }
        if let Some(pattern) = &self.pattern {
            if regex::Regex::new(pattern).is_ok_and(|re| !re.is_match(s)) {
                out.push(invalid(
                    path,
                    &value,
                    &format!("{path} in body should match '{pattern}'"),
                ));
            }
        }
        if let Some(format) = self.format.as_deref() {
            if !format_holds(format, s) {
                out.push(invalid(
                    path,
                    &value,
                    &format!("{path} in body must be of type {format}: {value}"),
                ));
            }
        }
    }

    fn validate_array(&self, items: &[Value], path: &str, out: &mut Vec<Cause>) {
        let count = items.len() as u64;
        let shown = Value::from(count);
        if let Some(min) = self.min_items.filter(|min| count < *min) {
            out.push(invalid(
                path,
                &shown,
                &format!("{path} in body should have at least {min} items"),
            ));
        }
        if let Some(max) = self.max_items.filter(|max| count > *max) {
            out.push(Cause {
                reason: "FieldValueTooMany".into(),
                message: format!("Too many: {count}: must have at most {max} items"),
                field: path.to_string(),
            });
        }
        if let Some(schema) = &self.items {
            for (i, item) in items.iter().enumerate() {
                schema.validate(item, &format!("{path}[{i}]"), out);
            }
        }
        match self.list_type.as_deref() {
            Some("set") => {
                for (i, item) in items.iter().enumerate() {
                    if items[..i].contains(item) {
                        out.push(duplicate(&format!("{path}[{i}]"), &go_value(item)));
                    }
                }
            }
            Some("map") => {
                let key_of = |item: &Value| -> Vec<Value> {
                    self.list_map_keys
                        .iter()
                        .map(|k| item.get(k).cloned().unwrap_or(Value::Null))
                        .collect()
                };
                for (i, item) in items.iter().enumerate() {
                    let key = key_of(item);
                    if items[..i].iter().any(|earlier| key_of(earlier) == key) {
                        let shown: Vec<String> = self
                            .list_map_keys
                            .iter()
                            .zip(&key)
                            .map(|(k, v)| format!("{k:?}:{}", go_value(v)))
                            .collect();
                        out.push(duplicate(
                            &format!("{path}[{i}]"),
                            &format!("map[string]interface {{}}{{{}}}", shown.join(", ")),
                        ));
                    }
                }
            }
            _ => {}
        }
    }

    fn validate_map(&self, map: &Map<String, Value>, path: &str, out: &mut Vec<Cause>) {
        let count = map.len() as u64;
        if let Some(min) = self.min_properties.filter(|min| count < *min) {
            out.push(invalid(
                path,
                &Value::from(count),
                &format!("{path} in body should have at least {min} properties"),
            ));
        }
        if let Some(max) = self.max_properties.filter(|max| count > *max) {
            out.push(invalid(
                path,
                &Value::from(count),
                &format!("{path} in body should have at most {max} properties"),
            ));
        }
        for name in &self.required {
            if !map.contains_key(name) {
                out.push(required(&join(path, name)));
            }
        }
        for (key, value) in map {
            if self.embedded_resource && matches!(key.as_str(), "apiVersion" | "kind" | "metadata")
            {
                continue;
            }
            if let Some(schema) = self.properties.get(key) {
                schema.validate(value, &join(path, key), out);
            } else if let Some(additional) = self.additional() {
                additional.validate(value, &join(path, key), out);
            }
        }
        if self.embedded_resource {
            for field in ["apiVersion", "kind"] {
                if map
                    .get(field)
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    out.push(required(&join(path, field)));
                }
            }
        }
    }

    /// The schema of the field at a dotted path (`.spec.replicas`, `spec.replicas`), following
    /// properties only.
    pub fn at(&self, path: &str) -> Option<&Schema> {
        path.trim_start_matches('.')
            .split('.')
            .filter(|p| !p.is_empty())
            .try_fold(self, |schema, part| schema.properties.get(part))
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn is_integer(value: &Value) -> bool {
    match value {
        Value::Number(n) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    }
}

fn has_type(value: &Value, ty: &str) -> bool {
    match ty {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "integer" => is_integer(value),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        _ => true,
    }
}

/// The JSON type name kube-openapi reports for a value.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) if is_integer(value) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A value as Go's `%#v`-ish field errors print it: strings quoted, numbers bare.
fn go_value(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        Value::Null => "null".into(),
        other => other.to_string(),
    }
}

/// A bound as Go's `%v` prints a float64 (`1`, `2.5`).
fn num(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        n.to_string()
    }
}

fn required(path: &str) -> Cause {
    Cause {
        reason: "FieldValueRequired".into(),
        message: "Required value".into(),
        field: path.to_string(),
    }
}

fn invalid(path: &str, value: &Value, detail: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: {}: {detail}", go_value(value)),
        field: path.to_string(),
    }
}

fn duplicate(path: &str, shown: &str) -> Cause {
    Cause {
        reason: "FieldValueDuplicate".into(),
        message: format!("Duplicate value: {shown}"),
        field: path.to_string(),
    }
}

/// `spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer:
/// "string"`.
fn type_error(path: &str, expected: &str, value: &Value) -> Cause {
    let found = type_name(value);
    Cause {
        reason: "FieldValueTypeInvalid".into(),
        message: format!(
            "Invalid value: {found:?}: {path} in body must be of type {expected}: {found:?}"
        ),
        field: path.to_string(),
    }
}

fn not_supported(path: &str, value: &Value, allowed: &[Value]) -> Cause {
    let listed: Vec<String> = allowed.iter().map(go_value).collect();
    Cause {
        reason: "FieldValueNotSupported".into(),
        message: format!(
            "Unsupported value: {}: supported values: {}",
            go_value(value),
            listed.join(", ")
        ),
        field: path.to_string(),
    }
}

/// The string formats Kubernetes checks; unknown formats pass, as there.
fn format_holds(format: &str, s: &str) -> bool {
    use base64::Engine;
    match format {
        "date-time" | "datetime" => chrono::DateTime::parse_from_rfc3339(s).is_ok(),
        "date" => chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok(),
        "byte" => base64::engine::general_purpose::STANDARD.decode(s).is_ok(),
        "uuid" => uuid::Uuid::parse_str(s).is_ok() && s.len() == 36,
        "ipv4" => s.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => s.parse::<std::net::Ipv6Addr>().is_ok(),
        "cidr" => s.split_once('/').is_some_and(|(ip, bits)| {
            ip.parse::<std::net::IpAddr>().is_ok() && bits.parse::<u8>().is_ok()
        }),
        "email" => s.split_once('@').is_some_and(|(user, host)| {
            !user.is_empty() && host.contains('.') && !host.starts_with('.')
        }),
        "hostname" => {
            !s.is_empty()
                && s.len() <= 253
                && s.split('.').all(|label| {
                    !label.is_empty()
                        && label.len() <= 63
                        && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                        && !label.starts_with('-')
                        && !label.ends_with('-')
                })
        }
        "int-or-string" => true,
        _ => true,
    }
}
