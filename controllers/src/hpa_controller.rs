//! The HorizontalPodAutoscaler controller's reconciler: every sync period (15 s by default) it
//! reads the target's `scale` subresource (a built-in kind's or a custom resource's), the pods'
//! metrics from `metrics.k8s.io`, custom metrics from `custom.metrics.k8s.io`, external ones
//! from `external.metrics.k8s.io` and the pods from the shared informer, lets [`crate::hpa`]
//! decide, patches the target's scale, and writes the autoscaler's status and events as
//! kube-controller-manager does.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use api::client::{Client, ListParams, Patch};
use api::event_sink::EventSink;
use api::informer::{Informer, InformerEvent, Store};
use api::selectors::LabelSelector;
use api::ResourceInfo;
use chrono::{DateTime, Utc};
use k8s_openapi::api::autoscaling::v2::{
    ContainerResourceMetricStatus, CrossVersionObjectReference, ExternalMetricSource,
    ExternalMetricStatus, HorizontalPodAutoscaler, HorizontalPodAutoscalerCondition,
    HorizontalPodAutoscalerStatus, MetricSpec, MetricStatus, MetricTarget, MetricValueStatus,
    ObjectMetricSource, ObjectMetricStatus, PodsMetricSource, PodsMetricStatus,
    ResourceMetricStatus,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use parking_lot::Mutex;
use serde_json::Value;
use tracing::debug;

use crate::custom_kinds::DefinitionSummary;
use crate::events::Recorder;
use crate::hpa::{
    go_selector, per_pod_replicas, ready_pods, resource_replicas, usage_ratio_replicas,
    ConditionUpdate, History, Limits, PodFacts, PodMetric, Target, Tolerances,
};
use crate::owners::{key_of, split_key};
use crate::queue::WorkQueue;
use crate::resource_quota::{namespace_of, BY_NAMESPACE};
use crate::worker::{Outcome, ReconcileError, Reconciler};

/// The component events name (`--horizontal-pod-autoscaler-*`'s controller).
const COMPONENT: &str = "horizontal-pod-autoscaler";

/// The autoscaler controller's settings.
#[derive(Clone, Debug)]
pub struct HorizontalConfig {
    /// How often every autoscaler is looked at (`--horizontal-pod-autoscaler-sync-period`).
    pub sync_period: Duration,
    /// The scale-down window of autoscalers without a behavior
    /// (`--horizontal-pod-autoscaler-downscale-stabilization`).
    pub downscale_window: Duration,
}

impl Default for HorizontalConfig {
    fn default() -> Self {
        HorizontalConfig {
            sync_period: Duration::from_secs(15),
            downscale_window: Duration::from_secs(crate::hpa::DEFAULT_DOWNSCALE_WINDOW_SECS as u64),
        }
    }
}

/// The reconciler (keys are `namespace/name` of autoscalers).
pub struct HorizontalController {
    client: Client,
    autoscalers: Store<HorizontalPodAutoscaler>,
    pods: Store<Pod>,
    events: Recorder,
    config: HorizontalConfig,
    history: Mutex<HashMap<String, History>>,
}

impl HorizontalController {
    pub fn new(
        client: Client,
        autoscalers: &mut Informer<HorizontalPodAutoscaler>,
        pods: &mut Informer<Pod>,
        events: EventSink,
        config: HorizontalConfig,
    ) -> (Arc<HorizontalController>, WorkQueue) {
        let events = Recorder::new(events, COMPONENT);
        let queue = WorkQueue::new(Duration::from_millis(5), Duration::from_secs(60));
        pods.add_index(BY_NAMESPACE, namespace_of::<Pod>);
        let controller = Arc::new(HorizontalController {
            client,
            autoscalers: autoscalers.store(),
            pods: pods.store(),
            events,
            config,
            history: Mutex::new(HashMap::new()),
        });
        let mut changes = autoscalers.subscribe();
        let feed = queue.clone();
        tokio::spawn(async move {
            while let Some(event) = changes.recv().await {
                match event {
                    InformerEvent::Added(h)
                    | InformerEvent::Updated { new: h, .. }
                    | InformerEvent::Deleted(h) => feed.add(&key_of(&h.metadata)),
                }
            }
        });
        (controller, queue)
    }

    fn record(&self, hpa: &HorizontalPodAutoscaler, warning: bool, reason: &str, message: &str) {
        let object =
            crate::events::reference("autoscaling/v2", "HorizontalPodAutoscaler", &hpa.metadata);
        self.events.record(object, warning, reason, message);
    }

    /// The usage (milli-units) of `resource` of each pod metrics-server reports for the
    /// selector: the sum over its containers, or one container's (`ContainerResource`). A pod
    /// whose containers do not all report the resource is left out; one without the named
    /// container fails the read, as upstream's metrics client fails it.
    async fn pod_metrics(
        &self,
        namespace: &str,
        selector: &str,
        resource: &str,
        container: Option<&str>,
    ) -> Result<HashMap<String, PodMetric>, String> {
        let pod_metrics = api::resources::find("metrics.k8s.io", "v1beta1", "pods")
            .ok_or("metrics.k8s.io is not served")?;
        let listed = self
            .client
            .list::<Value>(
                pod_metrics,
                Some(namespace),
                &ListParams::default().labels(selector),
            )
            .await
            .map_err(|e| format!("unable to get metrics for resource {resource}: {e}"))?;
        let mut out = HashMap::new();
        for item in listed.items {
            let name = item
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let timestamp = item
                .get("timestamp")
                .and_then(Value::as_str)
                .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                .map_or_else(Utc::now, |t| t.with_timezone(&Utc));
            let window = item
                .get("window")
                .and_then(Value::as_str)
                .and_then(|w| w.strip_suffix('s'))
                .and_then(|w| w.parse::<f64>().ok())
                .map_or(chrono::Duration::zero(), |s| {
                    chrono::Duration::milliseconds((s * 1000.0) as i64)
                });
            let usage = |container: &Value| {
                container["usage"]
                    .get(resource)
                    .and_then(|q| api::quantity::Quantity::from_value(q).ok())
                    .map(|q| q.as_milli())
            };
            let containers = item["containers"].as_array().cloned().unwrap_or_default();
            let value = match container {
                Some(wanted) => {
                    let Some(found) = containers.iter().find(|c| c["name"] == wanted) else {
                        return Err(format!(
                            "unable to get metrics for resource {resource}: container {wanted} not present in metrics for pod {namespace}/{name}"
                        ));
                    };
                    usage(found)
                }
                None => containers.iter().map(usage).sum::<Option<i64>>(),
            };
            if let Some(value_milli) = value {
                out.insert(
                    name.to_string(),
                    PodMetric {
                        value_milli,
                        timestamp,
                        window,
                    },
                );
            }
        }
        Ok(out)
    }

    /// The pods of `namespace` the selector picks, as the core reads them, with their requests
    /// of `resource` (in `container` alone, when one is named).
    fn pods(
        &self,
        namespace: &str,
        selector: &LabelSelector,
        resource: &str,
        container: Option<&str>,
    ) -> Vec<PodFacts> {
        self.pods
            .by_index(BY_NAMESPACE, namespace)
            .iter()
            .filter(|p| selector.matches(&p.metadata.labels.as_ref()))
            .map(|p| pod_facts(p, resource, container))
            .collect()
    }

    /// One metric's proposal and status (`computeReplicasForMetric`).
    async fn metric_proposal(
        &self,
        hpa: &HorizontalPodAutoscaler,
        metric: &MetricSpec,
        scale: Replicas,
        selector: (&str, &LabelSelector),
        tolerances: Tolerances,
    ) -> Result<(i32, String, MetricStatus), MetricFailure> {
        let namespace = hpa.metadata.namespace.as_deref().unwrap_or_default();
        match (metric.type_.as_str(), metric) {
            (
                "Resource",
                MetricSpec {
                    resource: Some(r), ..
                },
            ) => {
                self.resource_proposal(
                    namespace, &r.name, &r.target, None, scale, selector, tolerances,
                )
                .await
            }
            (
                "ContainerResource",
                MetricSpec {
                    container_resource: Some(c),
                    ..
                },
            ) => {
                self.resource_proposal(
                    namespace,
                    &c.name,
                    &c.target,
                    Some(&c.container),
                    scale,
                    selector,
                    tolerances,
                )
                .await
            }
            ("Pods", MetricSpec { pods: Some(p), .. }) => {
                self.pods_proposal(namespace, p, scale, selector, tolerances)
                    .await
            }
            (
                "Object",
                MetricSpec {
                    object: Some(o), ..
                },
            ) => {
                self.object_proposal(namespace, o, scale, selector, tolerances)
                    .await
            }
            (
                "External",
                MetricSpec {
                    external: Some(e), ..
                },
            ) => {
                self.external_proposal(namespace, e, scale, selector, tolerances)
                    .await
            }
            (other, _) => {
                let message = format!("unknown metric source type {other:?}");
                Err(MetricFailure {
                    reason: "InvalidMetricSourceType",
                    message: message.clone(),
                    error: message,
                })
            }
        }
    }

    /// `Resource` and `ContainerResource` metrics: the pods' usage from metrics.k8s.io against
    /// their requests or an average value.
    #[allow(clippy::too_many_arguments)]
    async fn resource_proposal(
        &self,
        namespace: &str,
        resource: &str,
        target: &MetricTarget,
        container: Option<&str>,
        scale: Replicas,
        selector: (&str, &LabelSelector),
        tolerances: Tolerances,
    ) -> Result<(i32, String, MetricStatus), MetricFailure> {
        let reason = if container.is_some() {
            "FailedGetContainerResourceMetric"
        } else {
            "FailedGetResourceMetric"
        };
        let outer = |message: &str| match container {
            Some(c) => format!("failed to get {c} container metric value: {message}"),
            None => format!("failed to get {resource} resource metric value: {message}"),
        };
        let target = match (&target.average_value, target.average_utilization) {
            (Some(value), _) => Target::AverageValue(milli(value)),
            (None, Some(utilization)) => Target::Utilization(utilization),
            (None, None) => {
                return Err(MetricFailure::new(
                    reason,
                    "invalid resource metric source: neither an average utilization target nor an average value target was set".into(),
                    outer,
                ))
            }
        };
        let fail = |e: String| {
            let what = match target {
                Target::AverageValue(_) => "usage",
                Target::Utilization(_) => "utilization",
            };
            MetricFailure::new(
                reason,
                format!("failed to get {resource} {what}: {e}"),
                outer,
            )
        };
        let metrics = self
            .pod_metrics(namespace, selector.0, resource, container)
            .await
            .map_err(fail)?;
        let pods = self.pods(namespace, selector.1, resource, container);
        let proposal = resource_replicas(
            resource,
            scale.spec,
            target,
            &pods,
            metrics,
            tolerances,
            Utc::now(),
        )
        .map_err(fail)?;
        let name = match (target, container) {
            (Target::AverageValue(_), _) => format!("{resource} resource"),
            (Target::Utilization(_), None) => {
                format!("{resource} resource utilization (percentage of request)")
            }
            (Target::Utilization(_), Some(_)) => {
                format!("{resource} container resource utilization (percentage of request)")
            }
        };
        let current = MetricValueStatus {
            average_utilization: proposal.utilization,
            average_value: Some(milli_quantity(proposal.average_milli)),
            value: None,
        };
        let status = match container {
            None => MetricStatus {
                type_: "Resource".into(),
                resource: Some(ResourceMetricStatus {
                    name: resource.to_string(),
                    current,
                }),
                ..Default::default()
            },
            Some(c) => MetricStatus {
                type_: "ContainerResource".into(),
                container_resource: Some(ContainerResourceMetricStatus {
                    name: resource.to_string(),
                    container: c.to_string(),
                    current,
                }),
                ..Default::default()
            },
        };
        Ok((proposal.replicas, name, status))
    }

    /// A `Pods` metric: every selected pod's value from custom.metrics.k8s.io against an
    /// average value (`GetMetricReplicas`).
    async fn pods_proposal(
        &self,
        namespace: &str,
        source: &PodsMetricSource,
        scale: Replicas,
        selector: (&str, &LabelSelector),
        tolerances: Tolerances,
    ) -> Result<(i32, String, MetricStatus), MetricFailure> {
        let name = source.metric.name.as_str();
        let outer = |message: &str| format!("failed to get pods metric value: {message}");
        let fail = |e: String| MetricFailure::new("FailedGetPodsMetric", e, outer);
        let metric_selector = metric_selector(source.metric.selector.as_ref()).map_err(fail)?;
        let path = custom_metrics_path(
            namespace,
            "pods",
            "*",
            name,
            Some(selector.0),
            metric_selector.as_deref(),
        );
        let values = self
            .custom_metric_values(&path)
            .await
            .and_then(|items| {
                if items.is_empty() {
                    Err("no metrics returned from custom metrics API".to_string())
                } else {
                    Ok(items)
                }
            })
            .map_err(|e| fail(format!("unable to get metric {name}: {e}")))?;
        let now = Utc::now();
        let metrics = values
            .into_iter()
            .map(|(pod, value_milli)| {
                (
                    pod,
                    PodMetric {
                        value_milli,
                        timestamp: now,
                        window: chrono::Duration::minutes(1),
                    },
                )
            })
            .collect();
        let target = source.target.average_value.as_ref().map_or(0, milli);
        let pods = self.pods(namespace, selector.1, "", None);
        let proposal = resource_replicas(
            "",
            scale.spec,
            Target::AverageValue(target),
            &pods,
            metrics,
            tolerances,
            now,
        )
        .map_err(fail)?;
        let status = MetricStatus {
            type_: "Pods".into(),
            pods: Some(PodsMetricStatus {
                metric: source.metric.clone(),
                current: MetricValueStatus {
                    average_value: Some(milli_quantity(proposal.average_milli)),
                    ..Default::default()
                },
            }),
            ..Default::default()
        };
        Ok((proposal.replicas, format!("pods metric {name}"), status))
    }

    /// An `Object` metric: the described object's value from custom.metrics.k8s.io against a
    /// value (`GetObjectMetricReplicas`) or an average value per pod
    /// (`GetObjectPerPodMetricReplicas`).
    async fn object_proposal(
        &self,
        namespace: &str,
        source: &ObjectMetricSource,
        scale: Replicas,
        selector: (&str, &LabelSelector),
        tolerances: Tolerances,
    ) -> Result<(i32, String, MetricStatus), MetricFailure> {
        const REASON: &str = "FailedGetObjectMetric";
        let name = source.metric.name.as_str();
        let described = &source.described_object;
        let outer = |message: &str| format!("failed to get object metric value: {message}");
        let metric_selector = metric_selector(source.metric.selector.as_ref())
            .map_err(|e| MetricFailure::new(REASON, e, outer))?;
        let value = self
            .object_metric(namespace, described, name, metric_selector.as_deref())
            .await
            .map_err(|e| {
                format!(
                    "unable to get metric {name}: {} on {namespace} {}/{e}",
                    described.kind, described.name
                )
            });
        let target = &source.target;
        match (target.type_.as_str(), &target.value, &target.average_value) {
            ("Value", Some(target), _) => {
                let fail = |e: String| MetricFailure::new(REASON, e, outer);
                let usage = value.map_err(fail)?;
                let ratio = usage as f64 / milli(target) as f64;
                let pods = self.pods(namespace, selector.1, "", None);
                let replicas =
                    usage_ratio_replicas(scale.spec, ratio, || ready_pods(&pods), tolerances)
                        .map_err(fail)?;
                let status = MetricStatus {
                    type_: "Object".into(),
                    object: Some(ObjectMetricStatus {
                        described_object: described.clone(),
                        metric: source.metric.clone(),
                        current: MetricValueStatus {
                            value: Some(milli_quantity(usage)),
                            ..Default::default()
                        },
                    }),
                    ..Default::default()
                };
                Ok((replicas, format!("{} metric {name}", described.kind), status))
            }
            ("AverageValue", _, Some(target)) => {
                let usage = value.map_err(|e| {
                    MetricFailure::new(REASON, e, |m| {
                        outer(&format!("failed to get {name} object metric: {m}"))
                    })
                })?;
                let (replicas, average) =
                    per_pod_replicas(scale.status, usage, milli(target), tolerances);
                // Upstream leaves the described object out of this status.
                let status = MetricStatus {
                    type_: "Object".into(),
                    object: Some(ObjectMetricStatus {
                        metric: source.metric.clone(),
                        current: MetricValueStatus {
                            average_value: Some(milli_quantity(average)),
                            ..Default::default()
                        },
                        ..Default::default()
                    }),
                    ..Default::default()
                };
                let label = format!(
                    "external metric {name}({})",
                    go_selector(source.metric.selector.as_ref())
                );
                Ok((replicas, label, status))
            }
            _ => Err(MetricFailure::new(
                REASON,
                "invalid object metric source: neither a value target nor an average value target was set".into(),
                outer,
            )),
        }
    }

    /// An `External` metric: the sum of its series from external.metrics.k8s.io against a
    /// value (`GetExternalMetricReplicas`) or an average value per pod
    /// (`GetExternalPerPodMetricReplicas`).
    async fn external_proposal(
        &self,
        namespace: &str,
        source: &ExternalMetricSource,
        scale: Replicas,
        selector: (&str, &LabelSelector),
        tolerances: Tolerances,
    ) -> Result<(i32, String, MetricStatus), MetricFailure> {
        const REASON: &str = "FailedGetExternalMetric";
        let name = source.metric.name.as_str();
        let outer =
            |message: &str| format!("failed to get {name} external metric value: {message}");
        let label = format!(
            "external metric {name}({})",
            go_selector(source.metric.selector.as_ref())
        );
        let (target_value, target_average) = (&source.target.value, &source.target.average_value);
        if target_value.is_none() && target_average.is_none() {
            return Err(MetricFailure::new(
                REASON,
                "invalid external metric source: neither a value target nor an average value target was set".into(),
                outer,
            ));
        }
        let metric_selector = metric_selector(source.metric.selector.as_ref())
            .map_err(|e| MetricFailure::new(REASON, e, outer))?;
        let total = self
            .external_metric(namespace, name, metric_selector.as_deref())
            .await
            .map_err(|e| {
                format!(
                    "unable to get external metric {namespace}/{name}/{}: {e}",
                    go_selector(source.metric.selector.as_ref())
                )
            });
        let status = |current: MetricValueStatus| MetricStatus {
            type_: "External".into(),
            external: Some(ExternalMetricStatus {
                metric: source.metric.clone(),
                current,
            }),
            ..Default::default()
        };
        if let Some(target) = target_average {
            let total = total.map_err(|e| {
                MetricFailure::new(REASON, e, |m| {
                    outer(&format!("failed to get {name} external metric: {m}"))
                })
            })?;
            let (replicas, average) =
                per_pod_replicas(scale.status, total, milli(target), tolerances);
            let current = MetricValueStatus {
                average_value: Some(milli_quantity(average)),
                ..Default::default()
            };
            return Ok((replicas, label, status(current)));
        }
        let target = target_value.as_ref().map_or(0, milli);
        let fail = |e: String| {
            MetricFailure::new(REASON, e, |m| {
                outer(&format!("failed to get external metric {name}: {m}"))
            })
        };
        let total = total.map_err(fail)?;
        let ratio = total as f64 / target as f64;
        let pods = self.pods(namespace, selector.1, "", None);
        let replicas = usage_ratio_replicas(scale.spec, ratio, || ready_pods(&pods), tolerances)
            .map_err(fail)?;
        let current = MetricValueStatus {
            value: Some(milli_quantity(total)),
            ..Default::default()
        };
        Ok((replicas, label, status(current)))
    }

    /// The values (milli-units) a custom.metrics.k8s.io read answers, by described object.
    async fn custom_metric_values(&self, path: &str) -> Result<Vec<(String, i64)>, String> {
        let list: Value = self.client.get_path(path).await.map_err(|e| {
            format!(
                "unable to fetch metrics from custom metrics API: {}",
                api_message(e)
            )
        })?;
        Ok(list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|item| {
                let object = item.pointer("/describedObject/name")?.as_str()?;
                let value = api::quantity::Quantity::from_value(&item["value"]).ok()?;
                Some((object.to_string(), value.as_milli()))
            })
            .collect())
    }

    /// One object's value of a custom metric (upstream's `GetObjectMetric`): the namespace's
    /// own for a Namespace, else the object's in the autoscaler's namespace.
    async fn object_metric(
        &self,
        namespace: &str,
        described: &CrossVersionObjectReference,
        metric: &str,
        metric_selector: Option<&str>,
    ) -> Result<i64, String> {
        let api_version = described.api_version.as_deref().unwrap_or("v1");
        let (group, _) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let path = if group.is_empty() && described.kind == "Namespace" {
            let mut path =
                format!("/apis/{CUSTOM_METRICS}/namespaces/{namespace}/metrics/{metric}");
            if let Some(s) = metric_selector {
                path.push_str(&format!("?{}", query(&[("metricLabelSelector", s)])));
            }
            path
        } else {
            let resource = self
                .resource_of_kind(api_version, &described.kind)
                .await
                .ok_or_else(|| {
                    format!(
                        "unable to fetch metrics from custom metrics API: no matches for kind \"{}\" in group \"{group}\"",
                        described.kind
                    )
                })?;
            let group_resource = if resource.group.is_empty() {
                resource.plural.to_string()
            } else {
                format!("{}.{}", resource.plural, resource.group)
            };
            custom_metrics_path(
                namespace,
                &group_resource,
                &described.name,
                metric,
                None,
                metric_selector,
            )
        };
        let values = self.custom_metric_values(&path).await?;
        match values.as_slice() {
            [(_, value)] => Ok(*value),
            other => Err(format!(
                "unable to fetch metrics from custom metrics API: the custom metrics API server returned {} results when we asked for exactly one",
                other.len()
            )),
        }
    }

    /// The sum (milli-units) of an external metric's series the selector picks (upstream's
    /// `GetExternalMetric`, summed as its replica calculator sums it).
    async fn external_metric(
        &self,
        namespace: &str,
        metric: &str,
        metric_selector: Option<&str>,
    ) -> Result<i64, String> {
        let mut path = format!("/apis/{EXTERNAL_METRICS}/namespaces/{namespace}/{metric}");
        if let Some(s) = metric_selector {
            path.push_str(&format!("?{}", query(&[("labelSelector", s)])));
        }
        let list: Value = self.client.get_path(&path).await.map_err(|e| {
            format!(
                "unable to fetch metrics from external metrics API: {}",
                api_message(e)
            )
        })?;
        let items = list["items"].as_array().cloned().unwrap_or_default();
        if items.is_empty() {
            return Err("no metrics returned from external metrics API".into());
        }
        Ok(items
            .iter()
            .filter_map(|i| api::quantity::Quantity::from_value(&i["value"]).ok())
            .map(|q| q.as_milli())
            .sum())
    }

    /// The served resource of an apiVersion and kind: kemu's own, or a custom resource whose
    /// established CustomResourceDefinition serves that version (the REST mapping upstream's
    /// controller gets from discovery).
    async fn resource_of_kind(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Option<&'static ResourceInfo> {
        if let Some(found) = api::resources::find_kind(api_version, kind) {
            return Some(found);
        }
        let (group, version) = api_version.split_once('/')?;
        let definitions =
            api::resources::find("apiextensions.k8s.io", "v1", "customresourcedefinitions")?;
        let listed = self
            .client
            .list::<DefinitionSummary>(definitions, None, &ListParams::default().at("0"))
            .await
            .ok()?;
        listed
            .items
            .iter()
            .find(|d| d.spec.group == group && d.spec.names.kind == kind)
            .and_then(|d| d.served_resource(version))
    }
}

