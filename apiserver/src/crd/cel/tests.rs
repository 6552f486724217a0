use serde_json::{json, Value};

use super::check::check_schema;
use super::Rules;
use crate::crd::schema::Schema;
use crate::validation::Cause;

fn schema(value: Value) -> Schema {
    Schema::parse(&value).expect("a schema")
}

/// A root schema whose `spec` has the given properties and rules.
fn widget(spec_properties: Value, spec_rules: Value) -> Schema {
    schema(json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": spec_properties,
                "x-kubernetes-validations": spec_rules,
            }
        }
    }))
}

fn run(schema: &Schema, object: &Value, old: Option<&Value>) -> Vec<Cause> {
    let rules = Rules::compile(schema).expect("rules");
    rules.validate(schema, object, old)
}

fn messages(causes: &[Cause]) -> Vec<String> {
    causes
        .iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect()
}

fn object(spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": spec})
}

#[test]
fn a_false_rule_is_an_invalid_value_of_the_schema_type_with_its_message() {
    let s = widget(
        json!({"replicas": {"type": "integer"}, "maxReplicas": {"type": "integer"}}),
        json!([{"rule": "self.replicas <= self.maxReplicas", "message": "replicas must be <= maxReplicas"}]),
    );
    assert!(run(&s, &object(json!({"replicas": 2, "maxReplicas": 3})), None).is_empty());
    let causes = run(&s, &object(json!({"replicas": 5, "maxReplicas": 3})), None);
    assert_eq!(
        messages(&causes),
        ["spec: Invalid value: \"object\": replicas must be <= maxReplicas"]
    );
    assert_eq!(causes[0].reason, "FieldValueInvalid");
}

#[test]
fn without_a_message_the_rule_is_quoted_and_a_root_rule_has_no_path() {
    let s = schema(json!({
        "type": "object",
        "x-kubernetes-validations": [{"rule": "self.metadata.name.startsWith('w')"}],
        "properties": {"spec": {"type": "object", "properties": {
            "size": {"type": "integer", "x-kubernetes-validations": [{"rule": "self % 2 == 0"}]}
        }}}
    }));
    let bad = json!({"metadata": {"name": "x1"}, "spec": {"size": 3}});
    assert_eq!(
        messages(&run(&s, &bad, None)),
        [
            "<nil>: Invalid value: \"object\": failed rule: self.metadata.name.startsWith('w')",
            "spec.size: Invalid value: \"integer\": failed rule: self % 2 == 0",
        ]
    );
}

#[test]
fn message_expression_reason_and_field_path_shape_the_error() {
    let s = widget(
        json!({"min": {"type": "integer"}, "max": {"type": "integer"}, "name": {"type": "string"}}),
        json!([
            {"rule": "self.min <= self.max", "messageExpression": "'min ' + string(self.min) + ' exceeds max ' + string(self.max)", "fieldPath": ".min"},
            {"rule": "has(self.name)", "reason": "FieldValueRequired", "message": "name is required", "fieldPath": ".name"},
            {"rule": "self.min != 7", "reason": "FieldValueForbidden", "message": "seven is unlucky"},
            {"rule": "self.max != 7", "reason": "FieldValueDuplicate"},
        ]),
    );
    let causes = run(&s, &object(json!({"min": 7, "max": 7})), None);
    assert!(causes.is_empty() || causes.len() == 3, "{causes:?}");
    let causes = run(&s, &object(json!({"min": 9, "max": 7})), None);
    assert_eq!(
        messages(&causes),
        [
            "spec.min: Invalid value: \"object\": min 9 exceeds max 7",
            "spec.name: Required value: name is required",
            "spec: Duplicate value: \"object\"",
        ]
    );
    assert_eq!(causes[1].reason, "FieldValueRequired");
    let causes = run(&s, &object(json!({"min": 7, "max": 8, "name": "n"})), None);
    assert_eq!(messages(&causes), ["spec: Forbidden: seven is unlucky"]);
    assert_eq!(causes[0].reason, "FieldValueForbidden");
}

