//! Length-prefixed bincode frames: the only thing that travels on an RPC stream.
//!
//! A frame is a `u32` big-endian body length followed by the body, which is the value encoded
//! with `bincode::serde` and [`bincode::config::standard()`].

use std::time::Duration;

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::TransportError;

/// The largest frame body accepted or produced. Larger values (big snapshots) must be split by
/// the caller, e.g. into a client-streaming call.
pub const MAX_FRAME_BYTES: usize = 64 * 1024 * 1024;

const PREFIX_BYTES: usize = 4;

/// Decoding uses a byte limit because bincode allocates a string or byte buffer of the length
/// the input claims *before* reading it: without a limit a corrupt length would abort the
/// process on allocation failure. The limit never rejects valid data: a frame body is at most
/// `MAX_FRAME_BYTES`, and bincode only claims string/byte lengths against it on the serde path.
fn decode_config() -> impl bincode::config::Config {
    bincode::config::standard().with_limit::<MAX_FRAME_BYTES>()
}

/// Encodes `v` into a complete frame (length prefix included), ready for a single write.
///
/// The body is measured first and then written into a buffer of exactly its size. Growing the
/// buffer as bytes come instead copies a large frame (a batch of store writes) a dozen times,
/// and each of the larger steps is fresh memory the kernel must zero.
pub fn encode<T: Serialize>(v: &T) -> Result<Vec<u8>, TransportError> {
    let encode_error = |e: bincode::error::EncodeError| TransportError::Encode {
        message: e.to_string(),
    };
    let mut size = bincode::enc::write::SizeWriter::default();
    bincode::serde::encode_into_writer(v, &mut size, bincode::config::standard())
        .map_err(encode_error)?;
    let body_len = size.bytes_written;
    if body_len > MAX_FRAME_BYTES {
        return Err(TransportError::FrameTooLarge {
            size: body_len as u64,
            limit: MAX_FRAME_BYTES,
        });
    }
    // Cannot fail: body_len <= MAX_FRAME_BYTES < u32::MAX.
    let prefix = u32::try_from(body_len).map_err(|_| TransportError::FrameTooLarge {
        size: body_len as u64,
        limit: MAX_FRAME_BYTES,
    })?;
    let mut buf = Vec::with_capacity(PREFIX_BYTES + body_len);
    buf.extend_from_slice(&prefix.to_be_bytes());
    bincode::serde::encode_into_writer(v, Append(&mut buf), bincode::config::standard())
        .map_err(encode_error)?;
    if buf.len() != PREFIX_BYTES + body_len {
        // A value whose encoding changes between two passes (a `Serialize` with side effects).
        return Err(TransportError::Encode {
            message: format!(
                "the value encoded to {} bytes after measuring {body_len}",
                buf.len() - PREFIX_BYTES
            ),
        });
    }
    Ok(buf)
}

/// A bincode writer that appends to a `Vec` sized beforehand.
struct Append<'a>(&'a mut Vec<u8>);

impl bincode::enc::write::Writer for Append<'_> {
    #[inline]
    fn write(&mut self, bytes: &[u8]) -> Result<(), bincode::error::EncodeError> {
        self.0.extend_from_slice(bytes);
        Ok(())
    }
}

/// Decodes one complete frame (length prefix included), as produced by [`encode`]. The slice
/// must hold exactly one frame.
pub fn decode<T: DeserializeOwned>(frame: &[u8]) -> Result<T, TransportError> {
    let Some(prefix) = frame.get(..PREFIX_BYTES) else {
        return Err(TransportError::TruncatedFrame {
            expected: PREFIX_BYTES,
            received: frame.len(),
        });
    };
    let len = body_len(prefix_array(prefix), MAX_FRAME_BYTES)?;
    let body = &frame[PREFIX_BYTES..];
    if body.len() < len {
        return Err(TransportError::TruncatedFrame {
            expected: len,
            received: body.len(),
        });
    }
    if body.len() > len {
        return Err(TransportError::Decode {
            message: format!("{} bytes after the frame", body.len() - len),
        });
    }
    decode_body(body)
}

/// Writes `v` as one frame with a single write of a pre-encoded buffer.
pub async fn write_frame<T: Serialize>(
    send: &mut quinn::SendStream,
    v: &T,
) -> Result<(), TransportError> {
    let frame = encode(v)?;
    // write_chunk hands the buffer to quinn without another copy.
    send.write_chunk(Bytes::from(frame)).await?;
    Ok(())
}

