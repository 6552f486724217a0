//! DefaultTolerationSeconds: a pod tolerates its node being not-ready or unreachable for 300 s
//! (the taints the node lifecycle controller sets), unless it already says otherwise.

use serde_json::{json, Value};

/// How long, by default, a pod stays on a node that is not ready or unreachable.
pub const DEFAULT_TOLERATION_SECONDS: i64 = 300;

const NOT_READY: &str = "node.kubernetes.io/not-ready";
const UNREACHABLE: &str = "node.kubernetes.io/unreachable";

/// Adds the two NoExecute tolerations to a pod spec that has none for those taints.
pub fn add_defaults(spec: &mut Value) {
    let Some(map) = spec.as_object_mut() else {
        return;
    };
    let list = map.entry("tolerations").or_insert_with(|| json!([]));
    if !list.is_array() {
        *list = json!([]);
    }
    let Some(list) = list.as_array_mut() else {
        return;
    };
    for key in [NOT_READY, UNREACHABLE] {
        if !list.iter().any(|t| tolerates_no_execute(t, key)) {
            list.push(json!({
                "key": key,
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": DEFAULT_TOLERATION_SECONDS,
            }));
        }
    }
}

/// Whether a toleration already covers the NoExecute taint `key` (Kubernetes looks at key and
/// effect; an empty key with Exists tolerates everything).
fn tolerates_no_execute(toleration: &Value, key: &str) -> bool {
    let effect = toleration
        .get("effect")
        .and_then(Value::as_str)
        .unwrap_or("");
    let t_key = toleration.get("key").and_then(Value::as_str).unwrap_or("");
    (effect.is_empty() || effect == "NoExecute") && (t_key.is_empty() || t_key == key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_both_with_300_seconds() {
        let mut spec = json!({"containers": []});
        add_defaults(&mut spec);
        assert_eq!(
            spec["tolerations"],
            json!([
                {"key": NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            ])
        );
        // Idempotent: a second pass adds nothing.
        add_defaults(&mut spec);
        assert_eq!(spec["tolerations"].as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn keeps_the_pods_own_choice() {
        let mut spec = json!({"tolerations": [
            {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5},
            {"key": "dedicated", "operator": "Equal", "value": "x", "effect": "NoSchedule"},
        ]});
        add_defaults(&mut spec);
        let list = spec["tolerations"].as_array().cloned().unwrap_or_default();
        assert_eq!(list.len(), 3);
        assert_eq!(list[0]["tolerationSeconds"], 5);
        assert_eq!(list[2]["key"], NOT_READY);
        let mut everything = json!({"tolerations": [{"operator": "Exists"}]});
        add_defaults(&mut everything);
        assert_eq!(everything["tolerations"].as_array().map(Vec::len), Some(1));
    }
}
