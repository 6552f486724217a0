//! A member's health checks behind `/healthz`, `/livez` and `/readyz`.
//!
//! - `raft_loop` (all three): the raft driver went round its loop lately. It does at least once
//!   a tick; a driver stuck (in an fsync that does not return, say) fails it.
//! - `leader` (`/readyz`): the member knows a leader, as etcd's `/health` asks.
//! - `serializable_read` (`/readyz`): the state machine is there to read: not being rebuilt
//!   after a start, and applied as far as the member's log is committed, within
//!   [`APPLY_LAG_ENTRIES`].
//! - `linearizable_read` (`/readyz`): a ReadIndex is answered within
//!   [`LINEARIZABLE_READ_TIMEOUT`] — a leader that still holds its quorum confirmed its commit
//!   index, and this member has applied up to it — as etcd's check of that name.

use std::time::Duration;

use telemetry::{async_check, Health};

use crate::member::MemberHandle;

/// How long the driver may go without a round of its loop before `raft_loop` fails.
pub const RAFT_LOOP_STALL: Duration = Duration::from_secs(10);
/// Committed entries a member may have left to apply and still count as caught up.
pub const APPLY_LAG_ENTRIES: u64 = 1_000;
/// How long `linearizable_read` waits for its ReadIndex.
pub const LINEARIZABLE_READ_TIMEOUT: Duration = Duration::from_secs(2);

/// Adds the member's checks to `health`.
pub fn register(health: &Health, member: &MemberHandle) {
    let shared = member.shared().clone();
    health.liveness("raft_loop", move || {
        let idle = shared.driver_idle_for();
        if idle > RAFT_LOOP_STALL {
            return Err(format!("the raft loop has not run for {idle:?}"));
        }
        Ok(())
    });
    let shared = member.shared().clone();
    health.readiness("leader", move || {
        if shared.raft_status().leader_id == raft::INVALID_ID {
            return Err("no leader".to_string());
        }
        Ok(())
    });
    let shared = member.shared().clone();
    health.readiness("serializable_read", move || {
        let status = shared.raft_status();
        if shared.is_restoring() {
            return Err(format!(
                "restoring the state machine after a start (commit index {})",
                status.commit_index
            ));
        }
        let lag = status.commit_index.saturating_sub(status.applied_index);
        if lag > APPLY_LAG_ENTRIES {
            return Err(format!(
                "applied index {} is {lag} entries behind the commit index",
                status.applied_index
            ));
        }
        Ok(())
    });
    let member = member.clone();
    health.readiness(
        "linearizable_read",
        async_check(move || {
            let member = member.clone();
            async move {
                match tokio::time::timeout(LINEARIZABLE_READ_TIMEOUT, member.read_index()).await {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(e)) => Err(e.to_string()),
                    Err(_) => Err(format!(
                        "no ReadIndex answer within {LINEARIZABLE_READ_TIMEOUT:?}"
                    )),
                }
            }
        }),
    );
}
