//! The Jetson's software (issue 13): the aarch64 build with the glibc 2.27 floor, run under
//! qemu-user on arm64 lavapipe, and the packages. Everything here needs what
//! `scripts/cross.sh --qemu` installs and builds (scripts/test.sh runs it first); a missing piece
//! fails the test with the command that provides it, it never skips.
//!
//! - glibc floor: no `GLIBC_2.28`+ version needed by the aarch64 and x86_64 cross builds (layer,
//!   vkecho, samples) nor by the packaged copies; the check finds the `GLIBC_2.34` of a native
//!   bookworm build (a planted newer symbol);
//! - the aarch64 layer exports the seven entry points, is `-Bsymbolic` and `NODELETE`;
//! - the layer's unit tests, cross-built, pass under qemu — among them the page-protection
//!   guard's read/write classification with real aarch64 instructions (the line it prints says
//!   whether the signal frame's ESR or the instruction decoder classified them);
//! - end to end under qemu with arm64 lavapipe: baseline, profile, `vkecho analyze` (aarch64),
//!   enforce — identical checksums, groups applied, host reads and writes recorded; also below
//!   the test layer's Jetson Nano table (Vulkan 1.2, no VK_EXT_external_memory_host: validation
//!   through the application's own mapping). Short by default (saxpy, 256 KiB);
//!   `ECHO_QEMU_FULL=1` runs every sample (`scripts/qemu-e2e.sh`);
//! - packages: each .deb installed (in a private mount namespace with overlays: the machine is not
//!   changed), `vkecho doctor` finds the layer, auto mode profiles then enforces, `vkecho
//!   selftest` gives the safe verdict and writes its bundle (issue 46; under qemu its children
//!   start through the runner), removal leaves nothing (and a planted leftover is caught); each tarball unpacked into a prefix works and
//!   goes away with the files it lists.

use echo_analyzer::plan::parse_plan;
use echo_analyzer::stats::Stats;
use echo_analyzer::trace::{read_trace, Access, Event, Trace};
use echo_tests::samples::{run_command, SampleRun, ALL, NEGATIVE};
use echo_tests::world::{files_under, private_env, repo_root, scratch, target_dir};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const AARCH64: &str = "aarch64-unknown-linux-gnu";
const X86_64: &str = "x86_64-unknown-linux-gnu";
const HOW: &str = "run scripts/cross.sh --qemu (scripts/test.sh does)";

/// `target/<rust target>/release/<name>` of the cross build; fails when it was not built.
fn cross(rust_target: &str, name: &str) -> PathBuf {
    let p = target_dir()
        .parent()
        .unwrap()
        .join(rust_target)
        .join("release")
        .join(name);
    assert!(p.is_file(), "{} is missing: {HOW}", p.display());
    p
}

fn dist(name: &str) -> PathBuf {
    let p = target_dir().parent().unwrap().join("cross/dist").join(name);
    assert!(p.is_file(), "{} is missing: {HOW}", p.display());
    p
}

fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

fn qemu() -> PathBuf {
    let p = PathBuf::from("/usr/bin/qemu-aarch64-static");
    assert!(p.is_file(), "qemu-aarch64-static is missing: {HOW}");
    for f in [
        "/usr/share/vulkan/icd.d/lvp_icd.aarch64.json",
        "/usr/lib/aarch64-linux-gnu/libvulkan.so.1",
    ] {
        assert!(
            Path::new(f).exists(),
            "{f} is missing (arm64 lavapipe): {HOW}"
        );
    }
    p
}

fn readelf(args: &[&str], file: &Path) -> String {
    let out = Command::new("readelf")
        .args(args)
        .arg(file)
        .output()
        .expect("readelf (binutils; scripts/deps.sh installs it)");
    assert!(out.status.success(), "readelf {args:?} {}", file.display());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

// ------------------------------------------------------------------ glibc floor

/// The `GLIBC_x.y` versions `file` needs (its version-needs section), highest last.
fn glibc_versions(file: &Path) -> Vec<(u32, u32)> {
    let text = readelf(&["-V", "-W"], file);
    let mut v: Vec<(u32, u32)> = text
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("GLIBC_"))
        .filter_map(|s| {
            let mut it = s.split('.');
            Some((
                it.next()?.parse().ok()?,
                it.next().unwrap_or("0").parse().ok()?,
            ))
        })
        .collect();
    v.sort();
    v.dedup();
    v
}

