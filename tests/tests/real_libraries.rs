//! Programs on real libraries (issue 26), each beside its zero-copy twin: `c_vkfft` (VkFFT from
//! Debian's libvkfft-dev, staging transfers as VkFFT's sample code does them) and `c_tensors`
//! (Kompute's tensor layout: a device buffer and a staging buffer per tensor). Both are corpus
//! programs (tests/c, built by tests/build.rs), so the validation gate (validation_all.rs) also
//! runs them in every mode under validation with the `gate-args:` their sources declare.
//!
//! Here, at small sizes: the output is identical without echo, in profile, enforce and auto
//! (twice), and in the zero-copy twin; enforce applies every planned group and elides bytes (so
//! a plan that stopped pairing these libraries' buffers fails the test); VkFFT's inverse
//! reproduces its input.

use echo_tests::world::{artifact, c_spv, program, run_within, Layers, World};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// c_vkfft compiles its shaders at run time (glslang, then llvmpipe): slower than the others.
const LIMIT: Duration = Duration::from_secs(120);

struct Run {
    stdout: String,
    stats: Vec<Value>,
}

fn run(
    dir: &Path,
    name: &str,
    args: &[&str],
    mode: Option<&'static str>,
    env: &[(&str, String)],
) -> Run {
    let mut w = World::new(Layers {
        echo: mode,
        test_layer: false,
        validation: false,
    })
    .set("ECHO_C_SPV", c_spv());
    for (k, v) in env {
        w = w.set(k, v);
    }
    let stats = dir.join(format!("stats-{}.jsonl", mode.unwrap_or("none")));
    let _ = std::fs::remove_file(&stats);
    w = w.set("VK_ECHO_STATS", stats.display().to_string());
    let label = format!(
        "{name} {} (echo {})",
        args.join(" "),
        mode.unwrap_or("not installed")
    );
    let r = run_within(w.command(&program(name), args), LIMIT);
    assert!(
        r.status.success(),
        "{label} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        r.status,
        r.stdout,
        r.stderr
    );
    let stats = std::fs::read_to_string(&stats)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("stats line is JSON"))
        .collect();
    Run {
        stdout: r.stdout,
        stats,
    }
}

fn sum(stats: &[Value], field: &str) -> u64 {
    stats.iter().map(|s| s[field].as_u64().unwrap_or(0)).sum()
}

