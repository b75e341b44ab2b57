//! The validation gate (issue 23, DESIGN §3 "only valid calls go down") and the short leak check
//! of issue 8, on this build's binaries.
//!
//! `validation_gate`, on every conformant driver of the host — lavapipe 22.3 and SwiftShader
//! (issue 44; Mesa 25 runs the same gate in the Vulkan 1.4 stage) — with the validation layer
//! below echo (the gate checks the loader's order): `scripts/validate-all.sh` over **every** sample (`echo-samples list`) and
//! **every** corpus program (tests/c/*.c, discovered; each declares its argument lists with
//! `gate-args:` lines in its source) in every mode — off, profile with every window watched and
//! with sampled windows (1 in 8), enforce, auto twice, guarded enforce — under
//! VK_LAYER_KHRONOS_validation with synchronization validation: each must report exactly the
//! messages validation alone reports and compute the same result. Small sizes (64 KiB, 2
//! iterations) keep it to about 1.5 minutes per driver on 2 cores. SwiftShader's plans must hold
//! as many groups as lavapipe's for every check (or a stated reason, `SWIFTSHADER_DIFFERS`).
//! `gate_catches_a_new_and_a_missing_message` shows the gate can fail: a control program that makes one invalid call only in the mode it is
//! told to. `leaks_short`: `scripts/leaks.sh` (valgrind) in enforce mode when valgrind is installed
//! (scripts/deps.sh installs it, so CI runs it).

use echo_tests::world::{repo_root, target_dir};
use std::path::{Path, PathBuf};
use std::process::Command;

fn script(name: &str, args: &[&str], env: &[(&str, &Path)]) -> (bool, String, PathBuf) {
    // One directory per call: the tests of this file run in parallel in one process.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let out_dir = std::env::temp_dir().join(format!("echo-{name}-{}-{call}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out_dir);
    let mut cmd = Command::new(repo_root().join("scripts").join(name));
    cmd.args(args)
        .env("ECHO_BIN_DIR", target_dir())
        .env("ECHO_C_DIR", env!("OUT_DIR"))
        .env("ECHO_VALIDATE_OUT", &out_dir)
        .env("ECHO_LEAKS_OUT", &out_dir);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run scripts/{name}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text, out_dir)
}

/// `results.tsv` of a gate run: (program, mode, verdict, detail).
fn results(dir: &Path) -> Vec<[String; 4]> {
    std::fs::read_to_string(dir.join("results.tsv"))
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let mut f = l.splitn(4, '\t').map(str::to_string);
            [(); 4].map(|_| f.next().unwrap_or_default())
        })
        .collect()
}

const MODES: [&str; 8] = [
    "none", "off", "profile", "profile8", "enforce", "auto1", "auto2", "guard",
];

/// Plans of a gate run per check label: the number of groups each `plan.json` holds.
fn planned_groups(dir: &Path) -> std::collections::BTreeMap<String, usize> {
    let mut m = std::collections::BTreeMap::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some((_, label)) = name.split_once('-') else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(e.path().join("plan.json")) else {
            continue;
        };
        let plan: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        m.insert(
            label.replace('_', " "),
            plan["groups"].as_array().map_or(0, Vec::len),
        );
    }
    m
}

/// Checks whose plans may hold fewer groups on SwiftShader than on lavapipe 22.3, and why
/// (issue 44: "groups applied wherever lavapipe applies them, or a stated reason").
const SWIFTSHADER_DIFFERS: &[(&str, &str)] = &[];

#[test]
fn validation_gate() {
    // Every conformant driver of the host (issue 44); Mesa 25 runs the same gate in the Vulkan
    // 1.4 stage of the test command (scripts/modern-check.sh).
    let mut groups = Vec::new();
    for driver in ["lavapipe", "swiftshader"] {
        groups.push(gate_on(driver));
    }
    let (lvp, sws) = (&groups[0], &groups[1]);
    let mut fewer = Vec::new();
    for (label, n) in lvp {
        let m = sws.get(label).copied().unwrap_or(0);
        if m < *n && !SWIFTSHADER_DIFFERS.iter().any(|(l, _)| l == label) {
            fewer.push(format!(
                "{label}: {n} groups on lavapipe, {m} on SwiftShader"
            ));
        }
    }
    assert!(
        fewer.is_empty(),
        "SwiftShader plans fewer groups than lavapipe, with no stated reason:\n{}",
        fewer.join("\n")
    );
    assert!(
        lvp.values().sum::<usize>() >= 10,
        "the corpus plans hardly any group: {lvp:?}"
    );
}

