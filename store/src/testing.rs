//! An in-process cluster of store members for failover tests that need no processes.
//!
//! [`Cluster`] runs N members' real raft drivers — each on its own thread, with its raft log on
//! disk under a directory the test gives — and carries their raft messages itself, in place of
//! the QUIC peer links. The test can then do what the network and the machine do to a cluster:
//!
//! - [`Cluster::cut`] / [`Cluster::heal`] a link (both ways), [`Cluster::isolate`] a member,
//!   [`Cluster::heal_all`]: messages on a cut link are dropped, as a partition drops packets;
//! - [`Cluster::crash`] a member — its driver stops and everything it held in memory is gone,
//!   as after SIGKILL (what it wrote stays in the page cache, so nothing fsynced or not is lost)
//!   — and [`Cluster::restart`] it from its on-disk log.
//!
//! Clients talk to a member through its [`MemberHandle`] (the same one the QUIC and gRPC fronts
//! use): [`Cluster::put`] proposes, [`Cluster::get`] reads after a ReadIndex.
//!
//! Built with the `testing` feature (the store's own tests turn it on).
//!
//! A member that installs a snapshot from the leader ends its watchers (it cannot tell them what
//! the snapshot skipped); watch ids keep counting up across that, so an old watcher's cleanup
//! never removes a new one.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use raft::prelude::{Message, MessageType};
use tokio::sync::{mpsc, watch};

use crate::config::MemberConfig;
use crate::member::{self, DriverChannels, MemberError, MemberHandle, PeerFeedback, RaftStatus};
use crate::peer_backlog::OutboundBatch;
use crate::types::{
    Command, CommandResult, KeyRange, KeyValue, PutRequest, PutResponse, RangeRequest, StoreError,
};

/// Where the members' raft messages may go.
#[derive(Default)]
struct Network {
    /// The inbox of every running member, by raft id.
    inboxes: Mutex<HashMap<u64, mpsc::Sender<Message>>>,
    /// Cut links, each as (lower id, higher id).
    cut: Mutex<HashSet<(u64, u64)>>,
}

fn link(a: u64, b: u64) -> (u64, u64) {
    (a.min(b), a.max(b))
}

impl Network {
    /// Hands `msg` to its addressee unless the link is cut or the addressee is down; says
    /// whether it was delivered.
    fn deliver(&self, from: u64, msg: Message) -> bool {
        if self.cut.lock().contains(&link(from, msg.to)) {
            return false;
        }
        let Some(inbox) = self.inboxes.lock().get(&msg.to).cloned() else {
            return false;
        };
        inbox.try_send(msg).is_ok()
    }
}

/// A running member.
struct Running {
    handle: MemberHandle,
    /// Its metrics and health checks, as `/metrics` and `/readyz` would serve them.
    telemetry: telemetry::Telemetry,
    stop: watch::Sender<bool>,
    driver: std::thread::JoinHandle<Result<(), MemberError>>,
    /// The tasks carrying its outbound messages.
    carriers: Vec<tokio::task::JoinHandle<()>>,
}

/// N store members wired by message passing in this process.
pub struct Cluster {
    configs: Vec<MemberConfig>,
    members: Vec<Option<Running>>,
    network: Arc<Network>,
}

/// A member's name in the cluster: `m1`, `m2`, ...
pub fn member_name(index: usize) -> String {
    format!("m{}", index + 1)
}

impl Cluster {
    /// Starts `n` members with their logs under `dir`, at the harness's defaults (10 ms ticks,
    /// 2 s request timeout), each config first passed to `tune`. Must be called within a tokio
    /// runtime (the message carriers are tasks of it).
    pub fn start(
        dir: &Path,
        n: usize,
        tune: impl Fn(&mut MemberConfig),
    ) -> Result<Cluster, MemberError> {
        // Addresses are never bound: the harness carries the messages.
        let unused = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
        let initial: Vec<(String, SocketAddr)> = (0..n)
            .map(|i| (member_name(i), unused(i as u16 + 1)))
            .collect();
        let configs: Vec<MemberConfig> = (0..n)
            .map(|i| {
                let name = member_name(i);
                let mut config = MemberConfig::new(
                    &name,
                    dir.join(&name),
                    unused(0),
                    unused(0),
                    initial.clone(),
                    PathBuf::from("/nonexistent"),
                );
                config.tick = Duration::from_millis(10);
                config.request_timeout = Duration::from_secs(2);
                tune(&mut config);
                config
            })
            .collect();
        let mut cluster = Cluster {
            members: (0..n).map(|_| None).collect(),
            configs,
            network: Arc::default(),
        };
        for i in 0..n {
            cluster.restart(i)?;
        }
        Ok(cluster)
    }

    pub fn len(&self) -> usize {
        self.configs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.configs.is_empty()
    }

    /// Member `i`'s raft id.
    pub fn id(&self, i: usize) -> u64 {
        i as u64 + 1
    }

    pub fn config(&self, i: usize) -> &MemberConfig {
        &self.configs[i]
    }

    pub fn is_running(&self, i: usize) -> bool {
        self.members[i].is_some()
    }

    /// Member `i`'s handle; panics if it is down (a test's own mistake).
    pub fn handle(&self, i: usize) -> &MemberHandle {
        match &self.members[i] {
            Some(running) => &running.handle,
            None => panic!("member {} is down", member_name(i)),
        }
    }

    /// Member `i`'s metrics and health checks (what its `/metrics` and `/readyz` would answer).
    pub fn telemetry(&self, i: usize) -> &telemetry::Telemetry {
        match &self.members[i] {
            Some(running) => &running.telemetry,
            None => panic!("member {} is down", member_name(i)),
        }
    }

