//! Authorization: may this user do this?
//!
//! The chain kube-apiserver runs, in its order: members of `system:masters` may do anything
//! (before RBAC, so a broken policy cannot lock the admin out); node hosts go through the
//! [`node`] authorizer; then [`rbac`]. The first allow wins; if none allows, the request gets
//! 403 with Kubernetes' message ([`forbidden`]).

pub mod bootstrap;
pub mod escalation;
pub mod impersonation;
pub mod node;
pub mod rbac;

use std::sync::Arc;

use serde_json::Value;

use crate::authn::{UserInfo, MASTERS, NODES};
use crate::errors::ApiError;
use crate::watch_cache::{Filter, WatchCache};
use node::{NodeDecision, NodeGraph, OWNER_LABEL};
use rbac::RbacAuthorizer;

/// How long a node host's denied request waits for the watch cache to reach the store's
/// revision before the denial stands.
const CATCH_UP: std::time::Duration = std::time::Duration::from_secs(5);

/// What a request wants to do, as authorizers see it.
#[derive(Debug)]
pub struct Attributes<'a> {
    pub user: &'a UserInfo,
    /// Kubernetes' verb: get, list, watch, create, update, patch, delete, deletecollection;
    /// for non-resource paths the lower-case HTTP method.
    pub verb: &'a str,
    pub target: Target<'a>,
}

#[derive(Debug)]
pub enum Target<'a> {
    Resource(ResourceAttributes<'a>),
    NonResource { path: &'a str },
}

/// A resource request's coordinates; "" where a part is absent.
#[derive(Debug, Default)]
pub struct ResourceAttributes<'a> {
    pub group: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
    /// A list's or watch's field selector (the node authorizer scopes pods by node).
    pub field_selector: Option<&'a str>,
    /// A create's object, when the front has it (the node authorizer reads its name).
    pub object: Option<&'a Value>,
}

impl<'a> ResourceAttributes<'a> {
    /// A request on `resource` (no field selector, no object).
    pub fn on(
        resource: &api::ResourceInfo,
        subresource: &'a str,
        namespace: &'a str,
        name: &'a str,
    ) -> ResourceAttributes<'a> {
        ResourceAttributes {
            group: resource.group,
            resource: resource.plural,
            subresource,
            namespace,
            name,
            field_selector: None,
            object: None,
        }
    }
}

/// How requests are authorized.
pub enum Authorizer {
    /// Everything is allowed (`--authorization-mode AlwaysAllow`).
    AlwaysAllow,
    /// `system:masters`, then the node authorizer, then RBAC.
    NodeRbac {
        rbac: Arc<RbacAuthorizer>,
        cache: Arc<WatchCache>,
    },
}

impl Authorizer {
    /// The node authorizer and RBAC over `cache`.
    pub fn node_rbac(cache: Arc<WatchCache>) -> Authorizer {
        Authorizer::NodeRbac {
            rbac: RbacAuthorizer::start(cache.clone()),
            cache,
        }
    }

    /// `Ok` when allowed; else the 403 in Kubernetes' words.
    pub fn check(&self, attributes: &Attributes<'_>) -> Result<(), ApiError> {
        let (rbac, cache) = match self {
            Authorizer::AlwaysAllow => return Ok(()),
            Authorizer::NodeRbac { rbac, cache } => (rbac, cache),
        };
        if attributes.user.in_group(MASTERS) {
            return Ok(());
        }
        let mut reason = None;
        if attributes.user.in_group(NODES) {
            match node::decide(attributes, &CacheGraph(cache)) {
                NodeDecision::Allow => return Ok(()),
                NodeDecision::NoOpinion(why) => reason = Some(why),
            }
        }
        if rbac.allows(attributes) {
            return Ok(());
        }
        Err(forbidden(attributes, reason.as_deref()))
    }

    /// [`Authorizer::check`], made consistent with the store for node hosts: a host that
    /// registered a Node moments ago (through this API server or another) writes its status
    /// and Lease before this API server's watch cache has seen the Node, so a node host's
    /// denial is decided again once the cache has caught up with the store's current
    /// revision. Denials that stand cost one linearizable read.
    pub async fn check_consistent(&self, attributes: &Attributes<'_>) -> Result<(), ApiError> {
        let first = self.check(attributes);
        let Authorizer::NodeRbac { cache, .. } = self else {
            return first;
        };
        if first.is_ok() || !attributes.user.in_group(NODES) {
            return first;
        }
        let Ok(revision) = cache.current_store_revision().await else {
            return first;
        };
        // The cache may have caught up since the first decision: decide again either way.
        if cache.wait_for(revision, CATCH_UP).await.is_err() {
            return first;
        }
        self.check(attributes)
    }

