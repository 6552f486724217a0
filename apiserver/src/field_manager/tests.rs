use serde_json::{json, Value};

use super::*;
use crate::patch::{apply_at, PatchError, PatchType};
use chrono::{TimeZone, Utc};

fn writer<'a>(manager: &'a str, kind: &'a str, api_version: &'a str) -> Writer<'a> {
    Writer {
        manager,
        kind: kind.into(),
        api_version,
        subresource: None,
        has_status: true,
    }
}

fn deployment(replicas: i64, image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "uid": "u", "labels": {"app": "web"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": image, "resources": {}}]}
            }
        },
        "status": {"replicas": 0}
    })
}

#[test]
fn create_records_every_field_like_kubectl_create() {
    let mut created = deployment(1, "nginx");
    record_update(
        &writer("kubectl-create", "Deployment", "apps/v1"),
        &json!({}),
        &mut created,
        "2025-01-02T03:04:05Z",
    );
    assert_eq!(
        created["metadata"]["managedFields"],
        json!([{
            "manager": "kubectl-create",
            "operation": "Update",
            "apiVersion": "apps/v1",
            "time": "2025-01-02T03:04:05Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                "f:spec": {
                    "f:replicas": {},
                    "f:selector": {".": {}, "f:matchLabels": {".": {}, "f:app": {}}},
                    "f:strategy": {"f:rollingUpdate": {".": {}, "f:maxSurge": {}}, "f:type": {}},
                    "f:template": {
                        "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                        "f:spec": {"f:containers": {"k:{\"name\":\"nginx\"}": {
                            ".": {}, "f:image": {}, "f:name": {}, "f:resources": {}
                        }}}
                    }
                }
            }
        }])
    );
}

#[test]
fn updates_merge_per_manager_and_take_fields_over() {
    let mut live = deployment(1, "nginx");
    record_update(
        &writer("kubectl-create", "Deployment", "apps/v1"),
        &json!({}),
        &mut live,
        "2025-01-02T03:04:05Z",
    );
    // A label added by kubectl label: only that field is the labeller's.
    let mut labelled = live.clone();
    labelled["metadata"]["labels"]["tier"] = json!("front");
    record_update(
        &writer("kubectl-label", "Deployment", "apps/v1"),
        &live,
        &mut labelled,
        "2025-01-02T03:04:06Z",
    );
    let entries = decode(&labelled);
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[1].manager, "kubectl-label");
    assert_eq!(
        entries[1].fields.to_fields_v1(),
        json!({"f:metadata": {"f:labels": {"f:tier": {}}}})
    );
    // A scale by another client takes spec.replicas from kubectl-create.
    let mut scaled = labelled.clone();
    scaled["spec"]["replicas"] = json!(3);
    record_update(
        &writer("scaler", "Deployment", "apps/v1"),
        &labelled,
        &mut scaled,
        "2025-01-02T03:04:07Z",
    );
    let entries = decode(&scaled);
    let create = entries
        .iter()
        .find(|e| e.manager == "kubectl-create")
        .unwrap();
    assert!(create
        .fields
        .child("f:spec")
        .unwrap()
        .child("f:replicas")
        .is_none());
    assert_eq!(create.time.as_deref(), Some("2025-01-02T03:04:05Z"));
    let scaler = entries.iter().find(|e| e.manager == "scaler").unwrap();
    assert_eq!(
        scaler.fields.to_fields_v1(),
        json!({"f:spec": {"f:replicas": {}}})
    );
    // The labeller again: its entry grows, and one write that changes nothing leaves all as it is.
    let mut again = scaled.clone();
    again["metadata"]["labels"]["zone"] = json!("a");
    record_update(
        &writer("kubectl-label", "Deployment", "apps/v1"),
        &scaled,
        &mut again,
        "2025-01-02T03:04:08Z",
    );
    let label = decode(&again)
        .into_iter()
        .find(|e| e.manager == "kubectl-label")
        .unwrap();
    assert_eq!(
        label.fields.to_fields_v1(),
        json!({"f:metadata": {"f:labels": {"f:tier": {}, "f:zone": {}}}})
    );
    let mut same = again.clone();
    record_update(
        &writer("kubectl-label", "Deployment", "apps/v1"),
        &again,
        &mut same,
        "2025-01-02T03:05:00Z",
    );
    assert_eq!(same, again);
    // Removing a label removes it from its owner.
    let mut unlabelled = again.clone();
    let labels = unlabelled["metadata"]["labels"].as_object_mut().unwrap();
    labels.remove("tier");
    labels.remove("zone");
    record_update(
        &writer("kubectl-label", "Deployment", "apps/v1"),
        &again,
        &mut unlabelled,
        "2025-01-02T03:05:01Z",
    );
    assert!(decode(&unlabelled)
        .iter()
        .all(|e| e.manager != "kubectl-label"));
}

