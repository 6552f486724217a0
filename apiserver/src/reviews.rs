//! The review resources, answered on the spot and never stored:
//! `SelfSubjectAccessReview` (`kubectl auth can-i`), `SubjectAccessReview` and
//! `LocalSubjectAccessReview` (may *that* user, named in the spec, do this — cluster-wide or in
//! the URL's namespace), and `SelfSubjectReview` (`kubectl auth whoami`).

use serde_json::{json, Value};

use crate::authn::UserInfo;
use crate::authz::{Attributes, Authorizer, ResourceAttributes, Target};
use crate::errors::ApiError;

/// Whether `resource` is one of the reviews, which only `create` and are answered here.
pub fn is_review(resource: &api::ResourceInfo) -> bool {
    matches!(
        (resource.group, resource.plural),
        ("authorization.k8s.io", "selfsubjectaccessreviews")
            | ("authorization.k8s.io", "subjectaccessreviews")
            | ("authorization.k8s.io", "localsubjectaccessreviews")
            | ("authentication.k8s.io", "selfsubjectreviews")
    )
}

/// Answers a review `object` posted by `user` (to `namespace`, for the local review): the
/// object back with its `status` filled in.
pub fn answer(
    resource: &api::ResourceInfo,
    authorizer: &Authorizer,
    user: &UserInfo,
    namespace: Option<&str>,
    object: Value,
) -> Result<Value, ApiError> {
    match resource.plural {
        "selfsubjectaccessreviews" => access_review(authorizer, user, resource.kind, object),
        "subjectaccessreviews" => {
            let subject = spec_subject(resource.kind, &object)?;
            access_review(authorizer, &subject, resource.kind, object)
        }
        "localsubjectaccessreviews" => {
            let namespace = namespace.unwrap_or("");
            let mut object = object;
            local_namespace(&mut object, namespace)?;
            let subject = spec_subject(resource.kind, &object)?;
            access_review(authorizer, &subject, resource.kind, object)
        }
        _ => Ok(subject_review(user, object)),
    }
}

/// The user a (Local)SubjectAccessReview asks about: `spec.user`, `spec.groups`, `spec.uid`
/// exactly as given (no group is added, as in Kubernetes).
fn spec_subject(kind: &str, object: &Value) -> Result<UserInfo, ApiError> {
    let spec = object.get("spec");
    let text = |field: &str| {
        spec.and_then(|s| s.get(field))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let groups = spec
        .map(|s| crate::authz::rbac::strings(s, "groups"))
        .unwrap_or_default();
    let name = text("user");
    if name.is_empty() && groups.is_empty() {
        return Err(invalid(
            kind,
            "spec.user",
            "Invalid value: \"\": at least one of user or group must be specified",
        ));
    }
    Ok(UserInfo {
        name,
        uid: text("uid"),
        groups,
    })
}

/// A LocalSubjectAccessReview asks about its URL's namespace only.
fn local_namespace(object: &mut Value, namespace: &str) -> Result<(), ApiError> {
    if object
        .pointer("/spec/nonResourceAttributes")
        .is_some_and(|v| !v.is_null())
    {
        return Err(invalid(
            "LocalSubjectAccessReview",
            "spec.nonResourceAttributes",
            "Invalid value: \"\": disallowed on this kind of request",
        ));
    }
    let given = object
        .pointer("/spec/resourceAttributes/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !given.is_empty() && given != namespace {
        return Err(ApiError::bad_request(format!(
            "spec.resourceAttributes.namespace must match namespace: {namespace}"
        )));
    }
    if let Some(attributes) = object
        .pointer_mut("/spec/resourceAttributes")
        .and_then(Value::as_object_mut)
    {
        attributes.insert("namespace".into(), json!(namespace));
    }
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.insert("namespace".into(), json!(namespace));
    }
    Ok(())
}

fn invalid(kind: &str, field: &str, message: &str) -> ApiError {
    ApiError::Invalid {
        message: format!("{kind}.authorization.k8s.io \"\" is invalid: {field}: {message}"),
        name: String::new(),
        group: "authorization.k8s.io".into(),
        kind: kind.into(),
        causes: vec![crate::validation::Cause {
            reason: "FieldValueInvalid".into(),
            message: message.into(),
            field: field.into(),
        }],
    }
}