    /// Member `i`'s raft facts as of its last `Ready`.
    pub fn status(&self, i: usize) -> RaftStatus {
        self.handle(i).shared().raft_status()
    }

    /// The running member that believes it leads in the highest term (a deposed leader cut
    /// off from the others may still believe it leads, in an older term).
    pub fn leader(&self) -> Option<usize> {
        (0..self.len())
            .filter(|&i| self.is_running(i))
            .map(|i| (i, self.status(i)))
            .filter(|(_, s)| s.is_leader)
            .max_by_key(|(_, s)| s.term)
            .map(|(i, _)| i)
    }

    /// Starts member `i` (again) from its on-disk log. Does nothing if it runs.
    pub fn restart(&mut self, i: usize) -> Result<(), MemberError> {
        if self.members[i].is_some() {
            return Ok(());
        }
        let config = self.configs[i].clone();
        let id = config.id();
        let telemetry = telemetry::Telemetry::new();
        let (handle, parts) = member::open(config.clone(), &telemetry.metrics)?;
        crate::metrics::register_state_gauges(&telemetry.metrics, handle.shared());
        crate::health::register(&telemetry.health, &handle);
        let (inbox, inbound) = mpsc::channel(8192);
        let (feedback_tx, feedback) = mpsc::channel(1024);
        let mut outbound = HashMap::new();
        let mut carriers = Vec::new();
        for peer in (1..=self.len() as u64).filter(|&p| p != id) {
            let (tx, rx) = mpsc::channel(1024);
            outbound.insert(peer, tx);
            carriers.push(tokio::spawn(carry(
                id,
                rx,
                self.network.clone(),
                feedback_tx.clone(),
            )));
        }
        let channels = DriverChannels {
            inbound,
            feedback,
            outbound,
        };
        let (stop, stopped) = watch::channel(false);
        let driver = member::spawn_driver(parts, channels, stopped)?;
        self.network.inboxes.lock().insert(id, inbox);
        self.members[i] = Some(Running {
            handle,
            telemetry,
            stop,
            driver,
            carriers,
        });
        Ok(())
    }

    /// Stops member `i` as a crash would: no more messages in or out, its memory gone, its
    /// disk as it was. Its clients' calls end with an error.
    pub fn crash(&mut self, i: usize) {
        let Some(running) = self.members[i].take() else {
            return;
        };
        self.network.inboxes.lock().remove(&self.id(i));
        for carrier in &running.carriers {
            carrier.abort();
        }
        let _ = running.stop.send(true);
        // The driver's thread ends within a tick; its result (an error it stopped on) is
        // not the test's concern here.
        let _ = running.driver.join();
    }

    /// Cuts the link between members `a` and `b`, both ways.
    pub fn cut(&self, a: usize, b: usize) {
        self.network.cut.lock().insert(link(self.id(a), self.id(b)));
    }

    pub fn heal(&self, a: usize, b: usize) {
        self.network
            .cut
            .lock()
            .remove(&link(self.id(a), self.id(b)));
    }

    /// Cuts member `i` off from every other.
    pub fn isolate(&self, i: usize) {
        for other in (0..self.len()).filter(|&o| o != i) {
            self.cut(i, other);
        }
    }

    pub fn heal_all(&self) {
        self.network.cut.lock().clear();
    }

    /// Puts `key` = `value` through member `i` (which forwards to the leader) and waits until
    /// `i` applied it.
    pub async fn put(&self, i: usize, key: &str, value: &str) -> Result<PutResponse, StoreError> {
        let cmd = Command::Put(PutRequest {
            key: Bytes::copy_from_slice(key.as_bytes()),
            value: Bytes::copy_from_slice(value.as_bytes()),
            lease: 0,
            prev_kv: false,
        });
        match self.handle(i).propose(&cmd).await? {
            CommandResult::Put(put) => Ok(put),
            CommandResult::Error(e) => Err(e),
            other => Err(StoreError::InvalidRequest {
                reason: format!("a put answered {other:?}"),
            }),
        }
    }

    /// Reads `key` from member `i` after a ReadIndex (linearizable).
    pub async fn get(&self, i: usize, key: &str) -> Result<Option<KeyValue>, StoreError> {
        let handle = self.handle(i);
        handle.read_index().await?;
        self.get_local(i, key)
    }

    /// Reads `key` from member `i`'s state as it is (serializable: maybe stale).
    pub fn get_local(&self, i: usize, key: &str) -> Result<Option<KeyValue>, StoreError> {
        let request = RangeRequest {
            range: KeyRange::single(Bytes::copy_from_slice(key.as_bytes())),
            serializable: true,
            ..Default::default()
        };
        let response = self.handle(i).shared().mvcc.read().range(&request)?;
        Ok(response.kvs.into_iter().next())
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.len() {
            self.crash(i);
        }
    }
}

/// Carries member `from`'s outbound messages over the network, and tells its driver what a
/// peer link would: a snapshot delivered or lost.
async fn carry(
    from: u64,
    mut outbound: mpsc::Receiver<OutboundBatch>,
    network: Arc<Network>,
    feedback: mpsc::Sender<PeerFeedback>,
) {
    while let Some(batch) = outbound.recv().await {
        for msg in batch.messages {
            let to = msg.to;
            let snapshot = msg.get_msg_type() == MessageType::MsgSnapshot;
            let delivered = network.deliver(from, msg);
            if snapshot {
                let _ = feedback
                    .send(PeerFeedback::Snapshot { to, ok: delivered })
                    .await;
            }
        }
    }
}

/// Polls `condition` every 10 ms until it holds; an error naming `what` after `timeout`.
pub async fn wait_until<F, Fut>(
    what: &str,
    timeout: Duration,
    mut condition: F,
) -> Result<(), String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if condition().await {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!("{what}: not within {timeout:?}"));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
