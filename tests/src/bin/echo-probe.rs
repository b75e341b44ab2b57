//! echo-probe: creates an instance and a device on every physical device, reports as JSON
//! which device commands `vkGetDeviceProcAddr` resolves into libVkLayer_echo.so (by `dladdr`),
//! and runs a small staging-copy workload (upload → device buffer → readback) so echo's hooks
//! are exercised. Used by tests/tests/loader.rs.
//!
//! Options: `--app-setting name=value` (repeatable) passes a `VkLayerSettingsCreateInfoEXT`
//! string setting for VK_LAYER_echo; `--bytes N` sets the workload size (default 1 MiB);
//! `--out FILE` writes the JSON there instead of stdout (layers may print to stdout);
//! `--try-extension NAME` also creates a device with device extension NAME enabled and reports
//! the result (`try_extension`). Each device also reports its `api_version` ("1.2.230") and
//! whether it lists `VK_EXT_external_memory_host`.

use ash::vk;
use serde_json::{json, Value};
use std::ffi::{c_void, CStr, CString};

/// Device commands whose pointer the probe locates.
const COMMANDS: &[&str] = &[
    "vkCreateBuffer",
    "vkDestroyBuffer",
    "vkAllocateMemory",
    "vkMapMemory",
    "vkBindBufferMemory",
    "vkBeginCommandBuffer",
    "vkCmdCopyBuffer",
    "vkCmdCopyBuffer2",
    "vkCmdCopyBuffer2KHR",
    "vkCmdPipelineBarrier2",
    "vkQueueSubmit2",
    "vkCmdDispatch",
    "vkQueueSubmit",
    "vkWaitForFences",
    "vkGetBufferDeviceAddress",
    "vkGetDeviceQueue",
    "vkCreateFence",
    "vkDestroyDevice",
    // issue 32: a command echo steps aside from, commands followed since, one that cannot
    // reach memory
    "vkCmdCopyQueryPoolResults",
    "vkCmdCopyBufferToImage2",
    "vkCmdBindVertexBuffers2",
    "vkCmdSetViewport",
];

