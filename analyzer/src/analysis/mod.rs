//! From a trace to a plan, with every decision explained (DESIGN §5).
//!
//! 1. [`Model::build`] replays the trace into per-object histories.
//! 2. [`pairing::candidates`]: every (staging, partner) pair linked by executed copies, roles from
//!    behaviour (the side the host touches is staging); the copies that made no pair, by reason.
//! 3. Per candidate, in this order, the first failing rule rejects it: reuse over time, one
//!    constant offset, thresholds, S3 pointer, untracked uses, S2 order and S1 value for the pair.
//! 4. Per device buffer, its surviving candidates become one group. `StagingIntoDevice` when the
//!    staging buffers have their own allocations and no other partner (then several members, each
//!    checked for compatibility and S4 in that direction); otherwise `DeviceIntoStaging` with the one
//!    member that passes compatibility and S4 in that direction. One-time uploads are only taken
//!    `StagingIntoDevice` (the other direction would keep the staging allocation alive).
//! 5. Members join a group one by one (largest traffic first) as long as S1 and S2 hold for the
//!    group as a whole: members share bytes with each other, not only with the device buffer.
//! 6. [`CopySummary`]: every copy of the trace, and by reason why those outside accepted pairs
//!    stayed out, with the setting or code change that would change it.

mod pair_rules;
mod summary;