#[test]
fn transition_rules_run_only_on_update_where_an_old_value_correlates() {
    let s = widget(
        json!({
            "mode": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "mode is immutable"}]},
            "ports": {
                "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {
                    "name": {"type": "string"}, "port": {"type": "integer"}
                }, "x-kubernetes-validations": [{"rule": "self.port >= oldSelf.port", "message": "ports only grow"}]}
            },
            "level": {"type": "integer", "x-kubernetes-validations": [
                {"rule": "!oldSelf.hasValue() || self >= oldSelf.value()", "optionalOldSelf": true, "message": "level only rises"},
                {"rule": "oldSelf.hasValue() || self < 10", "optionalOldSelf": true, "message": "starts below 10"}
            ]}
        }),
        json!([]),
    );
    let old = object(
        json!({"mode": "a", "ports": [{"name": "http", "port": 80}, {"name": "x", "port": 1}], "level": 3}),
    );
    // A create has no old values: only the optionalOldSelf rules run.
    assert_eq!(
        messages(&run(&s, &object(json!({"mode": "b", "level": 12})), None)),
        ["spec.level: Invalid value: \"integer\": starts below 10"]
    );
    let new = object(json!({
        "mode": "b",
        "ports": [{"name": "x", "port": 0}, {"name": "http", "port": 81}, {"name": "new", "port": 1}],
        "level": 2
    }));
    assert_eq!(
        messages(&run(&s, &new, Some(&old))),
        [
            "spec.level: Invalid value: \"integer\": level only rises",
            "spec.mode: Invalid value: \"string\": mode is immutable",
            "spec.ports[0]: Invalid value: \"object\": ports only grow",
        ]
    );
}

#[test]
fn an_absent_field_is_an_error_and_has_tests_presence() {
    let s = widget(
        json!({"limits": {"type": "object", "properties": {"cpu": {"type": "integer"}}}}),
        json!([
            {"rule": "self.limits.cpu > 0"},
            {"rule": "!has(self.limits) || !has(self.limits.cpu) || self.limits.cpu > 0"}
        ]),
    );
    assert_eq!(
        messages(&run(&s, &object(json!({"limits": {}})), None)),
        ["spec: Invalid value: \"object\": no such key: cpu evaluating rule: self.limits.cpu > 0"]
    );
}

