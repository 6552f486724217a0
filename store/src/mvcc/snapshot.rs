//! Snapshots: a point-in-time view of the state, taken on the raft thread and encoded
//! elsewhere, and a state decoded back from one.

use super::*;

impl Mvcc {
    /// A point-in-time copy of the whole state for a snapshot. It costs a walk of the key index
    /// and the change log cloning pointers (no value bytes, no version lists are copied), so the
    /// raft thread can take it and leave the encoding to another thread.
    pub fn snapshot_view(&self) -> MvccView {
        MvccView {
            revision: self.revision,
            compact_revision: self.compact_revision,
            keys: self.keys.clone(),
            history: self.history.clone(),
            leases: self.leases.clone(),
            next_lease_id: self.next_lease_id,
            live_keys: self.live_keys,
            data_size: self.data_size,
        }
    }

    pub fn to_snapshot(&self) -> Result<Vec<u8>, MvccError> {
        let mut out = Vec::new();
        self.snapshot_view().encode_into(&mut out)?;
        Ok(out)
    }

    /// Decodes a snapshot and lets the change log and leases share the index's key allocations
    /// again (decoding gives every copy its own).
    pub fn from_snapshot(bytes: &[u8]) -> Result<Mvcc, MvccError> {
        let (decoded, read): (SnapshotOwned, usize) =
            bincode::serde::decode_from_slice(bytes, bincode::config::standard())
                .map_err(MvccError::Decode)?;
        if read != bytes.len() {
            return Err(MvccError::TrailingBytes {
                trailing: bytes.len() - read,
            });
        }
        let mut mvcc = Mvcc {
            revision: decoded.revision,
            compact_revision: decoded.compact_revision,
            keys: decoded
                .keys
                .into_iter()
                .map(|(key, versions)| (key, Arc::new(versions)))
                .collect(),
            history: VecDeque::new(),
            leases: decoded.leases,
            next_lease_id: decoded.next_lease_id,
            live_keys: decoded.live_keys,
            data_size: decoded.data_size,
        };
        let keys = &mvcc.keys;
        let share = |k: &Bytes| {
            keys.get_key_value(&k[..])
                .map_or_else(|| k.clone(), |(shared, _)| shared.clone())
        };
        let history = decoded
            .history
            .into_iter()
            .map(|mut changes| {
                for key in &mut changes.keys {
                    *key = share(key);
                }
                Arc::new(changes)
            })
            .collect();
        for lease in mvcc.leases.values_mut() {
            lease.keys = lease.keys.iter().map(share).collect();
        }
        mvcc.history = history;
        Ok(mvcc)
    }
}

/// A point-in-time copy of an [`Mvcc`] (see [`Mvcc::snapshot_view`]), to be encoded off the raft
/// thread. It shares version lists, change-log entries and value bytes with the live state.
pub struct MvccView {
    revision: Revision,
    compact_revision: Revision,
    keys: OrdMap<Bytes, Arc<Vec<Version>>>,
    history: VecDeque<Arc<RevisionChanges>>,
    leases: BTreeMap<LeaseId, Lease>,
    next_lease_id: LeaseId,
    live_keys: u64,
    data_size: u64,
}

impl MvccView {
    /// The revision the view was taken at.
    pub fn revision(&self) -> Revision {
        self.revision
    }

    /// Encodes the view (the format [`Mvcc::from_snapshot`] reads) into `out` as it goes, so a
    /// state of GBs is never held encoded in memory as a whole.
    pub fn encode_into<W: Write>(&self, mut out: W) -> Result<usize, MvccError> {
        let encoded = SnapshotRef {
            revision: self.revision,
            compact_revision: self.compact_revision,
            keys: KeysRef(&self.keys),
            history: HistoryRef(&self.history),
            leases: &self.leases,
            next_lease_id: self.next_lease_id,
            live_keys: self.live_keys,
            data_size: self.data_size,
        };
        bincode::serde::encode_into_std_write(&encoded, &mut out, bincode::config::standard())
            .map_err(MvccError::Encode)
    }
}

/// The snapshot encoding, borrowed from a view. Field order is the format: [`SnapshotOwned`]
/// decodes the same fields in the same order.
#[derive(Serialize)]
struct SnapshotRef<'a> {
    revision: Revision,
    compact_revision: Revision,
    keys: KeysRef<'a>,
    history: HistoryRef<'a>,
    leases: &'a BTreeMap<LeaseId, Lease>,
    next_lease_id: LeaseId,
    live_keys: u64,
    data_size: u64,
}

#[derive(Deserialize)]
struct SnapshotOwned {
    revision: Revision,
    compact_revision: Revision,
    keys: BTreeMap<Bytes, Vec<Version>>,
    history: VecDeque<RevisionChanges>,
    leases: BTreeMap<LeaseId, Lease>,
    next_lease_id: LeaseId,
    live_keys: u64,
    data_size: u64,
}

/// Encodes the index as a map of key to version list (the `Arc`s are transparent).
struct KeysRef<'a>(&'a OrdMap<Bytes, Arc<Vec<Version>>>);

impl Serialize for KeysRef<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(key, versions)| (key, &**versions)))
    }
}

/// Encodes the change log as a sequence of entries (the `Arc`s are transparent).
struct HistoryRef<'a>(&'a VecDeque<Arc<RevisionChanges>>);

