//! The `dryRun` option of writes. Kubernetes knows one value, `All` (run every stage, persist
//! nothing); any other is refused before the request does anything, on every verb, with the
//! options type's validation error — so a client that means a dry run never writes for real.

use crate::errors::ApiError;
use crate::validation::Cause;

/// The only dry-run value Kubernetes accepts.
pub const ALL: &str = "All";

/// Whether a write is a dry run, from its `dryRun` values; `options_kind` names the options it
/// came in (`CreateOptions`, `UpdateOptions`, `PatchOptions`, `DeleteOptions`) for the error,
/// which is kube-apiserver's 422 for those options.
pub fn parse(values: &[&str], options_kind: &str) -> Result<bool, ApiError> {
    if values.iter().all(|v| *v == ALL) {
        return Ok(!values.is_empty());
    }
    // Go's `%#v` of a []string, as kube-apiserver prints the bad value.
    let quoted: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
    let message = format!(
        "Unsupported value: []string{{{}}}: supported values: \"{ALL}\"",
        quoted.join(", ")
    );
    Err(ApiError::Invalid {
        message: format!("{options_kind}.meta.k8s.io \"\" is invalid: dryRun: {message}"),
        name: String::new(),
        group: "meta.k8s.io".into(),
        kind: options_kind.into(),
        causes: vec![Cause {
            reason: "FieldValueNotSupported".into(),
            message,
            field: "dryRun".into(),
        }],
    })
}

/// The `dryRun` of a `DeleteOptions` body (a list of strings), checked as [`parse`] does.
pub fn from_delete_options(body: &serde_json::Value) -> Result<bool, ApiError> {
    let values: Vec<&str> = match body.get("dryRun") {
        None | Some(serde_json::Value::Null) => Vec::new(),
        Some(serde_json::Value::Array(items)) => items
            .iter()
            .map(|item| {
                item.as_str().ok_or_else(|| {
                    ApiError::bad_request(
                        "invalid DeleteOptions: dryRun: expected a list of strings",
                    )
                })
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(ApiError::bad_request(
                "invalid DeleteOptions: dryRun: expected a list of strings",
            ))
        }
    };
    parse(&values, "DeleteOptions")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_all_is_a_dry_run() {
        assert_eq!(parse(&[], "CreateOptions").ok(), Some(false));
        assert_eq!(parse(&["All"], "CreateOptions").ok(), Some(true));
        assert_eq!(parse(&["All", "All"], "PatchOptions").ok(), Some(true));
        for bad in ["true", "server", "Garbage", ""] {
            let err = parse(&[bad], "CreateOptions").expect_err(bad);
            assert_eq!(err.code(), 422);
            assert_eq!(
                err.to_string(),
                format!("CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: []string{{\"{bad}\"}}: supported values: \"All\"")
            );
        }
        let err = parse(&["All", "x"], "DeleteOptions").expect_err("mixed");
        assert!(
            err.to_string()
                .contains("[]string{\"All\", \"x\"}: supported values"),
            "{err}"
        );
    }

    #[test]
    fn delete_options_body() {
        let body = |v: serde_json::Value| serde_json::json!({ "dryRun": v });
        assert_eq!(
            from_delete_options(&serde_json::json!({})).ok(),
            Some(false)
        );
        assert_eq!(
            from_delete_options(&body(serde_json::json!(["All"]))).ok(),
            Some(true)
        );
        let err = from_delete_options(&body(serde_json::json!(["Garbage"]))).expect_err("bad");
        assert!(
            err.to_string().starts_with("DeleteOptions.meta.k8s.io"),
            "{err}"
        );
        let err = from_delete_options(&body(serde_json::json!("All"))).expect_err("not a list");
        assert_eq!(err.code(), 400);
    }
}
