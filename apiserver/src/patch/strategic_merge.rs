//! Strategic merge patch (`application/strategic-merge-patch+json`), what client-side
//! `kubectl apply`, `kubectl patch` and the components send.

use std::cmp::Ordering;

use serde_json::{Map, Value};

use super::error::{malformed, PatchError};
use super::list_strategy::{element_key, is_element, list_strategy, ListStrategy, ObjectType};

/// `$patch: replace|delete|merge`.
const PATCH_DIRECTIVE: &str = "$patch";
/// `$retainKeys: [..]`: keys of the original map to keep.
const RETAIN_KEYS_DIRECTIVE: &str = "$retainKeys";
/// `$setElementOrder/<field>: [..]`: the order of the merged list.
const SET_ELEMENT_ORDER_PREFIX: &str = "$setElementOrder/";
/// `$deleteFromPrimitiveList/<field>: [..]`: primitives to drop from a merged primitive list.
const DELETE_FROM_PRIMITIVE_LIST_PREFIX: &str = "$deleteFromPrimitiveList/";

/// Applies a strategic merge patch to `original` (an object of kind `kind`) and returns the
/// result. A `null` original counts as an empty object.
///
/// Follows Kubernetes' `strategicpatch` package, with these leniencies: `$patch: merge` in a map
/// is accepted as a no-op, `$setElementOrder` lists are not checked against the patch list, and a
/// `$patch: replace` element is also honoured in primitive lists.
pub fn strategic_merge<'k>(
    kind: impl Into<ObjectType<'k>>,
    original: &Value,
    patch: &Value,
) -> Result<Value, PatchError> {
    let Value::Object(patch) = patch else {
        return Err(malformed("a strategic merge patch must be a JSON object"));
    };
    if patch.get(PATCH_DIRECTIVE).and_then(Value::as_str) == Some("delete") {
        return Err(malformed("$patch: delete cannot delete the whole object"));
    }
    let base = original.as_object().cloned().unwrap_or_default();
    let merger = StrategicMerger {
        kind: kind.into(),
        directives: true,
        list_map_keys: false,
    };
    Ok(Value::Object(merger.merge_map(
        base,
        patch,
        &mut Vec::new(),
    )?))
}

/// One strategic merge of a patch into an object.
pub(super) struct StrategicMerger<'k> {
    /// Selects the list strategies (see [`list_strategy`]).
    pub(super) kind: ObjectType<'k>,
    /// Whether `$`-keys are directives. Server-side apply configurations carry none, so there they
    /// are ordinary (if unlikely) field names.
    pub(super) directives: bool,
    /// Whether elements of a keyed list match by every `x-kubernetes-list-map-keys` key, key
    /// defaults included (server-side apply, as structured-merge-diff does: container ports
    /// 80/TCP and 80/UDP are two elements), rather than by the patch merge key alone (strategic
    /// merge patch, as Kubernetes' `strategicpatch` does).
    pub(super) list_map_keys: bool,
}

