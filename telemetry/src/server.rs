//! [`Telemetry`]: a process's metrics and health, and the HTTP endpoint that serves them.

use std::future::Future;
use std::net::SocketAddr;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;

use crate::health::{Health, HealthAnswer};
use crate::process::ProcessCollector;
use crate::registry::{Registry, CONTENT_TYPE};

/// Why the endpoint could not serve.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("serving metrics and health: {0}")]
    Serve(#[source] std::io::Error),
}

/// A process's metrics and health checks. Cheap to clone: components register into clones of
/// the one their process serves.
#[derive(Clone, Debug)]
pub struct Telemetry {
    pub metrics: Registry,
    pub health: Health,
}

impl Default for Telemetry {
    fn default() -> Telemetry {
        Telemetry::new()
    }
}

impl Telemetry {
    /// The process metrics (`process_resident_memory_bytes`, ...) and the `ping` check.
    pub fn new() -> Telemetry {
        let metrics = Registry::new();
        metrics.register_collector(ProcessCollector::new());
        Telemetry {
            metrics,
            health: Health::new(),
        }
    }

    /// `GET /metrics`, `/metrics/slis`, `/healthz`, `/livez`, `/readyz` and each check under
    /// them.
    pub fn router(&self) -> axum::Router {
        axum::Router::new()
            .route("/metrics", get(metrics))
            .route("/metrics/slis", get(slis))
            .fallback(health)
            .with_state(self.clone())
    }

    /// Serves [`Telemetry::router`] on `listener` until `shutdown` completes, then lets the
    /// requests in flight finish.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServeError> {
        axum::serve(listener, self.router())
            .with_graceful_shutdown(shutdown)
            .await
            .map_err(ServeError::Serve)
    }

    /// Binds `addr` and serves on it until `shutdown` (see [`bind`] to learn the port first).
    pub async fn serve_on(
        self,
        addr: SocketAddr,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServeError> {
        let listener = bind(addr).await?;
        self.serve(listener, shutdown).await
    }
}

/// Binds the metrics and health address, logging where it serves.
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, ServeError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })?;
    tracing::info!(
        addr = %listener.local_addr().unwrap_or(addr),
        "serving /metrics, /healthz, /livez, /readyz"
    );
    Ok(listener)
}

async fn metrics(State(telemetry): State<Telemetry>) -> Response {
    let body = telemetry.metrics.encode();
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], body).into_response()
}

async fn slis(State(telemetry): State<Telemetry>) -> Response {
    let body = telemetry.health.slis();
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], body).into_response()
}

async fn health(State(telemetry): State<Telemetry>, request: Request) -> Response {
    let uri = request.uri();
    match telemetry.health.answer(uri.path(), uri.query()).await {
        Some(answer) => health_response(answer),
        None => (StatusCode::NOT_FOUND, "404 page not found\n").into_response(),
    }
}

/// A health answer as kube-apiserver sends it: plain text, not to be sniffed.
pub fn health_response(answer: HealthAnswer) -> Response {
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        answer.body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    async fn get(router: &axum::Router, uri: &str) -> (u16, String, String) {
        let request = axum::http::Request::get(uri)
            .body(axum::body::Body::empty())
            .expect("request");
        let response = router.clone().oneshot(request).await.expect("infallible");
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let body = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        (
            status,
            content_type,
            String::from_utf8_lossy(&body).into_owned(),
        )
    }

    #[tokio::test]
    async fn serves_metrics_and_health() {
        let telemetry = Telemetry::new();
        let hits = telemetry.metrics.counter("demo_hits_total", "Hits.");
        hits.inc();
        telemetry
            .health
            .readiness("warm", || Err("still warming".to_string()));
        let router = telemetry.router();

        let (status, content_type, body) = get(&router, "/metrics").await;
        assert_eq!(status, 200);
        assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
        assert!(
            body.contains("# TYPE demo_hits_total counter\ndemo_hits_total 1\n"),
            "{body}"
        );
        assert!(body.contains("\nprocess_resident_memory_bytes "), "{body}");

        assert_eq!(
            get(&router, "/livez").await,
            (200, "text/plain; charset=utf-8".into(), "ok".into())
        );
        let (status, _, body) = get(&router, "/readyz?verbose").await;
        assert_eq!(
            (status, body.as_str()),
            (
                500,
                "[+]ping ok\n[-]warm failed: reason withheld\nreadyz check failed\n"
            )
        );
        let (status, _, body) = get(&router, "/readyz/warm").await;
        assert_eq!(
            (status, body.as_str()),
            (500, "internal server error: still warming\n")
        );
        assert_eq!(get(&router, "/nothing").await.0, 404);
        assert_eq!(get(&router, "/readyz/nothing").await.0, 404);
    }

    #[tokio::test]
    async fn serves_over_tcp_until_shutdown() {
        let telemetry = Telemetry::new();
        let listener = bind("127.0.0.1:0".parse().expect("addr"))
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(telemetry.serve(listener, async move {
            let _ = stopped.await;
        }));
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut socket = tokio::net::TcpStream::connect(addr).await.expect("connect");
        socket
            .write_all(b"GET /healthz?verbose HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .await
            .expect("write");
        let mut answer = String::new();
        socket.read_to_string(&mut answer).await.expect("read");
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
        assert!(
            answer.ends_with("\r\n\r\n[+]ping ok\nhealthz check passed\n"),
            "{answer}"
        );
        let _ = stop.send(());
        server.await.expect("join").expect("served");
    }
}
