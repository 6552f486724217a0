//! Exec, attach and port-forward over a plain SPDY/3.1 upgrade, as client-go before 1.30 (and
//! kubectl with `KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false` or
//! `KUBECTL_PORT_FORWARD_WEBSOCKETS=false`) asks for them: `Upgrade: SPDY/3.1` with the
//! subprotocols in `X-Stream-Protocol-Version`, answered `101 Switching Protocols` with the one
//! chosen, then one SPDY stream per channel, named by its `streamType` header.
//!
//! The sessions are the WebSocket ones: a bridge turns the SPDY streams into channel messages
//! of `v5.channel.k8s.io` on an in-memory WebSocket (stdin's half-close becomes the close
//! signal) and the session's messages back into DATA frames on the matching streams, within
//! SPDY/3.1's flow-control windows ([`spdy::Windows`]). Exec and attach start once every
//! stream the request implies exists, as the kubelet waits for them; port-forward's SPDY bytes
//! go through unchanged to the tunnel that already reads them.

use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;
use tracing::{debug, info_span};

use super::channel::{Protocol, StatusFormat, CLOSE_SIGNAL, ERROR, RESIZE, STDERR, STDIN, STDOUT};
use super::session::{kubelet_error, Socket, StreamOptions, Transport};
use super::spdy;

/// The header naming the subprotocols (client) and the chosen one (server).
const PROTOCOL_HEADER: &str = "x-stream-protocol-version";
/// The header listing the server's subprotocols when none is common.
const ACCEPTED_HEADER: &str = "x-accepted-stream-protocol-versions";
/// How long the client has to open its streams (the kubelet's stream creation timeout).
const STREAM_CREATION_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a bridge waits for the session's close to complete after the client is gone.
const DRAIN: Duration = Duration::from_secs(5);
/// How long the server's last DATA may wait for the client's window updates at the end.
const FLUSH: Duration = Duration::from_secs(30);

/// The SPDY subprotocols of exec and attach, as the kubelet serves them.
pub const STREAM_SUBPROTOCOLS: &[&str] = &[
    "v4.channel.k8s.io",
    "v3.channel.k8s.io",
    "v2.channel.k8s.io",
    "channel.k8s.io",
];
/// The SPDY subprotocol of port-forward.
pub const PORT_FORWARD_SUBPROTOCOLS: &[&str] = &["portforward.k8s.io"];

/// Whether the request asks for a SPDY upgrade.
pub fn requested(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::UPGRADE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().to_ascii_lowercase().starts_with("spdy/3.1"))
}

/// Why a SPDY handshake is refused: the kubelet's plain-text answer.
#[derive(Debug)]
pub struct Refusal {
    status: StatusCode,
    message: String,
    /// The subprotocols served, listed when none was common.
    accepted: &'static [&'static str],
}

impl Refusal {
    pub fn response(&self) -> Response {
        let mut response = kubelet_error(self.status, &self.message);
        for protocol in self.accepted {
            response.headers_mut().append(
                HeaderName::from_static(ACCEPTED_HEADER),
                HeaderValue::from_static(protocol),
            );
        }
        response
    }
}

/// Chooses the first subprotocol the client names that is served (the client's order, as
/// `httpstream.Handshake` does), or why none is.
pub fn negotiate(
    headers: &HeaderMap,
    served: &'static [&'static str],
) -> Result<&'static str, Refusal> {
    let offered: Vec<&str> = headers
        .get_all(PROTOCOL_HEADER)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    if offered.is_empty() {
        return Err(Refusal {
            status: StatusCode::BAD_REQUEST,
            message: "unable to upgrade: X-Stream-Protocol-Version is required".into(),
            accepted: &[],
        });
    }
    if let Some(chosen) = offered
        .iter()
        .find_map(|o| served.iter().find(|s| *s == o).copied())
    {
        return Ok(chosen);
    }
    Err(Refusal {
        status: StatusCode::FORBIDDEN,
        message: format!(
            "unable to upgrade: unable to negotiate protocol: client supports [{}], server accepts [{}]\n",
            offered.join(" "),
            served.join(" ")
        ),
        accepted: served,
    })
}

