//! End-to-end RPC tests over loopback with real certificates.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use transport::frame::FrameLimits;
use transport::pki::{create_ca, issue, CertSpec};
use transport::rpc::{Call, Handler, Peer, RpcClient, RpcServer};
use transport::tls::TlsIdentity;
use transport::TransportError;

const WAIT: Duration = Duration::from_secs(10);

#[derive(Debug, Serialize, Deserialize)]
enum Req {
    Echo(String),
    WhoAmI,
    Count(u32),
    Watch,
    Upload,
    Chunk(u32),
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
enum Resp {
    Echo(String),
    Peer {
        name: String,
        organizations: Vec<String>,
    },
    Item(u32),
    Received(Vec<u32>),
    TooLarge {
        size: u64,
        limit: usize,
    },
}

/// The test service's frame limits: small and short, so tests of them run fast.
const LIMITS: FrameLimits = FrameLimits {
    max_frame_bytes: 64 * 1024,
    frame_timeout: Duration::from_millis(500),
};

/// The organisation the test service refuses to serve.
const UNTRUSTED: &str = "untrusted";

/// Reports what the handler saw, so tests can wait on server-side events.
struct TestHandler {
    watch_closed: mpsc::UnboundedSender<()>,
    uploads: mpsc::UnboundedSender<Vec<u32>>,
}

impl Handler for TestHandler {
    type Request = Req;
    type Response = Resp;

    fn admit(&self, peer: &Peer) -> Result<(), String> {
        if peer.organizations.iter().any(|o| o == UNTRUSTED) {
            return Err(format!("{} is not served here", peer.name));
        }
        Ok(())
    }

    fn limits(&self) -> FrameLimits {
        LIMITS
    }

    fn too_large(&self, size: u64, limit: usize) -> Option<Resp> {
        Some(Resp::TooLarge { size, limit })
    }

    async fn handle(&self, peer: Peer, request: Req, mut call: Call<Resp>) {
        let result = match request {
            Req::Echo(s) => call.reply(&Resp::Echo(s)).await,
            Req::WhoAmI => {
                call.reply(&Resp::Peer {
                    name: peer.name,
                    organizations: peer.organizations,
                })
                .await
            }
            Req::Count(n) => {
                let mut result = Ok(());
                for i in 0..n {
                    result = call.send(&Resp::Item(i)).await;
                    if result.is_err() {
                        break;
                    }
                }
                match result {
                    Ok(()) => call.finish().await,
                    Err(e) => Err(e),
                }
            }
            Req::Watch => {
                let sent = call.send(&Resp::Item(0)).await;
                call.closed().await;
                let _ = self.watch_closed.send(());
                sent
            }
            Req::Upload => {
                let mut received = Vec::new();
                loop {
                    match call.recv::<Req>().await {
                        Ok(Some(Req::Chunk(i))) => received.push(i),
                        Ok(Some(other)) => panic!("unexpected frame {other:?}"),
                        Ok(None) => break,
                        Err(e) => panic!("upload failed: {e}"),
                    }
                }
                let _ = self.uploads.send(received.clone());
                call.reply(&Resp::Received(received)).await
            }
            Req::Chunk(_) => Ok(()),
        };
        if let Err(e) = result {
            tracing::debug!(error = %e, "handler ended with an error");
        }
    }
}

struct Cluster {
    dir: tempfile::TempDir,
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<()>>,
    watch_closed: mpsc::UnboundedReceiver<()>,
    uploads: mpsc::UnboundedReceiver<Vec<u32>>,
}

impl Cluster {
    async fn start() -> Cluster {
        let dir = tempfile::tempdir().expect("tempdir");
        create_ca(dir.path(), "test").expect("ca");
        issue_cert(dir.path(), "server", &["system:servers"]);
        issue_cert(dir.path(), "alice", &["system:masters", "devs"]);
        issue_cert(dir.path(), "eve", &[UNTRUSTED]);
        Cluster::serve(dir).await
    }

