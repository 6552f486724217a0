//! The pure multi-version key-value state machine that committed raft entries are applied to.
//!
//! It follows etcd v3's mvcc semantics: the empty store is at revision 1; every command that
//! changes something adds exactly one revision, shared by all of its writes; each key keeps its
//! versions (tombstones included) so reads at past revisions work; a revision-ordered change log
//! lets watchers catch up from any retained revision; compaction drops what lies below a revision.
//!
//! Memory: value bytes are held once, by the key's version list. The change log names only the
//! keys written at each revision (sharing the index's key allocation) and events are rebuilt from
//! the version lists on demand, so a snapshot also carries each value once.
//!
//! This file holds the state, reads and the writes every command is made of; `txn` the
//! transactions, `lease` the leases, `history` compaction, the watchers' change log and hashes,
//! and `snapshot` the snapshot view and its encoding.

use imbl::{OrdMap, OrdSet};
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io::Write;
use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::types::{
    stored_values, Command, CommandResult, CompactResponse, Compare, CompareResult, CompareTarget,
    DeleteRangeRequest, DeleteRangeResponse, Event, EventKind, KeyRange, KeyValue,
    LeaseGrantRequest, LeaseGrantResponse, LeaseId, LeaseKeepAliveResponse, LeaseRevokeResponse,
    PutRequest, PutResponse, RangeRequest, RangeResponse, RequestOp, ResponseHeader, ResponseOp,
    Revision, StoreError, TxnRequest, TxnResponse,
};

#[cfg(test)]
mod fixtures;
mod history;
mod lease;
mod snapshot;
mod txn;

pub use snapshot::MvccView;

/// Snapshot encoding and decoding failures.
#[derive(Debug, thiserror::Error)]
pub enum MvccError {
    #[error("encoding the store snapshot failed")]
    Encode(#[source] bincode::error::EncodeError),
    #[error("decoding the store snapshot failed")]
    Decode(#[source] bincode::error::DecodeError),
    #[error("store snapshot has {trailing} unexpected trailing bytes")]
    TrailingBytes { trailing: usize },
}

/// One stored version of a key. The key itself is held once, by the index map.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Version {
    value: Bytes,
    create_revision: Revision,
    mod_revision: Revision,
    /// 0 marks a tombstone: the key was deleted at `mod_revision` (etcd's generation end).
    version: i64,
    lease: LeaseId,
}

impl Version {
    fn is_tombstone(&self) -> bool {
        self.version == 0
    }

    /// The value as the client wrote it. Every stored value was checked when it was applied
    /// (`check_put`), so decoding fails only on a corrupt state; that is logged and the stored
    /// bytes are returned rather than taking the member down.
    fn client_value(&self, key: &Bytes) -> Bytes {
        match stored_values::decode(&self.value) {
            Ok(value) => value,
            Err(e) => {
                tracing::error!(key = %String::from_utf8_lossy(key), revision = self.mod_revision, error = %e, "cannot decode a stored value");
                self.value.clone()
            }
        }
    }

    /// The version as clients see it. A tombstone becomes etcd's delete-event shape: empty value,
    /// create revision, version and lease 0, `mod_revision` = the delete's revision. The value is
    /// decoded from its stored form (`types::stored_values`).
    fn to_kv(&self, key: &Bytes) -> KeyValue {
        KeyValue {
            value: self.client_value(key),
            ..self.to_kv_without_value(key)
        }
    }

