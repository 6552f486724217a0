//! `meta.k8s.io/v1` Table responses with the columns kubectl shows.
//!
//! kubectl asks `get` for a Table and prints whatever columns the server chose, so the columns
//! and cell logic here follow the real API server's printers (`pkg/printers/internalversion`):
//! the same column names (kubectl upper-cases them), types and priorities, and the same cell
//! strings — notably the pod STATUS, READY and RESTARTS logic. Like the real server, every
//! table carries the wide columns too, marked priority 1; kubectl hides those without `-o wide`.
//!
//! Objects are read as JSON rather than typed structs so that one odd stored object (a missing
//! required field) still prints instead of failing the whole list.
//!
//! The columns, the dispatch by resource and the JSON accessors live here; each kind's cells
//! live with their neighbours in `pods`, `cluster` (nodes, namespaces, events), `workloads`,
//! `network` (services, endpoints, ingresses), `config`, `rbac` and `volumes` (volumes, claims, classes).

mod autoscaling;
mod cluster;
mod config;
mod network;
mod pods;
mod rbac;
mod volumes;
mod workloads;

use chrono::{DateTime, Duration, Utc};
use serde_json::{json, Map, Value};

use api::resources::ResourceInfo;

use cluster::{event_cells, namespace_cells, node_cells};
use config::{
    configmap_cells, lease_cells, limitrange_cells, resourcequota_cells, secret_cells,
    serviceaccount_cells,
};
use network::{endpoints_cells, service_cells};
use pods::pod_cells;
pub use pods::pod_status_reason;
use rbac::{role_binding_cells, role_cells};
use workloads::{
    controller_revision_cells, cron_job_cells, daemon_set_cells, deployment_cells, job_cells,
    pod_disruption_budget_cells, pod_template_cells, replicaset_cells,
    replication_controller_cells, stateful_set_cells,
};

/// What each row's `object` holds: the `includeObject` query parameter of a Table request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeObject {
    None,
    /// A `PartialObjectMetadata`: enough for kubectl's `-A` NAMESPACE column and `--show-labels`.
    #[default]
    Metadata,
    Object,
}

impl IncludeObject {
    /// Parses the `includeObject` parameter; anything unrecognised means the default, `Metadata`.
    pub fn parse(s: &str) -> IncludeObject {
        match s {
            "None" => IncludeObject::None,
            "Object" => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        }
    }
}

impl IncludeObject {
    /// What a row carries of `obj`.
    pub fn render(self, obj: &Value) -> Value {
        match self {
            IncludeObject::None => Value::Null,
            IncludeObject::Metadata => json!({
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
            }),
            IncludeObject::Object => obj.clone(),
        }
    }
}

/// Builds a `meta.k8s.io/v1` Table for a list of objects of `resource`.
///
/// `wide` isn't a server concept: every column is emitted, the wide-only ones with priority 1.
/// `now` is the current time, for AGE and the other "how long ago" cells.
pub fn table(
    resource: &ResourceInfo,
    objects: &[Value],
    include_object: IncludeObject,
    now: DateTime<Utc>,
    resource_version: &str,
    continue_token: Option<&str>,
) -> Value {
    let printer = Printer::for_resource(resource);
    let mut metadata = Map::new();
    metadata.insert("resourceVersion".into(), resource_version.into());
    if let Some(token) = continue_token.filter(|t| !t.is_empty()) {
        metadata.insert("continue".into(), token.into());
    }
    let rows: Vec<Value> = objects
        .iter()
        .map(|obj| printer.row(obj, include_object, now))
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": printer.columns.iter().map(Column::definition).collect::<Vec<_>>(),
        "rows": rows,
    })
}

