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

/// Store request latency by operation and resource, as kube-apiserver's
/// `etcd_request_duration_seconds{operation,type}`: the time from the call to the store client
/// to its answer, batching and raft commit included.
#[derive(Default)]
pub struct StoreMetrics {
    /// operation → resource → histogram (looked up by `&str`: no allocation per call).
    durations: Mutex<BTreeMap<&'static str, BTreeMap<String, Histogram>>>,
}

impl StoreMetrics {
    /// Records one call on `key` (`/registry/<resource>/...`; a prefix for lists).
    pub fn observe(&self, operation: &'static str, key: &str, took: Duration) {
        let resource = key
            .strip_prefix("/registry/")
            .and_then(|rest| rest.split('/').next())
            .unwrap_or("");
        let mut durations = self.durations.lock();
        let by_resource = durations.entry(operation).or_default();
        match by_resource.get_mut(resource) {
            Some(h) => h.observe(took),
            None => by_resource
                .entry(resource.to_string())
                .or_default()
                .observe(took),
        }
    }

    pub fn render(&self, out: &mut String) {
        out.push_str("# HELP etcd_request_duration_seconds Store request latency in seconds for each operation and object type.\n");
        out.push_str("# TYPE etcd_request_duration_seconds histogram\n");
        let durations = self.durations.lock();
        let series = durations.iter().flat_map(|(operation, by)| {
            by.iter().map(move |(resource, h)| (operation, resource, h))
        });
        for (operation, resource, h) in series {
            h.render(
                out,
                "etcd_request_duration_seconds",
                &format!("operation=\"{operation}\",type=\"{resource}\""),
            );
        }
    }
}

impl Histogram {
    fn observe(&mut self, took: Duration) {
        let seconds = took.as_secs_f64();
        if self.counts.is_empty() {
            self.counts = vec![0; BUCKETS.len()];
        }
        for (i, bound) in BUCKETS.iter().enumerate() {
            if seconds <= *bound {
                self.counts[i] += 1;
            }
        }
        self.sum += seconds;
        self.count += 1;
    }

    /// The buckets, sum and count of `name` with `labels` (without braces).
    fn render(&self, out: &mut String, name: &str, labels: &str) {
        for (i, bound) in BUCKETS.iter().enumerate() {
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels},le=\"{bound}\"}} {}",
                self.counts[i]
            );
        }
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", self.sum);
        let _ = writeln!(out, "{name}_count{{{labels}}} {}", self.count);
    }
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
        self.durations
            .lock()
            .entry((verb.to_string(), resource.to_string()))
            .or_default()
            .observe(took);
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
            h.render(
                &mut out,
                "apiserver_request_duration_seconds",
                &format!("verb=\"{verb}\",resource=\"{resource}\""),
            );
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

    #[test]
    fn store_requests_are_labelled_by_operation_and_resource() {
        let m = StoreMetrics::default();
        m.observe("create", "/registry/pods/ns/p1", Duration::from_millis(20));
        m.observe("create", "/registry/pods/ns/p2", Duration::from_millis(700));
        m.observe("list", "/registry/nodes/", Duration::from_millis(2));
        let mut text = String::new();
        m.render(&mut text);
        assert!(text.contains(
            "etcd_request_duration_seconds_bucket{operation=\"create\",type=\"pods\",le=\"0.025\"} 1"
        ));
        assert!(text.contains(
            "etcd_request_duration_seconds_bucket{operation=\"create\",type=\"pods\",le=\"0.8\"} 2"
        ));
        assert!(text
            .contains("etcd_request_duration_seconds_count{operation=\"list\",type=\"nodes\"} 1"));
    }
}
