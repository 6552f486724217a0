//! Delete and deletecollection: graceful pod termination, finalizers and propagation.

use api::ResourceInfo;
use serde_json::{json, Value};

use super::{view, DeleteOptions, Deleted, ListOptions, Registry, UPDATE_RETRIES};
use crate::errors::ApiError;
use crate::meta;
use crate::pipeline::{AdmissionTimer, AdmissionVerb};
use crate::storage::Written;

impl Registry {
    pub async fn delete(
        &self,
        resource: &'static ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Deleted, ApiError> {
        let admission_time = AdmissionTimer::start(AdmissionVerb::Delete);
        self.admission.validate_delete(resource, name)?;
        admission_time.pause();
        let deleted = self
            .delete_admitted(resource, namespace, name, options, &admission_time)
            .await;
        if let (Ok(Deleted::Gone(crd)), true) = (&deleted, crate::crd::is_definition(resource)) {
            if !options.dry_run {
                self.remove_custom_objects(crd).await?;
            }
        }
        if deleted.is_ok() {
            admission_time.finish(&self.pipeline);
        }
        deleted
    }

    /// Deletes every object a deleted CRD defined (kube-apiserver's finalizer does the same
    /// before the CRD goes; here the CRD goes first, so no new object can be made meanwhile).
    async fn remove_custom_objects(&self, crd: &Value) -> Result<(), ApiError> {
        let Some(prefix) = crate::crd::objects_prefix(crd) else {
            return Ok(());
        };
        for (key, _, rv) in self.storage.list(&prefix).await? {
            // Changed meanwhile: removed at its new revision.
            if let Written::Conflict(Some((_, fresh))) = self.storage.delete(&key, rv).await? {
                self.storage.delete(&key, fresh).await?;
            }
        }
        Ok(())
    }

    /// A delete after its admission (the quota refund is timed as admission too).
    async fn delete_admitted(
        &self,
        resource: &'static ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        options: &DeleteOptions,
        admission_time: &AdmissionTimer,
    ) -> Result<Deleted, ApiError> {
        let key = Self::key(resource, namespace, name);
        let mut current = self.current(resource, &key).await?;
        for _ in 0..UPDATE_RETRIES {
            let Some((existing, rv)) = current.take() else {
                return Err(ApiError::not_found(resource, name));
            };
            if let Some(uid) = &options.precondition_uid {
                if uid != meta::uid(&existing) {
                    return Err(ApiError::conflict(
                        resource,
                        name,
                        &format!(
                            "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                            meta::uid(&existing)
                        ),
                    ));
                }
            }
            if let Some(prv) = &options.precondition_rv {
                if *prv != rv.to_string() {
                    return Err(ApiError::conflict(
                        resource,
                        name,
                        &format!("Precondition failed: ResourceVersion in precondition: {prv}, ResourceVersion in object meta: {rv}"),
                    ));
                }
            }
            let plan = deletion_plan(resource, &existing, options);
            if options.dry_run {
                return Ok(match plan {
                    Some(next) => Deleted::Pending(next),
                    None => Deleted::Gone(existing),
                });
            }
            if plan.as_ref() == Some(&existing) {
                return Ok(Deleted::Pending(existing));
            }
            let written = match &plan {
                Some(next) => {
                    self.storage
                        .update(&key, next, rv, self.event_lease(resource).await?)
                        .await?
                }
                None => {
                    self.remove(resource, &key, rv, &existing, Some(admission_time))
                        .await?
                }
            };
            match written {
                Written::Ok(new_rv) => {
                    return Ok(match plan {
                        Some(mut next) => {
                            meta::set_resource_version(&mut next, new_rv);
                            Deleted::Pending(view(resource, next))
                        }
                        None => {
                            let mut last = existing;
                            meta::set_resource_version(&mut last, new_rv);
                            Deleted::Gone(view(resource, last))
                        }
                    });
                }
                Written::Conflict(fresh) => current = fresh,
            }
        }
        Err(ApiError::conflict(
            resource,
            name,
            "too many concurrent updates; try again",
        ))
    }

