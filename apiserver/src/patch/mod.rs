//! The PATCH engines: the four patch types a Kubernetes API server accepts, applied to objects
//! held as [`serde_json::Value`], one module each.
//!
//! - [`merge_patch`]: JSON merge patch (RFC 7386, `application/merge-patch+json`), what
//!   `kubectl label`/`annotate` send.
//! - [`json_patch`]: JSON patch (RFC 6902, `application/json-patch+json`).
//! - [`strategic_merge`]: strategic merge patch (`application/strategic-merge-patch+json`), what
//!   client-side `kubectl apply` sends. Lists merge by a per-field merge key from
//!   [`list_strategy`]'s table; the `$patch`, `$retainKeys`, `$setElementOrder/…` and
//!   `$deleteFromPrimitiveList/…` directives are honoured.
//! - [`server_side_apply`]: server-side apply (`application/apply-patch+yaml`): the applied
//!   configuration is merged like a strategic merge patch without directives, fields the same
//!   manager applied before but dropped now are removed, and the manager's
//!   `metadata.managedFields` entry is rewritten.
//!
//! [`apply`] picks the engine for a request's [`PatchType`]. Everything here is pure: no I/O, and
//! the clock is only read by [`apply`] (use [`apply_at`] to pass "now" in).

mod error;
pub mod json_patch;
pub mod list_strategy;
pub mod merge_patch;
pub mod server_side_apply;
pub mod strategic_merge;

use chrono::{DateTime, Utc};
use serde_json::Value;

use error::malformed;
pub use error::PatchError;
pub use json_patch::json_patch;
pub use list_strategy::ObjectType;
pub use merge_patch::merge_patch;
use server_side_apply::server_side_apply;
pub use strategic_merge::strategic_merge;

/// The patch formats of a PATCH request, named after their Content-Type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    /// RFC 6902 JSON patch: `application/json-patch+json`.
    Json,
    /// RFC 7386 JSON merge patch: `application/merge-patch+json`.
    Merge,
    /// Kubernetes strategic merge patch: `application/strategic-merge-patch+json`.
    StrategicMerge,
    /// Server-side apply: `application/apply-patch+yaml` (or `+json`).
    Apply,
}

impl PatchType {
    /// The patch type for a request's Content-Type, ignoring parameters such as
    /// `; charset=utf-8`. `None` means the server should answer 415 Unsupported Media Type.
    pub fn from_content_type(content_type: &str) -> Option<PatchType> {
        let media_type = content_type.split(';').next().unwrap_or_default().trim();
        match media_type.to_ascii_lowercase().as_str() {
            "application/json-patch+json" => Some(PatchType::Json),
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/strategic-merge-patch+json" => Some(PatchType::StrategicMerge),
            "application/apply-patch+yaml" | "application/apply-patch+json" => {
                Some(PatchType::Apply)
            }
            _ => None,
        }
    }

    /// The canonical Content-Type of this patch type (e.g. for error messages and tests).
    pub fn content_type(self) -> &'static str {
        match self {
            PatchType::Json => "application/json-patch+json",
            PatchType::Merge => "application/merge-patch+json",
            PatchType::StrategicMerge => "application/strategic-merge-patch+json",
            PatchType::Apply => "application/apply-patch+yaml",
        }
    }
}

/// Applies a patch body to `original` for an object of kind `kind` (e.g. "Pod", "Deployment", or
/// a custom kind with its schema; the type selects how lists merge). For [`PatchType::Apply`], `field_manager` names
/// the manager and `force` is the `force` query parameter; `original` may be `null` to create an
/// object by applying it.
pub fn apply<'k>(
    kind: impl Into<ObjectType<'k>>,
    original: &Value,
    body: &[u8],
    patch_type: PatchType,
    field_manager: &str,
    force: bool,
) -> Result<Value, PatchError> {
    apply_at(
        kind,
        original,
        body,
        patch_type,
        field_manager,
        force,
        Utc::now(),
    )
}

/// [`apply`] with the time recorded in `managedFields` passed in, so callers and tests control it.
pub fn apply_at<'k>(
    kind: impl Into<ObjectType<'k>>,
    original: &Value,
    body: &[u8],
    patch_type: PatchType,
    field_manager: &str,
    force: bool,
    now: DateTime<Utc>,
) -> Result<Value, PatchError> {
    let kind = kind.into();
    match patch_type {
        PatchType::Json => json_patch(original, parse_json(body)?),
        PatchType::Merge => {
            let patch = parse_json(body)?;
            if !patch.is_object() {
                // RFC 7386 would replace the whole document, which can never be a valid object.
                return Err(malformed("a merge patch must be a JSON object"));
            }
            let mut target = original.clone();
            merge_patch(&mut target, &patch);
            Ok(target)
        }
        PatchType::StrategicMerge => strategic_merge(kind, original, &parse_json(body)?),
        PatchType::Apply => {
            let config = parse_yaml(body)?;
            server_side_apply(kind, original, config, field_manager, force, now)
        }
    }
}

