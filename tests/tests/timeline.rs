//! Time on the timeline (issue 47): every record of a profile trace carries the host's time
//! (non-decreasing per thread), host waits their duration; GPU timestamps around submissions and
//! copies come back as `gpu_time` records — on lavapipe mapped onto the host clock with
//! calibrated timestamps, on SwiftShader (no calibrated timestamps) on the device's clock and
//! placed by the host's observations — inside the spans the host saw, without changing the
//! program's output or what the validation layer reports; and the Perfetto export of a profiled
//! 20-iteration saxpy spans about the run's wall time, a track per queue and per host thread.

use echo_analyzer::model::Model;
use echo_analyzer::timing::{Source, Timing};
use echo_analyzer::trace::{read_trace, Event, GpuClock, Trace};
use echo_tests::samples::{run_sample, validation_env, SampleRun};
use echo_tests::world::{artifact, Layers, World};
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

const SWIFTSHADER: &str = "/usr/lib/chromium/vk_swiftshader_icd.json";

fn args<'a>(name: &'a str, iters: &'a str) -> [&'a str; 7] {
    [
        name,
        "--size-mib",
        "1",
        "--iters",
        iters,
        "--variant",
        "staging",
    ]
}

/// `echo-samples ARGS` profiled in world `w` (extra environment `env`): the run and its trace.
fn profile(w: &World, args: &[&str], env: &[(&str, &str)]) -> (SampleRun, Trace) {
    let trace = w.dir.join(format!("trace-{}.jsonl", args[0]));
    let mut cmd = w.command(&echo_tests::samples::samples_bin(), args);
    cmd.env("VK_ECHO_TRACE", &trace).env("VK_ECHO_LOG", "info");
    cmd.envs(env.iter().copied());
    let run = echo_tests::samples::run_command(cmd);
    assert!(run.status.success(), "{}:\n{}", run.args, run.stderr);
    let f = std::fs::File::open(&trace)
        .unwrap_or_else(|e| panic!("no trace {}: {e}\n{}", trace.display(), run.stderr));
    (run, read_trace(std::io::BufReader::new(f)).unwrap())
}

/// The vouch (issue 54): these tests are about the timeline, and a profile run whose saxpy (a
/// debug build, 4-byte stores) spends seconds in exact host writes has no steady iteration.
fn profile_world() -> World {
    World::new(Layers {
        echo: Some("profile"),
        ..Default::default()
    })
    .set("VK_ECHO_HOST_WRITES", "whole")
}

/// Every record has a time; one thread's records in `seq` order never go back in time; waits
/// end at their record and began after the trace did.
fn check_host_times(t: &Trace, what: &str) {
    assert!(
        t.header.clock_origin_ns.is_some(),
        "{what}: no clock origin"
    );
    let mut last: HashMap<u32, (u64, u64)> = HashMap::new();
    let mut waits = 0;
    for r in &t.records {
        let Some(now) = r.t else {
            panic!("{what}: record {} ({:?}) has no time", r.seq, r.event)
        };
        if let Some(&(seq, before)) = last.get(&r.thread) {
            assert!(
                now >= before,
                "{what}: thread {} goes back in time from event {seq} ({before} ns) to event {} ({now} ns)",
                r.thread,
                r.seq
            );
        }
        last.insert(r.thread, (r.seq, now));
        if let Some(d) = r.dur {
            assert!(d <= now, "{what}: a wait of {d} ns before the trace began");
            waits += 1;
        }
    }
    assert!(waits > 0, "{what}: no host wait carries its duration");
}

