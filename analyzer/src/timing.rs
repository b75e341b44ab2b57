//! Time in a trace (issue 47): the host time of every record, and the GPU times of submissions
//! and copies placed on the host's clock.
//!
//! Every record of a trace written since issue 47 carries `t`, nanoseconds of the host's
//! `CLOCK_MONOTONIC` since the trace began, and host waits their duration (`dur`). GPU times come
//! in [`Event::GpuTime`] records: on the host's clock already when the layer could calibrate
//! (`clock: host`), or on the device's own clock (`clock: device`), which [`Timing::build`] places
//! per queue by the host's observations: the smallest offset such that no submission begins on
//! the GPU before the host submitted it. (Where that puts some end after the host observed the
//! submission complete, the clocks drifted or the offset is off by the submission latency; a note
//! says so.) A submission without GPU times spans from its submission to the host's first
//! observation of its completion: an upper bound, marked as such.
//!
//! Older traces have no `t`: [`Timing::timed`] is false and every consumer draws event order.

use crate::model::Model;
use crate::trace::{Event, GpuClock, Trace};
use serde::Serialize;
use std::collections::HashMap;

/// How a span's time was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// GPU timestamps mapped onto the host clock by calibrated timestamps.
    Gpu,
    /// GPU timestamps (their lengths exact) placed by the host's observations.
    GpuAligned,
    /// No GPU timestamps: from the host's submission to its observation of completion.
    Host,
}

impl Source {
    pub fn words(self) -> &'static str {
        match self {
            Source::Gpu => "measured on the GPU (calibrated timestamps)",
            Source::GpuAligned => "measured on the GPU, placed by the host's observations",
            Source::Host => {
                "spanned by the host's observations (submission to observed completion)"
            }
        }
    }
}

/// A span of time on the host's clock, nanoseconds since the trace began.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TimeSpan {
    pub begin: f64,
    pub end: f64,
    pub source: Source,
}

impl TimeSpan {
    pub fn len(&self) -> f64 {
        (self.end - self.begin).max(0.0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() <= 0.0
    }
}

/// The times of one device's trace.
#[derive(Clone, Debug, Default)]
pub struct Timing {
    /// Every record has a host time.
    pub timed: bool,
    /// `seq` → host time (ns).
    pub t: HashMap<u64, u64>,
    /// `seq` of a host wait's record → how long it waited (ns).
    pub waits: HashMap<u64, u64>,
    /// `seq` of a `QueueSubmit` → its GPU span.
    pub submissions: HashMap<u64, TimeSpan>,
    /// (`seq` of a `QueueSubmit`, `seq` of a `CmdCopyBuffer` record) → that copy's GPU span in
    /// that submission.
    pub copies: HashMap<(u64, u64), TimeSpan>,
    /// The host time of the last record.
    pub last_t: u64,
    /// What readers should know (clock alignment that did not hold, …).
    pub notes: Vec<String>,
}

impl Timing {
    /// The times of `t` (one device's records) with its model `m`.
    pub fn build(trace: &Trace, m: &Model) -> Timing {
        let mut tm = Timing {
            timed: !trace.records.is_empty() && trace.records.iter().all(|r| r.t.is_some()),
            ..Default::default()
        };
        if !tm.timed {
            return tm;
        }
        let mut raw: Vec<(u64, Option<u64>, u64, u64, GpuClock)> = Vec::new();
        for r in &trace.records {
            let t = r.t.unwrap_or(0);
            tm.t.insert(r.seq, t);
            tm.last_t = tm.last_t.max(t);
            if let Some(d) = r.dur {
                tm.waits.insert(r.seq, d);
            }
            if let Event::GpuTime {
                submit,
                copy,
                begin,
                end,
                clock,
                ..
            } = &r.event
            {
                raw.push((*submit, *copy, *begin, *end, *clock));
            }
        }
        // Per queue: the offset that places device-clock times on the host's clock.
        let queue_of: HashMap<u64, u64> = m.submissions.iter().map(|s| (s.seq, s.queue)).collect();
        let done_at: HashMap<u64, Option<u64>> = m
            .submissions
            .iter()
            .map(|s| (s.seq, s.completed.and_then(|c| tm.t.get(&c).copied())))
            .collect();
        let mut lo: HashMap<u64, i128> = HashMap::new();
        let mut hi: HashMap<u64, i128> = HashMap::new();
        for &(submit, copy, begin, end, clock) in &raw {
            if clock != GpuClock::Device || copy.is_some() {
                continue;
            }
            let (Some(q), Some(&ts)) = (queue_of.get(&submit), tm.t.get(&submit)) else {
                continue;
            };
            let l = ts as i128 - begin as i128;
            let e = lo.entry(*q).or_insert(l);
            *e = (*e).max(l);
            if let Some(Some(done)) = done_at.get(&submit) {
                let h = *done as i128 - end as i128;
                let e = hi.entry(*q).or_insert(h);
                *e = (*e).min(h);
            }
        }
        for (q, l) in &lo {
            if let Some(h) = hi.get(q) {
                if h < l {
                    tm.notes.push(format!(
                        "GPU times of a queue could not be placed exactly on the host's clock (they are {:.1} µs too long for the host's observations; clock drift or wrap): drawn with the earliest offset",
                        (l - h) as f64 / 1e3
                    ));
                }
            }
        }
        let place = |submit: u64, v: u64, clock: GpuClock| -> Option<(f64, Source)> {
            match clock {
                GpuClock::Host => Some((v as f64, Source::Gpu)),
                GpuClock::Device => {
                    let off = lo.get(queue_of.get(&submit)?)?;
                    Some(((v as i128 + off) as f64, Source::GpuAligned))
                }
            }
        };
        for &(submit, copy, begin, end, clock) in &raw {
            let (Some((b, source)), Some((e, _))) =
                (place(submit, begin, clock), place(submit, end, clock))
            else {
                continue;
            };
            let span = TimeSpan {
                begin: b,
                end: e.max(b),
                source,
            };
            match copy {
                None => {
                    tm.submissions.insert(submit, span);
                }
                Some(c) => {
                    tm.copies.insert((submit, c), span);
                }
            }
        }
        tm
    }

