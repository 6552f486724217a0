//! [`PodInfo`]: what the decision core needs of a pod, parsed once (requests as integers,
//! selectors compiled) when the pod enters the scheduler.

use std::collections::BTreeMap;
use std::sync::Arc;

use api::selectors::LabelSelector;
use k8s_openapi::api::core::v1::{
    NodeSelectorRequirement, NodeSelectorTerm, Pod, PodAffinityTerm, PodSpec, Toleration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Deserializer};

use crate::node_info::{TaintEffect, PROTOCOL_TCP};
use crate::resources::{pod_requests, Resources};

/// A node selector requirement's operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeOperator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
}

/// One requirement of a node selector term (on a label, or on the `metadata.name` field).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeRequirement {
    pub key: String,
    pub operator: NodeOperator,
    pub values: Vec<String>,
}

impl NodeRequirement {
    fn parse(r: &NodeSelectorRequirement) -> Option<NodeRequirement> {
        let operator = match r.operator.as_str() {
            "In" => NodeOperator::In,
            "NotIn" => NodeOperator::NotIn,
            "Exists" => NodeOperator::Exists,
            "DoesNotExist" => NodeOperator::DoesNotExist,
            "Gt" => NodeOperator::Gt,
            "Lt" => NodeOperator::Lt,
            _ => return None,
        };
        Some(NodeRequirement {
            key: r.key.clone(),
            operator,
            values: r.values.clone().unwrap_or_default(),
        })
    }

    /// Whether `value` (the label's value, or `None` when the node lacks it) satisfies it.
    pub fn matches(&self, value: Option<&str>) -> bool {
        match self.operator {
            NodeOperator::In => value.is_some_and(|v| self.values.iter().any(|x| x == v)),
            NodeOperator::NotIn => value.is_none_or(|v| !self.values.iter().any(|x| x == v)),
            NodeOperator::Exists => value.is_some(),
            NodeOperator::DoesNotExist => value.is_none(),
            NodeOperator::Gt | NodeOperator::Lt => {
                let have = value.and_then(|v| v.parse::<i64>().ok());
                let want = self.values.first().and_then(|v| v.parse::<i64>().ok());
                match (have, want) {
                    (Some(h), Some(w)) if self.operator == NodeOperator::Gt => h > w,
                    (Some(h), Some(w)) => h < w,
                    _ => false,
                }
            }
        }
    }
}

/// A node selector term: all its label and field requirements must hold. A term without any
/// requirement matches no node (as in Kubernetes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeTerm {
    pub labels: Vec<NodeRequirement>,
    /// Requirements on `metadata.name`.
    pub fields: Vec<NodeRequirement>,
}

impl NodeTerm {
    pub(crate) fn parse(term: &NodeSelectorTerm) -> NodeTerm {
        let parse_all = |rs: &Option<Vec<NodeSelectorRequirement>>| {
            rs.iter()
                .flatten()
                .map(|r| {
                    // An unknown operator makes the term match nothing.
                    NodeRequirement::parse(r).unwrap_or(NodeRequirement {
                        key: r.key.clone(),
                        operator: NodeOperator::In,
                        values: vec![],
                    })
                })
                .collect::<Vec<_>>()
        };
        NodeTerm {
            labels: parse_all(&term.match_expressions),
            fields: parse_all(&term.match_fields)
                .into_iter()
                .map(|mut r| {
                    if r.key != "metadata.name" {
                        r.values.clear();
                        r.operator = NodeOperator::In;
                    }
                    r
                })
                .collect(),
        }
    }

    pub fn matches(&self, node_name: &str, labels: &BTreeMap<String, String>) -> bool {
        if self.labels.is_empty() && self.fields.is_empty() {
            return false;
        }
        self.labels
            .iter()
            .all(|r| r.matches(labels.get(&r.key).map(String::as_str)))
            && self.fields.iter().all(|r| r.matches(Some(node_name)))
    }
}

