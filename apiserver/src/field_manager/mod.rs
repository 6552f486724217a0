//! Field management: who owns which fields of an object, kept in `metadata.managedFields` as
//! Kubernetes does.
//!
//! - Every write records its manager: the `fieldManager` query parameter, or else the client's
//!   User-Agent up to its first `/` (`kubectl`, `python-requests`…).
//! - An update (create, PUT, every patch type but apply) gives its manager the fields it added
//!   or changed, merged into the manager's previous `Update` entry for the same subresource; the
//!   other managers lose those fields, and fields the write removed leave every manager.
//! - Server-side apply gives its manager exactly the applied fields (an `Apply` entry). Changing
//!   a field another manager owns is a conflict (409) unless `force` takes it over; setting it to
//!   the value it already has shares it. [`apply_ownership`] decides this.
//! - A client may write managedFields itself (kubectl does, to move client-side apply's fields
//!   to its server-side manager): a non-empty list in a write's body replaces the stored one.
//!
//! Simplifications: Go's non-pointer structs (always present in an object, never owned as a
//! whole) are recognised by field name (`spec`, `template`, `strategy`…) rather than by schema;
//! Kubernetes' cap of ten `Update` entries is not applied. As in Kubernetes, an element of a keyed
//! list is identified by every `x-kubernetes-list-map-keys` key, with key defaults
//! ([`crate::patch::list_strategy::element_id`]), so ownership of container port 80/TCP and of
//! 80/UDP is separate.

pub mod set;
#[cfg(test)]
mod tests;

use serde_json::{json, Map, Value};

pub use set::{compare, display_path, value_set, Comparison, FieldSet};

use crate::patch::list_strategy::ObjectType;
use crate::validation::Cause;

/// The longest `fieldManager` kube-apiserver accepts, in bytes.
pub const MAX_MANAGER_LENGTH: usize = 128;

/// The annotation client-side `kubectl apply` keeps the applied configuration in.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Metadata fields never recorded in managedFields.
pub(crate) const UNMANAGED_METADATA: &[&str] = &[
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

/// The manager of a write without `fieldManager`: the User-Agent's product name.
pub fn manager_from_user_agent(user_agent: &str) -> String {
    user_agent.split('/').next().unwrap_or_default().to_string()
}

/// kube-apiserver's checks of `fieldManager`: at most 128 bytes, printable characters only.
pub fn validate_manager(manager: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    if manager.len() > MAX_MANAGER_LENGTH {
        causes.push(Cause {
            reason: "FieldValueTooLong".into(),
            message: format!("Too long: may not be more than {MAX_MANAGER_LENGTH} bytes"),
            field: "fieldManager".into(),
        });
    }
    for (position, c) in manager.char_indices() {
        if c.is_control() || (c.is_whitespace() && c != ' ') {
            causes.push(Cause {
                reason: "FieldValueInvalid".into(),
                message: format!(
                    "Invalid value: {}: invalid character U+{:04X} (at position {position})",
                    Value::String(manager.to_string()),
                    u32::from(c)
                ),
                field: "fieldManager".into(),
            });
        }
    }
    causes
}

/// One `metadata.managedFields` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    pub api_version: String,
    pub time: Option<String>,
    /// Empty for the main resource.
    pub subresource: String,
    pub fields: FieldSet,
}

impl Entry {
    /// Whether this entry is the one a write by `manager` records into. Appliers have one entry
    /// whatever the version they apply; updaters one per version.
    fn is(&self, manager: &str, operation: &str, subresource: &str, api_version: &str) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource == subresource
            && (operation == "Apply" || self.api_version == api_version)
    }

    /// How conflicts name a manager: `"kubectl-client-side-apply" using apps/v1`.
    pub fn describe(&self) -> String {
        let mut out = Value::String(self.manager.clone()).to_string();
        if !self.subresource.is_empty() {
            out.push_str(&format!(
                " with subresource {}",
                Value::String(self.subresource.clone())
            ));
        }
        if self.operation == "Update" {
            out.push_str(&format!(" using {}", self.api_version));
        }
        out
    }

    fn from_json(value: &Value) -> Entry {
        let text = |key: &str| {
            value
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        Entry {
            manager: text("manager"),
            operation: text("operation"),
            api_version: text("apiVersion"),
            time: value
                .get("time")
                .and_then(Value::as_str)
                .map(str::to_string),
            subresource: text("subresource"),
            fields: value
                .get("fieldsV1")
                .map(FieldSet::from_fields_v1)
                .unwrap_or_default(),
        }
    }

    fn to_json(&self) -> Value {
        let mut entry = Map::new();
        entry.insert("manager".into(), json!(self.manager));
        entry.insert("operation".into(), json!(self.operation));
        entry.insert("apiVersion".into(), json!(self.api_version));
        if let Some(time) = &self.time {
            entry.insert("time".into(), json!(time));
        }
        entry.insert("fieldsType".into(), json!("FieldsV1"));
        entry.insert("fieldsV1".into(), self.fields.to_fields_v1());
        if !self.subresource.is_empty() {
            entry.insert("subresource".into(), json!(self.subresource));
        }
        Value::Object(entry)
    }
}

