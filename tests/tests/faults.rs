//! Injected faults and recycled memory (issue 8; DESIGN §3 "never take the app down", §8).
//!
//! The test layer `VK_LAYER_ECHO_test_discrete` sits below echo with the driver's real table
//! (`VK_ECHO_TEST_TABLE=real`, so echo is active on lavapipe) and
//! - fails chosen calls (`VK_ECHO_TEST_FAIL`): a failure of the application's own
//!   `vkAllocateMemory`/`vkBindBufferMemory`/`vkMapMemory`/`vkCreateBuffer` must reach the
//!   application exactly as without echo (same exit status, same error message), and a failure of
//!   a call echo makes for itself (profile: the host-pointer import of its double mapping;
//!   enforce: its own map of a device allocation, a redirected bind) must fall back to
//!   passthrough with identical output;
//! - poisons every new host-visible allocation with 0xA5 (`VK_ECHO_TEST_POISON`): first a control
//!   shows that the poison really reaches freshly allocated and reallocated memory (and that
//!   without it the same memory reads as zero, so the control can fail), then the samples give
//!   identical checksums with the poison under profile and enforce.

use echo_tests::samples::SampleRun;
use echo_tests::world::{app_stderr, echo_warnings, injected, Layers, World};
use serde_json::Value;

/// Small: CI has 2 cores. `min_bytes` is lowered so that these sizes make pairs.
const SIZE_KIB: &str = "256";
const ITERS: &str = "2";
const MIN_BYTES: &str = "16K";

fn args(sample: &str) -> Vec<&str> {
    vec![sample, "--size-kib", SIZE_KIB, "--iters", ITERS]
}

fn world(echo: Option<&'static str>) -> World {
    World::new(Layers {
        echo,
        test_layer: true,
        validation: false,
    })
    .set("VK_ECHO_TEST_TABLE", "real")
    .set("VK_ECHO_MIN_BYTES", MIN_BYTES)
    .set("VK_ECHO_LOG", "warn")
}

/// An enforce world for `args` with a plan made by profiling them first.
fn enforce_world(args: &[&str]) -> World {
    let w = world(Some("enforce"));
    let plan = w.make_plan(args);
    w.set("VK_ECHO_PLAN", plan.display().to_string())
}

/// What the application shows: exit status, its own stderr, its JSON checksum (if it succeeded).
#[derive(Debug, PartialEq)]
struct Seen {
    code: Option<i32>,
    stderr: String,
    checksum: Option<String>,
}

fn seen(run: &SampleRun) -> Seen {
    Seen {
        code: run.status.code(),
        stderr: app_stderr(run),
        checksum: run.status.success().then(|| run.checksum()),
    }
}

fn reference(args: &[&str]) -> String {
    World::new(Layers::default()).sample(args).checksum()
}

// ------------------------------------------------------------------ poisoning

fn fractions(run: &SampleRun, key: &str) -> Vec<(u64, u64, f64)> {
    assert!(
        run.status.success(),
        "echo-fresh failed:\n{}{}",
        run.stdout,
        run.stderr
    );
    let line = run
        .stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap();
    let v: Value = serde_json::from_str(line).unwrap();
    v["allocations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["round"].as_u64().unwrap(),
                a["size"].as_u64().unwrap(),
                a[key].as_f64().unwrap(),
            )
        })
        .collect()
}

/// The control: with the poison, every byte of every fresh and reallocated host-visible
/// allocation is 0xA5 — also through echo (profile's double mapping, enforce's passthrough of
/// unplanned memory); without it, the large fresh allocations read as zero, i.e. the same check
/// fails when the poisoning does not happen.
#[test]
fn poison_control_fresh_memory_is_dirty() {
    let plain = world(None).run("echo-fresh", &[]);
    let zero = fractions(&plain, "zero_fraction");
    assert!(
        zero.iter()
            .filter(|(round, size, _)| *round == 0 && *size >= 1 << 20)
            .all(|(_, _, f)| *f == 1.0),
        "without poison, fresh large allocations should read as zero pages: {zero:?}"
    );
    assert!(
        fractions(&plain, "poison_fraction")
            .iter()
            .all(|(_, _, f)| *f < 0.5),
        "without poison the 0xA5 check must not pass"
    );
    for echo in [None, Some("off"), Some("profile"), Some("enforce")] {
        let run = world(echo)
            .set("VK_ECHO_TEST_POISON", "1")
            .run("echo-fresh", &[]);
        for (round, size, f) in fractions(&run, "poison_fraction") {
            assert_eq!(
                f, 1.0,
                "echo {echo:?}: round {round}, {size} bytes: only {f} of the bytes are poison"
            );
        }
    }
}

