//! Importing echo's own host memory into Vulkan (`VK_EXT_external_memory_host`), for the double
//! mapping of profile mode and of guarded enforce: the extension, and the alignment a host
//! pointer must have.

use crate::records::Device;
use ash::vk;
use std::ffi::{c_void, CStr};

/// The extension that lets the double mapping be imported (DESIGN §4).
pub const EXT_MEMORY_HOST: &CStr = c"VK_EXT_external_memory_host";

/// `minImportedHostPointerAlignment`, through the next layer (0 when it cannot be asked).
pub fn import_alignment(dev: &Device) -> u64 {
    let Some(inst) = &dev.instance else { return 0 };
    let Some(gpdp2) = inst.properties2(dev.physical_device) else {
        return 0;
    };
    let mut host = vk::PhysicalDeviceExternalMemoryHostPropertiesEXT::default();
    let mut p2 = vk::PhysicalDeviceProperties2 {
        p_next: &mut host as *mut _ as *mut c_void,
        ..Default::default()
    };
    // SAFETY: valid out chain; the physical device belongs to this instance.
    unsafe { gpdp2(dev.physical_device, &mut p2) };
    host.min_imported_host_pointer_alignment
}

/// What of the application's `vkAllocateMemory` chain an import of echo's own host memory
/// keeps: the allocate flags and the priority, each copied with its `p_next` cleared.
pub struct Chain {
    pub flags: Option<vk::MemoryAllocateFlagsInfo<'static>>,
    pub priority: Option<vk::MemoryPriorityAllocateInfoEXT<'static>>,
}

/// The chain of `info` as an import can carry it; `None` when it holds anything an import
/// cannot: a dedication to an image, an export, an import, capture-replay, an unknown
/// structure. A dedication to a buffer is a hint, dropped: a host-pointer import may not be
/// dedicated (VUID-VkMemoryAllocateInfo-pNext-02806).
///
/// # Safety
/// `info` is a valid allocate info.
pub unsafe fn importable_chain(info: &vk::MemoryAllocateInfo<'_>) -> Option<Chain> {
    let mut c = Chain {
        flags: None,
        priority: None,
    };
    let mut p = info.p_next as *const vk::BaseInStructure<'_>;
    while !p.is_null() {
        match (*p).s_type {
            vk::StructureType::MEMORY_ALLOCATE_FLAGS_INFO => {
                let mut f = *(p as *const vk::MemoryAllocateFlagsInfo<'static>);
                f.p_next = std::ptr::null();
                c.flags = Some(f);
            }
            vk::StructureType::MEMORY_PRIORITY_ALLOCATE_INFO_EXT => {
                let mut f = *(p as *const vk::MemoryPriorityAllocateInfoEXT<'static>);
                f.p_next = std::ptr::null();
                c.priority = Some(f);
            }
            vk::StructureType::MEMORY_DEDICATED_ALLOCATE_INFO => {
                let d = &*(p as *const vk::MemoryDedicatedAllocateInfo<'_>);
                if d.image != vk::Image::null() {
                    return None;
                }
            }
            _ => return None,
        }
        p = (*p).p_next;
    }
    Some(c)
}

/// Whether memory type `type_index` of `device` can import the host pointer `ptr`
/// (`vkGetMemoryHostPointerPropertiesEXT`); `Err` with the result and the types that can.
///
/// # Safety
/// `get` is the device's `vkGetMemoryHostPointerPropertiesEXT`; `ptr` is a live mapping.
pub unsafe fn can_import(
    get: vk::PFN_vkGetMemoryHostPointerPropertiesEXT,
    device: vk::Device,
    ptr: *const c_void,
    type_index: u32,
) -> Result<(), (vk::Result, u32)> {
    let mut props = vk::MemoryHostPointerPropertiesEXT::default();
    let r = get(
        device,
        vk::ExternalMemoryHandleTypeFlags::HOST_ALLOCATION_EXT,
        ptr,
        &mut props,
    );
    if r != vk::Result::SUCCESS || props.memory_type_bits & (1 << type_index) == 0 {
        return Err((r, props.memory_type_bits));
    }
    Ok(())
}

/// The `vkAllocateMemory` of an import of echo's host memory at `host_pointer`: the allocate
/// info, the host-pointer import and what the application's chain keeps ([`Chain`]), linked.
/// Boxed, so the links stay valid while its owner moves.
pub struct ImportInfo {
    info: vk::MemoryAllocateInfo<'static>,
    import: vk::ImportMemoryHostPointerInfoEXT<'static>,
    chain: Chain,
}

impl ImportInfo {
    /// `len` bytes at `host_pointer` in memory type `memory_type_index`, carrying `chain`.
    pub fn new(
        chain: Chain,
        host_pointer: *mut c_void,
        len: u64,
        memory_type_index: u32,
    ) -> Box<ImportInfo> {
        let mut b = Box::new(ImportInfo {
            info: vk::MemoryAllocateInfo::default(),
            import: vk::ImportMemoryHostPointerInfoEXT::default(),
            chain,
        });
        b.import.handle_type = vk::ExternalMemoryHandleTypeFlags::HOST_ALLOCATION_EXT;
        b.import.p_host_pointer = host_pointer;
        let mut next: *const c_void = std::ptr::null();
        if let Some(f) = b.chain.flags.as_mut() {
            f.p_next = next;
            next = f as *const _ as *const c_void;
        }
        if let Some(f) = b.chain.priority.as_mut() {
            f.p_next = next;
            next = f as *const _ as *const c_void;
        }
        b.import.p_next = next;
        b.info.p_next = &b.import as *const _ as *const c_void;
        b.info.allocation_size = len;
        b.info.memory_type_index = memory_type_index;
        b
    }

    /// The allocate info to pass down (valid while `self` lives).
    pub fn info(&self) -> *const vk::MemoryAllocateInfo<'static> {
        &self.info
    }
}
