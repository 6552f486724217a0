//! HorizontalPodAutoscalers: stored as autoscaling/v2 and also served as autoscaling/v1, with
//! kube-apiserver's conversion between the two and its defaults.
//!
//! What v1 cannot say travels in annotations, as upstream does: metrics other than a CPU
//! utilization target in `autoscaling.alpha.kubernetes.io/metrics`, the current metrics in
//! `…/current-metrics`, the conditions in `…/conditions` (each in the v1 metric and condition
//! shapes) and the scaling behavior in `…/behavior` (upstream marshals its internal type, so
//! the field names are Go's own: `ScaleUp`, `StabilizationWindowSeconds`, …). Converting to v2
//! reads them back and drops them.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use api::ResourceInfo;

pub const METRICS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/metrics";
pub const CURRENT_METRICS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
pub const CONDITIONS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/conditions";
pub const BEHAVIOR_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/behavior";
const ROUND_TRIP: [&str; 4] = [
    METRICS_ANNOTATION,
    CURRENT_METRICS_ANNOTATION,
    CONDITIONS_ANNOTATION,
    BEHAVIOR_ANNOTATION,
];
/// The target of an HPA that names no metric.
pub const DEFAULT_CPU_UTILIZATION: i64 = 80;

/// Whether this is the autoscaling/v1 view of HorizontalPodAutoscalers.
pub fn is_v1(resource: &ResourceInfo) -> bool {
    resource.group == "autoscaling" && resource.version == "v1"
}

/// Whether an object is in the autoscaling/v1 shape (by its apiVersion).
pub fn is_v1_object(object: &Value) -> bool {
    object.get("apiVersion").and_then(Value::as_str) == Some("autoscaling/v1")
}

fn cpu_utilization(metric: &Value) -> Option<&Value> {
    (metric["type"] == "Resource" && metric.pointer("/resource/name") == Some(&json!("cpu")))
        .then(|| metric.pointer("/resource/target/averageUtilization"))
        .flatten()
}

fn set(map: &mut Map<String, Value>, key: &str, value: Option<&Value>) {
    if let Some(v) = value.filter(|v| !v.is_null()) {
        map.insert(key.into(), v.clone());
    }
}

