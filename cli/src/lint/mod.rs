//! `vkecho lint TRACE` / `vkecho lint -- CMD ARGS...` (issue 57): where a program copies memory
//! to itself on a unified-memory device, as compiler diagnostics for the program's authors — one
//! per creation site of a staging buffer in their own code, with what echo saw and the change
//! that removes the copy at the source; `--format sarif|json` for code-scanning services and
//! scripts, `--deny warnings` for a CI gate. docs/lint.md.
//!
//! Exit status: 0; 1 when `--deny warnings` is given and a diagnostic was printed; 2 when there
//! is nothing to lint (a missing or unreadable trace, a program that failed or wrote none).

mod diag;
mod sarif;
mod sites;

use crate::analyze::{bytes, copies};
use crate::launch::{self, LayerRun};
use echo_analyzer::analysis::explain;
use echo_analyzer::trace::{read_trace, Trace};
use echo_symbols::{Symbolizer, DEBUG_ROOT};
use std::io::{BufReader, Write};
use std::path::PathBuf;

/// How the diagnostics are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// `path:line:col: warning: …` and `note:` lines, as compilers print them
    Text,
    /// The diagnostics and their figures as one JSON document
    Json,
    /// SARIF 2.1.0 (code scanning), one result per site
    Sarif,
}

/// What makes the exit status non-zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Deny {
    /// Any diagnostic
    Warnings,
}