/// Why one metric gave no proposal: the ScalingActive reason, the message of its event and
/// condition, and the error the sync reports.
#[derive(Debug, Clone, PartialEq)]
struct MetricFailure {
    reason: &'static str,
    message: String,
    error: String,
}

impl MetricFailure {
    fn new(reason: &'static str, message: String, outer: impl FnOnce(&str) -> String) -> Self {
        let error = outer(&message);
        MetricFailure {
            reason,
            message,
            error,
        }
    }
}

/// The target's replicas as its scale reports them.
#[derive(Debug, Clone, Copy)]
struct Replicas {
    spec: i32,
    status: i32,
}

const CUSTOM_METRICS: &str = "custom.metrics.k8s.io/v1beta2";
const EXTERNAL_METRICS: &str = "external.metrics.k8s.io/v1beta1";

/// A query string, URL-encoded.
fn query(pairs: &[(&str, &str)]) -> String {
    serde_urlencoded::to_string(pairs).unwrap_or_default()
}

/// The custom.metrics.k8s.io path of a namespaced object's metric (`*`: the objects the
/// selector picks).
fn custom_metrics_path(
    namespace: &str,
    group_resource: &str,
    name: &str,
    metric: &str,
    selector: Option<&str>,
    metric_selector: Option<&str>,
) -> String {
    let mut params = Vec::new();
    if let Some(s) = selector {
        params.push(("labelSelector", s));
    }
    if let Some(s) = metric_selector {
        params.push(("metricLabelSelector", s));
    }
    let mut path =
        format!("/apis/{CUSTOM_METRICS}/namespaces/{namespace}/{group_resource}/{name}/{metric}");
    if !params.is_empty() {
        path.push('?');
        path.push_str(&query(&params));
    }
    path
}

