//! The OpenAPI documents: `/openapi/v3` (an index with one document per served group-version)
//! and `/openapi/v2` (one Swagger 2.0 document of everything), in kube-apiserver's shape.
//!
//! - [`definitions`]: the component schemas of the built-in kinds, generated from k8s-openapi's
//!   `JsonSchema` implementations;
//! - [`list_fields`]: the list metadata (list types, map keys, patch strategies and merge keys),
//!   published as `x-kubernetes-*` extensions and read by strategic merge and server-side apply
//!   through [`list_field`];
//! - [`paths`]: the operations of each resource;
//! - [`v2`]: the Swagger 2.0 form of the same documents, and [`v2_protobuf`] its protobuf
//!   encoding.
//!
//! A built-in group-version's document is built on first use and kept; a group-version of
//! custom resources is built from the CRDs served at the time of the request, its schemas being
//! each version's `openAPIV3Schema` with the object metadata filled in as kube-apiserver does.

pub mod definitions;
pub mod list_fields;
pub mod paths;
pub mod v2;
pub mod v2_protobuf;

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, OnceLock};

use parking_lot::Mutex;
use serde_json::{json, Map, Value};

use api::resources::{ResourceInfo, RESOURCES};

use definitions::{reference, OBJECT_META};
use list_fields::ListField;

/// The version kube-apiserver writes into `info.version`.
pub(crate) const INFO_VERSION: &str = "v1.37.0";

/// What the documents know of the served custom resources.
pub trait CustomSchemas {
    /// The published schema of a custom resource version (its CRD's `openAPIV3Schema`), if any.
    fn published(&self, resource: &ResourceInfo) -> Option<Value>;

    /// Where documents built from these schemas are kept; `None` builds them on every call.
    fn documents(&self) -> Option<&CustomDocuments> {
        None
    }
}

impl<F: Fn(&ResourceInfo) -> Option<Value>> CustomSchemas for F {
    fn published(&self, resource: &ResourceInfo) -> Option<Value> {
        self(resource)
    }
}

/// The custom resources' schemas, as the documents take them.
pub type Published<'a> = &'a dyn CustomSchemas;

/// No custom resources.
pub fn no_custom_schemas(_: &ResourceInfo) -> Option<Value> {
    None
}

/// The documents of group-versions with custom resources, built once for one set of CRDs:
/// kept with what is served ([`crate::crd::Served`]), which a change to any CRD replaces, so
/// a document is rebuilt only after its schemas may have changed.
#[derive(Debug, Default)]
pub struct CustomDocuments {
    built: Mutex<HashMap<(String, String), Arc<Document>>>,
}

impl CustomDocuments {
    fn get_or_build(
        &self,
        group: &str,
        version: &str,
        build: impl FnOnce() -> Arc<Document>,
    ) -> Arc<Document> {
        let mut built = self.built.lock();
        let key = (group.to_string(), version.to_string());
        if let Some(document) = built.get(&key) {
            return document.clone();
        }
        let document = build();
        built.insert(key, document.clone());
        document
    }
}

/// One built document: its value, its encoding and the hash that names it.
#[derive(Debug)]
pub struct Document {
    pub value: Value,
    pub body: Vec<u8>,
    /// Upper-case hex of a hash of `body`: the `hash` of its `/openapi/v3` URL and its ETag.
    pub hash: String,
    /// The protobuf encoding (of a Swagger 2.0 document), made on first request.
    protobuf: OnceLock<Vec<u8>>,
}

impl Document {
    fn new(value: Value) -> Document {
        let mut body = crate::go_json::to_vec(&value);
        body.push(b'\n');
        let hash = format!("{:016X}", fnv1a(&body));
        Document {
            value,
            body,
            hash,
            protobuf: OnceLock::new(),
        }
    }

    /// The document as gnostic's `openapi.v2.Document` message.
    pub fn protobuf(&self) -> &[u8] {
        self.protobuf
            .get_or_init(|| v2_protobuf::encode(&self.value))
    }

    fn schemas(&self) -> Option<&Map<String, Value>> {
        self.value
            .pointer("/components/schemas")
            .and_then(Value::as_object)
    }
}

/// A group-version: `("", "v1")`, `("apps", "v1")`.
type GroupVersion = (&'static str, &'static str);

/// The built-in group-versions, each with its document once built.
static BUILTIN: LazyLock<HashMap<GroupVersion, OnceLock<Arc<Document>>>> = LazyLock::new(|| {
    RESOURCES
        .iter()
        .map(|r| ((r.group, r.version), OnceLock::new()))
        .collect()
});

/// Every served resource: kemu's table, then `custom`.
fn served<'a>(
    custom: &'a [&'static ResourceInfo],
) -> impl Iterator<Item = &'static ResourceInfo> + 'a {
    RESOURCES.iter().chain(custom.iter().copied())
}

