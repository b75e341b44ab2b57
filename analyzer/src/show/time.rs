//! Where one steady iteration's time goes (issue 47): the GPU's time split into copies kept,
//! copies the plan elides (what they cost in the profiled run), other GPU work and idle; the
//! host's into waiting and the rest; and each planned group's copies. Built from the timing
//! facts [`super::view`] gathered ([`Facts`]), for the page, the Perfetto export, `vkecho analyze`
//! and the demo.

use crate::timing::{human_ns, Source, TimeSpan, Timing};
use serde::Serialize;
use std::collections::HashMap;

/// A copy as run in the profiled run.
#[derive(Clone, Debug)]
struct CopyFact {
    submit: u64,
    /// The plan's group (index) whose sharing elides it; `None`: kept.
    group: Option<usize>,
    span: TimeSpan,
    bytes: u64,
}

/// The timing facts of a run, all devices together (sequence numbers are process-wide).
#[derive(Clone, Debug, Default)]
pub struct Facts {
    t: HashMap<u64, f64>,
    subs: Vec<(u64, TimeSpan)>,
    copies: Vec<CopyFact>,
    /// Copies in submissions with a time that have none of their own: (submission, group).
    unmeasured: Vec<(u64, Option<usize>)>,
    /// Host waits: (record seq, begin, end).
    waits: Vec<(u64, f64, f64)>,
}

impl Facts {
    /// Take one device's record times.
    pub fn absorb(&mut self, tm: Timing) {
        self.t
            .extend(tm.t.into_iter().map(|(seq, t)| (seq, t as f64)));
    }

    /// The host time of record `seq`.
    pub fn at(&self, seq: u64) -> Option<f64> {
        self.t.get(&seq).copied()
    }

    pub(super) fn submission(&mut self, seq: u64, span: TimeSpan) {
        self.subs.push((seq, span));
    }

    pub(super) fn copy(&mut self, submit: u64, group: Option<usize>, span: TimeSpan, bytes: u64) {
        self.copies.push(CopyFact {
            submit,
            group,
            span,
            bytes,
        });
    }

    pub(super) fn unmeasured_copy(&mut self, submit: u64, group: Option<usize>) {
        self.unmeasured.push((submit, group));
    }

    pub(super) fn wait(&mut self, seq: u64, begin: f64, end: f64) {
        self.waits.push((seq, begin, end));
    }
}

/// One planned group's copies in the steady iteration of the profiled run.
#[derive(Clone, Debug, Serialize)]
pub struct GroupTime {
    /// The group's id (`group N` in `vkecho analyze`).
    pub group: u32,
    pub device_index: u32,
    /// Copies of the group in the iteration, and those with GPU times.
    pub copies: u64,
    pub measured: u64,
    pub bytes: u64,
    /// Their GPU time (ns), and its share of the iteration.
    pub ns: f64,
    pub fraction: f64,
}

/// Where one steady iteration's time went in the profiled run (nanoseconds).
#[derive(Clone, Debug, Serialize)]
pub struct Breakdown {
    /// The iteration: from the completion before its first submission to its last completion.
    pub from_seq: u64,
    pub to_seq: u64,
    pub from: f64,
    pub to: f64,
    pub iteration: f64,
    /// GPU: copies kept, copies the plan elides, other work, idle (they add up to `iteration`).
    pub copies_kept: f64,
    pub copies_elided: f64,
    pub other_gpu: f64,
    pub gpu_idle: f64,
    /// Host: waiting for the GPU, and the rest (they add up to `iteration`).
    pub host_waits: f64,
    pub host_other: f64,
    /// How the GPU's time was found (`gpu`, `gpu-aligned`, `host`: [`Source`]).
    pub gpu_timing: String,
    /// Copies in the iteration with and without GPU times of their own.
    pub copies_measured: u64,
    pub copies_unmeasured: u64,
    pub groups: Vec<GroupTime>,
}

