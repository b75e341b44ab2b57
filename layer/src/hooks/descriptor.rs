//! Descriptors, shader modules and pipelines (chapters "Resource Descriptors", "Shaders",
//! "Pipelines"): what a dispatch reads and writes. Profile mode follows the buffer descriptors
//! written into each set and reflects every shader module's SPIR-V (`reflect.rs`).

use super::hook;
use crate::dispatch::raw;
use ash::vk;

hook! {
    fn vkUpdateDescriptorSets(
        cx,
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
        }
        cx.down((cx.next)(device, write_count, writes, copy_count, copies))
    }

    fn vkCreateShaderModule(
        cx,
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

    fn vkDestroyShaderModule(cx, device: vk::Device, module: vk::ShaderModule, alloc: *const vk::AllocationCallbacks<'_>) {
        if let Some(p) = cx.dev.profile() {
            p.on_destroy_module(raw(module));
        }
        cx.down((cx.next)(device, module, alloc))
    }

    fn vkCreateComputePipelines(
        cx,
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

    fn vkCreateGraphicsPipelines(
        cx,
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

    fn vkAllocateDescriptorSets(
        cx,
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
            p.on_allocate_sets(&sets);
        }
        r
    }

    fn vkCreatePipelineLayout(
        cx,
        device: vk::Device,
        info: *const vk::PipelineLayoutCreateInfo<'_>,
        alloc: *const vk::AllocationCallbacks<'_>,
        out: *mut vk::PipelineLayout,
    ) -> vk::Result {
        cx.down((cx.next)(device, info, alloc, out))
    }

    fn vkCreateDescriptorSetLayout(
        cx,
        device: vk::Device,
        info: *const vk::DescriptorSetLayoutCreateInfo<'_>,
        alloc: *const vk::AllocationCallbacks<'_>,
        out: *mut vk::DescriptorSetLayout,
    ) -> vk::Result {
        cx.down((cx.next)(device, info, alloc, out))
    }
}
