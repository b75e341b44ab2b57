//! Allocations echo does not make (DESIGN §6 "Memory", plan `skip_allocation`).
//!
//! When the plan shows that a staging member's own allocation holds nothing but the member, and
//! the member's bytes will live in the device buffer's memory, `vkAllocateMemory` of it does not
//! go down: the application gets a handle echo invents (the address of a small heap cell echo
//! owns, so it cannot equal a live handle of the driver or of a layer below), and every command
//! that takes it is served here:
//!
//! - map: a range that overlaps the member is served from the device buffer's memory (binding the
//!   member there first, as `predict_redirect` does for allocations that exist); unmap is then a
//!   no-op, flush/invalidate go to the shared range;
//! - bind of the member at the planned offset: the ordinary redirected bind;
//! - free: nothing reaches the driver (the handle is forgotten); while it lives, the device
//!   buffer's memory is not freed (its free is deferred, as for a buffer living there), so the
//!   bytes it holds stay where the application's pointer finds them;
//! - commitment and opaque capture address queries: 0 (nothing is committed; the allocation has
//!   no capture address — those allocations are always made);
//! - anything the plan did not foresee — another buffer or an image bound into it, a map of a
//!   range that does not overlap the member, the member bound elsewhere or not aliasable, an
//!   export (`vkGetMemoryFdKHR`) — makes the allocation at the driver at that moment
//!   ([`Enforcer::materialize`]) with the application's type, size, dedicated buffer, priority and
//!   allocation callbacks, copies every byte it held (its range of the device buffer's memory)
//!   into it, and from then on hands the real handle down wherever the application names echo's.
//!
//! A handle echo invents never reaches the driver: every path that would pass it down
//! translates it first ([`Enforcer::driver_memory`]); devices where some command that takes
//! memory is not followed never get one (`apply::memory_commands_followed`).

use super::binding::plain_bind;
use super::{
    check_redirect, map_whole, req_of, Bind, Callbacks, DeferredFree, Enforcer, FreeAction, Inner,
    Redirect, Slot, Target, Unmap, Virt,
};
use crate::log;
use crate::records::Device;
use ash::vk;
use ash::vk::Handle;
use echo_analyzer::apply::{may_skip_allocation, AllocChain};
use echo_analyzer::plan::Direction;
use echo_analyzer::trace::ObjectKey;
use std::ffi::c_void;
use std::sync::atomic::Ordering;

/// The application's allocation callbacks, copied (the application's struct may be gone when
/// echo needs them).
pub(super) fn callbacks_of(alloc: *const vk::AllocationCallbacks<'_>) -> Option<Callbacks> {
    // SAFETY: alloc is null or the application's valid callbacks.
    unsafe { alloc.as_ref() }.map(|a| {
        Callbacks(vk::AllocationCallbacks {
            p_user_data: a.p_user_data,
            pfn_allocation: a.pfn_allocation,
            pfn_reallocation: a.pfn_reallocation,
            pfn_free: a.pfn_free,
            pfn_internal_allocation: a.pfn_internal_allocation,
            pfn_internal_free: a.pfn_internal_free,
            _marker: std::marker::PhantomData,
        })
    })
}

impl Virt {
    /// Where its bytes live, as a redirect.
    pub(super) fn home(&self) -> Redirect {
        Redirect {
            target: self.target,
            shift: self.shift,
        }
    }
}

impl Enforcer {
    /// Whether allocations may be left unmade on this device (else why not), from
    /// `apply::memory_commands_followed`.
    pub fn set_memory_commands(&mut self, ok: Result<(), String>) {
        if let Err(why) = &ok {
            log::info!("enforce: every allocation is made at the driver on this device: {why}");
        }
        self.memory_ok = ok;
    }

    /// Some allocation was left unmade (hooks that take memory look only then).
    #[inline]
    pub fn any_virtual(&self) -> bool {
        self.any_virtual.load(Ordering::Acquire)
    }

    #[inline]
    pub(super) fn is_virtual(&self, inner: &Inner, memory: u64) -> bool {
        self.any_virtual.load(Ordering::Acquire)
            && inner
                .mems
                .get(&memory)
                .is_some_and(|m| m.virt.is_some() || m.block.is_some())
    }

