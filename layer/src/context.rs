//! The run context (DESIGN §5) of a device: which program, with which arguments, on which
//! device (its model: name, ids, driver, memory table; and its UUID) and driver, recorded by
//! which layer. Profile mode writes it into the trace header;
//! enforce mode compares it with a plan's (`echo_analyzer::context::plan_applies`).

#![allow(dead_code)] // called by profile and enforce start-up

use crate::records::InstanceData;
use ash::vk;
use echo_analyzer::context::{args_hash, exe_identity, memory_table_text};
use echo_analyzer::trace::Context;
use std::path::Path;
use std::sync::OnceLock;

/// Executable path, identity and argument hash: the same for every device of the process, so
/// gathered once (reading the executable for its build-id costs a file read).
fn process_part() -> &'static (String, String, String) {
    static P: OnceLock<(String, String, String)> = OnceLock::new();
    P.get_or_init(|| {
        let exe_path = std::fs::read_link("/proc/self/exe")
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let exe_id = exe_identity(Path::new("/proc/self/exe"));
        let args: Vec<Vec<u8>> = std::fs::read("/proc/self/cmdline")
            .map(|b| b.split(|&c| c == 0).map(|s| s.to_vec()).collect::<Vec<_>>())
            .unwrap_or_default();
        // cmdline ends with a NUL, so the split yields a trailing empty piece.
        let mut argv: &[Vec<u8>] = &args;
        if argv.last().is_some_and(|l| l.is_empty()) {
            argv = &argv[..argv.len() - 1];
        }
        let rest = if argv.is_empty() { argv } else { &argv[1..] };
        // An interpreter runs a program given as an argument (DESIGN §5): the script is part of
        // the program's identity, or every Python program would be the same `python3.11`.
        let cwd = std::env::current_dir().unwrap_or_default();
        let exe_id = match echo_analyzer::program::interpreted_program(&exe_path, rest, &cwd) {
            Some(p) => format!("{exe_id} {p}"),
            None => exe_id,
        };
        (exe_path, exe_id, args_hash(rest))
    })
}

/// The context of this process on physical device `pd`, read through the next layer.
pub fn gather(inst: &InstanceData, pd: vk::PhysicalDevice) -> Context {
    let (exe_path, exe_id, args) = process_part().clone();
    let mut props = vk::PhysicalDeviceProperties::default();
    // SAFETY: pd belongs to this instance; the out struct is valid.
    unsafe { (inst.fp.get_physical_device_properties)(pd, &mut props) };
    let device_name = props
        .device_name_as_c_str()
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut device_uuid = String::new();
    // VkPhysicalDeviceIDProperties is core 1.1 (VK_KHR_external_memory_capabilities on a 1.0
    // instance, which echo enables for itself there): ask only where the instance allows it.
    let id_ok = inst.api_version >= vk::API_VERSION_1_1
        || inst
            .extensions
            .contains("VK_KHR_external_memory_capabilities");
    if let (true, Some(gpdp2)) = (id_ok, inst.properties2(pd)) {
        let mut id = vk::PhysicalDeviceIDProperties::default();
        let mut p2 = vk::PhysicalDeviceProperties2 {
            p_next: &mut id as *mut _ as *mut std::ffi::c_void,
            ..Default::default()
        };
        // SAFETY: valid chain of out structs; pd belongs to this instance.
        unsafe { gpdp2(pd, &mut p2) };
        device_uuid = id.device_uuid.iter().map(|b| format!("{b:02x}")).collect();
    }
    let mut mem = vk::PhysicalDeviceMemoryProperties::default();
    // SAFETY: pd belongs to this instance; the out struct is valid.
    unsafe { (inst.fp.get_physical_device_memory_properties)(pd, &mut mem) };
    // The device model (issue 27): a plan travels to every device with the same name, ids,
    // driver and memory table, whatever its UUID.
    let memory_table = memory_table_text(
        mem.memory_heaps_as_slice()
            .iter()
            .map(|h| (h.size, h.flags.as_raw())),
        mem.memory_types_as_slice()
            .iter()
            .map(|t| (t.heap_index, t.property_flags.as_raw())),
    );
    Context {
        vendor_id: props.vendor_id,
        device_id: props.device_id,
        memory_table,
        pipeline_cache_uuid: props
            .pipeline_cache_uuid
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
        exe_path,
        exe_id,
        args_hash: args,
        layer_version: env!("CARGO_PKG_VERSION").to_string(),
        device_name,
        device_uuid,
        driver_version: props.driver_version,
    }
}
