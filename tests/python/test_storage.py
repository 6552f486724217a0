"""The official Kubernetes Python client against kemu's storage API and volume controllers.

Usage: python test_storage.py KUBECONFIG

Through CoreV1Api and StorageV1Api (strict models): the default StorageClass and the emulated
CSI driver every cluster starts with, a claim bound dynamically by the emulated provisioner, a
static PersistentVolume bound through a claim's selector and Released under Retain, an
expansion through the resizer's conditions, and Kubernetes' 422s. Run by
cli/tests/python_client.rs with the controller manager; exits 0 when every check holds.
"""

import sys
import time
import traceback
import uuid

from kubernetes import client, config

# The shared helpers: steps, checks, expected errors and strict model validation.
from test_client import MERGE, check, expect_api_error, step, strict

NS = "default"
SUFFIX = uuid.uuid4().hex[:6]


def wait_for(what, probe, timeout=30):
    """Calls `probe` until it returns something true (returned) or `timeout` seconds pass."""
    deadline = time.time() + timeout
    while True:
        found = probe()
        if found:
            return found
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def claim_manifest(name, size, class_name=None, selector=None):
    return client.V1PersistentVolumeClaim(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PersistentVolumeClaimSpec(
            access_modes=["ReadWriteOnce"],
            resources=client.V1VolumeResourceRequirements(requests={"storage": size}),
            storage_class_name=class_name,
            selector=selector,
        ),
    )


def read_claim(core, name):
    return strict(
        client.V1PersistentVolumeClaim, core.read_namespaced_persistent_volume_claim, name, NS
    )


def read_volume(core, name):
    return strict(client.V1PersistentVolume, core.read_persistent_volume, name)


def claim_in_phase(core, name, phase):
    claim = read_claim(core, name)
    return claim if claim.status.phase == phase else None


def test_classes(storage):
    step("the default class and the emulated driver")
    classes = strict(client.V1StorageClassList, storage.list_storage_class)
    standard = [c for c in classes.items if c.metadata.name == "standard"]
    check(len(standard) == 1, f"classes: {[c.metadata.name for c in classes.items]}")
    check(standard[0].provisioner == "csi.kemu.dev", f"provisioner: {standard[0].provisioner}")
    check(
        standard[0].metadata.annotations.get("storageclass.kubernetes.io/is-default-class")
        == "true",
        f"annotations: {standard[0].metadata.annotations}",
    )
    check(standard[0].allow_volume_expansion is True, "standard expands")
    driver = strict(client.V1CSIDriver, storage.read_csi_driver, "csi.kemu.dev")
    check(driver.spec.attach_required is True, f"driver: {driver.spec}")


def test_dynamic_claim_and_expansion(core):
    name = f"py-data-{SUFFIX}"
    step("a claim of no class gets the default one and is provisioned and bound")
    created = core.create_namespaced_persistent_volume_claim(NS, claim_manifest(name, "1Gi"))
    check(created.spec.storage_class_name == "standard", f"class: {created.spec}")
    check(
        created.metadata.finalizers == ["kubernetes.io/pvc-protection"],
        f"finalizers: {created.metadata.finalizers}",
    )
    bound = wait_for("the claim to bind", lambda: claim_in_phase(core, name, "Bound"))
    check(bound.status.capacity == {"storage": "1Gi"}, f"capacity: {bound.status.capacity}")
    check(bound.status.access_modes == ["ReadWriteOnce"], f"modes: {bound.status.access_modes}")
    volume = read_volume(core, bound.spec.volume_name)
    check(volume.metadata.name == f"pvc-{bound.metadata.uid}", f"volume: {volume.metadata.name}")
    check(volume.spec.csi.driver == "csi.kemu.dev", f"source: {volume.spec.csi}")
    check(volume.spec.claim_ref.name == name, f"claimRef: {volume.spec.claim_ref}")
    check(volume.spec.persistent_volume_reclaim_policy == "Delete", "the class's policy")
    check(volume.status.phase == "Bound", f"volume phase: {volume.status.phase}")
    listed = strict(
        client.V1PersistentVolumeClaimList, core.list_namespaced_persistent_volume_claim, NS
    )
    check(name in {c.metadata.name for c in listed.items}, "the claim is listed")

    step("expansion: the resizer grows the volume, the claim waits for a pod")
    core.patch_namespaced_persistent_volume_claim(
        name,
        NS,
        {"spec": {"resources": {"requests": {"storage": "2Gi"}}}},
        _content_type=MERGE,
    )

    def resize_pending():
        claim = read_claim(core, name)
        kinds = [c.type for c in claim.status.conditions or []]
        return claim if "FileSystemResizePending" in kinds else None

    pending = wait_for("FileSystemResizePending", resize_pending)
    check(
        pending.status.allocated_resources == {"storage": "2Gi"},
        f"allocated: {pending.status.allocated_resources}",
    )
    check(pending.status.capacity == {"storage": "1Gi"}, "the claim's capacity waits for a pod")
    grown = read_volume(core, bound.spec.volume_name)
    check(grown.spec.capacity == {"storage": "2Gi"}, f"volume capacity: {grown.spec.capacity}")
    shrink = expect_api_error(
        422,
        core.patch_namespaced_persistent_volume_claim,
        name,
        NS,
        {"spec": {"resources": {"requests": {"storage": "1Gi"}}}},
        _content_type=MERGE,
    )
    check("field can not be less than status.capacity" in shrink.body, shrink.body)

    step("reclaim Delete: the provisioned volume goes with its claim")
    core.delete_namespaced_persistent_volume_claim(name, NS)

    def volume_gone():
        names = {v.metadata.name for v in core.list_persistent_volume().items}
        return bound.spec.volume_name not in names

    wait_for("the provisioned volume to be deleted", volume_gone)