    /// [`to_kv`](Self::to_kv) with an empty value (a keys-only read decodes nothing).
    fn to_kv_without_value(&self, key: &Bytes) -> KeyValue {
        KeyValue {
            key: key.clone(),
            value: Bytes::new(),
            create_revision: self.create_revision,
            mod_revision: self.mod_revision,
            version: self.version,
            lease: self.lease,
        }
    }
}

/// Index into `versions` (sorted by `mod_revision`) of the latest version at or before `rev`.
fn index_at(versions: &[Version], rev: Revision) -> Option<usize> {
    versions
        .partition_point(|v| v.mod_revision <= rev)
        .checked_sub(1)
}

/// The key's live version at `rev`, if it existed then.
fn live_at(versions: &[Version], rev: Revision) -> Option<&Version> {
    index_at(versions, rev)
        .map(|i| &versions[i])
        .filter(|v| !v.is_tombstone())
}

/// The watch event for `versions[i]`; `prev_kv` is the version it replaced, if that was live.
fn event_for(key: &Bytes, versions: &[Version], i: usize) -> Event {
    let v = &versions[i];
    let prev_kv = i
        .checked_sub(1)
        .map(|p| &versions[p])
        .filter(|p| !p.is_tombstone())
        .map(|p| p.to_kv(key));
    let kind = if v.is_tombstone() {
        EventKind::Delete
    } else {
        EventKind::Put
    };
    Event {
        kind,
        kv: v.to_kv(key),
        prev_kv,
    }
}

/// The BTreeMap bounds of a [`KeyRange`]; an inverted range becomes an empty one.
fn bounds(range: &KeyRange) -> (Bound<&[u8]>, Bound<&[u8]>) {
    let key = &range.key[..];
    let end = &range.range_end[..];
    if end.is_empty() {
        (Bound::Included(key), Bound::Included(key))
    } else if end == [0] {
        (Bound::Included(key), Bound::Unbounded)
    } else if end <= key {
        (Bound::Included(key), Bound::Excluded(key))
    } else {
        (Bound::Included(key), Bound::Excluded(end))
    }
}

fn invalid(reason: &str) -> StoreError {
    StoreError::InvalidRequest {
        reason: reason.to_string(),
    }
}

/// etcd rejects an empty key. A range from the empty key (`range_end` set) is accepted here, so that
/// `KeyRange::prefix("")` means "every key".
fn check_key(range: &KeyRange) -> Result<(), StoreError> {
    if range.key.is_empty() && range.range_end.is_empty() {
        return Err(invalid("key is not provided"));
    }
    Ok(())
}

/// The keys written at one revision, in write order; their events are rebuilt from the versions.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct RevisionChanges {
    revision: Revision,
    keys: Vec<Bytes>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Lease {
    /// Granted TTL in seconds; deadlines are the member driver's business (no clocks here).
    ttl: i64,
    /// Live keys attached to the lease; a persistent set, so a snapshot view's copy is O(1).
    keys: OrdSet<Bytes>,
}

/// The writes of one command in flight, all at `revision` (the current revision + 1). Reads inside
/// a transaction read at `revision` and so see the transaction's earlier writes.
struct WriteBatch {
    revision: Revision,
    keys: Vec<Bytes>,
    events: Vec<Event>,
}

impl WriteBatch {
    fn record(&mut self, key: Bytes, event: Event) {
        self.keys.push(key);
        self.events.push(event);
    }
}
/// etcd's multi-version key-value store, as a pure state machine.
///
/// Version lists and change-log entries sit behind `Arc`s so that [`Mvcc::snapshot_view`] can take
/// a point-in-time copy by cloning pointers; a write to a key whose list a view still holds copies
/// that one list first (`Arc::make_mut`).
#[derive(Debug)]
pub struct Mvcc {
    revision: Revision,
    /// Reads and watches below this revision answer [`StoreError::Compacted`]; 0 = never compacted.
    compact_revision: Revision,
    /// Per key, its retained versions in revision order (tombstones included). A persistent
    /// B-tree: cloning it for a snapshot view is O(1), and a write while a view holds the old
    /// tree copies only the nodes on its path.
    keys: OrdMap<Bytes, Arc<Vec<Version>>>,
    /// One entry per revision with changes, oldest first, from the compact revision on.
    history: VecDeque<Arc<RevisionChanges>>,
    leases: BTreeMap<LeaseId, Lease>,
    /// Granted ids are never reused, so a stale keep-alive cannot renew someone else's lease.
    next_lease_id: LeaseId,
    live_keys: u64,
    data_size: u64,
}

impl Default for Mvcc {
    fn default() -> Self {
        Self::new()
    }
}

impl Mvcc {
    pub fn new() -> Self {
        Mvcc {
            revision: 1,
            compact_revision: 0,
            keys: OrdMap::new(),
            history: VecDeque::new(),
            leases: BTreeMap::new(),
            next_lease_id: 1,
            live_keys: 0,
            data_size: 0,
        }
    }

