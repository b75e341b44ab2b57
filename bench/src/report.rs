//! RESULTS.md, results.json and the plots.
//!
//! Over 1,000 lines: the writer of RESULTS.md (`markdown`: one section after another, each with
//! its prose and table, in the order the file prints them), the memory columns spliced into it,
//! and the plots.

use crate::memory::MemRun;
use crate::opts::caps_text;
use crate::results::{Config, Results, SampleRun, CALL_METRICS};
use crate::stats::{self, amdahl, Summary, NOISY_RECOVERED};
use crate::svg::{self, Axis, Marker, Plot, Point, Series};
use echo_analyzer::words::human_bytes;
use std::fmt::Write;
use std::path::Path;

fn signed_pct(x: f64) -> String {
    if x.is_finite() {
        format!("{:+.2} %", x * 100.0)
    } else {
        "–".into()
    }
}

fn ms(x: f64) -> String {
    if !x.is_finite() {
        "–".into()
    } else if x >= 100.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// A copy fraction in a table cell (`–` when unknown).
fn f_copy_cell(f: f64) -> String {
    if f.is_finite() {
        format!("{f:.3}")
    } else {
        "–".into()
    }
}

/// The Amdahl bound of a copy fraction in a table cell (`–` when unknown).
fn amdahl_cell(f: f64) -> String {
    if f.is_finite() {
        format!("{:.2}×", amdahl(f))
    } else {
        "–".into()
    }
}

fn ratio(s: &Summary) -> String {
    if s.is_valid() {
        format!("{:.2}× [{:.2}–{:.2}]", s.median, s.min, s.max)
    } else {
        "–".into()
    }
}

/// The per-round recovered fraction (median [min–max]) and, beside it, the least-disturbed
/// one (from each configuration's fastest process).
fn rec_both(r: &SampleRun) -> String {
    let per_round = rec(&r.recovered());
    match (r.recovered().is_valid(), r.recovered_least_disturbed()) {
        (true, Some(ld)) => format!("{per_round}; least-disturbed {:.0} %", ld * 100.0),
        _ => per_round,
    }
}

fn rec(s: &Summary) -> String {
    if s.is_valid() {
        format!(
            "{:.0} % [{:.0}–{:.0}]",
            s.median * 100.0,
            s.min * 100.0,
            s.max * 100.0
        )
    } else {
        "n/a".into()
    }
}

fn spct(s: &Summary) -> String {
    if s.is_valid() {
        format!(
            "{} [{} … {}]",
            signed_pct(s.median),
            signed_pct(s.min),
            signed_pct(s.max)
        )
    } else {
        "–".into()
    }
}

fn identical(r: &SampleRun) -> &'static str {
    match r.identical() {
        Some(true) => "yes",
        Some(false) => "**NO — OUTPUT CHANGED**",
        None => "? (no baseline)",
    }
}

/// The per-sample table's device-memory column: from the memory measurement (driver counts).
pub const MEMORY_COLUMN: &str = "device memory at the driver A → C (zero-copy D)";
/// Its title before it came from the memory measurement (replaced when found).
const OLD_MEMORY_COLUMN: &str = "device memory without → with the layer";
const MEMORY_METHOD: &str = "- device memory at the driver (per-sample table) = the memory measurement's (section Memory per sample, `echo-bench --memory`): the peak of live `vkAllocateMemory` bytes that reached the driver, counted by the test layer below echo, A without the layer → C with it, D the zero-copy twin. It is deterministic (one process per configuration) and written by whichever run measured memory last, `--memory` alone included, so it never comes from an older timing run. Both count what the sample allocates, not driver-internal memory.";

fn memory_cell(m: &MemRun) -> String {
    let peak = |x: &Option<crate::memory::Meas>| {
        x.as_ref()
            .map_or("?".to_string(), |m| human_bytes(m.peak_live_bytes))
    };
    format!("{} → {} ({})", peak(&m.base), peak(&m.echo), peak(&m.zero))
}

fn memory(r: &SampleRun, mem: &[MemRun]) -> String {
    mem.iter().find(|m| m.sample == r.sample).map_or(
        "– (not measured: `echo-bench --memory`)".into(),
        memory_cell,
    )
}

