//! The PATCH engine: the four patch types a Kubernetes API server accepts, applied to objects held
//! as [`serde_json::Value`].
//!
//! - JSON merge patch (RFC 7386, `application/merge-patch+json`): what `kubectl label`/`annotate`
//!   send. See [`merge_patch`].
//! - JSON patch (RFC 6902, `application/json-patch+json`). See [`json_patch`].
//! - Strategic merge patch (`application/strategic-merge-patch+json`): what client-side
//!   `kubectl apply` sends. Lists merge by a per-field merge key taken from a small built-in table
//!   (Kubernetes reads it from struct tags); the `$patch`, `$retainKeys`, `$setElementOrder/…` and
//!   `$deleteFromPrimitiveList/…` directives are honoured. See [`strategic_merge`].
//! - Server-side apply (`application/apply-patch+yaml`): the applied configuration is merged like a
//!   strategic merge patch without directives, fields the same manager applied before but dropped
//!   now are removed, and the manager's `metadata.managedFields` entry is rewritten.
//!
//! Everything here is pure: no I/O, and the clock is only read by [`apply`] (use [`apply_at`] to
//! pass "now" in).

use std::cmp::Ordering;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value};

/// `$patch: replace|delete|merge`.
const PATCH_DIRECTIVE: &str = "$patch";
/// `$retainKeys: [..]`: keys of the original map to keep.
const RETAIN_KEYS_DIRECTIVE: &str = "$retainKeys";
/// `$setElementOrder/<field>: [..]`: the order of the merged list.
const SET_ELEMENT_ORDER_PREFIX: &str = "$setElementOrder/";
/// `$deleteFromPrimitiveList/<field>: [..]`: primitives to drop from a merged primitive list.
const DELETE_FROM_PRIMITIVE_LIST_PREFIX: &str = "$deleteFromPrimitiveList/";

/// The patch formats of a PATCH request, named after their Content-Type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    /// RFC 6902 JSON patch: `application/json-patch+json`.
    Json,
    /// RFC 7386 JSON merge patch: `application/merge-patch+json`.
    Merge,
    /// Kubernetes strategic merge patch: `application/strategic-merge-patch+json`.
    StrategicMerge,
    /// Server-side apply: `application/apply-patch+yaml` (or `+json`).
    Apply,
}

impl PatchType {
    /// The patch type for a request's Content-Type, ignoring parameters such as
    /// `; charset=utf-8`. `None` means the server should answer 415 Unsupported Media Type.
    pub fn from_content_type(content_type: &str) -> Option<PatchType> {
        let media_type = content_type.split(';').next().unwrap_or_default().trim();
        match media_type.to_ascii_lowercase().as_str() {
            "application/json-patch+json" => Some(PatchType::Json),
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/strategic-merge-patch+json" => Some(PatchType::StrategicMerge),
            "application/apply-patch+yaml" | "application/apply-patch+json" => {
                Some(PatchType::Apply)
            }
            _ => None,
        }
    }

    /// The canonical Content-Type of this patch type (e.g. for error messages and tests).
    pub fn content_type(self) -> &'static str {
        match self {
            PatchType::Json => "application/json-patch+json",
            PatchType::Merge => "application/merge-patch+json",
            PatchType::StrategicMerge => "application/strategic-merge-patch+json",
            PatchType::Apply => "application/apply-patch+yaml",
        }
    }
}

/// Why a patch could not be applied. [`PatchError::http_code`] gives the status Kubernetes answers.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    /// The body is not valid JSON/YAML, or has the wrong shape (a merge patch that isn't an
    /// object, a JSON patch that isn't an array, a directive with a value of the wrong type).
    #[error("malformed patch: {reason}")]
    Malformed { reason: String },
    /// A JSON patch operation lacks a member it needs or names an unknown `op`.
    #[error("json patch operation {index} is invalid: {reason}")]
    InvalidOperation { index: usize, reason: String },
    /// A JSON pointer that doesn't parse (no leading `/`, bad `~` escape).
    #[error("invalid JSON pointer {path:?}: {reason}")]
    InvalidPointer { path: String, reason: String },
    /// A JSON patch operation addresses a location that doesn't exist.
    #[error("path {path:?} does not exist in the object")]
    PathNotFound { path: String },
    /// A JSON patch `test` operation found a different value.
    #[error("test operation at {path:?} failed")]
    TestFailed { path: String },
    /// A strategic merge patch element of a list that merges by `key` doesn't carry that key.
    #[error("strategic merge patch: an element of {path} has no merge key {key:?}")]
    MissingMergeKey { path: String, key: String },
    /// A strategic merge patch value whose type the field's merge strategy can't use, e.g. a
    /// primitive in a list that merges maps by key.
    #[error("strategic merge patch: {path}: {reason}")]
    TypeMismatch { path: String, reason: String },
}

