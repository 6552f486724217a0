//! clusterloader2 (CL2) test configs, run unmodified against any cluster kemu can reach
//! (`kemu load --cl2`, or `cl2` in a cluster config's `[load]` for `kemu run`):
//!
//! - [`gotmpl`]: Go's text/template with clusterloader2's functions, which renders the config,
//!   its modules and its object templates.
//! - [`config`]: the parameters (override files, `CL2_*` variables, `--param`, `.Nodes`) and
//!   clusterloader2's config schema, checked before anything is created.
//! - [`tuning`]: the tuning sets (when each action of a phase starts).
//! - [`objects`]: the objects through the API (discovery, create/patch/delete, list).
//! - [`runner`]: the steps and phases, with clusterloader2's replica semantics.
//! - [`measurements`]: the measurements kemu computes, and the ones it reports as not computed;
//!   [`api_responsiveness`] from the API servers' `/metrics` ([`prometheus`] reads the text
//!   exposition); [`component_measurements`] from the cluster's processes ([`processes`]):
//!   [`resource_usage`], [`etcd_metrics`] and [`scheduling_metrics`]; [`metrics_for_e2e`];
//!   [`system_pod_metrics`] and [`ooms_tracker`] from the API; all bundled by [`test_metrics`];
//!   [`restart_apiserver`] through the cluster's processes.
//! - [`report`]: clusterloader2's result files and kemu's `cl2-report.json`/`.html`;
//!   [`junit`]: clusterloader2's `junit.xml`.

pub mod api_responsiveness;
pub mod component_measurements;
pub mod config;
pub mod etcd_metrics;
pub mod gotmpl;
pub mod informer;
pub mod junit;
pub mod measurements;
pub mod metrics_for_e2e;
pub mod objects;
pub mod ooms_tracker;
pub mod processes;
pub mod prometheus;
pub mod report;
pub mod resource_usage;
pub mod restart_apiserver;
pub mod runner;
pub mod scheduling_metrics;
pub mod system_pod_metrics;
pub mod test_metrics;
pub mod tuning;

#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use rand::Rng;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::client::ApiClient;
use cluster::shutdown::Interrupt;
use config::{LoadedConfig, Parameters};
use measurements::MeasurementContext;
use processes::ClusterView;
use report::Cl2Report;

/// A clusterloader2 run: the config and its parameters.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Cl2Options {
    /// The test config (YAML, Go-templated).
    pub config: PathBuf,
    /// Override files (YAML maps of parameters), later ones winning.
    pub overrides: Vec<PathBuf>,
    /// `KEY=VALUE` parameters, over the override files and `CL2_*` variables.
    pub params: Vec<String>,
    /// The registry of the images the configs name (`.ImageRegistry`, clusterloader2's
    /// `--registry-k8s-repo`); empty: the environment's `REGISTRY_K8S_REPO`, else
    /// `registry.k8s.io`.
    pub image_registry: String,
}

/// clusterloader2's default for `.ImageRegistry`.
pub const DEFAULT_IMAGE_REGISTRY: &str = "registry.k8s.io";

impl Cl2Options {
    /// `.ImageRegistry`: the option, else `REGISTRY_K8S_REPO`, else `registry.k8s.io`.
    pub fn image_registry(&self) -> String {
        if !self.image_registry.is_empty() {
            return self.image_registry.clone();
        }
        match std::env::var("REGISTRY_K8S_REPO") {
            Ok(value) if !value.is_empty() => value,
            _ => DEFAULT_IMAGE_REGISTRY.to_string(),
        }
    }
}

/// What a finished run produced.
#[derive(Clone, Debug)]
pub struct Cl2Outcome {
    pub passed: bool,
    pub report: Cl2Report,
    pub report_json: PathBuf,
    pub report_html: PathBuf,
    pub summary: String,
}

