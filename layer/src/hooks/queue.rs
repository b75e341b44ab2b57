//! Queue submission and idle waits (chapter "Command Buffers: Submission"). Passthrough for
//! now; profile mode records submissions and host completion observations here.

use super::hook;
use ash::vk;

hook! {
    fn vkQueueSubmit(cx, queue: vk::Queue, count: u32, submits: *const vk::SubmitInfo<'_>, fence: vk::Fence) -> vk::Result {
        cx.down((cx.next)(queue, count, submits, fence))
    }

    fn vkQueueSubmit2 | vkQueueSubmit2KHR(
        cx,
        queue: vk::Queue,
        count: u32,
        submits: *const vk::SubmitInfo2<'_>,
        fence: vk::Fence,
    ) -> vk::Result {
        cx.down((cx.next)(queue, count, submits, fence))
    }

    fn vkQueueWaitIdle(cx, queue: vk::Queue) -> vk::Result {
        cx.down((cx.next)(queue))
    }

    fn vkDeviceWaitIdle(cx, device: vk::Device) -> vk::Result {
        cx.down((cx.next)(device))
    }
}
