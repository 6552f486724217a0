//! Priority: a pod's `priority` and `preemptionPolicy` come from its PriorityClass (or the
//! cluster's globalDefault class, or 0).

use serde_json::{json, Value};

use super::policy::PriorityClasses;

/// The classes every cluster has (kube-apiserver creates them at start-up).
pub const SYSTEM_CLASSES: &[(&str, i64, &str)] = &[
    (
        "system-node-critical",
        2_000_001_000,
        "Used for system critical pods that must not be moved from their current node.",
    ),
    (
        "system-cluster-critical",
        2_000_000_000,
        "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
    ),
];

const DEFAULT_PREEMPTION: &str = "PreemptLowerPriority";

/// Sets the pod's priority from `classes` (every PriorityClass). The error is the reason the
/// pod is forbidden.
pub fn admit(pod: &mut Value, classes: &PriorityClasses) -> Result<(), String> {
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    let requested = spec
        .get("priorityClassName")
        .and_then(Value::as_str)
        .unwrap_or("");
    let class = if requested.is_empty() {
        classes.global_default()
    } else {
        let found = classes.named(requested);
        if found.is_none() {
            return Err(format!("no PriorityClass with name {requested} was found"));
        }
        found
    };
    let (name, value, preemption) = match class {
        Some(c) => (
            c.name.as_str(),
            c.value,
            c.preemption_policy.as_deref().unwrap_or(DEFAULT_PREEMPTION),
        ),
        None => ("", 0, DEFAULT_PREEMPTION),
    };
    if let Some(given) = spec.get("priority").and_then(Value::as_i64) {
        if given != value {
            return Err(format!(
                "the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {value} from the given PriorityClass name"
            ));
        }
    }
    if !name.is_empty() {
        spec.insert("priorityClassName".into(), json!(name));
    }
    spec.insert("priority".into(), json!(value));
    spec.insert("preemptionPolicy".into(), json!(preemption));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(classes: &[Value]) -> PriorityClasses {
        PriorityClasses::from_values(classes)
    }

    fn class(name: &str, value: i64, global: bool) -> Value {
        json!({"metadata": {"name": name}, "value": value, "globalDefault": global})
    }

    #[test]
    fn no_class_means_zero() {
        let mut pod = json!({"spec": {}});
        admit(&mut pod, &set(&[class("high", 1000, false)])).expect("admitted");
        assert_eq!(pod["spec"]["priority"], 0);
        assert_eq!(pod["spec"]["preemptionPolicy"], "PreemptLowerPriority");
        assert!(pod["spec"].get("priorityClassName").is_none());
    }

    #[test]
    fn named_and_global_default_classes() {
        let classes = set(&[class("high", 1000, false), class("normal", 10, true)]);
        let mut pod = json!({"spec": {"priorityClassName": "high"}});
        admit(&mut pod, &classes).expect("admitted");
        assert_eq!(pod["spec"]["priority"], 1000);
        let mut plain = json!({"spec": {}});
        admit(&mut plain, &classes).expect("admitted");
        assert_eq!(plain["spec"]["priority"], 10);
        assert_eq!(plain["spec"]["priorityClassName"], "normal");
    }

    #[test]
    fn unknown_class_and_contradicting_priority_are_refused() {
        let mut pod = json!({"spec": {"priorityClassName": "nope"}});
        assert_eq!(
            admit(&mut pod, &set(&[])).expect_err("unknown"),
            "no PriorityClass with name nope was found"
        );
        let mut pod = json!({"spec": {"priorityClassName": "high", "priority": 5}});
        let err = admit(&mut pod, &set(&[class("high", 1000, false)])).expect_err("contradicts");
        assert!(
            err.starts_with("the integer value of priority (5) must not be provided"),
            "{err}"
        );
    }
}
