//! Service account tokens: `POST serviceaccounts/NAME/token` (a TokenRequest,
//! `authentication.k8s.io/v1`) signs a JWT, and the authenticator takes such a token as the
//! account's credential, as kube-apiserver's service account token authenticator does.
//!
//! Tokens are signed ES256 with the cluster's service-account key (`sa.key` beside the
//! certificates, made with them so every replica signs and verifies with the same key). The
//! claims are Kubernetes': `iss` and the default audience
//! `https://kubernetes.default.svc.cluster.local`, `sub` `system:serviceaccount:NS:NAME`,
//! `exp`/`iat`/`nbf`, `jti`, and `kubernetes.io` with the namespace and the account's name
//! and uid. A token authenticates while it has not expired, names this issuer and audience,
//! and its account still exists with the same uid (so deleting the account revokes it).
//! The user is `system:serviceaccount:NS:NAME` in `system:serviceaccounts`,
//! `system:serviceaccounts:NS` and `system:authenticated`.

use std::sync::Arc;

use api::ResourceInfo;
use chrono::{DateTime, Utc};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::authn::UserInfo;
use crate::errors::ApiError;
use crate::validation::Cause;
use crate::watch_cache::WatchCache;

/// The issuer, and the audience a token gets when the request names none.
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// A token's life when the request does not say.
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
const MIN_EXPIRATION_SECONDS: i64 = 600;
const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;

/// The group of every service account, and the prefix of a namespace's group and user names.
pub const ALL_ACCOUNTS: &str = "system:serviceaccounts";
pub const USER_PREFIX: &str = "system:serviceaccount:";

