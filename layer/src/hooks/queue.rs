//! Queues, queue submission and idle waits (chapter "Command Buffers: Submission"). Profile mode
//! records submissions (each one also a host-access window boundary) and host completion
//! observations here, and puts its GPU timestamps around submissions (`profile/gputime.rs`).

use super::hook;
use crate::dispatch::{raw, slice};
use crate::profile::recorder::{batches_v1, batches_v2};
use ash::vk;
use echo_analyzer::trace::Event;

/// The command buffers of `count` `VkSubmitInfo`s, in order, without allocating (the enforce
/// tally on every submission; `batches_v1` builds the whole trace batch, semaphores included).
///
/// # Safety
/// `submits` must hold `count` valid submit infos.
unsafe fn command_buffers_v1<'a>(
    count: u32,
    submits: *const vk::SubmitInfo<'a>,
) -> impl Iterator<Item = u64> + 'a {
    slice(submits, count).iter().flat_map(|s| {
        // SAFETY: a valid submit info holds command_buffer_count command buffers.
        unsafe { slice(s.p_command_buffers, s.command_buffer_count) }
            .iter()
            .map(|c| raw(*c))
    })
}

/// As [`command_buffers_v1`], for `VkSubmitInfo2`.
///
/// # Safety
/// `submits` must hold `count` valid submit infos.
unsafe fn command_buffers_v2<'a>(
    count: u32,
    submits: *const vk::SubmitInfo2<'a>,
) -> impl Iterator<Item = u64> + 'a {
    slice(submits, count).iter().flat_map(|s| {
        // SAFETY: a valid submit info holds command_buffer_info_count infos.
        unsafe { slice(s.p_command_buffer_infos, s.command_buffer_info_count) }
            .iter()
            .map(|c| raw(c.command_buffer))
    })
}

