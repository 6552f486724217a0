//! Questions the launcher asks a running cluster: who leads the store, is an API server ready,
//! how many nodes are Ready, how many pods are in each phase.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use store::client::{Client, ClientConfig};

use crate::api_access::ApiAccess;
use crate::netns::NetAccess;

/// One store member's view.
#[derive(Clone, Debug, serde::Serialize)]
pub struct MemberView {
    pub name: String,
    pub endpoint: SocketAddr,
    pub leader: Option<String>,
    pub term: u64,
    pub revision: i64,
}

/// Asks every member for its status (members that do not answer within a second are left out).
pub async fn store_members(
    net: &NetAccess,
    certs: PathBuf,
    endpoints: Vec<(String, SocketAddr)>,
) -> Vec<MemberView> {
    let all: Vec<SocketAddr> = endpoints.iter().map(|(_, e)| *e).collect();
    let fut = async move {
        let Ok(client) = Client::new(ClientConfig::new(all), &certs, store::config::STORE_ADMIN)
        else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (name, endpoint) in endpoints {
            if let Ok(Ok(s)) =
                tokio::time::timeout(Duration::from_secs(1), client.status_of(endpoint)).await
            {
                out.push(MemberView {
                    name,
                    endpoint,
                    leader: (!s.leader_name.is_empty()).then_some(s.leader_name),
                    term: s.term,
                    revision: s.revision,
                });
            }
        }
        out
    };
    net.run(fut).await.unwrap_or_default()
}

/// The leader a majority of the `members` names, with the highest term seen. A member that
/// just restarted may not know the leader yet; it does not spoil the answer.
pub fn agreed_leader(views: &[MemberView], members: usize) -> Option<(String, u64)> {
    let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
    for v in views {
        if let Some(l) = &v.leader {
            *votes.entry(l.as_str()).or_insert(0) += 1;
        }
    }
    let (leader, n) = votes.into_iter().max_by_key(|(_, n)| *n)?;
    let term = views.iter().map(|v| v.term).max().unwrap_or(0);
    (n > members / 2).then(|| (leader.to_string(), term))
}

/// The API server's HTTPS front as the cluster admin (the certificates in `certs`).
fn admin(certs: &Path, addr: SocketAddr) -> Option<ApiAccess> {
    ApiAccess::from_certs(addr, certs, Some("admin")).ok()
}

pub async fn api_ready(net: &NetAccess, certs: &Path, addr: SocketAddr) -> bool {
    let Some(access) = admin(certs, addr) else {
        return false;
    };
    matches!(
        net.run(async move { access.get("/readyz").await.ok() })
            .await,
        Ok(Some((200, _)))
    )
}

async fn list(
    net: &NetAccess,
    certs: &Path,
    addr: SocketAddr,
    path: &'static str,
) -> Option<Vec<Value>> {
    let access = admin(certs, addr)?;
    let (code, body) = net
        .run(async move { access.get(path).await.ok() })
        .await
        .ok()??;
    if code != 200 {
        return None;
    }
    let v: Value = serde_json::from_str(&body).ok()?;
    v.get("items")?.as_array().cloned()
}

/// (Ready, total) nodes, from the nodes' Table (the `STATUS` column kubectl prints: `Ready`,
/// `NotReady`, `Unknown`, with `,SchedulingDisabled` for a cordoned node) without the objects:
/// the launcher asks several times a second while tens of thousands of nodes register, and a
/// full list of them is hundreds of megabytes of JSON.
pub async fn nodes_ready(net: &NetAccess, certs: &Path, addr: SocketAddr) -> Option<(u64, u64)> {
    let access = admin(certs, addr)?;
    let (code, body) = net
        .run(async move {
            access
                .get_table("/api/v1/nodes?includeObject=None")
                .await
                .ok()
        })
        .await
        .ok()??;
    if code != 200 {
        return None;
    }
    ready_in_table(&serde_json::from_str(&body).ok()?)
}

/// (Ready, total) rows of a nodes Table.
fn ready_in_table(table: &Value) -> Option<(u64, u64)> {
    let status = table
        .get("columnDefinitions")?
        .as_array()?
        .iter()
        .position(|c| c.get("name").and_then(Value::as_str) == Some("Status"))?;
    let rows = table.get("rows")?.as_array()?;
    let ready = rows
        .iter()
        .filter(|row| {
            row.pointer(&format!("/cells/{status}"))
                .and_then(Value::as_str)
                .is_some_and(|s| s.split(',').any(|part| part == "Ready"))
        })
        .count();
    Some((ready as u64, rows.len() as u64))
}

/// Pods per phase, across all namespaces.
pub async fn pods_by_phase(
    net: &NetAccess,
    certs: &Path,
    addr: SocketAddr,
) -> Option<BTreeMap<String, u64>> {
    let items = list(net, certs, addr, "/api/v1/pods").await?;
    let mut out = BTreeMap::new();
    for p in items {
        let phase = p
            .pointer("/status/phase")
            .and_then(Value::as_str)
            .unwrap_or("Pending")
            .to_string();
        *out.entry(phase).or_insert(0) += 1;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ready_nodes_are_counted_from_the_status_column() {
        let table = json!({
            "kind": "Table",
            "apiVersion": "meta.k8s.io/v1",
            "columnDefinitions": [
                {"name": "Name", "type": "string"},
                {"name": "Status", "type": "string"},
                {"name": "Roles", "type": "string"},
            ],
            "rows": [
                {"cells": ["node-0", "Ready", "<none>"]},
                {"cells": ["node-1", "NotReady", "<none>"]},
                {"cells": ["node-2", "Ready,SchedulingDisabled", "<none>"]},
                {"cells": ["node-3", "Unknown", "<none>"]},
                {"cells": ["node-4", "NotReady,SchedulingDisabled", "<none>"]},
            ],
        });
        assert_eq!(ready_in_table(&table), Some((2, 5)));
        let empty = json!({"columnDefinitions": [{"name": "Status"}], "rows": []});
        assert_eq!(ready_in_table(&empty), Some((0, 0)));
        // A plain list is not a Table.
        assert_eq!(
            ready_in_table(&json!({"kind": "NodeList", "items": []})),
            None
        );
    }
}