#[test]
fn the_kubernetes_library_functions_people_use_work() {
    let s = widget(
        json!({
            "name": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "sizes": {"type": "array", "items": {"type": "integer"}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "ratio": {"type": "number"},
            "count": {"type": "integer"},
            "x-port": {"type": "integer"},
        }),
        json!([
            {"rule": "size(self.name) == 5 && self.name.size() == 5"},
            {"rule": "self.name.matches('^[a-z]+$') && self.name.startsWith('he') && self.name.endsWith('lo') && self.name.contains('ll')"},
            {"rule": "self.name.upperAscii() == 'HELLO' && 'HeLLo'.lowerAscii() == self.name"},
            {"rule": "self.tags.all(t, t.size() > 0) && self.tags.exists(t, t == 'b') && self.tags.exists_one(t, t == 'a')"},
            {"rule": "self.tags.map(t, t + '!') == ['a!', 'b!'] && self.tags.filter(t, t != 'a') == ['b']"},
            {"rule": "self.sizes.isSorted() && self.sizes.sum() == 6 && self.sizes.min() == 1 && self.sizes.max() == 3"},
            {"rule": "'app' in self.labels && self.labels.all(k, k.size() < 10) && self.labels['app'] == 'web'"},
            {"rule": "self.ratio > 1 && self.ratio < 2.0 && self.count / 2 == 2 && double(self.count) / 2.0 == 2.5"},
            {"rule": "int('7') == 7 && string(self.count) == '5' && self.x__dash__port == 8080"},
            {"rule": "self.name.find('l+') == 'll' && self.name.findAll('l') == ['l', 'l']"},
        ]),
    );
    let good = object(json!({
        "name": "hello", "tags": ["a", "b"], "sizes": [1, 2, 3], "labels": {"app": "web"},
        "ratio": 1.5, "count": 5, "x-port": 8080
    }));
    assert_eq!(messages(&run(&s, &good, None)), Vec::<String>::new());
    let bad = object(json!({
        "name": "hello", "tags": ["a", "a"], "sizes": [3, 2, 1], "labels": {"app": "web"},
        "ratio": 1, "count": 5, "x-port": 8080
    }));
    let failed: Vec<String> = run(&s, &bad, None)
        .iter()
        .map(|c| c.message.clone())
        .collect();
    assert_eq!(failed.len(), 4, "{failed:?}");
}

#[test]
fn rules_do_not_run_on_an_object_with_type_errors() {
    let s = widget(
        json!({"replicas": {"type": "integer"}}),
        json!([{"rule": "self.replicas > 0"}]),
    );
    let served = crate::crd::ServedVersion {
        resource: api::resources::pods(),
        storage_version: "v1".into(),
        rules: Rules::compile(&s),
        schema: Some(s),
        published_schema: None,
        columns: Vec::new(),
        scale: None,
    };
    let causes = served.validate(&object(json!({"replicas": "many"})), None);
    assert_eq!(
        messages(&causes)[1],
        "<nil>: Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"
    );
}

fn checked(rules: Value, spec_properties: Value) -> Vec<String> {
    let s = widget(spec_properties, rules);
    messages(&check_schema(&s, "spec.validation.openAPIV3Schema"))
}

#[test]
fn a_rule_that_does_not_compile_is_refused_with_the_compiler_message() {
    let found = checked(
        json!([{"rule": "self.replicas >"}]),
        json!({"replicas": {"type": "integer"}}),
    );
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with(
            "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{Rule:\"self.replicas >\", Message:\"\", MessageExpression:\"\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}: compilation failed: ERROR: <input>:1:"
        ),
        "{found:?}"
    );
    assert!(found[0].contains("\n | self.replicas >\n | "), "{found:?}");
}

#[test]
fn references_to_unknown_fields_variables_and_functions_are_refused() {
    let props = json!({"replicas": {"type": "integer"}});
    let undefined = checked(
        json!([{"rule": "self.nonExistingField > 0"}]),
        props.clone(),
    );
    assert!(
        undefined[0].ends_with("compilation failed: ERROR: <input>:1:5: undefined field 'nonExistingField'\n | self.nonExistingField > 0\n | ....^"),
        "{undefined:?}"
    );
    let undeclared = checked(json!([{"rule": "other > 0"}]), props.clone());
    assert!(
        undeclared[0].contains("undeclared reference to 'other' (in container '')"),
        "{undeclared:?}"
    );
    let function = checked(
        json!([{"rule": "frobnicate(self.replicas)"}]),
        props.clone(),
    );
    assert!(
        function[0].contains("undeclared reference to 'frobnicate'"),
        "{function:?}"
    );
    let mismatched = checked(
        json!([{"rule": "self.name == 1"}]),
        json!({"name": {"type": "string"}}),
    );
    assert!(
        mismatched[0].ends_with("compilation failed: ERROR: <input>:1:11: found no matching overload for '_==_' applied to '(string, int)'\n | self.name == 1\n | ..........^"),
        "{mismatched:?}"
    );
    let added = checked(json!([{"rule": "self.replicas + 'x' > 0"}]), props.clone());
    assert!(
        added[0].contains("found no matching overload for '_+_' applied to '(int, string)'"),
        "{added:?}"
    );
    // Numbers compare across kinds; formats with CEL types of their own are not strings.
    let numbers = checked(
        json!([{"rule": "self.replicas < 2.5 && self.ratio >= 1 && self.at > timestamp('2020-01-01T00:00:00Z')"}]),
        json!({"replicas": {"type": "integer"}, "ratio": {"type": "number"},
            "at": {"type": "string", "format": "date-time"}}),
    );
    assert!(numbers.is_empty(), "{numbers:?}");
    let not_bool = checked(json!([{"rule": "self.replicas + 1"}]), props.clone());
    assert!(
        not_bool[0].ends_with(": cel expression must evaluate to a bool"),
        "{not_bool:?}"
    );
    // Macros' variables, the escaped names and the root's metadata are all known.
    let fine = checked(
        json!([{"rule": "[1, 2].all(x, x > 0) && self.replicas >= 0 && self.x__dash__y == 1"}]),
        json!({"replicas": {"type": "integer"}, "x-y": {"type": "integer"}}),
    );
    assert_eq!(fine, Vec::<String>::new());
}

