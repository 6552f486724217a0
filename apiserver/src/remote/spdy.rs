//! SPDY/3.1 as kubectl's port-forward speaks it, tunnelled in a WebSocket
//! (`SPDY/3.1+portforward.k8s.io`): frames, and header blocks compressed with zlib over the
//! SPDY dictionary. Pure: bytes in, frames out.
//!
//! Only what a port-forward server needs: it reads SYN_STREAM, HEADERS, DATA, RST_STREAM,
//! PING, SETTINGS, WINDOW_UPDATE and GOAWAY, and writes SYN_REPLY, DATA and PING. Its own
//! header blocks are zlib stored blocks without the dictionary, which every inflater reads.

use std::collections::HashMap;

use miniz_oxide::inflate::core::{decompress, inflate_flags, DecompressorOxide};
use miniz_oxide::inflate::TINFLStatus;

const VERSION: u16 = 3;
pub const SYN_STREAM: u16 = 1;
pub const SYN_REPLY: u16 = 2;
pub const RST_STREAM: u16 = 3;
pub const PING: u16 = 6;
pub const GOAWAY: u16 = 7;
pub const HEADERS: u16 = 8;
pub const FLAG_FIN: u8 = 1;
/// The largest frame accepted (SPDY's length field allows 16 MiB).
const MAX_FRAME: usize = 1 << 24;

/// A SPDY stream or session error: the tunnel is closed.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SpdyError {
    #[error("SPDY version {0} is not supported")]
    Version(u16),
    #[error("a {0} frame is too short")]
    Short(&'static str),
    #[error("the header block does not inflate")]
    Inflate,
    #[error("the header block is malformed")]
    HeaderBlock,
}

/// One frame read from the client.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// A new stream (SYN_STREAM), or more headers for one (HEADERS), with its headers.
    Stream {
        id: u32,
        headers: HashMap<String, String>,
        fin: bool,
        new: bool,
    },
    Data {
        id: u32,
        data: Vec<u8>,
        fin: bool,
    },
    Reset {
        id: u32,
    },
    Ping(Vec<u8>),
    GoAway,
    /// SETTINGS, WINDOW_UPDATE and anything unknown.
    Other,
}

/// The reading side of a SPDY session: buffered bytes and the header inflater.
pub struct Reader {
    buffer: Vec<u8>,
    inflater: Inflater,
}

impl Default for Reader {
    fn default() -> Self {
        Reader {
            buffer: Vec::new(),
            inflater: Inflater::new(),
        }
    }
}

impl Reader {
    pub fn push(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
    }

    /// The next whole frame, if the bytes so far hold one.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, SpdyError> {
        if self.buffer.len() < 8 {
            return Ok(None);
        }
        let head = &self.buffer[..8];
        let length = usize::from(head[5]) << 16 | usize::from(head[6]) << 8 | usize::from(head[7]);
        if length > MAX_FRAME {
            return Err(SpdyError::Short("oversized"));
        }
        if self.buffer.len() < 8 + length {
            return Ok(None);
        }
        let frame: Vec<u8> = self.buffer.drain(..8 + length).collect();
        let flags = frame[4];
        let payload = &frame[8..];
        let u32_at = |b: &[u8], at: usize| -> Option<u32> {
            b.get(at..at + 4)
                .map(|s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]) & 0x7fff_ffff)
        };
        if frame[0] & 0x80 == 0 {
            let id = u32_at(&frame, 0).ok_or(SpdyError::Short("data"))?;
            return Ok(Some(Frame::Data {
                id,
                data: payload.to_vec(),
                fin: flags & FLAG_FIN != 0,
            }));
        }
        let version = u16::from_be_bytes([frame[0], frame[1]]) & 0x7fff;
        if version != VERSION {
            return Err(SpdyError::Version(version));
        }
        let kind = u16::from_be_bytes([frame[2], frame[3]]);
        Ok(Some(match kind {
            SYN_STREAM | HEADERS => {
                let (skip, name) = if kind == SYN_STREAM {
                    (10, "SYN_STREAM")
                } else {
                    (4, "HEADERS")
                };
                let id = u32_at(payload, 0).ok_or(SpdyError::Short(name))?;
                let block = payload.get(skip..).ok_or(SpdyError::Short(name))?;
                let headers = parse_headers(&self.inflater.inflate(block)?)?;
                Frame::Stream {
                    id,
                    headers,
                    fin: flags & FLAG_FIN != 0,
                    new: kind == SYN_STREAM,
                }
            }
            RST_STREAM => Frame::Reset {
                id: u32_at(payload, 0).ok_or(SpdyError::Short("RST_STREAM"))?,
            },
            PING => Frame::Ping(payload.to_vec()),
            GOAWAY => Frame::GoAway,
            _ => Frame::Other,
        }))
    }
}

