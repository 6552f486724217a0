//! The HorizontalPodAutoscaler controller's reconciler: every sync period (15 s by default) it
//! reads the target's `scale` subresource, the pods' metrics from `metrics.k8s.io` and the pods
//! from the shared informer, lets [`crate::hpa`] decide, patches the target's scale, and writes
//! the autoscaler's status and events as kube-controller-manager does.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use api::client::{Client, ListParams, Patch};
use api::event_sink::EventSink;
use api::informer::{Informer, InformerEvent, Store};
use api::selectors::LabelSelector;
use chrono::{DateTime, Utc};
use k8s_openapi::api::autoscaling::v2::{
    HorizontalPodAutoscaler, HorizontalPodAutoscalerCondition, HorizontalPodAutoscalerStatus,
    MetricSpec, MetricStatus, MetricValueStatus, ResourceMetricStatus,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use parking_lot::Mutex;
use serde_json::Value;
use tracing::debug;

use crate::events::Recorder;
use crate::hpa::{
    resource_replicas, ConditionUpdate, History, Limits, PodFacts, PodMetric, Target, Tolerances,
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

    /// The usage (milli-units) of `resource` of each pod metrics-server-style metrics report
    /// for the selector; a pod whose containers do not all report it is left out.
    async fn pod_metrics(
        &self,
        namespace: &str,
        selector: &str,
        resource: &str,
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
            let mut total = 0i64;
            let mut complete = true;
            for container in item["containers"].as_array().into_iter().flatten() {
                match container["usage"]
                    .get(resource)
                    .and_then(|q| api::quantity::Quantity::from_value(q).ok())
                {
                    Some(q) => total += q.as_milli(),
                    None => complete = false,
                }
            }
            if complete {
                out.insert(
                    name.to_string(),
                    PodMetric {
                        value_milli: total,
                        timestamp,
                        window,
                    },
                );
            }
        }
        Ok(out)
    }

    /// The pods of `namespace` the selector picks, as the core reads them.
    fn pods(&self, namespace: &str, selector: &LabelSelector, resource: &str) -> Vec<PodFacts> {
        self.pods
            .by_index(BY_NAMESPACE, namespace)
            .iter()
            .filter(|p| selector.matches(&p.metadata.labels.as_ref()))
            .map(|p| pod_facts(p, resource))
            .collect()
    }

    /// One metric's proposal and status (`computeReplicasForMetric`); an error carries the
    /// ScalingActive condition and event reason.
    async fn metric_proposal(
        &self,
        hpa: &HorizontalPodAutoscaler,
        metric: &MetricSpec,
        current: i32,
        selector: (&str, &LabelSelector),
        tolerances: Tolerances,
    ) -> Result<(i32, String, MetricStatus), (&'static str, String)> {
        let namespace = hpa.metadata.namespace.as_deref().unwrap_or_default();
        let (source, failed) = match (
            metric.type_.as_str(),
            &metric.resource,
            &metric.container_resource,
        ) {
            ("Resource", Some(r), _) => (
                (r.name.as_str(), &r.target, None),
                "FailedGetResourceMetric",
            ),
            ("ContainerResource", _, Some(c)) => (
                (c.name.as_str(), &c.target, Some(c.container.as_str())),
                "FailedGetContainerResourceMetric",
            ),
            (other, _, _) => {
                return Err((
                    "InvalidMetricSourceType",
                    format!("unknown metric source type {other:?}"),
                ))
            }
        };
        let (resource, target, container) = source;
        let target = match (&target.average_value, target.average_utilization) {
            (Some(value), _) => {
                let milli = api::quantity::parse(&value.0).map(|q| q.as_milli()).unwrap_or(0);
                Target::AverageValue(milli)
            }
            (None, Some(utilization)) => Target::Utilization(utilization),
            (None, None) => {
                return Err((
                    failed,
                    "invalid resource metric source: neither an average utilization target nor an average value (usage) target was set".into(),
                ))
            }
        };
        let fail = |e: String| {
            let what = match target {
                Target::AverageValue(_) => "usage",
                Target::Utilization(_) => "utilization",
            };
            (
                failed,
                format!("failed to get {resource} resource metric value: failed to get {resource} {what}: {e}"),
            )
        };
        if container.is_some() {
            return Err(fail("container resource metrics are not modelled".into()));
        }
        let metrics = self
            .pod_metrics(namespace, selector.0, resource)
            .await
            .map_err(fail)?;
        let pods = self.pods(namespace, selector.1, resource);
        let proposal = resource_replicas(
            resource,
            current,
            target,
            &pods,
            metrics,
            tolerances,
            Utc::now(),
        )
        .map_err(fail)?;
        let name = match target {
            Target::Utilization(_) => {
                format!("{resource} resource utilization (percentage of request)")
            }
            Target::AverageValue(_) => format!("{resource} resource"),
        };
        let status = MetricStatus {
            type_: "Resource".into(),
            resource: Some(ResourceMetricStatus {
                name: resource.to_string(),
                current: MetricValueStatus {
                    average_utilization: proposal.utilization,
                    average_value: Some(Quantity(milli_quantity(proposal.average_milli))),
                    value: None,
                },
            }),
            ..Default::default()
        };
        Ok((proposal.replicas, name, status))
    }
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
fn milli_quantity(milli: i64) -> String {
    if milli % 1000 == 0 {
        (milli / 1000).to_string()
    } else {
        format!("{milli}m")
    }
}

fn pod_facts(pod: &Pod, resource: &str) -> PodFacts {
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
    for container in pod.spec.iter().flat_map(|s| s.containers.iter()) {
        let value = container
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get(resource))
            .and_then(|q| api::quantity::parse(&q.0).ok());
        request = match (request, value) {
            (Ok(sum), Some(q)) => Ok(sum + q.as_milli()),
            (Ok(_), None) => Err(container.name.clone()),
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
        let target = api::resources::find_kind(&api_version, &reference.kind)
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
        let current = scale
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(0) as i32;
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
            let mut invalid: Vec<(&'static str, String)> = Vec::new();
            for metric in &specs {
                match self
                    .metric_proposal(hpa, metric, current, (selector_text, &selector), tolerances)
                    .await
                {
                    Ok((replicas, name, status)) => {
                        metric_statuses.push(status);
                        if best == 0 || replicas > best {
                            best = replicas;
                            best_name = name;
                        }
                    }
                    Err(failure) => invalid.push(failure),
                }
            }
            if let Some((reason, first)) = invalid.first() {
                self.record(hpa, true, reason, first);
                if invalid.len() >= specs.len() || best < current {
                    let message =
                        format!("the HPA was unable to compute the replica count: {first}");
                    set_condition(
                        conditions,
                        &condition("ScalingActive", false, reason, message),
                        now,
                    );
                    return Err(format!(
                        "failed to compute desired number of replicas based on listed metrics for {}: invalid metrics ({} invalid out of {}), first error is: {first}",
                        reference.name,
                        invalid.len(),
                        specs.len()
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
