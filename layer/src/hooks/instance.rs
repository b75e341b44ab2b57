//! Instance-level commands: `vkCreateInstance`, `vkDestroyInstance`, and the layer
//! introspection queries. Settings are resolved here, once per instance.

use crate::dispatch::{self, cstr, key_of, raw, InstanceData};
use crate::ffi_guard::guard;
use crate::loader;
use crate::settings::{self, LAYER_NAME};
use ash::vk;
use echo_analyzer::settings::Mode;
use std::collections::HashSet;
use std::ffi::{c_char, c_void, CStr};

pub const SPEC_VERSION: u32 = vk::make_api_version(0, 1, 3, 239);
pub const IMPLEMENTATION_VERSION: u32 = 1;
const DESCRIPTION: &str = "Echo: removes host-device self-copies on unified-memory devices";

/// Resolves `name` through `gipa` as a typed function pointer.
///
/// # Safety
/// `F` must be the type of command `name`.
pub unsafe fn proc_typed<F: Copy>(
    gipa: vk::PFN_vkGetInstanceProcAddr,
    instance: vk::Instance,
    name: &CStr,
) -> Option<F> {
    gipa(instance, name.as_ptr()).map(|f| dispatch::typed::<F>(f))
}

pub unsafe extern "system" fn vkCreateInstance(
    info: *const vk::InstanceCreateInfo<'_>,
    alloc: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::Instance,
) -> vk::Result {
    let Some(link) = loader::take_instance_link(info) else {
        crate::log::error!(
            "vkCreateInstance: no loader link info; is the layer loaded by the Vulkan loader?"
        );
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let Some(next_create) = proc_typed::<vk::PFN_vkCreateInstance>(
        link.next_gipa,
        vk::Instance::null(),
        c"vkCreateInstance",
    ) else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    guard(
        "vkCreateInstance",
        || next_create(info, alloc, out),
        |down| {
            let settings = settings::gather(info);
            let app = (*info).p_application_info;
            let api_version = if app.is_null() || (*app).api_version == 0 {
                vk::API_VERSION_1_0
            } else {
                (*app).api_version
            };
            let app_exts = enabled_names(
                (*info).enabled_extension_count,
                (*info).pp_enabled_extension_names,
            );
            // Echo reads VkPhysicalDeviceIDProperties (the device UUID of the run context) and,
            // in profile mode, the host-import alignment: on a 1.0 instance those queries are
            // legal only through extensions, which echo enables for itself when the
            // application did not (never in mode off: echo is not there then).
            let mut added: Vec<&'static CStr> = Vec::new();
            if settings.mode != Mode::Off && api_version < vk::API_VERSION_1_1 {
                added = INSTANCE_EXTENSIONS_FOR_1_0
                    .iter()
                    .copied()
                    .filter(|e| !app_exts.contains(e.to_str().unwrap_or_default()))
                    .collect();
            }
            let mut r;
            if added.is_empty() {
                r = down.record(next_create(info, alloc, out));
            } else {
                let own: Vec<*const c_char> = added.iter().map(|c| c.as_ptr()).collect();
                let names = extension_list(
                    (*info).enabled_extension_count,
                    (*info).pp_enabled_extension_names,
                    &own,
                );
                let mut patched = *info;
                patched.enabled_extension_count = names.len() as u32;
                patched.pp_enabled_extension_names = names.as_ptr();
                r = next_create(&patched, alloc, out);
                if r == vk::Result::ERROR_EXTENSION_NOT_PRESENT {
                    crate::log::info!(
                        "vkCreateInstance: the driver lacks {}; the device UUID is not part of the run context on this 1.0 instance",
                        added.iter().map(|c| c.to_string_lossy()).collect::<Vec<_>>().join(", ")
                    );
                    added.clear();
                    r = next_create(info, alloc, out);
                }
                r = down.record(r);
            }
            if r != vk::Result::SUCCESS {
                return r;
            }
            let handle = *out;
            let gipa = link.next_gipa;
            let fp = ash::InstanceFnV1_0::load(|n| {
                gipa(handle, n.as_ptr()).map_or(std::ptr::null(), |f| f as *const c_void)
            });
            let mut extensions: HashSet<String> = app_exts;
            extensions.extend(added.iter().map(|c| c.to_string_lossy().into_owned()));
            // vkGetPhysicalDeviceProperties2 only where the application's instance makes it
            // legal: core in 1.1, else the KHR extension when enabled (by the app or by echo).
            let props2 = if api_version >= vk::API_VERSION_1_1 {
                proc_typed(gipa, handle, c"vkGetPhysicalDeviceProperties2")
            } else if extensions.contains("VK_KHR_get_physical_device_properties2") {
                proc_typed(gipa, handle, c"vkGetPhysicalDeviceProperties2KHR")
            } else {
                None
            };
            let image_props2 = if api_version >= vk::API_VERSION_1_1 {
                proc_typed(gipa, handle, c"vkGetPhysicalDeviceImageFormatProperties2")
            } else if extensions.contains("VK_KHR_get_physical_device_properties2")
                && extensions.contains("VK_KHR_external_memory_capabilities")
            {
                proc_typed(
                    gipa,
                    handle,
                    c"vkGetPhysicalDeviceImageFormatProperties2KHR",
                )
            } else {
                None
            };
            let buffer_props = if api_version >= vk::API_VERSION_1_1 {
                proc_typed(gipa, handle, c"vkGetPhysicalDeviceExternalBufferProperties")
            } else if extensions.contains("VK_KHR_external_memory_capabilities") {
                proc_typed(
                    gipa,
                    handle,
                    c"vkGetPhysicalDeviceExternalBufferPropertiesKHR",
                )
            } else {
                None
            };
            // Resolved now, not when a device is made: resolved later, the loader's terminator
            // answers with the top of the chain's entry, which a layer above (RenderDoc) may
            // leave NULL for an extension only echo enabled (see "API versions").
            let time_domains = proc_typed(
                gipa,
                handle,
                c"vkGetPhysicalDeviceCalibrateableTimeDomainsKHR",
            )
            .or_else(|| {
                proc_typed(
                    gipa,
                    handle,
                    c"vkGetPhysicalDeviceCalibrateableTimeDomainsEXT",
                )
            });
            if settings.mode != Mode::Off {
                crate::coordinator::ensure_exit_hook();
            }
            dispatch::insert_instance(
                key_of(raw(handle)),
                InstanceData {
                    handle,
                    next_gipa: gipa,
                    fp,
                    get_physical_device_properties2: props2,
                    get_physical_device_image_format_properties2: image_props2,
                    get_physical_device_external_buffer_properties: buffer_props,
                    get_physical_device_calibrateable_time_domains: time_domains,
                    settings,
                    api_version,
                    extensions,
                },
            );
            r
        },
    )
}

/// Instance extensions echo enables on an `apiVersion` 1.0 instance (where present), so that
/// its own queries are legal there: `vkGetPhysicalDeviceProperties2KHR`, and
/// `VkPhysicalDeviceIDProperties` through it (which needs an external-capabilities extension).
pub const INSTANCE_EXTENSIONS_FOR_1_0: [&CStr; 2] = [
    c"VK_KHR_get_physical_device_properties2",
    c"VK_KHR_external_memory_capabilities",
];

/// The names of an enabled-extension (or layer) list.
pub unsafe fn enabled_names(count: u32, names: *const *const c_char) -> HashSet<String> {
    if names.is_null() {
        return HashSet::new();
    }
    (0..count as usize)
        .filter_map(|i| cstr(*names.add(i)))
        .map(|c| c.to_string_lossy().into_owned())
        .collect()
}

pub unsafe extern "system" fn vkDestroyInstance(
    instance: vk::Instance,
    alloc: *const vk::AllocationCallbacks<'_>,
) {
    if instance == vk::Instance::null() {
        return;
    }
    if let Some(inst) = dispatch::remove_instance(key_of(raw(instance))) {
        // Devices the application left alive (invalid, but it happens): their last accesses and
        // statistics go out now, while their records still make sense.
        if inst.settings.mode != Mode::Off {
            crate::ffi_guard::guard_value(
                "vkDestroyInstance",
                || (),
                || {
                    for d in dispatch::live_devices() {
                        if d.instance.as_ref().is_some_and(|i| i.handle == instance) {
                            let left = crate::events::Cmd::LeftAlive;
                            // SAFETY: the description holds no pointer.
                            unsafe { crate::chassis::before(&d, &left) };
                            crate::coordinator::finish_device(&d, "instance destroyed");
                        }
                    }
                },
            );
        }
        (inst.fp.destroy_instance)(instance, alloc);
        if inst.settings.mode != Mode::Off && dispatch::instance_count() == 0 {
            crate::ffi_guard::guard_value(
                "vkDestroyInstance",
                || (),
                crate::coordinator::checkpoint,
            );
        }
    }
}

pub fn layer_properties() -> vk::LayerProperties {
    let mut p = vk::LayerProperties {
        spec_version: SPEC_VERSION,
        implementation_version: IMPLEMENTATION_VERSION,
        ..Default::default()
    };
    copy_str(&mut p.layer_name, LAYER_NAME);
    copy_str(&mut p.description, DESCRIPTION);
    p
}

fn copy_str(dst: &mut [c_char], s: &str) {
    let n = dst.len() - 1;
    for (d, b) in dst.iter_mut().zip(s.bytes().take(n)) {
        *d = b as c_char;
    }
}

/// The count/array protocol of the enumerate commands, for a list of one.
pub unsafe fn write_layer_properties(
    count: *mut u32,
    props: *mut vk::LayerProperties,
) -> vk::Result {
    if count.is_null() {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    }
    if props.is_null() {
        *count = 1;
        return vk::Result::SUCCESS;
    }
    if *count < 1 {
        return vk::Result::INCOMPLETE;
    }
    *props = layer_properties();
    *count = 1;
    vk::Result::SUCCESS
}

pub unsafe fn is_echo(layer_name: *const c_char) -> bool {
    cstr(layer_name).is_some_and(|n| n.to_bytes() == LAYER_NAME.as_bytes())
}

pub unsafe extern "system" fn vkEnumerateInstanceLayerProperties(
    count: *mut u32,
    props: *mut vk::LayerProperties,
) -> vk::Result {
    write_layer_properties(count, props)
}

/// Echo provides no instance extensions.
pub unsafe extern "system" fn vkEnumerateInstanceExtensionProperties(
    layer_name: *const c_char,
    count: *mut u32,
    _props: *mut vk::ExtensionProperties,
) -> vk::Result {
    if is_echo(layer_name) && !count.is_null() {
        *count = 0;
        return vk::Result::SUCCESS;
    }
    vk::Result::ERROR_LAYER_NOT_PRESENT
}

pub unsafe extern "system" fn vkEnumerateDeviceLayerProperties(
    _pd: vk::PhysicalDevice,
    count: *mut u32,
    props: *mut vk::LayerProperties,
) -> vk::Result {
    write_layer_properties(count, props)
}

/// Echo provides no device extensions; other queries go down the chain.
pub unsafe extern "system" fn vkEnumerateDeviceExtensionProperties(
    pd: vk::PhysicalDevice,
    layer_name: *const c_char,
    count: *mut u32,
    props: *mut vk::ExtensionProperties,
) -> vk::Result {
    if is_echo(layer_name) {
        if count.is_null() {
            return vk::Result::ERROR_INITIALIZATION_FAILED;
        }
        *count = 0;
        return vk::Result::SUCCESS;
    }
    if pd == vk::PhysicalDevice::null() {
        return vk::Result::ERROR_LAYER_NOT_PRESENT;
    }
    match dispatch::instance(key_of(raw(pd))) {
        Some(inst) => (inst.fp.enumerate_device_extension_properties)(pd, layer_name, count, props),
        None => vk::Result::ERROR_LAYER_NOT_PRESENT,
    }
}

/// An enabled-extension list for a patched create info: the application's `count` names
/// followed by `added` (echo's own). Keep the returned vector alive while the create info that
/// points into it is used.
///
/// # Safety
/// `names` must hold `count` valid C strings (or be null with `count` 0).
pub unsafe fn extension_list(
    count: u32,
    names: *const *const std::ffi::c_char,
    added: &[*const std::ffi::c_char],
) -> Vec<*const std::ffi::c_char> {
    let mut v: Vec<*const std::ffi::c_char> = if names.is_null() {
        Vec::new()
    } else {
        std::slice::from_raw_parts(names, count as usize).to_vec()
    };
    v.extend_from_slice(added);
    v
}