/// The `101 Switching Protocols` answer naming the chosen subprotocol.
pub fn switching(protocol: &'static str) -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let headers = response.headers_mut();
    headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static("SPDY/3.1"));
    headers.insert(
        HeaderName::from_static(PROTOCOL_HEADER),
        HeaderValue::from_static(protocol),
    );
    response
}

/// The channel protocol the bridged exec or attach session speaks for a SPDY subprotocol: v4
/// ends with a `Status` document on the error stream, v2 and v3 with the failure's text; the
/// close signal carries stdin's half-close.
pub fn inner_protocol(subprotocol: &str) -> Protocol {
    Protocol {
        name: "v5.channel.k8s.io",
        base64: false,
        status: if subprotocol == "v4.channel.k8s.io" {
            StatusFormat::Json
        } else {
            StatusFormat::Text
        },
        close_signal: true,
    }
}

/// The streams an exec or attach with these options opens, by `streamType`, as the kubelet
/// expects them: the error stream always, one per requested stdio stream, and the resize
/// stream for a terminal (v3 and later; v1 and v2 have none).
pub fn expected_streams(subprotocol: &str, options: &StreamOptions) -> Vec<&'static str> {
    let mut expected = vec!["error"];
    for (wanted, name) in [
        (options.stdin, "stdin"),
        (options.stdout, "stdout"),
        (options.stderr, "stderr"),
        (
            options.tty && matches!(subprotocol, "v4.channel.k8s.io" | "v3.channel.k8s.io"),
            "resize",
        ),
    ] {
        if wanted {
            expected.push(name);
        }
    }
    expected
}

/// After the 101: waits for the client's streams, then bridges them to `session` (an exec or
/// attach speaking `inner_protocol`).
///
/// `channel.k8s.io` (v1) as the kubelet serves it: once every stream is there, the error
/// stream is reset and the stdin stream's server half closed, so a failure's text never
/// reaches the client (the kubelet's 1.0 behaviour, kept for v1).
pub fn spawn_streams<F, Fut>(
    request: Request,
    what: String,
    subprotocol: &'static str,
    expected: Vec<&'static str>,
    session: F,
) where
    F: FnOnce(Socket) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    spawn_upgraded(request, what, move |io| {
        bridge_streams(io, subprotocol, expected, session)
    });
}

/// Waits for the client's streams on `io`, then bridges them to `session`.
async fn bridge_streams<F, Fut>(
    io: Box<dyn Transport>,
    subprotocol: &'static str,
    expected: Vec<&'static str>,
    session: F,
) where
    F: FnOnce(Socket) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let (mut rd, mut wr) = tokio::io::split(io);
    let mut bridge = StreamBridge::default();
    let opened = tokio::time::timeout(
        STREAM_CREATION_TIMEOUT,
        bridge.open(&mut rd, &mut wr, &expected),
    )
    .await;
    let pending = match opened {
        Ok(Some(pending)) => pending,
        Ok(None) => return,
        Err(_) => {
            debug!("timed out waiting for client to create streams");
            let _ = wr.shutdown().await;
            return;
        }
    };
    if subprotocol == "channel.k8s.io" && bridge.v1_started(&mut wr).await.is_none() {
        return;
    }
    let (inner, outer) = pipe().await;
    tokio::join!(session(inner), bridge.run(rd, wr, outer, pending));
}

