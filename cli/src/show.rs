//! `vkecho show TRACE [--plan P] [--stats S] [--bench B] [--format html|perfetto] [-o OUT]`:
//! one run as a self-contained HTML page (timelines, pairs and verdicts, totals), or as Chrome
//! JSON trace events for the Perfetto UI (issue 36). The page and the export are built by
//! `echo_analyzer::show`.

use echo_analyzer::analysis::explain;
use echo_analyzer::plan::parse_plan;
use echo_analyzer::show::{self, Inputs};
use echo_analyzer::trace::read_trace;
use echo_symbols::Symbolizer;
use std::path::{Path, PathBuf};

/// One run as a self-contained HTML page (or Perfetto's Chrome JSON trace events).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A trace written by the layer in profile mode
    pub trace: PathBuf,
    /// Mark the copies this plan elides (default: the plan `vkecho analyze` would make)
    #[arg(long, value_name = "PLAN")]
    pub plan: Option<PathBuf>,
    /// An enforce run's statistics (the `stats` setting's JSON): memory not allocated
    #[arg(long, value_name = "STATS")]
    pub stats: Option<PathBuf>,
    /// A benchmark result holding `recovered` fractions (`vkecho demo --json`)
    #[arg(long, value_name = "RESULT")]
    pub bench: Option<PathBuf>,
    /// html: one self-contained page; perfetto: Chrome JSON trace events (Perfetto UI,
    /// chrome://tracing)
    #[arg(long, value_name = "F", default_value = "html", value_parser = ["html", "perfetto", "chrome"])]
    pub format: String,
    /// Where to write it (default: TRACE with .html or .perfetto.json)
    #[arg(
        short = 'o',
        long = "output",
        visible_alias = "out",
        value_name = "OUT"
    )]
    pub out: Option<PathBuf>,
    /// Leave creation sites as module+offset
    #[arg(long)]
    pub no_symbolize: bool,
}

pub struct Opts {
    pub trace: PathBuf,
    pub plan: Option<PathBuf>,
    pub stats: Option<PathBuf>,
    pub bench: Option<PathBuf>,
    pub perfetto: bool,
    pub out: Option<PathBuf>,
    pub symbolize: bool,
}

pub fn main(a: &Args) -> i32 {
    let o = Opts {
        trace: a.trace.clone(),
        plan: a.plan.clone(),
        stats: a.stats.clone(),
        bench: a.bench.clone(),
        perfetto: a.format != "html",
        out: a.out.clone(),
        symbolize: !a.no_symbolize,
    };
    match write(&o) {
        Ok(p) => {
            let size = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
            println!(
                "vkecho show: wrote {} ({})",
                p.display(),
                echo_analyzer::words::human_bytes(size)
            );
            0
        }
        Err(e) => {
            eprintln!("vkecho show: {e}");
            1
        }
    }
}

fn recovered(v: &serde_json::Value, out: &mut Vec<(String, f64)>) {
    match v {
        serde_json::Value::Array(a) => a.iter().for_each(|x| recovered(x, out)),
        serde_json::Value::Object(o) => {
            if let Some(r) = o.get("recovered").and_then(|r| r.as_f64()) {
                let name = o
                    .get("sample")
                    .or(o.get("name"))
                    .and_then(|n| n.as_str())
                    .unwrap_or_default();
                out.push((name.to_string(), r));
            } else {
                o.values().for_each(|x| recovered(x, out));
            }
        }
        _ => {}
    }
}

/// Write the page (or the export) of one trace; returns its path.
pub fn write(o: &Opts) -> Result<PathBuf, String> {
    let mut rec = Vec::new();
    if let Some(p) = &o.bench {
        let text =
            std::fs::read_to_string(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
        let v: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))?;
        recovered(&v, &mut rec);
    }
    let body = render(
        &o.trace,
        o.plan.as_deref(),
        o.stats.as_deref(),
        rec,
        o.perfetto,
        o.symbolize,
    )?;
    let ext = if o.perfetto { "perfetto.json" } else { "html" };
    let out = o.out.clone().unwrap_or_else(|| o.trace.with_extension(ext));
    crate::files::write_private(&out, &body)?;
    Ok(out)
}

