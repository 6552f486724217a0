//! The HTTP side of exec, attach and port-forward: the request's options, Kubernetes' checks
//! before the upgrade (the API server's as `Status` errors, the kubelet's as plain text, as
//! kube-apiserver passes them on), the WebSocket handshake on hyper's upgraded connection, and
//! the exec and attach sessions.

use std::time::Duration;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use futures::{SinkExt, Stream, StreamExt};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::WebSocketStream;
use tracing::{debug, info_span, Instrument};

use super::channel::{self, Inbound, Outcome, Protocol, ERROR, STDIN, STDOUT, STREAM_PROTOCOLS};
use super::container::{named, Container, CONTAINER_LISTS, STATUS_LISTS};
use super::port_forward;
use super::shell;
use super::spdy_upgrade;
use super::stdio::{crlf, Stdin, Stdio};
use crate::errors::ApiError;
use crate::https::HttpPeer;
use crate::registry::Registry;

/// The WebSocket a session runs over: the upgraded HTTP connection, or the in-memory one a
/// SPDY bridge feeds.
pub type Socket = WebSocketStream<Box<dyn Transport>>;

/// What a session's WebSocket runs over: the upgraded connection, or an in-memory pipe in tests.
pub trait Transport: AsyncRead + AsyncWrite + Unpin + Send + 'static {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Transport for T {}

/// How long a finished session waits for the client to answer its close.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// The query of an exec or attach (`PodExecOptions`, `PodAttachOptions`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct StreamOptions {
    pub command: Vec<String>,
    pub container: Option<String>,
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    pub tty: bool,
}

/// A boolean query parameter as Kubernetes converts one: absent, empty, `0` and `false` are
/// false, anything else true.
fn flag(pairs: &[(String, String)], key: &str) -> bool {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .is_some_and(|(_, v)| !(v.is_empty() || v == "0" || v.eq_ignore_ascii_case("false")))
}

impl StreamOptions {
    pub fn parse(pairs: &[(String, String)]) -> StreamOptions {
        let tty = flag(pairs, "tty");
        StreamOptions {
            command: pairs
                .iter()
                .filter(|(k, _)| k == "command")
                .map(|(_, v)| v.clone())
                .collect(),
            container: pairs
                .iter()
                .find(|(k, _)| k == "container")
                .map(|(_, v)| v.clone())
                .filter(|v| !v.is_empty()),
            stdin: flag(pairs, "stdin"),
            stdout: flag(pairs, "stdout"),
            // A terminal has no separate stderr; the kubelet drops it.
            stderr: flag(pairs, "stderr") && !tty,
            tty,
        }
    }
}

