//! The RBAC policy every cluster starts with, created at startup when absent (an existing
//! object of the same name is left as the cluster's admin made it).
//!
//! Kubernetes' defaults, where kemu has the resources: `cluster-admin` (bound to
//! `system:masters`), the user-facing `admin`, `edit` and `view` (aggregated from the
//! `system:aggregate-to-*` roles, as in Kubernetes), `system:basic-user` (self reviews),
//! `system:discovery` and `system:public-info-viewer` (bound to every authenticated user),
//! `system:monitoring` (`/metrics`), `system:auth-delegator` (TokenReview and
//! SubjectAccessReview create, for servers that delegate authentication and authorization to
//! the API server; as in Kubernetes it is bound to nobody by default). And the roles of kemu's own components, matched by the
//! groups of their certificates (`kemu certs`):
//! - `system:kube-scheduler` (group `system:kube-scheduler`): read everything but secrets,
//!   bind pods, write pod status (nominations), delete pods (preemption), events, leases.
//! - `system:kemu-controllers` (group `system:kube-controller-manager`): every verb on every
//!   resource. Kubernetes splits its controllers into one service account each; kemu's run as
//!   one identity whose controllers (namespace deletion, garbage collection, workloads,
//!   endpoints, node lifecycle) between them write every kind there is.
//!
//! Node hosts (`system:nodes`) need no role: the node authorizer decides for them.

use serde_json::{json, Value};

/// The label Kubernetes puts on its bootstrap policy.
const BOOTSTRAPPING: &str = "rbac-defaults";
const AGGREGATE_TO_VIEW: &str = "rbac.authorization.k8s.io/aggregate-to-view";
const AGGREGATE_TO_EDIT: &str = "rbac.authorization.k8s.io/aggregate-to-edit";
const AGGREGATE_TO_ADMIN: &str = "rbac.authorization.k8s.io/aggregate-to-admin";

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "delete", "deletecollection", "patch", "update"];

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> Value {
    json!({"apiGroups": groups, "resources": resources, "verbs": verbs})
}

fn paths(urls: &[&str], verbs: &[&str]) -> Value {
    json!({"nonResourceURLs": urls, "verbs": verbs})
}

fn cluster_role(name: &str, labels: Value, rules: Vec<Value>) -> Value {
    let mut labels = labels;
    labels["kubernetes.io/bootstrapping"] = json!(BOOTSTRAPPING);
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
        },
        "rules": rules,
    })
}

fn aggregated(name: &str, labels: Value, selector_label: &str) -> Value {
    let mut role = cluster_role(name, labels, vec![]);
    role["aggregationRule"] =
        json!({"clusterRoleSelectors": [{"matchLabels": {selector_label: "true"}}]});
    role
}

fn binding(role: &str, subjects: &[(&str, &str)]) -> Value {
    let subjects: Vec<Value> = subjects
        .iter()
        .map(|(kind, name)| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name}))
        .collect();
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {
            "name": role,
            "labels": {"kubernetes.io/bootstrapping": BOOTSTRAPPING},
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
        },
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": subjects,
    })
}

