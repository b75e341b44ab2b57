//! echo-bench: the measurement VK_LAYER_echo is judged by (DESIGN §9, issue 7).
//!
//! For each sample, four configurations run as separate processes, interleaved in rounds (A B C D,
//! B C D A, C D A B, …: the order rotates so no configuration always runs first):
//! A no layer (staging variant), B layer loaded with mode=off, C enforce with a plan made once by
//! profile + `vkecho analyze` for exactly these arguments, D the hand-written zero-copy twin.
//! Every process reports its mean iteration time; a configuration's time is the median of its
//! per-process means, and ratios are taken round by round and then summarised (median, min–max).
//! A separate `--timing` process of the staging variant measures the copy fraction. Then a size
//! sweep of saxpy (A, C, D) and the per-call cost of the layer (`echo-bench-calls`). Results go to
//! `RESULTS.md`, `results.json` and SVG/PNG plots in the output directory.

mod machine;
mod memory;
mod opts;
mod plan;
use echo_progress as progress;
mod report;
mod results;
mod runner;
mod stats;
mod svg;

use machine::Machine;
use opts::{sample_args, sample_size, slug, Opts, FULL_SWEEP, QUICK_SWEEP};
use plan::make_plan;
use results::{CallsRun, Config, PlanInfo, Results, SampleRun};
use runner::{Build, Layer};
use std::path::PathBuf;

/// `echo-bench`'s command line (clap).
#[derive(clap::Parser, Debug)]
#[command(
    name = "echo-bench",
    version,
    args_override_self = true,
    about = "The measurement VK_LAYER_echo is judged by: base vs layer-off vs enforce vs zero-copy \
per sample, a size sweep and the per-call cost; writes RESULTS.md, results.json and plots"
)]
struct Cli {
    /// (default) 3 processes per configuration, 16 MiB, 5 iterations, a 4-size sweep
    #[arg(long, conflicts_with = "full")]
    quick: bool,
    /// 7 processes per configuration, 64 MiB, 20 iterations, the 11-size sweep
    #[arg(long)]
    full: bool,
    /// Where RESULTS.md, results.json and the plots go
    #[arg(long, value_name = "DIR", default_value = "bench")]
    out: PathBuf,
    /// Samples to run (comma-separated; default: every positive sample of echo-samples)
    #[arg(long, value_name = "LIST")]
    samples: Option<String>,
    /// Also run the negative controls (labelled; the plan must refuse them)
    #[arg(long)]
    negatives: bool,
    /// Sample size in MiB (compute-heavy samples are capped: quick sgemm/pipeline 1 MiB, conv2d
    /// 4 MiB; full sgemm 1, pipeline 4, conv2d 16 MiB)
    #[arg(long, value_name = "F", value_parser = positive)]
    size_mib: Option<f64>,
    /// Timed iterations per process (after the warm-up iterations)
    #[arg(long, value_name = "N", value_parser = positive)]
    iters: Option<f64>,
    /// Processes per configuration (rounds)
    #[arg(long, value_name = "N", value_parser = positive)]
    procs: Option<f64>,
    /// Saxpy sizes in MiB for the sweep (comma-separated)
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        value_parser = positive,
        overrides_with = "no_sweep"
    )]
    sweep: Option<Vec<f64>>,
    /// Skip the size sweep
    #[arg(long, overrides_with = "sweep")]
    no_sweep: bool,
    /// Skip the per-call microbenchmark
    #[arg(long)]
    no_calls: bool,
    /// Skip the memory measurement (device memory at the driver, peak RSS)
    #[arg(long)]
    no_memory: bool,
    /// Only the memory measurement: every positive sample (or --samples) without the layer, with
    /// it and as the zero-copy twin, under the test layer that counts vkAllocateMemory at the
    /// driver; writes its section into RESULTS.md, memory_per_sample.svg/png and memory.json
    /// (needs the workspace's release build)
    #[arg(long)]
    memory: bool,
    /// Only carry the measurements that scripts keep beside RESULTS.md (instructions.md,
    /// real-libraries.md, agreement.md, ...) into it, in place of their sections
    #[arg(long)]
    kept: bool,
    /// Traces, plans and statistics files (default: a fresh directory in /tmp)
    #[arg(long, value_name = "DIR")]
    work: Option<PathBuf>,
    /// The command line to record in RESULTS.md (scripts/bench.sh passes its own)
    #[arg(long, value_name = "TEXT")]
    command: Option<String>,
}