/// The served group-versions, in table order.
fn group_versions(custom: &[&'static ResourceInfo]) -> Vec<GroupVersion> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for r in served(custom) {
        if !out.contains(&(r.group, r.version)) {
            out.push((r.group, r.version));
        }
    }
    out.extend(crate::custom_metrics::GROUP_VERSIONS);
    out
}

/// `GET /openapi/v3`: one entry per served group-version, its URL carrying the hash of its
/// document, so that a client caching documents by URL sees a change (a CRD's new schema) as a
/// new URL.
pub fn v3_root(custom: &[&'static ResourceInfo], published: Published<'_>) -> Value {
    let mut paths = Map::new();
    for (group, version) in group_versions(custom) {
        let Some(document) = v3_group_version(group, version, custom, published) else {
            continue;
        };
        let path = index_path(group, version);
        let url = format!("/openapi/v3/{path}?hash={}", document.hash);
        paths.insert(path, json!({ "serverRelativeURL": url }));
    }
    json!({ "paths": paths })
}

/// `GET /openapi/v3/api/v1`, `/openapi/v3/apis/<group>/<version>`; `None` for a group-version
/// not served.
pub fn v3_group_version(
    group: &str,
    version: &str,
    custom: &[&'static ResourceInfo],
    published: Published<'_>,
) -> Option<Arc<Document>> {
    let resources: Vec<&ResourceInfo> = served(custom)
        .filter(|r| r.group == group && r.version == version)
        .collect();
    if resources.is_empty() {
        return crate::custom_metrics::serves(group, version).then(|| {
            Arc::new(Document::new(crate::custom_metrics::openapi_document(
                group, version,
            )))
        });
    }
    let builtin_only = resources.iter().all(|r| !crate::crd::is_custom(r));
    match BUILTIN.get(&(group, version)) {
        Some(cell) if builtin_only => Some(
            cell.get_or_init(|| {
                let started = std::time::Instant::now();
                let document = Arc::new(Document::new(build_v3(&resources, published)));
                tracing::debug!(
                    group,
                    version,
                    bytes = document.body.len(),
                    took_ms = started.elapsed().as_millis() as u64,
                    "built OpenAPI v3 document"
                );
                document
            })
            .clone(),
        ),
        _ => {
            let build = || Arc::new(Document::new(build_v3(&resources, published)));
            Some(match published.documents() {
                Some(documents) => documents.get_or_build(group, version, build),
                None => build(),
            })
        }
    }
}

/// The last `/openapi/v2` document, with the hashes of the group-version documents it was
/// made of.
static V2: Mutex<Option<(Vec<String>, Arc<Document>)>> = Mutex::new(None);

/// `GET /openapi/v2`: every served group-version in one Swagger 2.0 document, rebuilt only when
/// one of them changed.
pub fn v2_document(custom: &[&'static ResourceInfo], published: Published<'_>) -> Arc<Document> {
    let documents: Vec<Arc<Document>> = group_versions(custom)
        .into_iter()
        .filter_map(|(g, v)| v3_group_version(g, v, custom, published))
        .collect();
    let hashes: Vec<String> = documents.iter().map(|d| d.hash.clone()).collect();
    let mut last = V2.lock();
    if let Some((built_from, document)) = last.as_ref() {
        if *built_from == hashes {
            return document.clone();
        }
    }
    let document = Arc::new(Document::new(v2::document(
        documents.iter().map(|d| &d.value),
    )));
    *last = Some((hashes, document.clone()));
    document
}

/// The OpenAPI 3 document of `resources` (one group-version).
fn build_v3(resources: &[&ResourceInfo], published: Published<'_>) -> Value {
    let mut generator = definitions::generator();
    definitions::common(&mut generator);
    let mut paths = Map::new();
    let mut extra = Map::new();
    let mut kinds: Vec<(String, Value)> = Vec::new();
    for r in resources {
        let gvk = json!({"group": r.group, "version": r.version, "kind": r.kind});
        let definition = if crate::crd::is_custom(r) {
            let name = custom_definition_name(r);
            extra.insert(name.clone(), custom_schema(published.published(r)));
            name
        } else {
            definitions::kind(&mut generator, r.group, r.version, r.kind).unwrap_or_else(|| {
                if let Some((name, schema)) = crate::resource_metrics::openapi_schema(r.kind) {
                    extra.insert(name.to_string(), custom_schema(Some(schema)));
                    return name.to_string();
                }
                let name = format!("io.k8s.api.{}.{}.{}", package(r.group), r.version, r.kind);
                extra.insert(name.clone(), custom_schema(None));
                name
            })
        };
        let list = r.verbs.contains(&"list").then(|| {
            let name = format!("{definition}List");
            let list_gvk =
                json!({"group": r.group, "version": r.version, "kind": format!("{}List", r.kind)});
            extra.insert(
                name.clone(),
                definitions::list_of(r.kind, &definition, &list_gvk),
            );
            name
        });
        let mut subresources = Vec::new();
        for sub in r.subresources {
            let (sub_definition, sub_gvk) = match *sub {
                "scale" => subresource_kind(&mut generator, "autoscaling", "v1", "Scale"),
                "binding" => subresource_kind(&mut generator, "", "v1", "Binding"),
                "eviction" => subresource_kind(&mut generator, "policy", "v1", "Eviction"),
                "token" => subresource_kind(
                    &mut generator,
                    "authentication.k8s.io",
                    "v1",
                    "TokenRequest",
                ),
                _ => (Some(definition.clone()), gvk.clone()),
            };
            if let Some(sub_definition) = sub_definition {
                kinds.push((sub_definition.clone(), sub_gvk.clone()));
                subresources.push((sub.to_string(), sub_definition, sub_gvk));
            }
        }
        let subresources: Vec<paths::Subresource<'_>> = subresources
            .iter()
            .map(|(name, definition, gvk)| paths::Subresource {
                name,
                definition,
                gvk: gvk.clone(),
            })
            .collect();
        paths::add(&mut paths, r, &definition, list.as_deref(), &subresources);
        kinds.push((definition, gvk));
    }
    let mut schemas = definitions::finish(&mut generator);
    schemas.extend(extra);
    for (definition, gvk) in &kinds {
        definitions::mark_kind(&mut schemas, definition, gvk);
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": INFO_VERSION},
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "BearerToken": {"type": "apiKey", "description": "Bearer Token authentication", "name": "authorization", "in": "header"},
            },
        },
        "security": [{"BearerToken": []}],
    })
}

