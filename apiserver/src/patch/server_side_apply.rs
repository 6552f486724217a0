//! Server-side apply (`application/apply-patch+yaml`): the applied configuration merged into
//! the object, and the manager's `metadata.managedFields` entry (FieldsV1) rewritten.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value};

use super::error::{malformed, PatchError};
use super::list_strategy::{element_id, is_element, list_strategy, ListStrategy, ObjectType};
use super::strategic_merge::StrategicMerger;
use crate::field_manager::{self, FieldSet, Writer};

/// Server-side apply of `config` to `original` (`null` when the object doesn't exist yet).
///
/// Changing a field another manager owns is a conflict unless `force` is set (see
/// [`field_manager::apply_ownership`]). Keyed lists merge as structured-merge-diff merges
/// them: an element is identified by every `x-kubernetes-list-map-keys` key, a key it leaves out
/// taking its default (container ports by `containerPort` and `protocol`, `TCP` when absent), both
/// when merging and in managed fields (`k:{"containerPort":80,"protocol":"TCP"}`). An element
/// lacking a key without a default is an error. Simplification, compared with Kubernetes:
/// - Fields the manager applied before and omits now are removed unless another manager's
///   `managedFields` entry covers them.
pub(super) fn server_side_apply(
    kind: ObjectType<'_>,
    original: &Value,
    config: Value,
    field_manager: &str,
    force: bool,
    now: DateTime<Utc>,
) -> Result<Value, PatchError> {
    let Value::Object(mut config) = config else {
        return Err(malformed("an apply configuration must be an object"));
    };
    let api_version = config
        .get("apiVersion")
        .and_then(Value::as_str)
        .ok_or_else(|| malformed("an apply configuration needs a string apiVersion"))?
        .to_string();
    match config.get("kind").and_then(Value::as_str) {
        Some(k) if k == kind.name => {}
        Some(k) => {
            return Err(malformed(format!(
                "the apply configuration's kind {k:?} doesn't match {:?}",
                kind.name
            )))
        }
        None => return Err(malformed("an apply configuration needs a string kind")),
    }
    // An applier can't claim managedFields, and `null` in an apply configuration means "not set".
    if let Some(Value::Object(metadata)) = config.get_mut("metadata") {
        metadata.remove("managedFields");
    }
    prune_nulls(&mut config);

    let base = match original {
        Value::Null => Map::new(),
        Value::Object(map) => map.clone(),
        _ => return Err(malformed("the stored object is not a JSON object")),
    };
    let writer = Writer {
        manager: field_manager,
        kind,
        api_version: &api_version,
        subresource: None,
        has_status: false,
    };
    // What the manager owned before, less what no one can own (kubectl's move from client-side
    // apply may give it the object's name): dropping those would drop the name itself.
    let owned = |entry: &field_manager::Entry| {
        let mut fields = entry.fields.clone();
        writer.strip(&mut fields);
        fields.to_fields_v1().as_object().cloned()
    };
    let entries = field_manager::decode(original);
    let is_ours = |e: &field_manager::Entry| e.manager == field_manager && e.operation == "Apply";
    let previous = entries.iter().find(|e| is_ours(e)).and_then(owned);
    let others: Vec<Map<String, Value>> = entries
        .iter()
        .filter(|e| !is_ours(e))
        .filter_map(owned)
        .collect();

    let new_fields = apply_field_set(kind, &config);
    let merger = StrategicMerger {
        kind,
        directives: false,
        list_map_keys: true,
    };
    let mut merged = Value::Object(merger.merge_map(base, &config, &mut Vec::new())?);
    if let Some(previous) = &previous {
        let others: Vec<&Map<String, Value>> = others.iter().collect();
        remove_disowned(&mut merged, previous, Some(&new_fields), &others);
    }

    let applied = FieldSet::from_fields_v1(&Value::Object(new_fields));
    let time = now.to_rfc3339_opts(SecondsFormat::Secs, true);
    let managed = field_manager::apply_ownership(&writer, original, &merged, applied, force, &time)
        .map_err(|conflicts| PatchError::Conflict {
            message: field_manager::conflict_message(&conflicts),
            conflicts,
        })?;
    field_manager::sync_last_applied(field_manager, original, &mut merged, &Value::Object(config));
    if let Value::Object(object) = &mut merged {
        let metadata = object
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        if !metadata.is_object() {
            *metadata = Value::Object(Map::new());
        }
    }
    field_manager::encode(&mut merged, managed);
    Ok(merged)
}

