//! etcd's KV service: Range, Put, DeleteRange, Txn and Compact.

use std::sync::Arc;

use bytes::Bytes;
use tonic::{Request, Response, Status};

use super::pb::etcdserverpb as rpc;
use super::pb::mvccpb;
use super::{messages, Front};
use crate::types::{
    Command, CommandResult, CompactRequest, Compare, CompareResult, CompareTarget,
    DeleteRangeRequest, DeleteRangeResponse, KeyRange, KeyValue, PutRequest, PutResponse,
    RangeRequest, RangeResponse, RequestOp, ResponseOp, TxnRequest, TxnResponse,
};

/// How often a put that keeps the key's value or lease (`ignore_value`, `ignore_lease`) tries
/// again when the key changed between its read and its write.
const KEEPING_PUT_TRIES: usize = 16;

pub(super) struct KvService {
    front: Arc<Front>,
}

impl KvService {
    pub(super) fn new(front: Arc<Front>) -> Self {
        KvService { front }
    }
}

#[tonic::async_trait]
impl rpc::kv_server::Kv for KvService {
    async fn range(
        &self,
        request: Request<rpc::RangeRequest>,
    ) -> Result<Response<rpc::RangeResponse>, Status> {
        self.front.serving()?;
        let request = request.into_inner();
        check_range(&request)?;
        if !request.serializable {
            self.front.read_index().await?;
        }
        Ok(Response::new(range(&self.front, &request)?))
    }

    async fn put(
        &self,
        request: Request<rpc::PutRequest>,
    ) -> Result<Response<rpc::PutResponse>, Status> {
        self.front.serving()?;
        let request = request.into_inner();
        check_put(&request)?;
        if request.ignore_value || request.ignore_lease {
            return self.put_keeping(request).await.map(Response::new);
        }
        match self
            .front
            .propose(&Command::Put(put_request(request)))
            .await?
        {
            CommandResult::Put(r) => Ok(Response::new(put_response(&self.front, r))),
            other => Err(unexpected(&other)),
        }
    }

    async fn delete_range(
        &self,
        request: Request<rpc::DeleteRangeRequest>,
    ) -> Result<Response<rpc::DeleteRangeResponse>, Status> {
        self.front.serving()?;
        let request = request.into_inner();
        check_key(&request.key)?;
        let command = Command::DeleteRange(delete_request(request));
        match self.front.propose(&command).await? {
            CommandResult::DeleteRange(r) => Ok(Response::new(delete_response(&self.front, r))),
            other => Err(unexpected(&other)),
        }
    }

    async fn txn(
        &self,
        request: Request<rpc::TxnRequest>,
    ) -> Result<Response<rpc::TxnResponse>, Status> {
        self.front.serving()?;
        let request = request.into_inner();
        let max_ops = self.front.shared().config.max_txn_ops;
        check_txn(&request, max_ops)?;
        // Shaped reads are read whole by the store and shaped here afterwards.
        let shaped = has_shaped_reads(&request).then(|| request.clone());
        let txn = txn_request(request)?;
        match self.front.propose(&Command::Txn(txn)).await? {
            CommandResult::Txn(mut r) => {
                if let Some(request) = &shaped {
                    shape_txn(request, &mut r);
                }
                Ok(Response::new(txn_response(&self.front, r)))
            }
            other => Err(unexpected(&other)),
        }
    }

    async fn compact(
        &self,
        request: Request<rpc::CompactionRequest>,
    ) -> Result<Response<rpc::CompactionResponse>, Status> {
        self.front.serving()?;
        let revision = request.into_inner().revision;
        // Compaction happens as the command applies: every answer is "physical".
        match self
            .front
            .propose(&Command::Compact(CompactRequest { revision }))
            .await?
        {
            CommandResult::Compact(r) => Ok(Response::new(rpc::CompactionResponse {
                header: self.front.header(&r.header),
            })),
            other => Err(unexpected(&other)),
        }
    }
}

