//! Where the Vulkan loader (1.3.239, Linux) looks for layer and driver manifests, and where
//! `vkecho install` puts ours. Shared by `doctor` and `install`; no Vulkan calls.
//!
//! Loader facts (DESIGN §3): manifests are searched in `$XDG_CONFIG_HOME` (default
//! `~/.config`), `$XDG_CONFIG_DIRS` (default `/etc/xdg`), `/etc`, `$XDG_DATA_HOME` (default
//! `~/.local/share`), `$XDG_DATA_DIRS` (default `/usr/local/share:/usr/share`), each followed by
//! `vulkan/<kind>.d`. `XDG_DATA_DIRS` *replaces* its default. `VK_LAYER_PATH` replaces the
//! explicit-layer search and `VK_ADD_LAYER_PATH` is searched first; neither finds implicit layers.
//! `VK_DRIVER_FILES` (or the older `VK_ICD_FILENAMES`) replaces the driver search and
//! `VK_ADD_DRIVER_FILES` is searched first.

use serde_json::Value;
use std::path::{Path, PathBuf};

/// The manifest in the repository. `install` rewrites its `library_path` to an absolute path.
pub const MANIFEST: &str = include_str!("../../manifest/VkLayer_echo.json");
pub const LAYER_NAME: &str = "VK_LAYER_echo";
pub const MANIFEST_FILE: &str = "VkLayer_echo.json";
pub const LIBRARY_FILE: &str = "libVkLayer_echo.so";

/// An environment lookup; tests of the pure parts pass their own.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Implicit,
    Explicit,
    Driver,
}

impl Kind {
    pub fn dir_name(self) -> &'static str {
        match self {
            Kind::Implicit => "implicit_layer.d",
            Kind::Explicit => "explicit_layer.d",
            Kind::Driver => "icd.d",
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Implicit => "implicit",
            Kind::Explicit => "explicit",
            Kind::Driver => "driver",
        }
    }
}

fn nonempty(env: Env, name: &str) -> Option<String> {
    env(name).filter(|s| !s.is_empty())
}

/// Colon-separated list; XDG says relative entries are to be ignored.
fn split_abs(v: &str) -> Vec<PathBuf> {
    v.split(':')
        .filter(|s| s.starts_with('/'))
        .map(PathBuf::from)
        .collect()
}

/// `$XDG_DATA_HOME`, else `$HOME/.local/share`.
pub fn data_home(env: Env) -> Option<PathBuf> {
    nonempty(env, "XDG_DATA_HOME")
        .filter(|s| s.starts_with('/'))
        .map(PathBuf::from)
        .or_else(|| nonempty(env, "HOME").map(|h| PathBuf::from(h).join(".local/share")))
}

/// `$XDG_CONFIG_HOME`, else `$HOME/.config`.
pub fn config_home(env: Env) -> Option<PathBuf> {
    nonempty(env, "XDG_CONFIG_HOME")
        .filter(|s| s.starts_with('/'))
        .map(PathBuf::from)
        .or_else(|| nonempty(env, "HOME").map(|h| PathBuf::from(h).join(".config")))
}

pub fn data_dirs(env: Env) -> Vec<PathBuf> {
    split_abs(
        &nonempty(env, "XDG_DATA_DIRS").unwrap_or_else(|| "/usr/local/share:/usr/share".into()),
    )
}

pub fn config_dirs(env: Env) -> Vec<PathBuf> {
    split_abs(&nonempty(env, "XDG_CONFIG_DIRS").unwrap_or_else(|| "/etc/xdg".into()))
}

/// One place the loader looks, and why it looks there.
#[derive(Clone, Debug)]
pub struct SearchDir {
    pub path: PathBuf,
    pub origin: &'static str,
    /// An entry of `VK_*_PATH`/`VK_*_FILES` may name a file directly.
    pub may_be_file: bool,
}

fn standard_dirs(env: Env, kind: Kind) -> Vec<SearchDir> {
    let sub = format!("vulkan/{}", kind.dir_name());
    let mut out = Vec::new();
    let mut push = |p: PathBuf, origin: &'static str| {
        out.push(SearchDir {
            path: p.join(&sub),
            origin,
            may_be_file: false,
        })
    };
    if let Some(p) = config_home(env) {
        push(p, "XDG_CONFIG_HOME");
    }
    for p in config_dirs(env) {
        push(p, "XDG_CONFIG_DIRS");
    }
    push(PathBuf::from("/etc"), "SYSCONFDIR");
    if let Some(p) = data_home(env) {
        push(p, "XDG_DATA_HOME");
    }
    for p in data_dirs(env) {
        push(p, "XDG_DATA_DIRS");
    }
    out
}