impl StrategicMerger<'_> {
    pub(super) fn merge_map(
        &self,
        mut original: Map<String, Value>,
        patch: &Map<String, Value>,
        path: &mut Vec<String>,
    ) -> Result<Map<String, Value>, PatchError> {
        if self.directives {
            match patch.get(PATCH_DIRECTIVE) {
                None => {}
                Some(Value::String(d)) if d == "replace" => {
                    let mut content = patch.clone();
                    content.remove(PATCH_DIRECTIVE);
                    // Merging into nothing keeps the content but strips nested directives.
                    return self.merge_map(Map::new(), &content, path);
                }
                // Kubernetes leaves an empty map behind rather than removing the key.
                Some(Value::String(d)) if d == "delete" => return Ok(Map::new()),
                Some(Value::String(d)) if d == "merge" => {}
                Some(other) => {
                    return Err(malformed(format!(
                        "{}: unknown $patch directive {other}",
                        display_path(path)
                    )))
                }
            }
            if let Some(retain) = patch.get(RETAIN_KEYS_DIRECTIVE) {
                let keep = retain_keys(retain, patch, path)?;
                original.retain(|key, _| keep.contains(&key.as_str()));
            }
        }

        let mut orders = Vec::new();
        let mut deletions = Vec::new();
        for (key, patch_value) in patch {
            if self.directives {
                if key == PATCH_DIRECTIVE || key == RETAIN_KEYS_DIRECTIVE {
                    continue;
                }
                if let Some(field) = key.strip_prefix(SET_ELEMENT_ORDER_PREFIX) {
                    // The order is relative to the list before merging, so keep a copy of it.
                    let before = original.get(field).and_then(Value::as_array).cloned();
                    orders.push((field, patch_value, before.unwrap_or_default()));
                    continue;
                }
                if let Some(field) = key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST_PREFIX) {
                    deletions.push((field, patch_value));
                    continue;
                }
            }
            if patch_value.is_null() {
                original.remove(key);
                continue;
            }
            path.push(key.clone());
            let existing = original.remove(key);
            let merged = self.merge_value(existing, patch_value, path);
            path.pop();
            if let Some(merged) = merged? {
                original.insert(key.clone(), merged);
            }
        }

        for (field, values) in deletions {
            let Value::Array(values) = values else {
                return Err(malformed(format!(
                    "{}: {DELETE_FROM_PRIMITIVE_LIST_PREFIX}{field} must be a list",
                    display_path(path)
                )));
            };
            if let Some(Value::Array(items)) = original.get_mut(field) {
                items.retain(|item| !values.contains(item));
            }
        }
        for (field, order, before) in orders {
            let Value::Array(order) = order else {
                return Err(malformed(format!(
                    "{}: {SET_ELEMENT_ORDER_PREFIX}{field} must be a list",
                    display_path(path)
                )));
            };
            path.push(field.to_string());
            let key = match list_strategy(self.kind, path) {
                ListStrategy::MergeByKey(key) => Some(key),
                _ => None,
            };
            path.pop();
            if let Some(Value::Array(items)) = original.get_mut(field) {
                *items = order_elements(std::mem::take(items), order, &before, key);
            }
        }
        Ok(original)
    }

    /// Merges one patch value into an original value (absent if the key is new). `None` means
    /// the key should not appear in the result.
    fn merge_value(
        &self,
        original: Option<Value>,
        patch: &Value,
        path: &mut Vec<String>,
    ) -> Result<Option<Value>, PatchError> {
        match (original, patch) {
            (Some(Value::Object(original)), Value::Object(patch)) => {
                Ok(Some(Value::Object(self.merge_map(original, patch, path)?)))
            }
            (_, Value::Object(patch)) => {
                // A delete of a field that isn't there leaves nothing behind (as Kubernetes'
                // removeDirectives does for new values).
                if self.directives
                    && patch.get(PATCH_DIRECTIVE).and_then(Value::as_str) == Some("delete")
                {
                    return Ok(None);
                }
                Ok(Some(Value::Object(self.merge_map(
                    Map::new(),
                    patch,
                    path,
                )?)))
            }
            (Some(Value::Array(original)), Value::Array(patch)) => {
                Ok(Some(Value::Array(self.merge_list(original, patch, path)?)))
            }
            (_, Value::Array(patch)) => Ok(Some(Value::Array(self.merge_list(
                Vec::new(),
                patch,
                path,
            )?))),
            (_, scalar) => Ok(Some(scalar.clone())),
        }
    }

    fn merge_list(
        &self,
        original: Vec<Value>,
        patch: &[Value],
        path: &mut Vec<String>,
    ) -> Result<Vec<Value>, PatchError> {
        match list_strategy(self.kind, path) {
            ListStrategy::Atomic => self.clean_list(patch, path),
            ListStrategy::PrimitiveSet => {
                let mut replace = false;
                let mut additions = Vec::new();
                for item in patch {
                    match self.element_directive(item, path)? {
                        Some("replace") => replace = true,
                        Some(other) => {
                            return Err(malformed(format!(
                                "{}: $patch: {other} is not supported in a list of primitives",
                                display_path(path)
                            )))
                        }
                        None => additions.push(item.clone()),
                    }
                }
                let base = if replace { Vec::new() } else { original };
                let mut merged: Vec<Value> = Vec::with_capacity(base.len() + additions.len());
                for item in base.into_iter().chain(additions) {
                    if !merged.contains(&item) {
                        merged.push(item);
                    }
                }
                Ok(merged)
            }
            ListStrategy::MergeByKey(key) => self.merge_keyed_list(original, patch, key, path),
        }
    }

    fn merge_keyed_list(
        &self,
        mut original: Vec<Value>,
        patch: &[Value],
        key: &'static str,
        path: &mut Vec<String>,
    ) -> Result<Vec<Value>, PatchError> {
        let missing_key = |path: &[String], key: &str| PatchError::MissingMergeKey {
            path: display_path(path),
            key: key.to_string(),
        };
        let mut replace = false;
        let mut updates = Vec::new();
        for item in patch {
            let Value::Object(element) = item else {
                return Err(PatchError::TypeMismatch {
                    path: display_path(path),
                    reason: format!("the list merges maps by {key:?}, found {item}"),
                });
            };
            match self.element_directive(item, path)? {
                Some("delete") => {
                    let value = element.get(key).ok_or_else(|| missing_key(path, key))?;
                    original.retain(|o| o.get(key) != Some(value));
                }
                Some("replace") => replace = true,
                Some(other) => {
                    return Err(malformed(format!(
                        "{}: $patch: {other} is not supported in a list element",
                        display_path(path)
                    )))
                }
                None => updates.push(element),
            }
        }
        if replace {
            // The list becomes the patch's elements, without the directive marker.
            return updates
                .into_iter()
                .map(|element| Ok(Value::Object(self.merge_map(Map::new(), element, path)?)))
                .collect();
        }
        for element in updates {
            let position = if self.list_map_keys {
                let id = element_key(self.kind, path, key, element)
                    .map_err(|missing| missing_key(path, missing))?;
                original.iter().position(|o| is_element(o, &id))
            } else {
                let value = element.get(key).ok_or_else(|| missing_key(path, key))?;
                original.iter().position(|o| o.get(key) == Some(value))
            };
            match position {
                Some(i) => {
                    let base = match std::mem::take(&mut original[i]) {
                        Value::Object(map) => map,
                        _ => Map::new(),
                    };
                    original[i] = Value::Object(self.merge_map(base, element, path)?);
                }
                None => original.push(Value::Object(self.merge_map(Map::new(), element, path)?)),
            }
        }
        Ok(original)
    }

    /// The patch's list as the new value of an atomic list, with directives stripped.
    fn clean_list(
        &self,
        patch: &[Value],
        path: &mut Vec<String>,
    ) -> Result<Vec<Value>, PatchError> {
        let mut out = Vec::with_capacity(patch.len());
        for item in patch {
            if self.element_directive(item, path)?.is_some() {
                continue;
            }
            match item {
                Value::Null => out.push(Value::Null),
                other => out.extend(self.merge_value(None, other, path)?),
            }
        }
        Ok(out)
    }

    /// The `$patch` directive of a list element, if directives apply and it has one.
    fn element_directive<'v>(
        &self,
        item: &'v Value,
        path: &[String],
    ) -> Result<Option<&'v str>, PatchError> {
        if !self.directives {
            return Ok(None);
        }
        match item.get(PATCH_DIRECTIVE) {
            None => Ok(None),
            Some(Value::String(directive)) => Ok(Some(directive.as_str())),
            Some(other) => Err(malformed(format!(
                "{}: $patch must be a string, found {other}",
                display_path(path)
            ))),
        }
    }
}

