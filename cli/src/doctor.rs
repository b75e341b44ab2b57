//! `vkecho doctor [--json]`: explain this machine. The Vulkan loader and its version, the
//! drivers it can find, every physical device with its memory table and topology class
//! (DESIGN §2), where the echo manifest is installed and how it gets enabled, the settings the
//! layer would resolve in this environment, and what would stop the layer from loading.
//!
//! The report is built once as a JSON document; the human text is rendered from it, so both
//! always say the same. Exit status: 0 when nothing stops echo from loading and acting, 1 when
//! `problems` is not empty, 2 on a usage error.
//!
//! Doctor never loads echo into its own process: it sets `VK_ECHO_DISABLE=1` before it loads the
//! loader (an installed implicit copy then stays out) and names no layer. Whether the layer
//! *can* load is checked in a child process (`vkecho doctor --probe-load`) with the layer in
//! mode `off`, and the report says whether the library was mapped there.
//!
//! Over 1,000 lines: gathering the report (`build_report`: loader, drivers, devices, manifests,
//! settings, the load probe in a child) and rendering it in plain words (`render`), each
//! question in the order it prints.

use crate::paths::{self, Kind, LAYER_NAME};
use ash::vk;
use echo_analyzer::settings::{parse_settings_file, resolve, SETTINGS};
use echo_analyzer::topology::{classify, flag_names, DeviceType, MemoryTable};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// `vkecho doctor [--json]`.
#[derive(clap::Args)]
#[command(
    long_about = "Explains this machine: the Vulkan loader, drivers, every device's memory \
table and topology class, where VK_LAYER_echo is installed and how it is enabled, the settings it \
would use here, and what would stop it from loading. Exit status 1 when a problem is found."
)]
pub struct Args {
    /// Print one JSON document instead of text
    #[arg(long)]
    pub json: bool,
    /// Internal: load the layer library in this process and report (run by doctor itself)
    #[arg(long, hide = true)]
    pub probe_load: bool,
}

/// Environment variables that change what the loader or echo does; shown in the report.
const RELEVANT_ENV: &[&str] = &[
    "VK_ECHO_ENABLE",
    "VK_ECHO_DISABLE",
    "VK_INSTANCE_LAYERS",
    "VK_LAYER_PATH",
    "VK_ADD_LAYER_PATH",
    "VK_LOADER_LAYERS_ENABLE",
    "VK_LOADER_LAYERS_DISABLE",
    "VK_DRIVER_FILES",
    "VK_ICD_FILENAMES",
    "VK_ADD_DRIVER_FILES",
    "VK_LAYER_SETTINGS_PATH",
    "XDG_DATA_HOME",
    "XDG_DATA_DIRS",
    "XDG_CONFIG_HOME",
    "XDG_CONFIG_DIRS",
    "XDG_RUNTIME_DIR",
    "XDG_CACHE_HOME",
    "HOME",
    "LD_LIBRARY_PATH",
];

pub fn main(args: &Args) -> i32 {
    if args.probe_load {
        return probe_load();
    }
    let json_out = args.json;
    let report = report_here();
    if json_out {
        println!("{}", serde_json::to_string_pretty(&report).unwrap());
    } else {
        print!("{}", render(&report));
    }
    if report["problems"].as_array().is_some_and(|p| !p.is_empty()) {
        1
    } else {
        0
    }
}

/// What `vkecho doctor --json` prints, for this process's environment (also `vkecho report`).
/// Changes this process's environment to keep echo out of its own instance: call it before any
/// other thread starts.
pub fn report_here() -> Value {
    // The user's environment, as it was, before doctor changes its own.
    let snapshot: BTreeMap<String, String> = std::env::vars().collect();
    let env = |k: &str| snapshot.get(k).cloned();
    // Keep an installed implicit echo out of this process. Single-threaded here, before the
    // loader is loaded, so changing the environment is sound.
    // An explicit echo is kept out by naming no layer: VK_INSTANCE_LAYERS and the loader's
    // enable filter are dropped for this process (doctor's instance only enumerates devices).
    std::env::set_var("VK_ECHO_DISABLE", "1");
    std::env::remove_var("VK_INSTANCE_LAYERS");
    std::env::remove_var("VK_LOADER_LAYERS_ENABLE");
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        std::env::set_var("XDG_RUNTIME_DIR", std::env::temp_dir());
    }
    build_report(&env)
}

