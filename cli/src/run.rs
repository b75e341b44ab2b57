//! `vkecho run [--plan PLAN] [--stats FILE] -- CMD ARGS...`: run a program with the layer in
//! enforce mode, then print what the layer did (from its statistics file).

use crate::launch::{command, flag_value, split_command, temp_file, LayerRun};
use echo_analyzer::stats::Stats;

pub fn main(args: &[String]) -> i32 {
    let (opts, argv) = split_command(args);
    if argv.is_empty() || opts.iter().any(|o| o == "-h" || o == "--help") {
        eprintln!("usage: vkecho run [--plan PLAN] [--stats FILE] -- CMD ARGS...");
        return 2;
    }
    let result = (|| -> Result<i32, String> {
        let plan = flag_value(&opts, "--plan")?;
        if let Some(p) = &plan {
            if !std::path::Path::new(p).is_file() {
                return Err(format!("plan file {p} does not exist"));
            }
        }
        let keep_stats = flag_value(&opts, "--stats")?;
        let stats_path = keep_stats
            .clone()
            .map(Into::into)
            .unwrap_or_else(|| temp_file("stats", "json"));
        let mut settings = vec![("STATS", stats_path.display().to_string())];
        if let Some(p) = plan {
            let abs = std::fs::canonicalize(&p).map_err(|e| format!("plan {p}: {e}"))?;
            settings.push(("PLAN", abs.display().to_string()));
        }
        let status = command(
            &argv,
            &LayerRun {
                mode: Some("enforce"),
                settings,
            },
        )?
        .status()
        .map_err(|e| format!("cannot run {}: {e}", argv[0]))?;
        match read_stats(&stats_path) {
            Ok(all) if all.is_empty() => {
                eprintln!("vkecho run: the program created no Vulkan device")
            }
            Ok(all) => {
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
                    for n in &s.not_applied {
                        eprintln!("vkecho run:   group {} not applied: {}", n.group, n.reason);
                    }
                    if s.plan_status != "applied" && !s.plan_status.is_empty() {
                        eprintln!("vkecho run:   plan: {}", s.plan_status);
                    }
                }
                eprintln!(
                    "vkecho run: process total: {}",
                    Stats::total(&all).summary()
                );
            }
            Err(e) => eprintln!("vkecho run: no statistics from the layer ({e}); was it loaded?"),
        }
        if keep_stats.is_none() {
            let _ = std::fs::remove_file(&stats_path);
        }
        Ok(status.code().unwrap_or(1))
    })();
    result.unwrap_or_else(|e| {
        eprintln!("vkecho run: {e}");
        2
    })
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