/// A metric's selector in the query-string form (None: no selector, every series).
fn metric_selector(
    selector: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
) -> Result<Option<String>, String> {
    let Some(selector) = selector else {
        return Ok(None);
    };
    let json = serde_json::to_value(selector).map_err(|e| e.to_string())?;
    let parsed = LabelSelector::from_label_selector_json(&json).map_err(|e| e.to_string())?;
    let text = parsed.to_string();
    Ok((!text.is_empty()).then_some(text))
}

/// An API error's message as client-go shows it (the Status message).
fn api_message(error: api::client::ClientError) -> String {
    match error {
        api::client::ClientError::Api { message, .. } => message,
        other => other.to_string(),
    }
}

fn milli(q: &Quantity) -> i64 {
    api::quantity::parse(&q.0)
        .map(|q| q.as_milli())
        .unwrap_or(0)
}

/// k8s-openapi's timestamps are jiff's; the core works in chrono.
fn jiff(t: DateTime<Utc>) -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::new(t.timestamp(), t.timestamp_subsec_nanos() as i32)
        .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
}

fn chrono_of(t: k8s_openapi::jiff::Timestamp) -> DateTime<Utc> {
    DateTime::from_timestamp(t.as_second(), t.subsec_nanosecond().max(0) as u32).unwrap_or_default()
}

