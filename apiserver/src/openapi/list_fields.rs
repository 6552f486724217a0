//! How the list fields of the built-in types merge: Kubernetes' `+listType`, `+listMapKey`,
//! `+patchStrategy` and `+patchMergeKey` markers, per definition and field. This table is the one
//! source of that knowledge: the OpenAPI documents publish it as the `x-kubernetes-list-type`,
//! `x-kubernetes-list-map-keys`, `x-kubernetes-patch-strategy` and
//! `x-kubernetes-patch-merge-key` extensions (which kubectl's client-side apply reads), and
//! strategic merge patch and server-side apply look it up through the schemas
//! ([`super::list_field`]). A list field not listed here is atomic.

/// `x-kubernetes-list-type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListType {
    Atomic,
    Set,
    /// A list of maps identified by these keys.
    Map(&'static [&'static str]),
}

/// One list field of one definition.
#[derive(Debug)]
pub struct ListField {
    pub definition: &'static str,
    pub field: &'static str,
    pub list_type: ListType,
    /// `merge` or `merge,retainKeys`; `None` replaces the list wholesale in a strategic merge.
    pub patch_strategy: Option<&'static str>,
    pub patch_merge_key: Option<&'static str>,
}

macro_rules! core {
    ($name:literal) => {
        concat!("io.k8s.api.core.v1.", $name)
    };
}
macro_rules! meta {
    ($name:literal) => {
        concat!("io.k8s.apimachinery.pkg.apis.meta.v1.", $name)
    };
}

const fn atomic(definition: &'static str, field: &'static str) -> ListField {
    ListField {
        definition,
        field,
        list_type: ListType::Atomic,
        patch_strategy: None,
        patch_merge_key: None,
    }
}

/// A set that strategic merge unions.
const fn merged_set(definition: &'static str, field: &'static str) -> ListField {
    ListField {
        definition,
        field,
        list_type: ListType::Set,
        patch_strategy: Some("merge"),
        patch_merge_key: None,
    }
}

/// A map list merged by `key` (its first map key).
const fn merged_map(
    definition: &'static str,
    field: &'static str,
    keys: &'static [&'static str],
) -> ListField {
    ListField {
        definition,
        field,
        list_type: ListType::Map(keys),
        patch_strategy: Some("merge"),
        patch_merge_key: Some(keys[0]),
    }
}

/// A map list merged by `key` whose elements also keep only the patch's keys of a union
/// (`$retainKeys`).
const fn merged_map_retaining(
    definition: &'static str,
    field: &'static str,
    key: &'static [&'static str],
) -> ListField {
    ListField {
        patch_strategy: Some("merge,retainKeys"),
        ..merged_map(definition, field, key)
    }
}

const NAME: &[&str] = &["name"];
const TYPE: &[&str] = &["type"];

