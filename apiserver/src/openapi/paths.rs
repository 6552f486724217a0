//! The operations of one resource in a group-version's OpenAPI 3 document, as kube-apiserver
//! names and describes them: `listCoreV1NamespacedPod`, `readAppsV1NamespacedDeploymentScale`…,
//! with their parameters, request bodies, answers, `x-kubernetes-action` and the kind's
//! `x-kubernetes-group-version-kind`.

use serde_json::{json, Map, Value};

use api::resources::ResourceInfo;

use super::definitions::{reference, DELETE_OPTIONS, PATCH, STATUS};

/// What a subresource reads and writes.
pub struct Subresource<'a> {
    pub name: &'a str,
    /// The definition its bodies are, and its kind.
    pub definition: &'a str,
    pub gvk: Value,
}

/// The names a resource's operations are spelled with.
struct Names<'a> {
    resource: &'a ResourceInfo,
    gvk: Value,
    definition: &'a str,
    list_definition: Option<&'a str>,
    tag: String,
}

impl Names<'_> {
    /// `readCoreV1NamespacedPodStatus`: verb, group, version, scope, kind, suffix.
    fn operation_id(&self, verb: &str, suffix: &str) -> String {
        // Across all namespaces, an operation names no scope.
        let scope = if self.resource.namespaced && suffix != "ForAllNamespaces" {
            "Namespaced"
        } else {
            ""
        };
        format!(
            "{verb}{}{}{scope}{}{suffix}",
            camel_group(self.resource.group),
            camel(self.resource.version),
            self.resource.kind
        )
    }
}

