//! Leader election on a `coordination.k8s.io/v1` Lease, as client-go's leaderelection does:
//! the holder renews every `retry_period`; the others take over once they have seen the same
//! record unchanged for `lease_duration` (time measured on their own clock, so clocks of
//! different hosts need not agree). [`Election`] is the pure decision; [`run`] the driver.

use std::future::Future;
use std::time::{Duration, Instant};

use api::client::{Client, ClientError};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use tokio::sync::watch;
use tracing::{debug, info, warn};

/// Settings of the election.
#[derive(Clone, Debug)]
pub struct ElectionConfig {
    pub namespace: String,
    pub name: String,
    /// This process's `holderIdentity`.
    pub identity: String,
    pub lease_duration: Duration,
    /// How often the holder renews and the others look.
    pub retry_period: Duration,
}

/// What to do with the lease as it was just read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaseAction {
    /// No lease yet: create it holding it.
    Create,
    /// We hold it: renew.
    Renew,
    /// The holder let it expire (or released it): take it.
    TakeOver,
    /// Someone else holds it.
    Follow { holder: String },
}

/// The election's memory: the last record seen and when it was first seen.
#[derive(Debug)]
pub struct Election {
    identity: String,
    lease_duration: Duration,
    observed: Option<(String, String, Instant)>,
}

impl Election {
    pub fn new(identity: &str, lease_duration: Duration) -> Election {
        Election {
            identity: identity.to_string(),
            lease_duration,
            observed: None,
        }
    }

    /// Decides from the lease as read at `now`.
    pub fn decide(&mut self, lease: Option<&Lease>, now: Instant) -> LeaseAction {
        let Some(lease) = lease else {
            return LeaseAction::Create;
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().unwrap_or_default();
        if holder == self.identity {
            return LeaseAction::Renew;
        }
        if holder.is_empty() {
            return LeaseAction::TakeOver;
        }
        let record = format!(
            "{:?}/{:?}",
            spec.renew_time.map(|t| t.0),
            spec.lease_duration_seconds
        );
        let duration = spec
            .lease_duration_seconds
            .map(|s| Duration::from_secs(s.max(1) as u64))
            .unwrap_or(self.lease_duration);
        match &self.observed {
            Some((h, r, since)) if *h == holder && *r == record => {
                if now.duration_since(*since) >= duration {
                    LeaseAction::TakeOver
                } else {
                    LeaseAction::Follow { holder }
                }
            }
            _ => {
                self.observed = Some((holder.clone(), record, now));
                LeaseAction::Follow { holder }
            }
        }
    }
}

fn now_micro() -> MicroTime {
    MicroTime(wall_clock())
}

/// The wall clock as the timestamp type of k8s-openapi objects.
pub(crate) fn wall_clock() -> k8s_openapi::jiff::Timestamp {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    k8s_openapi::jiff::Timestamp::new(
        since_epoch.as_secs() as i64,
        since_epoch.subsec_nanos() as i32,
    )
    .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
}

fn leases() -> &'static api::ResourceInfo {
    api::resources::find("coordination.k8s.io", "v1", "leases").expect("leases are served")
}

/// Campaigns until `shutdown`, publishing whether this process leads on `leading`. A leader
/// that cannot renew within the lease duration steps down. On shutdown a leader releases the
/// lease so that another takes over at once.
pub async fn run(
    client: Client,
    config: ElectionConfig,
    leading: watch::Sender<bool>,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let mut election = Election::new(&config.identity, config.lease_duration);
    let mut last_renew: Option<Instant> = None;
    loop {
        let attempt = step(&client, &config, &mut election);
        let outcome = tokio::select! {
            biased;
            () = &mut shutdown => break,
            outcome = attempt => outcome,
        };
        let now = Instant::now();
        match outcome {
            Ok(true) => {
                if !*leading.borrow() {
                    info!(identity = %config.identity, "became the leader");
                }
                last_renew = Some(now);
                leading.send_replace(true);
            }
            Ok(false) => {
                if *leading.borrow() {
                    warn!("lost the lease to another scheduler");
                }
                leading.send_replace(false);
            }
            Err(e) => {
                debug!(error = %e, "lease attempt failed");
                let expired =
                    last_renew.is_none_or(|t| now.duration_since(t) >= config.lease_duration);
                if *leading.borrow() && expired {
                    warn!("could not renew the lease in time; stepping down");
                    leading.send_replace(false);
                }
            }
        }
        tokio::select! {
            biased;
            () = &mut shutdown => break,
            () = tokio::time::sleep(config.retry_period) => {}
        }
    }
    if *leading.borrow() {
        leading.send_replace(false);
        release(&client, &config).await;
    }
}

