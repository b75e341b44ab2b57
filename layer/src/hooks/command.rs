//! Command buffers and the recorded commands that touch buffers (chapters "Command Buffers",
//! "Copy Commands", "Dispatching Commands", "Drawing Commands", "Synchronization" barriers).
//! Recording hooks are on the hot path: no global lock, one map lookup at most.

use super::hook;
use crate::dispatch::{raw, slice, DeviceData};
use crate::state::{CommandBufferState, Recording};
use ash::vk;
use echo_analyzer::trace::{Access, BufferUse, CopyRegion, UseKind};
use std::ffi::c_void;

/// One buffer use for the trace.
fn buse(buffer: vk::Buffer, offset: u64, size: u64, access: Access, kind: UseKind) -> BufferUse {
    BufferUse {
        buffer: raw(buffer),
        offset,
        size,
        access,
        kind,
    }
}

/// `VkDrawIndirectCommand` and `VkDrawIndexedIndirectCommand` sizes.
const DRAW: u64 = 16;
const DRAW_INDEXED: u64 = 20;

/// Bytes `count` indirect draw records of `record` bytes, `stride` apart, occupy.
fn indirect_len(count: u32, stride: u32, record: u64) -> u64 {
    if count == 0 {
        0
    } else {
        (count as u64 - 1) * stride as u64 + record
    }
}

/// The buffer range a buffer↔image copy touches (lowest offset, whole rest: conservative).
unsafe fn image_copy_range(count: u32, regions: *const vk::BufferImageCopy) -> u64 {
    if count == 0 || regions.is_null() {
        return 0;
    }
    std::slice::from_raw_parts(regions, count as usize)
        .iter()
        .map(|r| r.buffer_offset)
        .min()
        .unwrap_or(0)
}

/// The bind points a `VkShaderStageFlags` of the `*2` binding commands (maintenance6) reaches:
/// compute, graphics, or both. Ray-tracing and other stages' bind points are not tracked; their
/// work is stepped aside from (`hooks/aside.rs`).
fn bind_points(stages: vk::ShaderStageFlags) -> impl Iterator<Item = vk::PipelineBindPoint> {
    let compute = stages.contains(vk::ShaderStageFlags::COMPUTE);
    let graphics = stages.intersects(
        vk::ShaderStageFlags::ALL_GRAPHICS
            | vk::ShaderStageFlags::TASK_EXT
            | vk::ShaderStageFlags::MESH_EXT,
    );
    [
        (compute, vk::PipelineBindPoint::COMPUTE),
        (graphics, vk::PipelineBindPoint::GRAPHICS),
    ]
    .into_iter()
    .filter(|x| x.0)
    .map(|x| x.1)
}

/// `vkCmdBindDescriptorSets` and `vkCmdBindDescriptorSets2`.
unsafe fn bind_sets(
    dev: &DeviceData,
    cb: u64,
    bp: vk::PipelineBindPoint,
    first: u32,
    sets: &[vk::DescriptorSet],
    dynamic: &[u32],
) {
    if sets.is_empty() {
        return;
    }
    let s: Vec<u64> = sets.iter().map(|x| raw(*x)).collect();
    if let Some(p) = dev.profile() {
        p.on_bind_sets(cb, bp, first, &s, dynamic);
    }
    if let Some(g) = dev.enforce().and_then(|e| e.guard()) {
        g.bind_sets(dev, cb, &s);
    }
}

/// `vkCmdPushDescriptorSet(KHR)` and `vkCmdPushDescriptorSet2`.
unsafe fn push_descriptors(
    dev: &DeviceData,
    cb: u64,
    bp: vk::PipelineBindPoint,
    set: u32,
    count: u32,
    writes: *const vk::WriteDescriptorSet<'_>,
) {
    if let Some(p) = dev.profile() {
        p.on_push_descriptors(cb, bp, set, count, writes);
    }
    if let Some(e) = dev.enforce() {
        crate::enforce::touch_writes(e, dev, count, writes); // a bind still held back happens now
        if let (Some(g), false) = (e.guard(), writes.is_null()) {
            // Push descriptors: their buffers are used by this command buffer.
            let w = std::slice::from_raw_parts(writes, count as usize);
            if w.iter().any(|w| {
                w.p_buffer_info.is_null() && crate::enforce::guard::holds_buffers(w.descriptor_type)
            }) {
                g.use_all(cb);
            }
            let b: Vec<u64> = w
                .iter()
                .filter(|w| !w.p_buffer_info.is_null())
                .flat_map(|w| {
                    std::slice::from_raw_parts(w.p_buffer_info, w.descriptor_count as usize)
                })
                .map(|i| raw(i.buffer))
                .collect();
            g.use_buffers(dev, cb, &b);
        }
    }
}

