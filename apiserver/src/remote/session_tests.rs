//! Whole sessions over an in-memory WebSocket: what a client sends and reads, message by
//! message, for exec and port-forward, malformed messages included.

use std::time::Duration;

use base64::Engine;
use futures::{SinkExt, StreamExt};
use serde_json::json;
use tokio::io::DuplexStream;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

use super::*;
use crate::remote::channel::{Protocol, PORT_FORWARD_PROTOCOLS, STREAM_PROTOCOLS};
use crate::remote::port_forward::{forward, forwards_for};

type Client = WebSocketStream<DuplexStream>;

/// A connected server and client.
async fn pair() -> (WebSocketStream<DuplexStream>, Client) {
    let (a, b) = tokio::io::duplex(1 << 16);
    tokio::join!(
        WebSocketStream::from_raw_socket(a, Role::Server, None),
        WebSocketStream::from_raw_socket(b, Role::Client, None)
    )
}

fn protocol(served: &[Protocol], name: &str) -> Protocol {
    *served.iter().find(|p| p.name == name).expect("served")
}

fn options(command: &[&str], stdin: bool) -> StreamOptions {
    StreamOptions {
        command: command.iter().map(|s| s.to_string()).collect(),
        container: None,
        stdin,
        stdout: true,
        stderr: true,
        tty: false,
    }
}

/// Everything the client reads until the server closes: binary messages as bytes, text as
/// its bytes; `closed` when a close frame came.
async fn read_all(client: &mut Client) -> (Vec<Vec<u8>>, bool) {
    let mut messages = Vec::new();
    let mut closed = false;
    // Reading on after the close sends the client's answer to it.
    let _ = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(Ok(m)) = client.next().await {
            match m {
                Message::Binary(b) => messages.push(b.to_vec()),
                Message::Text(t) => messages.push(t.as_bytes().to_vec()),
                Message::Close(_) => closed = true,
                _ => {}
            }
        }
    })
    .await;
    (messages, closed)
}

#[tokio::test]
async fn v5_stdin_is_closed_by_the_close_signal() {
    let (server, mut client) = pair().await;
    let v5 = protocol(STREAM_PROTOCOLS, "v5.channel.k8s.io");
    let session = tokio::spawn(exec(
        server,
        v5,
        options(&["cat"], true),
        Container::default(),
    ));
    client
        .send(Message::binary(b"\x00abc".to_vec()))
        .await
        .expect("sent");
    // Resizes and empty messages are skipped.
    client
        .send(Message::binary(
            b"\x04{\"Width\":80,\"Height\":24}".to_vec(),
        ))
        .await
        .expect("sent");
    client
        .send(Message::binary(Vec::new()))
        .await
        .expect("sent");
    client
        .send(Message::binary(vec![255, 0]))
        .await
        .expect("sent");
    let (messages, closed) = read_all(&mut client).await;
    assert!(closed);
    assert_eq!(
        messages,
        vec![
            b"\x01abc".to_vec(),
            b"\x03{\"metadata\":{},\"status\":\"Success\"}".to_vec()
        ]
    );
    session.await.expect("the session ends");
}

#[tokio::test]
async fn v4_reports_the_exit_code_as_a_status() {
    let (server, mut client) = pair().await;
    let v4 = protocol(STREAM_PROTOCOLS, "v4.channel.k8s.io");
    let session = tokio::spawn(exec(
        server,
        v4,
        options(&["sh", "-c", "echo out; exit 3"], false),
        Container::default(),
    ));
    let (messages, closed) = read_all(&mut client).await;
    assert!(closed);
    assert_eq!(messages[0], b"\x01out\n");
    let status: serde_json::Value = serde_json::from_slice(&messages[1][1..]).expect("json");
    assert_eq!(messages[1][0], 3);
    assert_eq!(status["reason"], "NonZeroExitCode");
    assert_eq!(
        status["details"]["causes"],
        json!([{"reason": "ExitCode", "message": "3"}])
    );
    session.await.expect("the session ends");
}

