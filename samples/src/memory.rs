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