#[test]
fn status_writers_own_status_only() {
    let live = deployment(1, "nginx");
    let mut next = live.clone();
    next["status"]["replicas"] = json!(1);
    next["metadata"]["labels"]["x"] = json!("y");
    let status_writer = Writer {
        subresource: Some("status"),
        ..writer("controller", "Deployment", "apps/v1")
    };
    record_update(&status_writer, &live, &mut next, "2025-01-02T03:04:05Z");
    assert_eq!(
        next["metadata"]["managedFields"],
        json!([{"manager": "controller", "operation": "Update", "apiVersion": "apps/v1",
                "time": "2025-01-02T03:04:05Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:status": {"f:replicas": {}}}, "subresource": "status"}])
    );
}

#[test]
fn provided_managed_fields_replace_the_stored_ones() {
    let mut live = deployment(1, "nginx");
    record_update(
        &writer("kubectl-client-side-apply", "Deployment", "apps/v1"),
        &json!({}),
        &mut live,
        "2025-01-02T03:04:05Z",
    );
    let mut next = live.clone();
    next["metadata"]["managedFields"] = json!([{
        "manager": "kubectl", "operation": "Apply", "apiVersion": "apps/v1",
        "time": "2025-01-02T03:04:05Z", "fieldsType": "FieldsV1",
        "fieldsV1": {"f:spec": {"f:replicas": {}}}
    }]);
    let expected = next.clone();
    record_update(
        &writer("kubectl", "Deployment", "apps/v1"),
        &live,
        &mut next,
        "2025-01-02T03:06:00Z",
    );
    assert_eq!(next, expected);
}

#[test]
fn paths_print_as_kube_apiserver_prints_them() {
    let path: Vec<String> = [
        "f:spec",
        "f:containers",
        "k:{\"name\":\"nginx\"}",
        "f:ports",
        "k:{\"containerPort\":80}",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(
        display_path(&path),
        ".spec.containers[name=\"nginx\"].ports[containerPort=80]"
    );
    assert_eq!(
        display_path(&["f:metadata".into(), "f:finalizers".into(), "v:\"x\"".into()]),
        ".metadata.finalizers[=\"x\"]"
    );
}

#[test]
fn field_manager_validation() {
    assert!(validate_manager("kubectl-client-side-apply").is_empty());
    let long = "m".repeat(129);
    let causes = validate_manager(&long);
    assert_eq!(causes.len(), 1);
    assert_eq!(
        causes[0].message,
        "Too long: may not be more than 128 bytes"
    );
    assert_eq!(causes[0].reason, "FieldValueTooLong");
    let causes = validate_manager("bad\u{7}name");
    assert_eq!(
        causes[0].message,
        "Invalid value: \"bad\\u0007name\": invalid character U+0007 (at position 3)"
    );
    assert!(validate_manager(&"m".repeat(128)).is_empty());
    assert_eq!(
        manager_from_user_agent("kubectl/v1.32.0 (linux/amd64) kubernetes/70d3cc9"),
        "kubectl"
    );
    assert_eq!(
        manager_from_user_agent("python-requests"),
        "python-requests"
    );
}

fn at(second: u32) -> chrono::DateTime<Utc> {
    Utc.with_ymd_and_hms(2025, 1, 2, 3, 4, second)
        .single()
        .unwrap()
}

fn apply_deployment(
    live: &Value,
    replicas: i64,
    manager: &str,
    force: bool,
) -> Result<Value, PatchError> {
    let config = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": replicas}
    });
    apply_at(
        "Deployment",
        live,
        config.to_string().as_bytes(),
        PatchType::Apply,
        manager,
        force,
        at(9),
    )
}