/// Puts the memory section into `RESULTS.md` in `out` (in place of an earlier one, else before
/// the plots, or at the end) and the memory measurement into the per-sample table's
/// device-memory column (`echo-bench --memory` alone keeps the rest of the file).
pub fn write_memory(out: &Path, section: &str, mem: &[MemRun]) -> Result<(), String> {
    let path = out.join("RESULTS.md");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let new = memory_column(&splice(&text, section), mem);
    std::fs::write(&path, new).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Puts `section` (markdown that starts with its `## ` heading) into `text`: in place of the
/// section with the same heading (up to the next `## `), else before the plots, else at the end.
fn splice(text: &str, section: &str) -> String {
    let head = section.lines().next().unwrap_or_default();
    let at = if text.starts_with(&format!("{head}\n")) {
        Some(0)
    } else {
        text.find(&format!("\n{head}\n")).map(|i| i + 1)
    };
    if let Some(start) = at {
        let rest = &text[start + head.len()..];
        let end = rest
            .find("\n## ")
            .map_or(text.len(), |i| start + head.len() + i + 1);
        return format!("{}{}{}", &text[..start], section, &text[end..]);
    }
    match text.find("\n## Plots") {
        Some(i) => format!("{}\n{}{}", &text[..i], section, &text[i + 1..]),
        None => format!("{text}\n{section}"),
    }
}

/// Measurements that their own scripts write beside RESULTS.md, in the order RESULTS.md shows
/// them: per-call instructions (scripts/costs.sh), the recovered fraction by instructions of
/// every positive sample (scripts/samples-cg.sh), profiling's own cost
/// (scripts/profile-overhead.sh), enforce's first iterations (scripts/warmup.sh), echo on a
/// discrete GPU (scripts/discrete-check.sh, on a machine that has one), allocator-managed
/// memory (bench/allocators.sh), the real-library programs (scripts/real-libs.sh), what a
/// transparent layer can at best recover on c_vkfft (bench/ceiling.md, written by hand from
/// real-libs.sh's callgrind runs), instructions against the wall clock (scripts/agreement.sh),
/// the cost of a call-site capture (scripts/callsite-cost.sh) and what the defaults accept
/// beside the vouch `host_writes=whole` (scripts/host-writes-table.sh).
pub const KEPT: [&str; 11] = [
    "instructions.md",
    "instructions-samples.md",
    "profile-overhead.md",
    "warmup.md",
    "discrete.md",
    "allocators.md",
    "real-libraries.md",
    "ceiling.md",
    "agreement.md",
    "callsite.md",
    "host-writes.md",
];

/// `echo-bench --kept`: puts every kept measurement (KEPT) that exists in `out` into
/// `out/RESULTS.md` in place of its earlier section, so a script that measured one of them
/// updates RESULTS.md without a timing run.
pub fn write_kept(out: &Path) -> Result<Vec<&'static str>, String> {
    let path = out.join("RESULTS.md");
    let mut text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut done = Vec::new();
    for kept in KEPT {
        if let Ok(section) = std::fs::read_to_string(out.join(kept)) {
            text = splice(&text, &format!("{}\n\n", section.trim_end()));
            done.push(kept);
        }
    }
    std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(done)
}

/// The per-sample table's device-memory cells (and the method's line about them) from `mem`,
/// by sample name; rows of samples not measured keep theirs.
fn memory_column(text: &str, mem: &[MemRun]) -> String {
    let mut out = Vec::new();
    let mut col: Option<usize> = None;
    for line in text.lines() {
        let cells: Vec<&str> = line.split(" | ").collect();
        if line.starts_with("| sample |") {
            col = cells
                .iter()
                .position(|c| *c == OLD_MEMORY_COLUMN || *c == MEMORY_COLUMN);
            if let Some(i) = col {
                let mut c: Vec<String> = cells.iter().map(|x| x.to_string()).collect();
                c[i] = MEMORY_COLUMN.into();
                out.push(c.join(" | "));
                continue;
            }
        } else if !line.starts_with('|') {
            col = None;
        } else if let Some(i) = col {
            let name = line
                .trim_start_matches("| ")
                .split(" | ")
                .next()
                .unwrap_or("");
            if let (Some(m), true) = (mem.iter().find(|m| m.sample == name), i < cells.len()) {
                let mut c: Vec<String> = cells.iter().map(|x| x.to_string()).collect();
                c[i] = memory_cell(m);
                out.push(c.join(" | "));
                continue;
            }
        }
        if line.starts_with("- device memory without the layer =")
            || line.starts_with("- device memory at the driver (per-sample table)")
        {
            out.push(MEMORY_METHOD.into());
            continue;
        }
        out.push(line.to_string());
    }
    let mut s = out.join("\n");
    if text.ends_with('\n') {
        s.push('\n');
    }
    s
}

fn elided(r: &SampleRun) -> String {
    match (&r.stats_echo, r.elided_per_iter()) {
        (Some(s), Some(e)) => format!(
            "{} of {} ({} in {} regions per process, one-time uploads included)",
            human_bytes(e),
            human_bytes(r.bytes_copied_per_iter),
            human_bytes(s.bytes_elided_run),
            s.regions_elided_run
        ),
        _ => format!("? of {} (no stats)", human_bytes(r.bytes_copied_per_iter)),
    }
}

