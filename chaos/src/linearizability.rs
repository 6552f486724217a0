//! Linearizability of a register history (Wing & Gong's search with Lowe's memoization, as
//! porcupine does it), per key.
//!
//! The history of one key becomes a list of call and return entries in time order. The search
//! walks it, trying to linearize the next call whose model step is legal; reaching a return
//! whose call is not yet linearized means the choices so far were wrong, so it backtracks. A
//! cache of (set of linearized operations, register state) already explored prunes the search:
//! two paths that linearized the same operations into the same state have the same future.
//!
//! An operation that never returned gets a return time of +∞ and an unknown output: the search
//! may linearize it anywhere after its call, with either effect — or, by putting it last, with
//! none. Each key's search has a step budget; a key that exhausts it is reported as
//! undecided, not as passing.

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::history::{Operation, RegisterInput, RegisterOutput};

/// Checker settings.
#[derive(Clone, Debug)]
pub struct LinearizabilityConfig {
    /// Search steps allowed per key before giving up (the verdict is then `Undecided`).
    pub step_budget: u64,
}

impl Default for LinearizabilityConfig {
    fn default() -> Self {
        LinearizabilityConfig {
            step_budget: 20_000_000,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "verdict")]
pub enum Verdict {
    Linearizable,
    /// No linearization exists. `stuck_at` are the operations (indices into the key's history,
    /// in the order given) that could not be placed after the longest linearizable prefix.
    Violation {
        longest_prefix: usize,
        stuck_at: Vec<usize>,
        explanation: String,
    },
    /// The step budget ran out first.
    Undecided {
        steps: u64,
    },
}

/// The verdict for one key.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct KeyResult {
    pub key: String,
    pub operations: usize,
    /// Operations that never returned (their return time is +∞).
    pub ambiguous: usize,
    pub steps: u64,
    pub duration_ms: f64,
    #[serde(flatten)]
    pub verdict: Verdict,
}

/// The verdict for a whole history.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LinearizabilityReport {
    pub passed: bool,
    pub operations: usize,
    pub keys: Vec<KeyResult>,
    pub duration_ms: f64,
}

/// Checks `history` key by key; `initial` gives a key's value before the history (absent keys
/// start absent).
pub fn check(
    history: &[Operation],
    initial: &HashMap<String, String>,
    config: &LinearizabilityConfig,
) -> LinearizabilityReport {
    let started = Instant::now();
    let mut by_key: HashMap<&str, Vec<&Operation>> = HashMap::new();
    for op in history {
        by_key.entry(op.key.as_str()).or_default().push(op);
    }
    let mut keys: Vec<&str> = by_key.keys().copied().collect();
    keys.sort();
    let results: Vec<KeyResult> = keys
        .into_iter()
        .map(|key| {
            let ops = &by_key[key];
            check_key(key, ops, initial.get(key).map(|s| s.as_str()), config)
        })
        .collect();
    LinearizabilityReport {
        passed: results.iter().all(|r| r.verdict == Verdict::Linearizable),
        operations: history.len(),
        keys: results,
        duration_ms: started.elapsed().as_secs_f64() * 1e3,
    }
}

/// One key's operations compiled against interned values (0 = the key is absent).
#[derive(Clone, Copy, Debug)]
enum Step {
    Read(u32),
    Write(u32),
    CasSucceeded {
        expected: u32,
        new: u32,
    },
    CasFailed {
        expected: u32,
    },
    /// A compare-and-set with no answer: if it takes effect, it does what it says.
    CasUnknown {
        expected: u32,
        new: u32,
    },
}

impl Step {
    /// The register model: whether the step is legal in `state`, and the state after it.
    fn apply(self, state: u32) -> Option<u32> {
        match self {
            Step::Read(v) => (v == state).then_some(state),
            Step::Write(v) => Some(v),
            Step::CasSucceeded { expected, new } => (state == expected).then_some(new),
            Step::CasFailed { expected } => (state != expected).then_some(state),
            Step::CasUnknown { expected, new } => Some(if state == expected { new } else { state }),
        }
    }
}

/// Maps values to small integers; 0 is "absent".
#[derive(Default)]
struct Interner {
    ids: HashMap<String, u32>,
}

