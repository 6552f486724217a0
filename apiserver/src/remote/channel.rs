//! The channel protocols Kubernetes streams exec, attach and port-forward over a WebSocket.
//!
//! Every message carries one channel's bytes: in the binary protocols the first byte is the
//! channel number, in the `base64` ones (text frames) the first character is the channel as an
//! ASCII digit and the rest is standard base64. For exec and attach channel 0 is stdin, 1
//! stdout, 2 stderr, 3 the error channel (the process's outcome) and 4 terminal resizes;
//! `v5.channel.k8s.io` adds the message `[255, n]`, by which the client says it has closed
//! channel `n` (stdin at EOF). For port-forward each requested port has a data channel `2i`
//! and an error channel `2i + 1`.
//!
//! Kubernetes serves these names over WebSocket: `v5.channel.k8s.io` (exec and attach, through
//! the API server), and from the kubelet `v4.channel.k8s.io`, `v4.base64.channel.k8s.io`,
//! `channel.k8s.io` and `base64.channel.k8s.io` (`v2.channel.k8s.io` and `v3.channel.k8s.io`
//! are SPDY protocol names only). A client that names no protocol gets `channel.k8s.io`.
//! Pure: no I/O.

use base64::Engine;
use bytes::Bytes;
use tokio_tungstenite::tungstenite::Message;

/// The message by which a `v5.channel.k8s.io` peer closes one channel: `[255, channel]`.
pub const CLOSE_SIGNAL: u8 = 255;
pub const STDIN: u8 = 0;
pub const STDOUT: u8 = 1;
pub const STDERR: u8 = 2;
/// Where the process's outcome is written when it ends.
pub const ERROR: u8 = 3;
pub const RESIZE: u8 = 4;

/// What the error channel carries at the end of an exec or attach.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusFormat {
    /// A `metav1.Status` JSON document (Success, or Failure with the exit code).
    Json,
    /// The failure's message as text, and nothing on success (`channel.k8s.io`).
    Text,
}

/// One negotiated channel protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Protocol {
    /// The `Sec-WebSocket-Protocol` name; empty when the client named none.
    pub name: &'static str,
    pub base64: bool,
    pub status: StatusFormat,
    /// `v5.channel.k8s.io`'s close signal is understood.
    pub close_signal: bool,
}

const fn protocol(name: &'static str, base64: bool, v4: bool, v5: bool) -> Protocol {
    Protocol {
        name,
        base64,
        status: if v4 {
            StatusFormat::Json
        } else {
            StatusFormat::Text
        },
        close_signal: v5,
    }
}

/// The protocols exec and attach are served over, in Kubernetes' order of preference.
pub const STREAM_PROTOCOLS: &[Protocol] = &[
    protocol("v5.channel.k8s.io", false, true, true),
    protocol("v4.channel.k8s.io", false, true, false),
    protocol("v4.base64.channel.k8s.io", true, true, false),
    protocol("channel.k8s.io", false, false, false),
    protocol("base64.channel.k8s.io", true, false, false),
];

/// kubectl's port-forward: SPDY/3.1 carried in the WebSocket's binary messages.
pub const SPDY_TUNNEL: &str = "SPDY/3.1+portforward.k8s.io";

/// The protocols port-forward is served over: kubectl's SPDY tunnel, and the kubelet's
/// WebSocket port-forward.
pub const PORT_FORWARD_PROTOCOLS: &[Protocol] = &[
    protocol(SPDY_TUNNEL, false, false, false),
    protocol("v4.channel.k8s.io", false, true, false),
    protocol("v4.base64.channel.k8s.io", true, true, false),
    protocol("channel.k8s.io", false, false, false),
    protocol("base64.channel.k8s.io", true, false, false),
];

/// Chooses the first protocol the client offers (its order, as Kubernetes' handshake does)
/// that is served. No offer at all means the original `channel.k8s.io`, with no protocol
/// named in the answer.
pub fn negotiate<'a>(
    offered: impl IntoIterator<Item = &'a str>,
    served: &[Protocol],
) -> Result<Protocol, String> {
    let offered: Vec<&str> = offered
        .into_iter()
        .flat_map(|h| h.split(','))
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    if offered.is_empty() {
        return served
            .iter()
            .find(|p| p.name == "channel.k8s.io")
            .map(|p| Protocol { name: "", ..*p })
            .ok_or_else(|| "no protocol was requested".to_string());
    }
    offered
        .iter()
        .find_map(|o| served.iter().find(|p| p.name == *o).copied())
        .ok_or_else(|| {
            let names: Vec<&str> = served.iter().map(|p| p.name).collect();
            format!(
                "requested protocol(s) are not supported: [{}]; supports [{}]",
                offered.join(" "),
                names.join(" ")
            )
        })
}