/// The GPU times of `t`: every submission with command buffers timed, each inside the span the
/// host saw (from its submission to its observed completion, `slack` ns either side for the
/// calibration's deviation), every copy inside its submission. Returns (submissions, copies).
fn check_gpu_times(t: &Trace, clock: GpuClock, slack: f64, what: &str) -> (usize, usize) {
    let m = Model::build(t);
    let tm = Timing::build(t, &m);
    assert!(tm.timed, "{what}: untimed");
    assert!(tm.notes.is_empty(), "{what}: {:?}", tm.notes);
    let mut clocks = t.records.iter().filter_map(|r| match &r.event {
        Event::GpuTime { clock, .. } => Some(*clock),
        _ => None,
    });
    assert!(
        clocks.all(|c| c == clock),
        "{what}: GPU times not all on the {clock:?} clock"
    );
    let want = if clock == GpuClock::Host {
        Source::Gpu
    } else {
        Source::GpuAligned
    };
    let mut timed = 0;
    for s in m.submissions.iter().filter(|s| !s.recordings.is_empty()) {
        let Some(g) = tm.submissions.get(&s.seq) else {
            continue;
        };
        timed += 1;
        assert_eq!(g.source, want, "{what}: submission {}", s.seq);
        let submitted = tm.at(s.seq).unwrap();
        assert!(
            g.begin + slack >= submitted,
            "{what}: submission {} begins on the GPU {} ns before the host submitted it",
            s.seq,
            submitted - g.begin
        );
        if let Some(done) = s.completed.and_then(|c| tm.at(c)) {
            assert!(
                g.end <= done + slack,
                "{what}: submission {} ends on the GPU {} ns after the host saw it complete",
                s.seq,
                g.end - done
            );
        }
        assert!(g.end >= g.begin);
    }
    let with_work = m
        .submissions
        .iter()
        .filter(|s| !s.recordings.is_empty())
        .count();
    assert!(
        with_work > 0 && timed == with_work,
        "{what}: {timed} of {with_work} submissions have GPU times"
    );
    for ((sub, copy), c) in &tm.copies {
        let g = tm.submissions[sub];
        assert!(
            c.begin + 1.0 >= g.begin && c.end <= g.end + 1.0,
            "{what}: copy {copy} ({}–{}) outside its submission {sub} ({}–{})",
            c.begin,
            c.end,
            g.begin,
            g.end
        );
    }
    (timed, tm.copies.len())
}

#[test]
fn every_record_has_a_host_time_and_gpu_times_fall_inside_what_the_host_saw() {
    for name in ["saxpy", "threads", "multiqueue"] {
        let a = args(name, "4");
        let base = run_sample(&a, &[("VK_ECHO_DISABLE", "1")]);
        let w = profile_world();
        let (run, t) = profile(&w, &a, &[]);
        assert_eq!(run.checksum(), base.checksum(), "{name}: output changed");
        assert!(
            run.stderr.contains("calibrated timestamps"),
            "{name} on lavapipe maps GPU times with calibrated timestamps:\n{}",
            run.stderr
        );
        check_host_times(&t, name);
        // lavapipe: calibrated onto the host clock (its deviation is far below 100 µs).
        let (subs, copies) = check_gpu_times(&t, GpuClock::Host, 100e3, name);
        assert!(
            subs >= 4 && copies >= 4,
            "{name}: {subs} submissions, {copies} copies timed"
        );
    }
    // The control: without GPU timestamps there are none, and the output is the same.
    let a = args("saxpy", "3");
    let w = profile_world();
    let (run, t) = profile(&w, &a, &[("VK_ECHO_TEST_NO_GPU_TIME", "1")]);
    assert_eq!(
        run.checksum(),
        run_sample(&a, &[("VK_ECHO_DISABLE", "1")]).checksum()
    );
    check_host_times(&t, "saxpy without GPU time");
    assert!(!t
        .records
        .iter()
        .any(|r| matches!(r.event, Event::GpuTime { .. })));
}

/// SwiftShader offers no calibrated timestamps: its GPU times come on the device's clock, and
/// placed by the host's observations they fit inside what the host saw.
#[test]
fn without_calibrated_timestamps_gpu_times_are_placed_by_the_host() {
    assert!(
        Path::new(SWIFTSHADER).is_file(),
        "SwiftShader ({SWIFTSHADER}) comes with Debian's chromium (scripts/deps.sh)"
    );
    let a = args("saxpy", "4");
    let base = run_sample(
        &a,
        &[("VK_ECHO_DISABLE", "1"), ("VK_DRIVER_FILES", SWIFTSHADER)],
    );
    let w = profile_world().set("VK_DRIVER_FILES", SWIFTSHADER);
    let (run, t) = profile(&w, &a, &[]);
    assert_eq!(run.checksum(), base.checksum());
    assert!(
        run.stderr.contains("placed by the host's observations"),
        "{}",
        run.stderr
    );
    check_host_times(&t, "saxpy on SwiftShader");
    let (subs, copies) = check_gpu_times(&t, GpuClock::Device, 0.0, "saxpy on SwiftShader");
    assert!(
        subs >= 4 && copies >= 4,
        "{subs} submissions, {copies} copies"
    );
}

/// Echo's own command buffers in the application's submissions and its timestamps around the
/// application's copies are valid usage: the validation layer (with synchronization validation)
/// reports under profile exactly what it reports without echo.
#[test]
fn gpu_timestamps_add_nothing_the_validation_layer_reports() {
    for name in ["saxpy", "multiqueue", "threads"] {
        let a = args(name, "3");
        let mut env = validation_env();
        env.push(("VK_ECHO_DISABLE", "1"));
        let none = run_sample(&a, &env).validation_messages();
        let mut w = World::new(Layers {
            echo: Some("profile"),
            validation: true,
            ..Default::default()
        });
        w = w.set("VK_ECHO_LOG", "info");
        let (run, t) = profile(&w, &a, &[]);
        assert!(
            t.records
                .iter()
                .any(|r| matches!(r.event, Event::GpuTime { copy: Some(_), .. })),
            "{name}: no copy was timed under validation"
        );
        assert_eq!(
            run.validation_messages(),
            none,
            "{name}: validation reports something new under profile"
        );
    }
}

