//! The HorizontalPodAutoscaler's decision core, kube-controller-manager's algorithm: replicas
//! from resource and container resource metrics (utilization of requests or average value,
//! tolerance 0.1, missing and not-ready pods handled as upstream does), from per-pod custom
//! metrics (average value), from an object's or an external metric (value, or average value
//! per pod), then normalisation — the scale-down stabilization
//! window and the 2×/4 scale-up limit without a `behavior`, or the behavior's windows and rate
//! policies with one — with the AbleToScale and ScalingLimited conditions it implies. Pure:
//! pods, metrics and "now" in; replicas, statuses and conditions out. The per-autoscaler memory
//! of recent recommendations and scale events is a [`History`] the caller keeps.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Duration, Utc};
use k8s_openapi::api::autoscaling::v2::HPAScalingRules;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// How far the usage ratio may stray from 1 before replicas change.
pub const DEFAULT_TOLERANCE: f64 = 0.1;
/// A pod's CPU samples within this time of its start count only once it is ready and has had
/// a full metrics window since (`--horizontal-pod-autoscaler-cpu-initialization-period`).
pub const CPU_INITIALIZATION_PERIOD_SECS: i64 = 300;
/// A pod that became unready within this time of its start never counted as ready
/// (`--horizontal-pod-autoscaler-initial-readiness-delay`).
pub const INITIAL_READINESS_DELAY_SECS: i64 = 30;
/// The scale-down window without a behavior (`--horizontal-pod-autoscaler-downscale-stabilization`).
pub const DEFAULT_DOWNSCALE_WINDOW_SECS: i64 = 300;

/// What the core reads of one pod the target selects.
#[derive(Debug, Clone, PartialEq)]
pub struct PodFacts {
    pub name: String,
    pub phase: String,
    pub deleting: bool,
    pub start_time: Option<DateTime<Utc>>,
    /// The Ready condition: its status and when it last changed.
    pub ready: Option<(bool, Option<DateTime<Utc>>)>,
    /// The sum of the containers' requests of the resource in milli-units, or the name of a
    /// container that requests none.
    pub request_milli: Result<i64, String>,
}

/// One pod's usage of the resource (milli-units) and when it was sampled.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PodMetric {
    pub value_milli: i64,
    pub timestamp: DateTime<Utc>,
    pub window: Duration,
}

/// The usage ratio band within which nothing changes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerances {
    pub scale_down: f64,
    pub scale_up: f64,
}

impl Default for Tolerances {
    fn default() -> Self {
        Tolerances {
            scale_down: DEFAULT_TOLERANCE,
            scale_up: DEFAULT_TOLERANCE,
        }
    }
}

impl Tolerances {
    pub fn within(&self, ratio: f64) -> bool {
        (1.0 - self.scale_down) <= ratio && ratio <= (1.0 + self.scale_up)
    }
}

/// Pods split as upstream's `groupPods` splits them.
#[derive(Debug, Default)]
struct Groups {
    ready: usize,
    unready: HashSet<String>,
    missing: HashSet<String>,
    ignored: HashSet<String>,
}

fn group_pods(
    pods: &[PodFacts],
    metrics: &HashMap<String, PodMetric>,
    cpu: bool,
    now: DateTime<Utc>,
) -> Groups {
    let mut groups = Groups::default();
    for pod in pods {
        if pod.deleting || pod.phase == "Failed" || pod.phase == "Pending" {
            groups.ignored.insert(pod.name.clone());
            continue;
        }
        let Some(metric) = metrics.get(&pod.name) else {
            groups.missing.insert(pod.name.clone());
            continue;
        };
        if cpu {
            let unready = match (pod.ready, pod.start_time) {
                (Some((ready, changed)), Some(start)) => {
                    let changed = changed.unwrap_or(start);
                    if start + Duration::seconds(CPU_INITIALIZATION_PERIOD_SECS) > now {
                        !ready || metric.timestamp < changed + metric.window
                    } else {
                        !ready && start + Duration::seconds(INITIAL_READINESS_DELAY_SECS) > changed
                    }
                }
                _ => true,
            };
            if unready {
                groups.unready.insert(pod.name.clone());
                continue;
            }
        }
        groups.ready += 1;
    }
    groups
}

