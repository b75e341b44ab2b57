//! The C corpus (issue 11, DESIGN §8 "real-program patterns"): small C programs in tests/c linked
//! with plain `-lvulkan` (built by tests/build.rs into OUT_DIR), each run in every layer mode
//! through the real loader and lavapipe, time-bounded (a hang fails the test, it never stalls CI).
//!
//! Every program and argument set: no echo (the baseline), echo off, profile, `vkecho analyze`
//! (exit 0), enforce with the plan, auto twice with one cache directory — every run exits 0 with
//! stdout byte-identical to the baseline's. Under the Khronos validation layer (with
//! synchronization validation), echo in profile and in enforce yields exactly the multiset of
//! message ids validation alone reports.
//!
//! Defect-specific checks:
//! - `c_instance`: every mode finishes (the layer resolving its own entry points through
//!   interposable symbols hangs a `-lvulkan` program);
//! - `c_upload 1|3`: the staging buffer is written before it is bound; the plan has a group,
//!   enforce redirects a bind or map, nothing is lost; profiling without host-access validation
//!   plans nothing (fail closed) and says why;
//! - `c_two_devices seq|concurrent`: both devices traced with `device_index` 0 and 1, plan groups
//!   and enforce statistics per device;
//! - `c_no_cleanup`: no `vkDestroy*` at all, yet the trace is complete, auto leaves a plan and
//!   statistics, and applies the plan on the second run;
//! - `c_api10`: an apiVersion 1.0 instance; echo adds no validation message in any mode;
//! - `c_validation`: the program enables the validation layer itself;
//! - `c_suballoc loop|race` (issue 12): one mapped block holds staging and device buffers; roles
//!   come from the host's accesses, both pairs apply by binding each device buffer into its
//!   staging sub-range; the race twin's upload pair is refused for S2, and forcing it corrupts
//!   the output;
//! - `echo-gpu-allocator loop|race|zero` (issue 12): the same workload in Rust, ash +
//!   gpu-allocator (tests/gpu-allocator-app, built by `cargo build --workspace`), with the same
//!   checks, and its zero-copy twin computes the same output;
//! - `c_download ok|clear` (issue 12): one-time downloads, several results each read back once
//!   through a fresh staging buffer that is then destroyed: every download pair is accepted
//!   (staging into device) and applied; the `clear` twin (the host fills the staging buffer before
//!   the copy) is refused for S1, and forcing it corrupts the output;
//! - `echo-vma loop|race` (issue 12): the same workload with ash + VMA (the `vk-mem` crate,
//!   tests/vma-app): persistently mapped staging allocations, `AutoPreferDevice` device buffers,
//!   all in one VMA block; the same checks, and its zero-copy twin computes the same output.
//! - `c_image_in_block` (issue 23): an optimal-tiling image bound into the mapped allocation of
//!   a staging and a readback buffer; profile (and auto's first run) imports that allocation,
//!   so the image must carry the host-allocation handle type: validation reports exactly what it
//!   reports alone (VUID-vkBindImageMemory-memory-02729 before), the output is identical, and the
//!   host-access evidence is still recorded (the fix did not just stop importing); `device`: the
//!   image shares a device block with a planned device buffer, which guarded enforce imports:
//!   the same under `guard=on`, with the group applied;
//! - `c_deferred_ref early|late` (issue 23): a device buffer copied into and barriered before its
//!   readback partner exists: the analyzer refuses the group, with the command and events; the
//!   `late` twin's group applies; and `late`'s plan forced onto `early` (enforce holds the device
//!   buffer's bind back past those commands) adds no validation message
//!   (VUID-vkCmdCopyBuffer-dstBuffer-00121, VUID-VkBufferMemoryBarrier-buffer-01931 before).
//!
//! Run against another build of the layer and CLI with `ECHO_TEST_ARTIFACT_DIR` (see
//! `echo_tests::world::artifact`).
//!
//! Over 1,000 lines: one test per program of the corpus (and per pattern it shows), each with
//! what it must find said in its own words; the shared runner is `echo_tests::world`.

use echo_tests::samples::validation_env;
use echo_tests::world::{artifact, files_under, run_within, Layers, World};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// How long one run may take: lavapipe needs about a second for each of these programs, a few
/// under the validation layer.
const LIMIT: Duration = Duration::from_secs(30);

/// One program of the corpus with fixed arguments.
#[derive(Clone, Copy, Debug)]
struct Prog {
    name: &'static str,
    args: &'static [&'static str],
    /// The program enables VK_LAYER_KHRONOS_validation itself and prints "VALIDATION: <id>".
    loads_validation: bool,
}

