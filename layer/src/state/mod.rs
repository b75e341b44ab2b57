#![allow(dead_code)] // the records are read by profile and enforce mode
//! Per-handle records of one device, kept while the device is active.
//!
//! Keys are the raw 64-bit handle values (non-dispatchable handles are opaque: never
//! dereferenced). Each map entry lives from the create/allocate call that made the handle to the
//! destroy/free call that ended it; destroying a command pool ends its command buffers. Every
//! map is a `DashMap`, so recording from many threads takes no global lock.

use crate::callsite::KeyAllocator;
use crate::handles::HandleMap;
use ash::vk;
use echo_analyzer::trace::{Frame, ObjectKey};
use std::collections::HashSet;

#[derive(Clone, Debug)]
pub struct BufferState {
    pub size: u64,
    pub usage: vk::BufferUsageFlags,
    pub flags: vk::BufferCreateFlags,
    /// From the next layer, asked right after creation.
    pub requirements: vk::MemoryRequirements,
    /// `(memory, offset)` once bound.
    pub bound: Option<(u64, u64)>,
    /// A device address was taken (DESIGN §5 S3).
    pub address_taken: bool,
    /// Stable identity (call site, size, usage, flags, ordinal); set in profile and enforce
    /// mode (see [`DeviceState::keys_wanted`]).
    pub key: Option<ObjectKey>,
    /// The module-relative creation stack the key's site hashes (innermost first).
    pub stack: Vec<Frame>,
}

#[derive(Clone, Copy, Debug)]
pub struct Mapping {
    /// The pointer returned to the application.
    pub ptr: usize,
    pub offset: u64,
    /// `VK_WHOLE_SIZE` resolved to bytes.
    pub size: u64,
}

#[derive(Clone, Debug)]
pub struct MemoryState {
    pub type_index: u32,
    pub size: u64,
    /// `VkMemoryDedicatedAllocateInfo::buffer`, if dedicated to a buffer.
    pub dedicated_buffer: Option<u64>,
    pub mapped: Option<Mapping>,
    /// The application mapped it at least once: the bytes of a buffer bound into it later may
    /// hold host writes made before that bind (map → memcpy → unmap → bind).
    pub host_mapped: bool,
    /// `VkMemoryAllocateFlagsInfo::flags`, 0 when absent.
    pub alloc_flags: u32,
    /// Stable identity (call site, size, memory type index as usage, allocate flags,
    /// ordinal); set in profile and enforce mode.
    pub key: Option<ObjectKey>,
    pub stack: Vec<Frame>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(clippy::enum_variant_names)]
pub enum Recording {
    Initial,
    Recording,
    Executable,
}

#[derive(Clone, Debug)]
pub struct CommandBufferState {
    pub pool: u64,
    pub level: vk::CommandBufferLevel,
    pub recording: Recording,
    pub one_time_submit: bool,
}

/// One entry of a descriptor update template: where in `pData` the descriptors of
/// `binding[array_element ..]` are.
#[derive(Clone, Copy, Debug)]
pub struct TemplateEntry {
    pub binding: u32,
    pub array_element: u32,
    /// Descriptors (bytes for an inline uniform block).
    pub count: u32,
    pub ty: vk::DescriptorType,
    pub offset: usize,
    pub stride: usize,
}

/// A `VkDescriptorUpdateTemplate` (profile and enforce mode decode `pData` with it).
#[derive(Clone, Debug)]
pub struct UpdateTemplate {
    pub entries: Vec<TemplateEntry>,
    /// `DESCRIPTOR_SET` or `PUSH_DESCRIPTORS_KHR`.
    pub kind: vk::DescriptorUpdateTemplateType,
    /// For push templates: the bind point and the set number the template was made for.
    pub bind_point: vk::PipelineBindPoint,
    pub set: u32,
    pub set_layout: u64,
}

#[derive(Default)]
pub struct DeviceState {
    pub buffers: HandleMap<u64, BufferState>,
    pub memory: HandleMap<u64, MemoryState>,
    pub command_buffers: HandleMap<u64, CommandBufferState>,
    /// Command pool → its live command buffers.
    pub pools: HandleMap<u64, HashSet<u64>>,
    /// Descriptor update templates (profile and enforce mode).
    pub templates: HandleMap<u64, std::sync::Arc<UpdateTemplate>>,
    /// Ordinals of buffer keys on this device.
    pub buffer_keys: KeyAllocator,
    /// Ordinals of allocation keys on this device.
    pub memory_keys: KeyAllocator,
    /// Images and echo's imported memory (hooks/image.rs).
    pub image_imports: ImageImports,
    /// Queue → its family (`vkGetDeviceQueue*`): echo's own command buffers for a queue come
    /// from a pool of its family (profile mode's GPU timestamps).
    pub queue_family: HandleMap<u64, u32>,
}