fn build_report(env: paths::Env) -> Value {
    let mut problems: Vec<String> = Vec::new();
    let mut warnings: Vec<String> = Vec::new();
    let mut notes: Vec<String> = Vec::new();

    let environment: BTreeMap<&str, Value> = RELEVANT_ENV
        .iter()
        .map(|k| (*k, env(k).map(Value::from).unwrap_or(Value::Null)))
        .collect();

    // --- environment pitfalls (DESIGN §3) -----------------------------------------------------
    if let Some(dd) = env("XDG_DATA_DIRS").filter(|s| !s.is_empty()) {
        let has_usr_share = dd
            .split(':')
            .any(|d| d.trim_end_matches('/') == "/usr/share");
        if !has_usr_share && Path::new("/usr/share/vulkan").is_dir() {
            problems.push(format!(
                "XDG_DATA_DIRS={dd} lacks /usr/share: it replaces the loader's default list, so the \
                 drivers and layers in /usr/share/vulkan (lavapipe's ICD among them) are not found; \
                 use XDG_DATA_DIRS={dd}:/usr/share"
            ));
        }
    }
    if env("XDG_RUNTIME_DIR").filter(|s| !s.is_empty()).is_none() {
        warnings.push(
            "XDG_RUNTIME_DIR is not set: Mesa drivers complain on every run ('XDG_RUNTIME_DIR is \
             invalid or not set'); set it, e.g. XDG_RUNTIME_DIR=/run/user/$(id -u) or /tmp"
                .into(),
        );
    }
    for var in ["VK_LOADER_LAYERS_DISABLE"] {
        if let Some(v) = env(var) {
            if v.split(',')
                .any(|f| f == "~all~" || f == "~implicit~" || f == LAYER_NAME || f.contains("echo"))
            {
                warnings.push(format!("{var}={v} may filter VK_LAYER_echo out"));
            }
        }
    }

    // --- drivers -------------------------------------------------------------------------------
    let (driver_dirs, driver_override) = paths::search_dirs(env, Kind::Driver);
    let mut drivers = Vec::new();
    for d in &driver_dirs {
        for f in paths::json_files(d) {
            let mut entry = json!({"manifest": f.display().to_string(), "origin": d.origin});
            match paths::read_json(&f) {
                Ok(doc) => {
                    let lp = doc["ICD"]["library_path"].as_str().unwrap_or("");
                    let (resolved, exists) = paths::resolve_library(&f, lp, env);
                    entry["library_path"] = lp.into();
                    entry["library"] = resolved.display().to_string().into();
                    entry["library_found"] = exists.into();
                    entry["library_arch"] = paths::elf_arch(&resolved).into();
                    entry["api_version"] = doc["ICD"]["api_version"].clone();
                }
                Err(e) => entry["error"] = e.into(),
            }
            drivers.push(entry);
        }
    }
    if let Some(n) = &driver_override {
        notes.push(n.clone());
    }
    if drivers.is_empty() {
        problems.push(format!(
            "no Vulkan driver manifest found (searched {}); install mesa-vulkan-drivers for lavapipe \
             (scripts/deps.sh does)",
            driver_dirs
                .iter()
                .map(|d| d.path.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }

    // --- the echo manifest -----------------------------------------------------------------------
    let mut manifests = Vec::new();
    let mut override_notes = Vec::new();
    for kind in [Kind::Implicit, Kind::Explicit] {
        let (dirs, note) = paths::search_dirs(env, kind);
        if let Some(n) = note {
            override_notes.push(n);
        }
        for d in &dirs {
            for f in paths::json_files(d) {
                let Ok(doc) = paths::read_json(&f) else {
                    continue;
                };
                if !paths::layer_names(&doc).iter().any(|n| n == LAYER_NAME) {
                    continue;
                }
                let lp = doc["layer"]["library_path"].as_str().unwrap_or("");
                let (resolved, exists) = paths::resolve_library(&f, lp, env);
                manifests.push(json!({
                    "path": f.display().to_string(),
                    "kind": kind.as_str(),
                    "origin": d.origin,
                    "library_path": lp,
                    "library": resolved.display().to_string(),
                    "library_found": exists,
                    "library_arch": paths::elf_arch(&resolved),
                    "api_version": doc["layer"]["api_version"],
                    "enable_environment": doc["layer"]["enable_environment"],
                }));
            }
        }
    }
    notes.extend(override_notes);

    // --- the loader ------------------------------------------------------------------------------
    let mut loader = json!({"found": false});
    let mut layers_seen: Vec<String> = Vec::new();
    let mut devices: Vec<Value> = Vec::new();
    let mut loaded_in_doctor = false;
    // SAFETY: loading libvulkan runs no code of ours; doctor is single-threaded here.
    match unsafe { ash::Entry::load() } {
        Err(e) => {
            loader["error"] = e.to_string().into();
            problems.push(format!(
                "no Vulkan loader: {e}; install libvulkan1 (scripts/deps.sh does)"
            ));
        }
        Ok(entry) => {
            loader["found"] = true.into();
            let version = match unsafe { entry.try_enumerate_instance_version() } {
                Ok(Some(v)) => v,
                Ok(None) => vk::API_VERSION_1_0,
                Err(_) => vk::API_VERSION_1_0,
            };
            loader["version"] = version_string(version).into();
            if let Some(p) = mapped_path("libvulkan.so") {
                loader["library"] = p.into();
            }
            match unsafe { entry.enumerate_instance_layer_properties() } {
                Ok(props) => {
                    layers_seen = props
                        .iter()
                        .filter_map(|p| p.layer_name_as_c_str().ok())
                        .map(|c| c.to_string_lossy().into_owned())
                        .collect()
                }
                Err(e) => warnings.push(format!("vkEnumerateInstanceLayerProperties: {e}")),
            }
            match list_devices(&entry, version) {
                Ok((d, echo_mapped)) => {
                    devices = d;
                    loaded_in_doctor = echo_mapped;
                }
                Err(e) => problems.push(e),
            }
        }
    }
    if loader["found"] == true && devices.is_empty() && !drivers.is_empty() {
        problems.push(
            "the loader found driver manifests but no physical device: check that each driver \
             library exists and matches this architecture (VK_LOADER_DEBUG=error,warn,driver \
             shows why)"
                .into(),
        );
    }

    // --- settings, as the layer would resolve them here ------------------------------------------
    let settings_file = settings_file(env);
    let mut file_warnings = Vec::new();
    let file_entries = settings_file
        .as_ref()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .map(|t| parse_settings_file(&t, &mut file_warnings))
        .unwrap_or_default();
    let (resolved, mut setting_warnings) = resolve(env, &file_entries, &[]);
    setting_warnings.extend(file_warnings);
    let values: BTreeMap<String, String> = resolved.to_pairs().into_iter().collect();
    let sources: BTreeMap<&str, &str> = SETTINGS
        .iter()
        .map(|i| {
            let src = if env(&format!("VK_ECHO_{}", i.name.to_uppercase())).is_some() {
                "environment"
            } else if file_entries.iter().any(|(n, _)| n == i.name) {
                "vk_layer_settings.txt"
            } else {
                "default"
            };
            (i.name, src)
        })
        .collect();
    for w in &setting_warnings {
        warnings.push(format!("setting: {w}"));
    }

    // --- activity per device under the topology setting ------------------------------------------
    for d in devices.iter_mut() {
        let active = match d["class"].as_str() {
            Some("uma-strict") => true,
            Some("uma-integrated") => values["topology"] == "integrated",
            _ => false,
        } && values["mode"] != "off";
        d["echo_active"] = active.into();
    }
    if !devices.is_empty() && !devices.iter().any(|d| d["echo_active"] == true) {
        notes.push(if values["mode"] == "off" {
            "mode is off: echo would pass every call through".to_string()
        } else {
            "no device here is one echo acts on (topology setting: ".to_string()
                + &values["topology"]
                + "): it would stay out of the call path"
        });
    }

    // --- how echo gets enabled, and whether it can load ------------------------------------------
    let seen = layers_seen.iter().any(|n| n == LAYER_NAME);
    let implicit = manifests.iter().find(|m| m["kind"] == "implicit");
    let explicit = manifests.iter().find(|m| m["kind"] == "explicit");
    let mut how = Vec::new();
    if implicit.is_some() {
        how.push("implicit: VK_ECHO_ENABLE=1 <program> (VK_ECHO_DISABLE=1 switches it off)");
    }
    if implicit.is_some() || explicit.is_some() {
        how.push("by name: VK_INSTANCE_LAYERS=VK_LAYER_echo <program>");
    }
    let disabled_now = env("VK_ECHO_DISABLE").is_some_and(|v| !v.is_empty());
    let by_name = env("VK_INSTANCE_LAYERS").is_some_and(|v| v.split(':').any(|l| l == LAYER_NAME));
    let enabled_now = !manifests.is_empty()
        && (by_name
            || (implicit.is_some()
                && env("VK_ECHO_ENABLE").as_deref() == Some("1")
                && !disabled_now));
    if manifests.is_empty() {
        problems.push(
            "VK_LAYER_echo is not installed where the loader looks: run `vkecho install` \
             (implicit, enabled with VK_ECHO_ENABLE=1) or `vkecho install --explicit`, or add the \
             directory of a manifest to VK_ADD_LAYER_PATH"
                .into(),
        );
    } else {
        for m in &manifests {
            let arch = m["library_arch"].as_str().unwrap_or(std::env::consts::ARCH);
            if m["library_found"] == true && arch != std::env::consts::ARCH {
                problems.push(format!(
                    "{} names {}, an {arch} library: this {} loader cannot load it (install the \
                     package or tarball of this machine's architecture)",
                    m["path"].as_str().unwrap(),
                    m["library"].as_str().unwrap(),
                    std::env::consts::ARCH
                ));
            }
            if m["library_found"] != true {
                problems.push(format!(
                    "{} names library_path '{}', which does not exist (resolved: {}); reinstall \
                     with `vkecho install` after building, or pass --lib",
                    m["path"].as_str().unwrap(),
                    m["library_path"].as_str().unwrap(),
                    m["library"].as_str().unwrap()
                ));
            }
        }
        if manifests.len() > 1 {
            warnings.push(format!(
                "{} VK_LAYER_echo manifests found; the loader uses the first one it finds ({})",
                manifests.len(),
                manifests[0]["path"].as_str().unwrap()
            ));
        }
        if loader["found"] == true && !seen {
            problems.push(
                "an echo manifest exists but the loader does not list VK_LAYER_echo (is the \
                 manifest valid? VK_LOADER_DEBUG=error,warn,layer says why)"
                    .into(),
            );
        }
        if implicit.is_some() && !enabled_now {
            notes.push(
                "the implicit layer is installed but not enabled in this environment: set \
                 VK_ECHO_ENABLE=1 for the programs it should act on"
                    .into(),
            );
        }
        if disabled_now {
            notes.push(
                "VK_ECHO_DISABLE is set: the implicit layer is switched off, and an explicitly \
                 enabled echo runs in mode off (passthrough)"
                    .into(),
            );
        }
    }
    let probe = if !manifests.is_empty() && loader["found"] == true && seen {
        let p = run_probe(
            implicit.is_some(),
            env("VK_INSTANCE_LAYERS"),
            env("VK_LOADER_LAYERS_ENABLE"),
        );
        if p["loaded"] != true {
            problems.push(format!(
                "the loader could not load VK_LAYER_echo in a test process: {}",
                p["error"].as_str().unwrap_or("the library was not mapped")
            ));
        }
        p
    } else {
        Value::Null
    };
    if loaded_in_doctor {
        warnings.push("echo was loaded into doctor's own process (it should not be)".into());
    }

    json!({
        "vkecho_version": env!("CARGO_PKG_VERSION"),
        "loader": loader,
        "drivers": drivers,
        "layers_seen_by_loader": layers_seen,
        "devices": devices,
        "follows": follows_report(),
        "echo": {
            "manifests": manifests,
            "seen_by_loader": seen,
            "installed": !manifests.is_empty(),
            "enabled_in_this_environment": enabled_now,
            "disabled_by_environment": disabled_now,
            "how_to_enable": how,
            "load_probe": probe,
            "loaded_in_doctor": loaded_in_doctor,
        },
        "settings": {
            "file": settings_file.map(|p| p.display().to_string()),
            "values": values,
            "sources": sources,
            "warnings": setting_warnings,
            "note": "an application's VkLayerSettingsCreateInfoEXT comes last and is not known here",
        },
        "environment": environment,
        "problems": problems,
        "warnings": warnings,
        "notes": notes,
    })
}

/// `vk_layer_settings.txt` as the layer finds it (layer/src/settings.rs): `VK_LAYER_SETTINGS_PATH`
/// (a file or a directory holding one), `$XDG_DATA_HOME/vulkan/settings.d/` (default
/// `~/.local/share`), then the current directory.
pub fn settings_file(env: paths::Env) -> Option<PathBuf> {
    let mut c = Vec::new();
    if let Some(p) = env("VK_LAYER_SETTINGS_PATH").filter(|s| !s.is_empty()) {
        let p = PathBuf::from(p);
        c.push(if p.is_dir() {
            p.join("vk_layer_settings.txt")
        } else {
            p
        });
    }
    if let Some(d) = paths::data_home(env) {
        c.push(d.join("vulkan/settings.d/vk_layer_settings.txt"));
    }
    c.push(PathBuf::from("vk_layer_settings.txt"));
    c.into_iter().find(|p| p.is_file())
}

fn version_string(v: u32) -> String {
    format!(
        "{}.{}.{}",
        vk::api_version_major(v),
        vk::api_version_minor(v),
        vk::api_version_patch(v)
    )
}

/// `driverVersion` is vendor-encoded: NVIDIA uses 10.8.8.6 bits; most others (Mesa among them)
/// use the `VK_MAKE_API_VERSION` layout.
fn driver_version_string(vendor: u32, v: u32) -> String {
    if vendor == 0x10de {
        format!(
            "{}.{}.{}.{}",
            v >> 22,
            (v >> 14) & 0xff,
            (v >> 6) & 0xff,
            v & 0x3f
        )
    } else {
        version_string(v)
    }
}

fn device_type_name(t: DeviceType) -> &'static str {
    match t {
        DeviceType::Other => "OTHER",
        DeviceType::IntegratedGpu => "INTEGRATED_GPU",
        DeviceType::DiscreteGpu => "DISCRETE_GPU",
        DeviceType::VirtualGpu => "VIRTUAL_GPU",
        DeviceType::Cpu => "CPU",
    }
}

/// Every physical device, and whether echo's library was mapped while the instance lived.
/// Which Vulkan versions and extensions echo follows (the registry's table, issue 32/33): per
/// core version, the commands that can reach memory that echo follows, that are inert and that it
/// steps aside from; the extensions it follows and those it steps aside from.
fn follows_report() -> Value {
    let c = echo_analyzer::registry::coverage();
    json!({
        "registry": echo_analyzer::registry::VK_XML_VERSION,
        "core": c.core.iter().map(|v| json!({
            "version": v.version,
            "followed": v.followed,
            "inert": v.inert,
            "aside": v.aside,
        })).collect::<Vec<_>>(),
        "extensions_followed": c.extensions_followed,
        "extensions_aside": c.extensions_aside.len(),
    })
}

/// A device's side of [`follows_report`]: of the extensions it offers, those echo follows and
/// those it steps aside from (when the application enables them), and which of them would make
/// echo keep every allocation (`apply::memory_commands_followed` with every offered extension
/// enabled, sparseBinding not).
fn device_follows(d: &mut Value, exts: &[String], api_version: u32) {
    let c = echo_analyzer::registry::coverage();
    let has = |e: &&str| exts.iter().any(|x| x == e);
    let followed: Vec<&str> = c.extensions_followed.iter().copied().filter(has).collect();
    let aside: Vec<&str> = c.extensions_aside.iter().copied().filter(has).collect();
    d["extensions_followed"] = json!(followed);
    d["extensions_aside"] = json!(aside);
    // sparseBinding is a feature the application enables or not; here: not.
    d["allocations_kept_with"] = match echo_analyzer::apply::memory_commands_followed(
        exts.iter().map(String::as_str),
        false,
        api_version,
    ) {
        Ok(()) => Value::Null,
        Err(why) => Value::String(why),
    };
}

pub(crate) fn list_devices(
    entry: &ash::Entry,
    loader_version: u32,
) -> Result<(Vec<Value>, bool), String> {
    let api = if loader_version >= vk::API_VERSION_1_1 {
        vk::API_VERSION_1_1
    } else {
        vk::API_VERSION_1_0
    };
    let app = vk::ApplicationInfo::default()
        .application_name(c"vkecho doctor")
        .api_version(api);
    let info = vk::InstanceCreateInfo::default().application_info(&app);
    // SAFETY: valid create info; the instance is destroyed before returning.
    let instance = unsafe { entry.create_instance(&info, None) }.map_err(|e| {
        format!("vkCreateInstance failed: {e} (VK_LOADER_DEBUG=error,warn says why)")
    })?;
    let mut out = Vec::new();
    // SAFETY: `instance` is valid for this block.
    unsafe {
        let pds = instance.enumerate_physical_devices().unwrap_or_default();
        for (i, &pd) in pds.iter().enumerate() {
            let props = instance.get_physical_device_properties(pd);
            let mem = instance.get_physical_device_memory_properties(pd);
            let table = MemoryTable::from_raw(
                props.device_type.as_raw(),
                mem.memory_heaps_as_slice()
                    .iter()
                    .map(|h| (h.size, h.flags.as_raw())),
                mem.memory_types_as_slice()
                    .iter()
                    .map(|t| (t.heap_index, t.property_flags.as_raw())),
            );
            let topo = classify(&table);
            let name = props
                .device_name_as_c_str()
                .map(|c| c.to_string_lossy().into_owned())
                .unwrap_or_default();
            let mut d = json!({
                "index": i,
                "name": name,
                "type": device_type_name(table.device_type),
                "api_version": version_string(props.api_version),
                "driver_version": driver_version_string(props.vendor_id, props.driver_version),
                "vendor_id": format!("0x{:04x}", props.vendor_id),
                "device_id": format!("0x{:04x}", props.device_id),
                "heaps": table.heaps.iter().enumerate().map(|(i, h)| json!({
                    "index": i, "size": h.size,
                    "flags": if h.flags & 1 != 0 { vec!["DEVICE_LOCAL"] } else { vec![] },
                })).collect::<Vec<_>>(),
                "types": table.types.iter().enumerate().map(|(i, t)| json!({
                    "index": i, "heap": t.heap, "flags": flag_names(t.flags),
                })).collect::<Vec<_>>(),
                "class": topo.class.as_str(),
                "alias_type": topo.alias_type,
                "cached_host_visible": topo.cached_host_visible,
            });
            let exts: Vec<String> = instance
                .enumerate_device_extension_properties(pd)
                .unwrap_or_default()
                .iter()
                .filter_map(|e| e.extension_name_as_c_str().ok())
                .map(|c| c.to_string_lossy().into_owned())
                .collect();
            device_follows(&mut d, &exts, props.api_version);
            if api >= vk::API_VERSION_1_1 && props.api_version >= vk::API_VERSION_1_2 {
                let mut drv = vk::PhysicalDeviceDriverProperties::default();
                let mut idp = vk::PhysicalDeviceIDProperties::default();
                let mut p2 = vk::PhysicalDeviceProperties2::default()
                    .push_next(&mut drv)
                    .push_next(&mut idp);
                instance.get_physical_device_properties2(pd, &mut p2);
                d["driver_name"] = drv
                    .driver_name_as_c_str()
                    .map(|c| c.to_string_lossy().into_owned())
                    .unwrap_or_default()
                    .into();
                d["driver_info"] = drv
                    .driver_info_as_c_str()
                    .map(|c| c.to_string_lossy().into_owned())
                    .unwrap_or_default()
                    .into();
                d["device_uuid"] = idp
                    .device_uuid
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>()
                    .into();
            }
            out.push(d);
        }
        let echo_mapped = mapped_path(paths::LIBRARY_FILE).is_some();
        instance.destroy_instance(None);
        Ok((out, echo_mapped))
    }
}

/// The path of a mapped library whose file name starts with `prefix`, from /proc/self/maps.
fn mapped_path(prefix: &str) -> Option<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| {
            Path::new(p)
                .file_name()
                .and_then(|f| f.to_str())
                .is_some_and(|f| f.starts_with(prefix))
        })
        .map(str::to_string)
}