fn positive(v: &str) -> Result<f64, String> {
    v.trim()
        .parse::<f64>()
        .ok()
        .filter(|x| x.is_finite() && *x > 0.0)
        .ok_or(format!("needs a positive number, got '{v}'"))
}

fn parse(args: &[String]) -> Opts {
    use clap::Parser;
    let c = Cli::parse_from(std::iter::once("echo-bench".to_string()).chain(args.iter().cloned()));
    let full = c.full;
    let sweep = if c.no_sweep {
        Vec::new()
    } else {
        c.sweep
            .unwrap_or_else(|| if full { FULL_SWEEP } else { QUICK_SWEEP }.to_vec())
    };
    Opts {
        full,
        out: c.out,
        work: c.work.unwrap_or_else(|| {
            std::env::temp_dir().join(format!("echo-bench-{}", std::process::id()))
        }),
        samples: c.samples.map(|v| {
            v.split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        }),
        negatives: c.negatives,
        size_mib: c.size_mib.unwrap_or(if full { 64.0 } else { 16.0 }),
        iters: c
            .iters
            .map_or(if full { 20 } else { 5 }, |x| x.round().max(1.0) as u32),
        warmup: if full { 2 } else { 1 },
        procs: c
            .procs
            .map_or(if full { 7 } else { 3 }, |x| x.round().max(1.0) as usize),
        timing_procs: if full { 3 } else { 1 },
        sweep,
        calls: !c.no_calls,
        memory: !c.no_memory,
        memory_only: c.memory,
        kept_only: c.kept,
        calls_scale: if full { 1.0 } else { 0.5 },
        command: c.command.unwrap_or_else(|| {
            std::iter::once("echo-bench".to_string())
                .chain(args.iter().cloned())
                .collect::<Vec<_>>()
                .join(" ")
        }),
    }
}

fn layer_for(c: Config, plan: &PlanInfo, stats: &std::path::Path) -> Layer {
    let st = ("STATS", stats.display().to_string());
    match c {
        Config::Base | Config::Zero => Layer::None,
        Config::Off => Layer::Mode("off", vec![st]),
        Config::Echo => {
            let mut s = vec![st];
            if let Some(p) = &plan.path {
                s.push(("PLAN", p.display().to_string()));
            }
            Layer::Mode("enforce", s)
        }
    }
}

