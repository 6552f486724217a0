//! The writing verbs: create, update (PUT), patch and the pod binding, with their admission,
//! and the read-modify-write loop behind every update (Kubernetes' GuaranteedUpdate).

use std::borrow::Cow;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use api::ResourceInfo;
use serde_json::{json, Value};
use store::types::LeaseId;

use super::{
    check_kind, from_view, parse_optional_rv, patch_error, required, same_but_status,
    set_condition, view, view_of, FieldValidation, Registry, WriteOptions, UPDATE_RETRIES,
};
use crate::admission::policy::NamespaceFacts;
use crate::admission::{CreateRequest, Plugin};
use crate::errors::ApiError;
use crate::field_manager;
use crate::meta;
use crate::patch::{ObjectType, PatchType};
use crate::pipeline::{AdmissionTimer, AdmissionVerb};
use crate::storage::Written;
use crate::strategy;

impl Registry {
    /// The lease new events are attached to.
    pub(super) async fn event_lease(&self, resource: &ResourceInfo) -> Result<LeaseId, ApiError> {
        if resource.storage != "events" {
            return Ok(0);
        }
        if let Some((id, at)) = self.event_leases.lock().current {
            if at.elapsed() < Duration::from_secs(60) {
                return Ok(id);
            }
        }
        let _guard = self.lease_lock.lock().await;
        let ttl = {
            let leases = self.event_leases.lock();
            if let Some((id, at)) = leases.current {
                if at.elapsed() < Duration::from_secs(60) {
                    return Ok(id);
                }
            }
            leases.ttl
        };
        // One lease per minute of events: each expires a full TTL after its last event.
        let granted = self
            .storage
            .client()
            .lease_grant(ttl.as_secs() as i64 + 60)
            .await?;
        self.event_leases.lock().current = Some((granted.id, std::time::Instant::now()));
        Ok(granted.id)
    }

    /// Decodes, checks and normalises a body for `resource`. The body is consumed: unless
    /// unknown fields must be looked for (`Strict`), it is decoded without a copy.
    fn admit(
        &self,
        resource: &ResourceInfo,
        mut object: Value,
        options: &WriteOptions,
    ) -> Result<Value, ApiError> {
        if crate::crd::is_custom(resource) {
            let served = self
                .custom
                .of(resource)
                .ok_or_else(|| ApiError::not_found(resource, ""))?;
            return served.admit(object, options);
        }
        let strict = options.field_validation == FieldValidation::Strict;
        // Unknown fields are looked for when they are refused, or when someone reads warnings.
        let report = strict
            || (options.field_validation == FieldValidation::Warn && options.warnings.is_some());
        let decoded = if report {
            crate::strict::decode(resource, &object)
        } else {
            crate::strict::decode_owned(resource, object.take())
        };
        let cannot = |why: String| {
            ApiError::bad_request(format!(
                "{} in version \"{}\" cannot be handled as a {}: {}",
                resource.kind, resource.version, resource.kind, why
            ))
        };
        let mut canonical = decoded.map_err(|e| cannot(e.to_string()))?;
        if report {
            let unknown = crate::strict::unknown_fields(&object, &canonical);
            let problems = options
                .repeated_fields
                .iter()
                .map(|f| format!("duplicate field \"{f}\""))
                .chain(unknown.iter().map(|f| format!("unknown field \"{f}\"")));
            if strict {
                let problems: Vec<String> = problems.collect();
                if !problems.is_empty() {
                    return Err(cannot(format!(
                        "strict decoding error: {}",
                        problems.join(", ")
                    )));
                }
            } else if let Some(warnings) = &options.warnings {
                problems.for_each(|p| warnings.push(p));
            }
        }
        crate::defaults::apply(resource, &mut canonical);
        if crate::crd::is_definition(resource) {
            crate::crd::definition::apply_defaults(&mut canonical);
        }
        Ok(canonical)
    }

