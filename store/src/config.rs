//! A store member's configuration: a plain struct, one place for defaults, and `validate()`.

use std::net::SocketAddr;

use std::path::PathBuf;
use std::time::Duration;
use transport::Endpoint;

/// The organisation (certificate subject O) of store members; only peers carrying it may send
/// raft messages.
pub const STORE_MEMBER_ORG: &str = "kemu:store";

/// The organisation of the store's own tools (`kemu kv`, the chaos prober, the store
/// benchmark): a client of the store that is not an API server. The Kubernetes API's admins
/// (`system:masters`) are not store clients, as an etcd cluster serves only the API servers
/// and its operators' own certificates.
pub const STORE_CLIENT_ORG: &str = "kemu:store-client";

/// The certificate name the store's tools present by default (organisation
/// [`STORE_CLIENT_ORG`]).
pub const STORE_ADMIN: &str = "store-admin";

/// Everything one member needs to run.
#[derive(Clone, Debug)]
pub struct MemberConfig {
    /// This member's name; it must appear in `initial_cluster`, and its certificate in
    /// `certs_dir` is `<name>.crt`.
    pub name: String,
    pub data_dir: PathBuf,
    pub listen_client: SocketAddr,
    pub listen_peer: SocketAddr,
    /// Where the etcd v3 gRPC front listens (TCP), if it is served ([`crate::grpc`]).
    pub listen_grpc: Option<SocketAddr>,
    /// Where `/metrics`, `/healthz`, `/livez` and `/readyz` are served (plain HTTP), if anywhere
    /// (etcd's `--listen-metrics-urls`).
    pub listen_metrics: Option<SocketAddr>,
    /// The gRPC addresses of the members (this one's included or not), which the front lists as
    /// their client URLs in `MemberList` — where etcd clients look for the rest of the cluster.
    pub grpc_cluster: Vec<(String, Endpoint)>,
    /// Most compares, and most operations in either branch, of one transaction on the gRPC front
    /// (etcd's `--max-txn-ops`).
    pub max_txn_ops: usize,
    /// How often a gRPC watch that asked for progress notifications gets one while it has seen
    /// no events (etcd's `--experimental-watch-progress-notify-interval`).
    pub watch_progress_notify_interval: Duration,
    /// Every member, in the same order on every member: (name, peer address or `host:port`,
    /// resolved at each connect). A member's raft id is its position here plus one.
    pub initial_cluster: Vec<(String, Endpoint)>,
    pub certs_dir: PathBuf,
    /// One raft tick.
    pub tick: Duration,
    /// The leader's lease in ticks: a member that heard from its leader fewer ticks ago ignores
    /// votes (check-quorum), and a leader that heard from no quorum for this long steps down. A
    /// follower campaigns after a randomised timeout just above it, see
    /// [`campaign_ticks`](Self::campaign_ticks).
    pub election_ticks: usize,
    pub heartbeat_ticks: usize,
    /// Take a snapshot and compact the log after this many applied entries...
    pub snapshot_entries: u64,
    /// ...and once the WAL written since the last snapshot is at least this fraction of that
    /// snapshot's size (0 = entries alone decide). A snapshot writes the whole state, so with a
    /// large state and a fixed entry count its cost per write grows with the state; this keeps
    /// the bytes snapshots write to at most 1/fraction per byte of log. The price: up to that
    /// much more log held in memory and replayed at a restart.
    pub snapshot_wal_fraction: f64,
    /// Entries kept in memory before a local snapshot's index when the log is compacted, so a
    /// follower that fell behind by fewer catches up from the log instead of the whole snapshot
    /// (etcd: `SnapshotCatchUpEntries`).
    pub snapshot_catch_up_entries: u64,
    /// How long a leader may hold new proposals back so that more join them in one `Ready`
    /// (one fsync, one append to each follower, one watch notification). Measured from the last
    /// `Ready` that carried new entries, so a write that arrives after a quiet spell is not held
    /// at all. Zero: every `Ready` goes out as soon as the driver is free.
    pub batch_window: Duration,
    /// How long a proposal or a read may wait before answering `Timeout`.
    pub request_timeout: Duration,
    /// Largest accepted request (key + value + overhead), as etcd's `--max-request-bytes`.
    pub max_request_bytes: usize,
    /// How often idle watchers that asked for it get a progress notification.
    pub progress_interval: Duration,
    /// Fault injection for tests: a restarted member (one with a committed log) waits this long
    /// before rebuilding its state, to make the window in which it votes but serves no client
    /// wide enough to test. Zero in every real use.
    pub restore_pause: Duration,
}

