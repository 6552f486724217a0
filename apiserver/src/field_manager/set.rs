//! [`FieldSet`]: a set of field paths as `metadata.managedFields[].fieldsV1` encodes them, the
//! set of an object's fields, and the comparison of two versions of an object.
//!
//! Path elements are FieldsV1's: `f:<field>` for a field of a map, `k:<json>` for the element
//! of a list keyed by merge key, `v:<json>` for an element of a set of primitives.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::patch::list_strategy::{element_id, list_strategy, ListStrategy, ObjectType};

/// Whether a non-empty FieldsV1 object is exactly what [`FieldSet::to_fields_v1`] writes for the
/// set it decodes to: every value an object, `"."` only as `{}` beside other elements, and each
/// non-empty object below of the same form.
pub fn is_canonical_fields_v1(map: &Map<String, Value>) -> bool {
    let mut elements = 0;
    for (element, child) in map {
        let Some(child) = child.as_object() else {
            return false;
        };
        if element == "." {
            if !child.is_empty() {
                return false;
            }
            continue;
        }
        elements += 1;
        if !child.is_empty() && !is_canonical_fields_v1(child) {
            return false;
        }
    }
    elements > 0
}

/// Whether every path of `set` is in the set the FieldsV1 object `fields` decodes to: a member
/// node of `set` is `{}` or has `"."` there, and each of its elements is there too.
pub fn fields_v1_covers(fields: &Map<String, Value>, set: &FieldSet) -> bool {
    if set.member && !fields.is_empty() && !fields.contains_key(".") {
        return false;
    }
    set.children.iter().all(|(element, below)| {
        fields
            .get(element)
            .and_then(Value::as_object)
            .is_some_and(|fields| fields_v1_covers(fields, below))
    })
}

/// A set of paths, as a tree: a node is in the set itself when `member` is true.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSet {
    member: bool,
    children: BTreeMap<String, FieldSet>,
}

impl FieldSet {
    /// Decodes a FieldsV1 value: `{}` is a member leaf, `"."` marks a node that is a member and
    /// has members below it. Anything but an object decodes to the empty set.
    pub fn from_fields_v1(value: &Value) -> FieldSet {
        let mut set = FieldSet::default();
        let Some(map) = value.as_object() else {
            return set;
        };
        for (element, child) in map {
            if element == "." {
                set.member = true;
                continue;
            }
            let mut node = FieldSet::from_fields_v1(child);
            if child.as_object().is_some_and(Map::is_empty) {
                node.member = true;
            }
            if !node.is_empty() {
                set.children.insert(element.clone(), node);
            }
        }
        set
    }

    /// The FieldsV1 encoding, with path elements in byte order (how kubectl prints them).
    pub fn to_fields_v1(&self) -> Value {
        let mut map = Map::new();
        if self.member && !self.children.is_empty() {
            map.insert(".".into(), Value::Object(Map::new()));
        }
        for (element, child) in &self.children {
            map.insert(element.clone(), child.to_fields_v1());
        }
        Value::Object(map)
    }

    /// The set holding just this node.
    pub fn leaf() -> FieldSet {
        FieldSet {
            member: true,
            children: BTreeMap::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        !self.member && self.children.is_empty()
    }

    /// Whether this node itself is in the set.
    pub fn is_member(&self) -> bool {
        self.member
    }

    /// The path elements right below this node.
    pub fn child_names(&self) -> impl Iterator<Item = &str> {
        self.children.keys().map(String::as_str)
    }

    /// The set below one path element, if any.
    pub fn child(&self, element: &str) -> Option<&FieldSet> {
        self.children.get(element)
    }

    pub fn child_mut(&mut self, element: &str) -> Option<&mut FieldSet> {
        self.children.get_mut(element)
    }

    fn insert_child(&mut self, element: String, child: FieldSet) {
        if !child.is_empty() {
            self.children.insert(element, child);
        }
    }

    /// Removes the subtree under a path element (the element itself and all below).
    pub fn remove_child(&mut self, element: &str) {
        self.children.remove(element);
    }

    /// Keeps only the subtree under `element` (e.g. `f:status` for a status writer).
    pub fn retain_only(&mut self, element: &str) {
        self.member = false;
        self.children.retain(|e, _| e == element);
    }

    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.member |= other.member;
        for (element, child) in &other.children {
            let merged = match out.children.get(element) {
                Some(mine) => mine.union(child),
                None => child.clone(),
            };
            out.children.insert(element.clone(), merged);
        }
        out
    }

    /// The paths of `self` that are not in `other` (path by path: removing a node keeps what
    /// is below it).
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && !other.member,
            children: BTreeMap::new(),
        };
        for (element, child) in &self.children {
            let rest = match other.children.get(element) {
                Some(theirs) => child.difference(theirs),
                None => child.clone(),
            };
            out.insert_child(element.clone(), rest);
        }
        out
    }

    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && other.member,
            children: BTreeMap::new(),
        };
        for (element, child) in &self.children {
            if let Some(theirs) = other.children.get(element) {
                out.insert_child(element.clone(), child.intersection(theirs));
            }
        }
        out
    }

    /// Every member path, each as its path elements, in order.
    pub fn paths(&self) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        self.collect_paths(&mut Vec::new(), &mut out);
        out
    }

    fn collect_paths(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        if self.member {
            out.push(prefix.clone());
        }
        for (element, child) in &self.children {
            prefix.push(element.clone());
            child.collect_paths(prefix, out);
            prefix.pop();
        }
    }
}

