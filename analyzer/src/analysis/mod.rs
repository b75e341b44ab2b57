//! From a trace to a plan, with every decision explained (DESIGN §5).
//!
//! 1. [`Model::build`] replays the trace into per-object histories.
//! 2. [`pairing::candidates`]: every (staging, partner) pair linked by executed copies, roles from
//!    behaviour (the side the host touches is staging); the copies that made no pair, by reason.
//! 3. Per candidate, in this order, the first failing rule rejects it: reuse over time, one
//!    constant offset, thresholds, S3 pointer, untracked uses, S2 order and S1 value for the pair
//!    (`pair_rules`).
//! 4. Per device buffer, its surviving candidates become one group. `StagingIntoDevice` when the
//!    staging buffers have their own allocations and no other partner (then several members, each
//!    checked for compatibility and S4 in that direction); otherwise `DeviceIntoStaging` with the one
//!    member that passes compatibility and S4 in that direction. One-time uploads are only taken
//!    `StagingIntoDevice` (the other direction would keep the staging allocation alive) (`grouping`).
//! 5. Members join a group one by one (largest traffic first) as long as S1 and S2 hold for the
//!    group as a whole: members share bytes with each other, not only with the device buffer
//!    (`grouping`); which allocations enforce may leave unmade (`memory`); one row per
//!    candidate and the plan's rejections (`rows`).
//! 6. [`CopySummary`]: every copy of the trace, and by reason why those outside accepted pairs
//!    stayed out, with the setting or code change that would change it (`summary`).

mod grouping;
mod memory;
mod pair_rules;
mod rows;
mod summary;

pub use memory::WINDOW_ALIGN;

use crate::model::{BufId, Model};
use crate::pairing;
use crate::plan::{BufferRef, Condition, Direction, Plan, Role, Thresholds};
use crate::safety::Ctx;
use crate::trace::{Frame, ObjectKey, Trace};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

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
                    role: crate::report::role_words(m.role).into(),
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
                        role: crate::report::role_words(c.role).into(),
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

/// A creation site without symbolization: `module+0xoffset` of the first frame outside the
/// Vulkan loader and layers.
pub fn plain_site(stack: &[Frame]) -> String {
    app_frame(stack)
        .map(|f| format!("{}+{:#x}", f.module, f.offset))
        .unwrap_or_default()
}

/// The innermost frame that belongs to the application (not the loader, not a layer).
pub fn app_frame(stack: &[Frame]) -> Option<&Frame> {
    let outside = |f: &&Frame| {
        let base = f.module.rsplit('/').next().unwrap_or(&f.module);
        !(base.starts_with("libvulkan") || base.starts_with("libVkLayer"))
    };
    stack.iter().find(outside).or_else(|| stack.first())
}

/// The plan for a trace.
pub fn analyze(trace: &Trace, t: Thresholds) -> Plan {
    explain(trace, t, &plain_site).plan
}

/// The plan with one row per candidate and every reason; `site` names creation sites.
///
/// A process may create several devices (one after another or at once); each device's traffic
/// (the records with its `dev`) is analyzed on its own — handles of different devices may be
/// equal, and a pair never spans two devices — and the groups and rows say which device they
/// belong to. Group ids stay unique across devices.
pub fn explain(trace: &Trace, t: Thresholds, site: &dyn Fn(&[Frame]) -> String) -> Analysis {
    let devices = device_indices(trace);
    if devices.len() <= 1 {
        let mut a = explain_device(trace, t, site);
        tag_device(&mut a, devices.first().copied().unwrap_or(0), 0);
        crate::classes::form(trace, &mut a.plan);
        a.members = a.member_statuses();
        return a;
    }
    let mut out = Analysis {
        plan: Plan::empty(trace.header.context.clone(), t),
        candidates: Vec::new(),
        warnings: Vec::new(),
        truncated: trace.truncated,
        copies: CopySummary::default(),
        members: Vec::new(),
    };
    for d in devices {
        let sub = trace.for_device(d);
        let mut a = explain_device(&sub, t, site);
        tag_device(&mut a, d, out.plan.groups.len() as u32);
        out.plan.groups.append(&mut a.plan.groups);
        out.plan.rejected.append(&mut a.plan.rejected);
        out.candidates.append(&mut a.candidates);
        out.warnings
            .extend(a.warnings.into_iter().map(|w| format!("device {d}: {w}")));
        let c = &mut out.copies;
        c.copies += a.copies.copies;
        c.bytes = c.bytes.saturating_add(a.copies.bytes);
        c.accepted_copies += a.copies.accepted_copies;
        c.accepted_bytes = c.accepted_bytes.saturating_add(a.copies.accepted_bytes);
        c.unknown_copies += a.copies.unknown_copies;
        c.reasons.extend(a.copies.reasons.into_iter().map(|mut r| {
            r.explanation = format!("device {d}: {}", r.explanation);
            r
        }));
    }
    crate::classes::form(trace, &mut out.plan);
    out.members = out.member_statuses();
    out
}