/// A milli-value as Go's `resource.NewMilliQuantity(v, DecimalSI).String()` writes it.
fn milli_quantity(milli: i64) -> Quantity {
    Quantity(if milli % 1000 == 0 {
        (milli / 1000).to_string()
    } else {
        format!("{milli}m")
    })
}

/// What the core reads of a pod; its request of `resource` is `container`'s alone when one is
/// named (a pod without that container requests none).
fn pod_facts(pod: &Pod, resource: &str, container: Option<&str>) -> PodFacts {
    let status = pod.status.as_ref();
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .map(|c| {
            (
                c.status == "True",
                c.last_transition_time.as_ref().map(|t| chrono_of(t.0)),
            )
        });
    let mut request = Ok(0);
    for c in pod
        .spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .filter(|c| container.is_none_or(|wanted| c.name == wanted))
    {
        let value = c
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get(resource))
            .and_then(|q| api::quantity::parse(&q.0).ok());
        request = match (request, value) {
            (Ok(sum), Some(q)) => Ok(sum + q.as_milli()),
            (Ok(_), None) => Err(c.name.clone()),
            (err, _) => err,
        };
    }
    PodFacts {
        name: pod.metadata.name.clone().unwrap_or_default(),
        phase: status.and_then(|s| s.phase.clone()).unwrap_or_default(),
        deleting: pod.metadata.deletion_timestamp.is_some(),
        start_time: status
            .and_then(|s| s.start_time.as_ref())
            .map(|t| chrono_of(t.0)),
        ready,
        request_milli: request,
    }
}

