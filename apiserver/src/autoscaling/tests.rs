use super::*;

fn v2() -> Value {
    json!({"kind": "HorizontalPodAutoscaler", "apiVersion": "autoscaling/v2",
        "metadata": {"name": "web", "namespace": "d", "annotations": {"keep": "me"}},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web", "apiVersion": "apps/v1"},
            "minReplicas": 2, "maxReplicas": 10,
            "metrics": [
                {"type": "Resource", "resource": {"name": "memory",
                    "target": {"type": "AverageValue", "averageValue": "100Mi"}}},
                {"type": "Resource", "resource": {"name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 50}}}],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 5}}},
        "status": {"currentReplicas": 3, "desiredReplicas": 4,
            "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu",
                "current": {"averageUtilization": 70, "averageValue": "140m"}}}],
            "conditions": [{"type": "AbleToScale", "status": "True",
                "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "ReadyForNewScale",
                "message": "recommended size matches current size"}]}})
}

#[test]
fn v2_to_v1_keeps_cpu_in_fields_and_the_rest_in_annotations() {
    let v1 = to_v1(&v2());
    assert_eq!(v1["apiVersion"], "autoscaling/v1");
    assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 50);
    assert_eq!(v1["status"]["currentCPUUtilizationPercentage"], 70);
    let a = &v1["metadata"]["annotations"];
    assert_eq!(a["keep"], "me");
    assert_eq!(
        a[METRICS_ANNOTATION],
        r#"[{"type":"Resource","resource":{"name":"memory","targetAverageValue":"100Mi"}}]"#
    );
    assert_eq!(
        a[CURRENT_METRICS_ANNOTATION],
        r#"[{"type":"Resource","resource":{"name":"cpu","currentAverageUtilization":70,"currentAverageValue":"140m"}}]"#
    );
    assert_eq!(
        a[BEHAVIOR_ANNOTATION],
        r#"{"ScaleUp":null,"ScaleDown":{"StabilizationWindowSeconds":5,"SelectPolicy":null,"Policies":null,"Tolerance":null}}"#
    );
    assert!(a[CONDITIONS_ANNOTATION].as_str().is_some_and(
        |c| c.starts_with(r#"[{"type":"AbleToScale","status":"True","lastTransitionTime""#)
    ));
}

#[test]
fn v1_round_trips_to_the_same_v2() {
    let back = to_v2(&to_v1(&v2()));
    let original = v2();
    assert_eq!(back["metadata"], original["metadata"]);
    assert_eq!(back["spec"]["behavior"], original["spec"]["behavior"]);
    assert_eq!(back["spec"]["metrics"], original["spec"]["metrics"]);
    assert_eq!(
        back["status"]["conditions"],
        original["status"]["conditions"]
    );
    assert_eq!(
        back["status"]["currentMetrics"],
        original["status"]["currentMetrics"]
    );
}

#[test]
fn a_v1_object_without_metrics_gets_the_default_cpu_target() {
    let mut v1 = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "a"},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "a"}, "maxReplicas": 3}});
    default_v1(&mut v1);
    let mut v2 = to_v2(&v1);
    default_v2(&mut v2);
    assert_eq!(v2["spec"]["minReplicas"], 1);
    assert_eq!(
        v2["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
        80
    );
    assert!(v2["spec"].get("behavior").is_none());
    assert!(v2.get("status").is_none());
}

#[test]
fn a_given_behavior_is_filled_in_with_the_default_rules() {
    let mut object =
        json!({"spec": {"behavior": {"scaleDown": {"stabilizationWindowSeconds": 5}}}});
    default_v2(&mut object);
    let b = &object["spec"]["behavior"];
    assert_eq!(b["scaleDown"]["stabilizationWindowSeconds"], 5);
    assert_eq!(b["scaleDown"]["policies"][0]["type"], "Percent");
    assert_eq!(b["scaleUp"]["stabilizationWindowSeconds"], 0);
    assert_eq!(b["scaleUp"]["selectPolicy"], "Max");
    assert_eq!(
        b["scaleUp"]["policies"][0],
        json!({"type": "Pods", "value": 4, "periodSeconds": 15})
    );
}

#[test]
fn every_metric_source_survives_the_v1_annotations() {
    let selector = json!({"matchLabels": {"queue": "q1"}});
    let mut hpa = v2();
    hpa["spec"]["metrics"] = json!([
        {"type": "Pods", "pods": {"metric": {"name": "rps", "selector": selector},
            "target": {"type": "AverageValue", "averageValue": "10"}}},
        {"type": "Object", "object": {"describedObject": {"kind": "Ingress", "name": "main", "apiVersion": "networking.k8s.io/v1"},
            "metric": {"name": "hits"}, "target": {"type": "Value", "value": "2k"}}},
        {"type": "External", "external": {"metric": {"name": "queue", "selector": selector},
            "target": {"type": "AverageValue", "averageValue": "30"}}},
        {"type": "ContainerResource", "containerResource": {"name": "cpu", "container": "app",
            "target": {"type": "Utilization", "averageUtilization": 60}}},
    ]);
    hpa["status"]["currentMetrics"] = json!([
        {"type": "Pods", "pods": {"metric": {"name": "rps"}, "current": {"averageValue": "12"}}},
        {"type": "External", "external": {"metric": {"name": "queue"}, "current": {"value": "3", "averageValue": "1"}}},
    ]);
    let v1 = to_v1(&hpa);
    assert!(v1["spec"].get("targetCPUUtilizationPercentage").is_none());
    let back = to_v2(&v1);
    assert_eq!(back["spec"]["metrics"], hpa["spec"]["metrics"]);
    assert_eq!(
        back["status"]["currentMetrics"],
        hpa["status"]["currentMetrics"]
    );
}
