//! Tests of the decision core: each plugin, the message text, node sampling and preemption.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Affinity, ContainerPort, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    Pod, PodAffinity, PodAffinityTerm, PodAntiAffinity, PreferredSchedulingTerm, Taint, Toleration,
    TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::node_info::NodeInfo;
use crate::pod_info::CachedPod;
use crate::preemption::{failure_message, preempt, Preemption};
use crate::schedule::{num_feasible_nodes_to_find, schedule, Decision, ScheduleState};
use crate::snapshot::Snapshot;
use crate::synthetic::{info, node, pod};

fn snapshot(nodes: Vec<k8s_openapi::api::core::v1::Node>) -> Snapshot {
    let mut s = Snapshot::new();
    for n in &nodes {
        s.upsert_node(n);
    }
    s
}

fn decide(s: &Snapshot, p: Pod) -> Decision {
    schedule(s, &info(p), &mut ScheduleState::new(7))
}

fn node_of(d: &Decision) -> &str {
    match d {
        Decision::Feasible { node, .. } => node,
        Decision::Unschedulable { diagnosis } => panic!("unschedulable: {}", diagnosis.message()),
    }
}

fn message(s: &Snapshot, p: Pod) -> String {
    let p = info(p);
    match schedule(s, &p, &mut ScheduleState::new(7)) {
        Decision::Unschedulable { diagnosis } => {
            failure_message(&diagnosis, &preempt(s, &p, &diagnosis))
        }
        d => panic!("scheduled: {d:?}"),
    }
}

fn labelled(name: &str, labels: &[(&str, &str)]) -> k8s_openapi::api::core::v1::Node {
    let mut n = node(name, "4", "8Gi", 110);
    let map = n.metadata.labels.get_or_insert_with(Default::default);
    for (k, v) in labels {
        map.insert(k.to_string(), v.to_string());
    }
    n
}

fn with_selector(mut p: Pod, key: &str, value: &str) -> Pod {
    p.spec.as_mut().unwrap().node_selector = Some([(key.into(), value.into())].into());
    p
}

fn with_labels(mut p: Pod, labels: &[(&str, &str)]) -> Pod {
    p.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    p
}

fn bound(s: &mut Snapshot, node: &str, p: Pod) {
    let mut p = p;
    p.spec.as_mut().unwrap().node_name = Some(node.into());
    assert!(s.add_pod(node, info(p)));
}

fn selector(key: &str, value: &str) -> LabelSelector {
    LabelSelector {
        match_labels: Some([(key.into(), value.into())].into()),
        ..Default::default()
    }
}

#[test]
fn the_issue_message_is_exact() {
    let mut nodes = vec![
        labelled("a", &[("disk", "ssd")]),
        labelled("b", &[("disk", "ssd")]),
    ];
    for n in nodes.iter_mut() {
        n.status
            .as_mut()
            .unwrap()
            .allocatable
            .as_mut()
            .unwrap()
            .insert("cpu".into(), Quantity("1".into()));
    }
    nodes.extend(
        ["c", "d", "e"]
            .iter()
            .map(|n| labelled(n, &[("disk", "hdd")])),
    );
    let s = snapshot(nodes);
    let p = with_selector(pod("default", "big", "2", "1Gi"), "disk", "ssd");
    assert_eq!(
        message(&s, p),
        "0/5 nodes are available: 2 Insufficient cpu, 3 node(s) didn't match Pod's node \
         affinity/selector. preemption: 0/5 nodes are available: 2 No preemption victims found \
         for incoming pod, 3 Preemption is not helpful for scheduling."
    );
}

