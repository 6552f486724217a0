//! [`ApiError`]: every way a request can fail, and its Kubernetes `Status` form.

use crate::validation::Cause;
use api::ResourceInfo;
use serde_json::{json, Value};

/// A failed request. Each variant maps to one HTTP code and `Status.reason`.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiError {
    #[error("{message}")]
    NotFound {
        message: String,
        name: String,
        group: String,
        kind: String,
    },
    #[error("{message}")]
    AlreadyExists {
        message: String,
        name: String,
        group: String,
        kind: String,
    },
    #[error("{message}")]
    Conflict {
        message: String,
        name: String,
        group: String,
        kind: String,
    },
    /// A server-side apply's conflicts: details carry one cause per contested field.
    #[error("{message}")]
    ApplyConflict { message: String, causes: Vec<Cause> },
    #[error("{message}")]
    Invalid {
        message: String,
        name: String,
        group: String,
        kind: String,
        causes: Vec<Cause>,
    },
    #[error("{message}")]
    BadRequest { message: String },
    #[error("{message}")]
    Gone { message: String },
    #[error("{message}")]
    TooLarge { message: String },
    #[error("{message}")]
    UnsupportedMediaType { message: String },
    #[error("{message}")]
    MethodNotAllowed { message: String },
    #[error("{message}")]
    NotAcceptable { message: String },
    #[error("{message}")]
    Forbidden {
        message: String,
        name: String,
        group: String,
        kind: String,
    },
    #[error("{message}")]
    Unauthorized { message: String },
    #[error("{message}")]
    Timeout { message: String },
    #[error("{message}")]
    Unavailable { message: String },
    #[error("{message}")]
    Internal { message: String },
}

impl ApiError {
    pub fn not_found(resource: &ResourceInfo, name: &str) -> ApiError {
        ApiError::NotFound {
            message: format!("{} \"{}\" not found", qualified(resource), name),
            name: name.to_string(),
            group: resource.group.to_string(),
            kind: resource.plural.to_string(),
        }
    }

    pub fn already_exists(resource: &ResourceInfo, name: &str) -> ApiError {
        ApiError::AlreadyExists {
            message: format!("{} \"{}\" already exists", qualified(resource), name),
            name: name.to_string(),
            group: resource.group.to_string(),
            kind: resource.plural.to_string(),
        }
    }

    pub fn conflict(resource: &ResourceInfo, name: &str, why: &str) -> ApiError {
        ApiError::Conflict {
            message: format!(
                "Operation cannot be fulfilled on {} \"{}\": {}",
                qualified(resource),
                name,
                why
            ),
            name: name.to_string(),
            group: resource.group.to_string(),
            kind: resource.plural.to_string(),
        }
    }

