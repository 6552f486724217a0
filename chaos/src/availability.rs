//! Availability: the error rate of probe writes over time, and for each chaos action the time
//! from the action to the first acknowledged write that was *sent after* it (a write sent
//! before the action and answered after it says nothing about recovery).

use serde::{Deserialize, Serialize};

use super::actions::ActionRecord;

/// One probe write. Times are seconds since the run's start.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    pub sent_s: f64,
    pub done_s: f64,
    pub ok: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bucket {
    /// Start of the bucket, seconds since the run's start.
    pub t: f64,
    pub sent: u64,
    pub ok: u64,
    pub failed: u64,
    pub error_rate: f64,
}

/// Recovery after one action.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Recovery {
    pub action: String,
    pub at_s: f64,
    /// `None`: no write sent after the action succeeded before the run ended.
    pub recover_s: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecoverStats {
    pub count: usize,
    pub p50_s: f64,
    pub p99_s: f64,
    pub max_s: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AvailabilityReport {
    /// Every disruptive action was followed by a successful write.
    pub passed: bool,
    pub probes: u64,
    pub failed: u64,
    pub error_rate: f64,
    pub bucket_s: f64,
    pub timeline: Vec<Bucket>,
    pub recoveries: Vec<Recovery>,
    pub recover: Option<RecoverStats>,
    /// Recoveries slower than this fail the check (`None`: no limit).
    pub recover_limit_s: Option<f64>,
}

/// Nearest-rank percentile of sorted values.
pub(crate) fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Probe outcomes per `bucket_s` seconds (by the time each was sent), up to the last answer.
pub fn timeline<'a>(probes: impl Iterator<Item = &'a Probe> + Clone, bucket_s: f64) -> Vec<Bucket> {
    let end = probes.clone().map(|p| p.done_s).fold(0.0, f64::max);
    let buckets = ((end / bucket_s).ceil() as usize).max(1);
    let mut timeline: Vec<Bucket> = (0..buckets)
        .map(|i| Bucket {
            t: i as f64 * bucket_s,
            sent: 0,
            ok: 0,
            failed: 0,
            error_rate: 0.0,
        })
        .collect();
    for p in probes {
        let b = &mut timeline[((p.sent_s / bucket_s) as usize).min(buckets - 1)];
        b.sent += 1;
        if p.ok {
            b.ok += 1;
        } else {
            b.failed += 1;
        }
    }
    for b in &mut timeline {
        if b.sent > 0 {
            b.error_rate = b.failed as f64 / b.sent as f64;
        }
    }
    timeline
}

/// Whether any probe was sent at or after `at`, and the time from `at` to the answer of the
/// first successful one (a write sent before `at` says nothing about recovery).
pub(crate) fn first_ok_after<'a>(
    probes: impl Iterator<Item = &'a Probe>,
    at: f64,
) -> (bool, Option<f64>) {
    let mut sent_after = false;
    let mut best: Option<f64> = None;
    for p in probes.filter(|p| p.sent_s >= at) {
        sent_after = true;
        if p.ok {
            let r = p.done_s - at;
            best = Some(best.map_or(r, |b: f64| b.min(r)));
        }
    }
    (sent_after, best)
}

