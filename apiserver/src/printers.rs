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

use std::collections::BTreeSet;

use chrono::{DateTime, Duration, Utc};
use serde_json::{json, Map, Value};

use api::resources::ResourceInfo;

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

/// kubectl's pod STATUS column.
pub fn pod_status_reason(pod: &Value) -> String {
    PodSummary::of(pod).reason
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
            ("batch", "jobs") => (JOB_COLUMNS, job_cells),
            ("coordination.k8s.io", "leases") => (LEASE_COLUMNS, lease_cells),
            ("", "resourcequotas") => (RESOURCEQUOTA_COLUMNS, resourcequota_cells),
            ("", "limitranges") => (LIMITRANGE_COLUMNS, limitrange_cells),
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
        let object = match include_object {
            IncludeObject::None => Value::Null,
            IncludeObject::Metadata => json!({
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
            }),
            IncludeObject::Object => obj.clone(),
        };
        row.insert("object".into(), object);
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

// ---- pods ----

/// The READY, STATUS and RESTARTS of a pod, worked out together as kubectl's printPod does.
struct PodSummary {
    ready: usize,
    total: usize,
    reason: String,
    restarts: i64,
    last_restart: Option<DateTime<Utc>>,
}

impl PodSummary {
    fn of(pod: &Value) -> PodSummary {
        let phase = str_at(pod, "/status/phase");
        let mut reason = match str_at(pod, "/status/reason") {
            "" => phase.to_string(),
            r => r.to_string(),
        };
        let conditions = array_at(pod, "/status/conditions");
        if conditions.iter().any(|c| {
            str_at(c, "/type") == "PodScheduled" && str_at(c, "/reason") == "SchedulingGated"
        }) {
            reason = "SchedulingGated".into();
        }

        let init_specs = array_at(pod, "/spec/initContainers");
        // Sidecars (init containers with restartPolicy Always) count as pod containers.
        let is_sidecar = |name: &str| {
            init_specs
                .iter()
                .any(|c| str_at(c, "/name") == name && str_at(c, "/restartPolicy") == "Always")
        };
        let mut total = array_at(pod, "/spec/containers").len();
        total += init_specs
            .iter()
            .filter(|c| str_at(c, "/restartPolicy") == "Always")
            .count();
        let mut ready = 0;
        let mut restarts = 0;
        let mut last_restart = None;
        let mut sidecar_restarts = 0;
        let mut sidecar_last_restart = None;

        let mut initializing = false;
        for (i, status) in array_at(pod, "/status/initContainerStatuses")
            .iter()
            .enumerate()
        {
            let sidecar = is_sidecar(str_at(status, "/name"));
            let finished = time_at(status, "/lastState/terminated/finishedAt");
            restarts += int_at(status, "/restartCount");
            last_restart = last_restart.max(finished);
            if sidecar {
                sidecar_restarts += int_at(status, "/restartCount");
                sidecar_last_restart = sidecar_last_restart.max(finished);
            }
            let terminated = is_set(status, "/state/terminated");
            let waiting_reason = str_at(status, "/state/waiting/reason");
            if terminated && int_at(status, "/state/terminated/exitCode") == 0 {
                continue;
            }
            if sidecar && bool_at(status, "/started") {
                if bool_at(status, "/ready") {
                    ready += 1;
                }
                continue;
            }
            reason = if terminated {
                match str_at(status, "/state/terminated/reason") {
                    "" => match int_at(status, "/state/terminated/signal") {
                        0 => format!(
                            "Init:ExitCode:{}",
                            int_at(status, "/state/terminated/exitCode")
                        ),
                        signal => format!("Init:Signal:{signal}"),
                    },
                    r => format!("Init:{r}"),
                }
            } else if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" {
                format!("Init:{waiting_reason}")
            } else {
                format!("Init:{i}/{}", init_specs.len())
            };
            initializing = true;
            break;
        }

        if !initializing || condition_true(conditions, "Initialized") {
            restarts = sidecar_restarts;
            last_restart = sidecar_last_restart;
            let mut has_running = false;
            for status in array_at(pod, "/status/containerStatuses").iter().rev() {
                restarts += int_at(status, "/restartCount");
                last_restart =
                    last_restart.max(time_at(status, "/lastState/terminated/finishedAt"));
                let waiting_reason = str_at(status, "/state/waiting/reason");
                let terminated = is_set(status, "/state/terminated");
                let terminated_reason = str_at(status, "/state/terminated/reason");
                if !waiting_reason.is_empty() {
                    reason = waiting_reason.into();
                } else if terminated && !terminated_reason.is_empty() {
                    reason = terminated_reason.into();
                } else if terminated {
                    reason = match int_at(status, "/state/terminated/signal") {
                        0 => format!("ExitCode:{}", int_at(status, "/state/terminated/exitCode")),
                        signal => format!("Signal:{signal}"),
                    };
                } else if bool_at(status, "/ready") && is_set(status, "/state/running") {
                    has_running = true;
                    ready += 1;
                }
            }
            // A container that completed while another still runs leaves the pod running.
            if reason == "Completed" && has_running {
                reason = if condition_true(conditions, "Ready") {
                    "Running"
                } else {
                    "NotReady"
                }
                .into();
            }
        }

        if is_set(pod, "/metadata/deletionTimestamp") {
            if str_at(pod, "/status/reason") == "NodeLost" {
                reason = "Unknown".into();
            } else if phase != "Succeeded" && phase != "Failed" {
                reason = "Terminating".into();
            }
        }
        PodSummary {
            ready,
            total,
            reason,
            restarts,
            last_restart,
        }
    }

    fn restarts_cell(&self, now: DateTime<Utc>) -> String {
        match self.last_restart {
            Some(t) if self.restarts != 0 => {
                format!("{} ({} ago)", self.restarts, human_duration(now - t))
            }
            _ => self.restarts.to_string(),
        }
    }
}