#[tokio::test]
async fn channel_k8s_io_writes_only_a_failure_as_text() {
    let (server, mut client) = pair().await;
    let v1 = protocol(STREAM_PROTOCOLS, "base64.channel.k8s.io");
    let session = tokio::spawn(exec(
        server,
        v1,
        options(&["false"], false),
        Container::default(),
    ));
    let (messages, closed) = read_all(&mut client).await;
    assert!(closed);
    let text = String::from_utf8(messages[0].clone()).expect("text");
    assert!(text.starts_with('3'), "{text}");
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(&text[1..])
        .expect("base64");
    assert_eq!(
        String::from_utf8_lossy(&decoded),
        "command terminated with non-zero exit code: error executing command [false], exit code 1"
    );
    session.await.expect("the session ends");
}

#[tokio::test]
async fn a_malformed_message_ends_only_its_session() {
    let (server, mut client) = pair().await;
    let b64 = protocol(STREAM_PROTOCOLS, "v4.base64.channel.k8s.io");
    let session = tokio::spawn(exec(
        server,
        b64,
        options(&["cat"], true),
        Container::default(),
    ));
    client.send(Message::text("0aGk=")).await.expect("sent");
    client
        .send(Message::text("0!!not base64"))
        .await
        .expect("sent");
    let (messages, closed) = read_all(&mut client).await;
    assert!(closed, "the session closes the WebSocket");
    // What came before the bad message was handled; no outcome is reported for a broken session.
    assert_eq!(messages, vec![b"1aGk=".to_vec()]);
    session.await.expect("the session ends without a panic");

    // The next session is unaffected.
    let (server, mut client) = pair().await;
    let session = tokio::spawn(exec(
        server,
        b64,
        options(&["echo", "ok"], false),
        Container::default(),
    ));
    let (messages, _) = read_all(&mut client).await;
    assert_eq!(messages[0], b"1b2sK");
    session.await.expect("the session ends");
}

#[tokio::test]
async fn a_client_that_leaves_ends_the_command() {
    let (server, mut client) = pair().await;
    let v5 = protocol(STREAM_PROTOCOLS, "v5.channel.k8s.io");
    let session = tokio::spawn(exec(
        server,
        v5,
        options(&["sleep", "3600"], false),
        Container::default(),
    ));
    client.close(None).await.expect("closed");
    tokio::time::timeout(Duration::from_secs(10), session)
        .await
        .expect("the session ends when the client leaves")
        .expect("without a panic");
}

#[tokio::test]
async fn port_forward_opens_each_channel_with_its_port() {
    let (server, mut client) = pair().await;
    let v4 = protocol(PORT_FORWARD_PROTOCOLS, "v4.channel.k8s.io");
    let pod = json!({"metadata": {"name": "web", "namespace": "ns", "uid": "u1"},
                     "spec": {"containers": [{"name": "app", "ports": [{"containerPort": 80}]}]}});
    let ports = vec![80, 81];
    let forwards = forwards_for(&pod, &ports);
    let session = tokio::spawn(forward(server, v4, ports, forwards));
    client
        .send(Message::binary(
            b"\x00GET /x HTTP/1.1\r\nConnection: close\r\n\r\n".to_vec(),
        ))
        .await
        .expect("sent");
    let (messages, closed) = read_all(&mut client).await;
    assert!(closed, "the session ends once every connection has closed");
    assert_eq!(
        &messages[..4],
        &[
            vec![0, 80, 0],
            vec![1, 80, 0],
            vec![2, 81, 0],
            vec![3, 81, 0]
        ]
    );
    let refused = String::from_utf8_lossy(&messages[4][1..]).into_owned();
    assert_eq!(messages[4][0], 3);
    assert!(
        refused.starts_with("error forwarding port 81 to pod web_ns, uid u1:"),
        "{refused}"
    );
    assert!(
        refused.ends_with("connect: connection refused"),
        "{refused}"
    );
    let reply = String::from_utf8_lossy(&messages[5][1..]).into_owned();
    assert_eq!(messages[5][0], 0);
    assert!(reply.starts_with("HTTP/1.1 200 OK\r\n"), "{reply}");
    assert!(
        reply.ends_with("pod web in namespace ns, container app, port 80: GET /x HTTP/1.1\n"),
        "{reply}"
    );
    session.await.expect("the session ends");
}

