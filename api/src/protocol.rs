//! The apiserver ⇄ component protocol: what kemu's own processes (scheduler, node hosts,
//! controllers) send to an API server's QUIC front, and what comes back.
//!
//! Each call is one QUIC stream carrying bincode frames (see `transport::frame`): the client sends
//! one [`ApiRequest`]; the server answers with one [`ApiResponse`], or, for a watch, with a stream
//! of [`ApiResponse::Watch`] frames that may end with an [`ApiResponse::Error`]. Objects travel as
//! their JSON bytes, exactly as the HTTP API would show them, so the API server can forward the
//! pre-serialized JSON it caches and components decode with serde into k8s-openapi types.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::resources::ResourceInfo;

/// Content-Type of a JSON merge patch (RFC 7386).
pub const MERGE_PATCH: &str = "application/merge-patch+json";
/// Content-Type of a JSON patch (RFC 6902).
pub const JSON_PATCH: &str = "application/json-patch+json";
/// Content-Type of a Kubernetes strategic merge patch.
pub const STRATEGIC_MERGE_PATCH: &str = "application/strategic-merge-patch+json";
/// Content-Type of a server-side apply patch.
pub const APPLY_PATCH: &str = "application/apply-patch+yaml";

/// Names one served resource on the wire (the URL's view: group, version, plural).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ResourceRef {
    /// "" for the core group.
    pub group: String,
    pub version: String,
    pub plural: String,
}

impl ResourceRef {
    pub fn from_info(info: &ResourceInfo) -> ResourceRef {
        ResourceRef {
            group: info.group.to_string(),
            version: info.version.to_string(),
            plural: info.plural.to_string(),
        }
    }

    /// The served resource this names, if any.
    pub fn info(&self) -> Option<&'static ResourceInfo> {
        crate::resources::find(&self.group, &self.version, &self.plural)
    }
}

impl std::fmt::Display for ResourceRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}/{}", self.version, self.plural)
        } else {
            write!(f, "{}/{}/{}", self.group, self.version, self.plural)
        }
    }
}

