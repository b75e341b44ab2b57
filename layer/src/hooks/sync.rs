//! Host-side synchronization: fences and timeline semaphores (chapter "Synchronization").
//! Passthrough for now; profile mode records host completion observations here.

use super::hook;
use ash::vk;

hook! {
    fn vkWaitForFences(
        cx,
        device: vk::Device,
        count: u32,
        fences: *const vk::Fence,
        wait_all: vk::Bool32,
        timeout: u64,
    ) -> vk::Result {
        cx.down((cx.next)(device, count, fences, wait_all, timeout))
    }

    fn vkGetFenceStatus(cx, device: vk::Device, fence: vk::Fence) -> vk::Result {
        cx.down((cx.next)(device, fence))
    }

    fn vkResetFences(cx, device: vk::Device, count: u32, fences: *const vk::Fence) -> vk::Result {
        cx.down((cx.next)(device, count, fences))
    }

    fn vkWaitSemaphores | vkWaitSemaphoresKHR(
        cx,
        device: vk::Device,
        info: *const vk::SemaphoreWaitInfo<'_>,
        timeout: u64,
    ) -> vk::Result {
        cx.down((cx.next)(device, info, timeout))
    }

    fn vkGetSemaphoreCounterValue | vkGetSemaphoreCounterValueKHR(
        cx,
        device: vk::Device,
        semaphore: vk::Semaphore,
        value: *mut u64,
    ) -> vk::Result {
        cx.down((cx.next)(device, semaphore, value))
    }

    fn vkSignalSemaphore | vkSignalSemaphoreKHR(cx, device: vk::Device, info: *const vk::SemaphoreSignalInfo<'_>) -> vk::Result {
        cx.down((cx.next)(device, info))
    }
}