/// Adds the paths of `resource` (and its subresources) to `paths`.
pub fn add(
    paths: &mut Map<String, Value>,
    resource: &ResourceInfo,
    definition: &str,
    list_definition: Option<&str>,
    subresources: &[Subresource<'_>],
) {
    let r = resource;
    let names = Names {
        resource: r,
        gvk: json!({"group": r.group, "version": r.version, "kind": r.kind}),
        definition,
        list_definition,
        tag: tag(r.group, r.version),
    };
    let can = |verb: &str| r.verbs.contains(&verb);
    let namespace = r.namespaced.then_some("{namespace}");
    let collection = r.collection_path(namespace);
    let item = format!("{collection}/{{name}}");
    let mut scope_parameters = Vec::new();
    if r.namespaced {
        scope_parameters.push(path_parameter(
            "namespace",
            "object name and auth scope, such as for teams and projects",
        ));
    }
    let pretty = query("pretty", "If 'true', then the output is pretty printed.");

    let mut collection_item = Map::new();
    if can("list") {
        collection_item.insert("get".into(), list_operation(&names, ""));
    }
    if can("create") {
        collection_item.insert("post".into(), create_operation(&names, definition, ""));
    }
    if can("deletecollection") {
        collection_item.insert("delete".into(), delete_collection_operation(&names));
    }
    if !collection_item.is_empty() {
        let mut parameters = scope_parameters.clone();
        parameters.push(pretty.clone());
        collection_item.insert("parameters".into(), Value::Array(parameters));
        paths.insert(collection, Value::Object(collection_item));
    }
    if r.namespaced && can("list") {
        paths.insert(
            r.collection_path(None),
            json!({
                "get": list_operation(&names, "ForAllNamespaces"),
                "parameters": [pretty.clone()],
            }),
        );
    }

    let mut item_operations = Map::new();
    if can("get") {
        item_operations.insert(
            "get".into(),
            read_operation(&names, definition, "", "read the specified"),
        );
    }
    if can("update") {
        item_operations.insert(
            "put".into(),
            replace_operation(&names, definition, "", "replace the specified"),
        );
    }
    if can("delete") {
        item_operations.insert("delete".into(), delete_operation(&names));
    }
    if can("patch") {
        item_operations.insert(
            "patch".into(),
            patch_operation(&names, definition, "", "partially update the specified"),
        );
    }
    if !item_operations.is_empty() {
        item_operations.insert("parameters".into(), item_parameters(&scope_parameters, r));
        paths.insert(item.clone(), Value::Object(item_operations));
    }

    for sub in subresources {
        let suffix = camel(sub.name);
        let sub_names = Names {
            resource: r,
            gvk: sub.gvk.clone(),
            definition: sub.definition,
            list_definition: None,
            tag: names.tag.clone(),
        };
        let mut operations = Map::new();
        match sub.name {
            "binding" | "eviction" | "token" => {
                operations.insert(
                    "post".into(),
                    create_operation(&sub_names, sub.definition, &suffix),
                );
            }
            "log" => {
                operations.insert("get".into(), log_operation(&sub_names));
            }
            // A namespace's finalizers are only ever replaced.
            "finalize" => {
                operations.insert(
                    "put".into(),
                    replace_operation(
                        &sub_names,
                        sub.definition,
                        &suffix,
                        "replace finalize of the specified",
                    ),
                );
            }
            "attach" | "exec" | "portforward" => {
                for method in ["get", "post"] {
                    operations.insert(
                        method.into(),
                        connect_operation(&sub_names, method, sub.name),
                    );
                }
            }
            _ => {
                let what = format!("{} of the specified", sub.name);
                operations.insert(
                    "get".into(),
                    read_operation(&sub_names, sub.definition, &suffix, &format!("read {what}")),
                );
                operations.insert(
                    "put".into(),
                    replace_operation(
                        &sub_names,
                        sub.definition,
                        &suffix,
                        &format!("replace {what}"),
                    ),
                );
                operations.insert(
                    "patch".into(),
                    patch_operation(
                        &sub_names,
                        sub.definition,
                        &suffix,
                        &format!("partially update {what}"),
                    ),
                );
            }
        }
        operations.insert("parameters".into(), item_parameters(&scope_parameters, r));
        paths.insert(format!("{item}/{}", sub.name), Value::Object(operations));
    }
}

fn item_parameters(scope_parameters: &[Value], r: &ResourceInfo) -> Value {
    let mut parameters = vec![path_parameter("name", &format!("name of the {}", r.kind))];
    parameters.extend(scope_parameters.iter().cloned());
    parameters.push(query(
        "pretty",
        "If 'true', then the output is pretty printed.",
    ));
    Value::Array(parameters)
}

fn operation(
    names: &Names<'_>,
    verb: &str,
    suffix: &str,
    action: &str,
    description: String,
) -> Map<String, Value> {
    let mut op = Map::new();
    op.insert("tags".into(), json!([names.tag]));
    op.insert("description".into(), json!(description));
    op.insert(
        "operationId".into(),
        json!(names.operation_id(verb, suffix)),
    );
    op.insert("x-kubernetes-action".into(), json!(action));
    op.insert("x-kubernetes-group-version-kind".into(), names.gvk.clone());
    op
}

fn list_operation(names: &Names<'_>, suffix: &str) -> Value {
    let kind = names.resource.kind;
    let mut op = operation(
        names,
        "list",
        suffix,
        "list",
        format!("list or watch objects of kind {kind}"),
    );
    op.insert(
        "parameters".into(),
        Value::Array(vec![
            query_bool("allowWatchBookmarks", "allowWatchBookmarks requests watch events with type \"BOOKMARK\"."),
            query("continue", "The continue option should be set when retrieving more results from the server."),
            query("fieldSelector", "A selector to restrict the list of returned objects by their fields. Defaults to everything."),
            query("labelSelector", "A selector to restrict the list of returned objects by their labels. Defaults to everything."),
            query_integer("limit", "limit is a maximum number of responses to return for a list call."),
            query("resourceVersion", "resourceVersion sets a constraint on what resource versions a request may be served from."),
            query("resourceVersionMatch", "resourceVersionMatch determines how resourceVersion is applied to list calls."),
            query_bool("sendInitialEvents", "`sendInitialEvents=true` may be set together with `watch=true`: the stream then begins with synthetic events of the current state of all objects."),
            query_integer("timeoutSeconds", "Timeout for the list/watch call."),
            query_bool("watch", "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications."),
        ]),
    );
    let list = names
        .list_definition
        .map_or_else(|| reference(names.definition), reference);
    op.insert(
        "responses".into(),
        json!({
            "200": {"description": "OK", "content": content(&list, &[
                "application/json", "application/yaml", "application/vnd.kubernetes.protobuf",
                "application/cbor", "application/json;stream=watch",
                "application/vnd.kubernetes.protobuf;stream=watch", "application/cbor-seq",
            ])},
            "401": {"description": "Unauthorized"},
        }),
    );
    Value::Object(op)
}

fn write_parameters() -> Vec<Value> {
    vec![
        query("dryRun", "When present, indicates that modifications should not be persisted. Valid values are: - All: all dry run stages will be processed"),
        query("fieldManager", "fieldManager is a name associated with the actor or entity that is making these changes."),
        query("fieldValidation", "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields. Valid values are: Ignore, Warn (the default) and Strict."),
    ]
}

fn create_operation(names: &Names<'_>, definition: &str, suffix: &str) -> Value {
    let kind = names.resource.kind;
    let description = match suffix {
        "" => format!("create a {kind}"),
        sub => format!("create {} of a {kind}", sub.to_lowercase()),
    };
    let op = operation(names, "create", suffix, "post", description);
    write_operation(
        op,
        definition,
        &[("200", "OK"), ("201", "Created"), ("202", "Accepted")],
    )
}

/// A POST or PUT: the write parameters, the object as body, and the object back under `codes`.
fn write_operation(mut op: Map<String, Value>, definition: &str, codes: &[(&str, &str)]) -> Value {
    op.insert("parameters".into(), Value::Array(write_parameters()));
    op.insert(
        "requestBody".into(),
        request_body(&reference(definition), &["*/*"]),
    );
    let ok = json!({"content": content(&reference(definition), OBJECT_TYPES)});
    let mut responses = Map::new();
    for (code, description) in codes {
        responses.insert((*code).into(), with_description(&ok, description));
    }
    responses.insert("401".into(), json!({"description": "Unauthorized"}));
    op.insert("responses".into(), Value::Object(responses));
    Value::Object(op)
}

fn read_operation(names: &Names<'_>, definition: &str, suffix: &str, description: &str) -> Value {
    let mut op = operation(
        names,
        "read",
        suffix,
        "get",
        format!("{description} {}", names.resource.kind),
    );
    op.insert(
        "responses".into(),
        json!({
            "200": {"description": "OK", "content": content(&reference(definition), OBJECT_TYPES)},
            "401": {"description": "Unauthorized"},
        }),
    );
    Value::Object(op)
}

fn replace_operation(
    names: &Names<'_>,
    definition: &str,
    suffix: &str,
    description: &str,
) -> Value {
    let op = operation(
        names,
        "replace",
        suffix,
        "put",
        format!("{description} {}", names.resource.kind),
    );
    write_operation(op, definition, &[("200", "OK"), ("201", "Created")])
}

/// The PATCH operation. Its request body lists the strategic merge type for the built-in kinds:
/// that is what tells kubectl's client-side apply to build its patch from these schemas' list
/// metadata.
fn patch_operation(names: &Names<'_>, definition: &str, suffix: &str, description: &str) -> Value {
    let mut op = operation(
        names,
        "patch",
        suffix,
        "patch",
        format!("{description} {}", names.resource.kind),
    );
    let mut parameters = write_parameters();
    parameters.push(query_bool("force", "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people. Force flag must be unset for non-apply patch requests."));
    op.insert("parameters".into(), Value::Array(parameters));
    let mut types = vec![
        "application/apply-patch+yaml",
        "application/apply-patch+cbor",
        "application/json-patch+json",
        "application/merge-patch+json",
    ];
    if !crate::crd::is_custom(names.resource) {
        types.push("application/strategic-merge-patch+json");
    }
    op.insert(
        "requestBody".into(),
        request_body(&reference(PATCH), &types),
    );
    let ok = json!({"content": content(&reference(definition), OBJECT_TYPES)});
    op.insert(
        "responses".into(),
        json!({
            "200": with_description(&ok, "OK"),
            "201": with_description(&ok, "Created"),
            "401": {"description": "Unauthorized"},
        }),
    );
    Value::Object(op)
}

fn delete_parameters() -> Vec<Value> {
    vec![
        query("dryRun", "When present, indicates that modifications should not be persisted. Valid values are: - All: all dry run stages will be processed"),
        query_integer("gracePeriodSeconds", "The duration in seconds before the object should be deleted. Value must be non-negative integer. The value zero indicates delete immediately."),
        query_bool("ignoreStoreReadErrorWithClusterBreakingPotential", "if set to true, it will trigger an unsafe deletion of the resource in case the normal deletion flow fails with a corrupt object error."),
        query_bool("orphanDependents", "Deprecated: please use the PropagationPolicy, this field will be deprecated in 1.7. Should the dependent objects be orphaned."),
        query("propagationPolicy", "Whether and how garbage collection will be performed: 'Orphan', 'Background' or 'Foreground'."),
    ]
}

fn delete_operation(names: &Names<'_>) -> Value {
    let mut op = operation(
        names,
        "delete",
        "",
        "delete",
        format!("delete a {}", names.resource.kind),
    );
    op.insert("parameters".into(), Value::Array(delete_parameters()));
    op.insert(
        "requestBody".into(),
        request_body(&reference(DELETE_OPTIONS), &["*/*"]),
    );
    let ok = json!({"content": content(&reference(STATUS), OBJECT_TYPES)});
    op.insert(
        "responses".into(),
        json!({
            "200": with_description(&ok, "OK"),
            "202": with_description(&ok, "Accepted"),
            "401": {"description": "Unauthorized"},
        }),
    );
    Value::Object(op)
}

fn delete_collection_operation(names: &Names<'_>) -> Value {
    let mut op = operation(
        names,
        "delete",
        "",
        "deletecollection",
        format!("delete collection of {}", names.resource.kind),
    );
    if let Some(Value::String(id)) = op.get_mut("operationId") {
        // `deleteCoreV1CollectionNamespacedPod`: Collection sits before the scope.
        let (group, version) = (
            camel_group(names.resource.group),
            camel(names.resource.version),
        );
        *id = id.replacen(
            &format!("{group}{version}"),
            &format!("{group}{version}Collection"),
            1,
        );
    }
    let mut parameters = delete_parameters();
    parameters.extend([
        query("continue", "The continue option should be set when retrieving more results from the server."),
        query("fieldSelector", "A selector to restrict the list of returned objects by their fields. Defaults to everything."),
        query("labelSelector", "A selector to restrict the list of returned objects by their labels. Defaults to everything."),
        query_integer("limit", "limit is a maximum number of responses to return for a list call."),
        query("resourceVersion", "resourceVersion sets a constraint on what resource versions a request may be served from."),
        query("resourceVersionMatch", "resourceVersionMatch determines how resourceVersion is applied to list calls."),
        query_integer("timeoutSeconds", "Timeout for the list/watch call."),
    ]);
    op.insert("parameters".into(), Value::Array(parameters));
    op.insert(
        "requestBody".into(),
        request_body(&reference(DELETE_OPTIONS), &["*/*"]),
    );
    op.insert(
        "responses".into(),
        json!({
            "200": {"description": "OK", "content": content(&reference(STATUS), OBJECT_TYPES)},
            "401": {"description": "Unauthorized"},
        }),
    );
    Value::Object(op)
}

fn log_operation(names: &Names<'_>) -> Value {
    let mut op = operation(
        names,
        "read",
        "Log",
        "get",
        format!("read log of the specified {}", names.resource.kind),
    );
    op.insert(
        "parameters".into(),
        json!([
            query("container", "The container for which to stream logs. Defaults to only container if there is one container in the pod."),
            query_bool("follow", "Follow the log stream of the pod. Defaults to false."),
            query_bool("insecureSkipTLSVerifyBackend", "insecureSkipTLSVerifyBackend indicates that the apiserver should not confirm the validity of the serving certificate of the backend it is connecting to."),
            query_integer("limitBytes", "If set, the number of bytes to read from the server before terminating the log output."),
            query_bool("previous", "Return previous terminated container logs. Defaults to false."),
            query_integer("sinceSeconds", "A relative time in seconds before the current time from which to show logs."),
            query("stream", "Specify which container log stream to return to the client. Acceptable values are \"All\", \"Stdout\" and \"Stderr\"."),
            query_integer("tailLines", "If set, the number of lines from the end of the logs to show."),
            query_bool("timestamps", "If true, add an RFC3339 or RFC3339Nano timestamp at the beginning of every line of log output."),
        ]),
    );
    op.insert(
        "responses".into(),
        json!({
            "200": {"description": "OK", "content": content(&json!({"type": "string"}), &["text/plain", "application/json", "application/yaml", "application/vnd.kubernetes.protobuf"])},
            "401": {"description": "Unauthorized"},
        }),
    );
    // The log is not the kind's body.
    op.remove("x-kubernetes-group-version-kind");
    Value::Object(op)
}

/// `connect` by GET or POST to `exec`, `attach` or `portforward`: a stream, whose options are
/// query parameters (`PodExecOptions`, `PodAttachOptions`, `PodPortForwardOptions`).
fn connect_operation(names: &Names<'_>, method: &str, sub: &str) -> Value {
    let r = names.resource;
    let scope = if r.namespaced { "Namespaced" } else { "" };
    let (kind, parameters) = match sub {
        "portforward" => (
            "PodPortForwardOptions",
            vec![query_integer(
                "ports",
                "List of ports to forward Required when using WebSockets",
            )],
        ),
        _ => {
            let mut parameters = Vec::new();
            if sub == "exec" {
                parameters.push(query("command", "Command is the remote command to execute. argv array. Not executed within a shell."));
            }
            parameters.extend([
                query("container", &format!("Container in which to {} the command. Defaults to only container if there is only one container in the pod.", if sub == "exec" { "execute" } else { "attach to" })),
                query_bool("stderr", "Redirect the standard error stream of the pod for this call."),
                query_bool("stdin", "Redirect the standard input stream of the pod for this call. Defaults to false."),
                query_bool("stdout", "Redirect the standard output stream of the pod for this call."),
                query_bool("tty", "TTY if true indicates that a tty will be allocated for the call. Defaults to false."),
            ]);
            (
                if sub == "exec" {
                    "PodExecOptions"
                } else {
                    "PodAttachOptions"
                },
                parameters,
            )
        }
    };
    let mut op = Map::new();
    op.insert("tags".into(), json!([names.tag]));
    op.insert(
        "description".into(),
        json!(format!("connect {method} requests to {sub} of {}", r.kind)),
    );
    op.insert(
        "operationId".into(),
        json!(format!(
            "connect{}{}{}{scope}{}{}",
            camel_group(r.group),
            camel(r.version),
            camel(method),
            r.kind,
            camel(sub)
        )),
    );
    op.insert("parameters".into(), Value::Array(parameters));
    op.insert(
        "responses".into(),
        json!({
            "200": {"description": "OK", "content": content(&json!({"type": "string"}), &["*/*"])},
            "401": {"description": "Unauthorized"},
        }),
    );
    op.insert("x-kubernetes-action".into(), json!("connect"));
    op.insert(
        "x-kubernetes-group-version-kind".into(),
        json!({"group": r.group, "version": r.version, "kind": kind}),
    );
    Value::Object(op)
}

/// The types an object answer is offered in.
const OBJECT_TYPES: &[&str] = &[
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
    "application/cbor",
];

fn content(schema: &Value, types: &[&str]) -> Value {
    let mut map = Map::new();
    for t in types {
        map.insert((*t).into(), json!({ "schema": schema }));
    }
    Value::Object(map)
}

fn request_body(schema: &Value, types: &[&str]) -> Value {
    json!({"content": content(schema, types), "required": true})
}

fn with_description(response: &Value, description: &str) -> Value {
    let mut response = response.clone();
    if let Some(map) = response.as_object_mut() {
        map.insert("description".into(), json!(description));
    }
    response
}

fn path_parameter(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "path", "description": description, "required": true, "schema": {"type": "string", "uniqueItems": true}})
}

fn query(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "query", "description": description, "schema": {"type": "string", "uniqueItems": true}})
}

fn query_bool(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "query", "description": description, "schema": {"type": "boolean", "uniqueItems": true}})
}

fn query_integer(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "query", "description": description, "schema": {"type": "integer", "uniqueItems": true}})
}

/// `core_v1`, `apps_v1`, `rbacAuthorization_v1`: the operation tag of a group-version.
fn tag(group: &str, version: &str) -> String {
    let group = camel_group(group);
    let mut chars = group.chars();
    let group: String = chars
        .next()
        .map(|c| c.to_lowercase().chain(chars).collect())
        .unwrap_or_default();
    format!("{group}_{version}")
}

/// `Core`, `Apps`, `Coordination`, `RbacAuthorization`: operation-id spelling of a group.
pub fn camel_group(group: &str) -> String {
    match group {
        "" => "Core".into(),
        g => g
            .trim_end_matches(".k8s.io")
            .split(['.', '-'])
            .map(camel)
            .collect(),
    }
}

pub fn camel(s: &str) -> String {
    let mut chars = s.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_uppercase().chain(chars).collect()
    })
}
