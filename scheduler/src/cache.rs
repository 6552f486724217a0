//! [`Cache`]: the scheduler's view of the cluster — the [`Snapshot`] of nodes with their bound
//! and *assumed* pods, fed by the node and pod informers. A pod is assumed onto its node as soon
//! as a worker decides (so the next decision already counts it) and forgotten if its bind fails.
//! Also keeps the nominations of pods that preempted others (the room they freed stays theirs
//! until they bind), and resolves pod priorities from PriorityClasses.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::scheduling::v1::PriorityClass;

use crate::filters::{insufficient_resources, Reason};
use crate::pod_info::{CachedPod, PodInfo};
use crate::snapshot::Snapshot;
use crate::volumes::{VolumePlan, VolumeState};

#[derive(Clone, Debug)]
struct Placed {
    node: String,
    assumed: bool,
    /// The node the pod was nominated to before it was assumed: its bind may fail.
    nominated: Option<String>,
}

/// Why an assumption was refused: another worker filled the node first.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssumeError {
    #[error("node {node} is gone")]
    NodeGone { node: String },
    #[error("pod {pod} no longer fits on {node}")]
    NoLongerFits { pod: String, node: String },
}

#[derive(Debug, Default)]
pub struct Cache {
    snapshot: Snapshot,
    placed: HashMap<String, Placed>,
    /// Bound pods whose node has not been seen yet, by node name.
    orphans: HashMap<String, Vec<Arc<PodInfo>>>,
    /// Unbound pods nominated to a node (pod key → node), mirrored in the snapshot.
    nominations: HashMap<String, String>,
    /// PriorityClass name → value; and the globalDefault class's value.
    priority_classes: HashMap<String, i32>,
    default_priority: Option<(String, i32)>,
}

impl Cache {
    pub fn new() -> Cache {
        Cache::default()
    }

    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    pub fn apply_node(&mut self, node: &Node) {
        self.snapshot.upsert_node(node);
        let name = node.metadata.name.as_deref().unwrap_or_default();
        for pod in self.orphans.remove(name).unwrap_or_default() {
            self.snapshot.add_pod(name, pod);
        }
    }

    pub fn delete_node(&mut self, name: &str) {
        if let Some(info) = self.snapshot.remove_node(name) {
            if !info.pods.is_empty() {
                self.orphans.insert(name.to_string(), info.pods);
            }
        }
    }

    pub fn apply_priority_class(&mut self, class: &PriorityClass) {
        let name = class.metadata.name.clone().unwrap_or_default();
        let value = class.value.unwrap_or(0);
        self.priority_classes.insert(name.clone(), value);
        if class.global_default == Some(true) {
            self.default_priority = Some((name, value));
        } else if self
            .default_priority
            .as_ref()
            .is_some_and(|(n, _)| *n == name)
        {
            self.default_priority = None;
        }
    }

    pub fn delete_priority_class(&mut self, name: &str) {
        self.priority_classes.remove(name);
        if self
            .default_priority
            .as_ref()
            .is_some_and(|(n, _)| n == name)
        {
            self.default_priority = None;
        }
    }

    /// The pod's priority: `spec.priority` if admission set it, else its PriorityClass's value,
    /// else the global default class's, else 0.
    pub fn priority_of(&self, pod: &Pod) -> i32 {
        let class = pod
            .spec
            .as_ref()
            .and_then(|s| s.priority_class_name.as_deref());
        self.resolve_priority(PodInfo::declared_priority(pod), class)
    }

    fn resolve_priority(&self, declared: Option<i32>, class: Option<&str>) -> i32 {
        if let Some(p) = declared {
            return p;
        }
        class
            .and_then(|c| self.priority_classes.get(c).copied())
            .or_else(|| self.default_priority.as_ref().map(|(_, v)| *v))
            .unwrap_or(0)
    }

