//! Descriptors, shader modules and pipelines (chapters "Resource Descriptors", "Shaders",
//! "Pipelines"): what a dispatch reads and writes. Profile mode follows the buffer descriptors
//! written into each set and reflects every shader module's SPIR-V (`reflect.rs`).

use super::calls_gen;
use crate::dispatch::{raw, DeviceData};
use crate::state::{TemplateEntry, UpdateTemplate, Written};
use ash::vk;
use std::ffi::c_void;
use std::sync::Arc;

/// Whether profile or enforce mode needs the descriptor update templates of this device.
fn wants_templates(dev: &DeviceData) -> bool {
    dev.profile().is_some() || dev.enforce().is_some()
}

/// The template `t` (recorded at its creation), when profile or enforce mode follows it.
pub(crate) fn template(
    dev: &DeviceData,
    t: vk::DescriptorUpdateTemplate,
) -> Option<Arc<UpdateTemplate>> {
    dev.state.templates.get(&raw(t)).map(|x| x.clone())
}

/// Enforce: the buffers an update (or push) through template `t` writes are used from now on,
/// so a bind still held back for one of them happens now.
///
/// # Safety
/// `data` must be the application's `pData` for `t`.
pub(crate) unsafe fn touch_template(dev: &DeviceData, t: &UpdateTemplate, data: *const c_void) {
    use ash::vk::Handle;
    let Some(e) = dev.enforce() else { return };
    if !e.has_pending() {
        return;
    }
    for (_, _, _, w) in t.decode(data) {
        if let Written::Buffer(b) = w {
            e.touch(dev, b.buffer.as_raw());
        }
    }
}

pub unsafe fn vkUpdateDescriptorSets(
    cx: &calls_gen::vkUpdateDescriptorSets<'_>,
    device: vk::Device,
    write_count: u32,
    writes: *const vk::WriteDescriptorSet<'_>,
    copy_count: u32,
    copies: *const vk::CopyDescriptorSet<'_>,
) {
    if let Some(p) = cx.dev.profile() {
        p.on_update_sets(write_count, writes, copy_count, copies);
    }
    if let Some(e) = cx.dev.enforce() {
        crate::enforce::touch_writes(e, cx.dev, write_count, writes);
        if let Some(g) = e.guard() {
            let w = if writes.is_null() {
                &[][..]
            } else {
                std::slice::from_raw_parts(writes, write_count as usize)
            };
            let c = if copies.is_null() {
                &[][..]
            } else {
                std::slice::from_raw_parts(copies, copy_count as usize)
            };
            g.sets_updated(w, c);
        }
    }
    cx.down((cx.next)(device, write_count, writes, copy_count, copies))
}

pub unsafe fn vkCreateShaderModule(
    cx: &calls_gen::vkCreateShaderModule<'_>,
    device: vk::Device,
    info: *const vk::ShaderModuleCreateInfo<'_>,
    alloc: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::ShaderModule,
) -> vk::Result {
    let r = cx.down((cx.next)(device, info, alloc, out));
    if let (vk::Result::SUCCESS, Some(p)) = (r, cx.dev.profile()) {
        p.on_shader_module(raw(*out), &*info);
    }
    r
}

pub unsafe fn vkDestroyShaderModule(
    cx: &calls_gen::vkDestroyShaderModule<'_>,
    device: vk::Device,
    module: vk::ShaderModule,
    alloc: *const vk::AllocationCallbacks<'_>,
) {
    if let Some(p) = cx.dev.profile() {
        p.on_destroy_module(raw(module));
    }
    cx.down((cx.next)(device, module, alloc))
}

pub unsafe fn vkCreateComputePipelines(
    cx: &calls_gen::vkCreateComputePipelines<'_>,
    device: vk::Device,
    cache: vk::PipelineCache,
    count: u32,
    infos: *const vk::ComputePipelineCreateInfo<'_>,
    alloc: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::Pipeline,
) -> vk::Result {
    let r = cx.down((cx.next)(device, cache, count, infos, alloc, out));
    if let (true, Some(p)) = (r.as_raw() >= 0, cx.dev.profile()) {
        p.on_compute_pipelines(count, infos, out);
    }
    r
}

pub unsafe fn vkCreateGraphicsPipelines(
    cx: &calls_gen::vkCreateGraphicsPipelines<'_>,
    device: vk::Device,
    cache: vk::PipelineCache,
    count: u32,
    infos: *const vk::GraphicsPipelineCreateInfo<'_>,
    alloc: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::Pipeline,
) -> vk::Result {
    let r = cx.down((cx.next)(device, cache, count, infos, alloc, out));
    if let (true, Some(p)) = (r.as_raw() >= 0, cx.dev.profile()) {
        p.on_graphics_pipelines(count, infos, out);
    }
    r
}

pub unsafe fn vkDestroyPipeline(
    cx: &calls_gen::vkDestroyPipeline<'_>,
    device: vk::Device,
    pipeline: vk::Pipeline,
    alloc: *const vk::AllocationCallbacks<'_>,
) {
    if let Some(p) = cx.dev.profile() {
        p.on_destroy_pipeline(raw(pipeline));
    }
    cx.down((cx.next)(device, pipeline, alloc))
}

