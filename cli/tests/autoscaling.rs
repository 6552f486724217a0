//! End to end with the real kubectl against a whole control plane: `kubectl top nodes/pods`
//! from the declared usage model, `kubectl autoscale`, a HorizontalPodAutoscaler scaling a
//! Deployment up when the declared usage crosses its target and back down after a short
//! stabilization window, its status, conditions, events and Table, the autoscaling/v1 view, and
//! the 422s of invalid specs.

use crate::common;

use std::time::Duration;

use common::control_plane::{
    common_args, exactly_running, issue, spawn, start_node_host, start_scheduler,
};
use common::{wait_until, Cluster};
use serde_json::Value;

const DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
      annotations:
        kemu.dev/usage: cpu=40m,memory=32Mi
    spec:
      containers:
      - name: app
        image: nginx
        resources:
          requests:
            cpu: 100m
            memory: 64Mi
";

fn json(c: &Cluster, args: &[&str]) -> Value {
    serde_json::from_str(&c.ok(args)).unwrap_or(Value::Null)
}

fn replicas(c: &Cluster) -> i64 {
    json(c, &["get", "deployment", "web", "-o", "json"])["spec"]["replicas"]
        .as_i64()
        .unwrap_or(-1)
}

/// The messages of the events about objects of `kind` with `reason`.
fn events_about(c: &Cluster, kind: &str, reason: &str) -> Vec<String> {
    json(c, &["get", "events", "-o", "json"])["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["involvedObject"]["kind"] == kind && e["reason"] == reason)
        .filter_map(|e| e["message"].as_str().map(str::to_string))
        .collect()
}

fn rescale_events(c: &Cluster) -> Vec<String> {
    events_about(c, "HorizontalPodAutoscaler", "SuccessfulRescale")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_and_an_autoscaler_follow_the_declared_usage() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let _hosts = start_node_host(&c, 1, 2, "node-")?;
    let _scheduler = start_scheduler(&c)?;
    issue(&c, "controllers", "system:kube-controller-manager")?;
    let mut args = common_args(&c, "controllers", "controllers");
    args.extend(["--horizontal-pod-autoscaler-sync-period-secs", "1"].map(String::from));
    let controllers = spawn(&c, "controllers", &args)?;

    c.ok_stdin(&["apply", "-f", "-"], DEPLOYMENT);
    wait_until("2 web pods run", Duration::from_secs(60), || async {
        exactly_running(&c, "app=web", 2, &[])
    })
    .await?;

    // kubectl top reads metrics.k8s.io: 40m and 32Mi per pod, nodes with their pods' sum.
    let top = c.ok(&["top", "pods", "-l", "app=web"]);
    let mut lines = top.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split_whitespace().collect();
    assert_eq!(header, ["NAME", "CPU(cores)", "MEMORY(bytes)"], "{top}");
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows.len(), 2, "{top}");
    assert!(rows.iter().all(|r| r[1..] == ["40m", "32Mi"]), "{top}");
    let containers = c.ok(&["top", "pods", "-l", "app=web", "--containers"]);
    assert!(containers.starts_with("POD"), "{containers}");
    assert!(containers.contains(" app "), "{containers}");
    let nodes = c.ok(&["top", "nodes"]);
    assert!(nodes.starts_with("NAME"), "{nodes}");
    assert!(nodes.contains("CPU(%)"), "{nodes}");
    assert!(nodes.contains("node-"), "{nodes}");
    // A node's usage: 50m of overhead plus its pods'.
    let node_total: i64 = json(&c, &["get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes"])
        ["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| {
            n["usage"]["cpu"]
                .as_str()?
                .strip_suffix('n')?
                .parse::<i64>()
                .ok()
        })
        .sum();
    assert_eq!(node_total, 2 * 50_000_000 + 2 * 40_000_000);
    let missing = c.fails(&["top", "pod", "nope"]);
    assert!(
        missing.contains("podmetrics.metrics.k8s.io \"default/nope\" not found"),
        "{missing}"
    );

    // kubectl autoscale; a short scale-down window through the behavior.
    c.ok(&[
        "autoscale",
        "deployment",
        "web",
        "--min=2",
        "--max=6",
        "--cpu-percent=50",
    ]);
    c.ok(&[
        "patch",
        "hpa",
        "web",
        "--type=merge",
        "-p",
        r#"{"spec":{"behavior":{"scaleDown":{"stabilizationWindowSeconds":3}}}}"#,
    ]);
    // A pod whose metrics window began before it became ready counts as not yet ready (the
    // CPU initialization rule), so the recommendation may dip below the minimum for up to one
    // 15 s window after the pods start; wait until both pods count.
    let measured = wait_until(
        "the autoscaler measures 40% on both pods",
        Duration::from_secs(60),
        || async {
            let hpa = json(&c, &["get", "hpa", "web", "-o", "json"]);
            let limited = hpa["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["type"] == "ScalingLimited")
                .map(|c| c["reason"] == "DesiredWithinRange");
            hpa["status"]["currentMetrics"][0]["resource"]["current"]["averageUtilization"] == 40
                && limited == Some(true)
        },
    )
    .await;
    if measured.is_err() {
        eprintln!("{}", controllers.log());
    }
    measured?;
    let hpa = json(&c, &["get", "hpa", "web", "-o", "json"]);
    let conditions = hpa["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let reason = |kind: &str| {
        conditions
            .iter()
            .find(|c| c["type"] == kind)
            .map(|c| c["reason"].as_str().unwrap_or("").to_string())
    };
    assert_eq!(
        reason("AbleToScale").as_deref(),
        Some("ReadyForNewScale"),
        "{hpa}"
    );
    assert_eq!(
        reason("ScalingActive").as_deref(),
        Some("ValidMetricFound"),
        "{hpa}"
    );
    assert_eq!(
        reason("ScalingLimited").as_deref(),
        Some("DesiredWithinRange"),
        "{hpa}"
    );
    assert_eq!(
        hpa["spec"]["behavior"]["scaleDown"]["policies"][0]["type"],
        "Percent"
    );
    let table = c.ok(&["get", "hpa"]);
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        [
            "NAME",
            "REFERENCE",
            "TARGETS",
            "MINPODS",
            "MAXPODS",
            "REPLICAS",
            "AGE"
        ],
        "{table}"
    );
    assert!(table.contains("Deployment/web"), "{table}");
    assert!(table.contains("cpu: 40%/50%"), "{table}");
    assert!(c
        .ok(&["get", "all"])
        .contains("horizontalpodautoscaler.autoscaling/web"));
    // The autoscaling/v1 view of the same object.
    let v1 = json(
        &c,
        &[
            "get",
            "horizontalpodautoscalers.v1.autoscaling",
            "web",
            "-o",
            "json",
        ],
    );
    assert_eq!(v1["apiVersion"], "autoscaling/v1");
    assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 50);
    assert_eq!(v1["status"]["currentCPUUtilizationPercentage"], 40);
    assert!(
        v1["metadata"]["annotations"]["autoscaling.alpha.kubernetes.io/behavior"]
            .as_str()
            .is_some_and(|b| b.contains("\"StabilizationWindowSeconds\":3"))
    );

    // Usage above the target: the Deployment grows to the maximum.
    c.ok(&[
        "patch",
        "deployment",
        "web",
        "-p",
        r#"{"spec":{"template":{"metadata":{"annotations":{"kemu.dev/usage":"cpu=90m"}}}}}"#,
    ]);
    wait_until(
        "the autoscaler scales up to 6",
        Duration::from_secs(120),
        || async { replicas(&c) == 6 },
    )
    .await?;
    let events = rescale_events(&c);
    assert!(
        events.iter().any(|m| m.starts_with("New size: ")
            && m.ends_with(
                "; reason: cpu resource utilization (percentage of request) above target"
            )),
        "{events:?}"
    );

    // Usage far below: back to the minimum once the 3 s window has passed.
    c.ok(&[
        "patch",
        "deployment",
        "web",
        "-p",
        r#"{"spec":{"template":{"metadata":{"annotations":{"kemu.dev/usage":"cpu=10m"}}}}}"#,
    ]);
    wait_until(
        "the autoscaler scales down to 2",
        Duration::from_secs(120),
        || async { replicas(&c) == 2 },
    )
    .await?;
    let events = rescale_events(&c);
    assert!(
        events
            .iter()
            .any(|m| m == "New size: 2; reason: All metrics below target"),
        "{events:?}"
    );
    let hpa = json(&c, &["get", "hpa", "web", "-o", "json"]);
    assert!(hpa["status"]["lastScaleTime"].is_string(), "{hpa}");
    // The ReplicaSet controller recorded its pods as kube-controller-manager does.
    let created = events_about(&c, "ReplicaSet", "SuccessfulCreate");
    assert!(
        created.iter().any(|m| m.starts_with("Created pod: web-")),
        "{created:?}"
    );
    let deleted = events_about(&c, "ReplicaSet", "SuccessfulDelete");
    assert!(
        deleted.iter().any(|m| m.starts_with("Deleted pod: web-")),
        "{deleted:?}"
    );
    assert_eq!(hpa["status"]["desiredReplicas"], 2, "{hpa}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_autoscalers_get_kubernetes_422s() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let cases = [
        (
            "autoscaling/v2",
            "minReplicas: 0\n  maxReplicas: 3",
            "spec.minReplicas: Invalid value: 0: must be greater than or equal to 1",
        ),
        (
            "autoscaling/v2",
            "minReplicas: 5\n  maxReplicas: 3",
            "spec.maxReplicas: Invalid value: 3: must be greater than or equal to `minReplicas`",
        ),
        (
            "autoscaling/v1",
            "maxReplicas: 3\n  targetCPUUtilizationPercentage: 0",
            "spec.metrics[0].resource.target.averageUtilization: Invalid value: 0: must be greater than 0",
        ),
        (
            "autoscaling/v2",
            "maxReplicas: 3\n  behavior:\n    scaleDown:\n      stabilizationWindowSeconds: 4000",
            "spec.behavior.scaleDown.stabilizationWindowSeconds: Invalid value: 4000: must be less than or equal to 3600",
        ),
    ];
    for (i, (version, spec, want)) in cases.iter().enumerate() {
        let manifest = format!(
            "apiVersion: {version}\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: bad\nspec:\n  scaleTargetRef:\n    apiVersion: apps/v1\n    kind: Deployment\n    name: web\n  {spec}\n"
        );
        let file = c.file(&format!("bad-{i}.yaml"), &manifest);
        let err = c.fails(&["create", "-f", &file]);
        assert!(
            err.contains("The HorizontalPodAutoscaler \"bad\" is invalid") && err.contains(want),
            "{manifest}\n{err}"
        );
    }
    // A v1 object reads back with the v2 defaults applied and converted.
    let ok = c.file(
        "ok.yaml",
        "apiVersion: autoscaling/v1\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: ok\nspec:\n  scaleTargetRef:\n    kind: Deployment\n    name: web\n  maxReplicas: 3\n",
    );
    c.ok(&["create", "-f", &ok]);
    let v2 = json(
        &c,
        &[
            "get",
            "horizontalpodautoscalers.v2.autoscaling",
            "ok",
            "-o",
            "json",
        ],
    );
    assert_eq!(v2["spec"]["minReplicas"], 1, "{v2}");
    assert_eq!(
        v2["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"], 80,
        "{v2}"
    );
    let v1 = json(
        &c,
        &[
            "get",
            "horizontalpodautoscalers.v1.autoscaling",
            "ok",
            "-o",
            "json",
        ],
    );
    assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 80, "{v1}");
    assert!(c
        .ok(&["api-resources", "--api-group=autoscaling"])
        .contains("hpa"));
    let metrics_group = c.ok(&["api-resources", "--api-group=metrics.k8s.io"]);
    assert!(metrics_group.contains("PodMetrics"), "{metrics_group}");
    Ok(())
}

