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

/// Which branch each (nested) transaction takes. As in etcd, every compare, nested ones included,
/// is evaluated against the state before the transaction's first write.
struct TxnPlan {
    succeeded: bool,
    /// Plans of the `Txn` ops of the chosen branch, in order.
    nested: Vec<TxnPlan>,
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

    fn apply_txn_ops(
        &mut self,
        req: &TxnRequest,
        batch: &mut WriteBatch,
    ) -> Result<TxnResponse, StoreError> {
        check_txn_shape(req)?;
        check_intervals(&req.success)?;
        check_intervals(&req.failure)?;
        let plan = self.plan_txn(req);
        self.check_txn_ops(req, &plan)?;
        Ok(self.exec_txn(req, &plan, batch))
    }

    fn plan_txn(&self, req: &TxnRequest) -> TxnPlan {
        let succeeded = req.compare.iter().all(|c| self.compare_holds(c));
        let branch = if succeeded {
            &req.success
        } else {
            &req.failure
        };
        let nested = branch
            .iter()
            .filter_map(|op| match op {
                RequestOp::Txn(txn) => Some(self.plan_txn(txn)),
                _ => None,
            })
            .collect();
        TxnPlan { succeeded, nested }
    }

    /// Checks the ops that will run against the state (leases, read revisions), so that the
    /// execution itself cannot fail halfway.
    fn check_txn_ops(&self, req: &TxnRequest, plan: &TxnPlan) -> Result<(), StoreError> {
        let branch = if plan.succeeded {
            &req.success
        } else {
            &req.failure
        };
        let mut nested = plan.nested.iter();
        for op in branch {
            match op {
                RequestOp::Range(r) => self.check_range(r)?,
                RequestOp::Put(p) => self.check_put(p)?,
                RequestOp::DeleteRange(_) => {}
                RequestOp::Txn(txn) => {
                    let plan = nested
                        .next()
                        .expect("a plan for every nested txn of the chosen branch");
                    self.check_txn_ops(txn, plan)?;
                }
            }
        }
        Ok(())
    }

    fn exec_txn(
        &mut self,
        req: &TxnRequest,
        plan: &TxnPlan,
        batch: &mut WriteBatch,
    ) -> TxnResponse {
        let branch = if plan.succeeded {
            &req.success
        } else {
            &req.failure
        };
        let mut nested = plan.nested.iter();
        let mut responses = Vec::with_capacity(branch.len());
        for op in branch {
            let response = match op {
                RequestOp::Range(r) => {
                    let rev = if r.revision > 0 {
                        r.revision
                    } else {
                        batch.revision
                    };
                    let mut resp = self.range_at(r, rev);
                    resp.header = self.batch_header(batch);
                    ResponseOp::Range(resp)
                }
                RequestOp::Put(p) => {
                    let prev = self.put_key(batch, &p.key, &p.value, p.lease);
                    let header = self.batch_header(batch);
                    ResponseOp::Put(PutResponse {
                        header,
                        prev_kv: prev.filter(|_| p.prev_kv),
                    })
                }
                RequestOp::DeleteRange(d) => {
                    let mut resp = self.delete_range(d, batch);
                    resp.header = self.batch_header(batch);
                    ResponseOp::DeleteRange(resp)
                }
                RequestOp::Txn(txn) => {
                    let plan = nested
                        .next()
                        .expect("a plan for every nested txn of the chosen branch");
                    let mut resp = self.exec_txn(txn, plan, batch);
                    resp.header = self.batch_header(batch);
                    ResponseOp::Txn(resp)
                }
            };
            responses.push(response);
        }
        TxnResponse {
            header: self.batch_header(batch),
            succeeded: plan.succeeded,
            responses,
        }
    }

    /// etcd's `applyCompare`: every key of the range must satisfy the compare; a missing key
    /// compares as all zeros, except that a value compare on no key at all always fails.
    fn compare_holds(&self, c: &Compare) -> bool {
        let mut any = false;
        for (_, versions) in self.keys.range::<_, [u8]>(bounds(&c.range)) {
            let Some(v) = live_at(versions, self.revision) else {
                continue;
            };
            any = true;
            if !compare_version(Some(v), c) {
                return false;
            }
        }
        if any {
            return true;
        }
        !matches!(c.target, CompareTarget::Value(_)) && compare_version(None, c)
    }

