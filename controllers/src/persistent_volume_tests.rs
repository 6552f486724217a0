//! The binder's decisions, checked by the plans they return.

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use serde_json::json;

use crate::persistent_volume::*;

fn claim(extra: serde_json::Value) -> PersistentVolumeClaim {
    let mut base = json!({
        "metadata": {"name": "data", "namespace": "default", "uid": "c-1", "resourceVersion": "5"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                 "storageClassName": "", "volumeMode": "Filesystem"},
        "status": {"phase": "Pending"},
    });
    merge(&mut base, extra);
    serde_json::from_value(base).expect("a claim")
}

fn volume(name: &str, size: &str, extra: serde_json::Value) -> PersistentVolume {
    let mut base = json!({
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": size},
                 "hostPath": {"path": "/x"}, "volumeMode": "Filesystem",
                 "persistentVolumeReclaimPolicy": "Retain"},
        "status": {"phase": "Available"},
    });
    merge(&mut base, extra);
    serde_json::from_value(base).expect("a volume")
}

fn class(name: &str, provisioner: &str, mode: &str) -> StorageClass {
    serde_json::from_value(json!({
        "metadata": {"name": name}, "provisioner": provisioner,
        "reclaimPolicy": "Delete", "volumeBindingMode": mode,
    }))
    .expect("a class")
}

fn merge(base: &mut serde_json::Value, extra: serde_json::Value) {
    if let (Some(b), serde_json::Value::Object(e)) = (base.as_object_mut(), extra) {
        for (k, v) in e {
            match (b.get_mut(&k), v) {
                (
                    Some(existing @ serde_json::Value::Object(_)),
                    v @ serde_json::Value::Object(_),
                ) => merge(existing, v),
                (_, v) => {
                    b.insert(k, v);
                }
            }
        }
    }
}

fn reasons(plan: &Plan) -> Vec<&str> {
    plan.notes.iter().map(|n| n.reason).collect()
}

#[test]
fn a_claim_binds_to_the_smallest_volume_that_fits() {
    let c = claim(json!({}));
    let small = volume("small", "500Mi", json!({}));
    let big = volume("big", "10Gi", json!({}));
    let fit = volume("fit", "2Gi", json!({}));
    let plan = sync_claim(&c, &[&small, &big, &fit], None, None);
    let bound = plan.volume.expect("the volume is written");
    assert_eq!(bound.metadata.name.as_deref(), Some("fit"));
    let reference = bound
        .spec
        .as_ref()
        .and_then(|s| s.claim_ref.clone())
        .expect("claimRef");
    assert_eq!(reference.uid.as_deref(), Some("c-1"));
    assert_eq!(plan.volume_phase, Some("Bound"));
    let claim = plan.claim.expect("the claim is written");
    assert_eq!(
        claim.spec.and_then(|s| s.volume_name).as_deref(),
        Some("fit")
    );
    let annotations = claim.metadata.annotations.unwrap_or_default();
    assert_eq!(
        annotations.get(ANN_BIND_COMPLETED).map(String::as_str),
        Some("yes")
    );
    let status = plan.claim_status.expect("status");
    assert_eq!(status.phase.as_deref(), Some("Bound"));
    assert_eq!(
        status
            .capacity
            .and_then(|c| c.get("storage").cloned())
            .map(|q| q.0),
        Some("2Gi".into())
    );
}

#[test]
fn selectors_modes_and_classes_narrow_the_choice() {
    let c = claim(json!({"spec": {"selector": {"matchLabels": {"tier": "gold"}}}}));
    let plain = volume("plain", "1Gi", json!({}));
    let gold = volume(
        "gold",
        "5Gi",
        json!({"metadata": {"labels": {"tier": "gold"}}}),
    );
    let plan = sync_claim(&c, &[&plain, &gold], None, None);
    assert_eq!(
        plan.volume.and_then(|v| v.metadata.name).as_deref(),
        Some("gold")
    );
    let many = claim(json!({"spec": {"accessModes": ["ReadWriteMany"]}}));
    let plan = sync_claim(&many, &[&plain], None, None);
    assert!(plan.volume.is_none());
    assert_eq!(reasons(&plan), ["FailedBinding"]);
    let classed = volume(
        "classed",
        "1Gi",
        json!({"spec": {"storageClassName": "fast"}}),
    );
    assert!(sync_claim(&claim(json!({})), &[&classed], None, None)
        .volume
        .is_none());
    let released = volume("released", "1Gi", json!({"status": {"phase": "Released"}}));
    assert!(sync_claim(&claim(json!({})), &[&released], None, None)
        .volume
        .is_none());
}