    /// Whether the request would be allowed (SelfSubjectAccessReview).
    pub fn allows(&self, attributes: &Attributes<'_>) -> bool {
        self.check(attributes).is_ok()
    }
}

/// kube-apiserver's 403: `pods "web" is forbidden: User "alice" cannot get resource "pods" in
/// API group "" in the namespace "dev"`, `... at the cluster scope`, or for paths
/// `forbidden: User "alice" cannot get path "/metrics"`; an authorizer's reason follows a colon.
pub fn forbidden(attributes: &Attributes<'_>, reason: Option<&str>) -> ApiError {
    let user = &attributes.user.name;
    let verb = attributes.verb;
    let (mut message, name, group, kind) = match &attributes.target {
        Target::NonResource { path } => (
            format!("forbidden: User {user:?} cannot {verb} path {path:?}"),
            String::new(),
            String::new(),
            String::new(),
        ),
        Target::Resource(r) => {
            let resource = if r.subresource.is_empty() {
                r.resource.to_string()
            } else {
                format!("{}/{}", r.resource, r.subresource)
            };
            let scope = if r.namespace.is_empty() {
                "at the cluster scope".to_string()
            } else {
                format!("in the namespace {:?}", r.namespace)
            };
            let qualified = if r.group.is_empty() {
                r.resource.to_string()
            } else {
                format!("{}.{}", r.resource, r.group)
            };
            let subject = if r.name.is_empty() {
                qualified
            } else {
                format!("{qualified} {:?}", r.name)
            };
            (
                format!(
                    "{subject} is forbidden: User {user:?} cannot {verb} resource {resource:?} in API group {:?} {scope}",
                    r.group
                ),
                r.name.to_string(),
                r.group.to_string(),
                r.resource.to_string(),
            )
        }
    };
    if let Some(reason) = reason.filter(|r| !r.is_empty()) {
        message.push_str(": ");
        message.push_str(reason);
    }
    ApiError::Forbidden {
        message,
        name,
        group,
        kind,
    }
}

/// The node authorizer's view of the watch cache.
struct CacheGraph<'a>(&'a WatchCache);

impl CacheGraph<'_> {
    fn cached(
        &self,
        plural: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Arc<crate::watch_cache::CachedObject>> {
        self.cached_in("", plural, namespace, name)
    }

    fn cached_in(
        &self,
        group: &str,
        plural: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Arc<crate::watch_cache::CachedObject>> {
        let resource = api::resources::find(group, "v1", plural)?;
        self.0
            .resource(resource)?
            .get(&resource.key(namespace, name))
    }
}

impl NodeGraph for CacheGraph<'_> {
    fn node_owner(&self, name: &str) -> Option<Option<String>> {
        self.cached("nodes", None, name)
            .map(|node| node.labels.get(OWNER_LABEL).map(str::to_string))
    }

    fn pod_node(&self, namespace: &str, name: &str) -> Option<String> {
        self.cached("pods", Some(namespace), name)
            .map(|pod| pod.node_name().to_string())
    }

    fn pod_uses(&self, host: &str, namespace: &str, kind: &str, name: &str) -> bool {
        let pods = api::resources::pods();
        let Some(cache) = self.0.resource(pods) else {
            return false;
        };
        let (in_namespace, _) = cache.list(
            &pods.namespace_prefix(Some(namespace)),
            &Filter::default(),
            None,
            0,
        );
        // A pod that refers to the object holds its name as a JSON string (object names need no
        // escaping): only those pods are decoded, so a kubelet's GET of a secret costs a byte
        // search per pod of the namespace, not a JSON decode.
        let quoted = format!("\"{name}\"");
        let mentions = memchr::memmem::Finder::new(quoted.as_bytes());
        in_namespace.iter().any(|pod| {
            let node = pod.node_name();
            !node.is_empty()
                && mentions.find(&pod.json).is_some()
                && self.node_owner(node).flatten().as_deref() == Some(host)
                && pod
                    .value()
                    .is_ok_and(|v| node::pod_references(&v, kind, name))
        })
    }

    fn volume_claim(&self, name: &str) -> Option<(String, String)> {
        let volume = self.cached("persistentvolumes", None, name)?.value().ok()?;
        let reference = volume.pointer("/spec/claimRef")?;
        let field = |f: &str| reference.get(f).and_then(Value::as_str).map(str::to_string);
        Some((field("namespace")?, field("name")?))
    }

    fn attachment_node(&self, name: &str) -> Option<String> {
        let attachment = self
            .cached_in("storage.k8s.io", "volumeattachments", None, name)?
            .value()
            .ok()?;
        attachment
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .map(str::to_string)
    }
}

