//! The PersistentVolumeClaims a StatefulSet makes from its `volumeClaimTemplates`: one claim
//! `TEMPLATE-SET-ORDINAL` per template and pod, created before the pod that mounts it and never
//! replaced while it exists, and the owner references that carry out
//! `persistentVolumeClaimRetentionPolicy`: with `whenDeleted: Delete` each claim is owned by the
//! set (the garbage collector removes it with the set), with `whenScaled: Delete` a claim whose
//! pod is removed by a scale-down is first handed from the set to that pod (it goes with the pod).
//! `Retain` leaves the claims alone, as on Kubernetes.

use api::client::{Client, ClientError, Patch};
use api::resources::{self, ResourceInfo};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde_json::{json, Value};

/// The claim name of template `template` for the pod `pod` (`www` + `web-0` → `www-web-0`).
pub fn claim_name(template: &str, pod: &str) -> String {
    format!("{template}-{pod}")
}

fn retention<'a>(set: &'a StatefulSet, when: &str) -> &'a str {
    let policy = set.spec.persistent_volume_claim_retention_policy.as_ref();
    let value = policy.and_then(|p| match when {
        "deleted" => p.when_deleted.as_deref(),
        _ => p.when_scaled.as_deref(),
    });
    value.unwrap_or("Retain")
}

/// An owner reference to `owner` that is not the controller, as the StatefulSet controller sets
/// on claims.
fn plain_ref(api_version: &str, kind: &str, owner: &ObjectMeta) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: owner.name.clone().unwrap_or_default(),
        uid: owner.uid.clone().unwrap_or_default(),
        controller: None,
        block_owner_deletion: None,
    }
}

/// The claims the pod `pod` of `set` mounts, as they are created: the template's metadata and
/// spec, the set's selector labels added, and the set as owner under `whenDeleted: Delete`.
pub fn claims_for(set: &StatefulSet, pod: &str) -> Vec<PersistentVolumeClaim> {
    let templates = set
        .spec
        .volume_claim_templates
        .as_deref()
        .unwrap_or_default();
    let selector_labels = set.spec.selector.match_labels.clone().unwrap_or_default();
    templates
        .iter()
        .map(|template| {
            let template_name = template.metadata.name.as_deref().unwrap_or_default();
            let mut labels = template.metadata.labels.clone().unwrap_or_default();
            labels.extend(selector_labels.clone());
            let owners = (retention(set, "deleted") == "Delete")
                .then(|| vec![plain_ref("apps/v1", "StatefulSet", &set.metadata)]);
            PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some(claim_name(template_name, pod)),
                    namespace: set.metadata.namespace.clone(),
                    labels: (!labels.is_empty()).then_some(labels),
                    annotations: template.metadata.annotations.clone(),
                    finalizers: template.metadata.finalizers.clone(),
                    owner_references: owners,
                    ..Default::default()
                },
                spec: template.spec.clone(),
                status: None,
            }
        })
        .collect()
}

fn claims() -> Result<&'static ResourceInfo, ClientError> {
    resources::find("", "v1", "persistentvolumeclaims").ok_or_else(|| ClientError::Config {
        field: "persistentvolumeclaims",
        reason: "not served by this build".into(),
    })
}

/// What became of one claim: its name and, if creating it failed, the error as events word it.
pub type ClaimOutcome = (String, Option<String>);

/// Creates the claims of `pod` that do not exist yet. Stops at the first failure: the pod must
/// not be created without its claims. Only claims this call created are reported.
pub async fn create_missing(
    client: &Client,
    set: &StatefulSet,
    pod: &str,
) -> (Vec<ClaimOutcome>, Result<(), ClientError>) {
    let mut outcomes = Vec::new();
    let info = match claims() {
        Ok(info) => info,
        Err(e) => return (outcomes, Err(e)),
    };
    let namespace = set.metadata.namespace.as_deref();
    for claim in claims_for(set, pod) {
        let name = claim.metadata.name.clone().unwrap_or_default();
        match client
            .get::<PersistentVolumeClaim>(info, namespace, &name)
            .await
        {
            Ok(existing) if existing.metadata.deletion_timestamp.is_some() => {
                let reason = format!("pvc {name} is being deleted");
                return (outcomes, Err(ClientError::Protocol(reason)));
            }
            Ok(_) => continue,
            Err(e) if e.is_not_found() => {}
            Err(e) => return (outcomes, Err(e)),
        }
        match client.create::<_, Value>(info, namespace, &claim).await {
            Ok(_) => outcomes.push((name, None)),
            Err(e) if e.is_already_exists() => {}
            Err(e) => {
                outcomes.push((name, Some(crate::events::error_text(&e))));
                return (outcomes, Err(e));
            }
        }
    }
    (outcomes, Ok(()))
}