fn pod_cells(pod: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let summary = PodSummary::of(pod);
    let mut ip = array_at(pod, "/status/podIPs")
        .first()
        .map_or("", |p| str_at(p, "/ip"));
    if ip.is_empty() {
        ip = str_at(pod, "/status/podIP");
    }
    let gates = array_at(pod, "/spec/readinessGates");
    let readiness_gates = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let conditions = array_at(pod, "/status/conditions");
        let passed = gates
            .iter()
            .filter(|g| condition_true(conditions, str_at(g, "/conditionType")))
            .count();
        format!("{passed}/{}", gates.len())
    };
    vec![
        name(pod),
        format!("{}/{}", summary.ready, summary.total).into(),
        summary.reason.clone().into(),
        summary.restarts_cell(now).into(),
        age(pod, now),
        none_if_empty(ip).into(),
        none_if_empty(str_at(pod, "/spec/nodeName")).into(),
        none_if_empty(str_at(pod, "/status/nominatedNodeName")).into(),
        readiness_gates.into(),
    ]
}

// ---- nodes and namespaces ----

fn node_cells(node: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let conditions = array_at(node, "/status/conditions");
    let mut status = match conditions
        .iter()
        .rev()
        .find(|c| str_at(c, "/type") == "Ready")
    {
        Some(c) if str_at(c, "/status") == "True" => vec!["Ready"],
        Some(_) => vec!["NotReady"],
        None => vec!["Unknown"],
    };
    if bool_at(node, "/spec/unschedulable") {
        status.push("SchedulingDisabled");
    }
    let address = |kind: &str| {
        array_at(node, "/status/addresses")
            .iter()
            .find(|a| str_at(a, "/type") == kind)
            .map_or("<none>", |a| str_at(a, "/address"))
            .to_string()
    };
    let info = |field: &str| match str_at(node, &format!("/status/nodeInfo/{field}")) {
        "" => "<unknown>".to_string(),
        v => v.to_string(),
    };
    vec![
        name(node),
        status.join(",").into(),
        none_if_empty(&node_roles(node).join(",")).into(),
        age(node, now),
        str_at(node, "/status/nodeInfo/kubeletVersion").into(),
        address("InternalIP").into(),
        address("ExternalIP").into(),
        info("osImage").into(),
        info("kernelVersion").into(),
        info("containerRuntimeVersion").into(),
    ]
}

/// Roles from `node-role.kubernetes.io/<role>` label keys and the `kubernetes.io/role` value.
fn node_roles(node: &Value) -> Vec<String> {
    let mut roles = BTreeSet::new();
    if let Some(labels) = node.pointer("/metadata/labels").and_then(Value::as_object) {
        for (key, value) in labels {
            let value = value.as_str().unwrap_or("");
            if let Some(role) = key.strip_prefix("node-role.kubernetes.io/") {
                if !role.is_empty() {
                    roles.insert(role.to_string());
                }
            } else if key == "kubernetes.io/role" && !value.is_empty() {
                roles.insert(value.to_string());
            }
        }
    }
    roles.into_iter().collect()
}

fn namespace_cells(ns: &Value, now: DateTime<Utc>) -> Vec<Value> {
    vec![name(ns), str_at(ns, "/status/phase").into(), age(ns, now)]
}

// ---- events (core/v1 and events.k8s.io/v1 field names) ----

/// The first of `pointers` that is set: events.k8s.io/v1 renamed most core/v1 Event fields.
fn first_str<'a>(v: &'a Value, pointers: &[&str]) -> &'a str {
    pointers
        .iter()
        .map(|p| str_at(v, p))
        .find(|s| !s.is_empty())
        .unwrap_or("")
}

