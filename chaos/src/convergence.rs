//! Convergence: after the run, every store member reaches the same revision and has the same
//! hash of its key space at it. Members that lag (a restarted member still catching up) are
//! given until a deadline.

use std::time::{Duration, Instant};
use transport::Endpoint;

use serde::{Deserialize, Serialize};
use store::client::Client;

/// One member's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberDigest {
    pub endpoint: String,
    pub name: String,
    /// The revision the hash was taken at.
    pub revision: i64,
    pub hash: u64,
    pub compact_revision: i64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ConvergenceReport {
    pub passed: bool,
    /// Members that did not answer at the last attempt.
    pub unreachable: Vec<String>,
    pub members: Vec<MemberDigest>,
    pub waited_ms: f64,
    pub detail: String,
}

/// The verdict on one round of answers: converged when every member answered and all agree on
/// revision and hash. `Err` says why not.
pub fn judge(members: &[MemberDigest], unreachable: &[String]) -> Result<(), String> {
    if !unreachable.is_empty() {
        return Err(format!("no answer from {}", unreachable.join(", ")));
    }
    let Some(first) = members.first() else {
        return Err("no members".into());
    };
    let mut problems = Vec::new();
    for m in &members[1..] {
        if m.revision != first.revision {
            problems.push(format!(
                "{} is at revision {}, {} at {}",
                m.name, m.revision, first.name, first.revision
            ));
        } else if m.hash != first.hash {
            problems.push(format!(
                "{} and {} differ at revision {}: hash {:016x} vs {:016x}",
                m.name, first.name, m.revision, m.hash, first.hash
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

/// Whether the only disagreement is members at different revisions (still catching up), which
/// waiting may fix; diverged hashes at one revision never heal.
fn only_lagging(members: &[MemberDigest]) -> bool {
    let Some(first) = members.first() else {
        return true;
    };
    members
        .iter()
        .all(|m| m.revision != first.revision || m.hash == first.hash)
}

/// Waits until every member has applied the revision the most advanced one had when first asked
/// (the target), then compares their hashes of the key space as of that revision, or until
/// `timeout` passes. Comparing at one revision, not each member's latest, lets the check pass
/// while the cluster goes on writing (node leases, status updates) and still catches a member
/// whose state differs at that revision or that never gets there.
pub async fn wait_for_convergence(
    client: &Client,
    endpoints: &[Endpoint],
    timeout: Duration,
) -> ConvergenceReport {
    let started = Instant::now();
    let mut target: Option<i64> = None;
    loop {
        let mut statuses = Vec::new();
        let mut unreachable = Vec::new();
        for endpoint in endpoints {
            match tokio::time::timeout(Duration::from_secs(3), client.status_of(endpoint.clone()))
                .await
            {
                Ok(Ok(status)) => statuses.push((endpoint, status)),
                _ => unreachable.push(endpoint.to_string()),
            }
        }
        if unreachable.is_empty() && target.is_none() {
            target = statuses.iter().map(|(_, s)| s.header.revision).max();
        }
        let mut members = Vec::new();
        for (endpoint, status) in statuses {
            let revision = status.header.revision;
            let Some(t) = target.filter(|t| revision >= *t) else {
                // Still catching up (or no target yet): reported at its own revision, unhashed.
                members.push(MemberDigest {
                    endpoint: endpoint.to_string(),
                    name: status.name,
                    revision,
                    hash: 0,
                    compact_revision: status.compact_revision,
                });
                continue;
            };
            let hash =
                tokio::time::timeout(Duration::from_secs(3), client.hash_at(endpoint.clone(), t));
            match hash.await {
                Ok(Ok(h)) => members.push(MemberDigest {
                    endpoint: endpoint.to_string(),
                    name: status.name,
                    revision: t,
                    hash: h.hash,
                    compact_revision: h.compact_revision,
                }),
                _ => unreachable.push(endpoint.to_string()),
            }
        }
        let verdict = judge(&members, &unreachable);
        let give_up =
            started.elapsed() >= timeout || (unreachable.is_empty() && !only_lagging(&members));
        if verdict.is_ok() || give_up {
            return ConvergenceReport {
                passed: verdict.is_ok(),
                unreachable,
                members,
                waited_ms: started.elapsed().as_secs_f64() * 1e3,
                detail: verdict.err().unwrap_or_default(),
            };
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(name: &str, revision: i64, hash: u64) -> MemberDigest {
        MemberDigest {
            endpoint: format!("127.0.0.1:1{name}"),
            name: name.into(),
            revision,
            hash,
            compact_revision: 0,
        }
    }

    #[test]
    fn agreeing_members_converge() {
        let m = vec![digest("1", 50, 7), digest("2", 50, 7), digest("3", 50, 7)];
        assert!(judge(&m, &[]).is_ok());
    }

    #[test]
    fn a_diverged_member_fails_and_is_named() {
        // Planted: s3 has the same revision but another key space.
        let m = vec![
            digest("s1", 50, 7),
            digest("s2", 50, 7),
            digest("s3", 50, 8),
        ];
        let e = judge(&m, &[]).unwrap_err();
        assert!(e.contains("s3") && e.contains("differ"), "{e}");
        assert!(!only_lagging(&m));
    }

    #[test]
    fn a_lagging_member_is_not_converged_but_may_catch_up() {
        let m = vec![digest("s1", 50, 7), digest("s2", 49, 6)];
        let e = judge(&m, &[]).unwrap_err();
        assert!(e.contains("revision 49"), "{e}");
        assert!(only_lagging(&m));
    }

    #[test]
    fn a_silent_member_fails() {
        let m = vec![digest("s1", 50, 7)];
        assert!(judge(&m, &["127.0.0.1:9".into()]).is_err());
    }
}
