"""The official Kubernetes Python client against kemu's autoscaling APIs.

Usage: python test_autoscaling.py KUBECONFIG

HorizontalPodAutoscalers through AutoscalingV2Api and AutoscalingV1Api (strict models: create,
read, list, watch, status replace, 422s, delete collection), and metrics.k8s.io PodMetrics and
NodeMetrics through the CustomObjectsApi for a pod the script binds and marks Running itself.
Run by cli/tests/python_client.rs; exits 0 when every check holds.
"""

import json
import sys
import traceback
import uuid

from kubernetes import client, config, watch

# The shared helpers: steps, checks, expected errors and strict model validation.
from test_client import check, expect_api_error, step, strict

NS = "default"
SUFFIX = uuid.uuid4().hex[:6]


def hpa_manifest(name, min_replicas=2, max_replicas=5):
    return client.V2HorizontalPodAutoscaler(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V2HorizontalPodAutoscalerSpec(
            scale_target_ref=client.V2CrossVersionObjectReference(
                api_version="apps/v1", kind="Deployment", name="web"
            ),
            min_replicas=min_replicas,
            max_replicas=max_replicas,
            metrics=[
                client.V2MetricSpec(
                    type="Resource",
                    resource=client.V2ResourceMetricSource(
                        name="cpu",
                        target=client.V2MetricTarget(type="Utilization", average_utilization=60),
                    ),
                ),
                client.V2MetricSpec(
                    type="Resource",
                    resource=client.V2ResourceMetricSource(
                        name="memory",
                        target=client.V2MetricTarget(type="AverageValue", average_value="100Mi"),
                    ),
                ),
            ],
        ),
    )


def test_autoscalers(api_client):
    v2 = client.AutoscalingV2Api(api_client)
    v1 = client.AutoscalingV1Api(api_client)
    name = f"py-hpa-{SUFFIX}"

    step("create through autoscaling/v2 and read both versions")
    w = watch.Watch()
    created = v2.create_namespaced_horizontal_pod_autoscaler(NS, hpa_manifest(name))
    check(created.status.desired_replicas == 0, f"fresh status: {created.status}")
    got = strict(
        client.V2HorizontalPodAutoscaler,
        v2.read_namespaced_horizontal_pod_autoscaler,
        name,
        NS,
    )
    check(got.spec.behavior is None, "a behavior that was not given stays absent")
    old = strict(
        client.V1HorizontalPodAutoscaler,
        v1.read_namespaced_horizontal_pod_autoscaler,
        name,
        NS,
    )
    check(old.spec.target_cpu_utilization_percentage == 60, f"v1 spec: {old.spec}")
    others = json.loads(old.metadata.annotations["autoscaling.alpha.kubernetes.io/metrics"])
    check(
        others == [{"type": "Resource", "resource": {"name": "memory", "targetAverageValue": "100Mi"}}],
        f"v1 metrics annotation: {others}",
    )

    step("the status subresource, seen through v1")
    got.status = client.V2HorizontalPodAutoscalerStatus(
        current_replicas=2,
        desired_replicas=3,
        current_metrics=[
            client.V2MetricStatus(
                type="Resource",
                resource=client.V2ResourceMetricStatus(
                    name="cpu",
                    current=client.V2MetricValueStatus(average_utilization=90, average_value="90m"),
                ),
            )
        ],
    )
    v2.replace_namespaced_horizontal_pod_autoscaler_status(name, NS, got)
    old = v1.read_namespaced_horizontal_pod_autoscaler_status(name, NS)
    check(old.status.current_cpu_utilization_percentage == 90, f"v1 status: {old.status}")
    check(old.status.desired_replicas == 3, f"v1 status: {old.status}")

    step("a v1 update keeps what only v2 can say")
    old.spec.max_replicas = 7
    v1.replace_namespaced_horizontal_pod_autoscaler(name, NS, old)
    again = v2.read_namespaced_horizontal_pod_autoscaler(name, NS)
    check(again.spec.max_replicas == 7, "v1 update applied")
    check(len(again.spec.metrics) == 2, f"metrics kept: {again.spec.metrics}")
    check(again.status.desired_replicas == 3, "status kept by a spec update")

    step("422s in Kubernetes' words")
    e = expect_api_error(
        422, v2.create_namespaced_horizontal_pod_autoscaler, NS, hpa_manifest("bad", 0)
    )
    body = json.loads(e.body)
    check(
        body["details"]["causes"][0]["field"] == "spec.minReplicas",
        f"causes: {body['details']}",
    )
    e = expect_api_error(
        422, v2.create_namespaced_horizontal_pod_autoscaler, NS, hpa_manifest("bad", 4, 3)
    )
    check(
        "spec.maxReplicas: Invalid value: 3: must be greater than or equal to `minReplicas`"
        in json.loads(e.body)["message"],
        e.body,
    )

    step("list, watch and delete the collection")
    listed = v1.list_namespaced_horizontal_pod_autoscaler(NS)
    check(name in {h.metadata.name for h in listed.items}, "listed through v1")
    seen = []
    for event in w.stream(
        v2.list_namespaced_horizontal_pod_autoscaler, NS, timeout_seconds=5
    ):
        seen.append(event["object"].metadata.name)
        w.stop()
    check(name in seen, f"watched: {seen}")
    v2.delete_collection_namespaced_horizontal_pod_autoscaler(NS)
    check(not v2.list_namespaced_horizontal_pod_autoscaler(NS).items, "collection deleted")


