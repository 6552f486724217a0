//! Ownership and identity helpers shared by the controllers: object keys, controller
//! references, and "now" as the API's timestamp type.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;

/// `namespace/name` (or `name`), the informer's key.
pub fn key_of(meta: &ObjectMeta) -> String {
    api::informer::key(
        meta.namespace.as_deref(),
        meta.name.as_deref().unwrap_or_default(),
    )
}

/// Splits a key into (namespace, name).
pub fn split_key(key: &str) -> (Option<&str>, &str) {
    match key.split_once('/') {
        Some((ns, name)) => (Some(ns), name),
        None => (None, key),
    }
}

/// The owner reference with `controller: true`, if any.
pub fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .as_deref()?
        .iter()
        .find(|r| r.controller == Some(true))
}

/// True if `meta`'s controller is the object with `uid`.
pub fn controlled_by(meta: &ObjectMeta, uid: &str) -> bool {
    controller_of(meta).is_some_and(|r| r.uid == uid)
}

/// A controller reference to the owner (`blockOwnerDeletion` so foreground deletion waits).
pub fn controller_ref(api_version: &str, kind: &str, owner: &ObjectMeta) -> OwnerReference {
    OwnerReference {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        name: owner.name.clone().unwrap_or_default(),
        uid: owner.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

pub fn is_deleting(meta: &ObjectMeta) -> bool {
    meta.deletion_timestamp.is_some()
}

/// The current time at second precision (what the API stores).
pub fn now() -> Time {
    time_at(now_seconds())
}

/// Seconds since the Unix epoch, now.
pub fn now_seconds() -> i64 {
    chrono::Utc::now().timestamp()
}

/// Seconds since the Unix epoch of an API timestamp.
pub fn seconds(time: &Time) -> i64 {
    time.0.as_second()
}

/// An API timestamp `seconds` after the epoch.
pub fn time_at(seconds: i64) -> Time {
    Time(Timestamp::from_second(seconds).unwrap_or(Timestamp::UNIX_EPOCH))
}