/// A header block: a count, then length-prefixed names and values (names lower case).
fn parse_headers(block: &[u8]) -> Result<HashMap<String, String>, SpdyError> {
    let mut at = 0;
    let next_u32 = |at: &mut usize| -> Result<usize, SpdyError> {
        let s = block.get(*at..*at + 4).ok_or(SpdyError::HeaderBlock)?;
        *at += 4;
        Ok(u32::from_be_bytes([s[0], s[1], s[2], s[3]]) as usize)
    };
    let count = next_u32(&mut at)?;
    let mut headers = HashMap::new();
    for _ in 0..count.min(1024) {
        let field = |at: &mut usize| -> Result<String, SpdyError> {
            let len = next_u32(at)?;
            let bytes = block.get(*at..*at + len).ok_or(SpdyError::HeaderBlock)?;
            *at += len;
            Ok(String::from_utf8_lossy(bytes).into_owned())
        };
        let name = field(&mut at)?;
        let value = field(&mut at)?;
        headers.insert(name.to_ascii_lowercase(), value);
    }
    Ok(headers)
}

/// The client's header blocks: one zlib stream over the session, primed with the SPDY
/// dictionary, each block ending on a sync flush.
struct Inflater {
    state: Box<DecompressorOxide>,
    /// The 32 KiB window, as a ring; it starts with the dictionary before the first output.
    window: Vec<u8>,
    position: usize,
    /// The zlib header (2 bytes, and the 4-byte dictionary id) still to skip.
    header_left: usize,
}

impl Inflater {
    fn new() -> Inflater {
        let mut window = vec![0u8; 1 << 15];
        let dictionary = dictionary();
        window[..dictionary.len()].copy_from_slice(&dictionary);
        Inflater {
            state: Box::default(),
            window,
            position: dictionary.len(),
            header_left: 2,
        }
    }

    fn inflate(&mut self, mut input: &[u8]) -> Result<Vec<u8>, SpdyError> {
        if self.header_left == 2 && input.len() >= 2 {
            // FDICT: the dictionary's id follows the two header bytes.
            self.header_left = if input[1] & 0x20 != 0 { 6 } else { 2 };
        }
        let skip = self.header_left.min(input.len());
        input = &input[skip..];
        self.header_left -= skip;
        let mut out = Vec::new();
        loop {
            let (status, read, written) = decompress(
                &mut self.state,
                input,
                &mut self.window,
                self.position,
                inflate_flags::TINFL_FLAG_HAS_MORE_INPUT,
            );
            out.extend_from_slice(&self.window[self.position..self.position + written]);
            self.position = (self.position + written) % self.window.len();
            input = &input[read..];
            match status {
                TINFLStatus::HasMoreOutput => continue,
                TINFLStatus::NeedsMoreInput | TINFLStatus::Done if input.is_empty() => {
                    return Ok(out)
                }
                TINFLStatus::NeedsMoreInput | TINFLStatus::Done => continue,
                _ => return Err(SpdyError::Inflate),
            }
        }
    }
}