/// Every marked list field of the built-in types.
pub static LIST_FIELDS: &[ListField] = &[
    // Object metadata, at every object's root and in every template.
    merged_set(meta!("ObjectMeta"), "finalizers"),
    merged_map(meta!("ObjectMeta"), "ownerReferences", &["uid"]),
    atomic(meta!("ObjectMeta"), "managedFields"),
    atomic(meta!("LabelSelector"), "matchExpressions"),
    atomic(meta!("LabelSelectorRequirement"), "values"),
    // The pod spec and its containers.
    merged_map_retaining(core!("PodSpec"), "volumes", NAME),
    merged_map(core!("PodSpec"), "initContainers", NAME),
    merged_map(core!("PodSpec"), "containers", NAME),
    merged_map(core!("PodSpec"), "ephemeralContainers", NAME),
    merged_map(core!("PodSpec"), "imagePullSecrets", NAME),
    atomic(core!("PodSpec"), "tolerations"),
    merged_map(core!("PodSpec"), "hostAliases", &["ip"]),
    atomic(core!("PodSpec"), "readinessGates"),
    merged_map(
        core!("PodSpec"),
        "topologySpreadConstraints",
        &["topologyKey", "whenUnsatisfiable"],
    ),
    merged_map_retaining(core!("PodSpec"), "resourceClaims", NAME),
    merged_map(core!("PodSpec"), "schedulingGates", NAME),
    atomic(core!("PodSecurityContext"), "supplementalGroups"),
    atomic(core!("PodSecurityContext"), "sysctls"),
    atomic(core!("Container"), "command"),
    atomic(core!("Container"), "args"),
    merged_map(core!("Container"), "ports", &["containerPort", "protocol"]),
    atomic(core!("Container"), "envFrom"),
    merged_map(core!("Container"), "env", NAME),
    merged_map(core!("Container"), "volumeMounts", &["mountPath"]),
    merged_map(core!("Container"), "volumeDevices", &["devicePath"]),
    atomic(core!("Container"), "resizePolicy"),
    atomic(core!("EphemeralContainer"), "command"),
    atomic(core!("EphemeralContainer"), "args"),
    merged_map(
        core!("EphemeralContainer"),
        "ports",
        &["containerPort", "protocol"],
    ),
    atomic(core!("EphemeralContainer"), "envFrom"),
    merged_map(core!("EphemeralContainer"), "env", NAME),
    merged_map(core!("EphemeralContainer"), "volumeMounts", &["mountPath"]),
    merged_map(
        core!("EphemeralContainer"),
        "volumeDevices",
        &["devicePath"],
    ),
    atomic(core!("Capabilities"), "add"),
    atomic(core!("Capabilities"), "drop"),
    atomic(core!("NodeSelector"), "nodeSelectorTerms"),
    atomic(core!("NodeSelectorTerm"), "matchExpressions"),
    atomic(core!("NodeSelectorTerm"), "matchFields"),
    atomic(core!("NodeSelectorRequirement"), "values"),
    // Pod status.
    merged_map(core!("PodStatus"), "conditions", TYPE),
    merged_map(core!("PodStatus"), "podIPs", &["ip"]),
    ListField {
        patch_strategy: Some("merge"),
        patch_merge_key: Some("ip"),
        ..atomic(core!("PodStatus"), "hostIPs")
    },
    atomic(core!("PodStatus"), "initContainerStatuses"),
    atomic(core!("PodStatus"), "containerStatuses"),
    atomic(core!("PodStatus"), "ephemeralContainerStatuses"),
    merged_map_retaining(core!("PodStatus"), "resourceClaimStatuses", NAME),
    // Nodes. Taints stay atomic, as upstream: `kubectl taint` removes a taint by sending the
    // remaining list, which a merge by key would silently ignore.
    merged_set(core!("NodeSpec"), "podCIDRs"),
    atomic(core!("NodeSpec"), "taints"),
    merged_map(core!("NodeStatus"), "conditions", TYPE),
    merged_map(core!("NodeStatus"), "addresses", TYPE),
    atomic(core!("NodeStatus"), "images"),
    atomic(core!("NodeStatus"), "volumesInUse"),
    atomic(core!("NodeStatus"), "volumesAttached"),
    // Services, endpoints and namespaces.
    merged_map(core!("ServiceSpec"), "ports", &["port", "protocol"]),
    atomic(core!("ServiceSpec"), "externalIPs"),
    atomic(core!("ServiceSpec"), "loadBalancerSourceRanges"),
    atomic(core!("ServiceSpec"), "clusterIPs"),
    atomic(core!("ServiceSpec"), "ipFamilies"),
    merged_map(core!("ServiceStatus"), "conditions", TYPE),
    atomic(core!("Endpoints"), "subsets"),
    atomic(core!("EndpointSubset"), "addresses"),
    atomic(core!("EndpointSubset"), "notReadyAddresses"),
    atomic(core!("EndpointSubset"), "ports"),
    atomic(core!("NamespaceSpec"), "finalizers"),
    merged_map(core!("NamespaceStatus"), "conditions", TYPE),
    merged_map(core!("PersistentVolumeClaimStatus"), "conditions", TYPE),
    merged_map(core!("ReplicationControllerStatus"), "conditions", TYPE),
    // Workloads.
    merged_map("io.k8s.api.apps.v1.DeploymentStatus", "conditions", TYPE),
    merged_map("io.k8s.api.apps.v1.ReplicaSetStatus", "conditions", TYPE),
    merged_map("io.k8s.api.apps.v1.StatefulSetStatus", "conditions", TYPE),
    merged_map("io.k8s.api.apps.v1.DaemonSetStatus", "conditions", TYPE),
    ListField {
        patch_strategy: Some("merge"),
        patch_merge_key: Some("type"),
        ..atomic("io.k8s.api.batch.v1.JobStatus", "conditions")
    },
    atomic("io.k8s.api.batch.v1.CronJobStatus", "active"),
    merged_map(
        "io.k8s.api.policy.v1.PodDisruptionBudgetStatus",
        "conditions",
        TYPE,
    ),
    merged_map(
        "io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerStatus",
        "conditions",
        TYPE,
    ),
    atomic("io.k8s.api.discovery.v1.EndpointSlice", "endpoints"),
    atomic("io.k8s.api.discovery.v1.EndpointSlice", "ports"),
    // RBAC.
    atomic("io.k8s.api.rbac.v1.Role", "rules"),
    atomic("io.k8s.api.rbac.v1.ClusterRole", "rules"),
    atomic("io.k8s.api.rbac.v1.RoleBinding", "subjects"),
    atomic("io.k8s.api.rbac.v1.ClusterRoleBinding", "subjects"),
    atomic("io.k8s.api.rbac.v1.PolicyRule", "verbs"),
    atomic("io.k8s.api.rbac.v1.PolicyRule", "apiGroups"),
    atomic("io.k8s.api.rbac.v1.PolicyRule", "resources"),
    atomic("io.k8s.api.rbac.v1.PolicyRule", "resourceNames"),
    atomic("io.k8s.api.rbac.v1.PolicyRule", "nonResourceURLs"),
    // CustomResourceDefinitions.
    atomic(
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionSpec",
        "versions",
    ),
    merged_map(
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionStatus",
        "conditions",
        TYPE,
    ),
];

/// The default of a list-map key an element may leave out (a port's `protocol` is `TCP`), which
/// the element is then identified by.
pub fn map_key_default(key: &str) -> Option<&'static str> {
    match key {
        "protocol" => Some("TCP"),
        _ => None,
    }
}

/// The entry for `field` of `definition`.
pub fn find(definition: &str, field: &str) -> Option<&'static ListField> {
    LIST_FIELDS
        .iter()
        .find(|f| f.definition == definition && f.field == field)
}