fn first_time(v: &Value, pointers: &[&str]) -> Option<DateTime<Utc>> {
    pointers.iter().find_map(|p| time_at(v, p))
}

fn event_cells(event: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let first_seen = since(
        first_time(event, &["/firstTimestamp", "/deprecatedFirstTimestamp"])
            .or_else(|| time_at(event, "/eventTime")),
        now,
    );
    let mut last_seen = match first_time(event, &["/lastTimestamp", "/deprecatedLastTimestamp"]) {
        Some(t) => since(Some(t), now),
        None => first_seen.clone(),
    };
    let mut count = event
        .get("count")
        .or_else(|| event.get("deprecatedCount"))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if is_set(event, "/series") {
        last_seen = since(time_at(event, "/series/lastObservedTime"), now);
        count = int_at(event, "/series/count");
    } else if count == 0 {
        // Singleton events of the new API carry no count.
        count = 1;
    }
    let regarding = event
        .get("involvedObject")
        .or_else(|| event.get("regarding"))
        .unwrap_or(&Value::Null);
    let kind = str_at(regarding, "/kind").to_lowercase();
    let target = match str_at(regarding, "/name") {
        "" => kind,
        name => format!("{kind}/{name}"),
    };
    let component = first_str(
        event,
        &[
            "/source/component",
            "/deprecatedSource/component",
            "/reportingController",
            "/reportingComponent",
        ],
    );
    let instance = first_str(
        event,
        &[
            "/source/host",
            "/deprecatedSource/host",
            "/reportingInstance",
        ],
    );
    let source = if instance.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {instance}")
    };
    vec![
        last_seen.into(),
        str_at(event, "/type").into(),
        str_at(event, "/reason").into(),
        target.into(),
        str_at(regarding, "/fieldPath").into(),
        source.into(),
        first_str(event, &["/message", "/note"]).trim().into(),
        first_seen.into(),
        count.into(),
        name(event),
    ]
}

// ---- workloads ----

/// Container names and images of a pod template, each comma-joined.
fn container_cells(obj: &Value) -> (Value, Value) {
    let containers = array_at(obj, "/spec/template/spec/containers");
    let names: Vec<&str> = containers.iter().map(|c| str_at(c, "/name")).collect();
    let images: Vec<&str> = containers.iter().map(|c| str_at(c, "/image")).collect();
    (names.join(",").into(), images.join(",").into())
}

/// A `metav1.LabelSelector` in `labels.Selector` string form (requirements sorted by key);
/// `None` when the selector is invalid.
fn label_selector_string(selector: &Value) -> Option<String> {
    let mut requirements: Vec<(String, String)> = Vec::new();
    if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
        for (key, value) in labels {
            requirements.push((
                key.clone(),
                format!("{key}={}", value.as_str().unwrap_or("")),
            ));
        }
    }
    for expr in array_at(selector, "/matchExpressions") {
        let key = str_at(expr, "/key");
        let mut values: Vec<&str> = array_at(expr, "/values")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        values.sort_unstable();
        values.dedup();
        let text = match str_at(expr, "/operator") {
            "In" if !values.is_empty() => format!("{key} in ({})", values.join(",")),
            "NotIn" if !values.is_empty() => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            _ => return None,
        };
        requirements.push((key.to_string(), text));
    }
    requirements.sort_by(|a, b| a.0.cmp(&b.0));
    Some(
        requirements
            .into_iter()
            .map(|(_, text)| text)
            .collect::<Vec<_>>()
            .join(","),
    )
}

/// `metav1.FormatLabelSelector`: `<none>` for an empty selector, `<error>` for an invalid one.
fn format_label_selector(obj: &Value) -> String {
    match obj.pointer("/spec/selector").map(label_selector_string) {
        Some(None) => "<error>".into(),
        Some(Some(s)) if !s.is_empty() => s,
        _ => "<none>".into(),
    }
}

/// `spec.replicas`, defaulting to 1 as the API does.
fn desired_replicas(obj: &Value) -> i64 {
    obj.pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
}

fn deployment_cells(deploy: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let (containers, images) = container_cells(deploy);
    let selector = match deploy.pointer("/spec/selector").map(label_selector_string) {
        Some(Some(s)) => s,
        Some(None) => "<invalid>".into(),
        None => String::new(),
    };
    vec![
        name(deploy),
        format!(
            "{}/{}",
            int_at(deploy, "/status/readyReplicas"),
            desired_replicas(deploy)
        )
        .into(),
        int_at(deploy, "/status/updatedReplicas").into(),
        int_at(deploy, "/status/availableReplicas").into(),
        age(deploy, now),
        containers,
        images,
        selector.into(),
    ]
}

