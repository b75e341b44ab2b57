//! Random legal programs, echo against none (issue 45; docs/fuzzing-programs.md): the test
//! command's fixed-seed batches and the corpus of shrunk divergences.
//!
//! - `valid_*`: generated programs run without echo under the Khronos validation layer with
//!   synchronization validation report nothing (fixed seeds, per driver).
//! - `batch_*`: a fixed-seed batch through the oracle (no layer, profile, enforce with the
//!   analyzed plan, auto twice): every host read and the final readbacks identical, on lavapipe
//!   and SwiftShader (Mesa 25: scripts/modern-check.sh's `fuzzprog` pass).
//! - `the_oracle_catches_*`: the oracle and the shrinker have teeth: with a planted fault in
//!   enforce (`VK_ECHO_TEST_NO_CARRY`: bytes written before a redirected bind left behind) a
//!   program that writes before the bind diverges, and a generated one shrinks to a few ops.
//! - `corpus_*`: each a program a run found diverging, shrunk (tests/data/fuzzprog/); each
//!   fails until echo is fixed.
//!
//! Every run is bounded: the campaign kills a program after 60 s, the test after its limit.

use echo_tests::samples::run_command_within;
use echo_tests::world::{artifact, repo_root};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

const SWIFTSHADER_ICD: &str = "/usr/lib/chromium/vk_swiftshader_icd.json";

fn out_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("echo-fuzzprog-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn fuzzprog(args: &[&str], limit: u64) -> (bool, String) {
    let mut c = Command::new(artifact("echo-fuzzprog"));
    c.args(args).env("XDG_RUNTIME_DIR", std::env::temp_dir());
    let r = run_command_within(c, Duration::from_secs(limit));
    (r.status.success(), format!("{}\n{}", r.stdout, r.stderr))
}

fn swiftshader() -> bool {
    let there = std::path::Path::new(SWIFTSHADER_ICD).exists();
    assert!(
        there || std::env::var_os("ECHO_NO_SWIFTSHADER").is_some(),
        "{SWIFTSHADER_ICD} is missing (Debian's chromium package; scripts/deps.sh installs it); \
         ECHO_NO_SWIFTSHADER=1 leaves SwiftShader out"
    );
    there
}

