//! The layer through the real Vulkan loader, on lavapipe (DESIGN §3, §8; issue 2).
//!
//! Every test builds its own world in a temporary directory: manifests with an absolute
//! `library_path` to the built layer, an empty `XDG_DATA_HOME` unless the test installs echo
//! implicitly, `XDG_DATA_DIRS` keeping `/usr/share` (lavapipe's ICD manifest lives there), and a
//! clean environment, so nothing on the machine leaks in. Artifacts are found next to this test
//! binary (target/<profile>/); run `cargo build --workspace` first.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

const ECHO_SO: &str = "libVkLayer_echo.so";
const DISCRETE_SO: &str = "libVkLayer_echo_test_discrete.so";

/// target/<profile>/ of this build.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("test binary has a directory");
    deps.parent()
        .expect("target/<profile>/deps has a parent")
        .to_path_buf()
}

fn artifact(name: &str) -> PathBuf {
    let p = target_dir().join(name);
    assert!(
        p.exists(),
        "{} is missing: build everything first with `cargo build --workspace` (same profile as the tests)",
        p.display()
    );
    p
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The committed manifest, with `library_path` made absolute; `explicit` drops the
/// enable/disable environment (an explicit layer is enabled by name).
fn echo_manifest(explicit: bool) -> String {
    let text = std::fs::read_to_string(repo_root().join("manifest/VkLayer_echo.json"))
        .expect("manifest/VkLayer_echo.json");
    let mut m: Value = serde_json::from_str(&text).expect("manifest is JSON");
    let layer = m["layer"]
        .as_object_mut()
        .expect("manifest has a layer object");
    layer.insert(
        "library_path".into(),
        Value::String(artifact(ECHO_SO).display().to_string()),
    );
    if explicit {
        layer.remove("enable_environment");
        layer.remove("disable_environment");
    }
    serde_json::to_string_pretty(&m).unwrap()
}

fn discrete_manifest() -> String {
    serde_json::json!({
        "file_format_version": "1.2.0",
        "layer": {
            "name": "VK_LAYER_ECHO_test_discrete",
            "type": "GLOBAL",
            "library_path": artifact(DISCRETE_SO).display().to_string(),
            "api_version": "1.3.239",
            "implementation_version": "1",
            "description": "test only: presents a discrete memory table to the layers above"
        }
    })
    .to_string()
}

/// How echo and the test layers are installed for one run.
#[derive(Default, Clone, Copy)]
struct Setup {
    /// Echo as an explicit layer (VK_ADD_LAYER_PATH + VK_INSTANCE_LAYERS).
    explicit: bool,
    /// Echo's manifest in the temporary XDG_DATA_HOME's implicit_layer.d.
    implicit: bool,
    /// The discrete test layer, explicitly (below echo, which is implicit).
    discrete: bool,
    /// The Khronos validation layer, explicitly.
    validation: bool,
}

struct World {
    dir: PathBuf,
    setup: Setup,
    env: Vec<(String, String)>,
}

impl World {
    fn new(setup: Setup) -> World {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "echo-loader-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        for d in ["home", "data", "config", "cache", "explicit", "work"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        let mut layer_path = Vec::new();
        let mut instance_layers = Vec::new();
        if setup.explicit {
            std::fs::write(dir.join("explicit/VkLayer_echo.json"), echo_manifest(true)).unwrap();
            layer_path.push(dir.join("explicit"));
            instance_layers.push("VK_LAYER_echo");
        }
        if setup.implicit {
            let d = dir.join("data/vulkan/implicit_layer.d");
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("VkLayer_echo.json"), echo_manifest(false)).unwrap();
        }
        if setup.discrete {
            let d = dir.join("discrete");
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(
                d.join("VkLayer_ECHO_test_discrete.json"),
                discrete_manifest(),
            )
            .unwrap();
            layer_path.push(d);
            instance_layers.push("VK_LAYER_ECHO_test_discrete");
        }
        if setup.validation {
            instance_layers.push("VK_LAYER_KHRONOS_validation");
        }
        let s = |p: &Path| p.display().to_string();
        let mut env = echo_tests::world::private_env(&dir);
        env.push(("VK_ECHO_LOG".into(), "info".into()));
        if !layer_path.is_empty() {
            let joined: Vec<String> = layer_path.iter().map(|p| s(p)).collect();
            env.push(("VK_ADD_LAYER_PATH".into(), joined.join(":")));
        }
        if !instance_layers.is_empty() {
            env.push(("VK_INSTANCE_LAYERS".into(), instance_layers.join(":")));
        }
        World { dir, setup, env }
    }

    fn set(mut self, k: &str, v: &str) -> World {
        self.env.retain(|(n, _)| n != k);
        self.env.push((k.into(), v.into()));
        self
    }

    fn command(&self, program: &Path) -> Command {
        let mut c = Command::new(program);
        c.env_clear().current_dir(self.dir.join("work"));
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }

    /// Runs echo-probe; returns its JSON report and its stderr.
    fn probe(&self, args: &[&str]) -> (Value, String) {
        let out_file = self.dir.join("probe.json");
        let _ = std::fs::remove_file(&out_file);
        let out = self
            .command(&artifact("echo-probe"))
            .args(args)
            .arg("--out")
            .arg(&out_file)
            .output()
            .expect("run echo-probe");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            out.status.success(),
            "echo-probe failed ({}):\nstdout:\n{}\nstderr:\n{stderr}",
            out.status,
            String::from_utf8_lossy(&out.stdout)
        );
        let text = std::fs::read_to_string(&out_file).expect("echo-probe wrote no report");
        (
            serde_json::from_str(&text).expect("echo-probe report is JSON"),
            stderr,
        )
    }

    fn run(&self, program: &str, args: &[&str]) -> Output {
        self.command(Path::new(program))
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {program} (install vulkan-tools): {e}"))
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = self.setup;
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The one lavapipe device of the report.
fn lavapipe(report: &Value) -> &Value {
    let devs = report["devices"].as_array().expect("devices");
    devs.iter()
        .find(|d| d["name"].as_str().unwrap_or("").contains("llvmpipe"))
        .unwrap_or_else(|| panic!("no lavapipe device in {report:#}"))
}

fn hook_lib<'a>(dev: &'a Value, cmd: &str) -> &'a str {
    dev["hooks"][cmd]
        .as_str()
        .unwrap_or_else(|| panic!("no entry for {cmd} in {dev:#}"))
}

