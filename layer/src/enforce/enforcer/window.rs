//! Allocations echo makes only in part (DESIGN §6 "Memory", plan group `device_memory`).
//!
//! A `device_into_staging` device buffer `d` lives in its staging buffer's memory, so its own
//! allocation `D` holds nothing it reads. When the plan shows that every buffer the trace bound
//! into `D` is such a device buffer, except buffers lying in one window `[lo, hi)` (a parameter
//! buffer at the start of a sub-allocated block, say), and that the host never mapped `D`,
//! `vkAllocateMemory` of `D` makes only the window at the driver (same type, priority and
//! callbacks; nothing at all when the window is empty) and hands the application a handle of
//! echo's own. Echo maps the window once (the type is host-visible: the plan requires it).
//!
//! - bind of a planned device buffer: held back, then bound into its staging memory as for any
//!   `device_into_staging` group (nothing reaches `D`);
//! - bind of a buffer that lies wholly in the window (and keeps its alignment there): bound into
//!   the window allocation at `offset - lo`;
//! - anything else — a buffer outside or across the window (a planned device buffer that could
//!   not be aliased included), an image, an export — makes the whole allocation at the driver
//!   at that moment (the *overflow*, the application's type, size, dedicated buffer, priority
//!   and callbacks), with the bytes `D` held: the window's bytes at `[lo, hi)` and each aliased
//!   device buffer's bytes (from its staging memory) at its offset. The resource goes there. A
//!   buffer bound across the window's edge gets the window's bytes as they are at its bind
//!   (they are copied again); later writes through a resource in the window are not seen by
//!   it (the two are separate memory now: live aliasing across the edge is not kept, and a
//!   warning says so);
//! - map: a range inside the window is served from echo's mapping of it; a range wholly outside
//!   maps the overflow (made then); a range across the edge cannot be one contiguous mapping:
//!   refused with `VK_ERROR_MEMORY_MAP_FAILED` (a result `vkMapMemory` may return), a warning
//!   once, counted in `maps_refused` — the plan chose this only for memory the trace never saw
//!   mapped;
//! - flush/invalidate: to the window (offsets moved down by `lo`) or to the overflow, whichever
//!   the current mapping is of;
//! - free: the window and the overflow, if made;
//! - commitment: the overflow's, else the window's; opaque capture address: 0 (allocations with
//!   allocate flags are always made).

use super::{map_whole, Block, Callbacks, Enforcer, Inner, Slot};
use crate::log;
use crate::records::Device;
use ash::vk;
use ash::vk::Handle;
use echo_analyzer::apply::AllocChain;
use echo_analyzer::plan::Direction;
use echo_analyzer::trace::ObjectKey;
use std::ffi::c_void;
use std::sync::atomic::Ordering;

impl Block {
    fn window_len(&self) -> u64 {
        self.hi - self.lo
    }
}

/// Allocates at the driver as the application asked (type, size, dedicated buffer, priority,
/// callbacks).
pub(super) fn allocate_like(
    dev: &Device,
    type_index: u32,
    size: u64,
    dedicated: Option<u64>,
    priority: Option<u32>,
    callbacks: Option<&Callbacks>,
) -> Result<u64, vk::Result> {
    let mut d2 = dedicated.map(|b| vk::MemoryDedicatedAllocateInfo {
        buffer: vk::Buffer::from_raw(b),
        ..Default::default()
    });
    let mut p2 = priority.map(|p| vk::MemoryPriorityAllocateInfoEXT {
        priority: f32::from_bits(p),
        ..Default::default()
    });
    let mut next: *const c_void = std::ptr::null();
    if let Some(p) = p2.as_mut() {
        p.p_next = next;
        next = p as *const _ as *const c_void;
    }
    if let Some(d) = d2.as_mut() {
        d.p_next = next;
        next = d as *const _ as *const c_void;
    }
    let info = vk::MemoryAllocateInfo {
        p_next: next,
        allocation_size: size,
        memory_type_index: type_index,
        ..Default::default()
    };
    let cb = callbacks.map_or(std::ptr::null(), |c| &c.0 as *const _);
    let mut out = vk::DeviceMemory::null();
    // SAFETY: a valid allocate info (the application's own request, rebuilt); out is valid.
    let r = unsafe { (dev.fp.allocate_memory)(dev.handle, &info, cb, &mut out) };
    if r != vk::Result::SUCCESS {
        return Err(r);
    }
    Ok(out.as_raw())
}