const fn prog(name: &'static str, args: &'static [&'static str]) -> Prog {
    Prog {
        name,
        args,
        loads_validation: false,
    }
}

const INSTANCE: Prog = prog("c_instance", &[]);
const UPLOAD_1: Prog = prog("c_upload", &["1"]);
const UPLOAD_3: Prog = prog("c_upload", &["3"]);
const TWO_SEQ: Prog = prog("c_two_devices", &["seq"]);
const TWO_CONCURRENT: Prog = prog("c_two_devices", &["concurrent"]);
const NO_CLEANUP: Prog = prog("c_no_cleanup", &[]);
const API10: Prog = prog("c_api10", &[]);
const SUBALLOC: Prog = prog("c_suballoc", &["loop", "3"]);
const SUBALLOC_RACE: Prog = prog("c_suballoc", &["race", "3"]);
/// The same workload in Rust with ash + gpu-allocator (tests/gpu-allocator-app).
const GPU_ALLOCATOR: Prog = prog("echo-gpu-allocator", &["loop", "3"]);
const GPU_ALLOCATOR_RACE: Prog = prog("echo-gpu-allocator", &["race", "3"]);
const GPU_ALLOCATOR_ZERO: Prog = prog("echo-gpu-allocator", &["zero", "3"]);
/// The same workload in Rust with ash + VMA through vk-mem (tests/vma-app).
const VMA: Prog = prog("echo-vma", &["loop", "3"]);
const VMA_RACE: Prog = prog("echo-vma", &["race", "3"]);
const VMA_ZERO: Prog = prog("echo-vma", &["zero", "3"]);
/// One-time downloads: several results, each read back once through a fresh staging buffer.
const DOWNLOAD: Prog = prog("c_download", &["ok"]);
const DOWNLOAD_CLEAR: Prog = prog("c_download", &["clear"]);
/// Downloads per call through an undecorated storage binding (issue 24): stores only / loads too.
const WRITEONLY: Prog = prog("c_writeonly_download", &["write", "3"]);
const WRITEONLY_READS: Prog = prog("c_writeonly_download", &["read", "3"]);
/// Issue 23: an image and buffers in one mapped, host-visible allocation.
const IMAGE_IN_BLOCK: Prog = prog("c_image_in_block", &["slab", "3"]);
/// The image in a device block with a device buffer whose group guarded enforce imports.
const IMAGE_DEVICE_BLOCK: Prog = prog("c_image_in_block", &["device", "3"]);
/// Issue 23: a device buffer copied into and barriered before its readback partner exists
/// (`late`: the twin that records it after the partner is bound).
const DEFERRED_EARLY: Prog = prog("c_deferred_ref", &["early", "3"]);
const DEFERRED_LATE: Prog = prog("c_deferred_ref", &["late", "3"]);
/// The same programs at twice the calls (issue 24: a plan profiled at 3 applies at 6).
const DOWNLOAD_6: Prog = prog("c_download", &["ok", "6"]);
const WRITEONLY_6: Prog = prog("c_writeonly_download", &["write", "6"]);
const WRITEONLY_READS_6: Prog = prog("c_writeonly_download", &["read", "6"]);
/// Issue 33: the upload with the Vulkan 1.4 paths (core 1.4 / the KHR extensions; the 1.0 calls
/// on a device without them, as Debian 12's lavapipe).
const MODERN_CORE: Prog = prog("c_modern", &["3", "core", "set"]);
const MODERN_KHR: Prog = prog("c_modern", &["3", "khr", "push"]);
const VALIDATION: Prog = Prog {
    name: "c_validation",
    args: &[],
    loads_validation: true,
};

/// What one run left: its output and the statistics lines it wrote (when `VK_ECHO_STATS` was set).
struct Out {
    stdout: String,
    stderr: String,
    stats: Vec<Value>,
}

/// Scratch files of one test (traces, plans, statistics, the auto cache); removed at the end
/// unless `ECHO_KEEP_TEST_DIRS` is set.
struct Case {
    prog: Prog,
    dir: PathBuf,
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
            "echo-real-{}-{}-{}-{tag}",
            std::process::id(),
            prog.name,
            prog.args.join("_")
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Case { prog, dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn label(&self, mode: Option<&str>) -> String {
        let mut name = self.prog.name.to_string();
        for a in self.prog.args {
            name = name + " " + a;
        }
        format!("{name} (echo {})", mode.unwrap_or("not installed"))
    }

    /// Runs the program with echo in `mode` (`None`: not installed), the validation layer when
    /// `validation` (for a program that loads it itself: only the synchronization-validation
    /// settings), and `env`; fails the test on a hang or a non-zero exit. Reads `VK_ECHO_STATS`'
    /// file when `env` sets one.
    fn run(&self, mode: Option<&'static str>, validation: bool, env: &[(&str, String)]) -> Out {
        let env_layers = validation && !self.prog.loads_validation;
        let mut w = World::new(Layers {
            echo: mode,
            test_layer: false,
            validation: env_layers,
        })
        .set("ECHO_C_SPV", spv().display().to_string());
        if validation && self.prog.loads_validation {
            for (k, v) in validation_env() {
                if k != "VK_INSTANCE_LAYERS" {
                    w = w.set(k, v);
                }
            }
        }
        for (k, v) in env {
            w = w.set(k, v);
        }
        let stats_file = env
            .iter()
            .find(|(k, _)| *k == "VK_ECHO_STATS")
            .map(|(_, v)| v);
        if let Some(f) = stats_file {
            let _ = std::fs::remove_file(f);
        }
        let label = self.label(mode);
        let run = bounded(&label, w.command(&program(self.prog.name), self.prog.args));
        assert!(
            run.status.success(),
            "{label} failed ({}):\nstdout:\n{}\nstderr:\n{}",
            run.status,
            run.stdout,
            run.stderr
        );
        let stats = stats_file
            .map(|f| json_lines(Path::new(f)))
            .unwrap_or_default();
        Out {
            stdout: run.stdout,
            stderr: run.stderr,
            stats,
        }
    }

    /// `vkecho analyze TRACE -o PLAN`, which must exit 0; returns the plan.
    fn analyze(&self, trace: &Path, plan: &Path) -> Value {
        let mut cmd = Command::new(artifact("vkecho"));
        cmd.arg("analyze").arg(trace).arg("-o").arg(plan);
        let run = bounded(&format!("vkecho analyze ({})", self.prog.name), cmd);
        assert!(
            run.status.success(),
            "{}: vkecho analyze {} failed ({}):\n{}{}",
            self.label(Some("profile")),
            trace.display(),
            run.status,
            run.stdout,
            run.stderr
        );
        // A real program's trace reads cleanly: no event the analyzer cannot place (e.g. a
        // vkFreeMemory(VK_NULL_HANDLE), which is a valid no-op, recorded as a free).
        let warnings: Vec<&str> = run
            .stdout
            .lines()
            .chain(run.stderr.lines())
            .filter(|l| l.contains("warning:"))
            .collect();
        assert!(
            warnings.is_empty(),
            "{}: vkecho analyze {} warned:\n{}",
            self.label(Some("profile")),
            trace.display(),
            warnings.join("\n")
        );
        read_json(plan)
    }
}

/// [`run_within`] with [`LIMIT`], whose failure on a hang names the run by `label` (not by the
/// whole command line and environment).
fn bounded(label: &str, cmd: Command) -> echo_tests::samples::SampleRun {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_within(cmd, LIMIT)))
        .unwrap_or_else(|e| {
            let msg = e
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| e.downcast_ref::<&str>().copied())
                .unwrap_or("");
            match msg.find(" did not finish within ") {
                Some(i) => panic!("{label}{}", &msg[i..]),
                None => panic!("{label}: {msg}"),
            }
        })
}

fn out_dir() -> &'static Path {
    Path::new(env!("OUT_DIR"))
}

fn program(name: &str) -> PathBuf {
    match name {
        // Workspace members outside default-members (as tests/wgpu-app): `cargo build
        // --workspace`, or `-p echo-gpu-allocator` / `-p echo-vma`, builds them.
        "echo-gpu-allocator" | "echo-vma" => artifact(name),
        _ => out_dir().join(name),
    }
}

fn spv() -> PathBuf {
    out_dir().join("c_double.spv")
}

fn read_json(p: &Path) -> Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", p.display()))
}

/// Every line of a JSON Lines file (none when it does not exist).
fn json_lines(p: &Path) -> Vec<Value> {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("{}: bad JSON line {l:?}: {e}", p.display()))
        })
        .collect()
}

