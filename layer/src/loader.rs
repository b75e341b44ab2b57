//! The loader–layer interface: generated `vk_layer.h` structs, interface negotiation, and
//! walking the instance and device create-info chains to the next layer.

#[rustfmt::skip]
#[allow(clippy::all)]
pub mod vk_layer_bindings;

use ash::vk;
pub use vk_layer_bindings::{
    PFN_vkSetDeviceLoaderData, VkLayerDeviceCreateInfo, VkLayerFunction, VkLayerInstanceCreateInfo,
    VkNegotiateLayerInterface, VkNegotiateLayerStructType,
};

/// The newest loader–layer interface version echo implements. Version 2 is what every loader
/// since 1.0.x (and the Jetson Nano's JetPack 4.6) understands; nothing newer is required.
pub const INTERFACE_VERSION: u32 = 2;

/// What the loader handed the layer for the next element of an instance chain.
#[derive(Clone, Copy)]
pub struct InstanceLink {
    pub next_gipa: vk::PFN_vkGetInstanceProcAddr,
}

/// What the loader handed the layer for the next element of a device chain.
#[derive(Clone, Copy)]
pub struct DeviceLink {
    pub next_gipa: vk::PFN_vkGetInstanceProcAddr,
    pub next_gdpa: vk::PFN_vkGetDeviceProcAddr,
    /// The loader's `vkSetDeviceLoaderData` (`VK_LOADER_DATA_CALLBACK`): sets the dispatch
    /// pointer of a dispatchable object echo creates itself (its command buffers).
    pub set_loader_data: PFN_vkSetDeviceLoaderData,
}

/// Finds the loader's `VkLayerInstanceCreateInfo` with `VK_LAYER_LINK_INFO`, takes the next
/// layer's `vkGetInstanceProcAddr`, and advances the chain for the layers below (the loader's
/// create-info chain is mutable by contract, though declared const).
///
/// # Safety
/// `info` must be a `VkInstanceCreateInfo` handed to a layer's `vkCreateInstance` by the loader.
pub unsafe fn take_instance_link(info: *const vk::InstanceCreateInfo<'_>) -> Option<InstanceLink> {
    if info.is_null() {
        return None;
    }
    let mut p = (*info).p_next as *mut VkLayerInstanceCreateInfo;
    while !p.is_null() {
        if (*p).sType == vk::StructureType::LOADER_INSTANCE_CREATE_INFO
            && (*p).function == VkLayerFunction::VK_LAYER_LINK_INFO
        {
            let link_ptr = *(*p).u.pLayerInfo.as_ref();
            if link_ptr.is_null() {
                return None;
            }
            let link = &*link_ptr;
            let next_gipa = link.pfnNextGetInstanceProcAddr?;
            *(*p).u.pLayerInfo.as_mut() = link.pNext;
            return Some(InstanceLink { next_gipa });
        }
        p = (*p).pNext as *mut VkLayerInstanceCreateInfo;
    }
    None
}

