//! Queues, queue submission and idle waits (chapter "Command Buffers: Submission"). Profile mode
//! records submissions (each one also a host-access window boundary) and host completion
//! observations here, and puts its GPU timestamps around submissions (`profile/gputime.rs`).

use super::calls_gen;
use crate::chassis;
use crate::dispatch::raw;
use crate::events::{Submission, Wait};
use crate::ffi_guard::Call;
use crate::submit::Batch;
use ash::vk;

pub unsafe fn vkGetDeviceQueue(
    cx: &calls_gen::vkGetDeviceQueue<'_>,
    device: vk::Device,
    family: u32,
    index: u32,
    out: *mut vk::Queue,
) {
    cx.down((cx.next)(device, family, index, out));
    if !out.is_null() && *out != vk::Queue::null() {
        cx.dev.state.queue_family.insert(raw(*out), family);
    }
}

pub unsafe fn vkGetDeviceQueue2(
    cx: &calls_gen::vkGetDeviceQueue2<'_>,
    device: vk::Device,
    info: *const vk::DeviceQueueInfo2<'_>,
    out: *mut vk::Queue,
) {
    cx.down((cx.next)(device, info, out));
    if !out.is_null() && !info.is_null() && *out != vk::Queue::null() {
        cx.dev
            .state
            .queue_family
            .insert(raw(*out), (*info).queue_family_index);
    }
}

pub unsafe fn vkQueueSubmit(
    cx: &calls_gen::vkQueueSubmit<'_>,
    queue: vk::Queue,
    count: u32,
    submits: *const vk::SubmitInfo<'_>,
    fence: vk::Fence,
) -> vk::Result {
    submit(cx, queue, count, submits, fence, |n, s| {
        (cx.next)(queue, n, s, fence)
    })
}

pub unsafe fn vkQueueSubmit2(
    cx: &calls_gen::vkQueueSubmit2<'_>,
    queue: vk::Queue,
    count: u32,
    submits: *const vk::SubmitInfo2<'_>,
    fence: vk::Fence,
) -> vk::Result {
    submit(cx, queue, count, submits, fence, |n, s| {
        (cx.next)(queue, n, s, fence)
    })
}

/// The one submission path of `vkQueueSubmit` and `vkQueueSubmit2` (their batches are both a
/// [`Batch`]): the submission as a value, through the chassis (profile resolves late descriptor
/// uses and closes the host-access window; GPU timing puts its timestamp command buffers
/// around; the guard protects what the elided copies used; enforce leaves out command buffers
/// that held only dropped copies; each learns how it went). `next` calls the next layer with
/// `n` batches at `p`.
///
/// # Safety
/// `submits` holds `count` valid batches (or is null with `count` 0).
#[inline(always)] // one instance per command, in its intercept: costs.rs counts a submission
unsafe fn submit<B: Batch, F: Copy>(
    cx: &Call<'_, F, vk::Result>,
    queue: vk::Queue,
    count: u32,
    submits: *const B,
    fence: vk::Fence,
    next: impl Fn(u32, *const B) -> vk::Result,
) -> vk::Result {
    let s = Submission {
        queue: raw(queue),
        fence: raw(fence),
        n: count,
        p: submits,
    };
    chassis::submit(cx.dev, s, |s| cx.down(next(s.n, s.p)))
}

pub unsafe fn vkQueueWaitIdle(cx: &calls_gen::vkQueueWaitIdle<'_>, queue: vk::Queue) -> vk::Result {
    chassis::wait(cx.dev, Wait::Queue(raw(queue)), || {
        cx.down((cx.next)(queue))
    })
}

pub unsafe fn vkDeviceWaitIdle(
    cx: &calls_gen::vkDeviceWaitIdle<'_>,
    device: vk::Device,
) -> vk::Result {
    chassis::wait(cx.dev, Wait::Device, || cx.down((cx.next)(device)))
}
