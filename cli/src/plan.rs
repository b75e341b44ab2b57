//! `vkecho plan export|import`: plans that travel between boards of one model (issue 27).
//!
//! A plan's context names the device by its *model* — device name, vendor and device id, driver
//! version, memory table, pipeline cache UUID (`echo_analyzer::context::plan_applies_in`) — not
//! by the board's UUID, and auto mode's cache entry is keyed the same way. So a plan made on one
//! board applies on every other board of the same model, driver and table: `export` writes a
//! cache entry's plan, byte for byte, to a file; `import` checks it against this machine's
//! devices (the same rule enforce applies, with the same reasons) and puts it where auto mode on
//! this machine finds it.

use echo_analyzer::cache;
use echo_analyzer::context::{cache_paths_for, keyed_by_model, memory_table_text, plan_applies_in};
use echo_analyzer::plan::{parse_plan, Plan};
use echo_analyzer::settings::ContextMode;
use echo_analyzer::trace::Context;
use std::path::{Path, PathBuf};

pub const AFTER_HELP: &str = "A plan travels between devices of one model, driver and memory \
table (a fleet of identical boards, a replaced board); any other device refuses it, and says which \
of those differs. --any-device skips the check (preparing an image on another machine): enforce \
still checks.";

/// `vkecho plan export|import`.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Write the plan of cache entry NAME (`vkecho cache list`) to FILE (default: stdout), as it
    /// is in the cache
    Export {
        /// The cache entry (its name as `vkecho cache list` prints it, or a unique prefix)
        name: String,
        /// Where to write the plan (default: stdout)
        #[arg(short = 'o', long = "out", value_name = "FILE")]
        out: Option<PathBuf>,
        /// The cache directory (default: `cache_dir` as the layer resolves it here)
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Check the plan against this machine's devices (the rule enforce applies: same device
    /// model, driver version and memory table) and put it into the cache, where auto mode finds it
    Import {
        /// The plan file
        file: PathBuf,
        /// The cache directory (default: `cache_dir` as the layer resolves it here)
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// Skip the check against this machine's devices (enforce still checks)
        #[arg(long)]
        any_device: bool,
    },
}

/// Plans larger than this are not read (as enforce).
const MAX_PLAN_BYTES: u64 = 64 << 20;

pub fn main(cmd: &Command) -> i32 {
    let dir_or_default = |dir: &Option<PathBuf>| {
        dir.clone()
            .unwrap_or_else(|| crate::cache::settings_here().cache_dir)
    };
    let r = match cmd {
        Command::Export { name, out, dir } => export(&dir_or_default(dir), name, out.as_deref()),
        Command::Import {
            file,
            dir,
            any_device,
        } => import(&dir_or_default(dir), file, *any_device),
    };
    r.unwrap_or_else(|e| {
        eprintln!("vkecho plan: {e}");
        2
    })
}

/// The `context` setting a plan was made under: `program` plans carry their evidence.
fn mode_of(plan: &Plan) -> ContextMode {
    if plan.evidence.is_some() {
        ContextMode::Program
    } else {
        ContextMode::Arguments
    }
}

/// "NVIDIA Tegra X1 (nvgpu), 0x10de:0x92ba03d7, driver 0x7cc00000".
fn model_words(c: &Context) -> String {
    format!(
        "{}, vendor:device 0x{:04x}:0x{:04x}, driver version {}",
        c.device_name, c.vendor_id, c.device_id, c.driver_version
    )
}

fn export(dir: &Path, name: &str, out: Option<&Path>) -> Result<i32, String> {
    let e = crate::cache::find(dir, name)?;
    let path = e
        .plan
        .as_ref()
        .ok_or_else(|| format!("entry {} has no plan yet", e.name))?;
    let text = std::fs::read_to_string(path).map_err(|err| format!("{}: {err}", path.display()))?;
    let plan = parse_plan(&text).map_err(|err| format!("{}: {err}", path.display()))?;
    match out {
        Some(o) => crate::files::write_private(o, &text)?,
        None => print!("{text}"),
    }
    let c = &plan.context;
    if keyed_by_model(c) {
        eprintln!(
            "vkecho plan: exported the plan of {} for {}; it applies on every device of that model, driver and memory table (`vkecho plan import` there)",
            c.exe_path,
            model_words(c)
        );
    } else {
        eprintln!(
            "vkecho plan: exported the plan of {}; it was made before plans named the device model, so it applies only on the device with UUID {} — profile again with this version for a plan that travels",
            c.exe_path, c.device_uuid
        );
    }
    Ok(0)
}

