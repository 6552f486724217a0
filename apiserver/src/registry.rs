//! The verbs on every resource: create, get, list, update, patch, delete, deletecollection and
//! watch, plus the pod subresources (status, binding). Both fronts (HTTP and QUIC) call these.
//!
//! Reads come from the watch cache (events, which it does not hold, from the store: see
//! [`crate::uncached`]); writes go to the store as conditional transactions. An
//! update that loses a race re-reads the object and tries again when the caller did not pin a
//! resourceVersion (Kubernetes' GuaranteedUpdate).

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::patch::PatchType;
use api::selectors::{FieldSelector, LabelSelector};
use api::ResourceInfo;
use parking_lot::Mutex;
use serde_json::{json, Value};
use store::types::LeaseId;

use crate::admission::policy::NamespaceFacts;
use crate::admission::{quota, Admission, AdmissionConfig, CreateRequest, Plugin};
use crate::authn::UserInfo;
use crate::authz::Authorizer;
use crate::errors::ApiError;
use crate::meta;
use crate::pipeline::{AdmissionTimer, AdmissionVerb, PipelineMetrics};
use crate::storage::{Guarded, Storage, Written};
use crate::strategy;
use crate::uncached;
use crate::watch_cache::{CachedObject, Filter, Subscription, WatchCache};

/// How many times an unpinned update retries after losing a race.
const UPDATE_RETRIES: usize = 16;

/// Options of a write.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    pub dry_run: bool,
    /// `Strict` rejects unknown fields; `Warn`/`Ignore` drop them.
    pub field_validation: FieldValidation,
    pub field_manager: Option<String>,
    /// Who writes, for RBAC's escalation check (None: the server itself, unchecked).
    pub requester: Option<Arc<UserInfo>>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FieldValidation {
    Strict,
    #[default]
    Warn,
    Ignore,
}

impl FieldValidation {
    pub fn parse(s: &str) -> Result<FieldValidation, ApiError> {
        match s {
            "Strict" => Ok(FieldValidation::Strict),
            "Warn" | "" => Ok(FieldValidation::Warn),
            "Ignore" => Ok(FieldValidation::Ignore),
            other => Err(ApiError::bad_request(format!(
                "fieldValidation parameter unsupported: {other}; must be one of Strict, Warn, Ignore"
            ))),
        }
    }
}

/// A list or watch request's scope.
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    pub limit: usize,
    pub continue_token: Option<String>,
    pub resource_version: Option<String>,
}

/// DeleteOptions as clients send them.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    pub grace_period_seconds: Option<i64>,
    pub propagation_policy: Option<String>,
    pub precondition_uid: Option<String>,
    pub precondition_rv: Option<String>,
    pub dry_run: bool,
}

impl DeleteOptions {
    /// Reads a DeleteOptions body (may be empty) merged with query parameters.
    pub fn from_body(body: &Value) -> Result<DeleteOptions, ApiError> {
        if !body.is_null() && !body.is_object() {
            return Err(ApiError::bad_request("DeleteOptions must be a JSON object"));
        }
        let grace =
            match body.get("gracePeriodSeconds") {
                None | Some(Value::Null) => None,
                Some(v) => Some(v.as_i64().ok_or_else(|| {
                    ApiError::bad_request("gracePeriodSeconds must be an integer")
                })?),
            };
        let text = |ptr: &str| {
            body.pointer(ptr)
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let policy = text("/propagationPolicy");
        if let Some(p) = &policy {
            if !["Orphan", "Background", "Foreground"].contains(&p.as_str()) {
                return Err(ApiError::bad_request(format!(
                    "propagationPolicy: Unsupported value: \"{p}\": supported values: \"Foreground\", \"Background\", \"Orphan\""
                )));
            }
        }
        Ok(DeleteOptions {
            grace_period_seconds: grace,
            propagation_policy: policy,
            precondition_uid: text("/preconditions/uid"),
            precondition_rv: text("/preconditions/resourceVersion"),
            dry_run: body
                .get("dryRun")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty()),
        })
    }
}

/// The result of a list.
pub struct ListResult {
    pub items: Vec<Arc<CachedObject>>,
    pub resource_version: i64,
    pub continue_token: Option<String>,
}

/// What a delete did.
pub enum Deleted {
    /// The object is gone; this was its last state.
    Gone(Value),
    /// Deletion started (graceful pod deletion or finalizers); the object remains for now.
    Pending(Value),
}

/// Events expire: they are written with a store lease, one lease shared per minute.
struct EventLeases {
    ttl: Duration,
    current: Option<(LeaseId, std::time::Instant)>,
}

/// The verbs, shared by both fronts.
pub struct Registry {
    storage: Storage,
    cache: Arc<WatchCache>,
    admission: Admission,
    pipeline: Arc<PipelineMetrics>,
    /// Judges RBAC writes (escalation prevention), once the server has set it.
    rbac_guard: OnceLock<Arc<Authorizer>>,
    event_leases: Mutex<EventLeases>,
    lease_lock: tokio::sync::Mutex<()>,
}

