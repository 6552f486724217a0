//! Leader election on a `coordination.k8s.io/v1` Lease (client-go's leaderelection): the
//! holder renews the lease every `retry_period`; another candidate takes it over once it has
//! seen it unchanged for `lease_duration` (by its own clock, so clock skew does not matter);
//! a holder that cannot renew within `renew_deadline` steps down.
//!
//! The decision is the pure [`decide`]; [`LeaderElector`] does the I/O.

use std::time::{Duration, Instant};

use api::client::{Client, ClientError};
use api::resources;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::worker::{stopped, Shutdown};

/// Leader election settings (client-go's defaults for the controller manager).
#[derive(Clone, Debug)]
pub struct LeaderConfig {
    pub namespace: String,
    pub name: String,
    /// This candidate's holderIdentity.
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl LeaderConfig {
    pub fn new(identity: impl Into<String>) -> LeaderConfig {
        LeaderConfig {
            namespace: "kube-system".into(),
            name: "kube-controller-manager".into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// What a candidate should do with the lease it read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// No lease yet: create it, holding it.
    Create,
    /// We hold it: renew.
    Renew,
    /// Free or expired: take it over.
    TakeOver,
    /// Someone else holds it and renews it.
    Wait,
}

/// Decides from the lease's spec, and how long this candidate has seen it unchanged.
pub fn decide(
    spec: Option<&LeaseSpec>,
    identity: &str,
    unchanged_for: Duration,
    lease_duration: Duration,
) -> Decision {
    let Some(spec) = spec else {
        return Decision::Create;
    };
    match spec.holder_identity.as_deref() {
        Some(holder) if holder == identity => Decision::Renew,
        None | Some("") => Decision::TakeOver,
        Some(_) if unchanged_for > lease_duration => Decision::TakeOver,
        Some(_) => Decision::Wait,
    }
}

fn micro_now() -> MicroTime {
    MicroTime(
        Timestamp::from_microsecond(chrono::Utc::now().timestamp_micros())
            .unwrap_or(Timestamp::UNIX_EPOCH),
    )
}

/// Campaigns for, then keeps, the lease.
pub struct LeaderElector {
    client: Client,
    config: LeaderConfig,
    /// The holder and renew time last seen, and when they last changed (our clock).
    observed: Option<(Option<String>, Option<MicroTime>, Instant)>,
}

impl LeaderElector {
    pub fn new(client: Client, config: LeaderConfig) -> LeaderElector {
        LeaderElector {
            client,
            config,
            observed: None,
        }
    }

    /// Waits until this candidate holds the lease, then keeps renewing it in the background.
    /// The returned receiver turns true when leadership is lost. `None` on shutdown.
    pub async fn acquire(mut self, mut shutdown: Shutdown) -> Option<watch::Receiver<bool>> {
        info!(lease = %format!("{}/{}", self.config.namespace, self.config.name), identity = %self.config.identity, "campaigning for leadership");
        loop {
            match self.try_once().await {
                Ok(true) => break,
                Ok(false) => {}
                Err(e) => debug!(error = %e, "leader election attempt failed"),
            }
            tokio::select! {
                biased;
                () = stopped(&mut shutdown) => return None,
                () = tokio::time::sleep(self.config.retry_period) => {}
            }
        }
        info!("became the leader");
        let (lost_tx, lost_rx) = watch::channel(false);
        tokio::spawn(async move {
            let mut last_renewed = Instant::now();
            loop {
                tokio::select! {
                    biased;
                    () = stopped(&mut shutdown) => {
                        self.release().await;
                        return;
                    }
                    () = tokio::time::sleep(self.config.retry_period) => {}
                }
                match self.try_once().await {
                    Ok(true) => last_renewed = Instant::now(),
                    Ok(false) => {
                        warn!("the lease was taken over; stepping down");
                        let _ = lost_tx.send(true);
                        return;
                    }
                    Err(e) => {
                        warn!(error = %e, "cannot renew the lease");
                        if last_renewed.elapsed() > self.config.renew_deadline {
                            warn!("renew deadline passed; stepping down");
                            let _ = lost_tx.send(true);
                            return;
                        }
                    }
                }
            }
        });
        Some(lost_rx)
    }

    /// One read-decide-write round; true if we hold the lease afterwards.
    async fn try_once(&mut self) -> Result<bool, ClientError> {
        let leases = resources::find("coordination.k8s.io", "v1", "leases").expect("leases");
        let ns = self.config.namespace.clone();
        let current = match self
            .client
            .get::<Lease>(leases, Some(&ns), &self.config.name)
            .await
        {
            Ok(lease) => Some(lease),
            Err(e) if e.is_not_found() => None,
            Err(e) => return Err(e),
        };
        let spec = current.as_ref().and_then(|l| l.spec.clone());
        let seen = (
            spec.as_ref().and_then(|s| s.holder_identity.clone()),
            spec.as_ref().and_then(|s| s.renew_time.clone()),
        );
        let unchanged_for = match &self.observed {
            Some((holder, renew, at)) if (holder, renew) == (&seen.0, &seen.1) => at.elapsed(),
            _ => {
                self.observed = Some((seen.0.clone(), seen.1.clone(), Instant::now()));
                Duration::ZERO
            }
        };
        let decision = decide(
            spec.as_ref(),
            &self.config.identity,
            unchanged_for,
            self.config.lease_duration,
        );
        let now = micro_now();
        let duration = self.config.lease_duration.as_secs() as i32;
        let result = match (decision, current) {
            (Decision::Wait, _) => return Ok(false),
            (Decision::Create, _) | (_, None) => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.config.name.clone()),
                        namespace: Some(ns.clone()),
                        ..Default::default()
                    },
                    spec: Some(LeaseSpec {
                        holder_identity: Some(self.config.identity.clone()),
                        lease_duration_seconds: Some(duration),
                        acquire_time: Some(now.clone()),
                        renew_time: Some(now),
                        lease_transitions: Some(0),
                        ..Default::default()
                    }),
                };
                self.client
                    .create::<Lease, Lease>(leases, Some(&ns), &lease)
                    .await
            }
            (decision, Some(mut lease)) => {
                let mut spec = lease.spec.take().unwrap_or_default();
                if decision == Decision::TakeOver {
                    spec.holder_identity = Some(self.config.identity.clone());
                    spec.acquire_time = Some(now.clone());
                    spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
                }
                spec.renew_time = Some(now);
                spec.lease_duration_seconds = Some(duration);
                lease.spec = Some(spec);
                self.client
                    .update::<Lease, Lease>(leases, Some(&ns), &self.config.name, &lease)
                    .await
            }
        };
        match result {
            Ok(_) => Ok(true),
            // Someone else wrote first; look again next round.
            Err(e) if e.is_conflict() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Gives the lease up on a clean stop, so a standby takes over at once.
    async fn release(&mut self) {
        let leases = resources::find("coordination.k8s.io", "v1", "leases").expect("leases");
        let ns = self.config.namespace.clone();
        let Ok(mut lease) = self
            .client
            .get::<Lease>(leases, Some(&ns), &self.config.name)
            .await
        else {
            return;
        };
        if let Some(spec) = lease.spec.as_mut() {
            if spec.holder_identity.as_deref() == Some(self.config.identity.as_str()) {
                spec.holder_identity = None;
                let _ = self
                    .client
                    .update::<Lease, Lease>(leases, Some(&ns), &self.config.name, &lease)
                    .await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held_by(holder: &str) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            ..Default::default()
        }
    }

    #[test]
    fn decisions() {
        let d = Duration::from_secs(15);
        let fresh = Duration::from_secs(1);
        let stale = Duration::from_secs(16);
        assert_eq!(decide(None, "me", fresh, d), Decision::Create);
        assert_eq!(
            decide(Some(&held_by("me")), "me", stale, d),
            Decision::Renew
        );
        assert_eq!(
            decide(Some(&held_by("other")), "me", fresh, d),
            Decision::Wait
        );
        assert_eq!(
            decide(Some(&held_by("other")), "me", stale, d),
            Decision::TakeOver
        );
        assert_eq!(
            decide(Some(&held_by("")), "me", fresh, d),
            Decision::TakeOver
        );
    }
}
