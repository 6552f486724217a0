//! Prometheus' text exposition as clusterloader2 reads it from a component's `/metrics`: the
//! samples, histograms in clusterloader2's shape (`{"labels": {…}, "buckets": {"le": count}}`)
//! and `histogram_quantile`.

use std::collections::BTreeMap;

use serde::Serialize;

/// One sample line: the metric's name, its labels and its value.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// The samples of a text exposition (comments and lines that do not parse are skipped).
pub fn parse(text: &str) -> Vec<Sample> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Sample> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let name_end = line.find(|c: char| c == '{' || c.is_whitespace())?;
    let name = line[..name_end].to_string();
    let mut labels = BTreeMap::new();
    let mut rest = &line[name_end..];
    if let Some(inner) = rest.strip_prefix('{') {
        let mut chars = inner.char_indices();
        let mut key = String::new();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '}' => break i,
                ',' | ' ' => {}
                '=' => {
                    if chars.next()?.1 != '"' {
                        return None;
                    }
                    let mut value = String::new();
                    loop {
                        match chars.next()?.1 {
                            '"' => break,
                            '\\' => match chars.next()?.1 {
                                'n' => value.push('\n'),
                                other => value.push(other),
                            },
                            other => value.push(other),
                        }
                    }
                    labels.insert(std::mem::take(&mut key), value);
                }
                other => key.push(other),
            }
        };
        rest = &inner[end + 1..];
    }
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some(Sample {
        name,
        labels,
        value,
    })
}

/// A histogram as clusterloader2 writes it: its labels (the metric's name under `__name__`,
/// without `le`) and the cumulative count of each bucket by its `le` as exposed.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Histogram {
    pub labels: BTreeMap<String, String>,
    pub buckets: BTreeMap<String, u64>,
}

impl Histogram {
    /// Adds a `_bucket` sample's count to its bucket.
    pub fn add(&mut self, sample: &Sample) {
        if let Some(le) = sample.labels.get("le") {
            *self.buckets.entry(le.clone()).or_default() += sample.value.max(0.0) as u64;
        }
    }

    /// `self - earlier`, bucket by bucket (a counter that went down counts as 0).
    pub fn minus(&self, earlier: &Histogram) -> Histogram {
        Histogram {
            labels: self.labels.clone(),
            buckets: self
                .buckets
                .iter()
                .map(|(le, n)| {
                    let before = earlier.buckets.get(le).copied().unwrap_or(0);
                    (le.clone(), n.saturating_sub(before))
                })
                .collect(),
        }
    }

    /// The buckets as (upper bound, cumulative count), in order.
    pub fn sorted(&self) -> Vec<(f64, f64)> {
        let mut out: Vec<(f64, f64)> = self
            .buckets
            .iter()
            .filter_map(|(le, n)| {
                let bound = match le.as_str() {
                    "+Inf" => f64::INFINITY,
                    le => le.parse().ok()?,
                };
                Some((bound, *n as f64))
            })
            .collect();
        out.sort_by(|a, b| a.0.total_cmp(&b.0));
        out
    }

    /// The `q` quantile in seconds, as Prometheus' `histogram_quantile` computes it; `None`
    /// without observations.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        quantile(q, &self.sorted())
    }
}

/// Adds every `NAME_bucket` sample of `samples` to the histogram in `into` with the same
/// labels (`le` aside), as clusterloader2 sums the same series from several members.
pub fn add_buckets(into: &mut Vec<Histogram>, samples: &[Sample], name: &str) {
    let bucket = format!("{name}_bucket");
    for sample in samples.iter().filter(|s| s.name == bucket) {
        let mut labels = sample.labels.clone();
        labels.remove("le");
        labels.insert("__name__".into(), bucket.clone());
        let at = match into.iter().position(|h| h.labels == labels) {
            Some(i) => i,
            None => {
                into.push(Histogram {
                    labels,
                    buckets: BTreeMap::new(),
                });
                into.len() - 1
            }
        };
        into[at].add(sample);
    }
}

/// Prometheus' `histogram_quantile` over cumulative buckets sorted by upper bound: linear
/// within the bucket the rank falls in; the highest finite bound when it falls in `+Inf`.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_labels_values_and_escapes() {
        let text = "# HELP x y\n# TYPE x histogram\n\
            x_bucket{a=\"1\",b=\"q\\\"uote\",le=\"+Inf\"} 7\n\
            plain 2.5 1700000000\n\
            broken{a=\"1\" 3\n";
        let samples = parse(text);
        assert_eq!(samples.len(), 2, "{samples:?}");
        assert_eq!(samples[0].name, "x_bucket");
        assert_eq!(samples[0].labels["b"], "q\"uote");
        assert_eq!(samples[0].labels["le"], "+Inf");
        assert_eq!(samples[0].value, 7.0);
        assert_eq!(samples[1].name, "plain");
        assert!(samples[1].labels.is_empty());
        assert_eq!(samples[1].value, 2.5);
    }

    #[test]
    fn the_same_series_of_several_members_is_summed() {
        let member = "h_bucket{le=\"0.1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_count 2\n";
        let mut into = Vec::new();
        add_buckets(&mut into, &parse(member), "h");
        add_buckets(&mut into, &parse(member), "h");
        assert_eq!(into.len(), 1);
        assert_eq!(into[0].labels["__name__"], "h_bucket");
        assert_eq!(into[0].buckets["0.1"], 2);
        assert_eq!(into[0].buckets["+Inf"], 4);
        assert_eq!(into[0].quantile(0.25), Some(0.05));
        assert_eq!(
            into[0].quantile(0.99),
            Some(0.1),
            "in +Inf: the highest bound"
        );
        assert_eq!(Histogram::default().quantile(0.5), None);
    }
}
