//! Synchronization (chapter "Synchronization and Cache Control"): fences and timeline
//! semaphores on the host — profile records host completion observations here (each one a
//! host-access window boundary) — and the barriers and events recorded into command buffers
//! (the buffers they name must have memory bound: enforce binds any it held back).

use super::calls_gen;
use crate::dispatch::{raw, slice, DeviceData};
use ash::vk;
use echo_analyzer::trace::Event;

pub unsafe fn vkWaitForFences(
    cx: &calls_gen::vkWaitForFences<'_>,
    device: vk::Device,
    count: u32,
    fences: *const vk::Fence,
    wait_all: vk::Bool32,
    timeout: u64,
) -> vk::Result {
    let t0 = cx
        .dev
        .profile()
        .map(|_| crate::profile::sink::monotonic_ns());
    let r = cx.down((cx.next)(device, count, fences, wait_all, timeout));
    if let (vk::Result::SUCCESS, Some(g), false) = (
        r,
        cx.dev
            .enforce()
            .and_then(|e| e.guard())
            .filter(|g| g.active()),
        fences.is_null(),
    ) {
        let f = std::slice::from_raw_parts(fences, count as usize);
        g.fences_done(&crate::enforce::guard::signalled(cx.dev, f, wait_all != 0));
    }
    if let (vk::Result::SUCCESS, Some(p)) = (r, cx.dev.profile()) {
        let waited = crate::profile::sink::monotonic_ns().saturating_sub(t0.unwrap_or(0));
        p.on_fences_waited(cx.dev, count, fences, wait_all != 0, waited);
    }
    r
}

pub unsafe fn vkGetFenceStatus(
    cx: &calls_gen::vkGetFenceStatus<'_>,
    device: vk::Device,
    fence: vk::Fence,
) -> vk::Result {
    let r = cx.down((cx.next)(device, fence));
    if let (vk::Result::SUCCESS, Some(g)) = (r, cx.dev.enforce().and_then(|e| e.guard())) {
        g.fences_done(&[raw(fence)]);
    }
    if let (vk::Result::SUCCESS, Some(p)) = (r, cx.dev.profile()) {
        p.observed(
            cx.dev,
            Event::FenceSignaled {
                fences: vec![raw(fence)],
            },
        );
    }
    r
}

pub unsafe fn vkResetFences(
    cx: &calls_gen::vkResetFences<'_>,
    device: vk::Device,
    count: u32,
    fences: *const vk::Fence,
) -> vk::Result {
    let r = cx.down((cx.next)(device, count, fences));
    // A fence may be reset only once its submission completed (VUID-vkResetFences-pFences-01123).
    if let (vk::Result::SUCCESS, Some(g), false) = (
        r,
        cx.dev.enforce().and_then(|e| e.guard()),
        fences.is_null(),
    ) {
        let f: Vec<u64> = std::slice::from_raw_parts(fences, count as usize)
            .iter()
            .map(|x| raw(*x))
            .collect();
        g.fences_done(&f);
    }
    if let (vk::Result::SUCCESS, Some(p), false) = (r, cx.dev.profile(), fences.is_null()) {
        let f = std::slice::from_raw_parts(fences, count as usize)
            .iter()
            .map(|x| raw(*x))
            .collect();
        p.observed_no_window(Event::FenceReset { fences: f });
    }
    r
}

pub unsafe fn vkWaitSemaphores(
    cx: &calls_gen::vkWaitSemaphores<'_>,
    device: vk::Device,
    info: *const vk::SemaphoreWaitInfo<'_>,
    timeout: u64,
) -> vk::Result {
    let t0 = cx
        .dev
        .profile()
        .map(|_| crate::profile::sink::monotonic_ns());
    let r = cx.down((cx.next)(device, info, timeout));
    if let (vk::Result::SUCCESS, Some(p)) = (r, cx.dev.profile()) {
        let waited = crate::profile::sink::monotonic_ns().saturating_sub(t0.unwrap_or(0));
        p.on_semaphores_waited(cx.dev, &*info, waited);
    }
    r
}

pub unsafe fn vkGetSemaphoreCounterValue(
    cx: &calls_gen::vkGetSemaphoreCounterValue<'_>,
    device: vk::Device,
    semaphore: vk::Semaphore,
    value: *mut u64,
) -> vk::Result {
    let r = cx.down((cx.next)(device, semaphore, value));
    if let (vk::Result::SUCCESS, Some(p), false) = (r, cx.dev.profile(), value.is_null()) {
        p.observed(
            cx.dev,
            Event::SemaphoreReached {
                semaphores: vec![(raw(semaphore), *value)],
            },
        );
    }
    r
}