/// `vkCmdPushDescriptorSetWithTemplate(KHR)` and `vkCmdPushDescriptorSetWithTemplate2`.
unsafe fn push_template(
    dev: &DeviceData,
    cb: u64,
    t: vk::DescriptorUpdateTemplate,
    set: u32,
    data: *const c_void,
) {
    if let Some(tm) = super::descriptor::template(dev, t) {
        if let Some(p) = dev.profile() {
            p.on_push_template(cb, &tm, set, data);
        }
        super::descriptor::touch_template(dev, &tm, data);
    }
    if let Some(g) = dev.enforce().and_then(|e| e.guard()) {
        g.use_all(cb); // a template's buffers are not followed
    }
}

/// A command that reads (`to_image`) or writes a buffer as a buffer↔image copy, from `offset`
/// to the end (conservative); enforce binds it first if its bind is held back.
fn image_copy(
    dev: &DeviceData,
    cb: u64,
    command: &str,
    buffer: vk::Buffer,
    offset: u64,
    to_image: bool,
) {
    if let Some(p) = dev.profile() {
        let (access, kind) = if to_image {
            (Access::Read, UseKind::ToImage)
        } else {
            (Access::Write, UseKind::FromImage)
        };
        p.on_use(
            cb,
            command,
            vec![buse(buffer, offset, vk::WHOLE_SIZE, access, kind)],
        );
    }
    if let Some(e) = dev.enforce() {
        e.touch(dev, raw(buffer)); // a bind still held back happens now
        if let Some(g) = e.guard() {
            g.use_buffers(dev, cb, &[raw(buffer)]);
        }
    }
}

/// Vertex buffers bound (`vkCmdBindVertexBuffers`, `vkCmdBindVertexBuffers2`): read from their
/// offsets (to the end, or `sizes` when given).
unsafe fn vertex_buffers(
    dev: &DeviceData,
    cb: u64,
    command: &str,
    buffers: &[vk::Buffer],
    offsets: &[u64],
    sizes: &[u64],
) {
    if let Some(p) = dev.profile() {
        let uses = buffers
            .iter()
            .zip(offsets)
            .enumerate()
            .filter(|(_, (b, _))| **b != vk::Buffer::null())
            .map(|(i, (b, o))| {
                buse(
                    *b,
                    *o,
                    sizes.get(i).copied().unwrap_or(vk::WHOLE_SIZE),
                    Access::Read,
                    UseKind::Vertex,
                )
            })
            .collect();
        p.on_use(cb, command, uses);
    }
    if let Some(e) = dev.enforce() {
        for b in buffers {
            e.touch(dev, raw(*b));
        }
        if let Some(g) = e.guard() {
            let b: Vec<u64> = buffers.iter().map(|x| raw(*x)).collect();
            g.use_buffers(dev, cb, &b);
        }
    }
}

