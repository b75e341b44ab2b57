//! Map redirection: `vkMapMemory` of a staging member's own allocation served from echo's one
//! mapping of the device allocation (also ahead of the member's bind, binding it there first),
//! `vkUnmapMemory` answered without going down, and `vkFlushMappedMemoryRanges` /
//! `vkInvalidateMappedMemoryRanges` ranges translated into the allocation the bytes live in.

use super::{fp_bind, map_whole, Bind, Enforcer, Inner, Redirect, Slot, Unmap};
use crate::log;
use crate::records::Device;
use crate::state::Mapping;
use ash::vk;
use ash::vk::Handle;
use echo_analyzer::plan::Direction;
use std::ffi::c_void;
use std::sync::atomic::Ordering;

impl Enforcer {
    // ------------------------------------------------------------------ maps

    /// `vkMapMemory`. `down(memory)` maps that allocation through the next layer (with the
    /// application's offset, size and flags).
    pub fn map(
        &self,
        dev: &Device,
        memory: u64,
        offset: u64,
        size: u64,
        data: *mut *mut c_void,
        down: &mut dyn FnMut(u64) -> vk::Result,
    ) -> vk::Result {
        let mut inner = self.lock();
        if self.pending.load(Ordering::Relaxed) > 0 {
            // A staging member still waiting for its device buffer stays held back: what the
            // host writes through this map lands in its own allocation and is carried into the
            // shared range when it is finally bound there (or, if the allocation is still
            // mapped then, it is bound as asked). So does a device buffer of a `device_mapped`
            // group (issue 12): the plan shows the host never touches its bytes in the mapped
            // block, so a map of that block before its partner is bound changes nothing it
            // relies on (VMA maps a second block for the readback buffer after the device
            // buffer in it was bound). Any other guest is bound as asked now.
            let proven: Vec<u32> = inner
                .groups
                .iter()
                .filter(|(_, x)| x.device_mapped)
                .map(|(&g, _)| g)
                .collect();
            self.force_pending(dev, &mut inner, |_, m, slot| {
                m == memory
                    && (self.skip_carry
                        || match slot {
                            Slot::Staging(..) => false,
                            Slot::Device(g) => !proven.contains(&g),
                        })
            });
        }
        let msize = dev.state.memory.get(&memory).map_or(0, |m| m.size);
        let len = if size == vk::WHOLE_SIZE {
            msize.saturating_sub(offset)
        } else {
            size
        };
        if self.is_virtual(&inner, memory) {
            return self.map_virtual(dev, &mut inner, memory, offset, len, data, down);
        }
        let mut redirect = inner.mems.get(&memory).and_then(|m| m.redirect);
        if redirect.is_none() {
            redirect = self.predict_redirect(dev, &mut inner, memory);
        }
        let served = match redirect {
            Some(rd) => match self.ensure_echo_map(dev, &mut inner, rd.target) {
                Ok(base) => {
                    let at = rd.shift + offset as i128;
                    let tsize = dev.state.memory.get(&rd.target).map_or(0, |m| m.size);
                    (at >= 0 && at + len as i128 <= tsize as i128).then(|| {
                        self.c.maps_redirected.fetch_add(1, Ordering::Relaxed);
                        base + at as usize
                    })
                }
                Err(_) => None,
            },
            None => inner
                .mems
                .get(&memory)
                .and_then(|m| m.echo_map)
                .map(|base| base + offset as usize),
        };
        if let Some(ptr) = served {
            return Self::hand_out_map(dev, &mut inner, memory, ptr, offset, len, data);
        }
        if redirect.is_some() {
            log::error!(
                "enforce: a map of redirected allocation {memory:#x} falls outside the device allocation; mapping it as asked (the aliased staging buffer will not see these bytes)"
            );
        }
        let r = down(memory);
        if r == vk::Result::SUCCESS {
            // SAFETY: the next layer filled *data.
            dev.state
                .note_mapped(memory, unsafe { *data } as usize, offset, len);
        }
        r
    }

