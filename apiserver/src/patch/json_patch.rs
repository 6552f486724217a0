//! RFC 6902 JSON patch (`application/json-patch+json`), applied by the `json-patch` crate with
//! kube-apiserver's words for what goes wrong.
//!
//! Two things stay here: the `test` operation compares numbers by value (`1` equals `1.0`), as
//! Go's decoder reads every number as a float and the crate compares them exactly, and finds
//! a missing member equal to `null`, as kube-apiserver's library does; and the
//! errors, which the crate reports by kind and kemu words as kube-apiserver's JSON patch
//! library does (`replace operation does not apply: doc is missing key: /spec/x: missing
//! value`), telling a missing parent from a missing member.

use json_patch::{PatchErrorKind, PatchOperation};
use serde_json::Value;

use super::error::{malformed, PatchError};

/// The operations the crate applies (`test` is checked here).
const APPLIED: [&str; 5] = ["add", "remove", "replace", "move", "copy"];

/// Applies an RFC 6902 JSON patch (an array of operations) to a copy of `target`. Either every
/// operation applies or the error of the first failing one is returned. The operations are
/// consumed: each one's value moves into the document rather than being copied.
pub fn json_patch(target: &Value, ops: Value) -> Result<Value, PatchError> {
    let Value::Array(ops) = ops else {
        return Err(malformed("a JSON patch must be an array of operations"));
    };
    let mut doc = copy_for(target, ops.first());
    for (index, op) in ops.into_iter().enumerate() {
        apply_operation(&mut doc, index, op)?;
    }
    Ok(doc)
}

/// The copy of `target` the operations apply to. A top-level member the first operation
/// replaces whole (a status writer's `replace /status`) is not copied only to be dropped: a
/// null stands in for it, which that replace overwrites, so the patched document and every
/// error are the same as with a full copy.
fn copy_for(target: &Value, first: Option<&Value>) -> Value {
    let replaced = first.and_then(|op| {
        if op.get("op").and_then(Value::as_str) != Some("replace") || op.get("value").is_none() {
            return None;
        }
        let mut tokens = pointer_tokens(op.get("path")?.as_str()?)?;
        (tokens.len() == 1).then(|| tokens.remove(0))
    });
    match (target, replaced) {
        (Value::Object(members), Some(replaced)) if members.contains_key(&replaced) => {
            Value::Object(
                members
                    .iter()
                    .map(|(k, v)| {
                        let v = if *k == replaced {
                            Value::Null
                        } else {
                            v.clone()
                        };
                        (k.clone(), v)
                    })
                    .collect(),
            )
        }
        _ => target.clone(),
    }
}

