//! clusterloader2's SchedulingMetrics from the schedulers' `/metrics`: the e2e scheduling,
//! scheduling algorithm, preemption evaluation and framework extension point histograms
//! scraped at `start` (or `reset`) and at `gather`, summed over the schedulers (the standbys'
//! are empty), their growth in between turned into Perc50/90/99 as clusterloader2 computes
//! them — `histogram_quantile`, in nanoseconds, left at 0 without observations.

use std::collections::BTreeMap;

use serde_json::{json, Value as Json};

use super::prometheus::{Histogram, Sample};

/// The extension points clusterloader2 reports.
pub const EXTENSION_POINTS: [&str; 11] = [
    "PreFilter",
    "Filter",
    "PostFilter",
    "PreScore",
    "Score",
    "PreBind",
    "Bind",
    "PostBind",
    "Reserve",
    "Unreserve",
    "Permit",
];

const E2E: &str = "scheduler_e2e_scheduling_duration_seconds_bucket";
const ALGORITHM: &str = "scheduler_scheduling_algorithm_duration_seconds_bucket";
const EXTENSION_POINT: &str = "scheduler_framework_extension_point_duration_seconds_bucket";
const PREEMPTION: &str = "scheduler_scheduling_algorithm_preemption_evaluation_seconds_bucket";

/// One scrape: a histogram per summary entry (`e2e`, `algorithm`, `preemption`, and each
/// extension point by name), every label set of a series summed into it.
pub type Scrape = BTreeMap<String, Histogram>;

/// Adds a scheduler's samples to `into`.
pub fn add(into: &mut Scrape, samples: &[Sample]) {
    for sample in samples {
        let key = match sample.name.as_str() {
            E2E => "e2e",
            ALGORITHM => "algorithm",
            PREEMPTION => "preemption",
            EXTENSION_POINT => match sample.labels.get("extension_point") {
                Some(point) if EXTENSION_POINTS.contains(&point.as_str()) => point.as_str(),
                _ => continue,
            },
            _ => continue,
        };
        into.entry(key.to_string()).or_default().add(sample);
    }
}

/// The entries clusterloader2 reads that no scheduler exported.
pub fn missing(scrape: &Scrape) -> Vec<String> {
    ["e2e", "algorithm", "preemption"]
        .into_iter()
        .chain(EXTENSION_POINTS)
        .filter(|k| !scrape.contains_key(*k))
        .map(str::to_string)
        .collect()
}

fn latency(histogram: Option<&Histogram>) -> Json {
    let ns = |q| {
        histogram
            .and_then(|h| h.quantile(q))
            .map_or(0, |s| (s * 1e9) as i64)
    };
    json!({"Perc50": ns(0.5), "Perc90": ns(0.9), "Perc99": ns(0.99)})
}

/// The summary of what grew between `start` and `end`, in clusterloader2's shape.
pub fn summarize(start: &Scrape, end: &Scrape) -> Json {
    let grown: Scrape = end
        .iter()
        .map(|(k, h)| {
            let grown = match start.get(k) {
                Some(before) => h.minus(before),
                None => h.clone(),
            };
            (k.clone(), grown)
        })
        .collect();
    let points: serde_json::Map<String, Json> = EXTENSION_POINTS
        .iter()
        .map(|p| (p.to_string(), latency(grown.get(*p))))
        .collect();
    json!({
        "frameworkExtensionPointDuration": points,
        "preemptionEvaluationLatency": latency(grown.get("preemption")),
        "e2eSchedulingLatency": latency(grown.get("e2e")),
        "schedulingLatency": latency(grown.get("algorithm")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cl2::prometheus::parse;

    #[test]
    fn growth_between_scrapes_in_nanoseconds() {
        let mut start = Scrape::new();
        add(
            &mut start,
            &parse(
                "scheduler_e2e_scheduling_duration_seconds_bucket{le=\"0.001\"} 10\n\
                 scheduler_e2e_scheduling_duration_seconds_bucket{le=\"0.002\"} 10\n\
                 scheduler_e2e_scheduling_duration_seconds_bucket{le=\"+Inf\"} 10\n",
            ),
        );
        let later = "scheduler_e2e_scheduling_duration_seconds_bucket{le=\"0.001\"} 10\n\
             scheduler_e2e_scheduling_duration_seconds_bucket{le=\"0.002\"} 20\n\
             scheduler_e2e_scheduling_duration_seconds_bucket{le=\"+Inf\"} 20\n\
             scheduler_framework_extension_point_duration_seconds_bucket{extension_point=\"Bind\",status=\"Success\",profile=\"default-scheduler\",le=\"0.0004\"} 3\n\
             scheduler_framework_extension_point_duration_seconds_bucket{extension_point=\"Bind\",status=\"Error\",profile=\"default-scheduler\",le=\"0.0004\"} 1\n\
             scheduler_framework_extension_point_duration_seconds_bucket{extension_point=\"Bind\",status=\"Success\",profile=\"default-scheduler\",le=\"+Inf\"} 3\n\
             scheduler_framework_extension_point_duration_seconds_bucket{extension_point=\"Bind\",status=\"Error\",profile=\"default-scheduler\",le=\"+Inf\"} 1\n\
             scheduler_framework_extension_point_duration_seconds_bucket{extension_point=\"Other\",le=\"+Inf\"} 1\n";
        let mut end = Scrape::new();
        add(&mut end, &parse(later));
        assert_eq!(end["Bind"].buckets["+Inf"], 4, "every status summed");
        assert!(!end.contains_key("Other"));
        let summary = summarize(&start, &end);
        let near = |v: &Json, ns: i64| (v.as_i64().unwrap() - ns).abs() <= 1;
        // Ten calls between the scrapes, all in (1 ms, 2 ms]: the median 1.5 ms.
        assert!(near(&summary["e2eSchedulingLatency"]["Perc50"], 1_500_000));
        assert!(near(&summary["e2eSchedulingLatency"]["Perc99"], 1_990_000));
        assert!(near(
            &summary["frameworkExtensionPointDuration"]["Bind"]["Perc50"],
            200_000
        ));
        assert_eq!(
            summary["frameworkExtensionPointDuration"]["Filter"],
            json!({"Perc50": 0, "Perc90": 0, "Perc99": 0})
        );
        assert_eq!(summary["schedulingLatency"]["Perc99"], 0);
        let missing = missing(&end);
        assert!(missing.contains(&"Filter".to_string()));
        assert!(!missing.contains(&"Bind".to_string()));
        assert!(missing.contains(&"algorithm".to_string()));
    }
}