/// A plain-text error, as the kubelet writes one and kube-apiserver passes it on; kubectl
/// prints it after "unable to upgrade connection: ".
pub(super) fn kubelet_error(status: StatusCode, message: &str) -> Response {
    let mut response = Response::new(Body::from(message.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// Whether `container` of `pod` is running (the runtime has it to exec in).
fn is_running(pod: &Value, container: &str) -> bool {
    named(pod, STATUS_LISTS, container).any(|s| s.pointer("/state/running").is_some())
}

/// The main process of `container` when it reads its stdin: a container with `stdin: true`
/// whose command is `cat` (no files) or a shell without `-c`. Its argv is `command` and
/// `args`, or `args` alone (an image with no entrypoint runs them, as busybox does).
fn interactive_command(pod: &Value, container: &str) -> Option<Vec<String>> {
    let spec = named(pod, CONTAINER_LISTS, container).next()?;
    if spec.get("stdin").and_then(Value::as_bool) != Some(true) {
        return None;
    }
    let strings = |key: &str| -> Vec<String> {
        spec.get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect()
    };
    let mut argv = strings("command");
    argv.extend(strings("args"));
    let program = argv.first()?.rsplit('/').next()?.to_string();
    let reads_stdin = match program.as_str() {
        "cat" => argv.len() == 1,
        "sh" | "bash" | "ash" | "dash" => !argv.iter().skip(1).any(|a| a == "-c"),
        _ => false,
    };
    reads_stdin.then_some(argv)
}

/// A query's parameters in order, repeated ones (`command`) kept.
pub(super) fn query_pairs(query: &str) -> Vec<(String, String)> {
    serde_urlencoded::from_str(query).unwrap_or_default()
}

/// Why a WebSocket handshake is refused: a 400 with this text, as the kubelet answers.
#[derive(Debug)]
pub(super) struct Refused(String);

impl Refused {
    pub(super) fn response(&self) -> Response {
        kubelet_error(StatusCode::BAD_REQUEST, &self.0)
    }
}

/// The WebSocket handshake a request asks for: the accept key and the negotiated protocol.
pub(super) fn handshake(
    headers: &HeaderMap,
    served: &[Protocol],
) -> Result<(String, Protocol), Refused> {
    let header_has = |name: header::HeaderName, token: &str| {
        headers.get_all(name).iter().any(|v| {
            v.to_str()
                .is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
        })
    };
    if !header_has(header::UPGRADE, "websocket") {
        return Err(Refused("Upgrade request required".to_string()));
    }
    let key = headers
        .get(header::SEC_WEBSOCKET_KEY)
        .filter(|_| header_has(header::CONNECTION, "upgrade"))
        .filter(|_| {
            headers
                .get(header::SEC_WEBSOCKET_VERSION)
                .is_some_and(|v| v.as_bytes() == b"13")
        })
        .ok_or_else(|| {
            Refused("websocket: the client is not using the websocket protocol".to_string())
        })?;
    let offered = headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok());
    let protocol = channel::negotiate(offered, served).map_err(Refused)?;
    Ok((derive_accept_key(key.as_bytes()), protocol))
}

/// The `101 Switching Protocols` answer.
pub(super) fn switching(accept: &str, protocol: &Protocol) -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let headers = response.headers_mut();
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    if let Ok(v) = HeaderValue::from_str(accept) {
        headers.insert(header::SEC_WEBSOCKET_ACCEPT, v);
    }
    if !protocol.name.is_empty() {
        headers.insert(
            header::SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_static(protocol.name),
        );
    }
    response
}

/// After the 101: the connection as a WebSocket, handed to `session`.
pub(super) fn spawn_session<F, Fut>(request: Request, what: String, session: F)
where
    F: FnOnce(Socket) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    spawn_upgraded(request, info_span!("stream", %what), |io| async move {
        let config = WebSocketConfig::default()
            .max_message_size(Some(16 << 20))
            .max_frame_size(Some(16 << 20));
        let socket = WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
        session(socket).await;
    });
}

/// Upgrades the connection and runs `run` on it in `span`, with the connection's idle
/// timeouts held off while it runs.
pub(super) fn spawn_upgraded<F, Fut>(mut request: Request, span: tracing::Span, run: F)
where
    F: FnOnce(Box<dyn Transport>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let in_flight = request
        .extensions()
        .get::<ConnectInfo<HttpPeer>>()
        .and_then(|c| c.0.clock.as_ref())
        .map(|clock| clock.begin());
    let upgrade = hyper::upgrade::on(&mut request);
    tokio::spawn(
        async move {
            let _in_flight = in_flight;
            match upgrade.await {
                Ok(upgraded) => run(Box::new(TokioIo::new(upgraded))).await,
                Err(e) => debug!(error = %e, "the connection was not upgraded"),
            }
            debug!("session ended");
        }
        .instrument(span),
    );
}

