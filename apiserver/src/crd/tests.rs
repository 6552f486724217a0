//! Schema pruning, defaulting and validation, CRD validation and status, printer columns.

use serde_json::{json, Value};

use super::definition::{self, Definition};
use super::output;
use super::schema::Schema;
use super::*;

fn schema() -> Schema {
    Schema::parse(&json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["color"],
                "properties": {
                    "replicas": {"type": "integer", "minimum": 1, "maximum": 10},
                    "color": {"type": "string", "enum": ["red", "blue"]},
                    "size": {"type": "string", "default": "M"},
                    "name": {"type": "string", "minLength": 3, "maxLength": 5, "pattern": "^[a-z]+$"},
                    "when": {"type": "string", "format": "date-time"},
                    "note": {"type": "string", "nullable": true},
                    "port": {"x-kubernetes-int-or-string": true},
                    "tags": {"type": "array", "x-kubernetes-list-type": "set", "maxItems": 3,
                             "items": {"type": "string"}},
                    "ports": {"type": "array", "x-kubernetes-list-type": "map",
                              "x-kubernetes-list-map-keys": ["name"],
                              "items": {"type": "object", "properties": {
                                  "name": {"type": "string"},
                                  "protocol": {"type": "string", "default": "TCP"}}}},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                                 "properties": {"spec": {"type": "object"}}},
                }
            },
            "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
        }
    }))
    .expect("a schema")
}

fn object(spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget",
           "metadata": {"name": "w", "namespace": "default", "bogus": 1}, "spec": spec})
}

