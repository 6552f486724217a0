//! Content negotiation of reads, as kube-apiserver does it: the Accept header's media ranges
//! are tried in order, and the first one served decides the form of the answer — the object
//! itself, a `Table` (`as=Table;g=meta.k8s.io;v=v1`), or its metadata only
//! (`as=PartialObjectMetadata` / `as=PartialObjectMetadataList`, what metadata informers and
//! kube-rs's `metadata_watcher` ask for). A header naming only forms that are not served is a
//! 406.

use axum::http::{header, HeaderMap};
use serde_json::{json, Map, Value};

use api::resources::ResourceInfo;

use crate::errors::ApiError;

/// The form a read answers in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    Object,
    Table,
    /// `PartialObjectMetadata`: one object's (or each watch event's) metadata.
    Metadata,
    /// `PartialObjectMetadataList`: a list's items' metadata.
    MetadataList,
}

/// What kube-apiserver says it accepts when no range of the header is served.
const ACCEPTED: &str =
    "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf";

/// The form the Accept header asks for; a 406 when it names only unserved `as=` forms.
pub fn negotiate(headers: &HeaderMap) -> Result<Form, ApiError> {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
        return Ok(Form::Object);
    };
    let mut ranges = accept.split(',').map(str::trim).filter(|r| !r.is_empty());
    let mut any = false;
    for range in ranges.by_ref() {
        any = true;
        if let Some(form) = form_of(range) {
            return Ok(form);
        }
    }
    if any {
        Err(ApiError::NotAcceptable {
            message: ACCEPTED.into(),
        })
    } else {
        Ok(Form::Object)
    }
}

/// The form one media range asks for, or `None` when it is not served.
fn form_of(range: &str) -> Option<Form> {
    let mut parts = range.split(';').map(str::trim);
    let _media_type = parts.next()?;
    let (mut as_kind, mut group, mut version) = (None, None, None);
    for parameter in parts {
        let Some((key, value)) = parameter.split_once('=') else {
            continue;
        };
        match key.trim() {
            "as" => as_kind = Some(value.trim()),
            "g" => group = Some(value.trim()),
            "v" => version = Some(value.trim()),
            _ => {}
        }
    }
    let Some(as_kind) = as_kind else {
        return Some(Form::Object);
    };
    if group != Some("meta.k8s.io") || !matches!(version, Some("v1" | "v1beta1")) {
        return None;
    }
    match as_kind {
        "Table" => Some(Form::Table),
        "PartialObjectMetadata" => Some(Form::Metadata),
        "PartialObjectMetadataList" => Some(Form::MetadataList),
        _ => None,
    }
}

/// Go's `%T` of what a read returned, which kube-apiserver names in these 406s.
fn go_type(resource: &ResourceInfo, custom: bool, list: bool) -> String {
    let suffix = if list { "List" } else { "" };
    if custom {
        return format!("*unstructured.Unstructured{suffix}");
    }
    let package = match resource.group {
        "" => "core",
        group => group.split('.').next().unwrap_or(group),
    };
    format!("*{package}.{}{suffix}", resource.kind)
}

/// The 406 for metadata of a single object asked for as a list.
pub fn not_a_list(resource: &ResourceInfo, custom: bool) -> ApiError {
    ApiError::NotAcceptable {
        message: format!(
            "you requested PartialObjectMetadataList, but the requested object is not a list ({})",
            go_type(resource, custom, false)
        ),
    }
}

/// The 406 for a list's metadata asked for as one object.
pub fn is_a_list(resource: &ResourceInfo, custom: bool) -> ApiError {
    ApiError::NotAcceptable {
        message: format!(
            "you requested PartialObjectMetadata, but the requested object is a list ({})",
            go_type(resource, custom, true)
        ),
    }
}

/// An object as `PartialObjectMetadata`: its whole ObjectMeta and nothing else.
pub fn partial(object: &Value) -> Value {
    let metadata = object.get("metadata").cloned().unwrap_or_else(|| json!({}));
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
    })
}

/// A list as `PartialObjectMetadataList`: ListMeta, and each item as `PartialObjectMetadata`.
pub fn partial_list(items: &[Value], resource_version: i64, continue_token: Option<&str>) -> Value {
    let mut list_meta = Map::new();
    if let Some(token) = continue_token.filter(|t| !t.is_empty()) {
        list_meta.insert("continue".into(), json!(token));
    }
    list_meta.insert(
        "resourceVersion".into(),
        json!(resource_version.to_string()),
    );
    json!({
        "kind": "PartialObjectMetadataList",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "items": items.iter().map(partial).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn accept(value: &str) -> Result<Form, ApiError> {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_str(value).expect("header"),
        );
        negotiate(&headers)
    }

    #[test]
    fn the_first_served_range_decides() {
        assert_eq!(negotiate(&HeaderMap::new()).ok(), Some(Form::Object));
        assert_eq!(accept("application/json").ok(), Some(Form::Object));
        assert_eq!(
            accept("application/json;as=Table;v=v1;g=meta.k8s.io,application/json").ok(),
            Some(Form::Table)
        );
        assert_eq!(
            accept("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1").ok(),
            Some(Form::Metadata)
        );
        assert_eq!(
            accept("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1").ok(),
            Some(Form::MetadataList)
        );
        // An unserved form is skipped for the next range.
        assert_eq!(
            accept("application/json;as=Widget;g=example.com;v=v1, application/json").ok(),
            Some(Form::Object)
        );
    }

    #[test]
    fn only_unserved_forms_are_not_acceptable() {
        let err = accept("application/json;as=PartialObjectMetadata;g=example.com;v=v1")
            .expect_err("406");
        assert_eq!(err.code(), 406);
        assert_eq!(err.reason(), "NotAcceptable");
        assert_eq!(err.to_string(), ACCEPTED);
        let pods = api::resources::pods();
        assert_eq!(
            not_a_list(pods, false).to_string(),
            "you requested PartialObjectMetadataList, but the requested object is not a list (*core.Pod)"
        );
    }

    #[test]
    fn metadata_only_shapes() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "labels": {"x": "y"}}, "spec": {}});
        assert_eq!(
            partial(&pod),
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": {"name": "a", "labels": {"x": "y"}}})
        );
        let list = partial_list(&[pod], 7, Some("next"));
        assert_eq!(list["kind"], "PartialObjectMetadataList");
        assert_eq!(
            list["metadata"],
            json!({"continue": "next", "resourceVersion": "7"})
        );
        assert_eq!(list["items"][0]["kind"], "PartialObjectMetadata");
        assert!(list["items"][0].get("spec").is_none());
    }
}
