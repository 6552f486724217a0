//! Container logs: [`LogStore`] keeps what each emulated container instance prints (as the
//! [`Output`] of its process, so nothing is materialized until read), and [`LogService`] serves
//! them to the API server's `pods/log` over QUIC ([`api::node_logs`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use api::node_logs::{LogRequest, LogResponse};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use parking_lot::Mutex;
use tracing::debug;
use transport::frame::FrameLimits;
use transport::rpc::{Call, Handler, Peer};

use crate::api_time::rfc3339;
use crate::process::Output;

/// How often a follow stream looks for new lines.
const FOLLOW_POLL: Duration = Duration::from_millis(200);
/// Only the API server may read logs.
const API_SERVER_ORG: &str = "kemu:apiserver";

/// One run of a container.
#[derive(Clone, Debug)]
struct Instance {
    started: DateTime<Utc>,
    finished: Option<DateTime<Utc>>,
    output: Output,
}

impl Instance {
    /// The lines printed by `now`, each with its time.
    fn lines(&self, now: DateTime<Utc>) -> Vec<String> {
        let end = self.finished.map_or(now, |f| f.min(now));
        let elapsed = (end - self.started).to_std().unwrap_or_default();
        self.output.until(elapsed)
    }
}

#[derive(Debug, Default)]
struct ContainerLogs {
    current: Option<Instance>,
    previous: Option<Instance>,
}

type Key = (String, String, String);

/// Every container's output on this node host, keyed by (namespace, pod, container).
#[derive(Debug, Default)]
pub struct LogStore {
    containers: Mutex<HashMap<Key, ContainerLogs>>,
}

impl LogStore {
    pub fn started(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        at: DateTime<Utc>,
        output: Output,
    ) {
        let mut map = self.containers.lock();
        let logs = map
            .entry((namespace.into(), pod.into(), container.into()))
            .or_default();
        logs.previous = logs.current.take();
        logs.current = Some(Instance {
            started: at,
            finished: None,
            output,
        });
    }

    pub fn stopped(&self, namespace: &str, pod: &str, container: &str, at: DateTime<Utc>) {
        let mut map = self.containers.lock();
        if let Some(logs) = map.get_mut(&(namespace.into(), pod.into(), container.into())) {
            if let Some(current) = &mut logs.current {
                current.finished.get_or_insert(at);
            }
        }
    }

    /// Forgets a pod's logs (it is gone from the node).
    pub fn remove_pod(&self, namespace: &str, pod: &str) {
        self.containers
            .lock()
            .retain(|(ns, p, _), _| !(ns == namespace && p == pod));
    }

    /// (lines so far, whether the instance has finished); `None` if there is no such instance.
    fn read(
        &self,
        request: &LogRequest,
        now: DateTime<Utc>,
    ) -> Option<(Vec<String>, bool, DateTime<Utc>)> {
        let map = self.containers.lock();
        let logs = map.get(&(
            request.namespace.clone(),
            request.pod.clone(),
            request.container.clone(),
        ))?;
        let instance = if request.previous {
            logs.previous.as_ref()?
        } else {
            logs.current.as_ref()?
        };
        Some((
            instance.lines(now),
            instance.finished.is_some(),
            instance.started,
        ))
    }

    /// The text a (non-follow) request gets.
    pub fn text(&self, request: &LogRequest, now: DateTime<Utc>) -> Option<String> {
        let (lines, _, started) = self.read(request, now)?;
        Some(render(request, &lines, 0, started))
    }
}

fn render(request: &LogRequest, lines: &[String], from: usize, started: DateTime<Utc>) -> String {
    let mut skip = from;
    if from == 0 {
        if let Some(tail) = request.tail_lines {
            skip = lines.len().saturating_sub(tail.max(0) as usize);
        }
    }
    let mut out = String::new();
    for line in &lines[skip.min(lines.len())..] {
        if request.timestamps {
            out.push_str(&rfc3339(started));
            out.push(' ');
        }
        out.push_str(line);
        out.push('\n');
    }
    if let Some(limit) = request.limit_bytes {
        let limit = limit.max(0) as usize;
        if out.len() > limit {
            let mut cut = limit;
            while !out.is_char_boundary(cut) {
                cut -= 1;
            }
            out.truncate(cut);
        }
    }
    out
}

