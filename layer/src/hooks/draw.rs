//! Dispatching and drawing (chapters "Dispatching Commands", "Drawing Commands"), and the state
//! they run over: pipelines, descriptor sets bound and pushed, vertex and index buffers. A
//! dispatch or draw tells profile to resolve its bind point's descriptors (`Work::Dispatch`,
//! `Work::Draw` in `uses.rs`). Recording hooks are on the hot path: no global lock, one map
//! lookup at most.

use super::calls_gen;
use super::uses::{buffer_use as buse, uses, wanted, Work};
use crate::chassis;
use crate::dispatch::{raw, slice, DeviceData};
use crate::events::Cmd;
use ash::vk;
use echo_analyzer::trace::{Access, BufferUse, UseKind};
use std::ffi::c_void;

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
    let cmd = Cmd::BindSets {
        cb,
        bp,
        first,
        sets: &s,
        dynamic,
    };
    chassis::before(dev, &cmd);
}

/// `vkCmdPushDescriptorSet(KHR)` and `vkCmdPushDescriptorSet2`; `down()` records it.
unsafe fn push_descriptors(
    dev: &DeviceData,
    cb: u64,
    bp: vk::PipelineBindPoint,
    set: u32,
    count: u32,
    writes: *const vk::WriteDescriptorSet<'_>,
    down: impl FnOnce(),
) {
    let cmd = Cmd::PushDescriptors {
        cb,
        bp,
        set,
        count,
        writes,
    };
    chassis::call(dev, &cmd, down)
}

/// `vkCmdPushDescriptorSetWithTemplate(KHR)` and `vkCmdPushDescriptorSetWithTemplate2`;
/// `down()` records it.
unsafe fn push_template(
    dev: &DeviceData,
    cb: u64,
    t: vk::DescriptorUpdateTemplate,
    set: u32,
    data: *const c_void,
    down: impl FnOnce(),
) {
    let tm = super::descriptor::template(dev, t);
    let cmd = Cmd::PushTemplate {
        cb,
        template: tm.as_deref(),
        set,
        data,
    };
    chassis::call(dev, &cmd, down)
}

/// Vertex buffers bound (`vkCmdBindVertexBuffers`, `vkCmdBindVertexBuffers2`): read from their
/// offsets (to the end, or `sizes` when given).
unsafe fn vertex_buffers(
    dev: &DeviceData,
    cb: u64,
    command: &'static str,
    buffers: &[vk::Buffer],
    offsets: &[u64],
    sizes: &[u64],
    down: impl FnOnce(),
) {
    if !wanted(dev) {
        return down();
    }
    let list: Vec<BufferUse> = buffers
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
    uses(dev, cb, command, Work::Names, &list, down)
}

/// An index buffer bound (`vkCmdBindIndexBuffer`, `vkCmdBindIndexBuffer2`).
unsafe fn index_buffer(
    dev: &DeviceData,
    cb: u64,
    command: &'static str,
    buffer: vk::Buffer,
    offset: u64,
    size: u64,
    down: impl FnOnce(),
) {
    let u = buse(buffer, offset, size, Access::Read, UseKind::Index);
    uses(dev, cb, command, Work::Names, &[u], down)
}

pub unsafe fn vkCmdBindVertexBuffers(
    cx: &calls_gen::vkCmdBindVertexBuffers<'_>,
    cb: vk::CommandBuffer,
    first: u32,
    count: u32,
    buffers: *const vk::Buffer,
    offsets: *const vk::DeviceSize,
) {
    vertex_buffers(
        cx.dev,
        raw(cb),
        "vkCmdBindVertexBuffers",
        slice(buffers, count),
        slice(offsets, if buffers.is_null() { 0 } else { count }),
        &[],
        || cx.down((cx.next)(cb, first, count, buffers, offsets)),
    )
}

pub unsafe fn vkCmdBindIndexBuffer(
    cx: &calls_gen::vkCmdBindIndexBuffer<'_>,
    cb: vk::CommandBuffer,
    buffer: vk::Buffer,
    offset: vk::DeviceSize,
    ty: vk::IndexType,
) {
    index_buffer(
        cx.dev,
        raw(cb),
        "vkCmdBindIndexBuffer",
        buffer,
        offset,
        vk::WHOLE_SIZE,
        || cx.down((cx.next)(cb, buffer, offset, ty)),
    )
}

pub unsafe fn vkCmdBindPipeline(
    cx: &calls_gen::vkCmdBindPipeline<'_>,
    cb: vk::CommandBuffer,
    bind_point: vk::PipelineBindPoint,
    pipeline: vk::Pipeline,
) {
    let cmd = Cmd::BindPipeline {
        cb: raw(cb),
        bp: bind_point,
        pipeline: raw(pipeline),
    };
    chassis::call(cx.dev, &cmd, || {
        cx.down((cx.next)(cb, bind_point, pipeline))
    })
}