fn replicaset_cells(rs: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let (containers, images) = container_cells(rs);
    vec![
        name(rs),
        desired_replicas(rs).into(),
        int_at(rs, "/status/replicas").into(),
        int_at(rs, "/status/readyReplicas").into(),
        age(rs, now),
        containers,
        images,
        format_label_selector(rs).into(),
    ]
}

fn job_cells(job: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let succeeded = int_at(job, "/status/succeeded");
    let completions = match job.pointer("/spec/completions").and_then(Value::as_i64) {
        Some(completions) => format!("{succeeded}/{completions}"),
        None => match int_at(job, "/spec/parallelism") {
            p if p > 1 => format!("{succeeded}/1 of {p}"),
            _ => format!("{succeeded}/1"),
        },
    };
    let duration = match (
        time_at(job, "/status/startTime"),
        time_at(job, "/status/completionTime"),
    ) {
        (None, _) => String::new(),
        (Some(start), None) => human_duration(now - start),
        (Some(start), Some(end)) => human_duration(end - start),
    };
    let conditions = array_at(job, "/status/conditions");
    let status = if condition_true(conditions, "Complete") {
        "Complete"
    } else if condition_true(conditions, "Failed") {
        "Failed"
    } else if is_set(job, "/metadata/deletionTimestamp") {
        "Terminating"
    } else if condition_true(conditions, "Suspended") {
        "Suspended"
    } else if condition_true(conditions, "FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    };
    let (containers, images) = container_cells(job);
    vec![
        name(job),
        status.into(),
        completions.into(),
        duration.into(),
        age(job, now),
        containers,
        images,
        format_label_selector(job).into(),
    ]
}

// ---- services and endpoints ----

fn service_cells(svc: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let svc_type = match str_at(svc, "/spec/type") {
        "" => "ClusterIP",
        t => t,
    };
    let mut cluster_ip = array_at(svc, "/spec/clusterIPs")
        .first()
        .and_then(Value::as_str)
        .unwrap_or("");
    if cluster_ip.is_empty() {
        cluster_ip = str_at(svc, "/spec/clusterIP");
    }
    let ports: Vec<String> = array_at(svc, "/spec/ports")
        .iter()
        .map(|p| {
            let protocol = match str_at(p, "/protocol") {
                "" => "TCP",
                proto => proto,
            };
            match int_at(p, "/nodePort") {
                node_port if node_port > 0 => {
                    format!("{}:{node_port}/{protocol}", int_at(p, "/port"))
                }
                _ => format!("{}/{protocol}", int_at(p, "/port")),
            }
        })
        .collect();
    let selector = svc
        .pointer("/spec/selector")
        .and_then(Value::as_object)
        .map_or(String::new(), |labels| {
            // serde_json maps iterate in key order, which is the order labels.FormatLabels uses.
            labels
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(",")
        });
    vec![
        name(svc),
        svc_type.into(),
        none_if_empty(cluster_ip).into(),
        service_external_ip(svc, svc_type).into(),
        none_if_empty(&ports.join(",")).into(),
        age(svc, now),
        none_if_empty(&selector).into(),
    ]
}

fn service_external_ip(svc: &Value, svc_type: &str) -> String {
    let external_ips: Vec<&str> = array_at(svc, "/spec/externalIPs")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    match svc_type {
        "ClusterIP" | "NodePort" => none_if_empty(&external_ips.join(",")),
        "LoadBalancer" => {
            let ingress: BTreeSet<&str> = array_at(svc, "/status/loadBalancer/ingress")
                .iter()
                .map(|i| first_str(i, &["/ip", "/hostname"]))
                .filter(|s| !s.is_empty())
                .collect();
            let mut all: Vec<&str> = ingress.into_iter().collect();
            all.extend(external_ips);
            if all.is_empty() {
                "<pending>".into()
            } else {
                all.join(",")
            }
        }
        "ExternalName" => str_at(svc, "/spec/externalName").into(),
        _ => "<unknown>".into(),
    }
}

/// Up to three `ip:port` endpoints, then "+ N more...".
fn endpoints_cells(ep: &Value, now: DateTime<Utc>) -> Vec<Value> {
    const MAX: usize = 3;
    let subsets = array_at(ep, "/subsets");
    let text = if subsets.is_empty() {
        "<none>".to_string()
    } else {
        let mut list: Vec<String> = Vec::new();
        let mut count = 0;
        for subset in subsets {
            let addresses: Vec<&str> = array_at(subset, "/addresses")
                .iter()
                .map(|a| str_at(a, "/ip"))
                .collect();
            let ports = array_at(subset, "/ports");
            if ports.is_empty() {
                // Headless services may have no ports.
                count += addresses.len();
                list.extend(
                    addresses
                        .iter()
                        .take(MAX.saturating_sub(list.len()))
                        .map(|ip| ip.to_string()),
                );
                continue;
            }
            for port in ports {
                count += addresses.len();
                for ip in &addresses {
                    if list.len() == MAX {
                        break;
                    }
                    let port = int_at(port, "/port");
                    list.push(if ip.contains(':') {
                        format!("[{ip}]:{port}")
                    } else {
                        format!("{ip}:{port}")
                    });
                }
            }
        }
        let joined = list.join(",");
        if count > MAX {
            format!("{joined} + {} more...", count - MAX)
        } else {
            joined
        }
    };
    vec![name(ep), text.into(), age(ep, now)]
}

// ---- the rest ----

fn configmap_cells(cm: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let data = map_len(cm, "/data") + map_len(cm, "/binaryData");
    vec![name(cm), data.into(), age(cm, now)]
}

fn secret_cells(secret: &Value, now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name(secret),
        str_at(secret, "/type").into(),
        map_len(secret, "/data").into(),
        age(secret, now),
    ]
}

