//! Which allocations enforce may leave unmade (DESIGN §6 "Memory"): a `staging_into_device`
//! member's own allocation, and the part of a `device_into_staging` device buffer's
//! allocation outside the other buffers bound there.

use crate::model::{BufId, Model};
use crate::plan::{DeviceMemory, Direction, Group};
use crate::trace::ObjectKey;
use std::collections::BTreeSet;

/// The key of `b`'s allocation and `b`'s offset in it, when `b` is the only buffer bound there.
pub(super) fn own_memory(m: &Model, b: BufId) -> Option<(ObjectKey, u64)> {
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
pub(super) fn skip_allocation(m: &Model, d: BufId, h: BufId, delta: i64) -> Result<(), String> {
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
pub(super) fn device_memories(m: &Model, groups: &mut [Group], devices: &[BufId]) {
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