/// A pod (anti-)affinity term: pods matching `selector` in `namespaces` (all when `None`), in
/// the same `topology_key` domain.
#[derive(Clone, Debug)]
pub struct AffinityTerm {
    pub selector: LabelSelector,
    pub namespaces: Option<Vec<String>>,
    pub topology_key: String,
}

impl AffinityTerm {
    fn parse(term: &PodAffinityTerm, own_namespace: &str) -> AffinityTerm {
        let selector = term
            .label_selector
            .as_ref()
            .and_then(|s| serde_json::to_value(s).ok())
            .and_then(|v| LabelSelector::from_label_selector_json(&v).ok())
            .unwrap_or_else(LabelSelector::nothing);
        // An empty namespaceSelector ({}) means every namespace; namespaces plus a selector is
        // approximated by the list alone.
        let all_namespaces = term
            .namespace_selector
            .as_ref()
            .is_some_and(|s| s.match_labels.is_none() && s.match_expressions.is_none());
        let namespaces = match &term.namespaces {
            _ if all_namespaces => None,
            Some(list) if !list.is_empty() => Some(list.clone()),
            _ => Some(vec![own_namespace.to_string()]),
        };
        AffinityTerm {
            selector,
            namespaces,
            topology_key: term.topology_key.clone(),
        }
    }

    /// Whether an existing pod is one this term is about.
    pub fn matches_pod(&self, pod: &PodInfo) -> bool {
        self.namespaces
            .as_ref()
            .is_none_or(|ns| ns.contains(&pod.namespace))
            && self.selector.matches(&pod.labels)
    }
}

/// A toleration, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tolerance {
    /// Empty with `exists` tolerates every key.
    pub key: String,
    pub exists: bool,
    pub value: String,
    /// `None` tolerates every effect.
    pub effect: Option<TaintEffect>,
}

impl Tolerance {
    fn parse(t: &Toleration) -> Tolerance {
        Tolerance {
            key: t.key.clone().unwrap_or_default(),
            exists: t.operator.as_deref() == Some("Exists"),
            value: t.value.clone().unwrap_or_default(),
            effect: t.effect.as_deref().and_then(TaintEffect::parse),
        }
    }

    /// `v1.Toleration.ToleratesTaint`.
    pub fn tolerates(&self, key: &str, value: &str, effect: TaintEffect) -> bool {
        if self.effect.is_some_and(|e| e != effect) {
            return false;
        }
        if !self.key.is_empty() && self.key != key {
            return false;
        }
        self.exists || self.value == value
    }
}

/// A topology spread constraint, parsed.
#[derive(Clone, Debug)]
pub struct SpreadConstraint {
    pub max_skew: i64,
    pub topology_key: String,
    /// DoNotSchedule (a filter) or ScheduleAnyway (a score).
    pub hard: bool,
    pub selector: LabelSelector,
    pub min_domains: i64,
    /// `nodeAffinityPolicy: Honor` (the default): only nodes the pod's node affinity accepts
    /// count as domains.
    pub honor_node_affinity: bool,
}

/// A host port a pod uses: (protocol, host IP, port).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostPort {
    pub protocol: Arc<str>,
    pub ip: Arc<str>,
    pub port: i32,
}

impl HostPort {
    /// Two uses conflict on the same port and protocol when either binds every address.
    pub fn conflicts(&self, other: &HostPort) -> bool {
        self.port == other.port
            && self.protocol == other.protocol
            && (self.ip == other.ip || &*self.ip == "0.0.0.0" || &*other.ip == "0.0.0.0")
    }
}

