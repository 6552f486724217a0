//! CronJob schedules as Kubernetes reads them: the standard five fields (minute, hour, day of
//! month, month, day of week) with `*`, `?`, lists, ranges, steps and month and weekday names,
//! the `@yearly`/`@annually`, `@monthly`, `@weekly`, `@daily`/`@midnight`, `@hourly` and
//! `@every <duration>` descriptors, and a `TZ=`/`CRON_TZ=` prefix naming an IANA time zone.
//!
//! Kubernetes parses schedules with robfig/cron's `ParseStandard`, and kube-apiserver answers an
//! unparseable one with that parser's error text, so this parser follows its grammar and words
//! (`expected exactly 5 fields, found 1: [foo]`, `end of range (60) above maximum (59): 60`, …)
//! and its matching rule: when neither day field is `*`, a day matches either of them.
//! Time zones come from chrono-tz (the IANA database compiled in), so a schedule means the same
//! wall-clock times on every machine.

use std::str::FromStr;

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveDateTime, TimeZone, Timelike, Utc};
use chrono_tz::Tz;

/// Set when a field was `*` or `?` (robfig/cron's "star bit"): it decides how the two day
/// fields combine.
const STAR: u64 = 1 << 63;

/// Why a schedule does not parse; the message is robfig/cron's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ScheduleError(pub String);

fn err(message: impl Into<String>) -> ScheduleError {
    ScheduleError(message.into())
}

/// A parsed schedule.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    kind: Kind,
    zone: Tz,
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Fields {
        minute: u64,
        hour: u64,
        dom: u64,
        month: u64,
        dow: u64,
    },
    /// `@every`: a fixed delay, whole seconds (at least one).
    Every(i64),
}

struct Bounds {
    min: u32,
    max: u32,
    names: &'static [(&'static str, u32)],
}

const MINUTES: Bounds = Bounds {
    min: 0,
    max: 59,
    names: &[],
};
const HOURS: Bounds = Bounds {
    min: 0,
    max: 23,
    names: &[],
};
const DAYS: Bounds = Bounds {
    min: 1,
    max: 31,
    names: &[],
};
const MONTHS: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &[
        ("jan", 1),
        ("feb", 2),
        ("mar", 3),
        ("apr", 4),
        ("may", 5),
        ("jun", 6),
        ("jul", 7),
        ("aug", 8),
        ("sep", 9),
        ("oct", 10),
        ("nov", 11),
        ("dec", 12),
    ],
};
const WEEKDAYS: Bounds = Bounds {
    min: 0,
    max: 6,
    names: &[
        ("sun", 0),
        ("mon", 1),
        ("tue", 2),
        ("wed", 3),
        ("thu", 4),
        ("fri", 5),
        ("sat", 6),
    ],
};

/// A time zone by its IANA name, as Go's `time.LoadLocation` finds it (`""` and `UTC` are UTC);
/// the error is Go's.
pub fn time_zone(name: &str) -> Result<Tz, ScheduleError> {
    if name.is_empty() {
        return Ok(Tz::UTC);
    }
    Tz::from_str(name).map_err(|_| err(format!("unknown time zone {name}")))
}

/// Go's `strconv.Atoi` and robfig/cron's `mustParseInt`.
fn parse_int(text: &str) -> Result<u32, ScheduleError> {
    let number: i64 = text.parse().map_err(|e: std::num::ParseIntError| {
        let why = match e.kind() {
            std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => {
                "value out of range"
            }
            _ => "invalid syntax",
        };
        err(format!(
            "failed to parse int from {text}: strconv.Atoi: parsing {text:?}: {why}"
        ))
    })?;
    if number < 0 {
        return Err(err(format!(
            "negative number ({number}) not allowed: {text}"
        )));
    }
    u32::try_from(number).map_err(|_| {
        err(format!(
            "failed to parse int from {text}: strconv.Atoi: parsing {text:?}: value out of range"
        ))
    })
}