/// Ticks between the end of a leader's lease and the earliest a follower campaigns: covers
/// the skew between members' tick phases and heartbeat arrivals.
pub const LEASE_MARGIN_TICKS: usize = 2;

/// [`MemberConfig::batch_window`]'s default: none. A 2 ms window saved a tenth of the members'
/// CPU at 70 pods/s but cut the creates a 5,000-node cluster took at 1,000 pods/s from 759/s to
/// 434/s (docs/store.md, "How a write travels").
pub const DEFAULT_BATCH_WINDOW: Duration = Duration::ZERO;

/// Which setting is wrong, and why.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{field}: {reason}")]
    Invalid { field: &'static str, reason: String },
}

impl MemberConfig {
    /// A config with every tunable at its default.
    pub fn new(
        name: impl Into<String>,
        data_dir: impl Into<PathBuf>,
        listen_client: SocketAddr,
        listen_peer: SocketAddr,
        initial_cluster: Vec<(String, impl Into<Endpoint>)>,
        certs_dir: impl Into<PathBuf>,
    ) -> Self {
        let initial_cluster = initial_cluster
            .into_iter()
            .map(|(name, peer)| (name, peer.into()))
            .collect();
        MemberConfig {
            name: name.into(),
            data_dir: data_dir.into(),
            listen_client,
            listen_peer,
            listen_grpc: None,
            listen_metrics: None,
            grpc_cluster: Vec::new(),
            max_txn_ops: 128,
            watch_progress_notify_interval: Duration::from_secs(600),
            initial_cluster,
            certs_dir: certs_dir.into(),
            tick: Duration::from_millis(50),
            election_ticks: 10,
            heartbeat_ticks: 1,
            snapshot_entries: 100_000,
            snapshot_wal_fraction: 0.25,
            snapshot_catch_up_entries: 20_000,
            batch_window: DEFAULT_BATCH_WINDOW,
            request_timeout: Duration::from_secs(5),
            max_request_bytes: 3 * 1024 * 1024 + 512 * 1024,
            progress_interval: Duration::from_secs(1),
            restore_pause: Duration::ZERO,
        }
    }

    /// The window a follower's election timeout is drawn from, in ticks (raft-rs's
    /// `[min_election_tick, max_election_tick)`).
    ///
    /// raft-rs's default is `[election_ticks, 2 × election_ticks)`. Its lower end lets a follower
    /// campaign while the other followers, which heard the dead leader's last heartbeat a
    /// moment later or count ticks in another phase, are still inside the lease: they ignore the
    /// pre-vote without answering, and the campaigner waits a whole timeout again, so one leader
    /// kill could take two timeouts (up to 2 s at 50 ms ticks) to recover. The window here
    /// starts [`LEASE_MARGIN_TICKS`] after the lease, so every other follower is out of it
    /// (`[12, 20)` ticks of 50 ms at the defaults). Its width is kept: two followers that time
    /// out within a pre-vote and a vote's flight of each other split the vote and draw again,
    /// and on this machine under load a message can take 100 ms; a `[12, 17)` window split two
    /// of 16 elections that way in a chaos run.
    pub fn campaign_ticks(&self) -> std::ops::Range<usize> {
        let min = self.election_ticks + LEASE_MARGIN_TICKS;
        let max = (2 * self.election_ticks).max(min + 1);
        min..max
    }