/// Sets a condition as upstream's `setCondition`: the transition time moves only when the
/// status does.
fn set_condition(
    conditions: &mut Vec<HorizontalPodAutoscalerCondition>,
    update: &ConditionUpdate,
    now: DateTime<Utc>,
) {
    let status = if update.status { "True" } else { "False" };
    let fresh = HorizontalPodAutoscalerCondition {
        type_: update.kind.into(),
        status: status.into(),
        reason: Some(update.reason.into()),
        message: Some(update.message.clone()),
        last_transition_time: Some(Time(jiff(now))),
        observed_generation: None,
    };
    match conditions.iter_mut().find(|c| c.type_ == update.kind) {
        Some(existing) => {
            let since = if existing.status == status {
                existing.last_transition_time.clone()
            } else {
                fresh.last_transition_time.clone()
            };
            *existing = HorizontalPodAutoscalerCondition {
                last_transition_time: since,
                ..fresh
            };
        }
        None => conditions.push(fresh),
    }
}

fn condition(
    kind: &'static str,
    status: bool,
    reason: &'static str,
    message: String,
) -> ConditionUpdate {
    ConditionUpdate {
        kind,
        status,
        reason,
        message,
    }
}

/// The behavior's tolerances (the 0.1 default where none is given).
fn tolerances(hpa: &HorizontalPodAutoscaler) -> Tolerances {
    let behavior = hpa.spec.behavior.as_ref();
    let of = |rules: Option<&k8s_openapi::api::autoscaling::v2::HPAScalingRules>| {
        rules
            .and_then(|r| r.tolerance.as_ref())
            .and_then(|q| api::quantity::parse(&q.0).ok())
            .map(|q| q.as_milli() as f64 / 1000.0)
    };
    let default = Tolerances::default();
    Tolerances {
        scale_down: of(behavior.and_then(|b| b.scale_down.as_ref())).unwrap_or(default.scale_down),
        scale_up: of(behavior.and_then(|b| b.scale_up.as_ref())).unwrap_or(default.scale_up),
    }
}

