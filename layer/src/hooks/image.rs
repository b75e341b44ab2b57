//! Images, as far as echo's imported memory goes (issue 23).
//!
//! Profile mode backs host-visible allocations with a memfd imported through
//! `VK_EXT_external_memory_host` (DESIGN §4), and guarded enforce does the same for the memory of
//! guarded groups. An image bound into such memory must have been created with
//! `VkExternalMemoryImageCreateInfo { HOST_ALLOCATION_EXT }` (VUID-vkBindImageMemory-memory-02729),
//! and that handle type is legal only where `vkGetPhysicalDeviceImageFormatProperties2` with
//! `VkPhysicalDeviceExternalImageFormatInfo` says the image's format, type, tiling, usage and flags
//! can import it (VUID-VkImageCreateInfo-pNext-00990). So at `vkCreateImage`, while imports may
//! happen on the device: where the query says yes, the create info gets the handle type in front;
//! where it says no (or cannot be asked), the image is created as asked and the device stops
//! importing (`DeviceState::image_imports`): later allocations stay off the import path, so an
//! image bound into them is valid, and profile's host-access evidence for buffers in them is
//! missing, so their candidates are refused (fail closed). An image the driver cannot import that
//! is bound into memory imported *before* it was created cannot be made valid any more; echo says
//! so once (an error line) — the bind goes down as the application asked.

use super::hook;
use crate::dispatch::{raw, DeviceData};
use ash::vk;
use std::ffi::c_void;
use std::sync::atomic::Ordering;

/// Whether echo may import memory on this device from now on (profile's double mapping or
/// guarded enforce).
pub fn imports_possible(dev: &DeviceData) -> bool {
    dev.profile().is_some_and(|p| p.may_import())
        || dev.enforce().is_some_and(|e| e.guard().is_some())
}

/// `info` with `VkExternalMemoryImageCreateInfo { HOST_ALLOCATION_EXT }` in front.
pub struct ImagePatch {
    info: vk::ImageCreateInfo<'static>,
    ext: vk::ExternalMemoryImageCreateInfo<'static>,
}

impl ImagePatch {
    /// The create info to pass down (valid while `self` is not moved).
    pub fn info(&self) -> *const vk::ImageCreateInfo<'static> {
        &self.info
    }
}

/// Why an image cannot carry the host-allocation handle type; `Ok(Some)`: it can (patched info);
/// `Ok(None)`: it is the application's own external image, left alone (it is bound into its
/// external memory, which echo never imports).
///
/// # Safety
/// `info` must be a valid create info of an image of `dev`.
pub unsafe fn host_allocation_patch(
    dev: &DeviceData,
    info: &vk::ImageCreateInfo<'_>,
) -> Result<Option<Box<ImagePatch>>, String> {
    let mut p = info.p_next as *const vk::BaseInStructure<'_>;
    while !p.is_null() {
        match (*p).s_type {
            vk::StructureType::EXTERNAL_MEMORY_IMAGE_CREATE_INFO => return Ok(None),
            vk::StructureType::IMAGE_DRM_FORMAT_MODIFIER_LIST_CREATE_INFO_EXT
            | vk::StructureType::IMAGE_DRM_FORMAT_MODIFIER_EXPLICIT_CREATE_INFO_EXT => {
                return Err("it has a DRM format modifier".into())
            }
            _ => {}
        }
        p = (*p).p_next;
    }
    let inst = dev
        .instance
        .as_ref()
        .ok_or("its instance was not created through echo")?;
    let query = inst
        .image_format_properties2(dev.physical_device)
        .ok_or("vkGetPhysicalDeviceImageFormatProperties2 with external-memory info is not available on this instance")?;
    let ext_info = vk::PhysicalDeviceExternalImageFormatInfo {
        handle_type: vk::ExternalMemoryHandleTypeFlags::HOST_ALLOCATION_EXT,
        ..Default::default()
    };
    let fmt_info = vk::PhysicalDeviceImageFormatInfo2 {
        p_next: &ext_info as *const _ as *const c_void,
        format: info.format,
        ty: info.image_type,
        tiling: info.tiling,
        usage: info.usage,
        flags: info.flags,
        ..Default::default()
    };
    let mut ext_props = vk::ExternalImageFormatProperties::default();
    let mut props = vk::ImageFormatProperties2 {
        p_next: &mut ext_props as *mut _ as *mut c_void,
        ..Default::default()
    };
    let r = query(dev.physical_device, &fmt_info, &mut props);
    let m = ext_props.external_memory_properties;
    if r != vk::Result::SUCCESS {
        return Err(format!(
            "the driver does not import host allocations for {:?} {:?} images with usage {:#x} ({r:?})",
            info.format,
            info.tiling,
            info.usage.as_raw()
        ));
    }
    if !m
        .external_memory_features
        .contains(vk::ExternalMemoryFeatureFlags::IMPORTABLE)
        || !m
            .compatible_handle_types
            .contains(vk::ExternalMemoryHandleTypeFlags::HOST_ALLOCATION_EXT)
        || m.external_memory_features
            .contains(vk::ExternalMemoryFeatureFlags::DEDICATED_ONLY)
    {
        return Err(format!(
            "the driver does not import host allocations for {:?} {:?} images with usage {:#x} (features {:#x})",
            info.format,
            info.tiling,
            info.usage.as_raw(),
            m.external_memory_features.as_raw()
        ));
    }
    let mut b = Box::new(ImagePatch {
        info: std::mem::transmute::<vk::ImageCreateInfo<'_>, vk::ImageCreateInfo<'static>>(*info),
        ext: vk::ExternalMemoryImageCreateInfo::default(),
    });
    b.ext.handle_types = vk::ExternalMemoryHandleTypeFlags::HOST_ALLOCATION_EXT;
    b.ext.p_next = info.p_next;
    b.info.p_next = &b.ext as *const _ as *const c_void;
    Ok(Some(b))
}

