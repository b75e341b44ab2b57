//! `vkecho analyze TRACE [-o PLAN] [--json]`: turn a profile trace into a plan, with every
//! decision explained.

use echo_analyzer::analysis::explain;
use echo_analyzer::report;
use echo_analyzer::settings::parse_u64;
use echo_analyzer::trace::read_trace;
use echo_symbols::Symbolizer;
use std::io::{BufReader, Write};

/// `vkecho analyze TRACE [-o PLAN] [--json] [--min-bytes N] [--min-copies K] [--no-symbolize]`.
#[derive(clap::Args)]
pub struct Args {
    /// A trace written by the layer in profile mode (JSON Lines); `-` reads standard input
    #[arg(value_name = "TRACE", allow_hyphen_values = true)]
    pub trace: String,
    /// Write the plan there (file mode 0600)
    #[arg(short = 'o', long = "output", value_name = "PLAN")]
    pub out: Option<String>,
    /// Print the analysis as JSON instead of a table
    #[arg(long)]
    pub json: bool,
    /// Smallest copy that counts (default: the trace's setting, else 256K)
    #[arg(long, value_name = "N", value_parser = bytes)]
    pub min_bytes: Option<u64>,
    /// Fewest copies that make a pair (default: the trace's setting, else 2)
    #[arg(long, value_name = "K", value_parser = copies)]
    pub min_copies: Option<u64>,
    /// Print creation sites as module+0xoffset (read no symbols)
    #[arg(long)]
    pub no_symbolize: bool,
    /// Split debug info by build-id under DIR/.build-id/ (default /usr/lib/debug)
    #[arg(long, value_name = "DIR")]
    pub debug_dir: Option<String>,
}

/// A byte count for clap (`256K`, `1M`); `vkecho lint` takes its thresholds the same way.
pub(crate) fn bytes(v: &str) -> Result<u64, String> {
    parse_u64(v).ok_or(format!("needs a number (256K, 1M, ...), got '{v}'"))
}

/// A copy count ≥ 1 for clap.
pub(crate) fn copies(v: &str) -> Result<u64, String> {
    parse_u64(v)
        .filter(|&k| k >= 1)
        .ok_or(format!("needs a count >= 1, got '{v}'"))
}

fn fail(msg: &str) -> i32 {
    eprintln!("vkecho analyze: {msg}");
    1
}

pub fn main(args: &Args) -> i32 {
    let trace_path = args.trace.as_str();
    let out = args.out.as_deref();
    let as_json = args.json;
    let symbolize = !args.no_symbolize;
    let (min_bytes, min_copies) = (args.min_bytes, args.min_copies);
    let debug_dir = args.debug_dir.as_deref();
    let trace = if trace_path == "-" {
        read_trace(std::io::stdin().lock())
    } else {
        match std::fs::File::open(trace_path) {
            Ok(f) => read_trace(BufReader::new(f)),
            Err(e) => return fail(&format!("cannot open {trace_path}: {e}")),
        }
    };
    let trace = match trace {
        Ok(t) => t,
        Err(e) => return fail(&format!("{trace_path}: {e}")),
    };
    // Thresholds: the command line, else what the trace was recorded with, else the defaults.
    let t = trace.thresholds(min_bytes, min_copies);
    let sym = if symbolize {
        let s = Symbolizer::new(&trace.header.context.exe_path);
        match debug_dir {
            Some(d) => s.with_debug_root(d),
            None => s,
        }
    } else {
        Symbolizer::disabled()
    };
    sym.prefetch(&trace);
    let analysis = explain(&trace, t, &|s| sym.site(s));
    if trace.truncated {
        eprintln!(
            "vkecho analyze: warning: {trace_path} was truncated by the layer; analyzing what it holds"
        );
    }
    // Issue 47: where an iteration's time went in the profiled run, each group's copies.
    let timing =
        echo_analyzer::show::view(&trace, &analysis, trace_path, Default::default()).breakdown;
    let text = if as_json {
        let mut v: serde_json::Value =
            serde_json::from_str(&report::json(&analysis)).unwrap_or_default();
        if let (Some(b), Some(o)) = (&timing, v.as_object_mut()) {
            o.insert(
                "iteration_time".into(),
                serde_json::to_value(b).unwrap_or_default(),
            );
        }
        serde_json::to_string_pretty(&v).unwrap_or_else(|_| report::json(&analysis))
    } else {
        let mut t = report::table(&analysis, trace_path);
        if let Some(b) = &timing {
            t.push_str(
                "\ntime (from the trace's clock; GPU timestamps where the device gave them):\n",
            );
            for l in b.lines() {
                t.push_str(&format!("  {l}\n"));
            }
        }
        if let Some(hint) = sym.hint() {
            t.push_str(&format!("\nnote: {hint}\n"));
        }
        t
    };
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    if as_json {
        let _ = stdout.write_all(b"\n");
    }
    if let Some(path) = out {
        if let Err(e) = write_private(path, analysis.plan.to_json().as_bytes()) {
            return fail(&format!("cannot write plan {path}: {e}"));
        }
        if !as_json {
            eprintln!(
                "vkecho analyze: plan written to {path} ({} group{}, {} rejected)",
                analysis.plan.groups.len(),
                if analysis.plan.groups.len() == 1 {
                    ""
                } else {
                    "s"
                },
                analysis.plan.rejected.len()
            );
        }
    }
    0
}

/// Write a file readable by its owner only (plans name executables and their buffers).
fn write_private(path: &str, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    // An existing file keeps its mode on open: set it.
    f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    f.write_all(bytes)?;
    f.write_all(b"\n")?;
    f.sync_all()
}
