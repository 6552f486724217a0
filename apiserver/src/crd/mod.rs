//! CustomResourceDefinitions (`apiextensions.k8s.io/v1`) and the custom resources they define.
//!
//! CRDs themselves are an ordinary resource of the table ([`api::RESOURCES`]): stored, cached and
//! served like any other, with their own validation and status ([`definition`]). What they define
//! is served through [`CustomResources`], the set of served custom resource versions, which
//! routing, discovery, OpenAPI, Tables and the write path consult. Every API server replica
//! derives that set from its watch cache of CRDs (fed by the store watch every replica runs), so
//! a CRD written through one replica is served by all; a request naming a group no replica knows
//! yet waits for the cache to reach the store's revision once before answering 404.
//!
//! - [`definition`]: a CRD's names, versions, validation and status conditions;
//! - [`schema`]: `openAPIV3Schema` pruning, defaulting and validation of custom objects;
//! - [`cel`]: `x-kubernetes-validations` rules, checked with the CRD and run on every write;
//! - [`output`]: Tables with `additionalPrinterColumns`, and lists as unstructured lists.
//!
//! Custom objects are stored under `/registry/<group>/<plural>/` in their storage version and
//! read from the store directly, as events are (see [`crate::uncached`]); the watch cache does
//! not hold them.

pub mod cel;
pub mod definition;
pub mod output;
pub mod schema;

use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use serde_json::{json, Value};

use api::resources::{DefinedResource, ResourceInfo, RESOURCES};

use crate::errors::ApiError;
use crate::registry::{FieldValidation, WriteOptions};
use crate::validation::Cause;
use crate::watch_cache::{Filter, WatchCache};
use definition::{Definition, PrinterColumn, ScalePaths};
use schema::Schema;

/// The CRD resource of the table.
pub fn definitions() -> &'static ResourceInfo {
    api::resources::find("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        .expect("the resource table has CustomResourceDefinitions")
}

/// Whether `resource` is the CRD resource.
pub fn is_definition(resource: &ResourceInfo) -> bool {
    resource.group == "apiextensions.k8s.io" && resource.plural == "customresourcedefinitions"
}

/// The API groups of kemu's own resources.
pub fn builtin_groups() -> Vec<&'static str> {
    let mut groups: Vec<&'static str> = RESOURCES.iter().map(|r| r.group).collect();
    groups.extend(["autoscaling", "meta.k8s.io", "apidiscovery.k8s.io"]);
    groups.sort_unstable();
    groups.dedup();
    groups
}

/// Whether `resource` is defined by a CRD rather than kemu's table.
pub fn is_custom(resource: &ResourceInfo) -> bool {
    !RESOURCES.iter().any(|r| r.group == resource.group)
}

/// One served version of a custom resource.
#[derive(Debug)]
pub struct ServedVersion {
    pub resource: &'static ResourceInfo,
    /// The version objects are stored in (conversion `None` rewrites only apiVersion).
    pub storage_version: String,
    pub schema: Option<Schema>,
    /// The schema's compiled `x-kubernetes-validations`, when it has any.
    pub rules: Option<self::cel::Rules>,
    /// The version's `openAPIV3Schema` as written, for `/openapi/v3`.
    pub published_schema: Option<Value>,
    pub columns: Vec<PrinterColumn>,
    pub scale: Option<ScalePaths>,
}

/// A snapshot of what is served, derived from the cached CRDs.
#[derive(Debug, Default)]
pub struct Served {
    /// The CRD cache's change count this was derived at.
    changes: u64,
    versions: Vec<Arc<ServedVersion>>,
    /// The OpenAPI documents of custom group-versions, built on first request.
    documents: crate::openapi::CustomDocuments,
}

impl crate::openapi::CustomSchemas for Served {
    fn published(&self, resource: &ResourceInfo) -> Option<Value> {
        self.published_schema(resource).cloned()
    }

    fn documents(&self) -> Option<&crate::openapi::CustomDocuments> {
        Some(&self.documents)
    }
}

impl Served {
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<&Arc<ServedVersion>> {
        self.versions.iter().find(|v| {
            v.resource.group == group
                && v.resource.version == version
                && v.resource.plural == plural
        })
    }

