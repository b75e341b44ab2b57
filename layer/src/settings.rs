//! Gathers the three sources of settings (DESIGN §3) and resolves them with
//! `echo_analyzer::settings::resolve`: environment `VK_ECHO_<NAME>` (ignored in secure-execution
//! processes), `echo.<name>` in `vk_layer_settings.txt`, then the application's
//! `VkLayerSettingsCreateInfoEXT` for `VK_LAYER_echo`.

use crate::log;
use ash::vk;
use echo_analyzer::settings::{parse_settings_file, resolve, Mode, Settings};
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
    let (mut settings, more) = resolve(&env, &file, &app);
    warnings.extend(more);
    log::set_level(settings.log);
    for w in warnings {
        log::warn!("{w}");
    }
    if let Some(v) = disabled(env(DISABLE_ENV).as_deref()) {
        if settings.mode != Mode::Off {
            log::info!(
                "{DISABLE_ENV}={v} is set: echo is off in this process (mode off: passthrough), whatever else is set"
            );
        }
        settings.mode = Mode::Off;
    }
    settings
}

/// The implicit manifest's `disable_environment`. The loader keeps the implicit layer out when it
/// is set (to any value); an explicitly enabled echo (`VK_INSTANCE_LAYERS=VK_LAYER_echo`) is not
/// the loader's to switch off, so the layer honours it itself: mode off.
pub const DISABLE_ENV: &str = "VK_ECHO_DISABLE";

/// The value of `VK_ECHO_DISABLE` that keeps only the implicit copy out: what `vkecho run` and
/// `profile` set when they load echo explicitly. Every other value, empty included (as for the
/// loader), switches echo off.
pub const DISABLE_IMPLICIT_ONLY: &str = "implicit";

/// `Some(value)` when `VK_ECHO_DISABLE` (its value `v`, read through [`env_lookup`] like every
/// `VK_ECHO_*` variable) switches this copy of echo off.
pub fn disabled(v: Option<&str>) -> Option<String> {
    let v = v?;
    (v != DISABLE_IMPLICIT_ONLY).then(|| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::c_void;

    #[test]
    fn disable_environment_switches_off_unless_implicit_only() {
        assert_eq!(disabled(None), None);
        assert_eq!(disabled(Some("1")).as_deref(), Some("1"));
        // The loader keeps the implicit layer out for any value, empty and 0 included.
        assert_eq!(disabled(Some("")).as_deref(), Some(""));
        assert_eq!(disabled(Some("0")).as_deref(), Some("0"));
        assert_eq!(disabled(Some(DISABLE_IMPLICIT_ONLY)), None);
    }

    #[test]
    fn secure_execution_ignores_echo_environment() {
        std::env::set_var("VK_ECHO_UNIT_TEST_SECURE", "1");
        assert_eq!(
            env_lookup(false)("VK_ECHO_UNIT_TEST_SECURE").as_deref(),
            Some("1")
        );
        assert_eq!(env_lookup(true)("VK_ECHO_UNIT_TEST_SECURE"), None);
        std::env::set_var("VK_LAYER_SETTINGS_PATH", "/nonexistent");
        assert_eq!(env_lookup(true)("VK_LAYER_SETTINGS_PATH"), None);
        std::env::remove_var("VK_LAYER_SETTINGS_PATH");
        // This test process is not setuid.
        assert!(!secure_execution());
    }

    #[test]
    fn settings_file_search_order() {
        let dir = std::env::temp_dir().join(format!("echo-settings-test-{}", std::process::id()));
        let data = dir.join("data/vulkan/settings.d");
        std::fs::create_dir_all(&data).unwrap();
        std::fs::create_dir_all(dir.join("explicit")).unwrap();
        std::fs::write(data.join("vk_layer_settings.txt"), "echo.mode = off\n").unwrap();
        std::fs::write(
            dir.join("explicit/vk_layer_settings.txt"),
            "echo.mode = profile\n",
        )
        .unwrap();
        let d = dir.display().to_string();
        let env = |path: Option<String>| {
            let d = d.clone();
            move |k: &str| match k {
                "VK_LAYER_SETTINGS_PATH" => path.clone(),
                "XDG_DATA_HOME" => Some(format!("{d}/data")),
                _ => None,
            }
        };
        // VK_LAYER_SETTINGS_PATH as a directory, then as a file, wins over XDG_DATA_HOME.
        let e = env(Some(format!("{d}/explicit")));
        assert_eq!(
            settings_file(&e),
            Some(dir.join("explicit/vk_layer_settings.txt"))
        );
        let e = env(Some(format!("{d}/explicit/vk_layer_settings.txt")));
        assert_eq!(
            settings_file(&e),
            Some(dir.join("explicit/vk_layer_settings.txt"))
        );
        let e = env(None);
        assert_eq!(settings_file(&e), Some(data.join("vk_layer_settings.txt")));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn app_settings_of_every_type_become_text() {
        let t: u32 = 1;
        let n: u64 = 1 << 20;
        let s = c"profile";
        let sp = [s.as_ptr()];
        let i: i32 = -3;
        let entry =
            |layer: &'static CStr, name: &'static CStr, ty, p: *const c_void| vk::LayerSettingEXT {
                p_layer_name: layer.as_ptr(),
                p_setting_name: name.as_ptr(),
                ty,
                value_count: 1,
                p_values: p,
                ..Default::default()
            };
        let settings = [
            entry(
                c"VK_LAYER_echo",
                c"mode",
                vk::LayerSettingTypeEXT::STRING,
                sp.as_ptr() as *const c_void,
            ),
            entry(
                c"VK_LAYER_echo",
                c"min_bytes",
                vk::LayerSettingTypeEXT::UINT64,
                &n as *const u64 as *const c_void,
            ),
            entry(
                c"VK_LAYER_echo",
                c"flag",
                vk::LayerSettingTypeEXT::BOOL32,
                &t as *const u32 as *const c_void,
            ),
            entry(
                c"VK_LAYER_echo",
                c"neg",
                vk::LayerSettingTypeEXT::INT32,
                &i as *const i32 as *const c_void,
            ),
            entry(
                c"VK_LAYER_other",
                c"mode",
                vk::LayerSettingTypeEXT::STRING,
                sp.as_ptr() as *const c_void,
            ),
        ];
        let mut lsci = vk::LayerSettingsCreateInfoEXT::default().settings(&settings);
        let ci = vk::InstanceCreateInfo::default().push_next(&mut lsci);
        let got = unsafe { app_settings(&ci) };
        let want: Vec<(String, String)> = [
            ("mode", "profile"),
            ("min_bytes", "1048576"),
            ("flag", "true"),
            ("neg", "-3"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        assert_eq!(got, want);
    }
}
