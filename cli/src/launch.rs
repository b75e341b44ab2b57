//! Running a program with the layer: `vkecho profile`, `run`, `calibrate` and `demo` all start
//! the application through here. The loader is pointed at this build's own layer (an explicit
//! manifest written next to the user's runtime files, with an absolute `library_path`), so the
//! layer need not be installed.

use crate::paths;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `libVkLayer_echo.so` of this build: `VK_ECHO_LIBRARY` if set, else next to this executable
/// (a build, or a folder holding the two), else where the packages put it beside `bin/vkecho`:
/// `../lib/<triplet>/` (the .deb: /usr/bin and /usr/lib/aarch64-linux-gnu) or `../lib/` (the
/// tarball unpacked into a prefix).
pub fn layer_library() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("VK_ECHO_LIBRARY") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate vkecho itself: {e}"))?;
    let dir = exe.parent().ok_or("vkecho has no parent directory")?;
    let beside = dir.join(paths::LIBRARY_FILE);
    let mut tried = vec![beside.clone()];
    if let Some(prefix) = dir.parent().filter(|_| dir.ends_with("bin")) {
        let triplet = format!("{}-linux-gnu", std::env::consts::ARCH);
        tried.push(prefix.join("lib").join(triplet).join(paths::LIBRARY_FILE));
        tried.push(prefix.join("lib").join(paths::LIBRARY_FILE));
    }
    match tried.iter().find(|p| p.exists()) {
        Some(lib) => Ok(lib.clone()),
        None => Err(format!(
            "the layer library is not next to vkecho ({}); build the workspace (`cargo build --workspace`) or set VK_ECHO_LIBRARY",
            beside.display()
        )),
    }
}

/// Other binaries of this build (e.g. `echo-samples`), next to this executable.
pub fn sibling(name: &str) -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate vkecho itself: {e}"))?;
    let p = exe.with_file_name(name);
    if p.exists() {
        Ok(p)
    } else {
        Err(format!(
            "{} not found next to vkecho; build the workspace first",
            p.display()
        ))
    }
}

/// Write an explicit-layer manifest for `lib` into a private directory and return the directory.
///
/// The directory is private to the user and to this layer library *build*: its name hashes the
/// library's canonical path, size, modification time and inode, so two builds (two checkouts, a
/// debug and a release build, a rebuild while an older run is still starting) never load each
/// other's library through one shared manifest. The manifest is written to a temporary file and
/// renamed into place, so a reader never sees half a file.
pub fn explicit_manifest_dir(lib: &Path) -> Result<PathBuf, String> {
    let lib =
        std::fs::canonicalize(lib).map_err(|e| format!("layer library {}: {e}", lib.display()))?;
    let lib = lib.as_path();
    let text = paths::manifest_for(lib, paths::Kind::Explicit)?;
    let base = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|p| p.is_dir())
        .unwrap_or_else(std::env::temp_dir);
    // SAFETY: getuid has no preconditions.
    let user = base.join(format!("vkecho-layer-{}", unsafe { libc::getuid() }));
    let dir = user.join(library_build_key(lib)?);
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let file = dir.join(paths::MANIFEST_FILE);
    let tmp = dir.join(format!(
        ".{}.{}.{:?}",
        paths::MANIFEST_FILE,
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::write(&tmp, text)
        .and_then(|_| std::fs::rename(&tmp, &file))
        .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    Ok(dir)
}

/// 16 hex digits naming one build of the layer library at one path (FNV-1a 64 over the
/// canonical path, size, mtime and inode).
pub fn library_build_key(lib: &Path) -> Result<String, String> {
    use std::os::unix::fs::MetadataExt;
    let canon =
        std::fs::canonicalize(lib).map_err(|e| format!("layer library {}: {e}", lib.display()))?;
    let meta = std::fs::metadata(&canon).map_err(|e| format!("{}: {e}", canon.display()))?;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    eat(canon.as_os_str().as_encoded_bytes());
    eat(&meta.len().to_le_bytes());
    eat(&meta.mtime().to_le_bytes());
    eat(&meta.mtime_nsec().to_le_bytes());
    eat(&meta.ino().to_le_bytes());
    Ok(format!("{h:016x}"))
}

fn prepend(var: &str, value: &str, sep: &str) -> String {
    match std::env::var(var) {
        Ok(old) if !old.is_empty() => format!("{value}{sep}{old}"),
        _ => value.to_string(),
    }
}

/// What the layer should do in the child.
pub struct LayerRun<'a> {
    /// `profile`, `enforce`, `off`, `auto`, or `None` to run without the layer at all.
    pub mode: Option<&'a str>,
    /// Extra `VK_ECHO_*` settings, e.g. `("TRACE", path)`.
    pub settings: Vec<(&'a str, String)>,
}

/// A `Command` for `argv` with the layer enabled as `run` says. `XDG_RUNTIME_DIR` gets a default
/// so the loader and drivers do not complain.
pub fn command(argv: &[String], run: &LayerRun) -> Result<Command, String> {
    let (prog, args) = argv
        .split_first()
        .ok_or("no command given (expected: -- CMD ARGS...)")?;
    let mut cmd = Command::new(prog);
    cmd.args(args);
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        cmd.env("XDG_RUNTIME_DIR", std::env::temp_dir());
    }
    match run.mode {
        None => {
            // No echo at all: also switch off an installed implicit copy.
            cmd.env("VK_ECHO_DISABLE", "1");
        }
        Some(mode) => {
            let dir = explicit_manifest_dir(&layer_library()?)?;
            cmd.env(
                "VK_ADD_LAYER_PATH",
                prepend("VK_ADD_LAYER_PATH", &dir.display().to_string(), ":"),
            );
            cmd.env(
                "VK_INSTANCE_LAYERS",
                prepend("VK_INSTANCE_LAYERS", "VK_LAYER_echo", ":"),
            );
            cmd.env("VK_ECHO_MODE", mode);
            // An implicit installed copy would load a second instance of the layer: the loader
            // keeps it out for any value of VK_ECHO_DISABLE, and `implicit` is the one value the
            // explicitly loaded echo does not take as "off" (layer/src/settings.rs).
            cmd.env("VK_ECHO_DISABLE", "implicit");
            for (k, v) in &run.settings {
                cmd.env(format!("VK_ECHO_{k}"), v);
            }
        }
    }
    Ok(cmd)
}

