//! etcd's v3 gRPC API on a store member, beside its QUIC front ([`crate::service`]).
//!
//! etcd's clients — `etcdctl`, the etcd client libraries, anything built on them — use kemu's
//! store as they use etcd. The parts:
//!
//! - [`pb`]: the protobuf messages and service traits, generated from `store/proto/` (the wire
//!   contract of etcd's `etcdserverpb` and `mvccpb` packages) and committed, so that building
//!   the store needs no protobuf compiler. `store/proto/README.md` says how to regenerate them.
//! - `kv`: Range, Put, DeleteRange, Txn and Compact.
//! - `watch`: any number of watches on one stream, each catching up from the MVCC history and
//!   then following the member's watch hub.
//! - `lease`: grant, revoke, keep-alive, time-to-live and the lease list.
//! - `maintenance`: Cluster's member list, and Maintenance's status, hashes, alarms,
//!   defragment and snapshot.
//! - `wire_errors`: gRPC's own decoding errors, in the words etcd's gRPC server uses.
//!
//! Every call maps onto the member as the QUIC front's do: a write is a raft proposal
//! ([`MemberHandle::propose`]) answered once this member applied it; a read waits for a ReadIndex
//! round unless it asks to be serializable. Errors carry etcd's gRPC codes and messages, which
//! etcd's clients match on (`rpctypes`). Connections are TLS with a client certificate from the
//! cluster CA, whose organisation must be one the QUIC front admits ([`CLIENT_ORGS`]).

mod kv;
mod lease;
mod maintenance;

pub use maintenance::{snapshot_state, API_VERSION};
mod watch;
mod wire_errors;

/// The generated protobuf code (see the module docs).
#[allow(clippy::all, clippy::pedantic, missing_docs, rustdoc::all)]
pub mod pb {
    /// etcd's key-value records.
    pub mod mvccpb {
        include!("pb/mvccpb.rs");
    }
    /// etcd's client services and their messages.
    pub mod etcdserverpb {
        include!("pb/etcdserverpb.rs");
    }
}

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::server::Connected;
use tonic::{Request, Status};
use tracing::{debug, info, warn};
use transport::tls::TlsIdentity;

use crate::member::{MemberError, MemberHandle, Shared};
use crate::service::CLIENT_ORGS;
use crate::types::{Command, CommandResult, ResponseHeader, Revision, StoreError};
use pb::etcdserverpb as rpc;

/// How long a client may take over its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// What etcd's gRPC server accepts beyond its request limit (`grpcOverheadBytes`): a request
/// between the two reaches the member and is refused there as too large, with etcd's message.
const GRPC_OVERHEAD_BYTES: usize = 512 * 1024;

/// The etcd messages this front answers with (etcd's `rpctypes`; clients match on them).
pub mod messages {
    pub const EMPTY_KEY: &str = "etcdserver: key is not provided";
    pub const KEY_NOT_FOUND: &str = "etcdserver: key not found";
    pub const VALUE_PROVIDED: &str = "etcdserver: value is provided";
    pub const LEASE_PROVIDED: &str = "etcdserver: lease is provided";
    pub const TOO_MANY_OPS: &str = "etcdserver: too many operations in txn request";
    pub const DUPLICATE_KEY: &str = "etcdserver: duplicate key given in txn request";
    pub const COMPACTED: &str = "etcdserver: mvcc: required revision has been compacted";
    pub const FUTURE_REV: &str = "etcdserver: mvcc: required revision is a future revision";
    pub const LEASE_NOT_FOUND: &str = "etcdserver: requested lease not found";
    pub const LEASE_EXISTS: &str = "etcdserver: lease already exists";
    pub const LEASE_TTL_TOO_LARGE: &str = "etcdserver: too large lease TTL";
    pub const REQUEST_TOO_LARGE: &str = "etcdserver: request is too large";
    pub const NO_LEADER: &str = "etcdserver: no leader";
    pub const TIMEOUT: &str = "etcdserver: request timed out";
    pub const PERMISSION_DENIED: &str = "etcdserver: permission denied";
    pub const INVALID_SORT_OPTION: &str = "etcdserver: invalid sort option";
}

