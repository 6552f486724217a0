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
