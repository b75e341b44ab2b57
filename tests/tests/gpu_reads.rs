//! What the GPU reads is what echo follows (issue 44), on every host driver: `tests/c/c_gpu_reads.c
//! MODE` is an upload pair S → D whose device buffer D is read by a command buffer recorded once,
//! through state the specification lets change between recording and submission — a descriptor
//! set with update-after-bind bindings pointed at D after recording (by a write, a template, a
//! descriptor copy, or in a secondary command buffer), an update-unused-while-pending |
//! partially-bound array whose element the host picks per submission — or as a vertex buffer.
//! The host writes S's next value while that read waits on an event: a legal program whose pair
//! echo must refuse (aliasing S and D would change what B reads).
//!
//! On SwiftShader (and Mesa 25, through the gate in the Vulkan 1.4 stage) every mode runs; lavapipe
//! 22.3 has none of the descriptor-indexing features, and the program says so. In every mode the
//! output under profile, enforce and auto mode twice is the program's own and the pair is refused.
//! The planted fault `VK_ECHO_TEST_LATE_AT_RECORD=1` (descriptors taken as recorded, as before
//! issue 44) makes echo accept the pair and the enforced output wrong: the checks can fail.
//! `vertex`: the profiled draw finishes 20 times out of 20 on SwiftShader (its vertex fetch reads
//! past the last vertex; echo's double mapping used to end on an unmapped page).

use echo_tests::drivers::Driver;
use echo_tests::world::{analyze_plan as analyze, Layers, World};
use std::path::{Path, PathBuf};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(180);
const MODES: [&str; 5] = ["uab", "template", "copy", "secondary", "pending"];

fn program() -> PathBuf {
    Path::new(env!("OUT_DIR")).join("c_gpu_reads")
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("echo-gpu-reads-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// Runs `c_gpu_reads ARGS` on `driver` with echo in `mode` (None: no echo); returns
/// (exit success, stdout).
fn run(
    driver: Driver,
    mode: Option<&'static str>,
    args: &[&str],
    env: &[(&str, String)],
) -> (bool, String) {
    let mut w = driver.select(World::new(Layers {
        echo: mode,
        ..Default::default()
    }));
    for (k, v) in env {
        w = w.set(k, v);
    }
    let r = echo_tests::world::run_within(w.command(&program(), args), LIMIT);
    (r.status.success(), format!("{}{}", r.stdout, r.stderr))
}

/// The program's own output without echo (must be right).
fn reference(driver: Driver, args: &[&str]) -> String {
    let (ok, out) = run(driver, None, args, &[]);
    assert!(ok, "{} {args:?} without echo: {out}", driver.name());
    out
}

#[test]
fn late_descriptors_are_followed_on_every_driver() {
    for driver in Driver::ALL {
        let dir = scratch(driver.name());
        for mode in MODES {
            let a = [mode];
            let want = reference(driver, &a);
            if driver == Driver::Lavapipe {
                // lavapipe 22.3 has no update-after-bind or update-unused-while-pending.
                assert!(want.contains("skipped"), "{mode} on lavapipe: {want}");
                continue;
            }
            assert!(
                want.contains("as the program means"),
                "{mode} on {}: {want}",
                driver.name()
            );
            let at = |what: &str| format!("{mode} on {}: {what}", driver.name());
            let trace = dir.join(format!("{mode}.jsonl"));
            let plan_path = dir.join(format!("{mode}.plan.json"));
            let (_, out) = run(driver, Some("profile"), &a, &[("VK_ECHO_TRACE", s(&trace))]);
            assert_eq!(out.lines().next(), want.lines().next(), "{}", at("profile"));
            let (plan, text) = analyze(&trace, &plan_path);
            assert_eq!(
                plan["groups"].as_array().map_or(0, Vec::len),
                0,
                "{}: {plan}\n{text}",
                at("the pair must be refused")
            );
            assert!(
                !plan["rejected"].as_array().map_or(true, Vec::is_empty),
                "{}",
                at("a refusal with its cause")
            );
            let (ok, out) = run(
                driver,
                Some("enforce"),
                &a,
                &[("VK_ECHO_PLAN", s(&plan_path))],
            );
            assert!(
                ok && out.lines().next() == want.lines().next(),
                "{}: {out}",
                at("enforce")
            );
            let cache = dir.join(format!("cache-{mode}"));
            for n in 1..=2 {
                let (ok, out) = run(
                    driver,
                    Some("auto"),
                    &a,
                    &[("VK_ECHO_CACHE_DIR", s(&cache))],
                );
                assert!(
                    ok && out.lines().next() == want.lines().next(),
                    "{}: {out}",
                    at(&format!("auto run {n}"))
                );
            }
        }
    }
}

/// The planted fault: descriptors taken as they stood at recording (the trace names the scratch
/// buffer, not D) make echo accept the pair, and enforcing that plan prints `2 3 4 5`.
#[test]
fn descriptors_taken_at_recording_give_wrong_output() {
    let driver = Driver::SwiftShader;
    let dir = scratch("planted");
    for mode in MODES {
        let a = [mode];
        let trace = dir.join(format!("{mode}.jsonl"));
        let plan_path = dir.join(format!("{mode}.plan.json"));
        let planted = [
            ("VK_ECHO_TRACE", s(&trace)),
            ("VK_ECHO_TEST_LATE_AT_RECORD", "1".to_string()),
        ];
        run(driver, Some("profile"), &a, &planted);
        let (plan, text) = analyze(&trace, &plan_path);
        assert_eq!(
            plan["groups"].as_array().map_or(0, Vec::len),
            1,
            "{mode}: blind to the update, the analysis accepts the pair: {plan}\n{text}"
        );
        let (ok, out) = run(
            driver,
            Some("enforce"),
            &a,
            &[("VK_ECHO_PLAN", s(&plan_path))],
        );
        assert!(
            !ok && out.contains("WRONG"),
            "{mode}: enforcing the blind plan must change the output: {out}"
        );
    }
}

/// A vertex buffer drawn with a render pass, profiled (page protection, double mapping): every run
/// finishes with the program's output, on every driver.
#[test]
fn profiled_draws_finish_on_every_driver() {
    for driver in Driver::ALL {
        let a = ["vertex"];
        let want = reference(driver, &a);
        assert!(
            want.contains("as the program means"),
            "{}: {want}",
            driver.name()
        );
        let runs = if driver == Driver::SwiftShader { 20 } else { 3 };
        let dir = scratch(&format!("vertex-{}", driver.name()));
        for n in 0..runs {
            let trace = dir.join(format!("{n}.jsonl"));
            let (ok, out) = run(driver, Some("profile"), &a, &[("VK_ECHO_TRACE", s(&trace))]);
            assert!(
                ok && out.lines().next() == want.lines().next(),
                "{} profile run {n}: {out}",
                driver.name()
            );
        }
    }
}
