//! Closes HTTP connections that hold a file descriptor without using it: one that sends a
//! request head too slowly (slowloris), or that sits idle between requests.
//!
//! A [`ConnectionClock`] follows one connection through its phases — waiting for a request,
//! reading a request head, serving requests — and gives the deadline the connection must meet
//! next. [`WatchedIo`] wraps the connection's socket: while the server waits to read and the
//! deadline passes, the read fails with `TimedOut` and hyper drops the connection. While a
//! request is being served (its response body included, so a long watch) nothing is timed
//! here; the request timeout is the handler's (see [`crate::http_limits`]).

use axum::body::Body;
use axum::extract::{ConnectInfo, Request};
use axum::middleware::Next;
use axum::response::Response;
use bytes::Bytes;
use futures::task::AtomicWaker;
use parking_lot::Mutex;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

use crate::http_limits::HttpLimits;
use crate::https::HttpPeer;

/// Where one connection is, as far as its timeouts go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Waiting for a request since `since`; `first` until the connection's first request.
    Waiting { since: Instant, first: bool },
    /// Part of a request head has arrived, the first byte at `since`.
    ReadingHead { since: Instant },
    /// `count` requests are being served (HTTP/2 serves several at once).
    Serving { count: usize },
}

/// The timing state of one HTTP connection, shared by its socket ([`WatchedIo`]) and the
/// requests served on it ([`InFlight`]).
#[derive(Debug)]
pub struct ConnectionClock {
    phase: Mutex<Phase>,
    limits: HttpLimits,
    /// HTTP/2 carries pings and settings outside requests: bytes read are not a request head,
    /// and only the idle timeout applies between requests.
    multiplexed: bool,
    /// The socket's reader, woken when the last request ends so it arms the idle deadline.
    reader: AtomicWaker,
}

impl ConnectionClock {
    /// A clock for a connection accepted `now`.
    pub fn new(limits: HttpLimits, multiplexed: bool, now: Instant) -> Arc<ConnectionClock> {
        Arc::new(ConnectionClock {
            phase: Mutex::new(Phase::Waiting {
                since: now,
                first: true,
            }),
            limits,
            multiplexed,
            reader: AtomicWaker::new(),
        })
    }

    /// The time by which the connection must have made progress, or `None` while it serves a
    /// request. Go's `http.Server`, as kube-apiserver configures it: a request head must
    /// arrive within the header timeout (the first from the connection's start, later ones from
    /// their first byte), and a connection may wait at most the idle timeout for its next
    /// request.
    pub fn deadline(&self) -> Option<Instant> {
        match *self.phase.lock() {
            Phase::Serving { .. } => None,
            Phase::ReadingHead { since } => Some(since + self.limits.read_header_timeout),
            Phase::Waiting { since, first } => {
                let wait = if first && !self.multiplexed {
                    self.limits.read_header_timeout
                } else {
                    self.limits.idle_timeout
                };
                Some(since + wait)
            }
        }
    }

    /// Bytes arrived at `now`: between requests, the start of a request head.
    fn read(&self, now: Instant) {
        if self.multiplexed {
            return;
        }
        let mut phase = self.phase.lock();
        if let Phase::Waiting { first: false, .. } = *phase {
            *phase = Phase::ReadingHead { since: now };
        }
    }

    /// A request begins being served; the returned guard ends it when dropped.
    pub fn begin(self: &Arc<Self>) -> InFlight {
        let mut phase = self.phase.lock();
        *phase = match *phase {
            Phase::Serving { count } => Phase::Serving { count: count + 1 },
            Phase::Waiting { .. } | Phase::ReadingHead { .. } => Phase::Serving { count: 1 },
        };
        InFlight {
            clock: Arc::clone(self),
        }
    }

    fn end(&self, now: Instant) {
        let mut phase = self.phase.lock();
        if let Phase::Serving { count } = *phase {
            *phase = if count > 1 {
                Phase::Serving { count: count - 1 }
            } else {
                Phase::Waiting {
                    since: now,
                    first: false,
                }
            };
        }
        drop(phase);
        self.reader.wake();
    }
}

/// One request being served on a connection; dropping it (with the response body that holds
/// it) lets the connection's idle timeout run again.
#[derive(Debug)]
pub struct InFlight {
    clock: Arc<ConnectionClock>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.clock.end(Instant::now());
    }
}

