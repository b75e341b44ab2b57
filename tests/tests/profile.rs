//! Profile mode end to end (issue 4): real samples on lavapipe through `vkecho profile`, the
//! traces they write, and what the analyzer makes of them.
//!
//! Sizes are small (1 MiB, 3 iterations): every run takes well under a second.

use echo_analyzer::analysis::{explain, plain_site, Decision};
use echo_analyzer::plan::{Condition, Thresholds};
use echo_analyzer::settings::parse_u64;
use echo_analyzer::trace::{read_trace, Access, Event, ObjectKey, Trace};
use echo_tests::samples::{self, run_command, SampleRun};
use echo_tests::world::scratch;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const SIZE: &str = "1";
const ITERS: &str = "3";

/// `target/<profile>/NAME`, next to `echo-samples`.
fn bin(name: &str) -> PathBuf {
    let b = samples::samples_bin().with_file_name(name);
    assert!(
        b.is_file(),
        "{} is missing: build the workspace first",
        b.display()
    );
    b
}

/// `vkecho profile --trace TRACE -- PROGRAM ARGS` with extra environment.
fn profile(trace: &Path, program: &Path, args: &[&str], env: &[(&str, &str)]) -> SampleRun {
    let mut cmd = Command::new(bin("vkecho"));
    cmd.arg("profile")
        .arg("--trace")
        .arg(trace)
        .arg("--")
        .arg(program);
    cmd.args(args);
    cmd.envs(env.iter().copied());
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        cmd.env("XDG_RUNTIME_DIR", std::env::temp_dir());
    }
    cmd.env_remove("VK_ECHO_MODE");
    run_command(cmd)
}

fn sample_args(name: &str) -> Vec<&str> {
    vec![
        name,
        "--size-mib",
        SIZE,
        "--iters",
        ITERS,
        "--variant",
        "staging",
    ]
}

fn profile_sample(name: &str, env: &[(&str, &str)]) -> (SampleRun, Trace) {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let trace = scratch(&format!("{name}-{n}")).join("trace.jsonl");
    let run = profile(&trace, &samples::samples_bin(), &sample_args(name), env);
    assert!(run.status.success(), "{}:\n{}", run.args, run.stderr);
    let f = std::fs::File::open(&trace)
        .unwrap_or_else(|e| panic!("no trace {}: {e}\n{}", trace.display(), run.stderr));
    let t = read_trace(std::io::BufReader::new(f)).expect("the trace reads back");
    (run, t)
}

fn no_layer(name: &str) -> SampleRun {
    samples::run_sample(&sample_args(name), &[("VK_ECHO_DISABLE", "1")])
}

/// Host accesses that happened while the submission they overlap was in flight: the access's
/// seq lies between a submission and the first observation of its fence. `(seq, buffer, access)`.
fn accesses_in_fence_windows(t: &Trace) -> Vec<(u64, u64, Access)> {
    let mut out = Vec::new();
    let subs: Vec<(u64, u64)> = t
        .records
        .iter()
        .filter_map(|r| match &r.event {
            Event::QueueSubmit { fence: Some(f), .. } => Some((r.seq, *f)),
            _ => None,
        })
        .collect();
    for r in &t.records {
        let Event::HostAccess { buffer, access } = &r.event else {
            continue;
        };
        let inside = subs.iter().any(|&(at, fence)| {
            let done = t.records.iter().find(|x| {
                x.seq > at
                    && match &x.event {
                        Event::FenceSignaled { fences } => fences.contains(&fence),
                        Event::DeviceWaitIdle | Event::QueueWaitIdle { .. } => true,
                        _ => false,
                    }
            });
            at < r.seq && !matches!(done, Some(d) if d.seq < r.seq)
        });
        if inside {
            out.push((r.seq, *buffer, *access));
        }
    }
    out
}