/// What the scheduler knows of one pod.
#[derive(Clone, Debug)]
pub struct PodInfo {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// `namespace/name`, the queue's and cache's key.
    pub key: String,
    pub resource_version: String,
    pub labels: BTreeMap<String, String>,
    pub node_name: Option<String>,
    pub nominated_node_name: Option<String>,
    pub scheduler_name: String,
    pub priority: i32,
    pub priority_class_name: Option<String>,
    pub preempt_never: bool,
    /// creationTimestamp in milliseconds since the epoch; orders pods of equal priority.
    pub created_ms: i64,
    pub deleting: bool,
    /// Pods that have finished hold no resources.
    pub terminal: bool,
    pub requests: Resources,
    /// cpu and memory counted for scoring (see [`pod_requests`]).
    pub non_zero: (i64, i64),
    pub host_ports: Vec<HostPort>,
    pub node_selector: Vec<(String, String)>,
    /// Required node affinity: any term must match. `None` when absent.
    pub required_node_terms: Option<Vec<NodeTerm>>,
    pub preferred_node_terms: Vec<(i64, NodeTerm)>,
    pub tolerations: Vec<Tolerance>,
    pub affinity: Vec<AffinityTerm>,
    pub anti_affinity: Vec<AffinityTerm>,
    pub preferred_affinity: Vec<(i64, AffinityTerm)>,
    pub preferred_anti_affinity: Vec<(i64, AffinityTerm)>,
    pub spread: Vec<SpreadConstraint>,
    /// The PersistentVolumeClaims the pod's volumes use, by name (generic ephemeral volumes'
    /// claims are `<pod>-<volume>`).
    pub claims: Vec<String>,
}

/// Drops what no scheduling decision reads, before [`CachedPod::new`] parses a pod and digests
/// its spec (so a change to a dropped field is no reason to retry an unschedulable pod). Kept:
/// metadata, the spec but for each container's name, resources, ports and restart policy (what
/// requests, host ports and sidecars need), and the status' phase and nominated node. Dropped:
/// the containers' images, commands, probes and the like, and the status' conditions,
/// container statuses and IPs (the node's kubelet writes those; scheduling never looks at
/// them). Deterministic.
pub fn strip_for_scheduling(pod: &mut Pod) {
    pod.metadata.managed_fields = None;
    if let Some(spec) = pod.spec.as_mut() {
        let keep = |c: &mut k8s_openapi::api::core::v1::Container| {
            *c = k8s_openapi::api::core::v1::Container {
                name: std::mem::take(&mut c.name),
                resources: c.resources.take(),
                ports: c.ports.take(),
                restart_policy: c.restart_policy.take(),
                ..Default::default()
            };
        };
        spec.containers.iter_mut().for_each(keep);
        spec.init_containers.iter_mut().flatten().for_each(keep);
        spec.ephemeral_containers = None;
    }
    if let Some(status) = pod.status.as_mut() {
        *status = k8s_openapi::api::core::v1::PodStatus {
            phase: status.phase.take(),
            nominated_node_name: status.nominated_node_name.take(),
            ..Default::default()
        };
    }
}

/// What the scheduler's pod informer caches of a pod: the pod parsed into a [`PodInfo`] as it
/// is decoded, and not the typed pod. A `k8s_openapi` `Pod` is ~2.5 KB before any of its heap
/// (each `Container` alone is ~2.3 KB inline), so even stripped (see [`strip_for_scheduling`])
/// it cost ~7 KB a pod on top of its `PodInfo`; decoding straight into this keeps only the
/// `PodInfo` (~1.9 KB) and the metadata the informer keys and orders by.
#[derive(Clone, Debug)]
pub struct CachedPod {
    /// Only name, namespace and resourceVersion (the informer's key and ordering).
    pub metadata: ObjectMeta,
    /// `spec.priority` as the pod declares it; `None` has the cache resolve its PriorityClass.
    pub declared_priority: Option<i32>,
    /// Parsed with the declared priority (0 when none).
    pub info: Arc<PodInfo>,
    /// A digest of what scheduling reads of the spec and the labels: when it changes, an
    /// unschedulable pod may fit now (an update of its status alone does not retry it).
    pub spec_digest: u64,
}

impl CachedPod {
    pub fn new(mut pod: Pod) -> CachedPod {
        use std::hash::Hasher;
        strip_for_scheduling(&mut pod);
        let declared_priority = PodInfo::declared_priority(&pod);
        let info = Arc::new(PodInfo::new(&pod, declared_priority.unwrap_or(0)));
        // Deterministic: struct fields serialize in order and maps are sorted.
        // Serialized straight into the hasher: no buffer per decoded pod.
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        let _ = serde_json::to_writer(HashWriter(&mut hasher), &(&pod.spec, &pod.metadata.labels));
        let meta = pod.metadata;
        CachedPod {
            metadata: ObjectMeta {
                name: meta.name,
                namespace: meta.namespace,
                resource_version: meta.resource_version,
                ..Default::default()
            },
            declared_priority,
            info,
            spec_digest: hasher.finish(),
        }
    }
}