/// What `file` needs above glibc 2.27, as "GLIBC_x.y" (empty: the floor holds).
fn above_floor(file: &Path) -> Vec<String> {
    glibc_versions(file)
        .into_iter()
        .filter(|&(a, b)| (a, b) > (2, 27))
        .map(|(a, b)| format!("GLIBC_{a}.{b}"))
        .collect()
}

fn machine(file: &Path) -> String {
    readelf(&["-h"], file)
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("Machine:")
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_default()
}

#[test]
fn glibc_floor_holds_for_the_cross_builds_and_the_packages() {
    let mut checked = Vec::new();
    for (t, arch, names) in [
        (
            AARCH64,
            "AArch64",
            &["libVkLayer_echo.so", "vkecho", "echo-samples"][..],
        ),
        (
            X86_64,
            "Advanced Micro Devices X86-64",
            &["libVkLayer_echo.so", "vkecho"][..],
        ),
    ] {
        for n in names {
            let f = cross(t, n);
            assert_eq!(machine(&f), arch, "{}", f.display());
            let v = glibc_versions(&f);
            assert!(
                !v.is_empty(),
                "{} needs no glibc version at all?",
                f.display()
            );
            let bad = above_floor(&f);
            assert!(
                bad.is_empty(),
                "{} needs {bad:?}: newer than the Jetson's glibc 2.27",
                f.display()
            );
            checked.push(format!(
                "{t}/{n}: up to GLIBC_{}.{}",
                v.last().unwrap().0,
                v.last().unwrap().1
            ));
        }
    }
    // The packaged (stripped) copies.
    let dir = scratch("floor");
    for arch in ["arm64", "amd64"] {
        let deb = dist(&format!("vk-layer-echo_{}_{arch}.deb", version()));
        let into = dir.join(arch);
        let st = Command::new("dpkg-deb")
            .arg("-x")
            .arg(&deb)
            .arg(&into)
            .status()
            .unwrap();
        assert!(st.success());
        let files: Vec<PathBuf> = files_under(&into)
            .into_iter()
            .filter(|p| p.ends_with("libVkLayer_echo.so") || p.ends_with("vkecho"))
            .collect();
        assert_eq!(files.len(), 2, "{files:?}");
        for f in files {
            assert!(
                above_floor(&f).is_empty(),
                "{}: {:?}",
                f.display(),
                above_floor(&f)
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!("glibc floor 2.27 holds:\n  {}", checked.join("\n  "));
}

/// The check has teeth: this workspace's own native build (linked on Debian 12, glibc 2.36)
/// needs GLIBC_2.34 (`__libc_start_main`, the pthread symbols), and the check says so.
#[test]
fn glibc_floor_check_finds_a_newer_symbol() {
    for f in [
        target_dir().join("vkecho"),
        target_dir().join("libVkLayer_echo.so"),
    ] {
        assert!(
            f.is_file(),
            "{} is missing: cargo build --workspace",
            f.display()
        );
        let bad = above_floor(&f);
        assert!(
            bad.iter().any(|v| v == "GLIBC_2.34"),
            "{}: the check missed the GLIBC_2.34 of a bookworm build: {bad:?}",
            f.display()
        );
    }
}

// ------------------------------------------------------------------ the aarch64 library

#[test]
fn aarch64_layer_exports_its_entry_points_and_binds_them_internally() {
    let lib = cross(AARCH64, "libVkLayer_echo.so");
    let mut exported: Vec<String> = readelf(&["--dyn-syms", "-W"], &lib)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 8 && f[0].ends_with(':') && f[6] != "UND" && f[4] == "GLOBAL")
                .then(|| f[7].split('@').next().unwrap().to_string())
        })
        .collect();
    exported.sort();
    assert_eq!(
        exported,
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
    let relocs = readelf(&["-rW"], &lib);
    let bad: Vec<&str> = relocs
        .lines()
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() >= 5
                && (f[2].ends_with("GLOB_DAT")
                    || f[2].ends_with("JUMP_SLOT")
                    || f[2].ends_with("ABS64"))
                && exported
                    .iter()
                    .any(|n| f[4].split('@').next() == Some(n.as_str()))
        })
        .collect();
    assert!(
        bad.is_empty(),
        "interposable relocations against own exports:\n{}",
        bad.join("\n")
    );
    let dynamic = readelf(&["-dW"], &lib);
    assert!(
        dynamic.contains("SYMBOLIC") && dynamic.contains("NODELETE"),
        "{dynamic}"
    );
}

