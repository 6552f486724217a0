//! [`PatchError`]: why a patch body could not be read or applied, and the HTTP status each cause
//! gets.

/// Why a patch could not be applied. [`PatchError::http_code`] gives the status Kubernetes answers.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    /// The body is not valid JSON/YAML, or has the wrong shape (a merge patch that isn't an
    /// object, a JSON patch that isn't an array, a directive with a value of the wrong type).
    #[error("malformed patch: {reason}")]
    Malformed { reason: String },
    /// A JSON patch operation lacks a member it needs or names an unknown `op`.
    #[error("json patch operation {index} is invalid: {reason}")]
    InvalidOperation { index: usize, reason: String },
    /// A JSON patch operation that does not apply to this object (a missing path, a failed
    /// `test`), in kube-apiserver's words.
    #[error("{message}")]
    JsonPatch { message: String },
    /// A strategic merge patch element of a list that merges by `key` doesn't carry that key.
    #[error("strategic merge patch: an element of {path} has no merge key {key:?}")]
    MissingMergeKey { path: String, key: String },
    /// A strategic merge patch value whose type the field's merge strategy can't use, e.g. a
    /// primitive in a list that merges maps by key.
    #[error("strategic merge patch: {path}: {reason}")]
    TypeMismatch { path: String, reason: String },
    /// A server-side apply would change fields other managers own (and `force` is not set).
    #[error("{message}")]
    Conflict {
        message: String,
        conflicts: Vec<crate::field_manager::Conflict>,
    },
}

impl PatchError {
    /// The HTTP status the API server answers with: 400 for a body it can't read, 422 for a
    /// readable patch that can't be applied to this object (as Kubernetes does for JSON patch).
    pub fn http_code(&self) -> u16 {
        match self {
            PatchError::Malformed { .. } => 400,
            PatchError::Conflict { .. } => 409,
            PatchError::InvalidOperation { .. }
            | PatchError::JsonPatch { .. }
            | PatchError::MissingMergeKey { .. }
            | PatchError::TypeMismatch { .. } => 422,
        }
    }
}

pub(super) fn malformed(reason: impl Into<String>) -> PatchError {
    PatchError::Malformed {
        reason: reason.into(),
    }
}
