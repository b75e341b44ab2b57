//! `vkecho show`: one run as people look at it (issue 36) — a timeline per queue of GPU
//! submissions (their copies kept and elided, dispatches and draws), the host's waits and its
//! accesses to staging memory, every candidate pair with its verdict in the words of
//! `vkecho analyze`, and the totals. [`view`] builds the data from the analyzer's own model
//! ([`crate::model::Model`]: submissions and their completion) and analysis; [`html`] writes it
//! as one self-contained page, [`perfetto`] as Chrome JSON trace events.
//!
//! Two axes (issue 47). **Time**: every span and mark also carries host time (`t0`/`t1`, `t`;
//! nanoseconds since the trace began, [`crate::timing`]): a submission spans its GPU
//! timestamps where the layer took them, else from its `QueueSubmit` to the host's first
//! observation of its completion (`timing` says which); a copy with GPU timestamps spans them,
//! the other commands of a submission share the time between; a host wait spans the call.
//! **Event order** (every trace, the only axis of traces recorded before issue 47): the x axis
//! is the trace's event sequence (`seq`); a submission spans from its `QueueSubmit` to its
//! observed completion, its commands share that span in execution order. [`time::breakdown`]
//! says where one steady iteration's time goes.

pub mod html;
pub mod perfetto;
pub mod time;

use crate::analysis::{Analysis, CandidateRow, Decision};
use crate::model::{BufId, Model, OpKind, Step};
use crate::plan::{Direction, Plan};
use crate::report::{self, human_bytes, usage_names};
use crate::stats::Stats;
use crate::trace::{Event, Trace, UseKind};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// A row of the timeline: one queue of one device, the host's waits, or the host's accesses to
/// one staging buffer.
#[derive(Clone, Debug, Serialize)]
pub struct Lane {
    pub name: String,
    /// `queue`, `host` (waits) or `staging` (host accesses to one buffer).
    pub kind: String,
    /// Rows the lane needs (submissions on one queue that overlap in the model stack).
    pub rows: u32,
}

/// Something with a start and an end on the timeline.
#[derive(Clone, Debug, Serialize)]
pub struct Span {
    pub lane: u32,
    pub row: u32,
    pub start: f64,
    pub end: f64,
    /// `submit`, `copy` (kept), `elided`, `dispatch`, `draw`, `use` (other commands),
    /// `write`, `read`, `readwrite` (host accesses).
    pub kind: String,
    pub label: String,
    /// The record behind it (`seq`): the `QueueSubmit` of a submission and its commands, the
    /// `HostAccess` of a host access.
    pub seq: u64,
    /// Consecutive identical spans merged into this one.
    #[serde(skip_serializing_if = "is_one")]
    pub count: u64,
    /// Bytes moved (copies).
    #[serde(skip_serializing_if = "is_zero")]
    pub bytes: u64,
    /// The staging buffer a host access touched (its number, `#n`); 0 for other spans.
    #[serde(skip_serializing_if = "is_zero_usize")]
    pub buffer: usize,
    /// Host time (ns since the trace began) of its start and end: absent in traces without
    /// time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub t0: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub t1: Option<f64>,
    /// How a submission's or command's time was found (`gpu`, `gpu-aligned`, `host`:
    /// [`crate::timing::Source`]); empty for the host's own spans.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub timing: String,
}

fn is_zero_usize(n: &usize) -> bool {
    *n == 0
}

fn is_one(n: &u64) -> bool {
    *n == 1
}
fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// An instant: a fence, semaphore or idle observation by the host, a submission's semaphore
/// wait, or the event that decided a candidate pair.
#[derive(Clone, Debug, Serialize)]
pub struct Mark {
    pub lane: u32,
    pub seq: u64,
    /// Host time of the record (ns since the trace began), where the trace has times.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub t: Option<f64>,
    /// `fence`, `idle`, `semaphore` (host observed a value), `wait` (a submission waits on a
    /// semaphore), `signal` (the host signaled one), `decided`.
    pub kind: String,
    pub label: String,
}

/// One candidate pair as the page lists it: the row of `vkecho analyze`.
#[derive(Clone, Debug, Serialize)]
pub struct Pair {
    /// 1-based, as `vkecho analyze` numbers its rows.
    pub number: usize,
    pub device_index: u32,
    pub staging: String,
    pub device: String,
    pub role: String,
    pub copies_per_iter: String,
    pub bytes_per_iter: String,
    /// `accepted: group 0, staging into device` / `rejected: S2 at event 71`.
    pub decision: String,
    pub accepted: bool,
    pub condition: String,
    /// The plain sentence (rejections), else the decision.
    pub headline: String,
    /// What `vkecho analyze` prints under "why rejected" for this pair (empty when accepted).
    pub why: String,
    pub event: Option<u64>,
    pub staging_site: String,
    pub device_site: String,
}

/// The figures the page sums up.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Totals {
    pub copies: u64,
    pub copy_bytes: u64,
    pub elided_copies: u64,
    pub elided_bytes: u64,
    pub elided_bytes_per_iter: u64,
    pub elided_copies_per_iter: u64,
    /// The plan's groups: bytes saved per iteration, summed.
    pub plan_bytes_per_iter: u64,
    pub groups: usize,
    /// From the enforce run's statistics, when given.
    pub stats: Option<Stats>,
    /// From a benchmark result, when given: `(what, recovered fraction)`.
    pub recovered: Vec<(String, f64)>,
}