impl PatchError {
    /// The HTTP status the API server answers with: 400 for a body it can't read, 422 for a
    /// readable patch that can't be applied to this object (as Kubernetes does for JSON patch).
    pub fn http_code(&self) -> u16 {
        match self {
            PatchError::Malformed { .. } => 400,
            PatchError::InvalidOperation { .. }
            | PatchError::InvalidPointer { .. }
            | PatchError::PathNotFound { .. }
            | PatchError::TestFailed { .. }
            | PatchError::MissingMergeKey { .. }
            | PatchError::TypeMismatch { .. } => 422,
        }
    }
}

fn malformed(reason: impl Into<String>) -> PatchError {
    PatchError::Malformed {
        reason: reason.into(),
    }
}

/// Applies a patch body to `original` for an object of kind `kind` (e.g. "Pod", "Deployment"; the
/// kind selects strategic-merge list semantics). For [`PatchType::Apply`], `field_manager` names
/// the manager and `force` is the `force` query parameter; `original` may be `null` to create an
/// object by applying it.
pub fn apply(
    kind: &str,
    original: &Value,
    body: &[u8],
    patch_type: PatchType,
    field_manager: &str,
    force: bool,
) -> Result<Value, PatchError> {
    apply_at(
        kind,
        original,
        body,
        patch_type,
        field_manager,
        force,
        Utc::now(),
    )
}

/// [`apply`] with the time recorded in `managedFields` passed in, so callers and tests control it.
pub fn apply_at(
    kind: &str,
    original: &Value,
    body: &[u8],
    patch_type: PatchType,
    field_manager: &str,
    force: bool,
    now: DateTime<Utc>,
) -> Result<Value, PatchError> {
    match patch_type {
        PatchType::Json => json_patch(original, &parse_json(body)?),
        PatchType::Merge => {
            let patch = parse_json(body)?;
            if !patch.is_object() {
                // RFC 7386 would replace the whole document, which can never be a valid object.
                return Err(malformed("a merge patch must be a JSON object"));
            }
            let mut target = original.clone();
            merge_patch(&mut target, &patch);
            Ok(target)
        }
        PatchType::StrategicMerge => strategic_merge(kind, original, &parse_json(body)?),
        PatchType::Apply => {
            let config = parse_yaml(body)?;
            server_side_apply(kind, original, config, field_manager, force, now)
        }
    }
}

fn parse_json(body: &[u8]) -> Result<Value, PatchError> {
    serde_json::from_slice(body).map_err(|e| malformed(format!("invalid JSON: {e}")))
}

/// Parses an apply body. YAML is a superset of JSON, so this reads both.
fn parse_yaml(body: &[u8]) -> Result<Value, PatchError> {
    serde_yaml::from_slice(body).map_err(|e| malformed(format!("invalid YAML: {e}")))
}

// ---------------------------------------------------------------------------------------------
// RFC 7386 JSON merge patch
// ---------------------------------------------------------------------------------------------