    /// The allocation that holds `memory`'s bytes at the driver: itself, or the one echo made
    /// late; `None` for an allocation echo never made.
    pub(super) fn physical(&self, inner: &Inner, memory: u64) -> Option<u64> {
        if let Some(b) = self.block_physical(inner, memory) {
            return b;
        }
        match inner.mems.get(&memory).and_then(|m| m.virt.as_ref()) {
            Some(v) => v.real,
            None => Some(memory),
        }
    }

    /// `vkAllocateMemory` of an allocation with key `key` (the key the next allocation of its
    /// kind would get; `take_key` takes it): echo's handle when the plan marks it
    /// `skip_allocation` and every check passes now, else the call goes down — with the key
    /// already taken (`Err(Some)`) or not (`Err(None)`).
    pub fn skip_allocation(
        &self,
        dev: &Device,
        key: &ObjectKey,
        info: &vk::MemoryAllocateInfo<'_>,
        chain: &AllocChain,
        alloc: *const vk::AllocationCallbacks<'_>,
        take_key: &mut dyn FnMut() -> ObjectKey,
    ) -> Result<u64, Option<ObjectKey>> {
        if self.block_memory.contains_key(key) {
            return self.skip_block(dev, key, info, chain, callbacks_of(alloc), take_key);
        }
        let Some((g, m)) = self.member_of_memory(key) else {
            return Err(None);
        };
        self.note_creator(false, key);
        let mut inner = self.lock();
        if !self.ensure_group(&mut inner, g) {
            return Err(None);
        }
        let checked = self.may_skip(dev, &inner, key, info, chain, (g, m));
        let (h, target, shift, lo, hi) = match checked {
            Ok(x) => x,
            Err(why) => {
                if !why.is_empty() {
                    log::info!(
                        "enforce: the allocation of group {g} member {m} is made at the driver: {why}"
                    );
                }
                return Err(None);
            }
        };
        if let Err(why) = self.ensure_echo_map(dev, &mut inner, target) {
            log::info!(
                "enforce: the allocation of group {g} member {m} is made at the driver: {why}"
            );
            return Err(None);
        }
        let taken = take_key();
        if taken != *key {
            // Another thread allocated with this key meanwhile: identities are not trusted.
            return Err(Some(taken));
        }
        let cell = Box::new(0u64);
        let handle = &*cell as *const u64 as u64;
        let callbacks = callbacks_of(alloc);
        let rt = inner.mems.entry(handle).or_default();
        rt.owner = Some((g, m));
        rt.virt = Some(Virt {
            member: (g, m),
            type_index: info.memory_type_index,
            size: info.allocation_size,
            dedicated: chain.dedicated.map(|(b, _)| b).filter(|&b| b != 0),
            priority: chain.priority,
            callbacks,
            target,
            shift,
            range: (lo, hi),
            real: None,
            real_mapped: false,
            _cell: cell,
        });
        inner.mems.entry(target).or_default().guests.insert(handle);
        self.c
            .bytes_not_allocated
            .fetch_add(info.allocation_size, Ordering::Relaxed);
        self.c.allocations_skipped.fetch_add(1, Ordering::Relaxed);
        self.any_virtual.store(true, Ordering::Release);
        log::debug!(
            "enforce: allocation of {} bytes for staging buffer {h:#x} (group {g} member {m}) not made; echo's handle {handle:#x}, its bytes at {shift} of {target:#x}",
            info.allocation_size
        );
        Ok(handle)
    }

