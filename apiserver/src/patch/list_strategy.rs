//! [`ListStrategy`]: how a list field of a kind merges, which strategic merge patch and
//! server-side apply share. Kubernetes reads it from the `patchStrategy`/`patchMergeKey` struct
//! tags of its types; kemu reads the same facts from the list metadata its OpenAPI schemas
//! publish ([`crate::openapi::list_fields`]). A custom kind's lists merge as its CRD's
//! structural schema says (`x-kubernetes-list-type` and `x-kubernetes-list-map-keys`; a list
//! without them is atomic), its metadata as every kind's.

use std::collections::HashSet;
use std::sync::Mutex;

use serde_json::{Map, Value};

use crate::crd::schema::Schema;
use crate::openapi::list_fields::{self, ListType};

/// The type of the object being merged: its kind, and for a custom kind the schema of its
/// version.
#[derive(Clone, Copy, Debug)]
pub struct ObjectType<'a> {
    pub name: &'a str,
    /// The structural schema of a custom kind; `None` for kemu's own kinds.
    pub schema: Option<&'a Schema>,
}

impl<'a> From<&'a str> for ObjectType<'a> {
    fn from(name: &'a str) -> ObjectType<'a> {
        ObjectType { name, schema: None }
    }
}

/// Where the facts about a list field come from.
enum ListSource<'a> {
    Table(Option<&'static list_fields::ListField>),
    Schema(Option<&'a Schema>),
}

impl<'a> ObjectType<'a> {
    fn list_source(&self, path: &[String]) -> ListSource<'a> {
        match self.schema {
            Some(schema) if path.first().is_none_or(|p| p != "metadata") => {
                ListSource::Schema(schema_at(schema, path).filter(|s| s.items.is_some()))
            }
            // Every kind's metadata is an ObjectMeta, whatever its schema says.
            Some(_) => ListSource::Table(crate::openapi::list_field("", path)),
            None => ListSource::Table(crate::openapi::list_field(self.name, path)),
        }
    }
}

/// The schema at `path` (list elements and map values add no segment).
fn schema_at<'s>(root: &'s Schema, path: &[String]) -> Option<&'s Schema> {
    let mut node = root;
    for segment in path {
        while let Some(items) = node.items.as_deref() {
            node = items;
        }
        node = match node.properties.get(segment) {
            Some(property) => property,
            None => node.additional()?,
        };
    }
    Some(node)
}