/// The event name of a trace record (serde tag `ev`, snake_case: `device_create`, `queue_submit`).
fn event(r: &Value) -> &str {
    r.get("ev")
        .or_else(|| r.get("event"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn sum(stats: &[Value], field: &str) -> u64 {
    stats.iter().map(|s| s[field].as_u64().unwrap_or(0)).sum()
}

/// Every group the plan holds for the run's devices was applied (none fell back).
fn all_applied(label: &str, stats: &[Value]) {
    let (planned, applied) = (sum(stats, "groups_planned"), sum(stats, "groups_applied"));
    assert!(
        planned >= 1 && applied == planned,
        "{label}: {applied} of {planned} planned groups applied; stats: {stats:?}"
    );
}

fn same_stdout(case: &Case, mode: &str, baseline: &str, out: &Out) {
    assert!(
        out.stdout == baseline,
        "{}: stdout differs from the baseline's\nbaseline:\n{baseline}\nthis run:\n{}\nstderr:\n{}",
        case.label(Some(mode)),
        out.stdout,
        out.stderr
    );
}

/// The whole mode sweep of one program; what the defect checks look at.
struct Flow {
    case: Case,
    /// The program's output without echo.
    baseline: String,
    /// Trace records of the profile run (the header line left out).
    trace: Vec<Value>,
    plan: Value,
    enforce: Out,
    auto: [Out; 2],
    cache: PathBuf,
}

/// Baseline, off, profile + analyze, enforce, auto twice: each exits 0 within [`LIMIT`] with the
/// baseline's stdout.
fn flow(prog: Prog) -> Flow {
    let case = Case::new(prog, "flow");
    let s = |p: &Path| p.display().to_string();
    let baseline = case.run(None, false, &[]).stdout;
    assert!(!baseline.is_empty(), "{}: no output", case.label(None));
    let off = case.run(Some("off"), false, &[]);
    same_stdout(&case, "off", &baseline, &off);

    let trace = case.path("trace.jsonl");
    let profile = case.run(Some("profile"), false, &[("VK_ECHO_TRACE", s(&trace))]);
    same_stdout(&case, "profile", &baseline, &profile);
    let plan_file = case.path("plan.json");
    let plan = case.analyze(&trace, &plan_file);

    let enforce = case.run(
        Some("enforce"),
        false,
        &[
            ("VK_ECHO_PLAN", s(&plan_file)),
            ("VK_ECHO_STATS", s(&case.path("stats-enforce.jsonl"))),
        ],
    );
    same_stdout(&case, "enforce", &baseline, &enforce);

    let cache = case.path("cache");
    std::fs::create_dir_all(&cache).unwrap();
    let auto = [1, 2].map(|n| {
        let out = case.run(
            Some("auto"),
            false,
            &[
                ("VK_ECHO_CACHE_DIR", s(&cache)),
                (
                    "VK_ECHO_STATS",
                    s(&case.path(&format!("stats-auto{n}.jsonl"))),
                ),
            ],
        );
        same_stdout(&case, &format!("auto (run {n})"), &baseline, &out);
        out
    });
    let mut records = json_lines(&trace);
    if !records.is_empty() {
        records.remove(0); // the header
    }
    Flow {
        case,
        baseline,
        trace: records,
        plan,
        enforce,
        auto,
        cache,
    }
}

/// The validation layer's message ids of one run, sorted (a multiset): `[ ID ]` of every
/// "Validation Error/Warning" line it printed, or the program's own "VALIDATION: ID" lines.
fn validation_ids(prog: &Prog, out: &Out) -> Vec<String> {
    let mut ids: Vec<String> = if prog.loads_validation {
        out.stderr
            .lines()
            .filter_map(|l| l.strip_prefix("VALIDATION: "))
            .map(str::to_string)
            .collect()
    } else {
        out.stdout
            .lines()
            .chain(out.stderr.lines())
            .filter(|l| l.contains("Validation ") || l.contains("SYNC-HAZARD"))
            .filter_map(|l| {
                let start = l.find("[ ")? + 2;
                let len = l[start..].find(" ]")?;
                Some(l[start..start + len].to_string())
            })
            .collect()
    };
    ids.sort();
    ids
}

/// Validation alone, then validation + echo in profile and enforce (and auto twice when
/// `with_auto`): the same multiset of message ids every time.
fn validation_check(prog: Prog, with_auto: bool) {
    let case = Case::new(prog, "validation");
    let s = |p: &Path| p.display().to_string();
    let alone = case.run(None, true, &[]);
    let want = validation_ids(&prog, &alone);
    let check = |what: &str, out: &Out| {
        let got = validation_ids(&prog, out);
        assert!(
            got == want,
            "{}: validation + echo {what} reported {got:?}, validation alone {want:?}\n\
             stdout:\n{}\nstderr:\n{}",
            case.label(Some(what)),
            out.stdout,
            out.stderr
        );
    };
    let trace = case.path("trace.jsonl");
    let profile = case.run(Some("profile"), true, &[("VK_ECHO_TRACE", s(&trace))]);
    check("profile", &profile);
    let plan = case.path("plan.json");
    case.analyze(&trace, &plan);
    let enforce = case.run(Some("enforce"), true, &[("VK_ECHO_PLAN", s(&plan))]);
    check("enforce", &enforce);
    if with_auto {
        let cache = case.path("cache");
        for n in 1..=2 {
            let out = case.run(Some("auto"), true, &[("VK_ECHO_CACHE_DIR", s(&cache))]);
            check(&format!("auto (run {n})"), &out);
        }
    }
}

// ------------------------------------------------------------------ (a) c_instance

/// The hang defect: a `-lvulkan` program must finish in every mode with the same output.
#[test]
fn instance_every_mode_finishes() {
    let f = flow(INSTANCE);
    assert!(f.enforce.stdout.ends_with("ok\n"), "{}", f.enforce.stdout);
}

#[test]
fn instance_validation() {
    validation_check(INSTANCE, false);
}

// ------------------------------------------------------------------ (b) c_upload

/// The lost-bytes defect: the staging buffer is mapped and written before it is bound. The plan
/// must take the pair, enforce must redirect its bind or map, and the output stay identical.
fn write_before_bind(prog: Prog) {
    let f = flow(prog);
    let groups = f.plan["groups"].as_array().map_or(0, Vec::len);
    assert!(
        groups >= 1,
        "{}: the plan has no group; rejected: {}",
        f.case.label(Some("profile")),
        f.plan["rejected"]
    );
    let redirected =
        sum(&f.enforce.stats, "binds_redirected") + sum(&f.enforce.stats, "maps_redirected");
    assert!(
        redirected >= 1,
        "{}: no bind or map redirected; stats: {:?}",
        f.case.label(Some("enforce")),
        f.enforce.stats
    );
    // The bytes written before the bind were moved into the shared memory ...
    assert!(
        sum(&f.enforce.stats, "bytes_carried") >= 1 << 20,
        "{}: nothing carried over at the bind; stats: {:?}",
        f.case.label(Some("enforce")),
        f.enforce.stats
    );
    // ... and that is what keeps the output right: the old behaviour, planted with a test switch
    // (those bytes left behind in the staging buffer's own allocation), changes the output, so
    // the identical-output check above can fail.
    let planted = f.case.run(
        Some("enforce"),
        false,
        &[
            (
                "VK_ECHO_PLAN",
                f.case.path("plan.json").display().to_string(),
            ),
            ("VK_ECHO_TEST_NO_CARRY", "1".into()),
        ],
    );
    assert_ne!(
        planted.stdout,
        f.baseline,
        "{}: leaving the bytes written before the bind behind did not change the output",
        f.case.label(Some("enforce, VK_ECHO_TEST_NO_CARRY=1"))
    );
}

#[test]
fn upload_1_write_before_bind() {
    write_before_bind(UPLOAD_1);
}

#[test]
fn upload_3_write_before_bind() {
    write_before_bind(UPLOAD_3);
}

/// Fail closed: profiled without host-access validation (`VK_ECHO_VALIDATE=false`) there is no
/// evidence for any candidate, so the plan has no group and says why for each.
#[test]
fn upload_fail_closed_without_evidence() {
    for prog in [UPLOAD_1, UPLOAD_3] {
        let case = Case::new(prog, "novalidate");
        let trace = case.path("trace.jsonl");
        case.run(
            Some("profile"),
            false,
            &[
                ("VK_ECHO_TRACE", trace.display().to_string()),
                ("VK_ECHO_VALIDATE", "false".into()),
            ],
        );
        let plan = case.analyze(&trace, &case.path("plan.json"));
        let groups = plan["groups"].as_array().map_or(0, Vec::len);
        let rejected = plan["rejected"].as_array().map_or(0, Vec::len);
        assert!(
            groups == 0 && rejected >= 1,
            "{}, VK_ECHO_VALIDATE=false: want 0 groups and the refused candidates listed, got \
             {groups} groups, {rejected} rejected:\n{plan:#}",
            case.label(Some("profile"))
        );
    }
}

#[test]
fn upload_1_validation() {
    validation_check(UPLOAD_1, false);
}

#[test]
fn upload_3_validation() {
    validation_check(UPLOAD_3, false);
}

// ------------------------------------------------------------------ (c) c_two_devices

/// Two devices in one process: both traced and numbered 0 and 1, plan groups per device, one
/// statistics line per device.
fn two_devices(prog: Prog) {
    let f = flow(prog);
    let label = f.case.label(Some("profile"));
    let indices = |vs: Vec<&Value>| -> Vec<Option<u64>> {
        let mut v: Vec<Option<u64>> = vs.iter().map(|r| r["device_index"].as_u64()).collect();
        v.sort();
        v
    };
    let creates: Vec<&Value> = f
        .trace
        .iter()
        .filter(|r| event(r) == "device_create")
        .collect();
    assert_eq!(
        indices(creates.clone()),
        vec![Some(0), Some(1)],
        "{label}: want two device_create records with device_index 0 and 1, got {creates:?}"
    );
    let groups: Vec<&Value> = f.plan["groups"]
        .as_array()
        .map(|g| g.iter().collect())
        .unwrap_or_default();
    let mut plan_devices = indices(groups.clone());
    plan_devices.dedup();
    assert_eq!(
        plan_devices,
        vec![Some(0), Some(1)],
        "{label}: want plan groups carrying device_index 0 and 1:\n{:#}",
        f.plan
    );
    let stats: Vec<&Value> = f.enforce.stats.iter().collect();
    assert_eq!(
        indices(stats),
        vec![Some(0), Some(1)],
        "{}: want one statistics line per device with its device_index, got {:?}",
        f.case.label(Some("enforce")),
        f.enforce.stats
    );
    // Each device applies its own groups, all of them (a plan of one device's traffic applied
    // to the other would find nothing to alias, or the wrong buffers).
    all_applied(&f.case.label(Some("enforce")), &f.enforce.stats);
    for s in &f.enforce.stats {
        assert!(
            s["groups_planned"].as_u64() == Some(2),
            "{}: each device has its upload and readback group; got {s}",
            f.case.label(Some("enforce"))
        );
    }
}

#[test]
fn two_devices_seq() {
    two_devices(TWO_SEQ);
}

#[test]
fn two_devices_concurrent() {
    two_devices(TWO_CONCURRENT);
}

#[test]
fn two_devices_seq_validation() {
    validation_check(TWO_SEQ, false);
}

#[test]
fn two_devices_concurrent_validation() {
    validation_check(TWO_CONCURRENT, false);
}

// ------------------------------------------------------------------ (d) c_no_cleanup

/// A program that never destroys anything: the trace is complete, auto analyzes at process exit
/// and applies the plan next time, and enforce still writes its statistics.
#[test]
fn no_cleanup() {
    let f = flow(NO_CLEANUP);
    let submits = f
        .trace
        .iter()
        .filter(|r| event(r) == "queue_submit")
        .count();
    assert!(
        submits >= 1,
        "{}: the trace has no queue_submit ({} records)",
        f.case.label(Some("profile")),
        f.trace.len()
    );
    let files = files_under(&f.cache);
    let plan = files.iter().find(|p| {
        let n = p.file_name().unwrap().to_string_lossy();
        (n.starts_with("plan") && n.ends_with(".json")) || n.ends_with(".plan")
    });
    assert!(
        plan.is_some(),
        "{}: no plan under the cache dir; files: {files:?}\nstderr:\n{}",
        f.case.label(Some("auto (run 1)")),
        f.auto[0].stderr
    );
    assert!(
        !f.auto[0].stats.is_empty(),
        "{}: no statistics line\nstderr:\n{}",
        f.case.label(Some("auto (run 1)")),
        f.auto[0].stderr
    );
    let status: Vec<&str> = f.auto[1]
        .stats
        .iter()
        .map(|s| s["plan_status"].as_str().unwrap_or(""))
        .collect();
    assert!(
        status.contains(&"applied"),
        "{}: want plan_status \"applied\", got {status:?}\nstderr:\n{}",
        f.case.label(Some("auto (run 2)")),
        f.auto[1].stderr
    );
    assert!(
        !f.enforce.stats.is_empty(),
        "{}: the statistics file is empty (the device is never destroyed)\nstderr:\n{}",
        f.case.label(Some("enforce")),
        f.enforce.stderr
    );
    assert!(
        f.enforce.stats.iter().all(|s| s["ended"] == "exit"),
        "{}: the statistics should say the device lived until exit: {:?}",
        f.case.label(Some("enforce")),
        f.enforce.stats
    );
    // The staging buffer is filled before its device buffer exists: its bind waits, the bytes
    // written meanwhile are carried over, and both groups apply.
    all_applied(&f.case.label(Some("enforce")), &f.enforce.stats);
}

#[test]
fn no_cleanup_validation() {
    validation_check(NO_CLEANUP, false);
}

// ------------------------------------------------------------------ (e) c_api10

#[test]
fn api10_every_mode() {
    flow(API10);
}

/// An apiVersion 1.0 instance: echo calls nothing newer, in any mode (in particular no
/// UNASSIGNED-API-Version-Violation).
#[test]
fn api10_validation() {
    validation_check(API10, true);
}

// ------------------------------------------------------------------ (f) c_validation

#[test]
fn program_enabled_validation_every_mode() {
    flow(VALIDATION);
}

#[test]
fn program_enabled_validation() {
    validation_check(VALIDATION, false);
}

// ------------------------------------------------------------------ the checks hear validation

/// The validation comparisons above prove something only if the validation layer's messages
/// reach them: with `ECHO_C_NO_BARRIERS=1` (no barriers recorded) synchronization validation
/// reports hazards, and they are read both from the env-loaded layer's output and from the
/// program's own messenger.
#[test]
fn validation_messages_are_heard() {
    for prog in [UPLOAD_3, VALIDATION] {
        let case = Case::new(prog, "heard");
        let out = case.run(None, true, &[("ECHO_C_NO_BARRIERS", "1".into())]);
        let ids = validation_ids(&prog, &out);
        assert!(
            ids.iter().any(|id| id.starts_with("SYNC-HAZARD")),
            "{}: no SYNC-HAZARD heard without barriers ({ids:?})\nstdout:\n{}\nstderr:\n{}",
            case.label(None),
            out.stdout,
            out.stderr
        );
    }
}

// ------------------------------------------------------------------ (issue 12) c_suballoc

/// Every record of event `ev` in a trace.
fn records<'a>(trace: &'a [Value], ev: &str) -> Vec<&'a Value> {
    trace.iter().filter(|r| event(r) == ev).collect()
}

/// One mapped block, both roles inside it: the profile watches all four buffers from their bind,
/// the plan pairs upload and readback by behaviour (the device buffers live in mapped memory
/// too), enforce binds each device buffer into its staging sub-range of the same block and drops
/// every copy, with the output unchanged.
#[test]
fn suballoc_pairs_apply_in_one_mapped_block() {
    let f = pairs_apply_in_mapped_blocks(SUBALLOC);
    assert_eq!(
        records(&f.trace, "memory_alloc").len(),
        1,
        "{}: one allocation for all four buffers",
        f.case.label(Some("profile"))
    );
}

/// The block mapped only after every buffer is bound: the profiler arms the buffers at the
/// map (before the host can touch them), so the same pairs apply; the first map's `watched`
/// records come right after it.
#[test]
fn suballoc_mapped_after_bind_is_watched_from_the_map() {
    let case = Case::new(SUBALLOC, "late-map");
    let s = |p: &Path| p.display().to_string();
    let late = ("ECHO_C_MAP_AFTER_BIND", "1".to_string());
    let baseline = case.run(None, false, std::slice::from_ref(&late)).stdout;
    let trace = case.path("trace.jsonl");
    case.run(
        Some("profile"),
        false,
        &[late.clone(), ("VK_ECHO_TRACE", s(&trace))],
    );
    let mut records = json_lines(&trace);
    records.remove(0);
    let map_at = records
        .iter()
        .position(|r| event(r) == "map_memory")
        .expect("a map_memory record");
    let watched: Vec<usize> = records
        .iter()
        .enumerate()
        .filter(|(_, r)| event(r) == "watched")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(watched.len(), 4, "{}", case.label(Some("profile")));
    assert!(
        watched.iter().all(|&i| i > map_at)
            && records[map_at..watched[3]]
                .iter()
                .all(|r| !matches!(event(r), "host_access" | "queue_submit")),
        "{}: the buffers are armed at the map, before anything else happens",
        case.label(Some("profile"))
    );
    let plan_file = case.path("plan.json");
    let plan = case.analyze(&trace, &plan_file);
    assert_eq!(plan["groups"].as_array().map_or(0, Vec::len), 2, "{plan:#}");
    let out = case.run(
        Some("enforce"),
        false,
        &[
            late,
            ("VK_ECHO_PLAN", s(&plan_file)),
            ("VK_ECHO_STATS", s(&case.path("stats.jsonl"))),
        ],
    );
    assert_eq!(out.stdout, baseline, "{}", case.label(Some("enforce")));
    all_applied(&case.label(Some("enforce")), &out.stats);
}

/// gpu-allocator: every buffer sub-allocated from mapped blocks, staging and device alike.
#[test]
fn gpu_allocator_pairs_apply_in_mapped_blocks() {
    pairs_apply_in_mapped_blocks(GPU_ALLOCATOR);
}

/// VMA: persistently mapped staging allocations and `AutoPreferDevice` device buffers; on
/// lavapipe's one memory type VMA puts all four in one block, mapped whole for the staging
/// allocations' pointers.
#[test]
fn vma_pairs_apply_in_mapped_blocks() {
    let f = pairs_apply_in_mapped_blocks(VMA);
    assert_eq!(
        records(&f.trace, "memory_alloc").len(),
        1,
        "{}: VMA sub-allocates all four buffers from one block",
        f.case.label(Some("profile"))
    );
}

/// VMA with 12 MiB buffers (`ECHO_SIZE_MIB`; bench/allocators.sh runs 15 MiB, the same layout):
/// the first block holds the upload pair; VMA allocates a second block for the output buffer,
/// binds it, and maps that block only when the readback allocation (which asks for a pointer) is created — after the
/// device buffer's bind, which enforce holds back until its staging partner is bound. The map
/// must not force that bind (the plan's `device_mapped`: the host never touches the device
/// buffer's bytes): both groups apply, output identical, validation as quiet as without echo.
#[test]
fn vma_second_block_mapped_after_device_bind() {
    let case = Case::new(VMA, "12mib");
    let s = |p: &Path| p.display().to_string();
    let big = ("ECHO_SIZE_MIB", "12".to_string());
    let baseline = case.run(None, false, std::slice::from_ref(&big)).stdout;
    let trace = case.path("trace.jsonl");
    case.run(
        Some("profile"),
        false,
        &[big.clone(), ("VK_ECHO_TRACE", s(&trace))],
    );
    // The layout this test is about: two blocks, the second mapped after a bind into it.
    let trace_records = json_lines(&trace);
    let allocs = records(&trace_records, "memory_alloc");
    assert_eq!(
        allocs.len(),
        2,
        "{}: want two VMA blocks",
        case.label(Some("profile"))
    );
    let second = &allocs[1]["memory"];
    let bind_at = trace_records
        .iter()
        .position(|r| event(r) == "bind_buffer" && &r["memory"] == second);
    let map_at = trace_records
        .iter()
        .position(|r| event(r) == "map_memory" && &r["memory"] == second);
    assert!(
        matches!((bind_at, map_at), (Some(b), Some(m)) if b < m),
        "{}: the second block is not mapped after a bind into it (bind {bind_at:?}, map \
         {map_at:?})",
        case.label(Some("profile"))
    );
    let plan_file = case.path("plan.json");
    let plan = case.analyze(&trace, &plan_file);
    assert_eq!(plan["groups"].as_array().map_or(0, Vec::len), 2, "{plan:#}");
    let enforce_env = [
        big.clone(),
        ("VK_ECHO_PLAN", s(&plan_file)),
        ("VK_ECHO_STATS", s(&case.path("stats.jsonl"))),
    ];
    let out = case.run(Some("enforce"), false, &enforce_env);
    let label = case.label(Some("enforce"));
    assert_eq!(out.stdout, baseline, "{label}");
    all_applied(&label, &out.stats);
    assert_eq!(sum(&out.stats, "binds_redirected"), 2, "{label}");
    assert_eq!(
        sum(&out.stats, "bytes_elided"),
        (6 * 12) << 20,
        "{label}: {:?}",
        out.stats
    );
    let alone = case.run(None, true, std::slice::from_ref(&big));
    let checked = case.run(Some("enforce"), true, &enforce_env[..2]);
    assert_eq!(
        validation_ids(&VMA, &checked),
        validation_ids(&VMA, &alone),
        "{label} under validation:\n{}",
        checked.stderr
    );
}

/// VMA's zero-copy twin (the bound in bench/allocators.md: the shader reads the upload staging
/// buffer and writes the readback one) computes what the copying program computes, and is clean
/// under synchronization validation.
#[test]
fn vma_zero_copy_twin_matches() {
    zero_copy_twin_matches(VMA, VMA_ZERO);
}

/// gpu-allocator's zero-copy twin, the same way.
#[test]
fn gpu_allocator_zero_copy_twin_matches() {
    zero_copy_twin_matches(GPU_ALLOCATOR, GPU_ALLOCATOR_ZERO);
}

/// The twin's checksum equals the copying program's (over 3 iterations, each with its own input
/// and push constant, so a twin that read stale input or skipped an iteration differs), and the
/// twin is clean under synchronization validation.
fn zero_copy_twin_matches(copying: Prog, zero: Prog) {
    let want = Case::new(copying, "zero").run(None, false, &[]).stdout;
    let case = Case::new(zero, "zero");
    let got = case.run(None, false, &[]);
    assert!(
        want.contains("checksum ") && got.stdout == want,
        "{}: {:?}, the copying program {want:?}",
        case.label(None),
        got.stdout
    );
    let checked = case.run(None, true, &[]);
    assert_eq!(
        validation_ids(&zero, &checked),
        Vec::<String>::new(),
        "{}",
        checked.stderr
    );
}

fn pairs_apply_in_mapped_blocks(prog: Prog) -> Flow {
    let f = flow(prog);
    let label = f.case.label(Some("profile"));
    assert_eq!(
        records(&f.trace, "watched").len(),
        4,
        "{label}: every buffer of the mapped block is watched from its bind"
    );
    let groups = f.plan["groups"].as_array().cloned().unwrap_or_default();
    assert_eq!(groups.len(), 2, "{label}: plan {:#}", f.plan);
    for g in &groups {
        assert_eq!(g["direction"], "device_into_staging", "{g:#}");
        assert_eq!(g["device_mapped"], true, "{g:#}");
    }
    let label = f.case.label(Some("enforce"));
    all_applied(&label, &f.enforce.stats);
    assert_eq!(sum(&f.enforce.stats, "binds_redirected"), 2, "{label}");
    // 3 iterations, an upload and a readback of 4 MiB each.
    assert_eq!(
        sum(&f.enforce.stats, "bytes_elided"),
        (6 * 4) << 20,
        "{label}: {:?}",
        f.enforce.stats
    );
    all_applied(&f.case.label(Some("auto (run 2)")), &f.auto[1].stats);
    f
}

/// The negative twin: the host writes the upload staging range while the GPU still reads the
/// device side (legal as written: the GPU does not read the staging buffer then). The upload
/// pair is refused for S2, the readback pair still applies; and the refusal matters: the first
/// program's plan, forced onto this one, changes its output.
#[test]
fn suballoc_race_is_refused_for_s2() {
    race_is_refused_for_s2(SUBALLOC, SUBALLOC_RACE);
}

#[test]
fn gpu_allocator_race_is_refused_for_s2() {
    race_is_refused_for_s2(GPU_ALLOCATOR, GPU_ALLOCATOR_RACE);
}

#[test]
fn vma_race_is_refused_for_s2() {
    race_is_refused_for_s2(VMA, VMA_RACE);
}

fn race_is_refused_for_s2(good: Prog, racy: Prog) {
    let f = flow(racy);
    let label = f.case.label(Some("profile"));
    let rejected = f.plan["rejected"].as_array().cloned().unwrap_or_default();
    assert!(
        rejected.len() == 1 && rejected[0]["condition"] == "S2",
        "{label}: want the upload pair refused for S2: {:#}",
        f.plan
    );
    // The upload staging buffer (TRANSFER_SRC, not TRANSFER_DST) is the one refused.
    let usage = rejected[0]["staging"]["usage"].as_u64().unwrap_or(0);
    assert!(usage & 0x1 != 0 && usage & 0x2 == 0, "{:#}", rejected[0]);
    assert_eq!(f.plan["groups"].as_array().map_or(0, Vec::len), 1);
    all_applied(&f.case.label(Some("enforce")), &f.enforce.stats);
    forcing_changes_output(good, &f);
}

/// The refusal of `f`'s program matters: the plan of `good` (which accepts the pairs `f`'s
/// program had refused), forced onto it under its own context, changes its output in at least
/// one of 3 runs.
fn forcing_changes_output(good: Prog, f: &Flow) {
    let ok = Case::new(good, "forced");
    let s = |p: &Path| p.display().to_string();
    let trace = ok.path("trace.jsonl");
    ok.run(Some("profile"), false, &[("VK_ECHO_TRACE", s(&trace))]);
    let mut forced = ok.analyze(&trace, &ok.path("plan.json"));
    forced["context"] = f.plan["context"].clone();
    let forced_file = ok.path("forced.json");
    std::fs::write(&forced_file, forced.to_string()).unwrap();
    let mut differs = false;
    for _ in 0..3 {
        let out = f
            .case
            .run(Some("enforce"), false, &[("VK_ECHO_PLAN", s(&forced_file))]);
        differs |= out.stdout != f.baseline;
    }
    assert!(
        differs,
        "{}: enforcing the refused pair did not change the output in 3 runs, so this twin does \
         not show that the refusal matters",
        f.case.label(Some("enforce, forced plan"))
    );
}

#[test]
fn suballoc_validation() {
    clean_under_validation(SUBALLOC);
}

#[test]
fn gpu_allocator_validation() {
    clean_under_validation(GPU_ALLOCATOR);
}

#[test]
fn vma_validation() {
    clean_under_validation(VMA);
}

fn clean_under_validation(prog: Prog) {
    validation_check(prog, false);
    // And clean: validation alone reports nothing for this program.
    let case = Case::new(prog, "clean");
    let alone = case.run(None, true, &[]);
    assert_eq!(
        validation_ids(&prog, &alone),
        Vec::<String>::new(),
        "{}",
        alone.stderr
    );
}

// ------------------------------------------------------------------ (issue 12) c_download

/// The members of every plan group, with their group's direction.
fn members(plan: &Value) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for g in plan["groups"].as_array().cloned().unwrap_or_default() {
        for m in g["members"].as_array().cloned().unwrap_or_default() {
            out.push((g["direction"].as_str().unwrap_or("").to_string(), m));
        }
    }
    out
}