/// Serves `pods/{name}/exec`, `pods/{name}/attach` and `pods/{name}/portforward`.
pub async fn serve(
    registry: &Registry,
    tokens: Option<&crate::service_account_tokens::ServiceAccountTokens>,
    namespace: &str,
    name: &str,
    subresource: &str,
    request: Request,
) -> Result<Response, ApiError> {
    let pairs = query_pairs(request.uri().query().unwrap_or(""));
    let pod = registry
        .get(api::resources::pods(), Some(namespace), name)
        .await?;
    let has_host = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    if subresource == "portforward" {
        if !has_host {
            return Err(ApiError::bad_request(format!(
                "pod {name} does not have a host assigned"
            )));
        }
        return port_forward::serve(&pod, &pairs, request);
    }
    let options = StreamOptions::parse(&pairs);
    let container = crate::logs::container_of(&pod, name, options.container.as_deref())?;
    if !has_host {
        return Err(ApiError::bad_request(format!(
            "pod {name} does not have a host assigned"
        )));
    }
    if !options.stdin && !options.stdout && !options.stderr {
        return Ok(kubelet_error(
            StatusCode::BAD_REQUEST,
            "you must specify at least 1 of stdin, stdout, stderr",
        ));
    }
    if !is_running(&pod, &container) {
        return Ok(kubelet_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("container not found (\"{container}\")"),
        ));
    }
    let spdy = spdy_upgrade::requested(request.headers());
    let (upgrade, protocol) = if spdy {
        match spdy_upgrade::negotiate(request.headers(), spdy_upgrade::STREAM_SUBPROTOCOLS) {
            Ok(chosen) => (Upgrade::Spdy(chosen), spdy_upgrade::inner_protocol(chosen)),
            Err(refused) => return Ok(refused.response()),
        }
    } else {
        match handshake(request.headers(), STREAM_PROTOCOLS) {
            Ok((accept, protocol)) => (Upgrade::WebSocket(accept), protocol),
            Err(refused) => return Ok(refused.response()),
        }
    };
    let what = format!("{subresource} {namespace}/{name}/{container}");
    if subresource == "attach" && options.stdin {
        if let Some(command) = interactive_command(&pod, &container) {
            // The main process reads stdin: it runs on the attached streams as an exec would.
            let emulated = Container::load(registry, tokens, &pod, &container).await;
            let options = StreamOptions { command, ..options };
            return Ok(
                upgrade.start(request, what, &options.clone(), protocol, move |socket| {
                    exec(socket, protocol, options, emulated)
                }),
            );
        }
    }
    if subresource == "attach" {
        let log = crate::logs::stream_log(
            registry,
            &pod,
            &api::node_logs::LogRequest {
                namespace: namespace.to_string(),
                pod: name.to_string(),
                container,
                follow: true,
                tail_lines: Some(0),
                previous: false,
                timestamps: false,
                limit_bytes: None,
            },
        )
        .await?;
        return Ok(
            upgrade.start(request, what, &options.clone(), protocol, move |socket| {
                attach(socket, protocol, options, log)
            }),
        );
    }
    if options.command.is_empty() {
        return Ok(kubelet_error(
            StatusCode::BAD_REQUEST,
            "you must specify at least one command for the container",
        ));
    }
    let emulated = Container::load(registry, tokens, &pod, &container).await;
    Ok(
        upgrade.start(request, what, &options.clone(), protocol, move |socket| {
            exec(socket, protocol, options, emulated)
        }),
    )
}

/// The upgrade an exec or attach was granted.
enum Upgrade {
    /// A WebSocket, with its accept key.
    WebSocket(String),
    /// Plain SPDY, with the chosen subprotocol.
    Spdy(&'static str),
}

impl Upgrade {
    /// Starts the session behind the upgrade and returns the 101 answering it.
    fn start<F, Fut>(
        self,
        request: Request,
        what: String,
        options: &StreamOptions,
        protocol: Protocol,
        session: F,
    ) -> Response
    where
        F: FnOnce(Socket) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        match self {
            Upgrade::WebSocket(accept) => {
                spawn_session(request, what, session);
                switching(&accept, &protocol)
            }
            Upgrade::Spdy(chosen) => {
                let expected = spdy_upgrade::expected_streams(chosen, options);
                spdy_upgrade::spawn_streams(request, what, chosen, expected, session);
                spdy_upgrade::switching(chosen)
            }
        }
    }
}

/// Ends a session: the outcome on the error channel (when the protocol writes one), then the
/// close handshake.
async fn finish<T: Transport>(
    socket: &mut WebSocketStream<T>,
    protocol: Protocol,
    outcome: Option<(Outcome, &[String])>,
) {
    if let Some((outcome, command)) = outcome {
        if let Some(status) = outcome.status(protocol.status, command) {
            let _ = socket.send(protocol.encode(ERROR, status.as_bytes())).await;
        }
    }
    close(socket, CloseCode::Normal, "").await;
}