    /// The published `openAPIV3Schema` of a served custom resource.
    pub fn published_schema(&self, resource: &ResourceInfo) -> Option<&Value> {
        self.find(resource.group, resource.version, resource.plural)
            .and_then(|v| v.published_schema.as_ref())
    }

    /// The served resources, a group's versions in Kubernetes' version priority order.
    pub fn resources(&self) -> Vec<&'static ResourceInfo> {
        self.versions.iter().map(|v| v.resource).collect()
    }

    fn derive(changes: u64, crds: &[Value]) -> Served {
        let mut versions = Vec::new();
        for crd in crds {
            if !definition::is_established(crd) || crate::meta::deletion_timestamp(crd).is_some() {
                continue;
            }
            let definition = Definition::parse(crd);
            let Some(storage) = definition.storage_version().map(|v| v.name.clone()) else {
                continue;
            };
            let mut served: Vec<&definition::Version> =
                definition.versions.iter().filter(|v| v.served).collect();
            served.sort_by(|a, b| version_priority(&a.name, &b.name));
            for version in served {
                versions.push(Arc::new(ServedVersion {
                    resource: intern(&definition, version),
                    storage_version: storage.clone(),
                    rules: version.schema.as_ref().and_then(self::cel::Rules::compile),
                    schema: version.schema.clone(),
                    published_schema: version.published_schema.clone(),
                    columns: version.columns.clone(),
                    scale: version.scale.clone(),
                }));
            }
        }
        Served {
            changes,
            versions,
            documents: Default::default(),
        }
    }
}

/// Kubernetes' ordering of versions: GA before beta before alpha, higher numbers first, and
/// anything not shaped `v<N>[alpha|beta<M>]` last, alphabetically.
pub fn version_priority(a: &str, b: &str) -> std::cmp::Ordering {
    fn key(v: &str) -> (u8, i64, i64, String) {
        let parsed = v.strip_prefix('v').and_then(|rest| {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            let major = digits.parse::<i64>().ok()?;
            let tail = &rest[digits.len()..];
            let (stage, minor) = if tail.is_empty() {
                (0, 0)
            } else if let Some(n) = tail.strip_prefix("beta") {
                (1, n.parse::<i64>().ok()?)
            } else if let Some(n) = tail.strip_prefix("alpha") {
                (2, n.parse::<i64>().ok()?)
            } else {
                return None;
            };
            Some((stage, -major, -minor))
        });
        match parsed {
            Some((stage, major, minor)) => (stage, major, minor, String::new()),
            None => (3, 0, 0, v.to_string()),
        }
    }
    key(a).cmp(&key(b))
}

/// The `ResourceInfo` of one served version (interned: see [`DefinedResource::intern`]).
fn intern(definition: &Definition, version: &definition::Version) -> &'static ResourceInfo {
    let mut subresources = Vec::new();
    if version.status {
        subresources.push("status".to_string());
    }
    if version.scale.is_some() {
        subresources.push("scale".to_string());
    }
    DefinedResource {
        group: definition.group.clone(),
        version: version.name.clone(),
        kind: definition.kind.clone(),
        plural: definition.plural.clone(),
        singular: definition.singular.clone(),
        namespaced: definition.namespaced,
        short_names: definition.short_names.clone(),
        categories: definition.categories.clone(),
        subresources,
    }
    .intern()
}

/// The served custom resources of one API server, kept current from its watch cache of CRDs.
pub struct CustomResources {
    cache: Arc<WatchCache>,
    served: RwLock<Arc<Served>>,
}

impl CustomResources {
    pub fn new(cache: Arc<WatchCache>) -> CustomResources {
        CustomResources {
            cache,
            served: RwLock::new(Arc::new(Served {
                changes: u64::MAX,
                ..Served::default()
            })),
        }
    }

    /// What is served now: re-derived when the cached CRDs changed since the last look.
    pub fn snapshot(&self) -> Arc<Served> {
        let Some(cache) = self.cache.resource(definitions()) else {
            return Arc::default();
        };
        let changes = cache.changes();
        {
            let served = self.served.read();
            if served.changes == changes {
                return served.clone();
            }
        }
        let (crds, _) = cache.list(&definitions().prefix(), &Filter::default(), None, 0);
        let values: Vec<Value> = crds.iter().filter_map(|o| o.value().ok()).collect();
        let derived = Arc::new(Served::derive(changes, &values));
        *self.served.write() = derived.clone();
        derived
    }

