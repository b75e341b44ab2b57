//! Frees and destruction: `vkFreeMemory` (deferred while a guest still lives in the memory,
//! nothing at the driver for an allocation echo never made), `vkDestroyBuffer` (the last guest
//! gone lets a deferred free go down) and `vkDestroyDevice` (frees still deferred).

use super::{Bind, DeferredFree, Enforcer, FreeAction, Slot};
use crate::log;
use crate::records::Device;
use ash::vk;
use ash::vk::Handle;
use std::sync::atomic::Ordering;

impl Enforcer {
    // ------------------------------------------------------------------ lifetime

    /// `vkFreeMemory`: whether to free through the next layer (and which allocation), to defer
    /// the free (a guest still lives in the memory), or nothing to free at the driver (an
    /// allocation echo never made).
    pub fn free(
        &self,
        dev: &Device,
        memory: u64,
        alloc: *const vk::AllocationCallbacks<'_>,
    ) -> FreeAction {
        let mut inner = self.lock();
        if self.pending.load(Ordering::Relaxed) > 0 {
            // A held-back bind into memory that is going away will never happen.
            let dropped: Vec<(u64, Slot)> = inner
                .bufs
                .iter()
                .filter_map(|(&h, b)| match (b.bind, b.guest) {
                    (Bind::Pending { memory: m, .. }, Some(s)) if m == memory => Some((h, s)),
                    _ => None,
                })
                .collect();
            for (h, slot) in dropped {
                self.pending.fetch_sub(1, Ordering::Relaxed);
                if let Some(b) = inner.bufs.get_mut(&h) {
                    b.bind = Bind::Done;
                }
                self.set_outcome(
                    &mut inner,
                    slot,
                    Err("its memory was freed before its partner was bound".into()),
                );
            }
        }
        if self.is_virtual(&inner, memory) {
            return self.free_virtual(dev, &mut inner, memory);
        }
        if let Some(m) = inner.mems.get_mut(&memory) {
            if !m.guests.is_empty() {
                let cb = super::virt::callbacks_of(alloc);
                m.deferred_free = Some(cb);
                self.c.frees_deferred.fetch_add(1, Ordering::Relaxed);
                log::debug!(
                    "enforce: free of {memory:#x} deferred: {} buffer(s) or allocation(s) echo did not make still live in it",
                    m.guests.len()
                );
                return FreeAction::Deferred;
            }
        }
        inner.mems.remove(&memory);
        for m in inner.mems.values_mut() {
            if m.redirect.is_some_and(|r| r.target == memory) {
                m.redirect = None;
            }
        }
        FreeAction::Down { memory, then: None }
    }

    /// `vkDestroyBuffer` (before the call goes down): forget the buffer; the memory to free once
    /// the call went down, when it was the last guest of a deferred free.
    pub fn buffer_destroyed(&self, dev: &Device, buffer: u64) -> Option<DeferredFree> {
        let bound = dev.state.buffers.get(&buffer).and_then(|b| b.bound);
        let mut inner = self.lock();
        if let Some(b) = inner.bufs.remove(&buffer) {
            self.group_of.remove(&buffer);
            if matches!(b.bind, Bind::Pending { .. }) {
                self.pending.fetch_sub(1, Ordering::Relaxed);
            }
            for slot in &b.slots {
                if let Some(g) = inner.groups.get_mut(&slot.group()) {
                    match *slot {
                        Slot::Device(_) => g.device = None,
                        Slot::Staging(_, m) => g.members[m].buffer = None,
                    }
                }
                if let (Slot::Staging(g, m), true) =
                    (*slot, self.any_virtual.load(Ordering::Acquire))
                {
                    self.member_gone(dev, &mut inner, (g, m));
                }
            }
        }
        let (mem, _) = bound?;
        let m = inner.mems.get_mut(&mem)?;
        if !m.guests.remove(&buffer) || !m.guests.is_empty() {
            return None;
        }
        let cb = m.deferred_free.take()?;
        inner.mems.remove(&mem);
        Some(DeferredFree(mem, cb))
    }

    /// Frees a memory whose free was deferred.
    pub fn free_now(&self, dev: &Device, f: DeferredFree) {
        log::debug!("enforce: deferred free of {:#x} done", f.0);
        dev.state.memory.remove(&f.0);
        let cb = f.1.as_ref().map_or(std::ptr::null(), |c| &c.0 as *const _);
        // SAFETY: the application freed this memory; no buffer lives in it any more.
        let mapping = self.guard.as_ref().and_then(|g| g.before_free(f.0));
        unsafe { (dev.fp.free_memory)(dev.handle, vk::DeviceMemory::from_raw(f.0), cb) };
        drop(mapping); // unmapped only once the driver let go of it
    }

    /// `vkDestroyDevice` (before the call goes down): frees still deferred.
    pub fn device_destroyed(&self, dev: &Device) {
        let due: Vec<DeferredFree> = {
            let mut inner = self.lock();
            let ids: Vec<u64> = inner
                .mems
                .iter()
                .filter(|(_, m)| m.deferred_free.is_some())
                .map(|(&k, _)| k)
                .collect();
            ids.into_iter()
                .filter_map(|k| {
                    let m = inner.mems.remove(&k)?;
                    Some(DeferredFree(k, m.deferred_free?))
                })
                .collect()
        };
        for f in due {
            self.free_now(dev, f);
        }
        if let Some(g) = &self.guard {
            g.device_destroyed(dev);
        }
    }
}