/// One look at the lease: true if we hold it afterwards.
async fn step(
    client: &Client,
    config: &ElectionConfig,
    election: &mut Election,
) -> Result<bool, ClientError> {
    let current: Option<Lease> = match client
        .get(leases(), Some(&config.namespace), &config.name)
        .await
    {
        Ok(lease) => Some(lease),
        Err(e) if e.is_not_found() => None,
        Err(e) => return Err(e),
    };
    let action = election.decide(current.as_ref(), Instant::now());
    let seconds = config.lease_duration.as_secs().max(1) as i32;
    match (action, current) {
        (LeaseAction::Create, _) => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(config.name.clone()),
                    namespace: Some(config.namespace.clone()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(config.identity.clone()),
                    lease_duration_seconds: Some(seconds),
                    acquire_time: Some(now_micro()),
                    renew_time: Some(now_micro()),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            match client
                .create::<_, Lease>(leases(), Some(&config.namespace), &lease)
                .await
            {
                Ok(_) => Ok(true),
                Err(e) if e.is_conflict() => Ok(false),
                Err(e) => Err(e),
            }
        }
        (LeaseAction::Follow { .. }, _) | (_, None) => Ok(false),
        (action, Some(mut lease)) => {
            let spec = lease.spec.get_or_insert_with(Default::default);
            if action == LeaseAction::TakeOver {
                spec.holder_identity = Some(config.identity.clone());
                spec.acquire_time = Some(now_micro());
                spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
            }
            spec.lease_duration_seconds = Some(seconds);
            spec.renew_time = Some(now_micro());
            match client
                .update::<_, Lease>(leases(), Some(&config.namespace), &config.name, &lease)
                .await
            {
                Ok(_) => Ok(true),
                // Someone else wrote first: look again next round.
                Err(e) if e.is_conflict() => Ok(false),
                Err(e) => Err(e),
            }
        }
    }
}

async fn release(client: &Client, config: &ElectionConfig) {
    let Ok(mut lease) = client
        .get::<Lease>(leases(), Some(&config.namespace), &config.name)
        .await
    else {
        return;
    };
    let spec = lease.spec.get_or_insert_with(Default::default);
    if spec.holder_identity.as_deref() != Some(&config.identity) {
        return;
    }
    spec.holder_identity = None;
    spec.lease_duration_seconds = Some(1);
    match client
        .update::<_, Lease>(leases(), Some(&config.namespace), &config.name, &lease)
        .await
    {
        Ok(_) => info!("released the lease"),
        Err(e) => debug!(error = %e, "could not release the lease"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: &str, renewed: i64) -> Lease {
        Lease {
            metadata: ObjectMeta::default(),
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.into()),
                lease_duration_seconds: Some(15),
                renew_time: Some(MicroTime(
                    k8s_openapi::jiff::Timestamp::from_second(renewed).unwrap(),
                )),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn takes_over_only_after_the_record_stays_unchanged_for_the_duration() {
        let t0 = Instant::now();
        let mut e = Election::new("me", Duration::from_secs(15));
        assert_eq!(e.decide(None, t0), LeaseAction::Create);
        assert_eq!(e.decide(Some(&lease("me", 1)), t0), LeaseAction::Renew);
        let follow = LeaseAction::Follow {
            holder: "other".into(),
        };
        assert_eq!(e.decide(Some(&lease("other", 1)), t0), follow);
        assert_eq!(
            e.decide(Some(&lease("other", 1)), t0 + Duration::from_secs(14)),
            follow
        );
        // Renewed meanwhile: the clock starts again.
        assert_eq!(
            e.decide(Some(&lease("other", 2)), t0 + Duration::from_secs(14)),
            follow
        );
        assert_eq!(
            e.decide(Some(&lease("other", 2)), t0 + Duration::from_secs(28)),
            follow
        );
        assert_eq!(
            e.decide(Some(&lease("other", 2)), t0 + Duration::from_secs(29)),
            LeaseAction::TakeOver
        );
        // A released lease is free at once.
        assert_eq!(e.decide(Some(&lease("", 3)), t0), LeaseAction::TakeOver);
    }
}