fn subresource_kind(
    generator: &mut schemars::SchemaGenerator,
    group: &str,
    version: &str,
    kind: &str,
) -> (Option<String>, Value) {
    (
        definitions::kind(generator, group, version, kind),
        json!({"group": group, "version": version, "kind": kind}),
    )
}

/// `io.k8s.api.<package>`: the group's first label (`core` for the legacy group).
fn package(group: &str) -> &str {
    match group {
        "" => "core",
        g => g.split('.').next().unwrap_or(g),
    }
}

/// A custom kind's definition name, as kube-apiserver names it: the group's labels reversed,
/// then version and kind (`com.example.stable.v1.CronTab`).
fn custom_definition_name(r: &ResourceInfo) -> String {
    let mut labels: Vec<&str> = r.group.split('.').collect();
    labels.reverse();
    format!("{}.{}.{}", labels.join("."), r.version, r.kind)
}

const API_VERSION_DESCRIPTION: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND_DESCRIPTION: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";

/// A custom kind's schema: its published `openAPIV3Schema` (or an object of any fields), with
/// `apiVersion`, `kind` and `metadata` described as for every kind.
fn custom_schema(published: Option<Value>) -> Value {
    let mut schema = published
        .unwrap_or_else(|| json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
    let Some(map) = schema.as_object_mut() else {
        return schema;
    };
    let properties = map
        .entry("properties")
        .or_insert_with(|| json!({}))
        .as_object_mut();
    if let Some(properties) = properties {
        properties
            .entry("apiVersion")
            .or_insert_with(|| json!({"description": API_VERSION_DESCRIPTION, "type": "string"}));
        properties
            .entry("kind")
            .or_insert_with(|| json!({"description": KIND_DESCRIPTION, "type": "string"}));
        let metadata = properties.entry("metadata").or_insert_with(|| json!({}));
        if metadata.get("properties").is_none() {
            *metadata = json!({
                "allOf": [reference(OBJECT_META)],
                "description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
            });
        }
    }
    schema
}

/// `api/v1` or `apis/<group>/<version>`: the key of `/openapi/v3`'s `paths`.
fn index_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// The list metadata of the list field at `path` (field names from the object root; list
/// elements and map values add no segment) in an object of the built-in `kind`, found by
/// walking the kind's schema; `None` for a field the table leaves atomic, or a kind or field
/// the schemas don't know. Object metadata is found in any kind.
///
/// The answer depends only on the built-in schemas, so each thread keeps the answers it found:
/// a status write asks for every list it compares and every element of a keyed one, and the
/// walk (a search of the resource table, a lock and a descent through the schema maps) cost
/// about a quarter of recording a pod status write's managed fields.
pub fn list_field(kind: &str, path: &[String]) -> Option<&'static ListField> {
    /// Answers kept per thread before the memo starts over; far above the list fields of the
    /// built-in kinds, so only paths through map keys (a CRD's metadata) can fill it.
    const REMEMBERED: usize = 4096;
    type Found = (Box<str>, Box<[String]>, Option<&'static ListField>);
    thread_local! {
        static FOUND: std::cell::RefCell<HashMap<u64, Vec<Found>>> =
            std::cell::RefCell::new(HashMap::new());
    }
    let hash = path.iter().fold(fnv1a(kind.as_bytes()), |hash, segment| {
        // A separator no segment contains keeps ["ab"] and ["a", "b"] apart.
        fnv1a_continue(fnv1a_continue(hash, &[0xff]), segment.as_bytes())
    });
    let remembered = FOUND.with(|found| {
        found.borrow().get(&hash).and_then(|same_hash| {
            same_hash
                .iter()
                .find(|(k, p, _)| **k == *kind && **p == *path)
                .map(|(_, _, field)| *field)
        })
    });
    if let Some(field) = remembered {
        return field;
    }
    let field = find_list_field(kind, path);
    FOUND.with(|found| {
        let mut found = found.borrow_mut();
        if found.len() >= REMEMBERED {
            found.clear();
        }
        found
            .entry(hash)
            .or_default()
            .push((kind.into(), path.into(), field));
    });
    field
}

/// [`list_field`] without the memo.
fn find_list_field(kind: &str, path: &[String]) -> Option<&'static ListField> {
    if let Some(r) = RESOURCES.iter().find(|r| r.kind == kind) {
        let (document, root) = kind_root(r)?;
        return walk(document.schemas()?, &root, path);
    }
    // Another kind: only its metadata is known.
    let at = path.iter().rposition(|s| s == "metadata")?;
    static CORE: OnceLock<Option<Arc<Document>>> = OnceLock::new();
    let document = CORE.get_or_init(|| v3_group_version("", "v1", &[], &no_custom_schemas));
    walk(document.as_ref()?.schemas()?, OBJECT_META, &path[at + 1..])
}