/// An `io::Write` that feeds a hasher.
struct HashWriter<'a, H: std::hash::Hasher>(&'a mut H);

impl<H: std::hash::Hasher> std::io::Write for HashWriter<'_, H> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'de> Deserialize<'de> for CachedPod {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Pod::deserialize(deserializer).map(CachedPod::new)
    }
}

impl k8s_openapi::Resource for CachedPod {
    const API_VERSION: &'static str = <Pod as k8s_openapi::Resource>::API_VERSION;
    const GROUP: &'static str = <Pod as k8s_openapi::Resource>::GROUP;
    const KIND: &'static str = <Pod as k8s_openapi::Resource>::KIND;
    const VERSION: &'static str = <Pod as k8s_openapi::Resource>::VERSION;
    const URL_PATH_SEGMENT: &'static str = <Pod as k8s_openapi::Resource>::URL_PATH_SEGMENT;
    type Scope = <Pod as k8s_openapi::Resource>::Scope;
}

impl k8s_openapi::Metadata for CachedPod {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl PodInfo {
    /// Parses a pod. `priority` is the resolved priority (see [`PodInfo::declared_priority`]).
    pub fn new(pod: &Pod, priority: i32) -> PodInfo {
        let meta = &pod.metadata;
        let namespace = meta.namespace.clone().unwrap_or_default();
        let name = meta.name.clone().unwrap_or_default();
        let no_spec = PodSpec::default();
        let spec = pod.spec.as_ref().unwrap_or(&no_spec);
        let status = pod.status.as_ref();
        let (requests, non_zero) = pod_requests(spec);
        let mut host_ports = Vec::new();
        for container in spec
            .containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
        {
            for port in container.ports.iter().flatten() {
                let host_port = port.host_port.unwrap_or(0);
                if host_port <= 0 {
                    continue;
                }
                host_ports.push(HostPort {
                    protocol: Arc::from(port.protocol.as_deref().unwrap_or(PROTOCOL_TCP)),
                    ip: Arc::from(
                        port.host_ip
                            .as_deref()
                            .filter(|ip| !ip.is_empty())
                            .unwrap_or("0.0.0.0"),
                    ),
                    port: host_port,
                });
            }
        }
        let affinity = spec.affinity.clone().unwrap_or_default();
        let node_affinity = affinity.node_affinity.unwrap_or_default();
        let pod_affinity = affinity.pod_affinity.unwrap_or_default();
        let pod_anti = affinity.pod_anti_affinity.unwrap_or_default();
        let terms = |ts: &Option<Vec<PodAffinityTerm>>| {
            ts.iter()
                .flatten()
                .map(|t| AffinityTerm::parse(t, &namespace))
                .collect::<Vec<_>>()
        };
        let weighted = |ts: &Option<Vec<k8s_openapi::api::core::v1::WeightedPodAffinityTerm>>| {
            ts.iter()
                .flatten()
                .map(|w| {
                    (
                        i64::from(w.weight),
                        AffinityTerm::parse(&w.pod_affinity_term, &namespace),
                    )
                })
                .collect::<Vec<_>>()
        };
        let spread = spec
            .topology_spread_constraints
            .iter()
            .flatten()
            .map(|c| SpreadConstraint {
                max_skew: i64::from(c.max_skew.max(1)),
                topology_key: c.topology_key.clone(),
                hard: c.when_unsatisfiable != "ScheduleAnyway",
                selector: c
                    .label_selector
                    .as_ref()
                    .and_then(|s| serde_json::to_value(s).ok())
                    .and_then(|v| LabelSelector::from_label_selector_json(&v).ok())
                    .unwrap_or_else(LabelSelector::nothing),
                min_domains: i64::from(c.min_domains.unwrap_or(1).max(1)),
                honor_node_affinity: c.node_affinity_policy.as_deref() != Some("Ignore"),
            })
            .collect();
        let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("");
        PodInfo {
            key: format!("{namespace}/{name}"),
            uid: meta.uid.clone().unwrap_or_default(),
            resource_version: meta.resource_version.clone().unwrap_or_default(),
            labels: meta.labels.clone().unwrap_or_default(),
            node_name: spec.node_name.clone().filter(|n| !n.is_empty()),
            nominated_node_name: status
                .and_then(|s| s.nominated_node_name.clone())
                .filter(|n| !n.is_empty()),
            scheduler_name: spec
                .scheduler_name
                .clone()
                .unwrap_or_else(|| "default-scheduler".into()),
            priority,
            priority_class_name: spec.priority_class_name.clone(),
            preempt_never: spec.preemption_policy.as_deref() == Some("Never"),
            created_ms: meta
                .creation_timestamp
                .as_ref()
                .map_or(0, |t| t.0.as_millisecond()),
            deleting: meta.deletion_timestamp.is_some(),
            terminal: phase == "Succeeded" || phase == "Failed",
            requests,
            non_zero,
            host_ports,
            node_selector: spec
                .node_selector
                .clone()
                .unwrap_or_default()
                .into_iter()
                .collect(),
            required_node_terms: node_affinity
                .required_during_scheduling_ignored_during_execution
                .map(|s| s.node_selector_terms.iter().map(NodeTerm::parse).collect()),
            preferred_node_terms: node_affinity
                .preferred_during_scheduling_ignored_during_execution
                .iter()
                .flatten()
                .map(|p| (i64::from(p.weight), NodeTerm::parse(&p.preference)))
                .collect(),
            tolerations: spec
                .tolerations
                .iter()
                .flatten()
                .map(Tolerance::parse)
                .collect(),
            affinity: terms(&pod_affinity.required_during_scheduling_ignored_during_execution),
            anti_affinity: terms(&pod_anti.required_during_scheduling_ignored_during_execution),
            preferred_affinity: weighted(
                &pod_affinity.preferred_during_scheduling_ignored_during_execution,
            ),
            preferred_anti_affinity: weighted(
                &pod_anti.preferred_during_scheduling_ignored_during_execution,
            ),
            spread,
            claims: spec
                .volumes
                .iter()
                .flatten()
                .filter_map(|v| {
                    if let Some(claim) = &v.persistent_volume_claim {
                        Some(claim.claim_name.clone())
                    } else {
                        v.ephemeral.as_ref().map(|_| format!("{name}-{}", v.name))
                    }
                })
                .collect(),
            namespace,
            name,
        }
    }