    /// The same server restarted: another process with the same certificate and key files
    /// (on another port; a [`MovableRelay`] gives both one address).
    async fn restarted(&self) -> Cluster {
        let dir = tempfile::tempdir().expect("tempdir");
        for entry in std::fs::read_dir(self.dir.path()).expect("read the certificates") {
            let path = entry.expect("entry").path();
            let name = path.file_name().expect("a file name");
            std::fs::copy(&path, dir.path().join(name)).expect("copy a certificate");
        }
        Cluster::serve(dir).await
    }

    async fn serve(dir: tempfile::TempDir) -> Cluster {
        let identity = TlsIdentity::load(dir.path(), "server").expect("server identity");
        let server =
            RpcServer::bind("127.0.0.1:0".parse().expect("addr"), &identity).expect("bind");
        let addr = server.local_addr().expect("local addr");
        let (watch_tx, watch_closed) = mpsc::unbounded_channel();
        let (uploads_tx, uploads) = mpsc::unbounded_channel();
        let handler = Arc::new(TestHandler {
            watch_closed: watch_tx,
            uploads: uploads_tx,
        });
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(server.serve(handler, async move {
            let _ = stopped.await;
        }));
        Cluster {
            dir,
            addr,
            stop: Some(stop),
            server: Some(server),
            watch_closed,
            uploads,
        }
    }

    fn client(&self, name: &str) -> RpcClient {
        let identity = TlsIdentity::load(self.dir.path(), name).expect("client identity");
        RpcClient::new(&identity).expect("client")
    }

    async fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(server) = self.server.take() {
            tokio::time::timeout(WAIT, server)
                .await
                .expect("server stops in time")
                .expect("server task");
        }
    }
}

fn issue_cert(dir: &Path, name: &str, organizations: &[&str]) {
    issue(
        dir,
        &CertSpec {
            name: name.into(),
            organizations: organizations.iter().map(|o| o.to_string()).collect(),
            sans: vec![],
        },
    )
    .expect("issue");
}

#[tokio::test]
async fn unary_round_trip_sees_client_identity() {
    let mut cluster = Cluster::start().await;
    let conn = cluster
        .client("alice")
        .connect(cluster.addr)
        .await
        .expect("connect");
    let echoed: Resp = conn.unary(&Req::Echo("hello".into())).await.expect("echo");
    assert_eq!(echoed, Resp::Echo("hello".into()));
    let who: Resp = conn.unary(&Req::WhoAmI).await.expect("whoami");
    assert_eq!(
        who,
        Resp::Peer {
            name: "alice".into(),
            organizations: vec!["system:masters".into(), "devs".into()],
        }
    );

    // Many concurrent calls share one connection.
    let calls = (0..200).map(|i| {
        let conn = conn.clone();
        async move { conn.unary::<_, Resp>(&Req::Echo(i.to_string())).await }
    });
    let results = futures::future::join_all(calls).await;
    for (i, result) in results.into_iter().enumerate() {
        assert_eq!(result.expect("call"), Resp::Echo(i.to_string()));
    }

    cluster.shutdown().await;
    let err = conn
        .unary::<_, Resp>(&Req::WhoAmI)
        .await
        .expect_err("server is gone");
    assert!(err.is_connection_lost(), "{err:?}");
    assert!(conn.is_closed());
}

#[tokio::test]
async fn server_stream_in_order_and_drop_cancels() {
    let mut cluster = Cluster::start().await;
    let conn = cluster
        .client("alice")
        .connect(cluster.addr)
        .await
        .expect("connect");

    let mut stream = conn
        .server_stream::<_, Resp>(&Req::Count(1000))
        .await
        .expect("stream");
    for i in 0..1000 {
        let item = tokio::time::timeout(WAIT, stream.next())
            .await
            .expect("item in time")
            .expect("stream not over")
            .expect("item");
        assert_eq!(item, Resp::Item(i));
    }
    assert!(stream.next().await.is_none(), "clean end after 1000 items");

    let mut watch = conn
        .server_stream::<_, Resp>(&Req::Watch)
        .await
        .expect("watch");
    let first = watch.next().await.expect("first event").expect("item");
    assert_eq!(first, Resp::Item(0));
    drop(watch);
    tokio::time::timeout(WAIT, cluster.watch_closed.recv())
        .await
        .expect("server saw the watch closed")
        .expect("channel open");
    cluster.shutdown().await;
}