/// The managedFields entries of an object (none when it has none or they are not a list).
pub fn decode(object: &Value) -> Vec<Entry> {
    object
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|entries| entries.iter().map(Entry::from_json).collect())
        .unwrap_or_default()
}

/// Writes `entries` into the object's metadata, dropping those that own nothing, in
/// kube-apiserver's order: `Apply` before `Update`, then oldest first, then by manager.
pub fn encode(object: &mut Value, mut entries: Vec<Entry>) {
    entries.retain(|e| !e.fields.is_empty());
    entries.sort_by(|a, b| {
        (
            &a.operation,
            &a.time,
            &a.manager,
            &a.api_version,
            &a.subresource,
        )
            .cmp(&(
                &b.operation,
                &b.time,
                &b.manager,
                &b.api_version,
                &b.subresource,
            ))
    });
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if entries.is_empty() {
        metadata.remove("managedFields");
    } else {
        let list = entries.iter().map(Entry::to_json).collect();
        metadata.insert("managedFields".into(), Value::Array(list));
    }
}

/// Who writes, and where.
#[derive(Clone, Copy, Debug)]
pub struct Writer<'a> {
    pub manager: &'a str,
    /// The object's type (selects list keys).
    pub kind: ObjectType<'a>,
    pub api_version: &'a str,
    /// `status`, `scale`… for a subresource write.
    pub subresource: Option<&'a str>,
    /// Whether the resource has a status subresource: then writes to the main resource own no
    /// status fields (its strategy resets them).
    pub has_status: bool,
}

impl Writer<'_> {
    /// Removes from `set` what this writer can never own.
    pub fn strip(&self, set: &mut FieldSet) {
        set.remove_child("f:apiVersion");
        set.remove_child("f:kind");
        match self.subresource {
            Some("status") => set.retain_only("f:status"),
            Some(_) => {}
            None if self.has_status => set.remove_child("f:status"),
            None => {}
        }
        if let Some(metadata) = set.child_mut("f:metadata") {
            for field in UNMANAGED_METADATA {
                metadata.remove_child(&format!("f:{field}"));
            }
            if metadata.is_empty() {
                set.remove_child("f:metadata");
            }
        }
    }

    fn subresource(&self) -> &str {
        self.subresource.unwrap_or_default()
    }
}

/// The entries an update leaves: what `writer` added or changed from `live` to `new` becomes
/// its, leaving the other managers; what it removed leaves everyone. A non-empty managedFields
/// in `new` (for the main resource) is the client's own and replaces `live`'s. Writes the
/// result into `new`.
pub fn record_update(writer: &Writer, live: &Value, new: &mut Value, now: &str) {
    let (changed, removed) = changes(writer, live, new);
    if retime_own_entry(writer, live, new, &changed, &removed, now) {
        return;
    }
    record_changes(writer, live, new, changed, removed, now);
}

/// What an update by `writer` from `live` to `new` changed (added or set) and removed, of the
/// fields the writer can own.
fn changes(writer: &Writer, live: &Value, new: &Value) -> (FieldSet, FieldSet) {
    // A status write owns nothing outside status ([`Writer::strip`]): only status is compared.
    let comparison = match writer.subresource {
        Some("status") => {
            let below = compare(
                writer.kind,
                &live["status"],
                &new["status"],
                &mut vec!["status".to_string()],
            );
            let mut top = Comparison::default();
            top.nest("f:status".into(), below);
            top
        }
        _ => compare(writer.kind, live, new, &mut Vec::new()),
    };
    let mut changed = comparison.changed();
    writer.strip(&mut changed);
    let mut removed = comparison.removed;
    writer.strip(&mut removed);
    (changed, removed)
}

