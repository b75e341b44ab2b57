//! Memory: allocation, mapping, flush/invalidate (Vulkan spec chapter "Memory Allocation").

use super::calls_gen;
use crate::dispatch::{raw, DeviceData};
use crate::enforce::{FreeAction, Unmap};
use crate::state::{Mapping, MemoryState};
use ash::vk;
use ash::vk::Handle;
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

/// The structures of an allocate info's chain (enforce decides from them whether an allocation
/// may be left unmade).
unsafe fn alloc_chain(info: &vk::MemoryAllocateInfo<'_>) -> echo_analyzer::apply::AllocChain {
    let mut c = echo_analyzer::apply::AllocChain::default();
    let mut p = info.p_next as *const vk::BaseInStructure<'_>;
    while !p.is_null() {
        match (*p).s_type {
            vk::StructureType::MEMORY_ALLOCATE_FLAGS_INFO => {
                c.flags = (*(p as *const vk::MemoryAllocateFlagsInfo<'_>))
                    .flags
                    .as_raw();
            }
            vk::StructureType::MEMORY_DEDICATED_ALLOCATE_INFO => {
                let d = &*(p as *const vk::MemoryDedicatedAllocateInfo<'_>);
                c.dedicated = Some((raw(d.buffer), raw(d.image)));
            }
            vk::StructureType::MEMORY_PRIORITY_ALLOCATE_INFO_EXT => {
                let q = &*(p as *const vk::MemoryPriorityAllocateInfoEXT<'_>);
                c.priority = Some(q.priority.to_bits());
            }
            t => c.other.push(t.as_raw()),
        }
        p = (*p).p_next;
    }
    c
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

/// `vkMapMemory` and `vkMapMemory2`: enforce may serve a staging allocation's map from its
/// device buffer's memory; profile may hand out the application's view of a double mapping.
/// `down(memory)` maps `memory` at the next layer.
unsafe fn map(
    dev: &DeviceData,
    memory: u64,
    offset: u64,
    size: u64,
    data: *mut *mut c_void,
    down: &mut dyn FnMut(u64) -> vk::Result,
) -> vk::Result {
    if let Some(e) = dev.enforce() {
        return e.map(dev, memory, offset, size, data, down);
    }
    let r = down(memory);
    if r == vk::Result::SUCCESS {
        if let Some(p) = dev.profile() {
            p.on_map(memory, offset, size, data); // may hand out the app's view instead
        }
        if let Some(mut m) = dev.state.memory.get_mut(&memory) {
            let size = if size == vk::WHOLE_SIZE {
                m.size.saturating_sub(offset)
            } else {
                size
            };
            m.mapped = Some(Mapping {
                ptr: *data as usize,
                offset,
                size,
            });
            m.host_mapped = true;
        }
        if let Some(p) = dev.profile() {
            p.after_map(dev, memory); // arms what the new mapping reaches
        }
    }
    r
}

/// `vkUnmapMemory` and `vkUnmapMemory2`; `down(memory)` unmaps `memory` at the next layer.
unsafe fn unmap(dev: &DeviceData, memory: u64, down: &mut dyn FnMut(u64)) {
    if let Some(e) = dev.enforce() {
        match e.unmap(dev, memory) {
            Unmap::Served => return, // echo's mapping stays while aliased buffers use it
            Unmap::Down(m) => {
                if let Some(mut s) = dev.state.memory.get_mut(&memory) {
                    s.mapped = None;
                }
                return down(m);
            }
        }
    }
    if let Some(p) = dev.profile() {
        p.before_unmap(dev, memory);
    }
    if let Some(mut m) = dev.state.memory.get_mut(&memory) {
        m.mapped = None;
    }
    down(memory)
}

/// A memory command echo passes down as asked: the allocation's buffers leave every group
/// (profile records it), and an allocation echo did not make is made now. Returns the handle
/// the driver knows.
fn aside_memory(dev: &DeviceData, command: &str, memory: u64) -> u64 {
    if let Some(p) = dev.profile() {
        p.on_aside(None, command, false, &[], &[], &[memory], &[]);
    }
    match dev.enforce() {
        Some(e) if e.any_virtual() => e
            .driver_memory_now(
                dev,
                memory,
                &format!("{command} asks for more than echo serves"),
            )
            .unwrap_or(memory),
        _ => memory,
    }
}

pub unsafe fn vkAllocateMemory(
    cx: &calls_gen::vkAllocateMemory<'_>,
    device: vk::Device,
    info: *const vk::MemoryAllocateInfo<'_>,
    alloc: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::DeviceMemory,
) -> vk::Result {
    // Enforce: a staging allocation the plan marks skip_allocation is not made; the
    // application gets echo's handle (enforce/alias/virt.rs).
    let mut site_hash = None;
    let mut taken_key = None;
    if let Some(e) = cx.dev.enforce() {
        let i = &*info;
        if cx.dev.wants_key(i.allocation_size) {
            let flags = allocate_flags(i);
            let (hash, _) = cx.dev.site();
            site_hash = Some(hash);
            let keys = &cx.dev.state.memory_keys;
            let peek = keys.peek(hash, i.allocation_size, i.memory_type_index, flags);
            let chain = alloc_chain(i);
            let mut take = || keys.key(hash, i.allocation_size, i.memory_type_index, flags);
            match e.skip_allocation(cx.dev, &peek, i, &chain, alloc, &mut take) {
                Ok(handle) => {
                    cx.dev.state.memory.insert(
                        handle,
                        MemoryState {
                            type_index: i.memory_type_index,
                            size: i.allocation_size,
                            dedicated_buffer: dedicated_buffer(i),
                            mapped: None,
                            host_mapped: false,
                            alloc_flags: flags,
                            key: Some(peek),
                            stack: Vec::new(),
                        },
                    );
                    *out = vk::DeviceMemory::from_raw(handle);
                    return cx.down(vk::Result::SUCCESS);
                }
                Err(k) => taken_key = k,
            }
        }
    }
    // Enforce: an allocation dedicated to a planned device buffer may need a host-visible type
    // (the staging maps are served from it). State and key keep the application's request.
    let switched = cx.dev.enforce().and_then(|e| {
        e.allocation_type(dedicated_buffer(&*info), (*info).memory_type_index, cx.dev)
    });
    let app_info = info;
    let patched;
    let info = match switched {
        Some(t) => {
            patched = vk::MemoryAllocateInfo {
                memory_type_index: t,
                ..*app_info
            };
            &patched as *const vk::MemoryAllocateInfo<'_>
        }
        None => app_info,
    };
    // Profile: back host-visible memory with a double mapping (falls back on any failure).
    // Not once an image that cannot live in imported memory exists (hooks/image.rs).
    let may_import = cx.dev.state.image_imports.may_import();
    let import = cx
        .dev
        .profile()
        .filter(|_| may_import)
        .and_then(|p| p.prepare_import(cx.dev, &*info));
    // Guarded enforce: the memory a guarded group will live in is double-mapped too.
    let mut guarded = cx.dev.enforce().filter(|_| may_import).and_then(|e| {
        let g = e.guard()?;
        if !e.guard_wants(cx.dev, &*info, dedicated_buffer(&*info)) {
            return None;
        }
        g.prepare_import(cx.dev, &*info)
    });
    let mut r = match (&import, &guarded) {
        (Some(im), _) => cx.down((cx.next)(device, im.info(), alloc, out)),
        (None, Some(g)) => cx.down((cx.next)(device, g.info(), alloc, out)),
        (None, None) => cx.down((cx.next)(device, info, alloc, out)),
    };
    if guarded.is_some() && r != vk::Result::SUCCESS {
        crate::log::warn!("guard: importing a double mapping failed ({r:?}); allocated as asked, its group is not applied");
        guarded = None;
        r = cx.down((cx.next)(device, info, alloc, out));
    }
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
        let (key, stack) = if let Some(k) = taken_key {
            (Some(k), Vec::new())
        } else if cx.dev.wants_key(i.allocation_size) {
            let (hash, frames) = match site_hash {
                Some(h) => (h, Vec::new()),
                None => cx.dev.site(),
            };
            let key = cx.dev.state.memory_keys.key(
                hash,
                i.allocation_size,
                i.memory_type_index,
                alloc_flags,
            );
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
        if import.is_some() || guarded.is_some() {
            cx.dev.state.image_imports.imported.insert(raw(*out));
        }
        if let Some(p) = cx.dev.profile() {
            p.on_allocate(cx.dev, raw(*out), i, import);
        }
        if let Some(e) = cx.dev.enforce() {
            e.memory_allocated(cx.dev, raw(*out), switched);
            if let Some(g) = guarded {
                e.guard_imported(raw(*out), g);
            }
        }
    }
    r
}

pub unsafe fn vkFreeMemory(
    cx: &calls_gen::vkFreeMemory<'_>,
    device: vk::Device,
    memory: vk::DeviceMemory,
    alloc: *const vk::AllocationCallbacks<'_>,
) {
    if super::image::imports_possible(cx.dev) {
        cx.dev.state.image_imports.imported.remove(&raw(memory));
    }
    if let Some(e) = cx.dev.enforce() {
        let (r, then) = match e.free(cx.dev, raw(memory), alloc) {
            // Deferred: a buffer (or an allocation echo did not make) still lives in it (S4).
            FreeAction::Deferred => return cx.down(()),
            FreeAction::Skip { then } => {
                cx.dev.state.memory.remove(&raw(memory));
                (cx.down(()), then)
            }
            FreeAction::Down { memory: m, then } => {
                cx.dev.state.memory.remove(&raw(memory));
                // The guard's double mapping is unmapped (at the end of this arm) only
                // once the driver let go of the memory.
                let _mapping = e.guard().and_then(|g| g.before_free(m));
                (
                    cx.down((cx.next)(device, vk::DeviceMemory::from_raw(m), alloc)),
                    then,
                )
            }
        };
        if let Some(f) = then {
            e.free_now(cx.dev, f);
        }
        return r;
    }
    let double_map = cx
        .dev
        .profile()
        .and_then(|p| p.before_free_memory(cx.dev, raw(memory)));
    cx.dev.state.memory.remove(&raw(memory));
    cx.down((cx.next)(device, memory, alloc));
    drop(double_map); // unmapped only once the driver let go of it
}

pub unsafe fn vkMapMemory(
    cx: &calls_gen::vkMapMemory<'_>,
    device: vk::Device,
    memory: vk::DeviceMemory,
    offset: vk::DeviceSize,
    size: vk::DeviceSize,
    flags: vk::MemoryMapFlags,
    data: *mut *mut c_void,
) -> vk::Result {
    map(cx.dev, raw(memory), offset, size, data, &mut |m| {
        cx.down((cx.next)(
            device,
            vk::DeviceMemory::from_raw(m),
            offset,
            size,
            flags,
            data,
        ))
    })
}

pub unsafe fn vkUnmapMemory(
    cx: &calls_gen::vkUnmapMemory<'_>,
    device: vk::Device,
    memory: vk::DeviceMemory,
) {
    unmap(cx.dev, raw(memory), &mut |m| {
        cx.down((cx.next)(device, vk::DeviceMemory::from_raw(m)))
    })
}

// maintenance 1.4 / VK_KHR_map_memory2: the same map with its parameters in a structure. A
// chained structure (a placed map, VK_EXT_map_memory_placed) or an unmap flag (keep the
// address range reserved) asks for more than echo serves: the call goes down as asked —
// with the driver's handle where echo did not make the allocation — and the allocation's
// buffers leave every group (stepped aside from, as `hooks/aside.rs` does).
pub unsafe fn vkMapMemory2(
    cx: &calls_gen::vkMapMemory2<'_>,
    device: vk::Device,
    info: *const vk::MemoryMapInfoKHR<'_>,
    data: *mut *mut c_void,
) -> vk::Result {
    let i = *info;
    if !i.p_next.is_null() {
        let m = aside_memory(cx.dev, "vkMapMemory2", raw(i.memory));
        let patched = vk::MemoryMapInfoKHR {
            memory: vk::DeviceMemory::from_raw(m),
            ..i
        };
        return cx.down((cx.next)(device, &patched, data));
    }
    map(cx.dev, raw(i.memory), i.offset, i.size, data, &mut |m| {
        let patched = vk::MemoryMapInfoKHR {
            memory: vk::DeviceMemory::from_raw(m),
            ..i
        };
        cx.down((cx.next)(device, &patched, data))
    })
}

pub unsafe fn vkUnmapMemory2(
    cx: &calls_gen::vkUnmapMemory2<'_>,
    device: vk::Device,
    info: *const vk::MemoryUnmapInfoKHR<'_>,
) -> vk::Result {
    let i = *info;
    if !i.p_next.is_null() || !i.flags.is_empty() {
        let m = aside_memory(cx.dev, "vkUnmapMemory2", raw(i.memory));
        let patched = vk::MemoryUnmapInfoKHR {
            memory: vk::DeviceMemory::from_raw(m),
            ..i
        };
        return cx.down((cx.next)(device, &patched));
    }
    let mut r = vk::Result::SUCCESS;
    unmap(cx.dev, raw(i.memory), &mut |m| {
        let patched = vk::MemoryUnmapInfoKHR {
            memory: vk::DeviceMemory::from_raw(m),
            ..i
        };
        r = cx.down((cx.next)(device, &patched));
    });
    r
}

pub unsafe fn vkFlushMappedMemoryRanges(
    cx: &calls_gen::vkFlushMappedMemoryRanges<'_>,
    device: vk::Device,
    count: u32,
    ranges: *const vk::MappedMemoryRange<'_>,
) -> vk::Result {
    cx.down(mapped_ranges(cx.dev, true, count, ranges, |n, r| {
        (cx.next)(device, n, r)
    }))
}

pub unsafe fn vkInvalidateMappedMemoryRanges(
    cx: &calls_gen::vkInvalidateMappedMemoryRanges<'_>,
    device: vk::Device,
    count: u32,
    ranges: *const vk::MappedMemoryRange<'_>,
) -> vk::Result {
    cx.down(mapped_ranges(cx.dev, false, count, ranges, |n, r| {
        (cx.next)(device, n, r)
    }))
}

/// A flush (`flush`) or an invalidate, alike: the profile is told, and under enforce the ranges
/// are translated onto what the driver holds before `next` gets them.
unsafe fn mapped_ranges(
    dev: &DeviceData,
    flush: bool,
    count: u32,
    ranges: *const vk::MappedMemoryRange<'_>,
    next: impl FnOnce(u32, *const vk::MappedMemoryRange<'_>) -> vk::Result,
) -> vk::Result {
    if let Some(p) = dev.profile() {
        p.on_ranges(flush, count, ranges);
    }
    if let Some(e) = dev.enforce() {
        if count > 0 && !ranges.is_null() {
            if let Some(t) =
                e.translate_ranges(dev, std::slice::from_raw_parts(ranges, count as usize))
            {
                if t.is_empty() {
                    // Only ranges of an allocation made in part that nothing at the driver holds.
                    return vk::Result::SUCCESS;
                }
                return next(t.len() as u32, t.as_ptr());
            }
        }
    }
    next(count, ranges)
}

pub unsafe fn vkGetDeviceMemoryCommitment(
    cx: &calls_gen::vkGetDeviceMemoryCommitment<'_>,
    device: vk::Device,
    memory: vk::DeviceMemory,
    committed: *mut vk::DeviceSize,
) {
    // An allocation echo did not make has nothing committed (the query is only valid for
    // lazily allocated memory, which such an allocation never is).
    match cx.dev.enforce().and_then(|e| e.unmade(raw(memory))) {
        Some(Some(real)) => cx.down((cx.next)(
            device,
            vk::DeviceMemory::from_raw(real),
            committed,
        )),
        Some(None) => {
            *committed = 0;
            cx.down(())
        }
        None => cx.down((cx.next)(device, memory, committed)),
    }
}

pub unsafe fn vkGetDeviceMemoryOpaqueCaptureAddress(
    cx: &calls_gen::vkGetDeviceMemoryOpaqueCaptureAddress<'_>,
    device: vk::Device,
    info: *const vk::DeviceMemoryOpaqueCaptureAddressInfo<'_>,
) -> u64 {
    // Allocations with a capture address are always made; echo's own handles have none.
    match cx.dev.enforce().and_then(|e| e.unmade(raw((*info).memory))) {
        Some(Some(real)) => {
            let patched = vk::DeviceMemoryOpaqueCaptureAddressInfo {
                memory: vk::DeviceMemory::from_raw(real),
                ..*info
            };
            cx.down((cx.next)(device, &patched))
        }
        Some(None) => cx.down(0),
        None => cx.down((cx.next)(device, info)),
    }
}

pub unsafe fn vkGetMemoryFdKHR(
    cx: &calls_gen::vkGetMemoryFdKHR<'_>,
    device: vk::Device,
    info: *const vk::MemoryGetFdInfoKHR<'_>,
    fd: *mut std::ffi::c_int,
) -> vk::Result {
    // Exporting an allocation echo did not make: it is made now, and the driver answers.
    if let Some(e) = cx.dev.enforce().filter(|e| e.any_virtual()) {
        let m = raw((*info).memory);
        match e.driver_memory_now(cx.dev, m, "it is exported (vkGetMemoryFdKHR)") {
            Ok(real) if real != m => {
                let patched = vk::MemoryGetFdInfoKHR {
                    memory: vk::DeviceMemory::from_raw(real),
                    ..*info
                };
                return cx.down((cx.next)(device, &patched, fd));
            }
            Ok(_) => {}
            Err(_) => return cx.down(vk::Result::ERROR_OUT_OF_HOST_MEMORY),
        }
    }
    cx.down((cx.next)(device, info, fd))
}