    /// The optimistic-concurrency conflict, in Kubernetes' words.
    pub fn stale(resource: &ResourceInfo, name: &str) -> ApiError {
        ApiError::conflict(
            resource,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    pub fn invalid(resource: &ResourceInfo, name: &str, causes: Vec<Cause>) -> ApiError {
        let details: Vec<String> = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        let joined = if details.len() == 1 {
            details[0].clone()
        } else {
            format!("[{}]", details.join(", "))
        };
        // Kubernetes names the kind with its group (`Deployment.apps`, `Widget.example.com`).
        let qualified = if resource.group.is_empty() {
            resource.kind.to_string()
        } else {
            format!("{}.{}", resource.kind, resource.group)
        };
        ApiError::Invalid {
            message: format!("{qualified} \"{name}\" is invalid: {joined}"),
            name: name.to_string(),
            group: resource.group.to_string(),
            kind: resource.kind.to_string(),
            causes,
        }
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::BadRequest {
            message: message.into(),
        }
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::Internal {
            message: message.into(),
        }
    }

    pub fn forbidden(resource: &ResourceInfo, name: &str, why: &str) -> ApiError {
        ApiError::Forbidden {
            message: format!("{} \"{}\" is forbidden: {}", qualified(resource), name, why),
            name: name.to_string(),
            group: resource.group.to_string(),
            kind: resource.plural.to_string(),
        }
    }

    pub fn code(&self) -> u16 {
        match self {
            ApiError::NotFound { .. } => 404,
            ApiError::AlreadyExists { .. }
            | ApiError::Conflict { .. }
            | ApiError::ApplyConflict { .. } => 409,
            ApiError::Invalid { .. } => 422,
            ApiError::BadRequest { .. } => 400,
            ApiError::Gone { .. } => 410,
            ApiError::TooLarge { .. } => 413,
            ApiError::UnsupportedMediaType { .. } => 415,
            ApiError::MethodNotAllowed { .. } => 405,
            ApiError::NotAcceptable { .. } => 406,
            ApiError::Forbidden { .. } => 403,
            ApiError::Unauthorized { .. } => 401,
            ApiError::Timeout { .. } => 504,
            ApiError::Unavailable { .. } => 503,
            ApiError::Internal { .. } => 500,
        }
    }

    pub fn reason(&self) -> &'static str {
        match self {
            ApiError::NotFound { .. } => "NotFound",
            ApiError::AlreadyExists { .. } => "AlreadyExists",
            ApiError::Conflict { .. } | ApiError::ApplyConflict { .. } => "Conflict",
            ApiError::Invalid { .. } => "Invalid",
            ApiError::BadRequest { .. } => "BadRequest",
            ApiError::Gone { .. } => "Expired",
            ApiError::TooLarge { .. } => "RequestEntityTooLarge",
            ApiError::UnsupportedMediaType { .. } => "UnsupportedMediaType",
            ApiError::MethodNotAllowed { .. } => "MethodNotAllowed",
            ApiError::NotAcceptable { .. } => "NotAcceptable",
            ApiError::Forbidden { .. } => "Forbidden",
            ApiError::Unauthorized { .. } => "Unauthorized",
            ApiError::Timeout { .. } => "Timeout",
            ApiError::Unavailable { .. } => "ServiceUnavailable",
            ApiError::Internal { .. } => "InternalError",
        }
    }

    /// The `Status` object clients parse.
    pub fn status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.to_string(),
            "reason": self.reason(),
            "code": self.code(),
        });
        let details = match self {
            ApiError::NotFound {
                name, group, kind, ..
            }
            | ApiError::AlreadyExists {
                name, group, kind, ..
            }
            | ApiError::Conflict {
                name, group, kind, ..
            }
            | ApiError::Forbidden {
                name, group, kind, ..
            } => Some(details(name, group, kind, &[])),
            ApiError::Invalid {
                name,
                group,
                kind,
                causes,
                ..
            } => Some(details(name, group, kind, causes)),
            ApiError::ApplyConflict { causes, .. } => Some(json!({
                "causes": causes
                    .iter()
                    .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                    .collect::<Vec<_>>()
            })),
            _ => None,
        };
        if let Some(details) = details {
            status["details"] = details;
        }
        status
    }
}

fn details(name: &str, group: &str, kind: &str, causes: &[Cause]) -> Value {
    let mut d = json!({ "name": name, "kind": kind });
    if !group.is_empty() {
        d["group"] = json!(group);
    }
    if !causes.is_empty() {
        d["causes"] = causes
            .iter()
            .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
            .collect();
    }
    d
}

/// `pods` or `deployments.apps`, as Kubernetes names a resource in messages.
pub fn qualified(resource: &ResourceInfo) -> String {
    if resource.group.is_empty() {
        resource.plural.to_string()
    } else {
        format!("{}.{}", resource.plural, resource.group)
    }
}

impl From<store::client::ClientError> for ApiError {
    fn from(e: store::client::ClientError) -> Self {
        use store::client::ClientError;
        use store::types::StoreError;
        match e {
            ClientError::Store(StoreError::Compacted { .. }) => ApiError::Gone {
                message: "The resourceVersion for the provided list is too old.".into(),
            },
            ClientError::Store(StoreError::TooLarge { .. }) => ApiError::TooLarge {
                message: "etcdserver: request is too large".into(),
            },
            ClientError::Ambiguous => ApiError::Timeout {
                message:
                    "The request timed out; it may or may not have been applied. Retry with care."
                        .into(),
            },
            other => ApiError::Unavailable {
                message: format!("storage unavailable: {other}"),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_look_like_kubernetes() {
        let pods = api::resources::pods();
        let s = ApiError::not_found(pods, "x").status();
        assert_eq!(s["message"], "pods \"x\" not found");
        assert_eq!(s["code"], 404);
        assert_eq!(s["details"]["kind"], "pods");
        let cause = Cause {
            reason: "FieldValueRequired".into(),
            message: "Required value".into(),
            field: "spec.containers[0].image".into(),
        };
        let s = ApiError::invalid(pods, "x", vec![cause]).status();
        assert_eq!(
            s["message"],
            "Pod \"x\" is invalid: spec.containers[0].image: Required value"
        );
        assert_eq!(s["code"], 422);
        assert_eq!(
            s["details"]["causes"][0]["field"],
            "spec.containers[0].image"
        );
        let deploy = api::resources::find("apps", "v1", "deployments").expect("deployments");
        assert_eq!(
            ApiError::already_exists(deploy, "d").to_string(),
            "deployments.apps \"d\" already exists"
        );
    }
}
