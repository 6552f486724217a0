//! The kubelet's wait for a pod's PersistentVolumeClaims, as its volume manager waits: each
//! claim must be Bound to a volume bound back to it, and a CSI volume whose driver requires
//! attachment must be attached to this node (its VolumeAttachment
//! `csi-<sha256(handle + driver + node)>` says `attached: true`) before the pod mounts it.
//!
//! A claim that cannot be processed (missing, not bound, being deleted) gives upstream's
//! `FailedMount` text, `Unable to attach or mount volumes: unmounted volumes=[data],
//! unattached volumes=[], failed to process volumes=[data]: error processing PVC
//! default/data: PVC is not bound`; a volume only waiting for its attachment is waited for
//! quietly, as the kubelet's wait ends in a timeout that it does not record. The attachable
//! volumes the pod needs are what the kubelet reports in its Node's `volumesInUse`.

use api::client::{Client, ClientError};
use api::resources;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{CSIDriver, VolumeAttachment};

use crate::lifecycle::ClaimsAnswer;

/// What the check of a pod's claims found.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimsChecked {
    pub answer: ClaimsAnswer,
    /// The unique names of the attachable volumes the pod needs on this node.
    pub in_use: Vec<String>,
    /// When every claim was processed: each volume's attachment to wait for (`(volume,
    /// attachable)`), so that later checks only look at the attachments, as the kubelet's
    /// populator processes a pod's claims once and then waits for the attach.
    pub resolved: Option<Vec<(String, Attachable)>>,
}

/// A claim whose volume is bound to it: what attaching it takes, if anything.
#[derive(Clone, Debug, PartialEq)]
pub struct Attachable {
    unique: String,
    attachment: String,
}

/// An error as Go's client writes it: a Status error is its message.
fn go_error(e: &ClientError) -> String {
    match e {
        ClientError::Api { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

fn find(group: &str, plural: &str) -> &'static api::ResourceInfo {
    resources::find(group, "v1", plural).expect("a served resource")
}

/// The claim's volume, checked as the kubelet's desired-state populator checks it; an error in
/// its words.
async fn resolve(
    client: &Client,
    namespace: &str,
    node: &str,
    claim_name: &str,
) -> Result<Option<Attachable>, String> {
    let claim: PersistentVolumeClaim = client
        .get(
            find("", "persistentvolumeclaims"),
            Some(namespace),
            claim_name,
        )
        .await
        .map_err(|e| format!("failed to fetch PVC from API server: {}", go_error(&e)))?;
    if claim.metadata.deletion_timestamp.is_some() {
        return Err("PVC is being deleted".into());
    }
    if claim.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Bound") {
        return Err("PVC is not bound".into());
    }
    let volume_name = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.clone())
        .unwrap_or_default();
    if volume_name.is_empty() {
        return Err("PVC has empty pvc.Spec.VolumeName".into());
    }
    let volume: PersistentVolume = client
        .get(find("", "persistentvolumes"), None, &volume_name)
        .await
        .map_err(|e| {
            format!(
                "failed to fetch PV {volume_name} from API server: {}",
                go_error(&e)
            )
        })?;
    let spec = volume.spec.unwrap_or_default();
    let Some(reference) = spec.claim_ref else {
        return Err(format!("found PV object {volume_name} but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim"));
    };
    let (bound_to, uid) = (
        reference.uid.unwrap_or_default(),
        claim.metadata.uid.unwrap_or_default(),
    );
    if bound_to != uid {
        return Err(format!("found PV object {volume_name} but its pv.Spec.ClaimRef.UID {bound_to} does not point to claim.UID {uid}"));
    }
    let Some(csi) = spec.csi else {
        return Ok(None);
    };
    let required = match client
        .get::<CSIDriver>(find("storage.k8s.io", "csidrivers"), None, &csi.driver)
        .await
    {
        Ok(driver) => driver.spec.attach_required != Some(false),
        // Without a CSIDriver object a CSI volume is attachable, as upstream's plugin decides.
        Err(e) if e.is_not_found() => true,
        Err(e) => return Err(go_error(&e)),
    };
    Ok(required.then(|| Attachable {
        unique: api::volumes::csi_unique_name(&csi.driver, &csi.volume_handle),
        attachment: api::volumes::attachment_name(&csi.volume_handle, &csi.driver, node),
    }))
}

