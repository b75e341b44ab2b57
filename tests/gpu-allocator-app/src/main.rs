//! echo-gpu-allocator loop|race|zero ITERS [SPV] (issue 12): the c_suballoc workload written the
//! way an ash program using the `gpu-allocator` crate writes it. gpu-allocator sub-allocates every
//! buffer from large blocks and maps every host-visible block; on lavapipe (one memory type,
//! DEVICE_LOCAL|HOST_VISIBLE) the staging buffers (`CpuToGpu`, `GpuToCpu`) and the device
//! buffers (`GpuOnly`) all land in one mapped block. The workload (`loop`, `race`, `zero`, the
//! same as `echo-vma`'s) is tests/alloc-workload's; this program brings gpu-allocator's buffers.

use ash::vk;
use echo_alloc_workload::{self as workload, fill, size, Gpu, Host};
use gpu_allocator::vulkan::{
    Allocation, AllocationCreateDesc, AllocationScheme, Allocator, AllocatorCreateDesc,
};
use gpu_allocator::MemoryLocation;

/// h and r through gpu-allocator's mappings of their blocks.
struct Mapped<'a> {
    ha: &'a mut Allocation,
    ra: &'a Allocation,
}

impl Host for Mapped<'_> {
    /// Whole words: the mapping is page-aligned.
    unsafe fn write_input(&mut self, seed: u32) {
        let s = self
            .ha
            .mapped_slice_mut()
            .expect("host-visible allocation is mapped");
        let (pre, words, _) = s[..size() as usize].align_to_mut::<u32>();
        assert!(pre.is_empty(), "the mapping is word-aligned");
        fill(words, seed);
    }

    unsafe fn output(&mut self) -> &[u8] {
        let out = self.ra.mapped_slice().expect("readback is mapped");
        &out[..size() as usize]
    }
}

fn main() {
    let (mode, iters, code) = workload::args("echo-gpu-allocator");
    unsafe { run(mode, iters, &code) }
}

unsafe fn run(mode: workload::Mode, iters: u32, spv: &[u8]) {
    let gpu = Gpu::open();
    let (inst, phys, dev) = (&gpu.inst, gpu.phys, &gpu.dev);
    let mut alloc = Allocator::new(&AllocatorCreateDesc {
        instance: inst.clone(),
        device: dev.clone(),
        physical_device: phys,
        debug_settings: Default::default(),
        buffer_device_address: false,
        allocation_sizes: Default::default(),
    })
    .expect("gpu-allocator");

    // The usual gpu-allocator way: create the buffer, allocate by location, bind.
    let mut make = |name: &str, usage: vk::BufferUsageFlags, location: MemoryLocation| {
        let buf = dev
            .create_buffer(
                &vk::BufferCreateInfo::default()
                    .size(size())
                    .usage(usage)
                    .sharing_mode(vk::SharingMode::EXCLUSIVE),
                None,
            )
            .expect("vkCreateBuffer");
        let requirements = dev.get_buffer_memory_requirements(buf);
        let a = alloc
            .allocate(&AllocationCreateDesc {
                name,
                requirements,
                location,
                linear: true,
                allocation_scheme: AllocationScheme::GpuAllocatorManaged,
            })
            .expect("allocate");
        dev.bind_buffer_memory(buf, a.memory(), a.offset())
            .expect("vkBindBufferMemory");
        (buf, a)
    };
    let [hu, du, ou, ru] = workload::usages(mode);
    let (h, mut ha) = make("upload", hu, MemoryLocation::CpuToGpu);
    let (d, da) = make("input", du, MemoryLocation::GpuOnly);
    let (o, oa) = make("output", ou, MemoryLocation::GpuOnly);
    let (r, ra) = make("readback", ru, MemoryLocation::GpuToCpu);

    let mut host = Mapped {
        ha: &mut ha,
        ra: &ra,
    };
    workload::run(&gpu, mode, iters, spv, [h, d, o, r], &mut host);

    for (b, a) in [(h, ha), (d, da), (o, oa), (r, ra)] {
        dev.destroy_buffer(b, None);
        alloc.free(a).expect("free");
    }
    drop(alloc);
    gpu.close();
}
