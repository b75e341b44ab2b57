//! echo-templates: a staging round trip whose compute step profile mode can only follow through
//! the paths issue 4 left open (tests/tests/profile_descriptors.rs):
//!
//! - the descriptor set is written with a **descriptor update template** (binding 0: the device
//!   buffer `d` as a storage buffer; binding 1: a **uniform texel buffer view** of `k`);
//! - the dispatch is recorded once in a **secondary command buffer** that every iteration's
//!   primary runs with `vkCmdExecuteCommands`.
//!
//! Each iteration: copy `up` → `d`; the secondary's dispatch does `d[i] = d[i] * 3 + k[i % 64]`
//! (reflection: `d` read-write, `k` read); copy `d` → `down`; the host checks `down`.
//!
//! `--input each` (default): the host writes new input into `up` before every iteration.
//! `--input once`: the host writes `up` once; every iteration uploads that same input again. Then
//! `up` must keep its bytes while the dispatch overwrites `d`: sharing their memory is unsafe, and
//! only the dispatch's write (through the template-written set, in the secondary) shows it.
//!
//! Prints one JSON line: `{"checksum": "<hex>", "mismatches": N}`.

use ash::vk;
use serde_json::json;

const SPV: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/templates.spv"));
const LOCAL: u64 = 64;

fn arg(name: &str, default: &str) -> String {
    let a: Vec<String> = std::env::args().collect();
    a.iter()
        .position(|x| x == name)
        .and_then(|i| a.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_string())
}

fn pattern(i: usize, it: u32) -> u32 {
    (i as u32).wrapping_mul(2654435761) ^ it.wrapping_mul(0x9e37_79b9)
}

fn key(i: usize) -> u32 {
    (i as u32).wrapping_mul(7) + 1
}

/// What the template writes: its entries point into this struct (`k` right after `d`: both are
/// 8-byte aligned).
#[repr(C)]
struct Data {
    d: vk::DescriptorBufferInfo,
    k: vk::BufferView,
}

fn main() {
    let once = match arg("--input", "each").as_str() {
        "each" => false,
        "once" => true,
        o => {
            eprintln!("echo-templates: unknown --input {o} (each, once)");
            std::process::exit(2);
        }
    };
    let iters: u32 = arg("--iters", "3").parse().expect("--iters N");
    let kib: u64 = arg("--kib", "64").parse().expect("--kib N");
    let bytes = (kib * 1024).div_ceil(LOCAL * 4) * LOCAL * 4;
    if let Err(e) = unsafe { run(once, iters, bytes) } {
        eprintln!("echo-templates: {e}");
        std::process::exit(1);
    }
}

