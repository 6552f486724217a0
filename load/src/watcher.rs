//! One watch per load namespace, the source of every pod measurement. An explicit informer:
//! `Listing` (list the run's pods, settle the tracker, take the list's resourceVersion) →
//! `Watching{rv}` (resume from the last seen rv when the stream ends) → back to `Listing` on 410.

use std::sync::Arc;
use std::time::Duration;

use hyper::Method;
use parking_lot::Mutex;
use serde::Deserialize;
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use super::client::{ApiClient, LineReader};
use super::tracker::{EventKind, PodObserver, PodView};

/// Where the informer is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Listing,
    Watching { rv: String },
}

#[derive(Deserialize)]
struct PodList {
    #[serde(default)]
    metadata: ListMeta,
    #[serde(default)]
    items: Vec<PodView>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListMeta {
    #[serde(default)]
    resource_version: String,
}

#[derive(Deserialize)]
struct WatchEvent {
    #[serde(rename = "type")]
    kind: String,
    object: PodView,
}

/// Percent-encodes a query value.
pub fn encode(value: &str) -> String {
    let mut out = String::new();
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The Status code of a watch `ERROR` event (410: the resourceVersion is too old).
fn error_code(line: &[u8]) -> Option<u64> {
    let event: serde_json::Value = serde_json::from_slice(line).ok()?;
    if event["type"] != "ERROR" {
        return None;
    }
    Some(event["object"]["code"].as_u64().unwrap_or(0))
}

/// What one namespace's watch delivered, for the chaos watch check: every event's
/// resourceVersion (the store revision), pod name and whether it was a deletion.
#[derive(Clone, Debug, Default)]
pub struct WatchHistory {
    pub namespace: String,
    /// The API server the watch went through (its URL).
    pub server: String,
    /// The highest resourceVersion the stream is known complete through (events, bookmarks).
    pub through_rv: i64,
    /// (resourceVersion, pod name, deleted)
    pub events: Vec<(i64, String, bool)>,
    /// Every list; more than one means the watch lost its place (410 Gone) and re-listed.
    /// The events after one list and before the next are one unbroken watch.
    pub lists: Vec<ListPoint>,
}

/// One list of a recorded watch.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ListPoint {
    /// Seconds since the load's start.
    pub t: f64,
    /// The list's resourceVersion.
    pub rv: i64,
    /// Events recorded before it.
    pub events_before: usize,
}

impl WatchHistory {
    fn listed(&mut self, rv: &str, t: f64) {
        let rv = rv.parse().unwrap_or(0);
        self.lists.push(ListPoint {
            t,
            rv,
            events_before: self.events.len(),
        });
        self.through_rv = self.through_rv.max(rv);
    }

    fn progressed(&mut self, rv: &str) {
        if let Ok(rv) = rv.parse::<i64>() {
            self.through_rv = self.through_rv.max(rv);
        }
    }
}

/// Watches the run's pods in one namespace, telling `tracker` what it sees.
pub struct NamespaceWatch<T: PodObserver> {
    pub client: ApiClient,
    pub namespace: String,
    pub namespace_index: u32,
    /// `key=value` label selector of the run.
    pub selector: String,
    pub tracker: Arc<Mutex<T>>,
    pub run_start: Instant,
    /// Where to record the events, when asked to (`kemu run` with a chaos plan).
    pub history: Option<Arc<Mutex<WatchHistory>>>,
}

impl<T: PodObserver> NamespaceWatch<T> {
    fn path(&self) -> String {
        format!(
            "/api/v1/namespaces/{}/pods?labelSelector={}",
            self.namespace,
            encode(&self.selector)
        )
    }

    fn now(&self) -> f64 {
        self.run_start.elapsed().as_secs_f64()
    }

    async fn list(&self) -> anyhow::Result<String> {
        let response = self
            .client
            .call(
                "list",
                "pods",
                Method::GET,
                &self.path(),
                None,
                Default::default(),
            )
            .await?;
        if !response.status.is_success() {
            anyhow::bail!("list pods answered {}", response.status);
        }
        let t = self.now();
        let list: PodList = serde_json::from_slice(&response.body)?;
        self.tracker
            .lock()
            .relisted(self.namespace_index, &list.items, t);
        if let Some(h) = &self.history {
            h.lock().listed(&list.metadata.resource_version, t);
        }
        Ok(list.metadata.resource_version)
    }

