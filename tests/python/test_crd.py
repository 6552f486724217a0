"""The official Kubernetes Python client's dynamic client on a CustomResourceDefinition.

Usage: python test_crd.py KUBECONFIG

Creates a CRD through the typed ApiextensionsV1Api (its answer validated by the client's models),
waits for Established, then drives the custom resource through `kubernetes.dynamic`: discovery
finds it, objects are created (defaulted), listed with a label selector, read, patched (merge),
replaced, status-written, refused with a 422 naming the field (a schema bound and a CEL
validation rule, a transition rule on update), watched and deleted; deleting
the CRD removes them. Exits 0 when every check holds. Run by cli/tests/python_client.rs.
"""

import json
import sys
import time
import traceback
import uuid

from kubernetes import client, config, dynamic, watch
from kubernetes.client.rest import ApiException
from kubernetes.dynamic.exceptions import DynamicApiError, ResourceNotFoundError

SUFFIX = uuid.uuid4().hex[:6]
GROUP = f"py{SUFFIX}.example.com"
PLURAL = "gadgets"
NAME = f"{PLURAL}.{GROUP}"
NS = "default"


def step(name):
    print(f"== {name}", flush=True)


def check(condition, what):
    if not condition:
        raise AssertionError(what)


def definition():
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["size"],
                "x-kubernetes-validations": [
                    {"rule": "self.size <= 100", "message": "size must be at most 100"},
                    {"rule": "self.mode == oldSelf.mode || self.mode != 'frozen'", "message": "cannot freeze"},
                ],
                "properties": {
                    "size": {"type": "integer", "minimum": 1},
                    "mode": {"type": "string", "default": "fast"},
                },
            },
            "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": NAME},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": PLURAL, "singular": "gadget", "kind": "Gadget", "shortNames": ["gd"]},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": {"status": {}},
                }
            ],
        },
    }


def established(crd):
    conditions = (crd.status.conditions or []) if crd.status else []
    return any(c.type == "Established" and c.status == "True" for c in conditions)


def test_definition(ext):
    step("create the CRD")
    crd = ext.create_custom_resource_definition(definition())
    check(crd.metadata.name == NAME, crd.metadata.name)
    deadline = time.time() + 30
    while not established(crd):
        check(time.time() < deadline, "the CRD never became Established")
        time.sleep(0.2)
        crd = ext.read_custom_resource_definition(NAME)
    check(crd.status.accepted_names.kind == "Gadget", crd.status.accepted_names)
    check(crd.status.stored_versions == ["v1"], crd.status.stored_versions)


def gadget(name, size, labels=None):
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Gadget",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"size": size},
    }


def test_objects(dyn):
    step("discover the resource")
    deadline = time.time() + 30
    while True:
        try:
            gadgets = dyn.resources.get(api_version=f"{GROUP}/v1", kind="Gadget")
            break
        except ResourceNotFoundError:
            check(time.time() < deadline, "discovery never listed the resource")
            dyn.resources.invalidate_cache()
            time.sleep(0.5)
    check(gadgets.namespaced and gadgets.name == PLURAL, gadgets)
    check("gd" in (gadgets.short_names or []), gadgets.short_names)

    step("create, default and list")
    created = gadgets.create(body=gadget("a", 1, {"tier": "x"}), namespace=NS)
    check(created.spec.mode == "fast", created.spec)
    check(created.metadata.generation == 1, created.metadata)
    gadgets.create(body=gadget("b", 2), namespace=NS)
    listed = gadgets.get(namespace=NS, label_selector="tier=x")
    check([i.metadata.name for i in listed.items] == ["a"], listed)
    check(listed.kind == "GadgetList", listed.kind)

    step("refuse an invalid object with the field path")
    try:
        gadgets.create(body=gadget("c", 0), namespace=NS)
        raise AssertionError("size 0 was accepted")
    except DynamicApiError as e:
        check(e.status == 422, e.status)
        check("spec.size in body should be greater than or equal to 1" in str(e.body), e.body)

    step("refuse an object breaking a validation rule")
    try:
        gadgets.create(body=gadget("d", 101), namespace=NS)
        raise AssertionError("size 101 was accepted")
    except DynamicApiError as e:
        check(e.status == 422, e.status)
        body = json.loads(e.body)
        check(
            body["message"] == f'Gadget.{GROUP} "d" is invalid: spec: Invalid value: "object": size must be at most 100',
            body["message"],
        )
        check(body["details"]["causes"] == [
            {"reason": "FieldValueInvalid", "message": 'Invalid value: "object": size must be at most 100', "field": "spec"}
        ], body["details"])
    try:
        gadgets.patch(
            name="a", namespace=NS, body={"spec": {"mode": "frozen"}}, content_type="application/merge-patch+json"
        )
        raise AssertionError("the transition rule did not run")
    except DynamicApiError as e:
        check(e.status == 422 and "cannot freeze" in str(e.body), e.body)

    step("patch, replace and write the status")
    patched = gadgets.patch(
        name="a", namespace=NS, body={"spec": {"size": 3}}, content_type="application/merge-patch+json"
    )
    check(patched.spec.size == 3 and patched.metadata.generation == 2, patched)
    current = gadgets.get(name="a", namespace=NS).to_dict()
    current["spec"]["mode"] = "slow"
    replaced = gadgets.replace(body=current, namespace=NS)
    check(replaced.spec.mode == "slow", replaced.spec)
    current = replaced.to_dict()
    current["status"] = {"ready": True}
    status = gadgets.status.replace(body=current, namespace=NS)
    check(status.status.ready is True, status)

    step("watch a deletion")
    events = []
    stream = watch.Watch()
    gadgets.delete(name="b", namespace=NS)
    for event in gadgets.watch(namespace=NS, timeout=5, watcher=stream):
        events.append((event["type"], event["object"].metadata.name))
        if event["object"].metadata.name == "a":
            stream.stop()
    check(("ADDED", "a") in events and ("ADDED", "b") not in events, events)


def test_cleanup(ext, dyn):
    step("delete the CRD and its objects")
    ext.delete_custom_resource_definition(NAME)
    try:
        ext.read_custom_resource_definition(NAME)
        raise AssertionError("the CRD is still there")
    except ApiException as e:
        check(e.status == 404, e.status)
    ext.create_custom_resource_definition(definition())
    deadline = time.time() + 30
    while not established(ext.read_custom_resource_definition(NAME)):
        check(time.time() < deadline, "the re-created CRD never became Established")
        time.sleep(0.2)
    dyn.resources.invalidate_cache()
    gadgets = dyn.resources.get(api_version=f"{GROUP}/v1", kind="Gadget")
    check(gadgets.get(namespace=NS).items == [], "objects outlived their definition")
    ext.delete_custom_resource_definition(NAME)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    configuration = client.Configuration()
    config.load_kube_config(config_file=sys.argv[1], client_configuration=configuration)
    api_client = client.ApiClient(configuration)
    ext = client.ApiextensionsV1Api(api_client)
    try:
        test_definition(ext)
        dyn = dynamic.DynamicClient(api_client)
        test_objects(dyn)
        test_cleanup(ext, dyn)
    except Exception:  # noqa: BLE001 - any failure is the test's failure
        traceback.print_exc()
        return 1
    print("python dynamic client: all checks passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