#[test]
fn apply_conflicts_with_an_updater_unless_forced_or_equal() {
    let mut live = deployment(1, "nginx");
    record_update(
        &writer("kubectl-client-side-apply", "Deployment", "apps/v1"),
        &json!({}),
        &mut live,
        "2025-01-02T03:04:05Z",
    );
    let Err(PatchError::Conflict { message, conflicts }) =
        apply_deployment(&live, 3, "other", false)
    else {
        panic!("expected a conflict");
    };
    assert_eq!(
        message,
        "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using apps/v1: .spec.replicas"
    );
    assert_eq!(
        conflicts,
        vec![Conflict {
            manager: "\"kubectl-client-side-apply\" using apps/v1".into(),
            field: ".spec.replicas".into()
        }]
    );

    // The same value is shared ownership.
    let shared = apply_deployment(&live, 1, "other", false).unwrap();
    let entries = decode(&shared);
    assert_eq!(entries[0].manager, "other");
    assert_eq!(entries[0].operation, "Apply");
    for entry in &entries {
        assert!(
            entry
                .fields
                .child("f:spec")
                .unwrap()
                .child("f:replicas")
                .is_some(),
            "{entry:?}"
        );
    }

    // Forced: the field moves to the applier.
    let forced = apply_deployment(&live, 3, "other", true).unwrap();
    assert_eq!(forced["spec"]["replicas"], 3);
    let updater = decode(&forced)
        .into_iter()
        .find(|e| e.manager == "kubectl-client-side-apply")
        .unwrap();
    assert!(updater
        .fields
        .child("f:spec")
        .unwrap()
        .child("f:replicas")
        .is_none());

    // Two appliers conflict the same way, without "using".
    let Err(PatchError::Conflict { message, .. }) = apply_deployment(&forced, 5, "third", false)
    else {
        panic!("expected a conflict");
    };
    assert_eq!(
        message,
        "Apply failed with 1 conflict: conflict with \"other\": .spec.replicas"
    );
}

#[test]
fn several_conflicts_are_listed_per_manager() {
    let conflicts = vec![
        Conflict {
            manager: "\"a\"".into(),
            field: ".spec.replicas".into(),
        },
        Conflict {
            manager: "\"a\"".into(),
            field: ".spec.paused".into(),
        },
        Conflict {
            manager: "\"b\" using v1".into(),
            field: ".metadata.labels.x".into(),
        },
    ];
    assert_eq!(
        conflict_message(&conflicts),
        "Apply failed with 3 conflicts: conflicts with \"a\":\n- .spec.replicas\n- .spec.paused\nconflicts with \"b\" using v1:\n- .metadata.labels.x"
    );
}

#[test]
fn kubectl_takes_over_its_client_side_applied_fields() {
    let mut live = deployment(1, "nginx");
    let last_applied = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"}, "spec": {"replicas": 1}});
    live["metadata"]["annotations"] = json!({ LAST_APPLIED: format!("{last_applied}\n") });
    record_update(
        &writer("kubectl-client-side-apply", "Deployment", "apps/v1"),
        &json!({}),
        &mut live,
        "2025-01-02T03:04:05Z",
    );
    // Another manager conflicts...
    assert!(apply_deployment(&live, 2, "other", false).is_err());
    // ...but kubectl's server-side apply takes the fields its client-side apply set.
    let out = apply_deployment(&live, 2, "kubectl", false).unwrap();
    assert_eq!(out["spec"]["replicas"], 2);
    let annotation = out["metadata"]["annotations"][LAST_APPLIED]
        .as_str()
        .unwrap();
    let recorded: Value = serde_json::from_str(annotation).unwrap();
    assert_eq!(recorded["spec"]["replicas"], 2);
}

/// Applies container `app` of Pod `web` with `ports` as `manager`.
fn apply_ports(
    live: &Value,
    ports: Value,
    manager: &str,
    force: bool,
) -> Result<Value, PatchError> {
    let config = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"containers": [{"name": "app", "ports": ports}]}
    });
    apply_at(
        "Pod",
        live,
        config.to_string().as_bytes(),
        PatchType::Apply,
        manager,
        force,
        at(9),
    )
}