    /// The host time of record `seq` (ns), if it has one.
    pub fn at(&self, seq: u64) -> Option<f64> {
        self.t.get(&seq).map(|t| *t as f64)
    }

    /// The span of a submission: its GPU times, else from its record to the host's first
    /// observation of its completion (the last record's time when never observed).
    pub fn submission(&self, seq: u64, completed: Option<u64>) -> Option<TimeSpan> {
        if let Some(s) = self.submissions.get(&seq) {
            return Some(*s);
        }
        let begin = self.at(seq)?;
        let end = completed
            .and_then(|c| self.at(c))
            .unwrap_or(self.last_t as f64)
            .max(begin);
        Some(TimeSpan {
            begin,
            end,
            source: Source::Host,
        })
    }

    /// Whether some GPU time was measured.
    pub fn has_gpu(&self) -> bool {
        !self.submissions.is_empty()
    }
}

/// Nanoseconds in words: `12.3 ms`, `456 µs`, `789 ns`.
pub fn human_ns(ns: f64) -> String {
    let a = ns.abs();
    if a >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if a >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if a >= 1e3 {
        format!("{:.1} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Header, Record, SubmitBatch, TRACE_FORMAT, TRACE_VERSION};

    fn rec(seq: u64, t: Option<u64>, event: Event) -> Record {
        Record {
            seq,
            thread: 1,
            dev: 0,
            t,
            dur: None,
            event,
        }
    }

    fn trace(records: Vec<Record>) -> Trace {
        Trace {
            header: Header {
                format: TRACE_FORMAT.into(),
                version: TRACE_VERSION,
                context: Default::default(),
                pid: 1,
                started_unix: 0,
                settings: Default::default(),
                clock_origin_ns: Some(1),
            },
            records,
            truncated: false,
        }
    }

    fn submit(seq: u64, t: u64) -> Record {
        rec(
            seq,
            Some(t),
            Event::QueueSubmit {
                queue: 9,
                batches: vec![SubmitBatch::default()],
                fence: Some(7),
            },
        )
    }

    fn fence(seq: u64, t: u64) -> Record {
        rec(seq, Some(t), Event::FenceSignaled { fences: vec![7] })
    }

    fn gpu(seq: u64, t: u64, submit: u64, begin: u64, end: u64, clock: GpuClock) -> Record {
        rec(
            seq,
            Some(t),
            Event::GpuTime {
                queue: 9,
                submit,
                copy: None,
                begin,
                end,
                clock,
            },
        )
    }

    /// Device-clock times are placed so that no submission begins before the host submitted
    /// it, and the one that decides the offset begins exactly then; lengths are kept.
    #[test]
    fn device_clock_is_placed_by_the_host_observations() {
        let t = trace(vec![
            submit(1, 1_000),
            fence(2, 5_000),
            gpu(3, 5_100, 1, 50_300, 52_300, GpuClock::Device),
            submit(4, 10_000),
            fence(5, 14_000),
            gpu(6, 14_100, 4, 59_000, 62_000, GpuClock::Device),
        ]);
        let m = Model::build(&t);
        let tm = Timing::build(&t, &m);
        assert!(tm.timed);
        // Offsets: 1000-50300 = -49300, 10000-59000 = -49000: the larger one holds for both.
        let a = tm.submissions[&1];
        let b = tm.submissions[&4];
        assert_eq!((b.begin, b.end), (10_000.0, 13_000.0));
        assert_eq!((a.begin, a.end), (1_300.0, 3_300.0));
        assert_eq!(a.source, Source::GpuAligned);
        assert!(tm.notes.is_empty(), "{:?}", tm.notes);
    }

    /// The check has teeth: a device time that cannot fit between submission and observed
    /// completion (here: 10 µs of GPU work the host saw done after 4 µs) is said, not hidden.
    #[test]
    fn device_times_that_cannot_fit_the_observations_are_noted() {
        let t = trace(vec![
            submit(1, 1_000),
            fence(2, 5_000),
            gpu(3, 5_100, 1, 50_000, 60_000, GpuClock::Device),
        ]);
        let m = Model::build(&t);
        let tm = Timing::build(&t, &m);
        assert_eq!(tm.notes.len(), 1, "{:?}", tm.notes);
        assert!(tm.notes[0].contains("6.0 µs too long"), "{:?}", tm.notes);
        // Placed at the earliest offset all the same: it begins at its submission.
        assert_eq!(tm.submissions[&1].begin, 1_000.0);
    }

    #[test]
    fn host_clock_is_taken_as_it_is_and_missing_gpu_time_spans_to_the_observation() {
        let t = trace(vec![
            submit(1, 1_000),
            fence(2, 5_000),
            gpu(3, 5_100, 1, 1_200, 4_000, GpuClock::Host),
            submit(4, 10_000),
            fence(5, 14_000),
        ]);
        let m = Model::build(&t);
        let tm = Timing::build(&t, &m);
        let a = tm.submission(1, Some(2)).unwrap();
        assert_eq!((a.begin, a.end, a.source), (1_200.0, 4_000.0, Source::Gpu));
        let b = tm.submission(4, Some(5)).unwrap();
        assert_eq!(
            (b.begin, b.end, b.source),
            (10_000.0, 14_000.0, Source::Host)
        );
    }

    #[test]
    fn a_trace_without_times_is_untimed() {
        let t = trace(vec![
            rec(
                1,
                None,
                Event::QueueSubmit {
                    queue: 9,
                    batches: vec![],
                    fence: None,
                },
            ),
            rec(2, None, Event::DeviceWaitIdle),
        ]);
        let m = Model::build(&t);
        let tm = Timing::build(&t, &m);
        assert!(!tm.timed && tm.submission(1, Some(2)).is_none());
    }

    #[test]
    fn human_ns_picks_the_unit() {
        assert_eq!(human_ns(1.5e9), "1.50 s");
        assert_eq!(human_ns(2.345e6), "2.35 ms");
        assert_eq!(human_ns(4560.0), "4.6 µs");
        assert_eq!(human_ns(789.0), "789 ns");
    }
}