/// `vkecho lint [TRACE | -- CMD ARGS...]`.
#[derive(clap::Args)]
#[command(
    after_help = "Exit status: 0; 1 with --deny warnings when a diagnostic was printed; 2 \
when there was nothing to lint (a missing or unreadable trace, a program that failed or wrote no \
trace). docs/lint.md explains the diagnostics."
)]
pub struct Args {
    /// A trace written by the layer in profile mode (`vkecho profile --trace FILE`); `-` reads
    /// standard input
    #[arg(
        value_name = "TRACE",
        allow_hyphen_values = true,
        required_unless_present = "command",
        conflicts_with = "command"
    )]
    pub trace_in: Option<String>,
    /// Output format
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// `warnings`: exit with status 1 when any diagnostic is printed (for CI)
    #[arg(long, value_enum, value_name = "WHAT")]
    pub deny: Option<Deny>,
    /// Write the diagnostics there instead of standard output
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Treat frames whose source file or module contains TEXT as library code (vendored
    /// code, a third_party/ tree); repeatable
    #[arg(long, value_name = "TEXT")]
    pub library: Vec<String>,
    /// Split debug info by build-id under DIR/.build-id/ (default /usr/lib/debug)
    #[arg(long, value_name = "DIR")]
    pub debug_dir: Option<String>,
    /// Smallest copy that counts (default: the trace's setting, else 256K)
    #[arg(long, value_name = "N", value_parser = bytes)]
    pub min_bytes: Option<u64>,
    /// Fewest copies that make a pair (default: the trace's setting, else 2)
    #[arg(long, value_name = "K", value_parser = copies)]
    pub min_copies: Option<u64>,
    /// With `-- CMD`: keep the trace there (default: a new file in the temp dir)
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// The program to profile and its arguments, after `--`
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

fn fail(msg: &str) -> i32 {
    eprintln!("vkecho lint: {msg}");
    2
}

/// Read a trace file (`-`: standard input).
fn load(path: &str) -> Result<Trace, String> {
    let t = if path == "-" {
        read_trace(std::io::stdin().lock())
    } else {
        let f = std::fs::File::open(path).map_err(|e| format!("cannot open {path}: {e}"))?;
        read_trace(BufReader::new(f))
    };
    t.map_err(|e| format!("{path}: not a trace echo can read: {e}"))
}

/// Profile `argv` into `trace` (its output goes to standard error, so that standard output
/// holds the diagnostics only).
fn profile(argv: &[String], trace: &std::path::Path) -> Result<(), String> {
    let _ = std::fs::remove_file(trace);
    let run = LayerRun {
        mode: Some("profile"),
        settings: vec![("TRACE", trace.display().to_string())],
    };
    let mut cmd = launch::command(argv, &run)?;
    cmd.stdout(std::process::Stdio::from(std::io::stderr()));
    let status = cmd
        .status()
        .map_err(|e| format!("cannot run {}: {e}", argv[0]))?;
    if let Some(how) = launch::failure(status) {
        return Err(format!(
            "the program {how}; nothing to lint: fix the run first, or lint a trace of a run that worked"
        ));
    }
    if !trace.exists() {
        return Err(format!(
            "the program wrote no trace at {}: did it create a Vulkan device on a unified-memory GPU? (`vkecho doctor` says which devices echo acts on)",
            trace.display()
        ));
    }
    Ok(())
}

pub fn main(args: &Args) -> i32 {
    if args.trace.is_some() && args.command.is_empty() {
        return fail("--trace FILE is where a profiled run's trace is kept: give the program after `--`, or name an existing trace as TRACE");
    }
    let (path, trace) = if args.command.is_empty() {
        let p = args.trace_in.clone().unwrap_or_else(|| "-".into());
        match load(&p) {
            Ok(t) => (p, t),
            Err(e) => return fail(&e),
        }
    } else {
        let p = args
            .trace
            .clone()
            .unwrap_or_else(|| launch::temp_file("lint", "jsonl"));
        if let Err(e) = profile(&args.command, &p) {
            return fail(&e);
        }
        let s = p.display().to_string();
        match load(&s) {
            Ok(t) => (s, t),
            Err(e) => return fail(&e),
        }
    };
    if trace.truncated {
        eprintln!("vkecho lint: warning: {path} was truncated by the layer; linting what it holds");
    }
    let t = trace.thresholds(args.min_bytes, args.min_copies);
    let debug_root = args.debug_dir.clone().unwrap_or_else(|| DEBUG_ROOT.into());
    let sym = Symbolizer::new(&trace.header.context.exe_path).with_debug_root(&debug_root);
    sym.prefetch(&trace);
    let analysis = explain(&trace, t, &|s| sym.site(s));
    let view = echo_analyzer::show::view(&trace, &analysis, &path, Default::default());
    let cls = sites::Classifier::new(&trace.header.context.exe_path, &args.library);
    let inputs = diag::Inputs {
        trace: &trace,
        analysis: &analysis,
        sym: &sym,
        cls: &cls,
        view: view.timed.then_some(&view),
        debug_root,
    };
    let (diags, below) = diag::build(&inputs);
    let text = match args.format {
        Format::Text => diag::text(&diags),
        Format::Json => {
            let v = serde_json::json!({
                "trace": path,
                "executable": trace.header.context.exe_path,
                "device": trace.header.context.device_name,
                "thresholds": {"min_copies": t.min_copies, "min_bytes": t.min_bytes},
                "below_thresholds": below,
                "diagnostics": diags,
            });
            serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"
        }
        Format::Sarif => match serde_json::to_string_pretty(&sarif::log(&diags)) {
            Ok(s) => s + "\n",
            Err(e) => return fail(&format!("cannot write SARIF: {e}")),
        },
    };
    let written = match &args.out {
        Some(p) => {
            std::fs::write(p, &text).map_err(|e| format!("cannot write {}: {e}", p.display()))
        }
        None => std::io::stdout()
            .lock()
            .write_all(text.as_bytes())
            .map_err(|e| format!("cannot write the diagnostics: {e}")),
    };
    if let Err(e) = written {
        return fail(&e);
    }
    let n = diags.len();
    eprintln!(
        "vkecho lint: {} in {path}{}",
        match n {
            0 => "no self-copies found".to_string(),
            1 => "1 warning".to_string(),
            n => format!("{n} warnings"),
        },
        if below > 0 {
            format!(
                "; {below} more pair{} below the thresholds ({}) not reported (--min-bytes, --min-copies)",
                if below == 1 { "" } else { "s" },
                echo_analyzer::words::copies_of(t.min_copies, t.min_bytes)
            )
        } else {
            String::new()
        }
    );
    if args.deny.is_some() && n > 0 {
        1
    } else {
        0
    }
}
