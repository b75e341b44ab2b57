//! Host-side synchronization: fences and timeline semaphores (chapter "Synchronization").
//! Profile mode records host completion observations here (each one a host-access window
//! boundary).

use super::hook;
use crate::dispatch::raw;
use ash::vk;
use echo_analyzer::trace::Event;

hook! {
    fn vkWaitForFences(
        cx,
        device: vk::Device,
        count: u32,
        fences: *const vk::Fence,
        wait_all: vk::Bool32,
        timeout: u64,
    ) -> vk::Result {
        let t0 = cx.dev.profile().map(|_| crate::profile::sink::monotonic_ns());
        let r = cx.down((cx.next)(device, count, fences, wait_all, timeout));
        if let (vk::Result::SUCCESS, Some(g), false) = (r, cx.dev.enforce().and_then(|e| e.guard()).filter(|g| g.active()), fences.is_null()) {
            let f = std::slice::from_raw_parts(fences, count as usize);
            g.fences_done(&crate::enforce::guard::signalled(cx.dev, f, wait_all != 0));
        }
        if let (vk::Result::SUCCESS, Some(p)) = (r, cx.dev.profile()) {
            let waited = crate::profile::sink::monotonic_ns().saturating_sub(t0.unwrap_or(0));
            p.on_fences_waited(cx.dev, count, fences, wait_all != 0, waited);
        }
        r
    }

    fn vkGetFenceStatus(cx, device: vk::Device, fence: vk::Fence) -> vk::Result {
        let r = cx.down((cx.next)(device, fence));
        if let (vk::Result::SUCCESS, Some(g)) = (r, cx.dev.enforce().and_then(|e| e.guard())) {
            g.fences_done(&[raw(fence)]);
        }
        if let (vk::Result::SUCCESS, Some(p)) = (r, cx.dev.profile()) {
            p.observed(cx.dev, Event::FenceSignaled { fences: vec![raw(fence)] });
        }
        r
    }

    fn vkResetFences(cx, device: vk::Device, count: u32, fences: *const vk::Fence) -> vk::Result {
        let r = cx.down((cx.next)(device, count, fences));
        // A fence may be reset only once its submission completed (VUID-vkResetFences-pFences-01123).
        if let (vk::Result::SUCCESS, Some(g), false) = (r, cx.dev.enforce().and_then(|e| e.guard()), fences.is_null()) {
            let f: Vec<u64> = std::slice::from_raw_parts(fences, count as usize).iter().map(|x| raw(*x)).collect();
            g.fences_done(&f);
        }
        if let (vk::Result::SUCCESS, Some(p), false) = (r, cx.dev.profile(), fences.is_null()) {
            let f = std::slice::from_raw_parts(fences, count as usize).iter().map(|x| raw(*x)).collect();
            p.observed_no_window(Event::FenceReset { fences: f });
        }
        r
    }

    fn vkWaitSemaphores | vkWaitSemaphoresKHR(
        cx,
        device: vk::Device,
        info: *const vk::SemaphoreWaitInfo<'_>,
        timeout: u64,
    ) -> vk::Result {
        let t0 = cx.dev.profile().map(|_| crate::profile::sink::monotonic_ns());
        let r = cx.down((cx.next)(device, info, timeout));
        if let (vk::Result::SUCCESS, Some(p)) = (r, cx.dev.profile()) {
            let waited = crate::profile::sink::monotonic_ns().saturating_sub(t0.unwrap_or(0));
            p.on_semaphores_waited(cx.dev, &*info, waited);
        }
        r
    }

    fn vkGetSemaphoreCounterValue | vkGetSemaphoreCounterValueKHR(
        cx,
        device: vk::Device,
        semaphore: vk::Semaphore,
        value: *mut u64,
    ) -> vk::Result {
        let r = cx.down((cx.next)(device, semaphore, value));
        if let (vk::Result::SUCCESS, Some(p), false) = (r, cx.dev.profile(), value.is_null()) {
            p.observed(cx.dev, Event::SemaphoreReached { semaphores: vec![(raw(semaphore), *value)] });
        }
        r
    }

    fn vkSignalSemaphore | vkSignalSemaphoreKHR(cx, device: vk::Device, info: *const vk::SemaphoreSignalInfo<'_>) -> vk::Result {
        let r = cx.down((cx.next)(device, info));
        if let (vk::Result::SUCCESS, Some(p)) = (r, cx.dev.profile()) {
            p.on_host_signal(raw((*info).semaphore), (*info).value);
        }
        r
    }
}