/// Device buffers the program writes with a dispatch, each read back once (c_download's NRES).
const DOWNLOADS: usize = 3;
/// c_download's buffer size.
const DOWNLOAD_BYTES: u64 = 2 << 20;

/// One-time downloads are candidates like one-time uploads: each result's single readback into a
/// fresh staging buffer (destroyed after it) is accepted, staging into device (the short-lived
/// allocation is the one that goes), and enforce applies them all: the copies are dropped, the
/// maps redirected, the staging allocations never made, the output identical; the trace reads
/// without analyzer warnings (checked by `analyze`).
#[test]
fn download_one_time_pairs_apply() {
    let f = flow(DOWNLOAD);
    let label = f.case.label(Some("profile"));
    let downloads: Vec<(String, Value)> = members(&f.plan)
        .into_iter()
        .filter(|(_, m)| m["role"] == "readback")
        .collect();
    assert_eq!(
        downloads.len(),
        DOWNLOADS,
        "{label}: want every download pair accepted: {:#}",
        f.plan
    );
    for (direction, m) in &downloads {
        assert_eq!(m["one_time"], true, "{label}: {m:#}");
        assert_eq!(m["copies"], 1, "{label}: {m:#}");
        assert_eq!(direction, "staging_into_device", "{label}: {m:#}");
    }
    assert_eq!(
        f.plan["rejected"].as_array().map_or(0, Vec::len),
        0,
        "{label}: {:#}",
        f.plan
    );
    let label = f.case.label(Some("enforce"));
    all_applied(&label, &f.enforce.stats);
    let stats = &f.enforce.stats;
    assert!(
        sum(stats, "bytes_elided") >= DOWNLOADS as u64 * DOWNLOAD_BYTES,
        "{label}: the downloads' bytes were not all elided: {stats:?}"
    );
    assert!(
        sum(stats, "maps_redirected") >= DOWNLOADS as u64,
        "{label}: each download's map goes to its device buffer's memory: {stats:?}"
    );
    assert!(
        sum(stats, "allocations_skipped") >= DOWNLOADS as u64,
        "{label}: the downloads' staging allocations need not reach the driver: {stats:?}"
    );
    all_applied(&f.case.label(Some("auto (run 2)")), &f.auto[1].stats);
}

