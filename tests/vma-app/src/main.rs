//! echo-vma loop|race|zero ITERS [SPV] (issue 12): the c_suballoc workload written the way an ash
//! program using VMA (the `vk-mem` crate) writes it: `vmaCreateBuffer` with `MemoryUsage::Auto*`
//! and intent flags, never a memory type by hand. The staging buffers are persistently mapped
//! (`MAPPED` + `HOST_ACCESS_SEQUENTIAL_WRITE` for the upload, `MAPPED` + `HOST_ACCESS_RANDOM` for
//! the readback), the device buffers `AutoPreferDevice`; VMA sub-allocates them all from large
//! blocks and maps a whole block when one allocation in it wants a pointer. On lavapipe (one
//! memory type, DEVICE_LOCAL|HOST_VISIBLE) all four land in one mapped block. The workload
//! (`loop`, `race`, `zero`, the same as `echo-gpu-allocator`'s) is tests/alloc-workload's; this
//! program brings VMA's buffers, invalidates r before it is read and flushes h after each write.

use ash::vk;
use echo_alloc_workload::{self as workload, fill, size, Gpu, Host};
use vk_mem::{
    Alloc, Allocation, AllocationCreateFlags, AllocationCreateInfo, Allocator, AllocatorCreateInfo,
    MemoryUsage,
};

/// h and r through their persistent mappings.
struct Mapped<'a> {
    alloc: &'a Allocator,
    ha: &'a Allocation,
    ra: &'a Allocation,
}

impl Host for Mapped<'_> {
    /// Writes through the allocation's persistent mapping, then flushes it (VMA's rule for a
    /// written allocation; a no-op on coherent memory).
    unsafe fn write_input(&mut self, seed: u32) {
        let p = self.alloc.get_allocation_info(self.ha).mapped_data as *mut u8;
        assert!(!p.is_null(), "the upload allocation is persistently mapped");
        // Whole words (the mapping is aligned), not byte by byte.
        assert!(p as usize % 4 == 0, "the mapping is word-aligned");
        fill(
            std::slice::from_raw_parts_mut(p as *mut u32, size() as usize / 4),
            seed,
        );
        self.alloc
            .flush_allocation(self.ha, 0, size())
            .expect("vmaFlushAllocation");
    }

    unsafe fn output(&mut self) -> &[u8] {
        self.alloc
            .invalidate_allocation(self.ra, 0, size())
            .expect("vmaInvalidateAllocation");
        let p = self.alloc.get_allocation_info(self.ra).mapped_data as *const u8;
        assert!(
            !p.is_null(),
            "the readback allocation is persistently mapped"
        );
        std::slice::from_raw_parts(p, size() as usize)
    }
}

fn main() {
    let (mode, iters, code) = workload::args("echo-vma");
    unsafe { run(mode, iters, &code) }
}

unsafe fn run(mode: workload::Mode, iters: u32, spv: &[u8]) {
    let gpu = Gpu::open();
    let alloc =
        Allocator::new(AllocatorCreateInfo::new(&gpu.inst, &gpu.dev, gpu.phys)).expect("VMA");

    // The usual VMA way: one call creates, allocates and binds; what the buffer is for goes in
    // the usage and flags, the memory type is VMA's choice.
    let make = |usage: vk::BufferUsageFlags, mem: MemoryUsage, flags: AllocationCreateFlags| {
        alloc
            .create_buffer(
                &vk::BufferCreateInfo::default()
                    .size(size())
                    .usage(usage)
                    .sharing_mode(vk::SharingMode::EXCLUSIVE),
                &AllocationCreateInfo {
                    usage: mem,
                    flags,
                    ..Default::default()
                },
            )
            .expect("vmaCreateBuffer")
    };
    use AllocationCreateFlags as F;
    let [hu, du, ou, ru] = workload::usages(mode);
    let (h, mut ha) = make(
        hu,
        MemoryUsage::Auto,
        F::MAPPED | F::HOST_ACCESS_SEQUENTIAL_WRITE,
    );
    let (d, mut da) = make(du, MemoryUsage::AutoPreferDevice, F::empty());
    let (o, mut oa) = make(ou, MemoryUsage::AutoPreferDevice, F::empty());
    let (r, mut ra) = make(ru, MemoryUsage::Auto, F::MAPPED | F::HOST_ACCESS_RANDOM);

    let mut host = Mapped {
        alloc: &alloc,
        ha: &ha,
        ra: &ra,
    };
    workload::run(&gpu, mode, iters, spv, [h, d, o, r], &mut host);

    for (b, a) in [(h, &mut ha), (d, &mut da), (o, &mut oa), (r, &mut ra)] {
        alloc.destroy_buffer(b, a);
    }
    drop(alloc);
    gpu.close();
}
