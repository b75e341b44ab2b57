//! VK_LAYER_echo: the exported entry points of the layer, nothing else.
//!
//! Every entry point runs inside `catch_unwind` (`guard.rs`): a panic in echo logs once and
//! falls back to passthrough; it never unwinds into the loader or the application. The version
//! script `layer/exports.map` keeps every other symbol private. See docs/architecture.md.

#![allow(non_snake_case, clippy::missing_safety_doc)]

mod callsite;
mod context;
mod coordinator;
mod dispatch;
mod enforce;
mod ffi_guard;
mod handles;
mod hooks;
mod hostmem;
mod lifetime;
mod loader;
mod log;
mod profile;
mod records;
mod reflect;
mod settings;
mod spirv_access;
#[cfg(test)]
mod spirv_golden;
mod state;
#[cfg(test)]
mod testutil;

use ash::vk;
use ffi_guard::guard_value;
use hooks::instance;
use loader::{VkNegotiateLayerInterface, VkNegotiateLayerStructType};
use std::ffi::c_char;

/// Interface negotiation (loader–layer interface version 2; nothing newer is required).
#[no_mangle]
pub unsafe extern "system" fn vkNegotiateLoaderLayerInterfaceVersion(
    p: *mut VkNegotiateLayerInterface,
) -> vk::Result {
    guard_value(
        "vkNegotiateLoaderLayerInterfaceVersion",
        || vk::Result::ERROR_INITIALIZATION_FAILED,
        || {
            if p.is_null()
                || (*p).sType != VkNegotiateLayerStructType::LAYER_NEGOTIATE_INTERFACE_STRUCT
            {
                return vk::Result::ERROR_INITIALIZATION_FAILED;
            }
            let v = &mut *p;
            if v.loaderLayerInterfaceVersion < 2 {
                // Loaders before interface 2 call the exported functions directly; nothing to fill.
                return vk::Result::SUCCESS;
            }
            v.loaderLayerInterfaceVersion =
                v.loaderLayerInterfaceVersion.min(loader::INTERFACE_VERSION);
            v.pfnGetInstanceProcAddr = Some(vkGetInstanceProcAddr);
            v.pfnGetDeviceProcAddr = Some(vkGetDeviceProcAddr);
            v.pfnGetPhysicalDeviceProcAddr = None;
            vk::Result::SUCCESS
        },
    )
}

/// Echo's instance hooks (create/destroy instance and device, the introspection queries), echo's
/// device hooks where the next layer has the command (the loader builds device tables from
/// them), the next layer's pointer for everything else.
#[no_mangle]
pub unsafe extern "system" fn vkGetInstanceProcAddr(
    instance: vk::Instance,
    name: *const c_char,
) -> vk::PFN_vkVoidFunction {
    guard_value(
        "vkGetInstanceProcAddr",
        || None,
        || {
            let cname = dispatch::cstr(name)?;
            let n = cname.to_bytes();
            if let Some(f) = instance::global_hook(n) {
                return Some(f);
            }
            if instance == vk::Instance::null() {
                // A layer above may look up commands before (or without) an instance, through
                // its link's `pfnNextGetInstanceProcAddr(NULL, name)`: RenderDoc fetches the
                // next `vkCreateDevice` that way and crashes on NULL. Answer as the validation
                // layer does, with echo's own hook for every command it intercepts; each finds
                // its instance or device from its dispatchable argument and passes through where
                // echo does not act (or does not know the handle). Other names: nothing known
                // without an instance.
                return instance::instance_hook(n)
                    .or_else(|| hooks::HookId::from_name(n).map(|id| id.hook()))
                    .or_else(|| hooks::aside::hook_of(n))
                    .or_else(|| hooks::mark::hook_of(n));
            }
            let inst = dispatch::instance(dispatch::key_of(dispatch::raw(instance)))?;
            if let Some(f) = instance::instance_hook(n) {
                return Some(f);
            }
            let next = inst.next_proc(cname);
            match hooks::HookId::from_name(n) {
                Some(id) if next.is_some() => Some(id.hook()),
                // Device commands looked up through the instance: echo's hook whatever device
                // they will be called on (the marking hooks pass through where echo does not
                // enforce).
                None if next.is_some() => hooks::aside::hook_of(n)
                    .or_else(|| hooks::mark::hook_of(n))
                    .or(next),
                _ => next,
            }
        },
    )
}

#[no_mangle]
pub unsafe extern "system" fn vkGetDeviceProcAddr(
    device: vk::Device,
    name: *const c_char,
) -> vk::PFN_vkVoidFunction {
    guard_value(
        "vkGetDeviceProcAddr",
        || None,
        || hooks::device::get_device_proc_addr(device, name),
    )
}

#[no_mangle]
pub unsafe extern "system" fn vkEnumerateInstanceLayerProperties(
    count: *mut u32,
    props: *mut vk::LayerProperties,
) -> vk::Result {
    guard_value(
        "vkEnumerateInstanceLayerProperties",
        || vk::Result::ERROR_INITIALIZATION_FAILED,
        || instance::vkEnumerateInstanceLayerProperties(count, props),
    )
}

#[no_mangle]
pub unsafe extern "system" fn vkEnumerateInstanceExtensionProperties(
    layer_name: *const c_char,
    count: *mut u32,
    props: *mut vk::ExtensionProperties,
) -> vk::Result {
    guard_value(
        "vkEnumerateInstanceExtensionProperties",
        || vk::Result::ERROR_LAYER_NOT_PRESENT,
        || instance::vkEnumerateInstanceExtensionProperties(layer_name, count, props),
    )
}

#[no_mangle]
pub unsafe extern "system" fn vkEnumerateDeviceLayerProperties(
    pd: vk::PhysicalDevice,
    count: *mut u32,
    props: *mut vk::LayerProperties,
) -> vk::Result {
    guard_value(
        "vkEnumerateDeviceLayerProperties",
        || vk::Result::ERROR_INITIALIZATION_FAILED,
        || instance::vkEnumerateDeviceLayerProperties(pd, count, props),
    )
}

#[no_mangle]
pub unsafe extern "system" fn vkEnumerateDeviceExtensionProperties(
    pd: vk::PhysicalDevice,
    layer_name: *const c_char,
    count: *mut u32,
    props: *mut vk::ExtensionProperties,
) -> vk::Result {
    guard_value(
        "vkEnumerateDeviceExtensionProperties",
        || vk::Result::ERROR_LAYER_NOT_PRESENT,
        || instance::vkEnumerateDeviceExtensionProperties(pd, layer_name, count, props),
    )
}
