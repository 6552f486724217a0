//! The load generator's Kubernetes API client: HTTP/1.1 over a connection pool (or HTTP/2 with
//! prior knowledge), many requests in flight, every call timed per verb and resource.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, StatusCode};
use parking_lot::Mutex;

use cluster::api_access::ApiCredentials;
use cluster::kube_http::{KubeHttp, PoolShape, Versions};

/// A call's outcome as the caller sees it.
#[derive(Debug)]
pub struct ApiResponse {
    pub status: StatusCode,
    pub body: Bytes,
}

impl ApiResponse {
    pub fn json(&self) -> anyhow::Result<serde_json::Value> {
        serde_json::from_slice(&self.body).with_context(|| {
            format!(
                "answer {} is not JSON: {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

/// Latency and errors of one verb on one resource.
pub struct CallStats {
    /// Microseconds from send to the whole answer read.
    pub latency_us: Histogram<u64>,
    pub count: u64,
    /// Answers by HTTP code (0 = no answer: connection or protocol error).
    pub codes: BTreeMap<u16, u64>,
}

impl CallStats {
    fn new() -> Self {
        CallStats {
            latency_us: Histogram::new(3).expect("3 significant digits is valid"),
            count: 0,
            codes: BTreeMap::new(),
        }
    }
}

/// Every call the client made, keyed by (verb, resource).
#[derive(Default)]
pub struct ApiStats {
    calls: Mutex<BTreeMap<(String, String), CallStats>>,
}

impl ApiStats {
    fn record(&self, verb: &str, resource: &str, code: u16, latency: Duration) {
        let mut calls = self.calls.lock();
        let entry = calls
            .entry((verb.to_string(), resource.to_string()))
            .or_insert_with(CallStats::new);
        entry.count += 1;
        *entry.codes.entry(code).or_default() += 1;
        let _ = entry.latency_us.record((latency.as_micros() as u64).max(1));
    }

    /// Runs `f` over the stats, sorted by verb and resource.
    pub fn with<R>(&self, f: impl FnOnce(&BTreeMap<(String, String), CallStats>) -> R) -> R {
        f(&self.calls.lock())
    }
}

/// The API servers a client's calls go to, in turn (as through a load balancer); a server
/// that gave no answer is passed over for [`PASS_OVER`].
struct Servers {
    bases: Vec<String>,
    next: AtomicUsize,
    down_until: Mutex<Vec<Option<Instant>>>,
}

/// How long a server that gave no answer (refused, reset, timed out) gets no new calls.
const PASS_OVER: Duration = Duration::from_secs(1);

impl Servers {
    fn new(bases: Vec<String>) -> Servers {
        let n = bases.len();
        Servers {
            bases,
            next: AtomicUsize::new(0),
            down_until: Mutex::new(vec![None; n]),
        }
    }

    /// The next server in turn that is not passed over; the next in turn if all are.
    fn pick(&self) -> usize {
        let n = self.bases.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed) % n;
        if n == 1 {
            return 0;
        }
        let now = Instant::now();
        let down = self.down_until.lock();
        (0..n)
            .map(|i| (start + i) % n)
            .find(|&i| down[i].is_none_or(|until| until <= now))
            .unwrap_or(start)
    }

    fn no_answer(&self, i: usize) {
        if self.bases.len() > 1 {
            self.down_until.lock()[i] = Some(Instant::now() + PASS_OVER);
        }
    }
}

/// A cloneable handle to a connection pool against one API server, or several in turn.
#[derive(Clone)]
pub struct ApiClient {
    servers: Arc<Servers>,
    http: KubeHttp,
    stats: Arc<ApiStats>,
    /// Whole-call timeout of non-watch requests.
    timeout: Duration,
}

impl ApiClient {
    /// `server` is `https://HOST:PORT` (or `http://` for a server started with
    /// `--insecure-http`); `credentials` are the CA to trust and the user to be.
    pub fn new(
        server: &str,
        credentials: &ApiCredentials,
        http2: bool,
    ) -> anyhow::Result<ApiClient> {
        let shape = PoolShape {
            versions: if http2 {
                Versions::Http2
            } else {
                Versions::Either
            },
            // Many requests in flight need many HTTP/1.1 connections; keep them for reuse.
            max_idle_per_host: 1024,
        };
        let http = KubeHttp::new(server, credentials, shape, "kemu-load/0.1")?;
        Ok(ApiClient {
            servers: Arc::new(Servers::new(vec![server.trim_end_matches('/').to_string()])),
            http,
            stats: Arc::new(ApiStats::default()),
            timeout: Duration::from_secs(60),
        })
    }

    /// Spreads calls over `more` servers as well (same CA and credentials), in turn; a server
    /// that gives no answer gets no calls for a second. Watches ([`ApiClient::stream`]) stay on
    /// the first server.
    pub fn spread_over(mut self, more: &[String]) -> ApiClient {
        let mut bases = self.servers.bases.clone();
        for m in more {
            let m = m.trim_end_matches('/').to_string();
            if !bases.contains(&m) {
                bases.push(m);
            }
        }
        self.servers = Arc::new(Servers::new(bases));
        self
    }

    /// The first server: the one watches go to.
    pub fn server(&self) -> &str {
        &self.servers.bases[0]
    }

    /// Every server calls go to.
    pub fn servers(&self) -> &[String] {
        &self.servers.bases
    }

    pub fn stats(&self) -> &Arc<ApiStats> {
        &self.stats
    }

    fn build(
        &self,
        server: usize,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: Bytes,
    ) -> anyhow::Result<Request<Full<Bytes>>> {
        let url = format!("{}{}", self.servers.bases[server], path);
        self.http.request(method, &url, content_type, body)
    }

    /// One call, timed as `verb` on `resource` (send → whole answer read). Transport errors are
    /// counted as code 0 and returned as errors; HTTP errors come back as answers.
    pub async fn call(
        &self,
        verb: &str,
        resource: &str,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: Bytes,
    ) -> anyhow::Result<ApiResponse> {
        let server = self.servers.pick();
        let request = self.build(server, method, path, content_type, body)?;
        let started = Instant::now();
        let result = tokio::time::timeout(self.timeout, async {
            let response = self.http.send(request).await?;
            let status = response.status();
            let body = response.into_body().collect().await?.to_bytes();
            anyhow::Ok(ApiResponse { status, body })
        })
        .await;
        let result = match result {
            Ok(r) => r,
            Err(_) => Err(anyhow::anyhow!("no answer within {:?}", self.timeout)),
        };
        let code = result.as_ref().map(|r| r.status.as_u16()).unwrap_or(0);
        if code == 0 {
            self.servers.no_answer(server);
        }
        self.stats.record(verb, resource, code, started.elapsed());
        result.with_context(|| format!("{verb} {resource} ({path})"))
    }

    /// A JSON request body.
    pub async fn call_json(
        &self,
        verb: &str,
        resource: &str,
        method: Method,
        path: &str,
        body: &serde_json::Value,
    ) -> anyhow::Result<ApiResponse> {
        let content_type = if method == Method::PATCH {
            "application/merge-patch+json"
        } else {
            "application/json"
        };
        self.call(
            verb,
            resource,
            method,
            path,
            Some(content_type),
            Bytes::from(serde_json::to_vec(body)?),
        )
        .await
    }

    /// Opens a streaming GET (a watch): the status and the body to read lines from. Timed as
    /// `watch` until the headers arrive.
    pub async fn stream(
        &self,
        resource: &str,
        path: &str,
    ) -> anyhow::Result<(StatusCode, Incoming)> {
        let request = self.build(0, Method::GET, path, None, Bytes::new())?;
        let started = Instant::now();
        let result = tokio::time::timeout(self.timeout, self.http.send(request)).await;
        let result = match result {
            Ok(r) => r,
            Err(_) => Err(anyhow::anyhow!("no answer within {:?}", self.timeout)),
        };
        let code = result.as_ref().map(|r| r.status().as_u16()).unwrap_or(0);
        self.stats
            .record("watch", resource, code, started.elapsed());
        let response = result.with_context(|| format!("watch {resource} ({path})"))?;
        let status = response.status();
        Ok((status, response.into_body()))
    }
}

/// Splits a streamed body into lines (watch events are one JSON object per line).
pub struct LineReader {
    body: Incoming,
    buffer: Vec<u8>,
}

impl LineReader {
    pub fn new(body: Incoming) -> Self {
        LineReader {
            body,
            buffer: Vec::new(),
        }
    }

    /// The next complete line, without its newline; `None` at the end of the stream.
    pub async fn next_line(&mut self) -> anyhow::Result<Option<Vec<u8>>> {
        loop {
            if let Some(at) = self.buffer.iter().position(|&b| b == b'\n') {
                let mut line: Vec<u8> = self.buffer.drain(..=at).collect();
                line.pop();
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                return Ok(Some(line));
            }
            match self.body.frame().await {
                Some(frame) => {
                    if let Ok(data) = frame?.into_data() {
                        self.buffer.extend_from_slice(&data);
                    }
                }
                None => {
                    if self.buffer.iter().all(u8::is_ascii_whitespace) {
                        return Ok(None);
                    }
                    return Ok(Some(std::mem::take(&mut self.buffer)));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_go_round_and_pass_over_a_server_that_gave_no_answer() {
        let servers = Servers::new(vec!["a".into(), "b".into(), "c".into()]);
        let picks: Vec<usize> = (0..6).map(|_| servers.pick()).collect();
        assert_eq!(picks, [0, 1, 2, 0, 1, 2]);
        servers.no_answer(1);
        let picks: Vec<usize> = (0..6).map(|_| servers.pick()).collect();
        assert!(!picks.contains(&1), "{picks:?}");
        assert!(picks.contains(&0) && picks.contains(&2), "{picks:?}");
        // With every server passed over, calls still go somewhere.
        servers.no_answer(0);
        servers.no_answer(2);
        let picks: Vec<usize> = (0..3).map(|_| servers.pick()).collect();
        assert_eq!(picks.len(), 3);
        // A single server is never passed over.
        let one = Servers::new(vec!["a".into()]);
        one.no_answer(0);
        assert_eq!(one.pick(), 0);
    }

    #[test]
    fn https_needs_a_ca_and_odd_schemes_are_refused() {
        let none = ApiCredentials::default();
        let e = ApiClient::new("https://127.0.0.1:6443", &none, false)
            .err()
            .unwrap();
        assert!(e.to_string().contains("CA"), "{e}");
        let e = ApiClient::new("ftp://127.0.0.1:6443", &none, false)
            .err()
            .unwrap();
        assert!(e.to_string().contains("https://"), "{e}");
    }
}