    pub fn current_revision(&self) -> Revision {
        self.revision
    }

    /// The revision of the last compaction; 0 if there was none.
    pub fn compact_revision(&self) -> Revision {
        self.compact_revision
    }

    /// Approximate bytes of keys and values across every retained version.
    pub fn data_size(&self) -> u64 {
        self.data_size
    }

    /// Number of live keys at the current revision.
    pub fn key_count(&self) -> u64 {
        self.live_keys
    }

    /// Every lease with its granted TTL in seconds, so the member driver can track deadlines.
    pub fn leases(&self) -> Vec<(LeaseId, i64)> {
        self.leases
            .iter()
            .map(|(id, lease)| (*id, lease.ttl))
            .collect()
    }

    /// The TTL in seconds lease `id` was granted with, if it exists.
    pub fn lease_granted_ttl(&self, id: LeaseId) -> Option<i64> {
        self.leases.get(&id).map(|lease| lease.ttl)
    }

    /// The live keys attached to lease `id`, in key order (none for an unknown lease).
    pub fn lease_keys(&self, id: LeaseId) -> Vec<Bytes> {
        self.leases
            .get(&id)
            .map(|lease| lease.keys.iter().cloned().collect())
            .unwrap_or_default()
    }
    fn header(&self) -> ResponseHeader {
        ResponseHeader {
            revision: self.revision,
            ..ResponseHeader::default()
        }
    }

    /// The header of an op inside a transaction: the revision its effects are visible at so far.
    fn batch_header(&self, batch: &WriteBatch) -> ResponseHeader {
        let revision = if batch.events.is_empty() {
            self.revision
        } else {
            batch.revision
        };
        ResponseHeader {
            revision,
            ..ResponseHeader::default()
        }
    }

    /// Reads a key or range at `req.revision` (0 = current).
    pub fn range(&self, req: &RangeRequest) -> Result<RangeResponse, StoreError> {
        self.check_range(req)?;
        let rev = if req.revision > 0 {
            req.revision
        } else {
            self.revision
        };
        let mut resp = self.range_at(req, rev);
        resp.header = self.header();
        Ok(resp)
    }

    fn check_range(&self, req: &RangeRequest) -> Result<(), StoreError> {
        check_key(&req.range)?;
        if req.revision > self.revision {
            return Err(StoreError::FutureRevision {
                requested: req.revision,
                current: self.revision,
            });
        }
        // etcd: a negative revision reads the current one; a read at the compact revision is fine.
        if req.revision > 0 && req.revision < self.compact_revision {
            return Err(StoreError::Compacted {
                requested: req.revision,
                compact_revision: self.compact_revision,
            });
        }
        Ok(())
    }

    /// The range at `rev`, which the caller has checked against the compact revision.
    fn range_at(&self, req: &RangeRequest, rev: Revision) -> RangeResponse {
        let limit = usize::try_from(req.limit).ok().filter(|l| *l > 0);
        let mut kvs = Vec::new();
        let mut count: i64 = 0;
        for (key, versions) in self.keys.range::<_, [u8]>(bounds(&req.range)) {
            let Some(v) = live_at(versions, rev) else {
                continue;
            };
            count += 1;
            if req.count_only || limit.is_some_and(|l| kvs.len() >= l) {
                continue;
            }
            kvs.push(if req.keys_only {
                v.to_kv_without_value(key)
            } else {
                v.to_kv(key)
            });
        }
        let more = !req.count_only && (kvs.len() as i64) < count;
        RangeResponse {
            header: ResponseHeader::default(),
            kvs,
            more,
            count,
        }
    }