    /// The informer's parsed pod with its resolved priority: the cached [`PodInfo`] itself
    /// when the pod declares its priority (admission's Priority plugin sets it), a copy with
    /// the PriorityClass's value otherwise.
    pub fn pod_info(&self, pod: &CachedPod) -> Arc<PodInfo> {
        let priority = self.resolve_priority(
            pod.declared_priority,
            pod.info.priority_class_name.as_deref(),
        );
        if priority == pod.info.priority {
            return pod.info.clone();
        }
        let mut info = PodInfo::clone(&pod.info);
        info.priority = priority;
        Arc::new(info)
    }

    /// Takes a pod's new state. A bound pod is placed on (or moved to) its node, replacing an
    /// assumption; an unbound one that is assumed stays assumed (its bind is in flight).
    pub fn apply_pod(&mut self, pod: Arc<PodInfo>) {
        let key = pod.key.clone();
        let Some(node) = pod.node_name.clone() else {
            return;
        };
        self.remove_placed(&key);
        self.clear_nomination(&key);
        self.place(&node, pod);
        self.placed.insert(
            key,
            Placed {
                node,
                assumed: false,
                nominated: None,
            },
        );
    }

    /// Takes an unbound pod's new state for its nomination: `status.nominatedNodeName` set
    /// nominates it there; a pod being deleted or finished loses its nomination, and so does one
    /// whose nominatedNodeName was just removed (`nomination_removed`). An update that neither
    /// sets nor removes it keeps a nomination this scheduler made before its status patch landed.
    pub fn apply_unbound(&mut self, pod: Arc<PodInfo>, nomination_removed: bool) {
        if pod.deleting || pod.terminal {
            self.clear_nomination(&pod.key);
            return;
        }
        match pod.nominated_node_name.clone() {
            Some(node) => self.nominate(pod, &node),
            None if nomination_removed => self.clear_nomination(&pod.key),
            None => {
                // Keep the reservation, but with the pod's new state.
                if let Some(node) = self.nominations.get(&pod.key).cloned() {
                    self.snapshot.nominate(&node, pod);
                }
            }
        }
    }

    /// Reserves room on `node` for `pod`, which preempted pods there (or was nominated by
    /// another scheduler instance): lower-or-equal-priority pods cannot take it.
    pub fn nominate(&mut self, pod: Arc<PodInfo>, node: &str) {
        self.clear_nomination(&pod.key);
        self.nominations.insert(pod.key.clone(), node.to_string());
        self.snapshot.nominate(node, pod);
    }

    pub fn clear_nomination(&mut self, key: &str) {
        if let Some(node) = self.nominations.remove(key) {
            self.snapshot.unnominate(&node, key);
        }
    }

    /// Where the pod is nominated, if anywhere.
    pub fn nominated_node(&self, key: &str) -> Option<&str> {
        self.nominations.get(key).map(String::as_str)
    }

    pub fn delete_pod(&mut self, key: &str) {
        self.remove_placed(key);
        self.clear_nomination(key);
    }

    /// Counts the pod on `node` now, if it still fits there: workers decide in parallel on a
    /// shared snapshot, so another may have filled the node since this decision.
    pub fn assume(&mut self, pod: Arc<PodInfo>, node: &str) -> Result<(), AssumeError> {
        let Some(info) = self.snapshot.node(node) else {
            return Err(AssumeError::NodeGone { node: node.into() });
        };
        let ports_taken = pod
            .host_ports
            .iter()
            .any(|want| info.used_ports.iter().any(|used| used.conflicts(want)));
        let mut short: Vec<Reason> = insufficient_resources(info, &pod);
        // Room reserved for nominated pods of higher or equal priority is not free.
        if short.is_empty() {
            let mut nominated = self.snapshot.nominated_against(node, &pod).peekable();
            if nominated.peek().is_some() {
                let mut with = info.clone();
                for p in nominated {
                    with.add_pod(p.clone());
                }
                short = insufficient_resources(&with, &pod);
            }
        }
        if ports_taken || !short.is_empty() {
            return Err(AssumeError::NoLongerFits {
                pod: pod.key.clone(),
                node: node.into(),
            });
        }
        let key = pod.key.clone();
        self.remove_placed(&key);
        // Placed now; its reservation comes back if the bind fails.
        let nominated = self.nominations.get(&key).cloned();
        self.clear_nomination(&key);
        self.snapshot.add_pod(node, pod);
        self.placed.insert(
            key,
            Placed {
                node: node.to_string(),
                assumed: true,
                nominated,
            },
        );
        Ok(())
    }