/// Runs one sample at one size: plan, interleaved rounds, then the timing processes.
fn bench_sample(
    o: &Opts,
    b: &Build,
    name: &str,
    kind: &str,
    size_mib: f64,
    configs: &[Config],
    pb: &crate::progress::ProgressBar,
) -> SampleRun {
    pb.set_message(format!("{name} at {size_mib} MiB: profile and plan"));
    let plan = if configs.contains(&Config::Echo) {
        make_plan(o, b, name, size_mib)
    } else {
        PlanInfo::default()
    };
    let mut r = SampleRun {
        sample: name.into(),
        kind: kind.into(),
        size_mib,
        configs: configs.to_vec(),
        times: Default::default(),
        medians: Default::default(),
        checksums: Default::default(),
        plan,
        stats_echo: None,
        stats_off: None,
        f_copy: Vec::new(),
        copy_ms: Vec::new(),
        bytes_copied_per_iter: 0,
        iters_per_process: o.iters + o.warmup,
        errors: Vec::new(),
    };
    if r.plan.status.starts_with("no plan") {
        r.errors.push(r.plan.status.clone());
    }
    let stats_path = o.work.join(format!("{}.stats.jsonl", slug(name, size_mib)));
    // `--procs` rounds, then more (up to twice as many) while the per-round recovered fraction
    // spans more than the noise mark: a wide spread asks for more rounds, not a verdict.
    let mut round = 0;
    while round < o.procs || (round < 2 * o.procs && r.spread_is_wide()) {
        for c in Config::ALL {
            if !configs.contains(&c) {
                r.times[c.index()].push(f64::NAN);
                r.medians[c.index()].push(f64::NAN);
            }
        }
        // Each round starts with a different configuration (A B C D, B C D A, …), so that a
        // position effect (the first process after a pause, the one after a big allocation)
        // does not always fall on the same configuration.
        let order: Vec<Config> = configs
            .iter()
            .cycle()
            .skip(round % configs.len())
            .take(configs.len())
            .copied()
            .collect();
        for c in order {
            pb.set_message(format!(
                "{name} at {size_mib} MiB: round {}, {}",
                round + 1,
                c.label()
            ));
            let variant = if c == Config::Zero {
                "zero-copy"
            } else {
                "staging"
            };
            let args = sample_args(name, size_mib, o, variant, false);
            let _ = std::fs::remove_file(&stats_path);
            let layer = layer_for(c, &r.plan, &stats_path);
            match runner::run_json(b, &b.samples, &args, &layer) {
                Ok(v) => {
                    r.times[c.index()].push(v["iter_ms_mean"].as_f64().unwrap_or(f64::NAN));
                    r.medians[c.index()].push(v["iter_ms_median"].as_f64().unwrap_or(f64::NAN));
                    r.checksums[c.index()].push(v["checksum"].as_str().unwrap_or("?").to_string());
                    if c == Config::Base {
                        r.bytes_copied_per_iter = v["bytes_copied_per_iter"].as_u64().unwrap_or(0);
                    }
                }
                Err(e) => {
                    r.times[c.index()].push(f64::NAN);
                    r.medians[c.index()].push(f64::NAN);
                    r.errors.push(format!("round {}: {e}", round + 1));
                }
            }
            if matches!(c, Config::Echo | Config::Off) {
                if let Ok(s) = runner::read_stats(&stats_path) {
                    let last = s.into_iter().last();
                    if c == Config::Echo {
                        r.stats_echo = last.or(r.stats_echo.take());
                    } else {
                        r.stats_off = last.or(r.stats_off.take());
                    }
                }
            }
        }
        round += 1;
    }
    for _ in 0..o.timing_procs {
        pb.set_message(format!(
            "{name} at {size_mib} MiB: copy fraction (--timing)"
        ));
        let args = sample_args(name, size_mib, o, "staging", true);
        match runner::run_json(b, &b.samples, &args, &Layer::None) {
            Ok(v) => {
                r.f_copy.push(v["f_copy"].as_f64().unwrap_or(f64::NAN));
                r.copy_ms
                    .push(v["copy_ms_mean"].as_f64().unwrap_or(f64::NAN));
                if let Some(c) = v["checksum"].as_str() {
                    r.checksums[0].push(c.to_string());
                }
            }
            Err(e) => r.errors.push(format!("timing run: {e}")),
        }
    }
    r
}

