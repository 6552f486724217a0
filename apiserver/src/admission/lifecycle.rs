//! NamespaceLifecycle: new content only goes into namespaces that exist and are not being
//! deleted, and the namespaces every cluster relies on cannot be deleted.

use super::policy::NamespaceFacts;
use crate::errors::ApiError;
use api::ResourceInfo;

/// The namespaces kube-apiserver creates at start-up and never lets go.
pub const SYSTEM_NAMESPACES: &[&str] =
    &["default", "kube-system", "kube-public", "kube-node-lease"];

/// A create of `name` (a `resource`) in namespace `namespace`, whose object is `existing`.
/// Events may still be written into a terminating namespace (they describe its deletion).
pub fn check_create(
    resource: &ResourceInfo,
    name: &str,
    namespace: &str,
    existing: Option<&NamespaceFacts>,
) -> Result<(), ApiError> {
    match existing {
        None => Err(ApiError::NotFound {
            message: format!("namespaces \"{namespace}\" not found"),
            name: namespace.to_string(),
            group: String::new(),
            kind: "namespaces".into(),
        }),
        Some(ns) if resource.kind != "Event" && ns.terminating => {
            Err(ApiError::forbidden(
                resource,
                name,
                &format!(
                    "unable to create new content in namespace {namespace} because it is being terminated"
                ),
            ))
        }
        Some(_) => Ok(()),
    }
}

/// A delete of `name`: the system namespaces stay.
pub fn check_delete(resource: &ResourceInfo, name: &str) -> Result<(), ApiError> {
    if resource.group.is_empty()
        && resource.kind == "Namespace"
        && SYSTEM_NAMESPACES.contains(&name)
    {
        return Err(ApiError::forbidden(
            resource,
            name,
            "this namespace may not be deleted",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn missing_namespaces_are_not_found() {
        let err = check_create(api::resources::pods(), "p", "nope", None).expect_err("missing");
        assert_eq!(err.code(), 404);
        assert_eq!(err.to_string(), "namespaces \"nope\" not found");
    }

    #[test]
    fn terminating_namespaces_take_only_events() {
        let ns = NamespaceFacts::from_value(
            &json!({"metadata": {"name": "dev", "deletionTimestamp": "2026-01-01T00:00:00Z"}}),
        );
        let err =
            check_create(api::resources::pods(), "p", "dev", Some(&ns)).expect_err("terminating");
        assert_eq!(err.code(), 403);
        assert_eq!(
            err.to_string(),
            "pods \"p\" is forbidden: unable to create new content in namespace dev because it is being terminated"
        );
        let events = api::resources::find("", "v1", "events").expect("events");
        assert!(check_create(events, "e", "dev", Some(&ns)).is_ok());
        let active = NamespaceFacts::from_value(&json!({"metadata": {"name": "dev"}}));
        assert!(check_create(api::resources::pods(), "p", "dev", Some(&active)).is_ok());
    }

    #[test]
    fn system_namespaces_cannot_be_deleted() {
        let namespaces = api::resources::find("", "v1", "namespaces").expect("namespaces");
        for name in SYSTEM_NAMESPACES {
            let err = check_delete(namespaces, name).expect_err(name);
            assert_eq!(err.code(), 403);
            assert_eq!(
                err.to_string(),
                format!("namespaces \"{name}\" is forbidden: this namespace may not be deleted")
            );
        }
        assert!(check_delete(namespaces, "dev").is_ok());
        assert!(check_delete(api::resources::pods(), "default").is_ok());
    }
}
