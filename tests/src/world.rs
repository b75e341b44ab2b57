//! A private Vulkan world for one test process run (issue 8's hardening tests): a temporary
//! directory with echo installed implicitly (`$XDG_DATA_HOME/vulkan/implicit_layer.d`, absolute
//! `library_path`, enabled with `VK_ECHO_ENABLE=1`), optionally the test layer
//! `VK_LAYER_ECHO_test_discrete` explicitly below it (fault injection, poisoning, tables), and
//! optionally the Khronos validation layer; a clean environment so nothing on the machine leaks in.
//!
//! `tests/tests/loader.rs` has its own, richer world for the loader tests; this one is what the
//! sample-level tests need.

use crate::samples::{run_command, samples_bin, validation_env, SampleRun};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// target/<profile>/ of this build (next to the running test binary's deps/).
pub fn target_dir() -> PathBuf {
    samples_bin().parent().unwrap().to_path_buf()
}

/// A file tests/build.rs builds into this package's OUT_DIR: a program of tests/c (`c_upload`),
/// its shaders (`c_double.spv`), the test layers' libraries.
pub fn c_program(name: &str) -> PathBuf {
    Path::new(env!("OUT_DIR")).join(name)
}

/// A program of tests/c that must have been built ([`c_program`]); panics, saying why it may be
/// missing, when it was not (tests/build.rs skips the programs whose libraries are not
/// installed).
pub fn program(name: &str) -> PathBuf {
    let p = c_program(name);
    assert!(
        p.exists(),
        "{} was not built: tests/build.rs skips a program whose libraries or tools are missing \
         (c_vkfft: Debian's libvkfft-dev and glslang-dev; scripts/deps.sh installs them)",
        p.display()
    );
    p
}

