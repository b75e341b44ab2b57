//! Profile mode follows buffers through descriptor update templates, texel buffer views and
//! secondary command buffers (`echo-templates`, tests/src/bin/echo-templates.rs), and the
//! analyzer and enforce mode act on what it saw.
//!
//! The device buffer `d` of `echo-templates` is used by the GPU only through a set written with
//! an update template, by a dispatch recorded in a secondary command buffer: a layer that missed
//! either would not see the dispatch read and write `d`. With `--input once` that write is what
//! makes sharing `up` and `d` unsafe (S1); the teeth test shows a plan made without it corrupts
//! the output.

use echo_analyzer::analysis::{explain, plain_site, Analysis, CandidateRow, Decision};
use echo_analyzer::model::{Model, OpKind};
use echo_analyzer::plan::{Condition, Thresholds};
use echo_analyzer::trace::{read_trace, Access, Event, Trace, UseKind};
use echo_tests::samples::{run_command, samples_bin, validation_env, SampleRun};
use echo_tests::world::scratch;
use std::path::{Path, PathBuf};
use std::process::Command;

const MIN_BYTES: &str = "4096";
const STORAGE: u32 = 0x20;
const UNIFORM_TEXEL: u32 = 0x4;

fn bin(name: &str) -> PathBuf {
    let b = samples_bin().with_file_name(name);
    assert!(
        b.is_file(),
        "{} is missing: build the workspace first",
        b.display()
    );
    b
}

fn args(input: &str) -> Vec<&str> {
    vec!["--input", input, "--iters", "3", "--kib", "64"]
}

fn with_xdg(mut c: Command) -> Command {
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        c.env("XDG_RUNTIME_DIR", std::env::temp_dir());
    }
    c.env_remove("VK_ECHO_MODE");
    c
}

/// `echo-templates ARGS` without the layer.
fn no_layer(input: &str, env: &[(&str, &str)]) -> SampleRun {
    let mut c = Command::new(bin("echo-templates"));
    c.args(args(input))
        .env("VK_ECHO_DISABLE", "1")
        .envs(env.iter().copied());
    run_command(with_xdg(c))
}

/// `vkecho SUB -- echo-templates ARGS`.
fn vkecho(sub: &[&str], input: &str, env: &[(&str, &str)]) -> SampleRun {
    let mut c = Command::new(bin("vkecho"));
    c.args(sub)
        .arg("--")
        .arg(bin("echo-templates"))
        .args(args(input))
        .envs(env.iter().copied());
    run_command(with_xdg(c))
}

fn profile(input: &str, env: &[(&str, &str)]) -> (SampleRun, PathBuf, Trace) {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let trace = scratch(&format!("{input}-{n}")).join("trace.jsonl");
    let mut env = env.to_vec();
    env.push(("VK_ECHO_MIN_BYTES", MIN_BYTES));
    let run = vkecho(
        &["profile", "--trace", &trace.display().to_string()],
        input,
        &env,
    );
    assert!(run.status.success(), "{}:\n{}", run.args, run.stderr);
    let t = read(&trace);
    (run, trace, t)
}

fn read(trace: &Path) -> Trace {
    let f =
        std::fs::File::open(trace).unwrap_or_else(|e| panic!("no trace {}: {e}", trace.display()));
    read_trace(std::io::BufReader::new(f)).expect("the trace reads back")
}

/// `vkecho analyze TRACE -o PLAN`: the plan's path.
fn analyze_to_plan(trace: &Path) -> PathBuf {
    let plan = trace.with_extension("plan.json");
    let out = Command::new(bin("vkecho"))
        .arg("analyze")
        .arg(trace)
        .arg("-o")
        .arg(&plan)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "vkecho analyze failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    plan
}

fn analysis(t: &Trace) -> Analysis {
    let min_bytes = MIN_BYTES.parse().unwrap();
    explain(
        t,
        Thresholds {
            min_bytes,
            min_copies: 2,
        },
        &plain_site,
    )
}