#[test]
fn reasons_sort_as_strings_and_resources_list_every_shortage() {
    let mut tainted = node("t", "8", "16Gi", 110);
    tainted.spec.as_mut().unwrap().taints = Some(vec![Taint {
        key: "dedicated".into(),
        value: Some("gpu".into()),
        effect: "NoSchedule".into(),
        ..Default::default()
    }]);
    let mut cordoned = node("u", "8", "16Gi", 110);
    cordoned.spec.as_mut().unwrap().unschedulable = Some(true);
    let mut not_ready = node("r", "8", "16Gi", 110);
    not_ready.status.as_mut().unwrap().conditions = None;
    let s = snapshot(vec![
        node("m1", "8", "1Gi", 110),
        node("m2", "1", "1Gi", 110),
        node("m3", "8", "1Gi", 110),
        tainted,
        cordoned,
        not_ready,
    ]);
    assert_eq!(
        message(&s, pod("default", "p", "2", "2Gi")),
        "0/6 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint \
         {dedicated: gpu}, 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, \
         1 node(s) were unschedulable, 3 Insufficient memory. preemption: 0/6 nodes are \
         available: 3 No preemption victims found for incoming pod, 3 Preemption is not helpful \
         for scheduling."
    );
}

#[test]
fn taints_are_tolerated_by_matching_tolerations() {
    let mut tainted = node("t", "8", "16Gi", 110);
    tainted.spec.as_mut().unwrap().taints = Some(vec![Taint {
        key: "dedicated".into(),
        value: Some("gpu".into()),
        effect: "NoExecute".into(),
        ..Default::default()
    }]);
    let s = snapshot(vec![tainted]);
    let mut p = pod("default", "p", "1", "");
    assert!(matches!(
        decide(&s, p.clone()),
        Decision::Unschedulable { .. }
    ));
    p.spec.as_mut().unwrap().tolerations = Some(vec![Toleration {
        key: Some("dedicated".into()),
        operator: Some("Equal".into()),
        value: Some("gpu".into()),
        effect: Some("NoExecute".into()),
        ..Default::default()
    }]);
    assert_eq!(node_of(&decide(&s, p.clone())), "t");
    // Exists with an empty key tolerates everything.
    p.spec.as_mut().unwrap().tolerations = Some(vec![Toleration {
        operator: Some("Exists".into()),
        ..Default::default()
    }]);
    assert_eq!(node_of(&decide(&s, p)), "t");
}

#[test]
fn resources_pods_and_extended_resources_are_counted() {
    let mut gpu = node("gpu", "8", "16Gi", 2);
    gpu.status
        .as_mut()
        .unwrap()
        .allocatable
        .as_mut()
        .unwrap()
        .insert("example.com/gpu".into(), Quantity("1".into()));
    let mut s = snapshot(vec![gpu]);
    let mut p = pod("default", "g", "100m", "");
    p.spec.as_mut().unwrap().containers[0]
        .resources
        .as_mut()
        .unwrap()
        .requests
        .as_mut()
        .unwrap()
        .insert("example.com/gpu".into(), Quantity("2".into()));
    assert_eq!(
        message(&s, p),
        "0/1 nodes are available: 1 Insufficient example.com/gpu. preemption: 0/1 nodes are \
         available: 1 No preemption victims found for incoming pod."
    );
    bound(&mut s, "gpu", pod("default", "x", "", ""));
    bound(&mut s, "gpu", pod("default", "y", "", ""));
    assert!(message(&s, pod("default", "z", "", ""))
        .starts_with("0/1 nodes are available: 1 Too many pods."));
    let mut eph = pod("default", "e", "", "");
    eph.spec.as_mut().unwrap().containers[0]
        .resources
        .as_mut()
        .unwrap()
        .requests
        .as_mut()
        .unwrap()
        .insert("ephemeral-storage".into(), Quantity("200Gi".into()));
    assert!(message(&s, eph).contains("1 Insufficient ephemeral-storage"));
}

