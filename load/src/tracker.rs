//! What the load run knows about each of its pods: when the client sent its create and delete,
//! when the watch saw it bound, Running and gone, and the server's own timestamps. A pure core:
//! times come in as seconds since the run's start, and nothing here reads a clock.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use serde::Deserialize;

/// The parts of a pod the measurements need (watch events are decoded into this, not into a
/// whole pod).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct PodView {
    pub metadata: PodMeta,
    pub spec: PodSpecView,
    pub status: PodStatusView,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PodMeta {
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub resource_version: String,
    pub creation_timestamp: Option<String>,
    pub deletion_timestamp: Option<String>,
    pub labels: BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PodSpecView {
    pub node_name: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PodStatusView {
    pub phase: Option<String>,
    pub conditions: Vec<ConditionView>,
    pub container_statuses: Vec<ContainerStatusView>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ConditionView {
    #[serde(rename = "type")]
    pub kind: String,
    pub status: String,
    pub last_transition_time: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct ContainerStatusView {
    pub state: Option<ContainerStateView>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct ContainerStateView {
    pub running: Option<RunningView>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct RunningView {
    pub started_at: Option<String>,
}

/// A watch event's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    Added,
    Modified,
    Deleted,
}

/// One pod of the run. Times are seconds since the run's start on the client's monotonic clock;
/// `*_stamp` are the server's (or node's) timestamps on the same scale.
#[derive(Clone, Debug, Default)]
pub struct PodRecord {
    pub name: String,
    pub namespace: u32,
    /// 0 for the first create phase, `c` for churn cycle `c`.
    pub cycle: u32,
    pub create_sent: f64,
    /// The create was answered 2xx (or the pod was seen, whatever the answer).
    pub created: bool,
    /// Last HTTP code of a failed create (0 = no answer).
    pub create_error: Option<u16>,
    pub scheduled_seen: Option<f64>,
    pub running_seen: Option<f64>,
    /// The node the pod was seen bound to.
    pub node: Option<String>,
    pub delete_sent: Option<f64>,
    pub delete_failed: bool,
    pub gone_seen: Option<f64>,
    pub created_stamp: Option<f64>,
    pub scheduled_stamp: Option<f64>,
    pub started_stamp: Option<f64>,
    /// `started_stamp` had sub-second digits (the API server may keep only whole seconds).
    pub started_stamp_fine: bool,
    /// Some server timestamp of this pod had only whole seconds.
    pub coarse_stamps: bool,
}

/// Counts kept as events arrive, so waiting for a phase costs no scan.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub attempted: u64,
    pub created: u64,
    pub create_failed: u64,
    pub scheduled: u64,
    pub running: u64,
    pub delete_sent: u64,
    pub delete_failed: u64,
    pub gone: u64,
}

/// What a namespace's pod watch tells: each event, and each re-list after the watch lost its
/// place.
pub trait PodObserver: Send + 'static {
    /// A watch event (or a listed pod, as `Added`) seen at `t`.
    fn observe(&mut self, kind: EventKind, pod: &PodView, t: f64);
    /// A re-list of namespace `namespace` at `t`: every pod of it that exists.
    fn relisted(&mut self, namespace: u32, pods: &[PodView], t: f64);
}

impl PodObserver for Tracker {
    fn observe(&mut self, kind: EventKind, pod: &PodView, t: f64) {
        Tracker::observe(self, kind, pod, t)
    }

    fn relisted(&mut self, namespace: u32, pods: &[PodView], t: f64) {
        Tracker::relisted(self, namespace, pods, t)
    }
}

/// Every pod of the run, by name.
pub struct Tracker {
    /// Wall-clock time of the run's start: converts server timestamps to run seconds.
    wall_start: DateTime<Utc>,
    records: Vec<PodRecord>,
    by_name: HashMap<String, usize>,
    counts: Counts,
    /// Watch events for pods that aren't ours (another run's, or a create not yet registered).
    pub stray_events: u64,
}

impl Tracker {
    pub fn new(wall_start: DateTime<Utc>) -> Self {
        Tracker {
            wall_start,
            records: Vec::new(),
            by_name: HashMap::new(),
            counts: Counts::default(),
            stray_events: 0,
        }
    }

    pub fn records(&self) -> &[PodRecord] {
        &self.records
    }

    pub fn counts(&self) -> Counts {
        self.counts
    }

    pub fn index(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    fn stamp(&self, text: &Option<String>, coarse: &mut bool) -> Option<f64> {
        let text = text.as_deref()?;
        let at = DateTime::parse_from_rfc3339(text).ok()?.with_timezone(&Utc);
        if !text.contains('.') {
            *coarse = true;
        }
        Some((at - self.wall_start).num_microseconds()? as f64 / 1e6)
    }

    /// Registers a pod right before its create is sent.
    pub fn create_sent(&mut self, name: &str, namespace: u32, cycle: u32, t: f64) -> usize {
        let index = self.records.len();
        self.records.push(PodRecord {
            name: name.to_string(),
            namespace,
            cycle,
            create_sent: t,
            ..Default::default()
        });
        self.by_name.insert(name.to_string(), index);
        self.counts.attempted += 1;
        index
    }

    fn mark_created(&mut self, index: usize) {
        let record = &mut self.records[index];
        if !record.created {
            record.created = true;
            self.counts.created += 1;
            if record.create_error.take().is_some() {
                self.counts.create_failed -= 1;
            }
        }
    }

    /// The create's final answer: `None` for success, else the HTTP code (0 = none).
    pub fn create_answered(&mut self, index: usize, error: Option<u16>) {
        match error {
            None => self.mark_created(index),
            Some(code) => {
                let record = &mut self.records[index];
                if !record.created && record.create_error.is_none() {
                    record.create_error = Some(code);
                    self.counts.create_failed += 1;
                }
            }
        }
    }

    pub fn delete_sent(&mut self, index: usize, t: f64) {
        let record = &mut self.records[index];
        if record.delete_sent.is_none() {
            record.delete_sent = Some(t);
            self.counts.delete_sent += 1;
        }
    }

    /// The delete's final answer: `gone` when the server said the pod no longer exists.
    pub fn delete_answered(&mut self, index: usize, failed: bool, gone: bool, t: f64) {
        if failed && !self.records[index].delete_failed {
            self.records[index].delete_failed = true;
            self.counts.delete_failed += 1;
        }
        if gone {
            self.mark_gone(index, t);
        }
    }

    fn mark_gone(&mut self, index: usize, t: f64) {
        let record = &mut self.records[index];
        if record.gone_seen.is_none() {
            record.gone_seen = Some(t);
            self.counts.gone += 1;
        }
    }

    /// A watch event (or a listed pod, as `Added`) seen at `t`.
    pub fn observe(&mut self, kind: EventKind, pod: &PodView, t: f64) {
        let Some(index) = self.index(&pod.metadata.name) else {
            self.stray_events += 1;
            return;
        };
        self.mark_created(index);
        if kind == EventKind::Deleted {
            self.mark_gone(index, t);
            return;
        }
        let mut coarse = false;
        let created_stamp = self.stamp(&pod.metadata.creation_timestamp, &mut coarse);
        let scheduled_stamp = pod
            .status
            .conditions
            .iter()
            .find(|c| c.kind == "PodScheduled" && c.status == "True")
            .and_then(|c| self.stamp(&c.last_transition_time, &mut coarse));
        let mut started_coarse = false;
        let started_stamp = pod
            .status
            .container_statuses
            .iter()
            .filter_map(|c| c.state.as_ref()?.running.as_ref()?.started_at.clone())
            .filter_map(|s| self.stamp(&Some(s), &mut started_coarse))
            .reduce(f64::max);
        coarse |= started_coarse;
        let bound = pod.spec.node_name.as_deref().is_some_and(|n| !n.is_empty());
        let running = pod.status.phase.as_deref() == Some("Running");
        let counts = &mut self.counts;
        let record = &mut self.records[index];
        record.coarse_stamps |= coarse;
        record.created_stamp = record.created_stamp.or(created_stamp);
        record.scheduled_stamp = record.scheduled_stamp.or(scheduled_stamp);
        if bound && record.node.is_none() {
            record.node = pod.spec.node_name.clone();
        }
        if (bound || running) && record.scheduled_seen.is_none() {
            record.scheduled_seen = Some(t);
            counts.scheduled += 1;
        }
        if running && record.running_seen.is_none() {
            record.running_seen = Some(t);
            record.started_stamp = started_stamp;
            record.started_stamp_fine = started_stamp.is_some() && !started_coarse;
            counts.running += 1;
        }
    }

    /// A re-list of `namespace` at `t` (after the watch lost its place): listed pods are
    /// observed; deleted pods of the namespace that are no longer listed are gone.
    pub fn relisted(&mut self, namespace: u32, pods: &[PodView], t: f64) {
        let mut listed = std::collections::HashSet::new();
        for pod in pods {
            listed.insert(pod.metadata.name.as_str());
            self.observe(EventKind::Added, pod, t);
        }
        let missing: Vec<usize> = self
            .records
            .iter()
            .enumerate()
            .filter(|(_, r)| {
                r.namespace == namespace
                    && r.delete_sent.is_some()
                    && r.gone_seen.is_none()
                    && !listed.contains(r.name.as_str())
            })
            .map(|(i, _)| i)
            .collect();
        for index in missing {
            self.mark_gone(index, t);
        }
    }

    /// Pods that are Running and not being deleted, oldest first: the ones churn deletes.
    pub fn live_running(&self) -> Vec<usize> {
        self.records
            .iter()
            .enumerate()
            .filter(|(_, r)| r.running_seen.is_some() && r.delete_sent.is_none())
            .map(|(i, _)| i)
            .collect()
    }

    /// Pods that exist (created, not deleted): the ones the final delete phase deletes.
    pub fn live(&self) -> Vec<usize> {
        self.records
            .iter()
            .enumerate()
            .filter(|(_, r)| r.created && r.delete_sent.is_none() && r.gone_seen.is_none())
            .map(|(i, _)| i)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, node: Option<&str>, phase: Option<&str>) -> PodView {
        let mut p = PodView::default();
        p.metadata.name = name.into();
        p.metadata.creation_timestamp = Some("2030-01-01T00:00:00Z".into());
        p.spec.node_name = node.map(String::from);
        p.status.phase = phase.map(String::from);
        if node.is_some() {
            p.status.conditions.push(ConditionView {
                kind: "PodScheduled".into(),
                status: "True".into(),
                last_transition_time: Some("2030-01-01T00:00:00.250Z".into()),
            });
        }
        if phase == Some("Running") {
            p.status.container_statuses.push(ContainerStatusView {
                state: Some(ContainerStateView {
                    running: Some(RunningView {
                        started_at: Some("2030-01-01T00:00:00.500Z".into()),
                    }),
                }),
            });
        }
        p
    }

    fn start() -> DateTime<Utc> {
        "2030-01-01T00:00:00Z".parse().unwrap()
    }

    #[test]
    fn follows_a_pod_from_create_to_gone() {
        let mut t = Tracker::new(start());
        let i = t.create_sent("a", 0, 0, 0.1);
        t.observe(EventKind::Added, &pod("a", None, Some("Pending")), 0.12);
        t.create_answered(i, None);
        t.observe(
            EventKind::Modified,
            &pod("a", Some("n1"), Some("Pending")),
            0.3,
        );
        t.observe(
            EventKind::Modified,
            &pod("a", Some("n1"), Some("Running")),
            0.6,
        );
        t.observe(
            EventKind::Modified,
            &pod("a", Some("n1"), Some("Running")),
            0.9,
        );
        let r = &t.records()[i];
        assert_eq!(
            (r.scheduled_seen, r.running_seen, r.started_stamp),
            (Some(0.3), Some(0.6), Some(0.5))
        );
        assert_eq!(
            (r.created_stamp, r.scheduled_stamp),
            (Some(0.0), Some(0.25))
        );
        assert!(r.coarse_stamps, "creationTimestamp had whole seconds");
        t.delete_sent(i, 1.0);
        t.observe(
            EventKind::Deleted,
            &pod("a", Some("n1"), Some("Running")),
            1.2,
        );
        let c = t.counts();
        assert_eq!(
            (
                c.attempted,
                c.created,
                c.scheduled,
                c.running,
                c.delete_sent,
                c.gone
            ),
            (1, 1, 1, 1, 1, 1)
        );
        assert_eq!(t.records()[i].gone_seen, Some(1.2));
    }

    #[test]
    fn a_failed_create_of_a_pod_that_exists_counts_as_created() {
        let mut t = Tracker::new(start());
        let i = t.create_sent("a", 0, 0, 0.0);
        t.create_answered(i, Some(0));
        assert_eq!(t.counts().create_failed, 1);
        t.observe(EventKind::Added, &pod("a", None, None), 0.5);
        assert_eq!((t.counts().create_failed, t.counts().created), (0, 1));
    }

    #[test]
    fn a_relist_settles_deleted_pods_the_watch_missed() {
        let mut t = Tracker::new(start());
        let a = t.create_sent("a", 0, 0, 0.0);
        let b = t.create_sent("b", 0, 0, 0.0);
        let c = t.create_sent("c", 1, 0, 0.0);
        for i in [a, b, c] {
            t.create_answered(i, None);
            t.delete_sent(i, 1.0);
        }
        t.relisted(0, &[pod("b", Some("n"), Some("Running"))], 2.0);
        assert_eq!(t.records()[a].gone_seen, Some(2.0));
        assert_eq!(t.records()[b].gone_seen, None);
        assert_eq!(t.records()[c].gone_seen, None, "another namespace");
    }

    #[test]
    fn strays_are_counted_not_tracked() {
        let mut t = Tracker::new(start());
        t.observe(EventKind::Added, &pod("x", None, None), 0.0);
        assert_eq!((t.stray_events, t.counts().created), (1, 0));
    }
}
