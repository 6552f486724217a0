//! Log entries as the state machine takes them: the proposal header, decoding, applying.

use bytes::Bytes;
use tracing::warn;

use crate::mvcc::Mvcc;
use crate::types::{Command, CommandResult, Event, StoreError};

/// Bytes in front of an encoded [`Command`] in a log entry: the proposing member's id and its
/// proposal sequence number, so the proposer can find its waiter when it applies the entry.
pub const PROPOSAL_HEADER: usize = 16;

/// Writes the proposer's id and sequence number into an entry's [`PROPOSAL_HEADER`].
pub fn stamp(data: &mut [u8], origin: u64, seq: u64) {
    data[..8].copy_from_slice(&origin.to_le_bytes());
    data[8..PROPOSAL_HEADER].copy_from_slice(&seq.to_le_bytes());
}

/// A proposal applied to the state machine.
pub struct AppliedProposal {
    /// The proposing member and its sequence number (see [`PROPOSAL_HEADER`]).
    pub origin: u64,
    pub seq: u64,
    pub result: CommandResult,
    /// The command, unless it was a batch (whose transactions touch no lease) or undecodable.
    pub command: Option<Command>,
}

/// Decodes the proposal in a log entry and applies it to `mvcc`, calling `revision_done` with
/// the events of every revision it makes. `None` for an entry too short to be a proposal.
pub fn apply_proposal(
    mvcc: &mut Mvcc,
    data: &Bytes,
    mut revision_done: impl FnMut(&Mvcc, &[Event]),
) -> Option<AppliedProposal> {
    if data.len() < PROPOSAL_HEADER {
        warn!(
            len = data.len(),
            "skipping a log entry too short to be a proposal"
        );
        return None;
    }
    let origin = u64::from_le_bytes(data[..8].try_into().unwrap_or_default());
    let seq = u64::from_le_bytes(data[8..PROPOSAL_HEADER].try_into().unwrap_or_default());
    // Put values stay views into the entry, which the in-memory log holds anyway.
    let decoded: Result<(Command, usize), _> = crate::types::shared_values::decode(data, || {
        bincode::serde::decode_from_slice(&data[PROPOSAL_HEADER..], bincode::config::standard())
    });
    let (result, command) = match decoded {
        Ok((Command::Batch(txns), _)) => {
            // One revision, and one watch notification, per transaction: watchers see
            // exactly what they would had the transactions come one by one.
            let results = txns
                .iter()
                .map(|txn| {
                    let (result, events) = mvcc.apply_txn(txn);
                    revision_done(mvcc, &events);
                    result
                })
                .collect();
            (CommandResult::Batch(results), None)
        }
        Ok((cmd, _)) => {
            let (result, events) = mvcc.apply(&cmd);
            revision_done(mvcc, &events);
            (result, Some(cmd))
        }
        Err(e) => {
            // Every member skips the same entry the same way, so they stay identical.
            warn!(error = %e, "skipping a log entry that does not decode");
            let result = CommandResult::Error(StoreError::InvalidRequest {
                reason: format!("undecodable entry: {e}"),
            });
            (result, None)
        }
    };
    Some(AppliedProposal {
        origin,
        seq,
        result,
        command,
    })
}

/// Fills the member id and term into a result's header.
pub fn fill_header(mut result: CommandResult, member_id: u64, term: u64) -> CommandResult {
    let header = match &mut result {
        CommandResult::Put(r) => &mut r.header,
        CommandResult::DeleteRange(r) => &mut r.header,
        CommandResult::Txn(r) => &mut r.header,
        CommandResult::Compact(r) => &mut r.header,
        CommandResult::LeaseGrant(r) => &mut r.header,
        CommandResult::LeaseRevoke(r) => &mut r.header,
        CommandResult::LeaseKeepAlive(r) => &mut r.header,
        CommandResult::Error(_) => return result,
        CommandResult::Batch(results) => {
            let filled = std::mem::take(results)
                .into_iter()
                .map(|r| fill_header(r, member_id, term))
                .collect();
            return CommandResult::Batch(filled);
        }
    };
    header.member_id = member_id;
    header.raft_term = term;
    result
}
