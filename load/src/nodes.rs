//! The cluster's nodes through a run: how many, how many were Ready at its start and at its
//! end, and every time a node's Ready condition left True (to False or Unknown: the node
//! lifecycle controller saw no heartbeat for its grace period). A run holding many nodes
//! reads here whether their heartbeats kept up.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::cl2::objects::{Objects, Resource, Seen};
use crate::client::ApiClient;

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

/// Lists and watches the nodes from now until `stop`; what they did meanwhile.
pub async fn watch_nodes(
    client: ApiClient,
    run_start: Instant,
    stop: watch::Receiver<bool>,
) -> NodesReport {
    let objects = Objects::new(client);
    let resource = Resource {
        base: "/api/v1".into(),
        plural: "nodes".into(),
        namespaced: false,
    };
    let mut nodes = Nodes::default();
    let mut first = true;
    objects
        .list_and_watch(&resource, "", stop, |seen| {
            let at_s = run_start.elapsed().as_secs_f64();
            match seen {
                Seen::Listed(items) => {
                    for item in &items {
                        nodes.observe(item, at_s);
                    }
                    if first {
                        nodes.report.ready_at_start = nodes.ready_count();
                        first = false;
                    }
                }
                Seen::Applied(node) => nodes.observe(&node, at_s),
                Seen::Deleted(node) => {
                    if let Some(name) = node["metadata"]["name"].as_str() {
                        nodes.ready.remove(name);
                    }
                }
            }
        })
        .await;
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