/// The negative twin: the host fills each fresh staging buffer before the copy into it (legal as
/// written). Sharing memory, that fill would overwrite the result the dropped copy was to
/// deliver: every download pair is refused for S1 (the upload still applies), and forcing the
/// `ok` program's plan onto this one changes its output.
#[test]
fn download_clear_is_refused_for_s1() {
    let f = flow(DOWNLOAD_CLEAR);
    let label = f.case.label(Some("profile"));
    let rejected = f.plan["rejected"].as_array().cloned().unwrap_or_default();
    assert_eq!(rejected.len(), DOWNLOADS, "{label}: {:#}", f.plan);
    for r in &rejected {
        assert_eq!(r["condition"], "S1", "{label}: {r:#}");
        // The readback staging buffer (TRANSFER_DST only) is the one refused.
        assert_eq!(r["staging"]["usage"], 0x2, "{label}: {r:#}");
    }
    assert!(
        members(&f.plan)
            .iter()
            .all(|(_, m)| m["role"] != "readback"),
        "{label}: {:#}",
        f.plan
    );
    all_applied(&f.case.label(Some("enforce")), &f.enforce.stats);
    forcing_changes_output(DOWNLOAD, &f);
}

#[test]
fn download_validation() {
    clean_under_validation(DOWNLOAD);
}

