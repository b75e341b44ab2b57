//! Memory: allocation, mapping, flush/invalidate (Vulkan spec chapter "Memory Allocation").

use super::hook;
use crate::dispatch::raw;
use crate::state::{Mapping, MemoryState};
use ash::vk;
use std::ffi::c_void;

/// The dedicated buffer of an allocation, from its pNext chain.
unsafe fn dedicated_buffer(info: &vk::MemoryAllocateInfo<'_>) -> Option<u64> {
    let mut p = info.p_next as *const vk::BaseInStructure<'_>;
    while !p.is_null() {
        if (*p).s_type == vk::StructureType::MEMORY_DEDICATED_ALLOCATE_INFO {
            let d = &*(p as *const vk::MemoryDedicatedAllocateInfo<'_>);
            return (d.buffer != vk::Buffer::null()).then(|| raw(d.buffer));
        }
        p = (*p).p_next;
    }
    None
}

/// `VkMemoryAllocateFlagsInfo::flags` from the pNext chain, 0 when absent.
unsafe fn allocate_flags(info: &vk::MemoryAllocateInfo<'_>) -> u32 {
    let mut p = info.p_next as *const vk::BaseInStructure<'_>;
    while !p.is_null() {
        if (*p).s_type == vk::StructureType::MEMORY_ALLOCATE_FLAGS_INFO {
            return (*(p as *const vk::MemoryAllocateFlagsInfo<'_>))
                .flags
                .as_raw();
        }
        p = (*p).p_next;
    }
    0
}

hook! {
    fn vkAllocateMemory(
        cx,
        device: vk::Device,
        info: *const vk::MemoryAllocateInfo<'_>,
        alloc: *const vk::AllocationCallbacks<'_>,
        out: *mut vk::DeviceMemory,
    ) -> vk::Result {
        // Enforce: an allocation dedicated to a planned device buffer may need a host-visible type
        // (the staging maps are served from it). State and key keep the application's request.
        let switched = cx.dev.enforce().and_then(|e| e.allocation_type(dedicated_buffer(&*info), (*info).memory_type_index, cx.dev));
        let app_info = info;
        let patched;
        let info = match switched {
            Some(t) => {
                patched = vk::MemoryAllocateInfo { memory_type_index: t, ..*app_info };
                &patched as *const vk::MemoryAllocateInfo<'_>
            }
            None => app_info,
        };
        // Profile: back host-visible memory with a double mapping (falls back on any failure).
        let import = cx.dev.profile().and_then(|p| p.prepare_import(cx.dev, &*info));
        let mut r = match &import {
            Some(im) => cx.down((cx.next)(device, im.info(), alloc, out)),
            None => cx.down((cx.next)(device, info, alloc, out)),
        };
        let import = match (import, cx.dev.profile()) {
            (Some(im), Some(p)) if r != vk::Result::SUCCESS => {
                p.import_failed(im);
                r = cx.down((cx.next)(device, info, alloc, out));
                None
            }
            (im, _) => im,
        };
        if r == vk::Result::SUCCESS {
            let i = &*app_info;
            let alloc_flags = allocate_flags(i);
            let (key, stack) = if cx.dev.wants_key(i.allocation_size) {
                let (hash, frames) = crate::profile::callsite::site(cx.dev);
                let key = cx.dev.state.memory_keys.key(hash, i.allocation_size, i.memory_type_index, alloc_flags);
                (Some(key), frames)
            } else {
                (None, Vec::new())
            };
            cx.dev.state.memory.insert(
                raw(*out),
                MemoryState {
                    type_index: i.memory_type_index,
                    size: i.allocation_size,
                    dedicated_buffer: dedicated_buffer(i),
                    mapped: None,
                    host_mapped: false,
                    alloc_flags,
                    key,
                    stack,
                },
            );
            if let Some(p) = cx.dev.profile() {
                p.on_allocate(cx.dev, raw(*out), i, import);
            }
            if let Some(e) = cx.dev.enforce() {
                e.memory_allocated(cx.dev, raw(*out), switched);
            }
        }
        r
    }

    fn vkFreeMemory(cx, device: vk::Device, memory: vk::DeviceMemory, alloc: *const vk::AllocationCallbacks<'_>) {
        if cx.dev.enforce().is_some_and(|e| e.free(cx.dev, raw(memory), alloc)) {
            return cx.down(()); // deferred: a buffer still lives in this memory (S4)
        }
        let double_map = cx.dev.profile().and_then(|p| p.before_free_memory(cx.dev, raw(memory)));
        cx.dev.state.memory.remove(&raw(memory));
        cx.down((cx.next)(device, memory, alloc));
        drop(double_map); // unmapped only once the driver let go of it
    }

    fn vkMapMemory(
        cx,
        device: vk::Device,
        memory: vk::DeviceMemory,
        offset: vk::DeviceSize,
        size: vk::DeviceSize,
        flags: vk::MemoryMapFlags,
        data: *mut *mut c_void,
    ) -> vk::Result {
        if let Some(e) = cx.dev.enforce() {
            // A staging allocation's map may be served from its device buffer's memory.
            return e.map(cx.dev, raw(memory), offset, size, data, &mut || {
                cx.down((cx.next)(device, memory, offset, size, flags, data))
            });
        }
        let r = cx.down((cx.next)(device, memory, offset, size, flags, data));
        if r == vk::Result::SUCCESS {
            if let Some(p) = cx.dev.profile() {
                p.on_map(raw(memory), offset, size, data); // may hand out the app's view instead
            }
            if let Some(mut m) = cx.dev.state.memory.get_mut(&raw(memory)) {
                let size = if size == vk::WHOLE_SIZE { m.size.saturating_sub(offset) } else { size };
                m.mapped = Some(Mapping { ptr: *data as usize, offset, size });
                m.host_mapped = true;
            }
        }
        r
    }

    fn vkUnmapMemory(cx, device: vk::Device, memory: vk::DeviceMemory) {
        if cx.dev.enforce().is_some_and(|e| e.unmap(cx.dev, raw(memory))) {
            return cx.down(()); // echo's mapping stays while aliased buffers use it
        }
        if let Some(p) = cx.dev.profile() {
            p.before_unmap(cx.dev, raw(memory));
        }
        if let Some(mut m) = cx.dev.state.memory.get_mut(&raw(memory)) {
            m.mapped = None;
        }
        cx.down((cx.next)(device, memory))
    }

    fn vkFlushMappedMemoryRanges(cx, device: vk::Device, count: u32, ranges: *const vk::MappedMemoryRange<'_>) -> vk::Result {
        if let Some(p) = cx.dev.profile() {
            p.on_ranges(true, count, ranges);
        }
        if let Some(e) = cx.dev.enforce() {
            if count > 0 && !ranges.is_null() {
                if let Some(t) = e.translate_ranges(cx.dev, std::slice::from_raw_parts(ranges, count as usize)) {
                    return cx.down((cx.next)(device, t.len() as u32, t.as_ptr()));
                }
            }
        }
        cx.down((cx.next)(device, count, ranges))
    }

    fn vkInvalidateMappedMemoryRanges(cx, device: vk::Device, count: u32, ranges: *const vk::MappedMemoryRange<'_>) -> vk::Result {
        if let Some(p) = cx.dev.profile() {
            p.on_ranges(false, count, ranges);
        }
        if let Some(e) = cx.dev.enforce() {
            if count > 0 && !ranges.is_null() {
                if let Some(t) = e.translate_ranges(cx.dev, std::slice::from_raw_parts(ranges, count as usize)) {
                    return cx.down((cx.next)(device, t.len() as u32, t.as_ptr()));
                }
            }
        }
        cx.down((cx.next)(device, count, ranges))
    }
}