/// Total length of the union of intervals, clipped to `[lo, hi]`.
fn union_len(mut v: Vec<(f64, f64)>, lo: f64, hi: f64) -> f64 {
    v.retain(|x| x.1 > lo && x.0 < hi);
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut total = 0.0;
    let mut cur: Option<(f64, f64)> = None;
    for (a, b) in v {
        let (a, b) = (a.max(lo), b.min(hi));
        match cur {
            Some((ca, cb)) if a <= cb => cur = Some((ca, cb.max(b))),
            Some((ca, cb)) => {
                total += cb - ca;
                cur = Some((a, b));
            }
            None => cur = Some((a, b)),
        }
    }
    if let Some((a, b)) = cur {
        total += b - a;
    }
    total.max(0.0)
}

/// Where the iteration `(lo, hi]` (sequence numbers) spent its time, when the run has times;
/// `groups` holds the id and device index of each of the plan's groups, in the plan's order.
pub fn breakdown(f: &Facts, groups: &[(u32, u32)], (lo, hi): (u64, u64)) -> Option<Breakdown> {
    let (from, to) = (f.at(lo)?, f.at(hi)?);
    if to <= from {
        return None;
    }
    let inside = |seq: u64| seq > lo && seq <= hi;
    let subs: Vec<&(u64, TimeSpan)> = f.subs.iter().filter(|(s, _)| inside(*s)).collect();
    let busy = union_len(
        subs.iter().map(|(_, x)| (x.begin, x.end)).collect(),
        from,
        to,
    );
    let clip = |x: &TimeSpan| (x.end.min(to) - x.begin.max(from)).max(0.0);
    let copies: Vec<&CopyFact> = f.copies.iter().filter(|c| inside(c.submit)).collect();
    let kept: f64 = copies
        .iter()
        .filter(|c| c.group.is_none())
        .map(|c| clip(&c.span))
        .fold(0.0, |a, b| a + b);
    let elided: f64 = copies
        .iter()
        .filter(|c| c.group.is_some())
        .map(|c| clip(&c.span))
        .fold(0.0, |a, b| a + b);
    let unmeasured: Vec<&(u64, Option<usize>)> =
        f.unmeasured.iter().filter(|(s, _)| inside(*s)).collect();
    let waits = union_len(
        f.waits
            .iter()
            .filter(|(s, _, _)| inside(*s))
            .map(|(_, a, b)| (*a, *b))
            .collect(),
        from,
        to,
    );
    let iteration = to - from;
    let sources: Vec<Source> = subs.iter().map(|(_, x)| x.source).collect();
    let gpu_timing = if sources.contains(&Source::Host) || sources.is_empty() {
        "host"
    } else if sources.contains(&Source::GpuAligned) {
        "gpu-aligned"
    } else {
        "gpu"
    };
    let mut out: Vec<GroupTime> = Vec::new();
    for (gi, (id, dev)) in groups.iter().enumerate() {
        let mine: Vec<&&CopyFact> = copies.iter().filter(|c| c.group == Some(gi)).collect();
        let missing = unmeasured.iter().filter(|(_, x)| *x == Some(gi)).count() as u64;
        if mine.is_empty() && missing == 0 {
            continue;
        }
        let ns: f64 = mine.iter().map(|c| clip(&c.span)).fold(0.0, |a, b| a + b);
        out.push(GroupTime {
            group: *id,
            device_index: *dev,
            copies: mine.len() as u64 + missing,
            measured: mine.len() as u64,
            bytes: mine.iter().map(|c| c.bytes).sum(),
            ns,
            fraction: ns / iteration,
        });
    }
    Some(Breakdown {
        from_seq: lo,
        to_seq: hi,
        from,
        to,
        iteration,
        copies_kept: kept,
        copies_elided: elided,
        other_gpu: (busy - kept - elided).max(0.0),
        gpu_idle: (iteration - busy).max(0.0),
        host_waits: waits,
        host_other: (iteration - waits).max(0.0),
        gpu_timing: gpu_timing.into(),
        copies_measured: copies.len() as u64,
        copies_unmeasured: unmeasured.len() as u64,
        groups: out,
    })
}

impl Breakdown {
    /// One line: what the plan's groups' copies took of an iteration in the profiled run.
    pub fn groups_line(&self) -> String {
        let ns: f64 = self.groups.iter().map(|g| g.ns).fold(0.0, |a, b| a + b);
        let n: u64 = self.groups.iter().map(|g| g.copies).sum();
        if n == 0 {
            return format!(
                "profiled run: an iteration took {}; the plan elides no copy in it",
                human_ns(self.iteration)
            );
        }
        format!(
            "profiled run: the groups' {} cop{} took {} of a {} iteration ({:.1} %){}",
            n,
            if n == 1 { "y" } else { "ies" },
            human_ns(ns),
            human_ns(self.iteration),
            100.0 * ns / self.iteration,
            if self.gpu_timing == "host" {
                " (no GPU timestamps on this device: not measured)"
            } else {
                ""
            }
        )
    }

