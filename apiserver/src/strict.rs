//! Typed decoding of request bodies with unknown-field detection.
//!
//! [`decode`] runs an object through the k8s-openapi (v1_37) type of its resource and back, which
//! yields the canonical JSON and catches type errors with the field named. k8s-openapi drops
//! fields it does not know, so comparing the original with the canonical form ([`unknown_fields`])
//! is how `fieldValidation=Strict` (and kubectl's default warnings) find unknown fields.

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use api::resources::ResourceInfo;

/// Why a body could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StrictError {
    /// The body does not fit the type; `message` is Kubernetes-style and names the field, e.g.
    /// `Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal string into Go
    /// struct field spec.containers[0].ports[0].containerPort of type int32`.
    #[error("{message}")]
    Decode { message: String },
    /// `fieldValidation=Strict` found fields the type does not have.
    #[error("strict decoding error: {}", .fields.iter().map(|f| format!("unknown field {f:?}")).collect::<Vec<_>>().join(", "))]
    UnknownFields { fields: Vec<String> },
    /// The body's apiVersion/kind is not the resource's.
    #[error("the object's apiVersion/kind {found_api_version}/{found_kind} does not match the expected {api_version}/{kind}")]
    KindMismatch {
        api_version: String,
        kind: String,
        found_api_version: String,
        found_kind: String,
    },
    /// The resource has no typed model here (nothing in the table should hit this).
    #[error("no typed model for {kind} in group {group:?}")]
    UnsupportedKind { group: String, kind: String },
}

/// Decodes `object` as the resource's k8s-openapi type and returns its canonical JSON. A missing
/// apiVersion or kind is filled in (some clients omit them); a different one is refused.
///
/// Decodes a copy; [`decode_owned`] is the same without the copy, for callers that no longer
/// need the original (the original is only needed to look for unknown fields).
pub fn decode(resource: &ResourceInfo, object: &Value) -> Result<Value, StrictError> {
    decode_owned(resource, object.clone())
}

