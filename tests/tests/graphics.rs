//! The C corpus's graphics and image programs (issue 44 item 2, issue 49 item 2): programs that
//! draw, and images placed in blocks made before them (`tests/c/c_draw.c`, `c_draw_race.c`,
//! `c_image_after_block.c`, their shared workload in `tests/c/gfx.h`).
//!
//! Every program and argument set is swept through no echo, echo off, profile (+ `vkecho
//! analyze`), enforce with that plan and auto mode twice — every run under the Khronos
//! validation layer with synchronization validation, which the loader puts *below* echo (echo
//! is implicit: `docs/usage.md`, "Layer order"), so it checks echo's own calls as well. Every
//! run exits 0 within [`LIMIT`], prints the no-echo run's stdout and reports exactly its
//! validation message ids. Then, per program:
//! - `c_draw RENDER DRAW` (render pass or dynamic rendering; vkCmdDraw, vkCmdDrawIndexed,
//!   vkCmdDrawIndirect, vkCmdDrawIndexedIndirect): all six pairs accepted — vertex, index,
//!   uniform, storage and indirect uploads, the storage readback — and applied under enforce and
//!   in auto mode's second run, every copy dropped;
//! - `c_draw_race upload|readback`: the pair the hazard touches refused for S2 (the vertex
//!   upload; the storage readback), the other five applied; and the refusal matters: the plan of
//!   the `safe` twin (same buffers, every pair accepted), forced onto the program, changes the
//!   line of output the hazard feeds;
//! - `c_image_after_block FORMAT TILING`: no message validation alone does not report (issue
//!   49: VUID-vkBindImageMemory-memory-02729 where the driver cannot import host memory for the
//!   image), the checksum of the run without echo, and the block still watched in profile mode
//!   (the host's accesses recorded: evidence kept).
//!
//! The driver is `ECHO_TEST_DRIVER`'s (`echo_tests::drivers::Driver::from_env`: lavapipe by
//! default, `swiftshader` for SwiftShader); each sweep checks from the plan that the program ran
//! on it.
//! Minimum copy size 16 KiB (`VK_ECHO_MIN_BYTES`, as the validation gate): the buffers are 16
//! and 64 KiB.

use echo_tests::drivers::Driver;
use echo_tests::world::{analyze_plan, c_program, run_within, Layers, World};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long one run may take: a second or two on lavapipe, a few under SwiftShader and the
/// validation layer.
const LIMIT: Duration = Duration::from_secs(60);

/// c_draw's pairs and what they copy per iteration: vertices, indices, storage input and output
/// 64 KiB each, uniforms and indirect parameters 16 KiB each.
const DRAW_PAIRS: usize = 6;
const DRAW_BYTES_PER_ITER: u64 = (4 * 64 + 2 * 16) << 10;
/// Iterations the programs run (their last argument).
const ITERS: u64 = 3;

#[derive(Clone, Copy, Debug)]
struct Prog {
    name: &'static str,
    args: &'static [&'static str],
}

/// One run's output, validation message ids and statistics lines (when `VK_ECHO_STATS` was set).
struct Run {
    stdout: String,
    stderr: String,
    ids: Vec<String>,
    stats: Vec<Value>,
}

/// Scratch files of one program's runs; removed at the end unless `ECHO_KEEP_TEST_DIRS` is set.
struct Case {
    prog: Prog,
    dir: PathBuf,
    driver: Driver,
}