fn bench_calls(o: &Opts, b: &Build) -> CallsRun {
    let stats_path = o.work.join("calls.stats.jsonl");
    let st = || ("STATS", stats_path.display().to_string());
    let layers = [
        Layer::None,
        Layer::Mode("off", vec![st()]),
        Layer::Mode("enforce", vec![st()]),
    ];
    let mut run = CallsRun {
        labels: vec![
            "no layer".into(),
            "layer inactive (mode=off)".into(),
            "layer active (mode=enforce, no plan)".into(),
        ],
        per: vec![Vec::new(), Vec::new(), Vec::new()],
        active: vec![Some(false), None, None],
    };
    let args = vec![
        "--scale".to_string(),
        format!("{}", o.calls_scale),
        "--batches".into(),
        "5".into(),
    ];
    for round in 0..o.procs {
        for k in 0..layers.len() {
            // Rotated like the sample rounds: a different configuration starts each round.
            let i = (k + round) % layers.len();
            let l = &layers[i];
            let _ = std::fs::remove_file(&stats_path);
            let res = runner::run_json(b, &b.calls, &args, l);
            if let Err(e) = &res {
                eprintln!("echo-bench: calls round {}: {e}", round + 1);
            }
            run.per[i].push(res);
            if i > 0 {
                if let Ok(s) = runner::read_stats(&stats_path) {
                    if let Some(s) = s.last() {
                        run.active[i] = Some(s.active);
                    }
                }
            }
        }
    }
    run
}

/// Samples of `echo-samples list`: (name, "positive" | "negative").
fn list_samples(b: &Build) -> Result<Vec<(String, String)>, String> {
    let out = std::process::Command::new(&b.samples)
        .arg("list")
        .output()
        .map_err(|e| format!("cannot run {}: {e}", b.samples.display()))?;
    let v: Vec<(String, String)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let name = it.next()?.to_string();
            let kind = it.next().unwrap_or("").trim_end_matches(':').to_string();
            Some((name, kind))
        })
        .collect();
    if v.is_empty() {
        return Err("echo-samples lists no samples".into());
    }
    Ok(v)
}

/// `--memory`: the memory measurement alone, spliced into an existing RESULTS.md.
fn run_memory(
    o: &Opts,
    b: &Build,
    chosen: &[(String, String)],
    t0: std::time::Instant,
) -> Result<i32, String> {
    let mem = memory::measure(o, b, chosen);
    write_memory(o, &mem)?;
    eprintln!(
        "echo-bench: memory section written into {} ({:.0} s)",
        o.out.join("RESULTS.md").display(),
        t0.elapsed().as_secs_f64()
    );
    let bad = mem.iter().any(|r| !r.identical() || !r.errors.is_empty());
    Ok(if bad { 1 } else { 0 })
}

/// The memory section, its plot and raw numbers (`memory.json`).
fn write_memory(o: &Opts, mem: &[memory::MemRun]) -> Result<(), String> {
    let png = memory::plot(mem, &o.out, o.full)?;
    let when = machine::now_utc();
    report::write_memory(&o.out, &memory::markdown(mem, o, &when, png), mem)?;
    let json = serde_json::to_string_pretty(mem).map_err(|e| e.to_string())?;
    std::fs::write(o.out.join("memory.json"), json + "\n")
        .map_err(|e| format!("cannot write memory.json: {e}"))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let o = parse(&args);
    std::process::exit(match run(o) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("echo-bench: {e}");
            2
        }
    });
}

