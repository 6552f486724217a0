//! The declared usage model: how much CPU and memory an emulated container uses at a moment,
//! from its pod's `kemu.dev/usage` annotations and its requests. Pure: the pod and "now" in,
//! quantities out.
//!
//! - `kemu.dev/usage: cpu=300m,memory=64Mi` sets every container's usage;
//!   `kemu.dev/usage.<container>: …` one container's (it wins over the pod-wide one).
//! - A value is a quantity (`250m`, `128Mi`), a share of the container's request (`150%`), or a
//!   shape over the time since the pod started: `ramp(FROM,TO,DURATION)` goes linearly from
//!   FROM to TO over DURATION and then stays at TO; `step(FROM,TO,AFTER)` is FROM until AFTER,
//!   then TO. FROM and TO are quantities or shares; durations are Go-style (`90s`, `2m`, `1h`).
//! - Not declared: half the container's request, or 1m CPU and 4Mi memory without one.

use chrono::{DateTime, Utc};
use serde_json::Value;

/// The pod-wide annotation; `kemu.dev/usage.<container>` names one container.
pub const ANNOTATION: &str = "kemu.dev/usage";

/// Nano-units per unit (nanocores, nanobytes).
const NANOS: i128 = 1_000_000_000;
/// What an undeclared container uses of its request.
const DEFAULT_SHARE: f64 = 0.5;
/// An undeclared container without a CPU request: 1m.
const FALLBACK_CPU_NANOS: i128 = 1_000_000;
/// An undeclared container without a memory request: 4Mi.
const FALLBACK_MEMORY_NANOS: i128 = 4 * 1024 * 1024 * NANOS;

/// One amount: absolute (in nano-units) or a share of the request.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Amount {
    Nanos(i128),
    OfRequest(f64),
}

/// A declared usage of one resource.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Shape {
    Constant(Amount),
    Ramp {
        from: Amount,
        to: Amount,
        over: f64,
    },
    Step {
        from: Amount,
        to: Amount,
        after: f64,
    },
}

/// A declaration that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{annotation}: {reason}")]
pub struct UsageError {
    pub annotation: String,
    pub reason: String,
}

/// The declared CPU and memory of one container (None: not declared).
#[derive(Debug, Clone, Default, PartialEq)]
struct Declared {
    cpu: Option<Shape>,
    memory: Option<Shape>,
}

/// CPU and memory in nano-units (nanocores, nanobytes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub cpu_nanos: i128,
    pub memory_nanos: i128,
}

impl Usage {
    pub fn add(&mut self, other: Usage) {
        self.cpu_nanos = self.cpu_nanos.saturating_add(other.cpu_nanos);
        self.memory_nanos = self.memory_nanos.saturating_add(other.memory_nanos);
    }

    /// `{"cpu": "<n>n", "memory": "<n>Ki"}`, the units metrics-server writes.
    pub fn to_json(self) -> Value {
        let memory_ki = (self.memory_nanos / NANOS).max(0) / 1024;
        serde_json::json!({
            "cpu": format!("{}n", (self.cpu_nanos.max(0))),
            "memory": format!("{memory_ki}Ki"),
        })
    }

    /// Parses a node's (or any) `kemu.dev/usage` declaration of absolute amounts.
    pub fn declared_by(object: &Value, default: Usage) -> Result<Usage, UsageError> {
        let Some(text) = annotation(object, ANNOTATION) else {
            return Ok(default);
        };
        let declared = parse(ANNOTATION, text)?;
        let at = |shape: Option<Shape>, fallback: i128| {
            shape.map_or(fallback, |s| s.at(0.0, Some(0)).unwrap_or(fallback))
        };
        Ok(Usage {
            cpu_nanos: at(declared.cpu, default.cpu_nanos),
            memory_nanos: at(declared.memory, default.memory_nanos),
        })
    }
}

impl Amount {
    fn nanos(self, request: Option<i128>) -> Option<i128> {
        match self {
            Amount::Nanos(n) => Some(n),
            Amount::OfRequest(share) => request.map(|r| (r as f64 * share).round() as i128),
        }
    }
}

impl Shape {
    /// The amount `elapsed` seconds after the pod started; None when it is a share of a
    /// request the container does not make.
    fn at(self, elapsed: f64, request: Option<i128>) -> Option<i128> {
        match self {
            Shape::Constant(a) => a.nanos(request),
            Shape::Step { from, to, after } => {
                if elapsed < after {
                    from.nanos(request)
                } else {
                    to.nanos(request)
                }
            }
            Shape::Ramp { from, to, over } => {
                let (from, to) = (from.nanos(request)?, to.nanos(request)?);
                let done = if over <= 0.0 {
                    1.0
                } else {
                    (elapsed / over).clamp(0.0, 1.0)
                };
                Some(from + ((to - from) as f64 * done).round() as i128)
            }
        }
    }
}