#[tokio::test]
async fn client_stream_delivers_every_frame() {
    let mut cluster = Cluster::start().await;
    let conn = cluster
        .client("alice")
        .connect(cluster.addr)
        .await
        .expect("connect");

    // A client stream may rest between frames for longer than a frame may take.
    let mut sink = conn.client_stream(&Req::Upload).await.expect("open");
    tokio::time::sleep(LIMITS.frame_timeout * 2).await;
    for i in 0..100 {
        sink.send(&Req::Chunk(i)).await.expect("send");
    }
    sink.finish().await.expect("finish");
    let received = tokio::time::timeout(WAIT, cluster.uploads.recv())
        .await
        .expect("upload in time")
        .expect("channel open");
    assert_eq!(received, (0..100).collect::<Vec<_>>());

    let mut sink = conn.client_stream(&Req::Upload).await.expect("open");
    for i in 0..100 {
        sink.send(&Req::Chunk(i)).await.expect("send");
    }
    let reply: Resp = sink.finish_with_reply().await.expect("reply");
    assert_eq!(reply, Resp::Received((0..100).collect()));
    cluster.shutdown().await;
}

/// A call on a connection the server should have refused must not succeed.
async fn assert_refused(client: &RpcClient, addr: SocketAddr) {
    match client.connect(addr).await {
        Err(e) => assert!(e.is_connection_lost(), "{e:?}"),
        Ok(conn) => {
            let err = conn
                .unary::<_, Resp>(&Req::WhoAmI)
                .await
                .expect_err("server must refuse the client");
            assert!(err.is_connection_lost(), "{err:?}");
        }
    }
}

#[tokio::test]
async fn client_from_another_ca_is_refused() {
    let mut cluster = Cluster::start().await;

    // mallory trusts the real CA (so she accepts the server) but her certificate comes from
    // another CA.
    let other = tempfile::tempdir().expect("tempdir");
    create_ca(other.path(), "other").expect("other ca");
    issue_cert(other.path(), "mallory", &["system:masters"]);
    let mixed = tempfile::tempdir().expect("tempdir");
    std::fs::copy(
        cluster.dir.path().join("ca.crt"),
        mixed.path().join("ca.crt"),
    )
    .expect("copy");
    for file in ["mallory.crt", "mallory.key"] {
        std::fs::copy(other.path().join(file), mixed.path().join(file)).expect("copy");
    }
    let mallory = TlsIdentity::load(mixed.path(), "mallory").expect("identity");
    assert_refused(&RpcClient::new(&mallory).expect("client"), cluster.addr).await;

    // And a client that trusts only the other CA refuses the server itself.
    let outsider = TlsIdentity::load(other.path(), "mallory").expect("identity");
    let err = RpcClient::new(&outsider)
        .expect("client")
        .connect(cluster.addr)
        .await
        .expect_err("server certificate is from an unknown CA");
    assert!(matches!(err, TransportError::Connect { .. }), "{err:?}");

    // The server is unaffected.
    let conn = cluster
        .client("alice")
        .connect(cluster.addr)
        .await
        .expect("connect");
    let echoed: Resp = conn
        .unary(&Req::Echo("still up".into()))
        .await
        .expect("echo");
    assert_eq!(echoed, Resp::Echo("still up".into()));
    cluster.shutdown().await;
}

