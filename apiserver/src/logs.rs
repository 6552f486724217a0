//! `GET pods/{name}/log`: the API server finds the pod's node, reads the address of the node
//! host running it from the Node ([`api::node_logs::NODE_HOST_LOGS_ANNOTATION`]) and streams
//! the container's log from there over mutual-TLS QUIC, as the real API server proxies to the
//! kubelet. The answer is `text/plain`; with `follow=true` it streams until the container ends
//! or the client goes away.

use std::collections::HashMap;
use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::OnceLock;
use transport::Endpoint;

use api::node_logs::{LogRequest, LogResponse, NODE_HOST_LOGS_ANNOTATION};
use axum::body::Body;
use axum::http::{header, HeaderValue};
use axum::response::Response;
use bytes::Bytes;
use futures::{Stream, StreamExt};
use parking_lot::Mutex;
use serde_json::Value;
use transport::rpc::{Connection, RpcClient};
use transport::tls::TlsIdentity;

use crate::errors::ApiError;
use crate::registry::Registry;

/// Where this API server's certificate is, for calls to node hosts (set once at start).
static IDENTITY: OnceLock<(PathBuf, String)> = OnceLock::new();
/// The QUIC client and the open connection to each node host.
static NODE_HOSTS: OnceLock<Result<NodeHostConnections, String>> = OnceLock::new();

struct NodeHostConnections {
    client: RpcClient,
    open: Mutex<HashMap<Endpoint, Connection>>,
}

/// Records the certificate that log requests to node hosts present.
pub fn configure(certs_dir: PathBuf, identity: String) {
    let _ = IDENTITY.set((certs_dir, identity));
}

fn connections() -> Result<&'static NodeHostConnections, ApiError> {
    NODE_HOSTS
        .get_or_init(|| {
            let (dir, name) = IDENTITY
                .get()
                .ok_or_else(|| "the API server has no identity for node hosts".to_string())?;
            let identity = TlsIdentity::load(dir, name).map_err(|e| e.to_string())?;
            let client = RpcClient::new(&identity).map_err(|e| e.to_string())?;
            Ok(NodeHostConnections {
                client,
                open: Mutex::new(HashMap::new()),
            })
        })
        .as_ref()
        .map_err(|e| ApiError::internal(e.clone()))
}

async fn connect(addr: &Endpoint) -> Result<Connection, ApiError> {
    let hosts = connections()?;
    if let Some(c) = hosts.open.lock().get(addr).filter(|c| !c.is_closed()) {
        return Ok(c.clone());
    }
    let connection =
        hosts.client.connect(addr).await.map_err(|e| {
            ApiError::internal(format!("cannot reach the node host at {addr}: {e}"))
        })?;
    hosts.open.lock().insert(addr.clone(), connection.clone());
    Ok(connection)
}

/// Serves `GET namespaces/{namespace}/pods/{name}/log`.
pub async fn pod_log(
    registry: &Registry,
    namespace: &str,
    name: &str,
    query: &HashMap<String, String>,
) -> Result<Response, ApiError> {
    let pods = api::resources::pods();
    let pod = registry.get(pods, Some(namespace), name).await?;
    let container = container_of(&pod, name, query.get("container").map(String::as_str))?;
    let number = |key: &str| -> Result<Option<i64>, ApiError> {
        query
            .get(key)
            .map(|v| {
                v.parse::<i64>()
                    .map_err(|_| ApiError::bad_request(format!("{key} must be an integer")))
            })
            .transpose()
    };
    let flag = |key: &str| query.get(key).is_some_and(|v| v == "true" || v == "1");
    let request = LogRequest {
        namespace: namespace.to_string(),
        pod: name.to_string(),
        container,
        follow: flag("follow"),
        tail_lines: number("tailLines")?,
        previous: flag("previous"),
        timestamps: flag("timestamps"),
        limit_bytes: number("limitBytes")?,
    };
    let body = stream_log(registry, &pod, &request)
        .await?
        .map(Ok::<_, Infallible>);
    let mut response = Response::new(Body::from_stream(body));
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    Ok(response)
}

