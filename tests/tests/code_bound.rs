//! What runs is known (issue 53), on the real loader with lavapipe 22.3 and SwiftShader:
//! `tests/c/c_code_bound.c MODE` is an upload pair S → D whose device buffer the code of a later
//! submission writes or only reads, where that code is bound outside a plain pipeline — a graphics
//! pipeline library link that takes its vertex shader from a library (`lib`; the control
//! `lib_mono` holds the same stages in one pipeline) or a compute shader object (`so`, Mesa 25
//! only: the Vulkan 1.4 stage runs it through the gate). In every mode the output under profile,
//! enforce and auto mode twice is the program's own; a mode that writes D is refused for S1 and
//! a mode that only reads it (`lib_read`, `so_read`) is applied. The planted fault: the trace with
//! the library's reflection taken away (the layer of round 5 saw only the link's `pStages`) lets
//! the pair through, and enforcing that plan changes the output — so the comparisons can fail.

use echo_tests::drivers::Driver;
use echo_tests::world::{analyze_plan as analyze, program, scratch, World};
use std::path::Path;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(180);

/// The drivers to run on: `ECHO_TEST_DRIVER` alone when it is set (the Vulkan 1.4 stage runs this
/// binary inside the Debian 13 root with `lavapipe`, Mesa 25), else every host driver.
fn drivers() -> Vec<Driver> {
    match std::env::var("ECHO_TEST_DRIVER") {
        Ok(v) if !v.trim().is_empty() => vec![Driver::from_env()],
        _ => Driver::ALL.to_vec(),
    }
}

fn run(d: Driver, mode: Option<&'static str>, args: &[&str], env: &[(&str, String)]) -> String {
    let mut w = d.select(World::echo(mode));
    for (k, v) in env {
        w = w.set(k, v);
    }
    let r = echo_tests::world::run_within(w.command(&program("c_code_bound"), args), LIMIT);
    assert!(
        r.status.success(),
        "c_code_bound {args:?} on {} (echo {mode:?}) failed ({}):\n{}\n{}",
        d.name(),
        r.status,
        r.stdout,
        r.stderr
    );
    r.stdout
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// Runs MODE in every echo mode on `d` and checks the verdict: `Some(condition)` refused with
/// that condition, `None` applied (one group). Returns false when the driver lacks the extension.
fn check(d: Driver, mode: &'static str, refused: Option<&str>) -> bool {
    let dir = scratch(&format!("code-{}-{mode}", d.name()));
    let a = [mode, "3"];
    let want = run(d, None, &a, &[]);
    if want.contains("unsupported") {
        return false;
    }
    assert!(
        want.contains("as the program means"),
        "{mode} on {} without echo: {want}",
        d.name()
    );
    let trace = dir.join("t.jsonl");
    let plan_path = dir.join("p.json");
    assert_eq!(
        run(d, Some("profile"), &a, &[("VK_ECHO_TRACE", s(&trace))]),
        want,
        "{mode} on {}: profile",
        d.name()
    );
    let (plan, text) = analyze(&trace, &plan_path);
    d.check_device(mode, plan["context"]["device_name"].as_str().unwrap_or(""));
    let groups = plan["groups"].as_array().map_or(0, Vec::len);
    match refused {
        Some(cond) => {
            assert_eq!(groups, 0, "{mode} on {}: {text}", d.name());
            assert_eq!(
                plan["rejected"][0]["condition"],
                cond,
                "{mode} on {}: {text}",
                d.name()
            );
        }
        None => assert_eq!(groups, 1, "{mode} on {}: {text}", d.name()),
    }
    let enforced = run(d, Some("enforce"), &a, &[("VK_ECHO_PLAN", s(&plan_path))]);
    assert_eq!(enforced, want, "{mode} on {}: enforce", d.name());
    let cache = dir.join("cache");
    for n in 1..=2 {
        assert_eq!(
            run(d, Some("auto"), &a, &[("VK_ECHO_CACHE_DIR", s(&cache))]),
            want,
            "{mode} on {}: auto run {n}",
            d.name()
        );
    }
    true
}

#[test]
fn a_library_link_is_judged_by_every_stage_it_runs() {
    for d in drivers() {
        for (mode, refused) in [
            ("lib", Some("S1")),
            ("lib_mono", Some("S1")),
            ("lib_read", None),
        ] {
            assert!(
                check(d, mode, refused),
                "{} lacks VK_EXT_graphics_pipeline_library, which it had when issue 53 was filed",
                d.name()
            );
        }
    }
}

/// Shader objects: Mesa 25 only. The Vulkan 1.4 stage (scripts/modern-check.sh, pass
/// `code-bound`) runs this binary inside the Debian 13 root with `ECHO_TEST_DRIVER=lavapipe` and
/// `ECHO_REQUIRE_SHADER_OBJECT=1`, where a missing extension fails; on the host's drivers the
/// program says the extension is missing, in every mode alike, and the test checks that it does
/// so rather than failing.
#[test]
fn a_shader_object_is_judged_by_its_own_code() {
    let require = std::env::var("ECHO_REQUIRE_SHADER_OBJECT").is_ok_and(|v| v == "1");
    for d in drivers() {
        for (mode, refused) in [
            ("so", Some("S1")),
            ("so_pipe", Some("S1")),
            ("so_read", None),
        ] {
            let ran = check(d, mode, refused);
            assert!(
                ran || !require,
                "{mode}: {} lacks VK_EXT_shader_object, and ECHO_REQUIRE_SHADER_OBJECT=1",
                d.name()
            );
        }
    }
}

/// The planted fault: the library's reflection removed from the trace — every use the draw
/// records of D made read-only, as the layer of round 5 recorded it — and the pair is accepted;
/// enforcing that plan prints the wrong bytes.
#[test]
fn a_plan_blind_to_the_library_gives_wrong_output() {
    let d = Driver::Lavapipe;
    let dir = scratch("code-planted");
    let a = ["lib", "3"];
    let want = run(d, None, &a, &[]);
    let trace = dir.join("lib.jsonl");
    run(d, Some("profile"), &a, &[("VK_ECHO_TRACE", s(&trace))]);
    let text = std::fs::read_to_string(&trace).unwrap();
    let draw: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("\"command\":\"vkCmdDraw\""))
        .collect();
    assert!(
        !draw.is_empty() && draw.iter().all(|l| l.contains("\"access\":\"readwrite\"")),
        "the draw's use of D is recorded as a write: {draw:?}"
    );
    let blind: String = text
        .lines()
        .map(|l| {
            if l.contains("\"command\":\"vkCmdDraw\"") {
                l.replace("\"access\":\"readwrite\"", "\"access\":\"read\"")
            } else {
                l.to_string()
            }
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let blind_trace = dir.join("blind.jsonl");
    std::fs::write(&blind_trace, blind).unwrap();
    let plan_path = dir.join("blind.plan.json");
    let (plan, text) = analyze(&blind_trace, &plan_path);
    assert_eq!(
        plan["groups"].as_array().map_or(0, Vec::len),
        1,
        "the blind trace accepts the pair: {text}"
    );
    let out = run(d, Some("enforce"), &a, &[("VK_ECHO_PLAN", s(&plan_path))]);
    assert_ne!(out, want, "the blind plan must show in the output");
    assert!(out.contains("WRONG"), "{out}");
}
