//! Admission: what a write goes through after it is decoded and defaulted and before it is
//! stored, as in kube-apiserver — the mutating phase of every enabled plugin, then validation,
//! then the validating phase. Both fronts reach it through the [`crate::registry::Registry`].
//!
//! The plugins keep Kubernetes' names and relative order, and each is switchable
//! ([`AdmissionConfig`], `--enable-admission-plugins` / `--disable-admission-plugins`):
//!
//! - [`lifecycle`] — NamespaceLifecycle: no new content in a missing or terminating namespace; the
//!   system namespaces cannot be deleted.
//! - [`limit_ranger`] — LimitRanger: LimitRange defaults, then its min/max/ratio bounds.
//! - [`service_account`] — ServiceAccount: a pod without one runs as `default`; the account
//!   a pod names must exist.
//! - [`node_restriction`] — NodeRestriction: a node host creates only plain mirror pods bound to
//!   its nodes and sets only the kubelet's labels on its Nodes (checked by the registry, which
//!   knows the writer; see [`crate::registry::WriteOptions::node_host`]).
//! - [`pod_security`] — PodSecurity: the namespace's `pod-security.kubernetes.io/enforce` level.
//! - [`priority`] — Priority: a pod's priority from its PriorityClass.
//! - [`tolerations`] — DefaultTolerationSeconds: tolerate not-ready/unreachable for 300 s.
//! - [`volumes`] — DefaultStorageClass: a claim without a class gets the default one;
//!   StorageObjectInUseProtection: new claims and volumes carry their protection finalizers;
//!   PersistentVolumeClaimResize: only bound claims of expandable classes grow.
//! - [`quota`] — ResourceQuota: usage charged with a compare-and-swap on each quota.
//!
//! The plugins themselves are pure functions of the object and what they look up; this module
//! does the looking up (from the watch cache) and the sequencing.

pub mod lifecycle;
pub mod limit_ranger;
pub mod node_restriction;
pub mod pod_security;
pub mod policy;
pub mod priority;
pub mod quota;
pub mod service_account;
pub mod tolerations;
pub mod volumes;

pub use service_account::default_service_account;

use std::collections::BTreeSet;
use std::sync::Arc;

use api::ResourceInfo;
use serde_json::{json, Value};

use crate::errors::ApiError;
use crate::meta;
use crate::watch_cache::{CachedObject, Filter, ResourceCache, WatchCache};
use policy::{NamespaceFacts, PolicyIndex};

/// An admission plugin kemu implements, by its Kubernetes name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Plugin {
    NamespaceLifecycle,
    LimitRanger,
    ServiceAccount,
    NodeRestriction,
    PodSecurity,
    Priority,
    DefaultTolerationSeconds,
    DefaultStorageClass,
    StorageObjectInUseProtection,
    PersistentVolumeClaimResize,
    ResourceQuota,
}

impl Plugin {
    /// Every plugin, in the order kube-apiserver runs them. All are on by default there too.
    pub const ALL: [Plugin; 11] = [
        Plugin::NamespaceLifecycle,
        Plugin::LimitRanger,
        Plugin::ServiceAccount,
        Plugin::NodeRestriction,
        Plugin::PodSecurity,
        Plugin::Priority,
        Plugin::DefaultTolerationSeconds,
        Plugin::DefaultStorageClass,
        Plugin::StorageObjectInUseProtection,
        Plugin::PersistentVolumeClaimResize,
        Plugin::ResourceQuota,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Plugin::NamespaceLifecycle => "NamespaceLifecycle",
            Plugin::LimitRanger => "LimitRanger",
            Plugin::ServiceAccount => "ServiceAccount",
            Plugin::NodeRestriction => "NodeRestriction",
            Plugin::PodSecurity => "PodSecurity",
            Plugin::Priority => "Priority",
            Plugin::DefaultTolerationSeconds => "DefaultTolerationSeconds",
            Plugin::DefaultStorageClass => "DefaultStorageClass",
            Plugin::StorageObjectInUseProtection => "StorageObjectInUseProtection",
            Plugin::PersistentVolumeClaimResize => "PersistentVolumeClaimResize",
            Plugin::ResourceQuota => "ResourceQuota",
        }
    }

    pub fn from_name(name: &str) -> Option<Plugin> {
        Plugin::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// A bad plugin selection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdmissionConfigError {
    #[error("admission plugin {name:?} is not known (kemu implements: {known})")]
    Unknown { name: String, known: String },
    #[error("admission plugin {name:?} is both enabled and disabled")]
    Both { name: String },
}

/// Which plugins run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionConfig {
    enabled: BTreeSet<Plugin>,
}

impl Default for AdmissionConfig {
    /// Every plugin kemu has, as kube-apiserver enables all of them by default.
    fn default() -> Self {
        AdmissionConfig {
            enabled: Plugin::ALL.into_iter().collect(),
        }
    }
}

