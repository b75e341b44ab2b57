//! `vkecho selftest [--quick] [--out DIR] [--workloads a,b]`: the field kit (issue 46). It needs
//! only `vkecho` and the layer library — no samples, no shader compiler, no source tree — and
//! answers one question for the machine it runs on: can echo be enabled here?
//!
//! For every device echo would act on, each built-in workload ([`workloads`], SPIR-V embedded)
//! runs as a child process of vkecho ([`worker`]): without echo (twice: the reference, and a
//! check that the workload is deterministic here), profiled, analyzed (in this process, by the
//! analyzer library), enforced, and in auto mode twice with a private cache. Every output is
//! compared with the reference byte for byte; the hazards' pairs must be refused for the
//! condition that must refuse them; the clean workloads are timed in interleaved rounds
//! (staging, echo, the zero-copy twin) and echo's statistics say how much memory it did not
//! allocate. Where the Khronos validation layer is installed, the workloads run once more
//! without echo, profiled and enforced with synchronization validation, and echo must not add a
//! message. Devices echo stays out of get one check: with echo enabled, the output is the same
//! and nothing is recorded.
//!
//! It prints the verdict first ([`verdict`]), then the evidence, and writes the report bundle
//! `selftest-<device>-<date>.tar.gz` ([`bundle`]) into `--out` (default: here). Exit status: 0
//! safe or inactive, 1 unsafe, 2 could not run.
//!
//! The user's own echo settings (`VK_ECHO_*`, other than `VK_ECHO_TOPOLOGY`, `VK_ECHO_LIBRARY`
//! and the test layer's `VK_ECHO_TEST_*`) and an echo named in `VK_INSTANCE_LAYERS` are left out
//! of the children; the user's cache is never touched.

mod bundle;
mod exec;
mod verdict;
mod vk;
pub mod worker;
mod workloads;

use echo_analyzer::analysis::{explain, Decision};
use echo_analyzer::plan::Role;
use echo_analyzer::report::human_bytes;
use echo_analyzer::stats::Stats;
use echo_analyzer::trace::read_trace;
use exec::{compare, Echo, Place, Run};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;
use verdict::{
    DeviceReport, Finding, Level, PairReport, Report, RunReport, Timing, ValidationReport,
    WorkloadReport,
};
use workloads::{Expect, Workload};

