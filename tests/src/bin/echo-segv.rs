//! echo-segv: a Vulkan program with its OWN SIGSEGV handler, for the profile tests.
//!
//! It keeps a staging buffer persistently mapped, uploads through it and reads back through a
//! second one, three iterations with a fence each. In every GPU window it also touches a private
//! page it protected itself; its handler opens that page and counts. The layer's page-protection
//! guard must chain such faults to this handler (installed `before` the instance), or — when the
//! handler is installed `late`, after the layer's — notice the replacement, stop validating and
//! never take the application's faults. Prints `{"own_faults":N,"expected_faults":N,"mismatches":N}`.

use ash::vk;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

static PAGE: AtomicUsize = AtomicUsize::new(0);
static OWN: AtomicU64 = AtomicU64::new(0);

extern "C" fn handler(_sig: i32, info: *mut libc::siginfo_t, _ctx: *mut c_void) {
    let addr = unsafe { (*info).si_addr() } as usize;
    let page = PAGE.load(Ordering::Relaxed);
    let ps = 4096usize.max(unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize);
    if page != 0 && addr >= page && addr < page + ps {
        unsafe { libc::mprotect(page as *mut c_void, ps, libc::PROT_READ | libc::PROT_WRITE) };
        OWN.fetch_add(1, Ordering::Relaxed);
    } else {
        // Not ours: die as the default action would.
        unsafe {
            libc::signal(libc::SIGSEGV, libc::SIG_DFL);
        }
    }
}

fn install() {
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGSEGV, &sa, std::ptr::null_mut());
    }
}

/// Protect the private page and touch it: one fault for the application's handler.
fn own_fault() {
    let page = PAGE.load(Ordering::Relaxed);
    unsafe {
        libc::mprotect(page as *mut c_void, 4096, libc::PROT_NONE);
        std::ptr::write_volatile(page as *mut u32, 7);
    }
}

unsafe fn buffer(
    dev: &ash::Device,
    mem: &vk::PhysicalDeviceMemoryProperties,
    size: u64,
    usage: vk::BufferUsageFlags,
    want: vk::MemoryPropertyFlags,
) -> (vk::Buffer, vk::DeviceMemory) {
    let b = dev
        .create_buffer(
            &vk::BufferCreateInfo::default().size(size).usage(usage),
            None,
        )
        .unwrap();
    let req = dev.get_buffer_memory_requirements(b);
    let ty = (0..mem.memory_type_count)
        .find(|&i| {
            req.memory_type_bits & (1 << i) != 0
                && mem.memory_types[i as usize].property_flags.contains(want)
        })
        .unwrap();
    let m = dev
        .allocate_memory(
            &vk::MemoryAllocateInfo::default()
                .allocation_size(req.size)
                .memory_type_index(ty),
            None,
        )
        .unwrap();
    dev.bind_buffer_memory(b, m, 0).unwrap();
    (b, m)
}