fn apply_operation(doc: &mut Value, index: usize, op: Value) -> Result<(), PatchError> {
    let invalid = |reason: String| PatchError::InvalidOperation { index, reason };
    let Value::Object(fields) = &op else {
        return Err(invalid("an operation must be a JSON object".into()));
    };
    let text = |member: &str| fields.get(member).and_then(Value::as_str);
    let name = text("op")
        .ok_or_else(|| invalid("missing string member \"op\"".into()))?
        .to_string();
    let path = text("path")
        .ok_or_else(|| invalid("missing string member \"path\"".into()))?
        .to_string();
    let from = text("from").map(str::to_string);
    if name == "test" {
        let expected = fields
            .get("value")
            .ok_or_else(|| invalid("missing member \"value\"".into()))?;
        let tokens = pointer_tokens(&path).ok_or_else(|| invalid(bad_pointer(&path)))?;
        // As kube-apiserver's library: a member missing from an existing parent tests
        // equal to null (kube-rs adds the first finalizer after testing for it so).
        let parent_exists = tokens
            .split_last()
            .is_some_and(|(_, parent)| resolve(doc, parent).is_some());
        return match resolve(doc, &tokens) {
            Some(actual) if json_equal(actual, expected) => Ok(()),
            None if expected.is_null() && parent_exists => Ok(()),
            _ => Err(PatchError::JsonPatch {
                message: format!("testing value {path} failed: test failed"),
            }),
        };
    }
    if !APPLIED.contains(&name.as_str()) {
        return Err(invalid(format!("Unexpected kind: {name}")));
    }
    if pointer_tokens(&path).is_none() {
        return Err(invalid(bad_pointer(&path)));
    }
    if let Some(from) = &from {
        if pointer_tokens(from).is_none() {
            return Err(invalid(bad_pointer(from)));
        }
    }
    let mut op = op;
    if name == "replace" || name == "add" {
        // The common case done in place, moving the operation's value into the document (the
        // crate copies it and keeps the value replaced for undoing).
        let value = match &mut op {
            Value::Object(fields) => fields.remove("value"),
            _ => None,
        };
        if let Some(value) = value {
            let tokens = pointer_tokens(&path).unwrap_or_default();
            match in_place(doc, &name, &tokens, value) {
                Ok(()) => return Ok(()),
                Err(value) => {
                    if let Value::Object(fields) = &mut op {
                        fields.insert("value".into(), value);
                    }
                }
            }
        }
    }
    let operation: PatchOperation =
        serde_json::from_value(op).map_err(|e| invalid(e.to_string()))?;
    json_patch::patch(doc, std::slice::from_ref(&operation)).map_err(|e| {
        let message = match e.kind {
            PatchErrorKind::InvalidFromPointer => {
                let from = from.as_deref().unwrap_or_default();
                match name.as_str() {
                    "copy" => format!(
                        "copy operation does not apply: doc is missing from path: \"{from}\": missing value"
                    ),
                    _ => format!(
                        "{name} operation does not apply: doc is missing from path: {from}: missing value"
                    ),
                }
            }
            PatchErrorKind::CannotMoveInsideItself => {
                format!("move operation does not apply: cannot move {path} into one of its own children")
            }
            _ => missing(doc, &name, &path),
        };
        PatchError::JsonPatch { message }
    })
}

/// A `replace` of a member or element that exists, or an `add` of an object member, applied
/// in place. Anything else (a root pointer, an array insertion, a missing target) gives the
/// value back for the crate to apply or to report.
fn in_place(doc: &mut Value, name: &str, tokens: &[String], value: Value) -> Result<(), Value> {
    let Some((last, parent)) = tokens.split_last() else {
        return Err(value);
    };
    let Some(parent) = resolve_mut(doc, parent) else {
        return Err(value);
    };
    let slot = match (name, parent) {
        ("add", Value::Object(map)) => {
            map.insert(last.clone(), value);
            return Ok(());
        }
        ("replace", Value::Object(map)) => map.get_mut(last.as_str()),
        ("replace", Value::Array(items)) => array_index(last).and_then(|at| items.get_mut(at)),
        _ => None,
    };
    match slot {
        Some(slot) => {
            *slot = value;
            Ok(())
        }
        None => Err(value),
    }
}

fn resolve_mut<'v>(doc: &'v mut Value, tokens: &[String]) -> Option<&'v mut Value> {
    tokens.iter().try_fold(doc, |cur, token| match cur {
        Value::Object(map) => map.get_mut(token.as_str()),
        Value::Array(items) => items.get_mut(array_index(token)?),
        _ => None,
    })
}

/// Why an operation on `path` found nothing there, as kube-apiserver words it: the parent is
/// missing, or only the member.
fn missing(doc: &Value, name: &str, path: &str) -> String {
    let tokens = pointer_tokens(path).unwrap_or_default();
    let parent = tokens
        .split_last()
        .and_then(|(_, parent)| resolve(doc, parent))
        .is_some_and(|p| p.is_object() || p.is_array());
    let last = tokens.last().map(String::as_str).unwrap_or_default();
    match (name, parent) {
        ("remove", true) => format!(
            "error in remove for path: '{path}': Unable to remove nonexistent key: {last}: missing value"
        ),
        ("replace", true) => {
            format!("replace operation does not apply: doc is missing key: {path}: missing value")
        }
        ("replace", false) => {
            format!("replace operation does not apply: doc is missing path: {path}: missing value")
        }
        _ => format!("{name} operation does not apply: doc is missing path: \"{path}\": missing value"),
    }
}

