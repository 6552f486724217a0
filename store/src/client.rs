//! [`Client`]: talks to any member of a store cluster over QUIC.
//!
//! Any member answers any request, so the client sticks to one member and moves to the next when
//! that one fails. Reads and other idempotent requests are retried until the deadline; a write that
//! may have reached a member but got no answer is reported as [`ClientError::Ambiguous`] — it may
//! or may not have been applied, exactly as etcd's clients must assume.
//!
//! Watches resume by themselves after a broken connection or a slow-watcher cancel, from the
//! revision after the last one delivered, so their consumer sees every event exactly once.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::mpsc;
use tracing::debug;
use transport::rpc::{Connection, RpcClient};
use transport::tls::TlsIdentity;
use transport::TransportError;

use crate::types::*;

/// How a client call can fail.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("no answer from the store; the request may or may not have been applied")]
    Ambiguous,
    #[error("no store member reachable within the deadline: {last}")]
    Unreachable { last: String },
    #[error("unexpected answer from the store: {0}")]
    Protocol(String),
    #[error("transport: {0}")]
    Transport(#[from] TransportError),
}

/// Client settings.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    pub endpoints: Vec<SocketAddr>,
    /// How long one attempt at one member may take before the client gives up on it.
    pub attempt_timeout: Duration,
    /// How long a call may keep retrying in all.
    pub call_timeout: Duration,
}

impl ClientConfig {
    pub fn new(endpoints: Vec<SocketAddr>) -> Self {
        ClientConfig {
            endpoints,
            attempt_timeout: Duration::from_secs(6),
            call_timeout: Duration::from_secs(15),
        }
    }
}

struct Slot {
    preferred: usize,
    connections: Vec<Option<Connection>>,
}

/// A store client; cheap to clone.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    rpc: RpcClient,
    config: ClientConfig,
    slot: Mutex<Slot>,
}

impl Client {
    /// A client presenting the certificate `identity` from `certs_dir`. Connections are made
    /// lazily.
    pub fn new(
        config: ClientConfig,
        certs_dir: &Path,
        identity: &str,
    ) -> Result<Client, ClientError> {
        if config.endpoints.is_empty() {
            return Err(ClientError::Store(StoreError::InvalidRequest {
                reason: "no endpoints given".into(),
            }));
        }
        let tls = TlsIdentity::load(certs_dir, identity)?;
        let rpc = RpcClient::new(&tls)?;
        let n = config.endpoints.len();
        // Spread clients over the members from the start.
        let preferred = (std::process::id() as usize + rand::random::<u8>() as usize) % n;
        let slot = Slot {
            preferred,
            connections: vec![None; n],
        };
        Ok(Client {
            inner: Arc::new(Inner {
                rpc,
                config,
                slot: Mutex::new(slot),
            }),
        })
    }

    /// Makes this client prefer endpoint `index` (the bench spreads its clients this way).
    pub fn prefer(&self, index: usize) {
        let mut slot = self.inner.slot.lock();
        slot.preferred = index % slot.connections.len();
    }

    pub fn endpoints(&self) -> &[SocketAddr] {
        &self.inner.config.endpoints
    }

    pub async fn range(&self, request: RangeRequest) -> Result<RangeResponse, ClientError> {
        match self.call(ClientRequest::Range(request), true).await? {
            ClientResponse::Range(r) => Ok(r),
            other => Err(unexpected(other)),
        }
    }

    /// Reads one key at the current revision (linearizable).
    pub async fn get(&self, key: impl Into<Bytes>) -> Result<Option<KeyValue>, ClientError> {
        let response = self
            .range(RangeRequest {
                range: KeyRange::single(key),
                ..Default::default()
            })
            .await?;
        Ok(response.kvs.into_iter().next())
    }

    pub async fn put(&self, request: PutRequest) -> Result<PutResponse, ClientError> {
        match self.call(ClientRequest::Put(request), false).await? {
            ClientResponse::Put(r) => Ok(r),
            other => Err(unexpected(other)),
        }
    }

    pub async fn delete_range(
        &self,
        request: DeleteRangeRequest,
    ) -> Result<DeleteRangeResponse, ClientError> {
        match self
            .call(ClientRequest::DeleteRange(request), false)
            .await?
        {
            ClientResponse::DeleteRange(r) => Ok(r),
            other => Err(unexpected(other)),
        }
    }

    pub async fn txn(&self, request: TxnRequest) -> Result<TxnResponse, ClientError> {
        match self.call(ClientRequest::Txn(request), false).await? {
            ClientResponse::Txn(r) => Ok(r),
            other => Err(unexpected(other)),
        }
    }

    pub async fn compact(&self, revision: Revision) -> Result<CompactResponse, ClientError> {
        match self
            .call(ClientRequest::Compact(CompactRequest { revision }), true)
            .await?
        {
            ClientResponse::Compact(r) => Ok(r),
            other => Err(unexpected(other)),
        }
    }

