//! Recovery of the cluster's *service* after each action, beside the store-write recovery of
//! [`availability`](super::availability): how long until writes through the API servers
//! succeed again (API probes, one per server), and — when a load runs alongside — until pods
//! created after the action are scheduled and reach Running again.
//!
//! What is measured depends on what the action took away:
//! - every disruptive action: **API writes** — the first probe write *sent after* the action
//!   that succeeded, on any API server; for `kill-apiserver`, on the killed server itself;
//! - `kill-scheduler`: **pods scheduled** — the first pod created after the action that was
//!   seen bound to a node;
//! - `kill-nodehost`: **pods Running** on the killed host's own nodes; any other action: pods
//!   Running anywhere — the first pod created after the action that was seen Running.
//!
//! A measure with nothing to measure (no pod created after the action: the load was past its
//! create phase) says so in `note` and does not fail; one whose writes or pods were sent after
//! the action and never succeeded fails the check.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::actions::{ActionKind, ActionRecord};
use super::availability::{first_ok_after, percentile, timeline, Bucket, Probe, RecoverStats};

/// The probes one API server answered.
#[derive(Clone, Debug, Default)]
pub struct ServerProbes {
    pub server: String,
    pub probes: Vec<Probe>,
    /// Why probe writes failed, counted.
    pub errors: BTreeMap<String, u64>,
}

/// One pod of the load, on the chaos run's clock (seconds since its start).
#[derive(Clone, Debug, PartialEq)]
pub struct PodTimes {
    pub create_sent_s: f64,
    pub created: bool,
    pub scheduled_s: Option<f64>,
    pub running_s: Option<f64>,
    pub node: Option<String>,
}

/// One measure after one action.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Measure {
    /// `api_writes`, `pods_scheduled` or `pods_running`.
    pub measure: String,
    /// Where it was measured: an API server, `any API server`, a node host's nodes, `any node`.
    pub scope: String,
    /// Seconds from the action to the first success sent after it.
    pub recover_s: Option<f64>,
    /// Why there is no figure although nothing failed (nothing was sent after the action).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Measure {
    /// Something was sent after the action and nothing of it succeeded.
    fn failed(&self) -> bool {
        self.recover_s.is_none() && self.note.is_none()
    }
}

/// Every measure after one disruptive action.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServiceRecovery {
    pub action: String,
    pub kind: String,
    pub at_s: f64,
    pub measures: Vec<Measure>,
}

/// Recovery statistics of one measure after one kind of action.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServiceStats {
    pub kind: String,
    pub measure: String,
    #[serde(flatten)]
    pub stats: RecoverStats,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServiceReport {
    /// No measure had its writes or pods sent after the action and never succeed.
    pub passed: bool,
    /// API probe writes over every server.
    pub api_servers: Vec<String>,
    pub api_probes: u64,
    pub api_failed: u64,
    pub api_error_rate: f64,
    /// Why API probe writes failed (`http 503`, `timeout`, `connection: …`), counted.
    pub api_errors: BTreeMap<String, u64>,
    /// API probe outcomes per second (all servers together).
    pub api_timeline: Vec<Bucket>,
    pub recoveries: Vec<ServiceRecovery>,
    pub stats: Vec<ServiceStats>,
}

pub(crate) fn api_measure(servers: &[ServerProbes], action: &ActionRecord) -> Option<Measure> {
    if servers.is_empty() {
        return None;
    }
    let killed = (action.kind == ActionKind::KillApiserver)
        .then(|| servers.iter().find(|s| s.server == action.target))
        .flatten();
    let (scope, (sent_after, recover_s)) = match killed {
        Some(s) => (
            s.server.clone(),
            first_ok_after(s.probes.iter(), action.at_s),
        ),
        None => (
            "any API server".to_string(),
            first_ok_after(servers.iter().flat_map(|s| s.probes.iter()), action.at_s),
        ),
    };
    Some(Measure {
        measure: "api_writes".into(),
        scope,
        recover_s,
        note: (!sent_after).then(|| "no probe was sent after it".into()),
    })
}

