//! A queue submission's batches behind one type: `VkSubmitInfo` (`vkQueueSubmit`) and
//! `VkSubmitInfo2` (`vkQueueSubmit2`, `vkQueueSubmit2KHR`) are both a [`Batch`], so the
//! submission hook (`hooks/queue.rs`), profile's trace of it and enforce's leaving out of empty
//! command buffers (`enforce/empty.rs`) each have one path for both commands. Below both modes:
//! it names nothing of the layer but the raw-array helpers.

use crate::handles::{raw, slice};
use ash::vk;
use echo_analyzer::trace::SubmitBatch;

/// One batch of a submission: its command buffers (each an entry: a handle, or a
/// `VkCommandBufferSubmitInfo`), its semaphores, its chain.
pub trait Batch: Copy {
    /// How the batch names one command buffer.
    type Entry: Copy;

    /// The batch's command buffer entries.
    ///
    /// # Safety
    /// The batch is valid (its arrays hold their counts).
    unsafe fn entries(&self) -> &[Self::Entry];

    /// The command buffer of an entry.
    fn handle(e: &Self::Entry) -> u64;

    /// Whether an entry may be left out of its batch: nothing chained to it follows it.
    fn entry_plain(e: &Self::Entry) -> bool;

    /// Whether the batch may lose command buffers: nothing chained to it follows them
    /// (`VkTimelineSemaphoreSubmitInfo` only, for `VkSubmitInfo`; nothing, for
    /// `VkSubmitInfo2`).
    ///
    /// # Safety
    /// The batch's chain is valid.
    unsafe fn plain(&self) -> bool;

    /// The batch with its command buffers replaced by the `n` entries at `p`.
    fn with_entries(&self, p: *const Self::Entry, n: u32) -> Self;

    /// The batch as the trace records it (command buffers, waits and signals with their
    /// timeline values).
    ///
    /// # Safety
    /// The batch is valid.
    unsafe fn trace(&self) -> SubmitBatch;
}

/// The command buffers of `batches`, in order, without allocating.
///
/// # Safety
/// Every batch is valid.
pub unsafe fn command_buffers<B: Batch>(batches: &[B]) -> impl Iterator<Item = u64> + '_ {
    batches.iter().flat_map(|b| {
        // SAFETY: the caller's batches are valid.
        unsafe { b.entries() }.iter().map(B::handle)
    })
}

/// `batches` as the trace records them.
///
/// # Safety
/// Every batch is valid.
pub unsafe fn trace<B: Batch>(batches: &[B]) -> Vec<SubmitBatch> {
    batches.iter().map(|b| b.trace()).collect()
}

impl<'a> Batch for vk::SubmitInfo<'a> {
    type Entry = vk::CommandBuffer;

    unsafe fn entries(&self) -> &[vk::CommandBuffer] {
        slice(self.p_command_buffers, self.command_buffer_count)
    }

    fn handle(e: &vk::CommandBuffer) -> u64 {
        raw(*e)
    }

    fn entry_plain(_: &vk::CommandBuffer) -> bool {
        true
    }

    unsafe fn plain(&self) -> bool {
        let mut p = self.p_next as *const vk::BaseInStructure<'_>;
        while !p.is_null() {
            if (*p).s_type != vk::StructureType::TIMELINE_SEMAPHORE_SUBMIT_INFO {
                return false;
            }
            p = (*p).p_next;
        }
        true
    }

    fn with_entries(&self, p: *const vk::CommandBuffer, n: u32) -> Self {
        let mut b = *self;
        b.command_buffer_count = n;
        b.p_command_buffers = p;
        b
    }

    unsafe fn trace(&self) -> SubmitBatch {
        // Timeline values from `VkTimelineSemaphoreSubmitInfo`.
        let mut tl: Option<&vk::TimelineSemaphoreSubmitInfo<'_>> = None;
        let mut p = self.p_next as *const vk::BaseInStructure<'_>;
        while !p.is_null() {
            if (*p).s_type == vk::StructureType::TIMELINE_SEMAPHORE_SUBMIT_INFO {
                tl = Some(&*(p as *const vk::TimelineSemaphoreSubmitInfo<'_>));
            }
            p = (*p).p_next;
        }
        let value = |vals: *const u64, n: u32, i: usize| -> u64 {
            if vals.is_null() || i >= n as usize {
                0
            } else {
                *vals.add(i)
            }
        };
        let waits = slice(self.p_wait_semaphores, self.wait_semaphore_count)
            .iter()
            .enumerate()
            .map(|(i, h)| {
                (
                    raw(*h),
                    tl.map_or(0, |t| {
                        value(t.p_wait_semaphore_values, t.wait_semaphore_value_count, i)
                    }),
                )
            })
            .collect();
        let signals = slice(self.p_signal_semaphores, self.signal_semaphore_count)
            .iter()
            .enumerate()
            .map(|(i, h)| {
                (
                    raw(*h),
                    tl.map_or(0, |t| {
                        value(
                            t.p_signal_semaphore_values,
                            t.signal_semaphore_value_count,
                            i,
                        )
                    }),
                )
            })
            .collect();
        SubmitBatch {
            command_buffers: self.entries().iter().map(Self::handle).collect(),
            waits,
            signals,
        }
    }
}

impl<'a> Batch for vk::SubmitInfo2<'a> {
    type Entry = vk::CommandBufferSubmitInfo<'a>;

    unsafe fn entries(&self) -> &[vk::CommandBufferSubmitInfo<'a>] {
        slice(self.p_command_buffer_infos, self.command_buffer_info_count)
    }

    fn handle(e: &vk::CommandBufferSubmitInfo<'a>) -> u64 {
        raw(e.command_buffer)
    }

    fn entry_plain(e: &vk::CommandBufferSubmitInfo<'a>) -> bool {
        e.p_next.is_null()
    }

    unsafe fn plain(&self) -> bool {
        self.p_next.is_null()
    }

    fn with_entries(&self, p: *const vk::CommandBufferSubmitInfo<'a>, n: u32) -> Self {
        let mut b = *self;
        b.command_buffer_info_count = n;
        b.p_command_buffer_infos = p;
        b
    }

    unsafe fn trace(&self) -> SubmitBatch {
        let sems = |p: *const vk::SemaphoreSubmitInfo<'_>, n: u32| -> Vec<(u64, u64)> {
            // SAFETY: a valid batch's arrays hold their counts.
            unsafe { slice(p, n) }
                .iter()
                .map(|s| (raw(s.semaphore), s.value))
                .collect()
        };
        SubmitBatch {
            command_buffers: self.entries().iter().map(Self::handle).collect(),
            waits: sems(self.p_wait_semaphore_infos, self.wait_semaphore_info_count),
            signals: sems(
                self.p_signal_semaphore_infos,
                self.signal_semaphore_info_count,
            ),
        }
    }
}
