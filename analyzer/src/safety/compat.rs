//! Compatibility: the memory type must be allowed by both buffers' `memoryTypeBits`, the guest's
//! offset aligned to its requirement, the range large enough for the guest's memory requirement,
//! and no buffer of the pair used in a way the layer cannot follow (descriptor buffers,
//! acceleration structures …). lavapipe's `vkBindBufferMemory` accepts a misaligned offset or a
//! range past the end without complaint, so these are checked here, not left to the driver.
//!
//! Where enforce decides the same thing at run time, the analysis asks the same pure function
//! (`crate::apply`): the redirected bind (`check_redirect`: memory type bits, alignment, bounds)
//! and, for staging into device, the redirected map of the staging allocation
//! (`check_map_redirect`), so a group enforce would refuse in every run is refused in the plan.
//! [`held_back`] refuses a group whose guest buffer is named by a command recorded before the
//! buffer it is bound into is bound (enforce holds the guest's bind back until then).
//! [`mapped_before_bind`] refuses a staging-into-device member whose allocation the program
//! mapped before the device buffer was bound and still holds then (`apply::check_staging_mapping`,
//! issue 36); the group's other members are kept.

use super::{upper, Cause, Ctx, Verdict};
use crate::apply::{check_map_redirect, check_redirect, check_staging_mapping, Refusal, Target};
use crate::model::{BufId, OpKind};
use crate::plan::Direction;
use crate::trace::UseKind;

/// An untracked use of either buffer, in any submitted command.
pub fn untracked(ctx: &Ctx, staging: BufId, device: BufId) -> Result<(), Verdict> {
    let m = ctx.m;
    for s in 0..m.submissions.len() {
        if !(m.touched[s].contains(&staging) || m.touched[s].contains(&device)) {
            continue;
        }
        for op in m.ops(s) {
            if let OpKind::Use {
                buffer,
                kind: UseKind::Untracked,
                command,
                ..
            } = &op.kind
            {
                if *buffer == staging || *buffer == device {
                    let role = if *buffer == device {
                        "device"
                    } else {
                        "staging"
                    };
                    return Err(Verdict {
                        cause: Cause::CompatUntracked,
                        event: Some(op.recorded),
                        message: format!(
                            "compat: {command} (recorded at event {}) uses {} in a way the layer cannot follow (descriptor buffer, acceleration structure, …); its memory must stay as it is",
                            op.recorded,
                            ctx.name(*buffer, role)
                        ),
                        plain: format!(
                            "The program uses {} through {command} in a way echo cannot follow (a descriptor buffer, an acceleration structure, …), so its memory must stay as it is.",
                            ctx.short(*buffer, role)
                        ),
                    });
                }
            }
        }
    }
    Ok(())
}

fn verdict(event: Option<u64>, message: String, plain: String) -> Verdict {
    Verdict {
        cause: Cause::CompatMemory,
        event,
        message,
        plain,
    }
}

/// The memory type the shared range will have.
pub fn shared_type(ctx: &Ctx, staging: BufId, device: BufId, dir: Direction) -> Option<u32> {
    let m = ctx.m;
    let hm = &m.memories[m.buffers[staging].bind.as_ref()?.memory];
    let dm = &m.memories[m.buffers[device].bind.as_ref()?.memory];
    Some(match dir {
        Direction::DeviceIntoStaging => hm.type_index,
        // The device allocation is switched to a host-visible type where it is not one.
        Direction::StagingIntoDevice if dm.host_visible => dm.type_index,
        Direction::StagingIntoDevice => m.alias_type.unwrap_or(hm.type_index),
    })
}