/// Everything the page and the Perfetto export show.
#[derive(Clone, Debug, Serialize)]
pub struct RunView {
    pub source: String,
    pub exe: String,
    pub device_name: String,
    pub last_seq: u64,
    pub lanes: Vec<Lane>,
    pub spans: Vec<Span>,
    pub marks: Vec<Mark>,
    /// One steady iteration: `[from, to]` in seq, when the run repeats.
    pub iteration: Option<(u64, u64)>,
    /// The axis: seq `s` of a `QueueSubmit` is followed by `extra` more units, so that its
    /// commands have room ([`RunView::pos`]). Span positions are on this axis; marks and
    /// labels name seqs.
    pub stretch: Vec<(u64, f64)>,
    /// Where elided copies come from: `the plan P` or `the analysis of this trace`.
    pub plan_source: String,
    /// The trace has host times: the page opens on the time axis.
    pub timed: bool,
    /// The host time of the trace's last record (ns).
    pub last_t: f64,
    /// The steady iteration in host time (ns), when the run repeats and has times.
    pub iteration_t: Option<(f64, f64)>,
    /// Where that iteration's time goes.
    pub breakdown: Option<time::Breakdown>,
    /// What the timing facts were taken from (not for the page's data).
    #[serde(skip)]
    pub facts: time::Facts,
    pub pairs: Vec<Pair>,
    pub totals: Totals,
    pub notes: Vec<String>,
}

/// What `vkecho show` was given besides the trace.
#[derive(Default)]
pub struct Inputs<'a> {
    /// The plan whose groups say which copies are elided; `None`: the analysis's plan.
    pub plan: Option<(&'a Plan, String)>,
    pub stats: Option<Stats>,
    pub recovered: Vec<(String, f64)>,
}

/// The decision words of `vkecho analyze`'s table for one row.
pub fn decision_words(c: &CandidateRow) -> String {
    report::decision(c)
}

/// Build the view of a trace and its analysis.
pub fn view(trace: &Trace, a: &Analysis, source: &str, inputs: Inputs) -> RunView {
    let plan = inputs.plan.as_ref().map(|p| p.0).unwrap_or(&a.plan);
    let mut v = RunView {
        source: source.into(),
        exe: trace.header.context.exe_path.clone(),
        device_name: trace.header.context.device_name.clone(),
        last_seq: 0,
        lanes: Vec::new(),
        spans: Vec::new(),
        marks: Vec::new(),
        iteration: None,
        stretch: Vec::new(),
        plan_source: match &inputs.plan {
            Some((_, p)) => format!("the plan {p}"),
            None => "the analysis of this trace (no --plan given)".into(),
        },
        timed: false,
        last_t: 0.0,
        iteration_t: None,
        breakdown: None,
        facts: time::Facts::default(),
        pairs: Vec::new(),
        totals: Totals {
            copies: a.copies.copies,
            copy_bytes: a.copies.bytes,
            plan_bytes_per_iter: plan.groups.iter().map(|g| g.bytes_saved_per_iter).sum(),
            groups: plan.groups.len(),
            stats: inputs.stats,
            recovered: inputs.recovered,
            ..Default::default()
        },
        notes: Vec::new(),
    };
    let devices = crate::analysis::device_indices(trace);
    let multi = devices.len() > 1;
    let mut best_iteration: Option<(usize, (u64, u64))> = None;
    for &d in &devices {
        let sub;
        let t = if multi {
            sub = trace.for_device(d);
            &sub
        } else {
            trace
        };
        let m = Model::build(t);
        let tm = crate::timing::Timing::build(t, &m);
        v.last_seq = v.last_seq.max(m.last_seq);
        v.timed = tm.timed && (v.timed || d == devices[0]);
        v.last_t = v.last_t.max(tm.last_t as f64);
        v.notes.extend(tm.notes.iter().cloned());
        let it = device_lanes(&mut v, t, &m, &tm, d, multi, plan, a);
        v.facts.absorb(tm);
        if let Some((n, range)) = it {
            if best_iteration.is_none_or(|(b, _)| n > b) {
                best_iteration = Some((n, range));
            }
        }
    }
    v.iteration = best_iteration.map(|(_, r)| r);
    if !v.timed {
        // A trace without times (recorded before issue 47), or a device without them: event
        // order only.
        for s in &mut v.spans {
            (s.t0, s.t1) = (None, None);
        }
        for m in &mut v.marks {
            m.t = None;
        }
    } else if let Some((lo, hi)) = v.iteration {
        v.iteration_t = v.facts.at(lo).zip(v.facts.at(hi));
        let groups: Vec<(u32, u32)> = plan.groups.iter().map(|g| (g.id, g.device_index)).collect();
        v.breakdown = time::breakdown(&v.facts, &groups, (lo, hi));
    }
    v.thin(MAX_SPANS);
    v.widen_submissions();
    if let Some((lo, hi)) = v.iteration {
        let inside = v
            .spans
            .iter()
            .filter(|s| s.kind == "elided" && s.seq > lo && s.seq <= hi);
        for s in inside {
            v.totals.elided_copies_per_iter += s.count;
            v.totals.elided_bytes_per_iter += s.bytes;
        }
    }
    for (i, c) in a.candidates.iter().enumerate() {
        v.pairs.push(pair(i + 1, c));
        if let Decision::Rejected {
            event: Some(e),
            condition,
            ..
        } = &c.decision
        {
            v.marks.push(Mark {
                lane: 0,
                seq: *e,
                t: v.facts.at(*e),
                kind: "decided".into(),
                label: format!("pair {}: {}", i + 1, condition.as_str()),
            });
        }
    }
    if trace.truncated {
        v.notes
            .push("the trace was truncated by the layer: the timeline ends at the cut".into());
    }
    v
}

