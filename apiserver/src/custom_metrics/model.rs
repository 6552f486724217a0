//! The declared model behind the emulated metrics adapters. Pure: objects in, values out.
//!
//! - Custom metrics of any object (pods, Deployments, Services, custom resources, the
//!   namespace itself) come from its `metrics.kemu.dev/custom` annotation, a JSON object of
//!   metric names and quantities: `{"packets-per-second": "50", "queue-depth": 7}`.
//! - External metrics of a namespace come from its ConfigMap `kemu-external-metrics`: each data
//!   key is a metric name and its value either a quantity (one series without labels) or a
//!   JSON list of labelled series, `[{"labels": {"queue": "jobs"}, "value": "30"}]`.

use std::collections::BTreeMap;

use api::quantity::Quantity;
use serde_json::Value;

/// The annotation that declares an object's custom metrics.
pub const CUSTOM_ANNOTATION: &str = "metrics.kemu.dev/custom";
/// The ConfigMap that declares a namespace's external metrics.
pub const EXTERNAL_CONFIG_MAP: &str = "kemu-external-metrics";

/// The value of `metric` the object declares (None: not declared, or not a quantity).
pub fn custom_value(object: &Value, metric: &str) -> Option<Quantity> {
    let declared = custom_declarations(object)?;
    quantity(declared.get(metric)?)
}

/// The names of the custom metrics the object declares.
pub fn custom_names(object: &Value) -> Vec<String> {
    custom_declarations(object)
        .map(|d| d.keys().cloned().collect())
        .unwrap_or_default()
}

fn custom_declarations(object: &Value) -> Option<serde_json::Map<String, Value>> {
    let text = object
        .pointer("/metadata/annotations")?
        .get(CUSTOM_ANNOTATION)?
        .as_str()?;
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Some(map),
        _ => None,
    }
}

/// A quantity written as a JSON string or number.
fn quantity(value: &Value) -> Option<Quantity> {
    match value {
        Value::String(s) => api::quantity::parse(s).ok(),
        Value::Number(n) => api::quantity::parse(&n.to_string()).ok(),
        _ => None,
    }
}

/// One series of an external metric.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub labels: BTreeMap<String, String>,
    pub value: Quantity,
}

/// The series of `metric` a `kemu-external-metrics` ConfigMap declares; an unreadable entry
/// declares none.
pub fn external_series(config_map: &Value, metric: &str) -> Vec<Series> {
    let Some(text) = config_map
        .get("data")
        .and_then(|d| d.get(metric))
        .and_then(Value::as_str)
    else {
        return Vec::new();
    };
    if let Ok(value) = api::quantity::parse(text.trim()) {
        return vec![Series {
            labels: BTreeMap::new(),
            value,
        }];
    }
    let Ok(Value::Array(entries)) = serde_json::from_str::<Value>(text) else {
        return Vec::new();
    };
    entries
        .iter()
        .filter_map(|entry| {
            let value = quantity(entry.get("value")?)?;
            let labels = entry
                .get("labels")
                .and_then(Value::as_object)
                .map(|l| {
                    l.iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                        .collect()
                })
                .unwrap_or_default();
            Some(Series { labels, value })
        })
        .collect()
}

/// The names of the external metrics a ConfigMap declares.
pub fn external_names(config_map: &Value) -> Vec<String> {
    config_map
        .get("data")
        .and_then(Value::as_object)
        .map(|d| d.keys().cloned().collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn custom_metrics_come_from_the_annotation() {
        let pod = json!({"metadata": {"annotations": {
            CUSTOM_ANNOTATION: r#"{"packets-per-second": "1.5k", "depth": 7, "bad": "x"}"#}}});
        assert_eq!(
            custom_value(&pod, "packets-per-second").map(|q| q.as_milli()),
            Some(1_500_000)
        );
        assert_eq!(
            custom_value(&pod, "depth").map(|q| q.as_milli()),
            Some(7000)
        );
        assert_eq!(custom_value(&pod, "bad"), None);
        assert_eq!(custom_value(&pod, "other"), None);
        assert_eq!(custom_names(&pod), ["bad", "depth", "packets-per-second"]);
        let broken = json!({"metadata": {"annotations": {CUSTOM_ANNOTATION: "{"}}});
        assert_eq!(custom_value(&broken, "depth"), None);
    }

    #[test]
    fn external_metrics_are_plain_or_labelled_series() {
        let cm = json!({"data": {
            "queue_depth": "30",
            "requests": r#"[{"labels": {"route": "a"}, "value": "10"}, {"labels": {"route": "b"}, "value": 2.5}]"#,
            "broken": "[{",
        }});
        let plain = external_series(&cm, "queue_depth");
        assert_eq!(plain.len(), 1);
        assert!(plain[0].labels.is_empty());
        assert_eq!(plain[0].value.as_milli(), 30_000);
        let labelled = external_series(&cm, "requests");
        assert_eq!(labelled.len(), 2);
        assert_eq!(
            labelled[1].labels.get("route").map(String::as_str),
            Some("b")
        );
        assert_eq!(labelled[1].value.as_milli(), 2500);
        assert!(external_series(&cm, "broken").is_empty());
        assert!(external_series(&cm, "none").is_empty());
        assert_eq!(external_names(&cm).len(), 3);
    }
}
