//! A CustomResourceDefinition as the API server reads it: its names, scope and versions
//! ([`Definition`]), Kubernetes' validation of a definition (names, group, scope, exactly one
//! storage version, structural schemas) and the status the server writes (the NamesAccepted and
//! Established conditions, accepted names, stored versions).

use serde_json::{json, Map, Value};

use api::names::{is_dns1035_label, is_dns1123_subdomain};

use super::schema::Schema;
use crate::validation::Cause;

/// The parts of a CRD's `spec` that serving its objects needs.
#[derive(Debug, Clone)]
pub struct Definition {
    pub name: String,
    pub group: String,
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub list_kind: String,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub namespaced: bool,
    pub versions: Vec<Version>,
}

/// One entry of `spec.versions`.
#[derive(Debug, Clone)]
pub struct Version {
    pub name: String,
    pub served: bool,
    pub storage: bool,
    pub schema: Option<Schema>,
    /// The `openAPIV3Schema` as written, published in `/openapi/v3` (what `kubectl explain`
    /// reads).
    pub published_schema: Option<Value>,
    pub status: bool,
    pub scale: Option<ScalePaths>,
    pub columns: Vec<PrinterColumn>,
}

/// `subresources.scale`: where the replica counts and the selector live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalePaths {
    pub spec_replicas: String,
    pub status_replicas: String,
    pub label_selector: Option<String>,
}

/// One `additionalPrinterColumns` entry.
#[derive(Debug, Clone)]
pub struct PrinterColumn {
    pub name: String,
    pub ty: String,
    pub format: String,
    pub description: String,
    pub priority: i64,
    pub json_path: String,
}

