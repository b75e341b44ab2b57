//! `vkecho install [--system] [--explicit] [--lib PATH]` and
//! `vkecho uninstall [--system] [--explicit|--implicit]`.
//!
//! Install writes the layer manifest with an absolute `library_path` (by default the
//! `libVkLayer_echo.so` next to this `vkecho`) into the directory the loader searches:
//! `$XDG_DATA_HOME/vulkan/implicit_layer.d/` (default `~/.local/share`), `explicit_layer.d/` with
//! `--explicit`, or under `/usr/local/share` with `--system`. Uninstall removes the manifest(s)
//! install wrote there, and nothing that is not an echo manifest.

use crate::paths::{self, Kind, LAYER_NAME, MANIFEST_FILE};
use std::path::{Path, PathBuf};

const INSTALL_ABOUT: &str = "\
Writes VkLayer_echo.json with an absolute library_path into
  $XDG_DATA_HOME/vulkan/implicit_layer.d   (default ~/.local/share; the default)
  .../explicit_layer.d                      (--explicit)
  /usr/local/share/vulkan/...              (--system; needs root)";

/// `vkecho install [--system] [--explicit] [--lib PATH]`.
#[derive(clap::Args)]
#[command(long_about = INSTALL_ABOUT)]
pub struct InstallArgs {
    /// Install under /usr/local/share (needs root) instead of the user's data directory
    #[arg(long)]
    pub system: bool,
    /// Install an explicit layer (enabled only when asked for)
    #[arg(long, conflicts_with = "implicit")]
    pub explicit: bool,
    /// Install an implicit layer (the default)
    #[arg(long)]
    pub implicit: bool,
    /// The layer library (default: libVkLayer_echo.so next to vkecho)
    #[arg(long, value_name = "PATH")]
    pub lib: Option<PathBuf>,
}

/// `vkecho uninstall [--system] [--implicit|--explicit]`.
#[derive(clap::Args)]
#[command(
    long_about = "Removes what `vkecho install` wrote (both kinds unless --implicit or \
--explicit), and nothing that is not an echo manifest."
)]
pub struct UninstallArgs {
    /// Remove the manifest under /usr/local/share (needs root)
    #[arg(long)]
    pub system: bool,
    /// Remove only the explicit layer's manifest
    #[arg(long, conflicts_with = "implicit")]
    pub explicit: bool,
    /// Remove only the implicit layer's manifest
    #[arg(long)]
    pub implicit: bool,
}

pub struct Opts {
    system: bool,
    kinds: Vec<Kind>,
    lib: Option<PathBuf>,
}

impl InstallArgs {
    pub fn to_opts(&self) -> Opts {
        Opts {
            system: self.system,
            kinds: vec![if self.explicit {
                Kind::Explicit
            } else {
                Kind::Implicit
            }],
            lib: self.lib.clone(),
        }
    }
}

impl UninstallArgs {
    pub fn to_opts(&self) -> Opts {
        let kinds = if self.explicit {
            vec![Kind::Explicit]
        } else if self.implicit {
            vec![Kind::Implicit]
        } else {
            vec![Kind::Implicit, Kind::Explicit]
        };
        Opts {
            system: self.system,
            kinds,
            lib: None,
        }
    }
}

pub fn main(opts: &Opts, uninstall: bool) -> i32 {
    let cmd = if uninstall { "uninstall" } else { "install" };
    let result = if uninstall {
        remove(opts)
    } else {
        install(opts)
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("vkecho {cmd}: {e}");
            1
        }
    }
}

fn hint_for(e: &std::io::Error, system: bool) -> &'static str {
    if e.kind() == std::io::ErrorKind::PermissionDenied {
        if system {
            " (a --system install needs root: run it with sudo, or install for this user without --system)"
        } else {
            " (permission denied)"
        }
    } else {
        ""
    }
}

