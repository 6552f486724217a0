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
    /// Decoded inside [`shared_values::decode`], a view into the raft entry it came in.
    #[serde(deserialize_with = "shared_values::value")]
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
    /// fdatasyncs of the raft log since the member started: one per `Ready` that had to be
    /// durable (new entries, a new term or vote, a snapshot).
    pub wal_syncs: u64,
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
    /// Several transactions in one call and one raft entry, applied one after the other, each
    /// at its own revision and judged on its own, as if sent one by one in this order; answered
    /// by [`ClientResponse::Batch`] with one `Txn` or `Error` per transaction. The whole batch
    /// shares one fate in transit: an ambiguous answer leaves every one of them ambiguous.
    Batch(Vec<TxnRequest>),
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
    /// The answers to a [`ClientRequest::Batch`], in its order.
    Batch(Vec<ClientResponse>),
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
    /// Transactions applied one after the other, each at its own revision (a
    /// [`ClientRequest::Batch`]).
    Batch(Vec<TxnRequest>),
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
    /// One result per transaction of a [`Command::Batch`], in its order.
    Batch(Vec<CommandResult>),
}

/// Put values that share the raft entry they were decoded from.
///
/// A committed entry stays in the member's in-memory log until a snapshot compacts it away (up
/// to `snapshot_entries` + `snapshot_catch_up_entries` entries), and the value it carries also
/// goes into the MVCC state. Decoding a [`Command`] normally copies every value, so each recent
/// write was held twice. [`decode`] makes every [`PutRequest::value`] a view
/// ([`Bytes::slice_ref`]) into the entry's own buffer instead: one allocation serves the log and
/// the key's version. Keys are still copied: the key index keeps a key's first `Bytes` for as
/// long as the key lives, and a view would pin that first entry's whole buffer.
pub mod shared_values {
    use std::cell::RefCell;

    use bytes::Bytes;
    use serde::de::{Deserializer, Error, SeqAccess, Visitor};

    thread_local! {
        static SOURCE: RefCell<Option<Bytes>> = const { RefCell::new(None) };
    }

    /// Runs `decode` (a bincode decode of a slice of `source`) with values taken as views into
    /// `source` rather than copied.
    pub fn decode<T>(source: &Bytes, decode: impl FnOnce() -> T) -> T {
        struct Reset(Option<Bytes>);
        impl Drop for Reset {
            fn drop(&mut self) {
                let previous = self.0.take();
                SOURCE.with(|s| *s.borrow_mut() = previous);
            }
        }
        let previous = SOURCE.with(|s| s.borrow_mut().replace(source.clone()));
        let _reset = Reset(previous);
        decode()
    }

    /// A view into the current source when `bytes` lies inside it and makes up at least three
    /// quarters of it, else a copy. A view keeps the whole entry buffer alive for as long as the
    /// value lives, long after the entry left the log: worth it only when the buffer is mostly
    /// this value. A small value in a larger entry (a compressed value beside its keys and
    /// compares, one put of a batch) is copied, so at most one value per entry is a view.
    fn share(bytes: &[u8]) -> Bytes {
        SOURCE.with(|s| match &*s.borrow() {
            Some(source) => {
                let start = source.as_ptr() as usize;
                let at = bytes.as_ptr() as usize;
                if !bytes.is_empty()
                    && at >= start
                    && at + bytes.len() <= start + source.len()
                    && bytes.len() * 4 >= source.len() * 3
                {
                    source.slice_ref(bytes)
                } else {
                    Bytes::copy_from_slice(bytes)
                }
            }
            None => Bytes::copy_from_slice(bytes),
        })
    }

    struct ValueVisitor;

    impl<'de> Visitor<'de> for ValueVisitor {
        type Value = Bytes;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a byte array")
        }

        fn visit_borrowed_bytes<E: Error>(self, v: &'de [u8]) -> Result<Bytes, E> {
            Ok(share(v))
        }

        fn visit_bytes<E: Error>(self, v: &[u8]) -> Result<Bytes, E> {
            Ok(Bytes::copy_from_slice(v))
        }

        fn visit_byte_buf<E: Error>(self, v: Vec<u8>) -> Result<Bytes, E> {
            Ok(Bytes::from(v))
        }