fn text(value: &Value, pointer: &str) -> String {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

fn texts(value: &Value, pointer: &str) -> Vec<String> {
    value
        .pointer(pointer)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

impl Definition {
    /// Reads a stored (valid, defaulted) CRD.
    pub fn parse(crd: &Value) -> Definition {
        let versions = crd
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .map(|vs| vs.iter().map(Version::parse).collect())
            .unwrap_or_default();
        let kind = text(crd, "/spec/names/kind");
        let list_kind = match text(crd, "/spec/names/listKind") {
            k if k.is_empty() => format!("{kind}List"),
            k => k,
        };
        let singular = match text(crd, "/spec/names/singular") {
            s if s.is_empty() => kind.to_lowercase(),
            s => s,
        };
        Definition {
            name: text(crd, "/metadata/name"),
            group: text(crd, "/spec/group"),
            plural: text(crd, "/spec/names/plural"),
            singular,
            kind,
            list_kind,
            short_names: texts(crd, "/spec/names/shortNames"),
            categories: texts(crd, "/spec/names/categories"),
            namespaced: text(crd, "/spec/scope") == "Namespaced",
            versions,
        }
    }

    pub fn storage_version(&self) -> Option<&Version> {
        self.versions.iter().find(|v| v.storage)
    }
}

impl Version {
    fn parse(version: &Value) -> Version {
        let scale = version.pointer("/subresources/scale").map(|s| ScalePaths {
            spec_replicas: text(s, "/specReplicasPath"),
            status_replicas: text(s, "/statusReplicasPath"),
            label_selector: Some(text(s, "/labelSelectorPath")).filter(|p| !p.is_empty()),
        });
        let columns = version
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .map(|cs| {
                cs.iter()
                    .map(|c| PrinterColumn {
                        name: text(c, "/name"),
                        ty: text(c, "/type"),
                        format: text(c, "/format"),
                        description: text(c, "/description"),
                        priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                        json_path: text(c, "/jsonPath"),
                    })
                    .collect()
            })
            .unwrap_or_default();
        Version {
            name: text(version, "/name"),
            served: version.get("served").and_then(Value::as_bool) == Some(true),
            storage: version.get("storage").and_then(Value::as_bool) == Some(true),
            schema: version
                .pointer("/schema/openAPIV3Schema")
                .and_then(Schema::parse),
            published_schema: version.pointer("/schema/openAPIV3Schema").cloned(),
            status: version.pointer("/subresources/status").is_some(),
            scale,
            columns,
        }
    }
}

/// Kubernetes' defaults for a CRD: singular and listKind from the kind, conversion `None`.
pub fn apply_defaults(crd: &mut Value) {
    let kind = text(crd, "/spec/names/kind");
    if let Some(names) = crd
        .pointer_mut("/spec/names")
        .and_then(Value::as_object_mut)
    {
        if names
            .get("singular")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
            && !kind.is_empty()
        {
            names.insert("singular".into(), json!(kind.to_lowercase()));
        }
        if names
            .get("listKind")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
            && !kind.is_empty()
        {
            names.insert("listKind".into(), json!(format!("{kind}List")));
        }
    }
    if let Some(spec) = crd.get_mut("spec").and_then(Value::as_object_mut) {
        spec.entry("conversion")
            .or_insert_with(|| json!({"strategy": "None"}));
    }
    if let Some(versions) = crd
        .pointer_mut("/spec/versions")
        .and_then(Value::as_array_mut)
    {
        for schema in versions
            .iter_mut()
            .filter_map(|v| v.pointer_mut("/schema/openAPIV3Schema"))
        {
            whole_bounds(schema);
        }
    }
}

/// Bounds decoded as floats (`minimum: 0` reads back as `0.0`) written as Go writes a whole
/// float64: `0`.
fn whole_bounds(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                let bound = matches!(key.as_str(), "minimum" | "maximum" | "multipleOf");
                match value.as_f64() {
                    Some(f) if bound && f.fract() == 0.0 && f.abs() < 1e15 => {
                        *value = json!(f as i64)
                    }
                    _ => whole_bounds(value),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(whole_bounds),
        _ => {}
    }
}

fn cause(reason: &str, field: &str, message: String) -> Cause {
    Cause {
        reason: reason.into(),
        message,
        field: field.into(),
    }
}

fn required(field: &str, detail: &str) -> Cause {
    let message = if detail.is_empty() {
        "Required value".to_string()
    } else {
        format!("Required value: {detail}")
    };
    cause("FieldValueRequired", field, message)
}

fn invalid(field: &str, value: &str, detail: &str) -> Cause {
    cause(
        "FieldValueInvalid",
        field,
        format!("Invalid value: {value:?}: {detail}"),
    )
}

fn forbidden(field: &str, detail: &str) -> Cause {
    cause("FieldValueForbidden", field, format!("Forbidden: {detail}"))
}

fn not_supported(field: &str, value: &str, supported: &[&str]) -> Cause {
    let listed: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
    cause(
        "FieldValueNotSupported",
        field,
        format!(
            "Unsupported value: {value:?}: supported values: {}",
            listed.join(", ")
        ),
    )
}

/// Validates a CRD (after defaulting) as kube-apiserver's apiextensions validation does.
/// `builtin_groups` are the groups kemu's own resources use, which no CRD may claim.
pub fn validate(crd: &Value, builtin_groups: &[&str]) -> Vec<Cause> {
    let mut out = Vec::new();
    let group = text(crd, "/spec/group");
    let plural = text(crd, "/spec/names/plural");
    let name = text(crd, "/metadata/name");
    if !plural.is_empty() && !group.is_empty() && name != format!("{plural}.{group}") {
        out.push(invalid(
            "metadata.name",
            &name,
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    if group.is_empty() {
        out.push(required("spec.group", ""));
    } else {
        for problem in is_dns1123_subdomain(&group) {
            out.push(invalid("spec.group", &group, &problem));
        }
        if group.split('.').count() < 2 {
            out.push(invalid(
                "spec.group",
                &group,
                "should be a domain with at least one dot",
            ));
        }
        if builtin_groups.contains(&group.as_str()) {
            out.push(invalid(
                "spec.group",
                &group,
                "is served by the API server's built-in resources",
            ));
        }
    }
    match text(crd, "/spec/scope").as_str() {
        "Cluster" | "Namespaced" => {}
        "" => out.push(required("spec.scope", "")),
        other => out.push(not_supported(
            "spec.scope",
            other,
            &["Cluster", "Namespaced"],
        )),
    }
    validate_names(crd, &mut out);
    validate_versions(crd, &mut out);
    out
}

fn validate_names(crd: &Value, out: &mut Vec<Cause>) {
    let label = |field: &str, value: &str, out: &mut Vec<Cause>| {
        for problem in is_dns1035_label(value) {
            out.push(invalid(field, value, &problem));
        }
    };
    let plural = text(crd, "/spec/names/plural");
    if plural.is_empty() {
        out.push(required("spec.names.plural", ""));
    } else {
        label("spec.names.plural", &plural, out);
    }
    let singular = text(crd, "/spec/names/singular");
    if !singular.is_empty() {
        label("spec.names.singular", &singular, out);
    }
    let kind = text(crd, "/spec/names/kind");
    if kind.is_empty() {
        out.push(required("spec.names.kind", ""));
    } else {
        for problem in is_dns1035_label(&kind.to_lowercase()) {
            out.push(invalid("spec.names.kind", &kind, &problem));
        }
    }
    let list_kind = text(crd, "/spec/names/listKind");
    if list_kind.is_empty() {
        out.push(required("spec.names.listKind", ""));
    } else {
        for problem in is_dns1035_label(&list_kind.to_lowercase()) {
            out.push(invalid("spec.names.listKind", &list_kind, &problem));
        }
        if list_kind == kind {
            out.push(invalid(
                "spec.names.listKind",
                &list_kind,
                "kind and listKind may not be the same or parsing will fail",
            ));
        }
    }
    for (i, short) in texts(crd, "/spec/names/shortNames").iter().enumerate() {
        label(&format!("spec.names.shortNames[{i}]"), short, out);
    }
    for (i, category) in texts(crd, "/spec/names/categories").iter().enumerate() {
        label(&format!("spec.names.categories[{i}]"), category, out);
    }
}

fn validate_versions(crd: &Value, out: &mut Vec<Cause>) {
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if versions.is_empty() {
        out.push(required(
            "spec.versions",
            "must have exactly one version marked as storage version",
        ));
        return;
    }
    let storage = versions
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .count();
    if storage != 1 {
        out.push(cause(
            "FieldValueInvalid",
            "spec.versions",
            format!(
                "Invalid value: {}: must have exactly one version marked as storage version",
                go_versions(&versions)
            ),
        ));
    }
    let mut seen: Vec<String> = Vec::new();
    for (i, version) in versions.iter().enumerate() {
        let path = format!("spec.versions[{i}]");
        let name = text(version, "/name");
        if name.is_empty() {
            out.push(required(&format!("{path}.name"), ""));
        } else {
            for problem in is_dns1035_label(&name) {
                out.push(invalid(&format!("{path}.name"), &name, &problem));
            }
            if seen.contains(&name) {
                out.push(invalid(&format!("{path}.name"), &name, "must be unique"));
            }
            seen.push(name.clone());
        }
        match version.pointer("/schema/openAPIV3Schema") {
            Some(schema) => {
                // A schema every version shares is kube-apiserver's top-level validation (its
                // conversion hoists it there), checked once and named by that path.
                let shared = versions
                    .iter()
                    .all(|v| v.pointer("/schema/openAPIV3Schema") == Some(schema));
                let schema_path = if shared {
                    "spec.validation.openAPIV3Schema".to_string()
                } else {
                    format!("{path}.schema.openAPIV3Schema")
                };
                if !shared || i == 0 {
                    let before = out.len();
                    structural(schema, &schema_path, true, out);
                    // Rules are compiled only against a sound schema, as kube-apiserver does.
                    if out.len() == before {
                        if let Some(parsed) = Schema::parse(schema) {
                            out.extend(super::cel::check::check_schema(&parsed, &schema_path));
                        }
                    }
                }
            }
            None => out.push(required(
                &format!("{path}.schema.openAPIV3Schema"),
                "schemas are required",
            )),
        }
        if let Some(scale) = version.pointer("/subresources/scale") {
            let scale_path = format!("{path}.subresources.scale");
            for (field, needed) in [("specReplicasPath", true), ("statusReplicasPath", true)] {
                let value = text(scale, &format!("/{field}"));
                if value.is_empty() && needed {
                    out.push(required(&format!("{scale_path}.{field}"), ""));
                } else if !value.starts_with('.') {
                    out.push(invalid(
                        &format!("{scale_path}.{field}"),
                        &value,
                        "should be a json path under .spec",
                    ));
                }
            }
        }
        if let Some(columns) = version
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
        {
            for (c, column) in columns.iter().enumerate() {
                let column_path = format!("{path}.additionalPrinterColumns[{c}]");
                if text(column, "/name").is_empty() {
                    out.push(required(&format!("{column_path}.name"), ""));
                }
                let ty = text(column, "/type");
                const TYPES: &[&str] = &["integer", "number", "string", "boolean", "date"];
                if ty.is_empty() {
                    out.push(required(&format!("{column_path}.type"), ""));
                } else if !TYPES.contains(&ty.as_str()) {
                    out.push(not_supported(&format!("{column_path}.type"), &ty, TYPES));
                }
                if text(column, "/jsonPath").is_empty() {
                    out.push(required(&format!("{column_path}.jsonPath"), ""));
                }
            }
        }
    }
}

/// Go's `%v` of the versions list is long; Kubernetes prints the slice, kemu its JSON.
fn go_versions(versions: &[Value]) -> String {
    Value::Array(versions.to_vec()).to_string()
}

/// The structural-schema rules: every field has a type (unless int-or-string or preserving
/// unknown fields), arrays have items, the root is an object whose metadata names only name and
/// generateName, and the `x-kubernetes-*` extensions are used where they make sense.
fn structural(schema: &Value, path: &str, root: bool, out: &mut Vec<Cause>) {
    let Some(map) = schema.as_object() else {
        return;
    };
    let ty = map.get("type").and_then(Value::as_str).unwrap_or("");
    let flag = |name: &str| map.get(name).and_then(Value::as_bool) == Some(true);
    let int_or_string = flag("x-kubernetes-int-or-string");
    if root {
        if ty.is_empty() {
            out.push(required(
                &format!("{path}.type"),
                "must not be empty at the root",
            ));
        } else if ty != "object" {
            out.push(invalid(
                &format!("{path}.type"),
                ty,
                "must be object at the root",
            ));
        }
        if let Some(metadata) = map.get("properties").and_then(|p| p.get("metadata")) {
            let only_names = metadata
                .get("properties")
                .and_then(Value::as_object)
                .is_none_or(|p| p.keys().all(|k| k == "name" || k == "generateName"));
            let extra = metadata.as_object().is_some_and(|m| {
                m.keys()
                    .any(|k| !matches!(k.as_str(), "type" | "properties"))
            });
            if !only_names || extra {
                out.push(forbidden(
                    &format!("{path}.properties[metadata]"),
                    "must not specify anything other than name and generateName, but metadata is implicitly specified",
                ));
            }
        }
    }
    if int_or_string && !ty.is_empty() {
        out.push(invalid(
            &format!("{path}.type"),
            ty,
            "must be empty if x-kubernetes-int-or-string is true",
        ));
    }
    if flag("x-kubernetes-embedded-resource") && ty != "object" {
        out.push(required(
            &format!("{path}.type"),
            "must be object if x-kubernetes-embedded-resource is true",
        ));
    }
    if let Some(list_type) = map.get("x-kubernetes-list-type").and_then(Value::as_str) {
        if !matches!(list_type, "atomic" | "set" | "map") {
            out.push(not_supported(
                &format!("{path}.x-kubernetes-list-type"),
                list_type,
                &["atomic", "set", "map"],
            ));
        } else if ty != "array" {
            out.push(invalid(
                &format!("{path}.type"),
                ty,
                "must be array if x-kubernetes-list-type is specified",
            ));
        }
        let keys = map
            .get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)
            .is_some_and(|k| !k.is_empty());
        if list_type == "map" && !keys {
            out.push(required(
                &format!("{path}.x-kubernetes-list-map-keys"),
                "must not be empty if x-kubernetes-list-type is map",
            ));
        }
    }
    if map.contains_key("properties") && map.contains_key("additionalProperties") {
        out.push(forbidden(
            &format!("{path}.additionalProperties"),
            "additionalProperties and properties are mutual exclusive",
        ));
    }
    if let Some(properties) = map.get("properties").and_then(Value::as_object) {
        for (name, child) in properties {
            let child_path = format!("{path}.properties[{name}]");
            if root && name == "metadata" {
                continue;
            }
            check_type(
                child,
                &child_path,
                "must not be empty for specified object fields",
                out,
            );
            structural(child, &child_path, false, out);
        }
    }
    if let Some(Value::Object(_)) = map.get("additionalProperties") {
        let child_path = format!("{path}.additionalProperties");
        if let Some(child) = map.get("additionalProperties") {
            check_type(
                child,
                &child_path,
                "must not be empty for specified object fields",
                out,
            );
            structural(child, &child_path, false, out);
        }
    }
    if ty == "array" {
        match map.get("items") {
            Some(items) => {
                let child_path = format!("{path}.items");
                check_type(
                    items,
                    &child_path,
                    "must not be empty for specified array items",
                    out,
                );
                structural(items, &child_path, false, out);
            }
            None => out.push(required(&format!("{path}.items"), "must be specified")),
        }
    }
}

fn check_type(schema: &Value, path: &str, detail: &str, out: &mut Vec<Cause>) {
    let flag = |name: &str| schema.get(name).and_then(Value::as_bool) == Some(true);
    let ty = schema.get("type").and_then(Value::as_str).unwrap_or("");
    if ty.is_empty()
        && !flag("x-kubernetes-int-or-string")
        && !flag("x-kubernetes-preserve-unknown-fields")
    {
        out.push(required(&format!("{path}.type"), detail));
    }
}

/// Writes the status the server owns: accepted names and the NamesAccepted and Established
/// conditions (names conflicting with another definition of the group are not accepted), and
/// the storage version among the stored versions. `others` are the group's other CRDs.
pub fn set_status(crd: &mut Value, others: &[Definition], now: &str) {
    let this = Definition::parse(crd);
    let conflict = others.iter().find_map(|other| {
        if other.name == this.name || other.group != this.group {
            return None;
        }
        let theirs: Vec<&str> = [&other.plural, &other.singular]
            .into_iter()
            .chain(other.short_names.iter())
            .map(String::as_str)
            .collect();
        if theirs.contains(&this.plural.as_str()) {
            Some((
                "PluralConflict",
                format!("{:?} is already in use", this.plural),
            ))
        } else if this
            .short_names
            .iter()
            .any(|s| theirs.contains(&s.as_str()))
        {
            Some((
                "ShortNamesConflict",
                "one of the short names is already in use".to_string(),
            ))
        } else if other.kind == this.kind || other.list_kind == this.list_kind {
            Some(("KindConflict", format!("{:?} is already in use", this.kind)))
        } else {
            None
        }
    });
    let mut status = crd
        .get("status")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let (accepted, established) = match &conflict {
        None => {
            status.insert("acceptedNames".into(), crd["spec"]["names"].clone());
            (
                ("True", "NoConflicts", "no conflicts found".to_string()),
                (
                    "True",
                    "InitialNamesAccepted",
                    "the initial names have been accepted".to_string(),
                ),
            )
        }
        Some((reason, message)) => {
            status
                .entry("acceptedNames")
                .or_insert_with(|| json!({"plural": "", "kind": ""}));
            (
                ("False", *reason, message.clone()),
                (
                    "False",
                    "NotAccepted",
                    "not all names are accepted".to_string(),
                ),
            )
        }
    };
    let mut conditions = status
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    set_condition(&mut conditions, "NamesAccepted", accepted, now);
    set_condition(&mut conditions, "Established", established, now);
    status.insert("conditions".into(), Value::Array(conditions));
    let mut stored: Vec<Value> = status
        .get("storedVersions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if let Some(version) = this.storage_version() {
        let version = json!(version.name);
        if !stored.contains(&version) {
            stored.push(version);
        }
    }
    status.insert("storedVersions".into(), Value::Array(stored));
    crd["status"] = Value::Object(status);
}

fn set_condition(
    conditions: &mut Vec<Value>,
    kind: &str,
    (status, reason, message): (&str, &str, String),
    now: &str,
) {
    let mut condition = Map::new();
    condition.insert("type".into(), json!(kind));
    condition.insert("status".into(), json!(status));
    condition.insert("lastTransitionTime".into(), json!(now));
    condition.insert("reason".into(), json!(reason));
    condition.insert("message".into(), json!(message));
    match conditions.iter_mut().find(|c| c["type"] == kind) {
        Some(existing) => {
            if existing["status"] == status {
                if let Some(at) = existing.get("lastTransitionTime") {
                    condition.insert("lastTransitionTime".into(), at.clone());
                }
            }
            *existing = Value::Object(condition);
        }
        None => conditions.push(Value::Object(condition)),
    }
}

/// Whether the CRD's Established condition is True.
pub fn is_established(crd: &Value) -> bool {
    crd.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Established" && c["status"] == "True")
        })
}