/// The device indices a trace holds records of (`dev`, and `DeviceCreate::device_index`).
pub fn device_indices(trace: &Trace) -> Vec<u32> {
    use crate::trace::Event;
    let mut v: BTreeSet<u32> = trace.records.iter().map(|r| r.dev).collect();
    for r in &trace.records {
        if let Event::DeviceCreate { device_index, .. } = &r.event {
            v.insert(*device_index);
        }
    }
    v.into_iter().collect()
}

/// Marks an analysis of one device's records with its index; group ids move up by `first_id`.
fn tag_device(a: &mut Analysis, device: u32, first_id: u32) {
    for g in &mut a.plan.groups {
        g.id += first_id;
        g.device_index = device;
    }
    for r in &mut a.plan.rejected {
        r.device_index = device;
    }
    for row in &mut a.candidates {
        row.device_index = device;
        if let Decision::Accepted { group, .. } = &mut row.decision {
            *group += first_id;
        }
    }
}

/// The model's warnings, after a word on a truncated trace.
fn warnings(trace: &Trace, m: &Model) -> Vec<String> {
    let mut warnings = m.warnings.clone();
    if trace.truncated {
        warnings.insert(
            0,
            format!(
                "the trace was truncated (last event {}): the analysis covers only what was recorded, and a hazard after the cut would go unseen; re-profile with a larger trace_max_bytes",
                m.last_seq
            ),
        );
    }
    warnings
}

/// [`explain`] for the records of one device.
fn explain_device(trace: &Trace, t: Thresholds, site: &dyn Fn(&[Frame]) -> String) -> Analysis {
    let m = Model::build(trace);
    let created_at: Vec<String> = m.buffers.iter().map(|b| site(&b.stack)).collect();
    let ctx = Ctx {
        m: &m,
        created_at: &created_at,
    };
    let (cands, skipped) = pairing::candidates(&m);
    let reuse = pairing::reuse(&m, &cands);

    // Step 3: per-pair rules.
    let (mut verdict, delta) = pair_rules::verdicts(trace, &ctx, &cands, &reuse, t);

    // Step 4–5: groups per device buffer.
    let mut formed = grouping::form(&ctx, &cands, &delta, t, &mut verdict);

    // Rows and rejections.
    let mut plan = Plan::empty(trace.header.context.clone(), t);
    let (rows, rejected) = rows::rows(&ctx, &cands, &verdict, &formed.accepted, &delta, t);
    plan.rejected = rejected;
    memory::device_memories(&m, &mut formed.groups, &formed.devices);
    plan.groups = formed.groups;

    let warnings = warnings(trace, &m);
    let copies = summary::summarize(&m, &cands, &skipped, &verdict, t);
    Analysis {
        plan,
        candidates: rows,
        warnings,
        truncated: trace.truncated,
        copies,
        members: Vec::new(),
    }
}

pub(super) fn buffer_ref(ctx: &Ctx, b: BufId) -> BufferRef {
    let buf = &ctx.m.buffers[b];
    BufferRef {
        key: buf.key.clone(),
        usage: buf.usage,
        created_at: ctx.created_at[b].clone(),
    }
}
