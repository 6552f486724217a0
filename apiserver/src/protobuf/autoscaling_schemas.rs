//! autoscaling/v2 and v1 HorizontalPodAutoscaler messages (what `kubectl autoscale` sends),
//! from Kubernetes' `generated.proto`. Data, not logic.

use super::{
    i32_o, i32_p, i32_r, i64_p, msg, msg_p, msgs, quantity, s, s_ptr, s_req, time, Msg,
    LABEL_SELECTOR, OBJECT_META,
};

pub(super) static HPA_V2: Msg = Msg {
    name: "HorizontalPodAutoscaler",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &HPA_V2_SPEC),
        msg(3, "status", &HPA_V2_STATUS),
    ],
};

static CROSS_VERSION_REFERENCE: Msg = Msg {
    name: "CrossVersionObjectReference",
    fields: &[s_req(1, "kind"), s_req(2, "name"), s(3, "apiVersion")],
};

static HPA_V2_SPEC: Msg = Msg {
    name: "HorizontalPodAutoscalerSpec",
    fields: &[
        msg(1, "scaleTargetRef", &CROSS_VERSION_REFERENCE),
        i32_p(2, "minReplicas"),
        i32_r(3, "maxReplicas"),
        msgs(4, "metrics", &METRIC_SPEC),
        msg_p(5, "behavior", &BEHAVIOR),
    ],
};

static METRIC_SPEC: Msg = Msg {
    name: "MetricSpec",
    fields: &[
        s_req(1, "type"),
        msg_p(2, "object", &OBJECT_METRIC_SOURCE),
        msg_p(3, "pods", &PODS_METRIC_SOURCE),
        msg_p(4, "resource", &RESOURCE_METRIC_SOURCE),
        msg_p(7, "containerResource", &CONTAINER_RESOURCE_METRIC_SOURCE),
        msg_p(5, "external", &PODS_METRIC_SOURCE),
    ],
};

static OBJECT_METRIC_SOURCE: Msg = Msg {
    name: "ObjectMetricSource",
    fields: &[
        msg(1, "describedObject", &CROSS_VERSION_REFERENCE),
        msg(2, "target", &METRIC_TARGET),
        msg(3, "metric", &METRIC_IDENTIFIER),
    ],
};

static PODS_METRIC_SOURCE: Msg = Msg {
    name: "PodsMetricSource",
    fields: &[
        msg(1, "metric", &METRIC_IDENTIFIER),
        msg(2, "target", &METRIC_TARGET),
    ],
};

static RESOURCE_METRIC_SOURCE: Msg = Msg {
    name: "ResourceMetricSource",
    fields: &[s_req(1, "name"), msg(2, "target", &METRIC_TARGET)],
};

static CONTAINER_RESOURCE_METRIC_SOURCE: Msg = Msg {
    name: "ContainerResourceMetricSource",
    fields: &[
        s_req(1, "name"),
        msg(2, "target", &METRIC_TARGET),
        s_req(3, "container"),
    ],
};

static METRIC_IDENTIFIER: Msg = Msg {
    name: "MetricIdentifier",
    fields: &[s_req(1, "name"), msg_p(2, "selector", &LABEL_SELECTOR)],
};

static METRIC_TARGET: Msg = Msg {
    name: "MetricTarget",
    fields: &[
        s_req(1, "type"),
        quantity(2, "value"),
        quantity(3, "averageValue"),
        i32_p(4, "averageUtilization"),
    ],
};

static BEHAVIOR: Msg = Msg {
    name: "HorizontalPodAutoscalerBehavior",
    fields: &[
        msg_p(1, "scaleUp", &SCALING_RULES),
        msg_p(2, "scaleDown", &SCALING_RULES),
    ],
};

static SCALING_RULES: Msg = Msg {
    name: "HPAScalingRules",
    fields: &[
        i32_p(3, "stabilizationWindowSeconds"),
        s_ptr(1, "selectPolicy"),
        msgs(2, "policies", &SCALING_POLICY),
        quantity(4, "tolerance"),
    ],
};