/// A replica proposal from one resource metric.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Proposal {
    pub replicas: i32,
    /// The average utilization of requests in percent (utilization targets only).
    pub utilization: Option<i32>,
    /// The average usage per pod in milli-units.
    pub average_milli: i64,
}

/// The target of a resource metric.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Target {
    /// Percent of the pods' requests.
    Utilization(i32),
    /// Milli-units per pod.
    AverageValue(i64),
}

/// Replicas for a resource metric (`GetResourceReplicas` / `GetRawResourceReplicas`).
pub fn resource_replicas(
    resource: &str,
    current: i32,
    target: Target,
    pods: &[PodFacts],
    mut metrics: HashMap<String, PodMetric>,
    tolerances: Tolerances,
    now: DateTime<Utc>,
) -> Result<Proposal, String> {
    if pods.is_empty() {
        return Err("no pods returned by selector while calculating replica count".into());
    }
    let groups = group_pods(pods, &metrics, resource == "cpu", now);
    metrics.retain(|name, _| !groups.ignored.contains(name) && !groups.unready.contains(name));
    // Only the selected pods' metrics count.
    let names: HashSet<&str> = pods.iter().map(|p| p.name.as_str()).collect();
    metrics.retain(|name, _| names.contains(name.as_str()));
    if metrics.is_empty() {
        return Err("did not receive metrics for targeted pods (pods might be unready)".into());
    }
    let values: HashMap<String, i64> = metrics
        .iter()
        .map(|(n, m)| (n.clone(), m.value_milli))
        .collect();
    match target {
        Target::Utilization(target) => {
            let mut requests = HashMap::new();
            for pod in pods {
                match &pod.request_milli {
                    Ok(r) => {
                        requests.insert(pod.name.clone(), *r);
                    }
                    Err(container) => {
                        return Err(format!(
                            "missing request for {resource} in container {container} of Pod {}",
                            pod.name
                        ))
                    }
                }
            }
            let (ratio, utilization, raw) = utilization_ratio(&values, &requests, target)?;
            let decide = |values: &HashMap<String, i64>| {
                utilization_ratio(values, &requests, target).map(|(r, _, _)| r)
            };
            // A missing pod scaling down is taken as using max(100 %, target) of its request.
            let fallback = i64::from(target.max(100));
            let replicas = adjust(
                current,
                ratio,
                &groups,
                values,
                tolerances,
                decide,
                |name| requests.get(name).copied().unwrap_or(0) * fallback / 100,
            )?;
            Ok(Proposal {
                replicas,
                utilization: Some(utilization),
                average_milli: raw,
            })
        }
        Target::AverageValue(target) => {
            let (ratio, usage) = usage_ratio(&values, target);
            let decide = |values: &HashMap<String, i64>| Ok(usage_ratio(values, target).0);
            let replicas = adjust(current, ratio, &groups, values, tolerances, decide, |_| {
                target
            })?;
            Ok(Proposal {
                replicas,
                utilization: None,
                average_milli: usage,
            })
        }
    }
}

