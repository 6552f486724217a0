"""The official Kubernetes Python client (strict pydantic models) against a kemu API server.

Usage: python test_client.py KUBECONFIG

The kubeconfig names the server (HTTPS), the cluster CA and the admin's client certificate.

Creates, lists, watches, reads, patches and deletes pods, nodes and events, and reads the
OpenAPI documents (checking that their operations are the ones the client was generated from). Every call
deserializes the server's answer into the client's models, which reject missing required fields,
unknown fields and wrongly typed values; a failure anywhere ends the script with exit code 1 and
a traceback naming the step. Run by cli/tests/python_client.rs.
"""

import datetime
import json
import sys
import threading
import time
import traceback
import uuid

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

NS = "default"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"

SUFFIX = uuid.uuid4().hex[:6]


def step(name):
    print(f"== {name}", flush=True)


def check(condition, what):
    if not condition:
        raise AssertionError(what)


def expect_api_error(code, call, *args, **kwargs):
    try:
        call(*args, **kwargs)
    except ApiException as e:
        check(e.status == code, f"expected {code}, got {e.status}: {e.body}")
        return e
    raise AssertionError(f"expected an error {code}, the call succeeded")


def now():
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)


def collect_watch(func, *args, until, timeout=10, **kwargs):
    """Watches with `func` until `until(events)` holds or `timeout` seconds pass; the events."""
    events = []
    w = watch.Watch()
    deadline = time.time() + timeout
    for event in w.stream(func, *args, timeout_seconds=timeout, **kwargs):
        if event["type"] == "BOOKMARK":
            continue
        check(event["type"] != "ERROR", f"watch error: {event['raw_object']}")
        events.append(event)
        if until(events) or time.time() > deadline:
            w.stop()
    return events


def in_background(work):
    """Runs `work` on a thread shortly after a watch has started."""

    def delayed():
        time.sleep(0.5)
        work()

    thread = threading.Thread(target=delayed, daemon=True)
    thread.start()
    return thread


def unknown_fields(raw, known, path=""):
    """Paths of keys in the server's JSON `raw` that the model (`known`, its to_dict) lacks."""
    out = []
    if isinstance(raw, dict) and isinstance(known, dict):
        for key, value in raw.items():
            if key not in known:
                out.append(f"{path}.{key}")
            else:
                out.extend(unknown_fields(value, known[key], f"{path}.{key}"))
    elif isinstance(raw, list) and isinstance(known, list):
        for i, (r, k) in enumerate(zip(raw, known)):
            out.extend(unknown_fields(r, k, f"{path}[{i}]"))
    return out


def strict(model, call, *args, **kwargs):
    """Calls the API for raw JSON and validates it as `model`, failing on any field the model
    does not know (the generated deserializer alone would drop those silently)."""
    response = call(*args, _preload_content=False, **kwargs)
    raw = json.loads(response.data)
    obj = model.from_dict(raw)
    extra = unknown_fields(raw, obj.to_dict(serialize=True))
    check(not extra, f"{model.__name__} has fields the client does not know: {extra}")
    return obj


def names_of(items):
    return {item.metadata.name for item in items}


# -- pods ----------------------------------------------------------------------------------------


def pod_manifest(name, labels=None):
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels=labels or {"app": "pyclient"}),
        spec=client.V1PodSpec(
            containers=[
                client.V1Container(
                    name="main",
                    image="registry.k8s.io/pause:3.10",
                    ports=[client.V1ContainerPort(container_port=8080, name="http")],
                    resources=client.V1ResourceRequirements(
                        requests={"cpu": "100m", "memory": "64Mi"}
                    ),
                ),
                client.V1Container(name="sidecar", image="busybox:1.36", command=["sleep", "3600"]),
            ]
        ),
    )