/// [`record_update`]'s general path: the entries decoded where the write touches them,
/// `changed` taken from the others' and given to the writer's, `removed` taken from all.
fn record_changes(
    writer: &Writer,
    live: &Value,
    new: &mut Value,
    changed: FieldSet,
    removed: FieldSet,
    now: &str,
) {
    let provided = match writer.subresource {
        None => decode(new),
        Some(_) => Vec::new(),
    };
    let mut entries: Vec<Held> = if provided.is_empty() {
        // The stored entries. An entry the write cannot touch (the creator's, when a kubelet
        // writes a pod's status) is kept as stored rather than decoded and encoded again.
        live.pointer("/metadata/managedFields")
            .and_then(Value::as_array)
            .map(|stored| {
                stored
                    .iter()
                    .map(
                        |raw| match keeps_as_stored(raw, writer, &changed, &removed) {
                            true => Held::Kept(raw),
                            false => Held::Decoded(Entry::from_json(raw)),
                        },
                    )
                    .collect()
            })
            .unwrap_or_default()
    } else {
        provided.into_iter().map(Held::Decoded).collect()
    };
    let own = entries.iter().position(|held| match held {
        Held::Decoded(e) => e.is(
            writer.manager,
            "Update",
            writer.subresource(),
            writer.api_version,
        ),
        Held::Kept(_) => false,
    });
    for (index, held) in entries.iter_mut().enumerate() {
        let Held::Decoded(entry) = held else {
            continue;
        };
        entry.fields = entry.fields.difference(&removed);
        if Some(index) != own {
            entry.fields = entry.fields.difference(&changed);
        }
    }
    if !changed.is_empty() {
        match own.and_then(|index| entries.get_mut(index)) {
            Some(Held::Decoded(entry)) => {
                entry.fields = entry.fields.union(&changed);
                entry.time = Some(now.to_string());
            }
            _ => entries.push(Held::Decoded(Entry {
                manager: writer.manager.to_string(),
                operation: "Update".into(),
                api_version: writer.api_version.to_string(),
                time: Some(now.to_string()),
                subresource: writer.subresource().to_string(),
                fields: changed,
            })),
        }
    }
    encode_held(new, entries);
}

/// A managedFields entry during an update: decoded, or kept as stored.
enum Held<'a> {
    Decoded(Entry),
    Kept(&'a Value),
}

impl Held<'_> {
    /// What [`encode`] orders entries by.
    fn order(&self) -> (&str, Option<&str>, &str, &str, &str) {
        match self {
            Held::Decoded(e) => (
                &e.operation,
                e.time.as_deref(),
                &e.manager,
                &e.api_version,
                &e.subresource,
            ),
            Held::Kept(raw) => {
                let text = |key: &str| raw.get(key).and_then(Value::as_str);
                (
                    text("operation").unwrap_or_default(),
                    text("time"),
                    text("manager").unwrap_or_default(),
                    text("apiVersion").unwrap_or_default(),
                    text("subresource").unwrap_or_default(),
                )
            }
        }
    }
}

/// [`encode`] for entries some of which are kept as stored.
fn encode_held(object: &mut Value, mut entries: Vec<Held>) {
    entries.retain(|held| match held {
        Held::Decoded(e) => !e.fields.is_empty(),
        // Only non-empty entries are kept (see `keeps_as_stored`).
        Held::Kept(_) => true,
    });
    entries.sort_by(|a, b| a.order().cmp(&b.order()));
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if entries.is_empty() {
        metadata.remove("managedFields");
    } else {
        let list = entries
            .iter()
            .map(|held| match held {
                Held::Decoded(e) => e.to_json(),
                Held::Kept(raw) => (*raw).clone(),
            })
            .collect();
        metadata.insert("managedFields".into(), Value::Array(list));
    }
}

/// Whether the stored entry `raw` comes out of an update by `writer` exactly as it went in, so
/// that it can be written back without decoding: it is not the writer's own entry, it owns
/// nothing under a top-level field the write changed or removed, and it is in the form
/// [`Entry::to_json`] writes (the fields [`Entry::from_json`] reads, and a FieldsV1 that
/// decodes to a non-empty set and encodes back to itself). Decoding it, taking `changed` and
/// `removed` from it and encoding it would give `raw` again.
fn keeps_as_stored(raw: &Value, writer: &Writer, changed: &FieldSet, removed: &FieldSet) -> bool {
    let Some(map) = raw.as_object().filter(|map| well_formed(map)) else {
        return false;
    };
    if is_own(map, writer) || changed.is_member() || removed.is_member() {
        return false;
    }
    let Some(fields) = canonical_fields(map) else {
        return false;
    };
    changed
        .child_names()
        .chain(removed.child_names())
        .all(|name| !fields.contains_key(name))
}