/// The shared tail of both calculations: the plain answer when nothing is missing or unready,
/// else the ratio again with missing pods assumed at `missing_value` (scaling down) or 0
/// (scaling up) and unready pods at 0 — and no change when that flips the direction.
fn adjust(
    current: i32,
    ratio: f64,
    groups: &Groups,
    mut values: HashMap<String, i64>,
    tolerances: Tolerances,
    decide: impl Fn(&HashMap<String, i64>) -> Result<f64, String>,
    missing_value: impl Fn(&str) -> i64,
) -> Result<i32, String> {
    let scale_up_with_unready = !groups.unready.is_empty() && ratio > 1.0;
    if !scale_up_with_unready && groups.missing.is_empty() {
        if tolerances.within(ratio) {
            return Ok(current);
        }
        return Ok((ratio * groups.ready as f64).ceil() as i32);
    }
    if ratio < 1.0 {
        for name in &groups.missing {
            values.insert(name.clone(), missing_value(name));
        }
    } else if ratio > 1.0 {
        for name in &groups.missing {
            values.insert(name.clone(), 0);
        }
    }
    if scale_up_with_unready {
        for name in &groups.unready {
            values.insert(name.clone(), 0);
        }
    }
    let new_ratio = decide(&values)?;
    if tolerances.within(new_ratio)
        || (ratio < 1.0 && new_ratio > 1.0)
        || (ratio > 1.0 && new_ratio < 1.0)
    {
        return Ok(current);
    }
    let replicas = (new_ratio * values.len() as f64).ceil() as i32;
    if (new_ratio < 1.0 && replicas > current) || (new_ratio > 1.0 && replicas < current) {
        return Ok(current);
    }
    Ok(replicas)
}

/// `GetResourceUtilizationRatio`: (ratio to target, utilization %, average raw usage).
fn utilization_ratio(
    values: &HashMap<String, i64>,
    requests: &HashMap<String, i64>,
    target: i32,
) -> Result<(f64, i32, i64), String> {
    let (mut total, mut requested, mut entries) = (0i64, 0i64, 0i64);
    for (name, value) in values {
        if let Some(request) = requests.get(name) {
            total += value;
            requested += request;
            entries += 1;
        }
    }
    if requested == 0 {
        return Err("no metrics returned matched known pods".into());
    }
    let utilization = ((total * 100) / requested) as i32;
    Ok((
        f64::from(utilization) / f64::from(target),
        utilization,
        total / entries,
    ))
}

/// `GetMetricUsageRatio`: (ratio to target, average usage).
fn usage_ratio(values: &HashMap<String, i64>, target: i64) -> (f64, i64) {
    let total: i64 = values.values().sum();
    let average = total / (values.len().max(1) as i64);
    (average as f64 / target as f64, average)
}

/// Pods that are running and ready (upstream's `getReadyPodsCount`).
pub fn ready_pods(pods: &[PodFacts]) -> Result<i64, String> {
    if pods.is_empty() {
        return Err("no pods returned by selector while calculating replica count".into());
    }
    Ok(pods
        .iter()
        .filter(|p| p.phase == "Running" && p.ready.is_some_and(|(ready, _)| ready))
        .count() as i64)
}

/// Replicas for a usage ratio of one value against its target (an object's or an external
/// metric's `Value` target, upstream's `getUsageRatioReplicaCount`): none of the pods' own
/// numbers count, only how many are ready; from zero replicas, the ratio itself.
pub fn usage_ratio_replicas(
    current: i32,
    ratio: f64,
    ready: impl FnOnce() -> Result<i64, String>,
    tolerances: Tolerances,
) -> Result<i32, String> {
    if current == 0 {
        return Ok(ratio.ceil() as i32);
    }
    if tolerances.within(ratio) {
        return Ok(current);
    }
    let ready = ready().map_err(|e| format!("unable to calculate ready pods: {e}"))?;
    Ok((ratio * ready as f64).ceil() as i32)
}

/// Replicas for a total against an `AverageValue` target per pod (an object's or an external
/// metric's, upstream's `Get…PerPodMetricReplicas`): the total over the target, unless the
/// current replicas are within tolerance. Also the average per current replica, rounded up.
pub fn per_pod_replicas(
    status_replicas: i32,
    total_milli: i64,
    target_milli: i64,
    tolerances: Tolerances,
) -> (i32, i64) {
    let target = target_milli as f64;
    let ratio = total_milli as f64 / (target * f64::from(status_replicas));
    let replicas = if tolerances.within(ratio) {
        status_replicas
    } else {
        (total_milli as f64 / target).ceil() as i32
    };
    let average = if status_replicas == 0 {
        total_milli
    } else {
        (total_milli as f64 / f64::from(status_replicas)).ceil() as i64
    };
    (replicas, average)
}