/// After the 101: port-forward's SPDY session, its bytes passed to `session` (the tunnel)
/// in binary messages and its answers written back.
pub fn spawn_tunnel<F, Fut>(request: Request, what: String, session: F)
where
    F: FnOnce(Socket) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    spawn_upgraded(request, what, move |io| async move {
        let (inner, outer) = pipe().await;
        let (to_session, mut outer) = split(outer);
        let (mut rd, mut wr) = tokio::io::split(io);
        let pump = async move {
            let mut buffer = vec![0u8; 32 * 1024];
            loop {
                tokio::select! {
                    read = rd.read(&mut buffer) => match read {
                        Ok(0) | Err(_) => {
                            let _ = to_session.send(None);
                            break;
                        }
                        Ok(n) => {
                            if to_session.send(Some(Message::binary(buffer[..n].to_vec()))).is_err() {
                                break;
                            }
                        }
                    },
                    message = outer.next() => match message {
                        Some(Ok(Message::Binary(bytes))) => {
                            if wr.write_all(&bytes).await.is_err() || wr.flush().await.is_err() {
                                break;
                            }
                        }
                        Some(Ok(Message::Close(_))) | Some(Err(_)) | None => {
                            let _ = wr.shutdown().await;
                            break;
                        }
                        Some(Ok(_)) => {}
                    },
                }
            }
            drain(&mut outer).await;
        };
        tokio::join!(session(inner), pump);
    });
}

/// Two ends of an in-memory WebSocket: the session's (server) and the bridge's (client).
async fn pipe() -> (Socket, WebSocketStream<DuplexStream>) {
    let (server, client) = tokio::io::duplex(1 << 16);
    let config = WebSocketConfig::default()
        .max_message_size(Some(16 << 20))
        .max_frame_size(Some(16 << 20));
    let boxed: Box<dyn Transport> = Box::new(server);
    let inner = WebSocketStream::from_raw_socket(boxed, Role::Server, Some(config)).await;
    let outer = WebSocketStream::from_raw_socket(client, Role::Client, Some(config)).await;
    (inner, outer)
}

/// The bridge's end of the pipe, split: messages to the session go through a task, so the
/// bridge goes on reading the session's messages while the session is not reading its own
/// (a session blocked on writing would otherwise never read, and neither would the bridge).
/// `None` closes the session's side.
type ToSession = tokio::sync::mpsc::UnboundedSender<Option<Message>>;
type FromSession = futures::stream::SplitStream<WebSocketStream<DuplexStream>>;

fn split(outer: WebSocketStream<DuplexStream>) -> (ToSession, FromSession) {
    let (mut sink, stream) = outer.split();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Option<Message>>();
    tokio::spawn(async move {
        while let Some(message) = rx.recv().await {
            let Some(message) = message else {
                let _ = sink.close().await;
                break;
            };
            if sink.send(message).await.is_err() {
                break;
            }
        }
    });
    (tx, stream)
}

/// Reads the bridge's end until the session's close has been answered.
async fn drain(outer: &mut FromSession) {
    let _ = tokio::time::timeout(DRAIN, async {
        while let Some(Ok(_)) = outer.next().await {}
    })
    .await;
}

/// Upgrades the connection and runs `run` on it, holding off the idle timeouts meanwhile.
fn spawn_upgraded<F, Fut>(request: Request, what: String, run: F)
where
    F: FnOnce(Box<dyn Transport>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    super::session::spawn_upgraded(
        request,
        info_span!("stream", %what, transport = "spdy"),
        run,
    );
}

/// What one frame from the client means for the session.
enum Flow {
    Continue,
    End,
}

/// The streams of one exec or attach, by type.
#[derive(Default)]
struct StreamBridge {
    reader: spdy::Reader,
    writer: spdy::Writer,
    windows: spdy::Windows,
    error: Option<u32>,
    stdin: Option<u32>,
    stdout: Option<u32>,
    stderr: Option<u32>,
    resize: Option<u32>,
}

type ReadHalf = tokio::io::ReadHalf<Box<dyn Transport>>;
type WriteHalf = tokio::io::WriteHalf<Box<dyn Transport>>;