use crate::model::{BufId, Model};
use crate::pairing::{self, Candidate};
use crate::plan::{
    BufferRef, Condition, DeviceMemory, Direction, Group, Member, Plan, Rejection, Role,
    SubstituteSync, Thresholds,
};
use crate::safety::{compat, s1_value, s2_order, s4_lifetime, Cause, Ctx, GroupSpec, Verdict};
use crate::trace::{Frame, ObjectKey, Trace};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

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
        return a;
    }
    let mut out = Analysis {
        plan: Plan::empty(trace.header.context.clone(), t),
        candidates: Vec::new(),
        warnings: Vec::new(),
        truncated: trace.truncated,
        copies: CopySummary::default(),
    };
    for d in devices {
        let sub = Trace {
            header: trace.header.clone(),
            records: trace
                .records
                .iter()
                .filter(|r| r.dev == d)
                .cloned()
                .collect(),
            truncated: trace.truncated,
        };
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

    // Partners per staging buffer, over every candidate.
    let mut partners: BTreeMap<BufId, BTreeSet<BufId>> = BTreeMap::new();
    for c in &cands {
        partners.entry(c.staging).or_default().insert(c.device);
    }

    // Step 4–5: groups per device buffer.
    let mut by_device: BTreeMap<BufId, Vec<usize>> = BTreeMap::new();
    for (i, c) in cands.iter().enumerate() {
        if verdict[i].is_none() {
            by_device.entry(c.device).or_default().push(i);
        }
    }
    let mut accepted: BTreeMap<usize, (u32, Direction)> = BTreeMap::new();
    let mut groups: Vec<Group> = Vec::new();
    let mut group_devices: Vec<BufId> = Vec::new();
    for (d, mut idx) in by_device {
        idx.sort_by_key(|&i| std::cmp::Reverse(cands[i].bytes()));
        let dnum = m.buffers[d].number;
        let own = |i: usize| {
            let h = cands[i].staging;
            partners[&h].len() == 1
                && m.buffers[h]
                    .bind
                    .as_ref()
                    .is_some_and(|b| m.memories[b.memory].owned_by(h))
        };
        let dir_checks = |i: usize, dir: Direction| -> Result<(), Verdict> {
            let c = &cands[i];
            let dl = delta[i].unwrap_or(0);
            compat::check(&ctx, c.staging, c.device, dl, dir)?;
            compat::held_back(&ctx, c.staging, c.device, dir)?;
            s4_lifetime::check(&ctx, c.staging, c.device, dl, dir)?;
            Ok(())
        };
        let mut members: Vec<usize> = Vec::new();
        let mut direction = Direction::StagingIntoDevice;
        let mut why: BTreeMap<usize, Verdict> = BTreeMap::new();
        for &i in idx.iter().filter(|&&i| own(i)) {
            match dir_checks(i, Direction::StagingIntoDevice) {
                Ok(()) => members.push(i),
                Err(v) => {
                    why.insert(i, v);
                }
            }
        }
        if members.is_empty() {
            direction = Direction::DeviceIntoStaging;
            for &i in &idx {
                if pairing::is_one_time(&m, &cands[i]) && t.min_copies > 1 {
                    let download = cands[i].role() == Role::Readback;
                    let v = match why.remove(&i) {
                        // Its own allocation, refused staging into device: that is the cause;
                        // the other direction is not tried for a single transfer.
                        Some(first) => Verdict {
                            message: format!(
                                "{}; device into staging is not tried for a single transfer: binding the device buffer into the staging allocation would keep that alive and raise the footprint",
                                first.message
                            ),
                            ..first
                        },
                        None => Verdict {
                            cause: Cause::OneTime,
                            event: cands[i].links.first().map(|l| l.recorded),
                            message: format!(
                                "threshold: a single {} {} device buffer #{dnum}, then the staging buffer is destroyed; worth it only with the staging buffer bound into the device buffer's memory, which is not possible here (it is sub-allocated or exchanges data with other buffers); binding the device buffer into the staging allocation would keep that alive and raise the footprint",
                                if download { "download into" } else { "upload from" },
                                if download {
                                    format!("{} from", ctx.name(cands[i].staging, "staging"))
                                } else {
                                    format!("{} into", ctx.name(cands[i].staging, "staging"))
                                }
                            ),
                            plain: format!(
                                "{} {} device buffer #{dnum} once and is then destroyed, and it shares its memory with other buffers (sub-allocated, or it exchanges data with other buffers too). Sharing memory pays off only by placing the staging buffer inside the device buffer's memory, which is not possible here; the other way round would keep the staging memory alive and use more memory, not less.",
                                crate::safety::upper(&ctx.short(cands[i].staging, "staging")),
                                if download { "takes the contents of" } else { "fills" }
                            ),
                        },
                    };
                    why.insert(i, v);
                    continue;
                }
                match dir_checks(i, Direction::DeviceIntoStaging) {
                    Ok(()) => {
                        members.push(i);
                        break;
                    }
                    Err(v) => {
                        // Both directions failed: keep the preferred one's condition, say both.
                        let v = match why.remove(&i) {
                            Some(first) => Verdict {
                                cause: first.cause,
                                event: first.event,
                                message: format!(
                                    "{} — and device into staging fails too: {}",
                                    first.message, v.message
                                ),
                                plain: first.plain,
                            },
                            None => v,
                        };
                        why.insert(i, v);
                    }
                }
            }
        }
        // Group-wide S1/S2, greedily.
        let mut spec = GroupSpec {
            device: d,
            members: Vec::new(),
        };
        let mut kept: Vec<usize> = Vec::new();
        for &i in &members {
            let mut trial = spec.clone();
            trial
                .members
                .push((cands[i].staging, delta[i].unwrap_or(0)));
            let r = if trial.members.len() == 1 {
                Ok(())
            } else {
                s2_order::check(&ctx, &trial).and_then(|_| s1_value::check(&ctx, &trial))
            };
            match r {
                Ok(()) => {
                    spec = trial;
                    kept.push(i);
                }
                Err(mut v) => {
                    let others: Vec<String> = spec
                        .members
                        .iter()
                        .map(|x| format!("#{}", m.buffers[x.0].number))
                        .collect();
                    v.message = format!(
                        "{} [as a member of the group of device buffer #{dnum} with staging {}]",
                        v.message,
                        others.join(", ")
                    );
                    v.plain = format!(
                        "{} (This is about sharing device buffer #{dnum}'s memory with staging {} as well.)",
                        v.plain,
                        others.join(", ")
                    );
                    why.insert(i, v);
                }
            }
        }
        if kept.is_empty() {
            for &i in &idx {
                verdict[i] = why.remove(&i);
            }
            continue;
        }
        let gid = groups.len() as u32 + 1;
        let partner_list: Vec<String> = kept
            .iter()
            .map(|&i| format!("#{}", m.buffers[cands[i].staging].number))
            .collect();
        for &i in &idx {
            if kept.contains(&i) {
                accepted.insert(i, (gid, direction));
            } else {
                verdict[i] = Some(why.remove(&i).unwrap_or_else(|| Verdict {
                    cause: Cause::CompatTaken,
                    event: None,
                    message: format!(
                        "compat: device buffer #{dnum} already shares memory with staging {} ({}); {} cannot share it too{}",
                        partner_list.join(", "),
                        match direction {
                            Direction::DeviceIntoStaging => "bound into that staging range",
                            Direction::StagingIntoDevice => "bound into the device allocation",
                        },
                        ctx.name(cands[i].staging, "staging"),
                        if own(i) { "" } else { " (it is sub-allocated or exchanges data with other buffers, so it cannot be bound into the device buffer's memory)" }
                    ),
                    plain: format!(
                        "Device buffer #{dnum} already shares its memory with staging {}; {} cannot share it as well.",
                        partner_list.join(", "),
                        ctx.short(cands[i].staging, "staging")
                    ),
                }));
            }
        }
        groups.push(make_group(&ctx, gid, d, &cands, &kept, &delta, direction));
        group_devices.push(d);
    }

    // Rows and rejections.
    let desc = |b: BufId| {
        let buf = &m.buffers[b];
        BufferDesc {
            number: buf.number,
            key: buf.key.clone(),
            size: buf.size,
            usage: buf.usage,
            created_at: created_at[b].clone(),
        }
    };
    let mut plan = Plan::empty(trace.header.context.clone(), t);
    let mut rows = Vec::new();
    for (i, c) in cands.iter().enumerate() {
        let iterations = c.iterations().max(1);
        let decision = match (&verdict[i], accepted.get(&i)) {
            (Some(v), _) => {
                plan.rejected.push(Rejection {
                    device_index: 0,
                    device: buffer_ref(&ctx, c.device),
                    staging: buffer_ref(&ctx, c.staging),
                    condition: v.condition(),
                    event: v.event,
                    message: v.message.clone(),
                    plain: v.plain.clone(),
                    copies: c.copies(),
                    bytes: c.bytes(),
                });
                Decision::Rejected {
                    condition: v.condition(),
                    event: v.event,
                    message: v.message.clone(),
                    plain: v.plain.clone(),
                    reason: v.cause.key().into(),
                    remedy: v.cause.remedy(t),
                }
            }
            (None, Some(&(group, direction))) => Decision::Accepted {
                group,
                direction,
                one_time: pairing::is_one_time(&m, c),
            },
            (None, None) => unreachable!("every candidate is accepted or rejected"),
        };
        rows.push(CandidateRow {
            device_index: 0,
            staging: desc(c.staging),
            device: desc(c.device),
            role: c.role(),
            delta: delta[i],
            copies: c.copies(),
            bytes: c.bytes(),
            iterations,
            copies_per_iter: c.copies() as f64 / iterations as f64,
            bytes_per_iter: c.bytes() / iterations,
            host_coverage: m.coverage.get(&c.staging).copied(),
            decision,
        });
    }
    device_memories(&m, &mut groups, &group_devices);
    plan.groups = groups;

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
    let copies = summary::summarize(&m, &cands, &skipped, &verdict, t);
    Analysis {
        plan,
        candidates: rows,
        warnings,
        truncated: trace.truncated,
        copies,
    }
}

