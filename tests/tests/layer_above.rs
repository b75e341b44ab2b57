//! A layer ABOVE echo (issue 23): `VK_LAYER_ECHO_test_above` (tests/c/layers/test_above.c, built
//! by tests/build.rs) makes the lookups capture layers make through its link's
//! `pfnNextGetInstanceProcAddr` with a NULL instance — RenderDoc's `vkCreateDevice` lookup, then a
//! call through the result, and a few device-level commands — and prints one line per NULL
//! answer. It is installed as an implicit layer under `$XDG_CONFIG_HOME`, which the loader
//! searches before `$XDG_DATA_HOME` where echo's manifest is, so it sits above echo (checked: the
//! loader's "layer callstack" log lists it first, from the application down). Every mode, `off` included, must run the program to
//! the same output with the test layer's "ok" line and no NULL answer.

use echo_tests::world::{artifact, program, run_within, Layers, World};
use std::path::{Path, PathBuf};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(30);
const TAG: &str = "[VK_LAYER_ECHO_test_above]";

fn out_dir() -> &'static Path {
    Path::new(env!("OUT_DIR"))
}

fn above_manifest() -> String {
    serde_json::json!({
        "file_format_version": "1.2.0",
        "layer": {
            "name": "VK_LAYER_ECHO_test_above",
            "type": "GLOBAL",
            "library_path": out_dir().join("libVkLayer_echo_test_above.so").display().to_string(),
            "api_version": "1.3.239",
            "implementation_version": "1",
            "description": "test only: a layer above echo making RenderDoc's lookups",
            "enable_environment": { "ECHO_TEST_ABOVE": "1" },
            "disable_environment": { "ECHO_TEST_ABOVE_DISABLE": "1" }
        }
    })
    .to_string()
}

/// A world with echo in `mode` (None: not installed) and the test layer above it.
fn world(mode: Option<&'static str>) -> World {
    let w = World::echo(mode);
    let d = w.dir.join("config/vulkan/implicit_layer.d");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("VkLayer_ECHO_test_above.json"), above_manifest()).unwrap();
    w.set("ECHO_TEST_ABOVE", "1")
}

#[test]
fn null_instance_lookups_from_a_layer_above() {
    let _ = artifact("libVkLayer_echo.so");
    let baseline = run_within(
        World::new(Layers::default()).command(&program("c_deferred_ref"), &["early", "2"]),
        LIMIT,
    );
    assert!(baseline.status.success(), "{}", baseline.stderr);
    for mode in ["off", "profile", "enforce", "auto"] {
        let w = world(Some(mode)).set(
            "VK_ECHO_TRACE",
            w_path(mode, "trace.jsonl").display().to_string(),
        );
        let run = run_within(
            w.command(&program("c_deferred_ref"), &["early", "2"]),
            LIMIT,
        );
        let label = format!("c_deferred_ref under the test layer above echo (mode {mode})");
        let nulls: Vec<&str> = run
            .stderr
            .lines()
            .filter(|l| l.starts_with(TAG) && l.contains("returned NULL"))
            .collect();
        assert!(
            nulls.is_empty() && run.status.success(),
            "{label}: {} ({}):\n{}",
            if nulls.is_empty() {
                "failed"
            } else {
                "NULL answers"
            },
            run.status,
            run.stderr
        );
        assert!(
            run.stderr.contains(&format!(
                "{TAG} vkCreateDevice through vkGetInstanceProcAddr(NULL): ok"
            )),
            "{label}: the test layer did not create the device (is it loaded?):\n{}",
            run.stderr
        );
        assert_eq!(run.stdout, baseline.stdout, "{label}:\n{}", run.stderr);
    }
}

