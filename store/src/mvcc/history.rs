//! Compaction, the change log that watchers catch up from, and hashes of the key space.

use super::*;

impl Mvcc {
    pub(super) fn compact(&mut self, rev: Revision) -> Result<CompactResponse, StoreError> {
        if rev > self.revision {
            return Err(StoreError::FutureRevision {
                requested: rev,
                current: self.revision,
            });
        }
        if rev <= self.compact_revision {
            return Err(StoreError::Compacted {
                requested: rev,
                compact_revision: self.compact_revision,
            });
        }
        // What compaction changes: keys with versions before `rev` that no read at or after it
        // can see. Found in one pass, changed afterwards (the persistent map has no `retain`).
        let mut trims: Vec<(Bytes, usize)> = Vec::new();
        for (key, versions) in &self.keys {
            if let Some(keep_from) = compaction_keep_from(versions, rev).filter(|k| *k > 0) {
                trims.push((key.clone(), keep_from));
            }
        }
        let mut freed: u64 = 0;
        for (key, keep_from) in trims {
            let Some(versions) = self.keys.get_mut(&key[..]) else {
                continue;
            };
            freed += versions[..keep_from]
                .iter()
                .map(|v| (key.len() + v.value.len()) as u64)
                .sum::<u64>();
            let versions = Arc::make_mut(versions);
            versions.drain(..keep_from);
            if versions.is_empty() {
                self.keys.remove(&key[..]);
            } else if versions.capacity() > 2 * versions.len() + 4 {
                versions.shrink_to_fit();
            }
        }
        self.data_size -= freed;
        while self.history.front().is_some_and(|c| c.revision < rev) {
            self.history.pop_front();
        }
        self.compact_revision = rev;
        Ok(CompactResponse {
            header: ResponseHeader::default(),
        })
    }

    /// Events in `range` with revision >= `from`, in revision order, for a watcher catching up.
    ///
    /// Stops after the revision at which about `max_events` were collected (at least one revision
    /// with events, and never in the middle of a revision). Returns the events and the revision to
    /// ask for next: the last revision covered + 1, or current + 1 when caught up (`from` itself if
    /// that lies further ahead).
    pub fn events_since(
        &self,
        range: &KeyRange,
        from: Revision,
        max_events: usize,
    ) -> Result<(Vec<Event>, Revision), StoreError> {
        if from < self.compact_revision {
            return Err(StoreError::Compacted {
                requested: from,
                compact_revision: self.compact_revision,
            });
        }
        let caught_up = (self.revision + 1).max(from);
        let max_events = max_events.max(1);
        let mut events = Vec::new();
        if range.is_single() {
            // One key: walk its own versions instead of the whole change log.
            let Some((key, versions)) = self.keys.get_key_value(&range.key[..]) else {
                return Ok((events, caught_up));
            };
            let start = versions.partition_point(|v| v.mod_revision < from);
            for i in start..versions.len() {
                events.push(event_for(key, versions, i));
                if events.len() >= max_events && i + 1 < versions.len() {
                    return Ok((events, versions[i].mod_revision + 1));
                }
            }
            return Ok((events, caught_up));
        }
        let start = self.history.partition_point(|c| c.revision < from);
        for (n, changes) in self.history.range(start..).enumerate() {
            for key in changes.keys.iter().filter(|k| range.contains(k)) {
                let Some(event) = self.event_at(key, changes.revision) else {
                    continue;
                };
                events.push(event);
            }
            if events.len() >= max_events && start + n + 1 < self.history.len() {
                return Ok((events, changes.revision + 1));
            }
        }
        Ok((events, caught_up))
    }

    /// The event that wrote `key` at `rev`; retained for every revision in the change log.
    fn event_at(&self, key: &[u8], rev: Revision) -> Option<Event> {
        let (key, versions) = self.keys.get_key_value(key)?;
        let i = index_at(versions, rev).filter(|i| versions[*i].mod_revision == rev)?;
        Some(event_for(key, versions, i))
    }

    /// A deterministic hash (FNV-1a, 64 bit) of the current revision and every live key with its
    /// value, create and mod revision, version and lease. Equal on replicas that applied the same
    /// commands. Values are hashed in their stored form (`types::stored_values`), which the
    /// proposer chose once for every member, so hashing decodes nothing.
    pub fn hash(&self) -> u64 {
        self.hash_of_state_at(self.revision)
    }

    /// [`hash`](Self::hash) of the key space as it was at `rev` (etcd's HashKV with a revision):
    /// members that applied the same commands agree on it even while writes go on, as long as
    /// each has applied `rev` and none compacted past it.
    pub fn hash_at(&self, rev: Revision) -> Result<u64, StoreError> {
        if rev < self.compact_revision {
            return Err(StoreError::Compacted {
                requested: rev,
                compact_revision: self.compact_revision,
            });
        }
        if rev > self.revision {
            return Err(StoreError::FutureRevision {
                requested: rev,
                current: self.revision,
            });
        }
        Ok(self.hash_of_state_at(rev))
    }

