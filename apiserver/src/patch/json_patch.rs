//! RFC 6902 JSON patch (`application/json-patch+json`).

use serde_json::Value;

use super::error::{malformed, PatchError};

/// Applies an RFC 6902 JSON patch (an array of operations) to a copy of `target`. Either every
/// operation applies or the error of the first failing one is returned.
pub fn json_patch(target: &Value, ops: &Value) -> Result<Value, PatchError> {
    let Value::Array(ops) = ops else {
        return Err(malformed("a JSON patch must be an array of operations"));
    };
    let mut doc = target.clone();
    for (index, op) in ops.iter().enumerate() {
        apply_operation(&mut doc, index, op)?;
    }
    Ok(doc)
}

fn apply_operation(doc: &mut Value, index: usize, op: &Value) -> Result<(), PatchError> {
    let invalid = |reason: &str| PatchError::InvalidOperation {
        index,
        reason: reason.to_string(),
    };
    let Value::Object(op) = op else {
        return Err(invalid("an operation must be a JSON object"));
    };
    let name = op
        .get("op")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("missing string member \"op\""))?;
    let path = op
        .get("path")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("missing string member \"path\""))?;
    let tokens = parse_pointer(path)?;
    // "value": null is a legitimate value, so presence is checked on the key, not the value.
    let value = || {
        op.get("value")
            .cloned()
            .ok_or_else(|| invalid("missing member \"value\""))
    };
    let from = || -> Result<(&str, Vec<String>), PatchError> {
        let from = op
            .get("from")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("missing string member \"from\""))?;
        Ok((from, parse_pointer(from)?))
    };
    match name {
        "add" => add_at(doc, &tokens, value()?, path),
        "remove" => remove_at(doc, &tokens, path).map(drop),
        "replace" => {
            let new = value()?;
            *resolve_mut(doc, &tokens, path)? = new;
            Ok(())
        }
        "move" => {
            let (from_path, from_tokens) = from()?;
            if from_tokens == tokens {
                return Ok(());
            }
            if tokens.starts_with(&from_tokens) {
                return Err(invalid("cannot move a value into one of its own children"));
            }
            let moved = remove_at(doc, &from_tokens, from_path)?;
            add_at(doc, &tokens, moved, path)
        }
        "copy" => {
            let (from_path, from_tokens) = from()?;
            let copied = resolve(doc, &from_tokens)
                .ok_or_else(|| PatchError::PathNotFound {
                    path: from_path.to_string(),
                })?
                .clone();
            add_at(doc, &tokens, copied, path)
        }
        "test" => {
            let expected = value()?;
            match resolve(doc, &tokens) {
                Some(actual) if json_equal(actual, &expected) => Ok(()),
                _ => Err(PatchError::TestFailed {
                    path: path.to_string(),
                }),
            }
        }
        other => Err(invalid(&format!("unknown op {other:?}"))),
    }
}

/// Splits an RFC 6901 pointer into unescaped reference tokens (`~1` → `/`, `~0` → `~`).
fn parse_pointer(path: &str) -> Result<Vec<String>, PatchError> {
    if path.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = path.strip_prefix('/') else {
        return Err(PatchError::InvalidPointer {
            path: path.to_string(),
            reason: "a non-empty pointer must start with '/'".to_string(),
        });
    };
    rest.split('/')
        .map(|token| {
            let mut out = String::with_capacity(token.len());
            let mut chars = token.chars();
            while let Some(c) = chars.next() {
                if c != '~' {
                    out.push(c);
                    continue;
                }
                match chars.next() {
                    Some('0') => out.push('~'),
                    Some('1') => out.push('/'),
                    _ => {
                        return Err(PatchError::InvalidPointer {
                            path: path.to_string(),
                            reason: "'~' must be followed by '0' or '1'".to_string(),
                        })
                    }
                }
            }
            Ok(out)
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

fn resolve_mut<'v>(
    doc: &'v mut Value,
    tokens: &[String],
    path: &str,
) -> Result<&'v mut Value, PatchError> {
    let not_found = || PatchError::PathNotFound {
        path: path.to_string(),
    };
    let mut cur = doc;
    for token in tokens {
        cur = match cur {
            Value::Object(map) => map.get_mut(token),
            Value::Array(items) => match array_index(token) {
                Some(i) => items.get_mut(i),
                None => None,
            },
            _ => None,
        }
        .ok_or_else(not_found)?;
    }
    Ok(cur)
}

fn add_at(doc: &mut Value, tokens: &[String], value: Value, path: &str) -> Result<(), PatchError> {
    let Some((last, parent_tokens)) = tokens.split_last() else {
        *doc = value;
        return Ok(());
    };
    let not_found = || PatchError::PathNotFound {
        path: path.to_string(),
    };
    match resolve_mut(doc, parent_tokens, path)? {
        Value::Object(map) => {
            map.insert(last.clone(), value);
            Ok(())
        }
        Value::Array(items) => {
            // "-" names the slot after the last element; an index may equal the length too.
            let index = if last == "-" {
                items.len()
            } else {
                array_index(last).ok_or_else(not_found)?
            };
            if index > items.len() {
                return Err(not_found());
            }
            items.insert(index, value);
            Ok(())
        }
        _ => Err(not_found()),
    }
}

fn remove_at(doc: &mut Value, tokens: &[String], path: &str) -> Result<Value, PatchError> {
    let not_found = || PatchError::PathNotFound {
        path: path.to_string(),
    };
    // Removing the whole document would leave nothing to store.
    let (last, parent_tokens) = tokens.split_last().ok_or_else(not_found)?;
    match resolve_mut(doc, parent_tokens, path)? {
        Value::Object(map) => map.remove(last).ok_or_else(not_found),
        Value::Array(items) => match array_index(last) {
            Some(i) if i < items.len() => Ok(items.remove(i)),
            _ => Err(not_found()),
        },
        _ => Err(not_found()),
    }
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
        json_patch(&doc, &ops)
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
        assert!(matches!(&err, PatchError::TestFailed { path } if path == "/baz"));
        assert_eq!(err.http_code(), 422);
        // A.12 adding to a nonexistent target
        let err = patched(
            json!({"foo":"bar"}),
            json!([{"op":"add","path":"/baz/bat","value":"qux"}]),
        )
        .unwrap_err();
        assert!(matches!(&err, PatchError::PathNotFound { path } if path == "/baz/bat"));
        // A.15 comparing strings and numbers
        let err = patched(
            json!({"/":9,"~1":10}),
            json!([{"op":"test","path":"/~01","value":"10"}]),
        )
        .unwrap_err();
        assert!(matches!(err, PatchError::TestFailed { .. }));
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
            (json!([{"op":"move","from":"/foo","path":"/foo/0"}]), "op"),
            (json!(["add"]), "op"),
        ];
        for (ops, what) in cases {
            let err = json_patch(&doc, &ops).unwrap_err();
            let ok = match what {
                "pointer" => matches!(err, PatchError::InvalidPointer { .. }),
                "missing" => matches!(err, PatchError::PathNotFound { .. }),
                _ => matches!(err, PatchError::InvalidOperation { .. }),
            };
            assert!(ok, "{ops}: {err:?}");
            assert_eq!(err.http_code(), 422);
        }
        // A failing later operation leaves no partial result behind: the input is untouched.
        let ops = json!([{"op":"add","path":"/x","value":1},{"op":"test","path":"/x","value":2}]);
        assert!(json_patch(&doc, &ops).is_err());
        assert_eq!(doc, json!({"foo":["a","b"]}));
    }
}
