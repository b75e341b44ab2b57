//! echo-bench-calls: the per-call cost of whatever layers are loaded, on the hot paths VK_LAYER_echo
//! hooks. Prints one JSON line with nanoseconds per call:
//!
//! - `create_destroy_ns`: one `vkCreateBuffer` + `vkDestroyBuffer` pair (64 KiB, transfer usage);
//! - `copy_record_ns`: one `vkCmdCopyBuffer` (one 256-byte region) while recording;
//! - `begin_end_ns`: one `vkBeginCommandBuffer` + `vkEndCommandBuffer` around those copies;
//! - `submit_wait_ns`: `vkQueueSubmit` of an empty command buffer with a fence, `vkWaitForFences`,
//!   `vkResetFences` — the submit-heavy loop the passthrough target (≤ 1 %) is stated on.
//!
//! Each figure is the median over `--batches` batches of the batch's mean. The bench runs this
//! program without the layer, with the layer in `mode=off` and in `mode=enforce`, interleaved.

// The bench's own median (of the finite values; the timings here are all finite).
#[path = "../stats.rs"]
#[allow(dead_code)]
mod stats;

use ash::vk;
use stats::median;
use std::time::Instant;

type Res<T> = Result<T, String>;

// C-string literals (c"..") need Rust 1.77; the workspace supports 1.75.
#[allow(clippy::manual_c_str_literals)]
const APP_NAME: &std::ffi::CStr = match std::ffi::CStr::from_bytes_with_nul(b"echo-bench-calls\0") {
    Ok(c) => c,
    Err(_) => panic!(),
};

fn vkerr(what: &'static str) -> impl Fn(vk::Result) -> String {
    move |e| format!("{what}: {e:?}")
}

/// Runs `batch()` (which does `per_batch` calls) `batches` times; ns per call, median of batches.
fn time(batches: u32, per_batch: u64, mut batch: impl FnMut() -> Res<()>) -> Res<f64> {
    batch()?; // warm-up: first-touch allocations, lazy driver state
    let mut v = Vec::new();
    for _ in 0..batches {
        let t = Instant::now();
        batch()?;
        v.push(t.elapsed().as_nanos() as f64 / per_batch as f64);
    }
    Ok(median(&v))
}

/// The per-call cost of the layer: create, record and submit loops, with and without echo.
#[derive(clap::Parser)]
#[command(name = "echo-bench-calls", version)]
struct Opts {
    /// Multiply the default loop counts (create 2000, record 20x1000 copies, submit 1000) by F
    #[arg(long, value_name = "F", default_value_t = 1.0, value_parser = positive)]
    scale: f64,
    /// Batches per loop; each figure is the median of the batch means
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    batches: u32,
}

fn positive(v: &str) -> Res<f64> {
    v.parse()
        .ok()
        .filter(|x: &f64| x.is_finite() && *x > 0.0)
        .ok_or(format!("needs a positive number, got '{v}'"))
}

fn parse() -> Res<Opts> {
    Ok(<Opts as clap::Parser>::parse())
}

fn main() {
    match parse().and_then(|o| unsafe { run(&o) }) {
        Ok(line) => println!("{line}"),
        Err(e) => {
            eprintln!("echo-bench-calls: {e}");
            std::process::exit(1);
        }
    }
}