fn free_like(dev: &Device, memory: u64, callbacks: Option<&Callbacks>) {
    let cb = callbacks.map_or(std::ptr::null(), |c| &c.0 as *const _);
    // SAFETY: echo made this allocation; nothing of the application's lives in it any more.
    unsafe { (dev.fp.free_memory)(dev.handle, vk::DeviceMemory::from_raw(memory), cb) };
}

impl Enforcer {
    #[inline]
    pub(super) fn is_block(&self, inner: &Inner, memory: u64) -> bool {
        inner.mems.get(&memory).is_some_and(|m| m.block.is_some())
    }

    /// `vkAllocateMemory` of an allocation the plan makes only in part (`key` in
    /// `block_memory`): echo's handle, or `None` (the call goes down as asked).
    pub(super) fn skip_block(
        &self,
        dev: &Device,
        key: &ObjectKey,
        info: &vk::MemoryAllocateInfo<'_>,
        chain: &AllocChain,
        callbacks: Option<Callbacks>,
        take_key: &mut dyn FnMut() -> ObjectKey,
    ) -> Result<u64, Option<ObjectKey>> {
        let Some(&(lo, hi)) = self.block_memory.get(key) else {
            return Err(None);
        };
        self.note_creator(false, key);
        let why = self.may_skip_block(key, info, chain, lo, hi);
        if let Err(why) = why {
            log::info!(
                "enforce: the device allocation with key {key} is made in full at the driver: {why}"
            );
            return Err(None);
        }
        let window = if hi > lo {
            let w = match allocate_like(
                dev,
                info.memory_type_index,
                hi - lo,
                None,
                chain.priority,
                callbacks.as_ref(),
            ) {
                Ok(w) => w,
                Err(r) => {
                    log::info!("enforce: the window of the device allocation with key {key} could not be made ({r:?}); it is made in full");
                    return Err(None);
                }
            };
            match map_whole(dev, w) {
                Ok(p) => Some((w, p)),
                Err(r) => {
                    free_like(dev, w, callbacks.as_ref());
                    log::info!("enforce: the window of the device allocation with key {key} could not be mapped ({r:?}); it is made in full");
                    return Err(None);
                }
            }
        } else {
            None
        };
        let taken = take_key();
        if taken != *key {
            // Another thread allocated with this key meanwhile: identities are not trusted.
            if let Some((w, _)) = window {
                free_like(dev, w, callbacks.as_ref());
            }
            return Err(Some(taken));
        }
        let cell = Box::new(0u64);
        let handle = &*cell as *const u64 as u64;
        let mut inner = self.lock();
        inner.mems.entry(handle).or_default().block = Some(Block {
            type_index: info.memory_type_index,
            size: info.allocation_size,
            dedicated: chain.dedicated.map(|(b, _)| b).filter(|&b| b != 0),
            priority: chain.priority,
            callbacks,
            lo,
            hi,
            window,
            aliased: Vec::new(),
            overflow: None,
            overflow_mapped: false,
            straddled: false,
            _cell: cell,
        });
        let saved = info.allocation_size - (hi - lo);
        self.c
            .bytes_not_allocated
            .fetch_add(saved, Ordering::Relaxed);
        if window.is_some() {
            self.c.allocations_windowed.fetch_add(1, Ordering::Relaxed);
        } else {
            self.c.allocations_skipped.fetch_add(1, Ordering::Relaxed);
        }
        self.any_virtual.store(true, Ordering::Release);
        log::info!(
            "enforce: device allocation of {} bytes ({key}) made only in [{lo}, {hi}); echo's handle {handle:#x}",
            info.allocation_size
        );
        Ok(handle)
    }