/// Analyses the probe timeline against the actions; `recover_limit_s` makes slow recoveries
/// failures.
pub fn analyse(
    probes: &[Probe],
    actions: &[ActionRecord],
    bucket_s: f64,
    recover_limit_s: Option<f64>,
) -> AvailabilityReport {
    let mut sorted: Vec<Probe> = probes.to_vec();
    sorted.sort_by(|a, b| a.sent_s.total_cmp(&b.sent_s));
    let timeline = timeline(sorted.iter(), bucket_s);

    let recoveries: Vec<Recovery> = actions
        .iter()
        .filter(|a| a.disruptive)
        .map(|a| {
            let (_, recover_s) = first_ok_after(sorted.iter(), a.at_s);
            Recovery {
                action: a.describe(),
                at_s: a.at_s,
                recover_s,
            }
        })
        .collect();
    let mut times: Vec<f64> = recoveries.iter().filter_map(|r| r.recover_s).collect();
    times.sort_by(f64::total_cmp);
    let recover = (!times.is_empty()).then(|| RecoverStats {
        count: times.len(),
        p50_s: percentile(&times, 0.50),
        p99_s: percentile(&times, 0.99),
        max_s: *times.last().unwrap_or(&0.0),
    });
    let failed = sorted.iter().filter(|p| !p.ok).count() as u64;
    let all_recovered = recoveries.iter().all(|r| r.recover_s.is_some());
    let fast_enough = match (recover_limit_s, &recover) {
        (Some(limit), Some(stats)) => stats.max_s <= limit,
        _ => true,
    };
    AvailabilityReport {
        passed: all_recovered && fast_enough,
        probes: sorted.len() as u64,
        failed,
        error_rate: if sorted.is_empty() {
            0.0
        } else {
            failed as f64 / sorted.len() as f64
        },
        bucket_s,
        timeline,
        recoveries,
        recover,
        recover_limit_s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actions::ActionKind;

    fn action(at: f64) -> ActionRecord {
        ActionRecord {
            at_s: at,
            kind: ActionKind::KillStoreLeader,
            target: "s1".into(),
            detail: String::new(),
            disruptive: true,
        }
    }

    fn probes(outage: (f64, f64)) -> Vec<Probe> {
        // One probe every 100 ms for 10 s, each taking 10 ms; during the outage they fail, and
        // the first one after it takes until the outage ends.
        (0..100)
            .map(|i| {
                let sent = i as f64 * 0.1;
                let failing = sent >= outage.0 && sent < outage.1;
                Probe {
                    sent_s: sent,
                    done_s: sent + 0.01,
                    ok: !failing,
                }
            })
            .collect()
    }

    #[test]
    fn recovery_is_measured_from_writes_sent_after_the_action() {
        let mut p = probes((3.0, 4.5));
        // A write sent before the kill and answered during the outage does not count.
        p.push(Probe {
            sent_s: 2.95,
            done_s: 3.2,
            ok: true,
        });
        let r = analyse(&p, &[action(3.0)], 1.0, None);
        let rec = r.recoveries[0].recover_s.unwrap();
        assert!((rec - 1.51).abs() < 1e-6, "{rec}");
        assert!(r.passed);
        assert_eq!(r.recover.as_ref().unwrap().count, 1);
        assert_eq!(r.timeline.len(), 10);
        assert_eq!(r.timeline[3].failed, 10);
        assert!(r.timeline[4].error_rate > 0.0 && r.timeline[4].error_rate < 1.0);
    }

    #[test]
    fn no_recovery_fails() {
        let p = probes((3.0, 100.0));
        let r = analyse(&p, &[action(3.0)], 1.0, None);
        assert_eq!(r.recoveries[0].recover_s, None);
        assert!(!r.passed);
    }

    #[test]
    fn slow_recovery_fails_a_limit() {
        let p = probes((3.0, 6.0));
        assert!(!analyse(&p, &[action(3.0)], 1.0, Some(1.5)).passed);
        assert!(analyse(&p, &[action(3.0)], 1.0, Some(5.0)).passed);
    }

    #[test]
    fn percentiles_over_actions() {
        let p = probes((1.0, 1.5));
        let mut p2 = probes((5.0, 7.0));
        p2.retain(|x| x.sent_s >= 4.0);
        let mut all: Vec<Probe> = p.into_iter().filter(|x| x.sent_s < 4.0).collect();
        all.extend(p2);
        let r = analyse(&all, &[action(1.0), action(5.0)], 1.0, None);
        let s = r.recover.unwrap();
        assert!((s.p50_s - 0.51).abs() < 1e-6, "{s:?}");
        assert!((s.max_s - 2.01).abs() < 1e-6, "{s:?}");
    }
}
