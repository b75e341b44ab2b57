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
//! `--slack-kib N` (default 0): every allocation is N KiB larger than its buffer needs, and the
//! staging allocations are mapped over their buffer's bytes only (not `VK_WHOLE_SIZE`).
//!
//! Uses a plan cannot foresee (issue 14), chosen by the environment variable
//! `ECHO_ORDER_SURPRISE` — not an argument, so a plan profiled without it still applies:
//! after the loop, `rebind` unmaps `down`'s allocation, destroys `down` and binds a new buffer into
//! that allocation, then checks through the GPU that it holds `down`'s last bytes, writes new
//! bytes through a new map and checks those too; `image` destroys `down`, binds a linear image into
//! its allocation, clears it and reads it back; `map-outside` (with `--slack-kib`) maps the slack
//! of `down`'s allocation, writes it, maps it again to read it back, and reads `down`'s bytes
//! through a map of its own range; `guard-wait` submits a copy d → check that waits for a host-set
//! event, writes the next input into `up`, submits its upload and only then sets the event (the
//! read must see the last iteration's input: guarded enforce's bounded wait before its merge);
//! `guard-foreign` binds a buffer no plan names over d, writes it through a map of d's memory
//! while a copy out of it is pending, and copies it out again.
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
    let slack: u64 = arg("--slack-kib", "0")
        .parse::<u64>()
        .expect("--slack-kib N")
        * 1024;
    let surprise = std::env::var("ECHO_ORDER_SURPRISE").unwrap_or_default();
    if let Err(e) = unsafe { run(&order, iters, bytes, slack, &surprise) } {
        eprintln!("echo-order: {e}");
        std::process::exit(1);
    }
}