/// `vkecho selftest [--quick] [--out DIR] [--workloads a,b]`.
#[derive(clap::Args)]
#[command(
    long_about = "Checks echo on this machine with built-in workloads (clean uploads and \
readbacks, dedicated and sub-allocated; a graphics frame; two hazards echo must refuse): each runs \
without echo, profiled, analyzed, enforced and in auto mode twice on every device echo acts on, \
outputs compared byte for byte, timed against the zero-copy way of writing it, and under the \
validation layer when it is installed. Prints a verdict first and writes a report bundle \
(selftest-<device>-<date>.tar.gz) to send. Needs only vkecho and the layer library. Exit status: \
0 safe (or echo stays out here), 1 unsafe, 2 could not run."
)]
pub struct Args {
    /// A first look: small buffers (scaled to the device's memory), fewer iterations and rounds
    #[arg(long)]
    pub quick: bool,
    /// Where the report bundle goes (default: the current directory)
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Only these workloads (comma-separated; default: all — upload, suballoc, graphics, race,
    /// early-read)
    #[arg(long, value_name = "a,b,...", value_delimiter = ',')]
    pub workloads: Option<Vec<String>>,
}

/// Sizes and counts of one device's runs.
struct Params {
    size: u64,
    iters: u32,
    rounds: usize,
}

fn params(quick: bool, heap: u64) -> Params {
    const K64: u64 = 64 << 10;
    let (lo, hi, div) = if quick {
        (256 << 10, 2 << 20, 2048)
    } else {
        (1 << 20, 16 << 20, 256)
    };
    let size = (heap / div).clamp(lo, hi) / K64 * K64;
    if quick {
        Params {
            size,
            iters: 5,
            rounds: 3,
        }
    } else {
        Params {
            size,
            iters: 12,
            rounds: 5,
        }
    }
}

/// The longest a run without echo may take before it counts as hung.
const BASE_LIMIT: Duration = Duration::from_secs(600);

pub fn main(a: &Args) -> i32 {
    let unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("vkecho selftest: cannot locate vkecho itself: {e}");
            return 2;
        }
    };
    let chosen: Vec<&'static Workload> = match &a.workloads {
        None => workloads::ALL.iter().collect(),
        Some(names) => {
            let mut v = Vec::new();
            for n in names {
                match workloads::find(n.trim()) {
                    Some(w) => v.push(w),
                    None => {
                        eprintln!(
                            "vkecho selftest: unknown workload '{n}' (known: {})",
                            workloads::ALL
                                .iter()
                                .map(|w| w.name)
                                .collect::<Vec<_>>()
                                .join(", ")
                        );
                        return 2;
                    }
                }
            }
            v
        }
    };
    let out_dir = a.out.clone().unwrap_or_else(|| PathBuf::from("."));
    if let Err(e) = std::fs::create_dir_all(&out_dir) {
        eprintln!("vkecho selftest: cannot create {}: {e}", out_dir.display());
        return 2;
    }
    // `vkecho doctor --json` of the user's environment, before this process narrows it.
    let doctor = doctor_json(&exe);
    narrow_environment();
    let work = std::env::temp_dir().join(format!(
        "vkecho-selftest-{}-{}",
        std::process::id(),
        unix
    ));
    if let Err(e) = make_private_dir(&work) {
        eprintln!("vkecho selftest: {e}");
        return 2;
    }
    let mut report = Report {
        vkecho_version: env!("CARGO_PKG_VERSION").into(),
        quick: a.quick,
        ..Default::default()
    };
    let devices = test_all(&exe, &work, a.quick, &chosen, &doctor, &mut report);
    report.verdict = report.verdict();
    report.exit_status = report.exit_status();

    // The bundle: the report, doctor, versions, and every file the runs left.
    let device_name = report
        .devices
        .iter()
        .find(|d| d.active)
        .or(report.devices.first())
        .map(|d| d.name.clone())
        .unwrap_or_else(|| "no-device".into());
    let name = bundle::file_name(&device_name, unix);
    let bundle_path = out_dir.join(&name);
    let text = report.render(Some(&bundle_path.display().to_string()));
    let home = std::env::var("HOME").ok();
    let redact = bundle::Redact::new(&work, home.as_deref());
    let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default() + "\n";
    let _ = std::fs::write(work.join("verdict.txt"), &text);
    let _ = std::fs::write(
        work.join("selftest.json"),
        pretty(&serde_json::to_value(&report).unwrap_or_default()),
    );
    let _ = std::fs::write(work.join("doctor.json"), pretty(&doctor));
    let _ = std::fs::write(
        work.join("versions.json"),
        pretty(&crate::report::versions(&doctor)),
    );
    let _ = std::fs::write(work.join("devices.json"), pretty(&devices));
    let _ = std::fs::write(work.join("README.txt"), readme(&report, &name));
    let root = name.trim_end_matches(".tar.gz").to_string();
    let files: Vec<(String, Vec<u8>)> = bundle::files(&work)
        .into_iter()
        .filter_map(|(rel, bytes)| Some((format!("{root}/{rel}"), redact.bytes(&bytes)?)))
        .collect();
    let written = crate::report::archive(&files, unix, true)
        .and_then(|b| crate::report::write_private_bytes(&bundle_path, &b));
    let bundle_note = match &written {
        Ok(()) => None,
        Err(e) => Some(format!("the report bundle could not be written: {e}")),
    };
    print!(
        "{}",
        if bundle_note.is_some() {
            report.render(None)
        } else {
            text
        }
    );
    if let Some(n) = bundle_note {
        eprintln!("vkecho selftest: {n}");
    }
    let _ = std::fs::remove_dir_all(&work);
    report.exit_status
}