    /// Runs until `stop` turns true. `ready` fires once the first watch is open: events from
    /// then on are seen.
    pub async fn run(self, ready: oneshot::Sender<()>, mut stop: watch::Receiver<bool>) {
        let mut ready = Some(ready);
        let mut state = State::Listing;
        let mut failures = 0u32;
        loop {
            if *stop.borrow() {
                return;
            }
            if failures > 0 {
                let backoff = retry_pause(failures);
                tokio::select! {
                    biased;
                    _ = stop.wait_for(|s| *s) => return,
                    _ = tokio::time::sleep(backoff) => {}
                }
            }
            let rv = match &state {
                State::Listing => match self.list().await {
                    Ok(rv) => {
                        state = State::Watching { rv: rv.clone() };
                        rv
                    }
                    Err(e) => {
                        tracing::warn!(namespace = %self.namespace, "load watch: list failed: {e:#}");
                        failures += 1;
                        continue;
                    }
                },
                State::Watching { rv } => rv.clone(),
            };
            let path = format!(
                "{}&watch=true&allowWatchBookmarks=true&timeoutSeconds=600&resourceVersion={}",
                self.path(),
                encode(&rv)
            );
            let (status, body) = match self.client.stream("pods", &path).await {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(namespace = %self.namespace, "load watch: {e:#}");
                    failures += 1;
                    continue;
                }
            };
            if status.as_u16() == 410 {
                state = State::Listing;
                continue;
            }
            if !status.is_success() {
                tracing::warn!(namespace = %self.namespace, "load watch answered {status}");
                failures += 1;
                continue;
            }
            failures = 0;
            if let Some(ready) = ready.take() {
                let _ = ready.send(());
            }
            let mut lines = LineReader::new(body);
            loop {
                let line = tokio::select! {
                    biased;
                    _ = stop.wait_for(|s| *s) => return,
                    line = lines.next_line() => line,
                };
                let line = match line {
                    Ok(Some(line)) => line,
                    Ok(None) => break,
                    Err(e) => {
                        tracing::debug!(namespace = %self.namespace, "load watch stream: {e:#}");
                        break;
                    }
                };
                let t = self.now();
                let event: WatchEvent = match serde_json::from_slice(&line) {
                    Ok(e) => e,
                    // An ERROR event's object is a Status, which is no pod.
                    Err(_) if error_code(&line).is_some() => {
                        if error_code(&line) == Some(410) {
                            state = State::Listing;
                        } else {
                            failures += 1;
                        }
                        break;
                    }
                    Err(e) => {
                        tracing::warn!(namespace = %self.namespace, "load watch: bad event: {e}");
                        continue;
                    }
                };
                let kind = match event.kind.as_str() {
                    "ADDED" => EventKind::Added,
                    "MODIFIED" => EventKind::Modified,
                    "DELETED" => EventKind::Deleted,
                    "BOOKMARK" => {
                        let rv = event.object.metadata.resource_version;
                        if let Some(h) = &self.history {
                            h.lock().progressed(&rv);
                        }
                        if !rv.is_empty() {
                            state = State::Watching { rv };
                        }
                        continue;
                    }
                    _ => {
                        // ERROR: 410 Gone means the rv was compacted away: re-list.
                        if error_code(&line) == Some(410) {
                            state = State::Listing;
                        } else {
                            failures += 1;
                        }
                        break;
                    }
                };
                let pod = event.object;
                if let Some(h) = &self.history {
                    let mut h = h.lock();
                    let rv = pod.metadata.resource_version.parse().unwrap_or(0);
                    h.events
                        .push((rv, pod.metadata.name.clone(), kind == EventKind::Deleted));
                    h.through_rv = h.through_rv.max(rv);
                }
                if !pod.metadata.resource_version.is_empty() {
                    state = State::Watching {
                        rv: pod.metadata.resource_version.clone(),
                    };
                }
                self.tracker.lock().observe(kind, &pod, t);
            }
        }
    }
}

/// Failed attempts in a row retried after the shortest pause (about two seconds of them).
const QUICK_RETRIES: u32 = 20;

/// The pause before the next list or watch after `failures` failed attempts in a row: short
/// at first, since while an API server restarts every pause is time this watch misses the
/// pods it measures (a pod is Running when the watch sees it so), then doubling up to 2 s.
fn retry_pause(failures: u32) -> Duration {
    if failures <= QUICK_RETRIES {
        return Duration::from_millis(100);
    }
    let doublings = (failures - QUICK_RETRIES).min(5);
    Duration::from_millis((100 * 2u64.pow(doublings)).min(2000))
}

#[cfg(test)]
mod tests {
    #[test]
    fn retries_quickly_for_two_seconds_then_backs_off() {
        let pauses: Vec<u64> = [1, 2, 20, 21, 22, 24, 25, 40]
            .iter()
            .map(|&n| super::retry_pause(n).as_millis() as u64)
            .collect();
        assert_eq!(pauses, [100, 100, 100, 200, 400, 1600, 2000, 2000]);
    }

    #[test]
    fn encodes_selectors() {
        assert_eq!(
            super::encode("kemu.dev/load-run=ab12"),
            "kemu.dev%2Fload-run%3Dab12"
        );
    }
}
