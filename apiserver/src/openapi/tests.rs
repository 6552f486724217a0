use super::*;

fn none(_: &ResourceInfo) -> Option<Value> {
    None
}

/// What kubectl's `supportsQueryParamV3` and its apply's `gvkSupportsPatchOpenAPIV3` look for.
fn patch_of<'a>(doc: &'a Value, group: &str, version: &str, kind: &str) -> &'a Value {
    doc["paths"]
        .as_object()
        .unwrap()
        .values()
        .map(|item| &item["patch"])
        .find(|patch| {
            patch["x-kubernetes-group-version-kind"]
                == json!({"group": group, "version": version, "kind": kind})
        })
        .unwrap_or_else(|| panic!("no PATCH for {kind}"))
}

fn takes_field_validation(patch: &Value) -> bool {
    patch["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["name"] == "fieldValidation" && p["in"] == "query")
}

#[test]
fn root_lists_every_group_version_with_a_hash() {
    let root = v3_root(&[], &none);
    let url = root["paths"]["api/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap();
    assert!(url.starts_with("/openapi/v3/api/v1?hash="), "{url}");
    let core = v3_group_version("", "v1", &[], &none).unwrap();
    assert!(url.ends_with(&core.hash), "{url}");
    assert!(root["paths"]["apis/apps/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .starts_with("/openapi/v3/apis/apps/v1?hash="));
    assert_eq!(
        root["paths"].as_object().unwrap().len(),
        group_versions(&[]).len()
    );
    assert!(v3_group_version("apps", "v2", &[], &none).is_none());
}

#[test]
fn core_document_has_complete_schemas() {
    let core = v3_group_version("", "v1", &[], &none).unwrap();
    let doc = &core.value;
    assert_eq!(doc["openapi"], "3.0.0");
    let schemas = &doc["components"]["schemas"];
    let pod = &schemas["io.k8s.api.core.v1.Pod"];
    assert_eq!(
        pod["x-kubernetes-group-version-kind"],
        json!([{"group": "", "version": "v1", "kind": "Pod"}])
    );
    assert_eq!(
        definitions::referenced(&pod["properties"]["status"]),
        Some("io.k8s.api.core.v1.PodStatus")
    );
    assert_eq!(
        definitions::referenced(&pod["properties"]["metadata"]),
        Some(OBJECT_META)
    );
    let message = &schemas["io.k8s.api.core.v1.PodStatus"]["properties"]["message"];
    assert_eq!(message["type"], "string");
    assert!(message["description"]
        .as_str()
        .unwrap()
        .contains("human readable"));
    assert_eq!(
        schemas["io.k8s.api.core.v1.PodList"]["x-kubernetes-group-version-kind"],
        json!([{"group": "", "version": "v1", "kind": "PodList"}])
    );
    // Subresources' kinds are in the document too.
    assert!(schemas["io.k8s.api.policy.v1.Eviction"].is_object());
    assert!(schemas["io.k8s.api.core.v1.Binding"].is_object());
    // Nothing refers to a definition the document lacks.
    let text = doc.to_string();
    for piece in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
        let name = &piece[..piece.find('"').unwrap()];
        assert!(schemas.get(name).is_some(), "dangling reference to {name}");
    }
}

#[test]
fn operations_are_kube_apiservers() {
    let core = v3_group_version("", "v1", &[], &none).unwrap();
    let paths = &core.value["paths"];
    let item = &paths["/api/v1/namespaces/{namespace}/pods/{name}"];
    assert_eq!(item["get"]["operationId"], "readCoreV1NamespacedPod");
    assert_eq!(item["put"]["operationId"], "replaceCoreV1NamespacedPod");
    assert_eq!(item["delete"]["operationId"], "deleteCoreV1NamespacedPod");
    assert_eq!(item["patch"]["operationId"], "patchCoreV1NamespacedPod");
    let collection = &paths["/api/v1/namespaces/{namespace}/pods"];
    assert_eq!(collection["get"]["operationId"], "listCoreV1NamespacedPod");
    assert_eq!(
        collection["post"]["operationId"],
        "createCoreV1NamespacedPod"
    );
    assert_eq!(
        collection["delete"]["operationId"],
        "deleteCoreV1CollectionNamespacedPod"
    );
    assert_eq!(
        paths["/api/v1/pods"]["get"]["operationId"],
        "listCoreV1PodForAllNamespaces"
    );
    assert_eq!(
        paths["/api/v1/namespaces/{namespace}/pods/{name}/status"]["patch"]["operationId"],
        "patchCoreV1NamespacedPodStatus"
    );
    assert_eq!(
        paths["/api/v1/nodes/{name}"]["get"]["operationId"],
        "readCoreV1Node"
    );
    let finalize = paths["/api/v1/namespaces/{name}/finalize"]
        .as_object()
        .unwrap();
    assert_eq!(
        finalize["put"]["operationId"],
        "replaceCoreV1NamespaceFinalize"
    );
    assert!(!finalize.contains_key("get") && !finalize.contains_key("patch"));
    assert_eq!(
        paths["/api/v1/namespaces/{namespace}/pods/{name}/eviction"]["post"]["operationId"],
        "createCoreV1NamespacedPodEviction"
    );
    let patch = patch_of(&core.value, "", "v1", "Pod");
    assert!(takes_field_validation(patch));
    assert!(patch["requestBody"]["content"]["application/strategic-merge-patch+json"].is_object());
    assert!(takes_field_validation(patch_of(
        &core.value,
        "",
        "v1",
        "Node"
    )));

    let apps = v3_group_version("apps", "v1", &[], &none).unwrap();
    let scale =
        &apps.value["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"];
    assert_eq!(
        scale["get"]["operationId"],
        "readAppsV1NamespacedDeploymentScale"
    );
    assert_eq!(
        scale["get"]["x-kubernetes-group-version-kind"],
        json!({"group": "autoscaling", "version": "v1", "kind": "Scale"})
    );
    let rbac = v3_group_version("rbac.authorization.k8s.io", "v1", &[], &none).unwrap();
    assert_eq!(
        rbac.value["paths"]["/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}"]["get"]
            ["tags"],
        json!(["rbacAuthorization_v1"])
    );
    let coordination = v3_group_version("coordination.k8s.io", "v1", &[], &none).unwrap();
    assert!(takes_field_validation(patch_of(
        &coordination.value,
        "coordination.k8s.io",
        "v1",
        "Lease"
    )));
}

#[test]
fn documents_are_built_once() {
    let first = v3_group_version("batch", "v1", &[], &none).unwrap();
    let second = v3_group_version("batch", "v1", &[], &none).unwrap();
    assert!(Arc::ptr_eq(&first, &second));
}

#[test]
fn custom_resources_publish_their_schema() {
    let widgets: &'static ResourceInfo = Box::leak(Box::new(ResourceInfo {
        group: "stable.example.com",
        version: "v1",
        kind: "Widget",
        plural: "widgets",
        singular: "widget",
        namespaced: true,
        short_names: &[],
        verbs: &[
            "create", "delete", "get", "list", "patch", "update", "watch",
        ],
        subresources: &["status"],
        categories: &[],
        storage: "stable.example.com/widgets",
    }));
    let schema = |size: &str| json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {size: {"type": "integer"}}}}});
    let published = |_: &ResourceInfo| Some(schema("size"));
    let doc = v3_group_version("stable.example.com", "v1", &[widgets], &published).unwrap();
    let widget = &doc.value["components"]["schemas"]["com.example.stable.v1.Widget"];
    assert_eq!(
        widget["properties"]["spec"]["properties"]["size"]["type"],
        "integer"
    );
    assert_eq!(
        widget["x-kubernetes-group-version-kind"],
        json!([{"group": "stable.example.com", "version": "v1", "kind": "Widget"}])
    );
    assert_eq!(
        definitions::referenced(&widget["properties"]["metadata"]),
        Some(OBJECT_META)
    );
    assert!(doc.value["components"]["schemas"][OBJECT_META].is_object());
    let patch = patch_of(&doc.value, "stable.example.com", "v1", "Widget");
    assert!(patch["requestBody"]["content"]
        .get("application/strategic-merge-patch+json")
        .is_none());

    // The root's hash follows the CRD's schema.
    let root = |published: Published<'_>| {
        v3_root(&[widgets], published)["paths"]["apis/stable.example.com/v1"]["serverRelativeURL"]
            .clone()
    };
    let changed = |_: &ResourceInfo| Some(schema("color"));
    assert_ne!(root(&published), root(&changed));
    assert_eq!(root(&published), root(&published));

    // Kept where the schemas say (one set of CRDs): built once, and again for new schemas.
    struct Cached {
        schema: Value,
        documents: CustomDocuments,
    }
    impl CustomSchemas for Cached {
        fn published(&self, _: &ResourceInfo) -> Option<Value> {
            Some(self.schema.clone())
        }
        fn documents(&self) -> Option<&CustomDocuments> {
            Some(&self.documents)
        }
    }
    let before = Cached {
        schema: schema("size"),
        documents: CustomDocuments::default(),
    };
    let first = v3_group_version("stable.example.com", "v1", &[widgets], &before).unwrap();
    let again = v3_group_version("stable.example.com", "v1", &[widgets], &before).unwrap();
    assert!(Arc::ptr_eq(&first, &again));
    assert_eq!(first.hash, doc.hash);
    let after = Cached {
        schema: schema("color"),
        documents: CustomDocuments::default(),
    };
    let rebuilt = v3_group_version("stable.example.com", "v1", &[widgets], &after).unwrap();
    assert_ne!(rebuilt.hash, first.hash);
}

