//! Documents written here from the Kubernetes API reference, in the byte form kube-apiserver
//! sends: decoded into a `Value` (which forgets the order) and encoded again, they must come back
//! byte for byte.

use super::*;

fn round_trip(fixture: &str) {
    let value: Value = serde_json::from_str(fixture).expect("fixture is JSON");
    let mut body = to_vec(&value);
    body.push(b'\n');
    assert_eq!(String::from_utf8(body).expect("utf-8"), fixture);
}

#[test]
fn a_status_is_written_in_go_order() {
    round_trip(include_str!("fixtures/status-not-found.json"));
    round_trip(include_str!("fixtures/status-invalid.json"));
}

#[test]
fn a_pod_is_written_in_go_order() {
    round_trip(include_str!("fixtures/pod.json"));
}

#[test]
fn discovery_documents_are_written_in_go_order() {
    round_trip(include_str!("fixtures/api-resource-list.json"));
    round_trip(include_str!("fixtures/api-group-list.json"));
}

#[test]
fn a_list_puts_its_type_meta_and_list_meta_first() {
    let list = serde_json::json!({
        "items": [{"metadata": {"uid": "u", "name": "a"}, "data": {"k": "v"}}],
        "metadata": {"continue": "c", "resourceVersion": "7"},
        "apiVersion": "v1",
        "kind": "ConfigMapList",
    });
    assert_eq!(
        String::from_utf8(to_vec(&list)).expect("utf-8"),
        r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"7","continue":"c"},"items":[{"metadata":{"name":"a","uid":"u"},"data":{"k":"v"}}]}"#
    );
}

#[test]
fn unknown_fields_follow_the_known_ones_sorted() {
    let pod = serde_json::json!({"zeta": 1, "alpha": 2, "spec": {"nodeName": "n", "b": 1, "a": 2},
        "metadata": {"name": "p"}, "kind": "Pod", "apiVersion": "v1"});
    assert_eq!(
        String::from_utf8(to_vec(&pod)).expect("utf-8"),
        r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p"},"spec":{"nodeName":"n","a":2,"b":1},"alpha":2,"zeta":1}"#
    );
    // A kind without a table still leads with its TypeMeta and ObjectMeta in Go order.
    let other = serde_json::json!({"spec": {}, "metadata": {"uid": "u", "name": "x"},
        "apiVersion": "v1", "kind": "Gizmo"});
    assert_eq!(
        String::from_utf8(to_vec(&other)).expect("utf-8"),
        r#"{"kind":"Gizmo","apiVersion":"v1","metadata":{"name":"x","uid":"u"},"spec":{}}"#
    );
    // A custom resource's object is an unstructured map to kube-apiserver: every key sorted.
    let custom = serde_json::json!({"spec": {"b": 1, "a": 2}, "metadata": {"uid": "u", "name": "x"},
        "apiVersion": "example.com/v1", "kind": "Widget"});
    assert_eq!(
        String::from_utf8(to_vec(&custom)).expect("utf-8"),
        r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"x","uid":"u"},"spec":{"a":2,"b":1}}"#
    );
}

#[test]
fn strings_are_escaped_as_go_escapes_them() {
    let value = serde_json::json!({"kind": "ConfigMap", "data": {
        "html": "<a href=\"x\">&</a>", "lines": "a\u{2028}b\u{2029}c\n\t\u{1}", "plain": "é"}});
    assert_eq!(
        String::from_utf8(to_vec(&value)).expect("utf-8"),
        r#"{"kind":"ConfigMap","data":{"html":"\u003ca href=\"x\"\u003e\u0026\u003c/a\u003e","lines":"a\u2028b\u2029c\n\t\u0001","plain":"é"}}"#
    );
}

#[test]
fn the_stored_form_leaves_out_the_resource_version_only() {
    let pod = serde_json::json!({"kind": "Pod", "apiVersion": "v1",
        "metadata": {"name": "p", "resourceVersion": "9", "uid": "u"},
        "spec": {"containers": [{"name": "c", "resourceVersion": "kept"}]}});
    assert_eq!(
        String::from_utf8(to_vec_for_storage(&pod)).expect("utf-8"),
        r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","uid":"u"},"spec":{"containers":[{"name":"c","resourceVersion":"kept"}]}}"#
    );
}
