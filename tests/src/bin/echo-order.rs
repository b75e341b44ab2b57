//! echo-order: a staging round trip (upload `up` → device buffer `d` → readback `down`) whose
//! binds, maps and frees happen in an order chosen on the command line, so tests can drive
//! enforce mode's deferred binds and deferred frees (tests/tests/enforce.rs).
//!
//! `--order normal`: d is allocated and bound first, then the staging buffers (allocate, map, bind).
//! `--order host-late`: both staging buffers are bound before d has memory (enforce holds their
//!   binds back until d is bound), and mapped only after that.
//! `--order free-early`: as normal, but after the loop d is destroyed and its memory freed before
//!   the result is read through `down`'s mapping (enforce must defer that free: `down` lives in it).
//! `--order map-early`: `up` is bound and mapped (and written) before d has memory, and stays
//!   mapped, so enforce cannot serve that mapping from d's memory: the analysis refuses `up`
//!   (`compat_mapped`, issue 36) and plans `down` alone.
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

fn vkerr(e: vk::Result) -> String {
    format!("{e}")
}

/// The FNV-1a hash of every word read back and the count of those that are not what was written.
struct Tally {
    hash: u64,
    mismatches: u64,
}

impl Tally {
    fn fold(&mut self, v: u32, want: u32) {
        if v != want {
            self.mismatches += 1;
        }
        for b in v.to_le_bytes() {
            self.hash = (self.hash ^ b as u64).wrapping_mul(0x100000001b3);
        }
    }

    /// Folds `words` words at `p`, each checked against [`pattern`]`(i, it)`.
    unsafe fn words(&mut self, p: *const u32, words: usize, it: u32) {
        for i in 0..words {
            self.fold(*p.add(i), pattern(i, it));
        }
    }
}

/// Writes [`pattern`]`(i, it)` into `words` words at `p`.
unsafe fn fill(p: *mut u32, words: usize, it: u32) {
    for i in 0..words {
        *p.add(i) = pattern(i, it);
    }
}

/// The three buffers, by their index in [`Step`]s.
const D: usize = 0;
const UP: usize = 1;
const DOWN: usize = 2;

/// What `--order` does before the loop, one step at a time.
#[derive(Clone, Copy)]
enum Step {
    /// Allocates the buffer's memory (d: device-local, the staging buffers: host-visible).
    Alloc(usize),
    Bind(usize),
    Map(usize),
    /// Writes `up` through its mapping (0xa5 bytes).
    Scribble,
}

