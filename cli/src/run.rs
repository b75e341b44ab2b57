//! `vkecho run [--plan PLAN] [--stats FILE] -- CMD ARGS...`: run a program with the layer, then
//! print what the layer did (from its statistics file).
//!
//! With `--plan` the layer enforces that plan (`mode=enforce`). Without it the layer runs in auto
//! mode (`mode=auto`, DESIGN §6): the plan cached for this program, its arguments and the device
//! is enforced if there is one; otherwise the run is profiled and the plan is written at exit for
//! the next run. Either way `vkecho run` says which plan it used or wrote; a plan profiled by a
//! run whose program failed (non-zero status, or killed by a signal) is removed instead, so the
//! next run profiles again.
//!
//! The exit status is the program's, 128+N when signal N killed it (as a shell reports it).

use crate::launch::{command, exit_code, failure, temp_file, LayerRun};
use echo_analyzer::stats::Stats;
use std::path::PathBuf;

/// `vkecho run [--plan PLAN] [--stats FILE] -- CMD ARGS...`.
#[derive(clap::Args)]
#[command(
    long_about = "Runs CMD with the layer, then prints what the layer did. With --plan the \
layer enforces PLAN (checked before CMD starts: a file that is not a plan is refused). Without it, \
auto mode: the plan cached for CMD, its arguments and the device is enforced if there is one; \
otherwise this run is profiled and the plan written for the next run. Exit status: CMD's (128+N \
when signal N killed it); 2 when vkecho itself could not run it."
)]
pub struct Args {
    /// Enforce this plan (made by `vkecho analyze -o`); without it, auto mode
    #[arg(long, value_name = "PLAN")]
    pub plan: Option<PathBuf>,
    /// Keep the layer's statistics in FILE (default: a temporary file, removed)
    #[arg(long, value_name = "FILE")]
    pub stats: Option<PathBuf>,
    /// The program and its arguments, after `--`
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

pub fn main(args: &Args) -> i32 {
    let argv = &args.command;
    let result = (|| -> Result<i32, String> {
        // The plan is checked here, before the program starts: the layer would otherwise refuse
        // it in the program's process, apply nothing and let the run succeed.
        if let Some(p) = &args.plan {
            crate::plan::read_plan_file(p)?;
        }
        let keep_stats = args.stats.clone();
        let stats_path = keep_stats
            .clone()
            .unwrap_or_else(|| temp_file("stats", "json"));
        let mut settings = vec![("STATS", stats_path.display().to_string())];
        let auto = args.plan.is_none();
        if let Some(p) = &args.plan {
            let abs = std::fs::canonicalize(p).map_err(|e| format!("plan {}: {e}", p.display()))?;
            settings.push(("PLAN", abs.display().to_string()));
        }
        // A stale statistics file would be read as this run's.
        let _ = std::fs::remove_file(&stats_path);
        let started = std::time::SystemTime::now();
        let status = command(
            argv,
            &LayerRun {
                mode: Some(if auto { "auto" } else { "enforce" }),
                settings,
            },
        )?
        .status()
        .map_err(|e| format!("cannot run {}: {e}", argv[0]))?;
        let failed = failure(status);
        match read_stats(&stats_path) {
            Ok(all) if all.is_empty() => match &failed {
                Some(how) => eprintln!("vkecho run: the program {how}"),
                None => eprintln!("vkecho run: the program created no Vulkan device"),
            },
            Ok(all) => {
                // Auto mode's plans this run profiled: a failed run's are not kept.
                let mut discarded = Vec::new();
                for s in &all {
                    let end = if s.ended == "exit" {
                        " [the program exited without destroying the device]"
                    } else {
                        ""
                    };
                    eprintln!(
                        "vkecho run: device {}: {}{end}",
                        s.device_index,
                        s.summary()
                    );
                    for line in s.group_lines() {
                        eprintln!("vkecho run:   {line}");
                    }
                    let profiled =
                        s.mode == "profile" && s.plan.as_deref().is_some_and(|p| !p.is_empty());
                    if auto && profiled && failed.is_some() {
                        let plan = std::path::PathBuf::from(s.plan.as_deref().unwrap_or_default());
                        if !discarded.contains(&plan) {
                            eprintln!(
                                "vkecho run:   {}",
                                discard_plan(&plan, started, failed.as_deref().unwrap_or_default())
                            );
                            discarded.push(plan);
                        }
                    } else if auto {
                        eprintln!("vkecho run:   {}", auto_outcome(s));
                    } else if s.plan_status != "applied" && !s.plan_status.is_empty() {
                        eprintln!("vkecho run:   plan: {}", s.plan_status);
                    }
                }
                eprintln!(
                    "vkecho run: process total: {}",
                    Stats::total(&all).summary()
                );
                if let Some(how) = &failed {
                    eprintln!("vkecho run: the program {how}");
                }
            }
            // The hint applies only to a program that ran to its end: a crashed one never
            // reached the point where the layer writes its statistics.
            Err(e) => match &failed {
                Some(how) => eprintln!(
                    "vkecho run: the program {how} before the layer wrote its statistics ({e})"
                ),
                None => eprintln!("vkecho run: no statistics from the layer ({e}); was it loaded?"),
            },
        }
        if keep_stats.is_none() {
            let _ = std::fs::remove_file(&stats_path);
        }
        Ok(exit_code(status))
    })();
    result.unwrap_or_else(|e| {
        eprintln!("vkecho run: {e}");
        2
    })
}

/// Auto mode profiled a run whose program failed (non-zero status or a signal): the plan that
/// run wrote is evidence of a run that went wrong, so it is removed and the next run profiles
/// again (issue 23). Only a plan written since `started` is removed (not one another process
/// left there). Returns the sentence that says what happened.
pub fn discard_plan(plan: &std::path::Path, started: std::time::SystemTime, how: &str) -> String {
    let written = std::fs::metadata(plan)
        .and_then(|m| m.modified())
        .is_ok_and(|t| t >= started);
    if !written {
        return format!(
            "the program {how}: this run was profiled, and no plan was written at {}; the next run profiles again",
            plan.display()
        );
    }
    // A plan under `context=program` merged this profile into earlier ones; it goes too
    // (fail closed: a merge cannot be undone), and later runs profile afresh.
    let earlier = read_plan(plan)
        .ok()
        .and_then(|p| p.evidence)
        .map(|e| e.profiles.len().saturating_sub(1))
        .filter(|&n| n > 0)
        .map(|n| {
            format!(
                " (with the {n} earlier profile{} merged into it)",
                if n == 1 { "" } else { "s" }
            )
        })
        .unwrap_or_default();
    match std::fs::remove_file(plan) {
        Ok(()) => {
            // The layer's `<plan>.untrusted` marker (enforce/guard.rs), if a guarded run left one.
            let mut marker = plan.as_os_str().to_owned();
            marker.push(".untrusted");
            let _ = std::fs::remove_file(marker);
            // The cache entry's directory, when nothing else is left in it.
            if let Some(dir) = plan.parent() {
                let _ = std::fs::remove_dir(dir);
            }
            format!(
                "the program {how}: the plan this run profiled, {}, is not kept{earlier}: removed; the next run profiles again",
                plan.display()
            )
        }
        Err(e) => format!(
            "the program {how}: the plan this run profiled, {}, could not be removed ({e}); remove it (`vkecho cache clear`) or the next run enforces it",
            plan.display()
        ),
    }
}

/// Read a statistics file: one JSON object per line (one line per device, written when it is
/// destroyed or, if the program never destroyed it, at exit).
pub fn read_stats(path: &std::path::Path) -> Result<Vec<Stats>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).map_err(|e| format!("{}: {e}", path.display())))
        .collect()
}