fn valid(driver: &str) {
    let out = out_dir(&format!("valid-{driver}"));
    let (ok, text) = fuzzprog(
        &[
            "fuzz",
            "--validate",
            "--driver",
            driver,
            "--programs",
            "40",
            "--seconds",
            "600",
            "--seed",
            "45",
            "--out",
            out.to_str().unwrap(),
        ],
        900,
    );
    assert!(
        ok && text.contains("40 programs, 0 validation messages"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(out);
}

#[test]
fn valid_lavapipe() {
    valid("lavapipe");
}

#[test]
fn valid_swiftshader() {
    if swiftshader() {
        valid("swiftshader");
    }
}

fn batch(driver: &str, programs: u32) {
    let out = out_dir(&format!("batch-{driver}"));
    let n = programs.to_string();
    let (ok, text) = fuzzprog(
        &[
            "fuzz",
            "--driver",
            driver,
            "--programs",
            &n,
            "--seconds",
            "900",
            "--seed",
            "45",
            "--no-shrink",
            "--out",
            out.to_str().unwrap(),
        ],
        1200,
    );
    let last = text
        .lines()
        .find(|l| l.ends_with("divergences"))
        .unwrap_or("");
    assert!(
        ok && last.starts_with(&format!("{programs} programs,"))
            && last.ends_with(" 0 divergences"),
        "the fixed-seed batch on {driver} (output {}):\n{text}",
        out.display()
    );
    // Enforce must have had something to do.
    let applied: u32 = last
        .split(", ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    assert!(
        applied * 10 >= programs * 3,
        "fewer than 30 % with a group applied: {last}"
    );
    let _ = std::fs::remove_dir_all(out);
}

#[test]
fn batch_lavapipe() {
    batch("lavapipe", 10);
}

#[test]
fn batch_swiftshader() {
    if swiftshader() {
        batch("swiftshader", 8);
    }
}

fn check(file: &str, driver: &str, extra: &[&str]) -> (bool, String) {
    let out = out_dir(&format!("check-{}", file.replace('/', "_")));
    let f = repo_root().join("tests/data/fuzzprog").join(file);
    let mut args = vec![
        "check",
        "--driver",
        driver,
        "--file",
        f.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let r = fuzzprog(&args, 600);
    let _ = std::fs::remove_dir_all(out);
    r
}

/// A write before the bind, applied (tests/data/fuzzprog/planted-write-before-bind.json): the
/// oracle passes it as it is, and catches enforce leaving the bytes behind.
#[test]
fn the_oracle_catches_a_planted_fault() {
    let (ok, text) = check("planted-write-before-bind.json", "lavapipe", &[]);
    assert!(
        ok && text.contains("group applied: true"),
        "without the fault:\n{text}"
    );
    let (ok, text) = check(
        "planted-write-before-bind.json",
        "lavapipe",
        &["--plant-no-carry"],
    );
    assert!(
        !ok && text.contains("divergence: enforce"),
        "with the fault:\n{text}"
    );
}

/// The shrinker: a generated program that diverges under the planted fault shrinks to a small
/// one that still does.
#[test]
fn the_shrinker_reduces_a_planted_divergence() {
    let (ok, text) = check(
        "planted-generated.json",
        "lavapipe",
        &["--plant-no-carry", "--shrink"],
    );
    assert!(!ok, "{text}");
    let line = text
        .lines()
        .find(|l| l.starts_with("shrunk: "))
        .unwrap_or_else(|| panic!("{text}"));
    let sizes: Vec<usize> = line["shrunk: ".len()..]
        .split(':')
        .next()
        .unwrap()
        .split(" → ")
        .map(|s| s.trim().parse().unwrap())
        .collect();
    assert!(sizes[1] * 3 <= sizes[0] && sizes[1] <= 25, "{line}");
}

/// The fixed-seed batch of `fuzz` on `driver` with `extra` arguments: its last line.
fn batch_line(driver: &str, programs: u32, seed: &str, extra: &[&str]) -> (String, String) {
    let out = out_dir(&format!("batch-{driver}-{seed}-{}", extra.len()));
    let n = programs.to_string();
    let mut args = vec![
        "fuzz",
        "--driver",
        driver,
        "--programs",
        &n,
        "--seconds",
        "900",
        "--seed",
        seed,
        "--no-shrink",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let (_, text) = fuzzprog(&args, 1200);
    let _ = std::fs::remove_dir_all(out);
    let last = text
        .lines()
        .find(|l| l.ends_with("divergences"))
        .unwrap_or("")
        .to_string();
    (last, text)
}

/// Update-after-bind for real (issue 53): the generator writes an update-after-bind set after
/// the command buffer that binds it is recorded and before its submission, so the planted
/// fault `VK_ECHO_TEST_LATE_AT_RECORD=1` (profile takes descriptors as recorded, not as
/// submitted; set in echo's runs only) is found: a fixed-seed batch on SwiftShader diverges
/// with it (the first 40 programs of seed 45 hold one such divergence; 6 in the first 200 of
/// seed 7) and the same batch has none without it. Also the shrunk program one of them gave
/// (tests/data/fuzzprog/planted-late-update-after-bind.json): it passes as it is, diverges
/// under the fault.
#[test]
fn the_generator_finds_descriptors_taken_as_recorded() {
    if !swiftshader() {
        return;
    }
    let plant = ["--plant", "VK_ECHO_TEST_LATE_AT_RECORD=1"];
    let (last, text) = batch_line("swiftshader", 40, "45", &plant);
    let divergences: u32 = last
        .rsplit(", ")
        .next()
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    assert!(
        last.starts_with("40 programs,") && divergences >= 1,
        "with the planted fault: {last}\n{text}"
    );
    let (last, text) = batch_line("swiftshader", 40, "45", &[]);
    assert!(
        last.starts_with("40 programs,") && last.ends_with(" 0 divergences"),
        "without the planted fault: {last}\n{text}"
    );
    let f = "planted-late-update-after-bind.json";
    let (ok, text) = check(f, "swiftshader", &[]);
    assert!(ok, "without the fault:\n{text}");
    let (ok, text) = check(f, "swiftshader", &plant);
    assert!(
        !ok && text.contains("divergence: enforce"),
        "with the fault:\n{text}"
    );
}

/// A program whose output varies without the layer has no oracle: it is set aside, not counted
/// as a divergence (lavapipe 22.3 gave two such programs in the long run). Planted: without the
/// layer, `run` prints a line that changes every run.
#[test]
fn a_program_that_varies_without_the_layer_is_no_divergence() {
    let out = out_dir("unstable");
    let f = repo_root().join("tests/data/fuzzprog/planted-generated.json");
    let mut c = Command::new(artifact("echo-fuzzprog"));
    c.args(["check", "--driver", "lavapipe", "--file"])
        .arg(&f)
        .arg("--out")
        .arg(&out)
        .env("XDG_RUNTIME_DIR", std::env::temp_dir())
        .env("ECHO_FUZZPROG_TEST_UNSTABLE", "1");
    let r = run_command_within(c, Duration::from_secs(600));
    let text = format!("{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.status.code(), Some(2), "{text}");
    assert!(
        text.contains("skipped: not deterministic without the layer"),
        "{text}"
    );
    assert!(!text.contains("divergence:"), "{text}");
    let _ = std::fs::remove_dir_all(out);
}

macro_rules! corpus {
    ($name:ident, $file:literal, $driver:literal) => {
        #[test]
        fn $name() {
            let (ok, text) = check($file, $driver, &[]);
            assert!(
                ok,
                "tests/data/fuzzprog/{} diverges on {}:\n{text}",
                $file, $driver
            );
        }
    };
}

// Found on lavapipe 22.3 with seed 7 (`scripts/fuzz-programs.sh 60 7`), shrunk by the campaign.
// A readback staging buffer written by the host before its bind, a partial copy device →
// readback, and the host reads readback bytes the copy did not cover: enforce shares the two
// buffers, so those bytes are the device buffer's (the kernel's output) instead of the host's.
corpus!(
    corpus_partial_readback_bytes_outside_copy,
    "lavapipe-partial-readback-bytes-outside-copy.json",
    "lavapipe"
);
corpus!(
    corpus_partial_readback_written_before_bind,
    "lavapipe-partial-readback-written-before-bind.json",
    "lavapipe"
);
// The host rewrites only part of the upload buffer in the second iteration; an in-place kernel
// modifies the device buffer after the upload: shared, the upload buffer's other bytes hold the
// kernel's output, and the next upload feeds it back to the kernel.
corpus!(
    corpus_partial_upload_rewrite_inplace,
    "lavapipe-partial-upload-rewrite-inplace.json",
    "lavapipe"
);
// Found on lavapipe 22.3 by the long run (seed 1001, program seed 4433340143578426613), shrunk by
// the campaign and by hand: a dispatch writes part of the device buffer, the upload copy
// overwrites all of it, and a second dispatch (with a base) writes only the other part: shared,
// the first dispatch's output is in the readback where the upload's bytes were. The analysis took
// a shader's write to cover its whole binding range, hiding the first write.
corpus!(
    corpus_partial_shader_write_before_upload,
    "lavapipe-partial-shader-write-before-upload.json",
    "lavapipe"
);
// Profile mode (debug build of the layer) dies with SIGSEGV: a per-use map, 4-byte host stores
// into the bytes right after a watched buffer, on the page they share.
corpus!(
    corpus_profile_segv_host_write_beside_buffer,
    "lavapipe-profile-segv-host-write-beside-buffer.json",
    "lavapipe"
);

macro_rules! corpus_swiftshader {
    ($name:ident, $file:literal) => {
        #[test]
        fn $name() {
            if swiftshader() {
                let (ok, text) = check($file, "swiftshader", &[]);
                assert!(
                    ok,
                    "tests/data/fuzzprog/{} diverges on SwiftShader:\n{text}",
                    $file
                );
            }
        }
    };
}

// Found on SwiftShader with seed 7 (`scripts/fuzz-programs.sh 240 7`), shrunk by the campaign.
// The class of corpus_partial_upload_rewrite_inplace, on SwiftShader.
corpus_swiftshader!(
    corpus_swiftshader_partial_upload_rewrite_inplace,
    "swiftshader-partial-upload-rewrite-inplace.json"
);
// A kernel writes the device buffer before its one-time upload, while the upload buffer already
// holds the host's bytes (only partly rewritten before the copy): shared, the kernel's write
// lands in the upload buffer's bytes the copy then carries.
corpus_swiftshader!(
    corpus_swiftshader_gpu_write_before_one_time_upload,
    "swiftshader-gpu-write-before-one-time-upload.json"
);
// Mesa 25: tests/data/fuzzprog/mesa25-*.json run in scripts/modern-check.sh's fuzzprog pass.
