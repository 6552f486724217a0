//! `kemu load`: pod create/delete throughput and latency, clusterloader2-style.
//!
//! - [`plan`]: the `[load]` plan of a cluster config (also given to `kemu load` directly).
//!
//! The launcher (`kemu run`) calls [`run`] with the running cluster as the [`LoadTarget`].

pub mod plan;

use std::path::PathBuf;

pub use plan::LoadPlan;

/// One kemu process whose CPU and memory the load run samples.
#[derive(Clone, Debug)]
pub struct SampledProcess {
    /// Component name, e.g. `store-s1`, `apiserver-1`, `nodehost-2`.
    pub name: String,
    pub pid: u32,
}

/// Where the load goes and where its report is written.
#[derive(Clone, Debug)]
pub struct LoadTarget {
    pub kubeconfig: PathBuf,
    /// Directory for `load-report.json` and `load-report.html`.
    pub report_dir: PathBuf,
    pub processes: Vec<SampledProcess>,
}

/// What a finished run produced.
#[derive(Clone, Debug)]
pub struct LoadOutcome {
    /// Every SLO check passed and every pod was accounted for.
    pub passed: bool,
    pub report_json: PathBuf,
    pub report_html: PathBuf,
    /// The terminal summary table.
    pub summary: String,
}

/// Runs `plan` against `target`.
pub async fn run(plan: &LoadPlan, target: &LoadTarget) -> anyhow::Result<LoadOutcome> {
    plan.validate()?;
    let _ = target;
    anyhow::bail!("the load generator is being written (issue [6/9])")
}
