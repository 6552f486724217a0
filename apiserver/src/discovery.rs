//! Discovery documents (`/api`, `/apis`, `/apis/<group>`, the group-version resource lists,
//! `/version`) and the minimal OpenAPI v3 that kubectl's validation needs.
//!
//! Everything is derived from [`RESOURCES`], so a resource added there is discoverable.
//!
//! The OpenAPI documents are deliberately thin. kubectl reads them for two things:
//! - whether a kind's PATCH operation takes a `fieldValidation` query parameter: then it sends
//!   `fieldValidation=Strict` and leaves validation to the server (no client-side schema check);
//! - whether a kind's PATCH operation accepts `application/strategic-merge-patch+json`: then
//!   `kubectl apply` builds its patch from the OpenAPI schema. These documents declare no request
//!   body, so kubectl falls back to the patch metadata compiled into it, which knows merge keys
//!   (e.g. containers by `name`) that these minimal schemas don't carry.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    APIGroup, APIGroupList, APIResource, APIResourceList, APIVersions, GroupVersionForDiscovery,
    ServerAddressByClientCIDR,
};
use k8s_openapi::apimachinery::pkg::version::Info;
use serde_json::{json, Map, Value};

use api::resources::{self, ResourceInfo, RESOURCES};

/// The Kubernetes version kemu presents itself as.
const MAJOR: &str = "1";
const MINOR: &str = "37";
const GIT_VERSION: &str = "v1.37.0-kemu";
/// The oldest minor version kemu's behaviour stays compatible with (the previous one).
const MIN_COMPATIBILITY_MINOR: &str = "36";

/// `GET /api`: the legacy core group's versions.
pub fn api_versions(server_address: &str) -> Value {
    legacy(to_value(&APIVersions {
        versions: vec!["v1".into()],
        server_address_by_client_cidrs: vec![ServerAddressByClientCIDR {
            client_cidr: "0.0.0.0/0".into(),
            server_address: server_address.into(),
        }],
    }))
}

/// The named groups, each with its versions in table order: kemu's own, then those of `custom`
/// (the served custom resources, a group's versions in priority order).
fn groups(custom: &[&'static ResourceInfo]) -> Vec<(&'static str, Vec<&'static str>)> {
    let mut out = resources::groups();
    for r in custom {
        match out.iter_mut().find(|(g, _)| *g == r.group) {
            Some((_, versions)) if !versions.contains(&r.version) => versions.push(r.version),
            Some(_) => {}
            None => out.push((r.group, vec![r.version])),
        }
    }
    out
}

/// Every served resource: kemu's table, then `custom`.
fn served<'a>(
    custom: &'a [&'static ResourceInfo],
) -> impl Iterator<Item = &'static ResourceInfo> + 'a {
    RESOURCES.iter().chain(custom.iter().copied())
}

