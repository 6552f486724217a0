//! The errors gRPC itself gives a request it cannot decode, in the words of etcd's gRPC server.
//!
//! tonic refuses a message over the receive limit with `OutOfRange` and its own wording, and an
//! undecodable one with `Internal` and prost's error; etcd's server (grpc-go) answers
//! `ResourceExhausted` "grpc: received message larger than max (N vs. M)" and `Internal`
//! "grpc: error unmarshalling request: …". This layer rewrites the status of such an answer,
//! which tonic gives in the response's headers (a trailers-only response), before it leaves.

use std::task::{Context, Poll};

use futures::future::{FutureExt, Map};
use tonic::codegen::http::{HeaderMap, HeaderValue};

#[derive(Clone, Copy, Debug, Default)]
pub(super) struct WireErrorsLayer;

impl<S> tower::Layer<S> for WireErrorsLayer {
    type Service = WireErrors<S>;

    fn layer(&self, inner: S) -> WireErrors<S> {
        WireErrors(inner)
    }
}

#[derive(Clone, Debug)]
pub(super) struct WireErrors<S>(S);

type Rewrite<B, E> = fn(
    Result<tonic::codegen::http::Response<B>, E>,
) -> Result<tonic::codegen::http::Response<B>, E>;

impl<S, Req, B> tower::Service<Req> for WireErrors<S>
where
    S: tower::Service<Req, Response = tonic::codegen::http::Response<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Map<S::Future, Rewrite<B, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        self.0.call(request).map(rewrite as Rewrite<B, S::Error>)
    }
}

fn rewrite<B, E>(
    mut result: Result<tonic::codegen::http::Response<B>, E>,
) -> Result<tonic::codegen::http::Response<B>, E> {
    if let Ok(response) = &mut result {
        rewrite_headers(response.headers_mut());
    }
    result
}

const TONIC_TOO_LARGE: &str = "Error, decoded message length too large: found ";
const PROST_DECODE: &str = "failed to decode Protobuf message";

fn rewrite_headers(headers: &mut HeaderMap) {
    let status = headers.get("grpc-status").and_then(|v| v.to_str().ok());
    let Some(code) = status else { return };
    let message = headers
        .get("grpc-message")
        .map(|v| percent_decode(v.as_bytes()))
        .unwrap_or_default();
    let (code, message) = match code {
        // OutOfRange
        "11" if message.starts_with(TONIC_TOO_LARGE) => {
            let numbers: Vec<&str> = message
                .split(|c: char| !c.is_ascii_digit())
                .filter(|n| !n.is_empty())
                .collect();
            let [found, limit] = numbers[..] else { return };
            // ResourceExhausted
            (
                "8",
                format!("grpc: received message larger than max ({found} vs. {limit})"),
            )
        }
        // Internal
        "13" if message.starts_with(PROST_DECODE) => (
            "13",
            format!("grpc: error unmarshalling request: {message}"),
        ),
        _ => return,
    };
    headers.insert("grpc-status", HeaderValue::from_static(code));
    if let Ok(value) = HeaderValue::from_str(&percent_encode(&message)) {
        headers.insert("grpc-message", value);
    }
}

/// gRPC's percent-decoding of `grpc-message`.
fn percent_decode(bytes: &[u8]) -> String {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// gRPC's percent-encoding of `grpc-message`: printable ASCII but `%` stays as it is.
fn percent_encode(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for b in message.bytes() {
        if (0x20..=0x7e).contains(&b) && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(code: &'static str, message: &str) -> (String, String) {
        let mut headers = HeaderMap::new();
        headers.insert("grpc-status", HeaderValue::from_static(code));
        headers.insert(
            "grpc-message",
            HeaderValue::from_str(&percent_encode(message)).expect("a header value"),
        );
        rewrite_headers(&mut headers);
        let get = |name: &str| percent_decode(headers.get(name).expect("the header").as_bytes());
        (get("grpc-status"), get("grpc-message"))
    }

    #[test]
    fn tonics_decoding_errors_read_as_grpc_gos() {
        assert_eq!(
            rewritten(
                "11",
                "Error, decoded message length too large: found 1200000 bytes, the limit is: 589824 bytes"
            ),
            ("8".into(), "grpc: received message larger than max (1200000 vs. 589824)".into())
        );
        assert_eq!(
            rewritten("13", "failed to decode Protobuf message: buffer underflow"),
            (
                "13".into(),
                "grpc: error unmarshalling request: failed to decode Protobuf message: buffer underflow"
                    .into()
            )
        );
        // Everything else passes as it is.
        assert_eq!(
            rewritten(
                "11",
                "etcdserver: mvcc: required revision has been compacted"
            ),
            (
                "11".into(),
                "etcdserver: mvcc: required revision has been compacted".into()
            )
        );
        assert_eq!(percent_decode(b"50%25 done%0A"), "50% done\n");
    }
}