/// The resources kemu serves a namespaced user may read with `view` (all but secrets and
/// RBAC), as `(group, resources)`.
fn viewable() -> Vec<Value> {
    vec![
        rule(
            &[""],
            &[
                "pods",
                "pods/log",
                "pods/status",
                "configmaps",
                "endpoints",
                "events",
                "namespaces",
                "namespaces/status",
                "services",
                "services/status",
                "serviceaccounts",
                "resourcequotas",
                "resourcequotas/status",
                "limitranges",
                "persistentvolumeclaims",
                "persistentvolumeclaims/status",
                "podtemplates",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "replicationcontrollers/status",
            ],
            READ,
        ),
        rule(
            &["apps"],
            &[
                "deployments",
                "deployments/scale",
                "deployments/status",
                "replicasets",
                "replicasets/scale",
                "replicasets/status",
                "statefulsets",
                "statefulsets/scale",
                "statefulsets/status",
                "controllerrevisions",
                "daemonsets",
                "daemonsets/status",
            ],
            READ,
        ),
        rule(
            &["batch"],
            &["jobs", "jobs/status", "cronjobs", "cronjobs/status"],
            READ,
        ),
        rule(
            &["autoscaling"],
            &[
                "horizontalpodautoscalers",
                "horizontalpodautoscalers/status",
            ],
            READ,
        ),
        rule(
            &["policy"],
            &["poddisruptionbudgets", "poddisruptionbudgets/status"],
            READ,
        ),
        rule(
            &["networking.k8s.io"],
            &["ingresses", "ingresses/status"],
            READ,
        ),
        rule(&["metrics.k8s.io"], &["pods", "nodes"], READ),
        rule(&["discovery.k8s.io"], &["endpointslices"], READ),
        rule(&["events.k8s.io"], &["events"], READ),
        rule(&["coordination.k8s.io"], &["leases"], READ),
    ]
}

fn editable() -> Vec<Value> {
    vec![
        rule(
            &[""],
            &[
                "pods",
                "pods/attach",
                "pods/exec",
                "pods/eviction",
                "pods/portforward",
                "configmaps",
                "secrets",
                "services",
                "endpoints",
                "serviceaccounts",
                "persistentvolumeclaims",
                "podtemplates",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "events",
            ],
            WRITE,
        ),
        rule(&[""], &["secrets"], READ),
        rule(
            &["apps"],
            &[
                "deployments",
                "deployments/scale",
                "replicasets",
                "replicasets/scale",
                "statefulsets",
                "statefulsets/scale",
                "daemonsets",
            ],
            WRITE,
        ),
        rule(&["batch"], &["jobs", "cronjobs"], WRITE),
        rule(&["autoscaling"], &["horizontalpodautoscalers"], WRITE),
        rule(&["policy"], &["poddisruptionbudgets"], WRITE),
        rule(&["networking.k8s.io"], &["ingresses"], WRITE),
        rule(&["discovery.k8s.io"], &["endpointslices"], WRITE),
        rule(&["events.k8s.io"], &["events"], WRITE),
        rule(&["coordination.k8s.io"], &["leases"], WRITE),
    ]
}

/// Everything but secrets and the RBAC objects, for the scheduler to read.
fn scheduler_readable() -> Vec<Value> {
    let mut by_group: Vec<(&str, Vec<&str>)> = Vec::new();
    for r in api::RESOURCES.iter().filter(|r| r.is_stored()) {
        if r.plural == "secrets" || r.group == "rbac.authorization.k8s.io" {
            continue;
        }
        match by_group.iter_mut().find(|(g, _)| *g == r.group) {
            Some((_, plurals)) if !plurals.contains(&r.plural) => plurals.push(r.plural),
            Some(_) => {}
            None => by_group.push((r.group, vec![r.plural])),
        }
    }
    by_group
        .into_iter()
        .map(|(group, plurals)| rule(&[group], &plurals, READ))
        .collect()
}

