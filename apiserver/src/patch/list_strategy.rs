//! [`ListStrategy`]: how a list field of a kind merges, which strategic merge patch and
//! server-side apply share. Kubernetes reads it from the `patchStrategy`/`patchMergeKey` struct
//! tags of its types; kemu reads the same facts from the list metadata its OpenAPI schemas
//! publish ([`crate::openapi::list_fields`]).

use serde_json::{Map, Value};

use crate::openapi::list_fields::{self, ListType};

/// How a list field merges, as Kubernetes' `patchStrategy`/`patchMergeKey` struct tags say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListStrategy {
    /// No strategy: the patch's list replaces the original wholesale.
    Atomic,
    /// `patchStrategy: merge` with a merge key: elements are maps matched by that key.
    MergeByKey(&'static str),
    /// `patchStrategy: merge` on a list of primitives (e.g. `metadata.finalizers`): a set union.
    PrimitiveSet,
}

/// The list strategy of the list at `path` (field names from the object root; list elements add
/// no segment) in an object of `kind`.
pub fn list_strategy(kind: &str, path: &[String]) -> ListStrategy {
    let Some(field) = crate::openapi::list_field(kind, path) else {
        return ListStrategy::Atomic;
    };
    let merges = field
        .patch_strategy
        .is_some_and(|s| s.split(',').any(|s| s == "merge"));
    match (merges, field.patch_merge_key, field.list_type) {
        (true, Some(key), _) => ListStrategy::MergeByKey(key),
        (true, None, ListType::Set | ListType::Atomic) => ListStrategy::PrimitiveSet,
        _ => ListStrategy::Atomic,
    }
}

/// The managed-fields path element of `item`, an element of the keyed list at `path` whose
/// merge key is `merge_key`: `k:{"name":"nginx"}`, or with every key the schema's
/// `x-kubernetes-list-map-keys` names (`k:{"containerPort":80,"protocol":"TCP"}`), a key the
/// element leaves out taking its default. `None` when the element lacks a key.
pub fn element_id(
    kind: &str,
    path: &[String],
    merge_key: &'static str,
    item: &Value,
) -> Option<String> {
    let id = element_key(kind, path, merge_key, item.as_object()?).ok()?;
    Some(format!("k:{}", Value::Object(id)))
}

/// What identifies `item` in the keyed list at `path` under server-side apply, as
/// structured-merge-diff keys a map-type list: its value of every `x-kubernetes-list-map-keys`
/// key (just `merge_key` for a list without them), a key it leaves out taking its default. The
/// error is the first key it lacks that has no default.
pub fn element_key(
    kind: &str,
    path: &[String],
    merge_key: &'static str,
    item: &Map<String, Value>,
) -> Result<Map<String, Value>, &'static str> {
    let keys = match crate::openapi::list_field(kind, path).map(|f| f.list_type) {
        Some(ListType::Map(keys)) => keys,
        _ => std::slice::from_ref(&merge_key),
    };
    let mut id = Map::new();
    for key in keys {
        let value = key_value(item.get(*key), key).ok_or(*key)?;
        id.insert(key.to_string(), value);
    }
    Ok(id)
}

/// Whether `item` is the element a `k:` path element's keys (`id`) identify.
pub fn is_element(item: &Value, id: &Map<String, Value>) -> bool {
    id.iter()
        .all(|(key, value)| key_value(item.get(key), key).as_ref() == Some(value))
}

/// An element's value of a list-map key (`value`), or the key's default.
fn key_value(value: Option<&Value>, key: &str) -> Option<Value> {
    match value {
        Some(value) if !value.is_null() => Some(value.clone()),
        _ => list_fields::map_key_default(key).map(Value::from),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ListStrategy::{Atomic, MergeByKey, PrimitiveSet};

    fn strategy(kind: &str, path: &str) -> ListStrategy {
        let path: Vec<String> = path.split('.').map(str::to_string).collect();
        list_strategy(kind, &path)
    }

    #[test]
    fn strategies_follow_the_schemas() {
        assert_eq!(strategy("Pod", "spec.containers"), MergeByKey("name"));
        assert_eq!(
            strategy("Pod", "spec.containers.ports"),
            MergeByKey("containerPort")
        );
        assert_eq!(strategy("Pod", "spec.containers.args"), Atomic);
        assert_eq!(strategy("Pod", "spec.volumes"), MergeByKey("name"));
        assert_eq!(strategy("Pod", "spec.tolerations"), Atomic);
        assert_eq!(strategy("Pod", "status.conditions"), MergeByKey("type"));
        assert_eq!(strategy("Pod", "status.hostIPs"), MergeByKey("ip"));
        assert_eq!(strategy("Pod", "metadata.finalizers"), PrimitiveSet);
        assert_eq!(
            strategy("Pod", "metadata.ownerReferences"),
            MergeByKey("uid")
        );
        assert_eq!(
            strategy("Deployment", "spec.template.spec.containers.env"),
            MergeByKey("name")
        );
        assert_eq!(
            strategy("Deployment", "spec.template.metadata.finalizers"),
            PrimitiveSet
        );
        assert_eq!(
            strategy(
                "CronJob",
                "spec.jobTemplate.spec.template.spec.initContainers"
            ),
            MergeByKey("name")
        );
        assert_eq!(
            strategy("Deployment", "status.conditions"),
            MergeByKey("type")
        );
        assert_eq!(strategy("Node", "spec.podCIDRs"), PrimitiveSet);
        assert_eq!(strategy("Node", "spec.taints"), Atomic);
        assert_eq!(strategy("Node", "status.addresses"), MergeByKey("type"));
        assert_eq!(strategy("Service", "spec.ports"), MergeByKey("port"));
        assert_eq!(strategy("Service", "spec.nope"), Atomic);
        // A custom kind: only its metadata's lists are known.
        assert_eq!(strategy("Widget", "metadata.finalizers"), PrimitiveSet);
        assert_eq!(strategy("Widget", "spec.items"), Atomic);
    }

    #[test]
    fn element_ids_use_every_map_key() {
        let path = |p: &str| -> Vec<String> { p.split('.').map(str::to_string).collect() };
        let ports = path("spec.containers.ports");
        let port = serde_json::json!({"containerPort": 80});
        assert_eq!(
            element_id("Pod", &ports, "containerPort", &port).as_deref(),
            Some(r#"k:{"containerPort":80,"protocol":"TCP"}"#)
        );
        let containers = path("spec.containers");
        let container = serde_json::json!({"name": "app", "image": "x"});
        assert_eq!(
            element_id("Pod", &containers, "name", &container).as_deref(),
            Some(r#"k:{"name":"app"}"#)
        );
        let spread = path("spec.topologySpreadConstraints");
        let constraint = serde_json::json!({"topologyKey": "zone"});
        assert_eq!(element_id("Pod", &spread, "topologyKey", &constraint), None);
    }
}