/// One call to the API server. `namespace` is `None` for cluster-scoped resources and for lists
/// and watches across all namespaces.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ApiRequest {
    Get {
        resource: ResourceRef,
        namespace: Option<String>,
        name: String,
        /// `status` or `scale`; None for the object itself.
        subresource: Option<String>,
    },
    /// A GET of a path outside the resource table — a read of the custom or external metrics
    /// adapter (`/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/pods/*/m?labelSelector=…`),
    /// query included. Answered with [`ApiResponse::Object`].
    GetPath { path: String },
    /// Answered with [`ApiResponse::List`].
    List {
        resource: ResourceRef,
        namespace: Option<String>,
        label_selector: Option<String>,
        field_selector: Option<String>,
        /// Unset: a consistent read; "0": whatever the server's cache has.
        resource_version: Option<String>,
        /// 0 means no limit.
        limit: usize,
        continue_token: Option<String>,
    },
    /// Answered with a stream of [`ApiResponse::Watch`] frames.
    Watch {
        resource: ResourceRef,
        namespace: Option<String>,
        label_selector: Option<String>,
        field_selector: Option<String>,
        /// Events after this version; unset or "0" starts with the current state as ADDED.
        resource_version: Option<String>,
        /// Replay the current state as ADDED events, then a bookmark marking the end of them
        /// (requires `bookmarks`).
        send_initial_events: bool,
        /// Periodic BOOKMARK frames carrying the newest resourceVersion the watch has covered,
        /// so a re-watch after a broken connection need not re-list.
        bookmarks: bool,
    },
    Create {
        resource: ResourceRef,
        namespace: Option<String>,
        /// The object's JSON.
        object: Bytes,
    },
    /// Full replacement; `subresource` is `Some("status")` for a status update.
    Update {
        resource: ResourceRef,
        namespace: Option<String>,
        name: String,
        subresource: Option<String>,
        object: Bytes,
        /// Answer with the stored object's `PartialObjectMetadata` instead of the whole object
        /// (as for [`ApiRequest::Patch`]).
        metadata_only: bool,
    },
    Patch {
        resource: ResourceRef,
        namespace: Option<String>,
        name: String,
        subresource: Option<String>,
        /// The patch's Content-Type, e.g. [`MERGE_PATCH`].
        patch_type: String,
        patch: Bytes,
        /// Required for server-side apply.
        field_manager: Option<String>,
        /// Server-side apply: take ownership of conflicting fields.
        force: bool,
        /// Answer with the patched object's `PartialObjectMetadata` instead of the whole
        /// object, as kube-apiserver answers a client that accepts `as=PartialObjectMetadata`.
        metadata_only: bool,
    },
    /// Answered with the deleted object (gone) or the object marked for deletion (graceful pod
    /// termination, finalizers).
    Delete {
        resource: ResourceRef,
        namespace: Option<String>,
        name: String,
        /// A JSON `DeleteOptions` body; empty for the defaults.
        options: Bytes,
    },
    /// Deletes everything the selectors match; answered with [`ApiResponse::List`] of what was
    /// deleted or marked for deletion.
    DeleteCollection {
        resource: ResourceRef,
        namespace: Option<String>,
        label_selector: Option<String>,
        field_selector: Option<String>,
        options: Bytes,
    },
    /// Binds a pod to a node (`pods/binding`); answered with a `Status` object.
    Bind {
        namespace: String,
        name: String,
        node: String,
    },
    /// Several creates of one resource in one call, each judged alone exactly as a `Create`
    /// (authorized, admitted, stored at its own revision); answered with
    /// [`ApiResponse::Created`], one outcome per item in order. For objects whose creator does
    /// not need them back — events: a node host sends a kubelet's events a few dozen at a time
    /// instead of one call each. At most [`MAX_CREATE_MANY`] items.
    CreateMany {
        resource: ResourceRef,
        items: Vec<NewObject>,
    },
}

/// The most items one [`ApiRequest::CreateMany`] may carry.
pub const MAX_CREATE_MANY: usize = 1000;

/// One object of an [`ApiRequest::CreateMany`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NewObject {
    pub namespace: Option<String>,
    /// The object's JSON.
    pub object: Bytes,
}

/// What became of one item of an [`ApiRequest::CreateMany`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum CreateOutcome {
    /// Stored at this resourceVersion.
    Created { resource_version: String },
    /// Refused or failed, as a `Create` would have been answered.
    Failed {
        code: u16,
        /// The Kubernetes `Status` object's JSON.
        status: Bytes,
    },
}

impl ApiRequest {
    /// The verb, for logs and metrics (Kubernetes' audit verbs).
    pub fn verb(&self) -> &'static str {
        match self {
            ApiRequest::Get { .. } | ApiRequest::GetPath { .. } => "get",
            ApiRequest::List { .. } => "list",
            ApiRequest::Watch { .. } => "watch",
            ApiRequest::Create { .. } => "create",
            ApiRequest::Update { .. } => "update",
            ApiRequest::Patch { .. } => "patch",
            ApiRequest::Delete { .. } => "delete",
            ApiRequest::DeleteCollection { .. } => "deletecollection",
            ApiRequest::Bind { .. } => "create",
            ApiRequest::CreateMany { .. } => "create",
        }
    }
}

/// Everything the API server sends back; one enum so one handler type serves every call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ApiResponse {
    /// One object's JSON.
    Object(Bytes),
    List {
        /// The store revision the list reflects; watch from it to follow the list.
        resource_version: String,
        /// Set when `limit` cut the list short: pass it back to get the next page.
        continue_token: Option<String>,
        /// Each item's JSON.
        items: Vec<Bytes>,
    },
    /// One event of a watch stream.
    Watch(WatchFrame),
    /// The call failed; on a watch stream, the last frame.
    Error {
        /// The HTTP status code the HTTP API would have answered.
        code: u16,
        /// The Kubernetes `Status` object's JSON.
        status: Bytes,
    },
    /// The answer to [`ApiRequest::CreateMany`]: one outcome per item, in order.
    Created(Vec<CreateOutcome>),
}