/// ClusterRoles, then ClusterRoleBindings, in creation order.
pub fn policy() -> (Vec<Value>, Vec<Value>) {
    let none = json!({});
    let mut scheduler_rules = scheduler_readable();
    scheduler_rules.extend([
        rule(&[""], &["pods/binding", "bindings"], &["create"]),
        rule(&[""], &["pods/status"], &["patch", "update"]),
        rule(&[""], &["pods"], &["delete"]),
        // Kubernetes' system:volume-scheduler: delayed binding annotates claims and volumes.
        rule(
            &[""],
            &["persistentvolumeclaims", "persistentvolumes"],
            &["patch", "update"],
        ),
        rule(
            &["", "events.k8s.io"],
            &["events"],
            &["create", "patch", "update"],
        ),
        rule(
            &["coordination.k8s.io"],
            &["leases"],
            &["create", "get", "update", "patch"],
        ),
    ]);
    let roles = vec![
        cluster_role(
            "cluster-admin",
            none.clone(),
            vec![rule(&["*"], &["*"], &["*"]), paths(&["*"], &["*"])],
        ),
        aggregated("admin", none.clone(), AGGREGATE_TO_ADMIN),
        aggregated(
            "edit",
            json!({AGGREGATE_TO_ADMIN: "true"}),
            AGGREGATE_TO_EDIT,
        ),
        aggregated(
            "view",
            json!({AGGREGATE_TO_ADMIN: "true", AGGREGATE_TO_EDIT: "true"}),
            AGGREGATE_TO_VIEW,
        ),
        cluster_role(
            "system:aggregate-to-admin",
            json!({AGGREGATE_TO_ADMIN: "true"}),
            vec![
                rule(
                    &["rbac.authorization.k8s.io"],
                    &["roles", "rolebindings"],
                    &[
                        "create",
                        "delete",
                        "deletecollection",
                        "get",
                        "list",
                        "patch",
                        "update",
                        "watch",
                    ],
                ),
                rule(
                    &["authorization.k8s.io"],
                    &["localsubjectaccessreviews"],
                    &["create"],
                ),
            ],
        ),
        cluster_role(
            "system:aggregate-to-edit",
            json!({AGGREGATE_TO_ADMIN: "true", AGGREGATE_TO_EDIT: "true"}),
            editable(),
        ),
        cluster_role(
            "system:aggregate-to-view",
            json!({AGGREGATE_TO_ADMIN: "true", AGGREGATE_TO_EDIT: "true", AGGREGATE_TO_VIEW: "true"}),
            viewable(),
        ),
        cluster_role(
            "system:basic-user",
            none.clone(),
            vec![
                rule(
                    &["authorization.k8s.io"],
                    &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                    &["create"],
                ),
                rule(
                    &["authentication.k8s.io"],
                    &["selfsubjectreviews"],
                    &["create"],
                ),
            ],
        ),
        cluster_role(
            "system:discovery",
            none.clone(),
            vec![paths(
                &[
                    "/api",
                    "/api/*",
                    "/apis",
                    "/apis/*",
                    "/healthz",
                    "/livez",
                    "/readyz",
                    "/version",
                    "/version/",
                    "/openapi",
                    "/openapi/*",
                ],
                &["get"],
            )],
        ),
        cluster_role(
            "system:public-info-viewer",
            none.clone(),
            vec![paths(
                &["/healthz", "/livez", "/readyz", "/version", "/version/"],
                &["get"],
            )],
        ),
        cluster_role(
            "system:monitoring",
            none.clone(),
            vec![paths(
                &[
                    "/metrics",
                    "/metrics/slis",
                    "/livez",
                    "/livez/*",
                    "/readyz",
                    "/readyz/*",
                    "/healthz",
                    "/healthz/*",
                ],
                &["get"],
            )],
        ),
        cluster_role(
            "system:auth-delegator",
            none.clone(),
            vec![
                rule(&["authentication.k8s.io"], &["tokenreviews"], &["create"]),
                rule(
                    &["authorization.k8s.io"],
                    &["subjectaccessreviews"],
                    &["create"],
                ),
            ],
        ),
        cluster_role("system:kube-scheduler", none.clone(), scheduler_rules),
        cluster_role(
            "system:kemu-controllers",
            none,
            vec![rule(&["*"], &["*"], &["*"])],
        ),
    ];
    let bindings = vec![
        binding("cluster-admin", &[("Group", "system:masters")]),
        binding("system:basic-user", &[("Group", "system:authenticated")]),
        binding("system:discovery", &[("Group", "system:authenticated")]),
        binding(
            "system:public-info-viewer",
            &[
                ("Group", "system:authenticated"),
                ("Group", "system:unauthenticated"),
            ],
        ),
        binding("system:monitoring", &[("Group", "system:monitoring")]),
        binding(
            "system:kube-scheduler",
            &[
                ("User", "system:kube-scheduler"),
                ("Group", "system:kube-scheduler"),
            ],
        ),
        binding(
            "system:kemu-controllers",
            &[("Group", "system:kube-controller-manager")],
        ),
    ];
    (roles, bindings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authn::UserInfo;
    use crate::authz::rbac::RbacIndex;
    use crate::authz::{Attributes, ResourceAttributes, Target};

    fn allowed(
        index: &RbacIndex,
        user: &UserInfo,
        verb: &str,
        group: &str,
        resource: &str,
        sub: &str,
        ns: &str,
    ) -> bool {
        index.allows(&Attributes {
            user,
            verb,
            target: Target::Resource(ResourceAttributes {
                group,
                resource,
                subresource: sub,
                namespace: ns,
                ..Default::default()
            }),
        })
    }

    #[test]
    fn bootstrap_policy_grants_what_each_identity_needs() {
        let (roles, bindings) = policy();
        let index = RbacIndex::build(&[], &roles, &[], &bindings);
        let admin = UserInfo::new("admin", "", vec!["system:masters".into()]);
        assert!(allowed(
            &index,
            &admin,
            "delete",
            "rbac.authorization.k8s.io",
            "clusterroles",
            "",
            ""
        ));
        let scheduler = UserInfo::new("scheduler", "", vec!["system:kube-scheduler".into()]);
        assert!(allowed(
            &index, &scheduler, "create", "", "pods", "binding", "dev"
        ));
        assert!(allowed(&index, &scheduler, "watch", "", "nodes", "", ""));
        assert!(allowed(
            &index,
            &scheduler,
            "list",
            "scheduling.k8s.io",
            "priorityclasses",
            "",
            ""
        ));
        assert!(!allowed(
            &index, &scheduler, "get", "", "secrets", "", "dev"
        ));
        assert!(!allowed(
            &index, &scheduler, "create", "", "pods", "", "dev"
        ));
        let controllers = UserInfo::new(
            "controllers",
            "",
            vec!["system:kube-controller-manager".into()],
        );
        assert!(allowed(
            &index,
            &controllers,
            "deletecollection",
            "rbac.authorization.k8s.io",
            "rolebindings",
            "",
            "dev"
        ));
        let someone = UserInfo::new("someone", "", vec![]);
        assert!(allowed(
            &index,
            &someone,
            "create",
            "authorization.k8s.io",
            "selfsubjectaccessreviews",
            "",
            ""
        ));
        assert!(!allowed(&index, &someone, "list", "", "pods", "", "dev"));
        let discovery = Attributes {
            user: &someone,
            verb: "get",
            target: Target::NonResource {
                path: "/apis/apps/v1",
            },
        };
        assert!(index.allows(&discovery));
        let metrics = Attributes {
            user: &someone,
            verb: "get",
            target: Target::NonResource { path: "/metrics" },
        };
        assert!(!index.allows(&metrics));
    }

    /// The budget is 20 µs per request for the whole pipeline; an RBAC decision on the
    /// create path (a non-admin user bound to the aggregated `edit`, among the bootstrap
    /// policy) must take a small part of it even in a debug build on a loaded machine.
    #[test]
    fn an_rbac_decision_costs_microseconds() {
        let (roles, mut bindings) = policy();
        bindings.push(json!({"metadata": {"name": "bench-edit"},
            "roleRef": {"kind": "ClusterRole", "name": "edit"},
            "subjects": [{"kind": "User", "name": "bench"}]}));
        let index = RbacIndex::build(&[], &roles, &[], &bindings);
        let user = UserInfo::new("bench", "", vec![]);
        const N: u32 = 20_000;
        let started = std::time::Instant::now();
        for _ in 0..N {
            assert!(allowed(
                &index,
                &user,
                "create",
                "",
                "pods",
                "",
                "bench-creates"
            ));
        }
        let each = started.elapsed() / N;
        eprintln!("{each:?} per RBAC decision");
        assert!(
            each < std::time::Duration::from_micros(20),
            "{each:?} per decision"
        );
    }

    /// Kubernetes' `system:auth-delegator` (bound per server that delegates) and
    /// `system:basic-user` (bound to every authenticated user).
    #[test]
    fn review_permissions_come_from_auth_delegator_and_basic_user() {
        let (roles, bindings) = policy();
        let delegating = json!({"metadata": {"name": "metrics-server:system:auth-delegator"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "system:auth-delegator"},
            "subjects": [{"kind": "User", "name": "metrics-server"}]});
        let mut with_delegation = bindings.clone();
        with_delegation.push(delegating);
        let index = RbacIndex::build(&[], &roles, &[], &with_delegation);
        let server = UserInfo::new("metrics-server", "", vec![]);
        let someone = UserInfo::new("someone", "", vec![]);
        let reviews = [
            ("authentication.k8s.io", "tokenreviews"),
            ("authorization.k8s.io", "subjectaccessreviews"),
        ];
        for (group, resource) in reviews {
            assert!(
                allowed(&index, &server, "create", group, resource, "", ""),
                "{resource}"
            );
            assert!(
                !allowed(&index, &server, "list", group, resource, "", ""),
                "{resource}: create only"
            );
            // Nobody else: the role is not bound by default.
            assert!(
                !allowed(&index, &someone, "create", group, resource, "", ""),
                "{resource}"
            );
        }
        let default_index = RbacIndex::build(&[], &roles, &[], &bindings);
        assert!(!allowed(
            &default_index,
            &server,
            "create",
            "authentication.k8s.io",
            "tokenreviews",
            "",
            ""
        ));
        // system:basic-user, through system:authenticated: the self reviews, nothing else.
        for (group, resource) in [
            ("authorization.k8s.io", "selfsubjectaccessreviews"),
            ("authorization.k8s.io", "selfsubjectrulesreviews"),
            ("authentication.k8s.io", "selfsubjectreviews"),
        ] {
            assert!(
                allowed(&default_index, &someone, "create", group, resource, "", ""),
                "{resource}"
            );
        }
        let anonymous = UserInfo {
            name: "system:anonymous".into(),
            uid: String::new(),
            groups: vec!["system:unauthenticated".into()],
        };
        assert!(!allowed(
            &default_index,
            &anonymous,
            "create",
            "authorization.k8s.io",
            "selfsubjectaccessreviews",
            "",
            ""
        ));
        let role = roles
            .iter()
            .find(|r| r["metadata"]["name"] == "system:auth-delegator")
            .expect("system:auth-delegator exists");
        assert_eq!(
            role["metadata"]["labels"]["kubernetes.io/bootstrapping"],
            "rbac-defaults"
        );
    }

    #[test]
    fn aggregated_roles_nest_view_in_edit_in_admin() {
        let (roles, _) = policy();
        let in_ns = |role: &str| {
            json!({"metadata": {"name": "b", "namespace": "dev"},
                   "roleRef": {"kind": "ClusterRole", "name": role},
                   "subjects": [{"kind": "User", "name": "u"}]})
        };
        let u = UserInfo::new("u", "", vec![]);
        for (role, can_write, can_bind) in [
            ("view", false, false),
            ("edit", true, false),
            ("admin", true, true),
        ] {
            let index = RbacIndex::build(&[], &roles, &[in_ns(role)], &[]);
            assert!(
                allowed(&index, &u, "list", "apps", "deployments", "", "dev"),
                "{role}"
            );
            assert_eq!(
                allowed(&index, &u, "create", "", "pods", "", "dev"),
                can_write,
                "{role}"
            );
            assert_eq!(
                allowed(
                    &index,
                    &u,
                    "create",
                    "rbac.authorization.k8s.io",
                    "rolebindings",
                    "",
                    "dev"
                ),
                can_bind,
                "{role}"
            );
            assert!(
                !allowed(&index, &u, "list", "", "pods", "", "prod"),
                "{role}"
            );
        }
    }
}