fn steps(order: &str) -> Option<&'static [Step]> {
    use Step::*;
    Some(match order {
        "host-late" => &[
            Alloc(UP),
            Bind(UP),
            Alloc(DOWN),
            Bind(DOWN),
            Alloc(D),
            Bind(D),
            Map(UP),
            Map(DOWN),
        ],
        // `up` is written before the device buffer has memory.
        "map-early" => &[
            Alloc(UP),
            Bind(UP),
            Map(UP),
            Scribble,
            Alloc(D),
            Bind(D),
            Alloc(DOWN),
            Map(DOWN),
            Bind(DOWN),
        ],
        "normal" | "free-early" => &[
            Alloc(D),
            Bind(D),
            Alloc(UP),
            Map(UP),
            Bind(UP),
            Alloc(DOWN),
            Map(DOWN),
            Bind(DOWN),
        ],
        _ => return None,
    })
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
        .map_err(vkerr)?
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
    let bufs = [d, up, down];
    let mut mems = [vk::DeviceMemory::null(); 3];
    let mut ptrs = [std::ptr::null_mut::<u32>(); 3];
    for &step in steps(order).ok_or_else(|| format!("unknown --order {order}"))? {
        match step {
            Step::Alloc(b) => mems[b] = alloc(bufs[b], if b == D { F::DEVICE_LOCAL } else { hv })?,
            Step::Bind(b) => bind(bufs[b], mems[b])?,
            Step::Map(b) => ptrs[b] = map(mems[b])?,
            Step::Scribble => ptrs[UP].write_bytes(0xa5, n),
        }
    }
    let [d_mem, up_mem, down_mem] = mems;
    let [_, up_p, down_p] = ptrs;

    let pool = dev
        .create_command_pool(
            &vk::CommandPoolCreateInfo::default()
                .queue_family_index(0)
                .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER),
            None,
        )
        .map_err(vkerr)?;
    let cb = dev
        .allocate_command_buffers(
            &vk::CommandBufferAllocateInfo::default()
                .command_pool(pool)
                .command_buffer_count(1),
        )
        .map_err(vkerr)?[0];
    let fence = dev
        .create_fence(&vk::FenceCreateInfo::default(), None)
        .map_err(vkerr)?;
    let queue = dev.get_device_queue(0, 0);
    let region = [vk::BufferCopy {
        src_offset: 0,
        dst_offset: 0,
        size: bytes,
    }];
    use vk::AccessFlags as A;
    use vk::PipelineStageFlags as S;
    // A global memory barrier in `c`.
    let barrier = |c, src: A, dst: A, s: S, t: S| {
        let mb = [vk::MemoryBarrier::default()
            .src_access_mask(src)
            .dst_access_mask(dst)];
        dev.cmd_pipeline_barrier(c, s, t, vk::DependencyFlags::empty(), &mb, &[], &[]);
    };
    // Resets and begins `cb`.
    let begin = || -> Result<(), String> {
        dev.reset_command_buffer(cb, vk::CommandBufferResetFlags::empty())
            .map_err(vkerr)?;
        dev.begin_command_buffer(cb, &vk::CommandBufferBeginInfo::default())
            .map_err(vkerr)
    };
    let submit = |c: vk::CommandBuffer, f: vk::Fence| {
        let cbs = [c];
        dev.queue_submit(queue, &[vk::SubmitInfo::default().command_buffers(&cbs)], f)
            .map_err(vkerr)
    };
    // Waits for `fence` and resets it.
    let wait = || -> Result<(), String> {
        dev.wait_for_fences(&[fence], true, u64::MAX)
            .map_err(vkerr)?;
        dev.reset_fences(&[fence]).map_err(vkerr)
    };
    // Records `f` in `cb` and a barrier to the host's reads, submits it, waits.
    let once = |f: &dyn Fn(vk::CommandBuffer)| -> Result<(), String> {
        begin()?;
        f(cb);
        barrier(cb, A::TRANSFER_WRITE, A::HOST_READ, S::TRANSFER, S::HOST);
        dev.end_command_buffer(cb).map_err(vkerr)?;
        submit(cb, fence)?;
        wait()
    };
    let mut tally = Tally {
        hash: 0xcbf29ce484222325,
        mismatches: 0,
    };
    for it in 0..iters {
        fill(up_p, n, it);
        once(&|cb| {
            dev.cmd_copy_buffer(cb, up, d, &region);
            barrier(
                cb,
                A::TRANSFER_WRITE,
                A::TRANSFER_READ,
                S::TRANSFER,
                S::TRANSFER,
            );
            dev.cmd_copy_buffer(cb, d, down, &region);
        })?;
        if order == "free-early" && it + 1 == iters {
            // The device buffer and its memory go away before the result is read.
            dev.destroy_buffer(d, None);
            dev.free_memory(d_mem, None);
        }
        tally.words(down_p, n, it);
    }
    let last = iters.saturating_sub(1);
    // A host-visible buffer of its own to read results through (no plan names it).
    let check = create(U::TRANSFER_DST)?;
    let check_mem = alloc(check, hv)?;
    bind(check, check_mem)?;
    let check_p = map(check_mem)?;
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
            tally.words(check_p, n, last);
            // New bytes through a new map reach the new buffer.
            let p = map(down_mem)?;
            fill(p, n, 1000);
            dev.unmap_memory(down_mem);
            once(&|cb| dev.cmd_copy_buffer(cb, again, check, &region))?;
            tally.words(check_p, n, 1000);
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
                tally.fold(*check_p.add(i), u32::from_le_bytes([1, 2, 3, 4]));
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
            fill(p, words, 2000);
            dev.unmap_memory(down_mem);
            let p = tail(2)?;
            tally.words(p, words, 2000);
            dev.unmap_memory(down_mem);
            // down's own bytes are still its last readback.
            let p = map(down_mem)?;
            tally.words(p, n, last);
        }
        "guard-foreign" => {
            // A buffer no plan names is bound over d (aliasing it, as a program may) and written
            // through the program's own map of d's memory while a submission that reads it is
            // still pending; a later copy out of it must see those bytes.
            let extra = create(U::TRANSFER_SRC | U::TRANSFER_DST)?;
            bind(extra, d_mem)?;
            begin()?;
            dev.cmd_copy_buffer(cb, extra, check, &region);
            dev.end_command_buffer(cb).map_err(vkerr)?;
            submit(cb, fence)?;
            let p = dev
                .map_memory(d_mem, 0, bytes, vk::MemoryMapFlags::empty())
                .map_err(|e| format!("vkMapMemory of d's memory: {e}"))?
                as *mut u32;
            let next = last + 1;
            fill(p, n, next);
            wait()?;
            dev.unmap_memory(d_mem);
            once(&|cb| dev.cmd_copy_buffer(cb, extra, check, &region))?;
            tally.words(check_p, n, next);
            dev.destroy_buffer(extra, None);
        }
        "guard-wait" => {
            // GPU work that waits for a host-set event reads d; meanwhile the host writes the
            // next input into `up` and submits its upload before setting the event. Guarded
            // enforce must merge that write at the upload, but the earlier read cannot finish
            // before the host continues: its bounded wait times out (reported), never hangs.
            let event = dev
                .create_event(&vk::EventCreateInfo::default(), None)
                .map_err(vkerr)?;
            let more = dev
                .allocate_command_buffers(
                    &vk::CommandBufferAllocateInfo::default()
                        .command_pool(pool)
                        .command_buffer_count(2),
                )
                .map_err(vkerr)?;
            let (read, upload) = (more[0], more[1]);
            let fence2 = dev
                .create_fence(&vk::FenceCreateInfo::default(), None)
                .map_err(vkerr)?;
            let begin = vk::CommandBufferBeginInfo::default();
            dev.begin_command_buffer(read, &begin).map_err(vkerr)?;
            let after_host = [vk::MemoryBarrier::default()
                .src_access_mask(A::HOST_WRITE)
                .dst_access_mask(A::TRANSFER_READ)];
            dev.cmd_wait_events(read, &[event], S::HOST, S::TRANSFER, &after_host, &[], &[]);
            dev.cmd_copy_buffer(read, d, check, &region);
            barrier(read, A::TRANSFER_WRITE, A::HOST_READ, S::TRANSFER, S::HOST);
            dev.end_command_buffer(read).map_err(vkerr)?;
            dev.begin_command_buffer(upload, &begin).map_err(vkerr)?;
            dev.cmd_copy_buffer(upload, up, d, &region);
            barrier(
                upload,
                A::TRANSFER_WRITE,
                A::TRANSFER_READ,
                S::TRANSFER,
                S::TRANSFER,
            );
            dev.cmd_copy_buffer(upload, d, down, &region);
            barrier(
                upload,
                A::TRANSFER_WRITE,
                A::HOST_READ,
                S::TRANSFER,
                S::HOST,
            );
            dev.end_command_buffer(upload).map_err(vkerr)?;
            submit(read, vk::Fence::null())?;
            let next = last + 1;
            fill(up_p, n, next);
            submit(upload, fence2)?;
            dev.set_event(event).map_err(vkerr)?;
            dev.wait_for_fences(&[fence2], true, u64::MAX)
                .map_err(vkerr)?;
            // The read saw d before the upload: the last iteration's input.
            tally.words(check_p, n, last);
            tally.words(down_p, n, next);
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
        json!({"checksum": format!("{:016x}", tally.hash), "mismatches": tally.mismatches})
    );
    Ok(())
}
