//! `vkecho calibrate [--trials N] [--metric FIELD] --plan PLAN -- CMD ARGS...` (DESIGN §7):
//! run the program without the plan and with it, in separate processes, alternating (A B B A …),
//! and keep the plan only if the median time improves. The numbers go into the plan.
//!
//! The time is the process's wall-clock time, or with `--metric FIELD` the numeric field FIELD of
//! the last JSON line the program prints on stdout (the samples print `iter_ms_median`, the
//! complete-loop time of one iteration, which leaves process start-up out).

use crate::launch::{command, LayerRun};
use echo_analyzer::plan::Calibration;
use std::path::PathBuf;
use std::time::Instant;

/// `vkecho calibrate [--trials N] [--metric FIELD] --plan PLAN -- CMD ARGS...`.
#[derive(clap::Args)]
#[command(
    long_about = "Runs CMD without the plan and with it, in separate processes, \
alternating (A B B A ...), and keeps the plan only if the median time improves; the numbers go \
into the plan."
)]
pub struct Args {
    /// Timed runs of each side
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub trials: u32,
    /// Time by the numeric field FIELD of the last JSON line CMD prints on stdout (the samples
    /// print `iter_ms_median`) instead of the wall clock
    #[arg(long, value_name = "FIELD")]
    pub metric: Option<String>,
    /// The plan to calibrate (rewritten with the result)
    #[arg(long, value_name = "PLAN", required = true)]
    pub plan: PathBuf,
    /// The program and its arguments, after `--`
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

pub fn main(args: &Args) -> i32 {
    match calibrate(args) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("vkecho calibrate: {e}");
            2
        }
    }
}

/// One timed run; `Ok(ms)`.
fn timed(argv: &[String], run: &LayerRun, metric: Option<&str>) -> Result<f64, String> {
    let mut cmd = command(argv, run)?;
    cmd.stderr(std::process::Stdio::null());
    let t0 = Instant::now();
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {}: {e}", argv[0]))?;
    let wall = t0.elapsed().as_secs_f64() * 1e3;
    if !out.status.success() {
        return Err(format!("{} failed ({})", argv.join(" "), out.status));
    }
    let Some(field) = metric else { return Ok(wall) };
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|v| v.get(field).and_then(|x| x.as_f64()))
        .ok_or(format!(
            "the program printed no JSON line with a numeric '{field}'"
        ))
}

pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn calibrate(args: &Args) -> Result<(), String> {
    let argv = &args.command;
    let trials = args.trials;
    let metric = args.metric.clone();
    let plan_path = &args.plan;
    let (_, mut plan) = crate::plan::read_plan_file(plan_path)?;
    let abs =
        std::fs::canonicalize(plan_path).map_err(|e| format!("{}: {e}", plan_path.display()))?;
    // The plan run must apply the plan even if an earlier calibration switched it off.
    let mut trial_plan = plan.clone();
    trial_plan.calibration = None;
    let trial_path = crate::launch::temp_file("calibrate-plan", "json");
    crate::files::write_private(&trial_path, &trial_plan.to_json())?;
    let base = LayerRun {
        mode: Some("off"),
        settings: vec![],
    };
    let with = LayerRun {
        mode: Some("enforce"),
        settings: vec![("PLAN", trial_path.display().to_string())],
    };
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let pb = echo_progress::bar(2 * u64::from(trials), "vkecho calibrate", " runs");
    let result = (|| -> Result<(), String> {
        for t in 0..trials {
            echo_progress::say(&pb, &format!("vkecho calibrate: trial {}/{trials}", t + 1));
            // A B, then B A: drift in the machine's state hits both sides equally.
            let mut one = |with_plan: bool| -> Result<(), String> {
                pb.set_message(format!(
                    "trial {}/{trials}: {}",
                    t + 1,
                    if with_plan {
                        "with the plan"
                    } else {
                        "baseline"
                    }
                ));
                if with_plan {
                    b.push(timed(argv, &with, metric.as_deref())?);
                } else {
                    a.push(timed(argv, &base, metric.as_deref())?);
                }
                pb.inc(1);
                Ok(())
            };
            one(t % 2 == 1)?;
            one(t % 2 == 0)?;
        }
        Ok(())
    })();
    pb.finish_and_clear();
    let _ = std::fs::remove_file(&trial_path);
    result?;
    let (ma, mb) = (median(&mut a), median(&mut b));
    let enabled = mb < ma;
    plan.calibration = Some(Calibration {
        trials,
        baseline_ms_median: ma,
        plan_ms_median: mb,
        enabled,
    });
    crate::files::write_private(abs.as_path(), &plan.to_json())?;
    println!(
        "baseline {ma:.3} ms, with plan {mb:.3} ms (median of {trials}, {}): plan {}",
        metric.as_deref().unwrap_or("wall clock"),
        if enabled {
            "ENABLED"
        } else {
            "DISABLED (not faster here)"
        }
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn median_odd_even() {
        assert_eq!(super::median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(super::median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
    }
}
