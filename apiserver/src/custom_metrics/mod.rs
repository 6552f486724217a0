//! `custom.metrics.k8s.io/v1beta2` and `external.metrics.k8s.io/v1beta1`, answered as a metrics
//! adapter (prometheus-adapter, KEDA) answers them, from the declared [`model`]: what the
//! HorizontalPodAutoscaler controller reads for its `Pods`, `Object` and `External` metrics and
//! what `kubectl get --raw` shows.
//!
//! The paths are the adapters' own, outside the resource table: `namespaces/NS/pods/*/METRIC`
//! (the pods a `labelSelector` picks), `namespaces/NS/RESOURCE.GROUP/NAME/METRIC` (one object),
//! `namespaces/NS/metrics/METRIC` (the namespace itself), `RESOURCE/NAME/METRIC` (a cluster
//! object), and `namespaces/NS/METRIC` for an external metric. Values are computed on each
//! read, so every API server replica gives the same answer.

pub mod model;

use std::collections::{BTreeMap, HashMap};

use api::ResourceInfo;
use chrono::Utc;
use serde_json::{json, Value};

use crate::errors::ApiError;
use crate::registry::{ListOptions, Registry};

pub const CUSTOM_GROUP: &str = "custom.metrics.k8s.io";
pub const CUSTOM_VERSION: &str = "v1beta2";
pub const EXTERNAL_GROUP: &str = "external.metrics.k8s.io";
pub const EXTERNAL_VERSION: &str = "v1beta1";

/// The adapters' group-versions, as discovery lists them.
pub const GROUP_VERSIONS: [(&str, &str); 2] = [
    (CUSTOM_GROUP, CUSTOM_VERSION),
    (EXTERNAL_GROUP, EXTERNAL_VERSION),
];

/// Whether `group`/`version` is one of the adapters'.
pub fn serves(group: &str, version: &str) -> bool {
    GROUP_VERSIONS.contains(&(group, version))
}

/// One read of an adapter.
#[derive(Debug, Clone, PartialEq)]
pub enum MetricsRead {
    /// `metric` of the object of `resource` (a group-resource: `pods`, `deployments.apps`)
    /// named `name` — `*` for those `selector` picks — in `namespace` (None: cluster-scoped).
    Custom {
        namespace: Option<String>,
        resource: String,
        name: String,
        metric: String,
        selector: Option<String>,
        metric_selector: Option<String>,
    },
    /// The series of an external metric in `namespace` that `selector` picks.
    External {
        namespace: String,
        metric: String,
        selector: Option<String>,
    },
}

/// What the authorizer sees of a read, as kube-apiserver's request-info parser splits the path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadAttributes {
    pub verb: &'static str,
    pub group: &'static str,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
}

impl MetricsRead {
    /// The read a path (`/apis/<group>/<version>/...`) and its query name; None for a path
    /// that is not an adapter's.
    pub fn parse(path: &str, query: &HashMap<String, String>) -> Option<MetricsRead> {
        // Clients escape the `*` of a selection (`pods/%2A/METRIC`).
        let decoded: Vec<String> = path
            .trim_end_matches('/')
            .split('/')
            .filter(|s| !s.is_empty())
            .map(unescape)
            .collect();
        let segments: Vec<&str> = decoded.iter().map(String::as_str).collect();
        let selector = query
            .get("labelSelector")
            .filter(|s| !s.is_empty())
            .cloned();
        let owned = |s: &&str| s.to_string();
        match segments.as_slice() {
            ["apis", CUSTOM_GROUP, CUSTOM_VERSION, rest @ ..] => {
                let metric_selector = query
                    .get("metricLabelSelector")
                    .filter(|s| !s.is_empty())
                    .cloned();
                let (namespace, resource, name, metric) = match rest {
                    ["namespaces", ns, "metrics", metric] => {
                        (None, "namespaces".to_string(), owned(ns), owned(metric))
                    }
                    ["namespaces", ns, resource, name, metric] => {
                        (Some(owned(ns)), owned(resource), owned(name), owned(metric))
                    }
                    [resource, name, metric] => (None, owned(resource), owned(name), owned(metric)),
                    _ => return None,
                };
                Some(MetricsRead::Custom {
                    namespace,
                    resource,
                    name,
                    metric,
                    selector,
                    metric_selector,
                })
            }
            ["apis", EXTERNAL_GROUP, EXTERNAL_VERSION, "namespaces", ns, metric] => {
                Some(MetricsRead::External {
                    namespace: owned(ns),
                    metric: owned(metric),
                    selector,
                })
            }
            _ => None,
        }
    }