/// Reads one frame. Returns `Ok(None)` when the stream finished cleanly before a new frame
/// began; a stream ending mid-frame, an oversized length or an undecodable body is an error.
/// For a client reading its server's answers: the server is trusted to send what it must.
pub async fn read_frame<T: DeserializeOwned>(
    recv: &mut quinn::RecvStream,
) -> Result<Option<T>, TransportError> {
    read_rest([0; PREFIX_BYTES], 0, recv, MAX_FRAME_BYTES).await
}

/// What a server accepts from a client before a handler has looked at it: how large a frame
/// may be and how long it may take to arrive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameLimits {
    /// The largest frame body accepted; a larger length prefix is refused before any of the
    /// body is read.
    pub max_frame_bytes: usize,
    /// How long a frame may take to arrive whole: the first frame of a call counted from the
    /// stream's opening, a later frame of a client stream from its first byte (a stream may
    /// rest between frames).
    pub frame_timeout: Duration,
}

impl Default for FrameLimits {
    fn default() -> Self {
        FrameLimits {
            max_frame_bytes: MAX_FRAME_BYTES,
            frame_timeout: DEFAULT_FRAME_TIMEOUT,
        }
    }
}

/// How long a request frame may take to arrive unless a service says otherwise. Generous: a
/// frame of megabytes from a peer on a starved machine can take seconds, while a caller that
/// sends nothing only holds a stream until it passes.
pub const DEFAULT_FRAME_TIMEOUT: Duration = Duration::from_secs(10);

/// Reads one frame from a client under `limits`. With `resting` the wait for the frame's first
/// byte is not timed (a client stream between frames); otherwise the whole read is. Returns
/// `Ok(None)` when the stream finished cleanly before a new frame began.
pub async fn read_frame_limited<T: DeserializeOwned>(
    recv: &mut quinn::RecvStream,
    limits: FrameLimits,
    resting: bool,
) -> Result<Option<T>, TransportError> {
    let mut prefix = [0u8; PREFIX_BYTES];
    let mut filled = 0;
    if resting {
        match recv.read(&mut prefix).await? {
            Some(received) => filled = received,
            None => return Ok(None),
        }
    }
    let read = read_rest(prefix, filled, recv, limits.max_frame_bytes);
    match tokio::time::timeout(limits.frame_timeout, read).await {
        Ok(result) => result,
        Err(_) => Err(TransportError::FrameTimeout {
            after: limits.frame_timeout,
        }),
    }
}

/// Reads the rest of a frame whose first `filled` prefix bytes are already in `prefix`,
/// refusing a body longer than `limit` before reading any of it.
async fn read_rest<T: DeserializeOwned>(
    mut prefix: [u8; PREFIX_BYTES],
    filled: usize,
    recv: &mut quinn::RecvStream,
    limit: usize,
) -> Result<Option<T>, TransportError> {
    match recv.read_exact(&mut prefix[filled..]).await {
        Ok(()) => {}
        Err(quinn::ReadExactError::FinishedEarly(0)) if filled == 0 => return Ok(None),
        Err(quinn::ReadExactError::FinishedEarly(received)) => {
            return Err(TransportError::TruncatedFrame {
                expected: PREFIX_BYTES,
                received: filled + received,
            })
        }
        Err(quinn::ReadExactError::ReadError(e)) => return Err(e.into()),
    }
    let len = body_len(prefix, limit)?;

    // Small frames usually arrive as one chunk, which is decoded in place without copying.
    let first = match recv.read_chunk(len, true).await? {
        Some(chunk) => chunk.bytes,
        None if len == 0 => Bytes::new(),
        None => {
            return Err(TransportError::TruncatedFrame {
                expected: len,
                received: 0,
            })
        }
    };
    if first.len() == len {
        return decode_body(&first).map(Some);
    }

    // Grow with the data actually received rather than trusting the prefix for the allocation.
    let mut body = Vec::with_capacity(len.min(1024 * 1024));
    body.extend_from_slice(&first);
    while body.len() < len {
        match recv.read_chunk(len - body.len(), true).await? {
            Some(chunk) => body.extend_from_slice(&chunk.bytes),
            None => {
                return Err(TransportError::TruncatedFrame {
                    expected: len,
                    received: body.len(),
                })
            }
        }
    }
    decode_body(&body).map(Some)
}

