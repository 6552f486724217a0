//! What admission reads on every pod create, parsed once instead of once per request: the
//! facts of a namespace (whether it is terminating, its PodSecurity labels) and the
//! PriorityClasses (by name, and the globalDefault one).
//!
//! The watch cache holds objects as JSON; decoding a namespace and every PriorityClass on each
//! create was most of admission's cost. [`PolicyIndex`] keeps the parsed form next to the
//! resourceVersion it was parsed from and, on each lookup, compares that with the object the
//! cache holds *now* (a pointer-sized read under the cache's lock): a changed, deleted or
//! re-created object has another resourceVersion, so a parsed form is used only while it
//! still describes exactly what the cache has. Nothing here can be older than the cache.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::RwLock;
use serde_json::Value;

use crate::meta;
use crate::watch_cache::{CachedObject, ResourceCache};

use super::pod_security::{ENFORCE_LABEL, ENFORCE_VERSION_LABEL};

/// What admission needs of a namespace.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NamespaceFacts {
    /// `status.phase` ("Active", "Terminating"; empty when unset).
    pub phase: String,
    /// `metadata.deletionTimestamp` is set: the namespace is being deleted.
    pub terminating: bool,
    /// The `pod-security.kubernetes.io/enforce` label, as written.
    pub enforce: Option<String>,
    /// The `pod-security.kubernetes.io/enforce-version` label, as written.
    pub enforce_version: Option<String>,
}

impl NamespaceFacts {
    pub fn from_value(namespace: &Value) -> NamespaceFacts {
        let label = |key: &str| {
            namespace
                .pointer("/metadata/labels")
                .and_then(|l| l.get(key))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        NamespaceFacts {
            phase: meta::str_at(namespace, "status.phase")
                .unwrap_or("")
                .to_string(),
            terminating: meta::deletion_timestamp(namespace).is_some(),
            enforce: label(ENFORCE_LABEL),
            enforce_version: label(ENFORCE_VERSION_LABEL),
        }
    }
}

/// One PriorityClass, as the Priority plugin reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriorityClassFacts {
    pub name: String,
    pub value: i64,
    /// `preemptionPolicy` when set.
    pub preemption_policy: Option<String>,
    pub global_default: bool,
}

impl PriorityClassFacts {
    pub fn from_value(class: &Value) -> PriorityClassFacts {
        PriorityClassFacts {
            name: meta::name(class).to_string(),
            value: class.get("value").and_then(Value::as_i64).unwrap_or(0),
            preemption_policy: class
                .get("preemptionPolicy")
                .and_then(Value::as_str)
                .map(str::to_string),
            global_default: class.get("globalDefault").and_then(Value::as_bool) == Some(true),
        }
    }
}

/// Every PriorityClass, in key (= name) order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PriorityClasses {
    classes: Vec<PriorityClassFacts>,
}

impl PriorityClasses {
    pub fn new(classes: Vec<PriorityClassFacts>) -> PriorityClasses {
        PriorityClasses { classes }
    }

    pub fn from_values(classes: &[Value]) -> PriorityClasses {
        PriorityClasses::new(classes.iter().map(PriorityClassFacts::from_value).collect())
    }

    pub fn named(&self, name: &str) -> Option<&PriorityClassFacts> {
        self.classes.iter().find(|c| c.name == name)
    }

    /// The first class (in name order) marked `globalDefault`.
    pub fn global_default(&self) -> Option<&PriorityClassFacts> {
        self.classes.iter().find(|c| c.global_default)
    }
}

/// The classes parsed from a set of cached objects.
struct ParsedClasses {
    objects: Vec<Arc<CachedObject>>,
    classes: Arc<PriorityClasses>,
}

/// Parsed namespaces and PriorityClasses, each valid only for the resourceVersion it was
/// parsed at (see the module's documentation).
#[derive(Default)]
pub struct PolicyIndex {
    namespaces: RwLock<HashMap<String, (i64, Arc<NamespaceFacts>)>>,
    classes: RwLock<Option<ParsedClasses>>,
}

impl PolicyIndex {
    /// The facts of the namespace the cache holds under `key`, or `None` when the cache has no
    /// such namespace.
    pub fn namespace(&self, cache: &ResourceCache, key: &str) -> Option<Arc<NamespaceFacts>> {
        let (facts, parsed) = self.namespace_at(key, cache.get(key));
        // Namespaces deleted without being looked up again are dropped once the map outgrows
        // the cache (checked when the map grows, i.e. when a namespace was parsed).
        if parsed && self.namespaces.read().len() > 2 * cache.object_count() + 64 {
            self.namespaces
                .write()
                .retain(|k, _| cache.get(k).is_some());
        }
        facts
    }

    /// The facts of `current`, the object the cache holds under `key` now, and whether they
    /// were parsed (rather than found).
    fn namespace_at(
        &self,
        key: &str,
        current: Option<Arc<CachedObject>>,
    ) -> (Option<Arc<NamespaceFacts>>, bool) {
        let Some(object) = current else {
            // Gone (or not yet seen): forget what was parsed for it.
            if self.namespaces.read().contains_key(key) {
                self.namespaces.write().remove(key);
            }
            return (None, false);
        };
        if let Some((rv, facts)) = self.namespaces.read().get(key) {
            if *rv == object.rv {
                return (Some(facts.clone()), false);
            }
        }
        let Ok(value) = object.value() else {
            return (None, false);
        };
        let facts = Arc::new(NamespaceFacts::from_value(&value));
        self.namespaces
            .write()
            .insert(key.to_string(), (object.rv, facts.clone()));
        (Some(facts), true)
    }

