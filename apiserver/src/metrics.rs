//! The API server's Prometheus metrics (kube-apiserver's names), registered in the process's
//! [`telemetry::Registry`] and served on `/metrics` of its HTTPS front.

use std::borrow::Cow;
use std::time::Duration;

use telemetry::{Counter, Histogram, MetricVec, Registry};

/// Upper bounds (seconds) of the request duration histogram, as kube-apiserver's.
const BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0,
    8.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
];

/// Store request latency by operation and resource, as kube-apiserver's
/// `etcd_request_duration_seconds{operation,type}`: the time from the call to the store client
/// to its answer, batching and raft commit included.
#[derive(Clone, Debug)]
pub struct StoreMetrics {
    registry: Registry,
    durations: MetricVec<Histogram, 2>,
}

impl Default for StoreMetrics {
    /// Metrics in a registry of their own.
    fn default() -> StoreMetrics {
        StoreMetrics::new(&Registry::new())
    }
}

impl StoreMetrics {
    pub fn new(registry: &Registry) -> StoreMetrics {
        StoreMetrics {
            registry: registry.clone(),
            durations: registry.histogram_vec(
                "etcd_request_duration_seconds",
                "Store request latency in seconds for each operation and object type.",
                &["operation", "type"],
                BUCKETS,
            ),
        }
    }

    /// Records one call on `key` (`/registry/<resource>/...`; a prefix for lists).
    pub fn observe(&self, operation: &'static str, key: &str, took: Duration) {
        let resource = key
            .strip_prefix("/registry/")
            .and_then(|rest| rest.split('/').next())
            .unwrap_or("");
        self.durations
            .with([operation.into(), resource.to_string().into()])
            .observe(took.as_secs_f64());
    }

    /// The text exposition of the registry these metrics are in.
    pub fn render(&self, out: &mut String) {
        out.push_str(&self.registry.encode());
    }
}

/// What a request's latency is labelled with, as kube-apiserver labels
/// `apiserver_request_duration_seconds`.
#[derive(Clone, Copy, Debug)]
pub struct RequestKind<'a> {
    pub verb: &'a str,
    /// The resource's plural (empty for a non-resource request).
    pub resource: &'a str,
    pub subresource: &'a str,
    /// `resource` (one named object, or a create), `namespace` (a collection in a namespace),
    /// `cluster` (a collection across namespaces, or of a cluster-scoped kind); empty for a
    /// non-resource request.
    pub scope: &'a str,
}

/// Request counters and latency histograms by verb, resource and code.
#[derive(Clone, Debug)]
pub struct Metrics {
    registry: Registry,
    requests: MetricVec<Counter, 3>,
    durations: MetricVec<Histogram, 4>,
}

impl Default for Metrics {
    /// Metrics in a registry of their own.
    fn default() -> Metrics {
        Metrics::new(&Registry::new())
    }
}

/// The response code as a label value; the common ones without an allocation.
fn code_label(code: u16) -> Cow<'static, str> {
    match code {
        200 => "200".into(),
        201 => "201".into(),
        404 => "404".into(),
        409 => "409".into(),
        422 => "422".into(),
        other => other.to_string().into(),
    }
}

/// The request's verb as a label value; kube-apiserver's verbs without an allocation.
fn verb_label(verb: &str) -> Cow<'static, str> {
    const VERBS: [&str; 9] = [
        "GET",
        "LIST",
        "WATCH",
        "POST",
        "PUT",
        "PATCH",
        "DELETE",
        "DELETECOLLECTION",
        "APPLY",
    ];
    match VERBS.iter().find(|v| **v == verb) {
        Some(v) => Cow::Borrowed(v),
        None => verb.to_string().into(),
    }
}

impl Metrics {
    pub fn new(registry: &Registry) -> Metrics {
        Metrics {
            registry: registry.clone(),
            requests: registry.counter_vec(
                "apiserver_request_total",
                "Counter of apiserver requests broken out for each verb, resource and HTTP response code.",
                &["verb", "resource", "code"],
            ),
            durations: registry.histogram_vec(
                "apiserver_request_duration_seconds",
                "Response latency distribution in seconds for each verb, resource, subresource and scope.",
                &["verb", "resource", "subresource", "scope"],
                BUCKETS,
            ),
        }
    }

    pub fn observe(&self, request: RequestKind<'_>, code: u16, took: Duration) {
        let verb = verb_label(request.verb);
        let resource: Cow<'static, str> = request.resource.to_string().into();
        // The counter keeps the subresource in its resource label.
        let counted: Cow<'static, str> = match request.subresource {
            "" => resource.clone(),
            sub => format!("{resource}/{sub}").into(),
        };
        self.requests
            .with([verb.clone(), counted, code_label(code)])
            .inc();
        self.durations
            .with([
                verb,
                resource,
                request.subresource.to_string().into(),
                request.scope.to_string().into(),
            ])
            .observe(took.as_secs_f64());
    }

    /// The text exposition of the registry these metrics are in.
    pub fn render(&self) -> String {
        self.registry.encode()
    }
}

/// Registers the watch caches' gauges, read when scraped: `read` gives each resource's
/// `(storage name, registered watchers, stored objects)`.
pub fn register_cache_gauges(
    registry: &Registry,
    read: impl Fn() -> Vec<(String, usize, usize)> + Send + Sync + Clone + 'static,
) {
    let watchers = read.clone();
    registry.gauge_vec_fn(
        "apiserver_registered_watchers",
        "Number of currently registered watchers for a given resource.",
        "resource",
        move || {
            watchers()
                .into_iter()
                .map(|(resource, n, _)| (resource, n as f64))
                .collect()
        },
    );
    registry.gauge_vec_fn(
        "apiserver_storage_objects",
        "Number of stored objects per resource.",
        "resource",
        move || {
            read()
                .into_iter()
                .map(|(resource, _, n)| (resource, n as f64))
                .collect()
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_histograms() {
        let m = Metrics::default();
        let create = RequestKind {
            verb: "POST",
            resource: "pods",
            subresource: "",
            scope: "resource",
        };
        m.observe(create, 201, Duration::from_millis(3));
        m.observe(create, 201, Duration::from_millis(300));
        let bind = RequestKind {
            subresource: "binding",
            ..create
        };
        m.observe(bind, 201, Duration::from_millis(3));
        let list = RequestKind {
            verb: "LIST",
            scope: "namespace",
            ..create
        };
        m.observe(list, 200, Duration::from_millis(3));
        register_cache_gauges(&m.registry, || vec![("pods".into(), 2, 0)]);
        let text = m.render();
        assert!(text
            .contains("apiserver_request_total{verb=\"POST\",resource=\"pods\",code=\"201\"} 2"));
        assert!(text.contains(
            "apiserver_request_total{verb=\"POST\",resource=\"pods/binding\",code=\"201\"} 1"
        ));
        assert!(text.contains("apiserver_request_duration_seconds_bucket{verb=\"POST\",resource=\"pods\",subresource=\"\",scope=\"resource\",le=\"0.005\"} 1"));
        assert!(text.contains(
            "apiserver_request_duration_seconds_count{verb=\"POST\",resource=\"pods\",subresource=\"\",scope=\"resource\"} 2"
        ));
        assert!(text.contains(
            "apiserver_request_duration_seconds_count{verb=\"POST\",resource=\"pods\",subresource=\"binding\",scope=\"resource\"} 1"
        ));
        assert!(text.contains(
            "apiserver_request_duration_seconds_count{verb=\"LIST\",resource=\"pods\",subresource=\"\",scope=\"namespace\"} 1"
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
