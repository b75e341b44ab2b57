//! The run as Chrome JSON trace events (`{"traceEvents":[...]}`), which the Perfetto UI and
//! `chrome://tracing` open: a process "GPU" with a thread (track) per queue (a track per row
//! where submissions on one queue overlap), a process "host" with a track per host thread (its
//! waits as spans, its completion observations as instants) and per staging buffer the host
//! touched (its accesses), `X` spans for submissions and their commands, `i` instants, `M`
//! names.
//!
//! Timestamps are real microseconds since the trace began (issue 47): the host's clock, GPU
//! timestamps where the layer took them (see `crate::timing`). A trace recorded before issue 47
//! has no times: its events are placed at their sequence numbers read as microseconds, and the
//! process name says so.

use super::RunView;
use serde_json::{json, Value};

const GPU: u64 = 1;
const HOST: u64 = 2;

/// The Chrome JSON trace of a view.
pub fn perfetto(v: &RunView) -> String {
    let timed = v.timed;
    let mut ev: Vec<Value> = Vec::new();
    let suffix = if timed {
        String::new()
    } else {
        " (no times in this trace: x axis is the event sequence, 1 µs = 1 event)".to_string()
    };
    ev.push(
        json!({"ph": "M", "pid": GPU, "tid": 0, "name": "process_name",
        "args": {"name": format!("GPU: {}{suffix}", v.exe)}}),
    );
    ev.push(
        json!({"ph": "M", "pid": HOST, "tid": 0, "name": "process_name",
        "args": {"name": format!("host: {}{suffix}", v.exe)}}),
    );
    ev.push(json!({"ph": "M", "pid": GPU, "tid": 0, "name": "process_sort_index", "args": {"sort_index": 1}}));
    ev.push(json!({"ph": "M", "pid": HOST, "tid": 0, "name": "process_sort_index", "args": {"sort_index": 0}}));
    // A track per lane row: tid = 1 + 16 * lane + row, in the GPU process for queues.
    let pid = |lane: u32| {
        if v.lanes
            .get(lane as usize)
            .is_some_and(|l| l.kind == "queue")
        {
            GPU
        } else {
            HOST
        }
    };
    let tid = |lane: u32, row: u32| 1 + 16 * lane as u64 + row.min(15) as u64;
    for (i, l) in v.lanes.iter().enumerate() {
        for r in 0..l.rows.clamp(1, 16) {
            let name = if l.rows > 1 {
                format!("{} (row {})", l.name, r + 1)
            } else {
                l.name.clone()
            };
            let (p, t) = (pid(i as u32), tid(i as u32, r));
            ev.push(json!({"ph": "M", "pid": p, "tid": t, "name": "thread_name", "args": {"name": name}}));
            ev.push(json!({"ph": "M", "pid": p, "tid": t, "name": "thread_sort_index", "args": {"sort_index": t}}));
        }
    }
    let us = |ns: f64| (ns / 1e3 * 1e3).round() / 1e3;
    for s in &v.spans {
        let (ts, dur) = if timed {
            let (Some(a), Some(b)) = (s.t0, s.t1) else {
                continue;
            };
            (us(a), us(b - a).max(0.0))
        } else {
            (s.start, (s.end - s.start).max(0.0))
        };
        let cat = match s.kind.as_str() {
            "submit" => "submission",
            "copy" | "elided" => "copy",
            "dispatch" | "draw" | "use" => "command",
            "wait" => "wait",
            _ => "host",
        };
        let name = match s.kind.as_str() {
            "submit" => "submission".to_string(),
            "elided" => "copy (elided)".into(),
            "copy" => "copy (kept)".into(),
            "wait" => "host wait".into(),
            "read" | "write" | "readwrite" => format!("host {}", s.kind),
            _ => s.label.split(' ').next().unwrap_or("command").to_string(),
        };
        let mut args =
            json!({"detail": s.label, "event": s.seq, "count": s.count, "bytes": s.bytes});
        if !s.timing.is_empty() {
            args["timing"] = json!(match s.timing.as_str() {
                "gpu" => "measured on the GPU (calibrated timestamps)",
                "gpu-aligned" => "measured on the GPU, placed by the host's observations",
                "host" => "spanned by the host's observations",
                _ => "not measured: a share of its submission's time",
            });
        }
        ev.push(json!({
            "ph": "X", "pid": pid(s.lane), "tid": tid(s.lane, s.row), "cat": cat, "name": name,
            "ts": ts, "dur": dur, "args": args,
        }));
    }
    for m in &v.marks {
        let ts = if timed {
            match m.t {
                Some(t) => us(t),
                None => continue,
            }
        } else {
            m.seq as f64
        };
        ev.push(json!({
            "ph": "i", "s": "t", "pid": pid(m.lane), "tid": tid(m.lane, 0), "cat": m.kind,
            "name": m.label, "ts": ts,
        }));
    }
    let mut other = json!({
        "source": v.source,
        "x_axis": if timed {
            "microseconds since the trace began (host CLOCK_MONOTONIC; GPU timestamps where taken)"
        } else {
            "trace event sequence (seq), not time: this trace holds no times"
        },
        "elided_per_run_bytes": v.totals.elided_bytes,
        "elided_per_iteration_bytes": v.totals.elided_bytes_per_iter,
    });
    if let Some(b) = &v.breakdown {
        other["iteration_breakdown"] = serde_json::to_value(b).unwrap_or(Value::Null);
    }
    serde_json::to_string(&json!({
        "traceEvents": ev,
        "displayTimeUnit": "ms",
        "otherData": other,
    }))
    .expect("trace events serialize")
}