/// The shared object that holds `p`, by file name.
fn library_of(p: *const c_void) -> Option<String> {
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    if unsafe { libc::dladdr(p, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    let path = unsafe { CStr::from_ptr(info.dli_fname) }
        .to_string_lossy()
        .into_owned();
    Some(path.rsplit('/').next().unwrap_or(&path).to_string())
}

fn flags_text(f: vk::MemoryPropertyFlags) -> Vec<&'static str> {
    let mut v = vec![];
    for (b, n) in [
        (vk::MemoryPropertyFlags::DEVICE_LOCAL, "DL"),
        (vk::MemoryPropertyFlags::HOST_VISIBLE, "HV"),
        (vk::MemoryPropertyFlags::HOST_COHERENT, "HC"),
        (vk::MemoryPropertyFlags::HOST_CACHED, "HCA"),
        (vk::MemoryPropertyFlags::PROTECTED, "PROT"),
    ] {
        if f.contains(b) {
            v.push(n);
        }
    }
    v
}

struct Buf {
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
}

unsafe fn make_buffer(
    dev: &ash::Device,
    mem: &vk::PhysicalDeviceMemoryProperties,
    size: u64,
    usage: vk::BufferUsageFlags,
    want: vk::MemoryPropertyFlags,
) -> Result<Buf, String> {
    let buffer = dev
        .create_buffer(
            &vk::BufferCreateInfo::default().size(size).usage(usage),
            None,
        )
        .map_err(|e| format!("vkCreateBuffer: {e}"))?;
    let req = dev.get_buffer_memory_requirements(buffer);
    let ty = (0..mem.memory_type_count)
        .find(|&i| {
            req.memory_type_bits & (1 << i) != 0
                && mem.memory_types[i as usize].property_flags.contains(want)
        })
        .ok_or("no memory type")?;
    let memory = dev
        .allocate_memory(
            &vk::MemoryAllocateInfo::default()
                .allocation_size(req.size)
                .memory_type_index(ty),
            None,
        )
        .map_err(|e| format!("vkAllocateMemory: {e}"))?;
    dev.bind_buffer_memory(buffer, memory, 0)
        .map_err(|e| format!("vkBindBufferMemory: {e}"))?;
    Ok(Buf { buffer, memory })
}

/// Upload a pattern through a staging buffer to a device buffer and read it back.
unsafe fn work(
    dev: &ash::Device,
    mem: &vk::PhysicalDeviceMemoryProperties,
    bytes: u64,
) -> Result<Value, String> {
    let hv = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
    let up = make_buffer(dev, mem, bytes, vk::BufferUsageFlags::TRANSFER_SRC, hv)?;
    let mid = make_buffer(
        dev,
        mem,
        bytes,
        vk::BufferUsageFlags::TRANSFER_SRC
            | vk::BufferUsageFlags::TRANSFER_DST
            | vk::BufferUsageFlags::STORAGE_BUFFER,
        vk::MemoryPropertyFlags::DEVICE_LOCAL,
    )?;
    let down = make_buffer(dev, mem, bytes, vk::BufferUsageFlags::TRANSFER_DST, hv)?;
    let p = dev
        .map_memory(up.memory, 0, bytes, vk::MemoryMapFlags::empty())
        .map_err(|e| format!("vkMapMemory: {e}"))? as *mut u32;
    let n = (bytes / 4) as usize;
    for i in 0..n {
        *p.add(i) = (i as u32).wrapping_mul(2654435761);
    }
    dev.unmap_memory(up.memory);

    let pool = dev
        .create_command_pool(
            &vk::CommandPoolCreateInfo::default().queue_family_index(0),
            None,
        )
        .map_err(|e| format!("vkCreateCommandPool: {e}"))?;
    let cb = dev
        .allocate_command_buffers(
            &vk::CommandBufferAllocateInfo::default()
                .command_pool(pool)
                .command_buffer_count(1),
        )
        .map_err(|e| format!("vkAllocateCommandBuffers: {e}"))?[0];
    dev.begin_command_buffer(cb, &vk::CommandBufferBeginInfo::default())
        .map_err(|e| format!("vkBeginCommandBuffer: {e}"))?;
    let region = [vk::BufferCopy {
        src_offset: 0,
        dst_offset: 0,
        size: bytes,
    }];
    dev.cmd_copy_buffer(cb, up.buffer, mid.buffer, &region);
    let barrier = vk::MemoryBarrier::default()
        .src_access_mask(vk::AccessFlags::TRANSFER_WRITE)
        .dst_access_mask(vk::AccessFlags::TRANSFER_READ);
    dev.cmd_pipeline_barrier(
        cb,
        vk::PipelineStageFlags::TRANSFER,
        vk::PipelineStageFlags::TRANSFER,
        vk::DependencyFlags::empty(),
        &[barrier],
        &[],
        &[],
    );
    dev.cmd_copy_buffer(cb, mid.buffer, down.buffer, &region);
    let host = vk::MemoryBarrier::default()
        .src_access_mask(vk::AccessFlags::TRANSFER_WRITE)
        .dst_access_mask(vk::AccessFlags::HOST_READ);
    dev.cmd_pipeline_barrier(
        cb,
        vk::PipelineStageFlags::TRANSFER,
        vk::PipelineStageFlags::HOST,
        vk::DependencyFlags::empty(),
        &[host],
        &[],
        &[],
    );
    dev.end_command_buffer(cb)
        .map_err(|e| format!("vkEndCommandBuffer: {e}"))?;
    let fence = dev
        .create_fence(&vk::FenceCreateInfo::default(), None)
        .map_err(|e| format!("vkCreateFence: {e}"))?;
    let queue = dev.get_device_queue(0, 0);
    let cbs = [cb];
    dev.queue_submit(
        queue,
        &[vk::SubmitInfo::default().command_buffers(&cbs)],
        fence,
    )
    .map_err(|e| format!("vkQueueSubmit: {e}"))?;
    dev.wait_for_fences(&[fence], true, u64::MAX)
        .map_err(|e| format!("vkWaitForFences: {e}"))?;

    let q = dev
        .map_memory(down.memory, 0, bytes, vk::MemoryMapFlags::empty())
        .map_err(|e| format!("vkMapMemory: {e}"))? as *const u32;
    let mut hash: u64 = 0xcbf29ce484222325;
    let mut mismatches = 0u64;
    for i in 0..n {
        let v = *q.add(i);
        if v != (i as u32).wrapping_mul(2654435761) {
            mismatches += 1;
        }
        for b in v.to_le_bytes() {
            hash = (hash ^ b as u64).wrapping_mul(0x100000001b3);
        }
    }
    dev.unmap_memory(down.memory);

    dev.destroy_fence(fence, None);
    dev.free_command_buffers(pool, &cbs);
    dev.destroy_command_pool(pool, None);
    for b in [up, mid, down] {
        dev.destroy_buffer(b.buffer, None);
        dev.free_memory(b.memory, None);
    }
    Ok(json!({ "bytes": bytes, "mismatches": mismatches, "checksum": format!("{hash:016x}") }))
}

fn main() {
    let mut app_settings: Vec<(CString, CString)> = Vec::new();
    let mut bytes: u64 = 1 << 20;
    let mut out_file: Option<String> = None;
    let mut try_ext: Option<CString> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--app-setting" => {
                let v = args.next().expect("--app-setting name=value");
                let (k, v) = v.split_once('=').expect("--app-setting name=value");
                app_settings.push((CString::new(k).unwrap(), CString::new(v).unwrap()));
            }
            "--out" => out_file = Some(args.next().expect("--out FILE")),
            "--try-extension" => {
                try_ext = Some(CString::new(args.next().expect("--try-extension NAME")).unwrap())
            }
            "--bytes" => bytes = args.next().and_then(|v| v.parse().ok()).expect("--bytes N"),
            other => {
                eprintln!("echo-probe: unknown argument {other}");
                std::process::exit(2);
            }
        }
    }
    let out = unsafe { run(&app_settings, bytes, try_ext.as_deref()) };
    match out {
        Ok(v) => {
            let text = serde_json::to_string_pretty(&v).unwrap();
            match out_file {
                Some(f) => std::fs::write(&f, text + "\n").expect("cannot write --out file"),
                None => println!("{text}"),
            }
        }
        Err(e) => {
            eprintln!("echo-probe: {e}");
            std::process::exit(1);
        }
    }
}

