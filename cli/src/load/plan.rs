//! The `[load]` plan: what to create, how fast, and what counts as passing.

use serde::Deserialize;

/// A load plan, as the `[load]` table of a cluster config or a file given to `kemu load`.
/// Unknown keys are errors.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LoadPlan {
    /// Pods to create in all.
    pub pods: u64,
    /// Creates per second.
    pub rate: f64,
    /// Namespaces the pods are spread over.
    pub namespaces: u32,
}

impl Default for LoadPlan {
    fn default() -> Self {
        LoadPlan { pods: 500, rate: 100.0, namespaces: 1 }
    }
}

impl LoadPlan {
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.rate <= 0.0 {
            anyhow::bail!("load.rate: must be positive");
        }
        if self.namespaces == 0 {
            anyhow::bail!("load.namespaces: must be at least 1");
        }
        Ok(())
    }
}