#[test]
fn a_pre_bound_volume_is_taken_first() {
    let c = claim(json!({}));
    let any = volume("any", "1Gi", json!({}));
    let mine = volume(
        "mine",
        "8Gi",
        json!({"spec": {"claimRef": {"namespace": "default", "name": "data"}}}),
    );
    let plan = sync_claim(&c, &[&any, &mine], None, None);
    assert_eq!(
        plan.volume.and_then(|v| v.metadata.name).as_deref(),
        Some("mine")
    );
}

#[test]
fn a_class_with_a_provisioner_waits_for_it() {
    let c = claim(json!({"spec": {"storageClassName": "standard"}}));
    let sc = class("standard", EMULATED_DRIVER, "Immediate");
    let plan = sync_claim(&c, &[], Some(&sc), None);
    assert_eq!(reasons(&plan), ["ExternalProvisioning"]);
    assert!(plan.notes[0].message.starts_with(
        "Waiting for a volume to be created either by the external provisioner 'csi.kemu.dev'"
    ));
    assert_eq!(
        plan.provision,
        Some(Provision {
            class: "standard".into(),
            node: None
        })
    );
    let annotated = plan.claim.expect("annotated");
    let annotations = annotated.metadata.annotations.unwrap_or_default();
    assert_eq!(
        annotations.get(ANN_STORAGE_PROVISIONER).map(String::as_str),
        Some(EMULATED_DRIVER)
    );
    // Another provisioner's class: the claim waits without the emulated driver.
    let other = class("other", "example.com/x", "Immediate");
    let c = claim(json!({"spec": {"storageClassName": "other"}}));
    assert!(sync_claim(&c, &[], Some(&other), None).provision.is_none());
    // A missing class.
    let c = claim(json!({"spec": {"storageClassName": "gone"}}));
    let plan = sync_claim(&c, &[], None, None);
    assert_eq!(
        plan.notes[0].message,
        "storageclass.storage.k8s.io \"gone\" not found"
    );
}