/// Kubernetes' verb for an HTTP request on a resource.
pub fn resource_verb(method: &str, named: bool, watch: bool) -> &'static str {
    match method {
        "GET" | "HEAD" if watch => "watch",
        "GET" | "HEAD" if named => "get",
        "GET" | "HEAD" => "list",
        "POST" => "create",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" if named => "delete",
        "DELETE" => "deletecollection",
        _ => "unknown",
    }
}

/// Kubernetes' verb for an HTTP request on a non-resource path.
pub fn path_verb(method: &str) -> &'static str {
    match method {
        "GET" | "HEAD" => "get",
        "POST" => "post",
        "PUT" => "put",
        "PATCH" => "patch",
        "DELETE" => "delete",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alice() -> UserInfo {
        UserInfo::new("alice", "", vec![])
    }

    fn message(attributes: &Attributes<'_>, reason: Option<&str>) -> String {
        forbidden(attributes, reason).status()["message"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    #[test]
    fn forbidden_messages_read_like_kubernetes() {
        let user = alice();
        let resource = |verb, group, resource, subresource, namespace, name| Attributes {
            user: &user,
            verb,
            target: Target::Resource(ResourceAttributes {
                group,
                resource,
                subresource,
                namespace,
                name,
                ..Default::default()
            }),
        };
        assert_eq!(
            message(&resource("create", "", "pods", "", "dev", ""), None),
            r#"pods is forbidden: User "alice" cannot create resource "pods" in API group "" in the namespace "dev""#
        );
        assert_eq!(
            message(&resource("get", "", "pods", "", "dev", "web"), None),
            r#"pods "web" is forbidden: User "alice" cannot get resource "pods" in API group "" in the namespace "dev""#
        );
        assert_eq!(
            message(&resource("list", "", "nodes", "", "", ""), None),
            r#"nodes is forbidden: User "alice" cannot list resource "nodes" in API group "" at the cluster scope"#
        );
        assert_eq!(
            message(
                &resource("patch", "", "pods", "status", "dev", "web"),
                Some("no relationship found between node host 'alice' and this object")
            ),
            r#"pods "web" is forbidden: User "alice" cannot patch resource "pods/status" in API group "" in the namespace "dev": no relationship found between node host 'alice' and this object"#
        );
        assert_eq!(
            message(
                &resource("list", "apps", "deployments", "", "dev", ""),
                None
            ),
            r#"deployments.apps is forbidden: User "alice" cannot list resource "deployments" in API group "apps" in the namespace "dev""#
        );
        let path = Attributes {
            user: &user,
            verb: "get",
            target: Target::NonResource { path: "/metrics" },
        };
        assert_eq!(
            message(&path, None),
            r#"forbidden: User "alice" cannot get path "/metrics""#
        );
        let status = forbidden(&resource("get", "", "pods", "", "dev", "web"), None).status();
        assert_eq!(status["code"], 403);
        assert_eq!(status["reason"], "Forbidden");
        assert_eq!(status["details"]["kind"], "pods");
        assert_eq!(status["details"]["name"], "web");
    }

    #[test]
    fn verbs() {
        assert_eq!(resource_verb("GET", true, false), "get");
        assert_eq!(resource_verb("GET", false, false), "list");
        assert_eq!(resource_verb("GET", false, true), "watch");
        assert_eq!(resource_verb("DELETE", false, false), "deletecollection");
        assert_eq!(resource_verb("POST", false, false), "create");
        assert_eq!(path_verb("HEAD"), "get");
    }
}