/// `VK_EXT_shader_object`: the code of each stage, bound without a pipeline (issue 53).
pub unsafe fn vkCmdBindShadersEXT(
    cx: &calls_gen::vkCmdBindShadersEXT<'_>,
    cb: vk::CommandBuffer,
    count: u32,
    stages: *const vk::ShaderStageFlags,
    shaders: *const vk::ShaderEXT,
) {
    let st = slice(stages, count);
    // A null pShaders unbinds every stage named.
    let sh: Vec<u64> = if shaders.is_null() {
        vec![0; st.len()]
    } else {
        slice(shaders, count).iter().map(|s| raw(*s)).collect()
    };
    let cmd = Cmd::BindShaders {
        cb: raw(cb),
        stages: st,
        shaders: &sh,
    };
    chassis::call(cx.dev, &cmd, || {
        cx.down((cx.next)(cb, count, stages, shaders))
    })
}

pub unsafe fn vkCmdBindDescriptorSets(
    cx: &calls_gen::vkCmdBindDescriptorSets<'_>,
    cb: vk::CommandBuffer,
    bind_point: vk::PipelineBindPoint,
    layout: vk::PipelineLayout,
    first_set: u32,
    count: u32,
    sets: *const vk::DescriptorSet,
    dynamic_count: u32,
    dynamic_offsets: *const u32,
) {
    bind_sets(
        cx.dev,
        raw(cb),
        bind_point,
        first_set,
        slice(sets, count),
        slice(dynamic_offsets, dynamic_count),
    );
    cx.down((cx.next)(
        cb,
        bind_point,
        layout,
        first_set,
        count,
        sets,
        dynamic_count,
        dynamic_offsets,
    ))
}

pub unsafe fn vkCmdPushDescriptorSet(
    cx: &calls_gen::vkCmdPushDescriptorSet<'_>,
    cb: vk::CommandBuffer,
    bind_point: vk::PipelineBindPoint,
    layout: vk::PipelineLayout,
    set: u32,
    count: u32,
    writes: *const vk::WriteDescriptorSet<'_>,
) {
    push_descriptors(cx.dev, raw(cb), bind_point, set, count, writes, || {
        cx.down((cx.next)(cb, bind_point, layout, set, count, writes))
    })
}

pub unsafe fn vkCmdPushDescriptorSetWithTemplate(
    cx: &calls_gen::vkCmdPushDescriptorSetWithTemplate<'_>,
    cb: vk::CommandBuffer,
    t: vk::DescriptorUpdateTemplate,
    layout: vk::PipelineLayout,
    set: u32,
    data: *const c_void,
) {
    push_template(cx.dev, raw(cb), t, set, data, || {
        cx.down((cx.next)(cb, t, layout, set, data))
    })
}

pub unsafe fn vkCmdDispatch(
    cx: &calls_gen::vkCmdDispatch<'_>,
    cb: vk::CommandBuffer,
    x: u32,
    y: u32,
    z: u32,
) {
    uses(
        cx.dev,
        raw(cb),
        "vkCmdDispatch",
        Work::Dispatch,
        &[],
        || cx.down((cx.next)(cb, x, y, z)),
    )
}

pub unsafe fn vkCmdDispatchIndirect(
    cx: &calls_gen::vkCmdDispatchIndirect<'_>,
    cb: vk::CommandBuffer,
    buffer: vk::Buffer,
    offset: vk::DeviceSize,
) {
    let ind = buse(buffer, offset, 12, Access::Read, UseKind::Indirect);
    uses(
        cx.dev,
        raw(cb),
        "vkCmdDispatchIndirect",
        Work::Dispatch,
        &[ind],
        || cx.down((cx.next)(cb, buffer, offset)),
    )
}

pub unsafe fn vkCmdDraw(
    cx: &calls_gen::vkCmdDraw<'_>,
    cb: vk::CommandBuffer,
    vertices: u32,
    instances: u32,
    first_vertex: u32,
    first_instance: u32,
) {
    uses(cx.dev, raw(cb), "vkCmdDraw", Work::Draw, &[], || {
        cx.down((cx.next)(
            cb,
            vertices,
            instances,
            first_vertex,
            first_instance,
        ))
    })
}