impl Registry {
    pub fn new(storage: Storage, cache: Arc<WatchCache>, event_ttl: Duration) -> Registry {
        Registry {
            storage,
            admission: Admission::new(AdmissionConfig::default(), cache.clone()),
            pipeline: Arc::new(PipelineMetrics::default()),
            rbac_guard: OnceLock::new(),
            cache,
            event_leases: Mutex::new(EventLeases {
                ttl: event_ttl,
                current: None,
            }),
            lease_lock: tokio::sync::Mutex::new(()),
        }
    }

    /// Runs these admission plugins (all of them by default).
    pub fn with_admission(mut self, config: AdmissionConfig) -> Registry {
        self.admission = Admission::new(config, self.cache.clone());
        self
    }

    pub fn cache(&self) -> &Arc<WatchCache> {
        &self.cache
    }

    /// Refuses RBAC writes that grant more than their requester holds, as `authorizer` sees
    /// it (Kubernetes' escalation prevention). Set once, by the server.
    pub fn guard_rbac_with(&self, authorizer: Arc<Authorizer>) {
        let _ = self.rbac_guard.set(authorizer);
    }

    /// The escalation check of an RBAC write; a change that leaves the rules (of a role) or
    /// the role reference and subjects (of a binding) as they were passes, as in Kubernetes.
    fn check_rbac_write(
        &self,
        resource: &ResourceInfo,
        options: &WriteOptions,
        current: Option<&Value>,
        next: &Value,
    ) -> Result<(), ApiError> {
        if resource.group != crate::authz::escalation::RBAC_GROUP {
            return Ok(());
        }
        let (Some(user), Some(authorizer)) = (&options.requester, self.rbac_guard.get()) else {
            return Ok(());
        };
        if let Some(current) = current {
            let same = |field: &str| current.get(field) == next.get(field);
            let unchanged = match resource.plural {
                "roles" | "clusterroles" => same("rules") && same("aggregationRule"),
                _ => same("roleRef") && same("subjects"),
            };
            if unchanged {
                return Ok(());
            }
        }
        authorizer.check_rbac_write(user, resource, next)
    }

    /// The pipeline's timings (admission is timed here; the fronts time authn and authz).
    pub fn pipeline(&self) -> &Arc<PipelineMetrics> {
        &self.pipeline
    }

    /// The store operations, with their timings.
    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    fn key(resource: &ResourceInfo, namespace: Option<&str>, name: &str) -> String {
        resource.key(namespace, name)
    }

    /// The lease new events are attached to.
    async fn event_lease(&self, resource: &ResourceInfo) -> Result<LeaseId, ApiError> {
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
        validation: FieldValidation,
    ) -> Result<Value, ApiError> {
        let strict = validation == FieldValidation::Strict;
        let decoded = if strict {
            crate::strict::decode(resource, &object)
        } else {
            crate::strict::decode_owned(resource, object.take())
        };
        let canonical = decoded.map_err(|e| {
            ApiError::bad_request(format!(
                "{} in version \"{}\" cannot be handled as a {}: {}",
                resource.kind, resource.version, resource.kind, e
            ))
        })?;
        if strict {
            let unknown = crate::strict::unknown_fields(&object, &canonical);
            if !unknown.is_empty() {
                let list: Vec<String> = unknown
                    .iter()
                    .map(|f| format!("unknown field \"{f}\""))
                    .collect();
                return Err(ApiError::bad_request(format!(
                    "{} in version \"{}\" cannot be handled as a {}: strict decoding error: {}",
                    resource.kind,
                    resource.version,
                    resource.kind,
                    list.join(", ")
                )));
            }
        }
        Ok(canonical)
    }