def running_status(pod):
    """The status a kubelet reports for a running pod, with every ContainerStatus field set."""
    started = now()
    return {
        "status": {
            "phase": "Running",
            "hostIP": "10.0.0.1",
            "hostIPs": [{"ip": "10.0.0.1"}],
            "podIP": "10.244.0.5",
            "podIPs": [{"ip": "10.244.0.5"}],
            "startTime": started.isoformat().replace("+00:00", "Z"),
            "qosClass": "Burstable",
            "conditions": [
                {"type": t, "status": "True", "lastTransitionTime": started.isoformat().replace("+00:00", "Z")}
                for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
            ],
            "containerStatuses": [
                {
                    "name": c.name,
                    "image": c.image,
                    "imageID": f"docker-pullable://{c.image}@sha256:{'0' * 64}",
                    "containerID": f"containerd://{uuid.uuid4().hex}",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": started.isoformat().replace("+00:00", "Z")}},
                }
                for c in pod.spec.containers
            ],
        }
    }


def test_pods(v1, node_name):
    name = f"py-pod-{SUFFIX}"

    step("pods: create")
    created = v1.create_namespaced_pod(NS, pod_manifest(name))
    check(isinstance(created, client.V1Pod), "create answers a V1Pod")
    check(created.metadata.uid and created.metadata.resource_version, "uid and resourceVersion set")
    check(isinstance(created.metadata.resource_version, str), "resourceVersion is a string")
    check(created.metadata.creation_timestamp is not None, "creationTimestamp set")
    check(created.status is not None and created.status.phase == "Pending", "a new pod is Pending")
    expect_api_error(409, v1.create_namespaced_pod, NS, pod_manifest(name))

    generated = v1.create_namespaced_pod(
        NS,
        client.V1Pod(
            metadata=client.V1ObjectMeta(generate_name="py-gen-", labels={"app": "pyclient-gen"}),
            spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox:1.36")]),
        ),
    )
    check(generated.metadata.name.startswith("py-gen-"), "generateName makes a name")

    step("pods: list")
    listed = v1.list_namespaced_pod(NS)
    check(isinstance(listed, client.V1PodList), "list answers a V1PodList")
    check(name in names_of(listed.items), "the pod is listed")
    check(isinstance(listed.metadata.resource_version, str), "list resourceVersion is a string")
    selected = v1.list_namespaced_pod(NS, label_selector="app=pyclient")
    check(names_of(selected.items) == {name}, f"label selector selects only {name}")
    by_name = v1.list_namespaced_pod(NS, field_selector=f"metadata.name={name}")
    check(names_of(by_name.items) == {name}, "field selector metadata.name")
    pending = v1.list_namespaced_pod(NS, field_selector="status.phase=Pending,spec.nodeName=")
    check(name in names_of(pending.items), "field selector status.phase + unbound")
    everywhere = v1.list_pod_for_all_namespaces(label_selector="app in (pyclient,pyclient-gen)")
    check(names_of(everywhere.items) == {name, generated.metadata.name}, "list across namespaces")
    empty = v1.list_namespaced_pod(NS, label_selector="app=nothing-has-this")
    check(empty.items == [], "an empty list has items: []")
    page = v1.list_namespaced_pod(NS, limit=1)
    check(len(page.items) == 1 and page.metadata._continue, "limit gives a page and a continue token")
    rest = v1.list_namespaced_pod(NS, limit=100, _continue=page.metadata._continue)
    check(len(rest.items) >= 1, "continue gives the next page")

    step("pods: read")
    strict(client.V1PodList, v1.list_namespaced_pod, NS)
    read = strict(client.V1Pod, v1.read_namespaced_pod, name, NS)
    check(read.metadata.uid == created.metadata.uid, "read returns the same pod")
    check(read.spec.containers[0].resources.requests["cpu"] == "100m", "requests round-trip")
    expect_api_error(404, v1.read_namespaced_pod, "no-such-pod", NS)

    step("pods: watch (bind, status, patch while watching)")
    start_rv = v1.list_namespaced_pod(NS).metadata.resource_version

    def act_as_scheduler_and_kubelet():
        binding = client.V1Binding(
            metadata=client.V1ObjectMeta(name=name),
            target=client.V1ObjectReference(api_version="v1", kind="Node", name=node_name),
        )
        # The binding subresource answers with a Status, not a Binding; read it raw.
        response = v1.create_namespaced_pod_binding(name, NS, binding, _preload_content=False)
        check(response.status == 201, f"binding answers 201, got {response.status}")
        status = client.V1Status.from_dict(json.loads(response.data))
        check(status.status == "Success", f"binding answers a Success Status: {status}")
        pod = v1.read_namespaced_pod(name, NS)
        v1.patch_namespaced_pod_status(name, NS, running_status(pod), _content_type=MERGE)

    worker = in_background(act_as_scheduler_and_kubelet)
    events = collect_watch(
        v1.list_namespaced_pod,
        NS,
        field_selector=f"metadata.name={name}",
        resource_version=start_rv,
        until=lambda evs: any(
            e["type"] == "MODIFIED" and e["object"].status.phase == "Running" for e in evs
        ),
    )
    worker.join()
    check(events, "the watch saw events")
    for e in events:
        check(e["type"] in ("MODIFIED", "BOOKMARK"), f"unexpected event {e['type']}")
        if e["type"] == "MODIFIED":
            check(isinstance(e["object"], client.V1Pod), "watch objects are V1Pods")
    running = events[-1]["object"]
    check(running.spec.node_name == node_name, "the binding set spec.nodeName")
    check(running.status.phase == "Running", "the status patch set Running")
    statuses = running.status.container_statuses
    check(len(statuses) == 2 and all(s.ready for s in statuses), "container statuses round-trip")
    check(
        any(c.type == "PodScheduled" and c.status == "True" for c in running.status.conditions),
        "PodScheduled condition",
    )
    on_node = v1.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node_name}")
    check(name in names_of(on_node.items), "field selector spec.nodeName")
    strict(client.V1Pod, v1.read_namespaced_pod, name, NS)
    strict(client.V1Pod, v1.read_namespaced_pod_status, name, NS)

    step("pods: watch with initial events (no resourceVersion) ends by timeout")
    initial = collect_watch(
        v1.list_namespaced_pod,
        NS,
        label_selector="app=pyclient",
        until=lambda evs: len(evs) >= 1,
        timeout=5,
    )
    check(initial and initial[0]["type"] == "ADDED", "a watch without RV starts with ADDED")
    check(initial[0]["object"].status.container_statuses[0].image_id, "imageID survives")

    step("pods: patch (strategic, merge, json patch, apply)")
    patched = v1.patch_namespaced_pod(
        name,
        NS,
        {"metadata": {"labels": {"tier": "backend"}},
         "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}},
        _content_type=STRATEGIC,
    )
    check(patched.metadata.labels == {"app": "pyclient", "tier": "backend"}, "strategic merge")
    check(len(patched.spec.containers) == 2, "strategic merge keeps the other container")
    patched = v1.patch_namespaced_pod(
        name, NS, {"metadata": {"annotations": {"kemu.dev/by": "python"}}}, _content_type=MERGE
    )
    check(patched.metadata.annotations.get("kemu.dev/by") == "python", "merge patch")
    patched = v1.patch_namespaced_pod(
        name, NS, [{"op": "replace", "path": "/metadata/labels/tier", "value": "frontend"}]
    )
    check(patched.metadata.labels["tier"] == "frontend", "JSON patch (a list body)")
    patched = v1.patch_namespaced_pod(
        name,
        NS,
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"owner": "py"}}},
        field_manager="pyclient",
        _content_type=APPLY,
    )
    check(patched.metadata.labels.get("owner") == "py", "server-side apply")
    check(
        any(m.manager == "pyclient" for m in (patched.metadata.managed_fields or [])),
        "managedFields names the apply manager",
    )
    stale = v1.read_namespaced_pod(name, NS)
    stale.metadata.resource_version = created.metadata.resource_version
    expect_api_error(409, v1.replace_namespaced_pod, name, NS, stale)

    step("pods: graceful delete of a bound pod, then the kubelet's confirmation")
    deleting = v1.delete_namespaced_pod(name, NS, body=client.V1DeleteOptions(propagation_policy="Background"))
    check(isinstance(deleting, client.V1Pod), "delete answers the Pod")
    check(deleting.metadata.deletion_timestamp is not None, "graceful delete sets deletionTimestamp")
    check(deleting.metadata.deletion_grace_period_seconds == 30, "default grace period 30 s")
    still = v1.read_namespaced_pod(name, NS)
    check(still.metadata.deletion_timestamp is not None, "the pod stays until confirmed")

    def confirm():
        v1.delete_namespaced_pod(name, NS, grace_period_seconds=0)

    worker = in_background(confirm)
    events = collect_watch(
        v1.list_namespaced_pod,
        NS,
        field_selector=f"metadata.name={name}",
        resource_version=still.metadata.resource_version,
        until=lambda evs: any(e["type"] == "DELETED" for e in evs),
    )
    worker.join()
    check(any(e["type"] == "DELETED" for e in events), "the watch saw DELETED")
    deleted = [e for e in events if e["type"] == "DELETED"][0]["object"]
    check(isinstance(deleted, client.V1Pod) and deleted.metadata.name == name, "DELETED has the pod")
    expect_api_error(404, v1.read_namespaced_pod, name, NS)

    step("pods: immediate delete of an unbound pod")
    gone = v1.delete_namespaced_pod(generated.metadata.name, NS)
    check(isinstance(gone, client.V1Pod), "delete answers the Pod")
    expect_api_error(404, v1.read_namespaced_pod, generated.metadata.name, NS)
    expect_api_error(404, v1.delete_namespaced_pod, generated.metadata.name, NS)


