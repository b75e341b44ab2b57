//! The run as Chrome JSON trace events (`{"traceEvents":[...]}`), which the Perfetto UI and
//! `chrome://tracing` open: one process, a thread per queue (a thread per row where submissions
//! on one queue overlap) and per host lane, `X` spans for submissions, their commands and host
//! accesses, `i` instants for the host's waits and observations, `M` names. Timestamps are the
//! trace's event sequence numbers read as microseconds: there are no GPU timestamps.

use super::RunView;
use serde_json::{json, Value};

/// The Chrome JSON trace of a view.
pub fn perfetto(v: &RunView) -> String {
    let mut ev: Vec<Value> = Vec::new();
    let pid = 1;
    ev.push(json!({"ph": "M", "pid": pid, "tid": 0, "name": "process_name",
        "args": {"name": format!("vkecho show: {} (x axis: event sequence, 1 µs = 1 event)", v.exe)}}));
    // A thread per lane row: tid = 1 + 16 * lane + row.
    let tid = |lane: u32, row: u32| 1 + 16 * lane as u64 + row.min(15) as u64;
    for (i, l) in v.lanes.iter().enumerate() {
        for r in 0..l.rows.clamp(1, 16) {
            let name = if l.rows > 1 {
                format!("{} (row {})", l.name, r + 1)
            } else {
                l.name.clone()
            };
            let t = tid(i as u32, r);
            ev.push(json!({"ph": "M", "pid": pid, "tid": t, "name": "thread_name", "args": {"name": name}}));
            ev.push(json!({"ph": "M", "pid": pid, "tid": t, "name": "thread_sort_index", "args": {"sort_index": t}}));
        }
    }
    for s in &v.spans {
        let cat = match s.kind.as_str() {
            "submit" => "submission",
            "copy" | "elided" => "copy",
            "dispatch" | "draw" | "use" => "command",
            _ => "host",
        };
        let name = match s.kind.as_str() {
            "submit" => "submission".to_string(),
            "elided" => "copy (elided)".into(),
            "copy" => "copy (kept)".into(),
            "read" | "write" | "readwrite" => format!("host {}", s.kind),
            _ => s.label.split(' ').next().unwrap_or("command").to_string(),
        };
        ev.push(json!({
            "ph": "X", "pid": pid, "tid": tid(s.lane, s.row), "cat": cat, "name": name,
            "ts": s.start, "dur": (s.end - s.start).max(0.0),
            "args": {"detail": s.label, "event": s.seq, "count": s.count, "bytes": s.bytes},
        }));
    }
    for m in &v.marks {
        ev.push(json!({
            "ph": "i", "s": "t", "pid": pid, "tid": tid(m.lane, 0), "cat": m.kind,
            "name": m.label, "ts": m.seq,
        }));
    }
    serde_json::to_string(&json!({
        "traceEvents": ev,
        "displayTimeUnit": "ns",
        "otherData": {
            "source": v.source,
            "x_axis": "trace event sequence (seq), not time: traces hold no GPU timestamps",
            "elided_per_run_bytes": v.totals.elided_bytes,
            "elided_per_iteration_bytes": v.totals.elided_bytes_per_iter,
        }
    }))
    .expect("trace events serialize")
}
