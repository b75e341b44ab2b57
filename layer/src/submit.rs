//! A queue submission's batches behind one type: `VkSubmitInfo` (`vkQueueSubmit`) and
//! `VkSubmitInfo2` (`vkQueueSubmit2`, `vkQueueSubmit2KHR`) are both a [`Batch`], so the
//! submission hook (`hooks/queue.rs`), profile's trace of it and enforce's leaving out of empty
//! command buffers (`enforce/enforcer/empty.rs`) each have one path for both commands. Below
//! both modes: it names nothing of the layer but the raw-array helpers.

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

    /// Whether the batch is a protected submission (command buffers echo adds could not run
    /// in it).
    fn protected(&self) -> bool;

    /// The batch with its command buffers replaced by the `n` entries at `p`.
    fn with_entries(&self, p: *const Self::Entry, n: u32) -> Self;

    /// The entry that names one of echo's own command buffers.
    fn entry_of(cb: vk::CommandBuffer) -> Self::Entry;

    /// The semaphores the batch signals, with their timeline values (0 for a binary one).
    ///
    /// # Safety
    /// The batch is valid.
    unsafe fn signals(&self) -> Vec<(u64, u64)>;

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

    fn protected(&self) -> bool {
        false // `VkProtectedSubmitInfo` is chained: not `plain`
    }

    fn with_entries(&self, p: *const vk::CommandBuffer, n: u32) -> Self {
        let mut b = *self;
        b.command_buffer_count = n;
        b.p_command_buffers = p;
        b
    }

    fn entry_of(cb: vk::CommandBuffer) -> vk::CommandBuffer {
        cb
    }

    unsafe fn signals(&self) -> Vec<(u64, u64)> {
        let tl = timeline(self);
        with_values(
            slice(self.p_signal_semaphores, self.signal_semaphore_count),
            tl.map(|t| (t.p_signal_semaphore_values, t.signal_semaphore_value_count)),
        )
    }

    unsafe fn trace(&self) -> SubmitBatch {
        let tl = timeline(self);
        SubmitBatch {
            command_buffers: self.entries().iter().map(Self::handle).collect(),
            waits: with_values(
                slice(self.p_wait_semaphores, self.wait_semaphore_count),
                tl.map(|t| (t.p_wait_semaphore_values, t.wait_semaphore_value_count)),
            ),
            signals: self.signals(),
        }
    }
}

/// The `VkTimelineSemaphoreSubmitInfo` chained to a `VkSubmitInfo`, if any.
///
/// # Safety
/// The batch's chain is valid.
unsafe fn timeline<'a>(
    s: &'a vk::SubmitInfo<'_>,
) -> Option<&'a vk::TimelineSemaphoreSubmitInfo<'a>> {
    let mut tl = None;
    let mut p = s.p_next as *const vk::BaseInStructure<'_>;
    while !p.is_null() {
        if (*p).s_type == vk::StructureType::TIMELINE_SEMAPHORE_SUBMIT_INFO {
            tl = Some(&*(p as *const vk::TimelineSemaphoreSubmitInfo<'_>));
        }
        p = (*p).p_next;
    }
    tl
}

/// Semaphores with the timeline values at `values` (`(pointer, count)`; a semaphore past them,
/// or with none: 0).
///
/// # Safety
/// `values` holds its count of values.
unsafe fn with_values(
    sems: &[vk::Semaphore],
    values: Option<(*const u64, u32)>,
) -> Vec<(u64, u64)> {
    let values = values.map_or(&[][..], |(p, n)| slice(p, n));
    sems.iter()
        .enumerate()
        .map(|(i, h)| (raw(*h), values.get(i).copied().unwrap_or(0)))
        .collect()
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

    fn protected(&self) -> bool {
        !self.flags.is_empty()
    }

    fn with_entries(&self, p: *const vk::CommandBufferSubmitInfo<'a>, n: u32) -> Self {
        let mut b = *self;
        b.command_buffer_info_count = n;
        b.p_command_buffer_infos = p;
        b
    }

    fn entry_of(cb: vk::CommandBuffer) -> vk::CommandBufferSubmitInfo<'a> {
        vk::CommandBufferSubmitInfo::default()
            .command_buffer(cb)
            .device_mask(0)
    }

    unsafe fn signals(&self) -> Vec<(u64, u64)> {
        semaphore_infos(
            self.p_signal_semaphore_infos,
            self.signal_semaphore_info_count,
        )
    }

    unsafe fn trace(&self) -> SubmitBatch {
        SubmitBatch {
            command_buffers: self.entries().iter().map(Self::handle).collect(),
            waits: semaphore_infos(self.p_wait_semaphore_infos, self.wait_semaphore_info_count),
            signals: self.signals(),
        }
    }
}

/// `VkSemaphoreSubmitInfo`s as (semaphore, value).
///
/// # Safety
/// `p` holds `n` infos (or is null).
unsafe fn semaphore_infos(p: *const vk::SemaphoreSubmitInfo<'_>, n: u32) -> Vec<(u64, u64)> {
    slice(p, n)
        .iter()
        .map(|s| (raw(s.semaphore), s.value))
        .collect()
}
