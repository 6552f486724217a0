//! clusterloader2's API responsiveness from kemu's own `/metrics` instead of Prometheus: the
//! API server's `apiserver_request_duration_seconds` histogram scraped at `start` and at
//! `gather`, its growth in between turned into per (verb, resource) percentiles as
//! `histogram_quantile` computes them, and checked against the API call latency SLO (p99 at
//! most 1 s for single-object calls, 30 s for LIST — kemu's histogram has no scope label, so
//! every LIST is held to the cluster-scope bound).

use std::collections::BTreeMap;

use serde_json::{json, Value as Json};

const HISTOGRAM: &str = "apiserver_request_duration_seconds";

/// Cumulative bucket counts per (verb, resource): upper bound (`inf` last) → count.
pub type Histograms = BTreeMap<(String, String), Vec<(f64, f64)>>;

/// The request-duration histograms in a Prometheus text exposition.
pub fn parse(text: &str) -> Histograms {
    let mut out: Histograms = BTreeMap::new();
    let prefix = format!("{HISTOGRAM}_bucket{{");
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(&prefix) else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let Ok(count) = value.trim().parse::<f64>() else {
            continue;
        };
        let mut verb = String::new();
        let mut resource = String::new();
        let mut le = None;
        for pair in labels.split("\",") {
            let Some((k, v)) = pair.split_once("=\"") else {
                continue;
            };
            let v = v.trim_end_matches('"');
            match k {
                "verb" => verb = v.to_string(),
                "resource" => resource = v.to_string(),
                "le" => {
                    le = if v == "+Inf" {
                        Some(f64::INFINITY)
                    } else {
                        v.parse().ok()
                    }
                }
                _ => {}
            }
        }
        if let Some(le) = le {
            out.entry((verb, resource)).or_default().push((le, count));
        }
    }
    for buckets in out.values_mut() {
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

/// `later - earlier`, bucket by bucket.
pub fn growth(earlier: &Histograms, later: &Histograms) -> Histograms {
    later
        .iter()
        .map(|(key, buckets)| {
            let before = earlier.get(key);
            let grown = buckets
                .iter()
                .map(|&(le, count)| {
                    let old = before
                        .and_then(|b| b.iter().find(|(l, _)| *l == le))
                        .map_or(0.0, |&(_, c)| c);
                    (le, (count - old).max(0.0))
                })
                .collect();
            (key.clone(), grown)
        })
        .collect()
}

/// Prometheus' `histogram_quantile`: linear within the bucket the rank falls in; the highest
/// finite bound when it falls in `+Inf`.
pub fn quantile(q: f64, buckets: &[(f64, f64)]) -> Option<f64> {
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let (mut lower, mut below) = (0.0, 0.0);
    for &(le, count) in buckets {
        if count >= rank {
            if le.is_infinite() {
                return Some(lower);
            }
            if count == below {
                return Some(le);
            }
            return Some(lower + (le - lower) * (rank - below) / (count - below));
        }
        (lower, below) = (le, count);
    }
    Some(lower)
}

/// clusterloader2's summary (`dataItems` with Perc50/90/99 in ms, labelled by Verb, Resource,
/// Subresource, Scope and Count) and the calls over their SLO.
pub fn summarize(grown: &Histograms) -> (Json, Vec<String>) {
    let mut items = Vec::new();
    let mut violations = Vec::new();
    for ((verb, resource), buckets) in grown {
        let count = buckets.last().map_or(0.0, |b| b.1);
        if count <= 0.0 || verb == "WATCH" || verb == "CONNECT" {
            continue;
        }
        let ms = |q| quantile(q, buckets).unwrap_or(0.0) * 1000.0;
        let (p50, p90, p99) = (ms(0.5), ms(0.9), ms(0.99));
        let slo_ms = if verb == "LIST" { 30_000.0 } else { 1_000.0 };
        if p99 > slo_ms {
            violations.push(format!(
                "{verb} {resource}: p99 {p99:.0} ms > {slo_ms:.0} ms"
            ));
        }
        items.push(json!({
            "data": {"Perc50": p50, "Perc90": p90, "Perc99": p99},
            "unit": "ms",
            "labels": {
                "Verb": verb,
                "Resource": resource,
                "Subresource": "",
                "Scope": if verb == "LIST" { "cluster" } else { "resource" },
                "Count": format!("{}", count as u64),
            },
        }));
    }
    (json!({"version": "v1", "dataItems": items}), violations)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = "# HELP x\n\
        apiserver_request_duration_seconds_bucket{verb=\"POST\",resource=\"pods\",le=\"0.1\"} 1\n\
        apiserver_request_duration_seconds_bucket{verb=\"POST\",resource=\"pods\",le=\"1\"} 1\n\
        apiserver_request_duration_seconds_bucket{verb=\"POST\",resource=\"pods\",le=\"+Inf\"} 1\n";
    const AFTER: &str = "apiserver_request_duration_seconds_bucket{verb=\"POST\",resource=\"pods\",le=\"0.1\"} 51\n\
        apiserver_request_duration_seconds_bucket{verb=\"POST\",resource=\"pods\",le=\"1\"} 101\n\
        apiserver_request_duration_seconds_bucket{verb=\"POST\",resource=\"pods\",le=\"+Inf\"} 101\n\
        apiserver_request_duration_seconds_bucket{verb=\"LIST\",resource=\"nodes\",le=\"1\"} 0\n\
        apiserver_request_duration_seconds_bucket{verb=\"LIST\",resource=\"nodes\",le=\"+Inf\"} 0\n\
        apiserver_request_duration_seconds_count{verb=\"POST\",resource=\"pods\"} 101\n";

    #[test]
    fn growth_between_scrapes_gives_the_percentiles() {
        let grown = growth(&parse(BEFORE), &parse(AFTER));
        let buckets = &grown[&("POST".to_string(), "pods".to_string())];
        assert_eq!(
            buckets,
            &vec![(0.1, 50.0), (1.0, 100.0), (f64::INFINITY, 100.0)]
        );
        assert!((quantile(0.5, buckets).unwrap() - 0.1).abs() < 1e-9);
        assert!((quantile(0.99, buckets).unwrap() - 0.982).abs() < 1e-9);
        let (summary, violations) = summarize(&grown);
        assert!(violations.is_empty());
        let items = summary["dataItems"].as_array().unwrap();
        assert_eq!(items.len(), 1, "calls that did not happen are left out");
        assert_eq!(items[0]["labels"]["Count"], "100");
        assert!((items[0]["data"]["Perc90"].as_f64().unwrap() - 820.0).abs() < 1e-6);
    }

    #[test]
    fn a_slow_call_violates_the_slo() {
        let slow = "apiserver_request_duration_seconds_bucket{verb=\"GET\",resource=\"pods\",le=\"1\"} 0\n\
            apiserver_request_duration_seconds_bucket{verb=\"GET\",resource=\"pods\",le=\"5\"} 10\n\
            apiserver_request_duration_seconds_bucket{verb=\"GET\",resource=\"pods\",le=\"+Inf\"} 10\n";
        let (_, violations) = summarize(&growth(&Histograms::new(), &parse(slow)));
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert_eq!(
            quantile(0.5, &[(1.0, 0.0), (f64::INFINITY, 4.0)]),
            Some(1.0)
        );
    }
}
