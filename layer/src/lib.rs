//! VK_LAYER_echo: the exported entry points of the layer, and the name lookups through which
//! `vkGetInstanceProcAddr` and `vkGetDeviceProcAddr` hand out echo's functions (the top of the
//! layer: nothing names this file).
//!
//! Every entry point runs inside `catch_unwind` (`ffi_guard.rs`): a panic in echo logs once and
//! falls back to passthrough; it never unwinds into the loader or the application. The version
//! script `layer/exports.map` keeps every other symbol private. See docs/architecture.md.

#![allow(non_snake_case, clippy::missing_safety_doc)]

mod callsite;
mod chassis;
mod context;
mod coordinator;
mod dispatch;
mod enforce;
mod events;
mod ffi_guard;
mod handles;
#[rustfmt::skip]
mod hook_id;
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
mod submit;
#[cfg(test)]
mod testutil;

use ash::vk;
use dispatch::{cstr, key_of, raw};
use ffi_guard::guard_value;
use hook_id::{HookId, Kind};
use hooks::{device, instance, intercept_of};
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
/// intercepts where the next layer has the command (the loader builds device tables from them),
/// the next layer's pointer for everything else.
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
            if let Some(f) = global_hook(n) {
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
                return instance_hook(n).or_else(|| HookId::from_name(n).map(intercept_of));
            }
            let inst = dispatch::instance(dispatch::key_of(dispatch::raw(instance)))?;
            if let Some(f) = instance_hook(n) {
                return Some(f);
            }
            let next = inst.next_proc(cname);
            // Device commands looked up through the instance: echo's intercept whatever device
            // they will be called on (each passes through where echo does not act; a marked
            // command's marks nothing where echo does not enforce).
            match HookId::from_name(n) {
                Some(id) if next.is_some() => Some(intercept_of(id)),
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
        || get_device_proc_addr(device, name),
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

/// Echo's own instance-level commands, by name (global ones need no instance).
pub fn global_hook(name: &[u8]) -> vk::PFN_vkVoidFunction {
    // SAFETY: each pointer is returned for the command of that name.
    unsafe {
        let f: *const () = match name {
            b"vkGetInstanceProcAddr" => vkGetInstanceProcAddr as *const (),
            b"vkCreateInstance" => instance::vkCreateInstance as *const (),
            // The exported functions, each inside the panic guard (issue 56: the inner ones
            // were handed out unguarded).
            b"vkEnumerateInstanceLayerProperties" => {
                vkEnumerateInstanceLayerProperties as *const ()
            }
            b"vkEnumerateInstanceExtensionProperties" => {
                vkEnumerateInstanceExtensionProperties as *const ()
            }
            _ => return None,
        };
        Some(std::mem::transmute::<*const (), unsafe extern "system" fn()>(f))
    }
}

/// Echo's instance-level commands that need an instance.
pub fn instance_hook(name: &[u8]) -> vk::PFN_vkVoidFunction {
    // SAFETY: as in global_hook.
    unsafe {
        let f: *const () = match name {
            b"vkDestroyInstance" => instance::vkDestroyInstance as *const (),
            b"vkCreateDevice" => device::vkCreateDevice as *const (),
            b"vkDestroyDevice" => device::vkDestroyDevice as *const (),
            b"vkGetDeviceProcAddr" => vkGetDeviceProcAddr as *const (),
            b"vkEnumerateDeviceExtensionProperties" => {
                vkEnumerateDeviceExtensionProperties as *const ()
            }
            b"vkEnumerateDeviceLayerProperties" => vkEnumerateDeviceLayerProperties as *const (),
            _ => return None,
        };
        Some(std::mem::transmute::<*const (), unsafe extern "system" fn()>(f))
    }
}

/// `vkGetDeviceProcAddr`: echo's hook for an intercepted command on an active device (when the
/// next layer has the command), the next layer's pointer otherwise. `vkGetDeviceProcAddr` and
/// `vkDestroyDevice` stay echo's on every device (bookkeeping; never on a hot path).
pub unsafe fn get_device_proc_addr(
    device: vk::Device,
    name: *const c_char,
) -> vk::PFN_vkVoidFunction {
    let cname = cstr(name)?;
    let n = cname.to_bytes();
    if n == b"vkGetDeviceProcAddr" || n == b"vkDestroyDevice" {
        return instance_hook(n);
    }
    if device == vk::Device::null() {
        return None;
    }
    let key = key_of(raw(device));
    match dispatch::device(key) {
        Some(dev) => {
            // Followed and aside names: echo's intercept (issue 32: none that can reach memory
            // reaches the driver unseen). Marked names only where echo may drop command buffers
            // that became empty (issue 35): elsewhere they cost nothing.
            if let Some(id) = HookId::from_name(n).filter(|_| dev.is_active()) {
                if id.kind() != Kind::Marked || dev.enforce().is_some() {
                    return dev.next[id as usize].map(|_| intercept_of(id));
                }
            }
            dev.next_proc(cname)
        }
        None => dispatch::device_link(key).and_then(|g| g(device, name)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every introspection query echo hands out through `vkGetInstanceProcAddr` is the exported
    /// function, inside the panic guard, as the loader calls it (issue 56).
    #[test]
    fn handed_out_queries_are_the_guarded_exports() {
        let p = |f: vk::PFN_vkVoidFunction| f.map(|f| f as usize);
        let cases: [(&[u8], usize); 4] = [
            (
                b"vkEnumerateInstanceLayerProperties",
                vkEnumerateInstanceLayerProperties as *const () as usize,
            ),
            (
                b"vkEnumerateInstanceExtensionProperties",
                vkEnumerateInstanceExtensionProperties as *const () as usize,
            ),
            (
                b"vkEnumerateDeviceLayerProperties",
                vkEnumerateDeviceLayerProperties as *const () as usize,
            ),
            (
                b"vkEnumerateDeviceExtensionProperties",
                vkEnumerateDeviceExtensionProperties as *const () as usize,
            ),
        ];
        for (n, want) in cases {
            let got = p(global_hook(n)).or(p(instance_hook(n)));
            assert_eq!(got, Some(want), "{}", String::from_utf8_lossy(n));
        }
    }

    /// Issue 14: budget and heap queries (`VK_EXT_memory_budget` rides on
    /// `vkGetPhysicalDeviceMemoryProperties2`) are not echo's: the application reads what the
    /// driver reports — echo neither adds the allocations it skipped nor invents memory.
    #[test]
    fn memory_properties_and_budget_are_the_drivers() {
        for n in [
            &b"vkGetPhysicalDeviceMemoryProperties"[..],
            b"vkGetPhysicalDeviceMemoryProperties2",
            b"vkGetPhysicalDeviceMemoryProperties2KHR",
        ] {
            assert!(global_hook(n).is_none() && instance_hook(n).is_none());
            assert!(HookId::from_name(n).is_none());
        }
    }
}