/// The candidate whose device buffer is the storage buffer `d` and whose staging buffer has
/// usage `staging_usage` (TRANSFER_SRC: the upload `up`, TRANSFER_DST: the readback `down`).
fn pair(a: &Analysis, staging_usage: u32) -> &CandidateRow {
    a.candidates
        .iter()
        .find(|c| c.device.usage & STORAGE != 0 && c.staging.usage == staging_usage)
        .unwrap_or_else(|| panic!("no candidate with staging usage {staging_usage:#x}: {a:#?}"))
}

fn enforce(plan: &Path, input: &str, env: &[(&str, &str)]) -> SampleRun {
    let run = vkecho(&["run", "--plan", &plan.display().to_string()], input, env);
    run.json();
    run
}

/// Handles of the buffers created with usage containing `bit`.
fn buffers_with(t: &Trace, bit: u32) -> Vec<u64> {
    t.records
        .iter()
        .filter_map(|r| match &r.event {
            Event::BufferCreate { buffer, usage, .. } if usage & bit != 0 => Some(*buffer),
            _ => None,
        })
        .collect()
}

#[test]
fn templates_texel_views_and_secondaries_are_traced_at_the_right_submission() {
    let base = no_layer("each", &[]);
    assert_eq!(base.json()["mismatches"], 0);
    let (run, _, t) = profile("each", &[]);
    assert_eq!(
        run.checksum(),
        base.checksum(),
        "profile changed the output"
    );
    let (d, k) = (buffers_with(&t, STORAGE), buffers_with(&t, UNIFORM_TEXEL));
    assert_eq!((d.len(), k.len()), (1, 1));
    let (d, k) = (d[0], k[0]);

    // The dispatch, recorded once in the secondary: d from the template-written storage binding
    // (reflection: read-write), k through its texel view (uniform texel buffer: read).
    let dispatches: Vec<(u64, u64, &Vec<_>)> = t
        .records
        .iter()
        .filter_map(|r| match &r.event {
            Event::CmdUse {
                cmd, command, uses, ..
            } if command == "vkCmdDispatch" => Some((r.seq, *cmd, uses)),
            _ => None,
        })
        .collect();
    assert_eq!(dispatches.len(), 1, "one dispatch, in the secondary");
    let (_, secondary, uses) = dispatches[0];
    let access_of = |b: u64| {
        uses.iter()
            .find(|u| u.buffer == b)
            .map(|u| (u.access, u.kind))
            .unwrap_or_else(|| panic!("dispatch does not use {b:#x}: {uses:?}"))
    };
    assert_eq!(access_of(d), (Access::ReadWrite, UseKind::Descriptor));
    assert_eq!(access_of(k), (Access::Read, UseKind::Descriptor));

    // Every submission's primary executes that secondary.
    let executes: Vec<u64> = t
        .records
        .iter()
        .filter_map(|r| match &r.event {
            Event::CmdExecute { cmd, secondaries } => {
                assert_eq!(secondaries, &vec![secondary]);
                Some(*cmd)
            }
            _ => None,
        })
        .collect();
    assert_eq!(executes.len(), 3, "one vkCmdExecuteCommands per iteration");

    // The model runs the dispatch in each of the three submissions, between the upload and the
    // readback copy.
    let m = Model::build(&t);
    assert!(m.warnings.is_empty(), "{:?}", m.warnings);
    assert_eq!(m.submissions.len(), 3);
    for s in 0..3 {
        let ops: Vec<String> = m
            .ops(s)
            .map(|o| match &o.kind {
                OpKind::Use { buffer, access, .. } => {
                    format!("{}:#{}:{access:?}", o.name(), m.buffers[*buffer].number)
                }
                OpKind::Copy { .. } => o.name(),
            })
            .collect();
        let dn = m.buffers.iter().find(|b| b.handle == d).unwrap().number;
        let want_dispatch = format!("vkCmdDispatch:#{dn}:ReadWrite");
        let at = ops
            .iter()
            .position(|o| *o == want_dispatch)
            .unwrap_or_else(|| panic!("submission {s} lacks {want_dispatch}: {ops:?}"));
        assert!(at >= 1 && ops[at - 1] == "vkCmdCopyBuffer", "{ops:?}");
        assert_eq!(ops.last().unwrap(), "vkCmdCopyBuffer", "{ops:?}");
    }
}