fn run(o: Opts) -> Result<i32, String> {
    let t0 = std::time::Instant::now();
    if o.kept_only {
        let done = report::write_kept(&o.out)?;
        eprintln!(
            "echo-bench: carried {} into {}",
            done.join(", "),
            o.out.join("RESULTS.md").display()
        );
        return Ok(0);
    }
    std::fs::create_dir_all(&o.work)
        .map_err(|e| format!("cannot create {}: {e}", o.work.display()))?;
    std::fs::create_dir_all(&o.out)
        .map_err(|e| format!("cannot create {}: {e}", o.out.display()))?;
    let b = Build::locate(&o.work)?;
    let all = list_samples(&b)?;
    let chosen: Vec<(String, String)> = match &o.samples {
        Some(names) => names
            .iter()
            .map(|n| {
                all.iter().find(|(a, _)| a == n).cloned().ok_or(format!(
                    "unknown sample '{n}' (known: {})",
                    all.iter()
                        .map(|a| a.0.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })
            .collect::<Result<_, _>>()?,
        None => all
            .iter()
            .filter(|(_, k)| k == "positive" || o.negatives)
            .cloned()
            .collect(),
    };
    if o.memory_only {
        return run_memory(&o, &b, &chosen, t0);
    }
    let machine = Machine::gather();
    let started = machine::now_utc();
    eprintln!(
        "echo-bench: {} mode, {} sample(s) x 4 configurations x {} processes, {} iterations (+{} warm-up); sweep {:?} MiB; work files in {}",
        if o.full { "full" } else { "quick" },
        chosen.len(),
        o.procs,
        o.iters,
        o.warmup,
        o.sweep,
        o.work.display()
    );
    // One step per sample, per sweep size and for the per-call benchmark; the message names
    // the round and configuration running.
    let pb = progress::bar(
        (chosen.len() + o.sweep.len() + usize::from(o.calls)) as u64,
        "echo-bench",
        "",
    );
    let mut samples = Vec::new();
    for (i, (name, kind)) in chosen.iter().enumerate() {
        let size = sample_size(name, &o);
        progress::say(
            &pb,
            &format!(
                "echo-bench: [{}/{}] {name} ({kind}) at {size} MiB …",
                i + 1,
                chosen.len()
            ),
        );
        let r = bench_sample(&o, &b, name, kind, size, &Config::ALL, &pb);
        pb.suspend(|| report::progress(&r));
        pb.inc(1);
        samples.push(r);
    }
    let mut sweep = Vec::new();
    for (i, &size) in o.sweep.iter().enumerate() {
        progress::say(
            &pb,
            &format!(
                "echo-bench: sweep [{}/{}] saxpy at {size} MiB …",
                i + 1,
                o.sweep.len()
            ),
        );
        let r = bench_sample(
            &o,
            &b,
            "saxpy",
            "positive",
            size,
            &[Config::Base, Config::Echo, Config::Zero],
            &pb,
        );
        pb.suspend(|| report::progress(&r));
        pb.inc(1);
        sweep.push(r);
    }
    let calls = if o.calls {
        progress::say(&pb, "echo-bench: per-call cost (echo-bench-calls) …");
        pb.set_message("per-call cost (echo-bench-calls)");
        let c = bench_calls(&o, &b);
        pb.inc(1);
        Some(c)
    } else {
        None
    };
    pb.finish_and_clear();
    let res = Results {
        finished: machine::now_utc(),
        started,
        machine: machine.finish(),
        samples,
        sweep,
        calls,
        wall_s: t0.elapsed().as_secs_f64(),
        opts: o,
    };
    let mem = if res.opts.memory {
        memory::measure(&res.opts, &b, &chosen)
    } else {
        Vec::new()
    };
    let changed = report::write_all(&res, &mem)?;
    if !mem.is_empty() {
        write_memory(&res.opts, &mem)?;
    }
    eprintln!(
        "echo-bench: wrote {} ({:.0} s)",
        res.opts.out.join("RESULTS.md").display(),
        res.wall_s
    );
    if changed {
        eprintln!(
            "echo-bench: OUTPUT CHANGED under the layer in at least one run — see RESULTS.md"
        );
        Ok(1)
    } else {
        Ok(0)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn command_line() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
        let o = super::parse(&["--full".into(), "--sweep".into(), "1,2.5".into()]);
        assert_eq!(
            (o.full, o.procs, o.sweep.clone()),
            (true, 7, vec![1.0, 2.5])
        );
        let o = super::parse(&["--sweep".into(), "4".into(), "--no-sweep".into()]);
        assert!(o.sweep.is_empty());
        let o = super::parse(&["--no-sweep".into(), "--sweep".into(), "4".into()]);
        assert_eq!(o.sweep, vec![4.0]);
        let o = super::parse(&[
            "--iters".into(),
            "2.6".into(),
            "--samples".into(),
            "a, b,".into(),
        ]);
        assert_eq!(
            (o.iters, o.samples),
            (3, Some(vec!["a".to_string(), "b".into()]))
        );
        assert_eq!(super::parse(&[]).command, "echo-bench");
    }
}