/// The pod measure of `action`: `pods_scheduled` after a scheduler kill, else `pods_running`
/// (on the killed host's nodes after a node-host kill). `host_of` maps a node to its host.
fn pod_measure(
    pods: &[PodTimes],
    action: &ActionRecord,
    host_of: &dyn Fn(&str) -> Option<String>,
) -> Measure {
    let at = action.at_s;
    let scheduler = action.kind == ActionKind::KillScheduler;
    let host = (action.kind == ActionKind::KillNodehost).then_some(action.target.as_str());
    let candidates = pods.iter().filter(|p| p.created && p.create_sent_s >= at);
    let mut sent_after = false;
    let mut best: Option<f64> = None;
    for p in candidates {
        if let Some(host) = host {
            // Only pods that landed on the killed host's nodes say when it serves again.
            match p.node.as_deref().map(host_of) {
                Some(Some(h)) if h == host => {}
                _ => continue,
            }
        }
        sent_after = true;
        let seen = if scheduler {
            p.scheduled_s
        } else {
            p.running_s
        };
        if let Some(t) = seen {
            best = Some(best.map_or(t - at, |b: f64| b.min(t - at)));
        }
    }
    let scope = match host {
        Some(h) => format!("nodes of {h}"),
        None if scheduler => "any scheduler".into(),
        None => "any node".into(),
    };
    let note = (!sent_after).then(|| match host {
        Some(_) => "no pod created after it was bound to that host".to_string(),
        None => "no pod was created after it".to_string(),
    });
    Measure {
        measure: if scheduler {
            "pods_scheduled"
        } else {
            "pods_running"
        }
        .into(),
        scope,
        recover_s: best,
        note,
    }
}

impl ServiceReport {
    /// ` (timeout 3, http 503 1)`, or nothing when no probe failed.
    pub fn errors_line(&self) -> String {
        if self.api_errors.is_empty() {
            return String::new();
        }
        let errors: Vec<String> = self
            .api_errors
            .iter()
            .map(|(e, n)| format!("{e} {n}"))
            .collect();
        format!(" ({})", errors.join(", "))
    }