// ------------------------------------------------------------------ (issue 23) c_image_in_block

#[test]
fn image_in_block_every_mode() {
    let f = flow(IMAGE_IN_BLOCK);
    // The allocation holding the image is still imported in profile mode: the host's writes
    // to the staging bytes and reads of the readback bytes were seen.
    let accesses = f.trace.iter().filter(|r| event(r) == "host_access").count();
    assert!(
        accesses >= 2,
        "{}: want the host's accesses recorded (evidence kept), got {accesses} host_access events",
        f.case.label(Some("profile"))
    );
}

#[test]
fn image_in_block_validation() {
    validation_check(IMAGE_IN_BLOCK, true);
    let case = Case::new(IMAGE_IN_BLOCK, "clean");
    let alone = case.run(None, true, &[]);
    assert_eq!(
        validation_ids(&IMAGE_IN_BLOCK, &alone),
        Vec::<String>::new(),
        "{}",
        alone.stderr
    );
}

// ------------------------------------------------------------------ (issue 23) c_deferred_ref

#[test]
fn deferred_ref_group_is_refused() {
    let f = flow(DEFERRED_EARLY);
    let label = f.case.label(Some("profile"));
    assert_eq!(
        f.plan["groups"].as_array().map_or(0, Vec::len),
        0,
        "{label}: {:#}",
        f.plan
    );
    let rejected = f.plan["rejected"].as_array().cloned().unwrap_or_default();
    assert!(
        rejected.len() == 1
            && rejected[0]["condition"] == "Compat"
            && rejected[0]["message"]
                .as_str()
                .is_some_and(|m| m.contains("enforce holds the bind back")),
        "{label}: want the readback pair refused because the device buffer is named first: {:#}",
        f.plan
    );
    // The control: recorded after the partner is bound, the same group applies.
    let late = flow(DEFERRED_LATE);
    assert_eq!(late.plan["groups"].as_array().map_or(0, Vec::len), 1);
    all_applied(&late.case.label(Some("enforce")), &late.enforce.stats);
}