/// The page (or, with `perfetto`, the Chrome trace events) of a trace: its analysis, the
/// copies `plan` elides (default: the analysis's plan), an enforce run's `stats`, and
/// `recovered` fractions.
pub fn render(
    trace_path: &Path,
    plan_path: Option<&Path>,
    stats_path: Option<&Path>,
    recovered: Vec<(String, f64)>,
    perfetto: bool,
    symbolize: bool,
) -> Result<String, String> {
    let f = std::fs::File::open(trace_path)
        .map_err(|e| format!("cannot open {}: {e}", trace_path.display()))?;
    let trace = read_trace(std::io::BufReader::new(f))
        .map_err(|e| format!("{}: {e}", trace_path.display()))?;
    let t = trace.thresholds(None, None);
    let sym = if symbolize {
        Symbolizer::new(&trace.header.context.exe_path)
    } else {
        Symbolizer::disabled()
    };
    sym.prefetch(&trace);
    let analysis = explain(&trace, t, &|s| sym.site(s));
    let plan = match plan_path {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| format!("cannot read {}: {e}", p.display()))?;
            Some(parse_plan(&text).map_err(|e| format!("{}: {e}", p.display()))?)
        }
        None => None,
    };
    let stats = match stats_path {
        Some(p) => {
            let all = crate::run::read_stats(p)?;
            (!all.is_empty()).then(|| {
                let mut t = echo_analyzer::stats::Stats::total(&all);
                let mut status: Vec<&str> = all.iter().map(|s| s.plan_status.as_str()).collect();
                status.dedup();
                t.plan_status = status.join(", ");
                t
            })
        }
        None => None,
    };
    let inputs = Inputs {
        plan: plan
            .as_ref()
            .zip(plan_path)
            .map(|(p, path)| (p, path.display().to_string())),
        stats,
        recovered,
    };
    let view = show::view(&trace, &analysis, &trace_path.display().to_string(), inputs);
    Ok(if perfetto {
        show::perfetto::perfetto(&view)
    } else {
        show::html::html(&view)
    })
}

/// For `vkecho demo`: `OUT/NAME.html` of a sample's profile trace, with its plan, the enforce
/// run's statistics and the recovered fraction; returns its path, or the error in words (the
/// demo goes on either way).
pub fn demo_page(
    out: &Path,
    name: &str,
    trace: &Path,
    plan: &Path,
    stats: &Path,
    recovered: f64,
) -> String {
    let page = out.join(format!("{name}.html"));
    let stats = stats.is_file().then_some(stats);
    let rec = vec![(format!("{name}, this demo"), recovered)];
    match render(trace, Some(plan), stats, rec, false, true)
        .and_then(|html| crate::files::write_private(&page, &html))
    {
        Ok(()) => page.display().to_string(),
        Err(e) => format!("not written: {e}"),
    }
}

/// For `vkecho report`: the page of the newest trace auto mode's cache at `dir` still holds
/// (with its entry's plan), as `(file name, page, what it shows)`; `None` when the cache holds
/// no trace (they are deleted once their plan is made, unless `keep_traces`).
pub fn newest_cached_page(dir: &Path) -> Option<(String, Vec<u8>, String)> {
    let newest = echo_analyzer::cache::list(dir)
        .into_iter()
        .filter_map(|e| {
            let t = e.trace.clone()?;
            let when = std::fs::metadata(&t).and_then(|m| m.modified()).ok()?;
            Some((when, t, e.plan.clone(), e.name))
        })
        .max_by_key(|x| x.0)?;
    let (_, trace, plan, name) = newest;
    let page = render(&trace, plan.as_deref(), None, Vec::new(), false, true).ok()?;
    Some(("show.html".into(), page.into_bytes(), name))
}