/// The child side of the load check: create an instance with the environment the parent set
/// (echo enabled, mode off), and say whether echo's library got mapped.
fn probe_load() -> i32 {
    let out = match unsafe { ash::Entry::load() } {
        Err(e) => json!({"loaded": false, "error": format!("no loader: {e}")}),
        Ok(entry) => {
            let app = vk::ApplicationInfo::default()
                .application_name(c"vkecho doctor probe")
                .api_version(vk::API_VERSION_1_0);
            let info = vk::InstanceCreateInfo::default().application_info(&app);
            match unsafe { entry.create_instance(&info, None) } {
                Err(e) => json!({
                    "loaded": mapped_path(paths::LIBRARY_FILE).is_some(),
                    "error": format!("vkCreateInstance with echo enabled failed: {e}"),
                }),
                Ok(instance) => {
                    let lib = mapped_path(paths::LIBRARY_FILE);
                    let n = unsafe { instance.enumerate_physical_devices() }
                        .map(|v| v.len())
                        .unwrap_or(0);
                    unsafe { instance.destroy_instance(None) };
                    json!({
                        "loaded": lib.is_some(),
                        "library": lib,
                        "physical_devices": n,
                        "error": if lib.is_some() { Value::Null } else {
                            "vkCreateInstance succeeded but the echo library was not mapped \
                             (the loader skipped it)".into()
                        },
                    })
                }
            }
        }
    };
    println!("{out}");
    0
}