/// The condition of `kind` of an autoscaler: (status, reason, message).
fn condition_of(c: &Cluster, hpa: &str, kind: &str) -> Option<(String, String, String)> {
    let hpa = json(c, &["get", "hpa", hpa, "-o", "json"]);
    let found = hpa["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)?
        .clone();
    let text = |field: &str| found[field].as_str().unwrap_or_default().to_string();
    Some((text("status"), text("reason"), text("message")))
}

fn deployment(name: &str, annotations: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
spec:
  replicas: 1
  selector:
    matchLabels:
      app: {name}
  template:
    metadata:
      labels:
        app: {name}
      annotations: {annotations}
    spec:
      containers:
      - name: app
        image: nginx
        resources:
          requests:
            cpu: 100m
"
    )
}

fn autoscaler(name: &str, target: &str, metric: &str) -> String {
    format!(
        "apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {name}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {target}
  minReplicas: 1
  maxReplicas: 3
  metrics:
  - {metric}
"
    )
}

fn replicas_of(c: &Cluster, name: &str) -> i64 {
    json(c, &["get", "deployment", name, "-o", "json"])["spec"]["replicas"]
        .as_i64()
        .unwrap_or(-1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_external_and_container_metrics_drive_autoscalers() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let _hosts = start_node_host(&c, 1, 2, "node-")?;
    let _scheduler = start_scheduler(&c)?;
    issue(&c, "controllers", "system:kube-controller-manager")?;
    let mut args = common_args(&c, "controllers", "controllers");
    args.extend(["--horizontal-pod-autoscaler-sync-period-secs", "1"].map(String::from));
    let controllers = spawn(&c, "controllers", &args)?;

    // The adapters' groups are discoverable.
    let versions = c.ok(&["api-versions"]);
    assert!(
        versions.contains("custom.metrics.k8s.io/v1beta2"),
        "{versions}"
    );
    assert!(
        versions.contains("external.metrics.k8s.io/v1beta1"),
        "{versions}"
    );
    let list = json(&c, &["get", "--raw", "/apis/custom.metrics.k8s.io/v1beta2"]);
    assert_eq!(list["kind"], "APIResourceList", "{list}");
    assert_eq!(
        list["groupVersion"], "custom.metrics.k8s.io/v1beta2",
        "{list}"
    );

    c.ok_stdin(
        &["apply", "-f", "-"],
        &deployment(
            "web",
            r#"{"metrics.kemu.dev/custom": '{"packets-per-second": "50"}'}"#,
        ),
    );
    c.ok_stdin(&["apply", "-f", "-"], &deployment("worker", "{}"));
    wait_until("web and worker run", Duration::from_secs(60), || async {
        exactly_running(&c, "app=web", 1, &[]) && exactly_running(&c, "app=worker", 1, &[])
    })
    .await?;

    // custom.metrics.k8s.io answers as an adapter does.
    let values = json(
        &c,
        &[
            "get",
            "--raw",
            "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/packets-per-second?labelSelector=app%3Dweb",
        ],
    );
    assert_eq!(values["kind"], "MetricValueList", "{values}");
    assert_eq!(
        values["items"][0]["describedObject"]["kind"], "Pod",
        "{values}"
    );
    assert_eq!(values["items"][0]["metric"]["name"], "packets-per-second");
    assert_eq!(values["items"][0]["value"], "50", "{values}");
    let missing = c.fails(&[
        "get",
        "--raw",
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/nope",
    ]);
    assert!(
        missing.contains("the server could not find the metric nope for pods"),
        "{missing}"
    );

    // A Pods metric below its target: nothing moves, the average is in the status.
    c.ok_stdin(
        &["apply", "-f", "-"],
        &autoscaler(
            "web",
            "web",
            "type: Pods\n    pods:\n      metric:\n        name: packets-per-second\n      target:\n        type: AverageValue\n        averageValue: \"100\"",
        ),
    );
    let measured = wait_until(
        "the Pods metric is measured",
        Duration::from_secs(60),
        || async {
            let hpa = json(&c, &["get", "hpa", "web", "-o", "json"]);
            hpa["status"]["currentMetrics"][0]["pods"]["current"]["averageValue"] == "50"
        },
    )
    .await;
    if measured.is_err() {
        eprintln!("{}", controllers.log());
    }
    measured?;
    assert_eq!(replicas_of(&c, "web"), 1);
    // The declared value crosses the target: the Deployment grows.
    c.ok(&[
        "annotate",
        "pods",
        "-l",
        "app=web",
        "--overwrite",
        r#"metrics.kemu.dev/custom={"packets-per-second": "300"}"#,
    ]);
    wait_until("web scales up to 3", Duration::from_secs(60), || async {
        replicas_of(&c, "web") == 3
    })
    .await?;
    assert!(
        rescale_events(&c)
            .iter()
            .any(|m| m == "New size: 3; reason: pods metric packets-per-second above target"),
        "{:?}",
        rescale_events(&c)
    );
    let described = c.ok(&["describe", "hpa", "web"]);
    assert!(
        described.contains("\"packets-per-second\" on pods:"),
        "{described}"
    );

    // An External metric from the namespace's kemu-external-metrics ConfigMap: 25 against a
    // value of 10 with one ready pod asks for 3.
    c.ok(&[
        "create",
        "configmap",
        "kemu-external-metrics",
        "--from-literal=queue_depth=25",
    ]);
    let external = json(
        &c,
        &[
            "get",
            "--raw",
            "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_depth",
        ],
    );
    assert_eq!(external["kind"], "ExternalMetricValueList", "{external}");
    assert_eq!(external["items"][0]["metricName"], "queue_depth");
    assert_eq!(external["items"][0]["value"], "25", "{external}");
    c.ok_stdin(
        &["apply", "-f", "-"],
        &autoscaler(
            "worker",
            "worker",
            "type: External\n    external:\n      metric:\n        name: queue_depth\n      target:\n        type: Value\n        value: \"10\"",
        ),
    );
    wait_until("worker scales up to 3", Duration::from_secs(60), || async {
        replicas_of(&c, "worker") == 3
    })
    .await?;
    let hpa = json(&c, &["get", "hpa", "worker", "-o", "json"]);
    assert_eq!(
        hpa["status"]["currentMetrics"][0]["external"]["current"]["value"], "25",
        "{hpa}"
    );
    assert_eq!(
        hpa["status"]["currentMetrics"][0]["external"]["metric"]["name"], "queue_depth",
        "{hpa}"
    );
    let described = c.ok(&["describe", "hpa", "worker"]);
    assert!(
        described.contains("\"queue_depth\" (target value):"),
        "{described}"
    );

    // A ContainerResource metric: the app container's own usage (half its request).
    c.ok_stdin(
        &["apply", "-f", "-"],
        &autoscaler(
            "worker-app",
            "worker",
            "type: ContainerResource\n    containerResource:\n      name: cpu\n      container: app\n      target:\n        type: Utilization\n        averageUtilization: 50",
        ),
    );
    wait_until(
        "the container metric is measured",
        Duration::from_secs(60),
        || async {
            let hpa = json(&c, &["get", "hpa", "worker-app", "-o", "json"]);
            let status = &hpa["status"]["currentMetrics"][0]["containerResource"];
            status["container"] == "app" && status["current"]["averageUtilization"] == 50
        },
    )
    .await?;

    // Missing metrics: upstream's reasons and messages.
    for (name, metric, reason, wanted) in [
        (
            "no-pods-metric",
            "type: Pods\n    pods:\n      metric:\n        name: nope\n      target:\n        type: AverageValue\n        averageValue: \"1\"",
            "FailedGetPodsMetric",
            "the HPA was unable to compute the replica count: unable to get metric nope: unable to fetch metrics from custom metrics API: the server could not find the metric nope for pods",
        ),
        (
            "no-external-metric",
            "type: External\n    external:\n      metric:\n        name: nope\n      target:\n        type: AverageValue\n        averageValue: \"1\"",
            "FailedGetExternalMetric",
            "the HPA was unable to compute the replica count: unable to get external metric default/nope/nil: no metrics returned from external metrics API",
        ),
        (
            "no-container",
            "type: ContainerResource\n    containerResource:\n      name: cpu\n      container: nope\n      target:\n        type: Utilization\n        averageUtilization: 50",
            "FailedGetContainerResourceMetric",
            "the HPA was unable to compute the replica count: failed to get cpu utilization: unable to get metrics for resource cpu: container nope not present in metrics for pod default/worker-",
        ),
    ] {
        c.ok_stdin(&["apply", "-f", "-"], &autoscaler(name, "worker", metric));
        wait_until(reason, Duration::from_secs(60), || async {
            condition_of(&c, name, "ScalingActive").is_some_and(|(status, r, message)| {
                status == "False" && r == reason && message.starts_with(wanted)
            })
        })
        .await
        .map_err(|e| anyhow::anyhow!("{e}: {:?}", condition_of(&c, name, "ScalingActive")))?;
        wait_until("its event", Duration::from_secs(10), || async {
            !events_about(&c, "HorizontalPodAutoscaler", reason).is_empty()
        })
        .await?;
    }
    Ok(())
}

const GIZMO_CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gizmos.example.com
spec:
  group: example.com
  scope: Namespaced
  names:
    plural: gizmos
    singular: gizmo
    kind: Gizmo
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
        labelSelectorPath: .status.selector
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_autoscaler_scales_a_custom_resource_through_its_scale_subresource() -> anyhow::Result<()>
{
    let c = Cluster::start(1).await?;
    issue(&c, "controllers", "system:kube-controller-manager")?;
    let mut args = common_args(&c, "controllers", "controllers");
    args.extend(["--horizontal-pod-autoscaler-sync-period-secs", "1"].map(String::from));
    let controllers = spawn(&c, "controllers", &args)?;

    c.ok_stdin(&["apply", "-f", "-"], GIZMO_CRD);
    c.ok(&[
        "wait",
        "--for=condition=established",
        "--timeout=60s",
        "crd/gizmos.example.com",
    ]);
    // The gizmo declares its own queue length, an Object metric of 40 against 10 per replica.
    c.ok_stdin(
        &["apply", "-f", "-"],
        r#"apiVersion: example.com/v1
kind: Gizmo
metadata:
  name: g
  annotations:
    metrics.kemu.dev/custom: '{"queue-length": "40"}'
spec:
  replicas: 1
"#,
    );
    c.ok(&[
        "patch",
        "gizmo",
        "g",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"replicas":1,"selector":"app=gizmo"}}"#,
    ]);
    let value = json(
        &c,
        &[
            "get",
            "--raw",
            "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/gizmos.example.com/g/queue-length",
        ],
    );
    assert_eq!(
        value["items"][0]["describedObject"]["kind"], "Gizmo",
        "{value}"
    );
    assert_eq!(
        value["items"][0]["describedObject"]["apiVersion"], "example.com/v1",
        "{value}"
    );
    assert_eq!(value["items"][0]["value"], "40", "{value}");
    c.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: gizmo
