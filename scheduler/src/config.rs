//! [`SchedulerConfig`]: the scheduler's settings, with defaults in one place and a
//! [`validate`](SchedulerConfig::validate) naming the bad field.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use api::leader_election::LeaderElectionConfig;
use transport::Endpoint;

/// Why the scheduler could not run.
#[derive(Debug, thiserror::Error)]
pub enum SchedulerError {
    #[error("config {field}: {reason}")]
    Config { field: &'static str, reason: String },
    #[error("API client: {0}")]
    Client(#[source] api::client::ClientError),
    #[error("metrics address: {0}")]
    Metrics(#[source] telemetry::ServeError),
    #[error("the actor system thread: {0}")]
    Actors(String),
    /// The lease this scheduler held went to another (or expired): like kube-scheduler, it
    /// exits rather than risk scheduling beside the new leader; its supervisor starts it again.
    #[error("leader election lost")]
    LostLeadership,
}

#[derive(Clone, Debug)]
pub struct SchedulerConfig {
    /// API servers' QUIC fronts.
    pub endpoints: Vec<Endpoint>,
    pub certs_dir: PathBuf,
    /// The certificate this scheduler presents.
    pub identity: String,
    /// Pods whose `spec.schedulerName` is this are ours.
    pub scheduler_name: String,
    /// Scheduling worker threads.
    pub workers: usize,
    pub metrics_addr: Option<SocketAddr>,
    pub lease_namespace: String,
    pub lease_name: String,
    /// This process's `holderIdentity` in the lease.
    pub holder_identity: String,
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it stops leading.
    pub renew_deadline: Duration,
    pub retry_period: Duration,
    /// Seeds the workers' tie-breaking generators.
    pub seed: u64,
}

impl SchedulerConfig {
    pub fn new<E: Into<Endpoint>>(
        endpoints: impl IntoIterator<Item = E>,
        certs_dir: impl Into<PathBuf>,
    ) -> SchedulerConfig {
        SchedulerConfig {
            endpoints: endpoints.into_iter().map(Into::into).collect(),
            certs_dir: certs_dir.into(),
            identity: "scheduler".into(),
            scheduler_name: "default-scheduler".into(),
            workers: 4,
            metrics_addr: None,
            lease_namespace: "kube-system".into(),
            lease_name: "kube-scheduler".into(),
            holder_identity: format!(
                "{}_{}",
                std::env::var("HOSTNAME").unwrap_or_else(|_| "kemu".into()),
                std::process::id()
            ),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            seed: rand::random(),
        }
    }

    pub fn validate(&self) -> Result<(), SchedulerError> {
        let invalid = |field, reason: &str| {
            Err(SchedulerError::Config {
                field,
                reason: reason.into(),
            })
        };
        if self.endpoints.is_empty() {
            return invalid("endpoints", "at least one API server is required");
        }
        if self.scheduler_name.is_empty() {
            return invalid("scheduler_name", "must not be empty");
        }
        if self.workers == 0 {
            return invalid("workers", "must be at least 1");
        }
        if self.holder_identity.is_empty() {
            return invalid("holder_identity", "must not be empty");
        }
        self.leader_election()
            .validate()
            .map_err(|e| SchedulerError::Config {
                field: e.field,
                reason: e.reason,
            })
    }

    /// The election on the scheduler's Lease, as kube-scheduler's `--leader-elect-*` flags.
    pub fn leader_election(&self) -> LeaderElectionConfig {
        LeaderElectionConfig {
            namespace: self.lease_namespace.clone(),
            name: self.lease_name.clone(),
            identity: self.holder_identity.clone(),
            lease_duration: self.lease_duration,
            renew_deadline: self.renew_deadline,
            retry_period: self.retry_period,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_names_the_field() {
        let mut c = SchedulerConfig::new(
            vec!["127.0.0.1:1".parse::<std::net::SocketAddr>().unwrap()],
            "/tmp",
        );
        assert!(c.validate().is_ok());
        c.workers = 0;
        assert!(matches!(
            c.validate(),
            Err(SchedulerError::Config {
                field: "workers",
                ..
            })
        ));
        c.workers = 1;
        c.retry_period = Duration::from_secs(20);
        assert!(matches!(
            c.validate(),
            Err(SchedulerError::Config {
                field: "retry_period",
                ..
            })
        ));
    }
}
