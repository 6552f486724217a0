//! etcd's Lease service: grant, revoke, keep-alive, time-to-live and the lease list.
//!
//! Grants, revocations and renewals are raft proposals (a renewal is replicated so that whoever
//! leads next knows of it). Time left is read from this member's lease clocks, which every member
//! keeps from the renewals it applies; the leader's decide when a lease runs out.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};
use tracing::debug;

use super::pb::etcdserverpb as rpc;
use super::{messages, Front};
use crate::types::{Command, CommandResult, LeaseGrantRequest, StoreError};

/// The longest TTL a lease may be granted (etcd's `MaxLeaseTTL`, in seconds).
const MAX_LEASE_TTL: i64 = 9_000_000_000;

pub(super) struct LeaseService {
    front: Arc<Front>,
}

impl LeaseService {
    pub(super) fn new(front: Arc<Front>) -> Self {
        LeaseService { front }
    }

    /// etcd's shortest TTL: one and a half election timeouts, so that a lease outlives a leader
    /// change that happens while it is renewed.
    fn min_ttl(&self) -> i64 {
        let config = &self.front.shared().config;
        let election = config.tick * config.election_ticks as u32;
        (election * 3 / 2).as_secs_f64().ceil().max(1.0) as i64
    }
}

#[tonic::async_trait]
impl rpc::lease_server::Lease for LeaseService {
    async fn lease_grant(
        &self,
        request: Request<rpc::LeaseGrantRequest>,
    ) -> Result<Response<rpc::LeaseGrantResponse>, Status> {
        self.front.serving()?;
        let request = request.into_inner();
        if request.ttl > MAX_LEASE_TTL {
            return Err(Status::out_of_range(messages::LEASE_TTL_TOO_LARGE));
        }
        if request.id < 0 {
            return Err(Status::invalid_argument(
                "etcdserver: lease id must not be negative",
            ));
        }
        let grant = LeaseGrantRequest {
            ttl: request.ttl.max(self.min_ttl()),
            id: request.id,
        };
        match self.front.propose(&Command::LeaseGrant(grant)).await? {
            CommandResult::LeaseGrant(r) => Ok(Response::new(rpc::LeaseGrantResponse {
                header: self.front.header(&r.header),
                id: r.id,
                ttl: r.ttl,
                error: String::new(),
            })),
            other => Err(Status::internal(format!("unexpected answer {other:?}"))),
        }
    }

    async fn lease_revoke(
        &self,
        request: Request<rpc::LeaseRevokeRequest>,
    ) -> Result<Response<rpc::LeaseRevokeResponse>, Status> {
        self.front.serving()?;
        let id = request.into_inner().id;
        match self.front.propose(&Command::LeaseRevoke { id }).await? {
            CommandResult::LeaseRevoke(r) => Ok(Response::new(rpc::LeaseRevokeResponse {
                header: self.front.header(&r.header),
            })),
            other => Err(Status::internal(format!("unexpected answer {other:?}"))),
        }
    }

    type LeaseKeepAliveStream = ReceiverStream<Result<rpc::LeaseKeepAliveResponse, Status>>;

    async fn lease_keep_alive(
        &self,
        request: Request<Streaming<rpc::LeaseKeepAliveRequest>>,
    ) -> Result<Response<Self::LeaseKeepAliveStream>, Status> {
        self.front.serving()?;
        let mut inbound = request.into_inner();
        let (out, responses) = mpsc::channel(16);
        let front = self.front.clone();
        tokio::spawn(async move {
            loop {
                let request = tokio::select! {
                    biased;
                    _ = out.closed() => return,
                    request = inbound.message() => request,
                };
                let id = match request {
                    Ok(Some(request)) => request.id,
                    Ok(None) => return,
                    Err(status) => {
                        debug!(error = %status, "ending a keep-alive stream on a bad request");
                        let _ = out.send(Err(status)).await;
                        return;
                    }
                };
                let answer = match front.member.propose(&Command::LeaseKeepAlive { id }).await {
                    Ok(CommandResult::LeaseKeepAlive(r)) => Ok(rpc::LeaseKeepAliveResponse {
                        header: front.header(&r.header),
                        id,
                        ttl: r.ttl,
                    }),
                    // As etcd: a lease that is gone is answered with a TTL of 0.
                    Ok(CommandResult::Error(StoreError::LeaseNotFound { .. })) => {
                        Ok(rpc::LeaseKeepAliveResponse {
                            header: front.current_header(),
                            id,
                            ttl: 0,
                        })
                    }
                    Ok(CommandResult::Error(e)) | Err(e) => Err(super::status(e)),
                    Ok(other) => Err(Status::internal(format!("unexpected answer {other:?}"))),
                };
                let failed = answer.is_err();
                if out.send(answer).await.is_err() || failed {
                    return;
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(responses)))
    }

    async fn lease_time_to_live(
        &self,
        request: Request<rpc::LeaseTimeToLiveRequest>,
    ) -> Result<Response<rpc::LeaseTimeToLiveResponse>, Status> {
        self.front.serving()?;
        let request = request.into_inner();
        self.front.read_index().await?;
        let shared = self.front.shared();
        let (revision, granted, keys) = {
            let mvcc = shared.mvcc.read();
            (
                mvcc.current_revision(),
                mvcc.lease_granted_ttl(request.id),
                if request.keys {
                    mvcc.lease_keys(request.id)
                } else {
                    Vec::new()
                },
            )
        };
        let header = self.front.header_at(revision);
        let Some(granted) = granted else {
            // As etcd: an unknown lease is an answer with a TTL of -1, not an error.
            return Ok(Response::new(rpc::LeaseTimeToLiveResponse {
                header,
                id: request.id,
                ttl: -1,
                granted_ttl: 0,
                keys: Vec::new(),
            }));
        };
        let left = shared
            .lease_remaining(request.id)
            .unwrap_or(Duration::from_secs(granted.max(0) as u64));
        Ok(Response::new(rpc::LeaseTimeToLiveResponse {
            header,
            id: request.id,
            // etcd rounds the time left up to whole seconds.
            ttl: left.as_secs_f64().ceil() as i64,
            granted_ttl: granted,
            keys,
        }))
    }

    async fn lease_leases(
        &self,
        _request: Request<rpc::LeaseLeasesRequest>,
    ) -> Result<Response<rpc::LeaseLeasesResponse>, Status> {
        self.front.serving()?;
        self.front.read_index().await?;
        let (revision, leases) = {
            let mvcc = self.front.shared().mvcc.read();
            (mvcc.current_revision(), mvcc.leases())
        };
        Ok(Response::new(rpc::LeaseLeasesResponse {
            header: self.front.header_at(revision),
            leases: leases
                .into_iter()
                .map(|(id, _)| rpc::LeaseStatus { id })
                .collect(),
        }))
    }
}