    /// Applies one committed command. Returns its result and the events it caused, all at the new
    /// revision, in write order, each with `prev_kv` filled when the key had a live version.
    /// A failed command changes nothing.
    pub fn apply(&mut self, cmd: &Command) -> (CommandResult, Vec<Event>) {
        let mut batch = WriteBatch {
            revision: self.revision + 1,
            keys: Vec::new(),
            events: Vec::new(),
        };
        let result = match cmd {
            Command::Put(req) => self.apply_put(req, &mut batch).map(CommandResult::Put),
            Command::DeleteRange(req) => check_key(&req.range)
                .map(|()| CommandResult::DeleteRange(self.delete_range(req, &mut batch))),
            Command::Txn(req) => self.apply_txn_ops(req, &mut batch).map(CommandResult::Txn),
            Command::Compact(req) => self.compact(req.revision).map(CommandResult::Compact),
            Command::LeaseGrant(req) => self.lease_grant(req).map(CommandResult::LeaseGrant),
            Command::LeaseRevoke { id } | Command::LeaseExpire { id } => self
                .lease_revoke(*id, &mut batch)
                .map(CommandResult::LeaseRevoke),
            Command::LeaseKeepAlive { id } => match self.leases.get(id) {
                Some(lease) => Ok(CommandResult::LeaseKeepAlive(LeaseKeepAliveResponse {
                    header: ResponseHeader::default(),
                    id: *id,
                    ttl: lease.ttl,
                })),
                None => Err(StoreError::LeaseNotFound { id: *id }),
            },
            Command::Batch(txns) => {
                // Each transaction has a revision of its own and events of its own; a caller that
                // needs them apart (a member, whose watchers see one revision per response)
                // applies them with `apply_txn` one by one instead.
                let mut results = Vec::with_capacity(txns.len());
                let mut events = Vec::new();
                for txn in txns {
                    let (result, more) = self.apply_txn(txn);
                    results.push(result);
                    events.extend(more);
                }
                return (CommandResult::Batch(results), events);
            }
        };
        self.finish(result, batch)
    }

    /// Applies one transaction of a [`Command::Batch`] at a revision of its own, as
    /// [`apply`](Self::apply) would apply it alone.
    pub fn apply_txn(&mut self, req: &TxnRequest) -> (CommandResult, Vec<Event>) {
        let mut batch = WriteBatch {
            revision: self.revision + 1,
            keys: Vec::new(),
            events: Vec::new(),
        };
        let result = self.apply_txn_ops(req, &mut batch).map(CommandResult::Txn);
        self.finish(result, batch)
    }

    /// Commits a command's writes and stamps its result with the new revision's header.
    fn finish(
        &mut self,
        result: Result<CommandResult, StoreError>,
        batch: WriteBatch,
    ) -> (CommandResult, Vec<Event>) {
        let mut result = match result {
            Ok(result) => result,
            Err(err) => {
                debug_assert!(batch.events.is_empty(), "commands validate before writing");
                return (CommandResult::Error(err), Vec::new());
            }
        };
        let events = self.commit(batch);
        let header = self.header();
        match &mut result {
            CommandResult::Put(r) => r.header = header,
            CommandResult::DeleteRange(r) => r.header = header,
            CommandResult::Txn(r) => r.header = header,
            CommandResult::Compact(r) => r.header = header,
            CommandResult::LeaseGrant(r) => r.header = header,
            CommandResult::LeaseRevoke(r) => r.header = header,
            CommandResult::LeaseKeepAlive(r) => r.header = header,
            CommandResult::Error(_) | CommandResult::Batch(_) => {}
        }
        (result, events)
    }

    /// Makes the batch's writes the current revision, if there were any.
    fn commit(&mut self, batch: WriteBatch) -> Vec<Event> {
        if batch.events.is_empty() {
            return batch.events;
        }
        self.revision = batch.revision;
        self.history.push_back(Arc::new(RevisionChanges {
            revision: batch.revision,
            keys: batch.keys,
        }));
        batch.events
    }

