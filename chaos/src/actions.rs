//! Chaos actions: their kinds, the schedule a `[chaos]` plan expands to, and the timestamped
//! record of what was done. Pure: the [`super::executor`] does the signals and the sleeping.

use serde::{Deserialize, Serialize};

use crate::plan::{ChaosAction, ChaosPlan};

/// What an action does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ActionKind {
    /// SIGKILL the store member that leads, restart it after a delay.
    KillStoreLeader,
    /// SIGKILL a random store member that does not lead, restart it after a delay.
    KillStoreFollower,
    /// SIGKILL a random store member, restart it after a delay.
    KillStoreRandom,
    /// SIGSTOP a store member (the target, else a random one), SIGCONT it after a delay.
    StopStoreMember,
    KillApiserver,
    KillScheduler,
    KillNodehost,
    KillControllers,
    /// SIGKILL the named component.
    Kill,
    /// SIGSTOP the named component, SIGCONT it after a delay.
    Stop,
    /// netns mode: take the host's link down (heal after `restore_after`, if given).
    PartitionHost,
    HealHost,
    // Restorations, recorded when they happen.
    Restart,
    Resume,
}

impl ActionKind {
    pub fn parse(text: &str) -> Option<ActionKind> {
        Some(match text {
            "kill-store-leader" => ActionKind::KillStoreLeader,
            "kill-store-follower" => ActionKind::KillStoreFollower,
            "kill-store-random" | "kill-store-member" => ActionKind::KillStoreRandom,
            "stop-store-member" => ActionKind::StopStoreMember,
            "kill-apiserver" => ActionKind::KillApiserver,
            "kill-scheduler" => ActionKind::KillScheduler,
            "kill-nodehost" => ActionKind::KillNodehost,
            "kill-controllers" => ActionKind::KillControllers,
            "kill" => ActionKind::Kill,
            "stop" => ActionKind::Stop,
            "partition-host" | "isolate" => ActionKind::PartitionHost,
            "heal-host" => ActionKind::HealHost,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ActionKind::KillStoreLeader => "kill-store-leader",
            ActionKind::KillStoreFollower => "kill-store-follower",
            ActionKind::KillStoreRandom => "kill-store-random",
            ActionKind::StopStoreMember => "stop-store-member",
            ActionKind::KillApiserver => "kill-apiserver",
            ActionKind::KillScheduler => "kill-scheduler",
            ActionKind::KillNodehost => "kill-nodehost",
            ActionKind::KillControllers => "kill-controllers",
            ActionKind::Kill => "kill",
            ActionKind::Stop => "stop",
            ActionKind::PartitionHost => "partition-host",
            ActionKind::HealHost => "heal-host",
            ActionKind::Restart => "restart",
            ActionKind::Resume => "resume",
        }
    }

    /// Whether the action needs a `target`.
    pub fn needs_target(self) -> bool {
        matches!(
            self,
            ActionKind::Kill | ActionKind::Stop | ActionKind::PartitionHost | ActionKind::HealHost
        )
    }

    /// The restoring action's delay when the plan gives none (seconds); `None`: not restored.
    pub fn default_restore_after(self) -> Option<f64> {
        match self {
            ActionKind::KillStoreLeader
            | ActionKind::KillStoreFollower
            | ActionKind::KillStoreRandom => Some(1.0),
            ActionKind::StopStoreMember | ActionKind::Stop => Some(3.0),
            _ => None,
        }
    }
}

/// One action at one time, after `every` has been expanded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScheduledAction {
    /// Seconds after the chaos starts.
    pub at_s: f64,
    pub kind: ActionKind,
    pub target: Option<String>,
    pub restore_after_s: Option<f64>,
}

/// Why a plan cannot run.
#[derive(Debug, thiserror::Error)]
#[error("chaos.action[{index}].{field}: {reason}")]
pub struct ScheduleError {
    pub index: usize,
    pub field: &'static str,
    pub reason: String,
}