    pub async fn lease_grant(&self, ttl: i64) -> Result<LeaseGrantResponse, ClientError> {
        match self
            .call(
                ClientRequest::LeaseGrant(LeaseGrantRequest { ttl, id: 0 }),
                false,
            )
            .await?
        {
            ClientResponse::LeaseGrant(r) => Ok(r),
            other => Err(unexpected(other)),
        }
    }

    pub async fn lease_revoke(&self, id: LeaseId) -> Result<LeaseRevokeResponse, ClientError> {
        match self.call(ClientRequest::LeaseRevoke { id }, true).await? {
            ClientResponse::LeaseRevoke(r) => Ok(r),
            other => Err(unexpected(other)),
        }
    }

    pub async fn lease_keep_alive(
        &self,
        id: LeaseId,
    ) -> Result<LeaseKeepAliveResponse, ClientError> {
        match self
            .call(ClientRequest::LeaseKeepAlive { id }, true)
            .await?
        {
            ClientResponse::LeaseKeepAlive(r) => Ok(r),
            other => Err(unexpected(other)),
        }
    }

    /// The status of the member at `endpoint` (no retries elsewhere: the caller asked for that one).
    pub async fn status_of(&self, endpoint: SocketAddr) -> Result<StatusResponse, ClientError> {
        match self.call_at(endpoint, ClientRequest::Status).await? {
            ClientResponse::Status(r) => Ok(r),
            other => Err(unexpected(other)),
        }
    }

    /// The key-space hash of the member at `endpoint`, after a linearizable barrier.
    pub async fn hash_of(&self, endpoint: SocketAddr) -> Result<HashResponse, ClientError> {
        match self.call_at(endpoint, ClientRequest::Hash).await? {
            ClientResponse::Hash(r) => Ok(r),
            other => Err(unexpected(other)),
        }
    }

    async fn call_at(
        &self,
        endpoint: SocketAddr,
        request: ClientRequest,
    ) -> Result<ClientResponse, ClientError> {
        let attempt = async {
            let connection = self.inner.rpc.connect(endpoint).await?;
            let response: ClientResponse = connection.unary(&request).await?;
            connection.close();
            Ok::<_, ClientError>(response)
        };
        match tokio::time::timeout(self.inner.config.attempt_timeout, attempt).await {
            Ok(Ok(ClientResponse::Error(e))) => Err(ClientError::Store(e)),
            Ok(result) => result,
            Err(_) => Err(ClientError::Unreachable {
                last: format!("{endpoint} did not answer"),
            }),
        }
    }

