//! echo-order: a staging round trip (upload `up` → device buffer `d` → readback `down`) whose
//! binds, maps and frees happen in an order chosen on the command line, so tests can drive
//! enforce mode's deferred binds and deferred frees (tests/tests/enforce.rs).
//!
//! `--order normal`: d is allocated and bound first, then the staging buffers (allocate, map, bind).
//! `--order host-late`: both staging buffers are bound before d has memory (enforce holds their
//!   binds back until d is bound), and mapped only after that.
//! `--order free-early`: as normal, but after the loop d is destroyed and its memory freed before
//!   the result is read through `down`'s mapping (enforce must defer that free: `down` lives in it).
//! `--order map-early`: `up` is bound and mapped (and written) before d has memory, so enforce
//!   binds it as asked at that first use.
//!
//! Prints one JSON line: `{"checksum": "<hex>", "mismatches": N}`.

use ash::vk;
use serde_json::json;

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

fn main() {
    let order = arg("--order", "normal");
    let iters: u32 = arg("--iters", "3").parse().expect("--iters N");
    let bytes: u64 = arg("--kib", "64").parse::<u64>().expect("--kib N") * 1024;
    if let Err(e) = unsafe { run(&order, iters, bytes) } {
        eprintln!("echo-order: {e}");
        std::process::exit(1);
    }
}