/// Applies an RFC 7386 JSON merge patch to `target` in place: objects merge recursively, `null`
/// removes a member, anything else (arrays included) replaces.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(target) = target else {
        return;
    };
    for (key, value) in patch {
        if value.is_null() {
            target.remove(key);
        } else {
            merge_patch(target.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// RFC 6902 JSON patch
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Strategic merge patch
// ---------------------------------------------------------------------------------------------

/// How a list field merges, as Kubernetes' `patchStrategy`/`patchMergeKey` struct tags say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ListStrategy {
    /// No strategy: the patch's list replaces the original wholesale.
    Atomic,
    /// `patchStrategy: merge` with a merge key: elements are maps matched by that key.
    MergeByKey(&'static str),
    /// `patchStrategy: merge` on a list of primitives (e.g. `metadata.finalizers`): a set union.
    PrimitiveSet,
}

/// Where the PodSpec sits in objects of `kind`, so its list keys apply there.
fn pod_spec_prefixes(kind: &str) -> &'static [&'static [&'static str]] {
    match kind {
        "Pod" => &[&["spec"]],
        "PodTemplate" => &[&["template", "spec"]],
        "Deployment"
        | "ReplicaSet"
        | "StatefulSet"
        | "DaemonSet"
        | "Job"
        | "ReplicationController" => &[&["spec", "template", "spec"]],
        "CronJob" => &[&["spec", "jobTemplate", "spec", "template", "spec"]],
        _ => &[],
    }
}

/// The list strategy of a field inside a PodSpec, `rest` being the path below the PodSpec.
fn pod_spec_list_strategy(rest: &[&str]) -> ListStrategy {
    use ListStrategy::{Atomic, MergeByKey};
    match rest {
        ["containers" | "initContainers" | "ephemeralContainers"] => MergeByKey("name"),
        ["volumes" | "imagePullSecrets" | "resourceClaims" | "schedulingGates"] => {
            MergeByKey("name")
        }
        ["hostAliases"] => MergeByKey("ip"),
        ["topologySpreadConstraints"] => MergeByKey("topologyKey"),
        ["containers" | "initContainers" | "ephemeralContainers", field] => match *field {
            "ports" => MergeByKey("containerPort"),
            "env" => MergeByKey("name"),
            "volumeMounts" => MergeByKey("mountPath"),
            "volumeDevices" => MergeByKey("devicePath"),
            "resizePolicy" => MergeByKey("resourceName"),
            _ => Atomic,
        },
        _ => Atomic,
    }
}

/// The list strategy of the list at `path` (field names from the object root; list elements add
/// no segment) in an object of `kind`.
fn list_strategy(kind: &str, path: &[String]) -> ListStrategy {
    use ListStrategy::{Atomic, MergeByKey, PrimitiveSet};
    let path: Vec<&str> = path.iter().map(String::as_str).collect();
    // ObjectMeta appears at the root and in every template.
    match path.as_slice() {
        [.., "metadata", "finalizers"] => return PrimitiveSet,
        [.., "metadata", "ownerReferences"] => return MergeByKey("uid"),
        _ => {}
    }
    for prefix in pod_spec_prefixes(kind) {
        if let Some(rest) = path.strip_prefix(*prefix) {
            return pod_spec_list_strategy(rest);
        }
    }
    match (kind, path.as_slice()) {
        ("Pod", ["status", "conditions"]) => MergeByKey("type"),
        ("Pod", ["status", "podIPs" | "hostIPs"]) => MergeByKey("ip"),
        ("Node", ["status", "conditions" | "addresses"]) => MergeByKey("type"),
        ("Node", ["spec", "podCIDRs"]) => PrimitiveSet,
        (
            "Deployment"
            | "ReplicaSet"
            | "StatefulSet"
            | "DaemonSet"
            | "Job"
            | "ReplicationController",
            ["status", "conditions"],
        ) => MergeByKey("type"),
        ("Service", ["spec", "ports"]) => MergeByKey("port"),
        // Node spec.taints deliberately stays atomic, as in Kubernetes: `kubectl taint` removes a
        // taint by sending the remaining list, which a merge by `key` would silently ignore.
        _ => Atomic,
    }
}

/// Applies a strategic merge patch to `original` (an object of kind `kind`) and returns the
/// result. A `null` original counts as an empty object.
///
/// Follows Kubernetes' `strategicpatch` package, with these leniencies: `$patch: merge` in a map
/// is accepted as a no-op, `$setElementOrder` lists are not checked against the patch list, and a
/// `$patch: replace` element is also honoured in primitive lists.
pub fn strategic_merge(kind: &str, original: &Value, patch: &Value) -> Result<Value, PatchError> {
    let Value::Object(patch) = patch else {
        return Err(malformed("a strategic merge patch must be a JSON object"));
    };
    if patch.get(PATCH_DIRECTIVE).and_then(Value::as_str) == Some("delete") {
        return Err(malformed("$patch: delete cannot delete the whole object"));
    }
    let base = original.as_object().cloned().unwrap_or_default();
    let merger = StrategicMerger {
        kind,
        directives: true,
    };
    Ok(Value::Object(merger.merge_map(
        base,
        patch,
        &mut Vec::new(),
    )?))
}

/// One strategic merge of a patch into an object.
struct StrategicMerger<'k> {
    /// Selects the list strategies (see [`list_strategy`]).
    kind: &'k str,
    /// Whether `$`-keys are directives. Server-side apply configurations carry none, so there they
    /// are ordinary (if unlikely) field names.
    directives: bool,
}

impl StrategicMerger<'_> {
    fn merge_map(
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
        key: &str,
        path: &mut Vec<String>,
    ) -> Result<Vec<Value>, PatchError> {
        let missing_key = |path: &[String]| PatchError::MissingMergeKey {
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
                    let value = element.get(key).ok_or_else(|| missing_key(path))?;
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
            let value = element.get(key).ok_or_else(|| missing_key(path))?;
            match original.iter().position(|o| o.get(key) == Some(value)) {
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

// ---------------------------------------------------------------------------------------------
// Server-side apply
// ---------------------------------------------------------------------------------------------

/// Metadata fields Kubernetes never records in managedFields (its "strip meta" set).
const UNMANAGED_METADATA: &[&str] = &[
    "name",
    "namespace",
    "creationTimestamp",
    "selfLink",
    "uid",
    "clusterName",
    "generation",
    "managedFields",
    "resourceVersion",
];

/// Server-side apply of `config` to `original` (`null` when the object doesn't exist yet).
///
/// Simplifications, compared with Kubernetes' structured-merge-diff:
/// - Conflicts are not detected, so `force` changes nothing: the applier always wins. Ownership
///   of other managers is neither transferred nor shared, only respected when removing fields.
/// - Lists use the strategic-merge keys of [`list_strategy`] rather than the OpenAPI list-map keys
///   (so container ports are keyed by `containerPort` alone, not `containerPort`+`protocol`).
/// - Fields the manager applied before and omits now are removed unless another manager's
///   `managedFields` entry covers them.
fn server_side_apply(
    kind: &str,
    original: &Value,
    config: Value,
    field_manager: &str,
    force: bool,
    now: DateTime<Utc>,
) -> Result<Value, PatchError> {
    // Without conflict detection there is nothing for `force` to override.
    let _ = force;
    let Value::Object(mut config) = config else {
        return Err(malformed("an apply configuration must be an object"));
    };
    let api_version = config
        .get("apiVersion")
        .and_then(Value::as_str)
        .ok_or_else(|| malformed("an apply configuration needs a string apiVersion"))?
        .to_string();
    match config.get("kind").and_then(Value::as_str) {
        Some(k) if k == kind => {}
        Some(k) => {
            return Err(malformed(format!(
                "the apply configuration's kind {k:?} doesn't match {kind:?}"
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
    let entries: Vec<Value> = base
        .get("metadata")
        .and_then(|m| m.get("managedFields"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let is_ours = |entry: &Value| {
        entry.get("manager").and_then(Value::as_str) == Some(field_manager)
            && entry.get("operation").and_then(Value::as_str) == Some("Apply")
    };
    let fields_of = |entry: &Value| entry.get("fieldsV1").and_then(Value::as_object).cloned();
    let previous = entries.iter().find(|e| is_ours(e)).and_then(fields_of);
    let others: Vec<Map<String, Value>> = entries
        .iter()
        .filter(|e| !is_ours(e))
        .filter_map(fields_of)
        .collect();

    let new_fields = apply_field_set(kind, &config);
    let merger = StrategicMerger {
        kind,
        directives: false,
    };
    let mut merged = Value::Object(merger.merge_map(base, &config, &mut Vec::new())?);
    if let Some(previous) = &previous {
        let others: Vec<&Map<String, Value>> = others.iter().collect();
        remove_disowned(&mut merged, previous, Some(&new_fields), &others);
    }

    let mut managed: Vec<Value> = entries.into_iter().filter(|e| !is_ours(e)).collect();
    managed.push(serde_json::json!({
        "manager": field_manager,
        "operation": "Apply",
        "apiVersion": api_version,
        "time": now.to_rfc3339_opts(SecondsFormat::Secs, true),
        "fieldsType": "FieldsV1",
        "fieldsV1": new_fields,
    }));
    if let Value::Object(object) = &mut merged {
        let metadata = object
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        if !metadata.is_object() {
            *metadata = Value::Object(Map::new());
        }
        if let Value::Object(metadata) = metadata {
            metadata.insert("managedFields".to_string(), Value::Array(managed));
        }
    }
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
fn apply_field_set(kind: &str, config: &Map<String, Value>) -> Map<String, Value> {
    let mut set = object_field_set(kind, config, &mut Vec::new());
    set.remove("f:apiVersion");
    set.remove("f:kind");
    if let Some(Value::Object(metadata)) = set.get_mut("f:metadata") {
        for field in UNMANAGED_METADATA {
            metadata.remove(&format!("f:{field}"));
        }
        if metadata.is_empty() {
            set.remove("f:metadata");
        }
    }
    set
}

fn object_field_set(
    kind: &str,
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

fn value_field_set(kind: &str, value: &Value, path: &mut Vec<String>) -> Map<String, Value> {
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
                    let (Some(object), Some(key_value)) = (item.as_object(), item.get(key)) else {
                        continue;
                    };
                    let mut id = Map::new();
                    id.insert(key.to_string(), key_value.clone());
                    let mut element = object_field_set(kind, object, path);
                    element.insert(".".to_string(), Value::Object(Map::new()));
                    set.insert(format!("k:{}", Value::Object(id)), Value::Object(element));
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
        if current_child.is_none() && others_child.is_empty() {
            remove_path_element(value, path_element);
            continue;
        }
        let Some(previous_child) = previous_child.as_object() else {
            continue;
        };
        if let Some(child) = locate_path_element(value, path_element) {
            remove_disowned(child, previous_child, current_child, &others_child);
        }
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
            .position(|item| key.iter().all(|(k, v)| item.get(k) == Some(v)))
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
    use chrono::TimeZone;
    use serde_json::json;

    fn merged(target: Value, patch: Value) -> Value {
        let mut target = target;
        merge_patch(&mut target, &patch);
        target
    }

    #[test]
    fn content_types() {
        assert_eq!(
            PatchType::from_content_type("application/merge-patch+json; charset=utf-8"),
            Some(PatchType::Merge)
        );
        assert_eq!(
            PatchType::from_content_type("application/json-patch+json"),
            Some(PatchType::Json)
        );
        assert_eq!(
            PatchType::from_content_type("Application/Strategic-Merge-Patch+JSON"),
            Some(PatchType::StrategicMerge)
        );
        assert_eq!(
            PatchType::from_content_type("application/apply-patch+yaml;charset=utf-8"),
            Some(PatchType::Apply)
        );
        assert_eq!(PatchType::from_content_type("application/json"), None);
        assert_eq!(PatchType::from_content_type(""), None);
        for t in [
            PatchType::Json,
            PatchType::Merge,
            PatchType::StrategicMerge,
            PatchType::Apply,
        ] {
            assert_eq!(PatchType::from_content_type(t.content_type()), Some(t));
        }
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

    #[test]
    fn malformed_bodies() {
        let pod = json!({"metadata":{"name":"p"}});
        for (body, patch_type) in [
            (&b"{not json"[..], PatchType::Merge),
            (&b"[1]"[..], PatchType::Merge),
            (&b"{\"op\":\"add\"}"[..], PatchType::Json),
            (&b""[..], PatchType::Json),
            (&b"{\"spec\":"[..], PatchType::StrategicMerge),
            (&b"\"x\""[..], PatchType::StrategicMerge),
            (&b"a: [b"[..], PatchType::Apply),
            (&b"- 1"[..], PatchType::Apply),
            (&b"kind: Pod\nmetadata: {name: p}"[..], PatchType::Apply),
            (&b"apiVersion: v1\nkind: Node\n"[..], PatchType::Apply),
        ] {
            let err = apply("Pod", &pod, body, patch_type, "m", false).unwrap_err();
            assert!(
                matches!(err, PatchError::Malformed { .. }),
                "{patch_type:?} {:?}: {err:?}",
                String::from_utf8_lossy(body)
            );
            assert_eq!(err.http_code(), 400);
        }
        // Directives of the wrong shape are malformed too.
        for patch in [
            json!({"metadata":{"$retainKeys":"x"}}),
            json!({"metadata":{"$patch":"explode"}}),
            json!({"metadata":{"$setElementOrder/finalizers":"x"}}),
            json!({"metadata":{"$deleteFromPrimitiveList/finalizers":"a"}}),
            json!({"$patch":"delete"}),
        ] {
            let err = strategic_merge("Pod", &pod, &patch).unwrap_err();
            assert!(
                matches!(err, PatchError::Malformed { .. }),
                "{patch}: {err:?}"
            );
        }
    }

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
                        "f:ports": {"k:{\"containerPort\":80}": {".": {}, "f:containerPort": {}}}
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
        assert_eq!(managed[0]["manager"], "labeller");
        assert_eq!(managed[1]["manager"], "kubectl");
        assert_eq!(managed[1]["time"], "2025-01-02T03:04:09Z");
        assert_eq!(
            managed[1]["fieldsV1"]["f:metadata"],
            json!({"f:annotations": {"f:a": {}}})
        );
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
}