fn layer_library(opts: &Opts) -> Result<PathBuf, String> {
    let lib = match &opts.lib {
        Some(p) => p.clone(),
        None => crate::launch::layer_library().map_err(|e| format!("{e}; or pass --lib PATH"))?,
    };
    let abs =
        std::fs::canonicalize(&lib).map_err(|e| format!("layer library {}: {e}", lib.display()))?;
    if !abs.is_file() {
        return Err(format!("layer library {} is not a file", abs.display()));
    }
    let mut magic = [0u8; 4];
    let is_elf = std::fs::File::open(&abs)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
        .is_ok()
        && magic == *b"\x7fELF";
    if !is_elf {
        return Err(format!(
            "{} is not a shared library (no ELF header)",
            abs.display()
        ));
    }
    Ok(abs)
}

fn install(opts: &Opts) -> Result<(), String> {
    let env = paths::process_env;
    let kind = opts.kinds[0];
    let lib = layer_library(opts)?;
    let dir = paths::install_dir(&env, opts.system, kind)?;
    std::fs::create_dir_all(&dir).map_err(|e| {
        format!(
            "cannot create {}: {e}{}",
            dir.display(),
            hint_for(&e, opts.system)
        )
    })?;
    let file = dir.join(MANIFEST_FILE);
    if file.exists() {
        if let Ok(doc) = paths::read_json(&file) {
            if !paths::layer_names(&doc).iter().any(|n| n == LAYER_NAME) {
                return Err(format!(
                    "{} exists and is not a VK_LAYER_echo manifest; not overwriting it",
                    file.display()
                ));
            }
        }
    }
    let text = paths::manifest_for(&lib, kind)?;
    let tmp = dir.join(format!(".{MANIFEST_FILE}.{}", std::process::id()));
    std::fs::write(&tmp, &text)
        .and_then(|_| std::fs::rename(&tmp, &file))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            format!(
                "cannot write {}: {e}{}",
                file.display(),
                hint_for(&e, opts.system)
            )
        })?;
    println!(
        "installed the {} layer manifest {}",
        kind.as_str(),
        file.display()
    );
    println!("  library_path: {}", lib.display());
    match kind {
        Kind::Implicit => {
            println!("enable it for a program:   VK_ECHO_ENABLE=1 <program>");
            println!("switch it off again:       VK_ECHO_DISABLE=1 <program>");
        }
        _ => println!("enable it for a program:   VK_INSTANCE_LAYERS=VK_LAYER_echo <program>"),
    }
    println!("check the result:          vkecho doctor");
    // A manifest of the other kind in the same place makes two VK_LAYER_echo entries.
    let other = if kind == Kind::Implicit {
        Kind::Explicit
    } else {
        Kind::Implicit
    };
    if let Ok(odir) = paths::install_dir(&env, opts.system, other) {
        let of = odir.join(MANIFEST_FILE);
        if is_echo_manifest(&of) {
            eprintln!(
                "warning: an {} echo manifest is also installed ({}); the loader uses the first \
                 one it finds. `vkecho uninstall{} --{}` removes it.",
                other.as_str(),
                of.display(),
                if opts.system { " --system" } else { "" },
                other.as_str()
            );
        }
    }
    Ok(())
}

fn is_echo_manifest(p: &Path) -> bool {
    p.is_file()
        && paths::read_json(p)
            .map(|d| paths::layer_names(&d).iter().any(|n| n == LAYER_NAME))
            .unwrap_or(false)
}

fn remove(opts: &Opts) -> Result<(), String> {
    let env = paths::process_env;
    let mut removed = 0;
    let mut looked = Vec::new();
    for &kind in &opts.kinds {
        let dir = paths::install_dir(&env, opts.system, kind)?;
        let file = dir.join(MANIFEST_FILE);
        looked.push(file.display().to_string());
        if !file.exists() {
            continue;
        }
        if !is_echo_manifest(&file) {
            return Err(format!(
                "{} is not a VK_LAYER_echo manifest; not removing it",
                file.display()
            ));
        }
        std::fs::remove_file(&file).map_err(|e| {
            format!(
                "cannot remove {}: {e}{}",
                file.display(),
                hint_for(&e, opts.system)
            )
        })?;
        println!("removed {}", file.display());
        removed += 1;
    }
    if removed == 0 {
        println!(
            "nothing to remove: no echo manifest at {}",
            looked.join(", ")
        );
    }
    Ok(())
}
