//! Issue 6: a third-party program, not written here, under profile → analyze → enforce.
//!
//! `echo-wgpu-app` (tests/wgpu-app) is a compute program written against wgpu: its Vulkan calls
//! are what wgpu-core, wgpu-hal and gpu-allocator make of `Queue::write_buffer` (a fresh staging
//! buffer per call, sub-allocated from a persistently mapped block), a compute pass and
//! `copy_buffer_to_buffer` into a `MAP_READ` buffer read back with `map_async`. Each flow runs it
//! without echo, under `vkecho profile`, `vkecho analyze`s the trace and runs it under
//! `vkecho run --plan` (enforce), and checks that the checksum is the same in all three, that
//! every group the plan holds is applied and that no copy between planned buffers is left. What
//! the analyzer accepted and rejected, and why, and what enforce elided, goes to stderr
//! (`cargo test --test wgpu -- --nocapture`).
//!
//! Two memory tables:
//! - lavapipe's own (one type, DEVICE_LOCAL|HOST_VISIBLE|…): wgpu puts every buffer in one
//!   mapped block, 64-byte aligned, so roles come from the host's accesses (issue 12) and
//!   neighbouring buffers share pages (the profiler steps the host's accesses there, so each is
//!   seen as its own buffer's). The result → readback pair is aliased (the result buffer bound
//!   into the readback range) and its copy elided every iteration; each `write_buffer` is a
//!   one-time upload through a fresh sub-allocated staging buffer, refused as `one_time` with
//!   the reason in the report. The negative twin (`--ring`: the result read back through two
//!   alternating slots of one buffer) is refused for `offset`, and enforce passes it through;
//! - an integrated-GPU table presented by `VK_LAYER_ECHO_test_discrete` (`VK_ECHO_TEST_TABLE=apu`,
//!   echo with `topology=integrated`): wgpu puts its storage buffers in device-only memory, and
//!   the result → readback pair is aliased (the device buffer bound into the readback range)
//!   and its copy elided every iteration.
//!
//! Under the Khronos validation layer with synchronization validation, enforce adds no message
//! to what the same program gets without echo; and forwarding the self-copies that enforce drops
//! (`VK_ECHO_TEST_KEEP_SELF_COPIES`) is reported, so validation does see the aliasing.
//!
//! `echo-wgpu-app` is a workspace member outside `default-members`: `cargo build --workspace`
//! (scripts/test.sh) builds it.

use echo_analyzer::plan::{parse_plan, Plan};
use echo_analyzer::stats::Stats;
use echo_tests::samples::SampleRun;
use echo_tests::world::{artifact, run_within, Layers, World};
use std::path::{Path, PathBuf};
use std::time::Duration;

const APP: &str = "echo-wgpu-app";
const SIZE_MIB: u64 = 1;
const ITERS: u64 = 3;
const LIMIT: Duration = Duration::from_secs(300);

#[derive(Clone, Copy, Debug, PartialEq)]
enum Table {
    /// lavapipe's memory table as it is.
    Lavapipe,
    /// `VK_LAYER_ECHO_test_discrete` with `VK_ECHO_TEST_TABLE=apu` below echo.
    Integrated,
}

fn world(table: Table, validation: bool) -> World {
    let w = World::new(Layers {
        echo: None,
        test_layer: table == Table::Integrated,
        validation,
    });
    match table {
        Table::Lavapipe => w,
        Table::Integrated => w
            .set("VK_ECHO_TEST_TABLE", "apu")
            .set("VK_ECHO_TOPOLOGY", "integrated"),
    }
}

fn app_args() -> Vec<String> {
    vec![
        "--size-mib".into(),
        SIZE_MIB.to_string(),
        "--iters".into(),
        ITERS.to_string(),
    ]
}

/// The app alone, no echo.
fn run_app(w: &World) -> SampleRun {
    let args = app_args();
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    run_within(w.command(&artifact(APP), &argv), LIMIT)
}

/// `vkecho SUB... -- echo-wgpu-app ARGS` in `w`, with extra environment.
fn vkecho_app(w: &World, sub: &[&str], env: &[(&str, &str)]) -> SampleRun {
    let app = artifact(APP).display().to_string();
    let mut argv: Vec<String> = sub.iter().map(|s| s.to_string()).collect();
    argv.push("--".into());
    argv.push(app);
    argv.extend(app_args());
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let mut cmd = w.command(&artifact("vkecho"), &argv);
    cmd.envs(env.iter().copied());
    run_within(cmd, LIMIT)
}