unsafe fn run(o: &Opts) -> Res<String> {
    let n = |base: u64| ((base as f64 * o.scale).round() as u64).max(1);
    let (n_create, n_records, n_copies, n_submit) = (n(2000), n(20), 1000u64, n(1000));

    let entry = ash::Entry::load().map_err(|e| format!("cannot load the Vulkan loader: {e}"))?;
    let app = vk::ApplicationInfo::default()
        .application_name(APP_NAME)
        .api_version(vk::API_VERSION_1_1);
    let instance = entry
        .create_instance(
            &vk::InstanceCreateInfo::default().application_info(&app),
            None,
        )
        .map_err(vkerr("vkCreateInstance"))?;
    let pds = instance
        .enumerate_physical_devices()
        .map_err(vkerr("vkEnumeratePhysicalDevices"))?;
    let pd = *pds.first().ok_or("no Vulkan physical device")?;
    let props = instance.get_physical_device_properties(pd);
    let name = props
        .device_name_as_c_str()
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_default();
    let family = instance
        .get_physical_device_queue_family_properties(pd)
        .iter()
        .position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE) && f.queue_count > 0)
        .ok_or("no compute queue family")? as u32;
    let prio = [1.0f32];
    let qci = [vk::DeviceQueueCreateInfo::default()
        .queue_family_index(family)
        .queue_priorities(&prio)];
    let device = instance
        .create_device(
            pd,
            &vk::DeviceCreateInfo::default().queue_create_infos(&qci),
            None,
        )
        .map_err(vkerr("vkCreateDevice"))?;
    let queue = device.get_device_queue(family, 0);

    // Two host-visible buffers to copy between (recording only; they are never submitted).
    let mem_props = instance.get_physical_device_memory_properties(pd);
    let mut bufs = Vec::new();
    let mut mems = Vec::new();
    for _ in 0..2 {
        let b = device
            .create_buffer(
                &vk::BufferCreateInfo::default()
                    .size(1 << 20)
                    .usage(vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST),
                None,
            )
            .map_err(vkerr("vkCreateBuffer"))?;
        let req = device.get_buffer_memory_requirements(b);
        let ty = (0..mem_props.memory_type_count)
            .find(|i| {
                req.memory_type_bits & (1 << i) != 0
                    && mem_props.memory_types[*i as usize]
                        .property_flags
                        .contains(vk::MemoryPropertyFlags::HOST_VISIBLE)
            })
            .ok_or("no host-visible memory type")?;
        let m = device
            .allocate_memory(
                &vk::MemoryAllocateInfo::default()
                    .allocation_size(req.size)
                    .memory_type_index(ty),
                None,
            )
            .map_err(vkerr("vkAllocateMemory"))?;
        device
            .bind_buffer_memory(b, m, 0)
            .map_err(vkerr("vkBindBufferMemory"))?;
        bufs.push(b);
        mems.push(m);
    }

    let pool = device
        .create_command_pool(
            &vk::CommandPoolCreateInfo::default()
                .queue_family_index(family)
                .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER),
            None,
        )
        .map_err(vkerr("vkCreateCommandPool"))?;
    let cbs = device
        .allocate_command_buffers(
            &vk::CommandBufferAllocateInfo::default()
                .command_pool(pool)
                .level(vk::CommandBufferLevel::PRIMARY)
                .command_buffer_count(2),
        )
        .map_err(vkerr("vkAllocateCommandBuffers"))?;
    let (rec_cb, empty_cb) = (cbs[0], cbs[1]);
    let fence = device
        .create_fence(&vk::FenceCreateInfo::default(), None)
        .map_err(vkerr("vkCreateFence"))?;

    // 1. vkCreateBuffer + vkDestroyBuffer.
    let bci = vk::BufferCreateInfo::default()
        .size(64 << 10)
        .usage(vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST);
    let create_destroy_ns = time(o.batches, n_create, || {
        for _ in 0..n_create {
            let b = device
                .create_buffer(&bci, None)
                .map_err(vkerr("vkCreateBuffer"))?;
            device.destroy_buffer(b, None);
        }
        Ok(())
    })?;

    // 2. Recording: begin, copy × n_copies, end. Timed separately: the copies, then begin/end.
    let region = [vk::BufferCopy {
        src_offset: 0,
        dst_offset: 4096,
        size: 256,
    }];
    let begin =
        vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
    let mut copy_ns = Vec::new();
    let mut begin_end_ns = Vec::new();
    let record = |copy_ns: &mut Vec<f64>, begin_end_ns: &mut Vec<f64>| -> Res<()> {
        let mut copies = 0.0;
        let mut be = 0.0;
        for _ in 0..n_records {
            let t0 = Instant::now();
            device
                .begin_command_buffer(rec_cb, &begin)
                .map_err(vkerr("vkBeginCommandBuffer"))?;
            let t1 = Instant::now();
            for _ in 0..n_copies {
                device.cmd_copy_buffer(rec_cb, bufs[0], bufs[1], &region);
            }
            let t2 = Instant::now();
            device
                .end_command_buffer(rec_cb)
                .map_err(vkerr("vkEndCommandBuffer"))?;
            let t3 = Instant::now();
            copies += (t2 - t1).as_nanos() as f64;
            be += ((t1 - t0) + (t3 - t2)).as_nanos() as f64;
            device
                .reset_command_buffer(rec_cb, vk::CommandBufferResetFlags::empty())
                .map_err(vkerr("vkResetCommandBuffer"))?;
        }
        copy_ns.push(copies / (n_records * n_copies) as f64);
        begin_end_ns.push(be / n_records as f64);
        Ok(())
    };
    record(&mut Vec::new(), &mut Vec::new())?; // warm-up
    for _ in 0..o.batches {
        record(&mut copy_ns, &mut begin_end_ns)?;
    }
    let copy_record_ns = median(&copy_ns);
    let begin_end_ns = median(&begin_end_ns);

    // 3. Submit an empty command buffer with a fence, wait, reset.
    device
        .begin_command_buffer(empty_cb, &vk::CommandBufferBeginInfo::default())
        .map_err(vkerr("vkBeginCommandBuffer"))?;
    device
        .end_command_buffer(empty_cb)
        .map_err(vkerr("vkEndCommandBuffer"))?;
    let cb_list = [empty_cb];
    let submit = [vk::SubmitInfo::default().command_buffers(&cb_list)];
    let submit_wait_ns = time(o.batches, n_submit, || {
        for _ in 0..n_submit {
            device
                .queue_submit(queue, &submit, fence)
                .map_err(vkerr("vkQueueSubmit"))?;
            device
                .wait_for_fences(&[fence], true, u64::MAX)
                .map_err(vkerr("vkWaitForFences"))?;
            device
                .reset_fences(&[fence])
                .map_err(vkerr("vkResetFences"))?;
        }
        Ok(())
    })?;

    device
        .device_wait_idle()
        .map_err(vkerr("vkDeviceWaitIdle"))?;
    device.destroy_fence(fence, None);
    device.destroy_command_pool(pool, None);
    for b in bufs {
        device.destroy_buffer(b, None);
    }
    for m in mems {
        device.free_memory(m, None);
    }
    device.destroy_device(None);
    instance.destroy_instance(None);

    Ok(serde_json::json!({
        "device": name,
        "create_destroy_ns": create_destroy_ns,
        "copy_record_ns": copy_record_ns,
        "begin_end_ns": begin_end_ns,
        "submit_wait_ns": submit_wait_ns,
        "counts": {
            "create": n_create, "records": n_records, "copies_per_record": n_copies,
            "submits": n_submit, "batches": o.batches
        }
    })
    .to_string())
}