/// A human duration exactly as `k8s.io/apimachinery/pkg/util/duration.HumanDuration` renders it:
/// about two significant figures ("59s", "2m3s", "10m", "3h4m", "2d3h", "100d", "3y45d").
pub fn human_duration(d: Duration) -> String {
    // Up to a second in the future is clock skew between machines: call it now.
    let seconds = d.num_seconds();
    if seconds < -1 {
        return "<invalid>".into();
    } else if seconds < 0 {
        return "0s".into();
    } else if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = d.num_minutes();
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    } else if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = d.num_hours();
    if hours < 8 {
        let m = minutes % 60;
        if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        }
    } else if hours < 48 {
        format!("{hours}h")
    } else if hours < 24 * 8 {
        let h = hours % 24;
        if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        }
    } else if hours < 24 * 365 * 2 {
        format!("{}d", hours / 24)
    } else if hours < 24 * 365 * 8 {
        let days = (hours / 24) % 365;
        if days == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{days}d", hours / 24 / 365)
        }
    } else {
        format!("{}y", hours / 24 / 365)
    }
}

/// One `TableColumnDefinition`.
struct Column {
    name: &'static str,
    kind: &'static str,
    format: &'static str,
    description: &'static str,
    /// 1 = shown only with `-o wide`.
    priority: u8,
}

impl Column {
    const fn string(name: &'static str, description: &'static str) -> Column {
        Column {
            name,
            kind: "string",
            format: "",
            description,
            priority: 0,
        }
    }

    const fn integer(name: &'static str, description: &'static str) -> Column {
        Column {
            name,
            kind: "integer",
            format: "",
            description,
            priority: 0,
        }
    }

    const fn wide(self) -> Column {
        Column {
            priority: 1,
            ..self
        }
    }

    fn definition(&self) -> Value {
        json!({
            "name": self.name,
            "type": self.kind,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        })
    }
}

const NAME: Column = Column {
    name: "Name",
    kind: "string",
    format: "name",
    description: "Name must be unique within a namespace.",
    priority: 0,
};
const AGE: Column = Column::string(
    "Age",
    "CreationTimestamp is a timestamp representing the server time when this object was created.",
);
const CONTAINERS: Column =
    Column::string("Containers", "Names of each container in the template.").wide();
const IMAGES: Column = Column::string(
    "Images",
    "Images referenced by each container in the template.",
)
.wide();
const SELECTOR: Column = Column::string(
    "Selector",
    "A label query over the pods this object manages.",
)
.wide();

const POD_COLUMNS: &[Column] = &[
    NAME,
    Column::string("Ready", "The aggregate readiness state of this pod for accepting traffic."),
    Column::string("Status", "The aggregate status of the containers in this pod."),
    Column::string(
        "Restarts",
        "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
    ),
    AGE,
    Column::string("IP", "IP address allocated to the pod.").wide(),
    Column::string("Node", "The node this pod is bound to.").wide(),
    Column::string("Nominated Node", "The node the scheduler nominated for this pod after preemption.").wide(),
    Column::string("Readiness Gates", "Pod conditions evaluated for pod readiness.").wide(),
];

const NODE_COLUMNS: &[Column] = &[
    NAME,
    Column::string("Status", "The status of the node"),
    Column::string("Roles", "The roles of the node"),
    AGE,
    Column::string("Version", "Kubelet Version reported by the node."),
    Column::string("Internal-IP", "List of addresses reachable to the node.").wide(),
    Column::string("External-IP", "List of addresses reachable to the node.").wide(),
    Column::string("OS-Image", "OS Image reported by the node.").wide(),
    Column::string("Kernel-Version", "Kernel Version reported by the node.").wide(),
    Column::string(
        "Container-Runtime",
        "ContainerRuntime Version reported by the node.",
    )
    .wide(),
];

const NAMESPACE_COLUMNS: &[Column] = &[
    NAME,
    Column::string("Status", "The status of the namespace"),
    AGE,
];

