//! Reading stored objects without building a `serde_json::Value` of the whole object.
//!
//! Every store event passes through the watch cache, which needs the object's JSON with
//! `metadata.resourceVersion` set, its name, namespace and labels, and a few selectable fields.
//! Building a `Value` of a whole pod and writing it back out for that was the watch cache's main
//! cost (an allocation for every string and map of the object). Here the document is scanned
//! into slices of the input ([`Members`]), only the small parts that are needed are decoded, and
//! the resourceVersion is spliced into the stored bytes.
//!
//! The stored bytes come from [`crate::go_json`] (kube-apiserver's field order), so the splice
//! puts `resourceVersion` where a re-encoded `Value` would have it: the output is byte for byte
//! what decoding, stamping and encoding gave. Anything unexpected (not an object, no `metadata`,
//! malformed JSON, a key not written compactly) returns `None`, and the caller takes the `Value`
//! path instead.

use serde_json::Value;

/// An object's members in document order: each key (unescaped) and its value's JSON, a slice
/// of the input.
pub struct Members<'a> {
    pub entries: Vec<(String, &'a str)>,
}

impl<'a> Members<'a> {
    /// Splits a JSON object (nothing but whitespace around it) into its members.
    pub fn parse(json: &'a str) -> Option<Members<'a>> {
        let bytes = json.as_bytes();
        let mut i = skip_ws(bytes, 0);
        if bytes.get(i) != Some(&b'{') {
            return None;
        }
        i = skip_ws(bytes, i + 1);
        let mut entries = Vec::new();
        if bytes.get(i) == Some(&b'}') {
            i += 1;
        } else {
            loop {
                let key_end = scan_string(bytes, i)?;
                let key = unescape(json.get(i..key_end)?)?;
                i = skip_ws(bytes, key_end);
                if bytes.get(i) != Some(&b':') {
                    return None;
                }
                let value_start = skip_ws(bytes, i + 1);
                let value_end = scan_value(bytes, value_start)?;
                entries.push((key, json.get(value_start..value_end)?));
                i = skip_ws(bytes, value_end);
                match bytes.get(i) {
                    Some(b',') => i = skip_ws(bytes, i + 1),
                    Some(b'}') => {
                        i += 1;
                        break;
                    }
                    _ => return None,
                }
            }
        }
        (skip_ws(bytes, i) == bytes.len()).then_some(Members { entries })
    }

    pub fn get(&self, key: &str) -> Option<&'a str> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }
}

fn skip_ws(bytes: &[u8], mut i: usize) -> usize {
    while matches!(bytes.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// The end (exclusive) of the string starting at `i`.
fn scan_string(bytes: &[u8], i: usize) -> Option<usize> {
    if bytes.get(i) != Some(&b'"') {
        return None;
    }
    let mut j = i + 1;
    loop {
        match bytes.get(j)? {
            b'"' => return Some(j + 1),
            b'\\' => j += 2,
            c if *c < 0x20 => return None,
            _ => j += 1,
        }
    }
}

/// A string token's text: taken as is when it has no escapes, else decoded by serde_json.
fn unescape(token: &str) -> Option<String> {
    let inner = token.get(1..token.len() - 1)?;
    if inner.contains('\\') {
        serde_json::from_str(token).ok()
    } else {
        Some(inner.to_string())
    }
}

/// The end (exclusive) of the value starting at `i`. Containers are matched bracket for bracket;
/// scalars are checked for JSON's characters (their exact form is checked when decoded).
fn scan_value(bytes: &[u8], i: usize) -> Option<usize> {
    match bytes.get(i)? {
        b'"' => scan_string(bytes, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            loop {
                match bytes.get(j)? {
                    b'"' => {
                        j = scan_string(bytes, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        b't' | b'f' | b'n' => {
            let rest = &bytes[i..];
            for literal in [&b"true"[..], b"false", b"null"] {
                if rest.starts_with(literal) {
                    return Some(i + literal.len());
                }
            }
            None
        }
        b'-' | b'0'..=b'9' => {
            let mut j = i + 1;
            while matches!(
                bytes.get(j),
                Some(b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-')
            ) {
                j += 1;
            }
            Some(j)
        }
        _ => None,
    }
}

/// Where `inner` (a slice of `outer`) starts in `outer`.
fn offset(outer: &str, inner: &str) -> Option<usize> {
    let start = (inner.as_ptr() as usize).checked_sub(outer.as_ptr() as usize)?;
    (start + inner.len() <= outer.len()).then_some(start)
}

/// The stored JSON `json` with `metadata.resourceVersion` set to `rv` (replaced if present,
/// otherwise inserted where ObjectMeta declares it). `None` when the bytes are not as expected.
pub fn stamp(json: &[u8], rv: i64) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(json).ok()?;
    let top = Members::parse(text)?;
    // Keys sorted (a custom object): resourceVersion's place is not ObjectMeta's.
    if top
        .entries
        .first()
        .is_some_and(|(key, _)| key == "apiVersion")
    {
        return None;
    }
    stamp_parsed(text, &top, rv)
}

/// [`stamp`] for a document already split into its members.
pub fn stamp_parsed(text: &str, top: &Members<'_>, rv: i64) -> Option<Vec<u8>> {
    let metadata = top.get("metadata")?;
    let meta_start = offset(text, metadata)?;
    let members = Members::parse(metadata)?;
    let value = format!("\"{rv}\"");
    let mut out = Vec::with_capacity(text.len() + value.len() + 20);
    if let Some(existing) = members.get("resourceVersion") {
        let start = meta_start + offset(metadata, existing)?;
        out.extend_from_slice(&text.as_bytes()[..start]);
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(&text.as_bytes()[start + existing.len()..]);
        return Some(out);
    }
    // Before the first key declared after it, else before the closing brace.
    let at = match members
        .entries
        .iter()
        .find(|(k, _)| crate::go_json::sorts_after_resource_version(k))
    {
        Some((key, raw)) => {
            let value_start = offset(metadata, raw)?;
            let quoted = serde_json::to_string(key).ok()?;
            let key_start = value_start.checked_sub(quoted.len() + 1)?;
            if metadata.get(key_start..value_start)? != format!("{quoted}:") {
                return None;
            }
            (meta_start + key_start, true)
        }
        None => {
            if !metadata.ends_with('}') {
                return None;
            }
            (meta_start + metadata.len() - 1, false)
        }
    };
    let (at, before_key) = at;
    out.extend_from_slice(&text.as_bytes()[..at]);
    if !before_key && !members.entries.is_empty() {
        out.push(b',');
    }
    out.extend_from_slice(b"\"resourceVersion\":");
    out.extend_from_slice(value.as_bytes());
    if before_key {
        out.push(b',');
    }
    out.extend_from_slice(&text.as_bytes()[at..]);
    Some(out)
}

/// The value at a dotted `path` of a document split into members (`None`: absent).
pub fn raw_at<'a>(top: &Members<'a>, path: &str) -> Option<&'a str> {
    let mut parts = path.split('.');
    let mut current = top.get(parts.next()?)?;
    for part in parts {
        let members = Members::parse(current)?;
        current = members.get(part)?;
    }
    Some(current)
}

/// A member's JSON decoded (`Null` if it is not valid JSON).
pub fn decode_raw(raw: &str) -> Value {
    serde_json::from_str(raw).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn by_value(object: &Value, rv: i64) -> Vec<u8> {
        let mut object = object.clone();
        crate::meta::set_resource_version(&mut object, rv);
        crate::go_json::to_vec(&object)
    }

    #[test]
    fn stamping_bytes_matches_stamping_values() {
        let objects = [
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "namespace": "n", "uid": "u"}, "spec": {"nodeName": "x"}}),
            json!({"metadata": {"name": "a"}}),
            json!({"metadata": {}}),
            json!({"metadata": {"annotations": {"resourceVersion": "no"}, "zz": 1}, "a": {"metadata": {}}}),
            json!({"metadata": {"name": "a", "resourceVersion": "7", "uid": "u"}}),
            json!({"metadata": {"name": "quote\"d", "selfLink": "\u{e9}", "\u{e9}t\u{e9}": "x"}}),
            json!({"kind": "X", "metadata": {"labels": {"a": "b"}}, "status": {"phase": "Running"}}),
        ];
        for object in &objects {
            let stored = crate::storage::Storage::encode(object).expect("encodes");
            assert_eq!(
                stamp(&stored, 42).map(String::from_utf8),
                Some(Ok(String::from_utf8(by_value(object, 42)).expect("utf-8"))),
                "{object}"
            );
        }
    }

    #[test]
    fn unexpected_documents_are_left_to_the_value_path() {
        assert_eq!(stamp(b"[1]", 1), None);
        assert_eq!(stamp(b"{\"kind\":\"X\"}", 1), None);
        assert_eq!(stamp(b"{\"metadata\":[]}", 1), None);
        assert_eq!(stamp(b"not json", 1), None);
        assert_eq!(stamp(b"{\"metadata\":{}", 1), None);
        assert_eq!(stamp(b"{\"metadata\":{},\"x\":tru}", 1), None);
        assert_eq!(stamp(b"{\"metadata\":{}} x", 1), None);
        // Not compact: the key cannot be found before its value, so no splice is guessed.
        assert_eq!(stamp(b"{\"metadata\": {\"generation\" : 1}}", 1), None);
    }

    #[test]
    fn paths_reach_nested_values() {
        let text = r#"{"spec":{"nodeName":"n1","x":[1,{"a":"]}"}],"n":-1.5e3,"b":false},"type":"Normal","e":"\u00e9\""}"#;
        let top = Members::parse(text).expect("object");
        assert_eq!(
            raw_at(&top, "spec.nodeName").map(decode_raw),
            Some(json!("n1"))
        );
        assert_eq!(raw_at(&top, "type").map(decode_raw), Some(json!("Normal")));
        assert!(raw_at(&top, "spec.missing").is_none());
        assert!(raw_at(&top, "spec.x.y").is_none());
        assert_eq!(raw_at(&top, "spec.n").map(decode_raw), Some(json!(-1500.0)));
        assert_eq!(raw_at(&top, "spec.b").map(decode_raw), Some(json!(false)));
        assert_eq!(raw_at(&top, "e").map(decode_raw), Some(json!("\u{e9}\"")));
    }
}