impl crate::manager::HasCaches for HorizontalController {
    fn caches_synced(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send>> {
        let (a, b) = (self.autoscalers.clone(), self.pods.clone());
        Box::pin(async move { a.wait_synced().await && b.wait_synced().await })
    }
}

/// What a sync decided, for the status write.
struct Decision {
    current: i32,
    desired: i32,
    metrics: Vec<MetricStatus>,
    rescaled: bool,
}

impl HorizontalController {
    /// Writes the status if it changed; a deleted autoscaler is no error.
    async fn write_status(
        &self,
        hpa: &HorizontalPodAutoscaler,
        status: HorizontalPodAutoscalerStatus,
    ) -> Result<(), ReconcileError> {
        if hpa.status.as_ref() == Some(&status) {
            return Ok(());
        }
        let mut updated = hpa.clone();
        updated.status = Some(status);
        let resource = api::resources::find("autoscaling", "v2", "horizontalpodautoscalers")
            .ok_or_else(|| ReconcileError::Invalid("autoscaling/v2 is not served".into()))?;
        let (namespace, name) = (
            hpa.metadata.namespace.as_deref(),
            hpa.metadata.name.as_deref().unwrap_or_default(),
        );
        match self
            .client
            .update_status::<_, Value>(resource, namespace, name, &updated)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(ReconcileError::api("update status")(e)),
        }
    }

