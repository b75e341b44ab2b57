//! Images, as far as echo's double-mapped memory goes (issues 23 and 49).
//!
//! Profile mode backs host-visible allocations with a double mapping — echo's memfd imported
//! through `VK_EXT_external_memory_host`, or the driver's memory exported as an opaque fd
//! (`hostmem/export.rs` picks the way per device) — and guarded enforce imports the memory of
//! guarded groups. An image bound into such memory must have been created with that handle type
//! in `VkExternalMemoryImageCreateInfo` (VUID-vkBindImageMemory-memory-02729 / -02728), which is
//! legal only where `vkGetPhysicalDeviceImageFormatProperties2` with
//! `VkPhysicalDeviceExternalImageFormatInfo` says the image can carry it
//! (VUID-VkImageCreateInfo-pNext-00990). So at `vkCreateImage`, while double mappings may be
//! made on the device: where the query says yes, the create info gets the handle type in front;
//! where it says no (or cannot be asked), the image is created as asked and the device stops
//! double-mapping (`DeviceState::image_imports`): later allocations stay plain, so an image bound
//! into them is valid, and profile's host-access evidence for buffers in them is missing, so
//! their candidates are refused (fail closed). The way is chosen so that the images programs
//! place in blocks can all carry its handle type; an image outside those that cannot, bound into
//! memory double-mapped *before* it was created, cannot be made valid any more: echo says so
//! once (an error line) — the bind goes down as the application asked.

use super::calls_gen;
use crate::dispatch::{raw, DeviceData};
use crate::hostmem::export::{image_follows, Backing, ImageKind};
use ash::vk;
use std::ffi::c_void;
use std::sync::atomic::Ordering;

/// How echo's double mappings are made on this device from now on (profile's, or guarded
/// enforce's host imports); `None`: they are not.
pub fn backing(dev: &DeviceData) -> Option<Backing> {
    crate::chassis::backing(dev)
}

/// Whether echo may import (or export) memory on this device from now on.
pub fn imports_possible(dev: &DeviceData) -> bool {
    backing(dev).is_some()
}

/// `info` with `VkExternalMemoryImageCreateInfo { handle type }` in front.
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

/// Why an image cannot carry `backing`'s handle type; `Ok(Some)`: it can (patched info);
/// `Ok(None)`: it is the application's own external image, left alone (it is bound into its
/// external memory, which echo never imports or exports).
///
/// # Safety
/// `info` must be a valid create info of an image of `dev`.
pub unsafe fn external_patch(
    dev: &DeviceData,
    info: &vk::ImageCreateInfo<'_>,
    backing: Backing,
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
    let kind = ImageKind {
        format: info.format,
        ty: info.image_type,
        tiling: info.tiling,
        usage: info.usage,
        flags: info.flags,
    };
    image_follows(inst, dev.physical_device, &kind, backing)?;
    let mut b = Box::new(ImagePatch {
        info: std::mem::transmute::<vk::ImageCreateInfo<'_>, vk::ImageCreateInfo<'static>>(*info),
        ext: vk::ExternalMemoryImageCreateInfo::default(),
    });
    b.ext.handle_types = backing.handle_type();
    b.ext.p_next = info.p_next;
    b.info.p_next = &b.ext as *const _ as *const c_void;
    Ok(Some(b))
}

/// Before an image bind into `memory`: an image created without the handle type bound into
/// memory echo imported or exported is the one case that cannot be made valid (module doc).
pub fn check_bind(dev: &DeviceData, image: u64, memory: u64) {
    let s = &dev.state.image_imports;
    if s.refused.load(Ordering::Relaxed)
        && s.imported.contains(&memory)
        && s.unimportable.contains(&image)
    {
        let vuid = backing(dev).unwrap_or(Backing::HostImport).vuid();
        crate::log::warn_once(
            "image-in-imported-memory",
            format_args!(
                "image {image:#x} (which cannot carry echo's external-memory handle type) is bound into memory {memory:#x} that echo imported or exported before the image was created; the bind is not valid usage ({vuid}); allocations made from now on are not double-mapped"
            ),
        );
    }
}

pub unsafe fn vkCreateImage(
    cx: &calls_gen::vkCreateImage<'_>,
    device: vk::Device,
    info: *const vk::ImageCreateInfo<'_>,
    alloc: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::Image,
) -> vk::Result {
    let Some(way) =
        backing(cx.dev).filter(|_| !cx.dev.state.image_imports.refused.load(Ordering::Relaxed))
    else {
        return cx.down((cx.next)(device, info, alloc, out));
    };
    match external_patch(cx.dev, &*info, way) {
        Ok(None) => cx.down((cx.next)(device, info, alloc, out)),
        Ok(Some(patch)) => {
            let r = cx.down((cx.next)(device, patch.info(), alloc, out));
            if r == vk::Result::SUCCESS {
                return r;
            }
            let r = cx.down((cx.next)(device, info, alloc, out));
            if r == vk::Result::SUCCESS {
                cx.dev.state.image_imports.refuse(
                    raw(*out),
                    "the driver refused the image with echo's handle type",
                );
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

pub unsafe fn vkDestroyImage(
    cx: &calls_gen::vkDestroyImage<'_>,
    device: vk::Device,
    image: vk::Image,
    alloc: *const vk::AllocationCallbacks<'_>,
) {
    let s = &cx.dev.state.image_imports;
    if s.refused.load(Ordering::Relaxed) {
        s.unimportable.remove(&raw(image));
    }
    cx.down((cx.next)(device, image, alloc))
}