    fn compact(&mut self, rev: Revision) -> Result<CompactResponse, StoreError> {
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

    fn lease_grant(&mut self, req: &LeaseGrantRequest) -> Result<LeaseGrantResponse, StoreError> {
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
    fn lease_revoke(
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

fn compare_version(v: Option<&Version>, c: &Compare) -> bool {
    let ord = match &c.target {
        CompareTarget::Version(t) => v.map_or(0, |v| v.version).cmp(t),
        CompareTarget::CreateRevision(t) => v.map_or(0, |v| v.create_revision).cmp(t),
        CompareTarget::ModRevision(t) => v.map_or(0, |v| v.mod_revision).cmp(t),
        CompareTarget::Value(t) => {
            let value = v.map_or_else(Bytes::new, |v| v.client_value(&c.range.key));
            value[..].cmp(&t[..])
        }
        CompareTarget::Lease(t) => v.map_or(0, |v| v.lease).cmp(t),
    };
    match c.result {
        CompareResult::Equal => ord == Ordering::Equal,
        CompareResult::NotEqual => ord != Ordering::Equal,
        CompareResult::Greater => ord == Ordering::Greater,
        CompareResult::Less => ord == Ordering::Less,
    }
}

/// Request-shape checks etcd makes before a txn reaches raft: keys present, recursively.
fn check_txn_shape(req: &TxnRequest) -> Result<(), StoreError> {
    for c in &req.compare {
        check_key(&c.range)?;
    }
    for op in req.success.iter().chain(&req.failure) {
        match op {
            RequestOp::Range(r) => check_key(&r.range)?,
            RequestOp::Put(p) if p.key.is_empty() => return Err(invalid("key is not provided")),
            RequestOp::Put(_) => {}
            RequestOp::DeleteRange(d) => check_key(&d.range)?,
            RequestOp::Txn(txn) => check_txn_shape(txn)?,
        }
    }
    Ok(())
}

/// etcd's `checkIntervals`: within one branch (nested txns included) no key may be put twice or
/// be both put and deleted, so each key changes at most once per revision. The two branches of a
/// nested txn may put the same key, as only one of them runs. Returns the branch's puts and
/// deletes.
fn check_intervals(ops: &[RequestOp]) -> Result<(BTreeSet<Bytes>, Vec<KeyRange>), StoreError> {
    let duplicate = || invalid("duplicate key given in txn request");
    let mut dels: Vec<KeyRange> = ops
        .iter()
        .filter_map(|op| {
            if let RequestOp::DeleteRange(d) = op {
                Some(d.range.clone())
            } else {
                None
            }
        })
        .collect();
    let deleted = |dels: &[KeyRange], key: &[u8]| dels.iter().any(|d| d.contains(key));
    let mut puts = BTreeSet::new();
    for op in ops {
        let RequestOp::Txn(txn) = op else { continue };
        let (puts_then, dels_then) = check_intervals(&txn.success)?;
        let (puts_else, dels_else) = check_intervals(&txn.failure)?;
        for key in &puts_then {
            if puts.contains(key) || deleted(&dels, key) {
                return Err(duplicate());
            }
            puts.insert(key.clone());
        }
        for key in &puts_else {
            if (puts.contains(key) && !puts_then.contains(key)) || deleted(&dels, key) {
                return Err(duplicate());
            }
            puts.insert(key.clone());
        }
        dels.extend(dels_then);
        dels.extend(dels_else);
    }
    for op in ops {
        let RequestOp::Put(p) = op else { continue };
        if puts.contains(&p.key) || deleted(&dels, &p.key) {
            return Err(duplicate());
        }
        puts.insert(p.key.clone());
    }
    Ok((puts, dels))
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
    use crate::types::CompactRequest;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    fn put_req(key: &str, value: &str) -> PutRequest {
        PutRequest {
            key: b(key),
            value: b(value),
            lease: 0,
            prev_kv: true,
        }
    }

    fn put(m: &mut Mvcc, key: &str, value: &str) -> (PutResponse, Vec<Event>) {
        put_lease(m, key, value, 0)
    }

    fn put_lease(
        m: &mut Mvcc,
        key: &str,
        value: &str,
        lease: LeaseId,
    ) -> (PutResponse, Vec<Event>) {
        match m.apply(&Command::Put(PutRequest {
            lease,
            ..put_req(key, value)
        })) {
            (CommandResult::Put(r), events) => (r, events),
            other => panic!("put failed: {other:?}"),
        }
    }

    fn delete(m: &mut Mvcc, range: KeyRange) -> (DeleteRangeResponse, Vec<Event>) {
        match m.apply(&Command::DeleteRange(DeleteRangeRequest {
            range,
            prev_kv: true,
        })) {
            (CommandResult::DeleteRange(r), events) => (r, events),
            other => panic!("delete failed: {other:?}"),
        }
    }

    fn txn(m: &mut Mvcc, req: TxnRequest) -> (TxnResponse, Vec<Event>) {
        match m.apply(&Command::Txn(req)) {
            (CommandResult::Txn(r), events) => (r, events),
            other => panic!("txn failed: {other:?}"),
        }
    }

    fn expect_error(m: &mut Mvcc, cmd: Command) -> StoreError {
        let before = m.current_revision();
        match m.apply(&cmd) {
            (CommandResult::Error(e), events) => {
                assert!(events.is_empty());
                assert_eq!(m.current_revision(), before);
                e
            }
            other => panic!("expected an error, got {other:?}"),
        }
    }

    fn get_at(m: &Mvcc, key: &str, revision: Revision) -> Result<Option<KeyValue>, StoreError> {
        let req = RangeRequest {
            range: KeyRange::single(b(key)),
            revision,
            ..RangeRequest::default()
        };
        m.range(&req).map(|r| r.kvs.into_iter().next())
    }

    fn get(m: &Mvcc, key: &str) -> Option<KeyValue> {
        get_at(m, key, 0).unwrap()
    }

    fn mod_rev_cmp(key: &str, rev: Revision) -> Compare {
        Compare {
            range: KeyRange::single(b(key)),
            result: CompareResult::Equal,
            target: CompareTarget::ModRevision(rev),
        }
    }

    fn keys_of(kvs: &[KeyValue]) -> Vec<&[u8]> {
        kvs.iter().map(|kv| &kv.key[..]).collect()
    }

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
    fn kubernetes_create_and_update_transactions() {
        let mut m = Mvcc::new();
        let create = |value: &str| TxnRequest {
            compare: vec![mod_rev_cmp("/registry/pods/ns/p", 0)],
            success: vec![RequestOp::Put(put_req("/registry/pods/ns/p", value))],
            failure: vec![],
        };
        let (r, events) = txn(&mut m, create("v1"));
        assert!(r.succeeded);
        assert_eq!(r.header.revision, 2);
        assert_eq!(events.len(), 1);

        // A second create fails and changes nothing.
        let (r, events) = txn(&mut m, create("v1b"));
        assert!(!r.succeeded);
        assert!(events.is_empty());
        assert_eq!((r.header.revision, m.current_revision()), (2, 2));

        let update = |rv: Revision, value: &str| TxnRequest {
            compare: vec![mod_rev_cmp("/registry/pods/ns/p", rv)],
            success: vec![RequestOp::Put(put_req("/registry/pods/ns/p", value))],
            failure: vec![RequestOp::Range(RangeRequest {
                range: KeyRange::single(b("/registry/pods/ns/p")),
                ..RangeRequest::default()
            })],
        };
        let (r, _) = txn(&mut m, update(2, "v2"));
        assert!(r.succeeded);
        assert_eq!(r.header.revision, 3);
        let ResponseOp::Put(p) = &r.responses[0] else {
            panic!("{r:?}")
        };
        assert_eq!(p.prev_kv.as_ref().unwrap().value, b("v1"));

        // A stale update fails and returns the current object.
        let (r, events) = txn(&mut m, update(2, "v3"));
        assert!(!r.succeeded);
        assert!(events.is_empty());
        let ResponseOp::Range(g) = &r.responses[0] else {
            panic!("{r:?}")
        };
        assert_eq!(
            (g.kvs[0].value.clone(), g.kvs[0].mod_revision),
            (b("v2"), 3)
        );
        assert_eq!(m.current_revision(), 3);
    }

    #[test]
    fn txn_reads_its_own_writes_at_one_revision() {
        let mut m = Mvcc::new();
        put(&mut m, "x", "old"); // 2
        let (r, events) = txn(
            &mut m,
            TxnRequest {
                compare: vec![],
                success: vec![
                    RequestOp::Put(put_req("a", "1")),
                    RequestOp::DeleteRange(DeleteRangeRequest {
                        range: KeyRange::single(b("x")),
                        prev_kv: true,
                    }),
                    RequestOp::Range(RangeRequest {
                        range: KeyRange::prefix(b("")),
                        ..RangeRequest::default()
                    }),
                    RequestOp::Txn(TxnRequest {
                        compare: vec![],
                        success: vec![RequestOp::Put(put_req("b", "2"))],
                        failure: vec![],
                    }),
                ],
                failure: vec![],
            },
        );
        assert!(r.succeeded);
        assert_eq!(r.header.revision, 3);
        let ResponseOp::Range(g) = &r.responses[2] else {
            panic!("{r:?}")
        };
        assert_eq!(keys_of(&g.kvs), vec![&b"a"[..]]);
        assert_eq!(g.kvs[0].mod_revision, 3);
        assert_eq!(events.len(), 3);
        assert!(events.iter().all(|e| e.kv.mod_revision == 3));
        assert_eq!(
            events
                .iter()
                .map(|e| (e.kind, &e.kv.key[..]))
                .collect::<Vec<_>>(),
            vec![
                (EventKind::Put, &b"a"[..]),
                (EventKind::Delete, b"x"),
                (EventKind::Put, b"b")
            ]
        );
        assert_eq!(m.current_revision(), 3);

        // A read-only txn and a txn deleting nothing do not bump the revision.
        let (r, events) = txn(
            &mut m,
            TxnRequest {
                compare: vec![],
                success: vec![
                    RequestOp::Range(RangeRequest {
                        range: KeyRange::single(b("a")),
                        ..RangeRequest::default()
                    }),
                    RequestOp::DeleteRange(DeleteRangeRequest {
                        range: KeyRange::single(b("nope")),
                        prev_kv: false,
                    }),
                ],
                failure: vec![],
            },
        );
        assert!(events.is_empty());
        assert_eq!((r.header.revision, m.current_revision()), (3, 3));
    }

    #[test]
    fn a_batch_applies_each_transaction_at_its_own_revision_and_judges_each_alone() {
        let mut m = Mvcc::new();
        put(&mut m, "taken", "0");
        let base = m.current_revision();
        let create = |key: &str| TxnRequest {
            compare: vec![mod_rev_cmp(key, 0)],
            success: vec![RequestOp::Put(put_req(key, "v"))],
            failure: vec![],
        };
        let invalid = TxnRequest {
            compare: vec![],
            success: vec![
                RequestOp::Put(put_req("d", "1")),
                RequestOp::Put(put_req("d", "2")),
            ],
            failure: vec![],
        };
        let batch = Command::Batch(vec![create("a"), create("taken"), invalid, create("b")]);
        let (result, events) = m.apply(&batch);
        let CommandResult::Batch(results) = result else {
            panic!("a batch answers with a batch: {result:?}");
        };
        assert_eq!(results.len(), 4);
        // The first creates "a" at the next revision; the second finds "taken" and writes
        // nothing; the third is refused alone; the fourth creates "b" at the revision after.
        let revision = |r: &CommandResult| match r {
            CommandResult::Txn(t) => Some((t.succeeded, t.header.revision)),
            _ => None,
        };
        assert_eq!(revision(&results[0]), Some((true, base + 1)));
        assert_eq!(revision(&results[1]), Some((false, base + 1)));
        assert!(matches!(
            results[2],
            CommandResult::Error(StoreError::InvalidRequest { .. })
        ));
        assert_eq!(revision(&results[3]), Some((true, base + 2)));
        let revisions: Vec<(Bytes, Revision)> = events
            .iter()
            .map(|e| (e.kv.key.clone(), e.kv.mod_revision))
            .collect();
        assert_eq!(revisions, vec![(b("a"), base + 1), (b("b"), base + 2)]);
        assert_eq!(m.current_revision(), base + 2);
        assert!(get(&m, "d").is_none());
    }

    #[test]
    fn txn_rejects_duplicate_keys_and_unknown_leases() {
        let mut m = Mvcc::new();
        let dup = TxnRequest {
            compare: vec![],
            success: vec![
                RequestOp::Put(put_req("a", "1")),
                RequestOp::Put(put_req("a", "2")),
            ],
            failure: vec![],
        };
        assert!(matches!(
            expect_error(&mut m, Command::Txn(dup)),
            StoreError::InvalidRequest { .. }
        ));
        let put_in_delete = TxnRequest {
            compare: vec![],
            success: vec![],
            failure: vec![
                RequestOp::DeleteRange(DeleteRangeRequest {
                    range: KeyRange::prefix(b("a")),
                    prev_kv: false,
                }),
                RequestOp::Put(put_req("ab", "2")),
            ],
        };
        assert!(matches!(
            expect_error(&mut m, Command::Txn(put_in_delete)),
            StoreError::InvalidRequest { .. }
        ));
        // The two branches of a nested txn may put the same key.
        let nested_ok = TxnRequest {
            compare: vec![],
            success: vec![RequestOp::Txn(TxnRequest {
                compare: vec![],
                success: vec![RequestOp::Put(put_req("a", "1"))],
                failure: vec![RequestOp::Put(put_req("a", "2"))],
            })],
            failure: vec![],
        };
        let (r, events) = txn(&mut m, nested_ok);
        assert!(r.succeeded);
        assert_eq!(events.len(), 1);

        let bad_lease = TxnRequest {
            compare: vec![],
            success: vec![
                RequestOp::Put(put_req("b", "1")),
                RequestOp::Put(PutRequest {
                    lease: 9,
                    ..put_req("c", "1")
                }),
            ],
            failure: vec![],
        };
        assert_eq!(
            expect_error(&mut m, Command::Txn(bad_lease)),
            StoreError::LeaseNotFound { id: 9 }
        );
        assert_eq!(get(&m, "b"), None);
        assert_eq!(
            expect_error(
                &mut m,
                Command::Put(PutRequest {
                    lease: 9,
                    ..put_req("c", "1")
                })
            ),
            StoreError::LeaseNotFound { id: 9 }
        );
    }

    #[test]
    fn compare_semantics_on_missing_and_ranged_keys() {
        let mut m = Mvcc::new();
        put(&mut m, "/r/a", "x"); // 2
        put(&mut m, "/r/b", "y"); // 3
        let holds = |m: &Mvcc, range: KeyRange, result: CompareResult, target: CompareTarget| {
            m.compare_holds(&Compare {
                range,
                result,
                target,
            })
        };
        let missing = || KeyRange::single(b("/missing"));
        assert!(holds(
            &m,
            missing(),
            CompareResult::Equal,
            CompareTarget::Version(0)
        ));
        assert!(holds(
            &m,
            missing(),
            CompareResult::Equal,
            CompareTarget::CreateRevision(0)
        ));
        assert!(holds(
            &m,
            missing(),
            CompareResult::Equal,
            CompareTarget::ModRevision(0)
        ));
        assert!(holds(
            &m,
            missing(),
            CompareResult::Equal,
            CompareTarget::Lease(0)
        ));
        assert!(holds(
            &m,
            missing(),
            CompareResult::Less,
            CompareTarget::ModRevision(5)
        ));
        assert!(!holds(
            &m,
            missing(),
            CompareResult::Greater,
            CompareTarget::Version(0)
        ));
        // etcd: a value compare on a missing key always fails, whatever the operator.
        assert!(!holds(
            &m,
            missing(),
            CompareResult::Equal,
            CompareTarget::Value(Bytes::new())
        ));
        assert!(!holds(
            &m,
            missing(),
            CompareResult::NotEqual,
            CompareTarget::Value(b("z"))
        ));

        let single = || KeyRange::single(b("/r/a"));
        assert!(holds(
            &m,
            single(),
            CompareResult::Equal,
            CompareTarget::Value(b("x"))
        ));
        assert!(holds(
            &m,
            single(),
            CompareResult::NotEqual,
            CompareTarget::Value(b("y"))
        ));
        assert!(holds(
            &m,
            single(),
            CompareResult::Greater,
            CompareTarget::Value(b("w"))
        ));
        assert!(holds(
            &m,
            single(),
            CompareResult::Less,
            CompareTarget::Value(b("xa"))
        ));
        assert!(holds(
            &m,
            single(),
            CompareResult::Equal,
            CompareTarget::Version(1)
        ));
        assert!(holds(
            &m,
            single(),
            CompareResult::NotEqual,
            CompareTarget::ModRevision(3)
        ));

        // Over a range every key must satisfy the compare.
        let prefix = || KeyRange::prefix(b("/r/"));
        assert!(holds(
            &m,
            prefix(),
            CompareResult::Greater,
            CompareTarget::ModRevision(1)
        ));
        assert!(!holds(
            &m,
            prefix(),
            CompareResult::Equal,
            CompareTarget::ModRevision(2)
        ));
        assert!(holds(
            &m,
            prefix(),
            CompareResult::Equal,
            CompareTarget::Version(1)
        ));
        // An empty range compares like a missing key.
        assert!(holds(
            &m,
            KeyRange::prefix(b("/none/")),
            CompareResult::Equal,
            CompareTarget::Version(0)
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

    fn workload() -> Vec<Command> {
        let mut cmds = vec![Command::LeaseGrant(LeaseGrantRequest { ttl: 30, id: 0 })];
        for i in 0..20 {
            let lease = if i % 3 == 0 { 1 } else { 0 };
            cmds.push(Command::Put(PutRequest {
                key: b(&format!("/k/{:02}", i % 7)),
                value: b(&format!("v{i}")),
                lease,
                prev_kv: false,
            }));
        }
        cmds.push(Command::DeleteRange(DeleteRangeRequest {
            range: KeyRange::single(b("/k/03")),
            prev_kv: false,
        }));
        cmds.push(Command::Compact(CompactRequest { revision: 10 }));
        cmds.push(Command::Put(put_req("/z", "last")));
        cmds
    }

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
