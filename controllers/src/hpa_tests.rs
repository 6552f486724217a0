use super::*;
use k8s_openapi::api::autoscaling::v2::HPAScalingPolicy;

fn t(seconds: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000 + seconds, 0).expect("time")
}

/// A running pod, ready since long before `t(0)`, requesting `request` millicores.
fn pod(name: &str, request: i64) -> PodFacts {
    PodFacts {
        name: name.into(),
        phase: "Running".into(),
        deleting: false,
        start_time: Some(t(-3600)),
        ready: Some((true, Some(t(-3500)))),
        request_milli: Ok(request),
    }
}

fn metrics(values: &[(&str, i64)]) -> HashMap<String, PodMetric> {
    values
        .iter()
        .map(|(n, v)| {
            (
                n.to_string(),
                PodMetric {
                    value_milli: *v,
                    timestamp: t(0),
                    window: Duration::seconds(15),
                },
            )
        })
        .collect()
}

fn replicas(
    current: i32,
    target: Target,
    pods: &[PodFacts],
    m: &[(&str, i64)],
) -> Result<Proposal, String> {
    resource_replicas(
        "cpu",
        current,
        target,
        pods,
        metrics(m),
        Tolerances::default(),
        t(0),
    )
}

#[test]
fn utilization_above_target_scales_up_by_the_ratio() {
    let pods = [pod("a", 100), pod("b", 100), pod("c", 100)];
    let p = replicas(
        3,
        Target::Utilization(50),
        &pods,
        &[("a", 150), ("b", 150), ("c", 150)],
    )
    .expect("proposal");
    assert_eq!(p.replicas, 9);
    assert_eq!(p.utilization, Some(150));
    assert_eq!(p.average_milli, 150);
}

#[test]
fn within_the_tolerance_nothing_changes() {
    let pods = [pod("a", 100), pod("b", 100)];
    // 54 % against 50 %: a ratio of 1.08.
    let p = replicas(2, Target::Utilization(50), &pods, &[("a", 54), ("b", 54)]).expect("proposal");
    assert_eq!(p.replicas, 2);
    let p = replicas(2, Target::Utilization(50), &pods, &[("a", 60), ("b", 60)]).expect("proposal");
    assert_eq!(p.replicas, 3);
}

#[test]
fn average_value_targets_compare_usage_per_pod() {
    let pods = [pod("a", 0), pod("b", 0)];
    let p = replicas(
        2,
        Target::AverageValue(100),
        &pods,
        &[("a", 200), ("b", 200)],
    )
    .expect("proposal");
    assert_eq!(p.replicas, 4);
    assert_eq!(p.utilization, None);
    assert_eq!(p.average_milli, 200);
}

#[test]
fn missing_pods_hold_back_a_scale_down() {
    let pods = [pod("a", 100), pod("b", 100), pod("c", 100)];
    // Without c: 10 % against 50 % would mean 1 replica; c counts as using its whole request.
    let p = replicas(3, Target::Utilization(50), &pods, &[("a", 10), ("b", 10)]).expect("proposal");
    assert_eq!(p.replicas, 3);
    assert_eq!(p.utilization, Some(10));
}

#[test]
fn unready_pods_count_as_idle_when_scaling_up() {
    let mut starting = pod("c", 100);
    starting.start_time = Some(t(-10));
    starting.ready = Some((false, Some(t(-10))));
    let pods = [pod("a", 100), pod("b", 100), starting];
    // a and b at 100 % against 50 %: 2 × 2 = 4 without c; with c at 0: 200/300 → 1.33 × 3 = 4.
    let p = replicas(
        3,
        Target::Utilization(50),
        &pods,
        &[("a", 100), ("b", 100), ("c", 100)],
    )
    .expect("proposal");
    assert_eq!(p.replicas, 4);
}

#[test]
fn pending_failed_and_deleting_pods_are_ignored_and_errors_say_why() {
    let mut pending = pod("p", 100);
    pending.phase = "Pending".into();
    let err = replicas(1, Target::Utilization(50), &[pending], &[]).expect_err("no metrics");
    assert_eq!(
        err,
        "did not receive metrics for targeted pods (pods might be unready)"
    );
    let err = replicas(1, Target::Utilization(50), &[], &[]).expect_err("no pods");
    assert_eq!(
        err,
        "no pods returned by selector while calculating replica count"
    );
    let mut no_request = pod("a", 0);
    no_request.request_milli = Err("app".into());
    let err =
        replicas(1, Target::Utilization(50), &[no_request], &[("a", 5)]).expect_err("request");
    assert_eq!(err, "missing request for cpu in container app of Pod a");
}

