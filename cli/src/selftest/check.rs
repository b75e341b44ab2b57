//! One workload on one device ([`test_workload`]): the reference runs without echo, profile,
//! the analysis and its checks against what the workload must show, enforce, auto mode twice,
//! the validation runs and the timed rounds, each output compared with the reference; and the
//! check of a device echo stays out of ([`stays_out`]).

use super::exec::{compare, worker_argv, Echo, Params, Place, Run, BASE_LIMIT};
use super::verdict::{
    Finding, Level, PairReport, RunReport, Timing, ValidationReport, WorkloadReport,
};
use super::workloads::{Expect, Workload};
use echo_analyzer::analysis::{explain, Decision};
use echo_analyzer::plan::Role;
use echo_analyzer::stats::Stats;
use echo_analyzer::trace::read_trace;
use echo_analyzer::words::human_bytes;
use std::path::Path;
use std::time::Duration;

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
pub(super) fn test_workload(
    exe: &Path,
    dir: &Path,
    device: usize,
    w: &Workload,
    p: &Params,
    validation: bool,
    pb: &echo_progress::ProgressBar,
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
    let prof = place.run(
        &argv,
        "profile",
        &Echo::Profile(trace.clone()),
        false,
        limit,
    );
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
            if crate::files::write_private(&dir.join("show.html"), &html).is_ok() {
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
            let b = place.run(
                &argv,
                &format!("round{r}-staging"),
                &Echo::Off,
                false,
                limit,
            );
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
                let z = place.run(
                    &twin,
                    &format!("round{r}-zero-copy"),
                    &Echo::Off,
                    false,
                    limit,
                );
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
            let slower =
                t.staging_ms.len() > 1 && t.staging_ms.iter().zip(&t.echo_ms).all(|(s, e)| e > s);
            if slower {
                rep.findings.push(Finding::new(
                    Level::Note,
                    format!(
                        "{name} ran slower with echo in every round ({:.2} ms per iteration against {:.2} ms): the output is right, the time is not; measure a program like it with `vkecho calibrate` before enabling echo for it",
                        t.echo(),
                        t.staging()
                    ),
                ));
            }
            rep.timing = Some(t);
        }
    }
    // The outputs are compared; only the bundle's files stay.
    remove_outputs(dir);
    rep
}

/// A device echo does not act on: with echo enabled (auto mode) the output is the same and
/// nothing is recorded.
pub(super) fn stays_out(
    exe: &Path,
    dir: &Path,
    device: usize,
    p: &Params,
    pb: &echo_progress::ProgressBar,
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
    let r = place.run(
        &argv,
        "auto",
        &Echo::Auto(cache.clone(), stats.clone()),
        false,
        limit,
    );
    pb.inc(1);
    match (&r.failed, compare(&base.output, &r.output)) {
        (Some(f), _) => out.push(Finding::new(
            Level::Unsafe,
            format!(
                "with echo enabled, a program fails on this device echo should stay out of ({f})"
            ),
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
                echo_analyzer::words::plural(recorded.len() as u64, "cache entry", "cache entries")
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
    crate::files::write_private(plan, &a.plan.to_json())?;
    crate::files::write_private(
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
            } => (
                "refused",
                Some(condition.as_str().to_string()),
                plain.clone(),
            ),
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
            let hazards: Vec<PairReport> = rep
                .pairs
                .iter()
                .filter(|p| p.role == role)
                .cloned()
                .collect();
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
pub(super) fn multiset_minus(a: &[String], b: &[String]) -> Vec<String> {
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