    /// A staging member's own allocation is mapped before the member is bound (allocate, map,
    /// bind): redirect it now, at the offset the plan recorded, when the device buffer is bound
    /// and every check passes.
    pub(super) fn predict_redirect(
        &self,
        dev: &Device,
        inner: &mut Inner,
        memory: u64,
    ) -> Option<Redirect> {
        let (g, m) = inner.mems.get(&memory)?.owner?;
        let grp = inner.groups.get(&g)?;
        if grp.direction != Direction::StagingIntoDevice || grp.members[m].outcome.is_some() {
            return None;
        }
        let h = grp.members[m].buffer?;
        if inner.bufs.get(&h)?.bind != Bind::Unbound {
            return None;
        }
        self.identities_ok(inner, h, grp.device?).ok()?;
        let delta = grp.members[m].delta;
        let at_in_own = grp.members[m].memory_offset;
        let (dmem, doff) = self.host_binding(dev, inner, Slot::Staging(g, m))?;
        let target_off = doff as i128 - delta as i128;
        if let Err(why) = self.check_staging_target(dev, inner, g, m, h, memory, dmem, target_off) {
            log::debug!("enforce: map of {memory:#x} not redirected ahead of the bind: {why}");
            return None;
        }
        self.ensure_echo_map(dev, inner, dmem).ok()?;
        // Bind the member now, before any pointer is handed out: if the redirected bind fails,
        // the map goes to the driver and everything stays as the application asked. Its own
        // vkBindBufferMemory later is then answered without going down.
        let r = fp_bind(dev, h, dmem, target_off as u64);
        if r != vk::Result::SUCCESS {
            log::warn_once(
                "enforce-early-bind",
                format_args!("enforce: a redirected bind failed ({r:?}); that staging buffer stays as the application binds it (further failures are in the statistics)"),
            );
            self.set_outcome(
                inner,
                Slot::Staging(g, m),
                Err(format!("the redirected bind failed ({r:?})")),
            );
            return None;
        }
        if let Some(mut b) = dev.state.buffers.get_mut(&h) {
            b.bound = Some((dmem, target_off as u64));
        }
        if let Some(b) = inner.bufs.get_mut(&h) {
            b.bind = Bind::Done;
            b.early = Some((memory, at_in_own));
        }
        inner.mems.entry(dmem).or_default().guests.insert(h);
        if let Some(g) = &self.guard {
            g.aliased(dmem);
        }
        self.c.binds_redirected.fetch_add(1, Ordering::Relaxed);
        self.any_alias.store(true, Ordering::Release);
        self.set_outcome(inner, Slot::Staging(g, m), Ok(()));
        let rd = Redirect {
            target: dmem,
            shift: target_off - at_in_own as i128,
        };
        inner.mems.entry(memory).or_default().redirect = Some(rd);
        log::debug!(
            "enforce: staging buffer {h:#x} bound into {dmem:#x} at {target_off} ahead of its map"
        );
        Some(rd)
    }

    /// `vkUnmapMemory`: whether echo serves the mapping (the call must not go down), or which
    /// allocation to unmap through the next layer.
    pub fn unmap(&self, dev: &Device, memory: u64) -> Unmap {
        let mut inner = self.lock();
        if self.is_virtual(&inner, memory) {
            return self.unmap_virtual(dev, &mut inner, memory);
        }
        let Some(m) = inner.mems.get_mut(&memory) else {
            return Unmap::Down(memory);
        };
        if m.redirect.is_none() && m.echo_map.is_none() {
            return Unmap::Down(memory);
        }
        m.app_mapped = false;
        if let Some(mut s) = dev.state.memory.get_mut(&memory) {
            s.mapped = None;
        }
        Unmap::Served
    }