impl KvService {
    /// A put that keeps the key's current value or lease: read the key, then write it on
    /// condition that it did not change meanwhile (again if it did).
    async fn put_keeping(&self, request: rpc::PutRequest) -> Result<rpc::PutResponse, Status> {
        for _ in 0..KEEPING_PUT_TRIES {
            self.front.read_index().await?;
            let current = {
                let mvcc = self.front.shared().mvcc.read();
                mvcc.range(&RangeRequest {
                    range: KeyRange::single(request.key.clone()),
                    ..Default::default()
                })
                .map_err(super::status)?
                .kvs
                .pop()
            };
            let Some(current) = current else {
                return Err(Status::invalid_argument(messages::KEY_NOT_FOUND));
            };
            let put = PutRequest {
                key: request.key.clone(),
                value: if request.ignore_value {
                    current.value.clone()
                } else {
                    request.value.clone()
                },
                lease: if request.ignore_lease {
                    current.lease
                } else {
                    request.lease
                },
                prev_kv: request.prev_kv,
            };
            let txn = TxnRequest {
                compare: vec![Compare {
                    range: KeyRange::single(request.key.clone()),
                    result: CompareResult::Equal,
                    target: CompareTarget::ModRevision(current.mod_revision),
                }],
                success: vec![RequestOp::Put(put)],
                failure: vec![],
            };
            let CommandResult::Txn(mut answer) = self.front.propose(&Command::Txn(txn)).await?
            else {
                return Err(Status::internal("a transaction answered something else"));
            };
            if !answer.succeeded {
                continue;
            }
            let prev_kv = match answer.responses.pop() {
                Some(ResponseOp::Put(put)) => put.prev_kv,
                _ => None,
            };
            return Ok(rpc::PutResponse {
                header: self.front.header(&answer.header),
                prev_kv: prev_kv.map(key_value),
            });
        }
        Err(Status::aborted(
            "etcdserver: the key kept changing; the put was not made",
        ))
    }
}

/// A range read served from this member's state (after a ReadIndex round unless serializable),
/// with etcd's sorting, revision filters and limit.
pub(super) fn range(
    front: &Front,
    request: &rpc::RangeRequest,
) -> Result<rpc::RangeResponse, Status> {
    let shaping = Shaping::of(request);
    let RangeResponse {
        header,
        mut kvs,
        mut more,
        count,
    } = {
        let shared = front.shared();
        let mvcc = shared.mvcc.read();
        let mut response = mvcc
            .range(&store_range(request, shaping.as_ref()))
            .map_err(super::status)?;
        response.header = shared.header(response.header.revision);
        response
    };
    if let Some(shaping) = &shaping {
        shaping.apply(&mut kvs, &mut more);
    }
    Ok(rpc::RangeResponse {
        header: front.header(&header),
        kvs: kvs.into_iter().map(key_value).collect(),
        more,
        count,
    })
}

/// What etcd does to a range after reading it that the store's own read does not: sort by
/// another order than the key's, filter by revisions, and then cut to the limit.
struct Shaping {
    order: Option<rpc::range_request::SortOrder>,
    target: rpc::range_request::SortTarget,
    limit: i64,
    min_mod: i64,
    max_mod: i64,
    min_create: i64,
    max_create: i64,
    /// A keys-only read sorted by value: the values are read, and left out after sorting.
    strip_values: bool,
}

impl Shaping {
    /// `None` when the store's read gives etcd's answer by itself.
    fn of(request: &rpc::RangeRequest) -> Option<Shaping> {
        use rpc::range_request::{SortOrder, SortTarget};
        let order = SortOrder::try_from(request.sort_order).unwrap_or(SortOrder::None);
        let target = SortTarget::try_from(request.sort_target).unwrap_or(SortTarget::Key);
        // etcd sorts ascending by the target when only a target other than the key is given;
        // the store's own order is ascending by key.
        let order = match (order, target) {
            (SortOrder::None | SortOrder::Ascend, SortTarget::Key) => None,
            (SortOrder::None, _) => Some(SortOrder::Ascend),
            (order, _) => Some(order),
        };
        let filtered = request.min_mod_revision != 0
            || request.max_mod_revision != 0
            || request.min_create_revision != 0
            || request.max_create_revision != 0;
        if order.is_none() && !filtered {
            return None;
        }
        Some(Shaping {
            order,
            target,
            limit: request.limit,
            min_mod: request.min_mod_revision,
            max_mod: request.max_mod_revision,
            min_create: request.min_create_revision,
            max_create: request.max_create_revision,
            strip_values: request.keys_only && order.is_some() && target == SortTarget::Value,
        })
    }

