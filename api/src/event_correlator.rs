//! [`EventCorrelator`]: what client-go's legacy (core/v1) event recorder does to an event
//! before it writes it, as a pure core with "now" as an input.
//!
//! Three steps, in client-go's order and with its numbers:
//!
//! 1. **Aggregation.** Events about one object from one source with the same type and reason
//!    but different messages are counted per key over a window of [`AGGREGATE_WINDOW`]; from
//!    the [`AGGREGATE_MAX_EVENTS`]th distinct message on, they become one event whose message
//!    is `(combined from similar events): ` and the latest message.
//! 2. **De-duplication.** An event seen before (same source, object, field path, type, reason
//!    and message; or the same aggregate) is not created again: the earlier one's `count` goes
//!    up by one and its `lastTimestamp` (and message) move, written as a patch.
//! 3. **Spam filter.** Each object and source has a token bucket of [`SPAM_BURST`] events,
//!    refilled one per [`SPAM_REFILL`]; an event finding it empty is dropped.
//!
//! Each table keeps at most [`CACHE_ENTRIES`] keys, the least recently used going first (an
//! approximation: two generations of a map), so memory stays bounded however many objects a
//! component reports on.

use std::collections::{BTreeSet, HashMap};
use std::hash::Hash;

use chrono::{DateTime, Duration, Utc};
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde_json::{json, Value};

/// Keys each table remembers (client-go's `maxLruCacheEntries`).
pub const CACHE_ENTRIES: usize = 4096;
/// Distinct messages of similar events within [`AGGREGATE_WINDOW`] before they are combined.
pub const AGGREGATE_MAX_EVENTS: usize = 10;
/// How long similar events are counted together.
pub const AGGREGATE_WINDOW: Duration = Duration::seconds(600);
/// Events an object and source may have at once before the spam filter drops them.
pub const SPAM_BURST: f64 = 25.0;
/// One more event allowed per this long, up to [`SPAM_BURST`].
pub const SPAM_REFILL: Duration = Duration::seconds(300);
/// The start of a combined event's message.
pub const COMBINED_PREFIX: &str = "(combined from similar events): ";

/// What to do with an event.
#[derive(Debug, Clone, PartialEq)]
pub enum Correlated {
    /// Create it (`count` 1, or an aggregate's first).
    Create(Event),
    /// It repeats one already written: apply `patch` (a strategic merge patch of `count`,
    /// `lastTimestamp` and `message`) to the event named `event.metadata.name`; should that
    /// event be gone, create `event`, which carries the whole count.
    Patch { event: Event, patch: Value },
    /// The spam filter dropped it.
    Skip,
}

/// The correlator's memory. Not thread-safe by itself: a component wraps it in a mutex.
#[derive(Debug, Default)]
pub struct EventCorrelator {
    aggregates: Recent<String, AggregateRecord>,
    observed: Recent<String, Observation>,
    spam: Recent<String, TokenBucket>,
}

#[derive(Debug, Clone, Default)]
struct AggregateRecord {
    messages: BTreeSet<String>,
    last: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone)]
struct Observation {
    count: i32,
    first_timestamp: Option<Time>,
    name: String,
}

#[derive(Debug, Clone)]
struct TokenBucket {
    tokens: f64,
    at: DateTime<Utc>,
}

