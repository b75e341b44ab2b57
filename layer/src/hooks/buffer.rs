//! Buffers: creation, memory binding, device addresses (chapter "Resource Creation").

use super::calls_gen;
use crate::dispatch::raw;
use crate::state::BufferState;
use ash::vk;

/// The buffer's usage: `VkBufferUsageFlags2CreateInfo` (maintenance5, core in 1.4) when chained
/// — the create info's own `usage` is then ignored — else `usage`. The flags of the classic
/// commands all sit in the low 32 bits, which is what the trace and the plan's keys carry.
unsafe fn usage_of(info: &vk::BufferCreateInfo<'_>) -> vk::BufferUsageFlags {
    let mut p = info.p_next as *const vk::BaseInStructure<'_>;
    while !p.is_null() {
        if (*p).s_type == vk::StructureType::BUFFER_USAGE_FLAGS_2_CREATE_INFO_KHR {
            let u = (*(p as *const vk::BufferUsageFlags2CreateInfoKHR<'_>))
                .usage
                .as_raw();
            return vk::BufferUsageFlags::from_raw(u as u32);
        }
        p = (*p).p_next;
    }
    info.usage
}

/// Profile: an image bound over memory reaches the bytes of any buffer there (issue 32); the
/// trace gets the range. An image bound with a chained structure (a plane of a disjoint image,
/// a swapchain image) may not be asked its requirements with `vkGetImageMemoryRequirements`:
/// then the rest of the allocation from `offset` counts (conservative).
unsafe fn image_bound(
    dev: &crate::dispatch::DeviceData,
    device: vk::Device,
    image: vk::Image,
    memory: vk::DeviceMemory,
    offset: u64,
    chained: bool,
) {
    let Some(p) = dev.profile() else { return };
    if memory == vk::DeviceMemory::null() {
        return;
    }
    let size = if chained {
        dev.state
            .memory
            .get(&raw(memory))
            .map_or(u64::MAX, |m| m.size.saturating_sub(offset))
    } else {
        let mut req = vk::MemoryRequirements::default();
        (dev.fp.get_image_memory_requirements)(device, image, &mut req);
        req.size
    };
    p.on_bind_image(raw(image), raw(memory), offset, size);
}

pub unsafe fn vkCreateBuffer(
    cx: &calls_gen::vkCreateBuffer<'_>,
    device: vk::Device,
    info: *const vk::BufferCreateInfo<'_>,
    alloc: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::Buffer,
) -> vk::Result {
    // Profile: a buffer may be bound into imported (double-mapped) memory, so it declares
    // the host-allocation handle type (VUID-vkBindBufferMemory-memory-02727).
    // Guarded enforce: likewise, for buffers large enough to be planned.
    let patched = match cx.dev.profile() {
        Some(p) => p.patch_buffer_info(&*info),
        None if cx.dev.enforce().is_some_and(|e| e.guard().is_some())
            && cx.dev.wants_key((*info).size) =>
        {
            crate::hostmem::memfd::BufferPatch::host_allocation(&*info)
        }
        None => None,
    };
    let mut r = match &patched {
        Some(b) => cx.down((cx.next)(device, b.info(), alloc, out)),
        None => cx.down((cx.next)(device, info, alloc, out)),
    };
    if patched.is_some() && r != vk::Result::SUCCESS {
        r = cx.down((cx.next)(device, info, alloc, out));
    }
    if r == vk::Result::SUCCESS {
        let i = &*info;
        let usage = usage_of(i);
        let mut req = vk::MemoryRequirements::default();
        (cx.dev.fp.get_buffer_memory_requirements)(device, *out, &mut req);
        let (key, stack) = if cx.dev.wants_key(i.size) {
            let (hash, frames) = cx.dev.site();
            let key = cx
                .dev
                .state
                .buffer_keys
                .key(hash, i.size, usage.as_raw(), i.flags.as_raw());
            (Some(key), frames)
        } else {
            (None, Vec::new())
        };
        let planned = if cx.dev.enforce().is_some() {
            key.clone()
        } else {
            None
        };
        cx.dev.state.buffers.insert(
            raw(*out),
            BufferState {
                size: i.size,
                usage,
                flags: i.flags,
                requirements: req,
                bound: None,
                address_taken: false,
                key,
                stack,
            },
        );
        if let Some(p) = cx.dev.profile() {
            p.on_create_buffer(cx.dev, raw(*out));
        }
        // The key was cloned before the insert: no map guard may be held while enforce locks.
        if let (Some(e), Some(k)) = (cx.dev.enforce(), planned) {
            e.buffer_created(raw(*out), &k);
        }
    }
    r
}

pub unsafe fn vkDestroyBuffer(
    cx: &calls_gen::vkDestroyBuffer<'_>,
    device: vk::Device,
    buffer: vk::Buffer,
    alloc: *const vk::AllocationCallbacks<'_>,
) {
    // Enforce: a memory whose free waited for this buffer (its last guest) is freed after it.
    let deferred_free = cx
        .dev
        .enforce()
        .and_then(|e| e.buffer_destroyed(cx.dev, raw(buffer)));
    if let Some(p) = cx.dev.profile() {
        p.before_destroy_buffer(raw(buffer));
    }
    cx.dev.state.buffers.remove(&raw(buffer));
    cx.down((cx.next)(device, buffer, alloc));
    if let (Some(e), Some(f)) = (cx.dev.enforce(), deferred_free) {
        e.free_now(cx.dev, f);
    }
}

pub unsafe fn vkBindBufferMemory(
    cx: &calls_gen::vkBindBufferMemory<'_>,
    device: vk::Device,
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    offset: vk::DeviceSize,
) -> vk::Result {
    if let Some(e) = cx.dev.enforce() {
        // Redirected, deferred or as asked; records where the buffer really is.
        return e.bind(
            cx.dev,
            raw(buffer),
            raw(memory),
            offset,
            false,
            &mut |m, o| cx.down((cx.next)(device, buffer, vk::Handle::from_raw(m), o)),
        );
    }
    let r = cx.down((cx.next)(device, buffer, memory, offset));
    if r == vk::Result::SUCCESS {
        if let Some(mut b) = cx.dev.state.buffers.get_mut(&raw(buffer)) {
            b.bound = Some((raw(memory), offset));
        }
        if let Some(p) = cx.dev.profile() {
            p.on_bind(cx.dev, raw(buffer), raw(memory), offset);
        }
    }
    r
}

pub unsafe fn vkBindBufferMemory2(
    cx: &calls_gen::vkBindBufferMemory2<'_>,
    device: vk::Device,
    count: u32,
    infos: *const vk::BindBufferMemoryInfo<'_>,
) -> vk::Result {
    if let Some(e) = cx.dev.enforce() {
        return crate::enforce::bind2(e, cx.dev, count, infos, &mut |one| {
            cx.down((cx.next)(device, 1, one))
        });
    }
    let r = cx.down((cx.next)(device, count, infos));
    if r == vk::Result::SUCCESS && count > 0 {
        for i in std::slice::from_raw_parts(infos, count as usize) {
            if let Some(mut b) = cx.dev.state.buffers.get_mut(&raw(i.buffer)) {
                b.bound = Some((raw(i.memory), i.memory_offset));
            }
            if let Some(p) = cx.dev.profile() {
                p.on_bind(cx.dev, raw(i.buffer), raw(i.memory), i.memory_offset);
            }
        }
    }
    r
}

pub unsafe fn vkGetBufferDeviceAddress(
    cx: &calls_gen::vkGetBufferDeviceAddress<'_>,
    device: vk::Device,
    info: *const vk::BufferDeviceAddressInfo<'_>,
) -> vk::DeviceAddress {
    if let Some(mut b) = cx.dev.state.buffers.get_mut(&raw((*info).buffer)) {
        b.address_taken = true;
    }
    if let Some(p) = cx.dev.profile() {
        p.on_device_address(raw((*info).buffer));
    }
    if let Some(e) = cx.dev.enforce() {
        e.touch(cx.dev, raw((*info).buffer));
    }
    cx.down((cx.next)(device, info))
}

// The capture address is a device address for replay tools: it pins the buffer's address
// like vkGetBufferDeviceAddress (S3).
pub unsafe fn vkGetBufferOpaqueCaptureAddress(
    cx: &calls_gen::vkGetBufferOpaqueCaptureAddress<'_>,
    device: vk::Device,
    info: *const vk::BufferDeviceAddressInfo<'_>,
) -> u64 {
    if let Some(mut b) = cx.dev.state.buffers.get_mut(&raw((*info).buffer)) {
        b.address_taken = true;
    }
    if let Some(p) = cx.dev.profile() {
        p.on_device_address(raw((*info).buffer));
    }
    if let Some(e) = cx.dev.enforce() {
        e.touch(cx.dev, raw((*info).buffer));
    }
    cx.down((cx.next)(device, info))
}

pub unsafe fn vkCreateBufferView(
    cx: &calls_gen::vkCreateBufferView<'_>,
    device: vk::Device,
    info: *const vk::BufferViewCreateInfo<'_>,
    alloc: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::BufferView,
) -> vk::Result {
    if let Some(e) = cx.dev.enforce() {
        e.touch(cx.dev, raw((*info).buffer)); // a view needs its buffer bound
    }
    let r = cx.down((cx.next)(device, info, alloc, out));
    if let (vk::Result::SUCCESS, Some(p)) = (r, cx.dev.profile()) {
        let i = &*info;
        p.on_buffer_view(raw(*out), raw(i.buffer), i.offset, i.range);
    }
    r
}

pub unsafe fn vkDestroyBufferView(
    cx: &calls_gen::vkDestroyBufferView<'_>,
    device: vk::Device,
    view: vk::BufferView,
    alloc: *const vk::AllocationCallbacks<'_>,
) {
    if let Some(p) = cx.dev.profile() {
        p.on_destroy_view(raw(view));
    }
    cx.down((cx.next)(device, view, alloc))
}

pub unsafe fn vkBindImageMemory(
    cx: &calls_gen::vkBindImageMemory<'_>,
    device: vk::Device,
    image: vk::Image,
    memory: vk::DeviceMemory,
    offset: vk::DeviceSize,
) -> vk::Result {
    super::image::check_bind(cx.dev, raw(image), raw(memory));
    // An image bound into an allocation echo did not make: it is made now, with its bytes.
    if let Some(e) = cx.dev.enforce().filter(|e| e.any_virtual()) {
        let why = format!("image {:#x} is bound into it", raw(image));
        match e.driver_memory_now(cx.dev, raw(memory), &why) {
            Ok(m) => return cx.down((cx.next)(device, image, vk::Handle::from_raw(m), offset)),
            Err(r) => return cx.down(r),
        }
    }
    let r = cx.down((cx.next)(device, image, memory, offset));
    if r == vk::Result::SUCCESS {
        image_bound(cx.dev, device, image, memory, offset, false);
    }
    r
}

pub unsafe fn vkBindImageMemory2(
    cx: &calls_gen::vkBindImageMemory2<'_>,
    device: vk::Device,
    count: u32,
    infos: *const vk::BindImageMemoryInfo<'_>,
) -> vk::Result {
    if count > 0 && !infos.is_null() {
        for i in std::slice::from_raw_parts(infos, count as usize) {
            super::image::check_bind(cx.dev, raw(i.image), raw(i.memory));
        }
    }
    if let Some(e) = cx
        .dev
        .enforce()
        .filter(|e| e.any_virtual() && count > 0 && !infos.is_null())
    {
        let mut patched: Vec<vk::BindImageMemoryInfo<'_>> =
            std::slice::from_raw_parts(infos, count as usize).to_vec();
        for i in patched.iter_mut() {
            let why = format!("image {:#x} is bound into it", raw(i.image));
            match e.driver_memory_now(cx.dev, raw(i.memory), &why) {
                Ok(m) => i.memory = vk::Handle::from_raw(m),
                Err(r) => return cx.down(r),
            }
        }
        return cx.down((cx.next)(device, count, patched.as_ptr()));
    }
    let r = cx.down((cx.next)(device, count, infos));
    if r == vk::Result::SUCCESS && cx.dev.profile().is_some() {
        for i in crate::dispatch::slice(infos, count) {
            image_bound(
                cx.dev,
                device,
                i.image,
                i.memory,
                i.memory_offset,
                !i.p_next.is_null(),
            );
        }
    }
    r
}
