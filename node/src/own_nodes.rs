//! One watch of the host's own Nodes, so a kubelet notices when its Node's `Ready` condition on
//! the server is no longer the one it posted.
//!
//! A kubelet checks its Node every `nodeStatusUpdateFrequency` (10 s) against what it would
//! post and posts at once when they differ. The usual difference is the node lifecycle
//! controller's: it marks a node `Unknown` when it has not seen the node's Lease renewed within
//! its grace period, which a controller whose lease watch fell behind can do to a node that
//! renewed all along. Without this check an emulated node would stay `NotReady` until its next
//! periodic report, up to five minutes later. The API server labels each Node with the host
//! that wrote it (`kemu.dev/node-host`), so one watch per host, narrowed by that label, carries
//! exactly the host's Nodes.

use actix::Addr;
use api::client::{Client, ListParams};
use api::informer::jittered;
use api::protocol::WatchEventKind;
use api::resources;
use serde::Deserialize;

use crate::kubelet::{next_frame, open_watch, Kubelet, ServerSaysNotReady, REWATCH_MIN};

/// The label the API server puts on a Node with the name of the node host that wrote it.
pub const HOST_LABEL: &str = "kemu.dev/node-host";

/// The part of a Node this watch reads.
#[derive(Deserialize)]
struct NodeView {
    metadata: Named,
    #[serde(default)]
    status: StatusView,
}

#[derive(Deserialize)]
struct Named {
    #[serde(default)]
    name: String,
}

#[derive(Default, Deserialize)]
struct StatusView {
    #[serde(default)]
    conditions: Vec<Condition>,
}

#[derive(Deserialize)]
struct Condition {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    status: String,
}

/// The node's name when the object says it is not Ready (a `Ready` condition whose status is
/// not `True`); `None` for a Ready node, one without the condition yet (just registered), or
/// bytes that are not a Node.
fn not_ready(object: &[u8]) -> Option<String> {
    let node: NodeView = serde_json::from_slice(object).ok()?;
    let ready = node.status.conditions.iter().find(|c| c.kind == "Ready")?;
    (ready.status != "True").then_some(node.metadata.name)
}

/// Which of the host's kubelets `name` is: names are `<prefix><first_index + i>`.
fn kubelet_index(name: &str, prefix: &str, first_index: usize, nodes: usize) -> Option<usize> {
    let number = name.strip_prefix(prefix)?;
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let i = number.parse::<usize>().ok()?.checked_sub(first_index)?;
    (i < nodes).then_some(i)
}

/// Watches the Nodes labelled with `host` until every kubelet is gone, and tells a kubelet when
/// the server holds its Node not Ready. Re-opened from the last version seen when it breaks;
/// after a 410 Gone it starts over, the server replaying the Nodes as they are.
pub async fn watch(
    client: Client,
    host: String,
    prefix: String,
    first_index: usize,
    kubelets: Vec<Addr<Kubelet>>,
) {
    let nodes = resources::find("", "v1", "nodes").expect("nodes are served");
    let selector = format!("{HOST_LABEL}={host}");
    let mut rv: Option<String> = None;
    let mut backoff = REWATCH_MIN;
    while kubelets.iter().any(Addr::connected) {
        let mut params = ListParams::default().labels(selector.clone()).bookmarks();
        params.resource_version = rv.clone();
        let Some(mut stream) =
            open_watch(&client, nodes, &params, &mut backoff, "this host's nodes").await
        else {
            continue;
        };
        while let Some(frame) = next_frame(&mut stream, &mut rv, "this host's nodes").await {
            backoff = REWATCH_MIN;
            rv = Some(frame.resource_version.to_string());
            if !matches!(frame.kind, WatchEventKind::Added | WatchEventKind::Modified) {
                continue;
            }
            let Some(name) = not_ready(&frame.object) else {
                continue;
            };
            if let Some(kubelet) = kubelet_index(&name, &prefix, first_index, kubelets.len())
                .and_then(|i| kubelets.get(i))
            {
                kubelet.do_send(ServerSaysNotReady);
            }
        }
        tokio::time::sleep(jittered(backoff)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_ready_condition_that_is_not_true_counts() {
        let node = |conditions: &str| {
            format!(
                r#"{{"metadata":{{"name":"node-7","uid":"u"}},"status":{{"conditions":{conditions},"capacity":{{}}}}}}"#
            )
        };
        let unknown = node(
            r#"[{"type":"MemoryPressure","status":"Unknown"},{"type":"Ready","status":"Unknown","reason":"NodeStatusUnknown"}]"#,
        );
        assert_eq!(not_ready(unknown.as_bytes()).as_deref(), Some("node-7"));
        let not = node(r#"[{"type":"Ready","status":"False"}]"#);
        assert_eq!(not_ready(not.as_bytes()).as_deref(), Some("node-7"));
        let ready =
            node(r#"[{"type":"DiskPressure","status":"False"},{"type":"Ready","status":"True"}]"#);
        assert_eq!(not_ready(ready.as_bytes()), None);
        assert_eq!(not_ready(node("[]").as_bytes()), None);
        assert_eq!(not_ready(br#"{"metadata":{"name":"node-7"}}"#), None);
        assert_eq!(not_ready(b"not json"), None);
    }

    #[test]
    fn names_map_to_the_hosts_kubelets_only() {
        assert_eq!(kubelet_index("node-5000", "node-", 5000, 1000), Some(0));
        assert_eq!(kubelet_index("node-5999", "node-", 5000, 1000), Some(999));
        assert_eq!(kubelet_index("node-6000", "node-", 5000, 1000), None);
        assert_eq!(kubelet_index("node-4999", "node-", 5000, 1000), None);
        assert_eq!(kubelet_index("other-5001", "node-", 5000, 1000), None);
        assert_eq!(kubelet_index("node-", "node-", 0, 10), None);
        assert_eq!(kubelet_index("node-+1", "node-", 0, 10), None);
        assert_eq!(kubelet_index("node-00003", "node-", 0, 10), Some(3));
    }
}