/// Whether the VolumeAttachment exists and says the volume is attached.
async fn attached(client: &Client, attachment: &str) -> bool {
    client
        .get::<VolumeAttachment>(
            find("storage.k8s.io", "volumeattachments"),
            None,
            attachment,
        )
        .await
        .is_ok_and(|a| {
            a.metadata.deletion_timestamp.is_none() && a.status.is_some_and(|s| s.attached)
        })
}

/// Looks again only at the attachments of claims already processed (`resolved` from an
/// earlier [`check`]).
pub async fn recheck(client: &Client, resolved: Vec<(String, Attachable)>) -> ClaimsChecked {
    let mut unattached = Vec::new();
    let mut in_use = Vec::new();
    for (volume, a) in &resolved {
        if !attached(client, &a.attachment).await {
            unattached.push(volume.clone());
        }
        in_use.push(a.unique.clone());
    }
    in_use.sort();
    in_use.dedup();
    let answer = if unattached.is_empty() {
        ClaimsAnswer::Ready
    } else {
        ClaimsAnswer::Unattached
    };
    ClaimsChecked {
        answer,
        in_use,
        resolved: Some(resolved),
    }
}

/// Checks the pod's claims (`(volume, claim)` pairs) in `namespace` for `node`.
pub async fn check(
    client: &Client,
    namespace: &str,
    node: &str,
    claims: &[(String, String)],
) -> ClaimsChecked {
    let mut resolved = Vec::new();
    let mut failed = Vec::new();
    let mut unattached = Vec::new();
    let mut in_use = Vec::new();
    for (volume, claim) in claims {
        match resolve(client, namespace, node, claim).await {
            Ok(None) => {}
            Ok(Some(a)) => {
                if !attached(client, &a.attachment).await {
                    unattached.push(volume.clone());
                }
                in_use.push(a.unique.clone());
                resolved.push((volume.clone(), a));
            }
            Err(e) => failed.push((
                volume.clone(),
                format!("error processing PVC {namespace}/{claim}: {e}"),
            )),
        }
    }
    in_use.sort();
    in_use.dedup();
    let answer = if !failed.is_empty() {
        ClaimsAnswer::Failed(failed_mount(&unattached, &failed))
    } else if !unattached.is_empty() {
        ClaimsAnswer::Unattached
    } else {
        ClaimsAnswer::Ready
    };
    let resolved = failed.is_empty().then_some(resolved);
    ClaimsChecked {
        answer,
        in_use,
        resolved,
    }
}

/// The kubelet's `FailedMount` text for claims that could not be processed (`(volume,
/// error)`) beside volumes waiting for their attachment; lists as Go prints them, sorted.
pub fn failed_mount(unattached: &[String], failed: &[(String, String)]) -> String {
    let mut unattached = unattached.to_vec();
    unattached.sort();
    let mut not_processed: Vec<String> = failed.iter().map(|(v, _)| v.clone()).collect();
    not_processed.sort();
    not_processed.dedup();
    let mut unmounted: Vec<String> = unattached
        .iter()
        .chain(not_processed.iter())
        .cloned()
        .collect();
    unmounted.sort();
    unmounted.dedup();
    let errors: Vec<&str> = failed.iter().map(|(_, e)| e.as_str()).collect();
    format!(
        "Unable to attach or mount volumes: unmounted volumes=[{}], unattached volumes=[{}], failed to process volumes=[{}]: {}",
        unmounted.join(" "),
        unattached.join(" "),
        not_processed.join(" "),
        errors.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_failed_mount_text_is_the_kubelets() {
        let failed = [(
            "data".to_string(),
            "error processing PVC default/data: PVC is not bound".to_string(),
        )];
        assert_eq!(
            failed_mount(&[], &failed),
            "Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[], failed to process volumes=[data]: error processing PVC default/data: PVC is not bound"
        );
        let failed = [
            (
                "logs".to_string(),
                "error processing PVC default/logs: PVC is being deleted".to_string(),
            ),
            (
                "cache".to_string(),
                "error processing PVC default/cache: PVC is not bound".to_string(),
            ),
        ];
        assert_eq!(
            failed_mount(&["data".to_string()], &failed),
            "Unable to attach or mount volumes: unmounted volumes=[cache data logs], unattached volumes=[data], failed to process volumes=[cache logs]: error processing PVC default/logs: PVC is being deleted; error processing PVC default/cache: PVC is not bound"
        );
    }
}