    fn hash_of_state_at(&self, rev: Revision) -> u64 {
        let mut h = Fnv1a64::new();
        h.write_i64(rev);
        for (key, versions) in &self.keys {
            let Some(v) = live_at(versions, rev) else {
                continue;
            };
            h.write_bytes(key);
            h.write_bytes(&v.value);
            h.write_i64(v.create_revision);
            h.write_i64(v.mod_revision);
            h.write_i64(v.version);
            h.write_i64(v.lease);
        }
        h.finish()
    }
}

/// How many of a key's oldest versions a compaction at `rev` drops, if any. It keeps what a read
/// at `rev` sees (the latest version at or below it, unless a tombstone) and, for a write at
/// exactly `rev`, the version it replaced: the event at `rev` stays deliverable with its prev_kv.
fn compaction_keep_from(versions: &[Version], rev: Revision) -> Option<usize> {
    let at_or_below = versions.partition_point(|v| v.mod_revision <= rev);
    let last = at_or_below.checked_sub(1)?;
    Some(if versions[last].mod_revision == rev {
        last.saturating_sub(1)
    } else if versions[last].is_tombstone() {
        at_or_below
    } else {
        last
    })
}

/// FNV-1a, 64 bit: tiny, and stable across builds and platforms (unlike std's `DefaultHasher`).
struct Fnv1a64(u64);