#[test]
fn deferred_ref_validation() {
    validation_check(DEFERRED_EARLY, true);
}

/// The layer's backstop: the `late` twin's plan forced onto `early` makes enforce hold the
/// device buffer's bind back past the copy and barriers recorded before its partner exists; the
/// bind must happen at the first of them, so validation reports what it reports alone, and the
/// output is the baseline's.
#[test]
fn deferred_ref_forced_plan_binds_at_first_reference() {
    let s = |p: &Path| p.display().to_string();
    let late = Case::new(DEFERRED_LATE, "forced-source");
    let trace = late.path("trace.jsonl");
    late.run(Some("profile"), false, &[("VK_ECHO_TRACE", s(&trace))]);
    let mut forced = late.analyze(&trace, &late.path("plan.json"));
    assert_eq!(forced["groups"].as_array().map_or(0, Vec::len), 1);

    let case = Case::new(DEFERRED_EARLY, "forced");
    let early_trace = case.path("trace.jsonl");
    case.run(
        Some("profile"),
        false,
        &[("VK_ECHO_TRACE", s(&early_trace))],
    );
    let own = case.analyze(&early_trace, &case.path("own.json"));
    forced["context"] = own["context"].clone();
    let forced_file = case.path("forced.json");
    std::fs::write(&forced_file, forced.to_string()).unwrap();

    let alone = case.run(None, true, &[]);
    let want = validation_ids(&DEFERRED_EARLY, &alone);
    let stats = case.path("stats.jsonl");
    let out = case.run(
        Some("enforce"),
        true,
        &[
            ("VK_ECHO_PLAN", s(&forced_file)),
            ("VK_ECHO_STATS", s(&stats)),
        ],
    );
    let got = validation_ids(&DEFERRED_EARLY, &out);
    assert!(
        got == want,
        "{}: validation + echo reported {got:?}, validation alone {want:?}\nstderr:\n{}",
        case.label(Some("enforce, forced plan")),
        out.stderr
    );
    assert_eq!(out.stdout, alone.stdout, "{}", out.stderr);
    // The plan was really applied to this run (its group was planned), and fell back.
    assert_eq!(sum(&out.stats, "groups_planned"), 1, "{:?}", out.stats);
}

#[test]
fn image_in_device_block_every_mode() {
    flow(IMAGE_DEVICE_BLOCK);
}

/// Profile (the block is host-visible on lavapipe, so imported) and guarded enforce (the block
/// of a guarded group is imported) under validation: exactly what validation alone reports, the
/// baseline's output, and the group applied under the guard.
#[test]
fn image_in_device_block_guarded_validation() {
    validation_check(IMAGE_DEVICE_BLOCK, false);
    let case = Case::new(IMAGE_DEVICE_BLOCK, "guarded");
    let s = |p: &Path| p.display().to_string();
    let alone = case.run(None, true, &[]);
    let want = validation_ids(&IMAGE_DEVICE_BLOCK, &alone);
    assert_eq!(want, Vec::<String>::new(), "{}", alone.stderr);
    let trace = case.path("trace.jsonl");
    case.run(Some("profile"), false, &[("VK_ECHO_TRACE", s(&trace))]);
    let plan = case.path("plan.json");
    case.analyze(&trace, &plan);
    let stats = case.path("stats.jsonl");
    let out = case.run(
        Some("enforce"),
        true,
        &[
            ("VK_ECHO_PLAN", s(&plan)),
            ("VK_ECHO_GUARD", "on".into()),
            ("VK_ECHO_STATS", s(&stats)),
        ],
    );
    let label = case.label(Some("enforce, guard=on"));
    let got = validation_ids(&IMAGE_DEVICE_BLOCK, &out);
    assert!(
        got == want,
        "{label}: validation + echo reported {got:?}, validation alone {want:?}\nstderr:\n{}",
        out.stderr
    );
    assert_eq!(out.stdout, alone.stdout, "{label}:\n{}", out.stderr);
    all_applied(&label, &out.stats);
    assert!(
        sum(&out.stats, "guard_windows") >= 1,
        "{label}: {:?}",
        out.stats
    );
}

// ------------------------------------------------------- (issue 24) c_writeonly_download

/// c_writeonly_download's calls.
const WRITEONLY_CALLS: usize = 3;

/// Issue 24's case 1: the kernel only stores to its result binding, which says neither
/// `readonly` nor `writeonly`. By instruction the dispatch writes the fresh device buffer and
/// reads nothing of it, so every call's download pair is accepted (one-time, staging into
/// device) and enforce drops every download with the output identical. With access taken from
/// decorations alone (before issue 24) the binding was read-write and all three were refused
/// for S1 ("the GPU reads device buffer #3 … expecting the host's writes … before its bind").
#[test]
fn writeonly_download_pairs_apply() {
    let f = flow(WRITEONLY);
    let label = f.case.label(Some("profile"));
    let downloads: Vec<(String, Value)> = members(&f.plan)
        .into_iter()
        .filter(|(_, m)| m["role"] == "readback")
        .collect();
    assert_eq!(
        downloads.len(),
        WRITEONLY_CALLS,
        "{label}: want every call's download accepted: {:#}",
        f.plan
    );
    for (direction, m) in &downloads {
        assert_eq!(m["one_time"], true, "{label}: {m:#}");
        assert_eq!(direction, "staging_into_device", "{label}: {m:#}");
    }
    assert_eq!(
        f.plan["rejected"].as_array().map_or(0, Vec::len),
        0,
        "{label}: {:#}",
        f.plan
    );
    let label = f.case.label(Some("enforce"));
    all_applied(&label, &f.enforce.stats);
    assert!(
        sum(&f.enforce.stats, "bytes_elided") >= WRITEONLY_CALLS as u64 * DOWNLOAD_BYTES,
        "{label}: every call's download is elided: {:?}",
        f.enforce.stats
    );
}

