//! etcd's Cluster service (the member list) and Maintenance service (status, hashes, alarms,
//! defragment, snapshot).

use std::io::Write;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::pb::etcdserverpb as rpc;
use super::Front;

/// The etcd API version this front speaks, as `Status` reports it (build metadata says whose).
pub const API_VERSION: &str = "3.4.0+kemu";
/// Bytes of snapshot per message.
const SNAPSHOT_CHUNK: usize = 32 * 1024;
/// etcd's clients take a snapshot stream for whole only if it is a whole number of 512-byte
/// sectors and a SHA-256.
const SNAPSHOT_SECTOR: u64 = 512;
/// The state's length, in front of it.
const SNAPSHOT_HEADER: u64 = 8;

/// The store state in a snapshot from [`Maintenance::snapshot`](rpc::maintenance_server::Maintenance::snapshot)
/// (the digest at its end already taken off), or `None` if it is not one.
pub fn snapshot_state(sectors: &[u8]) -> Option<&[u8]> {
    let length = u64::from_le_bytes(sectors.get(..8)?.try_into().ok()?);
    let end = usize::try_from(length).ok()?.checked_add(8)?;
    sectors.get(8..end)
}

/// A 64-bit state hash as etcd's 32-bit one.
fn fold(hash: u64) -> u32 {
    (hash ^ (hash >> 32)) as u32
}

fn url(addr: impl std::fmt::Display) -> String {
    format!("https://{addr}")
}

pub(super) struct ClusterService {
    front: Arc<Front>,
}

impl ClusterService {
    pub(super) fn new(front: Arc<Front>) -> Self {
        ClusterService { front }
    }
}

fn fixed_membership() -> Status {
    Status::unimplemented("etcdserver: kemu's store has a fixed membership")
}

#[tonic::async_trait]
impl rpc::cluster_server::Cluster for ClusterService {
    async fn member_add(
        &self,
        _request: Request<rpc::MemberAddRequest>,
    ) -> Result<Response<rpc::MemberAddResponse>, Status> {
        Err(fixed_membership())
    }

    async fn member_remove(
        &self,
        _request: Request<rpc::MemberRemoveRequest>,
    ) -> Result<Response<rpc::MemberRemoveResponse>, Status> {
        Err(fixed_membership())
    }

    async fn member_update(
        &self,
        _request: Request<rpc::MemberUpdateRequest>,
    ) -> Result<Response<rpc::MemberUpdateResponse>, Status> {
        Err(fixed_membership())
    }

    async fn member_promote(
        &self,
        _request: Request<rpc::MemberPromoteRequest>,
    ) -> Result<Response<rpc::MemberPromoteResponse>, Status> {
        Err(fixed_membership())
    }

    async fn member_list(
        &self,
        _request: Request<rpc::MemberListRequest>,
    ) -> Result<Response<rpc::MemberListResponse>, Status> {
        let config = &self.front.shared().config;
        // This member's own entry first: it listens on `listen_grpc`, which may be a wildcard
        // address no client can reach.
        let client_address = |name: &str| {
            config
                .grpc_cluster
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, addr)| addr.to_string())
                .or_else(|| {
                    (name == config.name)
                        .then_some(config.listen_grpc)
                        .flatten()
                        .map(|a| a.to_string())
                })
        };
        let members = config
            .initial_cluster
            .iter()
            .enumerate()
            .map(|(i, (name, peer))| rpc::Member {
                id: i as u64 + 1,
                name: name.clone(),
                peer_ur_ls: vec![url(peer)],
                client_ur_ls: client_address(name).map(url).into_iter().collect(),
                is_learner: false,
            })
            .collect();
        Ok(Response::new(rpc::MemberListResponse {
            header: self.front.current_header(),
            members,
        }))
    }
}

pub(super) struct MaintenanceService {
    front: Arc<Front>,
}

impl MaintenanceService {
    pub(super) fn new(front: Arc<Front>) -> Self {
        MaintenanceService { front }
    }
}

#[tonic::async_trait]
impl rpc::maintenance_server::Maintenance for MaintenanceService {
    async fn alarm(
        &self,
        request: Request<rpc::AlarmRequest>,
    ) -> Result<Response<rpc::AlarmResponse>, Status> {
        use rpc::alarm_request::AlarmAction;
        // kemu's store raises no alarms (it has no space quota and checks no corruption between
        // members on its own): the list is empty, and disarming finds nothing.
        match AlarmAction::try_from(request.into_inner().action) {
            Ok(AlarmAction::Get | AlarmAction::Deactivate) => {
                Ok(Response::new(rpc::AlarmResponse {
                    header: self.front.current_header(),
                    alarms: Vec::new(),
                }))
            }
            _ => Err(Status::unimplemented(
                "etcdserver: kemu's store raises no alarms",
            )),
        }
    }

    async fn status(
        &self,
        _request: Request<rpc::StatusRequest>,
    ) -> Result<Response<rpc::StatusResponse>, Status> {
        let status = self.front.shared().status_response();
        let mut errors = Vec::new();
        if status.leader_id == 0 {
            errors.push(super::messages::NO_LEADER.to_string());
        }
        if self.front.shared().is_restoring() {
            errors.push("etcdserver: restoring its state after a start".to_string());
        }
        Ok(Response::new(rpc::StatusResponse {
            header: self.front.header(&status.header),
            version: API_VERSION.to_string(),
            db_size: status.disk_size as i64,
            leader: status.leader_id,
            raft_index: status.commit_index,
            raft_term: status.term,
            raft_applied_index: status.applied_index,
            errors,
            db_size_in_use: status.data_size as i64,
            is_learner: false,
        }))
    }