    /// The checks before leaving member `(g, m)`'s allocation unmade: (member buffer, device
    /// memory, shift, member range). An empty error: not planned (nothing to say).
    fn may_skip(
        &self,
        dev: &Device,
        inner: &Inner,
        key: &ObjectKey,
        info: &vk::MemoryAllocateInfo<'_>,
        chain: &AllocChain,
        (g, m): (u32, usize),
    ) -> Result<(u64, u64, i128, u64, u64), String> {
        let grp = inner.groups.get(&g).ok_or("")?;
        let mem = grp.members.get(m).ok_or("")?;
        if !mem.skip_allocation || grp.direction != Direction::StagingIntoDevice {
            return Err(String::new());
        }
        self.memory_ok.clone()?;
        if self.ambiguous(false, key) {
            return Err(format!(
                "allocations with key {key} (but for the ordinal) were made on several threads"
            ));
        }
        if mem.outcome.is_some() {
            return Err("its staging buffer was already dealt with".into());
        }
        let h = mem
            .buffer
            .ok_or("its staging buffer does not exist (yet) in this run")?;
        if inner.bufs.get(&h).map(|b| b.bind) != Some(Bind::Unbound) {
            return Err("its staging buffer is already bound".into());
        }
        let d = grp.device.ok_or("its device buffer does not exist")?;
        self.identities_ok(inner, h, d)?;
        may_skip_allocation(chain, h)?;
        if !self.host_visible(info.memory_type_index) {
            return Err(format!(
                "memory type {} is not host-visible",
                info.memory_type_index
            ));
        }
        let (dmem, doff) = self
            .host_binding(dev, inner, Slot::Staging(g, m))
            .ok_or("its device buffer is not bound yet")?;
        let target_off = doff as i128 - mem.delta as i128;
        let shift = target_off - mem.memory_offset as i128;
        let (dtype, dsize) = dev
            .state
            .memory
            .get(&dmem)
            .map(|s| (s.type_index, s.size))
            .ok_or("the device allocation is unknown")?;
        if !self.host_visible(dtype) {
            return Err(format!(
                "the device buffer's memory (type {dtype}) is not host-visible"
            ));
        }
        let req = dev
            .state
            .buffers
            .get(&h)
            .map(|b| b.requirements)
            .ok_or("the staging buffer is unknown")?;
        check_redirect(
            &req_of(&req),
            &Target {
                memory_type: dtype,
                memory_size: dsize,
                offset: target_off,
            },
        )
        .map_err(|r| format!("staging buffer into the device allocation: {r}"))?;
        let size = info.allocation_size;
        if shift < 0 || shift + size as i128 > dsize as i128 {
            return Err(format!(
                "its {size}-byte allocation would lie at [{shift}, {}) of the {dsize}-byte device allocation",
                shift + size as i128
            ));
        }
        let lo = mem.memory_offset;
        Ok((h, dmem, shift, lo, lo.saturating_add(req.size)))
    }

    /// The allocation to hand the driver for `memory`: itself, or — for one echo did not make —
    /// the real one, made now if need be (`why`: the unforeseen use, for the log).
    pub(super) fn driver_memory(
        &self,
        dev: &Device,
        inner: &mut Inner,
        memory: u64,
        why: &str,
    ) -> Result<u64, vk::Result> {
        if !self.is_virtual(inner, memory) {
            return Ok(memory);
        }
        self.materialize(dev, inner, memory, why)
    }

    /// [`Self::driver_memory`] for hooks outside the enforcer (image binds, exports).
    pub fn driver_memory_now(
        &self,
        dev: &Device,
        memory: u64,
        why: &str,
    ) -> Result<u64, vk::Result> {
        if !self.any_virtual() {
            return Ok(memory);
        }
        let mut inner = self.lock();
        self.driver_memory(dev, &mut inner, memory, why)
    }

    /// For queries that must not make an allocation: `None` when echo made `memory` (or made
    /// it late: `Some(Some(real))`); `Some(None)` for an allocation echo never made.
    pub fn unmade(&self, memory: u64) -> Option<Option<u64>> {
        if !self.any_virtual() {
            return None;
        }
        let inner = self.lock();
        if let Some(b) = self.block_physical(&inner, memory) {
            return Some(b);
        }
        inner
            .mems
            .get(&memory)
            .and_then(|m| m.virt.as_ref())
            .map(|v| v.real)
    }

    /// Binds `buffer` as the application asked (at `offset` of `memory`) through `down`, making
    /// the allocation first when echo did not make it; records where the buffer is.
    pub(super) fn plain_bind(
        &self,
        dev: &Device,
        inner: &mut Inner,
        buffer: u64,
        memory: u64,
        offset: u64,
        down: &mut dyn FnMut(u64, u64) -> vk::Result,
    ) -> vk::Result {
        if !self.is_virtual(inner, memory) {
            return plain_bind(dev, buffer, memory, offset, down);
        }
        if self.is_block(inner, memory) {
            return self.bind_block(dev, inner, buffer, memory, offset, down);
        }
        let real = match self.driver_memory(
            dev,
            inner,
            memory,
            &format!("buffer {buffer:#x} is bound into it as the application asked"),
        ) {
            Ok(m) => m,
            Err(r) => return r,
        };
        let r = down(real, offset);
        if r == vk::Result::SUCCESS {
            if let Some(mut b) = dev.state.buffers.get_mut(&buffer) {
                // The application's handle: copies compare where buffers are by it.
                b.bound = Some((memory, offset));
            }
        }
        r
    }

