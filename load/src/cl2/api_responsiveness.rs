//! clusterloader2's API responsiveness from kemu's own `/metrics` instead of Prometheus: every
//! API server's `apiserver_request_duration_seconds` histogram scraped at `start` and at
//! `gather`, the growth in between summed over the API servers and turned into per (verb,
//! resource, subresource, scope) percentiles as `histogram_quantile` computes them, and checked
//! against the API call latency SLO: p99 at most 1 s for calls on one object (scope
//! `resource`), 30 s for collections (`namespace`, `cluster`).

use std::collections::BTreeMap;

use serde_json::{json, Value as Json};

use super::prometheus;

const BUCKET: &str = "apiserver_request_duration_seconds_bucket";

/// What a call is counted under: verb, resource, subresource, scope.
pub type CallKey = (String, String, String, String);

/// Cumulative bucket counts per call kind: upper bound (`inf` last) → count.
pub type Histograms = BTreeMap<CallKey, Vec<(f64, f64)>>;

/// Subresources clusterloader2 leaves out of the SLO (long-running or streamed).
const EXCLUDED_SUBRESOURCES: &[&str] = &["log", "exec", "portforward", "attach", "proxy"];

/// Where [`parse`] keeps the server process's start time (`process_start_time_seconds`), by
/// which [`growth`] tells a restarted server (its counters begun again) from the same one.
fn start_key() -> CallKey {
    (
        String::new(),
        "process_start_time_seconds".into(),
        String::new(),
        String::new(),
    )
}