    fn may_skip_block(
        &self,
        key: &ObjectKey,
        info: &vk::MemoryAllocateInfo<'_>,
        chain: &AllocChain,
        lo: u64,
        hi: u64,
    ) -> Result<(), String> {
        self.memory_ok.clone()?;
        if self.ambiguous(false, key) {
            return Err(format!(
                "allocations with key {key} (but for the ordinal) were made on several threads"
            ));
        }
        if let Some(t) = chain.other.first() {
            return Err(format!(
                "its allocate info carries a structure of sType {t} (export, import or another extension), which only the driver can honour"
            ));
        }
        if chain.flags != 0 {
            return Err(format!(
                "it is allocated with VkMemoryAllocateFlags {:#x}",
                chain.flags
            ));
        }
        if !self.host_visible(info.memory_type_index) {
            return Err(format!(
                "memory type {} is not host-visible (a late allocation could not take its bytes)",
                info.memory_type_index
            ));
        }
        if hi > info.allocation_size || lo > hi || hi - lo >= info.allocation_size {
            return Err("the window does not leave part of it out".into());
        }
        if let Some((b, i)) = chain.dedicated {
            let inner = self.lock();
            let planned = inner.bufs.get(&b).is_some_and(|x| {
                x.slots.iter().any(|s| {
                    matches!(s, Slot::Device(g) if inner.groups.get(g).is_some_and(|g| g.direction == Direction::DeviceIntoStaging))
                })
            });
            if i != 0 || !planned || hi > lo {
                return Err(
                    "it is dedicated to a resource that is not a planned device buffer".into(),
                );
            }
        }
        Ok(())
    }

    /// Where a buffer bound at `offset` (requirements `req`) of a block goes: `Some(window,
    /// offset there)` when it lies wholly in the window.
    fn in_window(b: &Block, offset: u64, req: &vk::MemoryRequirements) -> Option<(u64, u64)> {
        let (w, _) = b.window?;
        let end = offset.checked_add(req.size)?;
        (offset >= b.lo && end <= b.hi && (offset - b.lo) % req.alignment.max(1) == 0)
            .then(|| (w, offset - b.lo))
    }

    /// A buffer bound into a block as the application asked: into the window when it lies
    /// there, else into the overflow (made now).
    pub(super) fn bind_block(
        &self,
        dev: &Device,
        inner: &mut Inner,
        buffer: u64,
        memory: u64,
        offset: u64,
        down: &mut dyn FnMut(u64, u64) -> vk::Result,
    ) -> vk::Result {
        let req = dev.state.buffers.get(&buffer).map(|b| b.requirements);
        let Some(b) = inner.mems.get(&memory).and_then(|m| m.block.as_ref()) else {
            return vk::Result::ERROR_OUT_OF_DEVICE_MEMORY;
        };
        let placed = req.and_then(|r| Self::in_window(b, offset, &r));
        let across = b.window.is_some()
            && req.is_some_and(|r| offset < b.hi && offset.saturating_add(r.size) > b.lo);
        let r = match placed {
            Some((w, at)) => down(w, at),
            None => {
                let real = match self.materialize_block(
                    dev,
                    inner,
                    memory,
                    &format!("buffer {buffer:#x} is bound at {offset}, outside its window"),
                ) {
                    Ok(m) => m,
                    Err(r) => return r,
                };
                if across {
                    self.straddle(dev, inner, memory, &format!("buffer {buffer:#x}"));
                }
                down(real, offset)
            }
        };
        if r == vk::Result::SUCCESS {
            if let Some(mut s) = dev.state.buffers.get_mut(&buffer) {
                // The application's handle: copies compare where buffers are by it.
                s.bound = Some((memory, offset));
            }
        }
        r
    }

