//! Command buffers that became empty (issue 35): a command buffer whose every recorded command
//! was a copy echo dropped (every region a self-copy, `copy.rs`) holds nothing for the driver
//! but echo's own substitute barriers. It is left out of the submission; a batch left with no
//! command buffer goes down with its semaphore waits and signals, and the submission with its
//! fence, as the application made them (DESIGN §6: every `vkQueueSubmit` is kept, so every
//! fence and semaphore still signals in order).
//!
//! **What "only elided copies" means, complete by construction.** Every command recorded into a
//! command buffer on a device that enforces a plan reaches one of echo's intercepts (the
//! registry test `every_recorded_command_is_hooked`): followed, stepped aside from or marked,
//! each marks its command buffer when the command goes down (`ffi_guard::Call::down`). A copy
//! whose every region was dropped does not go down, so it does not mark. `vkBeginCommandBuffer`, `vkResetCommandBuffer`, pool resets and
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
use crate::submit::Batch;
use std::sync::atomic::Ordering;

/// A submission with the empty command buffers left out: the batches to pass down, and what
/// was left out (counted once the submission went down).
pub struct Stripped<B> {
    /// The rewritten batches; they point into `cbs`.
    pub batches: Vec<B>,
    #[allow(dead_code)] // kept alive: `batches` point into it
    cbs: Vec<Vec<u64>>,
    dropped: u64,
    emptied: u64,
}

impl<B> Stripped<B> {
    pub fn count(&self) -> u32 {
        self.batches.len() as u32
    }
    pub fn as_ptr(&self) -> *const B {
        self.batches.as_ptr()
    }
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

    /// A submission (`vkQueueSubmit`'s or `vkQueueSubmit2`'s batches): the batches without their
    /// empty command buffers, or `None` when every command buffer runs (the application's array
    /// goes down unchanged).
    ///
    /// # Safety
    /// Every batch is valid.
    pub unsafe fn strip<B: Batch>(&self, all: &[B]) -> Option<Stripped<B>> {
        if !self.may_strip() || all.is_empty() {
            return None;
        }
        let droppable = |e: &B::Entry| B::entry_plain(e) && self.only_elided(B::handle(e));
        if !all
            .iter()
            .any(|s| s.plain() && s.entries().iter().any(droppable))
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
            if !s.plain() {
                continue;
            }
            let entries = s.entries();
            let keep: Vec<B::Entry> = entries.iter().copied().filter(|e| !droppable(e)).collect();
            if keep.len() == entries.len() {
                continue;
            }
            out.dropped += (entries.len() - keep.len()) as u64;
            out.emptied += u64::from(keep.is_empty());
            let bytes = bytes_of(&keep);
            let p = if keep.is_empty() {
                std::ptr::null()
            } else {
                bytes.as_ptr() as *const B::Entry
            };
            *b = s.with_entries(p, keep.len() as u32);
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