fn access_review(
    authorizer: &Authorizer,
    user: &UserInfo,
    kind: &str,
    mut object: Value,
) -> Result<Value, ApiError> {
    let text = |v: Option<&Value>, field: &str| -> String {
        v.and_then(|v| v.get(field))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let spec = object.get("spec");
    let resource_attributes = spec
        .and_then(|s| s.get("resourceAttributes"))
        .filter(|v| !v.is_null());
    let non_resource = spec
        .and_then(|s| s.get("nonResourceAttributes"))
        .filter(|v| !v.is_null());
    let allowed = match (resource_attributes, non_resource) {
        (Some(_), Some(_)) => {
            return Err(invalid(
                kind,
                "spec.nonResourceAttributes",
                "Invalid value: \"\": cannot be specified in combination with resourceAttributes",
            ))
        }
        (None, None) => {
            return Err(invalid(
                kind,
                "spec.resourceAttributes",
                "Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified",
            ))
        }
        (Some(r), None) => {
            let (verb, group, resource, subresource, namespace, name) = (
                text(Some(r), "verb"),
                text(Some(r), "group"),
                text(Some(r), "resource"),
                text(Some(r), "subresource"),
                text(Some(r), "namespace"),
                text(Some(r), "name"),
            );
            authorizer.allows(&Attributes {
                user,
                verb: &verb,
                target: Target::Resource(ResourceAttributes {
                    group: &group,
                    resource: &resource,
                    subresource: &subresource,
                    namespace: &namespace,
                    name: &name,
                    ..Default::default()
                }),
            })
        }
        (None, Some(p)) => {
            let (verb, path) = (text(Some(p), "verb"), text(Some(p), "path"));
            authorizer.allows(&Attributes {
                user,
                verb: &verb,
                target: Target::NonResource { path: &path },
            })
        }
    };
    object["status"] = if allowed {
        json!({"allowed": true, "reason": "allowed by the kemu authorizer"})
    } else {
        json!({"allowed": false})
    };
    fill_meta(&mut object, "authorization.k8s.io/v1", kind);
    Ok(object)
}

fn subject_review(user: &UserInfo, mut object: Value) -> Value {
    let mut info = json!({"username": user.name, "groups": user.groups});
    if !user.uid.is_empty() {
        info["uid"] = json!(user.uid);
    }
    object["status"] = json!({"userInfo": info});
    fill_meta(&mut object, "authentication.k8s.io/v1", "SelfSubjectReview");
    object
}

fn fill_meta(object: &mut Value, api_version: &str, kind: &str) {
    object["apiVersion"] = json!(api_version);
    object["kind"] = json!(kind);
    if !object.get("metadata").is_some_and(Value::is_object) {
        object["metadata"] = json!({});
    }
    object["metadata"]["creationTimestamp"] = Value::Null;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review(spec: Value) -> Value {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": spec})
    }

    #[test]
    fn access_reviews_answer_and_refuse_bad_specs() {
        let user = UserInfo::new("alice", "", vec!["system:masters".into()]);
        let resource =
            api::resources::find("authorization.k8s.io", "v1", "selfsubjectaccessreviews")
                .expect("served");
        let authorizer = Authorizer::AlwaysAllow;
        let answered = answer(
            resource,
            &authorizer,
            &user,
            None,
            review(json!({"resourceAttributes": {"verb": "create", "resource": "pods", "namespace": "dev"}})),
        )
        .expect("answer");
        assert_eq!(answered["status"]["allowed"], true);
        let both = review(
            json!({"resourceAttributes": {"verb": "get"}, "nonResourceAttributes": {"path": "/api", "verb": "get"}}),
        );
        assert_eq!(
            answer(resource, &authorizer, &user, None, both)
                .map_err(|e| e.code())
                .err(),
            Some(422)
        );
        assert_eq!(
            answer(resource, &authorizer, &user, None, review(json!({})))
                .map_err(|e| e.code())
                .err(),
            Some(422)
        );
    }

    #[test]
    fn subject_access_reviews_ask_about_the_spec_user_and_local_ones_their_namespace() {
        let asker = UserInfo::new("admin", "", vec!["system:masters".into()]);
        let authorizer = Authorizer::AlwaysAllow;
        let sar = api::resources::find("authorization.k8s.io", "v1", "subjectaccessreviews")
            .expect("served");
        let answered = answer(
            sar,
            &authorizer,
            &asker,
            None,
            json!({"spec": {"user": "alice", "resourceAttributes": {"verb": "get", "resource": "pods"}}}),
        )
        .expect("answer");
        assert_eq!(answered["status"]["allowed"], true);
        assert_eq!(answered["kind"], "SubjectAccessReview");
        let nobody = answer(
            sar,
            &authorizer,
            &asker,
            None,
            json!({"spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}}),
        );
        assert_eq!(nobody.map_err(|e| e.code()).err(), Some(422));
        let local = api::resources::find("authorization.k8s.io", "v1", "localsubjectaccessreviews")
            .expect("served");
        let answered = answer(
            local,
            &authorizer,
            &asker,
            Some("dev"),
            json!({"metadata": {}, "spec": {"user": "alice", "resourceAttributes": {"verb": "get", "resource": "pods"}}}),
        )
        .expect("answer");
        assert_eq!(answered["spec"]["resourceAttributes"]["namespace"], "dev");
        assert_eq!(answered["metadata"]["namespace"], "dev");
        let elsewhere = answer(
            local,
            &authorizer,
            &asker,
            Some("dev"),
            json!({"spec": {"user": "alice", "resourceAttributes": {"verb": "get", "resource": "pods", "namespace": "prod"}}}),
        );
        assert_eq!(elsewhere.map_err(|e| e.code()).err(), Some(400));
    }

    #[test]
    fn subject_reviews_name_the_user() {
        let user = UserInfo::new("alice", "u1", vec!["dev".into()]);
        let resource = api::resources::find("authentication.k8s.io", "v1", "selfsubjectreviews")
            .expect("served");
        let answered =
            answer(resource, &Authorizer::AlwaysAllow, &user, None, json!({})).expect("answer");
        assert_eq!(answered["status"]["userInfo"]["username"], "alice");
        assert_eq!(
            answered["status"]["userInfo"]["groups"],
            json!(["dev", "system:authenticated"])
        );
        assert_eq!(answered["kind"], "SelfSubjectReview");
    }
}