const EVENT_COLUMNS: &[Column] = &[
    Column::string("Last Seen", "The time at which the most recent occurrence of this event was recorded."),
    Column::string("Type", "Type of this event (Normal, Warning)."),
    Column::string("Reason", "A short, machine understandable string for the transition into the object's current status."),
    Column::string("Object", "The object that this event is about."),
    Column::string("Subobject", "The field of the object the event is about.").wide(),
    Column::string("Source", "The component reporting this event.").wide(),
    Column::string("Message", "A human-readable description of the status of this operation."),
    Column::string("First Seen", "The time at which the event was first recorded.").wide(),
    Column::string("Count", "The number of times this event has occurred.").wide(),
    Column { priority: 1, ..NAME },
];

const DEPLOYMENT_COLUMNS: &[Column] = &[
    NAME,
    Column::string("Ready", "Number of the pod with ready state"),
    Column::string("Up-to-date", "Total number of non-terminated pods targeted by this deployment that have the desired template spec."),
    Column::string("Available", "Total number of available pods targeted by this deployment."),
    AGE,
    CONTAINERS,
    IMAGES,
    SELECTOR,
];

const REPLICASET_COLUMNS: &[Column] = &[
    NAME,
    Column::integer("Desired", "Replicas is the number of desired replicas."),
    Column::integer(
        "Current",
        "Replicas is the most recently observed number of replicas.",
    ),
    Column::integer(
        "Ready",
        "The number of ready replicas for this replica set.",
    ),
    AGE,
    CONTAINERS,
    IMAGES,
    SELECTOR,
];

const STATEFUL_SET_COLUMNS: &[Column] = &[
    NAME,
    Column::string("Ready", "Number of the pod with ready state"),
    AGE,
    CONTAINERS,
    IMAGES,
];

const CONTROLLER_REVISION_COLUMNS: &[Column] = &[
    NAME,
    Column::string("Controller", "Controller of the object"),
    Column::string(
        "Revision",
        "Revision indicates the revision of the state represented by Data.",
    ),
    AGE,
];

const REPLICATION_CONTROLLER_COLUMNS: &[Column] = &[
    NAME,
    Column::integer("Desired", "Replicas is the number of desired replicas. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller"),
    Column::integer("Current", "Replicas is the most recently observed number of replicas. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller"),
    Column::integer(
        "Ready",
        "The number of ready replicas for this replication controller.",
    ),
    AGE,
    CONTAINERS,
    IMAGES,
    Column::string("Selector", "Selector is a label query over pods that should match the Replicas count. If Selector is empty, it is defaulted to the labels present on the Pod template. Label keys and values that must match in order to be controlled by this replication controller, if empty defaulted to labels on Pod template. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors").wide(),
];

const POD_TEMPLATE_COLUMNS: &[Column] = &[
    NAME,
    Column::string("Containers", "Names of each container in the template."),
    Column::string(
        "Images",
        "Images referenced by each container in the template.",
    ),
    Column::string("Pod Labels", "The labels for the pod template."),
];

const POD_DISRUPTION_BUDGET_COLUMNS: &[Column] = &[
    NAME,
    Column::string(
        "Min Available",
        "The minimum number of pods that must be available.",
    ),
    Column::string(
        "Max Unavailable",
        "The maximum number of pods that may be unavailable.",
    ),
    Column::integer(
        "Allowed Disruptions",
        "Calculated number of pods that may be disrupted at this time.",
    ),
    AGE,
];

const SERVICE_COLUMNS: &[Column] = &[
    NAME,
    Column::string("Type", "How the Service is exposed."),
    Column::string("Cluster-IP", "The IP address assigned to this service."),
    Column::string(
        "External-IP",
        "The IP addresses this service is reachable at from outside the cluster.",
    ),
    Column::string(
        "Port(s)",
        "The list of ports that are exposed by this service.",
    ),
    AGE,
    Column::string(
        "Selector",
        "Route service traffic to pods with label keys and values matching this selector.",
    )
    .wide(),
];