static SCALING_POLICY: Msg = Msg {
    name: "HPAScalingPolicy",
    fields: &[
        s_req(1, "type"),
        i32_r(2, "value"),
        i32_r(3, "periodSeconds"),
    ],
};

static HPA_V2_STATUS: Msg = Msg {
    name: "HorizontalPodAutoscalerStatus",
    fields: &[
        i64_p(1, "observedGeneration"),
        time(2, "lastScaleTime"),
        i32_o(3, "currentReplicas"),
        i32_r(4, "desiredReplicas"),
        msgs(5, "currentMetrics", &METRIC_STATUS),
        msgs(6, "conditions", &HPA_CONDITION),
    ],
};

static METRIC_STATUS: Msg = Msg {
    name: "MetricStatus",
    fields: &[
        s_req(1, "type"),
        msg_p(2, "object", &OBJECT_METRIC_STATUS),
        msg_p(3, "pods", &PODS_METRIC_STATUS),
        msg_p(4, "resource", &RESOURCE_METRIC_STATUS),
        msg_p(7, "containerResource", &CONTAINER_RESOURCE_METRIC_STATUS),
        msg_p(5, "external", &PODS_METRIC_STATUS),
    ],
};

static OBJECT_METRIC_STATUS: Msg = Msg {
    name: "ObjectMetricStatus",
    fields: &[
        msg(1, "metric", &METRIC_IDENTIFIER),
        msg(2, "current", &METRIC_VALUE_STATUS),
        msg(3, "describedObject", &CROSS_VERSION_REFERENCE),
    ],
};

static PODS_METRIC_STATUS: Msg = Msg {
    name: "PodsMetricStatus",
    fields: &[
        msg(1, "metric", &METRIC_IDENTIFIER),
        msg(2, "current", &METRIC_VALUE_STATUS),
    ],
};

static RESOURCE_METRIC_STATUS: Msg = Msg {
    name: "ResourceMetricStatus",
    fields: &[s_req(1, "name"), msg(2, "current", &METRIC_VALUE_STATUS)],
};

static CONTAINER_RESOURCE_METRIC_STATUS: Msg = Msg {
    name: "ContainerResourceMetricStatus",
    fields: &[
        s_req(1, "name"),
        msg(2, "current", &METRIC_VALUE_STATUS),
        s_req(3, "container"),
    ],
};

static METRIC_VALUE_STATUS: Msg = Msg {
    name: "MetricValueStatus",
    fields: &[
        quantity(1, "value"),
        quantity(2, "averageValue"),
        i32_p(3, "averageUtilization"),
    ],
};

static HPA_CONDITION: Msg = Msg {
    name: "HorizontalPodAutoscalerCondition",
    fields: &[
        s_req(1, "type"),
        s_req(2, "status"),
        time(3, "lastTransitionTime"),
        s(4, "reason"),
        s(5, "message"),
    ],
};

pub(super) static HPA_V1: Msg = Msg {
    name: "HorizontalPodAutoscaler",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &HPA_V1_SPEC),
        msg(3, "status", &HPA_V1_STATUS),
    ],
};

static HPA_V1_SPEC: Msg = Msg {
    name: "HorizontalPodAutoscalerSpec",
    fields: &[
        msg(1, "scaleTargetRef", &CROSS_VERSION_REFERENCE),
        i32_p(2, "minReplicas"),
        i32_r(3, "maxReplicas"),
        i32_p(4, "targetCPUUtilizationPercentage"),
    ],
};

static HPA_V1_STATUS: Msg = Msg {
    name: "HorizontalPodAutoscalerStatus",
    fields: &[
        i64_p(1, "observedGeneration"),
        time(2, "lastScaleTime"),
        i32_r(3, "currentReplicas"),
        i32_r(4, "desiredReplicas"),
        i32_p(5, "currentCPUUtilizationPercentage"),
    ],
};