/// Sends a close and waits (briefly) for the client's.
pub async fn close<T: Transport>(socket: &mut WebSocketStream<T>, code: CloseCode, reason: &str) {
    let frame = CloseFrame {
        code,
        reason: reason.to_string().into(),
    };
    if socket.close(Some(frame)).await.is_err() {
        return;
    }
    let _ = tokio::time::timeout(CLOSE_WAIT, async {
        while let Some(Ok(_)) = socket.next().await {}
    })
    .await;
}

/// What a session does with one message from the client.
enum Step {
    Stdin(Bytes),
    CloseStdin,
    Ignore,
    /// The client went away, or broke the protocol (the session ends; the process does not).
    End,
}

fn read_step(
    protocol: &Protocol,
    message: Option<
        Result<tokio_tungstenite::tungstenite::Message, tokio_tungstenite::tungstenite::Error>,
    >,
) -> Step {
    let message = match message {
        Some(Ok(m)) => m,
        Some(Err(e)) => {
            debug!(error = %e, "the WebSocket failed");
            return Step::End;
        }
        None => return Step::End,
    };
    match protocol.decode(message) {
        Ok(Inbound::Data {
            channel: STDIN,
            data,
        }) => Step::Stdin(data),
        Ok(Inbound::Closed { channel: STDIN }) => Step::CloseStdin,
        Ok(Inbound::End) => Step::End,
        // Resizes, and channels the client has no business writing, are skipped.
        Ok(_) => Step::Ignore,
        Err(e) => {
            debug!(error = %e, "a malformed message ends the session");
            Step::End
        }
    }
}

pub(super) async fn exec<T: Transport>(
    mut socket: WebSocketStream<T>,
    protocol: Protocol,
    options: StreamOptions,
    container: Container,
) {
    let (out_tx, mut out_rx) = mpsc::unbounded_channel();
    let (stdin, mut writer) = if options.stdin {
        let (stdin, writer) = Stdin::channel();
        (stdin, Some(writer))
    } else {
        (Stdin::closed(), None)
    };
    let mut stdio = Stdio::new(stdin, out_tx, options.tty, options.stdout, options.stderr);
    let outcome = {
        let run = shell::exec(&options.command, &container, &mut stdio);
        tokio::pin!(run);
        loop {
            let room = writer.as_ref().is_none_or(|w| w.has_room());
            tokio::select! {
                biased;
                outcome = &mut run => break Some(outcome),
                Some((channel, data)) = out_rx.recv() => {
                    if socket.send(protocol.encode(channel, &data)).await.is_err() {
                        break None;
                    }
                }
                message = socket.next(), if room => match read_step(&protocol, message) {
                    Step::Stdin(data) => {
                        if let Some(w) = &writer {
                            if !data.is_empty() && !w.send(data) {
                                writer = None;
                            }
                        }
                    }
                    Step::CloseStdin => writer = None,
                    Step::Ignore => {}
                    Step::End => break None,
                },
            }
        }
    };
    drop(stdio);
    let Some(outcome) = outcome else {
        close(&mut socket, CloseCode::Normal, "").await;
        return;
    };
    while let Ok((channel, data)) = out_rx.try_recv() {
        if socket.send(protocol.encode(channel, &data)).await.is_err() {
            return;
        }
    }
    finish(&mut socket, protocol, Some((outcome, &options.command))).await;
}