    /// [`Self::admit`] for a status write whose object is the stored one but for its status
    /// (see [`same_but_status`]): the rest was normalised when it was stored and is replaced by
    /// the stored copy anyway, so only the status is decoded and normalised — a kubelet's
    /// status patch no longer round-trips the whole pod.
    fn admit_status(&self, resource: &ResourceInfo, mut object: Value) -> Result<Value, ApiError> {
        let Value::Object(map) = &mut object else {
            return self.admit(resource, object, &ignoring_fields());
        };
        let mut slim = serde_json::Map::new();
        for key in ["apiVersion", "kind", "status"] {
            if let Some(v) = map.remove(key) {
                slim.insert(key.into(), v);
            }
        }
        let Value::Object(mut admitted) =
            self.admit(resource, Value::Object(slim), &ignoring_fields())?
        else {
            return Err(ApiError::internal("a decoded object is not a JSON object"));
        };
        for key in ["apiVersion", "kind", "status"] {
            if let Some(v) = admitted.remove(key) {
                map.insert(key.into(), v);
            }
        }
        Ok(object)
    }

    pub async fn create(
        &self,
        resource: &'static ResourceInfo,
        namespace: Option<&str>,
        object: Value,
        options: &WriteOptions,
    ) -> Result<Value, ApiError> {
        self.create_object(resource, namespace, object, options, true)
            .await
    }

    /// Creates `object`; `record` says whether the write's fields are recorded for its manager
    /// (not when server-side apply already did).
    async fn create_object(
        &self,
        resource: &'static ResourceInfo,
        namespace: Option<&str>,
        mut object: Value,
        options: &WriteOptions,
        record: bool,
    ) -> Result<Value, ApiError> {
        check_kind(resource, &mut object)?;
        strategy::prepare_create(resource, namespace, &mut object)?;
        let mut object = self.admit(resource, object, options)?;
        let name = meta::name(&object).to_string();
        if name.is_empty() {
            return Err(ApiError::invalid(
                resource,
                "",
                vec![crate::validation::Cause {
                    reason: "FieldValueRequired".into(),
                    message: "Required value: name or generateName is required".into(),
                    field: "metadata.name".into(),
                }],
            ));
        }
        let ns = if resource.namespaced {
            match meta::namespace(&object) {
                Some(ns) if !ns.is_empty() => Some(ns.to_string()),
                _ => return Err(ApiError::bad_request("a namespace is required")),
            }
        } else {
            None
        };
        // Admission is timed apart from decoding, validation and storage (see `pipeline`).
        let admission_time = AdmissionTimer::start(AdmissionVerb::Create);
        let namespace_facts = match &ns {
            Some(ns)
                if self.admission.is_enabled(Plugin::NamespaceLifecycle)
                    || self.admission.is_enabled(Plugin::PodSecurity) =>
            {
                self.namespace_facts(ns).await?
            }
            _ => None,
        };
        let request = CreateRequest {
            resource,
            name: &name,
            namespace: ns.as_deref(),
            namespace_facts: namespace_facts.as_deref(),
        };
        if options.node_host && self.admission.is_enabled(Plugin::NodeRestriction) {
            crate::admission::node_restriction::admit_create(resource, &name, &object)?;
        }
        // Kubernetes' order: mutating admission, the object's validation, validating admission.
        self.admission.mutate_create(&request, &mut object)?;
        if resource.group.is_empty()
            && resource.kind == "Pod"
            && self.admission.is_enabled(Plugin::ServiceAccount)
        {
            let namespace = ns.as_deref().unwrap_or_default();
            // NamespaceLifecycle runs first: a pod in a missing namespace is refused for that.
            if self.admission.is_enabled(Plugin::NamespaceLifecycle) {
                crate::admission::lifecycle::check_create(
                    resource,
                    &name,
                    namespace,
                    namespace_facts.as_deref(),
                )?;
            }
            let account = crate::admission::service_account::check_exists(
                self, resource, &name, namespace, &object,
            )
            .await?;
            crate::admission::service_account::mount_token(&mut object, account);
        }
        admission_time.pause();
        self.prepare_write(resource, None, &mut object);
        let mut causes = crate::validation::validate_create(resource, &object);
        causes.extend(self.validate_write(resource, None, &object));
        if !causes.is_empty() {
            return Err(ApiError::invalid(resource, &name, causes));
        }
        admission_time.resume();
        self.admission.validate_create(&request, &object)?;
        admission_time.pause();
        if record {
            let custom = self.custom.of(resource);
            let kind = object_type(resource, custom.as_deref());
            record_fields(resource, kind, None, &json!({}), &mut object, options);
        }
        self.check_rbac_write(resource, options, None, &object)?;
        let key = Self::key(resource, ns.as_deref(), &name);
        let lease = if options.dry_run {
            0
        } else {
            self.event_lease(resource).await?
        };
        let converted = (super::is_converted_view(resource) || crate::crd::is_custom(resource))
            .then(|| self.stored_form(resource, object.clone()));
        // A v1 autoscaler reads back as its stored v2 object converted (with v2's defaults).
        if let (true, Some(stored)) = (crate::autoscaling::is_v1(resource), &converted) {
            object = view(resource, stored.clone());
        }
        let stored = converted.as_ref().unwrap_or(&object);
        match self
            .store_new(
                resource,
                ns.as_deref(),
                &key,
                stored,
                lease,
                options.dry_run,
                &admission_time,
            )
            .await?
        {
            Written::Ok(rv) => {
                admission_time.finish(&self.pipeline);
                if !options.dry_run {
                    meta::set_resource_version(&mut object, rv);
                }
                Ok(object)
            }
            Written::Conflict(_) => Err(ApiError::already_exists(resource, &name)),
        }
    }