#[test]
fn reasons_field_paths_and_old_self_placement_are_checked() {
    let found = checked(
        json!([
            {"rule": "self.a > 0", "reason": "FieldValueOdd"},
            {"rule": "self.a > 0", "fieldPath": ".nope"},
            {"rule": "self.a > 0", "optionalOldSelf": true}
        ]),
        json!({"a": {"type": "integer"}}),
    );
    let prefix = "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations";
    assert_eq!(
        found,
        [
            format!("{prefix}[0].reason: Unsupported value: \"FieldValueOdd\": supported values: \"FieldValueDuplicate\", \"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\""),
            format!("{prefix}[1].fieldPath: Invalid value: \".nope\": fieldPath must be a valid path"),
            format!("{prefix}[2].optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule"),
        ]
    );
    let uncorrelatable = checked(
        json!([]),
        json!({"items": {"type": "array", "items": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}}}),
    );
    assert_eq!(
        uncorrelatable,
        ["spec.validation.openAPIV3Schema.properties[spec].properties[items].items.x-kubernetes-validations[0].rule: Invalid value: \"self == oldSelf\": oldSelf cannot be used on the uncorrelatable portion of the schema within spec.validation.openAPIV3Schema.properties[spec].properties[items]"]
    );
}

#[test]
fn rules_over_nested_unbounded_lists_are_refused_for_their_cost() {
    let nested = json!({"matrix": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}}});
    let found = checked(
        json!([{"rule": "self.matrix.all(row, row.all(x, self.matrix.all(r, r.all(y, x != y || true))))"}]),
        nested.clone(),
    );
    assert!(
        found[0].ends_with("rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"),
        "{found:?}"
    );
    // Bounded by maxItems, the same rule is cheap enough.
    let bounded = json!({"matrix": {"type": "array", "maxItems": 10, "items": {"type": "array", "maxItems": 10, "items": {"type": "integer"}}}});
    let found = checked(
        json!([{"rule": "self.matrix.all(row, row.all(x, self.matrix.all(r, r.all(y, x != y || true))))"}]),
        bounded,
    );
    assert_eq!(found, Vec::<String>::new());
    // Rules on the list itself are estimated the same way.
    let on_list = schema(
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "tags": {"type": "array", "items": {"type": "string"},
                "x-kubernetes-validations": [{"rule": "self.all(a, self.all(b, a == b))"}]}
        }}}}),
    );
    let found = messages(&check_schema(&on_list, "spec.validation.openAPIV3Schema"));
    assert!(
        found[0].contains("estimated rule cost exceeds budget"),
        "{found:?}"
    );
    // One pass over an unbounded list is fine.
    let found = checked(
        json!([{"rule": "self.matrix.all(row, size(row) < 100)"}]),
        nested,
    );
    assert_eq!(found, Vec::<String>::new());
}