    /// VolumeBinding's PreBind work for a pod just assumed onto `node`, counted in the volume
    /// state at once (kube-scheduler's `AssumePodVolumes`); `None` when there is none.
    pub fn assume_volumes(&mut self, pod: &PodInfo, node: &str) -> Option<VolumePlan> {
        if pod.claims.is_empty() {
            return None;
        }
        let labels = &self.snapshot.node(node)?.labels;
        let plan = self.snapshot.volumes().plan(pod, node, labels)?;
        self.snapshot.volumes_mut().assume(&plan, node);
        Some(plan)
    }

    pub fn volumes_mut(&mut self) -> &mut VolumeState {
        self.snapshot.volumes_mut()
    }

    /// Drops an assumption whose bind failed (a bound pod stays); a pod that was nominated
    /// gets its reservation back.
    pub fn forget(&mut self, key: &str) {
        let Some(placed) = self.placed.get(key).filter(|p| p.assumed).cloned() else {
            return;
        };
        let pod = self.remove_placed(key);
        if let (Some(pod), Some(node)) = (pod, placed.nominated) {
            self.nominate(pod, &node);
        }
    }

    pub fn is_assumed(&self, key: &str) -> bool {
        self.placed.get(key).is_some_and(|p| p.assumed)
    }

    fn place(&mut self, node: &str, pod: Arc<PodInfo>) {
        if !self.snapshot.add_pod(node, pod.clone()) {
            self.orphans.entry(node.to_string()).or_default().push(pod);
        }
    }