/// Validates a `$retainKeys` list and returns the keys to keep. As in Kubernetes, every field the
/// patch sets must be among them.
fn retain_keys<'p>(
    retain: &'p Value,
    patch: &Map<String, Value>,
    path: &[String],
) -> Result<Vec<&'p str>, PatchError> {
    let bad = || {
        malformed(format!(
            "{}: $retainKeys must be a list of the field names the patch sets",
            display_path(path)
        ))
    };
    let Value::Array(keys) = retain else {
        return Err(bad());
    };
    let keep: Vec<&str> = keys
        .iter()
        .map(|k| k.as_str().ok_or_else(bad))
        .collect::<Result<_, _>>()?;
    let unlisted = patch.iter().any(|(key, value)| {
        !value.is_null() && !key.starts_with('$') && !keep.contains(&key.as_str())
    });
    if unlisted {
        return Err(bad());
    }
    Ok(keep)
}

/// What identifies a list element for ordering: its merge key's value, or itself for primitives.
fn element_id<'v>(item: &'v Value, key: Option<&str>) -> Option<&'v Value> {
    match key {
        Some(key) => item.get(key),
        None => Some(item),
    }
}

/// Orders a merged list as `$setElementOrder` asks, the way Kubernetes does: elements named in
/// `order` follow that order; the others ("server-only") keep their original relative order and
/// are interleaved by their position in the list before merging.
fn order_elements(
    merged: Vec<Value>,
    order: &[Value],
    before: &[Value],
    key: Option<&str>,
) -> Vec<Value> {
    let order_ids: Vec<&Value> = order.iter().filter_map(|o| element_id(o, key)).collect();
    let position = |ids: &[&Value], item: &Value| {
        element_id(item, key).and_then(|id| ids.iter().position(|other| *other == id))
    };
    let before_ids: Vec<&Value> = before.iter().filter_map(|o| element_id(o, key)).collect();

    let (mut ordered, mut server_only): (Vec<Value>, Vec<Value>) = merged
        .into_iter()
        .partition(|item| position(&order_ids, item).is_some());
    ordered.sort_by_key(|item| position(&order_ids, item));
    server_only.sort_by_key(|item| position(&before_ids, item).unwrap_or(usize::MAX));

    // Merge the two sorted runs: a server-only element goes first only when both elements were
    // in the original list and it came earlier there.
    let mut out = Vec::with_capacity(ordered.len() + server_only.len());
    let mut ordered = ordered.into_iter().peekable();
    let mut server_only = server_only.into_iter().peekable();
    loop {
        let take_server = match (server_only.peek(), ordered.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(s), Some(p)) => match (position(&before_ids, s), position(&before_ids, p)) {
                (Some(si), Some(pi)) => si.cmp(&pi) == Ordering::Less,
                _ => false,
            },
        };
        let next = if take_server {
            server_only.next()
        } else {
            ordered.next()
        };
        out.extend(next);
    }
    out
}