def test_static_volume(core):
    gold, plain, name = f"py-gold-{SUFFIX}", f"py-plain-{SUFFIX}", f"py-picky-{SUFFIX}"
    tier = f"gold-{SUFFIX}"

    def volume(volume_name, size, labels=None):
        return client.V1PersistentVolume(
            metadata=client.V1ObjectMeta(name=volume_name, labels=labels),
            spec=client.V1PersistentVolumeSpec(
                capacity={"storage": size},
                access_modes=["ReadWriteOnce"],
                host_path=client.V1HostPathVolumeSource(path=f"/data/{volume_name}"),
            ),
        )

    step("a static volume bound through a claim's selector")
    core.create_persistent_volume(volume(plain, "2Gi"))
    made = core.create_persistent_volume(volume(gold, "5Gi", {"tier": tier}))
    check(made.spec.persistent_volume_reclaim_policy == "Retain", "the default policy")
    selector = client.V1LabelSelector(match_labels={"tier": tier})
    core.create_namespaced_persistent_volume_claim(
        NS, claim_manifest(name, "1Gi", class_name="", selector=selector)
    )
    bound = wait_for("the claim to bind", lambda: claim_in_phase(core, name, "Bound"))
    check(bound.spec.volume_name == gold, f"bound to {bound.spec.volume_name}")
    check(bound.status.capacity == {"storage": "5Gi"}, f"capacity: {bound.status.capacity}")
    check(
        bound.metadata.annotations.get("pv.kubernetes.io/bind-completed") == "yes",
        f"annotations: {bound.metadata.annotations}",
    )
    volume_now = read_volume(core, gold)
    check(volume_now.spec.claim_ref.name == name, f"claimRef: {volume_now.spec.claim_ref}")
    check(read_volume(core, plain).status.phase == "Available", "the other volume stays free")

    step("Retain: the volume is Released when its claim goes")
    core.delete_namespaced_persistent_volume_claim(name, NS)
    wait_for(
        "the volume to be released",
        lambda: read_volume(core, gold).status.phase == "Released",
    )

    step("422s")
    bad = expect_api_error(
        422,
        core.create_namespaced_persistent_volume_claim,
        NS,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": f"py-bad-{SUFFIX}"},
            "spec": {"resources": {"requests": {"storage": "1Gi"}}},
        },
    )
    check("at least 1 access mode is required" in bad.body, bad.body)
    for volume_name in (gold, plain):
        core.delete_persistent_volume(volume_name)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    configuration = client.Configuration()
    config.load_kube_config(config_file=sys.argv[1], client_configuration=configuration)
    api_client = client.ApiClient(configuration)
    core = client.CoreV1Api(api_client)
    storage = client.StorageV1Api(api_client)
    try:
        wait_for(
            "the default class",
            lambda: any(
                c.metadata.name == "standard" for c in storage.list_storage_class().items
            ),
        )
        test_classes(storage)
        test_dynamic_claim_and_expansion(core)
        test_static_volume(core)
    except Exception:  # noqa: BLE001 - any failure is the test's failure
        traceback.print_exc()
        return 1
    print("python storage: all checks passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
