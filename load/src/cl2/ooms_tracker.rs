//! clusterloader2's ClusterOOMsTracker: from `start` to `gather`, a watch of the cluster's
//! events with reason `OOMKilling` (the kernel OOM kills node-problem-detector reports, the
//! node as the involved object), the events that were already there included. At `gather`
//! each OOM is `past` (before `start`), `ignored` (its process is in
//! `clusterOOMsIgnoredProcesses`, a comma-separated list) or one of the `failures`, which fail
//! the measurement. Its `ClusterOOMsTracker` summary is `{"failures": […], "ignored": […],
//! "past": […]}`, each OOM `{"node", "process", "memory", "pid", "time"}`. Without
//! `clusterOOMsTrackerEnabled` it does nothing, as in clusterloader2.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use parking_lot::Mutex;
use serde::Serialize;
use serde_json::{json, Value as Json};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::measurements::{
    param_str, switched_on, MeasurementResult, Measurements, Params, Running,
};
use super::objects::{Resource, Seen, Selectors};

/// How long `start` waits for the event watch's first list (clusterloader2's informer sync).
const SYNC_LIMIT: Duration = Duration::from_secs(60);

/// One OOM kill.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OomEvent {
    pub node: String,
    pub process: String,
    pub memory: String,
    pub pid: String,
    /// RFC 3339 with the nanoseconds Go writes (trailing zeros dropped).
    #[serde(serialize_with = "go_time")]
    pub time: DateTime<Utc>,
}

fn go_time<S: serde::Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    let mut text = t.format("%Y-%m-%dT%H:%M:%S").to_string();
    let nanos = t.timestamp_subsec_nanos();
    if nanos > 0 {
        let fraction = format!("{nanos:09}");
        text.push('.');
        text.push_str(fraction.trim_end_matches('0'));
    }
    text.push('Z');
    s.serialize_str(&text)
}

/// The process, pid and memory of the kernel's `Killed process PID (NAME) total-vm:NkB,
/// anon-rss:NkB, file-rss:NkB…` line; `None` for any other message.
pub fn parse_kill(message: &str) -> Option<(String, String, String)> {
    let rest = &message[message.find("Killed process ")? + "Killed process ".len()..];
    let (pid, rest) = rest.split_once(" (")?;
    if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // The name runs to the last ") total-vm:" (a name may hold parentheses).
    let close = rest.rfind(") total-vm:")?;
    let process = &rest[..close];
    let rest = &rest[close + ") total-vm:".len()..];
    let (memory, rest) = rest.split_once(", anon-rss:")?;
    let kilobytes = |s: &str| {
        s.strip_suffix("kB")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    let (anon, rest) = rest.split_once(", file-rss:")?;
    let file = rest.split(|c: char| !c.is_ascii_alphanumeric()).next()?;
    if process.is_empty() || !kilobytes(memory) || !kilobytes(anon) || !kilobytes(file) {
        return None;
    }
    Some((process.to_string(), pid.to_string(), memory.to_string()))
}

/// The OOM of an `OOMKilling` event: its node, and its time (`eventTime`, else
/// `firstTimestamp`). A message not in the kernel's words leaves process, pid and memory empty.
pub fn oom_of(event: &Json) -> OomEvent {
    let stamp = |k: &str| {
        event[k]
            .as_str()
            .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
            .map(|t| t.with_timezone(&Utc))
    };
    let (process, pid, memory) =
        parse_kill(event["message"].as_str().unwrap_or("")).unwrap_or_default();
    OomEvent {
        node: event["involvedObject"]["name"]
            .as_str()
            .unwrap_or("")
            .to_string(),
        process,
        memory,
        pid,
        time: stamp("eventTime")
            .or_else(|| stamp("firstTimestamp"))
            .unwrap_or_default(),
    }
}

/// `ooms` sorted into `past` (before `start`), `ignored` and `failures`.
pub fn classify(
    ooms: impl IntoIterator<Item = OomEvent>,
    start: DateTime<Utc>,
    ignored: &[&str],
) -> BTreeMap<&'static str, Vec<OomEvent>> {
    let mut out: BTreeMap<&'static str, Vec<OomEvent>> = ["failures", "ignored", "past"]
        .into_iter()
        .map(|k| (k, Vec::new()))
        .collect();
    for oom in ooms {
        let class = if oom.time < start {
            "past"
        } else if ignored.contains(&oom.process.as_str()) {
            "ignored"
        } else {
            "failures"
        };
        out.entry(class).or_default().push(oom);
    }
    for list in out.values_mut() {
        list.sort_by_key(|o| o.time);
    }
    out
}