fn stats_note(r: &SampleRun) -> Option<String> {
    let s = r.stats_echo.as_ref()?;
    let mut v = Vec::new();
    if !s.plan_status.is_empty() && s.plan_status != "applied" {
        v.push(format!("plan {}", s.plan_status));
    }
    v.extend(s.group_lines());
    for e in &s.errors {
        v.push(format!("layer error: {e}"));
    }
    if !s.active {
        v.push(format!("layer inactive on {} ({})", s.device, s.class));
    }
    (!v.is_empty()).then(|| v.join("; "))
}

/// Writes RESULTS.md, results.json and the plots; returns whether any output changed.
pub fn write_all(res: &Results, mem: &[MemRun]) -> Result<bool, String> {
    let out = &res.opts.out;
    let json = serde_json::to_string_pretty(res).map_err(|e| e.to_string())?;
    std::fs::write(out.join("results.json"), json + "\n")
        .map_err(|e| format!("cannot write results.json: {e}"))?;
    let plots = write_plots(res)?;
    let (md, changed) = markdown(res, &plots, mem);
    std::fs::write(out.join("RESULTS.md"), md)
        .map_err(|e| format!("cannot write RESULTS.md: {e}"))?;
    Ok(changed)
}

pub fn progress(r: &SampleRun) {
    eprintln!(
        "echo-bench:   plan {}; base {} ms, off {} ms, echo {} ms, zero-copy {} ms; speedup {}, recovered {}, f_copy {:.3}, identical {}",
        r.plan.status,
        ms(r.t(Config::Base)),
        ms(r.t(Config::Off)),
        ms(r.t(Config::Echo)),
        ms(r.t(Config::Zero)),
        ratio(&r.speedup()),
        rec_both(r),
        r.f_copy(),
        identical(r)
    );
    for e in r.errors.iter().take(3) {
        eprintln!("echo-bench:   error: {e}");
    }
}