impl AdmissionConfig {
    /// No plugin at all (defaulting and validation still run: they are not plugins).
    pub fn none() -> Self {
        AdmissionConfig {
            enabled: BTreeSet::new(),
        }
    }

    /// kube-apiserver's flags: the defaults, plus `enable`, minus `disable`.
    pub fn from_flags(enable: &[String], disable: &[String]) -> Result<Self, AdmissionConfigError> {
        let parse = |names: &[String]| -> Result<BTreeSet<Plugin>, AdmissionConfigError> {
            names
                .iter()
                .map(|n| n.trim())
                .filter(|n| !n.is_empty())
                .map(|n| {
                    Plugin::from_name(n).ok_or_else(|| AdmissionConfigError::Unknown {
                        name: n.to_string(),
                        known: Plugin::ALL.map(Plugin::name).join(", "),
                    })
                })
                .collect()
        };
        let (enable, disable) = (parse(enable)?, parse(disable)?);
        if let Some(p) = enable.intersection(&disable).next() {
            return Err(AdmissionConfigError::Both {
                name: p.name().to_string(),
            });
        }
        let mut config = AdmissionConfig::default();
        config.enabled.extend(enable);
        config.enabled.retain(|p| !disable.contains(p));
        Ok(config)
    }

    pub fn is_enabled(&self, plugin: Plugin) -> bool {
        self.enabled.contains(&plugin)
    }

    /// The enabled plugins in running order.
    pub fn enabled(&self) -> Vec<Plugin> {
        Plugin::ALL
            .into_iter()
            .filter(|p| self.enabled.contains(p))
            .collect()
    }
}

/// The plugins of one API server, with the cache they read policy objects from.
pub struct Admission {
    config: AdmissionConfig,
    cache: Arc<WatchCache>,
    /// Namespaces and PriorityClasses parsed once per resourceVersion.
    policy: PolicyIndex,
    /// The caches every pod create reads, found once (the watch cache's set of resources is
    /// fixed when it is built).
    namespaces: Option<Source>,
    limit_ranges: Option<Source>,
    quotas: Option<Source>,
    priority_classes: Option<Source>,
}

/// One resource's cache, with its key prefix (`/registry/<storage>/`) built once: keys are
/// built by appending, without `format!`.
struct Source {
    resource: &'static ResourceInfo,
    cache: Arc<ResourceCache>,
    prefix: String,
}

impl Source {
    fn find(cache: &WatchCache, group: &str, plural: &str) -> Option<Source> {
        let resource = api::resources::find(group, "v1", plural)?;
        Some(Source {
            resource,
            cache: cache.resource(resource)?.clone(),
            prefix: resource.prefix(),
        })
    }

    /// The key of a cluster-scoped object (as [`ResourceInfo::key`] with no namespace).
    fn cluster_key(&self, name: &str) -> String {
        let mut key = String::with_capacity(self.prefix.len() + name.len());
        key.push_str(&self.prefix);
        key.push_str(name);
        key
    }

    /// Every cached object in `namespace` (all of them for a cluster-scoped resource or
    /// `None`), as [`ResourceInfo::namespace_prefix`] selects them.
    fn list(&self, namespace: Option<&str>) -> Vec<Arc<CachedObject>> {
        let list = |prefix: &str| self.cache.list(prefix, &Filter::default(), None, 0).0;
        match namespace {
            Some(ns) if self.resource.namespaced => {
                let mut prefix = String::with_capacity(self.prefix.len() + ns.len() + 1);
                prefix.push_str(&self.prefix);
                prefix.push_str(ns);
                prefix.push('/');
                list(&prefix)
            }
            _ => list(&self.prefix),
        }
    }
}

/// One create as the plugins see it.
pub struct CreateRequest<'a> {
    pub resource: &'static ResourceInfo,
    pub name: &'a str,
    /// The target namespace's name, for namespaced resources.
    pub namespace: Option<&'a str>,
    /// What admission reads of the namespace object, if it exists.
    pub namespace_facts: Option<&'a NamespaceFacts>,
}

impl Admission {
    pub fn new(config: AdmissionConfig, cache: Arc<WatchCache>) -> Admission {
        Admission {
            config,
            namespaces: Source::find(&cache, "", "namespaces"),
            limit_ranges: Source::find(&cache, "", "limitranges"),
            quotas: Source::find(&cache, "", "resourcequotas"),
            priority_classes: Source::find(&cache, "scheduling.k8s.io", "priorityclasses"),
            cache,
            policy: PolicyIndex::default(),
        }
    }

