//! `vkCreateDevice` (topology decision, extension additions, the next layer's pointer for every
//! hooked name) and `vkDestroyDevice`.

use crate::dispatch::{
    self, cstr, key_of, raw, Decision, Device, DeviceData, InstanceData, PanicAt,
};
use crate::ffi_guard::{guard_value, layer_failed};
use crate::hook_id::{HookId, HOOK_COUNT};
use crate::hooks::instance::proc_typed;
use crate::loader;
use crate::log;
use crate::settings::{env_lookup, secure_execution};
use crate::state::DeviceState;
use ash::vk;
use echo_analyzer::settings::Mode;
use echo_analyzer::topology::{classify, flag_names, Class, MemoryTable, TopologyPolicy};
use std::collections::HashSet;
use std::ffi::{c_char, c_void, CStr, CString};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Reads the physical device's table through the next layer, classifies it, and decides
/// whether echo acts: the class must be active under `topology`, and `mode` must not be off.
pub fn decide(inst: &InstanceData, pd: vk::PhysicalDevice) -> Decision {
    let (table, name, _props) = inst.memory_table(pd);
    let topology = classify(&table);
    let s = &inst.settings;
    let policy = match s.topology {
        TopologyPolicy::Strict => "strict",
        TopologyPolicy::Integrated => "integrated",
    };
    let mode = format!("{:?}", s.mode).to_lowercase();
    let (active, why) = if layer_failed() {
        (
            false,
            "echo hit an internal error earlier in this process".to_string(),
        )
    } else if !topology.active(s.topology) {
        let why = match topology.class {
            Class::Discrete => {
                "class discrete: device memory is separate from host memory".to_string()
            }
            c => format!(
                "class {c} is not acted on with topology={policy} (set topology=integrated)"
            ),
        };
        (false, why)
    } else if s.mode == Mode::Off {
        (false, "mode off".to_string())
    } else {
        (
            true,
            format!(
                "class {} with topology={policy}, mode {mode}",
                topology.class
            ),
        )
    };
    Decision {
        name,
        table,
        topology,
        mode: s.mode,
        active,
        why,
    }
}

fn unknown_decision(why: &str) -> Decision {
    let table = MemoryTable {
        device_type: echo_analyzer::topology::DeviceType::Other,
        heaps: vec![],
        types: vec![],
    };
    Decision {
        name: "?".into(),
        topology: classify(&table),
        table,
        mode: Mode::Off,
        active: false,
        why: why.into(),
    }
}

fn log_decision(d: &Decision) {
    let t = &d.topology;
    log::info!(
        "device '{}': class {}, alias memory type {}, cached host-visible {}; {} ({})",
        d.name,
        t.class,
        t.alias_type.map_or("none".to_string(), |i| i.to_string()),
        if t.cached_host_visible { "yes" } else { "no" },
        if d.active { "ACTIVE" } else { "INACTIVE" },
        d.why
    );
    if log::enabled(echo_analyzer::settings::LogLevel::Debug) {
        for (i, ty) in d.table.types.iter().enumerate() {
            log::debug!(
                "  memory type {i}: heap {} [{}]",
                ty.heap,
                flag_names(ty.flags).join("|")
            );
        }
        for (i, h) in d.table.heaps.iter().enumerate() {
            log::debug!("  memory heap {i}: {} bytes, flags {:#x}", h.size, h.flags);
        }
    }
}