impl StreamBridge {
    /// Replies to the client's streams until every expected one exists; the other frames
    /// that came meanwhile are returned, to be handled once the session runs. `None`: the
    /// client went away or broke the protocol.
    async fn open(
        &mut self,
        rd: &mut ReadHalf,
        wr: &mut WriteHalf,
        expected: &[&str],
    ) -> Option<Vec<spdy::Frame>> {
        let mut pending = Vec::new();
        let mut buffer = vec![0u8; 32 * 1024];
        loop {
            let missing = expected.iter().any(|t| self.stream(t).is_none());
            if !missing {
                return Some(pending);
            }
            let n = rd.read(&mut buffer).await.ok().filter(|n| *n > 0)?;
            self.reader.push(&buffer[..n]);
            while let Some(frame) = self.next_frame()? {
                match frame {
                    spdy::Frame::Stream {
                        id,
                        headers,
                        new: true,
                        ..
                    } => {
                        self.adopt(id, &headers);
                        let reply = self.writer.syn_reply(id);
                        write(wr, &reply).await?;
                    }
                    spdy::Frame::Ping(payload) => {
                        write_all(wr, self.windows.ping(&payload)).await?
                    }
                    other => pending.push(other),
                }
            }
        }
    }

    /// v1 once its streams exist: the error stream reset (nothing is written on it), the
    /// stdin stream's server half closed.
    async fn v1_started(&mut self, wr: &mut WriteHalf) -> Option<()> {
        if let Some(error) = self.error.take() {
            write(wr, &spdy::rst_stream(error, spdy::CANCEL)).await?;
        }
        if let Some(stdin) = self.stdin {
            write(wr, &spdy::data(stdin, &[], true)).await?;
        }
        Some(())
    }

    fn next_frame(&mut self) -> Option<Option<spdy::Frame>> {
        match self.reader.next_frame() {
            Ok(frame) => Some(frame),
            Err(e) => {
                debug!(error = %e, "a malformed SPDY frame ends the session");
                None
            }
        }
    }

    fn stream(&self, stream_type: &str) -> Option<u32> {
        match stream_type {
            "error" => self.error,
            "stdin" => self.stdin,
            "stdout" => self.stdout,
            "stderr" => self.stderr,
            "resize" => self.resize,
            _ => None,
        }
    }

    /// Records a new stream under its `streamType`.
    fn adopt(&mut self, id: u32, headers: &std::collections::HashMap<String, String>) {
        let slot = match headers.get("streamtype").map(String::as_str) {
            Some("error") => &mut self.error,
            Some("stdin") => &mut self.stdin,
            Some("stdout") => &mut self.stdout,
            Some("stderr") => &mut self.stderr,
            Some("resize") => &mut self.resize,
            _ => return,
        };
        *slot = Some(id);
    }

