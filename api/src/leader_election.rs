//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's leaderelection
//! semantics, for kube-scheduler's and kube-controller-manager's counterparts.
//!
//! - The holder writes `renewTime` every `retry_period`. If it cannot renew for
//!   `renew_deadline`, it stops leading (before the lease runs out for the others).
//! - A candidate takes the lease over once it has seen the same record unchanged for the
//!   record's `leaseDurationSeconds`, measured on its own clock (so clocks of different hosts
//!   need not agree), or at once when the holder released it (empty `holderIdentity`).
//! - Taking over sets `acquireTime` and adds one to `leaseTransitions`; renewing keeps both.
//! - A leader that stops cleanly releases the lease so that a standby takes over at once.
//!
//! [`LeaderElection`] is the pure core: it takes the time and the lease as read and returns the
//! write to make ([`Decision`]); it is tested by those decisions. [`LeaderElector`] is the
//! driver that reads and writes the Lease through the API and publishes [`Leadership`].

use std::future::Future;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::client::{Client, ClientError};

/// How long after its last renewal a leader's election still counts as healthy, past the lease
/// duration (client-go's `NewLeaderHealthzAdaptor` timeout as kube-scheduler and
/// kube-controller-manager set it).
pub const HEALTH_TOLERANCE: Duration = Duration::from_secs(20);

/// Why a leader election config is refused.
#[derive(Debug, thiserror::Error)]
#[error("leader election {field}: {reason}")]
pub struct ConfigError {
    pub field: &'static str,
    pub reason: String,
}

/// Where the lease is, who we are, and the timings (client-go's names and defaults).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderElectionConfig {
    pub namespace: String,
    /// The Lease's name: `kube-scheduler`, `kube-controller-manager`.
    pub name: String,
    /// This candidate's `holderIdentity`.
    pub identity: String,
    /// How long a candidate waits, after it last saw the lease change, before it takes over.
    pub lease_duration: Duration,
    /// How long a leader keeps trying to renew before it stops leading.
    pub renew_deadline: Duration,
    /// How often candidates look and the leader renews.
    pub retry_period: Duration,
}

impl LeaderElectionConfig {
    /// The lease `kube-system/<name>` held as `identity`, with kube-scheduler's and
    /// kube-controller-manager's defaults: 15 s lease, 10 s renew deadline, 2 s retry period.
    pub fn new(name: impl Into<String>, identity: impl Into<String>) -> LeaderElectionConfig {
        LeaderElectionConfig {
            namespace: "kube-system".into(),
            name: name.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// client-go's rules: lease duration > renew deadline > retry period (the renew deadline
    /// leaves room for at least one retry), all positive, a name and an identity.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |field, reason: &str| {
            Err(ConfigError {
                field,
                reason: reason.into(),
            })
        };
        if self.name.is_empty() {
            return invalid("name", "must not be empty");
        }
        if self.namespace.is_empty() {
            return invalid("namespace", "must not be empty");
        }
        if self.identity.is_empty() {
            return invalid("identity", "must not be empty");
        }
        if self.lease_duration.as_secs() < 1 {
            return invalid("lease_duration", "must be at least one second");
        }
        if self.retry_period.is_zero() || self.retry_period >= self.lease_duration {
            return invalid(
                "retry_period",
                "must be positive and shorter than lease_duration",
            );
        }
        if self.renew_deadline >= self.lease_duration {
            return invalid("renew_deadline", "must be shorter than lease_duration");
        }
        if self.renew_deadline < self.retry_period {
            return invalid("renew_deadline", "must not be shorter than retry_period");
        }
        Ok(())
    }

    fn lease_duration_seconds(&self) -> i32 {
        self.lease_duration.as_secs().clamp(1, i32::MAX as u64) as i32
    }
}

/// What to write after reading the lease.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// No lease yet: create one with this spec.
    Create(LeaseSpec),
    /// Renew it (we hold it) or take it over (free or expired): write this spec over the one
    /// read, under its resourceVersion.
    Update(LeaseSpec),
    /// Someone else holds it and renews it (as far as we have seen): write nothing.
    Follow { holder: String },
}

/// What came of a [`Decision::Create`] or [`Decision::Update`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Written: we hold the lease.
    Written,
    /// Refused for a newer version or an existing lease: someone else wrote first.
    Conflict,
    /// The read or the write failed (the API server is unreachable, say).
    Failed,
}

/// Whether this candidate leads, and since when its lease holds (for its health check).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Leadership {
    pub leading: bool,
    /// The last time we wrote the lease as its holder (our clock).
    pub renewed_at: Option<Instant>,
}

