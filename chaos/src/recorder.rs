//! Records a store watch over a prefix during the run, and reads the store's own history of
//! the same prefix afterwards (the reference the watch checker compares with).

use std::time::Duration;

use bytes::Bytes;
use store::client::Client;
use store::types::{EventKind, KeyRange, RangeRequest, WatchRequest, WatchResponse};
use tokio::sync::watch;

use super::watch_check::{value_hash, WatchedEvent};

/// What a watch delivered.
#[derive(Clone, Debug, Default)]
pub struct RecordedWatch {
    pub start_revision: i64,
    pub events: Vec<WatchedEvent>,
    /// The highest revision the stream is known complete up to (events and progress).
    pub through_revision: i64,
    /// The stream ended with an error (e.g. the start revision was compacted).
    pub error: Option<String>,
}

/// The current store revision (a linearizable read of the prefix).
pub async fn current_revision(client: &Client, prefix: &str) -> anyhow::Result<i64> {
    let r = client
        .range(RangeRequest {
            range: KeyRange::prefix(Bytes::from(prefix.to_string())),
            count_only: true,
            ..Default::default()
        })
        .await?;
    Ok(r.header.revision)
}

fn convert(kind: EventKind, key: &[u8], value: &[u8], revision: i64) -> WatchedEvent {
    WatchedEvent {
        revision,
        key: String::from_utf8_lossy(key).into_owned(),
        deleted: kind == EventKind::Delete,
        value_hash: value_hash(value),
    }
}

/// Watches `prefix` from `start_revision` until `until` says which revision to reach (it
/// sends `Some(r)` when the run is over: the recorder stops once it has seen `r`) or `limit`
/// passes after that.
pub async fn record(
    client: Client,
    prefix: String,
    start_revision: i64,
    mut until: watch::Receiver<Option<i64>>,
    limit: Duration,
) -> RecordedWatch {
    let mut out = RecordedWatch {
        start_revision,
        through_revision: start_revision - 1,
        ..Default::default()
    };
    let stream = client
        .watch(WatchRequest {
            range: KeyRange::prefix(Bytes::from(prefix)),
            start_revision,
            prev_kv: false,
            progress_notify_secs: 1,
        })
        .await;
    let mut stream = match stream {
        Ok(s) => s,
        Err(e) => {
            out.error = Some(e.to_string());
            return out;
        }
    };
    let mut deadline: Option<tokio::time::Instant> = None;
    loop {
        let target = *until.borrow();
        if let Some(target) = target {
            if out.through_revision >= target {
                return out;
            }
            let d = *deadline.get_or_insert_with(|| tokio::time::Instant::now() + limit);
            if tokio::time::Instant::now() >= d {
                out.error = Some(format!(
                    "the watch reached revision {} but not {target} within {limit:?}",
                    out.through_revision
                ));
                return out;
            }
        }
        let message = tokio::select! {
            m = stream.next() => m,
            _ = until.changed() => continue,
            _ = tokio::time::sleep(Duration::from_millis(200)) => continue,
        };
        match message {
            None => {
                out.error = Some("the watch ended".into());
                return out;
            }
            Some(Err(e)) => {
                out.error = Some(e.to_string());
                return out;
            }
            Some(Ok(WatchResponse::Events { header, events })) => {
                for e in &events {
                    out.events
                        .push(convert(e.kind, &e.kv.key, &e.kv.value, e.kv.mod_revision));
                    out.through_revision = out.through_revision.max(e.kv.mod_revision);
                }
                // The header says how far the store was; everything in range up to it that
                // this message does not carry was delivered before.
                out.through_revision = out.through_revision.max(header.revision);
            }
            Some(Ok(WatchResponse::Progress { header })) => {
                out.through_revision = out.through_revision.max(header.revision);
            }
            Some(Ok(WatchResponse::Created { .. })) => {}
            Some(Ok(WatchResponse::Canceled { reason, .. })) => {
                out.error = Some(format!("the watch was canceled: {reason}"));
                return out;
            }
        }
    }
}

/// The store's history of `prefix` over `from..=to`, read by a fresh watch replaying it.
pub async fn reference_history(
    client: &Client,
    prefix: &str,
    from: i64,
    to: i64,
    limit: Duration,
) -> anyhow::Result<Vec<WatchedEvent>> {
    let (tx, rx) = watch::channel(Some(to));
    let recorded = record(client.clone(), prefix.to_string(), from, rx, limit).await;
    drop(tx);
    if let Some(e) = recorded.error {
        anyhow::bail!("reading the store's history of {prefix} from revision {from}: {e}");
    }
    Ok(recorded.events)
}