    /// Lines for people (`vkecho analyze`, the demo): the iteration, and each group's copies.
    pub fn lines(&self) -> Vec<String> {
        let pct = |x: f64| 100.0 * x / self.iteration;
        let mut out = vec![format!(
            "one steady iteration of the profiled run (events {}–{}): {}; GPU: copies kept {} ({:.0} %), copies the plan elides {} ({:.0} %), other work {} ({:.0} %), idle {} ({:.0} %); host: waiting {} ({:.0} %){}",
            self.from_seq,
            self.to_seq,
            human_ns(self.iteration),
            human_ns(self.copies_kept),
            pct(self.copies_kept),
            human_ns(self.copies_elided),
            pct(self.copies_elided),
            human_ns(self.other_gpu),
            pct(self.other_gpu),
            human_ns(self.gpu_idle),
            pct(self.gpu_idle),
            human_ns(self.host_waits),
            pct(self.host_waits),
            match self.gpu_timing.as_str() {
                "gpu" => "; GPU times from timestamps (calibrated)".to_string(),
                "gpu-aligned" => "; GPU times from timestamps, placed by the host's observations".into(),
                _ => "; no GPU timestamps: GPU time spans submission to observed completion, copies unmeasured".into(),
            }
        )];
        for g in &self.groups {
            out.push(format!(
                "group {}{}: its {} cop{} took {} of the iteration ({:.1} %) in the profiled run{}",
                g.group,
                if g.device_index > 0 {
                    format!(" (device {})", g.device_index)
                } else {
                    String::new()
                },
                g.copies,
                if g.copies == 1 { "y" } else { "ies" },
                human_ns(g.ns),
                100.0 * g.fraction,
                if g.measured < g.copies {
                    format!(" ({} of them without GPU times)", g.copies - g.measured)
                } else {
                    String::new()
                }
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn union_merges_overlaps_and_clips() {
        assert_eq!(
            union_len(vec![(0.0, 10.0), (5.0, 15.0), (20.0, 30.0)], 2.0, 25.0),
            13.0 + 5.0
        );
        assert_eq!(union_len(vec![], 0.0, 1.0), 0.0);
        assert_eq!(union_len(vec![(5.0, 6.0)], 7.0, 9.0), 0.0);
    }

    fn span(b: f64, e: f64) -> TimeSpan {
        TimeSpan {
            begin: b,
            end: e,
            source: Source::Gpu,
        }
    }

    /// An iteration from t=100 to t=200: one submission 110–190 with a kept copy (10) and an
    /// elided one (20); the host waits 120–195.
    #[test]
    fn the_breakdown_adds_up() {
        let mut f = Facts::default();
        f.t.insert(10, 100.0);
        f.t.insert(20, 200.0);
        f.submission(11, span(110.0, 190.0));
        f.copy(11, None, span(110.0, 120.0), 64);
        f.copy(11, Some(0), span(170.0, 190.0), 64);
        f.wait(19, 120.0, 195.0);
        // Outside the iteration: ignored.
        f.submission(30, span(300.0, 400.0));
        f.copy(30, Some(0), span(300.0, 400.0), 64);
        let b = breakdown(&f, &[(0, 0)], (10, 20)).unwrap();
        assert_eq!(b.iteration, 100.0);
        assert_eq!((b.copies_kept, b.copies_elided), (10.0, 20.0));
        assert_eq!(b.other_gpu, 50.0);
        assert_eq!(b.gpu_idle, 20.0);
        assert_eq!(b.host_waits, 75.0);
        assert_eq!(b.host_other, 25.0);
        assert_eq!(b.groups.len(), 1);
        assert_eq!((b.groups[0].ns, b.groups[0].fraction), (20.0, 0.2));
        assert!(
            b.lines()[1].contains("group 0: its 1 copy took 20 ns"),
            "{:?}",
            b.lines()
        );
    }
}