#[test]
fn timestamps_and_durations_from_formats_and_functions() {
    let s = widget(
        json!({
            "start": {"type": "string", "format": "date-time"},
            "end": {"type": "string", "format": "date-time"},
            "day": {"type": "string", "format": "date"},
            "timeout": {"type": "string", "format": "duration"},
        }),
        json!([
            {"rule": "self.end - self.start <= duration('1h')", "message": "at most an hour"},
            {"rule": "self.start + self.timeout < self.end", "message": "timeout ends before the end"},
            {"rule": "self.start > timestamp('2020-01-01T00:00:00Z') && self.start.getFullYear() == 2024 && self.start.getHours() == 10"},
            {"rule": "self.day == timestamp('2024-05-01T00:00:00Z') && self.timeout.getSeconds() == 90"},
        ]),
    );
    let good = object(
        json!({"start": "2024-05-01T10:00:00Z", "end": "2024-05-01T10:30:00Z",
        "day": "2024-05-01", "timeout": "1m30s"}),
    );
    assert_eq!(messages(&run(&s, &good, None)), Vec::<String>::new());
    let bad = object(
        json!({"start": "2024-05-01T10:00:00Z", "end": "2024-05-01T12:00:00+01:00",
        "day": "2024-05-01", "timeout": "2h"}),
    );
    assert_eq!(
        messages(&run(&s, &bad, None)),
        [
            "spec: Invalid value: \"object\": timeout ends before the end",
            "spec: Invalid value: \"object\": failed rule: self.day == timestamp('2024-05-01T00:00:00Z') && self.timeout.getSeconds() == 90",
        ]
    );
    let later = object(
        json!({"start": "2024-05-01T10:00:00Z", "end": "2024-05-01T13:00:00Z",
        "day": "2024-05-01", "timeout": "90s"}),
    );
    assert_eq!(
        messages(&run(&s, &later, None)),
        ["spec: Invalid value: \"object\": at most an hour"]
    );
}

#[test]
fn quantity_url_ip_and_cidr_libraries() {
    let s = widget(
        json!({
            "memory": {"type": "string"},
            "endpoint": {"type": "string"},
            "address": {"type": "string"},
            "network": {"type": "string"},
        }),
        json!([
            {"rule": "quantity(self.memory).isLessThan(quantity('1Gi'))", "message": "memory below 1Gi"},
            {"rule": "quantity(self.memory).add(quantity('512Mi')).compareTo(quantity('1Gi')) <= 0 && quantity('1.5').isInteger() == false && quantity('2k').asInteger() == 2000 && quantity('500m').asApproximateFloat() == 0.5 && quantity('-1').sign() == -1 && quantity('1') == quantity('1000m') && isQuantity('1Ki') && !isQuantity('1x')"},
            {"rule": "url(self.endpoint).getScheme() == 'https' && url(self.endpoint).getHostname() == 'example.com' && url(self.endpoint).getPort() == '8443' && url(self.endpoint).getEscapedPath() == '/a%20b' && url(self.endpoint).getQuery() == {'k': ['1', '2']} && isURL('/p') && !isURL('p')", "message": "bad endpoint"},
            {"rule": "ip(self.address).family() == 4 && !ip(self.address).isLoopback() && ip('::1').isLoopback() && ip('0.0.0.0').isUnspecified() && ip('fe80::1').isLinkLocalUnicast() && ip('224.0.0.1').isLinkLocalMulticast() && ip(self.address).isGlobalUnicast() && isIP('::1') && !isIP('1.2.3')", "message": "bad address"},
            {"rule": "cidr(self.network).containsIP(self.address) && cidr(self.network).containsIP(ip(self.address)) && cidr(self.network).containsCIDR('10.1.0.0/16') && cidr(self.network).prefixLength() == 8 && cidr('10.1.2.3/8').masked() == cidr(self.network) && cidr(self.network).ip() == ip('10.0.0.0') && isCIDR('::/0') && !isCIDR('10.0.0.0')", "message": "address outside the network"},
        ]),
    );
    let good = object(
        json!({"memory": "512Mi", "endpoint": "https://example.com:8443/a b?k=1&k=2",
        "address": "10.1.2.3", "network": "10.0.0.0/8"}),
    );
    assert_eq!(messages(&run(&s, &good, None)), Vec::<String>::new());
    let bad = object(json!({"memory": "2Gi", "endpoint": "http://example.com/",
        "address": "192.168.0.1", "network": "10.0.0.0/8"}));
    let found = messages(&run(&s, &bad, None));
    assert_eq!(found.len(), 4, "{found:?}");
    assert_eq!(
        found[0],
        "spec: Invalid value: \"object\": memory below 1Gi"
    );
    assert_eq!(found[2], "spec: Invalid value: \"object\": bad endpoint");
    assert_eq!(
        found[3],
        "spec: Invalid value: \"object\": address outside the network"
    );
    // A value the library cannot parse is an error in kube-apiserver's words.
    let unparsable = object(json!({"memory": "lots", "endpoint": "example.com",
        "address": "10.0.0.300", "network": "10.0.0.0/8"}));
    let found = messages(&run(&s, &unparsable, None));
    assert!(found.contains(&"spec: Invalid value: \"object\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$' evaluating rule: memory below 1Gi".to_string()), "{found:?}");
    assert!(found.contains(&"spec: Invalid value: \"object\": URL parse error during conversion from string: parse \"example.com\": invalid URI for request evaluating rule: bad endpoint".to_string()), "{found:?}");
    assert!(found.contains(&"spec: Invalid value: \"object\": IP Address \"10.0.0.300\" parse error during conversion from string: ParseAddr(\"10.0.0.300\"): IPv4 field has value >255 evaluating rule: bad address".to_string()), "{found:?}");
}