# -- nodes ---------------------------------------------------------------------------------------


def node_manifest(name):
    heartbeat = now()
    return client.V1Node(
        metadata=client.V1ObjectMeta(
            name=name,
            labels={
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kemu.dev/pyclient": "true",
            },
        ),
        spec=client.V1NodeSpec(pod_cidr="10.244.1.0/24", pod_cidrs=["10.244.1.0/24"]),
        status=client.V1NodeStatus(
            capacity={"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"},
            allocatable={"cpu": "7800m", "memory": "31Gi", "pods": "110", "ephemeral-storage": "95Gi"},
            addresses=[
                client.V1NodeAddress(type="InternalIP", address="10.0.0.1"),
                client.V1NodeAddress(type="Hostname", address=name),
            ],
            conditions=[
                client.V1NodeCondition(
                    type=t,
                    status=s,
                    reason=r,
                    message=f"kemu {t}",
                    last_heartbeat_time=heartbeat,
                    last_transition_time=heartbeat,
                )
                for t, s, r in (
                    ("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                    ("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                    ("PIDPressure", "False", "KubeletHasSufficientPID"),
                    ("Ready", "True", "KubeletReady"),
                )
            ],
            daemon_endpoints=client.V1NodeDaemonEndpoints(
                kubelet_endpoint=client.V1DaemonEndpoint(port=10250)
            ),
            node_info=client.V1NodeSystemInfo(
                architecture="amd64",
                boot_id=str(uuid.uuid4()),
                container_runtime_version="containerd://2.1.0",
                kernel_version="6.1.0-kemu",
                kube_proxy_version="v1.37.1",
                kubelet_version="v1.37.1",
                machine_id=uuid.uuid4().hex,
                operating_system="linux",
                os_image="kemu simulated node",
                system_uuid=str(uuid.uuid4()),
            ),
            images=[
                client.V1ContainerImage(names=["registry.k8s.io/pause:3.10"], size_bytes=320368)
            ],
        ),
    )


def test_nodes(v1):
    name = f"py-node-{SUFFIX}"

    step("nodes: create with full status")
    created = v1.create_node(node_manifest(name))
    check(isinstance(created, client.V1Node), "create answers a V1Node")
    info = created.status.node_info
    check(info is not None and info.kubelet_version == "v1.37.1", "nodeInfo kept on create")
    check(len(created.status.conditions) == 4, "conditions kept on create")
    check(created.metadata.namespace is None, "nodes are cluster-scoped")
    expect_api_error(409, v1.create_node, node_manifest(name))

    step("nodes: list and read")
    listed = v1.list_node(label_selector="kemu.dev/pyclient=true")
    check(isinstance(listed, client.V1NodeList), "list answers a V1NodeList")
    check(names_of(listed.items) == {name}, "label selector on nodes")
    by_name = v1.list_node(field_selector=f"metadata.name={name}")
    check(names_of(by_name.items) == {name}, "field selector on nodes")
    strict(client.V1NodeList, v1.list_node)
    read = strict(client.V1Node, v1.read_node, name)
    check(read.status.capacity["cpu"] == "8", "capacity round-trips")
    check(read.status.node_info.boot_id == info.boot_id, "nodeInfo round-trips")
    check(read.status.daemon_endpoints.kubelet_endpoint.port == 10250, "daemonEndpoints")
    check(read.spec.pod_cidr == "10.244.1.0/24", "spec round-trips")
    read_status = v1.read_node_status(name)
    check(read_status.metadata.name == name, "read node status")

    step("nodes: watch while the node heartbeats and is cordoned")
    start_rv = read.metadata.resource_version

    def heartbeat_and_cordon():
        beat = now().isoformat().replace("+00:00", "Z")
        v1.patch_node_status(
            name,
            {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                        "message": "still here", "lastHeartbeatTime": beat}]}},
            _content_type=STRATEGIC,
        )
        v1.patch_node(name, {"spec": {"unschedulable": True}}, _content_type=MERGE)

    worker = in_background(heartbeat_and_cordon)
    events = collect_watch(
        v1.list_node,
        field_selector=f"metadata.name={name}",
        resource_version=start_rv,
        until=lambda evs: any(e["type"] == "MODIFIED" and e["object"].spec.unschedulable for e in evs),
    )
    worker.join()
    modified = [e["object"] for e in events if e["type"] == "MODIFIED"]
    check(len(modified) >= 2, f"two MODIFIED events, got {[e['type'] for e in events]}")
    check(all(isinstance(n, client.V1Node) for n in modified), "watch objects are V1Nodes")
    ready = [c for c in modified[0].status.conditions if c.type == "Ready"][0]
    check(ready.message == "still here", "strategic merge of conditions by type")
    check(len(modified[0].status.conditions) == 4, "the other conditions stay")
    check(modified[-1].spec.unschedulable is True, "cordoned")

    step("nodes: status subresource changes only status; apply; replace")
    only_status = v1.patch_node_status(
        name, {"metadata": {"labels": {"ignored": "yes"}}, "status": {"capacity": {"pods": "200"}}},
        _content_type=MERGE,
    )
    check(only_status.status.capacity["pods"] == "200", "status patch applied")
    check("ignored" not in (only_status.metadata.labels or {}), "status patch ignores metadata")
    applied = v1.patch_node(
        name,
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"zone": "a"}}},
        field_manager="pyclient",
        _content_type=APPLY,
    )
    check(applied.metadata.labels.get("zone") == "a", "server-side apply on a node")
    replaced = v1.read_node(name)
    replaced.metadata.labels["replaced"] = "true"
    replaced = v1.replace_node(name, replaced)
    check(replaced.metadata.labels.get("replaced") == "true", "replace (PUT)")

    step("nodes: delete")
    # The generated client types this answer as a plain object; validate it as the Node it is.
    deleted = client.V1Node.from_dict(v1.delete_node(name))
    check(deleted.metadata.name == name and deleted.status.node_info is not None, "delete answers the Node")
    expect_api_error(404, v1.read_node, name)


