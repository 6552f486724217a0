//! The reading verbs: get, list and watch, served from the watch cache.

use std::time::Duration;

use api::selectors::{FieldSelector, LabelSelector};
use api::ResourceInfo;
use serde_json::Value;

use super::{decode_continue, encode_continue, parse_rv, view, ListOptions, ListResult, Registry};
use crate::errors::ApiError;
use crate::uncached;
use crate::watch_cache::{Filter, Subscription};

impl Registry {
    pub async fn get(
        &self,
        resource: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError> {
        if crate::resource_metrics::is_metrics(resource) {
            return Box::pin(crate::resource_metrics::get(
                self, resource, namespace, name,
            ))
            .await;
        }
        let key = Self::key(resource, namespace, name);
        if self.cache.resource(resource).is_none() {
            return match self.storage.get(&key).await? {
                Some((object, _)) => Ok(view(resource, object)),
                None => Err(ApiError::not_found(resource, name)),
            };
        }
        // A get is a consistent read: wait until the cache has caught up with the store.
        let revision = self.cache.current_store_revision().await?;
        if self
            .cache
            .wait_for(revision, Duration::from_secs(3))
            .await
            .is_ok()
        {
            let cached = self.cache.resource(resource).and_then(|c| c.get(&key));
            return match cached {
                Some(o) => Ok(view(resource, o.value()?)),
                None => Err(ApiError::not_found(resource, name)),
            };
        }
        match self.storage.get(&key).await? {
            Some((object, _)) => Ok(view(resource, object)),
            None => Err(ApiError::not_found(resource, name)),
        }
    }

    pub async fn list(
        &self,
        resource: &ResourceInfo,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<ListResult, ApiError> {
        if crate::resource_metrics::is_metrics(resource) {
            return Box::pin(crate::resource_metrics::list(
                self, resource, namespace, options,
            ))
            .await;
        }
        let filter = self.filter(resource, namespace, options)?;
        let Some(cache) = self.cache.resource(resource) else {
            let continued = match &options.continue_token {
                Some(token) => Some(decode_continue(token)?),
                None => None,
            };
            let prefix = resource.namespace_prefix(namespace);
            let listed = uncached::list(
                self.storage.client(),
                resource.storage,
                &prefix,
                &filter,
                continued,
                options.limit,
            )
            .await?;
            return Ok(ListResult {
                continue_token: listed.last.map(|k| encode_continue(&k, listed.revision)),
                items: listed.items,
                resource_version: listed.revision,
            });
        };
        let continued = match &options.continue_token {
            Some(token) => Some(decode_continue(token)?),
            None => None,
        };
        // A continued list goes on from its first page, whose revision the cache has already
        // reached: it does not wait for the store's newest revision again. (A paginated list of
        // 300,000 pods is 600 pages; with a fresh wait per page, any few seconds of cache lag
        // under load failed it part-way, and a re-listing informer never got through.)
        // resourceVersion "0" means "any": serve what the cache has. Otherwise read consistently.
        let minimum = match (&continued, options.resource_version.as_deref()) {
            (Some((_, first_page)), _) => *first_page,
            (None, Some("0")) => 0,
            (None, Some(rv)) if !rv.is_empty() => parse_rv(rv)?,
            (None, _) => self.cache.current_store_revision().await?,
        };
        if minimum > 0 {
            self.cache.wait_for(minimum, Duration::from_secs(3)).await?;
        }
        let start_after = continued.map(|(key, _)| key);
        let revision = self.cache.revision();
        let prefix = resource.namespace_prefix(namespace);
        let (items, last) = cache.list(&prefix, &filter, start_after.as_deref(), options.limit);
        Ok(ListResult {
            items,
            resource_version: revision,
            continue_token: last.map(|k| encode_continue(&k, revision)),
        })
    }

    fn filter(
        &self,
        resource: &ResourceInfo,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<Filter, ApiError> {
        let labels = match options
            .label_selector
            .as_deref()
            .filter(|s| !s.trim().is_empty())
        {
            Some(s) => {
                Some(LabelSelector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?)
            }
            None => None,
        };
        let fields = match options
            .field_selector
            .as_deref()
            .filter(|s| !s.trim().is_empty())
        {
            Some(s) => {
                let selector =
                    FieldSelector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?;
                selector
                    .validate_for(resource)
                    .map_err(|e| ApiError::bad_request(e.to_string()))?;
                Some(selector)
            }
            None => None,
        };
        Ok(Filter {
            namespace: namespace
                .filter(|_| resource.namespaced)
                .map(str::to_string),
            labels,
            fields,
        })
    }

    /// Starts a watch. `send_initial` replays the current state as ADDED events; otherwise
    /// events after `resourceVersion` (or after now, for an empty one) are sent.
    pub async fn watch(
        &self,
        resource: &ResourceInfo,
        namespace: Option<&str>,
        options: &ListOptions,
        send_initial: bool,
        buffer: usize,
    ) -> Result<Subscription, ApiError> {
        let filter = self.filter(resource, namespace, options)?;
        let rv = options.resource_version.as_deref().unwrap_or("");
        let Some(cache) = self.cache.resource(resource) else {
            let from = if send_initial || rv.is_empty() || rv == "0" {
                None
            } else {
                Some(parse_rv(rv)?)
            };
            let prefix = resource.namespace_prefix(namespace);
            return uncached::watch(
                self.storage.client(),
                resource.storage,
                &prefix,
                filter,
                from,
                buffer,
            )
            .await;
        };
        let from = if send_initial {
            let revision = self.cache.current_store_revision().await?;
            self.cache
                .wait_for(revision, Duration::from_secs(3))
                .await?;
            None
        } else if rv.is_empty() || rv == "0" {
            // Kubernetes: an unset or "0" resourceVersion starts with the current state.
            None
        } else {
            let rv = parse_rv(rv)?;
            self.cache.wait_for(rv, Duration::from_secs(3)).await?;
            Some(rv)
        };
        cache.subscribe(filter, from, self.cache.revision(), buffer)
    }
}