    pub fn attributes(&self) -> ReadAttributes {
        match self {
            MetricsRead::Custom {
                namespace,
                resource,
                name,
                metric,
                ..
            } => match namespace {
                // `namespaces/NS/metrics/METRIC`: resource `metrics` named METRIC in NS.
                None if resource == "namespaces" => ReadAttributes {
                    verb: "get",
                    group: CUSTOM_GROUP,
                    resource: "metrics".into(),
                    subresource: String::new(),
                    namespace: name.clone(),
                    name: metric.clone(),
                },
                _ => ReadAttributes {
                    verb: "get",
                    group: CUSTOM_GROUP,
                    resource: resource.clone(),
                    subresource: metric.clone(),
                    namespace: namespace.clone().unwrap_or_default(),
                    name: name.clone(),
                },
            },
            MetricsRead::External {
                namespace, metric, ..
            } => ReadAttributes {
                verb: "list",
                group: EXTERNAL_GROUP,
                resource: metric.clone(),
                subresource: String::new(),
                namespace: namespace.clone(),
                name: String::new(),
            },
        }
    }
}

/// A path segment with its `%XX` escapes decoded (an escape that is not one stays as it is).
fn unescape(segment: &str) -> String {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0)) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The adapters' NotFound: `the server could not find the metric M for pods` (a selection) or
/// `... for pods NAME` (one object).
fn metric_not_found(metric: &str, resource: &str, name: Option<&str>) -> ApiError {
    let message = match name {
        Some(name) => {
            format!("the server could not find the metric {metric} for {resource} {name}")
        }
        None => format!("the server could not find the metric {metric} for {resource}"),
    };
    ApiError::NotFound {
        message,
        name: String::new(),
        group: String::new(),
        kind: String::new(),
    }
}

/// The served resource a group-resource (`pods`, `deployments.apps`, `widgets.example.com`)
/// names: a stored one of kemu's table, else a custom resource served now.
fn resolve(registry: &Registry, group_resource: &str) -> Option<&'static ResourceInfo> {
    let (plural, group) = group_resource
        .split_once('.')
        .unwrap_or((group_resource, ""));
    api::resources::RESOURCES
        .iter()
        .find(|r| r.group == group && r.plural == plural && r.is_stored())
        .or_else(|| {
            registry
                .custom()
                .snapshot()
                .resources()
                .into_iter()
                .find(|r| r.group == group && r.plural == plural)
        })
}

fn selector(text: Option<&str>) -> Result<Option<api::selectors::LabelSelector>, ApiError> {
    text.map(|s| {
        api::selectors::LabelSelector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))
    })
    .transpose()
}

