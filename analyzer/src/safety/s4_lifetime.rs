//! S4 lifetime: the memory range that holds both buffers must stay valid for both lifetimes.
//!
//! The *owner* is the buffer whose memory will hold both (the staging buffer for
//! `DeviceIntoStaging`, the device buffer for `StagingIntoDevice`); the *guest* is the buffer bound
//! into it. Two hazards:
//! - the owner's range is re-bound to another resource while the guest lives (sub-allocators
//!   recycle a freed buffer's range);
//! - the owner's allocation is freed while the guest is still used. For `StagingIntoDevice` the
//!   layer defers `vkFreeMemory` of an allocation the device buffer owns alone until the guest is
//!   gone (DESIGN §5), so only a shared (sub-allocated) device allocation fails; for
//!   `DeviceIntoStaging` a staging allocation freed before the device buffer's last use fails.

use super::{Cause, Ctx, Verdict};
use crate::model::{BufId, Step};
use crate::plan::Direction;

/// Last `seq` at which the buffer is used: its submissions (until observed complete) and host
/// accesses.
pub fn last_use(ctx: &Ctx, b: BufId) -> Option<u64> {
    let m = ctx.m;
    let mut last = None;
    for (s, t) in m.touched.iter().enumerate() {
        if t.contains(&b) {
            let sub = &m.submissions[s];
            let end = sub.completed.unwrap_or(sub.seq);
            last = Some(last.map_or(end, |l: u64| l.max(end)));
        }
    }
    for (seq, step) in &m.timeline {
        if let Step::Host { buffer, .. } = step {
            if *buffer == b {
                last = Some(last.map_or(*seq, |l: u64| l.max(*seq)));
            }
        }
    }
    last
}

pub fn check(
    ctx: &Ctx,
    staging: BufId,
    device: BufId,
    delta: i64,
    dir: Direction,
) -> Result<(), Verdict> {
    let m = ctx.m;
    let (owner, guest, owner_role, guest_role) = match dir {
        Direction::DeviceIntoStaging => (staging, device, "staging", "device"),
        Direction::StagingIntoDevice => (device, staging, "device", "staging"),
    };
    let (Some(ob), Some(_)) = (&m.buffers[owner].bind, &m.buffers[guest].bind) else {
        return Ok(()); // compat reports unbound buffers
    };
    let mem = &m.memories[ob.memory];
    // The guest's range inside the owner's memory.
    let start = match dir {
        Direction::DeviceIntoStaging => ob.offset as i128 + delta as i128,
        Direction::StagingIntoDevice => ob.offset as i128 - delta as i128,
    };
    let end = start + m.buffers[guest].bound_len() as i128;
    let g = &m.buffers[guest];
    let (g_from, g_to) = (g.created, g.destroyed.unwrap_or(u64::MAX));

    for &(x, off, seq) in &mem.binds {
        if x == staging || x == device {
            continue;
        }
        let xb = &m.buffers[x];
        let (xs, xe) = (off as i128, off as i128 + xb.bound_len() as i128);
        let x_to = xb.destroyed.unwrap_or(u64::MAX);
        if xs < end && start < xe && seq < g_to && g_from < x_to {
            return Err(Verdict {
                cause: Cause::S4,
                event: Some(seq),
                message: format!(
                    "S4: at event {seq} the range of {} in its memory was bound to buffer #{} while {} (which would live there) was still alive; a sub-allocator recycled the range, so the shared bytes would be overwritten",
                    ctx.name(owner, owner_role),
                    xb.number,
                    ctx.name(guest, guest_role)
                ),
                plain: format!(
                    "The program's memory allocator hands the bytes of {} to buffer #{} while {} would still live there. Sharing memory, those bytes would be overwritten.",
                    ctx.short(owner, owner_role),
                    xb.number,
                    ctx.short(guest, guest_role)
                ),
            });
        }
    }

    if let Some(freed) = mem.freed {
        let deferred = dir == Direction::StagingIntoDevice && mem.owned_by(device);
        if !deferred {
            if let Some(last) = last_use(ctx, guest) {
                if freed < last {
                    return Err(Verdict {
                        cause: Cause::S4,
                        event: Some(freed),
                        message: format!(
                            "S4: the memory of {} was freed at event {freed}, but {} that would live in it is used until event {last}; keep the staging allocation alive as long as the device buffer, or let the pair go",
                            ctx.name(owner, owner_role),
                            ctx.name(guest, guest_role)
                        ),
                        plain: format!(
                            "The program frees the memory of {} while it still uses {}. Sharing memory, {} would lose its memory while in use.",
                            ctx.short(owner, owner_role),
                            ctx.short(guest, guest_role),
                            ctx.short(guest, guest_role)
                        ),
                    });
                }
            }
        }
    }
    Ok(())
}
