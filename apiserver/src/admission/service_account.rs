//! ServiceAccount: a pod without a service account runs as `default`, and a pod's account must
//! exist, as kube-apiserver's plugin has it.
//!
//! The account is looked up in the watch cache, then in the store. The `default` account is
//! made by the controller manager just after its namespace, so a pod created at once in a new
//! namespace may come before it: for `default` the store is asked again, ten times at most
//! with 100–200 ms between (kube-apiserver's numbers), before the pod is refused. A refusal is
//! 403 with kube-apiserver's words (`error looking up service account NS/NAME: serviceaccount
//! "NAME" not found`), which clients retry.
//!
//! A pod that may automount its account's token (`automountServiceAccountToken` not false on
//! the pod, or else on the account) gets the `kube-api-access-XXXXX` projected volume — the
//! bound token, the cluster CA from `kube-root-ca.crt` and the namespace — mounted read-only at
//! [`TOKEN_MOUNT_PATH`] in every container and init container that has no mount there yet.

use std::time::Duration;

use api::ResourceInfo;
use serde_json::{json, Value};

use crate::errors::ApiError;
use crate::registry::Registry;

/// The account a pod without one runs as.
pub const DEFAULT_ACCOUNT: &str = "default";
/// Where a container finds its account's token, CA and namespace.
pub const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The token volume's name, before its random suffix.
pub const TOKEN_VOLUME_PREFIX: &str = "kube-api-access-";
/// The projected token's lifetime: an hour and 7 s, the 7 s telling a kubelet-refreshed bound
/// token from a legacy one (kube-apiserver's `WarnOnlyBoundTokenExpirationSeconds`).
pub const TOKEN_EXPIRATION_SECONDS: i64 = 3607;

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

/// The account's `automountServiceAccountToken`, as far as admission reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Account {
    /// The pod runs as no account (a mirror pod).
    None,
    /// The account exists; its `automountServiceAccountToken`, if set.
    Found { automount: Option<bool> },
}

fn automount_of(account: &[u8]) -> Option<bool> {
    #[derive(serde::Deserialize)]
    struct Automount {
        #[serde(rename = "automountServiceAccountToken")]
        automount: Option<bool>,
    }
    serde_json::from_slice::<Automount>(account)
        .ok()
        .and_then(|a| a.automount)
}

/// Refuses the pod `name` (in `namespace`) when the account it runs as does not exist.
pub async fn check_exists(
    registry: &Registry,
    pods: &ResourceInfo,
    name: &str,
    namespace: &str,
    pod: &Value,
) -> Result<Account, ApiError> {
    let Some(account) = account_of(pod) else {
        return Ok(Account::None);
    };
    let accounts = api::resources::find("", "v1", "serviceaccounts")
        .ok_or_else(|| ApiError::internal("serviceaccounts are not served"))?;
    let key = accounts.key(Some(namespace), account);
    if let Some(cached) = registry
        .cache()
        .resource(accounts)
        .and_then(|c| c.get(&key))
    {
        return Ok(Account::Found {
            automount: automount_of(&cached.json),
        });
    }
    let pause = Duration::from_millis(100 + rand::random::<u64>() % 100);
    for attempt in 0..lookups(account) {
        if attempt > 0 {
            tokio::time::sleep(pause).await;
        }
        if let Some((stored, _)) = registry.storage().get(&key).await? {
            return Ok(Account::Found {
                automount: stored
                    .get("automountServiceAccountToken")
                    .and_then(Value::as_bool),
            });
        }
    }
    Err(ApiError::forbidden(
        pods,
        name,
        &not_found(namespace, account),
    ))
}