unsafe fn run(
    app_settings: &[(CString, CString)],
    bytes: u64,
    try_ext: Option<&CStr>,
) -> Result<Value, String> {
    let entry = ash::Entry::load().map_err(|e| format!("cannot load libvulkan: {e}"))?;
    // Vulkan 1.3 where the loader offers it, so 1.3 commands (vkCmdCopyBuffer2) resolve too.
    let version = entry
        .try_enumerate_instance_version()
        .ok()
        .flatten()
        .unwrap_or(vk::API_VERSION_1_0);
    let app = vk::ApplicationInfo::default().api_version(version.min(vk::API_VERSION_1_3));
    let values: Vec<*const std::ffi::c_char> =
        app_settings.iter().map(|(_, v)| v.as_ptr()).collect();
    let settings: Vec<vk::LayerSettingEXT> = app_settings
        .iter()
        .enumerate()
        .map(|(i, (k, _))| vk::LayerSettingEXT {
            p_layer_name: c"VK_LAYER_echo".as_ptr(),
            p_setting_name: k.as_ptr(),
            ty: vk::LayerSettingTypeEXT::STRING,
            value_count: 1,
            p_values: values.as_ptr().add(i) as *const c_void,
            ..Default::default()
        })
        .collect();
    let mut layer_settings = vk::LayerSettingsCreateInfoEXT::default().settings(&settings);
    let mut ci = vk::InstanceCreateInfo::default().application_info(&app);
    if !settings.is_empty() {
        ci = ci.push_next(&mut layer_settings);
    }
    let instance = entry
        .create_instance(&ci, None)
        .map_err(|e| format!("vkCreateInstance: {e}"))?;
    let mut devices = Vec::new();
    for pd in instance
        .enumerate_physical_devices()
        .map_err(|e| e.to_string())?
    {
        let props = instance.get_physical_device_properties(pd);
        let mem = instance.get_physical_device_memory_properties(pd);
        let name = props
            .device_name_as_c_str()
            .unwrap_or(c"?")
            .to_string_lossy()
            .into_owned();
        let prio = [1.0f32];
        let qi = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(0)
            .queue_priorities(&prio)];
        let device = instance
            .create_device(
                pd,
                &vk::DeviceCreateInfo::default().queue_create_infos(&qi),
                None,
            )
            .map_err(|e| format!("vkCreateDevice: {e}"))?;
        let mut hooks = serde_json::Map::new();
        let mut in_echo = 0;
        for c in COMMANDS {
            let cname = CString::new(*c).unwrap();
            let p = (instance.fp_v1_0().get_device_proc_addr)(device.handle(), cname.as_ptr());
            let lib = match p {
                None => "null".to_string(),
                Some(f) => library_of(f as *const c_void).unwrap_or_else(|| "?".into()),
            };
            if lib == "libVkLayer_echo.so" {
                in_echo += 1;
            }
            hooks.insert(c.to_string(), Value::String(lib));
        }
        let w = work(&device, &mem, bytes).unwrap_or_else(|e| json!({ "error": e }));
        device.destroy_device(None);
        let lists_memory_host = instance
            .enumerate_device_extension_properties(pd)
            .map_err(|e| format!("vkEnumerateDeviceExtensionProperties: {e}"))?
            .iter()
            .any(|e| e.extension_name_as_c_str() == Ok(c"VK_EXT_external_memory_host"));
        let tried = try_ext.map(|ext| {
            let names = [ext.as_ptr()];
            let r = instance.create_device(
                pd,
                &vk::DeviceCreateInfo::default()
                    .queue_create_infos(&qi)
                    .enabled_extension_names(&names),
                None,
            );
            match r {
                Ok(d) => {
                    d.destroy_device(None);
                    "SUCCESS".to_string()
                }
                Err(e) => format!("{e:?}"),
            }
        });
        devices.push(json!({
            "name": name,
            "device_type": format!("{:?}", props.device_type),
            "api_version": format!(
                "{}.{}.{}",
                vk::api_version_major(props.api_version),
                vk::api_version_minor(props.api_version),
                vk::api_version_patch(props.api_version)
            ),
            "lists_external_memory_host": lists_memory_host,
            "try_extension": tried,
            "memory_types": (0..mem.memory_type_count)
                .map(|i| flags_text(mem.memory_types[i as usize].property_flags))
                .collect::<Vec<_>>(),
            "hooks": hooks,
            "in_echo": in_echo,
            "work": w,
        }));
    }
    instance.destroy_instance(None);
    Ok(json!({ "devices": devices }))
}