# -- events --------------------------------------------------------------------------------------


def event_manifest(name, pod_name, pod_uid, reason, message, type_="Normal", count=1):
    t = now()
    return client.CoreV1Event(
        metadata=client.V1ObjectMeta(name=name),
        involved_object=client.V1ObjectReference(
            api_version="v1", kind="Pod", name=pod_name, namespace=NS, uid=pod_uid,
            field_path="spec.containers{main}",
        ),
        reason=reason,
        message=message,
        type=type_,
        count=count,
        first_timestamp=t,
        last_timestamp=t,
        source=client.V1EventSource(component="kubelet", host="py-node"),
        reporting_component="kubelet",
        reporting_instance="py-node",
    )


def test_events(v1, events_v1):
    pod_name = f"py-evpod-{SUFFIX}"
    pod_uid = str(uuid.uuid4())
    other_uid = str(uuid.uuid4())

    step("events: create")
    pulled = v1.create_namespaced_event(
        NS, event_manifest(f"{pod_name}.pulled", pod_name, pod_uid, "Pulled", "image pulled")
    )
    check(isinstance(pulled, client.CoreV1Event), "create answers a CoreV1Event")
    check(pulled.involved_object.uid == pod_uid, "involvedObject round-trips")
    v1.create_namespaced_event(
        NS, event_manifest(f"{pod_name}.started", pod_name, pod_uid, "Started", "container started")
    )
    v1.create_namespaced_event(
        NS,
        event_manifest(f"other-{SUFFIX}.failed", f"other-{SUFFIX}", other_uid, "Failed", "no", "Warning"),
    )

    step("events: list with field selectors (as kubectl describe does)")
    selector = f"involvedObject.name={pod_name},involvedObject.namespace={NS},involvedObject.uid={pod_uid}"
    listed = v1.list_namespaced_event(NS, field_selector=selector)
    check(isinstance(listed, client.CoreV1EventList), "list answers a CoreV1EventList")
    check({e.reason for e in listed.items} == {"Pulled", "Started"}, "involvedObject selector")
    kinds = v1.list_event_for_all_namespaces(field_selector=f"involvedObject.kind=Pod,involvedObject.uid={other_uid}")
    check([e.reason for e in kinds.items] == ["Failed"], "involvedObject.kind + uid across namespaces")
    reasons = v1.list_namespaced_event(NS, field_selector="reason=Failed")
    check(f"other-{SUFFIX}.failed" in names_of(reasons.items), "reason field selector")
    warnings = v1.list_namespaced_event(NS, field_selector=f"type=Warning,involvedObject.name=other-{SUFFIX}")
    check(len(warnings.items) == 1, "type field selector")

    step("events: read, patch (count bump as the recorder does), watch")
    start_rv = listed.metadata.resource_version

    def bump():
        v1.patch_namespaced_event(
            f"{pod_name}.pulled",
            NS,
            {"count": 2, "lastTimestamp": now().isoformat().replace("+00:00", "Z"), "message": "image pulled again"},
            _content_type=STRATEGIC,
        )

    worker = in_background(bump)
    events = collect_watch(
        v1.list_namespaced_event,
        NS,
        field_selector=f"involvedObject.uid={pod_uid}",
        resource_version=start_rv,
        until=lambda evs: any(e["type"] == "MODIFIED" for e in evs),
    )
    worker.join()
    modified = [e["object"] for e in events if e["type"] == "MODIFIED"]
    check(modified and modified[0].count == 2, "the watch saw the count bump")
    check(isinstance(modified[0], client.CoreV1Event), "watch objects are CoreV1Events")
    read = strict(client.CoreV1Event, v1.read_namespaced_event, f"{pod_name}.pulled", NS)
    strict(client.CoreV1EventList, v1.list_namespaced_event, NS)
    check(read.message == "image pulled again" and read.count == 2, "read after patch")

    step("events: events.k8s.io/v1 view of the same events")
    new_api = events_v1.list_namespaced_event(NS, field_selector=f"regarding.uid={pod_uid}")
    check(isinstance(new_api, client.EventsV1EventList), "events.k8s.io list")
    check({e.reason for e in new_api.items} == {"Pulled", "Started"}, "regarding selector")
    one = strict(client.EventsV1Event, events_v1.read_namespaced_event, f"{pod_name}.started", NS)
    check(one.regarding.name == pod_name and one.note == "container started", "events.k8s.io read")

    step("events: delete")
    deleted = client.CoreV1Event.from_dict(v1.delete_namespaced_event(f"{pod_name}.pulled", NS))
    check(deleted.reason == "Pulled", "delete answers the Event")
    expect_api_error(404, v1.read_namespaced_event, f"{pod_name}.pulled", NS)
    # Like kube-apiserver, deletecollection answers the list of what it deleted, which the
    # generated client types as a Status; read it raw and validate it as the list it is.
    removed = v1.delete_collection_namespaced_event(
        NS, field_selector=f"involvedObject.uid={pod_uid}", _preload_content=False
    )
    removed = client.CoreV1EventList.from_dict(json.loads(removed.data))
    check([e.reason for e in removed.items] == ["Started"], "deletecollection answers what it deleted")
    left = v1.list_namespaced_event(NS, field_selector=f"involvedObject.uid={pod_uid}")
    check(left.items == [], "deletecollection by field selector")
    v1.delete_namespaced_event(f"other-{SUFFIX}.failed", NS)