    /// The facts of `namespace` as the watch cache has it now (`None` when the cache has not
    /// seen it: it may not exist, or the cache may not have caught up).
    pub fn namespace_facts(&self, namespace: &str) -> Option<Arc<NamespaceFacts>> {
        let source = self.namespaces.as_ref()?;
        self.policy
            .namespace(&source.cache, &source.cluster_key(namespace))
    }

    /// Every PriorityClass, parsed (once per change of the set).
    fn priority_classes(&self) -> Arc<policy::PriorityClasses> {
        match &self.priority_classes {
            Some(source) => self.policy.classes_at(&source.list(None)),
            None => Arc::default(),
        }
    }

    /// The LimitRanges of `namespace`, decoded (none are decoded when it has none).
    fn limit_ranges(&self, namespace: Option<&str>) -> Vec<Value> {
        match &self.limit_ranges {
            Some(source) => source
                .list(namespace)
                .iter()
                .filter_map(|o| o.value().ok())
                .collect(),
            None => Vec::new(),
        }
    }

    pub fn config(&self) -> &AdmissionConfig {
        &self.config
    }

    pub fn is_enabled(&self, plugin: Plugin) -> bool {
        self.config.is_enabled(plugin)
    }

    /// Every cached object of `plural` (core group unless `group`) in `namespace`.
    fn list(&self, group: &str, plural: &str, namespace: Option<&str>) -> Vec<Value> {
        let Some(resource) = api::resources::find(group, "v1", plural) else {
            return Vec::new();
        };
        let Some(cache) = self.cache.resource(resource) else {
            return Vec::new();
        };
        let (items, _) = cache.list(
            &resource.namespace_prefix(namespace),
            &Filter::default(),
            None,
            0,
        );
        items.iter().filter_map(|o| o.value().ok()).collect()
    }

    /// The mutating phase of a create.
    pub fn mutate_create(
        &self,
        req: &CreateRequest<'_>,
        object: &mut Value,
    ) -> Result<(), ApiError> {
        if req.resource.group.is_empty() && req.resource.kind == "Pod" {
            self.mutate_pod(req, object)?;
        }
        let core_kind = if req.resource.group.is_empty() {
            req.resource.kind
        } else {
            ""
        };
        if core_kind == "PersistentVolumeClaim" && self.is_enabled(Plugin::DefaultStorageClass) {
            let classes = self.list("storage.k8s.io", "storageclasses", None);
            volumes::default_storage_class(object, &classes);
        }
        if self.is_enabled(Plugin::StorageObjectInUseProtection) {
            match core_kind {
                "PersistentVolumeClaim" => {
                    volumes::protect(object, api::volumes::PVC_PROTECTION_FINALIZER)
                }
                "PersistentVolume" => {
                    volumes::protect(object, api::volumes::PV_PROTECTION_FINALIZER)
                }
                _ => {}
            }
        }
        if self.is_enabled(Plugin::ResourceQuota)
            && req.resource.group.is_empty()
            && req.resource.kind == "ResourceQuota"
        {
            // The quota controller's first sync, done at once: usage of what exists now.
            let namespace = req.namespace.unwrap_or("");
            let used = self.namespace_usage(object, namespace);
            quota::initialise_status(object, None, &used);
        }
        Ok(())
    }

    fn mutate_pod(&self, req: &CreateRequest<'_>, pod: &mut Value) -> Result<(), ApiError> {
        let forbidden = |why: String| ApiError::forbidden(req.resource, req.name, &why);
        if self.is_enabled(Plugin::LimitRanger) {
            let ranges = self.limit_ranges(req.namespace);
            if !ranges.is_empty() {
                limit_ranger::apply_defaults(pod, &ranges);
            }
        }
        if self.is_enabled(Plugin::ServiceAccount) {
            default_service_account(pod);
        }
        if self.is_enabled(Plugin::Priority) {
            priority::admit(pod, &self.priority_classes()).map_err(forbidden)?;
        }
        if self.is_enabled(Plugin::DefaultTolerationSeconds) {
            if let Some(spec) = pod.get_mut("spec") {
                tolerations::add_defaults(spec);
            }
        }
        // Defaults from LimitRanger change the pod's QoS class.
        let qos = crate::strategy::qos_class(pod.get("spec").unwrap_or(&Value::Null));
        if pod["status"].is_object() {
            pod["status"]["qosClass"] = json!(qos);
        }
        Ok(())
    }

    /// The validating phase of a create (after the object's own validation), except quota,
    /// which the registry charges as it writes.
    pub fn validate_create(&self, req: &CreateRequest<'_>, object: &Value) -> Result<(), ApiError> {
        if req.resource.namespaced && self.is_enabled(Plugin::NamespaceLifecycle) {
            lifecycle::check_create(
                req.resource,
                req.name,
                req.namespace.unwrap_or(""),
                req.namespace_facts,
            )?;
        }
        if !(req.resource.group.is_empty() && req.resource.kind == "Pod") {
            return Ok(());
        }
        let forbidden = |why: String| ApiError::forbidden(req.resource, req.name, &why);
        if self.is_enabled(Plugin::LimitRanger) {
            let ranges = self.limit_ranges(req.namespace);
            if !ranges.is_empty() {
                limit_ranger::validate(object, &ranges).map_err(forbidden)?;
            }
        }
        if self.is_enabled(Plugin::PodSecurity) {
            if let Some(ns) = req.namespace_facts {
                pod_security::admit(ns, object).map_err(forbidden)?;
            }
        }
        Ok(())
    }