fn buffer_ref(ctx: &Ctx, b: BufId) -> BufferRef {
    let buf = &ctx.m.buffers[b];
    BufferRef {
        key: buf.key.clone(),
        usage: buf.usage,
        created_at: ctx.created_at[b].clone(),
    }
}

/// The key of `b`'s allocation and `b`'s offset in it, when `b` is the only buffer bound there.
fn own_memory(m: &Model, b: BufId) -> Option<(ObjectKey, u64)> {
    let bind = m.buffers[b].bind.as_ref()?;
    let mem = &m.memories[bind.memory];
    (mem.owned_by(b) && !mem.key.is_anonymous()).then(|| (mem.key.clone(), bind.offset))
}

/// Whether enforce may leave staging buffer `h`'s own allocation unmade (DESIGN §6 "Memory"):
/// `h` is a `staging_into_device` member of device buffer `d` at `delta`, and the trace shows
/// that every byte of the allocation the application used is one of `h`'s, that enforce can
/// recognise the allocation when it is made (its key, `h` already created, `d` already bound),
/// and that all of it fits in `d`'s allocation where `h`'s bytes will live. The error says, for
/// people, why the allocation is still made.
fn skip_allocation(m: &Model, d: BufId, h: BufId, delta: i64) -> Result<(), String> {
    let hb = &m.buffers[h];
    let bind = hb
        .bind
        .as_ref()
        .ok_or("the staging buffer was never bound")?;
    let mem = &m.memories[bind.memory];
    if !mem.owned_by(h) || mem.key.is_anonymous() {
        return Err("its allocation holds other buffers too, or has no identity".into());
    }
    if mem.external {
        return Err(
            "its allocation is external memory or has a capture address, which only the driver can provide"
                .into(),
        );
    }
    if mem.key.flags != 0 {
        return Err(format!(
            "its allocation has allocate flags {:#x} (device address or device mask)",
            mem.key.flags
        ));
    }
    if !mem.host_visible {
        return Err("its allocation is not host-visible".into());
    }
    if mem.dedicated_buffer.is_some_and(|x| x != h) {
        return Err("its allocation is dedicated to another buffer".into());
    }
    let (lo, hi) = (bind.offset, bind.offset.saturating_add(hb.bound_len()));
    if let Some(&(seq, off, len)) = mem
        .maps
        .iter()
        .find(|&&(_, off, len)| off < lo || off.saturating_add(len) > hi)
    {
        return Err(format!(
            "the host mapped bytes [{off}, {}) of its allocation at event {seq}, outside the staging buffer's range [{lo}, {hi})",
            off.saturating_add(len)
        ));
    }
    if hb.created > mem.allocated {
        return Err(format!(
            "its allocation was made (event {}) before the staging buffer was created (event {}); enforce recognises the allocation by its buffer",
            mem.allocated, hb.created
        ));
    }
    let db = m.buffers[d]
        .bind
        .as_ref()
        .ok_or("the device buffer was never bound")?;
    if db.seq > mem.allocated {
        return Err(format!(
            "its allocation was made (event {}) before the device buffer was bound (event {}), so where its bytes would live was not known yet",
            mem.allocated, db.seq
        ));
    }
    let dmem = &m.memories[db.memory];
    let shift = db.offset as i128 - delta as i128 - bind.offset as i128;
    if shift < 0 || shift + mem.size as i128 > dmem.size as i128 {
        return Err(format!(
            "its {}-byte allocation would lie at [{shift}, {}) of the {}-byte device allocation",
            mem.size,
            shift + mem.size as i128,
            dmem.size
        ));
    }
    Ok(())
}