    /// `spec.priority` if the pod has one (admission normally sets it).
    pub fn declared_priority(pod: &Pod) -> Option<i32> {
        pod.spec.as_ref().and_then(|s| s.priority)
    }

    /// Whether the pod's nodeSelector and required node affinity accept the node.
    pub fn accepts_node(&self, node_name: &str, labels: &BTreeMap<String, String>) -> bool {
        self.node_selector
            .iter()
            .all(|(k, v)| labels.get(k).is_some_and(|have| have == v))
            && self
                .required_node_terms
                .as_ref()
                .is_none_or(|terms| terms.iter().any(|t| t.matches(node_name, labels)))
    }

    /// Whether the pod tolerates the taint.
    pub fn tolerates(&self, key: &str, value: &str, effect: TaintEffect) -> bool {
        self.tolerations
            .iter()
            .any(|t| t.tolerates(key, value, effect))
    }

    /// Whether any pod-to-pod term (required or preferred) exists.
    pub fn has_pod_affinity_terms(&self) -> bool {
        !self.affinity.is_empty()
            || !self.anti_affinity.is_empty()
            || !self.preferred_affinity.is_empty()
            || !self.preferred_anti_affinity.is_empty()
    }

    /// Whether the pod still holds its node's resources.
    pub fn holds_resources(&self) -> bool {
        !self.terminal
    }
}
