//! The bounded cache (issue 16) through the code path the layer runs at exit
//! (`echo_analyzer::cache::finish_run`): 100 distinct argument lists of one program, each a
//! context entry with a trace and a plan as auto mode writes them, the cache never over its limit
//! after a run, the analyzed traces gone, least-recently-used entries evicted first, an entry in
//! use kept, and what a run wrote never evicted by that run.

use echo_analyzer::cache::{self, finish_run, list, total_bytes, RunOutcome};
use echo_analyzer::context::{args_hash, cache_paths};
use echo_analyzer::trace::Context;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("echo-cache-it-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn ctx(i: usize) -> Context {
    Context {
        exe_path: "/usr/bin/infer".into(),
        exe_id: "build-id:00aa".into(),
        args_hash: args_hash(&["--input", &format!("frame-{i:03}.png")]),
        device_name: "llvmpipe".into(),
        device_uuid: "00".into(),
        driver_version: 1,
        ..Default::default()
    }
}

/// A file of `n` bytes whose modification time is `t` (simulated clock: no sleeping).
fn write_at(p: &Path, n: usize, t: SystemTime) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, vec![b'x'; n]).unwrap();
    std::fs::File::options()
        .write(true)
        .open(p)
        .unwrap()
        .set_modified(t)
        .unwrap();
}

const TRACE: usize = 40 * 1024;
const PLAN: usize = 4 * 1024;
const LIMIT: u64 = 64 * 1024;

/// One auto-mode run of argument list `i` at time `t`: trace recorded, plan made, then the exit
/// path. Returns the plan's path.
fn profile_run(dir: &Path, i: usize, t: SystemTime, keep: bool) -> PathBuf {
    let (trace, plan) = cache_paths(dir, &ctx(i));
    write_at(&trace, TRACE, t);
    write_at(&plan, PLAN, t);
    let run = RunOutcome {
        analyzed_traces: vec![trace.clone()],
        protect: vec![plan.clone()],
    };
    finish_run(dir, &run, LIMIT, keep);
    if keep {
        assert!(trace.exists(), "keep_traces kept run {i}'s trace");
    } else {
        assert!(
            !trace.exists(),
            "run {i}'s trace was not deleted once its plan was made"
        );
    }
    assert!(plan.exists(), "run {i} evicted its own plan");
    plan
}

#[test]
fn a_hundred_argument_lists_stay_within_the_limit_and_evict_least_recently_used() {
    for keep in [false, true] {
        let dir = tmp(if keep { "keep" } else { "lru" });
        cache::ensure_tag(&dir).unwrap();
        let t0 = SystemTime::now() - Duration::from_secs(100_000);
        let at = |s: u64| t0 + Duration::from_secs(s);
        let first = profile_run(&dir, 0, at(0), keep);
        let mut max_seen = 0;
        for i in 1..100 {
            profile_run(&dir, i, at(10 * i as u64), keep);
            // Argument list 0 is run (enforced) every fifth run: it stays in use.
            if i % 5 == 0 && first.exists() {
                std::fs::File::options()
                    .write(true)
                    .open(&first)
                    .unwrap()
                    .set_modified(at(10 * i as u64 + 1))
                    .unwrap();
            }
            let entries = list(&dir);
            let total = total_bytes(&entries);
            max_seen = max_seen.max(total);
            assert!(
                total <= LIMIT,
                "after run {i} the cache holds {total} bytes, over its limit {LIMIT}"
            );
            // What is left is the most recently used: every entry left is newer than every entry
            // gone (entry 0 included, by its last use).
            let oldest_left = entries.iter().map(|e| e.last_used).min().unwrap();
            for j in 1..i {
                let (_, plan) = cache_paths(&dir, &ctx(j));
                let used = at(10 * j as u64);
                if !plan.exists() {
                    assert!(
                        used <= oldest_left,
                        "run {j} was evicted before an older entry"
                    );
                }
            }
            if !keep {
                // With traces deleted, 16 plans fit: one used every fifth run always stays.
                assert!(first.exists(), "the entry in use was evicted after run {i}");
            }
        }
        let entries = list(&dir);
        if keep {
            // Each entry is 44 KiB with its trace kept: one fits in 64 KiB.
            assert_eq!(entries.len(), 1, "{}", entries.len());
            assert!(entries[0].trace.is_some());
        } else {
            // 4 KiB plans: 16 fit in 64 KiB.
            assert_eq!(
                entries.len(),
                16,
                "{:?}",
                entries.iter().map(|e| &e.name).collect::<Vec<_>>()
            );
            assert!(entries.iter().all(|e| e.trace.is_none()));
        }
        assert!(max_seen <= LIMIT);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// One protected entry larger than the limit stays for the run that wrote it, and goes at the
/// next run's exit; no limit (0) evicts nothing.
#[test]
fn protection_and_no_limit() {
    let dir = tmp("protect");
    cache::ensure_tag(&dir).unwrap();
    let now = SystemTime::now();
    let (trace, plan) = cache_paths(&dir, &ctx(1));
    write_at(&trace, 100 * 1024, now);
    write_at(&plan, PLAN, now);
    // keep_traces: the trace stays, and it is protected (this run wrote it).
    let ev = finish_run(
        &dir,
        &RunOutcome {
            analyzed_traces: vec![trace.clone()],
            protect: vec![plan.clone(), trace.clone()],
        },
        LIMIT,
        true,
    );
    assert!(ev.removed.is_empty() && trace.exists());
    assert!(ev.bytes_left > LIMIT);
    // The next run (another argument list) evicts it.
    let (t2, p2) = cache_paths(&dir, &ctx(2));
    write_at(&t2, TRACE, now + Duration::from_secs(5));
    write_at(&p2, PLAN, now + Duration::from_secs(5));
    let ev = finish_run(
        &dir,
        &RunOutcome {
            analyzed_traces: vec![t2.clone()],
            protect: vec![p2.clone()],
        },
        LIMIT,
        false,
    );
    assert!(!plan.exists() && !trace.exists(), "{ev:?}");
    assert!(p2.exists() && !t2.exists());
    assert!(ev.bytes_left <= LIMIT);
    // No limit: nothing is evicted, however large.
    let (t3, p3) = cache_paths(&dir, &ctx(3));
    write_at(&t3, 300 * 1024, now);
    write_at(&p3, PLAN, now);
    let ev = finish_run(&dir, &RunOutcome::default(), 0, true);
    assert!(ev.removed.is_empty() && t3.exists() && p2.exists());
    // A trace given by the `trace` setting (outside the cache) is never deleted.
    let outside = tmp("outside-trace.jsonl");
    write_at(&outside, 10, now);
    finish_run(
        &dir,
        &RunOutcome {
            analyzed_traces: vec![outside.clone()],
            protect: vec![],
        },
        LIMIT,
        false,
    );
    assert!(outside.exists());
    let _ = std::fs::remove_file(&outside);
    // clear empties it and keeps the tag.
    let removed = cache::clear(&dir).unwrap();
    assert!(!removed.is_empty());
    assert!(list(&dir).is_empty() && cache::is_tagged(&dir));
    let _ = std::fs::remove_dir_all(&dir);
}