/// A metric selector as Go's `%+v` prints a `*metav1.LabelSelector` (what upstream's names of
/// external metrics and its errors about them show): `nil`, or
/// `&LabelSelector{MatchLabels:map[string]string{k: v,},MatchExpressions:[]LabelSelectorRequirement{…},}`.
pub fn go_selector(selector: Option<&LabelSelector>) -> String {
    let Some(selector) = selector else {
        return "nil".into();
    };
    let mut labels: Vec<(&String, &String)> = selector.match_labels.iter().flatten().collect();
    labels.sort();
    let labels: String = labels.iter().map(|(k, v)| format!("{k}: {v},")).collect();
    let expressions: String = selector
        .match_expressions
        .iter()
        .flatten()
        .map(|e| {
            format!(
                "LabelSelectorRequirement{{Key:{},Operator:{},Values:[{}],}},",
                e.key,
                e.operator,
                e.values.as_deref().unwrap_or_default().join(" ")
            )
        })
        .collect();
    format!(
        "&LabelSelector{{MatchLabels:map[string]string{{{labels}}},MatchExpressions:[]LabelSelectorRequirement{{{expressions}}},}}"
    )
}

/// A condition the sync sets: type, status, reason, message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConditionUpdate {
    pub kind: &'static str,
    pub status: bool,
    pub reason: &'static str,
    pub message: String,
}

impl ConditionUpdate {
    fn new(kind: &'static str, status: bool, reason: &'static str, message: &str) -> Self {
        ConditionUpdate {
            kind,
            status,
            reason,
            message: message.to_string(),
        }
    }
}

/// What one autoscaler remembers between syncs: its recent recommendations and scale events.
#[derive(Debug, Clone, Default)]
pub struct History {
    recommendations: Vec<(DateTime<Utc>, i32)>,
    scale_ups: Vec<ScaleEvent>,
    scale_downs: Vec<ScaleEvent>,
}

#[derive(Debug, Clone, Copy)]
struct ScaleEvent {
    at: DateTime<Utc>,
    change: i32,
    outdated: bool,
}

/// The normalisation's rules: the behavior's (defaulted), or none.
#[derive(Debug, Clone, Default)]
pub struct Limits {
    pub min: i32,
    pub max: i32,
    pub scale_up: Option<HPAScalingRules>,
    pub scale_down: Option<HPAScalingRules>,
    /// Whether the autoscaler has a behavior (else the legacy rules apply).
    pub has_behavior: bool,
    /// The scale-down window when neither the behavior nor the default names one.
    pub downscale_window: Duration,
}

impl History {
    /// Clamps `desired` as kube-controller-manager does, recording the recommendation; returns
    /// the replicas and the AbleToScale and ScalingLimited conditions.
    pub fn normalize(
        &mut self,
        limits: &Limits,
        current: i32,
        desired: i32,
        now: DateTime<Utc>,
    ) -> (i32, Vec<ConditionUpdate>) {
        let (stabilized, reason, message) = if limits.has_behavior {
            self.stabilize_with_behavior(limits, current, desired, now)
        } else {
            let s = self.stabilize(limits.downscale_window, desired, now);
            (
                s,
                "ScaleDownStabilized",
                "recent recommendations were higher than current one, applying the highest recent recommendation",
            )
        };
        let able = if stabilized != desired {
            ConditionUpdate::new("AbleToScale", true, reason, message)
        } else {
            ConditionUpdate::new(
                "AbleToScale",
                true,
                "ReadyForNewScale",
                "recommended size matches current size",
            )
        };
        let (replicas, reason, message) = if limits.has_behavior {
            self.rate_limited(limits, current, stabilized, now)
        } else {
            legacy_limits(current, stabilized, limits.min, limits.max)
        };
        let limited =
            ConditionUpdate::new("ScalingLimited", replicas != stabilized, reason, message);
        (replicas, vec![able, limited])
    }