unsafe fn run(
    order: &str,
    iters: u32,
    bytes: u64,
    slack: u64,
    surprise: &str,
) -> Result<(), String> {
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
                .allocation_size(req.size + slack)
                .memory_type_index(ty),
            None,
        )
        .map_err(|e| format!("vkAllocateMemory: {e}"))
    };
    let map_size = if slack > 0 { bytes } else { vk::WHOLE_SIZE };
    let map = |m: vk::DeviceMemory| -> Result<*mut u32, String> {
        dev.map_memory(m, 0, map_size, vk::MemoryMapFlags::empty())
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
    let mut fold = |v: u32, want: u32| {
        if v != want {
            mismatches += 1;
        }
        for b in v.to_le_bytes() {
            hash = (hash ^ b as u64).wrapping_mul(0x100000001b3);
        }
    };
    let last = iters.saturating_sub(1);
    // A host-visible buffer of its own to read results through (no plan names it).
    let check = create(U::TRANSFER_DST)?;
    let check_mem = alloc(check, hv)?;
    bind(check, check_mem)?;
    let check_p = map(check_mem)?;
    // Records `f`, submits it, waits.
    let once = |f: &dyn Fn(vk::CommandBuffer)| -> Result<(), String> {
        dev.reset_command_buffer(cb, vk::CommandBufferResetFlags::empty())
            .map_err(|e| format!("{e}"))?;
        dev.begin_command_buffer(cb, &vk::CommandBufferBeginInfo::default())
            .map_err(|e| format!("{e}"))?;
        f(cb);
        let mb = [vk::MemoryBarrier::default()
            .src_access_mask(A::TRANSFER_WRITE)
            .dst_access_mask(A::HOST_READ)];
        dev.cmd_pipeline_barrier(
            cb,
            S::TRANSFER,
            S::HOST,
            vk::DependencyFlags::empty(),
            &mb,
            &[],
            &[],
        );
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
        dev.reset_fences(&[fence]).map_err(|e| format!("{e}"))
    };
    let mut down_alive = true;
    match surprise {
        "" => {}
        "rebind" => {
            // The readback buffer goes; a new buffer takes its allocation and must find its bytes.
            dev.unmap_memory(down_mem);
            dev.destroy_buffer(down, None);
            down_alive = false;
            let again = create(U::TRANSFER_SRC)?;
            bind(again, down_mem)?;
            once(&|cb| dev.cmd_copy_buffer(cb, again, check, &region))?;
            for i in 0..n {
                fold(*check_p.add(i), pattern(i, last));
            }
            // New bytes through a new map reach the new buffer.
            let p = map(down_mem)?;
            for i in 0..n {
                *p.add(i) = pattern(i, 1000);
            }
            dev.unmap_memory(down_mem);
            once(&|cb| dev.cmd_copy_buffer(cb, again, check, &region))?;
            for i in 0..n {
                fold(*check_p.add(i), pattern(i, 1000));
            }
            dev.destroy_buffer(again, None);
        }
        "image" => {
            dev.unmap_memory(down_mem);
            dev.destroy_buffer(down, None);
            down_alive = false;
            let (w, h) = (32u32, 32u32);
            let image = dev
                .create_image(
                    &vk::ImageCreateInfo::default()
                        .image_type(vk::ImageType::TYPE_2D)
                        .format(vk::Format::R8G8B8A8_UINT)
                        .extent(vk::Extent3D {
                            width: w,
                            height: h,
                            depth: 1,
                        })
                        .mip_levels(1)
                        .array_layers(1)
                        .samples(vk::SampleCountFlags::TYPE_1)
                        .tiling(vk::ImageTiling::LINEAR)
                        .usage(
                            vk::ImageUsageFlags::TRANSFER_SRC | vk::ImageUsageFlags::TRANSFER_DST,
                        )
                        .initial_layout(vk::ImageLayout::UNDEFINED),
                    None,
                )
                .map_err(|e| format!("vkCreateImage: {e}"))?;
            let req = dev.get_image_memory_requirements(image);
            if req.size > bytes {
                return Err(format!("the image needs {} bytes", req.size));
            }
            dev.bind_image_memory(image, down_mem, 0)
                .map_err(|e| format!("vkBindImageMemory: {e}"))?;
            let range = vk::ImageSubresourceRange {
                aspect_mask: vk::ImageAspectFlags::COLOR,
                level_count: 1,
                layer_count: 1,
                ..Default::default()
            };
            let layout = |cb, from, to, src, dst, s1, s2| {
                let b = [vk::ImageMemoryBarrier::default()
                    .old_layout(from)
                    .new_layout(to)
                    .src_access_mask(src)
                    .dst_access_mask(dst)
                    .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                    .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                    .image(image)
                    .subresource_range(range)];
                dev.cmd_pipeline_barrier(cb, s1, s2, vk::DependencyFlags::empty(), &[], &[], &b);
            };
            once(&|cb| {
                use vk::ImageLayout as L;
                layout(
                    cb,
                    L::UNDEFINED,
                    L::TRANSFER_DST_OPTIMAL,
                    A::empty(),
                    A::TRANSFER_WRITE,
                    S::TOP_OF_PIPE,
                    S::TRANSFER,
                );
                let color = vk::ClearColorValue {
                    uint32: [1, 2, 3, 4],
                };
                dev.cmd_clear_color_image(cb, image, L::TRANSFER_DST_OPTIMAL, &color, &[range]);
                layout(
                    cb,
                    L::TRANSFER_DST_OPTIMAL,
                    L::TRANSFER_SRC_OPTIMAL,
                    A::TRANSFER_WRITE,
                    A::TRANSFER_READ,
                    S::TRANSFER,
                    S::TRANSFER,
                );
                let copy = vk::BufferImageCopy {
                    image_subresource: vk::ImageSubresourceLayers {
                        aspect_mask: vk::ImageAspectFlags::COLOR,
                        layer_count: 1,
                        ..Default::default()
                    },
                    image_extent: vk::Extent3D {
                        width: w,
                        height: h,
                        depth: 1,
                    },
                    ..Default::default()
                };
                dev.cmd_copy_image_to_buffer(cb, image, L::TRANSFER_SRC_OPTIMAL, check, &[copy]);
            })?;
            for i in 0..(w * h) as usize {
                fold(*check_p.add(i), u32::from_le_bytes([1, 2, 3, 4]));
            }
            dev.destroy_image(image, None);
        }
        "map-outside" => {
            if slack == 0 {
                return Err("map-outside needs --slack-kib".into());
            }
            dev.unmap_memory(down_mem);
            let req = dev.get_buffer_memory_requirements(down);
            let words = (slack / 4) as usize;
            let tail = |s: u64| {
                dev.map_memory(down_mem, req.size, slack, vk::MemoryMapFlags::empty())
                    .map(|p| p as *mut u32)
                    .map_err(|e| format!("vkMapMemory of the slack ({s}): {e}"))
            };
            let p = tail(1)?;
            for i in 0..words {
                *p.add(i) = pattern(i, 2000);
            }
            dev.unmap_memory(down_mem);
            let p = tail(2)?;
            for i in 0..words {
                fold(*p.add(i), pattern(i, 2000));
            }
            dev.unmap_memory(down_mem);
            // down's own bytes are still its last readback.
            let p = map(down_mem)?;
            for i in 0..n {
                fold(*p.add(i), pattern(i, last));
            }
        }
        "guard-foreign" => {
            // A buffer no plan names is bound over d (aliasing it, as a program may) and written
            // through the program's own map of d's memory while a submission that reads it is
            // still pending; a later copy out of it must see those bytes.
            let extra = create(U::TRANSFER_SRC | U::TRANSFER_DST)?;
            bind(extra, d_mem)?;
            dev.reset_command_buffer(cb, vk::CommandBufferResetFlags::empty())
                .map_err(|e| format!("{e}"))?;
            dev.begin_command_buffer(cb, &vk::CommandBufferBeginInfo::default())
                .map_err(|e| format!("{e}"))?;
            dev.cmd_copy_buffer(cb, extra, check, &region);
            dev.end_command_buffer(cb).map_err(|e| format!("{e}"))?;
            let cbs = [cb];
            dev.queue_submit(
                queue,
                &[vk::SubmitInfo::default().command_buffers(&cbs)],
                fence,
            )
            .map_err(|e| format!("{e}"))?;
            let p = dev
                .map_memory(d_mem, 0, bytes, vk::MemoryMapFlags::empty())
                .map_err(|e| format!("vkMapMemory of d's memory: {e}"))?
                as *mut u32;
            let next = last + 1;
            for i in 0..n {
                *p.add(i) = pattern(i, next);
            }
            dev.wait_for_fences(&[fence], true, u64::MAX)
                .map_err(|e| format!("{e}"))?;
            dev.reset_fences(&[fence]).map_err(|e| format!("{e}"))?;
            dev.unmap_memory(d_mem);
            once(&|cb| dev.cmd_copy_buffer(cb, extra, check, &region))?;
            for i in 0..n {
                fold(*check_p.add(i), pattern(i, next));
            }
            dev.destroy_buffer(extra, None);
        }
        "guard-wait" => {
            // GPU work that waits for a host-set event reads d; meanwhile the host writes the
            // next input into `up` and submits its upload before setting the event. Guarded
            // enforce must merge that write at the upload, but the earlier read cannot finish
            // before the host continues: its bounded wait times out (reported), never hangs.
            let event = dev
                .create_event(&vk::EventCreateInfo::default(), None)
                .map_err(|e| format!("{e}"))?;
            let more = dev
                .allocate_command_buffers(
                    &vk::CommandBufferAllocateInfo::default()
                        .command_pool(pool)
                        .command_buffer_count(2),
                )
                .map_err(|e| format!("{e}"))?;
            let (read, upload) = (more[0], more[1]);
            let fence2 = dev
                .create_fence(&vk::FenceCreateInfo::default(), None)
                .map_err(|e| format!("{e}"))?;
            let host_read = [vk::MemoryBarrier::default()
                .src_access_mask(A::TRANSFER_WRITE)
                .dst_access_mask(A::HOST_READ)];
            let begin = vk::CommandBufferBeginInfo::default();
            dev.begin_command_buffer(read, &begin)
                .map_err(|e| format!("{e}"))?;
            let after_host = [vk::MemoryBarrier::default()
                .src_access_mask(A::HOST_WRITE)
                .dst_access_mask(A::TRANSFER_READ)];
            dev.cmd_wait_events(read, &[event], S::HOST, S::TRANSFER, &after_host, &[], &[]);
            dev.cmd_copy_buffer(read, d, check, &region);
            dev.cmd_pipeline_barrier(
                read,
                S::TRANSFER,
                S::HOST,
                vk::DependencyFlags::empty(),
                &host_read,
                &[],
                &[],
            );
            dev.end_command_buffer(read).map_err(|e| format!("{e}"))?;
            dev.begin_command_buffer(upload, &begin)
                .map_err(|e| format!("{e}"))?;
            dev.cmd_copy_buffer(upload, up, d, &region);
            dev.cmd_pipeline_barrier(
                upload,
                S::TRANSFER,
                S::TRANSFER,
                vk::DependencyFlags::empty(),
                &[vk::MemoryBarrier::default()
                    .src_access_mask(A::TRANSFER_WRITE)
                    .dst_access_mask(A::TRANSFER_READ)],
                &[],
                &[],
            );
            dev.cmd_copy_buffer(upload, d, down, &region);
            dev.cmd_pipeline_barrier(
                upload,
                S::TRANSFER,
                S::HOST,
                vk::DependencyFlags::empty(),
                &host_read,
                &[],
                &[],
            );
            dev.end_command_buffer(upload).map_err(|e| format!("{e}"))?;
            let r = [read];
            dev.queue_submit(
                queue,
                &[vk::SubmitInfo::default().command_buffers(&r)],
                vk::Fence::null(),
            )
            .map_err(|e| format!("{e}"))?;
            let next = last + 1;
            for i in 0..n {
                *up_p.add(i) = pattern(i, next);
            }
            let u = [upload];
            dev.queue_submit(
                queue,
                &[vk::SubmitInfo::default().command_buffers(&u)],
                fence2,
            )
            .map_err(|e| format!("{e}"))?;
            dev.set_event(event).map_err(|e| format!("{e}"))?;
            dev.wait_for_fences(&[fence2], true, u64::MAX)
                .map_err(|e| format!("{e}"))?;
            // The read saw d before the upload: the last iteration's input.
            for i in 0..n {
                fold(*check_p.add(i), pattern(i, last));
            }
            for i in 0..n {
                fold(*down_p.add(i), pattern(i, next));
            }
            dev.destroy_fence(fence2, None);
            dev.destroy_event(event, None);
        }
        s => return Err(format!("unknown ECHO_ORDER_SURPRISE {s}")),
    }
    dev.destroy_buffer(check, None);
    dev.free_memory(check_mem, None);
    dev.destroy_fence(fence, None);
    dev.destroy_command_pool(pool, None);
    dev.unmap_memory(up_mem);
    if down_alive {
        dev.unmap_memory(down_mem);
    }
    dev.destroy_buffer(up, None);
    if down_alive {
        dev.destroy_buffer(down, None);
    }
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
