//! `vkecho selftest` (issue 46), the field kit, where it will run: from a folder holding only
//! `vkecho` and the layer library (copied into a private home, as a user unpacks them), in a
//! clean environment, time-bounded.
//!
//! - lavapipe and SwiftShader: `--quick` gives the safe verdict first, exit 0, and writes the
//!   bundle: doctor, versions, every workload's trace, plan, statistics and page, the logs; no
//!   home-directory path in any file; the user's cache untouched;
//! - the Jetson Nano's table (the test layer: Vulkan 1.2, no VK_EXT_external_memory_host):
//!   safe, exit 0, on the Jetson's device;
//! - the discrete table: echo stays out, the pass-through check holds, exit 0;
//! - planted faults, caught: an output byte flipped in enforce, a crash in profile, a hazard
//!   that is no longer one (its pair accepted), echo's self-copies forwarded (invalid usage the
//!   validation layer reports) — each an "unsafe" verdict, exit 1; no layer library beside
//!   vkecho — exit 2.
//!
//! The package test (`tests/scripts/deb-install.sh`, run by tests/tests/cross.rs) runs it from
//! the installed .deb.

use echo_tests::drivers::Driver;
use echo_tests::world::{run_within, Layers, World};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(900);

/// The release build's `name`: what users run (the packages hold release builds). (The
/// selftest also caught a defect of debug builds before main's 351e256: profiling `suballoc`
/// died with SIGSEGV, the unoptimized page-protection handler overflowing the 8 KiB alternate
/// signal stack Rust gives its threads.)
fn release(name: &str) -> PathBuf {
    let p = echo_tests::world::target_dir()
        .parent()
        .unwrap()
        .join("release")
        .join(name);
    assert!(
        p.is_file(),
        "{} is missing: `cargo build --release -p vk-layer-echo -p echo-cli` (scripts/test.sh runs it)",
        p.display()
    );
    p
}

/// A folder in the world's home holding only vkecho and the layer library.
fn kit(w: &World, with_layer: bool) -> PathBuf {
    let dir = w.dir.join("home/Downloads/vk-echo-kit");
    std::fs::create_dir_all(&dir).unwrap();
    let mut names = vec!["vkecho"];
    if with_layer {
        names.push("libVkLayer_echo.so");
    }
    for name in names {
        std::fs::copy(release(name), dir.join(name)).unwrap();
    }
    dir
}

struct Outcome {
    code: i32,
    stdout: String,
    stderr: String,
    /// The unpacked bundle's root (None: no bundle written).
    bundle: Option<PathBuf>,
    /// selftest.json from it.
    json: Value,
}

/// `vkecho selftest ARGS --out OUT` from the kit, in `w`.
fn selftest(w: &World, with_layer: bool, args: &[&str]) -> Outcome {
    let kit = kit(w, with_layer);
    let out = w.dir.join("out");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).unwrap();
    let mut all = vec!["selftest", "--out", out.to_str().unwrap()];
    all.extend_from_slice(args);
    let r = run_within(w.command(&kit.join("vkecho"), &all), LIMIT);
    let code = r.status.code().unwrap_or(-1);
    let bundles: Vec<PathBuf> = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".tar.gz"))
        .collect();
    assert!(bundles.len() <= 1, "{bundles:?}");
    let bundle = bundles.first().map(|b| {
        let name = b.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with("selftest-"), "{name}");
        let st = std::process::Command::new("tar")
            .arg("-C")
            .arg(&out)
            .arg("-xzf")
            .arg(b)
            .status()
            .unwrap();
        assert!(st.success(), "tar -xzf {name}");
        out.join(name.trim_end_matches(".tar.gz"))
    });
    let json = bundle
        .as_ref()
        .and_then(|b| std::fs::read_to_string(b.join("selftest.json")).ok())
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap_or(Value::Null);
    Outcome {
        code,
        stdout: r.stdout,
        stderr: r.stderr,
        bundle,
        json,
    }
}