    /// Without a behavior: the highest recommendation within the window.
    fn stabilize(&mut self, window: Duration, desired: i32, now: DateTime<Utc>) -> i32 {
        let cutoff = now - window;
        let mut highest = desired;
        let mut old = None;
        for (i, (at, recommendation)) in self.recommendations.iter().enumerate() {
            if *at < cutoff {
                old = Some(i);
            } else {
                highest = highest.max(*recommendation);
            }
        }
        self.record(old, desired, now);
        highest
    }

    fn record(&mut self, old: Option<usize>, desired: i32, now: DateTime<Utc>) {
        match old {
            Some(i) => self.recommendations[i] = (now, desired),
            None => self.recommendations.push((now, desired)),
        }
    }

    fn stabilize_with_behavior(
        &mut self,
        limits: &Limits,
        current: i32,
        desired: i32,
        now: DateTime<Utc>,
    ) -> (i32, &'static str, &'static str) {
        let window = |rules: &Option<HPAScalingRules>, default: i64| {
            Duration::seconds(
                rules
                    .as_ref()
                    .and_then(|r| r.stabilization_window_seconds)
                    .map_or(default, i64::from),
            )
        };
        let up_cutoff = now - window(&limits.scale_up, 0);
        let down_cutoff = now - window(&limits.scale_down, limits.downscale_window.num_seconds());
        let (mut up, mut down) = (desired, desired);
        let mut old = None;
        for (i, (at, recommendation)) in self.recommendations.iter().enumerate() {
            if *at > up_cutoff {
                up = up.min(*recommendation);
            }
            if *at > down_cutoff {
                down = down.max(*recommendation);
            }
            if *at < up_cutoff && *at < down_cutoff {
                old = Some(i);
            }
        }
        let recommendation = current.max(up).min(down);
        self.record(old, desired, now);
        if desired >= current {
            (
                recommendation,
                "ScaleUpStabilized",
                "recent recommendations were lower than current one, applying the lowest recent recommendation",
            )
        } else {
            (
                recommendation,
                "ScaleDownStabilized",
                "recent recommendations were higher than current one, applying the highest recent recommendation",
            )
        }
    }

    fn changed_within(events: &[ScaleEvent], period_seconds: i32, now: DateTime<Utc>) -> i32 {
        let cutoff = now - Duration::seconds(i64::from(period_seconds));
        events
            .iter()
            .filter(|e| e.at > cutoff)
            .map(|e| e.change)
            .sum()
    }

    /// The limit the behavior's policies put on a change from `current` (upstream's
    /// `calculateScaleUpLimitWithScalingRules` and `calculateScaleDownLimitWithBehaviors`).
    fn policy_limit(
        &self,
        current: i32,
        rules: &HPAScalingRules,
        up: bool,
        now: DateTime<Utc>,
    ) -> i32 {
        let select = rules.select_policy.as_deref().unwrap_or("Max");
        if select == "Disabled" {
            return current;
        }
        // For scaling up the largest change is the highest limit; for scaling down the lowest.
        let pick_highest = (select == "Max") == up;
        let mut result: Option<i32> = None;
        for policy in rules.policies.iter().flatten() {
            let added = Self::changed_within(&self.scale_ups, policy.period_seconds, now);
            let deleted = Self::changed_within(&self.scale_downs, policy.period_seconds, now);
            let start = current - added + deleted;
            let proposed = match (policy.type_.as_str(), up) {
                ("Pods", true) => start + policy.value,
                ("Pods", false) => start - policy.value,
                (_, true) => {
                    (f64::from(start) * (1.0 + f64::from(policy.value) / 100.0)).ceil() as i32
                }
                (_, false) => (f64::from(start) * (1.0 - f64::from(policy.value) / 100.0)) as i32,
            };
            result = Some(match result {
                None => proposed,
                Some(r) if pick_highest => r.max(proposed),
                Some(r) => r.min(proposed),
            });
        }
        result.unwrap_or(if up { i32::MAX } else { i32::MIN })
    }

