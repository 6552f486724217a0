//! Accounting for the load's pods: every acknowledged create still exists unless the load
//! deleted it, every acknowledged delete is gone, no pod exists twice, and every pod that should
//! run is Running again after the chaos.
//!
//! The load run fills an [`AckLog`] with what the API acknowledged; after the run the pods are
//! listed once more ([`ObservedPod`]) and [`check`] compares the two.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

/// What the API server acknowledged to the load: creates (with the uid it answered) and deletes.
/// A create or delete that got no answer is not in here: it may or may not have happened.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct AckLog {
    /// (namespace, name, uid)
    pub created: Vec<(String, String, String)>,
    /// (namespace, name)
    pub deleted: Vec<(String, String)>,
    /// Deletes that failed every attempt, some without an answer: they may or may not have
    /// happened (namespace, name).
    #[serde(default)]
    pub delete_unanswered: Vec<(String, String)>,
}

/// A pod as the final listing shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObservedPod {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub phase: String,
    /// The pod is being deleted (it has a deletionTimestamp).
    pub terminating: bool,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct AccountingReport {
    pub passed: bool,
    pub acknowledged_creates: usize,
    pub acknowledged_deletes: usize,
    /// Acknowledged creates (not deleted) that are gone: lost writes.
    pub lost: usize,
    /// Acknowledged deletes that still exist (not even terminating).
    pub resurrected: usize,
    /// Names listed twice, or one uid under two names, or one name acknowledged with two uids.
    pub duplicated: usize,
    /// Pods that should run but are not Running.
    pub not_running: usize,
    /// Checked after an interrupt ([`check_interrupted`]): pods that should run and are still
    /// Pending, which the cut-short run gave no time to start. Reported, not a violation.
    #[serde(default)]
    pub not_yet_running: usize,
    /// Pods listed that were never acknowledged (a create whose answer was lost): reported, not
    /// a violation.
    pub unacknowledged: usize,
    /// Acknowledged creates whose delete failed every attempt and that are gone: the delete
    /// went through unanswered (as an ambiguous write may). Reported, not a violation.
    #[serde(default)]
    pub deleted_unanswered: usize,
    pub examples: Vec<String>,
}

const EXAMPLES: usize = 10;

/// Compares the acknowledgements with the final listing of the load's pods.
pub fn check(acks: &AckLog, observed: &[ObservedPod]) -> AccountingReport {
    check_with(acks, observed, false)
}

/// [`check`] for a run an interrupt cut short: acknowledged creates still Pending were given no
/// time to start and count as `not_yet_running`; everything else (a lost create, a resurrected
/// delete, a duplicate, a pod Failed) is a violation as ever. Deletes the run never sent need no
/// care: an acknowledged create not deleted must exist, which is what the listing shows.
pub fn check_interrupted(acks: &AckLog, observed: &[ObservedPod]) -> AccountingReport {
    check_with(acks, observed, true)
}