impl TokenBucket {
    fn try_take(&mut self, now: DateTime<Utc>) -> bool {
        let elapsed = (now - self.at).num_milliseconds().max(0) as f64;
        let per_ms = 1.0 / SPAM_REFILL.num_milliseconds() as f64;
        self.tokens = (self.tokens + elapsed * per_ms).min(SPAM_BURST);
        self.at = now.max(self.at);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

impl EventCorrelator {
    pub fn new() -> EventCorrelator {
        EventCorrelator::default()
    }

    /// Decides what becomes of `event` (a new core/v1 Event, `count` 1) at `now`.
    pub fn correlate(&mut self, event: Event, now: DateTime<Utc>) -> Correlated {
        let (event, key) = self.aggregate(event, now);
        let (event, patch) = self.observe(event, key);
        if !self.allow(&event, now) {
            return Correlated::Skip;
        }
        match patch {
            Some(patch) => Correlated::Patch { event, patch },
            None => Correlated::Create(event),
        }
    }

    /// Step 1: counts the message under its aggregate key; past the limit, answers the
    /// combined event (keyed by the aggregate) instead of `event` (keyed by itself).
    fn aggregate(&mut self, event: Event, now: DateTime<Utc>) -> (Event, String) {
        let event_key = event_key(&event);
        let aggregate_key = aggregate_key(&event);
        let mut record = self.aggregates.get(&aggregate_key).unwrap_or_default();
        if record.last.is_none_or(|last| now - last > AGGREGATE_WINDOW) {
            record = AggregateRecord::default();
        }
        record
            .messages
            .insert(event.message.clone().unwrap_or_default());
        record.last = Some(now);
        let combine = record.messages.len() >= AGGREGATE_MAX_EVENTS;
        if combine {
            // The set stays below the limit, so every later message is combined too.
            if let Some(any) = record.messages.iter().next().cloned() {
                record.messages.remove(&any);
            }
        }
        self.aggregates.put(aggregate_key.clone(), record);
        if !combine {
            return (event, event_key);
        }
        let stamp = Time(timestamp(now));
        let name = event.involved_object.name.clone().unwrap_or_default();
        let combined = Event {
            metadata: ObjectMeta {
                name: Some(format!(
                    "{name}.{:x}",
                    now.timestamp_nanos_opt().unwrap_or_default()
                )),
                namespace: event.metadata.namespace.clone(),
                ..Default::default()
            },
            count: Some(1),
            first_timestamp: Some(stamp.clone()),
            last_timestamp: Some(stamp),
            message: Some(format!(
                "{COMBINED_PREFIX}{}",
                event.message.as_deref().unwrap_or_default()
            )),
            type_: event.type_.clone(),
            reason: event.reason.clone(),
            source: event.source.clone(),
            involved_object: event.involved_object,
            ..Default::default()
        };
        (combined, aggregate_key)
    }

    /// Step 2: a key seen before makes the event a repeat of the one first written under it.
    fn observe(&mut self, mut event: Event, key: String) -> (Event, Option<Value>) {
        let mut patch = None;
        if let Some(seen) = self.observed.get(&key).filter(|s| s.count > 0) {
            event.metadata.name = Some(seen.name);
            event.first_timestamp = seen.first_timestamp;
            event.count = Some(seen.count.saturating_add(1));
            patch = Some(json!({
                "count": event.count,
                "lastTimestamp": event.last_timestamp,
                "message": event.message,
            }));
        }
        self.observed.put(
            key,
            Observation {
                count: event.count.unwrap_or(1),
                first_timestamp: event.first_timestamp.clone(),
                name: event.metadata.name.clone().unwrap_or_default(),
            },
        );
        (event, patch)
    }

    /// Step 3: whether the object's (and source's) bucket has a token left.
    fn allow(&mut self, event: &Event, now: DateTime<Utc>) -> bool {
        let key = spam_key(event);
        let mut bucket = self.spam.get(&key).unwrap_or(TokenBucket {
            tokens: SPAM_BURST,
            at: now,
        });
        let allowed = bucket.try_take(now);
        self.spam.put(key, bucket);
        allowed
    }
}

/// Source, object, field path, type, reason and message: what makes two events the same.
fn event_key(e: &Event) -> String {
    let o = &e.involved_object;
    let source = e.source.as_ref();
    [
        source.and_then(|s| s.component.as_deref()),
        source.and_then(|s| s.host.as_deref()),
        o.kind.as_deref(),
        o.namespace.as_deref(),
        o.name.as_deref(),
        o.field_path.as_deref(),
        o.uid.as_deref(),
        o.api_version.as_deref(),
        e.type_.as_deref(),
        e.reason.as_deref(),
        e.message.as_deref(),
    ]
    .map(Option::unwrap_or_default)
    .concat()
}

/// Source, object, type, reason and reporter: what makes two events similar.
fn aggregate_key(e: &Event) -> String {
    let o = &e.involved_object;
    let source = e.source.as_ref();
    [
        source.and_then(|s| s.component.as_deref()),
        source.and_then(|s| s.host.as_deref()),
        o.kind.as_deref(),
        o.namespace.as_deref(),
        o.name.as_deref(),
        o.uid.as_deref(),
        o.api_version.as_deref(),
        e.type_.as_deref(),
        e.reason.as_deref(),
        e.reporting_component.as_deref(),
        e.reporting_instance.as_deref(),
    ]
    .map(Option::unwrap_or_default)
    .concat()
}

/// Source, object and type: what shares one spam bucket.
fn spam_key(e: &Event) -> String {
    let o = &e.involved_object;
    let source = e.source.as_ref();
    [
        source.and_then(|s| s.component.as_deref()),
        source.and_then(|s| s.host.as_deref()),
        o.kind.as_deref(),
        o.namespace.as_deref(),
        o.name.as_deref(),
        o.uid.as_deref(),
        o.api_version.as_deref(),
        e.type_.as_deref(),
    ]
    .map(Option::unwrap_or_default)
    .concat()
}

/// `now` as an API timestamp, whole seconds (how `Time` is written).
pub fn timestamp(now: DateTime<Utc>) -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::new(now.timestamp(), 0)
        .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
}

/// A map of at most about `2 × CACHE_ENTRIES` keys that forgets the least recently used: when
/// the current generation is full it becomes the old one, and the old one is dropped; a key
/// found in the old generation moves to the current one.
#[derive(Debug)]
struct Recent<K, V> {
    current: HashMap<K, V>,
    old: HashMap<K, V>,
    capacity: usize,
}

impl<K, V> Default for Recent<K, V> {
    fn default() -> Self {
        Recent {
            current: HashMap::new(),
            old: HashMap::new(),
            capacity: CACHE_ENTRIES,
        }
    }
}

impl<K: Hash + Eq + Clone, V: Clone> Recent<K, V> {
    fn get(&mut self, key: &K) -> Option<V> {
        if let Some(v) = self.current.get(key) {
            return Some(v.clone());
        }
        let v = self.old.remove(key)?;
        self.put(key.clone(), v.clone());
        Some(v)
    }