fn assert_work_ok(dev: &Value) {
    assert_eq!(
        dev["work"]["mismatches"], 0,
        "workload result wrong: {dev:#}"
    );
}

/// Checksum of the workload without any layer: the reference every run must reproduce.
fn reference_checksum() -> String {
    let (r, _) = World::new(Setup::default()).probe(&[]);
    let d = lavapipe(&r);
    assert_work_ok(d);
    assert_eq!(d["in_echo"], 0);
    d["work"]["checksum"].as_str().unwrap().to_string()
}

/// Echo intercepts the hooked commands of an active device, and nothing else.
fn assert_active(dev: &Value, stderr: &str) {
    for c in [
        "vkCreateBuffer",
        "vkAllocateMemory",
        "vkCmdCopyBuffer",
        "vkQueueSubmit",
        "vkWaitForFences",
        // issue 32: every command that can reach memory is echo's — followed, or stepped aside
        // from by a generated hook (vkCmdCopyQueryPoolResults writes into a buffer).
        "vkCmdCopyBufferToImage2",
        "vkCmdBindVertexBuffers2",
        "vkCmdCopyQueryPoolResults",
    ] {
        assert_eq!(
            hook_lib(dev, c),
            ECHO_SO,
            "{c} should resolve into echo on an active device\n{stderr}"
        );
    }
    // Not hooked: the next layer's (here the driver's) pointer, even on an active device.
    assert_ne!(hook_lib(dev, "vkCreateFence"), ECHO_SO);
    assert_ne!(
        hook_lib(dev, "vkCmdSetViewport"),
        ECHO_SO,
        "vkCmdSetViewport cannot reach memory"
    );
    assert!(
        stderr.contains("class uma-strict"),
        "no uma-strict decision logged:\n{stderr}"
    );
    assert!(
        stderr.contains("ACTIVE ("),
        "no ACTIVE decision logged:\n{stderr}"
    );
}

/// An inactive device gets no pointer into echo at all.
fn assert_inactive(dev: &Value, stderr: &str) {
    assert_eq!(
        dev["in_echo"], 0,
        "inactive device still calls through echo: {dev:#}\n{stderr}"
    );
    assert!(
        stderr.contains("INACTIVE ("),
        "no INACTIVE decision logged:\n{stderr}"
    );
}

