//! Where a buffer's memory comes from, and the memory type a program written for discrete GPUs
//! picks for it by property flags. One copy for the samples (`samples/src/vk.rs`) and vkecho's
//! selftest (`cli/src/selftest/vk.rs` compiles this file by its path).

use ash::vk;

/// Where a buffer's memory comes from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Mem {
    /// Host-visible, host-coherent staging memory (system RAM on a discrete GPU).
    Staging,
    /// Device-local memory; a type that is *not* host-visible when the device has one.
    Device,
    /// Device-local, host-visible and coherent: what a hand-written zero-copy program uses.
    Unified,
}

/// The first memory type among `bits` that has what `kind` wants (and for `Device`, is not
/// host-visible where such a type exists).
pub fn memory_type(
    props: &vk::PhysicalDeviceMemoryProperties,
    kind: Mem,
    bits: u32,
) -> Option<u32> {
    use vk::MemoryPropertyFlags as F;
    let types = &props.memory_types[..props.memory_type_count as usize];
    let first = |want: F, avoid: F| {
        (0..types.len()).find(|&i| {
            bits & (1 << i) != 0
                && types[i].property_flags.contains(want)
                && !types[i].property_flags.intersects(avoid)
        })
    };
    let found = match kind {
        Mem::Staging => first(F::HOST_VISIBLE | F::HOST_COHERENT, F::empty()),
        Mem::Device => {
            first(F::DEVICE_LOCAL, F::HOST_VISIBLE).or_else(|| first(F::DEVICE_LOCAL, F::empty()))
        }
        Mem::Unified => first(
            F::DEVICE_LOCAL | F::HOST_VISIBLE | F::HOST_COHERENT,
            F::empty(),
        ),
    };
    found.map(|i| i as u32)
}

/// One large allocation that buffers are sub-allocated from (as VMA or gpu-allocator do).
pub struct Block {
    pub memory: vk::DeviceMemory,
    pub size: u64,
    type_index: u32,
    /// Its persistent host mapping; null when it is not mapped.
    ptr: *mut u8,
    /// The first byte not given out yet.
    cursor: u64,
}

impl Block {
    /// A block of `size` bytes of memory type `type_index`, mapped at `ptr` (or null).
    pub fn new(memory: vk::DeviceMemory, size: u64, type_index: u32, ptr: *mut u8) -> Block {
        Block {
            memory,
            size,
            type_index,
            ptr,
            cursor: 0,
        }
    }

    /// Room for a buffer with requirements `req` at the block's next offset aligned to
    /// `req.alignment` (and to at least `min_align`): that offset and the buffer's host pointer
    /// (null when the block is not mapped).
    pub fn place(
        &mut self,
        req: &vk::MemoryRequirements,
        min_align: u64,
    ) -> Result<(u64, *mut u8), String> {
        if req.memory_type_bits & (1 << self.type_index) == 0 {
            return Err("a buffer cannot live in the block's memory type".into());
        }
        let offset = self.cursor.next_multiple_of(req.alignment.max(min_align));
        if offset + req.size > self.size {
            return Err(format!("block of {} bytes is full", self.size));
        }
        self.cursor = offset + req.size;
        let ptr = if self.ptr.is_null() {
            std::ptr::null_mut()
        } else {
            // SAFETY: inside the block's mapping (checked above).
            unsafe { self.ptr.add(offset as usize) }
        };
        Ok((offset, ptr))
    }
}