    /// Takes the pod off its node (or the orphans); returns it if it was placed.
    fn remove_placed(&mut self, key: &str) -> Option<Arc<PodInfo>> {
        let placed = self.placed.remove(key)?;
        if let Some(pod) = self.snapshot.remove_pod(&placed.node, key) {
            return Some(pod);
        }
        let list = self.orphans.get_mut(&placed.node)?;
        let i = list.iter().position(|p| p.key == key)?;
        Some(list.swap_remove(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::{info, node, pod};

    #[test]
    fn assumed_pods_count_until_forgotten_and_bound_pods_replace_them() {
        let mut cache = Cache::new();
        cache.apply_node(&node("a", "1", "1Gi", 110));
        let p = info(pod("default", "p", "600m", ""));
        cache.assume(p.clone(), "a").unwrap();
        assert_eq!(cache.snapshot().node("a").unwrap().requested.milli_cpu, 600);
        // A second pod decided on the same stale view no longer fits.
        let q = info(pod("default", "q", "600m", ""));
        assert!(matches!(
            cache.assume(q, "a"),
            Err(AssumeError::NoLongerFits { .. })
        ));
        cache.forget("default/p");
        assert_eq!(cache.snapshot().node("a").unwrap().requested.milli_cpu, 0);
        // Assume again, then the informer shows it bound: counted once.
        cache.assume(p, "a").unwrap();
        let mut bound = pod("default", "p", "600m", "");
        bound.spec.as_mut().unwrap().node_name = Some("a".into());
        cache.apply_pod(info(bound));
        assert!(!cache.is_assumed("default/p"));
        cache.forget("default/p");
        assert_eq!(cache.snapshot().node("a").unwrap().requested.milli_cpu, 600);
        assert_eq!(cache.snapshot().node("a").unwrap().pods.len(), 1);
        cache.delete_pod("default/p");
        assert_eq!(cache.snapshot().node("a").unwrap().requested.milli_cpu, 0);
    }

    #[test]
    fn nominations_hold_room_until_the_preemptor_binds() {
        let mut cache = Cache::new();
        cache.apply_node(&node("a", "2", "1Gi", 110));
        let prio = |name: &str, priority: i32, nominated: Option<&str>| {
            let mut p = pod("default", name, "2", "");
            p.spec.as_mut().unwrap().priority = Some(priority);
            p.status = Some(k8s_openapi::api::core::v1::PodStatus {
                nominated_node_name: nominated.map(str::to_string),
                ..Default::default()
            });
            info(p)
        };
        // The worker nominates vip before its status patch lands.
        cache.nominate(prio("vip", 10, None), "a");
        // A lower-priority pod decided on a view without the nomination cannot be assumed.
        assert!(matches!(
            cache.assume(prio("low", 1, None), "a"),
            Err(AssumeError::NoLongerFits { .. })
        ));
        // An unrelated status update of vip (no nominatedNodeName yet) keeps the reservation.
        cache.apply_unbound(prio("vip", 10, None), false);
        assert_eq!(cache.nominated_node("default/vip"), Some("a"));
        // vip is assumed (the nomination is set aside), its bind fails: the reservation returns.
        cache.assume(prio("vip", 10, Some("a")), "a").unwrap();
        assert_eq!(cache.nominated_node("default/vip"), None);
        cache.forget("default/vip");
        assert_eq!(cache.nominated_node("default/vip"), Some("a"));
        assert_eq!(cache.snapshot().node("a").unwrap().requested.milli_cpu, 0);
        assert_eq!(cache.snapshot().nominated_on("a").len(), 1);
        // A more important pod may take the room.
        cache.assume(prio("boss", 20, None), "a").unwrap();
        cache.forget("default/boss");
        // Someone removed the nomination: the room is free again.
        cache.apply_unbound(prio("vip", 10, None), true);
        assert!(cache.snapshot().nominated_on("a").is_empty());
        cache.assume(prio("low", 1, None), "a").unwrap();
        cache.forget("default/low");
        // Nominated again through the informer, then bound: the nomination goes.
        cache.apply_unbound(prio("vip", 10, Some("a")), false);
        assert_eq!(cache.nominated_node("default/vip"), Some("a"));
        let mut bound = pod("default", "vip", "2", "");
        bound.spec.as_mut().unwrap().node_name = Some("a".into());
        cache.apply_pod(info(bound));
        assert_eq!(cache.nominated_node("default/vip"), None);
        assert!(cache.snapshot().nominated_on("a").is_empty());
        // A deleted pending pod loses its nomination.
        cache.nominate(prio("other", 10, None), "a");
        cache.delete_pod("default/other");
        assert!(cache.snapshot().nominated_on("a").is_empty());
    }

    #[test]
    fn pods_of_unknown_nodes_wait_for_them() {
        let mut cache = Cache::new();
        let mut bound = pod("default", "p", "1", "");
        bound.spec.as_mut().unwrap().node_name = Some("late".into());
        cache.apply_pod(info(bound));
        cache.apply_node(&node("late", "4", "1Gi", 110));
        assert_eq!(
            cache.snapshot().node("late").unwrap().requested.milli_cpu,
            1000
        );
    }

    #[test]
    fn priority_comes_from_the_class() {
        let mut cache = Cache::new();
        let class = |name: &str, value: i32, default: bool| PriorityClass {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            value: Some(value),
            global_default: Some(default),
            ..Default::default()
        };
        cache.apply_priority_class(&class("high", 1000, false));
        cache.apply_priority_class(&class("base", 7, true));
        let mut p = pod("default", "p", "", "");
        assert_eq!(cache.priority_of(&p), 7);
        p.spec.as_mut().unwrap().priority_class_name = Some("high".into());
        assert_eq!(cache.priority_of(&p), 1000);
        p.spec.as_mut().unwrap().priority = Some(3);
        assert_eq!(cache.priority_of(&p), 3);

        // The informer's parsed pods resolve the same way; a declared priority reuses the
        // cached PodInfo.
        let declared = CachedPod::new(p.clone());
        assert_eq!(cache.pod_info(&declared).priority, 3);
        assert!(Arc::ptr_eq(&cache.pod_info(&declared), &declared.info));
        p.spec.as_mut().unwrap().priority = None;
        let from_class = CachedPod::new(p.clone());
        assert_eq!(cache.pod_info(&from_class).priority, 1000);
        p.spec.as_mut().unwrap().priority_class_name = None;
        assert_eq!(cache.pod_info(&CachedPod::new(p)).priority, 7);
    }
}