    /// Makes an allocation echo did not make, at the driver, now: same type, size, dedicated
    /// buffer, priority and callbacks as the application asked; every byte it held (its range
    /// of the device buffer's memory, where its maps were served) is copied in. Returns the real
    /// handle (or the driver's error, for the call that needed it).
    pub(super) fn materialize(
        &self,
        dev: &Device,
        inner: &mut Inner,
        memory: u64,
        why: &str,
    ) -> Result<u64, vk::Result> {
        if self.is_block(inner, memory) {
            return self.materialize_block(dev, inner, memory, why);
        }
        let shared = inner
            .mems
            .get(&memory)
            .is_some_and(|m| m.redirect.is_some());
        let Some(v) = inner.mems.get(&memory).and_then(|m| m.virt.as_ref()) else {
            return Ok(memory);
        };
        if let Some(real) = v.real {
            return Ok(real);
        }
        let member_alive = inner
            .groups
            .get(&v.member.0)
            .and_then(|g| g.members.get(v.member.1))
            .is_some_and(|m| m.buffer.is_some());
        let cb = v
            .callbacks
            .as_ref()
            .map_or(std::ptr::null(), |c| &c.0 as *const _);
        let real = match super::window::allocate_like(
            dev,
            v.type_index,
            v.size,
            v.dedicated.filter(|b| dev.state.buffers.contains_key(b)),
            v.priority,
            v.callbacks.as_ref(),
        ) {
            Ok(r) => r,
            Err(r) => {
                log::warn!(
                    "enforce: the allocation echo did not make ({} bytes) is needed after all ({why}), but the driver refused it ({r:?}); the call fails with that error",
                    v.size
                );
                return Err(r);
            }
        };
        let (size, home, coherent_dst) = (v.size, v.home(), self.type_coherent(v.type_index));
        let mut carried = 0u64;
        if shared && !self.skip_carry {
            // Never lose a byte: what the allocation held lives in its range of the device
            // buffer's memory (maps of it were served there).
            match (
                self.ensure_echo_map(dev, inner, home.target),
                map_whole(dev, real),
            ) {
                (Ok(src), Ok(dst)) => {
                    // SAFETY: both are whole mappings echo holds; [shift, shift+size) lies in the
                    // device allocation (checked when the allocation was skipped), [0, size) in
                    // the new one.
                    unsafe {
                        if !self.coherent(dev, home.target) {
                            let r = vk::MappedMemoryRange {
                                memory: vk::DeviceMemory::from_raw(home.target),
                                size: vk::WHOLE_SIZE,
                                ..Default::default()
                            };
                            let _ = (dev.fp.invalidate_mapped_memory_ranges)(dev.handle, 1, &r);
                        }
                        std::ptr::copy_nonoverlapping(
                            (src as *const u8).offset(home.shift as isize),
                            dst as *mut u8,
                            size as usize,
                        );
                        if !coherent_dst {
                            let r = vk::MappedMemoryRange {
                                memory: vk::DeviceMemory::from_raw(real),
                                size: vk::WHOLE_SIZE,
                                ..Default::default()
                            };
                            let _ = (dev.fp.flush_mapped_memory_ranges)(dev.handle, 1, &r);
                        }
                        (dev.fp.unmap_memory)(dev.handle, vk::DeviceMemory::from_raw(real));
                    }
                    carried = size;
                }
                (src, dst) => {
                    if dst.is_ok() {
                        // SAFETY: echo mapped it just now.
                        unsafe {
                            (dev.fp.unmap_memory)(dev.handle, vk::DeviceMemory::from_raw(real))
                        };
                    }
                    // SAFETY: echo made it just now; nothing uses it.
                    unsafe {
                        (dev.fp.free_memory)(dev.handle, vk::DeviceMemory::from_raw(real), cb)
                    };
                    log::warn!(
                        "enforce: the allocation echo did not make is needed after all ({why}), but its bytes could not be copied ({:?}, {:?}); the call fails",
                        src.err(),
                        dst.err()
                    );
                    return Err(vk::Result::ERROR_OUT_OF_DEVICE_MEMORY);
                }
            }
        }
        let app_maps_shared = inner
            .mems
            .get(&memory)
            .is_some_and(|m| m.app_mapped && m.redirect.is_some());
        if let Some(m) = inner.mems.get_mut(&memory) {
            if let Some(v) = m.virt.as_mut() {
                v.real = Some(real);
            }
            if !member_alive {
                // Its member is gone: every map from now on is of the real allocation.
                m.redirect = None;
            }
        }
        self.c
            .bytes_not_allocated
            .fetch_sub(size, Ordering::Relaxed);
        self.c.allocations_made_late.fetch_add(1, Ordering::Relaxed);
        self.c
            .bytes_carried_late
            .fetch_add(carried, Ordering::Relaxed);
        log::info!(
            "enforce: allocation {memory:#x} made at the driver after all ({why}): {size} bytes, {carried} carried over"
        );
        if app_maps_shared && !member_alive {
            log::warn!(
                "enforce: allocation {memory:#x} is still mapped while it is made at the driver: the pointer handed out before keeps showing the bytes its staging buffer left in the device buffer's memory; map it again to see the allocation itself"
            );
        }
        Ok(real)
    }