    /// What admission reads of a namespace: from the cache (parsed once per resourceVersion)
    /// or, when the cache has not seen it yet, from the store.
    async fn namespace_facts(
        &self,
        namespace: &str,
    ) -> Result<Option<Arc<NamespaceFacts>>, ApiError> {
        if let Some(facts) = self.admission.namespace_facts(namespace) {
            return Ok(Some(facts));
        }
        let namespaces = api::resources::find("", "v1", "namespaces")
            .ok_or_else(|| ApiError::internal("no namespaces"))?;
        let key = namespaces.key(None, namespace);
        Ok(self
            .storage
            .get(&key)
            .await?
            .map(|(v, _)| Arc::new(NamespaceFacts::from_value(&v))))
    }

    /// Full replacement (PUT). `subresource` is `status` for `/status`.
    pub async fn update(
        &self,
        resource: &'static ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        mut object: Value,
        options: &WriteOptions,
    ) -> Result<Value, ApiError> {
        check_kind(resource, &mut object)?;
        let body_name = meta::name(&object).to_string();
        if body_name.is_empty() {
            meta::metadata_mut(&mut object).insert("name".into(), json!(name));
        } else if body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        if resource.namespaced {
            if let (Some(body_ns), Some(url_ns)) = (meta::namespace(&object), namespace) {
                if body_ns != url_ns {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
            }
        }
        let object = self.admit(resource, object, options)?;
        // No resourceVersion, or "0", is an unconditional update.
        let pinned = match meta::resource_version(&object) {
            "0" => None,
            rv => parse_optional_rv(rv)?,
        };
        let admission_time = AdmissionTimer::paused(AdmissionVerb::Update);
        let custom = self.custom.of(resource);
        let kind = object_type(resource, custom.as_deref());
        self.guaranteed_update(
            resource,
            namespace,
            name,
            subresource,
            pinned,
            options,
            Some(&admission_time),
            |current| {
                let mut next = self.stored_form(resource, object.clone());
                strategy::prepare_update(resource, current, &mut next, subresource);
                self.restrict_node_update(resource, name, current, &next, options)?;
                admission_time
                    .time(|| self.mutate_update(resource, current, &mut next, subresource));
                record_fields(resource, kind, subresource, current, &mut next, options);
                Ok(Some(next))
            },
        )
        .await
        .inspect(|_| admission_time.finish(&self.pipeline))
    }

    /// PATCH: applies the patch to the current object, then updates as PUT does.
    #[allow(clippy::too_many_arguments)]
    pub async fn patch(
        &self,
        resource: &'static ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        patch_type: PatchType,
        body: &[u8],
        force: bool,
        options: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let manager = options.manager().unwrap_or("unknown").to_string();
        let key = Self::key(resource, namespace, name);
        let custom = self.custom.of(resource);
        let kind = object_type(resource, custom.as_deref());
        if patch_type == PatchType::Apply && self.current(resource, &key).await?.is_none() {
            // Server-side apply creates what does not exist.
            let created =
                crate::patch::apply(kind, &Value::Null, body, patch_type, &manager, force)
                    .map_err(patch_error)?;
            return self
                .create_object(resource, namespace, created, options, false)
                .await;
        }
        let admission_time = AdmissionTimer::paused(AdmissionVerb::Patch);
        // A patch may pin a resourceVersion the cache has not reached yet (a client patching
        // what its own write just returned, as kubectl does with managedFields): then the
        // cache is waited for, once, rather than answering a conflict.
        let ahead_of_cache = AtomicI64::new(0);
        let mutate = |current: &Value| {
            let shown = view_of(resource, current);
            let mut patched = crate::patch::apply(kind, &shown, body, patch_type, &manager, force)
                .map_err(patch_error)?;
            check_kind(resource, &mut patched)?;
            if meta::name(&patched) != name {
                return Err(ApiError::bad_request(
                    "the patch may not change the object's name",
                ));
            }
            let pinned = meta::resource_version(&patched).to_string();
            if !pinned.is_empty() && pinned != meta::resource_version(current) {
                let pinned_rv = pinned.parse::<i64>().ok();
                let current_rv = meta::resource_version(current).parse::<i64>().ok();
                if let (Some(p), Some(c)) = (pinned_rv, current_rv) {
                    if p > c {
                        ahead_of_cache.store(p, Ordering::Relaxed);
                    }
                }
                return Err(ApiError::stale(resource, name));
            }
            let status_only = subresource == Some("status")
                && options.field_validation != FieldValidation::Strict
                && same_but_status(&shown, &patched);
            let admitted = if status_only {
                self.admit_status(resource, patched)?
            } else {
                self.admit(resource, patched, options)?
            };
            let mut next = self.stored_form(resource, admitted);
            if status_only && matches!(shown, Cow::Borrowed(_)) && custom.is_none() {
                // Shown and stored as it is stored: `next` is `current` but for its status.
                strategy::prepare_status_update_in_place(resource, current, &mut next);
            } else {
                strategy::prepare_update(resource, current, &mut next, subresource);
            }
            self.restrict_node_update(resource, name, current, &next, options)?;
            admission_time.time(|| self.mutate_update(resource, current, &mut next, subresource));
            if patch_type != PatchType::Apply {
                record_fields(resource, kind, subresource, current, &mut next, options);
            }
            Ok(Some(next))
        };
        let mut result = self
            .guaranteed_update(
                resource,
                namespace,
                name,
                subresource,
                None,
                options,
                Some(&admission_time),
                &mutate,
            )
            .await;
        let rv = ahead_of_cache.load(Ordering::Relaxed);
        if matches!(result, Err(ApiError::Conflict { .. })) && rv > 0 {
            self.cache.wait_for(rv, Duration::from_secs(2)).await?;
            result = self
                .guaranteed_update(
                    resource,
                    namespace,
                    name,
                    subresource,
                    None,
                    options,
                    Some(&admission_time),
                    &mutate,
                )
                .await;
        }
        result.inspect(|_| admission_time.finish(&self.pipeline))
    }

    /// NodeRestriction on a node host's update of one of its Nodes.
    fn restrict_node_update(
        &self,
        resource: &ResourceInfo,
        name: &str,
        current: &Value,
        next: &Value,
        options: &WriteOptions,
    ) -> Result<(), ApiError> {
        if !options.node_host || !self.admission.is_enabled(Plugin::NodeRestriction) {
            return Ok(());
        }
        crate::admission::node_restriction::admit_update(resource, name, current, next)
    }

    /// The mutating admission of an update: a replaced quota's status follows its spec.
    fn mutate_update(
        &self,
        resource: &ResourceInfo,
        current: &Value,
        next: &mut Value,
        subresource: Option<&str>,
    ) {
        if resource.group.is_empty() && resource.kind == "ResourceQuota" && subresource.is_none() {
            self.admission.mutate_quota_update(current, next);
        }
    }

    /// Reads the current object, computes the next one with `mutate` (None: nothing to do) and
    /// writes it if the object did not change meanwhile; retries on a lost race unless the caller
    /// pinned a resourceVersion.
    #[allow(clippy::too_many_arguments)]
    async fn guaranteed_update<F>(
        &self,
        resource: &'static ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        pinned: Option<i64>,
        options: &WriteOptions,
        admission_time: Option<&AdmissionTimer>,
        mutate: F,
    ) -> Result<Value, ApiError>
    where
        F: Fn(&Value) -> Result<Option<Value>, ApiError>,
    {
        let key = Self::key(resource, namespace, name);
        let mut current = self.current(resource, &key).await?;
        for _ in 0..UPDATE_RETRIES {
            let Some((existing, rv)) = current.take() else {
                return Err(ApiError::not_found(resource, name));
            };
            if let Some(pinned) = pinned {
                if pinned != rv {
                    // The cache may lag; confirm with the store before calling it a conflict.
                    let fresh = self.storage.get(&key).await?;
                    match fresh {
                        Some((_, fresh_rv)) if fresh_rv == pinned => {
                            current = self.storage.get(&key).await?;
                            continue;
                        }
                        Some(_) => return Err(ApiError::stale(resource, name)),
                        None => return Err(ApiError::not_found(resource, name)),
                    }
                }
            }
            let Some(mut next) = mutate(&existing)? else {
                return Ok(existing);
            };
            if subresource.is_none() {
                self.prepare_write(resource, Some(&existing), &mut next);
            }
            // Status writers and binding change what spec validation would forbid.
            let mut causes = match subresource {
                Some(_) => crate::validation::validate_status_update(resource, &existing, &next),
                None => crate::validation::validate_update(resource, &existing, &next),
            };
            causes.extend(self.validate_write(resource, Some(&existing), &next));
            if !causes.is_empty() {
                return Err(ApiError::invalid(resource, name, causes));
            }
            if subresource.is_none() {
                self.admission
                    .validate_update(resource, name, &existing, &next)?;
            }
            self.check_rbac_write(resource, options, Some(&existing), &next)?;
            if options.dry_run {
                return Ok(next);
            }
            // The last finalizer removed from an object being deleted: it goes now.
            if meta::deletion_timestamp(&next).is_some()
                && meta::finalizers(&next).is_empty()
                && !(resource.group.is_empty()
                    && resource.kind == "Pod"
                    && next
                        .pointer("/spec/nodeName")
                        .and_then(Value::as_str)
                        .is_some_and(|n| !n.is_empty()))
            {
                return match self
                    .remove(resource, &key, rv, &existing, admission_time)
                    .await?
                {
                    Written::Ok(delete_rv) => {
                        meta::set_resource_version(&mut next, delete_rv);
                        Ok(next)
                    }
                    Written::Conflict(fresh) => {
                        current = fresh;
                        continue;
                    }
                };
            }
            // A write that changes nothing is not written: the object keeps its
            // resourceVersion and watchers see no event (kubectl then says "(no change)").
            if same_but_resource_version(&next, &existing) {
                return Ok(view(resource, existing));
            }
            let lease = self.event_lease(resource).await?;
            match self.storage.update(&key, &next, rv, lease).await? {
                Written::Ok(new_rv) => {
                    meta::set_resource_version(&mut next, new_rv);
                    return Ok(view(resource, next));
                }
                Written::Conflict(fresh) => {
                    if pinned.is_some() {
                        return Err(ApiError::stale(resource, name));
                    }
                    current = fresh;
                }
            }
        }
        Err(ApiError::conflict(
            resource,
            name,
            "too many concurrent updates; try again",
        ))
    }

    /// The shape an object given in `resource`'s view is stored in: core/v1 events, a custom
    /// object in its storage version.
    fn stored_form(&self, resource: &ResourceInfo, object: Value) -> Value {
        let mut object = from_view(resource, object);
        if let Some(served) = self.custom.of(resource) {
            served.to_storage(&mut object);
        }
        object
    }

    /// What the server sets on a write of the main resource beyond the strategy: a CRD's
    /// status (names accepted, established, stored versions).
    fn prepare_write(&self, resource: &ResourceInfo, current: Option<&Value>, next: &mut Value) {
        if crate::crd::is_definition(resource) {
            if let Some(status) = current.and_then(|c| c.get("status")) {
                next["status"] = status.clone();
            }
            let others = self.custom.definitions_besides(meta::name(next));
            crate::crd::definition::set_status(next, &others, &meta::now_rfc3339());
        }
    }

    /// Validation beyond [`crate::validation`]: a CRD's own rules, a custom object's schema
    /// and its rules (`old`: the object an update replaces, for transition rules).
    fn validate_write(
        &self,
        resource: &ResourceInfo,
        old: Option<&Value>,
        object: &Value,
    ) -> Vec<crate::validation::Cause> {
        if crate::crd::is_definition(resource) {
            return crate::crd::definition::validate(object, &crate::crd::builtin_groups());
        }
        match self.custom.of(resource) {
            Some(served) => served.validate(object, old),
            None => Vec::new(),
        }
    }

    /// Binds an unassigned pod to a node (`pods/binding`).
    pub async fn bind(&self, namespace: &str, name: &str, binding: &Value) -> Result<(), ApiError> {
        let pods = api::resources::pods();
        let node = binding
            .pointer("/target/name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| ApiError::invalid(pods, name, vec![required("target.name")]))?
            .to_string();
        let options = WriteOptions::default();
        self.guaranteed_update(
            pods,
            Some(namespace),
            name,
            Some("binding"),
            None,
            &options,
            None,
            |current| {
                if meta::deletion_timestamp(current).is_some() {
                    return Err(ApiError::conflict(
                        pods,
                        name,
                        "pod is being deleted, cannot be assigned to a host",
                    ));
                }
                let bound = current
                    .pointer("/spec/nodeName")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                if !bound.is_empty() {
                    return Err(ApiError::conflict(
                        pods,
                        name,
                        &format!("pod {name} is already assigned to node \"{bound}\""),
                    ));
                }
                let mut next = current.clone();
                next["spec"]["nodeName"] = json!(node);
                set_condition(&mut next, "PodScheduled", "True", None, None);
                Ok(Some(next))
            },
        )
        .await
        .map(|_| ())
    }
}

/// Records what a write changed from `live` to `next` for its manager in `next`'s
/// managedFields (see [`field_manager::record_update`]).
fn record_fields(
    resource: &ResourceInfo,
    kind: ObjectType<'_>,
    subresource: Option<&str>,
    live: &Value,
    next: &mut Value,
    options: &WriteOptions,
) {
    let Some(manager) = options.manager() else {
        return;
    };
    let api_version = resource.api_version();
    let writer = field_manager::Writer {
        manager,
        kind,
        api_version: &api_version,
        subresource,
        has_status: resource.has_subresource("status"),
    };
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    field_manager::record_update(&writer, live, next, &now);
}

/// The type whose list semantics patches and managed fields follow: a custom kind's by its
/// version's schema.
fn object_type<'a>(
    resource: &'a ResourceInfo,
    custom: Option<&'a crate::crd::ServedVersion>,
) -> ObjectType<'a> {
    ObjectType {
        name: resource.kind,
        schema: custom.and_then(|c| c.schema.as_ref()),
    }
}

/// Whether two objects are equal but for `metadata.resourceVersion` (what the store does not
/// hold): an update from one to the other would write the same bytes.
fn same_but_resource_version(a: &Value, b: &Value) -> bool {
    fn without_rv(map: &serde_json::Map<String, Value>) -> usize {
        map.len() - usize::from(map.contains_key("resourceVersion"))
    }
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    a.len() == b.len()
        && a.iter()
            .all(|(key, value)| match (key.as_str(), value, b.get(key)) {
                ("metadata", Value::Object(ma), Some(Value::Object(mb))) => {
                    without_rv(ma) == without_rv(mb)
                        && ma
                            .iter()
                            .filter(|(k, _)| *k != "resourceVersion")
                            .all(|(k, v)| mb.get(k) == Some(v))
                }
                (_, value, other) => other == Some(value),
            })
}

/// Options that neither refuse nor report unknown fields (a status write's normalisation).
fn ignoring_fields() -> WriteOptions {
    WriteOptions {
        field_validation: FieldValidation::Ignore,
        ..Default::default()
    }
}
