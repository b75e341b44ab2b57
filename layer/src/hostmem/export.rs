//! Which way a device's double mapping is made (issue 49), and the second way: the driver's own
//! memory, exported as an opaque file descriptor (`VK_KHR_external_memory_fd`) and mapped twice
//! by echo.
//!
//! Binding an image into memory that was imported (`VkImportMemoryHostPointerInfoEXT`) or
//! allocated for export (`VkExportMemoryAllocateInfo`) is valid only when the image was created
//! with that handle type in `VkExternalMemoryImageCreateInfo` (VUID-vkBindImageMemory-memory-02729
//! and -02728), and that is legal only where the driver reports the handle type for the image
//! (VUID-VkImageCreateInfo-pNext-00990). Sub-allocators place images in blocks made before the
//! images exist, so echo must pick, per device and before any allocation, a way every image can
//! follow:
//!
//! - [`Backing::HostImport`]: echo's memfd, view A imported as a host allocation. Lavapipe (22.3
//!   and 25) imports host allocations for images of every format; SwiftShader for none.
//! - [`Backing::FdExport`]: the driver allocates, exports an opaque fd, echo maps it twice. The
//!   layout of an opaque fd is the driver's business, so echo uses it only after checking, on the
//!   device, that its mapping of the fd shows the bytes the driver's mapping shows, both ways
//!   ([`aliases`]): SwiftShader's fds are the memfd its mapping uses; lavapipe 22.3's are not (a
//!   header), so lavapipe stays on host imports.
//!
//! [`images_follow`] asks the driver about the kinds of images programs place in blocks (colour
//! and depth attachments, sampled and transfer images, optimal and linear): the host-import way
//! is taken where every one of them can carry its handle type, else the fd way where every one
//! can carry the opaque-fd type, else host imports as before (images that cannot follow then stop
//! the imports of later allocations, hooks/image.rs).

use crate::records::{Device, InstanceData};
use ash::vk;
use std::ffi::c_void;

/// The extension of the fd way.
pub const KHR_MEMORY_FD: &std::ffi::CStr = c"VK_KHR_external_memory_fd";

/// How a device's double mappings are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backing {
    /// echo's memfd, imported with `VK_EXT_external_memory_host`.
    HostImport,
    /// The driver's memory, exported as an opaque fd (`VK_KHR_external_memory_fd`).
    FdExport,
}

impl Backing {
    pub fn handle_type(self) -> vk::ExternalMemoryHandleTypeFlags {
        match self {
            Backing::HostImport => vk::ExternalMemoryHandleTypeFlags::HOST_ALLOCATION_EXT,
            Backing::FdExport => vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD,
        }
    }

    /// What the driver must report for a resource to live in such memory.
    pub fn feature(self) -> vk::ExternalMemoryFeatureFlags {
        match self {
            Backing::HostImport => vk::ExternalMemoryFeatureFlags::IMPORTABLE,
            Backing::FdExport => vk::ExternalMemoryFeatureFlags::EXPORTABLE,
        }
    }

    /// The validation message a bind of an image without the handle type would draw.
    pub fn vuid(self) -> &'static str {
        match self {
            Backing::HostImport => "VUID-vkBindImageMemory-memory-02729",
            Backing::FdExport => "VUID-vkBindImageMemory-memory-02728",
        }
    }

    /// For the trace and the logs.
    pub fn name(self) -> &'static str {
        match self {
            Backing::HostImport => "VK_EXT_external_memory_host",
            Backing::FdExport => "VK_KHR_external_memory_fd",
        }
    }
}

/// The image parameters the driver is asked about.
pub struct ImageKind {
    pub format: vk::Format,
    pub ty: vk::ImageType,
    pub tiling: vk::ImageTiling,
    pub usage: vk::ImageUsageFlags,
    pub flags: vk::ImageCreateFlags,
}

/// Whether an image of `kind` may be created with `backing`'s handle type and live in such
/// memory; `Err` with why not (the query's result, or the features it reported). An image the
/// driver does not support at all is `Ok` (it will never exist).
pub fn image_follows(
    inst: &InstanceData,
    pd: vk::PhysicalDevice,
    kind: &ImageKind,
    backing: Backing,
) -> Result<(), String> {
    let query = inst
        .image_format_properties2(pd)
        .ok_or("vkGetPhysicalDeviceImageFormatProperties2 is not available on this instance")?;
    let plain = vk::PhysicalDeviceImageFormatInfo2 {
        format: kind.format,
        ty: kind.ty,
        tiling: kind.tiling,
        usage: kind.usage,
        flags: kind.flags,
        ..Default::default()
    };
    let mut props = vk::ImageFormatProperties2::default();
    // SAFETY: valid in and out structures for a physical device of this instance.
    if unsafe { query(pd, &plain, &mut props) } != vk::Result::SUCCESS {
        return Ok(());
    }
    let ext_info = vk::PhysicalDeviceExternalImageFormatInfo {
        handle_type: backing.handle_type(),
        ..Default::default()
    };
    let with_ext = vk::PhysicalDeviceImageFormatInfo2 {
        p_next: &ext_info as *const _ as *const c_void,
        ..plain
    };
    let mut ext_props = vk::ExternalImageFormatProperties::default();
    let mut props = vk::ImageFormatProperties2 {
        p_next: &mut ext_props as *mut _ as *mut c_void,
        ..Default::default()
    };
    // SAFETY: as above.
    let r = unsafe { query(pd, &with_ext, &mut props) };
    let m = ext_props.external_memory_properties;
    if r != vk::Result::SUCCESS {
        return Err(format!(
            "the driver does not give {:?} {:?} images with usage {:#x} the {} handle type ({r:?})",
            kind.format,
            kind.tiling,
            kind.usage.as_raw(),
            backing.name()
        ));
    }
    if !m.external_memory_features.contains(backing.feature())
        || !m.compatible_handle_types.contains(backing.handle_type())
        || m.external_memory_features
            .contains(vk::ExternalMemoryFeatureFlags::DEDICATED_ONLY)
    {
        return Err(format!(
            "the driver does not give {:?} {:?} images with usage {:#x} the {} handle type (features {:#x})",
            kind.format,
            kind.tiling,
            kind.usage.as_raw(),
            backing.name(),
            m.external_memory_features.as_raw()
        ));
    }
    Ok(())
}

