//! The objects of a run through the API: resources found by discovery (any kind the server
//! serves, custom ones included), and create, merge-patch, delete and list with retries.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use hyper::Method;
use parking_lot::Mutex;
use serde_json::Value as Json;
use tokio::sync::watch;

use crate::client::{ApiClient, LineReader};
use crate::watcher::encode;

/// What a list-then-watch sees ([`Objects::list_and_watch`]).
#[derive(Debug)]
pub enum Seen {
    /// A list, the first or after the watch fell too far behind: every matching object,
    /// replacing what was known.
    Listed(Vec<Json>),
    /// An object added or changed.
    Applied(Json),
    /// An object deleted, in its last state.
    Deleted(Json),
}

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

/// Which objects a list or watch asks for: a label selector and a field selector, each empty
/// for all.
#[derive(Clone, Copy, Debug, Default)]
pub struct Selectors<'a> {
    pub labels: &'a str,
    pub fields: &'a str,
}

impl Selectors<'_> {
    /// The selectors as query parameters, each with its leading `&`.
    fn query(&self) -> String {
        let mut out = String::new();
        if !self.labels.is_empty() {
            out.push_str(&format!("&labelSelector={}", encode(self.labels)));
        }
        if !self.fields.is_empty() {
            out.push_str(&format!("&fieldSelector={}", encode(self.fields)));
        }
        out
    }
}

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
        let selectors = Selectors {
            labels: selector,
            fields: "",
        };
        self.list_pages(resource, "", selectors).await
    }

    /// Every object of `resource` in `namespace` matching `selector`.
    pub async fn list_in(
        &self,
        resource: &Resource,
        namespace: &str,
        selector: &str,
    ) -> Option<Vec<Json>> {
        let selectors = Selectors {
            labels: selector,
            fields: "",
        };
        self.list_pages(resource, namespace, selectors)
            .await
            .map(|(items, _)| items)
    }

    async fn list_pages(
        &self,
        resource: &Resource,
        namespace: &str,
        selectors: Selectors<'_>,
    ) -> Option<(Vec<Json>, String)> {
        let mut items = Vec::new();
        let mut token = String::new();
        let mut version = None;
        loop {
            let mut path = format!("{}?limit=500", resource.collection(namespace));
            path.push_str(&selectors.query());
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

    /// Lists `resource` in every namespace (those matching `selector`) and watches it from the
    /// list's resourceVersion, handing `on` what it sees, as an informer does: a watch that
    /// ends or fails is reopened from the last version seen (bookmarks included), and a new
    /// list is made only when the server answers 410 Gone. Returns once `stop` is true (or its
    /// sender is gone).
    pub async fn list_and_watch(
        &self,
        resource: &Resource,
        selector: &str,
        stop: watch::Receiver<bool>,
        on: impl FnMut(Seen),
    ) {
        let selectors = Selectors {
            labels: selector,
            fields: "",
        };
        self.list_and_watch_selected(resource, selectors, stop, on)
            .await
    }

    /// [`list_and_watch`](Self::list_and_watch) of the objects both `selectors` match.
    pub async fn list_and_watch_selected(
        &self,
        resource: &Resource,
        selectors: Selectors<'_>,
        mut stop: watch::Receiver<bool>,
        mut on: impl FnMut(Seen),
    ) {
        let pause = |d: Duration| tokio::time::sleep(d);
        'relist: loop {
            let listed = tokio::select! {
                biased;
                _ = stop.wait_for(|s| *s) => return,
                listed = self.list_pages(resource, "", selectors) => listed,
            };
            let Some((items, mut rv)) = listed else {
                tokio::select! {
                    biased;
                    _ = stop.wait_for(|s| *s) => return,
                    _ = pause(Duration::from_secs(1)) => continue 'relist,
                }
            };
            on(Seen::Listed(items));
            loop {
                let mut path = format!(
                    "{}?watch=true&allowWatchBookmarks=true&resourceVersion={}",
                    resource.collection(""),
                    encode(&rv)
                );
                path.push_str(&selectors.query());
                let opened = tokio::select! {
                    biased;
                    _ = stop.wait_for(|s| *s) => return,
                    opened = self.client.stream(&resource.plural, &path) => opened,
                };
                let body = match opened {
                    Ok((status, _)) if status.as_u16() == 410 => continue 'relist,
                    Ok((status, body)) if status.is_success() => body,
                    _ => {
                        tokio::select! {
                            biased;
                            _ = stop.wait_for(|s| *s) => return,
                            _ = pause(Duration::from_millis(500)) => continue,
                        }
                    }
                };
                let mut lines = LineReader::new(body);
                loop {
                    let line = tokio::select! {
                        biased;
                        _ = stop.wait_for(|s| *s) => return,
                        line = lines.next_line() => line,
                    };
                    let Ok(Some(line)) = line else { break };
                    let Ok(mut event) = serde_json::from_slice::<Json>(&line) else {
                        continue;
                    };
                    let object = event.get_mut("object").map(Json::take).unwrap_or_default();
                    let kind = event["type"].as_str().unwrap_or("");
                    if kind == "ERROR" {
                        if object["code"] == 410 {
                            continue 'relist;
                        }
                        break;
                    }
                    if let Some(v) = object["metadata"]["resourceVersion"].as_str() {
                        rv = v.to_string();
                    }
                    match kind {
                        "ADDED" | "MODIFIED" => on(Seen::Applied(object)),
                        "DELETED" => on(Seen::Deleted(object)),
                        _ => {}
                    }
                }
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
