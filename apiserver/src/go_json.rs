//! JSON as kube-apiserver writes it.
//!
//! kube-apiserver encodes typed objects with Go's `encoding/json`: struct fields come out in the
//! order the Go struct declares them (`kind, apiVersion, metadata, spec, status`; a Status is
//! `kind, apiVersion, metadata, status, message, reason, details, code`), map keys sorted,
//! `<`, `>`, `&`, U+2028 and U+2029 escaped as `\u003c`-style sequences, and a response body
//! ends with the newline `json.Encoder` writes. kemu holds objects as `serde_json::Value`
//! (keys sorted), so this module writes a value in Go's order using the tables in [`types`]:
//! the fields a table names first, in its order, then any field it does not name, sorted.
//!
//! Objects are written to the store in this form too, so the watch cache serves lists and
//! watches from the stored bytes without reordering them per request.

mod autoscaling;
mod storage;
mod types;

use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde::Serialize;
use serde_json::{Map, Value};
use std::io;

pub use types::{
    API_GROUP, API_GROUP_LIST, API_RESOURCE_LIST, API_VERSIONS, LIST_META, STATUS, TABLE,
    VERSION_INFO,
};

/// A Go struct: its JSON fields in declaration order, each with its own type when it is a struct
/// (or a list of structs).
pub struct Ty(pub &'static [Field]);

pub struct Field {
    pub name: &'static str,
    pub ty: Option<&'static Ty>,
}

/// A field whose value needs no ordering (a scalar, a list of scalars, a map).
const fn f(name: &'static str) -> Field {
    Field { name, ty: None }
}

/// A struct-valued (or list-of-structs) field.
const fn t(name: &'static str, ty: &'static Ty) -> Field {
    Field { name, ty: Some(ty) }
}

impl Ty {
    fn field(&self, name: &str) -> Option<&Field> {
        self.0.iter().find(|f| f.name == name)
    }
}

/// How a top-level document is laid out.
#[derive(Clone, Copy)]
enum Shape {
    Object(&'static Ty),
    /// A `…List`: kind, apiVersion, metadata (ListMeta), items of the given type.
    List(&'static Ty),
    /// A custom resource (or its list): kube-apiserver holds these as unstructured maps, which
    /// Go writes with every key sorted.
    Unstructured,
}

/// Whether `api_version` is a group kemu has no types for: one a CustomResourceDefinition
/// defines.
fn is_custom_group(api_version: &str) -> bool {
    let Some((group, _)) = api_version.rsplit_once('/') else {
        return false;
    };
    group.contains('.')
        && !matches!(
            group,
            "meta.k8s.io"
                | "apidiscovery.k8s.io"
                | crate::custom_metrics::CUSTOM_GROUP
                | crate::custom_metrics::EXTERNAL_GROUP
        )
        && !api::RESOURCES.iter().any(|r| r.group == group)
}

/// The Go type of a kind served under an apiVersion.
fn kind_type(api_version: &str, kind: &str) -> Option<&'static Ty> {
    use types::*;
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    Some(match (group, kind) {
        (_, "Status") => &STATUS,
        (_, "Table") => &TABLE,
        (_, "APIVersions") => &API_VERSIONS,
        (_, "APIGroupList") => &API_GROUP_LIST,
        (_, "APIGroup") => &API_GROUP,
        (_, "APIResourceList") => &API_RESOURCE_LIST,
        (_, "PartialObjectMetadata") => &PARTIAL_OBJECT_METADATA,
        ("", "Namespace") => &NAMESPACE,
        ("", "Pod") => &POD,
        ("", "Node") => &NODE,
        ("", "Event") => &EVENT,
        ("events.k8s.io", "Event") => &EVENTS_V1_EVENT,
        ("", "ConfigMap") => &CONFIG_MAP,
        ("", "Secret") => &SECRET,
        ("", "Service") => &SERVICE,
        ("", "Endpoints") => &ENDPOINTS,
        ("", "ServiceAccount") => &SERVICE_ACCOUNT,
        ("", "ResourceQuota") => &RESOURCE_QUOTA,
        ("", "LimitRange") => &LIMIT_RANGE,
        ("", "ReplicationController") => &REPLICATION_CONTROLLER,
        ("", "Binding") => &BINDING,
        ("apps", "DaemonSet") => &DAEMON_SET,
        ("apps", "Deployment") => &DEPLOYMENT,
        ("apps", "ReplicaSet") => &REPLICA_SET,
        ("apps", "StatefulSet") => &STATEFUL_SET,
        ("apps", "ControllerRevision") => &CONTROLLER_REVISION,
        ("", "PersistentVolume") => &storage::PERSISTENT_VOLUME,
        ("", "PersistentVolumeClaim") => &storage::PERSISTENT_VOLUME_CLAIM,
        ("storage.k8s.io", "StorageClass") => &storage::STORAGE_CLASS,
        ("storage.k8s.io", "CSIDriver") => &storage::CSI_DRIVER,
        ("storage.k8s.io", "CSINode") => &storage::CSI_NODE,
        ("storage.k8s.io", "VolumeAttachment") => &storage::VOLUME_ATTACHMENT,
        ("storage.k8s.io", "CSIStorageCapacity") => &storage::CSI_STORAGE_CAPACITY,
        ("batch", "Job") => &JOB,
        ("batch", "CronJob") => &CRON_JOB,
        ("autoscaling", "Scale") => &SCALE,
        ("autoscaling", "HorizontalPodAutoscaler") if api_version == "autoscaling/v1" => {
            &autoscaling::HPA_V1
        }
        ("autoscaling", "HorizontalPodAutoscaler") => &autoscaling::HPA_V2,
        ("metrics.k8s.io", "NodeMetrics") => &autoscaling::NODE_METRICS,
        ("metrics.k8s.io", "PodMetrics") => &autoscaling::POD_METRICS,
        ("custom.metrics.k8s.io", "MetricValue") => &autoscaling::METRIC_VALUE,
        ("external.metrics.k8s.io", "ExternalMetricValue") => &autoscaling::EXTERNAL_METRIC_VALUE,
        ("policy", "PodDisruptionBudget") => &POD_DISRUPTION_BUDGET,
        ("policy", "Eviction") => &EVICTION,
        ("coordination.k8s.io", "Lease") => &LEASE,
        ("scheduling.k8s.io", "PriorityClass") => &PRIORITY_CLASS,
        ("discovery.k8s.io", "EndpointSlice") => &ENDPOINT_SLICE,
        ("rbac.authorization.k8s.io", "ClusterRole") => &CLUSTER_ROLE,
        ("rbac.authorization.k8s.io", "Role") => &ROLE,
        ("rbac.authorization.k8s.io", "ClusterRoleBinding" | "RoleBinding") => &ROLE_BINDING,
        (
            "authorization.k8s.io",
            "SubjectAccessReview" | "SelfSubjectAccessReview" | "LocalSubjectAccessReview",
        ) => &ACCESS_REVIEW,
        ("authentication.k8s.io", "SelfSubjectReview") => &SELF_SUBJECT_REVIEW,
        _ => return None,
    })
}

/// What every object kemu has no table for starts with (TypeMeta, then ObjectMeta); the rest
/// is written sorted.
static GENERIC: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &types::OBJECT_META),
]);

