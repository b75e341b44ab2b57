//! What an analysis gives (its types, below the steps that fill them, so that `rows`,
//! `grouping` and `summary` name them without naming the module that calls them): one row per
//! candidate pair, the copy summary, the member statuses.

use crate::model::BufId;
use crate::plan::{BufferRef, Condition, Direction, Plan, Role};
use crate::safety::Ctx;
use crate::trace::ObjectKey;
use serde::{Deserialize, Serialize};

/// A buffer as reports show it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BufferDesc {
    /// Creation order, 1-based (`#3` in messages).
    pub number: usize,
    pub key: ObjectKey,
    pub size: u64,
    pub usage: u32,
    pub created_at: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    Accepted {
        group: u32,
        direction: Direction,
        one_time: bool,
    },
    Rejected {
        condition: Condition,
        event: Option<u64>,
        message: String,
        /// The same in plain words (issue 16).
        #[serde(default)]
        plain: String,
        /// The cause's key (issue 24): the copy summary counts this pair under the reason of
        /// the same name (`CopySummary::reasons[].reason`). Absent in older output.
        #[serde(default)]
        reason: String,
        /// What would change the decision, from the same cause as `condition` and `reason`.
        #[serde(default)]
        remedy: String,
    },
}

/// One candidate pair: the row of `vkecho analyze`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CandidateRow {
    /// The device of the process the pair belongs to ([`Group::device_index`]).
    #[serde(default)]
    pub device_index: u32,
    pub staging: BufferDesc,
    pub device: BufferDesc,
    pub role: Role,
    /// The pair's offset when its copies kept one (byte `i` of device ↔ byte `i + delta` of staging).
    pub delta: Option<i64>,
    /// Executed copies and bytes between the two, in the whole trace.
    pub copies: u64,
    pub bytes: u64,
    /// Submissions that carried those copies.
    pub iterations: u64,
    pub copies_per_iter: f64,
    pub bytes_per_iter: u64,
    /// Sampled host-access validation of the staging buffer: windows watched of all (absent:
    /// every window was watched).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_coverage: Option<crate::sampling::Coverage>,
    #[serde(flatten)]
    pub decision: Decision,
}

/// Everything `vkecho analyze` shows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Analysis {
    pub plan: Plan,
    pub candidates: Vec<CandidateRow>,
    pub warnings: Vec<String>,
    pub truncated: bool,
    /// Every copy of the trace, and why those outside accepted pairs stayed out.
    #[serde(default)]
    pub copies: CopySummary,
    /// Member by member, per group ([`Analysis::member_statuses`], issue 36): the records
    /// enforce's statistics hold per member (`Stats::members`). Absent in older output.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<crate::stats::MemberStatus>,
}

impl Analysis {
    /// Member by member (issue 36), per group: each staging buffer the plan holds (`applied`:
    /// the plan applies it), then each other candidate partner of the group's device buffer,
    /// refused with its plain sentence (which holds enforce's words where enforce decides the
    /// same thing, `crate::apply`). The record enforce's statistics hold per member
    /// (`Stats::members`), so reports can put the two side by side.
    pub fn member_statuses(&self) -> Vec<crate::stats::MemberStatus> {
        let mut out = Vec::new();
        for g in &self.plan.groups {
            for (i, m) in g.members.iter().enumerate() {
                out.push(crate::stats::MemberStatus {
                    device_index: g.device_index,
                    group: g.id,
                    member: Some(i as u32),
                    staging: m.staging.key.to_string(),
                    role: crate::plan::role_words(m.role).into(),
                    applied: true,
                    reason: String::new(),
                });
            }
            for c in &self.candidates {
                if c.device_index != g.device_index || c.device.key != g.device.key {
                    continue;
                }
                if let Decision::Rejected { message, plain, .. } = &c.decision {
                    out.push(crate::stats::MemberStatus {
                        device_index: g.device_index,
                        group: g.id,
                        member: None,
                        staging: c.staging.key.to_string(),
                        role: crate::plan::role_words(c.role).into(),
                        applied: false,
                        reason: if plain.is_empty() { message } else { plain }.clone(),
                    });
                }
            }
        }
        out
    }
}

/// How many buffer copies the trace holds and, by reason, why the ones outside accepted pairs
/// are not there — with the setting or code change that would change that.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopySummary {
    /// Executed copies between buffers the trace knows, and their bytes.
    pub copies: u64,
    pub bytes: u64,
    /// Of those, the copies of accepted pairs.
    pub accepted_copies: u64,
    pub accepted_bytes: u64,
    /// Recorded copies that name a buffer the trace does not know.
    pub unknown_copies: u64,
    pub reasons: Vec<ReasonSummary>,
}

/// One reason copies stayed outside accepted pairs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReasonSummary {
    /// `threshold`, `one_time`, `reuse`, `offset`, `gpu_only`, `host_both`, `host_neither`,
    /// `no_evidence`, `same_buffer`, `unknown_buffer`, or a safety condition (`S1` … `evidence`).
    pub reason: String,
    /// Buffer pairs (for `unknown_buffer`: 0).
    pub pairs: u64,
    pub copies: u64,
    pub bytes: u64,
    /// What the copies have in common, for people.
    pub explanation: String,
    /// The setting or code change that would make them candidates (or why none should).
    pub remedy: String,
}

/// The plan's reference to a buffer of the model.
pub(super) fn buffer_ref(ctx: &Ctx, b: BufId) -> BufferRef {
    let buf = &ctx.m.buffers[b];
    BufferRef {
        key: buf.key.clone(),
        usage: buf.usage,
        created_at: ctx.created_at[b].clone(),
    }
}