pub unsafe fn vkCmdDrawIndexed(
    cx: &calls_gen::vkCmdDrawIndexed<'_>,
    cb: vk::CommandBuffer,
    indices: u32,
    instances: u32,
    first_index: u32,
    vertex_offset: i32,
    first_instance: u32,
) {
    uses(cx.dev, raw(cb), "vkCmdDrawIndexed", Work::Draw, &[], || {
        cx.down((cx.next)(
            cb,
            indices,
            instances,
            first_index,
            vertex_offset,
            first_instance,
        ))
    })
}

pub unsafe fn vkCmdDrawIndirect(
    cx: &calls_gen::vkCmdDrawIndirect<'_>,
    cb: vk::CommandBuffer,
    buffer: vk::Buffer,
    offset: vk::DeviceSize,
    count: u32,
    stride: u32,
) {
    let at = Indirect {
        command: "vkCmdDrawIndirect",
        record: DRAW,
        buffer: (buffer, offset),
        count: None,
        draws: (count, stride),
    };
    indirect(cx.dev, raw(cb), at, || {
        cx.down((cx.next)(cb, buffer, offset, count, stride))
    })
}

pub unsafe fn vkCmdDrawIndexedIndirect(
    cx: &calls_gen::vkCmdDrawIndexedIndirect<'_>,
    cb: vk::CommandBuffer,
    buffer: vk::Buffer,
    offset: vk::DeviceSize,
    count: u32,
    stride: u32,
) {
    let at = Indirect {
        command: "vkCmdDrawIndexedIndirect",
        record: DRAW_INDEXED,
        buffer: (buffer, offset),
        count: None,
        draws: (count, stride),
    };
    indirect(cx.dev, raw(cb), at, || {
        cx.down((cx.next)(cb, buffer, offset, count, stride))
    })
}

/// An indirect draw, one description for the four: up to `draws.0` records of `record` bytes at
/// `buffer`, `draws.1` apart, and for the `*Count` draws the count at `count`.
struct Indirect {
    command: &'static str,
    record: u64,
    buffer: (vk::Buffer, u64),
    count: Option<(vk::Buffer, u64)>,
    draws: (u32, u32),
}

/// What an indirect draw uses; `down()` records it.
unsafe fn indirect(dev: &DeviceData, cb: u64, at: Indirect, down: impl FnOnce()) {
    let ((buffer, offset), (draws, stride)) = (at.buffer, at.draws);
    let len = indirect_len(draws, stride, at.record);
    let ind = buse(buffer, offset, len, Access::Read, UseKind::Indirect);
    match at.count {
        Some((b, o)) => {
            let count = buse(b, o, 4, Access::Read, UseKind::Indirect);
            uses(dev, cb, at.command, Work::Draw, &[ind, count], down)
        }
        None => uses(dev, cb, at.command, Work::Draw, &[ind], down),
    }
}

pub unsafe fn vkCmdDrawIndirectCount(
    cx: &calls_gen::vkCmdDrawIndirectCount<'_>,
    cb: vk::CommandBuffer,
    buffer: vk::Buffer,
    offset: vk::DeviceSize,
    count_buffer: vk::Buffer,
    count_offset: vk::DeviceSize,
    max_draws: u32,
    stride: u32,
) {
    let (cbuf, coff, max) = (count_buffer, count_offset, max_draws);
    let at = Indirect {
        command: "vkCmdDrawIndirectCount",
        record: DRAW,
        buffer: (buffer, offset),
        count: Some((cbuf, coff)),
        draws: (max, stride),
    };
    indirect(cx.dev, raw(cb), at, || {
        cx.down((cx.next)(cb, buffer, offset, cbuf, coff, max, stride))
    })
}

pub unsafe fn vkCmdDrawIndexedIndirectCount(
    cx: &calls_gen::vkCmdDrawIndexedIndirectCount<'_>,
    cb: vk::CommandBuffer,
    buffer: vk::Buffer,
    offset: vk::DeviceSize,
    count_buffer: vk::Buffer,
    count_offset: vk::DeviceSize,
    max_draws: u32,
    stride: u32,
) {
    let (cbuf, coff, max) = (count_buffer, count_offset, max_draws);
    let at = Indirect {
        command: "vkCmdDrawIndexedIndirectCount",
        record: DRAW_INDEXED,
        buffer: (buffer, offset),
        count: Some((cbuf, coff)),
        draws: (max, stride),
    };
    indirect(cx.dev, raw(cb), at, || {
        cx.down((cx.next)(cb, buffer, offset, cbuf, coff, max, stride))
    })
}