pub unsafe fn vkSignalSemaphore(
    cx: &calls_gen::vkSignalSemaphore<'_>,
    device: vk::Device,
    info: *const vk::SemaphoreSignalInfo<'_>,
) -> vk::Result {
    let r = cx.down((cx.next)(device, info));
    if let (vk::Result::SUCCESS, Some(p)) = (r, cx.dev.profile()) {
        p.on_host_signal(raw((*info).semaphore), (*info).value);
    }
    r
}

/// Buffers a barrier names must have memory bound (VUID-VkBufferMemoryBarrier-buffer-01931,
/// and its `2` twin): binds still held back happen now.
fn barrier_buffers(dev: &DeviceData, buffers: impl Iterator<Item = vk::Buffer>) {
    if let Some(e) = dev.enforce().filter(|e| e.has_pending()) {
        for b in buffers {
            e.touch(dev, raw(b));
        }
    }
}

/// The buffers of a `VkDependencyInfo`'s buffer barriers.
unsafe fn dependency_buffers<'a>(
    info: *const vk::DependencyInfo<'a>,
) -> impl Iterator<Item = vk::Buffer> + 'a {
    let i = if info.is_null() { None } else { Some(&*info) };
    i.into_iter().flat_map(|i| {
        slice(i.p_buffer_memory_barriers, i.buffer_memory_barrier_count)
            .iter()
            .map(|b| b.buffer)
    })
}

pub unsafe fn vkCmdPipelineBarrier(
    cx: &calls_gen::vkCmdPipelineBarrier<'_>,
    cb: vk::CommandBuffer,
    src_stage: vk::PipelineStageFlags,
    dst_stage: vk::PipelineStageFlags,
    dependency: vk::DependencyFlags,
    memory_count: u32,
    memory: *const vk::MemoryBarrier<'_>,
    buffer_count: u32,
    buffer: *const vk::BufferMemoryBarrier<'_>,
    image_count: u32,
    image: *const vk::ImageMemoryBarrier<'_>,
) {
    if let Some(p) = cx.dev.profile() {
        p.on_barrier(raw(cb));
    }
    barrier_buffers(cx.dev, slice(buffer, buffer_count).iter().map(|b| b.buffer));
    cx.down((cx.next)(
        cb,
        src_stage,
        dst_stage,
        dependency,
        memory_count,
        memory,
        buffer_count,
        buffer,
        image_count,
        image,
    ))
}

pub unsafe fn vkCmdPipelineBarrier2(
    cx: &calls_gen::vkCmdPipelineBarrier2<'_>,
    cb: vk::CommandBuffer,
    info: *const vk::DependencyInfo<'_>,
) {
    if let Some(p) = cx.dev.profile() {
        p.on_barrier(raw(cb));
    }
    barrier_buffers(cx.dev, dependency_buffers(info));
    cx.down((cx.next)(cb, info))
}

pub unsafe fn vkCmdWaitEvents(
    cx: &calls_gen::vkCmdWaitEvents<'_>,
    cb: vk::CommandBuffer,
    count: u32,
    events: *const vk::Event,
    src_stage: vk::PipelineStageFlags,
    dst_stage: vk::PipelineStageFlags,
    memory_count: u32,
    memory: *const vk::MemoryBarrier<'_>,
    buffer_count: u32,
    buffer: *const vk::BufferMemoryBarrier<'_>,
    image_count: u32,
    image: *const vk::ImageMemoryBarrier<'_>,
) {
    if let Some(p) = cx.dev.profile() {
        p.on_barrier(raw(cb));
    }
    barrier_buffers(cx.dev, slice(buffer, buffer_count).iter().map(|b| b.buffer));
    cx.down((cx.next)(
        cb,
        count,
        events,
        src_stage,
        dst_stage,
        memory_count,
        memory,
        buffer_count,
        buffer,
        image_count,
        image,
    ))
}

pub unsafe fn vkCmdWaitEvents2(
    cx: &calls_gen::vkCmdWaitEvents2<'_>,
    cb: vk::CommandBuffer,
    count: u32,
    events: *const vk::Event,
    infos: *const vk::DependencyInfo<'_>,
) {
    if let Some(p) = cx.dev.profile() {
        p.on_barrier(raw(cb));
    }
    let n = if events.is_null() { 0 } else { count };
    for k in 0..n as usize {
        barrier_buffers(cx.dev, dependency_buffers(infos.add(k)));
    }
    cx.down((cx.next)(cb, count, events, infos))
}

// Its dependency info only defines what a later wait orders; the buffers it names must
// have memory bound all the same.
pub unsafe fn vkCmdSetEvent2(
    cx: &calls_gen::vkCmdSetEvent2<'_>,
    cb: vk::CommandBuffer,
    event: vk::Event,
    info: *const vk::DependencyInfo<'_>,
) {
    barrier_buffers(cx.dev, dependency_buffers(info));
    cx.down((cx.next)(cb, event, info))
}
