//! A register history: read, write and compare-and-set operations on single keys, each with
//! the client that ran it, when it was called and when it returned. This is what the register
//! workload records and what the linearizability checker reads.

use serde::{Deserialize, Serialize};

/// What a client asked for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
pub enum RegisterInput {
    Read,
    Write {
        value: String,
    },
    /// Write `new` if the key holds `expected` (`None`: if the key does not exist).
    Cas {
        expected: Option<String>,
        new: String,
    },
}

/// What the store answered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "result")]
pub enum RegisterOutput {
    /// The value read; `None`: the key does not exist.
    Read {
        value: Option<String>,
    },
    Written,
    Cas {
        succeeded: bool,
    },
    /// No answer (timed out, connection lost): the operation may or may not have taken effect.
    Unknown,
}

/// One operation. Times are nanoseconds since the history's start, on one monotonic clock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Operation {
    pub client: u32,
    pub key: String,
    pub input: RegisterInput,
    pub output: RegisterOutput,
    pub call_ns: u64,
    /// `None` when the operation never returned: it may take effect at any time after its call
    /// (return time +∞).
    pub return_ns: Option<u64>,
    /// The store revision of the answer, when there was one (for a write: the write's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
}

impl Operation {
    /// True when the operation's effect is unknown.
    pub fn is_ambiguous(&self) -> bool {
        matches!(self.output, RegisterOutput::Unknown)
    }

    /// The value this operation writes (if it succeeds).
    pub fn written_value(&self) -> Option<&str> {
        match &self.input {
            RegisterInput::Read => None,
            RegisterInput::Write { value } => Some(value),
            RegisterInput::Cas { new, .. } => Some(new),
        }
    }
}
