//! Command buffers that became empty (issue 35): a command buffer whose every recorded command
//! was a copy echo dropped (every region a self-copy, `copy.rs`) holds nothing for the driver
//! but echo's own substitute barriers. It is left out of the submission; a batch left with no
//! command buffer goes down with its semaphore waits and signals, and the submission with its
//! fence, as the application made them (DESIGN §6: every `vkQueueSubmit` is kept, so every
//! fence and semaphore still signals in order).
//!
//! **What "only elided copies" means, complete by construction.** Every command recorded into a
//! command buffer on a device that enforces a plan reaches one of echo's hooks (the registry
//! test `every_recorded_command_is_hooked`): a followed hook marks its command buffer when the
//! command goes down (`ffi_guard::Call::down`), an aside hook and a marking hook
//! (`hooks/mark.rs`) mark it before calling down. A copy whose every region was dropped does not
//! go down, so it does not mark. `vkBeginCommandBuffer`, `vkResetCommandBuffer`, pool resets and
//! frees clear the mark. A command buffer is left out only when it is unmarked *and* holds at
//! least one dropped copy; `vkCmdExecuteCommands` marks its primary, so secondaries always run.
//!
//! **Why leaving out the substitute barriers keeps every ordering.** Within the left-out command
//! buffer nothing remains to order. Across submissions, the application's own barriers
//! (in other command buffers, which still run) chain as they did: a barrier's scopes are stage
//! masks over every earlier and every later command in submission order, so the one before the
//! copy (e.g. `COMPUTE → TRANSFER`) and the one after it (`TRANSFER → HOST`) still form a
//! chain without a transfer command between them, and a visibility operation makes every
//! available write visible. A barrier the application recorded in the same command buffer is a
//! command like any other: it marks, and the command buffer runs. Host writes before the
//! submission are visible to every later submission's commands (`vkQueueSubmit`'s host
//! dependency). The fence's first scope holds every command earlier in submission order, so it
//! signals exactly when it did.
//!
//! Fail closed: a batch whose `pNext` chain holds anything but a
//! `VkTimelineSemaphoreSubmitInfo` (device-group masks are per command buffer), a
//! `VkCommandBufferSubmitInfo` with a `pNext`, and guarded enforce (its windows follow the
//! command buffers of a submission) keep every command buffer.

use super::Enforcer;
use ash::vk;
use ash::vk::Handle;
use std::sync::atomic::Ordering;

/// A submission with the empty command buffers left out: the batches to pass down, and what
/// was left out (counted once the submission went down).
pub struct Stripped<T> {
    /// The rewritten batches; they point into `cbs`.
    pub batches: Vec<T>,
    #[allow(dead_code)] // kept alive: `batches` point into it
    cbs: Vec<Vec<u64>>,
    dropped: u64,
    emptied: u64,
}

impl<T> Stripped<T> {
    pub fn count(&self) -> u32 {
        self.batches.len() as u32
    }
    pub fn as_ptr(&self) -> *const T {
        self.batches.as_ptr()
    }
}