/// Whether the images programs place in blocks can follow `backing` on this device (see the
/// module doc): colour, depth, packed and compressed formats, optimal and linear.
pub fn images_follow(inst: &InstanceData, pd: vk::PhysicalDevice, backing: Backing) -> bool {
    use vk::{Format as F, ImageTiling as T, ImageUsageFlags as U};
    let two_d = |format, tiling, usage| ImageKind {
        format,
        ty: vk::ImageType::TYPE_2D,
        tiling,
        usage,
        flags: vk::ImageCreateFlags::empty(),
    };
    let kinds = [
        two_d(F::R8G8B8A8_UNORM, T::OPTIMAL, U::SAMPLED | U::TRANSFER_DST),
        two_d(
            F::R8G8B8A8_UNORM,
            T::OPTIMAL,
            U::COLOR_ATTACHMENT | U::TRANSFER_SRC | U::SAMPLED,
        ),
        two_d(F::R8G8B8A8_UNORM, T::OPTIMAL, U::STORAGE | U::TRANSFER_SRC),
        two_d(F::D32_SFLOAT, T::OPTIMAL, U::DEPTH_STENCIL_ATTACHMENT),
        two_d(
            F::E5B9G9R9_UFLOAT_PACK32,
            T::OPTIMAL,
            U::SAMPLED | U::TRANSFER_DST,
        ),
        two_d(
            F::BC1_RGBA_UNORM_BLOCK,
            T::OPTIMAL,
            U::SAMPLED | U::TRANSFER_DST,
        ),
        two_d(
            F::R8G8B8A8_UNORM,
            T::LINEAR,
            U::TRANSFER_SRC | U::TRANSFER_DST,
        ),
    ];
    kinds
        .iter()
        .all(|k| image_follows(inst, pd, k, backing).is_ok())
}

/// Whether buffers can live in memory exported as an opaque fd.
pub fn buffers_export(inst: &InstanceData, pd: vk::PhysicalDevice) -> bool {
    let Some(f) = inst.external_buffer_properties(pd) else {
        return false;
    };
    let info = vk::PhysicalDeviceExternalBufferInfo {
        usage: vk::BufferUsageFlags::TRANSFER_SRC
            | vk::BufferUsageFlags::TRANSFER_DST
            | vk::BufferUsageFlags::STORAGE_BUFFER
            | vk::BufferUsageFlags::UNIFORM_BUFFER
            | vk::BufferUsageFlags::VERTEX_BUFFER
            | vk::BufferUsageFlags::INDEX_BUFFER,
        handle_type: vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD,
        ..Default::default()
    };
    let mut props = vk::ExternalBufferProperties::default();
    // SAFETY: valid in and out structures for a physical device of this instance.
    unsafe { f(pd, &info, &mut props) };
    let m = props.external_memory_properties;
    m.external_memory_features
        .contains(vk::ExternalMemoryFeatureFlags::EXPORTABLE)
        && !m
            .external_memory_features
            .contains(vk::ExternalMemoryFeatureFlags::DEDICATED_ONLY)
        && m.compatible_handle_types
            .contains(vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD)
}

/// A patched `vkAllocateMemory` for the fd way: `VkExportMemoryAllocateInfo { OPAQUE_FD }` in
/// front of the application's chain. Boxed: the links stay valid while its owner moves.
pub struct ExportInfo {
    info: vk::MemoryAllocateInfo<'static>,
    export: vk::ExportMemoryAllocateInfo<'static>,
}

