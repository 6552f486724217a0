//! [`Expectations`]: what a controller has asked for and not yet seen in its informer, so that
//! a slow watch never makes it create (or delete) the same pods twice. A controller acts on a
//! key only when its expectations are met (or have expired: a lost event must not wedge it).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

#[derive(Debug)]
struct Pending {
    adds: i64,
    deletes: HashSet<String>,
    set_at: Instant,
}

/// Per controller key: creations and deletions in flight.
#[derive(Debug)]
pub struct Expectations {
    pending: Mutex<HashMap<String, Pending>>,
    ttl: Duration,
}

impl Default for Expectations {
    fn default() -> Self {
        Expectations::new(Duration::from_secs(300))
    }
}

impl Expectations {
    /// Expectations that expire `ttl` after they were set.
    pub fn new(ttl: Duration) -> Expectations {
        Expectations {
            pending: Mutex::new(HashMap::new()),
            ttl,
        }
    }

    /// True when nothing asked for is still unseen (or the wait expired).
    pub fn satisfied(&self, key: &str) -> bool {
        self.satisfied_at(key, Instant::now())
    }

    pub fn satisfied_at(&self, key: &str, now: Instant) -> bool {
        match self.pending.lock().get(key) {
            None => true,
            Some(p) => {
                (p.adds <= 0 && p.deletes.is_empty()) || now.duration_since(p.set_at) > self.ttl
            }
        }
    }

    /// `adds` creations and the deletion of `deletes` (pod keys) are being sent.
    pub fn expect(&self, key: &str, adds: usize, deletes: impl IntoIterator<Item = String>) {
        self.pending.lock().insert(
            key.to_string(),
            Pending {
                adds: adds as i64,
                deletes: deletes.into_iter().collect(),
                set_at: Instant::now(),
            },
        );
    }

    /// One creation was seen (or failed, so it will never be seen).
    pub fn creation_observed(&self, key: &str) {
        if let Some(p) = self.pending.lock().get_mut(key) {
            p.adds -= 1;
        }
    }

    /// The deletion of `pod` was seen (or failed).
    pub fn deletion_observed(&self, key: &str, pod: &str) {
        if let Some(p) = self.pending.lock().get_mut(key) {
            p.deletes.remove(pod);
        }
    }

    pub fn forget(&self, key: &str) {
        self.pending.lock().remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn met_once_everything_is_seen() {
        let e = Expectations::default();
        assert!(e.satisfied("ns/rs"));
        e.expect("ns/rs", 2, ["ns/p1".to_string()]);
        assert!(!e.satisfied("ns/rs"));
        e.creation_observed("ns/rs");
        e.creation_observed("ns/rs");
        assert!(!e.satisfied("ns/rs"));
        e.deletion_observed("ns/rs", "ns/p1");
        assert!(e.satisfied("ns/rs"));
    }

    #[test]
    fn expire_so_a_lost_event_cannot_wedge_the_controller() {
        let e = Expectations::new(Duration::from_secs(10));
        e.expect("k", 1, []);
        let now = Instant::now();
        assert!(!e.satisfied_at("k", now));
        assert!(e.satisfied_at("k", now + Duration::from_secs(11)));
    }
}