fn required_affinity(p: &mut Pod, exprs: Vec<(&str, &str, Vec<&str>)>) {
    p.spec.as_mut().unwrap().affinity = Some(Affinity {
        node_affinity: Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_expressions: Some(
                        exprs
                            .into_iter()
                            .map(|(k, op, vs)| NodeSelectorRequirement {
                                key: k.into(),
                                operator: op.into(),
                                values: Some(vs.into_iter().map(str::to_string).collect()),
                            })
                            .collect(),
                    ),
                    match_fields: None,
                }],
            }),
            ..Default::default()
        }),
        ..Default::default()
    });
}

#[test]
fn node_affinity_supports_every_operator() {
    let s = snapshot(vec![
        labelled("small", &[("size", "2"), ("zone", "a")]),
        labelled("large", &[("size", "16"), ("zone", "b"), ("gpu", "yes")]),
    ]);
    type Case<'a> = (Vec<(&'a str, &'a str, Vec<&'a str>)>, &'a str);
    let cases: Vec<Case> = vec![
        (vec![("zone", "In", vec!["b"])], "large"),
        (vec![("zone", "NotIn", vec!["b"])], "small"),
        (vec![("gpu", "Exists", vec![])], "large"),
        (vec![("gpu", "DoesNotExist", vec![])], "small"),
        (vec![("size", "Gt", vec!["8"])], "large"),
        (vec![("size", "Lt", vec!["8"])], "small"),
    ];
    for (exprs, want) in cases {
        let mut p = pod("default", "p", "", "");
        required_affinity(&mut p, exprs.clone());
        assert_eq!(node_of(&decide(&s, p)), want, "{exprs:?}");
    }
    let mut p = pod("default", "p", "", "");
    required_affinity(&mut p, vec![("zone", "In", vec!["c"])]);
    assert!(message(&s, p).starts_with(
        "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."
    ));
    // nodeSelector too.
    let p = with_selector(pod("default", "p", "", ""), "zone", "a");
    assert_eq!(node_of(&decide(&s, p)), "small");
}

#[test]
fn host_ports_conflict() {
    let mut s = snapshot(vec![node("a", "4", "8Gi", 110), node("b", "4", "8Gi", 110)]);
    let with_port = |name: &str| {
        let mut p = pod("default", name, "", "");
        p.spec.as_mut().unwrap().containers[0].ports = Some(vec![ContainerPort {
            container_port: 80,
            host_port: Some(8080),
            ..Default::default()
        }]);
        p
    };
    bound(&mut s, "a", with_port("one"));
    assert_eq!(node_of(&decide(&s, with_port("two"))), "b");
    bound(&mut s, "b", with_port("two"));
    assert!(message(&s, with_port("three")).starts_with(
        "0/2 nodes are available: 2 node(s) didn't have free ports for the requested pod ports."
    ));
}

#[test]
fn node_name_and_unschedulable_and_readiness() {
    let mut cordoned = node("c", "4", "8Gi", 110);
    cordoned.spec.as_mut().unwrap().unschedulable = Some(true);
    let s = snapshot(vec![node("a", "4", "8Gi", 110), cordoned]);
    let mut p = pod("default", "p", "", "");
    p.spec.as_mut().unwrap().node_name = Some("zzz".into());
    assert!(message(&s, p).contains("1 node(s) didn't match the requested node name"));
    assert_eq!(node_of(&decide(&s, pod("default", "q", "", ""))), "a");
}

fn pod_affinity(p: &mut Pod, affinity: Option<PodAffinityTerm>, anti: Option<PodAffinityTerm>) {
    p.spec.as_mut().unwrap().affinity = Some(Affinity {
        pod_affinity: affinity.map(|t| PodAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![t]),
            ..Default::default()
        }),
        pod_anti_affinity: anti.map(|t| PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![t]),
            ..Default::default()
        }),
        ..Default::default()
    });
}

fn term(key: &str, value: &str, topology: &str) -> PodAffinityTerm {
    PodAffinityTerm {
        label_selector: Some(selector(key, value)),
        topology_key: topology.into(),
        ..Default::default()
    }
}

