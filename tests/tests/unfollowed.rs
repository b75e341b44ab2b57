//! Complete by construction (issue 32), on the real loader and lavapipe: `tests/c/c_unfollowed.c
//! MODE` is an upload pair S → D whose device buffer D is then reached only by MODE's command —
//! `vkCmdCopyBufferToImage2` (b2i2; b2i1 is the 1.0 command, the control), `vkCmdCopyQueryPoolResults`
//! writing into D (qp), a second buffer bound over D's memory and read by a dispatch (aliasx). In
//! every mode the output under profile, enforce and auto mode twice is the program's own, and the
//! analysis says which command (or which bound buffer) kept the pair apart. The planted fault: the
//! plan of a run that never uses MODE's command, forced onto one that does, changes the output — so
//! the comparisons above can fail.

use echo_tests::world::{analyze_plan as analyze, program, scratch, World};
use std::path::Path;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);

fn run(mode: Option<&'static str>, args: &[&str], env: &[(&str, String)]) -> String {
    let mut w = World::echo(mode);
    for (k, v) in env {
        w = w.set(k, v);
    }
    let r = echo_tests::world::run_within(w.command(&program("c_unfollowed"), args), LIMIT);
    assert!(
        r.status.success(),
        "c_unfollowed {args:?} (echo {mode:?}) failed ({}):\n{}\n{}",
        r.status,
        r.stdout,
        r.stderr
    );
    r.stdout
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// What the analysis must say kept the pair apart, per mode.
fn expected(mode: &str) -> (&'static str, &'static str) {
    match mode {
        // Followed now: the host's early write to S while B reads D is an S2 race, as in b2i1.
        "b2i1" | "b2i2" => ("S2", "rejected: S2"),
        "qp" => (
            "Compat",
            "through vkCmdCopyQueryPoolResults, a command echo does not follow",
        ),
        "aliasx" => ("Compat", "is bound over the same bytes as device buffer"),
        _ => unreachable!(),
    }
}

#[test]
fn every_mode_keeps_the_programs_output_and_says_why() {
    let dir = scratch("modes");
    for mode in ["b2i1", "b2i2", "qp", "aliasx"] {
        let a = [mode];
        let want = run(None, &a, &[]);
        assert!(
            want.contains("as the program means"),
            "{mode} without echo: {want}"
        );
        let trace = dir.join(format!("{mode}.jsonl"));
        let plan_path = dir.join(format!("{mode}.plan.json"));
        assert_eq!(
            run(Some("profile"), &a, &[("VK_ECHO_TRACE", s(&trace))]),
            want,
            "{mode}: profile"
        );
        let (plan, text) = analyze(&trace, &plan_path);
        assert_eq!(
            plan["groups"].as_array().map_or(0, Vec::len),
            0,
            "{mode}: {plan}"
        );
        let (condition, words) = expected(mode);
        assert_eq!(
            plan["rejected"][0]["condition"], condition,
            "{mode}: {plan}"
        );
        assert!(
            text.contains(words),
            "{mode}: the analysis does not say '{words}':\n{text}"
        );
        assert_eq!(
            run(Some("enforce"), &a, &[("VK_ECHO_PLAN", s(&plan_path))]),
            want,
            "{mode}: enforce"
        );
        let cache = dir.join(format!("cache-{mode}"));
        for n in 1..=2 {
            assert_eq!(
                run(Some("auto"), &a, &[("VK_ECHO_CACHE_DIR", s(&cache))]),
                want,
                "{mode}: auto run {n}"
            );
        }
    }
}

/// The planted fault: in `qp` the device buffer is written by a command echo does not follow.
/// With the trace's `aside` records removed — the trace a layer that did not hook the command
/// wrote before issue 32 — the pair is accepted, and enforcing that plan changes the output.
#[test]
fn a_plan_blind_to_the_command_gives_wrong_output() {
    let dir = scratch("planted");
    let a = ["qp"];
    let want = run(None, &a, &[]);
    let trace = dir.join("qp.jsonl");
    run(Some("profile"), &a, &[("VK_ECHO_TRACE", s(&trace))]);
    let text = std::fs::read_to_string(&trace).unwrap();
    assert!(
        text.contains("\"ev\":\"aside\"") || text.contains("\"aside\""),
        "no aside record in the trace"
    );
    let blind: String = text
        .lines()
        .filter(|l| !l.contains("vkCmdCopyQueryPoolResults"))
        .map(|l| format!("{l}\n"))
        .collect();
    let blind_trace = dir.join("blind.jsonl");
    std::fs::write(&blind_trace, blind).unwrap();
    let plan_path = dir.join("blind.plan.json");
    let (plan, _) = analyze(&blind_trace, &plan_path);
    assert_eq!(
        plan["groups"].as_array().map_or(0, Vec::len),
        1,
        "the blind trace accepts the pair: {plan}"
    );
    let out = run(Some("enforce"), &a, &[("VK_ECHO_PLAN", s(&plan_path))]);
    assert_ne!(out, want, "the blind plan must show in the output");
    assert!(out.contains("WRONG"), "{out}");
}