/// Whether a stored entry holds only the keys [`Entry::from_json`] reads, of the types
/// [`Entry::to_json`] writes.
fn well_formed(map: &Map<String, Value>) -> bool {
    map.iter().all(|(key, value)| match key.as_str() {
        "manager" | "operation" | "apiVersion" | "time" => value.is_string(),
        "fieldsType" => value == "FieldsV1",
        "subresource" => value.as_str().is_some_and(|s| !s.is_empty()),
        "fieldsV1" => true,
        _ => false,
    }) && ["manager", "operation", "apiVersion", "fieldsType"]
        .iter()
        .all(|key| map.contains_key(*key))
}

/// Whether a stored entry is the one an update by `writer` records into.
fn is_own(map: &Map<String, Value>, writer: &Writer) -> bool {
    let text = |key: &str| map.get(key).and_then(Value::as_str).unwrap_or_default();
    text("manager") == writer.manager
        && text("operation") == "Update"
        && text("subresource") == writer.subresource()
        && text("apiVersion") == writer.api_version
}

/// A stored entry's FieldsV1 when it is non-empty and in the form [`FieldSet::to_fields_v1`]
/// writes, so that decoding and encoding it again gives it back.
fn canonical_fields(map: &Map<String, Value>) -> Option<&Map<String, Value>> {
    map.get("fieldsV1")
        .and_then(Value::as_object)
        .filter(|fields| !fields.is_empty() && set::is_canonical_fields_v1(fields))
}

/// The usual write of a component, the same fields written again (a kubelet's Lease renewals,
/// its Node status reports): the writer's own stored entry already owns every field the write
/// changed, the write removed nothing, and every other entry is one [`keeps_as_stored`] keeps.
/// The general path would decode the own entry, find its union with `changed` to be itself,
/// and encode it back with `now` as its time. Instead the stored entries are written as they
/// are, the own entry with its new time and in its new place in [`encode`]'s order. False, with
/// `new` untouched, when any of that does not hold, or when `new` brings entries of its own
/// (a non-empty list other than the stored one, on the main resource: the general path takes
/// the client's list).
fn retime_own_entry(
    writer: &Writer,
    live: &Value,
    new: &mut Value,
    changed: &FieldSet,
    removed: &FieldSet,
    now: &str,
) -> bool {
    if changed.is_empty() || !removed.is_empty() {
        return false;
    }
    let Some(stored) = live
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
    else {
        return false;
    };
    // The own entry first: most writes that do not qualify fail here, before the others'
    // fields are walked.
    let mut owns = stored
        .iter()
        .enumerate()
        .filter(|(_, raw)| raw.as_object().is_some_and(|map| is_own(map, writer)));
    let (Some((own, raw)), None) = (owns.next(), owns.next()) else {
        return false;
    };
    let retimable = raw.as_object().is_some_and(|map| {
        well_formed(map)
            && map.get("time").is_some_and(Value::is_string)
            && canonical_fields(map).is_some_and(|fields| set::fields_v1_covers(fields, changed))
    });
    let qualifies = retimable
        && stored
            .iter()
            .enumerate()
            .all(|(index, raw)| index == own || keeps_as_stored(raw, writer, changed, removed));
    if !qualifies {
        return false;
    }
    let Some(metadata) = new.get_mut("metadata").and_then(Value::as_object_mut) else {
        return false;
    };
    let given = metadata.get("managedFields");
    let as_stored = given.and_then(Value::as_array) == Some(stored);
    let brings_its_own = given
        .and_then(Value::as_array)
        .is_some_and(|list| !list.is_empty());
    if !as_stored {
        if writer.subresource.is_none() && brings_its_own {
            return false;
        }
        metadata.insert("managedFields".into(), Value::Array(stored.clone()));
    }
    let Some(entries) = metadata
        .get_mut("managedFields")
        .and_then(Value::as_array_mut)
    else {
        return false;
    };
    entries[own]["time"] = Value::String(now.to_string());
    entries.sort_by(|a, b| Held::Kept(a).order().cmp(&Held::Kept(b).order()));
    true
}

/// A field an apply would take from another manager.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// The other manager, described as in [`Entry::describe`].
    pub manager: String,
    /// The field, as in [`display_path`].
    pub field: String,
}

