//! The objects of a run through the API: resources found by discovery (any kind the server
//! serves, custom ones included), and create, merge-patch, delete and list with retries.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use hyper::Method;
use parking_lot::Mutex;
use serde_json::Value as Json;

use crate::client::ApiClient;
use crate::watcher::encode;

/// Where a kind is served.
#[derive(Clone, Debug)]
pub struct Resource {
    /// `/api/v1` or `/apis/GROUP/VERSION`.
    pub base: String,
    pub plural: String,
    pub namespaced: bool,
}

impl Resource {
    /// The collection path in `namespace` (ignored for cluster-scoped kinds).
    pub fn collection(&self, namespace: &str) -> String {
        if self.namespaced && !namespace.is_empty() {
            format!("{}/namespaces/{namespace}/{}", self.base, self.plural)
        } else {
            format!("{}/{}", self.base, self.plural)
        }
    }
}

/// What discovery found per (apiVersion, kind); `None` for a kind the server does not serve.
type DiscoveryCache = HashMap<(String, String), Option<Resource>>;

/// The API client with a discovery cache.
#[derive(Clone)]
pub struct Objects {
    pub client: ApiClient,
    resources: Arc<Mutex<DiscoveryCache>>,
}

/// Attempts of a call that got no answer or a "try again".
const ATTEMPTS: u32 = 6;

fn retryable(code: u16) -> bool {
    matches!(code, 0 | 429 | 500 | 502 | 503 | 504)
}

impl Objects {
    pub fn new(client: ApiClient) -> Objects {
        Objects {
            client,
            resources: Arc::default(),
        }
    }

    /// The resource serving `kind` of `api_version`; `None` when the server does not serve it.
    pub async fn resource(&self, api_version: &str, kind: &str) -> Option<Resource> {
        let key = (api_version.to_string(), kind.to_string());
        if let Some(known) = self.resources.lock().get(&key) {
            return known.clone();
        }
        let base = if api_version.contains('/') {
            format!("/apis/{api_version}")
        } else {
            format!("/api/{api_version}")
        };
        let found = match self.get("get", "discovery", &base).await {
            Some(list) => list["resources"].as_array().and_then(|resources| {
                resources.iter().find_map(|r| {
                    let name = r["name"].as_str()?;
                    (r["kind"] == kind && !name.contains('/')).then(|| Resource {
                        base: base.clone(),
                        plural: name.to_string(),
                        namespaced: r["namespaced"].as_bool().unwrap_or(true),
                    })
                })
            }),
            None => None,
        };
        self.resources.lock().insert(key, found.clone());
        found
    }

    /// A GET's JSON body when it answered 2xx.
    pub async fn get(&self, verb: &str, resource: &str, path: &str) -> Option<Json> {
        for attempt in 0..ATTEMPTS {
            match self
                .client
                .call(verb, resource, Method::GET, path, None, Default::default())
                .await
            {
                Ok(r) if r.status.is_success() => return r.json().ok(),
                Ok(r) if !retryable(r.status.as_u16()) => return None,
                _ => tokio::time::sleep(Duration::from_millis(100 << attempt)).await,
            }
        }
        None
    }

    /// Every object of `resource` matching `selector` (all namespaces), a page at a time.
    pub async fn list(&self, resource: &Resource, selector: &str) -> Option<Vec<Json>> {
        self.list_with_version(resource, selector)
            .await
            .map(|(items, _)| items)
    }

    /// [`list`](Self::list) and the list's resourceVersion (its first page's: the later pages
    /// are served from the same snapshot), where a watch of the same objects starts.
    pub async fn list_with_version(
        &self,
        resource: &Resource,
        selector: &str,
    ) -> Option<(Vec<Json>, String)> {
        self.list_pages(resource, "", selector).await
    }

    /// Every object of `resource` in `namespace` matching `selector`.
    pub async fn list_in(
        &self,
        resource: &Resource,
        namespace: &str,
        selector: &str,
    ) -> Option<Vec<Json>> {
        self.list_pages(resource, namespace, selector)
            .await
            .map(|(items, _)| items)
    }

    async fn list_pages(
        &self,
        resource: &Resource,
        namespace: &str,
        selector: &str,
    ) -> Option<(Vec<Json>, String)> {
        let mut items = Vec::new();
        let mut token = String::new();
        let mut version = None;
        loop {
            let mut path = format!("{}?limit=500", resource.collection(namespace));
            if !selector.is_empty() {
                path.push_str(&format!("&labelSelector={}", encode(selector)));
            }
            if !token.is_empty() {
                path.push_str(&format!("&continue={}", encode(&token)));
            }
            let page = self.get("list", &resource.plural, &path).await?;
            if version.is_none() {
                version = Some(
                    page["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap_or("")
                        .to_string(),
                );
            }
            if let Some(list) = page["items"].as_array() {
                items.extend(list.iter().cloned());
            }
            token = page["metadata"]["continue"]
                .as_str()
                .unwrap_or("")
                .to_string();
            if token.is_empty() {
                return Some((items, version.unwrap_or_default()));
            }
        }
    }

    /// Sends `method` with `body` to `path`, retrying what may be retried; `Ok` on 2xx (and on
    /// 409 for a retried create, 404 for a retried delete: an earlier attempt went through).
    pub async fn send(
        &self,
        verb: &str,
        resource: &str,
        method: Method,
        path: &str,
        body: &Json,
    ) -> Result<(), String> {
        let mut last = String::new();
        for attempt in 0..ATTEMPTS {
            let (code, text) = match self
                .client
                .call_json(verb, resource, method.clone(), path, body)
                .await
            {
                Ok(r) => (
                    r.status.as_u16(),
                    String::from_utf8_lossy(&r.body).into_owned(),
                ),
                Err(e) => (0, format!("{e:#}")),
            };
            if (200..300).contains(&code)
                || (attempt > 0 && code == 409 && verb == "create")
                || (attempt > 0 && code == 404 && verb == "delete")
            {
                return Ok(());
            }
            last = format!(
                "{verb} {path}: {code} {}",
                text.chars().take(300).collect::<String>()
            );
            if !retryable(code) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
        }
        Err(last)
    }
}

/// `apiVersion` and `kind` of an object body.
pub fn type_of(object: &Json) -> (String, String) {
    (
        object["apiVersion"].as_str().unwrap_or("v1").to_string(),
        object["kind"].as_str().unwrap_or_default().to_string(),
    )
}