fn parse_int_or_name(text: &str, bounds: &Bounds) -> Result<u32, ScheduleError> {
    let lower = text.to_ascii_lowercase();
    match bounds.names.iter().find(|(name, _)| *name == lower) {
        Some((_, value)) => Ok(*value),
        None => parse_int(text),
    }
}

/// One comma-separated part of a field: `*`, `N`, `N-M`, each with an optional `/step`.
fn parse_range(expr: &str, bounds: &Bounds) -> Result<u64, ScheduleError> {
    let range_and_step: Vec<&str> = expr.split('/').collect();
    let low_and_high: Vec<&str> = range_and_step[0].split('-').collect();
    let single = low_and_high.len() == 1;
    let mut extra = 0;
    let (start, mut end) = if low_and_high[0] == "*" || low_and_high[0] == "?" {
        extra = STAR;
        (bounds.min, bounds.max)
    } else {
        let start = parse_int_or_name(low_and_high[0], bounds)?;
        let end = match low_and_high.len() {
            1 => start,
            2 => parse_int_or_name(low_and_high[1], bounds)?,
            _ => return Err(err(format!("too many hyphens: {expr}"))),
        };
        (start, end)
    };
    let step = match range_and_step.len() {
        1 => 1,
        2 => {
            let step = parse_int(range_and_step[1])?;
            // `N/step` means `N-max/step`.
            if single {
                end = bounds.max;
            }
            if step > 1 {
                extra = 0;
            }
            step
        }
        _ => return Err(err(format!("too many slashes: {expr}"))),
    };
    if start < bounds.min {
        return Err(err(format!(
            "beginning of range ({start}) below minimum ({}): {expr}",
            bounds.min
        )));
    }
    if end > bounds.max {
        return Err(err(format!(
            "end of range ({end}) above maximum ({}): {expr}",
            bounds.max
        )));
    }
    if start > end {
        return Err(err(format!(
            "beginning of range ({start}) beyond end of range ({end}): {expr}"
        )));
    }
    if step == 0 {
        return Err(err(format!(
            "step of range should be a positive number: {expr}"
        )));
    }
    let mut bits = extra;
    let mut value = start;
    while value <= end {
        bits |= 1 << value;
        value += step;
    }
    Ok(bits)
}

fn parse_field(field: &str, bounds: &Bounds) -> Result<u64, ScheduleError> {
    let mut bits = 0;
    for part in field.split(',').filter(|p| !p.is_empty()) {
        bits |= parse_range(part, bounds)?;
    }
    Ok(bits)
}

/// Go's `time.ParseDuration`, whole seconds kept (robfig/cron rounds `@every` down to a second,
/// and to one second at least).
fn parse_every(text: &str) -> Result<i64, String> {
    let invalid = || format!("time: invalid duration {text:?}");
    let mut rest = text;
    let negative = rest.starts_with('-');
    rest = rest.trim_start_matches(['-', '+']);
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut nanos: f64 = 0.0;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("time: missing unit in duration {text:?}"))?;
        let number: f64 = rest[..digits].parse().map_err(|_| invalid())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            unit => return Err(format!("time: unknown unit {unit:?} in duration {text:?}")),
        };
        nanos += number * scale;
        rest = &rest[unit_len..];
    }
    let seconds = (nanos / 1e9).floor() as i64;
    Ok(if negative { -seconds } else { seconds })
}