    /// Deletes everything a list with `list_options` would return.
    pub async fn delete_collection(
        &self,
        resource: &'static ResourceInfo,
        namespace: Option<&str>,
        list_options: &ListOptions,
        options: &DeleteOptions,
    ) -> Result<Vec<Value>, ApiError> {
        let listed = self.list(resource, namespace, list_options).await?;
        let mut out = Vec::new();
        for item in listed.items {
            match self
                .delete(resource, item.namespace.as_deref(), &item.name, options)
                .await
            {
                Ok(Deleted::Gone(v)) | Ok(Deleted::Pending(v)) => out.push(v),
                Err(ApiError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}

/// What a delete turns `existing` into: `None` to remove it now, or the object marked for
/// deletion (graceful pod termination, finalizers, foreground/orphan propagation).
fn deletion_plan(
    resource: &ResourceInfo,
    existing: &Value,
    options: &DeleteOptions,
) -> Option<Value> {
    let mut finalizers = meta::finalizers(existing);
    match options.propagation_policy.as_deref() {
        Some("Foreground") if !finalizers.iter().any(|f| f == "foregroundDeletion") => {
            finalizers.push("foregroundDeletion".into())
        }
        Some("Orphan") if !finalizers.iter().any(|f| f == "orphan") => {
            finalizers.push("orphan".into())
        }
        _ => {}
    }
    let already_deleting = meta::deletion_timestamp(existing).is_some();
    let mut grace: i64 = 0;
    if resource.kind == "Pod" {
        let bound = existing
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty());
        let phase = existing
            .pointer("/status/phase")
            .and_then(Value::as_str)
            .unwrap_or("");
        let terminal = phase == "Succeeded" || phase == "Failed";
        let default = existing
            .pointer("/spec/terminationGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(30);
        grace = options.grace_period_seconds.unwrap_or(default).max(0);
        if !bound || terminal {
            grace = 0;
        }
        if already_deleting {
            // A second delete may only shorten the grace period.
            let current = existing
                .pointer("/metadata/deletionGracePeriodSeconds")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            if grace >= current && grace > 0 && finalizers == meta::finalizers(existing) {
                // Nothing changes: the object stays as it is, still terminating.
                return Some(existing.clone());
            }
        }
    } else if resource.kind == "Namespace" {
        // The namespace controller empties it, then removes the "kubernetes" finalizer.
        let spec_finalizers = existing
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty());
        if spec_finalizers || !finalizers.is_empty() {
            let mut next = existing.clone();
            if !already_deleting {
                meta::metadata_mut(&mut next)
                    .insert("deletionTimestamp".into(), json!(meta::now_rfc3339()));
            }
            next["status"]["phase"] = json!("Terminating");
            meta::metadata_mut(&mut next).insert("finalizers".into(), json!(finalizers));
            if finalizers.is_empty() {
                meta::metadata_mut(&mut next).remove("finalizers");
            }
            return Some(next);
        }
        return None;
    }
    if grace == 0 && finalizers.is_empty() {
        return None;
    }
    let mut next = existing.clone();
    {
        let metadata = meta::metadata_mut(&mut next);
        if !finalizers.is_empty() {
            metadata.insert("finalizers".into(), json!(finalizers));
        }
        if !already_deleting || grace > 0 {
            let at = chrono::Utc::now() + chrono::Duration::seconds(grace);
            metadata.insert(
                "deletionTimestamp".into(),
                json!(at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
            );
            metadata.insert("deletionGracePeriodSeconds".into(), json!(grace));
        }
        if let Some(policy) = &options.propagation_policy {
            // Recorded for the garbage collector.
            let annotations = metadata.entry("annotations").or_insert_with(|| json!({}));
            if let Some(a) = annotations.as_object_mut() {
                a.insert("kemu.dev/propagation-policy".into(), json!(policy));
            }
        }
    }
    if resource.kind == "Pod" && grace == 0 && finalizers.is_empty() {
        return None;
    }
    Some(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pod_deletion_is_graceful_only_when_bound() {
        let pods = api::resources::pods();
        let unbound = json!({"metadata": {"name": "a"}, "spec": {}});
        assert!(deletion_plan(pods, &unbound, &DeleteOptions::default()).is_none());
        let bound = json!({"metadata": {"name": "a"}, "spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 10}});
        let plan = deletion_plan(pods, &bound, &DeleteOptions::default()).expect("graceful");
        assert_eq!(plan["metadata"]["deletionGracePeriodSeconds"], 10);
        let force = DeleteOptions {
            grace_period_seconds: Some(0),
            ..Default::default()
        };
        assert!(deletion_plan(pods, &bound, &force).is_none());
        let finalized = json!({"metadata": {"name": "a", "finalizers": ["x"]}, "spec": {}});
        assert!(deletion_plan(pods, &finalized, &force).is_some());
    }
}