/// A ClusterOOMsTracker between its `start` and its `gather`.
pub struct OomsRun {
    start: DateTime<Utc>,
    /// By the event's resourceVersion, as clusterloader2 tells them apart.
    ooms: Arc<Mutex<HashMap<String, OomEvent>>>,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl OomsRun {
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

impl Measurements {
    /// ClusterOOMsTracker's `action`.
    pub(super) async fn cluster_ooms_tracker(
        &self,
        key: (String, String),
        action: &str,
        params: &Params,
        result: &mut MeasurementResult,
    ) -> Result<(), String> {
        if !switched_on(params, "clusterOOMsTrackerEnabled", result) {
            return Ok(());
        }
        match action {
            "start" => {
                if self.running.lock().contains_key(&key) {
                    return Ok(());
                }
                let run = self.start_ooms().await?;
                self.running.lock().insert(key, Running::Ooms(run));
                Ok(())
            }
            "gather" => {
                let Some(Running::Ooms(run)) = self.running.lock().remove(&key) else {
                    return Err("measurement ClusterOOMsTracker has not been started".into());
                };
                let start = run.start;
                let ooms: Vec<OomEvent> = run.ooms.lock().values().cloned().collect();
                run.stop().await;
                let names = param_str(params, "clusterOOMsIgnoredProcesses").unwrap_or_default();
                let ignored: Vec<&str> = if names.is_empty() {
                    Vec::new()
                } else {
                    names.split(',').collect()
                };
                let classes = classify(ooms, start, &ignored);
                let count = |k: &str| classes.get(k).map_or(0, Vec::len);
                result.details = json!({
                    "failures": count("failures"),
                    "ignored": count("ignored"),
                    "past": count("past"),
                });
                let failures: Vec<String> = classes["failures"]
                    .iter()
                    .map(|o| {
                        format!(
                            "{{Node:{} Process:{} ProcessMemory:{} ProcessID:{} Time:{}}}",
                            o.node, o.process, o.memory, o.pid, o.time
                        )
                    })
                    .collect();
                result
                    .summaries
                    .push(("ClusterOOMsTracker".into(), json!(classes)));
                if !failures.is_empty() {
                    return Err(format!("OOMs recorded: [{}]", failures.join(" ")));
                }
                Ok(())
            }
            other => Err(format!("unknown action {other:?}")),
        }
    }

    /// Starts the `OOMKilling` event watch; returns once its first list is in.
    async fn start_ooms(&self) -> Result<OomsRun, String> {
        let start = Utc::now();
        let ooms: Arc<Mutex<HashMap<String, OomEvent>>> = Arc::default();
        let (stop, stopped) = watch::channel(false);
        let (synced_tx, mut synced) = watch::channel(false);
        let objects = self.objects.clone();
        let sink = ooms.clone();
        let task = tokio::spawn(async move {
            let resource = Resource {
                base: "/api/v1".into(),
                plural: "events".into(),
                namespaced: true,
            };
            let selectors = Selectors {
                labels: "",
                fields: "reason=OOMKilling",
            };
            let record = |event: &Json| {
                if event["reason"] != "OOMKilling" {
                    return;
                }
                let version = event["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or("")
                    .to_string();
                sink.lock().entry(version).or_insert_with(|| oom_of(event));
            };
            objects
                .list_and_watch_selected(&resource, selectors, stopped, |seen| match seen {
                    Seen::Listed(events) => {
                        events.iter().for_each(record);
                        let _ = synced_tx.send(true);
                    }
                    Seen::Applied(event) => record(&event),
                    Seen::Deleted(_) => {}
                })
                .await;
        });
        let waited = tokio::time::timeout(SYNC_LIMIT, synced.wait_for(|s| *s)).await;
        if !matches!(waited, Ok(Ok(_))) {
            let _ = stop.send(true);
            let _ = task.await;
            return Err(format!(
                "the OOMKilling event watch did not list within {}s",
                SYNC_LIMIT.as_secs()
            ));
        }
        Ok(OomsRun {
            start,
            ooms,
            stop,
            task,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_kill_lines_are_read_and_others_are_not() {
        assert_eq!(
            parse_kill(
                "Memory cgroup out of memory: Killed process 4242 (stress (worker)) \
                 total-vm:2048kB, anon-rss:1024kB, file-rss:12kB, shmem-rss:0kB, UID:0"
            ),
            Some(("stress (worker)".into(), "4242".into(), "2048kB".into()))
        );
        assert_eq!(
            parse_kill("Killed process 7 (x) total-vm:1kB, anon-rss:0kB, file-rss:0kB"),
            Some(("x".into(), "7".into(), "1kB".into()))
        );
        for other in [
            "System OOM encountered",
            "Killed process abc (x) total-vm:1kB, anon-rss:0kB, file-rss:0kB",
            "Killed process 7 (x) total-vm:1MB, anon-rss:0kB, file-rss:0kB",
            "Killed process 7 () total-vm:1kB, anon-rss:0kB, file-rss:0kB",
        ] {
            assert_eq!(parse_kill(other), None, "{other}");
        }
    }

    #[test]
    fn ooms_are_past_ignored_or_failures() {
        let event = |time: &str, message: &str| {
            json!({"reason": "OOMKilling", "involvedObject": {"kind": "Node", "name": "node-1"},
                   "firstTimestamp": time, "eventTime": null, "message": message})
        };
        let start: DateTime<Utc> = "2026-01-02T03:00:00Z".parse().unwrap();
        let ooms = [
            event(
                "2026-01-02T02:59:59Z",
                "Killed process 1 (a) total-vm:1kB, anon-rss:1kB, file-rss:1kB",
            ),
            event(
                "2026-01-02T03:00:01Z",
                "Killed process 2 (b) total-vm:2kB, anon-rss:1kB, file-rss:1kB",
            ),
            event(
                "2026-01-02T03:00:02Z",
                "Killed process 3 (c) total-vm:3kB, anon-rss:1kB, file-rss:1kB",
            ),
            event("2026-01-02T03:00:03Z", "something else"),
        ]
        .iter()
        .map(oom_of)
        .collect::<Vec<_>>();
        let mut micro = oom_of(&json!({"reason": "OOMKilling",
            "eventTime": "2026-01-02T03:00:04.120000Z", "firstTimestamp": null,
            "involvedObject": {"name": "node-2"},
            "message": "Killed process 9 (c) total-vm:9kB, anon-rss:1kB, file-rss:1kB"}));
        assert_eq!(micro.node, "node-2");
        micro.process = "d".into();
        let classes = classify(ooms.into_iter().chain([micro]), start, &["b"]);
        let summary = json!(classes);
        assert_eq!(
            summary["failures"][0],
            json!({"node": "node-1", "process": "c", "memory": "3kB", "pid": "3",
                   "time": "2026-01-02T03:00:02Z"})
        );
        assert_eq!(summary["failures"][2]["time"], "2026-01-02T03:00:04.12Z");
        assert_eq!(
            summary
                .as_object()
                .map(|m| m.keys().cloned().collect::<Vec<_>>()),
            Some(vec!["failures".into(), "ignored".into(), "past".into()])
        );
        let names =
            |k: &str| -> Vec<String> { classes[k].iter().map(|o| o.process.clone()).collect() };
        assert_eq!(names("past"), ["a"]);
        assert_eq!(names("ignored"), ["b"]);
        // An unrecognised message is kept, with no process.
        assert_eq!(names("failures"), ["c", "", "d"]);
    }
}