def test_metrics(api_client):
    core = client.CoreV1Api(api_client)
    custom = client.CustomObjectsApi(api_client)
    node = f"py-metrics-node-{SUFFIX}"
    pod = f"py-metrics-pod-{SUFFIX}"

    step("a running pod on a node has metrics")
    core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name=node)))
    core.create_namespaced_pod(
        NS,
        client.V1Pod(
            metadata=client.V1ObjectMeta(
                name=pod,
                labels={"app": "metrics"},
                annotations={"kemu.dev/usage": "cpu=30m,memory=20Mi"},
            ),
            spec=client.V1PodSpec(
                node_name=node,
                containers=[client.V1Container(name="main", image="registry.k8s.io/pause:3.10")],
            ),
        ),
    )
    expect_api_error(
        404, custom.get_namespaced_custom_object, "metrics.k8s.io", "v1beta1", NS, "pods", pod
    )
    core.patch_namespaced_pod_status(pod, NS, {"status": {"phase": "Running"}})
    listed = custom.list_namespaced_custom_object(
        "metrics.k8s.io", "v1beta1", NS, "pods", label_selector="app=metrics"
    )
    check(listed["kind"] == "PodMetricsList", f"list: {listed}")
    check(len(listed["items"]) == 1, f"items: {listed['items']}")
    usage = listed["items"][0]["containers"][0]["usage"]
    check(usage == {"cpu": "30000000n", "memory": "20480Ki"}, f"usage: {usage}")
    check(listed["items"][0]["window"] == "15s", "window")
    none = custom.list_namespaced_custom_object(
        "metrics.k8s.io", "v1beta1", NS, "pods", label_selector="app=other"
    )
    check(not none["items"], "a selector picks")
    node_metrics = custom.get_cluster_custom_object("metrics.k8s.io", "v1beta1", "nodes", node)
    check(
        node_metrics["usage"]["cpu"] == "80000000n",
        f"node usage is its pod plus the 50m overhead: {node_metrics}",
    )
    core.delete_namespaced_pod(pod, NS, grace_period_seconds=0)
    core.delete_node(node)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    configuration = client.Configuration()
    config.load_kube_config(config_file=sys.argv[1], client_configuration=configuration)
    api_client = client.ApiClient(configuration)
    try:
        test_autoscalers(api_client)
        test_metrics(api_client)
    except Exception:  # noqa: BLE001 - any failure is the test's failure
        traceback.print_exc()
        return 1
    print("python autoscaling: all checks passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