#[test]
fn inter_pod_affinity_and_anti_affinity() {
    let mut s = snapshot(vec![
        labelled("a1", &[("zone", "a")]),
        labelled("a2", &[("zone", "a")]),
        labelled("b1", &[("zone", "b")]),
    ]);
    bound(
        &mut s,
        "b1",
        with_labels(pod("default", "db", "", ""), &[("app", "db")]),
    );
    // Affinity to the db's zone.
    let mut web = with_labels(pod("default", "web", "", ""), &[("app", "web")]);
    pod_affinity(&mut web, Some(term("app", "db", "zone")), None);
    assert_eq!(node_of(&decide(&s, web)), "b1");
    // Anti-affinity to the db's zone.
    let mut web = with_labels(pod("default", "web", "", ""), &[("app", "web")]);
    pod_affinity(&mut web, None, Some(term("app", "db", "zone")));
    assert_ne!(node_of(&decide(&s, web)), "b1");
    // An existing pod's anti-affinity keeps others away from its host.
    let mut loner = with_labels(pod("default", "loner", "", ""), &[("app", "loner")]);
    pod_affinity(
        &mut loner,
        None,
        Some(term("app", "web", "kubernetes.io/hostname")),
    );
    bound(&mut s, "a1", loner);
    let web = with_labels(pod("default", "web", "", ""), &[("app", "web")]);
    let mut state = ScheduleState::new(1);
    for _ in 0..10 {
        assert_ne!(node_of(&schedule(&s, &info(web.clone()), &mut state)), "a1");
    }
    // Nothing to be near: affinity fails everywhere (unresolvable), anti-affinity of two.
    let mut lost = pod("default", "lost", "", "");
    pod_affinity(&mut lost, Some(term("app", "nothing", "zone")), None);
    assert!(message(&s, lost)
        .starts_with("0/3 nodes are available: 3 node(s) didn't match pod affinity rules."));
    let mut shy = pod("default", "shy", "", "");
    pod_affinity(&mut shy, None, Some(term("app", "db", "zone")));
    bound(
        &mut s,
        "a2",
        with_labels(pod("default", "db2", "", ""), &[("app", "db")]),
    );
    let text = message(&s, shy);
    assert!(
        text.contains("3 node(s) didn't match pod anti-affinity rules")
            || text.contains("didn't satisfy existing pods anti-affinity rules"),
        "{text}"
    );
}

#[test]
fn a_group_with_self_affinity_can_start_anywhere() {
    let s = snapshot(vec![labelled("a1", &[("zone", "a")])]);
    let mut first = with_labels(pod("default", "w0", "", ""), &[("app", "w")]);
    pod_affinity(&mut first, Some(term("app", "w", "zone")), None);
    assert_eq!(node_of(&decide(&s, first)), "a1");
}