fn bad_pointer(path: &str) -> String {
    format!("invalid JSON pointer {path:?}: a non-empty pointer starts with '/' and escapes '~' as ~0 or ~1")
}

/// Splits an RFC 6901 pointer into unescaped reference tokens (`~1` → `/`, `~0` → `~`); None
/// when it does not parse.
fn pointer_tokens(path: &str) -> Option<Vec<String>> {
    if path.is_empty() {
        return Some(Vec::new());
    }
    path.strip_prefix('/')?
        .split('/')
        .map(|token| {
            let mut out = String::with_capacity(token.len());
            let mut chars = token.chars();
            while let Some(c) = chars.next() {
                match (c, c == '~') {
                    (c, false) => out.push(c),
                    (_, true) => match chars.next() {
                        Some('0') => out.push('~'),
                        Some('1') => out.push('/'),
                        _ => return None,
                    },
                }
            }
            Some(out)
        })
        .collect()
}

/// An array index token: decimal digits without leading zeros (RFC 6901 section 4).
fn array_index(token: &str) -> Option<usize> {
    let digits_only = !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit());
    if !digits_only || (token.len() > 1 && token.starts_with('0')) {
        return None;
    }
    token.parse().ok()
}

fn resolve<'v>(doc: &'v Value, tokens: &[String]) -> Option<&'v Value> {
    tokens.iter().try_fold(doc, |cur, token| match cur {
        Value::Object(map) => map.get(token),
        Value::Array(items) => items.get(array_index(token)?),
        _ => None,
    })
}

