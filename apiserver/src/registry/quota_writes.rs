//! Stores and removals that charge or refund the namespace's ResourceQuotas in the same
//! store transaction as the object itself.

use api::ResourceInfo;
use serde_json::Value;
use store::types::LeaseId;

use super::{Registry, UPDATE_RETRIES};
use crate::admission::{quota, Plugin};
use crate::errors::ApiError;
use crate::meta;
use crate::pipeline::AdmissionTimer;
use crate::storage::{Guarded, Written};

impl Registry {
    /// Writes a new object, charging the namespace's quotas in the same transaction (the
    /// ResourceQuota plugin). A quota that changed since it was read fails the transaction; the
    /// quotas are then read from the store and the charge judged again. A dry run judges the
    /// charge and writes nothing.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn store_new(
        &self,
        resource: &'static ResourceInfo,
        namespace: Option<&str>,
        key: &str,
        object: &Value,
        lease: LeaseId,
        dry_run: bool,
        admission_time: &AdmissionTimer,
    ) -> Result<Written, ApiError> {
        // The quota's share of admission: the charge, not the store round trips.
        admission_time.resume();
        let plain = || async {
            if dry_run {
                Ok(Written::Ok(0))
            } else {
                self.storage.create(key, object, lease).await
            }
        };
        // The quotas the cache holds for the namespace are charged; the object's usage is
        // computed only when there is one (most namespaces have none).
        let (namespace, mut quotas) = match namespace {
            Some(ns) if self.admission.is_enabled(Plugin::ResourceQuota) => {
                (ns, self.admission.cached_quotas(ns))
            }
            _ => ("", Vec::new()),
        };
        let delta = if quotas.is_empty() {
            quota::Usage::new()
        } else {
            quota::usage(resource, object)
        };
        if delta.is_empty() {
            admission_time.pause();
            return plain().await;
        }
        let name = meta::name(object);
        for _ in 0..UPDATE_RETRIES {
            let mut guards = Vec::new();
            for (quota_key, quota_object, revision) in &quotas {
                match quota::charge(quota_object, resource, object, &delta) {
                    Ok(Some(next)) => guards.push(Guarded {
                        key: quota_key.clone(),
                        object: next,
                        revision: *revision,
                    }),
                    Ok(None) => {}
                    Err(why) => return Err(ApiError::forbidden(resource, name, &why)),
                }
            }
            admission_time.pause();
            if guards.is_empty() || dry_run {
                return plain().await;
            }
            match self
                .storage
                .create_guarded(key, object, lease, &guards)
                .await?
            {
                Written::Conflict(None) => {
                    quotas = self.store_quotas(namespace).await?;
                    admission_time.resume();
                }
                written => return Ok(written),
            }
        }
        Err(ApiError::conflict(
            resource,
            name,
            "too many concurrent quota updates; try again",
        ))
    }

    /// Deletes a stored object at revision `rv`, refunding what it charged to the namespace's
    /// quotas in the same transaction.
    pub(super) async fn remove(
        &self,
        resource: &'static ResourceInfo,
        key: &str,
        rv: i64,
        existing: &Value,
        admission_time: Option<&AdmissionTimer>,
    ) -> Result<Written, ApiError> {
        // The quota's share of admission: the refund, not the store round trips.
        let timed = |f: &mut dyn FnMut()| match admission_time {
            Some(t) => t.time(f),
            None => f(),
        };
        let namespace = meta::namespace(existing)
            .filter(|_| resource.namespaced && self.admission.is_enabled(Plugin::ResourceQuota));
        // As for a create: only the quotas the cache knows are refunded, and the object's
        // usage is computed only when there are some.
        let mut quotas = Vec::new();
        let mut delta = quota::Usage::new();
        if let Some(namespace) = namespace {
            timed(&mut || {
                quotas = self.admission.cached_quotas(namespace);
                if !quotas.is_empty() {
                    delta = quota::usage(resource, existing);
                }
            });
        }
        let Some(namespace) = namespace.filter(|_| !delta.is_empty()) else {
            return self.storage.delete(key, rv).await;
        };
        for _ in 0..UPDATE_RETRIES {
            let mut guards: Vec<Guarded> = Vec::new();
            timed(&mut || {
                guards = quotas
                    .iter()
                    .filter_map(|(quota_key, quota_object, revision)| {
                        Some(Guarded {
                            key: quota_key.clone(),
                            object: quota::refund(quota_object, resource, existing, &delta)?,
                            revision: *revision,
                        })
                    })
                    .collect();
            });
            if guards.is_empty() {
                return self.storage.delete(key, rv).await;
            }
            match self.storage.delete_guarded(key, rv, &guards).await? {
                // The object is as it was: a quota moved.
                Written::Conflict(Some((_, current))) if current == rv => {
                    quotas = self.store_quotas(namespace).await?;
                }
                written => return Ok(written),
            }
        }
        Err(ApiError::conflict(
            resource,
            meta::name(existing),
            "too many concurrent quota updates; try again",
        ))
    }

    /// The namespace's quotas as the store has them now.
    async fn store_quotas(&self, namespace: &str) -> Result<Vec<(String, Value, i64)>, ApiError> {
        let quotas = api::resources::find("", "v1", "resourcequotas")
            .ok_or_else(|| ApiError::internal("no resourcequotas"))?;
        self.storage
            .list(&quotas.namespace_prefix(Some(namespace)))
            .await
    }
}