impl Serialize for HistoryRef<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(|changes| &**changes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mvcc::fixtures::*;

    #[test]
    fn snapshot_round_trip_preserves_everything() {
        let mut m = Mvcc::new();
        for cmd in workload() {
            m.apply(&cmd);
        }
        let bytes = m.to_snapshot().unwrap();
        let restored = Mvcc::from_snapshot(&bytes).unwrap();
        assert_eq!(restored.hash(), m.hash());
        assert_eq!(restored.current_revision(), m.current_revision());
        assert_eq!(restored.compact_revision(), 10);
        assert_eq!(restored.data_size(), m.data_size());
        assert_eq!(restored.key_count(), m.key_count());
        assert_eq!(restored.leases(), m.leases());
        for rev in 10..=m.current_revision() {
            let req = RangeRequest {
                range: KeyRange::prefix(b("")),
                revision: rev,
                ..RangeRequest::default()
            };
            assert_eq!(restored.range(&req), m.range(&req));
        }
        let all = KeyRange::prefix(b(""));
        assert_eq!(
            restored.events_since(&all, 10, 1000),
            m.events_since(&all, 10, 1000)
        );
        assert!(restored
            .range(&RangeRequest {
                revision: 9,
                ..RangeRequest::default()
            })
            .is_err());
        // History keys share the index's allocation again.
        let key = &restored.history.back().unwrap().keys[0];
        let (index_key, _) = restored.keys.get_key_value(&key[..]).unwrap();
        assert_eq!(key.as_ptr(), index_key.as_ptr());

        assert!(matches!(
            Mvcc::from_snapshot(&bytes[..bytes.len() / 2]),
            Err(MvccError::Decode(_))
        ));
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert!(matches!(
            Mvcc::from_snapshot(&trailing),
            Err(MvccError::TrailingBytes { trailing: 1 })
        ));
    }

    #[test]
    fn a_view_keeps_the_state_it_was_taken_at() {
        let mut m = Mvcc::new();
        let commands = workload();
        let (before, after) = commands.split_at(commands.len() / 2);
        for cmd in before {
            m.apply(cmd);
        }
        let at_view = Mvcc::from_snapshot(&m.to_snapshot().unwrap()).unwrap();
        let view = m.snapshot_view();
        // Writes after the view (puts, deletes, compaction, leases) copy what the view shares.
        for cmd in after {
            m.apply(cmd);
        }
        assert_ne!(m.hash(), at_view.hash());
        let mut bytes = Vec::new();
        view.encode_into(&mut bytes).unwrap();
        let restored = Mvcc::from_snapshot(&bytes).unwrap();
        assert_eq!(view.revision(), at_view.current_revision());
        assert_eq!(
            restored.to_snapshot().unwrap(),
            at_view.to_snapshot().unwrap()
        );
        // And the live state is untouched by the view.
        let live = Mvcc::from_snapshot(&m.to_snapshot().unwrap()).unwrap();
        assert_eq!(live.hash(), m.hash());
        assert_eq!(live.current_revision(), m.current_revision());
    }

    #[test]
    fn stored_values_leave_the_store_as_written() {
        let pod = |phase: &str| {
            format!(
                r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"p","namespace":"default"}},"spec":{{"containers":[{{"image":"registry.k8s.io/pause:3.10","name":"pause"}}]}},"status":{{"phase":"{phase}","qosClass":"Burstable"}}}}"#
            )
        };
        let stored_put = |key: &str, value: &str| {
            stored_values::encode_command(&Command::Put(put_req(key, value))).into_owned()
        };
        let mut m = Mvcc::new();
        let (_, events) = m.apply(&stored_put("/p", &pod("Pending")));
        assert_eq!(
            events[0].kv.value,
            b(&pod("Pending")),
            "watch events are decoded"
        );
        let (result, events) = m.apply(&stored_put("/p", &pod("Running")));
        let CommandResult::Put(resp) = result else {
            panic!("put failed: {result:?}")
        };
        assert_eq!(resp.prev_kv.expect("prev").value, b(&pod("Pending")));
        assert_eq!(
            events[0].prev_kv.as_ref().expect("prev").value,
            b(&pod("Pending"))
        );
        assert_eq!(get(&m, "/p").expect("live").value, b(&pod("Running")));
        assert!(
            m.data_size() < 2 * pod("Running").len() as u64,
            "held compressed: {} bytes for two versions",
            m.data_size()
        );
        let keys_only = m
            .range(&RangeRequest {
                range: KeyRange::single(b("/p")),
                keys_only: true,
                ..Default::default()
            })
            .expect("range");
        assert!(keys_only.kvs[0].value.is_empty());
        let (since, _) = m
            .events_since(&KeyRange::prefix(b("/")), 0, 100)
            .expect("events");
        assert_eq!(since[1].kv.value, b(&pod("Running")));
        // Value compares see the value as written.
        let compare = |value: &str| Compare {
            range: KeyRange::single(b("/p")),
            result: CompareResult::Equal,
            target: CompareTarget::Value(b(value)),
        };
        let check = |m: &mut Mvcc, value: &str| {
            txn(
                m,
                TxnRequest {
                    compare: vec![compare(value)],
                    success: vec![],
                    failure: vec![],
                },
            )
            .0
            .succeeded
        };
        assert!(check(&mut m, &pod("Running")));
        assert!(!check(&mut m, &pod("Pending")));
        // A snapshot carries the stored form and restores it.
        let restored = Mvcc::from_snapshot(&m.to_snapshot().expect("encodes")).expect("decodes");
        assert_eq!(restored.hash(), m.hash());
        assert_eq!(
            get(&restored, "/p").expect("live").value,
            b(&pod("Running"))
        );
        // A put whose stored value does not decode fails on every member alike and writes nothing.
        let mut corrupt = stored_put("/p", &pod("Failed"));
        if let Command::Put(p) = &mut corrupt {
            p.value = p.value.slice(..p.value.len() - 5);
        }
        let err = expect_error(&mut m, corrupt);
        assert!(matches!(err, StoreError::InvalidRequest { .. }), "{err:?}");
        assert_eq!(get(&m, "/p").expect("live").value, b(&pod("Running")));
    }
}
