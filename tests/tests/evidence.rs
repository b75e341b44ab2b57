//! No wrong output from missing evidence (issue 22), on the real loader and lavapipe:
//! `tests/c/c_overlap_read.c ITERS K` is a persistent readback pair in which, in iteration K
//! only, the host also reads the staging buffer while the GPU works (legal: it then holds the
//! previous result). Whatever K, under the default settings, auto mode twice, and
//! `context=program` with an argument list longer than any profiled, its output equals the
//! program's without echo. The planted faults: the pair forced onto a run with an early read
//! changes the output (so the comparison can fail), sampled validation refuses instead of
//! accepting, and the guard counts the read it cannot make right.

use echo_tests::world::{program, scratch, World};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

const ITERS: u32 = 8;
const LIMIT: Duration = Duration::from_secs(120);

struct Run {
    stdout: String,
    stderr: String,
}

/// Runs c_overlap_read ARGS with echo in `mode` (`None`: not installed) and `env`.
fn run(mode: Option<&'static str>, args: &[String], env: &[(&str, String)]) -> Run {
    let mut w = World::echo(mode);
    for (k, v) in env {
        w = w.set(k, v);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = echo_tests::world::run_within(w.command(&program("c_overlap_read"), &args), LIMIT);
    assert!(
        r.status.success(),
        "c_overlap_read {args:?} (echo {mode:?}) failed ({}):\n{}\n{}",
        r.status,
        r.stdout,
        r.stderr
    );
    Run {
        stdout: r.stdout,
        stderr: r.stderr,
    }
}

fn args(iters: u32, k: u32) -> Vec<String> {
    vec![iters.to_string(), k.to_string()]
}

fn analyze(trace: &Path, plan: &Path) -> Value {
    echo_tests::world::analyze_plan(trace, plan).0
}

fn groups(plan: &Value) -> usize {
    plan["groups"].as_array().map_or(0, Vec::len)
}

fn stats(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn sum(stats: &[Value], field: &str) -> u64 {
    stats.iter().map(|s| s[field].as_u64().unwrap_or(0)).sum()
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// Profile (default settings) → analyze → enforce, and auto mode twice, for every K: the output
/// is the program's without echo. K = 0 (never an early read) is the control whose pair is
/// accepted and applied, so the comparison is not vacuous.
#[test]
fn every_k_is_right_under_the_defaults_and_auto_mode() {
    let dir = scratch("defaults");
    for k in 0..=ITERS {
        let a = args(ITERS, k);
        let want = run(None, &a, &[]).stdout;
        let trace = dir.join(format!("t{k}.jsonl"));
        let plan_path = dir.join(format!("p{k}.json"));
        let prof = run(Some("profile"), &a, &[("VK_ECHO_TRACE", s(&trace))]);
        assert_eq!(prof.stdout, want, "K={k}: profile changed the output");
        let plan = analyze(&trace, &plan_path);
        let st = dir.join(format!("s{k}.jsonl"));
        let enf = run(
            Some("enforce"),
            &a,
            &[("VK_ECHO_PLAN", s(&plan_path)), ("VK_ECHO_STATS", s(&st))],
        );
        assert_eq!(enf.stdout, want, "K={k}: enforce changed the output");
        if k == 0 {
            assert_eq!(groups(&plan), 1, "K=0: the readback pair is accepted");
            let st = stats(&st);
            assert_eq!(sum(&st, "groups_applied"), 1, "{st:?}");
            assert_eq!(sum(&st, "bytes_elided"), u64::from(ITERS) * (4 << 20));
        } else {
            assert_eq!(groups(&plan), 0, "K={k}: the early read refuses the pair");
            let why = plan["rejected"][0]["condition"].as_str().unwrap_or("");
            assert_eq!(why, "S2", "K={k}: {plan}");
        }
        let cache = dir.join(format!("cache{k}"));
        for n in 1..=2 {
            let out = run(Some("auto"), &a, &[("VK_ECHO_CACHE_DIR", s(&cache))]);
            assert_eq!(
                out.stdout, want,
                "K={k}: auto mode run {n} changed the output"
            );
        }
    }
}

/// The planted fault behind the test above: the K = 0 plan forced onto a run with an early read
/// (what sampled validation used to accept) changes the early checksum.
#[test]
fn forcing_the_pair_onto_an_early_read_changes_the_output() {
    let dir = scratch("forced");
    let good = args(ITERS, 0);
    let trace = dir.join("t.jsonl");
    run(Some("profile"), &good, &[("VK_ECHO_TRACE", s(&trace))]);
    let plan_path = dir.join("p.json");
    let mut plan = analyze(&trace, &plan_path);
    assert_eq!(groups(&plan), 1);
    let racy = args(ITERS, 5);
    // The plan names its arguments: give it the racy run's (as a stale cache would).
    let want = run(None, &racy, &[]).stdout;
    let probe = dir.join("probe.json");
    let probe_trace = dir.join("probe.jsonl");
    run(
        Some("profile"),
        &racy,
        &[("VK_ECHO_TRACE", s(&probe_trace))],
    );
    let other = analyze(&probe_trace, &probe);
    plan["context"] = other["context"].clone();
    std::fs::write(&plan_path, serde_json::to_string(&plan).unwrap()).unwrap();
    let st = dir.join("s.jsonl");
    let out = run(
        Some("enforce"),
        &racy,
        &[("VK_ECHO_PLAN", s(&plan_path)), ("VK_ECHO_STATS", s(&st))],
    );
    assert_eq!(sum(&stats(&st), "groups_applied"), 1);
    assert_ne!(out.stdout, want, "the forced pair must show in the output");
    // The usual checksum (after the fence) is the same: only the early read differs.
    let field = |o: &str| o.split_whitespace().nth(1).unwrap_or_default().to_string();
    assert_eq!(field(&out.stdout), field(&want));
}

/// Sampled validation (an option now) never accepts the pair whatever K: a window it did not
/// watch refuses (evidence), a race it saw refuses (S2).
#[test]
fn sampled_validation_refuses_for_every_k() {
    let dir = scratch("sampled");
    for k in 0..=ITERS {
        let trace = dir.join(format!("t{k}.jsonl"));
        run(
            Some("profile"),
            &args(ITERS, k),
            &[
                ("VK_ECHO_TRACE", s(&trace)),
                ("VK_ECHO_VALIDATE_SAMPLE_EVERY", "8".into()),
            ],
        );
        let plan = analyze(&trace, &dir.join(format!("p{k}.json")));
        assert_eq!(groups(&plan), 0, "K={k}: {plan}");
        let why = plan["rejected"][0]["condition"].as_str().unwrap_or("");
        assert!(why == "Evidence" || why == "S2", "K={k}: {why}");
    }
}

/// `context=program`: the plan becomes stable on two argument lists without an early read; a
/// longer run whose early read falls past every profiled iteration gets the program's output
/// (the persistent readback group is not extrapolated; the statistics say why), while the
/// profiled arguments still have it applied.
#[test]
fn context_program_does_not_extrapolate_a_persistent_readback() {
    let dir = scratch("program");
    let cache = dir.join("cache");
    let env = |st: &Path| {
        vec![
            ("VK_ECHO_CACHE_DIR", s(&cache)),
            ("VK_ECHO_CONTEXT", "program".to_string()),
            ("VK_ECHO_STATS", s(st)),
        ]
    };
    for (n, a) in [args(4, 0), args(6, 0)].iter().enumerate() {
        let st = dir.join(format!("profile{n}.jsonl"));
        let out = run(Some("auto"), a, &env(&st));
        assert_eq!(out.stdout, run(None, a, &[]).stdout);
        assert_eq!(stats(&st)[0]["mode"], "profile", "run {n} profiles");
    }
    // Profiled arguments: enforced, the group applied.
    let st = dir.join("again.jsonl");
    let a = args(6, 0);
    assert_eq!(
        run(Some("auto"), &a, &env(&st)).stdout,
        run(None, &a, &[]).stdout
    );
    let again = stats(&st);
    assert_eq!(again[0]["mode"], "enforce");
    assert_eq!(sum(&again, "groups_applied"), 1, "{again:?}");
    // A longer argument list, the early read past the profiled iterations.
    let long = args(12, 10);
    let st = dir.join("long.jsonl");
    let out = run(Some("auto"), &long, &env(&st));
    assert_eq!(out.stdout, run(None, &long, &[]).stdout, "{}", out.stderr);
    let long_stats = stats(&st);
    assert_eq!(long_stats[0]["mode"], "enforce", "{long_stats:?}");
    assert_eq!(sum(&long_stats, "groups_applied"), 0);
    assert_eq!(sum(&long_stats, "groups_planned"), 1);
    let why = long_stats[0]["not_applied"][0]["reason"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(
        why.contains("not profiled") && why.contains("persistent readback"),
        "{why}"
    );
}

/// The guard catches the read it cannot make right: the same plan with its extrapolation flag
/// forced on (the planted fault), under `context=program` and arguments no profile saw, applies
/// the group; the early read faults inside the window, is counted, warned about, and marks the
/// plan untrusted.
#[test]
fn the_guard_counts_a_read_inside_a_window_and_marks_the_plan_untrusted() {
    let dir = scratch("guard");
    let trace = dir.join("t.jsonl");
    run(
        Some("profile"),
        &args(4, 0),
        &[("VK_ECHO_TRACE", s(&trace))],
    );
    let plan_path = dir.join("p.json");
    let mut plan = analyze(&trace, &plan_path);
    assert_eq!(groups(&plan), 1);
    assert_eq!(plan["groups"][0]["extrapolable"], false);
    plan["groups"][0]["extrapolable"] = Value::Bool(true);
    std::fs::write(&plan_path, serde_json::to_string(&plan).unwrap()).unwrap();
    let st = dir.join("s.jsonl");
    let out = run(
        Some("enforce"),
        &args(6, 3),
        &[
            ("VK_ECHO_PLAN", s(&plan_path)),
            ("VK_ECHO_CONTEXT", "program".into()),
            ("VK_ECHO_STATS", s(&st)),
        ],
    );
    let st = stats(&st);
    assert_eq!(sum(&st, "groups_applied"), 1, "{st:?}\n{}", out.stderr);
    assert!(sum(&st, "guard_reads") >= 1, "{st:?}");
    assert!(
        out.stderr
            .contains("may differ from what the program reads without echo"),
        "{}",
        out.stderr
    );
    let mut marker = plan_path.as_os_str().to_owned();
    marker.push(".untrusted");
    assert!(Path::new(&marker).exists(), "no untrusted marker");
    // Without the early read the guard counts nothing.
    let st2 = dir.join("s2.jsonl");
    let _ = std::fs::remove_file(&marker);
    run(
        Some("enforce"),
        &args(6, 0),
        &[
            ("VK_ECHO_PLAN", s(&plan_path)),
            ("VK_ECHO_CONTEXT", "program".into()),
            ("VK_ECHO_STATS", s(&st2)),
        ],
    );
    let st2 = stats(&st2);
    assert_eq!(sum(&st2, "groups_applied"), 1, "{st2:?}");
    assert_eq!(sum(&st2, "guard_reads"), 0, "{st2:?}");
    assert!(!Path::new(&marker).exists());
}

/// Bytes elided count what ran: the command buffer recorded once and submitted ITERS times
/// elides ITERS times (the recorded count stays beside it).
#[test]
fn bytes_elided_count_submissions() {
    let dir = scratch("once");
    let a = vec![ITERS.to_string(), "0".into(), "once".into()];
    let trace = dir.join("t.jsonl");
    run(Some("profile"), &a, &[("VK_ECHO_TRACE", s(&trace))]);
    let plan_path = dir.join("p.json");
    assert_eq!(groups(&analyze(&trace, &plan_path)), 1);
    let st = dir.join("s.jsonl");
    let out = run(
        Some("enforce"),
        &a,
        &[("VK_ECHO_PLAN", s(&plan_path)), ("VK_ECHO_STATS", s(&st))],
    );
    assert_eq!(out.stdout, run(None, &a, &[]).stdout);
    let st = stats(&st);
    let mib4 = 4u64 << 20;
    assert_eq!(sum(&st, "bytes_elided"), mib4, "recorded once: {st:?}");
    assert_eq!(sum(&st, "regions_elided"), 1);
    assert_eq!(
        sum(&st, "bytes_elided_run"),
        u64::from(ITERS) * mib4,
        "{st:?}"
    );
    assert_eq!(sum(&st, "copies_elided_run"), u64::from(ITERS));
}