        fn visit_str<E: Error>(self, v: &str) -> Result<Bytes, E> {
            Ok(Bytes::copy_from_slice(v.as_bytes()))
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Bytes, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
            while let Some(b) = seq.next_element::<u8>()? {
                out.push(b);
            }
            Ok(Bytes::from(out))
        }
    }

    pub fn value<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Bytes, D::Error> {
        deserializer.deserialize_bytes(ValueVisitor)
    }
}

/// Put values as the store keeps them: compressed once, by the member that proposes the write.
///
/// Kubernetes values are JSON objects of a few shapes repeated many times (a cluster's pods differ
/// in names, uids, addresses and times), so each value is compressed with LZ4 against a fixed
/// dictionary of typical objects ([`DICTIONARY_3`]): a Running pod of ~4.3 KB becomes ~0.5 KB,
/// an Event of ~1.1 KB ~0.25 KB. The proposing member encodes the command's put values
/// ([`encode_command`]) before the command becomes a raft entry, so the entry, the WAL, the peer
/// traffic, the MVCC state and snapshots all carry the compressed form, and every member holds
/// the same bytes (hashes compare them). Values leave the store decoded ([`decode`]): reads,
/// watch events, `prev_kv`s and value compares see what the client wrote.
///
/// The stored form of a value is the value itself unless it starts with [`MAGIC`]; then it is
/// `MAGIC`, a format byte and the format's payload. A client value that happens to start with
/// `MAGIC` is stored as `MAGIC`, [`RAW`], value. Values written before this format existed are
/// read unchanged (none of them is expected to start with `MAGIC`: `0xC1` is never valid UTF-8,
/// and Kubernetes writes JSON or `k8s\0`-prefixed protobuf).
pub mod stored_values {
    use std::borrow::Cow;

    use bytes::Bytes;

    use super::{Command, RequestOp, StoreError, TxnRequest};

    /// The first two bytes of every wrapped value.
    pub const MAGIC: [u8; 2] = [0xC1, b'K'];
    /// `MAGIC`, `RAW`, then the value as written.
    pub const RAW: u8 = 0;
    /// `MAGIC`, `LZ4_DICT_1`, the value's length (u32, little endian), then an LZ4 block
    /// compressed against [`DICTIONARY_1`]. Read, no longer written.
    pub const LZ4_DICT_1: u8 = 1;
    /// As [`LZ4_DICT_1`], against [`DICTIONARY_2`]. Read, no longer written.
    pub const LZ4_DICT_2: u8 = 2;
    /// As [`LZ4_DICT_1`], against [`DICTIONARY_3`]: what values are written in. A dictionary is
    /// part of its format: changing one needs a new format byte, or stored values stop decoding.
    pub const LZ4_DICT_3: u8 = 3;
    const LZ4_HEADER: usize = MAGIC.len() + 1 + 4;
    /// Values shorter than this are not worth a compression attempt.
    const MIN_COMPRESS: usize = 96;
    /// A declared length beyond this is corrupt (requests are limited far below it).
    const MAX_DECODED: usize = 256 << 20;

    /// The first dictionary: a Running pod, its Events, a Lease and a Node as kemu wrote them
    /// before pods carried their service account's token volume and managed fields.
    pub static DICTIONARY_1: &[u8] = include_bytes!("value_dictionary_1.json");
    /// The second: a Node, its Lease, a pod's four Events and the Running pod of a ReplicaSet
    /// with its token volume, default tolerations and the creator's managed fields, before the
    /// components' writes recorded their own field managers.
    pub static DICTIONARY_2: &[u8] = include_bytes!("value_dictionary_2.json");
    /// Typical objects as the API server stores them now, with made-up ids and times: a Node
    /// and its Lease with kubelet's managed fields, a pod's four Events with their reporter's,
    /// the Running pod of a ReplicaSet and a bare one as `kemu load` creates it, each with
    /// kubelet's status entry. Values are compressed against this one. The order matters: LZ4
    /// keeps one dictionary position per hash, the later one, so the most written shapes (pods)
    /// come last.
    pub static DICTIONARY_3: &[u8] = include_bytes!("value_dictionary_3.json");

