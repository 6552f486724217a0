//! The storage admission plugins:
//!
//! - DefaultStorageClass — a claim that names no class gets the default StorageClass (the newest
//!   when several are marked, as upstream picks).
//! - StorageObjectInUseProtection — new claims and volumes carry the `kubernetes.io/pvc-protection`
//!   and `kubernetes.io/pv-protection` finalizers, which the protection controllers remove once
//!   nothing uses the object.
//! - PersistentVolumeClaimResize — a claim's storage request grows only when it is bound and its
//!   class allows volume expansion.

use serde_json::{json, Value};

use api::volumes::{claim_has_class, class_of, default_class, requested_storage};

/// Sets a classless claim's `storageClassName` to the default class among `classes`.
pub fn default_storage_class(claim: &mut Value, classes: &[Value]) {
    if claim_has_class(claim) {
        return;
    }
    let Some(name) = default_class(classes)
        .and_then(|c| c.pointer("/metadata/name"))
        .cloned()
    else {
        return;
    };
    if let Some(spec) = claim.get_mut("spec").and_then(Value::as_object_mut) {
        spec.insert("storageClassName".into(), name);
    }
}

/// Adds `finalizer` to the object unless it is there already.
pub fn protect(object: &mut Value, finalizer: &str) {
    let metadata = crate::meta::metadata_mut(object);
    let finalizers = metadata.entry("finalizers").or_insert_with(|| json!([]));
    if !finalizers.is_array() {
        *finalizers = json!([]);
    }
    if let Some(list) = finalizers.as_array_mut() {
        if !list.iter().any(|f| f == finalizer) {
            list.push(json!(finalizer));
        }
    }
}

/// Whether a claim update that grows the request may go ahead: the reason it is forbidden.
/// `class` is the claim's StorageClass, if it exists.
pub fn check_resize(old: &Value, new: &Value, class: Option<&Value>) -> Result<(), String> {
    let (Some(old_size), Some(new_size)) = (requested_storage(old), requested_storage(new)) else {
        return Ok(());
    };
    if new_size <= old_size {
        return Ok(());
    }
    if old.pointer("/status/phase").and_then(Value::as_str) != Some("Bound") {
        return Err("Only bound persistent volume claims can be expanded".into());
    }
    let (old_class, new_class) = (class_of(old), class_of(new));
    let allowed = !new_class.is_empty()
        && old_class == new_class
        && class
            .and_then(|c| c.get("allowVolumeExpansion"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
    if allowed {
        Ok(())
    } else {
        Err("only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str, default: bool, expand: bool) -> Value {
        json!({"metadata": {"name": name, "creationTimestamp": "2026-01-01T00:00:00Z",
            "annotations": {"storageclass.kubernetes.io/is-default-class": default.to_string()}},
            "allowVolumeExpansion": expand})
    }

    fn claim(class: Option<&str>, size: &str, phase: &str) -> Value {
        let mut c = json!({"spec": {"resources": {"requests": {"storage": size}}}, "status": {"phase": phase}});
        if let Some(class) = class {
            c["spec"]["storageClassName"] = json!(class);
        }
        c
    }

    #[test]
    fn a_classless_claim_gets_the_default() {
        let classes = [class("slow", false, false), class("standard", true, true)];
        let mut c = claim(None, "1Gi", "Pending");
        default_storage_class(&mut c, &classes);
        assert_eq!(c["spec"]["storageClassName"], "standard");
        let mut explicit = claim(Some(""), "1Gi", "Pending");
        default_storage_class(&mut explicit, &classes);
        assert_eq!(explicit["spec"]["storageClassName"], "");
        let mut none = claim(None, "1Gi", "Pending");
        default_storage_class(&mut none, &classes[..1]);
        assert!(none["spec"].get("storageClassName").is_none());
    }

    #[test]
    fn protection_adds_its_finalizer_once() {
        let mut c = json!({"metadata": {"finalizers": ["other"]}});
        protect(&mut c, "kubernetes.io/pvc-protection");
        protect(&mut c, "kubernetes.io/pvc-protection");
        assert_eq!(
            c["metadata"]["finalizers"],
            json!(["other", "kubernetes.io/pvc-protection"])
        );
    }

    #[test]
    fn only_bound_claims_of_expandable_classes_grow() {
        let expandable = class("fast", false, true);
        let fixed = class("fixed", false, false);
        let old = claim(Some("fast"), "1Gi", "Bound");
        assert_eq!(
            check_resize(
                &old,
                &claim(Some("fast"), "2Gi", "Bound"),
                Some(&expandable)
            ),
            Ok(())
        );
        assert_eq!(
            check_resize(&old, &claim(Some("fast"), "1Gi", "Bound"), Some(&fixed)),
            Ok(())
        );
        let refused = check_resize(&old, &claim(Some("fast"), "2Gi", "Bound"), Some(&fixed));
        assert!(refused.is_err_and(|e| e.starts_with("only dynamically provisioned pvc")));
        let pending = claim(Some("fast"), "1Gi", "Pending");
        assert_eq!(
            check_resize(
                &pending,
                &claim(Some("fast"), "2Gi", "Pending"),
                Some(&expandable)
            ),
            Err("Only bound persistent volume claims can be expanded".into())
        );
    }
}
