//! Command buffers (chapter "Command Buffers"): allocation, pools, begin, end, reset, free, and
//! secondaries executed from a primary. Profile learns what a recording holds from its start
//! (`on_begin`) to its end; enforce forgets a reset command buffer's dropped copies and marks.

use super::calls_gen;
use crate::dispatch::raw;
use crate::state::{CommandBufferState, Recording};
use ash::vk;

pub unsafe fn vkAllocateCommandBuffers(
    cx: &calls_gen::vkAllocateCommandBuffers<'_>,
    device: vk::Device,
    info: *const vk::CommandBufferAllocateInfo<'_>,
    out: *mut vk::CommandBuffer,
) -> vk::Result {
    let r = cx.down((cx.next)(device, info, out));
    if r == vk::Result::SUCCESS {
        let i = &*info;
        let pool = raw(i.command_pool);
        let cbs = std::slice::from_raw_parts(out, i.command_buffer_count as usize);
        let st = &cx.dev.state;
        for cb in cbs {
            st.command_buffers.insert(
                raw(*cb),
                CommandBufferState {
                    pool,
                    level: i.level,
                    recording: Recording::Initial,
                    one_time_submit: false,
                },
            );
        }
        st.pools
            .entry(pool)
            .or_default()
            .extend(cbs.iter().map(|c| raw(*c)));
    }
    r
}

pub unsafe fn vkFreeCommandBuffers(
    cx: &calls_gen::vkFreeCommandBuffers<'_>,
    device: vk::Device,
    pool: vk::CommandPool,
    count: u32,
    cbs: *const vk::CommandBuffer,
) {
    if count > 0 && !cbs.is_null() {
        let st = &cx.dev.state;
        let cbs = std::slice::from_raw_parts(cbs, count as usize);
        for cb in cbs {
            st.command_buffers.remove(&raw(*cb));
        }
        if let Some(p) = cx.dev.profile() {
            p.on_free(
                &cbs.iter()
                    .filter(|c| **c != vk::CommandBuffer::null())
                    .map(|c| raw(*c))
                    .collect::<Vec<_>>(),
            );
        }
        if let Some(e) = cx.dev.enforce() {
            e.on_reset(&cbs.iter().map(|c| raw(*c)).collect::<Vec<_>>());
        }
        if let Some(mut set) = st.pools.get_mut(&raw(pool)) {
            for cb in cbs {
                set.remove(&raw(*cb));
            }
        }
    }
    cx.down((cx.next)(device, pool, count, cbs))
}

pub unsafe fn vkDestroyCommandPool(
    cx: &calls_gen::vkDestroyCommandPool<'_>,
    device: vk::Device,
    pool: vk::CommandPool,
    alloc: *const vk::AllocationCallbacks<'_>,
) {
    let cbs = cx.dev.state.drop_pool(raw(pool));
    if let Some(p) = cx.dev.profile() {
        p.on_free(&cbs);
    }
    if let Some(e) = cx.dev.enforce() {
        e.on_reset(&cbs);
    }
    cx.down((cx.next)(device, pool, alloc))
}

pub unsafe fn vkResetCommandPool(
    cx: &calls_gen::vkResetCommandPool<'_>,
    device: vk::Device,
    pool: vk::CommandPool,
    flags: vk::CommandPoolResetFlags,
) -> vk::Result {
    let r = cx.down((cx.next)(device, pool, flags));
    if r == vk::Result::SUCCESS {
        cx.dev.state.reset_pool(raw(pool));
        let cbs: Vec<u64> = cx
            .dev
            .state
            .pools
            .get(&raw(pool))
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default();
        if let Some(p) = cx.dev.profile() {
            p.on_reset(&cbs);
        }
        if let Some(e) = cx.dev.enforce() {
            e.on_reset(&cbs);
        }
    }
    r
}

pub unsafe fn vkBeginCommandBuffer(
    cx: &calls_gen::vkBeginCommandBuffer<'_>,
    cb: vk::CommandBuffer,
    info: *const vk::CommandBufferBeginInfo<'_>,
) -> vk::Result {
    let r = cx.down((cx.next)(cb, info));
    if r == vk::Result::SUCCESS {
        if let Some(mut s) = cx.dev.state.command_buffers.get_mut(&raw(cb)) {
            s.recording = Recording::Recording;
            s.one_time_submit = (*info)
                .flags
                .contains(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
        }
        if let Some(p) = cx.dev.profile() {
            p.on_begin(
                raw(cb),
                (*info)
                    .flags
                    .contains(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
            );
            if let Some(g) = p.gpu() {
                g.on_begin(
                    raw(cb),
                    (*info)
                        .flags
                        .contains(vk::CommandBufferUsageFlags::SIMULTANEOUS_USE),
                );
            }
        }
        if let Some(e) = cx.dev.enforce() {
            e.on_reset(&[raw(cb)]);
        }
        if let Some(g) = cx.dev.enforce().and_then(|e| e.guard()) {
            g.begin(raw(cb));
        }
    }
    r
}

pub unsafe fn vkEndCommandBuffer(
    cx: &calls_gen::vkEndCommandBuffer<'_>,
    cb: vk::CommandBuffer,
) -> vk::Result {
    let r = cx.down((cx.next)(cb));
    if r == vk::Result::SUCCESS {
        if let Some(mut s) = cx.dev.state.command_buffers.get_mut(&raw(cb)) {
            s.recording = Recording::Executable;
        }
        if let Some(p) = cx.dev.profile() {
            p.on_end(raw(cb));
        }
    }
    r
}

pub unsafe fn vkResetCommandBuffer(
    cx: &calls_gen::vkResetCommandBuffer<'_>,
    cb: vk::CommandBuffer,
    flags: vk::CommandBufferResetFlags,
) -> vk::Result {
    let r = cx.down((cx.next)(cb, flags));
    if r == vk::Result::SUCCESS {
        if let Some(mut s) = cx.dev.state.command_buffers.get_mut(&raw(cb)) {
            s.recording = Recording::Initial;
        }
        if let Some(p) = cx.dev.profile() {
            p.on_reset(&[raw(cb)]);
        }
        if let Some(e) = cx.dev.enforce() {
            e.on_reset(&[raw(cb)]);
        }
    }
    r
}

pub unsafe fn vkCmdExecuteCommands(
    cx: &calls_gen::vkCmdExecuteCommands<'_>,
    cb: vk::CommandBuffer,
    count: u32,
    secondaries: *const vk::CommandBuffer,
) {
    if let (Some(p), false) = (cx.dev.profile(), secondaries.is_null()) {
        let s = std::slice::from_raw_parts(secondaries, count as usize)
            .iter()
            .map(|c| raw(*c))
            .collect();
        p.on_execute(raw(cb), s);
    }
    if let (Some(e), false) = (cx.dev.enforce(), secondaries.is_null()) {
        let s: Vec<u64> = std::slice::from_raw_parts(secondaries, count as usize)
            .iter()
            .map(|c| raw(*c))
            .collect();
        e.on_execute(raw(cb), &s);
        if let Some(g) = e.guard() {
            g.execute(raw(cb), &s);
        }
    }
    cx.down((cx.next)(cb, count, secondaries))
}
