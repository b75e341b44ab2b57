//! Synchronization (chapter "Synchronization and Cache Control"): fences and timeline
//! semaphores on the host — profile records host completion observations here (each one a
//! host-access window boundary) — and the barriers and events recorded into command buffers
//! (the buffers they name must have memory bound: enforce binds any it held back).

use super::calls_gen;
use crate::chassis;
use crate::dispatch::{raw, slice};
use crate::events::{Barriers, Cmd, Wait};
use ash::vk;

pub unsafe fn vkWaitForFences(
    cx: &calls_gen::vkWaitForFences<'_>,
    device: vk::Device,
    count: u32,
    fences: *const vk::Fence,
    wait_all: vk::Bool32,
    timeout: u64,
) -> vk::Result {
    let what = Wait::Fences {
        count,
        fences,
        all: wait_all != 0,
    };
    chassis::wait(cx.dev, what, || {
        cx.down((cx.next)(device, count, fences, wait_all, timeout))
    })
}

pub unsafe fn vkGetFenceStatus(
    cx: &calls_gen::vkGetFenceStatus<'_>,
    device: vk::Device,
    fence: vk::Fence,
) -> vk::Result {
    chassis::call(cx.dev, &Cmd::FenceStatus(raw(fence)), || {
        cx.down((cx.next)(device, fence))
    })
}

pub unsafe fn vkResetFences(
    cx: &calls_gen::vkResetFences<'_>,
    device: vk::Device,
    count: u32,
    fences: *const vk::Fence,
) -> vk::Result {
    // A fence may be reset only once its submission completed (VUID-vkResetFences-pFences-01123).
    let f = (!fences.is_null()).then(|| std::slice::from_raw_parts(fences, count as usize));
    chassis::call(cx.dev, &Cmd::ResetFences(f), || {
        cx.down((cx.next)(device, count, fences))
    })
}

pub unsafe fn vkWaitSemaphores(
    cx: &calls_gen::vkWaitSemaphores<'_>,
    device: vk::Device,
    info: *const vk::SemaphoreWaitInfo<'_>,
    timeout: u64,
) -> vk::Result {
    chassis::wait(cx.dev, Wait::Semaphores(info), || {
        cx.down((cx.next)(device, info, timeout))
    })
}

pub unsafe fn vkGetSemaphoreCounterValue(
    cx: &calls_gen::vkGetSemaphoreCounterValue<'_>,
    device: vk::Device,
    semaphore: vk::Semaphore,
    value: *mut u64,
) -> vk::Result {
    let cmd = Cmd::SemaphoreValue {
        semaphore: raw(semaphore),
        value,
    };
    chassis::call(cx.dev, &cmd, || {
        cx.down((cx.next)(device, semaphore, value))
    })
}

pub unsafe fn vkSignalSemaphore(
    cx: &calls_gen::vkSignalSemaphore<'_>,
    device: vk::Device,
    info: *const vk::SemaphoreSignalInfo<'_>,
) -> vk::Result {
    chassis::call(cx.dev, &Cmd::SignalSemaphore(&*info), || {
        cx.down((cx.next)(device, info))
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
    let cmd = Cmd::Barrier {
        cb: raw(cb),
        ordering: true,
        buffers: Barriers::V1(slice(buffer, buffer_count)),
    };
    chassis::call(cx.dev, &cmd, || {
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
    })
}

pub unsafe fn vkCmdPipelineBarrier2(
    cx: &calls_gen::vkCmdPipelineBarrier2<'_>,
    cb: vk::CommandBuffer,
    info: *const vk::DependencyInfo<'_>,
) {
    let cmd = Cmd::Barrier {
        cb: raw(cb),
        ordering: true,
        buffers: Barriers::V2(slice(info, 1)),
    };
    chassis::call(cx.dev, &cmd, || cx.down((cx.next)(cb, info)))
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
    let cmd = Cmd::Barrier {
        cb: raw(cb),
        ordering: true,
        buffers: Barriers::V1(slice(buffer, buffer_count)),
    };
    chassis::call(cx.dev, &cmd, || {
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
    })
}

pub unsafe fn vkCmdWaitEvents2(
    cx: &calls_gen::vkCmdWaitEvents2<'_>,
    cb: vk::CommandBuffer,
    count: u32,
    events: *const vk::Event,
    infos: *const vk::DependencyInfo<'_>,
) {
    let n = if events.is_null() { 0 } else { count };
    let cmd = Cmd::Barrier {
        cb: raw(cb),
        ordering: true,
        buffers: Barriers::V2(slice(infos, n)),
    };
    chassis::call(cx.dev, &cmd, || {
        cx.down((cx.next)(cb, count, events, infos))
    })
}

// Its dependency info only defines what a later wait orders; the buffers it names must
// have memory bound all the same.
pub unsafe fn vkCmdSetEvent2(
    cx: &calls_gen::vkCmdSetEvent2<'_>,
    cb: vk::CommandBuffer,
    event: vk::Event,
    info: *const vk::DependencyInfo<'_>,
) {
    let cmd = Cmd::Barrier {
        cb: raw(cb),
        ordering: false,
        buffers: Barriers::V2(slice(info, 1)),
    };
    chassis::call(cx.dev, &cmd, || cx.down((cx.next)(cb, event, info)))
}