/// The writing side: frames to send, with the header deflater's state.
#[derive(Default)]
pub struct Writer {
    started: bool,
}

impl Writer {
    /// SYN_REPLY for a stream, with no headers.
    pub fn syn_reply(&mut self, id: u32) -> Vec<u8> {
        let mut payload = id.to_be_bytes().to_vec();
        payload.extend(self.header_block(&[]));
        control(SYN_REPLY, 0, &payload)
    }

    /// A header block: the pairs in a zlib stored block, then a sync flush (the stream's
    /// header first).
    fn header_block(&mut self, pairs: &[(&str, &str)]) -> Vec<u8> {
        let mut raw = (pairs.len() as u32).to_be_bytes().to_vec();
        for (k, v) in pairs {
            for s in [k, v] {
                raw.extend((s.len() as u32).to_be_bytes());
                raw.extend(s.as_bytes());
            }
        }
        let mut out = Vec::new();
        if !self.started {
            // CMF 0x78 (deflate, 32 KiB window), FLG 0x01: no dictionary, check bits valid.
            out.extend([0x78, 0x01]);
            self.started = true;
        }
        let len = raw.len() as u16;
        out.push(0x00);
        out.extend(len.to_le_bytes());
        out.extend((!len).to_le_bytes());
        out.extend(raw);
        // The empty stored block of a sync flush: an inflater hands over what it holds there
        // instead of reading on into the next frame (Go's does).
        out.extend([0x00, 0x00, 0x00, 0xff, 0xff]);
        out
    }
}

fn control(kind: u16, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(8 + payload.len());
    frame.extend((0x8000 | VERSION).to_be_bytes());
    frame.extend(kind.to_be_bytes());
    frame.push(flags);
    frame.extend(&(payload.len() as u32).to_be_bytes()[1..]);
    frame.extend(payload);
    frame
}

/// A DATA frame (`fin` half-closes the stream); at most 16 MiB of `data`.
pub fn data(id: u32, data: &[u8], fin: bool) -> Vec<u8> {
    let mut frame = Vec::with_capacity(8 + data.len());
    frame.extend((id & 0x7fff_ffff).to_be_bytes());
    frame.push(if fin { FLAG_FIN } else { 0 });
    frame.extend(&(data.len() as u32).to_be_bytes()[1..]);
    frame.extend(data);
    frame
}

/// The answer to a PING: the same frame.
pub fn pong(payload: &[u8]) -> Vec<u8> {
    control(PING, 0, payload)
}

