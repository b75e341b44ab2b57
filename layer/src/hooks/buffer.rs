//! Buffers: creation, memory binding, device addresses (chapter "Resource Creation").

use super::calls_gen;
use crate::chassis;
use crate::dispatch::{raw, slice, DeviceData};
use crate::events::{BindDown, BufferBinds, Cmd, CreateBuffer};
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

pub unsafe fn vkCreateBuffer(
    cx: &calls_gen::vkCreateBuffer<'_>,
    device: vk::Device,
    info: *const vk::BufferCreateInfo<'_>,
    alloc: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::Buffer,
) -> vk::Result {
    // A mode may create it with another info first (profile and guarded enforce declare the
    // host-allocation handle type, for double-mapped memory).
    let c = CreateBuffer {
        info: info.cast(),
        out,
    };
    chassis::create_buffer(cx.dev, c, |c| {
        let r = cx.down((cx.next)(device, c.info.cast(), alloc, out));
        if r == vk::Result::SUCCESS {
            created(cx.dev, device, &*info, *out);
        }
        r
    })
}

/// The record of buffer `buffer`, created as the application asked with `i`.
unsafe fn created(
    dev: &DeviceData,
    device: vk::Device,
    i: &vk::BufferCreateInfo<'_>,
    buffer: vk::Buffer,
) {
    let usage = usage_of(i);
    let mut req = vk::MemoryRequirements::default();
    (dev.fp.get_buffer_memory_requirements)(device, buffer, &mut req);
    let (key, stack) = if dev.wants_key(i.size) {
        let (hash, frames) = dev.site();
        let key = dev
            .state
            .buffer_keys
            .key(hash, i.size, usage.as_raw(), i.flags.as_raw());
        (Some(key), frames)
    } else {
        (None, Vec::new())
    };
    dev.state.buffers.insert(
        raw(buffer),
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
}

pub unsafe fn vkDestroyBuffer(
    cx: &calls_gen::vkDestroyBuffer<'_>,
    device: vk::Device,
    buffer: vk::Buffer,
    alloc: *const vk::AllocationCallbacks<'_>,
) {
    chassis::destroy_buffer(cx.dev, raw(buffer), || {
        cx.dev.state.buffers.remove(&raw(buffer));
        cx.down((cx.next)(device, buffer, alloc))
    })
}

pub unsafe fn vkBindBufferMemory(
    cx: &calls_gen::vkBindBufferMemory<'_>,
    device: vk::Device,
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    offset: vk::DeviceSize,
) -> vk::Result {
    let b = BufferBinds::One {
        buffer: raw(buffer),
        memory: raw(memory),
        offset,
    };
    chassis::bind_buffers(cx.dev, &b, |how| match how {
        BindDown::One { memory, offset, .. } => cx.down((cx.next)(
            device,
            buffer,
            vk::Handle::from_raw(memory),
            offset,
        )),
        BindDown::AsAsked => {
            let r = cx.down((cx.next)(device, buffer, memory, offset));
            if r == vk::Result::SUCCESS {
                bound(cx.dev, &b);
            }
            r
        }
    })
}

/// Binds that went down as asked: where each buffer is, told to the modes one by one.
unsafe fn bound(dev: &DeviceData, b: &BufferBinds<'_>) {
    for (buffer, memory, offset, _) in b.each() {
        if let Some(mut s) = dev.state.buffers.get_mut(&buffer) {
            s.bound = Some((memory, offset));
        }
        let cmd = Cmd::BufferBound {
            buffer,
            memory,
            offset,
        };
        chassis::after(dev, &cmd);
    }
}

pub unsafe fn vkBindBufferMemory2(
    cx: &calls_gen::vkBindBufferMemory2<'_>,
    device: vk::Device,
    count: u32,
    infos: *const vk::BindBufferMemoryInfo<'_>,
) -> vk::Result {
    let all = slice(infos, count);
    let b = BufferBinds::Infos(all);
    chassis::bind_buffers(cx.dev, &b, |how| match how {
        BindDown::One {
            index,
            memory,
            offset,
        } => {
            let mut one = all[index];
            one.memory = vk::Handle::from_raw(memory);
            one.memory_offset = offset;
            cx.down((cx.next)(device, 1, &one))
        }
        BindDown::AsAsked => {
            let r = cx.down((cx.next)(device, count, infos));
            if r == vk::Result::SUCCESS {
                bound(cx.dev, &b);
            }
            r
        }
    })
}

/// A device address of `buffer` was asked for (`vkGetBufferDeviceAddress`, and the capture
/// address of `vkGetBufferOpaqueCaptureAddress`, which replay tools use as one: both pin the
/// buffer's address, S3); `down()` asks the next layer.
unsafe fn address<R>(dev: &DeviceData, buffer: vk::Buffer, down: impl FnOnce() -> R) -> R {
    if let Some(mut b) = dev.state.buffers.get_mut(&raw(buffer)) {
        b.address_taken = true;
    }
    chassis::before(dev, &Cmd::DeviceAddress(raw(buffer)));
    down()
}

pub unsafe fn vkGetBufferDeviceAddress(
    cx: &calls_gen::vkGetBufferDeviceAddress<'_>,
    device: vk::Device,
    info: *const vk::BufferDeviceAddressInfo<'_>,
) -> vk::DeviceAddress {
    address(cx.dev, (*info).buffer, || cx.down((cx.next)(device, info)))
}

pub unsafe fn vkGetBufferOpaqueCaptureAddress(
    cx: &calls_gen::vkGetBufferOpaqueCaptureAddress<'_>,
    device: vk::Device,
    info: *const vk::BufferDeviceAddressInfo<'_>,
) -> u64 {
    address(cx.dev, (*info).buffer, || cx.down((cx.next)(device, info)))
}

pub unsafe fn vkCreateBufferView(
    cx: &calls_gen::vkCreateBufferView<'_>,
    device: vk::Device,
    info: *const vk::BufferViewCreateInfo<'_>,
    alloc: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::BufferView,
) -> vk::Result {
    chassis::call(cx.dev, &Cmd::CreateBufferView(&*info, out), || {
        cx.down((cx.next)(device, info, alloc, out))
    })
}

pub unsafe fn vkDestroyBufferView(
    cx: &calls_gen::vkDestroyBufferView<'_>,
    device: vk::Device,
    view: vk::BufferView,
    alloc: *const vk::AllocationCallbacks<'_>,
) {
    chassis::call(cx.dev, &Cmd::DestroyBufferView(raw(view)), || {
        cx.down((cx.next)(device, view, alloc))
    })
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
    let why = || format!("image {:#x} is bound into it", raw(image));
    match chassis::driver_memory(cx.dev, raw(memory), &why) {
        Some(Ok(m)) => return cx.down((cx.next)(device, image, vk::Handle::from_raw(m), offset)),
        Some(Err(r)) => return cx.down(r),
        None => {}
    }
    let r = cx.down((cx.next)(device, image, memory, offset));
    if r == vk::Result::SUCCESS {
        let cmd = Cmd::ImageBound {
            image,
            memory,
            offset,
            chained: false,
        };
        chassis::after(cx.dev, &cmd);
    }
    r
}

pub unsafe fn vkBindImageMemory2(
    cx: &calls_gen::vkBindImageMemory2<'_>,
    device: vk::Device,
    count: u32,
    infos: *const vk::BindImageMemoryInfo<'_>,
) -> vk::Result {
    let all = slice(infos, count);
    for i in all {
        super::image::check_bind(cx.dev, raw(i.image), raw(i.memory));
    }
    // Images bound into allocations echo did not make: they are made now, with their bytes.
    let mut patched: Vec<vk::BindImageMemoryInfo<'_>> = Vec::new();
    for (k, i) in all.iter().enumerate() {
        let why = || format!("image {:#x} is bound into it", raw(i.image));
        match chassis::driver_memory(cx.dev, raw(i.memory), &why) {
            None => break, // handles are the application's
            Some(Ok(m)) => {
                if k == 0 {
                    patched = all.to_vec();
                }
                patched[k].memory = vk::Handle::from_raw(m);
            }
            Some(Err(r)) => return cx.down(r),
        }
    }
    if !patched.is_empty() {
        return cx.down((cx.next)(device, count, patched.as_ptr()));
    }
    let r = cx.down((cx.next)(device, count, infos));
    if r == vk::Result::SUCCESS {
        for i in all {
            let cmd = Cmd::ImageBound {
                image: i.image,
                memory: i.memory,
                offset: i.memory_offset,
                chained: !i.p_next.is_null(),
            };
            chassis::after(cx.dev, &cmd);
        }
    }
    r
}
