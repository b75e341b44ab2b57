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
mod output;
mod pair_rules;
mod rows;
mod summary;

pub use memory::WINDOW_ALIGN;
pub use output::{Analysis, BufferDesc, CandidateRow, CopySummary, Decision, ReasonSummary};

use crate::model::Model;
use crate::pairing;
use crate::plan::{Plan, Thresholds};
use crate::safety::Ctx;
use crate::trace::{Frame, Trace};
use std::collections::BTreeSet;

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