fn prune_nulls(map: &mut Map<String, Value>) {
    map.retain(|_, v| !v.is_null());
    for value in map.values_mut() {
        prune_nulls_in(value);
    }
}

fn prune_nulls_in(value: &mut Value) {
    match value {
        Value::Object(map) => prune_nulls(map),
        Value::Array(items) => items.iter_mut().for_each(prune_nulls_in),
        _ => {}
    }
}

/// The FieldsV1 set of an apply configuration, in Kubernetes' format: `f:<field>` for fields,
/// `k:<json of merge key>` for keyed list elements (which carry `"."` for the element itself),
/// `v:<json>` for set elements; a leaf is `{}`.
fn apply_field_set(kind: ObjectType<'_>, config: &Map<String, Value>) -> Map<String, Value> {
    let mut set = object_field_set(kind, config, &mut Vec::new());
    set.remove("f:apiVersion");
    set.remove("f:kind");
    if let Some(Value::Object(metadata)) = set.get_mut("f:metadata") {
        for field in field_manager::UNMANAGED_METADATA {
            metadata.remove(&format!("f:{field}"));
        }
        if metadata.is_empty() {
            set.remove("f:metadata");
        }
    }
    set
}

fn object_field_set(
    kind: ObjectType<'_>,
    object: &Map<String, Value>,
    path: &mut Vec<String>,
) -> Map<String, Value> {
    let mut set = Map::new();
    for (key, value) in object {
        path.push(key.clone());
        set.insert(
            format!("f:{key}"),
            Value::Object(value_field_set(kind, value, path)),
        );
        path.pop();
    }
    set
}

fn value_field_set(
    kind: ObjectType<'_>,
    value: &Value,
    path: &mut Vec<String>,
) -> Map<String, Value> {
    match value {
        Value::Object(object) => object_field_set(kind, object, path),
        Value::Array(items) => match list_strategy(kind, path) {
            // An atomic list is owned as a whole.
            ListStrategy::Atomic => Map::new(),
            ListStrategy::PrimitiveSet => items
                .iter()
                .map(|item| (format!("v:{item}"), Value::Object(Map::new())))
                .collect(),
            ListStrategy::MergeByKey(key) => {
                let mut set = Map::new();
                for item in items {
                    let (Some(object), Some(id)) =
                        (item.as_object(), element_id(kind, path, key, item))
                    else {
                        continue;
                    };
                    let mut element = object_field_set(kind, object, path);
                    element.insert(".".to_string(), Value::Object(Map::new()));
                    set.insert(id, Value::Object(element));
                }
                set
            }
        },
        _ => Map::new(),
    }
}

/// Removes from `value` what `previous` (the manager's last applied field set) has and `current`
/// (its new one) lacks, unless another manager's set covers it.
fn remove_disowned(
    value: &mut Value,
    previous: &Map<String, Value>,
    current: Option<&Map<String, Value>>,
    others: &[&Map<String, Value>],
) {
    for (path_element, previous_child) in previous {
        if path_element == "." {
            continue;
        }
        let current_child = current
            .and_then(|c| c.get(path_element))
            .and_then(Value::as_object);
        let others_child: Vec<&Map<String, Value>> = others
            .iter()
            .filter_map(|o| o.get(path_element).and_then(Value::as_object))
            .collect();
        // Only a node the manager owned itself goes whole; below a node it merely reached
        // through (`f:metadata`), only what it owned there.
        let owned_itself = previous_child
            .as_object()
            .is_some_and(|c| c.is_empty() || c.contains_key("."));
        if current_child.is_none() && others_child.is_empty() && owned_itself {
            remove_path_element(value, path_element);
            continue;
        }
        let Some(previous_child) = previous_child.as_object() else {
            continue;
        };
        let emptied = match locate_path_element(value, path_element) {
            Some(child) => {
                let had_content = !is_empty_container(child);
                remove_disowned(child, previous_child, current_child, &others_child);
                had_content && is_empty_container(child)
            }
            None => false,
        };
        // A map or list left empty by the removal goes too, unless still applied.
        if emptied && current_child.is_none() {
            remove_path_element(value, path_element);
        }
    }
}

