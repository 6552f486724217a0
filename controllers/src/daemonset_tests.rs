use super::*;
use crate::test_objects::{labels, meta, pod, template};
use k8s_openapi::api::apps::v1::{DaemonSetSpec, DaemonSetUpdateStrategy, RollingUpdateDaemonSet};
use k8s_openapi::api::core::v1::{NodeSpec, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

fn daemon_set() -> DaemonSet {
    let mut m = meta("agent", "uid-agent");
    m.annotations = Some(labels(&[(TEMPLATE_GENERATION_ANNOTATION, "1")]));
    DaemonSet {
        metadata: m,
        spec: DaemonSetSpec {
            selector: LabelSelector {
                match_labels: Some(labels(&[("app", "web")])),
                ..Default::default()
            },
            template: template("agent:1"),
            ..Default::default()
        },
        status: None,
    }
}

fn node(name: &str, node_labels: &[(&str, &str)], taints: &[(&str, &str)]) -> Node {
    Node {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.into()),
            labels: Some(labels(node_labels)),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            taints: Some(
                taints
                    .iter()
                    .map(|(key, effect)| Taint {
                        key: (*key).into(),
                        effect: (*effect).into(),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }),
        status: None,
    }
}

/// A running, ready daemon pod of `ds` on `node`, made from the template `hash`.
fn daemon_pod(ds: &DaemonSet, name: &str, node: &str, hash: &str, ready: bool) -> Pod {
    let mut p = pod(name, &ds.metadata, "DaemonSet", "Running", ready);
    p.metadata.owner_references.as_mut().expect("owner")[0].api_version = "apps/v1".into();
    p.metadata
        .labels
        .as_mut()
        .expect("labels")
        .insert(REVISION_HASH_LABEL.into(), hash.into());
    p.spec.as_mut().expect("spec").node_name = Some(node.into());
    p
}

fn plan_of(ds: &DaemonSet, nodes: &[Node], pods: &[Pod]) -> Plan {
    let nodes: Vec<&Node> = nodes.iter().collect();
    let pods: Vec<&Pod> = pods.iter().collect();
    plan(ds, &nodes, &pods, &[], true, 2000)
}

#[test]
fn one_pod_per_eligible_node() {
    let mut ds = daemon_set();
    ds.spec.template.spec.as_mut().expect("spec").node_selector = Some(labels(&[("disk", "ssd")]));
    let nodes = [
        node("a", &[("disk", "ssd")], &[]),
        node("b", &[("disk", "hdd")], &[]),
        node("c", &[("disk", "ssd")], &[("dedicated", "NoSchedule")]),
        // The condition taints are tolerated by every daemon pod.
        node(
            "d",
            &[("disk", "ssd")],
            &[("node.kubernetes.io/not-ready", "NoExecute")],
        ),
    ];
    let p = plan_of(&ds, &nodes, &[]);
    assert_eq!(p.create, ["a", "d"]);
    assert!(p.delete.is_empty());
    assert_eq!(p.status.desired_number_scheduled, 2);
    assert_eq!(p.status.current_number_scheduled, 0);
    assert_eq!(p.status.number_unavailable, Some(2));
    assert_eq!(p.status.observed_generation, Some(1));
}

#[test]
fn a_new_pod_is_placed_by_node_affinity_with_the_daemon_tolerations() {
    let mut ds = daemon_set();
    ds.spec.template.spec.as_mut().expect("spec").host_network = Some(true);
    let pod = new_pod(&ds, "node-7", "abc");
    assert_eq!(target_node(&pod).as_deref(), Some("node-7"));
    let spec = pod.spec.as_ref().expect("spec");
    assert_eq!(spec.node_name, None, "the scheduler binds it");
    let keys: Vec<(&str, &str)> = spec
        .tolerations
        .iter()
        .flatten()
        .map(|t| {
            (
                t.key.as_deref().unwrap_or(""),
                t.effect.as_deref().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        keys,
        [
            ("node.kubernetes.io/not-ready", "NoExecute"),
            ("node.kubernetes.io/unreachable", "NoExecute"),
            ("node.kubernetes.io/disk-pressure", "NoSchedule"),
            ("node.kubernetes.io/memory-pressure", "NoSchedule"),
            ("node.kubernetes.io/pid-pressure", "NoSchedule"),
            ("node.kubernetes.io/unschedulable", "NoSchedule"),
            ("node.kubernetes.io/network-unavailable", "NoSchedule"),
        ]
    );
    let pod_labels = pod.metadata.labels.as_ref().expect("labels");
    assert_eq!(pod_labels[REVISION_HASH_LABEL], "abc");
    assert_eq!(pod_labels[TEMPLATE_GENERATION_LABEL], "1");
    assert_eq!(pod.metadata.generate_name.as_deref(), Some("agent-"));
}

#[test]
fn a_no_schedule_taint_keeps_a_running_pod_and_no_execute_removes_it() {
    let ds = daemon_set();
    let hash = current_hash(&ds);
    let pods = [
        daemon_pod(&ds, "p1", "a", &hash, true),
        daemon_pod(&ds, "p2", "b", &hash, true),
    ];
    let nodes = [
        node("a", &[], &[("dedicated", "NoSchedule")]),
        node("b", &[], &[("dedicated", "NoExecute")]),
    ];
    let p = plan_of(&ds, &nodes, &pods);
    assert!(p.create.is_empty());
    assert_eq!(p.delete, ["p2"]);
    assert_eq!(p.status.desired_number_scheduled, 0);
    assert_eq!(p.status.number_misscheduled, 2);
}

#[test]
fn pods_of_gone_nodes_and_extra_pods_are_deleted() {
    let ds = daemon_set();
    let hash = current_hash(&ds);
    let mut younger = daemon_pod(&ds, "p2", "a", &hash, true);
    younger.metadata.creation_timestamp = Some(crate::owners::time_at(1500));
    let pods = [
        daemon_pod(&ds, "p1", "a", &hash, true),
        younger,
        daemon_pod(&ds, "p3", "gone", &hash, true),
    ];
    let p = plan_of(&ds, &[node("a", &[], &[])], &pods);
    assert_eq!(p.delete, ["p2", "p3"]);
    assert_eq!(p.status.current_number_scheduled, 1);
    assert_eq!(p.status.number_ready, 1);
    assert_eq!(p.status.number_available, Some(1));
    assert_eq!(p.status.updated_number_scheduled, Some(1));
    assert_eq!(p.status.number_unavailable, None);
}

#[test]
fn rolling_update_replaces_max_unavailable_pods_at_a_time() {
    let ds = daemon_set();
    let nodes: Vec<Node> = ["a", "b", "c"].iter().map(|n| node(n, &[], &[])).collect();
    let pods: Vec<Pod> = ["a", "b", "c"]
        .iter()
        .map(|n| daemon_pod(&ds, &format!("old-{n}"), n, "old", true))
        .collect();
    // Default strategy: maxUnavailable 1.
    let p = plan_of(&ds, &nodes, &pods);
    assert!(p.create.is_empty());
    assert_eq!(p.delete, ["old-a"]);
    assert_eq!(p.status.updated_number_scheduled, None);
    // Node a waits for its new pod: nothing else goes meanwhile.
    let hash = current_hash(&ds);
    let mut next = pods.clone();
    next[0] = daemon_pod(&ds, "new-a", "a", &hash, false);
    let p = plan_of(&ds, &nodes, &next);
    assert!(p.delete.is_empty() && p.create.is_empty(), "{p:?}");
    next[0] = daemon_pod(&ds, "new-a", "a", &hash, true);
    assert_eq!(plan_of(&ds, &nodes, &next).delete, ["old-b"]);
}

#[test]
fn rolling_update_with_surge_starts_the_new_pod_first() {
    let mut ds = daemon_set();
    ds.spec.update_strategy = Some(DaemonSetUpdateStrategy {
        type_: Some("RollingUpdate".into()),
        rolling_update: Some(RollingUpdateDaemonSet {
            max_surge: Some(IntOrString::Int(1)),
            max_unavailable: Some(IntOrString::Int(0)),
        }),
    });
    let hash = current_hash(&ds);
    let nodes: Vec<Node> = ["a", "b"].iter().map(|n| node(n, &[], &[])).collect();
    let pods: Vec<Pod> = ["a", "b"]
        .iter()
        .map(|n| daemon_pod(&ds, &format!("old-{n}"), n, "old", true))
        .collect();
    let p = plan_of(&ds, &nodes, &pods);
    assert_eq!(p.create, ["a"]);
    assert!(p.delete.is_empty());
    // The new pod runs beside the old one until it is available; then the old one goes.
    let mut next = pods.clone();
    next.push(daemon_pod(&ds, "new-a", "a", &hash, false));
    let p = plan_of(&ds, &nodes, &next);
    assert!(p.create.is_empty() && p.delete.is_empty(), "{p:?}");
    next[2] = daemon_pod(&ds, "new-a", "a", &hash, true);
    assert_eq!(plan_of(&ds, &nodes, &next).delete, ["old-a"]);
}

#[test]
fn percentages_round_up_and_zero_zero_means_one() {
    let mut ds = daemon_set();
    ds.spec.update_strategy = Some(DaemonSetUpdateStrategy {
        type_: Some("RollingUpdate".into()),
        rolling_update: Some(RollingUpdateDaemonSet {
            max_surge: Some(IntOrString::Int(0)),
            max_unavailable: Some(IntOrString::String("10%".into())),
        }),
    });
    assert_eq!(rolling_limits(&ds, 15), (2, 0));
    assert_eq!(rolling_limits(&ds, 0), (0, 0));
    ds.spec.update_strategy.as_mut().expect("strategy").type_ = Some("OnDelete".into());
    assert_eq!(rolling_limits(&ds, 15), (0, 0));
}

#[test]
fn required_node_affinity_selects_nodes() {
    let mut ds = daemon_set();
    ds.spec.template.spec.as_mut().expect("spec").affinity = Some(Affinity {
        node_affinity: Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_expressions: Some(vec![NodeSelectorRequirement {
                        key: "zone".into(),
                        operator: "NotIn".into(),
                        values: Some(vec!["z1".into()]),
                    }]),
                    match_fields: None,
                }],
            }),
            ..Default::default()
        }),
        ..Default::default()
    });
    let nodes = [
        node("a", &[("zone", "z1")], &[]),
        node("b", &[("zone", "z2")], &[]),
    ];
    assert_eq!(plan_of(&ds, &nodes, &[]).create, ["b"]);
}