impl Leadership {
    /// client-go's leader election health check: a leader that has not renewed for longer than
    /// the lease plus [`HEALTH_TOLERANCE`] is stuck (others have taken over by now, or the
    /// election loop has stalled). Candidates that do not lead are healthy.
    pub fn check(&self, now: Instant, lease_duration: Duration) -> Result<(), String> {
        match (self.leading, self.renewed_at) {
            (true, Some(at))
                if now.saturating_duration_since(at) > lease_duration + HEALTH_TOLERANCE =>
            {
                Err(format!(
                    "failed election to renew leadership on lease: last renewed {:.0?} ago",
                    now.saturating_duration_since(at)
                ))
            }
            _ => Ok(()),
        }
    }
}

/// The election's memory and decisions; does no I/O and reads no clock.
#[derive(Debug)]
pub struct LeaderElection {
    config: LeaderElectionConfig,
    /// The last record read and when it last changed, by our clock.
    observed: Option<(LeaseSpec, Instant)>,
    leadership: Leadership,
}

impl LeaderElection {
    pub fn new(config: LeaderElectionConfig) -> LeaderElection {
        LeaderElection {
            config,
            observed: None,
            leadership: Leadership::default(),
        }
    }

    pub fn config(&self) -> &LeaderElectionConfig {
        &self.config
    }

    pub fn leadership(&self) -> Leadership {
        self.leadership
    }

    /// Decides from the lease's spec as read at `now` (`None`: there is no lease). `wall` is
    /// the time to write into the lease.
    pub fn decide(&mut self, lease: Option<&LeaseSpec>, now: Instant, wall: Timestamp) -> Decision {
        let stamp = MicroTime(wall);
        let Some(spec) = lease else {
            return Decision::Create(LeaseSpec {
                holder_identity: Some(self.config.identity.clone()),
                lease_duration_seconds: Some(self.config.lease_duration_seconds()),
                acquire_time: Some(stamp.clone()),
                renew_time: Some(stamp),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            });
        };
        let changed_at = match &self.observed {
            Some((seen, at)) if seen == spec => *at,
            _ => {
                self.observed = Some((spec.clone(), now));
                now
            }
        };
        let holder = spec.holder_identity.as_deref().unwrap_or_default();
        let ours = holder == self.config.identity;
        if !holder.is_empty() && !ours {
            let duration = spec
                .lease_duration_seconds
                .filter(|s| *s > 0)
                .map_or(self.config.lease_duration, |s| {
                    Duration::from_secs(s as u64)
                });
            if now.saturating_duration_since(changed_at) < duration {
                if self.leadership.leading {
                    warn!(
                        holder,
                        "the lease is held by another candidate; stopping leading"
                    );
                    self.leadership.leading = false;
                }
                return Decision::Follow {
                    holder: holder.to_string(),
                };
            }
        }
        let mut next = spec.clone();
        next.holder_identity = Some(self.config.identity.clone());
        next.lease_duration_seconds = Some(self.config.lease_duration_seconds());
        next.renew_time = Some(stamp.clone());
        if !ours {
            next.acquire_time = Some(stamp);
            next.lease_transitions = Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
        }
        Decision::Update(next)
    }

    /// Records what came of the write `decision` asked for; returns the leadership after it.
    pub fn outcome(
        &mut self,
        written: Option<&LeaseSpec>,
        outcome: WriteOutcome,
        now: Instant,
    ) -> Leadership {
        match outcome {
            WriteOutcome::Written => {
                if let Some(spec) = written {
                    self.observed = Some((spec.clone(), now));
                }
                self.leadership = Leadership {
                    leading: true,
                    renewed_at: Some(now),
                };
            }
            WriteOutcome::Conflict | WriteOutcome::Failed => self.missed(now),
        }
        self.leadership
    }

    /// A round that could not read the lease at all.
    pub fn read_failed(&mut self, now: Instant) -> Leadership {
        self.missed(now);
        self.leadership
    }

    /// A leader that has not renewed for the renew deadline stops leading.
    fn missed(&mut self, now: Instant) {
        let Leadership {
            leading,
            renewed_at,
        } = self.leadership;
        let overdue = renewed_at
            .is_none_or(|at| now.saturating_duration_since(at) >= self.config.renew_deadline);
        if leading && overdue {
            warn!(
                deadline = ?self.config.renew_deadline,
                "could not renew the lease within the renew deadline; stopping leading"
            );
            self.leadership.leading = false;
        }
    }