hook! {
    fn vkGetDeviceQueue(cx, device: vk::Device, family: u32, index: u32, out: *mut vk::Queue) {
        cx.down((cx.next)(device, family, index, out));
        if !out.is_null() && *out != vk::Queue::null() {
            cx.dev.state.queue_family.insert(raw(*out), family);
        }
    }

    fn vkGetDeviceQueue2(cx, device: vk::Device, info: *const vk::DeviceQueueInfo2<'_>, out: *mut vk::Queue) {
        cx.down((cx.next)(device, info, out));
        if !out.is_null() && !info.is_null() && *out != vk::Queue::null() {
            cx.dev.state.queue_family.insert(raw(*out), (*info).queue_family_index);
        }
    }

    fn vkQueueSubmit(cx, queue: vk::Queue, count: u32, submits: *const vk::SubmitInfo<'_>, fence: vk::Fence) -> vk::Result {
        let seq = cx.dev.profile().map(|p| p.before_submit(cx.dev, command_buffers_v1(count, submits)));
        // Guarded enforce: merge split views this submission's elided copies use, protect.
        let guard = cx.dev.enforce().and_then(|e| e.guard()).filter(|g| g.active());
        let mut used = Vec::new();
        if let Some(g) = guard {
            let cbs: Vec<u64> = batches_v1(count, submits).into_iter().flat_map(|b| b.command_buffers).collect();
            used = g.before_submit(cx.dev, raw(queue), &cbs);
        }
        // Issue 35: command buffers that held only dropped copies stay out (`enforce/empty.rs`).
        let stripped = cx.dev.enforce().and_then(|e| e.strip_v1(count, submits));
        // Issue 47: echo's timestamp command buffers around the application's (profile mode).
        let timed = match (cx.dev.profile().and_then(|p| p.gpu()), seq) {
            (Some(g), Some(s)) => Some(g.wrap_v1(cx.dev, raw(queue), s.seq, count, submits)),
            _ => None,
        };
        let r = match (&stripped, timed.as_ref().and_then(|w| w.v1())) {
            (Some(s), _) => cx.down((cx.next)(queue, s.count(), s.as_ptr(), fence)),
            (None, Some((n, p))) => cx.down((cx.next)(queue, n, p, fence)),
            (None, None) => cx.down((cx.next)(queue, count, submits, fence)),
        };
        if let (Some(w), Some(g)) = (timed, cx.dev.profile().and_then(|p| p.gpu())) {
            g.submitted(w, raw(fence), r == vk::Result::SUCCESS);
        }
        if let Some(g) = guard {
            g.after_submit(raw(queue), raw(fence), r == vk::Result::SUCCESS, used);
        }
        if let (vk::Result::SUCCESS, Some(e)) = (r, cx.dev.enforce().filter(|e| e.elides())) {
            e.on_submit(command_buffers_v1(count, submits));
            if let Some(s) = &stripped {
                e.count_stripped(s);
            }
        }
        if let (vk::Result::SUCCESS, Some(p), Some(seq)) = (r, cx.dev.profile(), seq) {
            p.on_submit(seq, raw(queue), batches_v1(count, submits), raw(fence));
        }
        r
    }

    fn vkQueueSubmit2 | vkQueueSubmit2KHR(
        cx,
        queue: vk::Queue,
        count: u32,
        submits: *const vk::SubmitInfo2<'_>,
        fence: vk::Fence,
    ) -> vk::Result {
        let seq = cx.dev.profile().map(|p| p.before_submit(cx.dev, command_buffers_v2(count, submits)));
        let guard = cx.dev.enforce().and_then(|e| e.guard()).filter(|g| g.active());
        let mut used = Vec::new();
        if let Some(g) = guard {
            let cbs: Vec<u64> = batches_v2(count, submits).into_iter().flat_map(|b| b.command_buffers).collect();
            used = g.before_submit(cx.dev, raw(queue), &cbs);
        }
        // Issue 35: command buffers that held only dropped copies stay out (`enforce/empty.rs`).
        let stripped = cx.dev.enforce().and_then(|e| e.strip_v2(count, submits));
        // Issue 47: echo's timestamp command buffers around the application's (profile mode).
        let timed = match (cx.dev.profile().and_then(|p| p.gpu()), seq) {
            (Some(g), Some(s)) => Some(g.wrap_v2(cx.dev, raw(queue), s.seq, count, submits)),
            _ => None,
        };
        let r = match (&stripped, timed.as_ref().and_then(|w| w.v2())) {
            (Some(s), _) => cx.down((cx.next)(queue, s.count(), s.as_ptr(), fence)),
            (None, Some((n, p))) => cx.down((cx.next)(queue, n, p, fence)),
            (None, None) => cx.down((cx.next)(queue, count, submits, fence)),
        };
        if let (Some(w), Some(g)) = (timed, cx.dev.profile().and_then(|p| p.gpu())) {
            g.submitted(w, raw(fence), r == vk::Result::SUCCESS);
        }
        if let Some(g) = guard {
            g.after_submit(raw(queue), raw(fence), r == vk::Result::SUCCESS, used);
        }
        if let (vk::Result::SUCCESS, Some(e)) = (r, cx.dev.enforce().filter(|e| e.elides())) {
            e.on_submit(command_buffers_v2(count, submits));
            if let Some(s) = &stripped {
                e.count_stripped(s);
            }
        }
        if let (vk::Result::SUCCESS, Some(p), Some(seq)) = (r, cx.dev.profile(), seq) {
            p.on_submit(seq, raw(queue), batches_v2(count, submits), raw(fence));
        }
        r
    }

    fn vkQueueWaitIdle(cx, queue: vk::Queue) -> vk::Result {
        let t0 = cx.dev.profile().map(|_| crate::profile::sink::monotonic_ns());
        let r = cx.down((cx.next)(queue));
        if let (vk::Result::SUCCESS, Some(g)) = (r, cx.dev.enforce().and_then(|e| e.guard())) {
            g.queue_idle(raw(queue));
        }
        if let (vk::Result::SUCCESS, Some(p)) = (r, cx.dev.profile()) {
            let waited = crate::profile::sink::monotonic_ns().saturating_sub(t0.unwrap_or(0));
            p.observed_after(cx.dev, Event::QueueWaitIdle { queue: raw(queue) }, Some(waited));
        }
        r
    }

    fn vkDeviceWaitIdle(cx, device: vk::Device) -> vk::Result {
        let t0 = cx.dev.profile().map(|_| crate::profile::sink::monotonic_ns());
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
}