    /// The stored form of `value` (see the module docs).
    pub fn encode(value: &Bytes) -> Bytes {
        if value.len() >= MIN_COMPRESS {
            let compressed = lz4_flex::block::compress_with_dict(value, DICTIONARY_3);
            if compressed.len() + LZ4_HEADER < value.len() {
                let mut out = Vec::with_capacity(LZ4_HEADER + compressed.len());
                out.extend_from_slice(&MAGIC);
                out.push(LZ4_DICT_3);
                out.extend_from_slice(&(value.len() as u32).to_le_bytes());
                out.extend_from_slice(&compressed);
                return Bytes::from(out);
            }
        }
        if value.starts_with(&MAGIC) {
            let mut out = Vec::with_capacity(MAGIC.len() + 1 + value.len());
            out.extend_from_slice(&MAGIC);
            out.push(RAW);
            out.extend_from_slice(value);
            return Bytes::from(out);
        }
        value.clone()
    }

    /// The value a client wrote, from its stored form.
    pub fn decode(stored: &Bytes) -> Result<Bytes, StoreError> {
        if !stored.starts_with(&MAGIC) {
            return Ok(stored.clone());
        }
        let corrupt = |what: &str| StoreError::InvalidRequest {
            reason: format!("stored value is corrupt: {what}"),
        };
        let dictionary = match stored.get(MAGIC.len()) {
            Some(&RAW) => return Ok(stored.slice(MAGIC.len() + 1..)),
            Some(&LZ4_DICT_1) => DICTIONARY_1,
            Some(&LZ4_DICT_2) => DICTIONARY_2,
            Some(&LZ4_DICT_3) => DICTIONARY_3,
            Some(other) => return Err(corrupt(&format!("unknown format {other}"))),
            None => return Err(corrupt("no format byte")),
        };
        let len = stored
            .get(MAGIC.len() + 1..LZ4_HEADER)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map(|b| u32::from_le_bytes(b) as usize)
            .ok_or_else(|| corrupt("short header"))?;
        if len > MAX_DECODED {
            return Err(corrupt("declared length too large"));
        }
        let out = lz4_flex::block::decompress_with_dict(&stored[LZ4_HEADER..], len, dictionary)
            .map_err(|e| corrupt(&e.to_string()))?;
        if out.len() != len {
            return Err(corrupt("length differs from its header"));
        }
        Ok(Bytes::from(out))
    }