    /// Carries the session's messages to the client's streams and the client's stdin and
    /// resizes to the session, until either side ends.
    async fn run(
        mut self,
        mut rd: ReadHalf,
        mut wr: WriteHalf,
        outer: WebSocketStream<DuplexStream>,
        pending: Vec<spdy::Frame>,
    ) {
        let (to_session, mut outer) = split(outer);
        for frame in pending {
            if let Flow::End = self.inbound(frame, &mut wr, &to_session).await {
                let _ = to_session.send(None);
                drain(&mut outer).await;
                return;
            }
        }
        let mut buffer = vec![0u8; 32 * 1024];
        loop {
            tokio::select! {
                read = rd.read(&mut buffer) => {
                    let n = match read {
                        Ok(n) if n > 0 => n,
                        _ => break,
                    };
                    self.reader.push(&buffer[..n]);
                    let mut ended = false;
                    loop {
                        match self.next_frame() {
                            Some(Some(frame)) => {
                                if let Flow::End = self.inbound(frame, &mut wr, &to_session).await {
                                    ended = true;
                                    break;
                                }
                            }
                            Some(None) => break,
                            None => {
                                ended = true;
                                break;
                            }
                        }
                    }
                    if ended {
                        break;
                    }
                }
                // While the client's windows hold back too much, the session waits.
                message = outer.next(), if self.windows.backlog() < spdy::MAX_BACKLOG => match message {
                    Some(Ok(Message::Binary(bytes))) => {
                        let Some((&channel, data)) = bytes.split_first() else { continue };
                        let stream = match channel {
                            STDOUT => self.stdout,
                            STDERR => self.stderr,
                            ERROR => self.error,
                            _ => None,
                        };
                        if let Some(id) = stream {
                            let frames = self.windows.send(id, data, false);
                            if write_all(&mut wr, frames).await.is_none() {
                                break;
                            }
                        }
                    }
                    Some(Ok(Message::Close(_))) | Some(Err(_)) | None => {
                        // The session is over: every stream the server writes ends, once its
                        // data is out, then the connection.
                        let mut frames = Vec::new();
                        for id in [self.stdout, self.stderr, self.error].into_iter().flatten() {
                            frames.extend(self.windows.send(id, &[], true));
                        }
                        if write_all(&mut wr, frames).await.is_some() {
                            let _ = tokio::time::timeout(FLUSH, self.flush(&mut rd, &mut wr)).await;
                        }
                        let _ = wr.shutdown().await;
                        drain(&mut outer).await;
                        return;
                    }
                    Some(Ok(_)) => {}
                },
            }
        }
        // The client left or broke the protocol: the session ends.
        let _ = to_session.send(None);
        drain(&mut outer).await;
    }

    /// Reads the client's frames until everything queued has been sent (its windows
    /// permitting) or the client is gone.
    async fn flush(&mut self, rd: &mut ReadHalf, wr: &mut WriteHalf) {
        let mut buffer = vec![0u8; 32 * 1024];
        while !self.windows.idle() {
            let n = match rd.read(&mut buffer).await {
                Ok(n) if n > 0 => n,
                _ => return,
            };
            self.reader.push(&buffer[..n]);
            while let Some(Some(frame)) = self.next_frame() {
                let frames = match frame {
                    spdy::Frame::Settings { initial_window } => {
                        self.windows.settings(initial_window)
                    }
                    spdy::Frame::WindowUpdate { id, delta } => self.windows.update(id, delta),
                    spdy::Frame::Ping(payload) => self.windows.ping(&payload),
                    spdy::Frame::Reset { id } => {
                        self.windows.forget(id);
                        Vec::new()
                    }
                    spdy::Frame::GoAway => return,
                    _ => Vec::new(),
                };
                if write_all(wr, frames).await.is_none() {
                    return;
                }
            }
        }
    }

    async fn inbound(&mut self, frame: spdy::Frame, wr: &mut WriteHalf, outer: &ToSession) -> Flow {
        let to_session = |channel: u8, data: &[u8]| {
            let mut message = Vec::with_capacity(data.len() + 1);
            message.push(channel);
            message.extend_from_slice(data);
            Message::binary(message)
        };
        match frame {
            spdy::Frame::Stream {
                id,
                headers,
                new: true,
                ..
            } => {
                self.adopt(id, &headers);
                let reply = self.writer.syn_reply(id);
                if write(wr, &reply).await.is_none() {
                    return Flow::End;
                }
            }
            spdy::Frame::Data { id, data, fin } if Some(id) == self.stdin => {
                // A session that has ended reads nothing more; its close comes on `outer`.
                if !data.is_empty() {
                    let _ = outer.send(Some(to_session(STDIN, &data)));
                }
                if fin {
                    let _ = outer.send(Some(to_session(CLOSE_SIGNAL, &[STDIN])));
                }
                // What the session has taken is given back to the client's windows.
                let open = (!fin).then_some(id);
                return answer(wr, self.windows.consumed(open, data.len())).await;
            }
            spdy::Frame::Data { id, data, .. } if Some(id) == self.resize => {
                let _ = outer.send(Some(to_session(RESIZE, &data)));
                return answer(wr, self.windows.consumed(Some(id), data.len())).await;
            }
            spdy::Frame::Data { data, .. } => {
                return answer(wr, self.windows.consumed(None, data.len())).await;
            }
            spdy::Frame::Reset { id } => {
                self.windows.forget(id);
                if Some(id) == self.stdin {
                    let _ = outer.send(Some(to_session(CLOSE_SIGNAL, &[STDIN])));
                }
            }
            spdy::Frame::Settings { initial_window } => {
                return answer(wr, self.windows.settings(initial_window)).await;
            }
            spdy::Frame::WindowUpdate { id, delta } => {
                return answer(wr, self.windows.update(id, delta)).await;
            }
            spdy::Frame::Ping(payload) => {
                return answer(wr, self.windows.ping(&payload)).await;
            }
            spdy::Frame::GoAway => return Flow::End,
            _ => {}
        }
        Flow::Continue
    }
}