fn check_with(acks: &AckLog, observed: &[ObservedPod], interrupted: bool) -> AccountingReport {
    let mut report = AccountingReport {
        acknowledged_creates: acks.created.len(),
        acknowledged_deletes: acks.deleted.len(),
        ..Default::default()
    };
    let mut examples = Vec::new();
    let mut note = |text: String| {
        if examples.len() < EXAMPLES {
            examples.push(text);
        }
    };

    let deleted: HashSet<(&str, &str)> = acks
        .deleted
        .iter()
        .map(|(ns, n)| (ns.as_str(), n.as_str()))
        .collect();
    let mut listed: HashMap<(&str, &str), &ObservedPod> = HashMap::new();
    let mut uids: HashMap<&str, (&str, &str)> = HashMap::new();
    for pod in observed {
        let id = (pod.namespace.as_str(), pod.name.as_str());
        if listed.insert(id, pod).is_some() {
            report.duplicated += 1;
            note(format!("{}/{} is listed twice", pod.namespace, pod.name));
        }
        if let Some(other) = uids.insert(pod.uid.as_str(), id) {
            if other != id {
                report.duplicated += 1;
                note(format!(
                    "uid {} belongs to {}/{} and {}/{}",
                    pod.uid, other.0, other.1, pod.namespace, pod.name
                ));
            }
        }
    }

    let mut acked_uid: HashMap<(&str, &str), &str> = HashMap::new();
    for (ns, name, uid) in &acks.created {
        let id = (ns.as_str(), name.as_str());
        if let Some(previous) = acked_uid.insert(id, uid.as_str()) {
            if previous != uid && !deleted.contains(&id) {
                report.duplicated += 1;
                note(format!(
                    "{ns}/{name} was created twice (uids {previous} and {uid})"
                ));
            }
        }
    }
    let maybe_deleted: HashSet<(&str, &str)> = acks
        .delete_unanswered
        .iter()
        .map(|(ns, n)| (ns.as_str(), n.as_str()))
        .collect();
    for (&(ns, name), &uid) in &acked_uid {
        if deleted.contains(&(ns, name)) {
            continue;
        }
        match listed.get(&(ns, name)) {
            None if maybe_deleted.contains(&(ns, name)) => report.deleted_unanswered += 1,
            None => {
                report.lost += 1;
                note(format!(
                    "lost: {ns}/{name} (uid {uid}) was acknowledged but is gone"
                ));
            }
            Some(pod) if pod.uid != uid => {
                report.duplicated += 1;
                note(format!(
                    "{ns}/{name} has uid {} but the create answered {uid}",
                    pod.uid
                ));
            }
            Some(pod) if interrupted && matches!(pod.phase.as_str(), "Pending" | "") => {
                report.not_yet_running += 1;
            }
            Some(pod) if pod.phase != "Running" => {
                report.not_running += 1;
                note(format!("{ns}/{name} is {} rather than Running", pod.phase));
            }
            Some(_) => {}
        }
    }
    for (ns, name) in &acks.deleted {
        if let Some(pod) = listed.get(&(ns.as_str(), name.as_str())) {
            if !pod.terminating {
                report.resurrected += 1;
                note(format!("{ns}/{name} was deleted but still exists"));
            }
        }
    }
    report.unacknowledged = listed
        .keys()
        .filter(|id| !acked_uid.contains_key(id))
        .count();
    report.passed = report.lost == 0
        && report.resurrected == 0
        && report.duplicated == 0
        && report.not_running == 0;
    report.examples = examples;
    report
}

/// The pods of `namespaces` as the API server behind `api` lists them.
pub async fn list_pods(
    api: &cluster::api_access::ApiAccess,
    namespaces: &[String],
) -> anyhow::Result<Vec<ObservedPod>> {
    let mut out = Vec::new();
    for ns in namespaces {
        let path = format!("/api/v1/namespaces/{ns}/pods");
        let (code, body) = api.get(&path).await?;
        if code != 200 {
            anyhow::bail!("GET {path}: HTTP {code}");
        }
        let list: serde_json::Value = serde_json::from_str(&body)?;
        for item in list["items"].as_array().into_iter().flatten() {
            let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
            out.push(ObservedPod {
                namespace: text(&item["metadata"]["namespace"]),
                name: text(&item["metadata"]["name"]),
                uid: text(&item["metadata"]["uid"]),
                phase: text(&item["status"]["phase"]),
                terminating: !item["metadata"]["deletionTimestamp"].is_null(),
            });
        }
    }
    Ok(out)
}

