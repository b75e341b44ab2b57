//! echo-block: sub-allocated staging, the suballoc sample's layout made small and checkable, so
//! tests can force every fallback of a device allocation echo makes only in part (issue 14,
//! `enforce/alias/window.rs`).
//!
//! Device block `D` (never mapped): a 256-byte parameter buffer `params` at 0, `d_in` at 4096,
//! `d_out` after it. Staging block `H` (mapped whole): a 256-byte header at 0, `h_in` at 4096,
//! `h_out` after it. Each iteration the host writes `h_in`; the GPU writes `params`
//! (vkCmdUpdateBuffer), copies `h_in → d_in → d_out`, `params` over the start of `d_out`, and
//! `d_out → h_out`; the host checks `h_out`.
//!
//! `ECHO_BLOCK_SURPRISE` (an environment variable, so a plan profiled without it still applies),
//! after the loop:
//! - `bind-window`: a new 256-byte buffer bound at 0 of `D` (over `params`) must read its bytes;
//! - `bind-outside`: `d_out` destroyed, a new buffer bound at its offset must read its last bytes;
//! - `bind-across`: `params` destroyed, a new buffer over `[0, end of d_in)` must read the last
//!   parameters and `d_in`'s last bytes;
//! - `map-window`: `D`'s first 256 bytes mapped: the last parameters are there; new bytes
//!   written through the map reach `params`;
//! - `map-outside`: `d_out`'s range of `D` mapped: its last bytes are there;
//! - `map-across`: all of `D` mapped; a `VK_ERROR_MEMORY_MAP_FAILED` is reported
//!   (`"map_failed": true`), then the two parts are mapped one after the other and checked.
//!
//! `--no-params`: no parameter buffer: every buffer in `D` is a device buffer of a group, so
//! none of `D` need be made (the surprises that use `params` are refused).
//!
//! `ECHO_BLOCK_EXPORT=1`: `D` is allocated exportable (`VkExportMemoryAllocateInfo`, opaque fd)
//! and exported after the loop (`vkGetMemoryFdKHR`). `ECHO_BLOCK_EXPORT=unforeseen`: the device
//! enables `VK_KHR_external_memory_fd` but `D` is allocated as usual, and `vkGetMemoryFdKHR` of it
//! is called anyway (invalid usage: what the driver answers is reported as `"export"`).
//!
//! Prints one JSON line: `{"checksum": "<hex>", "mismatches": N, "map_failed": bool}`.

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

/// The parameters of iteration `it` (64 words).
fn param(i: usize, it: u32) -> u32 {
    0x5000_0000 | (it << 8) | i as u32
}

const P: u64 = 256;
const AT: u64 = 4096;

fn main() {
    let iters: u32 = arg("--iters", "3").parse().expect("--iters N");
    let bytes: u64 = arg("--kib", "64").parse::<u64>().expect("--kib N") * 1024;
    let surprise = std::env::var("ECHO_BLOCK_SURPRISE").unwrap_or_default();
    let export = std::env::var("ECHO_BLOCK_EXPORT").unwrap_or_default();
    let with_params = !std::env::args().any(|a| a == "--no-params");
    if let Err(e) = unsafe { run(iters, bytes, &surprise, &export, with_params) } {
        eprintln!("echo-block: {e}");
        std::process::exit(1);
    }
}