/// The gate over the whole corpus on `driver`; returns the groups each check's plan holds.
fn gate_on(driver: &str) -> std::collections::BTreeMap<String, usize> {
    let t0 = std::time::Instant::now();
    let (ok, text, dir) = script("validate-all.sh", &["--driver", driver], &[]);
    eprintln!("{text}");
    eprintln!(
        "validation gate on {driver}: {:.0} s",
        t0.elapsed().as_secs_f64()
    );
    let rows = results(&dir);
    assert!(
        rows.iter().any(|r| r[0] == "loader-order" && r[2] == "ok"),
        "{driver}: the validation layer is not below echo:\n{text}"
    );
    // Discovery: every corpus program and every sample ran, in every mode.
    let corpus: Vec<String> = std::fs::read_dir(repo_root().join("tests/c"))
        .unwrap()
        .filter_map(|e| {
            let p = e.ok()?.path();
            // The programs are tests/c/*.c, as the script finds them (common.h and the test
            // layers' folder are not programs).
            (p.extension()? == "c")
                .then(|| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
                .flatten()
        })
        .collect();
    assert!(corpus.len() >= 9, "tests/c: {corpus:?}");
    let out = Command::new(target_dir().join("echo-samples"))
        .arg("list")
        .output()
        .unwrap();
    let samples: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    assert!(samples.len() >= 11, "echo-samples list: {samples:?}");
    for p in corpus.iter().chain(&samples) {
        for m in MODES {
            assert!(
                rows.iter()
                    .any(|r| (r[0] == *p || r[0].starts_with(&format!("{p} "))) && r[1] == m),
                "{p} was not checked in mode {m}:\n{text}"
            );
        }
    }
    // A program's `gate-args:` lines give one check each.
    for label in ["c_upload 1", "c_upload 3", "c_two_devices concurrent"] {
        assert!(rows.iter().any(|r| r[0] == label), "no {label}:\n{text}");
    }
    // Enforce really did something (or the gate proves little): saxpy elided bytes in enforce,
    // auto's second run and guarded enforce.
    for m in ["enforce", "auto2", "guard"] {
        let r = rows
            .iter()
            .find(|r| r[0] == "saxpy" && r[1] == m)
            .unwrap_or_else(|| panic!("no saxpy {m}:\n{text}"));
        assert!(
            r[3].contains("enforce ") && !r[3].contains(" 0 B elided"),
            "saxpy {m} elided nothing: {r:?}"
        );
    }
    let failed: Vec<String> = rows
        .iter()
        .filter(|r| r[2] != "ok")
        .map(|r| r.join(" | "))
        .collect();
    assert!(
        ok && failed.is_empty(),
        "the validation gate on {driver}: echo changed what validation reports (or a result) in:\n{}\n\n{text}",
        failed.join("\n")
    );
    let groups = planned_groups(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    groups
}

/// The gate can fail: `tests/data/gate/gate_control.c` makes one invalid call (a misaligned
/// `vkBindBufferMemory`, VUID-vkBindBufferMemory-memoryOffset-01036) only with
/// `GATE_CONTROL_INVALID=1`, which the gate's `--inject` adds to one mode: in `off` the gate must
/// name the new message, in `none` (the reference) the message missing from the other modes.
#[test]
fn gate_catches_a_new_and_a_missing_message() {
    let bin = std::env::temp_dir().join(format!("echo-gate-control-{}", std::process::id()));
    std::fs::create_dir_all(&bin).unwrap();
    let src = repo_root().join("tests/data/gate");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let built = Command::new(&cc)
        .args(["-O1", "-Wall", "-Werror", "-std=c11", "-I"])
        .arg(repo_root().join("tests/c"))
        .arg("-o")
        .arg(bin.join("gate_control"))
        .arg(src.join("gate_control.c"))
        .arg("-lvulkan")
        .output()
        .unwrap();
    assert!(built.status.success(), "{built:?}");
    let src_s = src.display().to_string();
    for (inject, want_mode, want) in [
        (
            "off:GATE_CONTROL_INVALID=1",
            "off",
            "NEW: VUID-vkBindBufferMemory-memoryOffset-01036",
        ),
        (
            "none:GATE_CONTROL_INVALID=1",
            "off",
            "MISSING: VUID-vkBindBufferMemory-memoryOffset-01036",
        ),
    ] {
        let (ok, text, dir) = script(
            "validate-all.sh",
            &[
                "--samples",
                "",
                "--c-src",
                &src_s,
                "--modes",
                "none,off",
                "--inject",
                inject,
            ],
            &[("ECHO_C_DIR", &bin)],
        );
        let rows = results(&dir);
        assert!(!ok, "the gate passed with {inject}:\n{text}");
        assert!(
            rows.iter().any(|r| r[0] == "gate_control"
                && r[1] == want_mode
                && r[2] == "FAIL"
                && r[3] == want),
            "with {inject} the gate does not say {want:?} for {want_mode}:\n{text}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
    // Without the injection the control is clean: the failures above are the gate's doing.
    let (ok, text, dir) = script(
        "validate-all.sh",
        &["--samples", "", "--c-src", &src_s, "--modes", "none,off"],
        &[("ECHO_C_DIR", &bin)],
    );
    assert!(ok, "{text}");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&bin);
}

#[test]
fn leaks_short() {
    if Command::new("valgrind").arg("--version").output().is_err() {
        eprintln!("valgrind is not installed: skipped (scripts/deps.sh installs it)");
        return;
    }
    let (ok, text, dir) = script("leaks.sh", &["--modes", "enforce", "--size-kib", "64"], &[]);
    eprintln!("{text}");
    assert!(ok, "leaks.sh:\n{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The gate reads both formats of validation's messages (issue 33): 1.3.239's one line (with
/// indented `Objects:` lines) and 1.4.309's block (`Validation Error: [ ID ] | MessageID = ...`,
/// its text on lines of its own with handles in it, a blank line, `Objects: N`, the objects, a
/// blank line). A stand-in corpus program prints one message of each with a handle that differs
/// by mode (as echo's extra objects make it differ): the result and the messages are the same in
/// none and off. With `FAKE_SUM` injected into off its checksum line differs, and the gate must
/// still see that (the blocks do not swallow the program's own lines).
#[test]
fn gate_reads_validation_1_3_and_1_4_messages() {
    let dir = std::env::temp_dir().join(format!("echo-gate-formats-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (src, bin) = (dir.join("src"), dir.join("bin"));
    std::fs::create_dir_all(&src).unwrap();
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(src.join("fake_formats.c"), "/* gate-args: 1 */\n").unwrap();
    let prog = bin.join("fake_formats");
    std::fs::write(
        &prog,
        r#"#!/bin/sh
h=0x80000000008; [ -n "$VK_ECHO_MODE" ] && h=0x70000000007
echo "iterations $1"
printf 'Validation Error: [ VUID-vkSetEvent-event-09543 ] | MessageID = 0x1dd5a5b6\nvkSetEvent(): event (VkEvent %s) is in use.\nThe Vulkan spec states: ...\n\nObjects: 1\n    [0] VkEvent %s\n\n' $h $h
echo "VUID-Old-00001(ERROR / SPEC): msgNum: 1 - Validation Error: [ VUID-Old-00001 ] Object 0: handle = $h | MessageID = 0x1"
echo "    Objects: 1"
echo "        [0] $h, type: 9, name: NULL"
echo "checksum ${FAKE_SUM:-8e4a5b42bf05013a}"
"#,
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
    let src_s = src.display().to_string();
    let base = ["--samples", "", "--c-src", &src_s, "--modes", "none,off"];
    // Its own output folders: script()'s names (pid and argument count) are those of
    // gate_catches_a_new_and_a_missing_message, which runs at the same time.
    let (out1, out2) = (dir.join("out1"), dir.join("out2"));
    let (ok, text, _) = script(
        "validate-all.sh",
        &base,
        &[("ECHO_C_DIR", &bin), ("ECHO_VALIDATE_OUT", &out1)],
    );
    let rows = results(&out1);
    assert!(ok, "{text}");
    assert!(
        rows.iter().any(|r| r[0] == "fake_formats 1"
            && r[1] == "off"
            && r[2] == "ok"
            && r[3] == "2 messages"),
        "{text}"
    );
    let mut args = base.to_vec();
    args.extend(["--inject", "off:FAKE_SUM=0000000000000000"]);
    let (ok, text, _) = script(
        "validate-all.sh",
        &args,
        &[("ECHO_C_DIR", &bin), ("ECHO_VALIDATE_OUT", &out2)],
    );
    let rows = results(&out2);
    assert!(!ok, "a different checksum passed the gate:\n{text}");
    assert!(
        rows.iter().any(|r| r[0] == "fake_formats 1"
            && r[1] == "off"
            && r[3].starts_with("RESULT DIFFERS")),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