/// [`decode`], consuming `object`: its strings and numbers are moved into the typed value rather
/// than copied, which is most of the cost of decoding a borrowed `Value`.
pub fn decode_owned(resource: &ResourceInfo, mut object: Value) -> Result<Value, StrictError> {
    let api_version = resource.api_version();
    let Value::Object(map) = &mut object else {
        return Err(decode_error(
            resource,
            &format!(
                "json: cannot unmarshal {} into Go value of type {}",
                json_type(&object),
                resource.kind
            ),
        ));
    };
    let found_api_version = map
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or(&api_version);
    let found_kind = map
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or(resource.kind);
    if found_api_version != api_version || found_kind != resource.kind {
        return Err(StrictError::KindMismatch {
            api_version: api_version.clone(),
            kind: resource.kind.to_string(),
            found_api_version: found_api_version.to_string(),
            found_kind: found_kind.to_string(),
        });
    }
    // The API server fills both in before decoding; a body missing one gets both here.
    if map.get("apiVersion").and_then(Value::as_str) != Some(api_version.as_str())
        || map.get("kind").and_then(Value::as_str) != Some(resource.kind)
    {
        map.insert("apiVersion".into(), Value::String(api_version));
        map.insert("kind".into(), Value::String(resource.kind.to_string()));
    }

    use k8s_openapi::api::{
        apps, authentication, authorization, autoscaling, batch, coordination, core, discovery,
        events, networking, policy, rbac, scheduling, storage,
    };
    match (resource.group, resource.kind) {
        ("", "Pod") => round_trip::<core::v1::Pod>(resource, object),
        ("", "Node") => round_trip::<core::v1::Node>(resource, object),
        ("", "Namespace") => round_trip::<core::v1::Namespace>(resource, object),
        ("", "Event") => round_trip::<core::v1::Event>(resource, object),
        ("events.k8s.io", "Event") => round_trip::<events::v1::Event>(resource, object),
        ("", "ConfigMap") => round_trip::<core::v1::ConfigMap>(resource, object),
        ("", "Secret") => round_trip::<core::v1::Secret>(resource, object),
        ("", "Service") => round_trip::<core::v1::Service>(resource, object),
        ("", "Endpoints") => round_trip::<core::v1::Endpoints>(resource, object),
        ("discovery.k8s.io", "EndpointSlice") => {
            round_trip::<discovery::v1::EndpointSlice>(resource, object)
        }
        ("", "ServiceAccount") => round_trip::<core::v1::ServiceAccount>(resource, object),
        ("", "ResourceQuota") => round_trip::<core::v1::ResourceQuota>(resource, object),
        ("", "LimitRange") => round_trip::<core::v1::LimitRange>(resource, object),
        ("", "PodTemplate") => round_trip::<core::v1::PodTemplate>(resource, object),
        ("", "PersistentVolume") => round_trip::<core::v1::PersistentVolume>(resource, object),
        ("", "PersistentVolumeClaim") => {
            round_trip::<core::v1::PersistentVolumeClaim>(resource, object)
        }
        ("networking.k8s.io", "Ingress") => round_trip::<networking::v1::Ingress>(resource, object),
        ("networking.k8s.io", "IngressClass") => {
            round_trip::<networking::v1::IngressClass>(resource, object)
        }
        ("storage.k8s.io", "StorageClass") => {
            round_trip::<storage::v1::StorageClass>(resource, object)
        }
        ("storage.k8s.io", "CSIDriver") => round_trip::<storage::v1::CSIDriver>(resource, object),
        ("storage.k8s.io", "CSINode") => round_trip::<storage::v1::CSINode>(resource, object),
        ("storage.k8s.io", "CSIStorageCapacity") => {
            round_trip::<storage::v1::CSIStorageCapacity>(resource, object)
        }
        ("storage.k8s.io", "VolumeAttachment") => {
            round_trip::<storage::v1::VolumeAttachment>(resource, object)
        }
        ("", "ReplicationController") => {
            round_trip::<core::v1::ReplicationController>(resource, object)
        }
        ("policy", "PodDisruptionBudget") => {
            round_trip::<policy::v1::PodDisruptionBudget>(resource, object)
        }
        ("autoscaling", "HorizontalPodAutoscaler") if resource.version == "v1" => {
            round_trip::<autoscaling::v1::HorizontalPodAutoscaler>(resource, object)
        }
        ("autoscaling", "HorizontalPodAutoscaler") => {
            round_trip::<autoscaling::v2::HorizontalPodAutoscaler>(resource, object)
        }
        ("apps", "Deployment") => round_trip::<apps::v1::Deployment>(resource, object),
        ("apps", "ReplicaSet") => round_trip::<apps::v1::ReplicaSet>(resource, object),
        ("apps", "DaemonSet") => round_trip::<apps::v1::DaemonSet>(resource, object),
        ("apps", "StatefulSet") => round_trip::<apps::v1::StatefulSet>(resource, object),
        ("apps", "ControllerRevision") => {
            round_trip::<apps::v1::ControllerRevision>(resource, object)
        }
        ("batch", "Job") => round_trip::<batch::v1::Job>(resource, object),
        ("batch", "CronJob") => round_trip::<batch::v1::CronJob>(resource, object),
        ("coordination.k8s.io", "Lease") => round_trip::<coordination::v1::Lease>(resource, object),
        ("scheduling.k8s.io", "PriorityClass") => {
            round_trip::<scheduling::v1::PriorityClass>(resource, object)
        }
        ("rbac.authorization.k8s.io", "Role") => round_trip::<rbac::v1::Role>(resource, object),
        ("rbac.authorization.k8s.io", "ClusterRole") => {
            round_trip::<rbac::v1::ClusterRole>(resource, object)
        }
        ("rbac.authorization.k8s.io", "RoleBinding") => {
            round_trip::<rbac::v1::RoleBinding>(resource, object)
        }
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => {
            round_trip::<rbac::v1::ClusterRoleBinding>(resource, object)
        }
        ("authorization.k8s.io", "SelfSubjectAccessReview") => {
            round_trip::<authorization::v1::SelfSubjectAccessReview>(resource, object)
        }
        ("authorization.k8s.io", "SubjectAccessReview") => {
            round_trip::<authorization::v1::SubjectAccessReview>(resource, object)
        }
        ("authorization.k8s.io", "LocalSubjectAccessReview") => {
            round_trip::<authorization::v1::LocalSubjectAccessReview>(resource, object)
        }
        ("authentication.k8s.io", "SelfSubjectReview") => {
            round_trip::<authentication::v1::SelfSubjectReview>(resource, object)
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1;
            round_trip::<v1::CustomResourceDefinition>(resource, object)
        }
        (group, kind) => Err(StrictError::UnsupportedKind {
            group: group.to_string(),
            kind: kind.to_string(),
        }),
    }
}

