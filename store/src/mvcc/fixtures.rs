//! Helpers the state machine's tests share.

use super::*;
pub(super) use crate::types::CompactRequest;

pub(super) fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

pub(super) fn put_req(key: &str, value: &str) -> PutRequest {
    PutRequest {
        key: b(key),
        value: b(value),
        lease: 0,
        prev_kv: true,
    }
}

pub(super) fn put(m: &mut Mvcc, key: &str, value: &str) -> (PutResponse, Vec<Event>) {
    put_lease(m, key, value, 0)
}

pub(super) fn put_lease(
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

pub(super) fn delete(m: &mut Mvcc, range: KeyRange) -> (DeleteRangeResponse, Vec<Event>) {
    match m.apply(&Command::DeleteRange(DeleteRangeRequest {
        range,
        prev_kv: true,
    })) {
        (CommandResult::DeleteRange(r), events) => (r, events),
        other => panic!("delete failed: {other:?}"),
    }
}

pub(super) fn txn(m: &mut Mvcc, req: TxnRequest) -> (TxnResponse, Vec<Event>) {
    match m.apply(&Command::Txn(req)) {
        (CommandResult::Txn(r), events) => (r, events),
        other => panic!("txn failed: {other:?}"),
    }
}

pub(super) fn expect_error(m: &mut Mvcc, cmd: Command) -> StoreError {
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

pub(super) fn get_at(
    m: &Mvcc,
    key: &str,
    revision: Revision,
) -> Result<Option<KeyValue>, StoreError> {
    let req = RangeRequest {
        range: KeyRange::single(b(key)),
        revision,
        ..RangeRequest::default()
    };
    m.range(&req).map(|r| r.kvs.into_iter().next())
}

pub(super) fn get(m: &Mvcc, key: &str) -> Option<KeyValue> {
    get_at(m, key, 0).unwrap()
}

pub(super) fn mod_rev_cmp(key: &str, rev: Revision) -> Compare {
    Compare {
        range: KeyRange::single(b(key)),
        result: CompareResult::Equal,
        target: CompareTarget::ModRevision(rev),
    }
}

pub(super) fn keys_of(kvs: &[KeyValue]) -> Vec<&[u8]> {
    kvs.iter().map(|kv| &kv.key[..]).collect()
}

pub(super) fn workload() -> Vec<Command> {
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
