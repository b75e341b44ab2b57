//! Memory: allocation, mapping, flush/invalidate (Vulkan spec chapter "Memory Allocation").

use super::calls_gen;
use crate::chassis;
use crate::dispatch::{raw, DeviceData};
use crate::events::{Allocate, Cmd, Down, Free, MapMemory, Ranges};
use crate::state::Mapping;
use ash::vk;
use ash::vk::Handle;
use std::ffi::c_void;

/// `vkMapMemory` and `vkMapMemory2`: a mode may serve a staging allocation's map from its
/// device buffer's memory (enforce) or hand out the application's view of a double mapping
/// (profile). `down(memory)` maps `memory` at the next layer.
unsafe fn map(
    dev: &DeviceData,
    mm: MapMemory,
    down: &mut dyn FnMut(u64) -> vk::Result,
) -> vk::Result {
    chassis::map(dev, mm, |how| match how {
        Down::Driver(m) => down(m),
        Down::Nothing => vk::Result::SUCCESS,
        Down::AsAsked => {
            let r = down(mm.memory);
            if r == vk::Result::SUCCESS {
                chassis::after(dev, &Cmd::Mapping(mm));
                if let Some(mut m) = dev.state.memory.get_mut(&mm.memory) {
                    let size = if mm.size == vk::WHOLE_SIZE {
                        m.size.saturating_sub(mm.offset)
                    } else {
                        mm.size
                    };
                    m.mapped = Some(Mapping {
                        ptr: *mm.data as usize,
                        offset: mm.offset,
                        size,
                    });
                    m.host_mapped = true;
                }
                chassis::after(dev, &Cmd::Mapped(mm.memory));
            }
            r
        }
    })
}

/// `vkUnmapMemory` and `vkUnmapMemory2`; `down(memory)` unmaps `memory` at the next layer.
fn unmap(dev: &DeviceData, memory: u64, down: &mut dyn FnMut(u64)) {
    chassis::unmap(dev, memory, |how| match how {
        Down::Driver(m) => down(m),
        Down::Nothing => {}
        Down::AsAsked => {
            if let Some(mut m) = dev.state.memory.get_mut(&memory) {
                m.mapped = None;
            }
            down(memory)
        }
    })
}

/// A memory command echo passes down as asked: the allocation's buffers leave every group (the
/// modes are told), and an allocation echo did not make is made now. Returns the handle the
/// driver knows.
unsafe fn aside_memory(dev: &DeviceData, command: &'static str, memory: u64) -> u64 {
    chassis::before(dev, &Cmd::MemoryAside { command, memory });
    let why = || format!("{command} asks for more than echo serves");
    match chassis::driver_memory(dev, memory, &why) {
        Some(Ok(m)) => m,
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
    // A mode may leave it unmade (enforce: echo's handle), allocate another memory type
    // (enforce), or import a double mapping (profile, guarded enforce); the state and key keep
    // the application's request.
    let a = Allocate {
        info: info.cast(),
        app: info.cast(),
        alloc: alloc.cast(),
        out,
        key: None,
        site: None,
    };
    let r = chassis::allocate(cx.dev, a, |a| {
        let r = cx.down((cx.next)(device, a.info.cast(), alloc, out));
        if r == vk::Result::SUCCESS {
            a.record(cx.dev, raw(*out), &|| cx.dev.site());
        }
        r
    });
    cx.down(r) // also where no call went down
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
    let f = Free {
        memory: raw(memory),
        alloc: alloc.cast(),
    };
    // Enforce may defer it (S4), skip it (echo never made it) or free another handle.
    chassis::free(cx.dev, f, |how| match how {
        Down::AsAsked => {
            cx.dev.state.memory.remove(&raw(memory));
            cx.down((cx.next)(device, memory, alloc))
        }
        Down::Driver(m) => cx.down((cx.next)(device, vk::DeviceMemory::from_raw(m), alloc)),
        Down::Nothing => cx.down(()),
    })
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
    let mm = MapMemory {
        memory: raw(memory),
        offset,
        size,
        data,
    };
    map(cx.dev, mm, &mut |m| {
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
    let mm = MapMemory {
        memory: raw(i.memory),
        offset: i.offset,
        size: i.size,
        data,
    };
    map(cx.dev, mm, &mut |m| {
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

/// A flush (`flush`) or an invalidate, alike: the modes are told, and may translate the ranges
/// onto what the driver holds before `next` gets them.
unsafe fn mapped_ranges(
    dev: &DeviceData,
    flush: bool,
    count: u32,
    ranges: *const vk::MappedMemoryRange<'_>,
    next: impl Fn(u32, *const vk::MappedMemoryRange<'_>) -> vk::Result,
) -> vk::Result {
    let r = Ranges {
        flush,
        n: count,
        p: ranges.cast(),
    };
    chassis::ranges(dev, r, |r| next(r.n, r.p))
}

pub unsafe fn vkGetDeviceMemoryCommitment(
    cx: &calls_gen::vkGetDeviceMemoryCommitment<'_>,
    device: vk::Device,
    memory: vk::DeviceMemory,
    committed: *mut vk::DeviceSize,
) {
    // An allocation echo did not make has nothing committed (the query is only valid for
    // lazily allocated memory, which such an allocation never is).
    match chassis::unmade(cx.dev, raw(memory)) {
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
    match chassis::unmade(cx.dev, raw((*info).memory)) {
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
    let m = raw((*info).memory);
    let why = || "it is exported (vkGetMemoryFdKHR)".to_string();
    match chassis::driver_memory(cx.dev, m, &why) {
        Some(Ok(real)) if real != m => {
            let patched = vk::MemoryGetFdInfoKHR {
                memory: vk::DeviceMemory::from_raw(real),
                ..*info
            };
            return cx.down((cx.next)(device, &patched, fd));
        }
        Some(Err(_)) => return cx.down(vk::Result::ERROR_OUT_OF_HOST_MEMORY),
        _ => {}
    }
    cx.down((cx.next)(device, info, fd))
}
