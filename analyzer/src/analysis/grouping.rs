//! Steps 4–5: per device buffer, its surviving candidates become one group — the direction
//! (staging into device when the staging buffers have their own allocations and no other
//! partner, else device into staging with one member), then group-wide S1/S2, member by member.

use super::memory::{own_memory, skip_allocation};
use super::output::buffer_ref;
use crate::model::{BufId, Model};
use crate::pairing::{self, Candidate};
use crate::plan::{Direction, Group, Member, Role, SubstituteSync, Thresholds};
use crate::safety::{compat, s1_value, s2_order, s4_lifetime, Cause, Ctx, GroupSpec, Verdict};
use std::collections::{BTreeMap, BTreeSet};

/// The groups formed, and which candidates they accepted.
pub(super) struct Formed {
    /// Candidate index → (group id, direction).
    pub accepted: BTreeMap<usize, (u32, Direction)>,
    pub groups: Vec<Group>,
    /// Per group, its device buffer.
    pub devices: Vec<BufId>,
}

/// Groups from the candidates that passed the per-pair rules; a candidate left out gets its
/// verdict in `verdict`.
pub(super) fn form(
    ctx: &Ctx,
    cands: &[Candidate],
    delta: &[Option<i64>],
    t: Thresholds,
    verdict: &mut [Option<Verdict>],
) -> Formed {
    let m = ctx.m;
    // Partners per staging buffer, over every candidate.
    let mut partners: BTreeMap<BufId, BTreeSet<BufId>> = BTreeMap::new();
    for c in cands {
        partners.entry(c.staging).or_default().insert(c.device);
    }
    let mut by_device: BTreeMap<BufId, Vec<usize>> = BTreeMap::new();
    for (i, c) in cands.iter().enumerate() {
        if verdict[i].is_none() {
            by_device.entry(c.device).or_default().push(i);
        }
    }
    let mut out = Formed {
        accepted: BTreeMap::new(),
        groups: Vec::new(),
        devices: Vec::new(),
    };
    for (d, mut idx) in by_device {
        idx.sort_by_key(|&i| std::cmp::Reverse(cands[i].bytes()));
        let own = |i: usize| owns_allocation(m, &partners, &cands[i]);
        let (members, direction, mut why) = members(ctx, cands, delta, t, &idx, &own);
        let kept = group_wide(ctx, cands, delta, d, &members, &mut why);
        if kept.is_empty() {
            for &i in &idx {
                verdict[i] = why.remove(&i);
            }
            continue;
        }
        let gid = out.groups.len() as u32 + 1;
        let partner_list: Vec<String> = kept
            .iter()
            .map(|&i| format!("#{}", m.buffers[cands[i].staging].number))
            .collect();
        for &i in &idx {
            if kept.contains(&i) {
                out.accepted.insert(i, (gid, direction));
            } else {
                verdict[i] =
                    Some(why.remove(&i).unwrap_or_else(|| {
                        taken(ctx, &cands[i], &partner_list, direction, own(i))
                    }));
            }
        }
        out.groups
            .push(make_group(ctx, gid, d, cands, &kept, delta, direction));
        out.devices.push(d);
    }
    out
}

/// The staging buffer has its own allocation and no other partner: it can be bound into the
/// device buffer's memory (`staging_into_device`).
fn owns_allocation(m: &Model, partners: &BTreeMap<BufId, BTreeSet<BufId>>, c: &Candidate) -> bool {
    let h = c.staging;
    partners[&h].len() == 1
        && m.buffers[h]
            .bind
            .as_ref()
            .is_some_and(|b| m.memories[b.memory].owned_by(h))
}

/// Compatibility and S4 for a pair in one direction.
fn direction_checks(
    ctx: &Ctx,
    c: &Candidate,
    delta: Option<i64>,
    dir: Direction,
) -> Result<(), Verdict> {
    let dl = delta.unwrap_or(0);
    compat::check(ctx, c.staging, c.device, dl, dir)?;
    compat::held_back(ctx, c.staging, c.device, dir)?;
    s4_lifetime::check(ctx, c.staging, c.device, dl, dir)?;
    if dir == Direction::StagingIntoDevice {
        compat::mapped_before_bind(ctx, c.staging, c.device)?;
    }
    Ok(())
}

