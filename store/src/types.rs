//! The store's data model and wire protocol, following etcd v3's KV, Watch and Lease APIs.
//!
//! These types travel inside raft log entries (as [`Command`]) and over the client QUIC service (as
//! [`ClientRequest`] / [`ClientResponse`]), both encoded with bincode.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// A store revision. Starts at 1 for the empty store; every write or transaction that changes
/// something adds exactly one.
pub type Revision = i64;

/// A lease id; 0 means "no lease".
pub type LeaseId = i64;

/// One version of one key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyValue {
    pub key: Bytes,
    pub value: Bytes,
    /// Revision of the write that created the key (since its last delete).
    pub create_revision: Revision,
    /// Revision of the last write to the key.
    pub mod_revision: Revision,
    /// Number of writes since the key was (re)created; a delete resets it to 0.
    pub version: i64,
    pub lease: LeaseId,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EventKind {
    Put,
    Delete,
}

/// One change, as watchers see it. For a delete, `kv` carries the key and the delete's
/// revision as `mod_revision`, with an empty value (as etcd does).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub kind: EventKind,
    pub kv: KeyValue,
    pub prev_kv: Option<KeyValue>,
}

/// A key range: `key` alone, or `[key, range_end)`. An empty `range_end` means the single key;
/// `range_end == [0]` means "every key >= key" (etcd's convention).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRange {
    pub key: Bytes,
    pub range_end: Bytes,
}

impl KeyRange {
    pub fn single(key: impl Into<Bytes>) -> Self {
        KeyRange {
            key: key.into(),
            range_end: Bytes::new(),
        }
    }

    /// Every key starting with `prefix`.
    pub fn prefix(prefix: impl Into<Bytes>) -> Self {
        let key: Bytes = prefix.into();
        let range_end = prefix_end(&key);
        KeyRange { key, range_end }
    }

    pub fn is_single(&self) -> bool {
        self.range_end.is_empty()
    }

    pub fn contains(&self, k: &[u8]) -> bool {
        if self.range_end.is_empty() {
            return k == &self.key[..];
        }
        if k < &self.key[..] {
            return false;
        }
        self.range_end[..] == [0] || k < &self.range_end[..]
    }
}