/// Read and check a plan file as enforce would (a regular file, at most [`MAX_PLAN_BYTES`], a
/// plan `parse_plan` accepts): the text and the plan, or why not.
pub fn read_plan_file(file: &Path) -> Result<(String, Plan), String> {
    let meta = std::fs::metadata(file).map_err(|e| format!("{}: {e}", file.display()))?;
    if !meta.is_file() || meta.len() > MAX_PLAN_BYTES {
        return Err(format!("{} is not a plan file", file.display()));
    }
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let plan = parse_plan(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    Ok((text, plan))
}

fn import(dir: &Path, file: &Path, any: bool) -> Result<i32, String> {
    let (text, plan) = read_plan_file(file)?;
    let mode = mode_of(&plan);
    let c = &plan.context;
    if !any {
        let devices = local_devices()?;
        let mut reasons = Vec::new();
        let mut fits = None;
        for (i, d) in devices.iter().enumerate() {
            // Only the device is compared here: the program is checked when it runs.
            let now = Context {
                exe_path: c.exe_path.clone(),
                exe_id: c.exe_id.clone(),
                args_hash: c.args_hash.clone(),
                ..d.clone()
            };
            match plan_applies_in(c, &now, mode) {
                Ok(()) => {
                    fits = Some(i);
                    break;
                }
                Err(why) => reasons.push(format!("  device {i} ({}): {why}", d.device_name)),
            }
        }
        let Some(i) = fits else {
            eprintln!(
                "vkecho plan: {} was not imported: no device of this machine can use it (made for {}):",
                file.display(),
                model_words(c)
            );
            if devices.is_empty() {
                eprintln!("  no Vulkan device found");
            }
            for r in reasons {
                eprintln!("{r}");
            }
            return Ok(1);
        };
        eprintln!(
            "vkecho plan: device {i} ({}) is of the plan's model, driver and memory table",
            devices[i].device_name
        );
    }
    let (_, dest) = cache_paths_for(dir, c, mode);
    cache::ensure_tag(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let entry = dest.parent().ok_or("no entry directory")?;
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(entry)
            .map_err(|e| format!("cannot create {}: {e}", entry.display()))?;
    }
    let replaced = dest.exists();
    crate::files::write_private(&dest, &text)?;
    // A marker of a guarded run that could not keep the old plan's semantics (the layer's
    // `guard::untrusted_marker`) is about the plan it replaces.
    let mut marker = dest.as_os_str().to_owned();
    marker.push(".untrusted");
    let _ = std::fs::remove_file(PathBuf::from(marker));
    println!(
        "vkecho plan: {} {} for {} ({} group{}); auto mode enforces it for that program",
        if replaced { "replaced" } else { "imported" },
        dest.display(),
        c.exe_path,
        plan.groups.len(),
        if plan.groups.len() == 1 { "" } else { "s" }
    );
    Ok(0)
}

/// The device part of the context of every Vulkan device of this machine, as the layer gathers
/// it (`layer/src/context.rs`), seen through the layers the environment enables but echo.
fn local_devices() -> Result<Vec<Context>, String> {
    use ash::vk;
    // Keep an implicit echo out of this process: it would only pass through (or profile).
    // Single-threaded here, before the loader is loaded.
    std::env::set_var("VK_ECHO_DISABLE", "1");
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        std::env::set_var("XDG_RUNTIME_DIR", std::env::temp_dir());
    }
    // SAFETY: loading the system's Vulkan loader.
    let entry = unsafe { ash::Entry::load() }.map_err(|e| {
        format!("cannot load the Vulkan loader ({e}); use --any-device to skip the device check")
    })?;
    // SAFETY: plain global query.
    let loader = unsafe { entry.try_enumerate_instance_version() }
        .ok()
        .flatten()
        .unwrap_or(vk::API_VERSION_1_0);
    let api = loader.min(vk::API_VERSION_1_1);
    let app = vk::ApplicationInfo::default()
        .application_name(c"vkecho plan")
        .api_version(api);
    let info = vk::InstanceCreateInfo::default().application_info(&app);
    // SAFETY: valid create info; destroyed below.
    let instance = unsafe { entry.create_instance(&info, None) }
        .map_err(|e| format!("vkCreateInstance failed: {e}"))?;
    let mut out = Vec::new();
    // SAFETY: `instance` is valid for this block.
    unsafe {
        for pd in instance.enumerate_physical_devices().unwrap_or_default() {
            let props = instance.get_physical_device_properties(pd);
            let mem = instance.get_physical_device_memory_properties(pd);
            let mut device_uuid = String::new();
            if api >= vk::API_VERSION_1_1 && props.api_version >= vk::API_VERSION_1_1 {
                let mut idp = vk::PhysicalDeviceIDProperties::default();
                let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut idp);
                instance.get_physical_device_properties2(pd, &mut p2);
                device_uuid = idp.device_uuid.iter().map(|b| format!("{b:02x}")).collect();
            }
            out.push(Context {
                device_name: props
                    .device_name_as_c_str()
                    .map(|c| c.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                device_uuid,
                driver_version: props.driver_version,
                vendor_id: props.vendor_id,
                device_id: props.device_id,
                memory_table: memory_table_text(
                    mem.memory_heaps_as_slice()
                        .iter()
                        .map(|h| (h.size, h.flags.as_raw())),
                    mem.memory_types_as_slice()
                        .iter()
                        .map(|t| (t.heap_index, t.property_flags.as_raw())),
                ),
                pipeline_cache_uuid: props
                    .pipeline_cache_uuid
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect(),
                ..Default::default()
            });
        }
        instance.destroy_instance(None);
    }
    Ok(out)
}