#[test]
fn topology_spread_do_not_schedule() {
    let mut s = snapshot(vec![
        labelled("a1", &[("zone", "a")]),
        labelled("b1", &[("zone", "b")]),
        labelled("x", &[]),
    ]);
    let spread = |name: &str| {
        let mut p = with_labels(pod("default", name, "", ""), &[("app", "s")]);
        p.spec.as_mut().unwrap().topology_spread_constraints =
            Some(vec![TopologySpreadConstraint {
                max_skew: 1,
                topology_key: "zone".into(),
                when_unsatisfiable: "DoNotSchedule".into(),
                label_selector: Some(selector("app", "s")),
                ..Default::default()
            }]);
        p
    };
    bound(&mut s, "a1", spread("s0"));
    // zone a has 1, zone b 0: the next must go to b.
    assert_eq!(node_of(&decide(&s, spread("s1"))), "b1");
    bound(&mut s, "b1", spread("s1"));
    bound(&mut s, "b1", spread("s2"));
    // Honoring node affinity, zone b is the only domain: skew 2 + 1 - 2 fits.
    let mut only_b = spread("s3");
    required_affinity(&mut only_b, vec![("zone", "In", vec!["b"])]);
    assert_eq!(node_of(&decide(&s, only_b.clone())), "b1");
    // Ignoring it, zone a (1) is the minimum: 2 + 1 - 1 > 1.
    only_b
        .spec
        .as_mut()
        .unwrap()
        .topology_spread_constraints
        .as_mut()
        .unwrap()[0]
        .node_affinity_policy = Some("Ignore".into());
    assert_eq!(
        message(&s, only_b),
        "0/3 nodes are available: 1 node(s) didn't match pod topology spread constraints, \
         2 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are \
         available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful \
         for scheduling."
    );
    // Without a zone label a node cannot take part.
    assert!(message(&s, {
        let mut p = spread("s5");
        p.spec.as_mut().unwrap().node_name = Some("x".into());
        p
    })
    .contains("1 node(s) didn't match pod topology spread constraints (missing required label)"));
    let text = message(&s, {
        let mut p = spread("s4");
        p.spec.as_mut().unwrap().node_name = None;
        required_affinity(&mut p, vec![("zone", "DoesNotExist", vec![])]);
        p
    });
    assert!(
        text.contains("node(s) didn't match Pod's node affinity/selector"),
        "{text}"
    );
}

#[test]
fn least_allocated_and_preferences_steer_scores() {
    let mut s = snapshot(vec![
        node("busy", "4", "8Gi", 110),
        node("idle", "4", "8Gi", 110),
    ]);
    bound(&mut s, "busy", pod("default", "hog", "3", "6Gi"));
    assert_eq!(
        node_of(&decide(&s, pod("default", "p", "100m", "100Mi"))),
        "idle"
    );

    // A strong preferred node affinity beats free resources.
    let mut p = pod("default", "p", "100m", "100Mi");
    p.spec.as_mut().unwrap().affinity = Some(Affinity {
        node_affinity: Some(NodeAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                PreferredSchedulingTerm {
                    weight: 100,
                    preference: NodeSelectorTerm {
                        match_fields: Some(vec![NodeSelectorRequirement {
                            key: "metadata.name".into(),
                            operator: "In".into(),
                            values: Some(vec!["busy".into()]),
                        }]),
                        match_expressions: None,
                    },
                },
            ]),
            ..Default::default()
        }),
        ..Default::default()
    });
    assert_eq!(node_of(&decide(&s, p)), "busy");

    // PreferNoSchedule pushes pods away when nothing else differs.
    let mut soft = node("soft", "4", "8Gi", 110);
    soft.spec.as_mut().unwrap().taints = Some(vec![Taint {
        key: "k".into(),
        value: Some("v".into()),
        effect: "PreferNoSchedule".into(),
        ..Default::default()
    }]);
    let s = snapshot(vec![soft, node("plain", "4", "8Gi", 110)]);
    let mut state = ScheduleState::new(3);
    for _ in 0..10 {
        assert_eq!(
            node_of(&schedule(
                &s,
                &info(pod("default", "p", "", "")),
                &mut state
            )),
            "plain"
        );
    }
}

#[test]
fn sampling_follows_percentage_of_nodes_to_score() {
    assert_eq!(num_feasible_nodes_to_find(50, 0), 50);
    assert_eq!(num_feasible_nodes_to_find(100, 0), 100);
    assert_eq!(num_feasible_nodes_to_find(1000, 0), 420);
    assert_eq!(num_feasible_nodes_to_find(5000, 0), 500);
    assert_eq!(num_feasible_nodes_to_find(20000, 0), 1000);
    assert_eq!(num_feasible_nodes_to_find(500, 10), 100);

    let s = crate::synthetic::cluster(1000, 3, "32", "64Gi", 110);
    let mut state = ScheduleState::new(1);
    let p = info(pod("default", "p", "100m", "100Mi"));
    match schedule(&s, &p, &mut state) {
        Decision::Feasible {
            evaluated,
            feasible,
            ..
        } => assert_eq!((evaluated, feasible), (420, 420)),
        d => panic!("{d:?}"),
    }
    // The next search starts where this one stopped.
    assert_eq!(state.next_start_index, 420);
    schedule(&s, &p, &mut state);
    assert_eq!(state.next_start_index, 840);
    schedule(&s, &p, &mut state);
    assert_eq!(state.next_start_index, 260);
}