fn legacy() -> Limits {
    Limits {
        min: 1,
        max: 20,
        downscale_window: Duration::seconds(DEFAULT_DOWNSCALE_WINDOW_SECS),
        ..Default::default()
    }
}

#[test]
fn without_a_behavior_scale_up_is_at_most_double_and_scale_down_waits_five_minutes() {
    let mut history = History::default();
    let (replicas, conditions) = history.normalize(&legacy(), 2, 10, t(0));
    assert_eq!(replicas, 4);
    assert_eq!(conditions[1].reason, "ScaleUpLimit");
    assert!(conditions[1].status);
    // A lower recommendation within the window: the highest recent one (10) holds, capped
    // at twice the current replicas.
    let (replicas, conditions) = history.normalize(&legacy(), 4, 2, t(60));
    assert_eq!(replicas, 8);
    assert_eq!(conditions[0].reason, "ScaleDownStabilized");
    let (replicas, _) = history.normalize(&legacy(), 4, 2, t(400));
    assert_eq!(replicas, 2);
    let (replicas, conditions) = history.normalize(&legacy(), 2, 0, t(800));
    assert_eq!(replicas, 1);
    assert_eq!(conditions[1].reason, "TooFewReplicas");
}

fn rules(window: i32, policies: &[(&str, i32, i32)]) -> HPAScalingRules {
    HPAScalingRules {
        stabilization_window_seconds: Some(window),
        select_policy: Some("Max".into()),
        policies: Some(
            policies
                .iter()
                .map(|(kind, value, period)| HPAScalingPolicy {
                    type_: kind.to_string(),
                    value: *value,
                    period_seconds: *period,
                })
                .collect(),
        ),
        tolerance: None,
    }
}

fn with_behavior(down_window: i32) -> Limits {
    Limits {
        min: 1,
        max: 20,
        scale_up: Some(rules(0, &[("Pods", 4, 15), ("Percent", 100, 15)])),
        scale_down: Some(rules(down_window, &[("Percent", 100, 15)])),
        has_behavior: true,
        downscale_window: Duration::seconds(DEFAULT_DOWNSCALE_WINDOW_SECS),
    }
}

#[test]
fn a_behavior_sets_the_windows_and_the_rate() {
    let limits = with_behavior(5);
    let mut history = History::default();
    // From 1, Pods 4 allows 5 and Percent 100 allows 2: Max picks 5.
    let (replicas, conditions) = history.normalize(&limits, 1, 10, t(0));
    assert_eq!(replicas, 5);
    assert_eq!(conditions[1].reason, "ScaleUpLimit");
    history.record_scale(&limits, 1, 5, t(0));
    // Within the same 15 s period the policies count from the period's start (1).
    let (replicas, _) = history.normalize(&limits, 5, 10, t(1));
    assert_eq!(replicas, 5);
    let (replicas, conditions) = history.normalize(&limits, 5, 10, t(20));
    assert_eq!(replicas, 10);
    assert_eq!(conditions[1].reason, "DesiredWithinRange");
    // A drop is held by the 5 s window, then goes through.
    let (replicas, conditions) = history.normalize(&limits, 10, 2, t(22));
    assert_eq!(replicas, 10);
    assert_eq!(conditions[0].reason, "ScaleDownStabilized");
    let (replicas, _) = history.normalize(&limits, 10, 2, t(30));
    assert_eq!(replicas, 2);
}

#[test]
fn a_disabled_direction_never_moves() {
    let mut limits = with_behavior(0);
    if let Some(r) = limits.scale_down.as_mut() {
        r.select_policy = Some("Disabled".into());
    }
    let mut history = History::default();
    let (replicas, conditions) = history.normalize(&limits, 6, 2, t(0));
    assert_eq!(replicas, 6);
    assert_eq!(conditions[1].reason, "ScaleDownLimit");
}