/// Answers a read: a `MetricValueList` or an `ExternalMetricValueList`.
pub async fn serve(registry: &Registry, read: &MetricsRead) -> Result<Value, ApiError> {
    match read {
        MetricsRead::Custom {
            namespace,
            resource,
            name,
            metric,
            selector: object_selector,
            metric_selector,
        } => {
            // Declared custom metrics carry no labels: a metric selector either picks the one
            // series or none.
            let series_selected = selector(metric_selector.as_deref())?
                .is_none_or(|s| s.matches(&BTreeMap::<String, String>::new()));
            let info = resolve(registry, resource)
                .filter(|r| r.namespaced == namespace.is_some())
                .ok_or_else(|| {
                    metric_not_found(metric, resource, (name != "*").then_some(name.as_str()))
                })?;
            let now = crate::resource_metrics::stamp(Utc::now());
            let objects = if name == "*" {
                let options = ListOptions {
                    label_selector: object_selector.clone(),
                    resource_version: Some("0".into()),
                    ..Default::default()
                };
                selector(object_selector.as_deref())?;
                let listed = registry.list(info, namespace.as_deref(), &options).await?;
                listed
                    .items
                    .iter()
                    .map(|o| o.value())
                    .collect::<Result<Vec<_>, _>>()?
            } else {
                match registry.get(info, namespace.as_deref(), name).await {
                    Ok(object) => vec![object],
                    Err(ApiError::NotFound { .. }) => Vec::new(),
                    Err(e) => return Err(e),
                }
            };
            let items: Vec<Value> = objects
                .iter()
                .filter(|o| info.plural != "pods" || crate::resource_metrics::reported(o))
                .filter(|_| series_selected)
                .filter_map(|o| {
                    let value = model::custom_value(o, metric)?;
                    Some(metric_value(info, o, metric, &now, &value.canonical()))
                })
                .collect();
            if items.is_empty() {
                return Err(metric_not_found(
                    metric,
                    resource,
                    (name != "*").then_some(name.as_str()),
                ));
            }
            Ok(json!({
                "kind": "MetricValueList",
                "apiVersion": format!("{CUSTOM_GROUP}/{CUSTOM_VERSION}"),
                "metadata": {},
                "items": items,
            }))
        }
        MetricsRead::External {
            namespace,
            metric,
            selector: series_selector,
        } => {
            let series_selector = selector(series_selector.as_deref())?;
            let config_maps = api::resources::find("", "v1", "configmaps")
                .ok_or_else(|| ApiError::internal("configmaps are not served"))?;
            let declared = match registry
                .get(config_maps, Some(namespace), model::EXTERNAL_CONFIG_MAP)
                .await
            {
                Ok(cm) => model::external_series(&cm, metric),
                Err(ApiError::NotFound { .. }) => Vec::new(),
                Err(e) => return Err(e),
            };
            let now = crate::resource_metrics::stamp(Utc::now());
            let items: Vec<Value> = declared
                .iter()
                .filter(|s| {
                    series_selector
                        .as_ref()
                        .is_none_or(|l| l.matches(&s.labels))
                })
                .map(|s| {
                    json!({
                        "metricName": metric,
                        "metricLabels": s.labels,
                        "timestamp": now,
                        "value": s.value.canonical(),
                    })
                })
                .collect();
            Ok(json!({
                "kind": "ExternalMetricValueList",
                "apiVersion": format!("{EXTERNAL_GROUP}/{EXTERNAL_VERSION}"),
                "metadata": {},
                "items": items,
            }))
        }
    }
}

/// One `MetricValue` describing `object`.
fn metric_value(
    info: &ResourceInfo,
    object: &Value,
    metric: &str,
    now: &str,
    value: &str,
) -> Value {
    let mut described = serde_json::Map::new();
    described.insert("kind".into(), json!(info.kind));
    if let Some(ns) = crate::meta::namespace(object) {
        described.insert("namespace".into(), json!(ns));
    }
    described.insert("name".into(), json!(crate::meta::name(object)));
    described.insert("apiVersion".into(), json!(info.api_version()));
    json!({
        "describedObject": described,
        "metric": {"name": metric},
        "timestamp": now,
        "value": value,
    })
}

/// The OpenAPI 3 document of an adapter's group-version: its read paths and value kinds.
pub fn openapi_document(group: &str, version: &str) -> Value {
    let schemas: serde_json::Map<String, Value> = openapi_schemas(group)
        .into_iter()
        .map(|(name, schema)| (name.to_string(), schema))
        .collect();
    let list = schemas
        .keys()
        .find(|name| name.ends_with("List"))
        .cloned()
        .unwrap_or_default();
    let parameter = |name: &str, place: &str, description: &str| {
        json!({"name": name, "in": place, "description": description,
            "required": place == "path", "schema": {"type": "string", "uniqueItems": true}})
    };
    let selector = parameter(
        "labelSelector",
        "query",
        "A selector to restrict the list of returned objects by their labels.",
    );
    let get = |parameters: Vec<Value>| {
        json!({"get": {
            "description": "read the values of a metric",
            "operationId": format!("read{}", list.rsplit('.').next().unwrap_or_default()),
            "parameters": parameters,
            "responses": {"200": {"description": "OK", "content": {"application/json": {
                "schema": {"$ref": format!("#/components/schemas/{list}")}}}}},
        }})
    };
    let base = format!("/apis/{group}/{version}");
    let namespace = parameter(
        "namespace",
        "path",
        "object name and auth scope, such as for teams and projects",
    );
    let metric = parameter("metric", "path", "the name of the metric");
    let mut paths = serde_json::Map::new();
    if group == CUSTOM_GROUP {
        let resource = parameter(
            "resource",
            "path",
            "the resource of the described objects, with its group",
        );
        let name = parameter(
            "name",
            "path",
            "the name of the described object, or * for those the label selector picks",
        );
        let metric_selector = parameter(
            "metricLabelSelector",
            "query",
            "A selector to restrict the series of the metric by their labels.",
        );
        paths.insert(
            format!("{base}/namespaces/{{namespace}}/{{resource}}/{{name}}/{{metric}}"),
            get(vec![
                namespace.clone(),
                resource.clone(),
                name.clone(),
                metric.clone(),
                selector.clone(),
                metric_selector.clone(),
            ]),
        );
        paths.insert(
            format!("{base}/namespaces/{{namespace}}/metrics/{{metric}}"),
            get(vec![namespace, metric.clone(), metric_selector.clone()]),
        );
        paths.insert(
            format!("{base}/{{resource}}/{{name}}/{{metric}}"),
            get(vec![resource, name, metric, selector, metric_selector]),
        );
    } else {
        paths.insert(
            format!("{base}/namespaces/{{namespace}}/{{metric}}"),
            get(vec![namespace, metric, selector]),
        );
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": crate::openapi::INFO_VERSION},
        "paths": paths,
        "components": {"schemas": schemas},
    })
}