/// `--input each`: both staging buffers share d's memory; enforce keeps the output.
#[test]
fn input_each_iteration_is_accepted_and_enforced_with_identical_output() {
    let base = no_layer("each", &[]);
    let (_, trace, t) = profile("each", &[]);
    let a = analysis(&t);
    for usage in [0x1, 0x2] {
        let c = pair(&a, usage);
        assert!(
            matches!(c.decision, Decision::Accepted { .. }),
            "{:?}",
            c.decision
        );
    }
    let plan = analyze_to_plan(&trace);
    let run = enforce(&plan, "each", &[]);
    assert_eq!(
        run.checksum(),
        base.checksum(),
        "enforce changed the output"
    );
    assert_eq!(run.json()["mismatches"], 0);
    assert!(
        run.stderr.contains("1/1 groups applied"),
        "the group was not applied:\n{}",
        run.stderr
    );
}

/// `--input once`: S1 sees the secondary's dispatch write d (through the template-written set)
/// and refuses the upload pair; the plan keeps the output. Without the `cmd_execute` records the
/// write is invisible, the pair is accepted, and enforcing that plan corrupts the result.
#[test]
fn input_once_is_refused_for_the_dispatch_write_and_the_refusal_has_teeth() {
    let base = no_layer("once", &[]);
    assert_eq!(base.json()["mismatches"], 0);
    let (_, trace, t) = profile("once", &[]);
    let a = analysis(&t);
    match &pair(&a, 0x1).decision {
        Decision::Rejected {
            condition, message, ..
        } => {
            assert_eq!(*condition, Condition::S1, "{message}");
            assert!(message.contains("vkCmdDispatch"), "{message}");
        }
        other => panic!("upload pair accepted: {other:?}"),
    }
    assert!(matches!(pair(&a, 0x2).decision, Decision::Accepted { .. }));
    let plan = analyze_to_plan(&trace);
    let run = enforce(&plan, "once", &[]);
    assert_eq!(
        run.checksum(),
        base.checksum(),
        "enforce changed the output"
    );
    assert_eq!(run.json()["mismatches"], 0);

    // Teeth: the same trace without the secondaries' execution.
    let text = std::fs::read_to_string(&trace).unwrap();
    let blind_trace = trace.with_extension("blind.jsonl");
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| !l.contains("\"ev\":\"cmd_execute\""))
        .collect();
    assert!(kept.len() < text.lines().count());
    std::fs::write(&blind_trace, kept.join("\n") + "\n").unwrap();
    let blind = analysis(&read(&blind_trace));
    assert!(
        matches!(pair(&blind, 0x1).decision, Decision::Accepted { .. }),
        "blind to the dispatch, the upload pair should look safe: {:?}",
        pair(&blind, 0x1).decision
    );
    let bad_plan = analyze_to_plan(&blind_trace);
    let bad = enforce(&bad_plan, "once", &[]);
    assert!(
        bad.json()["mismatches"].as_u64().unwrap() > 0,
        "enforcing the blind plan should corrupt the output: {}",
        bad.stdout
    );
}

/// Khronos validation with synchronization validation: clean without the layer, under profile and
/// under enforce (the plan from the profile), with identical output.
#[test]
fn validation_clean_without_layer_under_profile_and_under_enforce() {
    let env = validation_env();
    for input in ["each", "once"] {
        let base = no_layer(input, &env);
        let msgs = base.validation_messages();
        assert!(msgs.is_empty(), "no layer, {input}:\n{}", msgs.join("\n"));
        let (run, trace, _) = profile(input, &env);
        let msgs = run.validation_messages();
        assert!(msgs.is_empty(), "profile, {input}:\n{}", msgs.join("\n"));
        assert_eq!(run.checksum(), base.checksum(), "profile, {input}");
        let plan = analyze_to_plan(&trace);
        let run = enforce(&plan, input, &env);
        let msgs = run.validation_messages();
        assert!(msgs.is_empty(), "enforce, {input}:\n{}", msgs.join("\n"));
        assert_eq!(run.checksum(), base.checksum(), "enforce, {input}");
    }
}
