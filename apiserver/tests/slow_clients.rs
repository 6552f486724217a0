//! The HTTPS front's listener against clients that hold a connection without using it: a silent
//! one, a slowloris that sends its request head a byte at a time, and one left idle after a
//! request. Each must be closed when its limit passes, not before, whatever credentials it has.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use apiserver::connection_clock::hold_connection;
use apiserver::http_limits::HttpLimits;
use apiserver::https::{HttpPeer, TlsListener};
use axum::Router;
use rustls_pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;
use transport::pki::{create_ca, issue, CertSpec};
use transport::tls::TlsIdentity;

/// Short limits so the tests run fast; every assertion is made against them.
const LIMITS: HttpLimits = HttpLimits {
    read_header_timeout: Duration::from_millis(1500),
    idle_timeout: Duration::from_millis(3000),
    request_timeout: Duration::from_secs(60),
    min_request_timeout: Duration::from_secs(1800),
};

/// How late a close may come: scheduling on a loaded machine.
const SLACK: Duration = Duration::from_millis(1500);
/// How early a close may seem: the server's clock starts as it sends its answer, a moment before
/// the client has read it.
const SKEW: Duration = Duration::from_millis(100);

struct Front {
    addr: SocketAddr,
    connector: TlsConnector,
    _dir: tempfile::TempDir,
}

async fn start() -> Front {
    let dir = tempfile::tempdir().expect("tempdir");
    let certs = dir.path();
    create_ca(certs, "slow-clients").expect("CA");
    issue_cert(certs, "apiserver", vec!["127.0.0.1".into()]);
    // A client with no credentials the API server would accept: the limits apply before any
    // request is authenticated.
    issue_cert(certs, "stranger", vec![]);
    let server = TlsIdentity::load(certs, "apiserver").expect("server identity");
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = tcp.local_addr().expect("addr");
    let listener = TlsListener::new(
        tcp,
        server.https_server_config().expect("server config"),
        LIMITS,
    )
    .expect("listener");
    let app = Router::new()
        .fallback(|| async { "ok" })
        .layer(axum::middleware::from_fn(hold_connection))
        .into_make_service_with_connect_info::<HttpPeer>();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let client = TlsIdentity::load(certs, "stranger").expect("client identity");
    let config = client.https_client_config().expect("client config");
    Front {
        addr,
        connector: TlsConnector::from(Arc::new(config)),
        _dir: dir,
    }
}

fn issue_cert(certs: &Path, name: &str, sans: Vec<String>) {
    let spec = CertSpec {
        name: name.into(),
        organizations: vec![],
        sans,
    };
    issue(certs, &spec).expect("issue a certificate");
}

impl Front {
    async fn connect(&self) -> TlsStream<TcpStream> {
        let tcp = TcpStream::connect(self.addr).await.expect("connect");
        let name = ServerName::try_from("127.0.0.1").expect("name");
        self.connector
            .connect(name, tcp)
            .await
            .expect("TLS handshake")
    }
}

/// Reads until the server closes the connection; returns when it did, measured from `since`.
async fn closed_after(tls: &mut TlsStream<TcpStream>, since: Instant) -> Duration {
    let mut buf = [0u8; 4096];
    let deadline = LIMITS.idle_timeout + LIMITS.read_header_timeout + SLACK * 4;
    tokio::time::timeout(deadline, async {
        loop {
            match tls.read(&mut buf).await {
                Ok(0) | Err(_) => return since.elapsed(),
                Ok(_) => {}
            }
        }
    })
    .await
    .expect("the server closes the connection")
}

fn assert_within(elapsed: Duration, limit: Duration, what: &str) {
    assert!(
        elapsed + SKEW >= limit && elapsed < limit + SLACK,
        "{what}: closed after {elapsed:?}, the limit is {limit:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_connection_is_closed_at_the_header_timeout() {
    let front = start().await;
    let mut tls = front.connect().await;
    let since = Instant::now();
    let elapsed = closed_after(&mut tls, since).await;
    assert_within(elapsed, LIMITS.read_header_timeout, "silent connection");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slowloris_is_closed_at_the_header_timeout() {
    let front = start().await;
    let mut tls = front.connect().await;
    let since = Instant::now();
    // A byte every 100 ms: each one is progress, but the head never completes.
    let head = b"GET /api/v1/namespaces HTTP/1.1\r\nHost: kemu\r\nX-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    let (mut read, mut write) = tokio::io::split(&mut tls);
    let trickle = async {
        for byte in head.iter() {
            if write.write_all(&[*byte]).await.is_err() || write.flush().await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        std::future::pending::<()>().await;
    };
    let closed = async {
        let mut buf = [0u8; 1024];
        loop {
            match read.read(&mut buf).await {
                Ok(0) | Err(_) => return since.elapsed(),
                Ok(_) => {}
            }
        }
    };
    let elapsed = tokio::select! {
        elapsed = closed => elapsed,
        () = trickle => unreachable!("the trickle never ends"),
    };
    assert!(
        head.len() as u32 * 100 > LIMITS.read_header_timeout.as_millis() as u32,
        "the head takes longer to trickle in than the limit"
    );
    assert_within(elapsed, LIMITS.read_header_timeout, "slowloris");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_is_closed_at_the_idle_timeout() {
    let front = start().await;
    let mut tls = front.connect().await;
    // Served well inside the header timeout, then left idle for longer than it: the idle
    // timeout applies between requests.
    let mut answered = Instant::now();
    for round in 0..2 {
        tls.write_all(b"GET /healthz HTTP/1.1\r\nHost: kemu\r\n\r\n")
            .await
            .expect("write");
        let mut response = Vec::new();
        while !response.ends_with(b"\r\n\r\nok") {
            let mut buf = [0u8; 4096];
            let n = tls.read(&mut buf).await.expect("response");
            assert!(n > 0, "closed while answering");
            response.extend_from_slice(&buf[..n]);
        }
        assert!(response.starts_with(b"HTTP/1.1 200"), "{response:?}");
        answered = Instant::now();
        if round == 0 {
            tokio::time::sleep(LIMITS.read_header_timeout + Duration::from_millis(200)).await;
        }
    }
    let elapsed = closed_after(&mut tls, answered).await;
    assert_within(elapsed, LIMITS.idle_timeout, "idle connection");
}