fn markdown(res: &Results, plots: &[(String, String, bool)], mem: &[MemRun]) -> (String, bool) {
    let o = &res.opts;
    let m = &res.machine;
    let mut s = String::new();
    let mode = if o.full { "FULL" } else { "QUICK" };
    let _ = writeln!(s, "# VK_LAYER_echo benchmark results ({mode} run)\n");
    let _ = writeln!(
        s,
        "Written by `echo-bench` (bench/, DESIGN §9, issue 7); do not edit by hand — rerun `scripts/bench.sh {}`.\n",
        if o.full { "--full" } else { "--quick" }
    );
    if !o.full {
        let _ = writeln!(
            s,
            "> **Quick run**: {} processes per configuration, {} MiB, {} iterations. Indicative only; the numbers this project is judged by come from `scripts/bench.sh --full`.\n",
            o.procs, o.size_mib, o.iters
        );
    }
    let all_runs: Vec<&SampleRun> = res.samples.iter().chain(&res.sweep).collect();
    let changed: Vec<String> = all_runs
        .iter()
        .filter(|r| r.identical() == Some(false))
        .map(|r| format!("{} at {} MiB", r.sample, r.size_mib))
        .collect();
    if !changed.is_empty() {
        let _ = writeln!(
            s,
            "> ## ⚠ OUTPUT CHANGED\n> The output checksum differed from the no-layer baseline in: **{}**. A layer that changes results is broken, whatever its speed; every number below is suspect.\n",
            changed.join(", ")
        );
    }
    let _ = writeln!(s, "| | |\n|---|---|");
    let _ = writeln!(
        s,
        "| date | {} → {} ({:.0} s) |",
        res.started, res.finished, res.wall_s
    );
    let _ = writeln!(s, "| command | `{}` |", o.command);
    let _ = writeln!(s, "| commit | {} |", m.commit);
    let _ = writeln!(s, "| last enforce commit | {} |", m.enforce_commit);
    let _ = writeln!(
        s,
        "| machine | {}, {} cores, {} RAM, Linux {} |",
        m.cpu, m.cores, m.memory, m.kernel
    );
    let _ = writeln!(
        s,
        "| load average | {} at start, {} at end (1/5/15 min; other work on the machine shows here) |",
        m.load_start, m.load_end
    );
    let _ = writeln!(
        s,
        "| device, driver | {} — {} (Vulkan {}), loader {} |",
        m.device, m.driver, m.api, m.loader
    );
    let _ = writeln!(
        s,
        "| settings | {} MiB ({}), {} timed iterations after {} warm-up, {} processes per configuration, {} `--timing` process(es) per sample |\n",
        o.size_mib, caps_text(o), o.iters, o.warmup, o.procs, o.timing_procs
    );

    // Targets.
    let positives: Vec<&SampleRun> = res
        .samples
        .iter()
        .filter(|r| r.kind == "positive")
        .collect();
    let _ = writeln!(s, "## Targets\n");
    let _ = writeln!(
        s,
        "| target | goal | measured | where we stand |\n|---|---|---|---|"
    );
    {
        let mut met = Vec::new();
        let mut missed = Vec::new();
        let mut na = Vec::new();
        for r in &positives {
            let rc = r.recovered();
            let noisy = if rc.max - rc.min > NOISY_RECOVERED {
                " (noisy)"
            } else {
                ""
            };
            if !rc.is_valid() {
                na.push(r.sample.clone());
            } else if rc.median >= 0.99 {
                met.push(format!("{} {:.0} %{noisy}", r.sample, rc.median * 100.0));
            } else {
                missed.push(format!("{} {:.0} %{noisy}", r.sample, rc.median * 100.0));
            }
        }
        let stand = if positives.is_empty() {
            "no positive sample run".to_string()
        } else if missed.is_empty() && na.is_empty() {
            "**met** on every positive sample".to_string()
        } else {
            let mut v = Vec::new();
            if !missed.is_empty() {
                v.push(format!("**not met** on {}", missed.join(", ")));
            }
            if !na.is_empty() {
                v.push(format!(
                    "not measurable on {} (f_copy or the zero-copy gain < {:.0} %: nothing to recover above the noise)",
                    na.join(", "),
                    stats::MIN_GAIN * 100.0
                ));
            }
            if !met.is_empty() {
                v.push(format!("met on {}", met.join(", ")));
            }
            if missed.iter().chain(&met).any(|m| m.ends_with("(noisy)")) {
                v.push(format!(
                    "(noisy) = the rounds span more than {:.0} points: the machine was busy (load average above) or the sample is unstable; rerun before concluding",
                    NOISY_RECOVERED * 100.0
                ));
            }
            v.join("; ")
        };
        let _ = writeln!(
            s,
            "| recovered fraction (t_base − t_echo)/(t_base − t_zero), every positive sample | ≥ 99 % | {} | {} |",
            positives
                .iter()
                .map(|r| format!("{} {}", r.sample, rec_both(r)))
                .collect::<Vec<_>>()
                .join("; "),
            stand
        );
    }
    match &res.calls {
        Some(c) => {
            let cost = c.cost(1, "submit_wait_ns");
            let stand = if !cost.is_valid() {
                "not measured (the microbenchmark failed)".to_string()
            } else if cost.max - cost.min > NOISY_PASSTHROUGH || cost.median < -0.01 {
                format!(
                    "**inconclusive**: the rounds span {:.1} points, far more than the 1 % target (the machine's noise: see the load average above; a median below zero is noise too); rerun on a quiet machine",
                    (cost.max - cost.min) * 100.0
                )
            } else if cost.median <= 0.01 {
                "**met**".to_string()
            } else {
                format!(
                    "**not met** ({} per call)",
                    ns_delta(
                        stats::median(&c.values(0, "submit_wait_ns")),
                        stats::median(&c.values(1, "submit_wait_ns"))
                    )
                )
            };
            let _ = writeln!(
                s,
                "| passthrough cost, submit-heavy loop (layer loaded, mode=off, vs no layer) | ≤ 1 % | {} (median [min … max] of {} paired rounds) | {} |",
                spct(&cost), cost.n, stand
            );
        }
        None => {
            let _ = writeln!(
                s,
                "| passthrough cost, submit-heavy loop | ≤ 1 % | not run (--no-calls) | – |"
            );
        }
    }
    let _ = writeln!(
        s,
        "| output identical to the no-layer baseline (every process, every configuration) | always | {} | {} |\n",
        if changed.is_empty() {
            "identical".to_string()
        } else {
            format!("CHANGED in {}", changed.join(", "))
        },
        if changed.is_empty() {
            "**met**"
        } else {
            "**NOT MET — broken**"
        }
    );

    // Per sample.
    let _ = writeln!(s, "## Per sample\n");
    let _ = writeln!(
        s,
        "Times are the median over processes of each process's mean iteration time (ms). Ratios are taken per round (A/C, A/D, B/A) and summarised as median [min–max].\n"
    );
    let _ = writeln!(
        s,
        "| sample | kind | MiB | plan | A base | B off | C echo | D zero-copy | speedup A/C | zero-copy A/D | recovered | f_copy | Amdahl 1/(1−f) | passthrough B/A | identical |"
    );
    let _ = writeln!(
        s,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for r in &res.samples {
        let f = r.f_copy();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.sample,
            r.kind,
            r.size_mib,
            r.plan.status,
            ms(r.t(Config::Base)),
            ms(r.t(Config::Off)),
            ms(r.t(Config::Echo)),
            ms(r.t(Config::Zero)),
            ratio(&r.speedup()),
            ratio(&r.zero_speedup()),
            rec_both(r),
            f_copy_cell(f),
            amdahl_cell(f),
            spct(&r.passthrough()),
            identical(r)
        );
    }
    let _ = writeln!(s, "\n| sample | bytes elided per iteration (of bytes copied) | {MEMORY_COLUMN} | planned saving per iteration | layer notes |");
    let _ = writeln!(s, "|---|---|---|---|---|");
    for r in &res.samples {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} |",
            r.sample,
            elided(r),
            memory(r, mem),
            human_bytes(r.plan.bytes_saved_per_iter),
            stats_note(r).unwrap_or_default()
        );
    }
    if res.samples.iter().any(|r| r.kind != "positive") {
        let _ = writeln!(
            s,
            "\nNegative controls (kind `negative`) are correct programs the analyzer must refuse to alias: their plan should say `refused: …`, nothing is elided, the speedup should be ≈1× and the output identical. Their zero-copy twin is still faster — that gain is deliberately left on the table."
        );
    }

    // Sweep.
    if !res.sweep.is_empty() {
        let _ = writeln!(s, "\n## Size sweep: saxpy\n");
        let _ = writeln!(
            s,
            "A = no layer, C = enforce with a plan profiled at that size, D = zero-copy twin; interleaved A C D (order rotating per round), {} processes each. Sizes straddle 32 MiB on purpose (allocators change behaviour there).\n",
            o.procs
        );
        let _ = writeln!(
            s,
            "| MiB | plan | A base ms | C echo ms | D zero-copy ms | speedup A/C | zero-copy A/D | recovered | f_copy | Amdahl | bytes elided/iter | identical |"
        );
        let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|---|---|");
        for r in &res.sweep {
            let f = r.f_copy();
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.size_mib,
                r.plan.status,
                ms(r.t(Config::Base)),
                ms(r.t(Config::Echo)),
                ms(r.t(Config::Zero)),
                ratio(&r.speedup()),
                ratio(&r.zero_speedup()),
                rec_both(r),
                f_copy_cell(f),
                amdahl_cell(f),
                r.elided_per_iter()
                    .map(human_bytes)
                    .unwrap_or_else(|| "? (no stats)".into()),
                identical(r)
            );
        }
    }

    // Per-call cost.
    if let Some(c) = &res.calls {
        let _ = writeln!(s, "\n## Per-call cost of the layer\n");
        let _ = writeln!(
            s,
            "`echo-bench-calls` (bench/src/bin/echo-bench-calls.rs), {} processes per configuration, interleaved, the order rotating each round. ns per call: median over processes (each process: median of 5 batch means). Δ: per-round ratio to the no-layer process of the same round, median [min … max].\n",
            o.procs
        );
        let active = |i: usize| match c.active[i] {
            Some(true) => "hooks active",
            Some(false) => "hooks inactive",
            None => "no stats written",
        };
        let _ = writeln!(
            s,
            "| call | {} | {} ({}) | Δ | {} ({}) | Δ |",
            c.labels[0],
            c.labels[1],
            active(1),
            c.labels[2],
            active(2)
        );
        let _ = writeln!(s, "|---|---|---|---|---|---|");
        for (key, what) in CALL_METRICS {
            let med = |i| stats::median(&c.values(i, key));
            let _ = writeln!(
                s,
                "| {what} | {:.0} | {:.0} | {} | {:.0} | {} |",
                med(0),
                med(1),
                spct(&c.cost(1, key)),
                med(2),
                spct(&c.cost(2, key)),
            );
        }
        let errors: Vec<&String> = c
            .per
            .iter()
            .flatten()
            .filter_map(|r| r.as_ref().err())
            .collect();
        for e in errors.iter().take(3) {
            let _ = writeln!(s, "\n- error: {e}");
        }
    }

    // The measurements kept beside this file by their own scripts (KEPT), carried into every
    // RESULTS.md.
    for kept in KEPT {
        if let Ok(text) = std::fs::read_to_string(res.opts.out.join(kept)) {
            let _ = writeln!(s, "\n{}", text.trim_end());
        }
    }

    // Plots.
    if !plots.is_empty() {
        let _ = writeln!(s, "\n## Plots\n");
        for (file, caption, png) in plots {
            let shown = if *png {
                file.replace(".svg", ".png")
            } else {
                file.clone()
            };
            let _ = writeln!(
                s,
                "**{caption}** ([SVG]({file}))\n\n![{caption}]({shown})\n"
            );
        }
    }

    // Method.
    let _ = writeln!(s, "## How the numbers are computed\n");
    let _ = writeln!(s, "- Every number comes from separate processes of `echo-samples <sample> --size-mib S --iters N --warmup W --variant V`. A round runs A (staging, no layer), B (staging, layer loaded with `VK_ECHO_MODE=off`), C (staging, `VK_ECHO_MODE=enforce` with the plan), D (zero-copy twin, no layer), back to back; rounds repeat, each starting one configuration later (A B C D, B C D A, …) so that a position effect does not always hit the same configuration. The layer is loaded through an explicit manifest for this build's `libVkLayer_echo.so` (`VK_ADD_LAYER_PATH`, `VK_INSTANCE_LAYERS=VK_LAYER_echo`); `VK_ECHO_DISABLE` keeps an installed implicit copy out of every configuration (`implicit` where the layer is loaded: any other value would switch the explicit one off too; `1` where it is not).");
    let _ = writeln!(s, "- Iteration time = host input fill + record + submit + wait + host readback/postprocess (what the consumer pays; the checksum fold is excluded by the sample). Per process: `iter_ms_mean`; per configuration: median of the per-process means.");
    let _ = writeln!(s, "- The plan is made once per sample and size: one profile run (`VK_ECHO_MODE=profile`) with exactly the timed arguments (a plan is bound to the argument hash), then `vkecho analyze TRACE -o PLAN`.");
    let _ = writeln!(s, "- speedup = A/C, zero-copy = A/D, passthrough = B/A − 1, recovered = (A − C)/(A − D), each computed within a round and then summarised; recovered is not reported (n/a) when f_copy or A − D is under {:.0} % of A (no gain to recover above the noise; the quotient would be noise). Beside it, the least-disturbed recovered fraction uses each configuration's fastest process (noise on a shared machine only adds time). A recovered fraction whose rounds span more than {:.0} points is marked (noisy), and such a sample runs up to twice `--procs` rounds before it is reported; a passthrough measurement whose rounds span more than {:.0} points is inconclusive.", stats::MIN_GAIN * 100.0, NOISY_RECOVERED * 100.0, NOISY_PASSTHROUGH * 100.0);
    let _ = writeln!(s, "- f_copy: a separate no-layer process of the staging variant with `--timing` (timestamp queries around every `vkCmdCopyBuffer`; f_copy = Σ copy time / Σ iteration time), so the queries do not disturb the timed runs. Median over the timing processes. Amdahl bound = 1/(1 − f_copy).");
    let _ = writeln!(s, "- bytes elided per iteration = the layer's `bytes_elided_run` (elided copies counted per submission; statistics file written at `vkDestroyDevice`, last enforce process) / (timed + warm-up iterations); one-time uploads (pipeline's weights) are in the total, so that figure can exceed the per-iteration copies. bytes copied = the sample's own `bytes_copied_per_iter` (what the app recorded per timed iteration).");
    let _ = writeln!(s, "{MEMORY_METHOD}");
    let _ = writeln!(s, "- identical = every checksum (A, B, C, D, the profile run and the timing runs) equals the no-layer baseline's.");
    let _ = writeln!(
        s,
        "- Raw per-process numbers: `results.json` next to this file."
    );

    // Errors.
    let errs: Vec<String> = all_runs
        .iter()
        .flat_map(|r| {
            r.errors
                .iter()
                .map(move |e| format!("{} {} MiB: {e}", r.sample, r.size_mib))
        })
        .collect();
    if !errs.is_empty() {
        let _ = writeln!(s, "\n## Errors\n");
        for e in errs.iter().take(40) {
            let _ = writeln!(s, "- {}", e.replace('\n', " "));
        }
        if errs.len() > 40 {
            let _ = writeln!(s, "- … and {} more (results.json)", errs.len() - 40);
        }
    }
    (s, !changed.is_empty())
}