/// The built-in kind's OpenAPI v3 document and the name of its root definition, found once per
/// kind: patches ask for list fields on every request, and finding the root means comparing the
/// group-version-kind of every definition in the document.
fn kind_root(resource: &'static ResourceInfo) -> Option<(Arc<Document>, Arc<str>)> {
    type Roots = HashMap<&'static str, Option<(Arc<Document>, Arc<str>)>>;
    static ROOTS: LazyLock<Mutex<Roots>> = LazyLock::new(|| Mutex::new(HashMap::new()));
    if let Some(found) = ROOTS.lock().get(resource.kind) {
        return found.clone();
    }
    let found = (|| {
        let document = v3_group_version(resource.group, resource.version, &[], &no_custom_schemas)?;
        let gvk =
            json!([{"group": resource.group, "version": resource.version, "kind": resource.kind}]);
        let (root, _) = document
            .schemas()?
            .iter()
            .find(|(_, s)| s.get("x-kubernetes-group-version-kind") == Some(&gvk))?;
        let root: Arc<str> = root.as_str().into();
        Some((document, root))
    })();
    ROOTS.lock().insert(resource.kind, found.clone());
    found
}

/// Follows `path` from the definition `root`, returning the list entry of its last field.
fn walk(schemas: &Map<String, Value>, root: &str, path: &[String]) -> Option<&'static ListField> {
    let (last, parents) = path.split_last()?;
    let mut definition = Some(root);
    let mut schema = schemas.get(root)?;
    for segment in parents {
        let next = match schema.get("properties").and_then(|p| p.get(segment)) {
            Some(property) => property,
            // A map's key: the next field belongs to its values.
            None => schema.get("additionalProperties")?,
        };
        (definition, schema) = resolve(schemas, next)?;
    }
    schema.get("properties")?.get(last)?;
    list_fields::find(definition?, last)
}

/// The schema a property leads to, through references and list items, and the definition it
/// is (`None` for an inline schema).
fn resolve<'a>(
    schemas: &'a Map<String, Value>,
    mut schema: &'a Value,
) -> Option<(Option<&'a str>, &'a Value)> {
    loop {
        if let Some(name) = definitions::referenced(schema) {
            let (name, schema) = schemas.get_key_value(name)?;
            return Some((Some(name.as_str()), schema));
        }
        match schema.get("items") {
            Some(items) => schema = items,
            None => return Some((None, schema)),
        }
    }
}

/// FNV-1a: stable across builds and platforms, unlike std's `DefaultHasher`.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    fnv1a_continue(0xcbf2_9ce4_8422_2325, bytes)
}

/// FNV-1a of `bytes` appended to what produced `hash`.
fn fnv1a_continue(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests;
