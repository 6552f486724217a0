//! [`Registry`]: where a process declares its metrics, and what `/metrics` encodes.

use std::borrow::Cow;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use parking_lot::Mutex;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeCounterValue, EncodeGaugeValue, EncodeLabel, EncodeLabelSet,
    EncodeMetric, LabelSetEncoder, MetricEncoder, NoLabelSet,
};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::MetricType;

/// The `Content-Type` of what [`Registry::encode`] writes: Prometheus' text format 0.0.4, as
/// client_golang serves it by default (and so kube-apiserver and etcd).
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// A process's metrics. Cheap to clone; every clone registers into and encodes the same set.
///
/// Registration happens at start-up (it takes a lock); the handles it returns are updated
/// lock-free ([`Counter`], [`Gauge`]) or under a short per-series lock ([`Histogram`]), so a hot
/// path keeps the handle rather than looking it up again.
#[derive(Clone, Default)]
pub struct Registry {
    inner: Arc<Mutex<prometheus_client::registry::Registry>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry").finish_non_exhaustive()
    }
}

/// A counter's name without the `_total` the text format appends to every counter.
fn counter_base(name: &str) -> &str {
    name.strip_suffix("_total").unwrap_or(name)
}

impl Registry {
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Registers any metric prometheus-client knows (a [`Family`] with its own label type, an
    /// `Info`, ...). Counters are named without `_total` here; the encoder adds it.
    pub fn register<M: EncodeMetric + Clone + Send + Sync + std::fmt::Debug + 'static>(
        &self,
        name: &str,
        help: &str,
        metric: M,
    ) -> M {
        self.inner.lock().register(name, help, metric.clone());
        metric
    }

    /// A counter exposed as `name` (which ends in `_total`, as every counter's exposed name).
    pub fn counter(&self, name: &str, help: &str) -> Counter {
        self.register(counter_base(name), help, Counter::default())
    }

    pub fn gauge(&self, name: &str, help: &str) -> Gauge {
        self.register(name, help, Gauge::default())
    }

    /// A histogram over `buckets` (upper bounds in increasing order; `+Inf` is implied).
    pub fn histogram(&self, name: &str, help: &str, buckets: &[f64]) -> Histogram {
        self.register(name, help, Histogram::new(buckets.iter().copied()))
    }

    /// Counters by the values of the labels `names` (in that order in the output).
    pub fn counter_vec<const N: usize>(
        &self,
        name: &str,
        help: &str,
        names: &'static [&'static str; N],
    ) -> MetricVec<Counter, N> {
        let vec = MetricVec::new(names, Constructor(Arc::new([])));
        self.register(counter_base(name), help, vec.family.clone());
        vec
    }

    pub fn gauge_vec<const N: usize>(
        &self,
        name: &str,
        help: &str,
        names: &'static [&'static str; N],
    ) -> MetricVec<Gauge, N> {
        let vec = MetricVec::new(names, Constructor(Arc::new([])));
        self.register(name, help, vec.family.clone());
        vec
    }

    pub fn histogram_vec<const N: usize>(
        &self,
        name: &str,
        help: &str,
        names: &'static [&'static str; N],
        buckets: &[f64],
    ) -> MetricVec<Histogram, N> {
        let vec = MetricVec::new(names, Constructor(buckets.into()));
        self.register(name, help, vec.family.clone());
        vec
    }

    /// A counter whose value lives elsewhere (an atomic another module owns), read when scraped.
    pub fn counter_fn(
        &self,
        name: &str,
        help: &str,
        read: impl Fn() -> u64 + Send + Sync + 'static,
    ) {
        self.register_collector(Observed {
            name: counter_base(name).to_string(),
            help: help.to_string(),
            metric_type: MetricType::Counter,
            label: None,
            read: Box::new(move || vec![(String::new(), read() as f64)]),
        });
    }

    /// A gauge read when scraped.
    pub fn gauge_fn(&self, name: &str, help: &str, read: impl Fn() -> f64 + Send + Sync + 'static) {
        self.register_collector(Observed {
            name: name.to_string(),
            help: help.to_string(),
            metric_type: MetricType::Gauge,
            label: None,
            read: Box::new(move || vec![(String::new(), read())]),
        });
    }

    /// Gauges by one label, read when scraped: `read` returns `(label value, value)` pairs.
    pub fn gauge_vec_fn(
        &self,
        name: &str,
        help: &str,
        label: &'static str,
        read: impl Fn() -> Vec<(String, f64)> + Send + Sync + 'static,
    ) {
        self.register_collector(Observed {
            name: name.to_string(),
            help: help.to_string(),
            metric_type: MetricType::Gauge,
            label: Some(label),
            read: Box::new(read),
        });
    }

    /// Counters by one label, read when scraped (see [`Registry::gauge_vec_fn`]).
    pub fn counter_vec_fn(
        &self,
        name: &str,
        help: &str,
        label: &'static str,
        read: impl Fn() -> Vec<(String, f64)> + Send + Sync + 'static,
    ) {
        self.register_collector(Observed {
            name: counter_base(name).to_string(),
            help: help.to_string(),
            metric_type: MetricType::Counter,
            label: Some(label),
            read: Box::new(read),
        });
    }

    /// Anything that writes its own metric families on each scrape.
    pub fn register_collector(&self, collector: impl Collector) {
        self.inner.lock().register_collector(Box::new(collector));
    }

    /// Every registered metric in the text format ([`CONTENT_TYPE`]).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail; a collector that fails leaves what it wrote.
        if let Err(e) =
            prometheus_client::encoding::prometheus_text::encode(&mut out, &self.inner.lock())
        {
            tracing::warn!(error = %e, "a metric failed to encode");
        }
        out
    }
}