unsafe fn run(
    iters: u32,
    bytes: u64,
    surprise: &str,
    export_mode: &str,
    with_params: bool,
) -> Result<(), String> {
    let export = export_mode == "1";
    let unforeseen = export_mode == "unforeseen";
    if !with_params && !matches!(surprise, "" | "bind-outside" | "map-outside") {
        return Err(format!("{surprise} needs the parameter buffer"));
    }
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
    let exts = [c"VK_KHR_external_memory_fd".as_ptr()];
    let mut dinfo = vk::DeviceCreateInfo::default().queue_create_infos(&qinfo);
    if export || unforeseen {
        dinfo = dinfo.enabled_extension_names(&exts);
    }
    let dev = instance
        .create_device(pd, &dinfo, None)
        .map_err(|e| format!("vkCreateDevice: {e}"))?;

    use vk::AccessFlags as A;
    use vk::BufferUsageFlags as U;
    use vk::MemoryPropertyFlags as F;
    use vk::PipelineStageFlags as S;
    let create = |size: u64, usage: U| {
        dev.create_buffer(
            &vk::BufferCreateInfo::default().size(size).usage(usage),
            None,
        )
        .map_err(|e| format!("vkCreateBuffer: {e}"))
    };
    // The device block's buffers, exportable with it when it is.
    let create_d = |size: u64, usage: U| {
        let mut ext = vk::ExternalMemoryBufferCreateInfo::default()
            .handle_types(vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD);
        let mut info = vk::BufferCreateInfo::default().size(size).usage(usage);
        if export {
            info = info.push_next(&mut ext);
        }
        dev.create_buffer(&info, None)
            .map_err(|e| format!("vkCreateBuffer: {e}"))
    };
    let ty_of = |want: F| {
        (0..mem.memory_type_count)
            .find(|&i| mem.memory_types[i as usize].property_flags.contains(want))
            .ok_or("no memory type")
    };
    let size = AT + 2 * bytes;
    let mut export_info = vk::ExportMemoryAllocateInfo::default()
        .handle_types(vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD);
    let mut dalloc = vk::MemoryAllocateInfo::default()
        .allocation_size(size)
        .memory_type_index(ty_of(F::DEVICE_LOCAL)?);
    if export {
        dalloc = dalloc.push_next(&mut export_info);
    }
    let d_mem = dev
        .allocate_memory(&dalloc, None)
        .map_err(|e| format!("vkAllocateMemory: {e}"))?;
    let bind = |b: vk::Buffer, m: vk::DeviceMemory, at: u64| {
        dev.bind_buffer_memory(b, m, at)
            .map_err(|e| format!("vkBindBufferMemory at {at}: {e}"))
    };
    let params = create_d(P, U::TRANSFER_DST | U::TRANSFER_SRC)?;
    if with_params {
        bind(params, d_mem, 0)?;
    }
    let d_in = create_d(bytes, U::TRANSFER_DST | U::TRANSFER_SRC)?;
    bind(d_in, d_mem, AT)?;
    let d_out = create_d(bytes, U::TRANSFER_DST | U::TRANSFER_SRC)?;
    bind(d_out, d_mem, AT + bytes)?;
    let hv = F::HOST_VISIBLE | F::HOST_COHERENT;
    let h_mem = dev
        .allocate_memory(
            &vk::MemoryAllocateInfo::default()
                .allocation_size(size)
                .memory_type_index(ty_of(hv)?),
            None,
        )
        .map_err(|e| format!("vkAllocateMemory: {e}"))?;
    let h_p = dev
        .map_memory(h_mem, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
        .map_err(|e| format!("vkMapMemory: {e}"))? as *mut u8;
    let header = create(P, U::TRANSFER_SRC)?;
    bind(header, h_mem, 0)?;
    let h_in = create(bytes, U::TRANSFER_SRC)?;
    bind(h_in, h_mem, AT)?;
    let h_out = create(bytes, U::TRANSFER_DST)?;
    bind(h_out, h_mem, AT + bytes)?;
    let in_p = h_p.add(AT as usize) as *mut u32;
    let out_p = h_p.add((AT + bytes) as usize) as *const u32;

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
    let barrier = |cb, src: A, dst: A, s: S, t: S| {
        let mb = [vk::MemoryBarrier::default()
            .src_access_mask(src)
            .dst_access_mask(dst)];
        dev.cmd_pipeline_barrier(cb, s, t, vk::DependencyFlags::empty(), &mb, &[], &[]);
    };
    // Records `f`, a transfer → host barrier, submits, waits.
    let once = |f: &dyn Fn(vk::CommandBuffer)| -> Result<(), String> {
        dev.reset_command_buffer(cb, vk::CommandBufferResetFlags::empty())
            .map_err(|e| format!("{e}"))?;
        dev.begin_command_buffer(cb, &vk::CommandBufferBeginInfo::default())
            .map_err(|e| format!("{e}"))?;
        f(cb);
        barrier(cb, A::TRANSFER_WRITE, A::HOST_READ, S::TRANSFER, S::HOST);
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
    let n = (bytes / 4) as usize;
    let pw = (P / 4) as usize;
    let mut hash: u64 = 0xcbf29ce484222325;
    let mut mismatches = 0u64;
    let mut fold = |v: u32, want: u32| {
        if v != want {
            mismatches += 1;
        }
        for b in v.to_le_bytes() {
            hash = (hash ^ b as u64).wrapping_mul(0x100000001b3);
        }
    };
    // The output of iteration `it`: the parameters over the start of the input.
    let out = |i: usize, it: u32| {
        if i < pw && with_params {
            param(i, it)
        } else {
            pattern(i, it)
        }
    };
    let whole = |len: u64| [vk::BufferCopy::default().size(len)];
    for it in 0..iters {
        for i in 0..n {
            *in_p.add(i) = pattern(i, it);
        }
        let words: Vec<u32> = (0..pw).map(|i| param(i, it)).collect();
        let pbytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        once(&|cb| {
            if with_params {
                dev.cmd_update_buffer(cb, params, 0, &pbytes);
            }
            dev.cmd_copy_buffer(cb, h_in, d_in, &whole(bytes));
            barrier(
                cb,
                A::TRANSFER_WRITE,
                A::TRANSFER_READ,
                S::TRANSFER,
                S::TRANSFER,
            );
            dev.cmd_copy_buffer(cb, d_in, d_out, &whole(bytes));
            barrier(
                cb,
                A::TRANSFER_WRITE,
                A::TRANSFER_WRITE,
                S::TRANSFER,
                S::TRANSFER,
            );
            if with_params {
                dev.cmd_copy_buffer(cb, params, d_out, &whole(P));
            }
            barrier(
                cb,
                A::TRANSFER_WRITE,
                A::TRANSFER_READ,
                S::TRANSFER,
                S::TRANSFER,
            );
            dev.cmd_copy_buffer(cb, d_out, h_out, &whole(bytes));
        })?;
        for i in 0..n {
            fold(*out_p.add(i), out(i, it));
        }
    }
    let last = iters.saturating_sub(1);
    // A host-visible buffer of its own to read results through (no plan names it).
    let check_size = AT + bytes;
    let check = create(check_size, U::TRANSFER_DST)?;
    let check_mem = dev
        .allocate_memory(
            &vk::MemoryAllocateInfo::default()
                .allocation_size(dev.get_buffer_memory_requirements(check).size)
                .memory_type_index(ty_of(hv)?),
            None,
        )
        .map_err(|e| format!("vkAllocateMemory: {e}"))?;
    bind(check, check_mem, 0)?;
    let check_p = dev
        .map_memory(check_mem, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
        .map_err(|e| format!("vkMapMemory: {e}"))? as *const u32;
    let map_d = |at: u64, len: u64| {
        dev.map_memory(d_mem, at, len, vk::MemoryMapFlags::empty())
            .map(|p| p as *mut u32)
    };
    let mut alive = (true, true); // params, d_out
    let mut map_failed = false;
    match surprise {
        "" => {}
        "bind-window" => {
            let y = create(P, U::TRANSFER_SRC)?;
            bind(y, d_mem, 0)?;
            once(&|cb| dev.cmd_copy_buffer(cb, y, check, &whole(P)))?;
            for i in 0..pw {
                fold(*check_p.add(i), param(i, last));
            }
            dev.destroy_buffer(y, None);
        }
        "bind-outside" => {
            dev.destroy_buffer(d_out, None);
            alive.1 = false;
            let x = create(bytes, U::TRANSFER_SRC)?;
            bind(x, d_mem, AT + bytes)?;
            once(&|cb| dev.cmd_copy_buffer(cb, x, check, &whole(bytes)))?;
            for i in 0..n {
                fold(*check_p.add(i), out(i, last));
            }
            dev.destroy_buffer(x, None);
        }
        "bind-across" => {
            dev.destroy_buffer(params, None);
            alive.0 = false;
            let z = create(AT + bytes, U::TRANSFER_SRC)?;
            bind(z, d_mem, 0)?;
            once(&|cb| dev.cmd_copy_buffer(cb, z, check, &whole(AT + bytes)))?;
            for i in 0..pw {
                fold(*check_p.add(i), param(i, last));
            }
            let at = (AT / 4) as usize;
            for i in 0..n {
                fold(*check_p.add(at + i), pattern(i, last));
            }
            dev.destroy_buffer(z, None);
        }
        "map-window" => {
            let p = map_d(0, P).map_err(|e| format!("vkMapMemory of the window: {e}"))?;
            for i in 0..pw {
                fold(*p.add(i), param(i, last));
                *p.add(i) = param(i, 77);
            }
            dev.unmap_memory(d_mem);
            once(&|cb| dev.cmd_copy_buffer(cb, params, check, &whole(P)))?;
            for i in 0..pw {
                fold(*check_p.add(i), param(i, 77));
            }
        }
        "map-outside" => {
            let p = map_d(AT + bytes, bytes).map_err(|e| format!("vkMapMemory of d_out: {e}"))?;
            for i in 0..n {
                fold(*p.add(i), out(i, last));
            }
            dev.unmap_memory(d_mem);
        }
        "map-across" => {
            match map_d(0, vk::WHOLE_SIZE) {
                Ok(_) => dev.unmap_memory(d_mem),
                Err(vk::Result::ERROR_MEMORY_MAP_FAILED) => map_failed = true,
                Err(e) => return Err(format!("vkMapMemory of all of D: {e}")),
            }
            // The parts one after the other.
            let p = map_d(0, P).map_err(|e| format!("vkMapMemory of the window: {e}"))?;
            for i in 0..pw {
                fold(*p.add(i), param(i, last));
            }
            dev.unmap_memory(d_mem);
            let p = map_d(AT + bytes, bytes).map_err(|e| format!("vkMapMemory of d_out: {e}"))?;
            for i in 0..n {
                fold(*p.add(i), out(i, last));
            }
            dev.unmap_memory(d_mem);
        }
        s => return Err(format!("unknown ECHO_BLOCK_SURPRISE {s}")),
    }
    let mut exported = String::new();
    if unforeseen {
        let fd_dev = ash::khr::external_memory_fd::Device::new(&instance, &dev);
        exported = match fd_dev.get_memory_fd(
            &vk::MemoryGetFdInfoKHR::default()
                .memory(d_mem)
                .handle_type(vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD),
        ) {
            Ok(fd) if fd >= 0 => {
                libc::close(fd);
                "an fd".into()
            }
            Ok(fd) => format!("fd {fd}"),
            Err(e) => format!("{e}"),
        };
    }
    if export {
        let fd_dev = ash::khr::external_memory_fd::Device::new(&instance, &dev);
        let fd = fd_dev
            .get_memory_fd(
                &vk::MemoryGetFdInfoKHR::default()
                    .memory(d_mem)
                    .handle_type(vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD),
            )
            .map_err(|e| format!("vkGetMemoryFdKHR: {e}"))?;
        if fd < 0 {
            return Err(format!("vkGetMemoryFdKHR gave fd {fd}"));
        }
        libc::close(fd);
    }
    dev.destroy_buffer(check, None);
    dev.free_memory(check_mem, None);
    dev.destroy_fence(fence, None);
    dev.destroy_command_pool(pool, None);
    dev.destroy_buffer(header, None);
    dev.destroy_buffer(h_in, None);
    dev.destroy_buffer(h_out, None);
    dev.destroy_buffer(d_in, None);
    if alive.0 {
        dev.destroy_buffer(params, None);
    }
    if alive.1 {
        dev.destroy_buffer(d_out, None);
    }
    dev.unmap_memory(h_mem);
    dev.free_memory(h_mem, None);
    dev.free_memory(d_mem, None);
    dev.destroy_device(None);
    instance.destroy_instance(None);
    println!(
        "{}",
        json!({"checksum": format!("{hash:016x}"), "mismatches": mismatches, "map_failed": map_failed, "export": exported})
    );
    Ok(())
}
