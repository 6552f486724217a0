//! Prometheus metrics of the API server, rendered in the text exposition format.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::Duration;

use parking_lot::Mutex;

/// Upper bounds (seconds) of the request duration histogram, as kube-apiserver's.
const BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0,
    8.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
];

#[derive(Default)]
struct Histogram {
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

/// Request counters and latency histograms by verb, resource and code.
#[derive(Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(String, String, u16), u64>>,
    durations: Mutex<BTreeMap<(String, String), Histogram>>,
}

impl Metrics {
    pub fn observe(&self, verb: &str, resource: &str, code: u16, took: Duration) {
        *self
            .requests
            .lock()
            .entry((verb.to_string(), resource.to_string(), code))
            .or_default() += 1;
        let seconds = took.as_secs_f64();
        let mut durations = self.durations.lock();
        let h = durations
            .entry((verb.to_string(), resource.to_string()))
            .or_default();
        if h.counts.is_empty() {
            h.counts = vec![0; BUCKETS.len()];
        }
        for (i, bound) in BUCKETS.iter().enumerate() {
            if seconds <= *bound {
                h.counts[i] += 1;
            }
        }
        h.sum += seconds;
        h.count += 1;
    }

    /// The text exposition, with `watchers` as the registered-watchers gauge per resource.
    pub fn render(&self, watchers: &[(String, usize)], objects: &[(String, usize)]) -> String {
        let mut out = String::new();
        out.push_str("# HELP apiserver_request_total Counter of apiserver requests broken out for each verb, resource and HTTP response code.\n");
        out.push_str("# TYPE apiserver_request_total counter\n");
        for ((verb, resource, code), n) in self.requests.lock().iter() {
            let _ = writeln!(out, "apiserver_request_total{{verb=\"{verb}\",resource=\"{resource}\",code=\"{code}\"}} {n}");
        }
        out.push_str("# HELP apiserver_request_duration_seconds Response latency distribution in seconds for each verb and resource.\n");
        out.push_str("# TYPE apiserver_request_duration_seconds histogram\n");
        for ((verb, resource), h) in self.durations.lock().iter() {
            for (i, bound) in BUCKETS.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "apiserver_request_duration_seconds_bucket{{verb=\"{verb}\",resource=\"{resource}\",le=\"{bound}\"}} {}",
                    h.counts[i]
                );
            }
            let _ = writeln!(out, "apiserver_request_duration_seconds_bucket{{verb=\"{verb}\",resource=\"{resource}\",le=\"+Inf\"}} {}", h.count);
            let _ = writeln!(out, "apiserver_request_duration_seconds_sum{{verb=\"{verb}\",resource=\"{resource}\"}} {}", h.sum);
            let _ = writeln!(out, "apiserver_request_duration_seconds_count{{verb=\"{verb}\",resource=\"{resource}\"}} {}", h.count);
        }
        out.push_str("# HELP apiserver_registered_watchers Number of currently registered watchers for a given resource.\n");
        out.push_str("# TYPE apiserver_registered_watchers gauge\n");
        for (resource, n) in watchers {
            let _ = writeln!(
                out,
                "apiserver_registered_watchers{{resource=\"{resource}\"}} {n}"
            );
        }
        out.push_str("# HELP apiserver_storage_objects Number of stored objects per resource.\n");
        out.push_str("# TYPE apiserver_storage_objects gauge\n");
        for (resource, n) in objects {
            let _ = writeln!(
                out,
                "apiserver_storage_objects{{resource=\"{resource}\"}} {n}"
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_histograms() {
        let m = Metrics::default();
        m.observe("POST", "pods", 201, Duration::from_millis(3));
        m.observe("POST", "pods", 201, Duration::from_millis(300));
        let text = m.render(&[("pods".into(), 2)], &[]);
        assert!(text
            .contains("apiserver_request_total{verb=\"POST\",resource=\"pods\",code=\"201\"} 2"));
        assert!(text.contains("apiserver_request_duration_seconds_bucket{verb=\"POST\",resource=\"pods\",le=\"0.005\"} 1"));
        assert!(text.contains(
            "apiserver_request_duration_seconds_count{verb=\"POST\",resource=\"pods\"} 2"
        ));
        assert!(text.contains("apiserver_registered_watchers{resource=\"pods\"} 2"));
    }
}