impl Fnv1a64 {
    fn new() -> Self {
        Fnv1a64(0xcbf2_9ce4_8422_2325)
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    /// Length-prefixed, so ("ab", "c") and ("a", "bc") differ.
    fn write_bytes(&mut self, bytes: &[u8]) {
        self.write(&(bytes.len() as u64).to_le_bytes());
        self.write(bytes);
    }

    fn write_i64(&mut self, v: i64) {
        self.write(&v.to_le_bytes());
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mvcc::fixtures::*;

    #[test]
    fn the_hash_at_a_revision_is_the_hash_the_state_had_then() {
        let mut m = Mvcc::new();
        put(&mut m, "a", "1"); // 2
        put(&mut m, "b", "1"); // 3
        let at_3 = m.hash();
        put(&mut m, "a", "2"); // 4
        delete(&mut m, KeyRange::single(b("b"))); // 5
        put(&mut m, "c", "1"); // 6
        assert_eq!(m.hash_at(3), Ok(at_3));
        assert_eq!(m.hash_at(6), Ok(m.hash()));
        assert_ne!(m.hash_at(4), m.hash_at(5), "the delete of b changes it");
        assert_eq!(
            m.hash_at(7),
            Err(StoreError::FutureRevision {
                requested: 7,
                current: 6
            })
        );
        // A replica that applied the same commands later agrees on every revision both hold.
        let mut late = Mvcc::new();
        put(&mut late, "a", "1");
        put(&mut late, "b", "1");
        put(&mut late, "a", "2");
        assert_eq!(late.hash_at(4), m.hash_at(4));
        m.apply(&Command::Compact(CompactRequest { revision: 4 }));
        assert!(matches!(m.hash_at(3), Err(StoreError::Compacted { .. })));
        assert_eq!(late.hash_at(4), m.hash_at(4));
    }

    #[test]
    fn compaction_keeps_the_compact_revision_readable() {
        let mut m = Mvcc::new();
        put(&mut m, "a", "1"); // 2
        put(&mut m, "b", "1"); // 3
        put(&mut m, "a", "2"); // 4
        delete(&mut m, KeyRange::single(b("b"))); // 5
        put(&mut m, "a", "3"); // 6
        let size_before = m.data_size();

        assert_eq!(
            expect_error(&mut m, Command::Compact(CompactRequest { revision: 7 })),
            StoreError::FutureRevision {
                requested: 7,
                current: 6
            }
        );
        let (r, events) = m.apply(&Command::Compact(CompactRequest { revision: 4 }));
        assert!(
            matches!(r, CommandResult::Compact(CompactResponse { header }) if header.revision == 6)
        );
        assert!(events.is_empty());
        assert_eq!((m.current_revision(), m.compact_revision()), (6, 4));
        // Nothing below 4 was unreachable yet: 2 is the prev_kv of the event at 4, 3 is b at 4.
        assert_eq!(m.data_size(), size_before);

        assert_eq!(
            get_at(&m, "a", 3),
            Err(StoreError::Compacted {
                requested: 3,
                compact_revision: 4
            })
        );
        assert_eq!(get_at(&m, "a", 4).unwrap().unwrap().value, b("2"));
        assert_eq!(get_at(&m, "b", 4).unwrap().unwrap().value, b("1"));
        assert_eq!(get_at(&m, "b", 5).unwrap(), None);
        assert_eq!(get(&m, "a").unwrap().value, b("3"));

        let all = KeyRange::prefix(b(""));
        assert_eq!(
            m.events_since(&all, 3, 100),
            Err(StoreError::Compacted {
                requested: 3,
                compact_revision: 4
            })
        );
        let (events, next) = m.events_since(&all, 4, 100).unwrap();
        assert_eq!(
            events.iter().map(|e| e.kv.mod_revision).collect::<Vec<_>>(),
            vec![4, 5, 6]
        );
        assert_eq!(next, 7);
        // The event at the compact revision keeps its prev_kv.
        assert_eq!(events[0].prev_kv.as_ref().unwrap().value, b("1"));
        let (events, _) = m.events_since(&KeyRange::single(b("a")), 4, 100).unwrap();
        assert_eq!(
            events.iter().map(|e| e.kv.mod_revision).collect::<Vec<_>>(),
            vec![4, 6]
        );
        assert_eq!(events[1].prev_kv.as_ref().unwrap().value, b("2"));

        assert_eq!(
            expect_error(&mut m, Command::Compact(CompactRequest { revision: 4 })),
            StoreError::Compacted {
                requested: 4,
                compact_revision: 4
            }
        );
        // Compacting past the delete drops the tombstoned key entirely.
        m.apply(&Command::Compact(CompactRequest { revision: 6 }));
        assert!(!m.keys.contains_key(&b"b"[..]));
        assert_eq!(m.keys[&b"a"[..]].len(), 2);
        assert_eq!(
            m.data_size(),
            size_before - 5,
            "a@2, b@3 and b's tombstone dropped"
        );
        assert_eq!(get_at(&m, "a", 6).unwrap().unwrap().value, b("3"));
    }

    #[test]
    fn events_since_never_splits_a_revision() {
        let mut m = Mvcc::new();
        put(&mut m, "/p/a", "1"); // 2
        delete(&mut m, KeyRange::single(b("/p/a"))); // 3
                                                     // 4: three keys at once.
        txn(
            &mut m,
            TxnRequest {
                compare: vec![],
                success: vec![
                    RequestOp::Put(put_req("/p/x", "1")),
                    RequestOp::Put(put_req("/other", "1")),
                    RequestOp::Put(put_req("/p/y", "1")),
                    RequestOp::Put(put_req("/p/z", "1")),
                ],
                failure: vec![],
            },
        );
        put(&mut m, "/p/x", "2"); // 5
        let prefix = KeyRange::prefix(b("/p/"));

        let (events, next) = m.events_since(&prefix, 1, 2).unwrap();
        assert_eq!(
            events.iter().map(|e| e.kv.mod_revision).collect::<Vec<_>>(),
            vec![2, 3]
        );
        assert_eq!(next, 4);
        let (events, next) = m.events_since(&prefix, next, 1).unwrap();
        assert_eq!(events.len(), 3, "all of revision 4, though over the limit");
        assert!(events.iter().all(|e| e.kv.mod_revision == 4));
        assert_eq!(next, 5);
        let (events, next) = m.events_since(&prefix, next, 1).unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].prev_kv.as_ref().unwrap().value, b("1"));
        assert_eq!(next, 6);
        let (events, next) = m.events_since(&prefix, next, 1).unwrap();
        assert!(events.is_empty());
        assert_eq!(next, 6);
        // A future start revision stays where it is.
        assert_eq!(m.events_since(&prefix, 9, 1).unwrap(), (vec![], 9));

        let (events, next) = m.events_since(&KeyRange::single(b("/p/a")), 1, 1).unwrap();
        assert_eq!((events.len(), events[0].kind, next), (1, EventKind::Put, 3));
        let (events, next) = m
            .events_since(&KeyRange::single(b("/p/a")), next, 1)
            .unwrap();
        assert_eq!(
            (events.len(), events[0].kind, next),
            (1, EventKind::Delete, 6)
        );
        assert_eq!(events[0].prev_kv.as_ref().unwrap().value, b("1"));
    }

    #[test]
    fn hash_is_deterministic_and_detects_divergence() {
        let mut a = Mvcc::new();
        let mut b2 = Mvcc::new();
        for cmd in workload() {
            a.apply(&cmd);
            b2.apply(&cmd);
        }
        assert_eq!(a.hash(), b2.hash());
        assert_ne!(a.hash(), Mvcc::new().hash());
        put(&mut a, "/k/00", "x");
        put(&mut b2, "/k/00", "y");
        assert_eq!(a.current_revision(), b2.current_revision());
        assert_ne!(a.hash(), b2.hash());
    }
}
