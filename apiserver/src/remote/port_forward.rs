//! `pods/{name}/portforward` over a WebSocket (`v4.channel.k8s.io`, the kubelet's WebSocket
//! port-forward): each requested port has a data channel `2i` and an error channel `2i + 1`,
//! and the first message on each carries the port, two bytes little-endian.
//!
//! Behind every port a container of the pod declares (`ports[].containerPort`, TCP) listens an
//! emulated server, one connection per port and session: a request that starts like HTTP/1.x
//! gets `200 OK` with a `text/plain` body naming the pod, container and port (and the request
//! line); anything else is echoed back. A port nothing declares is refused on its error
//! channel, as the runtime reports a refused connection. When every port's connection has
//! closed (an HTTP request with `Connection: close` closes its own), the session ends, as the
//! kubelet's does.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;
use futures::{SinkExt, StreamExt};
use serde_json::Value;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tracing::debug;

use super::channel::{Inbound, Protocol, PORT_FORWARD_PROTOCOLS, SPDY_TUNNEL};
use super::session::{self, Transport};
use super::spdy;
use super::spdy_upgrade;
use crate::errors::ApiError;
use std::collections::HashMap;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

/// The ports of a request: `ports` (repeated, or comma-separated as Kubernetes converts them).
pub fn parse_ports(pairs: &[(String, String)]) -> Result<Vec<u16>, String> {
    let mut ports = Vec::new();
    for (_, value) in pairs.iter().filter(|(k, _)| k == "ports" || k == "port") {
        if value.is_empty() {
            return Err("query parameter \"port\" cannot be empty".into());
        }
        for p in value.split(',') {
            match p.trim().parse::<u16>() {
                Ok(0) => return Err(format!("port \"{value}\" must be > 0")),
                Ok(port) => ports.push(port),
                Err(e) => return Err(format!("unable to parse \"{value}\" as a port: {e}")),
            }
        }
    }
    if ports.is_empty() {
        return Err("query parameter \"port\" is required".into());
    }
    Ok(ports)
}

/// The container declaring `port`, if one does.
fn declared_by(pod: &Value, port: u16) -> Option<String> {
    pod.pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| {
            c.get("ports")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .any(|p| {
                    p.get("containerPort").and_then(Value::as_u64) == Some(u64::from(port))
                        && p.get("protocol").and_then(Value::as_str).unwrap_or("TCP") == "TCP"
                })
        })
        .and_then(|c| c.get("name").and_then(Value::as_str))
        .map(str::to_string)
}

/// Checks the request, answers the handshake and starts the session.
pub fn serve(
    pod: &Value,
    pairs: &[(String, String)],
    request: Request,
) -> Result<Response, ApiError> {
    if spdy_upgrade::requested(request.headers()) {
        let chosen = match spdy_upgrade::negotiate(
            request.headers(),
            spdy_upgrade::PORT_FORWARD_SUBPROTOCOLS,
        ) {
            Ok(chosen) => chosen,
            Err(refused) => return Ok(refused.response()),
        };
        let pod = pod.clone();
        let what = format!("portforward {} (SPDY)", pod_name(&pod));
        spdy_upgrade::spawn_tunnel(request, what, move |socket| tunnel(socket, pod));
        return Ok(spdy_upgrade::switching(chosen));
    }
    let (accept, protocol) = match session::handshake(request.headers(), PORT_FORWARD_PROTOCOLS) {
        Ok(h) => h,
        Err(refused) => return Ok(refused.response()),
    };
    if protocol.name == SPDY_TUNNEL {
        let pod = pod.clone();
        let what = format!("portforward {} (SPDY over WebSocket)", pod_name(&pod));
        session::spawn_session(request, what, move |socket| tunnel(socket, pod));
        return Ok(session::switching(&accept, &protocol));
    }
    let ports = match parse_ports(pairs) {
        Ok(p) => p,
        Err(why) => return Ok(session::kubelet_error(StatusCode::BAD_REQUEST, &why)),
    };
    let forwards = forwards_for(pod, &ports);
    let text = |p: &str| pod.pointer(p).and_then(Value::as_str).unwrap_or("");
    let what = format!(
        "portforward {}/{} {ports:?}",
        text("/metadata/namespace"),
        text("/metadata/name")
    );
    session::spawn_session(request, what, move |socket| {
        forward(socket, protocol, ports, forwards)
    });
    Ok(session::switching(&accept, &protocol))
}

/// `namespace/name` of a pod, for spans.
fn pod_name(pod: &Value) -> String {
    let text = |p: &str| pod.pointer(p).and_then(Value::as_str).unwrap_or("");
    format!("{}/{}", text("/metadata/namespace"), text("/metadata/name"))
}