fn messages(spec: Value) -> Vec<String> {
    schema()
        .validate_object(&object(spec))
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn type_errors_read_as_kube_openapi_writes_them() {
    assert_eq!(
        messages(json!({"color": "red", "replicas": "three"})),
        [
            r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#
        ]
    );
    assert_eq!(
        messages(json!({"color": "red", "note": null, "size": null})),
        [r#"spec.size: Invalid value: "null": spec.size in body must be of type string: "null""#]
    );
    assert_eq!(
        messages(json!({"color": "red", "port": true})),
        [
            r#"spec.port: Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean""#
        ]
    );
    assert!(messages(json!({"color": "red", "port": 80})).is_empty());
    assert!(messages(json!({"color": "red", "port": "http"})).is_empty());
}

#[test]
fn value_rules_name_the_field() {
    assert_eq!(messages(json!({})), ["spec.color: Required value"]);
    assert_eq!(
        messages(json!({"color": "pink"})),
        [r#"spec.color: Unsupported value: "pink": supported values: "red", "blue""#]
    );
    assert_eq!(
        messages(json!({"color": "red", "replicas": 0})),
        ["spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1"]
    );
    assert_eq!(
        messages(json!({"color": "red", "replicas": 11})),
        ["spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10"]
    );
    assert_eq!(
        messages(json!({"color": "red", "name": "ab"})),
        [r#"spec.name: Invalid value: "ab": spec.name in body should be at least 3 chars long"#]
    );
    assert_eq!(
        messages(json!({"color": "red", "name": "abc1"})),
        [r#"spec.name: Invalid value: "abc1": spec.name in body should match '^[a-z]+$'"#]
    );
    assert_eq!(
        messages(json!({"color": "red", "when": "yesterday"})),
        [
            r#"spec.when: Invalid value: "yesterday": spec.when in body must be of type date-time: "yesterday""#
        ]
    );
    assert_eq!(
        messages(json!({"color": "red", "tags": ["a", "b", "a"]})),
        [r#"spec.tags[2]: Duplicate value: "a""#]
    );
    assert_eq!(
        messages(json!({"color": "red", "tags": ["a", "b", "c", "d"]})),
        ["spec.tags: Too many: 4: must have at most 3 items"]
    );
    assert_eq!(
        messages(json!({"color": "red", "ports": [{"name": "a"}, {"name": "a"}]})),
        [r#"spec.ports[1]: Duplicate value: map[string]interface {}{"name":"a"}"#]
    );
    assert_eq!(
        messages(json!({"color": "red", "labels": {"a": 1}})),
        [
            r#"spec.labels.a: Invalid value: "integer": spec.labels.a in body must be of type string: "integer""#
        ]
    );
    assert_eq!(
        messages(json!({"color": "red", "template": {"spec": {}}})),
        [
            "spec.template.apiVersion: Required value",
            "spec.template.kind: Required value"
        ]
    );
}

#[test]
fn pruning_keeps_what_the_schema_specifies_or_preserves() {
    let mut o = object(json!({"color": "red", "bogus": 1, "free": {"x": {"y": 1}},
        "labels": {"k": "v"}, "ports": [{"name": "a", "extra": true}],
        "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "odd": 1},
                     "spec": {}, "junk": 1}}));
    o["top"] = json!(1);
    let pruned = schema().prune_object(&mut o);
    assert_eq!(
        pruned,
        [
            "metadata.bogus",
            "spec.bogus",
            "spec.ports[0].extra",
            "spec.template.junk",
            "top"
        ]
    );
    assert_eq!(o["spec"]["free"], json!({"x": {"y": 1}}));
    assert_eq!(o["spec"]["labels"], json!({"k": "v"}));
    assert!(o["spec"]["template"]["metadata"].get("odd").is_none());
    assert_eq!(o["metadata"], json!({"name": "w", "namespace": "default"}));
}

#[test]
fn defaults_fill_absent_fields_at_every_depth() {
    let mut o =
        object(json!({"color": "red", "ports": [{"name": "a"}, {"name": "b", "protocol": "UDP"}]}));
    schema().apply_defaults(&mut o);
    assert_eq!(o["spec"]["size"], "M");
    assert_eq!(o["spec"]["ports"][0]["protocol"], "TCP");
    assert_eq!(o["spec"]["ports"][1]["protocol"], "UDP");
    let mut kept = object(json!({"color": "red", "size": "L"}));
    schema().apply_defaults(&mut kept);
    assert_eq!(kept["spec"]["size"], "L");
}

fn crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
                 "versions": [
                     {"name": "v1", "served": true, "storage": true,
                      "schema": {"openAPIV3Schema": {"type": "object"}}},
                     {"name": "v1beta1", "served": true, "storage": false,
                      "schema": {"openAPIV3Schema": {"type": "object"}}}]}
    })
}

fn crd_messages(crd: &Value) -> Vec<String> {
    definition::validate(crd, &builtin_groups())
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn definitions_are_defaulted_and_validated() {
    let mut good = crd();
    definition::apply_defaults(&mut good);
    assert_eq!(good["spec"]["names"]["singular"], "widget");
    assert_eq!(good["spec"]["names"]["listKind"], "WidgetList");
    assert_eq!(good["spec"]["conversion"], json!({"strategy": "None"}));
    assert!(crd_messages(&good).is_empty(), "{:?}", crd_messages(&good));

    let mut two = good.clone();
    two["spec"]["versions"][1]["storage"] = json!(true);
    assert!(
        crd_messages(&two)[0].ends_with("must have exactly one version marked as storage version")
    );
    let mut named = good.clone();
    named["metadata"]["name"] = json!("gizmos.example.com");
    assert_eq!(
        crd_messages(&named),
        [
            r#"metadata.name: Invalid value: "gizmos.example.com": must be spec.names.plural+"."+spec.group"#
        ]
    );
    let mut scoped = good.clone();
    scoped["spec"]["scope"] = json!("Global");
    assert_eq!(
        crd_messages(&scoped),
        [r#"spec.scope: Unsupported value: "Global": supported values: "Cluster", "Namespaced""#]
    );
    let mut dotless = good.clone();
    dotless["spec"]["group"] = json!("example");
    dotless["metadata"]["name"] = json!("widgets.example");
    assert_eq!(
        crd_messages(&dotless),
        [r#"spec.group: Invalid value: "example": should be a domain with at least one dot"#]
    );
    let mut untyped = good.clone();
    untyped["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = json!({
        "type": "object",
        "properties": {"spec": {"properties": {"list": {"type": "array"}}}}
    });
    assert_eq!(
        crd_messages(&untyped),
        [
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields",
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[list].items: Required value: must be specified",
        ]
    );
    // The same schema in every version: named once, as the top-level validation.
    let mut shared = untyped.clone();
    shared["spec"]["versions"][1]["schema"] = untyped["spec"]["versions"][0]["schema"].clone();
    assert_eq!(
        crd_messages(&shared),
        [
            "spec.validation.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields",
            "spec.validation.openAPIV3Schema.properties[spec].properties[list].items: Required value: must be specified",
        ]
    );
    let mut no_schema = good.clone();
    no_schema["spec"]["versions"][1]
        .as_object_mut()
        .map(|v| v.remove("schema"));
    assert_eq!(
        crd_messages(&no_schema),
        ["spec.versions[1].schema.openAPIV3Schema: Required value: schemas are required"]
    );
}

#[test]
fn status_accepts_names_unless_another_definition_holds_them() {
    let mut first = crd();
    definition::apply_defaults(&mut first);
    definition::set_status(&mut first, &[], "2026-01-01T00:00:00Z");
    assert!(definition::is_established(&first));
    assert_eq!(first["status"]["storedVersions"], json!(["v1"]));
    assert_eq!(first["status"]["acceptedNames"]["kind"], "Widget");
    let types: Vec<&Value> = first["status"]["conditions"]
        .as_array()
        .map(|c| c.iter().map(|c| &c["type"]).collect())
        .unwrap_or_default();
    assert_eq!(types, ["NamesAccepted", "Established"]);

    let mut rival = crd();
    rival["metadata"]["name"] = json!("widgets2.example.com");
    rival["spec"]["names"] = json!({"plural": "widgets2", "kind": "Widget2", "shortNames": ["wd"]});
    definition::apply_defaults(&mut rival);
    definition::set_status(
        &mut rival,
        &[Definition::parse(&first)],
        "2026-01-01T00:00:00Z",
    );
    assert!(!definition::is_established(&rival));
    assert_eq!(
        rival["status"]["conditions"][0]["reason"],
        "ShortNamesConflict"
    );
}

#[test]
fn served_versions_are_interned_in_priority_order() {
    let mut crd = crd();
    definition::apply_defaults(&mut crd);
    definition::set_status(&mut crd, &[], "2026-01-01T00:00:00Z");
    let served = Served::derive(1, &[crd.clone(), crd]);
    let versions: Vec<&str> = served.resources().iter().map(|r| r.version).collect();
    assert_eq!(versions, ["v1", "v1beta1", "v1", "v1beta1"]);
    let a = served.find("example.com", "v1", "widgets").expect("served");
    assert!(std::ptr::eq(a.resource, served.resources()[2]));
    assert_eq!(a.resource.storage, "example.com/widgets");
    assert_eq!(a.resource.short_names, ["wd"]);
    assert!(is_custom(a.resource));
    let mut order = vec!["v1alpha1", "v2", "foo", "v1beta2", "v1", "v1beta1"];
    order.sort_by(|a, b| version_priority(a, b));
    assert_eq!(order, ["v2", "v1", "v1beta2", "v1beta1", "v1alpha1", "foo"]);
}

#[test]
fn printer_columns_and_json_paths() {
    let object = json!({"metadata": {"name": "w", "creationTimestamp": "2026-01-01T00:00:00Z",
                                     "labels": {"app.kubernetes.io/name": "x"}},
                        "spec": {"replicas": 3, "tags": ["a", "b"]},
                        "status": {"conditions": [{"type": "Ready"}]}});
    assert_eq!(
        output::json_path(&object, ".spec.replicas"),
        Some(&json!(3))
    );
    assert_eq!(
        output::json_path(&object, ".status.conditions[0].type"),
        Some(&json!("Ready"))
    );
    assert_eq!(
        output::json_path(&object, ".metadata.labels['app.kubernetes.io/name']"),
        Some(&json!("x"))
    );
    assert_eq!(output::json_path(&object, ".spec.missing"), None);
    let mut patch = json!({});
    assert!(output::set_path(
        &mut patch,
        ".spec.scale.replicas",
        json!(4)
    ));
    assert_eq!(patch, json!({"spec": {"scale": {"replicas": 4}}}));
}

#[test]
fn custom_objects_are_written_with_sorted_keys() {
    let object = json!({"kind": "Widget", "apiVersion": "example.com/v1",
        "metadata": {"uid": "u", "name": "w", "resourceVersion": "7", "creationTimestamp": "t"},
        "spec": {"b": 1, "a": 2}});
    assert_eq!(
        String::from_utf8(crate::go_json::to_vec(&object)).expect("utf-8"),
        r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"creationTimestamp":"t","name":"w","resourceVersion":"7","uid":"u"},"spec":{"a":2,"b":1}}"#
    );
    assert_eq!(
        String::from_utf8(crate::go_json::to_vec_for_storage(&object)).expect("utf-8"),
        r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"creationTimestamp":"t","name":"w","uid":"u"},"spec":{"a":2,"b":1}}"#
    );
}
