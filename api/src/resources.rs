//! The resources kemu serves: one [`ResourceInfo`] per (group, version, plural), the single table
//! that discovery, routing, storage keys and clients all read.

use std::sync::Mutex;

/// Everything the API machinery needs to know about one resource.
#[derive(Debug, PartialEq, Eq)]
pub struct ResourceInfo {
    /// API group; "" is the core (legacy) group served under `/api`.
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    /// The URL segment and storage segment, e.g. `pods`.
    pub plural: &'static str,
    pub singular: &'static str,
    pub namespaced: bool,
    pub short_names: &'static [&'static str],
    pub verbs: &'static [&'static str],
    /// Subresources served, e.g. `status`, `binding`, `log`.
    pub subresources: &'static [&'static str],
    /// `kubectl get all` includes resources in the `all` category.
    pub categories: &'static [&'static str],
    /// Storage segment under `/registry/` — shared by two views of one resource
    /// (core/v1 and events.k8s.io/v1 events).
    pub storage: &'static str,
}

const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];
const CLUSTER_VERBS: &[&str] = &[
    "create", "delete", "get", "list", "patch", "update", "watch",
];

/// Resources that are only ever created (reviews answered on the spot).
const CREATE_ONLY: &[&str] = &["create"];

/// Resources computed on each read (resource metrics), as metrics-server serves them.
const READ_ONLY: &[&str] = &["get", "list"];

