//! A sample's plan, made as a user would: profile the staging variant, `vkecho analyze` the
//! trace, read what it decided.

use crate::opts::{sample_args, slug, Opts};
use crate::results::PlanInfo;
use crate::runner::{self, Build, Layer};

/// Profile the staging variant with exactly the arguments the timed runs use (a plan is bound to
/// them), analyze the trace with `vkecho analyze`, and read what it decided.
pub fn make_plan(o: &Opts, b: &Build, name: &str, size_mib: f64) -> PlanInfo {
    let mut info = PlanInfo::default();
    let base = o.work.join(slug(name, size_mib));
    let trace = base.with_extension("trace.jsonl");
    let plan = base.with_extension("plan.json");
    let _ = std::fs::remove_file(&trace);
    let _ = std::fs::remove_file(&plan);
    let args = sample_args(name, size_mib, o, "staging", false);
    let prof = runner::run_json(
        b,
        &b.samples,
        &args,
        &Layer::Mode("profile", vec![("TRACE", trace.display().to_string())]),
    );
    match prof {
        Ok(v) => info.profile_checksum = v["checksum"].as_str().map(String::from),
        Err(e) => {
            info.status = format!("no plan: profile run failed: {e}");
            return info;
        }
    }
    if !trace.is_file() {
        info.status = "no plan: the profile run wrote no trace".into();
        return info;
    }
    info.peak_memory = peak_memory(&trace);
    let analyzed = runner::vkecho(
        b,
        &[
            "analyze".into(),
            trace.display().to_string(),
            "-o".into(),
            plan.display().to_string(),
            "--no-symbolize".into(),
        ],
    );
    if let Err(e) = analyzed {
        info.status = format!("no plan: {e}");
        return info;
    }
    let parsed = std::fs::read_to_string(&plan)
        .map_err(|e| e.to_string())
        .and_then(|t| echo_analyzer::plan::parse_plan(&t).map_err(|e| e.to_string()));
    match parsed {
        Ok(p) => {
            info.groups = p.groups.len();
            info.bytes_saved_per_iter = p.groups.iter().map(|g| g.bytes_saved_per_iter).sum();
            info.memory_saved = p.groups.iter().map(|g| g.memory_saved).sum();
            let mut rej: Vec<String> = p
                .rejected
                .iter()
                .map(|r| r.condition.as_str().to_string())
                .collect();
            rej.sort();
            rej.dedup();
            info.status = if info.groups > 0 {
                echo_analyzer::words::plural(info.groups as u64, "group", "groups")
            } else if rej.is_empty() {
                "no candidates".into()
            } else {
                format!("refused: {}", rej.join(","))
            };
            info.rejected = rej;
            info.path = Some(plan);
        }
        Err(e) => info.status = format!("no plan: {}: {e}", plan.display()),
    }
    info
}

/// Peak of live device-memory bytes (`vkAllocateMemory` minus `vkFreeMemory`) in a trace.
fn peak_memory(trace: &std::path::Path) -> Option<u64> {
    use echo_analyzer::trace::Event;
    let f = std::fs::File::open(trace).ok()?;
    let t = echo_analyzer::trace::read_trace(std::io::BufReader::new(f)).ok()?;
    let mut live = std::collections::HashMap::new();
    let (mut cur, mut peak) = (0u64, 0u64);
    for r in &t.records {
        match &r.event {
            Event::MemoryAlloc { memory, size, .. } => {
                cur += size;
                live.insert(*memory, *size);
                peak = peak.max(cur);
            }
            Event::MemoryFree { memory } => {
                if let Some(s) = live.remove(memory) {
                    cur -= s;
                }
            }
            _ => {}
        }
    }
    Some(peak)
}