    /// The window, in ticks, after which a campaign that has not won starts its next round
    /// (`[4, 12)` ticks, 0.2–0.6 s, at the defaults). raft-rs waits a whole campaign timeout
    /// (0.6–1.0 s): after a split vote — two followers that timed out within a message's flight
    /// of each other — the leader came 1.5 s or more after the kill. The lease does not matter
    /// between rounds (the others have already heard the campaign), so the next round may come
    /// sooner; it stays long enough for the answers of the last round (a message can take
    /// 100 ms under load) and random, so the two candidates draw apart.
    pub fn campaign_retry_ticks(&self) -> std::ops::Range<usize> {
        let end = self.campaign_ticks().start;
        let start = (self.election_ticks * 2 / 5).clamp(1, end - 1);
        start..end
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |field, reason: &str| {
            Err(ConfigError::Invalid {
                field,
                reason: reason.to_string(),
            })
        };
        if self.batch_window > self.request_timeout / 10 {
            return invalid(
                "batch_window",
                "must be at most a tenth of the request timeout",
            );
        }
        if self.name.is_empty() {
            return invalid("name", "must not be empty");
        }
        if self.initial_cluster.is_empty() {
            return invalid("initial_cluster", "must list at least one member");
        }
        if !self.initial_cluster.iter().any(|(n, _)| n == &self.name) {
            return Err(ConfigError::Invalid {
                field: "initial_cluster",
                reason: format!("does not contain this member's name {:?}", self.name),
            });
        }
        let mut names: Vec<&String> = self.initial_cluster.iter().map(|(n, _)| n).collect();
        names.sort();
        names.dedup();
        if names.len() != self.initial_cluster.len() {
            return invalid("initial_cluster", "member names must be unique");
        }
        if self.tick.is_zero() {
            return invalid("tick", "must be positive");
        }
        if self.heartbeat_ticks == 0 || self.election_ticks <= self.heartbeat_ticks {
            return invalid(
                "election_ticks",
                "must be greater than heartbeat_ticks, which must be positive",
            );
        }
        if self.snapshot_entries < 10 {
            return invalid("snapshot_entries", "must be at least 10");
        }
        if !(self.snapshot_wal_fraction >= 0.0 && self.snapshot_wal_fraction.is_finite()) {
            return invalid("snapshot_wal_fraction", "must be a finite number >= 0");
        }
        if self.request_timeout.is_zero() {
            return invalid("request_timeout", "must be positive");
        }
        if let Some((name, _)) = self
            .grpc_cluster
            .iter()
            .find(|(name, _)| self.member_id(name).is_none())
        {
            return Err(ConfigError::Invalid {
                field: "grpc_cluster",
                reason: format!("names {name:?}, which is not in initial_cluster"),
            });
        }
        if self.max_txn_ops == 0 {
            return invalid("max_txn_ops", "must be positive");
        }
        if self.watch_progress_notify_interval.is_zero() {
            return invalid("watch_progress_notify_interval", "must be positive");
        }
        Ok(())
    }

    /// Whether a local snapshot is due: `entries_since` entries applied since the last snapshot,
    /// which was `snapshot_bytes` long, and `wal_bytes` of WAL written since it began.
    pub fn snapshot_due(&self, entries_since: u64, snapshot_bytes: u64, wal_bytes: u64) -> bool {
        entries_since >= self.snapshot_entries
            && wal_bytes as f64 >= snapshot_bytes as f64 * self.snapshot_wal_fraction
    }

    /// This member's raft id.
    pub fn id(&self) -> u64 {
        self.member_id(&self.name).unwrap_or(0)
    }

    /// The raft id of a member name, if it is in the cluster.
    pub fn member_id(&self, name: &str) -> Option<u64> {
        self.initial_cluster
            .iter()
            .position(|(n, _)| n == name)
            .map(|i| i as u64 + 1)
    }

    /// The name of a raft id.
    pub fn member_name(&self, id: u64) -> Option<&str> {
        let index = usize::try_from(id.checked_sub(1)?).ok()?;
        self.initial_cluster.get(index).map(|(n, _)| n.as_str())
    }
}

