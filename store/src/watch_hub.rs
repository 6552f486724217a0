//! Fan-out of applied events to registered watchers.
//!
//! The hub never blocks the apply path: it hands each watcher its events with `try_send` on the
//! watcher's bounded channel. A watcher whose channel is full is too slow; it is removed and its
//! sender dropped, so its watch task sees the channel close after draining what was delivered and
//! cancels the watch with "resume from revision X".

use std::collections::{BTreeSet, HashMap};

use bytes::Bytes;
use tokio::sync::mpsc::{self, error::TrySendError};

use crate::types::{Event, KeyRange, ResponseHeader, Revision, WatchResponse};

struct Watcher {
    range: KeyRange,
    prev_kv: bool,
    sender: mpsc::Sender<WatchResponse>,
    /// The first revision this watcher has not been sent yet; earlier events are skipped (a watch
    /// may start at a future revision).
    next_rev: Revision,
}

/// Registered watchers, indexed so that an event reaches only the watchers of its key.
#[derive(Default)]
pub struct WatchHub {
    next_id: u64,
    watchers: HashMap<u64, Watcher>,
    /// Watchers of one exact key, the common case (an object's own watch).
    by_key: HashMap<Bytes, Vec<u64>>,
    /// Watchers of a range or prefix; each is tested against every event.
    ranged: BTreeSet<u64>,
}

impl WatchHub {
    pub fn new() -> Self {
        WatchHub::default()
    }