def test_discovery(api_client):
    step("version and namespaces")
    version = client.VersionApi(api_client).get_code()
    check(version.major and version.git_version.startswith("v1."), f"version {version}")
    namespaces = client.CoreV1Api(api_client).list_namespace()
    check("default" in names_of(namespaces.items), "the default namespace exists")
    groups = client.ApisApi(api_client).get_api_versions()
    check(any(g.name == "apps" for g in groups.groups), "apps in /apis")
    core = client.CoreApi(api_client).get_api_versions()
    check("v1" in core.versions, "/api lists v1")


def fetch_json(api_client, path):
    """GETs `path` as JSON through the client's own transport and credentials."""
    request = api_client.param_serialize(
        method="GET", resource_path=path, header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"])
    response = api_client.call_api(*request)
    response.read()
    check(response.status == 200, f"GET {path}: {response.status}")
    return json.loads(response.data)


def snake(name):
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


def test_openapi(api_client):
    step("openapi v2 and v3")
    v2 = fetch_json(api_client, "/openapi/v2")
    check(v2["swagger"] == "2.0", "/openapi/v2 is Swagger 2.0")
    pod = v2["definitions"]["io.k8s.api.core.v1.Pod"]
    check(pod["x-kubernetes-group-version-kind"][0]["kind"] == "Pod", "Pod's kind")
    check("status" in pod["properties"], "Pod has a status property")
    # The client was generated from kube-apiserver's document: every operation kemu publishes
    # is one the client has a method for, named from the operation id.
    for tag, api, prefix in [("core_v1", client.CoreV1Api, "CoreV1"),
                             ("apps_v1", client.AppsV1Api, "AppsV1")]:
        operations = [op["operationId"] for item in v2["paths"].values()
                      for op in item.values()
                      if isinstance(op, dict) and tag in op.get("tags", [])]
        check(len(operations) > 20, f"{tag} operations: {operations}")
        for operation in operations:
            method = snake(operation.replace(prefix, "", 1))
            check(hasattr(api, method), f"{operation}: {api.__name__} has no {method}")
    root = fetch_json(api_client, "/openapi/v3")
    url = root["paths"]["api/v1"]["serverRelativeURL"]
    core = fetch_json(api_client, url)
    schemas = core["components"]["schemas"]
    check(schemas["io.k8s.api.core.v1.PodStatus"]["properties"]["message"]["type"] == "string",
          "PodStatus.message in /openapi/v3/api/v1")


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    configuration = client.Configuration()
    config.load_kube_config(config_file=sys.argv[1], client_configuration=configuration)
    api_client = client.ApiClient(configuration)
    v1 = client.CoreV1Api(api_client)
    events_v1 = client.EventsV1Api(api_client)
    try:
        test_discovery(api_client)
        test_openapi(api_client)
        test_nodes(v1)
        test_pods(v1, f"py-node-{SUFFIX}")
        test_events(v1, events_v1)
    except Exception:  # noqa: BLE001 - any failure is the test's failure
        traceback.print_exc()
        return 1
    print("python client: all checks passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