    /// `cmd` with every put value (nested transactions included) in its stored form; borrowed
    /// when it has none.
    pub fn encode_command(cmd: &Command) -> Cow<'_, Command> {
        match cmd {
            Command::Put(put) => {
                let mut put = put.clone();
                put.value = encode(&put.value);
                Cow::Owned(Command::Put(put))
            }
            Command::Txn(txn) if has_puts(&txn.success) || has_puts(&txn.failure) => {
                Cow::Owned(Command::Txn(encode_txn(txn)))
            }
            Command::Batch(txns) => {
                Cow::Owned(Command::Batch(txns.iter().map(encode_txn).collect()))
            }
            _ => Cow::Borrowed(cmd),
        }
    }

    fn has_puts(ops: &[RequestOp]) -> bool {
        ops.iter().any(|op| match op {
            RequestOp::Put(_) => true,
            RequestOp::Txn(t) => has_puts(&t.success) || has_puts(&t.failure),
            RequestOp::Range(_) | RequestOp::DeleteRange(_) => false,
        })
    }

    fn encode_txn(txn: &TxnRequest) -> TxnRequest {
        let ops = |ops: &[RequestOp]| {
            ops.iter()
                .map(|op| match op {
                    RequestOp::Put(put) => {
                        let mut put = put.clone();
                        put.value = encode(&put.value);
                        RequestOp::Put(put)
                    }
                    RequestOp::Txn(t) => RequestOp::Txn(encode_txn(t)),
                    other => other.clone(),
                })
                .collect()
        };
        TxnRequest {
            compare: txn.compare.clone(),
            success: ops(&txn.success),
            failure: ops(&txn.failure),
        }
    }
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

    fn put(key: &'static [u8], value: &'static [u8]) -> PutRequest {
        PutRequest {
            key: Bytes::from_static(key),
            value: Bytes::from_static(value),
            ..Default::default()
        }
    }

    #[test]
    fn decoded_put_values_share_the_entry() {
        // The first value is most of the entry, so it is a view; the nested one is small beside
        // it, so it is copied rather than pinning the whole entry.
        let first = Bytes::from(vec![b'v'; 1000]);
        let cmd = Command::Txn(TxnRequest {
            compare: vec![],
            success: vec![
                RequestOp::Put(PutRequest {
                    value: first.clone(),
                    ..put(b"/k1", b"")
                }),
                RequestOp::Txn(TxnRequest {
                    compare: vec![],
                    success: vec![RequestOp::Put(put(b"/k2", b"nested value"))],
                    failure: vec![],
                }),
            ],
            failure: vec![RequestOp::Put(put(b"/k3", b""))],
        });
        let mut data = vec![7u8; 16];
        bincode::serde::encode_into_std_write(&cmd, &mut data, bincode::config::standard())
            .expect("encodes");
        let entry = Bytes::from(data);
        let within = |b: &Bytes| {
            let start = entry.as_ptr() as usize;
            let at = b.as_ptr() as usize;
            at >= start && at + b.len() <= start + entry.len()
        };
        let decode = || {
            bincode::serde::decode_from_slice::<Command, _>(
                &entry[16..],
                bincode::config::standard(),
            )
            .expect("decodes")
            .0
        };
        let shared = shared_values::decode(&entry, decode);
        let copied = decode();
        // The same command either way; only where the values live differs.
        assert_eq!(
            bincode::serde::encode_to_vec(&shared, bincode::config::standard()).expect("encodes"),
            bincode::serde::encode_to_vec(&copied, bincode::config::standard()).expect("encodes"),
        );
        let Command::Txn(shared) = shared else {
            panic!("not a txn")
        };
        let Command::Txn(copied) = copied else {
            panic!("not a txn")
        };
        let (RequestOp::Put(a), RequestOp::Txn(nested)) = (&shared.success[0], &shared.success[1])
        else {
            panic!("unexpected ops")
        };
        let RequestOp::Put(b) = &nested.success[0] else {
            panic!("not a put")
        };
        assert_eq!(a.value, first);
        assert_eq!(&b.value[..], b"nested value");
        assert!(
            within(&a.value),
            "a value that is most of its entry is a view"
        );
        assert!(!within(&b.value), "a small value beside it is a copy");
        assert!(!within(&a.key) && !within(&b.key), "keys are copies");
        let RequestOp::Put(c) = &copied.success[0] else {
            panic!("not a put")
        };
        assert!(
            !within(&c.value),
            "outside shared_values::decode values are copies"
        );
        // The source is forgotten once the decode returns.
        assert!(!within(&decode_put_again(&entry)));
    }

    fn decode_put_again(entry: &Bytes) -> Bytes {
        let cmd = bincode::serde::decode_from_slice::<Command, _>(
            &entry[16..],
            bincode::config::standard(),
        )
        .expect("decodes")
        .0;
        match cmd {
            Command::Txn(t) => match &t.success[0] {
                RequestOp::Put(p) => p.value.clone(),
                _ => panic!("not a put"),
            },
            _ => panic!("not a txn"),
        }
    }

    #[test]
    fn stored_values_round_trip_and_shrink_typical_objects() {
        let pod: &[u8] = br#"{"apiVersion":"v1","kind":"Pod","metadata":{"creationTimestamp":"2026-11-22T00:01:02Z","labels":{"app":"web"},"name":"web-7d4b9c-x2x9q","namespace":"shop","uid":"0b6f4a52-8f11-4c1e-9d1e-3c0b7a1f2e44"},"spec":{"containers":[{"image":"nginx:1.27","imagePullPolicy":"IfNotPresent","name":"nginx","resources":{"requests":{"cpu":"100m","memory":"64Mi"}},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File"}],"dnsPolicy":"ClusterFirst","enableServiceLinks":true,"preemptionPolicy":"PreemptLowerPriority","priority":0,"restartPolicy":"Always","schedulerName":"default-scheduler","securityContext":{},"serviceAccount":"default","serviceAccountName":"default","terminationGracePeriodSeconds":30},"status":{"phase":"Pending","qosClass":"Burstable"}}"#;
        let pod = Bytes::from_static(pod);
        let stored = stored_values::encode(&pod);
        assert!(
            stored.len() * 2 < pod.len(),
            "a pod compresses to less than half: {} of {}",
            stored.len(),
            pod.len()
        );
        assert_eq!(stored_values::decode(&stored).expect("decodes"), pod);

        // A Running pod as the API server stores it now (token volume, default tolerations,
        // managed fields): about an eighth.
        let running = Bytes::from_static(RUNNING_POD);
        let stored = stored_values::encode(&running);
        assert_eq!(stored[2], stored_values::LZ4_DICT_3);
        assert!(
            stored.len() * 6 < running.len(),
            "a Running pod compresses to under a sixth: {} of {}",
            stored.len(),
            running.len()
        );
        assert_eq!(stored_values::decode(&stored).expect("decodes"), running);

        // Values written against the earlier dictionaries still read.
        for (format, dictionary) in [
            (stored_values::LZ4_DICT_1, stored_values::DICTIONARY_1),
            (stored_values::LZ4_DICT_2, stored_values::DICTIONARY_2),
        ] {
            let compressed = lz4_flex::block::compress_with_dict(&running, dictionary);
            let mut old = vec![0xC1, b'K', format];
            old.extend_from_slice(&(running.len() as u32).to_le_bytes());
            old.extend_from_slice(&compressed);
            assert_eq!(
                stored_values::decode(&Bytes::from(old)).expect("decodes"),
                running
            );
        }

        // Short and incompressible values are stored as they are.
        let short = Bytes::from_static(b"{}");
        assert_eq!(stored_values::encode(&short), short);
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let noise: Vec<u8> = (0..500)
            .map(|_| {
                // xorshift64: bytes without repeats for LZ4 to find
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .filter(|b| *b != 0xC1)
            .collect();
        let noise = Bytes::from(noise);
        assert_eq!(stored_values::encode(&noise), noise);
        assert_eq!(stored_values::decode(&noise).expect("decodes"), noise);

        // A client value that looks like a stored one is wrapped, and comes back as written.
        for value in [&[0xC1, b'K'][..], &[0xC1, b'K', 1, 9, 9, 9, 9, 9][..]] {
            let value = Bytes::copy_from_slice(value);
            let stored = stored_values::encode(&value);
            assert_ne!(stored, value);
            assert_eq!(stored_values::decode(&stored).expect("decodes"), value);
        }

        // Corrupt stored values are errors, not panics or garbage.
        let mut truncated = stored_values::encode(&pod).to_vec();
        truncated.truncate(truncated.len() - 10);
        for bad in [
            truncated,
            vec![0xC1, b'K'],
            vec![0xC1, b'K', 7, 1, 2],
            vec![0xC1, b'K', 1, 0xff, 0xff, 0xff, 0xff, 0],
            vec![0xC1, b'K', 2, 0xff, 0xff, 0xff, 0xff, 0],
            vec![0xC1, b'K', 3, 0xff, 0xff, 0xff, 0xff, 0],
            vec![0xC1, b'K', 2, 10, 0, 0, 0, 0x40, b'x'],
        ] {
            let err = stored_values::decode(&Bytes::from(bad)).expect_err("corrupt");
            assert!(err.to_string().contains("stored value is corrupt"), "{err}");
        }
    }

    /// A Running pod as the API server stores it.
    const RUNNING_POD: &[u8] = br#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"load-91c2e7aa-0","namespace":"kemu-load-0","uid":"5b0e9f3c-2d41-4a8e-b7c6-19f0d2a3e845","generation":1,"creationTimestamp":"2026-11-29T04:24:35Z","labels":{"app":"kemu-load","kemu.dev/load-run":"91c2e7aa"},"managedFields":[{"manager":"kemu-load","operation":"Update","apiVersion":"v1","time":"2026-11-29T04:24:35Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{".":{},"f:app":{},"f:kemu.dev/load-run":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"pause\"}":{".":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:resources":{".":{},"f:requests":{".":{},"f:cpu":{},"f:memory":{}}},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{},"f:volumeMounts":{"k:{\"mountPath\":\"/var/run/secrets/kubernetes.io/serviceaccount\"}":{".":{},"f:mountPath":{},"f:name":{},"f:readOnly":{}}}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:preemptionPolicy":{},"f:priority":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:serviceAccount":{},"f:serviceAccountName":{},"f:terminationGracePeriodSeconds":{},"f:tolerations":{},"f:volumes":{"k:{\"name\":\"kube-api-access-m9q4t\"}":{".":{},"f:name":{},"f:projected":{".":{},"f:defaultMode":{},"f:sources":{}}}}}}}]},"spec":{"volumes":[{"name":"kube-api-access-m9q4t","projected":{"sources":[{"serviceAccountToken":{"expirationSeconds":3607,"path":"token"}},{"configMap":{"name":"kube-root-ca.crt","items":[{"key":"ca.crt","path":"ca.crt"}]}},{"downwardAPI":{"items":[{"path":"namespace","fieldRef":{"apiVersion":"v1","fieldPath":"metadata.namespace"}}]}}],"defaultMode":420}}],"containers":[{"name":"pause","image":"registry.k8s.io/pause:3.10","resources":{"requests":{"cpu":"10m","memory":"16Mi"}},"volumeMounts":[{"name":"kube-api-access-m9q4t","readOnly":true,"mountPath":"/var/run/secrets/kubernetes.io/serviceaccount"}],"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","serviceAccountName":"default","serviceAccount":"default","nodeName":"node-633","securityContext":{},"schedulerName":"default-scheduler","tolerations":[{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300},{"key":"node.kubernetes.io/unreachable","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}],"priority":0,"enableServiceLinks":true,"preemptionPolicy":"PreemptLowerPriority"},"status":{"phase":"Running","conditions":[{"type":"PodScheduled","status":"True","lastTransitionTime":"2026-11-29T04:24:35Z"},{"type":"PodReadyToStartContainers","status":"True","lastTransitionTime":"2026-11-29T04:24:35Z"},{"type":"Initialized","status":"True","lastTransitionTime":"2026-11-29T04:24:35Z"},{"type":"ContainersReady","status":"True","lastTransitionTime":"2026-11-29T04:24:35Z"},{"type":"Ready","status":"True","lastTransitionTime":"2026-11-29T04:24:35Z"}],"hostIP":"100.64.2.122","hostIPs":[{"ip":"100.64.2.122"}],"podIP":"10.130.121.2","podIPs":[{"ip":"10.130.121.2"}],"startTime":"2026-11-29T04:24:35Z","containerStatuses":[{"name":"pause","state":{"running":{"startedAt":"2026-11-29T04:24:35Z"}},"lastState":{},"ready":true,"restartCount":0,"image":"registry.k8s.io/pause:3.10","imageID":"registry.k8s.io/pause@sha256:f13da7ed800849f5aaab42cd6248a8727eeabb371492dcdedeca440cfae86a75","containerID":"containerd://4c1f9a0e7b2d6c835e1a0f9b7d3c2e6a8f01b4d7c9e2a5f3b6d8c0e1a7f4b92d","started":true}],"qosClass":"Burstable"}}"#;

    #[test]
    fn encode_command_reaches_nested_puts_only() {
        let pod = Bytes::from(br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","namespace":"default"},"spec":{"containers":[{"image":"registry.k8s.io/pause:3.10","imagePullPolicy":"IfNotPresent","name":"pause"}]}}"#.to_vec());
        let cmd = Command::Txn(TxnRequest {
            compare: vec![Compare {
                range: KeyRange::single(&b"/k"[..]),
                result: CompareResult::Equal,
                target: CompareTarget::Value(pod.clone()),
            }],
            success: vec![RequestOp::Txn(TxnRequest {
                compare: vec![],
                success: vec![RequestOp::Put(PutRequest {
                    value: pod.clone(),
                    ..put(b"/k", b"")
                })],
                failure: vec![],
            })],
            failure: vec![RequestOp::Range(RangeRequest::default())],
        });
        let encoded = stored_values::encode_command(&cmd);
        let Command::Txn(txn) = &*encoded else {
            panic!("not a txn")
        };
        let RequestOp::Txn(nested) = &txn.success[0] else {
            panic!("not a txn")
        };
        let RequestOp::Put(p) = &nested.success[0] else {
            panic!("not a put")
        };
        assert!(p.value.len() < pod.len(), "the put value is compressed");
        assert_eq!(stored_values::decode(&p.value).expect("decodes"), pod);
        assert_eq!(
            txn.compare[0].target,
            CompareTarget::Value(pod),
            "compares stay as the client wrote them"
        );
        let lease = Command::LeaseKeepAlive { id: 3 };
        assert!(matches!(
            stored_values::encode_command(&lease),
            std::borrow::Cow::Borrowed(_)
        ));
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