    /// [`Self::admit`] for a status write whose object is the stored one but for its status
    /// (see [`same_but_status`]): the rest was normalised when it was stored and is replaced by
    /// the stored copy anyway, so only the status is decoded and normalised — a kubelet's
    /// status patch no longer round-trips the whole pod.
    fn admit_status(&self, resource: &ResourceInfo, mut object: Value) -> Result<Value, ApiError> {
        let Value::Object(map) = &mut object else {
            return self.admit(resource, object, FieldValidation::Ignore);
        };
        let mut slim = serde_json::Map::new();
        for key in ["apiVersion", "kind", "status"] {
            if let Some(v) = map.remove(key) {
                slim.insert(key.into(), v);
            }
        }
        let Value::Object(mut admitted) =
            self.admit(resource, Value::Object(slim), FieldValidation::Ignore)?
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
        mut object: Value,
        options: &WriteOptions,
    ) -> Result<Value, ApiError> {
        check_kind(resource, &mut object)?;
        strategy::prepare_create(resource, namespace, &mut object)?;
        let mut object = self.admit(resource, object, options.field_validation)?;
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
        // Kubernetes' order: mutating admission, the object's validation, validating admission.
        self.admission.mutate_create(&request, &mut object)?;
        admission_time.pause();
        let causes = crate::validation::validate_create(resource, &object);
        if !causes.is_empty() {
            return Err(ApiError::invalid(resource, &name, causes));
        }
        admission_time.resume();
        self.admission.validate_create(&request, &object)?;
        admission_time.pause();
        self.check_rbac_write(resource, options, None, &object)?;
        let key = Self::key(resource, ns.as_deref(), &name);
        let lease = if options.dry_run {
            0
        } else {
            self.event_lease(resource).await?
        };
        let converted;
        let stored = if resource.group == "events.k8s.io" {
            converted = from_view(resource, object.clone());
            &converted
        } else {
            &object
        };
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

    /// Writes a new object, charging the namespace's quotas in the same transaction (the
    /// ResourceQuota plugin). A quota that changed since it was read fails the transaction; the
    /// quotas are then read from the store and the charge judged again. A dry run judges the
    /// charge and writes nothing.
    #[allow(clippy::too_many_arguments)]
    async fn store_new(
        &self,
        resource: &'static ResourceInfo,
        namespace: Option<&str>,
        key: &str,
        object: &Value,
        lease: LeaseId,
        dry_run: bool,
        admission_time: &AdmissionTimer,
    ) -> Result<Written, ApiError> {
        // The quota's share of admission: the charge, not the store round trips.
        admission_time.resume();
        let plain = || async {
            if dry_run {
                Ok(Written::Ok(0))
            } else {
                self.storage.create(key, object, lease).await
            }
        };
        // The quotas the cache holds for the namespace are charged; the object's usage is
        // computed only when there is one (most namespaces have none).
        let (namespace, mut quotas) = match namespace {
            Some(ns) if self.admission.is_enabled(Plugin::ResourceQuota) => {
                (ns, self.admission.cached_quotas(ns))
            }
            _ => ("", Vec::new()),
        };
        let delta = if quotas.is_empty() {
            quota::Usage::new()
        } else {
            quota::usage(resource, object)
        };
        if delta.is_empty() {
            admission_time.pause();
            return plain().await;
        }
        let name = meta::name(object);
        for _ in 0..UPDATE_RETRIES {
            let mut guards = Vec::new();
            for (quota_key, quota_object, revision) in &quotas {
                match quota::charge(quota_object, resource, object, &delta) {
                    Ok(Some(next)) => guards.push(Guarded {
                        key: quota_key.clone(),
                        object: next,
                        revision: *revision,
                    }),
                    Ok(None) => {}
                    Err(why) => return Err(ApiError::forbidden(resource, name, &why)),
                }
            }
            admission_time.pause();
            if guards.is_empty() || dry_run {
                return plain().await;
            }
            match self
                .storage
                .create_guarded(key, object, lease, &guards)
                .await?
            {
                Written::Conflict(None) => {
                    quotas = self.store_quotas(namespace).await?;
                    admission_time.resume();
                }
                written => return Ok(written),
            }
        }
        Err(ApiError::conflict(
            resource,
            name,
            "too many concurrent quota updates; try again",
        ))
    }

    /// Deletes a stored object at revision `rv`, refunding what it charged to the namespace's
    /// quotas in the same transaction.
    async fn remove(
        &self,
        resource: &'static ResourceInfo,
        key: &str,
        rv: i64,
        existing: &Value,
        admission_time: Option<&AdmissionTimer>,
    ) -> Result<Written, ApiError> {
        // The quota's share of admission: the refund, not the store round trips.
        let timed = |f: &mut dyn FnMut()| match admission_time {
            Some(t) => t.time(f),
            None => f(),
        };
        let namespace = meta::namespace(existing)
            .filter(|_| resource.namespaced && self.admission.is_enabled(Plugin::ResourceQuota));
        // As for a create: only the quotas the cache knows are refunded, and the object's
        // usage is computed only when there are some.
        let mut quotas = Vec::new();
        let mut delta = quota::Usage::new();
        if let Some(namespace) = namespace {
            timed(&mut || {
                quotas = self.admission.cached_quotas(namespace);
                if !quotas.is_empty() {
                    delta = quota::usage(resource, existing);
                }
            });
        }
        let Some(namespace) = namespace.filter(|_| !delta.is_empty()) else {
            return self.storage.delete(key, rv).await;
        };
        for _ in 0..UPDATE_RETRIES {
            let mut guards: Vec<Guarded> = Vec::new();
            timed(&mut || {
                guards = quotas
                    .iter()
                    .filter_map(|(quota_key, quota_object, revision)| {
                        Some(Guarded {
                            key: quota_key.clone(),
                            object: quota::refund(quota_object, resource, existing, &delta)?,
                            revision: *revision,
                        })
                    })
                    .collect();
            });
            if guards.is_empty() {
                return self.storage.delete(key, rv).await;
            }
            match self.storage.delete_guarded(key, rv, &guards).await? {
                // The object is as it was: a quota moved.
                Written::Conflict(Some((_, current))) if current == rv => {
                    quotas = self.store_quotas(namespace).await?;
                }
                written => return Ok(written),
            }
        }
        Err(ApiError::conflict(
            resource,
            meta::name(existing),
            "too many concurrent quota updates; try again",
        ))
    }

    /// The namespace's quotas as the store has them now.
    async fn store_quotas(&self, namespace: &str) -> Result<Vec<(String, Value, i64)>, ApiError> {
        let quotas = api::resources::find("", "v1", "resourcequotas")
            .ok_or_else(|| ApiError::internal("no resourcequotas"))?;
        self.storage
            .list(&quotas.namespace_prefix(Some(namespace)))
            .await
    }

    /// The current object from the cache, or the store when the cache does not have it yet.
    async fn current(
        &self,
        resource: &ResourceInfo,
        key: &str,
    ) -> Result<Option<(Value, i64)>, ApiError> {
        if let Some(o) = self.cache.resource(resource).and_then(|c| c.get(key)) {
            return Ok(Some((o.value()?, o.rv)));
        }
        self.storage.get(key).await
    }

    pub async fn get(
        &self,
        resource: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError> {
        let key = Self::key(resource, namespace, name);
        if self.cache.resource(resource).is_none() {
            return match self.storage.get(&key).await? {
                Some((object, _)) => Ok(view(resource, object)),
                None => Err(ApiError::not_found(resource, name)),
            };
        }
        // A get is a consistent read: wait until the cache has caught up with the store.
        let revision = self.cache.current_store_revision().await?;
        if self
            .cache
            .wait_for(revision, Duration::from_secs(3))
            .await
            .is_ok()
        {
            let cached = self.cache.resource(resource).and_then(|c| c.get(&key));
            return match cached {
                Some(o) => Ok(view(resource, o.value()?)),
                None => Err(ApiError::not_found(resource, name)),
            };
        }
        match self.storage.get(&key).await? {
            Some((object, _)) => Ok(view(resource, object)),
            None => Err(ApiError::not_found(resource, name)),
        }
    }

    pub async fn list(
        &self,
        resource: &ResourceInfo,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<ListResult, ApiError> {
        let filter = self.filter(resource, namespace, options)?;
        let Some(cache) = self.cache.resource(resource) else {
            let continued = match &options.continue_token {
                Some(token) => Some(decode_continue(token)?),
                None => None,
            };
            let prefix = resource.namespace_prefix(namespace);
            let listed = uncached::list(
                self.storage.client(),
                resource.storage,
                &prefix,
                &filter,
                continued,
                options.limit,
            )
            .await?;
            return Ok(ListResult {
                continue_token: listed.last.map(|k| encode_continue(&k, listed.revision)),
                items: listed.items,
                resource_version: listed.revision,
            });
        };
        let continued = match &options.continue_token {
            Some(token) => Some(decode_continue(token)?),
            None => None,
        };
        // A continued list goes on from its first page, whose revision the cache has already
        // reached: it does not wait for the store's newest revision again. (A paginated list of
        // 300,000 pods is 600 pages; with a fresh wait per page, any few seconds of cache lag
        // under load failed it part-way, and a re-listing informer never got through.)
        // resourceVersion "0" means "any": serve what the cache has. Otherwise read consistently.
        let minimum = match (&continued, options.resource_version.as_deref()) {
            (Some((_, first_page)), _) => *first_page,
            (None, Some("0")) => 0,
            (None, Some(rv)) if !rv.is_empty() => parse_rv(rv)?,
            (None, _) => self.cache.current_store_revision().await?,
        };
        if minimum > 0 {
            self.cache.wait_for(minimum, Duration::from_secs(3)).await?;
        }
        let start_after = continued.map(|(key, _)| key);
        let revision = self.cache.revision();
        let prefix = resource.namespace_prefix(namespace);
        let (items, last) = cache.list(&prefix, &filter, start_after.as_deref(), options.limit);
        Ok(ListResult {
            items,
            resource_version: revision,
            continue_token: last.map(|k| encode_continue(&k, revision)),
        })
    }

    fn filter(
        &self,
        resource: &ResourceInfo,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<Filter, ApiError> {
        let labels = match options
            .label_selector
            .as_deref()
            .filter(|s| !s.trim().is_empty())
        {
            Some(s) => {
                Some(LabelSelector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?)
            }
            None => None,
        };
        let fields = match options
            .field_selector
            .as_deref()
            .filter(|s| !s.trim().is_empty())
        {
            Some(s) => {
                let selector =
                    FieldSelector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?;
                selector
                    .validate_for(resource)
                    .map_err(|e| ApiError::bad_request(e.to_string()))?;
                Some(selector)
            }
            None => None,
        };
        Ok(Filter {
            namespace: namespace
                .filter(|_| resource.namespaced)
                .map(str::to_string),
            labels,
            fields,
        })
    }

    /// Starts a watch. `send_initial` replays the current state as ADDED events; otherwise
    /// events after `resourceVersion` (or after now, for an empty one) are sent.
    pub async fn watch(
        &self,
        resource: &ResourceInfo,
        namespace: Option<&str>,
        options: &ListOptions,
        send_initial: bool,
        buffer: usize,
    ) -> Result<Subscription, ApiError> {
        let filter = self.filter(resource, namespace, options)?;
        let rv = options.resource_version.as_deref().unwrap_or("");
        let Some(cache) = self.cache.resource(resource) else {
            let from = if send_initial || rv.is_empty() || rv == "0" {
                None
            } else {
                Some(parse_rv(rv)?)
            };
            let prefix = resource.namespace_prefix(namespace);
            return uncached::watch(
                self.storage.client(),
                resource.storage,
                &prefix,
                filter,
                from,
                buffer,
            )
            .await;
        };
        let from = if send_initial {
            let revision = self.cache.current_store_revision().await?;
            self.cache
                .wait_for(revision, Duration::from_secs(3))
                .await?;
            None
        } else if rv.is_empty() || rv == "0" {
            // Kubernetes: an unset or "0" resourceVersion starts with the current state.
            None
        } else {
            let rv = parse_rv(rv)?;
            self.cache.wait_for(rv, Duration::from_secs(3)).await?;
            Some(rv)
        };
        cache.subscribe(filter, from, self.cache.revision(), buffer)
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
        let object = self.admit(resource, object, options.field_validation)?;
        let pinned = parse_optional_rv(meta::resource_version(&object))?;
        let admission_time = AdmissionTimer::paused(AdmissionVerb::Update);
        self.guaranteed_update(
            resource,
            namespace,
            name,
            subresource,
            pinned,
            options,
            Some(&admission_time),
            |current| {
                let mut next = from_view(resource, object.clone());
                strategy::prepare_update(resource, current, &mut next, subresource);
                admission_time
                    .time(|| self.mutate_update(resource, current, &mut next, subresource));
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
        let manager = options
            .field_manager
            .clone()
            .unwrap_or_else(|| "unknown".into());
        let key = Self::key(resource, namespace, name);
        if patch_type == PatchType::Apply && self.current(resource, &key).await?.is_none() {
            // Server-side apply creates what does not exist.
            let created = crate::patch::apply(
                resource.kind,
                &Value::Null,
                body,
                patch_type,
                &manager,
                force,
            )
            .map_err(patch_error)?;
            return self.create(resource, namespace, created, options).await;
        }
        let admission_time = AdmissionTimer::paused(AdmissionVerb::Patch);
        self.guaranteed_update(
            resource,
            namespace,
            name,
            subresource,
            None,
            options,
            Some(&admission_time),
            |current| {
                let shown = view_of(resource, current);
                let mut patched =
                    crate::patch::apply(resource.kind, &shown, body, patch_type, &manager, force)
                        .map_err(patch_error)?;
                check_kind(resource, &mut patched)?;
                if meta::name(&patched) != name {
                    return Err(ApiError::bad_request(
                        "the patch may not change the object's name",
                    ));
                }
                let pinned = meta::resource_version(&patched).to_string();
                if !pinned.is_empty() && pinned != meta::resource_version(current) {
                    return Err(ApiError::stale(resource, name));
                }
                let admitted = if subresource == Some("status")
                    && options.field_validation != FieldValidation::Strict
                    && same_but_status(&shown, &patched)
                {
                    self.admit_status(resource, patched)?
                } else {
                    self.admit(resource, patched, options.field_validation)?
                };
                let mut next = from_view(resource, admitted);
                strategy::prepare_update(resource, current, &mut next, subresource);
                admission_time
                    .time(|| self.mutate_update(resource, current, &mut next, subresource));
                Ok(Some(next))
            },
        )
        .await
        .inspect(|_| admission_time.finish(&self.pipeline))
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
            // Status writers and binding change what spec validation would forbid.
            let causes = match subresource {
                Some(_) => crate::validation::validate_status_update(resource, &existing, &next),
                None => crate::validation::validate_update(resource, &existing, &next),
            };
            if !causes.is_empty() {
                return Err(ApiError::invalid(resource, name, causes));
            }
            self.check_rbac_write(resource, options, Some(&existing), &next)?;
            if options.dry_run {
                return Ok(next);
            }
            // The last finalizer removed from an object being deleted: it goes now.
            if meta::deletion_timestamp(&next).is_some()
                && meta::finalizers(&next).is_empty()
                && !(resource.kind == "Pod"
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

    pub async fn delete(
        &self,
        resource: &'static ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Deleted, ApiError> {
        let admission_time = AdmissionTimer::start(AdmissionVerb::Delete);
        self.admission.validate_delete(resource, name)?;
        admission_time.pause();
        let deleted = self
            .delete_admitted(resource, namespace, name, options, &admission_time)
            .await;
        if deleted.is_ok() {
            admission_time.finish(&self.pipeline);
        }
        deleted
    }

    /// A delete after its admission (the quota refund is timed as admission too).
    async fn delete_admitted(
        &self,
        resource: &'static ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        options: &DeleteOptions,
        admission_time: &AdmissionTimer,
    ) -> Result<Deleted, ApiError> {
        let key = Self::key(resource, namespace, name);
        let mut current = self.current(resource, &key).await?;
        for _ in 0..UPDATE_RETRIES {
            let Some((existing, rv)) = current.take() else {
                return Err(ApiError::not_found(resource, name));
            };
            if let Some(uid) = &options.precondition_uid {
                if uid != meta::uid(&existing) {
                    return Err(ApiError::conflict(
                        resource,
                        name,
                        &format!(
                            "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                            meta::uid(&existing)
                        ),
                    ));
                }
            }
            if let Some(prv) = &options.precondition_rv {
                if *prv != rv.to_string() {
                    return Err(ApiError::conflict(
                        resource,
                        name,
                        &format!("Precondition failed: ResourceVersion in precondition: {prv}, ResourceVersion in object meta: {rv}"),
                    ));
                }
            }
            let plan = deletion_plan(resource, &existing, options);
            if options.dry_run {
                return Ok(match plan {
                    Some(next) => Deleted::Pending(next),
                    None => Deleted::Gone(existing),
                });
            }
            if plan.as_ref() == Some(&existing) {
                return Ok(Deleted::Pending(existing));
            }
            let written = match &plan {
                Some(next) => {
                    self.storage
                        .update(&key, next, rv, self.event_lease(resource).await?)
                        .await?
                }
                None => {
                    self.remove(resource, &key, rv, &existing, Some(admission_time))
                        .await?
                }
            };
            match written {
                Written::Ok(new_rv) => {
                    return Ok(match plan {
                        Some(mut next) => {
                            meta::set_resource_version(&mut next, new_rv);
                            Deleted::Pending(view(resource, next))
                        }
                        None => {
                            let mut last = existing;
                            meta::set_resource_version(&mut last, new_rv);
                            Deleted::Gone(view(resource, last))
                        }
                    });
                }
                Written::Conflict(fresh) => current = fresh,
            }
        }
        Err(ApiError::conflict(
            resource,
            name,
            "too many concurrent updates; try again",
        ))
    }

    /// Deletes everything a list with `list_options` would return.
    pub async fn delete_collection(
        &self,
        resource: &'static ResourceInfo,
        namespace: Option<&str>,
        list_options: &ListOptions,
        options: &DeleteOptions,
    ) -> Result<Vec<Value>, ApiError> {
        let listed = self.list(resource, namespace, list_options).await?;
        let mut out = Vec::new();
        for item in listed.items {
            match self
                .delete(resource, item.namespace.as_deref(), &item.name, options)
                .await
            {
                Ok(Deleted::Gone(v)) | Ok(Deleted::Pending(v)) => out.push(v),
                Err(ApiError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}

/// What a delete turns `existing` into: `None` to remove it now, or the object marked for
/// deletion (graceful pod termination, finalizers, foreground/orphan propagation).
fn deletion_plan(
    resource: &ResourceInfo,
    existing: &Value,
    options: &DeleteOptions,
) -> Option<Value> {
    let mut finalizers = meta::finalizers(existing);
    match options.propagation_policy.as_deref() {
        Some("Foreground") if !finalizers.iter().any(|f| f == "foregroundDeletion") => {
            finalizers.push("foregroundDeletion".into())
        }
        Some("Orphan") if !finalizers.iter().any(|f| f == "orphan") => {
            finalizers.push("orphan".into())
        }
        _ => {}
    }
    let already_deleting = meta::deletion_timestamp(existing).is_some();
    let mut grace: i64 = 0;
    if resource.kind == "Pod" {
        let bound = existing
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty());
        let phase = existing
            .pointer("/status/phase")
            .and_then(Value::as_str)
            .unwrap_or("");
        let terminal = phase == "Succeeded" || phase == "Failed";
        let default = existing
            .pointer("/spec/terminationGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(30);
        grace = options.grace_period_seconds.unwrap_or(default).max(0);
        if !bound || terminal {
            grace = 0;
        }
        if already_deleting {
            // A second delete may only shorten the grace period.
            let current = existing
                .pointer("/metadata/deletionGracePeriodSeconds")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            if grace >= current && grace > 0 && finalizers == meta::finalizers(existing) {
                // Nothing changes: the object stays as it is, still terminating.
                return Some(existing.clone());
            }
        }
    } else if resource.kind == "Namespace" {
        // The namespace controller empties it, then removes the "kubernetes" finalizer.
        let spec_finalizers = existing
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty());
        if spec_finalizers || !finalizers.is_empty() {
            let mut next = existing.clone();
            if !already_deleting {
                meta::metadata_mut(&mut next)
                    .insert("deletionTimestamp".into(), json!(meta::now_rfc3339()));
            }
            next["status"]["phase"] = json!("Terminating");
            meta::metadata_mut(&mut next).insert("finalizers".into(), json!(finalizers));
            if finalizers.is_empty() {
                meta::metadata_mut(&mut next).remove("finalizers");
            }
            return Some(next);
        }
        return None;
    }
    if grace == 0 && finalizers.is_empty() {
        return None;
    }
    let mut next = existing.clone();
    {
        let metadata = meta::metadata_mut(&mut next);
        if !finalizers.is_empty() {
            metadata.insert("finalizers".into(), json!(finalizers));
        }
        if !already_deleting || grace > 0 {
            let at = chrono::Utc::now() + chrono::Duration::seconds(grace);
            metadata.insert(
                "deletionTimestamp".into(),
                json!(at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
            );
            metadata.insert("deletionGracePeriodSeconds".into(), json!(grace));
        }
        if let Some(policy) = &options.propagation_policy {
            // Recorded for the garbage collector.
            let annotations = metadata.entry("annotations").or_insert_with(|| json!({}));
            if let Some(a) = annotations.as_object_mut() {
                a.insert("kemu.dev/propagation-policy".into(), json!(policy));
            }
        }
    }
    if resource.kind == "Pod" && grace == 0 && finalizers.is_empty() {
        return None;
    }
    Some(next)
}

/// Sets (or adds) a status condition, keeping lastTransitionTime when the status is unchanged.
pub fn set_condition(
    object: &mut Value,
    kind: &str,
    status: &str,
    reason: Option<&str>,
    message: Option<&str>,
) {
    let now = meta::now_rfc3339();
    if !object["status"].is_object() {
        object["status"] = json!({});
    }
    if !object["status"]["conditions"].is_array() {
        object["status"]["conditions"] = json!([]);
    }
    let Some(conditions) = object["status"]["conditions"].as_array_mut() else {
        return;
    };
    let mut condition =
        json!({"type": kind, "status": status, "lastProbeTime": null, "lastTransitionTime": now});
    if let Some(r) = reason {
        condition["reason"] = json!(r);
    }
    if let Some(m) = message {
        condition["message"] = json!(m);
    }
    match conditions.iter_mut().find(|c| c["type"] == kind) {
        Some(existing) => {
            if existing["status"] == status {
                condition["lastTransitionTime"] = existing["lastTransitionTime"].clone();
            }
            *existing = condition;
        }
        None => conditions.push(condition),
    }
}

fn required(field: &str) -> crate::validation::Cause {
    crate::validation::Cause {
        reason: "FieldValueRequired".into(),
        message: "Required value".into(),
        field: field.into(),
    }
}

/// Fills in apiVersion and kind when missing (the Python client may omit them) and rejects a
/// body whose kind does not match the URL.
fn check_kind(resource: &ResourceInfo, object: &mut Value) -> Result<(), ApiError> {
    let Some(map) = object.as_object_mut() else {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    };
    let api_version = resource.api_version();
    match map.get("kind").and_then(Value::as_str) {
        None | Some("") => {
            map.insert("kind".into(), json!(resource.kind));
        }
        Some(kind) if kind == resource.kind => {}
        Some(kind) => {
            return Err(ApiError::bad_request(format!(
            "the kind of the provided object ({kind}) does not match the kind of the resource ({})",
            resource.kind
        )))
        }
    }
    match map.get("apiVersion").and_then(Value::as_str) {
        None | Some("") => {
            map.insert("apiVersion".into(), json!(api_version));
        }
        Some(v) if v == api_version => {}
        // events.k8s.io objects may be posted to either view's URL as the other; keep the URL's.
        Some(v) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({api_version})"
            )))
        }
    }
    Ok(())
}

/// The object as this resource's URL shows it (apiVersion and kind of the view).
pub fn view(resource: &ResourceInfo, mut object: Value) -> Value {
    if resource.group == "events.k8s.io" {
        return crate::event_view::to_events_v1(&object);
    }
    if let Some(map) = object.as_object_mut() {
        map.insert("apiVersion".into(), json!(resource.api_version()));
        map.insert("kind".into(), json!(resource.kind));
    }
    object
}

/// Whether `patched` is `shown` but for its status and its resourceVersion: a status patch
/// that leaves the rest of the object as stored (every kubelet's does).
fn same_but_status(shown: &Value, patched: &Value) -> bool {
    let (Some(a), Some(b)) = (shown.as_object(), patched.as_object()) else {
        return false;
    };
    let metadata_same = match (
        a.get("metadata").and_then(Value::as_object),
        b.get("metadata").and_then(Value::as_object),
    ) {
        (Some(x), Some(y)) => same_except(x, y, &["resourceVersion"]),
        _ => a.get("metadata") == b.get("metadata"),
    };
    metadata_same && same_except(a, b, &["status", "metadata"])
}

/// Whether two JSON objects hold the same members, `skip`ped ones aside.
fn same_except(
    a: &serde_json::Map<String, Value>,
    b: &serde_json::Map<String, Value>,
    skip: &[&str],
) -> bool {
    let kept = |m: &serde_json::Map<String, Value>| {
        m.keys().filter(|k| !skip.contains(&k.as_str())).count()
    };
    kept(a) == kept(b)
        && a.iter()
            .filter(|(k, _)| !skip.contains(&k.as_str()))
            .all(|(k, v)| b.get(k) == Some(v))
}

/// [`view`] of a borrowed object, copied only when the view differs from it (a stored object
/// normally has its resource's apiVersion and kind already).
fn view_of<'a>(resource: &ResourceInfo, object: &'a Value) -> Cow<'a, Value> {
    if resource.group != "events.k8s.io"
        && object.get("kind").and_then(Value::as_str) == Some(resource.kind)
        && object.get("apiVersion").and_then(Value::as_str) == Some(resource.api_version().as_str())
    {
        Cow::Borrowed(object)
    } else {
        Cow::Owned(view(resource, object.clone()))
    }
}

/// The stored (core) shape of an object given in this resource's view.
fn from_view(resource: &ResourceInfo, object: Value) -> Value {
    if resource.group == "events.k8s.io" {
        crate::event_view::to_core(&object)
    } else {
        object
    }
}

fn patch_error(e: crate::patch::PatchError) -> ApiError {
    if e.http_code() == 422 {
        ApiError::Invalid {
            message: e.to_string(),
            name: String::new(),
            group: String::new(),
            kind: String::new(),
            causes: vec![],
        }
    } else {
        ApiError::bad_request(e.to_string())
    }
}

pub fn parse_rv(rv: &str) -> Result<i64, ApiError> {
    rv.parse::<i64>()
        .ok()
        .filter(|v| *v >= 0)
        .ok_or_else(|| ApiError::bad_request(format!("invalid resource version \"{rv}\"")))
}

fn parse_optional_rv(rv: &str) -> Result<Option<i64>, ApiError> {
    if rv.is_empty() {
        Ok(None)
    } else {
        parse_rv(rv).map(Some)
    }
}

/// Continue tokens carry the last key returned (and the revision, for the client's curiosity).
fn encode_continue(key: &str, revision: i64) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(json!({"v": 1, "rv": revision, "start": key}).to_string())
}

/// A continue token's last key and the revision of the list it continues.
fn decode_continue(token: &str) -> Result<(String, i64), ApiError> {
    use base64::Engine;
    let bad = || ApiError::bad_request("continue key is not valid: invalid continue token");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token.trim_end_matches('='))
        .map_err(|_| bad())?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    let start = value
        .get("start")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(bad)?;
    let revision = match value.get("rv") {
        Some(rv) => rv.as_i64().filter(|rv| *rv >= 0).ok_or_else(bad)?,
        None => 0,
    };
    Ok((start, revision))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_status_patch_that_leaves_the_rest_as_stored_skips_the_whole_decode() {
        let stored = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "resourceVersion": "5", "labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "pause"}]},
            "status": {"phase": "Pending"}});
        let mut patched = stored.clone();
        patched["status"] = json!({"phase": "Running", "podIP": "10.0.0.1"});
        patched["metadata"]["resourceVersion"] = json!("4");
        assert!(same_but_status(&stored, &patched));
        let mut no_status = stored.clone();
        no_status.as_object_mut().map(|m| m.remove("status"));
        assert!(same_but_status(&stored, &no_status));
        for change in [
            &(|v: &mut Value| v["spec"]["containers"][0]["image"] = json!(1))
                as &dyn Fn(&mut Value),
            &|v| v["metadata"]["labels"]["a"] = json!("c"),
            &|v| v["metadata"]["annotations"] = json!({"x": "y"}),
            &|v| v["extra"] = json!(true),
            &|v| {
                v.as_object_mut().map(|m| m.remove("spec"));
            },
        ] {
            let mut other = patched.clone();
            change(&mut other);
            assert!(!same_but_status(&stored, &other), "{other}");
        }
    }

    #[test]
    fn continue_tokens_round_trip() {
        let token = encode_continue("/registry/pods/ns/a", 7);
        assert_eq!(
            decode_continue(&token).expect("decodes"),
            ("/registry/pods/ns/a".to_string(), 7)
        );
        assert!(decode_continue("!!!").is_err());
    }

    #[test]
    fn pod_deletion_is_graceful_only_when_bound() {
        let pods = api::resources::pods();
        let unbound = json!({"metadata": {"name": "a"}, "spec": {}});
        assert!(deletion_plan(pods, &unbound, &DeleteOptions::default()).is_none());
        let bound = json!({"metadata": {"name": "a"}, "spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 10}});
        let plan = deletion_plan(pods, &bound, &DeleteOptions::default()).expect("graceful");
        assert_eq!(plan["metadata"]["deletionGracePeriodSeconds"], 10);
        let force = DeleteOptions {
            grace_period_seconds: Some(0),
            ..Default::default()
        };
        assert!(deletion_plan(pods, &bound, &force).is_none());
        let finalized = json!({"metadata": {"name": "a", "finalizers": ["x"]}, "spec": {}});
        assert!(deletion_plan(pods, &finalized, &force).is_some());
    }

    #[test]
    fn kinds_must_match_the_url() {
        let pods = api::resources::pods();
        let mut missing = json!({"metadata": {"name": "a"}});
        check_kind(pods, &mut missing).expect("fills in");
        assert_eq!(missing["kind"], "Pod");
        assert_eq!(missing["apiVersion"], "v1");
        let mut wrong = json!({"kind": "Node", "apiVersion": "v1"});
        assert!(check_kind(pods, &mut wrong).is_err());
    }
}