#[test]
fn ports_of_one_number_and_two_protocols_are_owned_apart() {
    let live = apply_ports(
        &Value::Null,
        json!([{"containerPort": 80, "protocol": "TCP", "name": "web"},
               {"containerPort": 80, "protocol": "UDP", "name": "quic"}]),
        "a",
        false,
    )
    .unwrap();
    // Another applier renaming 80/UDP conflicts on that element's name only.
    let quic = json!([{"containerPort": 80, "protocol": "UDP", "name": "h3"}]);
    let Err(PatchError::Conflict { message, .. }) = apply_ports(&live, quic.clone(), "b", false)
    else {
        panic!("expected a conflict");
    };
    assert_eq!(
        message,
        "Apply failed with 1 conflict: conflict with \"a\": .spec.containers[name=\"app\"].ports[containerPort=80,protocol=\"UDP\"].name"
    );
    // The same for 80/TCP named by its default protocol.
    let web = json!([{"containerPort": 80, "name": "www"}]);
    let Err(PatchError::Conflict { message, .. }) = apply_ports(&live, web, "b", false) else {
        panic!("expected a conflict");
    };
    assert!(
        message.ends_with(".ports[containerPort=80,protocol=\"TCP\"].name"),
        "{message}"
    );

    // Forced, the name of 80/UDP moves to "b"; "a" keeps everything of 80/TCP.
    let forced = apply_ports(&live, quic, "b", true).unwrap();
    assert_eq!(
        forced["spec"]["containers"][0]["ports"],
        json!([{"containerPort": 80, "protocol": "TCP", "name": "web"},
               {"containerPort": 80, "protocol": "UDP", "name": "h3"}])
    );
    let entries = decode(&forced);
    let ports = |manager: &str| {
        let entry = entries.iter().find(|e| e.manager == manager).unwrap();
        let container = entry
            .fields
            .child("f:spec")
            .unwrap()
            .child("f:containers")
            .unwrap();
        container
            .child("k:{\"name\":\"app\"}")
            .unwrap()
            .child("f:ports")
            .unwrap()
            .clone()
    };
    let tcp = "k:{\"containerPort\":80,\"protocol\":\"TCP\"}";
    let udp = "k:{\"containerPort\":80,\"protocol\":\"UDP\"}";
    assert!(ports("a").child(tcp).unwrap().child("f:name").is_some());
    assert!(ports("a").child(udp).unwrap().child("f:name").is_none());
    assert!(ports("a").child(udp).unwrap().child("f:protocol").is_some());
    assert!(ports("b").child(tcp).is_none());
    assert!(ports("b").child(udp).unwrap().child("f:name").is_some());
}

