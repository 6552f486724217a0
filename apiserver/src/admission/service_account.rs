//! ServiceAccount: a pod without a service account runs as `default`, and a pod's account must
//! exist, as kube-apiserver's plugin has it.
//!
//! The account is looked up in the watch cache, then in the store. The `default` account is
//! made by the controller manager just after its namespace, so a pod created at once in a new
//! namespace may come before it: for `default` the store is asked again, ten times at most
//! with 100–200 ms between (kube-apiserver's numbers), before the pod is refused. A refusal is
//! 403 with kube-apiserver's words (`error looking up service account NS/NAME: serviceaccount
//! "NAME" not found`), which clients retry.

use std::time::Duration;

use api::ResourceInfo;
use serde_json::{json, Value};

use crate::errors::ApiError;
use crate::registry::Registry;

/// The account a pod without one runs as.
pub const DEFAULT_ACCOUNT: &str = "default";

/// How many times the store is asked for an account before the pod is refused.
pub fn lookups(account: &str) -> usize {
    if account == DEFAULT_ACCOUNT {
        10
    } else {
        1
    }
}

/// Fills in `default` when the pod names no account. The deprecated `serviceAccount` field
/// mirrors the name, as the API's v1 conversion shows it. A mirror pod (a static pod's copy)
/// runs as no account, as in Kubernetes.
pub fn default_service_account(pod: &mut Value) {
    if super::node_restriction::is_mirror_pod(pod) {
        return;
    }
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let name = spec
        .get("serviceAccountName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .or_else(|| {
            spec.get("serviceAccount")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        })
        .unwrap_or(DEFAULT_ACCOUNT)
        .to_string();
    spec.insert("serviceAccountName".into(), json!(name));
    spec.insert("serviceAccount".into(), json!(name));
}

/// The account the (defaulted) pod runs as.
pub fn account_of(pod: &Value) -> Option<&str> {
    pod.pointer("/spec/serviceAccountName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// Why a pod naming a missing account is refused (after `pods "NAME" is forbidden: `).
pub fn not_found(namespace: &str, account: &str) -> String {
    format!("error looking up service account {namespace}/{account}: serviceaccount \"{account}\" not found")
}

/// Refuses the pod `name` (in `namespace`) when the account it runs as does not exist.
pub async fn check_exists(
    registry: &Registry,
    pods: &ResourceInfo,
    name: &str,
    namespace: &str,
    pod: &Value,
) -> Result<(), ApiError> {
    let Some(account) = account_of(pod) else {
        return Ok(());
    };
    let accounts = api::resources::find("", "v1", "serviceaccounts")
        .ok_or_else(|| ApiError::internal("serviceaccounts are not served"))?;
    let key = accounts.key(Some(namespace), account);
    if registry
        .cache()
        .resource(accounts)
        .and_then(|c| c.get(&key))
        .is_some()
    {
        return Ok(());
    }
    let pause = Duration::from_millis(100 + rand::random::<u64>() % 100);
    for attempt in 0..lookups(account) {
        if attempt > 0 {
            tokio::time::sleep(pause).await;
        }
        if registry.storage().get(&key).await?.is_some() {
            return Ok(());
        }
    }
    Err(ApiError::forbidden(
        pods,
        name,
        &not_found(namespace, account),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_to_default_and_mirrors() {
        let mut pod = json!({"spec": {"containers": []}});
        default_service_account(&mut pod);
        assert_eq!(pod["spec"]["serviceAccountName"], "default");
        assert_eq!(pod["spec"]["serviceAccount"], "default");
        assert_eq!(account_of(&pod), Some("default"));
        let mut named = json!({"spec": {"serviceAccountName": "builder"}});
        default_service_account(&mut named);
        assert_eq!(named["spec"]["serviceAccount"], "builder");
        let mut deprecated = json!({"spec": {"serviceAccount": "old"}});
        default_service_account(&mut deprecated);
        assert_eq!(account_of(&deprecated), Some("old"));
    }

    #[test]
    fn kube_apiserver_words_and_patience() {
        assert_eq!(
            not_found("dev", "robot"),
            "error looking up service account dev/robot: serviceaccount \"robot\" not found"
        );
        assert_eq!(lookups("default"), 10);
        assert_eq!(lookups("robot"), 1);
    }
}