/// Every mode and the twin print the baseline's stdout; enforce applies all its groups and
/// elides at least `min_elided` bytes. Returns the baseline's stdout and enforce's statistics.
fn every_mode_and_twin(
    name: &str,
    staging: &[&str],
    zero: &[&str],
    min_elided: u64,
) -> (String, Vec<Value>) {
    let dir = std::env::temp_dir().join(format!("echo-reallib-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let s = |p: PathBuf| p.display().to_string();
    let base = run(&dir, name, staging, None, &[]).stdout;
    assert!(!base.is_empty(), "{name}: no output");
    let same = |what: &str, out: &str| {
        assert!(
            out == base,
            "{name} {what}: stdout differs from the baseline's\nbaseline:\n{base}\nthis run:\n{out}"
        );
    };
    let trace = dir.join("trace.jsonl");
    let profile = run(
        &dir,
        name,
        staging,
        Some("profile"),
        &[("VK_ECHO_TRACE", s(trace.clone()))],
    );
    same("profile", &profile.stdout);
    let plan = dir.join("plan.json");
    let mut cmd = Command::new(artifact("vkecho"));
    cmd.arg("analyze").arg(&trace).arg("-o").arg(&plan);
    let a = run_within(cmd, LIMIT);
    assert!(
        a.status.success(),
        "{name}: vkecho analyze failed:\n{}{}",
        a.stdout,
        a.stderr
    );

    let enforce = run(
        &dir,
        name,
        staging,
        Some("enforce"),
        &[("VK_ECHO_PLAN", s(plan))],
    );
    same("enforce", &enforce.stdout);
    let (planned, applied) = (
        sum(&enforce.stats, "groups_planned"),
        sum(&enforce.stats, "groups_applied"),
    );
    assert!(
        planned >= 1 && applied == planned,
        "{name}: {applied} of {planned} planned groups applied; plan analysis:\n{}\nstats: {:?}",
        a.stdout,
        enforce.stats
    );
    let elided = sum(&enforce.stats, "bytes_elided");
    assert!(
        elided >= min_elided,
        "{name}: enforce elided {elided} bytes, want at least {min_elided}; stats: {:?}",
        enforce.stats
    );
    let cache = dir.join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    for n in 1..=2 {
        let auto = run(
            &dir,
            name,
            staging,
            Some("auto"),
            &[("VK_ECHO_CACHE_DIR", s(cache.clone()))],
        );
        same(&format!("auto (run {n})"), &auto.stdout);
    }
    let twin = run(&dir, name, zero, None, &[]);
    same("zero-copy twin", &twin.stdout);
    if std::env::var_os("ECHO_KEEP_TEST_DIRS").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    (base, enforce.stats)
}

#[test]
fn kompute_style_tensors_every_mode_and_twin() {
    // 3 iterations of 3 tensors of 1 MiB: a and b uploaded, out read back, each iteration.
    let (out, _) = every_mode_and_twin(
        "c_tensors",
        &["staging", "3", "1"],
        &["zero", "3", "1"],
        (3 * 3) << 20,
    );
    assert!(
        out.starts_with("tensors 3 x 1 MiB, 3 iterations: checksum "),
        "{out}"
    );
}

#[test]
fn vkfft_every_mode_and_twin() {
    // 2 iterations of three FFT cases; the 2D (512 KiB) and the 1D batch (2 MiB) are above the
    // pairing threshold (256 KiB): their upload and download per iteration must go.
    let (out, stats) = every_mode_and_twin(
        "c_vkfft",
        &["staging", "2", "small"],
        &["zero", "2", "small"],
        2 * 2 * (512 << 10) + 2 * 2 * (2 << 20),
    );
    assert_eq!(out.lines().count(), 3, "{out}");
    for l in out.lines() {
        assert!(
            l.ends_with("roundtrip ok"),
            "VkFFT's inverse did not give back its input: {l}"
        );
    }
    // Issue 35: each of those transfers' one-time command buffers held only its copy, which
    // echo dropped: all 8 (2 cases x 2 iterations x upload and download) stay out of their
    // submission, which goes down with its fence alone.
    assert_eq!(
        (
            sum(&stats, "command_buffers_dropped"),
            sum(&stats, "submissions_emptied")
        ),
        (8, 8),
        "{stats:?}"
    );
}

/// Issue 35's planted counterpart: with ECHO_C_PLANT_FILL=1 every transfer's command buffer also
/// fills a small readback buffer (before the copy in an upload, after it in a download). Echo
/// still elides the copies, but no command buffer may stay out of its submission, and the fills
/// land (the checksum of every fill is the baseline's).
#[test]
fn vkfft_a_dropped_copy_beside_real_work_runs() {
    let dir = std::env::temp_dir().join(format!("echo-reallib-{}-plant", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let s = |p: PathBuf| p.display().to_string();
    let args = ["staging", "2", "small"];
    let plant = ("ECHO_C_PLANT_FILL", "1".to_string());
    let base = run(&dir, "c_vkfft", &args, None, std::slice::from_ref(&plant)).stdout;
    assert!(base.contains("plant: 12 fills, checksum "), "{base}");
    let trace = dir.join("trace.jsonl");
    let p = run(
        &dir,
        "c_vkfft",
        &args,
        Some("profile"),
        &[plant.clone(), ("VK_ECHO_TRACE", s(trace.clone()))],
    );
    assert_eq!(p.stdout, base, "profile");
    let plan = dir.join("plan.json");
    let mut cmd = Command::new(artifact("vkecho"));
    cmd.arg("analyze").arg(&trace).arg("-o").arg(&plan);
    let a = run_within(cmd, LIMIT);
    assert!(a.status.success(), "analyze: {}{}", a.stdout, a.stderr);
    let e = run(
        &dir,
        "c_vkfft",
        &args,
        Some("enforce"),
        &[plant, ("VK_ECHO_PLAN", s(plan))],
    );
    assert_eq!(
        e.stdout, base,
        "enforce: a fill beside a dropped copy did not run"
    );
    assert!(
        sum(&e.stats, "copies_elided") >= 8,
        "the copies were not elided, so nothing was tested: {:?}",
        e.stats
    );
    assert_eq!(
        sum(&e.stats, "command_buffers_dropped"),
        0,
        "a command buffer holding a fill was left out: {:?}",
        e.stats
    );
    if std::env::var_os("ECHO_KEEP_TEST_DIRS").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// `c_tensors interleave` (scripts/agreement.sh's wall clock): three programs in one process,
/// echo enabled on one VkInstance only (the explicit layer named by that instance), the
/// validation layer on all three. Profile and enforce see that instance's device alone (one
/// statistics record), enforce applies every group, every program prints the staging run's
/// checksum, and validation says nothing.
#[test]
fn echo_on_one_instance_of_three() {
    let dir = std::env::temp_dir().join(format!("echo-reallib-{}-interleave", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let reference = run(&dir, "c_tensors", &["staging", "3", "1"], None, &[]).stdout;
    let checksum = reference.trim_end().rsplit(' ').next().unwrap().to_string();
    let run3 = |mode: &str, extra: &[(&str, String)]| {
        let mut w = World::new(Layers {
            echo: None,
            test_layer: false,
            validation: true,
        })
        .set("ECHO_C_SPV", c_spv())
        .set("VK_ECHO_MODE", mode)
        .set(
            "VK_ECHO_STATS",
            dir.join("stats.jsonl").display().to_string(),
        );
        std::fs::write(
            w.dir.join("layers/VkLayer_echo.json"),
            echo_tests::world::echo_manifest(),
        )
        .unwrap();
        let layers = w.dir.join("layers").display().to_string();
        w = w.set("VK_ADD_LAYER_PATH", layers);
        for (k, v) in extra {
            w = w.set(k, v);
        }
        let _ = std::fs::remove_file(dir.join("stats.jsonl"));
        let r = run_within(
            w.command(&program("c_tensors"), &["interleave", "3", "1"]),
            LIMIT,
        );
        assert!(
            r.status.success(),
            "interleave ({mode}) failed ({}):\n{}\n{}",
            r.status,
            r.stdout,
            r.stderr
        );
        let names: Vec<&str> = r
            .stdout
            .lines()
            .map(|l| l.split(':').next().unwrap())
            .collect();
        assert_eq!(names, ["base", "echo", "twin"], "{}", r.stdout);
        for l in r.stdout.lines() {
            assert!(
                l.ends_with(&checksum),
                "{mode}: {l} (staging run: {reference})"
            );
        }
        let vvl: Vec<&str> = r
            .stdout
            .lines()
            .chain(r.stderr.lines())
            .filter(|l| l.contains("Validation Error") || l.contains("SYNC-HAZARD"))
            .collect();
        assert!(
            vvl.is_empty(),
            "{mode}: validation reported:\n{}",
            vvl.join("\n")
        );
        let stats: Vec<Value> = std::fs::read_to_string(dir.join("stats.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).expect("stats line is JSON"))
            .collect();
        stats
    };
    let trace = dir.join("trace.jsonl");
    run3("profile", &[("VK_ECHO_TRACE", trace.display().to_string())]);
    let plan = dir.join("plan.json");
    let mut cmd = Command::new(artifact("vkecho"));
    cmd.arg("analyze").arg(&trace).arg("-o").arg(&plan);
    let a = run_within(cmd, LIMIT);
    assert!(a.status.success(), "analyze: {}{}", a.stdout, a.stderr);
    let enforced = run3("enforce", &[("VK_ECHO_PLAN", plan.display().to_string())]);
    assert_eq!(
        enforced.len(),
        1,
        "echo saw one device (its instance's): {enforced:?}"
    );
    let s = &enforced[0];
    assert_eq!(s["groups_planned"], 3, "{s}\n{}", a.stdout);
    assert_eq!(s["groups_applied"], 3, "{s}");
    assert_eq!(
        s["bytes_elided"],
        9u64 << 20,
        "3 iterations x 3 tensors x 1 MiB: {s}"
    );
    if std::env::var_os("ECHO_KEEP_TEST_DIRS").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}