const JOB_COLUMNS: &[Column] = &[
    NAME,
    Column::string("Status", "Status of the job."),
    Column::string(
        "Completions",
        "The number of pods which reached phase Succeeded.",
    ),
    Column::string("Duration", "Time required to complete the job."),
    AGE,
    CONTAINERS,
    IMAGES,
    SELECTOR,
];

const DAEMON_SET_COLUMNS: &[Column] = &[
    NAME,
    Column::integer("Desired", "The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod). More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/"),
    Column::integer("Current", "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod. More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/"),
    Column::integer("Ready", "numberReady is the number of nodes that should be running the daemon pod and have one or more of the daemon pod running with a Ready Condition."),
    Column::integer("Up-to-date", "The total number of nodes that are running updated daemon pod"),
    Column::integer("Available", "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)"),
    Column::string("Node Selector", "NodeSelector is a selector which must be true for the pod to fit on a node. Selector which must match a node's labels for the pod to be scheduled on that node. More info: https://kubernetes.io/docs/concepts/configuration/assign-pod-node/"),
    AGE,
    CONTAINERS,
    IMAGES,
    Column::string("Selector", "A label query over pods that are managed by the daemon set. Must match in order to be controlled. It must match the pod template's labels. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors").wide(),
];

const CRON_JOB_COLUMNS: &[Column] = &[
    NAME,
    Column::string("Schedule", "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron."),
    Column::string("Timezone", "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones. If not specified, this will default to the time zone of the kube-controller-manager process."),
    Column {
        kind: "boolean",
        ..Column::string("Suspend", "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions.  Defaults to false.")
    },
    Column::integer("Active", "A list of pointers to currently running jobs."),
    Column::string("Last Schedule", "Information when was the last time the job was successfully scheduled."),
    AGE,
    CONTAINERS,
    IMAGES,
    Column::string("Selector", "A label query over pods that should match the pod count. Normally, the system sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors").wide(),
];

const LEASE_COLUMNS: &[Column] = &[
    NAME,
    Column::string(
        "Holder",
        "holderIdentity contains the identity of the holder of a current lease.",
    ),
    AGE,
];

const CONFIGMAP_COLUMNS: &[Column] = &[
    NAME,
    Column::string("Data", "Data contains the configuration data."),
    AGE,
];

const SECRET_COLUMNS: &[Column] = &[
    NAME,
    Column::string(
        "Type",
        "Used to facilitate programmatic handling of secret data.",
    ),
    Column::string("Data", "Data contains the secret data."),
    AGE,
];

const SERVICEACCOUNT_COLUMNS: &[Column] = &[
    NAME,
    Column::string(
        "Secrets",
        "Secrets is a list of the secrets in the same namespace.",
    ),
    AGE,
];

const ENDPOINTS_COLUMNS: &[Column] = &[
    NAME,
    Column::string(
        "Endpoints",
        "The set of all endpoints is the union of all subsets.",
    ),
    AGE,
];

const RESOURCEQUOTA_COLUMNS: &[Column] = &[
    NAME,
    AGE,
    Column::string("Request", "Request represents a minimum amount of cpu/memory that a container may consume."),
    Column::string("Limit", "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node."),
];

const LIMITRANGE_COLUMNS: &[Column] = &[
    NAME,
    Column::string("Created At", "CreationTimestamp is a timestamp representing the server time when this object was created."),
];

/// Roles print their creation time rather than an age, as kube-apiserver's printer does.
const ROLE_COLUMNS: &[Column] = &[
    NAME,
    Column {
        name: "Created At",
        kind: "date",
        format: "",
        description: "CreationTimestamp is a timestamp representing the server time when this object was created.",
        priority: 0,
    },
];

const ROLE_BINDING_COLUMNS: &[Column] = &[
    NAME,
    Column::string(
        "Role",
        "Role references the role the binding grants (Kind/name).",
    ),
    AGE,
    Column::string("Users", "Users in the binding").wide(),
    Column::string("Groups", "Groups in the binding").wide(),
    Column::string("ServiceAccounts", "ServiceAccounts in the binding").wide(),
];