/// A passthrough measurement whose rounds span more than this cannot judge a 1 % target.
const NOISY_PASSTHROUGH: f64 = 0.04;

fn ns_delta(a: f64, b: f64) -> String {
    format!("{:+.0} ns", b - a)
}

const C_ECHO: &str = "#d62728";
const C_ZERO: &str = "#1f77b4";
const C_BASE: &str = "#555555";
const C_AMDAHL: &str = "#2ca02c";

/// Writes the plots; returns (svg file name, caption, png made).
fn write_plots(res: &Results) -> Result<Vec<(String, String, bool)>, String> {
    let out = &res.opts.out;
    let mut made = Vec::new();
    let tag = if res.opts.full { "full" } else { "quick" };

    // 1. Speedup against f_copy, with the Amdahl curve.
    let runs: Vec<&SampleRun> = res.samples.iter().chain(&res.sweep).collect();
    let fmax = runs
        .iter()
        .map(|r| r.f_copy())
        .filter(|f| f.is_finite())
        .fold(0.0f64, f64::max);
    if fmax > 0.0 {
        let xmax = (fmax + 0.1).clamp(0.3, 0.95);
        let curve: Vec<Point> = (0..=100)
            .map(|i| {
                let f = xmax * i as f64 / 100.0;
                Point::new(f, amdahl(f))
            })
            .collect();
        let pt = |r: &SampleRun, s: Summary, label: bool| Point {
            err: s.is_valid().then_some((s.min, s.max)),
            label: label.then(|| r.sample.clone()),
            ..Point::new(r.f_copy(), s.median)
        };
        let sp: Vec<f64> = runs
            .iter()
            .flat_map(|r| [r.speedup().max, r.zero_speedup().max])
            .filter(|v| v.is_finite())
            .collect();
        let ymax = sp.iter().copied().fold(amdahl(fmax), f64::max) * 1.1;
        let ymin = runs
            .iter()
            .flat_map(|r| [r.speedup().min, r.zero_speedup().min])
            .filter(|v| v.is_finite())
            .fold(0.9f64, f64::min)
            * 0.95;
        let plot = Plot {
            title: format!("Speedup against copy fraction ({tag} run)"),
            x_label: "f_copy (copy time / iteration time, timestamp queries)".into(),
            y_label: "speedup over the staging baseline".into(),
            x: Axis {
                log: false,
                range: Some((0.0, xmax)),
            },
            y: Axis {
                log: false,
                range: Some((ymin, ymax.max(1.5))),
            },
            x_ticks: None,
            series: vec![
                Series {
                    name: "Amdahl bound 1/(1−f)".into(),
                    color: C_AMDAHL,
                    marker: Marker::None,
                    line: true,
                    dashed: true,
                    points: curve,
                },
                Series {
                    name: "echo (enforce), per sample".into(),
                    color: C_ECHO,
                    marker: Marker::Dot,
                    line: false,
                    dashed: false,
                    points: res.samples.iter().map(|r| pt(r, r.speedup(), true)).collect(),
                },
                Series {
                    name: "zero-copy twin, per sample".into(),
                    color: C_ZERO,
                    marker: Marker::Ring,
                    line: false,
                    dashed: false,
                    points: res
                        .samples
                        .iter()
                        .map(|r| pt(r, r.zero_speedup(), false))
                        .collect(),
                },
                Series {
                    name: "echo, saxpy size sweep".into(),
                    color: "#ff7f0e",
                    marker: Marker::Square,
                    line: false,
                    dashed: false,
                    points: res.sweep.iter().map(|r| pt(r, r.speedup(), false)).collect(),
                },
            ],
            note: Some(
                "error bars: min–max over paired rounds; speedup = t_base / t_config, median of per-round ratios"
                    .into(),
            ),
        };
        let name = "speedup_vs_fcopy.svg";
        let png = svg::write_with_png(&out.join(name), &plot.to_svg())?;
        made.push((
            name.to_string(),
            "Speedup against f_copy, with the Amdahl bound".to_string(),
            png.is_some(),
        ));
    }

    // 2. Size sweep: time per iteration, and speedup.
    if !res.sweep.is_empty() {
        let sizes: Vec<f64> = res.sweep.iter().map(|r| r.size_mib).collect();
        let line = |name: &str, color: &'static str, marker, c: Config| Series {
            name: name.into(),
            color,
            marker,
            line: true,
            dashed: false,
            points: res
                .sweep
                .iter()
                .map(|r| {
                    let v = &r.times[c as usize];
                    let fin: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
                    Point {
                        err: (!fin.is_empty()).then(|| {
                            (
                                fin.iter().copied().fold(f64::INFINITY, f64::min),
                                fin.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                            )
                        }),
                        ..Point::new(r.size_mib, r.t(c))
                    }
                })
                .collect(),
        };
        let plot = Plot {
            title: format!("saxpy: time per iteration against size ({tag} run)"),
            x_label: "size per vector (MiB, log scale)".into(),
            y_label: "ms per iteration (log scale)".into(),
            x: Axis {
                log: true,
                range: None,
            },
            y: Axis {
                log: true,
                range: None,
            },
            x_ticks: Some(sizes.clone()),
            series: vec![
                line("A staging, no layer", C_BASE, Marker::Square, Config::Base),
                line("C echo (enforce)", C_ECHO, Marker::Dot, Config::Echo),
                line("D zero-copy twin", C_ZERO, Marker::Ring, Config::Zero),
            ],
            note: Some(
                "median of per-process mean iteration times; bars: min–max over processes".into(),
            ),
        };
        let name = "sweep_time.svg";
        let png = svg::write_with_png(&out.join(name), &plot.to_svg())?;
        made.push((
            name.to_string(),
            "saxpy size sweep: time per iteration".to_string(),
            png.is_some(),
        ));

        let sp =
            |name: &str, color: &'static str, marker, f: &dyn Fn(&SampleRun) -> Summary| Series {
                name: name.into(),
                color,
                marker,
                line: true,
                dashed: false,
                points: res
                    .sweep
                    .iter()
                    .map(|r| {
                        let s = f(r);
                        Point {
                            err: s.is_valid().then_some((s.min, s.max)),
                            ..Point::new(r.size_mib, s.median)
                        }
                    })
                    .collect(),
            };
        let plot = Plot {
            title: format!("saxpy: speedup against size ({tag} run)"),
            x_label: "size per vector (MiB, log scale)".into(),
            y_label: "speedup over the staging baseline".into(),
            x: Axis {
                log: true,
                range: None,
            },
            y: Axis {
                log: false,
                range: None,
            },
            x_ticks: Some(sizes),
            series: vec![
                Series {
                    name: "Amdahl bound 1/(1−f_copy)".into(),
                    color: C_AMDAHL,
                    marker: Marker::None,
                    line: true,
                    dashed: true,
                    points: res
                        .sweep
                        .iter()
                        .map(|r| Point::new(r.size_mib, amdahl(r.f_copy())))
                        .collect(),
                },
                sp("echo (enforce)", C_ECHO, Marker::Dot, &|r| r.speedup()),
                sp("zero-copy twin", C_ZERO, Marker::Ring, &|r| {
                    r.zero_speedup()
                }),
            ],
            note: Some("median of per-round ratios; bars: min–max".into()),
        };
        let name = "sweep_speedup.svg";
        let png = svg::write_with_png(&out.join(name), &plot.to_svg())?;
        made.push((
            name.to_string(),
            "saxpy size sweep: speedup".to_string(),
            png.is_some(),
        ));
    }
    Ok(made)
}