unsafe fn run(order: &str, iters: u32, bytes: u64) -> Result<(), String> {
    let entry = ash::Entry::load().map_err(|e| format!("loader: {e}"))?;
    let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_1);
    let instance = entry
        .create_instance(
            &vk::InstanceCreateInfo::default().application_info(&app),
            None,
        )
        .map_err(|e| format!("vkCreateInstance: {e}"))?;
    let pd = *instance
        .enumerate_physical_devices()
        .map_err(|e| format!("{e}"))?
        .first()
        .ok_or("no physical device")?;
    let mem = instance.get_physical_device_memory_properties(pd);
    let prio = [1.0f32];
    let qinfo = [vk::DeviceQueueCreateInfo::default()
        .queue_family_index(0)
        .queue_priorities(&prio)];
    let dev = instance
        .create_device(
            pd,
            &vk::DeviceCreateInfo::default().queue_create_infos(&qinfo),
            None,
        )
        .map_err(|e| format!("vkCreateDevice: {e}"))?;

    use vk::BufferUsageFlags as U;
    use vk::MemoryPropertyFlags as F;
    let create = |usage: U| {
        dev.create_buffer(
            &vk::BufferCreateInfo::default().size(bytes).usage(usage),
            None,
        )
        .map_err(|e| format!("vkCreateBuffer: {e}"))
    };
    let alloc = |b: vk::Buffer, want: F| -> Result<vk::DeviceMemory, String> {
        let req = dev.get_buffer_memory_requirements(b);
        let ty = (0..mem.memory_type_count)
            .find(|&i| {
                req.memory_type_bits & (1 << i) != 0
                    && mem.memory_types[i as usize].property_flags.contains(want)
            })
            .ok_or("no memory type")?;
        dev.allocate_memory(
            &vk::MemoryAllocateInfo::default()
                .allocation_size(req.size)
                .memory_type_index(ty),
            None,
        )
        .map_err(|e| format!("vkAllocateMemory: {e}"))
    };
    let map = |m: vk::DeviceMemory| -> Result<*mut u32, String> {
        dev.map_memory(m, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
            .map(|p| p as *mut u32)
            .map_err(|e| format!("vkMapMemory: {e}"))
    };
    let bind = |b: vk::Buffer, m: vk::DeviceMemory| {
        dev.bind_buffer_memory(b, m, 0)
            .map_err(|e| format!("vkBindBufferMemory: {e}"))
    };
    let hv = F::HOST_VISIBLE | F::HOST_COHERENT;
    let n = (bytes / 4) as usize;

    let d = create(U::TRANSFER_SRC | U::TRANSFER_DST | U::STORAGE_BUFFER)?;
    let up = create(U::TRANSFER_SRC)?;
    let down = create(U::TRANSFER_DST)?;
    let (d_mem, up_mem, down_mem, up_p, down_p);
    match order {
        "host-late" => {
            up_mem = alloc(up, hv)?;
            bind(up, up_mem)?;
            down_mem = alloc(down, hv)?;
            bind(down, down_mem)?;
            d_mem = alloc(d, F::DEVICE_LOCAL)?;
            bind(d, d_mem)?;
            up_p = map(up_mem)?;
            down_p = map(down_mem)?;
        }
        "map-early" => {
            up_mem = alloc(up, hv)?;
            bind(up, up_mem)?;
            up_p = map(up_mem)?;
            up_p.write_bytes(0xa5, n); // written before the device buffer has memory
            d_mem = alloc(d, F::DEVICE_LOCAL)?;
            bind(d, d_mem)?;
            down_mem = alloc(down, hv)?;
            down_p = map(down_mem)?;
            bind(down, down_mem)?;
        }
        "normal" | "free-early" => {
            d_mem = alloc(d, F::DEVICE_LOCAL)?;
            bind(d, d_mem)?;
            up_mem = alloc(up, hv)?;
            up_p = map(up_mem)?;
            bind(up, up_mem)?;
            down_mem = alloc(down, hv)?;
            down_p = map(down_mem)?;
            bind(down, down_mem)?;
        }
        o => return Err(format!("unknown --order {o}")),
    }

    let pool = dev
        .create_command_pool(
            &vk::CommandPoolCreateInfo::default()
                .queue_family_index(0)
                .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER),
            None,
        )
        .map_err(|e| format!("{e}"))?;
    let cb = dev
        .allocate_command_buffers(
            &vk::CommandBufferAllocateInfo::default()
                .command_pool(pool)
                .command_buffer_count(1),
        )
        .map_err(|e| format!("{e}"))?[0];
    let fence = dev
        .create_fence(&vk::FenceCreateInfo::default(), None)
        .map_err(|e| format!("{e}"))?;
    let queue = dev.get_device_queue(0, 0);
    let region = [vk::BufferCopy {
        src_offset: 0,
        dst_offset: 0,
        size: bytes,
    }];
    let barrier = |src: vk::AccessFlags, dst: vk::AccessFlags, s: vk::PipelineStageFlags, t| {
        let mb = [vk::MemoryBarrier::default()
            .src_access_mask(src)
            .dst_access_mask(dst)];
        dev.cmd_pipeline_barrier(cb, s, t, vk::DependencyFlags::empty(), &mb, &[], &[]);
    };
    use vk::AccessFlags as A;
    use vk::PipelineStageFlags as S;
    let mut hash: u64 = 0xcbf29ce484222325;
    let mut mismatches = 0u64;
    for it in 0..iters {
        for i in 0..n {
            *up_p.add(i) = pattern(i, it);
        }
        dev.reset_command_buffer(cb, vk::CommandBufferResetFlags::empty())
            .map_err(|e| format!("{e}"))?;
        dev.begin_command_buffer(cb, &vk::CommandBufferBeginInfo::default())
            .map_err(|e| format!("{e}"))?;
        dev.cmd_copy_buffer(cb, up, d, &region);
        barrier(
            A::TRANSFER_WRITE,
            A::TRANSFER_READ,
            S::TRANSFER,
            S::TRANSFER,
        );
        dev.cmd_copy_buffer(cb, d, down, &region);
        barrier(A::TRANSFER_WRITE, A::HOST_READ, S::TRANSFER, S::HOST);
        dev.end_command_buffer(cb).map_err(|e| format!("{e}"))?;
        let cbs = [cb];
        dev.queue_submit(
            queue,
            &[vk::SubmitInfo::default().command_buffers(&cbs)],
            fence,
        )
        .map_err(|e| format!("{e}"))?;
        dev.wait_for_fences(&[fence], true, u64::MAX)
            .map_err(|e| format!("{e}"))?;
        dev.reset_fences(&[fence]).map_err(|e| format!("{e}"))?;
        if order == "free-early" && it + 1 == iters {
            // The device buffer and its memory go away before the result is read.
            dev.destroy_buffer(d, None);
            dev.free_memory(d_mem, None);
        }
        for i in 0..n {
            let v = *down_p.add(i);
            if v != pattern(i, it) {
                mismatches += 1;
            }
            for b in v.to_le_bytes() {
                hash = (hash ^ b as u64).wrapping_mul(0x100000001b3);
            }
        }
    }
    dev.destroy_fence(fence, None);
    dev.destroy_command_pool(pool, None);
    dev.unmap_memory(up_mem);
    dev.unmap_memory(down_mem);
    dev.destroy_buffer(up, None);
    dev.destroy_buffer(down, None);
    dev.free_memory(up_mem, None);
    dev.free_memory(down_mem, None);
    if order != "free-early" {
        dev.destroy_buffer(d, None);
        dev.free_memory(d_mem, None);
    }
    dev.destroy_device(None);
    instance.destroy_instance(None);
    println!(
        "{}",
        json!({"checksum": format!("{hash:016x}"), "mismatches": mismatches})
    );
    Ok(())
}