    /// The sync itself; conditions go into `conditions` as they are decided.
    async fn sync(
        &self,
        key: &str,
        hpa: &HorizontalPodAutoscaler,
        conditions: &mut Vec<HorizontalPodAutoscalerCondition>,
    ) -> Result<Decision, String> {
        let now = Utc::now();
        let spec = hpa.spec.clone();
        let (namespace, _) = split_key(key);
        let reference = &spec.scale_target_ref;
        let api_version = reference.api_version.clone().unwrap_or_else(|| "v1".into());
        let target = self
            .resource_of_kind(&api_version, &reference.kind)
            .await
            .filter(|r| r.has_subresource("scale"));
        let scale: Result<Value, String> = match target {
            Some(resource) => self
                .client
                .get_subresource(resource, namespace, &reference.name, Some("scale"))
                .await
                .map_err(|e| match e {
                    api::client::ClientError::Api { message, .. } => message,
                    other => other.to_string(),
                }),
            None => Err(format!(
                "unable to determine resource for scale target reference: no matches for kind \"{}\" in version \"{api_version}\"",
                reference.kind
            )),
        };
        let scale = match scale {
            Ok(s) => s,
            Err(e) => {
                let message =
                    format!("the HPA controller was unable to get the target's current scale: {e}");
                set_condition(
                    conditions,
                    &condition("AbleToScale", false, "FailedGetScale", message.clone()),
                    now,
                );
                self.record(hpa, true, "FailedGetScale", &e);
                return Err(message);
            }
        };
        set_condition(
            conditions,
            &condition(
                "AbleToScale",
                true,
                "SucceededGetScale",
                "the HPA controller was able to get the target's current scale".into(),
            ),
            now,
        );
        let replicas_at =
            |pointer: &str| scale.pointer(pointer).and_then(Value::as_i64).unwrap_or(0) as i32;
        let current = replicas_at("/spec/replicas");
        let scale_replicas = Replicas {
            spec: current,
            status: replicas_at("/status/replicas"),
        };
        let min = spec.min_replicas.unwrap_or(1);
        let max = spec.max_replicas;
        let behavior = spec.behavior.clone();
        let limits = Limits {
            min,
            max,
            scale_up: behavior
                .as_ref()
                .map(|b| b.scale_up.clone().unwrap_or_default()),
            scale_down: behavior
                .as_ref()
                .map(|b| b.scale_down.clone().unwrap_or_default()),
            has_behavior: behavior.is_some(),
            downscale_window: chrono::Duration::from_std(self.config.downscale_window)
                .unwrap_or_else(|_| chrono::Duration::seconds(300)),
        };
        let mut metric_statuses = Vec::new();
        let (desired, reason) = if current == 0 && min != 0 {
            set_condition(
                conditions,
                &condition(
                    "ScalingActive",
                    false,
                    "ScalingDisabled",
                    "scaling is disabled since the replica count of the target is zero".into(),
                ),
                now,
            );
            (0, String::new())
        } else if current > max {
            (
                max,
                "Current number of replicas above Spec.MaxReplicas".to_string(),
            )
        } else if current < min {
            (
                min,
                "Current number of replicas below Spec.MinReplicas".to_string(),
            )
        } else {
            let selector_text = scale
                .pointer("/status/selector")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if selector_text.is_empty() {
                self.record(hpa, true, "SelectorRequired", "selector is required");
                let c = condition(
                    "ScalingActive",
                    false,
                    "InvalidSelector",
                    "the HPA target's scale is missing a selector".into(),
                );
                set_condition(conditions, &c, now);
                return Err(c.message);
            }
            let selector = match LabelSelector::parse(selector_text) {
                Ok(s) => s,
                Err(e) => {
                    let message = format!("couldn't convert selector into a corresponding internal selector object: {e}");
                    self.record(hpa, true, "InvalidSelector", &message);
                    set_condition(
                        conditions,
                        &condition("ScalingActive", false, "InvalidSelector", message.clone()),
                        now,
                    );
                    return Err(message);
                }
            };
            let tolerances = tolerances(hpa);
            let specs = spec.metrics.clone().unwrap_or_default();
            let (mut best, mut best_name) = (0, String::new());
            let mut invalid: Vec<MetricFailure> = Vec::new();
            for metric in &specs {
                match self
                    .metric_proposal(
                        hpa,
                        metric,
                        scale_replicas,
                        (selector_text, &selector),
                        tolerances,
                    )
                    .await
                {
                    Ok((replicas, name, status)) => {
                        metric_statuses.push(status);
                        if best == 0 || replicas > best {
                            best = replicas;
                            best_name = name;
                        }
                    }
                    Err(failure) => {
                        // Upstream keeps each metric's place in the status: an empty one.
                        metric_statuses.push(MetricStatus::default());
                        self.record(hpa, true, failure.reason, &failure.message);
                        invalid.push(failure);
                    }
                }
            }
            if let Some(first) = invalid.first() {
                if invalid.len() >= specs.len() || best < current {
                    let message = format!(
                        "the HPA was unable to compute the replica count: {}",
                        first.message
                    );
                    set_condition(
                        conditions,
                        &condition("ScalingActive", false, first.reason, message),
                        now,
                    );
                    let error = format!(
                        "invalid metrics ({} invalid out of {}), first error is: {}",
                        invalid.len(),
                        specs.len(),
                        first.error
                    );
                    self.record(hpa, true, "FailedComputeMetricsReplicas", &error);
                    return Err(format!(
                        "failed to compute desired number of replicas based on listed metrics for {}/{}/{}: {error}",
                        reference.kind,
                        namespace.unwrap_or_default(),
                        reference.name
                    ));
                }
            }
            set_condition(
                conditions,
                &condition("ScalingActive", true, "ValidMetricFound", format!("the HPA was able to successfully calculate a replica count from {best_name}")),
                now,
            );
            let reason = if best > current {
                format!("{best_name} above target")
            } else if best < current {
                "All metrics below target".to_string()
            } else {
                String::new()
            };
            let (normalized, updates) = self
                .history
                .lock()
                .entry(key.to_string())
                .or_default()
                .normalize(&limits, current, best, now);
            for update in &updates {
                set_condition(conditions, update, now);
            }
            (normalized, reason)
        };
        let rescale = desired != current;
        if rescale {
            let resource = target.ok_or("no scale target")?;
            let patch = Patch::Merge(serde_json::json!({"spec": {"replicas": desired}}));
            if let Err(e) = self
                .client
                .patch_scale::<Value>(resource, namespace, &reference.name, &patch)
                .await
            {
                let message =
                    format!("the HPA controller was unable to update the target scale: {e}");
                set_condition(
                    conditions,
                    &condition("AbleToScale", false, "FailedUpdateScale", message.clone()),
                    now,
                );
                self.record(
                    hpa,
                    true,
                    "FailedRescale",
                    &format!("New size: {desired}; reason: {reason}; error: {e}"),
                );
                return Err(message);
            }
            set_condition(
                conditions,
                &condition(
                    "AbleToScale",
                    true,
                    "SucceededRescale",
                    format!("the HPA controller was able to update the target scale to {desired}"),
                ),
                now,
            );
            self.record(
                hpa,
                false,
                "SuccessfulRescale",
                &format!("New size: {desired}; reason: {reason}"),
            );
            self.history
                .lock()
                .entry(key.to_string())
                .or_default()
                .record_scale(&limits, current, desired, now);
        }
        Ok(Decision {
            current,
            desired: if rescale { desired } else { current },
            metrics: metric_statuses,
            rescaled: rescale,
        })
    }
}

