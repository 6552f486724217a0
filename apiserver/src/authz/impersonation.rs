//! Impersonation (`kubectl --as=alice --as-group=dev`): the `Impersonate-User`,
//! `Impersonate-Group`, `Impersonate-Uid` and `Impersonate-Extra-*` headers make a request run
//! as another user, if the real user holds the `impersonate` verb on each thing impersonated —
//! `users` (or `serviceaccounts` for `system:serviceaccount:<ns>:<name>`) and `groups` in the
//! core group, `uids` and `userextras/<key>` in `authentication.k8s.io` — as kube-apiserver's
//! impersonation filter checks them. A refusal is the ordinary 403 for that attribute:
//! `users "alice" is forbidden: User "bob" cannot impersonate resource "users" in API group ""
//! at the cluster scope`.

use axum::http;

use super::{forbidden, Attributes, Authorizer, ResourceAttributes, Target};
use crate::authn::{UserInfo, AUTHENTICATED};
use crate::errors::ApiError;

/// What a request's impersonation headers ask for.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Impersonation {
    pub user: Option<String>,
    pub groups: Vec<String>,
    pub uid: Option<String>,
    /// `Impersonate-Extra-<key>` values, key lower-cased as HTTP delivers it.
    pub extra: Vec<(String, String)>,
}

impl Impersonation {
    /// Reads the headers; `None` when the request impersonates nobody.
    pub fn from_headers(headers: &http::HeaderMap) -> Result<Option<Impersonation>, ApiError> {
        let text = |v: &http::HeaderValue| {
            v.to_str()
                .map(str::to_string)
                .map_err(|_| ApiError::bad_request("an Impersonate-* header is not valid text"))
        };
        let mut found = Impersonation::default();
        let mut any = false;
        for (name, value) in headers {
            let name = name.as_str();
            if name == "impersonate-user" {
                found.user = Some(text(value)?);
            } else if name == "impersonate-group" {
                found.groups.push(text(value)?);
            } else if name == "impersonate-uid" {
                found.uid = Some(text(value)?);
            } else if let Some(key) = name.strip_prefix("impersonate-extra-") {
                found.extra.push((key.to_string(), text(value)?));
            } else {
                continue;
            }
            any = true;
        }
        if !any {
            return Ok(None);
        }
        if found.user.as_deref().unwrap_or("").is_empty() {
            return Err(ApiError::bad_request(format!(
                "requested {} without impersonating a user",
                if found.groups.is_empty() && found.uid.is_none() {
                    "user extras"
                } else if found.uid.is_some() {
                    "uid"
                } else {
                    "groups"
                }
            )));
        }
        Ok(Some(found))
    }
}

const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

impl Authorizer {
    /// The user `real` becomes by `wanted`, when `real` may impersonate every part of it.
    pub fn impersonate(
        &self,
        real: &UserInfo,
        wanted: &Impersonation,
    ) -> Result<UserInfo, ApiError> {
        let name = wanted.user.clone().unwrap_or_default();
        let check =
            |group: &str, resource: &str, subresource: &str, namespace: &str, object: &str| {
                let attributes = Attributes {
                    user: real,
                    verb: "impersonate",
                    target: Target::Resource(ResourceAttributes {
                        group,
                        resource,
                        subresource,
                        namespace,
                        name: object,
                        ..Default::default()
                    }),
                };
                match self.allows(&attributes) {
                    true => Ok(()),
                    false => Err(forbidden(&attributes, None)),
                }
            };
        let mut groups = wanted.groups.clone();
        match name
            .strip_prefix(SERVICE_ACCOUNT_PREFIX)
            .and_then(|rest| rest.split_once(':'))
        {
            Some((namespace, account)) => {
                check("", "serviceaccounts", "", namespace, account)?;
                if wanted.groups.is_empty() {
                    groups.push("system:serviceaccounts".into());
                    groups.push(format!("system:serviceaccounts:{namespace}"));
                }
            }
            None => check("", "users", "", "", &name)?,
        }
        for group in &wanted.groups {
            check("", "groups", "", "", group)?;
        }
        if let Some(uid) = &wanted.uid {
            check("authentication.k8s.io", "uids", "", "", uid)?;
        }
        for (key, value) in &wanted.extra {
            check("authentication.k8s.io", "userextras", key, "", value)?;
        }
        if name == "system:anonymous" {
            if !groups.iter().any(|g| g == "system:unauthenticated") {
                groups.push("system:unauthenticated".into());
            }
            return Ok(UserInfo {
                name,
                uid: wanted.uid.clone().unwrap_or_default(),
                groups,
            });
        }
        if !groups.iter().any(|g| g == AUTHENTICATED) {
            groups.push(AUTHENTICATED.into());
        }
        Ok(UserInfo {
            name,
            uid: wanted.uid.clone().unwrap_or_default(),
            groups,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> http::HeaderMap {
        let mut map = http::HeaderMap::new();
        for (k, v) in pairs {
            map.append(
                http::HeaderName::from_bytes(k.as_bytes()).expect("name"),
                http::HeaderValue::from_str(v).expect("value"),
            );
        }
        map
    }

    #[test]
    fn headers_name_the_user_groups_and_extras() {
        assert_eq!(
            Impersonation::from_headers(&headers(&[("accept", "x")])).ok(),
            Some(None)
        );
        let wanted = Impersonation::from_headers(&headers(&[
            ("Impersonate-User", "alice"),
            ("Impersonate-Group", "dev"),
            ("Impersonate-Group", "ops"),
            ("Impersonate-Extra-Scopes", "view"),
        ]))
        .expect("valid")
        .expect("impersonating");
        assert_eq!(wanted.user.as_deref(), Some("alice"));
        assert_eq!(wanted.groups, ["dev", "ops"]);
        assert_eq!(wanted.extra, [("scopes".to_string(), "view".to_string())]);
        let groups_only = Impersonation::from_headers(&headers(&[("Impersonate-Group", "dev")]));
        assert_eq!(groups_only.map_err(|e| e.code()).err(), Some(400));
    }

    #[test]
    fn only_those_allowed_to_impersonate_do() {
        let authz = Authorizer::AlwaysAllow;
        let admin = UserInfo::new("admin", "", vec![]);
        let alice = authz
            .impersonate(
                &admin,
                &Impersonation {
                    user: Some("alice".into()),
                    groups: vec!["dev".into()],
                    ..Default::default()
                },
            )
            .expect("AlwaysAllow");
        assert_eq!(alice, UserInfo::new("alice", "", vec!["dev".into()]));
        let account = authz
            .impersonate(
                &admin,
                &Impersonation {
                    user: Some("system:serviceaccount:dev:builder".into()),
                    ..Default::default()
                },
            )
            .expect("AlwaysAllow");
        assert!(
            account.in_group("system:serviceaccounts:dev"),
            "{account:?}"
        );
        assert!(account.in_group(AUTHENTICATED));
    }
}