    fn check_put(&self, req: &PutRequest) -> Result<(), StoreError> {
        if req.key.is_empty() {
            return Err(invalid("key is not provided"));
        }
        if req.lease != 0 && !self.leases.contains_key(&req.lease) {
            return Err(StoreError::LeaseNotFound { id: req.lease });
        }
        // The proposer encoded the value; a value that does not decode fails the command on every
        // member alike rather than being stored.
        stored_values::decode(&req.value)?;
        Ok(())
    }

    fn apply_put(
        &mut self,
        req: &PutRequest,
        batch: &mut WriteBatch,
    ) -> Result<PutResponse, StoreError> {
        self.check_put(req)?;
        let prev = self.put_key(batch, &req.key, &req.value, req.lease);
        Ok(PutResponse {
            header: ResponseHeader::default(),
            prev_kv: prev.filter(|_| req.prev_kv),
        })
    }

    /// Writes a new version of `key`; returns the version it replaced, if that was live.
    fn put_key(
        &mut self,
        batch: &mut WriteBatch,
        key: &Bytes,
        value: &Bytes,
        lease: LeaseId,
    ) -> Option<KeyValue> {
        let rev = batch.revision;
        let entry = self.keys.entry(key.clone());
        // The index's own allocation, so the change log and lease sets share it.
        let key = entry.key().clone();
        let versions = Arc::make_mut(entry.or_default());
        debug_assert!(
            versions.last().is_none_or(|v| v.mod_revision < rev),
            "one write per key per revision"
        );
        let prev = versions.last().filter(|v| !v.is_tombstone()).cloned();
        let (create_revision, version) = match &prev {
            Some(p) => (p.create_revision, p.version + 1),
            None => (rev, 1),
        };
        let new = Version {
            value: value.clone(),
            create_revision,
            mod_revision: rev,
            version,
            lease,
        };
        let kv = new.to_kv(&key);
        // Exactly one more slot: most keys hold one or two versions between compactions, and
        // `push`'s first allocation would be four (a 64-byte `Version` each) — ~200 bytes idle
        // per key, five keys per pod with its Events.
        versions.reserve_exact(1);
        versions.push(new);
        self.data_size += (key.len() + value.len()) as u64;
        if prev.is_none() {
            self.live_keys += 1;
        }
        let prev_lease = prev.as_ref().map_or(0, |p| p.lease);
        if prev_lease != lease {
            self.detach_lease(prev_lease, &key);
            if let Some(l) = self.leases.get_mut(&lease) {
                l.keys.insert(key.clone());
            }
        }
        let prev_kv = prev.map(|p| p.to_kv(&key));
        batch.record(
            key,
            Event {
                kind: EventKind::Put,
                kv,
                prev_kv: prev_kv.clone(),
            },
        );
        prev_kv
    }

    fn detach_lease(&mut self, lease: LeaseId, key: &[u8]) {
        if lease == 0 {
            return;
        }
        if let Some(l) = self.leases.get_mut(&lease) {
            l.keys.remove(key);
        }
    }

    /// Deletes `key` (an index key) if it is live; returns the deleted version.
    fn delete_key(&mut self, batch: &mut WriteBatch, key: &Bytes) -> Option<KeyValue> {
        let versions = self.keys.get_mut(&key[..])?;
        let prev = versions.last().filter(|v| !v.is_tombstone())?.clone();
        let versions = Arc::make_mut(versions);
        let tombstone = Version {
            value: Bytes::new(),
            create_revision: 0,
            mod_revision: batch.revision,
            version: 0,
            lease: 0,
        };
        let kv = tombstone.to_kv(key);
        versions.push(tombstone);
        self.data_size += key.len() as u64;
        self.live_keys -= 1;
        self.detach_lease(prev.lease, key);
        let prev_kv = prev.to_kv(key);
        batch.record(
            key.clone(),
            Event {
                kind: EventKind::Delete,
                kv,
                prev_kv: Some(prev_kv.clone()),
            },
        );
        Some(prev_kv)
    }

