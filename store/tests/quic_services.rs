//! The member's QUIC ports against callers it does not serve and frames it will not read: a
//! certificate of the cluster's CA that may not use the store (or is not a member, on the peer
//! port) is refused before a byte of its streams is read, and a request frame over the limit is
//! answered without being read.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{Cluster, ADMIN, KUBE_ADMIN, STRANGER};
use store::types::{ClientRequest, ClientResponse, StoreError};
use transport::rpc::RpcClient;
use transport::tls::TlsIdentity;
use transport::TransportError;

const WAIT: Duration = Duration::from_secs(10);
/// What an attacker tries to make a member hold: half of what a frame may claim.
const ATTEMPT_BYTES: usize = 32 * 1024 * 1024;

fn client(cluster: &Cluster, identity: &str) -> RpcClient {
    let identity = TlsIdentity::load(&cluster.certs(), identity).expect("identity");
    RpcClient::new(&identity).expect("client")
}

/// Sends a frame of [`ATTEMPT_BYTES`] on a new stream; the error that stopped it, if any.
async fn send_big_frame(rpc: &RpcClient, addr: SocketAddr) -> Option<TransportError> {
    let connection = rpc.connect(addr).await.expect("the handshake succeeds");
    let sent = tokio::time::timeout(WAIT, async {
        let (mut send, _recv) = connection.raw().open_bi().await?;
        send.write_all(&(ATTEMPT_BYTES as u32).to_be_bytes())
            .await?;
        send.write_all(&vec![0u8; ATTEMPT_BYTES]).await?;
        send.finish()?;
        // Delivered means acknowledged: the member took every byte in.
        send.stopped().await?;
        Ok::<_, TransportError>(())
    })
    .await
    .expect("the member answers in time");
    sent.err()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_the_member_does_not_serve_cannot_make_it_read() {
    let cluster = Cluster::start(1, |_| {});
    cluster.leader().await;
    let member = &cluster.members[0].config;

    // A certificate from the cluster's CA whose organisation may not use the store, the
    // Kubernetes API's admin (system:masters), and the store's admin on the raft port, which
    // only members may use.
    for (identity, addr) in [
        (STRANGER, member.listen_client),
        (KUBE_ADMIN, member.listen_client),
        (ADMIN, member.listen_peer),
    ] {
        let rpc = client(&cluster, identity);
        let refused = send_big_frame(&rpc, addr).await;
        assert!(
            refused.as_ref().is_some_and(TransportError::is_refused),
            "{identity} on {addr}: {refused:?}"
        );
        let connection = rpc.connect(addr).await.expect("handshake");
        let call = connection
            .unary::<_, ClientResponse>(&ClientRequest::Status)
            .await
            .expect_err("refused");
        assert!(call.is_refused(), "{call}");
    }

    // Served callers keep their limits: a frame over the request limit is answered unread.
    let admin = client(&cluster, ADMIN);
    let connection = admin.connect(member.listen_client).await.expect("connect");
    let (mut send, mut recv) = connection.raw().open_bi().await.expect("stream");
    let claimed = 60u32 * 1024 * 1024;
    send.write_all(&claimed.to_be_bytes())
        .await
        .expect("prefix");
    let answer = tokio::time::timeout(WAIT, recv.read_to_end(1 << 20))
        .await
        .expect("answered in time")
        .expect("an answer");
    let answer: ClientResponse = transport::frame::decode(&answer).expect("a response");
    assert!(
        matches!(
            answer,
            ClientResponse::Error(StoreError::TooLarge { size, limit })
                if size == claimed as usize && limit == member.max_request_bytes
        ),
        "{answer:?}"
    );
    let status: ClientResponse = connection
        .unary(&ClientRequest::Status)
        .await
        .expect("status");
    assert!(matches!(status, ClientResponse::Status(_)), "{status:?}");
}