fn pair(number: usize, c: &CandidateRow) -> Pair {
    let desc = |b: &crate::analysis::BufferDesc| {
        format!(
            "#{} {} {}",
            b.number,
            human_bytes(b.size),
            usage_names(b.usage)
        )
    };
    let (accepted, condition, headline, event) = match &c.decision {
        Decision::Accepted { .. } => (true, String::new(), decision_words(c), None),
        Decision::Rejected {
            condition,
            event,
            message,
            plain,
            ..
        } => (
            false,
            condition.as_str().to_string(),
            if plain.is_empty() {
                message.clone()
            } else {
                plain.clone()
            },
            *event,
        ),
    };
    let site = |s: &str| {
        if s.is_empty() {
            "an unknown place".to_string()
        } else {
            s.to_string()
        }
    };
    Pair {
        number,
        device_index: c.device_index,
        staging: desc(&c.staging),
        device: desc(&c.device),
        role: report::role_words(c.role).into(),
        copies_per_iter: format!("{:.1} ({} in all)", c.copies_per_iter, c.copies),
        bytes_per_iter: human_bytes(c.bytes_per_iter),
        decision: decision_words(c),
        accepted,
        condition,
        headline,
        why: report::rejection(number, c),
        event,
        staging_site: site(&c.staging.created_at),
        device_site: site(&c.device.created_at),
    }
}

/// The groups of `plan` on device `d` as model buffers: `(staging, device) → (delta, direction,
/// group index)`.
fn elided_pairs(
    m: &Model,
    plan: &Plan,
    d: u32,
) -> HashMap<(BufId, BufId), (i64, Direction, usize)> {
    let mut by_key: HashMap<&crate::trace::ObjectKey, Vec<BufId>> = HashMap::new();
    for (i, b) in m.buffers.iter().enumerate() {
        by_key.entry(&b.key).or_default().push(i);
    }
    let mut out = HashMap::new();
    for (gi, g) in plan
        .groups
        .iter()
        .enumerate()
        .filter(|(_, g)| g.device_index == d)
    {
        let Some(devs) = by_key.get(&g.device.key) else {
            continue;
        };
        for mem in &g.members {
            let Some(stags) = by_key.get(&mem.staging.key) else {
                continue;
            };
            for &s in stags {
                for &dv in devs {
                    out.insert((s, dv), (mem.delta, g.direction, gi));
                }
            }
        }
    }
    out
}

/// Whether a copy between a planned pair is a self-copy once they share memory (byte `i` of the
/// device buffer is byte `i + delta` of the staging buffer): what enforce drops.
#[cfg(test)]
fn is_self_copy(
    pairs: &HashMap<(BufId, BufId), (i64, Direction, usize)>,
    src: BufId,
    dst: BufId,
    regions: &[crate::trace::CopyRegion],
) -> bool {
    elided_by(pairs, src, dst, regions).is_some()
}

/// The group (index into the plan's groups) whose sharing makes this copy a self-copy, if any.
fn elided_by(
    pairs: &HashMap<(BufId, BufId), (i64, Direction, usize)>,
    src: BufId,
    dst: BufId,
    regions: &[crate::trace::CopyRegion],
) -> Option<usize> {
    let (delta, staging_is_src, group) = if let Some(&(d, _, g)) = pairs.get(&(src, dst)) {
        (d, true, g)
    } else if let Some(&(d, _, g)) = pairs.get(&(dst, src)) {
        (d, false, g)
    } else {
        return None;
    };
    let all = regions.iter().all(|r| {
        let (s_off, d_off) = if staging_is_src {
            (r.src_offset as i128, r.dst_offset as i128)
        } else {
            (r.dst_offset as i128, r.src_offset as i128)
        };
        s_off == d_off + delta as i128
    });
    all.then_some(group)
}