fn poisoned_identical(sample: &str) {
    let a = args(sample);
    let want = reference(&a);
    let poisoned = world(None).set("VK_ECHO_TEST_POISON", "1").sample(&a);
    assert_eq!(
        poisoned.checksum(),
        want,
        "{sample} itself reads memory it never wrote"
    );
    let profile = world(Some("profile"))
        .set("VK_ECHO_TEST_POISON", "1")
        .sample(&a);
    assert_eq!(profile.checksum(), want, "{sample}: profile + poison");
    let enforce = enforce_world(&a).set("VK_ECHO_TEST_POISON", "1").sample(&a);
    assert_eq!(
        enforce.checksum(),
        want,
        "{sample}: enforce + poison\n{}",
        enforce.stderr
    );
}

#[test]
fn poisoned_saxpy_identical() {
    poisoned_identical("saxpy");
}

#[test]
fn poisoned_suballoc_identical() {
    poisoned_identical("suballoc");
}

#[test]
fn poisoned_pipeline_identical() {
    poisoned_identical("pipeline");
}

// ------------------------------------------------------------------ the application's faults

/// Faults in the application's own calls. Allocation, map and buffer-creation failures persist
/// from the Nth call on (out of memory stays out of memory): echo legitimately changes which calls
/// reach the driver — profile turns each allocation into a host-pointer import and each buffer
/// creation into one with `VkExternalMemoryBufferCreateInfo`, and retries a failure as the
/// application asked; enforce serves redirected maps from its own mapping without calling down —
/// so a one-shot failure of exactly the Nth driver call may be absorbed (the application then
/// succeeds, with a fault model a real device does not have). Enforce also issues a bind of its
/// own ahead of the application's (a staging buffer mapped before it is bound is bound into its
/// device buffer's memory first), so one bind fault persists too; the other fails once, and echo
/// never retries an application's bind. And enforce does not make the staging allocations the
/// plan marks `skip_allocation` at all (issue 14): an allocation fault from the Nth driver call on
/// where enforce makes fewer than N allocations hits nothing — the application runs to the end
/// with the reference output, as it would on a device with that much less memory in use.
const APP_FAULTS: [&str; 7] = [
    "vkAllocateMemory@1+",
    "vkAllocateMemory@4+",
    "vkAllocateMemory@5+",
    "vkBindBufferMemory@2+",
    "vkBindBufferMemory@3",
    "vkMapMemory@2+",
    "vkCreateBuffer@3+",
];