/// Mounts the account's token in the pod as kube-apiserver's plugin does, unless the pod (or
/// else the account) opts out or the pod runs as no account. A pod that already has a
/// `kube-api-access-*` volume keeps it; a container with a mount at [`TOKEN_MOUNT_PATH`] gets
/// no other.
pub fn mount_token(pod: &mut Value, account: Account) {
    let Account::Found { automount } = account else {
        return;
    };
    if super::node_restriction::is_mirror_pod(pod) {
        return;
    }
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let wanted = spec
        .get("automountServiceAccountToken")
        .and_then(Value::as_bool)
        .or(automount)
        .unwrap_or(true);
    if !wanted {
        return;
    }
    let volume_names: Vec<String> = spec
        .get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.get("name").and_then(Value::as_str).map(str::to_string))
        .collect();
    let existing = volume_names
        .iter()
        .find(|n| n.starts_with(TOKEN_VOLUME_PREFIX))
        .cloned();
    let volume = existing
        .clone()
        .unwrap_or_else(|| crate::strategy::generate_name(TOKEN_VOLUME_PREFIX));
    let mount = json!({"name": volume, "readOnly": true, "mountPath": TOKEN_MOUNT_PATH});
    let mut mounted = false;
    for list in ["initContainers", "containers"] {
        let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for container in containers.iter_mut().filter_map(Value::as_object_mut) {
            let has_one = container
                .get("volumeMounts")
                .and_then(Value::as_array)
                .is_some_and(|mounts| {
                    mounts.iter().any(|m| {
                        m.get("mountPath").and_then(Value::as_str) == Some(TOKEN_MOUNT_PATH)
                    })
                });
            if has_one {
                continue;
            }
            match container
                .get_mut("volumeMounts")
                .and_then(Value::as_array_mut)
            {
                Some(mounts) => mounts.push(mount.clone()),
                None => {
                    container.insert("volumeMounts".into(), json!([mount.clone()]));
                }
            }
            mounted = true;
        }
    }
    if !mounted || existing.is_some() {
        return;
    }
    let token_volume = json!({
        "name": volume,
        "projected": {
            "sources": [
                {"serviceAccountToken": {
                    "expirationSeconds": TOKEN_EXPIRATION_SECONDS,
                    "path": "token",
                }},
                {"configMap": {
                    "name": "kube-root-ca.crt",
                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                }},
                {"downwardAPI": {
                    "items": [{
                        "path": "namespace",
                        "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                    }],
                }},
            ],
            // Set explicitly, as kube-apiserver does, so the pod reads the same before and
            // after defaulting.
            "defaultMode": 420,
        },
    });
    match spec.get_mut("volumes").and_then(Value::as_array_mut) {
        Some(volumes) => volumes.push(token_volume),
        None => {
            spec.insert("volumes".into(), json!([token_volume]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(automount: Option<bool>) -> Account {
        Account::Found { automount }
    }

    fn token_volume(pod: &Value) -> Option<&Value> {
        pod["spec"]["volumes"].as_array()?.iter().find(|v| {
            v["name"]
                .as_str()
                .is_some_and(|n| n.starts_with(TOKEN_VOLUME_PREFIX))
        })
    }

    #[test]
    fn mounts_the_token_volume_in_every_container() {
        let mut pod = json!({"spec": {
            "initContainers": [{"name": "init", "image": "busybox"}],
            "containers": [
                {"name": "app", "image": "nginx", "volumeMounts": [{"name": "data", "mountPath": "/data"}]},
                {"name": "own", "image": "nginx", "volumeMounts": [{"name": "mine", "mountPath": TOKEN_MOUNT_PATH}]},
            ],
            "volumes": [{"name": "data", "emptyDir": {}}, {"name": "mine", "emptyDir": {}}],
        }});
        mount_token(&mut pod, found(None));
        let volume = token_volume(&pod).expect("a token volume");
        let name = volume["name"].as_str().expect("named");
        assert_eq!(name.len(), TOKEN_VOLUME_PREFIX.len() + 5);
        assert_eq!(
            volume["projected"],
            json!({
                "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
                ],
                "defaultMode": 420,
            })
        );
        let mount = json!({"name": name, "readOnly": true, "mountPath": TOKEN_MOUNT_PATH});
        assert_eq!(
            pod["spec"]["initContainers"][0]["volumeMounts"],
            json!([mount])
        );
        assert_eq!(pod["spec"]["containers"][0]["volumeMounts"][1], mount);
        // A container with its own mount at the path keeps it alone.
        assert_eq!(
            pod["spec"]["containers"][1]["volumeMounts"]
                .as_array()
                .map(Vec::len),
            Some(1)
        );
        assert_eq!(pod["spec"]["volumes"].as_array().map(Vec::len), Some(3));
    }

    #[test]
    fn opting_out_mirror_pods_and_no_account_get_none() {
        let plain = json!({"spec": {"containers": [{"name": "app", "image": "nginx"}]}});
        let mut pod_opts_out = plain.clone();
        pod_opts_out["spec"]["automountServiceAccountToken"] = json!(false);
        mount_token(&mut pod_opts_out, found(Some(true)));
        assert!(token_volume(&pod_opts_out).is_none());
        let mut account_opts_out = plain.clone();
        mount_token(&mut account_opts_out, found(Some(false)));
        assert!(token_volume(&account_opts_out).is_none());
        // The pod's word beats the account's.
        let mut pod_opts_in = plain.clone();
        pod_opts_in["spec"]["automountServiceAccountToken"] = json!(true);
        mount_token(&mut pod_opts_in, found(Some(false)));
        assert!(token_volume(&pod_opts_in).is_some());
        let mut mirror = plain.clone();
        mirror["metadata"] = json!({"annotations": {"kubernetes.io/config.mirror": "abc"}});
        mount_token(&mut mirror, found(None));
        assert!(token_volume(&mirror).is_none());
        let mut no_account = plain;
        mount_token(&mut no_account, Account::None);
        assert!(token_volume(&no_account).is_none());
    }

    #[test]
    fn an_existing_token_volume_is_reused() {
        let mut pod = json!({"spec": {
            "containers": [{"name": "app", "image": "nginx"}],
            "volumes": [{"name": "kube-api-access-abcde", "projected": {"sources": []}}],
        }});
        mount_token(&mut pod, found(None));
        assert_eq!(pod["spec"]["volumes"].as_array().map(Vec::len), Some(1));
        assert_eq!(
            pod["spec"]["containers"][0]["volumeMounts"][0]["name"],
            "kube-api-access-abcde"
        );
    }

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