    /// Flush/invalidate ranges of redirected allocations, translated into the device
    /// allocation (offsets rounded down and ends up to `nonCoherentAtomSize`). `None`: unchanged.
    pub fn translate_ranges(
        &self,
        dev: &Device,
        ranges: &[vk::MappedMemoryRange<'_>],
    ) -> Option<Vec<vk::MappedMemoryRange<'static>>> {
        if !self.any_alias.load(Ordering::Acquire) && !self.any_virtual.load(Ordering::Acquire) {
            return None;
        }
        let inner = self.lock();
        if !ranges.iter().any(|r| {
            inner
                .mems
                .get(&r.memory.as_raw())
                .is_some_and(|m| m.redirect.is_some() || m.virt.is_some() || m.block.is_some())
        }) {
            return None;
        }
        let out = ranges
            .iter()
            .filter_map(|r| {
                if let Some(b) = self.block_range(&inner, r) {
                    // An allocation made in part: the window or the overflow, or nothing.
                    return b;
                }
                let mut n = vk::MappedMemoryRange {
                    memory: r.memory,
                    offset: r.offset,
                    size: r.size,
                    ..Default::default()
                };
                // An allocation echo did not make: ranges of a mapping of the real allocation (made
                // late) go to it; the others to the shared range it is served from.
                let rt = inner.mems.get(&r.memory.as_raw());
                let virt = rt.and_then(|m| m.virt.as_ref());
                if let Some(real) = virt.and_then(|v| {
                    v.real
                        .filter(|_| v.real_mapped || rt.is_some_and(|m| m.redirect.is_none()))
                }) {
                    n.memory = vk::DeviceMemory::from_raw(real);
                    return Some(n);
                }
                let rd = rt
                    .and_then(|m| m.redirect)
                    .or_else(|| virt.map(|v| v.home()));
                if let Some(rd) = rd {
                    let tsize = dev.state.memory.get(&rd.target).map_or(0, |m| m.size);
                    let start = (rd.shift + r.offset as i128).max(0) as u64;
                    let aligned = start - start % self.atom;
                    n.memory = vk::DeviceMemory::from_raw(rd.target);
                    n.offset = aligned;
                    n.size = if r.size == vk::WHOLE_SIZE {
                        vk::WHOLE_SIZE
                    } else {
                        let end = (start + r.size).div_ceil(self.atom) * self.atom;
                        end.min(tsize).saturating_sub(aligned)
                    };
                }
                Some(n)
            })
            .collect();
        Some(out)
    }

    /// Maps `dmem` once through the next layer (or adopts the application's whole mapping).
    pub(super) fn ensure_echo_map(
        &self,
        dev: &Device,
        inner: &mut Inner,
        dmem: u64,
    ) -> Result<usize, String> {
        if let Some(p) = inner.mems.get(&dmem).and_then(|x| x.echo_map) {
            return Ok(p);
        }
        let (size, app) = {
            let s = dev
                .state
                .memory
                .get(&dmem)
                .ok_or("the device allocation is unknown")?;
            (s.size, s.mapped)
        };
        let ptr = match app {
            Some(Mapping {
                ptr,
                offset: 0,
                size: n,
            }) if n >= size => ptr,
            Some(_) => {
                return Err("the application maps part of the device allocation itself".into())
            }
            // dmem is a live host-visible allocation of this device the application does not map.
            None => map_whole(dev, dmem)
                .map_err(|r| format!("mapping the device allocation failed ({r:?})"))?,
        };
        let e = inner.mems.entry(dmem).or_default();
        e.echo_map = Some(ptr);
        e.app_mapped = app.is_some();
        Ok(ptr)
    }

    /// A `vkMapMemory` echo serves itself: the application gets `ptr`, and the allocation is
    /// recorded as mapped (by the application, at `offset`, `len` bytes).
    pub(super) fn hand_out_map(
        dev: &Device,
        inner: &mut Inner,
        memory: u64,
        ptr: usize,
        offset: u64,
        len: u64,
        data: *mut *mut c_void,
    ) -> vk::Result {
        // SAFETY: data is the application's out pointer.
        unsafe { *data = ptr as *mut c_void };
        inner.mems.entry(memory).or_default().app_mapped = true;
        dev.state.note_mapped(memory, ptr, offset, len);
        vk::Result::SUCCESS
    }

    pub(super) fn coherent(&self, dev: &Device, memory: u64) -> bool {
        let ty = dev.state.memory.get(&memory).map_or(0, |m| m.type_index);
        self.type_flags
            .get(ty as usize)
            .is_some_and(|f| f & vk::MemoryPropertyFlags::HOST_COHERENT.as_raw() != 0)
    }
}
