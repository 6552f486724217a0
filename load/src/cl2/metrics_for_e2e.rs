//! clusterloader2's MetricsForE2E: every metric of the API server (`/metrics` and
//! `/metrics/slis`, through the API as the e2e framework's grabber reads them), the scheduler
//! and the controller manager (their own `/metrics`, where the run knows the cluster's
//! processes; without them, as the grabber without control-plane pods, they stay `null`), in
//! the e2e framework's `Collection` shape: per component a map from each sample's name to its
//! samples, each `{"metric": {"__name__": …, labels}, "value": [unix seconds, "value"]}`.
//!
//! Kubelet metrics (`gatherKubeletsMetrics`, off by default, never for kubemark) are per node in
//! clusterloader2; kemu's node hosts serve one `/metrics` for all their nodes, so asking for
//! them makes the measurement not computed.

use std::collections::BTreeMap;

use cluster::layout::Kind;
use serde_json::{json, Map, Value as Json};

use super::measurements::{param_str, MeasurementResult, Measurements, Params, Verdict};
use super::prometheus::{self, Sample};
use crate::client::ApiClient;

/// Go's `strconv.FormatFloat(v, 'f', -1, 64)`, as Prometheus' `SampleValue` writes a value.
fn go_float(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else if v == v.trunc() && v.abs() < 1e21 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}

/// Samples by name, each as Prometheus' `model.Sample` marshals it, stamped `at` (ms).
pub fn collection(samples: &[Sample], at_ms: i64) -> Json {
    let mut by_name: BTreeMap<&str, Vec<Json>> = BTreeMap::new();
    // model.Time marshals as seconds with the milliseconds as decimals.
    let stamp: Json = serde_json::from_str(&format!(
        "{}.{:03}",
        at_ms.div_euclid(1000),
        at_ms.rem_euclid(1000)
    ))
    .unwrap_or(Json::Null);
    for s in samples {
        let mut metric = Map::new();
        metric.insert("__name__".into(), json!(s.name));
        for (k, v) in &s.labels {
            metric.insert(k.clone(), json!(v));
        }
        by_name
            .entry(&s.name)
            .or_default()
            .push(json!({"metric": metric, "value": [stamp.clone(), go_float(s.value)]}));
    }
    Json::Object(
        by_name
            .into_iter()
            .map(|(k, v)| (k.to_string(), Json::Array(v)))
            .collect(),
    )
}

async fn get_text(client: &ApiClient, path: &str) -> Result<String, String> {
    let response = client
        .call(
            "get",
            "metrics",
            hyper::Method::GET,
            path,
            None,
            Default::default(),
        )
        .await
        .map_err(|e| format!("{path}: {e:#}"))?;
    if !response.status.is_success() {
        return Err(format!("{path} answered {}", response.status));
    }
    Ok(String::from_utf8_lossy(&response.body).into_owned())
}

impl Measurements {
    /// Grabs the components' metrics into one `MetricsForE2E` summary.
    pub(super) async fn metrics_for_e2e(
        &self,
        params: &Params,
        result: &mut MeasurementResult,
    ) -> Result<(), String> {
        let provider = param_str(params, "provider").unwrap_or_default();
        let kubelets = param_str(params, "gatherKubeletsMetrics")
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
            && !provider.eq_ignore_ascii_case("kubemark");
        if kubelets {
            result.verdict = Verdict::NotComputed(
                "gatherKubeletsMetrics: kemu's node hosts serve one /metrics for all their nodes, \
                 not one per node"
                    .into(),
            );
            return Ok(());
        }
        let now = || chrono::Utc::now().timestamp_millis();
        let mut errors = Vec::new();
        let mut grab_api = |text: Result<String, String>| match text {
            Ok(text) => collection(&prometheus::parse(&text), now()),
            Err(e) => {
                errors.push(e);
                Json::Null
            }
        };
        let api_server = grab_api(get_text(&self.objects.client, "/metrics").await);
        let slis = grab_api(get_text(&self.objects.client, "/metrics/slis").await);
        // One scheduler and one controller manager, as the grabber takes one pod of each.
        let component = |kind: Kind| {
            let cluster = self.context.cluster.clone();
            async move {
                let cluster = cluster?;
                let addr = cluster.of_kind(kind).find_map(|c| c.metrics)?;
                Some(cluster.scrape(addr).await)
            }
        };
        let scheduler = component(Kind::Scheduler).await;
        let controller_manager = component(Kind::Controllers).await;
        let mut grabbed = |answer: Option<Result<String, String>>| match answer {
            None => Json::Null,
            Some(Ok(text)) => collection(&prometheus::parse(&text), now()),
            Some(Err(e)) => {
                errors.push(e);
                Json::Null
            }
        };
        let scheduler = grabbed(scheduler);
        let controller_manager = grabbed(controller_manager);
        let count = |v: &Json| v.as_object().map_or(0, Map::len);
        result.details = json!({
            "metric_names": {
                "kube-apiserver": count(&api_server),
                "kube-apiserver /metrics/slis": count(&slis),
                "kube-scheduler": count(&scheduler),
                "kube-controller-manager": count(&controller_manager),
            },
        });
        // The e2e framework's Collection, its fields in their order; kubelets filtered to none.
        let summary = json!({
            "APIServerMetrics": api_server,
            "APIServerMetricsSLIs": slis,
            "ControllerManagerMetrics": controller_manager,
            "SnapshotControllerMetrics": null,
            "KubeletMetrics": {},
            "SchedulerMetrics": scheduler,
            "ClusterAutoscalerMetrics": null,
        });
        result.summaries.push(("MetricsForE2E".into(), summary));
        // As clusterloader2: the summary is written, and a component that did not answer
        // fails the call.
        if errors.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "failed to grab some of the metrics: {}",
                errors.join("; ")
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_grouped_by_name_as_the_e2e_framework_writes_them() {
        let text =
            "# TYPE x counter\nx{a=\"1\"} 3\nx{a=\"2\"} 0.5\ny_bucket{le=\"+Inf\"} 7\nz NaN\n";
        let got = collection(&prometheus::parse(text), 1_700_000_000_123);
        assert_eq!(
            got,
            json!({
                "x": [
                    {"metric": {"__name__": "x", "a": "1"}, "value": [1700000000.123, "3"]},
                    {"metric": {"__name__": "x", "a": "2"}, "value": [1700000000.123, "0.5"]},
                ],
                "y_bucket": [
                    {"metric": {"__name__": "y_bucket", "le": "+Inf"}, "value": [1700000000.123, "7"]},
                ],
                "z": [{"metric": {"__name__": "z"}, "value": [1700000000.123, "NaN"]}],
            })
        );
        assert_eq!(go_float(1e6), "1000000");
        assert_eq!(go_float(f64::INFINITY), "+Inf");
        assert_eq!(go_float(-0.25), "-0.25");
    }
}
