//! How long the HTTP front gives a client: kube-apiserver's limits on slow and idle
//! connections and on requests that do not finish.
//!
//! A connection's own timeouts (a request head arriving too slowly, an idle connection) are
//! kept by its [`ConnectionClock`](crate::connection_clock::ConnectionClock); this module holds
//! the settings and the per-request deadline: a request that is not long-running (a watch, or
//! a pod's log, exec, attach, port-forward or proxy) is answered 504 once it has run for the
//! request timeout, as kube-apiserver's `--request-timeout` filter answers it.

use std::collections::HashMap;
use std::time::Duration;

use crate::errors::ApiError;

/// The HTTP front's time limits. The defaults are kube-apiserver's: Go's `http.Server` with
/// `ReadHeaderTimeout` 32 s and `IdleTimeout` 90 s, `--request-timeout` 60 s and
/// `--min-request-timeout` 1800 s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpLimits {
    /// How long a request head (request line and headers) may take to arrive: a connection's
    /// first from the moment it is accepted, later ones from their first byte. Also how long
    /// a new HTTP/1.1 connection may stay silent.
    pub read_header_timeout: Duration,
    /// How long a connection may wait for its next request once the last one is answered (an
    /// HTTP/2 connection: while it serves none).
    pub idle_timeout: Duration,
    /// How long a request that is not long-running may run before it is answered 504; a
    /// shorter `?timeout=` applies instead.
    pub request_timeout: Duration,
    /// A watch without `timeoutSeconds` ends after a random time between this and twice this.
    pub min_request_timeout: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            read_header_timeout: Duration::from_secs(32),
            idle_timeout: Duration::from_secs(90),
            request_timeout: Duration::from_secs(60),
            min_request_timeout: Duration::from_secs(1800),
        }
    }
}

impl HttpLimits {
    /// Every limit must be positive: a zero would close every connection at once.
    pub fn validate(&self) -> Result<(), ApiError> {
        for (field, value) in [
            ("read_header_timeout", self.read_header_timeout),
            ("idle_timeout", self.idle_timeout),
            ("request_timeout", self.request_timeout),
            ("min_request_timeout", self.min_request_timeout),
        ] {
            if value.is_zero() {
                return Err(ApiError::bad_request(format!(
                    "http_limits.{field}: must be positive"
                )));
            }
        }
        Ok(())
    }

    /// How long a watch without `timeoutSeconds` lasts: kube-apiserver spreads watches over
    /// `[min, 2 × min)` so that they do not all end, and come back, at once.
    pub fn watch_timeout(&self) -> Duration {
        let min = self.min_request_timeout;
        let spread = min.as_millis().max(1) as u64;
        min + Duration::from_millis(rand::random::<u64>() % spread)
    }

    /// How long a request may run: the request timeout, or the shorter `?timeout=` it asks
    /// for (a Go duration such as `30s`; one that does not parse is ignored).
    pub fn request_deadline(&self, query: &HashMap<String, String>) -> Duration {
        query
            .get("timeout")
            .and_then(|t| parse_go_duration(t))
            .filter(|t| !t.is_zero())
            .map_or(self.request_timeout, |t| t.min(self.request_timeout))
    }
}

/// The answer to a request that ran out of time, worded as kube-apiserver's timeout filter.
pub fn timed_out() -> ApiError {
    ApiError::Timeout {
        message:
            "Timeout: request did not complete within requested timeout - context deadline exceeded"
                .into(),
    }
}

/// Whether a request with this verb and subresource is long-running, which kube-apiserver
/// exempts from the request timeout.
pub fn is_long_running(verb: &str, subresource: Option<&str>) -> bool {
    verb == "WATCH"
        || matches!(
            subresource,
            Some("log" | "exec" | "attach" | "portforward" | "proxy")
        )
}

/// Parses a Go duration as `?timeout=` carries it: a sequence of numbers with units `h`, `m`,
/// `s`, `ms`, `us`/`µs` or `ns`, e.g. `1m30s` or `250ms`.
fn parse_go_duration(text: &str) -> Option<Duration> {
    let mut rest = text;
    let mut total = Duration::ZERO;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit_end] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        rest = &rest[unit_end..];
        total += Duration::try_from_secs_f64(number * seconds).ok()?;
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_deadline_takes_the_shorter_timeout() {
        let limits = HttpLimits::default();
        let query = |t: &str| HashMap::from([("timeout".to_string(), t.to_string())]);
        assert_eq!(
            limits.request_deadline(&HashMap::new()),
            Duration::from_secs(60)
        );
        assert_eq!(
            limits.request_deadline(&query("1m30s")),
            Duration::from_secs(60)
        );
        assert_eq!(
            limits.request_deadline(&query("250ms")),
            Duration::from_millis(250)
        );
        assert_eq!(
            limits.request_deadline(&query("1h")),
            Duration::from_secs(60)
        );
        assert_eq!(
            limits.request_deadline(&query("soon")),
            Duration::from_secs(60)
        );
        assert_eq!(
            limits.request_deadline(&query("0s")),
            Duration::from_secs(60)
        );
    }

    #[test]
    fn watches_spread_over_twice_the_minimum() {
        let limits = HttpLimits::default();
        for _ in 0..100 {
            let t = limits.watch_timeout();
            assert!(
                t >= Duration::from_secs(1800) && t < Duration::from_secs(3600),
                "{t:?}"
            );
        }
    }

    #[test]
    fn long_running_requests() {
        assert!(is_long_running("WATCH", None));
        assert!(is_long_running("GET", Some("log")));
        assert!(is_long_running("POST", Some("exec")));
        assert!(!is_long_running("GET", Some("status")));
        assert!(!is_long_running("LIST", None));
    }

    #[test]
    fn zero_limits_are_refused() {
        let limits = HttpLimits {
            idle_timeout: Duration::ZERO,
            ..HttpLimits::default()
        };
        let err = limits.validate().expect_err("zero idle timeout");
        assert!(
            err.to_string().contains("http_limits.idle_timeout"),
            "{err}"
        );
    }
}