fn is_empty_container(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.is_empty(),
        Value::Array(items) => items.is_empty(),
        _ => false,
    }
}

/// Where a FieldsV1 path element (`f:`, `k:`, `v:`, `i:`) points inside `value`, as an index into
/// a list or a key of a map.
enum Slot {
    Key(String),
    Index(usize),
}

fn slot_of(value: &Value, path_element: &str) -> Option<Slot> {
    if let Some(field) = path_element.strip_prefix("f:") {
        return value
            .get(field)
            .is_some()
            .then(|| Slot::Key(field.to_string()));
    }
    let items = value.as_array()?;
    if let Some(key) = path_element.strip_prefix("k:") {
        let key: Map<String, Value> = serde_json::from_str(key).ok()?;
        return items
            .iter()
            .position(|item| is_element(item, &key))
            .map(Slot::Index);
    }
    if let Some(element) = path_element.strip_prefix("v:") {
        let element: Value = serde_json::from_str(element).ok()?;
        return items.iter().position(|i| *i == element).map(Slot::Index);
    }
    let index: usize = path_element.strip_prefix("i:")?.parse().ok()?;
    (index < items.len()).then_some(Slot::Index(index))
}

fn locate_path_element<'v>(value: &'v mut Value, path_element: &str) -> Option<&'v mut Value> {
    match slot_of(value, path_element)? {
        Slot::Key(key) => value.get_mut(&key),
        Slot::Index(index) => value.get_mut(index),
    }
}

