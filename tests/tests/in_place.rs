//! Exact host writes (issue 54), on every host driver: `tests/c/c_in_place.c MODE` is an upload
//! pair S → D whose device buffer an in-place kernel changes, read back through R (saxpy's `y`).
//! With the default settings (`host_writes=any`, no vouch) profile records the bytes each host
//! write covered: `whole`, `same` (the same bytes rewritten: content comparison would see
//! nothing) and `memcpy` (glibc's string moves) rewrite every byte, so the upload is applied; `half`
//! and `pages` (every page touched, not every byte) leave bytes the kernel changed, so it is
//! refused, naming the bytes. Every mode prints under profile and enforce what it prints alone.

use echo_tests::drivers::Driver;
use echo_tests::world::{analyze_plan as analyze, program, scratch, World};
use std::path::Path;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(180);

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// Runs `c_in_place ARGS` on `driver` with echo in `mode` (None: no echo) and the default
/// `host_writes` (`any`, said here so that a caller's environment cannot vouch); returns
/// (success, stdout).
fn run(
    driver: Driver,
    mode: Option<&'static str>,
    args: &[&str],
    env: &[(&str, String)],
) -> (bool, String) {
    let mut w = driver
        .select(World::echo(mode))
        .set("VK_ECHO_HOST_WRITES", "any");
    for (k, v) in env {
        w = w.set(k, v);
    }
    let r = echo_tests::world::run_within(w.command(&program("c_in_place"), args), LIMIT);
    (r.status.success(), format!("{}{}", r.stdout, r.stderr))
}

/// Does the plan share S (staging buffer #1) with D? Its group's members name #1.
fn upload_applied(plan: &serde_json::Value) -> bool {
    plan["groups"].as_array().is_some_and(|g| {
        g.iter().any(|g| {
            g["members"]
                .as_array()
                .is_some_and(|m| m.iter().any(|m| m["number"] == 1 || m["buffer"] == 1))
        })
    })
}

fn check(driver: Driver, mode: &'static str, applied: bool) {
    let dir = scratch(&format!("in-place-{}-{mode}", driver.name()));
    let a = [mode];
    let (ok, want) = run(driver, None, &a, &[]);
    assert!(ok, "{mode} on {} without echo: {want}", driver.name());
    let at = |what: &str| format!("{mode} on {}: {what}", driver.name());
    let trace = dir.join(format!("{mode}.jsonl"));
    let plan_path = dir.join(format!("{mode}.plan.json"));
    let (ok, out) = run(driver, Some("profile"), &a, &[("VK_ECHO_TRACE", s(&trace))]);
    assert!(
        ok && out.lines().next() == want.lines().next(),
        "{}: {out}",
        at("profile")
    );
    let (plan, text) = analyze(&trace, &plan_path);
    let t = std::fs::read_to_string(&trace).unwrap();
    assert!(
        t.contains("\"host_writes\""),
        "{}",
        at("the trace holds exact host writes")
    );
    let groups = plan["groups"].to_string();
    let rejected = plan["rejected"].to_string();
    if applied {
        assert!(
            !plan["groups"].as_array().is_none_or(Vec::is_empty) && !rejected.contains("S1"),
            "{}: {plan}\n{text}",
            at("the upload must be applied by default")
        );
    } else {
        assert!(
            rejected.contains("did not rewrite"),
            "{}: groups {groups}\nrejected {rejected}\n{text}",
            at("the upload must be refused, naming the bytes")
        );
    }
    let (ok, out) = run(
        driver,
        Some("enforce"),
        &a,
        &[("VK_ECHO_PLAN", s(&plan_path))],
    );
    assert!(
        ok && out.lines().next() == want.lines().next(),
        "{}: {out}\nwant {want}",
        at("enforce")
    );
    let _ = upload_applied;
}

#[test]
fn rewrites_of_every_byte_are_applied_by_default_on_lavapipe() {
    for mode in ["whole", "same", "memcpy"] {
        check(Driver::Lavapipe, mode, true);
    }
}

#[test]
fn partial_rewrites_are_refused_by_default_on_lavapipe() {
    for mode in ["half", "pages"] {
        check(Driver::Lavapipe, mode, false);
    }
}

#[test]
fn exact_host_writes_on_swiftshader() {
    for (mode, applied) in [
        ("whole", true),
        ("same", true),
        ("half", false),
        ("pages", false),
    ] {
        check(Driver::SwiftShader, mode, applied);
    }
}