#[test]
fn wait_for_first_consumer_until_a_node_is_selected() {
    let sc = class("late", EMULATED_DRIVER, "WaitForFirstConsumer");
    let c = claim(json!({"spec": {"storageClassName": "late"}}));
    let available = volume("v", "1Gi", json!({"spec": {"storageClassName": "late"}}));
    let plan = sync_claim(&c, &[&available], Some(&sc), None);
    assert!(plan.volume.is_none() && plan.provision.is_none());
    assert_eq!(reasons(&plan), ["WaitForFirstConsumer"]);
    assert_eq!(
        plan.notes[0].message,
        "waiting for first consumer to be created before binding"
    );
    let chosen = claim(
        json!({"metadata": {"annotations": {ANN_SELECTED_NODE: "node-1"}}, "spec": {"storageClassName": "late"}}),
    );
    let node: Node = serde_json::from_value(
        json!({"metadata": {"name": "node-1", "labels": {TOPOLOGY_KEY: "node-1"}}}),
    )
    .expect("node");
    let elsewhere = volume(
        "elsewhere",
        "1Gi",
        json!({"spec": {"storageClassName": "late", "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [{"key": TOPOLOGY_KEY, "operator": "In", "values": ["node-2"]}]}]}}}}),
    );
    let plan = sync_claim(&chosen, &[&elsewhere], Some(&sc), Some(&node));
    assert_eq!(
        plan.provision.map(|p| p.node),
        Some(Some("node-1".to_string()))
    );
    let volume = provisioned_volume(&chosen, &sc, Some("node-1"));
    assert!(affinity_admits(&volume, &node));
    assert_eq!(volume.metadata.name.as_deref(), Some("pvc-c-1"));
}

#[test]
fn lost_and_misbound_claims() {
    let bound = claim(
        json!({"metadata": {"annotations": {ANN_BIND_COMPLETED: "yes"}}, "spec": {"volumeName": "gone"}, "status": {"phase": "Bound"}}),
    );
    let plan = sync_claim(&bound, &[], None, None);
    assert_eq!(
        plan.claim_status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Lost")
    );
    assert_eq!(reasons(&plan), ["ClaimLost"]);
    let other = volume(
        "gone",
        "1Gi",
        json!({"spec": {"claimRef": {"namespace": "default", "name": "x", "uid": "c-9"}}, "status": {"phase": "Bound"}}),
    );
    let plan = sync_claim(&bound, &[&other], None, None);
    assert_eq!(reasons(&plan), ["ClaimMisbound"]);
}

#[test]
fn released_volumes_are_reclaimed_by_policy() {
    let reference = json!({"spec": {"claimRef": {"namespace": "default", "name": "data", "uid": "c-1"}}, "status": {"phase": "Bound"}});
    let retained = volume("r", "1Gi", reference.clone());
    let plan = sync_volume(&retained, None);
    assert_eq!(plan.volume_phase, Some("Released"));
    assert!(!plan.delete_volume);
    let mut deleted = volume("d", "1Gi", reference.clone());
    merge_spec(
        &mut deleted,
        json!({"persistentVolumeReclaimPolicy": "Delete"}),
    );
    let plan = sync_volume(&deleted, None);
    assert_eq!(plan.volume_phase, Some("Failed"));
    assert_eq!(reasons(&plan), ["VolumeFailedDelete"]);
    let sc = class("standard", EMULATED_DRIVER, "Immediate");
    let provisioned = provisioned_volume(&claim(json!({})), &sc, None);
    let plan = sync_volume(&provisioned, None);
    assert!(plan.delete_volume);
    // The claim is there: the volume is Bound once the claim names it.
    let c = claim(json!({"spec": {"volumeName": "r"}}));
    assert_eq!(sync_volume(&retained, Some(&c)).volume_phase, None);
    let fresh = volume("new", "1Gi", json!({"status": {"phase": "Pending"}}));
    assert_eq!(sync_volume(&fresh, None).volume_phase, Some("Available"));
}

fn merge_spec(volume: &mut PersistentVolume, extra: serde_json::Value) {
    let mut value = serde_json::to_value(&*volume).expect("json");
    merge(&mut value, json!({"spec": extra}));
    *volume = serde_json::from_value(value).expect("a volume");
}

#[test]
fn the_failure_pattern_fails_its_share_of_attempts_and_backs_off() {
    use crate::persistent_volume_controller::{fails, retry_after, VolumeConfig};
    use std::time::Duration;
    assert!(!(0..100).any(|a| fails(0.0, "provision/u1", a)));
    assert!((0..100).all(|a| fails(1.0, "provision/u1", a)));
    let failed = (0..1000).filter(|a| fails(0.3, "attach/csi-1", *a)).count();
    assert!((200..400).contains(&failed), "{failed} of 1000 failed");
    // The same attempt of the same operation fails alike: a run repeats itself.
    assert_eq!(fails(0.5, "attach/csi-1", 7), fails(0.5, "attach/csi-1", 7));
    assert_eq!(retry_after(0), Duration::from_secs(1));
    assert_eq!(retry_after(3), Duration::from_secs(8));
    assert_eq!(retry_after(20), Duration::from_secs(300));
    let mut config = VolumeConfig {
        attach_failure_rate: 1.5,
        ..VolumeConfig::default()
    };
    assert!(config.validate().is_err());
    config.attach_failure_rate = 0.5;
    assert!(config.validate().is_ok());
    config.node_capacity = Some(api::quantity::Quantity::zero());
    assert!(config.validate().is_err());
}