#[test]
fn exports_only_the_loader_entry_points() {
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(artifact(ECHO_SO))
        .output()
        .expect("run nm (binutils)");
    assert!(out.status.success());
    let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2).map(str::to_string))
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "vkEnumerateDeviceExtensionProperties",
            "vkEnumerateDeviceLayerProperties",
            "vkEnumerateInstanceExtensionProperties",
            "vkEnumerateInstanceLayerProperties",
            "vkGetDeviceProcAddr",
            "vkGetInstanceProcAddr",
            "vkNegotiateLoaderLayerInterfaceVersion",
        ]
    );
}

#[test]
fn explicit_load_makes_lavapipe_uma_strict_and_active() {
    let reference = reference_checksum();
    let w = World::new(Setup {
        explicit: true,
        ..Default::default()
    });
    let (r, stderr) = w.probe(&[]);
    let dev = lavapipe(&r);
    assert_active(dev, &stderr);
    assert_eq!(
        hook_lib(dev, "vkCmdCopyBuffer2"),
        ECHO_SO,
        "1.3 commands are hooked too"
    );
    assert!(
        stderr.contains("alias memory type 0, cached host-visible yes"),
        "{stderr}"
    );
    assert_work_ok(dev);
    assert_eq!(dev["work"]["checksum"], reference.as_str());
}

#[test]
fn implicit_load_needs_the_enable_environment() {
    let w = World::new(Setup {
        implicit: true,
        ..Default::default()
    });
    let (r, stderr) = w.probe(&[]);
    assert_eq!(
        lavapipe(&r)["in_echo"],
        0,
        "implicit echo loaded without VK_ECHO_ENABLE"
    );
    assert!(!stderr.contains("[VK_LAYER_echo]"), "{stderr}");

    let w = w.set("VK_ECHO_ENABLE", "1");
    let (r, stderr) = w.probe(&[]);
    let dev = lavapipe(&r);
    assert_active(dev, &stderr);
    assert_work_ok(dev);
}

#[test]
fn disable_environment_wins() {
    let w = World::new(Setup {
        implicit: true,
        ..Default::default()
    })
    .set("VK_ECHO_ENABLE", "1")
    .set("VK_ECHO_DISABLE", "1");
    let (r, stderr) = w.probe(&[]);
    assert_eq!(lavapipe(&r)["in_echo"], 0);
    assert!(
        !stderr.contains("[VK_LAYER_echo]"),
        "echo loaded despite VK_ECHO_DISABLE:\n{stderr}"
    );
}

/// `VK_ECHO_DISABLE=1` is "off whatever else is set", also for an explicitly enabled echo, which
/// the loader's `disable_environment` does not reach (it applies to implicit layers only): the
/// layer honours it itself, as mode off. `VK_ECHO_DISABLE=implicit` (what `vkecho run` sets to
/// keep an installed implicit copy out) leaves the explicit one acting.
#[test]
fn disable_environment_switches_an_explicit_echo_off() {
    let profiling = |disable: Option<&str>| {
        let w = World::new(Setup {
            explicit: true,
            ..Default::default()
        });
        let trace = w.dir.join("trace.jsonl");
        let mut w = w
            .set("VK_ECHO_MODE", "profile")
            .set("VK_ECHO_TRACE", trace.to_str().unwrap());
        if let Some(v) = disable {
            w = w.set("VK_ECHO_DISABLE", v);
        }
        let (r, stderr) = w.probe(&[]);
        assert_work_ok(lavapipe(&r));
        (r, stderr, trace.is_file(), w)
    };

    // Without it the explicit echo acts: it profiles into the trace.
    let (r, stderr, traced, _w) = profiling(None);
    assert_active(lavapipe(&r), &stderr);
    assert!(traced, "profile mode wrote no trace:\n{stderr}");

    // With it: loaded (by name) but off, passthrough, no trace, and it says why.
    let (r, stderr, traced, _w) = profiling(Some("1"));
    assert_inactive(lavapipe(&r), &stderr);
    assert!(stderr.contains("mode off"), "{stderr}");
    assert!(
        stderr.contains("VK_ECHO_DISABLE=1 is set: echo is off in this process"),
        "no info line saying why echo is off:\n{stderr}"
    );
    assert!(!traced, "echo traced despite VK_ECHO_DISABLE=1:\n{stderr}");

    // `implicit`: the loader keeps an implicit copy out, the explicit one acts.
    let (r, stderr, traced, _w) = profiling(Some("implicit"));
    assert_active(lavapipe(&r), &stderr);
    assert!(
        traced,
        "profile mode wrote no trace with VK_ECHO_DISABLE=implicit:\n{stderr}"
    );
}