fn shape(value: &Value) -> Shape {
    let api_version = value
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
    if let Some(ty) = kind_type(api_version, kind) {
        return Shape::Object(ty);
    }
    if is_custom_group(api_version) {
        return Shape::Unstructured;
    }
    match kind.strip_suffix("List") {
        Some(item) if value.get("items").is_some() => {
            Shape::List(kind_type(api_version, item).unwrap_or(&GENERIC))
        }
        _ => Shape::Object(&GENERIC),
    }
}

/// A value written in Go's field order for `ty`; `skip` names a field left out (the stored form
/// leaves `metadata.resourceVersion` out).
struct Ordered<'a> {
    value: &'a Value,
    ty: Option<&'static Ty>,
    skip: Skip,
}

#[derive(Clone, Copy, PartialEq)]
enum Skip {
    Nothing,
    /// Leave out `metadata.resourceVersion` (this is the top-level object).
    MetadataResourceVersion,
    /// Leave out `resourceVersion` (this is the metadata).
    ResourceVersion,
}

impl Ordered<'_> {
    fn child<'b>(&self, name: &str, value: &'b Value, ty: Option<&'static Ty>) -> Ordered<'b> {
        let skip = match self.skip {
            Skip::MetadataResourceVersion if name == "metadata" => Skip::ResourceVersion,
            _ => Skip::Nothing,
        };
        Ordered { value, ty, skip }
    }

    fn keeps(&self, key: &str) -> bool {
        !(self.skip == Skip::ResourceVersion && key == "resourceVersion")
    }

    fn write_map<S: Serializer>(
        &self,
        serializer: S,
        map: &Map<String, Value>,
        ty: &'static Ty,
    ) -> Result<S::Ok, S::Error> {
        // One pass over the members: each takes its field's place in the type, and members
        // the type does not know follow in the map's order. (A map lookup for every field the
        // type has cost more: most types have many more fields than an object sets.)
        let mut members: Vec<(usize, &str, &Value, Option<&'static Ty>)> =
            Vec::with_capacity(map.len());
        for (key, value) in map {
            if !self.keeps(key) {
                continue;
            }
            match ty.0.iter().position(|f| f.name == key) {
                Some(at) => members.push((at, key, value, ty.0[at].ty)),
                None => members.push((usize::MAX, key, value, None)),
            }
        }
        members.sort_by_key(|m| m.0);
        let mut out = serializer.serialize_map(None)?;
        for (_, key, value, field_ty) in members {
            out.serialize_entry(key, &self.child(key, value, field_ty))?;
        }
        out.end()
    }
}

