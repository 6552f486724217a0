//! Events are stored once, in the core/v1 shape, and also served as events.k8s.io/v1; this
//! converts between the two views (field names as Kubernetes maps them).

use serde_json::{json, Map, Value};

/// Pairs of (core/v1 field, events.k8s.io/v1 field) that only change name.
const RENAMED: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("reportingComponent", "reportingController"),
];

/// Fields with the same name in both views.
const SHARED: &[&str] = &[
    "metadata",
    "reason",
    "type",
    "action",
    "related",
    "eventTime",
    "series",
    "reportingInstance",
];

/// core/v1 Event → events.k8s.io/v1 Event.
pub fn to_events_v1(core: &Value) -> Value {
    let mut out = Map::new();
    out.insert("apiVersion".into(), json!("events.k8s.io/v1"));
    out.insert("kind".into(), json!("Event"));
    copy(core, &mut out, SHARED.iter().map(|f| (*f, *f)));
    copy(core, &mut out, RENAMED.iter().copied());
    if !out.contains_key("eventTime") || out["eventTime"].is_null() {
        // eventTime is required in events.k8s.io/v1; fall back to the first timestamp.
        let fallback = core
            .get("firstTimestamp")
            .or_else(|| core.pointer("/metadata/creationTimestamp"));
        out.insert("eventTime".into(), fallback.cloned().unwrap_or(Value::Null));
    }
    Value::Object(out)
}

/// events.k8s.io/v1 Event → core/v1 Event.
pub fn to_core(events_v1: &Value) -> Value {
    let mut out = Map::new();
    out.insert("apiVersion".into(), json!("v1"));
    out.insert("kind".into(), json!("Event"));
    copy(events_v1, &mut out, SHARED.iter().map(|f| (*f, *f)));
    copy(
        events_v1,
        &mut out,
        RENAMED.iter().map(|(core, v1)| (*v1, *core)),
    );
    if !out.contains_key("involvedObject") {
        out.insert("involvedObject".into(), json!({}));
    }
    Value::Object(out)
}

fn copy<'a>(
    from: &Value,
    to: &mut Map<String, Value>,
    fields: impl Iterator<Item = (&'a str, &'a str)>,
) {
    for (source, target) in fields {
        if let Some(v) = from.get(source) {
            to.insert(target.to_string(), v.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_between_views() {
        let core = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "ns"},
            "involvedObject": {"kind": "Pod", "name": "p"},
            "reason": "Scheduled", "message": "assigned", "type": "Normal", "count": 2,
            "firstTimestamp": "2026-01-01T00:00:00Z", "source": {"component": "scheduler"}
        });
        let v1 = to_events_v1(&core);
        assert_eq!(v1["regarding"]["name"], "p");
        assert_eq!(v1["note"], "assigned");
        assert_eq!(v1["deprecatedCount"], 2);
        assert_eq!(v1["eventTime"], "2026-01-01T00:00:00Z");
        let back = to_core(&v1);
        assert_eq!(back["involvedObject"], core["involvedObject"]);
        assert_eq!(back["message"], "assigned");
        assert_eq!(back["source"], core["source"]);
    }
}
