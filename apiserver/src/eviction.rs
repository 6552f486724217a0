//! `POST pods/{name}/eviction` (a policy/v1 Eviction): deletes the pod unless that would break
//! its PodDisruptionBudget, as kube-apiserver's eviction subresource does.
//!
//! A pod that is already terminal, pending or terminating is deleted without asking a budget.
//! Otherwise the one budget whose selector matches the pod decides: a budget the disruption
//! controller has not yet observed, or one with no disruption left, answers 429 TooManyRequests
//! with a `DisruptionBudget` cause; else its `disruptionsAllowed` is decremented and the pod
//! recorded in `disruptedPods` (under the budget's resourceVersion, so two evictions never
//! spend the same disruption), the pod gets the `DisruptionTarget` condition and is deleted.
//! A pod that is not ready is evicted without spending a disruption when the budget's
//! `unhealthyPodEvictionPolicy` allows it.

use api::selectors::LabelSelector;
use api::ResourceInfo;
use serde_json::{json, Value};

use crate::errors::ApiError;
use crate::meta;
use crate::registry::{set_condition, DeleteOptions, ListOptions, Registry, WriteOptions};

/// The message kube-apiserver gives a refused eviction.
pub const BLOCKED_MESSAGE: &str =
    "Cannot evict pod as it would violate the pod's disruption budget.";
/// The `details.causes[].reason` clients look for to tell a budget's refusal from throttling.
pub const DISRUPTION_BUDGET_CAUSE: &str = "DisruptionBudget";
/// Kubernetes refuses evictions once this many are waiting for the controller to confirm them.
const MAX_DISRUPTED_PODS: usize = 2000;
/// Tries at spending a disruption against concurrent writers of the budget.
const CONFLICT_RETRIES: usize = 5;

/// What an eviction answers: 201 with a success Status, or 429 with the budget's refusal.
pub struct Answer {
    pub code: u16,
    pub body: Value,
}

fn pdbs() -> Result<&'static ResourceInfo, ApiError> {
    api::resources::find("policy", "v1", "poddisruptionbudgets")
        .ok_or_else(|| ApiError::internal("poddisruptionbudgets are not served"))
}

/// Evicts pod `name` in `namespace` as the Eviction `body` asks.
pub async fn evict(
    registry: &Registry,
    namespace: &str,
    name: &str,
    body: &Value,
    write: &WriteOptions,
) -> Result<Answer, ApiError> {
    let body_name = body
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if body_name != name {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    let mut delete = match body.get("deleteOptions") {
        Some(options) if !options.is_null() => DeleteOptions::from_body(options)?,
        _ => DeleteOptions::default(),
    };
    delete.dry_run |= write.dry_run;
    let pods = api::resources::pods();
    let pod = registry.get(pods, Some(namespace), name).await?;
    if can_ignore_budget(&pod) {
        return delete_pod(registry, namespace, name, pod, &delete, write).await;
    }
    let budgets = matching_budgets(registry, namespace, &pod).await?;
    let budget = match budgets.as_slice() {
        [] => return delete_pod(registry, namespace, name, pod, &delete, write).await,
        [one] => one.clone(),
        _ => {
            return Err(ApiError::internal(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            ))
        }
    };
    if !is_ready(&pod) && unhealthy_may_go(&budget) {
        return delete_pod(registry, namespace, name, pod, &delete, write).await;
    }
    let mut budget = budget;
    for attempt in 0..CONFLICT_RETRIES {
        if let Some(refusal) = spend_disruption(&mut budget, name)? {
            return Ok(refusal);
        }
        if delete.dry_run {
            break;
        }
        let budget_name = meta::name(&budget).to_string();
        match registry
            .update(
                pdbs()?,
                Some(namespace),
                &budget_name,
                Some("status"),
                budget.clone(),
                write,
            )
            .await
        {
            Ok(_) => break,
            Err(ApiError::Conflict { .. }) if attempt + 1 < CONFLICT_RETRIES => {
                budget = registry.get(pdbs()?, Some(namespace), &budget_name).await?;
            }
            Err(e) => return Err(e),
        }
    }
    delete_pod(registry, namespace, name, pod, &delete, write).await
}

/// Terminal, pending and terminating pods count against no budget.
fn can_ignore_budget(pod: &Value) -> bool {
    let phase = pod
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("Pending");
    matches!(phase, "Succeeded" | "Failed" | "Pending")
        || pod
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|t| !t.is_null())
}

fn is_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

