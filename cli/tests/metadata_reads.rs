//! Metadata-only reads, as metadata informers make them: kube-rs's `get_metadata`,
//! `list_metadata` and a watcher over `Api<PartialObjectMeta<K>>` (`Accept: application/json;as=PartialObjectMetadata
//! [List];g=meta.k8s.io;v=v1`) on a built-in and a custom resource, the bodies' shapes, and the
//! 406s kube-apiserver answers for a form it does not serve or one that does not fit.

use crate::common;

use std::time::Duration;

use common::{wait_until, Cluster};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use kube::core::GroupVersionKind;
use kube::core::PartialObjectMeta;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::{json, Value};

const NS: &str = "default";
const WAIT: Duration = Duration::from_secs(30);
const METADATA: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
const METADATA_LIST: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";

/// GETs `path` with `accept`: the JSON body, or the failure's code and message.
async fn raw(client: &Client, path: &str, accept: &str) -> Result<Value, (u16, String)> {
    let request = http::Request::get(path)
        .header("Accept", accept)
        .body(Vec::new())
        .map_err(|e| (0, e.to_string()))?;
    match client.request_text(request).await {
        Ok(text) => serde_json::from_str(&text).map_err(|e| (0, e.to_string())),
        Err(kube::Error::Api(status)) => Err((status.code, status.message)),
        Err(e) => Err((0, e.to_string())),
    }
}

fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"team": "a"}, "annotations": {"note": "x"}},
        "data": {"big": "not in the metadata"},
    }))
    .expect("a ConfigMap")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_only_reads_of_built_in_and_custom_resources() -> anyhow::Result<()> {
    let cluster = Cluster::start(1).await?;
    let client = cluster.kube_client().await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    config_maps
        .create(&PostParams::default(), &config_map("first"))
        .await?;

    // get_metadata and list_metadata decode into PartialObjectMeta.
    let one = config_maps.get_metadata("first").await?;
    assert_eq!(
        one.types.as_ref().map(|t| t.kind.as_str()),
        Some("PartialObjectMetadata")
    );
    assert_eq!(one.labels().get("team").map(String::as_str), Some("a"));
    let listed = config_maps.list_metadata(&ListParams::default()).await?;
    assert!(listed.items.iter().any(|m| m.name_any() == "first"));
    assert!(!listed
        .metadata
        .resource_version
        .unwrap_or_default()
        .is_empty());

    // The bodies: metadata only, in meta.k8s.io/v1's kinds.
    let path = format!("/api/v1/namespaces/{NS}/configmaps");
    let body = raw(&client, &format!("{path}/first"), METADATA)
        .await
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    assert_eq!(body["kind"], "PartialObjectMetadata");
    assert_eq!(body["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(body["metadata"]["annotations"]["note"], "x");
    assert!(body.get("data").is_none(), "{body}");
    let body = raw(&client, &path, METADATA_LIST)
        .await
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    assert_eq!(body["kind"], "PartialObjectMetadataList");
    assert_eq!(body["items"][0]["kind"], "PartialObjectMetadata");
    assert!(body["items"][0].get("data").is_none());

    // 406s: a form not served, and a form that does not fit the read.
    let refused = raw(
        &client,
        &path,
        "application/json;as=Widget;g=example.com;v=v1",
    )
    .await;
    assert_eq!(
        refused.err(),
        Some((406, "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf".to_string()))
    );
    let refused = raw(&client, &path, METADATA).await;
    assert_eq!(
        refused.err(),
        Some((406, "you requested PartialObjectMetadata, but the requested object is a list (*core.ConfigMapList)".to_string()))
    );
    let refused = raw(&client, &format!("{path}/first"), METADATA_LIST).await;
    assert_eq!(refused.err().map(|e| e.0), Some(406));

    // A metadata watcher: events carry PartialObjectMetadata.
    let metadata_only: Api<PartialObjectMeta<ConfigMap>> = Api::namespaced(client.clone(), NS);
    let mut events = watcher::watcher(metadata_only, watcher::Config::default()).boxed();
    let mut seen_first = false;
    let created = tokio::time::timeout(WAIT, async {
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::InitApply(m)) if m.name_any() == "first" => {
                    seen_first = true;
                }
                Ok(watcher::Event::InitDone) => {
                    config_maps
                        .create(&PostParams::default(), &config_map("second"))
                        .await
                        .expect("create second");
                }
                Ok(watcher::Event::Apply(m)) if m.name_any() == "second" => {
                    return Some(m);
                }
                Ok(_) => {}
                Err(e) => panic!("metadata watch failed: {e:?}"),
            }
        }
        None
    })
    .await?
    .expect("the watch saw the second ConfigMap");
    assert!(seen_first);
    assert_eq!(created.labels().get("team").map(String::as_str), Some("a"));

    // A custom resource reads the same way.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "things.meta.example.com"},
        "spec": {
            "group": "meta.example.com",
            "scope": "Namespaced",
            "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}
            }}}]
        }
    }))?;
    crds.create(&PostParams::default(), &crd).await?;
    let gvk = GroupVersionKind::gvk("meta.example.com", "v1", "Thing");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "things");
    let things: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &resource);
    let thing: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "meta.example.com/v1", "kind": "Thing",
        "metadata": {"name": "t1", "labels": {"size": "big"}}, "spec": {"size": 3}
    }))?;
    wait_until("the Thing CRD is served", WAIT, || {
        let things = things.clone();
        let thing = thing.clone();
        async move { things.create(&PostParams::default(), &thing).await.is_ok() }
    })
    .await?;
    let listed = things.list_metadata(&ListParams::default()).await?;
    assert_eq!(
        listed
            .items
            .iter()
            .map(|m| m.name_any())
            .collect::<Vec<_>>(),
        ["t1"]
    );
    let one = things.get_metadata("t1").await?;
    assert_eq!(one.labels().get("size").map(String::as_str), Some("big"));
    let refused = raw(
        &client,
        &format!("/apis/meta.example.com/v1/namespaces/{NS}/things"),
        METADATA,
    )
    .await;
    assert_eq!(
        refused.err(),
        Some((406, "you requested PartialObjectMetadata, but the requested object is a list (*unstructured.UnstructuredList)".to_string()))
    );
    cluster.api.stop().await;
    cluster.store.stop().await;
    Ok(())
}