fn parse_json(body: &[u8]) -> Result<Value, PatchError> {
    serde_json::from_slice(body).map_err(|e| malformed(format!("invalid JSON: {e}")))
}

/// Parses an apply body. YAML is a superset of JSON, so this reads both.
fn parse_yaml(body: &[u8]) -> Result<Value, PatchError> {
    serde_saphyr::from_slice(body)
        .map_err(|e| malformed(format!("invalid YAML: {}", e.without_snippet())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn content_types() {
        assert_eq!(
            PatchType::from_content_type("application/merge-patch+json; charset=utf-8"),
            Some(PatchType::Merge)
        );
        assert_eq!(
            PatchType::from_content_type("application/json-patch+json"),
            Some(PatchType::Json)
        );
        assert_eq!(
            PatchType::from_content_type("Application/Strategic-Merge-Patch+JSON"),
            Some(PatchType::StrategicMerge)
        );
        assert_eq!(
            PatchType::from_content_type("application/apply-patch+yaml;charset=utf-8"),
            Some(PatchType::Apply)
        );
        assert_eq!(PatchType::from_content_type("application/json"), None);
        assert_eq!(PatchType::from_content_type(""), None);
        for t in [
            PatchType::Json,
            PatchType::Merge,
            PatchType::StrategicMerge,
            PatchType::Apply,
        ] {
            assert_eq!(PatchType::from_content_type(t.content_type()), Some(t));
        }
    }

    #[test]
    fn apply_bodies_are_yaml_or_json() {
        let yaml = b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: {a: \"1\"}\nspec:\n  priority: 7\n  overhead: {cpu: 0.5}\n";
        let json = br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"a":"1"}},"spec":{"priority":7,"overhead":{"cpu":0.5}}}"#;
        assert_eq!(
            parse_yaml(yaml).expect("YAML"),
            parse_yaml(json).expect("JSON")
        );
        let err = parse_yaml(b"kind: Pod\nmetadata:\n  name: [p\n").expect_err("unclosed");
        let message = err.to_string();
        assert!(
            message.starts_with("malformed patch: invalid YAML: "),
            "{message}"
        );
        assert!(message.contains("line 3"), "{message}");
        assert!(
            parse_yaml(b"a: 1\n---\nb: 2\n").is_err(),
            "one document only"
        );
    }

    #[test]
    fn malformed_bodies() {
        let pod = json!({"metadata":{"name":"p"}});
        for (body, patch_type) in [
            (&b"{not json"[..], PatchType::Merge),
            (&b"[1]"[..], PatchType::Merge),
            (&b"{\"op\":\"add\"}"[..], PatchType::Json),
            (&b""[..], PatchType::Json),
            (&b"{\"spec\":"[..], PatchType::StrategicMerge),
            (&b"\"x\""[..], PatchType::StrategicMerge),
            (&b"a: [b"[..], PatchType::Apply),
            (&b"- 1"[..], PatchType::Apply),
            (&b"kind: Pod\nmetadata: {name: p}"[..], PatchType::Apply),
            (&b"apiVersion: v1\nkind: Node\n"[..], PatchType::Apply),
        ] {
            let err = apply("Pod", &pod, body, patch_type, "m", false).unwrap_err();
            assert!(
                matches!(err, PatchError::Malformed { .. }),
                "{patch_type:?} {:?}: {err:?}",
                String::from_utf8_lossy(body)
            );
            assert_eq!(err.http_code(), 400);
        }
        // Directives of the wrong shape are malformed too.
        for patch in [
            json!({"metadata":{"$retainKeys":"x"}}),
            json!({"metadata":{"$patch":"explode"}}),
            json!({"metadata":{"$setElementOrder/finalizers":"x"}}),
            json!({"metadata":{"$deleteFromPrimitiveList/finalizers":"a"}}),
            json!({"$patch":"delete"}),
        ] {
            let err = strategic_merge("Pod", &pod, &patch).unwrap_err();
            assert!(
                matches!(err, PatchError::Malformed { .. }),
                "{patch}: {err:?}"
            );
        }
    }
}