fn annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

/// Parses `cpu=…,memory=…` (commas inside a shape's parentheses belong to it).
fn parse(name: &str, text: &str) -> Result<Declared, UsageError> {
    let fail = |reason: String| UsageError {
        annotation: name.to_string(),
        reason,
    };
    let mut declared = Declared::default();
    for part in split_top(text) {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        let (resource, value) = part
            .split_once('=')
            .ok_or_else(|| fail(format!("\"{part}\" is not RESOURCE=VALUE")))?;
        let shape = parse_shape(value.trim()).map_err(fail)?;
        match resource.trim() {
            "cpu" => declared.cpu = Some(shape),
            "memory" => declared.memory = Some(shape),
            other => {
                return Err(fail(format!(
                    "unknown resource \"{other}\": cpu and memory are modelled"
                )))
            }
        }
    }
    Ok(declared)
}

fn split_top(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out
}

fn parse_shape(value: &str) -> Result<Shape, String> {
    for (name, is_ramp) in [("ramp(", true), ("step(", false)] {
        let Some(args) = value.strip_prefix(name) else {
            continue;
        };
        let args = args
            .strip_suffix(')')
            .ok_or_else(|| format!("\"{value}\" lacks its closing parenthesis"))?;
        let parts: Vec<&str> = args.split(',').map(str::trim).collect();
        let [from, to, time] = parts[..] else {
            return Err(format!(
                "\"{value}\" needs three arguments: FROM,TO,DURATION"
            ));
        };
        let (from, to, seconds) = (
            parse_amount(from)?,
            parse_amount(to)?,
            parse_duration(time)?,
        );
        return Ok(if is_ramp {
            Shape::Ramp {
                from,
                to,
                over: seconds,
            }
        } else {
            Shape::Step {
                from,
                to,
                after: seconds,
            }
        });
    }
    parse_amount(value).map(Shape::Constant)
}

fn parse_amount(text: &str) -> Result<Amount, String> {
    if let Some(percent) = text.strip_suffix('%') {
        let share: f64 = percent
            .trim()
            .parse()
            .map_err(|_| format!("\"{text}\" is not a percentage"))?;
        if share < 0.0 || !share.is_finite() {
            return Err(format!("\"{text}\" must not be negative"));
        }
        return Ok(Amount::OfRequest(share / 100.0));
    }
    let quantity = api::quantity::parse(text).map_err(|e| e.to_string())?;
    if quantity.is_negative() {
        return Err(format!("\"{text}\" must not be negative"));
    }
    // Milli-precision is what the model offers (and what kubectl top shows).
    Ok(Amount::Nanos(i128::from(quantity.as_milli()) * 1_000_000))
}

/// `90s`, `1.5m`, `2h`, `500ms`, or a sum of them (`1m30s`).
fn parse_duration(text: &str) -> Result<f64, String> {
    let bad = || format!("\"{text}\" is not a duration such as 30s, 2m or 1h");
    let mut total = 0.0;
    let mut rest = text;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let number: f64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        total += number * scale;
        rest = &rest[unit_len..];
    }
    Ok(total)
}

/// A container's request of `resource` in nano-units.
fn request(container: &Value, resource: &str) -> Option<i128> {
    let value = container.pointer(&format!("/resources/requests/{resource}"))?;
    let quantity = api::quantity::Quantity::from_value(value).ok()?;
    Some(i128::from(quantity.as_milli()) * 1_000_000)
}

/// When the pod's usage shapes start: its start time, else its creation.
fn started(pod: &Value) -> Option<DateTime<Utc>> {
    ["/status/startTime", "/metadata/creationTimestamp"]
        .iter()
        .filter_map(|p| pod.pointer(p).and_then(Value::as_str))
        .find_map(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&Utc))
}

