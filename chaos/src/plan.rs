//! The `[chaos]` plan: the actions a run takes, when, and to what. `kemu run` reads it from the
//! cluster config next to the cluster's own tables; `kemu chaos --dir` from the config the
//! cluster was started with. [`actions::schedule`](crate::actions::schedule) expands it.

use serde::Deserialize;

/// The `[chaos]` table. Unknown keys are errors.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ChaosPlan {
    /// Seed for random target choices.
    pub seed: u64,
    #[serde(rename = "action")]
    pub actions: Vec<ChaosAction>,
}

/// One `[[chaos.action]]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChaosAction {
    /// Seconds after the load starts.
    pub at: f64,
    /// `kill-store-leader`, `kill-store-follower`, `kill`, `stop`, `isolate`, ….
    pub kind: String,
    /// A component or host name, when the kind needs one.
    #[serde(default)]
    pub target: Option<String>,
    /// Seconds until the target is restarted, resumed or healed.
    #[serde(default)]
    pub restore_after: Option<f64>,
    /// Repeat every this many seconds until the load ends.
    #[serde(default)]
    pub every: Option<f64>,
}

/// A value of the plan that makes no sense.
#[derive(Debug, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct InvalidPlan {
    /// The dotted field (`chaos.action[2].every`).
    pub field: String,
    pub reason: String,
}

impl ChaosPlan {
    /// Checks the values the types allow but a plan cannot have (the action kinds and targets
    /// are checked when the plan is scheduled).
    pub fn validate(&self) -> Result<(), InvalidPlan> {
        for (i, action) in self.actions.iter().enumerate() {
            let bad = |f: &str, reason: &str| {
                Err(InvalidPlan {
                    field: format!("chaos.action[{i}].{f}"),
                    reason: reason.into(),
                })
            };
            if !(action.at.is_finite() && action.at >= 0.0) {
                return bad("at", "must be >= 0");
            }
            if action.every.is_some_and(|e| !(e.is_finite() && e > 0.0)) {
                return bad("every", "must be > 0");
            }
        }
        Ok(())
    }

    /// Whether the plan does anything.
    pub fn has_actions(&self) -> bool {
        !self.actions.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_times_name_the_action() {
        let plan = |at: f64, every: Option<f64>| ChaosPlan {
            seed: 0,
            actions: vec![ChaosAction {
                at,
                kind: "kill".into(),
                target: None,
                restore_after: None,
                every,
            }],
        };
        assert!(plan(1.0, Some(2.0)).validate().is_ok());
        let e = plan(-1.0, None).validate().unwrap_err().to_string();
        assert_eq!(e, "chaos.action[0].at: must be >= 0");
        let e = plan(1.0, Some(0.0)).validate().unwrap_err().to_string();
        assert_eq!(e, "chaos.action[0].every: must be > 0");
    }
}