fn main() {
    let late = std::env::args().any(|a| a == "late");
    let ps = 4096usize.max(unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize);
    let page = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            ps,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    PAGE.store(page as usize, Ordering::Relaxed);
    if !late {
        install();
    }
    let iters = 3u32;
    let bytes: u64 = 1 << 20;
    let n = (bytes / 4) as usize;
    let mut mismatches = 0u64;
    let mut expected = 0u64;
    unsafe {
        let entry = ash::Entry::load().expect("libvulkan");
        let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_1);
        let instance = entry
            .create_instance(
                &vk::InstanceCreateInfo::default().application_info(&app),
                None,
            )
            .unwrap();
        let pd = instance.enumerate_physical_devices().unwrap()[0];
        let mem = instance.get_physical_device_memory_properties(pd);
        let prio = [1.0f32];
        let qi = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(0)
            .queue_priorities(&prio)];
        let dev = instance
            .create_device(
                pd,
                &vk::DeviceCreateInfo::default().queue_create_infos(&qi),
                None,
            )
            .unwrap();
        let hv = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
        let up = buffer(&dev, &mem, bytes, vk::BufferUsageFlags::TRANSFER_SRC, hv);
        let mid = buffer(
            &dev,
            &mem,
            bytes,
            vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST,
            vk::MemoryPropertyFlags::DEVICE_LOCAL,
        );
        let down = buffer(&dev, &mem, bytes, vk::BufferUsageFlags::TRANSFER_DST, hv);
        let p = dev
            .map_memory(up.1, 0, bytes, vk::MemoryMapFlags::empty())
            .unwrap() as *mut u32;
        let q = dev
            .map_memory(down.1, 0, bytes, vk::MemoryMapFlags::empty())
            .unwrap() as *const u32;
        let pool = dev
            .create_command_pool(
                &vk::CommandPoolCreateInfo::default().queue_family_index(0),
                None,
            )
            .unwrap();
        let cb = dev
            .allocate_command_buffers(
                &vk::CommandBufferAllocateInfo::default()
                    .command_pool(pool)
                    .command_buffer_count(1),
            )
            .unwrap()[0];
        dev.begin_command_buffer(cb, &vk::CommandBufferBeginInfo::default())
            .unwrap();
        let region = [vk::BufferCopy {
            src_offset: 0,
            dst_offset: 0,
            size: bytes,
        }];
        let barrier = |src, dst, ss, ds| {
            let b = vk::MemoryBarrier::default()
                .src_access_mask(src)
                .dst_access_mask(dst);
            dev.cmd_pipeline_barrier(cb, ss, ds, vk::DependencyFlags::empty(), &[b], &[], &[]);
        };
        dev.cmd_copy_buffer(cb, up.0, mid.0, &region);
        barrier(
            vk::AccessFlags::TRANSFER_WRITE,
            vk::AccessFlags::TRANSFER_READ,
            vk::PipelineStageFlags::TRANSFER,
            vk::PipelineStageFlags::TRANSFER,
        );
        dev.cmd_copy_buffer(cb, mid.0, down.0, &region);
        barrier(
            vk::AccessFlags::TRANSFER_WRITE,
            vk::AccessFlags::HOST_READ,
            vk::PipelineStageFlags::TRANSFER,
            vk::PipelineStageFlags::HOST,
        );
        dev.end_command_buffer(cb).unwrap();
        let fence = dev
            .create_fence(&vk::FenceCreateInfo::default(), None)
            .unwrap();
        let queue = dev.get_device_queue(0, 0);
        let cbs = [cb];
        for it in 0..iters {
            for i in 0..n {
                *p.add(i) = (i as u32 ^ it).wrapping_mul(2654435761);
            }
            dev.queue_submit(
                queue,
                &[vk::SubmitInfo::default().command_buffers(&cbs)],
                fence,
            )
            .unwrap();
            if late && it == 1 {
                install(); // after the layer's handler: the layer must notice and step aside
            }
            if !late || it >= 1 {
                own_fault();
                expected += 1;
            }
            dev.wait_for_fences(&[fence], true, u64::MAX).unwrap();
            dev.reset_fences(&[fence]).unwrap();
            for i in 0..n {
                if *q.add(i) != (i as u32 ^ it).wrapping_mul(2654435761) {
                    mismatches += 1;
                }
            }
        }
        dev.destroy_fence(fence, None);
        dev.destroy_command_pool(pool, None);
        dev.unmap_memory(up.1);
        dev.unmap_memory(down.1);
        for (b, m) in [up, mid, down] {
            dev.destroy_buffer(b, None);
            dev.free_memory(m, None);
        }
        dev.destroy_device(None);
        instance.destroy_instance(None);
    }
    println!(
        "{{\"own_faults\":{},\"expected_faults\":{expected},\"mismatches\":{mismatches}}}",
        OWN.load(Ordering::Relaxed)
    );
}