    /// The spec that gives the lease up, if we hold it as read (client-go's release: no holder,
    /// a one-second duration, the transitions kept).
    pub fn release(&mut self, lease: &LeaseSpec, wall: Timestamp) -> Option<LeaseSpec> {
        self.leadership.leading = false;
        if lease.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return None;
        }
        let stamp = MicroTime(wall);
        Some(LeaseSpec {
            holder_identity: None,
            lease_duration_seconds: Some(1),
            acquire_time: Some(stamp.clone()),
            renew_time: Some(stamp),
            ..lease.clone()
        })
    }
}

/// The wall clock as the timestamp type of k8s-openapi objects.
pub fn wall_clock() -> Timestamp {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Timestamp::new(
        since_epoch.as_secs() as i64,
        since_epoch.subsec_nanos() as i32,
    )
    .unwrap_or(Timestamp::UNIX_EPOCH)
}

fn leases() -> Result<&'static crate::ResourceInfo, ClientError> {
    crate::resources::find("coordination.k8s.io", "v1", "leases")
        .ok_or_else(|| ClientError::Protocol("coordination.k8s.io/v1 leases are not served".into()))
}

/// The driver: reads and writes the Lease every retry period until shutdown, publishing
/// [`Leadership`] as it changes.
pub struct LeaderElector {
    client: Client,
    election: LeaderElection,
    leadership: watch::Sender<Leadership>,
}

impl LeaderElector {
    pub fn new(client: Client, config: LeaderElectionConfig) -> LeaderElector {
        LeaderElector {
            client,
            election: LeaderElection::new(config),
            leadership: watch::Sender::new(Leadership::default()),
        }
    }

    /// Leadership as it changes (`leading` turns true on acquiring, false on losing).
    pub fn leadership(&self) -> watch::Receiver<Leadership> {
        self.leadership.subscribe()
    }