fn env_list(env: Env, var: &'static str) -> Vec<SearchDir> {
    nonempty(env, var)
        .map(|v| {
            v.split(':')
                .filter(|s| !s.is_empty())
                .map(|s| SearchDir {
                    path: PathBuf::from(s),
                    origin: var,
                    may_be_file: true,
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The loader's search order for one kind of manifest, and a note when an environment variable
/// replaced the standard list.
pub fn search_dirs(env: Env, kind: Kind) -> (Vec<SearchDir>, Option<String>) {
    match kind {
        Kind::Implicit => (standard_dirs(env, kind), None),
        Kind::Explicit => {
            let mut out = env_list(env, "VK_ADD_LAYER_PATH");
            if nonempty(env, "VK_LAYER_PATH").is_some() {
                out.extend(env_list(env, "VK_LAYER_PATH"));
                (
                    out,
                    Some("VK_LAYER_PATH replaces the standard explicit-layer directories".into()),
                )
            } else {
                out.extend(standard_dirs(env, kind));
                (out, None)
            }
        }
        Kind::Driver => {
            let mut out = env_list(env, "VK_ADD_DRIVER_FILES");
            for var in ["VK_DRIVER_FILES", "VK_ICD_FILENAMES"] {
                if nonempty(env, var).is_some() {
                    out.extend(env_list(env, var));
                    return (
                        out,
                        Some(format!("{var} replaces the standard driver directories")),
                    );
                }
            }
            out.extend(standard_dirs(env, kind));
            (out, None)
        }
    }
}

/// The `.json` files in a search entry (a directory, or a file named directly), sorted.
pub fn json_files(d: &SearchDir) -> Vec<PathBuf> {
    if d.may_be_file && d.path.is_file() {
        return vec![d.path.clone()];
    }
    let mut v: Vec<PathBuf> = std::fs::read_dir(&d.path)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// How a manifest's `library_path` resolves: absolute as is; with a slash, relative to the
/// manifest's directory; a bare file name goes to the dynamic linker's search
/// (`LD_LIBRARY_PATH`, then the standard directories), which is checked here as far as it can be
/// without loading anything.
pub fn resolve_library(manifest: &Path, library_path: &str, env: Env) -> (PathBuf, bool) {
    let lp = Path::new(library_path);
    if lp.is_absolute() {
        return (lp.to_path_buf(), lp.is_file());
    }
    if library_path.contains('/') {
        let p = manifest.parent().unwrap_or(Path::new("/")).join(lp);
        let ok = p.is_file();
        return (p, ok);
    }
    let arch = std::env::consts::ARCH;
    let mut dirs: Vec<PathBuf> = nonempty(env, "LD_LIBRARY_PATH")
        .map(|v| split_abs(&v))
        .unwrap_or_default();
    for d in [
        format!("/lib/{arch}-linux-gnu"),
        format!("/usr/lib/{arch}-linux-gnu"),
        "/lib".into(),
        "/usr/lib".into(),
        "/usr/local/lib".into(),
        "/lib64".into(),
        "/usr/lib64".into(),
    ] {
        dirs.push(PathBuf::from(d));
    }
    for d in dirs {
        let p = d.join(lp);
        if p.is_file() {
            return (p, true);
        }
    }
    (lp.to_path_buf(), false)
}

/// The architecture an ELF file is built for, in `std::env::consts::ARCH`'s words (`x86_64`,
/// `aarch64`, …); `None` when it is not a readable ELF file. A loader skips a driver or layer
/// library of another architecture (a multiarch system has both: `lvp_icd.aarch64.json` beside
/// `lvp_icd.x86_64.json`).
pub fn elf_arch(p: &Path) -> Option<String> {
    use std::io::Read;
    let mut h = [0u8; 20];
    std::fs::File::open(p).ok()?.read_exact(&mut h).ok()?;
    if h[..4] != *b"\x7fELF" {
        return None;
    }
    let machine = match h[5] {
        1 => u16::from_le_bytes([h[18], h[19]]),
        _ => u16::from_be_bytes([h[18], h[19]]),
    };
    Some(
        match machine {
            3 => "x86",
            40 => "arm",
            62 => "x86_64",
            183 => "aarch64",
            243 => "riscv64",
            n => return Some(format!("ELF machine {n}")),
        }
        .to_string(),
    )
}

pub fn read_json(p: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(p).map_err(|e| format!("cannot read: {e}"))?;
    serde_json::from_str(&text).map_err(|e| format!("not valid JSON: {e}"))
}

/// The layer names a layer manifest declares (`layer` or `layers`).
pub fn layer_names(doc: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(n) = doc["layer"]["name"].as_str() {
        out.push(n.to_string());
    }
    for l in doc["layers"].as_array().into_iter().flatten() {
        if let Some(n) = l["name"].as_str() {
            out.push(n.to_string());
        }
    }
    out
}

/// The directory `install` writes to: the user's (`$XDG_DATA_HOME`, default `~/.local/share`)
/// or, with `system`, `/usr/local/share`; then `vulkan/implicit_layer.d` or `explicit_layer.d`.
pub fn install_dir(env: Env, system: bool, kind: Kind) -> Result<PathBuf, String> {
    let base = if system {
        PathBuf::from("/usr/local/share")
    } else {
        data_home(env).ok_or(
            "neither XDG_DATA_HOME (absolute) nor HOME is set: no user directory to install into; \
             set one, or use --system",
        )?
    };
    Ok(base.join("vulkan").join(kind.dir_name()))
}

/// The built-in manifest with `library_path` set to `lib`. An explicit manifest loses the
/// implicit-layer switches (`enable_environment`, `disable_environment`), as the one `vkecho run`
/// writes does: an explicit layer is enabled by naming it.
pub fn manifest_for(lib: &Path, kind: Kind) -> Result<String, String> {
    let mut doc: Value = serde_json::from_str(MANIFEST)
        .map_err(|e| format!("built-in manifest is not JSON: {e}"))?;
    let layer = doc
        .get_mut("layer")
        .and_then(|l| l.as_object_mut())
        .ok_or("built-in manifest has no layer")?;
    let lib = lib
        .to_str()
        .ok_or_else(|| format!("library path is not UTF-8: {}", lib.display()))?;
    layer.insert("library_path".into(), lib.into());
    if kind == Kind::Explicit {
        layer.remove("enable_environment");
        layer.remove("disable_environment");
    }
    Ok(serde_json::to_string_pretty(&doc).unwrap() + "\n")
}

/// The process environment as a lookup.
pub fn process_env(k: &str) -> Option<String> {
    std::env::var(k).ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn elf_arch_reads_the_machine() {
        let me = std::env::current_exe().unwrap();
        assert_eq!(
            super::elf_arch(&me).as_deref(),
            Some(std::env::consts::ARCH)
        );
        let dir = std::env::temp_dir().join(format!("vkecho-elf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut h = [0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 2; // 64-bit
        h[5] = 1; // little endian
        h[18..20].copy_from_slice(&183u16.to_le_bytes());
        let f = dir.join("aarch64.so");
        std::fs::write(&f, h).unwrap();
        assert_eq!(super::elf_arch(&f).as_deref(), Some("aarch64"));
        std::fs::write(&f, b"not an elf file at all").unwrap();
        assert_eq!(super::elf_arch(&f), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k: &str| m.get(k).cloned()
    }

    #[test]
    fn default_search_order_follows_the_loader() {
        let env = env_of(&[("HOME", "/h")]);
        let (dirs, note) = search_dirs(&env, Kind::Implicit);
        assert!(note.is_none());
        let paths: Vec<String> = dirs.iter().map(|d| d.path.display().to_string()).collect();
        assert_eq!(
            paths,
            [
                "/h/.config/vulkan/implicit_layer.d",
                "/etc/xdg/vulkan/implicit_layer.d",
                "/etc/vulkan/implicit_layer.d",
                "/h/.local/share/vulkan/implicit_layer.d",
                "/usr/local/share/vulkan/implicit_layer.d",
                "/usr/share/vulkan/implicit_layer.d",
            ]
        );
    }

    #[test]
    fn xdg_data_dirs_replaces_and_layer_path_overrides_explicit_only() {
        let env = env_of(&[
            ("XDG_DATA_HOME", "/d"),
            ("XDG_DATA_DIRS", "/x:relative"),
            ("VK_LAYER_PATH", "/lp"),
            ("VK_ADD_LAYER_PATH", "/add"),
        ]);
        let (imp, _) = search_dirs(&env, Kind::Implicit);
        let imp: Vec<_> = imp.iter().map(|d| d.path.display().to_string()).collect();
        assert!(imp.contains(&"/d/vulkan/implicit_layer.d".to_string()));
        assert!(imp.contains(&"/x/vulkan/implicit_layer.d".to_string()));
        assert!(!imp.iter().any(|p| p.starts_with("/usr/share")));
        assert!(!imp
            .iter()
            .any(|p| p.contains("relative") || p.starts_with("/lp")));
        let (exp, note) = search_dirs(&env, Kind::Explicit);
        let exp: Vec<_> = exp.iter().map(|d| d.path.display().to_string()).collect();
        assert_eq!(exp, ["/add", "/lp"]);
        assert!(note.unwrap().contains("VK_LAYER_PATH"));
    }

    #[test]
    fn install_dirs() {
        let env = env_of(&[("HOME", "/h")]);
        assert_eq!(
            install_dir(&env, false, Kind::Implicit).unwrap(),
            PathBuf::from("/h/.local/share/vulkan/implicit_layer.d")
        );
        assert_eq!(
            install_dir(&env, true, Kind::Explicit).unwrap(),
            PathBuf::from("/usr/local/share/vulkan/explicit_layer.d")
        );
        assert!(install_dir(&env_of(&[]), false, Kind::Implicit).is_err());
    }

    #[test]
    fn installed_manifest_has_absolute_library_and_keeps_features() {
        let m: Value =
            serde_json::from_str(&manifest_for(Path::new("/a/b/lib.so"), Kind::Implicit).unwrap())
                .unwrap();
        assert_eq!(m["layer"]["library_path"], "/a/b/lib.so");
        assert_eq!(m["layer"]["enable_environment"]["VK_ECHO_ENABLE"], "1");
        assert!(m["layer"]["features"]["settings"].is_array());
        let e: Value =
            serde_json::from_str(&manifest_for(Path::new("/l.so"), Kind::Explicit).unwrap())
                .unwrap();
        assert!(e["layer"].get("enable_environment").is_none());
        assert_eq!(layer_names(&e), [LAYER_NAME]);
    }
}