/// A status write keeps the entries it cannot touch as they were stored, and decodes (and
/// normalises) the others exactly as before: one that owns a status field it changes loses it,
/// one not in the encoded form comes out encoded.
#[test]
fn status_writes_keep_untouched_entries_as_stored() {
    let creator = json!({"manager": "kube-controller-manager", "operation": "Update",
        "apiVersion": "v1", "time": "2025-01-02T03:04:05Z", "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                     "f:spec": {"f:containers": {"k:{\"name\":\"main\"}": {".": {}, "f:image": {}}}}}});
    let scheduler = json!({"manager": "kube-scheduler", "operation": "Update",
        "apiVersion": "v1", "time": "2025-01-02T03:04:06Z", "fieldsType": "FieldsV1",
        "fieldsV1": {"f:status": {"f:phase": {}}}, "subresource": "status"});
    // `"."` alone and an unknown key: decoded, so written as `Entry::to_json` writes it.
    let odd = json!({"manager": "tool", "operation": "Update", "apiVersion": "v1",
        "time": "2025-01-02T03:04:07Z", "fieldsType": "FieldsV1", "extra": true,
        "fieldsV1": {"f:metadata": {"f:annotations": {".": {}}}}});
    let live = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "labels": {"app": "x"},
                     "annotations": {"a": "b"},
                     "managedFields": [creator.clone(), scheduler, odd]},
        "spec": {"containers": [{"name": "main", "image": "pause"}]},
        "status": {"phase": "Pending"}});
    let mut next = live.clone();
    next["status"] = json!({"phase": "Running", "podIP": "10.0.0.1"});
    let kubelet = Writer {
        subresource: Some("status"),
        ..writer("kubelet", "Pod", "v1")
    };
    record_update(&kubelet, &live, &mut next, "2025-01-02T03:04:08Z");
    assert_eq!(
        next["metadata"]["managedFields"],
        json!([
            creator,
            {"manager": "tool", "operation": "Update", "apiVersion": "v1",
             "time": "2025-01-02T03:04:07Z", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:metadata": {"f:annotations": {}}}},
            {"manager": "kubelet", "operation": "Update", "apiVersion": "v1",
             "time": "2025-01-02T03:04:08Z", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:status": {"f:phase": {}, "f:podIP": {}}}, "subresource": "status"},
        ])
    );
}

#[test]
fn canonical_fields_v1_is_what_encoding_writes() {
    let samples = [
        json!({"f:a": {}}),
        json!({"f:a": {".": {}, "f:b": {}}}),
        json!({".": {}, "f:a": {}}),
        json!({"f:a": {"k:{\"name\":\"x\"}": {".": {}, "f:name": {}}}}),
        json!({"f:a": {".": {}}}),
        json!({"f:a": 1}),
        json!({"f:a": {".": {"x": {}}, "f:b": {}}}),
        json!({".": {}}),
    ];
    for sample in samples {
        let map = sample.as_object().expect("an object");
        let round_trip = FieldSet::from_fields_v1(&sample).to_fields_v1();
        assert_eq!(
            crate::field_manager::set::is_canonical_fields_v1(map),
            round_trip == sample,
            "{sample} encodes back as {round_trip}"
        );
    }
}

/// `record_update` of `next` over `live` writes what the general path writes, and takes the
/// shortcut of retiming the writer's entry exactly when `retimed`.
fn assert_recorded_as_in_general(
    writer: &Writer,
    live: &Value,
    next: &Value,
    now: &str,
    retimed: bool,
) {
    let (changed, removed) = changes(writer, live, next);
    let mut general = next.clone();
    record_changes(
        writer,
        live,
        &mut general,
        changed.clone(),
        removed.clone(),
        now,
    );
    let mut fast = next.clone();
    assert_eq!(
        retime_own_entry(writer, live, &mut fast, &changed, &removed, now),
        retimed,
        "{next}"
    );
    let mut recorded = next.clone();
    record_update(writer, live, &mut recorded, now);
    assert_eq!(recorded, general, "{next}");
}

/// A kubelet writing its status fields again, beside the creator's entry and a later one: its
/// own entry only takes the write's time and moves after the entries now older than it, which
/// is what the general path writes too. A write that adds a field or removes one goes the
/// general way.
#[test]
fn a_repeated_status_write_only_retimes_the_writers_entry() {
    const NOW: &str = "2025-01-02T03:04:08Z";
    let creator = json!({"manager": "kemu-load", "operation": "Update", "apiVersion": "v1",
        "time": "2025-01-02T03:04:05Z", "fieldsType": "FieldsV1",
        "fieldsV1": {"f:spec": {"f:containers": {"k:{\"name\":\"main\"}": {".": {}, "f:image": {}, "f:name": {}}}}}});
    let owned = json!({"f:status": {
        "f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:status": {}, "f:type": {}}},
        "f:phase": {}, "f:podIP": {}}});
    let kubelet_entry = |time: &str| {
        json!({"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": time,
            "fieldsType": "FieldsV1", "fieldsV1": owned.clone(), "subresource": "status"})
    };
    let later = json!({"manager": "tool", "operation": "Update", "apiVersion": "v1",
        "time": "2025-01-02T03:04:07Z", "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": {"f:annotations": {".": {}, "f:a": {}}}}});
    let live = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "annotations": {"a": "b"},
            "managedFields": [creator.clone(), kubelet_entry("2025-01-02T03:04:06Z"), later.clone()]},
        "spec": {"containers": [{"name": "main", "image": "pause"}]},
        "status": {"phase": "Pending", "podIP": "10.0.0.1",
            "conditions": [{"type": "Ready", "status": "False"}]}});
    let kubelet = Writer {
        subresource: Some("status"),
        ..writer("kubelet", "Pod", "v1")
    };

    let mut same_fields = live.clone();
    same_fields["status"]["phase"] = json!("Running");
    same_fields["status"]["conditions"][0]["status"] = json!("True");
    let mut one_more = same_fields.clone();
    one_more["status"]["hostIP"] = json!("10.1.0.1");
    let mut one_fewer = same_fields.clone();
    one_fewer["status"]
        .as_object_mut()
        .expect("a status")
        .remove("podIP");

    for (next, retimed) in [
        (&same_fields, true),
        (&one_more, false),
        (&one_fewer, false),
    ] {
        assert_recorded_as_in_general(&kubelet, &live, next, NOW, retimed);
    }

    let mut recorded = same_fields.clone();
    record_update(&kubelet, &live, &mut recorded, NOW);
    assert_eq!(
        recorded["metadata"]["managedFields"],
        json!([creator, later, kubelet_entry(NOW)])
    );
}

