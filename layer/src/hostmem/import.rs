//! Importing echo's own host memory into Vulkan (`VK_EXT_external_memory_host`), for the double
//! mapping of profile mode and of guarded enforce: the extension, and the alignment a host
//! pointer must have.

use crate::dispatch::DeviceData;
use ash::vk;
use std::ffi::{c_void, CStr};

/// The extension that lets the double mapping be imported (DESIGN §4).
pub const EXT_MEMORY_HOST: &CStr = c"VK_EXT_external_memory_host";

/// `minImportedHostPointerAlignment`, through the next layer (0 when it cannot be asked).
pub fn import_alignment(dev: &DeviceData) -> u64 {
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