/// Every served resource. Order is the order of discovery documents.
pub static RESOURCES: &[ResourceInfo] = &[
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "Namespace",
        plural: "namespaces",
        singular: "namespace",
        namespaced: false,
        short_names: &["ns"],
        verbs: CLUSTER_VERBS,
        subresources: &["status", "finalize"],
        categories: &[],
        storage: "namespaces",
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "Pod",
        plural: "pods",
        singular: "pod",
        namespaced: true,
        short_names: &["po"],
        verbs: ALL_VERBS,
        subresources: &[
            "attach",
            "binding",
            "eviction",
            "exec",
            "log",
            "portforward",
            "status",
        ],
        categories: &["all"],
        storage: "pods",
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "Node",
        plural: "nodes",
        singular: "node",
        namespaced: false,
        short_names: &["no"],
        verbs: ALL_VERBS,
        subresources: &["status"],
        categories: &[],
        storage: "minions",
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "Event",
        plural: "events",
        singular: "event",
        namespaced: true,
        short_names: &["ev"],
        verbs: ALL_VERBS,
        subresources: &[],
        categories: &[],
        storage: "events",
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "ConfigMap",
        plural: "configmaps",
        singular: "configmap",
        namespaced: true,
        short_names: &["cm"],
        verbs: ALL_VERBS,
        subresources: &[],
        categories: &[],
        storage: "configmaps",
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "Secret",
        plural: "secrets",
        singular: "secret",
        namespaced: true,
        short_names: &[],
        verbs: ALL_VERBS,
        subresources: &[],
        categories: &[],
        storage: "secrets",
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "Service",
        plural: "services",
        singular: "service",
        namespaced: true,
        short_names: &["svc"],
        verbs: ALL_VERBS,
        subresources: &["status"],
        categories: &["all"],
        storage: "services/specs",
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "Endpoints",
        plural: "endpoints",
        singular: "endpoints",
        namespaced: true,
        short_names: &["ep"],
        verbs: ALL_VERBS,
        subresources: &[],
        categories: &[],
        storage: "services/endpoints",
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "ServiceAccount",
        plural: "serviceaccounts",
        singular: "serviceaccount",
        namespaced: true,
        short_names: &["sa"],
        verbs: ALL_VERBS,
        subresources: &["token"],
        categories: &[],
        storage: "serviceaccounts",
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "ResourceQuota",
        plural: "resourcequotas",
        singular: "resourcequota",
        namespaced: true,
        short_names: &["quota"],
        verbs: ALL_VERBS,
        subresources: &["status"],
        categories: &[],
        storage: "resourcequotas",
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "LimitRange",
        plural: "limitranges",
        singular: "limitrange",
        namespaced: true,
        short_names: &["limits"],
        verbs: ALL_VERBS,
        subresources: &[],
        categories: &[],
        storage: "limitranges",
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "PersistentVolume",
        plural: "persistentvolumes",
        singular: "persistentvolume",
        namespaced: false,
        short_names: &["pv"],
        verbs: ALL_VERBS,
        subresources: &["status"],
        categories: &[],
        storage: "persistentvolumes",
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "PersistentVolumeClaim",
        plural: "persistentvolumeclaims",
        singular: "persistentvolumeclaim",
        namespaced: true,
        short_names: &["pvc"],
        verbs: ALL_VERBS,
        subresources: &["status"],
        categories: &[],
        storage: "persistentvolumeclaims",
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "PodTemplate",
        plural: "podtemplates",
        singular: "podtemplate",
        namespaced: true,
        short_names: &[],
        verbs: ALL_VERBS,
        subresources: &[],
        categories: &[],
        storage: "podtemplates",
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "ReplicationController",
        plural: "replicationcontrollers",
        singular: "replicationcontroller",
        namespaced: true,
        short_names: &["rc"],
        verbs: ALL_VERBS,
        subresources: &["status", "scale"],
        categories: &["all"],
        storage: "controllers",
    },
    ResourceInfo {
        group: "apps",
        version: "v1",
        kind: "ControllerRevision",
        plural: "controllerrevisions",
        singular: "controllerrevision",
        namespaced: true,
        short_names: &[],
        verbs: ALL_VERBS,
        subresources: &[],
        categories: &[],
        storage: "controllerrevisions",
    },
    ResourceInfo {
        group: "apps",
        version: "v1",
        kind: "DaemonSet",
        plural: "daemonsets",
        singular: "daemonset",
        namespaced: true,
        short_names: &["ds"],
        verbs: ALL_VERBS,
        subresources: &["status"],
        categories: &["all"],
        storage: "daemonsets",
    },
    ResourceInfo {
        group: "apps",
        version: "v1",
        kind: "Deployment",
        plural: "deployments",
        singular: "deployment",
        namespaced: true,
        short_names: &["deploy"],
        verbs: ALL_VERBS,
        subresources: &["status", "scale"],
        categories: &["all"],
        storage: "deployments",
    },
    ResourceInfo {
        group: "apps",
        version: "v1",
        kind: "ReplicaSet",
        plural: "replicasets",
        singular: "replicaset",
        namespaced: true,
        short_names: &["rs"],
        verbs: ALL_VERBS,
        subresources: &["status", "scale"],
        categories: &["all"],
        storage: "replicasets",
    },
    ResourceInfo {
        group: "apps",
        version: "v1",
        kind: "StatefulSet",
        plural: "statefulsets",
        singular: "statefulset",
        namespaced: true,
        short_names: &["sts"],
        verbs: ALL_VERBS,
        subresources: &["status", "scale"],
        categories: &["all"],
        storage: "statefulsets",
    },
    ResourceInfo {
        group: "autoscaling",
        version: "v2",
        kind: "HorizontalPodAutoscaler",
        plural: "horizontalpodautoscalers",
        singular: "horizontalpodautoscaler",
        namespaced: true,
        short_names: &["hpa"],
        verbs: ALL_VERBS,
        subresources: &["status"],
        categories: &["all"],
        storage: "horizontalpodautoscalers",
    },
    // The same objects in the autoscaling/v1 shape (stored as v2, converted on the way).
    ResourceInfo {
        group: "autoscaling",
        version: "v1",
        kind: "HorizontalPodAutoscaler",
        plural: "horizontalpodautoscalers",
        singular: "horizontalpodautoscaler",
        namespaced: true,
        short_names: &["hpa"],
        verbs: ALL_VERBS,
        subresources: &["status"],
        categories: &["all"],
        storage: "horizontalpodautoscalers",
    },
    ResourceInfo {
        group: "batch",
        version: "v1",
        kind: "CronJob",
        plural: "cronjobs",
        singular: "cronjob",
        namespaced: true,
        short_names: &["cj"],
        verbs: ALL_VERBS,
        subresources: &["status"],
        categories: &["all"],
        storage: "cronjobs",
    },
    ResourceInfo {
        group: "batch",
        version: "v1",
        kind: "Job",
        plural: "jobs",
        singular: "job",
        namespaced: true,
        short_names: &[],
        verbs: ALL_VERBS,
        subresources: &["status"],
        categories: &["all"],
        storage: "jobs",
    },
    ResourceInfo {
        group: "coordination.k8s.io",
        version: "v1",
        kind: "Lease",
        plural: "leases",
        singular: "lease",
        namespaced: true,
        short_names: &[],
        verbs: ALL_VERBS,
        subresources: &[],
        categories: &[],
        storage: "leases",
    },
    ResourceInfo {
        group: "policy",
        version: "v1",
        kind: "PodDisruptionBudget",
        plural: "poddisruptionbudgets",
        singular: "poddisruptionbudget",
        namespaced: true,
        short_names: &["pdb"],
        verbs: ALL_VERBS,
        subresources: &["status"],
        categories: &[],
        storage: "poddisruptionbudgets",
    },
    ResourceInfo {
        group: "scheduling.k8s.io",
        version: "v1",
        kind: "PriorityClass",
        plural: "priorityclasses",
        singular: "priorityclass",
        namespaced: false,
        short_names: &["pc"],
        verbs: ALL_VERBS,
        subresources: &[],
        categories: &[],
        storage: "priorityclasses",
    },
    ResourceInfo {
        group: "discovery.k8s.io",
        version: "v1",
        kind: "EndpointSlice",
        plural: "endpointslices",
        singular: "endpointslice",
        namespaced: true,
        short_names: &[],
        verbs: ALL_VERBS,
        subresources: &[],
        categories: &[],
        storage: "endpointslices",
    },
    ResourceInfo {
        group: "events.k8s.io",
        version: "v1",
        kind: "Event",
        plural: "events",
        singular: "event",
        namespaced: true,
        short_names: &["ev"],
        verbs: ALL_VERBS,
        subresources: &[],
        categories: &[],
        storage: "events",
    },
    ResourceInfo {
        group: "networking.k8s.io",
        version: "v1",
        kind: "Ingress",
        plural: "ingresses",
        singular: "ingress",
        namespaced: true,
        short_names: &["ing"],
        verbs: ALL_VERBS,
        subresources: &["status"],
        categories: &[],
        storage: "ingress",
    },
    ResourceInfo {
        group: "networking.k8s.io",
        version: "v1",
        kind: "IngressClass",
        plural: "ingressclasses",
        singular: "ingressclass",
        namespaced: false,
        short_names: &[],
        verbs: ALL_VERBS,
        subresources: &[],
        categories: &[],
        storage: "ingressclasses",
    },
    ResourceInfo {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "ClusterRole",
        plural: "clusterroles",
        singular: "clusterrole",
        namespaced: false,
        short_names: &[],
        verbs: ALL_VERBS,
        subresources: &[],
        categories: &[],
        storage: "clusterroles",
    },
    ResourceInfo {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "ClusterRoleBinding",
        plural: "clusterrolebindings",
        singular: "clusterrolebinding",
        namespaced: false,
        short_names: &[],
        verbs: ALL_VERBS,
        subresources: &[],
        categories: &[],
        storage: "clusterrolebindings",
    },
    ResourceInfo {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "Role",
        plural: "roles",
        singular: "role",
        namespaced: true,
        short_names: &[],
        verbs: ALL_VERBS,
        subresources: &[],
        categories: &[],
        storage: "roles",
    },
    ResourceInfo {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "RoleBinding",
        plural: "rolebindings",
        singular: "rolebinding",
        namespaced: true,
        short_names: &[],
        verbs: ALL_VERBS,
        subresources: &[],
        categories: &[],
        storage: "rolebindings",
    },
    ResourceInfo {
        group: "storage.k8s.io",
        version: "v1",
        kind: "StorageClass",
        plural: "storageclasses",
        singular: "storageclass",
        namespaced: false,
        short_names: &["sc"],
        verbs: ALL_VERBS,
        subresources: &[],
        categories: &[],
        storage: "storageclasses",
    },
    ResourceInfo {
        group: "storage.k8s.io",
        version: "v1",
        kind: "CSIDriver",
        plural: "csidrivers",
        singular: "csidriver",
        namespaced: false,
        short_names: &[],
        verbs: ALL_VERBS,
        subresources: &[],
        categories: &[],
        storage: "csidrivers",
    },
    ResourceInfo {
        group: "storage.k8s.io",
        version: "v1",
        kind: "CSINode",
        plural: "csinodes",
        singular: "csinode",
        namespaced: false,
        short_names: &[],
        verbs: ALL_VERBS,
        subresources: &[],
        categories: &[],
        storage: "csinodes",
    },
    ResourceInfo {
        group: "storage.k8s.io",
        version: "v1",
        kind: "CSIStorageCapacity",
        plural: "csistoragecapacities",
        singular: "csistoragecapacity",
        namespaced: true,
        short_names: &[],
        verbs: ALL_VERBS,
        subresources: &[],
        categories: &[],
        storage: "csistoragecapacities",
    },
    ResourceInfo {
        group: "storage.k8s.io",
        version: "v1",
        kind: "VolumeAttachment",
        plural: "volumeattachments",
        singular: "volumeattachment",
        namespaced: false,
        short_names: &[],
        verbs: ALL_VERBS,
        subresources: &["status"],
        categories: &[],
        storage: "volumeattachments",
    },
    ResourceInfo {
        group: "apiextensions.k8s.io",
        version: "v1",
        kind: "CustomResourceDefinition",
        plural: "customresourcedefinitions",
        singular: "customresourcedefinition",
        namespaced: false,
        short_names: &["crd", "crds"],
        verbs: ALL_VERBS,
        subresources: &["status"],
        categories: &["api-extensions"],
        storage: "apiextensions.k8s.io/customresourcedefinitions",
    },
    // Reviews are answered, never stored: the API server evaluates them on the spot.
    ResourceInfo {
        group: "authorization.k8s.io",
        version: "v1",
        kind: "SelfSubjectAccessReview",
        plural: "selfsubjectaccessreviews",
        singular: "selfsubjectaccessreview",
        namespaced: false,
        short_names: &[],
        verbs: CREATE_ONLY,
        subresources: &[],
        categories: &[],
        storage: "selfsubjectaccessreviews",
    },
    ResourceInfo {
        group: "authorization.k8s.io",
        version: "v1",
        kind: "SubjectAccessReview",
        plural: "subjectaccessreviews",
        singular: "subjectaccessreview",
        namespaced: false,
        short_names: &[],
        verbs: CREATE_ONLY,
        subresources: &[],
        categories: &[],
        storage: "subjectaccessreviews",
    },
    ResourceInfo {
        group: "authorization.k8s.io",
        version: "v1",
        kind: "LocalSubjectAccessReview",
        plural: "localsubjectaccessreviews",
        singular: "localsubjectaccessreview",
        namespaced: true,
        short_names: &[],
        verbs: CREATE_ONLY,
        subresources: &[],
        categories: &[],
        storage: "localsubjectaccessreviews",
    },
    ResourceInfo {
        group: "authentication.k8s.io",
        version: "v1",
        kind: "SelfSubjectReview",
        plural: "selfsubjectreviews",
        singular: "selfsubjectreview",
        namespaced: false,
        short_names: &[],
        verbs: CREATE_ONLY,
        subresources: &[],
        categories: &[],
        storage: "selfsubjectreviews",
    },
    // Resource metrics: computed from the pods and nodes on each read, never stored.
    ResourceInfo {
        group: "metrics.k8s.io",
        version: "v1beta1",
        kind: "NodeMetrics",
        plural: "nodes",
        singular: "",
        namespaced: false,
        short_names: &[],
        verbs: READ_ONLY,
        subresources: &[],
        categories: &[],
        storage: "metrics.k8s.io/nodes",
    },
    ResourceInfo {
        group: "metrics.k8s.io",
        version: "v1beta1",
        kind: "PodMetrics",
        plural: "pods",
        singular: "",
        namespaced: true,
        short_names: &[],
        verbs: READ_ONLY,
        subresources: &[],
        categories: &[],
        storage: "metrics.k8s.io/pods",
    },
];