#[test]
fn ties_break_by_the_seed() {
    let s = crate::synthetic::cluster(20, 1, "4", "8Gi", 110);
    let p = info(pod("default", "p", "", ""));
    let run = |seed| {
        let mut state = ScheduleState::new(seed);
        (0..5)
            .map(|_| node_of(&schedule(&s, &p, &mut state)).to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(run(11), run(11));
    let distinct: std::collections::HashSet<_> = run(11).into_iter().collect();
    assert!(distinct.len() > 1);
}

#[test]
fn preemption_evicts_the_fewest_least_important_pods() {
    let mut s = snapshot(vec![node("a", "4", "8Gi", 110), node("b", "4", "8Gi", 110)]);
    let prio = |mut p: Pod, priority: i32| {
        p.spec.as_mut().unwrap().priority = Some(priority);
        p
    };
    bound(&mut s, "a", prio(pod("default", "a-low", "2", ""), 1));
    bound(&mut s, "a", prio(pod("default", "a-mid", "2", ""), 5));
    bound(&mut s, "b", prio(pod("default", "b-low1", "1", ""), 1));
    bound(&mut s, "b", prio(pod("default", "b-low2", "1", ""), 1));
    bound(&mut s, "b", prio(pod("default", "b-high", "2", ""), 100));
    let p = info(prio(pod("default", "vip", "2", ""), 10));
    let Decision::Unschedulable { diagnosis } = schedule(&s, &p, &mut ScheduleState::new(1)) else {
        panic!("should not fit");
    };
    match preempt(&s, &p, &diagnosis) {
        Preemption::Candidate { node, victims } => {
            assert_eq!(node, "a");
            let names: Vec<_> = victims.iter().map(|v| v.name.as_str()).collect();
            assert_eq!(names, vec!["a-low"]);
        }
        other => panic!("{other:?}"),
    }
    // Nobody of lower priority: no victims anywhere.
    let low = info(prio(pod("default", "low", "3", ""), 0));
    let Decision::Unschedulable { diagnosis } = schedule(&s, &low, &mut ScheduleState::new(1))
    else {
        panic!("should not fit");
    };
    let Preemption::Failed { message } = preempt(&s, &low, &diagnosis) else {
        panic!("nothing to preempt");
    };
    assert_eq!(
        message,
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    );
}

#[test]
fn removing_pods_frees_their_resources() {
    let mut s = snapshot(vec![node("a", "1", "1Gi", 110)]);
    bound(&mut s, "a", pod("default", "x", "1", ""));
    assert!(matches!(
        decide(&s, pod("default", "y", "500m", "")),
        Decision::Unschedulable { .. }
    ));
    assert!(s.remove_pod("a", "default/x").is_some());
    assert_eq!(node_of(&decide(&s, pod("default", "y", "500m", ""))), "a");
    let n: &NodeInfo = s.node("a").unwrap();
    assert_eq!(n.requested.milli_cpu, 0);
    let _ = Arc::strong_count(&n.name);
}

fn with_priority(mut p: Pod, priority: i32) -> Pod {
    p.spec.as_mut().unwrap().priority = Some(priority);
    p
}

/// The pod as seen once a victim is being deleted (graceful deletion: it still holds its room).
fn terminating(mut p: Pod) -> Pod {
    p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
    ));
    p
}