/// The device-chain counterpart of [`take_instance_link`].
///
/// # Safety
/// `info` must be a `VkDeviceCreateInfo` handed to a layer's `vkCreateDevice` by the loader.
pub unsafe fn take_device_link(info: *const vk::DeviceCreateInfo<'_>) -> Option<DeviceLink> {
    if info.is_null() {
        return None;
    }
    let mut set_loader_data: PFN_vkSetDeviceLoaderData = None;
    let mut p = (*info).p_next as *mut VkLayerDeviceCreateInfo;
    while !p.is_null() {
        if (*p).sType == vk::StructureType::LOADER_DEVICE_CREATE_INFO
            && (*p).function == VkLayerFunction::VK_LOADER_DATA_CALLBACK
        {
            set_loader_data = (*p).u.pfnSetDeviceLoaderData;
        }
        p = (*p).pNext as *mut VkLayerDeviceCreateInfo;
    }
    let mut p = (*info).p_next as *mut VkLayerDeviceCreateInfo;
    while !p.is_null() {
        if (*p).sType == vk::StructureType::LOADER_DEVICE_CREATE_INFO
            && (*p).function == VkLayerFunction::VK_LAYER_LINK_INFO
        {
            let link_ptr = (*p).u.pLayerInfo;
            if link_ptr.is_null() {
                return None;
            }
            let link = &*link_ptr;
            let next_gipa = link.pfnNextGetInstanceProcAddr?;
            let next_gdpa = link.pfnNextGetDeviceProcAddr?;
            (*p).u.pLayerInfo = link.pNext;
            return Some(DeviceLink {
                next_gipa,
                next_gdpa,
                set_loader_data,
            });
        }
        p = (*p).pNext as *mut VkLayerDeviceCreateInfo;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::vk_layer_bindings::*;
    use super::*;
    use std::mem::{offset_of, size_of};

    // bindgen's own layout assertions are compile-time (`const _: () = ...`) and run with every
    // build; these state the LP64 layout of vk_layer.h independently of the generator.
    #[test]
    fn loader_structs_have_the_c_layout() {
        assert_eq!(size_of::<VkNegotiateLayerInterface>(), 48);
        assert_eq!(
            offset_of!(VkNegotiateLayerInterface, loaderLayerInterfaceVersion),
            16
        );
        assert_eq!(
            offset_of!(VkNegotiateLayerInterface, pfnGetPhysicalDeviceProcAddr),
            40
        );
        assert_eq!(size_of::<VkLayerInstanceLink>(), 24);
        assert_eq!(size_of::<VkLayerDeviceLink>(), 24);
        assert_eq!(offset_of!(VkLayerInstanceCreateInfo, function), 16);
        assert_eq!(offset_of!(VkLayerInstanceCreateInfo, u), 24);
        assert_eq!(size_of::<VkLayerInstanceCreateInfo>(), 40);
        assert_eq!(offset_of!(VkLayerDeviceCreateInfo, u), 24);
        assert_eq!(size_of::<VkLayerDeviceCreateInfo>(), 32);
    }

    unsafe extern "system" fn fake_gipa(
        _i: vk::Instance,
        _n: *const std::ffi::c_char,
    ) -> vk::PFN_vkVoidFunction {
        None
    }

    #[test]
    fn instance_chain_is_found_and_advanced() {
        unsafe {
            let mut second = VkLayerInstanceLink {
                pNext: std::ptr::null_mut(),
                pfnNextGetInstanceProcAddr: Some(fake_gipa),
                pfnNextGetPhysicalDeviceProcAddr: None,
            };
            let mut first = VkLayerInstanceLink {
                pNext: &mut second,
                pfnNextGetInstanceProcAddr: Some(fake_gipa),
                pfnNextGetPhysicalDeviceProcAddr: None,
            };
            let mut link: VkLayerInstanceCreateInfo = std::mem::zeroed();
            link.sType = vk::StructureType::LOADER_INSTANCE_CREATE_INFO;
            link.function = VkLayerFunction::VK_LAYER_LINK_INFO;
            *link.u.pLayerInfo.as_mut() = &mut first;
            // An unrelated struct first, as the loader may put other callbacks ahead.
            let mut other: VkLayerInstanceCreateInfo = std::mem::zeroed();
            other.sType = vk::StructureType::LOADER_INSTANCE_CREATE_INFO;
            other.function = VkLayerFunction::VK_LOADER_DATA_CALLBACK;
            other.pNext = &link as *const _ as *const _;
            let info = vk::InstanceCreateInfo {
                p_next: &other as *const _ as *const _,
                ..Default::default()
            };
            assert!(take_instance_link(&info).is_some());
            assert_eq!(*link.u.pLayerInfo.as_ref(), &mut second as *mut _);
            assert!(take_instance_link(&info).is_some());
            assert!(take_instance_link(&info).is_none());
        }
    }
}