#[test]
fn discrete_test_layer_below_makes_echo_inactive() {
    let reference = reference_checksum();
    let w = World::new(Setup {
        implicit: true,
        discrete: true,
        ..Default::default()
    })
    .set("VK_ECHO_ENABLE", "1")
    .set("VK_LOADER_DEBUG", "layer");
    let (r, stderr) = w.probe(&[]);
    // The loader put echo (implicit) above the discrete layer (explicit).
    let chain = stderr
        .split("vkCreateDevice layer callstack setup to:")
        .nth(1)
        .unwrap_or_else(|| panic!("no device call stack in the loader log:\n{stderr}"));
    let echo_at = chain
        .find("VK_LAYER_echo")
        .expect("echo in the device chain");
    let disc_at = chain
        .find("VK_LAYER_ECHO_test_discrete")
        .expect("discrete layer in the chain");
    assert!(
        echo_at < disc_at,
        "echo must sit above the discrete test layer:\n{chain}"
    );

    let dev = lavapipe(&r);
    // The application sees the lie too; echo classified what the layer below presented.
    assert_eq!(dev["device_type"], "DISCRETE_GPU");
    assert_eq!(
        dev["memory_types"],
        serde_json::json!([["DL"], ["HV", "HC"], ["HV", "HC", "HCA"]])
    );
    assert!(stderr.contains("class discrete"), "{stderr}");
    assert_inactive(dev, &stderr);
    // The discrete layer's own hook is still there, so pointers really come from below echo.
    assert_eq!(hook_lib(dev, "vkAllocateMemory"), DISCRETE_SO);
    assert_work_ok(dev);
    assert_eq!(dev["work"]["checksum"], reference.as_str());
}

#[test]
fn uma_integrated_is_active_only_with_topology_integrated() {
    let reference = reference_checksum();
    let world = || {
        World::new(Setup {
            implicit: true,
            discrete: true,
            ..Default::default()
        })
        .set("VK_ECHO_ENABLE", "1")
        .set("VK_ECHO_TEST_TABLE", "apu")
    };
    let (r, stderr) = world().probe(&[]);
    let dev = lavapipe(&r);
    assert_eq!(dev["device_type"], "INTEGRATED_GPU");
    assert!(stderr.contains("class uma-integrated"), "{stderr}");
    assert!(
        stderr.contains("topology=integrated"),
        "the reason names the setting:\n{stderr}"
    );
    assert_inactive(dev, &stderr);

    let (r, stderr) = world().set("VK_ECHO_TOPOLOGY", "integrated").probe(&[]);
    let dev = lavapipe(&r);
    assert!(
        stderr.contains("class uma-integrated") && stderr.contains("ACTIVE ("),
        "{stderr}"
    );
    assert_eq!(hook_lib(dev, "vkCreateBuffer"), ECHO_SO);
    assert_work_ok(dev);
    assert_eq!(dev["work"]["checksum"], reference.as_str());
}

#[test]
fn mode_off_makes_echo_inactive_from_every_settings_source() {
    // Environment.
    let w = World::new(Setup {
        explicit: true,
        ..Default::default()
    })
    .set("VK_ECHO_MODE", "off");
    let (r, stderr) = w.probe(&[]);
    assert_inactive(lavapipe(&r), &stderr);
    assert!(stderr.contains("mode off"), "{stderr}");
    assert_work_ok(lavapipe(&r));

    // The application's VkLayerSettingsCreateInfoEXT.
    let w = World::new(Setup {
        explicit: true,
        ..Default::default()
    });
    let (r, stderr) = w.probe(&["--app-setting", "mode=off"]);
    assert_inactive(lavapipe(&r), &stderr);

    // vk_layer_settings.txt in the working directory.
    let w = World::new(Setup {
        explicit: true,
        ..Default::default()
    });
    std::fs::write(
        w.dir.join("work/vk_layer_settings.txt"),
        "# test\necho.mode = off\n",
    )
    .unwrap();
    let (r, stderr) = w.probe(&[]);
    assert_inactive(lavapipe(&r), &stderr);

    // The environment beats the application.
    let w = World::new(Setup {
        explicit: true,
        ..Default::default()
    })
    .set("VK_ECHO_MODE", "profile");
    let (r, stderr) = w.probe(&["--app-setting", "mode=off"]);
    assert_active(lavapipe(&r), &stderr);

    // A bad value: a warning naming the setting and the accepted values, then the default.
    let w = World::new(Setup {
        explicit: true,
        ..Default::default()
    })
    .set("VK_ECHO_MODE", "fast");
    let (r, stderr) = w.probe(&[]);
    assert!(
        stderr.contains("VK_ECHO_MODE") && stderr.contains("off|profile|enforce|auto"),
        "{stderr}"
    );
    assert_active(lavapipe(&r), &stderr);
}

