//! echo-samples: compute workloads written the way discrete-GPU Vulkan code is written (staging
//! buffers and vkCmdCopyBuffer), each with a hand-written zero-copy twin for unified memory, and
//! negative controls that VK_LAYER_echo must refuse to alias. See `echo-samples list`.
//!
//! stdout carries exactly one JSON line per run; diagnostics go to stderr.

mod harness;
mod memory;
mod samples;
mod vk;

use harness::{Opts, Sink, Variant};
use std::process::ExitCode;

const USAGE: &str = "usage: echo-samples list
       echo-samples <sample> [--size-mib F | --size-kib N] [--iters N]
                             [--variant staging|zero-copy] [--threads N] [--seed N] [--warmup N] [--timing]

  --size-mib F   main buffer size in MiB (fractions allowed; default 16)
  --size-kib N   main buffer size in KiB
  --iters N      timed iterations (default 10)
  --warmup N     untimed iterations before them (default 0; they still feed the checksum)
  --variant V    staging (default): staging buffers + vkCmdCopyBuffer
                 zero-copy: host-visible device-local buffers, no copies
  --threads N    threads for the `threads` sample (default 4)
  --seed N       input seed (default 1)
  --timing       timestamp queries around copies; adds copy_ms_median, copy_ms_mean, f_copy
  --per-iter     adds iter_ms and iter_minflt: each timed iteration's time and minor page faults,
                 and iter_run_ms (in record/submit/wait), iter_cpu_ms (all threads' CPU time),
                 iter_main_cpu_ms (this thread's), iter_sys_ms (all threads'
                 kernel time), iter_vcsw / iter_ivcsw (voluntary /
                 involuntary context switches), iter_steal_ms (the machine's steal time)";

fn parse(args: &[String]) -> Result<Opts, String> {
    let mut o = Opts {
        variant: Variant::Staging,
        size_bytes: 16 << 20,
        iters: 10,
        threads: 4,
        seed: 1,
        timing: false,
        warmup: 0,
        inject_hazard: false,
        race_at: None,
        per_iter: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = |name: &str| it.next().cloned().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "--size-mib" => {
                let v: f64 = val(a)?.parse().map_err(|e| format!("--size-mib: {e}"))?;
                o.size_bytes = (v * 1048576.0).round() as u64;
            }
            "--size-kib" => {
                let v: u64 = val(a)?.parse().map_err(|e| format!("--size-kib: {e}"))?;
                o.size_bytes = v * 1024;
            }
            "--iters" => o.iters = val(a)?.parse().map_err(|e| format!("--iters: {e}"))?,
            "--threads" => o.threads = val(a)?.parse().map_err(|e| format!("--threads: {e}"))?,
            "--warmup" => o.warmup = val(a)?.parse().map_err(|e| format!("--warmup: {e}"))?,
            "--seed" => o.seed = val(a)?.parse().map_err(|e| format!("--seed: {e}"))?,
            "--variant" => {
                o.variant = match val(a)?.as_str() {
                    "staging" => Variant::Staging,
                    "zero-copy" => Variant::ZeroCopy,
                    v => return Err(format!("unknown variant `{v}` (staging|zero-copy)")),
                }
            }
            "--timing" => o.timing = true,
            "--per-iter" => o.per_iter = true,
            // Test only: omit one required barrier in saxpy so validation has something to find.
            "--inject-hazard" => o.inject_hazard = true,
            // Test only: `race` races in this one iteration (sampled validation's limits).
            "--race-at" => {
                o.race_at = Some(val(a)?.parse().map_err(|e| format!("--race-at: {e}"))?)
            }
            "-h" | "--help" => return Err(USAGE.into()),
            _ => return Err(format!("unknown argument `{a}`\n{USAGE}")),
        }
    }
    if o.size_bytes < 4096 {
        return Err("size must be at least 4 KiB".into());
    }
    if o.iters == 0 || o.threads == 0 {
        return Err("--iters and --threads must be at least 1".into());
    }
    Ok(o)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(cmd) = args.first() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    if cmd == "list" {
        for s in samples::ALL {
            println!("{:<11} {}", s.name, s.about);
        }
        return ExitCode::SUCCESS;
    }
    if cmd == "-h" || cmd == "--help" {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let Some(sample) = samples::ALL.iter().find(|s| s.name == cmd) else {
        eprintln!("echo-samples: unknown sample `{cmd}` (see `echo-samples list`)");
        return ExitCode::from(2);
    };
    let opts = match parse(&args[1..]) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("echo-samples: {e}");
            return ExitCode::from(2);
        }
    };
    let result = vk::Ctx::new((sample.needs)(&opts), opts.timing).and_then(|ctx| {
        let mut sink = Sink::new(opts.warmup);
        sink.per_iter(opts.per_iter);
        (sample.run)(&ctx, &opts, &mut sink)?;
        drop(ctx);
        Ok(sink)
    });
    match result {
        Ok(sink) => {
            println!("{}", sink.json(sample.name, &opts));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("echo-samples {}: error: {e}", sample.name);
            ExitCode::FAILURE
        }
    }
}