    /// A resource bound across the window's edge into the overflow: it gets the window's bytes
    /// as they are now.
    fn straddle(&self, dev: &Device, inner: &mut Inner, memory: u64, what: &str) {
        let Some(b) = inner.mems.get_mut(&memory).and_then(|m| m.block.as_mut()) else {
            return;
        };
        if !b.straddled {
            b.straddled = true;
            log::warn!(
                "enforce: {what} is bound across the edge of the part of allocation {memory:#x} echo made first; it sees the bytes there as they are now, but from now on resources on either side of the edge no longer share memory"
            );
        }
        let (Some((_, src)), Some(dst)) = (b.window, b.overflow) else {
            return;
        };
        if b.overflow_mapped {
            // The application maps the overflow: echo cannot map it too.
            log::warn!("enforce: the window's bytes of allocation {memory:#x} were not copied again for {what}: the application maps the rest of it");
            return;
        }
        let (lo, len) = (b.lo, b.window_len());
        if self.skip_carry {
            return;
        }
        if let Ok(d) = map_whole(dev, dst) {
            // SAFETY: echo's whole mappings; [lo, hi) lies in the overflow.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    src as *const u8,
                    (d as *mut u8).add(lo as usize),
                    len as usize,
                );
                self.flush_unmap(dev, dst);
            }
            self.c.bytes_carried_late.fetch_add(len, Ordering::Relaxed);
        }
    }

    /// Flushes (when not coherent) and unmaps echo's whole mapping of `memory`.
    unsafe fn flush_unmap(&self, dev: &Device, memory: u64) {
        let ty = dev.state.memory.get(&memory).map(|m| m.type_index);
        let coherent = ty.is_some_and(|t| {
            self.type_flags
                .get(t as usize)
                .is_some_and(|f| f & vk::MemoryPropertyFlags::HOST_COHERENT.as_raw() != 0)
        });
        if !coherent {
            let r = vk::MappedMemoryRange {
                memory: vk::DeviceMemory::from_raw(memory),
                size: vk::WHOLE_SIZE,
                ..Default::default()
            };
            let _ = (dev.fp.flush_mapped_memory_ranges)(dev.handle, 1, &r);
        }
        (dev.fp.unmap_memory)(dev.handle, vk::DeviceMemory::from_raw(memory));
    }

    /// Makes the whole allocation at the driver now (the overflow), with every byte the block
    /// held: the window's and each aliased device buffer's (from its staging memory).
    pub(super) fn materialize_block(
        &self,
        dev: &Device,
        inner: &mut Inner,
        memory: u64,
        why: &str,
    ) -> Result<u64, vk::Result> {
        let Some(b) = inner.mems.get(&memory).and_then(|m| m.block.as_ref()) else {
            return Ok(memory);
        };
        if let Some(o) = b.overflow {
            return Ok(o);
        }
        let dedicated = b.dedicated.filter(|d| dev.state.buffers.contains_key(d));
        let real = allocate_like(
            dev,
            b.type_index,
            b.size,
            dedicated,
            b.priority,
            b.callbacks.as_ref(),
        )
        .inspect_err(|r| {
            log::warn!(
                "enforce: the allocation echo made only in part ({} bytes) is needed whole ({why}), but the driver refused it ({r:?}); the call fails with that error",
                b.size
            );
        })?;
        // Where each aliased device buffer's bytes are.
        let sources: Vec<(u64, u64, u64, u64)> = b
            .aliased
            .iter()
            .map(|&(off, len, m, at)| (off, m, at, len))
            .collect();
        let (lo, wlen, window, size, callbacks) =
            (b.lo, b.window_len(), b.window, b.size, b.callbacks);
        let mut carried = 0u64;
        if !self.skip_carry {
            let dst = match map_whole(dev, real) {
                Ok(d) => d,
                Err(r) => {
                    free_like(dev, real, callbacks.as_ref());
                    log::warn!("enforce: the allocation echo made only in part is needed whole ({why}), but it could not be mapped to take its bytes ({r:?}); the call fails");
                    return Err(vk::Result::ERROR_OUT_OF_DEVICE_MEMORY);
                }
            };
            let mut lost = None;
            // SAFETY: echo's whole mappings; every range was checked against the sizes.
            unsafe {
                if let Some((_, src)) = window {
                    std::ptr::copy_nonoverlapping(
                        src as *const u8,
                        (dst as *mut u8).add(lo as usize),
                        wlen as usize,
                    );
                    carried += wlen;
                }
                for (off, m, at, len) in sources {
                    let msize = dev.state.memory.get(&m).map_or(0, |s| s.size);
                    let src = self.ensure_echo_map(dev, inner, m);
                    match src {
                        Ok(src)
                            if at.saturating_add(len) <= msize
                                && off.saturating_add(len) <= size =>
                        {
                            std::ptr::copy_nonoverlapping(
                                (src as *const u8).add(at as usize),
                                (dst as *mut u8).add(off as usize),
                                len as usize,
                            );
                            carried += len;
                        }
                        Ok(_) => lost = Some("a range out of bounds".to_string()),
                        Err(e) => lost = Some(e),
                    }
                }
                self.flush_unmap(dev, real);
            }
            if let Some(e) = lost {
                free_like(dev, real, callbacks.as_ref());
                log::warn!("enforce: the allocation echo made only in part is needed whole ({why}), but a device buffer's bytes could not be copied into it ({e}); the call fails");
                return Err(vk::Result::ERROR_OUT_OF_DEVICE_MEMORY);
            }
        }
        if let Some(b) = inner.mems.get_mut(&memory).and_then(|m| m.block.as_mut()) {
            b.overflow = Some(real);
        }
        self.c
            .bytes_not_allocated
            .fetch_sub(size - wlen, Ordering::Relaxed);
        self.c.allocations_made_late.fetch_add(1, Ordering::Relaxed);
        self.c
            .bytes_carried_late
            .fetch_add(carried, Ordering::Relaxed);
        log::info!(
            "enforce: allocation {memory:#x} made whole at the driver after all ({why}): {size} bytes, {carried} carried over"
        );
        Ok(real)
    }

    /// `vkMapMemory` of a block.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn map_block(
        &self,
        dev: &Device,
        inner: &mut Inner,
        memory: u64,
        offset: u64,
        len: u64,
        data: *mut *mut c_void,
        down: &mut dyn FnMut(u64) -> vk::Result,
    ) -> vk::Result {
        let Some(b) = inner.mems.get(&memory).and_then(|m| m.block.as_ref()) else {
            return vk::Result::ERROR_MEMORY_MAP_FAILED;
        };
        let end = offset.saturating_add(len);
        if let Some((_, ptr)) = b.window {
            if offset >= b.lo && end <= b.hi {
                let p = ptr + (offset - b.lo) as usize;
                return Self::hand_out_map(dev, inner, memory, p, offset, len, data);
            }
            if offset < b.hi && end > b.lo {
                self.c.maps_refused.fetch_add(1, Ordering::Relaxed);
                log::warn_once(
                    "enforce-map-across-window",
                    format_args!("enforce: a map of [{offset}, {end}) of allocation {memory:#x} spans the part echo made first [{}, {}) and the rest, which are not one mapping: refused with VK_ERROR_MEMORY_MAP_FAILED (further refusals are in the statistics, maps_refused)", b.lo, b.hi),
                );
                return vk::Result::ERROR_MEMORY_MAP_FAILED;
            }
        }
        let real =
            match self.materialize_block(dev, inner, memory, "a map of a range outside its window")
            {
                Ok(r) => r,
                Err(r) => return r,
            };
        let r = down(real);
        if r == vk::Result::SUCCESS {
            if let Some(b) = inner.mems.get_mut(&memory).and_then(|m| m.block.as_mut()) {
                b.overflow_mapped = true;
            }
            // SAFETY: the next layer filled *data.
            dev.state
                .note_mapped(memory, unsafe { *data } as usize, offset, len);
        }
        r
    }

    /// `vkUnmapMemory` of a block: the overflow's mapping goes down; the window's is echo's.
    pub(super) fn unmap_block(&self, inner: &mut Inner, memory: u64) -> Option<u64> {
        let m = inner.mems.get_mut(&memory)?;
        m.app_mapped = false;
        let b = m.block.as_mut()?;
        if std::mem::take(&mut b.overflow_mapped) {
            return b.overflow;
        }
        None
    }

    /// A flush/invalidate range of a block: into the overflow (when its mapping is the
    /// application's) or the window; `None`: nothing at the driver holds it.
    pub(super) fn block_range(
        &self,
        inner: &Inner,
        r: &vk::MappedMemoryRange<'_>,
    ) -> Option<Option<vk::MappedMemoryRange<'static>>> {
        let b = inner.mems.get(&r.memory.as_raw())?.block.as_ref()?;
        let mut n = vk::MappedMemoryRange {
            memory: r.memory,
            offset: r.offset,
            size: r.size,
            ..Default::default()
        };
        if b.overflow_mapped {
            n.memory = vk::DeviceMemory::from_raw(b.overflow?);
            return Some(Some(n));
        }
        let Some((w, _)) = b.window else {
            return Some(None);
        };
        n.memory = vk::DeviceMemory::from_raw(w);
        n.offset = r.offset.saturating_sub(b.lo);
        if r.size != vk::WHOLE_SIZE {
            n.size = r.size.min(b.window_len().saturating_sub(n.offset));
        }
        Some(Some(n))
    }

    /// `vkFreeMemory` of a block: the window is freed here; the overflow (if made) is what the
    /// call frees at the driver.
    pub(super) fn free_block(&self, dev: &Device, inner: &mut Inner, memory: u64) -> Option<u64> {
        let b = inner.mems.remove(&memory)?.block?;
        if let Some((w, _)) = b.window {
            free_like(dev, w, b.callbacks.as_ref());
        }
        log::debug!("enforce: allocation {memory:#x} (made only in part) freed");
        b.overflow
    }

    /// The allocation for queries (commitment): the overflow, else the window.
    pub(super) fn block_physical(&self, inner: &Inner, memory: u64) -> Option<Option<u64>> {
        let b = inner.mems.get(&memory)?.block.as_ref()?;
        Some(b.overflow.or(b.window.map(|w| w.0)))
    }
}