/// The gRPC status etcd answers a store error with.
pub fn status(error: StoreError) -> Status {
    use messages::*;
    match error {
        StoreError::Compacted { .. } => Status::out_of_range(COMPACTED),
        StoreError::FutureRevision { .. } => Status::out_of_range(FUTURE_REV),
        StoreError::LeaseNotFound { .. } => Status::not_found(LEASE_NOT_FOUND),
        StoreError::NoLeader { .. } => Status::unavailable(NO_LEADER),
        StoreError::Timeout => Status::unavailable(TIMEOUT),
        StoreError::Unavailable { reason } => Status::unavailable(format!("etcdserver: {reason}")),
        StoreError::TooLarge { .. } => Status::invalid_argument(REQUEST_TOO_LARGE),
        StoreError::PermissionDenied { .. } => Status::permission_denied(PERMISSION_DENIED),
        // The state machine words its refusals as etcd does; a few have codes of their own.
        StoreError::InvalidRequest { reason } => match reason.as_str() {
            "lease already exists" => Status::failed_precondition(LEASE_EXISTS),
            _ => Status::invalid_argument(format!("etcdserver: {reason}")),
        },
    }
}

/// Who is on a connection, decided once at its TLS handshake.
#[derive(Clone, Debug)]
struct Caller {
    /// The client certificate's common name.
    name: Arc<str>,
    /// Whether its organisation may use the store.
    allowed: bool,
}

/// Refuses every call from a connection whose certificate may not use the store.
fn authorize(request: Request<()>) -> Result<Request<()>, Status> {
    match request.extensions().get::<Caller>() {
        Some(caller) if caller.allowed => Ok(request),
        Some(caller) => {
            debug!(caller = %caller.name, "refusing a gRPC call");
            Err(Status::permission_denied(messages::PERMISSION_DENIED))
        }
        None => Err(Status::permission_denied(messages::PERMISSION_DENIED)),
    }
}

/// A client's TLS connection, carrying who it is into every request's extensions.
struct TlsConnection {
    stream: tokio_rustls::server::TlsStream<TcpStream>,
    caller: Caller,
}

impl Connected for TlsConnection {
    type ConnectInfo = Caller;

    fn connect_info(&self) -> Caller {
        self.caller.clone()
    }
}

impl AsyncRead for TlsConnection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsConnection {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// What every service of the front shares: the member and the cluster's identity.
pub(crate) struct Front {
    member: MemberHandle,
    /// etcd's cluster id: derived from the member list, the same on every member.
    cluster_id: u64,
}

impl Front {
    fn new(member: MemberHandle) -> Front {
        let config = &member.shared().config;
        let mut hash = Fnv::default();
        for (name, addr) in &config.initial_cluster {
            hash.write(name.as_bytes());
            hash.write(addr.to_string().as_bytes());
        }
        Front {
            cluster_id: hash.0,
            member,
        }
    }

    fn shared(&self) -> &Arc<Shared> {
        self.member.shared()
    }

    /// etcd's header for a store header (revision, member and term).
    fn header(&self, header: &ResponseHeader) -> Option<rpc::ResponseHeader> {
        Some(rpc::ResponseHeader {
            cluster_id: self.cluster_id,
            member_id: header.member_id,
            revision: header.revision,
            raft_term: header.raft_term,
        })
    }

    /// A header at `revision` from this member.
    fn header_at(&self, revision: Revision) -> Option<rpc::ResponseHeader> {
        self.header(&self.shared().header(revision))
    }

    /// A header at this member's current revision.
    fn current_header(&self) -> Option<rpc::ResponseHeader> {
        let revision = self.shared().mvcc.read().current_revision();
        self.header_at(revision)
    }

    /// Refuses service while the member rebuilds its state after a start (the client takes the
    /// call to another member, as from the QUIC front).
    fn serving(&self) -> Result<(), Status> {
        if self.shared().is_restoring() {
            return Err(Status::unavailable(format!(
                "etcdserver: member {} is restoring its state after a start",
                self.shared().config.name
            )));
        }
        Ok(())
    }