impl Outcome {
    fn what(&self) -> String {
        format!(
            "exit {}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
    fn verdict(&self) -> &str {
        self.stdout.lines().next().unwrap_or("")
    }
}

/// Every file of the bundle, and none holds `home` (nor any /home/ path).
fn check_no_home(bundle: &Path, home: &Path) -> Vec<PathBuf> {
    let files = echo_tests::world::files_under(bundle);
    let home = home.display().to_string();
    for f in &files {
        let text = String::from_utf8_lossy(&std::fs::read(f).unwrap()).into_owned();
        assert!(
            !text.contains(&home) && !text.contains("/home/"),
            "{} holds a home-directory path",
            f.display()
        );
    }
    files
}

/// The safe verdict with everything the bundle must hold, on the driver `d`.
fn safe_on(d: Driver) {
    let w = d.select(World::new(Layers::default()));
    let o = selftest(&w, true, &["--quick"]);
    let what = o.what();
    assert_eq!(o.code, 0, "{what}");
    assert!(o.verdict().starts_with("echo is safe on "), "{what}");
    assert!(
        o.verdict().contains("2/2 refusals as they must be"),
        "{what}"
    );
    let j = &o.json;
    assert_eq!(j["exit_status"], 0, "{what}");
    let dev = &j["devices"][0];
    assert_eq!(dev["active"], true, "{what}");
    let names: Vec<&str> = dev["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["upload", "suballoc", "graphics", "race", "early-read"],
        "{what}"
    );
    for wl in dev["workloads"].as_array().unwrap() {
        let name = wl["name"].as_str().unwrap();
        // Every run with echo was compared and identical.
        let runs = wl["runs"].as_array().unwrap();
        let with_echo: Vec<&Value> = runs
            .iter()
            .filter(|r| ["profile", "enforce", "auto"].contains(&r["mode"].as_str().unwrap()))
            .collect();
        assert!(with_echo.len() >= 4, "{name}: {wl}");
        assert!(
            with_echo.iter().all(|r| r["identical"] == true),
            "{name}: {wl}"
        );
        let accepted = wl["pairs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["decision"] == "accepted")
            .count();
        match name {
            "race" | "early-read" => {
                assert_eq!(wl["refusals_as_they_must"], 1, "{name}: {wl}");
            }
            _ => {
                // Clean: pairs accepted, every group applied, timed, memory not made.
                assert!(accepted >= 3, "{name}: {wl}");
                assert!(wl["groups_planned"].as_u64().unwrap() >= 1, "{name}: {wl}");
                assert_eq!(wl["groups_applied"], wl["groups_planned"], "{name}: {wl}");
                assert!(
                    wl["memory_not_allocated"].as_u64().unwrap() > 0,
                    "{name}: {wl}"
                );
                let t = &wl["timing"];
                assert_eq!(t["staging_ms"].as_array().unwrap().len(), 3, "{name}: {wl}");
                assert_eq!(
                    t["zero_copy_ms"].as_array().unwrap().len(),
                    3,
                    "{name}: {wl}"
                );
            }
        }
        if dev["validation_layer"] == true {
            let v = &wl["validation"];
            assert!(v["runs"].as_u64().unwrap() >= 3, "{name}: {wl}");
            assert!(v["new"].as_array().unwrap().is_empty(), "{name}: {wl}");
        }
    }
    // The bundle: what it must hold, and no home path.
    let b = o.bundle.as_ref().expect("a bundle");
    let files = check_no_home(b, &w.dir.join("home"));
    let rel: Vec<String> = files
        .iter()
        .map(|f| f.strip_prefix(b).unwrap().display().to_string())
        .collect();
    for want in [
        "README.txt",
        "verdict.txt",
        "selftest.json",
        "doctor.json",
        "versions.json",
        "device-0/upload/profile.trace.jsonl",
        "device-0/upload/plan.json",
        "device-0/upload/analyze.txt",
        "device-0/upload/show.html",
        "device-0/upload/enforce.stats.jsonl",
        "device-0/upload/auto2.stats.jsonl",
        "device-0/graphics/show.html",
        "device-0/race/plan.json",
        "device-0/early-read/logs/profile.log",
    ] {
        assert!(rel.iter().any(|r| r == want), "{want} not in {rel:?}");
    }
    assert!(!rel.iter().any(|r| r.ends_with(".out")), "outputs stay out");
    let verdict = std::fs::read_to_string(b.join("verdict.txt")).unwrap();
    assert_eq!(verdict.lines().next(), Some(o.verdict()));
    let versions: Value =
        serde_json::from_str(&std::fs::read_to_string(b.join("versions.json")).unwrap()).unwrap();
    for k in ["echo", "loader", "drivers", "kernel"] {
        assert!(
            !versions[k].is_null(),
            "versions.json lacks {k}: {versions}"
        );
    }
    // The user's own cache was not touched.
    assert!(
        !w.dir.join("cache/vk-echo").exists(),
        "the selftest wrote into the user's cache"
    );
}

#[test]
fn quick_from_a_bare_folder_is_safe_on_lavapipe() {
    safe_on(Driver::Lavapipe);
}

#[test]
fn quick_from_a_bare_folder_is_safe_on_swiftshader() {
    safe_on(Driver::SwiftShader);
}

/// The Jetson Nano's table below echo (Vulkan 1.2, no VK_EXT_external_memory_host): the
/// selftest tests the Jetson's device, and echo is safe there.
#[test]
fn under_the_jetson_table_it_tests_the_jetson() {
    let w = World::new(Layers {
        test_layer: true,
        ..Default::default()
    })
    .set("VK_ECHO_TEST_TABLE", "jetson-nano");
    let o = selftest(&w, true, &["--quick"]);
    let what = o.what();
    assert_eq!(o.code, 0, "{what}");
    assert!(
        o.verdict()
            .starts_with("echo is safe on NVIDIA Jetson Nano"),
        "{what}"
    );
    let dev = &o.json["devices"][0];
    assert_eq!(dev["class"], "uma-strict", "{what}");
    assert_eq!(
        dev["api_version"].as_str().map(|v| &v[..4]),
        Some("1.2."),
        "{what}"
    );
    let b = o.bundle.as_ref().unwrap();
    assert!(
        b.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("selftest-nvidia-jetson-nano-"),
        "{}",
        b.display()
    );
    // Profile validated through the application's own mapping (no external_memory_host).
    let log = std::fs::read_to_string(b.join("device-0/upload/logs/profile.log")).unwrap();
    assert!(
        !log.contains("double-mapped (VK_EXT_external_memory_host)"),
        "{log}"
    );
}

/// A discrete GPU: echo stays out, and with it enabled the output is the same.
#[test]
fn on_the_discrete_table_echo_stays_out() {
    let w = World::new(Layers {
        test_layer: true,
        ..Default::default()
    });
    let o = selftest(&w, true, &["--quick"]);
    let what = o.what();
    assert_eq!(o.code, 0, "{what}");
    assert!(
        o.verdict().starts_with("echo stays out on this machine:"),
        "{what}"
    );
    assert!(o.verdict().contains("is discrete"), "{what}");
    assert!(
        o.stdout.contains("passes every call through"),
        "the pass-through check: {what}"
    );
    assert!(o.bundle.is_some(), "{what}");
}

/// Planted faults, one run: an output byte flipped in upload's enforce run, graphics aborted in
/// profile, race without its race (its pair accepted): each is named, exit 1.
#[test]
fn planted_faults_are_caught() {
    let w = World::new(Layers::default()).set(
        "VKECHO_SELFTEST_PLANT",
        "differ:upload:enforce,crash:graphics:profile,no-race",
    );
    let o = selftest(
        &w,
        true,
        &["--quick", "--workloads", "upload,graphics,race"],
    );
    let what = o.what();
    assert_eq!(o.code, 1, "{what}");
    assert!(
        o.verdict()
            .starts_with("do not enable echo here: upload differs in enforce (enforce): first difference at byte 17 of iteration 5"),
        "{what}"
    );
    assert!(o.stdout.contains("graphics crashed in profile"), "{what}");
    assert!(
        o.stdout.contains("race: echo accepted its upload pair"),
        "{what}"
    );
    assert_eq!(o.json["exit_status"], 1, "{what}");
}

/// Echo's dropped self-copies forwarded to the driver (`VK_ECHO_TEST_KEEP_SELF_COPIES`: copies
/// whose source and destination overlap, invalid usage): the output stays the same, so only
/// the validation layer can see it — and the selftest says so.
#[test]
fn invalid_calls_are_caught_by_the_validation_layer() {
    let w = World::new(Layers::default()).set("VK_ECHO_TEST_KEEP_SELF_COPIES", "1");
    let o = selftest(&w, true, &["--quick", "--workloads", "upload"]);
    let what = o.what();
    assert_eq!(o.json["devices"][0]["validation_layer"], true, "{what}");
    assert_eq!(o.code, 1, "{what}");
    assert!(
        o.verdict()
            .starts_with("do not enable echo here: upload: the validation layer reports"),
        "{what}"
    );
    assert!(o.verdict().contains("in validation-enforce"), "{what}");
}

/// Without the layer library beside it, the selftest cannot run: exit 2, and says why.
#[test]
fn without_the_layer_it_cannot_run() {
    let w = World::new(Layers::default());
    let o = selftest(&w, false, &["--quick"]);
    let what = o.what();
    assert_eq!(o.code, 2, "{what}");
    assert!(
        o.verdict().starts_with(
            "vkecho selftest could not judge echo here: the layer library is not next to vkecho"
        ),
        "{what}"
    );
}