impl Reconciler for HorizontalController {
    async fn reconcile(&self, key: &str) -> Result<Outcome, ReconcileError> {
        let Some(hpa) = self.autoscalers.get(key) else {
            self.history.lock().remove(key);
            return Ok(Outcome::Done);
        };
        let old = hpa.status.clone().unwrap_or_default();
        let mut conditions = old.conditions.clone().unwrap_or_default();
        let result = self.sync(key, &hpa, &mut conditions).await;
        let status = match &result {
            Ok(d) => HorizontalPodAutoscalerStatus {
                current_replicas: Some(d.current),
                desired_replicas: d.desired,
                last_scale_time: if d.rescaled {
                    Some(Time(jiff(Utc::now())))
                } else {
                    old.last_scale_time.clone()
                },
                current_metrics: (!d.metrics.is_empty()).then(|| d.metrics.clone()),
                conditions: Some(conditions),
                observed_generation: old.observed_generation,
            },
            Err(_) => HorizontalPodAutoscalerStatus {
                conditions: Some(conditions),
                ..old.clone()
            },
        };
        self.write_status(&hpa, status).await?;
        match result {
            Ok(_) => Ok(Outcome::RequeueAfter(self.config.sync_period)),
            Err(e) => {
                debug!(autoscaler = key, error = %e, "sync failed");
                Ok(Outcome::RequeueAfter(self.config.sync_period))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, PodSpec, ResourceRequirements};

    fn container(name: &str, cpu: Option<&str>) -> Container {
        Container {
            name: name.into(),
            resources: Some(ResourceRequirements {
                requests: cpu.map(|c| [("cpu".to_string(), Quantity(c.into()))].into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_container_resource_counts_that_containers_request_alone() {
        let pod = Pod {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("p".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![container("app", Some("200m")), container("sidecar", None)],
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            pod_facts(&pod, "cpu", None).request_milli,
            Err("sidecar".into())
        );
        assert_eq!(pod_facts(&pod, "cpu", Some("app")).request_milli, Ok(200));
        assert_eq!(
            pod_facts(&pod, "cpu", Some("sidecar")).request_milli,
            Err("sidecar".into())
        );
        assert_eq!(pod_facts(&pod, "cpu", Some("other")).request_milli, Ok(0));
    }

    #[test]
    fn adapter_paths_carry_their_selectors() {
        assert_eq!(
            custom_metrics_path("ns", "pods", "*", "qps", Some("app=web,tier in (a,b)"), None),
            "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/pods/*/qps?labelSelector=app%3Dweb%2Ctier+in+%28a%2Cb%29"
        );
        assert_eq!(
            custom_metrics_path("ns", "deployments.apps", "web", "qps", None, Some("verb=GET")),
            "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/deployments.apps/web/qps?metricLabelSelector=verb%3DGET"
        );
        let selector: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector =
            serde_json::from_value(serde_json::json!({"matchLabels": {"queue": "jobs"}}))
                .expect("selector");
        assert_eq!(
            metric_selector(Some(&selector)),
            Ok(Some("queue=jobs".into()))
        );
        assert_eq!(metric_selector(None), Ok(None));
    }
}