pub fn check(
    ctx: &Ctx,
    staging: BufId,
    device: BufId,
    delta: i64,
    dir: Direction,
) -> Result<(), Verdict> {
    let m = ctx.m;
    let (h, d) = (&m.buffers[staging], &m.buffers[device]);
    for (b, role) in [(staging, "staging"), (device, "device")] {
        if m.buffers[b].bind.is_none() {
            return Err(verdict(
                Some(m.buffers[b].created),
                format!(
                    "compat: {} was never bound to memory in the trace",
                    ctx.name(b, role)
                ),
                format!(
                    "The program never gives {} any memory while profiling, so there is no memory to share.",
                    ctx.short(b, role)
                ),
            ));
        }
    }
    if dir == Direction::StagingIntoDevice {
        // The staging maps are served from the device allocation, so it must be host-visible;
        // the layer switches it to a host-visible type only when it is dedicated to the device
        // buffer (enforce's `allocation_type`), never a block the app sub-allocates others from.
        let db = d.bind.as_ref().expect("checked above");
        let dm = &m.memories[db.memory];
        if !dm.host_visible && dm.dedicated_buffer != Some(device) {
            return Err(verdict(
                Some(db.seq),
                format!(
                    "compat: the memory of {} (type {}) is not host-visible and not dedicated to it, so it cannot be given a host-visible type for the staging maps",
                    ctx.name(device, "device"),
                    dm.type_index
                ),
                format!(
                    "The memory of {} cannot be read by the CPU and holds other buffers too, so the program's staging writes could not go there.",
                    ctx.short(device, "device")
                ),
            ));
        }
    }
    let t = shared_type(ctx, staging, device, dir).unwrap_or(0);
    let (owner, guest, orole, grole, obuf, gbuf) = match dir {
        Direction::DeviceIntoStaging => (staging, device, "staging", "device", h, d),
        Direction::StagingIntoDevice => (device, staging, "device", "staging", d, h),
    };
    let ob = obuf.bind.as_ref().expect("checked above");
    let mem = &m.memories[ob.memory];
    // Where the guest starts relative to the owner, and in the owner's memory.
    let rel: i128 = match dir {
        Direction::DeviceIntoStaging => delta as i128,
        Direction::StagingIntoDevice => -(delta as i128),
    };
    let start = ob.offset as i128 + rel;
    // Enforce's own check of the binds (apply::check_redirect): the owner stays where the
    // program bound it, in memory of type `t` (only its type bits can fail); the guest is bound
    // at `start` of that memory (type bits, alignment, bounds).
    let at_owner = Target {
        memory_type: t,
        memory_size: mem.size,
        offset: ob.offset as i128,
    };
    let at_guest = Target {
        offset: start,
        ..at_owner
    };
    let refused = match check_redirect(&obuf.req, &at_owner) {
        Err(r @ Refusal::MemoryType { .. }) => Some((owner, orole, obuf, r)),
        _ => check_redirect(&gbuf.req, &at_guest)
            .err()
            .map(|r| (guest, grole, gbuf, r)),
    };
    if let Some((id, role, b, r)) = refused {
        let (event, message, plain) = match r {
            Refusal::MemoryType { .. } => (
                Some(b.created),
                format!(
                    "compat: the shared memory would be of type {t}, which {} does not allow ({r})",
                    ctx.name(id, role)
                ),
                format!(
                    "The driver does not allow {} in the kind of memory the two would share.",
                    ctx.short(id, role)
                ),
            ),
            Refusal::Alignment { .. } => (
                Some(ob.seq),
                format!(
                    "compat: {} would be bound at offset {start} of the memory of {}: {r}",
                    ctx.name(guest, grole),
                    ctx.name(owner, orole)
                ),
                format!(
                    "{} would not start at a position the driver allows inside the memory of {} (alignment).",
                    upper(&ctx.short(guest, grole)),
                    ctx.short(owner, orole)
                ),
            ),
            Refusal::Bounds { .. } => (
                Some(ob.seq),
                format!(
                    "compat: {} bound at offset {start} of the memory of {}: {r}",
                    ctx.name(guest, grole),
                    ctx.name(owner, orole)
                ),
                format!(
                    "{} does not fit inside the memory of {}.",
                    upper(&ctx.short(guest, grole)),
                    ctx.short(owner, orole)
                ),
            ),
        };
        return Err(verdict(event, message, plain));
    }
    // Staging into device: the staging allocation's maps are served from the device allocation
    // (enforce's apply::check_map_redirect), so the whole staging allocation must fit there.
    if dir == Direction::StagingIntoDevice {
        let hb = h.bind.as_ref().expect("checked above");
        let own = &m.memories[hb.memory];
        if let Err(why) = check_map_redirect(start, hb.offset, own.size, mem.size) {
            return Err(verdict(
                Some(hb.seq),
                format!(
                    "compat: {}'s maps cannot be served from the memory of {}: {why}",
                    ctx.name(staging, "staging"),
                    ctx.name(device, "device")
                ),
                format!(
                    "The memory block {} lives in is larger than the memory of {}, so the program's view of it could not come from there.",
                    ctx.short(staging, "staging"),
                    ctx.short(device, "device")
                ),
            ));
        }
    }
    // The guest's whole requirement must lie in the owner's range (or in the owner's allocation
    // when the owner has it to itself) and inside the allocation.
    let need = gbuf.req.size.max(gbuf.size) as i128;
    let room = if mem.owned_by(owner) {
        mem.size as i128 - ob.offset as i128
    } else {
        obuf.bound_len() as i128
    };
    if rel < 0 || rel + need > room || start + need > mem.size as i128 {
        return Err(verdict(
            Some(ob.seq),
            format!(
                "compat: {} needs {} bytes at offset {rel} of {}, which has room for {} there",
                ctx.name(guest, grole),
                need,
                ctx.name(owner, orole),
                (room - rel).max(0)
            ),
            format!(
                "{} does not fit inside the memory of {}.",
                upper(&ctx.short(guest, grole)),
                ctx.short(owner, orole)
            ),
        ));
    }
    Ok(())
}