/// Counts the cluster's nodes (`.Nodes`).
async fn count_nodes(objects: &objects::Objects) -> anyhow::Result<i64> {
    let list = objects
        .get("list", "nodes", "/api/v1/nodes")
        .await
        .context("listing the cluster's nodes")?;
    Ok(list["items"].as_array().map_or(0, |a| a.len() as i64))
}

/// Renders and checks the config against the cluster's node count, creating nothing.
pub async fn load(options: &Cl2Options, client: &ApiClient) -> anyhow::Result<(LoadedConfig, i64)> {
    let objects = objects::Objects::new(client.clone());
    let nodes = count_nodes(&objects).await?;
    let parameters = Parameters::gather(
        &options.overrides,
        std::env::vars(),
        &options.params,
        nodes.max(0) as u64,
        &options.image_registry(),
    )?;
    Ok((LoadedConfig::load(&options.config, parameters)?, nodes))
}

/// Runs the config against the cluster of `kubeconfig` and writes the reports into
/// `report_dir`; `processes` is what is known of the cluster's processes (for the
/// measurements read from them). A bad config fails before anything is created; the first stop
/// signal ends the step under way and the run (the reports say so).
pub async fn run(
    options: &Cl2Options,
    kubeconfig: &cluster::api_access::KubeconfigChoice,
    processes: Option<ClusterView>,
    report_dir: &std::path::Path,
    interrupt: &Interrupt,
) -> anyhow::Result<Cl2Outcome> {
    let (server, credentials) = kubeconfig.load()?;
    let client = ApiClient::new(&server, &credentials, false)?;
    let (loaded, nodes) = load(options, &client).await?;
    let mut other_api_servers = Vec::new();
    for url in processes.iter().flat_map(|p| &p.other_api_servers) {
        other_api_servers.push(ApiClient::new(url, &credentials, false)?);
    }
    let context = MeasurementContext {
        cluster: processes,
        other_api_servers,
        config_dir: loaded.dir().to_path_buf(),
        nodes,
    };
    std::fs::create_dir_all(report_dir)
        .with_context(|| format!("creating {}", report_dir.display()))?;
    let prefix = match loaded.test.namespace.prefix.as_str() {
        "" => {
            let mut rng = rand::thread_rng();
            let tail: String = (0..6)
                .map(|_| (b'a' + rng.gen_range(0..26u8)) as char)
                .collect();
            format!("test-{tail}")
        }
        p => p.to_string(),
    };
    let name = loaded.test.name.clone();
    let delete_at_end = loaded.test.namespace.deleteautomanagednamespaces;
    let wall_start = chrono::Utc::now();
    let start = Instant::now();
    let runner = Arc::new(runner::Runner::new(
        loaded,
        objects::Objects::new(client),
        prefix.clone(),
        context,
    ));
    tracing::info!("cl2: running {name:?} against {server} ({nodes} nodes), namespaces {prefix}-N");
    runner.create_namespaces().await?;
    let (steps, mut results, interrupted) = runner::run_steps(&runner, interrupt, start).await;
    results.extend(runner.measurements.abandoned().await);
    if delete_at_end && !interrupted {
        runner.delete_namespaces().await;
    }
    let timestamp = wall_start.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let result_files = report::write_result_files(report_dir, &name, &timestamp, &results)?;
    let passed = Cl2Report::verdict(&results, &steps, interrupted);
    let report = Cl2Report {
        schema: report::SCHEMA_ID.into(),
        config: options.config.display().to_string(),
        name,
        server,
        namespace_prefix: prefix,
        nodes,
        started_at: wall_start.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        duration_s: start.elapsed().as_secs_f64(),
        passed,
        interrupted,
        steps,
        measurements: results,
        result_files,
    };
    let (report_json, report_html) = report::write(&report, report_dir)?;
    let summary = report::summary(&report);
    Ok(Cl2Outcome {
        passed,
        report,
        report_json,
        report_html,
        summary,
    })
}