    fn type_coherent(&self, type_index: u32) -> bool {
        self.type_flags
            .get(type_index as usize)
            .is_some_and(|f| f & vk::MemoryPropertyFlags::HOST_COHERENT.as_raw() != 0)
    }

    /// `vkMapMemory` of an allocation echo did not make (`len`: the size resolved).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn map_virtual(
        &self,
        dev: &Device,
        inner: &mut Inner,
        memory: u64,
        offset: u64,
        len: u64,
        data: *mut *mut c_void,
        down: &mut dyn FnMut(u64) -> vk::Result,
    ) -> vk::Result {
        if self.is_block(inner, memory) {
            return self.map_block(dev, inner, memory, offset, len, data, down);
        }
        let Some((lo, hi)) = inner
            .mems
            .get(&memory)
            .and_then(|m| m.virt.as_ref())
            .map(|v| v.range)
        else {
            return vk::Result::ERROR_MEMORY_MAP_FAILED;
        };
        let overlaps = offset < hi && offset.saturating_add(len) > lo;
        if overlaps {
            let mut rd = inner.mems.get(&memory).and_then(|m| m.redirect);
            if rd.is_none() {
                rd = self.predict_redirect(dev, inner, memory);
            }
            if let Some(rd) = rd {
                if let Ok(base) = self.ensure_echo_map(dev, inner, rd.target) {
                    let at = rd.shift + offset as i128;
                    let tsize = dev.state.memory.get(&rd.target).map_or(0, |m| m.size);
                    if at >= 0 && at + len as i128 <= tsize as i128 {
                        let ptr = base + at as usize;
                        self.c.maps_redirected.fetch_add(1, Ordering::Relaxed);
                        return Self::hand_out_map(dev, inner, memory, ptr, offset, len, data);
                    }
                }
            }
        }
        let why = if overlaps {
            "a map its staging buffer's aliasing cannot serve"
        } else {
            "a map of a range outside its staging buffer"
        };
        let real = match self.materialize(dev, inner, memory, why) {
            Ok(r) => r,
            Err(r) => return r,
        };
        let r = down(real);
        if r == vk::Result::SUCCESS {
            if let Some(v) = inner.mems.get_mut(&memory).and_then(|m| m.virt.as_mut()) {
                v.real_mapped = true;
            }
            // SAFETY: the next layer filled *data.
            dev.state
                .note_mapped(memory, unsafe { *data } as usize, offset, len);
        }
        r
    }

    /// `vkUnmapMemory` of an allocation echo did not make.
    pub(super) fn unmap_virtual(&self, dev: &Device, inner: &mut Inner, memory: u64) -> Unmap {
        if let Some(mut s) = dev.state.memory.get_mut(&memory) {
            s.mapped = None;
        }
        if self.leak_handle {
            return Unmap::Down(memory);
        }
        if self.is_block(inner, memory) {
            return self
                .unmap_block(inner, memory)
                .map_or(Unmap::Served, Unmap::Down);
        }
        let Some(m) = inner.mems.get_mut(&memory) else {
            return Unmap::Served;
        };
        m.app_mapped = false;
        match m.virt.as_mut() {
            Some(v) if v.real_mapped => {
                v.real_mapped = false;
                v.real.map_or(Unmap::Served, Unmap::Down)
            }
            _ => Unmap::Served,
        }
    }

    /// `vkFreeMemory` of an allocation echo did not make: forget it (freeing the real one if
    /// echo made it late), and leave the device buffer's memory; if that memory's free waited
    /// only for it, that free is due now.
    pub(super) fn free_virtual(&self, dev: &Device, inner: &mut Inner, memory: u64) -> FreeAction {
        if self.is_block(inner, memory) {
            return match self.free_block(dev, inner, memory) {
                Some(memory) => FreeAction::Down { memory, then: None },
                None => FreeAction::Skip { then: None },
            };
        }
        let Some(rt) = inner.mems.remove(&memory) else {
            return FreeAction::Skip { then: None };
        };
        let Some(v) = rt.virt else {
            return FreeAction::Skip { then: None };
        };
        let mut then = None;
        if let Some(t) = inner.mems.get_mut(&v.target) {
            t.guests.remove(&memory);
            if t.guests.is_empty() {
                if let Some(cb) = t.deferred_free.take() {
                    inner.mems.remove(&v.target);
                    then = Some(DeferredFree(v.target, cb));
                }
            }
        }
        log::debug!("enforce: allocation {memory:#x} (never made at the driver) freed");
        match v.real {
            Some(real) => FreeAction::Down { memory: real, then },
            None => FreeAction::Skip { then },
        }
    }

    /// Staging member `(g, m)` was destroyed. If its own allocation is one echo made late, the
    /// bytes the member left in the device buffer's memory are copied into it and its maps are
    /// of it from now on (a resource bound there later sees them). An allocation echo never made
    /// keeps being served from the device buffer's memory, which holds them.
    pub(super) fn member_gone(&self, dev: &Device, inner: &mut Inner, member: (u32, usize)) {
        let Some((memory, real, home, (lo, hi))) = inner.mems.iter().find_map(|(&k, m)| {
            let v = m.virt.as_ref()?;
            (v.member == member && m.redirect.is_some())
                .then(|| Some((k, v.real?, m.redirect?, v.range)))?
        }) else {
            return;
        };
        if let Some(m) = inner.mems.get_mut(&memory) {
            m.redirect = None;
            if m.app_mapped {
                log::warn!(
                    "enforce: staging buffer of allocation {memory:#x} destroyed while the allocation is mapped: that pointer keeps showing the device buffer's memory; map it again to see the allocation itself"
                );
            }
        }
        if self.skip_carry {
            return;
        }
        let len = hi.saturating_sub(lo) as usize;
        if let (Ok(src), Ok(dst)) = (
            self.ensure_echo_map(dev, inner, home.target),
            map_whole(dev, real),
        ) {
            // SAFETY: whole mappings echo holds; the member's range lies in both allocations.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    (src as *const u8).offset((home.shift + lo as i128) as isize),
                    (dst as *mut u8).add(lo as usize),
                    len,
                );
                let r = vk::MappedMemoryRange {
                    memory: vk::DeviceMemory::from_raw(real),
                    size: vk::WHOLE_SIZE,
                    ..Default::default()
                };
                let _ = (dev.fp.flush_mapped_memory_ranges)(dev.handle, 1, &r);
                (dev.fp.unmap_memory)(dev.handle, vk::DeviceMemory::from_raw(real));
            }
            self.c
                .bytes_carried_late
                .fetch_add(len as u64, Ordering::Relaxed);
        } else {
            log::warn!(
                "enforce: the bytes of destroyed staging buffer of allocation {memory:#x} could not be copied into it"
            );
        }
    }
}