#[tokio::test]
async fn client_without_certificate_is_refused() {
    let mut cluster = Cluster::start().await;
    let mut roots = rustls::RootCertStore::empty();
    let ca_pem = std::fs::read(cluster.dir.path().join("ca.crt")).expect("read ca");
    use rustls_pki_types::pem::PemObject;
    for cert in rustls_pki_types::CertificateDer::pem_slice_iter(&ca_pem) {
        roots.add(cert.expect("pem")).expect("add root");
    }
    let crypto = rustls::ClientConfig::builder_with_provider(transport::tls::provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let mut crypto = crypto;
    crypto.alpn_protocols = vec![b"kemu/1".to_vec()];
    let config = transport::tls::quinn_client_config(crypto).expect("quinn config");
    let anonymous = RpcClient::with_config(config).expect("client");
    assert_refused(&anonymous, cluster.addr).await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn bad_frames_reset_only_their_stream() {
    let mut cluster = Cluster::start().await;
    let conn = cluster
        .client("alice")
        .connect(cluster.addr)
        .await
        .expect("connect");

    // A frame over the service's limit is answered without being read.
    let (mut send, mut recv) = conn.raw().open_bi().await.expect("open raw stream");
    send.write_all(&u32::MAX.to_be_bytes())
        .await
        .expect("write prefix");
    let answer = tokio::time::timeout(WAIT, recv.read_to_end(1024))
        .await
        .expect("server answers in time")
        .expect("an answer");
    let answer: Resp = transport::frame::decode(&answer).expect("decode");
    assert_eq!(
        answer,
        Resp::TooLarge {
            size: u64::from(u32::MAX),
            limit: LIMITS.max_frame_bytes
        }
    );

    let mut undecodable = 3u32.to_be_bytes().to_vec();
    undecodable.extend_from_slice(&[0xff, 0xff, 0xff]);
    let mut truncated = 100u32.to_be_bytes().to_vec();
    truncated.extend_from_slice(&[0; 10]);

    for garbage in [undecodable, truncated] {
        let (mut send, mut recv) = conn.raw().open_bi().await.expect("open raw stream");
        send.write_all(&garbage).await.expect("write garbage");
        let _ = send.finish();
        let result = tokio::time::timeout(WAIT, recv.read_to_end(1024))
            .await
            .expect("server answers in time");
        assert!(
            matches!(
                result,
                Err(quinn::ReadToEndError::Read(quinn::ReadError::Reset(_)))
            ),
            "expected the stream to be reset, got {result:?}"
        );

        // The same connection still carries calls.
        let echoed: Resp = conn.unary(&Req::Echo("ok".into())).await.expect("echo");
        assert_eq!(echoed, Resp::Echo("ok".into()));
    }
    assert!(!conn.is_closed());

    // And the server still accepts new connections.
    let fresh = cluster
        .client("alice")
        .connect(cluster.addr)
        .await
        .expect("connect again");
    let echoed: Resp = fresh.unary(&Req::Echo("fresh".into())).await.expect("echo");
    assert_eq!(echoed, Resp::Echo("fresh".into()));
    cluster.shutdown().await;
}

/// A refused identity's connection is closed before anything it sends is read: a frame of
/// megabytes cannot be delivered, and its calls fail with the server's reason.
#[tokio::test]
async fn a_refused_peer_cannot_make_the_server_read() {
    let mut cluster = Cluster::start().await;
    let eve = cluster.client("eve");
    let conn = eve.connect(cluster.addr).await.expect("handshake");
    let err = conn
        .unary::<_, Resp>(&Req::WhoAmI)
        .await
        .expect_err("eve is refused");
    assert!(err.is_refused(), "{err:?}");
    assert!(err.to_string().contains("eve is not served here"), "{err}");

    // 32 MiB claimed and sent on a fresh connection: the server closes it instead of buffering
    // what arrives, so the write fails long before all of it is delivered.
    let conn = eve.connect(cluster.addr).await.expect("handshake");
    let written = tokio::time::timeout(WAIT, async {
        let (mut send, _recv) = conn.raw().open_bi().await?;
        let body = 32 * 1024 * 1024;
        send.write_all(&(body as u32).to_be_bytes()).await?;
        send.write_all(&vec![0u8; body]).await?;
        send.finish()?;
        send.stopped().await?;
        Ok::<_, Box<dyn std::error::Error>>(())
    })
    .await
    .expect("the server answers in time");
    assert!(written.is_err(), "a refused peer delivered 32 MiB");
    assert!(conn.is_closed());

    // Others are served as before.
    let alice = cluster
        .client("alice")
        .connect(cluster.addr)
        .await
        .expect("connect");
    let echoed: Resp = alice.unary(&Req::Echo("ok".into())).await.expect("echo");
    assert_eq!(echoed, Resp::Echo("ok".into()));
    cluster.shutdown().await;
}

/// A request frame that stops arriving is given up after the frame timeout: the stream is
/// reset, and the connection carries other calls.
#[tokio::test]
async fn a_stalled_frame_is_reset_after_the_frame_timeout() {
    let mut cluster = Cluster::start().await;
    let conn = cluster
        .client("alice")
        .connect(cluster.addr)
        .await
        .expect("connect");
    for partial in [
        vec![0u8, 0],
        [100u32.to_be_bytes().as_slice(), &[1; 10]].concat(),
    ] {
        let (mut send, mut recv) = conn.raw().open_bi().await.expect("open raw stream");
        let started = std::time::Instant::now();
        send.write_all(&partial).await.expect("write");
        let result = tokio::time::timeout(WAIT, recv.read_to_end(1024))
            .await
            .expect("the server gives up in time");
        let elapsed = started.elapsed();
        assert!(
            matches!(
                result,
                Err(quinn::ReadToEndError::Read(quinn::ReadError::Reset(code)))
                    if code == transport::rpc::codes::FRAME_TIMEOUT
            ),
            "expected a reset for the timeout, got {result:?}"
        );
        assert!(
            elapsed >= LIMITS.frame_timeout
                && elapsed < LIMITS.frame_timeout + Duration::from_secs(2),
            "reset after {elapsed:?}, the limit is {:?}",
            LIMITS.frame_timeout
        );
    }
    let echoed: Resp = conn.unary(&Req::Echo("ok".into())).await.expect("echo");
    assert_eq!(echoed, Resp::Echo("ok".into()));
    cluster.shutdown().await;
}

#[tokio::test]
async fn connect_to_nothing_times_out_or_fails() {
    let dir = tempfile::tempdir().expect("tempdir");
    create_ca(dir.path(), "test").expect("ca");
    issue_cert(dir.path(), "alice", &[]);
    let identity = TlsIdentity::load(dir.path(), "alice").expect("identity");
    // Bind and drop a socket to find a port nobody listens on.
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let err = RpcClient::new(&identity)
        .expect("client")
        .connect(addr)
        .await
        .expect_err("nobody listens");
    assert!(err.is_connection_lost(), "{err:?}");
}

/// A UDP relay between one client and a server that can cut the path, so the server looks
/// killed (no close, no answer) to the client.
struct Relay {
    addr: SocketAddr,
    cut: Arc<std::sync::atomic::AtomicBool>,
    task: JoinHandle<()>,
}

impl Relay {
    async fn start(server: SocketAddr) -> Relay {
        let front = tokio::net::UdpSocket::bind("127.0.0.1:0")
            .await
            .expect("bind relay");
        let back = tokio::net::UdpSocket::bind("127.0.0.1:0")
            .await
            .expect("bind relay back");
        back.connect(server).await.expect("connect relay back");
        let addr = front.local_addr().expect("relay addr");
        let cut = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let is_cut = cut.clone();
        let task = tokio::spawn(async move {
            let mut client: Option<SocketAddr> = None;
            let (mut up, mut down) = (vec![0u8; 65_536], vec![0u8; 65_536]);
            loop {
                tokio::select! {
                    got = front.recv_from(&mut up) => {
                        let Ok((n, from)) = got else { return };
                        client = Some(from);
                        if !is_cut.load(std::sync::atomic::Ordering::SeqCst) {
                            let _ = back.send(&up[..n]).await;
                        }
                    }
                    got = back.recv(&mut down) => {
                        let Ok(n) = got else { return };
                        if let (Some(to), false) = (client, is_cut.load(std::sync::atomic::Ordering::SeqCst)) {
                            let _ = front.send_to(&down[..n], to).await;
                        }
                    }
                }
            }
        });
        Relay { addr, cut, task }
    }
}

#[tokio::test]
async fn a_silent_peer_is_noticed_and_a_live_quiet_one_is_not() {
    let mut cluster = Cluster::start().await;
    let relay = Relay::start(cluster.addr).await;
    let conn = cluster
        .client("alice")
        .connect(relay.addr)
        .await
        .expect("connect through the relay");
    let echoed: Resp = conn.unary(&Req::Echo("hi".into())).await.expect("echo");
    assert_eq!(echoed, Resp::Echo("hi".into()));

    // Quiet but alive: keep-alives keep it from looking silent.
    let quiet = tokio::time::timeout(
        Duration::from_secs(3),
        conn.silent_for(Duration::from_secs(1)),
    )
    .await;
    assert!(
        quiet.is_err(),
        "a live, quiet peer was taken for silent: {quiet:?}"
    );

    // Cut off: noticed after about a second, long before the idle timeout.
    relay.cut.store(true, std::sync::atomic::Ordering::SeqCst);
    let started = std::time::Instant::now();
    let silent = tokio::time::timeout(WAIT, conn.silent_for(Duration::from_secs(1)))
        .await
        .expect("silence noticed in time");
    assert!(silent);
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
    assert!(
        !conn.is_closed(),
        "noticing silence does not close by itself"
    );
    conn.close_silent();
    let err = conn
        .unary::<_, Resp>(&Req::WhoAmI)
        .await
        .expect_err("closed");
    assert!(err.is_connection_lost(), "{err:?}");
    // On a closed connection it resolves at once, with false.
    assert!(!conn.silent_for(Duration::from_secs(1)).await);

    relay.task.abort();
    cluster.shutdown().await;
}

/// A UDP relay whose server side can be moved, the address the client sees staying the same:
/// to the client, the server behind it is killed (nothing answers) and restarted in place.
struct MovableRelay {
    addr: SocketAddr,
    front: Arc<tokio::net::UdpSocket>,
    client: Arc<std::sync::Mutex<Option<SocketAddr>>>,
    back: Arc<std::sync::Mutex<Option<Arc<tokio::net::UdpSocket>>>>,
    /// The datagrams from the client that nothing was there to relay.
    lost: Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
    up: JoinHandle<()>,
    down: Option<JoinHandle<()>>,
}

impl MovableRelay {
    async fn start() -> MovableRelay {
        let front = Arc::new(
            tokio::net::UdpSocket::bind("127.0.0.1:0")
                .await
                .expect("bind relay"),
        );
        let addr = front.local_addr().expect("relay addr");
        let client = Arc::new(std::sync::Mutex::new(None));
        let back: Arc<std::sync::Mutex<Option<Arc<tokio::net::UdpSocket>>>> =
            Arc::new(std::sync::Mutex::new(None));
        let lost = Arc::new(std::sync::Mutex::new(Vec::new()));
        let up = tokio::spawn({
            let (front, client, back, lost) =
                (front.clone(), client.clone(), back.clone(), lost.clone());
            async move {
                let mut buf = vec![0u8; 65_536];
                loop {
                    let Ok((n, from)) = front.recv_from(&mut buf).await else {
                        return;
                    };
                    *client.lock().expect("lock") = Some(from);
                    let to = back.lock().expect("lock").clone();
                    match to {
                        Some(to) => {
                            let _ = to.send(&buf[..n]).await;
                        }
                        None => lost.lock().expect("lock").push(buf[..n].to_vec()),
                    }
                }
            }
        });
        MovableRelay {
            addr,
            front,
            client,
            back,
            lost,
            up,
            down: None,
        }
    }

    /// Relays to `server` from now on; `None`: nothing answers. What the previous server sends
    /// is no longer relayed.
    async fn point_at(&mut self, server: Option<SocketAddr>) {
        if let Some(down) = self.down.take() {
            down.abort();
        }
        let Some(server) = server else {
            *self.back.lock().expect("lock") = None;
            return;
        };
        let back = Arc::new(
            tokio::net::UdpSocket::bind("127.0.0.1:0")
                .await
                .expect("bind relay back"),
        );
        back.connect(server).await.expect("connect relay back");
        *self.back.lock().expect("lock") = Some(back.clone());
        let (front, client) = (self.front.clone(), self.client.clone());
        self.down = Some(tokio::spawn(async move {
            let mut buf = vec![0u8; 65_536];
            loop {
                let Ok(n) = back.recv(&mut buf).await else {
                    return;
                };
                let to = *client.lock().expect("lock");
                if let Some(to) = to {
                    let _ = front.send_to(&buf[..n], to).await;
                }
            }
        }));
    }

    /// How many datagrams from the client were lost so far.
    fn lost(&self) -> usize {
        self.lost.lock().expect("lock").len()
    }

    /// Relays, late, the last datagram that was lost while nothing answered.
    async fn deliver_last_lost(&self) {
        let lost = self.lost.lock().expect("lock").last().cloned();
        let lost = lost.expect("a lost datagram");
        let back = self.back.lock().expect("lock").clone().expect("a server");
        back.send(&lost).await.expect("relay the lost datagram");
    }

    fn stop(self) {
        self.up.abort();
        if let Some(down) = self.down {
            down.abort();
        }
    }
}

fn was_reset(conn: &transport::rpc::Connection) -> bool {
    matches!(
        conn.raw().close_reason(),
        Some(quinn::ConnectionError::Reset)
    )
}

#[tokio::test]
async fn a_restarted_server_resets_its_predecessors_connections() {
    let mut first = Cluster::start().await;
    let mut relay = MovableRelay::start().await;
    relay.point_at(Some(first.addr)).await;
    let conn = first
        .client("alice")
        .connect(relay.addr)
        .await
        .expect("connect through the relay");
    let echoed: Resp = conn.unary(&Req::Echo("hi".into())).await.expect("echo");
    assert_eq!(echoed, Resp::Echo("hi".into()));

    // The first server is gone without a word; its successor, with the same key, gets the
    // connection's next packet and answers with a stateless reset the client believes.
    let mut second = first.restarted().await;
    relay.point_at(Some(second.addr)).await;
    let started = std::time::Instant::now();
    let err = tokio::time::timeout(
        Duration::from_secs(5),
        conn.unary::<_, Resp>(&Req::Echo("again".into())),
    )
    .await
    .expect("the call ends long before the idle timeout")
    .expect_err("the connection was reset");
    assert!(err.is_connection_lost(), "{err:?}");
    assert!(was_reset(&conn), "{:?}", conn.raw().close_reason());
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );

    // A new connection to the same address reaches the successor.
    let conn = first
        .client("alice")
        .connect(relay.addr)
        .await
        .expect("reconnect");
    let echoed: Resp = conn.unary(&Req::Echo("back".into())).await.expect("echo");
    assert_eq!(echoed, Resp::Echo("back".into()));

    relay.stop();
    second.shutdown().await;
    first.shutdown().await;
}

#[tokio::test]
async fn a_quiet_connection_hears_of_a_restart_at_once() {
    let mut first = Cluster::start().await;
    let mut relay = MovableRelay::start().await;
    relay.point_at(Some(first.addr)).await;
    let conn = first
        .client("alice")
        .connect(relay.addr)
        .await
        .expect("connect through the relay");
    let echoed: Resp = conn.unary(&Req::Echo("hi".into())).await.expect("echo");
    assert_eq!(echoed, Resp::Echo("hi".into()));
    let watching = tokio::spawn({
        let conn = conn.clone();
        async move { conn.silent_for(Duration::from_secs(60)).await }
    });

    // Killed: for four seconds nothing answers (QUIC's retransmissions back off to seconds
    // apart meanwhile). Then the successor binds.
    relay.point_at(None).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let mut second = first.restarted().await;
    relay.point_at(Some(second.addr)).await;
    let started = std::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(10), conn.raw().closed())
        .await
        .expect("the connection ends long before the idle timeout");
    let took = started.elapsed();
    assert!(was_reset(&conn), "{:?}", conn.raw().close_reason());
    // The keep-alive a quiet connection sends every 250 ms brings the reset, not the next
    // retransmission seconds later, nor a silence timer.
    assert!(took < Duration::from_millis(1000), "{took:?}");
    assert!(!watching.await.expect("the watcher"), "closed, not silent");

    relay.stop();
    second.shutdown().await;
    first.shutdown().await;
}