/// The largest log request read: names and a few options.
const LOG_REQUEST_BYTES: usize = 16 * 1024;

/// The QUIC handler of log requests; only API servers are served.
pub struct LogService {
    pub store: Arc<LogStore>,
}

impl Handler for LogService {
    type Request = LogRequest;
    type Response = LogResponse;

    fn admit(&self, peer: &Peer) -> Result<(), String> {
        if peer.organizations.iter().any(|o| o == API_SERVER_ORG) {
            Ok(())
        } else {
            Err(format!("{} may not read container logs", peer.name))
        }
    }

    fn limits(&self) -> FrameLimits {
        FrameLimits {
            max_frame_bytes: LOG_REQUEST_BYTES,
            ..FrameLimits::default()
        }
    }

    async fn handle(&self, _peer: Peer, request: LogRequest, mut call: Call<LogResponse>) {
        let Some((lines, mut finished, started)) = self.store.read(&request, Utc::now()) else {
            // Containers that never printed anything keep no log: an empty answer, as a
            // silent process gives. Only a missing previous instance is an error.
            let answer = if request.previous {
                LogResponse::Error {
                    code: 400,
                    message: format!(
                        "previous terminated container \"{}\" in pod \"{}\" not found",
                        request.container, request.pod
                    ),
                }
            } else {
                LogResponse::Chunk(Bytes::new())
            };
            let _ = call.reply(&answer).await;
            return;
        };
        let first = render(&request, &lines, 0, started);
        if !first.is_empty()
            && call
                .send(&LogResponse::Chunk(Bytes::from(first)))
                .await
                .is_err()
        {
            return;
        }
        let mut sent = lines.len();
        if request.follow {
            let closed = call.closed_signal();
            tokio::pin!(closed);
            while !finished {
                tokio::select! {
                    biased;
                    () = &mut closed => return,
                    () = tokio::time::sleep(FOLLOW_POLL) => {}
                }
                let Some((lines, done, started)) = self.store.read(&request, Utc::now()) else {
                    break;
                };
                finished = done;
                if lines.len() > sent {
                    let chunk = render(&request, &lines, sent, started);
                    sent = lines.len();
                    if call
                        .send(&LogResponse::Chunk(Bytes::from(chunk)))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            }
        }
        if let Err(e) = call.finish().await {
            debug!(error = %e, "log stream ended badly");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::Process;

    #[test]
    fn logs_show_what_was_printed_by_now() {
        let store = LogStore::default();
        let t0 = DateTime::from_timestamp(1_700_000_000, 0).expect("t");
        let p = Process::from_command(
            &[
                "sh".into(),
                "-c".into(),
                "echo a; sleep 2; echo b; echo c".into(),
            ],
            &[],
        );
        store.started("ns", "p", "c", t0, p.output);
        let request = LogRequest {
            namespace: "ns".into(),
            pod: "p".into(),
            container: "c".into(),
            follow: false,
            tail_lines: None,
            previous: false,
            timestamps: false,
            limit_bytes: None,
        };
        let at = |s| t0 + chrono::Duration::seconds(s);
        assert_eq!(store.text(&request, at(1)).as_deref(), Some("a\n"));
        assert_eq!(store.text(&request, at(3)).as_deref(), Some("a\nb\nc\n"));
        let tail = LogRequest {
            tail_lines: Some(1),
            ..request.clone()
        };
        assert_eq!(store.text(&tail, at(3)).as_deref(), Some("c\n"));
        store.stopped("ns", "p", "c", at(1));
        assert_eq!(
            store.text(&request, at(3)).as_deref(),
            Some("a\n"),
            "killed before b"
        );
        store.remove_pod("ns", "p");
        assert_eq!(store.text(&request, at(3)), None);
    }
}
