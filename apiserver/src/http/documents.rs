//! Serving the OpenAPI and aggregated discovery documents: content negotiation, ETags and the
//! `hash` parameter of `/openapi/v3` URLs, as kube-apiserver's handlers answer them.

use std::collections::HashMap;

use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;

use api::resources::ResourceInfo;

use crate::aggregated_discovery;
use crate::errors::ApiError;
use crate::openapi::Document;

use super::error_response;

/// The protobuf encoding of `/openapi/v2` (gnostic's `openapi.v2.Document`), in the spelling
/// client-go asks for and the one answered (Go's media type parser refuses the `@`).
const V2_PROTOBUF: [&str; 2] = [
    "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
];

/// How a document is answered.
#[derive(Debug, PartialEq, Eq)]
enum Encoding {
    Json,
    Protobuf,
}

/// The first encoding the request's `Accept` names that the document comes in (protobuf only for
/// `/openapi/v2`); JSON when there is no `Accept`.
fn negotiate(headers: &HeaderMap, protobuf: bool) -> Option<Encoding> {
    let Some(accept) = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.trim().is_empty())
    else {
        return Some(Encoding::Json);
    };
    accept.split(',').find_map(|range| {
        let media = range.split(';').next().unwrap_or("").trim();
        match media {
            "application/json" | "application/*" | "*/*" => Some(Encoding::Json),
            m if protobuf && V2_PROTOBUF.contains(&m) => Some(Encoding::Protobuf),
            _ => None,
        }
    })
}

/// `/api` (`legacy`) or `/apis` as an `APIGroupDiscoveryList`, when the `Accept` asks for one;
/// `None` answers with the unaggregated document.
pub(super) fn aggregated(
    headers: &HeaderMap,
    legacy: bool,
    custom: &[&'static ResourceInfo],
) -> Option<Response> {
    let accept = headers.get(header::ACCEPT)?.to_str().ok()?;
    let version = aggregated_discovery::requested_version(accept)?;
    let list = aggregated_discovery::group_discovery_list(version, legacy, custom);
    let mut body = crate::go_json::to_vec(&list);
    body.push(b'\n');
    let etag = format!("\"{:016X}\"", crate::openapi::fnv1a(&body));
    let builder = Response::builder()
        .header(header::VARY, "Accept")
        .header(header::ETAG, etag.as_str());
    let response = if matches_etag(headers, &etag) {
        builder.status(StatusCode::NOT_MODIFIED).body(Body::empty())
    } else {
        builder
            .status(StatusCode::OK)
            .header(
                header::CONTENT_TYPE,
                aggregated_discovery::content_type(version),
            )
            .body(Body::from(body))
    };
    Some(response.unwrap_or_default())
}

fn matches_etag(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|tags| tags.split(',').any(|t| t.trim() == etag || t.trim() == "*"))
}

/// A document as kube-openapi serves it: JSON, with its hash as a strong ETag (a matching
/// `If-None-Match` gets 304); under `/openapi/v3`, a URL naming the current hash may be cached
/// forever, and one naming an old hash is redirected to the current one.
pub(super) fn openapi(
    document: &Document,
    headers: &HeaderMap,
    query: &HashMap<String, String>,
    path: &str,
    versioned: bool,
) -> Response {
    // `/openapi/v2` is the one document offered in protobuf too.
    let Some(encoding) = negotiate(headers, !versioned) else {
        return error_response(&ApiError::NotAcceptable {
            message: "the requested content type is not supported for this OpenAPI document".into(),
        });
    };
    let (etag, content_type, body) = match encoding {
        Encoding::Json => (
            format!("\"{}\"", document.hash),
            "application/json",
            document.body.clone(),
        ),
        Encoding::Protobuf => (
            format!("\"{}-protobuf\"", document.hash),
            V2_PROTOBUF[1],
            document.protobuf().to_vec(),
        ),
    };
    let mut builder = Response::builder();
    if versioned {
        match query.get("hash") {
            Some(hash) if *hash == document.hash => {
                builder = builder
                    .header(header::CACHE_CONTROL, "public, immutable")
                    .header(header::EXPIRES, "Wed, 31 Dec 2099 00:00:00 GMT");
            }
            Some(_) => {
                let location = format!("{path}?hash={}", document.hash);
                return Response::builder()
                    .status(StatusCode::MOVED_PERMANENTLY)
                    .header(header::LOCATION, location)
                    .body(Body::empty())
                    .unwrap_or_default();
            }
            None => {
                builder = builder.header(header::CACHE_CONTROL, "no-cache, private");
            }
        }
    }
    let not_modified = matches_etag(headers, &etag);
    let builder = builder
        .header(header::ETAG, etag)
        .header(header::VARY, "Accept");
    let response = if not_modified {
        builder.status(StatusCode::NOT_MODIFIED).body(Body::empty())
    } else {
        builder
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, HeaderValue::from_static(content_type))
            .body(Body::from(body))
    };
    response.unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(value: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_static(value));
        headers
    }

    #[test]
    fn negotiation() {
        assert_eq!(negotiate(&HeaderMap::new(), false), Some(Encoding::Json));
        let protobuf = accept(V2_PROTOBUF[0]);
        assert_eq!(negotiate(&protobuf, true), Some(Encoding::Protobuf));
        assert_eq!(negotiate(&protobuf, false), None);
        assert_eq!(
            negotiate(&accept("application/json, */*"), true),
            Some(Encoding::Json)
        );
    }

    #[test]
    fn etags_hashes_and_redirects() {
        let document = crate::openapi::v3_group_version(
            "coordination.k8s.io",
            "v1",
            &[],
            &crate::openapi::no_custom_schemas,
        )
        .expect("served");
        let path = "/openapi/v3/apis/coordination.k8s.io/v1";
        let mut query = HashMap::new();
        let fresh = openapi(&document, &HeaderMap::new(), &query, path, true);
        assert_eq!(fresh.status(), StatusCode::OK);
        let etag = fresh.headers()[header::ETAG].clone();
        assert_eq!(etag.to_str().unwrap(), format!("\"{}\"", document.hash));

        let mut again = HeaderMap::new();
        again.insert(header::IF_NONE_MATCH, etag);
        let cached = openapi(&document, &again, &query, path, true);
        assert_eq!(cached.status(), StatusCode::NOT_MODIFIED);

        query.insert("hash".to_string(), document.hash.clone());
        let current = openapi(&document, &HeaderMap::new(), &query, path, true);
        assert_eq!(
            current.headers()[header::CACHE_CONTROL],
            "public, immutable"
        );
        query.insert("hash".to_string(), "0".to_string());
        let stale = openapi(&document, &HeaderMap::new(), &query, path, true);
        assert_eq!(stale.status(), StatusCode::MOVED_PERMANENTLY);
        assert_eq!(
            stale.headers()[header::LOCATION].to_str().unwrap(),
            format!("{path}?hash={}", document.hash)
        );
    }
}