    fn put(&mut self, key: K, value: V) {
        if self.current.len() >= self.capacity && !self.current.contains_key(&key) {
            self.old = std::mem::take(&mut self.current);
        }
        self.current.insert(key, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{EventSource, ObjectReference};

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + seconds, 0).expect("in range")
    }

    fn event(name: &str, reason: &str, message: &str, now: DateTime<Utc>) -> Event {
        let stamp = Time(timestamp(now));
        Event {
            metadata: ObjectMeta {
                name: Some(format!("{name}.{:x}", now.timestamp())),
                namespace: Some("dev".into()),
                ..Default::default()
            },
            involved_object: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some(name.into()),
                namespace: Some("dev".into()),
                uid: Some(format!("uid-{name}")),
                ..Default::default()
            },
            reason: Some(reason.into()),
            message: Some(message.into()),
            type_: Some("Warning".into()),
            count: Some(1),
            first_timestamp: Some(stamp.clone()),
            last_timestamp: Some(stamp),
            source: Some(EventSource {
                component: Some("kubelet".into()),
                host: Some("node-1".into()),
            }),
            ..Default::default()
        }
    }

    fn created(c: Correlated) -> Event {
        match c {
            Correlated::Create(e) => e,
            other => panic!("expected a create, got {other:?}"),
        }
    }