/// Lists and checks until the pods are accounted for (deleted ones gone, the rest Running
/// again) or `timeout` passes; the last verdict either way.
pub async fn wait_and_check(
    acks: &AckLog,
    api: &cluster::api_access::ApiAccess,
    namespaces: &[String],
    timeout: std::time::Duration,
) -> anyhow::Result<AccountingReport> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let report = check(acks, &list_pods(api, namespaces).await?);
        if report.passed || std::time::Instant::now() >= deadline {
            return Ok(report);
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, uid: &str, phase: &str) -> ObservedPod {
        ObservedPod {
            namespace: "ns".into(),
            name: name.into(),
            uid: uid.into(),
            phase: phase.into(),
            terminating: false,
        }
    }

    fn acks(created: &[(&str, &str)], deleted: &[&str]) -> AckLog {
        AckLog {
            created: created
                .iter()
                .map(|(n, u)| ("ns".into(), n.to_string(), u.to_string()))
                .collect(),
            deleted: deleted
                .iter()
                .map(|n| ("ns".into(), n.to_string()))
                .collect(),
            delete_unanswered: Vec::new(),
        }
    }

    #[test]
    fn everything_accounted_for_passes() {
        let a = acks(&[("a", "1"), ("b", "2"), ("c", "3")], &["c"]);
        let observed = vec![pod("a", "1", "Running"), pod("b", "2", "Running")];
        let r = check(&a, &observed);
        assert!(r.passed, "{r:?}");
    }

    #[test]
    fn a_lost_write_fails() {
        // Planted: b was acknowledged, never deleted, and is gone.
        let a = acks(&[("a", "1"), ("b", "2")], &[]);
        let r = check(&a, &[pod("a", "1", "Running")]);
        assert!(!r.passed);
        assert_eq!(r.lost, 1);
        assert!(r.examples[0].contains("ns/b"), "{r:?}");
    }

    #[test]
    fn a_delete_without_an_answer_may_have_happened() {
        // b's delete failed every attempt without an answer, and b is gone: not lost.
        let mut a = acks(&[("a", "1"), ("b", "2"), ("c", "3")], &[]);
        a.delete_unanswered = vec![("ns".into(), "b".into()), ("ns".into(), "c".into())];
        let r = check(&a, &[pod("a", "1", "Running"), pod("c", "3", "Running")]);
        assert!(r.passed, "{r:?}");
        assert_eq!((r.lost, r.deleted_unanswered), (0, 1));
        // Without that attempt, the same listing is a lost write.
        let r = check(
            &acks(&[("a", "1"), ("b", "2")], &[]),
            &[pod("a", "1", "Running")],
        );
        assert_eq!(r.lost, 1);
    }

    #[test]
    fn a_resurrected_delete_fails() {
        let a = acks(&[("a", "1")], &["a"]);
        let r = check(&a, &[pod("a", "1", "Running")]);
        assert_eq!(r.resurrected, 1);
        assert!(!r.passed);
        // Still terminating is fine: the node host finishes the deletion.
        let mut p = pod("a", "1", "Running");
        p.terminating = true;
        assert!(check(&a, &[p]).passed);
    }

    #[test]
    fn duplicates_fail() {
        let a = acks(&[("a", "1"), ("b", "2")], &[]);
        let r = check(&a, &[pod("a", "1", "Running"), pod("b", "1", "Running")]);
        assert!(r.duplicated >= 1, "{r:?}");
        let a = acks(&[("a", "1"), ("a", "9")], &[]);
        assert!(check(&a, &[pod("a", "9", "Running")]).duplicated >= 1);
    }

    #[test]
    fn an_interrupted_run_excuses_pending_pods_only() {
        let a = acks(&[("a", "1"), ("b", "2"), ("c", "3")], &["c"]);
        // b is still Pending when the run was stopped; c's delete went through.
        let observed = vec![pod("a", "1", "Running"), pod("b", "2", "Pending")];
        assert!(!check(&a, &observed).passed);
        let r = check_interrupted(&a, &observed);
        assert!(r.passed, "{r:?}");
        assert_eq!((r.not_running, r.not_yet_running), (0, 1));
        // A lost create, or a Failed pod, is still a violation.
        let r = check_interrupted(&a, &[pod("a", "1", "Running")]);
        assert_eq!(r.lost, 1);
        assert!(!r.passed);
        let r = check_interrupted(&a, &[pod("a", "1", "Failed"), pod("b", "2", "Pending")]);
        assert_eq!(r.not_running, 1);
        assert!(!r.passed);
    }

    #[test]
    fn pods_not_running_fail_and_strays_are_only_counted() {
        let a = acks(&[("a", "1")], &[]);
        let r = check(&a, &[pod("a", "1", "Pending"), pod("x", "7", "Running")]);
        assert_eq!(r.not_running, 1);
        assert_eq!(r.unacknowledged, 1);
        assert!(!r.passed);
    }
}
