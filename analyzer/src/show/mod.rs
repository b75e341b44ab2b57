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
mod lanes;
mod parts;
pub mod perfetto;
pub mod time;

pub use parts::{Lane, Mark, Pair, RunView, Span, Totals};

use lanes::device_lanes;
#[cfg(test)]
use lanes::is_self_copy;

use crate::analysis::{Analysis, CandidateRow, Decision};
use crate::model::Model;
use crate::plan::Plan;
use crate::report;
use crate::stats::Stats;
use crate::trace::Trace;
use crate::words::{human_bytes, usage_names};
use std::collections::BTreeMap;

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
        role: crate::plan::role_words(c.role).into(),
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
    use crate::plan::Direction;
    use crate::trace::CopyRegion;
    use std::collections::HashMap;

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