/// Middleware that holds the request's place on its connection — the connection's idle and
/// header timeouts stop — until its response has been sent whole (a watch's for as long as it
/// streams).
pub async fn hold_connection(request: Request, next: Next) -> Response {
    let in_flight = request
        .extensions()
        .get::<ConnectInfo<HttpPeer>>()
        .and_then(|c| c.0.clock.as_ref())
        .map(|clock| clock.begin());
    let response = next.run(request).await;
    match in_flight {
        Some(in_flight) => response.map(|body| Body::new(HeldBody { body, in_flight })),
        None => response,
    }
}

/// A response body that holds its request's place on the connection until it is sent.
struct HeldBody {
    body: Body,
    /// Held for its `Drop`, which lets the connection's timeouts run again.
    #[allow(dead_code)]
    in_flight: InFlight,
}

impl http_body::Body for HeldBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// A connection's socket that fails a waiting read once the [`ConnectionClock`]'s deadline
/// passes.
pub struct WatchedIo<T> {
    inner: T,
    clock: Arc<ConnectionClock>,
    timer: Pin<Box<Sleep>>,
}

impl<T> WatchedIo<T> {
    pub fn new(inner: T, clock: Arc<ConnectionClock>) -> WatchedIo<T> {
        let first = clock.deadline().unwrap_or_else(Instant::now);
        WatchedIo {
            inner,
            clock,
            timer: Box::pin(tokio::time::sleep_until(first)),
        }
    }

    /// The wrapped socket.
    pub fn get_ref(&self) -> &T {
        &self.inner
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for WatchedIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(result) => {
                if buf.filled().len() > before {
                    this.clock.read(Instant::now());
                }
                Poll::Ready(result)
            }
            Poll::Pending => {
                this.clock.reader.register(cx.waker());
                let Some(deadline) = this.clock.deadline() else {
                    return Poll::Pending;
                };
                if this.timer.deadline() != deadline {
                    this.timer.as_mut().reset(deadline);
                }
                match this.timer.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the client sent no complete request in time",
                    ))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for WatchedIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// How long after `since` the connection is given.
    fn wait_of(clock: &ConnectionClock, since: Instant) -> Option<Duration> {
        clock.deadline().map(|d| d - since)
    }

    fn limits() -> HttpLimits {
        HttpLimits {
            read_header_timeout: Duration::from_secs(32),
            idle_timeout: Duration::from_secs(90),
            ..HttpLimits::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn phases_give_go_http_server_deadlines() {
        let start = Instant::now();
        let clock = ConnectionClock::new(limits(), false, start);
        // A fresh connection must send its first request head within the header timeout.
        assert_eq!(wait_of(&clock, start), Some(Duration::from_secs(32)));
        let first = clock.begin();
        assert_eq!(
            clock.deadline(),
            None,
            "a request being served is not timed"
        );
        let second = clock.begin();
        drop(first);
        assert_eq!(clock.deadline(), None, "one request is still served");
        tokio::time::advance(Duration::from_secs(5)).await;
        let ended = Instant::now();
        drop(second);
        // Between requests: the idle timeout, then the header timeout from the first byte.
        assert_eq!(wait_of(&clock, ended), Some(Duration::from_secs(90)));
        tokio::time::advance(Duration::from_secs(7)).await;
        let byte = Instant::now();
        clock.read(byte);
        assert_eq!(wait_of(&clock, byte), Some(Duration::from_secs(32)));
        clock.read(byte + Duration::from_secs(1));
        assert_eq!(wait_of(&clock, byte), Some(Duration::from_secs(32)));
    }

    #[tokio::test(start_paused = true)]
    async fn http2_waits_the_idle_timeout_whatever_arrives() {
        let start = Instant::now();
        let clock = ConnectionClock::new(limits(), true, start);
        assert_eq!(wait_of(&clock, start), Some(Duration::from_secs(90)));
        clock.read(start + Duration::from_secs(1));
        assert_eq!(wait_of(&clock, start), Some(Duration::from_secs(90)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_read_fails_at_the_deadline() {
        let (client, server) = tokio::io::duplex(64);
        let clock = ConnectionClock::new(limits(), false, Instant::now());
        let mut io = WatchedIo::new(server, clock);
        let started = Instant::now();
        let mut buf = [0u8; 8];
        let read = tokio::io::AsyncReadExt::read(&mut io, &mut buf).await;
        let err = read.expect_err("the read times out");
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(32));
        drop(client);
    }
}