impl Schedule {
    /// Parses `spec` as robfig/cron's `ParseStandard` does.
    pub fn parse(spec: &str) -> Result<Schedule, ScheduleError> {
        if spec.is_empty() {
            return Err(err("empty spec string"));
        }
        let mut spec = spec;
        let mut zone = Tz::UTC;
        if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
            let (Some(eq), space) = (spec.find('='), spec.find(' ')) else {
                return Err(err("empty spec string"));
            };
            let end = space.unwrap_or(spec.len());
            let name = spec.get(eq + 1..end).unwrap_or_default();
            zone =
                time_zone(name).map_err(|e| err(format!("provided bad location {name}: {e}")))?;
            spec = spec[end..].trim();
        }
        if let Some(descriptor) = spec.strip_prefix('@') {
            let fields = match descriptor {
                "yearly" | "annually" => "0 0 1 1 *",
                "monthly" => "0 0 1 * *",
                "weekly" => "0 0 * * 0",
                "daily" | "midnight" => "0 0 * * *",
                "hourly" => "0 * * * *",
                other => match other.strip_prefix("every ") {
                    Some(duration) => {
                        let seconds = parse_every(duration)
                            .map_err(|e| err(format!("failed to parse duration {spec}: {e}")))?;
                        return Ok(Schedule {
                            kind: Kind::Every(seconds.max(1)),
                            zone,
                        });
                    }
                    None => return Err(err(format!("unrecognized descriptor: {spec}"))),
                },
            };
            return Schedule::fields(fields, zone);
        }
        Schedule::fields(spec, zone)
    }

    fn fields(spec: &str, zone: Tz) -> Result<Schedule, ScheduleError> {
        let fields: Vec<&str> = spec.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(err(format!(
                "expected exactly 5 fields, found {}: [{}]",
                fields.len(),
                fields.join(" ")
            )));
        }
        Ok(Schedule {
            kind: Kind::Fields {
                minute: parse_field(fields[0], &MINUTES)?,
                hour: parse_field(fields[1], &HOURS)?,
                dom: parse_field(fields[2], &DAYS)?,
                month: parse_field(fields[3], &MONTHS)?,
                dow: parse_field(fields[4], &WEEKDAYS)?,
            },
            zone,
        })
    }

    /// The same schedule read in `zone` (a CronJob's `timeZone`).
    pub fn in_zone(mut self, zone: Tz) -> Schedule {
        self.zone = zone;
        self
    }

    /// The zone the schedule's wall-clock times are in.
    pub fn zone(&self) -> Tz {
        self.zone
    }

    /// The first time the schedule fires strictly after `after` (whole seconds and minutes), or
    /// `None` if it never does within five years (e.g. `0 0 30 2 *`).
    pub fn next(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let (minute, hour, dom, month, dow) = match self.kind {
            Kind::Every(seconds) => {
                let start = after.with_nanosecond(0).unwrap_or(after);
                return Some(start + Duration::seconds(seconds));
            }
            Kind::Fields {
                minute,
                hour,
                dom,
                month,
                dow,
            } => (minute, hour, dom, month, dow),
        };
        let has = |bits: u64, value: u32| bits & (1 << value) != 0;
        let local = after.with_timezone(&self.zone).naive_local();
        let mut t = local.with_second(0)?.with_nanosecond(0)? + Duration::minutes(1);
        let last_year = t.year() + 5;
        let day_matches = |t: &NaiveDateTime| {
            let (d, w) = (
                has(dom, t.day()),
                has(dow, t.weekday().num_days_from_sunday()),
            );
            if dom & STAR != 0 || dow & STAR != 0 {
                d && w
            } else {
                d || w
            }
        };
        while t.year() <= last_year {
            if !has(month, t.month()) {
                let (y, m) = if t.month() == 12 {
                    (t.year() + 1, 1)
                } else {
                    (t.year(), t.month() + 1)
                };
                t = NaiveDate::from_ymd_opt(y, m, 1)?.and_hms_opt(0, 0, 0)?;
                continue;
            }
            if !day_matches(&t) {
                t = (t.date() + Duration::days(1)).and_hms_opt(0, 0, 0)?;
                continue;
            }
            if !has(hour, t.hour()) {
                t = t.with_minute(0)? + Duration::hours(1);
                continue;
            }
            if !has(minute, t.minute()) {
                t += Duration::minutes(1);
                continue;
            }
            // A wall-clock time skipped by a DST change never happens; a repeated one happens
            // at its first instant.
            match self.zone.from_local_datetime(&t).earliest() {
                Some(at) if at.with_timezone(&Utc) > after => return Some(at.with_timezone(&Utc)),
                _ => t += Duration::minutes(1),
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .expect("time")
            .with_timezone(&Utc)
    }

    fn next(spec: &str, after: &str) -> String {
        Schedule::parse(spec)
            .expect("parses")
            .next(at(after))
            .map(|t| t.to_rfc3339())
            .unwrap_or_default()
    }

    #[test]
    fn errors_are_worded_as_robfig_cron_words_them() {
        let error = |spec: &str| Schedule::parse(spec).expect_err("invalid").0;
        assert_eq!(error(""), "empty spec string");
        assert_eq!(error("foo"), "expected exactly 5 fields, found 1: [foo]");
        assert_eq!(
            error("* * * *"),
            "expected exactly 5 fields, found 4: [* * * *]"
        );
        assert_eq!(
            error("60 * * * *"),
            "end of range (60) above maximum (59): 60"
        );
        assert_eq!(
            error("* * 0 * *"),
            "beginning of range (0) below minimum (1): 0"
        );
        assert_eq!(
            error("5-2 * * * *"),
            "beginning of range (5) beyond end of range (2): 5-2"
        );
        assert_eq!(
            error("*/0 * * * *"),
            "step of range should be a positive number: */0"
        );
        assert_eq!(
            error("a * * * *"),
            "failed to parse int from a: strconv.Atoi: parsing \"a\": invalid syntax"
        );
        assert_eq!(error("1-2-3 * * * *"), "too many hyphens: 1-2-3");
        assert_eq!(error("1/2/3 * * * *"), "too many slashes: 1/2/3");
        assert_eq!(
            error("@fortnightly"),
            "unrecognized descriptor: @fortnightly"
        );
        assert_eq!(
            error("TZ=Mars/Base * * * * *"),
            "provided bad location Mars/Base: unknown time zone Mars/Base"
        );
    }

    #[test]
    fn next_times() {
        assert_eq!(
            next("*/1 * * * *", "2026-01-01T10:00:30Z"),
            "2026-01-01T10:01:00+00:00"
        );
        assert_eq!(
            next("*/15 * * * *", "2026-01-01T10:00:00Z"),
            "2026-01-01T10:15:00+00:00"
        );
        assert_eq!(
            next("@hourly", "2026-01-01T10:59:59Z"),
            "2026-01-01T11:00:00+00:00"
        );
        assert_eq!(
            next("@yearly", "2026-03-01T00:00:00Z"),
            "2027-01-01T00:00:00+00:00"
        );
        // Names, ranges and lists.
        assert_eq!(
            next("30 9 * jan-mar MON,fri", "2026-01-01T00:00:00Z"),
            "2026-01-02T09:30:00+00:00"
        );
        // Both day fields restricted: either matches (the 13th, or a Friday).
        assert_eq!(
            next("0 0 13 * 5", "2026-01-01T00:00:00Z"),
            "2026-01-02T00:00:00+00:00"
        );
        // One of them `*`: both must match (a Friday that is a 13th).
        assert_eq!(
            next("0 0 13 * *", "2026-01-01T00:00:00Z"),
            "2026-01-13T00:00:00+00:00"
        );
        assert_eq!(next("0 0 30 2 *", "2026-01-01T00:00:00Z"), "");
        assert_eq!(
            next("@every 90s", "2026-01-01T00:00:00.5Z"),
            "2026-01-01T00:01:30+00:00"
        );
    }

    #[test]
    fn time_zones_move_the_wall_clock() {
        let tokyo = Schedule::parse("0 9 * * *")
            .expect("parses")
            .in_zone(time_zone("Asia/Tokyo").expect("zone"));
        assert_eq!(
            tokyo.next(at("2026-01-01T00:00:00Z")).expect("fires"),
            at("2026-01-02T00:00:00Z")
        );
        let prefixed = Schedule::parse("CRON_TZ=America/New_York 30 2 * * *").expect("parses");
        // 2:30 does not happen on 8 March 2026 in New York (clocks jump from 2:00 to 3:00).
        assert_eq!(
            prefixed.next(at("2026-03-08T00:00:00Z")).expect("fires"),
            at("2026-03-09T06:30:00Z")
        );
        assert_eq!(
            time_zone("Nowhere/Land").expect_err("unknown").0,
            "unknown time zone Nowhere/Land"
        );
    }
}