// ------------------------------------------------------------------ under qemu

fn runner() -> String {
    format!("{} -L /", qemu().display())
}

/// The layer's unit tests, cross-built, under qemu: the guard's read/write classification with
/// real aarch64 instructions among them.
#[test]
fn aarch64_layer_unit_tests_pass_under_qemu() {
    let bin = cross(AARCH64, "vk-layer-echo-unit-tests");
    let t0 = Instant::now();
    let out = Command::new(qemu())
        .args(["-L", "/"])
        .arg(&bin)
        .arg("--nocapture")
        .env("ECHO_TEST_RUNNER", runner())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "aarch64 unit tests failed under qemu:\n{text}"
    );
    let result = text
        .lines()
        .find(|l| l.starts_with("test result:"))
        .unwrap_or_default();
    let path = text
        .lines()
        .find(|l| l.starts_with("PATH aarch64 guard:"))
        .unwrap_or_else(|| panic!("the aarch64 guard test did not run:\n{text}"));
    eprintln!(
        "{result} ({:.1} s under qemu)\n{path}",
        t0.elapsed().as_secs_f64()
    );
    assert!(path.contains("unknown: 0"), "{path}");
    assert!(text.contains("a64_decoder_classifies_assembled_instructions ... ok"));
}

/// A private environment to run aarch64 programs under qemu with arm64 lavapipe, echo implicit
/// and enabled (its manifest names the aarch64 library), optionally the test layer below it.
struct Arm {
    dir: PathBuf,
    env: Vec<(String, String)>,
}