/// The window of a partly made allocation starts at a multiple of this (so a buffer keeps its
/// alignment when its offset moves down by the window's start).
pub const WINDOW_ALIGN: u64 = 1 << 16;

/// `device_into_staging` groups whose device buffer's allocation enforce need not make in full
/// (DESIGN §6 "Memory", plan `device_memory`).
fn device_memories(m: &Model, groups: &mut [Group], devices: &[BufId]) {
    let members: BTreeSet<BufId> = groups
        .iter()
        .zip(devices)
        .filter(|(g, _)| g.direction == Direction::DeviceIntoStaging)
        .map(|(_, &d)| d)
        .collect();
    for (g, &d) in groups.iter_mut().zip(devices) {
        if g.direction == Direction::DeviceIntoStaging {
            g.device_memory = device_memory(m, &members, d).ok();
        }
    }
}

/// Whether enforce may make only part of device buffer `d`'s allocation: the trace shows it
/// never mapped, not external, without allocate flags, host-visible (a late allocation must be
/// able to take its bytes), dedicated to nothing but a member; every buffer bound into it outside
/// one window `[lo, hi)` is the device buffer of a `device_into_staging` group (`members`). The
/// window is the hull of the other buffers' ranges (empty when there are none), its start
/// rounded down to [`WINDOW_ALIGN`]; it must leave something out.
fn device_memory(m: &Model, members: &BTreeSet<BufId>, d: BufId) -> Result<DeviceMemory, String> {
    let bind = m.buffers[d].bind.as_ref().ok_or("never bound")?;
    let mem = &m.memories[bind.memory];
    if mem.key.is_anonymous() || mem.external || mem.key.flags != 0 || !mem.host_visible {
        return Err("no identity, external, allocate flags or not host-visible".into());
    }
    if !mem.maps.is_empty() {
        return Err("mapped by the host".into());
    }
    if mem.dedicated_buffer.is_some_and(|b| !members.contains(&b)) {
        return Err("dedicated to another buffer".into());
    }
    let mut window: Option<(u64, u64)> = None;
    for &(b, off, _) in &mem.binds {
        if members.contains(&b) {
            continue;
        }
        let end = off.saturating_add(m.buffers[b].bound_len());
        window = Some(match window {
            None => (off, end),
            Some((lo, hi)) => (lo.min(off), hi.max(end)),
        });
    }
    let (lo, hi) = window.map_or((0, 0), |(lo, hi)| (lo - lo % WINDOW_ALIGN, hi));
    if hi > mem.size || hi - lo >= mem.size {
        return Err("the other buffers span the allocation".into());
    }
    Ok(DeviceMemory {
        key: mem.key.clone(),
        window_lo: lo,
        window_hi: hi,
    })
}