    /// Sends `request`, moving between members on failures. `idempotent` requests are retried
    /// after a lost answer; others are then reported as ambiguous.
    async fn call(
        &self,
        request: ClientRequest,
        idempotent: bool,
    ) -> Result<ClientResponse, ClientError> {
        let deadline = Instant::now() + self.inner.config.call_timeout;
        let mut backoff = Duration::from_millis(20);
        let mut last_error = String::from("no attempt made");
        loop {
            if Instant::now() >= deadline {
                return Err(ClientError::Unreachable { last: last_error });
            }
            let (index, connection) = match self.connection().await {
                Ok(c) => c,
                Err(e) => {
                    last_error = e.to_string();
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_millis(500));
                    continue;
                }
            };
            let answer = tokio::time::timeout(
                self.inner.config.attempt_timeout,
                connection.unary::<ClientRequest, ClientResponse>(&request),
            )
            .await;
            match answer {
                Ok(Ok(ClientResponse::Error(e))) if e.is_retryable() => {
                    if matches!(e, StoreError::Timeout) && !idempotent {
                        return Err(ClientError::Ambiguous);
                    }
                    debug!(error = %e, "retrying");
                    last_error = e.to_string();
                    if matches!(e, StoreError::Unavailable { .. }) {
                        self.forget(index);
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_millis(500));
                }
                Ok(Ok(ClientResponse::Error(e))) => return Err(ClientError::Store(e)),
                Ok(Ok(response)) => return Ok(response),
                Ok(Err(e)) => {
                    self.forget(index);
                    if !idempotent {
                        // The connection broke under the request: it may have been received.
                        return Err(ClientError::Ambiguous);
                    }
                    last_error = e.to_string();
                }
                Err(_) => {
                    self.forget(index);
                    if !idempotent {
                        return Err(ClientError::Ambiguous);
                    }
                    last_error = format!(
                        "{} did not answer in time",
                        self.inner.config.endpoints[index]
                    );
                }
            }
        }
    }

    /// The connection to the preferred member, connecting if needed; a member that cannot be
    /// reached makes the next one preferred.
    async fn connection(&self) -> Result<(usize, Connection), ClientError> {
        let (index, existing) = {
            let slot = self.inner.slot.lock();
            (slot.preferred, slot.connections[slot.preferred].clone())
        };
        if let Some(connection) = existing {
            if !connection.is_closed() {
                return Ok((index, connection));
            }
        }
        let endpoint = self.inner.config.endpoints[index];
        match tokio::time::timeout(Duration::from_secs(2), self.inner.rpc.connect(endpoint)).await {
            Ok(Ok(connection)) => {
                self.inner.slot.lock().connections[index] = Some(connection.clone());
                Ok((index, connection))
            }
            Ok(Err(e)) => {
                self.forget(index);
                Err(e.into())
            }
            Err(_) => {
                self.forget(index);
                Err(ClientError::Unreachable {
                    last: format!("connecting to {endpoint} timed out"),
                })
            }
        }
    }

    /// Drops the connection to member `index` and prefers the next member.
    fn forget(&self, index: usize) {
        let mut slot = self.inner.slot.lock();
        if let Some(connection) = slot.connections[index].take() {
            connection.close();
        }
        if slot.preferred == index {
            slot.preferred = (index + 1) % slot.connections.len();
        }
    }

    /// Opens a watch. The stream resumes by itself across member failures and slow-watcher
    /// cancels; it ends with a `Canceled` message only when the start revision was compacted.
    pub async fn watch(&self, request: WatchRequest) -> Result<WatchStream, ClientError> {
        let (tx, rx) = mpsc::channel(1024);
        let client = self.clone();
        tokio::spawn(async move { client.run_watch(request, tx).await });
        Ok(WatchStream { rx })
    }

    async fn run_watch(
        self,
        mut request: WatchRequest,
        tx: mpsc::Sender<Result<WatchResponse, ClientError>>,
    ) {
        let mut created_sent = false;
        let mut backoff = Duration::from_millis(20);
        loop {
            let (index, connection) = match self.connection().await {
                Ok(c) => c,
                Err(e) => {
                    debug!(error = %e, "watch reconnecting");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_millis(500));
                    if tx.is_closed() {
                        return;
                    }
                    continue;
                }
            };
            let mut stream = match connection
                .server_stream::<ClientRequest, ClientResponse>(&ClientRequest::Watch(
                    request.clone(),
                ))
                .await
            {
                Ok(s) => s,
                Err(e) => {
                    debug!(error = %e, "watch stream failed to open");
                    self.forget(index);
                    continue;
                }
            };
            loop {
                let item = tokio::select! {
                    _ = tx.closed() => return,
                    item = stream.next() => item,
                };
                let message = match item {
                    Some(Ok(ClientResponse::Watch(message))) => message,
                    Some(Ok(ClientResponse::Error(e))) => {
                        let retry = e.is_retryable();
                        if !retry {
                            let _ = tx.send(Err(ClientError::Store(e))).await;
                            return;
                        }
                        break;
                    }
                    Some(Ok(other)) => {
                        let _ = tx.send(Err(unexpected(other))).await;
                        return;
                    }
                    Some(Err(e)) => {
                        debug!(error = %e, "watch stream broke; resuming");
                        self.forget(index);
                        break;
                    }
                    None => break,
                };
                backoff = Duration::from_millis(20);
                match &message {
                    WatchResponse::Created { header } => {
                        if request.start_revision == 0 {
                            request.start_revision = header.revision + 1;
                        }
                        if created_sent {
                            continue;
                        }
                        created_sent = true;
                    }
                    WatchResponse::Events { header, events } => {
                        let last = events.last().map(|e| e.kv.mod_revision).unwrap_or(0);
                        request.start_revision =
                            request.start_revision.max(header.revision.max(last) + 1);
                    }
                    WatchResponse::Progress { header } => {
                        request.start_revision = request.start_revision.max(header.revision + 1);
                    }
                    WatchResponse::Canceled {
                        resume_revision, ..
                    } if *resume_revision > 0 => {
                        request.start_revision = *resume_revision;
                        break;
                    }
                    WatchResponse::Canceled { .. } => {
                        let _ = tx.send(Ok(message)).await;
                        return;
                    }
                }
                if tx.send(Ok(message)).await.is_err() {
                    return;
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_millis(500));
        }
    }
}

/// Messages of one watch, in order.
pub struct WatchStream {
    rx: mpsc::Receiver<Result<WatchResponse, ClientError>>,
}

impl WatchStream {
    /// The next message; `None` once the watch has ended.
    pub async fn next(&mut self) -> Option<Result<WatchResponse, ClientError>> {
        self.rx.recv().await
    }
}

fn unexpected(response: ClientResponse) -> ClientError {
    match response {
        ClientResponse::Error(e) => ClientError::Store(e),
        other => ClientError::Protocol(format!("{other:?}").chars().take(200).collect()),
    }
}