/// The keys of a CRD list, as the `&'static str` the merge code passes around: each distinct
/// key name is kept once for the life of the process.
fn key_name(key: &str) -> &'static str {
    static KEYS: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
    let mut keys = KEYS.lock().unwrap_or_else(|e| e.into_inner());
    let keys = keys.get_or_insert_with(HashSet::new);
    if let Some(found) = keys.get(key) {
        return found;
    }
    let leaked: &'static str = Box::leak(key.to_string().into_boxed_str());
    keys.insert(leaked);
    leaked
}

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
pub fn list_strategy(kind: ObjectType<'_>, path: &[String]) -> ListStrategy {
    let field = match kind.list_source(path) {
        ListSource::Table(Some(field)) => field,
        ListSource::Table(None) | ListSource::Schema(None) => return ListStrategy::Atomic,
        ListSource::Schema(Some(list)) => {
            return match (list.list_type.as_deref(), list.list_map_keys.first()) {
                (Some("map"), Some(key)) => ListStrategy::MergeByKey(key_name(key)),
                (Some("set"), _) => ListStrategy::PrimitiveSet,
                _ => ListStrategy::Atomic,
            };
        }
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
    kind: ObjectType<'_>,
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
    kind: ObjectType<'_>,
    path: &[String],
    merge_key: &'static str,
    item: &Map<String, Value>,
) -> Result<Map<String, Value>, &'static str> {
    let mut id = Map::new();
    match kind.list_source(path) {
        ListSource::Schema(Some(list)) if !list.list_map_keys.is_empty() => {
            let element = list.items.as_deref();
            for key in &list.list_map_keys {
                // A key the element leaves out takes its schema default.
                let default = || {
                    element
                        .and_then(|e| e.properties.get(key))
                        .and_then(|k| k.default.clone())
                };
                let value = match item.get(key) {
                    Some(value) if !value.is_null() => Some(value.clone()),
                    _ => default(),
                };
                id.insert(key.clone(), value.ok_or_else(|| key_name(key))?);
            }
        }
        source => {
            let keys = match source {
                ListSource::Table(Some(field)) => match field.list_type {
                    ListType::Map(keys) => keys,
                    _ => std::slice::from_ref(&merge_key),
                },
                _ => std::slice::from_ref(&merge_key),
            };
            for key in keys {
                let value = key_value(item.get(*key), key).ok_or(*key)?;
                id.insert(key.to_string(), value);
            }
        }
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
        list_strategy(kind.into(), &path)
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
    fn custom_kinds_merge_as_their_schema_says() {
        let schema = Schema::parse(&serde_json::json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {
                "ports": {"type": "array", "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["port", "protocol"],
                    "items": {"type": "object", "properties": {
                        "port": {"type": "integer"},
                        "protocol": {"type": "string", "default": "TCP"},
                        "rules": {"type": "array", "x-kubernetes-list-type": "set",
                            "items": {"type": "string"}}}}},
                "tags": {"type": "array", "x-kubernetes-list-type": "set",
                    "items": {"type": "string"}},
                "args": {"type": "array", "items": {"type": "string"}},
                "containers": {"type": "array", "items": {"type": "object"}}}}}
        }))
        .expect("a schema");
        let widget = ObjectType {
            name: "Widget",
            schema: Some(&schema),
        };
        let path = |p: &str| -> Vec<String> { p.split('.').map(str::to_string).collect() };
        let strategy = |p: &str| list_strategy(widget, &path(p));
        assert_eq!(strategy("spec.ports"), MergeByKey("port"));
        assert_eq!(strategy("spec.ports.rules"), PrimitiveSet);
        assert_eq!(strategy("spec.tags"), PrimitiveSet);
        assert_eq!(strategy("spec.args"), Atomic);
        // Not the Pod's containers: the schema says nothing, so atomic.
        assert_eq!(strategy("spec.containers"), Atomic);
        assert_eq!(strategy("spec.nope"), Atomic);
        assert_eq!(strategy("metadata.finalizers"), PrimitiveSet);
        assert_eq!(strategy("metadata.ownerReferences"), MergeByKey("uid"));
        let port = serde_json::json!({"port": 80});
        assert_eq!(
            element_id(widget, &path("spec.ports"), "port", &port).as_deref(),
            Some(r#"k:{"port":80,"protocol":"TCP"}"#)
        );
        let udp = serde_json::json!({"port": 80, "protocol": "UDP"});
        assert_eq!(
            element_id(widget, &path("spec.ports"), "port", &udp).as_deref(),
            Some(r#"k:{"port":80,"protocol":"UDP"}"#)
        );
        let keyless = serde_json::json!({"protocol": "UDP"});
        assert_eq!(
            element_id(widget, &path("spec.ports"), "port", &keyless),
            None
        );
    }

    #[test]
    fn element_ids_use_every_map_key() {
        let path = |p: &str| -> Vec<String> { p.split('.').map(str::to_string).collect() };
        let ports = path("spec.containers.ports");
        let port = serde_json::json!({"containerPort": 80});
        assert_eq!(
            element_id("Pod".into(), &ports, "containerPort", &port).as_deref(),
            Some(r#"k:{"containerPort":80,"protocol":"TCP"}"#)
        );
        let containers = path("spec.containers");
        let container = serde_json::json!({"name": "app", "image": "x"});
        assert_eq!(
            element_id("Pod".into(), &containers, "name", &container).as_deref(),
            Some(r#"k:{"name":"app"}"#)
        );
        let spread = path("spec.topologySpreadConstraints");
        let constraint = serde_json::json!({"topologyKey": "zone"});
        assert_eq!(
            element_id("Pod".into(), &spread, "topologyKey", &constraint),
            None
        );
    }
}