    async fn defragment(
        &self,
        _request: Request<rpc::DefragmentRequest>,
    ) -> Result<Response<rpc::DefragmentResponse>, Status> {
        // The state lives in memory and snapshots are written whole: there is nothing to
        // defragment.
        self.front.serving()?;
        Ok(Response::new(rpc::DefragmentResponse {
            header: self.front.current_header(),
        }))
    }

    async fn hash(
        &self,
        _request: Request<rpc::HashRequest>,
    ) -> Result<Response<rpc::HashResponse>, Status> {
        self.front.serving()?;
        self.front.read_index().await?;
        let (revision, hash) = {
            let mvcc = self.front.shared().mvcc.read();
            (mvcc.current_revision(), mvcc.hash())
        };
        Ok(Response::new(rpc::HashResponse {
            header: self.front.header_at(revision),
            hash: fold(hash),
        }))
    }

    async fn hash_kv(
        &self,
        request: Request<rpc::HashKvRequest>,
    ) -> Result<Response<rpc::HashKvResponse>, Status> {
        self.front.serving()?;
        let requested = request.into_inner().revision;
        // Each member answers for its own state, as etcd's members do.
        let (revision, hash, compact_revision) = {
            let mvcc = self.front.shared().mvcc.read();
            let revision = if requested > 0 {
                requested
            } else {
                mvcc.current_revision()
            };
            let hash = mvcc.hash_at(revision).map_err(super::status)?;
            (revision, hash, mvcc.compact_revision())
        };
        Ok(Response::new(rpc::HashKvResponse {
            header: self.front.header_at(revision),
            hash: fold(hash),
            compact_revision,
        }))
    }

    type SnapshotStream = ReceiverStream<Result<rpc::SnapshotResponse, Status>>;

    /// The member's state at its current revision, as etcd's clients expect a snapshot
    /// stream: a whole number of 512-byte sectors followed by the SHA-256 of them. The sectors
    /// hold the length of the state (8 bytes, little endian), the state in the store's snapshot
    /// format, and zeros to the sector's end. It is no bbolt database: `etcdctl snapshot save`
    /// stores and checks it, `etcdctl snapshot status` cannot read it.
    async fn snapshot(
        &self,
        _request: Request<rpc::SnapshotRequest>,
    ) -> Result<Response<Self::SnapshotStream>, Status> {
        self.front.serving()?;
        let (view, revision) = {
            let mvcc = self.front.shared().mvcc.read();
            (mvcc.snapshot_view(), mvcc.current_revision())
        };
        let header = self.front.header_at(revision);
        let (out, responses) = mpsc::channel(4);
        tokio::task::spawn_blocking(move || {
            let fail = |out: &mpsc::Sender<_>, e: &dyn std::fmt::Display| {
                let _ =
                    out.blocking_send(Err(Status::internal(format!("encoding the snapshot: {e}"))));
            };
            // The size first: the header and each message's `remaining_bytes` need it.
            let size = match view.encode_into(std::io::sink()) {
                Ok(size) => size as u64,
                Err(e) => return fail(&out, &e),
            };
            let total = (SNAPSHOT_HEADER + size).div_ceil(SNAPSHOT_SECTOR) * SNAPSHOT_SECTOR;
            let mut writer = SnapshotWriter {
                out: out.clone(),
                header,
                remaining: total,
                chunk: Vec::with_capacity(SNAPSHOT_CHUNK),
                digest: ring::digest::Context::new(&ring::digest::SHA256),
            };
            if writer.write_all(&size.to_le_bytes()).is_err() {
                return;
            }
            if let Err(e) = view.encode_into(&mut writer) {
                return fail(&out, &e);
            }
            let padding = (total - SNAPSHOT_HEADER - size) as usize;
            if writer.write_all(&vec![0; padding]).is_err() || writer.flush().is_err() {
                return;
            }
            let digest = writer.digest.finish();
            let _ = out.blocking_send(Ok(rpc::SnapshotResponse {
                header,
                remaining_bytes: 0,
                blob: bytes::Bytes::copy_from_slice(digest.as_ref()),
            }));
        });
        Ok(Response::new(ReceiverStream::new(responses)))
    }

    async fn move_leader(
        &self,
        _request: Request<rpc::MoveLeaderRequest>,
    ) -> Result<Response<rpc::MoveLeaderResponse>, Status> {
        Err(Status::unimplemented(
            "etcdserver: kemu's store does not move its leader on request",
        ))
    }
}

/// Cuts an encoded snapshot into messages as it is written.
struct SnapshotWriter {
    out: mpsc::Sender<Result<rpc::SnapshotResponse, Status>>,
    header: Option<rpc::ResponseHeader>,
    remaining: u64,
    chunk: Vec<u8>,
    digest: ring::digest::Context,
}

impl Write for SnapshotWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = buf.len().min(SNAPSHOT_CHUNK - self.chunk.len());
        self.chunk.extend_from_slice(&buf[..n]);
        if self.chunk.len() == SNAPSHOT_CHUNK {
            self.flush()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.chunk.is_empty() {
            return Ok(());
        }
        self.digest.update(&self.chunk);
        self.remaining = self.remaining.saturating_sub(self.chunk.len() as u64);
        let blob = bytes::Bytes::from(std::mem::replace(
            &mut self.chunk,
            Vec::with_capacity(SNAPSHOT_CHUNK),
        ));
        self.out
            .blocking_send(Ok(rpc::SnapshotResponse {
                header: self.header,
                remaining_bytes: self.remaining,
                blob,
            }))
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "client gone"))
    }
}