fn display_path(path: &[String]) -> String {
    if path.is_empty() {
        "<root>".to_string()
    } else {
        path.join(".")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn two_container_pod() -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web", "labels": {"app": "web", "tier": "fe"},
                         "finalizers": ["a/x", "b/y"]},
            "spec": {
                "containers": [
                    {"name": "nginx", "image": "nginx:1.25",
                     "args": ["-g", "daemon off;"],
                     "env": [{"name": "A", "value": "1"}],
                     "ports": [{"containerPort": 80, "protocol": "TCP"}]},
                    {"name": "sidecar", "image": "busybox", "command": ["sleep", "1d"]}
                ],
                "volumes": [{"name": "data", "emptyDir": {}}],
                "tolerations": [{"key": "k1", "operator": "Exists"}]
            }
        })
    }

    #[test]
    fn smp_kubectl_apply_changes_one_image() {
        let patch = json!({
            "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
            "spec": {
                "$setElementOrder/containers": [{"name": "nginx"}, {"name": "sidecar"}],
                "containers": [{"image": "nginx:1.27", "name": "nginx"}]
            }
        });
        let out = strategic_merge("Pod", &two_container_pod(), &patch).unwrap();
        let containers = out["spec"]["containers"].as_array().unwrap();
        assert_eq!(containers.len(), 2);
        assert_eq!(containers[0]["name"], "nginx");
        assert_eq!(containers[0]["image"], "nginx:1.27");
        // Untouched fields of the patched container survive.
        assert_eq!(containers[0]["args"], json!(["-g", "daemon off;"]));
        assert_eq!(containers[1], two_container_pod()["spec"]["containers"][1]);
        assert!(!out.to_string().contains('$'), "directive leaked: {out}");
        assert_eq!(out["metadata"]["labels"]["app"], "web");
    }

    #[test]
    fn smp_set_element_order_reorders() {
        let patch = json!({"spec": {
            "$setElementOrder/containers": [{"name": "sidecar"}, {"name": "new"}, {"name": "nginx"}],
            "containers": [{"name": "new", "image": "x"}]
        }});
        let out = strategic_merge("Pod", &two_container_pod(), &patch).unwrap();
        let names: Vec<&str> = out["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["sidecar", "new", "nginx"]);
    }

    #[test]
    fn smp_env_added_by_name_and_ports_by_container_port() {
        let patch = json!({"spec": {"containers": [{
            "name": "nginx",
            "env": [{"name": "B", "value": "2"}, {"name": "A", "value": "one"}],
            "ports": [{"containerPort": 80, "name": "http"}]
        }]}});
        let out = strategic_merge("Pod", &two_container_pod(), &patch).unwrap();
        let nginx = &out["spec"]["containers"][0];
        assert_eq!(
            nginx["env"],
            json!([{"name": "A", "value": "one"}, {"name": "B", "value": "2"}])
        );
        assert_eq!(
            nginx["ports"],
            json!([{"containerPort": 80, "protocol": "TCP", "name": "http"}])
        );
        assert_eq!(out["spec"]["containers"][1]["name"], "sidecar");
    }

    #[test]
    fn smp_delete_container() {
        let patch = json!({"spec": {
            "$setElementOrder/containers": [{"name": "nginx"}],
            "containers": [{"$patch": "delete", "name": "sidecar"}]
        }});
        let out = strategic_merge("Pod", &two_container_pod(), &patch).unwrap();
        let containers = out["spec"]["containers"].as_array().unwrap();
        assert_eq!(containers.len(), 1);
        assert_eq!(containers[0]["name"], "nginx");
        assert!(!out.to_string().contains("$patch"));
    }

    #[test]
    fn smp_replace_directives() {
        // As a list element: the list becomes the patch's other elements.
        let patch = json!({"spec": {"containers": [
            {"$patch": "replace"}, {"name": "only", "image": "x"}
        ]}});
        let out = strategic_merge("Pod", &two_container_pod(), &patch).unwrap();
        assert_eq!(
            out["spec"]["containers"],
            json!([{"name": "only", "image": "x"}])
        );
        // In a map: the map becomes the patch's content.
        let patch = json!({"metadata": {"labels": {"$patch": "replace", "new": "1"}}});
        let out = strategic_merge("Pod", &two_container_pod(), &patch).unwrap();
        assert_eq!(out["metadata"]["labels"], json!({"new": "1"}));
        // `$patch: delete` in a map leaves it empty, as Kubernetes does.
        let patch = json!({"metadata": {"labels": {"$patch": "delete"}}});
        let out = strategic_merge("Pod", &two_container_pod(), &patch).unwrap();
        assert_eq!(out["metadata"]["labels"], json!({}));
        // A list element without the merge key can't be matched.
        let patch = json!({"spec": {"containers": [{"image": "x"}]}});
        let err = strategic_merge("Pod", &two_container_pod(), &patch).unwrap_err();
        assert!(matches!(err, PatchError::MissingMergeKey { ref key, .. } if key == "name"));
        assert_eq!(err.http_code(), 422);
    }

    #[test]
    fn smp_retain_keys() {
        let deployment = json!({"spec": {"strategy": {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}
        }}});
        let patch = json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}});
        let out = strategic_merge("Deployment", &deployment, &patch).unwrap();
        assert_eq!(out["spec"]["strategy"], json!({"type": "Recreate"}));
        // Every key the patch sets must be retained.
        let patch = json!({"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {}}}});
        assert!(matches!(
            strategic_merge("Deployment", &deployment, &patch),
            Err(PatchError::Malformed { .. })
        ));
    }

    #[test]
    fn smp_finalizers_merge_and_delete_from_primitive_list() {
        let patch = json!({"metadata": {
            "$setElementOrder/finalizers": ["c/z", "b/y"],
            "$deleteFromPrimitiveList/finalizers": ["a/x"],
            "finalizers": ["c/z"]
        }});
        let out = strategic_merge("Pod", &two_container_pod(), &patch).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["c/z", "b/y"]));
        // Without directives, primitives union.
        let patch = json!({"metadata": {"finalizers": ["b/y", "d/w"]}});
        let out = strategic_merge("Pod", &two_container_pod(), &patch).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["a/x", "b/y", "d/w"]));
    }

    #[test]
    fn smp_null_deletes_label_and_atomic_lists_replace() {
        let patch = json!({
            "metadata": {"labels": {"tier": null}},
            "spec": {
                "containers": [{"name": "nginx", "args": ["--new"]}],
                "tolerations": [{"key": "k2", "operator": "Exists"}]
            }
        });
        let out = strategic_merge("Pod", &two_container_pod(), &patch).unwrap();
        assert_eq!(out["metadata"]["labels"], json!({"app": "web"}));
        assert_eq!(out["spec"]["containers"][0]["args"], json!(["--new"]));
        assert_eq!(
            out["spec"]["tolerations"],
            json!([{"key": "k2", "operator": "Exists"}])
        );
        assert_eq!(
            out["spec"]["volumes"],
            two_container_pod()["spec"]["volumes"]
        );
    }

    #[test]
    fn smp_deployment_template_containers_merge_by_name() {
        let deployment = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d"},
            "spec": {"replicas": 1, "template": {
                "metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [
                    {"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}]},
                    {"name": "b", "image": "b:1"}
                ]}
            }},
            "status": {"conditions": [
                {"type": "Available", "status": "True"},
                {"type": "Progressing", "status": "True"}
            ]}
        });
        let patch = json!({
            "spec": {"replicas": 3, "template": {"spec": {"containers": [
                {"name": "b", "image": "b:2"},
                {"name": "a", "env": [{"name": "Y", "value": "2"}]}
            ]}}},
            "status": {"conditions": [{"type": "Available", "status": "False"}]}
        });
        let out = strategic_merge("Deployment", &deployment, &patch).unwrap();
        assert_eq!(out["spec"]["replicas"], 3);
        assert_eq!(
            out["spec"]["template"]["spec"]["containers"],
            json!([
                {"name": "a", "image": "a:1",
                 "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]},
                {"name": "b", "image": "b:2"}
            ])
        );
        assert_eq!(out["status"]["conditions"][0]["status"], "False");
        assert_eq!(out["status"]["conditions"][1]["type"], "Progressing");
        // The same list in a kind without a pod template is atomic.
        let out = strategic_merge("ConfigMap", &deployment, &patch).unwrap();
        assert_eq!(
            out["spec"]["template"]["spec"]["containers"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
        assert!(out["spec"]["template"]["spec"]["containers"][1]
            .get("image")
            .is_none());
    }

    #[test]
    fn smp_service_ports_and_new_fields_drop_directives() {
        let service = json!({"spec": {"ports": [{"port": 80, "targetPort": 8080}]}});
        let patch = json!({"spec": {
            "ports": [{"port": 443, "targetPort": 8443}, {"port": 80, "name": "http"}],
            "selector": {"$patch": "replace", "app": "x", "gone": null}
        }});
        let out = strategic_merge("Service", &service, &patch).unwrap();
        assert_eq!(
            out["spec"],
            json!({
                "ports": [{"port": 80, "targetPort": 8080, "name": "http"},
                          {"port": 443, "targetPort": 8443}],
                "selector": {"app": "x"}
            })
        );
    }

    #[test]
    fn smp_matches_ports_by_merge_key_only() {
        // As Kubernetes' strategic merge: `containerPort` alone, so 80/UDP lands on 80/TCP.
        let patch = json!({"spec": {"containers": [{
            "name": "nginx",
            "ports": [{"containerPort": 80, "protocol": "UDP"}]
        }]}});
        let out = strategic_merge("Pod", &two_container_pod(), &patch).unwrap();
        assert_eq!(
            out["spec"]["containers"][0]["ports"],
            json!([{"containerPort": 80, "protocol": "UDP"}])
        );
    }
}