/// The metrics a [`MetricVec`] holds, and how it makes the one of a label set it has not seen.
pub trait VecMetric: Clone + EncodeMetric + Send + Sync + std::fmt::Debug + 'static {
    /// A fresh metric; `buckets` are a histogram's upper bounds.
    fn make(buckets: &[f64]) -> Self;
}

impl VecMetric for Counter {
    fn make(_: &[f64]) -> Counter {
        Counter::default()
    }
}

impl VecMetric for Gauge {
    fn make(_: &[f64]) -> Gauge {
        Gauge::default()
    }
}

impl VecMetric for Histogram {
    fn make(buckets: &[f64]) -> Histogram {
        Histogram::new(buckets.iter().copied())
    }
}

/// A [`VecMetric`]'s constructor for prometheus-client's [`Family`].
#[derive(Clone, Debug)]
pub struct Constructor(Arc<[f64]>);

impl<M: VecMetric> MetricConstructor<M> for Constructor {
    fn new_metric(&self) -> M {
        M::make(&self.0)
    }
}

/// The label values of one series of a [`MetricVec`]; the names are the vector's.
#[derive(Clone, Debug)]
pub struct LabelValues<const N: usize> {
    names: &'static [&'static str; N],
    values: [Cow<'static, str>; N],
}

impl<const N: usize> PartialEq for LabelValues<N> {
    fn eq(&self, other: &Self) -> bool {
        self.values == other.values
    }
}

impl<const N: usize> Eq for LabelValues<N> {}

impl<const N: usize> Hash for LabelValues<N> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.values.hash(state);
    }
}

impl<const N: usize> EncodeLabelSet for LabelValues<N> {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        for (name, value) in self.names.iter().zip(&self.values) {
            (*name, value.as_ref()).encode(encoder.encode_label())?;
        }
        Ok(())
    }
}

/// Metrics of one name by the values of fixed labels, as client_golang's `CounterVec` and
/// friends: [`MetricVec::with`] finds (or makes) the series of some values. Cheap to clone.
#[derive(Clone, Debug)]
pub struct MetricVec<M, const N: usize> {
    names: &'static [&'static str; N],
    family: Family<LabelValues<N>, M, Constructor>,
}

impl<M: VecMetric, const N: usize> MetricVec<M, N> {
    fn new(names: &'static [&'static str; N], constructor: Constructor) -> MetricVec<M, N> {
        MetricVec {
            names,
            family: Family::new_with_constructor(constructor),
        }
    }

    /// The series of these label values (in the order of the names given at registration).
    /// Values known at compile time (`&'static str`) cost no allocation.
    pub fn with(&self, values: [Cow<'static, str>; N]) -> M {
        self.family.get_or_create_owned(&LabelValues {
            names: self.names,
            values,
        })
    }
}

/// A metric family whose values are read on each scrape.
struct Observed {
    name: String,
    help: String,
    metric_type: MetricType,
    label: Option<&'static str>,
    #[allow(clippy::type_complexity)]
    read: Box<dyn Fn() -> Vec<(String, f64)> + Send + Sync>,
}

impl std::fmt::Debug for Observed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observed")
            .field("name", &self.name)
            .finish()
    }
}

impl Collector for Observed {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let values = (self.read)();
        let mut metric =
            encoder.encode_descriptor(&self.name, &self.help, None, self.metric_type)?;
        for (label_value, value) in values {
            let write = |m: &mut MetricEncoder| -> Result<(), std::fmt::Error> {
                match self.metric_type {
                    MetricType::Counter => {
                        m.encode_counter::<NoLabelSet, _, f64>(&Number(value), None)
                    }
                    _ => m.encode_gauge(&Number(value)),
                }
            };
            match self.label {
                Some(label) => {
                    let labels = [(label, label_value.as_str())];
                    write(&mut metric.encode_family(&labels)?)?;
                }
                None => write(&mut metric)?,
            }
        }
        Ok(())
    }
}

/// A value read elsewhere, written as an integer when it is one (as client_golang writes
/// `1`, not `1.0`).
struct Number(f64);

