//! The standard streams of one emulated exec: stdin as the client sends it, stdout and stderr
//! as messages for the client's channels. A terminal (`tty`) merges stderr into stdout and
//! writes line ends as `\r\n`, as a pseudo-terminal does.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::mpsc;

use super::channel::{STDERR, STDOUT};

/// The bytes a client may have sent ahead of what the command reads; beyond, the session stops
/// reading from the client until the command catches up.
pub const STDIN_BACKLOG: usize = 1 << 20;

/// Stdin as the client sends it: chunks until the client closes it (or never sent one).
pub struct Stdin {
    rx: Option<mpsc::UnboundedReceiver<Bytes>>,
    pending: Vec<u8>,
    queued: Arc<AtomicUsize>,
}

/// The session's side of [`Stdin`].
#[derive(Clone)]
pub struct StdinWriter {
    tx: mpsc::UnboundedSender<Bytes>,
    queued: Arc<AtomicUsize>,
}

impl StdinWriter {
    /// Passes on what the client sent; false once the command no longer reads stdin.
    pub fn send(&self, data: Bytes) -> bool {
        self.queued.fetch_add(data.len(), Ordering::Relaxed);
        self.tx.send(data).is_ok()
    }

    /// Whether the command has room for more stdin.
    pub fn has_room(&self) -> bool {
        self.queued.load(Ordering::Relaxed) < STDIN_BACKLOG
    }
}

impl Stdin {
    /// Stdin fed by the returned writer; dropping every writer is EOF.
    pub fn channel() -> (Stdin, StdinWriter) {
        let (tx, rx) = mpsc::unbounded_channel();
        let queued = Arc::new(AtomicUsize::new(0));
        (
            Stdin {
                rx: Some(rx),
                pending: Vec::new(),
                queued: queued.clone(),
            },
            StdinWriter { tx, queued },
        )
    }

    /// Stdin that is at EOF from the start (`/dev/null`, no `stdin=true`).
    pub fn closed() -> Stdin {
        Stdin {
            rx: None,
            pending: Vec::new(),
            queued: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// The next bytes, or `None` at EOF.
    pub async fn chunk(&mut self) -> Option<Bytes> {
        if !self.pending.is_empty() {
            return Some(Bytes::from(std::mem::take(&mut self.pending)));
        }
        let rx = self.rx.as_mut()?;
        match rx.recv().await {
            Some(data) => {
                self.queued.fetch_sub(data.len(), Ordering::Relaxed);
                Some(data)
            }
            None => {
                self.rx = None;
                None
            }
        }
    }

    /// The next line without its end (`\n`, or `\r` from a terminal), or what is left before
    /// EOF; `None` at EOF.
    pub async fn line(&mut self, tty: bool) -> Option<Vec<u8>> {
        let is_end = |b: &u8| *b == b'\n' || (tty && *b == b'\r');
        let mut line = Vec::new();
        loop {
            let chunk = match self.chunk().await {
                Some(c) => c,
                None if line.is_empty() => return None,
                None => return Some(line),
            };
            match chunk.iter().position(is_end) {
                Some(at) => {
                    line.extend_from_slice(&chunk[..at]);
                    self.pending = chunk[at + 1..].to_vec();
                    return Some(line);
                }
                None => line.extend_from_slice(&chunk),
            }
        }
    }
}

/// The exec's streams: stdin, and the channels its output goes to.
pub struct Stdio {
    pub stdin: Stdin,
    out: mpsc::UnboundedSender<(u8, Bytes)>,
    pub tty: bool,
    stdout: bool,
    stderr: bool,
}

impl Stdio {
    /// Streams whose output (channel, bytes) goes to `out`; stdout and stderr only where the
    /// client asked for them.
    pub fn new(
        stdin: Stdin,
        out: mpsc::UnboundedSender<(u8, Bytes)>,
        tty: bool,
        stdout: bool,
        stderr: bool,
    ) -> Stdio {
        Stdio {
            stdin,
            out,
            tty,
            stdout,
            stderr,
        }
    }

    /// Writes to stdout (`STDOUT`) or stderr (`STDERR`).
    pub fn emit(&self, channel: u8, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        let (channel, wanted) = match channel {
            STDERR if !self.tty => (STDERR, self.stderr),
            _ => (STDOUT, self.stdout),
        };
        if !wanted {
            return;
        }
        let bytes = if self.tty {
            crlf(data)
        } else {
            Bytes::copy_from_slice(data)
        };
        // The session is gone when this fails; the command ends on its own.
        let _ = self.out.send((channel, bytes));
    }
}

/// Output as a terminal writes it: each `\n` as `\r\n`.
pub fn crlf(data: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(data.len() + 8);
    for &b in data {
        if b == b'\n' {
            out.push(b'\r');
        }
        out.push(b);
    }
    Bytes::from(out)
}
