//! Leases: grants, and revocations that delete a lease's keys at one revision.

use super::*;

impl Mvcc {
    pub(super) fn lease_grant(
        &mut self,
        req: &LeaseGrantRequest,
    ) -> Result<LeaseGrantResponse, StoreError> {
        if req.ttl <= 0 {
            return Err(invalid("lease TTL must be positive"));
        }
        if req.id < 0 {
            return Err(invalid("lease id must not be negative"));
        }
        let id = if req.id == 0 {
            self.next_lease_id
        } else {
            req.id
        };
        if self.leases.contains_key(&id) {
            return Err(invalid("lease already exists"));
        }
        self.leases.insert(
            id,
            Lease {
                ttl: req.ttl,
                keys: OrdSet::new(),
            },
        );
        self.next_lease_id = self.next_lease_id.max(id.saturating_add(1));
        Ok(LeaseGrantResponse {
            header: ResponseHeader::default(),
            id,
            ttl: req.ttl,
        })
    }

    /// Revokes (or expires) a lease, deleting its keys at one revision.
    pub(super) fn lease_revoke(
        &mut self,
        id: LeaseId,
        batch: &mut WriteBatch,
    ) -> Result<LeaseRevokeResponse, StoreError> {
        let lease = self
            .leases
            .remove(&id)
            .ok_or(StoreError::LeaseNotFound { id })?;
        for key in &lease.keys {
            self.delete_key(batch, key);
        }
        Ok(LeaseRevokeResponse {
            header: ResponseHeader::default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mvcc::fixtures::*;

    #[test]
    fn leases_delete_their_keys_at_one_revision() {
        let mut m = Mvcc::new();
        let (r, _) = m.apply(&Command::LeaseGrant(LeaseGrantRequest { ttl: 10, id: 0 }));
        let CommandResult::LeaseGrant(g) = r else {
            panic!("{r:?}")
        };
        assert_eq!((g.id, g.ttl, g.header.revision), (1, 10, 1));
        let (r, _) = m.apply(&Command::LeaseGrant(LeaseGrantRequest { ttl: 5, id: 7 }));
        assert!(matches!(
            r,
            CommandResult::LeaseGrant(LeaseGrantResponse { id: 7, .. })
        ));
        let (r, _) = m.apply(&Command::LeaseGrant(LeaseGrantRequest { ttl: 5, id: 0 }));
        assert!(matches!(
            r,
            CommandResult::LeaseGrant(LeaseGrantResponse { id: 8, .. })
        ));
        assert!(matches!(
            expect_error(
                &mut m,
                Command::LeaseGrant(LeaseGrantRequest { ttl: 5, id: 7 })
            ),
            StoreError::InvalidRequest { .. }
        ));
        assert_eq!(m.leases(), vec![(1, 10), (7, 5), (8, 5)]);

        put_lease(&mut m, "a", "1", 1); // 2
        put_lease(&mut m, "b", "1", 1); // 3
        put_lease(&mut m, "c", "1", 1); // 4
        put(&mut m, "c", "2"); // 5: detached by a put without lease
        put_lease(&mut m, "d", "1", 7); // 6
        put_lease(&mut m, "d", "2", 1); // 7: moved to lease 1
        delete(&mut m, KeyRange::single(b("b"))); // 8: detached by the delete
        assert_eq!(get(&m, "d").unwrap().lease, 1);

        let (r, _) = m.apply(&Command::LeaseKeepAlive { id: 1 });
        assert!(matches!(
            r,
            CommandResult::LeaseKeepAlive(LeaseKeepAliveResponse { id: 1, ttl: 10, .. })
        ));
        assert_eq!(m.current_revision(), 8);

        let (r, events) = m.apply(&Command::LeaseRevoke { id: 1 });
        assert!(
            matches!(r, CommandResult::LeaseRevoke(LeaseRevokeResponse { header }) if header.revision == 9)
        );
        assert_eq!(
            events.iter().map(|e| &e.kv.key[..]).collect::<Vec<_>>(),
            vec![&b"a"[..], b"d"]
        );
        assert!(events
            .iter()
            .all(|e| e.kind == EventKind::Delete && e.kv.mod_revision == 9));
        assert_eq!(get(&m, "c").unwrap().value, b("2"));
        assert_eq!(m.current_revision(), 9);

        // Lease 7 has no keys left: expiring it changes no revision.
        let (r, events) = m.apply(&Command::LeaseExpire { id: 7 });
        assert!(matches!(r, CommandResult::LeaseRevoke(_)));
        assert!(events.is_empty());
        assert_eq!(m.current_revision(), 9);

        put_lease(&mut m, "e", "1", 8); // 10
        let (_, events) = m.apply(&Command::LeaseExpire { id: 8 });
        assert_eq!((events.len(), events[0].kv.mod_revision), (1, 11));

        assert_eq!(
            expect_error(&mut m, Command::LeaseRevoke { id: 1 }),
            StoreError::LeaseNotFound { id: 1 }
        );
        assert_eq!(
            expect_error(&mut m, Command::LeaseExpire { id: 1 }),
            StoreError::LeaseNotFound { id: 1 }
        );
        assert_eq!(
            expect_error(&mut m, Command::LeaseKeepAlive { id: 1 }),
            StoreError::LeaseNotFound { id: 1 }
        );
        assert!(m.leases().is_empty());
        // Ids are not reused.
        let (r, _) = m.apply(&Command::LeaseGrant(LeaseGrantRequest { ttl: 5, id: 0 }));
        assert!(matches!(
            r,
            CommandResult::LeaseGrant(LeaseGrantResponse { id: 9, .. })
        ));
    }
}