impl ResourceInfo {
    /// `v1` for the core group, else `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// The storage key prefix of every object of this resource (with a trailing `/`).
    pub fn prefix(&self) -> String {
        format!("/registry/{}/", self.storage)
    }

    /// The storage key prefix of the objects in one namespace (or all, for `None`).
    pub fn namespace_prefix(&self, namespace: Option<&str>) -> String {
        match namespace {
            Some(ns) if self.namespaced => format!("/registry/{}/{}/", self.storage, ns),
            _ => self.prefix(),
        }
    }

    /// The storage key of one object.
    pub fn key(&self, namespace: Option<&str>, name: &str) -> String {
        match namespace {
            Some(ns) if self.namespaced => format!("/registry/{}/{}/{}", self.storage, ns, name),
            _ => format!("/registry/{}/{}", self.storage, name),
        }
    }

    /// The URL path of the collection, e.g. `/api/v1/namespaces/ns/pods`.
    pub fn collection_path(&self, namespace: Option<&str>) -> String {
        let base = if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        };
        match namespace {
            Some(ns) if self.namespaced => format!("{base}/namespaces/{ns}/{}", self.plural),
            _ => format!("{base}/{}", self.plural),
        }
    }

    /// Whether objects of this resource are kept in the store (reviews and resource metrics
    /// are not: they are answered on the spot).
    pub fn is_stored(&self) -> bool {
        self.verbs.contains(&"watch")
    }

    pub fn has_subresource(&self, name: &str) -> bool {
        self.subresources.contains(&name)
    }
}