fn make_group(
    ctx: &Ctx,
    id: u32,
    d: BufId,
    cands: &[Candidate],
    kept: &[usize],
    delta: &[Option<i64>],
    direction: Direction,
) -> Group {
    let m = ctx.m;
    let members: Vec<Member> = kept
        .iter()
        .map(|&i| {
            let c = &cands[i];
            let memory = own_memory(m, c.staging);
            let skip = match (direction, &memory) {
                (Direction::StagingIntoDevice, Some(_)) => {
                    skip_allocation(m, d, c.staging, delta[i].unwrap_or(0))
                }
                _ => Err(String::new()),
            };
            Member {
                staging: buffer_ref(ctx, c.staging),
                delta: delta[i].unwrap_or(0),
                role: c.role(),
                copies: c.copies(),
                bytes: c.bytes(),
                one_time: pairing::is_one_time(m, c),
                memory: memory.as_ref().map(|(k, _)| k.clone()),
                memory_offset: memory.as_ref().map_or(0, |(_, o)| *o),
                skip_allocation: skip.is_ok(),
                allocation_note: skip.err().unwrap_or_default(),
            }
        })
        .collect();
    let copies_total = members
        .iter()
        .map(|x| x.copies)
        .fold(0u64, u64::saturating_add);
    let bytes_total = members
        .iter()
        .map(|x| x.bytes)
        .fold(0u64, u64::saturating_add);
    // Steady state: the repeated members' bytes over the submissions that carried them.
    let mut subs = BTreeSet::new();
    let mut loop_bytes = 0u64;
    for &i in kept {
        if !pairing::is_one_time(m, &cands[i]) {
            subs.extend(cands[i].links.iter().map(|l| l.submission));
            loop_bytes = loop_bytes.saturating_add(cands[i].bytes());
        }
    }
    let bytes_saved_per_iter = if subs.is_empty() {
        bytes_total
    } else {
        loop_bytes / subs.len() as u64
    };
    let members_c: Vec<&Candidate> = kept.iter().map(|&i| &cands[i]).collect();
    let extrapolation = crate::safety::extrapolate::check(m, d, &members_c);
    let memory_saved = match direction {
        Direction::StagingIntoDevice => kept
            .iter()
            .map(|&i| m.buffers[cands[i].staging].bound_len())
            .fold(0u64, u64::saturating_add),
        Direction::DeviceIntoStaging => m.buffers[d].bound_len(),
    };
    Group {
        device_index: 0,
        id,
        device: buffer_ref(ctx, d),
        members,
        direction,
        sync: SubstituteSync::MemoryBarrier,
        bytes_saved_per_iter,
        copies_total,
        bytes_total,
        memory_saved,
        device_memory: None,
        device_mapped: m.host_mapped(d),
        extrapolable: extrapolation.is_ok(),
        not_extrapolable: extrapolation.err().unwrap_or_default(),
    }
}