/// Each container's usage (name, usage) at `now`; an annotation that does not parse is an
/// error naming it.
pub fn pod_usage(pod: &Value, now: DateTime<Utc>) -> Result<Vec<(String, Usage)>, UsageError> {
    let pod_wide = match annotation(pod, ANNOTATION) {
        Some(text) => parse(ANNOTATION, text)?,
        None => Declared::default(),
    };
    let elapsed = started(pod)
        .map(|s| (now - s).num_milliseconds() as f64 / 1000.0)
        .unwrap_or(0.0)
        .max(0.0);
    let containers = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut out = Vec::with_capacity(containers.len());
    for container in containers {
        let name = container["name"].as_str().unwrap_or_default();
        let key = format!("{ANNOTATION}.{name}");
        let own = match annotation(pod, &key) {
            Some(text) => parse(&key, text)?,
            None => Declared::default(),
        };
        let resolve = |resource: &str, fallback: i128| {
            let request = request(container, resource);
            let shape = match resource {
                "cpu" => own.cpu.or(pod_wide.cpu),
                _ => own.memory.or(pod_wide.memory),
            };
            shape
                .and_then(|s| s.at(elapsed, request))
                .or_else(|| request.map(|r| (r as f64 * DEFAULT_SHARE).round() as i128))
                .unwrap_or(fallback)
        };
        out.push((
            name.to_string(),
            Usage {
                cpu_nanos: resolve("cpu", FALLBACK_CPU_NANOS),
                memory_nanos: resolve("memory", FALLBACK_MEMORY_NANOS),
            },
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(annotations: Value) -> Value {
        json!({"metadata": {"name": "p", "annotations": annotations,
                "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [
                {"name": "app", "resources": {"requests": {"cpu": "200m", "memory": "100Mi"}}},
                {"name": "side"}]},
            "status": {"startTime": "2026-01-01T00:00:10Z"}})
    }

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-01-01T00:00:10Z")
            .expect("time")
            .with_timezone(&Utc)
            + chrono::Duration::seconds(seconds)
    }

    const MI: i128 = 1024 * 1024 * NANOS;
    const MILLI: i128 = 1_000_000;

    #[test]
    fn undeclared_usage_is_half_the_request_or_a_floor() {
        let usage = pod_usage(&pod(json!({})), at(0)).expect("usage");
        assert_eq!(usage[0].1.cpu_nanos, 100 * MILLI);
        assert_eq!(usage[0].1.memory_nanos, 50 * MI);
        assert_eq!(usage[1].1.cpu_nanos, MILLI);
        assert_eq!(usage[1].1.memory_nanos, 4 * MI);
    }

    #[test]
    fn constants_shares_and_per_container_overrides() {
        let p = pod(json!({"kemu.dev/usage": "cpu=150%,memory=64Mi",
            "kemu.dev/usage.side": "cpu=30m"}));
        let usage = pod_usage(&p, at(0)).expect("usage");
        assert_eq!(usage[0].1.cpu_nanos, 300 * MILLI);
        assert_eq!(usage[0].1.memory_nanos, 64 * MI);
        // A share of a request the container lacks falls back; its own cpu wins.
        assert_eq!(usage[1].1.cpu_nanos, 30 * MILLI);
        assert_eq!(usage[1].1.memory_nanos, 64 * MI);
    }

    #[test]
    fn ramps_and_steps_follow_the_time_since_start() {
        let p = pod(json!({"kemu.dev/usage": "cpu=ramp(100m,300m,1m),memory=step(10Mi,20Mi,30s)"}));
        let cpu = |s| pod_usage(&p, at(s)).expect("usage")[0].1.cpu_nanos;
        let memory = |s| pod_usage(&p, at(s)).expect("usage")[0].1.memory_nanos;
        assert_eq!(cpu(0), 100 * MILLI);
        assert_eq!(cpu(30), 200 * MILLI);
        assert_eq!(cpu(600), 300 * MILLI);
        assert_eq!(memory(29), 10 * MI);
        assert_eq!(memory(30), 20 * MI);
    }

    #[test]
    fn bad_declarations_name_the_annotation() {
        for bad in [
            "cpu",
            "gpu=1",
            "cpu=lots",
            "cpu=ramp(1m,2m)",
            "cpu=step(1m,2m,soon)",
            "cpu=-1",
        ] {
            let err = pod_usage(&pod(json!({"kemu.dev/usage.app": bad})), at(0)).expect_err(bad);
            assert_eq!(err.annotation, "kemu.dev/usage.app", "{bad}");
        }
        assert_eq!(parse_duration("1m30s"), Ok(90.0));
    }

    #[test]
    fn usage_is_written_in_metrics_server_units() {
        let u = Usage {
            cpu_nanos: 250 * MILLI,
            memory_nanos: 64 * MI,
        };
        assert_eq!(
            u.to_json(),
            json!({"cpu": "250000000n", "memory": "65536Ki"})
        );
        let node = json!({"metadata": {"annotations": {"kemu.dev/usage": "cpu=1"}}});
        let declared = Usage::declared_by(&node, u).expect("node");
        assert_eq!(declared.cpu_nanos, 1000 * MILLI);
        assert_eq!(declared.memory_nanos, 64 * MI);
    }
}
