//! Runs a chaos schedule against a [`ChaosCluster`]: at each action's time, picks the target
//! (the store leader, a random follower, …), sends the signal, and later restores it. Every
//! action and restoration is timestamped on the run's clock.

use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use store::client::Client;
use tokio::task::JoinSet;
use tracing::{info, warn};

use super::actions::{ActionKind, ActionRecord, ScheduledAction};
use super::targets::ChaosCluster;
use super::RunClock;
use cluster::layout::Kind;

/// Who leads the store: the leader name a majority of the answering members report.
pub async fn store_leader(client: &Client, cluster: &dyn ChaosCluster) -> Option<String> {
    let members = cluster.store_members();
    let mut votes: Vec<String> = Vec::new();
    for (_, endpoint) in &members {
        if let Ok(Ok(s)) = tokio::time::timeout(
            Duration::from_millis(700),
            client.status_of(endpoint.clone()),
        )
        .await
        {
            if !s.leader_name.is_empty() {
                votes.push(s.leader_name);
            }
        }
    }
    let first = votes.first()?.clone();
    let agreeing = votes.iter().filter(|v| **v == first).count();
    (agreeing > members.len() / 2).then_some(first)
}

/// Waits up to `timeout` for a leader the members agree on.
async fn wait_for_leader(
    client: &Client,
    cluster: &dyn ChaosCluster,
    timeout: Duration,
) -> Option<String> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(leader) = store_leader(client, cluster).await {
            return Some(leader);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Executes a schedule.
pub struct Executor {
    cluster: Arc<dyn ChaosCluster>,
    client: Client,
    clock: RunClock,
    rng: StdRng,
    records: Arc<Mutex<Vec<ActionRecord>>>,
    /// Members currently down (killed or stopped) and not yet restored: never picked again.
    down: Arc<Mutex<Vec<String>>>,
    restores: JoinSet<()>,
}

impl Executor {
    pub fn new(
        cluster: Arc<dyn ChaosCluster>,
        client: Client,
        clock: RunClock,
        seed: u64,
    ) -> Executor {
        Executor {
            cluster,
            client,
            clock,
            rng: StdRng::seed_from_u64(seed),
            records: Arc::default(),
            down: Arc::default(),
            restores: JoinSet::new(),
        }
    }

    /// Runs `schedule` (times relative to `offset_s` on the run clock) until it ends or `stop`
    /// resolves, then waits for pending restorations. Returns what was done.
    pub async fn run(
        mut self,
        schedule: Vec<ScheduledAction>,
        offset_s: f64,
        stop: impl std::future::Future<Output = ()>,
    ) -> Vec<ActionRecord> {
        tokio::pin!(stop);
        for action in schedule {
            let wait = (offset_s + action.at_s - self.clock.secs()).max(0.0);
            tokio::select! {
                biased;
                _ = &mut stop => break,
                _ = tokio::time::sleep(Duration::from_secs_f64(wait)) => {}
            }
            self.execute(&action).await;
        }
        while self.restores.join_next().await.is_some() {}
        let mut records = self.records.lock().clone();
        records.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
        records
    }

    fn record(&self, kind: ActionKind, target: &str, detail: String, disruptive: bool) {
        let record = ActionRecord {
            at_s: self.clock.secs(),
            kind,
            target: target.to_string(),
            detail,
            disruptive,
        };
        info!(action = kind.as_str(), target, detail = %record.detail, "chaos");
        self.records.lock().push(record);
    }

    /// Picks a random element not currently down.
    fn pick(&mut self, candidates: Vec<String>) -> Option<String> {
        let down = self.down.lock().clone();
        let live: Vec<String> = candidates
            .into_iter()
            .filter(|c| !down.contains(c))
            .collect();
        live.choose(&mut self.rng).cloned()
    }

    async fn execute(&mut self, action: &ScheduledAction) {
        let kind = action.kind;
        let members: Vec<String> = self
            .cluster
            .store_members()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        let target = match kind {
            ActionKind::KillStoreLeader => {
                wait_for_leader(&self.client, &*self.cluster, Duration::from_secs(10)).await
            }
            ActionKind::KillStoreFollower => {
                let leader =
                    wait_for_leader(&self.client, &*self.cluster, Duration::from_secs(10)).await;
                let followers = members
                    .iter()
                    .filter(|m| Some(*m) != leader.as_ref())
                    .cloned()
                    .collect();
                self.pick(followers)
            }
            ActionKind::KillStoreRandom => self.pick(members),
            ActionKind::StopStoreMember => match &action.target {
                Some(t) => Some(t.clone()),
                None => self.pick(members),
            },
            ActionKind::KillApiserver
            | ActionKind::KillScheduler
            | ActionKind::KillNodehost
            | ActionKind::KillControllers => {
                let kind = match kind {
                    ActionKind::KillApiserver => Kind::Apiserver,
                    ActionKind::KillScheduler => Kind::Scheduler,
                    ActionKind::KillNodehost => Kind::Nodehost,
                    _ => Kind::Controllers,
                };
                let names = self.cluster.components(kind).await;
                self.pick(names)
            }
            ActionKind::Kill
            | ActionKind::Stop
            | ActionKind::PartitionHost
            | ActionKind::HealHost
            | ActionKind::Restart
            | ActionKind::Resume => action.target.clone(),
        };
        let Some(target) = target else {
            self.record(kind, "", "no target available".into(), false);
            return;
        };
        let restore = action.restore_after_s;
        match kind {
            ActionKind::StopStoreMember | ActionKind::Stop => {
                match self.cluster.signal(&target, Signal::SIGSTOP).await {
                    Ok(()) => {
                        self.record(kind, &target, String::new(), true);
                        self.down.lock().push(target.clone());
                        self.schedule_restore(target, restore.unwrap_or(3.0), ActionKind::Resume);
                    }
                    Err(e) => self.record(kind, &target, format!("{e:#}"), false),
                }
            }
            ActionKind::PartitionHost => match self.cluster.set_link(&target, false) {
                Ok(()) => {
                    self.record(kind, &target, String::new(), true);
                    if let Some(after) = restore {
                        self.schedule_restore(target, after, ActionKind::HealHost);
                    }
                }
                Err(e) => self.record(kind, &target, format!("{e:#}"), false),
            },
            ActionKind::HealHost => {
                let detail = self
                    .cluster
                    .set_link(&target, true)
                    .err()
                    .map(|e| format!("{e:#}"))
                    .unwrap_or_default();
                self.record(kind, &target, detail, false);
            }
            ActionKind::Restart | ActionKind::Resume => {}
            _ => match self.cluster.signal(&target, Signal::SIGKILL).await {
                Ok(()) => {
                    self.record(kind, &target, String::new(), true);
                    if let Some(after) = restore {
                        self.down.lock().push(target.clone());
                        self.schedule_restore(target, after, ActionKind::Restart);
                    }
                }
                Err(e) => self.record(kind, &target, format!("{e:#}"), false),
            },
        }
    }

    /// Restores `target` after `after_s` seconds, in the background.
    fn schedule_restore(&mut self, target: String, after_s: f64, how: ActionKind) {
        let cluster = self.cluster.clone();
        let records = self.records.clone();
        let down = self.down.clone();
        let clock = self.clock;
        self.restores.spawn(async move {
            tokio::time::sleep(Duration::from_secs_f64(after_s)).await;
            let detail = match how {
                ActionKind::Resume => cluster
                    .signal(&target, Signal::SIGCONT)
                    .await
                    .err()
                    .map(|e| format!("{e:#}")),
                ActionKind::HealHost => cluster
                    .set_link(&target, true)
                    .err()
                    .map(|e| format!("{e:#}")),
                _ => match cluster.restart(&target) {
                    Ok(true) => None,
                    Ok(false) => Some("restarted by the supervisor".into()),
                    Err(e) => Some(format!("{e:#}")),
                },
            };
            if let Some(d) = &detail {
                if how != ActionKind::Restart || !d.contains("supervisor") {
                    warn!(target = %target, "restoring: {d}");
                }
            }
            down.lock().retain(|d| *d != target);
            records.lock().push(ActionRecord {
                at_s: clock.secs(),
                kind: how,
                target,
                detail: detail.unwrap_or_default(),
                disruptive: false,
            });
        });
    }
}