#[test]
fn room_freed_by_preemption_is_reserved_for_the_preemptor() {
    // One node, full: a low-priority pod and a middle one.
    let mut s = snapshot(vec![node("a", "4", "8Gi", 110)]);
    bound(
        &mut s,
        "a",
        with_priority(pod("default", "low", "2", ""), 1),
    );
    bound(
        &mut s,
        "a",
        with_priority(pod("default", "mid", "2", ""), 5),
    );
    let vip = info(with_priority(pod("default", "vip", "2", ""), 10));
    let Decision::Unschedulable { diagnosis } = schedule(&s, &vip, &mut ScheduleState::new(1))
    else {
        panic!("vip should not fit yet");
    };
    let Preemption::Candidate { node, victims } = preempt(&s, &vip, &diagnosis) else {
        panic!("vip should preempt");
    };
    assert_eq!(node, "a");
    assert_eq!(victims.len(), 1);
    assert_eq!(victims[0].name, "low");
    s.nominate("a", vip.clone());

    // While the victim terminates it still holds its room; nothing fits, and another pod of
    // the same priority cannot preempt "mid" for room that is already promised to vip.
    s.remove_pod("a", "default/low");
    bound(
        &mut s,
        "a",
        terminating(with_priority(pod("default", "low", "2", ""), 1)),
    );
    let rival = info(with_priority(pod("default", "rival", "2", ""), 10));
    let Decision::Unschedulable { diagnosis } = schedule(&s, &rival, &mut ScheduleState::new(1))
    else {
        panic!("rival should not fit");
    };
    assert_eq!(
        failure_message(&diagnosis, &preempt(&s, &rival, &diagnosis)),
        "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: \
         1 Insufficient cpu."
    );

    // The victim is gone: the freed 2 cpu are vip's, not a lower or equal pod's.
    s.remove_pod("a", "default/low");
    assert_eq!(
        message(&s, with_priority(pod("default", "lower", "1", ""), 1)),
        "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: \
         1 No preemption victims found for incoming pod."
    );
    // One of equal priority does not fit either; it may only preempt "mid", beside vip.
    let equal = info(with_priority(pod("default", "equal", "1", ""), 10));
    let Decision::Unschedulable { diagnosis } = schedule(&s, &equal, &mut ScheduleState::new(1))
    else {
        panic!("equal should not fit");
    };
    match preempt(&s, &equal, &diagnosis) {
        Preemption::Candidate { victims, .. } => {
            let names: Vec<_> = victims.iter().map(|v| v.name.as_str()).collect();
            assert_eq!(names, vec!["mid"]);
        }
        other => panic!("{other:?}"),
    }
    // A pod that asks for no cpu still fits beside the reservation.
    assert_eq!(
        node_of(&decide(
            &s,
            with_priority(pod("default", "tiny", "", ""), 0)
        )),
        "a"
    );
    // A more important pod is not held back by the nomination.
    assert_eq!(
        node_of(&decide(
            &s,
            with_priority(pod("default", "higher", "2", ""), 20)
        )),
        "a"
    );
    // The preemptor itself fits, on its nominated node.
    let mut nominated = with_priority(pod("default", "vip", "2", ""), 10);
    nominated.status = Some(k8s_openapi::api::core::v1::PodStatus {
        nominated_node_name: Some("a".into()),
        ..Default::default()
    });
    assert_eq!(node_of(&decide(&s, nominated)), "a");
    // Once bound, the nomination goes and the node is simply full.
    assert!(s.unnominate("a", "default/vip").is_some());
    bound(
        &mut s,
        "a",
        with_priority(pod("default", "vip", "2", ""), 10),
    );
    assert!(s.nominated_on("a").is_empty());
    assert!(matches!(
        decide(&s, with_priority(pod("default", "lower", "1", ""), 1)),
        Decision::Unschedulable { .. }
    ));
}