fn json_of(run: &SampleRun) -> serde_json::Value {
    let j = run.json();
    assert_eq!(j["app"], "wgpu", "{}: {j}", run.args);
    assert_eq!(j["size_bytes"].as_u64(), Some(SIZE_MIB << 20));
    assert_eq!(j["iters"].as_u64(), Some(ITERS));
    j
}

struct Flow {
    base: SampleRun,
    profiled: SampleRun,
    plan: Plan,
    plan_path: PathBuf,
    /// `vkecho analyze`'s human report.
    report: String,
    enforced: SampleRun,
    stats: Stats,
}

fn analyze(w: &World, trace: &Path, plan: &Path) -> String {
    let out = w
        .command(
            &artifact("vkecho"),
            &[
                "analyze",
                &trace.display().to_string(),
                "-o",
                &plan.display().to_string(),
            ],
        )
        .output()
        .expect("run vkecho analyze");
    assert!(
        out.status.success(),
        "vkecho analyze failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn read_stats(path: &Path) -> Stats {
    let text = std::fs::read_to_string(path).expect("the layer wrote statistics");
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one device, one statistics line:\n{text}");
    serde_json::from_str(lines[0]).expect("statistics parse")
}

/// Enforce `plan` in `w` (`vkecho run --plan … --stats …`): the run and the device's statistics.
fn enforce(w: &World, plan: &Path, name: &str, env: &[(&str, &str)]) -> (SampleRun, Stats) {
    let stats = w.dir.join(format!("stats-{name}.jsonl"));
    let _ = std::fs::remove_file(&stats);
    let run = vkecho_app(
        w,
        &[
            "run",
            "--plan",
            &plan.display().to_string(),
            "--stats",
            &stats.display().to_string(),
        ],
        env,
    );
    json_of(&run);
    (run, read_stats(&stats))
}

/// No echo, profile, analyze, enforce; asserts the checksum is the same in all three and that the
/// plan was applied as a whole.
fn flow(w: &World, table: Table) -> Flow {
    let base = run_app(w);
    let sum = json_of(&base)["checksum"].clone();

    let trace = w.dir.join("trace.jsonl");
    let profiled = vkecho_app(
        w,
        &["profile", "--trace", &trace.display().to_string()],
        &[],
    );
    assert_eq!(
        json_of(&profiled)["checksum"],
        sum,
        "{table:?}: profile mode changed the output"
    );
    assert!(trace.is_file(), "profile wrote no trace");

    let plan_path = w.dir.join("plan.json");
    let report = analyze(w, &trace, &plan_path);
    let plan = parse_plan(&std::fs::read_to_string(&plan_path).unwrap()).expect("plan parses");

    let (enforced, stats) = enforce(w, &plan_path, "enforce", &[]);
    assert_eq!(
        json_of(&enforced)["checksum"],
        sum,
        "{table:?}: enforce changed the output ({stats:?})"
    );
    assert_eq!(stats.mode, "enforce");
    assert!(stats.active, "{table:?}: echo is active on this device");
    assert_eq!(stats.plan_status, "applied", "{stats:?}");
    assert_eq!(stats.groups_planned as usize, plan.groups.len());
    assert_eq!(
        stats.groups_applied, stats.groups_planned,
        "{table:?}: planned groups not applied: {:?}",
        stats.not_applied
    );
    assert_eq!(
        stats.regions_passed, 0,
        "{table:?}: copies between planned buffers still ran"
    );
    assert!(stats.errors.is_empty(), "{:?}", stats.errors);

    let f = Flow {
        base,
        profiled,
        plan,
        plan_path,
        report,
        enforced,
        stats,
    };
    describe(table, &f);
    f
}

/// What the layer did with wgpu, for the person reading the test output.
fn describe(table: Table, f: &Flow) {
    let sum = f.base.checksum();
    eprintln!("==== wgpu under echo, {table:?} memory table ({SIZE_MIB} MiB, {ITERS} iterations)");
    eprintln!(
        "checksum {sum}: no echo, profile {}, enforce {} (identical)",
        f.profiled.checksum(),
        f.enforced.checksum()
    );
    eprintln!("-- vkecho analyze:\n{}", f.report.trim_end());
    eprintln!(
        "-- plan {}: {} group(s), {} rejection(s)",
        f.plan_path.display(),
        f.plan.groups.len(),
        f.plan.rejected.len()
    );
    for g in &f.plan.groups {
        eprintln!(
            "   group {} ({:?}): device {} ← {} member(s), {} B saved per iteration",
            g.id,
            g.direction,
            g.device.created_at,
            g.members.len(),
            g.bytes_saved_per_iter
        );
    }
    // (The rejections and their reasons are in the analyzer's report above.)
    let s = &f.stats;
    eprintln!(
        "-- enforce: class {}, {}/{} groups applied, {} copies / {} regions / {} B elided, {} barriers inserted, {} binds and {} maps redirected, {} frees deferred; not applied: {:?}",
        s.class,
        s.groups_applied,
        s.groups_planned,
        s.copies_elided,
        s.regions_elided,
        s.bytes_elided,
        s.barriers_inserted,
        s.binds_redirected,
        s.maps_redirected,
        s.frees_deferred,
        s.not_applied
    );
}

/// lavapipe as it is: every wgpu buffer sits in one persistently mapped block, neighbours
/// sharing pages. Roles come from the host's accesses; the readback pair is aliased and its copy
/// elided every iteration, the one-time uploads are refused with their reason.
#[test]
fn wgpu_on_lavapipe_profile_analyze_enforce_identical() {
    let w = world(Table::Lavapipe, false);
    let f = flow(&w, Table::Lavapipe);
    assert_eq!(f.stats.class, "uma-strict");
    // The report says how many copies there were and, by reason, why those outside pairs
    // stayed out.
    assert!(
        f.report.contains("copies: the trace holds "),
        "no copy summary:\n{}",
        f.report
    );
    assert!(
        f.report.contains("not in accepted pairs, by reason:") && f.report.contains("one_time:"),
        "the one-time uploads are explained:\n{}",
        f.report
    );
    // The readback pair, although its buffers share pages with their neighbours (a host access
    // on a shared page is its own buffer's, never the neighbour's).
    assert_eq!(f.plan.groups.len(), 1, "the readback pair:\n{}", f.report);
    assert_eq!(
        f.plan.groups[0].direction,
        echo_analyzer::plan::Direction::DeviceIntoStaging
    );
    assert!(
        !f.report.contains("host_both"),
        "no side taken as touched through a shared page:\n{}",
        f.report
    );
    assert!(f.stats.binds_redirected >= 1, "{:?}", f.stats);
    assert!(
        f.stats.bytes_elided >= ITERS * (SIZE_MIB << 20),
        "every iteration's readback copy elided: {:?}",
        f.stats
    );
}

/// The negative twin: the result read back through two alternating slots of one buffer. No
/// single overlap of the result buffer and the readback buffer keeps both slots' bytes: refused
/// for `offset`, and enforce changes nothing.
#[test]
fn wgpu_ring_twin_on_lavapipe_is_refused_for_offset() {
    let w = world(Table::Lavapipe, false);
    let base = run_within(
        w.command(
            &artifact(APP),
            &["--size-mib", "1", "--iters", "3", "--ring"],
        ),
        LIMIT,
    );
    let trace = w.dir.join("ring-trace.jsonl");
    let app = artifact(APP).display().to_string();
    let profiled = run_within(
        w.command(
            &artifact("vkecho"),
            &[
                "profile",
                "--trace",
                &trace.display().to_string(),
                "--",
                &app,
                "--size-mib",
                "1",
                "--iters",
                "3",
                "--ring",
            ],
        ),
        LIMIT,
    );
    assert_eq!(base.checksum(), profiled.checksum());
    let plan_path = w.dir.join("ring-plan.json");
    let report = analyze(&w, &trace, &plan_path);
    let plan = parse_plan(&std::fs::read_to_string(&plan_path).unwrap()).expect("plan parses");
    assert!(plan.groups.is_empty(), "nothing may pair:\n{report}");
    assert!(
        report.contains("rejected: offset"),
        "the readback pair refused for offset:\n{report}"
    );
    let stats = w.dir.join("ring-stats.jsonl");
    let run = run_within(
        w.command(
            &artifact("vkecho"),
            &[
                "run",
                "--plan",
                &plan_path.display().to_string(),
                "--stats",
                &stats.display().to_string(),
                "--",
                &app,
                "--size-mib",
                "1",
                "--iters",
                "3",
                "--ring",
            ],
        ),
        LIMIT,
    );
    assert_eq!(base.checksum(), run.checksum());
    let st = read_stats(&stats);
    assert_eq!((st.copies_elided, st.binds_redirected), (0, 0), "{st:?}");
}

/// An integrated-GPU memory table: wgpu's storage buffers get device-only memory, and the
/// result → readback copy is elided every iteration.
#[test]
fn wgpu_on_integrated_table_readback_is_aliased() {
    let w = world(Table::Integrated, false);
    let f = flow(&w, Table::Integrated);
    assert_eq!(f.stats.class, "uma-integrated");
    assert!(
        !f.plan.groups.is_empty(),
        "the readback pair is planned:\n{}",
        f.report
    );
    assert!(f.stats.binds_redirected >= 1, "{:?}", f.stats);
    assert!(
        f.stats.bytes_elided >= ITERS * (SIZE_MIB << 20),
        "every iteration's readback copy elided: {:?}",
        f.stats
    );
}

/// Validation messages with the run-specific parts (handles, addresses) masked, so two runs'
/// messages compare.
fn normalized(run: &SampleRun) -> Vec<String> {
    let mut v: Vec<String> = run
        .validation_messages()
        .iter()
        .map(|m| {
            let mut out = String::with_capacity(m.len());
            let mut it = m.chars().peekable();
            while let Some(c) = it.next() {
                if c == '0' && it.peek() == Some(&'x') {
                    it.next();
                    while it.peek().is_some_and(|c| c.is_ascii_hexdigit()) {
                        it.next();
                    }
                    out.push_str("0x_");
                } else {
                    out.push(c);
                }
            }
            out
        })
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Under Khronos validation with synchronization validation, enforce adds no message to those
/// the program gets without echo, on both tables.
#[test]
fn wgpu_under_validation_enforce_adds_no_message() {
    for table in [Table::Lavapipe, Table::Integrated] {
        // The plan comes from a run without validation (what a user would enforce).
        let plain = world(table, false);
        let trace = plain.dir.join("trace.jsonl");
        let profiled = vkecho_app(
            &plain,
            &["profile", "--trace", &trace.display().to_string()],
            &[],
        );
        json_of(&profiled);
        let plan = plain.dir.join("plan.json");
        analyze(&plain, &trace, &plan);

        let w = world(table, true);
        let base = run_app(&w);
        let before = normalized(&base);
        let (run, stats) = enforce(&w, &plan, "validation", &[]);
        assert_eq!(
            base.checksum(),
            run.checksum(),
            "{table:?}: enforce under validation changed the output"
        );
        let after = normalized(&run);
        let new: Vec<&String> = after.iter().filter(|m| !before.contains(m)).collect();
        eprintln!(
            "{table:?}: validation without echo: {} distinct message(s); under enforce: {} ({} elided)",
            before.len(),
            after.len(),
            stats.bytes_elided
        );
        assert!(
            new.is_empty(),
            "{table:?}: validation messages only under enforce:\n{}",
            new.iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        );
        if stats.copies_elided > 0 {
            // Forwarding the self-copies enforce drops is an error validation reports: it sees
            // the aliased buffers, so its silence above means something.
            let (kept, _) = enforce(
                &w,
                &plan,
                "keep-self-copies",
                &[("VK_ECHO_TEST_KEEP_SELF_COPIES", "1")],
            );
            assert!(
                kept.validation_messages()
                    .iter()
                    .any(|m| m.contains("VUID-vkCmdCopyBuffer-pRegions-00117")),
                "{table:?}: forwarded self-copies not reported:\n{}",
                kept.validation_messages().join("\n")
            );
        }
    }
}

/// The zero-copy twin (`--zero`: the shader's output mapped and read directly, wgpu's
/// `MAPPABLE_PRIMARY_BUFFERS`) computes what the copying program computes: it is the bound
/// echo's readback elision is measured against (bench/allocators.sh).
#[test]
fn wgpu_zero_copy_twin_computes_the_same_output() {
    let w = world(Table::Lavapipe, false);
    let base = run_app(&w);
    let mut args = app_args();
    args.push("--zero".into());
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let zero = run_within(w.command(&artifact(APP), &argv), LIMIT);
    assert_eq!(json_of(&zero)["checksum"], json_of(&base)["checksum"]);
}