impl Interner {
    fn id(&mut self, value: Option<&str>) -> u32 {
        match value {
            None => 0,
            Some(v) => {
                let next = self.ids.len() as u32 + 1;
                *self.ids.entry(v.to_string()).or_insert(next)
            }
        }
    }
}

fn compile(op: &Operation, values: &mut Interner) -> Step {
    match (&op.input, &op.output) {
        (RegisterInput::Read, RegisterOutput::Read { value }) => {
            Step::Read(values.id(value.as_deref()))
        }
        // A read without an answer has no effect and tells nothing; writes with any answer but
        // a definite one are possibly applied.
        (RegisterInput::Read, _) => Step::CasUnknown {
            expected: u32::MAX,
            new: u32::MAX,
        },
        (RegisterInput::Write { value }, _) => Step::Write(values.id(Some(value))),
        (RegisterInput::Cas { expected, new }, RegisterOutput::Cas { succeeded: true }) => {
            Step::CasSucceeded {
                expected: values.id(expected.as_deref()),
                new: values.id(Some(new)),
            }
        }
        (RegisterInput::Cas { expected, .. }, RegisterOutput::Cas { succeeded: false }) => {
            Step::CasFailed {
                expected: values.id(expected.as_deref()),
            }
        }
        (RegisterInput::Cas { expected, new }, _) => Step::CasUnknown {
            expected: values.id(expected.as_deref()),
            new: values.id(Some(new)),
        },
    }
}

/// A fixed-size set of operation indices.
#[derive(Clone, PartialEq, Eq)]
struct Bitset(Box<[u64]>);

impl Bitset {
    fn new(n: usize) -> Self {
        Bitset(vec![0; n.div_ceil(64)].into_boxed_slice())
    }
    fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
    fn clear(&mut self, i: usize) {
        self.0[i / 64] &= !(1 << (i % 64));
    }
}

/// A memo entry. Hashing uses the incrementally kept Zobrist hash of the set; equality compares
/// the sets themselves, so a hash collision can never prune a path wrongly.
struct Memo {
    hash: u64,
    state: u32,
    linearized: Bitset,
}