impl Arm {
    fn new(name: &str, jetson: bool) -> Arm {
        let dir = scratch(name);
        for d in ["home", "data", "config", "cache", "layers"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        let mut env = private_env(&dir);
        env.retain(|(k, _)| {
            k != "VK_ICD_FILENAMES" && k != "VK_DRIVER_FILES" && k != "LD_LIBRARY_PATH"
        });
        env.push((
            "VK_DRIVER_FILES".into(),
            "/usr/share/vulkan/icd.d/lvp_icd.aarch64.json".into(),
        ));
        let text = std::fs::read_to_string(repo_root().join("manifest/VkLayer_echo.json")).unwrap();
        let mut m: serde_json::Value = serde_json::from_str(&text).unwrap();
        m["layer"]["library_path"] = cross(AARCH64, "libVkLayer_echo.so")
            .display()
            .to_string()
            .into();
        // Implicit (closest to the application), as installed; the test layer is explicit, so
        // the loader puts it below echo.
        let implicit = dir.join("data/vulkan/implicit_layer.d");
        std::fs::create_dir_all(&implicit).unwrap();
        std::fs::write(implicit.join("VkLayer_echo.json"), m.to_string()).unwrap();
        env.push(("VK_ECHO_ENABLE".into(), "1".into()));
        if jetson {
            let t = serde_json::json!({
                "file_format_version": "1.2.0",
                "layer": {
                    "name": "VK_LAYER_ECHO_test_discrete",
                    "type": "GLOBAL",
                    "library_path": cross(AARCH64, "libVkLayer_echo_test_discrete.so").display().to_string(),
                    "api_version": "1.3.239",
                    "implementation_version": "1",
                    "description": "test only"
                }
            });
            std::fs::write(
                dir.join("layers/VkLayer_ECHO_test_discrete.json"),
                t.to_string(),
            )
            .unwrap();
            env.push(("VK_ECHO_TEST_TABLE".into(), "jetson-nano".into()));
            env.push((
                "VK_ADD_LAYER_PATH".into(),
                dir.join("layers").display().to_string(),
            ));
            env.push((
                "VK_INSTANCE_LAYERS".into(),
                "VK_LAYER_ECHO_test_discrete".into(),
            ));
        }
        env.push(("VK_ECHO_LOG".into(), "info".into()));
        env.push(("VK_ECHO_MIN_BYTES".into(), "4096".into()));
        Arm { dir, env }
    }

    /// `qemu-aarch64-static -L / PROGRAM ARGS` in this environment plus `extra`.
    fn run(&self, program: &Path, args: &[&str], extra: &[(&str, String)]) -> SampleRun {
        let mut c = Command::new(qemu());
        c.env_clear().args(["-L", "/"]).arg(program).args(args);
        for (k, v) in &self.env {
            c.env(k, v);
        }
        for (k, v) in extra {
            c.env(k, v);
        }
        c.current_dir(&self.dir);
        run_command(c)
    }
}

impl Drop for Arm {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn host_accesses(t: &Trace) -> (usize, usize) {
    let mut rw = (0, 0);
    for r in &t.records {
        if let Event::HostAccess { access, .. } = &r.event {
            match access {
                Access::Read => rw.0 += 1,
                Access::Write => rw.1 += 1,
                Access::ReadWrite => {
                    rw.0 += 1;
                    rw.1 += 1
                }
            }
        }
    }
    rw
}

fn validation_of(t: &Trace) -> String {
    t.records
        .iter()
        .find_map(|r| match &r.event {
            Event::DeviceCreate { validation, .. } => Some(validation.clone()),
            _ => None,
        })
        .expect("device_create")
}

/// The controlled condition of a negative sample (tests/tests/enforce.rs).
fn refused_with(sample: &str) -> Option<&'static str> {
    match sample {
        "race" => Some("S2"),
        "stale" => Some("S1"),
        "reuse" => Some("reuse"),
        "bda" => Some("S3"),
        _ => None,
    }
}

/// Baseline, profile, analyze (the aarch64 vkecho), enforce, all under qemu. Returns a line.
fn flow(sample: &str, size_kib: &str, iters: &str, jetson: bool) -> String {
    let t0 = Instant::now();
    let a = Arm::new(
        &format!("{sample}-{}", if jetson { "jetson" } else { "lvp" }),
        jetson,
    );
    let samples = cross(AARCH64, "echo-samples");
    let args = [sample, "--size-kib", size_kib, "--iters", iters];
    let what = format!(
        "{sample} ({})",
        if jetson {
            "Jetson Nano table"
        } else {
            "arm64 lavapipe"
        }
    );

    let base = a.run(&samples, &args, &[("VK_ECHO_MODE", "off".into())]);
    let sum = base.checksum();

    let trace = a.dir.join("trace.jsonl");
    let prof = a.run(
        &samples,
        &args,
        &[
            ("VK_ECHO_MODE", "profile".into()),
            ("VK_ECHO_TRACE", trace.display().to_string()),
        ],
    );
    assert_eq!(
        prof.checksum(),
        sum,
        "{what}: profile changed the output\n{}",
        prof.stderr
    );
    assert!(
        prof.stderr.contains("ACTIVE"),
        "{what}: echo is not active\n{}",
        prof.stderr
    );
    let guard_line = prof
        .stderr
        .lines()
        .find(|l| l.contains("host-access validation:") && l.contains("faults"))
        .unwrap_or_else(|| panic!("{what}: no guard line\n{}", prof.stderr))
        .to_string();
    assert!(
        guard_line.contains("unknown (taken as writes): 0"),
        "{what}: {guard_line}"
    );
    let t: Trace = read_trace(std::io::BufReader::new(
        std::fs::File::open(&trace).unwrap(),
    ))
    .unwrap();
    let validation = validation_of(&t);
    assert_eq!(
        validation,
        if jetson { "driver-map" } else { "double-map" },
        "{what}"
    );
    let (reads, writes) = host_accesses(&t);
    assert!(writes > 0, "{what}: no host write recorded");

    let plan = a.dir.join("plan.json");
    let an = a.run(
        &cross(AARCH64, "vkecho"),
        &[
            "analyze",
            &trace.display().to_string(),
            "-o",
            &plan.display().to_string(),
        ],
        &[],
    );
    assert!(
        an.status.success(),
        "{what}: vkecho analyze\n{}{}",
        an.stdout,
        an.stderr
    );
    let p = parse_plan(&std::fs::read_to_string(&plan).unwrap()).unwrap();

    let stats = a.dir.join("stats.jsonl");
    let enf = a.run(
        &samples,
        &args,
        &[
            ("VK_ECHO_MODE", "enforce".into()),
            ("VK_ECHO_PLAN", plan.display().to_string()),
            ("VK_ECHO_STATS", stats.display().to_string()),
        ],
    );
    assert_eq!(
        enf.checksum(),
        sum,
        "{what}: enforce changed the output\n{}",
        enf.stderr
    );
    let s: Stats = serde_json::from_str(
        std::fs::read_to_string(&stats)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(s.plan_status, "applied", "{what}");
    assert_eq!(
        s.groups_applied, s.groups_planned,
        "{what}: {:?}",
        s.not_applied
    );
    match refused_with(sample) {
        Some(cond) => assert!(
            p.rejected.iter().any(|r| r.condition.as_str() == cond),
            "{what}: the controlled pair is refused with {cond}: {:?}",
            p.rejected
        ),
        None => {
            assert!(!p.groups.is_empty(), "{what}: no group planned");
            assert!(s.copies_elided > 0, "{what}: {s:?}");
        }
    }
    format!(
        "{what}: checksum {sum} ×3, validation {validation}, host reads {reads} writes {writes}, {} groups applied, {} bytes elided, {:.1} s",
        s.groups_applied,
        s.bytes_elided,
        t0.elapsed().as_secs_f64()
    ) + &format!("\n    {}", guard_line.trim_start_matches("[VK_LAYER_echo] info: profile: "))
}

/// Short by default (one sample, small); `ECHO_QEMU_FULL=1`: every sample, larger
/// (`ECHO_QEMU_SIZE_KIB`, default 1024), on arm64 lavapipe and below the Jetson table.
#[test]
fn aarch64_profile_analyze_enforce_under_qemu() {
    qemu();
    let full = std::env::var("ECHO_QEMU_FULL").is_ok_and(|v| v == "1");
    let t0 = Instant::now();
    let mut lines = Vec::new();
    if full {
        let size = std::env::var("ECHO_QEMU_SIZE_KIB").unwrap_or_else(|_| "1024".into());
        for jetson in [false, true] {
            for s in ALL {
                lines.push(flow(s, &size, "3", jetson));
            }
        }
        assert_eq!(lines.len(), 2 * ALL.len());
        assert!(NEGATIVE.iter().all(|n| ALL.contains(n)));
    } else {
        lines.push(flow("saxpy", "256", "2", false));
        lines.push(flow("saxpy", "256", "2", true));
    }
    eprintln!(
        "aarch64 under qemu ({}, {:.1} s):\n  {}",
        if full { "full" } else { "short" },
        t0.elapsed().as_secs_f64(),
        lines.join("\n  ")
    );
}

// ------------------------------------------------------------------ packages

fn deb_test(deb: &Path, samples: &Path, runner: &[&str]) -> (bool, String) {
    let out = Command::new(repo_root().join("tests/scripts/deb-install.sh"))
        .arg(deb)
        .arg(samples)
        .args(runner)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn ok_lines(text: &str) -> String {
    text.lines()
        .filter(|l| l.starts_with("OK: ") || l.starts_with("NOTE: ") || l.starts_with("doctor: "))
        .collect::<Vec<_>>()
        .join("\n  ")
}

#[test]
fn amd64_deb_installs_is_found_by_doctor_and_removes_cleanly() {
    let deb = dist(&format!("vk-layer-echo_{}_amd64.deb", version()));
    let (ok, text) = deb_test(&deb, &target_dir().join("echo-samples"), &[]);
    assert!(ok, "{text}");
    assert!(text.contains("OK: removed (purge)"), "{text}");
    assert!(
        text.contains("OK: vkecho selftest from the package: echo is safe on"),
        "{text}"
    );
    eprintln!("amd64 .deb:\n  {}", ok_lines(&text));
}

#[test]
fn arm64_deb_installs_is_found_by_doctor_and_removes_cleanly() {
    let q = qemu();
    let deb = dist(&format!("vk-layer-echo_{}_arm64.deb", version()));
    let q = q.display().to_string();
    let (ok, text) = deb_test(&deb, &cross(AARCH64, "echo-samples"), &[&q, "-L", "/"]);
    assert!(ok, "{text}");
    assert!(text.contains("OK: removed (purge)"), "{text}");
    assert!(
        text.contains("OK: vkecho selftest from the package: echo is safe on"),
        "{text}"
    );
    eprintln!("arm64 .deb (under qemu):\n  {}", ok_lines(&text));
}

/// The removal check has teeth: a package whose postinst leaves a file behind fails it.
#[test]
fn deb_removal_check_catches_a_leftover() {
    let out_dir = scratch("planted-deb");
    let st = Command::new(repo_root().join("scripts/package.sh"))
        .args(["--arch", "amd64", "--out"])
        .arg(&out_dir)
        .env("ECHO_PACKAGE_PLANT_LEFTOVER", "1")
        .status()
        .unwrap();
    assert!(st.success(), "{HOW}");
    let deb = out_dir.join(format!("vk-layer-echo_{}_amd64.deb", version()));
    let (ok, text) = deb_test(&deb, &target_dir().join("echo-samples"), &[]);
    assert!(!ok, "the planted leftover was not caught:\n{text}");
    assert!(
        text.contains("LEFTOVER: /usr/share/vulkan/implicit_layer.d/VkLayer_echo_leftover.json"),
        "{text}"
    );
    assert!(
        !Path::new("/usr/share/vulkan/implicit_layer.d/VkLayer_echo_leftover.json").exists(),
        "the planted file reached the machine"
    );
    let _ = std::fs::remove_dir_all(&out_dir);
}

/// The tarball for systems without dpkg: unpacked into `~/.local` (a private HOME), the loader
/// finds the manifest (XDG_DATA_HOME) and its relative library path; doctor says so; echo acts
/// on a program; deleting the files the archive lists leaves the prefix as it was.
fn tarball(rust_arch: &str, samples: &Path, runner: &[String]) {
    let name = format!("vk-layer-echo-{}-linux-{rust_arch}", version());
    let tgz = dist(&format!("{name}.tar.gz"));
    let dir = scratch(&format!("tar-{rust_arch}"));
    let mut env = private_env(&dir);
    env.retain(|(k, _)| !k.starts_with("XDG_DATA_HOME"));
    let prefix = dir.join("home/.local");
    std::fs::create_dir_all(&prefix).unwrap();
    let st = Command::new("tar")
        .arg("-C")
        .arg(&prefix)
        .args(["--strip-components=1", "-xzf"])
        .arg(&tgz)
        .status()
        .unwrap();
    assert!(st.success());
    if rust_arch == "aarch64" {
        env.retain(|(k, _)| k != "VK_ICD_FILENAMES" && k != "VK_DRIVER_FILES");
        env.push((
            "VK_DRIVER_FILES".into(),
            "/usr/share/vulkan/icd.d/lvp_icd.aarch64.json".into(),
        ));
    }
    let cmd = |program: &Path, args: &[&str], extra: &[(&str, &str)]| {
        let mut c = match runner.split_first() {
            Some((r, rest)) => {
                let mut c = Command::new(r);
                c.args(rest).arg(program);
                c
            }
            None => Command::new(program),
        };
        c.env_clear().args(args);
        for (k, v) in &env {
            c.env(k, v);
        }
        for (k, v) in extra {
            c.env(k, v);
        }
        run_command(c)
    };
    let doctor = cmd(&prefix.join("bin/vkecho"), &["doctor", "--json"], &[]);
    let d: serde_json::Value = serde_json::from_str(&doctor.stdout)
        .unwrap_or_else(|e| panic!("doctor --json: {e}\n{}{}", doctor.stdout, doctor.stderr));
    let m = &d["echo"]["manifests"][0];
    assert_eq!(m["origin"], "XDG_DATA_HOME", "{d}");
    assert_eq!(m["library_path"], "../../../lib/libVkLayer_echo.so", "{m}");
    assert_eq!(m["library_found"], true, "{m}");
    assert_eq!(d["echo"]["seen_by_loader"], true, "{d}");
    let run = cmd(
        samples,
        &["saxpy", "--size-kib", "256", "--iters", "2"],
        &[
            ("VK_ECHO_ENABLE", "1"),
            ("VK_ECHO_MODE", "profile"),
            ("VK_ECHO_LOG", "info"),
        ],
    );
    run.json();
    assert!(run.stderr.contains("ACTIVE"), "{}", run.stderr);
    // Remove what the archive lists; then the prefix holds no file of it.
    let list = Command::new("tar").arg("-tzf").arg(&tgz).output().unwrap();
    for entry in String::from_utf8_lossy(&list.stdout).lines() {
        let rel = entry.split_once('/').map(|x| x.1).unwrap_or("");
        let p = prefix.join(rel);
        if !rel.is_empty() && p.is_file() {
            std::fs::remove_file(&p).unwrap();
        }
    }
    let left: Vec<PathBuf> = files_under(&prefix.join("bin"))
        .into_iter()
        .chain(files_under(&prefix.join("lib")))
        .chain(files_under(&prefix.join("share/vulkan")))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn x86_64_tarball_works_where_unpacked_and_removes_cleanly() {
    tarball("x86_64", &target_dir().join("echo-samples"), &[]);
}

#[test]
fn aarch64_tarball_works_where_unpacked_and_removes_cleanly() {
    let r = vec![qemu().display().to_string(), "-L".into(), "/".into()];
    tarball("aarch64", &cross(AARCH64, "echo-samples"), &r);
}

/// A layer library of another architecture (the arm64 build on this x86_64 machine) is found but
/// cannot be loaded: doctor names that as a problem, and marks the arm64 drivers skipped.
#[test]
fn doctor_names_a_layer_library_of_another_architecture() {
    let dir = scratch("doctor-arch");
    for d in ["home", "data/vulkan/implicit_layer.d", "config", "cache"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    let text = std::fs::read_to_string(repo_root().join("manifest/VkLayer_echo.json")).unwrap();
    let mut m: serde_json::Value = serde_json::from_str(&text).unwrap();
    m["layer"]["library_path"] = cross(AARCH64, "libVkLayer_echo.so")
        .display()
        .to_string()
        .into();
    std::fs::write(
        dir.join("data/vulkan/implicit_layer.d/VkLayer_echo.json"),
        m.to_string(),
    )
    .unwrap();
    let mut c = Command::new(target_dir().join("vkecho"));
    c.env_clear().args(["doctor", "--json"]);
    for (k, v) in private_env(&dir) {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    assert_eq!(out.status.code(), Some(1), "a problem is reported");
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["echo"]["manifests"][0]["library_arch"], "aarch64", "{d}");
    let problems = d["problems"].to_string();
    assert!(
        problems.contains("an aarch64 library: this x86_64 loader cannot load it"),
        "{problems}"
    );
    let lvp = d["drivers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| {
            x["manifest"]
                .as_str()
                .unwrap()
                .ends_with("lvp_icd.aarch64.json")
        })
        .expect("the arm64 lavapipe manifest (scripts/cross.sh --qemu installs it)");
    assert_eq!(lvp["library_arch"], "aarch64");
    let _ = std::fs::remove_dir_all(&dir);
}
