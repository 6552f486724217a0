//! RBAC: Roles, ClusterRoles and their bindings, evaluated as kube-apiserver's RBAC
//! authorizer does.
//!
//! [`RbacIndex`] is the pure part: built from the four kinds of objects, it answers whether a
//! user may do something. Bindings are indexed by subject (user and group name, service
//! accounts as their user names) and each role's rules are parsed once, so a decision costs a
//! few hash lookups and a scan of the rules that apply to the asker. ClusterRoles with an
//! `aggregationRule` get the rules of every ClusterRole their selectors match, as the
//! aggregation controller would write them.
//!
//! [`RbacAuthorizer`] is the driver: it watches the four resources in the API server's watch
//! cache and swaps in a new index after each change, so requests never read the store.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use api::selectors::LabelSelector;
use parking_lot::RwLock;
use serde_json::Value;
use tracing::{debug, warn};

use super::{Attributes, Target};
use crate::authn::UserInfo;
use crate::watch_cache::{Filter, WatchCache};

/// `*` in verbs, apiGroups, resources and nonResourceURLs.
const ALL: &str = "*";

/// One parsed `PolicyRule`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyRule {
    pub verbs: Vec<String>,
    pub api_groups: Vec<String>,
    pub resources: Vec<String>,
    pub resource_names: Vec<String>,
    pub non_resource_urls: Vec<String>,
}