/// Attach: what the container's main process prints from now on (its log) on stdout, until it
/// exits or the client leaves; stdin is read and dropped, since this process reads none (one
/// that does runs as an exec, see [`interactive_command`]).
async fn attach<T: Transport>(
    mut socket: WebSocketStream<T>,
    protocol: Protocol,
    options: StreamOptions,
    log: impl Stream<Item = Bytes> + Send + 'static,
) {
    let mut log = std::pin::pin!(log);
    let ended = loop {
        tokio::select! {
            biased;
            chunk = log.next() => match chunk {
                Some(bytes) if options.stdout => {
                    let bytes = if options.tty { crlf(&bytes) } else { bytes };
                    if socket.send(protocol.encode(STDOUT, &bytes)).await.is_err() {
                        return;
                    }
                }
                Some(_) => {}
                None => break true,
            },
            message = socket.next() => {
                if let Step::End = read_step(&protocol, message) {
                    break false;
                }
            }
        }
    };
    let outcome = ended.then_some((Outcome::Exited(0), &[][..]));
    finish(&mut socket, protocol, outcome).await;
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod session_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::channel::PORT_FORWARD_PROTOCOLS;

    #[test]
    fn options_as_kubernetes_converts_them() {
        let o = StreamOptions::parse(&query_pairs(
            "command=sh&command=-c&command=echo%20hi&container=app&stdout=true&stderr=1&stdin=false",
        ));
        assert_eq!(o.command, ["sh", "-c", "echo hi"]);
        assert_eq!(o.container.as_deref(), Some("app"));
        assert!(o.stdout && o.stderr && !o.stdin && !o.tty);
        let tty = StreamOptions::parse(&query_pairs("command=sh&tty=true&stderr=true&stdin=yes"));
        assert!(tty.tty && tty.stdin && !tty.stderr);
    }

    #[test]
    fn the_handshake_needs_a_websocket_upgrade() {
        let mut headers = HeaderMap::new();
        let refused = handshake(&headers, STREAM_PROTOCOLS).expect_err("no upgrade");
        assert_eq!(refused.response().status(), StatusCode::BAD_REQUEST);
        headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
        headers.insert(
            header::SEC_WEBSOCKET_VERSION,
            HeaderValue::from_static("13"),
        );
        headers.insert(
            header::SEC_WEBSOCKET_KEY,
            HeaderValue::from_static("dGhlIHNhbXBsZSBub25jZQ=="),
        );
        headers.insert(
            header::SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_static("v5.channel.k8s.io, v4.channel.k8s.io"),
        );
        let (accept, protocol) = handshake(&headers, STREAM_PROTOCOLS).expect("accepted");
        // RFC 6455's example key and answer.
        assert_eq!(accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
        assert_eq!(protocol.name, "v5.channel.k8s.io");
        let response = switching(&accept, &protocol);
        assert_eq!(response.status(), StatusCode::SWITCHING_PROTOCOLS);
        assert_eq!(
            response.headers()[header::SEC_WEBSOCKET_PROTOCOL],
            "v5.channel.k8s.io"
        );
        headers.insert(
            header::SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_static("SPDY/3.1+portforward.k8s.io"),
        );
        assert!(handshake(&headers, STREAM_PROTOCOLS).is_err());
        let (_, tunnel) = handshake(&headers, PORT_FORWARD_PROTOCOLS).expect("kubectl's tunnel");
        assert_eq!(tunnel.name, "SPDY/3.1+portforward.k8s.io");
    }

    #[test]
    fn cat_and_shells_with_stdin_read_what_attach_sends() {
        let pod = serde_json::json!({"spec": {"containers": [
            {"name": "cat", "stdin": true, "args": ["cat"]},
            {"name": "shell", "stdin": true, "command": ["/bin/sh"]},
            {"name": "script", "stdin": true, "command": ["sh", "-c", "echo hi"]},
            {"name": "closed", "command": ["cat"]},
            {"name": "files", "stdin": true, "command": ["cat", "/etc/hosts"]},
            {"name": "server", "stdin": true, "command": ["nginx"]}]}});
        assert_eq!(
            interactive_command(&pod, "cat"),
            Some(vec!["cat".to_string()])
        );
        assert_eq!(
            interactive_command(&pod, "shell"),
            Some(vec!["/bin/sh".to_string()])
        );
        for name in ["script", "closed", "files", "server", "missing"] {
            assert_eq!(interactive_command(&pod, name), None, "{name}");
        }
    }

    #[test]
    fn only_running_containers_exec() {
        let pod = serde_json::json!({"status": {"containerStatuses": [
            {"name": "a", "state": {"running": {}}},
            {"name": "b", "state": {"waiting": {"reason": "ContainerCreating"}}}]}});
        assert!(is_running(&pod, "a"));
        assert!(!is_running(&pod, "b"));
        assert!(!is_running(&pod, "c"));
    }
}