fn summary_count(stderr: &str, what: &str) -> u64 {
    stderr
        .lines()
        .find_map(|l| l.split_once(what).map(|x| x.1))
        .and_then(|v| {
            v.split(|c: char| !c.is_ascii_digit())
                .find(|s| !s.is_empty())
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no '{what}' in:\n{stderr}"))
}

/// The layer's closing line: `… N faults (…, M chained to the application, …)`.
fn guard_faults(stderr: &str) -> (u64, u64) {
    let line = stderr
        .lines()
        .find(|l| l.contains("host-access validation:") && l.contains("faults"))
        .unwrap_or_else(|| panic!("no guard statistics in:\n{stderr}"));
    let n = |after: &str| -> u64 {
        let (head, _) = line.split_once(after).unwrap();
        head.rsplit(|c: char| !c.is_ascii_digit())
            .find(|s| !s.is_empty())
            .unwrap()
            .parse()
            .unwrap()
    };
    (n(" faults"), n(" chained"))
}

#[test]
fn race_shows_a_host_write_inside_a_gpu_window_and_saxpy_shows_none() {
    let (race_run, race) = profile_sample("race", &[]);
    let inside = accesses_in_fence_windows(&race);
    assert!(
        inside.iter().any(|(_, _, a)| a.writes()),
        "race: no host write inside a GPU window; host accesses: {:?}",
        race.records
            .iter()
            .filter(|r| matches!(r.event, Event::HostAccess { .. }))
            .collect::<Vec<_>>()
    );
    assert!(summary_count(&race_run.stderr, "inside GPU-use windows:") >= 1);

    let (saxpy_run, saxpy) = profile_sample("saxpy", &[]);
    let host = saxpy
        .records
        .iter()
        .filter(|r| matches!(r.event, Event::HostAccess { .. }))
        .count();
    assert!(host > 0, "saxpy: the guard recorded no host access at all");
    assert_eq!(accesses_in_fence_windows(&saxpy), vec![]);
    assert_eq!(
        summary_count(&saxpy_run.stderr, "inside GPU-use windows:"),
        0
    );
}

#[test]
fn the_detector_has_teeth_without_the_double_mapping_the_driver_faults() {
    // Exact host writes (issue 54) fault once per store where the double mapping carries
    // them, and not without it: off here, so both runs count the same kinds of fault.
    let info = [("VK_ECHO_LOG", "info"), ("VK_ECHO_EXACT_WRITES", "0")];
    let (on_run, on) = profile_sample("saxpy", &info);
    let (off_run, off) = profile_sample(
        "saxpy",
        &[
            ("VK_ECHO_LOG", "info"),
            ("VK_ECHO_EXACT_WRITES", "0"),
            ("VK_ECHO_TEST_NO_DOUBLE_MAP", "1"),
        ],
    );
    assert!(on_run.stderr.contains("double-mapped"), "{}", on_run.stderr);
    assert!(
        off_run.stderr.contains("VK_ECHO_TEST_NO_DOUBLE_MAP"),
        "{}",
        off_run.stderr
    );
    let (f_on, _) = guard_faults(&on_run.stderr);
    let (f_off, _) = guard_faults(&off_run.stderr);
    let in_on = accesses_in_fence_windows(&on);
    let in_off = accesses_in_fence_windows(&off);
    eprintln!(
        "saxpy {SIZE} MiB x {ITERS}: guard faults with the double mapping {f_on}, without {f_off}; \
         the double mapping avoids {} driver-thread faults ({} of them inside GPU windows)",
        f_off.saturating_sub(f_on),
        in_off.len()
    );
    // With the double mapping lavapipe's threads use view A: nothing faults inside a window.
    assert_eq!(in_on, vec![]);
    // Without it the driver's copy threads touch the protected pages while the work runs.
    assert!(f_off > f_on, "driver faults {f_off} vs {f_on}");
    assert!(
        !in_off.is_empty(),
        "no driver-thread fault inside a GPU window"
    );
    // The application's own accesses are caught either way: it writes the upload buffers and
    // reads the readback buffer every iteration.
    for t in [&on, &off] {
        let acc: Vec<Access> = t
            .records
            .iter()
            .filter_map(|r| match r.event {
                Event::HostAccess { access, .. } => Some(access),
                _ => None,
            })
            .collect();
        assert!(acc.iter().any(|a| a.writes()), "{acc:?}");
        assert!(acc.contains(&Access::Read), "{acc:?}");
    }
    // Same output both ways.
    assert_eq!(on_run.checksum(), off_run.checksum());
}

#[test]
fn an_application_sigsegv_handler_still_receives_its_own_faults() {
    let segv = bin("echo-segv");
    for when in ["before", "late"] {
        let trace = scratch(&format!("segv-{when}")).join("trace.jsonl");
        let run = profile(&trace, &segv, &[when], &[("VK_ECHO_LOG", "info")]);
        let v = run.json();
        assert_eq!(
            v["own_faults"], v["expected_faults"],
            "{when}: {v}\n{}",
            run.stderr
        );
        assert!(v["own_faults"].as_u64().unwrap() >= 2, "{v}");
        assert_eq!(v["mismatches"], 0, "{when}: {v}");
        let (_, chained) = guard_faults(&run.stderr);
        if when == "before" {
            // Installed before the layer's: the layer chains the application's faults to it
            // and still validates its own staging buffers.
            assert_eq!(chained, v["own_faults"].as_u64().unwrap(), "{}", run.stderr);
            let t = read_trace(std::io::BufReader::new(
                std::fs::File::open(&trace).unwrap(),
            ))
            .unwrap();
            assert!(
                t.records
                    .iter()
                    .any(|r| matches!(r.event, Event::HostAccess { .. })),
                "no host access recorded"
            );
        } else {
            // Installed over the layer's: one warning, validation stops, the app is unharmed.
            assert!(
                run.stderr.contains("replaced the layer's SIGSEGV handler"),
                "{}",
                run.stderr
            );
        }
    }
}

fn buffer_keys(t: &Trace) -> Vec<ObjectKey> {
    let mut v: Vec<ObjectKey> = t
        .records
        .iter()
        .filter_map(|r| match &r.event {
            Event::BufferCreate { key, .. } | Event::MemoryAlloc { key, .. } => Some(key.clone()),
            _ => None,
        })
        .collect();
    v.sort();
    v
}

#[test]
fn keys_are_equal_across_two_runs_of_the_same_sample() {
    for name in ["saxpy", "pipeline"] {
        let (_, a) = profile_sample(name, &[]);
        let (_, b) = profile_sample(name, &[("VK_ECHO_LOG", "warn")]);
        let (ka, kb) = (buffer_keys(&a), buffer_keys(&b));
        assert!(!ka.is_empty());
        assert_eq!(ka, kb, "{name}: keys differ between two runs");
        // Distinct call sites really are distinct (not one hash for everything).
        let sites: std::collections::BTreeSet<&str> = ka.iter().map(|k| k.site.as_str()).collect();
        assert!(sites.len() >= 2, "{name}: {sites:?}");
    }
}

#[test]
fn an_unwritable_trace_path_is_a_warning_and_the_output_is_unchanged() {
    let reference = no_layer("saxpy").checksum();
    let trace = Path::new("/proc/echo-no-such-dir/trace.jsonl");
    let run = profile(trace, &samples::samples_bin(), &sample_args("saxpy"), &[]);
    assert!(run.status.success(), "{}", run.stderr);
    assert_eq!(run.checksum(), reference);
    let warnings: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("[VK_LAYER_echo] warn"))
        .collect();
    assert_eq!(warnings.len(), 1, "{}", run.stderr);
    assert!(
        warnings[0].contains("/proc/echo-no-such-dir"),
        "{}",
        warnings[0]
    );
}

/// What each sample's real trace must analyze to: positives accept every pair above the
/// thresholds; each negative control is refused for its own condition and nothing else.
fn expected(name: &str) -> Option<Condition> {
    match name {
        "race" => Some(Condition::S2),
        "stale" => Some(Condition::S1),
        "reuse" => Some(Condition::Reuse),
        "bda" => Some(Condition::S3),
        _ => None,
    }
}

#[test]
fn every_sample_profiles_to_the_same_output_and_analyzes_right() {
    let mut failures = Vec::new();
    for name in samples::ALL {
        let reference = no_layer(name).checksum();
        let (run, trace) = profile_sample(name, &[]);
        if run.checksum() != reference {
            failures.push(format!(
                "{name}: checksum under profile differs from no layer"
            ));
        }
        let from = |k: &str| trace.header.settings.get(k).and_then(|v| parse_u64(v));
        let t = Thresholds {
            min_bytes: from("min_bytes").unwrap_or(256 << 10),
            min_copies: from("min_copies").unwrap_or(2),
        };
        let a = explain(&trace, t, &plain_site);
        let mut by: BTreeMap<String, usize> = BTreeMap::new();
        let mut wrong = Vec::new();
        for c in &a.candidates {
            let (label, ok) = match (&c.decision, expected(name)) {
                (Decision::Accepted { .. }, None) => ("accepted".to_string(), true),
                (Decision::Rejected { condition, .. }, None) => (
                    condition.as_str().to_string(),
                    // `threads` names its workers, so their buffers are keyed per thread and
                    // accepted like any other positive sample's.
                    *condition == Condition::Threshold,
                ),
                (Decision::Accepted { .. }, Some(_)) => ("accepted".to_string(), true),
                (Decision::Rejected { condition, .. }, Some(want)) => (
                    condition.as_str().to_string(),
                    *condition == want || *condition == Condition::Threshold,
                ),
            };
            *by.entry(label.clone()).or_default() += 1;
            if !ok {
                wrong.push(format!(
                    "#{}↔#{} {label}: {:?}",
                    c.staging.number, c.device.number, c.decision
                ));
            }
        }
        if let Some(want) = expected(name) {
            if !by.contains_key(want.as_str()) {
                wrong.push(format!("no pair refused for {}", want.as_str()));
            }
        } else if !by.contains_key("accepted") {
            wrong.push("no pair accepted".into());
        }
        eprintln!("{name}: {by:?}");
        if !wrong.is_empty() {
            failures.push(format!("{name}: {}", wrong.join("; ")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Profile `race` (1 MiB × `iters`) with extra arguments and environment, and analyze it:
/// (trace, the decision on the pair of the input staging buffer, its coverage).
fn race_decision(
    iters: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (Trace, Decision, Option<echo_analyzer::sampling::Coverage>) {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = scratch(&format!("race-sampled-{n}")).join("trace.jsonl");
    let mut args = vec![
        "race",
        "--size-mib",
        "1",
        "--iters",
        iters,
        "--variant",
        "staging",
    ];
    args.extend_from_slice(extra);
    let run = profile(&path, &samples::samples_bin(), &args, env);
    assert!(run.status.success(), "{}:\n{}", run.args, run.stderr);
    let t = read_trace(std::io::BufReader::new(std::fs::File::open(&path).unwrap())).unwrap();
    let a = explain(&t, Thresholds::default(), &plain_site);
    // The input staging buffer is the one uploaded from (role upload, the S2 pair of the control).
    let row = a
        .candidates
        .iter()
        .find(|c| c.role == echo_analyzer::plan::Role::Upload)
        .unwrap_or_else(|| panic!("no upload pair: {:?}", a.candidates))
        .clone();
    (t, row.decision, row.host_coverage)
}

fn unobserved_windows(t: &Trace) -> usize {
    t.records
        .iter()
        .filter(|r| matches!(&r.event, Event::Window { unobserved } if !unobserved.is_empty()))
        .count()
}

/// The sampling option: `validate_sample_every = 8` (with the default K = 4 full windows).
const SAMPLED: (&str, &str) = ("VK_ECHO_VALIDATE_SAMPLE_EVERY", "8");

/// Sampled validation (an option) on the real race control: with enough iterations for
/// sampling to start, the race is still refused for S2 (seen in the first windows); the trace
/// does mark unobserved windows.
#[test]
fn race_control_is_refused_with_sampled_validation() {
    let (t, d, _) = race_decision("16", &[], &[SAMPLED]);
    assert!(unobserved_windows(&t) > 10, "sampling did not start");
    assert!(
        matches!(
            &d,
            Decision::Rejected {
                condition: Condition::S2,
                ..
            }
        ),
        "{d:?}"
    );
}

/// A race planted late, in one iteration only (`race --race-at N`): with every window watched
/// (the default) it is refused for S2 wherever it falls; with sampling on it is refused for S2
/// where a watched window saw it and for evidence where none did — never accepted (issue 22:
/// a window that was not watched never accepts a pair).
#[test]
fn a_late_one_off_race_is_refused_watched_or_sampled() {
    for at in 3..=10 {
        let at_s = at.to_string();
        let (t, d, cov) = race_decision("12", &["--race-at", &at_s], &[]);
        assert_eq!(
            unobserved_windows(&t),
            0,
            "race at {at}: the default watches all"
        );
        assert!(
            matches!(
                &d,
                Decision::Rejected {
                    condition: Condition::S2,
                    ..
                }
            ),
            "race at {at}, every window watched: {d:?}"
        );
        assert_eq!(cov, None);
        let (_, d, _) = race_decision("12", &["--race-at", &at_s], &[SAMPLED]);
        match &d {
            Decision::Rejected { condition, .. } => assert!(
                *condition == Condition::S2 || *condition == Condition::Evidence,
                "race at {at}, sampled: {d:?}"
            ),
            Decision::Accepted { .. } => panic!("race at {at}: sampling accepted the pair"),
        }
    }
}

/// Sampling never accepts what watching every window refuses, and refuses (evidence) the pairs
/// of every buffer it left unwatched somewhere: every sample, long enough for sampling to start
/// (12 iterations), analyzed from a fully watched profile (the default) and a sampled one.
#[test]
fn sampling_only_ever_refuses_more_than_watching_every_window() {
    let decide = |name: &str, env: &[(&str, &str)]| -> (Vec<(String, String)>, usize) {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = scratch(&format!("{name}-same-{n}")).join("trace.jsonl");
        let args = [
            name,
            "--size-mib",
            "1",
            "--iters",
            "12",
            "--variant",
            "staging",
        ];
        let run = profile(&path, &samples::samples_bin(), &args, env);
        assert!(run.status.success(), "{}:\n{}", run.args, run.stderr);
        let t = read_trace(std::io::BufReader::new(std::fs::File::open(&path).unwrap())).unwrap();
        let a = explain(&t, Thresholds::default(), &plain_site);
        let mut rows: Vec<(String, String)> = a
            .candidates
            .iter()
            .map(|c| {
                let d = match &c.decision {
                    Decision::Accepted { .. } => "accepted".to_string(),
                    Decision::Rejected { condition, .. } => condition.as_str().to_string(),
                };
                // By key, not by number: threads creates its buffers in no fixed order.
                (format!("{}↔{}", c.staging.key, c.device.key), d)
            })
            .collect();
        rows.sort();
        rows.dedup();
        (rows, unobserved_windows(&t))
    };
    let mut sampled_somewhere = 0;
    let mut wrong = Vec::new();
    for name in samples::ALL {
        let (full, none) = decide(name, &[]);
        let (sampled, unobserved) = decide(name, &[SAMPLED]);
        assert_eq!(none, 0, "{name}: the default left windows unwatched");
        if unobserved > 0 {
            sampled_somewhere += 1;
        }
        for (pair, d) in &sampled {
            let f = full
                .iter()
                .find(|(p, _)| p == pair)
                .map(|(_, d)| d.as_str());
            if d == "accepted" && f != Some("accepted") {
                wrong.push(format!(
                    "{name}: {pair} accepted sampled, {f:?} fully watched"
                ));
            }
            if f == Some("accepted") && d != "accepted" && d != "evidence" {
                wrong.push(format!(
                    "{name}: {pair} accepted fully watched, {d} sampled"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(
        sampled_somewhere >= 5,
        "sampling started in only {sampled_somewhere} samples"
    );
}
