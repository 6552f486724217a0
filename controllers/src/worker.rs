//! The worker pool every controller runs: workers take keys from the controller's
//! [`WorkQueue`] and reconcile them one at a time; failures come back after their back-off.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use api::client::ClientError;
use tokio::sync::watch;
use tracing::{debug, info_span, warn, Instrument};

use crate::metrics::Metrics;
use crate::queue::WorkQueue;

/// How a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// An API call failed; retried after the key's back-off.
    #[error("{action}: {source}")]
    Api {
        action: String,
        #[source]
        source: ClientError,
    },
    /// The object cannot be handled as it is (retried after the back-off too: it may change).
    #[error("{0}")]
    Invalid(String),
}

impl ReconcileError {
    /// Wraps a client error with what was being done.
    pub fn api(action: impl Into<String>) -> impl FnOnce(ClientError) -> ReconcileError {
        let action = action.into();
        move |source| ReconcileError::Api { action, source }
    }
}

/// Writes `status` to the object's `status` subresource with a merge patch; an object deleted
/// meanwhile is no error.
pub async fn write_status(
    client: &api::client::Client,
    resource: &'static api::ResourceInfo,
    namespace: &str,
    name: &str,
    status: serde_json::Value,
) -> Result<(), ReconcileError> {
    let patch = api::client::Patch::Merge(serde_json::json!({ "status": status }));
    match client
        .patch_status::<serde_json::Value>(resource, Some(namespace), name, &patch)
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if e.is_not_found() => Ok(()),
        Err(e) => Err(ReconcileError::api("update status")(e)),
    }
}

/// How a sync that did all it could ends: with its first error, else with a look again after
/// `recheck_after` if it asked for one.
pub fn outcome(
    first_error: Option<ReconcileError>,
    recheck_after: Option<Duration>,
) -> Result<Outcome, ReconcileError> {
    match (first_error, recheck_after) {
        (Some(e), _) => Err(e),
        (None, Some(after)) => Ok(Outcome::RequeueAfter(after)),
        (None, None) => Ok(Outcome::Done),
    }
}

/// What a successful reconcile asks for next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing until the object or its dependents change.
    Done,
    /// Look again after this long (a deadline, a pending condition).
    RequeueAfter(Duration),
}

/// One controller's reconcile of one key (`namespace/name` or `name`).
pub trait Reconciler: Send + Sync + 'static {
    fn reconcile(&self, key: &str) -> impl Future<Output = Result<Outcome, ReconcileError>> + Send;
}

/// The shutdown signal every loop checks first.
pub type Shutdown = watch::Receiver<bool>;

/// Resolves once `shutdown` is set (or its sender is gone).
pub async fn stopped(shutdown: &mut Shutdown) {
    let _ = shutdown.wait_for(|s| *s).await;
}

/// Spawns `workers` workers reconciling keys of `queue` until `shutdown`.
pub fn spawn_workers<R: Reconciler>(
    controller: &'static str,
    queue: WorkQueue,
    reconciler: Arc<R>,
    workers: usize,
    metrics: Metrics,
    shutdown: Shutdown,
) {
    for _ in 0..workers.max(1) {
        let queue = queue.clone();
        let reconciler = reconciler.clone();
        let metrics = metrics.clone();
        let mut shutdown = shutdown.clone();
        tokio::spawn(async move {
            loop {
                let key = tokio::select! {
                    biased;
                    () = stopped(&mut shutdown) => return,
                    key = queue.get() => match key {
                        Some(key) => key,
                        None => return,
                    },
                };
                let span = info_span!("reconcile", controller, key = %key);
                let result = reconciler.reconcile(&key).instrument(span).await;
                metrics.reconciled(controller, result.is_ok());
                match result {
                    Ok(Outcome::Done) => queue.forget(&key),
                    Ok(Outcome::RequeueAfter(after)) => {
                        queue.forget(&key);
                        queue.add_after(&key, after);
                    }
                    Err(e) => {
                        if matches!(&e, ReconcileError::Api { source, .. } if source.is_conflict())
                        {
                            debug!(controller, %key, error = %e, "conflict; retrying");
                        } else {
                            warn!(controller, %key, error = %e, "reconcile failed; retrying");
                        }
                        queue.add_rate_limited(&key);
                    }
                }
                queue.done(&key);
            }
        });
    }
}