#[tokio::test]
async fn kubectls_spdy_tunnel_pairs_error_and_data_streams() {
    use crate::remote::port_forward::tunnel;
    use crate::remote::spdy;

    let hex = |s: &str| -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
            .collect()
    };
    // SYN_STREAM frames whose header blocks continue one zlib stream over the SPDY dictionary
    // (streamtype error, then data; port 8080; requestid 0), as spdystream writes them.
    let syn_stream = |id: u32, block: Vec<u8>| -> Vec<u8> {
        let mut payload = id.to_be_bytes().to_vec();
        payload.extend([0, 0, 0, 0, 0, 0]);
        payload.extend(block);
        let mut frame = vec![0x80, 0x03, 0x00, 0x01, 0x00];
        frame.extend(&(payload.len() as u32).to_be_bytes()[1..]);
        frame.extend(payload);
        frame
    };
    let error = syn_stream(1, hex("78f9e3c6a7c202253a703a2b294a4dcc851625aca9a0808614cb45e01c6061606100a4398b20d198094ade8c0600000000ffff"));
    let data = syn_stream(3, hex("c2aa19540e2512d60b000000ffff"));

    let (server, mut client) = pair().await;
    let pod = json!({"metadata": {"name": "web", "namespace": "ns", "uid": "u1"},
                     "spec": {"containers": [{"name": "app", "ports": [{"containerPort": 8080}]}]}});
    let session = tokio::spawn(tunnel(server, pod));
    // Split across messages anywhere: the tunnel is a byte stream.
    let mut bytes = [error, spdy::data(1, &[], true), data].concat();
    bytes.extend(spdy::data(
        3,
        b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n",
        false,
    ));
    bytes.extend(spdy::pong(&[0, 0, 0, 1]));
    for chunk in bytes.chunks(7) {
        client
            .send(Message::binary(chunk.to_vec()))
            .await
            .expect("sent");
    }
    let mut reader = spdy::Reader::default();
    let mut frames = Vec::new();
    while frames.len() < 6 {
        let message = tokio::time::timeout(Duration::from_secs(10), client.next())
            .await
            .expect("the server answers");
        let Some(Ok(Message::Binary(b))) = message else {
            panic!("unexpected {message:?}");
        };
        reader.push(&b);
        while let Some(frame) = reader.next_frame().expect("a frame") {
            frames.push(frame);
        }
    }
    // Two SYN_REPLYs (read back as frames a server does not act on).
    let replies = frames.iter().filter(|f| **f == spdy::Frame::Other).count();
    assert_eq!(replies, 2, "{frames:?}");
    let data: Vec<(u32, String, bool)> = frames
        .iter()
        .filter_map(|f| match f {
            spdy::Frame::Data { id, data, fin } => {
                Some((*id, String::from_utf8_lossy(data).into_owned(), *fin))
            }
            _ => None,
        })
        .collect();
    assert!(data[0].1.starts_with("HTTP/1.1 200 OK\r\n"), "{data:?}");
    assert!(data[0]
        .1
        .ends_with("pod web in namespace ns, container app, port 8080: GET / HTTP/1.1\n"));
    assert_eq!(
        &data[1..],
        &[(3, String::new(), true), (1, String::new(), true)]
    );
    assert!(frames.contains(&spdy::Frame::Ping(vec![0, 0, 0, 1])));
    drop(client);
    session.await.expect("the session ends");
}