/// Lanes, spans and marks of one device; returns the steady iteration found on its busiest
/// queue, with that queue's submission count.
#[allow(clippy::too_many_arguments)]
fn device_lanes(
    v: &mut RunView,
    t: &Trace,
    m: &Model,
    tm: &crate::timing::Timing,
    d: u32,
    multi: bool,
    plan: &Plan,
    a: &Analysis,
) -> Option<(usize, (u64, u64))> {
    let dev = if multi {
        format!(" (device {d})")
    } else {
        String::new()
    };
    let elide = elided_pairs(m, plan, d);
    // Queues in order of first submission.
    let mut queues: Vec<u64> = Vec::new();
    for s in &m.submissions {
        if !queues.contains(&s.queue) {
            queues.push(s.queue);
        }
    }
    // One lane per host thread that waited or observed something (in order of first record).
    let mut thread_lane: BTreeMap<u32, u32> = BTreeMap::new();
    let mut threads: Vec<u32> = Vec::new();
    for r in &t.records {
        if is_observation(&r.event) && !threads.contains(&r.thread) {
            threads.push(r.thread);
        }
    }
    if threads.is_empty() {
        threads.push(0);
    }
    for th in &threads {
        thread_lane.insert(*th, v.lanes.len() as u32);
        v.lanes.push(Lane {
            name: if *th == 0 {
                format!("host: waits{dev}")
            } else {
                format!("host thread {th}: waits{dev}")
            },
            kind: "host".into(),
            rows: 1,
        });
    }
    let mut lane_of: HashMap<u64, u32> = HashMap::new();
    for (i, q) in queues.iter().enumerate() {
        lane_of.insert(*q, v.lanes.len() as u32);
        v.lanes.push(Lane {
            name: format!("queue {}{dev}", i + 1),
            kind: "queue".into(),
            rows: 1,
        });
    }
    let at = |seq: u64| tm.at(seq);
    // Submissions, stacked in rows where they overlap on one queue.
    let mut row_ends: HashMap<u64, Vec<f64>> = HashMap::new();
    let mut signatures: HashMap<u64, Vec<(usize, String)>> = HashMap::new();
    for (si, s) in m.submissions.iter().enumerate() {
        let lane = lane_of[&s.queue];
        let start = s.seq as f64;
        let end = s.completed.unwrap_or(m.last_seq.max(s.seq + 1)) as f64;
        let span_t = tm.submission(s.seq, s.completed);
        let ends = row_ends.entry(s.queue).or_default();
        let row = match ends.iter().position(|&e| e <= start) {
            Some(r) => {
                ends[r] = end;
                r
            }
            None => {
                ends.push(end);
                ends.len() - 1
            }
        };
        let l = &mut v.lanes[lane as usize];
        l.rows = l.rows.max(row as u32 + 1);
        let ops: Vec<&crate::model::Op> = m.ops(si).collect();
        v.spans.push(Span {
            lane,
            row: row as u32,
            start,
            end,
            kind: "submit".into(),
            label: format!(
                "submission at event {}{}: {} command{}{}",
                s.seq,
                match s.completed {
                    Some(c) => format!(", observed complete at event {c}"),
                    None => ", never observed complete".into(),
                },
                ops.len(),
                if ops.len() == 1 { "" } else { "s" },
                match span_t {
                    Some(x) => format!(
                        "; {} ({})",
                        crate::timing::human_ns(x.len()),
                        x.source.words()
                    ),
                    None => String::new(),
                }
            ),
            seq: s.seq,
            count: 1,
            bytes: 0,
            buffer: 0,
            t0: span_t.map(|x| x.begin),
            t1: span_t.map(|x| x.end),
            timing: span_t.map_or(String::new(), |x| source_key(x.source)),
        });
        if let Some(x) = span_t {
            v.facts.submission(s.seq, x);
        }
        for w in &s.waits {
            v.marks.push(Mark {
                lane,
                seq: s.seq,
                t: span_t.map(|x| x.begin),
                kind: "wait".into(),
                label: format!(
                    "submission at event {} waits on semaphore {:#x}{}",
                    s.seq,
                    w.0,
                    if w.1 > 0 {
                        format!(" value {}", w.1)
                    } else {
                        String::new()
                    }
                ),
            });
        }
        // Its commands, in execution order, sharing the span; identical neighbours merged.
        let mut items: Vec<Item> = Vec::new();
        let mut sig = String::new();
        let mut prev_use: Option<u64> = None;
        for op in &ops {
            let (kind, label, bytes) = match &op.kind {
                OpKind::Copy { src, dst, regions } => {
                    let bytes: u64 = regions.iter().map(|r| r.size).sum();
                    let group = elided_by(&elide, *src, *dst, regions);
                    let elided = group.is_some();
                    if let Some(x) = tm.copies.get(&(s.seq, op.recorded)) {
                        v.facts.copy(s.seq, group, *x, bytes);
                    } else if span_t.is_some() {
                        v.facts.unmeasured_copy(s.seq, group);
                    }
                    let label = format!(
                        "{} copy #{} → #{} ({})",
                        if elided { "elided" } else { "kept" },
                        m.buffers[*src].number,
                        m.buffers[*dst].number,
                        human_bytes(bytes)
                    );
                    (if elided { "elided" } else { "copy" }, label, bytes)
                }
                OpKind::Use {
                    command,
                    kind,
                    buffer,
                    ..
                } => {
                    let k = if command.contains("Dispatch") {
                        "dispatch"
                    } else if command.contains("Draw") {
                        "draw"
                    } else {
                        "use"
                    };
                    let what = match kind {
                        UseKind::Descriptor => String::new(),
                        other => format!(" ({other:?})").to_lowercase(),
                    };
                    (
                        k,
                        format!("{command}{what} #{}", m.buffers[*buffer].number),
                        0,
                    )
                }
            };
            sig.push_str(kind);
            sig.push_str(&op.name());
            sig.push('|');
            // A dispatch or draw is one record that lists every buffer it binds: one command.
            if let (OpKind::Use { buffer, .. }, Some(prev)) = (&op.kind, prev_use) {
                if prev == op.recorded {
                    if let Some(last) = items.last_mut() {
                        last.label
                            .push_str(&format!(", #{}", m.buffers[*buffer].number));
                        continue;
                    }
                }
            }
            prev_use = matches!(op.kind, OpKind::Use { .. }).then_some(op.recorded);
            let time = matches!(op.kind, OpKind::Copy { .. })
                .then(|| tm.copies.get(&(s.seq, op.recorded)).copied())
                .flatten();
            match items.last_mut() {
                Some(it) if it.kind == kind && it.label == label => {
                    it.count += 1;
                    it.bytes += bytes;
                    it.time = match (it.time, time) {
                        (Some(p), Some(x)) => Some(crate::timing::TimeSpan {
                            begin: p.begin.min(x.begin),
                            end: p.end.max(x.end),
                            source: x.source,
                        }),
                        _ => None,
                    };
                }
                _ => items.push(Item {
                    kind: kind.into(),
                    label,
                    bytes,
                    count: 1,
                    time,
                }),
            }
        }
        signatures.entry(s.queue).or_default().push((si, sig));
        let times = place_in(span_t, &items);
        let n = items.len().max(1) as f64;
        let w = (end - start) / n;
        for (k, (it, tt)) in items.into_iter().zip(times).enumerate() {
            if it.kind == "elided" {
                v.totals.elided_copies += it.count;
                v.totals.elided_bytes += it.bytes;
            }
            v.spans.push(Span {
                lane,
                row: row as u32,
                start: start + w * k as f64,
                end: start + w * (k + 1) as f64,
                label: format!(
                    "{}{}{}",
                    it.label,
                    if it.count > 1 {
                        format!(" ×{}", it.count)
                    } else {
                        String::new()
                    },
                    match (&it.time, &tt) {
                        (Some(x), _) => format!(
                            "; {} ({})",
                            crate::timing::human_ns(x.len()),
                            x.source.words()
                        ),
                        (None, Some((b, e, _))) => format!(
                            "; about {} (not measured: a share of its submission's time)",
                            crate::timing::human_ns(e - b)
                        ),
                        _ => String::new(),
                    }
                ),
                kind: it.kind,
                seq: s.seq,
                count: it.count,
                bytes: it.bytes,
                buffer: 0,
                t0: tt.as_ref().map(|x| x.0),
                t1: tt.as_ref().map(|x| x.1),
                timing: tt.map_or(String::new(), |x| x.2),
            });
        }
    }
    // The host's observations, on the lane of the thread that made them; a wait also as a span
    // of the time it took.
    for r in &t.records {
        let (kind, label) = match &r.event {
            Event::FenceSignaled { fences } => (
                "fence",
                format!(
                    "host observed fence{} signaled",
                    if fences.len() == 1 { "" } else { "s" }
                ),
            ),
            Event::QueueWaitIdle { .. } => ("idle", "vkQueueWaitIdle".to_string()),
            Event::DeviceWaitIdle => ("idle", "vkDeviceWaitIdle".to_string()),
            Event::SemaphoreReached { semaphores } => (
                "semaphore",
                format!(
                    "host observed semaphore value{} reached: {}",
                    if semaphores.len() == 1 { "" } else { "s" },
                    semaphores
                        .iter()
                        .map(|(s, v)| format!("{s:#x}={v}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ),
            Event::SemaphoreSignal { semaphore, value } => (
                "signal",
                format!("host signaled semaphore {semaphore:#x} to {value}"),
            ),
            _ => continue,
        };
        let lane = thread_lane
            .get(&r.thread)
            .or_else(|| thread_lane.values().next())
            .copied()
            .unwrap_or(0);
        let waited = tm.waits.get(&r.seq).copied();
        v.marks.push(Mark {
            lane,
            seq: r.seq,
            t: at(r.seq),
            kind: kind.into(),
            label: format!(
                "{label} (event {}{})",
                r.seq,
                match waited {
                    Some(w) => format!(", after waiting {}", crate::timing::human_ns(w as f64)),
                    None => String::new(),
                }
            ),
        });
        if let (Some(w), Some(end)) = (waited, at(r.seq)) {
            v.facts.wait(r.seq, end - w as f64, end);
            v.spans.push(Span {
                lane,
                row: 0,
                start: r.seq as f64 - 0.5,
                end: r.seq as f64,
                kind: "wait".into(),
                label: format!(
                    "the host waits {} in {} (event {})",
                    crate::timing::human_ns(w as f64),
                    match &r.event {
                        Event::FenceSignaled { .. } => "vkWaitForFences",
                        Event::SemaphoreReached { .. } => "vkWaitSemaphores",
                        _ => label.as_str(),
                    },
                    r.seq
                ),
                seq: r.seq,
                count: 1,
                bytes: 0,
                buffer: 0,
                t0: Some(end - w as f64),
                t1: Some(end),
                timing: String::new(),
            });
        }
    }
    // Host accesses to the staging buffers of candidate pairs and planned groups, each a span
    // to the next submission (the end of the host's window): one lane per device buffer they
    // exchange data with, its staging buffers stacked in rows where their spans overlap.
    let mut partner: BTreeMap<usize, (usize, BufId)> = BTreeMap::new();
    for c in a.candidates.iter().filter(|c| c.device_index == d) {
        if let Some(b) = m.buffers.iter().position(|b| b.number == c.staging.number) {
            let e = partner
                .entry(c.staging.number)
                .or_insert((c.device.number, b));
            e.0 = e.0.min(c.device.number);
        }
    }
    for &(s, dv) in elide.keys() {
        let e = partner
            .entry(m.buffers[s].number)
            .or_insert((m.buffers[dv].number, s));
        e.0 = e.0.min(m.buffers[dv].number);
    }
    let submits: Vec<u64> = m
        .timeline
        .iter()
        .filter_map(|(q, st)| matches!(st, Step::Submit(_)).then_some(*q))
        .collect();
    // Per device buffer: its staging buffers' spans.
    let mut lanes: BTreeMap<usize, Vec<Span>> = BTreeMap::new();
    let mut members: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (&number, &(dev_number, b)) in &partner {
        let spans = lanes.entry(dev_number).or_default();
        let first = spans.len();
        for (seq, st) in &m.timeline {
            let Step::Host { buffer, access } = st else {
                continue;
            };
            if *buffer != b {
                continue;
            }
            let end = match submits.binary_search(seq) {
                Ok(i) => submits.get(i + 1).copied(),
                Err(i) => submits.get(i).copied(),
            }
            .unwrap_or(m.last_seq.max(seq + 1));
            let kind = match access {
                crate::trace::Access::Read => "read",
                crate::trace::Access::Write => "write",
                crate::trace::Access::ReadWrite => "readwrite",
            };
            // The same access again in the same window: one span.
            if spans.len() > first {
                let p = spans.last_mut().unwrap();
                if p.kind == kind && p.end == end as f64 {
                    p.count += 1;
                    continue;
                }
            }
            let t_end = at(end).or(if end >= m.last_seq {
                Some(tm.last_t as f64)
            } else {
                None
            });
            spans.push(Span {
                lane: 0,
                row: 0,
                start: *seq as f64,
                end: end as f64,
                kind: kind.into(),
                label: format!(
                    "host {} #{number} (event {seq}); its window ends at the next submission (event {end})",
                    match access {
                        crate::trace::Access::Read => "reads",
                        crate::trace::Access::Write => "writes",
                        crate::trace::Access::ReadWrite => "reads and writes (shared page)",
                    }
                ),
                seq: *seq,
                count: 1,
                bytes: 0,
                buffer: number,
                t0: at(*seq),
                t1: t_end,
                timing: String::new(),
            });
        }
        if spans.len() > first {
            members.entry(dev_number).or_default().push(number);
        }
    }
    for (dev_number, mut spans) in lanes {
        let Some(stagings) = members.get(&dev_number) else {
            continue;
        };
        let lane = v.lanes.len() as u32;
        spans.sort_by(|x, y| x.start.total_cmp(&y.start));
        let mut ends: Vec<(usize, f64)> = Vec::new();
        for sp in &mut spans {
            // A buffer keeps its row while it has one; others take the first free row.
            let row = match ends.iter().position(|&(b, _)| b == sp.buffer) {
                Some(r) if ends[r].1 <= sp.start => r,
                _ => match ends.iter().position(|&(_, e)| e <= sp.start) {
                    Some(r) => r,
                    None => {
                        ends.push((0, 0.0));
                        ends.len() - 1
                    }
                },
            };
            ends[row] = (sp.buffer, ends[row].1.max(sp.end));
            sp.lane = lane;
            sp.row = row as u32;
        }
        let name = if stagings.len() == 1 {
            let b = &m.buffers[partner[&stagings[0]].1];
            format!(
                "host → #{} {} (to #{dev_number}){dev}",
                stagings[0],
                human_bytes(b.size)
            )
        } else {
            format!("host → {} staging of #{dev_number}{dev}", stagings.len())
        };
        v.lanes.push(Lane {
            name,
            kind: "staging".into(),
            rows: ends.len().max(1) as u32,
        });
        v.spans.extend(spans);
    }
    // One steady iteration on the busiest queue: the last period of its submissions'
    // command lists, from the completion before it to its last completion.
    let (_, subs) = signatures.iter().max_by_key(|(_, s)| s.len())?;
    steady(m, subs).map(|r| (subs.len(), r))
}

/// A host completion observation or host signal (drawn on its thread's lane).
fn is_observation(e: &Event) -> bool {
    matches!(
        e,
        Event::FenceSignaled { .. }
            | Event::QueueWaitIdle { .. }
            | Event::DeviceWaitIdle
            | Event::SemaphoreReached { .. }
            | Event::SemaphoreSignal { .. }
    )
}

/// One command (or run of identical neighbours) of a submission as drawn.
struct Item {
    kind: String,
    label: String,
    bytes: u64,
    count: u64,
    /// Its GPU time, when every command in it was measured.
    time: Option<crate::timing::TimeSpan>,
}

fn source_key(s: crate::timing::Source) -> String {
    match s {
        crate::timing::Source::Gpu => "gpu",
        crate::timing::Source::GpuAligned => "gpu-aligned",
        crate::timing::Source::Host => "host",
    }
    .into()
}

/// The time of each command of a submission spanning `sub`: a measured one its own GPU time;
/// the others, in order, share equally the time between the measured ones around them (the
/// submission's begin and end at the edges). `(begin, end, timing)`.
fn place_in(
    sub: Option<crate::timing::TimeSpan>,
    items: &[Item],
) -> Vec<Option<(f64, f64, String)>> {
    let Some(sub) = sub else {
        return items.iter().map(|_| None).collect();
    };
    let mut out: Vec<Option<(f64, f64, String)>> = items
        .iter()
        .map(|it| {
            it.time.map(|x| {
                (
                    x.begin.clamp(sub.begin, sub.end),
                    x.end.clamp(sub.begin, sub.end),
                    source_key(x.source),
                )
            })
        })
        .collect();
    let mut i = 0;
    while i < items.len() {
        if out[i].is_some() {
            i += 1;
            continue;
        }
        let j = (i..items.len())
            .find(|&k| out[k].is_some())
            .unwrap_or(items.len());
        let from = if i == 0 {
            sub.begin
        } else {
            out[i - 1].as_ref().map_or(sub.begin, |x| x.1)
        };
        let to = out
            .get(j)
            .and_then(|x| x.as_ref().map(|x| x.0))
            .unwrap_or(sub.end)
            .max(from);
        let n = (j - i) as f64;
        for k in i..j {
            let f = (k - i) as f64;
            // Not measured itself: a share of the submission's time.
            out[k] = Some((
                from + (to - from) * f / n,
                from + (to - from) * (f + 1.0) / n,
                "share".to_string(),
            ));
        }
        i = j;
    }
    out
}

/// The seq range of one steady iteration of a queue's submissions: the smallest period their
/// command lists repeat with over the second half of the run.
fn steady(m: &Model, subs: &[(usize, String)]) -> Option<(u64, u64)> {
    let n = subs.len();
    if n < 2 {
        return None;
    }
    // The smallest period that holds for nine in ten submissions of the middle of the run
    // (the first and last ones are often setup and teardown).
    let lo = n / 4;
    let period = (1..=(n / 2).max(1))
        .find(|&p| {
            let range = lo..n.saturating_sub(p);
            let total = range.len();
            let same = range.filter(|&i| subs[i].1 == subs[i + p].1).count();
            total > 0 && same * 10 >= total * 9
        })
        .unwrap_or(n - n / 2);
    // The first whole period from the middle on that the next one repeats, starting with a
    // copy (an upload) when one does.
    let repeats = |i: &usize| (*i..*i + period).all(|k| subs[k].1 == subs[k + period].1);
    let starts = n / 2..n.saturating_sub(2 * period - 1);
    let first = starts
        .clone()
        .filter(repeats)
        .find(|&i| subs[i].1.starts_with("copy") || subs[i].1.starts_with("elided"))
        .or_else(|| starts.clone().find(repeats))
        .unwrap_or((n / 2).min(n - period));
    let last = first + period - 1;
    let sub = |i: usize| &m.submissions[subs[i].0];
    let from = if first > 0 {
        let p = sub(first - 1);
        p.completed.unwrap_or(p.seq)
    } else {
        sub(first).seq.saturating_sub(1)
    };
    let l = sub(last);
    let to = l.completed.unwrap_or(m.last_seq);
    (to > from).then_some((from, to))
}

/// Axis units a command gets inside its submission's span, beyond the events the span covers.
const UNITS_PER_COMMAND: f64 = 3.0;

/// Past this many spans the timeline is thinned ([`RunView::thin`]): a 10-iteration trace's
/// page stays far below it, a long run's page stays around a megabyte.
pub const MAX_SPANS: usize = 2500;

fn is_command(kind: &str) -> bool {
    matches!(kind, "copy" | "elided" | "dispatch" | "draw" | "use")
}

impl RunView {
    /// The axis position of (fractional) seq `s`: seq, plus the room given to the commands of
    /// every submission before it (linear across each widened step).
    pub fn pos(&self, s: f64) -> f64 {
        let mut x = s;
        for &(q, extra) in &self.stretch {
            let q = q as f64;
            if s >= q + 1.0 {
                x += extra;
            } else if s > q {
                x += extra * (s - q);
            } else {
                break;
            }
        }
        x
    }

    /// Thin a long run to about `limit` spans: up to `k` consecutive identical submissions of
    /// one queue row (same commands) become one span `×k` with their commands summed, and up to
    /// `k` consecutive identical host accesses of one buffer one span. The steady iteration is
    /// left as it is.
    pub fn thin(&mut self, limit: usize) {
        if self.spans.len() <= limit {
            return;
        }
        let k = self.spans.len().div_ceil(limit.max(1)).max(2);
        // Blocks: a submission with its commands, or one host access.
        let mut blocks: Vec<Vec<Span>> = Vec::new();
        for s in std::mem::take(&mut self.spans) {
            match blocks.last_mut() {
                Some(b) if is_command(&s.kind) && b[0].kind == "submit" && b[0].seq == s.seq => {
                    b.push(s)
                }
                _ => blocks.push(vec![s]),
            }
        }
        blocks.sort_by(|a, b| {
            (a[0].lane, a[0].row, a[0].buffer)
                .cmp(&(b[0].lane, b[0].row, b[0].buffer))
                .then(a[0].start.total_cmp(&b[0].start))
        });
        let key = |b: &[Span]| -> String {
            let mut k = format!("{}:{}:{}:{}", b[0].lane, b[0].row, b[0].buffer, b[0].kind);
            for s in &b[1..] {
                k.push_str(&s.kind);
                k.push_str(&s.label);
            }
            k
        };
        let keep = self.iteration;
        let kept = |b: &[Span]| keep.is_some_and(|(lo, hi)| b[0].seq >= lo && b[0].seq <= hi);
        let mut out: Vec<Span> = Vec::new();
        let mut run: Vec<Vec<Span>> = Vec::new();
        let mut merged_any = false;
        let mut flush = |run: &mut Vec<Vec<Span>>, out: &mut Vec<Span>| {
            if run.len() == 1 {
                out.append(&mut run[0]);
            } else if run.len() > 1 {
                merged_any = true;
                let n = run.len();
                let (first, last) = (&run[0], &run[n - 1]);
                let (a, b) = (first[0].seq, last[0].seq);
                let (start, end) = (first[0].start, last[0].end);
                let (t0, t1) = (first[0].t0, last[0].t1);
                let mut head = first[0].clone();
                head.start = start;
                head.end = end;
                (head.t0, head.t1) = (t0, t1);
                head.count = run.iter().map(|x| x[0].count).sum();
                head.label = format!("{n} alike, events {a}–{b} (thinned); first: {}", head.label);
                out.push(head);
                let ops = first.len() - 1;
                for t in 0..ops {
                    let mut op = first[t + 1].clone();
                    op.start = start + (end - start) * t as f64 / ops as f64;
                    op.end = start + (end - start) * (t + 1) as f64 / ops as f64;
                    if let (Some(a), Some(b)) = (t0, t1) {
                        op.t0 = Some(a + (b - a) * t as f64 / ops as f64);
                        op.t1 = Some(a + (b - a) * (t + 1) as f64 / ops as f64);
                    }
                    op.count = run.iter().map(|x| x[t + 1].count).sum();
                    op.bytes = run.iter().map(|x| x[t + 1].bytes).sum();
                    op.label = format!("{} in {n} submissions (thinned)", op.label);
                    out.push(op);
                }
            }
            run.clear();
        };
        for b in blocks {
            let same = run
                .last()
                .is_some_and(|r| key(r) == key(&b) && run.len() < k && !kept(r) && !kept(&b));
            if !same {
                flush(&mut run, &mut out);
            }
            run.push(b);
        }
        flush(&mut run, &mut out);
        self.spans = out;
        if merged_any {
            self.notes.push(format!(
                "the timeline is thinned ({} spans): up to {k} consecutive identical submissions of a queue, or host accesses of a buffer, are drawn as one (×N); the steady iteration is drawn in full",
                self.spans.len()
            ));
        }
    }

    /// Give every submission room for its commands; the spans move onto the widened axis.
    fn widen_submissions(&mut self) {
        let mut n_ops: BTreeMap<u64, usize> = BTreeMap::new();
        for s in &self.spans {
            if matches!(
                s.kind.as_str(),
                "copy" | "elided" | "dispatch" | "draw" | "use"
            ) {
                *n_ops.entry(s.seq).or_default() += 1;
            }
        }
        self.stretch = self
            .spans
            .iter()
            .filter(|s| s.kind == "submit")
            .map(|s| {
                (
                    s.seq,
                    UNITS_PER_COMMAND * n_ops.get(&s.seq).copied().unwrap_or(0) as f64,
                )
            })
            .filter(|&(_, e)| e > 0.0)
            .collect();
        self.stretch.sort_by_key(|x| x.0);
        self.stretch.dedup_by_key(|x| x.0);
        let mut parent = (0.0, 1.0, 0.0, 1.0);
        let mut spans = std::mem::take(&mut self.spans);
        for s in &mut spans {
            let (a, b) = (self.pos(s.start), self.pos(s.end));
            match s.kind.as_str() {
                "submit" => {
                    parent = (s.start, s.end, a, b);
                    (s.start, s.end) = (a, b);
                }
                "copy" | "elided" | "dispatch" | "draw" | "use" => {
                    let (ps, pe, pa, pb) = parent;
                    let f = |x: f64| pa + (x - ps) / (pe - ps).max(1e-9) * (pb - pa);
                    (s.start, s.end) = (f(s.start), f(s.end));
                }
                _ => (s.start, s.end) = (a, b),
            }
        }
        self.spans = spans;
    }

    /// Count of spans per kind (for tests and the page's status).
    pub fn count(&self, kind: &str) -> u64 {
        self.spans
            .iter()
            .filter(|s| s.kind == kind)
            .map(|s| s.count)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::CopyRegion;

    fn span(kind: &str, start: f64, end: f64, seq: u64) -> Span {
        Span {
            lane: 1,
            row: 0,
            start,
            end,
            kind: kind.into(),
            label: format!("{kind} </script><b>"),
            seq,
            count: 1,
            bytes: 0,
            buffer: 0,
            t0: Some(start * 1000.0),
            t1: Some(end * 1000.0),
            timing: "gpu".into(),
        }
    }

    fn sample_view() -> RunView {
        let mut v = RunView {
            source: "t.trace".into(),
            exe: "/bin/app".into(),
            device_name: "dev".into(),
            last_seq: 20,
            lanes: vec![
                Lane {
                    name: "host: waits".into(),
                    kind: "host".into(),
                    rows: 1,
                },
                Lane {
                    name: "queue 1".into(),
                    kind: "queue".into(),
                    rows: 1,
                },
            ],
            spans: vec![
                span("submit", 10.0, 12.0, 10),
                span("elided", 10.0, 11.0, 10),
                span("dispatch", 11.0, 12.0, 10),
            ],
            marks: vec![Mark {
                lane: 0,
                seq: 12,
                t: Some(12_000.0),
                kind: "fence".into(),
                label: "fence".into(),
            }],
            iteration: Some((9, 12)),
            stretch: Vec::new(),
            plan_source: "p".into(),
            timed: true,
            last_t: 20_000.0,
            iteration_t: Some((9_000.0, 12_000.0)),
            breakdown: None,
            facts: Default::default(),
            pairs: Vec::new(),
            totals: Totals::default(),
            notes: Vec::new(),
        };
        v.widen_submissions();
        v
    }

    #[test]
    fn submissions_are_widened_and_their_commands_follow() {
        let v = sample_view();
        assert_eq!(v.stretch, vec![(10, 2.0 * UNITS_PER_COMMAND)]);
        assert_eq!(v.pos(10.0), 10.0);
        assert_eq!(v.pos(11.0), 11.0 + 2.0 * UNITS_PER_COMMAND);
        assert_eq!(v.pos(20.0), 20.0 + 2.0 * UNITS_PER_COMMAND);
        let sub = &v.spans[0];
        assert_eq!((sub.start, sub.end), (10.0, 12.0 + 6.0));
        // The two commands split the widened span in order.
        assert_eq!((v.spans[1].start, v.spans[1].end), (10.0, 14.0));
        assert_eq!((v.spans[2].start, v.spans[2].end), (14.0, 18.0));
    }

    #[test]
    fn only_copies_at_the_plans_offset_are_elided() {
        let mut pairs = HashMap::new();
        pairs.insert(
            (1usize, 0usize),
            (64i64, Direction::StagingIntoDevice, 0usize),
        );
        let r = |s, d| CopyRegion {
            src_offset: s,
            dst_offset: d,
            size: 16,
        };
        // staging → device: staging byte i + 64 is device byte i.
        assert!(is_self_copy(&pairs, 1, 0, &[r(64, 0), r(128, 64)]));
        assert!(!is_self_copy(&pairs, 1, 0, &[r(64, 0), r(0, 0)]));
        // device → staging, the same rule.
        assert!(is_self_copy(&pairs, 0, 1, &[r(0, 64)]));
        // Buffers the plan does not pair.
        assert!(!is_self_copy(&pairs, 2, 0, &[r(64, 0)]));
    }

    #[test]
    fn the_page_is_self_contained_and_its_data_cannot_close_the_script() {
        let page = html::html(&sample_view());
        assert!(!page.contains("https://") && !page.contains("<link"));
        let data_at = page.find("id=\"echo-data\">").unwrap();
        let data_end = data_at + page[data_at..].find("</script>").unwrap();
        assert!(page[data_at..data_end].contains("<\\/script>"));
        let json: serde_json::Value = serde_json::from_str(
            &page[data_at + "id=\"echo-data\">".len()..data_end].replace("<\\/", "</"),
        )
        .unwrap();
        assert_eq!(json["spans"].as_array().unwrap().len(), 3);
        assert_eq!(
            html::esc("<a href='x'>&"),
            "&lt;a href=&#39;x&#39;&gt;&amp;"
        );
    }

    #[test]
    fn perfetto_has_metadata_spans_and_instants() {
        let v: serde_json::Value =
            serde_json::from_str(&perfetto::perfetto(&sample_view())).unwrap();
        let ev = v["traceEvents"].as_array().unwrap();
        for ph in ["M", "X", "i"] {
            assert!(ev.iter().any(|e| e["ph"] == ph), "no {ph} event");
        }
        assert!(ev.iter().any(|e| e["name"] == "copy (elided)"));
    }
}
