//! `vkecho profile [--trace FILE] [--no-validate] -- CMD ARGS...`: run CMD with this build's layer
//! in profile mode, then summarize the trace it wrote: events, buffers, candidate pairs, host
//! accesses inside GPU-use windows. The exit status is the program's, 128+N when signal N killed it
//! (as a shell reports it).

use crate::launch::{self, LayerRun};
use echo_analyzer::analysis::{explain, plain_site, Decision};
use echo_analyzer::model::{Model, Step};
use echo_analyzer::trace::{read_trace, Access, Trace};
use std::collections::BTreeSet;
use std::io::BufReader;
use std::path::PathBuf;

/// `vkecho profile [--trace FILE] [--no-validate] -- CMD ARGS...`.
#[derive(clap::Args)]
#[command(
    long_about = "Runs CMD with the layer in profile mode (the loader is pointed at this \
build's layer, installed or not), then prints a summary of the trace. Exit status: CMD's (128+N \
when signal N killed it)."
)]
pub struct Args {
    /// Where the layer writes the trace (default: a new file in the temp dir)
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Record the trace only (no page-protection validation of host access)
    #[arg(long)]
    pub no_validate: bool,
    /// The program and its arguments, after `--`
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// Host accesses inside GPU-use windows (DESIGN §4, S2): the host touched buffer `b` while a
/// submission that uses `b`, or a buffer `b` exchanges copies with, was in flight (submitted,
/// not yet observed complete). Returns `(access seq, buffer number, access, submission seq)`.
pub fn host_accesses_in_windows(m: &Model) -> Vec<(u64, usize, Access, u64)> {
    use echo_analyzer::model::OpKind;
    // Copy partners of every buffer.
    let mut partners: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); m.buffers.len()];
    for rec in &m.recordings {
        for op in rec {
            if let OpKind::Copy { src, dst, .. } = &op.kind {
                partners[*src].insert(*dst);
                partners[*dst].insert(*src);
            }
        }
    }
    let mut steps: Vec<&(u64, Step)> = m.timeline.iter().collect();
    steps.sort_by_key(|(s, _)| *s);
    let mut in_flight: BTreeSet<usize> = BTreeSet::new();
    let mut out = Vec::new();
    for (seq, step) in steps {
        match step {
            Step::Submit(s) => {
                in_flight.insert(*s);
            }
            Step::Complete(s) => {
                in_flight.remove(s);
            }
            Step::Host { buffer, access } => {
                let uses = |s: &usize| {
                    m.touched.get(*s).is_some_and(|t| {
                        t.contains(buffer) || partners[*buffer].iter().any(|p| t.contains(p))
                    })
                };
                if let Some(s) = in_flight.iter().find(|s| uses(s)) {
                    out.push((
                        *seq,
                        m.buffers[*buffer].number,
                        *access,
                        m.submissions[*s].seq,
                    ));
                }
            }
        }
    }
    out
}

/// The summary lines for a trace.
pub fn summary(trace: &Trace, path: &std::path::Path) -> String {
    let m = Model::build(trace);
    let t = trace.thresholds(None, None);
    let a = explain(trace, t, &plain_site);
    let accepted = a
        .candidates
        .iter()
        .filter(|c| matches!(c.decision, Decision::Accepted { .. }))
        .count();
    let host = m
        .timeline
        .iter()
        .filter(|(_, s)| matches!(s, Step::Host { .. }))
        .count();
    let inside = host_accesses_in_windows(&m);
    let mut s = String::new();
    s.push_str(&format!("events: {}\n", trace.records.len()));
    s.push_str(&format!(
        "buffers: {} ({} memory allocations, {} submissions)\n",
        m.buffers.len(),
        m.memories.len(),
        m.submissions.len()
    ));
    s.push_str(&format!(
        "candidate pairs: {} ({} accepted, {} rejected)\n",
        a.candidates.len(),
        accepted,
        a.candidates.len() - accepted
    ));
    for c in &a.candidates {
        let what = match &c.decision {
            Decision::Accepted { direction, .. } => format!("accepted ({direction:?})"),
            Decision::Rejected { condition, .. } => format!("rejected: {}", condition.as_str()),
        };
        s.push_str(&format!(
            "  staging #{} ↔ device #{}: {} copies, {} bytes: {what}\n",
            c.staging.number, c.device.number, c.copies, c.bytes
        ));
    }
    s.push_str(&format!(
        "host accesses recorded: {host}; inside GPU-use windows: {}\n",
        inside.len()
    ));
    for (seq, b, acc, sub) in inside.iter().take(5) {
        s.push_str(&format!(
            "  event {seq}: host {} buffer #{b} while submission {sub} was in flight\n",
            match acc {
                Access::Read => "read",
                Access::Write => "wrote",
                Access::ReadWrite => "read and wrote",
            }
        ));
    }
    if trace.truncated {
        s.push_str("trace was truncated at trace_max_bytes\n");
    }
    s.push_str(&format!("trace: {}\n", path.display()));
    s
}

pub fn main(args: &Args) -> i32 {
    let argv = &args.command;
    let trace = args
        .trace
        .clone()
        .unwrap_or_else(|| launch::temp_file("trace", "jsonl"));
    let _ = std::fs::remove_file(&trace);
    let mut settings = vec![("TRACE", trace.display().to_string())];
    if args.no_validate {
        settings.push(("VALIDATE", "false".into()));
    }
    let run = LayerRun {
        mode: Some("profile"),
        settings,
    };
    let mut cmd = match launch::command(argv, &run) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("vkecho profile: {e}");
            return 1;
        }
    };
    let status = match cmd.status() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("vkecho profile: cannot run {}: {e}", argv[0]);
            return 127;
        }
    };
    let code = launch::exit_code(status);
    let failed = launch::failure(status);
    match std::fs::File::open(&trace) {
        Ok(f) => match read_trace(BufReader::new(f)) {
            Ok(t) => eprint!("vkecho profile:\n{}", summary(&t, &trace)),
            Err(e) => eprintln!("vkecho profile: {}: {e}", trace.display()),
        },
        // Only a program that ran to its end says anything about the layer or the device.
        Err(e) => match &failed {
            Some(how) => eprintln!(
                "vkecho profile: no trace at {} ({e}): the program {how} before the layer wrote one",
                trace.display()
            ),
            None => eprintln!(
                "vkecho profile: no trace at {} ({e}); did the program create a Vulkan device on a unified-memory GPU?",
                trace.display()
            ),
        },
    }
    if let Some(how) = &failed {
        eprintln!("vkecho profile: the program {how}; exit status {code}");
    }
    code
}