unsafe fn run(once: bool, iters: u32, bytes: u64) -> Result<(), String> {
    let err = |what: &'static str| move |e: vk::Result| format!("{what}: {e}");
    let entry = ash::Entry::load().map_err(|e| format!("loader: {e}"))?;
    let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_1);
    let instance = entry
        .create_instance(
            &vk::InstanceCreateInfo::default().application_info(&app),
            None,
        )
        .map_err(err("vkCreateInstance"))?;
    let pd = *instance
        .enumerate_physical_devices()
        .map_err(err("vkEnumeratePhysicalDevices"))?
        .first()
        .ok_or("no physical device")?;
    let mem = instance.get_physical_device_memory_properties(pd);
    let qf = instance
        .get_physical_device_queue_family_properties(pd)
        .iter()
        .position(|q| q.queue_flags.contains(vk::QueueFlags::COMPUTE))
        .ok_or("no compute queue")? as u32;
    let prio = [1.0f32];
    let qinfo = [vk::DeviceQueueCreateInfo::default()
        .queue_family_index(qf)
        .queue_priorities(&prio)];
    let dev = instance
        .create_device(
            pd,
            &vk::DeviceCreateInfo::default().queue_create_infos(&qinfo),
            None,
        )
        .map_err(err("vkCreateDevice"))?;

    use vk::BufferUsageFlags as U;
    use vk::MemoryPropertyFlags as F;
    let buffer = |size: u64, usage: U, want: F| -> Result<(vk::Buffer, vk::DeviceMemory), String> {
        let b = dev
            .create_buffer(
                &vk::BufferCreateInfo::default().size(size).usage(usage),
                None,
            )
            .map_err(err("vkCreateBuffer"))?;
        let req = dev.get_buffer_memory_requirements(b);
        let ty = (0..mem.memory_type_count)
            .find(|&i| {
                req.memory_type_bits & (1 << i) != 0
                    && mem.memory_types[i as usize].property_flags.contains(want)
            })
            .ok_or("no memory type")?;
        let m = dev
            .allocate_memory(
                &vk::MemoryAllocateInfo::default()
                    .allocation_size(req.size)
                    .memory_type_index(ty),
                None,
            )
            .map_err(err("vkAllocateMemory"))?;
        dev.bind_buffer_memory(b, m, 0)
            .map_err(err("vkBindBufferMemory"))?;
        Ok((b, m))
    };
    let map = |m: vk::DeviceMemory| -> Result<*mut u32, String> {
        dev.map_memory(m, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
            .map(|p| p as *mut u32)
            .map_err(err("vkMapMemory"))
    };
    let hv = F::HOST_VISIBLE | F::HOST_COHERENT;
    let n = (bytes / 4) as usize;
    let kbytes = LOCAL * 4;

    let (d, d_mem) = buffer(
        bytes,
        U::TRANSFER_SRC | U::TRANSFER_DST | U::STORAGE_BUFFER,
        F::DEVICE_LOCAL,
    )?;
    let (k, k_mem) = buffer(
        kbytes,
        U::TRANSFER_DST | U::UNIFORM_TEXEL_BUFFER,
        F::DEVICE_LOCAL,
    )?;
    let (up, up_mem) = buffer(bytes, U::TRANSFER_SRC, hv)?;
    let (kup, kup_mem) = buffer(kbytes, U::TRANSFER_SRC, hv)?;
    let (down, down_mem) = buffer(bytes, U::TRANSFER_DST, hv)?;
    let (up_p, kup_p, down_p) = (map(up_mem)?, map(kup_mem)?, map(down_mem)?);
    for i in 0..LOCAL as usize {
        *kup_p.add(i) = key(i);
    }
    let view = dev
        .create_buffer_view(
            &vk::BufferViewCreateInfo::default()
                .buffer(k)
                .format(vk::Format::R32_UINT)
                .offset(0)
                .range(vk::WHOLE_SIZE),
            None,
        )
        .map_err(err("vkCreateBufferView"))?;

    // Descriptors: set 0 = { 0: storage buffer d, 1: uniform texel buffer k }.
    let bindings = [
        vk::DescriptorSetLayoutBinding::default()
            .binding(0)
            .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
            .descriptor_count(1)
            .stage_flags(vk::ShaderStageFlags::COMPUTE),
        vk::DescriptorSetLayoutBinding::default()
            .binding(1)
            .descriptor_type(vk::DescriptorType::UNIFORM_TEXEL_BUFFER)
            .descriptor_count(1)
            .stage_flags(vk::ShaderStageFlags::COMPUTE),
    ];
    let set_layout = dev
        .create_descriptor_set_layout(
            &vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings),
            None,
        )
        .map_err(err("vkCreateDescriptorSetLayout"))?;
    let layouts = [set_layout];
    let pipe_layout = dev
        .create_pipeline_layout(
            &vk::PipelineLayoutCreateInfo::default().set_layouts(&layouts),
            None,
        )
        .map_err(err("vkCreatePipelineLayout"))?;
    let sizes = [
        vk::DescriptorPoolSize {
            ty: vk::DescriptorType::STORAGE_BUFFER,
            descriptor_count: 1,
        },
        vk::DescriptorPoolSize {
            ty: vk::DescriptorType::UNIFORM_TEXEL_BUFFER,
            descriptor_count: 1,
        },
    ];
    let dpool = dev
        .create_descriptor_pool(
            &vk::DescriptorPoolCreateInfo::default()
                .max_sets(1)
                .pool_sizes(&sizes),
            None,
        )
        .map_err(err("vkCreateDescriptorPool"))?;
    let set = dev
        .allocate_descriptor_sets(
            &vk::DescriptorSetAllocateInfo::default()
                .descriptor_pool(dpool)
                .set_layouts(&layouts),
        )
        .map_err(err("vkAllocateDescriptorSets"))?[0];
    let entries = [
        vk::DescriptorUpdateTemplateEntry {
            dst_binding: 0,
            dst_array_element: 0,
            descriptor_count: 1,
            descriptor_type: vk::DescriptorType::STORAGE_BUFFER,
            offset: 0,
            stride: std::mem::size_of::<Data>(),
        },
        vk::DescriptorUpdateTemplateEntry {
            dst_binding: 1,
            dst_array_element: 0,
            descriptor_count: 1,
            descriptor_type: vk::DescriptorType::UNIFORM_TEXEL_BUFFER,
            offset: std::mem::size_of::<vk::DescriptorBufferInfo>(),
            stride: std::mem::size_of::<Data>(),
        },
    ];
    let template = dev
        .create_descriptor_update_template(
            &vk::DescriptorUpdateTemplateCreateInfo::default()
                .descriptor_update_entries(&entries)
                .template_type(vk::DescriptorUpdateTemplateType::DESCRIPTOR_SET)
                .descriptor_set_layout(set_layout),
            None,
        )
        .map_err(err("vkCreateDescriptorUpdateTemplate"))?;
    let data = Data {
        d: vk::DescriptorBufferInfo {
            buffer: d,
            offset: 0,
            range: vk::WHOLE_SIZE,
        },
        k: view,
    };
    dev.update_descriptor_set_with_template(set, template, &data as *const Data as *const _);

    let words = ash::util::read_spv(&mut std::io::Cursor::new(SPV)).map_err(|e| e.to_string())?;
    let module = dev
        .create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&words), None)
        .map_err(err("vkCreateShaderModule"))?;
    let stage = vk::PipelineShaderStageCreateInfo::default()
        .stage(vk::ShaderStageFlags::COMPUTE)
        .module(module)
        .name(c"main");
    let pipeline = dev
        .create_compute_pipelines(
            vk::PipelineCache::null(),
            &[vk::ComputePipelineCreateInfo::default()
                .stage(stage)
                .layout(pipe_layout)],
            None,
        )
        .map_err(|(_, e)| format!("vkCreateComputePipelines: {e}"))?[0];

    let pool = dev
        .create_command_pool(
            &vk::CommandPoolCreateInfo::default()
                .queue_family_index(qf)
                .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER),
            None,
        )
        .map_err(err("vkCreateCommandPool"))?;
    let alloc_cb = |level| {
        dev.allocate_command_buffers(
            &vk::CommandBufferAllocateInfo::default()
                .command_pool(pool)
                .level(level)
                .command_buffer_count(1),
        )
        .map(|v| v[0])
        .map_err(err("vkAllocateCommandBuffers"))
    };
    let cb = alloc_cb(vk::CommandBufferLevel::PRIMARY)?;
    let sec = alloc_cb(vk::CommandBufferLevel::SECONDARY)?;

    // The secondary: recorded once, the dispatch through the template-written set.
    let inherit = vk::CommandBufferInheritanceInfo::default();
    dev.begin_command_buffer(
        sec,
        &vk::CommandBufferBeginInfo::default().inheritance_info(&inherit),
    )
    .map_err(err("vkBeginCommandBuffer"))?;
    dev.cmd_bind_pipeline(sec, vk::PipelineBindPoint::COMPUTE, pipeline);
    dev.cmd_bind_descriptor_sets(
        sec,
        vk::PipelineBindPoint::COMPUTE,
        pipe_layout,
        0,
        &[set],
        &[],
    );
    dev.cmd_dispatch(sec, (n as u64 / LOCAL) as u32, 1, 1);
    dev.end_command_buffer(sec)
        .map_err(err("vkEndCommandBuffer"))?;

    let fence = dev
        .create_fence(&vk::FenceCreateInfo::default(), None)
        .map_err(err("vkCreateFence"))?;
    let queue = dev.get_device_queue(qf, 0);
    use vk::AccessFlags as A;
    use vk::PipelineStageFlags as S;
    let barrier = |src: A, dst: A, s: S, t: S| {
        let mb = [vk::MemoryBarrier::default()
            .src_access_mask(src)
            .dst_access_mask(dst)];
        dev.cmd_pipeline_barrier(cb, s, t, vk::DependencyFlags::empty(), &mb, &[], &[]);
    };
    let mut hash: u64 = 0xcbf29ce484222325;
    let mut mismatches = 0u64;
    for it in 0..iters {
        let input = if once { 0 } else { it };
        if it == 0 || !once {
            for i in 0..n {
                *up_p.add(i) = pattern(i, input);
            }
        }
        dev.reset_command_buffer(cb, vk::CommandBufferResetFlags::empty())
            .map_err(err("vkResetCommandBuffer"))?;
        dev.begin_command_buffer(cb, &vk::CommandBufferBeginInfo::default())
            .map_err(err("vkBeginCommandBuffer"))?;
        if it == 0 {
            dev.cmd_copy_buffer(
                cb,
                kup,
                k,
                &[vk::BufferCopy {
                    src_offset: 0,
                    dst_offset: 0,
                    size: kbytes,
                }],
            );
        }
        dev.cmd_copy_buffer(
            cb,
            up,
            d,
            &[vk::BufferCopy {
                src_offset: 0,
                dst_offset: 0,
                size: bytes,
            }],
        );
        barrier(
            A::TRANSFER_WRITE,
            A::SHADER_READ | A::SHADER_WRITE,
            S::TRANSFER,
            S::COMPUTE_SHADER,
        );
        dev.cmd_execute_commands(cb, &[sec]);
        barrier(
            A::SHADER_WRITE,
            A::TRANSFER_READ | A::TRANSFER_WRITE,
            S::COMPUTE_SHADER,
            S::TRANSFER,
        );
        dev.cmd_copy_buffer(
            cb,
            d,
            down,
            &[vk::BufferCopy {
                src_offset: 0,
                dst_offset: 0,
                size: bytes,
            }],
        );
        barrier(A::TRANSFER_WRITE, A::HOST_READ, S::TRANSFER, S::HOST);
        dev.end_command_buffer(cb)
            .map_err(err("vkEndCommandBuffer"))?;
        let cbs = [cb];
        dev.queue_submit(
            queue,
            &[vk::SubmitInfo::default().command_buffers(&cbs)],
            fence,
        )
        .map_err(err("vkQueueSubmit"))?;
        dev.wait_for_fences(&[fence], true, u64::MAX)
            .map_err(err("vkWaitForFences"))?;
        dev.reset_fences(&[fence]).map_err(err("vkResetFences"))?;
        for i in 0..n {
            let v = *down_p.add(i);
            let want = pattern(i, input)
                .wrapping_mul(3)
                .wrapping_add(key(i % LOCAL as usize));
            if v != want {
                mismatches += 1;
            }
            for b in v.to_le_bytes() {
                hash = (hash ^ b as u64).wrapping_mul(0x100000001b3);
            }
        }
    }
    dev.destroy_fence(fence, None);
    dev.destroy_command_pool(pool, None);
    dev.destroy_pipeline(pipeline, None);
    dev.destroy_shader_module(module, None);
    dev.destroy_descriptor_update_template(template, None);
    dev.destroy_descriptor_pool(dpool, None);
    dev.destroy_pipeline_layout(pipe_layout, None);
    dev.destroy_descriptor_set_layout(set_layout, None);
    dev.destroy_buffer_view(view, None);
    for (b, m) in [(up, up_mem), (kup, kup_mem), (down, down_mem)] {
        dev.unmap_memory(m);
        dev.destroy_buffer(b, None);
        dev.free_memory(m, None);
    }
    for (b, m) in [(d, d_mem), (k, k_mem)] {
        dev.destroy_buffer(b, None);
        dev.free_memory(m, None);
    }
    dev.destroy_device(None);
    instance.destroy_instance(None);
    println!(
        "{}",
        json!({"checksum": format!("{hash:016x}"), "mismatches": mismatches})
    );
    Ok(())
}