impl Number {
    fn integer(&self) -> Option<i64> {
        (self.0.fract() == 0.0 && self.0.abs() < 9.0e15).then_some(self.0 as i64)
    }
}

impl EncodeCounterValue for Number {
    fn encode(
        &self,
        encoder: &mut prometheus_client::encoding::CounterValueEncoder,
    ) -> Result<(), std::fmt::Error> {
        match self.integer() {
            Some(n) if n >= 0 => EncodeCounterValue::encode(&(n as u64), encoder),
            _ => EncodeCounterValue::encode(&self.0, encoder),
        }
    }
}

impl EncodeGaugeValue for Number {
    fn encode(
        &self,
        encoder: &mut prometheus_client::encoding::GaugeValueEncoder,
    ) -> Result<(), std::fmt::Error> {
        match self.integer() {
            Some(n) => EncodeGaugeValue::encode(&n, encoder),
            None => EncodeGaugeValue::encode(&self.0, encoder),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_keep_their_label_order_and_counters_their_total() {
        let registry = Registry::new();
        let requests = registry.counter_vec(
            "apiserver_request_total",
            "Requests by verb, resource and code.",
            &["verb", "resource", "code"],
        );
        requests
            .with(["POST".into(), "pods".to_string().into(), "201".into()])
            .inc();
        requests
            .with(["POST".into(), "pods".to_string().into(), "201".into()])
            .inc();
        let text = registry.encode();
        assert!(
            text.contains("# TYPE apiserver_request_total counter\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "apiserver_request_total{verb=\"POST\",resource=\"pods\",code=\"201\"} 2\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn histograms_write_bounds_as_client_golang() {
        let registry = Registry::new();
        let durations = registry.histogram_vec(
            "etcd_request_duration_seconds",
            "Store latency.",
            &["operation", "type"],
            &[0.005, 0.8, 1.0, 60.0],
        );
        let h = durations.with(["create".into(), "pods".into()]);
        h.observe(0.02);
        h.observe(0.7);
        let text = registry.encode();
        for line in [
            "# TYPE etcd_request_duration_seconds histogram\n",
            "etcd_request_duration_seconds_bucket{operation=\"create\",type=\"pods\",le=\"0.005\"} 0\n",
            "etcd_request_duration_seconds_bucket{operation=\"create\",type=\"pods\",le=\"0.8\"} 2\n",
            "etcd_request_duration_seconds_bucket{operation=\"create\",type=\"pods\",le=\"1\"} 2\n",
            "etcd_request_duration_seconds_bucket{operation=\"create\",type=\"pods\",le=\"+Inf\"} 2\n",
            "etcd_request_duration_seconds_count{operation=\"create\",type=\"pods\"} 2\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        // A family with no series yet writes nothing, not even its HELP.
        let empty = Registry::new();
        empty.histogram_vec("x_seconds", "X.", &["a"], &[1.0]);
        assert_eq!(empty.encode(), "");
    }

    #[test]
    fn values_read_when_scraped() {
        let registry = Registry::new();
        let stored = Arc::new(std::sync::atomic::AtomicU64::new(3));
        let read = stored.clone();
        registry.counter_fn("kemu_events_created_total", "Events created.", move || {
            read.load(std::sync::atomic::Ordering::Relaxed)
        });
        registry.gauge_fn("etcd_server_has_leader", "Leader known.", || 1.0);
        registry.gauge_fn("ratio", "A fraction.", || 0.25);
        registry.gauge_vec_fn(
            "apiserver_registered_watchers",
            "Watchers by resource.",
            "resource",
            || vec![("pods".into(), 2.0), ("nodes".into(), 0.0)],
        );
        stored.store(5, std::sync::atomic::Ordering::Relaxed);
        let text = registry.encode();
        for line in [
            "# TYPE kemu_events_created_total counter\nkemu_events_created_total 5\n",
            "# TYPE etcd_server_has_leader gauge\netcd_server_has_leader 1\n",
            "ratio 0.25\n",
            "apiserver_registered_watchers{resource=\"pods\"} 2\n",
            "apiserver_registered_watchers{resource=\"nodes\"} 0\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
    }

    #[test]
    fn plain_metrics_and_clones_share_one_registry() {
        let registry = Registry::new();
        let clone = registry.clone();
        let c = clone.counter("kemu_x_total", "X.");
        let g = registry.gauge("kemu_y", "Y.");
        let h = registry.histogram("kemu_z_seconds", "Z.", &[0.5]);
        c.inc_by(4);
        g.set(-2);
        h.observe(0.1);
        let text = registry.encode();
        assert!(text.contains("kemu_x_total 4\n"), "{text}");
        assert!(text.contains("kemu_y -2\n"), "{text}");
        assert!(
            text.contains("kemu_z_seconds_bucket{le=\"0.5\"} 1\n"),
            "{text}"
        );
        assert!(text.contains("kemu_z_seconds_sum 0.1\n"), "{text}");
    }
}