    /// Waits for a ReadIndex round, so that a read served afterwards is linearizable.
    async fn read_index(&self) -> Result<(), Status> {
        self.member.read_index().await.map_err(status)
    }

    /// Replicates `command` and returns what applying it gave, a refusal as a status.
    async fn propose(&self, command: &Command) -> Result<CommandResult, Status> {
        match self.member.propose(command).await.map_err(status)? {
            CommandResult::Error(e) => Err(status(e)),
            result => Ok(result),
        }
    }
}

/// FNV-1a, 64 bit: stable across builds, for ids derived from names.
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// A member's gRPC front, bound and ready to serve.
pub struct GrpcFront {
    listener: TcpListener,
    acceptor: TlsAcceptor,
    front: Arc<Front>,
}

impl GrpcFront {
    /// Binds the front's TCP listener at `addr`.
    pub async fn bind(
        addr: SocketAddr,
        identity: &TlsIdentity,
        member: MemberHandle,
    ) -> Result<GrpcFront, MemberError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| MemberError::GrpcBind { addr, source })?;
        let tls = identity.grpc_server_config()?;
        Ok(GrpcFront {
            listener,
            acceptor: TlsAcceptor::from(Arc::new(tls)),
            front: Arc::new(Front::new(member)),
        })
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Serves until `shutdown` resolves.
    pub async fn serve(self, shutdown: impl Future<Output = ()> + Send + 'static) {
        let GrpcFront {
            listener,
            acceptor,
            front,
        } = self;
        let config = &front.shared().config;
        let limit = config.max_request_bytes + GRPC_OVERHEAD_BYTES;
        let (connections, incoming) = mpsc::channel::<std::io::Result<TlsConnection>>(64);
        let (stop_accepting, mut accepting_stopped) = tokio::sync::oneshot::channel::<()>();
        // Handshakes run side by side, so a slow client holds up no other.
        let acceptor_task = tokio::spawn(async move {
            loop {
                let (tcp, peer) = tokio::select! {
                    biased;
                    _ = &mut accepting_stopped => return,
                    accepted = listener.accept() => match accepted {
                        Ok(accepted) => accepted,
                        Err(e) => {
                            warn!(error = %e, "accepting a gRPC connection failed");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                    },
                };
                let _ = tcp.set_nodelay(true);
                let acceptor = acceptor.clone();
                let connections = connections.clone();
                tokio::spawn(async move {
                    let stream =
                        match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                            Ok(Ok(stream)) => stream,
                            Ok(Err(e)) => {
                                debug!(%peer, error = %e, "gRPC TLS handshake failed");
                                return;
                            }
                            Err(_) => {
                                debug!(%peer, "gRPC TLS handshake timed out");
                                return;
                            }
                        };
                    let caller = caller_of(&stream);
                    let _ = connections.send(Ok(TlsConnection { stream, caller })).await;
                });
            }
        });

        let kv = rpc::kv_server::KvServer::new(kv::KvService::new(front.clone()))
            .max_decoding_message_size(limit);
        let watch = rpc::watch_server::WatchServer::new(watch::WatchService::new(front.clone()))
            .max_decoding_message_size(limit);
        let lease = rpc::lease_server::LeaseServer::new(lease::LeaseService::new(front.clone()))
            .max_decoding_message_size(limit);
        let cluster = rpc::cluster_server::ClusterServer::new(maintenance::ClusterService::new(
            front.clone(),
        ))
        .max_decoding_message_size(limit);
        let maintenance = rpc::maintenance_server::MaintenanceServer::new(
            maintenance::MaintenanceService::new(front.clone()),
        )
        .max_decoding_message_size(limit);
        let routes = tonic::service::Routes::new(InterceptedService::new(kv, authorize))
            .add_service(InterceptedService::new(watch, authorize))
            .add_service(InterceptedService::new(lease, authorize))
            .add_service(InterceptedService::new(cluster, authorize))
            .add_service(InterceptedService::new(maintenance, authorize));
        info!(addr = ?front.shared().config.listen_grpc, "etcd gRPC front serving");
        let served = tonic::transport::Server::builder()
            .layer(wire_errors::WireErrorsLayer)
            .add_routes(routes)
            .serve_with_incoming_shutdown(
                tokio_stream::wrappers::ReceiverStream::new(incoming),
                shutdown,
            )
            .await;
        let _ = stop_accepting.send(());
        let _ = acceptor_task.await;
        if let Err(e) = served {
            warn!(error = %e, "the gRPC front stopped with an error");
        }
    }
}