/// What is behind each requested port of the pod.
pub(super) fn forwards_for(pod: &Value, ports: &[u16]) -> Vec<Forward> {
    let text = |p: &str| pod.pointer(p).and_then(Value::as_str).unwrap_or("");
    let (name, namespace, uid) = (
        text("/metadata/name"),
        text("/metadata/namespace"),
        text("/metadata/uid"),
    );
    ports
        .iter()
        .map(|&port| match declared_by(pod, port) {
            Some(container) => Forward::Open(Listener::new(name, namespace, &container, port)),
            None => Forward::Refused(refusal(name, namespace, uid, port)),
        })
        .collect()
}

/// The runtime's words for a port nothing listens on.
fn refusal(name: &str, namespace: &str, uid: &str, port: u16) -> String {
    format!(
        "error forwarding port {port} to pod {name}_{namespace}, uid {uid}: failed to connect to localhost:{port} inside namespace \"{name}_{namespace}\": connect: connection refused"
    )
}

pub(super) enum Forward {
    Open(Listener),
    Refused(String),
    Closed,
}

pub(super) async fn forward<T: Transport>(
    mut socket: WebSocketStream<T>,
    protocol: Protocol,
    ports: Vec<u16>,
    mut forwards: Vec<Forward>,
) {
    for (i, port) in ports.iter().enumerate() {
        let bytes = port.to_le_bytes();
        for channel in [2 * i, 2 * i + 1] {
            let Ok(channel) = u8::try_from(channel) else {
                break;
            };
            if socket.send(protocol.encode(channel, &bytes)).await.is_err() {
                return;
            }
        }
    }
    for (i, f) in forwards.iter_mut().enumerate() {
        if let Forward::Refused(why) = f {
            let Ok(channel) = u8::try_from(2 * i + 1) else {
                continue;
            };
            if socket
                .send(protocol.encode(channel, why.as_bytes()))
                .await
                .is_err()
            {
                return;
            }
            *f = Forward::Closed;
        }
    }
    while forwards.iter().any(|f| matches!(f, Forward::Open(_))) {
        let message = match socket.next().await {
            Some(Ok(m)) => m,
            Some(Err(e)) => {
                debug!(error = %e, "the WebSocket failed");
                return;
            }
            None => return,
        };
        let (channel, data) = match protocol.decode(message) {
            Ok(Inbound::Data { channel, data }) => (channel, data),
            Ok(Inbound::End) => return,
            Ok(_) => continue,
            Err(e) => {
                debug!(error = %e, "a malformed message ends the session");
                session::close(&mut socket, CloseCode::Invalid, "malformed message").await;
                return;
            }
        };
        // Data goes to a port's data channel; anything else the client writes is skipped.
        let Some(forward) = forwards
            .get_mut(usize::from(channel / 2))
            .filter(|_| channel % 2 == 0)
        else {
            continue;
        };
        let Forward::Open(listener) = forward else {
            continue;
        };
        let (reply, closes) = listener.receive(&data);
        if !reply.is_empty() && socket.send(protocol.encode(channel, &reply)).await.is_err() {
            return;
        }
        if closes {
            *forward = Forward::Closed;
        }
    }
    session::close(&mut socket, CloseCode::Normal, "").await;
}