/// A pod that is not ready may go without spending a disruption: always under `AlwaysAllow`,
/// and under the default `IfHealthyBudget` while the budget has all the healthy pods it needs.
fn unhealthy_may_go(budget: &Value) -> bool {
    let policy = budget
        .pointer("/spec/unhealthyPodEvictionPolicy")
        .and_then(Value::as_str)
        .unwrap_or("IfHealthyBudget");
    if policy == "AlwaysAllow" {
        return true;
    }
    let status = |key: &str| {
        budget
            .pointer(&format!("/status/{key}"))
            .and_then(Value::as_i64)
            .unwrap_or(0)
    };
    observed(budget)
        && status("desiredHealthy") > 0
        && status("currentHealthy") >= status("desiredHealthy")
}

/// The controller has seen the budget's current spec.
fn observed(budget: &Value) -> bool {
    let generation = budget
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let observed = budget
        .pointer("/status/observedGeneration")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    observed >= generation
}

/// The budgets in the namespace whose selector matches the pod's labels.
async fn matching_budgets(
    registry: &Registry,
    namespace: &str,
    pod: &Value,
) -> Result<Vec<Value>, ApiError> {
    let listed = registry
        .list(pdbs()?, Some(namespace), &ListOptions::default())
        .await?;
    let mut out = Vec::new();
    for item in &listed.items {
        let budget = item.value()?;
        let selector = budget.pointer("/spec/selector").unwrap_or(&Value::Null);
        let matches = LabelSelector::from_label_selector_json(selector)
            .map(|s| s.matches_object(pod))
            .unwrap_or(false);
        if matches {
            out.push(budget);
        }
    }
    Ok(out)
}

/// Spends one of the budget's disruptions on `pod` (in `budget`, not yet written), or answers
/// why not.
fn spend_disruption(budget: &mut Value, pod: &str) -> Result<Option<Answer>, ApiError> {
    let name = meta::name(budget).to_string();
    if !observed(budget) {
        return Ok(Some(too_many_requests(
            &format!("The disruption budget {name} is still being processed by the server."),
            10,
        )));
    }
    let allowed = budget
        .pointer("/status/disruptionsAllowed")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let forbidden = |why: &str| ApiError::Forbidden {
        message: format!("poddisruptionbudget.policy \"{name}\" is forbidden: {why}"),
        name: name.clone(),
        group: "policy".into(),
        kind: "poddisruptionbudget".into(),
    };
    if allowed < 0 {
        return Err(forbidden("pdb disruptions allowed is negative"));
    }
    let disrupted = budget
        .pointer("/status/disruptedPods")
        .and_then(Value::as_object)
        .map_or(0, |m| m.len());
    if disrupted > MAX_DISRUPTED_PODS {
        return Err(forbidden(
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        ));
    }
    if allowed == 0 {
        let status = |key: &str| {
            budget
                .pointer(&format!("/status/{key}"))
                .and_then(Value::as_i64)
                .unwrap_or(0)
        };
        return Ok(Some(too_many_requests(
            &format!(
                "The disruption budget {name} needs {} healthy pods and has {} currently",
                status("desiredHealthy"),
                status("currentHealthy")
            ),
            0,
        )));
    }
    let status = &mut budget["status"];
    status["disruptionsAllowed"] = json!(allowed - 1);
    if !status["disruptedPods"].is_object() {
        status["disruptedPods"] = json!({});
    }
    status["disruptedPods"][pod] = json!(meta::now_rfc3339());
    if allowed == 1 {
        set_budget_condition(budget, false);
    }
    Ok(None)
}

/// The `DisruptionAllowed` condition as the disruption controller words it.
fn set_budget_condition(budget: &mut Value, allowed: bool) {
    let generation = budget
        .pointer("/status/observedGeneration")
        .cloned()
        .unwrap_or(json!(0));
    let (status, reason) = if allowed {
        ("True", "SufficientPods")
    } else {
        ("False", "InsufficientPods")
    };
    let now = meta::now_rfc3339();
    let status_obj = &mut budget["status"];
    if !status_obj["conditions"].is_array() {
        status_obj["conditions"] = json!([]);
    }
    let Some(conditions) = status_obj["conditions"].as_array_mut() else {
        return;
    };
    let fresh = json!({"type": "DisruptionAllowed", "status": status, "reason": reason,
        "message": "", "observedGeneration": generation, "lastTransitionTime": now});
    match conditions
        .iter_mut()
        .find(|c| c["type"] == "DisruptionAllowed")
    {
        Some(existing) => {
            let since = if existing["status"] == status {
                existing["lastTransitionTime"].clone()
            } else {
                json!(now)
            };
            *existing = fresh;
            existing["lastTransitionTime"] = since;
        }
        None => conditions.push(fresh),
    }
}