/// The planted fault: the same program with a kernel that really loads its result binding
/// before storing. The dispatch reads bytes nothing wrote, so every download pair stays refused
/// for S1 (the upload still applies), and the output is still identical in every mode.
#[test]
fn writeonly_download_reading_kernel_is_refused_for_s1() {
    let f = flow(WRITEONLY_READS);
    let label = f.case.label(Some("profile"));
    let rejected = f.plan["rejected"].as_array().cloned().unwrap_or_default();
    assert_eq!(rejected.len(), WRITEONLY_CALLS, "{label}: {:#}", f.plan);
    for r in &rejected {
        assert_eq!(r["condition"], "S1", "{label}: {r:#}");
        assert_eq!(r["staging"]["usage"], 0x2, "{label}: {r:#}");
    }
    assert!(
        members(&f.plan)
            .iter()
            .all(|(_, m)| m["role"] != "readback"),
        "{label}: {:#}",
        f.plan
    );
}

// ------------------------------------------------- (issue 24) per-call pair classes

/// Profiles `short` (3 calls), analyzes, then runs `long` (the same program at 6 calls, an
/// argument list no profile saw) under `context=program` with that plan: returns the plan, the
/// baseline of `long` and its enforced run.
fn profiled_short_enforced_long(short: Prog, long: Prog) -> (Case, Value, String, Out) {
    let case = Case::new(short, "class");
    let s = |p: &Path| p.display().to_string();
    let trace = case.path("trace.jsonl");
    case.run(Some("profile"), false, &[("VK_ECHO_TRACE", s(&trace))]);
    let plan_file = case.path("plan.json");
    let plan = case.analyze(&trace, &plan_file);
    let long_case = Case::new(long, "class-long");
    let baseline = long_case.run(None, false, &[]).stdout;
    let out = long_case.run(
        Some("enforce"),
        false,
        &[
            ("VK_ECHO_PLAN", s(&plan_file)),
            ("VK_ECHO_CONTEXT", "program".into()),
            ("VK_ECHO_STATS", s(&long_case.path("stats.jsonl"))),
        ],
    );
    same_stdout(&long_case, "enforce, plan of 3 calls", &baseline, &out);
    (case, plan, baseline, out)
}

/// Issue 24's case 2: a program that makes a fresh download pair on every call, profiled at 3
/// calls and run at 6. The plan holds one class of the three download groups (past those
/// profiled: one-time downloads, no guard needed), and enforce elides every one of the six
/// downloads — counted per submission — with the output identical. Before classes the plan
/// named ordinals 0–2 only: calls 3–5 kept their copies (3 of 6 downloads elided).
fn class_applies_past_profiled(short: Prog, long: Prog) {
    let (case, plan, _, out) = profiled_short_enforced_long(short, long);
    let label = case.label(Some("enforce at 6 calls"));
    let classes = plan["classes"].as_array().cloned().unwrap_or_default();
    assert_eq!(classes.len(), 1, "{label}: want one class: {plan:#}");
    assert_eq!(
        classes[0]["groups"].as_array().map_or(0, Vec::len),
        3,
        "{label}: {plan:#}"
    );
    assert_eq!(classes[0]["beyond"], true, "{label}: {plan:#}");
    assert_eq!(classes[0]["guard_needed"], false, "{label}: {plan:#}");
    let stats = &out.stats;
    assert_eq!(
        sum(stats, "class_instances_applied"),
        3,
        "{label}: calls 3..5 are class instances past those profiled: {stats:?}"
    );
    let downloads = 6 * DOWNLOAD_BYTES;
    // Every download elided as it ran (the upload, when applied, adds one more copy).
    assert!(
        sum(stats, "bytes_elided_run") >= downloads && sum(stats, "copies_elided_run") >= 6,
        "{label}: every call's download is elided: {stats:?}"
    );
}

#[test]
fn download_class_applies_past_profiled() {
    class_applies_past_profiled(DOWNLOAD, DOWNLOAD_6);
}

#[test]
fn writeonly_download_class_applies_past_profiled() {
    class_applies_past_profiled(WRITEONLY, WRITEONLY_6);
}

/// The reading kernel's downloads stay refused: no group, so no class, and nothing is elided at
/// 6 calls either (output identical).
#[test]
fn writeonly_download_reading_kernel_has_no_class() {
    let (case, plan, _, out) = profiled_short_enforced_long(WRITEONLY_READS, WRITEONLY_READS_6);
    let label = case.label(Some("enforce at 6 calls"));
    assert!(
        plan["classes"].as_array().is_none_or(Vec::is_empty),
        "{label}: {plan:#}"
    );
    assert_eq!(sum(&out.stats, "class_instances_applied"), 0, "{label}");
    assert!(
        sum(&out.stats, "bytes_elided_run") < 2 * DOWNLOAD_BYTES,
        "{label}: no download may be elided: {:?}",
        out.stats
    );
}

// ------------------------------------------------------------------- (issue 33) c_modern

/// c_modern's upload and readback pairs are both accepted (staging into device) and applied,
/// and both staging allocations are left unmade at the driver, with the output of the run
/// without echo: with the Vulkan 1.4 paths where the device has them (scripts/modern-check.sh
/// runs this program on Debian 13's 1.4 lavapipe and checks that it took them), with the 1.0
/// calls where it does not (Debian 12's lavapipe 22.3.6).
fn modern_paths_apply(prog: Prog) {
    let f = flow(prog);
    let label = f.case.label(Some("profile"));
    assert!(
        f.baseline.starts_with("calls: "),
        "{label}: the first line says which calls ran:\n{}",
        f.baseline
    );
    let m = members(&f.plan);
    assert_eq!(
        m.len(),
        2,
        "{label}: want the upload and the readback: {:#}",
        f.plan
    );
    for (direction, member) in &m {
        assert_eq!(direction, "staging_into_device", "{label}: {member:#}");
        assert_eq!(member["skip_allocation"], true, "{label}: {member:#}");
    }
    for (mode, out) in [("enforce", &f.enforce), ("auto (run 2)", &f.auto[1])] {
        let label = f.case.label(Some(mode));
        all_applied(&label, &out.stats);
        assert!(
            sum(&out.stats, "bytes_elided") > 0,
            "{label}: {:?}",
            out.stats
        );
        assert_eq!(
            (
                sum(&out.stats, "allocations_skipped"),
                sum(&out.stats, "allocations_made_late")
            ),
            (2, 0),
            "{label}: both staging allocations stay unmade: {:?}",
            out.stats
        );
    }
}

#[test]
fn modern_paths_core_set_apply() {
    modern_paths_apply(MODERN_CORE);
}

#[test]
fn modern_paths_khr_push_apply() {
    modern_paths_apply(MODERN_KHR);
}
