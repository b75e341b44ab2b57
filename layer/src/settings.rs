//! Gathers the three sources of settings (DESIGN §3) and resolves them with
//! `echo_analyzer::settings::resolve`: environment `VK_ECHO_<NAME>` (ignored in secure-execution
//! processes), `echo.<name>` in `vk_layer_settings.txt`, then the application's
//! `VkLayerSettingsCreateInfoEXT` for `VK_LAYER_echo`.

use crate::log;
use ash::vk;
use echo_analyzer::settings::{parse_settings_file, resolve, Settings};
use std::ffi::{c_char, CStr};
use std::path::PathBuf;

pub const LAYER_NAME: &str = "VK_LAYER_echo";

/// Whether this process runs with elevated privileges (setuid, capabilities): then the
/// environment must not steer the layer.
pub fn secure_execution() -> bool {
    // SAFETY: getauxval has no preconditions.
    unsafe { libc::getauxval(libc::AT_SECURE) != 0 }
}

/// Environment lookup used for settings: `VK_ECHO_*` and `VK_LAYER_SETTINGS_PATH` read as unset
/// in secure-execution processes.
pub fn env_lookup(secure: bool) -> impl Fn(&str) -> Option<String> {
    move |k: &str| {
        if secure && (k.starts_with("VK_ECHO_") || k == "VK_LAYER_SETTINGS_PATH") {
            return None;
        }
        std::env::var(k).ok()
    }
}

/// The `vk_layer_settings.txt` that applies, if any: `VK_LAYER_SETTINGS_PATH` (a file, or a
/// directory holding one), then `$XDG_DATA_HOME/vulkan/settings.d/` (default `~/.local/share`),
/// then the current directory. The first existing file wins.
pub fn settings_file(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let mut candidates = Vec::new();
    if let Some(p) = env("VK_LAYER_SETTINGS_PATH").filter(|s| !s.is_empty()) {
        let p = PathBuf::from(p);
        if p.is_dir() {
            candidates.push(p.join("vk_layer_settings.txt"));
        } else {
            candidates.push(p);
        }
    }
    let data_home = env("XDG_DATA_HOME")
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            env("HOME")
                .filter(|s| !s.is_empty())
                .map(|h| PathBuf::from(h).join(".local/share"))
        });
    if let Some(d) = data_home {
        candidates.push(d.join("vulkan/settings.d/vk_layer_settings.txt"));
    }
    candidates.push(PathBuf::from("vk_layer_settings.txt"));
    candidates.into_iter().find(|p| p.is_file())
}

/// `VkLayerSettingsCreateInfoEXT` entries for this layer in an instance create info's pNext
/// chain, as `(name, text)`. Several values of one setting are joined with commas.
///
/// # Safety
/// `create_info` must be null or a valid `VkInstanceCreateInfo` with a valid pNext chain.
pub unsafe fn app_settings(
    create_info: *const vk::InstanceCreateInfo<'_>,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if create_info.is_null() {
        return out;
    }
    let mut p = (*create_info).p_next as *const vk::BaseInStructure<'_>;
    while !p.is_null() {
        if (*p).s_type == vk::StructureType::LAYER_SETTINGS_CREATE_INFO_EXT {
            let info = &*(p as *const vk::LayerSettingsCreateInfoEXT<'_>);
            for i in 0..info.setting_count as usize {
                let s = &*info.p_settings.add(i);
                if s.p_layer_name.is_null()
                    || s.p_setting_name.is_null()
                    || CStr::from_ptr(s.p_layer_name).to_bytes() != LAYER_NAME.as_bytes()
                {
                    continue;
                }
                let name = CStr::from_ptr(s.p_setting_name)
                    .to_string_lossy()
                    .into_owned();
                match setting_text(s) {
                    Some(v) => out.push((name, v)),
                    None => log::warn!(
                        "VkLayerSettingsCreateInfoEXT: setting '{name}' has an unsupported type {:?}, ignored",
                        s.ty
                    ),
                }
            }
        }
        p = (*p).p_next;
    }
    out
}

unsafe fn setting_text(s: &vk::LayerSettingEXT<'_>) -> Option<String> {
    use vk::LayerSettingTypeEXT as T;
    let n = s.value_count as usize;
    if n > 0 && s.p_values.is_null() {
        return None;
    }
    let v = s.p_values;
    let vals: Vec<String> = match s.ty {
        T::BOOL32 => (0..n)
            .map(|i| (*(v as *const u32).add(i) != 0).to_string())
            .collect(),
        T::INT32 => (0..n)
            .map(|i| (*(v as *const i32).add(i)).to_string())
            .collect(),
        T::UINT32 => (0..n)
            .map(|i| (*(v as *const u32).add(i)).to_string())
            .collect(),
        T::INT64 => (0..n)
            .map(|i| (*(v as *const i64).add(i)).to_string())
            .collect(),
        T::UINT64 => (0..n)
            .map(|i| (*(v as *const u64).add(i)).to_string())
            .collect(),
        T::FLOAT32 => (0..n)
            .map(|i| (*(v as *const f32).add(i)).to_string())
            .collect(),
        T::FLOAT64 => (0..n)
            .map(|i| (*(v as *const f64).add(i)).to_string())
            .collect(),
        T::STRING => (0..n)
            .map(|i| {
                let p = *(v as *const *const c_char).add(i);
                if p.is_null() {
                    String::new()
                } else {
                    CStr::from_ptr(p).to_string_lossy().into_owned()
                }
            })
            .collect(),
        _ => return None,
    };
    Some(vals.join(","))
}

/// Resolves the settings for one instance and prints the warnings.
///
/// # Safety
/// As [`app_settings`].
pub unsafe fn gather(create_info: *const vk::InstanceCreateInfo<'_>) -> Settings {
    let env = env_lookup(secure_execution());
    let mut warnings = Vec::new();
    let file = match settings_file(&env) {
        Some(path) => match std::fs::read_to_string(&path) {
            Ok(text) => parse_settings_file(&text, &mut warnings),
            Err(e) => {
                warnings.push(format!("cannot read {}: {e}", path.display()));
                Vec::new()
            }
        },
        None => Vec::new(),
    };
    let app = app_settings(create_info);
    let (settings, more) = resolve(&env, &file, &app);
    warnings.extend(more);
    log::set_level(settings.log);
    for w in warnings {
        log::warn!("{w}");
    }
    settings
}