#[test]
fn calls_with_wrong_argument_types_are_refused_when_the_crd_is_written() {
    let props = json!({
        "count": {"type": "integer"},
        "memory": {"type": "string"},
        "at": {"type": "string", "format": "date-time"},
    });
    let prefix = "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{Rule:";
    let found = checked(
        json!([{"rule": "quantity(self.count).sign() > 0"}]),
        props.clone(),
    );
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with(prefix), "{found:?}");
    assert!(
        found[0].ends_with("compilation failed: ERROR: <input>:1:9: found no matching overload for 'quantity' applied to '(int)'\n | quantity(self.count).sign() > 0\n | ........^"),
        "{found:?}"
    );
    let member = checked(
        json!([{"rule": "quantity(self.memory).isGreaterThan(1)"}]),
        props.clone(),
    );
    assert!(
        member[0].contains(
            "found no matching overload for 'isGreaterThan' applied to 'kubernetes.Quantity.(int)'"
        ),
        "{member:?}"
    );
    let time = checked(json!([{"rule": "self.at < '2020-01-01'"}]), props.clone());
    assert!(
        time[0].contains(
            "found no matching overload for '_<_' applied to '(google.protobuf.Timestamp, string)'"
        ),
        "{time:?}"
    );
    let not_bool = checked(json!([{"rule": "ip('10.0.0.1')"}]), props.clone());
    assert!(
        not_bool[0].ends_with(": cel expression must evaluate to a bool"),
        "{not_bool:?}"
    );
    let fine = checked(
        json!([{"rule": "cidr('10.0.0.0/8').containsIP(ip('10.0.0.1')) && quantity(self.memory).add(self.count).isInteger() && self.at + duration('1h') > timestamp(0)"}]),
        props,
    );
    assert_eq!(fine, Vec::<String>::new());
}

