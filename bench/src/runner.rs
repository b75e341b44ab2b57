//! Starting the programs the bench measures, with or without this build's layer. The few lines of
//! environment set-up mirror `vkecho`'s launch module: an explicit manifest for this build's
//! `libVkLayer_echo.so` in a private directory, `VK_ADD_LAYER_PATH` + `VK_INSTANCE_LAYERS`, and
//! `VK_ECHO_DISABLE` so an installed implicit copy cannot load a second instance of the layer
//! (or load at all in the no-layer configuration): `implicit` with the layer (the explicit copy
//! takes any other value as "off"), `1` without.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The layer manifest of this source tree; only `library_path` is rewritten.
const MANIFEST: &str = include_str!("../../manifest/VkLayer_echo.json");
pub const LIBRARY_FILE: &str = "libVkLayer_echo.so";

/// The binaries and library of this build, all next to the `echo-bench` executable.
#[derive(Clone, Debug)]
pub struct Build {
    pub samples: PathBuf,
    pub vkecho: PathBuf,
    pub calls: PathBuf,
    /// Directory holding the explicit manifest that points at `layer`.
    pub manifest_dir: PathBuf,
}

impl Build {
    /// Finds the siblings; the error names every missing file and how to build it.
    pub fn locate(work: &Path) -> Result<Build, String> {
        let exe =
            std::env::current_exe().map_err(|e| format!("cannot locate echo-bench itself: {e}"))?;
        let dir = exe
            .parent()
            .ok_or("echo-bench has no parent directory")?
            .to_path_buf();
        let want = ["echo-samples", "vkecho", "echo-bench-calls", LIBRARY_FILE];
        let missing: Vec<&str> = want
            .iter()
            .copied()
            .filter(|n| !dir.join(n).exists())
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "{} not found next to echo-bench in {}; build the whole workspace with the same profile and target dir (`cargo build --release --workspace`, or scripts/bench.sh)",
                missing.join(", "),
                dir.display()
            ));
        }
        let layer = dir.join(LIBRARY_FILE);
        let manifest_dir = work.join("layer");
        write_manifest(&layer, &manifest_dir)?;
        Ok(Build {
            samples: dir.join("echo-samples"),
            vkecho: dir.join("vkecho"),
            calls: dir.join("echo-bench-calls"),
            manifest_dir,
        })
    }
}

fn write_manifest(lib: &Path, dir: &Path) -> Result<(), String> {
    let mut doc: Value =
        serde_json::from_str(MANIFEST).map_err(|e| format!("layer manifest is not JSON: {e}"))?;
    let layer = doc
        .get_mut("layer")
        .and_then(|l| l.as_object_mut())
        .ok_or("layer manifest has no \"layer\" object")?;
    let lib = lib
        .to_str()
        .ok_or_else(|| format!("library path is not UTF-8: {}", lib.display()))?;
    layer.insert("library_path".into(), lib.into());
    // Explicit layer: enabled by VK_INSTANCE_LAYERS, not by the environment switch.
    layer.remove("enable_environment");
    layer.remove("disable_environment");
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let file = dir.join("VkLayer_echo.json");
    std::fs::write(&file, serde_json::to_string_pretty(&doc).unwrap() + "\n")
        .map_err(|e| format!("cannot write {}: {e}", file.display()))
}

/// What the layer does in a child process.
#[derive(Clone, Debug)]
pub enum Layer {
    /// Not loaded (an installed implicit copy is disabled too).
    None,
    /// Loaded with `VK_ECHO_MODE=mode` and extra `VK_ECHO_<K>=V` settings.
    Mode(&'static str, Vec<(&'static str, String)>),
}

impl Layer {
    pub fn label(&self) -> String {
        match self {
            Layer::None => "no layer".into(),
            Layer::Mode(m, _) => format!("layer mode={m}"),
        }
    }
}

/// A command for `prog args` under `layer`.
pub fn command(build: &Build, prog: &Path, args: &[String], layer: &Layer) -> Command {
    let mut cmd = Command::new(prog);
    cmd.args(args);
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        cmd.env("XDG_RUNTIME_DIR", std::env::temp_dir());
    }
    // Nothing inherited may change what the layer does in a configuration.
    for (k, _) in std::env::vars_os() {
        if let Some(k) = k.to_str() {
            if k.starts_with("VK_ECHO_") {
                cmd.env_remove(k);
            }
        }
    }
    cmd.env("VK_ECHO_DISABLE", "1");
    if let Layer::Mode(mode, settings) = layer {
        cmd.env("VK_ECHO_DISABLE", "implicit");
        let add = match std::env::var("VK_ADD_LAYER_PATH") {
            Ok(old) if !old.is_empty() => format!("{}:{old}", build.manifest_dir.display()),
            _ => build.manifest_dir.display().to_string(),
        };
        cmd.env("VK_ADD_LAYER_PATH", add);
        let layers = match std::env::var("VK_INSTANCE_LAYERS") {
            Ok(old) if !old.is_empty() => format!("VK_LAYER_echo:{old}"),
            _ => "VK_LAYER_echo".into(),
        };
        cmd.env("VK_INSTANCE_LAYERS", layers);
        cmd.env("VK_ECHO_MODE", mode);
        for (k, v) in settings {
            cmd.env(format!("VK_ECHO_{k}"), v);
        }
    }
    cmd
}

/// Runs a program that prints one JSON object as its last `{`-line on stdout; returns it.
pub fn run_json(
    build: &Build,
    prog: &Path,
    args: &[String],
    layer: &Layer,
) -> Result<Value, String> {
    let what = format!(
        "{} {} ({})",
        prog.file_name().unwrap_or_default().to_string_lossy(),
        args.join(" "),
        layer.label()
    );
    let out = command(build, prog, args, layer)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("cannot run {what}: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(4).collect();
        return Err(format!(
            "{what} failed ({}): {}",
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        ));
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .rev()
        .filter(|l| l.trim_start().starts_with('{'))
        .find_map(|l| serde_json::from_str::<Value>(l).ok())
        .ok_or(format!("{what} printed no JSON report line"))
}

/// Runs `vkecho ARGS`; returns its stdout, or an error with the tail of its stderr.
pub fn vkecho(build: &Build, args: &[String]) -> Result<String, String> {
    let out = Command::new(&build.vkecho)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run vkecho: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(4).collect();
        return Err(format!(
            "vkecho {} failed ({}): {}",
            args.join(" "),
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The layer's statistics file: one JSON line per destroyed device.
pub fn read_stats(path: &Path) -> Result<Vec<echo_analyzer::stats::Stats>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).map_err(|e| format!("{}: {e}", path.display())))
        .collect()
}