pub unsafe fn vkCmdBindVertexBuffers2(
    cx: &calls_gen::vkCmdBindVertexBuffers2<'_>,
    cb: vk::CommandBuffer,
    first: u32,
    count: u32,
    buffers: *const vk::Buffer,
    offsets: *const vk::DeviceSize,
    sizes: *const vk::DeviceSize,
    strides: *const vk::DeviceSize,
) {
    let n = if buffers.is_null() || offsets.is_null() {
        0
    } else {
        count
    };
    vertex_buffers(
        cx.dev,
        raw(cb),
        "vkCmdBindVertexBuffers2",
        slice(buffers, n),
        slice(offsets, n),
        slice(sizes, n),
        || {
            cx.down((cx.next)(
                cb, first, count, buffers, offsets, sizes, strides,
            ))
        },
    )
}

pub unsafe fn vkCmdBindIndexBuffer2(
    cx: &calls_gen::vkCmdBindIndexBuffer2<'_>,
    cb: vk::CommandBuffer,
    buffer: vk::Buffer,
    offset: vk::DeviceSize,
    size: vk::DeviceSize,
    ty: vk::IndexType,
) {
    index_buffer(
        cx.dev,
        raw(cb),
        "vkCmdBindIndexBuffer2",
        buffer,
        offset,
        size,
        || cx.down((cx.next)(cb, buffer, offset, size, ty)),
    )
}

pub unsafe fn vkCmdBindDescriptorSets2(
    cx: &calls_gen::vkCmdBindDescriptorSets2<'_>,
    cb: vk::CommandBuffer,
    info: *const vk::BindDescriptorSetsInfoKHR<'_>,
) {
    let i = &*info;
    for bp in bind_points(i.stage_flags) {
        bind_sets(
            cx.dev,
            raw(cb),
            bp,
            i.first_set,
            slice(i.p_descriptor_sets, i.descriptor_set_count),
            slice(i.p_dynamic_offsets, i.dynamic_offset_count),
        );
    }
    cx.down((cx.next)(cb, info))
}

pub unsafe fn vkCmdPushDescriptorSet2(
    cx: &calls_gen::vkCmdPushDescriptorSet2<'_>,
    cb: vk::CommandBuffer,
    info: *const vk::PushDescriptorSetInfoKHR<'_>,
) {
    let i = &*info;
    for bp in bind_points(i.stage_flags) {
        push_descriptors(
            cx.dev,
            raw(cb),
            bp,
            i.set,
            i.descriptor_write_count,
            i.p_descriptor_writes,
            || (), // each bind point is told; the call goes down once, below
        );
    }
    cx.down((cx.next)(cb, info))
}

pub unsafe fn vkCmdPushDescriptorSetWithTemplate2(
    cx: &calls_gen::vkCmdPushDescriptorSetWithTemplate2<'_>,
    cb: vk::CommandBuffer,
    info: *const vk::PushDescriptorSetWithTemplateInfoKHR<'_>,
) {
    let i = &*info;
    push_template(
        cx.dev,
        raw(cb),
        i.descriptor_update_template,
        i.set,
        i.p_data,
        || cx.down((cx.next)(cb, info)),
    )
}

pub unsafe fn vkCmdDispatchBase(
    cx: &calls_gen::vkCmdDispatchBase<'_>,
    cb: vk::CommandBuffer,
    bx: u32,
    by: u32,
    bz: u32,
    x: u32,
    y: u32,
    z: u32,
) {
    uses(
        cx.dev,
        raw(cb),
        "vkCmdDispatchBase",
        Work::Dispatch,
        &[],
        || cx.down((cx.next)(cb, bx, by, bz, x, y, z)),
    )
}

pub unsafe fn vkCmdDrawMultiEXT(
    cx: &calls_gen::vkCmdDrawMultiEXT<'_>,
    cb: vk::CommandBuffer,
    count: u32,
    info: *const vk::MultiDrawInfoEXT,
    instances: u32,
    first_instance: u32,
    stride: u32,
) {
    uses(
        cx.dev,
        raw(cb),
        "vkCmdDrawMultiEXT",
        Work::Draw,
        &[],
        || {
            cx.down((cx.next)(
                cb,
                count,
                info,
                instances,
                first_instance,
                stride,
            ))
        },
    )
}

pub unsafe fn vkCmdDrawMultiIndexedEXT(
    cx: &calls_gen::vkCmdDrawMultiIndexedEXT<'_>,
    cb: vk::CommandBuffer,
    count: u32,
    info: *const vk::MultiDrawIndexedInfoEXT,
    instances: u32,
    first_instance: u32,
    stride: u32,
    vertex_offset: *const i32,
) {
    uses(
        cx.dev,
        raw(cb),
        "vkCmdDrawMultiIndexedEXT",
        Work::Draw,
        &[],
        || {
            cx.down((cx.next)(
                cb,
                count,
                info,
                instances,
                first_instance,
                stride,
                vertex_offset,
            ))
        },
    )
}