    /// The validating phase of an update of the object itself (not a subresource), after the
    /// object's own validation.
    pub fn validate_update(
        &self,
        resource: &ResourceInfo,
        name: &str,
        old: &Value,
        new: &Value,
    ) -> Result<(), ApiError> {
        if resource.group.is_empty()
            && resource.kind == "PersistentVolumeClaim"
            && self.is_enabled(Plugin::PersistentVolumeClaimResize)
        {
            let class_name = api::volumes::class_of(new);
            let classes = self.list("storage.k8s.io", "storageclasses", None);
            let class = classes
                .iter()
                .find(|c| c.pointer("/metadata/name").and_then(Value::as_str) == Some(class_name));
            volumes::check_resize(old, new, class)
                .map_err(|why| ApiError::forbidden(resource, name, &why))?;
        }
        Ok(())
    }

    /// The validating phase of a delete.
    pub fn validate_delete(&self, resource: &ResourceInfo, name: &str) -> Result<(), ApiError> {
        if self.is_enabled(Plugin::NamespaceLifecycle) {
            lifecycle::check_delete(resource, name)?;
        }
        Ok(())
    }

    /// Keeps a replaced quota's status in step with its spec: hard follows spec.hard and newly
    /// tracked resources get their current usage.
    pub fn mutate_quota_update(&self, old: &Value, new: &mut Value) {
        if !self.is_enabled(Plugin::ResourceQuota) {
            return;
        }
        let namespace = meta::namespace(old).unwrap_or("").to_string();
        let used = self.namespace_usage(new, &namespace);
        quota::initialise_status(new, Some(old), &used);
    }

    /// What everything in `namespace` uses of the resources `quota` tracks, from the cache.
    fn namespace_usage(&self, quota_object: &Value, namespace: &str) -> quota::Usage {
        let tracked = quota::tracked_resources(quota_object);
        let mut total = quota::Usage::new();
        for resource in api::RESOURCES.iter().filter(|r| r.namespaced) {
            if !quota::tracks_any(resource, &tracked) {
                continue;
            }
            for object in self.list(resource.group, resource.plural, Some(namespace)) {
                if quota::matches_scopes(quota_object, resource, &object) {
                    quota::add_usage(&mut total, &quota::usage(resource, &object));
                }
            }
        }
        total
    }

    /// The quotas of a namespace as the cache has them: (key, object, resourceVersion).
    pub fn cached_quotas(&self, namespace: &str) -> Vec<(String, Value, i64)> {
        let Some(source) = &self.quotas else {
            return Vec::new();
        };
        source
            .list(Some(namespace))
            .iter()
            .filter_map(|o| Some((o.key.clone(), o.value().ok()?, o.rv)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn flags_add_to_and_remove_from_the_defaults() {
        assert_eq!(
            AdmissionConfig::from_flags(&[], &[]),
            Ok(AdmissionConfig::default())
        );
        let config = AdmissionConfig::from_flags(
            &names(&["NamespaceLifecycle"]),
            &names(&["ResourceQuota", "PodSecurity"]),
        )
        .expect("valid");
        assert!(config.is_enabled(Plugin::NamespaceLifecycle));
        assert!(!config.is_enabled(Plugin::ResourceQuota));
        assert!(!config.is_enabled(Plugin::PodSecurity));
        assert_eq!(config.enabled().len(), Plugin::ALL.len() - 2);
        let all = names(&Plugin::ALL.map(Plugin::name));
        assert!(AdmissionConfig::from_flags(&[], &all)
            .expect("valid")
            .enabled()
            .is_empty());
    }

    #[test]
    fn unknown_and_contradictory_plugins_are_refused() {
        let err =
            AdmissionConfig::from_flags(&names(&["AlwaysPullImages"]), &[]).expect_err("unknown");
        assert!(
            err.to_string()
                .contains("\"AlwaysPullImages\" is not known"),
            "{err}"
        );
        assert!(
            err.to_string().contains("ResourceQuota"),
            "lists the known ones: {err}"
        );
        let err = AdmissionConfig::from_flags(&names(&["Priority"]), &names(&["Priority"]))
            .expect_err("both");
        assert_eq!(
            err,
            AdmissionConfigError::Both {
                name: "Priority".into()
            }
        );
    }
}