/// Looks a resource up by group, version and plural (the URL's view).
pub fn find(group: &str, version: &str, plural: &str) -> Option<&'static ResourceInfo> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// Looks a resource up by apiVersion and kind (a manifest's view).
pub fn find_kind(api_version: &str, kind: &str) -> Option<&'static ResourceInfo> {
    RESOURCES
        .iter()
        .find(|r| r.kind == kind && r.api_version() == api_version)
}

/// The distinct API groups (besides core), each with its versions, in table order.
pub fn groups() -> Vec<(&'static str, Vec<&'static str>)> {
    let mut out: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
    for r in RESOURCES.iter().filter(|r| !r.group.is_empty()) {
        match out.iter_mut().find(|(g, _)| *g == r.group) {
            Some((_, versions)) if !versions.contains(&r.version) => versions.push(r.version),
            Some(_) => {}
            None => out.push((r.group, vec![r.version])),
        }
    }
    out
}

/// The verbs of every custom resource, in the order kube-apiserver lists them.
pub const CUSTOM_VERBS: &[&str] = &[
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "create",
    "update",
    "watch",
];

/// A resource defined at run time by a CustomResourceDefinition, in owned strings. Routing,
/// storage, informers and clients hold resources as `&'static` [`ResourceInfo`];
/// [`intern`](Self::intern) gives one for this shape.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DefinedResource {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub subresources: Vec<String>,
}

