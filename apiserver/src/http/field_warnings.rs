//! Unknown and repeated fields in a write's body, as `fieldValidation` asks: `Strict` refuses
//! them (the registry answers 400), `Warn` — the default — reports each in a `Warning` header
//! (`299 - "unknown field \"spec.foo\""`, which kubectl prints), `Ignore` drops them silently.
//!
//! Repeated keys are found here, while a JSON body is parsed (a parsed object keeps only the
//! last value); unknown fields are found by the registry against the kind's typed model.

use axum::body::Body;
use axum::http::{header, HeaderValue, Request};
use axum::response::Response;
use serde_json::Value;

use api::ResourceInfo;

use super::{decode_object_for, read_body};
use crate::errors::ApiError;
use crate::registry::{FieldValidation, Warnings, WriteOptions};

/// Reads a create's or update's object; a JSON body's repeated keys go into `write`.
pub(super) async fn read_object(
    resource: &ResourceInfo,
    request: Request<Body>,
    write: &mut WriteOptions,
) -> Result<Value, ApiError> {
    let content_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_string();
    let body = read_body(request).await?;
    let media = content_type.split(';').next().unwrap_or("").trim();
    let json = matches!(media, "application/json" | "" | "*/*");
    if !json || write.field_validation == FieldValidation::Ignore {
        return decode_object_for(Some(resource), &content_type, &body);
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request(
            "the request body is empty; an object was expected",
        ));
    }
    let (value, repeated) = crate::strict::parse_json(&body).map_err(|e| {
        ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
    })?;
    if !value.is_object() {
        return Err(ApiError::bad_request("the request body must be an object"));
    }
    write.repeated_fields = repeated;
    Ok(value)
}

/// Adds one `Warning` header per collected warning.
pub(super) fn attach(mut response: Response, warnings: &Warnings) -> Response {
    for warning in warnings.take() {
        if let Ok(value) = HeaderValue::from_str(&header_value(&warning)) {
            response.headers_mut().append(header::WARNING, value);
        }
    }
    response
}

/// RFC 7234's form as kube-apiserver writes it: code 299, no agent, the text quoted.
fn header_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 10);
    out.push_str("299 - \"");
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_are_quoted_as_kube_apiserver_quotes_them() {
        assert_eq!(
            header_value("unknown field \"spec.foo\""),
            r#"299 - "unknown field \"spec.foo\"""#
        );
        let warnings = Warnings::default();
        warnings.push("duplicate field \"metadata.name\"".into());
        warnings.push("unknown field \"spec.x\\y\"".into());
        let response = attach(Response::new(Body::empty()), &warnings);
        let values: Vec<_> = response
            .headers()
            .get_all(header::WARNING)
            .iter()
            .map(|v| v.to_str().unwrap_or_default().to_string())
            .collect();
        assert_eq!(
            values,
            vec![
                r#"299 - "duplicate field \"metadata.name\"""#,
                r#"299 - "unknown field \"spec.x\\y\"""#
            ]
        );
        assert!(warnings.take().is_empty(), "taken once");
    }
}