pub(crate) fn strings(value: &Value, field: &str) -> Vec<String> {
    value
        .get(field)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

impl PolicyRule {
    pub fn from_json(rule: &Value) -> PolicyRule {
        PolicyRule {
            verbs: strings(rule, "verbs"),
            api_groups: strings(rule, "apiGroups"),
            resources: strings(rule, "resources"),
            resource_names: strings(rule, "resourceNames"),
            non_resource_urls: strings(rule, "nonResourceURLs"),
        }
    }

    /// Whether this rule allows the request (Kubernetes' `RuleAllows`).
    pub fn allows(&self, attributes: &Attributes<'_>) -> bool {
        if !self.verbs.iter().any(|v| v == ALL || v == attributes.verb) {
            return false;
        }
        match &attributes.target {
            Target::Resource(r) => {
                self.api_groups.iter().any(|g| g == ALL || g == r.group)
                    && self.resource_matches(r.resource, r.subresource)
                    && (self.resource_names.is_empty()
                        || (!r.name.is_empty() && self.resource_names.iter().any(|n| n == r.name)))
            }
            Target::NonResource { path } => self.non_resource_urls.iter().any(|url| {
                url == ALL
                    || url == path
                    || url
                        .strip_suffix('*')
                        .is_some_and(|prefix| path.starts_with(prefix))
            }),
        }
    }

    /// `*`, the exact `resource` or `resource/subresource`, or `*/subresource`.
    fn resource_matches(&self, resource: &str, subresource: &str) -> bool {
        self.resources.iter().any(|rule| {
            if rule == ALL {
                return true;
            }
            if subresource.is_empty() {
                return rule == resource;
            }
            match rule.split_once('/') {
                Some((r, s)) => (r == resource || r == ALL) && s == subresource,
                None => false,
            }
        })
    }
}

/// The rules granted to subjects in one scope (the cluster, or one namespace).
#[derive(Debug, Default)]
struct Grants {
    users: HashMap<String, Vec<Arc<[PolicyRule]>>>,
    groups: HashMap<String, Vec<Arc<[PolicyRule]>>>,
}

impl Grants {
    fn add(&mut self, subject: &Value, binding_namespace: &str, rules: &Arc<[PolicyRule]>) {
        let name = subject.get("name").and_then(Value::as_str).unwrap_or("");
        if name.is_empty() {
            return;
        }
        match subject.get("kind").and_then(Value::as_str) {
            Some("User") => self
                .users
                .entry(name.to_string())
                .or_default()
                .push(rules.clone()),
            Some("Group") => self
                .groups
                .entry(name.to_string())
                .or_default()
                .push(rules.clone()),
            Some("ServiceAccount") => {
                let namespace = subject
                    .get("namespace")
                    .and_then(Value::as_str)
                    .filter(|ns| !ns.is_empty())
                    .unwrap_or(binding_namespace);
                self.users
                    .entry(format!("system:serviceaccount:{namespace}:{name}"))
                    .or_default()
                    .push(rules.clone());
            }
            _ => {}
        }
    }

    fn allows(&self, attributes: &Attributes<'_>) -> bool {
        let user = attributes.user;
        let matches = |rules: Option<&Vec<Arc<[PolicyRule]>>>| {
            rules.is_some_and(|sets| {
                sets.iter()
                    .flat_map(|s| s.iter())
                    .any(|r| r.allows(attributes))
            })
        };
        matches(self.users.get(&user.name))
            || user.groups.iter().any(|g| matches(self.groups.get(g)))
    }
}

fn object_name(o: &Value) -> &str {
    o.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The rules of every ClusterRole with an `aggregationRule`, by name: the rules of the other
/// ClusterRoles its selectors match, in the order of their names, each rule once — what
/// Kubernetes' clusterrole-aggregation controller writes into it.
pub fn aggregate(cluster_roles: &[Value]) -> HashMap<String, Vec<Value>> {
    let mut sorted: Vec<&Value> = cluster_roles.iter().collect();
    sorted.sort_by(|a, b| object_name(a).cmp(object_name(b)));
    let mut out = HashMap::new();
    for role in cluster_roles {
        let Some(selectors) = role
            .pointer("/aggregationRule/clusterRoleSelectors")
            .and_then(Value::as_array)
        else {
            continue;
        };
        let selectors: Vec<LabelSelector> = selectors
            .iter()
            .filter_map(|s| LabelSelector::from_label_selector_json(s).ok())
            .filter(|s| !s.is_empty())
            .collect();
        let mut rules: Vec<Value> = Vec::new();
        for other in &sorted {
            if object_name(other) == object_name(role) {
                continue;
            }
            let labels = other.pointer("/metadata/labels").cloned();
            let probe = serde_json::json!({"metadata": {"labels": labels}});
            if !selectors.iter().any(|s| s.matches_object(&probe)) {
                continue;
            }
            for rule in other
                .get("rules")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if !rules.contains(rule) {
                    rules.push(rule.clone());
                }
            }
        }
        out.insert(object_name(role).to_string(), rules);
    }
    out
}

/// The aggregated ClusterRoles whose stored rules differ from what they aggregate, with the
/// rules to write into them.
pub fn stale_aggregations(cluster_roles: &[Value]) -> Vec<(String, Vec<Value>)> {
    let mut computed = aggregate(cluster_roles);
    let mut stale: Vec<(String, Vec<Value>)> = cluster_roles
        .iter()
        .filter_map(|role| {
            let rules = computed.remove(object_name(role))?;
            let stored = role
                .get("rules")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            (stored != rules).then(|| (object_name(role).to_string(), rules))
        })
        .collect();
    stale.sort_by(|a, b| a.0.cmp(&b.0));
    stale
}

/// Everything RBAC needs for a decision, built from the objects.
#[derive(Debug, Default)]
pub struct RbacIndex {
    cluster: Grants,
    namespaces: HashMap<String, Grants>,
    /// Every ClusterRole's rules (aggregated ones with what they aggregate), by name.
    cluster_roles: HashMap<String, Arc<[PolicyRule]>>,
    /// Every Role's rules, by namespace and name.
    roles: HashMap<(String, String), Arc<[PolicyRule]>>,
    /// Counts for logs and tests.
    pub bindings: usize,
}

impl RbacIndex {
    /// Builds the index. Bindings to roles that do not exist grant nothing (until the role
    /// appears and the index is rebuilt).
    pub fn build(
        roles: &[Value],
        cluster_roles: &[Value],
        role_bindings: &[Value],
        cluster_role_bindings: &[Value],
    ) -> RbacIndex {
        let parse_rules = |role: &Value| -> Vec<PolicyRule> {
            role.get("rules")
                .and_then(Value::as_array)
                .map(|rules| rules.iter().map(PolicyRule::from_json).collect())
                .unwrap_or_default()
        };
        let name_of = |o: &Value| {
            o.pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let namespace_of = |o: &Value| {
            o.pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };

        let mut aggregated = aggregate(cluster_roles);
        let mut cluster_rules: HashMap<String, Arc<[PolicyRule]>> = HashMap::new();
        for role in cluster_roles {
            let name = name_of(role);
            // An aggregated role's rules are what it aggregates (whether or not they have been
            // written back yet), as the aggregation controller keeps them.
            let rules = match aggregated.remove(&name) {
                Some(rules) => rules.iter().map(PolicyRule::from_json).collect(),
                None => parse_rules(role),
            };
            cluster_rules.insert(name, rules.into());
        }
        let role_rules: HashMap<(String, String), Arc<[PolicyRule]>> = roles
            .iter()
            .map(|r| ((namespace_of(r), name_of(r)), parse_rules(r).into()))
            .collect();

        let mut index = RbacIndex::default();
        for binding in cluster_role_bindings {
            if binding.pointer("/roleRef/kind").and_then(Value::as_str) != Some("ClusterRole") {
                continue;
            }
            let role = binding
                .pointer("/roleRef/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            let Some(rules) = cluster_rules.get(role) else {
                continue;
            };
            for subject in binding
                .get("subjects")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                index.cluster.add(subject, "", rules);
            }
            index.bindings += 1;
        }
        for binding in role_bindings {
            let namespace = namespace_of(binding);
            let role = binding
                .pointer("/roleRef/name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let rules = match binding.pointer("/roleRef/kind").and_then(Value::as_str) {
                Some("ClusterRole") => cluster_rules.get(&role),
                Some("Role") => role_rules.get(&(namespace.clone(), role)),
                _ => None,
            };
            let Some(rules) = rules else {
                continue;
            };
            let grants = index.namespaces.entry(namespace.clone()).or_default();
            for subject in binding
                .get("subjects")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                grants.add(subject, &namespace, rules);
            }
            index.bindings += 1;
        }
        index.cluster_roles = cluster_rules;
        index.roles = role_rules;
        index
    }

    /// The rules a role reference names: `kind` `ClusterRole` or `Role` (in `namespace`).
    pub fn role_rules(&self, kind: &str, namespace: &str, name: &str) -> Option<Arc<[PolicyRule]>> {
        match kind {
            "ClusterRole" => self.cluster_roles.get(name).cloned(),
            "Role" => self
                .roles
                .get(&(namespace.to_string(), name.to_string()))
                .cloned(),
            _ => None,
        }
    }

    /// Every rule `user` holds in `namespace` ("" = cluster-wide only): what the cluster
    /// bindings grant, plus what the namespace's own bindings grant there.
    pub fn rules_of(&self, user: &UserInfo, namespace: &str) -> Vec<PolicyRule> {
        let mut held = Vec::new();
        let mut collect = |grants: &Grants| {
            let sets = grants
                .users
                .get(&user.name)
                .into_iter()
                .chain(user.groups.iter().filter_map(|g| grants.groups.get(g)));
            for set in sets.flatten() {
                held.extend(set.iter().cloned());
            }
        };
        collect(&self.cluster);
        if !namespace.is_empty() {
            if let Some(grants) = self.namespaces.get(namespace) {
                collect(grants);
            }
        }
        held
    }

    /// Whether some binding allows the request: cluster-wide ones always, a namespace's own
    /// only for requests in that namespace.
    pub fn allows(&self, attributes: &Attributes<'_>) -> bool {
        if self.cluster.allows(attributes) {
            return true;
        }
        match &attributes.target {
            Target::Resource(r) if !r.namespace.is_empty() => self
                .namespaces
                .get(r.namespace)
                .is_some_and(|grants| grants.allows(attributes)),
            _ => false,
        }
    }
}