fn prefix_array(prefix: &[u8]) -> [u8; PREFIX_BYTES] {
    let mut out = [0u8; PREFIX_BYTES];
    out.copy_from_slice(prefix);
    out
}

fn body_len(prefix: [u8; PREFIX_BYTES], limit: usize) -> Result<usize, TransportError> {
    let len = u32::from_be_bytes(prefix);
    let len = usize::try_from(len).unwrap_or(usize::MAX);
    if len > limit.min(MAX_FRAME_BYTES) {
        return Err(TransportError::FrameTooLarge {
            size: u64::from(u32::from_be_bytes(prefix)),
            limit: limit.min(MAX_FRAME_BYTES),
        });
    }
    Ok(len)
}

fn decode_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, TransportError> {
    let (value, used) = bincode::serde::decode_from_slice(body, decode_config()).map_err(|e| {
        TransportError::Decode {
            message: e.to_string(),
        }
    })?;
    if used != body.len() {
        return Err(TransportError::Decode {
            message: format!(
                "{} bytes left over after decoding a {used}-byte value",
                body.len() - used
            ),
        });
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    enum Msg {
        Put { key: String, value: Vec<u8> },
        Delete(u64),
    }

    #[test]
    fn round_trip() {
        let msg = Msg::Put {
            key: "/registry/pods/default/a".into(),
            value: vec![1, 2, 3],
        };
        let frame = encode(&msg).expect("encode");
        let body_len = u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
        assert_eq!(body_len, frame.len() - 4);
        // Measured first, so the frame is one allocation of its exact size.
        assert_eq!(frame.capacity(), frame.len());
        assert_eq!(decode::<Msg>(&frame).expect("decode"), msg);
        assert_eq!(
            decode::<Msg>(&encode(&Msg::Delete(7)).expect("encode")).expect("decode"),
            Msg::Delete(7)
        );
    }

    #[test]
    fn oversized_length_is_rejected() {
        let mut frame = (MAX_FRAME_BYTES as u32 + 1).to_be_bytes().to_vec();
        frame.extend_from_slice(&[0; 16]);
        match decode::<Msg>(&frame) {
            Err(TransportError::FrameTooLarge { size, limit }) => {
                assert_eq!(size, MAX_FRAME_BYTES as u64 + 1);
                assert_eq!(limit, MAX_FRAME_BYTES);
            }
            other => panic!("expected FrameTooLarge, got {other:?}"),
        }
        assert!(matches!(
            decode::<Msg>(&u32::MAX.to_be_bytes()),
            Err(TransportError::FrameTooLarge { .. })
        ));
    }

    #[test]
    fn oversized_value_is_not_encoded() {
        let big = vec![0u8; MAX_FRAME_BYTES + 1];
        assert!(matches!(
            encode(&big),
            Err(TransportError::FrameTooLarge { .. })
        ));
    }

    #[test]
    fn truncated_frame_is_an_error() {
        let frame = encode(&Msg::Delete(300)).expect("encode");
        assert!(matches!(
            decode::<Msg>(&frame[..frame.len() - 1]),
            Err(TransportError::TruncatedFrame { .. })
        ));
        assert!(matches!(
            decode::<Msg>(&frame[..2]),
            Err(TransportError::TruncatedFrame { .. })
        ));
    }

    #[test]
    fn garbage_body_is_a_decode_error() {
        let mut frame = 3u32.to_be_bytes().to_vec();
        frame.extend_from_slice(&[0xff, 0xff, 0xff]);
        assert!(matches!(
            decode::<Msg>(&frame),
            Err(TransportError::Decode { .. })
        ));
    }

    #[test]
    fn trailing_bytes_are_a_decode_error() {
        let mut frame = encode(&Msg::Delete(1)).expect("encode");
        frame.push(0);
        let len = (frame.len() - 4) as u32;
        frame[..4].copy_from_slice(&len.to_be_bytes());
        assert!(matches!(
            decode::<Msg>(&frame),
            Err(TransportError::Decode { .. })
        ));
    }

    #[test]
    fn huge_claimed_string_length_fails_without_allocating() {
        // Variant 0 (Put), then a varint string length of u64::MAX: bincode would try to
        // allocate that much if decoding were not limited.
        let mut body = vec![0u8, 0xff];
        body.extend_from_slice(&u64::MAX.to_le_bytes());
        let mut frame = (body.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(&body);
        assert!(matches!(
            decode::<Msg>(&frame),
            Err(TransportError::Decode { .. })
        ));
    }
}
