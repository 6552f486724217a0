//! Field order of autoscaling/v1 and v2 HorizontalPodAutoscalers, of metrics.k8s.io/v1beta1
//! NodeMetrics and PodMetrics and of the custom and external metrics adapters' values, as their
//! Go structs declare them. Data, not logic.

use super::types::{LABEL_SELECTOR, OBJECT_META, OBJECT_REFERENCE};
use super::{f, t, Ty};

pub static HPA_V2: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    t("spec", &HPA_V2_SPEC),
    t("status", &HPA_V2_STATUS),
]);
static HPA_V2_SPEC: Ty = Ty(&[
    t("scaleTargetRef", &CROSS_VERSION_REFERENCE),
    f("minReplicas"),
    f("maxReplicas"),
    t("metrics", &METRIC_SPEC),
    t("behavior", &BEHAVIOR),
]);
static CROSS_VERSION_REFERENCE: Ty = Ty(&[f("kind"), f("name"), f("apiVersion")]);
static METRIC_SPEC: Ty = Ty(&[
    f("type"),
    t("object", &OBJECT_METRIC_SOURCE),
    t("pods", &PODS_METRIC_SOURCE),
    t("resource", &RESOURCE_METRIC_SOURCE),
    t("containerResource", &CONTAINER_RESOURCE_METRIC_SOURCE),
    t("external", &PODS_METRIC_SOURCE),
]);
static OBJECT_METRIC_SOURCE: Ty = Ty(&[
    t("describedObject", &CROSS_VERSION_REFERENCE),
    t("target", &METRIC_TARGET),
    t("metric", &METRIC_IDENTIFIER),
]);
static PODS_METRIC_SOURCE: Ty = Ty(&[t("metric", &METRIC_IDENTIFIER), t("target", &METRIC_TARGET)]);
static RESOURCE_METRIC_SOURCE: Ty = Ty(&[f("name"), t("target", &METRIC_TARGET)]);
static CONTAINER_RESOURCE_METRIC_SOURCE: Ty =
    Ty(&[f("name"), t("target", &METRIC_TARGET), f("container")]);
static METRIC_IDENTIFIER: Ty = Ty(&[f("name"), t("selector", &LABEL_SELECTOR)]);
static METRIC_TARGET: Ty = Ty(&[
    f("type"),
    f("value"),
    f("averageValue"),
    f("averageUtilization"),
]);
static BEHAVIOR: Ty = Ty(&[t("scaleUp", &SCALING_RULES), t("scaleDown", &SCALING_RULES)]);
static SCALING_RULES: Ty = Ty(&[
    f("stabilizationWindowSeconds"),
    f("selectPolicy"),
    t("policies", &SCALING_POLICY),
    f("tolerance"),
]);
static SCALING_POLICY: Ty = Ty(&[f("type"), f("value"), f("periodSeconds")]);
static HPA_V2_STATUS: Ty = Ty(&[
    f("observedGeneration"),
    f("lastScaleTime"),
    f("currentReplicas"),
    f("desiredReplicas"),
    t("currentMetrics", &METRIC_STATUS),
    t("conditions", &HPA_CONDITION),
]);
static METRIC_STATUS: Ty = Ty(&[
    f("type"),
    t("object", &OBJECT_METRIC_STATUS),
    t("pods", &PODS_METRIC_STATUS),
    t("resource", &RESOURCE_METRIC_STATUS),
    t("containerResource", &CONTAINER_RESOURCE_METRIC_STATUS),
    t("external", &PODS_METRIC_STATUS),
]);
static OBJECT_METRIC_STATUS: Ty = Ty(&[
    t("metric", &METRIC_IDENTIFIER),
    t("current", &METRIC_VALUE_STATUS),
    t("describedObject", &CROSS_VERSION_REFERENCE),
]);
static PODS_METRIC_STATUS: Ty = Ty(&[
    t("metric", &METRIC_IDENTIFIER),
    t("current", &METRIC_VALUE_STATUS),
]);
static RESOURCE_METRIC_STATUS: Ty = Ty(&[f("name"), t("current", &METRIC_VALUE_STATUS)]);
static CONTAINER_RESOURCE_METRIC_STATUS: Ty = Ty(&[
    f("name"),
    t("current", &METRIC_VALUE_STATUS),
    f("container"),
]);
static METRIC_VALUE_STATUS: Ty = Ty(&[f("value"), f("averageValue"), f("averageUtilization")]);
static HPA_CONDITION: Ty = Ty(&[
    f("type"),
    f("status"),
    f("lastTransitionTime"),
    f("reason"),
    f("message"),
]);

pub static HPA_V1: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    t("spec", &HPA_V1_SPEC),
    t("status", &HPA_V1_STATUS),
]);
static HPA_V1_SPEC: Ty = Ty(&[
    t("scaleTargetRef", &CROSS_VERSION_REFERENCE),
    f("minReplicas"),
    f("maxReplicas"),
    f("targetCPUUtilizationPercentage"),
]);
static HPA_V1_STATUS: Ty = Ty(&[
    f("observedGeneration"),
    f("lastScaleTime"),
    f("currentReplicas"),
    f("desiredReplicas"),
    f("currentCPUUtilizationPercentage"),
]);

pub static NODE_METRICS: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    f("timestamp"),
    f("window"),
    f("usage"),
]);
pub static POD_METRICS: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    f("timestamp"),
    f("window"),
    t("containers", &CONTAINER_METRICS),
]);
static CONTAINER_METRICS: Ty = Ty(&[f("name"), f("usage")]);
/// custom.metrics.k8s.io/v1beta2 MetricValue (the items of a MetricValueList).
pub static METRIC_VALUE: Ty = Ty(&[
    t("describedObject", &OBJECT_REFERENCE),
    t("metric", &METRIC_IDENTIFIER),
    f("timestamp"),
    f("windowSeconds"),
    f("value"),
]);
/// external.metrics.k8s.io/v1beta1 ExternalMetricValue.
pub static EXTERNAL_METRIC_VALUE: Ty = Ty(&[
    f("metricName"),
    f("metricLabels"),
    f("timestamp"),
    f("window"),
    f("value"),
]);