    fn apply(&self, kvs: &mut Vec<KeyValue>, more: &mut bool) {
        use rpc::range_request::{SortOrder, SortTarget};
        let within = |value: i64, min: i64, max: i64| {
            (min == 0 || value >= min) && (max == 0 || value <= max)
        };
        kvs.retain(|kv| {
            within(kv.mod_revision, self.min_mod, self.max_mod)
                && within(kv.create_revision, self.min_create, self.max_create)
        });
        if let Some(order) = self.order {
            match self.target {
                SortTarget::Key => kvs.sort_by(|a, b| a.key.cmp(&b.key)),
                SortTarget::Version => kvs.sort_by_key(|kv| kv.version),
                SortTarget::Create => kvs.sort_by_key(|kv| kv.create_revision),
                SortTarget::Mod => kvs.sort_by_key(|kv| kv.mod_revision),
                SortTarget::Value => kvs.sort_by(|a, b| a.value.cmp(&b.value)),
            }
            if order == SortOrder::Descend {
                kvs.reverse();
            }
        }
        if self.strip_values {
            kvs.iter_mut().for_each(|kv| kv.value = Bytes::new());
        }
        let limit = usize::try_from(self.limit).unwrap_or(0);
        *more = limit > 0 && kvs.len() > limit;
        if *more {
            kvs.truncate(limit);
        }
    }
}

/// The store read behind an etcd range: all of it when it is shaped afterwards.
fn store_range(request: &rpc::RangeRequest, shaping: Option<&Shaping>) -> RangeRequest {
    RangeRequest {
        range: KeyRange {
            key: request.key.clone(),
            range_end: request.range_end.clone(),
        },
        limit: if shaping.is_some() {
            0
        } else {
            request.limit.max(0)
        },
        revision: request.revision,
        count_only: request.count_only,
        keys_only: request.keys_only && !shaping.is_some_and(|s| s.strip_values),
        serializable: request.serializable,
    }
}

/// Shapes the answers to a transaction's shaped reads (see [`Shaping`]), in the branch it took
/// and in nested transactions.
fn shape_txn(request: &rpc::TxnRequest, response: &mut TxnResponse) {
    use rpc::request_op::Request as Op;
    let branch = if response.succeeded {
        &request.success
    } else {
        &request.failure
    };
    let ops = branch.iter().filter_map(|op| op.request.as_ref());
    for (op, answer) in ops.zip(response.responses.iter_mut()) {
        match (op, answer) {
            (Op::RequestRange(r), ResponseOp::Range(answer)) => {
                if let Some(shaping) = Shaping::of(r) {
                    shaping.apply(&mut answer.kvs, &mut answer.more);
                }
            }
            (Op::RequestTxn(t), ResponseOp::Txn(answer)) => shape_txn(t, answer),
            _ => {}
        }
    }
}

/// Whether any read of a transaction (in either branch, nested ones included) is shaped.
fn has_shaped_reads(request: &rpc::TxnRequest) -> bool {
    use rpc::request_op::Request as Op;
    request
        .success
        .iter()
        .chain(&request.failure)
        .any(|op| match &op.request {
            Some(Op::RequestRange(r)) => Shaping::of(r).is_some(),
            Some(Op::RequestTxn(t)) => has_shaped_reads(t),
            _ => false,
        })
}

fn unexpected(result: &CommandResult) -> Status {
    Status::internal(format!("the member answered something else: {result:?}"))
}

pub(super) fn key_value(kv: KeyValue) -> mvccpb::KeyValue {
    mvccpb::KeyValue {
        key: kv.key,
        create_revision: kv.create_revision,
        mod_revision: kv.mod_revision,
        version: kv.version,
        value: kv.value,
        lease: kv.lease,
    }
}