    /// What is served once the cache has caught up with the store: for a request naming
    /// something not served here, which another replica may have just defined.
    pub async fn snapshot_caught_up(&self) -> Arc<Served> {
        if let Ok(revision) = self.cache.current_store_revision().await {
            let _ = self.cache.wait_for(revision, Duration::from_secs(3)).await;
        }
        self.snapshot()
    }

    /// The served version behind `resource`, when it is a custom resource.
    pub fn of(&self, resource: &ResourceInfo) -> Option<Arc<ServedVersion>> {
        if !is_custom(resource) {
            return None;
        }
        self.snapshot()
            .find(resource.group, resource.version, resource.plural)
            .cloned()
    }

    /// The other CRDs, for the names check of `crd`.
    pub fn definitions_besides(&self, name: &str) -> Vec<Definition> {
        let Some(cache) = self.cache.resource(definitions()) else {
            return Vec::new();
        };
        let (crds, _) = cache.list(&definitions().prefix(), &Filter::default(), None, 0);
        crds.iter()
            .filter(|o| o.name != name)
            .filter_map(|o| o.value().ok())
            .filter(definition::is_established)
            .map(|v| Definition::parse(&v))
            .collect()
    }
}

impl ServedVersion {
    /// Decodes a custom object as kube-apiserver does: unknown fields pruned, defaults applied.
    /// Pruned fields and keys the body repeated are refused under `fieldValidation=Strict` and
    /// reported as warnings under `Warn`.
    pub fn admit(&self, mut object: Value, options: &WriteOptions) -> Result<Value, ApiError> {
        if !object.is_object() {
            return Err(ApiError::bad_request(
                "the request body must be a JSON object",
            ));
        }
        let pruned = match &self.schema {
            Some(schema) => schema.prune_object(&mut object),
            None => Vec::new(),
        };
        let problems: Vec<String> = options
            .repeated_fields
            .iter()
            .map(|f| format!("duplicate field {f:?}"))
            .chain(pruned.iter().map(|f| format!("unknown field {f:?}")))
            .collect();
        match options.field_validation {
            FieldValidation::Strict if !problems.is_empty() => {
                return Err(ApiError::bad_request(format!(
                    "{} in version \"{}\" cannot be handled as a {}: strict decoding error: {}",
                    self.resource.kind,
                    self.resource.version,
                    self.resource.kind,
                    problems.join(", ")
                )));
            }
            FieldValidation::Warn => {
                if let Some(warnings) = &options.warnings {
                    problems.into_iter().for_each(|p| warnings.push(p));
                }
            }
            _ => {}
        }
        if let Some(schema) = &self.schema {
            schema.apply_defaults(&mut object);
        }
        Ok(object)
    }

    /// The schema's verdict on an object about to be written (`old`: the object an update
    /// replaces), its `x-kubernetes-validations` rules included. As in kube-apiserver, the
    /// rules do not run on an object with the wrong types or values outside an enum.
    pub fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<Cause> {
        let Some(schema) = &self.schema else {
            return Vec::new();
        };
        let mut causes = schema.validate_object(object);
        if let Some(rules) = &self.rules {
            match self::cel::blocks_rules(&causes) {
                Some(blocked) => causes.push(blocked),
                None => causes.extend(rules.validate(schema, object, old)),
            }
        }
        causes
    }

    /// The object as stored: in the storage version (conversion `None` changes only apiVersion).
    pub fn to_storage(&self, object: &mut Value) {
        let api_version = format!("{}/{}", self.resource.group, self.storage_version);
        if let Some(map) = object.as_object_mut() {
            map.insert("apiVersion".into(), json!(api_version));
        }
    }

    /// The storage prefix of every object of this resource.
    pub fn prefix(&self) -> String {
        self.resource.prefix()
    }
}

/// The storage prefix of the objects a CRD defines (`/registry/<group>/<plural>/`).
pub fn objects_prefix(crd: &Value) -> Option<String> {
    let definition = Definition::parse(crd);
    (!definition.group.is_empty() && !definition.plural.is_empty())
        .then(|| format!("/registry/{}/{}/", definition.group, definition.plural))
}

#[cfg(test)]
mod tests;