#[cfg(test)]
mod memory_tests {
    use super::*;

    #[test]
    fn the_section_replaces_itself_or_goes_before_the_plots() {
        let doc = "# R\n\n## A\n\na\n\n## Plots\n\np\n";
        let one = splice(doc, "## Memory per sample\n\nm1\n\n");
        assert_eq!(
            one,
            "# R\n\n## A\n\na\n\n## Memory per sample\n\nm1\n\n## Plots\n\np\n"
        );
        let two = splice(&one, "## Memory per sample\n\nm2\n\n");
        assert_eq!(two.matches("## Memory per sample").count(), 1);
        assert!(two.contains("m2") && !two.contains("m1"));
        assert!(two.ends_with("## Plots\n\np\n"));
        assert_eq!(
            splice("# R\n", "## Memory per sample\n"),
            "# R\n\n## Memory per sample\n"
        );
        // A heading is matched as a whole line: "## Real libraries" does not take the place of
        // "## Real libraries, old" and is not found inside a paragraph.
        let doc = "# R\n\nsee ## Real libraries\n\n## Real libraries, old\n\nx\n\n## Plots\n";
        let three = splice(doc, "## Real libraries\n\nnew\n\n");
        assert!(
            three.contains("## Real libraries, old\n\nx\n\n## Real libraries\n\nnew\n\n## Plots"),
            "{three}"
        );
        let four = splice(&three, "## Real libraries\n\nnewer\n\n");
        assert!(
            !four.contains("\nnew\n") && four.contains("newer") && four.contains("old\n\nx"),
            "{four}"
        );
    }