/// `GET /apis`: every named group, each with its versions, the first one preferred.
pub fn api_group_list(custom: &[&'static ResourceInfo]) -> Value {
    let groups = groups(custom)
        .into_iter()
        .map(|(name, versions)| group(name, &versions))
        .collect();
    let mut document = to_value(&APIGroupList { groups });
    // The groups inside the list carry no TypeMeta (Go leaves an embedded item's empty).
    if let Some(groups) = document.get_mut("groups").and_then(Value::as_array_mut) {
        for group in groups.iter_mut().filter_map(Value::as_object_mut) {
            group.remove("kind");
            group.remove("apiVersion");
        }
    }
    document
}

/// `GET /apis/<group>`; `None` for a group kemu doesn't serve.
pub fn api_group(group_name: &str, custom: &[&'static ResourceInfo]) -> Option<Value> {
    let (name, versions) = groups(custom).into_iter().find(|(g, _)| *g == group_name)?;
    Some(to_value(&group(name, &versions)))
}

fn group(name: &str, versions: &[&str]) -> APIGroup {
    let versions: Vec<GroupVersionForDiscovery> = versions
        .iter()
        .map(|v| GroupVersionForDiscovery {
            group_version: format!("{name}/{v}"),
            version: v.to_string(),
        })
        .collect();
    APIGroup {
        name: name.into(),
        preferred_version: versions.first().cloned(),
        server_address_by_client_cidrs: None,
        versions,
    }
}

/// `GET /api/v1` or `/apis/<group>/<version>`: one entry per resource and one per subresource
/// (`pods/status`, `deployments/scale` …); `None` for a group-version kemu doesn't serve.
pub fn api_resource_list(
    group: &str,
    version: &str,
    custom: &[&'static ResourceInfo],
) -> Option<Value> {
    let served: Vec<&ResourceInfo> = in_group_version(group, version, custom).collect();
    if served.is_empty() {
        return None;
    }
    let mut list = Vec::new();
    for r in served {
        list.push(APIResource {
            name: r.plural.into(),
            singular_name: r.singular.into(),
            namespaced: r.namespaced,
            kind: r.kind.into(),
            verbs: strings(r.verbs),
            short_names: (!r.short_names.is_empty()).then(|| strings(r.short_names)),
            categories: (!r.categories.is_empty()).then(|| strings(r.categories)),
            storage_version_hash: Some(storage_version_hash(r)),
            ..Default::default()
        });
        list.extend(r.subresources.iter().map(|sub| subresource(r, sub)));
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let document = to_value(&APIResourceList {
        group_version,
        resources: list,
    });
    Some(if group.is_empty() {
        legacy(document)
    } else {
        document
    })
}

/// The legacy core group's documents (`/api`, `/api/v1`) carry a kind but no apiVersion, as
/// kube-apiserver writes them.
fn legacy(mut document: Value) -> Value {
    if let Some(map) = document.as_object_mut() {
        map.remove("apiVersion");
    }
    document
}

/// The discovery entry of one subresource, with the verbs and kind the real server gives it.
fn subresource(r: &ResourceInfo, sub: &str) -> APIResource {
    let (kind, verbs, group_version): (&str, &[&str], Option<(&str, &str)>) = match sub {
        "binding" => ("Binding", &["create"], None),
        "log" => ("Pod", &["get"], None),
        "eviction" => ("Eviction", &["create"], Some(("policy", "v1"))),
        "token" => (
            "TokenRequest",
            &["create"],
            Some(("authentication.k8s.io", "v1")),
        ),
        "finalize" => (r.kind, &["update"], None),
        "scale" => (
            "Scale",
            &["get", "patch", "update"],
            Some(("autoscaling", "v1")),
        ),
        // status and anything new: read and written like the object itself.
        _ => (r.kind, &["get", "patch", "update"], None),
    };
    APIResource {
        name: format!("{}/{sub}", r.plural),
        singular_name: String::new(),
        namespaced: r.namespaced,
        kind: kind.into(),
        verbs: strings(verbs),
        group: group_version.map(|(g, _)| g.to_string()),
        version: group_version.map(|(_, v)| v.to_string()),
        ..Default::default()
    }
}

/// `GET /version`. Every field is a string: the Python client's `VersionInfo` requires all nine
/// classic ones.
pub fn version_info() -> Value {
    to_value(&Info {
        major: MAJOR.into(),
        minor: MINOR.into(),
        emulation_major: Some(MAJOR.into()),
        emulation_minor: Some(MINOR.into()),
        min_compatibility_major: Some(MAJOR.into()),
        min_compatibility_minor: Some(MIN_COMPATIBILITY_MINOR.into()),
        git_version: GIT_VERSION.into(),
        git_commit: option_env!("KEMU_GIT_COMMIT")
            .unwrap_or("0000000000000000000000000000000000000000")
            .into(),
        git_tree_state: "clean".into(),
        build_date: option_env!("KEMU_BUILD_DATE")
            .unwrap_or("1970-01-01T00:00:00Z")
            .into(),
        go_version: "rust".into(),
        compiler: "rustc".into(),
        platform: platform(),
    })
}

/// `os/arch` in Go's spelling (`linux/amd64`), which clients print and some parse.
fn platform() -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        other => other,
    };
    format!("{}/{arch}", std::env::consts::OS)
}

/// `GET /openapi/v3`: one entry per served group-version. The `hash` query parameter changes
/// whenever the document does, which is what lets clients cache documents by URL.
pub fn openapi_v3_root(
    custom: &[&'static ResourceInfo],
    published: &dyn Fn(&ResourceInfo) -> Option<Value>,
) -> Value {
    let mut paths = Map::new();
    let mut group_versions: Vec<(&str, &str)> = Vec::new();
    for r in served(custom) {
        if !group_versions.contains(&(r.group, r.version)) {
            group_versions.push((r.group, r.version));
        }
    }
    for (group, version) in group_versions {
        let path = openapi_path(group, version);
        let doc = openapi_v3_group_version(group, version, custom, published).unwrap_or_default();
        let hash = fnv1a(doc.to_string().as_bytes());
        paths.insert(
            path.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={hash:016X}")}),
        );
    }
    json!({ "paths": paths })
}

/// `GET /openapi/v3/api/v1`, `/openapi/v3/apis/<group>/<version>`: an OpenAPI 3.0 document with,
/// per resource, the item path's GET and PATCH (the PATCH carrying the kind and the
/// `fieldValidation` parameter kubectl checks for), and an object schema per kind.
pub fn openapi_v3_group_version(
    group: &str,
    version: &str,
    custom: &[&'static ResourceInfo],
    published: &dyn Fn(&ResourceInfo) -> Option<Value>,
) -> Option<Value> {
    let served: Vec<&ResourceInfo> = in_group_version(group, version, custom).collect();
    if served.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    let mut schemas = Map::new();
    for r in served {
        let gvk = json!({"group": r.group, "version": r.version, "kind": r.kind});
        let schema_name = schema_name(r);
        let schema_ref = json!({"$ref": format!("#/components/schemas/{schema_name}")});
        let ok = json!({"200": {"description": "OK", "content": {"application/json": {"schema": schema_ref}}}});
        let scope = if r.namespaced { "Namespaced" } else { "" };
        let operation_id = |verb: &str| {
            format!(
                "{verb}{}{}{scope}{}",
                camel_group(r.group),
                camel(r.version),
                r.kind
            )
        };
        let query = |name: &str| json!({"name": name, "in": "query", "schema": {"type": "string"}, "uniqueItems": true});

        let mut path_parameters = vec![
            json!({"name": "name", "in": "path", "required": true, "schema": {"type": "string"}}),
        ];
        if r.namespaced {
            path_parameters
                .push(json!({"name": "namespace", "in": "path", "required": true, "schema": {"type": "string"}}));
        }
        let item_path = match r.namespaced {
            true => format!("{}/{{name}}", r.collection_path(Some("{namespace}"))),
            false => format!("{}/{{name}}", r.collection_path(None)),
        };
        paths.insert(
            item_path,
            json!({
                "parameters": path_parameters,
                "get": {
                    "operationId": operation_id("read"),
                    "x-kubernetes-action": "get",
                    "x-kubernetes-group-version-kind": gvk,
                    "responses": ok,
                },
                "patch": {
                    "operationId": operation_id("patch"),
                    "x-kubernetes-action": "patch",
                    "x-kubernetes-group-version-kind": gvk,
                    "parameters": [query("dryRun"), query("fieldManager"), query("fieldValidation"),
                                   {"name": "force", "in": "query", "schema": {"type": "boolean"}, "uniqueItems": true}],
                    "responses": ok,
                },
            }),
        );
        if let Some(mut schema) = published(r) {
            // A custom resource's own schema, as kube-apiserver publishes it: the CRD's
            // openAPIV3Schema with the kind's group-version-kind.
            if let Some(map) = schema.as_object_mut() {
                map.insert("x-kubernetes-group-version-kind".into(), json!([gvk]));
            }
            schemas.insert(schema_name, schema);
            continue;
        }
        schemas.insert(
            schema_name,
            json!({
                "description": format!("{} (kemu serves a minimal schema; the server validates objects).", r.kind),
                "type": "object",
                "properties": {
                    "apiVersion": {"type": "string"},
                    "kind": {"type": "string"},
                    "metadata": {"type": "object"},
                },
                "x-kubernetes-group-version-kind": [gvk],
            }),
        );
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": GIT_VERSION},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

fn in_group_version<'a>(
    group: &'a str,
    version: &'a str,
    custom: &'a [&'static ResourceInfo],
) -> impl Iterator<Item = &'static ResourceInfo> + 'a {
    served(custom).filter(move |r| r.group == group && r.version == version)
}

/// `api/v1` or `apis/<group>/<version>`: the key of `/openapi/v3`'s `paths`.
fn openapi_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// The real definitions' names: `io.k8s.api.core.v1.Pod`, `io.k8s.api.apps.v1.Deployment`,
/// `io.k8s.api.coordination.v1.Lease` (the group's first label).
fn schema_name(r: &ResourceInfo) -> String {
    let package = match r.group {
        "" => "core",
        g => g.split('.').next().unwrap_or(g),
    };
    format!("io.k8s.api.{package}.{}.{}", r.version, r.kind)
}

/// `Core`, `Apps`, `Coordination`, `RbacAuthorization`: operation-id spelling of a group.
fn camel_group(group: &str) -> String {
    match group {
        "" => "Core".into(),
        g => g
            .trim_end_matches(".k8s.io")
            .split('.')
            .map(camel)
            .collect(),
    }
}

fn camel(s: &str) -> String {
    let mut chars = s.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_uppercase().chain(chars).collect()
    })
}

/// Any stable string will do (clients only compare it); a hash of group/version/kind.
fn storage_version_hash(r: &ResourceInfo) -> String {
    format!(
        "{:016x}",
        fnv1a(format!("{}/{}/{}", r.group, r.version, r.kind).as_bytes())
    )
}

/// FNV-1a: stable across builds and platforms, unlike std's `DefaultHasher`.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn to_value<T: serde::Serialize>(doc: &T) -> Value {
    serde_json::to_value(doc).expect("discovery documents are plain data and always serialize")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry<'a>(list: &'a Value, name: &str) -> &'a Value {
        list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("{name} missing"))
    }

    #[test]
    fn core_resource_list() {
        let list = api_resource_list("", "v1", &[]).unwrap();
        assert_eq!(list["kind"], "APIResourceList");
        // The legacy group's list has no apiVersion; a named group's has.
        assert!(list.get("apiVersion").is_none());
        assert_eq!(
            api_resource_list("apps", "v1", &[]).unwrap()["apiVersion"],
            "v1"
        );
        assert_eq!(list["groupVersion"], "v1");
        let pods = entry(&list, "pods");
        assert_eq!(pods["shortNames"], json!(["po"]));
        assert_eq!(pods["singularName"], "pod");
        assert_eq!(pods["namespaced"], true);
        assert_eq!(pods["kind"], "Pod");
        assert_eq!(pods["categories"], json!(["all"]));
        assert!(pods["verbs"].as_array().unwrap().contains(&json!("watch")));
        assert!(pods["storageVersionHash"]
            .as_str()
            .is_some_and(|h| !h.is_empty()));
        assert_eq!(
            entry(&list, "pods/status")["verbs"],
            json!(["get", "patch", "update"])
        );
        assert_eq!(entry(&list, "pods/binding")["kind"], "Binding");
        assert_eq!(entry(&list, "pods/binding")["verbs"], json!(["create"]));
        assert_eq!(entry(&list, "pods/log")["verbs"], json!(["get"]));
        assert_eq!(
            entry(&list, "namespaces/finalize")["verbs"],
            json!(["update"])
        );
        assert_eq!(entry(&list, "namespaces")["namespaced"], false);
        assert!(entry(&list, "secrets").get("shortNames").is_none());
        assert!(api_resource_list("", "v2", &[]).is_none());
        assert!(api_resource_list("nope.example.com", "v1", &[]).is_none());
    }

    #[test]
    fn group_resource_list_has_scale() {
        let list = api_resource_list("apps", "v1", &[]).unwrap();
        assert_eq!(list["groupVersion"], "apps/v1");
        assert_eq!(entry(&list, "deployments")["shortNames"], json!(["deploy"]));
        let scale = entry(&list, "deployments/scale");
        assert_eq!(scale["kind"], "Scale");
        assert_eq!(scale["group"], "autoscaling");
        assert_eq!(scale["version"], "v1");
        assert_eq!(scale["verbs"], json!(["get", "patch", "update"]));
    }

    #[test]
    fn groups() {
        let list = api_group_list(&[]);
        assert_eq!(list["kind"], "APIGroupList");
        let names: Vec<&str> = list["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["name"].as_str().unwrap())
            .collect();
        for want in ["apps", "batch", "coordination.k8s.io", "events.k8s.io"] {
            assert!(names.contains(&want), "{want} missing from {names:?}");
        }
        let apps = api_group("apps", &[]).unwrap();
        assert_eq!(apps["kind"], "APIGroup");
        assert_eq!(
            apps["versions"],
            json!([{"groupVersion": "apps/v1", "version": "v1"}])
        );
        assert_eq!(
            apps["preferredVersion"],
            json!({"groupVersion": "apps/v1", "version": "v1"})
        );
        assert!(api_group("", &[]).is_none());
        assert!(api_group("nope", &[]).is_none());
    }

    #[test]
    fn versions() {
        let v = api_versions("127.0.0.1:6443");
        assert_eq!(v["kind"], "APIVersions");
        assert_eq!(v["versions"], json!(["v1"]));
        assert_eq!(
            v["serverAddressByClientCIDRs"][0]["serverAddress"],
            "127.0.0.1:6443"
        );
        let info = version_info();
        for field in [
            "major",
            "minor",
            "gitVersion",
            "gitCommit",
            "gitTreeState",
            "buildDate",
            "goVersion",
            "compiler",
            "platform",
        ] {
            assert!(info[field].is_string(), "{field} is not a string: {info}");
        }
        assert_eq!(info["major"], "1");
        assert_eq!(info["minor"], "37");
        assert_eq!(info["gitVersion"], "v1.37.0-kemu");
    }

    /// What kubectl's `supportsQueryParamV3` looks for.
    fn patch_supports_field_validation(
        doc: &Value,
        group: &str,
        version: &str,
        kind: &str,
    ) -> bool {
        doc["paths"].as_object().unwrap().values().any(|item| {
            let patch = &item["patch"];
            patch["x-kubernetes-group-version-kind"]
                == json!({"group": group, "version": version, "kind": kind})
                && patch["parameters"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|p| p["name"] == "fieldValidation" && p["in"] == "query")
        })
    }

    #[test]
    fn openapi_v3() {
        let root = openapi_v3_root(&[], &|_| None);
        let url = root["paths"]["api/v1"]["serverRelativeURL"]
            .as_str()
            .unwrap();
        assert!(url.starts_with("/openapi/v3/api/v1?hash="), "{url}");
        assert!(root["paths"]["apis/apps/v1"]["serverRelativeURL"]
            .as_str()
            .unwrap()
            .starts_with("/openapi/v3/apis/apps/v1?hash="));
        assert_eq!(root["paths"].as_object().unwrap().len(), 12);

        let core = openapi_v3_group_version("", "v1", &[], &|_| None).unwrap();
        assert_eq!(core["openapi"], "3.0.0");
        let pod_item = &core["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"];
        assert_eq!(pod_item["patch"]["operationId"], "patchCoreV1NamespacedPod");
        assert!(patch_supports_field_validation(&core, "", "v1", "Pod"));
        assert!(patch_supports_field_validation(&core, "", "v1", "Node"));
        assert!(core["paths"]["/api/v1/nodes/{name}"]["patch"].is_object());
        assert_eq!(
            core["components"]["schemas"]["io.k8s.api.core.v1.Pod"]
                ["x-kubernetes-group-version-kind"],
            json!([{"group": "", "version": "v1", "kind": "Pod"}])
        );

        let coordination =
            openapi_v3_group_version("coordination.k8s.io", "v1", &[], &|_| None).unwrap();
        assert!(patch_supports_field_validation(
            &coordination,
            "coordination.k8s.io",
            "v1",
            "Lease"
        ));
        assert!(
            coordination["components"]["schemas"]["io.k8s.api.coordination.v1.Lease"].is_object()
        );
        assert!(openapi_v3_group_version("apps", "v2", &[], &|_| None).is_none());
    }
}