#[test]
fn fields_v1_covers_its_own_paths_only() {
    let fields = json!({"f:status": {"f:phase": {}, "f:conditions": {".": {},
        "k:{\"type\":\"Ready\"}": {".": {}, "f:status": {}}}}});
    let fields = fields.as_object().expect("an object");
    let covered =
        |paths: serde_json::Value| set::fields_v1_covers(fields, &FieldSet::from_fields_v1(&paths));
    assert!(covered(json!({"f:status": {"f:phase": {}}})));
    assert!(covered(json!({"f:status": {"f:conditions": {}}})));
    assert!(covered(
        json!({"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {"f:status": {}}}}})
    ));
    // f:status itself is not owned, only fields below it.
    assert!(!covered(json!({"f:status": {}})));
    assert!(!covered(json!({"f:status": {"f:podIP": {}}})));
    // f:phase is a leaf: nothing below it is owned.
    assert!(!covered(json!({"f:status": {"f:phase": {"f:x": {}}}})));
}

/// A kubelet's Lease renewal, a PUT that changes only spec.renewTime: sent without
/// managedFields or with the stored ones, the kubelet's entry only takes the new time; sent
/// with a list of the client's own, that list is recorded into, as before.
#[test]
fn a_lease_renewal_only_retimes_the_kubelets_entry() {
    const NOW: &str = "2025-01-02T03:04:18Z";
    let entry = |time: &str| {
        json!({"manager": "kubelet", "operation": "Update", "apiVersion": "coordination.k8s.io/v1",
            "time": time, "fieldsType": "FieldsV1", "fieldsV1": {
                "f:metadata": {"f:ownerReferences": {".": {},
                    "k:{\"uid\":\"n1\"}": {".": {}, "f:apiVersion": {}, "f:kind": {}, "f:name": {}, "f:uid": {}}}},
                "f:spec": {"f:holderIdentity": {}, "f:leaseDurationSeconds": {}, "f:renewTime": {}}}})
    };
    let lease = |renew: &str| {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "node-1", "namespace": "kube-node-lease",
                "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "node-1", "uid": "n1"}]},
            "spec": {"holderIdentity": "node-1", "leaseDurationSeconds": 40,
                "renewTime": renew}})
    };
    let mut live = lease("2025-01-02T03:04:08.000000Z");
    live["metadata"]["resourceVersion"] = json!("7");
    live["metadata"]["managedFields"] = json!([entry("2025-01-02T03:04:08Z")]);
    let kubelet = Writer {
        has_status: false,
        ..writer("kubelet", "Lease", "coordination.k8s.io/v1")
    };

    let bare = lease("2025-01-02T03:04:18.000000Z");
    let mut with_stored = bare.clone();
    with_stored["metadata"]["managedFields"] = live["metadata"]["managedFields"].clone();
    let mut with_its_own = bare.clone();
    with_its_own["metadata"]["managedFields"] = json!([{"manager": "tool",
        "operation": "Update", "apiVersion": "coordination.k8s.io/v1",
        "time": "2025-01-02T03:04:09Z", "fieldsType": "FieldsV1",
        "fieldsV1": {"f:spec": {"f:holderIdentity": {}}}}]);

    for (next, retimed) in [(&bare, true), (&with_stored, true), (&with_its_own, false)] {
        assert_recorded_as_in_general(&kubelet, &live, next, NOW, retimed);
    }
    let mut recorded = bare.clone();
    record_update(&kubelet, &live, &mut recorded, NOW);
    assert_eq!(recorded["metadata"]["managedFields"], json!([entry(NOW)]));
}