/// Run `vkecho doctor --probe-load` with echo enabled (mode off) and collect its verdict, the
/// loader's error/warning messages, and the loader's own account of the instance's layer order
/// (`VK_LOADER_DEBUG=layer`: "vkCreateInstance layer callstack setup to:"), with the layers the
/// user's environment enables (`user_layers`: `VK_INSTANCE_LAYERS`, `loader_enable`:
/// `VK_LOADER_LAYERS_ENABLE`) — e.g. a capture tool or the validation layer around echo.
fn run_probe(implicit: bool, user_layers: Option<String>, loader_enable: Option<String>) -> Value {
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return json!({"loaded": false, "error": format!("cannot find vkecho: {e}")}),
    };
    let mut cmd = std::process::Command::new(exe);
    cmd.args(["doctor", "--probe-load"])
        .env_remove("VK_ECHO_DISABLE")
        .env("VK_ECHO_MODE", "off")
        .env("VK_LOADER_DEBUG", "error,warn,layer")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    if let Some(v) = loader_enable.filter(|v| !v.is_empty()) {
        cmd.env("VK_LOADER_LAYERS_ENABLE", v);
    }
    let user_layers = user_layers.filter(|v| !v.is_empty());
    if implicit {
        cmd.env("VK_ECHO_ENABLE", "1");
        if let Some(v) = user_layers {
            cmd.env("VK_INSTANCE_LAYERS", v);
        }
    } else {
        let layers = match user_layers {
            Some(v) => format!("{LAYER_NAME}:{v}"),
            None => LAYER_NAME.to_string(),
        };
        cmd.env("VK_INSTANCE_LAYERS", layers);
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return json!({"loaded": false, "error": format!("cannot run the probe: {e}")}),
    };
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if start.elapsed() > Duration::from_secs(30) => {
                let _ = child.kill();
                let _ = child.wait();
                return json!({"loaded": false, "error": "the probe process hung for 30 s"});
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return json!({"loaded": false, "error": e.to_string()}),
        }
    }
    let out = match child.wait_with_output() {
        Ok(o) => o,
        Err(e) => return json!({"loaded": false, "error": e.to_string()}),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let order = layer_order(&stderr);
    // The loader's errors and warnings; its `layer` debug lines only give the order.
    let messages: Vec<String> = stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter(|l| l.contains("ERROR") || l.contains("WARNING"))
        .take(20)
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    let mut v = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<Value>(l).ok())
        .unwrap_or_else(|| {
            json!({"loaded": false, "error": format!("the probe process ended with {} and no verdict", out.status)})
        });
    // Mapped is not enough: the loader dlopens an implicit layer, and when it cannot use it
    // (e.g. no vkGetInstanceProcAddr) it says so and goes on without it.
    if let Some(err) = messages.iter().find(|l| {
        l.contains("ERROR") && (l.contains(paths::LIBRARY_FILE) || l.contains(LAYER_NAME))
    }) {
        v["loaded"] = false.into();
        v["error"] = format!("the loader rejected the layer: {err}").into();
    }
    v["enabled_with"] = if implicit {
        "VK_ECHO_ENABLE=1"
    } else {
        "VK_INSTANCE_LAYERS=VK_LAYER_echo"
    }
    .into();
    v["messages"] = messages.into();
    v["layer_order"] = order.into();
    v
}