impl DefinedResource {
    /// The storage segment of its objects: `<group>/<plural>`, shared by all its versions.
    pub fn storage(&self) -> String {
        format!("{}/{}", self.group, self.plural)
    }

    /// The `ResourceInfo` of this shape: leaked the first time a process sees the shape and
    /// reused after, so the memory kept is bounded by the distinct definitions it ever sees.
    pub fn intern(&self) -> &'static ResourceInfo {
        static INTERNED: Mutex<Vec<&'static ResourceInfo>> = Mutex::new(Vec::new());
        fn leak(s: &str) -> &'static str {
            Box::leak(s.to_string().into_boxed_str())
        }
        fn leak_all(items: &[String]) -> &'static [&'static str] {
            Box::leak(
                items
                    .iter()
                    .map(|s| leak(s))
                    .collect::<Vec<_>>()
                    .into_boxed_slice(),
            )
        }
        let storage = self.storage();
        let same = |r: &ResourceInfo| {
            r.group == self.group
                && r.version == self.version
                && r.kind == self.kind
                && r.plural == self.plural
                && r.singular == self.singular
                && r.namespaced == self.namespaced
                && r.short_names.iter().eq(self.short_names.iter())
                && r.categories.iter().eq(self.categories.iter())
                && r.subresources.iter().eq(self.subresources.iter())
                && r.storage == storage
        };
        let mut interned = INTERNED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(found) = interned.iter().find(|r| same(r)) {
            return found;
        }
        let info: &'static ResourceInfo = Box::leak(Box::new(ResourceInfo {
            group: leak(&self.group),
            version: leak(&self.version),
            kind: leak(&self.kind),
            plural: leak(&self.plural),
            singular: leak(&self.singular),
            namespaced: self.namespaced,
            short_names: leak_all(&self.short_names),
            verbs: CUSTOM_VERBS,
            subresources: leak_all(&self.subresources),
            categories: leak_all(&self.categories),
            storage: leak(&storage),
        }));
        interned.push(info);
        info
    }
}