/// A container's log as the node host running `pod` streams it: errors the node host answers
/// first come back as errors, then the log's chunks until it ends.
pub(crate) async fn stream_log(
    registry: &Registry,
    pod: &Value,
    request: &LogRequest,
) -> Result<impl Stream<Item = Bytes> + Send + 'static, ApiError> {
    let name = request.pod.as_str();
    let node = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| {
            ApiError::bad_request(format!("pod {name} does not have a host assigned"))
        })?;
    let nodes = api::resources::find("", "v1", "nodes")
        .ok_or_else(|| ApiError::internal("nodes are not served"))?;
    let node_object = registry.get(nodes, None, node).await?;
    let addr: Endpoint = node_object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(NODE_HOST_LOGS_ANNOTATION))
        .and_then(Value::as_str)
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "node {node} is not run by a node host that serves logs"
            ))
        })?;
    let connection = connect(&addr).await?;
    let mut stream = connection
        .server_stream::<LogRequest, LogResponse>(request)
        .await
        .map_err(|e| ApiError::internal(format!("log request to {addr} failed: {e}")))?;
    // The first frame decides between an error status and a 200 stream.
    let first = match stream.next().await {
        None => Bytes::new(),
        Some(Ok(LogResponse::Chunk(bytes))) => bytes,
        Some(Ok(LogResponse::Error { code, message })) => {
            return Err(match code {
                403 => ApiError::forbidden(api::resources::pods(), name, &message),
                _ => ApiError::bad_request(message),
            })
        }
        Some(Err(e)) => return Err(ApiError::internal(format!("log stream from {addr}: {e}"))),
    };
    let rest = futures::stream::unfold(Some(stream), |stream| async move {
        let mut stream = stream?;
        match stream.next().await {
            Some(Ok(LogResponse::Chunk(bytes))) => Some((bytes, Some(stream))),
            _ => None,
        }
    });
    Ok(futures::stream::iter([first])
        .filter(|b| futures::future::ready(!b.is_empty()))
        .chain(rest))
}

/// The container a log request is about: the one named, or the pod's only container.
pub(crate) fn container_of(
    pod: &Value,
    name: &str,
    asked: Option<&str>,
) -> Result<String, ApiError> {
    let names: Vec<&str> = [
        "/spec/initContainers",
        "/spec/containers",
        "/spec/ephemeralContainers",
    ]
    .iter()
    .filter_map(|p| pod.pointer(p).and_then(Value::as_array))
    .flatten()
    .filter_map(|c| c.get("name").and_then(Value::as_str))
    .collect();
    let mains: Vec<&str> = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .filter_map(|c| c.get("name").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    match asked.filter(|a| !a.is_empty()) {
        Some(c) if names.contains(&c) => Ok(c.to_string()),
        Some(c) => Err(ApiError::bad_request(format!(
            "container {c} is not valid for pod {name}"
        ))),
        None if mains.len() == 1 => Ok(mains[0].to_string()),
        None => Err(ApiError::bad_request(format!(
            "a container name must be specified for pod {name}, choose one of: [{}]",
            mains.join(" ")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_container_is_named_or_the_only_one() {
        let one = json!({"spec": {"containers": [{"name": "a"}]}});
        assert_eq!(container_of(&one, "p", None).expect("a"), "a");
        assert!(container_of(&one, "p", Some("b")).is_err());
        let two = json!({"spec": {"initContainers": [{"name": "i"}], "containers": [{"name": "a"}, {"name": "b"}]}});
        let e = container_of(&two, "p", None).unwrap_err();
        assert!(e.to_string().contains("choose one of: [a b]"), "{e}");
        assert_eq!(container_of(&two, "p", Some("i")).expect("init"), "i");
    }
}