    /// Deletes every live key in the range (seeing the batch's earlier writes).
    fn delete_range(
        &mut self,
        req: &DeleteRangeRequest,
        batch: &mut WriteBatch,
    ) -> DeleteRangeResponse {
        let targets: Vec<Bytes> = self
            .keys
            .range::<_, [u8]>(bounds(&req.range))
            .filter(|(_, versions)| versions.last().is_some_and(|v| !v.is_tombstone()))
            .map(|(key, _)| key.clone())
            .collect();
        let mut prev_kvs = Vec::new();
        for key in &targets {
            if let Some(prev) = self.delete_key(batch, key) {
                if req.prev_kv {
                    prev_kvs.push(prev);
                }
            }
        }
        DeleteRangeResponse {
            header: ResponseHeader::default(),
            deleted: targets.len() as i64,
            prev_kvs,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mvcc::fixtures::*;

    #[test]
    fn version_lists_hold_no_idle_slots() {
        let mut m = Mvcc::new();
        put(&mut m, "a", "1");
        assert_eq!(m.keys[&b"a"[..]].capacity(), 1);
        put(&mut m, "a", "2");
        assert_eq!(m.keys[&b"a"[..]].capacity(), 2);
    }

    #[test]
    fn revisions_and_versions_through_put_put_delete_put() {
        let mut m = Mvcc::new();
        assert_eq!(m.current_revision(), 1);

        let (r, events) = put(&mut m, "a", "1");
        assert_eq!(r.header.revision, 2);
        assert_eq!(r.prev_kv, None);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].kind, EventKind::Put);
        let kv = get(&m, "a").unwrap();
        assert_eq!((kv.create_revision, kv.mod_revision, kv.version), (2, 2, 1));

        let (r, events) = put(&mut m, "a", "2");
        assert_eq!(r.header.revision, 3);
        assert_eq!(r.prev_kv.as_ref().unwrap().value, b("1"));
        assert_eq!(events[0].prev_kv.as_ref().unwrap().mod_revision, 2);
        let kv = get(&m, "a").unwrap();
        assert_eq!(
            (kv.create_revision, kv.mod_revision, kv.version, kv.value),
            (2, 3, 2, b("2"))
        );

        let (r, events) = delete(&mut m, KeyRange::single(b("a")));
        assert_eq!((r.header.revision, r.deleted), (4, 1));
        assert_eq!(r.prev_kvs[0].value, b("2"));
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].kind, EventKind::Delete);
        assert_eq!(
            events[0].kv,
            KeyValue {
                key: b("a"),
                value: Bytes::new(),
                create_revision: 0,
                mod_revision: 4,
                version: 0,
                lease: 0
            }
        );
        assert_eq!(events[0].prev_kv.as_ref().unwrap().version, 2);
        assert_eq!(get(&m, "a"), None);
        assert_eq!(m.key_count(), 0);