/// SPDY/3's header dictionary: length-prefixed header names and values, then a run of
/// status codes, dates and content types.
fn dictionary() -> Vec<u8> {
    const WORDS: &[&str] = &[
        "options",
        "head",
        "post",
        "put",
        "delete",
        "trace",
        "accept",
        "accept-charset",
        "accept-encoding",
        "accept-language",
        "accept-ranges",
        "age",
        "allow",
        "authorization",
        "cache-control",
        "connection",
        "content-base",
        "content-encoding",
        "content-language",
        "content-length",
        "content-location",
        "content-md5",
        "content-range",
        "content-type",
        "date",
        "etag",
        "expect",
        "expires",
        "from",
        "host",
        "if-match",
        "if-modified-since",
        "if-none-match",
        "if-range",
        "if-unmodified-since",
        "last-modified",
        "location",
        "max-forwards",
        "pragma",
        "proxy-authenticate",
        "proxy-authorization",
        "range",
        "referer",
        "retry-after",
        "server",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "user-agent",
        "vary",
        "via",
        "warning",
        "www-authenticate",
        "method",
        "get",
        "status",
        "200 OK",
        "version",
        "HTTP/1.1",
        "url",
        "public",
        "set-cookie",
        "keep-alive",
        "origin",
    ];
    const TAIL: &str = "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0.";
    let mut out = Vec::with_capacity(1424);
    for w in WORDS {
        out.extend((w.len() as u32).to_be_bytes());
        out.extend(w.as_bytes());
    }
    out.extend(TAIL.as_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dictionary_is_spdy3s() {
        let d = dictionary();
        assert_eq!(d.len(), 1423);
        assert_eq!(&d[..11], b"\x00\x00\x00\x07options");
        assert!(d.ends_with(b",*,enq=0."));
    }

    #[test]
    fn frames_round_trip_and_split_anywhere() {
        let mut writer = Writer::default();
        let reply = writer.syn_reply(1);
        assert_eq!(&reply[..4], &[0x80, 0x03, 0x00, 0x02]);
        let mut reader = Reader::default();
        let bytes = [data(3, b"hello", true), pong(&[0, 0, 0, 1])].concat();
        for b in &bytes[..7] {
            reader.push(&[*b]);
            assert_eq!(reader.next_frame(), Ok(None));
        }
        reader.push(&bytes[7..]);
        assert_eq!(
            reader.next_frame(),
            Ok(Some(Frame::Data {
                id: 3,
                data: b"hello".to_vec(),
                fin: true
            }))
        );
        assert_eq!(reader.next_frame(), Ok(Some(Frame::Ping(vec![0, 0, 0, 1]))));
        assert_eq!(reader.next_frame(), Ok(None));
    }

    #[test]
    fn header_blocks_inflate_across_frames() {
        // Our own writer's blocks read back through the inflater (stored blocks, no FDICT).
        let mut writer = Writer::default();
        let mut inflater = Inflater::new();
        for pairs in [
            vec![("streamtype", "error"), ("port", "80")],
            vec![("streamtype", "data"), ("requestid", "0")],
        ] {
            let block = writer.header_block(&pairs);
            let headers =
                parse_headers(&inflater.inflate(&block).expect("inflates")).expect("parses");
            for (k, v) in pairs {
                assert_eq!(headers.get(k).map(String::as_str), Some(v));
            }
        }
    }

    /// Two header blocks as a zlib stream with the SPDY dictionary writes them (level 9, a sync
    /// flush after each), made with Python's `zlib.compressobj(zdict=…)`.
    #[test]
    fn a_dictionary_stream_inflates_block_by_block() {
        let hex = |s: &str| -> Vec<u8> {
            (0..s.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
                .collect()
        };
        let first = hex("78f9e3c6a7c202253a703a2b294a4dcc851625aca9a0808614cb45e01c6061606100a4398b20d198094ade8c0600000000ffff");
        let second = hex("c2aa19540e2512d60b000000ffff");
        let mut inflater = Inflater::new();
        let a = parse_headers(&inflater.inflate(&first).expect("inflates")).expect("parses");
        assert_eq!(a.get("streamtype").map(String::as_str), Some("error"));
        assert_eq!(a.get("port").map(String::as_str), Some("8080"));
        let b = parse_headers(&inflater.inflate(&second).expect("inflates")).expect("parses");
        assert_eq!(b.get("streamtype").map(String::as_str), Some("data"));
        assert_eq!(b.get("requestid").map(String::as_str), Some("0"));
    }

    #[test]
    fn bad_input_is_an_error() {
        let mut reader = Reader::default();
        reader.push(&control(SYN_STREAM, 0, &[0, 0, 0, 1]));
        assert_eq!(reader.next_frame(), Err(SpdyError::Short("SYN_STREAM")));
        let mut reader = Reader::default();
        let mut v2 = control(PING, 0, &[0; 4]);
        v2[1] = 2;
        reader.push(&v2);
        assert_eq!(reader.next_frame(), Err(SpdyError::Version(2)));
        assert_eq!(
            parse_headers(&[0, 0, 0, 1, 0, 0, 0, 9]),
            Err(SpdyError::HeaderBlock)
        );
        let mut inflater = Inflater::new();
        assert_eq!(
            inflater.inflate(&[0x78, 0x01, 0xff, 0xff, 0xff]),
            Err(SpdyError::Inflate)
        );
    }
}
