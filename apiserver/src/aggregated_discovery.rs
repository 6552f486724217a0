//! Aggregated discovery (`apidiscovery.k8s.io/v2`, and `v2beta1` for older clients): `/api` and
//! `/apis` answer with every group, version and resource in one `APIGroupDiscoveryList` when the
//! client's `Accept` asks for it, as kubectl does, saving it a request per group-version.
//!
//! The lists are made from the same group-version resource lists as the unaggregated documents
//! ([`crate::discovery`]), so both always agree.

use serde_json::{json, Map, Value};

use api::resources::ResourceInfo;

use crate::discovery;

pub const GROUP: &str = "apidiscovery.k8s.io";
const KIND: &str = "APIGroupDiscoveryList";

/// The aggregated discovery version a request's `Accept` asks for first (`v2` or `v2beta1`), if
/// any: a media range `application/json;g=apidiscovery.k8s.io;v=<version>;as=APIGroupDiscoveryList`.
pub fn requested_version(accept: &str) -> Option<&'static str> {
    for range in accept.split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or_default();
        let (mut group, mut version, mut kind) = (None, None, None);
        for parameter in parts {
            match parameter.split_once('=') {
                Some(("g", v)) => group = Some(v),
                Some(("v", v)) => version = Some(v),
                Some(("as", v)) => kind = Some(v),
                _ => {}
            }
        }
        if media != "application/json" || group != Some(GROUP) || kind != Some(KIND) {
            continue;
        }
        match version {
            Some("v2") => return Some("v2"),
            Some("v2beta1") => return Some("v2beta1"),
            _ => {}
        }
    }
    None
}

/// The `Content-Type` of an aggregated answer in `version`.
pub fn content_type(version: &str) -> String {
    format!("application/json;g={GROUP};v={version};as={KIND}")
}

/// `/api` (`legacy`) or `/apis` as an `APIGroupDiscoveryList` in `version`.
pub fn group_discovery_list(
    version: &str,
    legacy: bool,
    custom: &[&'static ResourceInfo],
) -> Value {
    let groups: Vec<(&str, Vec<&str>)> = if legacy {
        vec![("", vec!["v1"])]
    } else {
        discovery::groups(custom)
    };
    let items: Vec<Value> = groups
        .into_iter()
        .map(|(group, versions)| {
            let versions: Vec<Value> = versions
                .into_iter()
                .filter_map(|v| version_discovery(group, v, custom))
                .collect();
            let mut metadata = Map::new();
            if !group.is_empty() {
                metadata.insert("name".into(), json!(group));
            }
            metadata.insert("creationTimestamp".into(), Value::Null);
            json!({"metadata": metadata, "versions": versions})
        })
        .collect();
    json!({
        "kind": KIND,
        "apiVersion": format!("{GROUP}/{version}"),
        "metadata": {},
        "items": items,
    })
}

/// One version of a group: its resources, each with its subresources, from the group-version's
/// resource list.
fn version_discovery(
    group: &str,
    version: &str,
    custom: &[&'static ResourceInfo],
) -> Option<Value> {
    let list = discovery::api_resource_list(group, version, custom)?;
    let entries = list.get("resources")?.as_array()?;
    let kind_of = |entry: &Value| {
        json!({
            "group": entry.get("group").and_then(Value::as_str).unwrap_or(group),
            "version": entry.get("version").and_then(Value::as_str).unwrap_or(version),
            "kind": entry["kind"],
        })
    };
    let mut resources: Vec<Value> = Vec::new();
    for entry in entries {
        let name = entry["name"].as_str().unwrap_or_default();
        match name.split_once('/') {
            None => {
                let mut resource = Map::new();
                resource.insert("resource".into(), json!(name));
                resource.insert("responseKind".into(), kind_of(entry));
                let scope = if entry["namespaced"] == true {
                    "Namespaced"
                } else {
                    "Cluster"
                };
                resource.insert("scope".into(), json!(scope));
                resource.insert("singularResource".into(), entry["singularName"].clone());
                resource.insert("verbs".into(), entry["verbs"].clone());
                for (from, to) in [("shortNames", "shortNames"), ("categories", "categories")] {
                    if let Some(value) = entry.get(from) {
                        resource.insert(to.into(), value.clone());
                    }
                }
                resources.push(Value::Object(resource));
            }
            Some((parent, sub)) => {
                let Some(resource) = resources
                    .iter_mut()
                    .rev()
                    .find(|r| r["resource"] == parent)
                    .and_then(Value::as_object_mut)
                else {
                    continue;
                };
                let subresource = json!({
                    "subresource": sub,
                    "responseKind": kind_of(entry),
                    "verbs": entry["verbs"],
                });
                let list = resource.entry("subresources").or_insert_with(|| json!([]));
                if let Some(list) = list.as_array_mut() {
                    list.push(subresource);
                }
            }
        }
    }
    Some(json!({"version": version, "resources": resources, "freshness": "Current"}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectls_accept_selects_v2() {
        let kubectl = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(requested_version(kubectl), Some("v2"));
        assert_eq!(
            requested_version(
                "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
            ),
            Some("v2beta1")
        );
        assert_eq!(requested_version("application/json, */*"), None);
        assert_eq!(
            requested_version(
                "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
            ),
            None
        );
    }

    #[test]
    fn lists_groups_versions_and_resources() {
        let apis = group_discovery_list("v2", false, &[]);
        assert_eq!(apis["kind"], "APIGroupDiscoveryList");
        assert_eq!(apis["apiVersion"], "apidiscovery.k8s.io/v2");
        let apps = apis["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["metadata"]["name"] == "apps")
            .unwrap();
        assert_eq!(apps["versions"][0]["version"], "v1");
        assert_eq!(apps["versions"][0]["freshness"], "Current");
        let deployments = apps["versions"][0]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "deployments")
            .unwrap();
        assert_eq!(
            deployments["responseKind"],
            json!({"group": "apps", "version": "v1", "kind": "Deployment"})
        );
        assert_eq!(deployments["scope"], "Namespaced");
        assert_eq!(deployments["singularResource"], "deployment");
        assert_eq!(deployments["shortNames"], json!(["deploy"]));
        assert_eq!(deployments["categories"], json!(["all"]));
        let scale = deployments["subresources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["subresource"] == "scale")
            .unwrap();
        assert_eq!(
            scale["responseKind"],
            json!({"group": "autoscaling", "version": "v1", "kind": "Scale"})
        );

        let api = group_discovery_list("v2", true, &[]);
        let core = &api["items"][0];
        assert!(core["metadata"].get("name").is_none());
        let pods = core["versions"][0]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "pods")
            .unwrap();
        assert_eq!(pods["responseKind"]["kind"], "Pod");
        let namespaces = core["versions"][0]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "namespaces")
            .unwrap();
        assert_eq!(namespaces["scope"], "Cluster");
    }
}