/// [`decode`], then refuse unknown fields: what `fieldValidation=Strict` does.
pub fn decode_strict(resource: &ResourceInfo, object: &Value) -> Result<Value, StrictError> {
    let canonical = decode(resource, object)?;
    let fields = unknown_fields(object, &canonical);
    if fields.is_empty() {
        Ok(canonical)
    } else {
        Err(StrictError::UnknownFields { fields })
    }
}

/// The paths (`spec.containers[0].foo`, `metadata.labelz`) present in `original` but gone from
/// `canonical`. A `null` value, or an empty object or list, that the round trip dropped is not
/// reported: k8s-openapi omits absent optionals, and Go's decoder accepts those too.
pub fn unknown_fields(original: &Value, canonical: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk(original, Some(canonical), "", &mut out);
    out
}

fn walk(original: &Value, canonical: Option<&Value>, path: &str, out: &mut Vec<String>) {
    match (original, canonical) {
        (Value::Object(o), Some(Value::Object(c))) => {
            for (key, value) in o {
                let child = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match c.get(key) {
                    Some(canon) => walk(value, Some(canon), &child, out),
                    None if is_droppable(value) => {}
                    None => out.push(child),
                }
            }
        }
        (Value::Array(o), Some(Value::Array(c))) => {
            for (i, value) in o.iter().enumerate() {
                walk(value, c.get(i), &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// Parses a JSON body as `serde_json` does (the last of repeated keys wins, as in Go), and also
/// returns the paths of the keys an object repeats (`metadata.name`, `spec.containers[0].image`),
/// which `fieldValidation=Strict` refuses and `Warn` reports.
pub fn parse_json(bytes: &[u8]) -> serde_json::Result<(Value, Vec<String>)> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let parsed = serde::de::DeserializeSeed::deserialize(Tracked, &mut deserializer)?;
    deserializer.end()?;
    Ok(parsed)
}

/// A JSON value with the relative paths of its repeated keys.
struct Tracked;

impl<'de> serde::de::DeserializeSeed<'de> for Tracked {
    type Value = (Value, Vec<String>);

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(Tracked)
    }
}

/// `inner` (a path relative to `outer`'s value) as a path relative to `outer`'s container.
fn nest(outer: &str, inner: &str) -> String {
    if inner.starts_with('[') {
        format!("{outer}{inner}")
    } else {
        format!("{outer}.{inner}")
    }
}

impl<'de> serde::de::Visitor<'de> for Tracked {
    type Value = (Value, Vec<String>);

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok((Value::Bool(v), Vec::new()))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok((Value::from(v), Vec::new()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok((Value::from(v), Vec::new()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok((Value::from(v), Vec::new()))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok((Value::String(v.to_string()), Vec::new()))
    }

    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok((Value::String(v), Vec::new()))
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok((Value::Null, Vec::new()))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        let mut repeated = Vec::new();
        while let Some((item, inner)) = seq.next_element_seed(Tracked)? {
            let index = format!("[{}]", items.len());
            repeated.extend(inner.iter().map(|p| nest(&index, p)));
            items.push(item);
        }
        Ok((Value::Array(items), repeated))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut object = serde_json::Map::new();
        let mut repeated = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            let (value, inner) = map.next_value_seed(Tracked)?;
            repeated.extend(inner.iter().map(|p| nest(&key, p)));
            match object.entry(key) {
                serde_json::map::Entry::Occupied(mut entry) => {
                    repeated.push(entry.key().clone());
                    entry.insert(value);
                }
                serde_json::map::Entry::Vacant(entry) => {
                    entry.insert(value);
                }
            }
        }
        Ok((Value::Object(object), repeated))
    }
}

/// Values whose absence after the round trip means nothing: null, `{}`, `[]`.
fn is_droppable(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

fn round_trip<T: DeserializeOwned + Serialize>(
    resource: &ResourceInfo,
    object: Value,
) -> Result<Value, StrictError> {
    let typed: T = serde_path_to_error::deserialize(object).map_err(|e| {
        let path = e.path().to_string();
        decode_error(resource, &describe(&path, &e.inner().to_string()))
    })?;
    serde_json::to_value(&typed).map_err(|e| decode_error(resource, &e.to_string()))
}

fn decode_error(resource: &ResourceInfo, detail: &str) -> StrictError {
    StrictError::Decode {
        message: format!(
            "{kind} in version {version:?} cannot be handled as a {kind}: {detail}",
            kind = resource.kind,
            version = resource.version
        ),
    }
}

/// Rewrites serde's "invalid type: string \"80\", expected i32" as Go's json message naming the
/// field; other messages keep serde's words behind the path.
fn describe(path: &str, message: &str) -> String {
    if let Some(rest) = message.strip_prefix("invalid type: ") {
        if let Some((found, expected)) = rest.split_once(", expected ") {
            let found = go_found(found);
            let expected = go_expected(expected);
            return format!(
                "json: cannot unmarshal {found} into Go struct field {path} of type {expected}"
            );
        }
    }
    if path.is_empty() || path == "." {
        format!("json: {message}")
    } else {
        format!("json: {path}: {message}")
    }
}

/// Go's name for the JSON type of a serde `Unexpected`.
fn go_found(found: &str) -> &'static str {
    let first = found.split_whitespace().next().unwrap_or_default();
    match first {
        "string" | "character" => "string",
        "integer" | "floating" => "number",
        "boolean" => "bool",
        "map" => "object",
        "sequence" => "array",
        "null" | "unit" => "null",
        _ => "value",
    }
}

/// Go's name for the type serde expected.
fn go_expected(expected: &str) -> String {
    let trimmed = expected.trim_end_matches(" at line 1 column 1");
    match trimmed {
        "i32" => "int32".into(),
        "i64" => "int64".into(),
        "u32" => "uint32".into(),
        "f64" => "float64".into(),
        "a string" | "string" => "string".into(),
        "a boolean" | "bool" => "bool".into(),
        "a sequence" => "array".into(),
        "a map" => "map".into(),
        other => other.strip_prefix("struct ").unwrap_or(other).to_string(),
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::resources::find;
    use serde_json::json;

    fn pods() -> &'static ResourceInfo {
        find("", "v1", "pods").expect("pods")
    }

    fn full_pod() -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "web", "namespace": "default", "labels": {}, "annotations": {"a": "b"},
                "creationTimestamp": null, "ownerReferences": []
            },
            "spec": {
                "hostNetwork": false,
                "nodeSelector": {"disktype": "ssd"},
                "restartPolicy": "Always",
                "terminationGracePeriodSeconds": 30,
                "securityContext": {"runAsUser": 1000, "fsGroup": 2000, "runAsNonRoot": true},
                "tolerations": [{"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"},
                                {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}],
                "affinity": {
                    "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}
                    ]}},
                    "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 100, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {"matchLabels": {"app": "web"}}}}
                    ]}
                },
                "volumes": [
                    {"name": "cache", "emptyDir": {}},
                    {"name": "cfg", "configMap": {"name": "cfg", "items": [{"key": "a", "path": "a"}]}},
                    {"name": "secret", "secret": {"secretName": "s", "defaultMode": 420}}
                ],
                "initContainers": [{"name": "init", "image": "busybox", "command": ["sh", "-c", "true"]}],
                "containers": [{
                    "name": "app",
                    "image": "nginx:1.27",
                    "imagePullPolicy": "IfNotPresent",
                    "args": [],
                    "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}],
                    "env": [
                        {"name": "A", "value": "1"},
                        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
                    ],
                    "envFrom": [{"configMapRef": {"name": "cfg"}}],
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": 1, "memory": "128Mi"}},
                    "livenessProbe": {"httpGet": {"path": "/healthz", "port": 80}, "initialDelaySeconds": 3, "periodSeconds": 10},
                    "readinessProbe": {"tcpSocket": {"port": "http"}},
                    "startupProbe": {"exec": {"command": ["true"]}},
                    "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}, "readOnlyRootFilesystem": true},
                    "volumeMounts": [{"name": "cache", "mountPath": "/cache"}, {"name": "cfg", "mountPath": "/etc/cfg", "readOnly": true}],
                    "lifecycle": {"preStop": {"exec": {"command": ["sleep", "1"]}}}
                }]
            },
            "status": {}
        })
    }

    #[test]
    fn valid_pod_round_trips_without_unknown_fields() {
        let pod = full_pod();
        let canonical = decode(pods(), &pod).expect("decode");
        assert_eq!(unknown_fields(&pod, &canonical), Vec::<String>::new());
        assert_eq!(canonical["spec"]["volumes"][0]["emptyDir"], json!({}));
        assert_eq!(
            canonical["spec"]["containers"][0]["resources"]["limits"]["cpu"],
            json!("1")
        );
        assert!(decode_strict(pods(), &pod).is_ok());
    }

    #[test]
    fn unknown_fields_are_reported_with_paths() {
        let mut pod = full_pod();
        pod["spec"]["foo"] = json!(1);
        pod["spec"]["containers"][0]["imagex"] = json!("nginx");
        pod["metadata"]["labelz"] = json!({"a": "b"});
        pod["spec"]["volumes"][0]["emptyDir"]["sizeLimitz"] = json!("1Gi");
        let canonical = decode(pods(), &pod).expect("decode");
        let mut found = unknown_fields(&pod, &canonical);
        found.sort();
        assert_eq!(
            found,
            vec![
                "metadata.labelz",
                "spec.containers[0].imagex",
                "spec.foo",
                "spec.volumes[0].emptyDir.sizeLimitz"
            ]
        );
        let err = decode_strict(
            pods(),
            &json!({"metadata": {"name": "p"}, "spec": {"foo": 1, "bar": 2, "containers": []}}),
        )
        .expect_err("strict");
        assert_eq!(
            err.to_string(),
            "strict decoding error: unknown field \"spec.bar\", unknown field \"spec.foo\""
        );
    }

    #[test]
    fn missing_api_version_and_kind_are_filled_in() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
        let canonical = decode(pods(), &pod).expect("decode");
        assert_eq!(canonical["apiVersion"], "v1");
        assert_eq!(canonical["kind"], "Pod");
        let wrong = json!({"apiVersion": "apps/v1", "kind": "Pod"});
        assert!(matches!(
            decode(pods(), &wrong),
            Err(StrictError::KindMismatch { .. })
        ));
    }

    #[test]
    fn deployment_round_trips() {
        let deployments = find("apps", "v1", "deployments").expect("deployments");
        let deployment = json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {
                "replicas": 3,
                "revisionHistoryLimit": 10,
                "selector": {"matchLabels": {"app": "web"}},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}},
                "template": {
                    "metadata": {"labels": {"app": "web"}, "creationTimestamp": null},
                    "spec": {"containers": [{"name": "web", "image": "nginx", "ports": [{"containerPort": 80}], "resources": {}}]}
                }
            }
        });
        let canonical = decode(deployments, &deployment).expect("decode");
        assert!(unknown_fields(&deployment, &canonical).is_empty());
        assert_eq!(
            canonical["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"],
            json!(0)
        );
    }

    #[test]
    fn every_table_resource_decodes_a_minimal_object() {
        for resource in api::resources::RESOURCES
            .iter()
            .filter(|r| !crate::resource_metrics::is_metrics(r))
        {
            let object = json!({"metadata": {"name": "x"}});
            let canonical =
                decode(resource, &object).unwrap_or_else(|e| panic!("{}: {e}", resource.plural));
            assert_eq!(canonical["kind"], resource.kind);
        }
        let events = find("events.k8s.io", "v1", "events").expect("events.k8s.io");
        let event = json!({"metadata": {"name": "e"}, "eventTime": "2024-01-01T00:00:00.000000Z", "regarding": {"kind": "Pod"}, "note": "x"});
        let canonical = decode(events, &event).expect("new event");
        assert!(unknown_fields(&event, &canonical).is_empty());
        let core_events = find("", "v1", "events").expect("events");
        let canonical = decode(core_events, &event).expect("core event ignores unknown fields");
        let mut unknown = unknown_fields(&event, &canonical);
        unknown.sort();
        assert_eq!(unknown, vec!["note", "regarding"]);
    }

    #[test]
    fn type_errors_name_the_field() {
        let mut pod = full_pod();
        pod["spec"]["containers"][0]["ports"][0]["containerPort"] = json!("80");
        let err = decode(pods(), &pod).expect_err("type error");
        assert_eq!(
            err.to_string(),
            "Pod in version \"v1\" cannot be handled as a Pod: json: cannot unmarshal string into Go struct field \
             spec.containers[0].ports[0].containerPort of type int32"
        );
        let mut pod = full_pod();
        pod["spec"]["hostNetwork"] = json!("yes");
        let err = decode(pods(), &pod).expect_err("type error").to_string();
        assert!(err.contains("spec.hostNetwork of type bool"), "{err}");
        let err = decode(pods(), &json!("nope"))
            .expect_err("not an object")
            .to_string();
        assert!(err.contains("cannot unmarshal string"), "{err}");
    }

    #[test]
    fn repeated_keys_are_found_with_their_paths() {
        let body = br#"{"metadata":{"name":"a","name":"b"},"spec":{"containers":[{"name":"c","image":"x","image":"y"}]},"kind":"Pod","kind":"Pod"}"#;
        let (value, repeated) = parse_json(body).expect("valid JSON");
        assert_eq!(value["metadata"]["name"], "b", "the last one wins");
        assert_eq!(value["spec"]["containers"][0]["image"], "y");
        assert_eq!(
            repeated,
            vec!["metadata.name", "spec.containers[0].image", "kind"]
        );
        let (plain, none) =
            parse_json(br#"{"a":[1,2.5,-3,null,true,"s",[[{"b":1,"b":2}]]]}"#).expect("valid JSON");
        assert_eq!(
            plain,
            serde_json::from_slice::<Value>(br#"{"a":[1,2.5,-3,null,true,"s",[[{"b":2}]]]}"#)
                .expect("valid")
        );
        assert_eq!(none, vec!["a[6][0][0].b"]);
        assert!(parse_json(br#"{"a":1} trailing"#).is_err());
        assert!(parse_json(br#"{"a":"#).is_err());
    }
}