fn serviceaccount_cells(sa: &Value, now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name(sa),
        array_at(sa, "/secrets").len().into(),
        age(sa, now),
    ]
}

fn lease_cells(lease: &Value, now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name(lease),
        str_at(lease, "/spec/holderIdentity").into(),
        age(lease, now),
    ]
}

/// kubectl's quota columns: `name: used/hard` for each hard resource, sorted, limits apart.
fn resourcequota_cells(quota: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let mut request = Vec::new();
    let mut limit = Vec::new();
    if let Some(hard) = quota.pointer("/status/hard").and_then(Value::as_object) {
        let mut names: Vec<&String> = hard.keys().collect();
        names.sort();
        for name in names {
            let text = |v: Option<&Value>| match v {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => "0".to_string(),
            };
            let used = text(quota.pointer("/status/used").and_then(|u| u.get(name)));
            let cell = format!("{name}: {used}/{}", text(hard.get(name)));
            if name.starts_with("limits.") {
                limit.push(cell);
            } else {
                request.push(cell);
            }
        }
    }
    vec![
        name(quota),
        age(quota, now),
        request.join(", ").into(),
        limit.join(", ").into(),
    ]
}

fn limitrange_cells(range: &Value, _now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name(range),
        str_at(range, "/metadata/creationTimestamp").into(),
    ]
}

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

fn role_cells(role: &Value, _now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name(role),
        str_at(role, "/metadata/creationTimestamp").into(),
    ]
}