/// kube-apiserver's 429 for a refused eviction.
fn too_many_requests(cause: &str, retry_after: u32) -> Answer {
    let mut details = json!({"causes": [{"reason": DISRUPTION_BUDGET_CAUSE, "message": cause}]});
    if retry_after > 0 {
        details["retryAfterSeconds"] = json!(retry_after);
    }
    Answer {
        code: 429,
        body: json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": BLOCKED_MESSAGE,
            "reason": "TooManyRequests",
            "details": details,
            "code": 429,
        }),
    }
}

/// Marks the pod with `DisruptionTarget` (why it goes) and deletes it.
async fn delete_pod(
    registry: &Registry,
    namespace: &str,
    name: &str,
    mut pod: Value,
    delete: &DeleteOptions,
    write: &WriteOptions,
) -> Result<Answer, ApiError> {
    let pods = api::resources::pods();
    let terminating = pod
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null());
    if !delete.dry_run && !terminating {
        set_condition(
            &mut pod,
            "DisruptionTarget",
            "True",
            Some("EvictionByEvictionAPI"),
            Some("Eviction API: evicting"),
        );
        match registry
            .update(pods, Some(namespace), name, Some("status"), pod, write)
            .await
        {
            // The pod changed meanwhile: the deletion below still decides.
            Ok(_) | Err(ApiError::Conflict { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    if !delete.dry_run {
        registry.delete(pods, Some(namespace), name, delete).await?;
    }
    Ok(Answer {
        code: 201,
        body: json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(allowed: i64, generation: i64, observed: i64) -> Value {
        json!({
            "metadata": {"name": "web", "generation": generation},
            "spec": {"minAvailable": 2},
            "status": {"disruptionsAllowed": allowed, "currentHealthy": 3, "desiredHealthy": 2,
                "expectedPods": 3, "observedGeneration": observed},
        })
    }

    #[test]
    fn a_disruption_is_spent_and_the_last_one_flips_the_condition() {
        let mut b = budget(1, 1, 1);
        assert!(spend_disruption(&mut b, "p1").expect("spend").is_none());
        assert_eq!(b["status"]["disruptionsAllowed"], 0);
        assert!(b["status"]["disruptedPods"]["p1"].is_string());
        assert_eq!(b["status"]["conditions"][0]["type"], "DisruptionAllowed");
        assert_eq!(b["status"]["conditions"][0]["status"], "False");
        assert_eq!(b["status"]["conditions"][0]["reason"], "InsufficientPods");
    }

    #[test]
    fn no_disruption_left_is_a_429_with_the_budget_cause() {
        let mut b = budget(0, 1, 1);
        let refusal = spend_disruption(&mut b, "p1")
            .expect("spend")
            .expect("refused");
        assert_eq!(refusal.code, 429);
        assert_eq!(refusal.body["reason"], "TooManyRequests");
        assert_eq!(refusal.body["message"], BLOCKED_MESSAGE);
        assert_eq!(
            refusal.body["details"]["causes"][0],
            json!({"reason": "DisruptionBudget",
                "message": "The disruption budget web needs 2 healthy pods and has 3 currently"})
        );
    }

    #[test]
    fn an_unobserved_budget_refuses_and_asks_to_retry_later() {
        let mut b = budget(3, 2, 1);
        let refusal = spend_disruption(&mut b, "p1")
            .expect("spend")
            .expect("refused");
        assert_eq!(refusal.body["details"]["retryAfterSeconds"], 10);
        assert_eq!(
            refusal.body["details"]["causes"][0]["message"],
            "The disruption budget web is still being processed by the server."
        );
    }

    #[test]
    fn a_negative_budget_is_forbidden() {
        let mut b = budget(-1, 1, 1);
        let err = spend_disruption(&mut b, "p1").err().expect("forbidden");
        assert_eq!(err.code(), 403);
    }

    #[test]
    fn which_pods_skip_the_budget() {
        assert!(can_ignore_budget(&json!({"status": {"phase": "Pending"}})));
        assert!(can_ignore_budget(
            &json!({"status": {"phase": "Succeeded"}})
        ));
        assert!(can_ignore_budget(
            &json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}, "status": {"phase": "Running"}})
        ));
        assert!(!can_ignore_budget(&json!({"status": {"phase": "Running"}})));
        let mut b = budget(0, 1, 1);
        assert!(unhealthy_may_go(&b));
        b["status"]["currentHealthy"] = json!(1);
        assert!(!unhealthy_may_go(&b));
        b["spec"]["unhealthyPodEvictionPolicy"] = json!("AlwaysAllow");
        assert!(unhealthy_may_go(&b));
    }
}
