//! Time as the Kubernetes API writes it.

use chrono::{DateTime, SecondsFormat, Utc};
use std::time::Duration;

pub fn chrono_duration(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}

/// Kubernetes' time format: seconds, UTC.
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}