/// The request-duration histograms in a Prometheus text exposition, and the process's start
/// time under [`start_key`].
pub fn parse(text: &str) -> Histograms {
    let mut out: Histograms = BTreeMap::new();
    for sample in prometheus::parse(text) {
        if sample.name == "process_start_time_seconds" {
            out.insert(start_key(), vec![(f64::INFINITY, sample.value)]);
            continue;
        }
        if sample.name != BUCKET {
            continue;
        }
        let label = |k: &str| sample.labels.get(k).cloned().unwrap_or_default();
        let le = match label("le").as_str() {
            "+Inf" => f64::INFINITY,
            le => match le.parse() {
                Ok(le) => le,
                Err(_) => continue,
            },
        };
        let verb = label("verb");
        // A server without the scope label: single-object calls, and collections as LISTs.
        // (With it, a non-resource request's scope is empty, as kube-apiserver's.)
        let scope = match sample.labels.get("scope") {
            Some(scope) => scope.clone(),
            None if verb == "LIST" => "cluster".to_string(),
            None => "resource".to_string(),
        };
        let key = (verb, label("resource"), label("subresource"), scope);
        out.entry(key).or_default().push((le, sample.value));
    }
    for buckets in out.values_mut() {
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

/// `later - earlier`, bucket by bucket; all of `later` when the server restarted in between
/// (another process start time, or a count that went down), as Prometheus' `increase` takes a
/// counter that began again.
pub fn growth(earlier: &Histograms, later: &Histograms) -> Histograms {
    let start = start_key();
    let total = |b: &[(f64, f64)]| b.last().map_or(0.0, |&(_, c)| c);
    let restarted = earlier.get(&start) != later.get(&start)
        || later.iter().any(|(key, buckets)| {
            earlier
                .get(key)
                .is_some_and(|before| total(buckets) < total(before))
        });
    if restarted {
        let mut all = later.clone();
        all.remove(&start);
        return all;
    }
    later
        .iter()
        .filter(|(key, _)| **key != start)
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

/// Adds `other` into `sum`, bucket by bucket (the API servers of one cluster).
pub fn add(sum: &mut Histograms, other: &Histograms) {
    for (key, buckets) in other {
        let into = sum.entry(key.clone()).or_default();
        for &(le, count) in buckets {
            match into.iter_mut().find(|(l, _)| *l == le) {
                Some(slot) => slot.1 += count,
                None => into.push((le, count)),
            }
        }
        into.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
}

pub use prometheus::quantile;

/// The SLO bound of a call kind, as clusterloader2 sets it: 1 s on one object, 30 s on
/// collections.
fn slo_ms(scope: &str) -> f64 {
    if scope == "resource" {
        1_000.0
    } else {
        30_000.0
    }
}

/// The bucket a fast call falls in, as clusterloader2 counts slow calls: 1 s for single-object
/// calls, 5 s for LISTs in a namespace, 30 s for LISTs across the cluster.
fn fast_bound(verb: &str, scope: &str) -> f64 {
    match (verb, scope) {
        ("LIST", "cluster") => 30.0,
        ("LIST", _) => 5.0,
        _ => 1.0,
    }
}

/// clusterloader2's summary (`dataItems` with Perc50/90/99 in ms, labelled by Verb, Resource,
/// Subresource, Scope, Count and SlowCount, highest p99 first) and the calls over their SLO
/// (none when at most `allowed_slow_calls` were slow, as clusterloader2's `allowedSlowCalls`).
pub fn summarize(grown: &Histograms, allowed_slow_calls: u64) -> (Json, Vec<String>) {
    let mut rows = Vec::new();
    let mut violations = Vec::new();
    for ((verb, resource, subresource, scope), buckets) in grown {
        let count = buckets.last().map_or(0.0, |b| b.1);
        if count <= 0.0
            || verb == "WATCH"
            || verb == "CONNECT"
            || EXCLUDED_SUBRESOURCES.contains(&subresource.as_str())
        {
            continue;
        }
        let ms = |q| quantile(q, buckets).unwrap_or(0.0) * 1000.0;
        let (p50, p90, p99) = (ms(0.5), ms(0.9), ms(0.99));
        let fast = buckets
            .iter()
            .find(|(le, _)| *le == fast_bound(verb, scope))
            .map_or(count, |b| b.1);
        let slow = (count - fast).max(0.0) as u64;
        let limit = slo_ms(scope);
        let tolerated = allowed_slow_calls > 0 && slow <= allowed_slow_calls;
        if p99 > limit && !tolerated {
            let name = match subresource.as_str() {
                "" => resource.clone(),
                sub => format!("{resource}/{sub}"),
            };
            violations.push(format!(
                "{verb} {name} ({scope}): p99 {p99:.0} ms > {limit:.0} ms"
            ));
        }
        rows.push((
            p99,
            json!({
                "data": {"Perc50": p50, "Perc90": p90, "Perc99": p99},
                "unit": "ms",
                "labels": {
                    "Verb": verb,
                    "Resource": resource,
                    "Subresource": subresource,
                    "Scope": scope,
                    "Count": format!("{}", count as u64),
                    "SlowCount": format!("{slow}"),
                },
            }),
        ));
    }
    rows.sort_by(|a, b| b.0.total_cmp(&a.0));
    let items: Vec<Json> = rows.into_iter().map(|(_, item)| item).collect();
    (json!({"version": "v1", "dataItems": items}), violations)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = "# HELP x\n\
        apiserver_request_duration_seconds_bucket{verb=\"POST\",resource=\"pods\",subresource=\"\",scope=\"resource\",le=\"0.1\"} 1\n\
        apiserver_request_duration_seconds_bucket{verb=\"POST\",resource=\"pods\",subresource=\"\",scope=\"resource\",le=\"1\"} 1\n\
        apiserver_request_duration_seconds_bucket{verb=\"POST\",resource=\"pods\",subresource=\"\",scope=\"resource\",le=\"+Inf\"} 1\n";
    const AFTER: &str = "apiserver_request_duration_seconds_bucket{verb=\"POST\",resource=\"pods\",subresource=\"\",scope=\"resource\",le=\"0.1\"} 51\n\
        apiserver_request_duration_seconds_bucket{verb=\"POST\",resource=\"pods\",subresource=\"\",scope=\"resource\",le=\"1\"} 101\n\
        apiserver_request_duration_seconds_bucket{verb=\"POST\",resource=\"pods\",subresource=\"\",scope=\"resource\",le=\"+Inf\"} 101\n\
        apiserver_request_duration_seconds_bucket{verb=\"LIST\",resource=\"nodes\",subresource=\"\",scope=\"cluster\",le=\"1\"} 0\n\
        apiserver_request_duration_seconds_bucket{verb=\"LIST\",resource=\"nodes\",subresource=\"\",scope=\"cluster\",le=\"+Inf\"} 0\n\
        apiserver_request_duration_seconds_count{verb=\"POST\",resource=\"pods\",subresource=\"\",scope=\"resource\"} 101\n";

    fn key(verb: &str, resource: &str, sub: &str, scope: &str) -> CallKey {
        (verb.into(), resource.into(), sub.into(), scope.into())
    }

    #[test]
    fn growth_between_scrapes_gives_the_percentiles() {
        let grown = growth(&parse(BEFORE), &parse(AFTER));
        let buckets = &grown[&key("POST", "pods", "", "resource")];
        assert_eq!(
            buckets,
            &vec![(0.1, 50.0), (1.0, 100.0), (f64::INFINITY, 100.0)]
        );
        assert!((quantile(0.5, buckets).unwrap() - 0.1).abs() < 1e-9);
        assert!((quantile(0.99, buckets).unwrap() - 0.982).abs() < 1e-9);
        let (summary, violations) = summarize(&grown, 0);
        assert!(violations.is_empty());
        let items = summary["dataItems"].as_array().unwrap();
        assert_eq!(items.len(), 1, "calls that did not happen are left out");
        assert_eq!(items[0]["labels"]["Count"], "100");
        assert_eq!(items[0]["labels"]["SlowCount"], "0");
        assert_eq!(items[0]["labels"]["Scope"], "resource");
        assert!((items[0]["data"]["Perc90"].as_f64().unwrap() - 820.0).abs() < 1e-6);
    }

    #[test]
    fn a_restarted_server_counts_from_its_start() {
        let started = |at: u64, text: &str| format!("process_start_time_seconds {at}\n{text}");
        // The same process: the growth, and the start time is no call.
        let grown = growth(&parse(&started(100, BEFORE)), &parse(&started(100, AFTER)));
        assert_eq!(grown[&key("POST", "pods", "", "resource")][2].1, 100.0);
        assert_eq!(
            summarize(&grown, 0).0["dataItems"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
        // Another process since: everything it counted, even where counts went up.
        let grown = growth(&parse(&started(100, BEFORE)), &parse(&started(200, AFTER)));
        assert_eq!(grown.len(), 2, "{grown:?}");
        assert_eq!(grown[&key("POST", "pods", "", "resource")][2].1, 101.0);
        // A count that went down is a restart too (a server without the start time).
        let grown = growth(&parse(AFTER), &parse(BEFORE));
        assert_eq!(grown[&key("POST", "pods", "", "resource")][2].1, 1.0);
    }

    #[test]
    fn a_slow_call_violates_the_slo_of_its_scope() {
        let slow = "apiserver_request_duration_seconds_bucket{verb=\"GET\",resource=\"pods\",subresource=\"\",scope=\"resource\",le=\"1\"} 0\n\
            apiserver_request_duration_seconds_bucket{verb=\"GET\",resource=\"pods\",subresource=\"\",scope=\"resource\",le=\"5\"} 10\n\
            apiserver_request_duration_seconds_bucket{verb=\"GET\",resource=\"pods\",subresource=\"\",scope=\"resource\",le=\"+Inf\"} 10\n\
            apiserver_request_duration_seconds_bucket{verb=\"LIST\",resource=\"pods\",subresource=\"\",scope=\"namespace\",le=\"1\"} 0\n\
            apiserver_request_duration_seconds_bucket{verb=\"LIST\",resource=\"pods\",subresource=\"\",scope=\"namespace\",le=\"5\"} 4\n\
            apiserver_request_duration_seconds_bucket{verb=\"LIST\",resource=\"pods\",subresource=\"\",scope=\"namespace\",le=\"+Inf\"} 10\n\
            apiserver_request_duration_seconds_bucket{verb=\"GET\",resource=\"pods\",subresource=\"log\",scope=\"resource\",le=\"5\"} 0\n\
            apiserver_request_duration_seconds_bucket{verb=\"GET\",resource=\"pods\",subresource=\"log\",scope=\"resource\",le=\"+Inf\"} 3\n";
        let grown = growth(&Histograms::new(), &parse(slow));
        let (summary, violations) = summarize(&grown, 0);
        assert_eq!(
            violations,
            ["GET pods (resource): p99 4960 ms > 1000 ms"],
            "a namespace LIST of 5 s is within its 30 s"
        );
        let items = summary["dataItems"].as_array().unwrap();
        assert_eq!(items.len(), 2, "pods/log is left out: {summary}");
        assert_eq!(
            items[0]["labels"]["Scope"], "namespace",
            "highest p99 first"
        );
        assert_eq!(items[0]["labels"]["SlowCount"], "6", "slower than 5 s");
        assert_eq!(items[1]["labels"]["Scope"], "resource");
        assert_eq!(items[1]["labels"]["SlowCount"], "10");
        let (_, tolerated) = summarize(&grown, 10);
        assert!(
            tolerated.is_empty(),
            "allowedSlowCalls covers the 10 slow GETs"
        );
        assert_eq!(
            quantile(0.5, &[(1.0, 0.0), (f64::INFINITY, 4.0)]),
            Some(1.0)
        );
    }

    #[test]
    fn api_servers_are_summed() {
        let one = parse(AFTER);
        let mut sum = Histograms::new();
        add(&mut sum, &one);
        add(&mut sum, &one);
        assert_eq!(
            sum[&key("POST", "pods", "", "resource")],
            vec![(0.1, 102.0), (1.0, 202.0), (f64::INFINITY, 202.0)]
        );
        let old = "apiserver_request_duration_seconds_bucket{verb=\"LIST\",resource=\"pods\",le=\"+Inf\"} 1\n";
        assert!(
            parse(old).contains_key(&key("LIST", "pods", "", "cluster")),
            "without a scope label a LIST is held to the cluster bound"
        );
        let non_resource = "apiserver_request_duration_seconds_bucket{verb=\"GET\",resource=\"\",subresource=\"\",scope=\"\",le=\"+Inf\"} 1\n";
        assert!(
            parse(non_resource).contains_key(&key("GET", "", "", "")),
            "a non-resource request keeps its empty scope"
        );
    }
}