#[test]
fn v2_has_definitions_and_body_parameters() {
    let doc = v2_document(&[], &none);
    let v2 = &doc.value;
    assert_eq!(v2["swagger"], "2.0");
    let definitions = &v2["definitions"];
    let template = &definitions["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]["template"];
    assert_eq!(
        template["$ref"],
        "#/definitions/io.k8s.api.core.v1.PodTemplateSpec"
    );
    assert!(template.get("allOf").is_none());
    assert_eq!(
        definitions[definitions::INT_OR_STRING],
        json!({"description": definitions[definitions::INT_OR_STRING]["description"], "type": "string", "format": "int-or-string"})
    );
    assert_eq!(definitions[definitions::QUANTITY]["type"], "string");
    let containers = &definitions["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
    assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
    assert_eq!(
        containers["items"]["$ref"],
        "#/definitions/io.k8s.api.core.v1.Container"
    );
    let create = &v2["paths"]["/api/v1/namespaces/{namespace}/pods"]["post"];
    assert_eq!(create["parameters"][0]["in"], "body");
    assert_eq!(
        create["parameters"][0]["schema"]["$ref"],
        "#/definitions/io.k8s.api.core.v1.Pod"
    );
    assert_eq!(create["parameters"][1]["type"], "string");
    assert!(create["produces"]
        .as_array()
        .unwrap()
        .contains(&json!("application/json")));
    assert_eq!(
        create["responses"]["201"]["schema"]["$ref"],
        "#/definitions/io.k8s.api.core.v1.Pod"
    );
    assert!(!doc.body.windows(20).any(|w| w == b"#/components/schemas"));
    assert!(v2["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"].is_object());
}

/// Every served group-version has a document with schemas; with `--nocapture` it prints the
/// figures of docs/apiserver.md (each document's size and first build time).
#[test]
fn every_group_version_document_builds() {
    for (g, v) in group_versions(&[]) {
        let started = std::time::Instant::now();
        let d = v3_group_version(g, v, &[], &none).unwrap();
        let schemas = d.schemas().unwrap().len();
        assert!(schemas > 0, "{g}/{v} has no schemas");
        println!(
            "{g}/{v}: {} bytes, {schemas} schemas, {:?}",
            d.body.len(),
            started.elapsed()
        );
    }
    let started = std::time::Instant::now();
    let d = v2_document(&[], &none);
    assert!(!d.body.is_empty());
    println!("v2: {} bytes {:?}", d.body.len(), started.elapsed());
    let started = std::time::Instant::now();
    let path: Vec<String> = "spec.template.spec.containers.ports"
        .split('.')
        .map(String::from)
        .collect();
    for _ in 0..1000 {
        assert!(crate::openapi::list_field("Deployment", &path).is_some());
    }
    println!("1000 lookups {:?}", started.elapsed());
}

/// The per-thread memo answers as the walk does, across kinds that share a path and paths that
/// join to the same text.
#[test]
fn remembered_list_fields_match_the_walk() {
    let path = |p: &str| -> Vec<String> { p.split('.').map(String::from).collect() };
    let cases = [
        ("Pod", path("spec.containers")),
        ("Pod", path("spec.containers.ports")),
        ("Pod", path("status.conditions")),
        ("Pod", path("status.containerStatuses")),
        ("Node", path("status.conditions")),
        ("Node", path("status.addresses")),
        ("Deployment", path("spec.template.spec.containers")),
        ("Deployment", path("status.conditions")),
        ("Pod", path("metadata.ownerReferences")),
        ("", path("metadata.finalizers")),
        ("Widget", path("spec.metadata.ownerReferences")),
        ("Pod", vec!["spec".into(), "containersports".into()]),
        ("Pod", path("spec.nothing")),
        ("NoSuchKind", path("spec.containers")),
    ];
    let address = |f: Option<&'static list_fields::ListField>| f.map(|f| f as *const _);
    for _ in 0..2 {
        for (kind, path) in &cases {
            assert_eq!(
                address(crate::openapi::list_field(kind, path)),
                address(super::find_list_field(kind, path)),
                "{kind} {path:?}"
            );
        }
    }
    assert!(crate::openapi::list_field("Pod", &path("status.conditions")).is_some());
    assert!(crate::openapi::list_field("Pod", &path("spec.nothing")).is_none());
}