const DEFAULT_COLUMNS: &[Column] = &[NAME, AGE];

/// Fills one row's cells, in column order.
type CellsFn = fn(&Value, DateTime<Utc>) -> Vec<Value>;

/// The columns of one resource and how to fill a row's cells.
struct Printer {
    columns: &'static [Column],
    cells: CellsFn,
    /// Pods mark terminal rows with a `Completed` condition.
    pod_conditions: bool,
}

impl Printer {
    fn for_resource(resource: &ResourceInfo) -> Printer {
        let (columns, cells): (&'static [Column], CellsFn) = match (resource.group, resource.plural)
        {
            ("", "pods") => (POD_COLUMNS, pod_cells),
            ("", "nodes") => (NODE_COLUMNS, node_cells),
            ("", "namespaces") => (NAMESPACE_COLUMNS, namespace_cells),
            ("" | "events.k8s.io", "events") => (EVENT_COLUMNS, event_cells),
            ("", "services") => (SERVICE_COLUMNS, service_cells),
            ("", "configmaps") => (CONFIGMAP_COLUMNS, configmap_cells),
            ("", "secrets") => (SECRET_COLUMNS, secret_cells),
            ("", "serviceaccounts") => (SERVICEACCOUNT_COLUMNS, serviceaccount_cells),
            ("", "endpoints") => (ENDPOINTS_COLUMNS, endpoints_cells),
            ("apps", "deployments") => (DEPLOYMENT_COLUMNS, deployment_cells),
            ("apps", "replicasets") => (REPLICASET_COLUMNS, replicaset_cells),
            ("apps", "daemonsets") => (DAEMON_SET_COLUMNS, daemon_set_cells),
            ("apps", "statefulsets") => (STATEFUL_SET_COLUMNS, stateful_set_cells),
            ("apps", "controllerrevisions") => {
                (CONTROLLER_REVISION_COLUMNS, controller_revision_cells)
            }
            ("batch", "jobs") => (JOB_COLUMNS, job_cells),
            ("batch", "cronjobs") => (CRON_JOB_COLUMNS, cron_job_cells),
            ("", "replicationcontrollers") => {
                (REPLICATION_CONTROLLER_COLUMNS, replication_controller_cells)
            }
            ("", "podtemplates") => (POD_TEMPLATE_COLUMNS, pod_template_cells),
            ("autoscaling", "horizontalpodautoscalers") => {
                (autoscaling::HPA_COLUMNS, autoscaling::hpa_cells)
            }
            ("policy", "poddisruptionbudgets") => {
                (POD_DISRUPTION_BUDGET_COLUMNS, pod_disruption_budget_cells)
            }
            ("coordination.k8s.io", "leases") => (LEASE_COLUMNS, lease_cells),
            ("", "resourcequotas") => (RESOURCEQUOTA_COLUMNS, resourcequota_cells),
            ("", "limitranges") => (LIMITRANGE_COLUMNS, limitrange_cells),
            ("networking.k8s.io", "ingresses") => {
                (network::INGRESS_COLUMNS, network::ingress_cells)
            }
            ("networking.k8s.io", "ingressclasses") => {
                (network::INGRESS_CLASS_COLUMNS, network::ingress_class_cells)
            }
            ("", "persistentvolumes") => (volumes::PV_COLUMNS, volumes::pv_cells),
            ("", "persistentvolumeclaims") => (volumes::PVC_COLUMNS, volumes::pvc_cells),
            ("storage.k8s.io", "storageclasses") => {
                (volumes::STORAGE_CLASS_COLUMNS, volumes::storage_class_cells)
            }
            ("storage.k8s.io", "csidrivers") => {
                (volumes::CSI_DRIVER_COLUMNS, volumes::csi_driver_cells)
            }
            ("storage.k8s.io", "csinodes") => (volumes::CSI_NODE_COLUMNS, volumes::csi_node_cells),
            ("storage.k8s.io", "volumeattachments") => (
                volumes::VOLUME_ATTACHMENT_COLUMNS,
                volumes::volume_attachment_cells,
            ),
            ("storage.k8s.io", "csistoragecapacities") => (
                volumes::CSI_STORAGE_CAPACITY_COLUMNS,
                volumes::csi_storage_capacity_cells,
            ),
            ("rbac.authorization.k8s.io", "roles" | "clusterroles") => (ROLE_COLUMNS, role_cells),
            ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => {
                (ROLE_BINDING_COLUMNS, role_binding_cells)
            }
            _ => (DEFAULT_COLUMNS, default_cells),
        };
        Printer {
            columns,
            cells,
            pod_conditions: resource.group.is_empty() && resource.plural == "pods",
        }
    }

    fn row(&self, obj: &Value, include_object: IncludeObject, now: DateTime<Utc>) -> Value {
        let mut row = Map::new();
        row.insert("cells".into(), Value::Array((self.cells)(obj, now)));
        if let Some(conditions) = self
            .pod_conditions
            .then(|| pod_row_conditions(obj))
            .flatten()
        {
            row.insert("conditions".into(), conditions);
        }
        row.insert("object".into(), include_object.render(obj));
        Value::Object(row)
    }
}

/// Terminal pods carry a `Completed` row condition, as the real server marks them.
fn pod_row_conditions(pod: &Value) -> Option<Value> {
    let (reason, message) = match str_at(pod, "/status/phase") {
        "Succeeded" => ("Succeeded", "The pod has completed successfully."),
        "Failed" => ("Failed", "The pod failed."),
        _ => return None,
    };
    Some(json!([{"type": "Completed", "status": "True", "reason": reason, "message": message}]))
}

// ---- JSON access: missing or mistyped fields read as Go's zero values ----

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn int_at(v: &Value, pointer: &str) -> i64 {
    v.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

fn bool_at(v: &Value, pointer: &str) -> bool {
    v.pointer(pointer).and_then(Value::as_bool).unwrap_or(false)
}

fn array_at<'a>(v: &'a Value, pointer: &str) -> &'a [Value] {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn map_len(v: &Value, pointer: &str) -> usize {
    v.pointer(pointer)
        .and_then(Value::as_object)
        .map_or(0, Map::len)
}