/// Parses `n1=127.0.0.1:2380,n2=...` as `--initial-cluster` takes it; a member may be named by
/// host name (`n1=kemu-store-0.kemu-store.ns.svc:2380`).
pub fn parse_initial_cluster(spec: &str) -> Result<Vec<(String, Endpoint)>, ConfigError> {
    let mut out = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, addr) = part.split_once('=').ok_or_else(|| ConfigError::Invalid {
            field: "initial_cluster",
            reason: format!("{part:?} is not NAME=HOST:PORT"),
        })?;
        let addr: Endpoint = addr.parse().map_err(|e| ConfigError::Invalid {
            field: "initial_cluster",
            reason: format!("member {name:?}: {e}"),
        })?;
        out.push((name.to_string(), addr));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_state_is_snapshotted_less_often() {
        let addr: SocketAddr = "127.0.0.1:3".parse().expect("addr");
        let cluster = vec![("a".to_string(), addr)];
        let mut cfg = MemberConfig::new("a", "/tmp/x", addr, addr, cluster, "/tmp/c");
        cfg.snapshot_entries = 1_000;
        // A small state: the entry count decides.
        assert!(!cfg.snapshot_due(999, 10_000, 1_000_000));
        assert!(cfg.snapshot_due(1_000, 10_000, 2_500));
        // A 600 MB state waits for 150 MB of WAL, however many entries that takes.
        assert!(!cfg.snapshot_due(500_000, 600_000_000, 149_999_999));
        assert!(cfg.snapshot_due(500_000, 600_000_000, 150_000_000));
        // No snapshot yet (or a fraction of 0): entries alone.
        assert!(cfg.snapshot_due(1_000, 0, 0));
        cfg.snapshot_wal_fraction = 0.0;
        assert!(cfg.snapshot_due(1_000, 600_000_000, 0));
        cfg.snapshot_wal_fraction = f64::NAN;
        let err = cfg.validate().expect_err("NaN is no fraction");
        assert!(err.to_string().starts_with("snapshot_wal_fraction"));
    }

    #[test]
    fn parses_and_validates_initial_cluster() {
        let cluster = parse_initial_cluster("a=127.0.0.1:1,b=127.0.0.1:2").expect("parses");
        let addr: SocketAddr = "127.0.0.1:3".parse().expect("addr");
        let cfg = MemberConfig::new("b", "/tmp/x", addr, addr, cluster, "/tmp/c");
        assert!(cfg.validate().is_ok());
        assert_eq!(cfg.id(), 2);
        assert_eq!(cfg.member_name(1), Some("a"));
        assert_eq!(cfg.member_name(0), None);
        assert!(parse_initial_cluster("a=nope").is_err());
        assert!(parse_initial_cluster("a").is_err());
        let mut bad = cfg.clone();
        bad.name = "c".into();
        let err = bad.validate().expect_err("c is not a member");
        assert!(err.to_string().starts_with("initial_cluster"));
    }

    #[test]
    fn a_batch_window_beyond_a_tenth_of_the_request_timeout_is_refused() {
        let addr: SocketAddr = "127.0.0.1:3".parse().expect("addr");
        let cluster = vec![("a".to_string(), addr)];
        let mut cfg = MemberConfig::new("a", "/tmp/x", addr, addr, cluster, "/tmp/c");
        cfg.batch_window = cfg.request_timeout / 10;
        assert!(cfg.validate().is_ok());
        cfg.batch_window += Duration::from_millis(1);
        let err = cfg.validate().expect_err("too long a window");
        assert!(err.to_string().starts_with("batch_window"), "{err}");
    }

    #[test]
    fn followers_campaign_only_after_the_lease_and_raft_accepts_the_window() {
        let addr: SocketAddr = "127.0.0.1:3".parse().expect("addr");
        let cluster = vec![("a".to_string(), addr)];
        let mut cfg = MemberConfig::new("a", "/tmp/x", addr, addr, cluster, "/tmp/c");
        assert_eq!(cfg.campaign_ticks(), 12..20);
        for election in 2..40 {
            cfg.election_ticks = election;
            let window = cfg.campaign_ticks();
            assert!(
                window.start >= election + LEASE_MARGIN_TICKS,
                "{election}: {window:?}"
            );
            assert!(window.end > window.start, "{election}: {window:?}");
            let raft_config = raft::Config {
                id: 1,
                election_tick: election,
                heartbeat_tick: 1,
                min_election_tick: window.start,
                max_election_tick: window.end,
                ..Default::default()
            };
            assert!(raft_config.validate().is_ok(), "{election}: {window:?}");
            let retry = cfg.campaign_retry_ticks();
            assert!(
                retry.start >= 1 && retry.start < retry.end && retry.end <= window.start,
                "{election}: {retry:?} {window:?}"
            );
        }
        cfg.election_ticks = 10;
        assert_eq!(cfg.campaign_retry_ticks(), 4..12);
    }
}
