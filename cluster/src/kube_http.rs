//! The HTTP client kemu's tools use to reach a Kubernetes API server: one hyper connection
//! pool over rustls with the credential of an [`ApiCredentials`] (client certificate or bearer
//! token), HTTP/1.1 and HTTP/2. The load generator, the API server benchmark and
//! [`crate::api_access::ApiAccess`] all send through it; they differ only in the pool's shape
//! and in what they measure around each call.

use std::time::Duration;

use anyhow::{bail, Context};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use crate::api_access::ApiCredentials;

/// Which HTTP versions a pool speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Versions {
    /// HTTP/1.1 only: a call in flight holds a connection (what most load tools measure).
    Http1,
    /// HTTP/2 only: one connection multiplexes every call.
    Http2,
    /// Whichever ALPN settles (HTTP/2 against kemu and kube-apiserver).
    Either,
}

/// How many connections a pool keeps, and which HTTP versions it speaks.
#[derive(Debug, Clone, Copy)]
pub struct PoolShape {
    pub versions: Versions,
    /// Idle connections kept per server: many calls in flight over HTTP/1.1 need as many
    /// connections.
    pub max_idle_per_host: usize,
}

impl PoolShape {
    /// A few calls at a time (tools, tests).
    pub const SMALL: PoolShape = PoolShape {
        versions: Versions::Either,
        max_idle_per_host: 4,
    };
}

/// A cloneable connection pool to API servers with one credential.
#[derive(Clone)]
pub struct KubeHttp {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    /// `Authorization` header value, when authenticating with a bearer token.
    authorization: Option<String>,
    user_agent: &'static str,
}

impl KubeHttp {
    /// A pool for servers at `server` (`https://HOST:PORT`, or `http://` for an API server run
    /// with `--insecure-http`); requests name their full URL, so one pool serves several
    /// servers with the same CA.
    pub fn new(
        server: &str,
        credentials: &ApiCredentials,
        shape: PoolShape,
        user_agent: &'static str,
    ) -> anyhow::Result<KubeHttp> {
        let tls = if server.starts_with("https://") {
            credentials.rustls_config(&[])?
        } else if server.starts_with("http://") {
            rustls::ClientConfig::builder_with_provider(transport::tls::provider())
                .with_safe_default_protocol_versions()?
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth()
        } else {
            bail!("server {server:?}: expected https://HOST:PORT");
        };
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        http.enforce_http(false);
        http.set_connect_timeout(Some(Duration::from_secs(5)));
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http();
        let connector = match shape.versions {
            Versions::Http1 => connector.enable_http1().wrap_connector(http),
            Versions::Http2 | Versions::Either => {
                connector.enable_all_versions().wrap_connector(http)
            }
        };
        let mut builder = Client::builder(TokioExecutor::new());
        builder
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .pool_max_idle_per_host(shape.max_idle_per_host)
            .http2_only(shape.versions == Versions::Http2);
        Ok(KubeHttp {
            client: builder.build(connector),
            authorization: credentials.token.as_ref().map(|t| format!("Bearer {t}")),
            user_agent,
        })
    }

    /// A request to `url` with the pool's credential, `Accept: application/json` and the
    /// pool's User-Agent.
    pub fn request(
        &self,
        method: Method,
        url: &str,
        content_type: Option<&str>,
        body: Bytes,
    ) -> anyhow::Result<Request<Full<Bytes>>> {
        let mut request = Request::builder()
            .method(method)
            .uri(url)
            .header("accept", "application/json")
            .header("user-agent", self.user_agent);
        if let Some(ct) = content_type {
            request = request.header("content-type", ct);
        }
        if let Some(authorization) = &self.authorization {
            request = request.header("authorization", authorization);
        }
        request
            .body(Full::new(body))
            .with_context(|| format!("bad request URL {url:?}"))
    }

    /// Sends `request`; the answer's headers, with the body still to read (watches).
    pub async fn send(&self, request: Request<Full<Bytes>>) -> anyhow::Result<Response<Incoming>> {
        Ok(self.client.request(request).await?)
    }

    /// One call, read to the end: the status and the whole body.
    pub async fn fetch(
        &self,
        method: Method,
        url: &str,
        content_type: Option<&str>,
        body: Bytes,
    ) -> anyhow::Result<(StatusCode, Bytes)> {
        let response = self
            .send(self.request(method, url, content_type, body)?)
            .await?;
        let status = response.status();
        let body = response.into_body().collect().await?.to_bytes();
        Ok((status, body))
    }
}