    /// The classes parsed from `objects`, every PriorityClass the cache holds now.
    pub fn classes_at(&self, objects: &[Arc<CachedObject>]) -> Arc<PriorityClasses> {
        // The cache replaces an object's `Arc` whenever it changes, and the parsed set holds
        // the ones it was parsed from (so their addresses are not reused): the same pointers
        // are the same objects, key and resourceVersion.
        let same = |parsed_from: &[Arc<CachedObject>]| {
            parsed_from.len() == objects.len()
                && parsed_from
                    .iter()
                    .zip(objects)
                    .all(|(a, b)| Arc::ptr_eq(a, b))
        };
        if let Some(parsed) = self.classes.read().as_ref() {
            if same(&parsed.objects) {
                return parsed.classes.clone();
            }
        }
        let classes = Arc::new(parse_classes(objects));
        *self.classes.write() = Some(ParsedClasses {
            objects: objects.to_vec(),
            classes: classes.clone(),
        });
        classes
    }
}

fn parse_classes(objects: &[Arc<CachedObject>]) -> PriorityClasses {
    PriorityClasses::new(
        objects
            .iter()
            .filter_map(|o| o.value().ok())
            .map(|v| PriorityClassFacts::from_value(&v))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn namespace_facts_read_phase_deletion_and_labels() {
        let ns = json!({"metadata": {"name": "dev", "deletionTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"pod-security.kubernetes.io/enforce": "baseline",
                       "pod-security.kubernetes.io/enforce-version": "v1.30"}},
            "status": {"phase": "Terminating"}});
        let facts = NamespaceFacts::from_value(&ns);
        assert!(facts.terminating);
        assert_eq!(facts.phase, "Terminating");
        assert_eq!(facts.enforce.as_deref(), Some("baseline"));
        assert_eq!(facts.enforce_version.as_deref(), Some("v1.30"));
        assert_eq!(
            NamespaceFacts::from_value(&json!({"metadata": {"name": "a"}})),
            NamespaceFacts::default()
        );
    }

    fn cached(storage: &str, key: &str, object: Value, rv: i64) -> Arc<CachedObject> {
        Arc::new(CachedObject::from_value(storage, key, &object, rv))
    }

    #[test]
    fn a_namespace_is_parsed_again_when_its_resource_version_moves() {
        let index = PolicyIndex::default();
        let key = "/registry/namespaces/dev";
        let labelled = |level: &str| {
            json!({"metadata": {"name": "dev",
                "labels": {"pod-security.kubernetes.io/enforce": level}}})
        };
        let v1 = cached("namespaces", key, labelled("baseline"), 10);
        let first = index.namespace_at(key, Some(v1.clone())).0.expect("exists");
        assert_eq!(first.enforce.as_deref(), Some("baseline"));
        // Same resourceVersion: the parsed facts are reused, not parsed again.
        let again = index.namespace_at(key, Some(v1)).0.expect("exists");
        assert!(Arc::ptr_eq(&first, &again));
        // Relabelled: a new resourceVersion, new facts.
        let v2 = cached("namespaces", key, labelled("restricted"), 11);
        let relabelled = index.namespace_at(key, Some(v2)).0.expect("exists");
        assert_eq!(relabelled.enforce.as_deref(), Some("restricted"));
        // Deleted: nothing, and nothing kept.
        assert_eq!(index.namespace_at(key, None), (None, false));
        assert!(index.namespaces.read().is_empty());
        // Re-created at a later revision without labels: no PodSecurity level is left over.
        let v3 = cached("namespaces", key, json!({"metadata": {"name": "dev"}}), 12);
        assert_eq!(
            index.namespace_at(key, Some(v3)).0.expect("exists").enforce,
            None
        );
    }

    #[test]
    fn priority_classes_follow_every_change_of_the_set() {
        let index = PolicyIndex::default();
        let class = |name: &str, value: i64, global: bool, rv: i64| {
            cached(
                "priorityclasses",
                &format!("/registry/priorityclasses/{name}"),
                json!({"metadata": {"name": name}, "value": value, "globalDefault": global}),
                rv,
            )
        };
        let high = class("high", 1000, false, 5);
        let set = vec![high.clone()];
        let first = index.classes_at(&set);
        assert_eq!(first.named("high").map(|c| c.value), Some(1000));
        assert_eq!(first.global_default(), None);
        assert!(Arc::ptr_eq(&first, &index.classes_at(&set)));
        // A class added.
        let with_default = vec![high.clone(), class("normal", 10, true, 6)];
        let second = index.classes_at(&with_default);
        assert_eq!(
            second.global_default().map(|c| c.name.as_str()),
            Some("normal")
        );
        // One changed in place (same keys, new resourceVersion).
        let changed = vec![high, class("normal", 20, false, 7)];
        let third = index.classes_at(&changed);
        assert_eq!(third.global_default(), None);
        assert_eq!(third.named("normal").map(|c| c.value), Some(20));
        // One deleted.
        let fourth = index.classes_at(&changed[1..]);
        assert_eq!(fourth.named("high"), None);
        // All gone.
        assert_eq!(*index.classes_at(&[]), PriorityClasses::default());
    }
}