/// A fresh, empty directory for one test: `<temp>/echo-<test file>-<pid>-<name>` (the test file
/// is the running test binary's name without its hash), removed first if a test of this process
/// made it before, and left behind afterwards for inspection. Tests running at once must use
/// different names.
pub fn scratch(name: &str) -> PathBuf {
    let exe = std::env::current_exe().ok();
    let stem = exe
        .as_deref()
        .and_then(Path::file_stem)
        .and_then(|s| s.to_str())
        .unwrap_or("test");
    // `enforce-0123456789abcdef` → `enforce`
    let file = match stem.rsplit_once('-') {
        Some((f, hash)) if hash.len() == 16 && hash.chars().all(|c| c.is_ascii_hexdigit()) => f,
        _ => stem,
    };
    let d = std::env::temp_dir().join(format!("echo-{file}-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The value of `ECHO_C_SPV` for the C programs: c_double.spv, beside which the programs find
/// their other shaders (c_tensors.spv).
pub fn c_spv() -> String {
    c_program("c_double.spv").display().to_string()
}

/// `vkecho analyze TRACE -o PLAN` (this build's): the plan written, and what the analysis printed.
/// Panics when the analysis fails.
pub fn analyze_plan(trace: &Path, plan: &Path) -> (Value, String) {
    let out = Command::new(artifact("vkecho"))
        .arg("analyze")
        .arg(trace)
        .arg("-o")
        .arg(plan)
        .output()
        .expect("run vkecho analyze");
    assert!(
        out.status.success(),
        "vkecho analyze: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(plan).expect("the plan vkecho analyze wrote");
    let plan = serde_json::from_str(&text).expect("the plan is JSON");
    (plan, String::from_utf8_lossy(&out.stdout).into_owned())
}

/// An artifact of this build: `libVkLayer_echo.so`, `vkecho`, `echo-fresh` …
///
/// Test knob: when `ECHO_TEST_ARTIFACT_DIR` is set and holds a file named `name`, that file is
/// used instead, to run the tests (e.g. the C corpus, `tests/tests/real_programs.rs`) against
/// another build of the layer and CLI (say, the artifacts of an older commit); artifacts it does
/// not hold still come from this build.
pub fn artifact(name: &str) -> PathBuf {
    if let Some(dir) = std::env::var_os("ECHO_TEST_ARTIFACT_DIR") {
        let p = PathBuf::from(dir).join(name);
        if p.is_file() {
            return p;
        }
    }
    let p = target_dir().join(name);
    assert!(
        p.exists(),
        "{} is missing: build the workspace first (`cargo build --workspace`)",
        p.display()
    );
    p
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Which layers a world loads.
#[derive(Clone, Copy, Debug, Default)]
pub struct Layers {
    /// Echo (implicit, enabled) with `VK_ECHO_MODE` = this; `None`: echo not installed.
    pub echo: Option<&'static str>,
    /// `VK_LAYER_ECHO_test_discrete` below echo.
    pub test_layer: bool,
    /// `VK_LAYER_KHRONOS_validation` with synchronization validation.
    pub validation: bool,
}

pub struct World {
    pub dir: PathBuf,
    env: Vec<(String, String)>,
}

impl World {
    /// A world with echo alone, in `mode` (`None`: echo not installed): no test layer, no
    /// validation.
    pub fn echo(mode: Option<&'static str>) -> World {
        World::new(Layers {
            echo: mode,
            ..Default::default()
        })
    }

    pub fn new(layers: Layers) -> World {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "echo-hard-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        for d in ["home", "data", "config", "cache", "work", "layers"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        let s = |p: &Path| p.display().to_string();
        let mut env = private_env(&dir);
        let mut instance_layers = Vec::new();
        if let Some(mode) = layers.echo {
            let d = dir.join("data/vulkan/implicit_layer.d");
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("VkLayer_echo.json"), echo_manifest()).unwrap();
            env.push(("VK_ECHO_ENABLE".into(), "1".into()));
            env.push(("VK_ECHO_MODE".into(), mode.into()));
        }
        if layers.test_layer {
            std::fs::write(
                dir.join("layers/VkLayer_ECHO_test_discrete.json"),
                test_layer_manifest(),
            )
            .unwrap();
            env.push(("VK_ADD_LAYER_PATH".into(), s(&dir.join("layers"))));
            instance_layers.push("VK_LAYER_ECHO_test_discrete");
        }
        if layers.validation {
            for (k, v) in validation_env() {
                if k == "VK_INSTANCE_LAYERS" {
                    instance_layers.push(v);
                } else {
                    env.push((k.into(), v.into()));
                }
            }
        }
        if !instance_layers.is_empty() {
            env.push(("VK_INSTANCE_LAYERS".into(), instance_layers.join(":")));
        }
        World { dir, env }
    }

    /// Sets (or replaces) one environment variable of every command of this world.
    pub fn set(mut self, k: &str, v: impl AsRef<str>) -> World {
        self.env.retain(|(n, _)| n != k);
        self.env.push((k.into(), v.as_ref().into()));
        self
    }

    /// Removes one environment variable from every command of this world.
    pub fn unset(mut self, k: &str) -> World {
        self.env.retain(|(n, _)| n != k);
        self
    }

    pub fn command(&self, program: &Path, args: &[&str]) -> Command {
        let mut c = Command::new(program);
        c.env_clear().current_dir(self.dir.join("work")).args(args);
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }

    /// Runs `echo-samples ARGS` in this world.
    pub fn sample(&self, args: &[&str]) -> SampleRun {
        run_command(self.command(&samples_bin(), args))
    }

    /// Runs another artifact of this build (e.g. `echo-fresh`) in this world.
    pub fn run(&self, artifact_name: &str, args: &[&str]) -> SampleRun {
        run_command(self.command(&artifact(artifact_name), args))
    }

    /// Profiles `echo-samples ARGS` in this world (echo in profile mode, trace at
    /// `dir/trace.jsonl`, no injected faults) and analyzes the trace into `dir/plan.json`
    /// with `vkecho analyze`. Returns the plan's path.
    pub fn make_plan(&self, args: &[&str]) -> PathBuf {
        let trace = self.dir.join("trace.jsonl");
        let plan = self.dir.join("plan.json");
        let mut cmd = self.command(&samples_bin(), args);
        cmd.env("VK_ECHO_MODE", "profile")
            .env("VK_ECHO_TRACE", &trace)
            .env_remove("VK_ECHO_TEST_FAIL")
            .env_remove("VK_ECHO_TEST_POISON");
        let run = run_command(cmd);
        run.json();
        assert!(
            trace.is_file(),
            "profile mode wrote no trace at {} (stderr:\n{})",
            trace.display(),
            run.stderr
        );
        let out = Command::new(artifact("vkecho"))
            .arg("analyze")
            .arg(&trace)
            .arg("-o")
            .arg(&plan)
            .output()
            .expect("run vkecho analyze");
        assert!(
            out.status.success(),
            "vkecho analyze failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        plan
    }
}

/// Like [`run_command`], but fails the test when `cmd` runs longer than `limit` (a deadlock).
pub fn run_within(cmd: Command, limit: std::time::Duration) -> SampleRun {
    crate::samples::run_command_within(cmd, limit)
}

impl Drop for World {
    fn drop(&mut self) {
        if std::env::var_os("ECHO_KEEP_TEST_DIRS").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The committed manifest with an absolute `library_path` to this build's layer.
pub fn echo_manifest() -> String {
    let text = std::fs::read_to_string(repo_root().join("manifest/VkLayer_echo.json"))
        .expect("manifest/VkLayer_echo.json");
    let mut m: Value = serde_json::from_str(&text).expect("manifest is JSON");
    m["layer"]["library_path"] =
        Value::String(artifact("libVkLayer_echo.so").display().to_string());
    serde_json::to_string_pretty(&m).unwrap()
}

pub fn test_layer_manifest() -> String {
    serde_json::json!({
        "file_format_version": "1.2.0",
        "layer": {
            "name": "VK_LAYER_ECHO_test_discrete",
            "type": "GLOBAL",
            "library_path": artifact("libVkLayer_echo_test_discrete.so").display().to_string(),
            "api_version": "1.3.239",
            "implementation_version": "1",
            "description": "test only: memory tables, fault injection, poisoning below echo"
        }
    })
    .to_string()
}

/// stderr without the layers' own lines (`[VK_LAYER_...]`), i.e. what the application printed.
pub fn app_stderr(run: &SampleRun) -> String {
    run.stderr
        .lines()
        .filter(|l| !l.starts_with("[VK_LAYER_"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Lines echo logged at warning level or above.
pub fn echo_warnings(run: &SampleRun) -> Vec<String> {
    run.stderr
        .lines()
        .filter(|l| l.starts_with("[VK_LAYER_echo] warn") || l.starts_with("[VK_LAYER_echo] error"))
        .map(str::to_string)
        .collect()
}

/// The test layer's "injected ..." lines.
pub fn injected(run: &SampleRun) -> usize {
    run.stderr
        .lines()
        .filter(|l| l.starts_with("[VK_LAYER_ECHO_test_discrete] injected"))
        .count()
}

/// The environment of a private test world under `dir` (which has `home`, `data`, `config` and
/// `cache` subdirectories): `PATH`, `HOME` and every XDG variable point inside it (keeping
/// `/usr/share` among the data dirs, or lavapipe's ICD disappears), and a machine that points the
/// loader at its drivers explicitly keeps doing so.
pub fn private_env(dir: &Path) -> Vec<(String, String)> {
    let s = |p: &Path| p.display().to_string();
    let mut env: Vec<(String, String)> = vec![
        (
            "PATH".into(),
            std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()),
        ),
        ("HOME".into(), s(&dir.join("home"))),
        ("XDG_RUNTIME_DIR".into(), s(dir)),
        ("XDG_DATA_HOME".into(), s(&dir.join("data"))),
        ("XDG_DATA_DIRS".into(), "/usr/local/share:/usr/share".into()),
        ("XDG_CONFIG_HOME".into(), s(&dir.join("config"))),
        ("XDG_CONFIG_DIRS".into(), "/etc/xdg".into()),
        ("XDG_CACHE_HOME".into(), s(&dir.join("cache"))),
    ];
    for k in ["VK_ICD_FILENAMES", "VK_DRIVER_FILES", "LD_LIBRARY_PATH"] {
        if let Ok(v) = std::env::var(k) {
            env.push((k.into(), v));
        }
    }
    env
}

/// Every file under `dir`, recursively (none when it cannot be read).
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(files_under(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}