/// The smallest key greater than every key that starts with `prefix` (etcd's `GetPrefixRangeEnd`).
pub fn prefix_end(prefix: &[u8]) -> Bytes {
    let mut end = prefix.to_vec();
    while let Some(last) = end.last_mut() {
        if *last < 0xff {
            *last += 1;
            return Bytes::from(end);
        }
        end.pop();
    }
    // Every byte was 0xff (or the prefix is empty): the range is unbounded.
    Bytes::from_static(&[0])
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RangeRequest {
    pub range: KeyRange,
    /// 0 = no limit.
    pub limit: i64,
    /// 0 = the current revision.
    pub revision: Revision,
    pub count_only: bool,
    pub keys_only: bool,
    /// Serve from the local state without a ReadIndex round (may be stale).
    pub serializable: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RangeResponse {
    pub header: ResponseHeader,
    pub kvs: Vec<KeyValue>,
    /// True when `limit` cut the result short.
    pub more: bool,
    /// Number of keys in the range at the revision, regardless of `limit`.
    pub count: i64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PutRequest {
    pub key: Bytes,
    pub value: Bytes,
    pub lease: LeaseId,
    pub prev_kv: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PutResponse {
    pub header: ResponseHeader,
    pub prev_kv: Option<KeyValue>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteRangeRequest {
    pub range: KeyRange,
    pub prev_kv: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteRangeResponse {
    pub header: ResponseHeader,
    pub deleted: i64,
    pub prev_kvs: Vec<KeyValue>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CompareResult {
    Equal,
    Greater,
    Less,
    NotEqual,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CompareTarget {
    Version(i64),
    CreateRevision(Revision),
    ModRevision(Revision),
    Value(Bytes),
    Lease(LeaseId),
}

/// A Txn guard. As in etcd, a missing key compares as version, create and mod revision 0 and lease
/// 0, and fails every value compare; for a range, every key in it must satisfy the compare.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compare {
    pub range: KeyRange,
    pub result: CompareResult,
    pub target: CompareTarget,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RequestOp {
    Range(RangeRequest),
    Put(PutRequest),
    DeleteRange(DeleteRangeRequest),
    Txn(TxnRequest),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResponseOp {
    Range(RangeResponse),
    Put(PutResponse),
    DeleteRange(DeleteRangeResponse),
    Txn(TxnResponse),
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnRequest {
    pub compare: Vec<Compare>,
    pub success: Vec<RequestOp>,
    pub failure: Vec<RequestOp>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnResponse {
    pub header: ResponseHeader,
    pub succeeded: bool,
    pub responses: Vec<ResponseOp>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactRequest {
    pub revision: Revision,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactResponse {
    pub header: ResponseHeader,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseGrantRequest {
    /// Seconds.
    pub ttl: i64,
    /// 0 = let the store choose.
    pub id: LeaseId,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseGrantResponse {
    pub header: ResponseHeader,
    pub id: LeaseId,
    pub ttl: i64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseRevokeResponse {
    pub header: ResponseHeader,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseKeepAliveResponse {
    pub header: ResponseHeader,
    pub id: LeaseId,
    pub ttl: i64,
}

/// Carried by every response: the store revision the answer reflects and who answered.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResponseHeader {
    pub revision: Revision,
    pub member_id: u64,
    pub raft_term: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchRequest {
    pub range: KeyRange,
    /// First revision to deliver; 0 = changes after the current revision.
    pub start_revision: Revision,
    pub prev_kv: bool,
    /// Seconds between progress notifications while idle; 0 = none.
    pub progress_notify_secs: u32,
}

/// One message on a watch stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WatchResponse {
    /// The watch is registered; events follow.
    Created { header: ResponseHeader },
    /// Events of one or more whole revisions, in revision order. A revision's events are never
    /// split across two messages.
    Events {
        header: ResponseHeader,
        events: Vec<Event>,
    },
    /// Nothing happened in the range up to `header.revision`.
    Progress { header: ResponseHeader },
    /// The watch ended; the stream closes after this. `compact_revision` is set when the start
    /// revision had been compacted; `resume_revision` says where to start again after a slow-watcher
    /// cancel.
    Canceled {
        header: ResponseHeader,
        reason: String,
        compact_revision: Revision,
        resume_revision: Revision,
    },
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusResponse {
    pub header: ResponseHeader,
    pub name: String,
    pub member_id: u64,
    pub leader_id: u64,
    pub leader_name: String,
    pub term: u64,
    pub raft_index: u64,
    pub applied_index: u64,
    pub commit_index: u64,
    pub revision: Revision,
    pub compact_revision: Revision,
    /// Bytes held by keys and values of every retained revision.
    pub data_size: u64,
    /// Bytes on disk under the member's data directory.
    pub disk_size: u64,
    pub keys: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HashResponse {
    pub header: ResponseHeader,
    /// Hash of every live key, value and revision triple at `header.revision`.
    pub hash: u64,
    pub compact_revision: Revision,
}

/// What the client service accepts.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum ClientRequest {
    Range(RangeRequest),
    Put(PutRequest),
    DeleteRange(DeleteRangeRequest),
    Txn(TxnRequest),
    Compact(CompactRequest),
    LeaseGrant(LeaseGrantRequest),
    LeaseRevoke {
        id: LeaseId,
    },
    LeaseKeepAlive {
        id: LeaseId,
    },
    Status,
    Hash,
    /// Server-streaming: answered by a sequence of [`WatchResponse`] frames.
    Watch(WatchRequest),
    /// The member's own key-space hash as of a revision it has applied (no barrier: each
    /// member answers for its own state), answered by [`ClientResponse::Hash`].
    HashAt {
        revision: Revision,
    },
}

/// The answer to every [`ClientRequest`] but `Watch`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum ClientResponse {
    Range(RangeResponse),
    Put(PutResponse),
    DeleteRange(DeleteRangeResponse),
    Txn(TxnResponse),
    Compact(CompactResponse),
    LeaseGrant(LeaseGrantResponse),
    LeaseRevoke(LeaseRevokeResponse),
    LeaseKeepAlive(LeaseKeepAliveResponse),
    Status(StatusResponse),
    Hash(HashResponse),
    /// One message of a watch stream.
    Watch(WatchResponse),
    Error(StoreError),
}

/// Errors a client can see. `NoLeader`, `Timeout` and `Unavailable` mean "try again, perhaps
/// elsewhere"; the others are final answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum StoreError {
    #[error(
        "required revision {requested} has been compacted (compact revision {compact_revision})"
    )]
    Compacted {
        requested: Revision,
        compact_revision: Revision,
    },
    #[error("required revision {requested} is a future revision (current {current})")]
    FutureRevision {
        requested: Revision,
        current: Revision,
    },
    #[error("lease {id} not found")]
    LeaseNotFound { id: LeaseId },
    #[error("no leader is known to member {member}; retry")]
    NoLeader {
        member: String,
        leader_hint: Option<String>,
    },
    #[error("request timed out; it may or may not have been applied")]
    Timeout,
    #[error("member unavailable: {reason}")]
    Unavailable { reason: String },
    #[error("invalid request: {reason}")]
    InvalidRequest { reason: String },
    #[error("request too large: {size} bytes (limit {limit})")]
    TooLarge { size: usize, limit: usize },
    #[error("identity {identity:?} may not use the store")]
    PermissionDenied { identity: String },
}

impl StoreError {
    /// True for errors after which the same request may succeed on a retry (here or elsewhere).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            StoreError::NoLeader { .. } | StoreError::Timeout | StoreError::Unavailable { .. }
        )
    }
}

/// A state-machine command: what a raft log entry carries.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Command {
    Put(PutRequest),
    DeleteRange(DeleteRangeRequest),
    Txn(TxnRequest),
    Compact(CompactRequest),
    LeaseGrant(LeaseGrantRequest),
    LeaseRevoke {
        id: LeaseId,
    },
    /// Proposed by the leader when it sees a lease run out.
    LeaseExpire {
        id: LeaseId,
    },
    /// Renews a lease; replicated so that whichever member leads next knows it was renewed.
    LeaseKeepAlive {
        id: LeaseId,
    },
}

/// The result of applying a [`Command`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum CommandResult {
    Put(PutResponse),
    DeleteRange(DeleteRangeResponse),
    Txn(TxnResponse),
    Compact(CompactResponse),
    LeaseGrant(LeaseGrantResponse),
    LeaseRevoke(LeaseRevokeResponse),
    LeaseKeepAlive(LeaseKeepAliveResponse),
    Error(StoreError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_increments_last_byte() {
        assert_eq!(&prefix_end(b"/registry/pods/")[..], b"/registry/pods0");
        assert_eq!(&prefix_end(b"a\xff")[..], b"b");
        assert_eq!(&prefix_end(b"\xff\xff")[..], &[0u8]);
    }

    #[test]
    fn key_range_contains() {
        let r = KeyRange::prefix(&b"/a/"[..]);
        assert!(r.contains(b"/a/x"));
        assert!(!r.contains(b"/b"));
        let all = KeyRange {
            key: Bytes::from_static(b"m"),
            range_end: Bytes::from_static(&[0]),
        };
        assert!(all.contains(b"zzz"));
        assert!(!all.contains(b"a"));
        assert!(KeyRange::single(&b"k"[..]).contains(b"k"));
        assert!(!KeyRange::single(&b"k"[..]).contains(b"k2"));
    }
}
