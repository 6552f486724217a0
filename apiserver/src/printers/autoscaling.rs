//! HorizontalPodAutoscalers: REFERENCE, TARGETS (`cpu: 40%/80%`), MINPODS, MAXPODS, REPLICAS.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{age, array_at, int_at, is_set, name, str_at, Column, AGE, NAME};

pub(super) const HPA_COLUMNS: &[Column] = &[
    NAME,
    Column::string("Reference", "scaleTargetRef points to the target resource to scale, and is used to the pods for which metrics should be collected, as well as to actually change the replica count."),
    Column::string("Targets", "metrics contains the specifications for which to use to calculate the desired replica count (the maximum replica count across all metrics will be used).  The desired replica count is calculated multiplying the ratio between the target value and the current value by the current number of pods.  Ergo, metrics used must decrease as the pod count is increased, and vice-versa.  See the individual metric source types for more information about how each type of metric must respond. If not set, the default metric will be set to 80% average CPU utilization."),
    Column::string("MinPods", "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.  It defaults to 1 pod.  minReplicas is allowed to be 0 if the alpha feature gate HPAScaleToZero is enabled and at least one Object or External metric is configured.  Scaling is active as long as at least one metric value is available."),
    Column::string("MaxPods", "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up. It cannot be less that minReplicas."),
    Column::string("Replicas", "currentReplicas is current number of replicas of pods managed by this autoscaler, as last seen by the autoscaler."),
    AGE,
];

pub(super) fn hpa_cells(object: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let converted;
    let hpa = if crate::autoscaling::is_v1_object(object) {
        converted = crate::autoscaling::to_v2(object);
        &converted
    } else {
        object
    };
    let reference = format!(
        "{}/{}",
        str_at(hpa, "/spec/scaleTargetRef/kind"),
        str_at(hpa, "/spec/scaleTargetRef/name")
    );
    let min = if is_set(hpa, "/spec/minReplicas") {
        int_at(hpa, "/spec/minReplicas").to_string()
    } else {
        "<unset>".to_string()
    };
    vec![
        name(hpa),
        reference.into(),
        targets(
            array_at(hpa, "/spec/metrics"),
            array_at(hpa, "/status/currentMetrics"),
        )
        .into(),
        min.into(),
        int_at(hpa, "/spec/maxReplicas").into(),
        int_at(hpa, "/status/currentReplicas").into(),
        age(hpa, now),
    ]
}

/// A quantity as Go's `Quantity.String()` writes it.
fn quantity(value: Option<&Value>) -> String {
    value
        .and_then(|v| api::quantity::Quantity::from_value(v).ok())
        .map_or_else(|| "0".to_string(), |q| q.canonical())
}

/// kubectl's TARGETS: `current/target` per metric, the first two, then `+ N more...`.
pub(super) fn targets(specs: &[Value], statuses: &[Value]) -> String {
    if specs.is_empty() {
        return "<none>".into();
    }
    let unknown = || "<unknown>".to_string();
    let mut list = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let status = statuses.get(i);
        let kind = str_at(spec, "/type");
        let key = match kind {
            "External" => "external",
            "Pods" => "pods",
            "Object" => "object",
            "Resource" => "resource",
            "ContainerResource" => "containerResource",
            _ => {
                list.push("<unknown type>".to_string());
                continue;
            }
        };
        let source = &spec[key];
        let current = status
            .map(|s| &s[key])
            .filter(|c| c.is_object())
            .map(|c| &c["current"]);
        let target_average = source["target"]
            .get("averageValue")
            .filter(|v| !v.is_null());
        let cell = match key {
            "resource" | "containerResource" => {
                let resource = str_at(source, "/name");
                if let Some(average) = target_average {
                    let now = current.map_or_else(unknown, |c| quantity(c.get("averageValue")));
                    format!("{resource}: {now}/{}", quantity(Some(average)))
                } else {
                    let now = current
                        .and_then(|c| c.get("averageUtilization"))
                        .and_then(Value::as_i64)
                        .map_or_else(unknown, |u| format!("{u}%"));
                    let target = source["target"]
                        .get("averageUtilization")
                        .and_then(Value::as_i64)
                        .map_or_else(|| "<auto>".to_string(), |u| format!("{u}%"));
                    format!("{resource}: {now}/{target}")
                }
            }
            "pods" => {
                let now = current.map_or_else(unknown, |c| quantity(c.get("averageValue")));
                format!("{now}/{}", quantity(target_average))
            }
            _ => match target_average {
                Some(average) => {
                    let now = current
                        .and_then(|c| c.get("averageValue"))
                        .map_or_else(unknown, |v| quantity(Some(v)));
                    format!("{now}/{} (avg)", quantity(Some(average)))
                }
                None => {
                    let now = current.map_or_else(unknown, |c| quantity(c.get("value")));
                    format!("{now}/{}", quantity(source["target"].get("value")))
                }
            },
        };
        list.push(cell);
    }
    let count = list.len();
    if count > 2 {
        format!("{} + {} more...", list[..2].join(", "), count - 2)
    } else {
        list.join(", ")
    }
}