/// A message from the client, read.
#[derive(Debug, PartialEq, Eq)]
pub enum Inbound {
    /// Bytes for one channel (possibly none).
    Data { channel: u8, data: Bytes },
    /// `[255, n]`: the client closed channel `n`.
    Closed { channel: u8 },
    /// A control message or an empty one, which carries nothing for a channel.
    Nothing,
    /// The client closed the WebSocket.
    End,
}

/// A message that breaks the protocol: the session it arrived on ends.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("channel {0:?} is not an ASCII digit")]
    BadChannel(char),
    #[error("the payload is not valid base64")]
    BadBase64,
    #[error("a close signal names no channel")]
    ShortCloseSignal,
}

impl Protocol {
    /// One channel's bytes as a message to the client.
    pub fn encode(&self, channel: u8, data: &[u8]) -> Message {
        if self.base64 {
            let mut text = String::with_capacity(1 + data.len().div_ceil(3) * 4);
            text.push(char::from(b'0' + channel % 10));
            base64::engine::general_purpose::STANDARD.encode_string(data, &mut text);
            Message::text(text)
        } else {
            let mut frame = Vec::with_capacity(1 + data.len());
            frame.push(channel);
            frame.extend_from_slice(data);
            Message::binary(frame)
        }
    }

    /// Reads one message from the client. An empty message carries nothing (Kubernetes skips
    /// it); a binary protocol takes text frames' bytes as they are.
    pub fn decode(&self, message: Message) -> Result<Inbound, FrameError> {
        let bytes: Bytes = match message {
            Message::Binary(b) => b,
            Message::Text(t) => Bytes::from(t),
            Message::Close(_) => return Ok(Inbound::End),
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => return Ok(Inbound::Nothing),
        };
        let Some(&first) = bytes.first() else {
            return Ok(Inbound::Nothing);
        };
        let rest = bytes.slice(1..);
        if self.base64 {
            let channel = match first {
                b'0'..=b'9' => first - b'0',
                other => return Err(FrameError::BadChannel(char::from(other))),
            };
            let data = base64::engine::general_purpose::STANDARD
                .decode(&rest)
                .map_err(|_| FrameError::BadBase64)?;
            return Ok(Inbound::Data {
                channel,
                data: Bytes::from(data),
            });
        }
        if first == CLOSE_SIGNAL && self.close_signal {
            return match rest.first() {
                Some(&channel) => Ok(Inbound::Closed { channel }),
                None => Err(FrameError::ShortCloseSignal),
            };
        }
        Ok(Inbound::Data {
            channel: first,
            data: rest,
        })
    }
}

/// How an exec or attach ended, for the error channel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The process exited with this code.
    Exited(i32),
    /// The runtime could not run it (an executable not found); an internal error.
    Failed(String),
}