/// The guest of the shared range (the device buffer when it is bound into the staging range, a
/// staging buffer when it is bound into the device allocation): enforce holds its bind back
/// until the buffer it is bound into (the host) is bound. A command recorded naming the guest
/// before then would reach the driver naming a buffer with no memory bound
/// (VUID-vkCmdCopyBuffer-dstBuffer-00121, VUID-VkBufferMemoryBarrier-buffer-01931); the layer
/// binds it as asked at that command instead, so the group would fall back in every run.
pub fn held_back(ctx: &Ctx, staging: BufId, device: BufId, dir: Direction) -> Result<(), Verdict> {
    let m = ctx.m;
    let (host, guest, hrole, grole) = match dir {
        Direction::DeviceIntoStaging => (staging, device, "staging", "device"),
        Direction::StagingIntoDevice => (device, staging, "device", "staging"),
    };
    let Some(bound) = m.buffers[host].bind.as_ref().map(|b| b.seq) else {
        return Ok(()); // never bound: check() refuses it
    };
    let first = m
        .recordings
        .iter()
        .flatten()
        .filter(|op| op.recorded < bound && op.touches().iter().any(|t| t.0 == guest))
        .min_by_key(|op| op.recorded);
    let Some(op) = first else {
        return Ok(());
    };
    let command = match &op.kind {
        OpKind::Copy { .. } => "vkCmdCopyBuffer".to_string(),
        OpKind::Use { command, .. } => command.clone(),
    };
    let created = m.buffers[host].created;
    let when = if op.recorded < created {
        format!("was created only at event {created} and bound at event {bound}")
    } else {
        format!("was bound only at event {bound}")
    };
    Err(verdict(
        Some(op.recorded),
        format!(
            "compat: {command} recorded at event {} names {}, but {}, whose memory it would be bound into, {when}; enforce holds the bind back until then, so the command would name a buffer with no memory bound",
            op.recorded,
            ctx.name(guest, grole),
            ctx.name(host, hrole),
        ),
        format!(
            "The program uses {} in a command it records before {} exists (or has memory), so {} cannot take its memory from there.",
            ctx.short(guest, grole),
            ctx.short(host, hrole),
            ctx.short(guest, grole)
        ),
    ))
}

/// Staging into device (issue 36): enforce binds the staging buffer into the device buffer's
/// memory once both are bound, and serves the maps of its allocation from there. A map the
/// application made of that allocation before the device buffer was bound, and still holds then,
/// came from the driver: the host's writes through it would not reach the shared memory, so
/// enforce refuses the member (`apply::check_staging_mapping`, the same words). The other
/// members of the group do not depend on it.
pub fn mapped_before_bind(ctx: &Ctx, staging: BufId, device: BufId) -> Result<(), Verdict> {
    let m = ctx.m;
    let (Some(hb), Some(db)) = (
        m.buffers[staging].bind.as_ref(),
        m.buffers[device].bind.as_ref(),
    ) else {
        return Ok(()); // never bound: check() refuses it
    };
    let mem = &m.memories[hb.memory];
    // Enforce binds the member when the later of the two binds happens; a map made after the
    // device buffer's bind is served from the device allocation (ahead of the member's own bind).
    let at = hb.seq.max(db.seq);
    let held = mem.mapped_at(at + 1).filter(|&s| s < db.seq);
    let Err(why) = check_staging_mapping(held.is_some(), false) else {
        return Ok(());
    };
    let map = held.expect("refused only when mapped");
    let until = mem
        .unmaps
        .iter()
        .copied()
        .filter(|&u| u > map)
        .min()
        .map_or("never unmapped".to_string(), |u| {
            format!("unmapped only at event {u}")
        });
    Err(Verdict {
        cause: Cause::CompatMapped,
        event: Some(map),
        message: format!(
            "compat: the allocation of {} was mapped at event {map}, before {} was bound (event {}), and {until}: {why}",
            ctx.name(staging, "staging"),
            ctx.name(device, "device"),
            db.seq
        ),
        plain: format!(
            "The program maps the memory of {} before {} has memory, and keeps that mapping: {why}.",
            ctx.short(staging, "staging"),
            ctx.short(device, "device")
        ),
    })
}