        let (r, _) = put(&mut m, "a", "3");
        assert_eq!(r.header.revision, 5);
        assert_eq!(r.prev_kv, None);
        let kv = get(&m, "a").unwrap();
        assert_eq!((kv.create_revision, kv.mod_revision, kv.version), (5, 5, 1));
        assert_eq!(m.key_count(), 1);
    }

    #[test]
    fn range_at_past_revisions() {
        let mut m = Mvcc::new();
        put(&mut m, "a", "1"); // 2
        put(&mut m, "b", "1"); // 3
        put(&mut m, "a", "2"); // 4
        delete(&mut m, KeyRange::single(b("b"))); // 5
        assert_eq!(get_at(&m, "a", 1).unwrap(), None);
        assert_eq!(get_at(&m, "a", 3).unwrap().unwrap().value, b("1"));
        assert_eq!(get_at(&m, "a", 4).unwrap().unwrap().value, b("2"));
        assert_eq!(get_at(&m, "b", 4).unwrap().unwrap().value, b("1"));
        assert_eq!(get_at(&m, "b", 5).unwrap(), None);
        let all = RangeRequest {
            range: KeyRange::prefix(b("")),
            revision: 3,
            ..RangeRequest::default()
        };
        let r = m.range(&all).unwrap();
        assert_eq!(keys_of(&r.kvs), vec![&b"a"[..], b"b"]);
        assert_eq!(r.header.revision, 5);
        assert_eq!(
            get_at(&m, "a", 6),
            Err(StoreError::FutureRevision {
                requested: 6,
                current: 5
            })
        );
    }

    #[test]
    fn limit_count_only_keys_only_and_range_ends() {
        let mut m = Mvcc::new();
        for k in ["/p/c", "/p/a", "/p/b", "/q", "/o"] {
            put(&mut m, k, "value");
        }
        let prefix = RangeRequest {
            range: KeyRange::prefix(b("/p/")),
            ..RangeRequest::default()
        };
        let r = m.range(&prefix).unwrap();
        assert_eq!(keys_of(&r.kvs), vec![&b"/p/a"[..], b"/p/b", b"/p/c"]);
        assert_eq!((r.count, r.more), (3, false));

        let r = m
            .range(&RangeRequest {
                limit: 2,
                ..prefix.clone()
            })
            .unwrap();
        assert_eq!(keys_of(&r.kvs), vec![&b"/p/a"[..], b"/p/b"]);
        assert_eq!((r.count, r.more), (3, true));

        let r = m
            .range(&RangeRequest {
                limit: 3,
                ..prefix.clone()
            })
            .unwrap();
        assert_eq!((r.kvs.len(), r.count, r.more), (3, 3, false));

        let r = m
            .range(&RangeRequest {
                count_only: true,
                ..prefix.clone()
            })
            .unwrap();
        assert!(r.kvs.is_empty());
        assert_eq!((r.count, r.more), (3, false));

        let r = m
            .range(&RangeRequest {
                keys_only: true,
                ..prefix.clone()
            })
            .unwrap();
        assert!(r
            .kvs
            .iter()
            .all(|kv| kv.value.is_empty() && kv.mod_revision > 0));

        let from_p = KeyRange {
            key: b("/p/b"),
            range_end: Bytes::from_static(&[0]),
        };
        let r = m
            .range(&RangeRequest {
                range: from_p,
                ..RangeRequest::default()
            })
            .unwrap();
        assert_eq!(keys_of(&r.kvs), vec![&b"/p/b"[..], b"/p/c", b"/q"]);

        let half_open = KeyRange {
            key: b("/o"),
            range_end: b("/p/b"),
        };
        let r = m
            .range(&RangeRequest {
                range: half_open,
                ..RangeRequest::default()
            })
            .unwrap();
        assert_eq!(keys_of(&r.kvs), vec![&b"/o"[..], b"/p/a"]);

        let inverted = KeyRange {
            key: b("/q"),
            range_end: b("/a"),
        };
        assert_eq!(
            m.range(&RangeRequest {
                range: inverted,
                ..RangeRequest::default()
            })
            .unwrap()
            .count,
            0
        );

        let empty = RangeRequest {
            range: KeyRange::single(Bytes::new()),
            ..RangeRequest::default()
        };
        assert!(matches!(
            m.range(&empty),
            Err(StoreError::InvalidRequest { .. })
        ));
    }

    #[test]
    fn deleting_nothing_does_not_bump_the_revision() {
        let mut m = Mvcc::new();
        put(&mut m, "a", "1");
        let (r, events) = delete(&mut m, KeyRange::prefix(b("zz")));
        assert_eq!((r.deleted, r.header.revision), (0, 2));
        assert!(events.is_empty());
        assert_eq!(m.current_revision(), 2);
    }

    #[test]
    fn delete_range_deletes_at_one_revision() {
        let mut m = Mvcc::new();
        for k in ["/p/a", "/p/b", "/q"] {
            put(&mut m, k, "v");
        }
        let (r, events) = delete(&mut m, KeyRange::prefix(b("/p/")));
        assert_eq!((r.deleted, r.header.revision), (2, 5));
        assert_eq!(events.len(), 2);
        assert!(events
            .iter()
            .all(|e| e.kind == EventKind::Delete && e.kv.mod_revision == 5));
        assert_eq!(m.key_count(), 1);
    }
}