impl ExportInfo {
    /// `None` when the chain already exports or imports, or is dedicated to an image (an image
    /// block holds no buffer echo watches).
    ///
    /// # Safety
    /// `info` is a valid allocate info.
    pub unsafe fn new(info: &vk::MemoryAllocateInfo<'_>) -> Option<Box<ExportInfo>> {
        let mut p = info.p_next as *const vk::BaseInStructure<'_>;
        while !p.is_null() {
            match (*p).s_type {
                vk::StructureType::EXPORT_MEMORY_ALLOCATE_INFO
                | vk::StructureType::IMPORT_MEMORY_FD_INFO_KHR
                | vk::StructureType::IMPORT_MEMORY_HOST_POINTER_INFO_EXT => return None,
                vk::StructureType::MEMORY_DEDICATED_ALLOCATE_INFO
                    if (*(p as *const vk::MemoryDedicatedAllocateInfo<'_>)).image
                        != vk::Image::null() =>
                {
                    return None
                }
                _ => {}
            }
            p = (*p).p_next;
        }
        let mut b = Box::new(ExportInfo {
            info: std::mem::transmute::<vk::MemoryAllocateInfo<'_>, vk::MemoryAllocateInfo<'static>>(
                *info,
            ),
            export: vk::ExportMemoryAllocateInfo::default(),
        });
        b.export.handle_types = vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD;
        b.export.p_next = info.p_next;
        b.info.p_next = &b.export as *const _ as *const c_void;
        Some(b)
    }

    /// The allocate info to pass down (valid while `self` lives).
    pub fn info(&self) -> *const vk::MemoryAllocateInfo<'static> {
        &self.info
    }
}

/// The opaque fd of exported `memory` (the caller owns it), checked to be a file at least `size`
/// bytes long.
pub fn memory_fd(
    get: vk::PFN_vkGetMemoryFdKHR,
    device: vk::Device,
    memory: vk::DeviceMemory,
    size: u64,
) -> Result<libc::c_int, String> {
    let info = vk::MemoryGetFdInfoKHR {
        memory,
        handle_type: vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD,
        ..Default::default()
    };
    let mut fd: libc::c_int = -1;
    // SAFETY: memory was allocated for export of this handle type on this device.
    let r = unsafe { get(device, &info, &mut fd) };
    if r != vk::Result::SUCCESS || fd < 0 {
        return Err(format!("vkGetMemoryFdKHR: {r:?}"));
    }
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd, &mut st) } != 0 || (st.st_size as u64) < size {
        unsafe { libc::close(fd) };
        return Err(format!(
            "the exported fd is not a file of at least {size} bytes ({} bytes)",
            st.st_size
        ));
    }
    Ok(fd)
}

/// Whether echo's mapping of an exported allocation's fd shows the bytes the driver's mapping
/// shows, both ways, on this device: one small allocation of host-visible memory type
/// `type_index`, made, mapped, compared and freed through the next layer.
pub fn aliases(dev: &Device, get: vk::PFN_vkGetMemoryFdKHR, type_index: u32) -> Result<(), String> {
    const LEN: u64 = 64 << 10;
    let info = vk::MemoryAllocateInfo {
        allocation_size: LEN,
        memory_type_index: type_index,
        ..Default::default()
    };
    // SAFETY: a valid allocate info.
    let export = unsafe { ExportInfo::new(&info) }.ok_or("no export chain")?;
    let mut memory = vk::DeviceMemory::null();
    let fp = &dev.fp;
    // SAFETY: the next layer's commands on this device, with valid arguments.
    unsafe {
        let r = (fp.allocate_memory)(dev.handle, export.info(), std::ptr::null(), &mut memory);
        if r != vk::Result::SUCCESS {
            return Err(format!("allocating exportable memory: {r:?}"));
        }
        let mut drv: *mut c_void = std::ptr::null_mut();
        let r = (fp.map_memory)(
            dev.handle,
            memory,
            0,
            vk::WHOLE_SIZE,
            vk::MemoryMapFlags::empty(),
            &mut drv,
        );
        let result = if r != vk::Result::SUCCESS || drv.is_null() {
            Err(format!("mapping it: {r:?}"))
        } else {
            let checked = memory_fd(get, dev.handle, memory, LEN).and_then(|fd| {
                let p = libc::mmap(
                    std::ptr::null_mut(),
                    LEN as usize,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    fd,
                    0,
                );
                libc::close(fd);
                if p == libc::MAP_FAILED {
                    return Err("mmap of the exported fd failed".to_string());
                }
                let (a, b) = (drv as *mut u8, p as *mut u8);
                let mut ok = true;
                for (i, at) in [0usize, 4096, LEN as usize - 8].into_iter().enumerate() {
                    let v = 0x5a00 + i as u16;
                    std::ptr::write_volatile(a.add(at) as *mut u16, v);
                    ok &= std::ptr::read_volatile(b.add(at) as *const u16) == v;
                    std::ptr::write_volatile(b.add(at + 2) as *mut u16, !v);
                    ok &= std::ptr::read_volatile(a.add(at + 2) as *const u16) == !v;
                }
                libc::munmap(p, LEN as usize);
                if ok {
                    Ok(())
                } else {
                    Err("a mapping of the exported fd does not show the driver's bytes".to_string())
                }
            });
            (fp.unmap_memory)(dev.handle, memory);
            checked
        };
        (fp.free_memory)(dev.handle, memory, std::ptr::null());
        result
    }
}
