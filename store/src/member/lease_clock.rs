//! [`LeaseClocks`]: when each lease runs out, by this member's clock, without raft or I/O.
//!
//! A lease's deadline lives only in memory: the log holds grants, keep-alives and revocations,
//! not times. Whoever leads keeps the clocks and proposes `LeaseExpire` for a lease whose
//! deadline passed; a new leader gives every lease a whole TTL, as etcd does, since it cannot
//! know how long ago the old leader last saw a renewal.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::types::{Command, CommandResult, LeaseId};

/// How long a leader waits for an expiry it proposed to be applied before proposing it again.
pub const EXPIRE_RETRY: Duration = Duration::from_secs(2);

struct LeaseClock {
    deadline: Instant,
    ttl: Duration,
    /// When this member last proposed the lease's expiry.
    expire_proposed: Option<Instant>,
}

/// A change of one lease's deadline, for whoever publishes them (the gRPC front's
/// `LeaseTimeToLive` reads them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeadlineChange {
    Set(LeaseId, Instant),
    Removed(LeaseId),
}

/// Every lease's clock.
#[derive(Default)]
pub struct LeaseClocks {
    clocks: HashMap<LeaseId, LeaseClock>,
}

fn ttl_of(seconds: i64) -> Duration {
    Duration::from_secs(seconds.max(1) as u64)
}

impl LeaseClocks {
    /// Restarts every clock at `now` with a whole TTL: `leases` are the state machine's
    /// (id, TTL in seconds). Returns every deadline, to publish in place of the old ones.
    pub fn reset(
        &mut self,
        leases: Vec<(LeaseId, i64)>,
        now: Instant,
    ) -> HashMap<LeaseId, Instant> {
        self.clocks = leases
            .into_iter()
            .map(|(id, ttl)| {
                let ttl = ttl_of(ttl);
                let clock = LeaseClock {
                    deadline: now + ttl,
                    ttl,
                    expire_proposed: None,
                };
                (id, clock)
            })
            .collect();
        self.clocks
            .iter()
            .map(|(id, clock)| (*id, clock.deadline))
            .collect()
    }

    /// `cmd` was applied with `result` at `now`: the deadline it changed, if any.
    pub fn applied(
        &mut self,
        cmd: &Command,
        result: &CommandResult,
        now: Instant,
    ) -> Option<DeadlineChange> {
        match (cmd, result) {
            (Command::LeaseGrant(_), CommandResult::LeaseGrant(granted)) => {
                let ttl = ttl_of(granted.ttl);
                let deadline = now + ttl;
                let clock = LeaseClock {
                    deadline,
                    ttl,
                    expire_proposed: None,
                };
                self.clocks.insert(granted.id, clock);
                Some(DeadlineChange::Set(granted.id, deadline))
            }
            (Command::LeaseKeepAlive { id }, CommandResult::LeaseKeepAlive(_)) => {
                let clock = self.clocks.get_mut(id)?;
                clock.deadline = now + clock.ttl;
                clock.expire_proposed = None;
                Some(DeadlineChange::Set(*id, clock.deadline))
            }
            (Command::LeaseRevoke { id } | Command::LeaseExpire { id }, _) => {
                self.clocks.remove(id);
                Some(DeadlineChange::Removed(*id))
            }
            _ => None,
        }
    }

    /// The leases whose deadline passed by `now` and whose expiry is to be proposed (once, and
    /// again every [`EXPIRE_RETRY`] until it is applied).
    pub fn expire(&mut self, now: Instant) -> Vec<LeaseId> {
        let mut expire = Vec::new();
        for (id, clock) in self.clocks.iter_mut() {
            let retry_due = clock
                .expire_proposed
                .is_none_or(|at| now.duration_since(at) > EXPIRE_RETRY);
            if clock.deadline <= now && retry_due {
                clock.expire_proposed = Some(now);
                expire.push(*id);
            }
        }
        expire.sort_unstable();
        expire
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{LeaseGrantRequest, LeaseGrantResponse, LeaseKeepAliveResponse};

    fn grant(id: LeaseId, ttl: i64) -> (Command, CommandResult) {
        (
            Command::LeaseGrant(LeaseGrantRequest { id, ttl }),
            CommandResult::LeaseGrant(LeaseGrantResponse {
                id,
                ttl,
                ..Default::default()
            }),
        )
    }

    #[test]
    fn a_granted_lease_expires_after_its_ttl_unless_kept_alive() {
        let start = Instant::now();
        let mut leases = LeaseClocks::default();
        let (cmd, result) = grant(7, 10);
        assert_eq!(
            leases.applied(&cmd, &result, start),
            Some(DeadlineChange::Set(7, start + Duration::from_secs(10)))
        );
        assert!(leases.expire(start + Duration::from_secs(9)).is_empty());
        let renewed = start + Duration::from_secs(9);
        let keep_alive = Command::LeaseKeepAlive { id: 7 };
        let kept = CommandResult::LeaseKeepAlive(LeaseKeepAliveResponse::default());
        assert_eq!(
            leases.applied(&keep_alive, &kept, renewed),
            Some(DeadlineChange::Set(7, renewed + Duration::from_secs(10)))
        );
        assert!(leases.expire(start + Duration::from_secs(18)).is_empty());
        assert_eq!(leases.expire(start + Duration::from_secs(19)), [7]);
    }

    #[test]
    fn an_expiry_is_proposed_again_only_after_the_retry_interval() {
        let start = Instant::now();
        let mut leases = LeaseClocks::default();
        leases.reset(vec![(1, 1), (2, 0)], start);
        let due = start + Duration::from_secs(1);
        // A TTL of 0 counts as 1 s, as etcd's minimum.
        assert_eq!(leases.expire(due), [1, 2]);
        assert!(leases.expire(due + EXPIRE_RETRY).is_empty());
        assert_eq!(
            leases.expire(due + EXPIRE_RETRY + Duration::from_millis(1)),
            [1, 2]
        );
        // Once the expiry is applied the lease is gone.
        let expire = Command::LeaseExpire { id: 1 };
        assert_eq!(
            leases.applied(&expire, &CommandResult::Batch(vec![]), due),
            Some(DeadlineChange::Removed(1))
        );
        assert_eq!(leases.expire(due + EXPIRE_RETRY * 3), [2]);
    }

    #[test]
    fn a_new_leader_gives_every_lease_a_whole_ttl() {
        let start = Instant::now();
        let mut leases = LeaseClocks::default();
        leases.reset(vec![(1, 5)], start);
        let later = start + Duration::from_secs(4);
        let deadlines = leases.reset(vec![(1, 5), (2, 3)], later);
        assert_eq!(deadlines[&1], later + Duration::from_secs(5));
        assert_eq!(deadlines[&2], later + Duration::from_secs(3));
        assert!(leases.expire(start + Duration::from_secs(6)).is_empty());
        // A keep-alive of a lease it does not know changes nothing.
        let keep_alive = Command::LeaseKeepAlive { id: 9 };
        let kept = CommandResult::LeaseKeepAlive(LeaseKeepAliveResponse::default());
        assert_eq!(leases.applied(&keep_alive, &kept, later), None);
    }
}