#[test]
fn ip_is_canonical_and_string_of_ips_and_cidrs() {
    let s = widget(
        json!({"address": {"type": "string"}}),
        json!([
            {"rule": "ip.isCanonical(self.address)", "message": "not canonical"},
            {"rule": "string(ip('2001:db8:0:0:0:0:0:1')) == '2001:db8::1' && string(ip('10.0.0.1')) == '10.0.0.1' && string(cidr('10.1.2.3/8')) == '10.1.2.3/8' && string(cidr('10.1.2.3/8').masked()) == '10.0.0.0/8' && string(cidr('2001:DB8::/32').ip()) == '2001:db8::' && sign(quantity('-2')) == -1 && ip.isCanonical('127.0.0.1') && !ip.isCanonical('2001:db8::0:0:0:abcd')"},
        ]),
    );
    assert_eq!(
        check_schema(&s, "spec.validation.openAPIV3Schema"),
        Vec::new()
    );
    for canonical in ["10.0.0.1", "2001:db8::abcd", "::1", "::"] {
        let found = messages(&run(&s, &object(json!({"address": canonical})), None));
        assert_eq!(found, Vec::<String>::new(), "{canonical}");
    }
    for other in ["2001:DB8::ABCD", "2001:db8::0:0:0:abcd", "0:0:0:0:0:0:0:1"] {
        let found = messages(&run(&s, &object(json!({"address": other})), None));
        assert_eq!(
            found,
            ["spec: Invalid value: \"object\": not canonical"],
            "{other}"
        );
    }
    // An address that does not parse is the rule's error, in kube-apiserver's words.
    let found = messages(&run(&s, &object(json!({"address": "nope"})), None));
    assert_eq!(
        found,
        ["spec: Invalid value: \"object\": IP Address \"nope\" parse error during conversion from string: ParseAddr(\"nope\"): unable to parse IP evaluating rule: not canonical"]
    );
}