fn role_binding_cells(binding: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let subjects = binding
        .get("subjects")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let of_kind = |kind: &str| -> String {
        subjects
            .iter()
            .filter(|s| s.get("kind").and_then(Value::as_str) == Some(kind))
            .map(|s| {
                let name = str_at(s, "/name");
                match (kind, s.get("namespace").and_then(Value::as_str)) {
                    ("ServiceAccount", Some(ns)) => format!("{ns}/{name}"),
                    _ => name.to_string(),
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    vec![
        name(binding),
        format!(
            "{}/{}",
            str_at(binding, "/roleRef/kind"),
            str_at(binding, "/roleRef/name")
        )
        .into(),
        age(binding, now),
        of_kind("User").into(),
        of_kind("Group").into(),
        of_kind("ServiceAccount").into(),
    ]
}

fn default_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    vec![name(obj), age(obj, now)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::resources::{find, pods};

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2025-06-01T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    fn pod(status: Value) -> Value {
        json!({
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {"name": "web", "namespace": "default", "resourceVersion": "7",
                         "creationTimestamp": "2025-06-01T11:55:00Z", "labels": {"run": "web"}},
            "spec": {"containers": [{"name": "app", "image": "nginx"}]},
            "status": status,
        })
    }

    fn waiting(reason: &str) -> Value {
        json!({"name": "app", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": reason}}})
    }

    fn running(ready: bool) -> Value {
        json!({"name": "app", "ready": ready, "restartCount": 0,
               "state": {"running": {"startedAt": "2025-06-01T11:56:00Z"}}})
    }

    fn terminated(reason: &str, exit_code: i64) -> Value {
        json!({"name": "app", "ready": false, "restartCount": 0,
               "state": {"terminated": {"reason": reason, "exitCode": exit_code}}})
    }

    #[test]
    fn pod_status_reasons() {
        let cases = [
            (json!({"phase": "Pending"}), "Pending"),
            (
                json!({"phase": "Pending", "containerStatuses": [waiting("ContainerCreating")]}),
                "ContainerCreating",
            ),
            (
                json!({"phase": "Running", "containerStatuses": [running(true)]}),
                "Running",
            ),
            (
                json!({"phase": "Succeeded", "containerStatuses": [terminated("Completed", 0)]}),
                "Completed",
            ),
            (
                json!({"phase": "Failed", "containerStatuses": [terminated("Error", 1)]}),
                "Error",
            ),
            (
                json!({"phase": "Failed", "containerStatuses": [terminated("", 137)]}),
                "ExitCode:137",
            ),
            (
                json!({"phase": "Running", "containerStatuses": [waiting("CrashLoopBackOff")]}),
                "CrashLoopBackOff",
            ),
            (
                json!({"phase": "Pending", "containerStatuses": [waiting("ImagePullBackOff")]}),
                "ImagePullBackOff",
            ),
            (json!({"phase": "Failed", "reason": "Evicted"}), "Evicted"),
        ];
        for (status, want) in cases {
            assert_eq!(pod_status_reason(&pod(status.clone())), want, "{status}");
        }
    }

    #[test]
    fn init_container_reasons() {
        let mut p = pod(json!({
            "phase": "Pending",
            "initContainerStatuses": [
                {"name": "init-a", "ready": false, "restartCount": 0, "state": {"running": {}}},
                {"name": "init-b", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "PodInitializing"}}},
            ],
            "containerStatuses": [waiting("PodInitializing")],
        }));
        p["spec"]["initContainers"] =
            json!([{"name": "init-a", "image": "busybox"}, {"name": "init-b", "image": "busybox"}]);
        assert_eq!(pod_status_reason(&p), "Init:0/2");

        p["status"]["initContainerStatuses"][0]["state"] =
            json!({"terminated": {"exitCode": 0, "reason": "Completed"}});
        assert_eq!(pod_status_reason(&p), "Init:1/2");

        p["status"]["initContainerStatuses"][1]["state"] =
            json!({"waiting": {"reason": "CrashLoopBackOff"}});
        assert_eq!(pod_status_reason(&p), "Init:CrashLoopBackOff");

        p["status"]["initContainerStatuses"][1]["state"] =
            json!({"terminated": {"exitCode": 2, "reason": "Error"}});
        assert_eq!(pod_status_reason(&p), "Init:Error");

        p["status"]["initContainerStatuses"][1]["state"] = json!({"terminated": {"exitCode": 3}});
        assert_eq!(pod_status_reason(&p), "Init:ExitCode:3");

        p["status"]["initContainerStatuses"][1]["state"] =
            json!({"terminated": {"exitCode": 0, "reason": "Completed"}});
        assert_eq!(pod_status_reason(&p), "PodInitializing");
    }

    #[test]
    fn completed_with_a_running_container_and_deletion() {
        let mut p = pod(json!({
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "False"}],
            "containerStatuses": [terminated("Completed", 0), running(true)],
        }));
        assert_eq!(pod_status_reason(&p), "NotReady");
        p["status"]["conditions"][0]["status"] = json!("True");
        assert_eq!(pod_status_reason(&p), "Running");

        p["metadata"]["deletionTimestamp"] = json!("2025-06-01T11:59:00Z");
        assert_eq!(pod_status_reason(&p), "Terminating");
        p["status"]["reason"] = json!("NodeLost");
        assert_eq!(pod_status_reason(&p), "Unknown");

        let mut done =
            pod(json!({"phase": "Succeeded", "containerStatuses": [terminated("Completed", 0)]}));
        done["metadata"]["deletionTimestamp"] = json!("2025-06-01T11:59:00Z");
        assert_eq!(pod_status_reason(&done), "Completed");
    }

    #[test]
    fn restarts_show_when_the_last_one_was() {
        let mut status = running(true);
        status["restartCount"] = json!(3);
        status["lastState"] = json!({"terminated": {"exitCode": 1, "reason": "Error",
                                                    "finishedAt": "2025-06-01T11:55:00Z"}});
        let p = pod(json!({"phase": "Running", "containerStatuses": [status]}));
        let t = table(pods(), &[p], IncludeObject::Metadata, now(), "9", None);
        let cells = &t["rows"][0]["cells"];
        assert_eq!(cells[1], "1/1");
        assert_eq!(cells[2], "Running");
        assert_eq!(cells[3], "3 (5m ago)");
        assert_eq!(cells[4], "5m");

        let fresh = pod(json!({"phase": "Running", "containerStatuses": [running(false)]}));
        let t = table(pods(), &[fresh], IncludeObject::Metadata, now(), "9", None);
        assert_eq!(t["rows"][0]["cells"][1], "0/1");
        assert_eq!(t["rows"][0]["cells"][3], "0");
    }

    #[test]
    fn human_durations() {
        let cases = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (59, "59s"),
            (119, "119s"),
            (123, "2m3s"),
            (300, "5m"),
            (600, "10m"),
            (179 * 60 + 59, "179m"),
            (3 * 3600 + 4 * 60 + 5, "3h4m"),
            (5 * 3600, "5h"),
            (47 * 3600, "47h"),
            (2 * 86400 + 3 * 3600, "2d3h"),
            (3 * 86400, "3d"),
            (100 * 86400, "100d"),
            (729 * 86400, "729d"),
            ((3 * 365 + 45) * 86400, "3y45d"),
            (4 * 365 * 86400, "4y"),
            (10 * 365 * 86400 + 7 * 86400, "10y"),
        ];
        for (seconds, want) in cases {
            assert_eq!(
                human_duration(Duration::seconds(seconds)),
                want,
                "{seconds}s"
            );
        }
        assert_eq!(human_duration(Duration::milliseconds(-1500)), "0s");
    }

    #[test]
    fn pod_table_shape() {
        let mut p = pod(
            json!({"phase": "Running", "podIPs": [{"ip": "10.0.0.5"}], "containerStatuses": [running(true)]}),
        );
        p["spec"]["nodeName"] = json!("node-1");
        let t = table(
            pods(),
            std::slice::from_ref(&p),
            IncludeObject::Metadata,
            now(),
            "42",
            Some("next"),
        );
        assert_eq!(t["kind"], "Table");
        assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(
            t["metadata"],
            json!({"resourceVersion": "42", "continue": "next"})
        );
        let columns = t["columnDefinitions"].as_array().unwrap();
        let names: Vec<&str> = columns
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "Name",
                "Ready",
                "Status",
                "Restarts",
                "Age",
                "IP",
                "Node",
                "Nominated Node",
                "Readiness Gates"
            ]
        );
        let priorities: Vec<i64> = columns
            .iter()
            .map(|c| c["priority"].as_i64().unwrap())
            .collect();
        assert_eq!(priorities, [0, 0, 0, 0, 0, 1, 1, 1, 1]);
        assert_eq!(columns[0]["format"], "name");
        assert_eq!(columns[0]["type"], "string");

        let row = &t["rows"][0];
        assert_eq!(
            row["cells"],
            json!(["web", "1/1", "Running", "0", "5m", "10.0.0.5", "node-1", "<none>", "<none>"])
        );
        assert_eq!(row["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(row["object"]["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(row["object"]["metadata"], p["metadata"]);
        assert!(row.get("conditions").is_none());

        let full = table(
            pods(),
            std::slice::from_ref(&p),
            IncludeObject::parse("Object"),
            now(),
            "42",
            None,
        );
        assert_eq!(full["rows"][0]["object"], p);
        assert!(full["metadata"].get("continue").is_none());
        let bare = table(
            pods(),
            &[p],
            IncludeObject::parse("None"),
            now(),
            "42",
            None,
        );
        assert!(bare["rows"][0]["object"].is_null());
        assert_eq!(IncludeObject::parse(""), IncludeObject::Metadata);
    }

    #[test]
    fn node_status_and_roles() {
        let node = json!({
            "kind": "Node",
            "metadata": {"name": "n1", "creationTimestamp": "2025-05-30T12:00:00Z",
                         "labels": {"node-role.kubernetes.io/control-plane": "", "kubernetes.io/role": "worker"}},
            "spec": {"unschedulable": true},
            "status": {
                "conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "True"}],
                "addresses": [{"type": "InternalIP", "address": "192.168.1.10"}, {"type": "Hostname", "address": "n1"}],
                "nodeInfo": {"kubeletVersion": "v1.37.0-kemu", "osImage": "kemu", "kernelVersion": "6.1",
                             "containerRuntimeVersion": "kemu://0.1"},
            },
        });
        let nodes = find("", "v1", "nodes").unwrap();
        let t = table(
            nodes,
            std::slice::from_ref(&node),
            IncludeObject::Metadata,
            now(),
            "1",
            None,
        );
        assert_eq!(
            t["rows"][0]["cells"],
            json!([
                "n1",
                "Ready,SchedulingDisabled",
                "control-plane,worker",
                "2d",
                "v1.37.0-kemu",
                "192.168.1.10",
                "<none>",
                "kemu",
                "6.1",
                "kemu://0.1"
            ])
        );
        let mut not_ready = node.clone();
        not_ready["spec"] = json!({});
        not_ready["metadata"]["labels"] = json!({});
        not_ready["status"]["conditions"][1]["status"] = json!("Unknown");
        let t = table(
            nodes,
            &[not_ready.clone()],
            IncludeObject::Metadata,
            now(),
            "1",
            None,
        );
        assert_eq!(t["rows"][0]["cells"][1], "NotReady");
        assert_eq!(t["rows"][0]["cells"][2], "<none>");
        not_ready["status"]["conditions"] = json!([]);
        let t = table(
            nodes,
            &[not_ready],
            IncludeObject::Metadata,
            now(),
            "1",
            None,
        );
        assert_eq!(t["rows"][0]["cells"][1], "Unknown");
    }

    #[test]
    fn events_in_both_api_groups() {
        let core = json!({
            "kind": "Event",
            "metadata": {"name": "web.1", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "nginx", "fieldPath": "spec.containers{app}"},
            "reason": "Pulled", "type": "Normal", "message": "Pulled image \"nginx\"\n",
            "firstTimestamp": "2025-06-01T11:50:00Z", "lastTimestamp": "2025-06-01T11:58:00Z", "count": 2,
            "source": {"component": "kubelet", "host": "n1"},
        });
        let t = table(
            find("", "v1", "events").unwrap(),
            &[core],
            IncludeObject::Metadata,
            now(),
            "1",
            None,
        );
        assert_eq!(
            t["rows"][0]["cells"],
            json!([
                "2m",
                "Normal",
                "Pulled",
                "pod/nginx",
                "spec.containers{app}",
                "kubelet, n1",
                "Pulled image \"nginx\"",
                "10m",
                2,
                "web.1"
            ])
        );
        let new = json!({
            "kind": "Event",
            "metadata": {"name": "web.2", "namespace": "default"},
            "regarding": {"kind": "Pod", "name": "nginx"},
            "reason": "Scheduled", "type": "Normal", "note": "Successfully assigned default/nginx to n1",
            "eventTime": "2025-06-01T11:59:30.000000Z", "reportingController": "default-scheduler",
        });
        let t = table(
            find("events.k8s.io", "v1", "events").unwrap(),
            &[new],
            IncludeObject::Metadata,
            now(),
            "1",
            None,
        );
        let cells = &t["rows"][0]["cells"];
        assert_eq!(cells[0], "30s");
        assert_eq!(cells[3], "pod/nginx");
        assert_eq!(cells[5], "default-scheduler");
        assert_eq!(cells[6], "Successfully assigned default/nginx to n1");
        assert_eq!(cells[8], 1);
    }

    #[test]
    fn workload_and_service_rows() {
        let deploy = json!({
            "metadata": {"name": "web", "creationTimestamp": "2025-06-01T11:00:00Z"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"},
                     "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}]},
                     "template": {"spec": {"containers": [{"name": "app", "image": "nginx"}, {"name": "log", "image": "busybox"}]}}},
            "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2},
        });
        let t = table(
            find("apps", "v1", "deployments").unwrap(),
            &[deploy],
            IncludeObject::None,
            now(),
            "1",
            None,
        );
        assert_eq!(
            t["rows"][0]["cells"],
            json!([
                "web",
                "2/3",
                3,
                2,
                "60m",
                "app,log",
                "nginx,busybox",
                "app=web,tier in (a,b)"
            ])
        );

        let job = json!({
            "metadata": {"name": "pi", "creationTimestamp": "2025-06-01T11:00:00Z"},
            "spec": {"completions": 1, "template": {"spec": {"containers": [{"name": "pi", "image": "perl"}]}}},
            "status": {"succeeded": 1, "startTime": "2025-06-01T11:00:00Z", "completionTime": "2025-06-01T11:00:42Z",
                       "conditions": [{"type": "Complete", "status": "True"}]},
        });
        let t = table(
            find("batch", "v1", "jobs").unwrap(),
            &[job],
            IncludeObject::None,
            now(),
            "1",
            None,
        );
        assert_eq!(
            t["rows"][0]["cells"],
            json!(["pi", "Complete", "1/1", "42s", "60m", "pi", "perl", "<none>"])
        );

        let svc = json!({
            "metadata": {"name": "web", "creationTimestamp": "2025-06-01T11:00:00Z"},
            "spec": {"type": "NodePort", "clusterIPs": ["10.96.0.10"], "selector": {"app": "web"},
                     "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]},
        });
        let t = table(
            find("", "v1", "services").unwrap(),
            &[svc],
            IncludeObject::None,
            now(),
            "1",
            None,
        );
        assert_eq!(
            t["rows"][0]["cells"],
            json!([
                "web",
                "NodePort",
                "10.96.0.10",
                "<none>",
                "80:30080/TCP,53/UDP",
                "60m",
                "app=web"
            ])
        );

        let ep = json!({
            "metadata": {"name": "web"},
            "subsets": [{"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}, {"ip": "10.0.0.3"}, {"ip": "10.0.0.4"}],
                         "ports": [{"port": 8080}]}],
        });
        let t = table(
            find("", "v1", "endpoints").unwrap(),
            &[ep],
            IncludeObject::None,
            now(),
            "1",
            None,
        );
        assert_eq!(
            t["rows"][0]["cells"][1],
            "10.0.0.1:8080,10.0.0.2:8080,10.0.0.3:8080 + 1 more..."
        );
    }
}