/// How a child ended, as a shell reports it: its exit status, or 128+N when signal N killed it
/// (SIGSEGV: 139).
pub fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => c,
        (None, Some(sig)) => 128 + sig,
        (None, None) => 1,
    }
}

/// `None` when the child succeeded, else how it failed in words ("exited with status 3",
/// "was killed by signal 11 (SIGSEGV)").
pub fn failure(status: std::process::ExitStatus) -> Option<String> {
    use std::os::unix::process::ExitStatusExt;
    if status.success() {
        return None;
    }
    Some(match (status.code(), status.signal()) {
        (Some(c), _) => format!("exited with status {c}"),
        (None, Some(sig)) => {
            // SAFETY: strsignal returns a pointer to a static or thread-local string (or NULL).
            let name = unsafe {
                let p = libc::strsignal(sig);
                if p.is_null() {
                    String::new()
                } else {
                    std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned()
                }
            };
            let abbrev = signal_name(sig).map(|n| format!("SIG{n}"));
            match (abbrev, name.is_empty()) {
                (Some(a), false) => format!("was killed by signal {sig} ({a}: {name})"),
                (Some(a), true) => format!("was killed by signal {sig} ({a})"),
                (None, false) => format!("was killed by signal {sig} ({name})"),
                (None, true) => format!("was killed by signal {sig}"),
            }
        }
        (None, None) => "failed".to_string(),
    })
}

fn signal_name(sig: i32) -> Option<&'static str> {
    Some(match sig {
        libc::SIGHUP => "HUP",
        libc::SIGINT => "INT",
        libc::SIGQUIT => "QUIT",
        libc::SIGILL => "ILL",
        libc::SIGTRAP => "TRAP",
        libc::SIGABRT => "ABRT",
        libc::SIGBUS => "BUS",
        libc::SIGFPE => "FPE",
        libc::SIGKILL => "KILL",
        libc::SIGSEGV => "SEGV",
        libc::SIGPIPE => "PIPE",
        libc::SIGALRM => "ALRM",
        libc::SIGTERM => "TERM",
        _ => return None,
    })
}

/// A fresh private file path for a run's statistics.
pub fn temp_file(stem: &str, ext: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    std::env::temp_dir().join(format!(
        "vkecho-{stem}-{}-{nanos}.{ext}",
        std::process::id()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 11, defect 6: two layer builds used at once get two manifests, each naming its own
    /// library; a rebuilt library (new mtime) gets a new one.
    #[test]
    fn each_library_build_gets_its_own_manifest() {
        let root = std::env::temp_dir().join(format!("vkecho-manifest-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let (a, b) = (root.join("a"), root.join("b"));
        for d in [&a, &b] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::write(d.join(paths::LIBRARY_FILE), b"not really a library").unwrap();
        }
        let da = explicit_manifest_dir(&a.join(paths::LIBRARY_FILE)).unwrap();
        let db = explicit_manifest_dir(&b.join(paths::LIBRARY_FILE)).unwrap();
        assert_ne!(da, db);
        for (dir, lib) in [(&da, &a), (&db, &b)] {
            let m: serde_json::Value = serde_json::from_str(
                &std::fs::read_to_string(dir.join(paths::MANIFEST_FILE)).unwrap(),
            )
            .unwrap();
            let want = std::fs::canonicalize(lib.join(paths::LIBRARY_FILE)).unwrap();
            assert_eq!(
                m["layer"]["library_path"].as_str().map(PathBuf::from),
                Some(want),
                "{m}"
            );
        }
        // Same build, same place: the same directory (no litter per run).
        assert_eq!(
            explicit_manifest_dir(&a.join(paths::LIBRARY_FILE)).unwrap(),
            da
        );
        // A rebuild at the same path is another build.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(a.join(paths::LIBRARY_FILE), b"rebuilt, longer than before").unwrap();
        assert_ne!(
            explicit_manifest_dir(&a.join(paths::LIBRARY_FILE)).unwrap(),
            da
        );
        let _ = std::fs::remove_dir_all(&root);
    }
}