/// One watch event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchFrame {
    pub kind: WatchEventKind,
    /// The object's JSON; for a deletion, its last state. For a bookmark, a minimal object of
    /// the resource's kind whose metadata carries only the resourceVersion (and the
    /// `k8s.io/initial-events-end` annotation after the initial events).
    pub object: Bytes,
    /// The object's resourceVersion (a bookmark's: the version the watch has covered).
    pub resource_version: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum WatchEventKind {
    Added,
    Modified,
    Deleted,
    Bookmark,
}

impl WatchEventKind {
    /// Kubernetes' name for the event type.
    pub fn as_str(self) -> &'static str {
        match self {
            WatchEventKind::Added => "ADDED",
            WatchEventKind::Modified => "MODIFIED",
            WatchEventKind::Deleted => "DELETED",
            WatchEventKind::Bookmark => "BOOKMARK",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip<T: Serialize + serde::de::DeserializeOwned>(value: &T) -> T {
        let frame = transport::frame::encode(value).expect("encodes");
        transport::frame::decode(&frame).expect("decodes")
    }

    #[test]
    fn requests_and_responses_survive_bincode_frames() {
        let pods = ResourceRef::from_info(crate::resources::pods());
        assert_eq!(pods.info(), Some(crate::resources::pods()));
        assert_eq!(pods.to_string(), "v1/pods");
        let request = ApiRequest::Watch {
            resource: pods.clone(),
            namespace: None,
            label_selector: None,
            field_selector: Some("spec.nodeName=n1".into()),
            resource_version: Some("42".into()),
            send_initial_events: false,
            bookmarks: true,
        };
        assert_eq!(round_trip(&request), request);
        let patch = ApiRequest::Patch {
            resource: pods,
            namespace: Some("ns".into()),
            name: "a".into(),
            subresource: Some("status".into()),
            patch_type: MERGE_PATCH.into(),
            patch: Bytes::from_static(b"{\"status\":{}}"),
            field_manager: None,
            force: false,
            metadata_only: true,
        };
        assert_eq!(round_trip(&patch), patch);
        let update = ApiRequest::Update {
            resource: ResourceRef {
                group: "coordination.k8s.io".into(),
                version: "v1".into(),
                plural: "leases".into(),
            },
            namespace: Some("kube-node-lease".into()),
            name: "node-1".into(),
            subresource: None,
            object: Bytes::from_static(b"{\"spec\":{}}"),
            metadata_only: true,
        };
        assert_eq!(round_trip(&update), update);
        let frame = ApiResponse::Watch(WatchFrame {
            kind: WatchEventKind::Deleted,
            object: Bytes::from_static(b"{}"),
            resource_version: 7,
        });
        assert_eq!(round_trip(&frame), frame);
        let list = ApiResponse::List {
            resource_version: "9".into(),
            continue_token: None,
            items: vec![Bytes::from_static(b"{\"a\":1}")],
        };
        assert_eq!(round_trip(&list), list);
        let many = ApiRequest::CreateMany {
            resource: ResourceRef::from_info(crate::resources::find("", "v1", "events").unwrap()),
            items: vec![NewObject {
                namespace: Some("ns".into()),
                object: Bytes::from_static(b"{}"),
            }],
        };
        assert_eq!(round_trip(&many), many);
        let created = ApiResponse::Created(vec![
            CreateOutcome::Created {
                resource_version: "12".into(),
            },
            CreateOutcome::Failed {
                code: 409,
                status: Bytes::from_static(b"{}"),
            },
        ]);
        assert_eq!(round_trip(&created), created);
    }
}
