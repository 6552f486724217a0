//! Watches over HTTP: the stream of JSON lines (Table rows, or each object's metadata as a
//! `PartialObjectMetadata`) from the watch cache, its bookmarks, and how long it lasts.

use std::convert::Infallible;

use tokio::sync::mpsc;

use super::*;
use crate::watch_cache::WatchItem;

/// Queue of one HTTP watcher before it counts as too slow and is dropped.
const HTTP_WATCH_BUFFER: usize = 4096;
/// How often a watch that allows bookmarks gets one.
const BOOKMARK_INTERVAL: Duration = Duration::from_secs(30);

pub(super) async fn watch(
    state: &AppState,
    resource: &'static ResourceInfo,
    namespace: Option<&str>,
    options: ListOptions,
    query: &HashMap<String, String>,
    form: Form,
    custom: Option<Arc<crate::crd::ServedVersion>>,
) -> Result<Response, ApiError> {
    let send_initial = is_true(query.get("sendInitialEvents"));
    let bookmarks = is_true(query.get("allowWatchBookmarks"));
    if send_initial
        && (!bookmarks
            || query.get("resourceVersionMatch").map(String::as_str) != Some("NotOlderThan"))
    {
        return Err(ApiError::Invalid {
            message: "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan and allowWatchBookmarks".into(),
            name: String::new(),
            group: "meta.k8s.io".into(),
            kind: "ListOptions".into(),
            causes: vec![],
        });
    }
    let timeout = match query.get("timeoutSeconds") {
        Some(t) => Duration::from_secs(
            t.parse::<u64>()
                .map_err(|_| ApiError::bad_request("timeoutSeconds must be a number"))?,
        ),
        None => state.limits.watch_timeout(),
    };
    let subscription = state
        .registry
        .watch(
            resource,
            namespace,
            &options,
            send_initial,
            HTTP_WATCH_BUFFER,
        )
        .await?;
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let revision = subscription.revision;
    tokio::spawn(async move {
        let mut subscription = subscription;
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut last_rv = revision;
        let initial = std::mem::take(&mut subscription.initial);
        for item in initial {
            last_rv = last_rv.max(item.object.rv);
            if tx
                .send(watch_line(resource, custom.as_deref(), &item, form))
                .await
                .is_err()
            {
                return;
            }
        }
        if send_initial {
            let line = bookmark_line(resource, revision.max(last_rv), true, form);
            if tx.send(line).await.is_err() {
                return;
            }
        }
        let mut bookmark_timer = tokio::time::interval(BOOKMARK_INTERVAL);
        bookmark_timer.tick().await;
        loop {
            tokio::select! {
                biased;
                _ = &mut deadline => return,
                _ = tx.closed() => return,
                item = subscription.live.recv() => match item {
                    Some(item) => {
                        last_rv = last_rv.max(item.object.rv);
                        let line = watch_line(resource, custom.as_deref(), &item, form);
                        if tx.send(line).await.is_err() {
                            return;
                        }
                    }
                    // Dropped for falling behind: ending the stream makes the client re-list.
                    None => return,
                },
                _ = bookmark_timer.tick(), if bookmarks => {
                    if tx.send(bookmark_line(resource, last_rv, false, form)).await.is_err() {
                        return;
                    }
                }
            }
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(b), rx))
    });
    let mut response = Response::new(Body::from_stream(stream));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    Ok(response)
}

fn watch_line(
    resource: &ResourceInfo,
    custom: Option<&crate::crd::ServedVersion>,
    item: &WatchItem,
    form: Form,
) -> Bytes {
    let mut line = BytesMut::with_capacity(item.object.json.len() + 40);
    line.put_slice(b"{\"type\":\"");
    line.put_slice(item.kind.as_str().as_bytes());
    line.put_slice(b"\",\"object\":");
    if form == Form::Metadata {
        let object = item.object.value().unwrap_or(Value::Null);
        line.put_slice(&crate::go_json::to_vec(&super::negotiate::partial(&object)));
    } else if form == Form::Table {
        let object = item.object.value().unwrap_or(Value::Null);
        let rv = item.object.rv.to_string();
        let t = super::custom_or_kemu_table(
            custom,
            resource,
            &[object],
            IncludeObject::Metadata,
            &rv,
            None,
        );
        line.put_slice(&crate::go_json::to_vec(&t));
    } else {
        put_object(&mut line, resource, &item.object);
    }
    line.put_slice(b"}\n");
    line.freeze()
}

fn bookmark_line(resource: &ResourceInfo, rv: i64, initial_end: bool, form: Form) -> Bytes {
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let mut object =
        json!({"kind": resource.kind, "apiVersion": resource.api_version(), "metadata": metadata});
    if form == Form::Metadata {
        object = super::negotiate::partial(&object);
    }
    let mut line = BytesMut::with_capacity(160);
    line.put_slice(b"{\"type\":\"BOOKMARK\",\"object\":");
    line.put_slice(&crate::go_json::to_vec(&object));
    line.put_slice(b"}\n");
    line.freeze()
}
