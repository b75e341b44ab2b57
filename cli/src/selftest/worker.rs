//! `vkecho selftest-worker` (hidden): the child side of `vkecho selftest`. Each workload run is
//! a process of its own, so the loader loads echo into it as into any program (or keeps echo
//! out), in the mode the parent set in its environment.
//!
//! The command line is the same in every mode of one workload (a plan belongs to a program and
//! its arguments); what differs per run comes from the environment:
//!
//! - `VKECHO_SELFTEST_OUTPUT`: where the output goes (every byte read back, in order);
//! - `VKECHO_SELFTEST_RESULT`: where the result goes (JSON: times, validation messages);
//! - `VKECHO_SELFTEST_VALIDATION=1`: enable the validation layer (synchronization validation);
//! - `VKECHO_SELFTEST_LABEL`: the run's name (`profile`, `enforce`, `auto1`, …);
//! - `VKECHO_SELFTEST_PLANT` (tests only): a planted fault — `differ:WORKLOAD:LABEL` flips one
//!   output byte of that run, `crash:WORKLOAD:LABEL` aborts it, `no-race` makes `race` write
//!   its staging buffer only after the fence (the hazard is gone, so its pair is accepted).
//!
//! `vkecho selftest-worker devices` writes the physical devices instead (`vkecho doctor`'s
//! description of each, plus its queue families) and whether the validation layer is installed.

use super::vk::{messages, Gpu};
use super::workloads::{self, Opts, Sink};
use serde_json::{json, Value};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The workload, or `devices`
    pub workload: String,
    /// Physical device index (the loader's order)
    #[arg(long, default_value_t = 0)]
    pub device: usize,
    /// Bytes of each main buffer
    #[arg(long, default_value_t = 1 << 20)]
    pub size: u64,
    /// Iterations
    #[arg(long, default_value_t = 4)]
    pub iters: u32,
    /// The hand-written zero-copy twin instead of the staging program
    #[arg(long)]
    pub zero_copy: bool,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

pub fn main(a: &Args) -> i32 {
    let result = env("VKECHO_SELFTEST_RESULT").map(PathBuf::from);
    let outcome = if a.workload == "devices" {
        devices()
    } else {
        run(a)
    };
    match outcome {
        Ok(v) => {
            let text = serde_json::to_string(&v).unwrap_or_default();
            match &result {
                Some(p) => {
                    if let Err(e) = std::fs::write(p, text + "\n") {
                        eprintln!("vkecho selftest-worker: cannot write {}: {e}", p.display());
                        return 3;
                    }
                }
                None => println!("{text}"),
            }
            0
        }
        Err(e) => {
            eprintln!("vkecho selftest-worker: {}: {e}", a.workload);
            3
        }
    }
}

fn run(a: &Args) -> Result<Value, String> {
    let w = workloads::find(&a.workload).ok_or(format!(
        "unknown workload (known: {})",
        workloads::ALL
            .iter()
            .map(|w| w.name)
            .collect::<Vec<_>>()
            .join(", ")
    ))?;
    let label = env("VKECHO_SELFTEST_LABEL").unwrap_or_default();
    let plant = env("VKECHO_SELFTEST_PLANT").unwrap_or_default();
    let planted = |kind: &str| {
        plant
            .split(',')
            .any(|p| p == format!("{kind}:{}:{label}", w.name))
    };
    let validation = env("VKECHO_SELFTEST_VALIDATION").as_deref() == Some("1");
    let g = Gpu::new(a.device, w.graphics, validation)?;
    if a.zero_copy && !g.has_unified() {
        return Err("no DEVICE_LOCAL|HOST_VISIBLE|HOST_COHERENT memory type: no zero-copy twin on this device".into());
    }
    if planted("crash") {
        eprintln!(
            "vkecho selftest-worker: planted crash ({}, {label})",
            w.name
        );
        std::process::abort();
    }
    let size = (a.size / 256).max(1) * 256;
    let o = Opts {
        size,
        iters: a.iters.max(1),
        zero_copy: a.zero_copy,
        no_race: plant.split(',').any(|p| p == "no-race"),
    };
    let out = env("VKECHO_SELFTEST_OUTPUT").map(PathBuf::from);
    let mut sink = Sink::new(out.as_deref())?;
    if planted("differ") {
        sink.flip_in = Some(o.iters as usize - 1);
    }
    workloads::run(w, &g, &o, &mut sink)?;
    let name = g.name.clone();
    drop(g);
    Ok(json!({
        "workload": w.name,
        "device_index": a.device,
        "device": name,
        "variant": if a.zero_copy { "zero-copy" } else { "staging" },
        "size": size,
        "iters": o.iters,
        "output_bytes": sink.bytes,
        "iter_ms": sink.iter_ms,
        "validation": validation,
        "messages": if validation { serde_json::to_value(messages()).unwrap_or_default() } else { Value::Null },
    }))
}

/// The physical devices as `vkecho doctor` describes them, with their queue families, and
/// whether `VK_LAYER_KHRONOS_validation` is installed.
fn devices() -> Result<Value, String> {
    use ash::vk;
    // SAFETY: loading the loader runs no code of ours.
    let entry = unsafe { ash::Entry::load() }
        .map_err(|e| format!("cannot load the Vulkan loader (libvulkan.so.1): {e}"))?;
    let version = unsafe { entry.try_enumerate_instance_version() }
        .ok()
        .flatten()
        .unwrap_or(vk::API_VERSION_1_0);
    let (mut devs, _) = crate::doctor::list_devices(&entry, version)?;
    let listed = unsafe { entry.enumerate_instance_layer_properties() }
        .unwrap_or_default()
        .iter()
        .any(|l| l.layer_name_as_c_str().ok() == Some(c"VK_LAYER_KHRONOS_validation"));
    let app = vk::ApplicationInfo::default()
        .application_name(c"vkecho selftest")
        .api_version(vk::API_VERSION_1_0);
    // Listed is not loadable: a manifest of another architecture's package is listed too (an
    // arm64 loader beside amd64's validation layer). Only an instance with it enabled tells.
    let validation = listed && {
        let layers = [c"VK_LAYER_KHRONOS_validation".as_ptr()];
        let info = vk::InstanceCreateInfo::default()
            .application_info(&app)
            .enabled_layer_names(&layers);
        // SAFETY: valid create info; destroyed at once.
        match unsafe { entry.create_instance(&info, None) } {
            Ok(i) => {
                unsafe { i.destroy_instance(None) };
                true
            }
            Err(_) => false,
        }
    };
    // SAFETY: valid create info; destroyed before returning.
    unsafe {
        let instance = entry
            .create_instance(
                &vk::InstanceCreateInfo::default().application_info(&app),
                None,
            )
            .map_err(|e| format!("vkCreateInstance failed: {e}"))?;
        let pds = instance.enumerate_physical_devices().unwrap_or_default();
        for (d, pd) in devs.iter_mut().zip(pds) {
            let fams = instance.get_physical_device_queue_family_properties(pd);
            let has = |f: vk::QueueFlags| fams.iter().any(|q| q.queue_flags.contains(f));
            d["compute_queue"] = has(vk::QueueFlags::COMPUTE).into();
            d["graphics_queue"] = has(vk::QueueFlags::GRAPHICS | vk::QueueFlags::COMPUTE).into();
        }
        instance.destroy_instance(None);
    }
    Ok(json!({
        "loader_version": format!(
            "{}.{}.{}",
            vk::api_version_major(version),
            vk::api_version_minor(version),
            vk::api_version_patch(version)
        ),
        "validation_layer": validation,
        "validation_layer_listed": listed,
        "devices": devs,
    }))
}