/// A path as structured-merge-diff prints it: `.spec.containers[name="nginx"].image`.
pub fn display_path(path: &[String]) -> String {
    let mut out = String::new();
    for element in path {
        if let Some(field) = element.strip_prefix("f:") {
            out.push('.');
            out.push_str(field);
        } else if let Some(key) = element.strip_prefix("k:") {
            let parts: Vec<String> = match serde_json::from_str::<Map<String, Value>>(key) {
                Ok(fields) => fields.iter().map(|(k, v)| format!("{k}={v}")).collect(),
                Err(_) => vec![key.to_string()],
            };
            out.push_str(&format!("[{}]", parts.join(",")));
        } else if let Some(value) = element.strip_prefix("v:") {
            out.push_str(&format!("[={value}]"));
        } else if let Some(index) = element.strip_prefix("i:") {
            out.push_str(&format!("[{index}]"));
        } else {
            out.push_str(element);
        }
    }
    out
}

/// Struct fields Go always serialises (non-pointer structs): a new object already has them, so
/// a writer that fills them in owns their fields but not the struct itself.
fn always_present(path: &[String]) -> bool {
    matches!(
        path.last().map(String::as_str),
        Some("metadata" | "spec" | "status" | "template" | "strategy" | "jobTemplate")
    )
}

/// The set of every field of `value`, found at `path` (field names from the root) in an object
/// of `kind`. The node itself is a member unless it is a list or an always-present struct.
pub fn value_set(kind: ObjectType<'_>, value: &Value, path: &mut Vec<String>) -> FieldSet {
    let mut set = FieldSet::default();
    match value {
        Value::Object(map) => {
            set.member = map.is_empty() || !always_present(path);
            for (field, child) in map {
                if child.is_null() {
                    continue;
                }
                path.push(field.clone());
                set.insert_child(format!("f:{field}"), value_set(kind, child, path));
                path.pop();
            }
        }
        Value::Array(items) => match list_strategy(kind, path) {
            ListStrategy::Atomic => set.member = true,
            ListStrategy::PrimitiveSet => {
                for item in items {
                    set.insert_child(format!("v:{item}"), FieldSet::leaf());
                }
            }
            ListStrategy::MergeByKey(key) => {
                for item in items {
                    let Some(element) = element_id(kind, path, key, item) else {
                        continue;
                    };
                    let mut node = value_set(kind, item, path);
                    node.member = true;
                    set.insert_child(element, node);
                }
                if items.is_empty() {
                    set.member = true;
                }
            }
        },
        _ => set.member = true,
    }
    set
}

/// What a write changed: the paths it added, modified (a different value) and removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Comparison {
    pub added: FieldSet,
    pub modified: FieldSet,
    pub removed: FieldSet,
}

impl Comparison {
    /// Added and modified: what the writer now owns.
    pub fn changed(&self) -> FieldSet {
        self.added.union(&self.modified)
    }

    pub(crate) fn nest(&mut self, element: String, below: Comparison) {
        self.added.insert_child(element.clone(), below.added);
        self.modified.insert_child(element.clone(), below.modified);
        self.removed.insert_child(element, below.removed);
    }
}

/// Compares two versions of the value at `path` in an object of `kind` (`null` is absent).
pub fn compare<'a>(
    kind: ObjectType<'_>,
    old: &'a Value,
    new: &'a Value,
    path: &mut Vec<String>,
) -> Comparison {
    let mut out = Comparison::default();
    match (old, new) {
        (Value::Null, Value::Null) => {}
        (Value::Null, _) => out.added = value_set(kind, new, path),
        (_, Value::Null) => out.removed = value_set(kind, old, path),
        (Value::Object(a), Value::Object(b)) => {
            for (field, new_child) in b {
                let old_child = a.get(field).unwrap_or(&Value::Null);
                // Most of a write leaves most of the object as it was.
                if old_child == new_child {
                    continue;
                }
                path.push(field.clone());
                let below = compare(kind, old_child, new_child, path);
                path.pop();
                out.nest(format!("f:{field}"), below);
            }
            for (field, old_child) in a {
                if b.contains_key(field) {
                    continue;
                }
                path.push(field.clone());
                let below = compare(kind, old_child, &Value::Null, path);
                path.pop();
                out.nest(format!("f:{field}"), below);
            }
        }
        (Value::Array(a), Value::Array(b)) => match list_strategy(kind, path) {
            ListStrategy::Atomic => out.modified.member = a != b,
            ListStrategy::PrimitiveSet => {
                for item in b.iter().filter(|i| !a.contains(i)) {
                    out.added
                        .insert_child(format!("v:{item}"), value_set(kind, item, path));
                }
                for item in a.iter().filter(|i| !b.contains(i)) {
                    out.removed
                        .insert_child(format!("v:{item}"), value_set(kind, item, path));
                }
            }
            ListStrategy::MergeByKey(key) => {
                let keyed = |items: &'a Vec<Value>| -> BTreeMap<String, &'a Value> {
                    items
                        .iter()
                        .filter_map(|item| Some((element_id(kind, path, key, item)?, item)))
                        .collect()
                };
                let (old_items, new_items) = (keyed(a), keyed(b));
                for (element, item) in &new_items {
                    let previous = old_items.get(element).copied().unwrap_or(&Value::Null);
                    if previous == *item {
                        continue;
                    }
                    let mut below = compare(kind, previous, item, path);
                    if previous.is_null() {
                        below.added.member = true;
                    }
                    out.nest(element.clone(), below);
                }
                for (element, item) in &old_items {
                    if !new_items.contains_key(element) {
                        let mut gone = value_set(kind, item, path);
                        gone.member = true;
                        out.removed.insert_child(element.clone(), gone);
                    }
                }
            }
        },
        (Value::Object(_) | Value::Array(_), _) | (_, Value::Object(_) | Value::Array(_)) => {
            out.modified = value_set(kind, new, path);
            out.modified.member = true;
        }
        _ => out.modified.member = old != new,
    }
    out
}