#[test]
fn ready_pods_are_running_and_ready() {
    let mut unready = pod("b", 0);
    unready.ready = Some((false, Some(t(-10))));
    let mut pending = pod("c", 0);
    pending.phase = "Pending".into();
    assert_eq!(ready_pods(&[pod("a", 0), unready, pending]), Ok(1));
    assert_eq!(
        ready_pods(&[]),
        Err("no pods returned by selector while calculating replica count".into())
    );
}

#[test]
fn a_value_target_scales_the_ready_pods_by_the_ratio() {
    let tolerances = Tolerances::default();
    // An object's metric at twice its target with 3 ready pods: 6.
    assert_eq!(usage_ratio_replicas(3, 2.0, || Ok(3), tolerances), Ok(6));
    // Only ready pods count: 4 replicas of which 2 are ready, at 1.5: 3.
    assert_eq!(usage_ratio_replicas(4, 1.5, || Ok(2), tolerances), Ok(3));
    // Within the tolerance the pods are not even counted.
    assert_eq!(
        usage_ratio_replicas(3, 1.05, || Err("unused".into()), tolerances),
        Ok(3)
    );
    // From zero replicas: the ratio itself, rounded up.
    assert_eq!(usage_ratio_replicas(0, 2.3, || Ok(0), tolerances), Ok(3));
    assert_eq!(
        usage_ratio_replicas(3, 2.0, || ready_pods(&[]), tolerances),
        Err("unable to calculate ready pods: no pods returned by selector while calculating replica count".into())
    );
}

#[test]
fn an_average_value_target_divides_the_total() {
    let tolerances = Tolerances::default();
    // 900 in total against 100 per pod, from 3 replicas: 9, an average of 300 each.
    assert_eq!(
        per_pod_replicas(3, 900_000, 100_000, tolerances),
        (9, 300_000)
    );
    // 310 over 3 replicas against 100 each is within the tolerance; the average rounds up.
    assert_eq!(
        per_pod_replicas(3, 310_000, 100_000, tolerances),
        (3, 103_334)
    );
    // Below the target: fewer.
    assert_eq!(
        per_pod_replicas(4, 150_000, 100_000, tolerances),
        (2, 37_500)
    );
    assert_eq!(
        per_pod_replicas(0, 250_000, 100_000, tolerances),
        (3, 250_000)
    );
}

#[test]
fn pods_metrics_average_the_values_of_the_pods() {
    let pods = [pod("a", 0), pod("b", 0), pod("c", 0)];
    let pods_metric = |current, values: &[(&str, i64)]| {
        resource_replicas(
            "",
            current,
            Target::AverageValue(100_000),
            &pods,
            metrics(values),
            Tolerances::default(),
            t(0),
        )
    };
    // 250 on average against 100 per pod: 3 → 8.
    let p = pods_metric(3, &[("a", 250_000), ("b", 250_000), ("c", 250_000)]).expect("proposal");
    assert_eq!(
        (p.replicas, p.average_milli, p.utilization),
        (8, 250_000, None)
    );
    // A pod without the metric on a scale-up counts as 0: 600 over 3 pods is twice the
    // target, so 6 rather than the 9 the two reporting pods alone would ask for.
    let p = pods_metric(3, &[("a", 300_000), ("b", 300_000)]).expect("proposal");
    assert_eq!(p.replicas, 6);
    // Scaling down, a pod without the metric counts as at the target.
    let p = pods_metric(3, &[("a", 10_000), ("b", 10_000)]).expect("proposal");
    assert_eq!(p.replicas, 2);
}

#[test]
fn selectors_print_as_go_prints_them() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
    assert_eq!(go_selector(None), "nil");
    let selector = LabelSelector {
        match_labels: Some(
            [("queue", "jobs"), ("env", "prod")]
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .into(),
        ),
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: "tier".into(),
            operator: "In".into(),
            values: Some(vec!["a".into(), "b".into()]),
        }]),
    };
    assert_eq!(
        go_selector(Some(&selector)),
        "&LabelSelector{MatchLabels:map[string]string{env: prod,queue: jobs,},MatchExpressions:[]LabelSelectorRequirement{LabelSelectorRequirement{Key:tier,Operator:In,Values:[a b],},},}"
    );
    assert_eq!(
        go_selector(Some(&LabelSelector::default())),
        "&LabelSelector{MatchLabels:map[string]string{},MatchExpressions:[]LabelSelectorRequirement{},}"
    );
}