#[test]
fn standard_functions_with_wrong_argument_types_are_refused_when_the_crd_is_written() {
    let props = json!({
        "name": {"type": "string"},
        "count": {"type": "integer"},
        "items": {"type": "array", "maxItems": 10, "items": {"type": "integer"}},
        "names": {"type": "array", "maxItems": 10, "items": {"type": "string", "maxLength": 10}},
        "labels": {"type": "object", "maxProperties": 10, "additionalProperties": {"type": "string"}},
    });
    let error = |rule: &str| {
        let found = checked(json!([{ "rule": rule }]), props.clone());
        assert_eq!(found.len(), 1, "{rule}: {found:?}");
        assert!(
            found[0].starts_with(&format!(
                "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{{Rule:{rule:?}, "
            )),
            "{found:?}"
        );
        let (_, detail) = found[0]
            .split_once("}: compilation failed: ")
            .expect("a compilation error");
        detail.to_string()
    };
    assert_eq!(
        error("size(1) > 0"),
        "ERROR: <input>:1:5: found no matching overload for 'size' applied to '(int)'\n | size(1) > 0\n | ....^"
    );
    assert_eq!(
        error("self.name.startsWith(1)"),
        "ERROR: <input>:1:21: found no matching overload for 'startsWith' applied to 'string.(int)'\n | self.name.startsWith(1)\n | ....................^"
    );
    assert_eq!(
        error("self.items.exists(x, x)"),
        "ERROR: <input>:1:22: expected type 'bool' but found 'int'\n | self.items.exists(x, x)\n | .....................^"
    );
    let first_line = |rule: &str| error(rule).lines().next().unwrap_or("").to_string();
    for (rule, message) in [
        ("self.items.all(x, x)", "expected type 'bool' but found 'int'"),
        (
            "self.items.exists_one(x, x)",
            "found no matching overload for '_?_:_' applied to '(int, int, int)'",
        ),
        (
            "self.items.filter(x, x).size() > 0",
            "found no matching overload for '_?_:_' applied to '(int, list(int), list(int))'",
        ),
        (
            "self.name.all(c, true)",
            "expression of type 'string' cannot be range of a comprehension (must be list, map, or dynamic)",
        ),
        (
            "int(self.items) > 0",
            "found no matching overload for 'int' applied to '(list(int))'",
        ),
        (
            "string(self.labels) == ''",
            "found no matching overload for 'string' applied to '(map(string, string))'",
        ),
        (
            "self.name.contains(self.count)",
            "found no matching overload for 'contains' applied to 'string.(int)'",
        ),
        (
            "self.count.endsWith('1')",
            "found no matching overload for 'endsWith' applied to 'int.(string)'",
        ),
        (
            "matches(self.name, 1)",
            "found no matching overload for 'matches' applied to '(string, int)'",
        ),
        (
            "self.items.size() > 0 && duration(true) > duration('1s')",
            "found no matching overload for 'duration' applied to '(bool)'",
        ),
        (
            "timestamp(self.items) < timestamp(0)",
            "found no matching overload for 'timestamp' applied to '(list(int))'",
        ),
        (
            "bytes(self.count) == b'1'",
            "found no matching overload for 'bytes' applied to '(int)'",
        ),
        (
            "'a' in self.count",
            "found no matching overload for '@in' applied to '(string, int)'",
        ),
        (
            "1 in self.names",
            "found no matching overload for '@in' applied to '(int, list(string))'",
        ),
        (
            "self.items['a'] > 0",
            "found no matching overload for '_[_]' applied to '(list(int), string)'",
        ),
        (
            "self.labels[1] == 'x'",
            "found no matching overload for '_[_]' applied to '(map(string, string), int)'",
        ),
        (
            "self.items[0].startsWith('1')",
            "found no matching overload for 'startsWith' applied to 'int.(string)'",
        ),
        (
            "has(self.name.first)",
            "type 'string' does not support field selection",
        ),
        (
            "self.items.first == 1",
            "type 'list(int)' does not support field selection",
        ),
        (
            "!self.count",
            "found no matching overload for '!_' applied to '(int)'",
        ),
        (
            "self.count ? true : false",
            "found no matching overload for '_?_:_' applied to '(int, bool, bool)'",
        ),
        (
            "self.count > 0 && self.name",
            "expected type 'bool' but found 'string'",
        ),
        (
            "ip.isCanonical(ip('::1'))",
            "found no matching overload for 'ip.isCanonical' applied to '(net.IP)'",
        ),
    ] {
        let line = first_line(rule);
        assert!(line.ends_with(message), "{rule}: {line}");
    }
    // What the standard library does take passes.
    let fine = checked(
        json!([
            {"rule": "size(self.name) > 0 && self.name.size() < 10 && self.items.size() == size(self.labels) && size(self.names[0]) > 0"},
            {"rule": "self.name.startsWith('a') && self.name.endsWith('z') && self.name.contains('m') && self.name.matches('^a') && matches(self.name, 'a')"},
            {"rule": "int(self.name) > 0 && string(self.count) == '1' && uint(self.count) > 0u && double(self.count) > 0.5 && bool('true') && bytes(self.name) == b'a' && int(duration('1s')) == 1 && string(timestamp(0)) != ''"},
            {"rule": "self.items.exists(x, x > 0) && self.items.all(x, x > 0) && self.items.exists_one(x, x == 1) && self.items.filter(x, x > 1).size() == 0 && self.items.map(x, x * 2).size() > 0 && self.items.map(x, x > 0, x).size() > 0"},
            {"rule": "1 in self.items && 'a' in self.labels && self.labels['a'] == 'b' && self.items[0] > 0 && has(self.name) && dyn(self.count) == 1 && type(self.count) == int && self.labels.all(k, k.startsWith('a')) && [1, 2].all(x, x > 0)"},
            {"rule": "string(ip('1.2.3.4')) == '1.2.3.4' && ip.isCanonical(self.name) && string(cidr(self.name)) != '' && sign(quantity(self.name)) >= 0", "messageExpression": "'name ' + self.name + ' has ' + string(size(self.name)) + ' characters'"},
        ]),
        props.clone(),
    );
    assert_eq!(fine, Vec::<String>::new());
    // A messageExpression is checked the same way.
    let message = checked(
        json!([{"rule": "true", "messageExpression": "'too many: ' + string(self.items)"}]),
        props,
    );
    assert_eq!(message.len(), 1, "{message:?}");
    assert!(
        message[0].contains("messageExpression compilation failed: ERROR: <input>:1:22: found no matching overload for 'string' applied to '(list(int))'"),
        "{message:?}"
    );
}