/// Under `whenScaled: Delete`, makes `pod` (about to be removed by a scale-down) an owner of its
/// claims, so that they go with it.
pub async fn hand_to_pod(client: &Client, set: &StatefulSet, pod: &Pod) -> Result<(), ClientError> {
    if retention(set, "scaled") != "Delete" {
        return Ok(());
    }
    let info = claims()?;
    let namespace = set.metadata.namespace.as_deref();
    let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
    let pod_ref = plain_ref("v1", "Pod", &pod.metadata);
    for claim in claims_for(set, pod_name) {
        let name = claim.metadata.name.unwrap_or_default();
        let existing = match client
            .get::<PersistentVolumeClaim>(info, namespace, &name)
            .await
        {
            Ok(existing) => existing,
            Err(e) if e.is_not_found() => continue,
            Err(e) => return Err(e),
        };
        let mut owners = existing.metadata.owner_references.unwrap_or_default();
        if owners.iter().any(|o| o.uid == pod_ref.uid) {
            continue;
        }
        // The pod alone owns it now: with the set still an owner the garbage collector would
        // keep the claim when the pod goes.
        owners.retain(|o| Some(&o.uid) != set.metadata.uid.as_ref());
        owners.push(pod_ref.clone());
        let patch = json!({
            "metadata": {
                "ownerReferences": owners,
                "resourceVersion": existing.metadata.resource_version,
            }
        });
        client
            .patch::<Value>(info, namespace, &name, &Patch::Merge(patch))
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{
        StatefulSetPersistentVolumeClaimRetentionPolicy, StatefulSetSpec,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

    fn set(when_deleted: &str) -> StatefulSet {
        let template = PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("www".into()),
                labels: Some([("tier".to_string(), "disk".to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        };
        StatefulSet {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("apps".into()),
                uid: Some("set-uid".into()),
                ..Default::default()
            },
            spec: StatefulSetSpec {
                selector: LabelSelector {
                    match_labels: Some([("app".to_string(), "web".to_string())].into()),
                    ..Default::default()
                },
                volume_claim_templates: Some(vec![template]),
                persistent_volume_claim_retention_policy: Some(
                    StatefulSetPersistentVolumeClaimRetentionPolicy {
                        when_deleted: Some(when_deleted.into()),
                        when_scaled: Some("Retain".into()),
                    },
                ),
                ..Default::default()
            },
            status: None,
        }
    }

    #[test]
    fn claims_are_named_per_pod_and_labelled_with_the_selector() {
        let claims = claims_for(&set("Retain"), "web-2");
        assert_eq!(claims.len(), 1);
        let claim = &claims[0];
        assert_eq!(claim.metadata.name.as_deref(), Some("www-web-2"));
        assert_eq!(claim.metadata.namespace.as_deref(), Some("apps"));
        let labels = claim.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get("app").map(String::as_str), Some("web"));
        assert_eq!(labels.get("tier").map(String::as_str), Some("disk"));
        assert!(
            claim.metadata.owner_references.is_none(),
            "Retain: no owner"
        );
    }

    #[test]
    fn when_deleted_delete_makes_the_set_an_owner_but_not_the_controller() {
        let claims = claims_for(&set("Delete"), "web-0");
        let owners = claims[0]
            .metadata
            .owner_references
            .clone()
            .unwrap_or_default();
        assert_eq!(owners.len(), 1);
        assert_eq!(owners[0].kind, "StatefulSet");
        assert_eq!(owners[0].uid, "set-uid");
        assert_eq!(owners[0].controller, None);
    }
}