#[test]
fn perfetto_of_a_profiled_20_iteration_saxpy_spans_the_run() {
    let a = args("saxpy", "20");
    let w = profile_world();
    let t0 = std::time::Instant::now();
    let (run, _) = profile(&w, &a, &[]);
    let wall_us = t0.elapsed().as_secs_f64() * 1e6;
    let report = run.json();
    let loop_us = report["iter_ms_mean"].as_f64().unwrap() * 20.0 * 1e3;
    let out = w.dir.join("saxpy.perfetto.json");
    let o = Command::new(artifact("vkecho"))
        .arg("show")
        .arg(w.dir.join("trace-saxpy.jsonl"))
        .args(["--format", "perfetto", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let ev = v["traceEvents"].as_array().unwrap();
    let spans: Vec<(f64, f64)> = ev
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap()))
        .collect();
    assert!(spans.len() > 100, "{} spans", spans.len());
    let first = spans.iter().map(|s| s.0).fold(f64::INFINITY, f64::min);
    let last = spans
        .iter()
        .map(|s| s.0 + s.1)
        .fold(f64::NEG_INFINITY, f64::max);
    let extent = last - first;
    // The spans cover the loop (20 iterations at the sample's own mean), and nothing lies
    // outside the process's lifetime: real microseconds, not event numbers.
    assert!(
        first >= 0.0 && last <= wall_us,
        "spans from {first} µs to {last} µs, the process ran {wall_us} µs"
    );
    assert!(
        extent >= 0.9 * loop_us && extent <= wall_us,
        "the export spans {extent:.0} µs; the loop took {loop_us:.0} µs, the process {wall_us:.0} µs"
    );
    // A track per queue (the GPU process) and per host thread (the host process).
    let names: Vec<(u64, String)> = ev
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| {
            (
                e["pid"].as_u64().unwrap(),
                e["args"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(
        names.iter().any(|(p, n)| *p == 1 && n.starts_with("queue")),
        "{names:?}"
    );
    assert!(
        names
            .iter()
            .any(|(p, n)| *p == 2 && n.starts_with("host thread")),
        "{names:?}"
    );
    // The host's waits are spans of real length, and submissions say how they were timed.
    assert!(ev
        .iter()
        .any(|e| e["name"] == "host wait" && e["dur"].as_f64().unwrap() > 0.0));
    assert!(ev.iter().any(|e| e["name"] == "submission"
        && e["args"]["timing"]
            .as_str()
            .is_some_and(|s| s.contains("measured on the GPU"))));
    // `vkecho analyze` says what each group's copies took of an iteration.
    let o = Command::new(artifact("vkecho"))
        .arg("analyze")
        .arg(w.dir.join("trace-saxpy.jsonl"))
        .arg("--no-symbolize")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("one steady iteration of the profiled run")
            && text.contains("copies took")
            && text.contains("of the iteration"),
        "{text}"
    );
}

/// Reading GPU times back never stalls the program. lavapipe 22.3's `vkGetQueryPoolResults`
/// waits for the whole device even without the wait bit; `c_draw_race readback` waits for a
/// fence while a later submission waits on a timeline value the host signals only after that
/// wait: a read there would deadlock (it did, before results were read only with the device
/// seen idle). Bounded: a hang fails the test. Every submission still gets its GPU times, read
/// at the next point the host has seen everything complete.
#[test]
fn reading_gpu_times_never_waits_for_work_the_host_has_not_released() {
    let dir = Path::new(env!("OUT_DIR"));
    let w = profile_world();
    let trace = w.dir.join("draw-race.jsonl");
    let mut cmd = w.command(&dir.join("c_draw_race"), &["readback", "dynamic", "3"]);
    cmd.env("VK_ECHO_TRACE", &trace)
        .env("ECHO_C_SPV", dir.join("c_double.spv"));
    let run = echo_tests::samples::run_command_within(cmd, std::time::Duration::from_secs(60));
    assert!(run.status.success(), "{}:\n{}", run.args, run.stderr);
    let t = read_trace(std::io::BufReader::new(
        std::fs::File::open(&trace).unwrap(),
    ))
    .unwrap();
    check_host_times(&t, "c_draw_race readback");
    let (subs, copies) = check_gpu_times(&t, GpuClock::Host, 100e3, "c_draw_race readback");
    assert!(
        subs >= 6 && copies >= 3,
        "{subs} submissions, {copies} copies timed"
    );
}
