//! The verbs on every resource: create, get, list, update, patch, delete, deletecollection and
//! watch, plus the pod subresources (status, binding). Both fronts (HTTP and QUIC) call these.
//!
//! Reads come from the watch cache (events, which it does not hold, from the store: see
//! [`crate::uncached`]); writes go to the store as conditional transactions. An
//! update that loses a race re-reads the object and tries again when the caller did not pin a
//! resourceVersion (Kubernetes' GuaranteedUpdate).

mod deletes;
mod quota_writes;
mod reads;
mod writes;

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use api::ResourceInfo;
use parking_lot::Mutex;
use serde_json::{json, Value};
use store::types::LeaseId;

use crate::admission::{Admission, AdmissionConfig};
use crate::authn::UserInfo;
use crate::authz::Authorizer;
use crate::crd::CustomResources;
use crate::errors::ApiError;
use crate::meta;
use crate::pipeline::PipelineMetrics;
use crate::storage::Storage;
use crate::watch_cache::{CachedObject, WatchCache};

/// How many times an unpinned update retries after losing a race.
const UPDATE_RETRIES: usize = 16;

/// Options of a write.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    pub dry_run: bool,
    /// `Strict` rejects unknown fields; `Warn`/`Ignore` drop them.
    pub field_validation: FieldValidation,
    pub field_manager: Option<String>,
    /// The manager the client's User-Agent names, for writes without `fieldManager`.
    pub agent_manager: Option<String>,
    /// Who writes, for RBAC's escalation check (None: the server itself, unchecked).
    pub requester: Option<Arc<UserInfo>>,
    /// The writer is a node host (`system:nodes`): NodeRestriction applies to its pods and
    /// Nodes.
    pub node_host: bool,
    /// Where field warnings go (`fieldValidation=Warn`) for the response's `Warning` headers;
    /// None where nobody reads them (then unknown fields are not looked for).
    pub warnings: Option<Warnings>,
    /// Keys the request body repeats within one object (paths), found as it was parsed.
    pub repeated_fields: Vec<String>,
}

/// The warnings one request collects, shared between the front and the registry.
#[derive(Debug, Clone, Default)]
pub struct Warnings(Arc<std::sync::Mutex<Vec<String>>>);

impl Warnings {
    pub fn push(&self, warning: String) {
        if let Ok(mut list) = self.0.lock() {
            list.push(warning);
        }
    }

    /// The warnings so far, in the order they came.
    pub fn take(&self) -> Vec<String> {
        self.0
            .lock()
            .map(|mut list| std::mem::take(&mut *list))
            .unwrap_or_default()
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FieldValidation {
    Strict,
    #[default]
    Warn,
    Ignore,
}

impl WriteOptions {
    /// Who the write's fields are recorded for: `fieldManager`, else the User-Agent's name
    /// (None for the server's own writes, which record nothing).
    pub fn manager(&self) -> Option<&str> {
        self.field_manager
            .as_deref()
            .or(self.agent_manager.as_deref())
            .filter(|m| !m.is_empty())
    }
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
    /// The custom resources the cached CRDs define.
    custom: Arc<CustomResources>,
}

impl Registry {
    pub fn new(storage: Storage, cache: Arc<WatchCache>, event_ttl: Duration) -> Registry {
        Registry {
            storage,
            admission: Admission::new(AdmissionConfig::default(), cache.clone()),
            pipeline: Arc::new(PipelineMetrics::default()),
            rbac_guard: OnceLock::new(),
            custom: Arc::new(CustomResources::new(cache.clone())),
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

    /// The custom resources served now.
    pub fn custom(&self) -> &Arc<CustomResources> {
        &self.custom
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
    if crate::autoscaling::is_v1(resource) && !crate::autoscaling::is_v1_object(&object) {
        return crate::autoscaling::to_v1(&object);
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
    if !is_converted_view(resource)
        && object.get("kind").and_then(Value::as_str) == Some(resource.kind)
        && object.get("apiVersion").and_then(Value::as_str) == Some(resource.api_version().as_str())
    {
        Cow::Borrowed(object)
    } else {
        Cow::Owned(view(resource, object.clone()))
    }
}

/// Whether this resource shows its stored objects converted to another version (the
/// events.k8s.io view of core events, the autoscaling/v1 view of v2 autoscalers).
pub fn is_converted_view(resource: &ResourceInfo) -> bool {
    resource.group == "events.k8s.io" || crate::autoscaling::is_v1(resource)
}

/// The stored shape of an object given in this resource's view.
fn from_view(resource: &ResourceInfo, object: Value) -> Value {
    if resource.group == "events.k8s.io" {
        crate::event_view::to_core(&object)
    } else if crate::autoscaling::is_v1(resource) && crate::autoscaling::is_v1_object(&object) {
        let mut stored = crate::autoscaling::to_v2(&object);
        crate::autoscaling::default_v2(&mut stored);
        stored
    } else {
        object
    }
}

fn patch_error(e: crate::patch::PatchError) -> ApiError {
    if let crate::patch::PatchError::Conflict { message, conflicts } = e {
        return ApiError::ApplyConflict {
            message,
            causes: conflicts
                .into_iter()
                .map(|c| crate::validation::Cause {
                    reason: "FieldManagerConflict".into(),
                    message: format!("conflict with {}", c.manager),
                    field: c.field,
                })
                .collect(),
        };
    }
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