/// A v2 object (stored) in the autoscaling/v1 shape.
pub fn to_v1(v2: &Value) -> Value {
    let mut metadata = v2.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let mut annotations = drop_round_trip(&metadata);
    let spec = &v2["spec"];
    let status = &v2["status"];
    let mut out_spec = Map::new();
    set(&mut out_spec, "scaleTargetRef", spec.get("scaleTargetRef"));
    set(&mut out_spec, "minReplicas", spec.get("minReplicas"));
    set(&mut out_spec, "maxReplicas", spec.get("maxReplicas"));
    let metrics = spec["metrics"].as_array().cloned().unwrap_or_default();
    let mut others = Vec::new();
    for metric in &metrics {
        match cpu_utilization(metric) {
            Some(target) => {
                out_spec.insert("targetCPUUtilizationPercentage".into(), target.clone());
            }
            None => others.push(v1::Metric::from_v2(metric, v1::Side::Target)),
        }
    }
    let mut out_status = Map::new();
    set(
        &mut out_status,
        "observedGeneration",
        status.get("observedGeneration"),
    );
    set(
        &mut out_status,
        "lastScaleTime",
        status.get("lastScaleTime"),
    );
    out_status.insert(
        "currentReplicas".into(),
        status.get("currentReplicas").cloned().unwrap_or(json!(0)),
    );
    out_status.insert(
        "desiredReplicas".into(),
        status.get("desiredReplicas").cloned().unwrap_or(json!(0)),
    );
    let current = status["currentMetrics"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if let Some(cpu) = current.iter().find_map(|m| {
        (m["type"] == "Resource" && m.pointer("/resource/name") == Some(&json!("cpu")))
            .then(|| m.pointer("/resource/current/averageUtilization"))
            .flatten()
    }) {
        out_status.insert("currentCPUUtilizationPercentage".into(), cpu.clone());
    }
    if !others.is_empty() {
        annotations.insert(METRICS_ANNOTATION.into(), json!(encode(&others)));
    }
    if !current.is_empty() {
        let statuses: Vec<v1::Metric> = current
            .iter()
            .map(|m| v1::Metric::from_v2(m, v1::Side::Current))
            .collect();
        annotations.insert(CURRENT_METRICS_ANNOTATION.into(), json!(encode(&statuses)));
    }
    if let Some(behavior) = spec.get("behavior").filter(|b| b.is_object()) {
        annotations.insert(
            BEHAVIOR_ANNOTATION.into(),
            json!(encode(&internal::Behavior::from_v2(behavior))),
        );
    }
    if let Some(conditions) = status["conditions"].as_array().filter(|c| !c.is_empty()) {
        let conditions: Vec<v1::Condition> = conditions
            .iter()
            .filter_map(|c| serde_json::from_value(c.clone()).ok())
            .collect();
        annotations.insert(CONDITIONS_ANNOTATION.into(), json!(encode(&conditions)));
    }
    put_annotations(&mut metadata, annotations);
    json!({
        "kind": "HorizontalPodAutoscaler",
        "apiVersion": "autoscaling/v1",
        "metadata": metadata,
        "spec": out_spec,
        "status": out_status,
    })
}

/// A v1 object in the v2 shape (unconverted parts from the round-trip annotations), without
/// the v2 defaults.
pub fn to_v2(v1: &Value) -> Value {
    let mut metadata = v1.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let annotation = |key: &str| {
        v1.pointer("/metadata/annotations")
            .and_then(|a| a.get(key))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let spec = &v1["spec"];
    let status = &v1["status"];
    let mut out_spec = Map::new();
    set(&mut out_spec, "scaleTargetRef", spec.get("scaleTargetRef"));
    set(&mut out_spec, "minReplicas", spec.get("minReplicas"));
    set(&mut out_spec, "maxReplicas", spec.get("maxReplicas"));
    let mut metrics: Vec<Value> = annotation(METRICS_ANNOTATION)
        .and_then(|text| serde_json::from_str::<Vec<v1::Metric>>(&text).ok())
        .map(|others| others.iter().map(|m| m.to_v2(v1::Side::Target)).collect())
        .unwrap_or_default();
    if let Some(cpu) = spec
        .get("targetCPUUtilizationPercentage")
        .filter(|v| !v.is_null())
    {
        metrics.push(json!({"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": cpu}}}));
    }
    if !metrics.is_empty() {
        out_spec.insert("metrics".into(), Value::Array(metrics));
    }
    if let Some(behavior) = annotation(BEHAVIOR_ANNOTATION)
        .and_then(|text| serde_json::from_str::<internal::Behavior>(&text).ok())
    {
        out_spec.insert("behavior".into(), behavior.to_v2());
    }
    let mut out_status = Map::new();
    set(
        &mut out_status,
        "observedGeneration",
        status.get("observedGeneration"),
    );
    set(
        &mut out_status,
        "lastScaleTime",
        status.get("lastScaleTime"),
    );
    // v2 omits a zero currentReplicas.
    set(
        &mut out_status,
        "currentReplicas",
        status
            .get("currentReplicas")
            .filter(|n| n.as_i64() != Some(0)),
    );
    out_status.insert(
        "desiredReplicas".into(),
        status.get("desiredReplicas").cloned().unwrap_or(json!(0)),
    );
    if let Some(cpu) = status
        .get("currentCPUUtilizationPercentage")
        .filter(|v| !v.is_null())
    {
        out_status.insert(
            "currentMetrics".into(),
            json!([{"type": "Resource", "resource": {"name": "cpu",
                "current": {"averageUtilization": cpu}}}]),
        );
    }
    if let Some(current) = annotation(CURRENT_METRICS_ANNOTATION)
        .and_then(|text| serde_json::from_str::<Vec<v1::Metric>>(&text).ok())
    {
        let current: Vec<Value> = current.iter().map(|m| m.to_v2(v1::Side::Current)).collect();
        out_status.insert("currentMetrics".into(), Value::Array(current));
    }
    if let Some(conditions) = annotation(CONDITIONS_ANNOTATION)
        .and_then(|text| serde_json::from_str::<Vec<v1::Condition>>(&text).ok())
    {
        let conditions = serde_json::to_value(conditions).unwrap_or(Value::Null);
        out_status.insert("conditions".into(), conditions);
    }
    let annotations = drop_round_trip(&metadata);
    put_annotations(&mut metadata, annotations);
    let mut out = json!({
        "kind": "HorizontalPodAutoscaler",
        "apiVersion": "autoscaling/v2",
        "metadata": metadata,
        "spec": out_spec,
    });
    if v1.get("status").is_some() {
        out["status"] = Value::Object(out_status);
    }
    out
}