/// Every fault reaches saxpy exactly as without echo, in every mode: same exit status, same
/// error message, same number of injected faults (and the run without echo really failed: the
/// fault was injected and the application saw it).
#[test]
fn application_faults_reach_the_application_unchanged() {
    let a = args("saxpy");
    let enforce = enforce_world(&a);
    // How many allocations reach the driver under enforce (the test layer counts them).
    let memlog = enforce.dir.join("enforce.mem.jsonl");
    let mut cmd = enforce.command(&echo_tests::samples::samples_bin(), &a);
    cmd.env("VK_ECHO_TEST_MEMLOG", &memlog);
    let clean = echo_tests::samples::run_command(cmd);
    let reference = clean.checksum();
    let log: Value =
        serde_json::from_str(std::fs::read_to_string(&memlog).unwrap().trim()).unwrap();
    let driver_allocations = log["allocations"].as_u64().unwrap();
    let mut total = 0;
    let mut wrong = Vec::new();
    let mut absorbed = 0;
    for fault in APP_FAULTS {
        let base = world(None).set("VK_ECHO_TEST_FAIL", fault).sample(&a);
        let want = seen(&base);
        assert_ne!(
            want.code,
            Some(0),
            "{fault}: the application did not fail without echo:\n{}",
            base.stderr
        );
        let n = injected(&base);
        assert!(n >= 1, "{fault}: nothing injected");
        for mode in ["off", "profile", "enforce"] {
            let run = if mode == "enforce" {
                run_in(&enforce, fault, &a)
            } else {
                world(Some(mode)).set("VK_ECHO_TEST_FAIL", fault).sample(&a)
            };
            let nth = fault
                .strip_prefix("vkAllocateMemory@")
                .and_then(|n| n.trim_end_matches('+').parse::<u64>().ok());
            if mode == "enforce" && nth.is_some_and(|n| n > driver_allocations) {
                // The allocation the fault would hit is one enforce does not make.
                assert_eq!(injected(&run), 0, "{fault} under enforce");
                assert_eq!(seen(&run).checksum.as_deref(), Some(reference.as_str()));
                absorbed += 1;
                continue;
            }
            if seen(&run) != want {
                wrong.push(format!(
                    "{fault} under echo {mode}: the application saw {:?}, without echo {:?}",
                    seen(&run),
                    want
                ));
            }
            // A retry of a failed call, or a call echo serves itself, changes the count.
            let got = injected(&run);
            if fault.ends_with('+') && mode != "off" {
                assert!(got >= 1, "{fault} under echo {mode}: nothing injected");
            } else {
                assert_eq!(got, n, "{fault} under echo {mode}");
            }
            total += got;
        }
    }
    eprintln!(
        "{} application faults injected under echo ({} kinds x 3 modes); {absorbed} hit allocations enforce does not make ({driver_allocations} reach the driver)",
        total,
        APP_FAULTS.len()
    );
    assert!(
        driver_allocations >= 1 && absorbed >= 1,
        "the fault list covers an allocation enforce skips and one it makes"
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

fn run_in(w: &World, fault: &str, args: &[&str]) -> SampleRun {
    let mut cmd = w.command(&echo_tests::samples::samples_bin(), args);
    cmd.env("VK_ECHO_TEST_FAIL", fault);
    echo_tests::samples::run_command(cmd)
}

/// Through the discrete table echo is inactive: the fault reaches the application as without it.
#[test]
fn application_faults_on_a_discrete_device() {
    let a = args("saxpy");
    let mk = |echo| {
        World::new(Layers {
            echo,
            test_layer: true,
            validation: false,
        })
        .set("VK_ECHO_TEST_FAIL", "vkAllocateMemory@2")
    };
    let base = mk(None).sample(&a);
    assert_ne!(base.status.code(), Some(0));
    for mode in ["profile", "enforce"] {
        assert_eq!(seen(&mk(Some(mode)).sample(&a)), seen(&base), "{mode}");
    }
}

// ------------------------------------------------------------------ echo's own calls

/// Profile mode: every host-pointer import of echo's double mapping fails; echo falls back to
/// plain allocations and the application's output is identical.
#[test]
fn profile_import_failure_falls_back() {
    let a = args("saxpy");
    let want = reference(&a);
    let w = world(Some("profile"))
        .set("VK_ECHO_TEST_FAIL", "vkAllocateMemory:import@*")
        .set("VK_ECHO_TRACE", "trace.jsonl");
    let run = w.sample(&a);
    assert_eq!(run.checksum(), want, "{}", run.stderr);
    assert!(
        injected(&run) > 0,
        "echo made no host-pointer import to fail: the fallback was not exercised\n{}",
        run.stderr
    );
}

/// Enforce mode: echo's own maps of device allocations (served to redirected staging maps) and
/// its redirected binds fail; echo falls back to what the application asked and the output is
/// identical.
#[test]
fn enforce_own_map_and_bind_failures_fall_back() {
    for sample in ["saxpy", "pipeline"] {
        let a = args(sample);
        let want = reference(&a);
        let w = enforce_world(&a);
        let mut total = 0;
        for fault in ["vkMapMemory:older@*", "vkBindBufferMemory:older@*"] {
            let run = run_in(&w, fault, &a);
            assert_eq!(
                run.checksum(),
                want,
                "{sample} {fault}: output changed\n{}",
                run.stderr
            );
            assert!(
                echo_warnings(&run).len() <= 2,
                "{sample} {fault}: too many warnings:\n{}",
                run.stderr
            );
            total += injected(&run);
        }
        assert!(
            total > 0,
            "{sample}: echo made no map or redirected bind of its own to fail"
        );
    }
}

/// Issue 14: suballoc's device block is made only in its window under enforce — an allocation
/// echo makes itself at the application's `vkAllocateMemory`. When the driver refuses it, echo
/// makes the allocation whole as asked, and the application sees what it sees without echo.
#[test]
fn a_refused_window_allocation_falls_back_to_the_applications_own() {
    let a = args("suballoc");
    let enforce = enforce_world(&a).set("VK_ECHO_LOG", "info");
    let clean = enforce.sample(&a);
    assert_eq!(seen(&clean).code, Some(0), "{}", clean.stderr);
    assert!(clean.stderr.contains("made only in ["), "{}", clean.stderr);
    for fault in ["vkAllocateMemory@1+", "vkAllocateMemory@2+"] {
        let base = world(None).set("VK_ECHO_TEST_FAIL", fault).sample(&a);
        let want = seen(&base);
        assert_ne!(want.code, Some(0), "{fault}: without echo it fails");
        let run = run_in(&enforce, fault, &a);
        assert_eq!(seen(&run), want, "{fault} under enforce:\n{}", run.stderr);
        assert!(injected(&run) >= 1, "{fault}: nothing injected");
        if fault.starts_with("vkAllocateMemory@1") {
            // The first allocation at the driver is echo's window.
            assert!(run.stderr.contains("could not be made"), "{}", run.stderr);
        }
    }
}
