//! RBAC's escalation prevention, as kube-apiserver's RBAC storage does it: nobody grants
//! permissions they do not hold.
//!
//! - Creating or changing the rules of a Role or ClusterRole needs every new rule to be covered
//!   by the rules the requester holds where the role applies (the cluster's bindings, plus the
//!   namespace's for a Role), or the `escalate` verb on that role. A ClusterRole with an
//!   `aggregationRule` needs `escalate` (or `system:masters`).
//! - Creating or changing a RoleBinding or ClusterRoleBinding needs the `bind` verb on the role
//!   it references, or holding every rule of that role.
//!
//! `system:masters` may do both. A refusal is Kubernetes' 403: `roles.rbac.authorization.k8s.io
//! "r" is forbidden: user "alice" (groups=["system:authenticated"]) is attempting to grant RBAC
//! permissions not currently held:` and then each missing permission, compacted, one a line.

use serde_json::Value;

use super::rbac::{PolicyRule, RbacIndex};
use super::{Attributes, Authorizer, ResourceAttributes, Target};
use crate::authn::{UserInfo, MASTERS};
use crate::errors::ApiError;

pub const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// Splits a rule into one rule per verb, group, resource and name (or URL and verb), as
/// Kubernetes' `BreakdownRule`.
fn breakdown(rule: &PolicyRule) -> Vec<PolicyRule> {
    let mut atoms = Vec::new();
    let one = |s: &String| vec![s.clone()];
    for group in &rule.api_groups {
        for resource in &rule.resources {
            let names: Vec<Vec<String>> = if rule.resource_names.is_empty() {
                vec![Vec::new()]
            } else {
                rule.resource_names.iter().map(one).collect()
            };
            for names in names {
                for verb in &rule.verbs {
                    atoms.push(PolicyRule {
                        verbs: one(verb),
                        api_groups: one(group),
                        resources: one(resource),
                        resource_names: names.clone(),
                        non_resource_urls: Vec::new(),
                    });
                }
            }
        }
    }
    for url in &rule.non_resource_urls {
        for verb in &rule.verbs {
            atoms.push(PolicyRule {
                verbs: one(verb),
                non_resource_urls: one(url),
                ..Default::default()
            });
        }
    }
    atoms
}

fn has(list: &[String], value: &str) -> bool {
    list.iter().any(|v| v == "*" || v == value)
}

/// Whether `owner` covers the single-permission rule `atom` (Kubernetes' `ruleCovers`).
fn covers(owner: &PolicyRule, atom: &PolicyRule) -> bool {
    let verb = &atom.verbs[0];
    if !has(&owner.verbs, verb) {
        return false;
    }
    if let Some(url) = atom.non_resource_urls.first() {
        return owner.non_resource_urls.iter().any(|o| {
            o == "*"
                || o == url
                || o.strip_suffix('*')
                    .is_some_and(|prefix| url.starts_with(prefix))
        });
    }
    let (group, resource) = (&atom.api_groups[0], &atom.resources[0]);
    if !has(&owner.api_groups, group) {
        return false;
    }
    let resource_hit = owner.resources.iter().any(|o| {
        o == "*"
            || o == resource
            || match (o.split_once('/'), resource.split_once('/')) {
                (Some(("*", sub)), Some((_, wanted))) => sub == wanted,
                _ => false,
            }
    });
    if !resource_hit {
        return false;
    }
    owner.resource_names.is_empty()
        || atom
            .resource_names
            .first()
            .is_some_and(|name| owner.resource_names.contains(name))
}

/// The permissions in `wanted` that no rule in `held` covers, compacted: single-permission
/// rules that differ only in their verb are merged (Kubernetes' `Covers` and `CompactRules`).
pub fn missing(held: &[PolicyRule], wanted: &[PolicyRule]) -> Vec<PolicyRule> {
    let mut out: Vec<PolicyRule> = Vec::new();
    for atom in wanted.iter().flat_map(breakdown) {
        if held.iter().any(|owner| covers(owner, &atom)) {
            continue;
        }
        let same = out.iter_mut().find(|r| {
            r.api_groups == atom.api_groups
                && r.resources == atom.resources
                && r.resource_names == atom.resource_names
                && r.non_resource_urls == atom.non_resource_urls
        });
        match same {
            Some(rule) => {
                if !rule.verbs.contains(&atom.verbs[0]) {
                    rule.verbs.push(atom.verbs[0].clone());
                }
            }
            None => out.push(atom),
        }
    }
    out
}