impl Outcome {
    /// What the error channel carries, as the container runtime's streaming server writes it;
    /// `None` when nothing is written. `command` is the exec's argv (named in the exit
    /// message).
    pub fn status(&self, format: StatusFormat, command: &[String]) -> Option<String> {
        let quote = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
        let (message, body) = match self {
            Outcome::Exited(0) => {
                return (format == StatusFormat::Json)
                    .then(|| r#"{"metadata":{},"status":"Success"}"#.to_string())
            }
            Outcome::Exited(code) => {
                let message = format!(
                    "command terminated with non-zero exit code: error executing command [{}], exit code {code}",
                    command.join(" ")
                );
                let body = format!(
                    r#"{{"metadata":{{}},"status":"Failure","message":{},"reason":"NonZeroExitCode","details":{{"causes":[{{"reason":"ExitCode","message":"{code}"}}]}}}}"#,
                    quote(&message)
                );
                (message, body)
            }
            Outcome::Failed(why) => {
                let message = format!("Internal error occurred: {why}");
                let body = format!(
                    r#"{{"metadata":{{}},"status":"Failure","message":{},"reason":"InternalError","details":{{"causes":[{{"message":{}}}]}},"code":500}}"#,
                    quote(&message),
                    quote(why)
                );
                (message, body)
            }
        };
        Some(match format {
            StatusFormat::Json => body,
            StatusFormat::Text => message,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(name: &str) -> Protocol {
        *STREAM_PROTOCOLS
            .iter()
            .find(|p| p.name == name)
            .expect("served")
    }

    #[test]
    fn the_clients_first_served_protocol_wins() {
        let kubectl = negotiate(["v5.channel.k8s.io, v4.channel.k8s.io"], STREAM_PROTOCOLS);
        assert_eq!(kubectl.expect("v5").name, "v5.channel.k8s.io");
        let python = negotiate(["v4.channel.k8s.io"], STREAM_PROTOCOLS).expect("v4");
        assert_eq!(python.status, StatusFormat::Json);
        assert!(!python.close_signal);
        let pf = negotiate(
            ["v5.channel.k8s.io,v4.channel.k8s.io"],
            PORT_FORWARD_PROTOCOLS,
        );
        assert_eq!(pf.expect("v4").name, "v4.channel.k8s.io");
        let none = negotiate(std::iter::empty(), STREAM_PROTOCOLS).expect("default");
        assert_eq!((none.name, none.status), ("", StatusFormat::Text));
        let e = negotiate(["v3.channel.k8s.io"], STREAM_PROTOCOLS).unwrap_err();
        assert!(e.starts_with("requested protocol(s) are not supported: [v3.channel.k8s.io]"));
    }

    #[test]
    fn binary_frames_carry_the_channel_first() {
        let v5 = named("v5.channel.k8s.io");
        assert_eq!(
            v5.encode(STDOUT, b"hi"),
            Message::binary(vec![1, b'h', b'i'])
        );
        assert_eq!(
            v5.decode(Message::binary(vec![0, b'x'])),
            Ok(Inbound::Data {
                channel: STDIN,
                data: Bytes::from_static(b"x")
            })
        );
        assert_eq!(
            v5.decode(Message::binary(vec![255, 0])),
            Ok(Inbound::Closed { channel: STDIN })
        );
        assert_eq!(v5.decode(Message::binary(Vec::new())), Ok(Inbound::Nothing));
        assert_eq!(
            v5.decode(Message::binary(vec![255])),
            Err(FrameError::ShortCloseSignal)
        );
        // Before v5, 255 is just a channel nobody uses.
        let v4 = named("v4.channel.k8s.io");
        assert!(matches!(
            v4.decode(Message::binary(vec![255, 0])),
            Ok(Inbound::Data { channel: 255, .. })
        ));
        assert_eq!(v4.decode(Message::Close(None)), Ok(Inbound::End));
    }

    #[test]
    fn base64_frames_are_text_with_a_digit_channel() {
        let b = named("v4.base64.channel.k8s.io");
        assert_eq!(b.encode(STDERR, b"hi"), Message::text("2aGk="));
        assert_eq!(
            b.decode(Message::text("0aGk=")),
            Ok(Inbound::Data {
                channel: STDIN,
                data: Bytes::from_static(b"hi")
            })
        );
        assert_eq!(
            b.decode(Message::text("xaGk=")),
            Err(FrameError::BadChannel('x'))
        );
        assert_eq!(b.decode(Message::text("0!!")), Err(FrameError::BadBase64));
    }

    #[test]
    fn the_error_channel_carries_the_runtimes_status() {
        let argv: Vec<String> = ["sh", "-c", "exit 3"].map(String::from).to_vec();
        assert_eq!(
            Outcome::Exited(0)
                .status(StatusFormat::Json, &argv)
                .as_deref(),
            Some(r#"{"metadata":{},"status":"Success"}"#)
        );
        let failed = Outcome::Exited(3)
            .status(StatusFormat::Json, &argv)
            .expect("written");
        let status: serde_json::Value = serde_json::from_str(&failed).expect("json");
        assert_eq!(status["reason"], "NonZeroExitCode");
        assert_eq!(
            status["details"]["causes"],
            serde_json::json!([{"reason": "ExitCode", "message": "3"}])
        );
        assert_eq!(
            status["message"],
            "command terminated with non-zero exit code: error executing command [sh -c exit 3], exit code 3"
        );
        assert_eq!(Outcome::Exited(0).status(StatusFormat::Text, &argv), None);
        let internal = Outcome::Failed("boom".into())
            .status(StatusFormat::Json, &argv)
            .expect("written");
        assert!(internal.ends_with(
            r#""reason":"InternalError","details":{"causes":[{"message":"boom"}]},"code":500}"#
        ));
    }
}