#[test]
fn nominations_elsewhere_do_not_block_other_nodes() {
    let mut s = snapshot(vec![node("a", "2", "8Gi", 110), node("b", "2", "8Gi", 110)]);
    s.nominate("a", info(with_priority(pod("default", "vip", "2", ""), 10)));
    for i in 0..3 {
        let d = decide(
            &s,
            with_priority(pod("default", &format!("p{i}"), "1", ""), 0),
        );
        assert_eq!(node_of(&d), "b");
    }
}

/// The informer's transform keeps everything scheduling reads: a pod's [`PodInfo`] is the same
/// from the stripped pod as from the whole one, and as the informer decodes it.
#[test]
fn stripped_pods_schedule_as_whole_ones() {
    let served = serde_json::json!({
        "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "9",
            "labels": {"app": "a"}, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "schedulerName": "default-scheduler", "priority": 5, "preemptionPolicy": "Never",
            "nodeSelector": {"disk": "ssd"},
            "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
            "initContainers": [{"name": "sidecar", "image": "busybox", "restartPolicy": "Always",
                "command": ["sh"], "resources": {"requests": {"cpu": "100m"}}}],
            "containers": [{"name": "c", "image": "nginx", "args": ["-g"],
                "env": [{"name": "A", "value": "b"}],
                "readinessProbe": {"httpGet": {"path": "/", "port": 80}},
                "ports": [{"containerPort": 80, "hostPort": 8080}],
                "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}}],
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "a"}}}]}},
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "a"}}}]
        },
        "status": {"phase": "Pending", "nominatedNodeName": "n1", "qosClass": "Burstable",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
            "containerStatuses": [{"name": "c", "image": "nginx", "imageID": "", "ready": false,
                "restartCount": 0}]}
    });
    let whole: Pod = serde_json::from_value(served.clone()).expect("a pod");
    let mut stripped = whole.clone();
    crate::pod_info::strip_for_scheduling(&mut stripped);
    assert!(stripped
        .status
        .as_ref()
        .is_some_and(|s| s.conditions.is_none()));
    assert!(stripped
        .spec
        .as_ref()
        .is_some_and(|s| s.containers[0].image.is_none()));
    let from_stripped = crate::pod_info::PodInfo::new(&stripped, 5);
    let from_whole = crate::pod_info::PodInfo::new(&whole, 5);
    assert_eq!(format!("{from_stripped:?}"), format!("{from_whole:?}"));
    assert_eq!(from_whole.host_ports.len(), 1);
    assert_eq!(from_whole.nominated_node_name.as_deref(), Some("n1"));

    let cached: CachedPod =
        serde_json::from_slice(&serde_json::to_vec(&served).expect("json")).expect("decodes");
    assert_eq!(format!("{:?}", cached.info), format!("{from_whole:?}"));
    assert_eq!(cached.declared_priority, Some(5));
    assert_eq!(
        cached.metadata,
        k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some("p".into()),
            namespace: Some("ns".into()),
            resource_version: Some("9".into()),
            ..Default::default()
        }
    );
    // The digest follows what scheduling reads of the spec and the labels, not the status.
    let digest = |change: &dyn Fn(&mut serde_json::Value)| {
        let mut v = served.clone();
        change(&mut v);
        serde_json::from_value::<CachedPod>(v)
            .expect("decodes")
            .spec_digest
    };
    assert_eq!(digest(&|_| {}), cached.spec_digest);
    assert_eq!(
        digest(&|v| v["status"]["conditions"][0]["reason"] = "Other".into()),
        cached.spec_digest
    );
    assert_eq!(
        digest(&|v| v["spec"]["containers"][0]["image"] = "nginx:2".into()),
        cached.spec_digest
    );
    assert_ne!(
        digest(&|v| v["metadata"]["labels"]["app"] = "b".into()),
        cached.spec_digest
    );
    assert_ne!(
        digest(&|v| v["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1".into()),
        cached.spec_digest
    );
    assert_ne!(
        digest(&|v| v["spec"]["nodeSelector"]["disk"] = "hdd".into()),
        cached.spec_digest
    );
}