/// Go's `%q` of a string slice: `["a" "b"]`.
fn quoted(list: &[String]) -> String {
    let items: Vec<String> = list.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", items.join(" "))
}

/// Kubernetes' `CompactString` of a rule: `{APIGroups:["apps"], Resources:["deployments"],
/// Verbs:["create"]}`, only the fields that are set.
pub fn compact_string(rule: &PolicyRule) -> String {
    let fields = [
        ("APIGroups", &rule.api_groups),
        ("Resources", &rule.resources),
        ("ResourceNames", &rule.resource_names),
        ("NonResourceURLs", &rule.non_resource_urls),
        ("Verbs", &rule.verbs),
    ];
    let parts: Vec<String> = fields
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(name, v)| format!("{name}:{}", quoted(v)))
        .collect();
    format!("{{{}}}", parts.join(", "))
}

/// The reason of the refusal: who, and every missing permission on its own line (sorted).
pub fn escalation_reason(user: &UserInfo, missing: &[PolicyRule]) -> String {
    let mut lines: Vec<String> = missing.iter().map(compact_string).collect();
    lines.sort();
    lines.dedup();
    format!(
        "user {:?} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
        user.name,
        quoted(&user.groups),
        lines.join("\n")
    )
}

fn rules_of(object: &Value) -> Vec<PolicyRule> {
    object
        .get("rules")
        .and_then(Value::as_array)
        .map(|rules| rules.iter().map(PolicyRule::from_json).collect())
        .unwrap_or_default()
}

impl Authorizer {
    /// The escalation check of a write of `object` (a Role, ClusterRole, RoleBinding or
    /// ClusterRoleBinding; other resources pass) by `user`, against RBAC as it is now.
    pub fn check_rbac_write(
        &self,
        user: &UserInfo,
        resource: &api::ResourceInfo,
        object: &Value,
    ) -> Result<(), ApiError> {
        let rbac = match self {
            // Everyone may do everything, escalate and bind included.
            Authorizer::AlwaysAllow => return Ok(()),
            Authorizer::NodeRbac { rbac, .. } => rbac,
        };
        if resource.group != RBAC_GROUP {
            return Ok(());
        }
        check_write(&rbac.index(), user, resource, object, |attributes| {
            self.allows(attributes)
        })
    }
}

