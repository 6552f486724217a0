//! Watch guarantees: a recorded watch stream is ordered, free of duplicates and gap-free
//! against the store's own history of the same key range over the same revisions.
//!
//! The reference history comes from the store after the run (a fresh watch from the recorded
//! stream's start revision, replayed from the MVCC history), so the recorder's live stream —
//! which lived through member kills and resumed across them — is compared with what the store
//! says happened.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

/// One event as a watcher saw it. Values are kept as a hash: pod objects are large.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchedEvent {
    pub revision: i64,
    pub key: String,
    pub deleted: bool,
    pub value_hash: u64,
}

/// A stable 64-bit hash of a value (FNV-1a), the same in every process.
pub fn value_hash(value: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in value {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// What went wrong, with the first few examples of each kind.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct WatchCheckReport {
    pub passed: bool,
    /// The revision window compared: `[from, to]`.
    pub from_revision: i64,
    pub to_revision: i64,
    pub recorded_events: usize,
    pub reference_events: usize,
    /// Events whose revision is lower than the one before them.
    pub out_of_order: usize,
    /// Events delivered more than once.
    pub duplicates: usize,
    /// Reference events the recorded stream lacks.
    pub missing: usize,
    /// Recorded events the store's history does not have (or has with another value).
    pub phantom: usize,
    pub examples: Vec<String>,
    /// The watches compared, when several were (the load's: `NAMESPACE via SERVER`, with
    /// their event counts).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub watches: Vec<String>,
    /// Re-lists forced by a restart of the watch's API server (its new watch cache begins
    /// after the client's resourceVersion: 410 Gone, as Kubernetes answers). Each unbroken
    /// stretch of the watch is still checked; these are not failures.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub relists_after_restarts: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl WatchCheckReport {
    /// An empty report to [`absorb`](Self::absorb) others into.
    pub fn accumulator() -> WatchCheckReport {
        WatchCheckReport {
            passed: true,
            from_revision: i64::MAX,
            ..Default::default()
        }
    }

    /// Adds `r`'s verdict, window and counts (several watches, or stretches of one, as one).
    pub fn absorb(&mut self, r: &WatchCheckReport) {
        self.passed &= r.passed;
        self.from_revision = self.from_revision.min(r.from_revision);
        self.to_revision = self.to_revision.max(r.to_revision);
        self.recorded_events += r.recorded_events;
        self.reference_events += r.reference_events;
        self.out_of_order += r.out_of_order;
        self.duplicates += r.duplicates;
        self.missing += r.missing;
        self.phantom += r.phantom;
    }
}

const EXAMPLES: usize = 10;

/// Compares `recorded` with `reference` over revisions `from..=to`; events outside the window
/// are ignored in both.
pub fn check(
    recorded: &[WatchedEvent],
    reference: &[WatchedEvent],
    from: i64,
    to: i64,
) -> WatchCheckReport {
    let in_window = |e: &&WatchedEvent| e.revision >= from && e.revision <= to;
    let recorded: Vec<&WatchedEvent> = recorded.iter().filter(in_window).collect();
    let reference: Vec<&WatchedEvent> = reference.iter().filter(in_window).collect();
    let mut report = WatchCheckReport {
        from_revision: from,
        to_revision: to,
        recorded_events: recorded.len(),
        reference_events: reference.len(),
        ..Default::default()
    };
    let example = |report: &mut WatchCheckReport, text: String| {
        if report.examples.len() < EXAMPLES {
            report.examples.push(text);
        }
    };

    let mut last = i64::MIN;
    let mut seen: HashSet<(i64, &str)> = HashSet::new();
    for e in &recorded {
        if e.revision < last {
            report.out_of_order += 1;
            example(
                &mut report,
                format!(
                    "revision {} ({}) delivered after revision {last}",
                    e.revision, e.key
                ),
            );
        }
        last = last.max(e.revision);
        if !seen.insert((e.revision, e.key.as_str())) {
            report.duplicates += 1;
            example(
                &mut report,
                format!("revision {} ({}) delivered twice", e.revision, e.key),
            );
        }
    }

    let reference_by: HashMap<(i64, &str), &WatchedEvent> = reference
        .iter()
        .map(|e| ((e.revision, e.key.as_str()), *e))
        .collect();
    for e in &reference {
        if !seen.contains(&(e.revision, e.key.as_str())) {
            report.missing += 1;
            example(
                &mut report,
                format!(
                    "gap: revision {} ({}{}) never delivered",
                    e.revision,
                    e.key,
                    if e.deleted { ", delete" } else { "" }
                ),
            );
        }
    }
    for e in &recorded {
        match reference_by.get(&(e.revision, e.key.as_str())) {
            Some(r) if r.deleted == e.deleted && r.value_hash == e.value_hash => {}
            Some(_) => {
                report.phantom += 1;
                example(
                    &mut report,
                    format!(
                        "revision {} ({}) differs from the store's history",
                        e.revision, e.key
                    ),
                );
            }
            None => {
                report.phantom += 1;
                example(
                    &mut report,
                    format!(
                        "revision {} ({}) is not in the store's history",
                        e.revision, e.key
                    ),
                );
            }
        }
    }
    report.passed = report.out_of_order == 0
        && report.duplicates == 0
        && report.missing == 0
        && report.phantom == 0;
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(revision: i64, key: &str, value: &str) -> WatchedEvent {
        WatchedEvent {
            revision,
            key: key.into(),
            deleted: false,
            value_hash: value_hash(value.as_bytes()),
        }
    }

    fn history() -> Vec<WatchedEvent> {
        (2..=20)
            .map(|r| ev(r, &format!("k{}", r % 3), &format!("v{r}")))
            .collect()
    }

    #[test]
    fn identical_streams_pass() {
        let h = history();
        let report = check(&h, &h, 2, 20);
        assert!(report.passed, "{report:?}");
        assert_eq!(report.recorded_events, 19);
    }

    #[test]
    fn a_gap_fails() {
        // Planted: revision 11 is missing from the recorded stream.
        let reference = history();
        let recorded: Vec<_> = reference
            .iter()
            .filter(|e| e.revision != 11)
            .cloned()
            .collect();
        let report = check(&recorded, &reference, 2, 20);
        assert!(!report.passed);
        assert_eq!(report.missing, 1);
        assert!(report.examples[0].contains("revision 11"), "{report:?}");
    }

    #[test]
    fn a_gap_at_the_end_fails() {
        // The recorder stopped early: the tail of the window is missing.
        let reference = history();
        let recorded: Vec<_> = reference[..10].to_vec();
        assert_eq!(check(&recorded, &reference, 2, 20).missing, 9);
    }

    #[test]
    fn duplicates_and_disorder_fail() {
        let reference = history();
        let mut recorded = reference.clone();
        recorded.insert(5, reference[4].clone());
        let report = check(&recorded, &reference, 2, 20);
        assert_eq!(report.duplicates, 1);
        assert_eq!(report.out_of_order, 0);
        let mut recorded = reference.clone();
        recorded.swap(3, 4);
        let report = check(&recorded, &reference, 2, 20);
        assert_eq!(report.out_of_order, 1);
        assert!(!report.passed);
    }

    #[test]
    fn a_changed_value_fails() {
        let reference = history();
        let mut recorded = reference.clone();
        recorded[7].value_hash ^= 1;
        let report = check(&recorded, &reference, 2, 20);
        assert_eq!(report.phantom, 1);
        assert!(!report.passed);
    }

    #[test]
    fn events_outside_the_window_are_ignored() {
        let reference = history();
        let recorded: Vec<_> = reference
            .iter()
            .filter(|e| e.revision >= 10)
            .cloned()
            .collect();
        assert!(check(&recorded, &reference, 10, 20).passed);
    }
}