    /// `kill-store-leader api_writes p50 0.91s max 1.20s (19); …`
    pub fn stats_line(&self) -> String {
        if self.stats.is_empty() {
            return "nothing to recover from".into();
        }
        self.stats
            .iter()
            .map(|s| {
                format!(
                    "{} {} p50 {:.2}s p99 {:.2}s max {:.2}s ({})",
                    s.kind, s.measure, s.stats.p50_s, s.stats.p99_s, s.stats.max_s, s.stats.count
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// The load's pods and the node host each node belongs to (node name → host name).
pub type LoadPods<'a> = (&'a [PodTimes], &'a dyn Fn(&str) -> Option<String>);

/// The service report of a run: API recovery from `servers`' probes and, when `pods` is
/// given (a load ran alongside), pod recovery.
pub fn analyse(
    servers: &[ServerProbes],
    pods: Option<LoadPods<'_>>,
    actions: &[ActionRecord],
) -> ServiceReport {
    let recoveries: Vec<ServiceRecovery> = actions
        .iter()
        .filter(|a| a.disruptive)
        .map(|a| {
            let mut measures: Vec<Measure> = api_measure(servers, a).into_iter().collect();
            if let Some((pods, host_of)) = pods {
                measures.push(pod_measure(pods, a, host_of));
            }
            ServiceRecovery {
                action: a.describe(),
                kind: a.kind.as_str().into(),
                at_s: a.at_s,
                measures,
            }
        })
        .collect();
    let mut grouped: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    for r in &recoveries {
        for m in &r.measures {
            if let Some(t) = m.recover_s {
                grouped
                    .entry((r.kind.clone(), m.measure.clone()))
                    .or_default()
                    .push(t);
            }
        }
    }
    let stats = grouped
        .into_iter()
        .map(|((kind, measure), mut times)| {
            times.sort_by(f64::total_cmp);
            ServiceStats {
                kind,
                measure,
                stats: RecoverStats {
                    count: times.len(),
                    p50_s: percentile(&times, 0.50),
                    p99_s: percentile(&times, 0.99),
                    max_s: times.last().copied().unwrap_or(0.0),
                },
            }
        })
        .collect();
    let api_probes: u64 = servers.iter().map(|s| s.probes.len() as u64).sum();
    let api_failed: u64 = servers
        .iter()
        .map(|s| s.probes.iter().filter(|p| !p.ok).count() as u64)
        .sum();
    ServiceReport {
        passed: recoveries
            .iter()
            .all(|r| r.measures.iter().all(|m| !m.failed())),
        api_servers: servers.iter().map(|s| s.server.clone()).collect(),
        api_probes,
        api_failed,
        api_error_rate: if api_probes == 0 {
            0.0
        } else {
            api_failed as f64 / api_probes as f64
        },
        api_errors: servers.iter().fold(BTreeMap::new(), |mut all, s| {
            for (error, n) in &s.errors {
                *all.entry(error.clone()).or_default() += n;
            }
            all
        }),
        api_timeline: timeline(servers.iter().flat_map(|s| s.probes.iter()), 1.0),
        recoveries,
        stats,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn action(kind: ActionKind, target: &str, at: f64) -> ActionRecord {
        ActionRecord {
            at_s: at,
            kind,
            target: target.into(),
            detail: String::new(),
            disruptive: true,
        }
    }

    fn probe(sent: f64, done: f64, ok: bool) -> Probe {
        Probe {
            sent_s: sent,
            done_s: done,
            ok,
        }
    }

    fn pod(sent: f64, scheduled: Option<f64>, running: Option<f64>, node: &str) -> PodTimes {
        PodTimes {
            create_sent_s: sent,
            created: true,
            scheduled_s: scheduled,
            running_s: running,
            node: Some(node.into()),
        }
    }

    fn host_of(node: &str) -> Option<String> {
        let i: usize = node.strip_prefix("node-")?.parse().ok()?;
        Some(format!("nodehost-{}", i / 10))
    }

    #[test]
    fn a_killed_api_server_is_measured_on_its_own_probes() {
        let servers = vec![
            ServerProbes {
                server: "apiserver-0".into(),
                probes: vec![probe(10.1, 10.2, true)],
                ..Default::default()
            },
            ServerProbes {
                server: "apiserver-1".into(),
                probes: vec![
                    probe(9.9, 12.0, false),
                    probe(10.5, 11.0, false),
                    probe(12.5, 12.6, true),
                ],
                errors: BTreeMap::from([("timeout".to_string(), 2)]),
            },
        ];
        let r = analyse(
            &servers,
            None,
            &[action(ActionKind::KillApiserver, "apiserver-1", 10.0)],
        );
        let m = &r.recoveries[0].measures[0];
        assert_eq!(m.scope, "apiserver-1");
        assert!((m.recover_s.unwrap() - 2.6).abs() < 1e-9, "{m:?}");
        assert!(r.passed);
        assert_eq!((r.api_probes, r.api_failed), (4, 2));
        assert_eq!(r.api_errors["timeout"], 2);
    }

    #[test]
    fn an_api_that_never_answers_again_fails() {
        let servers = vec![ServerProbes {
            server: "apiserver-0".into(),
            probes: vec![probe(10.5, 13.5, false), probe(11.0, 14.0, false)],
            ..Default::default()
        }];
        let r = analyse(
            &servers,
            None,
            &[action(ActionKind::KillStoreLeader, "store-0", 10.0)],
        );
        assert_eq!(r.recoveries[0].measures[0].recover_s, None);
        assert!(!r.passed);
    }

    #[test]
    fn a_killed_node_host_is_measured_on_its_own_nodes() {
        let pods = vec![
            pod(4.0, Some(4.1), Some(4.2), "node-3"),
            // Created after the kill on another host: Running at once, says nothing.
            pod(5.5, Some(5.6), Some(5.7), "node-15"),
            pod(6.0, Some(6.1), Some(9.0), "node-4"),
        ];
        let r = analyse(
            &[],
            Some((&pods, &host_of)),
            &[action(ActionKind::KillNodehost, "nodehost-0", 5.0)],
        );
        let m = &r.recoveries[0].measures[0];
        assert_eq!(m.measure, "pods_running");
        assert!((m.recover_s.unwrap() - 4.0).abs() < 1e-9, "{m:?}");
        assert!(r.passed);
        assert_eq!(r.stats[0].kind, "kill-nodehost");
    }

    #[test]
    fn scheduler_kills_measure_scheduling_and_pods_never_scheduled_fail() {
        let pods = vec![pod(6.0, None, None, "")];
        let r = analyse(
            &[],
            Some((&pods, &host_of)),
            &[action(ActionKind::KillScheduler, "scheduler-0", 5.0)],
        );
        let m = &r.recoveries[0].measures[0];
        assert_eq!(m.measure, "pods_scheduled");
        assert_eq!(m.recover_s, None);
        assert!(!r.passed);
    }

    #[test]
    fn nothing_sent_after_an_action_is_a_note_not_a_failure() {
        let pods = vec![pod(1.0, Some(1.1), Some(1.2), "node-0")];
        let r = analyse(
            &[],
            Some((&pods, &host_of)),
            &[action(ActionKind::KillStoreLeader, "store-1", 5.0)],
        );
        let m = &r.recoveries[0].measures[0];
        assert!(m.note.is_some());
        assert!(r.passed);
    }
}