/// Step 4: a device buffer's members before the group-wide checks (`idx`: its candidates,
/// largest traffic first), their direction, and why the others were refused. Staging into
/// device takes every own-allocation member that passes; when none does, device into staging
/// takes the first that passes, and never a one-time transfer.
fn members(
    ctx: &Ctx,
    cands: &[Candidate],
    delta: &[Option<i64>],
    t: Thresholds,
    idx: &[usize],
    own: &dyn Fn(usize) -> bool,
) -> (Vec<usize>, Direction, BTreeMap<usize, Verdict>) {
    let mut members: Vec<usize> = Vec::new();
    let mut why: BTreeMap<usize, Verdict> = BTreeMap::new();
    for &i in idx.iter().filter(|&&i| own(i)) {
        match direction_checks(ctx, &cands[i], delta[i], Direction::StagingIntoDevice) {
            Ok(()) => members.push(i),
            Err(v) => {
                why.insert(i, v);
            }
        }
    }
    if !members.is_empty() {
        return (members, Direction::StagingIntoDevice, why);
    }
    for &i in idx {
        if pairing::is_one_time(ctx.m, &cands[i]) && t.min_copies > 1 {
            let v = one_time(ctx, &cands[i], why.remove(&i));
            why.insert(i, v);
            continue;
        }
        match direction_checks(ctx, &cands[i], delta[i], Direction::DeviceIntoStaging) {
            Ok(()) => {
                members.push(i);
                break;
            }
            Err(v) => {
                let v = both_directions_fail(why.remove(&i), v);
                why.insert(i, v);
            }
        }
    }
    (members, Direction::DeviceIntoStaging, why)
}

/// A one-time transfer is not taken device into staging; `first`: why staging into device
/// refused it, when it was tried.
fn one_time(ctx: &Ctx, c: &Candidate, first: Option<Verdict>) -> Verdict {
    let dnum = ctx.m.buffers[c.device].number;
    let download = c.role() == Role::Readback;
    match first {
        // Its own allocation, refused staging into device: that is the cause; the other
        // direction is not tried for a single transfer.
        Some(first) => Verdict {
            message: format!(
                "{}; device into staging is not tried for a single transfer: binding the device buffer into the staging allocation would keep that alive and raise the footprint",
                first.message
            ),
            ..first
        },
        None => Verdict {
            cause: Cause::OneTime,
            event: c.links.first().map(|l| l.recorded),
            message: format!(
                "threshold: a single {} {} device buffer #{dnum}, then the staging buffer is destroyed; worth it only with the staging buffer bound into the device buffer's memory, which is not possible here (it is sub-allocated or exchanges data with other buffers); binding the device buffer into the staging allocation would keep that alive and raise the footprint",
                if download { "download into" } else { "upload from" },
                if download {
                    format!("{} from", ctx.name(c.staging, "staging"))
                } else {
                    format!("{} into", ctx.name(c.staging, "staging"))
                }
            ),
            plain: format!(
                "{} {} device buffer #{dnum} once and is then destroyed, and it shares its memory with other buffers (sub-allocated, or it exchanges data with other buffers too). Sharing memory pays off only by placing the staging buffer inside the device buffer's memory, which is not possible here; the other way round would keep the staging memory alive and use more memory, not less.",
                crate::safety::upper(&ctx.short(c.staging, "staging")),
                if download { "takes the contents of" } else { "fills" }
            ),
        },
    }
}

/// Both directions failed: keep the preferred one's condition (`first`, when it was tried),
/// say both.
fn both_directions_fail(first: Option<Verdict>, v: Verdict) -> Verdict {
    match first {
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
    }
}

/// Step 5: members join device buffer `d`'s group one by one as long as S1 and S2 hold for the
/// group as a whole (members share bytes with each other, not only with the device buffer).
/// Returns the members kept; the others' reasons go into `why`.
fn group_wide(
    ctx: &Ctx,
    cands: &[Candidate],
    delta: &[Option<i64>],
    d: BufId,
    members: &[usize],
    why: &mut BTreeMap<usize, Verdict>,
) -> Vec<usize> {
    let m = ctx.m;
    let dnum = m.buffers[d].number;
    let mut spec = GroupSpec {
        device: d,
        members: Vec::new(),
    };
    let mut kept: Vec<usize> = Vec::new();
    for &i in members {
        let mut trial = spec.clone();
        trial
            .members
            .push((cands[i].staging, delta[i].unwrap_or(0)));
        let r = if trial.members.len() == 1 {
            Ok(())
        } else {
            s2_order::check(ctx, &trial).and_then(|_| s1_value::check(ctx, &trial))
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
    kept
}

/// A candidate that passed its checks but did not join: the device buffer already shares its
/// memory with `partner_list`.
fn taken(
    ctx: &Ctx,
    c: &Candidate,
    partner_list: &[String],
    direction: Direction,
    own: bool,
) -> Verdict {
    let dnum = ctx.m.buffers[c.device].number;
    Verdict {
        cause: Cause::CompatTaken,
        event: None,
        message: format!(
            "compat: device buffer #{dnum} already shares memory with staging {} ({}); {} cannot share it too{}",
            partner_list.join(", "),
            match direction {
                Direction::DeviceIntoStaging => "bound into that staging range",
                Direction::StagingIntoDevice => "bound into the device allocation",
            },
            ctx.name(c.staging, "staging"),
            if own { "" } else { " (it is sub-allocated or exchanges data with other buffers, so it cannot be bound into the device buffer's memory)" }
        ),
        plain: format!(
            "Device buffer #{dnum} already shares its memory with staging {}; {} cannot share it as well.",
            partner_list.join(", "),
            ctx.short(c.staging, "staging")
        ),
    }
}

/// The plan's group: its members with their allocations, the traffic it saves, and whether its
/// savings extrapolate.
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
