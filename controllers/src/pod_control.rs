//! [`PodControl`]: how the controllers that make pods from a template (ReplicaSet,
//! ReplicationController, DaemonSet, Job) create and delete them, recording the events
//! kube-controller-manager's pod control records on the owner: `SuccessfulCreate` "Created pod:
//! NAME", `FailedCreate` "Error creating: ...", `SuccessfulDelete` "Deleted pod: NAME" and
//! `FailedDelete` "Error deleting: ...".

use api::client::{Client, DeleteParams};
use api::resources;
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use serde_json::Value;
use tokio::task::JoinSet;

use crate::events::{error_text, Recorder};
use crate::worker::ReconcileError;

/// One controller's pod creation and deletion (cheap to clone).
#[derive(Clone)]
pub struct PodControl {
    client: Client,
    events: Recorder,
}

impl PodControl {
    pub fn new(client: Client, events: Recorder) -> PodControl {
        PodControl { client, events }
    }

    /// The recorder the pod events go through, for the controller's own events.
    pub fn events(&self) -> &Recorder {
        &self.events
    }

    /// Creates `pods` in slow-start batches (1, 2, 4, … at once, stopping after the first batch
    /// with a failure, so a failing API sees a few attempts rather than a whole burst); calls
    /// `not_created` once per pod that was not created (failed or never sent).
    pub async fn create(
        &self,
        owner: &ObjectReference,
        pods: Vec<Pod>,
        not_created: impl Fn(),
    ) -> Result<(), ReconcileError> {
        let mut pods = pods.into_iter();
        let mut remaining = pods.len();
        let mut batch = 1usize;
        while remaining > 0 {
            let size = batch.min(remaining);
            let mut tasks = JoinSet::new();
            for pod in pods.by_ref().take(size) {
                let client = self.client.clone();
                let namespace = pod.metadata.namespace.clone().unwrap_or_default();
                tasks.spawn(async move {
                    client
                        .create::<Pod, Value>(resources::pods(), Some(&namespace), &pod)
                        .await
                });
            }
            let mut error = None;
            while let Some(done) = tasks.join_next().await {
                match done {
                    Ok(Ok(pod)) => {
                        let name = pod
                            .pointer("/metadata/name")
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        let message = format!("Created pod: {name}");
                        self.events
                            .record(owner.clone(), false, "SuccessfulCreate", &message);
                    }
                    Ok(Err(e)) => {
                        not_created();
                        if error.is_none() {
                            let message = format!("Error creating: {}", error_text(&e));
                            self.events
                                .record(owner.clone(), true, "FailedCreate", &message);
                            error = Some(ReconcileError::api("create pod")(e));
                        }
                    }
                    Err(_) => not_created(),
                }
            }
            remaining -= size;
            if let Some(e) = error {
                for _ in 0..remaining {
                    not_created();
                }
                return Err(e);
            }
            batch *= 2;
        }
        Ok(())
    }

    /// Deletes the named pods of `namespace` at once; calls `not_deleted` with each name whose
    /// deletion failed (a pod already gone included). Returns the first failure other than
    /// NotFound.
    pub async fn delete(
        &self,
        owner: &ObjectReference,
        namespace: &str,
        names: &[String],
        not_deleted: impl Fn(&str),
    ) -> Result<(), ReconcileError> {
        let mut tasks = JoinSet::new();
        for name in names.iter().cloned() {
            let client = self.client.clone();
            let namespace = namespace.to_string();
            tasks.spawn(async move {
                let result = client
                    .delete::<Value>(
                        resources::pods(),
                        Some(&namespace),
                        &name,
                        &DeleteParams::default(),
                    )
                    .await;
                (name, result)
            });
        }
        let mut first_error = None;
        while let Some(done) = tasks.join_next().await {
            let Ok((name, result)) = done else {
                continue;
            };
            match result {
                Ok(_) => {
                    let message = format!("Deleted pod: {name}");
                    self.events
                        .record(owner.clone(), false, "SuccessfulDelete", &message);
                }
                Err(e) if e.is_not_found() => not_deleted(&name),
                Err(e) => {
                    not_deleted(&name);
                    let message = format!("Error deleting: {}", error_text(&e));
                    self.events
                        .record(owner.clone(), true, "FailedDelete", &message);
                    first_error.get_or_insert(ReconcileError::api(format!("delete pod {name}"))(e));
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