/// Who a verified TLS connection's client certificate names.
fn caller_of(stream: &tokio_rustls::server::TlsStream<TcpStream>) -> Caller {
    let leaf = stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|chain| chain.first());
    let (name, organizations) = match leaf.map(|cert| transport::tls::certificate_subject(cert)) {
        Some(Ok((name, organizations))) => (name.unwrap_or_default(), organizations),
        _ => (String::new(), Vec::new()),
    };
    Caller {
        allowed: organizations
            .iter()
            .any(|o| CLIENT_ORGS.contains(&o.as_str())),
        name: name.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The generated code was made from the .proto files as they are (see `store/proto/`).
    #[test]
    fn generated_code_matches_the_proto_files() {
        let mut hash = Fnv::default();
        hash.write(include_bytes!("../../proto/mvccpb/kv.proto"));
        hash.write(include_bytes!("../../proto/etcdserverpb/rpc.proto"));
        assert_eq!(
            format!("{:016x}", hash.0),
            include_str!("pb/digest").trim(),
            "store/proto/ changed: regenerate with \
             `cargo run --manifest-path store/proto/codegen/Cargo.toml`"
        );
    }

    #[test]
    fn store_errors_become_etcds_statuses() {
        use tonic::Code;
        let cases = [
            (
                StoreError::Compacted {
                    requested: 1,
                    compact_revision: 5,
                },
                Code::OutOfRange,
                messages::COMPACTED,
            ),
            (
                StoreError::FutureRevision {
                    requested: 9,
                    current: 5,
                },
                Code::OutOfRange,
                messages::FUTURE_REV,
            ),
            (
                StoreError::LeaseNotFound { id: 7 },
                Code::NotFound,
                messages::LEASE_NOT_FOUND,
            ),
            (
                StoreError::TooLarge { size: 9, limit: 1 },
                Code::InvalidArgument,
                messages::REQUEST_TOO_LARGE,
            ),
            (StoreError::Timeout, Code::Unavailable, messages::TIMEOUT),
        ];
        for (error, code, message) in cases {
            let status = status(error);
            assert_eq!((status.code(), status.message()), (code, message));
        }
        // The state machine's own refusals, as it words them.
        let mut mvcc = crate::mvcc::Mvcc::new();
        let grant = Command::LeaseGrant(crate::types::LeaseGrantRequest { ttl: 5, id: 3 });
        mvcc.apply(&grant);
        let CommandResult::Error(again) = mvcc.apply(&grant).0 else {
            panic!("a second grant of lease 3 is refused")
        };
        let again = status(again);
        assert_eq!(
            (again.code(), again.message()),
            (Code::FailedPrecondition, messages::LEASE_EXISTS)
        );
        let put = |key: &'static str| {
            crate::types::RequestOp::Put(crate::types::PutRequest {
                key: bytes::Bytes::from_static(key.as_bytes()),
                ..Default::default()
            })
        };
        let twice = Command::Txn(crate::types::TxnRequest {
            compare: vec![],
            success: vec![put("k"), put("k")],
            failure: vec![],
        });
        let CommandResult::Error(twice) = mvcc.apply(&twice).0 else {
            panic!("a key put twice in one txn is refused")
        };
        let twice = status(twice);
        assert_eq!(
            (twice.code(), twice.message()),
            (Code::InvalidArgument, messages::DUPLICATE_KEY)
        );
        let CommandResult::Error(empty) = mvcc.apply(&Command::Put(Default::default())).0 else {
            panic!("an empty key is refused")
        };
        let empty = status(empty);
        assert_eq!(
            (empty.code(), empty.message()),
            (Code::InvalidArgument, messages::EMPTY_KEY)
        );
    }
}
