//! Queues, queue submission and idle waits (chapter "Command Buffers: Submission"). Profile mode
//! records submissions (each one also a host-access window boundary) and host completion
//! observations here, and puts its GPU timestamps around submissions (`profile/gputime.rs`).

use super::calls_gen;
use crate::dispatch::{raw, slice};
use crate::ffi_guard::Call;
use crate::submit::{command_buffers, trace, Batch};
use ash::vk;
use echo_analyzer::trace::Event;

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
/// [`Batch`]), in this order: profile resolves the late descriptor uses of the submitted command
/// buffers and closes the host-access window; guarded enforce merges the views the submission's
/// elided copies use and protects; enforce leaves out command buffers that held only dropped
/// copies (issue 35, `enforce/empty.rs`); profile's GPU timing puts echo's timestamp command
/// buffers around the application's (issue 47, `profile/gputime`); the call goes down; then the
/// GPU timing, the guard, enforce's tally and profile's `queue_submit` record learn how it
/// went. `next` calls the next layer with `n`
/// batches at `p`.
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
    let batches: &[B] = slice(submits, count);
    let seq = cx
        .dev
        .profile()
        .map(|p| p.before_submit(cx.dev, command_buffers(batches)));
    let guard = cx
        .dev
        .enforce()
        .and_then(|e| e.guard())
        .filter(|g| g.active());
    let mut used = Vec::new();
    if let Some(g) = guard {
        let cbs: Vec<u64> = command_buffers(batches).collect();
        used = g.before_submit(cx.dev, raw(queue), &cbs);
    }
    let stripped = cx.dev.enforce().and_then(|e| e.strip(batches));
    let timed = match (cx.dev.profile().and_then(|p| p.gpu()), seq) {
        (Some(g), Some(s)) => Some(g.wrap(cx.dev, raw(queue), s.seq, batches)),
        _ => None,
    };
    let r = match (
        &stripped,
        timed.as_ref().and_then(|(_, sent)| sent.as_ref()),
    ) {
        (Some(s), _) => cx.down(next(s.count(), s.as_ptr())),
        (None, Some(sent)) => {
            let (n, p) = sent.batches();
            cx.down(next(n, p))
        }
        (None, None) => cx.down(next(count, submits)),
    };
    if let (Some((w, _)), Some(g)) = (timed, cx.dev.profile().and_then(|p| p.gpu())) {
        g.submitted(w, raw(fence), r == vk::Result::SUCCESS);
    }
    if let Some(g) = guard {
        g.after_submit(raw(queue), raw(fence), r == vk::Result::SUCCESS, used);
    }
    if let (vk::Result::SUCCESS, Some(e)) = (r, cx.dev.enforce().filter(|e| e.elides())) {
        e.on_submit(command_buffers(batches));
        if let Some(s) = &stripped {
            e.count_stripped(s);
        }
    }
    if let (vk::Result::SUCCESS, Some(p), Some(seq)) = (r, cx.dev.profile(), seq) {
        p.on_submit(seq, raw(queue), trace(batches), raw(fence));
    }
    r
}

pub unsafe fn vkQueueWaitIdle(cx: &calls_gen::vkQueueWaitIdle<'_>, queue: vk::Queue) -> vk::Result {
    let t0 = cx
        .dev
        .profile()
        .map(|_| crate::profile::sink::monotonic_ns());
    let r = cx.down((cx.next)(queue));
    if let (vk::Result::SUCCESS, Some(g)) = (r, cx.dev.enforce().and_then(|e| e.guard())) {
        g.queue_idle(raw(queue));
    }
    if let (vk::Result::SUCCESS, Some(p)) = (r, cx.dev.profile()) {
        let waited = crate::profile::sink::monotonic_ns().saturating_sub(t0.unwrap_or(0));
        p.observed_after(
            cx.dev,
            Event::QueueWaitIdle { queue: raw(queue) },
            Some(waited),
        );
    }
    r
}

pub unsafe fn vkDeviceWaitIdle(
    cx: &calls_gen::vkDeviceWaitIdle<'_>,
    device: vk::Device,
) -> vk::Result {
    let t0 = cx
        .dev
        .profile()
        .map(|_| crate::profile::sink::monotonic_ns());
    let r = cx.down((cx.next)(device));
    if let (vk::Result::SUCCESS, Some(g)) = (r, cx.dev.enforce().and_then(|e| e.guard())) {
        g.device_idle();
    }
    if let (vk::Result::SUCCESS, Some(p)) = (r, cx.dev.profile()) {
        let waited = crate::profile::sink::monotonic_ns().saturating_sub(t0.unwrap_or(0));
        p.observed_after(cx.dev, Event::DeviceWaitIdle, Some(waited));
    }
    r
}