/// The annotations without the conversion's own.
fn drop_round_trip(metadata: &Value) -> Map<String, Value> {
    let mut annotations = metadata
        .get("annotations")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    annotations.retain(|k, _| !ROUND_TRIP.contains(&k.as_str()));
    annotations
}

fn put_annotations(metadata: &mut Value, annotations: Map<String, Value>) {
    if let Some(m) = metadata.as_object_mut() {
        if annotations.is_empty() {
            m.remove("annotations");
        } else {
            m.insert("annotations".into(), Value::Object(annotations));
        }
    }
}

/// autoscaling/v1's defaults: one replica at least.
pub fn default_v1(object: &mut Value) {
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
        if spec.get("minReplicas").is_none_or(Value::is_null) {
            spec.insert("minReplicas".into(), json!(1));
        }
    }
}

/// autoscaling/v2's defaults: one replica at least, an 80 % CPU utilization target when no
/// metric is named, and a behavior that is given filled in with the default rules.
pub fn default_v2(object: &mut Value) {
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if spec.get("minReplicas").is_none_or(Value::is_null) {
        spec.insert("minReplicas".into(), json!(1));
    }
    if spec
        .get("metrics")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        spec.insert(
            "metrics".into(),
            json!([{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": DEFAULT_CPU_UTILIZATION}}}]),
        );
    }
    let Some(behavior) = spec.get_mut("behavior").and_then(Value::as_object_mut) else {
        return;
    };
    for (direction, window, policies) in [
        (
            "scaleUp",
            0,
            json!([{"type": "Pods", "value": 4, "periodSeconds": 15},
                {"type": "Percent", "value": 100, "periodSeconds": 15}]),
        ),
        (
            "scaleDown",
            300,
            json!([{"type": "Percent", "value": 100, "periodSeconds": 15}]),
        ),
    ] {
        let rules = behavior.entry(direction).or_insert_with(|| json!({}));
        if rules.is_null() {
            *rules = json!({});
        }
        let Some(rules) = rules.as_object_mut() else {
            continue;
        };
        if rules
            .get("stabilizationWindowSeconds")
            .is_none_or(Value::is_null)
        {
            rules.insert("stabilizationWindowSeconds".into(), json!(window));
        }
        if rules.get("selectPolicy").is_none_or(Value::is_null) {
            rules.insert("selectPolicy".into(), json!("Max"));
        }
        if rules.get("policies").is_none_or(Value::is_null) {
            rules.insert("policies".into(), policies);
        }
    }
}

/// Go's `json.Marshal` of a value whose fields are declared in Go's order.
fn encode<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// The autoscaling/v1 metric and condition shapes the annotations hold (v2beta1's, in Go's
/// field order).
mod v1 {
    use super::*;

    fn some(value: &Value) -> Option<Value> {
        (!value.is_null()).then(|| value.clone())
    }

    /// Which half of a metric: a spec's target or a status's current reading.
    #[derive(Clone, Copy, PartialEq, Eq)]
    pub enum Side {
        Target,
        Current,
    }

    impl Side {
        /// The v2 member holding the numbers.
        fn key(self) -> &'static str {
            match self {
                Side::Target => "target",
                Side::Current => "current",
            }
        }
    }

    /// A v1 MetricSpec or MetricStatus (the two have the same members).
    #[derive(Serialize, Deserialize, Default)]
    #[serde(rename_all = "camelCase")]
    pub struct Metric {
        #[serde(rename = "type")]
        pub kind: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub object: Option<Source>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub pods: Option<Source>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub resource: Option<Source>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub container_resource: Option<Source>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub external: Option<Source>,
    }

    /// Every v1 metric source's and status's fields, in the order each Go struct declares
    /// those it has; each kind sets its own.
    #[derive(Serialize, Deserialize, Default)]
    #[serde(rename_all = "camelCase")]
    pub struct Source {
        #[serde(skip_serializing_if = "Option::is_none")]
        pub target: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub name: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub metric_name: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub metric_selector: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub target_value: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub target_average_utilization: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub target_average_value: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub current_value: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub current_average_utilization: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub current_average_value: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub selector: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub average_value: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub container: Option<Value>,
    }

    /// The numbers of one side: value, average value, average utilization.
    type Numbers = (Option<Value>, Option<Value>, Option<Value>);

    impl Source {
        fn set(&mut self, side: Side, (value, average, utilization): Numbers) {
            let slots = match side {
                Side::Target => (
                    &mut self.target_value,
                    &mut self.target_average_value,
                    &mut self.target_average_utilization,
                ),
                Side::Current => (
                    &mut self.current_value,
                    &mut self.current_average_value,
                    &mut self.current_average_utilization,
                ),
            };
            (*slots.0, *slots.1, *slots.2) = (value, average, utilization);
        }

        fn get(&self, side: Side) -> Numbers {
            match side {
                Side::Target => (
                    self.target_value.clone(),
                    self.target_average_value.clone(),
                    self.target_average_utilization.clone(),
                ),
                Side::Current => (
                    self.current_value.clone(),
                    self.current_average_value.clone(),
                    self.current_average_utilization.clone(),
                ),
            }
        }
    }

    fn metric_identifier(name: &Option<Value>, selector: &Option<Value>) -> Value {
        let mut m = json!({"name": name.clone().unwrap_or(json!(""))});
        if let Some(s) = selector {
            m["selector"] = s.clone();
        }
        m
    }

    /// The v2 numbers object (`target` with its type, or `current`).
    fn numbers(side: Side, kind: &str, (value, average, utilization): Numbers) -> Value {
        let mut out = match side {
            Side::Target => json!({"type": kind}),
            Side::Current => json!({}),
        };
        for (key, v) in [
            ("value", value),
            ("averageValue", average),
            ("averageUtilization", utilization),
        ] {
            if let Some(v) = v {
                out[key] = v;
            }
        }
        out
    }

    impl Metric {
        /// A v2 MetricSpec (`Side::Target`) or MetricStatus (`Side::Current`) in v1's shape.
        pub fn from_v2(m: &Value, side: Side) -> Metric {
            let kind = m["type"].as_str().unwrap_or_default().to_string();
            let mut out = Metric {
                kind: kind.clone(),
                ..Default::default()
            };
            let key = match kind.as_str() {
                "Resource" => "resource",
                "ContainerResource" => "containerResource",
                "Pods" => "pods",
                "Object" => "object",
                "External" => "external",
                _ => return out,
            };
            let s = &m[key];
            let n = &s[side.key()];
            let (value, average, utilization) = (
                some(&n["value"]),
                some(&n["averageValue"]),
                some(&n["averageUtilization"]),
            );
            let mut source = Source::default();
            match key {
                "resource" | "containerResource" => {
                    source.name = some(&s["name"]);
                    source.container = some(&s["container"]);
                    // A status's raw value is not optional in v1.
                    let average = match side {
                        Side::Current => Some(average.unwrap_or(json!("0"))),
                        Side::Target => average,
                    };
                    source.set(side, (None, average, utilization));
                }
                "pods" => {
                    source.metric_name = some(&s["metric"]["name"]);
                    source.selector = some(&s["metric"]["selector"]);
                    source.set(side, (None, average, None));
                }
                "object" => {
                    source.target = some(&s["describedObject"]);
                    source.metric_name = some(&s["metric"]["name"]);
                    source.selector = some(&s["metric"]["selector"]);
                    source.average_value = average;
                    source.set(side, (value, None, None));
                }
                _ => {
                    source.metric_name = some(&s["metric"]["name"]);
                    source.metric_selector = some(&s["metric"]["selector"]);
                    source.set(side, (value, average, None));
                }
            }
            let slot = match key {
                "resource" => &mut out.resource,
                "containerResource" => &mut out.container_resource,
                "pods" => &mut out.pods,
                "object" => &mut out.object,
                _ => &mut out.external,
            };
            *slot = Some(source);
            out
        }

        /// Back to the v2 MetricSpec or MetricStatus.
        pub fn to_v2(&self, side: Side) -> Value {
            let mut out = json!({"type": self.kind});
            let key = side.key();
            if let Some(s) = self.resource.as_ref().or(self.container_resource.as_ref()) {
                let n = s.get(side);
                let kind = if n.2.is_some() {
                    "Utilization"
                } else {
                    "AverageValue"
                };
                let mut source = json!({"name": s.name.clone().unwrap_or(json!(""))});
                source[key] = numbers(side, kind, n);
                if self.resource.is_some() {
                    out["resource"] = source;
                } else {
                    source["container"] = s.container.clone().unwrap_or(json!(""));
                    out["containerResource"] = source;
                }
            } else if let Some(s) = &self.pods {
                let mut source = json!({"metric": metric_identifier(&s.metric_name, &s.selector)});
                source[key] = numbers(side, "AverageValue", s.get(side));
                out["pods"] = source;
            } else if let Some(s) = &self.object {
                let (value, _, _) = s.get(side);
                let kind = if s.average_value.is_some() {
                    "AverageValue"
                } else {
                    "Value"
                };
                let mut source = json!({
                    "describedObject": s.target.clone().unwrap_or(json!({})),
                    "metric": metric_identifier(&s.metric_name, &s.selector),
                });
                source[key] = numbers(side, kind, (value, s.average_value.clone(), None));
                out["object"] = source;
            } else if let Some(s) = &self.external {
                let n = s.get(side);
                let kind = if n.1.is_some() {
                    "AverageValue"
                } else {
                    "Value"
                };
                let mut source =
                    json!({"metric": metric_identifier(&s.metric_name, &s.metric_selector)});
                source[key] = numbers(side, kind, n);
                out["external"] = source;
            }
            out
        }
    }

    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Condition {
        #[serde(rename = "type")]
        pub kind: String,
        pub status: String,
        #[serde(default)]
        pub last_transition_time: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub reason: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub message: Option<String>,
    }
}

/// The internal behavior type upstream writes into the v1 annotation (Go field names, no
/// omitted fields).
mod internal {
    use super::*;

    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "PascalCase")]
    pub struct Behavior {
        #[serde(default)]
        pub scale_up: Option<Rules>,
        #[serde(default)]
        pub scale_down: Option<Rules>,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "PascalCase")]
    pub struct Rules {
        #[serde(default)]
        pub stabilization_window_seconds: Option<i64>,
        #[serde(default)]
        pub select_policy: Option<String>,
        #[serde(default)]
        pub policies: Option<Vec<Policy>>,
        #[serde(default)]
        pub tolerance: Option<Value>,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "PascalCase")]
    pub struct Policy {
        #[serde(rename = "Type")]
        pub kind: String,
        pub value: i64,
        pub period_seconds: i64,
    }

    impl Rules {
        fn from_v2(rules: &Value) -> Option<Rules> {
            rules.is_object().then(|| Rules {
                stabilization_window_seconds: rules["stabilizationWindowSeconds"].as_i64(),
                select_policy: rules["selectPolicy"].as_str().map(str::to_string),
                policies: rules["policies"].as_array().map(|ps| {
                    ps.iter()
                        .map(|p| Policy {
                            kind: p["type"].as_str().unwrap_or_default().to_string(),
                            value: p["value"].as_i64().unwrap_or_default(),
                            period_seconds: p["periodSeconds"].as_i64().unwrap_or_default(),
                        })
                        .collect()
                }),
                tolerance: rules.get("tolerance").filter(|t| !t.is_null()).cloned(),
            })
        }

        fn to_v2(&self) -> Value {
            let mut out = Map::new();
            if let Some(w) = self.stabilization_window_seconds {
                out.insert("stabilizationWindowSeconds".into(), json!(w));
            }
            if let Some(p) = &self.select_policy {
                out.insert("selectPolicy".into(), json!(p));
            }
            if let Some(ps) = &self.policies {
                let ps: Vec<Value> = ps
                    .iter()
                    .map(|p| json!({"type": p.kind, "value": p.value, "periodSeconds": p.period_seconds}))
                    .collect();
                out.insert("policies".into(), Value::Array(ps));
            }
            if let Some(t) = &self.tolerance {
                out.insert("tolerance".into(), t.clone());
            }
            Value::Object(out)
        }
    }

    impl Behavior {
        pub fn from_v2(behavior: &Value) -> Behavior {
            Behavior {
                scale_up: Rules::from_v2(&behavior["scaleUp"]),
                scale_down: Rules::from_v2(&behavior["scaleDown"]),
            }
        }

        pub fn to_v2(&self) -> Value {
            let mut out = Map::new();
            if let Some(r) = &self.scale_up {
                out.insert("scaleUp".into(), r.to_v2());
            }
            if let Some(r) = &self.scale_down {
                out.insert("scaleDown".into(), r.to_v2());
            }
            Value::Object(out)
        }
    }
}

#[cfg(test)]
mod tests;