/// The test layer really is above echo: the loader's layer log lists the chain it builds, from
/// the application down, and the test layer comes before echo.
#[test]
fn the_test_layer_is_above_echo() {
    let w = world(Some("off")).set("VK_LOADER_DEBUG", "layer");
    let run = run_within(
        w.command(&program("c_deferred_ref"), &["early", "1"]),
        LIMIT,
    );
    assert!(run.status.success(), "{}", run.stderr);
    let all = format!("{}{}", run.stdout, run.stderr);
    // "vkCreateInstance layer callstack setup to: <Application> || <Loader> || LAYER || ..."
    let log = all
        .find("vkCreateInstance layer callstack setup to:")
        .map_or("", |i| &all[i..]);
    let above = log.find("VK_LAYER_ECHO_test_above");
    let echo = log.find("VK_LAYER_echo\n");
    assert!(
        matches!((above, echo), (Some(a), Some(e)) if a < e),
        "want the test layer listed before echo in the loader's layer log:\n{log}"
    );
}

fn w_path(mode: &str, name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("echo-above-{}-{mode}-{name}", std::process::id()))
}

/// The real thing (Debian package `librenderdoc` 1.24, installed by scripts/deps.sh; the test
/// fails where it is missing): RenderDoc's capture layer,
/// enabled with `ENABLE_VULKAN_RENDERDOC_CAPTURE=1`, above echo — echo's manifest moved to a data
/// directory searched after `/usr/share`, where RenderDoc's is. Before issue 23 every mode died
/// with SIGSEGV in `vkCreateDevice` (RenderDoc calling the NULL echo answered); then, in profile
/// mode, in RenderDoc's own `vkCreateImage` (echo's image-format query resolved after instance
/// creation reached RenderDoc's unfilled entry). Every mode must give the baseline's output.
#[test]
fn renderdoc_capture_layer_above_echo() {
    let manifest = Path::new("/usr/share/vulkan/implicit_layer.d/renderdoc_capture.json");
    assert!(
        manifest.exists(),
        "RenderDoc's capture layer is not installed: run scripts/deps.sh (apt-get install librenderdoc)"
    );
    let prog = program("c_image_in_block");
    let baseline = run_within(
        World::new(Layers::default()).command(&prog, &["slab", "2"]),
        LIMIT,
    );
    assert!(baseline.status.success(), "{}", baseline.stderr);
    for mode in ["off", "profile", "enforce", "auto"] {
        let w = World::echo(Some(mode));
        let late = w.dir.join("late/vulkan/implicit_layer.d");
        std::fs::create_dir_all(&late).unwrap();
        std::fs::rename(
            w.dir.join("data/vulkan/implicit_layer.d/VkLayer_echo.json"),
            late.join("VkLayer_echo.json"),
        )
        .unwrap();
        let dirs = format!(
            "/usr/local/share:/usr/share:{}",
            w.dir.join("late").display()
        );
        let w = w
            .set("XDG_DATA_DIRS", dirs)
            .set("ENABLE_VULKAN_RENDERDOC_CAPTURE", "1")
            .set("VK_LOADER_DEBUG", "layer");
        let run = run_within(w.command(&prog, &["slab", "2"]), LIMIT);
        let label = format!("c_image_in_block under RenderDoc above echo (mode {mode})");
        assert!(
            run.status.success(),
            "{label}: {}:\n{}",
            run.status,
            run.stderr
        );
        let all = format!("{}{}", run.stdout, run.stderr);
        let chain = all
            .find("vkCreateInstance layer callstack setup to:")
            .map_or("", |i| &all[i..]);
        let (rd, echo) = (
            chain.find("VK_LAYER_RENDERDOC_Capture"),
            chain.find("VK_LAYER_echo\n"),
        );
        assert!(
            matches!((rd, echo), (Some(a), Some(e)) if a < e),
            "{label}: want RenderDoc above echo in the loader's chain:\n{chain}"
        );
        let checksum = |s: &str| {
            s.lines()
                .find(|l| l.starts_with("checksum"))
                .map(str::to_string)
        };
        assert_eq!(
            checksum(&run.stdout),
            checksum(&baseline.stdout),
            "{label}:\n{}",
            run.stderr
        );
    }
}
