//! Descriptors, shader modules and pipelines (chapters "Resource Descriptors", "Shaders",
//! "Pipelines"): what a dispatch reads and writes. Passthrough for now; profile mode records
//! layouts, sets and SPIR-V reflection here.

use super::hook;
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
        cx.down((cx.next)(device, write_count, writes, copy_count, copies))
    }

    fn vkCreateShaderModule(
        cx,
        device: vk::Device,
        info: *const vk::ShaderModuleCreateInfo<'_>,
        alloc: *const vk::AllocationCallbacks<'_>,
        out: *mut vk::ShaderModule,
    ) -> vk::Result {
        cx.down((cx.next)(device, info, alloc, out))
    }

    fn vkDestroyShaderModule(cx, device: vk::Device, module: vk::ShaderModule, alloc: *const vk::AllocationCallbacks<'_>) {
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
        cx.down((cx.next)(device, cache, count, infos, alloc, out))
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