/// Every device: tested when echo acts on it, checked for staying out otherwise. Returns what
/// the device listing said.
fn test_all(
    exe: &Path,
    work: &Path,
    quick: bool,
    chosen: &[&'static Workload],
    doctor: &Value,
    report: &mut Report,
) -> Value {
    let stop = |report: &mut Report, text: String| {
        report.findings.push(Finding::new(Level::CouldNotRun, text));
    };
    if let Err(e) = crate::launch::layer_library() {
        stop(report, e);
        return Value::Null;
    }
    let place = match Place::new(work.join("devices")) {
        Ok(p) => p,
        Err(e) => {
            stop(report, e);
            return Value::Null;
        }
    };
    let argv = worker_argv(exe, "devices", &[]);
    let listing = place.run(&argv, "devices", &Echo::Off, false, Duration::from_secs(120));
    let Some(devices) = listing.result.clone().filter(|_| listing.ok()) else {
        stop(
            report,
            format!(
                "the Vulkan devices could not be listed ({})",
                listing.failed.unwrap_or_default()
            ),
        );
        return Value::Null;
    };
    let list = devices["devices"].as_array().cloned().unwrap_or_default();
    if list.is_empty() {
        stop(
            report,
            "the loader lists no Vulkan device (`vkecho doctor` says why)".into(),
        );
        return devices;
    }
    let topology = doctor["settings"]["values"]["topology"]
        .as_str()
        .unwrap_or("strict")
        .to_string();
    let validation = devices["validation_layer"] == true;
    let active_of = |d: &Value| match d["class"].as_str() {
        Some("uma-strict") => true,
        Some("uma-integrated") => topology == "integrated",
        _ => false,
    };
    let runs_per_workload = |p: &Params| 6 + 3 * p.rounds as u64 + if validation { 3 } else { 0 };
    let total: u64 = list
        .iter()
        .map(|d| {
            if active_of(d) {
                chosen.len() as u64 * runs_per_workload(&params(quick, heap(d)))
            } else {
                2
            }
        })
        .sum();
    let pb = crate::progress::bar(total, "vkecho selftest", " runs");
    for (i, d) in list.iter().enumerate() {
        let p = params(quick, heap(d));
        let mut dev = DeviceReport {
            index: i,
            name: d["name"].as_str().unwrap_or("?").into(),
            class: d["class"].as_str().unwrap_or("?").into(),
            active: active_of(d),
            driver: driver(d),
            api_version: d["api_version"].as_str().unwrap_or("?").into(),
            buffer_bytes: p.size,
            iterations: p.iters,
            rounds: p.rounds,
            validation_layer: validation,
            ..Default::default()
        };
        let dir = work.join(format!("device-{i}"));
        if dev.active {
            crate::progress::say(
                &pb,
                &format!(
                    "vkecho selftest: device {i}: {} ({}): {} workloads, buffers of {}",
                    dev.name,
                    dev.class,
                    chosen.len(),
                    human_bytes(p.size)
                ),
            );
            for w in chosen {
                if w.graphics && d["graphics_queue"] == false {
                    dev.findings.push(Finding::new(
                        Level::Note,
                        format!("{}: not run (no queue family that draws)", w.name),
                    ));
                    continue;
                }
                let r = test_workload(exe, &dir.join(w.name), i, w, &p, validation, &pb);
                dev.workloads.push(r);
            }
        } else {
            crate::progress::say(
                &pb,
                &format!(
                    "vkecho selftest: device {i}: {} ({}): echo stays out; checking that it does",
                    dev.name, dev.class
                ),
            );
            dev.findings = stays_out(exe, &dir.join("stays-out"), i, &p, &pb);
        }
        report.devices.push(dev);
    }
    pb.finish_and_clear();
    devices
}

fn heap(d: &Value) -> u64 {
    d["heaps"]
        .as_array()
        .map(|hs| {
            hs.iter()
                .filter(|h| {
                    h["flags"]
                        .as_array()
                        .is_some_and(|f| f.iter().any(|x| x == "DEVICE_LOCAL"))
                })
                .filter_map(|h| h["size"].as_u64())
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0)
}

fn driver(d: &Value) -> String {
    let name = d["driver_name"].as_str().unwrap_or("");
    let info = d["driver_info"].as_str().unwrap_or("");
    let version = d["driver_version"].as_str().unwrap_or("?");
    match (name.is_empty(), info.is_empty()) {
        (false, false) => format!("{name} {info}"),
        (false, true) => format!("{name} {version}"),
        _ => format!("driver {version}"),
    }
}

fn worker_argv(exe: &Path, workload: &str, extra: &[String]) -> Vec<String> {
    let mut v = vec![
        exe.display().to_string(),
        "selftest-worker".into(),
        workload.into(),
    ];
    v.extend_from_slice(extra);
    v
}

fn report_of(r: &Run) -> RunReport {
    RunReport {
        label: r.label.clone(),
        mode: r.mode.into(),
        ok: r.ok(),
        failed: r.failed.clone(),
        seconds: (r.seconds * 1000.0).round() / 1000.0,
        iter_ms: r.iter_ms(),
        log: r.log.clone(),
        ..Default::default()
    }
}

/// One workload on one device: every mode, the analysis, the checks, the timings.
fn test_workload(
    exe: &Path,
    dir: &Path,
    device: usize,
    w: &Workload,
    p: &Params,
    validation: bool,
    pb: &crate::progress::ProgressBar,
) -> WorkloadReport {
    let mut rep = WorkloadReport {
        name: w.name.into(),
        about: w.about.into(),
        expect: match w.expect {
            Expect::Clean => "clean: apply".into(),
            Expect::Refused { role, condition } => format!("refuse {role}: {condition}"),
        },
        ..Default::default()
    };
    let place = match Place::new(dir.to_path_buf()) {
        Ok(p) => p,
        Err(e) => {
            rep.findings.push(Finding::new(Level::CouldNotRun, e));
            return rep;
        }
    };
    let args = [
        "--device".to_string(),
        device.to_string(),
        "--size".into(),
        p.size.to_string(),
        "--iters".into(),
        p.iters.to_string(),
    ];
    let argv = worker_argv(exe, w.name, &args);
    let mut twin_args = args.to_vec();
    twin_args.push("--zero-copy".into());
    let twin = worker_argv(exe, w.name, &twin_args);
    let name = w.name;
    let step = |what: &str| {
        pb.set_message(format!("device {device}: {name}: {what}"));
    };

    // The reference, and whether the workload is deterministic here.
    step("without echo");
    let base = place.run(&argv, "baseline", &Echo::Off, false, BASE_LIMIT);
    pb.inc(1);
    rep.runs.push(report_of(&base));
    if let Some(f) = &base.failed {
        rep.findings.push(Finding::new(
            Level::CouldNotRun,
            format!("{name} fails without echo ({f})"),
        ));
        return rep;
    }
    let limit = Duration::from_secs_f64((base.seconds * 30.0).clamp(60.0, 600.0));
    let per_iter = base.per_iteration();
    // Runs without echo must match the reference, or the workload says nothing here.
    let check_plain = |rep: &mut WorkloadReport, r: &Run| -> bool {
        let mut rr = report_of(r);
        let ok = match (&r.failed, compare(&base.output, &r.output)) {
            (Some(f), _) => {
                rep.findings.push(Finding::new(
                    Level::CouldNotRun,
                    format!("{name} fails without echo in {} ({f})", r.label),
                ));
                false
            }
            (None, Ok(None)) => true,
            (None, Ok(Some(d))) => {
                rep.findings.push(Finding::new(
                    Level::CouldNotRun,
                    format!(
                        "{name} is not deterministic on this device without echo ({}: {})",
                        r.label,
                        d.describe(per_iter)
                    ),
                ));
                rr.difference = Some(d.describe(per_iter));
                false
            }
            (None, Err(e)) => {
                rep.findings.push(Finding::new(Level::CouldNotRun, e));
                false
            }
        };
        rr.identical = Some(ok);
        rep.runs.push(rr);
        ok
    };
    // Runs with echo must match it too, or echo is not safe here.
    let check_echo = |rep: &mut WorkloadReport, r: &Run| -> bool {
        let mut rr = report_of(r);
        let ok = match (&r.failed, compare(&base.output, &r.output)) {
            (Some(f), _) => {
                let how = if f.contains("killed by signal") || f.contains("did not finish") {
                    "crashed"
                } else {
                    "failed"
                };
                rep.findings.push(Finding::new(
                    Level::Unsafe,
                    format!("{name} {how} in {} ({}): {f}", r.label, r.mode),
                ));
                rr.identical = Some(false);
                false
            }
            (None, Ok(None)) => {
                rr.identical = Some(true);
                true
            }
            (None, Ok(Some(d))) => {
                rep.findings.push(Finding::new(
                    Level::Unsafe,
                    format!(
                        "{name} differs in {} ({}): {}",
                        r.label,
                        r.mode,
                        d.describe(per_iter)
                    ),
                ));
                rr.difference = Some(d.describe(per_iter));
                rr.identical = Some(false);
                false
            }
            (None, Err(e)) => {
                rep.findings.push(Finding::new(Level::CouldNotRun, e));
                false
            }
        };
        rep.runs.push(rr);
        ok
    };
    step("without echo, again");
    let again = place.run(&argv, "baseline2", &Echo::Off, false, BASE_LIMIT);
    pb.inc(1);
    if !check_plain(&mut rep, &again) {
        return rep;
    }

    // Profile, then analyze here.
    step("profile");
    let trace = dir.join("profile.trace.jsonl");
    let prof = place.run(&argv, "profile", &Echo::Profile(trace.clone()), false, limit);
    pb.inc(1);
    check_echo(&mut rep, &prof);
    let plan = dir.join("plan.json");
    let analysis = if prof.ok() || trace.is_file() {
        match analyze(&trace, &plan, dir) {
            Ok(a) => Some(a),
            Err(e) => {
                let level = if prof.ok() {
                    Level::CouldNotRun
                } else {
                    Level::Note
                };
                rep.findings.push(Finding::new(
                    level,
                    format!("{name}: no analysis of the profile run ({e}); did echo load?"),
                ));
                None
            }
        }
    } else {
        None
    };
    if let Some(a) = &analysis {
        judge_pairs(&mut rep, w, a);
    }

    // Enforce that plan.
    if analysis.is_some() {
        step("enforce");
        let stats = dir.join("enforce.stats.jsonl");
        let enf = place.run(
            &argv,
            "enforce",
            &Echo::Enforce(plan.clone(), stats.clone()),
            false,
            limit,
        );
        pb.inc(1);
        check_echo(&mut rep, &enf);
        if let Some(s) = stats_of(&stats) {
            if let Some(last) = rep.runs.last_mut() {
                last.stats = Some(s.summary());
            }
            rep.groups_planned = s.groups_planned;
            rep.groups_applied = s.groups_applied;
            rep.memory_not_allocated = s.memory_not_allocated;
            if w.clean() && s.groups_applied < s.groups_planned {
                let why = s.group_lines().join("; ");
                rep.findings.push(Finding::new(
                    Level::Note,
                    format!(
                        "{name}: enforce applied {}/{} groups ({why})",
                        s.groups_applied, s.groups_planned
                    ),
                ));
            }
            if !s.plan_status.is_empty() && s.plan_status != "applied" {
                rep.findings.push(Finding::new(
                    Level::Note,
                    format!("{name}: enforce: plan {}", s.plan_status),
                ));
            }
        }
        // The page of the profile run, with the plan and what enforce did.
        if let Ok(html) = crate::show::render(
            &trace,
            Some(&plan),
            Some(stats.as_path()).filter(|p| p.is_file()),
            Vec::new(),
            false,
            true,
        ) {
            if crate::write_private(&dir.join("show.html"), &html).is_ok() {
                rep.page = Some(format!("device-{device}/{name}/show.html"));
            }
        }
    } else {
        pb.inc(1);
    }

    // Auto mode twice, with a cache of its own.
    let cache = dir.join("cache");
    for n in 1..=2 {
        step(&format!("auto mode, run {n}"));
        let stats = dir.join(format!("auto{n}.stats.jsonl"));
        let r = place.run(
            &argv,
            &format!("auto{n}"),
            &Echo::Auto(cache.clone(), stats.clone()),
            false,
            limit,
        );
        pb.inc(1);
        check_echo(&mut rep, &r);
        let s = stats_of(&stats);
        if let (Some(s), Some(last)) = (&s, rep.runs.last_mut()) {
            last.stats = Some(s.summary());
        }
        if r.ok() {
            let want = if n == 1 { "profile" } else { "enforce" };
            match &s {
                Some(s) if s.mode == want => {
                    if n == 2 && w.clean() && s.groups_applied < s.groups_planned {
                        rep.findings.push(Finding::new(
                            Level::Note,
                            format!(
                                "{name}: auto mode's second run applied {}/{} groups",
                                s.groups_applied, s.groups_planned
                            ),
                        ));
                    }
                }
                Some(s) => rep.findings.push(Finding::new(
                    Level::Note,
                    format!(
                        "{name}: auto mode's run {n} was in mode {} ({}), not {want}",
                        s.mode, s.plan_status
                    ),
                )),
                None => rep.findings.push(Finding::new(
                    Level::Note,
                    format!("{name}: auto mode's run {n} wrote no statistics"),
                )),
            }
        }
    }

    // Validation, where it is installed: without echo, profiled, enforced.
    if validation {
        let mut v = ValidationReport::default();
        step("validation, without echo");
        let none = place.run(&argv, "validation-none", &Echo::Off, true, limit);
        pb.inc(1);
        let reference = ids(&none);
        rep.runs.push(report_of(&none));
        match &none.failed {
            Some(f) => rep.findings.push(Finding::new(
                Level::Note,
                format!("{name}: the run under the validation layer without echo failed ({f}); validation not compared"),
            )),
            None => {
                v.runs += 1;
                v.without_echo = reference.clone();
                let echo_runs = [
                    ("validation-profile", Echo::Profile(dir.join("validation-profile.trace.jsonl"))),
                    (
                        "validation-enforce",
                        Echo::Enforce(plan.clone(), dir.join("validation-enforce.stats.jsonl")),
                    ),
                ];
                for (label, echo) in echo_runs {
                    if matches!(echo, Echo::Enforce(..)) && analysis.is_none() {
                        pb.inc(1);
                        continue;
                    }
                    step(label);
                    let r = place.run(&argv, label, &echo, true, limit);
                    pb.inc(1);
                    check_echo(&mut rep, &r);
                    if !r.ok() {
                        continue;
                    }
                    v.runs += 1;
                    let got = ids(&r);
                    let new = multiset_minus(&got, &reference);
                    let missing = multiset_minus(&reference, &got);
                    if !new.is_empty() {
                        rep.findings.push(Finding::new(
                            Level::Unsafe,
                            format!(
                                "{name}: the validation layer reports {} in {label} ({}) that it does not report without echo: {}",
                                if new.len() == 1 { "a message" } else { "messages" },
                                r.mode,
                                new.join(", ")
                            ),
                        ));
                        v.new.push((label.into(), new));
                    }
                    if !missing.is_empty() {
                        v.missing.push((label.into(), missing));
                    }
                }
                if !reference.is_empty() {
                    rep.findings.push(Finding::new(
                        Level::Note,
                        format!(
                            "{name}: the validation layer reports {} without echo too (the workload's or the driver's, not echo's): {}",
                            if reference.len() == 1 { "a message" } else { "messages" },
                            reference.join(", ")
                        ),
                    ));
                }
            }
        }
        rep.validation = Some(v);
    }

    // Timings: interleaved rounds of staging, echo and the zero-copy twin.
    if w.clean() && analysis.is_some() && rep.findings.iter().all(|f| f.level == Level::Note) {
        let mut t = Timing {
            rounds: p.rounds,
            ..Default::default()
        };
        let mut twin_ok = true;
        for r in 1..=p.rounds {
            step(&format!("timed round {r}/{}", p.rounds));
            let b = place.run(&argv, &format!("round{r}-staging"), &Echo::Off, false, limit);
            pb.inc(1);
            if !check_plain(&mut rep, &b) {
                break;
            }
            let stats = dir.join(format!("round{r}-echo.stats.jsonl"));
            let e = place.run(
                &argv,
                &format!("round{r}-echo"),
                &Echo::Enforce(plan.clone(), stats),
                false,
                limit,
            );
            pb.inc(1);
            if !check_echo(&mut rep, &e) {
                break;
            }
            let z = if twin_ok {
                let z = place.run(&twin, &format!("round{r}-zero-copy"), &Echo::Off, false, limit);
                if let Some(f) = &z.failed {
                    twin_ok = false;
                    rep.findings.push(Finding::new(
                        Level::Note,
                        format!("{name}: no zero-copy twin on this device ({f})"),
                    ));
                }
                let mut zr = report_of(&z);
                zr.mode = "zero-copy twin".into();
                rep.runs.push(zr);
                Some(z)
            } else {
                None
            };
            pb.inc(1);
            if let (Some(bt), Some(et)) = (b.iter_ms(), e.iter_ms()) {
                t.staging_ms.push(bt);
                t.echo_ms.push(et);
                if let Some(zt) = z.as_ref().filter(|z| z.ok()).and_then(Run::iter_ms) {
                    t.zero_copy_ms.push(zt);
                }
            }
        }
        if t.zero_copy_ms.len() != t.staging_ms.len() {
            t.zero_copy_ms.clear();
        }
        if !t.staging_ms.is_empty() {
            rep.timing = Some(t);
        }
    }
    // The outputs are compared; only the bundle's files stay.
    remove_outputs(dir);
    rep
}

/// A device echo does not act on: with echo enabled (auto mode) the output is the same and
/// nothing is recorded.
fn stays_out(
    exe: &Path,
    dir: &Path,
    device: usize,
    p: &Params,
    pb: &crate::progress::ProgressBar,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let place = match Place::new(dir.to_path_buf()) {
        Ok(p) => p,
        Err(e) => return vec![Finding::new(Level::CouldNotRun, e)],
    };
    let args = [
        "--device".to_string(),
        device.to_string(),
        "--size".into(),
        (256u64 << 10).min(p.size).to_string(),
        "--iters".into(),
        "2".into(),
    ];
    let argv = worker_argv(exe, "upload", &args);
    pb.set_message(format!("device {device}: without echo"));
    let base = place.run(&argv, "baseline", &Echo::Off, false, BASE_LIMIT);
    pb.inc(1);
    if let Some(f) = &base.failed {
        pb.inc(1);
        return vec![Finding::new(
            Level::Note,
            format!("the pass-through check could not run (upload fails without echo: {f})"),
        )];
    }
    pb.set_message(format!("device {device}: with echo enabled"));
    let cache = dir.join("cache");
    let stats = dir.join("auto.stats.jsonl");
    let limit = Duration::from_secs_f64((base.seconds * 30.0).clamp(60.0, 600.0));
    let r = place.run(&argv, "auto", &Echo::Auto(cache.clone(), stats.clone()), false, limit);
    pb.inc(1);
    match (&r.failed, compare(&base.output, &r.output)) {
        (Some(f), _) => out.push(Finding::new(
            Level::Unsafe,
            format!("with echo enabled, a program fails on this device echo should stay out of ({f})"),
        )),
        (None, Ok(Some(d))) => out.push(Finding::new(
            Level::Unsafe,
            format!(
                "with echo enabled, the output changed on a device echo should stay out of: {}",
                d.describe(base.per_iteration())
            ),
        )),
        (None, Err(e)) => out.push(Finding::new(Level::CouldNotRun, e)),
        (None, Ok(None)) => {}
    }
    let recorded = echo_analyzer::cache::list(&cache);
    if !recorded.is_empty() {
        out.push(Finding::new(
            Level::Unsafe,
            format!(
                "echo recorded {} on a device it should stay out of",
                echo_analyzer::report::plural(recorded.len() as u64, "cache entry", "cache entries")
            ),
        ));
    }
    if let Some(s) = stats_of(&stats) {
        if s.active {
            out.push(Finding::new(
                Level::Unsafe,
                format!("echo says it is active on a {} device", s.class),
            ));
        }
    }
    if out.is_empty() {
        out.push(Finding::new(
            Level::Note,
            "with echo enabled the output is identical and nothing was recorded: it passes every call through",
        ));
    }
    remove_outputs(dir);
    out
}

/// The analysis of a profile trace: the plan and `vkecho analyze`'s table written beside it.
fn analyze(
    trace: &Path,
    plan: &Path,
    dir: &Path,
) -> Result<echo_analyzer::analysis::Analysis, String> {
    let f = std::fs::File::open(trace).map_err(|e| format!("no trace: {e}"))?;
    let t = read_trace(std::io::BufReader::new(f)).map_err(|e| format!("trace: {e}"))?;
    let th = t.thresholds(None, None);
    let sym = echo_symbols::Symbolizer::new(&t.header.context.exe_path);
    sym.prefetch(&t);
    let a = explain(&t, th, &|s| sym.site(s));
    crate::write_private(plan, &a.plan.to_json())?;
    crate::write_private(
        &dir.join("analyze.txt"),
        &echo_analyzer::report::table(&a, "profile.trace.jsonl"),
    )?;
    Ok(a)
}

fn role_name(r: Role) -> &'static str {
    match r {
        Role::Upload => "upload",
        Role::Readback => "readback",
        Role::Both => "both",
    }
}

/// The pairs of the analysis against what the workload must show.
fn judge_pairs(rep: &mut WorkloadReport, w: &Workload, a: &echo_analyzer::analysis::Analysis) {
    let name = w.name;
    for c in &a.candidates {
        let buf = |b: &echo_analyzer::analysis::BufferDesc| {
            format!("#{} ({})", b.number, human_bytes(b.size))
        };
        let (decision, condition, why) = match &c.decision {
            Decision::Accepted { .. } => ("accepted", None, String::new()),
            Decision::Rejected {
                condition, plain, ..
            } => ("refused", Some(condition.as_str().to_string()), plain.clone()),
        };
        rep.pairs.push(PairReport {
            staging: buf(&c.staging),
            device: buf(&c.device),
            role: role_name(c.role).into(),
            copies: c.copies,
            decision: decision.into(),
            condition,
            why,
        });
    }
    match w.expect {
        Expect::Clean => {
            if a.candidates.is_empty() {
                rep.findings.push(Finding::new(
                    Level::Note,
                    format!("{name}: the profile found no candidate pair: echo would change nothing in it here"),
                ));
            }
            for p in rep.pairs.clone().iter().filter(|p| p.decision == "refused") {
                rep.findings.push(Finding::new(
                    Level::Note,
                    format!(
                        "{name}: echo refused a pair it takes elsewhere ({} ↔ {}, {}): {}: {}",
                        p.staging,
                        p.device,
                        p.role,
                        p.condition.as_deref().unwrap_or("?"),
                        p.why
                    ),
                ));
            }
        }
        Expect::Refused { role, condition } => {
            let hazards: Vec<PairReport> =
                rep.pairs.iter().filter(|p| p.role == role).cloned().collect();
            rep.refusals_expected = hazards.len().max(1);
            if hazards.is_empty() {
                rep.findings.push(Finding::new(
                    Level::CouldNotRun,
                    format!("{name}: the profile shows no {role} pair, so the refusal could not be checked"),
                ));
            }
            for p in hazards {
                match (p.decision.as_str(), p.condition.as_deref()) {
                    ("refused", Some(c)) if c == condition => rep.refusals_as_they_must += 1,
                    ("refused", Some(c)) => rep.findings.push(Finding::new(
                        Level::Unsafe,
                        format!(
                            "{name}: its {role} pair ({} ↔ {}) was refused for {c}, not {condition}: the hazard itself went unseen ({})",
                            p.staging, p.device, p.why
                        ),
                    )),
                    _ => rep.findings.push(Finding::new(
                        Level::Unsafe,
                        format!(
                            "{name}: echo accepted its {role} pair ({} ↔ {}), which must be refused for {condition}: the profile did not see the host's access while the GPU worked",
                            p.staging, p.device
                        ),
                    )),
                }
            }
        }
    }
}

fn stats_of(path: &Path) -> Option<Stats> {
    crate::run::read_stats(path)
        .ok()
        .filter(|v| !v.is_empty())
        .map(|v| Stats::total(&v))
        .map(|mut t| {
            // `total` keeps the counts; mode, class and status come from the first device.
            if let Ok(all) = crate::run::read_stats(path) {
                t.mode = all[0].mode.clone();
                t.class = all[0].class.clone();
                t.active = all.iter().any(|s| s.active);
                t.plan_status = all[0].plan_status.clone();
                t.device = all[0].device.clone();
            }
            t
        })
}

/// The validation message ids of a run, sorted.
fn ids(r: &Run) -> Vec<String> {
    let mut v: Vec<String> = r
        .result
        .as_ref()
        .and_then(|x| x["messages"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|m| m["id"].as_str().map(str::to_string))
        .collect();
    v.sort();
    v
}

/// `a` without `b`, as multisets (both sorted).
fn multiset_minus(a: &[String], b: &[String]) -> Vec<String> {
    let mut rest = b.to_vec();
    let mut out = Vec::new();
    for x in a {
        match rest.iter().position(|y| y == x) {
            Some(i) => {
                rest.remove(i);
            }
            None => out.push(x.clone()),
        }
    }
    out
}

fn remove_outputs(dir: &Path) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.path().extension().is_some_and(|x| x == "out") {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

/// `vkecho doctor --json` of this environment, from a child (doctor adjusts its own process's
/// environment).
fn doctor_json(exe: &Path) -> Value {
    let out = std::process::Command::new(exe)
        .args(["doctor", "--json"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output();
    match out {
        Ok(o) => serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| json!({"error": format!("vkecho doctor --json printed no JSON: {e}")})),
        Err(e) => json!({"error": format!("cannot run vkecho doctor: {e}")}),
    }
}

/// Leaves the user's echo settings and an echo named in `VK_INSTANCE_LAYERS` out of this process
/// (and so of its children): the selftest sets what each run needs.
fn narrow_environment() {
    let keep = |k: &str| {
        k.starts_with("VK_ECHO_TEST_") || k == "VK_ECHO_LIBRARY" || k == "VK_ECHO_TOPOLOGY"
    };
    for (k, _) in std::env::vars_os() {
        let Some(k) = k.to_str() else { continue };
        if k.starts_with("VK_ECHO_") && !keep(k) {
            std::env::remove_var(k);
        }
    }
    if let Ok(layers) = std::env::var("VK_INSTANCE_LAYERS") {
        let rest: Vec<&str> = layers
            .split(':')
            .filter(|l| !l.is_empty() && *l != crate::paths::LAYER_NAME)
            .collect();
        if rest.is_empty() {
            std::env::remove_var("VK_INSTANCE_LAYERS");
        } else {
            std::env::set_var("VK_INSTANCE_LAYERS", rest.join(":"));
        }
    }
}

fn make_private_dir(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))
}

fn readme(r: &Report, name: &str) -> String {
    format!(
        "VK_LAYER_echo selftest bundle ({name}), made by vkecho {}{}.\n\
         \n\
         {}\n\
         \n\
         verdict.txt             what `vkecho selftest` printed: the verdict first\n\
         selftest.json           every run, pair, check, timing and finding, per device and workload\n\
         doctor.json             `vkecho doctor --json` on this machine\n\
         versions.json           echo, Vulkan loader, drivers, kernel, glibc\n\
         devices.json            the devices as the selftest's runs saw them\n\
         device-N/WORKLOAD/      one built-in workload on device N:\n\
           profile.trace.jsonl     the profile run's trace\n\
           plan.json, analyze.txt  the plan made from it, and `vkecho analyze`'s table\n\
           show.html               `vkecho show`'s page of that run\n\
           *.stats.jsonl           the layer's statistics of each enforce and auto run\n\
           cache/                  auto mode's cache of this workload (plan, trace, run records)\n\
           logs/, results/         each run's stderr and its result (times, validation messages)\n\
         \n\
         Everything here comes from the selftest's own built-in workloads: nothing of your\n\
         programs, no environment dump; home-directory paths read ~ and the selftest's scratch\n\
         directory <selftest>.\n",
        env!("CARGO_PKG_VERSION"),
        if r.quick { " (--quick)" } else { "" },
        r.verdict
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SPIR-V vkecho embeds is what scripts/gen-selftest-spirv.sh makes of the GLSL beside
    /// it (glslangValidator: scripts/deps.sh installs glslang-tools).
    #[test]
    fn committed_spirv_is_current() {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/gen-selftest-spirv.sh");
        let out = std::process::Command::new("bash")
            .arg(&script)
            .arg("--check")
            .output()
            .expect("run scripts/gen-selftest-spirv.sh");
        assert!(
            out.status.success(),
            "{}{}\nrun scripts/gen-selftest-spirv.sh and commit the result",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    #[test]
    fn sizes_follow_the_device_memory() {
        let gib = 1u64 << 30;
        assert_eq!(params(true, 4 * gib).size, 2 << 20);
        assert_eq!(params(true, 256 << 20).size, 128 << 10 << 1);
        assert_eq!(params(false, 4 * gib).size, 16 << 20);
        assert_eq!(params(false, gib).size, 4 << 20);
        assert_eq!(params(false, 0).size, 1 << 20);
    }

    #[test]
    fn multisets() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(multiset_minus(&s(&["a", "a", "b"]), &s(&["a"])), s(&["a", "b"]));
        assert!(multiset_minus(&s(&["a"]), &s(&["a", "c"])).is_empty());
    }
}