/// Whether echo may still import memory on a device where images exist (hooks/image.rs, issue
/// 23): once an image that cannot carry the host-allocation handle type was created, no later
/// allocation is imported.
#[derive(Default)]
pub struct ImageImports {
    /// Some image could not carry the handle type: allocate as asked from now on.
    pub refused: std::sync::atomic::AtomicBool,
    /// Those images (while `refused`), until destroyed.
    pub unimportable: crate::handles::HandleSet<u64>,
    /// Allocations echo imported (profile's double mapping, guarded enforce), until freed.
    pub imported: crate::handles::HandleSet<u64>,
}

impl ImageImports {
    /// Image `image` was created without the handle type, because of `why`.
    pub fn refuse(&self, image: u64, why: &str) {
        use std::sync::atomic::Ordering;
        self.unimportable.insert(image);
        if !self.refused.swap(true, Ordering::Relaxed) {
            crate::log::info!(
                "image {image:#x} cannot live in imported memory ({why}); host-visible allocations from now on are not imported, and candidates in them are refused for missing host-access evidence"
            );
        }
    }

    /// Whether a new allocation may still be imported.
    #[inline]
    pub fn may_import(&self) -> bool {
        !self.refused.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl DeviceState {
    /// Records that the application holds `ptr` as its mapping of `memory` (`size` resolved
    /// from `VK_WHOLE_SIZE`), whoever made the mapping: the next layer, or echo serving it.
    pub fn note_mapped(&self, memory: u64, ptr: usize, offset: u64, size: u64) {
        if let Some(mut m) = self.memory.get_mut(&memory) {
            m.mapped = Some(Mapping { ptr, offset, size });
            m.host_mapped = true;
        }
    }

    /// Forgets the command buffers of `pool` (destroyed) and returns them.
    pub fn drop_pool(&self, pool: u64) -> Vec<u64> {
        let cbs: Vec<u64> = self
            .pools
            .remove(&pool)
            .map(|(_, s)| s.into_iter().collect())
            .unwrap_or_default();
        for cb in &cbs {
            self.command_buffers.remove(cb);
        }
        cbs
    }

    /// Puts every command buffer of `pool` back to the initial state (pool reset).
    pub fn reset_pool(&self, pool: u64) {
        if let Some(set) = self.pools.get(&pool) {
            for cb in set.iter() {
                if let Some(mut s) = self.command_buffers.get_mut(cb) {
                    s.recording = Recording::Initial;
                }
            }
        }
    }
}

/// What one descriptor of a write or template update holds, as far as buffers go.
#[derive(Clone, Copy, Debug)]
pub enum Written {
    /// A uniform/storage buffer descriptor (dynamic or not).
    Buffer(vk::DescriptorBufferInfo),
    /// A uniform/storage texel buffer descriptor.
    View(vk::BufferView),
    /// Anything else (images, samplers, acceleration structures): no buffer.
    Other,
}

impl UpdateTemplate {
    /// Every descriptor an update with `data` writes, as `(binding, array element, type, what)`.
    /// Inline uniform blocks (bytes, not descriptors) are left out.
    ///
    /// # Safety
    /// `data` must be the application's `pData` for this template (or null: nothing).
    pub unsafe fn decode(
        &self,
        data: *const std::ffi::c_void,
    ) -> Vec<(u32, u32, vk::DescriptorType, Written)> {
        use vk::DescriptorType as T;
        let mut out = Vec::new();
        if data.is_null() {
            return out;
        }
        let base = data as *const u8;
        for e in &self.entries {
            if e.ty == T::INLINE_UNIFORM_BLOCK {
                continue;
            }
            for i in 0..e.count {
                let p = base.add(e.offset + i as usize * e.stride);
                let w = match e.ty {
                    T::UNIFORM_BUFFER
                    | T::STORAGE_BUFFER
                    | T::UNIFORM_BUFFER_DYNAMIC
                    | T::STORAGE_BUFFER_DYNAMIC => Written::Buffer(std::ptr::read_unaligned(
                        p as *const vk::DescriptorBufferInfo,
                    )),
                    T::UNIFORM_TEXEL_BUFFER | T::STORAGE_TEXEL_BUFFER => {
                        Written::View(std::ptr::read_unaligned(p as *const vk::BufferView))
                    }
                    _ => Written::Other,
                };
                out.push((e.binding, e.array_element + i, e.ty, w));
            }
        }
        out
    }
}