spec:
  scaleTargetRef:
    apiVersion: example.com/v1
    kind: Gizmo
    name: g
  minReplicas: 1
  maxReplicas: 10
  metrics:
  - type: Object
    object:
      describedObject:
        apiVersion: example.com/v1
        kind: Gizmo
        name: g
      metric:
        name: queue-length
      target:
        type: AverageValue
        averageValue: \"10\"
",
    );
    let scaled = wait_until("the gizmo scales to 4", Duration::from_secs(60), || async {
        json(&c, &["get", "gizmo", "g", "-o", "json"])["spec"]["replicas"] == 4
    })
    .await;
    if scaled.is_err() {
        eprintln!("{}", c.ok(&["describe", "hpa", "gizmo"]));
        eprintln!("{}", controllers.log());
    }
    scaled?;
    let hpa = json(&c, &["get", "hpa", "gizmo", "-o", "json"]);
    assert_eq!(
        hpa["status"]["currentMetrics"][0]["object"]["current"]["averageValue"], "40",
        "{hpa}"
    );
    let events = rescale_events(&c);
    assert!(
        events
            .iter()
            .any(|m| m == "New size: 4; reason: external metric queue-length(nil) above target"),
        "{events:?}"
    );
    let table = c.ok(&["get", "hpa", "gizmo"]);
    assert!(table.contains("Gizmo/g"), "{table}");
    Ok(())
}