/// Shorthand for the most used resource.
pub fn pods() -> &'static ResourceInfo {
    &RESOURCES[1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_and_keys() {
        let pods = find("", "v1", "pods").expect("pods");
        assert_eq!(pods, super::pods());
        assert_eq!(
            pods.key(Some("default"), "web"),
            "/registry/pods/default/web"
        );
        assert_eq!(
            pods.collection_path(Some("ns")),
            "/api/v1/namespaces/ns/pods"
        );
        let nodes = find_kind("v1", "Node").expect("nodes");
        assert_eq!(nodes.key(None, "n1"), "/registry/minions/n1");
        let deploy = find("apps", "v1", "deployments").expect("deployments");
        assert_eq!(deploy.api_version(), "apps/v1");
        assert_eq!(deploy.collection_path(None), "/apis/apps/v1/deployments");
        assert_eq!(deploy.list_kind(), "DeploymentList");
        let core_events = find("", "v1", "events").expect("core events");
        let new_events = find("events.k8s.io", "v1", "events").expect("events.k8s.io");
        assert_eq!(core_events.prefix(), new_events.prefix());
        assert!(groups()
            .iter()
            .any(|(g, v)| *g == "apps" && v == &vec!["v1"]));
    }

    #[test]
    fn defined_resources_are_interned_once_per_shape() {
        let widgets = DefinedResource {
            group: "example.com".into(),
            version: "v1".into(),
            kind: "Widget".into(),
            plural: "widgets".into(),
            singular: "widget".into(),
            namespaced: true,
            ..Default::default()
        };
        let first = widgets.intern();
        assert!(std::ptr::eq(first, widgets.clone().intern()));
        assert_eq!(first.storage, "example.com/widgets");
        assert_eq!(
            first.key(Some("ns"), "w"),
            "/registry/example.com/widgets/ns/w"
        );
        let v2 = DefinedResource {
            version: "v2".into(),
            ..widgets
        };
        assert!(!std::ptr::eq(first, v2.intern()));
        assert_eq!(v2.intern().prefix(), first.prefix());
    }

    #[test]
    fn plurals_are_unique_per_group_version() {
        for (i, a) in RESOURCES.iter().enumerate() {
            for b in &RESOURCES[i + 1..] {
                assert!(
                    !(a.group == b.group && a.version == b.version && a.plural == b.plural),
                    "{}",
                    a.plural
                );
            }
        }
    }
}
