//! A cluster `kemu render` put on a Kubernetes cluster (the engine), as its chaos Job acts on
//! it: a kill deletes the component's pod at once (grace period 0, the nearest Kubernetes has
//! to SIGKILL) and its StatefulSet or Deployment starts it again; the store members are
//! reached by their stable DNS names, and kemu's API through its Service.
//!
//! What a pod cannot be sent through the Kubernetes API — SIGSTOP and SIGCONT, a host's link
//! going down — is refused with a message, and the action is recorded as not done.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use futures::future::BoxFuture;
use nix::sys::signal::Signal;
use serde_json::Value as Json;
use store::client::Client;
use transport::Endpoint;

use cluster::api_access::{ApiAccess, ApiCredentials};
use cluster::layout::Kind;
use cluster::render::Names;

use crate::targets::{client, ChaosCluster};

/// Where a pod finds its service account's credentials.
const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// What a [`KubernetesTarget`] acts on.
#[derive(Clone, Debug)]
pub struct KubernetesTargetConfig {
    /// The engine's API server and a credential that may list and delete pods in `namespace`.
    pub engine: (String, ApiCredentials),
    /// The namespace the cluster was rendered into.
    pub namespace: String,
    /// The cluster's name (the pods' `app.kubernetes.io/instance` label).
    pub instance: String,
    /// Store members: (member and pod name, client endpoint).
    pub members: Vec<(String, Endpoint)>,
    /// The CA and the store administrator's certificate (`ca.crt`, `store-admin.crt`, `.key`).
    pub certs: PathBuf,
    /// kemu's API (its Service) and the administrator's credential, for the API probes.
    pub api: Option<(String, ApiCredentials)>,
}

/// A rendered cluster on Kubernetes.
pub struct KubernetesTarget {
    engine: ApiAccess,
    config: KubernetesTargetConfig,
}

impl KubernetesTarget {
    pub fn new(config: KubernetesTargetConfig) -> anyhow::Result<KubernetesTarget> {
        let engine = ApiAccess::at_url(&config.engine.0, &config.engine.1)
            .with_context(|| format!("the engine's API at {}", config.engine.0))?;
        Ok(KubernetesTarget { engine, config })
    }

    /// The engine's API as a pod sees it: `KUBERNETES_SERVICE_HOST` and `_PORT`, with the
    /// pod's service-account token and the cluster CA.
    pub fn in_cluster_engine() -> anyhow::Result<(String, ApiCredentials)> {
        let host = std::env::var("KUBERNETES_SERVICE_HOST").context(
            "KUBERNETES_SERVICE_HOST is not set: not in a pod? Give the engine's kubeconfig",
        )?;
        let port = std::env::var("KUBERNETES_SERVICE_PORT").unwrap_or_else(|_| "443".into());
        let host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host
        };
        let dir = std::path::Path::new(SERVICE_ACCOUNT_DIR);
        let read = |name: &str| {
            std::fs::read(dir.join(name))
                .with_context(|| format!("reading {}", dir.join(name).display()))
        };
        let token =
            String::from_utf8(read("token")?).context("the service account token is not UTF-8")?;
        let credentials = ApiCredentials {
            ca_pem: read("ca.crt")?,
            client_pem: None,
            token: Some(token.trim().to_string()),
        };
        Ok((format!("https://{host}:{port}"), credentials))
    }

    /// The workload a kind of component runs as.
    fn workload(kind: Kind) -> &'static str {
        match kind {
            Kind::Store => Names::STORE,
            Kind::Apiserver => Names::APISERVER,
            Kind::Scheduler => Names::SCHEDULER,
            Kind::Controllers => Names::CONTROLLERS,
            Kind::Nodehost => Names::NODEHOST,
        }
    }

    fn pods_path(&self) -> String {
        format!("/api/v1/namespaces/{}/pods", self.config.namespace)
    }

    /// The pods of `workload` that are not being deleted, by name.
    pub async fn pods(&self, workload: &str) -> anyhow::Result<Vec<String>> {
        let selector = format!(
            "app.kubernetes.io/instance={},app.kubernetes.io/name={workload}",
            self.config.instance
        );
        let path = format!(
            "{}?labelSelector={}",
            self.pods_path(),
            load::watcher::encode(&selector)
        );
        let (status, body) = self.engine.get(&path).await?;
        if status != 200 {
            bail!("listing pods {selector}: HTTP {status}: {}", message(&body));
        }
        let list: Json = serde_json::from_str(&body).context("the pod list is not JSON")?;
        let mut names: Vec<String> = list["items"]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
                    .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        Ok(names)
    }

    /// Deletes pod `name` with no grace period: its containers are killed, as SIGKILL kills a
    /// process, and its controller creates it again.
    pub async fn delete_pod(&self, name: &str) -> anyhow::Result<()> {
        let options = serde_json::json!({
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "gracePeriodSeconds": 0,
        });
        let (status, body) = self
            .engine
            .request(
                "DELETE",
                &format!("{}/{name}", self.pods_path()),
                Some("application/json"),
                options.to_string().as_bytes(),
            )
            .await?;
        match status {
            200 | 202 => Ok(()),
            _ => bail!("deleting pod {name}: HTTP {status}: {}", message(&body)),
        }
    }
}

/// A Status body's message, else the body.
fn message(body: &str) -> String {
    serde_json::from_str::<Json>(body)
        .ok()
        .and_then(|s| s["message"].as_str().map(str::to_string))
        .unwrap_or_else(|| body.chars().take(200).collect())
}

impl ChaosCluster for KubernetesTarget {
    fn store_members(&self) -> Vec<(String, Endpoint)> {
        self.config.members.clone()
    }

    fn components(&self, kind: Kind) -> BoxFuture<'_, Vec<String>> {
        Box::pin(async move {
            match self.pods(Self::workload(kind)).await {
                Ok(names) => names,
                Err(e) => {
                    tracing::warn!("chaos: {e:#}");
                    Vec::new()
                }
            }
        })
    }

    fn signal<'a>(&'a self, name: &'a str, signal: Signal) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(async move {
            if signal != Signal::SIGKILL {
                bail!(
                    "{signal} cannot reach a pod through the Kubernetes API: stop actions need a cluster of `kemu up`"
                );
            }
            self.delete_pod(name).await
        })
    }

    fn restart(&self, _name: &str) -> anyhow::Result<bool> {
        // Its StatefulSet or Deployment starts a deleted pod again.
        Ok(false)
    }

    fn set_link(&self, _host: &str, _up: bool) -> anyhow::Result<()> {
        bail!("partitions need a netns cluster of `kemu up`")
    }

    fn store_client(&self, attempt: Duration, call: Duration) -> anyhow::Result<Client> {
        client(
            self.config.members.iter().map(|(_, e)| e.clone()).collect(),
            &self.config.certs,
            attempt,
            call,
        )
    }

    fn api_servers(&self) -> anyhow::Result<Vec<(String, ApiAccess)>> {
        match &self.config.api {
            Some((url, credentials)) => Ok(vec![(
                Names::APISERVER.to_string(),
                ApiAccess::at_url(url, credentials)?,
            )]),
            None => Ok(Vec::new()),
        }
    }
}
