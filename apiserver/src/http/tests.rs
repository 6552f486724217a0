//! Routing, decoding and the byte layout of responses.

use super::*;

async fn body_text(response: Response) -> String {
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("body");
    String::from_utf8(bytes.to_vec()).expect("utf-8")
}

#[tokio::test]
async fn errors_are_written_as_kube_apiserver_writes_them() {
    let pods = api::resources::pods();
    let response = error_response(&ApiError::not_found(pods, "web"));
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        body_text(response).await,
        include_str!("../go_json/fixtures/status-not-found.json")
    );
    let cause = crate::validation::Cause {
        reason: "FieldValueRequired".into(),
        message: "Required value".into(),
        field: "spec.containers[0].image".into(),
    };
    let response = error_response(&ApiError::invalid(pods, "web", vec![cause]));
    assert_eq!(
        body_text(response).await,
        include_str!("../go_json/fixtures/status-invalid.json")
    );
}

#[tokio::test]
async fn lists_are_written_as_kube_apiserver_writes_them() {
    let pods = api::resources::pods();
    let pod: Value =
        serde_json::from_str(include_str!("../go_json/fixtures/pod.json")).expect("fixture");
    let stored = crate::storage::Storage::encode(&pod).expect("encodes");
    let cached = CachedObject::decode("pods", "k", &stored, 4242).expect("decodes");
    let response = list_response(pods, &[Arc::new(cached)], 4300, Some("next"));
    // An item has no kind and apiVersion; the rest is the object as a GET returns it.
    let item = include_str!("../go_json/fixtures/pod.json")
        .trim_end()
        .replacen(r#"{"kind":"Pod","apiVersion":"v1","#, "{", 1);
    assert_eq!(
        body_text(response).await,
        format!(
            "{{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{{\"resourceVersion\":\"4300\",\"continue\":\"next\"}},\"items\":[{item}]}}\n"
        )
    );
}

#[tokio::test]
async fn discovery_is_written_as_kube_apiserver_writes_it() {
    let response = json_response(
        StatusCode::OK,
        &crate::discovery::api_resource_list("coordination.k8s.io", "v1", &[]).expect("served"),
    );
    let text = body_text(response).await;
    assert!(
        text.starts_with(
            r#"{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"coordination.k8s.io/v1","resources":[{"name":"leases","singularName":"lease","namespaced":true,"kind":"Lease","verbs":["#
        ),
        "{text}"
    );
    assert!(text.ends_with("}]}\n"), "{text}");
    let core = body_text(json_response(
        StatusCode::OK,
        &crate::discovery::api_resource_list("", "v1", &[]).expect("served"),
    ))
    .await;
    assert!(
        core.starts_with(r#"{"kind":"APIResourceList","groupVersion":"v1","resources":[{"name":"#),
        "{core}"
    );
    let versions = body_text(json_response(
        StatusCode::OK,
        &crate::discovery::api_versions("10.0.0.1:6443"),
    ))
    .await;
    assert_eq!(
        versions,
        "{\"kind\":\"APIVersions\",\"versions\":[\"v1\"],\"serverAddressByClientCIDRs\":[{\"clientCIDR\":\"0.0.0.0/0\",\"serverAddress\":\"10.0.0.1:6443\"}]}\n"
    );
    let groups = body_text(json_response(
        StatusCode::OK,
        &crate::discovery::api_group_list(&[]),
    ))
    .await;
    assert!(
        groups.starts_with(r#"{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":"#),
        "{groups}"
    );
    assert!(!groups.contains(r#"{"kind":"APIGroup""#), "{groups}");
}

fn target(path: &str) -> PathTarget {
    match route(path, &crate::crd::Served::default()) {
        Ok(Route::Resource(t)) => t,
        _ => panic!("{path} is not a resource path"),
    }
}

#[test]
fn routes_resource_paths() {
    let t = target("/api/v1/namespaces/default/pods/web/status");
    assert_eq!(
        (
            t.resource.plural,
            t.namespace.as_deref(),
            t.name.as_deref(),
            t.subresource.as_deref()
        ),
        ("pods", Some("default"), Some("web"), Some("status"))
    );
    let t = target("/api/v1/namespaces/kube-system");
    assert_eq!(
        (t.resource.plural, t.name.as_deref()),
        ("namespaces", Some("kube-system"))
    );
    let t = target("/api/v1/namespaces/x/finalize");
    assert_eq!(
        (t.resource.plural, t.subresource.as_deref()),
        ("namespaces", Some("finalize"))
    );
    let t = target("/apis/apps/v1/deployments");
    assert_eq!((t.resource.plural, t.namespace), ("deployments", None));
    let t = target("/api/v1/watch/namespaces/ns/pods");
    assert!(t.watch_path);
    assert!(route(
        "/api/v1/namespaces/ns/pods/a/bogus",
        &crate::crd::Served::default()
    )
    .is_err());
    assert!(route("/apis/nope/v1/things", &crate::crd::Served::default()).is_err());
    assert!(matches!(
        route("/version/", &crate::crd::Served::default()),
        Ok(Route::Version)
    ));
}

#[test]
fn yaml_errors_say_where() {
    let err = decode_object("application/yaml", b"kind: Pod\nmetadata:\n  name: [a\n")
        .expect_err("unclosed flow sequence");
    let message = err.to_string();
    assert_eq!(err.code(), 400);
    assert!(
        message.starts_with("error converting YAML to JSON: yaml: "),
        "{message}"
    );
    assert!(message.contains("line 3"), "{message}");
    assert!(!message.contains('\n'), "{message}");
}

#[test]
fn an_unsupported_body_type_is_415_listing_the_served_types() {
    const MESSAGE: &str = "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf";
    for media in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "*/*",
        "text/yaml",
    ] {
        let err = decode_object(media, b"{}").expect_err(media);
        assert_eq!(err.code(), 415, "{media}");
        assert_eq!(err.reason(), "UnsupportedMediaType", "{media}");
        assert_eq!(err.to_string(), MESSAGE, "{media}");
    }
    // The type is negotiated before the body is read.
    assert_eq!(
        decode_object("text/plain", b"").map_err(|e| e.code()).err(),
        Some(415)
    );
    // Go's media type parsing: case-insensitive, parameters ignored.
    assert!(decode_object("Application/JSON; charset=utf-8", b"{}").is_ok());
}

#[test]
fn decodes_json_and_yaml_bodies() {
    assert!(decode_object("application/json", b"{\"a\":1}").is_ok());
    assert!(decode_object("application/yaml", b"a: 1\nb: [x]\n").is_ok());
    assert_eq!(
        decode_object("application/json", b"{nope")
            .map_err(|e| e.code())
            .err(),
        Some(400)
    );
    assert_eq!(
        decode_object("application/yaml", b"a: [")
            .map_err(|e| e.code())
            .err(),
        Some(400)
    );
    assert_eq!(
        decode_object("text/html", b"{}")
            .map_err(|e| e.code())
            .err(),
        Some(415)
    );
    assert_eq!(
        decode_object("application/json", b"[1]")
            .map_err(|e| e.code())
            .err(),
        Some(400)
    );
}
