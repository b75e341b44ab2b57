//! The safety conditions of DESIGN §5, one file each. Every check returns `Ok(())` or a
//! [`Verdict`]: the condition, the trace event that showed it, and a sentence a person can act on.

pub mod cause;
pub mod compat;
pub mod extrapolate;
pub mod reach;
pub mod s1_value;
pub mod s2_order;
pub mod s3_pointer;
pub mod s4_lifetime;

use crate::model::{BufId, Model};
use crate::plan::Condition;
pub use cause::Cause;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Why: the condition, the summary key and the remedy all come from it (issue 24).
    pub cause: Cause,
    pub event: Option<u64>,
    /// The detail: the condition, the events and buffers that showed it, what to change.
    pub message: String,
    /// The same in plain words, for someone who has not read the trace (issue 16): what the
    /// program does and what sharing memory would change. Names buffers by number only; the
    /// report adds where each was created.
    pub plain: String,
}

impl Verdict {
    /// The pair's condition, from its cause.
    pub fn condition(&self) -> Condition {
        self.cause
            .condition()
            .expect("a verdict refuses a pair, so its cause has a condition")
    }
}

/// "staging buffer #2" → "Staging buffer #2" (plain words start a sentence).
pub fn upper(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// What the checks need besides the model: how to name a buffer for people.
pub struct Ctx<'a> {
    pub m: &'a Model,
    /// Per buffer id: where it was created (symbolized, or `module+0xoffset`), maybe empty.
    pub created_at: &'a [String],
}

impl Ctx<'_> {
    /// "staging buffer #3", for plain words.
    pub fn short(&self, b: BufId, what: &str) -> String {
        format!("{what} buffer #{}", self.m.buffers[b].number)
    }

    /// "staging buffer #3 (created at samples/src/race.rs:88)".
    pub fn name(&self, b: BufId, what: &str) -> String {
        let n = self.m.buffers[b].number;
        match self.created_at.get(b).filter(|s| !s.is_empty()) {
            Some(at) => format!("{what} buffer #{n} (created at {at})"),
            None => format!("{what} buffer #{n}"),
        }
    }
}

/// The buffers that would share one memory range: a device buffer and staging members, each with
/// its offset (byte `i` of the device buffer is byte `i + delta` of the member).
#[derive(Clone, Debug)]
pub struct GroupSpec {
    pub device: BufId,
    pub members: Vec<(BufId, i64)>,
}

impl GroupSpec {
    pub fn single(device: BufId, staging: BufId, delta: i64) -> GroupSpec {
        GroupSpec {
            device,
            members: vec![(staging, delta)],
        }
    }
    pub fn is_member(&self, b: BufId) -> bool {
        self.members.iter().any(|m| m.0 == b)
    }
    pub fn contains(&self, b: BufId) -> bool {
        b == self.device || self.is_member(b)
    }
}