/// Expands `plan` into actions in time order up to `duration_s` (repeats stop there).
pub fn schedule(plan: &ChaosPlan, duration_s: f64) -> Result<Vec<ScheduledAction>, ScheduleError> {
    let mut out = Vec::new();
    for (index, action) in plan.actions.iter().enumerate() {
        let bad = |field, reason: String| ScheduleError {
            index,
            field,
            reason,
        };
        let kind = ActionKind::parse(&action.kind)
            .ok_or_else(|| bad("kind", format!("unknown action kind {:?}", action.kind)))?;
        if kind.needs_target() && action.target.is_none() {
            return Err(bad("target", format!("{} needs a target", kind.as_str())));
        }
        // NaN fails both comparisons.
        if action.at.is_nan() || action.at < 0.0 {
            return Err(bad("at", "must be >= 0".into()));
        }
        if let Some(every) = action.every {
            if every.is_nan() || every <= 0.0 {
                return Err(bad("every", "must be > 0".into()));
            }
        }
        let restore_after_s = action.restore_after.or(kind.default_restore_after());
        let mut at = action.at;
        loop {
            if at > duration_s {
                break;
            }
            out.push(ScheduledAction {
                at_s: at,
                kind,
                target: action.target.clone(),
                restore_after_s,
            });
            match action.every {
                Some(every) => at += every,
                None => break,
            }
        }
    }
    out.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
    Ok(out)
}

/// A plan of one action kind repeated: `kill-store-leader` every 10 s from 5 s.
pub fn repeated(kind: ActionKind, first_s: f64, every_s: f64) -> ChaosPlan {
    ChaosPlan {
        seed: 0,
        actions: vec![ChaosAction {
            at: first_s,
            kind: kind.as_str().into(),
            target: None,
            restore_after: None,
            every: Some(every_s),
        }],
    }
}

/// What was done, when (seconds since the run's start), to what.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ActionRecord {
    pub at_s: f64,
    pub kind: ActionKind,
    pub target: String,
    /// Failures and notes (`no follower to kill`, `restarted by the supervisor`).
    pub detail: String,
    /// The action took something away (recovery is measured after it); restorations and
    /// failed actions are not disruptive.
    pub disruptive: bool,
}

impl ActionRecord {
    pub fn describe(&self) -> String {
        format!(
            "{} {} at {:.2}s",
            self.kind.as_str(),
            self.target,
            self.at_s
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn action(kind: &str, at: f64, every: Option<f64>) -> ChaosAction {
        ChaosAction {
            at,
            kind: kind.into(),
            target: None,
            restore_after: None,
            every,
        }
    }

    #[test]
    fn every_repeats_until_the_end_in_time_order() {
        let plan = ChaosPlan {
            seed: 1,
            actions: vec![
                action("kill-store-leader", 5.0, Some(10.0)),
                action("stop-store-member", 12.0, None),
            ],
        };
        let s = schedule(&plan, 30.0).unwrap();
        let times: Vec<f64> = s.iter().map(|a| a.at_s).collect();
        assert_eq!(times, vec![5.0, 12.0, 15.0, 25.0]);
        assert_eq!(s[0].restore_after_s, Some(1.0));
        assert_eq!(s[1].kind, ActionKind::StopStoreMember);
    }

    #[test]
    fn bad_plans_name_the_field() {
        let plan = ChaosPlan {
            seed: 1,
            actions: vec![action("explode", 1.0, None)],
        };
        assert!(schedule(&plan, 10.0)
            .unwrap_err()
            .to_string()
            .contains("action[0].kind"));
        let plan = ChaosPlan {
            seed: 1,
            actions: vec![action("kill", 1.0, None)],
        };
        assert!(schedule(&plan, 10.0)
            .unwrap_err()
            .to_string()
            .contains("target"));
    }

    #[test]
    fn kinds_round_trip() {
        for k in [
            ActionKind::KillStoreLeader,
            ActionKind::KillStoreFollower,
            ActionKind::KillStoreRandom,
            ActionKind::StopStoreMember,
            ActionKind::KillApiserver,
            ActionKind::KillScheduler,
            ActionKind::KillNodehost,
            ActionKind::KillControllers,
            ActionKind::PartitionHost,
            ActionKind::HealHost,
        ] {
            assert_eq!(ActionKind::parse(k.as_str()), Some(k));
        }
    }
}
