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

/// Whether the request's `Accept` takes JSON (the only encoding kemu serves OpenAPI in); kubectl
/// asks for the protobuf encoding first and falls back when refused with 406.
fn accepts_json(headers: &HeaderMap) -> bool {
    let Some(accept) = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.trim().is_empty())
    else {
        return true;
    };
    accept.split(',').any(|range| {
        let media = range.split(';').next().unwrap_or("").trim();
        matches!(media, "application/json" | "application/*" | "*/*")
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
    if !accepts_json(headers) {
        return error_response(&ApiError::NotAcceptable {
            message: "only application/json is supported for OpenAPI documents".into(),
        });
    }
    let etag = format!("\"{}\"", document.hash);
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
    let builder = builder.header(header::ETAG, etag);
    let response = if not_modified {
        builder.status(StatusCode::NOT_MODIFIED).body(Body::empty())
    } else {
        builder
            .status(StatusCode::OK)
            .header(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )
            .body(Body::from(document.body.clone()))
    };
    response.unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protobuf_only_accept_is_refused() {
        let mut headers = HeaderMap::new();
        assert!(accepts_json(&headers));
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/com.github.proto-openapi.spec.v2@v1.0+protobuf"),
        );
        assert!(!accepts_json(&headers));
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, */*"),
        );
        assert!(accepts_json(&headers));
    }
}
