//! RFC 7386 JSON merge patch (`application/merge-patch+json`), applied by the `json-patch` crate.

use serde_json::Value;

/// Applies an RFC 7386 JSON merge patch to `target` in place: objects merge recursively, `null`
/// removes a member, anything else (arrays included) replaces.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    json_patch::merge(target, patch);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::{apply, PatchType};
    use serde_json::json;

    fn merged(target: Value, patch: Value) -> Value {
        let mut target = target;
        merge_patch(&mut target, &patch);
        target
    }

    /// RFC 7386 appendix A.
    #[test]
    fn rfc7386_examples() {
        let cases = [
            (json!({"a":"b"}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"b"}), json!({"b":"c"}), json!({"a":"b","b":"c"})),
            (json!({"a":"b"}), json!({"a":null}), json!({})),
            (
                json!({"a":"b","b":"c"}),
                json!({"a":null}),
                json!({"b":"c"}),
            ),
            (json!({"a":["b"]}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"c"}), json!({"a":["b"]}), json!({"a":["b"]})),
            (
                json!({"a":{"b":"c"}}),
                json!({"a":{"b":"d","c":null}}),
                json!({"a":{"b":"d"}}),
            ),
            (json!({"a":[{"b":"c"}]}), json!({"a":[1]}), json!({"a":[1]})),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a":"b"}), json!(["c"]), json!(["c"])),
            (json!({"a":"foo"}), json!(null), json!(null)),
            (json!({"a":"foo"}), json!("bar"), json!("bar")),
            (json!({"e":null}), json!({"a":1}), json!({"e":null,"a":1})),
            (json!([1, 2]), json!({"a":"b","c":null}), json!({"a":"b"})),
            (
                json!({}),
                json!({"a":{"bb":{"ccc":null}}}),
                json!({"a":{"bb":{}}}),
            ),
        ];
        for (target, patch, expected) in cases {
            assert_eq!(
                merged(target.clone(), patch.clone()),
                expected,
                "{target} + {patch}"
            );
        }
    }

    #[test]
    fn merge_patch_via_apply_removes_label() {
        let pod = json!({"metadata":{"name":"p","labels":{"a":"1","b":"2"}}});
        let out = apply(
            "Pod",
            &pod,
            br#"{"metadata":{"labels":{"a":null,"c":"3"}}}"#,
            PatchType::Merge,
            "kubectl-label",
            false,
        )
        .unwrap();
        assert_eq!(out["metadata"]["labels"], json!({"b":"2","c":"3"}));
    }
}