    /// Campaigns, then renews, until `shutdown`; a leader then releases the lease.
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        let config = self.election.config().clone();
        info!(lease = %format!("{}/{}", config.namespace, config.name), identity = %config.identity, "campaigning for leadership");
        loop {
            let round = self.round();
            let leadership = tokio::select! {
                biased;
                () = &mut shutdown => break,
                leadership = round => leadership,
            };
            let was = self.leadership.borrow().leading;
            if leadership.leading && !was {
                info!(identity = %config.identity, "became the leader");
            }
            self.leadership.send_replace(leadership);
            tokio::select! {
                biased;
                () = &mut shutdown => break,
                () = tokio::time::sleep(config.retry_period) => {}
            }
        }
        if self.leadership.borrow().leading {
            self.release().await;
        }
        self.leadership.send_replace(Leadership::default());
    }

    /// One read, decide, write.
    async fn round(&mut self) -> Leadership {
        let config = self.election.config().clone();
        let namespace = Some(config.namespace.as_str());
        let read = match leases() {
            Ok(leases) => match self
                .client
                .get::<Lease>(leases, namespace, &config.name)
                .await
            {
                Ok(lease) => Ok(Some(lease)),
                Err(e) if e.is_not_found() => Ok(None),
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        let current = match read {
            Ok(current) => current,
            Err(e) => {
                debug!(error = %e, "cannot read the lease");
                return self.election.read_failed(Instant::now());
            }
        };
        let spec = current.as_ref().map(|l| l.spec.clone().unwrap_or_default());
        let decision = self
            .election
            .decide(spec.as_ref(), Instant::now(), wall_clock());
        let (written, result) = match decision {
            Decision::Follow { .. } => return self.election.leadership(),
            Decision::Create(spec) => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(config.name.clone()),
                        namespace: Some(config.namespace.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(spec.clone()),
                };
                let result = self.write(|client, leases| async move {
                    client.create::<_, Lease>(leases, namespace, &lease).await
                });
                (spec, result.await)
            }
            Decision::Update(spec) => {
                let mut lease = current.unwrap_or_default();
                lease.spec = Some(spec.clone());
                let name = config.name.as_str();
                let result = self.write(|client, leases| async move {
                    client
                        .update::<_, Lease>(leases, namespace, name, &lease)
                        .await
                });
                (spec, result.await)
            }
        };
        self.election
            .outcome(Some(&written), result, Instant::now())
    }

    async fn write<'a, F, Fut>(&'a self, send: F) -> WriteOutcome
    where
        F: FnOnce(&'a Client, &'static crate::ResourceInfo) -> Fut,
        Fut: Future<Output = Result<Lease, ClientError>> + 'a,
    {
        let leases = match leases() {
            Ok(leases) => leases,
            Err(_) => return WriteOutcome::Failed,
        };
        match send(&self.client, leases).await {
            Ok(_) => WriteOutcome::Written,
            Err(e) if e.is_conflict() || e.is_already_exists() => WriteOutcome::Conflict,
            Err(e) => {
                debug!(error = %e, "cannot write the lease");
                WriteOutcome::Failed
            }
        }
    }

    /// Gives the lease up, so that a standby takes over at once.
    async fn release(&mut self) {
        let config = self.election.config().clone();
        let Ok(leases) = leases() else { return };
        let namespace = Some(config.namespace.as_str());
        let Ok(mut lease) = self
            .client
            .get::<Lease>(leases, namespace, &config.name)
            .await
        else {
            return;
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let Some(released) = self.election.release(&spec, wall_clock()) else {
            return;
        };
        lease.spec = Some(released);
        match self
            .client
            .update::<_, Lease>(leases, namespace, &config.name, &lease)
            .await
        {
            Ok(_) => info!("released the lease"),
            Err(e) => debug!(error = %e, "could not release the lease"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> LeaderElectionConfig {
        LeaderElectionConfig::new("kube-scheduler", "me")
    }

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + second).expect("valid")
    }

    fn held_by(holder: &str, renewed: i64) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(15),
            acquire_time: Some(MicroTime(at(0))),
            renew_time: Some(MicroTime(at(renewed))),
            lease_transitions: Some(3),
            ..LeaseSpec::default()
        }
    }

    fn written(decision: Decision) -> LeaseSpec {
        match decision {
            Decision::Create(spec) | Decision::Update(spec) => spec,
            Decision::Follow { holder } => panic!("follows {holder}"),
        }
    }

    #[test]
    fn the_first_candidate_creates_the_lease() {
        let t0 = Instant::now();
        let mut e = LeaderElection::new(config());
        let spec = written(e.decide(None, t0, at(5)));
        assert_eq!(spec.holder_identity.as_deref(), Some("me"));
        assert_eq!(spec.lease_duration_seconds, Some(15));
        assert_eq!(spec.acquire_time, Some(MicroTime(at(5))));
        assert_eq!(spec.renew_time, Some(MicroTime(at(5))));
        assert_eq!(spec.lease_transitions, Some(0));
        assert!(!e.leadership().leading, "not before the write lands");
        let leadership = e.outcome(Some(&spec), WriteOutcome::Written, t0);
        assert_eq!(
            leadership,
            Leadership {
                leading: true,
                renewed_at: Some(t0)
            }
        );
    }

    #[test]
    fn a_candidate_takes_over_only_after_the_record_stays_unchanged_for_its_duration() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut e = LeaderElection::new(config());
        let follow = Decision::Follow {
            holder: "other".into(),
        };
        assert_eq!(e.decide(Some(&held_by("other", 1)), t0, at(1)), follow);
        assert_eq!(
            e.decide(Some(&held_by("other", 1)), t0 + s(14), at(15)),
            follow
        );
        // Renewed meanwhile: the wait starts again, whatever the holder's clock says.
        assert_eq!(
            e.decide(Some(&held_by("other", 2)), t0 + s(14), at(15)),
            follow
        );
        assert_eq!(
            e.decide(Some(&held_by("other", 2)), t0 + s(28), at(29)),
            follow
        );
        let spec = written(e.decide(Some(&held_by("other", 2)), t0 + s(29), at(30)));
        assert_eq!(spec.holder_identity.as_deref(), Some("me"));
        assert_eq!(spec.acquire_time, Some(MicroTime(at(30))));
        assert_eq!(spec.renew_time, Some(MicroTime(at(30))));
        assert_eq!(spec.lease_transitions, Some(4));
    }

    #[test]
    fn the_record_says_how_long_it_lasts() {
        let t0 = Instant::now();
        let mut e = LeaderElection::new(config());
        let mut short = held_by("other", 1);
        short.lease_duration_seconds = Some(4);
        assert!(matches!(
            e.decide(Some(&short), t0, at(1)),
            Decision::Follow { .. }
        ));
        assert!(matches!(
            e.decide(Some(&short), t0 + Duration::from_secs(4), at(5)),
            Decision::Update(_)
        ));
    }

    #[test]
    fn a_released_lease_is_taken_at_once() {
        let t0 = Instant::now();
        let mut e = LeaderElection::new(config());
        let released = LeaseSpec {
            holder_identity: None,
            lease_duration_seconds: Some(1),
            lease_transitions: Some(7),
            ..LeaseSpec::default()
        };
        let spec = written(e.decide(Some(&released), t0, at(1)));
        assert_eq!(spec.holder_identity.as_deref(), Some("me"));
        assert_eq!(spec.lease_transitions, Some(8));
        assert_eq!(spec.lease_duration_seconds, Some(15));
        let mut empty = released.clone();
        empty.holder_identity = Some(String::new());
        assert!(matches!(
            e.decide(Some(&empty), t0, at(1)),
            Decision::Update(_)
        ));
    }

    #[test]
    fn the_holder_renews_keeping_acquire_time_and_transitions() {
        let t0 = Instant::now();
        let mut e = LeaderElection::new(config());
        let spec = written(e.decide(Some(&held_by("me", 1)), t0, at(3)));
        assert_eq!(spec.acquire_time, Some(MicroTime(at(0))));
        assert_eq!(spec.renew_time, Some(MicroTime(at(3))));
        assert_eq!(spec.lease_transitions, Some(3));
    }

    #[test]
    fn a_leader_that_cannot_renew_stops_at_the_renew_deadline() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut e = LeaderElection::new(config());
        let spec = written(e.decide(None, t0, at(0)));
        assert!(e.outcome(Some(&spec), WriteOutcome::Written, t0).leading);
        assert!(e.read_failed(t0 + s(2)).leading);
        assert!(e.outcome(None, WriteOutcome::Conflict, t0 + s(4)).leading);
        assert!(e.outcome(None, WriteOutcome::Failed, t0 + s(9)).leading);
        let after = e.outcome(None, WriteOutcome::Failed, t0 + s(10));
        assert!(!after.leading);
        assert_eq!(after.renewed_at, Some(t0));
        // A renewal that lands again leads again.
        assert!(
            e.outcome(Some(&spec), WriteOutcome::Written, t0 + s(12))
                .leading
        );
    }

    #[test]
    fn a_leader_that_sees_another_holder_stops_at_once() {
        let t0 = Instant::now();
        let mut e = LeaderElection::new(config());
        let spec = written(e.decide(None, t0, at(0)));
        e.outcome(Some(&spec), WriteOutcome::Written, t0);
        let taken = held_by("other", 9);
        assert!(matches!(
            e.decide(Some(&taken), t0 + Duration::from_secs(9), at(9)),
            Decision::Follow { .. }
        ));
        assert!(!e.leadership().leading);
    }

    #[test]
    fn release_gives_up_only_our_own_lease() {
        let mut e = LeaderElection::new(config());
        let released = e.release(&held_by("me", 1), at(8)).expect("ours");
        assert_eq!(released.holder_identity, None);
        assert_eq!(released.lease_duration_seconds, Some(1));
        assert_eq!(released.renew_time, Some(MicroTime(at(8))));
        assert_eq!(released.lease_transitions, Some(3));
        assert_eq!(e.release(&held_by("other", 1), at(8)), None);
    }

    #[test]
    fn health_fails_only_for_a_leader_stuck_past_the_lease_and_tolerance() {
        let t0 = Instant::now();
        let lease = Duration::from_secs(15);
        let follower = Leadership::default();
        assert!(follower.check(t0 + Duration::from_secs(100), lease).is_ok());
        let leader = Leadership {
            leading: true,
            renewed_at: Some(t0),
        };
        assert!(leader.check(t0 + Duration::from_secs(35), lease).is_ok());
        let err = leader
            .check(t0 + Duration::from_secs(36), lease)
            .expect_err("stuck");
        assert!(
            err.starts_with("failed election to renew leadership"),
            "{err}"
        );
    }

    #[test]
    fn config_validation_names_the_field() {
        assert!(config().validate().is_ok());
        let field = |f: fn(&mut LeaderElectionConfig)| {
            let mut c = config();
            f(&mut c);
            c.validate().map_err(|e| e.field)
        };
        assert_eq!(
            field(|c| c.retry_period = Duration::from_secs(20)),
            Err("retry_period")
        );
        assert_eq!(
            field(|c| c.renew_deadline = Duration::from_secs(15)),
            Err("renew_deadline")
        );
        assert_eq!(
            field(|c| c.renew_deadline = Duration::from_secs(1)),
            Err("renew_deadline")
        );
        assert_eq!(field(|c| c.identity.clear()), Err("identity"));
        assert_eq!(
            field(|c| c.lease_duration = Duration::ZERO),
            Err("lease_duration")
        );
    }
}
