//! SPDY/3.1 as kubectl's port-forward speaks it, tunnelled in a WebSocket
//! (`SPDY/3.1+portforward.k8s.io`): frames, and header blocks compressed with zlib over the
//! SPDY dictionary. Pure: bytes in, frames out.
//!
//! Only what a streaming server needs: it reads SYN_STREAM, HEADERS, DATA, RST_STREAM,
//! PING, SETTINGS, WINDOW_UPDATE and GOAWAY, and writes SYN_REPLY, DATA, RST_STREAM,
//! WINDOW_UPDATE and PING. Its own header blocks are zlib stored blocks without the dictionary,
//! which every inflater reads. [`Windows`] is SPDY/3.1's flow control, both ways.

use std::collections::{HashMap, HashSet, VecDeque};

use miniz_oxide::inflate::core::{decompress, inflate_flags, DecompressorOxide};
use miniz_oxide::inflate::TINFLStatus;

const VERSION: u16 = 3;
pub const SYN_STREAM: u16 = 1;
pub const SYN_REPLY: u16 = 2;
pub const RST_STREAM: u16 = 3;
pub const SETTINGS: u16 = 4;
pub const PING: u16 = 6;
pub const GOAWAY: u16 = 7;
pub const HEADERS: u16 = 8;
pub const WINDOW_UPDATE: u16 = 9;
pub const FLAG_FIN: u8 = 1;
/// RST_STREAM's status for a stream the endpoint no longer needs.
pub const CANCEL: u32 = 5;
/// The SETTINGS id of the initial stream window.
const SETTINGS_INITIAL_WINDOW_SIZE: u32 = 7;
/// Every stream's window, and the session's, until the peer says otherwise (SPDY/3.1).
pub const DEFAULT_WINDOW: u32 = 64 * 1024;
/// The most DATA held back by the peer's windows before the peer's own DATA is no longer
/// given back (and a reader of the server's output waits).
pub const MAX_BACKLOG: usize = 1 << 20;
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
    /// SETTINGS, with the initial stream window if it names one.
    Settings {
        initial_window: Option<u32>,
    },
    /// WINDOW_UPDATE: `delta` more bytes may be sent on stream `id` (0: the session).
    WindowUpdate {
        id: u32,
        delta: u32,
    },
    /// Anything unknown.
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
            SETTINGS => {
                let count = u32_at(payload, 0).ok_or(SpdyError::Short("SETTINGS"))?;
                let mut initial_window = None;
                for i in 0..count.min(1024) as usize {
                    let at = 4 + 8 * i;
                    let entry = payload
                        .get(at..at + 8)
                        .ok_or(SpdyError::Short("SETTINGS"))?;
                    let id = u32::from_be_bytes([0, entry[1], entry[2], entry[3]]);
                    if id == SETTINGS_INITIAL_WINDOW_SIZE {
                        initial_window = u32_at(entry, 4);
                    }
                }
                Frame::Settings { initial_window }
            }
            WINDOW_UPDATE => Frame::WindowUpdate {
                id: u32_at(payload, 0).ok_or(SpdyError::Short("WINDOW_UPDATE"))?,
                delta: u32_at(payload, 4).ok_or(SpdyError::Short("WINDOW_UPDATE"))?,
            },
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

    /// SYN_STREAM, as a client opens a stream: its headers, `fin` if it sends nothing.
    pub fn syn_stream(&mut self, id: u32, pairs: &[(&str, &str)], fin: bool) -> Vec<u8> {
        let mut payload = (id & 0x7fff_ffff).to_be_bytes().to_vec();
        payload.extend([0, 0, 0, 0, 0, 0]);
        payload.extend(self.header_block(pairs));
        control(SYN_STREAM, if fin { FLAG_FIN } else { 0 }, &payload)
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

/// SETTINGS naming the initial stream window.
pub fn settings(initial_window: u32) -> Vec<u8> {
    let mut payload = 1u32.to_be_bytes().to_vec();
    payload.extend(SETTINGS_INITIAL_WINDOW_SIZE.to_be_bytes());
    payload.extend(initial_window.to_be_bytes());
    control(SETTINGS, 0, &payload)
}

/// RST_STREAM: the stream ends abnormally with `status`.
pub fn rst_stream(id: u32, status: u32) -> Vec<u8> {
    let payload = [(id & 0x7fff_ffff).to_be_bytes(), status.to_be_bytes()].concat();
    control(RST_STREAM, 0, &payload)
}

/// WINDOW_UPDATE: the peer may send `delta` more bytes on stream `id` (0: the session).
pub fn window_update(id: u32, delta: u32) -> Vec<u8> {
    let payload = [
        (id & 0x7fff_ffff).to_be_bytes(),
        (delta & 0x7fff_ffff).to_be_bytes(),
    ]
    .concat();
    control(WINDOW_UPDATE, 0, &payload)
}

/// SPDY/3.1 flow control of one session, both ways. Pure: frames in, frames out.
///
/// Sending: DATA leaves only within the stream's window (the peer's
/// SETTINGS_INITIAL_WINDOW_SIZE, 64 KiB unless it says otherwise) and the session's (64 KiB),
/// both grown by the peer's WINDOW_UPDATE frames; what does not fit waits, in order per stream,
/// its FIN after it. spdystream — client-go's and the kubelet's SPDY — neither sends
/// WINDOW_UPDATE nor reads it, and writes without windows: when a window runs out before the
/// peer has sent any SETTINGS or WINDOW_UPDATE, a PING goes out, and a peer that answers it
/// without having done either is written to unmetered from then on, as the kubelet writes.
///
/// Receiving: what the server consumes of the peer's DATA is given back with WINDOW_UPDATE
/// frames, for the stream and the session, once half a window has been consumed — and while
/// no more than [`MAX_BACKLOG`] waits to be sent, so that a peer that does not read stops
/// being read.
#[derive(Debug)]
pub struct Windows {
    /// The peer has sent SETTINGS or WINDOW_UPDATE: it takes part in flow control.
    metered: bool,
    /// The peer answered the probe without taking part: no windows apply.
    unmetered: bool,
    /// The PING sent when a window first ran out, while it is unanswered.
    probe: Option<u32>,
    next_ping: u32,
    initial: i64,
    session: i64,
    streams: HashMap<u32, i64>,
    queue: VecDeque<(u32, Vec<u8>, bool)>,
    /// Consumed and not yet given back: the session's, and each stream's.
    consumed_session: u32,
    consumed: HashMap<u32, u32>,
}

impl Default for Windows {
    fn default() -> Self {
        Windows {
            metered: false,
            unmetered: false,
            probe: None,
            next_ping: 2,
            initial: i64::from(DEFAULT_WINDOW),
            session: i64::from(DEFAULT_WINDOW),
            streams: HashMap::new(),
            queue: VecDeque::new(),
            consumed_session: 0,
            consumed: HashMap::new(),
        }
    }
}

impl Windows {
    /// Queues DATA for stream `id` (`fin` half-closes it after `data`); the frames that may
    /// go now.
    pub fn send(&mut self, id: u32, data: &[u8], fin: bool) -> Vec<Vec<u8>> {
        self.queue.push_back((id, data.to_vec(), fin));
        self.flush()
    }

    /// The queued DATA that fits the windows now (and the probe PING, once, when a window has
    /// run out before the peer took part in flow control).
    pub fn flush(&mut self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut blocked: HashSet<u32> = HashSet::new();
        let mut kept = VecDeque::new();
        while let Some((id, mut bytes, fin)) = self.queue.pop_front() {
            if blocked.contains(&id) {
                kept.push_back((id, bytes, fin));
                continue;
            }
            let window = *self.streams.entry(id).or_insert(self.initial);
            let room = if self.unmetered {
                bytes.len()
            } else {
                window.min(self.session).clamp(0, bytes.len() as i64) as usize
            };
            if room < bytes.len() {
                if room > 0 {
                    let rest = bytes.split_off(room);
                    self.spend(id, room);
                    out.push(data(id, &bytes, false));
                    bytes = rest;
                }
                blocked.insert(id);
                kept.push_back((id, bytes, fin));
                continue;
            }
            self.spend(id, bytes.len());
            if !bytes.is_empty() || fin {
                out.push(data(id, &bytes, fin));
            }
        }
        self.queue = kept;
        if !self.queue.is_empty() && !self.metered && !self.unmetered && self.probe.is_none() {
            let id = self.next_ping;
            self.next_ping = self.next_ping.wrapping_add(2);
            self.probe = Some(id);
            out.push(control(PING, 0, &id.to_be_bytes()));
        }
        out.extend(self.updates_due());
        out
    }

    fn spend(&mut self, id: u32, n: usize) {
        let n = n as i64;
        self.session -= n;
        if let Some(window) = self.streams.get_mut(&id) {
            *window -= n;
        }
    }

    /// Bytes queued and not yet sent.
    pub fn backlog(&self) -> usize {
        self.queue.iter().map(|(_, bytes, _)| bytes.len()).sum()
    }

    /// Whether nothing waits to be sent.
    pub fn idle(&self) -> bool {
        self.queue.is_empty()
    }

    /// The peer's SETTINGS: a new initial window moves every stream's window by the
    /// difference.
    pub fn settings(&mut self, initial_window: Option<u32>) -> Vec<Vec<u8>> {
        self.metered = true;
        self.unmetered = false;
        if let Some(initial) = initial_window {
            let delta = i64::from(initial) - self.initial;
            self.initial = i64::from(initial);
            for window in self.streams.values_mut() {
                *window += delta;
            }
        }
        self.flush()
    }

    /// The peer's WINDOW_UPDATE.
    pub fn update(&mut self, id: u32, delta: u32) -> Vec<Vec<u8>> {
        self.metered = true;
        self.unmetered = false;
        let delta = i64::from(delta);
        if id == 0 {
            self.session += delta;
        } else {
            *self.streams.entry(id).or_insert(self.initial) += delta;
        }
        self.flush()
    }

    /// A PING from the peer: the answer to the probe (nothing to send but what it frees), or
    /// the peer's own, echoed.
    pub fn ping(&mut self, payload: &[u8]) -> Vec<Vec<u8>> {
        let id = payload
            .get(..4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
        if id.is_some() && id == self.probe {
            self.probe = None;
            if !self.metered {
                self.unmetered = true;
            }
            return self.flush();
        }
        if id.is_some_and(|id| id.is_multiple_of(2)) {
            // An answer to a PING of ours that is no longer awaited: not echoed back.
            return Vec::new();
        }
        vec![pong(payload)]
    }

    /// Stream `id` is gone (reset): what waits for it is dropped.
    pub fn forget(&mut self, id: u32) {
        self.queue.retain(|(stream, _, _)| *stream != id);
        self.streams.remove(&id);
        self.consumed.remove(&id);
    }

    /// `n` bytes of the peer's DATA consumed, on `stream` if it is still open (`None`: only
    /// the session's window); the WINDOW_UPDATE frames now due.
    pub fn consumed(&mut self, stream: Option<u32>, n: usize) -> Vec<Vec<u8>> {
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        if let Some(id) = stream {
            let pending = self.consumed.entry(id).or_insert(0);
            *pending = pending.saturating_add(n);
        }
        self.consumed_session = self.consumed_session.saturating_add(n);
        self.updates_due()
    }

    /// WINDOW_UPDATE for every window with half a window consumed, unless too much waits.
    fn updates_due(&mut self) -> Vec<Vec<u8>> {
        let due = DEFAULT_WINDOW / 2;
        let mut out = Vec::new();
        if self.backlog() > MAX_BACKLOG {
            return out;
        }
        let mut ids: Vec<u32> = self
            .consumed
            .iter()
            .filter(|(_, pending)| **pending >= due)
            .map(|(id, _)| *id)
            .collect();
        ids.sort_unstable();
        for id in ids {
            if let Some(pending) = self.consumed.get_mut(&id) {
                out.push(window_update(id, std::mem::take(pending).min(0x7fff_ffff)));
            }
        }
        if self.consumed_session >= due {
            let delta = std::mem::take(&mut self.consumed_session).min(0x7fff_ffff);
            out.push(window_update(0, delta));
        }
        out
    }
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

    /// The frames' kinds and sizes: `("data", id, len, fin)`, `("ping", id, 0, false)`,
    /// `("update", id, delta, false)`.
    fn summary(frames: &[Vec<u8>]) -> Vec<(&'static str, u32, usize, bool)> {
        let mut reader = Reader::default();
        for f in frames {
            reader.push(f);
        }
        let mut out = Vec::new();
        while let Ok(Some(frame)) = reader.next_frame() {
            out.push(match frame {
                Frame::Data { id, data, fin } => ("data", id, data.len(), fin),
                Frame::Ping(p) => (
                    "ping",
                    u32::from_be_bytes([p[0], p[1], p[2], p[3]]),
                    0,
                    false,
                ),
                Frame::WindowUpdate { id, delta } => ("update", id, delta as usize, false),
                _ => ("other", 0, 0, false),
            });
        }
        out
    }

    #[test]
    fn settings_and_window_updates_parse() {
        let mut reader = Reader::default();
        reader.push(&settings(1024));
        reader.push(&window_update(3, 4096));
        reader.push(&rst_stream(5, CANCEL));
        assert_eq!(
            reader.next_frame(),
            Ok(Some(Frame::Settings {
                initial_window: Some(1024)
            }))
        );
        assert_eq!(
            reader.next_frame(),
            Ok(Some(Frame::WindowUpdate { id: 3, delta: 4096 }))
        );
        assert_eq!(reader.next_frame(), Ok(Some(Frame::Reset { id: 5 })));
    }

    #[test]
    fn data_waits_for_the_peers_windows() {
        let mut w = Windows::default();
        // The peer's initial stream window: 1000 bytes; the session's stays 64 KiB.
        assert!(w.settings(Some(1000)).is_empty());
        let out = w.send(1, &[7; 2500], true);
        assert_eq!(summary(&out), [("data", 1, 1000, false)]);
        assert_eq!(w.backlog(), 1500);
        // Another stream has its own window; the first one's FIN waits behind its data.
        assert_eq!(
            summary(&w.send(3, &[7; 10], false)),
            [("data", 3, 10, false)]
        );
        assert_eq!(summary(&w.update(1, 600)), [("data", 1, 600, false)]);
        // A larger initial window grows every stream's window by the difference.
        assert_eq!(summary(&w.settings(Some(1900))), [("data", 1, 900, true)]);
        assert!(w.idle());
        // The session's window: 64 KiB over all streams, grown by updates on stream 0.
        let mut w = Windows::default();
        w.update(1, 1 << 20);
        w.update(3, 1 << 20);
        let sent: usize = summary(&w.send(1, &vec![0; 40_000], false))
            .iter()
            .map(|f| f.2)
            .sum();
        assert_eq!(sent, 40_000);
        assert_eq!(
            summary(&w.send(3, &vec![0; 40_000], false)),
            [("data", 3, 65_536 - 40_000, false)]
        );
        assert_eq!(
            summary(&w.update(0, 100_000)),
            [("data", 3, 40_000 - (65_536 - 40_000), false)]
        );
        // A reset stream's queued data is dropped.
        let mut w = Windows::default();
        w.settings(Some(0));
        assert!(w.send(5, b"x", true).is_empty());
        w.forget(5);
        assert!(w.idle());
    }

    #[test]
    fn a_peer_without_flow_control_is_probed_once_then_written_to_unmetered() {
        let mut w = Windows::default();
        let out = w.send(1, &vec![0; 100_000], false);
        assert_eq!(
            summary(&out),
            [("data", 1, 65_536, false), ("ping", 2, 0, false)]
        );
        assert!(w.send(1, b"more", false).is_empty(), "one probe");
        // The peer's own PINGs are echoed, ours are not.
        assert_eq!(w.ping(&[0, 0, 0, 1]), vec![pong(&[0, 0, 0, 1])]);
        assert!(w.ping(&[0, 0, 0, 8]).is_empty());
        // The answer, without SETTINGS or WINDOW_UPDATE before it: spdystream.
        assert_eq!(
            summary(&w.ping(&2u32.to_be_bytes())),
            [("data", 1, 100_000 - 65_536, false), ("data", 1, 4, false)]
        );
        assert_eq!(
            summary(&w.send(1, &vec![0; 200_000], true)),
            [("data", 1, 200_000, true)]
        );
        // A peer that updates before answering keeps its windows.
        let mut w = Windows::default();
        w.send(1, &vec![0; 70_000], false);
        w.update(1, 10);
        assert!(w.ping(&2u32.to_be_bytes()).is_empty());
        assert_eq!(w.backlog(), 70_000 - 65_536);
    }

    #[test]
    fn consumed_data_is_given_back_by_half_windows() {
        let mut w = Windows::default();
        assert!(w.consumed(Some(3), 20_000).is_empty());
        assert_eq!(
            summary(&w.consumed(Some(3), 20_000)),
            [("update", 3, 40_000, false), ("update", 0, 40_000, false)]
        );
        assert!(w.consumed(None, 30_000).is_empty());
        assert_eq!(
            summary(&w.consumed(None, 5_000)),
            [("update", 0, 35_000, false)]
        );
        // While more than MAX_BACKLOG waits for the peer's windows, nothing is given back.
        let mut w = Windows::default();
        w.settings(Some(0));
        assert!(w.send(1, &vec![0; MAX_BACKLOG + 1], false).is_empty());
        assert!(w.consumed(Some(3), 40_000).is_empty());
        assert_eq!(
            summary(&w.update(1, 10)),
            [
                ("data", 1, 10, false),
                ("update", 3, 40_000, false),
                ("update", 0, 40_000, false)
            ]
        );
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