fn is_set(v: &Value, pointer: &str) -> bool {
    v.pointer(pointer).is_some_and(|x| !x.is_null())
}

fn time_at(v: &Value, pointer: &str) -> Option<DateTime<Utc>> {
    let s = v.pointer(pointer)?.as_str()?;
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// kubectl's "how long ago", `<unknown>` for a missing timestamp.
fn since(t: Option<DateTime<Utc>>, now: DateTime<Utc>) -> String {
    t.map_or_else(|| "<unknown>".into(), |t| human_duration(now - t))
}

fn name(obj: &Value) -> Value {
    str_at(obj, "/metadata/name").into()
}

fn age(obj: &Value, now: DateTime<Utc>) -> Value {
    since(time_at(obj, "/metadata/creationTimestamp"), now).into()
}

fn none_if_empty(s: &str) -> String {
    if s.is_empty() {
        "<none>".into()
    } else {
        s.into()
    }
}

/// The type of a condition in `conditions` is `True`.
fn condition_true(conditions: &[Value], kind: &str) -> bool {
    conditions
        .iter()
        .find(|c| str_at(c, "/type") == kind)
        .is_some_and(|c| str_at(c, "/status") == "True")
}

/// The first of `pointers` that is set: events.k8s.io/v1 renamed most core/v1 Event fields.
fn first_str<'a>(v: &'a Value, pointers: &[&str]) -> &'a str {
    pointers
        .iter()
        .map(|p| str_at(v, p))
        .find(|s| !s.is_empty())
        .unwrap_or("")
}

fn default_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    vec![name(obj), age(obj, now)]
}

#[cfg(test)]
mod tests;