    #[test]
    fn a_repeat_patches_the_first_with_count_and_last_timestamp() {
        let mut c = EventCorrelator::new();
        let first = created(c.correlate(event("web", "BackOff", "back-off", at(0)), at(0)));
        let first_name = first.metadata.name.clone();
        for n in 2..=5 {
            let now = at(30 * n);
            match c.correlate(event("web", "BackOff", "back-off", now), now) {
                Correlated::Patch { event, patch } => {
                    assert_eq!(event.metadata.name, first_name);
                    assert_eq!(event.count, Some(n as i32));
                    assert_eq!(event.first_timestamp, first.first_timestamp);
                    assert_eq!(event.last_timestamp, Some(Time(timestamp(now))));
                    assert_eq!(patch["count"], n);
                    assert_eq!(patch["message"], "back-off");
                    assert_eq!(
                        patch["lastTimestamp"],
                        serde_json::to_value(Time(timestamp(now))).expect("encodes")
                    );
                    assert_eq!(patch.as_object().map(|o| o.len()), Some(3));
                }
                other => panic!("expected a patch, got {other:?}"),
            }
        }
        // Another object, reason or message is another event.
        created(c.correlate(event("api", "BackOff", "back-off", at(200)), at(200)));
        created(c.correlate(event("web", "Failed", "back-off", at(200)), at(200)));
        created(c.correlate(event("web", "BackOff", "other", at(200)), at(200)));
    }

    #[test]
    fn ten_similar_messages_in_ten_minutes_are_combined() {
        let mut c = EventCorrelator::new();
        for i in 0..9 {
            let e =
                created(c.correlate(event("web", "FailedMount", &format!("m{i}"), at(i)), at(i)));
            assert_eq!(e.message.as_deref(), Some(format!("m{i}").as_str()));
        }
        let combined = created(c.correlate(event("web", "FailedMount", "m9", at(9)), at(9)));
        assert_eq!(
            combined.message.as_deref(),
            Some("(combined from similar events): m9")
        );
        assert_eq!(combined.reason.as_deref(), Some("FailedMount"));
        assert_eq!(combined.count, Some(1));
        // The next one, whatever its message, repeats the combined event.
        match c.correlate(event("web", "FailedMount", "m10", at(10)), at(10)) {
            Correlated::Patch { event, patch } => {
                assert_eq!(event.metadata.name, combined.metadata.name);
                assert_eq!(event.count, Some(2));
                assert_eq!(patch["message"], "(combined from similar events): m10");
            }
            other => panic!("expected a patch, got {other:?}"),
        }
        // Past the window, counting starts again.
        let later = at(10 + 601);
        let e = created(c.correlate(event("web", "FailedMount", "m11", later), later));
        assert_eq!(e.message.as_deref(), Some("m11"));
    }

    #[test]
    fn spam_filter_allows_a_burst_of_25_then_one_per_five_minutes() {
        let mut c = EventCorrelator::new();
        for i in 0..25 {
            let message = format!("distinct {i}");
            let out = c.correlate(event("web", &format!("R{i}"), &message, at(0)), at(0));
            assert!(matches!(out, Correlated::Create(_)), "event {i}: {out:?}");
        }
        assert_eq!(
            c.correlate(event("web", "R25", "more", at(1)), at(1)),
            Correlated::Skip
        );
        // Another object has its own bucket.
        created(c.correlate(event("db", "R0", "x", at(1)), at(1)));
        // Five minutes give one token back.
        assert!(!matches!(
            c.correlate(event("web", "R26", "later", at(301)), at(301)),
            Correlated::Skip
        ));
        assert_eq!(
            c.correlate(event("web", "R27", "later", at(302)), at(302)),
            Correlated::Skip
        );
    }

    #[test]
    fn the_tables_stay_bounded() {
        let mut r: Recent<u32, u32> = Recent {
            capacity: 4,
            ..Default::default()
        };
        for i in 0..100 {
            r.put(i, i);
            assert!(r.current.len() + r.old.len() <= 8);
        }
        assert_eq!(r.get(&99), Some(99));
        assert_eq!(r.get(&0), None);
        // A recently used key survives a generation change.
        assert_eq!(r.get(&97), Some(97));
        for i in 100..104 {
            r.put(i, i);
        }
        assert_eq!(r.get(&97), Some(97));
    }
}