impl Drop for Case {
    fn drop(&mut self) {
        if std::env::var_os("ECHO_KEEP_TEST_DIRS").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

impl Case {
    fn new(prog: Prog, tag: &str) -> Case {
        let dir = std::env::temp_dir().join(format!(
            "echo-gfx-{}-{}-{}-{tag}",
            std::process::id(),
            prog.name,
            prog.args.join("_")
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Case {
            prog,
            dir,
            driver: Driver::from_env(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn label(&self, mode: Option<&str>) -> String {
        format!(
            "{} {} on {} (echo {})",
            self.prog.name,
            self.prog.args.join(" "),
            self.driver.name(),
            mode.unwrap_or("not installed")
        )
    }

    /// Runs the program with echo in `mode` (`None`: not installed), the validation layer when
    /// `validation`, and `env`; fails the test on a hang or a non-zero exit.
    fn run(&self, mode: Option<&'static str>, validation: bool, env: &[(&str, String)]) -> Run {
        let w = World::new(Layers {
            echo: mode,
            test_layer: false,
            validation,
        });
        let mut w = self.driver.select(w).set("VK_ECHO_MIN_BYTES", "16K");
        for (k, v) in env {
            w = w.set(k, v);
        }
        let stats_file = env.iter().find(|(k, _)| *k == "VK_ECHO_STATS");
        if let Some((_, f)) = stats_file {
            let _ = std::fs::remove_file(f);
        }
        let label = self.label(mode);
        let run = run_within(w.command(&c_program(self.prog.name), self.prog.args), LIMIT);
        assert!(
            run.status.success(),
            "{label} failed ({}):\nstdout:\n{}\nstderr:\n{}",
            run.status,
            run.stdout,
            run.stderr
        );
        let ids = validation_ids(&run.stdout, &run.stderr);
        let stats = stats_file
            .map(|(_, f)| json_lines(Path::new(f)))
            .unwrap_or_default();
        Run {
            stdout: run.stdout,
            stderr: run.stderr,
            ids,
            stats,
        }
    }
}

/// The validation layer's message ids of one run, sorted (a multiset): the `[ ID ]` of every
/// "Validation Error/Warning" and SYNC-HAZARD line.
fn validation_ids(stdout: &str, stderr: &str) -> Vec<String> {
    let mut ids: Vec<String> = stdout
        .lines()
        .chain(stderr.lines())
        .filter(|l| l.contains("Validation ") || l.contains("SYNC-HAZARD"))
        .filter_map(|l| {
            let start = l.find("[ ")? + 2;
            let len = l[start..].find(" ]")?;
            Some(l[start..start + len].to_string())
        })
        .collect();
    ids.sort();
    ids
}

fn json_lines(p: &Path) -> Vec<Value> {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: {l:?}: {e}", p.display())))
        .collect()
}

fn sum(stats: &[Value], field: &str) -> u64 {
    stats.iter().map(|s| s[field].as_u64().unwrap_or(0)).sum()
}

/// The plan's `groups` groups were all applied (none fell back).
fn all_applied(label: &str, run: &Run, groups: usize) {
    let (planned, applied) = (
        sum(&run.stats, "groups_planned"),
        sum(&run.stats, "groups_applied"),
    );
    assert!(
        planned == groups as u64 && applied == planned,
        "{label}: {applied} of {planned} planned groups applied, want all {groups}; stats: {:?}",
        run.stats
    );
}

/// [`all_applied`], and `bytes` elided: every copy of the applied pairs dropped.
fn all_applied_all_dropped(label: &str, run: &Run, groups: usize, bytes: u64) {
    all_applied(label, run, groups);
    assert_eq!(
        sum(&run.stats, "bytes_elided"),
        bytes,
        "{label}: bytes elided; stats: {:?}",
        run.stats
    );
}

/// One program through every mode; what the per-program checks look at.
struct Sweep {
    case: Case,
    /// The run without echo (validation alone).
    baseline: Run,
    /// Trace records of the profile run (the header left out).
    trace: Vec<Value>,
    plan: Value,
    /// What `vkecho analyze` printed.
    analysis: String,
    enforce: Run,
    auto: [Run; 2],
}

/// No echo, off, profile + analyze, enforce, auto twice — all under validation below echo:
/// each exits 0 within [`LIMIT`] with the baseline's stdout and validation message ids.
fn sweep(prog: Prog) -> Sweep {
    let case = Case::new(prog, "sweep");
    let s = |p: &Path| p.display().to_string();
    let baseline = case.run(None, true, &[]);
    assert!(
        !baseline.stdout.is_empty(),
        "{}: no output",
        case.label(None)
    );
    let same = |mode: &str, run: &Run| {
        assert!(
            run.ids == baseline.ids,
            "{}: validation + echo reported {:?}, validation alone {:?}\nstderr:\n{}",
            case.label(Some(mode)),
            run.ids,
            baseline.ids,
            run.stderr
        );
        assert!(
            run.stdout == baseline.stdout,
            "{}: stdout differs from the run without echo\nwithout echo:\n{}\nthis run:\n{}\n\
             stderr:\n{}",
            case.label(Some(mode)),
            baseline.stdout,
            run.stdout,
            run.stderr
        );
    };
    same("off", &case.run(Some("off"), true, &[]));
    let trace = case.path("trace.jsonl");
    same(
        "profile",
        &case.run(Some("profile"), true, &[("VK_ECHO_TRACE", s(&trace))]),
    );
    let plan_file = case.path("plan.json");
    let (plan, analysis) = analyze_plan(&trace, &plan_file);
    case.driver.check_device(
        &case.label(Some("profile")),
        plan["context"]["device_name"].as_str().unwrap_or(""),
    );
    let enforce = case.run(
        Some("enforce"),
        true,
        &[
            ("VK_ECHO_PLAN", s(&plan_file)),
            ("VK_ECHO_STATS", s(&case.path("stats-enforce.jsonl"))),
        ],
    );
    same("enforce", &enforce);
    let cache = case.path("cache");
    std::fs::create_dir_all(&cache).unwrap();
    let auto = [1, 2].map(|n| {
        let run = case.run(
            Some("auto"),
            true,
            &[
                ("VK_ECHO_CACHE_DIR", s(&cache)),
                (
                    "VK_ECHO_STATS",
                    s(&case.path(&format!("stats-auto{n}.jsonl"))),
                ),
            ],
        );
        same(&format!("auto (run {n})"), &run);
        run
    });
    let mut records = json_lines(&trace);
    if !records.is_empty() {
        records.remove(0);
    }
    Sweep {
        case,
        baseline,
        trace: records,
        plan,
        analysis,
        enforce,
        auto,
    }
}

fn groups(plan: &Value) -> usize {
    plan["groups"].as_array().map_or(0, Vec::len)
}

fn rejected(plan: &Value) -> Vec<Value> {
    plan["rejected"].as_array().cloned().unwrap_or_default()
}

/// The program ran (a driver without a feature prints "skip: ..." and exits 0).
fn not_skipped(label: &str, run: &Run) {
    assert!(
        !run.stdout.starts_with("skip:"),
        "{label}: the program skipped on this driver: {}",
        run.stdout
    );
}

/// The line of `stdout` that starts with `key`.
fn line<'a>(stdout: &'a str, key: &str) -> &'a str {
    stdout
        .lines()
        .find(|l| l.starts_with(key))
        .unwrap_or_else(|| panic!("no {key:?} line in {stdout:?}"))
}

// ------------------------------------------------------------------------------ c_draw

/// Every upload pair and the readback pair accepted, and applied: every copy of every
/// iteration dropped, under enforce and in auto mode's second run.
fn clean_draw(prog: Prog) {
    let s = sweep(prog);
    let label = s.case.label(Some("profile"));
    not_skipped(&label, &s.baseline);
    assert!(
        groups(&s.plan) == DRAW_PAIRS && rejected(&s.plan).is_empty(),
        "{label}: want {DRAW_PAIRS} groups and nothing rejected:\n{}",
        s.analysis
    );
    let bytes = ITERS * DRAW_BYTES_PER_ITER;
    all_applied_all_dropped(
        &s.case.label(Some("enforce")),
        &s.enforce,
        DRAW_PAIRS,
        bytes,
    );
    let auto2 = s.case.label(Some("auto (run 2)"));
    all_applied_all_dropped(&auto2, &s.auto[1], DRAW_PAIRS, bytes);
}

macro_rules! clean_draw_tests {
    ($($test:ident: $render:literal $draw:literal;)*) => {
        $(
            #[test]
            fn $test() {
                clean_draw(Prog { name: "c_draw", args: &[$render, $draw, "3"] });
            }
        )*
    };
}

clean_draw_tests! {
    draw_render_pass_draw: "pass" "draw";
    draw_render_pass_indexed: "pass" "indexed";
    draw_render_pass_indirect: "pass" "indirect";
    draw_render_pass_indexed_indirect: "pass" "indexed-indirect";
    draw_dynamic_rendering_draw: "dynamic" "draw";
    draw_dynamic_rendering_indexed: "dynamic" "indexed";
    draw_dynamic_rendering_indirect: "dynamic" "indirect";
    draw_dynamic_rendering_indexed_indirect: "dynamic" "indexed-indirect";
}

// ------------------------------------------------------------------------- c_draw_race

/// Buffer usage bits the refused pairs are told by.
const TRANSFER_SRC: u64 = 0x1;
const TRANSFER_DST: u64 = 0x2;
const STORAGE_BUFFER: u64 = 0x20;
const VERTEX_BUFFER: u64 = 0x80;

/// The hazard's pair refused for S2 (`device_usage` names its device buffer, `staging_usage` its
/// staging buffer exactly), the other five applied; the safe twin's plan, forced onto the
/// program, changes its `changed` line of output.
fn race_refused(args: &'static [&'static str], device_usage: u64, staging_usage: u64) {
    let s = sweep(Prog {
        name: "c_draw_race",
        args,
    });
    let label = s.case.label(Some("profile"));
    not_skipped(&label, &s.baseline);
    let refused = rejected(&s.plan);
    assert!(
        refused.len() == 1 && refused[0]["condition"] == "S2",
        "{label}: want exactly one pair refused, for S2:\n{}",
        s.analysis
    );
    let (d, h) = (
        &refused[0]["device"]["usage"],
        &refused[0]["staging"]["usage"],
    );
    assert!(
        d.as_u64().unwrap_or(0) & device_usage != 0 && h.as_u64() == Some(staging_usage),
        "{label}: the refused pair is not the one the hazard touches (device usage {d}, staging \
         usage {h}):\n{:#}",
        refused[0]
    );
    assert_eq!(groups(&s.plan), DRAW_PAIRS - 1, "{}", s.analysis);
    let bytes = ITERS * (DRAW_BYTES_PER_ITER - (64 << 10));
    let pairs = DRAW_PAIRS - 1;
    all_applied_all_dropped(&s.case.label(Some("enforce")), &s.enforce, pairs, bytes);
    let auto2 = s.case.label(Some("auto (run 2)"));
    all_applied_all_dropped(&auto2, &s.auto[1], pairs, bytes);

    // The refusal matters: the safe twin accepts the pair; its plan (the same buffers, from the
    // same call sites) forced onto this program under this program's context changes the line
    // the hazard feeds: the drawn output (`upload`), the early read (`readback`).
    let changed = if args[0] == "upload" {
        "readback "
    } else {
        "early "
    };
    let safe = Case::new(
        Prog {
            name: "c_draw_race",
            args: &["safe", "dynamic", "3"],
        },
        &format!("forced-onto-{}", args[0]),
    );
    let trace = safe.path("trace.jsonl");
    safe.run(
        Some("profile"),
        false,
        &[("VK_ECHO_TRACE", trace.display().to_string())],
    );
    let (mut forced, _) = analyze_plan(&trace, &safe.path("plan.json"));
    assert_eq!(groups(&forced), DRAW_PAIRS, "the safe twin's plan");
    forced["context"] = s.plan["context"].clone();
    let forced_file = safe.path("forced.json");
    std::fs::write(&forced_file, forced.to_string()).unwrap();
    let want = line(&s.baseline.stdout, changed);
    let mut seen = Vec::new();
    for _ in 0..3 {
        let out = s.case.run(
            Some("enforce"),
            false,
            &[
                ("VK_ECHO_PLAN", forced_file.display().to_string()),
                (
                    "VK_ECHO_STATS",
                    s.case.path("stats-forced.jsonl").display().to_string(),
                ),
            ],
        );
        let forced_label = s.case.label(Some("enforce, the safe twin's plan"));
        all_applied(&forced_label, &out, DRAW_PAIRS);
        seen.push(line(&out.stdout, changed).to_string());
    }
    assert!(
        seen.iter().any(|l| l != want),
        "{}: aliasing the refused pair did not change {want:?} in 3 runs ({seen:?}), so the \
         hazard does not show that the refusal matters",
        s.case.label(Some("enforce, the safe twin's plan"))
    );
}

/// The host writes the next iteration's vertices into the staging buffer while the draw that
/// reads the device copy waits on the host's semaphore.
#[test]
fn draw_race_early_vertex_write_is_refused() {
    race_refused(&["upload", "pass", "3"], VERTEX_BUFFER, TRANSFER_SRC);
}

/// The host reads the readback buffer while the copy into it waits on the host's semaphore.
#[test]
fn draw_race_early_readback_read_is_refused() {
    race_refused(&["readback", "dynamic", "3"], STORAGE_BUFFER, TRANSFER_DST);
}

/// The twin without a hazard (two submissions and a host-signalled semaphore, as the others):
/// every pair accepted and applied.
#[test]
fn draw_race_safe_twin_applies() {
    clean_draw(Prog {
        name: "c_draw_race",
        args: &["safe", "pass", "3"],
    });
}

// ------------------------------------------------------------------ c_image_after_block

/// Issue 49: no new validation message in any mode (the sweep), the checksum of the run
/// without echo, validation alone clean, and the block still watched in profile mode.
fn image_after_block(args: &'static [&'static str], must_run: bool) {
    let s = sweep(Prog {
        name: "c_image_after_block",
        args,
    });
    let label = s.case.label(Some("profile"));
    assert_eq!(
        s.baseline.ids,
        Vec::<String>::new(),
        "{label}: validation alone"
    );
    if s.baseline.stdout.starts_with("skip:") {
        assert!(!must_run, "{label}: {}", s.baseline.stdout);
        return;
    }
    assert!(
        s.baseline.stdout.contains("checksum "),
        "{}",
        s.baseline.stdout
    );
    let accesses = s.trace.iter().filter(|r| r["ev"] == "host_access").count();
    assert!(
        accesses >= 2,
        "{label}: want the host's accesses to the block recorded (evidence kept), got \
         {accesses} host_access events"
    );
}

/// R8G8B8A8_UNORM with optimal tiling and transfers is required of every driver.
#[test]
fn image_after_block_rgba8_optimal() {
    image_after_block(&["rgba8", "optimal", "3"], true);
}

#[test]
fn image_after_block_rgba8_linear() {
    image_after_block(&["rgba8", "linear", "3"], false);
}

/// Some depth format (D32_SFLOAT or D16_UNORM) can be copied with optimal tiling everywhere.
#[test]
fn image_after_block_depth_optimal() {
    image_after_block(&["depth", "optimal", "3"], true);
}

/// Drivers rarely have linear depth images: a printed skip, the same in every mode.
#[test]
fn image_after_block_depth_linear() {
    image_after_block(&["depth", "linear", "3"], false);
}

#[test]
fn image_after_block_packed_optimal() {
    image_after_block(&["packed", "optimal", "3"], false);
}

#[test]
fn image_after_block_packed_linear() {
    image_after_block(&["packed", "linear", "3"], false);
}

#[test]
fn image_after_block_compressed_optimal() {
    image_after_block(&["compressed", "optimal", "3"], false);
}

#[test]
fn image_after_block_compressed_linear() {
    image_after_block(&["compressed", "linear", "3"], false);
}