impl Hash for Memo {
    fn hash<H: Hasher>(&self, h: &mut H) {
        h.write_u64(self.hash ^ (self.state as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    }
}

impl PartialEq for Memo {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && self.state == other.state && self.linearized == other.linearized
    }
}

impl Eq for Memo {}

/// splitmix64: a fixed per-operation random word for the Zobrist hash.
fn zobrist(i: usize) -> u64 {
    let mut z = (i as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn check_key(
    key: &str,
    ops: &[&Operation],
    initial: Option<&str>,
    config: &LinearizabilityConfig,
) -> KeyResult {
    let started = Instant::now();
    let mut values = Interner::default();
    let initial_state = values.id(initial);
    let steps: Vec<Step> = ops.iter().map(|op| compile(op, &mut values)).collect();
    let n = ops.len();

    // Entries 0..n are calls, n..2n returns; sorted by time, a call before a return at the
    // same instant (the two may then overlap).
    let mut order: Vec<usize> = (0..2 * n).collect();
    let time = |e: usize| -> (u64, u8) {
        if e < n {
            (ops[e].call_ns, 0)
        } else {
            (ops[e - n].return_ns.unwrap_or(u64::MAX), 1)
        }
    };
    order.sort_by_key(|&e| time(e));
    // A doubly linked list over the sorted entries with a head (2n) and a tail (2n + 1).
    let head = 2 * n;
    let tail = 2 * n + 1;
    let mut next = vec![0usize; 2 * n + 2];
    let mut prev = vec![0usize; 2 * n + 2];
    let mut chain = vec![head];
    chain.extend(order.iter().copied());
    chain.push(tail);
    for w in chain.windows(2) {
        next[w[0]] = w[1];
        prev[w[1]] = w[0];
    }
    let lift = |next: &mut Vec<usize>, prev: &mut Vec<usize>, e: usize| {
        for x in [e, e + n] {
            next[prev[x]] = next[x];
            prev[next[x]] = prev[x];
        }
    };
    let unlift = |next: &mut Vec<usize>, prev: &mut Vec<usize>, e: usize| {
        for x in [e + n, e] {
            next[prev[x]] = x;
            prev[next[x]] = x;
        }
    };

    let mut linearized = Bitset::new(n);
    let mut hash = 0u64;
    let mut state = initial_state;
    let mut memo: HashSet<Memo> = HashSet::new();
    let mut stack: Vec<(usize, u32)> = Vec::new();
    let mut longest = 0usize;
    let mut stuck: Vec<usize> = Vec::new();
    let mut step_count = 0u64;
    let mut entry = next[head];
    let verdict = loop {
        if next[head] == tail {
            break Verdict::Linearizable;
        }
        step_count += 1;
        if step_count > config.step_budget {
            break Verdict::Undecided { steps: step_count };
        }
        if entry < n {
            // A call: try to linearize it now.
            let mut advanced = false;
            if let Some(new_state) = steps[entry].apply(state) {
                let new_hash = hash ^ zobrist(entry);
                let mut new_set = linearized.clone();
                new_set.set(entry);
                if memo.insert(Memo {
                    hash: new_hash,
                    state: new_state,
                    linearized: new_set,
                }) {
                    stack.push((entry, state));
                    linearized.set(entry);
                    hash = new_hash;
                    state = new_state;
                    lift(&mut next, &mut prev, entry);
                    advanced = true;
                    if stack.len() > longest {
                        longest = stack.len();
                        stuck.clear();
                    }
                }
            }
            entry = if advanced { next[head] } else { next[entry] };
        } else {
            // A return whose call is not linearized: undo the last choice.
            if stack.len() == longest {
                // Every call before this return failed at the deepest point.
                stuck = pending_calls(&next, head, entry, n);
            }
            let Some((last, old_state)) = stack.pop() else {
                break Verdict::Violation {
                    longest_prefix: longest,
                    stuck_at: stuck.clone(),
                    explanation: String::new(),
                };
            };
            linearized.clear(last);
            hash ^= zobrist(last);
            state = old_state;
            unlift(&mut next, &mut prev, last);
            entry = next[last];
        }
    };
    let verdict = match verdict {
        Verdict::Violation {
            longest_prefix,
            stuck_at,
            ..
        } => {
            let explanation = explain(key, ops, &stuck_at);
            Verdict::Violation {
                longest_prefix,
                stuck_at,
                explanation,
            }
        }
        other => other,
    };
    KeyResult {
        key: key.to_string(),
        operations: n,
        ambiguous: ops.iter().filter(|o| o.return_ns.is_none()).count(),
        steps: step_count,
        duration_ms: started.elapsed().as_secs_f64() * 1e3,
        verdict,
    }
}

/// The calls in the list before entry `upto` (which is a return).
fn pending_calls(next: &[usize], head: usize, upto: usize, n: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut e = next[head];
    while e != upto && out.len() < 8 {
        if e < n {
            out.push(e);
        }
        e = next[e];
    }
    if upto >= n && !out.contains(&(upto - n)) {
        out.push(upto - n);
    }
    out
}

fn explain(key: &str, ops: &[&Operation], stuck: &[usize]) -> String {
    let described: Vec<String> = stuck
        .iter()
        .map(|&i| {
            let op = ops[i];
            format!(
                "client {} {:?} -> {:?} [{}..{}]",
                op.client,
                op.input,
                op.output,
                op.call_ns,
                op.return_ns
                    .map(|r| r.to_string())
                    .unwrap_or_else(|| "∞".into())
            )
        })
        .collect();
    format!(
        "key {key}: no order of the operations fits a register; stuck at: {}",
        described.join("; ")
    )
}

/// Narrows ambiguous operations with what the store's (verified complete) history says was
/// applied, as etcd's robustness suite does: an ambiguous write whose unique value never appears
/// in `applied` (key, value) pairs never took effect and is dropped; one whose value appears did
/// take effect, so it gets a definite output, and it must have been linearized before the first
/// operation that observed its value returned. `applied(key, value)` says whether the store's
/// history has that write. Sound only when every written value is unique.
pub fn resolve_ambiguous(
    history: &[Operation],
    applied: impl Fn(&str, &str) -> bool,
) -> Vec<Operation> {
    // The earliest return of an operation that saw each (key, value).
    let mut first_seen: HashMap<(&str, &str), u64> = HashMap::new();
    for op in history {
        let (Some(ret), Some(seen)) = (op.return_ns, observed_value(op)) else {
            continue;
        };
        let slot = first_seen.entry((op.key.as_str(), seen)).or_insert(ret);
        *slot = (*slot).min(ret);
    }
    history
        .iter()
        .filter_map(|op| {
            if !op.is_ambiguous() {
                return Some(op.clone());
            }
            let value = op.written_value()?;
            if !applied(&op.key, value) {
                return None;
            }
            let mut op = op.clone();
            op.output = match op.input {
                RegisterInput::Cas { .. } => RegisterOutput::Cas { succeeded: true },
                _ => RegisterOutput::Written,
            };
            op.return_ns = first_seen.get(&(op.key.as_str(), value)).copied();
            Some(op)
        })
        .collect()
}

/// The value an answered operation proves the key held at some point.
fn observed_value(op: &Operation) -> Option<&str> {
    match (&op.input, &op.output) {
        (RegisterInput::Read, RegisterOutput::Read { value }) => value.as_deref(),
        (RegisterInput::Cas { expected, .. }, RegisterOutput::Cas { succeeded: true }) => {
            expected.as_deref()
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(
        client: u32,
        input: RegisterInput,
        output: RegisterOutput,
        call: u64,
        ret: Option<u64>,
    ) -> Operation {
        Operation {
            client,
            key: "k".into(),
            input,
            output,
            call_ns: call,
            return_ns: ret,
            revision: None,
        }
    }

    fn write(client: u32, v: &str, call: u64, ret: Option<u64>) -> Operation {
        let output = if ret.is_some() {
            RegisterOutput::Written
        } else {
            RegisterOutput::Unknown
        };
        op(
            client,
            RegisterInput::Write { value: v.into() },
            output,
            call,
            ret,
        )
    }

    fn read(client: u32, v: Option<&str>, call: u64, ret: u64) -> Operation {
        op(
            client,
            RegisterInput::Read,
            RegisterOutput::Read {
                value: v.map(Into::into),
            },
            call,
            Some(ret),
        )
    }

    fn cas(client: u32, exp: Option<&str>, new: &str, ok: bool, call: u64, ret: u64) -> Operation {
        op(
            client,
            RegisterInput::Cas {
                expected: exp.map(Into::into),
                new: new.into(),
            },
            RegisterOutput::Cas { succeeded: ok },
            call,
            Some(ret),
        )
    }

    fn run(history: &[Operation]) -> LinearizabilityReport {
        check(history, &HashMap::new(), &LinearizabilityConfig::default())
    }

    #[test]
    fn sequential_history_passes() {
        let h = vec![
            read(0, None, 0, 1),
            write(0, "a", 2, Some(3)),
            read(1, Some("a"), 4, 5),
            cas(1, Some("a"), "b", true, 6, 7),
            cas(0, Some("a"), "c", false, 8, 9),
            read(0, Some("b"), 10, 11),
        ];
        assert!(run(&h).passed);
    }

    #[test]
    fn concurrent_overlap_allows_either_order() {
        // The read overlaps the write, so it may see the old or the new value.
        let h = vec![
            write(0, "a", 0, Some(1)),
            write(0, "b", 10, Some(20)),
            read(1, Some("a"), 11, 12),
            read(2, Some("b"), 13, 14),
        ];
        assert!(run(&h).passed);
    }

    #[test]
    fn stale_read_is_a_violation() {
        // Planted: a read that starts after "b" was acknowledged still sees "a".
        let h = vec![
            write(0, "a", 0, Some(1)),
            write(0, "b", 2, Some(3)),
            read(1, Some("a"), 4, 5),
        ];
        let report = run(&h);
        assert!(!report.passed);
        match &report.keys[0].verdict {
            Verdict::Violation {
                stuck_at,
                explanation,
                ..
            } => {
                assert!(stuck_at.contains(&2), "{stuck_at:?}");
                assert!(explanation.contains("key k"), "{explanation}");
            }
            v => panic!("expected a violation, got {v:?}"),
        }
    }

    #[test]
    fn lost_write_is_a_violation() {
        // Planted: an acknowledged write is not seen by a later read (the old value comes back).
        let h = vec![
            write(0, "a", 0, Some(1)),
            cas(1, Some("a"), "b", true, 2, 3),
            read(0, Some("a"), 10, 11),
        ];
        assert!(!run(&h).passed);
    }

    #[test]
    fn timed_out_write_may_or_may_not_apply() {
        // The timed-out write of "x" shows up late for one reader...
        let h = vec![
            write(0, "a", 0, Some(1)),
            write(1, "x", 2, None),
            read(2, Some("a"), 5, 6),
            read(2, Some("x"), 100, 101),
        ];
        assert!(run(&h).passed);
        // ...and is never seen by another: both are fine.
        let h = vec![
            write(0, "a", 0, Some(1)),
            write(1, "x", 2, None),
            read(2, Some("a"), 100, 101),
        ];
        assert!(run(&h).passed);
        // But once seen, it cannot disappear while no other write happened.
        let h = vec![
            write(0, "a", 0, Some(1)),
            write(1, "x", 2, None),
            read(2, Some("x"), 10, 11),
            read(2, Some("a"), 20, 21),
        ];
        assert!(!run(&h).passed);
    }

    #[test]
    fn failed_cas_must_see_another_value() {
        // Planted: the CAS says the value was not "a" although nothing else was written.
        let h = vec![
            write(0, "a", 0, Some(1)),
            cas(1, Some("a"), "b", false, 2, 3),
        ];
        assert!(!run(&h).passed);
    }

    #[test]
    fn keys_are_checked_separately() {
        let mut other = write(0, "z", 0, Some(1));
        other.key = "other".into();
        let h = vec![write(0, "a", 0, Some(1)), read(1, Some("a"), 2, 3), other];
        let report = run(&h);
        assert!(report.passed);
        assert_eq!(report.keys.len(), 2);
    }

    #[test]
    fn budget_exhaustion_is_undecided_not_passed() {
        let mut h = Vec::new();
        for i in 0..40 {
            h.push(write(i, &format!("v{i}"), i as u64, None));
        }
        h.push(read(99, Some("never"), 100, 101));
        let report = check(
            &h,
            &HashMap::new(),
            &LinearizabilityConfig { step_budget: 1000 },
        );
        assert!(!report.passed);
        assert!(matches!(report.keys[0].verdict, Verdict::Undecided { .. }));
    }

    /// Thousands of operations from a few concurrent clients with some timeouts check fast.
    #[test]
    fn large_concurrent_history_is_fast() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        // Simulate a correct register: each op takes effect at a random point inside its window.
        let clients = 6;
        let mut t = vec![0u64; clients];
        let mut events: Vec<(u64, usize, u64, u64)> = Vec::new(); // (point, client, call, ret)
        for _ in 0..6000 {
            let c = rng.gen_range(0..clients);
            let call = t[c] + rng.gen_range(1..50);
            let ret = call + rng.gen_range(1..200);
            let point = rng.gen_range(call..ret);
            t[c] = ret;
            events.push((point, c, call, ret));
        }
        events.sort();
        let mut state: Option<String> = None;
        let mut h = Vec::new();
        for (i, (_, c, call, ret)) in events.into_iter().enumerate() {
            let kind = rng.gen_range(0..10);
            let timed_out = rng.gen_range(0..400) == 0;
            let o = if kind < 4 {
                read(c as u32, state.as_deref(), call, ret)
            } else if kind < 7 {
                let v = format!("w{i}");
                state = Some(v.clone());
                write(c as u32, &v, call, if timed_out { None } else { Some(ret) })
            } else {
                let expected = if rng.gen_bool(0.5) {
                    state.clone()
                } else {
                    Some("nope".into())
                };
                let ok = expected == state;
                let v = format!("c{i}");
                if ok {
                    state = Some(v.clone());
                }
                cas(c as u32, expected.as_deref(), &v, ok, call, ret)
            };
            h.push(o);
        }
        let started = Instant::now();
        let report = run(&h);
        assert!(report.passed, "{:?}", report.keys[0].verdict);
        assert!(
            started.elapsed().as_secs() < 10,
            "took {:?}",
            started.elapsed()
        );
    }

    #[test]
    fn resolving_drops_unapplied_and_bounds_applied() {
        let h = vec![
            write(0, "a", 0, None),
            write(1, "b", 5, None),
            read(2, Some("a"), 10, 20),
        ];
        let resolved = resolve_ambiguous(&h, |k, v| k == "k" && v == "a");
        assert_eq!(resolved.len(), 2);
        assert_eq!(resolved[0].output, RegisterOutput::Written);
        assert_eq!(resolved[0].return_ns, Some(20));
        assert!(run(&resolved).passed);
    }
}