/// JSON equality as RFC 6902's `test` defines it: numbers compare by value (`1` equals `1.0`).
fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if (x.is_f64() || y.is_f64()) && x.as_f64().is_some() {
                x.as_f64() == y.as_f64()
            } else {
                x == y
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn patched(doc: Value, ops: Value) -> Result<Value, PatchError> {
        json_patch(&doc, ops)
    }

    /// RFC 6902 appendix A.
    #[test]
    fn rfc6902_examples() {
        let ok = [
            // A.1 adding an object member
            (
                json!({"foo":"bar"}),
                json!([{"op":"add","path":"/baz","value":"qux"}]),
                json!({"baz":"qux","foo":"bar"}),
            ),
            // A.2 adding an array element
            (
                json!({"foo":["bar","baz"]}),
                json!([{"op":"add","path":"/foo/1","value":"qux"}]),
                json!({"foo":["bar","qux","baz"]}),
            ),
            // A.3 removing an object member
            (
                json!({"baz":"qux","foo":"bar"}),
                json!([{"op":"remove","path":"/baz"}]),
                json!({"foo":"bar"}),
            ),
            // A.4 removing an array element
            (
                json!({"foo":["bar","qux","baz"]}),
                json!([{"op":"remove","path":"/foo/1"}]),
                json!({"foo":["bar","baz"]}),
            ),
            // A.5 replacing a value
            (
                json!({"baz":"qux","foo":"bar"}),
                json!([{"op":"replace","path":"/baz","value":"boo"}]),
                json!({"baz":"boo","foo":"bar"}),
            ),
            // A.6 moving a value
            (
                json!({"foo":{"bar":"baz","waldo":"fred"},"qux":{"corge":"grault"}}),
                json!([{"op":"move","from":"/foo/waldo","path":"/qux/thud"}]),
                json!({"foo":{"bar":"baz"},"qux":{"corge":"grault","thud":"fred"}}),
            ),
            // A.7 moving an array element
            (
                json!({"foo":["all","grass","cows","eat"]}),
                json!([{"op":"move","from":"/foo/1","path":"/foo/3"}]),
                json!({"foo":["all","cows","eat","grass"]}),
            ),
            // A.8 testing a value: success
            (
                json!({"baz":"qux","foo":["a",2,"c"]}),
                json!([{"op":"test","path":"/baz","value":"qux"},
                       {"op":"test","path":"/foo/1","value":2}]),
                json!({"baz":"qux","foo":["a",2,"c"]}),
            ),
            // A.10 adding a nested member object
            (
                json!({"foo":"bar"}),
                json!([{"op":"add","path":"/child","value":{"grandchild":{}}}]),
                json!({"foo":"bar","child":{"grandchild":{}}}),
            ),
            // A.11 ignoring unrecognized elements
            (
                json!({"foo":"bar"}),
                json!([{"op":"add","path":"/baz","value":"qux","xyz":123}]),
                json!({"foo":"bar","baz":"qux"}),
            ),
            // A.14 ~ escape ordering
            (
                json!({"/":9,"~1":10}),
                json!([{"op":"test","path":"/~01","value":10}]),
                json!({"/":9,"~1":10}),
            ),
            // A.16 adding an array value
            (
                json!({"foo":["bar"]}),
                json!([{"op":"add","path":"/foo/-","value":["abc","def"]}]),
                json!({"foo":["bar",["abc","def"]]}),
            ),
            // copy, numeric equality in test, and "value": null
            (
                json!({"a":{"b":1.0}}),
                json!([{"op":"copy","from":"/a","path":"/c"},
                       {"op":"test","path":"/c/b","value":1},
                       {"op":"add","path":"/d","value":null}]),
                json!({"a":{"b":1.0},"c":{"b":1.0},"d":null}),
            ),
            // replacing the whole document
            (
                json!({"a":1}),
                json!([{"op":"replace","path":"","value":[1]}]),
                json!([1]),
            ),
        ];
        for (doc, ops, expected) in ok {
            assert_eq!(
                patched(doc.clone(), ops.clone()).unwrap(),
                expected,
                "{doc} {ops}"
            );
        }

        // A.9 testing a value: error
        let err = patched(
            json!({"baz":"qux"}),
            json!([{"op":"test","path":"/baz","value":"bar"}]),
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "testing value /baz failed: test failed");
        assert_eq!(err.http_code(), 422);
        // A missing member tests equal to null (what kube-rs's finalizer helper sends), a
        // missing parent does not.
        let added = patched(
            json!({"metadata": {"name": "a"}}),
            json!([
                {"op":"test","path":"/metadata/finalizers","value":null},
                {"op":"add","path":"/metadata/finalizers","value":["x"]}
            ]),
        )
        .unwrap();
        assert_eq!(added["metadata"]["finalizers"], json!(["x"]));
        assert!(patched(
            json!({}),
            json!([{"op":"test","path":"/metadata/finalizers","value":null}])
        )
        .is_err());
        // A.12 adding to a nonexistent target
        let err = patched(
            json!({"foo":"bar"}),
            json!([{"op":"add","path":"/baz/bat","value":"qux"}]),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"add operation does not apply: doc is missing path: "/baz/bat": missing value"#
        );
        // A.15 comparing strings and numbers
        let err = patched(
            json!({"/":9,"~1":10}),
            json!([{"op":"test","path":"/~01","value":"10"}]),
        )
        .unwrap_err();
        assert!(err.to_string().starts_with("testing value /~01 failed"));
    }

    /// The operations applied in place give what the crate gives for them.
    #[test]
    fn in_place_operations_match_the_crate() {
        let doc = json!({
            "metadata": {"name": "p", "labels": {"a": "1"}},
            "spec": {"containers": [{"name": "c"}, {"name": "d"}]},
            "status": {"phase": "Pending", "conditions": [{"type": "Ready"}]}
        });
        let cases = [
            json!([{"op":"replace","path":"/status","value":{"phase":"Running"}}]),
            json!([{"op":"replace","path":"/spec/containers/1","value":{"name":"e"}}]),
            json!([{"op":"replace","path":"/metadata/labels/a","value":null}]),
            json!([{"op":"add","path":"/metadata/labels/a","value":"2"}]),
            json!([{"op":"add","path":"/metadata/labels/b~1c","value":"3"}]),
            json!([{"op":"add","path":"/spec/containers/1","value":{"name":"x"}}]),
            json!([{"op":"add","path":"/spec/containers/-","value":{"name":"y"}}]),
            json!([{"op":"replace","path":"","value":{"kind":"Pod"}}]),
            // A replaced member is not copied; what follows may still read the new value.
            json!([{"op":"replace","path":"/status","value":{"phase":"Running"}},
                   {"op":"copy","from":"/status/phase","path":"/metadata/labels/phase"}]),
            json!([{"op":"replace","path":"/metadata","value":{"name":"q"}},
                   {"op":"test","path":"/metadata/name","value":"q"}]),
        ];
        for ops in cases {
            let operations: Vec<PatchOperation> = serde_json::from_value(ops.clone()).unwrap();
            let mut expected = doc.clone();
            json_patch::patch(&mut expected, &operations).unwrap();
            assert_eq!(
                patched(doc.clone(), ops.clone()).unwrap(),
                expected,
                "{ops}"
            );
        }
        // A replace of a member that is not there fails as it does on a full copy.
        let err = patched(
            doc.clone(),
            json!([{"op":"replace","path":"/absent","value":{}}]),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "replace operation does not apply: doc is missing key: /absent: missing value"
        );
        // A failed replace leaves the error words and nothing applied.
        let err = patched(
            doc.clone(),
            json!([{"op":"replace","path":"/spec/containers/2","value":{}}]),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "replace operation does not apply: doc is missing key: /spec/containers/2: missing value"
        );
    }

    #[test]
    fn json_patch_errors() {
        let doc = json!({"foo":["a","b"]});
        let cases = [
            (json!([{"op":"add","path":"foo","value":1}]), "pointer"),
            (json!([{"op":"add","path":"/~2","value":1}]), "pointer"),
            (json!([{"op":"remove","path":"/foo/2"}]), "missing"),
            (json!([{"op":"remove","path":"/foo/01"}]), "missing"),
            (
                json!([{"op":"replace","path":"/nope","value":1}]),
                "missing",
            ),
            (json!([{"op":"add","path":"/foo/3","value":1}]), "missing"),
            (json!([{"op":"remove","path":"/foo/-"}]), "missing"),
            (json!([{"op":"jump","path":"/foo"}]), "op"),
            (json!([{"op":"add","path":"/x"}]), "op"),
            (json!([{"path":"/x"}]), "op"),
            (
                json!([{"op":"move","from":"/foo","path":"/foo/0"}]),
                "inside",
            ),
            (json!(["add"]), "op"),
        ];
        for (ops, what) in cases {
            let err = json_patch(&doc, ops.clone()).unwrap_err();
            let ok = match what {
                "pointer" => err.to_string().contains("invalid JSON pointer"),
                "missing" => err.to_string().contains("missing value"),
                "inside" => err.to_string().contains("into one of its own children"),
                _ => matches!(err, PatchError::InvalidOperation { .. }),
            };
            assert!(ok, "{ops}: {err:?}");
            assert_eq!(err.http_code(), 422);
        }
        let words = |ops: Value| json_patch(&doc, ops).unwrap_err().to_string();
        assert_eq!(
            words(json!([{"op":"replace","path":"/nope","value":1}])),
            "replace operation does not apply: doc is missing key: /nope: missing value"
        );
        assert_eq!(
            words(json!([{"op":"replace","path":"/a/b","value":1}])),
            "replace operation does not apply: doc is missing path: /a/b: missing value"
        );
        assert_eq!(
            words(json!([{"op":"remove","path":"/nope"}])),
            "error in remove for path: '/nope': Unable to remove nonexistent key: nope: missing value"
        );
        assert_eq!(
            words(json!([{"op":"move","from":"/x","path":"/y"}])),
            "move operation does not apply: doc is missing from path: /x: missing value"
        );
        assert!(words(json!([{"op":"jump","path":"/foo"}])).contains("Unexpected kind: jump"));
        // A failing later operation leaves no partial result behind: the input is untouched.
        let ops = json!([{"op":"add","path":"/x","value":1},{"op":"test","path":"/x","value":2}]);
        assert!(json_patch(&doc, ops).is_err());
        assert_eq!(doc, json!({"foo":["a","b"]}));
    }
}