fn check_key(key: &Bytes) -> Result<(), Status> {
    if key.is_empty() {
        return Err(Status::invalid_argument(messages::EMPTY_KEY));
    }
    Ok(())
}

fn check_range(request: &rpc::RangeRequest) -> Result<(), Status> {
    check_key(&request.key)?;
    if rpc::range_request::SortOrder::try_from(request.sort_order).is_err()
        || rpc::range_request::SortTarget::try_from(request.sort_target).is_err()
    {
        return Err(Status::invalid_argument(messages::INVALID_SORT_OPTION));
    }
    Ok(())
}

fn check_put(request: &rpc::PutRequest) -> Result<(), Status> {
    check_key(&request.key)?;
    if request.ignore_value && !request.value.is_empty() {
        return Err(Status::invalid_argument(messages::VALUE_PROVIDED));
    }
    if request.ignore_lease && request.lease != 0 {
        return Err(Status::invalid_argument(messages::LEASE_PROVIDED));
    }
    Ok(())
}

/// etcd's `checkTxnRequest`: at most `max_ops` compares and operations per branch, nested
/// transactions sharing what their parent left; every key present.
fn check_txn(request: &rpc::TxnRequest, max_ops: usize) -> Result<(), Status> {
    let ops = request
        .compare
        .len()
        .max(request.success.len())
        .max(request.failure.len());
    if ops > max_ops {
        return Err(Status::invalid_argument(messages::TOO_MANY_OPS));
    }
    for compare in &request.compare {
        check_key(&compare.key)?;
    }
    for op in request.success.iter().chain(&request.failure) {
        use rpc::request_op::Request as Op;
        match &op.request {
            Some(Op::RequestRange(r)) => check_range(r)?,
            Some(Op::RequestPut(p)) => {
                check_put(p)?;
                if p.ignore_value || p.ignore_lease {
                    return Err(Status::unimplemented(
                        "etcdserver: ignore_value and ignore_lease are not served inside a \
                         transaction by kemu's store",
                    ));
                }
            }
            Some(Op::RequestDeleteRange(d)) => check_key(&d.key)?,
            Some(Op::RequestTxn(t)) => check_txn(t, max_ops - ops)?,
            None => {}
        }
    }
    Ok(())
}

fn put_request(request: rpc::PutRequest) -> PutRequest {
    PutRequest {
        key: request.key,
        value: request.value,
        lease: request.lease,
        prev_kv: request.prev_kv,
    }
}

fn delete_request(request: rpc::DeleteRangeRequest) -> DeleteRangeRequest {
    DeleteRangeRequest {
        range: KeyRange {
            key: request.key,
            range_end: request.range_end,
        },
        prev_kv: request.prev_kv,
    }
}

fn txn_request(request: rpc::TxnRequest) -> Result<TxnRequest, Status> {
    let ops = |ops: Vec<rpc::RequestOp>| -> Result<Vec<RequestOp>, Status> {
        use rpc::request_op::Request as Op;
        ops.into_iter()
            .filter_map(|op| op.request)
            .map(|op| {
                Ok(match op {
                    Op::RequestRange(r) => {
                        RequestOp::Range(store_range(&r, Shaping::of(&r).as_ref()))
                    }
                    Op::RequestPut(p) => RequestOp::Put(put_request(p)),
                    Op::RequestDeleteRange(d) => RequestOp::DeleteRange(delete_request(d)),
                    Op::RequestTxn(t) => RequestOp::Txn(txn_request(t)?),
                })
            })
            .collect()
    };
    Ok(TxnRequest {
        compare: request.compare.into_iter().map(compare).collect(),
        success: ops(request.success)?,
        failure: ops(request.failure)?,
    })
}