/// The OpenAPI schemas of an adapter's list kinds, under the adapters' definition names.
fn openapi_schemas(group: &str) -> Vec<(&'static str, Value)> {
    let timestamp = json!({"type": "string", "format": "date-time",
        "description": "indicates the time at which the metrics were produced"});
    let quantity = json!({"type": "string", "description": "the value of the metric"});
    let list = |item: &str, description: &str| {
        json!({
            "description": description,
            "type": "object",
            "required": ["items"],
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"type": "object"},
                "items": {"type": "array", "items": {"$ref": format!("#/components/schemas/{item}")}},
            },
        })
    };
    match group {
        CUSTOM_GROUP => vec![
            (
                "io.k8s.metrics.pkg.apis.custom_metrics.v1beta2.MetricValueList",
                list(
                    "io.k8s.metrics.pkg.apis.custom_metrics.v1beta2.MetricValue",
                    "a list of values for a given metric for some set of objects",
                ),
            ),
            (
                "io.k8s.metrics.pkg.apis.custom_metrics.v1beta2.MetricValue",
                json!({
                    "description": "a metric value for some object",
                    "type": "object",
                    "required": ["describedObject", "metric", "timestamp", "value"],
                    "properties": {
                        "describedObject": {"type": "object", "description": "a reference to the described object"},
                        "metric": {"type": "object", "properties": {
                            "name": {"type": "string"},
                            "selector": {"type": "object"},
                        }},
                        "timestamp": timestamp,
                        "windowSeconds": {"type": "integer", "format": "int64"},
                        "value": quantity,
                    },
                }),
            ),
        ],
        EXTERNAL_GROUP => vec![
            (
                "io.k8s.metrics.pkg.apis.external_metrics.v1beta1.ExternalMetricValueList",
                list(
                    "io.k8s.metrics.pkg.apis.external_metrics.v1beta1.ExternalMetricValue",
                    "a list of values for a given metric for some set labels",
                ),
            ),
            (
                "io.k8s.metrics.pkg.apis.external_metrics.v1beta1.ExternalMetricValue",
                json!({
                    "description": "a metric value for external metric",
                    "type": "object",
                    "required": ["metricName", "metricLabels", "timestamp", "value"],
                    "properties": {
                        "metricName": {"type": "string", "description": "the name of the metric"},
                        "metricLabels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "timestamp": timestamp,
                        "window": {"type": "integer", "format": "int64"},
                        "value": quantity,
                    },
                }),
            ),
        ],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn adapter_paths_parse_as_the_request_info_parser_splits_them() {
        let pods = MetricsRead::parse(
            "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/pods/*/packets-per-second",
            &query(&[("labelSelector", "app=web")]),
        )
        .expect("pods");
        assert_eq!(
            pods,
            MetricsRead::Custom {
                namespace: Some("ns".into()),
                resource: "pods".into(),
                name: "*".into(),
                metric: "packets-per-second".into(),
                selector: Some("app=web".into()),
                metric_selector: None,
            }
        );
        let a = pods.attributes();
        assert_eq!(
            (
                a.verb,
                a.resource.as_str(),
                a.subresource.as_str(),
                a.name.as_str()
            ),
            ("get", "pods", "packets-per-second", "*")
        );
        let namespace = MetricsRead::parse(
            "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/metrics/depth",
            &HashMap::new(),
        )
        .expect("namespace");
        assert!(
            matches!(&namespace, MetricsRead::Custom { namespace: None, resource, name, .. }
            if resource == "namespaces" && name == "ns")
        );
        assert_eq!(namespace.attributes().resource, "metrics");
        // kubectl escapes the star.
        let escaped = MetricsRead::parse(
            "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/pods/%2A/packets-per-second",
            &query(&[("labelSelector", "app=web")]),
        );
        assert_eq!(escaped.as_ref(), Some(&pods));
        assert_eq!(unescape("a%2Fb%zz%4"), "a/b%zz%4");
        let node = MetricsRead::parse(
            "/apis/custom.metrics.k8s.io/v1beta2/nodes/n1/load",
            &HashMap::new(),
        );
        assert!(matches!(
            node,
            Some(MetricsRead::Custom {
                namespace: None,
                ..
            })
        ));
        let external = MetricsRead::parse(
            "/apis/external.metrics.k8s.io/v1beta1/namespaces/ns/queue_depth",
            &query(&[("labelSelector", "queue=jobs")]),
        )
        .expect("external");
        assert_eq!(external.attributes().verb, "list");
        assert_eq!(external.attributes().resource, "queue_depth");
        assert!(
            MetricsRead::parse("/apis/custom.metrics.k8s.io/v1beta2/pods", &HashMap::new())
                .is_none()
        );
        assert!(MetricsRead::parse(
            "/apis/external.metrics.k8s.io/v1beta1/queue_depth",
            &HashMap::new()
        )
        .is_none());
    }

    #[test]
    fn values_are_written_in_the_adapters_field_order() {
        let list = json!({
            "kind": "MetricValueList",
            "apiVersion": "custom.metrics.k8s.io/v1beta2",
            "metadata": {},
            "items": [metric_value(api::resources::pods(),
                &json!({"metadata": {"name": "p", "namespace": "ns"}}), "m", "2026-01-01T00:00:00Z", "5")],
        });
        let text = String::from_utf8(crate::go_json::to_vec(&list)).unwrap_or_default();
        assert_eq!(
            text,
            r#"{"kind":"MetricValueList","apiVersion":"custom.metrics.k8s.io/v1beta2","metadata":{},"items":[{"describedObject":{"kind":"Pod","namespace":"ns","name":"p","apiVersion":"v1"},"metric":{"name":"m"},"timestamp":"2026-01-01T00:00:00Z","value":"5"}]}"#
        );
        let external = json!({
            "kind": "ExternalMetricValueList",
            "apiVersion": "external.metrics.k8s.io/v1beta1",
            "metadata": {},
            "items": [{"value": "3", "timestamp": "t", "metricName": "q", "metricLabels": {}}],
        });
        let text = String::from_utf8(crate::go_json::to_vec(&external)).unwrap_or_default();
        assert!(
            text.contains(r#"[{"metricName":"q","metricLabels":{},"timestamp":"t","value":"3"}]"#),
            "{text}"
        );
        let document = openapi_document(CUSTOM_GROUP, CUSTOM_VERSION);
        assert!(document["components"]["schemas"]
            ["io.k8s.metrics.pkg.apis.custom_metrics.v1beta2.MetricValueList"]
            .is_object());
        assert!(document["paths"]
            ["/apis/custom.metrics.k8s.io/v1beta2/namespaces/{namespace}/{resource}/{name}/{metric}"]
            ["get"]
            .is_object());
    }

    #[test]
    fn a_metric_value_describes_its_object() {
        let pods = api::resources::pods();
        let pod = json!({"metadata": {"name": "p", "namespace": "ns"}});
        let value = metric_value(pods, &pod, "m", "2026-01-01T00:00:00Z", "50");
        assert_eq!(
            value["describedObject"],
            json!({"kind": "Pod", "namespace": "ns", "name": "p", "apiVersion": "v1"})
        );
        // A cluster-scoped object has no namespace.
        let node = metric_value(
            api::resources::find("", "v1", "nodes").expect("nodes"),
            &json!({"metadata": {"name": "n1"}}),
            "m",
            "t",
            "1",
        );
        assert_eq!(
            node["describedObject"],
            json!({"kind": "Node", "name": "n1", "apiVersion": "v1"})
        );
        assert_eq!(value["metric"]["name"], "m");
        assert_eq!(value["value"], "50");
    }
}