/// kube-apiserver's message for an apply's conflicts.
pub fn conflict_message(conflicts: &[Conflict]) -> String {
    if let [only] = conflicts {
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            only.manager, only.field
        );
    }
    let mut managers: Vec<&str> = conflicts.iter().map(|c| c.manager.as_str()).collect();
    managers.sort_unstable();
    managers.dedup();
    let mut lines = Vec::new();
    for manager in managers {
        lines.push(format!("conflicts with {manager}:"));
        for conflict in conflicts.iter().filter(|c| c.manager == manager) {
            lines.push(format!("- {}", conflict.field));
        }
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

/// The entries a server-side apply by `writer` leaves, `applied` being the fields of its
/// configuration and `merged` the object it produces from `live`, or the conflicts that stop it.
///
/// Fields another manager owns and the apply changes are conflicts unless `force` is set, when
/// they move to the applier. An apply by `kubectl` whose conflicts are all fields of the
/// object's last client-side applied configuration goes ahead as if forced (how kubectl moves an
/// object from client-side to server-side apply).
pub fn apply_ownership(
    writer: &Writer,
    live: &Value,
    merged: &Value,
    applied: FieldSet,
    force: bool,
    now: &str,
) -> Result<Vec<Entry>, Vec<Conflict>> {
    let mut entries = decode(live);
    let comparison = compare(writer.kind, live, merged, &mut Vec::new());
    let mut changed = comparison.changed();
    writer.strip(&mut changed);
    let mut removed = comparison.removed;
    writer.strip(&mut removed);
    let own = |e: &Entry| e.is(writer.manager, "Apply", writer.subresource(), "");
    let mut conflicts = Vec::new();
    let mut contested = FieldSet::default();
    for entry in entries.iter().filter(|e| !own(e)) {
        let theirs = entry.fields.intersection(&changed);
        contested = contested.union(&theirs);
        for path in theirs.paths() {
            conflicts.push(Conflict {
                manager: entry.describe(),
                field: display_path(&path),
            });
        }
    }
    conflicts.sort_by(|a, b| (&a.manager, &a.field).cmp(&(&b.manager, &b.field)));
    if !conflicts.is_empty() && !force && !migrates_client_side_apply(writer, live, &contested) {
        return Err(conflicts);
    }
    let object_changed = {
        let strip = |v: &Value| {
            let mut v = v.clone();
            if let Some(metadata) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                metadata.remove("managedFields");
            }
            v
        };
        strip(live) != strip(merged)
    };
    let previous = entries.iter().position(own);
    for entry in entries.iter_mut().filter(|e| !own(e)) {
        entry.fields = entry.fields.difference(&changed).difference(&removed);
    }
    let time = match previous.map(|i| &entries[i]) {
        Some(entry) if !object_changed && entry.fields == applied => entry.time.clone(),
        _ => Some(now.to_string()),
    };
    let entry = Entry {
        manager: writer.manager.to_string(),
        operation: "Apply".into(),
        api_version: writer.api_version.to_string(),
        time,
        subresource: writer.subresource().to_string(),
        fields: applied,
    };
    match previous {
        Some(index) => entries[index] = entry,
        None => entries.push(entry),
    }
    Ok(entries)
}

/// Whether kubectl's server-side apply may take over the `contested` fields: the applier is
/// `kubectl` and they are all in the object's last client-side applied configuration.
fn migrates_client_side_apply(writer: &Writer, live: &Value, contested: &FieldSet) -> bool {
    if writer.manager != "kubectl" {
        return false;
    }
    let Some(last_applied) = live
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(LAST_APPLIED))
        .and_then(Value::as_str)
        .and_then(|text| serde_json::from_str::<Value>(text).ok())
    else {
        return false;
    };
    let mut allowed = value_set(writer.kind, &last_applied, &mut Vec::new());
    writer.strip(&mut allowed);
    contested.difference(&allowed).is_empty()
}

/// The last-applied annotation a `kubectl` server-side apply keeps in step with its
/// configuration when the object has one (so a later client-side apply computes from it).
pub fn sync_last_applied(manager: &str, live: &Value, merged: &mut Value, config: &Value) {
    let has_annotation = live
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(LAST_APPLIED))
        .is_some();
    if manager != "kubectl" || !has_annotation {
        return;
    }
    let mut config = config.clone();
    if let Some(annotations) = config
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.remove(LAST_APPLIED);
        if annotations.is_empty() {
            if let Some(metadata) = config.get_mut("metadata").and_then(Value::as_object_mut) {
                metadata.remove("annotations");
            }
        }
    }
    let text = format!("{config}\n");
    let Some(metadata) = merged.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let annotations = metadata
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(annotations) = annotations {
        annotations.insert(LAST_APPLIED.into(), Value::String(text));
    }
}