/// Whether a `VkSubmitInfo` chain holds only structures that do not follow its command buffers.
unsafe fn chain_is_plain(mut p: *const std::ffi::c_void) -> bool {
    while !p.is_null() {
        let b = &*(p as *const vk::BaseInStructure<'_>);
        if b.s_type != vk::StructureType::TIMELINE_SEMAPHORE_SUBMIT_INFO {
            return false;
        }
        p = b.p_next as *const std::ffi::c_void;
    }
    true
}

/// A copy of `v` in 8-byte words (handles and `VkCommandBufferSubmitInfo` are 8-byte aligned),
/// for storage that the rewritten batches point into.
fn bytes_of<T: Copy>(v: &[T]) -> Vec<u64> {
    const { assert!(std::mem::align_of::<T>() <= 8) };
    let n = std::mem::size_of_val(v);
    let mut out = vec![0u64; n.div_ceil(8)];
    // SAFETY: both regions are n bytes; T is plain data.
    unsafe {
        std::ptr::copy_nonoverlapping(v.as_ptr() as *const u8, out.as_mut_ptr() as *mut u8, n)
    };
    out
}

impl Enforcer {
    /// A recorded command went down into `cb` (or is about to): it holds real work.
    #[inline]
    pub fn mark_content(&self, cb: u64) {
        if !self.content.contains(&cb) {
            self.content.insert(cb);
        }
    }

    /// `cb` was begun, reset or freed: it holds nothing yet.
    pub(super) fn clear_content(&self, cbs: &[u64]) {
        for cb in cbs {
            self.content.remove(cb);
        }
    }

    /// Whether `cb` held only copies echo dropped (and at least one).
    fn only_elided(&self, cb: u64) -> bool {
        !self.content.contains(&cb) && self.elided_in.get(&cb).is_some_and(|t| t.copies > 0)
    }

    /// Whether submissions may lose command buffers at all (one relaxed load on the fast path).
    #[inline]
    fn may_strip(&self) -> bool {
        self.elides() && self.guard.is_none()
    }

    /// `vkQueueSubmit`: the batches without their empty command buffers, or `None` when every
    /// command buffer runs (the application's array goes down unchanged).
    ///
    /// # Safety
    /// `submits` holds `count` valid submit infos.
    pub unsafe fn strip_v1<'a>(
        &self,
        count: u32,
        submits: *const vk::SubmitInfo<'a>,
    ) -> Option<Stripped<vk::SubmitInfo<'a>>> {
        if !self.may_strip() || count == 0 || submits.is_null() {
            return None;
        }
        let all = std::slice::from_raw_parts(submits, count as usize);
        let cbs_of = |s: &vk::SubmitInfo<'_>| -> &[vk::CommandBuffer] {
            if s.command_buffer_count == 0 || s.p_command_buffers.is_null() {
                &[]
            } else {
                std::slice::from_raw_parts(s.p_command_buffers, s.command_buffer_count as usize)
            }
        };
        let strippable = |s: &vk::SubmitInfo<'_>| chain_is_plain(s.p_next);
        if !all
            .iter()
            .any(|s| strippable(s) && cbs_of(s).iter().any(|c| self.only_elided(c.as_raw())))
        {
            return None;
        }
        let mut out = Stripped {
            batches: all.to_vec(),
            cbs: Vec::with_capacity(all.len()),
            dropped: 0,
            emptied: 0,
        };
        for (b, s) in out.batches.iter_mut().zip(all) {
            if !strippable(s) {
                continue;
            }
            let cbs = cbs_of(s);
            let keep: Vec<vk::CommandBuffer> = cbs
                .iter()
                .copied()
                .filter(|c| !self.only_elided(c.as_raw()))
                .collect();
            if keep.len() == cbs.len() {
                continue;
            }
            out.dropped += (cbs.len() - keep.len()) as u64;
            out.emptied += u64::from(keep.is_empty());
            let bytes = bytes_of(&keep);
            b.command_buffer_count = keep.len() as u32;
            b.p_command_buffers = if keep.is_empty() {
                std::ptr::null()
            } else {
                bytes.as_ptr() as *const vk::CommandBuffer
            };
            out.cbs.push(bytes);
        }
        Some(out)
    }

    /// As [`Enforcer::strip_v1`], for `vkQueueSubmit2`.
    ///
    /// # Safety
    /// `submits` holds `count` valid submit infos.
    pub unsafe fn strip_v2<'a>(
        &self,
        count: u32,
        submits: *const vk::SubmitInfo2<'a>,
    ) -> Option<Stripped<vk::SubmitInfo2<'a>>> {
        if !self.may_strip() || count == 0 || submits.is_null() {
            return None;
        }
        let all = std::slice::from_raw_parts(submits, count as usize);
        let infos_of = |s: &vk::SubmitInfo2<'a>| -> &[vk::CommandBufferSubmitInfo<'a>] {
            if s.command_buffer_info_count == 0 || s.p_command_buffer_infos.is_null() {
                &[]
            } else {
                std::slice::from_raw_parts(
                    s.p_command_buffer_infos,
                    s.command_buffer_info_count as usize,
                )
            }
        };
        let droppable = |i: &vk::CommandBufferSubmitInfo<'_>| {
            i.p_next.is_null() && self.only_elided(i.command_buffer.as_raw())
        };
        if !all
            .iter()
            .any(|s| s.p_next.is_null() && infos_of(s).iter().any(droppable))
        {
            return None;
        }
        let mut out = Stripped {
            batches: all.to_vec(),
            cbs: Vec::with_capacity(all.len()),
            dropped: 0,
            emptied: 0,
        };
        for (b, s) in out.batches.iter_mut().zip(all) {
            if !s.p_next.is_null() {
                continue;
            }
            let infos = infos_of(s);
            let keep: Vec<vk::CommandBufferSubmitInfo<'a>> =
                infos.iter().copied().filter(|i| !droppable(i)).collect();
            if keep.len() == infos.len() {
                continue;
            }
            out.dropped += (infos.len() - keep.len()) as u64;
            out.emptied += u64::from(keep.is_empty());
            let bytes = bytes_of(&keep);
            b.command_buffer_info_count = keep.len() as u32;
            b.p_command_buffer_infos = if keep.is_empty() {
                std::ptr::null()
            } else {
                bytes.as_ptr() as *const vk::CommandBufferSubmitInfo<'a>
            };
            out.cbs.push(bytes);
        }
        Some(out)
    }

    /// The stripped submission went down successfully: count what it left out.
    pub fn count_stripped<T>(&self, s: &Stripped<T>) {
        self.c
            .command_buffers_dropped
            .fetch_add(s.dropped, Ordering::Relaxed);
        self.c
            .submissions_emptied
            .fetch_add(s.emptied, Ordering::Relaxed);
    }
}