#[test]
fn a_panic_in_a_hook_falls_back_to_passthrough_and_the_call_succeeds() {
    let reference = reference_checksum();
    for (point, cmd) in [
        ("vkCreateBuffer", "vkCreateBuffer"),
        ("vkAllocateMemory@after", "vkAllocateMemory"),
        ("vkQueueSubmit", "vkQueueSubmit"),
    ] {
        let w = World::new(Setup {
            explicit: true,
            ..Default::default()
        })
        .set("VK_ECHO_TEST_PANIC", point)
        .set("RUST_BACKTRACE", "0");
        let (r, stderr) = w.probe(&[]);
        let dev = lavapipe(&r);
        assert_work_ok(dev);
        assert_eq!(
            dev["work"]["checksum"],
            reference.as_str(),
            "output changed after a panic in {point}"
        );
        let msg = format!("internal error in {cmd}");
        assert_eq!(
            stderr.matches(&msg).count(),
            1,
            "expected one '{msg}' line:\n{stderr}"
        );
        assert!(stderr.contains("falls back to passthrough"), "{stderr}");
    }
}

#[test]
fn vulkaninfo_reports_the_same_device_through_echo() {
    let device_part = |o: &Output| -> String {
        assert!(
            o.status.success(),
            "vulkaninfo failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        // Everything from the device groups on: the layer list above is expected to differ.
        let at = text
            .find("Device Groups:")
            .unwrap_or_else(|| panic!("unexpected vulkaninfo output:\n{text}"));
        text[at..].to_string()
    };
    let without = device_part(&World::new(Setup::default()).run("vulkaninfo", &[]));
    let w = World::new(Setup {
        explicit: true,
        ..Default::default()
    });
    let o = w.run("vulkaninfo", &[]);
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(
        stderr.contains("ACTIVE ("),
        "echo was not active under vulkaninfo:\n{stderr}"
    );
    let with = device_part(&o);
    if with != without {
        let diff: Vec<String> = without
            .lines()
            .zip(with.lines())
            .filter(|(a, b)| a != b)
            .take(10)
            .map(|(a, b)| format!("- {a}\n+ {b}"))
            .collect();
        panic!("vulkaninfo differs through echo:\n{}", diff.join("\n"));
    }
}

#[test]
fn khronos_validation_and_echo_together_report_nothing() {
    let vvl = Path::new("/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json");
    assert!(
        vvl.exists(),
        "the Khronos validation layer is not installed (apt-get install vulkan-validationlayers)"
    );
    let run = |implicit: bool| {
        let mut w = World::new(Setup {
            implicit,
            validation: true,
            ..Default::default()
        })
        .set(
            "VK_LAYER_ENABLES",
            "VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT",
        );
        if implicit {
            w = w.set("VK_ECHO_ENABLE", "1");
        }
        let out_file = w.dir.join("probe.json");
        let o = w
            .command(&artifact("echo-probe"))
            .arg("--out")
            .arg(&out_file)
            .output()
            .expect("run echo-probe");
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(
            o.status.success(),
            "echo-probe failed under validation:\n{all}"
        );
        let report: Value =
            serde_json::from_str(&std::fs::read_to_string(&out_file).unwrap()).unwrap();
        (report, all)
    };
    let (_, alone) = run(false);
    assert!(
        !alone.contains("VUID") && !alone.contains("Validation Error"),
        "the probe itself is not clean:\n{alone}"
    );
    // Positive control: validation really sits in the chain under echo and reports to this output.
    let w = World::new(Setup {
        implicit: true,
        validation: true,
        ..Default::default()
    })
    .set("VK_ECHO_ENABLE", "1");
    let o = w
        .command(&artifact("echo-probe"))
        .args(["--bytes", "0", "--out"])
        .arg(w.dir.join("p.json"))
        .output()
        .unwrap();
    let planted = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        planted.contains("VUID-VkBufferCreateInfo-size-00912"),
        "validation did not catch a planted error:\n{planted}"
    );

    let (r, both) = run(true);
    let dev = lavapipe(&r);
    assert_active(dev, &both);
    assert_work_ok(dev);
    assert!(
        !both.contains("VUID") && !both.contains("Validation Error") && !both.contains("SYNC-"),
        "validation reports with echo:\n{both}"
    );
}