/// TokenRequest, for its errors' wording.
static TOKEN_REQUEST: ResourceInfo = ResourceInfo {
    group: "authentication.k8s.io",
    version: "v1",
    kind: "TokenRequest",
    plural: "token",
    singular: "",
    namespaced: true,
    short_names: &[],
    verbs: &["create"],
    subresources: &[],
    categories: &[],
    storage: "",
};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct AccountRef {
    name: String,
    uid: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct KubernetesClaims {
    namespace: String,
    serviceaccount: AccountRef,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct Claims {
    aud: Vec<String>,
    exp: i64,
    iat: i64,
    iss: String,
    jti: String,
    #[serde(rename = "kubernetes.io")]
    kubernetes: KubernetesClaims,
    nbf: i64,
    sub: String,
}

/// The user a service account authenticates as.
pub fn account_user(namespace: &str, name: &str, uid: &str) -> UserInfo {
    UserInfo::new(
        format!("{USER_PREFIX}{namespace}:{name}"),
        uid,
        vec![
            ALL_ACCOUNTS.to_string(),
            format!("{ALL_ACCOUNTS}:{namespace}"),
        ],
    )
}

/// Why the signing key cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("service account signing key: {0}")]
pub struct KeyError(String);

/// Signs and verifies the tokens of one cluster.
pub struct ServiceAccountTokens {
    encoding: EncodingKey,
    decoding: DecodingKey,
    /// Where the accounts are looked up when a token is presented.
    cache: Option<Arc<WatchCache>>,
}

impl ServiceAccountTokens {
    /// From the PEM private key (PKCS#8) and its public key (SPKI).
    pub fn new(private_pem: &str, public_pem: &str) -> Result<Self, KeyError> {
        Ok(ServiceAccountTokens {
            encoding: EncodingKey::from_ec_pem(private_pem.as_bytes())
                .map_err(|e| KeyError(e.to_string()))?,
            decoding: DecodingKey::from_ec_pem(public_pem.as_bytes())
                .map_err(|e| KeyError(e.to_string()))?,
            cache: None,
        })
    }

    /// Checks that a token's account still exists in `cache` (with the token's uid).
    pub fn with_lookup(mut self, cache: Arc<WatchCache>) -> Self {
        self.cache = Some(cache);
        self
    }

    /// A token for `account` (a ServiceAccount object) valid `seconds` from `now`.
    pub fn sign(
        &self,
        account: &Value,
        audiences: Vec<String>,
        seconds: i64,
        now: DateTime<Utc>,
    ) -> Result<(String, DateTime<Utc>), ApiError> {
        let namespace = crate::meta::namespace(account)
            .unwrap_or_default()
            .to_string();
        let name = crate::meta::name(account).to_string();
        let uid = account
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let expires = now + chrono::Duration::seconds(seconds);
        let claims = Claims {
            aud: audiences,
            exp: expires.timestamp(),
            iat: now.timestamp(),
            iss: ISSUER.into(),
            jti: uuid::Uuid::new_v4().to_string(),
            kubernetes: KubernetesClaims {
                namespace: namespace.clone(),
                serviceaccount: AccountRef {
                    name: name.clone(),
                    uid,
                },
            },
            nbf: now.timestamp(),
            sub: format!("{USER_PREFIX}{namespace}:{name}"),
        };
        let token = jsonwebtoken::encode(&Header::new(Algorithm::ES256), &claims, &self.encoding)
            .map_err(|e| ApiError::internal(format!("cannot sign a token: {e}")))?;
        Ok((token, expires))
    }

    /// The account a token is for, if it is one of ours, unexpired, for the API server's
    /// audience, and its account still exists with the same uid.
    pub fn authenticate(&self, token: &str) -> Option<UserInfo> {
        // Not a JWT at all: not ours to judge.
        if token.split('.').count() != 3 {
            return None;
        }
        let mut validation = Validation::new(Algorithm::ES256);
        validation.set_issuer(&[ISSUER]);
        validation.set_audience(&[ISSUER]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let claims = jsonwebtoken::decode::<Claims>(token, &self.decoding, &validation)
            .ok()?
            .claims;
        let k = &claims.kubernetes;
        if claims.sub != format!("{USER_PREFIX}{}:{}", k.namespace, k.serviceaccount.name) {
            return None;
        }
        if let Some(cache) = &self.cache {
            let accounts = api::resources::find("", "v1", "serviceaccounts")?;
            let key = accounts.key(Some(&k.namespace), &k.serviceaccount.name);
            let current = cache.resource(accounts)?.get(&key)?.value().ok()?;
            let uid = current.pointer("/metadata/uid").and_then(Value::as_str);
            if uid != Some(k.serviceaccount.uid.as_str()) {
                return None;
            }
        }
        Some(account_user(
            &k.namespace,
            &k.serviceaccount.name,
            &k.serviceaccount.uid,
        ))
    }
}

/// The answer to a TokenRequest for `account` (a ServiceAccount object): the request with
/// its defaults and `status.token` / `status.expirationTimestamp`, or 422 for a bad
/// `expirationSeconds`.
pub fn answer(
    tokens: &ServiceAccountTokens,
    account: &Value,
    request: &Value,
    now: DateTime<Utc>,
) -> Result<Value, ApiError> {
    let name = crate::meta::name(account).to_string();
    let seconds = request
        .pointer("/spec/expirationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(DEFAULT_EXPIRATION_SECONDS);
    let why = if seconds < MIN_EXPIRATION_SECONDS {
        Some("may not specify a duration less than 10 minutes")
    } else if seconds > MAX_EXPIRATION_SECONDS {
        Some("may not specify a duration larger than 2^32 seconds")
    } else {
        None
    };
    if let Some(why) = why {
        return Err(ApiError::invalid(
            &TOKEN_REQUEST,
            &name,
            vec![Cause {
                reason: "FieldValueInvalid".into(),
                message: format!("Invalid value: {seconds}: {why}"),
                field: "spec.expirationSeconds".into(),
            }],
        ));
    }
    let audiences: Vec<String> = request
        .pointer("/spec/audiences")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .filter(|a: &Vec<String>| !a.is_empty())
        .unwrap_or_else(|| vec![ISSUER.to_string()]);
    let (token, expires) = tokens.sign(account, audiences.clone(), seconds, now)?;
    let mut spec = json!({"audiences": audiences, "expirationSeconds": seconds});
    spec["boundObjectRef"] = request
        .pointer("/spec/boundObjectRef")
        .cloned()
        .unwrap_or(Value::Null);
    Ok(json!({
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {
            "name": name,
            "namespace": crate::meta::namespace(account).unwrap_or_default(),
            "creationTimestamp": Value::Null,
        },
        "spec": spec,
        "status": {
            "token": token,
            "expirationTimestamp": expires.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens() -> ServiceAccountTokens {
        let dir = tempfile::tempdir().expect("tempdir");
        let (private, public) =
            transport::pki::service_account_key(dir.path()).expect("a signing key");
        ServiceAccountTokens::new(&private, &public).expect("usable key")
    }

    fn account() -> Value {
        json!({"metadata": {"name": "robot", "namespace": "dev", "uid": "u-1"}})
    }

    #[test]
    fn a_signed_token_authenticates_as_the_account() {
        let t = tokens();
        let answered = answer(&t, &account(), &json!({"spec": {}}), Utc::now()).expect("token");
        assert_eq!(answered["spec"]["expirationSeconds"], 3600);
        assert_eq!(answered["spec"]["audiences"], json!([ISSUER]));
        let token = answered["status"]["token"].as_str().expect("a token");
        let user = t.authenticate(token).expect("authenticates");
        assert_eq!(user.name, "system:serviceaccount:dev:robot");
        assert_eq!(user.uid, "u-1");
        assert_eq!(
            user.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:dev",
                "system:authenticated"
            ]
        );
    }

    #[test]
    fn expired_foreign_tampered_and_other_audience_tokens_are_refused() {
        let t = tokens();
        let long_ago = Utc::now() - chrono::Duration::hours(3);
        let (old, _) = t
            .sign(&account(), vec![ISSUER.into()], 3600, long_ago)
            .expect("signs");
        assert!(t.authenticate(&old).is_none(), "expired");
        let (elsewhere, _) = t
            .sign(&account(), vec!["vault".into()], 3600, Utc::now())
            .expect("signs");
        assert!(t.authenticate(&elsewhere).is_none(), "other audience");
        let (good, _) = t
            .sign(&account(), vec![ISSUER.into()], 3600, Utc::now())
            .expect("signs");
        assert!(tokens().authenticate(&good).is_none(), "another key");
        let mut parts: Vec<String> = good.split('.').map(String::from).collect();
        parts[1] = parts[1].chars().rev().collect();
        assert!(t.authenticate(&parts.join(".")).is_none(), "tampered");
        assert!(t.authenticate("static-token").is_none());
    }

    #[test]
    fn too_short_a_life_is_422_in_kubernetes_words() {
        let err = answer(
            &tokens(),
            &account(),
            &json!({"spec": {"expirationSeconds": 60}}),
            Utc::now(),
        )
        .expect_err("too short");
        assert_eq!(err.code(), 422);
        let status = err.status();
        assert!(
            status["message"].as_str().is_some_and(|m| m.ends_with(
                "\"robot\" is invalid: spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes"
            )),
            "{status}"
        );
        assert_eq!(status["details"]["kind"], "TokenRequest");
    }
}