    fn rate_limited(
        &self,
        limits: &Limits,
        current: i32,
        desired: i32,
        now: DateTime<Utc>,
    ) -> (i32, &'static str, &'static str) {
        if desired > current {
            let limit = limits
                .scale_up
                .as_ref()
                .map_or(i32::MAX, |r| self.policy_limit(current, r, true, now))
                .max(current);
            let (maximum, reason, message) = if limits.max > limit {
                (
                    limit,
                    "ScaleUpLimit",
                    "the desired replica count is increasing faster than the maximum scale rate",
                )
            } else {
                (
                    limits.max,
                    "TooManyReplicas",
                    "the desired replica count is more than the maximum replica count",
                )
            };
            if desired > maximum {
                return (maximum, reason, message);
            }
        } else if desired < current {
            let limit = limits
                .scale_down
                .as_ref()
                .map_or(i32::MIN, |r| self.policy_limit(current, r, false, now))
                .min(current);
            let (minimum, reason, message) = if limits.min < limit {
                (
                    limit,
                    "ScaleDownLimit",
                    "the desired replica count is decreasing faster than the maximum scale rate",
                )
            } else {
                (
                    limits.min,
                    "TooFewReplicas",
                    "the desired replica count is less than the minimum replica count",
                )
            };
            if desired < minimum {
                return (minimum, reason, message);
            }
        }
        (
            desired,
            "DesiredWithinRange",
            "the desired count is within the acceptable range",
        )
    }

    /// Remembers a rescale for the behavior's rate policies (only autoscalers with a behavior
    /// keep them, as upstream).
    pub fn record_scale(&mut self, limits: &Limits, from: i32, to: i32, now: DateTime<Utc>) {
        if !limits.has_behavior || from == to {
            return;
        }
        let (events, rules, change) = if to > from {
            (&mut self.scale_ups, &limits.scale_up, to - from)
        } else {
            (&mut self.scale_downs, &limits.scale_down, from - to)
        };
        let longest = rules
            .as_ref()
            .and_then(|r| r.policies.as_ref())
            .and_then(|ps| ps.iter().map(|p| p.period_seconds).max())
            .unwrap_or(0);
        let cutoff = now - Duration::seconds(i64::from(longest));
        for event in events.iter_mut() {
            if event.at < cutoff {
                event.outdated = true;
            }
        }
        let fresh = ScaleEvent {
            at: now,
            change,
            outdated: false,
        };
        match events.iter_mut().find(|e| e.outdated) {
            Some(slot) => *slot = fresh,
            None => events.push(fresh),
        }
    }
}

/// Without a behavior: within min and max, and at most twice the current replicas (at least
/// 4) in one step.
fn legacy_limits(
    current: i32,
    desired: i32,
    min: i32,
    max: i32,
) -> (i32, &'static str, &'static str) {
    let scale_up_limit = (2 * current).max(4);
    let (maximum, reason, message) = if max > scale_up_limit {
        (
            scale_up_limit,
            "ScaleUpLimit",
            "the desired replica count is increasing faster than the maximum scale rate",
        )
    } else {
        (
            max,
            "TooManyReplicas",
            "the desired replica count is more than the maximum replica count",
        )
    };
    if desired < min {
        return (
            min,
            "TooFewReplicas",
            "the desired replica count is less than the minimum replica count",
        );
    }
    if desired > maximum {
        return (maximum, reason, message);
    }
    (
        desired,
        "DesiredWithinRange",
        "the desired count is within the acceptable range",
    )
}

#[cfg(test)]
#[path = "hpa_tests.rs"]
mod tests;
