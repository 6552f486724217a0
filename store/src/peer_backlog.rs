//! What a peer link sends of the raft messages that queued up while it was busy.
//!
//! A link sends one batch at a time. When it falls behind — it waited for a connection to a
//! restarted peer, or it is pushing megabytes of appends to a member that is catching up — the
//! raft driver keeps queueing, and a leader probing a lagging follower queues the same append
//! (up to `max_size_per_msg`, 4 MiB) again on every heartbeat response. Sent in order, that
//! backlog held whatever came after it: in a chaos run, a pre-vote grant reached its candidate
//! 1.4 s late, behind hundreds of megabytes of such appends on the same stream.
//!
//! Raft takes a lost message in its stride, so the link does not send what raft no longer needs:
//! a message that waited longer than an election timeout (its candidate's round or its leader's
//! probe is over; raft sends again), and an append that a later append in the same backlog
//! repeats. Snapshots are never dropped here: losing one costs a whole new snapshot.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use raft::prelude::{Message, MessageType};

/// Raft messages for one peer, as the raft driver hands them to that peer's link.
pub(crate) struct OutboundBatch {
    /// When the driver queued them; the link drops what waited too long.
    pub queued_at: Instant,
    pub messages: Vec<Message>,
}

impl OutboundBatch {
    pub(crate) fn new(messages: Vec<Message>) -> Self {
        OutboundBatch {
            queued_at: Instant::now(),
            messages,
        }
    }
}

/// A backlog sorted into what to send and what to drop.
#[derive(Debug, Default)]
pub(crate) struct Pruned {
    /// In the order they were queued.
    pub send: Vec<Message>,
    /// Messages that waited longer than the bound; raft should hear that the peer missed them.
    pub stale: usize,
    /// Appends repeated by a later append in the same backlog.
    pub superseded: usize,
}

/// Sorts `backlog` (oldest first) at `now`: messages queued more than `stale_after` ago are
/// dropped unless they carry a snapshot, and of several appends with the same term, previous
/// index and previous term only the last is kept. The later one carries the same entries from the
/// same point (as many or more of them, and a newer commit index), so the receiver misses
/// nothing; raft-rs repeats such an append to a follower in probe state on every heartbeat
/// response.
pub(crate) fn prune(backlog: Vec<OutboundBatch>, now: Instant, stale_after: Duration) -> Pruned {
    let mut pruned = Pruned::default();
    let mut fresh = Vec::new();
    for batch in backlog {
        let stale = now.saturating_duration_since(batch.queued_at) > stale_after;
        for message in batch.messages {
            if stale && message.get_msg_type() != MessageType::MsgSnapshot {
                pruned.stale += 1;
            } else {
                fresh.push(message);
            }
        }
    }
    // Walk from the newest so that the last of each repeated append is the one kept.
    let mut seen = HashSet::new();
    let mut keep = vec![true; fresh.len()];
    for (i, message) in fresh.iter().enumerate().rev() {
        if message.get_msg_type() == MessageType::MsgAppend
            && !seen.insert((message.term, message.index, message.log_term))
        {
            keep[i] = false;
            pruned.superseded += 1;
        }
    }
    pruned.send = fresh
        .into_iter()
        .zip(keep)
        .filter_map(|(message, keep)| keep.then_some(message))
        .collect();
    pruned
}

#[cfg(test)]
mod tests {
    use super::*;
    use raft::prelude::Entry;

    fn message(kind: MessageType, term: u64, index: u64, entries: u64) -> Message {
        let mut m = Message::default();
        m.set_msg_type(kind);
        m.term = term;
        m.index = index;
        m.log_term = term;
        m.entries = (index + 1..=index + entries)
            .map(|index| Entry {
                index,
                term,
                ..Default::default()
            })
            .collect();
        m
    }

    fn batch(at: Instant, messages: Vec<Message>) -> OutboundBatch {
        OutboundBatch {
            queued_at: at,
            messages,
        }
    }

    fn kinds(messages: &[Message]) -> Vec<(MessageType, u64, usize)> {
        messages
            .iter()
            .map(|m| (m.get_msg_type(), m.index, m.entries.len()))
            .collect()
    }

    #[test]
    fn a_fresh_backlog_without_repeats_is_sent_whole_and_in_order() {
        let now = Instant::now();
        let backlog = vec![
            batch(now, vec![message(MessageType::MsgAppend, 3, 10, 2)]),
            batch(now, vec![message(MessageType::MsgHeartbeat, 3, 0, 0)]),
            batch(now, vec![message(MessageType::MsgAppend, 3, 12, 1)]),
        ];
        let pruned = prune(backlog, now, Duration::from_millis(500));
        assert_eq!(
            kinds(&pruned.send),
            vec![
                (MessageType::MsgAppend, 10, 2),
                (MessageType::MsgHeartbeat, 0, 0),
                (MessageType::MsgAppend, 12, 1),
            ]
        );
        assert_eq!((pruned.stale, pruned.superseded), (0, 0));
    }

    #[test]
    fn a_probe_repeated_on_every_heartbeat_response_goes_once_and_the_vote_behind_it_goes_too() {
        let now = Instant::now();
        let mut backlog: Vec<OutboundBatch> = (0..100)
            .map(|i| {
                batch(
                    now,
                    vec![
                        message(MessageType::MsgHeartbeat, 7, 0, 0),
                        // The same probe from index 40, with more entries as the log grows.
                        message(MessageType::MsgAppend, 7, 40, 10 + i),
                    ],
                )
            })
            .collect();
        backlog.push(batch(
            now,
            vec![message(MessageType::MsgRequestPreVoteResponse, 7, 0, 0)],
        ));
        let pruned = prune(backlog, now, Duration::from_millis(500));
        assert_eq!(pruned.superseded, 99);
        let appends: Vec<_> = pruned
            .send
            .iter()
            .filter(|m| m.get_msg_type() == MessageType::MsgAppend)
            .collect();
        assert_eq!(appends.len(), 1);
        assert_eq!(
            appends[0].entries.len(),
            109,
            "the last, longest one is kept"
        );
        assert_eq!(
            pruned.send.last().map(|m| m.get_msg_type()),
            Some(MessageType::MsgRequestPreVoteResponse)
        );
        // An append from another point, or of another term, is not a repeat.
        let backlog = vec![batch(
            now,
            vec![
                message(MessageType::MsgAppend, 7, 40, 1),
                message(MessageType::MsgAppend, 7, 39, 1),
                message(MessageType::MsgAppend, 8, 40, 1),
            ],
        )];
        assert_eq!(
            prune(backlog, now, Duration::from_millis(500)).send.len(),
            3
        );
    }

    #[test]
    fn what_waited_longer_than_the_bound_is_dropped_except_snapshots() {
        let now = Instant::now();
        let old = now - Duration::from_millis(800);
        let backlog = vec![
            batch(
                old,
                vec![
                    message(MessageType::MsgRequestVoteResponse, 5, 0, 0),
                    message(MessageType::MsgSnapshot, 5, 0, 0),
                    message(MessageType::MsgAppend, 5, 9, 3),
                ],
            ),
            batch(now, vec![message(MessageType::MsgHeartbeat, 5, 0, 0)]),
        ];
        let pruned = prune(backlog, now, Duration::from_millis(500));
        assert_eq!(pruned.stale, 2);
        assert_eq!(
            kinds(&pruned.send),
            vec![
                (MessageType::MsgSnapshot, 0, 0),
                (MessageType::MsgHeartbeat, 0, 0),
            ]
        );
    }
}