fn remove_path_element(value: &mut Value, path_element: &str) {
    match (slot_of(value, path_element), value) {
        (Some(Slot::Key(key)), Value::Object(map)) => {
            map.remove(&key);
        }
        (Some(Slot::Index(index)), Value::Array(items)) => {
            items.remove(index);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::{apply, apply_at, PatchType};
    use chrono::TimeZone;
    use serde_json::json;

    fn at(second: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2025, 1, 2, 3, 4, second)
            .single()
            .unwrap()
    }

    const APPLY_NGINX: &str = "
apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: default
  labels:
    app: web
spec:
  containers:
  - name: nginx
    image: nginx:1.25
    ports:
    - containerPort: 80
";

    #[test]
    fn ssa_merges_custom_lists_by_the_crd_schema() {
        let schema = crate::crd::schema::Schema::parse(&json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {
                "ports": {"type": "array", "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "properties": {
                        "name": {"type": "string"}, "port": {"type": "integer"}}}},
                "tags": {"type": "array", "x-kubernetes-list-type": "set",
                    "items": {"type": "string"}},
                "args": {"type": "array", "items": {"type": "string"}}}}}
        }))
        .unwrap();
        let widget = ObjectType {
            name: "Widget",
            schema: Some(&schema),
        };
        let config = |ports: Value, tags: Value, args: Value| {
            json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
                "spec": {"ports": ports, "tags": tags, "args": args}})
            .to_string()
        };
        let first = apply_at(
            widget,
            &Value::Null,
            config(
                json!([{"name": "http", "port": 80}]),
                json!(["a"]),
                json!(["x"]),
            )
            .as_bytes(),
            PatchType::Apply,
            "one",
            false,
            at(1),
        )
        .unwrap();
        // A second manager adds an element and a set member: both lists keep the first's.
        let second = apply_at(
            widget,
            &first,
            json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
                "spec": {"ports": [{"name": "admin", "port": 9}], "tags": ["b"]}})
            .to_string()
            .as_bytes(),
            PatchType::Apply,
            "two",
            false,
            at(2),
        )
        .unwrap();
        assert_eq!(
            second["spec"]["ports"],
            json!([{"name": "http", "port": 80}, {"name": "admin", "port": 9}])
        );
        assert_eq!(second["spec"]["tags"], json!(["a", "b"]));
        assert_eq!(
            second["metadata"]["managedFields"][1]["fieldsV1"],
            json!({"f:spec": {"f:ports": {"k:{\"name\":\"admin\"}": {".": {}, "f:name": {}, "f:port": {}}},
                "f:tags": {"v:\"b\"": {}}}})
        );
        // The atomic list and the first manager's element are the first manager's: changing
        // them is a conflict naming the fields.
        let taken = apply_at(
            widget,
            &second,
            config(
                json!([{"name": "http", "port": 81}]),
                json!([]),
                json!(["z"]),
            )
            .as_bytes(),
            PatchType::Apply,
            "two",
            false,
            at(3),
        )
        .unwrap_err();
        let PatchError::Conflict { message, .. } = taken else {
            panic!("not a conflict: {taken:?}");
        };
        assert!(
            message.contains(".spec.ports[name=\"http\"].port") && message.contains(".spec.args"),
            "{message}"
        );
    }

    #[test]
    fn ssa_create_from_nothing() {
        let out = apply_at(
            "Pod",
            &Value::Null,
            APPLY_NGINX.as_bytes(),
            PatchType::Apply,
            "kubectl",
            false,
            at(5),
        )
        .unwrap();
        assert_eq!(out["metadata"]["name"], "web");
        assert_eq!(out["spec"]["containers"][0]["image"], "nginx:1.25");
        assert_eq!(
            out["metadata"]["managedFields"],
            json!([{
                "manager": "kubectl",
                "operation": "Apply",
                "apiVersion": "v1",
                "time": "2025-01-02T03:04:05Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {
                    "f:metadata": {"f:labels": {"f:app": {}}},
                    "f:spec": {"f:containers": {"k:{\"name\":\"nginx\"}": {
                        ".": {}, "f:name": {}, "f:image": {},
                        "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}
                    }}}
                }
            }])
        );
    }

    #[test]
    fn ssa_update_keeps_other_fields_and_replaces_own_entry() {
        let mut stored = apply_at(
            "Pod",
            &Value::Null,
            APPLY_NGINX.as_bytes(),
            PatchType::Apply,
            "kubectl",
            false,
            at(5),
        )
        .unwrap();
        // Fields set by someone else (a controller, defaulting) must survive a re-apply.
        stored["metadata"]["uid"] = json!("u-1");
        stored["metadata"]["labels"]["extra"] = json!("kept");
        stored["spec"]["containers"][0]["imagePullPolicy"] = json!("IfNotPresent");
        stored["spec"]["nodeName"] = json!("node-1");
        stored["metadata"]["managedFields"]
            .as_array_mut()
            .unwrap()
            .push(
                json!({"manager": "labeller", "operation": "Update", "apiVersion": "v1",
                         "fieldsType": "FieldsV1",
                         "fieldsV1": {"f:metadata": {"f:labels": {"f:extra": {}}}}}),
            );

        // The new configuration drops the label and the port, adds an env var.
        let config = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "default", "annotations": {"a": "b"}},
            "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27",
                                     "env": [{"name": "E", "value": "1"}]}]}
        });
        let out = apply_at(
            "Pod",
            &stored,
            config.to_string().as_bytes(),
            PatchType::Apply,
            "kubectl",
            true,
            at(9),
        )
        .unwrap();
        assert_eq!(out["metadata"]["uid"], "u-1");
        assert_eq!(out["metadata"]["labels"], json!({"extra": "kept"}));
        assert_eq!(out["metadata"]["annotations"], json!({"a": "b"}));
        assert_eq!(out["spec"]["nodeName"], "node-1");
        let nginx = &out["spec"]["containers"][0];
        assert_eq!(nginx["image"], "nginx:1.27");
        assert_eq!(nginx["imagePullPolicy"], "IfNotPresent");
        assert_eq!(nginx["env"], json!([{"name": "E", "value": "1"}]));
        assert!(nginx.get("ports").is_none(), "dropped port kept: {nginx}");

        let managed = out["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(managed.len(), 2);
        // kube-apiserver's order: Apply entries before Update ones.
        assert_eq!(managed[0]["manager"], "kubectl");
        assert_eq!(managed[1]["manager"], "labeller");
        assert_eq!(managed[0]["time"], "2025-01-02T03:04:09Z");
        assert_eq!(
            managed[0]["fieldsV1"]["f:metadata"],
            json!({"f:annotations": {"f:a": {}}})
        );

        // The same configuration applied again changes nothing, not even the entry's time.
        let again = apply_at(
            "Pod",
            &out,
            config.to_string().as_bytes(),
            PatchType::Apply,
            "kubectl",
            false,
            at(30),
        )
        .unwrap();
        assert_eq!(again, out);
    }

    #[test]
    fn ssa_json_body_and_content_type() {
        let out = apply(
            "ConfigMap",
            &Value::Null,
            br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","finalizers":["x"]},"data":{"k":"v"}}"#,
            PatchType::from_content_type("application/apply-patch+yaml; charset=utf-8").unwrap(),
            "me",
            false,
        )
        .unwrap();
        assert_eq!(out["data"], json!({"k": "v"}));
        assert_eq!(
            out["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:data": {"f:k": {}}, "f:metadata": {"f:finalizers": {"v:\"x\"": {}}}})
        );
    }

    /// Applies the ports of one container `app` of Pod `web` as `manager`.
    fn apply_ports(live: &Value, ports: Value, manager: &str) -> Result<Value, PatchError> {
        let config = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"containers": [{"name": "app", "image": "x", "ports": ports}]}
        });
        apply_at(
            "Pod",
            live,
            config.to_string().as_bytes(),
            PatchType::Apply,
            manager,
            false,
            at(5),
        )
    }

    fn port_ids(object: &Value) -> Vec<String> {
        let fields = &object["metadata"]["managedFields"][0]["fieldsV1"];
        let ports = &fields["f:spec"]["f:containers"]["k:{\"name\":\"app\"}"]["f:ports"];
        ports.as_object().unwrap().keys().cloned().collect()
    }

    #[test]
    fn ssa_keys_ports_by_port_and_protocol() {
        let both = json!([
            {"containerPort": 80, "protocol": "TCP", "name": "web"},
            {"containerPort": 80, "protocol": "UDP", "name": "quic"}
        ]);
        let out = apply_ports(&Value::Null, both.clone(), "a").unwrap();
        assert_eq!(out["spec"]["containers"][0]["ports"], both);
        assert_eq!(
            port_ids(&out),
            [
                r#"k:{"containerPort":80,"protocol":"TCP"}"#,
                r#"k:{"containerPort":80,"protocol":"UDP"}"#
            ]
        );
        // Onto an object holding only 80/TCP, 80/UDP is a second element.
        let tcp = apply_ports(&Value::Null, json!([both[0]]), "a").unwrap();
        let out = apply_ports(&tcp, both.clone(), "a").unwrap();
        assert_eq!(out["spec"]["containers"][0]["ports"], both);
        // Dropping 80/UDP from the configuration removes that element only.
        let out = apply_ports(&out, json!([both[0]]), "a").unwrap();
        assert_eq!(out["spec"]["containers"][0]["ports"], json!([both[0]]));
    }

    #[test]
    fn ssa_port_without_protocol_is_tcp() {
        let udp = apply_ports(
            &Value::Null,
            json!([{"containerPort": 80, "protocol": "UDP"}]),
            "a",
        )
        .unwrap();
        // No protocol: 80/TCP, a new element beside 80/UDP.
        let out = apply_ports(
            &udp,
            json!([{"containerPort": 80, "protocol": "UDP"}, {"containerPort": 80, "name": "web"}]),
            "a",
        )
        .unwrap();
        assert_eq!(
            out["spec"]["containers"][0]["ports"],
            json!([{"containerPort": 80, "protocol": "UDP"}, {"containerPort": 80, "name": "web"}])
        );
        assert_eq!(
            port_ids(&out),
            [
                r#"k:{"containerPort":80,"protocol":"TCP"}"#,
                r#"k:{"containerPort":80,"protocol":"UDP"}"#
            ]
        );
        // An explicit TCP is the same element as the one without a protocol.
        let out = apply_ports(
            &out,
            json!([{"containerPort": 80, "protocol": "UDP"},
                   {"containerPort": 80, "protocol": "TCP", "name": "http"}]),
            "a",
        )
        .unwrap();
        assert_eq!(
            out["spec"]["containers"][0]["ports"],
            json!([{"containerPort": 80, "protocol": "UDP"},
                   {"containerPort": 80, "name": "http", "protocol": "TCP"}])
        );
    }

    #[test]
    fn ssa_element_without_a_key_lacking_a_default_is_refused() {
        let config = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web"},
            "spec": {"topologySpreadConstraints": [{"topologyKey": "zone", "maxSkew": 1}]}
        });
        let err = apply(
            "Pod",
            &Value::Null,
            config.to_string().as_bytes(),
            PatchType::Apply,
            "a",
            false,
        )
        .unwrap_err();
        assert!(
            matches!(err, PatchError::MissingMergeKey { ref key, .. } if key == "whenUnsatisfiable"),
            "{err:?}"
        );
    }
}
