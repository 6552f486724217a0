//! Discovery documents (`/api`, `/apis`, `/apis/<group>`, the group-version resource lists,
//! `/version`).
//!
//! Everything is derived from [`RESOURCES`], so a resource added there is discoverable.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    APIGroup, APIGroupList, APIResource, APIResourceList, APIVersions, GroupVersionForDiscovery,
    ServerAddressByClientCIDR,
};
use k8s_openapi::apimachinery::pkg::version::Info;
use serde_json::Value;

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

/// The named groups, each with its versions in table order: kemu's own, the metrics adapters',
/// then those of `custom` (the served custom resources, a group's versions in priority order).
pub fn groups(custom: &[&'static ResourceInfo]) -> Vec<(&'static str, Vec<&'static str>)> {
    let mut out = resources::groups();
    out.extend(
        crate::custom_metrics::GROUP_VERSIONS
            .iter()
            .map(|(group, version)| (*group, vec![*version])),
    );
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
    // A metrics adapter lists the metrics it has series for; the declared ones are found on
    // read, so its list is empty (as an adapter's with none configured).
    if served.is_empty() && !crate::custom_metrics::serves(group, version) {
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
        "attach" => ("PodAttachOptions", &["create", "get"], None),
        "exec" => ("PodExecOptions", &["create", "get"], None),
        "portforward" => ("PodPortForwardOptions", &["create", "get"], None),
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

fn in_group_version<'a>(
    group: &'a str,
    version: &'a str,
    custom: &'a [&'static ResourceInfo],
) -> impl Iterator<Item = &'static ResourceInfo> + 'a {
    served(custom).filter(move |r| r.group == group && r.version == version)
}

/// Any stable string will do (clients only compare it); a hash of group/version/kind.
fn storage_version_hash(r: &ResourceInfo) -> String {
    format!(
        "{:016x}",
        crate::openapi::fnv1a(format!("{}/{}/{}", r.group, r.version, r.kind).as_bytes())
    )
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
    use serde_json::json;

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
    fn the_metrics_adapters_groups_are_discoverable() {
        for (group, version) in [
            ("custom.metrics.k8s.io", "v1beta2"),
            ("external.metrics.k8s.io", "v1beta1"),
        ] {
            let found = api_group(group, &[]).expect("adapter group");
            assert_eq!(found["preferredVersion"]["version"], version);
            let list = api_resource_list(group, version, &[]).expect("resource list");
            assert_eq!(list["groupVersion"], format!("{group}/{version}"));
            assert_eq!(list["resources"], json!([]));
        }
        assert!(api_resource_list("custom.metrics.k8s.io", "v1", &[]).is_none());
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
}