/// Whether a process may bind UDP address `addr` now.
fn udp_port_free(addr: SocketAddr) -> bool {
    std::net::UdpSocket::bind(addr).is_ok()
}

#[tokio::test]
async fn a_stopped_server_frees_its_port_after_a_connection_attempt_closed_before_it_arrived() {
    let mut cluster = Cluster::start().await;
    let client = cluster.client("alice");
    let mut relay = MovableRelay::start().await;
    // A client gives up a connection attempt nothing answered (as while a server restarts):
    // its last packet, an Initial that closes the attempt, reaches the server as the first
    // packet of a connection.
    let attempt = tokio::spawn({
        let (client, addr) = (client.clone(), relay.addr);
        async move { client.connect(addr).await.map(|_| ()) }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = relay.lost();
    assert!(before > 0, "the attempt sent its hello");
    attempt.abort();
    assert!(attempt.await.is_err(), "the attempt was given up");
    // The close, sent as the attempt is dropped, is the next datagram.
    let deadline = tokio::time::Instant::now() + WAIT;
    while relay.lost() == before {
        assert!(tokio::time::Instant::now() < deadline, "no close was sent");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    relay.point_at(Some(cluster.addr)).await;
    relay.deliver_last_lost().await;

    // The server goes on serving through the same path...
    let conn = client.connect(relay.addr).await.expect("connect");
    let echoed: Resp = conn.unary(&Req::Echo("hi".into())).await.expect("echo");
    assert_eq!(echoed, Resp::Echo("hi".into()));
    drop(conn);

    // ...and once stopped, holds nothing that keeps its port: the closed attempt made no
    // connection that would linger until the idle timeout.
    let addr = cluster.addr;
    cluster.shutdown().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !udp_port_free(addr) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the stopped server's port is still bound"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    relay.stop();
}

/// A server named by host name: resolved at connect, and its certificate checked against the
/// name (every issued certificate carries `localhost`).
#[tokio::test]
async fn connect_by_host_name() {
    let mut cluster = Cluster::start().await;
    let by_name: transport::Endpoint = format!("localhost:{}", cluster.addr.port())
        .parse()
        .expect("an endpoint");
    assert_eq!(by_name.server_name(), "localhost");
    let conn = cluster
        .client("alice")
        .connect(&by_name)
        .await
        .expect("connect by name");
    let echoed: Resp = conn.unary(&Req::Echo("named".into())).await.expect("echo");
    assert_eq!(echoed, Resp::Echo("named".into()));
    let unknown: transport::Endpoint = "no-such-host.invalid:1".parse().expect("an endpoint");
    match cluster.client("alice").connect(&unknown).await {
        Err(e @ TransportError::Resolve { .. }) => {
            assert!(e.is_connection_lost(), "another server may be tried");
            assert!(e.to_string().contains("no-such-host.invalid:1"), "{e}");
        }
        Err(other) => panic!("expected a resolution error, got {other:?}"),
        Ok(_) => panic!("connected to a name that does not exist"),
    }
    cluster.shutdown().await;
}