/// An index buffer bound (`vkCmdBindIndexBuffer`, `vkCmdBindIndexBuffer2`).
fn index_buffer(
    dev: &DeviceData,
    cb: u64,
    command: &str,
    buffer: vk::Buffer,
    offset: u64,
    size: u64,
) {
    if let Some(p) = dev.profile() {
        p.on_use(
            cb,
            command,
            vec![buse(buffer, offset, size, Access::Read, UseKind::Index)],
        );
    }
    if let Some(e) = dev.enforce() {
        e.touch(dev, raw(buffer)); // a bind still held back happens now
        if let Some(g) = e.guard() {
            g.use_buffers(dev, cb, &[raw(buffer)]);
        }
    }
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

hook! {
    fn vkAllocateCommandBuffers(
        cx,
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
                    CommandBufferState { pool, level: i.level, recording: Recording::Initial, one_time_submit: false },
                );
            }
            st.pools.entry(pool).or_default().extend(cbs.iter().map(|c| raw(*c)));
        }
        r
    }

    fn vkFreeCommandBuffers(
        cx,
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
                p.on_free(&cbs.iter().filter(|c| **c != vk::CommandBuffer::null()).map(|c| raw(*c)).collect::<Vec<_>>());
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

    fn vkDestroyCommandPool(cx, device: vk::Device, pool: vk::CommandPool, alloc: *const vk::AllocationCallbacks<'_>) {
        let cbs = cx.dev.state.drop_pool(raw(pool));
        if let Some(p) = cx.dev.profile() {
            p.on_free(&cbs);
        }
        if let Some(e) = cx.dev.enforce() {
            e.on_reset(&cbs);
        }
        cx.down((cx.next)(device, pool, alloc))
    }

    fn vkResetCommandPool(cx, device: vk::Device, pool: vk::CommandPool, flags: vk::CommandPoolResetFlags) -> vk::Result {
        let r = cx.down((cx.next)(device, pool, flags));
        if r == vk::Result::SUCCESS {
            cx.dev.state.reset_pool(raw(pool));
            let cbs: Vec<u64> = cx.dev.state.pools.get(&raw(pool)).map(|s| s.iter().copied().collect()).unwrap_or_default();
            if let Some(p) = cx.dev.profile() {
                p.on_reset(&cbs);
            }
            if let Some(e) = cx.dev.enforce() {
                e.on_reset(&cbs);
            }
        }
        r
    }

    fn vkBeginCommandBuffer(cx, cb: vk::CommandBuffer, info: *const vk::CommandBufferBeginInfo<'_>) -> vk::Result {
        let r = cx.down((cx.next)(cb, info));
        if r == vk::Result::SUCCESS {
            if let Some(mut s) = cx.dev.state.command_buffers.get_mut(&raw(cb)) {
                s.recording = Recording::Recording;
                s.one_time_submit = (*info).flags.contains(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
            }
            if let Some(p) = cx.dev.profile() {
                p.on_begin(raw(cb), (*info).flags.contains(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT));
                if let Some(g) = p.gpu() {
                    g.on_begin(raw(cb), (*info).flags.contains(vk::CommandBufferUsageFlags::SIMULTANEOUS_USE));
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

    fn vkEndCommandBuffer(cx, cb: vk::CommandBuffer) -> vk::Result {
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

    fn vkResetCommandBuffer(cx, cb: vk::CommandBuffer, flags: vk::CommandBufferResetFlags) -> vk::Result {
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

    fn vkCmdCopyBuffer(
        cx,
        cb: vk::CommandBuffer,
        src: vk::Buffer,
        dst: vk::Buffer,
        count: u32,
        regions: *const vk::BufferCopy,
    ) {
        let mut timed = None;
        if let (Some(p), false) = (cx.dev.profile(), regions.is_null()) {
            let r = std::slice::from_raw_parts(regions, count as usize)
                .iter()
                .map(|r| CopyRegion { src_offset: r.src_offset, dst_offset: r.dst_offset, size: r.size })
                .collect();
            let seq = p.on_copy(cx.dev, raw(cb), raw(src), raw(dst), r);
            // Issue 47: GPU timestamps around it, in echo's query pool.
            timed = p.gpu().and_then(|g| g.copy_before(raw(cb), seq).map(|t| (g, t)));
        }
        if let Some((g, t)) = timed {
            cx.down((cx.next)(cb, src, dst, count, regions));
            g.copy_after(raw(cb), t);
            return;
        }
        if let Some(g) = cx.dev.enforce().and_then(|e| e.guard()) {
            g.use_buffers(cx.dev, raw(cb), &[raw(src), raw(dst)]);
        }
        if let Some(e) = cx.dev.enforce() {
            // Self-copy regions dropped, one substitute barrier in their place.
            return e.cmd_copy_buffer(cx.dev, cb, src, dst, count, regions, |n, r| cx.down((cx.next)(cb, src, dst, n, r)));
        }
        cx.down((cx.next)(cb, src, dst, count, regions))
    }

    fn vkCmdCopyBuffer2 | vkCmdCopyBuffer2KHR(cx, cb: vk::CommandBuffer, info: *const vk::CopyBufferInfo2<'_>) {
        if let Some(p) = cx.dev.profile() {
            let i = &*info;
            let r = if i.p_regions.is_null() { Vec::new() } else {
                std::slice::from_raw_parts(i.p_regions, i.region_count as usize)
                    .iter()
                    .map(|r| CopyRegion { src_offset: r.src_offset, dst_offset: r.dst_offset, size: r.size })
                    .collect()
            };
            let seq = p.on_copy(cx.dev, raw(cb), raw(i.src_buffer), raw(i.dst_buffer), r);
            if let Some((g, t)) = p.gpu().and_then(|g| g.copy_before(raw(cb), seq).map(|t| (g, t))) {
                cx.down((cx.next)(cb, info));
                g.copy_after(raw(cb), t);
                return;
            }
        }
        if let Some(g) = cx.dev.enforce().and_then(|e| e.guard()) {
            g.use_buffers(cx.dev, raw(cb), &[raw((*info).src_buffer), raw((*info).dst_buffer)]);
        }
        if let Some(e) = cx.dev.enforce() {
            return e.cmd_copy_buffer2(cx.dev, cb, info, |i| cx.down((cx.next)(cb, i)));
        }
        cx.down((cx.next)(cb, info))
    }

    fn vkCmdFillBuffer(
        cx,
        cb: vk::CommandBuffer,
        dst: vk::Buffer,
        offset: vk::DeviceSize,
        size: vk::DeviceSize,
        data: u32,
    ) {
        if let Some(p) = cx.dev.profile() {
            p.on_use(raw(cb), "vkCmdFillBuffer", vec![buse(dst, offset, size, Access::Write, UseKind::Fill)]);
        }
        if let Some(e) = cx.dev.enforce() {
            e.touch(cx.dev, raw(dst)); // a bind still held back happens now
            if let Some(g) = e.guard() {
                g.use_buffers(cx.dev, raw(cb), &[raw(dst)]);
            }
        }
        cx.down((cx.next)(cb, dst, offset, size, data))
    }

    fn vkCmdUpdateBuffer(
        cx,
        cb: vk::CommandBuffer,
        dst: vk::Buffer,
        offset: vk::DeviceSize,
        size: vk::DeviceSize,
        data: *const c_void,
    ) {
        if let Some(p) = cx.dev.profile() {
            p.on_use(raw(cb), "vkCmdUpdateBuffer", vec![buse(dst, offset, size, Access::Write, UseKind::Update)]);
        }
        if let Some(e) = cx.dev.enforce() {
            e.touch(cx.dev, raw(dst)); // a bind still held back happens now
            if let Some(g) = e.guard() {
                g.use_buffers(cx.dev, raw(cb), &[raw(dst)]);
            }
        }
        cx.down((cx.next)(cb, dst, offset, size, data))
    }

    fn vkCmdBindVertexBuffers(
        cx,
        cb: vk::CommandBuffer,
        first: u32,
        count: u32,
        buffers: *const vk::Buffer,
        offsets: *const vk::DeviceSize,
    ) {
        vertex_buffers(cx.dev, raw(cb), "vkCmdBindVertexBuffers", slice(buffers, count), slice(offsets, if buffers.is_null() { 0 } else { count }), &[]);
        cx.down((cx.next)(cb, first, count, buffers, offsets))
    }

    fn vkCmdBindIndexBuffer(cx, cb: vk::CommandBuffer, buffer: vk::Buffer, offset: vk::DeviceSize, ty: vk::IndexType) {
        index_buffer(cx.dev, raw(cb), "vkCmdBindIndexBuffer", buffer, offset, vk::WHOLE_SIZE);
        cx.down((cx.next)(cb, buffer, offset, ty))
    }

    fn vkCmdBindPipeline(cx, cb: vk::CommandBuffer, bind_point: vk::PipelineBindPoint, pipeline: vk::Pipeline) {
        if let Some(p) = cx.dev.profile() {
            p.on_bind_pipeline(raw(cb), bind_point, raw(pipeline));
        }
        cx.down((cx.next)(cb, bind_point, pipeline))
    }

    fn vkCmdBindDescriptorSets(
        cx,
        cb: vk::CommandBuffer,
        bind_point: vk::PipelineBindPoint,
        layout: vk::PipelineLayout,
        first_set: u32,
        count: u32,
        sets: *const vk::DescriptorSet,
        dynamic_count: u32,
        dynamic_offsets: *const u32,
    ) {
        bind_sets(cx.dev, raw(cb), bind_point, first_set, slice(sets, count), slice(dynamic_offsets, dynamic_count));
        cx.down((cx.next)(cb, bind_point, layout, first_set, count, sets, dynamic_count, dynamic_offsets))
    }

    fn vkCmdPushDescriptorSetKHR | vkCmdPushDescriptorSet(
        cx,
        cb: vk::CommandBuffer,
        bind_point: vk::PipelineBindPoint,
        layout: vk::PipelineLayout,
        set: u32,
        count: u32,
        writes: *const vk::WriteDescriptorSet<'_>,
    ) {
        push_descriptors(cx.dev, raw(cb), bind_point, set, count, writes);
        cx.down((cx.next)(cb, bind_point, layout, set, count, writes))
    }

    fn vkCmdPushDescriptorSetWithTemplateKHR | vkCmdPushDescriptorSetWithTemplate(
        cx,
        cb: vk::CommandBuffer,
        t: vk::DescriptorUpdateTemplate,
        layout: vk::PipelineLayout,
        set: u32,
        data: *const c_void,
    ) {
        push_template(cx.dev, raw(cb), t, set, data);
        cx.down((cx.next)(cb, t, layout, set, data))
    }

    fn vkCmdExecuteCommands(cx, cb: vk::CommandBuffer, count: u32, secondaries: *const vk::CommandBuffer) {
        if let (Some(p), false) = (cx.dev.profile(), secondaries.is_null()) {
            let s = std::slice::from_raw_parts(secondaries, count as usize).iter().map(|c| raw(*c)).collect();
            p.on_execute(raw(cb), s);
        }
        if let (Some(e), false) = (cx.dev.enforce(), secondaries.is_null()) {
            let s: Vec<u64> = std::slice::from_raw_parts(secondaries, count as usize).iter().map(|c| raw(*c)).collect();
            e.on_execute(raw(cb), &s);
            if let Some(g) = e.guard() {
                g.execute(raw(cb), &s);
            }
        }
        cx.down((cx.next)(cb, count, secondaries))
    }

    fn vkCmdDispatch(cx, cb: vk::CommandBuffer, x: u32, y: u32, z: u32) {
        if let Some(p) = cx.dev.profile() {
            p.on_dispatch_or_draw(raw(cb), false, "vkCmdDispatch", Vec::new());
        }
        cx.down((cx.next)(cb, x, y, z))
    }

    fn vkCmdDispatchIndirect(cx, cb: vk::CommandBuffer, buffer: vk::Buffer, offset: vk::DeviceSize) {
        if let Some(p) = cx.dev.profile() {
            let ind = buse(buffer, offset, 12, Access::Read, UseKind::Indirect);
            p.on_dispatch_or_draw(raw(cb), false, "vkCmdDispatchIndirect", vec![ind]);
        }
        if let Some(e) = cx.dev.enforce() {
            e.touch(cx.dev, raw(buffer)); // a bind still held back happens now
            if let Some(g) = e.guard() {
                g.use_buffers(cx.dev, raw(cb), &[raw(buffer)]);
            }
        }
        cx.down((cx.next)(cb, buffer, offset))
    }

    fn vkCmdDraw(cx, cb: vk::CommandBuffer, vertices: u32, instances: u32, first_vertex: u32, first_instance: u32) {
        if let Some(p) = cx.dev.profile() {
            p.on_dispatch_or_draw(raw(cb), true, "vkCmdDraw", Vec::new());
        }
        cx.down((cx.next)(cb, vertices, instances, first_vertex, first_instance))
    }

    fn vkCmdDrawIndexed(
        cx,
        cb: vk::CommandBuffer,
        indices: u32,
        instances: u32,
        first_index: u32,
        vertex_offset: i32,
        first_instance: u32,
    ) {
        if let Some(p) = cx.dev.profile() {
            p.on_dispatch_or_draw(raw(cb), true, "vkCmdDrawIndexed", Vec::new());
        }
        cx.down((cx.next)(cb, indices, instances, first_index, vertex_offset, first_instance))
    }

    fn vkCmdDrawIndirect(
        cx,
        cb: vk::CommandBuffer,
        buffer: vk::Buffer,
        offset: vk::DeviceSize,
        count: u32,
        stride: u32,
    ) {
        if let Some(p) = cx.dev.profile() {
            let ind = buse(buffer, offset, indirect_len(count, stride, DRAW), Access::Read, UseKind::Indirect);
            p.on_dispatch_or_draw(raw(cb), true, "vkCmdDrawIndirect", vec![ind]);
        }
        if let Some(e) = cx.dev.enforce() {
            e.touch(cx.dev, raw(buffer)); // a bind still held back happens now
            if let Some(g) = e.guard() {
                g.use_buffers(cx.dev, raw(cb), &[raw(buffer)]);
            }
        }
        cx.down((cx.next)(cb, buffer, offset, count, stride))
    }

    fn vkCmdDrawIndexedIndirect(
        cx,
        cb: vk::CommandBuffer,
        buffer: vk::Buffer,
        offset: vk::DeviceSize,
        count: u32,
        stride: u32,
    ) {
        if let Some(p) = cx.dev.profile() {
            let ind = buse(buffer, offset, indirect_len(count, stride, DRAW_INDEXED), Access::Read, UseKind::Indirect);
            p.on_dispatch_or_draw(raw(cb), true, "vkCmdDrawIndexedIndirect", vec![ind]);
        }
        if let Some(e) = cx.dev.enforce() {
            e.touch(cx.dev, raw(buffer)); // a bind still held back happens now
            if let Some(g) = e.guard() {
                g.use_buffers(cx.dev, raw(cb), &[raw(buffer)]);
            }
        }
        cx.down((cx.next)(cb, buffer, offset, count, stride))
    }

    fn vkCmdDrawIndirectCount | vkCmdDrawIndirectCountKHR | vkCmdDrawIndirectCountAMD(
        cx,
        cb: vk::CommandBuffer,
        buffer: vk::Buffer,
        offset: vk::DeviceSize,
        count_buffer: vk::Buffer,
        count_offset: vk::DeviceSize,
        max_draws: u32,
        stride: u32,
    ) {
        if let Some(p) = cx.dev.profile() {
            let ind = buse(buffer, offset, indirect_len(max_draws, stride, DRAW), Access::Read, UseKind::Indirect);
            let count = buse(count_buffer, count_offset, 4, Access::Read, UseKind::Indirect);
            p.on_dispatch_or_draw(raw(cb), true, "vkCmdDrawIndirectCount", vec![ind, count]);
        }
        if let Some(e) = cx.dev.enforce() {
            e.touch(cx.dev, raw(buffer)); // binds still held back happen now
            e.touch(cx.dev, raw(count_buffer));
            if let Some(g) = e.guard() {
                g.use_buffers(cx.dev, raw(cb), &[raw(buffer), raw(count_buffer)]);
            }
        }
        cx.down((cx.next)(cb, buffer, offset, count_buffer, count_offset, max_draws, stride))
    }

    fn vkCmdDrawIndexedIndirectCount | vkCmdDrawIndexedIndirectCountKHR | vkCmdDrawIndexedIndirectCountAMD(
        cx,
        cb: vk::CommandBuffer,
        buffer: vk::Buffer,
        offset: vk::DeviceSize,
        count_buffer: vk::Buffer,
        count_offset: vk::DeviceSize,
        max_draws: u32,
        stride: u32,
    ) {
        if let Some(p) = cx.dev.profile() {
            let ind = buse(buffer, offset, indirect_len(max_draws, stride, DRAW_INDEXED), Access::Read, UseKind::Indirect);
            let count = buse(count_buffer, count_offset, 4, Access::Read, UseKind::Indirect);
            p.on_dispatch_or_draw(raw(cb), true, "vkCmdDrawIndexedIndirectCount", vec![ind, count]);
        }
        if let Some(e) = cx.dev.enforce() {
            e.touch(cx.dev, raw(buffer)); // binds still held back happen now
            e.touch(cx.dev, raw(count_buffer));
            if let Some(g) = e.guard() {
                g.use_buffers(cx.dev, raw(cb), &[raw(buffer), raw(count_buffer)]);
            }
        }
        cx.down((cx.next)(cb, buffer, offset, count_buffer, count_offset, max_draws, stride))
    }

    fn vkCmdCopyBufferToImage(
        cx,
        cb: vk::CommandBuffer,
        src: vk::Buffer,
        dst: vk::Image,
        layout: vk::ImageLayout,
        count: u32,
        regions: *const vk::BufferImageCopy,
    ) {
        image_copy(cx.dev, raw(cb), "vkCmdCopyBufferToImage", src, image_copy_range(count, regions), true);
        cx.down((cx.next)(cb, src, dst, layout, count, regions))
    }

    fn vkCmdCopyImageToBuffer(
        cx,
        cb: vk::CommandBuffer,
        src: vk::Image,
        layout: vk::ImageLayout,
        dst: vk::Buffer,
        count: u32,
        regions: *const vk::BufferImageCopy,
    ) {
        image_copy(cx.dev, raw(cb), "vkCmdCopyImageToBuffer", dst, image_copy_range(count, regions), false);
        cx.down((cx.next)(cb, src, layout, dst, count, regions))
    }

    fn vkCmdPipelineBarrier(
        cx,
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
            cb, src_stage, dst_stage, dependency, memory_count, memory, buffer_count, buffer, image_count, image,
        ))
    }

    fn vkCmdPipelineBarrier2 | vkCmdPipelineBarrier2KHR(cx, cb: vk::CommandBuffer, info: *const vk::DependencyInfo<'_>) {
        if let Some(p) = cx.dev.profile() {
            p.on_barrier(raw(cb));
        }
        barrier_buffers(cx.dev, dependency_buffers(info));
        cx.down((cx.next)(cb, info))
    }

    // ---- followed since issue 32: the registry's commands that programs use today

    fn vkCmdCopyBufferToImage2 | vkCmdCopyBufferToImage2KHR(cx, cb: vk::CommandBuffer, info: *const vk::CopyBufferToImageInfo2<'_>) {
        let i = &*info;
        let off = slice(i.p_regions, i.region_count).iter().map(|r| r.buffer_offset).min().unwrap_or(0);
        image_copy(cx.dev, raw(cb), "vkCmdCopyBufferToImage2", i.src_buffer, off, true);
        cx.down((cx.next)(cb, info))
    }

    fn vkCmdCopyImageToBuffer2 | vkCmdCopyImageToBuffer2KHR(cx, cb: vk::CommandBuffer, info: *const vk::CopyImageToBufferInfo2<'_>) {
        let i = &*info;
        let off = slice(i.p_regions, i.region_count).iter().map(|r| r.buffer_offset).min().unwrap_or(0);
        image_copy(cx.dev, raw(cb), "vkCmdCopyImageToBuffer2", i.dst_buffer, off, false);
        cx.down((cx.next)(cb, info))
    }

    fn vkCmdBindVertexBuffers2 | vkCmdBindVertexBuffers2EXT(
        cx,
        cb: vk::CommandBuffer,
        first: u32,
        count: u32,
        buffers: *const vk::Buffer,
        offsets: *const vk::DeviceSize,
        sizes: *const vk::DeviceSize,
        strides: *const vk::DeviceSize,
    ) {
        let n = if buffers.is_null() || offsets.is_null() { 0 } else { count };
        vertex_buffers(cx.dev, raw(cb), "vkCmdBindVertexBuffers2", slice(buffers, n), slice(offsets, n), slice(sizes, n));
        cx.down((cx.next)(cb, first, count, buffers, offsets, sizes, strides))
    }

    fn vkCmdBindIndexBuffer2 | vkCmdBindIndexBuffer2KHR(
        cx,
        cb: vk::CommandBuffer,
        buffer: vk::Buffer,
        offset: vk::DeviceSize,
        size: vk::DeviceSize,
        ty: vk::IndexType,
    ) {
        index_buffer(cx.dev, raw(cb), "vkCmdBindIndexBuffer2", buffer, offset, size);
        cx.down((cx.next)(cb, buffer, offset, size, ty))
    }

    fn vkCmdBindDescriptorSets2 | vkCmdBindDescriptorSets2KHR(cx, cb: vk::CommandBuffer, info: *const vk::BindDescriptorSetsInfoKHR<'_>) {
        let i = &*info;
        for bp in bind_points(i.stage_flags) {
            bind_sets(cx.dev, raw(cb), bp, i.first_set, slice(i.p_descriptor_sets, i.descriptor_set_count), slice(i.p_dynamic_offsets, i.dynamic_offset_count));
        }
        cx.down((cx.next)(cb, info))
    }

    fn vkCmdPushDescriptorSet2 | vkCmdPushDescriptorSet2KHR(cx, cb: vk::CommandBuffer, info: *const vk::PushDescriptorSetInfoKHR<'_>) {
        let i = &*info;
        for bp in bind_points(i.stage_flags) {
            push_descriptors(cx.dev, raw(cb), bp, i.set, i.descriptor_write_count, i.p_descriptor_writes);
        }
        cx.down((cx.next)(cb, info))
    }

    fn vkCmdPushDescriptorSetWithTemplate2 | vkCmdPushDescriptorSetWithTemplate2KHR(
        cx,
        cb: vk::CommandBuffer,
        info: *const vk::PushDescriptorSetWithTemplateInfoKHR<'_>,
    ) {
        let i = &*info;
        push_template(cx.dev, raw(cb), i.descriptor_update_template, i.set, i.p_data);
        cx.down((cx.next)(cb, info))
    }

    fn vkCmdDispatchBase | vkCmdDispatchBaseKHR(cx, cb: vk::CommandBuffer, bx: u32, by: u32, bz: u32, x: u32, y: u32, z: u32) {
        if let Some(p) = cx.dev.profile() {
            p.on_dispatch_or_draw(raw(cb), false, "vkCmdDispatchBase", Vec::new());
        }
        cx.down((cx.next)(cb, bx, by, bz, x, y, z))
    }

    fn vkCmdDrawMultiEXT(
        cx,
        cb: vk::CommandBuffer,
        count: u32,
        info: *const vk::MultiDrawInfoEXT,
        instances: u32,
        first_instance: u32,
        stride: u32,
    ) {
        if let Some(p) = cx.dev.profile() {
            p.on_dispatch_or_draw(raw(cb), true, "vkCmdDrawMultiEXT", Vec::new());
        }
        cx.down((cx.next)(cb, count, info, instances, first_instance, stride))
    }

    fn vkCmdDrawMultiIndexedEXT(
        cx,
        cb: vk::CommandBuffer,
        count: u32,
        info: *const vk::MultiDrawIndexedInfoEXT,
        instances: u32,
        first_instance: u32,
        stride: u32,
        vertex_offset: *const i32,
    ) {
        if let Some(p) = cx.dev.profile() {
            p.on_dispatch_or_draw(raw(cb), true, "vkCmdDrawMultiIndexedEXT", Vec::new());
        }
        cx.down((cx.next)(cb, count, info, instances, first_instance, stride, vertex_offset))
    }

    fn vkCmdWaitEvents(
        cx,
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
            cb, count, events, src_stage, dst_stage, memory_count, memory, buffer_count, buffer, image_count, image,
        ))
    }

    fn vkCmdWaitEvents2 | vkCmdWaitEvents2KHR(
        cx,
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
    fn vkCmdSetEvent2 | vkCmdSetEvent2KHR(cx, cb: vk::CommandBuffer, event: vk::Event, info: *const vk::DependencyInfo<'_>) {
        barrier_buffers(cx.dev, dependency_buffers(info));
        cx.down((cx.next)(cb, event, info))
    }

}