    #[test]
    fn the_device_memory_column_comes_from_the_memory_measurement() {
        let doc = "# R\n\n| sample | bytes elided | device memory without → with the layer | notes |\n|---|---|---|---|\n| saxpy | 1 | 320 MiB → 320 MiB | x |\n| other | 2 | 1 MiB → 1 MiB | y |\n\n| sample | device memory without → with the layer |\n\n- device memory without the layer = old\n";
        let meas = |b: u64| {
            Some(crate::memory::Meas {
                peak_live_bytes: b << 20,
                ..Default::default()
            })
        };
        let m = MemRun {
            sample: "saxpy".into(),
            base: meas(320),
            echo: meas(128),
            zero: meas(128),
            ..Default::default()
        };
        let out = memory_column(doc, &[m]);
        assert!(
            out.contains("| saxpy | 1 | 320 MiB → 128 MiB (128 MiB) | x |"),
            "{out}"
        );
        assert!(out.contains("| other | 2 | 1 MiB → 1 MiB | y |"), "{out}");
        assert!(out.contains(&format!("| bytes elided | {MEMORY_COLUMN} | notes |")));
        assert!(
            !out.contains("= old") && out.contains(MEMORY_METHOD),
            "{out}"
        );
        assert!(out.ends_with('\n'));
    }
}