impl Serialize for Ordered<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match (self.value, self.ty) {
            (Value::Object(map), Some(ty)) => self.write_map(serializer, map, ty),
            (Value::Object(map), None) if self.skip != Skip::Nothing => {
                static NONE: Ty = Ty(&[]);
                self.write_map(serializer, map, &NONE)
            }
            (Value::Array(items), Some(ty)) => {
                let mut out = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    out.serialize_element(&Ordered {
                        value: item,
                        ty: Some(ty),
                        skip: Skip::Nothing,
                    })?;
                }
                out.end()
            }
            (value, _) => value.serialize(serializer),
        }
    }
}

/// A list document: kind, apiVersion, metadata, items, then anything else.
struct OrderedList<'a> {
    map: &'a Map<String, Value>,
    item: &'static Ty,
}

impl Serialize for OrderedList<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        static HEAD: Ty = Ty(&[
            f("kind"),
            f("apiVersion"),
            t("metadata", &LIST_META),
            f("items"),
        ]);
        let mut out = serializer.serialize_map(None)?;
        for field in HEAD.0 {
            let Some(value) = self.map.get(field.name) else {
                continue;
            };
            let ty = if field.name == "items" {
                Some(self.item)
            } else {
                field.ty
            };
            out.serialize_entry(
                field.name,
                &Ordered {
                    value,
                    ty,
                    skip: Skip::Nothing,
                },
            )?;
        }
        for (key, value) in self.map {
            if HEAD.field(key).is_none() {
                out.serialize_entry(key, value)?;
            }
        }
        out.end()
    }
}

/// serde_json's compact output with Go's HTML-safe string escaping.
struct GoFormatter;

impl serde_json::ser::Formatter for GoFormatter {
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let bytes = fragment.as_bytes();
        if !bytes.iter().any(|b| matches!(b, b'<' | b'>' | b'&' | 0xE2)) {
            return writer.write_all(bytes);
        }
        let mut start = 0;
        for (at, c) in fragment.char_indices() {
            let escaped = match c {
                '<' => "\\u003c",
                '>' => "\\u003e",
                '&' => "\\u0026",
                '\u{2028}' => "\\u2028",
                '\u{2029}' => "\\u2029",
                _ => continue,
            };
            writer.write_all(&bytes[start..at])?;
            writer.write_all(escaped.as_bytes())?;
            start = at + c.len_utf8();
        }
        writer.write_all(&bytes[start..])
    }
}

fn write(out: &mut Vec<u8>, document: &impl Serialize) {
    let mut serializer = serde_json::Serializer::with_formatter(&mut *out, GoFormatter);
    // Writing a `Value` into a Vec cannot fail: its keys are strings and its numbers finite.
    if document.serialize(&mut serializer).is_err() {
        out.clear();
        out.extend_from_slice(b"null");
    }
}

fn encode(value: &Value, skip: Skip) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    match (shape(value), value) {
        (Shape::List(item), Value::Object(map)) if skip == Skip::Nothing => {
            write(&mut out, &OrderedList { map, item })
        }
        (Shape::Unstructured, _) => write(
            &mut out,
            &Ordered {
                value,
                ty: None,
                skip,
            },
        ),
        (Shape::Object(ty), _) | (Shape::List(ty), _) => write(
            &mut out,
            &Ordered {
                value,
                ty: Some(ty),
                skip,
            },
        ),
    }
    out
}

/// `value` as kube-apiserver writes it (its type taken from its kind and apiVersion).
pub fn to_vec(value: &Value) -> Vec<u8> {
    encode(value, Skip::Nothing)
}

/// `value` written as the Go type `ty` (for documents without a kind, such as `/version`).
pub fn to_vec_as(value: &Value, ty: &'static Ty) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    write(
        &mut out,
        &Ordered {
            value,
            ty: Some(ty),
            skip: Skip::Nothing,
        },
    );
    out
}

/// The stored form: [`to_vec`] without `metadata.resourceVersion` (the key's revision is).
pub fn to_vec_for_storage(value: &Value) -> Vec<u8> {
    encode(value, Skip::MetadataResourceVersion)
}

/// Where `metadata.resourceVersion` goes among ObjectMeta's fields: before the first present
/// field that Go declares after it.
pub fn sorts_after_resource_version(key: &str) -> bool {
    let position = |name: &str| types::OBJECT_META.0.iter().position(|f| f.name == name);
    match (position(key), position("resourceVersion")) {
        (Some(at), Some(rv)) => at > rv,
        // Fields ObjectMeta does not declare are written after the declared ones.
        _ => true,
    }
}

#[cfg(test)]
mod tests;
