//! The cluster's nodes through a run: how many, how many were Ready at its start and at its
//! end, and every time a node's Ready condition left True (to False or Unknown: the node
//! lifecycle controller saw no heartbeat for its grace period). A run holding many nodes
//! reads here whether their heartbeats kept up.

use std::collections::HashMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::cl2::objects::{Objects, Resource};
use crate::client::{ApiClient, LineReader};
use crate::watcher::encode;

/// How many transitions the report lists one by one.
const LISTED: usize = 50;

/// What the run saw of the nodes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodesReport {
    /// Nodes seen over the run.
    pub nodes: u64,
    pub ready_at_start: u64,
    pub ready_at_end: u64,
    /// Transitions of a node's Ready condition from True to anything else.
    pub not_ready_transitions: u64,
    /// The first transitions.
    pub transitions: Vec<NodeTransition>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeTransition {
    pub node: String,
    /// Seconds since the run's start.
    pub at_s: f64,
    /// The Ready condition's new status (`False`, `Unknown`) and reason.
    pub status: String,
    pub reason: String,
}

/// The Ready condition of a node: (status, reason).
fn ready_condition(node: &Json) -> (String, String) {
    node["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .map(|c| {
            (
                c["status"].as_str().unwrap_or("Unknown").to_string(),
                c["reason"].as_str().unwrap_or("").to_string(),
            )
        })
        .unwrap_or_else(|| ("Unknown".into(), String::new()))
}

/// The node states and the transitions seen so far.
#[derive(Default)]
struct Nodes {
    ready: HashMap<String, bool>,
    seen: u64,
    report: NodesReport,
}

impl Nodes {
    fn observe(&mut self, node: &Json, at_s: f64) {
        let Some(name) = node["metadata"]["name"].as_str() else {
            return;
        };
        let (status, reason) = ready_condition(node);
        let ready = status == "True";
        match self.ready.insert(name.to_string(), ready) {
            None => self.seen += 1,
            Some(true) if !ready => {
                self.report.not_ready_transitions += 1;
                if self.report.transitions.len() < LISTED {
                    self.report.transitions.push(NodeTransition {
                        node: name.to_string(),
                        at_s,
                        status,
                        reason,
                    });
                }
            }
            Some(_) => {}
        }
    }

    fn ready_count(&self) -> u64 {
        self.ready.values().filter(|r| **r).count() as u64
    }
}

/// Every node and the list's resourceVersion, a page at a time.
async fn list(objects: &Objects) -> Option<(Vec<Json>, String)> {
    let nodes = Resource {
        base: "/api/v1".into(),
        plural: "nodes".into(),
        namespaced: false,
    };
    objects.list_with_version(&nodes, "").await
}

/// Lists and watches the nodes from now until `stop`; what they did meanwhile.
pub async fn watch_nodes(
    client: ApiClient,
    run_start: Instant,
    mut stop: watch::Receiver<bool>,
) -> NodesReport {
    let objects = Objects::new(client.clone());
    let mut nodes = Nodes::default();
    let mut first = true;
    'relist: loop {
        let listed = tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s) => break 'relist,
            listed = list(&objects) => listed,
        };
        let Some((items, mut rv)) = listed else {
            tokio::select! {
                biased;
                _ = stop.wait_for(|s| *s) => break 'relist,
                _ = tokio::time::sleep(Duration::from_secs(1)) => continue 'relist,
            }
        };
        let at_s = run_start.elapsed().as_secs_f64();
        for item in &items {
            nodes.observe(item, at_s);
        }
        if first {
            nodes.report.ready_at_start = nodes.ready_count();
            first = false;
        }
        loop {
            let path = format!(
                "/api/v1/nodes?watch=true&allowWatchBookmarks=true&resourceVersion={}",
                encode(&rv)
            );
            let opened = tokio::select! {
                biased;
                _ = stop.wait_for(|s| *s) => break 'relist,
                opened = client.stream("nodes", &path) => opened,
            };
            let Ok((status, body)) = opened else {
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            };
            if status.as_u16() == 410 {
                continue 'relist;
            }
            if !status.is_success() {
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
            let mut lines = LineReader::new(body);
            loop {
                let line = tokio::select! {
                    biased;
                    _ = stop.wait_for(|s| *s) => break 'relist,
                    line = lines.next_line() => line,
                };
                let Ok(Some(line)) = line else { break };
                let Ok(event) = serde_json::from_slice::<Json>(&line) else {
                    continue;
                };
                let object = &event["object"];
                if event["type"] == "ERROR" {
                    if object["code"] == 410 {
                        continue 'relist;
                    }
                    break;
                }
                if let Some(v) = object["metadata"]["resourceVersion"].as_str() {
                    rv = v.to_string();
                }
                match event["type"].as_str() {
                    Some("ADDED" | "MODIFIED") => {
                        nodes.observe(object, run_start.elapsed().as_secs_f64())
                    }
                    Some("DELETED") => {
                        if let Some(name) = object["metadata"]["name"].as_str() {
                            nodes.ready.remove(name);
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    nodes.report.nodes = nodes.seen;
    nodes.report.ready_at_end = nodes.ready_count();
    nodes.report
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, status: &str, reason: &str) -> Json {
        json!({"metadata": {"name": name}, "status": {"conditions": [
            {"type": "MemoryPressure", "status": "False"},
            {"type": "Ready", "status": status, "reason": reason}]}})
    }

    #[test]
    fn a_ready_node_turning_unknown_is_a_transition() {
        let mut nodes = Nodes::default();
        nodes.observe(&node("a", "True", "KubeletReady"), 0.0);
        nodes.observe(&node("b", "False", "KubeletNotReady"), 0.0);
        nodes.observe(&node("a", "True", "KubeletReady"), 10.0);
        assert_eq!(nodes.report.not_ready_transitions, 0);
        nodes.observe(&node("a", "Unknown", "NodeStatusUnknown"), 50.0);
        // b was never Ready: no transition; a staying Unknown is not a second one.
        nodes.observe(&node("b", "False", "KubeletNotReady"), 51.0);
        nodes.observe(&node("a", "Unknown", "NodeStatusUnknown"), 52.0);
        assert_eq!(nodes.report.not_ready_transitions, 1);
        assert_eq!(
            nodes.report.transitions,
            vec![NodeTransition {
                node: "a".into(),
                at_s: 50.0,
                status: "Unknown".into(),
                reason: "NodeStatusUnknown".into(),
            }]
        );
        assert_eq!(nodes.seen, 2);
        assert_eq!(nodes.ready_count(), 0);
        nodes.observe(&node("a", "True", "KubeletReady"), 60.0);
        assert_eq!(nodes.ready_count(), 1);
    }
}