fn compare(c: rpc::Compare) -> Compare {
    use rpc::compare::{CompareResult as R, CompareTarget as T, TargetUnion as U};
    let result = match R::try_from(c.result).unwrap_or(R::Equal) {
        R::Equal => CompareResult::Equal,
        R::Greater => CompareResult::Greater,
        R::Less => CompareResult::Less,
        R::NotEqual => CompareResult::NotEqual,
    };
    // As etcd, the target field decides; a missing value of it compares as its zero.
    let number = |u: &Option<U>| match u {
        Some(U::Version(n) | U::CreateRevision(n) | U::ModRevision(n) | U::Lease(n)) => *n,
        _ => 0,
    };
    let target = match T::try_from(c.target).unwrap_or(T::Version) {
        T::Version => CompareTarget::Version(number(&c.target_union)),
        T::Create => CompareTarget::CreateRevision(number(&c.target_union)),
        T::Mod => CompareTarget::ModRevision(number(&c.target_union)),
        T::Lease => CompareTarget::Lease(number(&c.target_union)),
        T::Value => CompareTarget::Value(match c.target_union {
            Some(U::Value(v)) => v,
            _ => Bytes::new(),
        }),
    };
    Compare {
        range: KeyRange {
            key: c.key,
            range_end: c.range_end,
        },
        result,
        target,
    }
}

fn put_response(front: &Front, r: PutResponse) -> rpc::PutResponse {
    rpc::PutResponse {
        header: front.header(&r.header),
        prev_kv: r.prev_kv.map(key_value),
    }
}

fn delete_response(front: &Front, r: DeleteRangeResponse) -> rpc::DeleteRangeResponse {
    rpc::DeleteRangeResponse {
        header: front.header(&r.header),
        deleted: r.deleted,
        prev_kvs: r.prev_kvs.into_iter().map(key_value).collect(),
    }
}

fn txn_response(front: &Front, r: TxnResponse) -> rpc::TxnResponse {
    use rpc::response_op::Response as Op;
    let header = front.header(&r.header);
    rpc::TxnResponse {
        header,
        succeeded: r.succeeded,
        responses: r
            .responses
            .into_iter()
            .map(|op| rpc::ResponseOp {
                response: Some(match op {
                    ResponseOp::Range(r) => Op::ResponseRange(rpc::RangeResponse {
                        header: front.header(&r.header),
                        kvs: r.kvs.into_iter().map(key_value).collect(),
                        more: r.more,
                        count: r.count,
                    }),
                    ResponseOp::Put(r) => Op::ResponsePut(put_response(front, r)),
                    ResponseOp::DeleteRange(r) => {
                        Op::ResponseDeleteRange(delete_response(front, r))
                    }
                    ResponseOp::Txn(r) => Op::ResponseTxn(txn_response(front, r)),
                }),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(key: &str) -> rpc::RequestOp {
        rpc::RequestOp {
            request: Some(rpc::request_op::Request::RequestPut(rpc::PutRequest {
                key: Bytes::copy_from_slice(key.as_bytes()),
                ..Default::default()
            })),
        }
    }

    #[test]
    fn a_txn_may_have_max_ops_per_branch_and_nested_txns_share_them() {
        let ops = |n: usize| (0..n).map(|i| put(&format!("k{i}"))).collect::<Vec<_>>();
        let txn = |success| rpc::TxnRequest {
            success,
            ..Default::default()
        };
        assert!(check_txn(&txn(ops(128)), 128).is_ok());
        let refused = check_txn(&txn(ops(129)), 128).expect_err("too many");
        assert_eq!(refused.code(), tonic::Code::InvalidArgument);
        assert_eq!(refused.message(), messages::TOO_MANY_OPS);
        // 100 at the top leave 28 for a nested transaction.
        let mut outer = ops(99);
        outer.push(rpc::RequestOp {
            request: Some(rpc::request_op::Request::RequestTxn(txn(ops(29)))),
        });
        assert!(check_txn(&txn(outer.clone()), 128).is_err());
        outer.pop();
        outer.push(rpc::RequestOp {
            request: Some(rpc::request_op::Request::RequestTxn(txn(ops(28)))),
        });
        assert!(check_txn(&txn(outer), 128).is_ok());
        let empty_key = check_txn(&txn(vec![put("")]), 128).expect_err("empty key");
        assert_eq!(empty_key.message(), messages::EMPTY_KEY);
    }
}