/// The RBAC authorizer: the current [`RbacIndex`], kept in step with the watch cache.
pub struct RbacAuthorizer {
    index: RwLock<Arc<RbacIndex>>,
    /// Aggregated ClusterRoles whose stored rules are behind, for [`RbacAuthorizer::next_stale`].
    stale: parking_lot::Mutex<Vec<(String, Vec<Value>)>>,
    stale_changed: tokio::sync::Notify,
}

impl Default for RbacAuthorizer {
    fn default() -> Self {
        RbacAuthorizer {
            index: RwLock::new(Arc::new(RbacIndex::default())),
            stale: parking_lot::Mutex::new(Vec::new()),
            stale_changed: tokio::sync::Notify::new(),
        }
    }
}

/// The RBAC resources, in [`RbacIndex::build`]'s argument order.
const KINDS: [&str; 4] = [
    "roles",
    "clusterroles",
    "rolebindings",
    "clusterrolebindings",
];

impl RbacAuthorizer {
    /// Builds the index from the cache and keeps rebuilding it after every change to the RBAC
    /// objects, for as long as the returned authorizer lives.
    pub fn start(cache: Arc<WatchCache>) -> Arc<RbacAuthorizer> {
        let authorizer = Arc::new(RbacAuthorizer::default());
        authorizer.rebuild(&cache);
        let weak = Arc::downgrade(&authorizer);
        tokio::spawn(async move {
            loop {
                let Some(authorizer) = weak.upgrade() else {
                    return;
                };
                authorizer.follow(&cache).await;
                drop(authorizer);
                // The cache dropped our subscriptions (a re-list): subscribe again.
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        authorizer
    }

    pub fn allows(&self, attributes: &Attributes<'_>) -> bool {
        self.index.read().allows(attributes)
    }

    /// Waits until some aggregated ClusterRoles' stored rules are behind what they aggregate,
    /// and returns them with their rules (the server writes them back).
    pub async fn next_stale(&self) -> Vec<(String, Vec<Value>)> {
        loop {
            let stale = std::mem::take(&mut *self.stale.lock());
            if !stale.is_empty() {
                return stale;
            }
            self.stale_changed.notified().await;
        }
    }

    /// The index now in force.
    pub fn index(&self) -> Arc<RbacIndex> {
        self.index.read().clone()
    }

    fn rebuild(&self, cache: &WatchCache) {
        let mut lists: Vec<Vec<Value>> = Vec::with_capacity(4);
        for plural in KINDS {
            let objects = api::resources::find("rbac.authorization.k8s.io", "v1", plural)
                .and_then(|r| cache.resource(r).map(|c| (r, c)))
                .map(|(r, c)| {
                    c.list(&r.prefix(), &Filter::default(), None, 0)
                        .0
                        .iter()
                        .filter_map(|o| o.value().ok())
                        .collect()
                })
                .unwrap_or_default();
            lists.push(objects);
        }
        let stale = stale_aggregations(&lists[1]);
        if !stale.is_empty() {
            *self.stale.lock() = stale;
            self.stale_changed.notify_one();
        }
        let index = RbacIndex::build(&lists[0], &lists[1], &lists[2], &lists[3]);
        debug!(bindings = index.bindings, "RBAC index rebuilt");
        *self.index.write() = Arc::new(index);
    }

    /// Subscribes to the four resources and rebuilds after each batch of changes; returns when
    /// a subscription ends.
    async fn follow(&self, cache: &WatchCache) {
        let mut subscriptions = Vec::new();
        for plural in KINDS {
            let Some(resource) = api::resources::find("rbac.authorization.k8s.io", "v1", plural)
            else {
                return;
            };
            let Some(resource_cache) = cache.resource(resource) else {
                return;
            };
            match resource_cache.subscribe(
                Filter::default(),
                Some(cache.revision()),
                cache.revision(),
                1024,
            ) {
                Ok(s) => subscriptions.push(s),
                Err(e) => {
                    warn!(error = %e, "cannot watch {plural} for RBAC");
                    return;
                }
            }
        }
        // Anything that changed before the subscriptions were in place.
        self.rebuild(cache);
        let (tx, mut rx) = tokio::sync::mpsc::channel::<bool>(16);
        for mut subscription in subscriptions {
            let tx = tx.clone();
            tokio::spawn(async move {
                while subscription.live.recv().await.is_some() {
                    if tx.send(true).await.is_err() {
                        return;
                    }
                }
                let _ = tx.send(false).await;
            });
        }
        drop(tx);
        while let Some(alive) = rx.recv().await {
            // Coalesce a burst (bootstrap, kubectl apply -f of many objects) into one rebuild.
            let mut ended = !alive;
            while let Ok(more) = rx.try_recv() {
                ended |= !more;
            }
            self.rebuild(cache);
            if ended {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authz::ResourceAttributes;
    use serde_json::json;

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo::new(name, "", groups.iter().map(|g| g.to_string()).collect())
    }

    fn resource<'a>(
        user: &'a UserInfo,
        verb: &'a str,
        group: &'a str,
        resource: &'a str,
        subresource: &'a str,
        namespace: &'a str,
        name: &'a str,
    ) -> Attributes<'a> {
        Attributes {
            user,
            verb,
            target: Target::Resource(ResourceAttributes {
                group,
                resource,
                subresource,
                namespace,
                name,
                ..Default::default()
            }),
        }
    }

    fn rule(value: Value) -> PolicyRule {
        PolicyRule::from_json(&value)
    }

    #[test]
    fn rules_match_verbs_groups_resources_and_names() {
        let alice = user("alice", &[]);
        let r = rule(json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}));
        assert!(r.allows(&resource(&alice, "get", "", "pods", "", "dev", "web")));
        assert!(r.allows(&resource(&alice, "list", "", "pods", "", "dev", "")));
        assert!(!r.allows(&resource(&alice, "create", "", "pods", "", "dev", "")));
        assert!(!r.allows(&resource(&alice, "get", "apps", "pods", "", "dev", "")));
        assert!(!r.allows(&resource(&alice, "get", "", "pods", "status", "dev", "web")));
        assert!(!r.allows(&resource(&alice, "get", "", "nodes", "", "", "n1")));

        let sub =
            rule(json!({"verbs": ["patch"], "apiGroups": [""], "resources": ["pods/status"]}));
        assert!(sub.allows(&resource(
            &alice, "patch", "", "pods", "status", "dev", "web"
        )));
        assert!(!sub.allows(&resource(&alice, "patch", "", "pods", "", "dev", "web")));
        let any_status =
            rule(json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*/status"]}));
        assert!(any_status.allows(&resource(
            &alice,
            "update",
            "apps",
            "deployments",
            "status",
            "d",
            "x"
        )));
        assert!(!any_status.allows(&resource(
            &alice,
            "update",
            "apps",
            "deployments",
            "",
            "d",
            "x"
        )));
        assert!(!any_status.allows(&resource(
            &alice,
            "update",
            "apps",
            "deployments",
            "scale",
            "d",
            "x"
        )));

        let named = rule(
            json!({"verbs": ["get", "update"], "apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["kube-scheduler"]}),
        );
        assert!(named.allows(&resource(
            &alice,
            "get",
            "coordination.k8s.io",
            "leases",
            "",
            "kube-system",
            "kube-scheduler"
        )));
        assert!(!named.allows(&resource(
            &alice,
            "get",
            "coordination.k8s.io",
            "leases",
            "",
            "kube-system",
            "other"
        )));
        // A list has no name, so a rule limited to names never allows it.
        assert!(!named.allows(&resource(
            &alice,
            "get",
            "coordination.k8s.io",
            "leases",
            "",
            "kube-system",
            ""
        )));

        let everything = rule(json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}));
        assert!(everything.allows(&resource(
            &alice,
            "deletecollection",
            "batch",
            "jobs",
            "",
            "x",
            ""
        )));
        assert!(everything.allows(&resource(&alice, "get", "", "pods", "log", "x", "p")));
    }

    #[test]
    fn non_resource_urls_match_exactly_or_by_prefix() {
        let alice = user("alice", &[]);
        let r = rule(json!({"verbs": ["get"], "nonResourceURLs": ["/api", "/api/*", "/version"]}));
        let path = |p: &'static str| Attributes {
            user: &alice,
            verb: "get",
            target: Target::NonResource { path: p },
        };
        assert!(r.allows(&path("/api")));
        assert!(r.allows(&path("/api/v1")));
        assert!(r.allows(&path("/version")));
        assert!(!r.allows(&path("/apis")));
        assert!(!r.allows(&path("/metrics")));
        // A resource rule never allows a path and the other way round.
        assert!(!r.allows(&resource(&alice, "get", "", "api", "", "", "")));
    }

    fn index() -> RbacIndex {
        RbacIndex::build(
            &[
                json!({"metadata": {"name": "pod-writer", "namespace": "dev"},
                     "rules": [{"verbs": ["create", "get"], "apiGroups": [""], "resources": ["pods"]}]}),
            ],
            &[
                json!({"metadata": {"name": "view", "labels": {}},
                       "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"rbac.example/aggregate-to-view": "true"}}]}}),
                json!({"metadata": {"name": "view-pods", "labels": {"rbac.example/aggregate-to-view": "true"}},
                       "rules": [{"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["pods"]}]}),
                json!({"metadata": {"name": "node-reader"},
                       "rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["nodes"]}]}),
            ],
            &[
                json!({"metadata": {"name": "alice-writes", "namespace": "dev"},
                       "roleRef": {"kind": "Role", "name": "pod-writer"},
                       "subjects": [{"kind": "User", "name": "alice"}]}),
                json!({"metadata": {"name": "qa-views", "namespace": "qa"},
                       "roleRef": {"kind": "ClusterRole", "name": "view"},
                       "subjects": [{"kind": "Group", "name": "testers"},
                                    {"kind": "ServiceAccount", "name": "robot"}]}),
                json!({"metadata": {"name": "dangling", "namespace": "dev"},
                       "roleRef": {"kind": "Role", "name": "missing"},
                       "subjects": [{"kind": "User", "name": "bob"}]}),
            ],
            &[json!({"metadata": {"name": "nodes"},
                     "roleRef": {"kind": "ClusterRole", "name": "node-reader"},
                     "subjects": [{"kind": "Group", "name": "system:authenticated"}]})],
        )
    }

    #[test]
    fn bindings_grant_in_their_scope_only() {
        let index = index();
        let alice = user("alice", &[]);
        assert!(index.allows(&resource(&alice, "create", "", "pods", "", "dev", "")));
        assert!(!index.allows(&resource(&alice, "create", "", "pods", "", "prod", "")));
        assert!(!index.allows(&resource(&alice, "delete", "", "pods", "", "dev", "x")));
        // The cluster binding to system:authenticated reaches everyone authenticated.
        assert!(index.allows(&resource(&alice, "list", "", "nodes", "", "", "")));
        let bob = user("bob", &[]);
        assert!(!index.allows(&resource(&bob, "get", "", "pods", "", "dev", "x")));
        // Group subject, through an aggregated ClusterRole bound in one namespace.
        let tester = user("carol", &["testers"]);
        assert!(index.allows(&resource(&tester, "watch", "", "pods", "", "qa", "")));
        assert!(!index.allows(&resource(&tester, "watch", "", "pods", "", "dev", "")));
        assert!(!index.allows(&resource(&tester, "create", "", "pods", "", "qa", "")));
        // Service account subject without a namespace: the binding's.
        let robot = user("system:serviceaccount:qa:robot", &[]);
        assert!(index.allows(&resource(&robot, "get", "", "pods", "", "qa", "p")));
        assert_eq!(index.bindings, 3);
    }

    #[test]
    fn aggregated_roles_are_written_the_rules_they_select_once() {
        let read = json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]});
        let write = json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]});
        let roles = vec![
            json!({"metadata": {"name": "agg"}, "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"to-agg": "true"}}]}}),
            json!({"metadata": {"name": "b-writer", "labels": {"to-agg": "true"}}, "rules": [write.clone(), read.clone()]}),
            json!({"metadata": {"name": "a-reader", "labels": {"to-agg": "true"}}, "rules": [read.clone()]}),
            json!({"metadata": {"name": "other"}, "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}),
        ];
        // By the selected roles' names, each rule once.
        assert_eq!(
            stale_aggregations(&roles),
            vec![("agg".to_string(), vec![read.clone(), write.clone()])]
        );
        let mut written = roles.clone();
        written[0]["rules"] = json!([read, write]);
        assert!(stale_aggregations(&written).is_empty());
    }
}