/// Device extensions echo enables for itself on top of the application's, where the device
/// offers them: profile (and auto, which may profile) mode adds `VK_EXT_external_memory_host`
/// for the double mapping (DESIGN §4) — enforce mode too when `guard` is on — with `VK_KHR_external_memory` (its dependency, core in
/// 1.1) when the device's effective version — the lower of the application's `apiVersion` and
/// the physical device's — is 1.0. Only called for active devices.
pub fn extensions_to_add(
    inst: &InstanceData,
    pd: vk::PhysicalDevice,
    d: &Decision,
    have: &HashSet<String>,
) -> Vec<&'static CStr> {
    use crate::hostmem::export::{self, Backing};
    let mut v = Vec::new();
    // Guarded enforce (the `guard` setting) double-maps aliased memory the same way.
    let profiles = matches!(d.mode, Mode::Profile | Mode::Auto);
    if profiles || (d.mode == Mode::Enforce && inst.settings.guard_on()) {
        let mut props = vk::PhysicalDeviceProperties::default();
        // SAFETY: pd belongs to this instance; the out struct is valid.
        unsafe { (inst.fp.get_physical_device_properties)(pd, &mut props) };
        if inst.api_version.min(props.api_version) < vk::API_VERSION_1_1 {
            if inst.properties2(pd).is_none()
                || !inst
                    .extensions
                    .contains("VK_KHR_external_memory_capabilities")
            {
                // The extension's own dependencies cannot be met on this instance.
                return v;
            }
            v.push(c"VK_KHR_external_memory");
        }
        // Issue 49: the way of double-mapping that every image a program may place in a block
        // can follow (hostmem/export.rs). Profile only for the fd way: the guard imports.
        let host = crate::hostmem::import::EXT_MEMORY_HOST;
        let offers = |c: &CStr| have.contains(c.to_str().unwrap_or_default());
        // Only where the "GPU" is the CPU: a real GPU does not use the CPU's page tables, so
        // protecting the driver's own mapping is enough there, and exporting every host-visible
        // allocation would change how a real driver places them.
        let cpu = d.table.device_type == echo_analyzer::topology::DeviceType::Cpu;
        let fd_way = profiles
            && cpu
            && offers(export::KHR_MEMORY_FD)
            && !(offers(host) && export::images_follow(inst, pd, Backing::HostImport))
            && export::images_follow(inst, pd, Backing::FdExport)
            && export::buffers_export(inst, pd);
        v.push(if fd_way { export::KHR_MEMORY_FD } else { host });
    }
    v
}

/// Device extensions echo enables for itself one by one where the device offers them (`have`):
/// in profile (and auto) mode, calibrated timestamps (`VK_KHR_calibrated_timestamps`, else
/// `VK_EXT_calibrated_timestamps`) so that GPU times land on the host's clock (issue 47;
/// `profile/gputime.rs`). Their dependency (Vulkan 1.1 or
/// `VK_KHR_get_physical_device_properties2` on the instance) must be met.
pub fn optional_extensions(
    inst: &InstanceData,
    pd: vk::PhysicalDevice,
    d: &Decision,
    have: &HashSet<String>,
) -> Vec<&'static CStr> {
    if !matches!(d.mode, Mode::Profile | Mode::Auto) {
        return Vec::new();
    }
    let mut props = vk::PhysicalDeviceProperties::default();
    // SAFETY: pd belongs to this instance; the out struct is valid.
    unsafe { (inst.fp.get_physical_device_properties)(pd, &mut props) };
    let v11 = inst.api_version.min(props.api_version) >= vk::API_VERSION_1_1;
    let props2 = inst
        .extensions
        .contains("VK_KHR_get_physical_device_properties2");
    crate::profile::gputime::calibration_extension(have, v11, props2)
        .into_iter()
        .collect()
}

/// The device extensions the next layer offers.
unsafe fn available_extensions(inst: &InstanceData, pd: vk::PhysicalDevice) -> HashSet<String> {
    let mut n = 0u32;
    let f = inst.fp.enumerate_device_extension_properties;
    if f(pd, std::ptr::null(), &mut n, std::ptr::null_mut()) != vk::Result::SUCCESS {
        return HashSet::new();
    }
    let mut v = vec![vk::ExtensionProperties::default(); n as usize];
    if f(pd, std::ptr::null(), &mut n, v.as_mut_ptr()) != vk::Result::SUCCESS {
        return HashSet::new();
    }
    v.truncate(n as usize);
    v.iter()
        .filter_map(|e| e.extension_name_as_c_str().ok())
        .map(|c| c.to_string_lossy().into_owned())
        .collect()
}