/// kubectl's port-forward: SPDY streams in pairs (`streamtype: error` and `data`, sharing a
/// `requestid`, naming the `port`), one pair per local connection, as the kubelet serves them,
/// within SPDY/3.1's flow-control windows ([`spdy::Windows`]).
pub(super) async fn tunnel<T: Transport>(mut socket: WebSocketStream<T>, pod: Value) {
    let text = |p: &str| pod.pointer(p).and_then(Value::as_str).unwrap_or("");
    let (name, namespace, uid) = (
        text("/metadata/name"),
        text("/metadata/namespace"),
        text("/metadata/uid"),
    );
    let mut reader = spdy::Reader::default();
    let mut writer = spdy::Writer::default();
    let mut windows = spdy::Windows::default();
    // Data stream → its listener and request; error stream of each request.
    let mut open: HashMap<u32, (Listener, String)> = HashMap::new();
    let mut errors: HashMap<String, u32> = HashMap::new();
    // A refusal for a request whose error stream has not come yet.
    let mut refused: HashMap<String, String> = HashMap::new();
    loop {
        let bytes = match socket.next().await {
            Some(Ok(Message::Binary(b))) => b,
            Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
            Some(Ok(_)) => continue,
        };
        reader.push(&bytes);
        loop {
            let frame = match reader.next_frame() {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => {
                    debug!(error = %e, "a malformed SPDY frame ends the session");
                    session::close(&mut socket, CloseCode::Invalid, "malformed SPDY frame").await;
                    return;
                }
            };
            let mut out: Vec<Vec<u8>> = Vec::new();
            match frame {
                spdy::Frame::Stream {
                    id,
                    headers,
                    new: true,
                    ..
                } => {
                    out.push(writer.syn_reply(id));
                    let get = |k: &str| headers.get(k).cloned().unwrap_or_default();
                    let request = get("requestid");
                    match get("streamtype").as_str() {
                        "error" => {
                            if let Some(why) = refused.remove(&request) {
                                out.extend(windows.send(id, why.as_bytes(), true));
                            } else {
                                errors.insert(request, id);
                            }
                        }
                        "data" => {
                            let port = get("port").parse::<u16>().unwrap_or(0);
                            match declared_by(&pod, port) {
                                Some(container) => {
                                    let listener = Listener::new(name, namespace, &container, port);
                                    open.insert(id, (listener, request));
                                }
                                None => {
                                    let why = refusal(name, namespace, uid, port);
                                    match errors.remove(&request) {
                                        Some(error) => {
                                            out.extend(windows.send(error, why.as_bytes(), true))
                                        }
                                        None => {
                                            refused.insert(request, why);
                                        }
                                    }
                                    out.extend(windows.send(id, &[], true));
                                }
                            }
                        }
                        _ => {}
                    }
                }
                spdy::Frame::Data { id, data, .. } if !open.contains_key(&id) => {
                    out.extend(windows.consumed(None, data.len()));
                }
                spdy::Frame::Data { id, data, fin } => {
                    let Some((listener, _)) = open.get_mut(&id) else {
                        continue;
                    };
                    let (reply, closes) = listener.receive(&data);
                    if !reply.is_empty() {
                        out.extend(windows.send(id, &reply, false));
                    }
                    // The connection ends when the server closes it, or when the client
                    // has closed its side (the emulated servers close with it).
                    let ends = closes || fin;
                    // What the listener has taken is given back to the client's windows.
                    out.extend(windows.consumed((!ends).then_some(id), data.len()));
                    if ends {
                        if let Some((_, request)) = open.remove(&id) {
                            out.extend(windows.send(id, &[], true));
                            if let Some(error) = errors.remove(&request) {
                                out.extend(windows.send(error, &[], true));
                            }
                        }
                    }
                }
                spdy::Frame::Reset { id } => {
                    open.remove(&id);
                    windows.forget(id);
                }
                spdy::Frame::Settings { initial_window } => {
                    out.extend(windows.settings(initial_window))
                }
                spdy::Frame::WindowUpdate { id, delta } => out.extend(windows.update(id, delta)),
                spdy::Frame::Ping(payload) => out.extend(windows.ping(&payload)),
                spdy::Frame::GoAway => {
                    session::close(&mut socket, CloseCode::Normal, "").await;
                    return;
                }
                spdy::Frame::Stream { .. } | spdy::Frame::Other => {}
            }
            for frame in out {
                if socket.send(Message::binary(frame)).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// The emulated server behind one declared port, for one connection. Pure.
#[derive(Debug)]
pub struct Listener {
    greeting: String,
    mode: Mode,
}

#[derive(Debug, PartialEq, Eq)]
enum Mode {
    Undecided,
    Echo,
    /// HTTP/1.x: the bytes of the request being read, and how much of a body is still to skip.
    Http {
        buffered: Vec<u8>,
        body_left: usize,
    },
}

/// HTTP methods a request can start with.
const METHODS: &[&str] = &["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"];
/// The most of a request head the listener holds; a longer one is answered 431.
const MAX_HEAD: usize = 64 << 10;

impl Listener {
    pub fn new(pod: &str, namespace: &str, container: &str, port: u16) -> Listener {
        Listener {
            greeting: format!(
                "pod {pod} in namespace {namespace}, container {container}, port {port}"
            ),
            mode: Mode::Undecided,
        }
    }

    /// Takes bytes from the client; returns what the server answers and whether it then closes
    /// the connection.
    pub fn receive(&mut self, data: &[u8]) -> (Vec<u8>, bool) {
        if self.mode == Mode::Undecided {
            let http = METHODS
                .iter()
                .any(|m| data.starts_with(m.as_bytes()) && data.get(m.len()) == Some(&b' '));
            self.mode = if http {
                Mode::Http {
                    buffered: Vec::new(),
                    body_left: 0,
                }
            } else {
                Mode::Echo
            };
        }
        let Mode::Http {
            buffered,
            body_left,
        } = &mut self.mode
        else {
            return (data.to_vec(), false);
        };
        let mut input = data;
        let skip = (*body_left).min(input.len());
        *body_left -= skip;
        input = &input[skip..];
        buffered.extend_from_slice(input);
        let mut out = Vec::new();
        loop {
            let Some(end) = buffered.windows(4).position(|w| w == b"\r\n\r\n") else {
                if buffered.len() > MAX_HEAD {
                    out.extend_from_slice(
                        b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    );
                    return (out, true);
                }
                return (out, false);
            };
            let head = String::from_utf8_lossy(&buffered[..end]).into_owned();
            let rest = buffered.split_off(end + 4);
            *buffered = rest;
            let mut lines = head.split("\r\n");
            let request_line = lines.next().unwrap_or("").to_string();
            let mut content_length = 0usize;
            let mut close = request_line.ends_with("HTTP/1.0");
            for line in lines {
                let Some((k, v)) = line.split_once(':') else {
                    continue;
                };
                let v = v.trim();
                if k.eq_ignore_ascii_case("content-length") {
                    content_length = v.parse().unwrap_or(0);
                } else if k.eq_ignore_ascii_case("connection") {
                    close = v.eq_ignore_ascii_case("close");
                }
            }
            let body = format!("{}: {request_line}\n", self.greeting);
            let head_only = request_line.starts_with("HEAD ");
            out.extend_from_slice(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n{}\r\n",
                    body.len(),
                    if close { "Connection: close\r\n" } else { "" }
                )
                .as_bytes(),
            );
            if !head_only {
                out.extend_from_slice(body.as_bytes());
            }
            let skip = content_length.min(buffered.len());
            buffered.drain(..skip);
            *body_left = content_length - skip;
            if close {
                return (out, true);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::remote::session::query_pairs as pairs;

    #[test]
    fn ports_as_kubernetes_reads_them() {
        assert_eq!(parse_ports(&pairs("ports=80,8080")), Ok(vec![80, 8080]));
        assert_eq!(parse_ports(&pairs("ports=80&ports=81")), Ok(vec![80, 81]));
        assert_eq!(
            parse_ports(&[]),
            Err("query parameter \"port\" is required".into())
        );
        assert!(parse_ports(&pairs("ports=0")).is_err());
        assert!(parse_ports(&pairs("ports=x")).is_err());
        assert!(parse_ports(&pairs("ports=70000")).is_err());
    }

    #[test]
    fn declared_ports_find_their_container() {
        let pod = json!({"spec": {"containers": [
            {"name": "web", "ports": [{"containerPort": 80}]},
            {"name": "dns", "ports": [{"containerPort": 53, "protocol": "UDP"}]}]}});
        assert_eq!(declared_by(&pod, 80).as_deref(), Some("web"));
        assert_eq!(declared_by(&pod, 53), None);
        assert_eq!(declared_by(&pod, 81), None);
    }

    #[test]
    fn anything_but_http_is_echoed() {
        let mut l = Listener::new("p", "ns", "c", 7);
        assert_eq!(l.receive(b"hello"), (b"hello".to_vec(), false));
        assert_eq!(
            l.receive(b"GET / HTTP/1.1\r\n\r\n").0,
            b"GET / HTTP/1.1\r\n\r\n"
        );
    }

    #[test]
    fn http_requests_are_answered_across_messages() {
        let mut l = Listener::new("p", "ns", "web", 80);
        let (partial, closes) = l.receive(b"GET /x HTTP/1.1\r\nHost: a");
        assert!(partial.is_empty() && !closes);
        let (reply, closes) = l.receive(b"\r\n\r\nPOST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc");
        let text = String::from_utf8(reply).expect("utf-8");
        assert!(!closes);
        assert_eq!(text.matches("HTTP/1.1 200 OK").count(), 2, "{text}");
        assert!(text.contains("pod p in namespace ns, container web, port 80: GET /x HTTP/1.1\n"));
        let (reply, closes) = l.receive(b"HEAD / HTTP/1.1\r\nConnection: close\r\n\r\n");
        let text = String::from_utf8(reply).expect("utf-8");
        assert!(closes);
        assert!(text.ends_with("Connection: close\r\n\r\n"), "{text}");
    }

    #[test]
    fn an_endless_head_is_refused() {
        let mut l = Listener::new("p", "ns", "web", 80);
        let mut big = b"GET / HTTP/1.1\r\n".to_vec();
        big.resize(MAX_HEAD + 10, b'a');
        let (reply, closes) = l.receive(&big);
        assert!(closes);
        assert!(reply.starts_with(b"HTTP/1.1 431"));
    }
}