/// Writes frames; the session ends when the connection is gone.
async fn answer(wr: &mut WriteHalf, frames: Vec<Vec<u8>>) -> Flow {
    match write_all(wr, frames).await {
        Some(()) => Flow::Continue,
        None => Flow::End,
    }
}

/// Writes one frame and flushes it; `None` when the connection is gone.
async fn write(wr: &mut WriteHalf, frame: &[u8]) -> Option<()> {
    wr.write_all(frame).await.ok()?;
    wr.flush().await.ok()
}

/// Writes frames and flushes them; `None` when the connection is gone.
async fn write_all(wr: &mut WriteHalf, frames: Vec<Vec<u8>>) -> Option<()> {
    if frames.is_empty() {
        return Some(());
    }
    for frame in frames {
        wr.write_all(&frame).await.ok()?;
    }
    wr.flush().await.ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, HeaderValue::from_static(value));
        }
        headers
    }

    #[test]
    fn the_handshake_chooses_the_clients_first_served_subprotocol() {
        let offered = headers(&[
            ("upgrade", "SPDY/3.1"),
            (PROTOCOL_HEADER, "v5.channel.k8s.io"),
            (PROTOCOL_HEADER, "v4.channel.k8s.io"),
            (PROTOCOL_HEADER, "v3.channel.k8s.io"),
        ]);
        assert!(requested(&offered));
        assert_eq!(
            negotiate(&offered, STREAM_SUBPROTOCOLS).ok(),
            Some("v4.channel.k8s.io")
        );
        let response = switching("v4.channel.k8s.io");
        assert_eq!(response.status(), StatusCode::SWITCHING_PROTOCOLS);
        assert_eq!(response.headers()[header::UPGRADE], "SPDY/3.1");
        assert_eq!(response.headers()[PROTOCOL_HEADER], "v4.channel.k8s.io");
        assert_eq!(
            inner_protocol("v4.channel.k8s.io").status,
            StatusFormat::Json
        );
        assert_eq!(
            inner_protocol("v3.channel.k8s.io").status,
            StatusFormat::Text
        );

        assert_eq!(
            negotiate(
                &headers(&[(PROTOCOL_HEADER, "channel.k8s.io")]),
                STREAM_SUBPROTOCOLS,
            )
            .ok(),
            Some("channel.k8s.io")
        );
        let refused = negotiate(
            &headers(&[(PROTOCOL_HEADER, "v9.channel.k8s.io")]),
            STREAM_SUBPROTOCOLS,
        )
        .expect_err("nothing in common")
        .response();
        assert_eq!(refused.status(), StatusCode::FORBIDDEN);
        assert_eq!(refused.headers().get_all(ACCEPTED_HEADER).iter().count(), 4);
        let missing = negotiate(&headers(&[]), PORT_FORWARD_SUBPROTOCOLS)
            .expect_err("none")
            .response();
        assert_eq!(missing.status(), StatusCode::BAD_REQUEST);
        assert!(!requested(&headers(&[("upgrade", "websocket")])));
    }

    /// A session that echoes stdin on stdout, then writes `status` on the error channel and
    /// ends when stdin is closed.
    async fn echo_session(mut socket: Socket, status: &'static str) {
        while let Some(Ok(message)) = socket.next().await {
            let Message::Binary(bytes) = message else {
                continue;
            };
            match bytes.split_first() {
                Some((&STDIN, data)) => {
                    let reply = [&[STDOUT][..], data].concat();
                    if socket.send(Message::binary(reply)).await.is_err() {
                        return;
                    }
                }
                Some((&CLOSE_SIGNAL, _)) => break,
                _ => {}
            }
        }
        let error = [&[ERROR][..], status.as_bytes()].concat();
        let _ = socket.send(Message::binary(error)).await;
        let _ = socket.close(None).await;
        while let Some(Ok(_)) = socket.next().await {}
    }

    /// A client's side of a bridged exec: the server end of the connection and the client's.
    fn connect(subprotocol: &'static str, status: &'static str) -> tokio::io::DuplexStream {
        let (server, client) = tokio::io::duplex(1 << 16);
        let options = StreamOptions {
            stdin: true,
            stdout: true,
            ..StreamOptions::default()
        };
        let expected = expected_streams(subprotocol, &options);
        tokio::spawn(bridge_streams(
            Box::new(server),
            subprotocol,
            expected,
            move |socket| echo_session(socket, status),
        ));
        client
    }

    /// Opens the error (1), stdin (3) and stdout (5) streams.
    fn open_streams() -> Vec<u8> {
        let mut writer = spdy::Writer::default();
        [("error", 1), ("stdin", 3), ("stdout", 5)]
            .iter()
            .flat_map(|(kind, id)| writer.syn_stream(*id, &[("streamtype", kind)], false))
            .collect()
    }

    /// A client that enforces SPDY/3.1's windows both ways (stream windows of 16 KiB for what
    /// it receives, given back only by half windows; the server's windows for what it sends)
    /// moves 1 MiB through `cat` and back. Without the server's windows it sees DATA beyond
    /// its window; without the server's WINDOW_UPDATEs its stdin stalls at 64 KiB.
    #[tokio::test]
    async fn a_client_enforcing_windows_moves_a_mebibyte_each_way() {
        const TOTAL: usize = 1 << 20;
        const WINDOW: i64 = 16 * 1024;
        let client = connect("v4.channel.k8s.io", "{}");
        let (mut rd, mut wr) = tokio::io::split(client);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
        tokio::spawn(async move {
            while let Some(frame) = rx.recv().await {
                if wr.write_all(&frame).await.is_err() {
                    return;
                }
            }
        });
        tx.send(spdy::settings(WINDOW as u32)).expect("writer");
        tx.send(open_streams()).expect("writer");
        let run = async {
            let mut reader = spdy::Reader::default();
            let (mut send_stream, mut send_session) = (65_536i64, 65_536i64);
            let (mut recv_stream, mut recv_session) = (WINDOW, 65_536i64);
            let (mut owed_stream, mut owed_session) = (0i64, 0i64);
            let (mut sent, mut echoed, mut stdout_done) = (0usize, 0usize, false);
            let mut buffer = vec![0u8; 32 * 1024];
            loop {
                while sent < TOTAL && send_stream > 0 && send_session > 0 {
                    let n = (TOTAL - sent)
                        .min(20_000)
                        .min(send_stream.min(send_session) as usize);
                    tx.send(spdy::data(3, &vec![b'x'; n], sent + n == TOTAL))
                        .expect("writer");
                    sent += n;
                    send_stream -= n as i64;
                    send_session -= n as i64;
                }
                if stdout_done {
                    return (sent, echoed);
                }
                let n = rd.read(&mut buffer).await.expect("reads");
                assert!(
                    n > 0,
                    "the server closed early: {sent} sent, {echoed} echoed"
                );
                reader.push(&buffer[..n]);
                while let Some(frame) = reader.next_frame().expect("frames") {
                    match frame {
                        spdy::Frame::Data { id: 5, data, fin } => {
                            let len = data.len() as i64;
                            assert!(
                                len <= recv_stream,
                                "{len} bytes over a window of {recv_stream}"
                            );
                            assert!(
                                len <= recv_session,
                                "{len} bytes over the session's {recv_session}"
                            );
                            recv_stream -= len;
                            recv_session -= len;
                            echoed += data.len();
                            owed_stream += len;
                            owed_session += len;
                            if owed_stream >= WINDOW / 2 {
                                tx.send(spdy::window_update(5, owed_stream as u32))
                                    .expect("writer");
                                recv_stream += owed_stream;
                                owed_stream = 0;
                            }
                            if owed_session >= 32_768 {
                                tx.send(spdy::window_update(0, owed_session as u32))
                                    .expect("writer");
                                recv_session += owed_session;
                                owed_session = 0;
                            }
                            stdout_done |= fin;
                        }
                        spdy::Frame::WindowUpdate { id: 3, delta } => {
                            send_stream += i64::from(delta)
                        }
                        spdy::Frame::WindowUpdate { id: 0, delta } => {
                            send_session += i64::from(delta)
                        }
                        spdy::Frame::Ping(payload) => {
                            tx.send(spdy::pong(&payload)).expect("writer");
                        }
                        _ => {}
                    }
                }
            }
        };
        let (sent, echoed) = tokio::time::timeout(Duration::from_secs(20), run)
            .await
            .expect("the transfer does not stall");
        assert_eq!((sent, echoed), (TOTAL, TOTAL));
    }

    /// `channel.k8s.io`: every stream is replied to, then the error stream is reset and the
    /// stdin stream's server half closed; output flows, the failure's text is not written.
    #[tokio::test]
    async fn v1_resets_the_error_stream_once_the_streams_exist() {
        let client = connect(
            "channel.k8s.io",
            "command terminated with non-zero exit code",
        );
        let (mut rd, mut wr) = tokio::io::split(client);
        let mut bytes = open_streams();
        bytes.extend(spdy::data(3, b"hello", true));
        wr.write_all(&bytes).await.expect("writes");
        let mut seen = Vec::new();
        let mut kinds = Vec::new();
        let mut reader = spdy::Reader::default();
        let mut buffer = vec![0u8; 4096];
        let read = async {
            loop {
                let n = rd.read(&mut buffer).await.unwrap_or(0);
                if n == 0 {
                    break;
                }
                reader.push(&buffer[..n]);
                // SYN_REPLY frames read as `Other`.
                while let Some(frame) = reader.next_frame().expect("frames") {
                    kinds.push(
                        format!("{frame:?}")
                            .split([' ', '('])
                            .next()
                            .unwrap_or("")
                            .to_string(),
                    );
                    match frame {
                        spdy::Frame::Data { id, data, fin } => {
                            seen.push((id, String::from_utf8_lossy(&data).into_owned(), fin))
                        }
                        spdy::Frame::Reset { id } => seen.push((id, "RST".into(), true)),
                        _ => {}
                    }
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(10), read)
            .await
            .expect("the session ends");
        assert_eq!(
            kinds.iter().filter(|k| *k == "Other").count(),
            3,
            "{kinds:?}"
        );
        assert_eq!(
            seen,
            [
                (1, "RST".to_string(), true),
                (3, String::new(), true),
                (5, "hello".to_string(), false),
                (5, String::new(), true),
            ]
        );
    }

    #[test]
    fn streams_expected_follow_the_options() {
        let options = StreamOptions {
            stdin: true,
            stdout: true,
            tty: true,
            ..StreamOptions::default()
        };
        assert_eq!(
            expected_streams("v4.channel.k8s.io", &options),
            ["error", "stdin", "stdout", "resize"]
        );
        for old in ["v2.channel.k8s.io", "channel.k8s.io"] {
            assert_eq!(
                expected_streams(old, &options),
                ["error", "stdin", "stdout"]
            );
        }
    }
}