/// What auto mode did on one device, in a sentence: which plan it enforced, or which plan the
/// profiled run wrote (read back from the cache, now that the program has exited).
pub fn auto_outcome(s: &Stats) -> String {
    let plan = s.plan.as_deref().unwrap_or("");
    if !s.active {
        return format!(
            "echo is inactive on this {} device (nothing to do; `vkecho doctor` explains)",
            s.class
        );
    }
    let evidence = read_plan(std::path::Path::new(plan))
        .ok()
        .and_then(|p| p.evidence.map(|e| (p.groups.len(), e)));
    match s.mode.as_str() {
        "profile" if evidence.is_some() => {
            let (groups, e) = evidence.expect("checked");
            format!(
                "context=program: these arguments were profiled and merged into the program's plan {plan} ({groups} group{}, {} profile{} so far); {}",
                if groups == 1 { "" } else { "s" },
                e.profiles.len(),
                if e.profiles.len() == 1 { "" } else { "s" },
                if e.stable {
                    "this profile changed nothing, so the plan is stable: later runs enforce it under any arguments"
                } else {
                    "the plan is still changing: new arguments are profiled until a profile changes nothing"
                }
            )
        }
        "enforce" if s.plan_status == "applied" && evidence.is_some() => {
            let (_, e) = evidence.expect("checked");
            let none = if s.groups_planned > 0 && s.groups_applied == 0 && s.groups_partly_applied == 0 {
                "; none of its buffers was recreated with the same identity (call site, size, usage) in this run, so nothing changed — `vkecho cache clear` makes auto mode profile the program afresh"
            } else {
                ""
            };
            format!(
                "enforced the program's plan {plan} (context=program, {} after {} profile{}){none}",
                if e.stable { "stable" } else { "these arguments were profiled" },
                e.profiles.len(),
                if e.profiles.len() == 1 { "" } else { "s" }
            )
        }
        "profile" => match read_plan_summary(std::path::Path::new(plan)) {
            Ok((groups, rejected)) => format!(
                "no plan was cached for this program, these arguments and this device: this run was profiled and the plan {plan} was written ({groups} group{}, {rejected} candidate{} rejected); the next run of the same command enforces it",
                if groups == 1 { "" } else { "s" },
                if rejected == 1 { "" } else { "s" }
            ),
            Err(e) => format!(
                "no plan was cached for this program, these arguments and this device: this run was profiled, but no plan was written at {plan} ({e}); the layer's warnings above say why"
            ),
        },
        "enforce" if s.plan_status == "applied" => {
            format!("enforced the cached plan {plan}")
        }
        _ if plan.is_empty() => format!("plan: {}", s.plan_status),
        _ => format!("plan {plan}: {}", s.plan_status),
    }
}

/// A plan file's group and rejection counts.
fn read_plan_summary(path: &std::path::Path) -> Result<(usize, usize), String> {
    let plan = read_plan(path)?;
    Ok((plan.groups.len(), plan.rejected.len()))
}

fn read_plan(path: &std::path::Path) -> Result<echo_analyzer::plan::Plan, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    echo_analyzer::plan::parse_plan(&text).map_err(|e| e.to_string())
}