/// The instance's layers from the application down to the driver, as the loader printed them
/// (`VK_LOADER_DEBUG=layer`, loader 1.3.239: "vkCreateInstance layer callstack setup to:", then
/// `<Application>`, `<Loader>`, one line per layer name, `<Drivers>`).
pub fn layer_order(loader_debug: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in loader_debug.lines() {
        if line.contains("vkCreateInstance layer callstack setup to:") {
            inside = true;
            out.clear();
            continue;
        }
        if !inside {
            continue;
        }
        let text = line
            .trim_start_matches(|c: char| c != ':')
            .trim_start_matches(':')
            .trim();
        if text == "<Drivers>" {
            break;
        }
        if text.starts_with("VK_LAYER_") && !text.contains(' ') {
            out.push(text.to_string());
        }
    }
    out
}

// --- text rendering -------------------------------------------------------------------------------

fn s(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

fn human_size(n: u64) -> String {
    const G: u64 = 1 << 30;
    const M: u64 = 1 << 20;
    if n >= G {
        format!("{:.1} GiB", n as f64 / G as f64)
    } else {
        format!("{:.0} MiB", n as f64 / M as f64)
    }
}

fn render(r: &Value) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let _ = writeln!(o, "vkecho doctor {}", s(&r["vkecho_version"]));
    let _ = writeln!(o, "\nLoader");
    if r["loader"]["found"] == true {
        let _ = writeln!(
            o,
            "  Vulkan loader {} ({})",
            s(&r["loader"]["version"]),
            s(&r["loader"]["library"])
        );
    } else {
        let _ = writeln!(o, "  not found: {}", s(&r["loader"]["error"]));
    }
    let _ = writeln!(o, "\nDrivers (ICD manifests)");
    for d in r["drivers"].as_array().into_iter().flatten() {
        let arch = d["library_arch"].as_str().unwrap_or(std::env::consts::ARCH);
        let ok = if d["library_found"] != true {
            "library missing".to_string()
        } else if arch != std::env::consts::ARCH {
            format!(
                "{arch} library: this {} loader skips it",
                std::env::consts::ARCH
            )
        } else {
            "ok".to_string()
        };
        let _ = writeln!(
            o,
            "  {}  [{}]  {} ({ok})",
            s(&d["manifest"]),
            s(&d["origin"]),
            s(&d["library"])
        );
    }
    if r["drivers"].as_array().is_some_and(|d| d.is_empty()) {
        let _ = writeln!(o, "  none found");
    }
    let _ = writeln!(o, "\nPhysical devices");
    for d in r["devices"].as_array().into_iter().flatten() {
        let _ = writeln!(
            o,
            "  [{}] {} ({}), Vulkan {}, driver {} {}",
            s(&d["index"]),
            s(&d["name"]),
            s(&d["type"]),
            s(&d["api_version"]),
            d["driver_name"].as_str().unwrap_or(""),
            d["driver_info"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| s(&d["driver_version"])),
        );
        for h in d["heaps"].as_array().into_iter().flatten() {
            let flags: Vec<String> = h["flags"].as_array().into_iter().flatten().map(s).collect();
            let _ = writeln!(
                o,
                "      heap {}: {} {}",
                s(&h["index"]),
                human_size(h["size"].as_u64().unwrap_or(0)),
                flags.join("|")
            );
        }
        for t in d["types"].as_array().into_iter().flatten() {
            let flags: Vec<String> = t["flags"].as_array().into_iter().flatten().map(s).collect();
            let f = if flags.is_empty() {
                "0".to_string()
            } else {
                flags.join("|")
            };
            let _ = writeln!(
                o,
                "      type {}: heap {} {}",
                s(&t["index"]),
                s(&t["heap"]),
                f
            );
        }
        let _ = writeln!(
            o,
            "      class {}; alias type {}; cached host-visible: {}; echo {}",
            s(&d["class"]),
            s(&d["alias_type"]),
            if d["cached_host_visible"] == true {
                "yes"
            } else {
                "no (CPU reads of aliased memory may be slow; calibrate)"
            },
            if d["echo_active"] == true {
                "acts here"
            } else {
                "stays inactive here"
            }
        );
    }
    if r["devices"].as_array().is_some_and(|d| d.is_empty()) {
        let _ = writeln!(o, "  none");
    }
    let f = &r["follows"];
    let _ = writeln!(
        o,
        "\nWhat echo follows (Vulkan registry {}: device commands that can reach memory)",
        s(&f["registry"])
    );
    for v in f["core"].as_array().into_iter().flatten() {
        let aside: Vec<String> = v["aside"].as_array().into_iter().flatten().map(s).collect();
        let _ = writeln!(
            o,
            "  Vulkan {} core: {} followed, {} inert{}",
            s(&v["version"]),
            s(&v["followed"]),
            s(&v["inert"]),
            if aside.is_empty() {
                String::new()
            } else {
                format!("; steps aside from {}", aside.join(", "))
            }
        );
    }
    let followed: Vec<String> = f["extensions_followed"]
        .as_array()
        .into_iter()
        .flatten()
        .map(s)
        .collect();
    let _ = writeln!(o, "  extensions followed: {}", followed.join(", "));
    let _ = writeln!(
        o,
        "  {} other extensions are stepped aside from: what their commands name leaves every group",
        s(&f["extensions_aside"])
    );
    for d in r["devices"].as_array().into_iter().flatten() {
        let list = |k: &str| -> String {
            let v: Vec<String> = d[k].as_array().into_iter().flatten().map(s).collect();
            if v.is_empty() {
                "none".into()
            } else {
                v.join(", ")
            }
        };
        let _ = writeln!(
            o,
            "  device [{}], Vulkan {}:",
            s(&d["index"]),
            s(&d["api_version"])
        );
        let _ = writeln!(
            o,
            "    its extensions echo follows: {}",
            list("extensions_followed")
        );
        let _ = writeln!(
            o,
            "    its extensions echo steps aside from (if enabled): {}",
            list("extensions_aside")
        );
        let _ = writeln!(
            o,
            "    staging allocations may be left unmade: {}",
            match d["allocations_kept_with"].as_str() {
                None => "yes, unless the application enables sparseBinding (vkQueueBindSparse \
                         is not followed)"
                    .to_string(),
                Some(why) => format!(
                    "yes, unless the application enables sparseBinding or an extension of \
                     these ({why})"
                ),
            }
        );
    }
    let e = &r["echo"];
    let _ = writeln!(o, "\nVK_LAYER_echo");
    for m in e["manifests"].as_array().into_iter().flatten() {
        let _ = writeln!(
            o,
            "  {} manifest: {}  [{}]",
            s(&m["kind"]),
            s(&m["path"]),
            s(&m["origin"])
        );
        let _ = writeln!(
            o,
            "    library: {} ({})",
            s(&m["library"]),
            if m["library_found"] == true {
                "exists"
            } else {
                "MISSING"
            }
        );
    }
    if e["installed"] != true {
        let _ = writeln!(o, "  not installed");
    }
    let _ = writeln!(
        o,
        "  listed by the loader: {}",
        if e["seen_by_loader"] == true {
            "yes"
        } else {
            "no"
        }
    );
    for h in e["how_to_enable"].as_array().into_iter().flatten() {
        let _ = writeln!(o, "  enable {}", s(h));
    }
    let _ = writeln!(
        o,
        "  enabled in this environment: {}",
        if e["enabled_in_this_environment"] == true {
            "yes"
        } else {
            "no"
        }
    );
    let p = &e["load_probe"];
    if !p.is_null() {
        let _ = writeln!(
            o,
            "  load test ({}, mode off): {}",
            s(&p["enabled_with"]),
            if p["loaded"] == true {
                format!("loaded from {}", s(&p["library"]))
            } else {
                format!("FAILED: {}", s(&p["error"]))
            }
        );
        let order: Vec<String> = p["layer_order"]
            .as_array()
            .into_iter()
            .flatten()
            .map(s)
            .collect();
        if !order.is_empty() {
            let _ = writeln!(
                o,
                "  layer order the loader uses there (application first, driver last): {}",
                order.join(" → ")
            );
        }
        if p["loaded"] != true {
            for m in p["messages"].as_array().into_iter().flatten() {
                let _ = writeln!(o, "    {}", s(m));
            }
        }
    }
    let st = &r["settings"];
    let _ = writeln!(
        o,
        "\nSettings (environment VK_ECHO_*, then {}, then the application)",
        st["file"]
            .as_str()
            .map(|f| f.to_string())
            .unwrap_or_else(|| "vk_layer_settings.txt (none found)".into())
    );
    for i in SETTINGS {
        let _ = writeln!(
            o,
            "  {:<16} {:<32} ({})",
            i.name,
            st["values"][i.name].as_str().unwrap_or(""),
            s(&st["sources"][i.name])
        );
    }
    for (title, key) in [
        ("Problems", "problems"),
        ("Warnings", "warnings"),
        ("Notes", "notes"),
    ] {
        let list = r[key].as_array().cloned().unwrap_or_default();
        if !list.is_empty() {
            let _ = writeln!(o, "\n{title}");
            for x in list {
                let _ = writeln!(o, "  - {}", s(&x));
            }
        }
    }
    if r["problems"].as_array().is_some_and(|p| p.is_empty()) {
        let _ = writeln!(o, "\nNo problems found.");
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_versions_decode_per_vendor() {
        assert_eq!(
            driver_version_string(0x10005, vk::make_api_version(0, 22, 3, 6)),
            "22.3.6"
        );
        let nv = (535 << 22) | (104 << 14) | (5 << 6);
        assert_eq!(driver_version_string(0x10de, nv), "535.104.5.0");
    }
}