/// [`Authorizer::check_rbac_write`] over `index`, with `allows` the authorizer that judges the
/// `escalate` and `bind` verbs.
pub fn check_write(
    index: &RbacIndex,
    user: &UserInfo,
    resource: &api::ResourceInfo,
    object: &Value,
    allows: impl Fn(&Attributes<'_>) -> bool,
) -> Result<(), ApiError> {
    if user.in_group(MASTERS) {
        return Ok(());
    }
    let name = crate::meta::name(object);
    let namespace = match resource.namespaced {
        true => crate::meta::namespace(object).unwrap_or(""),
        false => "",
    };
    let may = |verb: &str, plural: &str, name: &str| {
        allows(&Attributes {
            user,
            verb,
            target: Target::Resource(ResourceAttributes {
                group: RBAC_GROUP,
                resource: plural,
                namespace,
                name,
                ..Default::default()
            }),
        })
    };
    let wanted = match resource.plural {
        "roles" | "clusterroles" => {
            if may("escalate", resource.plural, name) {
                return Ok(());
            }
            if resource.plural == "clusterroles" && object.get("aggregationRule").is_some() {
                return Err(ApiError::forbidden(
                    resource,
                    name,
                    "must have cluster-admin privileges to use the aggregationRule",
                ));
            }
            rules_of(object)
        }
        "rolebindings" | "clusterrolebindings" => {
            let field = |pointer: &str| {
                object
                    .pointer(pointer)
                    .and_then(Value::as_str)
                    .unwrap_or("")
            };
            let (kind, role) = (field("/roleRef/kind"), field("/roleRef/name"));
            let role_plural = match kind {
                "Role" => "roles",
                "ClusterRole" => "clusterroles",
                // Validation names the bad kind.
                _ => return Ok(()),
            };
            if may("bind", role_plural, role) {
                return Ok(());
            }
            let Some(rules) = index.role_rules(kind, namespace, role) else {
                return Err(ApiError::NotFound {
                    message: format!("{role_plural}.{RBAC_GROUP} {role:?} not found"),
                    name: role.to_string(),
                    group: RBAC_GROUP.into(),
                    kind: role_plural.into(),
                });
            };
            rules.to_vec()
        }
        _ => return Ok(()),
    };
    let missing = missing(&index.rules_of(user, namespace), &wanted);
    if missing.is_empty() {
        return Ok(());
    }
    Err(ApiError::forbidden(
        resource,
        name,
        &escalation_reason(user, &missing),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(value: Value) -> PolicyRule {
        PolicyRule::from_json(&value)
    }

    #[test]
    fn held_rules_cover_what_they_allow_and_nothing_more() {
        let held = vec![
            rule(
                json!({"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list"]}),
            ),
            rule(json!({"apiGroups": ["apps"], "resources": ["*"], "verbs": ["*"]})),
            rule(json!({"apiGroups": [""], "resources": ["*/status"], "verbs": ["patch"]})),
            rule(
                json!({"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"], "verbs": ["get"]}),
            ),
            rule(json!({"nonResourceURLs": ["/logs/*"], "verbs": ["get"]})),
        ];
        let covered = [
            json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}),
            json!({"apiGroups": ["apps"], "resources": ["deployments", "replicasets/scale"], "verbs": ["create", "delete"]}),
            json!({"apiGroups": [""], "resources": ["pods/status", "nodes/status"], "verbs": ["patch"]}),
            json!({"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"], "verbs": ["get"]}),
            json!({"nonResourceURLs": ["/logs/kubelet"], "verbs": ["get"]}),
        ];
        for wanted in covered {
            assert!(
                missing(&held, &[rule(wanted.clone())]).is_empty(),
                "{wanted}"
            );
        }
        let not_covered = [
            json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}),
            json!({"apiGroups": [""], "resources": ["*"], "verbs": ["get"]}),
            json!({"apiGroups": ["*"], "resources": ["pods"], "verbs": ["get"]}),
            json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}),
            json!({"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["b"], "verbs": ["get"]}),
            json!({"nonResourceURLs": ["/metrics"], "verbs": ["get"]}),
            json!({"apiGroups": [""], "resources": ["pods/status"], "verbs": ["update"]}),
        ];
        for wanted in not_covered {
            assert!(
                !missing(&held, &[rule(wanted.clone())]).is_empty(),
                "{wanted}"
            );
        }
    }

    #[test]
    fn the_refusal_lists_the_missing_permissions_compacted_as_kubernetes_does() {
        let held = vec![rule(
            json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}),
        )];
        let wanted = vec![
            rule(
                json!({"apiGroups": [""], "resources": ["pods", "secrets"], "verbs": ["get", "delete", "list"]}),
            ),
            rule(json!({"nonResourceURLs": ["/metrics"], "verbs": ["get"]})),
        ];
        let missing = missing(&held, &wanted);
        let alice = UserInfo::new(
            "alice",
            "",
            vec!["dev".into(), "system:authenticated".into()],
        );
        assert_eq!(
            escalation_reason(&alice, &missing),
            "user \"alice\" (groups=[\"dev\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n\
             {APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\" \"list\"]}\n\
             {APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"delete\" \"list\"]}\n\
             {NonResourceURLs:[\"/metrics\"], Verbs:[\"get\"]}"
        );
    }

    fn role_writer_index() -> RbacIndex {
        // alice may write roles and rolebindings in dev and read and create pods there.
        let cluster_roles = vec![
            json!({"metadata": {"name": "big"}, "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}),
            json!({"metadata": {"name": "pod-reader"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}),
        ];
        let roles = vec![
            json!({"metadata": {"name": "writer", "namespace": "dev"}, "rules": [
                {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": ["create", "update"]},
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "create"]},
            ]}),
        ];
        let binding = |name: &str, role: &str| {
            json!({"metadata": {"name": name, "namespace": "dev"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
                "subjects": [{"kind": "User", "name": "alice"}]})
        };
        RbacIndex::build(&roles, &cluster_roles, &[binding("w", "writer")], &[])
    }

    /// The escalation check with RBAC (over the same index) judging `escalate` and `bind`.
    struct Check(RbacIndex);

    impl Check {
        fn check_rbac_write(
            &self,
            user: &UserInfo,
            resource: &api::ResourceInfo,
            object: &Value,
        ) -> Result<(), ApiError> {
            check_write(&self.0, user, resource, object, |a| self.0.allows(a))
        }
    }

    fn authorizer(index: RbacIndex) -> Check {
        Check(index)
    }

    fn res(plural: &str) -> &'static api::ResourceInfo {
        api::resources::find(RBAC_GROUP, "v1", plural).expect("RBAC resource")
    }

    #[test]
    fn roles_and_bindings_grant_only_what_the_writer_holds() {
        let alice = UserInfo::new("alice", "", vec!["system:authenticated".into()]);
        let authz = authorizer(role_writer_index());
        let role = |rules: Value| json!({"metadata": {"name": "mine", "namespace": "dev"}, "rules": rules});
        // Within what alice holds: fine.
        authz
            .check_rbac_write(
                &alice,
                res("roles"),
                &role(json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}])),
            )
            .expect("a subset of alice's rules");
        // Beyond it: Kubernetes' 403.
        let refused = authz
            .check_rbac_write(
                &alice,
                res("roles"),
                &role(
                    json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "delete"]}]),
                ),
            )
            .expect_err("delete is not held");
        assert_eq!(refused.code(), 403);
        assert_eq!(
            refused.to_string(),
            "roles.rbac.authorization.k8s.io \"mine\" is forbidden: user \"alice\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\"]}"
        );
        // A binding to a role alice fully holds, and to one she does not.
        let binding = |kind: &str, role: &str| {
            json!({"metadata": {"name": "b", "namespace": "dev"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
                "subjects": [{"kind": "User", "name": "bob"}]})
        };
        authz
            .check_rbac_write(
                &alice,
                res("rolebindings"),
                &binding("ClusterRole", "pod-reader"),
            )
            .expect("alice holds pod-reader's rules in dev");
        let refused = authz
            .check_rbac_write(&alice, res("rolebindings"), &binding("ClusterRole", "big"))
            .expect_err("big is more than alice holds");
        assert!(
            refused.to_string().starts_with(
                "rolebindings.rbac.authorization.k8s.io \"b\" is forbidden: user \"alice\""
            ),
            "{refused}"
        );
        let missing_role = authz
            .check_rbac_write(&alice, res("rolebindings"), &binding("Role", "nope"))
            .expect_err("no such role");
        assert_eq!(missing_role.code(), 404);
        // The admin may do anything.
        let admin = UserInfo::new("admin", "", vec![MASTERS.into()]);
        authz
            .check_rbac_write(&admin, res("rolebindings"), &binding("ClusterRole", "big"))
            .expect("system:masters");
    }

    #[test]
    fn bind_and_escalate_verbs_lift_the_check() {
        // alice may bind the "big" ClusterRole and escalate Roles in dev, nothing else.
        let cluster_roles = vec![
            json!({"metadata": {"name": "big"}, "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}),
        ];
        let roles = vec![
            json!({"metadata": {"name": "binder", "namespace": "dev"}, "rules": [
                {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "resourceNames": ["big"], "verbs": ["bind"]}]}),
            json!({"metadata": {"name": "escalator", "namespace": "dev"}, "rules": [
                {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["escalate"]}]}),
        ];
        let bind = |name: &str, role: &str| {
            json!({"metadata": {"name": name, "namespace": "dev"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
                "subjects": [{"kind": "User", "name": "alice"}]})
        };
        let roles_index = RbacIndex::build(
            &roles,
            &cluster_roles,
            &[bind("b1", "binder"), bind("b2", "escalator")],
            &[],
        );
        let authz = authorizer(roles_index);
        let alice = UserInfo::new("alice", "", vec![]);
        let binding = json!({"metadata": {"name": "b", "namespace": "dev"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "big"},
            "subjects": [{"kind": "User", "name": "bob"}]});
        authz
            .check_rbac_write(&alice, res("rolebindings"), &binding)
            .expect("bind on clusterroles/big");
        let role = json!({"metadata": {"name": "all", "namespace": "dev"},
            "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]});
        authz
            .check_rbac_write(&alice, res("roles"), &role)
            .expect("escalate on roles");
        // Escalate on roles is not escalate on clusterroles; and aggregation needs it.
        let cluster_role = json!({"metadata": {"name": "agg"},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]}});
        let refused = authz
            .check_rbac_write(&alice, res("clusterroles"), &cluster_role)
            .expect_err("aggregation needs escalate");
        assert!(
            refused
                .to_string()
                .ends_with("must have cluster-admin privileges to use the aggregationRule"),
            "{refused}"
        );
    }
}