/// `VK_EXT_shader_object`: shaders made without a pipeline, reflected like a pipeline's stages
/// (issue 53). Some may fail (`VK_INCOMPATIBLE_SHADER_BINARY_EXT`) while others are made: every
/// handle that is not null is recorded.
pub unsafe fn vkCreateShadersEXT(
    cx: &calls_gen::vkCreateShadersEXT<'_>,
    device: vk::Device,
    count: u32,
    infos: *const vk::ShaderCreateInfoEXT<'_>,
    alloc: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::ShaderEXT,
) -> vk::Result {
    let r = cx.down((cx.next)(device, count, infos, alloc, out));
    if let (true, Some(p)) = (
        r.as_raw() >= 0 || r == vk::Result::INCOMPATIBLE_SHADER_BINARY_EXT,
        cx.dev.profile(),
    ) {
        p.on_create_shaders(count, infos, out);
    }
    r
}

pub unsafe fn vkDestroyShaderEXT(
    cx: &calls_gen::vkDestroyShaderEXT<'_>,
    device: vk::Device,
    shader: vk::ShaderEXT,
    alloc: *const vk::AllocationCallbacks<'_>,
) {
    if let Some(p) = cx.dev.profile() {
        p.on_destroy_shader(raw(shader));
    }
    cx.down((cx.next)(device, shader, alloc))
}

pub unsafe fn vkAllocateDescriptorSets(
    cx: &calls_gen::vkAllocateDescriptorSets<'_>,
    device: vk::Device,
    info: *const vk::DescriptorSetAllocateInfo<'_>,
    out: *mut vk::DescriptorSet,
) -> vk::Result {
    let r = cx.down((cx.next)(device, info, out));
    if let (vk::Result::SUCCESS, Some(p)) = (r, cx.dev.profile()) {
        let sets: Vec<u64> = std::slice::from_raw_parts(out, (*info).descriptor_set_count as usize)
            .iter()
            .map(|s| raw(*s))
            .collect();
        let layouts: Vec<u64> =
            crate::dispatch::slice((*info).p_set_layouts, (*info).descriptor_set_count)
                .iter()
                .map(|l| raw(*l))
                .collect();
        p.on_allocate_sets(&sets, &layouts);
    }
    r
}

pub unsafe fn vkCreatePipelineLayout(
    cx: &calls_gen::vkCreatePipelineLayout<'_>,
    device: vk::Device,
    info: *const vk::PipelineLayoutCreateInfo<'_>,
    alloc: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::PipelineLayout,
) -> vk::Result {
    cx.down((cx.next)(device, info, alloc, out))
}

pub unsafe fn vkCreateDescriptorSetLayout(
    cx: &calls_gen::vkCreateDescriptorSetLayout<'_>,
    device: vk::Device,
    info: *const vk::DescriptorSetLayoutCreateInfo<'_>,
    alloc: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::DescriptorSetLayout,
) -> vk::Result {
    let r = cx.down((cx.next)(device, info, alloc, out));
    if let (vk::Result::SUCCESS, Some(p)) = (r, cx.dev.profile()) {
        p.on_set_layout(raw(*out), &*info);
    }
    r
}

pub unsafe fn vkCreateDescriptorUpdateTemplate(
    cx: &calls_gen::vkCreateDescriptorUpdateTemplate<'_>,
    device: vk::Device,
    info: *const vk::DescriptorUpdateTemplateCreateInfo<'_>,
    alloc: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::DescriptorUpdateTemplate,
) -> vk::Result {
    let r = cx.down((cx.next)(device, info, alloc, out));
    if r == vk::Result::SUCCESS && wants_templates(cx.dev) {
        let i = &*info;
        let entries = if i.p_descriptor_update_entries.is_null() {
            Vec::new()
        } else {
            std::slice::from_raw_parts(
                i.p_descriptor_update_entries,
                i.descriptor_update_entry_count as usize,
            )
            .iter()
            .map(|e| TemplateEntry {
                binding: e.dst_binding,
                array_element: e.dst_array_element,
                count: e.descriptor_count,
                ty: e.descriptor_type,
                offset: e.offset,
                stride: e.stride,
            })
            .collect()
        };
        cx.dev.state.templates.insert(
            raw(*out),
            Arc::new(UpdateTemplate {
                entries,
                kind: i.template_type,
                bind_point: i.pipeline_bind_point,
                set: i.set,
                set_layout: raw(i.descriptor_set_layout),
            }),
        );
    }
    r
}

pub unsafe fn vkDestroyDescriptorUpdateTemplate(
    cx: &calls_gen::vkDestroyDescriptorUpdateTemplate<'_>,
    device: vk::Device,
    t: vk::DescriptorUpdateTemplate,
    alloc: *const vk::AllocationCallbacks<'_>,
) {
    cx.dev.state.templates.remove(&raw(t));
    cx.down((cx.next)(device, t, alloc))
}

pub unsafe fn vkUpdateDescriptorSetWithTemplate(
    cx: &calls_gen::vkUpdateDescriptorSetWithTemplate<'_>,
    device: vk::Device,
    set: vk::DescriptorSet,
    t: vk::DescriptorUpdateTemplate,
    data: *const c_void,
) {
    if let Some(tm) = template(cx.dev, t) {
        if let Some(p) = cx.dev.profile() {
            p.on_update_with_template(raw(set), &tm, data);
        }
        touch_template(cx.dev, &tm, data);
    }
    if let Some(g) = cx.dev.enforce().and_then(|e| e.guard()) {
        g.set_unknown(raw(set)); // a template's buffers are not followed
    }
    cx.down((cx.next)(device, set, t, data))
}