/// Whether the application enables `sparseBinding` (in `pEnabledFeatures` or a chained
/// `VkPhysicalDeviceFeatures2`).
unsafe fn sparse_binding(info: &vk::DeviceCreateInfo<'_>) -> bool {
    if info
        .p_enabled_features
        .as_ref()
        .is_some_and(|f| f.sparse_binding != 0)
    {
        return true;
    }
    let mut p = info.p_next as *const vk::BaseInStructure<'_>;
    while !p.is_null() {
        if (*p).s_type == vk::StructureType::PHYSICAL_DEVICE_FEATURES_2
            && (*(p as *const vk::PhysicalDeviceFeatures2<'_>))
                .features
                .sparse_binding
                != 0
        {
            return true;
        }
        p = (*p).p_next;
    }
    false
}

unsafe fn app_extensions(info: &vk::DeviceCreateInfo<'_>) -> Vec<String> {
    (0..info.enabled_extension_count as usize)
        .filter_map(|i| cstr(*info.pp_enabled_extension_names.add(i)))
        .map(|c| c.to_string_lossy().into_owned())
        .collect()
}

/// `VK_ECHO_TEST_PANIC=<command>[@after]`: a test-only switch that makes echo's hook for that
/// command panic (before, or after, the call went down). Read once per device; ignored in
/// secure-execution processes.
fn test_panic() -> Option<PanicAt> {
    let v = env_lookup(secure_execution())("VK_ECHO_TEST_PANIC")?;
    let (name, after) = match v.strip_suffix("@after") {
        Some(n) => (n, true),
        None => (v.as_str(), false),
    };
    let hook = HookId::from_name(name.trim().as_bytes())?;
    log::warn!(
        "VK_ECHO_TEST_PANIC: a panic will be injected into {}",
        hook.name()
    );
    Some(PanicAt { hook, after })
}

pub unsafe extern "system" fn vkCreateDevice(
    pd: vk::PhysicalDevice,
    info: *const vk::DeviceCreateInfo<'_>,
    alloc: *const vk::AllocationCallbacks<'_>,
    out: *mut vk::Device,
) -> vk::Result {
    let Some(link) = loader::take_device_link(info) else {
        log::error!("vkCreateDevice: no loader link info");
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };
    let inst = dispatch::instance(key_of(raw(pd)));
    let inst_handle = inst.as_ref().map_or(vk::Instance::null(), |i| i.handle);
    let Some(next_create) =
        proc_typed::<vk::PFN_vkCreateDevice>(link.next_gipa, inst_handle, c"vkCreateDevice")
    else {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    };

    // Decide before creating, so echo can add the extensions it needs (any failure: inactive).
    let decision = match &inst {
        Some(i) => guard_value(
            "vkCreateDevice",
            || unknown_decision("internal error while classifying"),
            || decide(i, pd),
        ),
        None => unknown_decision("instance not created through echo"),
    };
    let app_exts = app_extensions(&*info);
    let mut added: Vec<CString> = Vec::new();
    if let (true, Some(i)) = (decision.active, &inst) {
        added = guard_value("vkCreateDevice", Vec::new, || {
            let have = available_extensions(i, pd);
            let mut want = extensions_to_add(i, pd, &decision, &have);
            if want
                .iter()
                .any(|c| !have.contains(c.to_str().unwrap_or_default()))
            {
                // All or nothing: the memory-host extension without its dependency is invalid.
                want.clear();
            }
            want.extend(optional_extensions(i, pd, &decision, &have));
            want.into_iter()
                .map(|c| c.to_string_lossy().into_owned())
                .filter(|n| have.contains(n) && !app_exts.contains(n))
                .filter_map(|n| CString::new(n).ok())
                .collect()
        });
    }

    let mut r;
    if added.is_empty() {
        r = next_create(pd, info, alloc, out);
    } else {
        let own: Vec<*const c_char> = added.iter().map(|c| c.as_ptr()).collect();
        let names = super::instance::extension_list(
            (*info).enabled_extension_count,
            (*info).pp_enabled_extension_names,
            &own,
        );
        let mut patched = *info;
        patched.enabled_extension_count = names.len() as u32;
        patched.pp_enabled_extension_names = names.as_ptr();
        r = next_create(pd, &patched, alloc, out);
        if r == vk::Result::ERROR_EXTENSION_NOT_PRESENT
            || r == vk::Result::ERROR_FEATURE_NOT_PRESENT
        {
            log::warn!(
                "vkCreateDevice with echo's extra extensions failed ({r:?}); retrying without them"
            );
            added.clear();
            r = next_create(pd, info, alloc, out);
        }
    }
    if r != vk::Result::SUCCESS {
        return r;
    }
    let device = *out;
    let key = key_of(raw(device));
    dispatch::insert_device_link(key, link.next_gdpa);

    guard_value(
        "vkCreateDevice",
        || (),
        || {
            let gdpa = link.next_gdpa;
            let fp = ash::DeviceFnV1_0::load(|n| {
                gdpa(device, n.as_ptr()).map_or(std::ptr::null(), |f| f as *const c_void)
            });
            // The one table of the next layer's functions: every hooked name.
            let mut next = [None; HOOK_COUNT];
            for id in HookId::ALL {
                let name = CString::new(id.name()).expect("hook names have no NUL");
                next[id as usize] = gdpa(device, name.as_ptr());
            }
            let added: Vec<String> = added
                .iter()
                .map(|c| c.to_string_lossy().into_owned())
                .collect();
            let mut extensions: HashSet<String> = app_exts.iter().cloned().collect();
            extensions.extend(added.iter().cloned());
            log_decision(&decision);
            if !added.is_empty() {
                log::info!("enabled for echo: {}", added.join(", "));
            }
            let settings = inst
                .as_ref()
                .map(|i| i.settings.clone())
                .unwrap_or_else(|| {
                    echo_analyzer::settings::Settings::defaults(&env_lookup(secure_execution()))
                });
            let panic_at = if decision.active { test_panic() } else { None };
            let api_version = inst.as_ref().map_or(vk::API_VERSION_1_0, |i| {
                let mut props = vk::PhysicalDeviceProperties::default();
                // SAFETY: pd belongs to this instance; the out struct is valid.
                unsafe { (i.fp.get_physical_device_properties)(pd, &mut props) };
                i.api_version.min(props.api_version)
            });
            dispatch::insert_device(
                key,
                DeviceData {
                    device: Device {
                        handle: device,
                        index: crate::lifetime::next_device_index(),
                        stats_written: AtomicBool::new(false),
                        key_floor: std::sync::atomic::AtomicU64::new(u64::MAX),
                        physical_device: pd,
                        instance: inst.clone(),
                        next_gdpa: gdpa,
                        fp,
                        settings,
                        decision,
                        extensions,
                        added_extensions: added,
                        sparse_binding: sparse_binding(&*info),
                        queues_created: crate::records::slice(
                            (*info).p_queue_create_infos,
                            (*info).queue_create_info_count,
                        )
                        .iter()
                        .map(|q| (q.queue_family_index, q.flags))
                        .collect(),
                        set_loader_data_fn: link.set_loader_data,
                        api_version,
                        failed: AtomicBool::new(false),
                        state: DeviceState::default(),
                    },
                    next,
                    panic_at,
                    profile: std::sync::OnceLock::new(),
                    enforce: std::sync::OnceLock::new(),
                },
            );
            if let Some(d) = dispatch::device(key) {
                crate::coordinator::on_create_device(&d);
                if d.decision.active && d.decision.mode == Mode::Profile {
                    crate::coordinator::profile_device(&d, None);
                }
                // Which objects need a stable key, now that the device knows what it does.
                let floor = if d.decision.active {
                    crate::chassis::key_floor(&d)
                } else {
                    u64::MAX
                };
                d.set_key_floor(floor);
            }
        },
    );
    vk::Result::SUCCESS
}

pub unsafe extern "system" fn vkDestroyDevice(
    device: vk::Device,
    alloc: *const vk::AllocationCallbacks<'_>,
) {
    if device == vk::Device::null() {
        return;
    }
    let key = key_of(raw(device));
    let gdpa = dispatch::device_link(key);
    let dev: Option<Arc<DeviceData>> = dispatch::remove_device(key);
    let destroy: Option<vk::PFN_vkDestroyDevice> = match (&dev, gdpa) {
        (Some(d), _) => Some(d.fp.destroy_device),
        (None, Some(g)) => g(device, c"vkDestroyDevice".as_ptr()).map(|f| dispatch::typed(f)),
        (None, None) => None,
    };
    if let Some(d) = &dev {
        guard_value(
            "vkDestroyDevice",
            || (),
            || unsafe { crate::chassis::before(d, &crate::events::Cmd::DestroyDevice) },
        );
        guard_value(
            "vkDestroyDevice",
            || (),
            || crate::coordinator::on_destroy_device(d),
        );
    }
    if dev.is_some() {
        crate::callsite::log_stats();
    }
    if let Some(d) = &dev {
        log::debug!(
            "device '{}' destroyed: {} buffers, {} allocations, {} command buffers still tracked",
            d.decision.name,
            d.state.buffers.len(),
            d.state.memory.len(),
            d.state.command_buffers.len()
        );
    }
    drop(dev);
    match destroy {
        Some(f) => f(device, alloc),
        None => log::error!("vkDestroyDevice on a device echo does not know; not forwarded"),
    }
}