    /// Adds a watcher whose next event is the first applied after this call (the caller registers
    /// under the state lock right after catching the watcher up to `next_rev`). Returns its id.
    pub fn register(
        &mut self,
        range: KeyRange,
        prev_kv: bool,
        next_rev: Revision,
        sender: mpsc::Sender<WatchResponse>,
    ) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        if range.is_single() {
            self.by_key.entry(range.key.clone()).or_default().push(id);
        } else {
            self.ranged.insert(id);
        }
        self.watchers.insert(
            id,
            Watcher {
                range,
                prev_kv,
                sender,
                next_rev,
            },
        );
        id
    }

    /// Removes a watcher and drops its sender; unknown ids are ignored.
    pub fn unregister(&mut self, id: u64) {
        let Some(watcher) = self.watchers.remove(&id) else {
            return;
        };
        if watcher.range.is_single() {
            if let Some(ids) = self.by_key.get_mut(&watcher.range.key[..]) {
                ids.retain(|w| *w != id);
                if ids.is_empty() {
                    self.by_key.remove(&watcher.range.key[..]);
                }
            }
        } else {
            self.ranged.remove(&id);
        }
    }

    /// Ends every watcher (drops its sender: its watch task sees the channel close and cancels
    /// the watch) when the state they watch is replaced, as by a snapshot from the leader. Ids
    /// keep counting from where they were, so an ended watcher's late `unregister` cannot
    /// remove a watcher registered after this.
    pub fn clear(&mut self) {
        self.watchers.clear();
        self.by_key.clear();
        self.ranged.clear();
    }

    /// The first revision the watcher has not been sent, if it is still registered.
    pub fn next_rev(&self, id: u64) -> Option<Revision> {
        self.watchers.get(&id).map(|w| w.next_rev)
    }

    pub fn len(&self) -> usize {
        self.watchers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.watchers.is_empty()
    }

    /// Delivers one applied command's events (all at `header.revision`): one message per watcher
    /// with at least one matching event. Watchers that are too slow or gone are removed.
    pub fn notify(&mut self, header: &ResponseHeader, events: &[Event]) {
        if events.is_empty() || self.watchers.is_empty() {
            return;
        }
        // Per watcher, the indexes of its matching events, in event order.
        let mut matched: HashMap<u64, Vec<usize>> = HashMap::new();
        for (i, event) in events.iter().enumerate() {
            for id in self.by_key.get(&event.kv.key[..]).into_iter().flatten() {
                matched.entry(*id).or_default().push(i);
            }
        }
        for id in &self.ranged {
            let Some(watcher) = self.watchers.get(id) else {
                continue;
            };
            let hits: Vec<usize> = (0..events.len())
                .filter(|i| watcher.range.contains(&events[*i].kv.key))
                .collect();
            if !hits.is_empty() {
                matched.insert(*id, hits);
            }
        }
        let mut gone = Vec::new();
        for (id, hits) in matched {
            let Some(watcher) = self.watchers.get_mut(&id) else {
                continue;
            };
            if header.revision < watcher.next_rev {
                continue;
            }
            let events = hits
                .into_iter()
                .map(|i| {
                    let e = &events[i];
                    Event {
                        kind: e.kind,
                        kv: e.kv.clone(),
                        prev_kv: e.prev_kv.clone().filter(|_| watcher.prev_kv),
                    }
                })
                .collect();
            match watcher.sender.try_send(WatchResponse::Events {
                header: header.clone(),
                events,
            }) {
                Ok(()) => watcher.next_rev = header.revision + 1,
                Err(TrySendError::Full(_)) | Err(TrySendError::Closed(_)) => gone.push(id),
            }
        }
        for id in gone {
            self.unregister(id);
        }
    }

    /// Tells one watcher that nothing it has not been sent happened up to `header.revision` (its
    /// client asked). The caller holds the state lock, so every event up to that revision is
    /// already in the watcher's channel, ahead of this message. A full channel misses it.
    pub fn progress_to(&mut self, id: u64, header: &ResponseHeader) {
        if let Some(watcher) = self.watchers.get(&id) {
            let _ = watcher.sender.try_send(WatchResponse::Progress {
                header: header.clone(),
            });
        }
    }

    /// Tells every watcher that nothing it has not been sent happened up to `header.revision`.
    /// A full channel just misses this notification; a closed one is removed.
    pub fn progress(&mut self, header: &ResponseHeader) {
        let mut gone = Vec::new();
        for (id, watcher) in &self.watchers {
            if let Err(TrySendError::Closed(_)) = watcher.sender.try_send(WatchResponse::Progress {
                header: header.clone(),
            }) {
                gone.push(*id);
            }
        }
        for id in gone {
            self.unregister(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{EventKind, KeyValue};

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    fn header(revision: Revision) -> ResponseHeader {
        ResponseHeader {
            revision,
            ..ResponseHeader::default()
        }
    }

    fn put_event(key: &str, revision: Revision) -> Event {
        let kv = |value: &str, mod_revision| KeyValue {
            key: b(key),
            value: b(value),
            create_revision: 2,
            mod_revision,
            version: 1,
            lease: 0,
        };
        Event {
            kind: EventKind::Put,
            kv: kv("new", revision),
            prev_kv: Some(kv("old", revision - 1)),
        }
    }

    /// The events of every message waiting in `rx`, as (key, has prev_kv) per message.
    fn drain(rx: &mut mpsc::Receiver<WatchResponse>) -> Vec<Vec<(Bytes, bool)>> {
        let mut out = Vec::new();
        while let Ok(msg) = rx.try_recv() {
            match msg {
                WatchResponse::Events { events, .. } => out.push(
                    events
                        .into_iter()
                        .map(|e| (e.kv.key, e.prev_kv.is_some()))
                        .collect(),
                ),
                other => panic!("unexpected {other:?}"),
            }
        }
        out
    }

    #[test]
    fn clearing_ends_every_watcher_and_an_old_id_never_removes_a_new_one() {
        let mut hub = WatchHub::new();
        let (tx_old, mut rx_old) = mpsc::channel(8);
        let old = hub.register(KeyRange::single(b("/a")), false, 1, tx_old);
        hub.clear();
        assert!(hub.is_empty());
        assert!(matches!(
            rx_old.try_recv(),
            Err(mpsc::error::TryRecvError::Disconnected)
        ));
        let (tx_new, mut rx_new) = mpsc::channel(8);
        let new = hub.register(KeyRange::single(b("/a")), false, 1, tx_new);
        assert_ne!(old, new);
        // The ended watcher's task cleans up after itself late.
        hub.unregister(old);
        hub.notify(&header(2), &[put_event("/a", 2)]);
        assert_eq!(drain(&mut rx_new), vec![vec![(b("/a"), false)]]);
    }

    #[test]
    fn matches_single_keys_and_prefixes_and_strips_prev_kv() {
        let mut hub = WatchHub::new();
        let (tx_key, mut rx_key) = mpsc::channel(8);
        let (tx_prefix, mut rx_prefix) = mpsc::channel(8);
        let (tx_other, mut rx_other) = mpsc::channel(8);
        let key = hub.register(KeyRange::single(b("/p/a")), true, 5, tx_key);
        let prefix = hub.register(KeyRange::prefix(b("/p/")), false, 5, tx_prefix);
        hub.register(KeyRange::single(b("/q")), false, 5, tx_other);
        assert_eq!(hub.len(), 3);

        hub.notify(
            &header(5),
            &[
                put_event("/p/a", 5),
                put_event("/x", 5),
                put_event("/p/b", 5),
            ],
        );
        assert_eq!(drain(&mut rx_key), vec![vec![(b("/p/a"), true)]]);
        assert_eq!(
            drain(&mut rx_prefix),
            vec![vec![(b("/p/a"), false), (b("/p/b"), false)]]
        );
        assert!(drain(&mut rx_other).is_empty());
        assert_eq!(
            (hub.next_rev(key), hub.next_rev(prefix)),
            (Some(6), Some(6))
        );

        hub.unregister(key);
        hub.notify(&header(6), &[put_event("/p/a", 6)]);
        assert!(rx_key.try_recv().is_err());
        assert_eq!(drain(&mut rx_prefix).len(), 1);
        assert_eq!(hub.len(), 2);
    }

    #[test]
    fn skips_revisions_before_a_watchers_start() {
        let mut hub = WatchHub::new();
        let (tx, mut rx) = mpsc::channel(8);
        let id = hub.register(KeyRange::single(b("k")), false, 10, tx);
        hub.notify(&header(9), &[put_event("k", 9)]);
        assert!(drain(&mut rx).is_empty());
        hub.notify(&header(10), &[put_event("k", 10)]);
        assert_eq!(drain(&mut rx).len(), 1);
        assert_eq!(hub.next_rev(id), Some(11));
    }

    #[test]
    fn slow_watcher_is_cancelled_while_a_fast_one_keeps_receiving() {
        let mut hub = WatchHub::new();
        let (tx_slow, mut rx_slow) = mpsc::channel(1);
        let (tx_fast, mut rx_fast) = mpsc::channel(1);
        let slow = hub.register(KeyRange::prefix(b("/p/")), false, 2, tx_slow);
        let fast = hub.register(KeyRange::single(b("/p/a")), false, 2, tx_fast);

        hub.notify(&header(2), &[put_event("/p/a", 2)]);
        assert_eq!(drain(&mut rx_fast).len(), 1);
        hub.notify(&header(3), &[put_event("/p/a", 3)]);
        assert_eq!(drain(&mut rx_fast).len(), 1);

        assert_eq!(hub.next_rev(slow), None, "the slow watcher is removed");
        assert_eq!(hub.len(), 1);
        // Its sender is gone: the receiver drains what was delivered, then sees the close.
        assert!(
            matches!(rx_slow.try_recv(), Ok(WatchResponse::Events { header, .. }) if header.revision == 2)
        );
        assert_eq!(
            rx_slow.try_recv(),
            Err(mpsc::error::TryRecvError::Disconnected)
        );

        hub.notify(&header(4), &[put_event("/p/a", 4)]);
        assert_eq!(drain(&mut rx_fast).len(), 1);
        assert_eq!(hub.next_rev(fast), Some(5));
    }

    #[test]
    fn closed_receivers_are_removed() {
        let mut hub = WatchHub::new();
        let (tx_a, rx_a) = mpsc::channel(4);
        let (tx_b, rx_b) = mpsc::channel(4);
        hub.register(KeyRange::single(b("a")), false, 2, tx_a);
        hub.register(KeyRange::prefix(b("b")), false, 2, tx_b);
        drop(rx_a);
        hub.notify(&header(2), &[put_event("a", 2)]);
        assert_eq!(hub.len(), 1);
        assert!(hub.by_key.is_empty());
        drop(rx_b);
        hub.progress(&header(2));
        assert!(hub.is_empty());
        assert!(hub.ranged.is_empty());
    }

    #[test]
    fn progress_on_a_full_channel_does_not_cancel() {
        let mut hub = WatchHub::new();
        let (tx, mut rx) = mpsc::channel(1);
        hub.register(KeyRange::prefix(b("/")), false, 2, tx);
        hub.progress(&header(1));
        hub.progress(&header(1));
        assert_eq!(hub.len(), 1);
        assert!(
            matches!(rx.try_recv(), Ok(WatchResponse::Progress { header }) if header.revision == 1)
        );
        assert!(rx.try_recv().is_err());
    }
}
