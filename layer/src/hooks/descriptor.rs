//! Descriptors, shader modules and pipelines (chapters "Resource Descriptors", "Shaders",
//! "Pipelines"): what a dispatch reads and writes. Profile mode follows the buffer descriptors
//! written into each set and reflects every shader module's SPIR-V (`reflect.rs`).

use super::calls_gen;
use crate::chassis;
use crate::dispatch::{raw, DeviceData};
use crate::events::Cmd;
use crate::state::{TemplateEntry, UpdateTemplate};
use ash::vk;
use std::ffi::c_void;
use std::sync::Arc;

/// The template `t` (recorded at its creation, when a mode follows templates).
pub(crate) fn template(
    dev: &DeviceData,
    t: vk::DescriptorUpdateTemplate,
) -> Option<Arc<UpdateTemplate>> {
    dev.state.templates.get(&raw(t)).map(|x| x.clone())
}

pub unsafe fn vkUpdateDescriptorSets(
    cx: &calls_gen::vkUpdateDescriptorSets<'_>,
    device: vk::Device,
    write_count: u32,
    writes: *const vk::WriteDescriptorSet<'_>,
    copy_count: u32,
    copies: *const vk::CopyDescriptorSet<'_>,
) {
    let cmd = Cmd::UpdateSets {
        write_count,
        writes,
        copy_count,
        copies,
    };
    chassis::call(cx.dev, &cmd, || {
        cx.down((cx.next)(device, write_count, writes, copy_count, copies))
    })
}

pub unsafe fn vkCreateShaderModule(
    cx: &calls_gen::vkCreateShaderModule<'_>,
    device: vk::Device,
    info: *const vk::ShaderModuleCreateInfo<'_>,
    alloc: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::ShaderModule,
) -> vk::Result {
    let r = cx.down((cx.next)(device, info, alloc, out));
    if r == vk::Result::SUCCESS {
        let module = raw(*out);
        chassis::after(cx.dev, &Cmd::ShaderModule(module, &*info));
    }
    r
}

pub unsafe fn vkDestroyShaderModule(
    cx: &calls_gen::vkDestroyShaderModule<'_>,
    device: vk::Device,
    module: vk::ShaderModule,
    alloc: *const vk::AllocationCallbacks<'_>,
) {
    chassis::call(cx.dev, &Cmd::DestroyShaderModule(raw(module)), || {
        cx.down((cx.next)(device, module, alloc))
    })
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
    if r.as_raw() >= 0 {
        chassis::after(cx.dev, &Cmd::ComputePipelines { count, infos, out });
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
    if r.as_raw() >= 0 {
        chassis::after(cx.dev, &Cmd::GraphicsPipelines { count, infos, out });
    }
    r
}

pub unsafe fn vkDestroyPipeline(
    cx: &calls_gen::vkDestroyPipeline<'_>,
    device: vk::Device,
    pipeline: vk::Pipeline,
    alloc: *const vk::AllocationCallbacks<'_>,
) {
    chassis::call(cx.dev, &Cmd::DestroyPipeline(raw(pipeline)), || {
        cx.down((cx.next)(device, pipeline, alloc))
    })
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
    if r.as_raw() >= 0 || r == vk::Result::INCOMPATIBLE_SHADER_BINARY_EXT {
        chassis::after(cx.dev, &Cmd::Shaders { count, infos, out });
    }
    r
}

pub unsafe fn vkDestroyShaderEXT(
    cx: &calls_gen::vkDestroyShaderEXT<'_>,
    device: vk::Device,
    shader: vk::ShaderEXT,
    alloc: *const vk::AllocationCallbacks<'_>,
) {
    chassis::call(cx.dev, &Cmd::DestroyShader(raw(shader)), || {
        cx.down((cx.next)(device, shader, alloc))
    })
}

pub unsafe fn vkAllocateDescriptorSets(
    cx: &calls_gen::vkAllocateDescriptorSets<'_>,
    device: vk::Device,
    info: *const vk::DescriptorSetAllocateInfo<'_>,
    out: *mut vk::DescriptorSet,
) -> vk::Result {
    chassis::call(cx.dev, &Cmd::AllocateSets(&*info, out), || {
        cx.down((cx.next)(device, info, out))
    })
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
    if r == vk::Result::SUCCESS {
        chassis::after(cx.dev, &Cmd::SetLayout(raw(*out), &*info));
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
    if r == vk::Result::SUCCESS && chassis::wants_templates(cx.dev) {
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
    let tm = template(cx.dev, t);
    let cmd = Cmd::UpdateWithTemplate {
        set: raw(set),
        template: tm.as_deref(),
        data,
    };
    chassis::call(cx.dev, &cmd, || cx.down((cx.next)(device, set, t, data)))
}