#[test]
fn waiting_expectations_only_report_status() {
    let ds = daemon_set();
    let nodes = [node("a", &[], &[])];
    let p = plan(
        &ds,
        &nodes.iter().collect::<Vec<_>>(),
        &[],
        &[],
        false,
        2000,
    );
    assert!(p.create.is_empty());
    assert_eq!(p.status.desired_number_scheduled, 1);
    assert_eq!(p.status.observed_generation, None);
}

#[test]
fn each_template_is_a_controller_revision_and_old_ones_are_trimmed() {
    let mut ds = daemon_set();
    ds.spec.revision_history_limit = Some(0);
    let nodes = [node("a", &[], &[])];
    let first = plan_of(&ds, &nodes, &[]);
    let hash = current_hash(&ds);
    assert_eq!(first.revision.hash, hash);
    assert_eq!(first.revision.name, format!("agent-{hash}"));
    let rev1 = first.revision.create.clone().expect("a first revision");
    assert_eq!(rev1.revision, Some(1));
    let labels = rev1.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels[REVISION_HASH_LABEL], hash);
    assert_eq!(
        labels["app"], "web",
        "the template's labels, for the selector"
    );
    assert_eq!(
        rev1.metadata.owner_references.as_ref().expect("owner")[0].kind,
        "DaemonSet"
    );
    assert_eq!(
        rev1.data.0["spec"]["template"]["$patch"], "replace",
        "the patch kubectl rollout undo applies"
    );

    // A new template: revision 2; revision 1 stays while a pod is from it.
    let old_pod = daemon_pod(&ds, "agent-x", "a", &hash, true);
    ds.spec.template = template("agent:2");
    let revs = [&rev1];
    let p = plan(&ds, &[&nodes[0]], &[&old_pod], &revs, true, 2000);
    let rev2 = p.revision.create.clone().expect("a second revision");
    assert_eq!(rev2.revision, Some(2));
    assert_ne!(p.revision.hash, hash);
    assert!(
        p.delete_revisions.is_empty(),
        "a pod is still from revision 1"
    );
    // Once no pod is from it, it goes (limit 0).
    let new_pod_now = daemon_pod(&ds, "agent-y", "a", &p.revision.hash, true);
    let revs = [&rev1, &rev2];
    let p = plan(&ds, &[&nodes[0]], &[&new_pod_now], &revs, true, 2000);
    assert!(p.revision.create.is_none() && p.revision.renumber.is_none());
    assert_eq!(
        p.delete_revisions,
        [rev1.metadata.name.clone().unwrap_or_default()]
    );

    // Undo: the first template again takes revision 1 back as number 3.
    ds.spec.template = template("agent:1");
    let p = plan(&ds, &[&nodes[0]], &[&new_pod_now], &revs, true, 2000);
    assert_eq!(p.revision.name, first.revision.name);
    assert_eq!(p.revision.renumber, Some((first.revision.name.clone(), 3)));
}

#[test]
fn a_sync_creates_at_most_a_burst() {
    let ds = daemon_set();
    let nodes: Vec<Node> = (0..BURST + 10)
        .map(|i| node(&format!("n{i:04}"), &[], &[]))
        .collect();
    let p = plan_of(&ds, &nodes, &[]);
    assert_eq!(p.create.len(), BURST);
    assert_eq!(p.status.desired_number_scheduled, (BURST + 10) as i32);
}
