//! echo-fresh: what a program finds in memory it has just allocated and mapped, before writing
//! it. The control for poisoning (issue 8, DESIGN §8 "recycled memory"): with the test layer's
//! `VK_ECHO_TEST_POISON` the bytes must be the poison, without it they are what the driver gives
//! (zero pages for a fresh mapping on lavapipe). Two rounds: the second allocates again after the
//! first round's memory was dirtied and freed (a reallocation).
//!
//! Prints one JSON line: `{"device": NAME, "allocations": [{"round", "size", "poison_fraction",
//! "zero_fraction"}]}` where `poison_fraction` counts bytes equal to 0xA5.

use ash::vk;
use serde_json::json;

const SIZES: [u64; 3] = [4096, 1 << 20, 8 << 20];

fn main() {
    match unsafe { run() } {
        Ok(v) => println!("{v}"),
        Err(e) => {
            eprintln!("echo-fresh: {e}");
            std::process::exit(1);
        }
    }
}

unsafe fn run() -> Result<serde_json::Value, String> {
    let entry = ash::Entry::load().map_err(|e| format!("no Vulkan loader: {e}"))?;
    let app = vk::ApplicationInfo::default()
        .application_name(c"echo-fresh")
        .api_version(vk::API_VERSION_1_1);
    let instance = entry
        .create_instance(
            &vk::InstanceCreateInfo::default().application_info(&app),
            None,
        )
        .map_err(|e| format!("vkCreateInstance: {e}"))?;
    let pds = instance
        .enumerate_physical_devices()
        .map_err(|e| format!("vkEnumeratePhysicalDevices: {e}"))?;
    let pd = *pds.first().ok_or("no physical device")?;
    let props = instance.get_physical_device_properties(pd);
    let name = props
        .device_name_as_c_str()
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mem = instance.get_physical_device_memory_properties(pd);
    let prio = [1.0f32];
    let queue = [vk::DeviceQueueCreateInfo::default()
        .queue_family_index(0)
        .queue_priorities(&prio)];
    let device = instance
        .create_device(
            pd,
            &vk::DeviceCreateInfo::default().queue_create_infos(&queue),
            None,
        )
        .map_err(|e| format!("vkCreateDevice: {e}"))?;
    let host_type = mem
        .memory_types_as_slice()
        .iter()
        .position(|t| {
            t.property_flags.contains(
                vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT,
            )
        })
        .ok_or("no host-visible coherent memory type")? as u32;
    let mut out = Vec::new();
    for round in 0..2 {
        let mut held = Vec::new();
        for &size in &SIZES {
            let m = device
                .allocate_memory(
                    &vk::MemoryAllocateInfo::default()
                        .allocation_size(size)
                        .memory_type_index(host_type),
                    None,
                )
                .map_err(|e| format!("vkAllocateMemory({size}): {e}"))?;
            let p = device
                .map_memory(m, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
                .map_err(|e| format!("vkMapMemory: {e}"))? as *mut u8;
            let bytes = std::slice::from_raw_parts_mut(p, size as usize);
            let poison = bytes.iter().filter(|b| **b == 0xA5).count();
            let zero = bytes.iter().filter(|b| **b == 0).count();
            out.push(json!({
                "round": round,
                "size": size,
                "poison_fraction": poison as f64 / size as f64,
                "zero_fraction": zero as f64 / size as f64,
            }));
            // Dirty it, so a reallocation that reuses these pages would show 0x3C.
            bytes.fill(0x3C);
            device.unmap_memory(m);
            held.push(m);
        }
        for m in held {
            device.free_memory(m, None);
        }
    }
    device.destroy_device(None);
    instance.destroy_instance(None);
    Ok(json!({ "device": name, "allocations": out }))
}
