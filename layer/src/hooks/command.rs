//! Command buffers (chapter "Command Buffers"): allocation, pools, begin, end, reset, free, and
//! secondaries executed from a primary. Profile learns what a recording holds from its start
//! (`on_begin`) to its end; enforce forgets a reset command buffer's dropped copies and marks.

use super::calls_gen;
use crate::chassis;
use crate::dispatch::raw;
use crate::events::Cmd;
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
        chassis::before(cx.dev, &Cmd::FreeCommandBuffers(cbs));
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
    chassis::call(cx.dev, &Cmd::DestroyPool(&cbs), || {
        cx.down((cx.next)(device, pool, alloc))
    })
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
        chassis::after(cx.dev, &Cmd::ResetPool(&cbs));
    }
    r
}

pub unsafe fn vkBeginCommandBuffer(
    cx: &calls_gen::vkBeginCommandBuffer<'_>,
    cb: vk::CommandBuffer,
    info: *const vk::CommandBufferBeginInfo<'_>,
) -> vk::Result {
    let cmd = Cmd::Begin {
        cb: raw(cb),
        flags: (*info).flags,
    };
    chassis::call(cx.dev, &cmd, || {
        let r = cx.down((cx.next)(cb, info));
        if r == vk::Result::SUCCESS {
            if let Some(mut s) = cx.dev.state.command_buffers.get_mut(&raw(cb)) {
                s.recording = Recording::Recording;
                s.one_time_submit = (*info)
                    .flags
                    .contains(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
            }
        }
        r
    })
}

pub unsafe fn vkEndCommandBuffer(
    cx: &calls_gen::vkEndCommandBuffer<'_>,
    cb: vk::CommandBuffer,
) -> vk::Result {
    chassis::call(cx.dev, &Cmd::End(raw(cb)), || {
        let r = cx.down((cx.next)(cb));
        if r == vk::Result::SUCCESS {
            if let Some(mut s) = cx.dev.state.command_buffers.get_mut(&raw(cb)) {
                s.recording = Recording::Executable;
            }
        }
        r
    })
}

pub unsafe fn vkResetCommandBuffer(
    cx: &calls_gen::vkResetCommandBuffer<'_>,
    cb: vk::CommandBuffer,
    flags: vk::CommandBufferResetFlags,
) -> vk::Result {
    chassis::call(cx.dev, &Cmd::Reset(raw(cb)), || {
        let r = cx.down((cx.next)(cb, flags));
        if r == vk::Result::SUCCESS {
            if let Some(mut s) = cx.dev.state.command_buffers.get_mut(&raw(cb)) {
                s.recording = Recording::Initial;
            }
        }
        r
    })
}

pub unsafe fn vkCmdExecuteCommands(
    cx: &calls_gen::vkCmdExecuteCommands<'_>,
    cb: vk::CommandBuffer,
    count: u32,
    secondaries: *const vk::CommandBuffer,
) {
    let cmd = Cmd::Execute {
        cb: raw(cb),
        secondaries: (!secondaries.is_null())
            .then(|| std::slice::from_raw_parts(secondaries, count as usize)),
    };
    chassis::call(cx.dev, &cmd, || cx.down((cx.next)(cb, count, secondaries)))
}