/// Before an image bind into `memory`: an image created without the host-allocation handle type
/// bound into memory echo imported is the one case that cannot be made valid (module doc).
pub fn check_bind(dev: &DeviceData, image: u64, memory: u64) {
    let s = &dev.state.image_imports;
    if s.refused.load(Ordering::Relaxed)
        && s.imported.contains(&memory)
        && s.unimportable.contains(&image)
    {
        crate::log::warn_once(
            "image-in-imported-memory",
            format_args!(
                "image {image:#x} (whose format the driver cannot import) is bound into memory {memory:#x} that echo imported before the image was created; the bind is not valid usage (VUID-vkBindImageMemory-memory-02729); allocations made from now on are not imported"
            ),
        );
    }
}

hook! {
    fn vkCreateImage(
        cx,
        device: vk::Device,
        info: *const vk::ImageCreateInfo<'_>,
        alloc: *const vk::AllocationCallbacks<'_>,
        out: *mut vk::Image,
    ) -> vk::Result {
        if !imports_possible(cx.dev) || cx.dev.state.image_imports.refused.load(Ordering::Relaxed) {
            return cx.down((cx.next)(device, info, alloc, out));
        }
        match host_allocation_patch(cx.dev, &*info) {
            Ok(None) => cx.down((cx.next)(device, info, alloc, out)),
            Ok(Some(patch)) => {
                let r = cx.down((cx.next)(device, patch.info(), alloc, out));
                if r == vk::Result::SUCCESS {
                    return r;
                }
                let r = cx.down((cx.next)(device, info, alloc, out));
                if r == vk::Result::SUCCESS {
                    cx.dev.state.image_imports.refuse(raw(*out), "the driver refused the image with the host-allocation handle type");
                }
                r
            }
            Err(why) => {
                let r = cx.down((cx.next)(device, info, alloc, out));
                if r == vk::Result::SUCCESS {
                    cx.dev.state.image_imports.refuse(raw(*out), &why);
                }
                r
            }
        }
    }

    fn vkDestroyImage(cx, device: vk::Device, image: vk::Image, alloc: *const vk::AllocationCallbacks<'_>) {
        let s = &cx.dev.state.image_imports;
        if s.refused.load(Ordering::Relaxed) {
            s.unimportable.remove(&raw(image));
        }
        cx.down((cx.next)(device, image, alloc))
    }
}
